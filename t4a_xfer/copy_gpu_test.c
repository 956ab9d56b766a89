/* t4a_xfer_copy on one real GPU (label: gpu, single). Exits 77 without a driver.
 * Two runtimes on one ordinal copy both ways at once (1 B, 4 KiB, 1 MiB, 256 MiB + 13, odd
 * offsets), each source dropped right after its call; a third runtime on the same device
 * observes a copy's witness; the bracket's counters (no host wait in the copy call). Times are
 * printed for information only: this is a test, not a benchmark. */
#include "t4a_xfer/copy_gpu_common.h"
#include "testing/gpu/gpu_main.h"

static t4a_driver *g_drv;

static void test_two_runtimes_one_device(void **state) {
  (void)state;
  grt a, b;
  grt_open(g_drv, 0, &a);
  grt_open(g_drv, 0, &b);
  for (size_t i = 0; i < sizeof g_sizes / sizeof *g_sizes; i++) {
    gopposing(&a, &b, g_sizes[i], T4A_COPY_AUTO, T4A_COPY_SAME_DEVICE);
  }
  t4a_counter_values va, vb;
  t4a_lane_stats(a.lane, &va);
  t4a_lane_stats(b.lane, &vb);
  assert_int_equal(va.copies_same_device, 4);
  assert_int_equal(vb.copies_same_device, 4);
  assert_int_equal(va.cross_waits, 8); /* per copy: source-ready on the other, back-wait here */
  printf("# counters A: copies %llu, cross waits %llu, host waits %llu\n",
         (unsigned long long)va.copies_same_device, (unsigned long long)va.cross_waits,
         (unsigned long long)va.host_waits);
  grt_close(&a);
  grt_close(&b);
}

/* A third runtime's thread observes the copy's witness: the events are queried under their own
 * contexts (one device here: one context); the result is memoised. */
static void test_third_runtime_observes(void **state) {
  (void)state;
  gobserve(g_drv, 0, 0, 0, (size_t)64 << 20);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_runtimes_one_device),
      cmocka_unit_test(test_third_runtime_observes),
  };
  return t4a_gpu_test_main("copy_gpu_test", tests, sizeof tests / sizeof *tests, 1, &g_drv);
}
