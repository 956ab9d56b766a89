/* The driver loader: dlopen, cuGetProcAddress_v2, the catalogue resolver, and the CUresult
 * mapping. The only file in t4a that touches the driver library by name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

const t4a_driver_entry_info t4a_driver_entries[] = {
#define T4A_ENTRY_INFO_(name, version, need) \
  {#name, version, T4A_NEED_##need, offsetof(t4a_driver_table, name)},
#define T4A_NEED_REQUIRED 1
#define T4A_NEED_OPTIONAL 0
    T4A_DRIVER_CATALOG(T4A_ENTRY_INFO_)
#undef T4A_ENTRY_INFO_
};
const size_t t4a_driver_entry_count = sizeof t4a_driver_entries / sizeof t4a_driver_entries[0];

static void **slot_at(t4a_driver_table *t, size_t offset) {
  return (void **)((char *)t + offset);
}

/* ---- CUresult mapping ---- */

t4a_status t4a_status_from_cu(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return T4A_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return T4A_DEVICE_OUT_OF_MEMORY;
    case CUDA_ERROR_NOT_READY:
      return T4A_NOT_READY;
    case CUDA_ERROR_NO_DEVICE:
      return T4A_NO_DEVICE;
    case CUDA_ERROR_INVALID_DEVICE:
      return T4A_INVALID_DEVICE;
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return T4A_INVALID_CONTEXT;
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return T4A_DRIVER_TOO_OLD;
    case CUDA_ERROR_STUB_LIBRARY:
      return T4A_DRIVER_NOT_FOUND;
    case CUDA_ERROR_NOT_SUPPORTED:
      return T4A_UNSUPPORTED;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return T4A_INVALID_LAUNCH;
    default:
      break;
  }
  return t4a_cu_is_sticky(r) ? T4A_CONTEXT_LOST : T4A_DRIVER_ERROR;
}

int t4a_cu_is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
      return 1;
    default:
      return 0;
  }
}

const char *t4a_cu_name(const t4a_driver *driver, CUresult r) {
  const char *s = NULL;
  if (driver != NULL && driver->t.cuGetErrorName != NULL &&
      driver->t.cuGetErrorName(r, &s) == CUDA_SUCCESS && s != NULL) {
    return s;
  }
  return "CUDA_ERROR_(unnamed)";
}

/* Whether `entry` looks a symbol up by name in a module: only there does CUDA_ERROR_NOT_FOUND mean
 * "no such entry point". Elsewhere it is an ordinary driver error (DRIVER_ERROR with its code). */
static int is_symbol_lookup(const char *entry) {
  return entry != NULL &&
         (strcmp(entry, "cuModuleGetFunction") == 0 || strcmp(entry, "cuModuleGetGlobal") == 0);
}

t4a_status t4a_cu_fail(const t4a_driver *driver, CUresult r, const char *entry, uint64_t bytes) {
  t4a_status st = t4a_status_from_cu(r);
  if (r == CUDA_ERROR_NOT_FOUND && is_symbol_lookup(entry)) st = T4A_UNKNOWN_ENTRY_POINT;
  const char *desc = NULL;
  if (driver != NULL && driver->t.cuGetErrorString != NULL &&
      driver->t.cuGetErrorString(r, &desc) != CUDA_SUCCESS) {
    desc = NULL;
  }
  return t4a_error_set_(st, entry, (int)r, t4a_cu_name(driver, r),
                        st == T4A_DEVICE_OUT_OF_MEMORY ? bytes : 0, "%s failed: %s", entry,
                        desc != NULL ? desc : "no description");
}

/* ---- construction ---- */

static t4a_status check_table(const t4a_driver_table *t) {
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    const t4a_driver_entry_info *e = &t4a_driver_entries[i];
    if (e->required && *slot_at((t4a_driver_table *)t, e->offset) == NULL) {
      return t4a_error_set_(T4A_DRIVER_SYMBOL_MISSING, e->name, 0, NULL, 0,
                            "required driver entry %s (ABI version %d) is missing", e->name,
                            e->version);
    }
  }
  return T4A_OK;
}

