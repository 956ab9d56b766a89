/* The nvJitLink entry-point catalogue. X(name, symbol, need): `name` is the documented function
 * and the table slot, `symbol` the versioned export t4a resolves (nvJitLink.h's inline wrappers
 * call these: the _13_0 suffix pins the ABI the slot is called through), and `need` REQUIRED
 * (the load is refused without it) or OPTIONAL (the slot may stay NULL). Required means used:
 * every REQUIRED entry has a caller in library code (scripts/check_catalog.py). Signatures come
 * from nvJitLink.h itself (the slot type is a pointer to the declared symbol's type; nothing is
 * linked). Append entries; keep the symbols pinned. */
#ifndef T4A_NVRTC_JITLINK_CATALOG_H_
#define T4A_NVRTC_JITLINK_CATALOG_H_

#define T4A_JITLINK_CATALOG(X)                                                    \
  X(nvJitLinkVersion, nvJitLinkVersion, REQUIRED)                                 \
  X(nvJitLinkCreate, __nvJitLinkCreate_13_0, REQUIRED)                            \
  X(nvJitLinkDestroy, __nvJitLinkDestroy_13_0, REQUIRED)                          \
  X(nvJitLinkAddData, __nvJitLinkAddData_13_0, REQUIRED)                          \
  X(nvJitLinkComplete, __nvJitLinkComplete_13_0, REQUIRED)                        \
  X(nvJitLinkGetLinkedCubinSize, __nvJitLinkGetLinkedCubinSize_13_0, REQUIRED)    \
  X(nvJitLinkGetLinkedCubin, __nvJitLinkGetLinkedCubin_13_0, REQUIRED)            \
  X(nvJitLinkGetErrorLogSize, __nvJitLinkGetErrorLogSize_13_0, REQUIRED)          \
  X(nvJitLinkGetErrorLog, __nvJitLinkGetErrorLog_13_0, REQUIRED)                  \
  X(nvJitLinkGetInfoLogSize, __nvJitLinkGetInfoLogSize_13_0, REQUIRED)            \
  X(nvJitLinkGetInfoLog, __nvJitLinkGetInfoLog_13_0, REQUIRED)                    \
  X(nvJitLinkAddFile, __nvJitLinkAddFile_13_0, OPTIONAL)                          \
  X(nvJitLinkGetLinkedPtxSize, __nvJitLinkGetLinkedPtxSize_13_0, OPTIONAL)        \
  X(nvJitLinkGetLinkedPtx, __nvJitLinkGetLinkedPtx_13_0, OPTIONAL)

#endif /* T4A_NVRTC_JITLINK_CATALOG_H_ */
