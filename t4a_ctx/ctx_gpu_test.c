/* t4a_ctx on a real GPU (label: gpu, single). Exits 77 (skip) when no driver can be loaded.
 * Loads the real driver, enumerates, puts two holders (and two lanes) on one ordinal, and checks
 * activation, restore and the A1 rule against the real driver's current-context behaviour. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/gpu/gpu_main.h"

static t4a_driver *g_drv;

static CUcontext current(void) {
  CUcontext c = (CUcontext)0x1;
  assert_int_equal(g_drv->t.cuCtxGetCurrent(&c), CUDA_SUCCESS);
  return c;
}

static void test_enumerate(void **state) {
  (void)state;
  int n = 0;
  assert_int_equal(t4a_device_count(g_drv, &n), T4A_OK);
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) {
    t4a_device_info d;
    assert_int_equal(t4a_device_query(g_drv, i, &d), T4A_OK);
    char uuid[48];
    printf("# device %d: %s, cc %d.%d, %d SMs, %.1f GiB, %s\n", i, d.name, d.cc_major, d.cc_minor,
           d.sm_count, (double)d.total_mem_bytes / (1 << 30),
           t4a_device_uuid_format(d.uuid, uuid, sizeof uuid));
    assert_true(strlen(d.name) > 0);
    assert_true(d.cc_major >= 7);
    assert_true(d.sm_count > 0);
    assert_true(d.total_mem_bytes > (1ull << 30));
    assert_int_equal(d.warp_size, 32);
    assert_true(d.memory_pools_supported);
  }
  t4a_device_info bad;
  assert_int_equal(t4a_device_query(g_drv, n, &bad), T4A_INVALID_DEVICE);
  printf("# driver %d (%s), caps 0x%x\n", t4a_driver_version(g_drv), t4a_driver_origin(g_drv),
         t4a_driver_caps(g_drv));
}

static void test_two_holders_activation_restore(void **state) {
  (void)state;
  assert_int_equal(g_drv->t.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  t4a_ctx_holder *a = NULL, *b = NULL;
  assert_int_equal(t4a_ctx_holder_create(g_drv, 0, &a), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(g_drv, 0, &b), T4A_OK);
  CUcontext ctx = t4a_ctx_holder_native(a);
  assert_ptr_equal(ctx, t4a_ctx_holder_native(b));
  unsigned flags = 0;
  int active = 0;
  assert_int_equal(g_drv->t.cuDevicePrimaryCtxGetState(t4a_ctx_holder_device(a), &flags, &active),
                   CUDA_SUCCESS);
  assert_true(active);

  t4a_counters c;
  memset(&c, 0, sizeof c);
  t4a_ctx_scope s, inner;
  assert_ptr_equal(current(), NULL);
  assert_int_equal(t4a_ctx_scope_enter(&s, a, &c), T4A_OK);
  assert_ptr_equal(current(), ctx);
  assert_int_equal(t4a_ctx_scope_enter(&inner, b, &c), T4A_OK); /* already current: skipped */
  assert_int_equal(t4a_ctx_scope_exit(&inner), T4A_OK);
  assert_ptr_equal(current(), ctx);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_ptr_equal(current(), NULL);
  t4a_counter_values v;
  t4a_counters_stats(&c, &v);
  assert_int_equal(v.ctx_activations, 1);
  assert_int_equal(v.ctx_activations_skipped, 1);
  t4a_driver_stats(g_drv, &v);
  assert_int_equal(v.ctx_restores, 1);

  /* A1 on the real driver: the last holder of A released while B has the context current. */
  assert_int_equal(t4a_ctx_scope_enter(&s, b, &c), T4A_OK);
  t4a_ctx_holder_release(a);
  assert_ptr_equal(current(), ctx);
  assert_int_equal(g_drv->t.cuCtxSynchronize(), CUDA_SUCCESS); /* B's context still works */
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_ptr_equal(current(), NULL);

  /* The final holder, released while its context is current, leaves no dangling handle. */
  assert_int_equal(g_drv->t.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  t4a_ctx_holder_release(b);
  assert_ptr_equal(current(), NULL);
}

static void test_two_lanes_one_ordinal(void **state) {
  (void)state;
  t4a_lane *x = NULL, *y = NULL;
  assert_int_equal(t4a_lane_create(g_drv, 0, NULL, &x), T4A_OK);
  assert_int_equal(t4a_lane_create(g_drv, 0, NULL, &y), T4A_OK);
  assert_ptr_not_equal(t4a_lane_stream(x), t4a_lane_stream(y));
  assert_int_not_equal(t4a_lane_domain(x), t4a_lane_domain(y));
  assert_ptr_equal(t4a_ctx_holder_native(t4a_lane_holder(x)),
                   t4a_ctx_holder_native(t4a_lane_holder(y)));
  CUcontext sc = NULL;
  assert_int_equal(g_drv->t.cuStreamGetCtx(t4a_lane_stream(y), &sc), CUDA_SUCCESS);
  assert_ptr_equal(sc, t4a_ctx_holder_native(t4a_lane_holder(y)));
  assert_int_equal(g_drv->t.cuStreamQuery(t4a_lane_stream(x)), CUDA_SUCCESS);
  unsigned flags = 0;
  assert_int_equal(g_drv->t.cuStreamGetFlags(t4a_lane_stream(y), &flags), CUDA_SUCCESS);
  assert_int_equal(flags & CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
  assert_int_equal(t4a_lane_synchronize(x), T4A_OK);
  assert_int_equal(t4a_lane_synchronize(y), T4A_OK);
  assert_ptr_equal(current(), NULL);
  t4a_lane_release(x);
  t4a_lane_release(y);
  t4a_counter_values v;
  t4a_driver_stats(g_drv, &v);
  assert_int_equal(v.streams_leaked, 0);
  assert_int_equal(v.ctx_release_failures, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enumerate),
      cmocka_unit_test(test_two_holders_activation_restore),
      cmocka_unit_test(test_two_lanes_one_ordinal),
  };
  return t4a_gpu_test_main("ctx_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
