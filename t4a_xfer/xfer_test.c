/* t4a_xfer on the fake driver: staged uploads and downloads, pinned transfers, pending handles,
 * ring exhaustion, portability, argument checks, device faults, reclaiming quarantined chunks,
 * the pinned-hold budget, observers that never block behind another thread, failure sweeps. */
#define _GNU_SOURCE /* clock_gettime */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CHUNK ((size_t)4096)
#define CK(x) assert_int_equal((x), T4A_OK)

/* ---- a gate in front of two driver entries ----
 * The fixture's driver is the fake's table with cuEventSynchronize and cuMemcpyHtoDAsync wrapped:
 * when armed, the next call of that entry blocks (before reaching the fake, so it holds no fake
 * lock) until the test opens the gate, or gives up after GATE_PATIENCE_S and records that it
 * timed out. A test holds one thread in a device wait or an enqueue this way and checks that its
 * own thread's poll returns meanwhile: had the poll blocked behind the held thread, the gate
 * would have timed out first. */
enum { GATE_NONE = 0, GATE_EVENT_SYNC, GATE_HTOD };
#define GATE_PATIENCE_S 5

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int armed;     /* which entry's next call blocks */
  int entered;   /* a call is held in the gate */
  int open;      /* the test let it go */
  int timed_out; /* it gave up waiting for the test */
} gate;
static gate g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};
static __typeof__(((t4a_driver_table *)0)->cuEventSynchronize) real_event_sync;
static __typeof__(((t4a_driver_table *)0)->cuMemcpyHtoDAsync) real_htod;

static void gate_pass(int which) {
  pthread_mutex_lock(&g_gate.m);
  if (g_gate.armed == which) {
    g_gate.armed = GATE_NONE;
    g_gate.entered = 1;
    pthread_cond_broadcast(&g_gate.cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GATE_PATIENCE_S;
    while (!g_gate.open) {
      if (pthread_cond_timedwait(&g_gate.cv, &g_gate.m, &until) != 0) {
        g_gate.timed_out = 1;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_gate.m);
}

static CUresult CUDAAPI gated_event_sync(CUevent e) {
  gate_pass(GATE_EVENT_SYNC);
  return real_event_sync(e);
}

static CUresult CUDAAPI gated_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  gate_pass(GATE_HTOD);
  return real_htod(dst, src, n, s);
}

static void gate_arm(int which) {
  pthread_mutex_lock(&g_gate.m);
  g_gate.armed = which;
  g_gate.entered = g_gate.open = g_gate.timed_out = 0;
  pthread_mutex_unlock(&g_gate.m);
}

/* Waits (bounded) until another thread is held in the gate; 1 if it is. */
static int gate_wait_entered(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&g_gate.m);
  while (!g_gate.entered) {
    if (pthread_cond_timedwait(&g_gate.cv, &g_gate.m, &until) != 0) break;
  }
  int entered = g_gate.entered;
  pthread_mutex_unlock(&g_gate.m);
  return entered;
}

/* Lets the held call go; returns 1 if it had already given up (the test's thread was blocked). */
static int gate_open(void) {
  pthread_mutex_lock(&g_gate.m);
  g_gate.open = 1;
  g_gate.armed = GATE_NONE;
  int timed_out = g_gate.timed_out;
  pthread_cond_broadcast(&g_gate.cv);
  pthread_mutex_unlock(&g_gate.m);
  return timed_out;
}

typedef t4a_fixture fixture;

static t4a_status make_xfer(t4a_retire *r, size_t chunk, uint32_t n, t4a_xfer **out) {
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = chunk;
  o.num_chunks = n;
  return t4a_xfer_create(r, &o, out);
}

/* The gate's entries in the driver's table (the fake's own behind them). */
static void gate_table(t4a_driver_table *table) {
  real_event_sync = table->cuEventSynchronize;
  real_htod = table->cuMemcpyHtoDAsync;
  table->cuEventSynchronize = gated_event_sync;
  table->cuMemcpyHtoDAsync = gated_htod;
  gate_arm(GATE_NONE);
}

/* The standard stack (the pool without reuse: a released buffer's block goes back at once, so
 * the fake's live blocks are exactly the buffers alive; a quarantined buffer would keep a cache
 * alive with its pool) with an xfer of two chunks, on a driver over the gated table. */
static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* nothing runs unless a sync or the test says so */
  o.wrap_table = gate_table;
  o.wrapped_name = "fake+gate";
  o.build |= T4A_FIXTURE_XFER;
  o.xfer.chunk_bytes = CHUNK;
  o.xfer.num_chunks = 2;
  return t4a_fixture_setup(state, &o);
}

/* For the two tests that leak on purpose (a device fault; failure sweeps): t4a_retire holds
 * quarantined references forever, and leaks its keepalives when no drain can be proved, so those
 * buffers, pinned memory and (through them) the fixture's pool, lane and driver stay allocated.
 * teardown_counted checks that everything alive in the fake is exactly what t4a counted; for
 * LeakSanitizer these allocations are suppressed by the frames below, and only these. */
__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep",
                             "test_device_fault_during_download", "test_failure_names_the_chunk",
                             "test_failed_download_keeps_its_chunks_until_complete",
                             "test_quarantined_chunks_reclaimed_by_a_later_completion",
                             "test_failed_answers_never_reclaim", "test_reclaim_sweep")

static int teardown(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT | T4A_FIXTURE_CHECK_FOREIGN_EVENTS);
}

/* Objects alive in the fake beyond what t4a counted as leaked (pools and streams belong to
 * t4a_mem's and t4a_ctx's own sweeps: a quarantined buffer keeps its pool). */
static long unaccounted(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS | T4A_FIXTURE_LIVE_EVENTS);
}

/* For tests that fault or leak on purpose: what is alive must be exactly what t4a counted. */
static int teardown_counted(void **state) {
  return t4a_fixture_teardown_counted(state, unaccounted, 0);
}

static t4a_counter_values counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  return v;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

static t4a_buffer *buffer(fixture *f, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, bytes, 0, 0, &b));
  return b;
}

static unsigned char *device_view(fixture *f, t4a_buffer *b) {
  return t4a_fake_host_view(f->fake, (CUdeviceptr)t4a_buffer_devptr(b), t4a_buffer_size(b));
}

/* The times the ring asked the driver about an event: queries and host waits. */
static uint64_t event_asks(fixture *f) {
  return t4a_fake_calls(f->fake, "cuEventQuery") + t4a_fake_calls(f->fake, "cuEventSynchronize");
}

/* ---- tests ---- */

static void test_round_trip_across_chunks(void **state) {
  fixture *f = *state;
  const size_t n = 5 * CHUNK + 123;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 1);
  memset(dst, 0, n);
  t4a_buffer *b = buffer(f, n + 64);
  CK(t4a_xfer_upload(f->xfer, b, 32, src, n)); /* an offset inside the buffer */
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 32, dst, n, &p));
  t4a_buffer_release(b); /* the keepalives hold it until the DMA ran */
  CK(t4a_xfer_pending_wait(p));
  assert_memory_equal(src, dst, n);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_ALREADY_CONSUMED);
  t4a_xfer_pending_release(p);
  t4a_counter_values v = counters(f);
  assert_int_equal(v.bytes_uploaded, n);
  assert_int_equal(v.bytes_downloaded, n);
  assert_int_equal(v.events_recorded, 12); /* one per staged chunk: 6 up, 6 down */
  assert_true(v.staging_waits >= 8);      /* a ring of 2 for 12 chunks */
  free(src);
  free(dst);
}

static void test_source_reusable_when_upload_returns(void **state) {
  fixture *f = *state;
  const size_t n = 2 * CHUNK; /* fits the ring: no staging wait, so nothing ran */
  unsigned char *src = malloc(n), *want = malloc(n);
  fill(src, n, 2);
  memcpy(want, src, n);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  assert_int_equal(counters(f).staging_waits, 0);
  assert_true(t4a_fake_pending(f->fake, NULL) > 0); /* the DMA has not run yet */
  memset(src, 0xAB, n);                             /* the caller reuses its memory at once */
  free(src);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b), want, n);
  t4a_buffer_release(b);
  free(want);
}

static void test_poll_not_ready_then_ok_then_consumed(void **state) {
  fixture *f = *state;
  const size_t n = CHUNK + 10;
  unsigned char src[CHUNK + 10], dst[CHUNK + 10];
  fill(src, n, 3);
  memset(dst, 0xEE, n);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  CK(t4a_retire_wait(f->retire));
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_NOT_READY);
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0xEE);
  t4a_fake_progress(f->fake); /* the DMA ran; the bytes wait in the chunk for an observer */
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0xEE);
  CK(t4a_xfer_pending_poll(p));
  assert_memory_equal(src, dst, n);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_ALREADY_CONSUMED);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_ALREADY_CONSUMED);
  assert_int_equal(t4a_xfer_pending_wait(p), T4A_ALREADY_CONSUMED);
  /* Memoised: a later sticky error never turns the delivered download into a failure. */
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
}

/* The OK of a delivery is reported even if restoring the caller's context fails afterwards (it
 * is counted): otherwise the caller would see an error now and ALREADY_CONSUMED next. */
static void test_delivery_survives_a_failed_restore(void **state) {
  fixture *f = *state;
  const size_t n = 100;
  unsigned char src[100], dst[100];
  fill(src, n, 9);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  t4a_fake_progress(f->fake);
  t4a_counter_values before, after;
  t4a_driver_stats(f->drv, &before);
  /* The poll's scope sets the lane's context (call 0) and restores none (call 1): fail call 1. */
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 1, 1, CUDA_ERROR_UNKNOWN, 0);
  CK(t4a_xfer_pending_poll(p));
  t4a_fake_clear_injections(f->fake);
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  assert_memory_equal(src, dst, n);
  t4a_driver_stats(f->drv, &after);
  assert_int_equal(after.ctx_restore_failures - before.ctx_restore_failures, 1);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_ALREADY_CONSUMED);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
}

static void test_dropped_download_leaks_nothing_and_holds_its_chunk(void **state) {
  fixture *f = *state;
  const size_t n = 2 * CHUNK;
  unsigned char *src = malloc(n), *dst = malloc(n), *up = malloc(CHUNK);
  fill(src, n, 4);
  fill(up, CHUNK, 5);
  t4a_buffer *b = buffer(f, n), *b2 = buffer(f, CHUNK);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  CK(t4a_retire_wait(f->retire));
  memset(dst, 0x11, n);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p)); /* holds both chunks */
  t4a_xfer_pending_release(p);                       /* dropped without a wait */
  assert_true(t4a_fake_pending(f->fake, NULL) > 0);
  uint64_t waits = counters(f).staging_waits;
  /* The next upload needs a chunk: it must wait for the dropped download's DMA, not reuse it. */
  CK(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK));
  assert_int_equal(counters(f).staging_waits, waits + 1);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b2), up, CHUNK);
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0x11); /* nothing delivered */
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(src);
  free(dst);
  free(up);
  /* teardown checks t4a_fake_nothing_live */
}

static void test_dropped_download_then_destroy(void **state) {
  fixture *f = *state;
  unsigned char dst[CHUNK];
  t4a_buffer *b = buffer(f, CHUNK);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, CHUNK, &p));
  t4a_buffer_release(b);
  t4a_xfer_destroy(f->xfer); /* the handle keeps the ring */
  f->xfer = NULL;
  t4a_xfer_pending_release(p); /* the last reference: drains the stream, frees the ring */
  assert_int_equal(t4a_fake_pending(f->fake, NULL), 0);
}

static void test_staging_waits_counted(void **state) {
  fixture *f = *state;
  const size_t n = 3 * CHUNK;
  unsigned char *src = calloc(1, n);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  t4a_counter_values v = counters(f);
  assert_int_equal(v.staging_waits, 1); /* the third chunk waited for the first */
  assert_true(v.host_waits >= 1);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, CHUNK));
  assert_int_equal(counters(f).staging_waits, 2);
  t4a_fake_progress(f->fake);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, CHUNK)); /* the oldest chunk already completed */
  assert_int_equal(counters(f).staging_waits, 2);
  t4a_buffer_release(b);
  free(src);
}

