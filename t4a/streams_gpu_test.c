/* Streams of a runtime on a real GPU (labels gpu, single; issue 22 items 1 and 2):
 *   - the device's priority range, a stream at the most urgent priority, one past it refused;
 *   - copy/compute overlap: a 256 MiB pageable upload on stream 2 beside a kernel of about the
 *     same length on stream 1, then a kernel on stream 1 that waits for the upload
 *     (t4a_stream_wait): every uploaded word checked (+1), the kernel's output checked; times
 *     printed for information only (the figure is bench/overlap_bench's, paired and medians);
 *   - a cross-stream lifetime the hardware would break if the order were missing: a buffer read
 *     by a slow kernel on stream 2 is released at once, its block reused on stream 1 and
 *     overwritten by an upload right away; the kernel must still read the old values.
 * Kernels are compiled with NVRTC through the runtime. `--fake` runs the same code on the fake
 * driver (the kernels' host twins, 8 MiB instead of 256, and the fake's ordering checks): a dry
 * run of the test's logic, not a claim about any GPU. */
#define _POSIX_C_SOURCE 200809L
#include "testing/gpu/gpu_main.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/host_kernels.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;
static t4a_fake *g_fake; /* --fake */

static const char k_src[] =
    "extern \"C\" __global__ void slow_fill(unsigned *p, unsigned n, unsigned v,\n"
    "                                       unsigned long long spin) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  unsigned long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) { }\n"
    "  p[i] = v + i;\n"
    "}\n"
    "extern \"C\" __global__ void add_one(unsigned *p, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += 1u;\n"
    "}\n"
    "extern \"C\" __global__ void slow_copy(const unsigned *in, unsigned *out, unsigned n,\n"
    "                                       unsigned long long spin) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  unsigned long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) { }\n"
    "  out[i] = in[i];\n"
    "}\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static t4a_runtime *open_rt(void) {
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g_drv;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  return rt;
}

static void test_priority_range(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  int least = 1, greatest = 1;
  CK(t4a_runtime_priority_range(rt, &least, &greatest));
  printf("priority range: least %d, greatest %d\n", least, greatest);
  assert_true(greatest <= least);
  t4a_stream_options so = T4A_STREAM_OPTIONS_INIT;
  so.priority = greatest;
  t4a_stream *s = NULL;
  CK(t4a_stream_create(rt, &so, &s));
  assert_int_equal(t4a_lane_priority(t4a_stream_lane(s)), greatest);
  so.priority = greatest - 1;
  t4a_stream *bad = NULL;
  assert_int_equal(t4a_stream_create(rt, &so, &bad), T4A_INVALID_ARGUMENT);
  so.priority = least + 1;
  assert_int_equal(t4a_stream_create(rt, &so, &bad), T4A_INVALID_ARGUMENT);
  CK(t4a_stream_destroy(rt, s));
  CK(t4a_runtime_close(rt));
}

typedef struct kit {
  t4a_runtime *rt;
  t4a_stream *s2;
  t4a_function *slow_fill, *add_one, *slow_copy;
  unsigned threads; /* one full wave */
} kit;

static void kit_open(kit *k) {
  memset(k, 0, sizeof *k);
  k->rt = open_rt();
  CK(t4a_stream_create(k->rt, NULL, &k->s2));
  CK(t4a_runtime_kernel(k->rt, k_src, "slow_fill", &k->slow_fill));
  CK(t4a_runtime_kernel(k->rt, k_src, "add_one", &k->add_one));
  CK(t4a_runtime_kernel(k->rt, k_src, "slow_copy", &k->slow_copy));
  t4a_device_info info;
  CK(t4a_device_query(g_drv, 0, &info));
  k->threads = (unsigned)info.sm_count * 2048u;
}

static void kit_close(kit *k) {
  t4a_function_release(k->slow_fill);
  t4a_function_release(k->add_one);
  t4a_function_release(k->slow_copy);
  CK(t4a_stream_destroy(k->rt, k->s2));
  CK(t4a_runtime_close(k->rt));
}

static void fill_on(kit *k, t4a_buffer *b, unsigned long long spin) {
  unsigned v = 11;
  t4a_arg a[4] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&k->threads, 4), t4a_arg_scalar(&v, 4),
                  t4a_arg_scalar(&spin, 8)};
  CK(t4a_runtime_launch_on(k->rt, NULL, k->slow_fill, (k->threads + 255) / 256, 256, a, 4));
}

