/* The runtime's events, fills, host functions and memory gauges (t4a/t4a.h, issue 22) on the fake
 * driver: a fill then a timed host function between two events of the runtime, a stream of
 * another runtime refused, the gauges (device free/total, in use, cached, reserved, peak and its
 * reset, blocks) following buffers through the reuse cache, the stats JSON's memory object, warm
 * transfers and buffers with no heap allocation, and a failure sweep of the gauges and the facade
 * calls with exact accounting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/runtime_fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef t4a_fixture fixture;

static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.stacks = 0;
  return t4a_fixture_setup(state, &o);
}
static int teardown(void **state) { return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT); }

static t4a_runtime *open_rt(fixture *f, int ordinal) {
  return t4a_fixture_open_runtime(f->drv, ordinal);
}

typedef struct seen {
  atomic_int runs;
  uint32_t first; /* the buffer's first word when the function ran */
  const uint32_t *word;
} seen;
static void look(void *p) {
  seen *s = p;
  s->first = *s->word;
  atomic_fetch_add(&s->runs, 1);
}

static void buffer_release(void *b) { t4a_buffer_release(b); }

static void test_fill_host_func_and_events(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f, 0);
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &b));
  t4a_event *start = NULL, *end = NULL;
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &start));
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &end));
  CK(t4a_runtime_event_record(rt, NULL, start));
  CK(t4a_runtime_memset(rt, NULL, b, 0, 1024, 4, 0xC0FFEEu));
  seen s = {0};
  s.word = t4a_fake_host_view(f->fake, (CUdeviceptr)t4a_buffer_devptr(b), 4);
  t4a_buffer_retain(b);
  t4a_keepalive k = {b, buffer_release, 0};
  CK(t4a_runtime_host_func(rt, NULL, look, &s, &k, 1));
  CK(t4a_runtime_event_record(rt, NULL, end));
  CK(t4a_runtime_event_wait(rt, NULL, end)); /* the stream waits for its own point: no-op */
  t4a_buffer_release(b); /* the fill and the host function keep it */
  t4a_counter_values before;
  t4a_runtime_stats(rt, &before);
  CK(t4a_event_synchronize(end));
  t4a_counter_values after;
  t4a_runtime_stats(rt, &after);
  assert_int_equal(after.host_waits, before.host_waits + 1);
  assert_int_equal(atomic_load(&s.runs), 1);
  assert_int_equal(s.first, 0xC0FFEEu); /* the function ran after the fill */
  float ms = 0;
  CK(t4a_event_elapsed_ms(start, end, &ms));
  assert_true(ms > 0);
  assert_int_equal(after.memsets, 1);
  assert_int_equal(after.host_funcs, 1);
  assert_int_equal(after.user_events_recorded, 2);
  assert_int_equal(after.user_event_waits, 1);
  /* Another runtime's stream and device: refused, nothing enqueued. */
  t4a_runtime *rt1 = open_rt(f, 1);
  t4a_event *e1 = NULL;
  CK(t4a_runtime_event(rt1, 0, &e1));
  assert_int_equal(t4a_runtime_event_wait(rt, NULL, e1), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_event_record(rt, NULL, e1), T4A_FOREIGN_HANDLE);
  t4a_stream *bogus = NULL; /* a stream of another runtime */
  CK(t4a_stream_create(rt1, NULL, &bogus));
  assert_int_equal(t4a_runtime_memset(rt, bogus, NULL, 0, 1, 1, 0), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_event_record(rt, bogus, start), T4A_FOREIGN_HANDLE);
  t4a_buffer *b2 = NULL;
  CK(t4a_runtime_buffer(rt, 64, &b2));
  k = (t4a_keepalive){b2, buffer_release, 0};
  assert_int_equal(t4a_runtime_host_func(rt, bogus, look, &s, &k, 1), T4A_FOREIGN_HANDLE);
  /* (b2's reference was handed over and released.) */
  assert_int_equal(t4a_runtime_memset(NULL, NULL, NULL, 0, 1, 1, 0), T4A_INVALID_ARGUMENT);
  t4a_event *none = (t4a_event *)&s;
  assert_int_equal(t4a_runtime_event(NULL, 0, &none), T4A_INVALID_ARGUMENT);
  assert_null(none);
  t4a_counter_values late;
  t4a_runtime_stats(rt, &late);
  assert_int_equal(late.admissions, after.admissions);
  t4a_event_release(start);
  t4a_event_release(end);
  t4a_event_release(e1);
  CK(t4a_stream_destroy(rt1, bogus));
  CK(t4a_runtime_close(rt1));
  CK(t4a_runtime_close(rt));
}