/* The ring pins each chunk when it first hands it out (xfer.c: chunk_pin), not at create: a
 * two-chunk upload pins both, so that a sweep's baseline holds the ring's 2 chunks and 2 events. */
static void pin_ring(fixture *f) {
  t4a_buffer *b = NULL;
  unsigned char *src = calloc(1, 2 * CHUNK);
  assert_non_null(src);
  CK(t4a_buffer_create(f->pool, 2 * CHUNK, 0, 0, &b));
  CK(t4a_xfer_upload(f->xfer, b, 0, src, 2 * CHUNK));
  CK(t4a_lane_synchronize(f->lane));
  t4a_buffer_release(b);
  free(src);
  assert_non_null(t4a_xfer_chunk_host(f->xfer, 0));
  assert_non_null(t4a_xfer_chunk_host(f->xfer, 1));
}

static void test_chunks_are_portable(void **state) {
  fixture *f = *state;
  assert_int_equal(t4a_xfer_num_chunks(f->xfer), 2);
  assert_int_equal(t4a_xfer_chunk_bytes(f->xfer), CHUNK);
  assert_null(t4a_xfer_chunk_host(f->xfer, 0)); /* not pinned before the first staged transfer */
  pin_ring(f);
  for (uint32_t i = 0; i < 2; i++) {
    unsigned flags = 0;
    assert_int_equal(t4a_fake_host_alloc_flags(f->fake, t4a_xfer_chunk_host(f->xfer, i), &flags), 1);
    assert_true(flags & CU_MEMHOSTALLOC_PORTABLE);
  }
  assert_null(t4a_xfer_chunk_host(f->xfer, 2));
  /* Defaults: 16 MiB x 4 deep, 2 made at create. */
  t4a_xfer *d = NULL;
  CK(t4a_xfer_create(f->retire, NULL, &d));
  assert_int_equal(t4a_xfer_chunk_bytes(d), T4A_XFER_DEFAULT_CHUNK_BYTES);
  assert_int_equal(t4a_xfer_num_chunks(d), T4A_XFER_DEFAULT_NUM_CHUNKS);
  struct t4a_xfer_stats ds;
  t4a_xfer_stats(d, &ds);
  assert_int_equal(ds.ring_chunks, T4A_XFER_INITIAL_CHUNKS);
  assert_int_equal(ds.free_chunks, T4A_XFER_INITIAL_CHUNKS);
  assert_null(t4a_xfer_chunk_host(d, T4A_XFER_INITIAL_CHUNKS));
  t4a_xfer_destroy(d);
  t4a_xfer_options o = {.chunk_bytes = 100, .num_chunks = 2};
  assert_int_equal(t4a_xfer_create(f->retire, &o, &d), T4A_INVALID_ARGUMENT);
  o = (t4a_xfer_options){.chunk_bytes = CHUNK, .num_chunks = T4A_XFER_MAX_NUM_CHUNKS + 1};
  assert_int_equal(t4a_xfer_create(f->retire, &o, &d), T4A_INVALID_ARGUMENT);
  assert_null(d);
}

/* Issue 25 item 4: creating the transfer state pins nothing; the ring pins each chunk (and
 * creates its event) when it first hands it out, so a one-chunk transfer pins one chunk. A
 * failure there (the pinning or the event) is typed, enqueues nothing and keeps what was made for
 * the next try; the retry completes the chunk and the bytes arrive; destroy frees it all. */
static void test_ring_pinned_at_first_use(void **state) {
  fixture *f = *state;
  long base = unaccounted(f);
  uint64_t pins = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  uint64_t events = t4a_fake_calls(f->fake, "cuEventCreate");
  t4a_xfer_options o = {.chunk_bytes = CHUNK, .num_chunks = 2};
  t4a_xfer *x = NULL;
  CK(t4a_xfer_create(f->retire, &o, &x));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventCreate"), events);
  assert_int_equal(unaccounted(f), base);
  assert_null(t4a_xfer_chunk_host(x, 0));
  unsigned char *src = malloc(2 * CHUNK), *back = calloc(1, 2 * CHUNK);
  assert_non_null(src);
  assert_non_null(back);
  for (size_t i = 0; i < 2 * CHUNK; i++) src[i] = (unsigned char)(i * 13u + 1);
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, 2 * CHUNK, 0, 0, &b));
  uint64_t copies = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  long with_b = unaccounted(f); /* and the device buffer */
  /* The first chunk's pinning fails. */
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_error_clear();
  assert_int_equal(t4a_xfer_upload(x, b, 0, src, CHUNK), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemHostAlloc");
  t4a_fake_clear_injections(f->fake);
  assert_null(t4a_xfer_chunk_host(x, 0));
  assert_int_equal(unaccounted(f), with_b);
  /* Its event fails: the pinned chunk stays for the retry, nothing is handed out. */
  t4a_fake_inject(f->fake, "cuEventCreate", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_error_clear();
  assert_int_equal(t4a_xfer_upload(x, b, 0, src, CHUNK), T4A_DRIVER_ERROR);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuEventCreate");
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), copies); /* nothing enqueued */
  assert_int_equal(unaccounted(f), with_b + 1); /* the pinned chunk, kept */
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.free_chunks, 2);
  /* The retry completes that chunk (its event, no more pinning); one chunk is all it pins. */
  pins = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins);
  assert_non_null(t4a_xfer_chunk_host(x, 0));
  assert_null(t4a_xfer_chunk_host(x, 1));
  assert_int_equal(unaccounted(f), with_b + 2);
  /* Two chunks' worth each way: the second chunk is pinned, the bytes arrive. */
  CK(t4a_xfer_upload(x, b, 0, src, 2 * CHUNK));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins + 1);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, 0, back, 2 * CHUNK, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(back, src, 2 * CHUNK);
  assert_non_null(t4a_xfer_chunk_host(x, 1));
  assert_int_equal(unaccounted(f), with_b + 4);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_lane_synchronize(f->lane));
  assert_int_equal(unaccounted(f), with_b); /* the ring is gone; b's block stays in the pool's cache */
  assert_int_equal(with_b, base + 1);
  free(src);
  free(back);
}

static void test_foreign_and_out_of_range(void **state) {
  fixture *f = *state;
  t4a_lane *other = NULL;
  t4a_mem_pool *op = NULL;
  t4a_buffer *ob = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &other)); /* same device, another domain */
  CK(t4a_mem_pool_create(other, NULL, &op));
  CK(t4a_buffer_create(op, CHUNK, 0, 0, &ob));
  unsigned char host[CHUNK] = {0};
  t4a_xfer_pending *p = NULL;
  assert_int_equal(t4a_xfer_upload(f->xfer, ob, 0, host, 16), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_xfer_download(f->xfer, ob, 0, host, 16, &p), T4A_FOREIGN_HANDLE);
  assert_null(p);
  t4a_buffer *b = buffer(f, CHUNK);
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), 64, 0, &pin));
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 1, host, CHUNK), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, CHUNK + 1, host, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, SIZE_MAX, host, 2), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, host, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, NULL, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_download(f->xfer, b, CHUNK - 1, host, 2, &p), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_pinned(f->xfer, b, 0, pin, 32, 64), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, 65, &p), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_pinned(f->xfer, ob, 0, pin, 0, 64), T4A_FOREIGN_HANDLE);
  assert_null(p);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") +
                       t4a_fake_calls(f->fake, "cuMemcpyDtoHAsync"),
                   0);
  assert_int_equal(counters(f).admissions, 0);
  t4a_pinned_release(pin);
  t4a_buffer_release(b);
  t4a_buffer_release(ob);
  t4a_mem_pool_release(op);
  t4a_lane_release(other);
}

static void test_pinned_round_trip_keeps_memory_alive(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_pinned *in = NULL, *out = NULL;
  CK(t4a_pinned_create(h, 3 * CHUNK, 0, &in));
  CK(t4a_pinned_create(h, 3 * CHUNK, 0, &out));
  unsigned char *want = malloc(3 * CHUNK);
  fill(t4a_pinned_host(in), 3 * CHUNK, 6);
  memcpy(want, t4a_pinned_host(in), 3 * CHUNK);
  memset(t4a_pinned_host(out), 0, 3 * CHUNK);
  t4a_buffer *b = buffer(f, 3 * CHUNK);
  uint64_t hd = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  CK(t4a_xfer_upload_pinned(f->xfer, b, 0, in, 0, 3 * CHUNK));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), hd + 1); /* direct: one DMA */
  t4a_pinned_release(in); /* kept alive by the admission until its DMA completed */
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download_pinned(f->xfer, b, CHUNK, out, 8, CHUNK, &p));
  t4a_buffer_release(b);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_NOT_READY);
  CK(t4a_xfer_pending_wait(p));
  assert_memory_equal((unsigned char *)t4a_pinned_host(out) + 8, want + CHUNK, CHUNK);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_ALREADY_CONSUMED);
  t4a_xfer_pending_release(p);
  t4a_pinned_release(out);
  assert_int_equal(counters(f).staging_waits, 0);
  free(want);
}

static void test_device_fault_during_download(void **state) {
  fixture *f = *state;
  unsigned char dst[CHUNK];
  memset(dst, 0x22, sizeof dst);
  t4a_buffer *b = buffer(f, CHUNK);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, CHUNK, &p));
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_NOT_READY);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  t4a_status st = t4a_xfer_pending_poll(p);
  assert_true(st == T4A_CONTEXT_LOST || st == T4A_LANE_BROKEN);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, st);
  assert_int_equal(t4a_xfer_pending_poll(p), st); /* memoised */
  assert_int_equal(t4a_xfer_pending_wait(p), st);
  for (size_t i = 0; i < CHUNK; i++) assert_int_equal(dst[i], 0x22);
  /* The lane refuses new work. */
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, dst, 16), T4A_LANE_BROKEN);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
}

/* A download whose second copy fails after enqueueing: the first chunk's DMA is still queued, so
 * the chunk must stay out of the ring (ORPHAN) until its event completed. Reusing it at once would
 * let the queued DtoH overwrite the next upload's bytes in the chunk. */
static void test_failed_download_keeps_its_chunks_until_complete(void **state) {
  fixture *f = *state;
  const size_t n = 3 * CHUNK;
  unsigned char *dst = malloc(n), *up = malloc(CHUNK);
  t4a_buffer *b = buffer(f, n), *b2 = buffer(f, CHUNK);
  t4a_fake_progress(f->fake);
  fill(device_view(f, b), n, 11);
  fill(up, CHUNK, 12);
  memset(dst, 0x33, n);
  t4a_fake_inject(f->fake, "cuMemcpyDtoHAsync", 1, 1, CUDA_ERROR_UNKNOWN, 1);
  t4a_xfer_pending *p = NULL;
  assert_int_equal(t4a_xfer_download(f->xfer, b, 0, dst, n, &p), T4A_DRIVER_ERROR);
  assert_null(p);
  t4a_fake_clear_injections(f->fake);
  assert_true(t4a_fake_pending(f->fake, NULL) > 0); /* the first chunk's DMA has not run */
  uint64_t waits = counters(f).staging_waits;
  CK(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK)); /* the ring's next slot is that first chunk */
  assert_int_equal(counters(f).staging_waits, waits + 1); /* waited for its event first */
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b2), up, CHUNK);
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0x33); /* no delivery */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(dst);
  free(up);
}

static struct t4a_xfer_stats xstate(t4a_xfer *x) {
  struct t4a_xfer_stats s;
  t4a_xfer_stats(x, &s);
  return s;
}

/* A pending handle that fails on one chunk's event quarantines its other chunks too: their DMA
 * state is unknown, so they are not handed out on a guess (here: every chunk is then
 * quarantined). A failed answer frees nothing; a later record on the lane's stream that answers
 * OK (the ring's marker, recorded after them) proves their DMA ran, and only then are they
 * reused. The failed handle's destination is never written. */
