/* Descriptors fired as one-node executable graphs (GRAPH strategy) on the fake driver: the
 * plain fires before the build, results in stream order with checked launches in between,
 * rebinds seen by the next fire (node updates), the warm chain (no heap allocation, one event per
 * 512 fires), fires during a capture (kernel nodes of the captured graph), graphs destroyed after
 * unregister with their fires queued, build and update failures falling back to plain fires,
 * calibration, options, failure sweeps. */
#include "t4a/graph.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

static int nop_runs; /* runs of the kernel nop (t4a_hk_nop counts them) */

static int setup(void **state) {
  int rc = fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0);
  if (rc == 0) {
    fixture *f = *state;
    t4a_host_kernel_register(f->fake, &t4a_hk_nop, NULL, &nop_runs);
  }
  return rc;
}
static int setup_progressing(void **state) {
  return fixture_setup(state, T4A_FAKE_QUERY_PROGRESSES, 0);
}
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) { return fixture_teardown(state, 0); }

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep")

static t4a_launch_table *graph_table(fixture *f, uint32_t graph_after) {
  t4a_launch_table_options o = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  o.capacity = 8;
  o.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  o.launch.graph_after = graph_after;
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &o, &t));
  return t;
}

/* The launch most tests fire: add(a, a, o, n) on N = 16 ints with a[i] = i, so o = 2a. */
enum { TWICE_N = 16 };
typedef struct twice {
  t4a_buffer *a, *o;
  int n;
  t4a_launch_config cfg;
  t4a_arg x[4];
} twice;

static void twice_init(fixture *f, twice *w) {
  w->n = TWICE_N;
  w->a = make_buffer(f, TWICE_N * 4);
  w->o = make_buffer(f, TWICE_N * 4);
  fill(f, w->a, TWICE_N, 1);
  w->cfg = config_1d(1, TWICE_N, 0);
  w->x[0] = t4a_arg_buffer(w->a, 0);
  w->x[1] = t4a_arg_buffer(w->a, 0);
  w->x[2] = t4a_arg_buffer(w->o, 0);
  w->x[3] = t4a_arg_scalar(&w->n, 4);
}

static void twice_release(twice *w) {
  t4a_buffer_release(w->a);
  t4a_buffer_release(w->o);
}

/* add(a, b, out, n) through a GRAPH descriptor built at its third fire, interleaved with checked
 * launches that read what the fires wrote and with rebinds between fires. */
