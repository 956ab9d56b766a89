/* Self-tests of the fake driver: faults: illegal addresses (sticky), use after free, out of
 * memory. Its table called raw, as t4a would call it (fixture and shared kernels:
 * fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

/* ---- faults ------------------------------------------------------------------------------- */

static void test_illegal_address_from_copy_is_sticky(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent ev;
  CK(t->cuEventCreate(&ev, 0));
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 64, x->s));
  char out[128];
  CK(t->cuMemcpyDtoHAsync(out, d, 128, x->s)); /* enqueued fine: checked when it runs */
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuMemsetD8Async(d, 1, 64, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x->fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Every later call under the context returns it, and queries of its streams and events. */
  CUdeviceptr p;
  assert_int_equal(t->cuMemAlloc(&p, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream s2;
  assert_int_equal(t->cuStreamCreate(&s2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuEventSynchronize(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuMemFreeAsync(d, x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Device queries are not under a context. */
  int n;
  CK(t->cuDeviceGetCount(&n));
  /* Recovery: reset the primary context. */
  CK(t->cuDevicePrimaryCtxReset(0));
  x->s = NULL;
  CK(t->cuDevicePrimaryCtxRelease(0));
  assert_true(t4a_fake_nothing_live(x->fake));
}

static const size_t k_oob_params[] = {8, 8};

static void k_oob(t4a_fake_launch *l, void **params, void *user) {
  int *ran_after_fault = user;
  CUdeviceptr p;
  uint64_t bytes;
  memcpy(&p, params[0], 8);
  memcpy(&bytes, params[1], 8);
  if (t4a_fake_deref(l, p, (size_t)bytes) != NULL) return;
  /* After the first fault every deref answers NULL. */
  if (t4a_fake_deref(l, p, 1) == NULL) (*ran_after_fault)++;
}

static void test_illegal_address_from_kernel(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  int after = 0;
  t4a_fake_register_kernel(x->fake, "oob", 2, k_oob_params, k_oob, &after);
  CUmodule m = load_kernels(x, (const char *const[]){"oob"}, 1);
  CUfunction f = get_fn(x, m, "oob");
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 100));
  uint64_t ok_bytes = 100, bad_bytes = 101;
  void *args_ok[] = {&d, &ok_bytes};
  void *args_bad[] = {&d, &bad_bytes};
  CK(launch1(x, f, x->s, args_ok));
  CK(t->cuStreamSynchronize(x->s));
  CK(launch1(x, f, x->s, args_bad));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(after, 1);
  assert_int_equal(t->cuModuleUnload(m), CUDA_ERROR_ILLEGAL_ADDRESS);
}

static void test_free_then_use(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 32, x->s));
  CK(t->cuMemFreeAsync(d, x->s));
  /* The free is queued: a second one is a double free. */
  assert_int_equal(t->cuMemFreeAsync(d, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFreeAsync(d + 8, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFreeAsync(0x1234, x->s), CUDA_ERROR_INVALID_VALUE);
  /* Still readable until the free runs... */
  assert_non_null(t4a_fake_host_view(x->fake, d, 32));
  char buf[32] = {0};
  CK(t->cuMemcpyHtoDAsync(d, buf, 32, x->s)); /* ...but this use comes after the free */
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_null(t4a_fake_host_view(x->fake, d, 32));
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.device_allocs, 0);
}

static void test_out_of_memory(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.mem_bytes = 1u << 20;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUdeviceptr a, b, c;
  CK(t->cuMemAllocAsync(&a, 768u << 10, x.s));
  assert_int_equal(t->cuMemAllocAsync(&b, 512u << 10, x.s), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(t->cuMemAlloc(&b, 512u << 10), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b, total_b;
  CK(t->cuMemGetInfo(&free_b, &total_b));
  assert_int_equal(total_b, 1u << 20);
  assert_int_equal(free_b, 256u << 10);
  CK(t->cuMemAlloc(&c, 256u << 10));
  /* The async free returns the memory when it runs, not before. */
  CK(t->cuMemFreeAsync(a, x.s));
  assert_int_equal(t->cuMemAllocAsync(&b, 512u << 10, x.s), CUDA_ERROR_OUT_OF_MEMORY);
  CK(t->cuStreamSynchronize(x.s));
  CK(t->cuMemAllocAsync(&b, 512u << 10, x.s));
  assert_true(b > a); /* addresses are never reused */
  assert_int_equal(t->cuMemAlloc(&c, 0), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFreeAsync(b, x.s));
  CK(t->cuMemFree(c));
  CK(t->cuStreamSynchronize(x.s));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test_setup_teardown(test_illegal_address_from_copy_is_sticky, setup, teardown),
cmocka_unit_test_setup_teardown(test_illegal_address_from_kernel, setup, teardown),
cmocka_unit_test_setup_teardown(test_free_then_use, setup, teardown),
cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
