/* Graphs with kernels on the fake driver: a captured kernel -> copy -> kernel chain replays with
 * the current inputs each time, keeps its module and buffers alive after the caller dropped them
 * (the module cache cleared too), and lets them go after its last replay; a descriptor fire is
 * captured too; what cannot be captured is refused without breaking the capture. */
#include <pthread.h>

#include "t4a/graph.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a_launch/launch_testutil.h"
#include "t4a_retire/retire_internal.h"

enum { N = 64 };

static int setup(void **state) { return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0); }
static int teardown(void **state) { return fixture_teardown(state, 1); }

static void set_ints(fixture *f, t4a_buffer *b, int base) {
  int *p = view(f, b);
  for (int i = 0; i < N; i++) p[i] = base + i;
}

static void test_kernel_copy_kernel_chain(void **state) {
  fixture *f = *state;
  t4a_xfer *x = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = 4096;
  xo.copy_threads = 1;
  CK(t4a_xfer_create(f->retire, &xo, &x));
  t4a_module *m = load_ptx(f);
  t4a_function *add = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *b = make_buffer(f, N * 4), *c = make_buffer(f, N * 4),
             *d = make_buffer(f, N * 4);
  set_ints(f, a, 1);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  CK(t4a_graph_capture_begin(f->retire));
  t4a_arg k1[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(b, 0),
                   t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_launch(f->retire, add, &cfg, k1, 4)); /* b = 2a */
  CK(t4a_xfer_copy(x, c, 0, x, b, 0, N * 4, T4A_COPY_AUTO, NULL, NULL)); /* c = b */
  t4a_arg k2[4] = {t4a_arg_buffer(c, 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(d, 0),
                   t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_launch(f->retire, add, &cfg, k2, 4)); /* d = c + b = 4a */
  /* Refused inside the capture, which survives: */
  t4a_buffer *nb = NULL;
  assert_int_equal(t4a_buffer_create(f->pool, 16, 0, 0, &nb), T4A_UNSUPPORTED);
  int host[N];
  assert_int_equal(t4a_xfer_upload(x, a, 0, host, sizeof host), T4A_UNSUPPORTED);
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  assert_int_equal(t4a_graph_num_keepalives(g), 5); /* the module, a, b, c, d */
  /* The caller drops everything but a (input) and d (output); the cache forgets the module. */
  t4a_function_release(add);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  uint64_t unloads = t4a_fake_calls(f->fake, "cuModuleUnload");
  uint64_t frees = t4a_fake_calls(f->fake, "cuMemFreeAsync");
  for (int round = 0; round < 5; round++) {
    set_ints(f, a, round * 100); /* no replay is queued: the next one reads this */
    CK(t4a_graph_launch(g));
    CK(t4a_retire_wait(f->retire));
    const int *pd = view(f, d);
    for (int i = 0; i < N; i++) assert_int_equal(pd[i], 4 * (round * 100 + i));
  }
  assert_int_equal(lane_counters(f).graph_launches, 5);
  assert_int_equal(t4a_fake_calls(f->fake, "cuModuleUnload"), unloads);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees);
  /* Two replays queued, then the graph released: everything waits for them. */
  CK(t4a_graph_launch(g));
  CK(t4a_graph_launch(g));
  t4a_graph_release(g);
  assert_int_equal(t4a_fake_calls(f->fake, "cuModuleUnload"), unloads);
  CK(t4a_retire_wait(f->retire));
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuModuleUnload"), unloads + 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees + 2); /* b and c */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_buffer_release(a);
  t4a_buffer_release(d);
  t4a_xfer_destroy(x);
}

/* A descriptor fired during a capture is captured like a checked launch; replays use the
 * arguments bound when it was captured (a later rebind needs a new capture or an update). */
static void test_descriptor_fire_captured(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *add = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4), *b = make_buffer(f, N * 4);
  set_ints(f, a, 7);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_launch_table *table = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 4}, &table));
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(b, 0),
                     t4a_arg_scalar(&n, sizeof n)};
  uint32_t id = 0;
  CK(t4a_descriptor_register(table, add, &cfg, args, 4, &id));
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_descriptor_fire(table, id));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_launch_table_destroy(table);
  t4a_function_release(add);
  t4a_module_release(m);
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  const int *pb = view(f, b);
  for (int i = 0; i < N; i++) assert_int_equal(pb[i], 2 * (7 + i));
  t4a_graph_release(g);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_buffer_release(b);
}

/* During a capture, drop paths whose driver calls would break it are deferred to its end (a
 * module's unload, another graph's executable destruction), and the calls that cannot be
 * deferred are refused (a replay, the L2 limit); the capture survives all of it. */