static void test_graph_fires_in_order_and_see_rebinds(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  enum { N = 64 };
  t4a_buffer *a = make_buffer(f, N * 4), *b = make_buffer(f, N * 4);
  t4a_buffer *o[6];
  for (int i = 0; i < 6; i++) o[i] = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  fill(f, b, N, 1);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_launch_table *t = graph_table(f, 3);
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(o[0], 0),
                     t4a_arg_scalar(&n, 4)};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &cfg, args, 4, &id));
  /* Fire k writes o[k] = in + b, its input being the previous output (rebound each time), and a
   * checked launch in between doubles nothing but proves order: o[k] read by the next fire. */
  for (int k = 0; k < 5; k++) {
    if (k > 0) {
      t4a_arg in = t4a_arg_buffer(o[k - 1], 0), out = t4a_arg_buffer(o[k], 0);
      CK(t4a_descriptor_rebind(t, id, 0, &in));
      CK(t4a_descriptor_rebind(t, id, 2, &out));
    }
    CK(t4a_descriptor_fire(t, id));
  }
  /* A checked launch after them, ordered after the last fire: o[5] = o[4] + b. */
  t4a_arg last[4] = {t4a_arg_buffer(o[4], 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(o[5], 0),
                     t4a_arg_scalar(&n, 4)};
  CK(t4a_launch(f->retire, fn, &cfg, last, 4));
  assert_int_equal(((int *)view(f, o[0]))[1], 0); /* queued, not run */
  CK(t4a_retire_wait(f->retire));
  for (int k = 0; k < 6; k++) assert_true(holds(f, o[k], N, k + 2));
  assert_int_equal(calls(f, "cuLaunchKernel"), 3); /* two plain fires, the checked launch */
  assert_int_equal(calls(f, "cuGraphLaunch"), 3);
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 1);
  assert_int_equal(calls(f, "cuGraphUpload"), 1);
  assert_int_equal(calls(f, "cuGraphExecKernelNodeSetParams"), 2); /* fires 3 and 4 */
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.strategy, T4A_LAUNCH_STRATEGY_GRAPH);
  assert_int_equal(s.graph_after, 3);
  assert_int_equal(s.descriptors, 1);
  assert_int_equal(s.graphs, 1);
  assert_int_equal(s.plain_fires, 2);
  assert_int_equal(s.graph_fires, 3);
  assert_int_equal(s.graph_builds, 1);
  assert_int_equal(s.graph_updates, 2);
  assert_int_equal(s.graph_fallbacks, 0);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.launches, 6);
  assert_int_equal(v.launch_graph_fires, 3);
  assert_int_equal(v.launch_graphs_built, 1);
  assert_int_equal(v.launch_graph_updates, 2);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 1);
  t4a_launch_table_destroy(t);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 0);
  assert_int_equal(live.graphs, 0);
  for (int i = 0; i < 6; i++) t4a_buffer_release(o[i]);
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Warm: fires and rebind-fires through the graph allocate nothing in t4a and record at most one
 * event per 512; the rebind-fires update the node every time. */
static void test_graph_warm_chain(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  enum { N = 16 };
  t4a_buffer *a = make_buffer(f, N * 4), *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_launch_table *t = graph_table(f, 1);
  t4a_arg x1[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o1, 0),
                   t4a_arg_scalar(&n, 4)};
  t4a_arg x2[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o2, 0),
                   t4a_arg_scalar(&n, 4)};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &cfg, x1, 4, &id));
  for (int i = 0; i < 2000; i++) CK(t4a_descriptor_fire(t, id));
  for (int phase = 0; phase < 2; phase++) {
    t4a_counter_values v0 = lane_counters(f);
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < 10000; i++) {
      if (phase == 0) {
        CK(t4a_descriptor_fire(t, id));
      } else {
        CK(t4a_descriptor_rebind_fire(t, id, (i & 1) ? x1 : x2, 4));
      }
    }
    uint64_t heap1 = t4a_heap_allocations();
    t4a_counter_values v1 = lane_counters(f);
    if (heap1 != heap0 || v1.events_recorded - v0.events_recorded > 20) {
      fail_msg("phase %d: %llu heap allocations, %llu events for 10,000", phase,
               (unsigned long long)(heap1 - heap0),
               (unsigned long long)(v1.events_recorded - v0.events_recorded));
    }
    assert_int_equal(v1.launch_graph_fires - v0.launch_graph_fires, 10000);
    assert_int_equal(v1.launch_graph_updates - v0.launch_graph_updates, phase ? 10000 : 0);
    assert_int_equal(v1.host_waits - v0.host_waits, 0);
  }
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o1, N, 2));
  assert_true(holds(f, o2, N, 2));
  t4a_launch_table_destroy(t);
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* A fire while the lane is captured is a plain launch recorded as a kernel node of the captured
 * graph (the descriptor's own graph is not launched into a capture); its replay runs it. */
static void test_fire_during_capture_adds_a_node(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  twice w;
  twice_init(f, &w);
  t4a_launch_table *t = graph_table(f, 1);
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &w.cfg, w.x, 4, &id));
  CK(t4a_descriptor_fire(t, id)); /* builds its graph */
  CK(t4a_retire_wait(f->retire));
  fill(f, w.o, TWICE_N, 0);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_descriptor_fire(t, id));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  assert_int_equal(calls(f, "cuGraphLaunch"), 1);  /* only the first fire */
  assert_int_equal(calls(f, "cuLaunchKernel"), 1); /* the captured one */
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, w.o, TWICE_N, 0)); /* captured, not run */
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, w.o, TWICE_N, 2));
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.graph_fires, 1);
  assert_int_equal(s.plain_fires, 1);
  t4a_graph_release(g);
  t4a_launch_table_destroy(t);
  twice_release(&w);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Unregistered and every reference dropped while graph fires are queued: the executable graph
 * goes at once (the driver finishes its queued launches), the module and buffers with the
 * epoch. */
