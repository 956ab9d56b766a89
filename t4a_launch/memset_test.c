/* Fills (t4a/memset.h) on the fake driver: 8-, 16- and 32-bit patterns on a range, in stream
 * order with other work, the buffer kept alive after the caller dropped it, every refusal with
 * nothing enqueued (bounds, alignment, element size, value width, a foreign buffer, a capture of
 * another retire), a fill captured into a graph and replayed, a chain's memset node updated in
 * place when its value changes (no re-instantiation), and failure sweeps with exact accounting
 * (the fills, the chain's memset node, and the memory gauges read around them). */
#include <stdint.h>

#include "t4a/chain.h"
#include "t4a/event.h"
#include "t4a/graph.h"
#include "t4a/memset.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

static int setup(void **state) { return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0); }
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) { return fixture_teardown(state, 0); }

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep")

static void test_patterns_in_stream_order(void **state) {
  fixture *f = *state;
  t4a_buffer *b = make_buffer(f, 256);
  unsigned char *p = view(f, b);
  memset(p, 0xEE, 256);
  CK(t4a_memset(f->retire, b, 0, 16, 1, 0xAB));          /* bytes [0, 16) */
  CK(t4a_memset(f->retire, b, 16, 8, 2, 0x1234));        /* [16, 32) */
  CK(t4a_memset(f->retire, b, 32, 8, 4, 0xDEADBEEFu));   /* [32, 64) */
  CK(t4a_memset(f->retire, b, 64, 4, 4, 0));             /* [64, 80) */
  assert_int_equal(p[0], 0xEE); /* queued, not run */
  assert_int_equal(lane_counters(f).memsets, 4);
  CUdeviceptr at = (CUdeviceptr)t4a_buffer_devptr(b);
  t4a_buffer_release(b); /* the queued fills keep it */
  t4a_fake_progress(f->fake);
  assert_int_equal(p[0], 0xAB); /* ran, on memory still allocated */
  assert_non_null(t4a_fake_host_view(f->fake, at, 256));
  CK(t4a_retire_wait(f->retire)); /* the epoch lets go: the block is freed after the fills */
  t4a_fake_progress(f->fake);
  assert_null(t4a_fake_host_view(f->fake, at, 256));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

static void test_patterns_values(void **state) {
  fixture *f = *state;
  t4a_buffer *b = make_buffer(f, 256);
  unsigned char *p = view(f, b);
  memset(p, 0xEE, 256);
  CK(t4a_memset(f->retire, b, 0, 16, 1, 0xAB));
  CK(t4a_memset(f->retire, b, 16, 8, 2, 0x1234));
  CK(t4a_memset(f->retire, b, 32, 8, 4, 0xDEADBEEFu));
  CK(t4a_retire_wait(f->retire));
  for (int i = 0; i < 16; i++) assert_int_equal(p[i], 0xAB);
  for (int i = 0; i < 8; i++) {
    uint16_t v;
    memcpy(&v, p + 16 + 2 * i, 2);
    assert_int_equal(v, 0x1234);
  }
  for (int i = 0; i < 8; i++) {
    uint32_t v;
    memcpy(&v, p + 32 + 4 * i, 4);
    assert_int_equal(v, 0xDEADBEEFu);
  }
  for (int i = 64; i < 256; i++) assert_int_equal(p[i], 0xEE); /* nothing past the range */
  /* The last element exactly: in bounds. */
  CK(t4a_memset(f->retire, b, 252, 1, 4, 7));
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(b);
}

static void test_refusals_enqueue_nothing(void **state) {
  fixture *f = *state;
  t4a_buffer *b = make_buffer(f, 100);
  uint64_t d8 = calls(f, "cuMemsetD8Async"), d16 = calls(f, "cuMemsetD16Async");
  uint64_t d32 = calls(f, "cuMemsetD32Async");
  uint64_t adm = lane_counters(f).admissions;
  struct {
    size_t offset, count;
    unsigned elem;
    uint32_t value;
    t4a_status want;
    const char *says;
  } bad[] = {
      {0, 101, 1, 0, T4A_INVALID_ARGUMENT, "past the end"},
      {100, 1, 1, 0, T4A_INVALID_ARGUMENT, "past the end"},
      {96, 2, 4, 0, T4A_INVALID_ARGUMENT, "past the end"},
      {(size_t)-4, 1, 4, 0, T4A_INVALID_ARGUMENT, "past the end"},
      {0, SIZE_MAX, 4, 0, T4A_INVALID_ARGUMENT, "past the end"},
      {1, 2, 2, 0, T4A_INVALID_ARGUMENT, "misaligned"},
      {2, 2, 4, 0, T4A_INVALID_ARGUMENT, "misaligned"},
      {0, 1, 3, 0, T4A_INVALID_ARGUMENT, "1, 2 or 4"},
      {0, 1, 8, 0, T4A_INVALID_ARGUMENT, "1, 2 or 4"},
      {0, 1, 1, 0x100, T4A_INVALID_ARGUMENT, "does not fit"},
      {0, 1, 2, 0x10000, T4A_INVALID_ARGUMENT, "does not fit"},
      {0, 0, 1, 0, T4A_INVALID_ARGUMENT, "0 elements"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(t4a_memset(f->retire, b, bad[i].offset, bad[i].count, bad[i].elem,
                                bad[i].value),
                     bad[i].want);
    t4a_error e;
    t4a_error_last(&e);
    if (strstr(e.message, bad[i].says) == NULL) fail_msg("case %zu: %s", i, e.message);
  }
  assert_int_equal(t4a_memset(NULL, b, 0, 1, 1, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_memset(f->retire, NULL, 0, 1, 1, 0), T4A_INVALID_ARGUMENT);
  /* A buffer of another lane (allocation domain). */
  t4a_fixture_options o = t4a_fixture_defaults();
  t4a_fixture_stack other;
  CK(t4a_fixture_stack_open(f, &o, 0, &other));
  t4a_buffer *ob = NULL;
  CK(t4a_buffer_create(other.pool, 64, 0, 0, &ob));
  assert_int_equal(t4a_memset(f->retire, ob, 0, 1, 1, 0), T4A_FOREIGN_HANDLE);
  assert_int_equal(calls(f, "cuMemsetD8Async"), d8);
  assert_int_equal(calls(f, "cuMemsetD16Async"), d16);
  assert_int_equal(calls(f, "cuMemsetD32Async"), d32);
  assert_int_equal(lane_counters(f).admissions, adm);
  assert_int_equal(lane_counters(f).memsets, 0);
  /* The lane captured through another retire: refused by the admission. */
  CK(t4a_retire_capture_begin(other.retire));
  t4a_buffer *ob2 = NULL;
  (void)ob2;
  t4a_retire *r2 = NULL;
  CK(t4a_retire_create(other.lane, NULL, &r2));
  assert_int_equal(t4a_memset(r2, ob, 0, 1, 1, 0), T4A_UNSUPPORTED);
  void *g = NULL;
  t4a_keepalive *items = NULL;
  size_t n = 0;
  CK(t4a_retire_capture_end(other.retire, &g, &items, &n));
  assert_int_equal(n, 0);
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(other.lane), NULL));
  assert_int_equal(f->drv->t.cuGraphDestroy((CUgraph)g), CUDA_SUCCESS);
  (void)t4a_ctx_scope_exit(&s);
  CK(t4a_retire_destroy(r2));
  t4a_buffer_release(ob);
  CK(t4a_fixture_stack_close(&other));
  t4a_lane_release(other.lane);
  t4a_buffer_release(b);
}

static void test_captured_fill_replays(void **state) {
  fixture *f = *state;
  t4a_buffer *b = make_buffer(f, 64);
  uint32_t *p = view(f, b);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_memset(f->retire, b, 0, 16, 4, 0x11111111u));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_buffer_release(b); /* the graph keeps it */
  p[3] = 0;
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(p[3], 0x11111111u);
  p[3] = 0;
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(p[3], 0x11111111u);
  t4a_graph_release(g);
}

