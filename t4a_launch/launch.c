/* Checked launches and raw-bytes launches, and the launch core they share with descriptor fires:
 * arguments checked against the kernel's parameter list and the lane's domain, the config
 * against the device's limits, everything before anything is enqueued; then one admission. */
#include <stdint.h>
#include <string.h>

#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_retire/retire_internal.h"

/* ---- checks ------------------------------------------------------------------------------- */

/* Why the config is refused (check_config_'s slow path: some limit failed). */
static __attribute__((noinline)) t4a_status config_refusal(const t4a_function *fn,
                                                           const t4a_launch_config *cfg) {
  const t4a_launch_limits *l = &fn->module->cache->limits;
  static const char axis[3] = {'x', 'y', 'z'};
  for (int i = 0; i < 3; i++) {
    if (cfg->grid[i] == 0 || cfg->block[i] == 0) {
      return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                            "kernel '%s': grid (%u, %u, %u) or block (%u, %u, %u) has a zero "
                            "dimension",
                            fn->name, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0],
                            cfg->block[1], cfg->block[2]);
    }
    if (cfg->block[i] > l->max_block[i]) {
      return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                            "kernel '%s': block %c = %u exceeds the device's %u", fn->name, axis[i],
                            cfg->block[i], l->max_block[i]);
    }
    if (cfg->grid[i] > l->max_grid[i]) {
      return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                            "kernel '%s': grid %c = %u exceeds the device's %u", fn->name, axis[i],
                            cfg->grid[i], l->max_grid[i]);
    }
  }
  uint64_t threads = (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2];
  if (threads > l->max_threads_per_block) {
    return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                          "kernel '%s': a block of %llu threads exceeds the device's %u per block",
                          fn->name, (unsigned long long)threads, l->max_threads_per_block);
  }
  if (cfg->shared_bytes > l->max_shared_optin) {
    return t4a_error_set_(T4A_INVALID_LAUNCH, NULL, 0, NULL, 0,
                          "kernel '%s': %u bytes of dynamic shared memory exceed the device's "
                          "opt-in maximum of %u per block",
                          fn->name, cfg->shared_bytes, l->max_shared_optin);
  }
  return t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "kernel '%s': config refused", fn->name);
}

/* Whether the config is within the device's limits. x - 1 >= max is both x == 0 (it wraps) and
 * x > max: two compares per axis; a failure takes config_refusal, which names the first one. */
static inline int config_passes(const t4a_function *fn, const t4a_launch_config *cfg) {
  const t4a_launch_limits *l = &fn->module->cache->limits;
  return !(cfg->grid[0] - 1u >= l->max_grid[0] || cfg->block[0] - 1u >= l->max_block[0] ||
           cfg->grid[1] - 1u >= l->max_grid[1] || cfg->block[1] - 1u >= l->max_block[1] ||
           cfg->grid[2] - 1u >= l->max_grid[2] || cfg->block[2] - 1u >= l->max_block[2] ||
           (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2] > l->max_threads_per_block ||
           cfg->shared_bytes > l->max_shared_optin);
}

t4a_status t4a_launch_check_config_(const t4a_function *fn, const t4a_launch_config *cfg) {
  return T4A_LIKELY(config_passes(fn, cfg)) ? T4A_OK : config_refusal(fn, cfg);
}

t4a_status t4a_launch_expected_params_(t4a_function *fn, uint32_t *out) {
  if (fn->known) {
    *out = fn->num_params;
    return T4A_OK;
  }
  uint32_t d = atomic_load_explicit(&fn->declared, memory_order_acquire);
  if (d == T4A_PARAMS_UNDECLARED) {
    *out = 0;
    return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                          "kernel '%s': the driver cannot report its parameters (no "
                          "cuFuncGetParamInfo); declare their number with "
                          "t4a_function_declare_params",
                          fn->name);
  }
  *out = d;
  return T4A_OK;
}

static t4a_status check_count(const t4a_function *fn, uint32_t expected, uint32_t given) {
  if (given == expected) return T4A_OK;
  return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                        "kernel '%s' takes %u parameters%s; %u given", fn->name, expected,
                        fn->known ? "" : " (declared)", given);
}

