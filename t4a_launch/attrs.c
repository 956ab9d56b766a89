/* Occupancy queries, the suggested block size, and launch attributes (cooperative, clusters,
 * programmatic dependent launch) checked before anything is enqueued: docs/design.md §13,
 * "Occupancy and launch attributes". The checks that need the driver (occupancy, the kernel's
 * non-portable attribute, cuOccupancyMaxPotentialClusterSize) run under the lane's context, outside
 * any admission; a descriptor runs them once, at registration. */
#include <stdint.h>
#include <string.h>

#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"

#define PORTABLE_CLUSTER 8u
#define MAX_CLUSTER 16u
#define WARP 32u

static t4a_status unsupported(const char *entry, const char *what) {
  return t4a_error_set_(T4A_UNSUPPORTED, entry, 0, NULL, 0, "%s", what);
}

static t4a_status need_occupancy(t4a_driver *drv) {
  if (t4a_driver_caps(drv) & T4A_DRIVER_CAP_OCCUPANCY) return T4A_OK;
  return unsupported("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                     "the driver lacks cuOccupancyMaxActiveBlocksPerMultiprocessor: no occupancy "
                     "queries or cooperative launches");
}

/* Enters the function's lane context (refusing a broken lane). */
static t4a_status enter(t4a_function *fn, t4a_ctx_scope *scope) {
  t4a_module_cache *c = fn->module->cache;
  t4a_status st = t4a_lane_check(c->lane);
  if (st != T4A_OK) return st;
  return t4a_ctx_scope_enter(scope, t4a_lane_holder(c->lane), c->counters);
}

static t4a_status leave(t4a_function *fn, t4a_ctx_scope *scope, t4a_status st) {
  t4a_ctx_scope_exit_quiet(scope); /* a failed restore is counted */
  return st == T4A_OK ? st : t4a_lane_note_(fn->module->cache->lane, st);
}

static t4a_status func_attr(t4a_function *fn, CUfunction_attribute attr, int *out) {
  *out = 0;
  return T4A_CU(fn->module->cache->driver, cuFuncGetAttribute, out, attr, fn->handle);
}

/* Blocks per SM (context current). A dynamic size the kernel cannot have at all (its static
 * shared memory plus `shared` above the device's opt-in maximum) is 0 blocks, not a refused
 * raise. */
static t4a_status occupancy_current(t4a_function *fn, uint32_t threads, uint32_t shared,
                                    uint32_t *out) {
  *out = 0;
  const t4a_launch_limits *l = &fn->module->cache->limits;
  t4a_status st;
  if (shared > atomic_load_explicit(&fn->dyn_shared_max, memory_order_acquire)) {
    int static_shared = 0;
    if ((st = func_attr(fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_shared)) != T4A_OK) {
      return st;
    }
    if ((uint64_t)shared + (uint64_t)(static_shared > 0 ? static_shared : 0) >
        l->max_shared_optin) {
      return T4A_OK;
    }
    if ((st = t4a_launch_raise_shared_(fn, shared)) != T4A_OK) return st;
  }
  int n = 0;
  st = T4A_CU(fn->module->cache->driver, cuOccupancyMaxActiveBlocksPerMultiprocessor, &n,
              fn->handle, (int)threads, (size_t)shared);
  if (st == T4A_OK) *out = n > 0 ? (uint32_t)n : 0;
  return st;
}

t4a_status t4a_function_occupancy(t4a_function *fn, uint32_t block_threads, uint32_t shared_bytes,
                                  uint32_t *out) {
  if (out != NULL) *out = 0;
  if (fn == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "function or out is NULL");
  }
  const t4a_launch_limits *l = &fn->module->cache->limits;
  if (block_threads == 0 || block_threads > l->max_threads_per_block) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "kernel '%s': a block of %u threads (the device allows 1..%u)", fn->name,
                          block_threads, l->max_threads_per_block);
  }
  if (shared_bytes > l->max_shared_optin) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "kernel '%s': %u bytes of dynamic shared memory exceed the device's "
                          "opt-in maximum of %u per block",
                          fn->name, shared_bytes, l->max_shared_optin);
  }
  t4a_status st = need_occupancy(fn->module->cache->driver);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = enter(fn, &scope)) != T4A_OK) return st;
  st = occupancy_current(fn, block_threads, shared_bytes, out);
  return leave(fn, &scope, st);
}

