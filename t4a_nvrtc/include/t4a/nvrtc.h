/* t4a/nvrtc.h — NVRTC, loaded at run time.
 *
 * Layer: t4a_nvrtc, standalone: it depends only on the status vocabulary (t4a_ctx:status) and
 * never on the driver loader, so a program can take it alone. This header compiles without the
 * CUDA toolkit.
 *
 * Today: loading NVRTC by exact soname and reporting its version and capabilities. Compile
 * requests, artifacts and the artifact cache arrive with their own issue.
 *
 * Thread-safety: a loaded library may be used and released from any thread. */
#ifndef T4A_NVRTC_H_
#define T4A_NVRTC_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct t4a_nvrtc_lib t4a_nvrtc_lib;

/* Capabilities: optional NVRTC entry points that resolved. */
#define T4A_NVRTC_CAP_CUBIN (1u << 0)           /* nvrtcGetCUBIN */
#define T4A_NVRTC_CAP_LTOIR (1u << 1)           /* nvrtcGetLTOIR */
#define T4A_NVRTC_CAP_PCH (1u << 2)             /* precompiled-header heap controls */
#define T4A_NVRTC_CAP_SUPPORTED_ARCHS (1u << 3) /* nvrtcGetSupportedArchs */

typedef struct t4a_nvrtc_lib_options {
  /* Library to dlopen. NULL: $T4A_LIBNVRTC_PATH if set, else the exact sonames libnvrtc.so.13,
   * then libnvrtc.so.12, each first on the loader's path and then under $CUDA_PATH/lib64 and
   * /usr/local/cuda/lib64. Never the .alt variant unless named here. */
  const char *library_path;
} t4a_nvrtc_lib_options;
#define T4A_NVRTC_LIB_OPTIONS_INIT {NULL}

/* Loads NVRTC and resolves its catalogue. Statuses: NVRTC_NOT_FOUND (every candidate failed; the
 * message lists them), NVRTC_SYMBOL_MISSING (a required entry is missing: named),
 * HOST_OUT_OF_MEMORY. A partial load is torn down. */
T4A_MUST_USE t4a_status t4a_nvrtc_lib_open(const t4a_nvrtc_lib_options *options,
                                           t4a_nvrtc_lib **out);
void t4a_nvrtc_lib_retain(t4a_nvrtc_lib *lib);
/* Drops a reference; the last unloads the library. Accepts NULL. */
void t4a_nvrtc_lib_release(t4a_nvrtc_lib *lib);

/* NVRTC's version (nvrtcVersion). */
void t4a_nvrtc_lib_version(const t4a_nvrtc_lib *lib, int *out_major, int *out_minor);
/* T4A_NVRTC_CAP_* bits. */
uint32_t t4a_nvrtc_lib_caps(const t4a_nvrtc_lib *lib);
/* The path that was opened. */
const char *t4a_nvrtc_lib_origin(const t4a_nvrtc_lib *lib);
/* The SM architectures this NVRTC can target (e.g. 75, 80, 90). Writes at most `capacity`
 * values into out and their total number into *out_num. UNSUPPORTED without the capability. */
T4A_MUST_USE t4a_status t4a_nvrtc_lib_supported_archs(const t4a_nvrtc_lib *lib, int *out,
                                                      size_t capacity, size_t *out_num);

#ifdef __cplusplus
}
#endif
#endif /* T4A_NVRTC_H_ */