/* t4a_launch_check_arg_ in full: every kind, and every refusal with its message. */
static __attribute__((noinline)) t4a_status check_arg_full(const t4a_function *fn, uint64_t domain,
                                                           uint32_t i, const t4a_arg *a,
                                                           uint64_t *scratch, const void **out_src,
                                                           uint32_t *out_size,
                                                           t4a_buffer **out_buffer) {
  *out_buffer = NULL;
  uint32_t size;
  switch (a->kind) {
    case T4A_ARG_BUFFER: {
      t4a_buffer *b = a->u.buf.buffer;
      if (b == NULL) {
        return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                              "kernel '%s' argument %u: the buffer is NULL", fn->name, i);
      }
      t4a_buffer_facts_ facts;
      t4a_buffer_facts_get_(b, &facts);
      if (facts.domain != domain) {
        return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                              "kernel '%s' argument %u: the buffer belongs to domain %llu, the "
                              "launch to %llu",
                              fn->name, i, (unsigned long long)facts.domain,
                              (unsigned long long)domain);
      }
      if (a->u.buf.offset > facts.bytes) {
        return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                              "kernel '%s' argument %u: offset %zu is past the %zu-byte buffer",
                              fn->name, i, a->u.buf.offset, facts.bytes);
      }
      *scratch = (uint64_t)facts.ptr + a->u.buf.offset;
      *out_src = scratch;
      *out_buffer = b;
      size = 8;
      break;
    }
    case T4A_ARG_DEVPTR:
      *scratch = (uint64_t)a->u.devptr;
      *out_src = scratch;
      size = 8;
      break;
    case T4A_ARG_SCALAR:
      if (a->u.value == NULL || a->size == 0) {
        return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                              "kernel '%s' argument %u: a scalar with no value or size 0", fn->name,
                              i);
      }
      *out_src = a->u.value;
      size = a->size;
      break;
    default:
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "kernel '%s' argument %u: unknown kind %d", fn->name, i, (int)a->kind);
  }
  if (fn->known && size != fn->sizes[i]) {
    return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                          "kernel '%s' parameter %u: expected %u bytes, given %u", fn->name, i,
                          fn->sizes[i], size);
  }
  *out_size = size;
  return T4A_OK;
}

/* Whether argument i passes every check, the warm case as a leaf (its outputs set as
 * t4a_launch_check_arg_ sets them); 0 for anything else, refusals included: check_arg_full. */
static inline int arg_passes(const t4a_function *fn, uint64_t domain, uint32_t i, const t4a_arg *a,
                             uint64_t *scratch, const void **out_src, uint32_t *out_size,
                             t4a_buffer **out_buffer) {
  int known = fn->known;
  if (a->kind == T4A_ARG_BUFFER && a->u.buf.buffer != NULL && (!known || fn->sizes[i] == 8)) {
    t4a_buffer_facts_ facts;
    t4a_buffer_facts_get_(a->u.buf.buffer, &facts);
    if (T4A_LIKELY(facts.domain == domain && a->u.buf.offset <= facts.bytes)) {
      *scratch = (uint64_t)facts.ptr + a->u.buf.offset;
      *out_src = scratch;
      *out_size = 8;
      *out_buffer = a->u.buf.buffer;
      return 1;
    }
  } else if (a->kind == T4A_ARG_SCALAR && a->u.value != NULL && a->size != 0 &&
             (!known || fn->sizes[i] == a->size)) {
    *out_src = a->u.value;
    *out_size = a->size;
    *out_buffer = NULL;
    return 1;
  }
  return 0;
}

t4a_status t4a_launch_check_arg_(const t4a_function *fn, uint64_t domain, uint32_t i,
                                 const t4a_arg *a, uint64_t *scratch, const void **out_src,
                                 uint32_t *out_size, t4a_buffer **out_buffer) {
  if (arg_passes(fn, domain, i, a, scratch, out_src, out_size, out_buffer)) return T4A_OK;
  return check_arg_full(fn, domain, i, a, scratch, out_src, out_size, out_buffer);
}

