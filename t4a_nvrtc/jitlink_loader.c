/* The nvJitLink loader: the exact soname, the catalogue resolver, the build identity, result
 * names and the status mapping, and the constructor from a ready table. The only file that
 * resolves nvJitLink entry points by name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/jitlink_table.h"

typedef struct jitlink_entry {
  const char *name;   /* the documented name (diagnostics) */
  const char *symbol; /* the versioned export resolved */
  int required;
  size_t offset;
} jitlink_entry;

static const jitlink_entry k_entries[] = {
#define T4A_JITLINK_NEED_REQUIRED 1
#define T4A_JITLINK_NEED_OPTIONAL 0
#define T4A_JITLINK_ENTRY_(name, symbol, need) \
  {#name, #symbol, T4A_JITLINK_NEED_##need, offsetof(t4a_jitlink_table, name)},
    T4A_JITLINK_CATALOG(T4A_JITLINK_ENTRY_)
#undef T4A_JITLINK_ENTRY_
};
#define NUM_ENTRIES (sizeof k_entries / sizeof k_entries[0])

static void **slot(t4a_jitlink_table *t, size_t i) {
  return (void **)((char *)t + k_entries[i].offset);
}

/* RTLD_NODELETE: as NVRTC (nvrtc_loader.c), nvJitLink keeps process-lifetime state; releasing the
 * last lib frees t4a's object only. */
static void *try_open(const char *path) {
  if (t4a_fault_sim(T4A_FAULT_DLOPEN)) return NULL;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

static void lib_free(t4a_jitlink_lib *lib) {
  if (lib->dl != NULL) dlclose(lib->dl);
  free(lib);
}

/* Opens the first candidate that loads; records the tried list in `tried`. */
static void *open_candidates(const char *explicit_path, char *origin, size_t origin_size,
                             char *tried, size_t tried_size) {
  static const char soname[] = "libnvJitLink.so.13";
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
  for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
    char path[256]; /* fits t4a_jitlink_lib.origin */
    if (d == 0) {
      snprintf(path, sizeof path, "%s", soname);
    } else if (dirs[d] != NULL && dirs[d][0] != '\0') {
      snprintf(path, sizeof path, "%.200s/lib64/%s", dirs[d], soname);
    } else {
      continue;
    }
    void *h = try_open(path);
    if (h != NULL) {
      snprintf(origin, origin_size, "%s", path);
      return h;
    }
    (void)dlerror();
    if (used < tried_size) {
      used += (size_t)snprintf(tried + used, tried_size - used, "%s%s", used ? ", " : "", path);
    }
  }
  return NULL;
}

/* ---- Build identity (the GNU build-id of the loaded object: t4a_nvrtc_loaded_object) ------- */

static void compute_build_identity(t4a_jitlink_lib *lib) {
  char desc[PATH_MAX + 96];
  char resolved[PATH_MAX], hex[129];
  if (!t4a_nvrtc_loaded_object(lib->dl, NULL, 0, resolved, sizeof resolved, hex, sizeof hex)) {
    snprintf(desc, sizeof desc, "unknown");
  } else {
    struct stat st;
    if (hex[0] != '\0') {
      snprintf(desc, sizeof desc, "build-id %s", hex);
    } else if (stat(resolved, &st) == 0) {
      snprintf(desc, sizeof desc, "file %s size %lld mtime %lld.%09ld", resolved,
               (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    } else {
      snprintf(desc, sizeof desc, "file %s", resolved);
    }
  }
  snprintf(lib->build_identity, sizeof lib->build_identity, "nvjitlink %u.%u %s", lib->major,
           lib->minor, desc);
}

/* ---- Results and statuses ----------------------------------------------------------------- */

const char *t4a_jitlink_result_name(nvJitLinkResult r) {
  switch (r) {
#define N_(x) \
  case x:     \
    return #x;
    N_(NVJITLINK_SUCCESS)
    N_(NVJITLINK_ERROR_UNRECOGNIZED_OPTION)
    N_(NVJITLINK_ERROR_MISSING_ARCH)
    N_(NVJITLINK_ERROR_INVALID_INPUT)
    N_(NVJITLINK_ERROR_PTX_COMPILE)
    N_(NVJITLINK_ERROR_NVVM_COMPILE)
    N_(NVJITLINK_ERROR_INTERNAL)
    N_(NVJITLINK_ERROR_THREADPOOL)
    N_(NVJITLINK_ERROR_UNRECOGNIZED_INPUT)
    N_(NVJITLINK_ERROR_FINALIZE)
    N_(NVJITLINK_ERROR_NULL_INPUT)
    N_(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS)
    N_(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE)
    N_(NVJITLINK_ERROR_ARCH_MISMATCH)
    N_(NVJITLINK_ERROR_OUTDATED_LIBRARY)
    N_(NVJITLINK_ERROR_MISSING_FATBIN)
    N_(NVJITLINK_ERROR_UNRECOGNIZED_ARCH)
    N_(NVJITLINK_ERROR_UNSUPPORTED_ARCH)
    N_(NVJITLINK_ERROR_LTO_NOT_ENABLED)
#undef N_
  }
  return "NVJITLINK_ERROR_?";
}

t4a_status t4a_jitlink_fail(nvJitLinkResult r, const char *entry, const char *what) {
  t4a_status st;
  switch (r) {
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
    case NVJITLINK_ERROR_MISSING_ARCH:
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
    case NVJITLINK_ERROR_NULL_INPUT:
    case NVJITLINK_ERROR_INVALID_INPUT:
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT:
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE:
    case NVJITLINK_ERROR_ARCH_MISMATCH:
    case NVJITLINK_ERROR_OUTDATED_LIBRARY:
    case NVJITLINK_ERROR_MISSING_FATBIN:
    case NVJITLINK_ERROR_LTO_NOT_ENABLED:
      st = T4A_INVALID_ARGUMENT;
      break;
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
      st = T4A_UNSUPPORTED;
      break;
    case NVJITLINK_ERROR_PTX_COMPILE:
    case NVJITLINK_ERROR_NVVM_COMPILE:
    case NVJITLINK_ERROR_FINALIZE:
      st = T4A_LINK_FAILED;
      break;
    default:
      st = T4A_JITLINK_ERROR;
      break;
  }
  const char *name = t4a_jitlink_result_name(r);
  return t4a_error_set_(st, entry, (int)r, name, 0, "%s failed: %s", entry,
                        what != NULL && what[0] != '\0' ? what : name);
}

/* ---- Open ---------------------------------------------------------------------------------- */

static t4a_status finish(t4a_jitlink_lib *lib) {
  unsigned major = 0, minor = 0;
  nvJitLinkResult r = lib->t.nvJitLinkVersion(&major, &minor);
  if (r != NVJITLINK_SUCCESS) return t4a_jitlink_fail(r, "nvJitLinkVersion", NULL);
  lib->major = major;
  lib->minor = minor;
  return T4A_OK;
}

t4a_status t4a_jitlink_lib_open(const t4a_jitlink_lib_options *options, t4a_jitlink_lib **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  const char *path = options != NULL ? options->library_path : NULL;
  if (path == NULL || path[0] == '\0') path = getenv("T4A_LIBNVJITLINK_PATH");
  if (path != NULL && path[0] == '\0') path = NULL;

  t4a_jitlink_lib *lib = t4a_host_calloc(1, sizeof *lib);
  if (lib == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&lib->refs, 1);
  char tried[768];
  t4a_status st;
  lib->dl = open_candidates(path, lib->origin, sizeof lib->origin, tried, sizeof tried);
  if (lib->dl == NULL) {
    st = t4a_error_set_(T4A_JITLINK_NOT_FOUND, "dlopen", 0, NULL, 0,
                        "cannot load nvJitLink (tried %s); install the CUDA toolkit's nvJitLink "
                        "or set T4A_LIBNVJITLINK_PATH",
                        tried);
    goto fail;
  }
  for (size_t i = 0; i < NUM_ENTRIES; i++) {
    void *fn = t4a_fault_sim(T4A_FAULT_DLSYM) ? NULL : dlsym(lib->dl, k_entries[i].symbol);
    *slot(&lib->t, i) = fn;
    if (fn == NULL && k_entries[i].required) {
      st = t4a_error_set_(T4A_JITLINK_SYMBOL_MISSING, k_entries[i].name, 0, NULL, 0,
                          "%s has no %s (%s); t4a needs nvJitLink 13", lib->origin,
                          k_entries[i].name, k_entries[i].symbol);
      goto fail;
    }
  }
  st = finish(lib);
  if (st != T4A_OK) goto fail;
  compute_build_identity(lib);
  *out = lib;
  return T4A_OK;
fail:
  lib_free(lib);
  return st;
}

t4a_status t4a_jitlink_lib_create_from_table(const t4a_jitlink_table *table, const char *origin,
                                             const char *build_identity, t4a_jitlink_lib **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (table == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  }
  t4a_jitlink_lib *lib = t4a_host_calloc(1, sizeof *lib);
  if (lib == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&lib->refs, 1);
  lib->t = *table;
  snprintf(lib->origin, sizeof lib->origin, "%s", origin != NULL ? origin : "injected");
  for (size_t i = 0; i < NUM_ENTRIES; i++) {
    if (*slot(&lib->t, i) == NULL && k_entries[i].required) {
      t4a_status st = t4a_error_set_(T4A_JITLINK_SYMBOL_MISSING, k_entries[i].name, 0, NULL, 0,
                                     "the table %s has no %s", lib->origin, k_entries[i].name);
      free(lib);
      return st;
    }
  }
  t4a_status st = finish(lib);
  if (st != T4A_OK) {
    free(lib);
    return st;
  }
  snprintf(lib->build_identity, sizeof lib->build_identity, "%s%s",
           build_identity != NULL ? "" : "injected:",
           build_identity != NULL ? build_identity : lib->origin);
  *out = lib;
  return T4A_OK;
}

void t4a_jitlink_lib_retain(t4a_jitlink_lib *lib) {
  if (lib != NULL) atomic_fetch_add_explicit(&lib->refs, 1, memory_order_relaxed);
}

void t4a_jitlink_lib_release(t4a_jitlink_lib *lib) {
  if (lib == NULL) return;
  if (atomic_fetch_sub_explicit(&lib->refs, 1, memory_order_acq_rel) == 1) lib_free(lib);
}

void t4a_jitlink_lib_version(const t4a_jitlink_lib *lib, int *out_major, int *out_minor) {
  if (out_major != NULL) *out_major = lib != NULL ? (int)lib->major : 0;
  if (out_minor != NULL) *out_minor = lib != NULL ? (int)lib->minor : 0;
}

const char *t4a_jitlink_lib_origin(const t4a_jitlink_lib *lib) {
  return lib != NULL ? lib->origin : "";
}

const char *t4a_jitlink_lib_build_identity(const t4a_jitlink_lib *lib) {
  return lib != NULL ? lib->build_identity : "";
}

void t4a_jitlink_lib_stats(const t4a_jitlink_lib *lib, t4a_counter_values *out) {
  t4a_counters_stats(lib != NULL ? &lib->counters : NULL, out);
}