static void test_failed_handle_reclaims_its_chunks_only_after_proof(void **state) {
  fixture *f = *state;
  const size_t n = 2 * CHUNK;
  unsigned char *dst = malloc(n), *up = malloc(CHUNK);
  t4a_buffer *b = buffer(f, n), *b2 = buffer(f, CHUNK);
  fill(up, CHUNK, 13);
  memset(dst, 0x44, n);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p)); /* holds both chunks */
  t4a_fake_inject(f->fake, "cuEventQuery", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_DRIVER_ERROR); /* the first chunk's event */
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_DRIVER_ERROR); /* memoised */
  assert_int_equal(xstate(f->xfer).quarantined_chunks, 2);
  uint64_t hd = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  /* The marker's answer fails: nothing is freed, nothing is copied. */
  t4a_fake_inject(f->fake, "cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), hd);
  struct t4a_xfer_stats xs = xstate(f->xfer);
  assert_int_equal(xs.quarantined_chunks, 2);
  assert_int_equal(xs.chunks_reclaimed, 0);
  /* The marker answers OK: both chunks go back to the ring and the upload goes through. */
  CK(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK));
  xs = xstate(f->xfer);
  assert_int_equal(xs.quarantined_chunks, 0);
  assert_int_equal(xs.chunks_reclaimed, 2);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b2), up, CHUNK);
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0x44);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_DRIVER_ERROR); /* still its memoised failure */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(dst);
  free(up);
}

/* Two transient failures after enqueue quarantine both chunks. A later record on the same stream
 * that answers OK proves the uncertain copies finished, so the chunks come back: first through a
 * pinned download's event (no marker, no staging wait), then, after two more failures, through
 * the ring's own marker. Every later staged upload succeeds with exact bytes. */
static void test_quarantined_chunks_reclaimed_by_a_later_completion(void **state) {
  fixture *f = *state;
  const size_t n = 3 * CHUNK + 5;
  unsigned char *src = malloc(n), *junk = malloc(CHUNK);
  fill(src, n, 21);
  fill(junk, CHUNK, 22);
  /* One buffer per failed call: t4a_retire quarantines a reference per failure, and
   * teardown_counted matches counted references to live blocks one to one. */
  t4a_buffer *bad[4], *b = buffer(f, n);
  for (int i = 0; i < 4; i++) bad[i] = buffer(f, CHUNK);
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), 64, 0, &pin));
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 0, 2, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[0], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[1], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(xstate(f->xfer).quarantined_chunks, 2);
  /* A pinned download records after them; its OK reclaims both. */
  t4a_xfer_pending *q = NULL;
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, 64, &q));
  CK(t4a_xfer_pending_wait(q));
  t4a_xfer_pending_release(q);
  struct t4a_xfer_stats xs = xstate(f->xfer);
  assert_int_equal(xs.quarantined_chunks, 0);
  assert_int_equal(xs.chunks_reclaimed, 2);
  uint64_t waits = counters(f).staging_waits;
  CK(t4a_xfer_upload(f->xfer, b, 0, src, 2 * CHUNK)); /* both chunks free: no staging wait */
  assert_int_equal(counters(f).staging_waits, waits);
  /* Two more failures; then the ring proves them itself with one marker. */
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 0, 2, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[2], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[3], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(xstate(f->xfer).quarantined_chunks, 2);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n)); /* and again: the ring is whole */
  xs = xstate(f->xfer);
  assert_int_equal(xs.quarantined_chunks, 0);
  assert_int_equal(xs.chunks_reclaimed, 4);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b), src, n);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_pinned_release(pin);
  for (int i = 0; i < 4; i++) t4a_buffer_release(bad[i]); /* quarantined: counted at teardown */
  t4a_buffer_release(b);
  free(src);
  free(junk);
}

/* Fault lane 1 for host transfers: a multi-chunk upload (and download) whose later chunk fails
 * names the transfer, the chunk and its bytes, keeping the entry and code. */
static void test_failure_names_the_chunk(void **state) {
  fixture *f = *state;
  const size_t n = 4 * CHUNK;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 31);
  t4a_buffer *b = buffer(f, n), *b2 = buffer(f, n);
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 2, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, src, n), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemcpyHtoDAsync");
  assert_string_equal(e.code_name, "CUDA_ERROR_UNKNOWN");
  assert_non_null(strstr(e.message, "upload, staging chunk 3 of 4 (bytes [8192, 12288))"));
  t4a_fake_clear_injections(f->fake);
  CK(t4a_xfer_upload(f->xfer, b2, 0, src, n));
  t4a_xfer_pending *p = NULL;
  t4a_fake_inject(f->fake, "cuMemcpyDtoHAsync", 1, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_download(f->xfer, b2, 0, dst, n, &p), T4A_DRIVER_ERROR);
  assert_null(p);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "download, staging chunk 2 of 4 (bytes [4096, 8192))"));
  t4a_fake_clear_injections(f->fake);
  t4a_buffer_release(b); /* quarantined: counted at teardown */
  t4a_buffer_release(b2);
  free(src);
  free(dst);
}

/* Copy threads: chunk copies of 2 MiB or more are split across the pool (counted), byte-exact
 * both ways; two threads transferring at once (one finds the pool busy and copies alone) stay
 * exact; 1 thread makes no pool; a thread that cannot start is a typed error that leaks
 * nothing. */
typedef struct threaded_job {
  t4a_xfer *x;
  t4a_buffer *b;
  const unsigned char *src;
  unsigned char *back;
  size_t n;
  t4a_status st;
} threaded_job;
static void *threaded_round_trip(void *arg) {
  threaded_job *j = arg;
  for (int i = 0; i < 3 && j->st == T4A_OK; i++) {
    j->st = t4a_xfer_upload(j->x, j->b, 1, j->src, j->n);
    t4a_xfer_pending *p = NULL;
    if (j->st == T4A_OK) j->st = t4a_xfer_download(j->x, j->b, 1, j->back, j->n, &p);
    if (j->st == T4A_OK) j->st = t4a_xfer_pending_wait(p);
    t4a_xfer_pending_release(p);
    if (j->st == T4A_OK && memcmp(j->back, j->src, j->n) != 0) j->st = T4A_INTERNAL;
  }
  return NULL;
}
static t4a_status op_threaded_create(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = CHUNK;
  o.copy_threads = 4;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &o, &x);
  if (st != T4A_OK && x != NULL) st = T4A_INTERNAL; /* no object on failure */
  t4a_xfer_destroy(x);
  t4a_status d = t4a_retire_destroy(r);
  return st != T4A_OK ? st : d;
}

static void test_copy_threads(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = (size_t)4 << 20;
  o.num_chunks = 2;
  o.copy_threads = 4;
  o.split_copy_min_bytes = (size_t)2 << 20;
  o.pipeline_piece_bytes = o.chunk_bytes; /* whole chunks only (test_path_by_size has units) */
  CK(t4a_xfer_create(r, &o, &x));
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.copy_threads, 4);
  const size_t n = ((size_t)13 << 20) + 7; /* 4 chunks, the last one below the split size */
  unsigned char *src = malloc(n), *back = malloc(n), *src2 = malloc(n), *back2 = malloc(n);
  fill(src, n, 41);
  fill(src2, n, 42);
  t4a_buffer *b = buffer(f, n + 1), *b2 = buffer(f, n + 1);
  threaded_job j = {x, b, src, back, n, T4A_OK};
  threaded_round_trip(&j);
  CK(j.st);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.parallel_copies, 3 * 2 * 3); /* 3 split chunks up and down, 3 rounds */
  assert_int_equal(xs.single_copies, 1 * 2 * 3);   /* the last chunk, 1 MiB + 7: one memcpy */
  assert_int_equal(xs.pipelined_pieces, 0);        /* several chunks: the ring overlaps them */
  /* Two threads at once on one xfer. */
  threaded_job j2 = {x, b2, src2, back2, n, T4A_OK};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, threaded_round_trip, &j2), 0);
  threaded_round_trip(&j);
  pthread_join(t, NULL);
  CK(j.st);
  CK(j2.st);
  t4a_xfer_destroy(x);
  /* One thread: no pool. */
  o.copy_threads = 1;
  CK(t4a_xfer_create(r, &o, &x));
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.copy_threads, 1);
  j.x = x;
  threaded_round_trip(&j);
  CK(j.st);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.parallel_copies, 0);
  t4a_xfer_destroy(x);
  o.copy_threads = T4A_XFER_MAX_COPY_THREADS + 1;
  assert_int_equal(t4a_xfer_create(r, &o, &x), T4A_INVALID_ARGUMENT);
  CK(t4a_retire_destroy(r));
  /* A copy thread (or its lock) that cannot be made: typed, and nothing left behind. */
  t4a_sweep sw = {.name = "copy threads", .fake = f->fake, .op = op_threaded_create,
                  .unaccounted = unaccounted, .user = f};
  f->baseline = unaccounted(f);
  static const t4a_status internal[] = {T4A_INTERNAL};
  assert_int_equal(t4a_sweep_fault(&sw, T4A_FAULT_THREAD_CREATE, internal, 1), 3);
  assert_true(t4a_sweep_fault(&sw, T4A_FAULT_MUTEX_INIT, internal, 1) > 0);
  f->baseline = 0;
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(src);
  free(back);
  free(src2);
  free(back2);
}

/* Staged transfers refuse a capturing lane stream (their chunks recycle on event answers a graph
 * would not respect); nothing is enqueued or captured, and the capture survives. */
static void test_staged_transfers_refuse_capture(void **state) {
  fixture *f = *state;
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  unsigned char host[64] = {1, 2, 3};
  t4a_buffer *b = buffer(f, 64);
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(f->lane), NULL));
  assert_int_equal(t->cuStreamBeginCapture(t4a_lane_stream(f->lane),
                                           CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   CUDA_SUCCESS);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, host, sizeof host), T4A_UNSUPPORTED);
  t4a_xfer_pending *p = NULL;
  assert_int_equal(t4a_xfer_download(f->xfer, b, 0, host, sizeof host, &p), T4A_UNSUPPORTED);
  assert_null(p);
  CUgraph g = NULL;
  assert_int_equal(t->cuStreamEndCapture(t4a_lane_stream(f->lane), &g), CUDA_SUCCESS);
  assert_int_equal(t->cuGraphDestroy(g), CUDA_SUCCESS);
  CK(t4a_ctx_scope_exit(&scope));
  CK(t4a_xfer_upload(f->xfer, b, 0, host, sizeof host)); /* after the capture: fine */
  t4a_buffer_release(b);
}

/* A failed event answer never frees a quarantined chunk: neither a failed marker nor a later
 * pinned download's event that reports a sticky error. */
static void test_failed_answers_never_reclaim(void **state) {
  fixture *f = *state;
  unsigned char junk[CHUNK] = {1};
  t4a_buffer *bad[2] = {buffer(f, CHUNK), buffer(f, CHUNK)}, *b = buffer(f, CHUNK);
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), 64, 0, &pin));
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 0, 2, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[0], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_xfer_upload(f->xfer, bad[1], 0, junk, CHUNK), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  t4a_fake_inject(f->fake, "cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, junk, CHUNK), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(xstate(f->xfer).quarantined_chunks, 2);
  /* Recorded after the quarantines, but its answer is a sticky error. */
  t4a_xfer_pending *q = NULL;
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, 64, &q));
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_xfer_pending_wait(q), T4A_CONTEXT_LOST);
  t4a_xfer_pending_release(q);
  struct t4a_xfer_stats xs = xstate(f->xfer);
  assert_int_equal(xs.quarantined_chunks, 2);
  assert_int_equal(xs.chunks_reclaimed, 0);
  assert_int_equal(t4a_xfer_upload(f->xfer, b, 0, junk, CHUNK), T4A_LANE_BROKEN);
  assert_int_equal(counters(f).bytes_downloaded, 0);
  t4a_pinned_release(pin);
  t4a_buffer_release(bad[0]);
  t4a_buffer_release(bad[1]);
  t4a_buffer_release(b);
}

/* A staged wait waits on the newest chunk of its handle only: stream order proves the older
 * ones, which then settle with queries. */
