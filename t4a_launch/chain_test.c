/* Launch chains on the fake driver: replays in stream order with other work, rebinds seen by the
 * next replay (node updates, never a re-instantiation), buffers kept alive after the caller
 * released them (also the buffer a rebind replaced), slot values read at each replay, refusals
 * (another table, a recording in progress, unregistering a chained descriptor, a replay during a
 * capture), re-recording, the warm replay (no heap allocation, one event per 512), and failure
 * sweeps over record, replay, rebind and destroy with exact leak accounting. */
#include <pthread.h>

#include "t4a/chain.h"
#include "t4a/graph.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a/xfer_file.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

static int setup(void **state) { return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0); }
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

static t4a_launch_table *table(fixture *f) {
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 16}, &t));
  return t;
}

enum { N = 32 };

/* add(x, y, out, n) as a descriptor. */
static uint32_t reg_add(t4a_launch_table *t, t4a_function *fn, t4a_buffer *x, t4a_buffer *y,
                        t4a_buffer *out, const int *n) {
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_arg args[4] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(y, 0), t4a_arg_buffer(out, 0),
                     t4a_arg_scalar(n, 4)};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &cfg, args, 4, &id));
  return id;
}

/* A chain of three fires o1 = a + b, o2 = o1 + b, o3 = o2 + b, replayed between checked launches
 * that read what it wrote and write what it reads; a rebind of the first fire's input between
 * replays is seen by the next one (one node update, no re-instantiation). */
static void test_replays_in_order_and_see_rebinds(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *a2 = make_buffer(f, N * 4), *b = make_buffer(f, N * 4);
  t4a_buffer *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4), *o3 = make_buffer(f, N * 4);
  t4a_buffer *o4 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  fill(f, a2, N, 0);
  fill(f, b, N, 1);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d0 = reg_add(t, fn, a, b, o1, &n), d1 = reg_add(t, fn, o1, b, o2, &n);
  uint32_t d2 = reg_add(t, fn, o2, b, o3, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d0));
  CK(t4a_descriptor_fire(t, d1));
  CK(t4a_descriptor_fire(t, d2));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o3, N, 0)); /* recorded, not run */
  struct t4a_chain_stats s;
  t4a_chain_stats(c, &s);
  assert_int_equal(s.kernel_nodes, 3);
  /* A checked launch before (a = a + b: 2i) and after (o4 = o3 + b) the replay. */
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_arg pre[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(a, 0),
                    t4a_arg_scalar(&n, 4)};
  t4a_arg post[4] = {t4a_arg_buffer(o3, 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(o4, 0),
                     t4a_arg_scalar(&n, 4)};
  CK(t4a_launch(f->retire, fn, &cfg, pre, 4));
  CK(t4a_chain_replay(t, c));
  CK(t4a_launch(f->retire, fn, &cfg, post, 4));
  assert_true(holds(f, o3, N, 0)); /* queued */
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o3, N, 5));
  assert_true(holds(f, o4, N, 6));
  /* Rebind the first fire's input to a2 (0) and replay: o3 = 3i. */
  t4a_arg in = t4a_arg_buffer(a2, 0);
  CK(t4a_descriptor_rebind(t, d0, 0, &in));
  CK(t4a_chain_replay(t, c));
  CK(t4a_chain_replay(t, c)); /* nothing rebound since: no update */
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o3, N, 3));
  assert_int_equal(calls(f, "cuGraphExecKernelNodeSetParams"), 1);
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 1);
  assert_int_equal(calls(f, "cuGraphLaunch"), 3);
  assert_int_equal(calls(f, "cuLaunchKernel"), 3 + 2); /* the recorded fires, the checked ones */
  t4a_chain_stats(c, &s);
  assert_int_equal(s.replays, 3);
  assert_int_equal(s.node_updates, 1);
  assert_int_equal(s.reinstantiations, 0);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.chain_replays, 3);
  assert_int_equal(v.chain_node_updates, 1);
  assert_int_equal(v.chain_reinstantiations, 0);
  t4a_chain_destroy(c);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.graph_execs, 0);
  assert_int_equal(live.graphs, 0);
  t4a_launch_table_destroy(t);
  t4a_buffer *all[] = {a, a2, b, o1, o2, o3, o4};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t4a_buffer_release(all[i]);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Everything the caller holds is dropped at once while replays are queued (the fake runs nothing
 * until a wait, and faults a kernel that touches freed memory): the recorded buffers, the buffer
 * a rebind replaced, the new buffer, the module (cache cleared), the chain itself, the
 * descriptor (unregistered once the chain is gone) and the table. Results are right and
 * everything is freed after the wait. */
