/* testing/fake_driver — one static function per catalogue entry, each with exactly the signature
 * of its pinned cudaTypedefs.h typedef. Each runs the one prologue (lock, count, injection,
 * initialisation), its body (fk_<name>, in the topic files) and the epilogue. The table is filled
 * from T4A_DRIVER_CATALOG, so an entry without a fake is a compile error, and a fake whose
 * signature differs from the typedef is one too (-Werror). */
#define _GNU_SOURCE
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

#define FK_ENTRY(name, params, args)                       \
  static CUresult CUDAAPI fake_##name params {             \
    fk_call c_;                                            \
    if (!fk_enter(&c_, FK_E_##name)) return c_.result;     \
    return fk_leave(&c_, fk_##name args);                  \
  }

/* ---- initialisation and errors ---- */
FK_ENTRY(cuInit, (unsigned int flags), (c_.f, flags))
FK_ENTRY(cuDriverGetVersion, (int *version), (c_.f, version))

/* The error-name calls are never injected and never sticky; they only count. */
static CUresult CUDAAPI fake_cuGetErrorName(CUresult error, const char **str) {
  fk_count_only(FK_E_cuGetErrorName);
  if (str == NULL) return CUDA_ERROR_INVALID_VALUE;
  *str = fk_error_name(error);
  return *str == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_cuGetErrorString(CUresult error, const char **str) {
  fk_count_only(FK_E_cuGetErrorString);
  if (str == NULL) return CUDA_ERROR_INVALID_VALUE;
  *str = fk_error_string(error);
  return *str == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- devices ---- */
FK_ENTRY(cuDeviceGet, (CUdevice_v1 * device, int ordinal), (c_.f, device, ordinal))
FK_ENTRY(cuDeviceGetCount, (int *count), (c_.f, count))
FK_ENTRY(cuDeviceGetName, (char *name, int len, CUdevice_v1 dev), (c_.f, name, len, dev))
FK_ENTRY(cuDeviceGetUuid, (CUuuid * uuid, CUdevice_v1 dev), (c_.f, uuid, dev))
FK_ENTRY(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice_v1 dev),
         (c_.f, pi, attrib, dev))
FK_ENTRY(cuDeviceTotalMem, (size_t * bytes, CUdevice_v1 dev), (c_.f, bytes, dev))
FK_ENTRY(cuDeviceCanAccessPeer, (int *can, CUdevice_v1 dev, CUdevice_v1 peer),
         (c_.f, can, dev, peer))

/* ---- primary contexts and the current context ---- */
FK_ENTRY(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice_v1 dev), (c_.f, pctx, dev))
FK_ENTRY(cuDevicePrimaryCtxRelease, (CUdevice_v1 dev), (c_.f, dev))
FK_ENTRY(cuDevicePrimaryCtxReset, (CUdevice_v1 dev), (c_.f, dev))
FK_ENTRY(cuDevicePrimaryCtxGetState, (CUdevice_v1 dev, unsigned int *flags, int *active),
         (c_.f, dev, flags, active))
FK_ENTRY(cuCtxGetCurrent, (CUcontext * pctx), (c_.f, pctx))
FK_ENTRY(cuCtxSetCurrent, (CUcontext ctx), (c_.f, ctx))
FK_ENTRY(cuCtxSynchronize, (void), (c_.f))
FK_ENTRY(cuCtxGetDevice, (CUdevice_v1 * device), (c_.f, device))
FK_ENTRY(cuCtxSetLimit, (CUlimit limit, size_t value), (c_.f, limit, value))
FK_ENTRY(cuCtxGetLimit, (size_t * value, CUlimit limit), (c_.f, value, limit))
FK_ENTRY(cuCtxResetPersistingL2Cache, (void), (c_.f))
FK_ENTRY(cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags), (c_.f, peer, flags))
FK_ENTRY(cuCtxGetStreamPriorityRange, (int *least, int *greatest), (c_.f, least, greatest))

/* ---- streams ---- */
FK_ENTRY(cuStreamCreate, (CUstream * ph, unsigned int flags), (c_.f, ph, flags))
FK_ENTRY(cuStreamCreateWithPriority, (CUstream * ph, unsigned int flags, int priority),
         (c_.f, ph, flags, priority))
FK_ENTRY(cuStreamDestroy, (CUstream h), (c_.f, h))
FK_ENTRY(cuStreamSynchronize, (CUstream h), (c_.f, h))
FK_ENTRY(cuStreamQuery, (CUstream h), (c_.f, h))
FK_ENTRY(cuStreamWaitEvent, (CUstream h, CUevent e, unsigned int flags), (c_.f, h, e, flags))
FK_ENTRY(cuStreamSetAttribute, (CUstream h, CUstreamAttrID attr, const CUstreamAttrValue_v1 *v),
         (c_.f, h, attr, v))
FK_ENTRY(cuStreamGetCtx, (CUstream h, CUcontext *pctx), (c_.f, h, pctx))
FK_ENTRY(cuStreamGetFlags, (CUstream h, unsigned int *flags), (c_.f, h, flags))
FK_ENTRY(cuStreamBeginCapture, (CUstream h, CUstreamCaptureMode mode), (c_.f, h, mode))
FK_ENTRY(cuStreamEndCapture, (CUstream h, CUgraph *graph), (c_.f, h, graph))
FK_ENTRY(cuStreamIsCapturing, (CUstream h, CUstreamCaptureStatus *status), (c_.f, h, status))
FK_ENTRY(cuStreamGetCaptureInfo,
         (CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
          const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *num_deps),
         (c_.f, h, status, id, graph, deps, edges, num_deps))

/* ---- events ---- */
FK_ENTRY(cuEventCreate, (CUevent * ph, unsigned int flags), (c_.f, ph, flags))
FK_ENTRY(cuEventDestroy, (CUevent e), (c_.f, e))
FK_ENTRY(cuEventRecord, (CUevent e, CUstream h), (c_.f, e, h))
FK_ENTRY(cuEventRecordWithFlags, (CUevent e, CUstream h, unsigned int flags), (c_.f, e, h, flags))
FK_ENTRY(cuEventQuery, (CUevent e), (c_.f, e))
FK_ENTRY(cuEventSynchronize, (CUevent e), (c_.f, e))
FK_ENTRY(cuEventElapsedTime, (float *ms, CUevent start, CUevent end), (c_.f, ms, start, end))

/* ---- memory pools and stream-ordered allocation ---- */
FK_ENTRY(cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps_v1 *props),
         (c_.f, pool, props))