static t4a_status check_common(t4a_retire *retire, t4a_function *fn, const t4a_launch_config *cfg,
                               uint64_t *out_domain) {
  if (retire == NULL || fn == NULL || cfg == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "retire, function or config is NULL");
  }
  uint64_t domain = t4a_retire_target_get_(retire)->domain;
  if (fn->module->cache->domain != domain) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "kernel '%s' belongs to domain %llu, the launch to %llu", fn->name,
                          (unsigned long long)fn->module->cache->domain,
                          (unsigned long long)domain);
  }
  *out_domain = domain;
  return T4A_LIKELY(config_passes(fn, cfg)) ? T4A_OK : config_refusal(fn, cfg);
}

/* ---- the core ----------------------------------------------------------------------------- */

/* Results with which the driver refuses a launch while validating it, before anything is
 * queued. Any other failure may have queued the kernel (the driver does not say). */
int t4a_launch_refused_before_enqueue_(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    /* Capture rules: nothing queued, and work of an invalidated capture never runs. */
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return 1;
    default:
      return 0;
  }
}

static void module_retain_object(void *m) { t4a_module_retain(m); }
static void buffer_retain_object(void *b) { t4a_buffer_retain(b); }

void t4a_launch_node_params_(const t4a_function *fn, const t4a_launch_config *cfg, void **params,
                             CUDA_KERNEL_NODE_PARAMS *out) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = fn->handle;
  p.gridDimX = cfg->grid[0];
  p.gridDimY = cfg->grid[1];
  p.gridDimZ = cfg->grid[2];
  p.blockDimX = cfg->block[0];
  p.blockDimY = cfg->block[1];
  p.blockDimZ = cfg->block[2];
  p.sharedMemBytes = cfg->shared_bytes;
  p.kernelParams = params;
  *out = p;
}

/* Builds the descriptor's one-node graph from the launch (context current, lane not captured).
 * On failure nothing is left behind (what cannot be destroyed is counted leaked). */
static t4a_status build_graph(t4a_driver *drv, t4a_counters *c, t4a_function *fn,
                              const t4a_launch_config *cfg, void **params, CUstream stream,
                              t4a_launch_graph_ *g) {
  CUDA_KERNEL_NODE_PARAMS p;
  t4a_launch_node_params_(fn, cfg, params, &p);
  CUgraph graph = NULL;
  CUgraphNode node = NULL;
  CUgraphExec exec = NULL;
  t4a_status st = T4A_CU(drv, cuGraphCreate, &graph, 0);
  if (st == T4A_OK) st = T4A_CU(drv, cuGraphAddKernelNode, &node, graph, NULL, 0, &p);
  if (st == T4A_OK) st = T4A_CU(drv, cuGraphInstantiateWithFlags, &exec, graph, 0);
  if (st == T4A_OK) st = T4A_CU(drv, cuGraphUpload, exec, stream);
  if (st != T4A_OK) {
    uint64_t leaked = 0;
    if (exec != NULL) leaked += T4A_CU_QUIET(drv, cuGraphExecDestroy, exec) != T4A_OK;
    if (graph != NULL) leaked += T4A_CU_QUIET(drv, cuGraphDestroy, graph) != T4A_OK;
    t4a_counter_add(c, T4A_COUNTER_leaked, leaked);
    return st;
  }
  g->graph = graph;
  g->node = node;
  g->exec = exec;
  g->dirty = 0;
  return T4A_OK;
}

/* Whether this fire goes through the descriptor's graph: builds it when its plain fires ran out,
 * updates its node when the arguments changed. A failure of either is absorbed: the descriptor
 * fires plain from then on, and the caller's error detail is kept. Context current. */
