/* t4a_xfer_copy between two real GPUs (label: gpu, multi). On a host with fewer than two GPUs it
 * fails with an explicit message (testing/gpu/gpu_main.h): a multi-GPU claim never passes
 * silently. Without a driver it exits 77.
 * Device 0 <-> device 1, both ways at once, on the peer path (where the pair supports it) and the
 * staged path (always), at 1 B, 4 KiB, 1 MiB and 256 MiB + 13 with odd offsets: the largest is
 * eight times the default staging ring (chunk pressure: chunks recycle on their events). A third
 * runtime on device 1 observes a copy's witness, whose source event is queried under device 0's
 * context. Times are printed for information only. */
#include "t4a_xfer/copy_gpu_common.h"
#include "testing/gpu/gpu_main.h"

static t4a_driver *g_drv;

static void run_path(t4a_copy_path path) {
  grt a, b;
  grt_open(g_drv, 0, &a);
  grt_open(g_drv, 1, &b);
  for (size_t i = 0; i < sizeof g_sizes / sizeof *g_sizes; i++) {
    gopposing(&a, &b, g_sizes[i], path, path);
  }
  t4a_counter_values vb, vd;
  t4a_lane_stats(b.lane, &vb);
  t4a_driver_stats(g_drv, &vd);
  printf("# B: peer %llu, staged %llu, staging waits %llu, cross waits %llu; peer enables %llu\n",
         (unsigned long long)vb.copies_peer, (unsigned long long)vb.copies_staged,
         (unsigned long long)vb.staging_waits, (unsigned long long)vb.cross_waits,
         (unsigned long long)vd.peer_access_enabled);
  if (path == T4A_COPY_PEER) assert_int_equal(vb.copies_peer, 4);
  if (path == T4A_COPY_STAGED) assert_int_equal(vb.copies_staged, 4);
  grt_close(&a);
  grt_close(&b);
}

static void test_staged_both_ways(void **state) {
  (void)state;
  run_path(T4A_COPY_STAGED);
}

static void test_peer_both_ways(void **state) {
  (void)state;
  int can01 = 0, can10 = 0;
  CK(t4a_device_can_access_peer(g_drv, 0, 1, &can01));
  CK(t4a_device_can_access_peer(g_drv, 1, 0, &can10));
  printf("# peer access 0->1 %d, 1->0 %d\n", can01, can10);
  if (!can01 || !can10) {
    /* A requested peer copy must say so, never fall back. */
    grt a, b;
    grt_open(g_drv, 0, &a);
    grt_open(g_drv, 1, &b);
    t4a_copy_path taken;
    assert_int_equal(t4a_xfer_copy_plan(b.xfer, a.xfer, T4A_COPY_PEER, &taken),
                     can10 ? T4A_OK : T4A_UNSUPPORTED);
    grt_close(&a);
    grt_close(&b);
    skip();
  }
  run_path(T4A_COPY_PEER);
}

static void test_third_runtime_observes(void **state) {
  (void)state;
  gobserve(g_drv, 0, 1, 1, (size_t)48 << 20);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_staged_both_ways),
      cmocka_unit_test(test_peer_both_ways),
      cmocka_unit_test(test_third_runtime_observes),
  };
  return t4a_gpu_test_main("copy_multi_gpu_test", tests, sizeof tests / sizeof *tests, 2, &g_drv);
}
