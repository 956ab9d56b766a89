/* //t4a_mem:pinned_arena on a real GPU (labels: gpu, single). Exits 77 (skip) when no driver can
 * be loaded. The jemalloc arena serves 1,000 mixed-size pinned allocations with far fewer
 * cuMemHostAlloc calls than allocations; the driver reports every allocation (and an interior
 * pointer) as pinned host memory; a DMA round trip through arena memory is exact; destroy returns
 * every region. Prints the timings that motivate the arena. */
#define _GNU_SOURCE
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
#include "t4a/pinned_arena.h"
#include "t4a_ctx/driver_table.h"
#include "testing/gpu/gpu_main.h"

#define MIB ((size_t)1024 * 1024)

static t4a_driver *g_drv;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* 1 if the driver reports p as pinned host memory. */
static int is_pinned_host(const void *p) {
  CUmemorytype type = (CUmemorytype)0;
  CUresult r = g_drv->t.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              (CUdeviceptr)(uintptr_t)p);
  return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST;
}

typedef struct slot {
  unsigned char *p;
  size_t n;
  unsigned tag;
} slot;

static void test_thousand_mixed_allocations(void **state) {
  (void)state;
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(g_drv, 0, &h), T4A_OK);
  t4a_ctx_scope scope; /* for the test's own driver queries */
  assert_int_equal(t4a_ctx_scope_enter(&scope, h, NULL), T4A_OK);

  /* What one request costs without the arena. */
  void *raw = NULL;
  double t0 = now_ms();
  assert_int_equal(g_drv->t.cuMemHostAlloc(&raw, 2 * MIB, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  double t_raw = now_ms() - t0;
  printf("# raw cuMemHostAlloc(2 MiB, PORTABLE): %.3f ms, base %p (2 MiB aligned: %s)\n", t_raw,
         raw, ((uintptr_t)raw % (2 * MIB)) == 0 ? "yes" : "no");
  assert_int_equal(g_drv->t.cuMemFreeHost(raw), CUDA_SUCCESS);
  t0 = now_ms();
  assert_int_equal(g_drv->t.cuMemHostAlloc(&raw, 256 * MIB, CU_MEMHOSTALLOC_PORTABLE),
                   CUDA_SUCCESS);
  double t_raw_big = now_ms() - t0;
  t0 = now_ms();
  assert_int_equal(g_drv->t.cuMemFreeHost(raw), CUDA_SUCCESS);
  printf("# raw cuMemHostAlloc(256 MiB, PORTABLE): %.3f ms; cuMemFreeHost %.3f ms\n", t_raw_big,
         now_ms() - t0);

  struct t4a_pinned_arena_process_stats tot0, tot1;
  t4a_pinned_arena_process_stats(&tot0);
  t4a_pinned_arena *a = NULL;
  t0 = now_ms();
  assert_int_equal(t4a_pinned_arena_create(h, NULL, &a), T4A_OK);
  double t_create = now_ms() - t0;

  slot slots[64];
  memset(slots, 0, sizeof slots);
  uint64_t seed = 0x51ED27u;
  double t_alloc = 0, t_worst = 0;
  size_t total_bytes = 0, frees = 0;
  for (unsigned i = 0; i < 1000; i++) {
    size_t k = (size_t)(rng_next(&seed) % 64);
    if (slots[k].p != NULL) {
      assert_int_equal(slots[k].p[0], (unsigned char)slots[k].tag);
      if (slots[k].n > 1) {
        assert_int_equal(slots[k].p[slots[k].n - 1], (unsigned char)(slots[k].tag + 1));
      }
      t4a_pinned_arena_free(a, slots[k].p);
      slots[k].p = NULL;
      frees++;
    }
    unsigned bits = (unsigned)(rng_next(&seed) % 21);
    size_t n = 1 + (size_t)(rng_next(&seed) % ((uint64_t)1 << bits));
    void *p = NULL;
    double s0 = now_ms();
    t4a_status st = t4a_pinned_arena_alloc(a, n, 0, &p);
    double dt = now_ms() - s0;
    assert_int_equal(st, T4A_OK);
    t_alloc += dt;
    if (dt > t_worst) t_worst = dt;
    memset(p, (int)(i & 0xff), n);
    ((unsigned char *)p)[n - 1] = (unsigned char)(i + 1);
    ((unsigned char *)p)[0] = (unsigned char)i; /* first byte wins when n == 1 */
    if (!is_pinned_host(p) || !is_pinned_host((char *)p + n - 1)) {
      fail_msg("allocation %u (%zu bytes at %p) is not pinned host memory", i, n, p);
    }
    slots[k] = (slot){p, n, i};
    total_bytes += n;
  }
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  printf("# arena create %.3f ms; 1000 allocations (%.1f MiB requested, %zu frees): %.3f ms in all, "
         "%.4f ms mean, %.3f ms worst\n",
         t_create, (double)total_bytes / (double)MIB, frees, t_alloc, t_alloc / 1000.0, t_worst);
  printf("# cuMemHostAlloc calls %llu (regions %llu, %.1f MiB pinned, %.1f MiB in use, %llu "
         "extents carved)\n",
         (unsigned long long)s.host_alloc_calls, (unsigned long long)s.extents,
         (double)s.bytes_pinned / (double)MIB, (double)s.bytes_in_use / (double)MIB,
         (unsigned long long)s.hook_extents);
  assert_int_equal(s.allocations, 1000);
  assert_true(s.host_alloc_calls < 1000);
  assert_true(s.host_alloc_calls < 100); /* far fewer: jemalloc grows its extents geometrically */
  assert_int_equal(s.extents, s.host_alloc_calls);

  /* Memory that is not the arena's is not pinned (the check above can fail). */
  char *heap = malloc(4096);
  assert_non_null(heap);
  assert_false(is_pinned_host(heap));
  assert_false(t4a_pinned_arena_owns(a, heap));
  free(heap);

  /* A DMA round trip through arena memory: host -> device -> another arena allocation. */
  size_t n = 3 * MIB + 17;
  unsigned char *src = NULL, *dst = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, n, 4096, (void **)&src), T4A_OK);
  assert_int_equal(t4a_pinned_arena_alloc(a, n, 0, (void **)&dst), T4A_OK);
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 31u + 7u);
  memset(dst, 0, n);
  CUdeviceptr dev = 0;
  CUstream stream = NULL;
  assert_int_equal(g_drv->t.cuMemAlloc(&dev, n), CUDA_SUCCESS);
  assert_int_equal(g_drv->t.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(g_drv->t.cuMemcpyHtoDAsync(dev, src, n, stream), CUDA_SUCCESS);
  assert_int_equal(g_drv->t.cuMemcpyDtoHAsync(dst, dev, n, stream), CUDA_SUCCESS);
  assert_int_equal(g_drv->t.cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_memory_equal(src, dst, n);
  assert_int_equal(g_drv->t.cuStreamDestroy(stream), CUDA_SUCCESS);
  assert_int_equal(g_drv->t.cuMemFree(dev), CUDA_SUCCESS);
  t4a_pinned_arena_free(a, src);
  t4a_pinned_arena_free(a, dst);

  /* Out of memory is a typed status, not an abort: a request no host can pin. */
  void *huge = NULL;
  t4a_status st = t4a_pinned_arena_alloc(a, (size_t)1 << 46, 0, &huge); /* 64 TiB */
  assert_int_equal(st, T4A_HOST_OUT_OF_MEMORY);
  assert_null(huge);
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  printf("# 64 TiB request: %s\n", t4a_error_format(&e, buf, sizeof buf));
  assert_int_equal(e.bytes, (uint64_t)1 << 46);

  t4a_pinned_arena_stats(a, &s);
  for (size_t k = 0; k < 64; k++) t4a_pinned_arena_free(a, slots[k].p);
  t0 = now_ms();
  t4a_pinned_arena_destroy(a);
  double t_destroy = now_ms() - t0;
  t4a_pinned_arena_process_stats(&tot1);
  printf("# destroy %.3f ms, %llu regions freed\n", t_destroy,
         (unsigned long long)(tot1.regions_freed - tot0.regions_freed));
  assert_int_equal(tot1.regions_freed - tot0.regions_freed, s.extents);
  assert_int_equal(tot1.regions_leaked, tot0.regions_leaked);
  assert_int_equal(t4a_ctx_scope_exit(&scope), T4A_OK);
  t4a_ctx_holder_release(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thousand_mixed_allocations),
  };
  return t4a_gpu_test_main("pinned_arena_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