static void test_capture_defers_and_refuses(void **state) {
  fixture *f = *state;
  t4a_xfer *x = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = 4096;
  xo.copy_threads = 1;
  CK(t4a_xfer_create(f->retire, &xo, &x));
  t4a_buffer *a = make_buffer(f, N * 4);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(x, a, 128, x, a, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  t4a_graph *other = NULL;
  CK(t4a_graph_capture_end(f->retire, &other));
  t4a_module *m = load_ptx(f);
  t4a_function *add = get_fn(m, "add");
  uint64_t unloads = t4a_fake_calls(f->fake, "cuModuleUnload");
  uint64_t exec_destroys = t4a_fake_calls(f->fake, "cuGraphExecDestroy");
  CK(t4a_graph_capture_begin(f->retire));
  assert_int_equal(t4a_graph_launch(other), T4A_UNSUPPORTED);
  size_t applied = 1;
  assert_int_equal(t4a_l2_set_persisting_limit(f->lane, 1 << 20, &applied), T4A_UNSUPPORTED);
  t4a_function_release(add);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache); /* the last reference: its unload waits */
  t4a_graph_release(other);          /* its executable graph's destruction waits */
  assert_int_equal(t4a_fake_calls(f->fake, "cuModuleUnload"), unloads);
  assert_int_equal(t4a_fake_calls(f->fake, "cuGraphExecDestroy"), exec_destroys);
  /* Another retire of the same lane cannot admit work meanwhile (it would be captured). */
  t4a_retire *r2 = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r2));
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r2, 0, &adm), T4A_UNSUPPORTED);
  assert_int_equal(t4a_retire_poll(r2), T4A_UNSUPPORTED);
  CK(t4a_xfer_copy(x, a, 128, x, a, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g)); /* intact; the deferred calls ran after its end */
  assert_int_equal(t4a_fake_calls(f->fake, "cuModuleUnload"), unloads + 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuGraphExecDestroy"), exec_destroys + 1);
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  CK(t4a_retire_destroy(r2));
  t4a_graph_release(g);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(a);
  t4a_xfer_destroy(x);
}

/* A capture is ended by the thread that began it (thread-local capture): another thread's end
 * is typed and leaves the capture as it was. */
typedef struct end_job {
  t4a_retire *r;
  t4a_status st;
} end_job;
static void *end_elsewhere(void *p) {
  end_job *j = p;
  t4a_graph *g = NULL;
  j->st = t4a_graph_capture_end(j->r, &g);
  t4a_graph_release(g);
  return NULL;
}
static void test_capture_ends_on_its_thread(void **state) {
  fixture *f = *state;
  CK(t4a_graph_capture_begin(f->retire));
  end_job j = {f->retire, T4A_OK};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, end_elsewhere, &j), 0);
  pthread_join(t, NULL);
  assert_int_equal(j.st, T4A_INVALID_ARGUMENT);
  assert_true(t4a_retire_is_capturing(f->retire));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_graph_release(g);
}

/* A descriptor table used from inside an admission of its runtime (a raw scope's callback, say)
 * answers REENTRY instead of waiting for its lock in the wrong order. */
static void test_table_inside_an_admission(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *add = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, N * 4);
  int n = N;
  t4a_launch_config cfg = config_1d(1, N, 0);
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0),
                     t4a_arg_scalar(&n, sizeof n)};
  t4a_launch_table *table = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 4}, &table));
  uint32_t id = 0;
  CK(t4a_descriptor_register(table, add, &cfg, args, 4, &id));
  t4a_admission adm;
  CK(t4a_admission_begin(f->retire, 0, &adm));
  assert_true(t4a_retire_held_by_this_thread_(f->retire));
  assert_int_equal(t4a_descriptor_fire(table, id), T4A_REENTRY);
  assert_int_equal(t4a_descriptor_rebind(table, id, 3, &args[3]), T4A_REENTRY);
  assert_int_equal(t4a_descriptor_rebind_fire(table, id, args, 4), T4A_REENTRY);
  uint32_t id2 = 0;
  assert_int_equal(t4a_descriptor_register(table, add, &cfg, args, 4, &id2), T4A_REENTRY);
  assert_int_equal(t4a_descriptor_unregister(table, id), T4A_REENTRY);
  CK(t4a_admission_abort(&adm, T4A_OK));
  assert_false(t4a_retire_held_by_this_thread_(f->retire));
  CK(t4a_descriptor_fire(table, id));
  CK(t4a_retire_wait(f->retire));
  t4a_launch_table_destroy(table);
  t4a_function_release(add);
  t4a_module_release(m);
  t4a_buffer_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_kernel_copy_kernel_chain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_descriptor_fire_captured, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capture_defers_and_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capture_ends_on_its_thread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_table_inside_an_admission, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
