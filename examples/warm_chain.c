/* The warm chain of `t4a demo` (see warm_chain.h). */
#define _POSIX_C_SOURCE 200809L
#include "examples/warm_chain.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/t4a.h"

enum { ELEMS = 4096, BLOCK = 256, GRID = ELEMS / BLOCK, NUM_ARGS = 4 };
#define BYTES ((size_t)ELEMS * sizeof(uint32_t))

static const char k_source[] =
    "extern \"C\" __global__ void mix(const unsigned *in, unsigned *out, unsigned k, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = in[i] * 1664525u + k + (unsigned)i;\n"
    "}\n"
    "extern \"C\" __global__ void fold(const unsigned *in, unsigned *out, unsigned k, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = (in[i] ^ (in[i] >> 13)) + k;\n"
    "}\n";

/* ---- the demo's state ---- */

typedef enum way { WAY_CHECKED, WAY_DESCRIPTORS, WAY_GRAPH, NUM_WAYS } way;
static const char *const k_way_names[NUM_WAYS] = {"checked", "descriptors", "graph"};

typedef struct way_result {
  int ran, verified;
  t4a_counter_values d; /* the lane's counters over the measured chain */
  uint64_t nvrtc_calls, module_loads, heap;
  double enqueue_s, done_s;
} way_result;

typedef struct demo {
  FILE *out;
  uint32_t steps;
  int simulated;  /* the driver is a simulation: its timings are of host code */
  int owns_driver; /* drv came from t4a_driver_get_default (released at the end) */
  t4a_driver *drv;
  t4a_runtime *rt;
  t4a_nvrtc_artifact *artifact;
  t4a_module *module;
  t4a_function *mix, *fold;
  t4a_buffer *a, *b, *c;
  t4a_graph *graph;
  uint32_t mix_id, fold_id;
  uint32_t mix_k, fold_k;
  int32_t n;
  t4a_arg mix_args[NUM_ARGS], fold_args[NUM_ARGS];
  uint32_t init[ELEMS], want[ELEMS], got[ELEMS];
  way_result ways[NUM_WAYS];
} demo;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints a failure with this thread's detail; returns 0 so callers can `return failed(...)`. */
static int failed(demo *d, t4a_status st, const char *what) {
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  if (e.status != st) e.status = st;
  fprintf(d->out, "t4a demo: %s failed: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  return 0;
}

static t4a_counter_values lane_counters(demo *d) {
  t4a_counter_values v;
  t4a_runtime_stats(d->rt, &v);
  return v;
}

static uint64_t nvrtc_calls(demo *d) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache *c = t4a_runtime_artifact_cache(d->rt);
  if (c == NULL) return 0;
  t4a_nvrtc_cache_stats(c, &s);
  return s.counters.nvrtc_compile_attempts;
}

/* The CPU reference: `steps` steps from `init`. */
static void reference(demo *d, uint32_t steps) {
  memcpy(d->want, d->init, sizeof d->want);
  for (uint32_t s = 0; s < steps; s++) {
    for (uint32_t i = 0; i < ELEMS; i++) {
      d->want[i] = warm_chain_fold(warm_chain_mix(d->want[i], WARM_CHAIN_MIX_K, i),
                                   WARM_CHAIN_FOLD_K);
    }
  }
}

/* ---- setup: the driver, the runtime, the compile ---- */

static int open_driver(demo *d, const warm_chain_options *o) {
  d->simulated = o->simulated;
  if (o->driver != NULL) {
    d->drv = o->driver;
    return 1;
  }
  t4a_status st = t4a_driver_get_default(&d->drv);
  if (st != T4A_OK) return failed(d, st, "the driver");
  d->owns_driver = 1;
  return 1;
}

static int open_runtime(demo *d) {
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = d->drv;
  t4a_status st = t4a_runtime_open(0, &o, &d->rt);
  if (st != T4A_OK) return failed(d, st, "t4a_runtime_open");
  t4a_device_info info;
  st = t4a_device_query(d->drv, 0, &info);
  if (st != T4A_OK) return failed(d, st, "t4a_device_query");
  int v = t4a_driver_version(d->drv);
  if (!d->simulated) {
    fprintf(d->out,
            "t4a demo: device 0, %s (%s), CUDA driver %d.%d: the chain runs on the GPU; NVRTC "
            "compiles for real\n",
            info.name, t4a_runtime_target(d->rt), v / 1000, (v % 1000) / 10);
  } else {
    fprintf(d->out, "runtime: %s (%s), driver %s %d.%d\n", info.name, t4a_runtime_target(d->rt),
            t4a_driver_origin(d->drv), v / 1000, (v % 1000) / 10);
  }
  t4a_xfer *x = t4a_runtime_xfer(d->rt);
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  fprintf(d->out,
          "runtime: default options (an event per 512 admissions, 64 sealed epochs; staging "
          "ring %u x %zu MiB, %u copy threads; module cache 64)\n",
          t4a_xfer_num_chunks(x), t4a_xfer_chunk_bytes(x) >> 20, xs.copy_threads);
  return 1;
}

