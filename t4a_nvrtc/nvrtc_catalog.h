/* The NVRTC entry-point catalogue. X(name, need): REQUIRED entries must resolve or the load is
 * refused; OPTIONAL ones become capabilities. Required means used: every REQUIRED entry has a
 * caller in library code (scripts/check_catalog.py, drift lane). Signatures come from nvrtc.h
 * itself (the slot type is a pointer to the declared function's type; nothing is linked). */
#ifndef T4A_NVRTC_NVRTC_CATALOG_H_
#define T4A_NVRTC_NVRTC_CATALOG_H_

#define T4A_NVRTC_CATALOG(X)                \
  X(nvrtcGetErrorString, REQUIRED)          \
  X(nvrtcVersion, REQUIRED)                 \
  X(nvrtcCreateProgram, REQUIRED)           \
  X(nvrtcDestroyProgram, REQUIRED)          \
  X(nvrtcCompileProgram, REQUIRED)          \
  X(nvrtcGetPTXSize, REQUIRED)              \
  X(nvrtcGetPTX, REQUIRED)                  \
  X(nvrtcGetProgramLogSize, REQUIRED)       \
  X(nvrtcGetProgramLog, REQUIRED)           \
  X(nvrtcAddNameExpression, REQUIRED)       \
  X(nvrtcGetLoweredName, REQUIRED)          \
  X(nvrtcGetNumSupportedArchs, OPTIONAL)    \
  X(nvrtcGetSupportedArchs, OPTIONAL)       \
  X(nvrtcGetCUBINSize, OPTIONAL)            \
  X(nvrtcGetCUBIN, OPTIONAL)                \
  X(nvrtcGetLTOIRSize, OPTIONAL)            \
  X(nvrtcGetLTOIR, OPTIONAL)                \
  X(nvrtcGetPCHHeapSize, OPTIONAL)          \
  X(nvrtcSetPCHHeapSize, OPTIONAL)          \
  X(nvrtcGetPCHCreateStatus, OPTIONAL)      \
  X(nvrtcGetPCHHeapSizeRequired, OPTIONAL)

#endif /* T4A_NVRTC_NVRTC_CATALOG_H_ */