FK_ENTRY(cuMemPoolDestroy, (CUmemoryPool pool), (c_.f, pool))
FK_ENTRY(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
         (c_.f, pool, attr, value))
FK_ENTRY(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
         (c_.f, pool, attr, value))
FK_ENTRY(cuMemPoolSetAccess, (CUmemoryPool pool, const CUmemAccessDesc_v1 *map, size_t count),
         (c_.f, pool, map, count))
FK_ENTRY(cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep), (c_.f, pool, keep))
FK_ENTRY(cuMemAllocFromPoolAsync,
         (CUdeviceptr_v2 * dptr, size_t bytes, CUmemoryPool pool, CUstream h),
         (c_.f, dptr, bytes, pool, h))
FK_ENTRY(cuMemAllocAsync, (CUdeviceptr_v2 * dptr, size_t bytes, CUstream h),
         (c_.f, dptr, bytes, h))
FK_ENTRY(cuMemFreeAsync, (CUdeviceptr_v2 ptr, CUstream h), (c_.f, ptr, h))

/* ---- synchronous memory, fills and copies ---- */
FK_ENTRY(cuMemAlloc, (CUdeviceptr_v2 * dptr, size_t bytes), (c_.f, dptr, bytes))
FK_ENTRY(cuMemFree, (CUdeviceptr_v2 ptr), (c_.f, ptr))
FK_ENTRY(cuMemGetInfo, (size_t * free_bytes, size_t *total_bytes),
         (c_.f, free_bytes, total_bytes))
FK_ENTRY(cuMemsetD8Async, (CUdeviceptr_v2 dst, unsigned char value, size_t n, CUstream h),
         (c_.f, dst, value, n, h))
FK_ENTRY(cuMemsetD16Async, (CUdeviceptr_v2 dst, unsigned short value, size_t n, CUstream h),
         (c_.f, dst, value, n, h))
FK_ENTRY(cuMemsetD32Async, (CUdeviceptr_v2 dst, unsigned int value, size_t n, CUstream h),
         (c_.f, dst, value, n, h))
FK_ENTRY(cuMemcpyHtoDAsync, (CUdeviceptr_v2 dst, const void *src, size_t bytes, CUstream h),
         (c_.f, dst, src, bytes, h))
FK_ENTRY(cuMemcpyDtoHAsync, (void *dst, CUdeviceptr_v2 src, size_t bytes, CUstream h),
         (c_.f, dst, src, bytes, h))
FK_ENTRY(cuMemcpyDtoDAsync, (CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes, CUstream h),
         (c_.f, dst, src, bytes, h))
FK_ENTRY(cuMemcpyPeerAsync,
         (CUdeviceptr_v2 dst, CUcontext dst_ctx, CUdeviceptr_v2 src, CUcontext src_ctx,
          size_t bytes, CUstream h),
         (c_.f, dst, dst_ctx, src, src_ctx, bytes, h))
FK_ENTRY(cuMemcpyAsync, (CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t bytes, CUstream h),
         (c_.f, dst, src, bytes, h))

/* ---- host memory ---- */
FK_ENTRY(cuMemHostAlloc, (void **pp, size_t bytes, unsigned int flags), (c_.f, pp, bytes, flags))
FK_ENTRY(cuMemFreeHost, (void *p), (c_.f, p))
FK_ENTRY(cuMemHostGetDevicePointer, (CUdeviceptr_v2 * dptr, void *p, unsigned int flags),
         (c_.f, dptr, p, flags))