/* Version check, capability probe and cuInit on a complete table. */
static t4a_status finish(t4a_driver *d, int min_version) {
  t4a_status st = check_table(&d->t);
  if (st != T4A_OK) return st;
  int version = 0;
  if ((st = T4A_CU(d, cuDriverGetVersion, &version)) != T4A_OK) return st;
  if (min_version < T4A_DRIVER_MIN_VERSION) min_version = T4A_DRIVER_MIN_VERSION;
  if (version < min_version) {
    return t4a_error_set_(T4A_DRIVER_TOO_OLD, "cuDriverGetVersion", 0, NULL, 0,
                          "%s reports CUDA %d.%d; t4a needs %d.%d or newer", d->origin,
                          version / 1000, (version % 1000) / 10, min_version / 1000,
                          (min_version % 1000) / 10);
  }
  d->version = version;
  d->caps = 0;
  if (d->t.cuFuncGetParamInfo != NULL) d->caps |= T4A_DRIVER_CAP_FUNC_PARAM_INFO;
  if (d->t.cuStreamGetCaptureInfo != NULL) d->caps |= T4A_DRIVER_CAP_CAPTURE_INFO;
  if (d->t.cuLaunchKernelEx != NULL) d->caps |= T4A_DRIVER_CAP_LAUNCH_EX;
  if (d->t.cuOccupancyMaxActiveBlocksPerMultiprocessor != NULL) {
    d->caps |= T4A_DRIVER_CAP_OCCUPANCY;
  }
  if (d->t.cuOccupancyMaxPotentialClusterSize != NULL) {
    d->caps |= T4A_DRIVER_CAP_CLUSTER_OCCUPANCY;
  }
  CUresult r = d->t.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    return t4a_error_set_(T4A_DRIVER_NOT_FOUND, "cuInit", (int)r, t4a_cu_name(d, r), 0,
                          "%s is the CUDA toolkit's stub library, not a driver: install the "
                          "NVIDIA driver or point T4A_LIBCUDA_PATH at its libcuda.so.1",
                          d->origin);
  }
  return t4a_cu_result_(d, r, "cuInit", 0);
}

static t4a_driver *driver_alloc(const char *origin) {
  t4a_driver *d = t4a_host_calloc(1, sizeof *d);
  if (d == NULL) return NULL;
  atomic_init(&d->refs, 1);
  snprintf(d->origin, sizeof d->origin, "%s", origin != NULL ? origin : "");
  return d;
}

static void driver_free(t4a_driver *d) {
  if (d == NULL) return;
  if (d->on_destroy != NULL) d->on_destroy(d->on_destroy_user);
  if (d->dl != NULL) dlclose(d->dl);
  free(d);
}

t4a_status t4a_driver_create_from_table(const t4a_driver_table *table, const char *origin,
                                        void (*on_destroy)(void *user), void *user,
                                        t4a_driver **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (table == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  }
  t4a_driver *d = driver_alloc(origin);
  if (d == NULL) return T4A_HOST_OUT_OF_MEMORY;
  d->t = *table;
  t4a_status st = finish(d, 0);
  if (st != T4A_OK) {
    free(d); /* the caller keeps ownership of whatever on_destroy would free */
    return st;
  }
  d->on_destroy = on_destroy;
  d->on_destroy_user = user;
  *out = d;
  return T4A_OK;
}

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

