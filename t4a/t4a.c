/* The facade's own code: the composed runtime (t4a/t4a.h). Its stats JSON is stats_json.c. */
#include "t4a/t4a.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_retire/retire_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/runtime_internal.h"

#define T4A_STR_(x) #x
#define T4A_STR(x) T4A_STR_(x)

const char *t4a_version_string(void) {
  return T4A_STR(T4A_VERSION_MAJOR) "." T4A_STR(T4A_VERSION_MINOR) "." T4A_STR(T4A_VERSION_PATCH);
}

static t4a_status null_runtime(void) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "the runtime is NULL");
}

/* A copy of `s` on the heap (NULL for NULL: then *out is NULL and the call succeeds). */
static t4a_status copy_string(const char *s, char **out) {
  *out = NULL;
  if (s == NULL) return T4A_OK;
  size_t n = strlen(s) + 1;
  char *c = t4a_host_malloc(n);
  if (c == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(c, s, n);
  *out = c;
  return T4A_OK;
}

/* Releases every piece in teardown order; returns the retirement state's verdict. */
static t4a_status teardown(t4a_runtime *rt) {
  /* Streams first: their retires hold the pool's buffers and the table's modules. */
  t4a_status streams = rt->lock_ready ? t4a_runtime_streams_close_(rt) : T4A_OK;
  t4a_launch_table_destroy(rt->table);
  t4a_module_cache_destroy(rt->modules);
  t4a_xfer_destroy(rt->xfer);
  if (rt->own_artifacts) t4a_nvrtc_cache_destroy(rt->artifacts);
  if (rt->own_links) t4a_jitlink_cache_destroy(rt->links);
  t4a_status st = t4a_retire_destroy(rt->retire);
  int healthy = st == T4A_OK && rt->lane != NULL && !t4a_lane_is_abandoned(rt->lane) &&
                !t4a_lane_is_broken(rt->lane);
  /* After a proved drain, return the pool's cached blocks now: a buffer still held (by the
   * caller, or quarantined forever by a failed operation) keeps the pool alive, and its reuse
   * cache — blocks nobody uses any more, up to reuse_max_bytes — would go with the pool's last
   * release only, which a quarantined buffer never makes (found by testing/fuzz/ops_fuzz.c;
   * test_close_returns_cached_blocks). A failure here leaves them cached, as before. */
  /* And the pool caches nothing from now on: a buffer the caller releases after close frees its
   * block and waits for it, since nobody drains this lane any more — else a pool kept alive by a
   * quarantined buffer cached those blocks for ever, uncounted, and a device fault after such a
   * release left its free unrun and uncounted (found by testing/fuzz/ops_fuzz.c;
   * test_release_after_close_then_fault, test_release_after_close_with_quarantine). */
  t4a_mem_pool_close_(rt->pool);
  if (healthy && rt->pool != NULL) {
    t4a_error saved;
    t4a_error_last(&saved);
    if (t4a_mem_pool_trim(rt->pool) != T4A_OK) t4a_error_restore(&saved);
  } else if (rt->pool != NULL && rt->retire != NULL) {
    /* No proved drain: the cache can never be freed; abandoning leaks and counts it now
     * (test_close_counts_cached_blocks_of_a_lost_lane). */
    t4a_mem_pool_abandon_(rt->pool);
  }
  t4a_mem_pool_release(rt->pool);
  /* The lane's marker event (made when a stream was ordered after this one's work) goes now: a
   * quarantined buffer may keep the lane alive for ever. */
  t4a_lane_drop_marker_(rt->lane);
  /* After a proved drain, let the pool's last frees run while the context is certainly alive:
   * the lane's release may release the primary context (one counted host wait). */
  if (healthy) st = t4a_lane_synchronize(rt->lane);
  t4a_lane_release(rt->lane);
  t4a_driver_release(rt->driver);
  if (rt->lock_ready) pthread_mutex_destroy(&rt->lock);
  free(rt->nvrtc_path);
  free(rt->toolkit);
  free(rt->disk_dir);
  free(rt);
  return st != T4A_OK ? st : streams;
}

static t4a_status set_target(t4a_runtime *rt, const t4a_runtime_options *o) {
  if (o->target != NULL) {
    size_t n = strlen(o->target);
    if (n == 0 || n >= sizeof rt->target) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "options.target must be 1..%zu characters (\"sm_90\")",
                            sizeof rt->target - 1);
    }
    memcpy(rt->target, o->target, n + 1);
    return T4A_OK;
  }
  t4a_device_info info;
  t4a_status st = t4a_device_query(rt->driver, rt->ordinal, &info);
  if (st != T4A_OK) return st;
  snprintf(rt->target, sizeof rt->target, "sm_%d%d", info.cc_major, info.cc_minor);
  return T4A_OK;
}