static void test_copy_compute_overlap(void **state) {
  (void)state;
  kit k;
  kit_open(&k);
  const size_t bytes = (size_t)(g_fake != NULL ? 8 : 256) << 20;
  const unsigned words = (unsigned)(bytes / 4);
  unsigned *host = malloc(bytes), *back = malloc(bytes);
  assert_non_null(host);
  assert_non_null(back);
  for (unsigned i = 0; i < words; i++) host[i] = i * 2654435761u;
  memset(back, 0, bytes);
  t4a_buffer *dst = NULL, *fill = NULL;
  CK(t4a_runtime_buffer(k.rt, bytes, &dst));
  CK(t4a_runtime_buffer(k.rt, (size_t)k.threads * 4, &fill));
  /* The upload alone, then a kernel calibrated to last about as long. */
  CK(t4a_runtime_upload_on(k.rt, k.s2, dst, 0, host, bytes)); /* warm */
  CK(t4a_stream_sync(k.rt, k.s2));
  double t0 = now();
  CK(t4a_runtime_upload_on(k.rt, k.s2, dst, 0, host, bytes));
  CK(t4a_stream_sync(k.rt, k.s2));
  double up = now() - t0;
  unsigned long long spin = 1000000ull;
  fill_on(&k, fill, spin);
  CK(t4a_runtime_sync(k.rt));
  t0 = now();
  fill_on(&k, fill, spin);
  CK(t4a_runtime_sync(k.rt));
  double k0 = now() - t0;
  spin = (unsigned long long)((double)spin * up / k0);
  t0 = now();
  fill_on(&k, fill, spin);
  CK(t4a_runtime_sync(k.rt));
  double kt = now() - t0;
  /* Overlapped: kernel on stream 1, upload on stream 2, stream 1 waits, add_one on stream 1. */
  t4a_counter_values c1a, c1b;
  t4a_lane_stats(t4a_runtime_lane(k.rt), &c1a);
  t0 = now();
  fill_on(&k, fill, spin);
  CK(t4a_runtime_upload_on(k.rt, k.s2, dst, 0, host, bytes));
  CK(t4a_stream_wait(k.rt, NULL, k.s2));
  t4a_arg a[2] = {t4a_arg_buffer(dst, 0), t4a_arg_scalar(&words, 4)};
  CK(t4a_runtime_launch_on(k.rt, NULL, k.add_one, (words + 255) / 256, 256, a, 2));
  CK(t4a_runtime_sync(k.rt));
  double ov = now() - t0;
  t4a_lane_stats(t4a_runtime_lane(k.rt), &c1b);
  assert_int_equal(c1b.host_waits - c1a.host_waits, 1); /* the one sync: no hidden host wait */
  assert_int_equal(c1b.cross_stream_waits - c1a.cross_stream_waits, 1);
  CK(t4a_runtime_download(k.rt, dst, 0, back, bytes));
  for (unsigned i = 0; i < words; i++) {
    if (back[i] != host[i] + 1u) fail_msg("word %u is %u, expected %u", i, back[i], host[i] + 1u);
  }
  unsigned *fb = malloc((size_t)k.threads * 4);
  assert_non_null(fb);
  CK(t4a_runtime_download(k.rt, fill, 0, fb, (size_t)k.threads * 4));
  for (unsigned i = 0; i < k.threads; i++) assert_int_equal(fb[i], 11u + i);
  if (g_fake != NULL) assert_int_equal(t4a_fake_ordering_violations(g_fake), 0);
  double longer = up > kt ? up : kt;
  printf("overlap (one run each, information only; bench/overlap_bench has the paired figure): "
         "upload %.2f ms, kernel %.2f ms, overlapped %.2f ms = %.3f x the longer, serial would be "
         "about %.2f ms\n",
         up * 1e3, kt * 1e3, ov * 1e3, ov / longer, (up + kt) * 1e3);
  free(fb);
  free(host);
  free(back);
  t4a_buffer_release(dst);
  t4a_buffer_release(fill);
  kit_close(&k);
}

