/* The driver entry-point catalogue: the one list from which the driver table, the resolver, the
 * fake driver's table and the catalogue test are generated.
 *
 * X(name, version, need): `name` is the base name passed to cuGetProcAddress_v2, `version` the ABI
 * version whose cudaTypedefs.h typedef (PFN_<name>_v<version>) is the signature t4a calls through,
 * and `need` is REQUIRED (the load fails without it) or OPTIONAL (the load goes on; the slot stays
 * NULL, and a caller checks it first or reports a capability). Required means used: an entry is
 * REQUIRED only if library code calls it, which scripts/check_catalog.py (drift lane) checks;
 * entries kept for the fake, the tests and later callers are OPTIONAL until a caller needs them.
 * Pin each version to the signature called, never to the driver's own version: asking for
 * cuCtxSynchronize at 13000 returns a variant that takes a CUcontext (docs/design.md §2).
 *
 * Private to t4a: included through t4a_ctx/driver_table.h. Append entries; keep versions pinned. */
#ifndef T4A_CTX_DRIVER_CATALOG_H_
#define T4A_CTX_DRIVER_CATALOG_H_

#define T4A_DRIVER_CATALOG(X)                        \
  /* initialisation and errors */                    \
  X(cuInit, 2000, REQUIRED)                          \
  X(cuDriverGetVersion, 2020, REQUIRED)              \
  X(cuGetErrorName, 6000, REQUIRED)                  \
  X(cuGetErrorString, 6000, REQUIRED)                \
  /* devices */                                      \
  X(cuDeviceGet, 2000, REQUIRED)                     \
  X(cuDeviceGetCount, 2000, REQUIRED)                \
  X(cuDeviceGetName, 2000, REQUIRED)                 \
  X(cuDeviceGetUuid, 11040, REQUIRED)                \
  X(cuDeviceGetAttribute, 2000, REQUIRED)            \
  X(cuDeviceTotalMem, 3020, REQUIRED)                \
  X(cuDeviceCanAccessPeer, 4000, REQUIRED)           \
  /* primary contexts and the current context */     \
  X(cuDevicePrimaryCtxRetain, 7000, REQUIRED)        \
  X(cuDevicePrimaryCtxRelease, 11000, REQUIRED)      \
  X(cuDevicePrimaryCtxReset, 11000, REQUIRED)        \
  X(cuDevicePrimaryCtxGetState, 7000, REQUIRED)      \
  X(cuCtxGetCurrent, 4000, REQUIRED)                 \
  X(cuCtxSetCurrent, 4000, REQUIRED)                 \
  X(cuCtxSynchronize, 2000, OPTIONAL)                \
  X(cuCtxGetDevice, 2000, OPTIONAL)                  \
  X(cuCtxSetLimit, 3010, REQUIRED)                   \
  X(cuCtxGetLimit, 3010, REQUIRED)                   \
  X(cuCtxResetPersistingL2Cache, 11000, REQUIRED)    \
  X(cuCtxEnablePeerAccess, 4000, REQUIRED)           \
  X(cuCtxGetStreamPriorityRange, 5050, REQUIRED)     \
  /* streams */                                      \
  X(cuStreamCreate, 2000, OPTIONAL)                  \
  X(cuStreamCreateWithPriority, 5050, REQUIRED)      \
  X(cuStreamDestroy, 4000, REQUIRED)                 \
  X(cuStreamSynchronize, 2000, REQUIRED)             \
  X(cuStreamQuery, 2000, REQUIRED)                   \
  X(cuStreamWaitEvent, 3020, REQUIRED)               \
  X(cuStreamSetAttribute, 11000, REQUIRED)           \
  X(cuStreamGetCtx, 9020, OPTIONAL)                  \
  X(cuStreamGetFlags, 5050, OPTIONAL)                \
  X(cuStreamBeginCapture, 10010, REQUIRED)           \
  X(cuStreamEndCapture, 10000, REQUIRED)             \
  X(cuStreamIsCapturing, 10000, REQUIRED)            \
  /* events */                                       \
  X(cuEventCreate, 2000, REQUIRED)                   \
  X(cuEventDestroy, 4000, REQUIRED)                  \
  X(cuEventRecord, 2000, REQUIRED)                   \
  X(cuEventRecordWithFlags, 11010, REQUIRED)         \
  X(cuEventQuery, 2000, REQUIRED)                    \
  X(cuEventSynchronize, 2000, REQUIRED)              \
  X(cuEventElapsedTime, 2000, REQUIRED)              \
  /* memory pools and stream-ordered allocation */   \
  X(cuMemPoolCreate, 11020, REQUIRED)                \
  X(cuMemPoolDestroy, 11020, REQUIRED)               \
  X(cuMemPoolSetAttribute, 11020, REQUIRED)          \
  X(cuMemPoolGetAttribute, 11020, REQUIRED)          \
  X(cuMemPoolSetAccess, 11020, REQUIRED)             \
  X(cuMemPoolTrimTo, 11020, REQUIRED)                \
  X(cuMemAllocFromPoolAsync, 11020, REQUIRED)        \
  X(cuMemAllocAsync, 11020, OPTIONAL)                \
  X(cuMemFreeAsync, 11020, REQUIRED)                 \
  /* synchronous memory, fills and copies */         \
  X(cuMemAlloc, 3020, OPTIONAL)                      \
  X(cuMemFree, 3020, OPTIONAL)                       \
  X(cuMemGetInfo, 3020, REQUIRED)                    \
  X(cuMemsetD8Async, 3020, REQUIRED)                 \
  X(cuMemsetD16Async, 3020, REQUIRED)                \
  X(cuMemsetD32Async, 3020, REQUIRED)                \
  X(cuMemcpyHtoDAsync, 3020, REQUIRED)               \
  X(cuMemcpyDtoHAsync, 3020, REQUIRED)               \
  X(cuMemcpyDtoDAsync, 3020, REQUIRED)               \
  X(cuMemcpyPeerAsync, 4000, OPTIONAL)               \
  X(cuMemcpyAsync, 4000, OPTIONAL)                   \
  /* host memory */                                  \
  X(cuMemHostAlloc, 2020, REQUIRED)                  \
  X(cuMemFreeHost, 2000, REQUIRED)                   \
  X(cuMemHostGetDevicePointer, 3020, REQUIRED)       \
  X(cuMemHostRegister, 6050, REQUIRED)               \
  X(cuMemHostUnregister, 4000, REQUIRED)             \
  X(cuPointerGetAttribute, 4000, OPTIONAL)           \
  /* modules and functions */                        \
  X(cuModuleLoadData, 2000, OPTIONAL)                \
  X(cuModuleLoadDataEx, 2010, REQUIRED)              \
  X(cuModuleUnload, 2000, REQUIRED)                  \
  X(cuModuleGetFunction, 2000, REQUIRED)             \
  X(cuModuleGetGlobal, 3020, REQUIRED)               \
  X(cuFuncGetAttribute, 2020, REQUIRED)              \
  X(cuFuncSetAttribute, 9000, REQUIRED)              \
  X(cuFuncGetParamInfo, 12040, OPTIONAL)             \
  /* launches */                                     \
  X(cuLaunchKernel, 4000, REQUIRED)                  \
  X(cuLaunchKernelEx, 11060, OPTIONAL)               \
  /* host functions on a stream */                   \
  X(cuLaunchHostFunc, 10000, REQUIRED)               \
  /* graphs */                                       \
  X(cuGraphCreate, 10000, REQUIRED)                  \
  X(cuGraphAddKernelNode, 12000, REQUIRED)           \
  X(cuGraphInstantiateWithFlags, 11040, REQUIRED)    \
  X(cuGraphLaunch, 10000, REQUIRED)                  \
  X(cuGraphUpload, 11010, REQUIRED)                  \
  X(cuGraphDestroy, 10000, REQUIRED)                 \
  X(cuGraphExecDestroy, 10000, REQUIRED)             \
  X(cuGraphExecUpdate, 12000, REQUIRED)              \
  X(cuGraphExecKernelNodeSetParams, 12000, REQUIRED) \
  X(cuGraphExecMemsetNodeSetParams, 10020, REQUIRED) \
  X(cuGraphGetNodes, 10000, OPTIONAL)               \
  /* capture introspection (launch chains: the node a captured fire added) */ \
  X(cuStreamGetCaptureInfo, 12030, OPTIONAL)                                        \
  /* occupancy (capabilities: occupancy queries, cooperative and cluster launches) */ \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050, OPTIONAL)                    \
  X(cuOccupancyMaxPotentialBlockSize, 6050, OPTIONAL)                               \
  X(cuOccupancyMaxPotentialClusterSize, 11070, OPTIONAL)

/* The oldest driver t4a accepts: cuGetProcAddress_v2 (the resolver) first shipped with CUDA 12.0. */
#define T4A_DRIVER_MIN_VERSION 12000

#endif /* T4A_CTX_DRIVER_CATALOG_H_ */
