/* The facade's own code: the composed runtime (t4a/t4a.h). */
#include "t4a/t4a.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T4A_STR_(x) #x
#define T4A_STR(x) T4A_STR_(x)

const char *t4a_version_string(void) {
  return T4A_STR(T4A_VERSION_MAJOR) "." T4A_STR(T4A_VERSION_MINOR) "." T4A_STR(T4A_VERSION_PATCH);
}

struct t4a_runtime {
  t4a_driver *driver; /* a reference */
  int ordinal;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  t4a_module_cache *modules;
  t4a_launch_table *table;
  int calibrated; /* 1: `calibration` holds what the table was created with */
  t4a_status calibration_failed; /* why calibrate_launches gave no figures (T4A_OK: it did) */
  t4a_launch_calibration calibration;
  char target[32];
  int compile_ptx;
  /* Compilation, opened at the first compile. `lock` guards `artifacts` (and its creation). */
  pthread_mutex_t lock;
  int lock_ready;
  t4a_nvrtc_cache *artifacts; /* the caller's (borrowed) or the runtime's own */
  int own_artifacts;          /* 1: created here, destroyed at close */
  char *nvrtc_path;           /* copies of the string options (NULL when not given) */
  char *disk_dir;
  t4a_nvrtc_cache_options artifact_options; /* disk_dir pointing at the copy above */
};

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
  t4a_launch_table_destroy(rt->table);
  t4a_module_cache_destroy(rt->modules);
  t4a_xfer_destroy(rt->xfer);
  if (rt->own_artifacts) t4a_nvrtc_cache_destroy(rt->artifacts);
  t4a_status st = t4a_retire_destroy(rt->retire);
  int healthy = st == T4A_OK && rt->lane != NULL && !t4a_lane_is_abandoned(rt->lane) &&
                !t4a_lane_is_broken(rt->lane);
  /* After a proved drain, return the pool's cached blocks now: a buffer still held (by the
   * caller, or quarantined forever by a failed operation) keeps the pool alive, and its reuse
   * cache — blocks nobody uses any more, up to reuse_max_bytes — would go with the pool's last
   * release only, which a quarantined buffer never makes (found by testing/fuzz/ops_fuzz.c;
   * test_close_returns_cached_blocks). A failure here leaves them cached, as before. */
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
  /* After a proved drain, let the pool's last frees run while the context is certainly alive:
   * the lane's release may release the primary context (one counted host wait). */
  if (healthy) st = t4a_lane_synchronize(rt->lane);
  t4a_lane_release(rt->lane);
  t4a_driver_release(rt->driver);
  if (rt->lock_ready) pthread_mutex_destroy(&rt->lock);
  free(rt->nvrtc_path);
  free(rt->disk_dir);
  free(rt);
  return st;
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

/* The empty kernel calibration fires: PTX for any device the driver can JIT for. */
static const char k_nop_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry t4a_nop()\n{\n  ret;\n}\n";

/* Calibrations made in this process, by driver and device (a later runtime reuses them). */
static pthread_mutex_t g_calibration_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const t4a_driver *driver;
  int ordinal;
  t4a_launch_calibration c;
} g_calibrations[16];
static unsigned g_num_calibrations;

/* Calibrates once per driver and device (the lock held across the measurement: two runtimes
 * opening at once measure once). */