static void test_chain_memset_updated_in_place(void **state) {
  fixture *f = *state;
  t4a_buffer *b = make_buffer(f, 64), *h = make_buffer(f, 64);
  uint32_t *p = view(f, b);
  uint16_t *q = view(f, h);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 4}, &t));
  uint32_t id0 = 99, id1 = 99;
  assert_int_equal(t4a_chain_memset(t, b, 0, 16, 4, 1, &id0), T4A_INVALID_ARGUMENT); /* no rec */
  t4a_event_options timing = {T4A_EVENT_TIMING};
  t4a_event *e0 = NULL, *e1 = NULL;
  CK(t4a_event_create(f->lane, &timing, &e0));
  CK(t4a_event_create(f->lane, &timing, &e1));
  CK(t4a_chain_begin(t));
  CK(t4a_event_record(e0, f->retire)); /* event nodes in the chain: timed at each replay */
  CK(t4a_chain_memset(t, b, 0, 16, 4, 5, &id0));
  CK(t4a_chain_memset(t, h, 8, 4, 2, 0x7, &id1));
  CK(t4a_event_record(e1, f->retire));
  /* A refused one enqueues nothing and leaves the recording intact. */
  assert_int_equal(t4a_chain_memset(t, h, 1, 4, 2, 0x7, NULL), T4A_INVALID_ARGUMENT);
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  assert_int_equal(id0, 0);
  assert_int_equal(id1, 1);
  struct t4a_chain_stats s;
  t4a_chain_stats(c, &s);
  assert_int_equal(s.memset_nodes, 2);
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  float ms = 0;
  CK(t4a_event_elapsed_ms(e0, e1, &ms));
  assert_true(ms > 0.0029f && ms < 0.0031f); /* two fills and the end record */
  t4a_event_release(e0); /* the chain keeps them */
  t4a_event_release(e1);
  assert_int_equal(p[15], 5);
  assert_int_equal(q[4], 7);
  assert_int_equal(q[3], 0);
  /* A new value: the next replay updates the node in place, once. */
  CK(t4a_chain_set_memset(c, 0, 9));
  CK(t4a_chain_set_memset(c, 1, 7)); /* unchanged: no update */
  CK(t4a_chain_replay(t, c));
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(p[0], 9);
  assert_int_equal(p[15], 9);
  assert_int_equal(q[7], 7);
  assert_int_equal(calls(f, "cuGraphExecMemsetNodeSetParams"), 1);
  assert_int_equal(calls(f, "cuGraphInstantiateWithFlags"), 1);
  t4a_chain_stats(c, &s);
  assert_int_equal(s.memset_updates, 1);
  assert_int_equal(s.reinstantiations, 0);
  assert_int_equal(lane_counters(f).chain_memset_updates, 1);
  /* Refusals. */
  assert_int_equal(t4a_chain_set_memset(c, 2, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_chain_set_memset(c, 1, 0x10000), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_chain_set_memset(NULL, 0, 0), T4A_INVALID_ARGUMENT);
  /* Set back and forth before a replay: only the final value counts. */
  CK(t4a_chain_set_memset(c, 1, 0x3));
  CK(t4a_chain_set_memset(c, 1, 0x7));
  CK(t4a_chain_replay(t, c));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(calls(f, "cuGraphExecMemsetNodeSetParams"), 1);
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(b);
  t4a_buffer_release(h);
}