/* A download's wait delivers its chunks oldest first, each as soon as its own event answers, so
 * the copy out of chunk k overlaps the DMA of the later ones (rather than one wait on the newest
 * and every delivery after the bus went idle): one host wait per chunk still in flight when the
 * one before it was delivered (here every one: nothing completes unless synchronised), none for
 * a chunk already complete. */
static void test_wait_delivers_oldest_first(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  CK(make_xfer(r, CHUNK, 4, &x));
  const size_t n = 4 * CHUNK - 9;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 23);
  memset(dst, 0, n);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(x, b, 0, src, n));
  CK(t4a_retire_wait(r));
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, 0, dst, n, &p)); /* four chunks, none waited yet */
  uint64_t syncs = t4a_fake_calls(f->fake, "cuEventSynchronize");
  uint64_t hw = counters(f).host_waits;
  CK(t4a_xfer_pending_wait(p));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventSynchronize") - syncs, 4);
  assert_int_equal(counters(f).host_waits - hw, 4);
  assert_memory_equal(src, dst, n);
  t4a_xfer_pending_release(p);
  /* Completed before the wait (the stream synchronised): delivered on queries, no event wait. */
  memset(dst, 0, n);
  CK(t4a_xfer_download(x, b, 0, dst, n, &p));
  CK(t4a_retire_wait(r));
  syncs = t4a_fake_calls(f->fake, "cuEventSynchronize");
  CK(t4a_xfer_pending_wait(p));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventSynchronize") - syncs, 0);
  assert_memory_equal(src, dst, n);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
  free(src);
  free(dst);
}

/* The ring starts with T4A_XFER_INITIAL_CHUNKS and grows to its depth only for a transfer that
 * spans more chunks (a small-transfer user never pays the whole depth); the deeper ring keeps
 * every chunk of a transfer in flight at once where a 2-deep one waits. */
static void test_ring_grows_lazily(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL, *x2 = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  CK(make_xfer(r, CHUNK, 4, &x));
  CK(make_xfer(r, CHUNK, 2, &x2));
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_chunks, 2);
  assert_int_equal(t4a_xfer_num_chunks(x), 4);
  assert_null(t4a_xfer_chunk_host(x, 2));
  const size_t n = 4 * CHUNK - 5;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 31);
  t4a_buffer *b = buffer(f, n);
  uint64_t allocs = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK)); /* one chunk: no growth, the first chunk pinned */
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_chunks, 2);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc") - allocs, 1);
  CK(t4a_retire_wait(r));
  uint64_t waits = counters(f).staging_waits;
  CK(t4a_xfer_upload(x, b, 0, src, n)); /* four chunks: grows to 4, none waits */
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_chunks, 4);
  /* the second chunk pinned at its first use, the two grown ones when the ring grew */
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc") - allocs, 4);
  assert_non_null(t4a_xfer_chunk_host(x, 3));
  unsigned flags = 0;
  assert_int_equal(t4a_fake_host_alloc_flags(f->fake, t4a_xfer_chunk_host(x, 3), &flags), 1);
  assert_true(flags & CU_MEMHOSTALLOC_PORTABLE);
  assert_int_equal(xs.max_chunks_in_flight, 4);
  assert_int_equal(xs.busy_chunks, 4);
  assert_int_equal(counters(f).staging_waits, waits);
  assert_int_equal(xs.pipelined_pieces, 0);
  CK(t4a_retire_wait(r));
  /* The same on a 2-deep ring: two chunks in flight at most, the other two wait. */
  waits = counters(f).staging_waits;
  CK(t4a_xfer_upload(x2, b, 0, src, n));
  struct t4a_xfer_stats xs2;
  t4a_xfer_stats(x2, &xs2);
  assert_int_equal(xs2.ring_chunks, 2);
  assert_int_equal(xs2.max_chunks_in_flight, 2);
  assert_int_equal(counters(f).staging_waits - waits, 2);
  CK(t4a_retire_wait(r));
  /* A download of six chunks on the 4-deep ring: four in flight, the first two delivered by the
   * ring when it needs them back, byte-exact. */
  const size_t m = 6 * CHUNK - 3;
  unsigned char *big = malloc(m), *back = malloc(m);
  fill(big, m, 32);
  memset(back, 0, m);
  t4a_buffer *bb = buffer(f, m);
  CK(t4a_xfer_upload(x, bb, 0, big, m));
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, bb, 0, back, m, &p));
  CK(t4a_xfer_pending_wait(p));
  assert_memory_equal(big, back, m);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_chunks, 4);
  assert_int_equal(xs.max_chunks_in_flight, 4);
  assert_int_equal(xs.ring_grow_failures, 0);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(bb);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x2);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
  free(src);
  free(dst);
  free(big);
  free(back);
}

/* A chunk the ring cannot make when it grows is absorbed: the transfer runs on the chunks there
 * are (and waits for them), counted in ring_grow_failures, the caller's detail untouched,
 * nothing half-made left; a later transfer grows the ring. */
static void test_ring_grow_failure_absorbed(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  CK(make_xfer(r, CHUNK, 4, &x));
  const size_t n = 4 * CHUNK;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 33);
  memset(dst, 0, n);
  t4a_buffer *b = buffer(f, n);
  /* the ring's first two chunks pinned (at their first use) before the count */
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK));
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK));
  CK(t4a_retire_wait(r));
  long live = unaccounted(f);
  assert_int_equal(t4a_xfer_upload(x, NULL, 0, src, n), T4A_INVALID_ARGUMENT); /* a detail */
  t4a_error before;
  t4a_error_last(&before);
  uint64_t injected = t4a_fake_injected(f->fake);
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  CK(t4a_xfer_upload(x, b, 0, src, n));
  assert_int_equal(t4a_fake_injected(f->fake) - injected, 1);
  t4a_fake_clear_injections(f->fake);
  t4a_error e;
  t4a_error_last(&e);
  /* Not the absorbed failure's (the staging waits' NOT_READY queries may have set theirs). */
  assert_int_not_equal(e.status, T4A_HOST_OUT_OF_MEMORY);
  assert_int_not_equal(e.code, CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(before.status, T4A_INVALID_ARGUMENT);
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_grow_failures, 1);
  assert_int_equal(xs.ring_chunks, 2);
  assert_int_equal(unaccounted(f) - live, 0); /* the failed chunk's pinned memory freed */
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, 0, dst, n, &p)); /* grows now */
  CK(t4a_xfer_pending_wait(p));
  assert_memory_equal(src, dst, n);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_chunks, 4);
  assert_int_equal(xs.ring_grow_failures, 1);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
  free(src);
  free(dst);
}

/* Which path a size takes: a transfer below the split size is one memcpy per chunk; an upload
 * that fits in one chunk and is two pieces or more is copied and enqueued piece by piece (one
 * DMA per piece, one event after the last), byte-exact; a download of the same size is one DMA
 * (its delivery one split copy out); a transfer of more than one chunk goes in units of one
 * piece first and last and whole chunks between, unless a chunk holds less than two pieces. */
static void test_path_by_size(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = 4 * CHUNK;
  o.num_chunks = 2;
  o.copy_threads = 3;
  o.split_copy_min_bytes = 3 * CHUNK;
  o.pipeline_piece_bytes = CHUNK;
  CK(t4a_xfer_create(r, &o, &x));
  const size_t n = 4 * CHUNK;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 34);
  memset(dst, 0, n);
  t4a_buffer *b = buffer(f, n);
  struct t4a_xfer_stats xs;
  /* Small: one chunk, below two pieces: one copy, one DMA, one event. */
  uint64_t htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  uint64_t rec = counters(f).events_recorded;
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK + 1));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, 1);
  assert_int_equal(counters(f).events_recorded - rec, 1);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.single_copies, 1);
  assert_int_equal(xs.pipelined_pieces, 0);
  assert_int_equal(xs.parallel_copies, 0);
  /* Mid-size, one chunk of 2.5 pieces: three pieces, three DMAs, one event. */
  htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  rec = counters(f).events_recorded;
  CK(t4a_xfer_upload(x, b, 0, src, 2 * CHUNK + CHUNK / 2));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, 3);
  assert_int_equal(counters(f).events_recorded - rec, 1);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.pipelined_pieces, 3);
  assert_int_equal(xs.single_copies, 4); /* pieces below the split size: one memcpy each */
  /* A full chunk: four pieces. Then a download of it: one DMA, its delivery split (>= 3 pages). */
  CK(t4a_xfer_upload(x, b, 0, src, n));
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.pipelined_pieces, 7);
  uint64_t dtoh = t4a_fake_calls(f->fake, "cuMemcpyDtoHAsync");
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, 0, dst, n, &p));
  CK(t4a_xfer_pending_wait(p));
  assert_memory_equal(src, dst, n);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyDtoHAsync") - dtoh, 1);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.parallel_copies, 1);
  assert_int_equal(xs.pipelined_pieces, 7);
  t4a_xfer_pending_release(p);
  /* More than one chunk: units of one piece first and last, whole chunks between, one DMA and
   * one event each (no pieces inside a unit): 8 pages are units of 1, 4, 2 and 1 pages (only the
   * 4-page one at the split size); both ways, byte-exact. */
  t4a_buffer *b2 = buffer(f, 2 * n);
  unsigned char *src2 = malloc(2 * n), *back2 = malloc(2 * n);
  fill(src2, 2 * n, 35);
  memset(back2, 0, 2 * n);
  htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  rec = counters(f).events_recorded;
  uint64_t singles = xs.single_copies;
  CK(t4a_xfer_upload(x, b2, 0, src2, 2 * n));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, 4);
  assert_int_equal(counters(f).events_recorded - rec, 4);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.pipelined_pieces, 7);
  assert_int_equal(xs.parallel_copies, 2);
  assert_int_equal(xs.single_copies - singles, 3);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b2), src2, 2 * n);
  assert_memory_equal(device_view(f, b), src, n);
  dtoh = t4a_fake_calls(f->fake, "cuMemcpyDtoHAsync");
  CK(t4a_xfer_download(x, b2, 0, back2, 2 * n, &p));
  CK(t4a_xfer_pending_wait(p));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyDtoHAsync") - dtoh, 4);
  assert_memory_equal(src2, back2, 2 * n);
  t4a_xfer_pending_release(p);
  /* Pieces too large for two per chunk: whole chunks only (8 pages: two units). */
  t4a_xfer *y = NULL;
  o.pipeline_piece_bytes = 3 * CHUNK;
  CK(t4a_xfer_create(r, &o, &y));
  htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  CK(t4a_xfer_upload(y, b2, 0, src2, 2 * n));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, 2);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b2), src2, 2 * n);
  t4a_xfer_destroy(y);
  /* A piece below the minimum is refused. */
  t4a_xfer *bad = NULL;
  o.pipeline_piece_bytes = CHUNK - 1;
  assert_int_equal(t4a_xfer_create(r, &o, &bad), T4A_INVALID_ARGUMENT);
  assert_null(bad);
  t4a_buffer_release(b2);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
  free(src);
  free(src2);
  free(back2);
  free(dst);
}

/* The pieces of a one-chunk upload by size (t4a_xfer_options.pipeline_piece_bytes): below twice
 * the split size, quarters of the upload (at least a sixteenth of the piece option), each one
 * memcpy of the calling thread; from there on halves up to the piece option, each split across
 * the copy threads; none when the rule makes less than two. Every upload byte-exact. */