static t4a_status calibrate(t4a_runtime *rt) {
  pthread_mutex_lock(&g_calibration_lock);
  for (unsigned i = 0; i < g_num_calibrations; i++) {
    if (g_calibrations[i].driver == rt->driver && g_calibrations[i].ordinal == rt->ordinal) {
      rt->calibration = g_calibrations[i].c;
      rt->calibrated = 1;
      pthread_mutex_unlock(&g_calibration_lock);
      return T4A_OK;
    }
  }
  /* A lane, retirement state and module cache of its own on the same device, gone before the
   * runtime's pieces are used: the runtime's counters see none of the calibration's launches,
   * waits or module load. */
  t4a_lane *lane = NULL;
  t4a_retire *retire = NULL;
  t4a_module_cache *cache = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_status st = t4a_lane_create(rt->driver, rt->ordinal, NULL, &lane);
  if (st == T4A_OK) st = t4a_retire_create(lane, NULL, &retire);
  if (st == T4A_OK) st = t4a_module_cache_create(retire, NULL, &cache);
  if (st == T4A_OK) st = t4a_module_load(cache, k_nop_ptx, sizeof k_nop_ptx, T4A_IMAGE_PTX, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "t4a_nop", &fn);
  if (st == T4A_OK) st = t4a_launch_calibrate(retire, fn, 0, &rt->calibration);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(cache);
  t4a_status dst = retire != NULL ? t4a_retire_destroy(retire) : T4A_OK;
  t4a_lane_release(lane);
  t4a_error_restore(&saved);
  if (st == T4A_OK) st = dst;
  if (st != T4A_OK) {
    /* No figures: the runtime opens with PLAIN (AUTO's choice without a calibration), and the
     * stats say why. */
    rt->calibration_failed = st;
    memset(&rt->calibration, 0, sizeof rt->calibration);
  } else {
    rt->calibrated = 1;
    unsigned slot = g_num_calibrations < 16 ? g_num_calibrations++ : 15;
    g_calibrations[slot].driver = rt->driver;
    g_calibrations[slot].ordinal = rt->ordinal;
    g_calibrations[slot].c = rt->calibration;
  }
  pthread_mutex_unlock(&g_calibration_lock);
  return T4A_OK;
}

static t4a_status open_pieces(t4a_runtime *rt, const t4a_runtime_options *o) {
  t4a_status st = t4a_lane_create(rt->driver, rt->ordinal, &o->lane, &rt->lane);
  if (st == T4A_OK) st = t4a_mem_pool_create(rt->lane, &o->pool, &rt->pool);
  if (st == T4A_OK) st = t4a_retire_create(rt->lane, &o->retire, &rt->retire);
  if (st == T4A_OK && o->calibrate_launches) st = calibrate(rt);
  if (st == T4A_OK) st = t4a_xfer_create(rt->retire, &o->xfer, &rt->xfer);
  if (st == T4A_OK) {
    /* Checked launches follow the runtime's strategy unless the cache's options name one. */
    t4a_module_cache_options mo = o->modules;
    if (mo.launch_strategy == T4A_LAUNCH_STRATEGY_AUTO) mo.launch_strategy = o->launch_strategy;
    if (mo.graph_after == 0) mo.graph_after = o->graph_after;
    if (mo.calibration == NULL && rt->calibrated) mo.calibration = &rt->calibration;
    st = t4a_module_cache_create(rt->retire, &mo, &rt->modules);
  }
  if (st == T4A_OK) {
    t4a_launch_table_options to = T4A_LAUNCH_TABLE_OPTIONS_INIT;
    to.capacity = o->table_capacity != 0 ? o->table_capacity : T4A_RUNTIME_DEFAULT_TABLE_CAPACITY;
    to.strategy = o->launch_strategy;
    to.graph_after = o->graph_after;
    to.calibration = rt->calibrated ? &rt->calibration : NULL;
    st = t4a_launch_table_create_ex(rt->retire, &to, &rt->table);
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
  rt->artifact_options = o->artifacts;
  rt->artifact_options.disk_dir = rt->disk_dir;
  *out = rt;
  return T4A_OK;
}

t4a_status t4a_runtime_close(t4a_runtime *rt) {
  if (rt == NULL) return T4A_OK;
  /* From inside one of this runtime's own admissions (a raw scope's callback) nothing may be
   * torn down: probe the lane's operation lock first. Any other answer of the probe is left to
   * the teardown (which meets it again, or not), with the caller's detail kept. */
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_admission adm;
  t4a_status probe = t4a_admission_begin(rt->retire, 0, &adm);
  if (probe == T4A_REENTRY) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "t4a_runtime_close called from inside one of the runtime's own "
                          "admissions (a raw scope's callback): nothing was closed");
  }
  if (probe == T4A_OK) (void)t4a_admission_abort(&adm, T4A_OK);
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