/* Calibrates once per driver and device (t4a_launch_calibrate_device: the process's table). A
 * failure leaves no figures: the runtime opens with PLAIN (AUTO's choice without a calibration),
 * and the stats say why. */
static void calibrate(t4a_runtime *rt) {
  t4a_status st = t4a_launch_calibrate_device(rt->driver, rt->ordinal, &rt->calibration);
  if (st == T4A_OK) {
    rt->calibrated = 1;
  } else {
    rt->calibration_failed = st;
  }
}

static t4a_status open_pieces(t4a_runtime *rt, const t4a_runtime_options *o) {
  const t4a_launch_policy *ml = &o->modules.launch;
  if (ml->strategy != T4A_LAUNCH_STRATEGY_AUTO || ml->graph_after != 0 || ml->calibration != NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                         "options.modules.launch is not the default: the runtime's launch policy "
                         "is options.launch");
  }
  t4a_status st = t4a_lane_create(rt->driver, rt->ordinal, &o->lane, &rt->lane);
  if (st == T4A_OK) st = t4a_mem_pool_create(rt->lane, &o->pool, &rt->pool);
  if (st == T4A_OK) st = t4a_retire_create(rt->lane, &o->retire, &rt->retire);
  if (st == T4A_OK && o->launch.calibration != NULL) {
    rt->calibration = *o->launch.calibration;
    rt->calibrated = 1;
  } else if (st == T4A_OK && o->calibrate_launches) {
    calibrate(rt);
  }
  if (st == T4A_OK) st = t4a_xfer_create(rt->retire, &o->xfer, &rt->xfer);
  rt->xfer_options = o->xfer;
  /* One launch policy for the module cache and the table: the runtime's. */
  t4a_launch_policy launch = o->launch;
  launch.calibration = rt->calibrated ? &rt->calibration : NULL;
  if (st == T4A_OK) {
    t4a_module_cache_options mo = o->modules;
    mo.launch = launch;
    st = t4a_module_cache_create(rt->retire, &mo, &rt->modules);
  }
  if (st == T4A_OK) {
    t4a_launch_table_options to = T4A_LAUNCH_TABLE_OPTIONS_INIT;
    to.capacity = o->table_capacity != 0 ? o->table_capacity : T4A_RUNTIME_DEFAULT_TABLE_CAPACITY;
    to.launch = launch;
    st = t4a_launch_table_create(rt->retire, &to, &rt->table);
  }
  if (st == T4A_OK) st = set_target(rt, o);
  if (st == T4A_OK) st = copy_string(o->nvrtc.library_path, &rt->nvrtc_path);
  if (st == T4A_OK) st = copy_string(o->artifacts.disk_dir, &rt->disk_dir);
  if (st == T4A_OK && (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) ||
                       pthread_mutex_init(&rt->lock, NULL) != 0)) {
    st = t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                        "cannot initialise the runtime's lock");
  }
  if (st == T4A_OK) rt->lock_ready = 1;
  return st;
}

t4a_status t4a_runtime_open(int ordinal, const t4a_runtime_options *options, t4a_runtime **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  static const t4a_runtime_options defaults = T4A_RUNTIME_OPTIONS_INIT;
  const t4a_runtime_options *o = options != NULL ? options : &defaults;
  t4a_runtime *rt = t4a_host_calloc(1, sizeof *rt);
  if (rt == NULL) return T4A_HOST_OUT_OF_MEMORY;
  rt->ordinal = ordinal;
  rt->compile_ptx = o->compile_ptx;
  t4a_status st = T4A_OK;
  if (o->driver != NULL) {
    t4a_driver_retain(o->driver);
    rt->driver = o->driver;
  } else {
    st = t4a_driver_get_default(&rt->driver);
  }
  if (st == T4A_OK) st = open_pieces(rt, o);
  if (st != T4A_OK) {
    /* Cleanup keeps the first failure's detail (a drain that fails here is counted). */
    t4a_error saved;
    t4a_error_last(&saved);
    (void)teardown(rt);
    t4a_error_restore(&saved);
    return st;
  }
  if (o->artifact_cache != NULL) rt->artifacts = o->artifact_cache;
  if (o->link_cache != NULL) rt->links = o->link_cache;
  rt->artifact_options = o->artifacts;
  rt->no_toolkit_roots = o->no_toolkit_roots;
  rt->artifact_options.disk_dir = rt->disk_dir;
  rt->artifact_options.compile_uncacheable = !o->refuse_uncacheable;
  *out = rt;
  return T4A_OK;
}