static int compile_and_load(demo *d) {
  double t0 = now_s();
  t4a_status st = t4a_runtime_compile(d->rt, k_source, "warm_chain.cu", &d->artifact);
  if (st != T4A_OK) return failed(d, st, "NVRTC");
  double ms = (now_s() - t0) * 1e3;
  size_t bytes = 0;
  (void)t4a_nvrtc_artifact_data(d->artifact, &bytes);
  int major = 0, minor = 0;
  t4a_nvrtc_artifact_compiler_version(d->artifact, &major, &minor);
  fprintf(d->out, "compile: warm_chain.cu -> %s for %s, %zu bytes, %.1f ms (NVRTC %d.%d, %" PRIu64
          " call)\n",
          t4a_nvrtc_output_name(t4a_nvrtc_artifact_output(d->artifact)),
          t4a_nvrtc_artifact_target(d->artifact), bytes, ms, major, minor, nvrtc_calls(d));
  st = t4a_runtime_load(d->rt, d->artifact, &d->module);
  if (st == T4A_OK) st = t4a_runtime_function(d->rt, d->module, "mix", &d->mix);
  if (st == T4A_OK) st = t4a_runtime_function(d->rt, d->module, "fold", &d->fold);
  if (st != T4A_OK) return failed(d, st, "loading the kernels");
  return 1;
}

static int make_buffers(demo *d) {
  t4a_status st = t4a_runtime_buffer(d->rt, BYTES, &d->a);
  if (st == T4A_OK) st = t4a_runtime_buffer(d->rt, BYTES, &d->b);
  if (st == T4A_OK) st = t4a_runtime_buffer(d->rt, BYTES, &d->c);
  if (st != T4A_OK) return failed(d, st, "buffers");
  for (uint32_t i = 0; i < ELEMS; i++) d->init[i] = i * 2654435761u + 12345u;
  d->n = ELEMS;
  d->mix_k = WARM_CHAIN_MIX_K;
  d->fold_k = WARM_CHAIN_FOLD_K;
  t4a_arg m[NUM_ARGS] = {t4a_arg_buffer(d->a, 0), t4a_arg_buffer(d->b, 0),
                         t4a_arg_scalar(&d->mix_k, 4), t4a_arg_scalar(&d->n, 4)};
  t4a_arg f[NUM_ARGS] = {t4a_arg_buffer(d->c, 0), t4a_arg_buffer(d->a, 0),
                         t4a_arg_scalar(&d->fold_k, 4), t4a_arg_scalar(&d->n, 4)};
  memcpy(d->mix_args, m, sizeof m);
  memcpy(d->fold_args, f, sizeof f);
  return 1;
}

/* ---- the chain ---- */

static t4a_status chain(demo *d, way w, uint32_t steps) {
  t4a_launch_table *t = t4a_runtime_table(d->rt);
  t4a_status st = T4A_OK;
  for (uint32_t s = 0; s < steps && st == T4A_OK; s++) {
    switch (w) {
      case WAY_CHECKED:
        st = t4a_runtime_launch(d->rt, d->mix, GRID, BLOCK, d->mix_args, NUM_ARGS);
        if (st == T4A_OK) st = t4a_runtime_copy(d->rt, d->c, 0, d->b, 0, BYTES);
        if (st == T4A_OK) {
          st = t4a_runtime_launch(d->rt, d->fold, GRID, BLOCK, d->fold_args, NUM_ARGS);
        }
        break;
      case WAY_DESCRIPTORS:
        st = t4a_descriptor_fire(t, d->mix_id);
        if (st == T4A_OK) st = t4a_runtime_copy(d->rt, d->c, 0, d->b, 0, BYTES);
        if (st == T4A_OK) st = t4a_descriptor_fire(t, d->fold_id);
        break;
      default:
        st = t4a_graph_launch(d->graph);
        break;
    }
  }
  return st;
}

