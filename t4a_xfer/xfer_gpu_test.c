/* t4a_xfer on a real GPU (label: gpu, single). Exits 77 without a driver.
 * A 256 MiB pageable round trip through the default staging ring (16 MiB, 4 deep), byte-exact, with
 * the source overwritten as soon as the upload returns; a pinned round trip; the counters; and
 * a matrix of sizes and odd offsets, pageable and pinned both ways; warm 4 KiB and 1 MiB
 * transfers both ways and buffer create/release with no heap allocation (t4a_heap_allocations).
 * The wall-clock rate is printed for information only: this is a test, not a benchmark. */
#define _POSIX_C_SOURCE 200809L
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
#include "t4a/fault.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
}

static void test_round_trips(void **state) {
  (void)state;
  t4a_lane *lane = NULL;
  t4a_mem_pool *pool = NULL;
  t4a_retire *retire = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_lane_create(g_drv, 0, NULL, &lane));
  CK(t4a_mem_pool_create(lane, NULL, &pool));
  CK(t4a_retire_create(lane, NULL, &retire));
  CK(t4a_xfer_create(retire, NULL, &x));

  const size_t n = (size_t)256 << 20;
  uint8_t *src = malloc(n), *want = malloc(n), *back = malloc(n);
  assert_non_null(src);
  assert_non_null(want);
  assert_non_null(back);
  fill(src, n, 7);
  memcpy(want, src, n);
  t4a_buffer *buf = NULL;
  CK(t4a_buffer_create(pool, n, 0, 0, &buf));

  double t0 = now_s();
  CK(t4a_xfer_upload(x, buf, 0, src, n));
  double t1 = now_s();
  memset(src, 0xEE, n); /* the caller may reuse its memory at once */
  t4a_xfer_pending *pd = NULL;
  double t2 = now_s();
  CK(t4a_xfer_download(x, buf, 0, back, n, &pd));
  CK(t4a_xfer_pending_wait(pd));
  double t3 = now_s();
  assert_int_equal(t4a_xfer_pending_poll(pd), T4A_ALREADY_CONSUMED);
  t4a_xfer_pending_release(pd);
  assert_memory_equal(back, want, n);
  printf("# 256 MiB pageable: upload call %.1f ms (%.1f GB/s), download+wait %.1f ms (%.1f GB/s)\n",
         (t1 - t0) * 1e3, (double)n / (t1 - t0) / 1e9, (t3 - t2) * 1e3,
         (double)n / (t3 - t2) / 1e9);

  /* Pinned: direct DMA both ways, at an offset. */
  t4a_pinned *pin = NULL;
  const size_t m = (size_t)8 << 20;
  CK(t4a_pinned_create(t4a_lane_holder(lane), m, 0, &pin));
  fill(t4a_pinned_host(pin), m, 11);
  memcpy(want, t4a_pinned_host(pin), m);
  CK(t4a_xfer_upload_pinned(x, buf, 4096, pin, 0, m));
  memset(back, 0, m);
  CK(t4a_xfer_download(x, buf, 4096, back, m, &pd));
  CK(t4a_xfer_pending_wait(pd));
  t4a_xfer_pending_release(pd);
  assert_memory_equal(back, want, m);
  t4a_pinned_release(pin);

  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  printf("# counters: bytes up %llu, down %llu, staging waits %llu, events %llu, host waits %llu\n",
         (unsigned long long)v.bytes_uploaded, (unsigned long long)v.bytes_downloaded,
         (unsigned long long)v.staging_waits, (unsigned long long)v.events_recorded,
         (unsigned long long)v.host_waits);
  assert_int_equal(v.bytes_uploaded, n + m);
  assert_int_equal(v.bytes_downloaded, n + m);

  t4a_buffer_release(buf);
  free(src);
  free(want);
  free(back);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(retire));
  t4a_mem_pool_release(pool);
  t4a_lane_release(lane);
}

/* Round trips of 1 B, 4 KiB, 1 MiB, odd sizes, and one larger than the ring, at odd offsets,
 * every way: pageable up/down, pinned up/down, and the mixes; each byte-exact. */