/* ---- failure sweep ---- */

static t4a_status op_memsets(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_launch_table *t = NULL;
  t4a_buffer *b = NULL;
  t4a_chain *c = NULL;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &b);
  if (st == T4A_OK) st = t4a_memset(r, b, 0, 64, 1, 1);
  if (st == T4A_OK) st = t4a_memset(r, b, 0, 32, 2, 2);
  if (st == T4A_OK) st = t4a_memset(r, b, 0, 16, 4, 3);
  if (st == T4A_OK) st = t4a_launch_table_create(r, &(t4a_launch_table_options){.capacity = 2}, &t);
  if (st == T4A_OK) st = t4a_chain_begin(t);
  if (st == T4A_OK) {
    st = t4a_chain_memset(t, b, 0, 16, 4, 4, NULL);
    t4a_status end = t4a_chain_end(t, &c);
    if (st == T4A_OK) st = end;
    if (end != T4A_OK && t4a_retire_is_capturing(r)) {
      t4a_error first;
      t4a_error_last(&first);
      if (t4a_chain_end(t, &c) != T4A_OK) c = NULL;
      t4a_error_restore(&first);
    }
  }
  if (st == T4A_OK) st = t4a_chain_replay(t, c);
  if (st == T4A_OK) st = t4a_chain_set_memset(c, 0, 5);
  if (st == T4A_OK) st = t4a_chain_replay(t, c);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  /* The gauges a user reads around fills. */
  struct t4a_mem_pool_gauges g;
  uint64_t free_b = 0, total_b = 0;
  if (st == T4A_OK) st = t4a_mem_pool_gauges(f->pool, &g);
  if (st == T4A_OK && g.in_use_blocks < 1) { /* b (and buffers quarantined by earlier steps) */
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "%llu blocks in use",
                        (unsigned long long)g.in_use_blocks);
  }
  if (st == T4A_OK) st = t4a_ctx_holder_memory(t4a_lane_holder(f->lane), &free_b, &total_b);
  if (st == T4A_OK && (total_b == 0 || free_b > total_b)) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "memory %llu of %llu",
                        (unsigned long long)free_b, (unsigned long long)total_b);
  }
  if (st == T4A_OK && ((uint32_t *)view(f, b))[15] != 5) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong result");
  }
  t4a_chain_destroy(c);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(b);
  t4a_status d = t4a_retire_destroy(r);
  if (st == T4A_OK) st = d;
  t4a_fake_progress(f->fake);
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "memsets",
                 .fake = f->fake,
                 .op = op_memsets,
                 .unaccounted = unaccounted,
                 .user = f};
  sweep_graph_launches(f, &s);
  s.entry = "cuMemsetD16Async";
  s.after_enqueue = 1; /* the fill ran, the call said it failed: the buffer is quarantined */
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 1);
  s.after_enqueue = 0;
  s.entry = "cuGraphExecMemsetNodeSetParams";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) >= 1);
  s.entry = "cuStreamGetCaptureInfo";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 1);
  s.entry = "cuMemPoolGetAttribute";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR), 2);
  s.entry = "cuMemGetInfo";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR), 1);
  s.entry = NULL;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 3);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_patterns_in_stream_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_patterns_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusals_enqueue_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_captured_fill_replays, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chain_memset_updated_in_place, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