/* Registers the two descriptors and captures one step into the graph. */
static int prepare_ways(demo *d) {
  t4a_launch_config cfg = {{GRID, 1, 1}, {BLOCK, 1, 1}, 0};
  t4a_launch_table *t = t4a_runtime_table(d->rt);
  t4a_status st = t4a_descriptor_register(t, d->mix, &cfg, d->mix_args, NUM_ARGS, &d->mix_id);
  if (st == T4A_OK) st = t4a_descriptor_register(t, d->fold, &cfg, d->fold_args, 4, &d->fold_id);
  if (st != T4A_OK) return failed(d, st, "descriptors");
  t4a_retire *r = t4a_runtime_retire(d->rt);
  st = t4a_graph_capture_begin(r);
  if (st != T4A_OK) return failed(d, st, "t4a_graph_capture_begin");
  st = chain(d, WAY_CHECKED, 1);
  t4a_status end = t4a_graph_capture_end(r, &d->graph); /* ends the capture in every case */
  if (st != T4A_OK) return failed(d, st, "the captured step");
  if (end != T4A_OK) return failed(d, end, "t4a_graph_capture_end");
  return 1;
}

/* One way: a warm-up pass, then the measured pass from the initial data, checked on the CPU. */
static int run_way(demo *d, way w, uint32_t warm_steps) {
  way_result *r = &d->ways[w];
  t4a_status st = t4a_runtime_upload(d->rt, d->a, 0, d->init, BYTES);
  if (st == T4A_OK) st = chain(d, w, warm_steps);
  if (st == T4A_OK) st = t4a_runtime_upload(d->rt, d->a, 0, d->init, BYTES);
  if (st == T4A_OK) st = t4a_runtime_sync(d->rt); /* the measured pass starts on an idle stream */
  if (st != T4A_OK) return failed(d, st, k_way_names[w]);
  /* Warm: compile and load again (cache hits), look the kernels up again. */
  uint64_t nvrtc0 = nvrtc_calls(d);
  t4a_counter_values c0 = lane_counters(d);
  t4a_nvrtc_artifact *art = NULL;
  t4a_module *m = NULL;
  t4a_function *mix = NULL, *fold = NULL;
  st = t4a_runtime_compile(d->rt, k_source, "warm_chain.cu", &art);
  if (st == T4A_OK) st = t4a_runtime_load(d->rt, art, &m);
  if (st == T4A_OK) st = t4a_runtime_function(d->rt, m, "mix", &mix);
  if (st == T4A_OK) st = t4a_runtime_function(d->rt, m, "fold", &fold);
  int same = mix == d->mix && fold == d->fold;
  t4a_function_release(mix);
  t4a_function_release(fold);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(art);
  if (st != T4A_OK) return failed(d, st, "compiling and loading again");
  if (!same) {
    fprintf(d->out, "t4a demo: the module cache returned new function objects\n");
    return 0;
  }
  r->nvrtc_calls = nvrtc_calls(d) - nvrtc0;
  t4a_counter_values c1 = lane_counters(d);
  r->module_loads = c1.module_loads - c0.module_loads;
  uint64_t heap0 = t4a_heap_allocations();
  double t0 = now_s();
  st = chain(d, w, d->steps);
  double t1 = now_s();
  uint64_t heap1 = t4a_heap_allocations();
  t4a_counter_values c2 = lane_counters(d);
  if (st == T4A_OK) st = t4a_runtime_sync(d->rt);
  double t2 = now_s();
  if (st == T4A_OK) st = t4a_runtime_download(d->rt, d->a, 0, d->got, BYTES);
  if (st != T4A_OK) return failed(d, st, k_way_names[w]);
  r->ran = 1;
  r->heap = heap1 - heap0;
  r->enqueue_s = t1 - t0;
  r->done_s = t2 - t0;
#define T4A_DEMO_DELTA_(name, desc) r->d.name = c2.name - c1.name;
  T4A_COUNTER_LIST(T4A_DEMO_DELTA_)
#undef T4A_DEMO_DELTA_
  r->verified = memcmp(d->got, d->want, BYTES) == 0;
  if (!r->verified) {
    uint32_t i = 0;
    while (i < ELEMS && d->got[i] == d->want[i]) i++;
    fprintf(d->out, "t4a demo: %s: element %u is %08x, the CPU says %08x\n", k_way_names[w], i,
            d->got[i], d->want[i]);
  }
  return 1;
}

/* ---- per-launch host time: mix alone, t4a's two launch paths ---- */

typedef enum launch_kind { LAUNCH_CHECKED, LAUNCH_FIRE, NUM_LAUNCH_KINDS } launch_kind;

typedef struct launch_time {
  double enqueue_s; /* the launch calls */
  double done_s;    /* until the lane's stream had run them (a sync) */
  uint64_t heap;    /* t4a's heap allocations during the launch calls */
} launch_time;

