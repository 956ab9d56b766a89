/* t4a_ctx across two GPUs (label: gpu, multi). Exits 77 without a driver; fails with an explicit
 * message on a host with fewer than two GPUs (a multi-GPU claim must never pass silently). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/gpu/gpu_main.h"

static t4a_driver *g_drv;

static void test_lanes_on_two_devices(void **state) {
  (void)state;
  t4a_lane *a = NULL, *b = NULL;
  assert_int_equal(t4a_lane_create(g_drv, 0, NULL, &a), T4A_OK);
  assert_int_equal(t4a_lane_create(g_drv, 1, NULL, &b), T4A_OK);
  CUcontext ca = t4a_ctx_holder_native(t4a_lane_holder(a));
  CUcontext cb = t4a_ctx_holder_native(t4a_lane_holder(b));
  assert_ptr_not_equal(ca, cb);
  t4a_device_info da, db;
  assert_int_equal(t4a_device_query(g_drv, 0, &da), T4A_OK);
  assert_int_equal(t4a_device_query(g_drv, 1, &db), T4A_OK);
  assert_memory_not_equal(da.uuid, db.uuid, 16);
  int can01 = 0, can10 = 0;
  assert_int_equal(t4a_device_can_access_peer(g_drv, 0, 1, &can01), T4A_OK);
  assert_int_equal(t4a_device_can_access_peer(g_drv, 1, 0, &can10), T4A_OK);
  printf("# peer 0->1 %d, 1->0 %d\n", can01, can10);
  /* A scope on B nested in a scope on A restores A, then nothing. */
  t4a_ctx_scope sa, sb;
  assert_int_equal(t4a_ctx_scope_enter(&sa, t4a_lane_holder(a), NULL), T4A_OK);
  assert_int_equal(t4a_ctx_scope_enter(&sb, t4a_lane_holder(b), NULL), T4A_OK);
  CUcontext cur = NULL;
  assert_int_equal(g_drv->t.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, cb);
  assert_int_equal(t4a_ctx_scope_exit(&sb), T4A_OK);
  assert_int_equal(g_drv->t.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, ca);
  /* Dropping B's lane while A is current leaves A current. */
  t4a_lane_release(b);
  assert_int_equal(g_drv->t.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, ca);
  assert_int_equal(t4a_ctx_scope_exit(&sa), T4A_OK);
  t4a_lane_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lanes_on_two_devices)};
  return t4a_gpu_test_main("ctx_multi_gpu_test", tests, sizeof tests / sizeof tests[0], 2, &g_drv);
}