static void test_size_matrix(void **state) {
  (void)state;
  t4a_lane *lane = NULL;
  t4a_mem_pool *pool = NULL;
  t4a_retire *retire = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_lane_create(g_drv, 0, NULL, &lane));
  CK(t4a_mem_pool_create(lane, NULL, &pool));
  CK(t4a_retire_create(lane, NULL, &retire));
  CK(t4a_xfer_create(retire, NULL, &x));
  static const size_t sizes[] = {1, 3, 4096, 4099, (size_t)1 << 20, ((size_t)1 << 20) + 7,
                                 ((size_t)40 << 20) + 5};
  static const size_t offsets[] = {0, 1, 4093};
  const size_t max = ((size_t)40 << 20) + 5 + 4096;
  uint8_t *want = malloc(max), *back = malloc(max);
  assert_non_null(want);
  assert_non_null(back);
  t4a_pinned *pin_src = NULL, *pin_dst = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(lane), max, 0, &pin_src));
  CK(t4a_pinned_create(t4a_lane_holder(lane), max, 0, &pin_dst));
  int cases = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    for (size_t j = 0; j < sizeof offsets / sizeof *offsets; j++) {
      size_t n = sizes[i], off = offsets[j];
      t4a_buffer *buf = NULL;
      CK(t4a_buffer_create(pool, n + off, 0, 0, &buf));
      for (int way = 0; way < 4; way++) {
        int pinned_up = way & 1, pinned_down = way >> 1;
        fill(want, n, (uint32_t)(i * 131 + j * 7 + (size_t)way));
        if (pinned_up) {
          memcpy((uint8_t *)t4a_pinned_host(pin_src) + off, want, n);
          CK(t4a_xfer_upload_pinned(x, buf, off, pin_src, off, n));
        } else {
          uint8_t *src = malloc(n);
          assert_non_null(src);
          memcpy(src, want, n);
          CK(t4a_xfer_upload(x, buf, off, src, n));
          memset(src, 0xEE, n); /* reusable at once */
          free(src);
        }
        t4a_xfer_pending *pd = NULL;
        if (pinned_down) {
          memset(t4a_pinned_host(pin_dst), 0, n + off);
          CK(t4a_xfer_download_pinned(x, buf, off, pin_dst, off, n, &pd));
          CK(t4a_xfer_pending_wait(pd));
          assert_memory_equal((uint8_t *)t4a_pinned_host(pin_dst) + off, want, n);
        } else {
          memset(back, 0, n);
          CK(t4a_xfer_download(x, buf, off, back, n, &pd));
          CK(t4a_xfer_pending_wait(pd));
          assert_memory_equal(back, want, n);
        }
        t4a_xfer_pending_release(pd);
        /* The pinned source is rewritten next round: wait for its upload's DMA first. */
        if (pinned_up) CK(t4a_retire_wait(retire));
        cases++;
      }
      t4a_buffer_release(buf);
    }
  }
  printf("# %d round trips (sizes 1 B .. 40 MiB + 5, offsets 0/1/4093, pageable and pinned)\n",
         cases);
  t4a_pinned_release(pin_src);
  t4a_pinned_release(pin_dst);
  free(want);
  free(back);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(retire));
  t4a_mem_pool_release(pool);
  t4a_lane_release(lane);
}

/* Issue 25 item 2 on the device: once warm, each transfer with its wait (pageable and pinned,
 * both ways, 4 KiB and 1 MiB) and a 1 MiB buffer create + release make no heap allocation; the
 * bytes are checked every round. Prints the allocations counted (0). */
static void test_warm_transfers_allocate_nothing(void **state) {
  (void)state;
  t4a_lane *lane = NULL;
  t4a_mem_pool *pool = NULL;
  t4a_retire *retire = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_lane_create(g_drv, 0, NULL, &lane));
  CK(t4a_mem_pool_create(lane, NULL, &pool));
  CK(t4a_retire_create(lane, NULL, &retire));
  CK(t4a_xfer_create(retire, NULL, &x));
  const size_t max = (size_t)1 << 20;
  uint8_t *src = malloc(max), *back = malloc(max);
  assert_non_null(src);
  assert_non_null(back);
  t4a_buffer *buf = NULL;
  CK(t4a_buffer_create(pool, max, 0, 0, &buf));
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(lane), max, 0, &pin));
  const size_t sizes[] = {4096, max};
  uint64_t heap0 = 0;
  for (int round = 0; round < 11; round++) {
    if (round == 1) heap0 = t4a_heap_allocations(); /* round 0 is cold */
    for (size_t k = 0; k < 2; k++) {
      size_t n = sizes[k];
      fill(src, n, (uint32_t)(round * 2 + (int)k));
      CK(t4a_xfer_upload(x, buf, 0, src, n));
      CK(t4a_retire_wait(retire));
      t4a_xfer_pending *pd = NULL;
      memset(t4a_pinned_host(pin), 0, n);
      CK(t4a_xfer_download_pinned(x, buf, 0, pin, 0, n, &pd));
      CK(t4a_xfer_pending_wait(pd));
      t4a_xfer_pending_release(pd);
      assert_memory_equal(t4a_pinned_host(pin), src, n);
      fill(t4a_pinned_host(pin), n, (uint32_t)(100 + round));
      memcpy(src, t4a_pinned_host(pin), n);
      CK(t4a_xfer_upload_pinned(x, buf, 0, pin, 0, n));
      CK(t4a_retire_wait(retire));
      memset(back, 0, n);
      CK(t4a_xfer_download(x, buf, 0, back, n, &pd));
      CK(t4a_xfer_pending_wait(pd));
      t4a_xfer_pending_release(pd);
      assert_memory_equal(back, src, n);
      t4a_buffer *t = NULL;
      CK(t4a_buffer_create(pool, max, 0, 0, &t));
      t4a_buffer_release(t);
    }
  }
  uint64_t heap = t4a_heap_allocations() - heap0;
  printf("# warm transfers: %llu heap allocations over 10 rounds of 4 transfers x 2 sizes and 2 "
         "buffer create/release\n",
         (unsigned long long)heap);
  assert_int_equal(heap, 0);
  t4a_pinned_release(pin);
  t4a_buffer_release(buf);
  free(src);
  free(back);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(retire));
  t4a_mem_pool_release(pool);
  t4a_lane_release(lane);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trips),
                                     cmocka_unit_test(test_size_matrix),
                                     cmocka_unit_test(test_warm_transfers_allocate_nothing)};
  return t4a_gpu_test_main("xfer_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