t4a_status t4a_runtime_close(t4a_runtime *rt) {
  if (rt == NULL) return T4A_OK;
  /* From inside one of this runtime's own admissions (a raw scope's callback) nothing may be
   * torn down: probe the lane's operation lock first. Any other answer of the probe is left to
   * the teardown (which meets it again, or not), with the caller's detail kept — a REENTRY for
   * lock order too (inside another runtime's scope whose lane comes after this one's): no other
   * thread may use a runtime being closed, so its teardown waits for no one. */
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_admission adm;
  t4a_status probe = t4a_admission_begin(rt->retire, 0, &adm);
  if (probe == T4A_REENTRY && t4a_retire_held_by_this_thread_(rt->retire)) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "t4a_runtime_close called from inside one of the runtime's own "
                          "admissions (a raw scope's callback): nothing was closed");
  }
  if (probe == T4A_OK) (void)t4a_admission_abort(&adm, T4A_OK);
  if (rt->lock_ready && t4a_runtime_streams_held_(rt)) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "t4a_runtime_close called from inside an admission of one of the "
                          "runtime's streams (a raw scope's callback): nothing was closed");
  }
  t4a_error_restore(&saved);
  return teardown(rt);
}

/* ---- accessors ---- */

t4a_driver *t4a_runtime_driver(const t4a_runtime *rt) { return rt != NULL ? rt->driver : NULL; }
int t4a_runtime_ordinal(const t4a_runtime *rt) { return rt != NULL ? rt->ordinal : -1; }
t4a_lane *t4a_runtime_lane(const t4a_runtime *rt) { return rt != NULL ? rt->lane : NULL; }
t4a_mem_pool *t4a_runtime_pool(const t4a_runtime *rt) { return rt != NULL ? rt->pool : NULL; }
t4a_retire *t4a_runtime_retire(const t4a_runtime *rt) { return rt != NULL ? rt->retire : NULL; }
t4a_xfer *t4a_runtime_xfer(const t4a_runtime *rt) { return rt != NULL ? rt->xfer : NULL; }
t4a_module_cache *t4a_runtime_module_cache(const t4a_runtime *rt) {
  return rt != NULL ? rt->modules : NULL;
}
t4a_launch_table *t4a_runtime_table(const t4a_runtime *rt) {
  return rt != NULL ? rt->table : NULL;
}

int t4a_runtime_launch_calibration(const t4a_runtime *rt, t4a_launch_calibration *out) {
  if (rt == NULL || !rt->calibrated) return 0;
  if (out != NULL) *out = rt->calibration;
  return 1;
}
const char *t4a_runtime_target(const t4a_runtime *rt) { return rt != NULL ? rt->target : NULL; }

t4a_nvrtc_cache *t4a_runtime_artifact_cache(t4a_runtime *rt) {
  if (rt == NULL) return NULL;
  pthread_mutex_lock(&rt->lock);
  t4a_nvrtc_cache *c = rt->artifacts;
  pthread_mutex_unlock(&rt->lock);
  return c;
}

/* ---- short paths ---- */

t4a_status t4a_runtime_buffer(t4a_runtime *rt, size_t bytes, t4a_buffer **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  return t4a_buffer_create(rt->pool, bytes, 0, 0, out);
}

t4a_status t4a_runtime_upload(t4a_runtime *rt, t4a_buffer *dst, size_t offset, const void *src,
                              size_t bytes) {
  if (rt == NULL) return null_runtime();
  return t4a_xfer_upload(rt->xfer, dst, offset, src, bytes);
}