static int use_graph(t4a_driver *drv, t4a_lane *lane, t4a_function *fn,
                     const t4a_launch_config *cfg, void **params, t4a_launch_graph_ *g) {
  /* While the lane is captured, or this thread captures another lane (THREAD_LOCAL: graph
   * calls on the capturing thread are not measured safe), the launch is plain. */
  if (!g->enabled || g->failed || t4a_lane_capture_blocks_drops_(lane)) return 0;
  t4a_counters *c = t4a_lane_counters(lane);
  if (g->exec == NULL) {
    if (g->fires_left > 0) {
      g->fires_left--;
      return 0;
    }
    t4a_error saved;
    t4a_error_last(&saved);
    t4a_status st = build_graph(drv, c, fn, cfg, params, t4a_lane_stream(lane), g);
    t4a_error_restore(&saved);
    if (st != T4A_OK) {
      g->failed = g->fell_back = 1;
      t4a_counter_add(c, T4A_COUNTER_launch_graph_fallbacks, 1);
      return 0;
    }
    g->built = 1;
    t4a_counter_add(c, T4A_COUNTER_launch_graphs_built, 1);
  } else if (g->dirty) {
    CUDA_KERNEL_NODE_PARAMS p;
    t4a_launch_node_params_(fn, cfg, params, &p);
    if (drv->t.cuGraphExecKernelNodeSetParams(g->exec, g->node, &p) != CUDA_SUCCESS) {
      /* The executable graph still holds the old arguments: never launched again. */
      g->failed = g->fell_back = 1;
      t4a_counter_add(c, T4A_COUNTER_launch_graph_fallbacks, 1);
      return 0;
    }
    g->dirty = 0;
    g->updated = 1;
    t4a_counter_add(c, T4A_COUNTER_launch_graph_updates, 1);
  }
  g->used = 1;
  return 1;
}

/* Marks the function's graph node stale when this launch's config or parameter bytes differ from
 * what it holds (graph_lock held; the layout is known). */
static void note_function_args(t4a_function *fn, const t4a_launch_config *cfg, void **params) {
  int changed = memcmp(&fn->graph_cfg, cfg, sizeof *cfg) != 0;
  if (changed) fn->graph_cfg = *cfg;
  for (uint32_t i = 0; i < fn->num_params; i++) {
    changed |= t4a_launch_store_arg_(fn->graph_bytes + fn->offsets[i], params[i], fn->sizes[i]);
  }
  if (changed) fn->graph.dirty = 1;
}

t4a_status t4a_launch_captured_node_(t4a_driver *drv, t4a_lane *lane, CUgraphNode *out) {
  *out = NULL;
  if (!t4a_lane_is_capturing(lane)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a call during a chain recording was not captured (the capture was "
                          "ended by another call?)");
  }
  if (drv->t.cuStreamGetCaptureInfo == NULL) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuStreamGetCaptureInfo", 0, NULL, 0,
                          "the driver lacks cuStreamGetCaptureInfo (needs 12.3)");
  }
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = NULL;
  const CUgraphNode *deps = NULL;
  size_t n = 0;
  t4a_status st = T4A_CU(drv, cuStreamGetCaptureInfo, t4a_lane_stream(lane), &cs, &id, &graph,
                         &deps, NULL, &n);
  if (st == T4A_OK && (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1 || deps == NULL)) {
    st = t4a_error_set_(T4A_INTERNAL, "cuStreamGetCaptureInfo", 0, NULL, 0,
                        "after a captured call the capture is %s with %zu dependencies (expected "
                        "active, 1: the call's node)",
                        cs == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "active" : "not active", n);
  }
  if (st == T4A_OK) *out = deps[0];
  return st;
}

/* A chain is being recorded: the kernel node this fire just added to the capture (the stream's
 * one dependency now), or why it cannot be known. Context current, inside the admission. */
static void captured_node(t4a_driver *drv, t4a_lane *lane, t4a_launch_graph_ *g) {
  g->node_status = t4a_launch_captured_node_(drv, lane, &g->captured_node);
}

/* Attributes: always cuLaunchKernelEx (a one-node graph would need node attributes). Out of line:
 * the plain path keeps a small frame. */
static __attribute__((noinline)) CUresult launch_ex(t4a_driver *drv, t4a_lane *lane,
                                                    t4a_function *fn, const t4a_launch_config *cfg,
                                                    void **params, const t4a_launch_ex_ *ex) {
  CUlaunchConfig lc;
  t4a_launch_ex_config_(&lc, cfg, t4a_lane_stream(lane));
  lc.attrs = (CUlaunchAttribute *)ex->attrs;
  lc.numAttrs = ex->num;
  return drv->t.cuLaunchKernelEx(&lc, fn->handle, params, NULL);
}