static void test_unregister_while_graph_fires_queued(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  twice w;
  twice_init(f, &w);
  t4a_launch_table *t = graph_table(f, 1);
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &w.cfg, w.x, 4, &id));
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_descriptor_unregister(t, id));
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.descriptors, 0);
  assert_int_equal(s.graphs, 0);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(w.a);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuGraphExecDestroy"), 1);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, w.o, TWICE_N, 2));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  t4a_buffer_release(w.o);
}

/* A graph that cannot be built or updated: the fire still runs, plain, and the descriptor stays
 * plain; nothing is left behind. */
static void test_build_and_update_failures_fall_back(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  twice w;
  twice_init(f, &w);
  t4a_buffer *o2 = make_buffer(f, TWICE_N * 4);
  t4a_launch_table *t = graph_table(f, 1);
  uint32_t id = 0, id2 = 0;
  CK(t4a_descriptor_register(t, fn, &w.cfg, w.x, 4, &id));
  CK(t4a_descriptor_register(t, fn, &w.cfg, w.x, 4, &id2));
  /* The build fails at instantiation: the fire is plain, the error detail untouched. */
  t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "the caller's own detail");
  t4a_fake_inject(f->fake, "cuGraphInstantiateWithFlags", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  CK(t4a_descriptor_fire(t, id));
  assert_string_equal(last_error().message, "the caller's own detail");
  CK(t4a_descriptor_fire(t, id));
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graphs, 0);
  assert_int_equal(live.graph_execs, 0);
  assert_int_equal(calls(f, "cuLaunchKernel"), 2);
  /* The other descriptor builds, then its update fails: plain from then on, the new argument
   * used (never the stale node). */
  CK(t4a_descriptor_fire(t, id2));
  t4a_fake_inject(f->fake, "cuGraphExecKernelNodeSetParams", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  t4a_arg out2 = t4a_arg_buffer(o2, 0);
  CK(t4a_descriptor_rebind(t, id2, 2, &out2));
  CK(t4a_descriptor_fire(t, id2));
  CK(t4a_descriptor_fire(t, id2));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, w.o, TWICE_N, 2));
  assert_true(holds(f, o2, TWICE_N, 2));
  assert_int_equal(calls(f, "cuGraphLaunch"), 1);
  assert_int_equal(calls(f, "cuLaunchKernel"), 4);
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.graph_fallbacks, 2);
  assert_int_equal(s.graph_builds, 1);
  assert_int_equal(lane_counters(f).launch_graph_fallbacks, 2);
  t4a_launch_table_destroy(t);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 0);
  twice_release(&w);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Options: strategies resolved at create (AUTO follows a calibration, PLAIN without one),
 * unknown values refused. */