/* The artifact cache, created at the first call unless the options gave one. */
static t4a_status artifact_cache(t4a_runtime *rt, t4a_nvrtc_cache **out) {
  *out = NULL;
  t4a_status st = T4A_OK;
  pthread_mutex_lock(&rt->lock);
  if (rt->artifacts == NULL) {
    t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
    lo.library_path = rt->nvrtc_path;
    t4a_nvrtc_lib *lib = NULL;
    st = t4a_nvrtc_lib_open(&lo, &lib);
    if (st == T4A_OK) {
      st = t4a_nvrtc_cache_create(lib, &rt->artifact_options, &rt->artifacts);
      t4a_nvrtc_lib_release(lib); /* the cache holds it */
    }
    if (st == T4A_OK) rt->own_artifacts = 1;
  }
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
  return t4a_nvrtc_cache_compile(cache, &r, out, out_outcome);
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
  t4a_lane_read_counters(rt->lane, out);
}

/* Appends to a bounded buffer, counting what would not fit (as snprintf does). */
typedef struct json_out {
  char *buf;
  size_t size;
  size_t len; /* the text's full length so far, written or not */
} json_out;

static void put(json_out *j, const char *fmt, ...) T4A_PRINTF(2, 3);
static void put(json_out *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *at = j->len < j->size ? j->buf + j->len : NULL;
  size_t room = j->len < j->size ? j->size - j->len : 0;
  int n = vsnprintf(at, room, fmt, ap);
  va_end(ap);
  if (n > 0) j->len += (size_t)n;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(json_out *j, const char *s) {
  put(j, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      put(j, "\\%c", *p);
    } else if (*p < 0x20) {
      put(j, "\\u%04x", *p);
    } else {
      put(j, "%c", *p);
    }
  }
  put(j, "\"");
}

/* Every counter of `v` whose name starts with `prefix` ("" for all), one per line. */
static void put_counters(json_out *j, const t4a_counter_values *v, const char *prefix,
                         const char *indent, int more) {
  size_t plen = strlen(prefix);
  int first = 1;
  for (int i = 0; i < T4A_COUNTER_COUNT; i++) {
    const char *name = t4a_counter_name((t4a_counter_id)i);
    if (strncmp(name, prefix, plen) != 0) continue;
    put(j, "%s\n%s\"%s\": %" PRIu64, first ? "" : ",", indent, name,
        t4a_counter_value(v, (t4a_counter_id)i));
    first = 0;
  }
  if (more) put(j, ",");
}