static void test_upload_pieces_by_size(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = (size_t)1 << 20;
  o.num_chunks = 2;
  o.copy_threads = 3;
  o.split_copy_min_bytes = (size_t)64 << 10;
  o.pipeline_piece_bytes = (size_t)128 << 10; /* a sixteenth: 8 KiB */
  CK(t4a_xfer_create(r, &o, &x));
  const size_t n = (size_t)1 << 20;
  unsigned char *src = malloc(n);
  t4a_buffer *b = buffer(f, n);
  static const struct {
    size_t bytes;
    uint64_t dmas, pieces, singles, parallel;
  } rows[] = {
      {12 << 10, 1, 0, 1, 0},   /* a quarter is 3 KiB, the floor 8 KiB: less than two pieces */
      {16 << 10, 2, 2, 2, 0},   /* two 8 KiB pieces */
      {60 << 10, 4, 4, 4, 0},   /* quarters of 15 KiB, rounded to 16 KiB: 16, 16, 16, 12 */
      {128 << 10, 2, 2, 0, 2},  /* twice the split size: halves, each split */
      {130 << 10, 2, 2, 1, 1},  /* halves of 65 KiB: 68 KiB (split), then 62 KiB (one copy) */
      {(size_t)1 << 20, 8, 8, 0, 8}, /* the piece option: 8 x 128 KiB, each split */
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    fill(src, rows[i].bytes, (unsigned char)(40 + i));
    struct t4a_xfer_stats before, after;
    t4a_xfer_stats(x, &before);
    uint64_t htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
    uint64_t rec = counters(f).events_recorded;
    CK(t4a_xfer_upload(x, b, 0, src, rows[i].bytes));
    CK(t4a_retire_wait(r));
    t4a_xfer_stats(x, &after);
    assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, rows[i].dmas);
    assert_int_equal(counters(f).events_recorded - rec, 1); /* one event after the last piece */
    assert_int_equal(after.pipelined_pieces - before.pipelined_pieces, rows[i].pieces);
    assert_int_equal(after.single_copies - before.single_copies, rows[i].singles);
    assert_int_equal(after.parallel_copies - before.parallel_copies, rows[i].parallel);
    assert_memory_equal(device_view(f, b), src, rows[i].bytes);
  }
  /* A piece option of chunk_bytes turns pieces off, whatever the size. */
  t4a_xfer *y = NULL;
  o.pipeline_piece_bytes = o.chunk_bytes;
  CK(t4a_xfer_create(r, &o, &y));
  uint64_t htod = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  CK(t4a_xfer_upload(y, b, 0, src, 60 << 10));
  CK(t4a_xfer_upload(y, b, 0, src, n));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync") - htod, 2);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b), src, n);
  t4a_xfer_destroy(y);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
  free(src);
}

/* A staged upload's chunk that a later t4a_retire_wait drained is reused without asking its
 * event (the stream's synchronisation proved its DMA done): a warm upload + wait makes the driver
 * calls of raw's pair plus the chunk's record, and no cuEventQuery. Without a wait in between,
 * the ring asks (or waits for) the chunk's event before reusing it. */
static void test_drained_chunk_reused_without_query(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = (size_t)64 << 10;
  o.num_chunks = 2;
  CK(t4a_xfer_create(r, &o, &x));
  const size_t n = 4096;
  unsigned char src[4096];
  t4a_buffer *b = buffer(f, n);
  for (int i = 0; i < 3; i++) { /* warm: both chunks pinned and used once */
    fill(src, n, (unsigned char)(60 + i));
    CK(t4a_xfer_upload(x, b, 0, src, n));
    CK(t4a_retire_wait(r));
  }
  uint64_t asked = event_asks(f);
  uint64_t rec = counters(f).events_recorded;
  for (int i = 0; i < 8; i++) {
    fill(src, n, (unsigned char)(70 + i));
    CK(t4a_xfer_upload(x, b, 0, src, n));
    CK(t4a_retire_wait(r));
    assert_memory_equal(device_view(f, b), src, n);
  }
  assert_int_equal(event_asks(f) - asked, 0);
  assert_int_equal(counters(f).events_recorded - rec, 8);
  /* No wait between uploads: the third finds the first chunk not drained and asks its event. */
  asked = event_asks(f);
  for (int i = 0; i < 4; i++) {
    fill(src, n, (unsigned char)(80 + i));
    CK(t4a_xfer_upload(x, b, 0, src, n));
  }
  assert_true(event_asks(f) - asked >= 2);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b), src, n);
  /* A later record's answer proves an earlier chunk done too: upload (chunk A), download and
   * its wait (chunk B: its event answers), then an upload that reuses A asks nothing. */
  unsigned char back[4096];
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_upload(x, b, 0, src, n));
  CK(t4a_xfer_download(x, b, 0, back, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(back, src, n);
  asked = event_asks(f);
  fill(src, n, 90);
  CK(t4a_xfer_upload(x, b, 0, src, n));
  assert_int_equal(event_asks(f) - asked, 0);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b), src, n);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
}

/* A failed t4a_retire_wait proves nothing: with one chunk, an upload whose DMA is still queued
 * when the stream's synchronisation fails must not give its chunk to the next upload without
 * asking its event (the next upload's bytes would otherwise reach the first buffer). */
static void test_failed_drain_proves_nothing(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_retire_create(f->lane, NULL, &r));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = 4096;
  o.num_chunks = 1;
  o.copy_threads = 1;
  CK(t4a_xfer_create(r, &o, &x));
  unsigned char s1[4096], s2[4096];
  fill(s1, sizeof s1, 1);
  fill(s2, sizeof s2, 2);
  t4a_buffer *b1 = buffer(f, 4096), *b2 = buffer(f, 4096);
  CK(t4a_xfer_upload(x, b1, 0, s1, 4096));
  CK(t4a_retire_wait(r));
  CK(t4a_xfer_upload(x, b1, 0, s1, 4096));
  t4a_fake_inject(f->fake, "cuStreamSynchronize", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_not_equal(t4a_retire_wait(r), T4A_OK);
  t4a_fake_clear_injections(f->fake);
  uint64_t asked = event_asks(f);
  CK(t4a_xfer_upload(x, b2, 0, s2, 4096));
  assert_true(event_asks(f) - asked > 0);
  CK(t4a_retire_wait(r));
  assert_memory_equal(device_view(f, b1), s1, sizeof s1);
  assert_memory_equal(device_view(f, b2), s2, sizeof s2);
  t4a_buffer_release(b1);
  t4a_buffer_release(b2);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(r));
}

/* Pinned downloads recycle their events: a warm one creates none, and the spare events are
 * destroyed with the ring (teardown checks that nothing is left in the fake). */
static void test_warm_pinned_download_creates_no_event(void **state) {
  fixture *f = *state;
  const size_t n = 3000;
  unsigned char *src = malloc(n);
  fill(src, n, 24);
  t4a_buffer *b = buffer(f, n);
  t4a_pinned *out = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), n, 0, &out));
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, out, 0, n, &p)); /* cold: creates one */
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_int_equal(xstate(f->xfer).spare_events, 1);
  uint64_t created = t4a_fake_calls(f->fake, "cuEventCreate");
  uint64_t destroyed = t4a_fake_calls(f->fake, "cuEventDestroy");
  for (int i = 0; i < 5; i++) {
    memset(t4a_pinned_host(out), 0, n);
    CK(t4a_xfer_download_pinned(f->xfer, b, 0, out, 0, n, &p));
    CK(t4a_xfer_pending_wait(p));
    assert_memory_equal(t4a_pinned_host(out), src, n);
    t4a_xfer_pending_release(p);
  }
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, out, 0, n, &p));
  t4a_xfer_pending_release(p); /* dropped unwaited: its event is kept too */
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventCreate"), created);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventDestroy"), destroyed);
  assert_int_equal(xstate(f->xfer).spare_events, 1);
  t4a_pinned_release(out);
  t4a_buffer_release(b);
  free(src);
}

/* bytes_downloaded counts a download when it is delivered (its first OK), never at enqueue: a
 * download released unwaited, or one that failed, counts nothing. */
static void test_bytes_downloaded_counted_at_delivery(void **state) {
  fixture *f = *state;
  const size_t n = CHUNK + 100;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 25);
  t4a_buffer *b = buffer(f, n);
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), n, 0, &pin));
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  CK(t4a_retire_wait(f->retire));
  t4a_xfer_pending *p = NULL;
  /* Released unwaited, even after its DMA ran: nothing. */
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  t4a_fake_progress(f->fake);
  t4a_xfer_pending_release(p);
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, n, &p));
  t4a_fake_progress(f->fake);
  t4a_xfer_pending_release(p);
  assert_int_equal(counters(f).bytes_downloaded, 0);
  /* Staged: counted at the OK. */
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  assert_int_equal(counters(f).bytes_downloaded, 0);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_NOT_READY);
  assert_int_equal(counters(f).bytes_downloaded, 0);
  t4a_fake_progress(f->fake);
  CK(t4a_xfer_pending_poll(p));
  assert_int_equal(counters(f).bytes_downloaded, n);
  assert_int_equal(t4a_xfer_pending_wait(p), T4A_ALREADY_CONSUMED);
  assert_int_equal(counters(f).bytes_downloaded, n);
  t4a_xfer_pending_release(p);
  assert_memory_equal(dst, src, n);
  /* Pinned: counted at the OK. */
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, 64, &p));
  assert_int_equal(counters(f).bytes_downloaded, n);
  CK(t4a_xfer_pending_wait(p));
  assert_int_equal(counters(f).bytes_downloaded, n + 64);
  t4a_xfer_pending_release(p);
  /* Failed: nothing. */
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  t4a_fake_inject(f->fake, "cuEventQuery", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  t4a_xfer_pending_release(p);
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, 64, &p));
  t4a_fake_inject(f->fake, "cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_xfer_pending_wait(p), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  t4a_xfer_pending_release(p);
  assert_int_equal(counters(f).bytes_downloaded, n + 64);
  t4a_pinned_release(pin);
  t4a_buffer_release(b);
  free(src);
  free(dst);
}

/* ---- observers never block behind another thread ---- */

typedef struct job {
  t4a_xfer *x;
  t4a_buffer *b;
  const void *src;
  size_t bytes;
  t4a_xfer_pending *p;
  t4a_status st;
} job;

static void *job_wait(void *arg) {
  job *j = arg;
  j->st = t4a_xfer_pending_wait(j->p);
  return NULL;
}

static void *job_upload(void *arg) {
  job *j = arg;
  j->st = t4a_xfer_upload(j->x, j->b, 0, j->src, j->bytes);
  return NULL;
}

/* Thread B waits on handle 1 (held inside cuEventSynchronize); this thread polls handle 2, which
 * must answer at once (and deliver, since its DMA ran) instead of queueing behind B's wait. */
static void test_poll_not_blocked_by_another_threads_wait(void **state) {
  fixture *f = *state;
  unsigned char *want = malloc(2 * CHUNK), d1[CHUNK], d2[CHUNK];
  t4a_buffer *b = buffer(f, 2 * CHUNK);
  t4a_fake_progress(f->fake);
  fill(device_view(f, b), 2 * CHUNK, 26);
  memcpy(want, device_view(f, b), 2 * CHUNK);
  job j = {0};
  CK(t4a_xfer_download(f->xfer, b, 0, d1, CHUNK, &j.p));
  t4a_xfer_pending *p2 = NULL;
  CK(t4a_xfer_download(f->xfer, b, CHUNK, d2, CHUNK, &p2));
  gate_arm(GATE_EVENT_SYNC);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, job_wait, &j), 0);
  assert_true(gate_wait_entered());
  t4a_fake_progress(f->fake);
  t4a_status st = t4a_xfer_pending_poll(p2);
  int blocked = gate_open();
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_false(blocked);
  CK(st);
  CK(j.st);
  assert_memory_equal(d1, want, CHUNK);
  assert_memory_equal(d2, want + CHUNK, CHUNK);
  t4a_xfer_pending_release(j.p);
  t4a_xfer_pending_release(p2);
  t4a_buffer_release(b);
  free(want);
}

/* Thread B's upload needs the chunk a download holds and waits for it (a staging wait, held in
 * cuEventSynchronize). Meanwhile this thread polls that download: NOT_READY at once, then — the
 * DMA having run — OK with the bytes; B then finds the chunk delivered and uses it. */