/* `count` launches of mix (a -> b) one way, timed; then a sync. */
static t4a_status launches(demo *d, launch_kind k, uint32_t count, launch_time *out) {
  t4a_status st = T4A_OK;
  uint64_t heap0 = t4a_heap_allocations();
  double t0 = now_s();
  t4a_launch_table *t = t4a_runtime_table(d->rt);
  for (uint32_t i = 0; i < count && st == T4A_OK; i++) {
    st = k == LAUNCH_CHECKED
             ? t4a_runtime_launch(d->rt, d->mix, GRID, BLOCK, d->mix_args, NUM_ARGS)
             : t4a_descriptor_fire(t, d->mix_id);
  }
  out->enqueue_s = now_s() - t0;
  out->heap = t4a_heap_allocations() - heap0;
  if (st == T4A_OK) st = t4a_runtime_sync(d->rt);
  out->done_s = now_s() - t0;
  return st;
}

static int launch_times(demo *d) {
  static const char *const names[NUM_LAUNCH_KINDS] = {
      "t4a checked launch (t4a_runtime_launch)", "t4a descriptor fire (t4a_descriptor_fire)"};
  launch_time lt[NUM_LAUNCH_KINDS];
  memset(lt, 0, sizeof lt);
  t4a_status st = T4A_OK;
  for (int k = 0; k < NUM_LAUNCH_KINDS && st == T4A_OK; k++) {
    launch_time warm;
    st = launches(d, (launch_kind)k, d->steps, &warm); /* warm-up */
    if (st == T4A_OK) st = launches(d, (launch_kind)k, d->steps, &lt[k]);
  }
  if (st != T4A_OK) return failed(d, st, "launch timing");
  fprintf(d->out,
          "\nhost time per launch, indicative, single run (%" PRIu32 " launches of mix alone "
          "each, after as many to warm up)%s:\n  %-56s %11s %11s\n",
          d->steps, d->simulated ? "\n  (on the fake driver this times the fake's host code)" : "",
          "", "enqueue", "until done");
  for (int k = 0; k < NUM_LAUNCH_KINDS; k++) {
    fprintf(d->out, "  %-56s %8.3f us %8.3f us   heap allocations %" PRIu64 "\n", names[k],
            lt[k].enqueue_s * 1e6 / d->steps, lt[k].done_s * 1e6 / d->steps, lt[k].heap);
  }
  fprintf(d->out, "  (raw cuLaunchKernel next to these, paired in one process: t4a_bench launch, "
                  "bench/)\n");
  return 1;
}

/* ---- the report ---- */

static void row(demo *d, const char *label, const uint64_t v[NUM_WAYS]) {
  fprintf(d->out, "  %-34s", label);
  for (int w = 0; w < NUM_WAYS; w++) fprintf(d->out, " %12" PRIu64, v[w]);
  fprintf(d->out, "\n");
}

static void report(demo *d) {
  way_result *r = d->ways;
  fprintf(d->out, "\nwarm pass of %" PRIu32 " steps per way (compile and load again first):\n",
          d->steps);
  fprintf(d->out, "  %-34s", "");
  for (int w = 0; w < NUM_WAYS; w++) fprintf(d->out, " %12s", k_way_names[w]);
  fprintf(d->out, "\n  %-34s", "verified against the CPU");
  for (int w = 0; w < NUM_WAYS; w++) fprintf(d->out, " %12s", r[w].verified ? "OK" : "WRONG");
  fprintf(d->out, "\n");
  uint64_t v[NUM_WAYS];
#define T4A_DEMO_ROW_(label, expr)                          \
  do {                                                      \
    for (int w = 0; w < NUM_WAYS; w++) v[w] = r[w].expr; \
    row(d, label, v);                                       \
  } while (0)
  T4A_DEMO_ROW_("launches", d.launches);
  T4A_DEMO_ROW_("graph replays", d.graph_launches);
  T4A_DEMO_ROW_("copies", d.copies_same_device);
  T4A_DEMO_ROW_("admissions", d.admissions);
  T4A_DEMO_ROW_("events recorded", d.events_recorded);
  T4A_DEMO_ROW_("host waits", d.host_waits);
  T4A_DEMO_ROW_("NVRTC calls (compile again)", nvrtc_calls);
  T4A_DEMO_ROW_("module loads (load again)", module_loads);
  T4A_DEMO_ROW_("heap allocations (t4a)", heap);
#undef T4A_DEMO_ROW_
  fprintf(d->out, "  %-34s", "host us per step (enqueue)");
  for (int w = 0; w < NUM_WAYS; w++) fprintf(d->out, " %12.3f", r[w].enqueue_s * 1e6 / d->steps);
  fprintf(d->out, "\n  %-34s", "host us per step (until done)");
  for (int w = 0; w < NUM_WAYS; w++) fprintf(d->out, " %12.3f", r[w].done_s * 1e6 / d->steps);
  fprintf(d->out, "\n");
}