t4a_status t4a_runtime_stats_json(t4a_runtime *rt, char *buf, size_t size, size_t *out_len) {
  if (out_len != NULL) *out_len = 0;
  if (rt == NULL) return null_runtime();
  if (buf == NULL && size != 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "buf is NULL with a size");
  }
  json_out j = {buf, size, 0};
  t4a_counter_values v;
  put(&j, "{\n  \"t4a_version\": \"%s\",\n  \"ordinal\": %d,\n  \"target\": ",
      t4a_version_string(), rt->ordinal);
  put_string(&j, rt->target);
  put(&j, ",\n  \"lane\": {");
  t4a_lane_read_counters(rt->lane, &v);
  put_counters(&j, &v, "", "    ", 0);
  put(&j, "\n  },\n  \"driver\": {\n    \"origin\": ");
  put_string(&j, t4a_driver_origin(rt->driver));
  put(&j, ",\n    \"version\": %d,\n    \"counters\": {", t4a_driver_version(rt->driver));
  t4a_driver_counters(rt->driver, &v);
  put_counters(&j, &v, "", "      ", 0);
  t4a_module_cache_stats ms;
  t4a_module_cache_get_stats(rt->modules, &ms);
  put(&j,
      "\n    }\n  },\n  \"module_cache\": {\n    \"entries\": %" PRIu32 ",\n    \"bytes\": %" PRIu64
      ",\n    \"loads\": %" PRIu64 ",\n    \"hits\": %" PRIu64 ",\n    \"evictions\": %" PRIu64
      ",\n    \"unloads\": %" PRIu64 "\n  },\n",
      ms.entries, ms.bytes, ms.loads, ms.hits, ms.evictions, ms.unloads);
  t4a_retire_state rs;
  t4a_retire_get_state(rt->retire, &rs);
  put(&j,
      "  \"retire\": {\n    \"open_admissions\": %" PRIu32 ",\n    \"open_keepalives\": %" PRIu32
      ",\n    \"sealed_epochs\": %" PRIu32 ",\n    \"quarantined_held\": %" PRIu64 "\n  },\n",
      rs.open_admissions, rs.open_keepalives, rs.sealed_epochs, rs.quarantined_held);
  t4a_launch_table_stats ts;
  t4a_launch_table_get_stats(rt->table, &ts);
  put(&j,
      "  \"launch_table\": {\n    \"strategy\": \"%s\",\n    \"graph_after\": %" PRIu32
      ",\n    \"descriptors\": %" PRIu32 ",\n    \"graphs\": %" PRIu32
      ",\n    \"plain_fires\": %" PRIu64 ",\n    \"graph_fires\": %" PRIu64
      ",\n    \"graph_builds\": %" PRIu64 ",\n    \"graph_updates\": %" PRIu64
      ",\n    \"graph_fallbacks\": %" PRIu64 ",\n    \"calibration\": ",
      ts.strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "graph" : "plain", ts.graph_after,
      ts.descriptors, ts.graphs, ts.plain_fires, ts.graph_fires, ts.graph_builds,
      ts.graph_updates, ts.graph_fallbacks);
  if (!rt->calibrated && rt->calibration_failed != T4A_OK) {
    put(&j, "null,\n    \"calibration_failed\": \"%s\"\n  },\n",
        t4a_status_name(rt->calibration_failed));
  } else if (!rt->calibrated) {
    put(&j, "null\n  },\n");
  } else {
    const t4a_launch_calibration *c = &rt->calibration;
    put(&j,
        "{\n      \"fires\": %" PRIu32 ",\n      \"plain_ns\": %.1f,\n      \"graph_ns\": %.1f"
        ",\n      \"graph_rebind_ns\": %.1f,\n      \"build_ns\": %.1f"
        ",\n      \"device_bytes_per_graph\": %" PRIu64 ",\n      \"strategy\": \"%s\""
        ",\n      \"graph_after\": %" PRIu32 "\n    }\n  },\n",
        c->fires, c->plain_ns, c->graph_ns, c->graph_rebind_ns, c->build_ns,
        c->device_bytes_per_graph, c->strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "graph" : "plain",
        c->graph_after);
  }
  t4a_xfer_state xs;
  t4a_xfer_get_state(rt->xfer, &xs);
  put(&j,
      "  \"xfer\": {\n    \"chunk_bytes\": %zu,\n    \"num_chunks\": %" PRIu32
      ",\n    \"free_chunks\": %" PRIu32 ",\n    \"busy_chunks\": %" PRIu32
      ",\n    \"quarantined_chunks\": %" PRIu32 ",\n    \"spare_events\": %" PRIu32
      ",\n    \"chunks_reclaimed\": %" PRIu64 ",\n    \"pinned_hold_bytes\": %" PRIu64
      ",\n    \"pinned_fallbacks\": %" PRIu64 ",\n    \"copy_threads\": %" PRIu32
      ",\n    \"parallel_copies\": %" PRIu64 "\n  },\n",
      t4a_xfer_chunk_bytes(rt->xfer), t4a_xfer_num_chunks(rt->xfer), xs.free_chunks,
      xs.busy_chunks, xs.quarantined_chunks, xs.spare_events, xs.chunks_reclaimed,
      xs.pinned_hold_bytes, xs.pinned_fallbacks, xs.copy_threads, xs.parallel_copies);
  t4a_nvrtc_cache *cache = t4a_runtime_artifact_cache(rt);
  if (cache == NULL) {
    put(&j, "  \"artifact_cache\": null,\n");
  } else {
    put(&j, "  \"artifact_cache\": {");
    t4a_nvrtc_cache_counters(cache, &v);
    put_counters(&j, &v, "nvrtc_", "    ", 1);
    size_t entries = 0, bytes = 0;
    t4a_nvrtc_cache_memory_usage(cache, &entries, &bytes);
    put(&j, "\n    \"memory_entries\": %zu,\n    \"memory_bytes\": %zu\n  },\n", entries, bytes);
  }
  put(&j, "  \"heap_allocations\": %" PRIu64 "\n}\n", t4a_heap_allocations());
  if (j.len >= size) {
    if (out_len != NULL) *out_len = j.len + 1;
    if (size > 0) buf[0] = '\0';
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, (uint64_t)j.len + 1,
                          "the stats JSON needs %zu bytes, the buffer has %zu", j.len + 1, size);
  }
  if (out_len != NULL) *out_len = j.len;
  return T4A_OK;
}
