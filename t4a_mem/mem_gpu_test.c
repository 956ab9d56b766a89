/* t4a_mem and t4a_retire on a real GPU (label: gpu, single). Exits 77 without a driver.
 * Kernels come from testing/gpu/kernels.cu as PTX and are launched through the driver seam (the
 * launch library is a later issue). */
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
#include "t4a_ctx/driver_table.h"
#include "t4a_mem/mem_internal.h"
#include "testing/gpu/kernels_ptx.h"
#include "testing/gpu/gpu_main.h"

static t4a_driver *g_drv;

typedef struct fixture {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  CUmodule module;
  CUfunction slow_fill, add_one;
} fixture;

#define CK(x) assert_int_equal((x), T4A_OK)

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (t4a_lane_create(g_drv, 0, NULL, &f->lane) != T4A_OK ||
      t4a_mem_pool_create(f->lane, NULL, &f->pool) != T4A_OK ||
      t4a_retire_create(f->lane, NULL, &f->retire) != T4A_OK) {
    return -1;
  }
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) != T4A_OK) return -1;
  int ok = T4A_CU(g_drv, cuModuleLoadData, &f->module, t4a_test_kernels_ptx) == T4A_OK &&
           T4A_CU(g_drv, cuModuleGetFunction, &f->slow_fill, f->module, "slow_fill") == T4A_OK &&
           T4A_CU(g_drv, cuModuleGetFunction, &f->add_one, f->module, "add_one") == T4A_OK;
  (void)t4a_ctx_scope_exit(&s);
  *state = f;
  return ok ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  int ok = t4a_retire_destroy(f->retire) == T4A_OK;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
    (void)T4A_CU(g_drv, cuModuleUnload, f->module);
    (void)t4a_ctx_scope_exit(&s);
  }
  t4a_mem_pool_release(f->pool);
  t4a_lane_release(f->lane);
  free(f);
  return ok ? 0 : -1;
}

/* Launches on the lane's stream; the caller's context scope must be active. */
static t4a_status launch(fixture *f, CUfunction fn, unsigned n, void **params) {
  unsigned block = 256, grid = (n + block - 1) / block;
  return T4A_CU(g_drv, cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, 0, t4a_lane_stream(f->lane),
                params, NULL);
}

static void download(fixture *f, t4a_buffer *b, void *host, size_t bytes) {
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  CK(T4A_CU(g_drv, cuMemcpyDtoHAsync, host, t4a_buffer_devptr(b), bytes,
            t4a_lane_stream(f->lane)));
  (void)t4a_ctx_scope_exit(&s);
  CK(t4a_lane_synchronize(f->lane));
}

static void test_pool_threshold(void **state) {
  fixture *f = *state;
  uint64_t t = 0;
  CK(t4a_mem_pool_query_release_threshold(f->pool, &t));
  assert_true(t == UINT64_MAX);
}

/* A buffer released while a slow kernel still writes it: its block goes to the reuse cache, the
 * next buffer of that size gets it at once, and its zero fill and increment run after the slow
 * kernel in stream order — so the result is exactly 1 everywhere. */
static void test_buffer_freed_while_kernel_uses_it(void **state) {
  fixture *f = *state;
  const unsigned n = 1u << 20;
  const size_t bytes = n * sizeof(unsigned);
  t4a_buffer *a = NULL, *b = NULL;
  CK(t4a_buffer_create(f->pool, bytes, 0, 0, &a));
  t4a_devptr first = t4a_buffer_devptr(a);
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  CUdeviceptr pa = t4a_buffer_devptr(a);
  unsigned v = 100, spin = 20000000; /* ~10 ms of clock64 per thread */
  void *p1[] = {&pa, (void *)&n, &v, &spin};
  CK(launch(f, f->slow_fill, n, p1));
  (void)t4a_ctx_scope_exit(&s);
  t4a_buffer_release(a); /* the kernel is still running */
  CK(t4a_buffer_create(f->pool, bytes, 0, T4A_BUFFER_ZERO, &b));
  assert_int_equal(t4a_buffer_devptr(b), first); /* reused at once */
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  CUdeviceptr pb = t4a_buffer_devptr(b);
  void *p2[] = {&pb, (void *)&n};
  CK(launch(f, f->add_one, n, p2));
  (void)t4a_ctx_scope_exit(&s);
  unsigned *host = malloc(bytes);
  download(f, b, host, bytes);
  for (unsigned i = 0; i < n; i++) {
    if (host[i] != 1) fail_msg("element %u is %u, want 1: reuse ran before the kernel", i, host[i]);
  }
  free(host);
  t4a_buffer_release(b);

  /* Without the cache: the last release enqueues cuMemFreeAsync behind the running kernel. */
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.reuse_disabled = 1;
  t4a_mem_pool *plain = NULL;
  CK(t4a_mem_pool_create(f->lane, &o, &plain));
  CK(t4a_buffer_create(plain, bytes, 0, 0, &a));
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  pa = t4a_buffer_devptr(a);
  CK(launch(f, f->slow_fill, n, p1));
  (void)t4a_ctx_scope_exit(&s);
  t4a_buffer_release(a);
  CK(t4a_lane_synchronize(f->lane)); /* no fault: the free followed the kernel */
  t4a_mem_pool_release(plain);
  t4a_counter_values c;
  t4a_lane_stats(f->lane, &c);
  assert_int_equal(c.reuse_hits, 1);
  assert_int_equal(c.zero_fills, 1);
  assert_true(c.device_frees >= 1);
}