static void test_keepalives_after_the_caller_released(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *b = make_buffer(f, N * 4), *o = make_buffer(f, N * 4);
  t4a_buffer *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  fill(f, b, N, 2);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d = reg_add(t, fn, a, b, o, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  t4a_buffer_release(a);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  CK(t4a_chain_replay(t, c)); /* o = a + b = 3i */
  /* Rebind b to a new buffer (4i) and drop both at once: the queued replay still reads the old
   * b, the next one the new. */
  t4a_buffer *b2 = make_buffer(f, N * 4);
  fill(f, b2, N, 4);
  t4a_arg nb = t4a_arg_buffer(b2, 0), no = t4a_arg_buffer(o2, 0);
  CK(t4a_descriptor_rebind(t, d, 1, &nb));
  CK(t4a_descriptor_rebind(t, d, 2, &no));
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  CK(t4a_chain_replay(t, c)); /* o2 = a + b2 = 5i */
  assert_int_equal(calls(f, "cuMemFreeAsync"), 0);
  /* While the chain lives its descriptor cannot go. */
  assert_int_equal(t4a_descriptor_unregister(t, d), T4A_BUSY);
  t4a_chain_destroy(c);
  CK(t4a_descriptor_unregister(t, d));
  t4a_launch_table_destroy(t);
  assert_int_equal(calls(f, "cuMemFreeAsync"), 0);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  CK(t4a_retire_wait(f->retire));
  t4a_fake_progress(f->fake);
  assert_true(holds(f, o, N, 3));
  assert_true(holds(f, o2, N, 5));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  assert_int_equal(calls(f, "cuMemFreeAsync"), 3); /* a, b, b2 */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  /* The keepalives the recording took are counted released when the chain's graph goes. */
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_true(v.keepalives_held > 0);
  assert_int_equal(v.keepalives_released, v.keepalives_held);
  t4a_buffer_release(o);
  t4a_buffer_release(o2);
}

/* A slot upload recorded before a fire: each replay reads the slot as it is when the replay runs
 * (written between replays), and the fire adds it. */
static void test_slot_written_between_replays(void **state) {
  fixture *f = *state;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = 4096;
  xo.copy_threads = 1;
  t4a_xfer *x = NULL;
  t4a_slots *slots = NULL;
  CK(t4a_xfer_create(f->retire, &xo, &x));
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 16, 2, &slots));
  uint32_t slot = 0;
  CK(t4a_slot_acquire(slots, &slot));
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *s = make_buffer(f, 16), *b = make_buffer(f, 16), *o = make_buffer(f, 16);
  fill(f, b, 4, 1);
  int n = 4;
  t4a_launch_table *t = table(f);
  uint32_t d = reg_add(t, fn, s, b, o, &n);
  int value[4] = {0, 0, 0, 0};
  CK(t4a_chain_begin(t));
  CK(t4a_xfer_slot_upload(x, slots, slot, value, sizeof value, s, 0));
  CK(t4a_descriptor_fire(t, d));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  t4a_buffer_release(s);
  for (int k = 1; k <= 3; k++) {
    int *host = t4a_slot_host(slots, slot);
    for (int i = 0; i < 4; i++) host[i] = 10 * k;
    CK(t4a_chain_replay(t, c));
    CK(t4a_retire_wait(f->retire));
    int *p = view(f, o);
    for (int i = 0; i < 4; i++) assert_int_equal(p[i], 10 * k + i);
  }
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(b);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_slot_release(slots, slot);
  t4a_slots_destroy(slots);
  t4a_xfer_destroy(x);
}

/* Refusals: another table's chain (FOREIGN_HANDLE, also for a re-record), no recording, a second
 * recording, a replay during a capture, NULLs; a recording left open is dropped with its
 * table. */
