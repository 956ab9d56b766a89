/* Graphs on the fake driver: capture through t4a_retire's capture mode, instantiate, replay,
 * update, keepalives held by the graph after the caller dropped its buffers, operations refused
 * during a capture without breaking it, teardown, failure sweeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/graph.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a/xfer_file.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef t4a_fixture fixture;

static t4a_slots *g_slots; /* the fixture's slots: 8 of 4 bytes */

/* The standard stack (the pool without reuse: live blocks = live buffers) with an xfer of one
 * copy thread, and slots. */
static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER;
  o.build |= T4A_FIXTURE_XFER;
  o.xfer.chunk_bytes = 4096;
  o.xfer.copy_threads = 1;
  if (t4a_fixture_setup(state, &o) != 0) return -1;
  fixture *f = *state;
  return t4a_slots_create(t4a_lane_holder(f->lane), 8, 4, &g_slots) == T4A_OK ? 0 : -1;
}

/* counted: the test leaked on purpose (the sweep checks its own accounting); else everything
 * freed and a proved drain. No ordering violation either way. */
static int finish(void **state, int counted) {
  t4a_slots_destroy(g_slots);
  g_slots = NULL;
  unsigned checks = counted ? T4A_FIXTURE_CHECK_ORDERING : T4A_FIXTURE_CHECK_STRICT;
  return t4a_fixture_teardown(state, checks);
}
static int teardown(void **state) { return finish(state, 0); }

static t4a_buffer *buffer(fixture *f, size_t n) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, n, 0, 0, &b));
  return b;
}

static uint64_t read_u64(fixture *f, t4a_buffer *b) {
  uint64_t v = 0;
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, &v, sizeof v, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  return v;
}

/* The device bytes as they are now, without enqueueing anything (the fake's view). */
static uint64_t read_u64_raw(fixture *f, t4a_buffer *b) {
  uint64_t v = 0;
  memcpy(&v, t4a_fake_host_view(f->fake, (CUdeviceptr)t4a_buffer_devptr(b), sizeof v), sizeof v);
  return v;
}

static t4a_counter_values counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  return v;
}

/* Captured: a slot upload (host value -> A) and a copy A -> B. Each replay reads the slot as it
 * is then (the FFI seed's pattern) and B follows. The caller drops A and B right after the
 * capture; the graph keeps them; its release frees them after the last replay. */
static void test_capture_replay_keeps_buffers(void **state) {
  fixture *f = *state;
  t4a_buffer *a = buffer(f, 64), *b = buffer(f, 64);
  uint32_t slot = 0;
  CK(t4a_slot_acquire(g_slots, &slot));
  uint64_t value = 0;
  t4a_buffer *out = buffer(f, 64);
  CK(t4a_graph_capture_begin(f->retire));
  assert_true(t4a_lane_is_capturing(f->lane));
  assert_true(t4a_retire_is_capturing(f->retire));
  CK(t4a_xfer_slot_upload(f->xfer, g_slots, slot, &value, sizeof value, a, 0));
  CK(t4a_xfer_copy(f->xfer, b, 0, f->xfer, a, 0, sizeof value, T4A_COPY_AUTO, NULL, NULL));
  CK(t4a_xfer_copy(f->xfer, out, 0, f->xfer, b, 0, sizeof value, T4A_COPY_AUTO, NULL, NULL));
  t4a_fake_progress(f->fake);
  assert_int_equal(read_u64_raw(f, out), 0); /* captured, not run */
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  assert_false(t4a_lane_is_capturing(f->lane));
  assert_int_equal(t4a_graph_num_keepalives(g), 3); /* A, B and out (deduplicated) */
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  uint64_t frees = t4a_fake_calls(f->fake, "cuMemFreeAsync");
  assert_int_equal(frees, 0); /* the graph holds both */
  /* Replays: each one uses the slot's value at its run. */
  for (uint64_t i = 1; i <= 3; i++) {
    memcpy(t4a_slot_host(g_slots, slot), &i, sizeof i); /* no replay is queued now */
    CK(t4a_graph_launch(g));
    assert_int_equal(read_u64(f, out), i);
  }
  assert_int_equal(counters(f).graph_launches, 3);
  t4a_graph_release(g); /* the epoch of the last replay still holds the version */
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees);
  CK(t4a_retire_wait(f->retire)); /* that epoch retires: A and B are freed now */
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees + 2);
  /* The captured keepalives are counted released with the graph's version. */
  assert_int_equal(counters(f).keepalives_released, counters(f).keepalives_held);
  t4a_buffer_release(out);
  t4a_slot_release(g_slots, slot);
}