t4a_status t4a_function_suggest_block(t4a_function *fn, uint32_t shared_bytes,
                                      uint32_t shared_per_thread, uint32_t block_limit,
                                      t4a_block_suggestion *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (fn == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "function or out is NULL");
  }
  const t4a_launch_limits *l = &fn->module->cache->limits;
  t4a_status st = need_occupancy(fn->module->cache->driver);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = enter(fn, &scope)) != T4A_OK) return st;
  int fn_max = 0;
  st = func_attr(fn, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &fn_max);
  uint32_t top = l->max_threads_per_block;
  if (fn_max > 0 && (uint32_t)fn_max < top) top = (uint32_t)fn_max;
  if (block_limit > 0 && block_limit < top) top = block_limit;
  uint32_t best_threads = 0;
  t4a_block_suggestion best = {0, 0, 0, 0};
  /* The driver's order: from the largest block (rounded up to a warp, clamped) down a warp at a
   * time; only a strictly better occupancy replaces the best (ties keep the larger block). */
  for (uint32_t aligned = (top + WARP - 1) / WARP * WARP; st == T4A_OK && aligned > 0;
       aligned -= WARP) {
    uint32_t size = aligned < top ? aligned : top;
    uint64_t dyn = (uint64_t)shared_bytes + (uint64_t)shared_per_thread * size;
    if (dyn > l->max_shared_optin) continue;
    uint32_t blocks = 0;
    st = occupancy_current(fn, size, (uint32_t)dyn, &blocks);
    if (st == T4A_OK && blocks * size > best_threads) {
      best_threads = blocks * size;
      best = (t4a_block_suggestion){size, blocks, blocks * l->sm_count, (uint32_t)dyn};
    }
  }
  if (st == T4A_OK && best_threads == 0) {
    st = t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                        "kernel '%s': no block of up to %u threads fits with %u bytes + %u per "
                        "thread of dynamic shared memory",
                        fn->name, top, shared_bytes, shared_per_thread);
  }
  if (st == T4A_OK) *out = best;
  return leave(fn, &scope, st);
}

t4a_status t4a_function_allow_non_portable_clusters(t4a_function *fn, int allow) {
  if (fn == NULL || (allow != 0 && allow != 1)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "function is NULL or allow is not 0 or 1");
  }
  if (!fn->module->cache->limits.clusters) {
    return unsupported(NULL, "the device has no thread-block clusters (compute capability 9.0+)");
  }
  t4a_ctx_scope scope;
  t4a_status st = enter(fn, &scope);
  if (st != T4A_OK) return st;
  st = T4A_CU(fn->module->cache->driver, cuFuncSetAttribute, fn->handle,
              CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, allow);
  return leave(fn, &scope, st);
}

/* Kept here (not in launch.c) so that launch.c uses this file and not the reverse. */
t4a_status t4a_launch_raise_shared_(t4a_function *fn, uint32_t shared) {
  if (shared <= atomic_load_explicit(&fn->dyn_shared_max, memory_order_acquire)) return T4A_OK;
  t4a_status st = T4A_OK;
  pthread_mutex_lock(&fn->attr_lock);
  if (shared > atomic_load_explicit(&fn->dyn_shared_max, memory_order_relaxed)) {
    st = T4A_CU(fn->module->cache->driver, cuFuncSetAttribute, fn->handle,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared);
    if (st == T4A_OK) atomic_store_explicit(&fn->dyn_shared_max, shared, memory_order_release);
  }
  pthread_mutex_unlock(&fn->attr_lock);
  return st;
}

/* ---- launch attributes -------------------------------------------------------------------- */

/* The driver-side checks of a cluster (context current): the portable size unless the kernel
 * allows more, and what the device can co-schedule for this block and shared memory. */
static t4a_status check_cluster_driver(t4a_function *fn, const t4a_launch_config *cfg,
                                       uint64_t size) {
  t4a_driver *drv = fn->module->cache->driver;
  t4a_status st;
  if (size > PORTABLE_CLUSTER) {
    int allowed = 0;
    st = func_attr(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &allowed);
    if (st != T4A_OK) return st;
    if (!allowed) {
      return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                            "kernel '%s': a cluster of %llu blocks exceeds the portable size %u "
                            "(allow non-portable sizes first: "
                            "t4a_function_allow_non_portable_clusters)",
                            fn->name, (unsigned long long)size, PORTABLE_CLUSTER);
    }
  }
  /* The query sees the launch's dynamic shared memory, so the limit is raised as the launch will
   * raise it. */
  if ((st = t4a_launch_raise_shared_(fn, cfg->shared_bytes)) != T4A_OK) return st;
  CUlaunchConfig lc;
  t4a_launch_ex_config_(&lc, cfg, t4a_lane_stream(fn->module->cache->lane));
  int max = 0;
  st = T4A_CU(drv, cuOccupancyMaxPotentialClusterSize, &max, fn->handle, &lc);
  if (st != T4A_OK) return st;
  if (size > (uint64_t)(max > 0 ? max : 0)) {
    return t4a_error_set_(T4A_INVALID_LAUNCH, "cuOccupancyMaxPotentialClusterSize", 0, NULL, 0,
                          "kernel '%s': a cluster of %llu blocks exceeds the %d the device can "
                          "co-schedule for blocks of %llu threads with %u bytes of dynamic shared "
                          "memory",
                          fn->name, (unsigned long long)size, max,
                          (unsigned long long)cfg->block[0] * cfg->block[1] * cfg->block[2],
                          cfg->shared_bytes);
  }
  return T4A_OK;
}