static void test_refusals(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *o = make_buffer(f, N * 4);
  int n = N;
  t4a_launch_table *t = table(f), *t2 = table(f);
  uint32_t d = reg_add(t, fn, a, a, o, &n);
  t4a_chain *c = NULL;
  assert_int_equal(t4a_chain_end(t, &c), T4A_INVALID_ARGUMENT);
  assert_null(c);
  assert_int_equal(t4a_chain_begin(NULL), T4A_INVALID_ARGUMENT);
  CK(t4a_chain_begin(t));
  assert_int_equal(t4a_chain_begin(t), T4A_BUSY);
  assert_int_equal(t4a_chain_begin(t2), T4A_BUSY); /* the lane is capturing */
  CK(t4a_descriptor_fire(t, d));
  assert_int_equal(t4a_descriptor_unregister(t, d), T4A_BUSY); /* recorded */
  CK(t4a_chain_end(t, &c));
  assert_int_equal(t4a_chain_replay(t2, c), T4A_FOREIGN_HANDLE);
  assert_int_equal(last_error().status, T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_chain_replay(NULL, c), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_chain_replay(t, NULL), T4A_INVALID_ARGUMENT);
  CK(t4a_chain_begin(t2));
  assert_int_equal(t4a_chain_end_update(t2, c), T4A_FOREIGN_HANDLE);
  assert_false(t4a_lane_is_capturing(f->lane)); /* ended all the same */
  CK(t4a_graph_capture_begin(f->retire));
  assert_int_equal(t4a_chain_replay(t, c), T4A_UNSUPPORTED);
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_graph_release(g);
  CK(t4a_chain_replay(t, c));
  t4a_chain_destroy(c);
  t4a_chain_destroy(NULL);
  CK(t4a_descriptor_unregister(t, d));
  /* A recording left open when its table goes (on the recording thread): the capture is ended
   * and its work dropped with the recording; the lane records nothing more. */
  uint32_t d2 = reg_add(t2, fn, a, a, o, &n);
  CK(t4a_chain_begin(t2));
  CK(t4a_descriptor_fire(t2, d2));
  t4a_launch_table_destroy(t2);
  assert_false(t4a_lane_is_capturing(f->lane));
  void *graph = NULL;
  t4a_keepalive *items = NULL;
  size_t count = 0;
  assert_int_equal(t4a_retire_capture_end(f->retire, &graph, &items, &count),
                   T4A_INVALID_ARGUMENT);
  /* A recording whose capture another call ended: its end refuses, typed, and drops it. */
  d = reg_add(t, fn, a, a, o, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d));
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_graph_release(g);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_descriptor_fire(t, d)); /* into the other capture: the recording is failed */
  assert_int_equal(t4a_chain_end(t, &c), T4A_INVALID_ARGUMENT);
  assert_null(c);
  assert_true(t4a_lane_is_capturing(f->lane)); /* the other capture is not the chain's to end */
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_graph_release(g);
  CK(t4a_descriptor_unregister(t, d)); /* no chain names it any more */
  struct t4a_chain_stats s;
  t4a_chain_stats(NULL, &s);
  assert_int_equal(s.replays, 0);
  CK(t4a_retire_wait(f->retire));
  t4a_launch_table_destroy(t);
  t4a_buffer_release(a);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
}

typedef struct end_arg {
  t4a_launch_table *t;
  t4a_chain *c;
  t4a_status st;
} end_arg;
static void *end_elsewhere(void *p) {
  end_arg *e = p;
  e->st = t4a_chain_end(e->t, &e->c);
  return NULL;
}

/* The recording is THREAD_LOCAL: another thread's end is INVALID_ARGUMENT and leaves it open;
 * the recording thread then ends it and the chain works. */
static void test_end_on_another_thread(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *o = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d = reg_add(t, fn, a, a, o, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d));
  end_arg e = {t, NULL, T4A_OK};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, end_elsewhere, &e), 0);
  pthread_join(th, NULL);
  assert_int_equal(e.st, T4A_INVALID_ARGUMENT);
  assert_null(e.c);
  assert_true(t4a_lane_is_capturing(f->lane));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o, N, 2));
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
}

typedef struct replayer {
  t4a_launch_table *t;
  t4a_chain *c;
  int count;
  t4a_status st;
} replayer;
static void *replay_many(void *p) {
  replayer *r = p;
  for (int i = 0; i < r->count && r->st == T4A_OK; i++) r->st = t4a_chain_replay(r->t, r->c);
  return NULL;
}

/* Replays on two threads while a third rebinds the fire's output between two buffers and drops
 * a fresh input buffer after each rebind: every call succeeds, nothing is freed under a queued
 * replay (the fake would fault), and every written element is right. */