static void test_poll_not_blocked_by_a_staging_wait(void **state) {
  fixture *f = *state;
  unsigned char *src = malloc(2 * CHUNK), *want = malloc(CHUNK), d[CHUNK];
  fill(src, 2 * CHUNK, 27);
  t4a_buffer *b = buffer(f, CHUNK), *b2 = buffer(f, 2 * CHUNK);
  t4a_fake_progress(f->fake);
  fill(device_view(f, b), CHUNK, 28);
  memcpy(want, device_view(f, b), CHUNK);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, d, CHUNK, &p)); /* chunk 0 */
  job j = {.x = f->xfer, .b = b2, .src = src, .bytes = 2 * CHUNK};
  gate_arm(GATE_EVENT_SYNC);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, job_upload, &j), 0);
  assert_true(gate_wait_entered()); /* B filled chunk 1 and waits for chunk 0 */
  assert_int_equal(t4a_xfer_pending_poll(p), T4A_NOT_READY);
  t4a_fake_progress(f->fake);
  t4a_status st = t4a_xfer_pending_poll(p);
  int blocked = gate_open();
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_false(blocked);
  CK(st);
  CK(j.st);
  assert_memory_equal(d, want, CHUNK);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b2), src, 2 * CHUNK);
  assert_int_equal(counters(f).staging_waits, 1);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(src);
  free(want);
}

/* Thread B's upload is held inside its enqueue (after filling its chunk); this thread's poll of
 * another handle answers meanwhile: the fill and the enqueue run without the ring's lock. */
static void test_poll_not_blocked_by_an_upload(void **state) {
  fixture *f = *state;
  unsigned char *src = malloc(CHUNK), *want = malloc(CHUNK), d[CHUNK];
  fill(src, CHUNK, 29);
  t4a_buffer *b = buffer(f, CHUNK), *b2 = buffer(f, CHUNK);
  t4a_fake_progress(f->fake);
  fill(device_view(f, b), CHUNK, 30);
  memcpy(want, device_view(f, b), CHUNK);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, d, CHUNK, &p));
  job j = {.x = f->xfer, .b = b2, .src = src, .bytes = CHUNK};
  gate_arm(GATE_HTOD);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, job_upload, &j), 0);
  assert_true(gate_wait_entered());
  t4a_fake_progress(f->fake);
  t4a_status st = t4a_xfer_pending_poll(p);
  int blocked = gate_open();
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_false(blocked);
  CK(st);
  CK(j.st);
  assert_memory_equal(d, want, CHUNK);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b2), src, CHUNK);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(src);
  free(want);
}

/* ---- the pinned-hold budget ---- */

/* Whether pinned memory at `host` is still allocated in the fake (not yet freed). */
static int pinned_alive(fixture *f, void *host) {
  return t4a_fake_host_alloc_flags(f->fake, host, NULL);
}

/* Direct pinned uploads hold the caller's memory until their DMA completed; with a budget, one
 * that would hold more goes through the ring (counted), its memory not held. A pinned object
 * counts once, with its full size, however often it is used while held. */
static void test_pinned_upload_budget(void **state) {
  fixture *f = *state;
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = CHUNK;
  o.num_chunks = 2;
  o.max_pinned_hold_bytes = 2 * CHUNK;
  t4a_xfer *x = NULL;
  CK(t4a_xfer_create(f->retire, &o, &x));
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_pinned *a = NULL, *b = NULL, *c = NULL, *big = NULL;
  CK(t4a_pinned_create(h, CHUNK, 0, &a));
  CK(t4a_pinned_create(h, CHUNK, 0, &b));
  CK(t4a_pinned_create(h, CHUNK, 0, &c));
  CK(t4a_pinned_create(h, 3 * CHUNK, 0, &big));
  void *ha = t4a_pinned_host(a), *hc = t4a_pinned_host(c), *hbig = t4a_pinned_host(big);
  fill(ha, CHUNK, 31);
  fill(t4a_pinned_host(b), CHUNK, 32);
  fill(hc, CHUNK, 33);
  fill(hbig, 3 * CHUNK, 34);
  unsigned char *want = malloc(6 * CHUNK);
  memcpy(want, ha, CHUNK);
  memcpy(want + CHUNK, t4a_pinned_host(b), CHUNK);
  memcpy(want + 2 * CHUNK, hc, CHUNK);
  memcpy(want + 3 * CHUNK, hbig, 3 * CHUNK);
  t4a_buffer *dst = buffer(f, 6 * CHUNK);
  uint64_t ev = counters(f).events_recorded;
  CK(t4a_xfer_upload_pinned(x, dst, 0, a, 0, CHUNK)); /* direct: no chunk, no event */
  CK(t4a_xfer_upload_pinned(x, dst, CHUNK, b, 0, CHUNK));
  assert_int_equal(counters(f).events_recorded, ev);
  struct t4a_xfer_stats xs = xstate(x);
  assert_int_equal(xs.pinned_hold_bytes, 2 * CHUNK);
  assert_int_equal(xs.pinned_fallbacks, 0);
  CK(t4a_xfer_upload_pinned(x, dst, 2 * CHUNK, c, 0, CHUNK)); /* over: through the ring */
  CK(t4a_xfer_upload_pinned(x, dst, 3 * CHUNK, big, 0, 3 * CHUNK)); /* larger than the budget */
  xs = xstate(x);
  assert_int_equal(xs.pinned_hold_bytes, 2 * CHUNK);
  assert_int_equal(xs.pinned_fallbacks, 2);
  assert_int_equal(counters(f).events_recorded, ev + 4); /* 1 + 3 staged chunks */
  CK(t4a_xfer_upload_pinned(x, dst, 0, a, 0, 16)); /* already held: direct, counted once */
  assert_int_equal(xstate(x).pinned_hold_bytes, 2 * CHUNK);
  assert_int_equal(xstate(x).pinned_fallbacks, 2);
  /* The staged ones' memory is not held: released, it is gone at once. The direct one's is. */
  t4a_pinned_release(c);
  t4a_pinned_release(big);
  assert_false(pinned_alive(f, hc));
  assert_false(pinned_alive(f, hbig));
  t4a_pinned_release(a);
  assert_true(pinned_alive(f, ha));
  /* Once the DMA completed and t4a_retire released the keepalives, the budget is free again. */
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(xstate(x).pinned_hold_bytes, 0);
  assert_false(pinned_alive(f, ha));
  assert_memory_equal(device_view(f, dst), want, 6 * CHUNK);
  CK(t4a_xfer_upload_pinned(x, dst, 0, b, 0, CHUNK));
  assert_int_equal(xstate(x).pinned_hold_bytes, CHUNK);
  assert_int_equal(xstate(x).pinned_fallbacks, 2);
  t4a_xfer_destroy(x); /* the holds outlive it: t4a_retire releases them later */
  t4a_pinned_release(b);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(dst);
  free(want);
}


/* ---- warm transfers allocate nothing ---- */

/* One warm round of every transfer with its wait: a pageable upload and a pinned upload, each
 * followed by t4a_retire_wait (their keepalives retire: the pinned hold record goes back), a
 * pageable download and a pinned download each waited and released, and a buffer created and
 * released; the bytes checked at every step. */
static void warm_round(fixture *f, t4a_buffer *b, t4a_pinned *pin, unsigned char *src,
                       unsigned char *dst, unsigned char *want, size_t n, unsigned seed) {
  fill(src, n, seed);
  CK(t4a_xfer_upload(f->xfer, b, 0, src, n));
  CK(t4a_retire_wait(f->retire));
  memset(dst, 0, n);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, 0, dst, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(dst, src, n);
  fill(t4a_pinned_host(pin), n, seed + 1);
  memcpy(want, t4a_pinned_host(pin), n);
  CK(t4a_xfer_upload_pinned(f->xfer, b, 0, pin, 0, n));
  CK(t4a_retire_wait(f->retire));
  memset(t4a_pinned_host(pin), 0, n);
  CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(t4a_pinned_host(pin), want, n);
  t4a_buffer *t = buffer(f, n);
  t4a_buffer_release(t);
}

/* A chunk the ring cannot pin at its first use is skipped while another chunk is made: the
 * transfers go on through the chunks there are, each failure counted (ring_grow_failures), the
 * caller's detail untouched. */
static void test_unpinnable_chunk_is_skipped(void **state) {
  fixture *f = *state;
  t4a_xfer_options o = {.chunk_bytes = CHUNK, .num_chunks = 2};
  t4a_xfer *x = NULL;
  CK(t4a_xfer_create(f->retire, &o, &x));
  unsigned char *src = calloc(1, CHUNK);
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, CHUNK, 0, 0, &b));
  CK(t4a_xfer_upload(x, b, 0, src, CHUNK)); /* chunk 0 pinned */
  CK(t4a_lane_synchronize(f->lane));
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1000, CUDA_ERROR_OUT_OF_MEMORY, 0);
  int fails = 0;
  for (int i = 0; i < 5; i++) {
    t4a_status st = t4a_xfer_upload(x, b, 0, src, CHUNK);
    if (st != T4A_OK) fails++;
    CK(t4a_lane_synchronize(f->lane));
  }
  t4a_fake_clear_injections(f->fake);
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(fails, 0);
  assert_true(xs.ring_grow_failures >= 1);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  free(src);
}

/* Issue 25 item 4: a chunk first handed out for a small unit is pinned at
 * T4A_XFER_SMALL_PIN_BYTES, not at chunk_bytes (a 4-byte first download of a 16 MiB ring pins
 * 64 KiB); the first unit larger than that re-pins the FREE chunk at chunk_bytes (the small
 * memory freed), byte-exact. A re-pin that fails while no other made chunk holds the unit is the
 * transfer's typed failure: nothing enqueued, the small chunk kept and still usable; while
 * another full chunk exists it is skipped (counted) and the transfer succeeds. Nothing leaks. */
static void test_small_first_pin(void **state) {
  fixture *f = *state;
  const size_t big = T4A_XFER_DEFAULT_CHUNK_BYTES, small = T4A_XFER_SMALL_PIN_BYTES;
  long base = unaccounted(f);
  t4a_xfer_options o = {.num_chunks = 2};
  t4a_xfer *x = NULL;
  CK(t4a_xfer_create(f->retire, &o, &x));
  assert_int_equal(t4a_xfer_chunk_bytes(x), big);
  t4a_buffer *b = buffer(f, big);
  long with_b = unaccounted(f);
  unsigned char *src = malloc(big), *back = calloc(1, big);
  assert_non_null(src);
  assert_non_null(back);
  fill(src, big, 3);
  memcpy(device_view(f, b), src, 4);
  /* The first transfer: a 4-byte download pins one chunk at 64 KiB. */
  uint64_t pins = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, 0, back, 4, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(back, src, 4);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins + 1);
  unsigned char *c0 = t4a_xfer_chunk_host(x, 0);
  assert_non_null(c0);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, c0), small);
  assert_null(t4a_xfer_chunk_host(x, 1));
  /* A 4-byte upload: the ring's next chunk, also small. */
  CK(t4a_xfer_upload(x, b, 4, src + 4, 4));
  unsigned char *c1 = t4a_xfer_chunk_host(x, 1);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, c1), small);
  assert_int_equal(unaccounted(f), with_b + 4); /* 2 small chunks, 2 events */
  CK(t4a_lane_synchronize(f->lane));
  /* A whole-chunk upload whose re-pin fails: no chunk holds it; typed, nothing enqueued, the
   * small chunk kept. */
  uint64_t copies = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  t4a_error_clear();
  assert_int_equal(t4a_xfer_upload(x, b, 0, src, big), T4A_HOST_OUT_OF_MEMORY);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemHostAlloc");
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), copies);
  assert_ptr_equal(t4a_xfer_chunk_host(x, 0), c0);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, c0), small);
  assert_int_equal(unaccounted(f), with_b + 4);
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.quarantined_chunks, 0); /* nothing was asked of chunk 0 */
  /* The retry re-pins chunk 0 at 16 MiB (its 64 KiB freed); the bytes arrive. */
  pins = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  CK(t4a_xfer_upload(x, b, 0, src, big));
  CK(t4a_lane_synchronize(f->lane));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins + 1);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, c0), 0); /* freed (or not its start) */
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, t4a_xfer_chunk_host(x, 0)), big);
  assert_memory_equal(device_view(f, b), src, big);
  assert_int_equal(unaccounted(f), with_b + 4);
  /* A whole-chunk download comes to chunk 1 (small); its re-pin fails, chunk 0 holds the unit:
   * skipped and counted, the download succeeds through chunk 0. */
  uint64_t grow_failures = xs.ring_grow_failures;
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  memset(back, 0, big);
  CK(t4a_xfer_download(x, b, 0, back, big, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  t4a_fake_clear_injections(f->fake);
  assert_memory_equal(back, src, big);
  t4a_xfer_stats(x, &xs);
  assert_int_equal(xs.ring_grow_failures, grow_failures + 1);
  assert_ptr_equal(t4a_xfer_chunk_host(x, 1), c1);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, c1), small);
  /* Small units use the next chunk as it is (chunk 1 small, chunk 0 full: no pinning); the next
   * large unit re-pins chunk 1. */
  pins = t4a_fake_calls(f->fake, "cuMemHostAlloc");
  CK(t4a_xfer_upload(x, b, 0, src, 4));
  CK(t4a_xfer_upload(x, b, 0, src, 4));
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), pins);
  assert_ptr_equal(t4a_xfer_chunk_host(x, 1), c1);
  memset(back, 0, big);
  CK(t4a_xfer_download(x, b, 0, back, big, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(back, src, big);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, t4a_xfer_chunk_host(x, 0)), big);
  assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, t4a_xfer_chunk_host(x, 1)), big);
  assert_int_equal(unaccounted(f), with_b + 4);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  CK(t4a_lane_synchronize(f->lane));
  assert_int_equal(unaccounted(f), with_b); /* the ring is gone; b's block stays cached */
  assert_int_equal(with_b, base + 1);
  free(src);
  free(back);
}