/* The driver failed the launch (inside the admission): refused before enqueue, it is aborted;
 * otherwise the kernel may be queued: its module stays kept until the epoch's event proves it
 * ran (or the lane's teardown leaks it), and its buffers, of unknown state, are quarantined. */
static __attribute__((noinline)) t4a_status launch_failed(t4a_admission *adm, t4a_driver *drv,
                                                          CUresult r, const char *entry,
                                                          t4a_function *fn,
                                                          t4a_buffer *const *buffers,
                                                          uint32_t num_buffers) {
  t4a_status st = t4a_cu_fail(drv, r, entry, 0);
  if (t4a_launch_refused_before_enqueue_(r)) return t4a_admission_abort(adm, st);
  t4a_admission_keep(adm, t4a_module_keepalive_(fn->module));
  t4a_keepalive uncertain[T4A_MAX_KERNEL_PARAMS];
  size_t n = 0;
  for (uint32_t i = 0; i < num_buffers && n < T4A_MAX_KERNEL_PARAMS; i++) {
    int seen = buffers[i] == NULL;
    for (size_t j = 0; j < n && !seen; j++) seen = uncertain[j].object == buffers[i];
    if (seen) continue; /* one quarantined reference per buffer: one leak to count */
    t4a_buffer_retain(buffers[i]);
    uncertain[n++] = (t4a_keepalive){.object = buffers[i], .release = t4a_buffer_release_object_};
  }
  return t4a_admission_fail(adm, st, uncertain, n);
}

t4a_status t4a_launch_enqueue_(t4a_retire *retire, t4a_function *fn, const t4a_launch_config *cfg,
                               void **params, t4a_buffer *const *buffers, uint32_t num_buffers,
                               t4a_launch_graph_ *graph) {
  return t4a_launch_enqueue_ex_(retire, fn, cfg, params, buffers, num_buffers, graph, NULL);
}