t4a_status t4a_runtime_download(t4a_runtime *rt, t4a_buffer *src, size_t offset, void *dst,
                                size_t bytes) {
  if (rt == NULL) return null_runtime();
  t4a_xfer_pending *p = NULL;
  t4a_status st = t4a_xfer_download(rt->xfer, src, offset, dst, bytes, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  t4a_xfer_pending_release(p);
  return st;
}

t4a_status t4a_runtime_copy(t4a_runtime *rt, t4a_buffer *dst, size_t dst_offset, t4a_buffer *src,
                            size_t src_offset, size_t bytes) {
  if (rt == NULL) return null_runtime();
  return t4a_xfer_copy(rt->xfer, dst, dst_offset, rt->xfer, src, src_offset, bytes,
                       T4A_COPY_AUTO, NULL, NULL);
}

static void restore_error(const t4a_error *saved) {
  if (saved->status == T4A_OK) {
    t4a_error_clear();
  } else {
    t4a_error_set_(saved->status, saved->entry, saved->code, saved->code_name, saved->bytes, "%s",
                   saved->message);
  }
}

/* The toolkit's include roots, looked for once (caller holds rt->lock). Not finding it never
 * fails a compile by itself: it is kept, with where t4a looked, for a compile that needs it. Only
 * running out of memory fails (the compile must not go on without the roots it would have had). */
static t4a_status find_toolkit(t4a_runtime *rt, const char *libnvrtc) {
  if (rt->toolkit_tried || rt->no_toolkit_roots) return T4A_OK;
  t4a_error saved;
  t4a_error_last(&saved);
  rt->toolkit = t4a_host_calloc(1, sizeof *rt->toolkit);
  if (rt->toolkit == NULL) {
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, NULL, 0, NULL, sizeof *rt->toolkit,
                          "the toolkit's include roots");
  }
  rt->toolkit_tried = 1;
  rt->toolkit_status = t4a_nvrtc_toolkit_find(libnvrtc, rt->toolkit);
  restore_error(&saved);
  return T4A_OK;
}

/* The artifact cache, created at the first call unless the options gave one. */
static t4a_status artifact_cache(t4a_runtime *rt, t4a_nvrtc_cache **out) {
  *out = NULL;
  t4a_status st = T4A_OK;
  pthread_mutex_lock(&rt->lock);
  if (rt->artifacts == NULL) {
    /* NVRTC itself is loaded at the cache's first miss: a process whose kernels are all on disk
     * never loads it. No library file at all is NVRTC_NOT_FOUND here, asked again next time. */
    t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
    lo.library_path = rt->nvrtc_path;
    st = t4a_nvrtc_cache_create_lazy(&lo, &rt->artifact_options, &rt->artifacts);
    if (st == T4A_OK) rt->own_artifacts = 1;
  }
  if (st == T4A_OK) st = find_toolkit(rt, rt->nvrtc_path);
  *out = rt->artifacts;
  pthread_mutex_unlock(&rt->lock);
  return st;
}

t4a_status t4a_runtime_compile_request(t4a_runtime *rt, const t4a_nvrtc_request *request,
                                       t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  if (request == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "request or out is NULL");
  }
  t4a_nvrtc_cache *cache = NULL;
  t4a_status st = artifact_cache(rt, &cache);
  if (st != T4A_OK) return st;
  t4a_nvrtc_request r = *request;
  if (r.target == NULL) r.target = rt->target;
  /* The toolkit's roots after the request's own (nvcc searches -I before its own folders). */
  const char *roots[T4A_NVRTC_MAX_INCLUDE_ROOTS];
  int missing = 0;
  if (!rt->no_toolkit_roots) {
    pthread_mutex_lock(&rt->lock);
    int found = rt->toolkit_tried && rt->toolkit_status == T4A_OK;
    missing = rt->toolkit_tried && !found;
    pthread_mutex_unlock(&rt->lock);
    if (found && r.num_include_roots + rt->toolkit->num_roots > T4A_NVRTC_MAX_INCLUDE_ROOTS) {
      return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                            "%zu include roots and the toolkit's %zu: at most %u",
                            r.num_include_roots, rt->toolkit->num_roots,
                            T4A_NVRTC_MAX_INCLUDE_ROOTS);
    }
    if (found && (r.num_include_roots == 0 || r.include_roots != NULL)) {
      for (size_t i = 0; i < r.num_include_roots; i++) roots[i] = r.include_roots[i];
      for (size_t i = 0; i < rt->toolkit->num_roots; i++) {
        roots[r.num_include_roots + i] = rt->toolkit->roots[i];
      }
      r.include_roots = roots;
      r.num_include_roots += rt->toolkit->num_roots;
    }
  }
  st = t4a_nvrtc_cache_compile(cache, &r, out, out_outcome);
  if (st == T4A_INVALID_ARGUMENT && missing) {
    t4a_error e;
    t4a_error_last(&e);
    if (strstr(e.message, "names no header") != NULL) { /* an include nothing provides */
      st = t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_runtime_compile", 0, NULL, 0,
                          "no CUDA toolkit for the default include roots (looked in %.120s): "
                          "%.200s",
                          rt->toolkit->looked, e.message);
    }
  }
  return st;
}

