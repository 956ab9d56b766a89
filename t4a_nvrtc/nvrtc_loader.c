/* The NVRTC loader: exact sonames, the catalogue resolver, capabilities. The only file that
 * touches NVRTC by name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_nvrtc/nvrtc_table.h"

typedef struct nvrtc_entry {
  const char *name;
  int required;
  size_t offset;
} nvrtc_entry;

static const nvrtc_entry k_entries[] = {
#define T4A_NVRTC_NEED_REQUIRED 1
#define T4A_NVRTC_NEED_OPTIONAL 0
#define T4A_NVRTC_ENTRY_(name, need) {#name, T4A_NVRTC_NEED_##need, offsetof(t4a_nvrtc_table, name)},
    T4A_NVRTC_CATALOG(T4A_NVRTC_ENTRY_)
#undef T4A_NVRTC_ENTRY_
};

/* RTLD_NODELETE: NVRTC is never unmapped once loaded. It keeps process-lifetime state (its own
 * C++ runtime pools, threads), and unloading it buys nothing; releasing the last t4a_nvrtc_lib
 * frees t4a's object only. */
static void *try_open(const char *path) {
  if (t4a_fault_sim(T4A_FAULT_DLOPEN)) return NULL;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

static void lib_free(t4a_nvrtc_lib *lib) {
  if (lib->dl != NULL) dlclose(lib->dl);
  free(lib);
}

/* Opens the first candidate that loads; records the tried list in `tried`. */
static void *open_candidates(const char *explicit_path, char *origin, size_t origin_size,
                             char *tried, size_t tried_size) {
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *env_cuda = getenv("CUDA_PATH");
  const char *dirs[] = {NULL, env_cuda, "/usr/local/cuda"};
  size_t used = 0;
  tried[0] = '\0';
  if (explicit_path != NULL) {
    snprintf(origin, origin_size, "%s", explicit_path);
    void *h = try_open(explicit_path);
    if (h == NULL) {
      const char *why = dlerror();
      snprintf(tried, tried_size, "%s: %s", explicit_path, why != NULL ? why : "simulated failure");
    }
    return h;
  }
  for (size_t s = 0; s < sizeof sonames / sizeof sonames[0]; s++) {
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
      char path[256]; /* fits t4a_nvrtc_lib.origin */
      if (d == 0) {
        snprintf(path, sizeof path, "%s", sonames[s]);
      } else if (dirs[d] != NULL && dirs[d][0] != '\0') {
        snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], sonames[s]);
      } else {
        continue;
      }
      void *h = try_open(path);
      if (h != NULL) {
        snprintf(origin, origin_size, "%s", path);
        return h;
      }
      if (used < tried_size) {
        used += (size_t)snprintf(tried + used, tried_size - used, "%s%s", used ? ", " : "", path);
      }
    }
  }
  return NULL;
}