static void test_gauges_follow_buffers(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f, 0);
  t4a_runtime_memory_info m;
  CK(t4a_runtime_memory(rt, &m));
  assert_int_equal(m.pool.in_use_blocks, 0);
  assert_int_equal(m.pool.in_use_bytes, 0);
  t4a_device_info d;
  CK(t4a_device_query(f->drv, 0, &d));
  assert_int_equal(m.device_total_bytes, d.total_mem_bytes);
  uint64_t free0 = m.device_free_bytes;
  assert_true(free0 <= m.device_total_bytes);
  t4a_buffer *a = NULL, *b = NULL, *c = NULL;
  CK(t4a_runtime_buffer(rt, 1000, &a));        /* class 1 KiB */
  CK(t4a_runtime_buffer(rt, 1 << 20, &b));     /* 1 MiB */
  CK(t4a_runtime_buffer(rt, 3 << 20, &c));     /* 3 MiB */
  CK(t4a_runtime_memory(rt, &m));
  uint64_t in_use = 1024 + (1u << 20) + (3u << 20);
  assert_int_equal(m.pool.in_use_blocks, 3);
  assert_int_equal(m.pool.in_use_bytes, in_use);
  assert_int_equal(m.pool.peak_in_use_bytes, in_use);
  assert_int_equal(m.pool.cached_blocks, 0);
  assert_true(m.pool.driver_used_bytes >= in_use);
  assert_true(m.pool.reserved_bytes >= m.pool.driver_used_bytes);
  assert_true(m.device_free_bytes <= free0 - in_use); /* the fake's device gave it out */
  t4a_buffer_release(c); /* into the reuse cache */
  CK(t4a_runtime_memory(rt, &m));
  assert_int_equal(m.pool.in_use_blocks, 2);
  assert_int_equal(m.pool.in_use_bytes, in_use - (3u << 20));
  assert_int_equal(m.pool.cached_blocks, 1);
  assert_int_equal(m.pool.cached_bytes, 3u << 20);
  assert_int_equal(m.pool.peak_in_use_bytes, in_use); /* the peak stays */
  t4a_runtime_reset_peak(rt);
  CK(t4a_runtime_memory(rt, &m));
  assert_int_equal(m.pool.peak_in_use_bytes, in_use - (3u << 20));
  CK(t4a_runtime_buffer(rt, 3 << 20, &c)); /* a cache hit: back in use */
  CK(t4a_runtime_memory(rt, &m));
  assert_int_equal(m.pool.cached_blocks, 0);
  assert_int_equal(m.pool.peak_in_use_bytes, in_use);
  /* The stats JSON carries the same figures. */
  size_t need = 0;
  assert_int_equal(t4a_runtime_stats_json(rt, NULL, 0, &need), T4A_LIMIT_EXCEEDED);
  char *buf = malloc(need + 256);
  assert_non_null(buf);
  CK(t4a_runtime_stats_json(rt, buf, need + 256, NULL));
  const char *mem = strstr(buf, "\"memory\": {");
  assert_non_null(mem);
  char want[96];
  snprintf(want, sizeof want, "\"in_use_bytes\": %llu,", (unsigned long long)in_use);
  assert_non_null(strstr(mem, want));
  snprintf(want, sizeof want, "\"device_total_bytes\": %llu,",
           (unsigned long long)d.total_mem_bytes);
  assert_non_null(strstr(mem, want));
  assert_non_null(strstr(mem, "\"in_use_blocks\": 3,"));
  free(buf);
  assert_int_equal(t4a_runtime_memory(NULL, &m), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_memory(rt, NULL), T4A_INVALID_ARGUMENT);
  t4a_runtime_reset_peak(NULL);
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  CK(t4a_runtime_close(rt));
}

/* ---- failure sweep ---- */

static void nothing(void *p) { (void)p; }

static fixture *g_f;
static uint64_t g_lane_leaked; /* leaked + buffers_leaked of the closed runtimes' lanes */