FK_ENTRY(cuMemHostRegister, (void *p, size_t bytes, unsigned int flags), (c_.f, p, bytes, flags))
FK_ENTRY(cuMemHostUnregister, (void *p), (c_.f, p))
FK_ENTRY(cuPointerGetAttribute, (void *data, CUpointer_attribute attr, CUdeviceptr_v2 ptr),
         (c_.f, data, attr, ptr))

/* ---- modules and functions ---- */
FK_ENTRY(cuModuleLoadData, (CUmodule * mod, const void *image), (c_.f, mod, image))
FK_ENTRY(cuModuleLoadDataEx,
         (CUmodule * mod, const void *image, unsigned int num_options, CUjit_option *options,
          void **values),
         (c_.f, mod, image, num_options, options, values))
FK_ENTRY(cuModuleUnload, (CUmodule mod), (c_.f, mod))
FK_ENTRY(cuModuleGetFunction, (CUfunction * func, CUmodule mod, const char *name),
         (c_.f, func, mod, name))
FK_ENTRY(cuModuleGetGlobal, (CUdeviceptr * dptr, size_t *bytes, CUmodule mod, const char *name),
         (c_.f, dptr, bytes, mod, name))
FK_ENTRY(cuFuncGetAttribute, (int *pi, CUfunction_attribute attr, CUfunction func),
         (c_.f, pi, attr, func))
FK_ENTRY(cuFuncSetAttribute, (CUfunction func, CUfunction_attribute attr, int value),
         (c_.f, func, attr, value))
FK_ENTRY(cuFuncGetParamInfo, (CUfunction func, size_t index, size_t *offset, size_t *size),
         (c_.f, func, index, offset, size))

/* ---- launches ---- */
FK_ENTRY(cuLaunchKernel,
         (CUfunction func, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
          unsigned int by, unsigned int bz, unsigned int shared, CUstream h, void **params,
          void **extra),
         (c_.f, func, gx, gy, gz, bx, by, bz, shared, h, params, extra))
FK_ENTRY(cuLaunchKernelEx,
         (const CUlaunchConfig *config, CUfunction func, void **params, void **extra),
         (c_.f, config, func, params, extra))

/* ---- host functions ---- */
FK_ENTRY(cuLaunchHostFunc, (CUstream h, CUhostFn fn, void *user), (c_.f, h, fn, user))

/* ---- graphs ---- */
FK_ENTRY(cuGraphCreate, (CUgraph * graph, unsigned int flags), (c_.f, graph, flags))
FK_ENTRY(cuGraphAddKernelNode,
         (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t num_deps,
          const CUDA_KERNEL_NODE_PARAMS_v2 *params),
         (c_.f, node, graph, deps, num_deps, params))
FK_ENTRY(cuGraphInstantiateWithFlags,
         (CUgraphExec * exec, CUgraph graph, unsigned long long flags), (c_.f, exec, graph, flags))
FK_ENTRY(cuGraphLaunch, (CUgraphExec exec, CUstream h), (c_.f, exec, h))
FK_ENTRY(cuGraphUpload, (CUgraphExec exec, CUstream h), (c_.f, exec, h))
FK_ENTRY(cuGraphDestroy, (CUgraph graph), (c_.f, graph))
FK_ENTRY(cuGraphExecDestroy, (CUgraphExec exec), (c_.f, exec))
FK_ENTRY(cuGraphExecUpdate,
         (CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info),
         (c_.f, exec, graph, info))
FK_ENTRY(cuGraphExecKernelNodeSetParams,
         (CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 *params),
         (c_.f, exec, node, params))
FK_ENTRY(cuGraphExecMemsetNodeSetParams,
         (CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS_v1 *params,
          CUcontext ctx),
         (c_.f, exec, node, params, ctx))
FK_ENTRY(cuGraphGetNodes, (CUgraph graph, CUgraphNode *nodes, size_t *num),
         (c_.f, graph, nodes, num))

/* ---- occupancy ---- */
FK_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor,
         (int *num, CUfunction func, int block, size_t dyn), (c_.f, num, func, block, dyn))
FK_ENTRY(cuOccupancyMaxPotentialBlockSize,
         (int *min_grid, int *block, CUfunction func, CUoccupancyB2DSize to_dyn, size_t dyn,
          int limit),
         (c_.f, min_grid, block, func, to_dyn, dyn, limit))
FK_ENTRY(cuOccupancyMaxPotentialClusterSize,
         (int *size, CUfunction func, const CUlaunchConfig *config), (c_.f, size, func, config))

void fk_fill_table(t4a_driver_table *table) {
  static const t4a_driver_table k_table = {
#define FK_TABLE_SLOT_(name, version, need) .name = fake_##name,
      T4A_DRIVER_CATALOG(FK_TABLE_SLOT_)
#undef FK_TABLE_SLOT_
  };
  memcpy(table, &k_table, sizeof *table);
}