t4a_status t4a_nvrtc_lib_open(const t4a_nvrtc_lib_options *options, t4a_nvrtc_lib **out) {
  if (out == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  const char *path = options != NULL ? options->library_path : NULL;
  if (path == NULL || path[0] == '\0') path = getenv("T4A_LIBNVRTC_PATH");
  if (path != NULL && path[0] == '\0') path = NULL;

  t4a_nvrtc_lib *lib = t4a_host_calloc(1, sizeof *lib);
  if (lib == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&lib->refs, 1);
  char tried[768];
  t4a_status st;
  lib->dl = open_candidates(path, lib->origin, sizeof lib->origin, tried, sizeof tried);
  if (lib->dl == NULL) {
    st = t4a_error_set(T4A_NVRTC_NOT_FOUND, "dlopen", 0, NULL, 0,
                       "cannot load NVRTC (tried %s); install the CUDA toolkit's NVRTC or set "
                       "T4A_LIBNVRTC_PATH",
                       tried);
    goto fail;
  }
  for (size_t i = 0; i < sizeof k_entries / sizeof k_entries[0]; i++) {
    void *fn = t4a_fault_sim(T4A_FAULT_DLSYM) ? NULL : dlsym(lib->dl, k_entries[i].name);
    *(void **)((char *)&lib->t + k_entries[i].offset) = fn;
    if (fn == NULL && k_entries[i].required) {
      st = t4a_error_set(T4A_NVRTC_SYMBOL_MISSING, k_entries[i].name, 0, NULL, 0,
                         "%s has no %s; t4a needs NVRTC 12.0 or newer", lib->origin,
                         k_entries[i].name);
      goto fail;
    }
  }
  nvrtcResult r = lib->t.nvrtcVersion(&lib->major, &lib->minor);
  if (r != NVRTC_SUCCESS) {
    st = t4a_error_set(T4A_NVRTC_ERROR, "nvrtcVersion", (int)r, lib->t.nvrtcGetErrorString(r),
                       0, "nvrtcVersion failed");
    goto fail;
  }
  if (lib->t.nvrtcGetCUBINSize != NULL && lib->t.nvrtcGetCUBIN != NULL) {
    lib->caps |= T4A_NVRTC_CAP_CUBIN;
  }
  if (lib->t.nvrtcGetLTOIRSize != NULL && lib->t.nvrtcGetLTOIR != NULL) {
    lib->caps |= T4A_NVRTC_CAP_LTOIR;
  }
  if (lib->t.nvrtcGetPCHHeapSize != NULL && lib->t.nvrtcSetPCHHeapSize != NULL &&
      lib->t.nvrtcGetPCHCreateStatus != NULL && lib->t.nvrtcGetPCHHeapSizeRequired != NULL) {
    lib->caps |= T4A_NVRTC_CAP_PCH;
  }
  if (lib->t.nvrtcGetNumSupportedArchs != NULL && lib->t.nvrtcGetSupportedArchs != NULL) {
    lib->caps |= T4A_NVRTC_CAP_SUPPORTED_ARCHS;
  }
  *out = lib;
  return T4A_OK;
fail:
  lib_free(lib);
  return st;
}

void t4a_nvrtc_lib_retain(t4a_nvrtc_lib *lib) {
  if (lib != NULL) atomic_fetch_add_explicit(&lib->refs, 1, memory_order_relaxed);
}

void t4a_nvrtc_lib_release(t4a_nvrtc_lib *lib) {
  if (lib == NULL) return;
  if (atomic_fetch_sub_explicit(&lib->refs, 1, memory_order_acq_rel) == 1) lib_free(lib);
}

void t4a_nvrtc_lib_version(const t4a_nvrtc_lib *lib, int *out_major, int *out_minor) {
  if (out_major != NULL) *out_major = lib != NULL ? lib->major : 0;
  if (out_minor != NULL) *out_minor = lib != NULL ? lib->minor : 0;
}

uint32_t t4a_nvrtc_lib_caps(const t4a_nvrtc_lib *lib) { return lib != NULL ? lib->caps : 0; }
const char *t4a_nvrtc_lib_origin(const t4a_nvrtc_lib *lib) {
  return lib != NULL ? lib->origin : "";
}

t4a_status t4a_nvrtc_lib_supported_archs(const t4a_nvrtc_lib *lib, int *out, size_t capacity,
                                         size_t *out_num) {
  if (out_num != NULL) *out_num = 0;
  if (lib == NULL || out_num == NULL || (out == NULL && capacity > 0)) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lib, out or out_num is NULL");
  }
  if (!(lib->caps & T4A_NVRTC_CAP_SUPPORTED_ARCHS)) {
    return t4a_error_set(T4A_UNSUPPORTED, "nvrtcGetSupportedArchs", 0, NULL, 0,
                         "%s cannot list its architectures", lib->origin);
  }
  int n = 0;
  nvrtcResult r = lib->t.nvrtcGetNumSupportedArchs(&n);
  if (r != NVRTC_SUCCESS || n < 0) {
    return t4a_error_set(T4A_NVRTC_ERROR, "nvrtcGetNumSupportedArchs", (int)r,
                         lib->t.nvrtcGetErrorString(r), 0, "nvrtcGetNumSupportedArchs failed");
  }
  int *all = t4a_host_calloc((size_t)n, sizeof *all);
  if (all == NULL) return T4A_HOST_OUT_OF_MEMORY;
  r = lib->t.nvrtcGetSupportedArchs(all);
  if (r != NVRTC_SUCCESS) {
    free(all);
    return t4a_error_set(T4A_NVRTC_ERROR, "nvrtcGetSupportedArchs", (int)r,
                         lib->t.nvrtcGetErrorString(r), 0, "nvrtcGetSupportedArchs failed");
  }
  for (size_t i = 0; i < (size_t)n && i < capacity; i++) out[i] = all[i];
  *out_num = (size_t)n;
  free(all);
  return T4A_OK;
}