t4a_status t4a_launch_enqueue_ex_(t4a_retire *retire, t4a_function *fn,
                                  const t4a_launch_config *cfg, void **params,
                                  t4a_buffer *const *buffers, uint32_t num_buffers,
                                  t4a_launch_graph_ *graph, const t4a_launch_ex_ *ex) {
  uint32_t keep = 1;
  for (uint32_t i = 0; i < num_buffers; i++) keep += buffers[i] != NULL;
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(retire, keep, &adm);
  if (st != T4A_OK) return st;
  const t4a_retire_target_ *target = t4a_retire_target_get_(retire);
  t4a_lane *lane = target->lane;
  /* Every buffer of this lane's own pool (or a view): nothing to order, and the epoch keeps them
   * all (the usual case: one call instead of two per buffer). */
  int local = num_buffers == 0 || t4a_buffers_local_(buffers, num_buffers, lane);
  t4a_driver *drv = fn->module->cache->driver;
  if (T4A_UNLIKELY(cfg->shared_bytes >
                   atomic_load_explicit(&fn->dyn_shared_max, memory_order_acquire)) &&
      (st = t4a_launch_raise_shared_(fn, cfg->shared_bytes)) != T4A_OK) {
    return t4a_admission_abort(&adm, st);
  }
  /* Buffers of another stream's pool (a sibling lane of the domain): this stream waits for
   * their allocation first (amortised; nothing for the pool's own lane). */
  for (uint32_t i = 0; !local && i < num_buffers; i++) {
    if (buffers[i] != NULL && (st = t4a_buffer_use_on_(buffers[i], lane)) != T4A_OK) {
      return t4a_admission_abort(&adm, st);
    }
  }
  int with_attrs = ex != NULL && ex->num > 0;
  /* A checked launch of a function of a GRAPH cache: its own graph, unless another thread is
   * launching it now (its node must not change between the update and the launch). */
  t4a_launch_graph_ *g = graph; /* the descriptor's graph, or the function's */
  int fn_locked = 0;
  if (g == NULL && !with_attrs && fn->graph.enabled &&
      pthread_mutex_trylock(&fn->graph_lock) == 0) {
    fn_locked = 1;
    g = &fn->graph;
    note_function_args(fn, cfg, params);
  }
  CUresult r;
  const char *entry;
  int used = 0;
  if (with_attrs) {
    r = launch_ex(drv, lane, fn, cfg, params, ex);
    entry = "cuLaunchKernelEx";
  } else if (g != NULL && use_graph(drv, lane, fn, cfg, params, g)) {
    r = drv->t.cuGraphLaunch(g->exec, target->stream);
    entry = "cuGraphLaunch";
    used = 1;
  } else {
    r = drv->t.cuLaunchKernel(fn->handle, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0],
                              cfg->block[1], cfg->block[2], cfg->shared_bytes, target->stream,
                              params, NULL);
    entry = "cuLaunchKernel";
  }
  if (fn_locked) pthread_mutex_unlock(&fn->graph_lock);
  if (T4A_UNLIKELY(r != CUDA_SUCCESS)) {
    return launch_failed(&adm, drv, r, entry, fn, buffers, num_buffers);
  }
  if (graph != NULL && graph->want_node) captured_node(drv, lane, graph);
  /* Borrowed keepalives: the caller holds the function (so its module) and the buffers through
   * this call; the epoch takes a reference only to what it does not hold yet, so the warm path
   * (the same module and buffers again) does no reference counting. */
  void *module = fn->module;
  t4a_admission_keep_borrowed_n_(&adm, &module, 1, t4a_module_release_object_,
                                 module_retain_object);
  if (local && num_buffers <= T4A_MAX_KERNEL_PARAMS) {
    if (num_buffers > 0) {
      void *objects[T4A_MAX_KERNEL_PARAMS]; /* as void *: the retire's list is of objects */
      for (uint32_t i = 0; i < num_buffers; i++) objects[i] = buffers[i];
      t4a_admission_keep_borrowed_n_(&adm, objects, num_buffers, t4a_buffer_release_object_,
                                     buffer_retain_object);
    }
  } else {
    for (uint32_t i = 0; i < num_buffers; i++) {
      /* A buffer of another stream's pool is ordered by its marks instead (t4a_buffer_used_on_). */
      if (buffers[i] == NULL || !t4a_buffer_used_on_(buffers[i], lane)) continue;
      void *b = buffers[i];
      t4a_admission_keep_borrowed_n_(&adm, &b, 1, t4a_buffer_release_object_, buffer_retain_object);
    }
  }
  /* Counted under the admission's lock, into the retire's single-writer shard. */
  if (used) t4a_admission_count_(&adm, T4A_COUNTER_launch_graph_fires, 1);
  t4a_admission_commit_counting_(&adm, T4A_COUNTER_launches, 1);
  return T4A_OK;
}

/* ---- public launches ---------------------------------------------------------------------- */

static t4a_status launch_args(t4a_retire *retire, t4a_function *fn,
                              const t4a_launch_config *config, const t4a_launch_attrs *attrs,
                              const t4a_arg *args, uint32_t num_args) {
  uint64_t domain = 0;
  t4a_status st = check_common(retire, fn, config, &domain);
  if (st != T4A_OK) return st;
  if (num_args > 0 && args == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "args is NULL");
  }
  uint32_t expected = fn->num_params;
  if (!fn->known && (st = t4a_launch_expected_params_(fn, &expected)) != T4A_OK) return st;
  if ((st = check_count(fn, expected, num_args)) != T4A_OK) return st;
  /* Everything on this stack frame: no heap on the warm path. */
  void *params[T4A_MAX_KERNEL_PARAMS];
  uint64_t scratch[T4A_MAX_KERNEL_PARAMS];
  t4a_buffer *buffers[T4A_MAX_KERNEL_PARAMS];
  for (uint32_t i = 0; i < num_args; i++) {
    const void *src = NULL;
    uint32_t size = 0;
    if (!arg_passes(fn, domain, i, &args[i], &scratch[i], &src, &size, &buffers[i]) &&
        (st = check_arg_full(fn, domain, i, &args[i], &scratch[i], &src, &size, &buffers[i])) !=
            T4A_OK) {
      return st;
    }
    params[i] = (void *)(uintptr_t)src;
  }
  if (attrs == NULL) { /* no attributes: nothing to check or to clear */
    return t4a_launch_enqueue_ex_(retire, fn, config, num_args > 0 ? params : NULL, buffers,
                                  num_args, NULL, NULL);
  }
  t4a_launch_ex_ ex;
  if ((st = t4a_launch_check_attrs_(fn, config, attrs, &ex)) != T4A_OK) return st;
  return t4a_launch_enqueue_ex_(retire, fn, config, num_args > 0 ? params : NULL, buffers,
                                num_args, NULL, &ex);
}