/* A mapped slot written by a kernel is read by the host after a sync with no driver call. */
static void test_mapped_slot(void **state) {
  fixture *f = *state;
  t4a_slots *slots = NULL;
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 16, 8, &slots));
  uint32_t idx = 0;
  CK(t4a_slot_acquire(slots, &idx));
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL));
  CUdeviceptr d = t4a_slot_devptr(slots, idx);
  unsigned n = 4, v = 7000, spin = 1000;
  void *p[] = {&d, &n, &v, &spin};
  CK(launch(f, f->slow_fill, n, p));
  (void)t4a_ctx_scope_exit(&s);
  CK(t4a_lane_synchronize(f->lane));
  volatile const unsigned *cell = t4a_slot_host(slots, idx);
  for (unsigned i = 0; i < n; i++) assert_int_equal(cell[i], v + i);
  t4a_slot_release(slots, idx);
  t4a_slots_destroy(slots);
}

static void test_reuse_cache_counts(void **state) {
  fixture *f = *state;
  t4a_counter_values before, after;
  t4a_lane_stats(f->lane, &before);
  for (int i = 0; i < 1000; i++) {
    t4a_buffer *b = NULL;
    CK(t4a_buffer_create(f->pool, (size_t)1 << 20, 0, 0, &b));
    t4a_buffer_release(b);
  }
  t4a_lane_stats(f->lane, &after);
  assert_true(after.device_allocs - before.device_allocs <= 1);
  assert_true(after.reuse_hits - before.reuse_hits >= 999);
  CK(t4a_lane_synchronize(f->lane));
}

/* 10,000 admitted launches record at most 20 events and wait on the host never. */
static void test_warm_chain(void **state) {
  fixture *f = *state;
  t4a_buffer *b = NULL;
  const unsigned n = 256;
  CK(t4a_buffer_create(f->pool, n * sizeof(unsigned), 0, T4A_BUFFER_ZERO, &b));
  t4a_counter_values before, after;
  t4a_lane_stats(f->lane, &before);
  CUdeviceptr pb = t4a_buffer_devptr(b);
  void *p[] = {&pb, (void *)&n};
  for (int i = 0; i < 10000; i++) {
    t4a_admission adm;
    CK(t4a_admission_begin(f->retire, 1, &adm));
    t4a_status st = launch(f, f->add_one, n, p);
    if (st != T4A_OK) {
      (void)t4a_admission_abort(&adm, st);
      fail_msg("launch %d failed", i);
    }
    t4a_buffer_retain(b);
    t4a_admission_keep(&adm, (t4a_keepalive){b, t4a_buffer_release_object_, 0});
    t4a_admission_commit(&adm);
  }
  t4a_lane_stats(f->lane, &after);
  printf("# 10000 admissions: %llu events, %llu host waits, %llu keepalives held\n",
         (unsigned long long)(after.events_recorded - before.events_recorded),
         (unsigned long long)(after.host_waits - before.host_waits),
         (unsigned long long)(after.keepalives_held - before.keepalives_held));
  assert_true(after.events_recorded - before.events_recorded <= 20);
  assert_int_equal(after.host_waits - before.host_waits, 0);
  CK(t4a_retire_wait(f->retire));
  unsigned host[256];
  download(f, b, host, sizeof host);
  for (unsigned i = 0; i < n; i++) assert_int_equal(host[i], 10000);
  t4a_buffer_release(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_pool_threshold, setup, teardown),
      cmocka_unit_test_setup_teardown(test_buffer_freed_while_kernel_uses_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mapped_slot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reuse_cache_counts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_chain, setup, teardown),
  };
  return t4a_gpu_test_main("mem_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