static t4a_status op_everyday(void *user) {
  fixture *f = user;
  t4a_runtime_options o = t4a_fixture_runtime_options(f->drv);
  t4a_runtime *rt = NULL;
  t4a_status st = t4a_runtime_open(0, &o, &rt);
  if (st != T4A_OK) return st;
  t4a_lane *lane = t4a_runtime_lane(rt); /* its leak counts are read after close */
  t4a_lane_retain(lane);
  t4a_buffer *b = NULL;
  t4a_event *e = NULL;
  t4a_runtime_memory_info m;
  st = t4a_runtime_buffer(rt, 256, &b);
  if (st == T4A_OK) st = t4a_runtime_event(rt, T4A_EVENT_TIMING, &e);
  if (st == T4A_OK) st = t4a_runtime_memset(rt, NULL, b, 0, 64, 4, 1);
  if (st == T4A_OK) st = t4a_runtime_host_func(rt, NULL, nothing, NULL, NULL, 0);
  if (st == T4A_OK) st = t4a_runtime_event_record(rt, NULL, e);
  if (st == T4A_OK) st = t4a_runtime_event_wait(rt, NULL, e);
  if (st == T4A_OK) st = t4a_runtime_memory(rt, &m);
  if (st == T4A_OK) st = t4a_event_synchronize(e);
  t4a_event_release(e);
  t4a_buffer_release(b);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_status c = t4a_runtime_close(rt);
  if (st == T4A_OK) {
    st = c;
  } else {
    t4a_error_restore(&saved);
  }
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  g_lane_leaked += v.leaked + v.buffers_leaked;
  t4a_lane_release(lane);
  t4a_fake_progress(f->fake);
  return st;
}

/* Issue 25 item 2 through the facade, as bench/t4a_bench.c's rows run them: once warm, a pinned
 * or pageable upload with t4a_runtime_sync, a pinned download and a pageable one with their
 * waits and releases (t4a_xfer_pending_*, and t4a_runtime_download), and t4a_runtime_buffer +
 * release make no heap allocation (t4a_heap_allocations); the bytes are checked each time. */
static void test_warm_transfers_allocate_nothing(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f, 0);
  enum { N = 4096 };
  static unsigned char src[N], dst[N];
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, N, &b));
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(t4a_runtime_lane(rt)), N, 0, &pin));
  t4a_xfer *x = t4a_runtime_xfer(rt);
  uint64_t heap0 = 0;
  for (int i = 0; i < 21; i++) {
    if (i == 1) heap0 = t4a_heap_allocations(); /* round 0 is cold */
    for (size_t k = 0; k < N; k++) src[k] = (unsigned char)(k * 7 + (size_t)i);
    CK(t4a_runtime_upload(rt, b, 0, src, N));
    CK(t4a_runtime_sync(rt));
    memset(dst, 0, N);
    CK(t4a_runtime_download(rt, b, 0, dst, N));
    assert_memory_equal(dst, src, N);
    memset(t4a_pinned_host(pin), 0, N);
    t4a_xfer_pending *p = NULL;
    CK(t4a_xfer_download_pinned(x, b, 0, pin, 0, N, &p));
    CK(t4a_xfer_pending_wait(p));
    t4a_xfer_pending_release(p);
    assert_memory_equal(t4a_pinned_host(pin), src, N);
    CK(t4a_xfer_upload_pinned(x, b, 0, pin, 0, N));
    CK(t4a_runtime_sync(rt));
    CK(t4a_xfer_download(x, b, 0, dst, N, &p));
    CK(t4a_xfer_pending_wait(p));
    t4a_xfer_pending_release(p);
    assert_memory_equal(dst, src, N);
    t4a_buffer *t = NULL;
    CK(t4a_runtime_buffer(rt, 1 << 20, &t));
    t4a_buffer_release(t);
  }
  uint64_t heap = t4a_heap_allocations() - heap0;
  if (heap != 0) fail_msg("%llu heap allocations in 20 warm rounds", (unsigned long long)heap);
  t4a_pinned_release(pin);
  t4a_buffer_release(b);
  CK(t4a_runtime_close(rt));
}

/* A buffer quarantined by a fill that may have run keeps its pool, lane and context alive, so
 * streams, pools and retains are left out (t4a_facade_test's open/close sweep counts those);
 * memory and events must match what t4a counted. */
static long unaccounted(void *user) {
  (void)g_f;
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                           T4A_FIXTURE_LIVE_MODULES) -
         (long)g_lane_leaked;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "everyday", .fake = f->fake, .op = op_everyday, .user = f,
                 .unaccounted = unaccounted};
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 20);
  s.after_enqueue = 1; /* the fill ran, the call said it failed: the buffer is quarantined */
  s.entry = "cuMemsetD32Async";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR), 1);
  s.after_enqueue = 0;
  s.entry = "cuMemGetInfo";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR), 1);
  s.entry = "cuMemPoolGetAttribute";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) >= 2);
  s.entry = NULL;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 5);
  assert_true(unaccounted(f) <= 0); /* the lanes also count leaked host records and keepalives */
}

/* Each step was checked by the sweep; the fixture's own objects must be gone. */
static int teardown_counted(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_ORDERING);
}

/* The sweep leaks the quarantined buffers (and what they hold) on purpose. */
__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep", "op_everyday")

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_fill_host_func_and_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gauges_follow_buffers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_transfers_allocate_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