/* The cooperative grid against what the device holds at once (context current). */
static t4a_status check_cooperative_driver(t4a_function *fn, const t4a_launch_config *cfg) {
  const t4a_launch_limits *l = &fn->module->cache->limits;
  uint64_t threads = (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2];
  uint32_t per_sm = 0;
  t4a_status st = occupancy_current(fn, (uint32_t)threads, cfg->shared_bytes, &per_sm);
  if (st != T4A_OK) return st;
  uint64_t blocks = (uint64_t)cfg->grid[0] * cfg->grid[1] * cfg->grid[2];
  uint64_t fit = (uint64_t)per_sm * l->sm_count;
  if (blocks > fit) {
    return t4a_error_set_(T4A_INVALID_LAUNCH, "cuOccupancyMaxActiveBlocksPerMultiprocessor", 0,
                          NULL, 0,
                          "kernel '%s': a cooperative grid of %llu blocks exceeds the %llu the "
                          "device holds at once (%u blocks of %llu threads with %u bytes of dynamic "
                          "shared memory per SM x %u SMs)",
                          fn->name, (unsigned long long)blocks, (unsigned long long)fit, per_sm,
                          (unsigned long long)threads, cfg->shared_bytes, l->sm_count);
  }
  return T4A_OK;
}

t4a_status t4a_launch_check_attrs_(t4a_function *fn, const t4a_launch_config *cfg,
                                   const t4a_launch_attrs *a, t4a_launch_ex_ *out) {
  memset(out, 0, sizeof *out);
  if (a == NULL) return T4A_OK;
  int cluster = (a->cluster[0] | a->cluster[1] | a->cluster[2]) != 0;
  if (!cluster && a->cooperative == 0 && a->programmatic == 0) return T4A_OK;
  if ((a->cooperative != 0 && a->cooperative != 1) ||
      (a->programmatic != 0 && a->programmatic != 1)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "kernel '%s': cooperative (%d) and programmatic (%d) are 0 or 1",
                          fn->name, a->cooperative, a->programmatic);
  }
  t4a_module_cache *c = fn->module->cache;
  const t4a_launch_limits *l = &c->limits;
  uint32_t caps = t4a_driver_caps(c->driver);
  if (!(caps & T4A_DRIVER_CAP_LAUNCH_EX)) {
    return unsupported("cuLaunchKernelEx",
                       "launch attributes need cuLaunchKernelEx, which the driver lacks");
  }
  if (cluster && a->cooperative) {
    return unsupported(NULL, "t4a does not combine a cooperative launch with clusters");
  }
  if (a->programmatic && l->cc_major < 9) {
    return unsupported(NULL,
                       "programmatic dependent launch needs compute capability 9.0 or newer");
  }
  if (a->cooperative && !l->cooperative) {
    return unsupported(NULL, "the device does not support cooperative launches");
  }
  if (a->cooperative) {
    t4a_status st = need_occupancy(c->driver);
    if (st != T4A_OK) return st;
  }
  uint64_t size = 1;
  if (cluster) {
    static const char axis[3] = {'x', 'y', 'z'};
    if (!l->clusters) {
      return unsupported(NULL, "the device has no thread-block clusters (compute capability 9.0+)");
    }
    for (int i = 0; i < 3; i++) {
      if (a->cluster[i] == 0) {
        return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                              "kernel '%s': cluster (%u, %u, %u) has a zero dimension", fn->name,
                              a->cluster[0], a->cluster[1], a->cluster[2]);
      }
      if (cfg->grid[i] % a->cluster[i] != 0) {
        return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                              "kernel '%s': grid %c = %u is not a multiple of the cluster's %c = "
                              "%u",
                              fn->name, axis[i], cfg->grid[i], axis[i], a->cluster[i]);
      }
      size *= a->cluster[i];
    }
    if (size > MAX_CLUSTER) {
      return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                            "kernel '%s': a cluster of %llu blocks exceeds %u, the largest "
                            "(non-portable) size",
                            fn->name, (unsigned long long)size, MAX_CLUSTER);
    }
    if (!(caps & T4A_DRIVER_CAP_CLUSTER_OCCUPANCY)) {
      return unsupported("cuOccupancyMaxPotentialClusterSize",
                         "the driver lacks cuOccupancyMaxPotentialClusterSize: cluster limits "
                         "cannot be checked");
    }
  }
  if (cluster || a->cooperative) {
    t4a_ctx_scope scope;
    t4a_status st = enter(fn, &scope);
    if (st != T4A_OK) return st;
    st = cluster ? check_cluster_driver(fn, cfg, size) : check_cooperative_driver(fn, cfg);
    if ((st = leave(fn, &scope, st)) != T4A_OK) return st;
  }
  if (a->cooperative) {
    out->attrs[out->num].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    out->attrs[out->num++].value.cooperative = 1;
  }
  if (cluster) {
    out->attrs[out->num].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    out->attrs[out->num].value.clusterDim.x = a->cluster[0];
    out->attrs[out->num].value.clusterDim.y = a->cluster[1];
    out->attrs[out->num++].value.clusterDim.z = a->cluster[2];
  }
  if (a->programmatic) {
    out->attrs[out->num].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    out->attrs[out->num++].value.programmaticStreamSerializationAllowed = 1;
  }
  return T4A_OK;
}
