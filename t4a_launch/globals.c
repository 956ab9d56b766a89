/* Module globals (cuModuleGetGlobal) as views that every buffer operation takes, and a kernel's
 * attributes (cuFuncGetAttribute).
 *
 * Why a view: writing and reading a global is an upload or download, which lives in t4a_xfer,
 * above t4a_launch's layers (t4a_launch sits on nvrtc, ctx, mem and retire). So the global is
 * handed out as a t4a_buffer of t4a_mem (a view over memory no pool allocated, holding a module
 * reference): t4a_xfer, launches, descriptors, chains and raw scopes accept it unchanged, check
 * ranges against its size, and keep it (hence the module) alive in the lane's epoch while their
 * work is queued. No edge points up (docs/design.md §13, "Module globals"). */
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_mem/mem_internal.h"

static t4a_global_rec_ *find_global(t4a_module *m, const char *name) {
  for (t4a_global_rec_ *g = m->globals; g != NULL; g = g->next) {
    if (strcmp(g->name, name) == 0) return g;
  }
  return NULL;
}

/* The module's record of global `name`, learnt from the driver the first time. */
static t4a_status global_record(t4a_module *m, const char *name, t4a_global_rec_ **out) {
  pthread_mutex_lock(&m->lock);
  t4a_global_rec_ *g = find_global(m, name);
  pthread_mutex_unlock(&m->lock);
  if (g != NULL) {
    *out = g;
    return T4A_OK;
  }
  t4a_module_cache *c = m->cache;
  t4a_status st = t4a_lane_check(c->lane);
  if (st != T4A_OK) return st;
  size_t len = strlen(name);
  t4a_global_rec_ *rec = t4a_host_malloc(sizeof *rec + len + 1);
  if (rec == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(rec->name, name, len + 1);
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), c->counters)) != T4A_OK) {
    free(rec);
    return st;
  }
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  CUresult r = c->driver->t.cuModuleGetGlobal(&ptr, &bytes, m->handle, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    st = t4a_error_set_(T4A_UNKNOWN_ENTRY_POINT, "cuModuleGetGlobal", (int)r,
                        t4a_cu_name(c->driver, r), 0,
                        "the module has no global (__device__ or __constant__) named '%s'", name);
  } else if (r != CUDA_SUCCESS) {
    st = t4a_cu_fail(c->driver, r, "cuModuleGetGlobal", 0);
  } else if (ptr == 0 || bytes == 0) {
    st = t4a_error_set_(T4A_INTERNAL, "cuModuleGetGlobal", 0, NULL, 0,
                        "global '%s': the driver gave address 0x%llx and %zu bytes", name,
                        (unsigned long long)ptr, bytes);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) {
    free(rec);
    return t4a_lane_note_(c->lane, st);
  }
  rec->ptr = (t4a_devptr)ptr;
  rec->bytes = bytes;
  pthread_mutex_lock(&m->lock);
  t4a_global_rec_ *other = find_global(m, name);
  if (other == NULL) {
    rec->next = m->globals;
    m->globals = rec;
  }
  pthread_mutex_unlock(&m->lock);
  if (other != NULL) { /* another thread learnt it meanwhile */
    free(rec);
    rec = other;
  }
  *out = rec;
  return T4A_OK;
}

t4a_status t4a_module_get_global(t4a_module *m, const char *name, size_t expected_bytes,
                                 t4a_buffer **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (m == NULL || name == NULL || name[0] == '\0') {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "module or name is NULL/empty");
  }
  t4a_global_rec_ *g = NULL;
  t4a_status st = global_record(m, name, &g);
  if (st != T4A_OK) return st;
  if (expected_bytes != 0 && expected_bytes != g->bytes) {
    return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, (uint64_t)g->bytes,
                          "global '%s' is %zu bytes, not the %zu expected", g->name, g->bytes,
                          expected_bytes);
  }
  t4a_module_retain(m); /* the view's */
  st = t4a_buffer_view_create_(m->cache->lane, g->ptr, g->bytes, g->name, m,
                               t4a_module_release_object_, out);
  if (st != T4A_OK) t4a_module_release(m);
  return st;
}

t4a_status t4a_function_get_attributes(t4a_function *f, t4a_kernel_attributes *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (f == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "function or out is NULL");
  }
  t4a_module_cache *c = f->module->cache;
  t4a_status st = t4a_lane_check(c->lane);
  if (st != T4A_OK) return st;
  static const CUfunction_attribute attrs[8] = {
      CU_FUNC_ATTRIBUTE_NUM_REGS,          CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
      CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
      CU_FUNC_ATTRIBUTE_PTX_VERSION,       CU_FUNC_ATTRIBUTE_BINARY_VERSION,
  };
  uint32_t v[8];
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), c->counters)) != T4A_OK) {
    return st;
  }
  for (int i = 0; i < 8 && st == T4A_OK; i++) {
    int x = 0;
    st = T4A_CU(c->driver, cuFuncGetAttribute, &x, attrs[i], f->handle);
    v[i] = x > 0 ? (uint32_t)x : 0;
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) return t4a_lane_note_(c->lane, st);
  out->num_regs = v[0];
  out->static_shared_bytes = v[1];
  out->const_bytes = v[2];
  out->local_bytes = v[3];
  out->max_dynamic_shared_bytes = v[4];
  out->max_threads_per_block = v[5];
  out->ptx_version = v[6];
  out->binary_version = v[7];
  uint32_t optin = c->limits.max_shared_optin;
  out->max_dynamic_shared_optin_bytes = optin > v[1] ? optin - v[1] : 0;
  return T4A_OK;
}