static void test_replays_and_rebinds_from_threads(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  fill(f, o1, N, 2);
  fill(f, o2, N, 2);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d = reg_add(t, fn, a, a, o1, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  replayer r[2] = {{t, c, 500, T4A_OK}, {t, c, 500, T4A_OK}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, replay_many, &r[i]), 0);
  for (int i = 0; i < 300; i++) {
    t4a_arg out = t4a_arg_buffer((i & 1) ? o1 : o2, 0);
    CK(t4a_descriptor_rebind(t, d, 2, &out));
    t4a_buffer *in = make_buffer(f, N * 4);
    fill(f, in, N, 1);
    t4a_arg x = t4a_arg_buffer(in, 0);
    CK(t4a_descriptor_rebind(t, d, 0, &x));
    t4a_buffer_release(in); /* the descriptor holds it; queued replays read it */
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    CK(r[i].st);
  }
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o1, N, 2));
  assert_true(holds(f, o2, N, 2));
  struct t4a_chain_stats s;
  t4a_chain_stats(c, &s);
  assert_int_equal(s.replays, 1000);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Re-recording a chain with a different shape: a new instantiation (counted), the old graph's
 * queued replay unaffected. */
static void test_end_update_reinstantiates(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *o1 = make_buffer(f, N * 4), *o2 = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d1 = reg_add(t, fn, a, a, o1, &n), d2 = reg_add(t, fn, o1, a, o2, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d1));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  CK(t4a_chain_replay(t, c));
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d1));
  CK(t4a_descriptor_fire(t, d2));
  CK(t4a_chain_end_update(t, c));
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o2, N, 3));
  struct t4a_chain_stats s;
  t4a_chain_stats(c, &s);
  assert_int_equal(s.kernel_nodes, 2);
  assert_int_equal(s.reinstantiations, 1);
  assert_int_equal(lane_counters(f).chain_reinstantiations, 1);
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 2);
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* A rebind made during the recording, after the fire was recorded: the first replay sees it. */
static void test_rebind_while_recording(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *a2 = make_buffer(f, N * 4), *o = make_buffer(f, N * 4);
  fill(f, a, N, 1);
  fill(f, a2, N, 5);
  int n = N;
  t4a_launch_table *t = table(f);
  uint32_t d = reg_add(t, fn, a, a, o, &n);
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, d));
  t4a_arg in = t4a_arg_buffer(a2, 0);
  CK(t4a_descriptor_rebind(t, d, 1, &in));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  t4a_buffer_release(a); /* recorded: the chain keeps it */
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o, N, 6)); /* a + a2 */
  assert_int_equal(calls(f, "cuGraphExecKernelNodeSetParams"), 1);
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a2);
  t4a_buffer_release(o);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Warm replays of a 100-fire chain allocate nothing and record at most one event per 512
 * admissions, with no host wait; rebind-then-replay too (each rebind one admission that
 * enqueues nothing). */
static void test_warm_replay(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  enum { K = 100, M = 8 };
  t4a_buffer *a = make_buffer(f, M * 4), *o1 = make_buffer(f, M * 4), *o2 = make_buffer(f, M * 4);
  fill(f, a, M, 1);
  int n = M;
  t4a_launch_config cfg = config_1d(1, M, 0);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = K}, &t));
  uint32_t ids[K];
  for (int i = 0; i < K; i++) {
    t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o1, 0),
                       t4a_arg_scalar(&n, 4)};
    CK(t4a_descriptor_register(t, fn, &cfg, args, 4, &ids[i]));
  }
  CK(t4a_chain_begin(t));
  for (int i = 0; i < K; i++) CK(t4a_descriptor_fire(t, ids[i]));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  t4a_arg out1 = t4a_arg_buffer(o1, 0), out2 = t4a_arg_buffer(o2, 0);
  for (int i = 0; i < 600; i++) {
    CK(t4a_descriptor_rebind(t, ids[K - 1], 2, (i & 1) ? &out1 : &out2));
    CK(t4a_chain_replay(t, c));
  }
  for (int phase = 0; phase < 2; phase++) {
    t4a_counter_values v0 = lane_counters(f);
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < 10000; i++) {
      if (phase == 1) CK(t4a_descriptor_rebind(t, ids[K - 1], 2, (i & 1) ? &out1 : &out2));
      CK(t4a_chain_replay(t, c));
    }
    uint64_t heap1 = t4a_heap_allocations();
    t4a_counter_values v1 = lane_counters(f);
    uint64_t admissions = v1.admissions - v0.admissions;
    uint64_t events = v1.events_recorded - v0.events_recorded;
    if (heap1 != heap0 || events > admissions / 512 + 1) {
      fail_msg("phase %d: %llu heap allocations, %llu events for %llu admissions", phase,
               (unsigned long long)(heap1 - heap0), (unsigned long long)events,
               (unsigned long long)admissions);
    }
    assert_int_equal(v1.chain_replays - v0.chain_replays, 10000);
    assert_int_equal(v1.chain_node_updates - v0.chain_node_updates, phase ? 10000 : 0);
    assert_int_equal(v1.host_waits - v0.host_waits, 0);
  }
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 1);
  CK(t4a_retire_wait(f->retire));
  assert_true(holds(f, o1, M, 2));
  assert_true(holds(f, o2, M, 2));
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_buffer_release(o1);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- failure sweeps ---- */