/* A replay queued when the graph is released keeps the buffers until it ran. */
static void test_release_with_replay_queued(void **state) {
  fixture *f = *state;
  t4a_buffer *a = buffer(f, 64), *b = buffer(f, 64);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, b, 0, f->xfer, a, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  CK(t4a_graph_launch(g));
  CK(t4a_graph_launch(g));
  uint64_t frees = t4a_fake_calls(f->fake, "cuMemFreeAsync");
  t4a_graph_release(g);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees); /* replays queued */
  CK(t4a_retire_wait(f->retire));
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees + 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* During a capture, what cannot be captured is refused with UNSUPPORTED and the capture goes
 * on: buffer creation, staged transfers, downloads, observation, fences, trims; releasing a
 * buffer defers its free until the capture ended. */
static void test_refused_during_capture(void **state) {
  fixture *f = *state;
  t4a_buffer *a = buffer(f, 64), *gone = buffer(f, 64);
  unsigned char host[64] = {0};
  CK(t4a_graph_capture_begin(f->retire));
  assert_int_equal(t4a_graph_capture_begin(f->retire), T4A_BUSY);
  t4a_buffer *nb = NULL;
  assert_int_equal(t4a_buffer_create(f->pool, 64, 0, 0, &nb), T4A_UNSUPPORTED);
  assert_null(nb);
  assert_int_equal(t4a_xfer_upload(f->xfer, a, 0, host, sizeof host), T4A_UNSUPPORTED);
  t4a_xfer_pending *p = NULL;
  assert_int_equal(t4a_xfer_download(f->xfer, a, 0, host, sizeof host, &p), T4A_UNSUPPORTED);
  assert_int_equal(t4a_retire_poll(f->retire), T4A_UNSUPPORTED);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_UNSUPPORTED);
  t4a_witness *w = NULL;
  assert_int_equal(t4a_retire_fence(f->retire, &w), T4A_UNSUPPORTED);
  assert_null(w);
  assert_int_equal(t4a_mem_pool_trim(f->pool), T4A_UNSUPPORTED);
  uint64_t frees = t4a_fake_calls(f->fake, "cuMemFreeAsync");
  t4a_buffer_release(gone); /* deferred: a free now would be captured */
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees);
  assert_int_equal(counters(f).frees_deferred, 1);
  CK(t4a_xfer_copy(f->xfer, a, 32, f->xfer, a, 0, 16, T4A_COPY_AUTO, NULL, NULL));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g)); /* the capture survived every refusal */
  CK(t4a_graph_launch(g));
  CK(t4a_retire_wait(f->retire));
  /* The deferred free ran right after the capture ended (the lane's deferral list). */
  t4a_buffer *later = buffer(f, 64);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemFreeAsync"), frees + 1);
  t4a_buffer_release(later);
  t4a_buffer_release(a);
  t4a_graph_release(g);
  assert_int_equal(t4a_graph_capture_end(f->retire, &g), T4A_INVALID_ARGUMENT); /* not capturing */
  assert_null(g);
}

/* Update: the same topology updates in place; another topology re-instantiates; the old
 * version's buffers go once its queued replays ran. */
static void test_update_in_place_and_reinstantiate(void **state) {
  fixture *f = *state;
  t4a_buffer *a = buffer(f, 64), *b = buffer(f, 64), *c = buffer(f, 64);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, b, 0, f->xfer, a, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(f->retire, &g));
  CK(t4a_graph_launch(g));
  /* Same shape, other buffers: in place. */
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, c, 0, f->xfer, b, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  int in_place = -1;
  CK(t4a_graph_capture_update(f->retire, g, &in_place));
  assert_int_equal(in_place, 1);
  uint64_t instantiations = t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags");
  /* Two copies: another topology, a new instantiation. */
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, c, 0, f->xfer, a, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  CK(t4a_xfer_copy(f->xfer, b, 0, f->xfer, c, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  CK(t4a_graph_capture_update(f->retire, g, &in_place));
  assert_int_equal(in_place, 0);
  assert_int_equal(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags"), instantiations + 1);
  assert_int_equal(t4a_graph_num_keepalives(g), 3);
  CK(t4a_graph_launch(g));
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  CK(t4a_retire_wait(f->retire));
  t4a_graph_release(g);
  /* Update into a graph of another retire: refused, and the capture still ends. */
  t4a_retire *other = NULL;
  CK(t4a_retire_create(f->lane, NULL, &other));
  t4a_buffer *d = buffer(f, 64);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, d, 0, f->xfer, d, 32, 16, T4A_COPY_AUTO, NULL, NULL));
  CK(t4a_graph_capture_end(f->retire, &g));
  CK(t4a_graph_capture_begin(other));
  assert_int_equal(t4a_graph_capture_update(other, g, &in_place), T4A_INVALID_ARGUMENT);
  assert_false(t4a_retire_is_capturing(other));
  t4a_graph_release(g);
  t4a_buffer_release(d);
  CK(t4a_retire_destroy(other));
}