t4a_status t4a_launch(t4a_retire *retire, t4a_function *fn, const t4a_launch_config *config,
                      const t4a_arg *args, uint32_t num_args) {
  return launch_args(retire, fn, config, NULL, args, num_args);
}

t4a_status t4a_launch_ex(t4a_retire *retire, t4a_function *fn, const t4a_launch_config *config,
                         const t4a_launch_attrs *attrs, const t4a_arg *args, uint32_t num_args) {
  return launch_args(retire, fn, config, attrs, args, num_args);
}

static t4a_status launch_bytes(t4a_retire *retire, t4a_function *fn,
                               const t4a_launch_config *config, const t4a_launch_attrs *attrs,
                               const void *params, size_t bytes, const uint32_t *offsets,
                               uint32_t num_params) {
  uint64_t domain = 0;
  t4a_status st = check_common(retire, fn, config, &domain);
  if (st != T4A_OK) return st;
  if (num_params > 0 && (params == NULL || offsets == NULL)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "params or offsets is NULL");
  }
  uint32_t expected = 0;
  if ((st = t4a_launch_expected_params_(fn, &expected)) != T4A_OK) return st;
  if ((st = check_count(fn, expected, num_params)) != T4A_OK) return st;
  void *ptrs[T4A_MAX_KERNEL_PARAMS];
  for (uint32_t i = 0; i < num_params; i++) {
    size_t off = offsets[i];
    if (off >= bytes || (i > 0 && off <= offsets[i - 1])) {
      return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                            "kernel '%s' parameter %u: offset %zu is not ascending inside the "
                            "%zu packed bytes",
                            fn->name, i, off, bytes);
    }
    if (fn->known && off != fn->offsets[i]) {
      return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                            "kernel '%s' parameter %u: at offset %zu; the kernel's is at %u",
                            fn->name, i, off, fn->offsets[i]);
    }
    ptrs[i] = (void *)((uintptr_t)params + off);
  }
  /* With every offset the kernel's, the sizes they imply are the kernel's too, padding
   * included; the last parameter's (bytes - its offset) may carry padding up to 8 bytes. */
  if (fn->known && num_params > 0) {
    uint32_t last = num_params - 1;
    size_t size = fn->sizes[last], implied = bytes - offsets[last];
    if (implied < size || implied > (size + 7) / 8 * 8) {
      return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                            "kernel '%s' parameter %u: %zu bytes packed for a %zu-byte parameter",
                            fn->name, last, implied, size);
    }
  }
  t4a_launch_ex_ ex;
  if ((st = t4a_launch_check_attrs_(fn, config, attrs, &ex)) != T4A_OK) return st;
  return t4a_launch_enqueue_ex_(retire, fn, config, num_params > 0 ? ptrs : NULL, NULL, 0, NULL,
                                &ex);
}

t4a_status t4a_launch_raw(t4a_retire *retire, t4a_function *fn, const t4a_launch_config *config,
                          const void *params, size_t bytes, const uint32_t *offsets,
                          uint32_t num_params) {
  return launch_bytes(retire, fn, config, NULL, params, bytes, offsets, num_params);
}

t4a_status t4a_launch_raw_ex(t4a_retire *retire, t4a_function *fn,
                             const t4a_launch_config *config, const t4a_launch_attrs *attrs,
                             const void *params, size_t bytes, const uint32_t *offsets,
                             uint32_t num_params) {
  return launch_bytes(retire, fn, config, attrs, params, bytes, offsets, num_params);
}