t4a_status t4a_runtime_compile(t4a_runtime *rt, const char *source, const char *program_name,
                               t4a_nvrtc_artifact **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = program_name;
  r.source = source;
  r.target = rt->target;
  int ptx = rt->compile_ptx || strncmp(rt->target, "compute_", 8) == 0;
  r.output = ptx ? T4A_NVRTC_OUTPUT_PTX : T4A_NVRTC_OUTPUT_CUBIN;
  return t4a_runtime_compile_request(rt, &r, out, NULL);
}

t4a_status t4a_runtime_compile_lto(t4a_runtime *rt, const char *source, const char *program_name,
                                   t4a_nvrtc_artifact **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  static const char *const rdc[1] = {"-rdc=true"};
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = program_name;
  r.source = source;
  r.target = rt->target;
  r.output = T4A_NVRTC_OUTPUT_LTOIR;
  r.options = rdc;
  r.num_options = 1;
  return t4a_runtime_compile_request(rt, &r, out, NULL);
}

/* The link cache: the caller's, or created at the first link: nvJitLink opened by its default
 * search, the disk level in the artifact cache's directory (the runtime's own cache's, or the
 * borrowed one's). */
static t4a_status link_cache(t4a_runtime *rt, t4a_jitlink_cache **out) {
  *out = NULL;
  t4a_status st = T4A_OK;
  pthread_mutex_lock(&rt->lock);
  if (rt->links == NULL) {
    t4a_jitlink_lib *lib = NULL;
    st = t4a_jitlink_lib_open(NULL, &lib);
    if (st == T4A_OK) {
      t4a_jitlink_cache_options lo = T4A_JITLINK_CACHE_OPTIONS_INIT;
      lo.disk_dir = rt->artifacts != NULL ? t4a_nvrtc_cache_disk_dir(rt->artifacts)
                                          : rt->artifact_options.disk_dir;
      lo.disk_max_bytes = rt->artifact_options.disk_max_bytes;
      st = t4a_jitlink_cache_create(lib, &lo, &rt->links);
      t4a_jitlink_lib_release(lib); /* the cache holds it */
    }
    if (st == T4A_OK) rt->own_links = 1;
  }
  *out = rt->links;
  pthread_mutex_unlock(&rt->lock);
  return st;
}

t4a_status t4a_runtime_link(t4a_runtime *rt, const t4a_jitlink_request *request,
                            t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  if (request == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "request or out is NULL");
  }
  t4a_jitlink_cache *cache = NULL;
  t4a_status st = link_cache(rt, &cache);
  if (st != T4A_OK) return st;
  t4a_jitlink_request r = *request;
  char target[40];
  if (r.target == NULL) {
    const char *t = rt->target;
    if (strncmp(t, "compute_", 8) == 0) {
      snprintf(target, sizeof target, "sm_%.30s", t + 8);
    } else {
      snprintf(target, sizeof target, "%.39s", t);
    }
    r.target = target;
  }
  return t4a_jitlink_cache_link(cache, &r, out, out_outcome);
}