/* A capture invalidated by an unsafe call (here: a raw host allocation on the capturing thread)
 * ends with the driver's error; its keepalives are released at once; the lane is usable. */
static void test_invalidated_capture(void **state) {
  fixture *f = *state;
  t4a_buffer *a = buffer(f, 64);
  CK(t4a_graph_capture_begin(f->retire));
  CK(t4a_xfer_copy(f->xfer, a, 32, f->xfer, a, 0, 16, T4A_COPY_AUTO, NULL, NULL));
  void *host = NULL;
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  assert_int_not_equal(t4a_fake_table(f->fake)->cuMemHostAlloc(&host, 64, 0), CUDA_SUCCESS);
  CK(t4a_ctx_scope_exit(&s));
  t4a_graph *g = NULL;
  assert_int_equal(t4a_graph_capture_end(f->retire, &g), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
  assert_null(g);
  assert_false(t4a_lane_is_capturing(f->lane));
  t4a_buffer_release(a); /* its capture reference is gone: freed now */
  CK(t4a_retire_wait(f->retire));
  CK(t4a_lane_check(f->lane));
}

/* ---- failure sweeps ---- */

static long unaccounted(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                           T4A_FIXTURE_LIVE_GRAPHS | T4A_FIXTURE_LIVE_GRAPH_EXECS);
}

static t4a_status op_graph(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *a = NULL, *b = NULL;
  t4a_graph *g = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = 4096;
  xo.copy_threads = 1;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &xo, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &a);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &b);
  int capturing = 0;
  if (st == T4A_OK) capturing = (st = t4a_graph_capture_begin(r)) == T4A_OK;
  if (st == T4A_OK) st = t4a_xfer_copy(x, b, 0, x, a, 0, 64, T4A_COPY_AUTO, NULL, NULL);
  if (capturing) {
    t4a_status e = t4a_graph_capture_end(r, &g);
    if (st == T4A_OK) st = e;
  }
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  if (st == T4A_OK) st = t4a_graph_launch(g);
  if (st == T4A_OK) st = t4a_graph_launch(g);
  int in_place = 0;
  capturing = 0;
  if (st == T4A_OK) capturing = (st = t4a_graph_capture_begin(r)) == T4A_OK;
  if (st == T4A_OK) st = t4a_graph_capture_update(r, g, &in_place);
  if (st == T4A_OK) capturing = 0;
  if (st != T4A_OK && capturing) { /* end the capture; the first failure is the answer */
    t4a_error first;
    t4a_error_last(&first);
    if (t4a_graph_capture_update(r, g, &in_place) != T4A_OK) t4a_error_restore(&first);
    t4a_error_restore(&first);
  }
  if (st == T4A_OK) st = t4a_graph_launch(g);
  /* A capture that could not be ended (no context) is ended now, before the teardown. */
  t4a_error first;
  t4a_error_last(&first);
  if (t4a_retire_is_capturing(r)) {
    void *native = NULL;
    t4a_keepalive *items = NULL;
    size_t n = 0;
    if (t4a_retire_capture_end(r, &native, &items, &n) == T4A_OK) {
      for (size_t i = 0; i < n; i++) items[i].release(items[i].object);
      free(items);
      t4a_ctx_scope s;
      if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
        (void)t4a_fake_table(f->fake)->cuGraphDestroy((CUgraph)native);
        t4a_ctx_scope_exit_quiet(&s);
      }
    }
  }
  t4a_graph_release(g);
  t4a_xfer_destroy(x);
  t4a_status d = t4a_retire_destroy(r);
  if (st != T4A_OK) t4a_error_restore(&first); /* the step's own failure is the answer */
  return st != T4A_OK ? st : d;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "graph", .fake = f->fake, .op = op_graph, .unaccounted = unaccounted,
                 .user = f};
  f->baseline = unaccounted(f);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  static const t4a_status host[] = {T4A_HOST_OUT_OF_MEMORY, T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, host, 2) > 0);
  (void)t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, host, 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
/* The sweep's steps leak (and count) what t4a cannot prove drained; unaccounted() checks that
 * every object alive is one t4a counted. */
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "op_graph")
static int teardown_counted(void **state) { return finish(state, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_capture_replay_keeps_buffers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_release_with_replay_queued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_during_capture, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_in_place_and_reinstantiate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalidated_capture, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