static void test_options(void **state) {
  fixture *f = *state;
  t4a_launch_table *t = NULL;
  t4a_launch_table_options o = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  struct t4a_launch_table_stats s;
  CK(t4a_launch_table_create(f->retire, NULL, &t));
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.strategy, T4A_LAUNCH_STRATEGY_PLAIN);
  assert_int_equal(s.graph_after, 16);
  t4a_launch_table_destroy(t);
  t4a_launch_calibration cal;
  memset(&cal, 0, sizeof cal);
  cal.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  cal.graph_after = 9;
  o.launch.calibration = &cal;
  CK(t4a_launch_table_create(f->retire, &o, &t));
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.strategy, T4A_LAUNCH_STRATEGY_GRAPH);
  assert_int_equal(s.graph_after, 9);
  t4a_launch_table_destroy(t);
  o.launch.strategy = T4A_LAUNCH_STRATEGY_PLAIN; /* explicit beats the calibration */
  CK(t4a_launch_table_create(f->retire, &o, &t));
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.strategy, T4A_LAUNCH_STRATEGY_PLAIN);
  t4a_launch_table_destroy(t);
  o.launch.strategy = (t4a_launch_strategy)7;
  assert_int_equal(t4a_launch_table_create(f->retire, &o, &t), T4A_INVALID_ARGUMENT);
  assert_null(t);
  o.launch.strategy = T4A_LAUNCH_STRATEGY_AUTO;
  o.capacity = 65537;
  assert_int_equal(t4a_launch_table_create(f->retire, &o, &t), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch_table_create(NULL, NULL, &t), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch_table_create(f->retire, NULL, NULL), T4A_INVALID_ARGUMENT);
  t4a_launch_table_stats(NULL, &s);
  assert_int_equal(s.descriptors, 0);
}

/* Calibration runs both strategies on the fake (its times mean nothing; the shape is checked):
 * fires counted, a strategy and a threshold within bounds, the kernel run every time, nothing
 * left behind. */
static void test_calibrate(void **state) {
  fixture *f = *state;
  size_t bytes = 0;
  const char *names[1] = {"nop"};
  char *image = fake_image(names, 1, &bytes);
  t4a_module *m = NULL;
  CK(t4a_module_load(f->cache, image, bytes, T4A_IMAGE_CUBIN, &m));
  free(image);
  t4a_function *nop = get_fn(m, "nop"), *add = NULL;
  t4a_module *pm = load_ptx(f);
  add = get_fn(pm, "add");
  t4a_launch_calibration c;
  assert_int_equal(t4a_launch_calibrate(f->retire, add, 64, &c), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch_calibrate(NULL, nop, 64, &c), T4A_INVALID_ARGUMENT);
  nop_runs = 0;
  uint64_t heap0 = t4a_heap_allocations();
  CK(t4a_launch_calibrate(f->retire, nop, 10, &c)); /* raised to 64 */
  (void)heap0;
  assert_int_equal(c.fires, 64);
  assert_true(c.plain_ns > 0 && c.graph_ns > 0 && c.graph_rebind_ns > 0);
  assert_true(c.strategy == T4A_LAUNCH_STRATEGY_PLAIN || c.strategy == T4A_LAUNCH_STRATEGY_GRAPH);
  assert_true(c.graph_after >= 2 && c.graph_after <= 4096);
  /* Warm-up (8 + 8), 3 × 64 measured, 8 builds. */
  assert_int_equal(nop_runs, 16 + 3 * 64 + 8);
  assert_int_equal(lane_counters(f).launch_graphs_built, 9);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 0);
  assert_int_equal(live.graphs, 0);
  /* A failure inside is the calibration's status, and leaves nothing behind. */
  t4a_fake_inject(f->fake, "cuLaunchKernel", 3, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_launch_calibrate(f->retire, nop, 64, &c), T4A_DRIVER_ERROR);
  assert_int_equal(c.fires, 0);
  t4a_fake_clear_injections(f->fake);
  /* Graphs that cannot be built: UNSUPPORTED. */
  t4a_fake_inject(f->fake, "cuGraphCreate", 0, 100, CUDA_ERROR_NOT_SUPPORTED, 0);
  assert_int_equal(t4a_launch_calibrate(f->retire, nop, 64, &c), T4A_UNSUPPORTED);
  t4a_fake_clear_injections(f->fake);
  CK(t4a_retire_wait(f->retire));
  t4a_function_release(nop);
  t4a_function_release(add);
  t4a_module_release(m);
  t4a_module_release(pm);
}


/* ---- checked launches through a function's graph (a GRAPH module cache) ---- */