/* Issue 25 item 2: once warm (one round), transfers with their waits, pending handles and buffer
 * create/release make no heap allocation at all: their records come back from the t4a_xfer's,
 * the holds table's and the pool's spare lists. One chunk and a transfer wrapping the ring. */
static void test_warm_transfers_allocate_nothing(void **state) {
  fixture *f = *state;
  const size_t sizes[] = {3000, 3 * CHUNK + 5};
  for (size_t k = 0; k < 2; k++) {
    size_t n = sizes[k];
    unsigned char *src = malloc(n), *dst = malloc(n), *want = malloc(n);
    t4a_buffer *b = buffer(f, n);
    t4a_pinned *pin = NULL;
    CK(t4a_pinned_create(t4a_lane_holder(f->lane), n, 0, &pin));
    warm_round(f, b, pin, src, dst, want, n, 1); /* cold: the records are made here */
    t4a_counter_values v0 = counters(f);
    uint64_t heap0 = t4a_heap_allocations();
    for (unsigned i = 0; i < 20; i++) warm_round(f, b, pin, src, dst, want, n, 2 + i);
    uint64_t heap1 = t4a_heap_allocations();
    t4a_counter_values v1 = counters(f);
    if (heap1 != heap0) {
      fail_msg("%zu bytes: %llu heap allocations in 20 warm rounds", n,
               (unsigned long long)(heap1 - heap0));
    }
    /* The rounds did their work: 4 transfers of n bytes each (2 up, 2 down) per round. */
    assert_int_equal(v1.bytes_uploaded - v0.bytes_uploaded, 20 * 2 * n);
    assert_int_equal(v1.bytes_downloaded - v0.bytes_downloaded, 20 * 2 * n);
    t4a_pinned_release(pin);
    t4a_buffer_release(b);
    free(src);
    free(dst);
    free(want);
  }
}

/* The spare handles are bounded (T4A_XFER_SPARE_RECORDS in xfer_internal.h: 64 per t4a_xfer):
 * with 100 handles alive at once, their release keeps 64 and frees 36, so the next 100
 * downloads allocate exactly 36 handles (the rounds before warm everything else). Teardown
 * frees the spares (the strict teardown and LeakSanitizer see nothing left). */
#define SPARE_HANDLES 64
static void test_spare_handles_are_bounded(void **state) {
  fixture *f = *state;
  enum { M = 100, N = 512 };
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), N, 0, &pin));
  t4a_buffer *b = buffer(f, N);
  static unsigned char host[M][N];
  t4a_xfer_pending *ps[M];
  for (int round = 0; round < 3; round++) {
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < M; i++) {
      int pinned = i % 2;
      if (pinned) {
        CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, N, &ps[i]));
      } else {
        CK(t4a_xfer_download(f->xfer, b, 0, host[i], N, &ps[i]));
      }
    }
    uint64_t heap1 = t4a_heap_allocations();
    for (int i = 0; i < M; i++) CK(t4a_xfer_pending_wait(ps[i]));
    for (int i = 0; i < M; i++) t4a_xfer_pending_release(ps[i]);
    CK(t4a_retire_wait(f->retire));
    if (round == 0) assert_true(heap1 - heap0 >= M); /* cold: every handle from the heap */
    if (round == 2) assert_int_equal(heap1 - heap0, M - SPARE_HANDLES);
  }
  t4a_buffer_release(b);
  t4a_pinned_release(pin);
}

/* Recycled records shared by threads: four threads download (pageable and pinned, each waited
 * and released) from one buffer through the fixture's t4a_xfer and create and release buffers
 * in its pool, each checking its bytes; run under ThreadSanitizer by the tsan lane. */
typedef struct recycle_arg {
  fixture *f;
  t4a_buffer *b;
  const unsigned char *want;
  size_t n;
  t4a_pinned *pin;
  int failures;
} recycle_arg;

static void *recycle_thread(void *user) {
  recycle_arg *a = user;
  unsigned char *dst = malloc(a->n);
  for (int i = 0; i < 200; i++) {
    t4a_xfer_pending *p = NULL;
    memset(dst, 0, a->n);
    if (t4a_xfer_download(a->f->xfer, a->b, 0, dst, a->n, &p) != T4A_OK ||
        t4a_xfer_pending_wait(p) != T4A_OK || memcmp(dst, a->want, a->n) != 0) {
      a->failures++;
    }
    t4a_xfer_pending_release(p);
    p = NULL;
    memset(t4a_pinned_host(a->pin), 0, a->n);
    if (t4a_xfer_download_pinned(a->f->xfer, a->b, 0, a->pin, 0, a->n, &p) != T4A_OK ||
        t4a_xfer_pending_wait(p) != T4A_OK ||
        memcmp(t4a_pinned_host(a->pin), a->want, a->n) != 0) {
      a->failures++;
    }
    t4a_xfer_pending_release(p);
    t4a_buffer *t = NULL;
    if (t4a_buffer_create(a->f->pool, 256 + (size_t)i, 0, 0, &t) != T4A_OK) a->failures++;
    t4a_buffer_release(t);
  }
  free(dst);
  return NULL;
}

static void test_recycled_records_across_threads(void **state) {
  fixture *f = *state;
  enum { T = 4 };
  const size_t n = CHUNK + 99;
  unsigned char *want = malloc(n);
  fill(want, n, 77);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload(f->xfer, b, 0, want, n));
  recycle_arg args[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    args[i] = (recycle_arg){f, b, want, n, NULL, 0};
    CK(t4a_pinned_create(t4a_lane_holder(f->lane), n, 0, &args[i].pin));
  }
  for (int i = 0; i < T; i++) assert_int_equal(pthread_create(&th[i], NULL, recycle_thread, &args[i]), 0);
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    assert_int_equal(args[i].failures, 0);
    t4a_pinned_release(args[i].pin);
  }
  assert_int_equal(counters(f).bytes_downloaded, (uint64_t)T * 200 * 2 * n);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(b);
  free(want);
}

/* The end of a sweep op: releases its buffer, transfer state and retire (NULL allowed) and
 * returns its first failure. */
static t4a_status op_end(t4a_status st, t4a_buffer *b, t4a_xfer *x, t4a_retire *r) {
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  t4a_status dst_st = t4a_retire_destroy(r);
  return st == T4A_OK ? dst_st : st;
}


/* ---- failure sweeps ---- */

static t4a_status op_all(void *user) {
  fixture *f = user;
  enum { N = 2 * CHUNK + 77 };
  static unsigned char src[N], dst[N];
  fill(src, N, 9);
  memset(dst, 0, N);
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_pinned *pin = NULL;
  t4a_xfer_pending *p = NULL, *q = NULL;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = make_xfer(r, CHUNK, 2, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, N, 0, 0, &b);
  if (st == T4A_OK) st = t4a_pinned_create(t4a_lane_holder(f->lane), N, 0, &pin);
  if (st == T4A_OK) st = t4a_xfer_upload(x, b, 0, src, N);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, dst, N, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  if (st == T4A_OK && memcmp(src, dst, N) != 0) st = T4A_INTERNAL;
  if (st == T4A_OK) st = t4a_xfer_download_pinned(x, b, 0, pin, 0, N, &q);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(q);
  if (st == T4A_OK && memcmp(src, t4a_pinned_host(pin), N) != 0) st = T4A_INTERNAL;
  t4a_xfer_pending_release(q); /* its event and its record go to the spares */
  q = NULL;
  /* A pageable download takes the spare record (kept alive below), so the next pinned download
   * finds a spare event but allocates its handle: that allocation's failure puts the event back. */
  t4a_xfer_pending *r2 = NULL;
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, dst, N, &r2);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(r2);
  if (st == T4A_OK && memcmp(src, dst, N) != 0) st = T4A_INTERNAL;
  if (st == T4A_OK) memset(t4a_pinned_host(pin), 0, N);
  if (st == T4A_OK) st = t4a_xfer_download_pinned(x, b, 0, pin, 0, N, &q);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(q);
  if (st == T4A_OK && memcmp(src, t4a_pinned_host(pin), N) != 0) st = T4A_INTERNAL;
  /* The same pinned memory as the downloads: one keepalive record, one object if leaked. */
  if (st == T4A_OK) st = t4a_xfer_upload_pinned(x, b, 0, pin, 0, N);
  t4a_xfer_pending_release(p);
  t4a_xfer_pending_release(q);
  t4a_xfer_pending_release(r2);
  t4a_pinned_release(pin);
  return op_end(st, b, x, r);
}

/* The size-chosen paths: a piece-by-piece upload (one chunk, pieces below the split size), a
 * 4-chunk upload that grows the ring from 2 to 4, a 4-chunk download delivered oldest first. */
static t4a_status op_paths(void *user) {
  fixture *f = user;
  enum { N = 4 * 4 * CHUNK };
  static unsigned char src[N], dst[N];
  fill(src, N, 10);
  memset(dst, 0, N);
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_xfer_pending *p = NULL;
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = 4 * CHUNK;
  o.num_chunks = 4;
  o.copy_threads = 2;
  o.split_copy_min_bytes = 2 * CHUNK;
  o.pipeline_piece_bytes = CHUNK;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &o, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, N, 0, 0, &b);
  if (st == T4A_OK) st = t4a_xfer_upload(x, b, 0, src, 3 * CHUNK + 5);
  if (st == T4A_OK) st = t4a_xfer_upload(x, b, 0, src, N);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, dst, N, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  if (st == T4A_OK && memcmp(src, dst, N) != 0) st = T4A_INTERNAL;
  t4a_xfer_pending_release(p);
  return op_end(st, b, x, r);
}

/* The small first pin and the re-pins (a 128 KiB ring of 2): a 4-byte download and a 4-byte
 * upload pin both chunks at 64 KiB; a whole-chunk upload and download re-pin them at 128 KiB. */
static t4a_status op_small_pin(void *user) {
  fixture *f = user;
  enum { N = 2 * T4A_XFER_SMALL_PIN_BYTES };
  static unsigned char src[N], dst[N];
  fill(src, N, 11);
  memset(dst, 0, N);
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_xfer_pending *p = NULL;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = make_xfer(r, N, 2, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, N, 0, 0, &b);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, dst, 4, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  t4a_xfer_pending_release(p);
  p = NULL;
  if (st == T4A_OK) st = t4a_xfer_upload(x, b, 0, src, 4);
  if (st == T4A_OK) st = t4a_xfer_upload(x, b, 0, src, N);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, dst, N, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  if (st == T4A_OK && memcmp(src, dst, N) != 0) st = T4A_INTERNAL;
  t4a_xfer_pending_release(p);
  return op_end(st, b, x, r);
}