static void totals(demo *d) {
  t4a_counter_values v = lane_counters(d);
  fprintf(d->out,
          "\nruntime totals: launches %" PRIu64 ", graph replays %" PRIu64
          ", events recorded %" PRIu64 ", host waits %" PRIu64 ", module loads %" PRIu64
          ", NVRTC calls %" PRIu64 ", bytes uploaded %" PRIu64 ", bytes downloaded %" PRIu64 "\n",
          v.launches, v.graph_launches, v.events_recorded, v.host_waits, v.module_loads,
          nvrtc_calls(d), v.bytes_uploaded, v.bytes_downloaded);
}

static int print_json(demo *d) {
  size_t need = 0;
  t4a_status st = t4a_runtime_stats_json(d->rt, NULL, 0, &need);
  if (st != T4A_LIMIT_EXCEEDED) return failed(d, st, "t4a_runtime_stats_json");
  size_t size = need + 4096;
  char *buf = malloc(size);
  if (buf == NULL) return 0;
  st = t4a_runtime_stats_json(d->rt, buf, size, NULL);
  if (st == T4A_OK) fprintf(d->out, "\nstats (t4a_runtime_stats_json):\n%s", buf);
  free(buf);
  return st == T4A_OK ? 1 : failed(d, st, "t4a_runtime_stats_json");
}

/* Releases everything; returns 1 when the runtime closed after a proved drain. */
static int finish(demo *d) {
  int ok = 1;
  t4a_graph_release(d->graph);
  t4a_launch_table *t = t4a_runtime_table(d->rt);
  uint32_t ids[2] = {d->mix_id, d->fold_id};
  for (int i = 0; i < 2; i++) {
    t4a_status st = ids[i] != 0 ? t4a_descriptor_unregister(t, ids[i]) : T4A_OK;
    if (st != T4A_OK) ok = failed(d, st, "t4a_descriptor_unregister");
  }
  t4a_function_release(d->mix);
  t4a_function_release(d->fold);
  t4a_module_release(d->module);
  t4a_buffer_release(d->a);
  t4a_buffer_release(d->b);
  t4a_buffer_release(d->c);
  t4a_nvrtc_artifact_release(d->artifact);
  if (d->rt != NULL) {
    t4a_status st = t4a_runtime_close(d->rt);
    if (st != T4A_OK) ok = failed(d, st, "t4a_runtime_close");
  }
  if (d->owns_driver) t4a_driver_release(d->drv);
  return ok;
}

int warm_chain_run(const warm_chain_options *options, FILE *out) {
  static const warm_chain_options defaults = WARM_CHAIN_OPTIONS_INIT;
  const warm_chain_options *o = options != NULL ? options : &defaults;
  demo *d = calloc(1, sizeof *d);
  if (d == NULL) {
    if (o->after_close != NULL) (void)o->after_close(o->after_close_user);
    return 1;
  }
  d->out = out;
  d->steps = o->steps != 0 ? o->steps : 1000;
  int ok = open_driver(d, o) && open_runtime(d) && compile_and_load(d) && make_buffers(d);
  if (ok) {
    fprintf(out,
            "chain: %" PRIu32 " steps of mix (a -> b), copy (b -> c), fold (c -> a) on %d uint32 "
            "(%" PRIu32 " launches and %" PRIu32 " copies per way)\n",
            d->steps, ELEMS, 2 * d->steps, d->steps);
    reference(d, d->steps);
    ok = prepare_ways(d);
  }
  /* Each way warms up on a pass of its own (the same N steps), then is measured. */
  for (int w = 0; ok && w < NUM_WAYS; w++) ok = run_way(d, (way)w, d->steps);
  if (ok) {
    report(d);
    ok = launch_times(d);
  }
  if (ok) totals(d);
  if (ok && o->json) ok = print_json(d);
  int verified = ok;
  for (int w = 0; w < NUM_WAYS; w++) verified = verified && d->ways[w].verified;
  int closed = finish(d);
  if (o->after_close != NULL) closed = o->after_close(o->after_close_user) && closed;
  if (verified && closed) {
    fprintf(out, "result: verified OK (%d ways x %" PRIu32 " steps match the CPU reference)\n",
            NUM_WAYS, d->steps);
  } else {
    fprintf(out, "result: FAILED\n");
  }
  free(d);
  return verified && closed ? 0 : 1;
}