static t4a_module_cache *graph_cache(fixture *f, t4a_retire *r, uint32_t graph_after) {
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  o.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  o.launch.graph_after = graph_after;
  t4a_module_cache *c = NULL;
  CK(t4a_module_cache_create(r != NULL ? r : f->retire, &o, &c));
  return c;
}

/* add through checked launches: the second builds the function's graph; a launch with the same
 * arguments launches it as it is, changed arguments or config update its node first; results in
 * stream order with descriptor fires in between; a launch during a capture is a node of the
 * captured graph; the module's unload destroys the function's graph. */
static void test_checked_launches_through_function_graphs(void **state) {
  fixture *f = *state;
  t4a_module_cache *c = graph_cache(f, NULL, 2);
  t4a_module *m = NULL;
  CK(t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  t4a_function *fn = get_fn(m, "add");
  enum { N = 32 };
  t4a_buffer *a = make_buffer(f, N * 4), *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0), cfg2 = config_1d(2, N / 2, 0);
  t4a_arg x1[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o1, 0),
                   t4a_arg_scalar(&n, 4)};
  t4a_arg x2[4] = {t4a_arg_buffer(o1, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o2, 0),
                   t4a_arg_scalar(&n, 4)};
  CK(t4a_launch(f->retire, fn, &cfg, x1, 4));  /* plain: o1 = 2a */
  CK(t4a_launch(f->retire, fn, &cfg, x1, 4));  /* builds the graph */
  CK(t4a_launch(f->retire, fn, &cfg, x1, 4));  /* as it is */
  CK(t4a_launch(f->retire, fn, &cfg, x2, 4));  /* updated: o2 = o1 + a = 3a */
  CK(t4a_launch(f->retire, fn, &cfg2, x2, 4)); /* config changed: updated */
  assert_int_equal(calls(f, "cuLaunchKernel"), 1);
  assert_int_equal(calls(f, "cuGraphLaunch"), 4);
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 1);
  assert_int_equal(calls(f, "cuGraphExecKernelNodeSetParams"), 2);
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o1, N, 2));
  assert_true(holds(f, o2, N, 3));
  /* During a capture: plain, a node of the captured graph. */
  fill(f, o2, N, 0);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_launch(f->retire, fn, &cfg, x2, 4));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  assert_int_equal(calls(f, "cuLaunchKernel"), 2);
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o2, N, 3));
  t4a_graph_release(g);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.launch_graphs_built, 1);
  assert_int_equal(v.launch_graph_fires, 4);
  assert_int_equal(v.launch_graph_updates, 2);
  /* The unload destroys the function's graph. */
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  assert_int_equal(calls(f, "cuGraphExecDestroy"), 2); /* the captured graph's, the function's */
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 0);
  assert_int_equal(live.graphs, 0);
  t4a_module_cache_options bad = T4A_MODULE_CACHE_OPTIONS_INIT;
  bad.launch.strategy = (t4a_launch_strategy)9;
  assert_int_equal(t4a_module_cache_create(f->retire, &bad, &c), T4A_INVALID_ARGUMENT);
}

/* Warm checked launches through the function's graph with the arguments alternating: no heap
 * allocation, at most one event per 512, every launch an update. */
static void test_function_graph_warm_chain(void **state) {
  fixture *f = *state;
  t4a_module_cache *c = graph_cache(f, NULL, 1);
  t4a_module *m = NULL;
  CK(t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  t4a_function *fn = get_fn(m, "add");
  enum { N = 16 };
  t4a_buffer *a = make_buffer(f, N * 4), *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_arg x1[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o1, 0),
                   t4a_arg_scalar(&n, 4)};
  t4a_arg x2[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o2, 0),
                   t4a_arg_scalar(&n, 4)};
  for (int i = 0; i < 2000; i++) CK(t4a_launch(f->retire, fn, &cfg, (i & 1) ? x1 : x2, 4));
  t4a_counter_values v0 = lane_counters(f);
  uint64_t heap0 = t4a_heap_allocations();
  for (int i = 0; i < 10000; i++) CK(t4a_launch(f->retire, fn, &cfg, (i & 1) ? x1 : x2, 4));
  uint64_t heap1 = t4a_heap_allocations();
  t4a_counter_values v1 = lane_counters(f);
  assert_int_equal(heap1, heap0);
  assert_true(v1.events_recorded - v0.events_recorded <= 20);
  assert_int_equal(v1.launch_graph_fires - v0.launch_graph_fires, 10000);
  assert_int_equal(v1.launch_graph_updates - v0.launch_graph_updates, 10000);
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o1, N, 2));
  assert_true(holds(f, o2, N, 2));
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
}