/* A dropped download in flight, then teardown: nothing may outlive it uncounted. */
static t4a_status op_dropped(void *user) {
  fixture *f = user;
  static unsigned char host[3 * CHUNK];
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_xfer_pending *p = NULL;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = make_xfer(r, CHUNK, 2, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 3 * CHUNK, 0, 0, &b);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, host, 3 * CHUNK, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_poll(p);
  if (st == T4A_NOT_READY) st = T4A_OK;
  t4a_xfer_pending_release(p);
  return op_end(st, b, x, r);
}

/* The pinned-hold budget: one direct upload, one over the budget (through the ring), a download
 * into the held memory (the same keepalive record), a second direct upload of it. */
static t4a_status op_budget(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_pinned *a = NULL, *c = NULL;
  t4a_xfer_pending *q = NULL;
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = CHUNK;
  o.num_chunks = 2;
  o.max_pinned_hold_bytes = CHUNK;
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &o, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 2 * CHUNK, 0, 0, &b);
  if (st == T4A_OK) st = t4a_pinned_create(h, CHUNK, 0, &a);
  if (st == T4A_OK) st = t4a_pinned_create(h, CHUNK, 0, &c);
  if (st == T4A_OK) {
    fill(t4a_pinned_host(a), CHUNK, 40);
    fill(t4a_pinned_host(c), CHUNK, 41);
  }
  if (st == T4A_OK) st = t4a_xfer_upload_pinned(x, b, 0, a, 0, CHUNK);     /* direct */
  if (st == T4A_OK) st = t4a_xfer_upload_pinned(x, b, CHUNK, c, 0, CHUNK); /* the ring */
  if (st == T4A_OK) st = t4a_xfer_download_pinned(x, b, CHUNK, a, 0, CHUNK, &q);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(q);
  if (st == T4A_OK && memcmp(t4a_pinned_host(a), t4a_pinned_host(c), CHUNK) != 0) {
    st = T4A_INTERNAL;
  }
  if (st == T4A_OK) st = t4a_xfer_upload_pinned(x, b, 0, a, 0, CHUNK); /* held: direct */
  t4a_xfer_pending_release(q);
  t4a_pinned_release(a);
  t4a_pinned_release(c);
  return op_end(st, b, x, r);
}

/* The reclaim path — two chunks quarantined by failures after enqueue, then an upload that must
 * record and wait for a marker, a download and its wait — with each driver call of that second
 * part failing in turn, its work enqueued or not: typed errors with their detail, nothing alive
 * uncounted after any step (teardown_counted checks the exact sum), and the untouched run
 * reclaims both chunks and round-trips the bytes exactly. (t4a_sweep_driver cannot drive this:
 * the failures that quarantine the chunks are injected by the step itself.) */
static void test_reclaim_sweep(void **state) {
  fixture *f = *state;
  static unsigned char src[2 * CHUNK], back[2 * CHUNK], junk[CHUNK];
  fill(src, sizeof src, 42);
  f->baseline = unaccounted(f);
  int surfaced = 0;
  for (int enqueue = 0; enqueue < 2; enqueue++) {
    for (int n = 0;; n++) {
      assert_true(n < 300);
      t4a_retire *r = NULL;
      t4a_xfer *x = NULL;
      CK(t4a_retire_create(f->lane, NULL, &r));
      CK(make_xfer(r, CHUNK, 2, &x));
      t4a_buffer *bad[2] = {buffer(f, CHUNK), buffer(f, CHUNK)}, *b = buffer(f, 2 * CHUNK);
      t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 0, 2, CUDA_ERROR_UNKNOWN, 1);
      assert_int_equal(t4a_xfer_upload(x, bad[0], 0, junk, CHUNK), T4A_DRIVER_ERROR);
      assert_int_equal(t4a_xfer_upload(x, bad[1], 0, junk, CHUNK), T4A_DRIVER_ERROR);
      t4a_fake_clear_injections(f->fake);
      assert_int_equal(xstate(x).quarantined_chunks, 2);
      memset(back, 0, sizeof back);
      uint64_t before = t4a_fake_injected(f->fake);
      t4a_fake_inject(f->fake, NULL, (uint64_t)n, 1, CUDA_ERROR_UNKNOWN, enqueue);
      t4a_error_clear();
      t4a_xfer_pending *p = NULL;
      t4a_status st = t4a_xfer_upload(x, b, 0, src, sizeof src);
      if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, back, sizeof back, &p);
      if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
      int fired = t4a_fake_injected(f->fake) != before;
      t4a_fake_clear_injections(f->fake);
      if (st != T4A_OK) {
        surfaced++;
        t4a_error e;
        t4a_error_last(&e);
        if (st != T4A_DRIVER_ERROR || e.status != st || e.code != CUDA_ERROR_UNKNOWN ||
            strncmp(e.entry, "cu", 2) != 0) {
          fail_msg("reclaim sweep: call %d (enqueue %d): %s, detail %s from '%s' (%d)", n,
                   enqueue, t4a_status_name(st), t4a_status_name(e.status), e.entry, e.code);
        }
      }
      struct t4a_xfer_stats xs = xstate(x);
      t4a_xfer_pending_release(p);
      t4a_buffer_release(bad[0]);
      t4a_buffer_release(bad[1]);
      t4a_buffer_release(b);
      t4a_xfer_destroy(x);
      CK(t4a_retire_destroy(r));
      (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
      long extra = unaccounted(f);
      if (extra > 0) fail_msg("reclaim sweep: call %d left %ld objects uncounted", n, extra);
      if (!fired) {
        CK(st);
        assert_int_equal(xs.chunks_reclaimed, 2);
        assert_memory_equal(back, src, sizeof src);
        break;
      }
    }
  }
  assert_true(surfaced > 5);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "xfer", .fake = f->fake, .op = op_all, .unaccounted = unaccounted,
                 .user = f};
  pin_ring(f);
  f->baseline = unaccounted(f); /* the ring's 2 chunks and 2 events, pin_ring's cached block */
  assert_int_equal(f->baseline, 5);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) > 10);
  /* The copy is enqueued but the call reports failure: typed, the buffer quarantined, the chunk
   * never reused on a guess, nothing leaked uncounted. */
  s.after_enqueue = 1;
  s.entry = "cuMemcpyHtoDAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  s.entry = "cuMemcpyDtoHAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  s.entry = "cuEventRecord";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  s.entry = NULL;
  s.after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  const t4a_status mutex[] = {T4A_INTERNAL};
  (void)t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1);
  /* The size-chosen paths (pieces, growth, oldest-first delivery): a failed growth is absorbed
   * (OK), every other failure typed, nothing left uncounted. */
  s.op = op_paths;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  s.after_enqueue = 1;
  s.entry = "cuMemcpyHtoDAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 8); /* 4 pieces */
  s.entry = "cuMemcpyDtoHAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 4);
  s.entry = NULL;
  s.after_enqueue = 0;
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  /* The small first pin and its re-pins: a failed re-pin is typed or absorbed, never leaked. */
  s.op = op_small_pin;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  s.op = op_dropped;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  s.op = op_budget;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  s.after_enqueue = 1;
  s.entry = "cuMemcpyHtoDAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  s.entry = "cuMemcpyDtoHAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  s.entry = NULL;
  s.after_enqueue = 0;
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  (void)t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* Issue 25 item 2: the driver calls of a warm small transfer and its wait, per op. A pinned
 * upload and t4a_retire_wait: the copy and one cuStreamSynchronize, no event (raw's pair). A
 * pinned download and its pending wait: the copy, the handle's one completion record (polls need
 * it) and its wait; nothing from the retire (its epoch is sealed at 512 admissions, not per op).
 * A pageable (staged) download and its wait: the capture check, the copy, the chunk's record,
 * one query (NOT_READY here: nothing runs until a wait) and the wait — the query's NOT_READY
 * records no detail (no cuGetErrorName / cuGetErrorString) and the waited chunk is settled
 * without a second query. */
static void test_small_transfer_calls_per_op(void **state) {
  fixture *f = *state;
  enum { OPS = 8, BYTES = 4096 };
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, BYTES, 0, 0, &b));
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(f->lane), BYTES, 0, &pin));
  unsigned char *host = calloc(1, BYTES);
  assert_non_null(host);
  static const char *const entries[] = {
      "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamSynchronize", "cuEventRecord",
      "cuEventSynchronize", "cuEventQuery", "cuEventCreate", "cuStreamIsCapturing",
      "cuGetErrorName", "cuGetErrorString"};
  enum { N = sizeof entries / sizeof entries[0] };
  static const uint64_t want[3][N] = {
      {1, 0, 1, 0, 0, 0, 0, 0, 0, 0}, /* pinned upload + t4a_retire_wait */
      {0, 1, 0, 1, 1, 0, 0, 0, 0, 0}, /* pinned download + pending wait + release */
      {0, 1, 0, 1, 1, 1, 0, 1, 0, 0}, /* pageable download + pending wait + release */
  };
  static const uint64_t want_events[3] = {0, 1, 1};
  for (int mode = 0; mode < 3; mode++) {
    uint64_t before[N];
    t4a_counter_values v0, v1;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up (the spare handle and event) */
      t4a_lane_stats(f->lane, &v0);
      for (int i = 0; i < N; i++) before[i] = t4a_fake_calls(f->fake, entries[i]);
      uint64_t heap = t4a_heap_allocations();
      for (int op = 0; op < OPS; op++) {
        if (mode == 0) {
          CK(t4a_xfer_upload_pinned(f->xfer, b, 0, pin, 0, BYTES));
          CK(t4a_retire_wait(f->retire));
        } else {
          t4a_xfer_pending *p = NULL;
          if (mode == 1) {
            CK(t4a_xfer_download_pinned(f->xfer, b, 0, pin, 0, BYTES, &p));
          } else {
            CK(t4a_xfer_download(f->xfer, b, 0, host, BYTES, &p));
          }
          CK(t4a_xfer_pending_wait(p));
          t4a_xfer_pending_release(p);
        }
      }
      if (pass == 1) assert_int_equal(t4a_heap_allocations() - heap, 0);
    }
    t4a_lane_stats(f->lane, &v1);
    for (int i = 0; i < N; i++) {
      uint64_t got = t4a_fake_calls(f->fake, entries[i]) - before[i];
      if (got != OPS * want[mode][i]) {
        fail_msg("mode %d: %s %llu calls, want %llu", mode, entries[i], (unsigned long long)got,
                 (unsigned long long)(OPS * want[mode][i]));
      }
    }
    assert_int_equal(v1.events_recorded - v0.events_recorded, OPS * want_events[mode]);
    assert_int_equal(v1.host_waits - v0.host_waits, OPS);
    assert_int_equal(v1.bytes_downloaded - v0.bytes_downloaded, mode == 0 ? 0 : OPS * BYTES);
  }
  CK(t4a_retire_wait(f->retire));
  free(host);
  t4a_pinned_release(pin);
  t4a_buffer_release(b);
  CK(t4a_retire_wait(f->retire));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_small_transfer_calls_per_op, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_across_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_names_the_chunk, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_staged_transfers_refuse_capture, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copy_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_source_reusable_when_upload_returns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_not_ready_then_ok_then_consumed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_survives_a_failed_restore, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dropped_download_leaks_nothing_and_holds_its_chunk,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_dropped_download_then_destroy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_staging_waits_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunks_are_portable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_pinned_at_first_use, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_and_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_round_trip_keeps_memory_alive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_fault_during_download, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_failed_download_keeps_its_chunks_until_complete,
                                      setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_failed_handle_reclaims_its_chunks_only_after_proof,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_quarantined_chunks_reclaimed_by_a_later_completion,
                                      setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_failed_answers_never_reclaim, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_wait_delivers_oldest_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_grows_lazily, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_grow_failure_absorbed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_path_by_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upload_pieces_by_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drained_chunk_reused_without_query, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failed_drain_proves_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_pinned_download_creates_no_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bytes_downloaded_counted_at_delivery, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_not_blocked_by_another_threads_wait, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_poll_not_blocked_by_a_staging_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_not_blocked_by_an_upload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_upload_budget, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unpinnable_chunk_is_skipped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_small_first_pin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_transfers_allocate_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spare_handles_are_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recycled_records_across_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_reclaim_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