t4a_status t4a_runtime_kernel_linked(t4a_runtime *rt, const char *source,
                                     const t4a_nvrtc_artifact *const *libraries,
                                     size_t num_libraries, const char *name, t4a_function **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  if (name == NULL || out == NULL || (libraries == NULL && num_libraries > 0)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "name or out is NULL, or libraries is NULL with num_libraries > 0");
  }
  if (num_libraries >= 65536) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0, "at most 65535 libraries");
  }
  const t4a_nvrtc_artifact **inputs = t4a_host_malloc((num_libraries + 1) * sizeof *inputs);
  if (inputs == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_nvrtc_artifact *k = NULL, *linked = NULL;
  t4a_module *m = NULL;
  t4a_status st = t4a_runtime_compile_lto(rt, source, NULL, &k);
  if (st == T4A_OK) {
    inputs[0] = k;
    for (size_t i = 0; i < num_libraries; i++) inputs[i + 1] = libraries[i];
    t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
    r.inputs = inputs;
    r.num_inputs = num_libraries + 1;
    st = t4a_runtime_link(rt, &r, &linked, NULL);
  }
  if (st == T4A_OK) st = t4a_runtime_load(rt, linked, &m);
  if (st == T4A_OK) st = t4a_runtime_function(rt, m, name, out);
  t4a_module_release(m); /* the function holds its module */
  t4a_nvrtc_artifact_release(linked);
  t4a_nvrtc_artifact_release(k);
  free(inputs);
  return st;
}

t4a_status t4a_runtime_load(t4a_runtime *rt, const t4a_nvrtc_artifact *artifact,
                            t4a_module **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  return t4a_module_load_artifact(rt->modules, artifact, out);
}

t4a_status t4a_runtime_load_image(t4a_runtime *rt, const void *image, size_t bytes,
                                  t4a_module **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  return t4a_module_load(rt->modules, image, bytes, T4A_IMAGE_AUTO, out);
}

t4a_status t4a_runtime_function(t4a_runtime *rt, t4a_module *module, const char *name,
                                t4a_function **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  t4a_function *f = NULL;
  t4a_status st = t4a_module_get_function(module, name, &f);
  if (st != T4A_OK) return st;
  uint64_t mine = t4a_lane_domain(rt->lane), its = t4a_function_domain(f);
  if (its != mine) {
    t4a_function_release(f);
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the module of kernel '%s' belongs to domain %" PRIu64
                          ", not this runtime's (%" PRIu64 ")",
                          name, its, mine);
  }
  *out = f;
  return T4A_OK;
}

t4a_status t4a_runtime_global(t4a_runtime *rt, t4a_module *module, const char *name,
                              size_t expected_bytes, t4a_buffer **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  t4a_buffer *g = NULL;
  t4a_status st = t4a_module_get_global(module, name, expected_bytes, &g);
  if (st != T4A_OK) return st;
  uint64_t mine = t4a_lane_domain(rt->lane), its = t4a_buffer_domain(g);
  if (its != mine) {
    t4a_buffer_release(g);
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the module of global '%s' belongs to domain %" PRIu64
                          ", not this runtime's (%" PRIu64 ")",
                          name, its, mine);
  }
  *out = g;
  return T4A_OK;
}

t4a_status t4a_runtime_kernel(t4a_runtime *rt, const char *source, const char *name,
                              t4a_function **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return null_runtime();
  if (name == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "name or out is NULL");
  }
  t4a_nvrtc_artifact *a = NULL;
  t4a_module *m = NULL;
  t4a_status st = t4a_runtime_compile(rt, source, NULL, &a);
  if (st == T4A_OK) st = t4a_runtime_load(rt, a, &m);
  if (st == T4A_OK) st = t4a_runtime_function(rt, m, name, out);
  t4a_module_release(m); /* the function holds its module */
  t4a_nvrtc_artifact_release(a);
  return st;
}

t4a_status t4a_runtime_launch(t4a_runtime *rt, t4a_function *function, uint32_t grid,
                              uint32_t block, const t4a_arg *args, uint32_t num_args) {
  if (rt == NULL) return null_runtime();
  t4a_launch_config c = {{grid, 1, 1}, {block, 1, 1}, 0};
  return t4a_launch(rt->retire, function, &c, args, num_args);
}

t4a_status t4a_runtime_sync(t4a_runtime *rt) {
  if (rt == NULL) return null_runtime();
  return t4a_retire_wait(rt->retire);
}

/* ---- stats ---- */

void t4a_runtime_stats(const t4a_runtime *rt, t4a_counter_values *out) {
  if (out == NULL) return;
  if (rt == NULL) {
    memset(out, 0, sizeof *out);
    return;
  }
  t4a_lane_stats(rt->lane, out);
}