/* A PLAIN table fires plain even when its function belongs to a GRAPH module cache (the
 * function's own graph serves checked launches only), and says so in its counts. */
static void test_plain_table_with_a_graph_cache_fires_plain(void **state) {
  fixture *f = *state;
  t4a_module_cache *c = graph_cache(f, NULL, 1);
  t4a_module *m = NULL;
  CK(t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  t4a_function *fn = get_fn(m, "add");
  twice w;
  twice_init(f, &w);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 2}, &t));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &w.cfg, w.x, 4, &id));
  for (int i = 0; i < 4; i++) CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, w.o, TWICE_N, 2));
  assert_int_equal(calls(f, "cuGraphLaunch"), 0);
  assert_int_equal(calls(f, "cuLaunchKernel"), 4);
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.plain_fires, 4);
  assert_int_equal(lane_counters(f).launch_graph_fires, 0);
  /* Inside an admission of the runtime the stats read nothing (no lock taken: all zero). */
  t4a_admission adm;
  CK(t4a_admission_begin(f->retire, 0, &adm));
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.descriptors, 0);
  (void)t4a_admission_abort(&adm, T4A_OK);
  t4a_launch_table_stats(t, &s);
  assert_int_equal(s.descriptors, 1);
  t4a_launch_table_destroy(t);
  twice_release(&w);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
}

/* Captures are THREAD_LOCAL: while this thread captures lane A, destroying another lane's
 * executable graph on it would break A's capture (the fake refuses the call and invalidates the
 * capture, as the H200 does). The destruction waits for the end of A's capture. */
static void test_drops_wait_for_this_threads_capture_of_another_lane(void **state) {
  fixture *f = *state;
  t4a_lane *lane2 = NULL;
  t4a_retire *r2 = NULL;
  t4a_module_cache *c2 = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &lane2));
  CK(t4a_retire_create(lane2, NULL, &r2));
  CK(t4a_module_cache_create(r2, NULL, &c2));
  t4a_module *m = NULL;
  CK(t4a_module_load(c2, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  t4a_function *fn = get_fn(m, "add");
  t4a_mem_pool *pool2 = NULL;
  CK(t4a_mem_pool_create(lane2, NULL, &pool2));
  t4a_buffer *a = NULL;
  CK(t4a_buffer_create(pool2, 64, 0, 0, &a));
  int n = 16;
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_arg x[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_launch_table_options o = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  o.capacity = 2;
  o.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  o.launch.graph_after = 1;
  t4a_launch_table *t2 = NULL;
  CK(t4a_launch_table_create(r2, &o, &t2));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t2, fn, &cfg, x, 4, &id));
  CK(t4a_descriptor_fire(t2, id)); /* its graph exists */
  CK(t4a_retire_wait(r2));
  CK(t4a_graph_capture_begin(f->retire)); /* this thread captures lane A */
  CK(t4a_descriptor_unregister(t2, id)); /* lane B's executable graph: deferred */
  assert_int_equal(calls(f, "cuGraphExecDestroy"), 0);
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g)); /* intact; the deferred destruction ran */
  assert_int_equal(calls(f, "cuGraphExecDestroy"), 1);
  t4a_graph_release(g);
  t4a_launch_table_destroy(t2);
  t4a_buffer_release(a);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c2);
  CK(t4a_retire_destroy(r2));
  t4a_mem_pool_release(pool2);
  t4a_lane_release(lane2);
}