t4a_status t4a_driver_open(const t4a_driver_options *options, t4a_driver **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_driver_options opts = T4A_DRIVER_OPTIONS_INIT;
  if (options != NULL) opts = *options;
  const char *path = opts.library_path;
  if (path == NULL || path[0] == '\0') path = getenv("T4A_LIBCUDA_PATH");
  if (path == NULL || path[0] == '\0') path = "libcuda.so.1";

  t4a_driver *d = driver_alloc(path);
  if (d == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_status st;
  /* RTLD_NODELETE: strings the driver hands out (cuGetErrorName) stay valid in error details
   * after the last t4a_driver is released; the driver is never unmapped from the process. */
  int simulated = t4a_fault_sim(T4A_FAULT_DLOPEN);
  if (simulated || (d->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) == NULL) {
    const char *why = simulated ? NULL : dlerror();
    st = t4a_error_set_(T4A_DRIVER_NOT_FOUND, "dlopen", 0, NULL, 0,
                        "cannot load the CUDA driver %s: %s (is an NVIDIA driver installed? set "
                        "T4A_LIBCUDA_PATH to its libcuda.so.1)",
                        path, why != NULL ? why : "simulated failure");
    goto fail;
  }
  get_proc_fn get_proc = NULL;
  if (!t4a_fault_sim(T4A_FAULT_DLSYM)) {
    *(void **)&get_proc = dlsym(d->dl, "cuGetProcAddress_v2");
  }
  if (get_proc == NULL) {
    st = t4a_error_set_(T4A_DRIVER_TOO_OLD, "dlsym", 0, NULL, 0,
                        "%s has no cuGetProcAddress_v2: the driver predates CUDA 12.0, which t4a "
                        "needs",
                        path);
    goto fail;
  }
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    const t4a_driver_entry_info *e = &t4a_driver_entries[i];
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = get_proc(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
      st = t4a_error_set_(T4A_DRIVER_NOT_FOUND, "cuGetProcAddress_v2", (int)r,
                          "CUDA_ERROR_STUB_LIBRARY", 0,
                          "%s is the CUDA toolkit's stub library, not a driver: install the "
                          "NVIDIA driver or point T4A_LIBCUDA_PATH at its libcuda.so.1",
                          path);
      goto fail;
    }
    if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS) fn = NULL;
    *slot_at(&d->t, e->offset) = fn;
    if (fn == NULL && e->required) {
      st = t4a_error_set_(
          q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? T4A_DRIVER_TOO_OLD
                                                          : T4A_DRIVER_SYMBOL_MISSING,
          e->name, (int)r, NULL, 0,
          "%s does not provide %s at ABI version %d (cuGetProcAddress_v2 result %d, query %d)",
          path, e->name, e->version, (int)r, (int)q);
      goto fail;
    }
  }
  if ((st = finish(d, opts.min_version)) != T4A_OK) goto fail;
  *out = d;
  return T4A_OK;
fail:
  driver_free(d);
  return st;
}

/* ---- the process-wide driver ---- */

static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;
static t4a_driver *g_default;
static t4a_error g_default_error;

static void load_default(void) {
  if (t4a_driver_open(NULL, &g_default) != T4A_OK) t4a_error_last(&g_default_error);
}

t4a_status t4a_driver_get_default(t4a_driver **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  pthread_once(&g_default_once, load_default);
  if (g_default == NULL) {
    const t4a_error *e = &g_default_error;
    return t4a_error_set_(e->status, e->entry, e->code, e->code_name, e->bytes, "%s", e->message);
  }
  t4a_driver_retain(g_default);
  *out = g_default;
  return T4A_OK;
}

/* ---- references and accessors ---- */

void t4a_driver_retain(t4a_driver *driver) {
  if (driver != NULL) atomic_fetch_add_explicit(&driver->refs, 1, memory_order_relaxed);
}

void t4a_driver_release(t4a_driver *driver) {
  if (driver == NULL) return;
  if (atomic_fetch_sub_explicit(&driver->refs, 1, memory_order_acq_rel) == 1) driver_free(driver);
}

int t4a_driver_version(const t4a_driver *driver) { return driver != NULL ? driver->version : 0; }
uint32_t t4a_driver_caps(const t4a_driver *driver) { return driver != NULL ? driver->caps : 0; }
const char *t4a_driver_origin(const t4a_driver *driver) {
  return driver != NULL ? driver->origin : "";
}

void t4a_driver_stats(const t4a_driver *driver, t4a_counter_values *out) {
  t4a_counters_stats(driver != NULL ? &driver->counters : NULL, out);
}

t4a_counters *t4a_driver_counter_block(t4a_driver *driver) { return &driver->counters; }