/* The order that makes reuse safe, shown on the hardware: without it the upload on stream 1
 * (issued right after the release, into the same block) lands before the slow kernel on stream 2
 * reads, and the kernel copies the new values. */
static void test_release_while_another_stream_reads(void **state) {
  (void)state;
  kit k;
  kit_open(&k);
  const unsigned n = k.threads;
  const size_t bytes = (size_t)n * 4;
  unsigned *old = malloc(bytes), *fresh = malloc(bytes), *back = malloc(bytes);
  assert_non_null(old);
  assert_non_null(fresh);
  assert_non_null(back);
  for (unsigned i = 0; i < n; i++) {
    old[i] = 0x1000000u + i;
    fresh[i] = 0xF0000000u + i;
  }
  t4a_buffer *x = NULL, *out = NULL;
  CK(t4a_runtime_buffer(k.rt, bytes, &x));
  CK(t4a_runtime_buffer(k.rt, bytes, &out));
  CK(t4a_runtime_upload(k.rt, x, 0, old, bytes));
  CK(t4a_runtime_sync(k.rt)); /* stream 1's epoch lets x go: the release below is its last */
  CK(t4a_stream_wait(k.rt, k.s2, NULL));
  unsigned long long spin = 200000000ull; /* ~0.1 s at 2 GHz */
  t4a_arg a[4] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(out, 0), t4a_arg_scalar(&n, 4),
                  t4a_arg_scalar(&spin, 8)};
  CK(t4a_runtime_launch_on(k.rt, k.s2, k.slow_copy, (n + 255) / 256, 256, a, 4));
  t4a_devptr block = t4a_buffer_devptr(x);
  t4a_buffer_release(x);
  t4a_buffer *y = NULL;
  CK(t4a_runtime_buffer(k.rt, bytes, &y));
  assert_true(t4a_buffer_devptr(y) == block); /* the reuse cache handed the same block back */
  CK(t4a_runtime_upload(k.rt, y, 0, fresh, bytes));
  CK(t4a_runtime_download_on(k.rt, k.s2, out, 0, back, bytes));
  for (unsigned i = 0; i < n; i++) {
    if (back[i] != old[i]) fail_msg("out[%u] = %#x: the kernel read the reused block", i, back[i]);
  }
  CK(t4a_runtime_download(k.rt, y, 0, back, bytes));
  for (unsigned i = 0; i < n; i++) assert_int_equal(back[i], fresh[i]);
  t4a_counter_values c;
  t4a_lane_stats(t4a_runtime_lane(k.rt), &c);
  assert_int_equal(c.cross_stream_releases, 1);
  if (g_fake != NULL) assert_int_equal(t4a_fake_ordering_violations(g_fake), 0);
  t4a_counter_values c2;
  t4a_lane_stats(t4a_stream_lane(k.s2), &c2);
  assert_true(c2.cross_stream_events >= 1); /* the marker stream 1 waited for before the reuse */
  printf("cross-stream release: %llu marker events on stream 2, %llu cross-stream waits on "
         "stream 1\n",
         (unsigned long long)c2.cross_stream_events, (unsigned long long)c.cross_stream_waits);
  free(old);
  free(fresh);
  free(back);
  t4a_buffer_release(y);
  t4a_buffer_release(out);
  kit_close(&k);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_priority_range),
      cmocka_unit_test(test_copy_compute_overlap),
      cmocka_unit_test(test_release_while_another_stream_reads),
  };
  if (argc > 1 && strcmp(argv[1], "--fake") == 0) {
    t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
    o.mem_bytes = (uint64_t)1 << 30;
    if (t4a_fake_create(&o, &g_fake) != T4A_OK || t4a_fake_driver(g_fake, &g_drv) != T4A_OK) {
      return 1;
    }
    t4a_host_kernel_register(g_fake, &t4a_hk_spin_fill, "slow_fill", NULL);
    t4a_host_kernel_register(g_fake, &t4a_hk_add_one, NULL, NULL);
    t4a_host_kernel_register(g_fake, &t4a_hk_slow_copy, NULL, NULL);
    int rc = _cmocka_run_group_tests("streams_gpu_test --fake", tests,
                                     sizeof tests / sizeof tests[0], NULL, NULL);
    t4a_driver_release(g_drv);
    t4a_fake_destroy(g_fake);
    return rc;
  }
  return t4a_gpu_test_main("streams_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