/* ---- failure sweeps ---- */

/* On a retire and module cache of its own: register, fire (plain, then the build), rebind,
 * fire, rebind-fire, unregister, destroy. */
static t4a_status op_graph_fires(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *a = NULL, *o = NULL;
  t4a_launch_table *t = NULL;
  uint32_t id = 0;
  int n = 16;
  t4a_launch_table_options opts = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  opts.capacity = 2;
  opts.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  opts.launch.graph_after = 2;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_module_cache_create(r, NULL, &c);
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "add", &fn);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &a);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &o);
  if (st == T4A_OK) fill(f, a, n, 1);
  t4a_arg x[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = config_1d(1, 16, 0);
  if (st == T4A_OK) st = t4a_launch_table_create(r, &opts, &t);
  if (st == T4A_OK) st = t4a_descriptor_register(t, fn, &cfg, x, 4, &id);
  if (st == T4A_OK) st = t4a_descriptor_fire(t, id);
  if (st == T4A_OK) st = t4a_descriptor_fire(t, id);
  if (st == T4A_OK) {
    t4a_arg in = t4a_arg_buffer(o, 0);
    st = t4a_descriptor_rebind(t, id, 1, &in); /* o = a + o */
  }
  if (st == T4A_OK) st = t4a_descriptor_fire(t, id);
  if (st == T4A_OK) st = t4a_descriptor_rebind_fire(t, id, x, 4);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  if (st == T4A_OK && !holds(f, o, n, 2)) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong result");
  }
  if (st == T4A_OK) st = t4a_descriptor_unregister(t, id);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(a);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}


/* On a retire and a GRAPH module cache of its own: checked launches (plain, the build, as it is,
 * an update), a wait, the unload. */
static t4a_status op_function_graph(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *a = NULL, *o = NULL;
  int n = 16;
  t4a_module_cache_options co = T4A_MODULE_CACHE_OPTIONS_INIT;
  co.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  co.launch.graph_after = 2;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_module_cache_create(r, &co, &c);
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "add", &fn);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &a);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &o);
  if (st == T4A_OK) fill(f, a, n, 1);
  t4a_arg x[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_arg y[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(o, 0), t4a_arg_buffer(o, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = config_1d(1, 16, 0);
  for (int i = 0; i < 3 && st == T4A_OK; i++) st = t4a_launch(r, fn, &cfg, x, 4);
  if (st == T4A_OK) st = t4a_launch(r, fn, &cfg, y, 4); /* o = a + o = 3a */
  if (st == T4A_OK) st = t4a_retire_wait(r);
  if (st == T4A_OK && !holds(f, o, n, 3)) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong result");
  }
  t4a_buffer_release(a);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "graph fires",
                 .fake = f->fake,
                 .op = op_graph_fires,
                 .unaccounted = unaccounted,
                 .user = f};
  sweep_graph_launches(f, &s); /* the graph launch failed with the replay queued */
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 3);
  /* Checked launches through a function's graph. */
  s.name = "function graph";
  s.op = op_function_graph;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  s.entry = "cuGraphLaunch";
  s.after_enqueue = 1;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 1);
  s.entry = NULL;
  s.after_enqueue = 0;
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 3);
  const t4a_status mutex[] = {T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1) > 3);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_graph_fires_in_order_and_see_rebinds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_warm_chain, setup_progressing, teardown),
      cmocka_unit_test_setup_teardown(test_fire_during_capture_adds_a_node, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unregister_while_graph_fires_queued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_build_and_update_failures_fall_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_options, setup, teardown),
      cmocka_unit_test_setup_teardown(test_calibrate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checked_launches_through_function_graphs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_function_graph_warm_chain, setup_progressing,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plain_table_with_a_graph_cache_fires_plain, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_drops_wait_for_this_threads_capture_of_another_lane,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
