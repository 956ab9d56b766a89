/* Shared by the copy GPU tests (copy_gpu_test.c: one device; copy_multi_gpu_test.c: two). Test
 * code, included by exactly those two files. A runtime here is a lane with its pool, retirement
 * and transfer state (default staging ring: 16 MiB, 4 deep). Every check is byte-exact against a
 * host copy of what was uploaded, read back through a pageable download. */
#ifndef T4A_XFER_COPY_GPU_COMMON_H_
#define T4A_XFER_COPY_GPU_COMMON_H_

#define _POSIX_C_SOURCE 200809L
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
#include "t4a/xfer_copy.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef struct grt {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
} grt;

static void grt_open(t4a_driver *drv, int ordinal, grt *r) {
  CK(t4a_lane_create(drv, ordinal, NULL, &r->lane));
  CK(t4a_mem_pool_create(r->lane, NULL, &r->pool));
  CK(t4a_retire_create(r->lane, NULL, &r->retire));
  CK(t4a_xfer_create(r->retire, NULL, &r->xfer));
}

static void grt_close(grt *r) {
  t4a_xfer_destroy(r->xfer);
  CK(t4a_retire_destroy(r->retire));
  t4a_mem_pool_release(r->pool);
  t4a_lane_release(r->lane);
}

static double gnow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void gfill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
}

static void gexpect(grt *r, t4a_buffer *b, size_t off, const uint8_t *want, size_t n) {
  uint8_t *got = malloc(n);
  assert_non_null(got);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(r->xfer, b, off, got, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(got, want, n);
  free(got);
}

/* One direction of an opposing pair: uploads a pattern into `from`, copies it to `to` (the
 * source buffer dropped and its host pattern overwritten right after the call), and keeps the
 * witness. Runs on its own thread. */
typedef struct gdir {
  grt *from, *to;
  size_t n, src_off, dst_off;
  t4a_copy_path want;
  uint32_t seed;
  uint8_t *pattern;
  t4a_buffer *dst;
  t4a_status st;
  t4a_copy_path taken;
  double seconds;
} gdir;

static void *gdir_main(void *p) {
  gdir *d = p;
  t4a_buffer *src = NULL;
  d->st = t4a_buffer_create(d->from->pool, d->n + d->src_off, 0, 0, &src);
  if (d->st == T4A_OK) d->st = t4a_buffer_create(d->to->pool, d->n + d->dst_off, 0, 0, &d->dst);
  if (d->st == T4A_OK) d->st = t4a_xfer_upload(d->from->xfer, src, d->src_off, d->pattern, d->n);
  t4a_witness *w = NULL;
  double t0 = gnow();
  if (d->st == T4A_OK) {
    d->st = t4a_xfer_copy(d->to->xfer, d->dst, d->dst_off, d->from->xfer, src, d->src_off, d->n,
                          d->want, &d->taken, &w);
  }
  t4a_buffer_release(src); /* the source may go at once */
  if (d->st == T4A_OK) d->st = t4a_witness_wait(w);
  d->seconds = gnow() - t0;
  t4a_witness_release(w);
  return NULL;
}

/* A -> B and B -> A at once, each n bytes at odd offsets; both land byte-exact. */
static void gopposing(grt *a, grt *b, size_t n, t4a_copy_path want, t4a_copy_path expect_path) {
  uint8_t *pa = malloc(n), *pb = malloc(n), *wa = malloc(n), *wb = malloc(n);
  assert_non_null(pa);
  assert_non_null(pb);
  assert_non_null(wa);
  assert_non_null(wb);
  gfill(pa, n, (uint32_t)n * 3u + 1u);
  gfill(pb, n, (uint32_t)n * 5u + 2u);
  memcpy(wa, pa, n);
  memcpy(wb, pb, n);
  gdir ab = {a, b, n, 3, 5, want, 1, pa, NULL, T4A_OK, T4A_COPY_AUTO, 0};
  gdir ba = {b, a, n, 7, 1, want, 2, pb, NULL, T4A_OK, T4A_COPY_AUTO, 0};
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, gdir_main, &ab), 0);
  assert_int_equal(pthread_create(&t2, NULL, gdir_main, &ba), 0);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CK(ab.st);
  CK(ba.st);
  assert_int_equal(ab.taken, expect_path);
  assert_int_equal(ba.taken, expect_path);
  memset(pa, 0xEE, n); /* the callers' host memory is no longer needed */
  memset(pb, 0xEE, n);
  gexpect(b, ab.dst, 5, wa, n);
  gexpect(a, ba.dst, 1, wb, n);
  if (n >= ((size_t)1 << 20)) {
    printf("# %zu bytes each way: %.2f / %.2f ms (copy+wait, both at once)\n", n,
           ab.seconds * 1e3, ba.seconds * 1e3);
  }
  t4a_buffer_release(ab.dst);
  t4a_buffer_release(ba.dst);
  free(pa);
  free(pb);
  free(wa);
  free(wb);
}

/* A third runtime (on ordinal `oc`) waits on the witness of a copy from a runtime on `oa` to one
 * on `ob` (n bytes), with its own context current: the witness's events are queried under their
 * own contexts. The result is byte-exact and memoised. */
static void gobserve(t4a_driver *drv, int oa, int ob, int oc, size_t n) {
  grt a, b, c;
  grt_open(drv, oa, &a);
  grt_open(drv, ob, &b);
  grt_open(drv, oc, &c);
  uint8_t *p = malloc(n);
  assert_non_null(p);
  gfill(p, n, (uint32_t)(oa * 16 + ob * 4 + oc));
  t4a_buffer *x = NULL, *y = NULL;
  CK(t4a_buffer_create(a.pool, n, 0, 0, &x));
  CK(t4a_buffer_create(b.pool, n, 0, 0, &y));
  CK(t4a_xfer_upload(a.xfer, x, 0, p, n));
  t4a_witness *w = NULL;
  CK(t4a_xfer_copy(b.xfer, y, 0, a.xfer, x, 0, n, T4A_COPY_AUTO, NULL, &w));
  t4a_buffer_release(x);
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(c.lane), NULL));
  CK(t4a_witness_wait(w));
  CK(t4a_witness_query(w));
  CK(t4a_ctx_scope_exit(&scope));
  gexpect(&b, y, 0, p, n);
  t4a_witness_release(w);
  t4a_buffer_release(y);
  free(p);
  grt_close(&a);
  grt_close(&b);
  grt_close(&c);
}

static const size_t g_sizes[] = {1, 4096, (size_t)1 << 20, ((size_t)256 << 20) + 13};

#endif /* T4A_XFER_COPY_GPU_COMMON_H_ */
