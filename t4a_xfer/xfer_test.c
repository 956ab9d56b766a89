/* t4a_xfer on the fake driver: staged uploads and downloads, pinned transfers, pending handles,
 * ring exhaustion, portability, argument checks, device faults, failure sweeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/sweep/sweep.h"

#define CHUNK ((size_t)4096)
#define CK(x) assert_int_equal((x), T4A_OK)

typedef struct fixture {
  t4a_fake *fake;
  t4a_driver *drv;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  long baseline; /* objects the fixture itself holds while a sweep runs */
} fixture;

static t4a_status make_xfer(t4a_retire *r, size_t chunk, uint32_t n, t4a_xfer **out) {
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.chunk_bytes = chunk;
  o.num_chunks = n;
  return t4a_xfer_create(r, &o, out);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.query_policy = T4A_FAKE_QUERY_NEVER; /* nothing runs unless a sync or the test says so */
  /* No reuse cache: a released buffer's block goes back at once, so the fake's live blocks are
   * exactly the buffers alive (a quarantined buffer would keep a cache alive with its pool). */
  t4a_mem_pool_options po = T4A_MEM_POOL_OPTIONS_INIT;
  po.reuse_disabled = 1;
  if (t4a_fake_create(&o, &f->fake) != T4A_OK || t4a_fake_driver(f->fake, &f->drv) != T4A_OK ||
      t4a_lane_create(f->drv, 0, NULL, &f->lane) != T4A_OK ||
      t4a_mem_pool_create(f->lane, &po, &f->pool) != T4A_OK ||
      t4a_retire_create(f->lane, NULL, &f->retire) != T4A_OK ||
      make_xfer(f->retire, CHUNK, 2, &f->xfer) != T4A_OK) {
    return -1;
  }
  *state = f;
  return 0;
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
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:setup_leaky\nleak:test_failure_sweep\nleak:test_device_fault_during_download\n"
         "leak:test_failed_download_keeps_its_chunks_until_complete\n";
}

static int teardown(void **state) {
  fixture *f = *state;
  t4a_xfer_destroy(f->xfer);
  t4a_status st = t4a_retire_destroy(f->retire);
  t4a_mem_pool_release(f->pool);
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  t4a_fake_progress(f->fake);
  t4a_lane_release(f->lane);
  t4a_driver_release(f->drv);
  int clean = t4a_fake_nothing_live(f->fake) && t4a_fake_ordering_violations(f->fake) == 0;
  t4a_fake_destroy(f->fake);
  free(f);
  return clean && st == T4A_OK ? 0 : -1;
}

/* Objects alive in the fake beyond what t4a counted as leaked (pools and streams belong to
 * t4a_mem's and t4a_ctx's own sweeps: a quarantined buffer keeps its pool). */
static long unaccounted(void *user) {
  fixture *f = user;
  t4a_fake_progress(f->fake);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  t4a_counter_values lane, drv;
  t4a_lane_read_counters(f->lane, &lane);
  t4a_driver_counters(f->drv, &drv);
  return (long)(live.device_allocs + live.host_allocs + live.events) -
         (long)(lane.buffers_leaked + lane.leaked + drv.leaked) - f->baseline;
}

/* For tests that fault or leak on purpose: what is alive must be exactly what t4a counted. */
static int teardown_counted(void **state) {
  fixture *f = *state;
  t4a_xfer_destroy(f->xfer);
  (void)t4a_retire_destroy(f->retire);
  t4a_mem_pool_release(f->pool);
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  f->baseline = 0;
  long extra = unaccounted(f);
  t4a_lane_release(f->lane);
  t4a_driver_release(f->drv);
  t4a_fake_destroy(f->fake);
  free(f);
  if (extra != 0) fprintf(stderr, "teardown_counted: %ld unaccounted\n", extra);
  return extra == 0 ? 0 : -1;
}

static t4a_counter_values counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_read_counters(f->lane, &v);
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
  t4a_driver_counters(f->drv, &before);
  /* The poll's scope sets the lane's context (call 0) and restores none (call 1): fail call 1. */
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 1, 1, CUDA_ERROR_UNKNOWN, 0);
  CK(t4a_xfer_pending_poll(p));
  t4a_fake_clear_injections(f->fake);
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  assert_memory_equal(src, dst, n);
  t4a_driver_counters(f->drv, &after);
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

static void test_chunks_are_portable(void **state) {
  fixture *f = *state;
  assert_int_equal(t4a_xfer_num_chunks(f->xfer), 2);
  assert_int_equal(t4a_xfer_chunk_bytes(f->xfer), CHUNK);
  for (uint32_t i = 0; i < 2; i++) {
    unsigned flags = 0;
    assert_int_equal(t4a_fake_host_alloc_flags(f->fake, t4a_xfer_chunk_host(f->xfer, i), &flags), 1);
    assert_true(flags & CU_MEMHOSTALLOC_PORTABLE);
  }
  assert_null(t4a_xfer_chunk_host(f->xfer, 2));
  /* Defaults: 16 MiB x 2. */
  t4a_xfer *d = NULL;
  CK(t4a_xfer_create(f->retire, NULL, &d));
  assert_int_equal(t4a_xfer_chunk_bytes(d), T4A_XFER_DEFAULT_CHUNK_BYTES);
  assert_int_equal(t4a_xfer_num_chunks(d), 2);
  t4a_xfer_destroy(d);
  t4a_xfer_options o = {100, 2};
  assert_int_equal(t4a_xfer_create(f->retire, &o, &d), T4A_INVALID_ARGUMENT);
  o = (t4a_xfer_options){CHUNK, T4A_XFER_MAX_NUM_CHUNKS + 1};
  assert_int_equal(t4a_xfer_create(f->retire, &o, &d), T4A_INVALID_ARGUMENT);
  assert_null(d);
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

/* A pending handle that fails on one chunk's event quarantines its other chunks too: their DMA
 * state is unknown, so they are never handed out again (here: every chunk is then quarantined). */
static void test_failed_handle_never_reuses_its_other_chunks(void **state) {
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
  uint64_t hd = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  assert_int_equal(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK), T4A_LIMIT_EXCEEDED);
  t4a_fake_progress(f->fake); /* even once the DMA ran, nothing reclaims them before teardown */
  assert_int_equal(t4a_xfer_upload(f->xfer, b2, 0, up, CHUNK), T4A_LIMIT_EXCEEDED);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), hd);
  for (size_t i = 0; i < n; i++) assert_int_equal(dst[i], 0x44);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_buffer_release(b2);
  free(dst);
  free(up);
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
  if (st == T4A_OK) st = t4a_xfer_upload_pinned(x, b, 0, pin, 0, N);
  t4a_xfer_pending_release(p);
  t4a_xfer_pending_release(q);
  t4a_pinned_release(pin);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  t4a_status dst_st = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst_st;
  return st;
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
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  t4a_status dst_st = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst_st;
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "xfer", .fake = f->fake, .op = op_all, .unaccounted = unaccounted,
                 .user = f};
  f->baseline = unaccounted(f); /* the fixture's ring: 2 chunks, 2 events */
  assert_int_equal(f->baseline, 4);
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
  s.op = op_dropped;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip_across_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_source_reusable_when_upload_returns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_not_ready_then_ok_then_consumed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_survives_a_failed_restore, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dropped_download_leaks_nothing_and_holds_its_chunk,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_dropped_download_then_destroy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_staging_waits_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunks_are_portable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_and_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_round_trip_keeps_memory_alive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_fault_during_download, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_failed_download_keeps_its_chunks_until_complete,
                                      setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_failed_handle_never_reuses_its_other_chunks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