/* On a retire and module cache of its own: register two descriptors, record both fires, end,
 * replay, rebind one to a new buffer (released at once), replay, check, destroy the chain,
 * unregister, destroy everything. */
static t4a_status op_chain(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_module_cache *mc = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *a = NULL, *o = NULL, *o2 = NULL, *b2 = NULL;
  t4a_launch_table *t = NULL;
  t4a_chain *c = NULL;
  uint32_t id = 0, id2 = 0;
  int n = 16;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_module_cache_create(r, NULL, &mc);
  if (st == T4A_OK) st = t4a_module_load(mc, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "add", &fn);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &a);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &o);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &o2);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &b2);
  if (st == T4A_OK) {
    fill(f, a, n, 1);
    fill(f, b2, n, 2);
  }
  t4a_arg x[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_arg y[4] = {t4a_arg_buffer(o, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(o2, 0),
                  t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = config_1d(1, 16, 0);
  if (st == T4A_OK) st = t4a_launch_table_create(r, &(t4a_launch_table_options){.capacity = 2}, &t);
  if (st == T4A_OK) st = t4a_descriptor_register(t, fn, &cfg, x, 4, &id);
  if (st == T4A_OK) st = t4a_descriptor_register(t, fn, &cfg, y, 4, &id2);
  if (st == T4A_OK) st = t4a_chain_begin(t);
  if (st == T4A_OK) {
    st = t4a_descriptor_fire(t, id);
    if (st == T4A_OK) st = t4a_descriptor_fire(t, id2);
    t4a_status end = t4a_chain_end(t, &c);
    if (st == T4A_OK) st = end;
    if (end != T4A_OK && t4a_retire_is_capturing(r)) {
      /* Not even asked (no context): the recording stays open; the first failure is the answer. */
      t4a_error first;
      t4a_error_last(&first);
      if (t4a_chain_end(t, &c) != T4A_OK) c = NULL; /* one made now is destroyed below */
      t4a_error_restore(&first);
    }
  }
  if (st == T4A_OK) st = t4a_chain_replay(t, c);
  if (st == T4A_OK) {
    t4a_arg nb = t4a_arg_buffer(b2, 0);
    st = t4a_descriptor_rebind(t, id2, 1, &nb); /* o2 = o + b2 = 4i */
  }
  t4a_buffer_release(b2);
  b2 = NULL;
  if (st == T4A_OK) st = t4a_chain_replay(t, c);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  if (st == T4A_OK && !(holds(f, o, n, 2) && holds(f, o2, n, 4))) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong result");
  }
  t4a_chain_destroy(c);
  if (st == T4A_OK) st = t4a_descriptor_unregister(t, id);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(a);
  t4a_buffer_release(o);
  t4a_buffer_release(o2);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(mc);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "chains",
                 .fake = f->fake,
                 .op = op_chain,
                 .unaccounted = unaccounted,
                 .user = f};
  sweep_graph_launches(f, &s); /* a replay failed with its work queued: quarantined */
  s.entry = "cuGraphExecKernelNodeSetParams";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) >= 1);
  s.entry = "cuStreamGetCaptureInfo";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 2);
  s.entry = NULL;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 3);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_replays_in_order_and_see_rebinds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keepalives_after_the_caller_released, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_written_between_replays, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_end_on_another_thread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replays_and_rebinds_from_threads, setup_progressing,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_end_update_reinstantiates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rebind_while_recording, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_replay, setup_progressing, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
