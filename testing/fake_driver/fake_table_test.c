/* Self-tests of the fake driver: the table: made into a driver, not initialised, error names,
 * failure injection, bad arguments. Its table called raw, as t4a would call it (fixture and shared
 * kernels: fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

/* ---- the table and the loader ------------------------------------------------------------- */

static void test_driver_from_table(void **state) {
  (void)state;
  t4a_fake *fake;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  t4a_fake *second;
  assert_int_equal(t4a_fake_create(NULL, &second), T4A_INVALID_ARGUMENT);
  t4a_driver *drv;
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_OK);
  assert_int_equal(t4a_driver_version(drv), 13000);
  assert_true(t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  assert_string_equal(t4a_driver_origin(drv), "fake");
  t4a_driver_release(drv);
  /* The loader called cuDriverGetVersion and cuInit through the table. */
  assert_int_equal(t4a_fake_calls(fake, "cuInit"), 1);
  assert_true(t4a_fake_calls(fake, NULL) >= 2);
  t4a_fake_destroy(fake);

  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.omit_param_info = 1;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  assert_null(t4a_fake_table(fake)->cuFuncGetParamInfo);
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_OK);
  assert_false(t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  t4a_driver_release(drv);
  t4a_fake_destroy(fake);

  o.omit_param_info = 0;
  o.driver_version = 11080;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_DRIVER_TOO_OLD);
  t4a_fake_destroy(fake);
}

static void test_not_initialized_and_error_names(void **state) {
  (void)state;
  t4a_fake *fake;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  const t4a_driver_table *t = t4a_fake_table(fake);
  int n = -1, v = 0;
  assert_int_equal(t->cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext c;
  assert_int_equal(t->cuDevicePrimaryCtxRetain(&c, 0), CUDA_ERROR_NOT_INITIALIZED);
  CK(t->cuDriverGetVersion(&v));
  assert_int_equal(v, 13000);

  const char *s = NULL;
  CK(t->cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
  CK(t->cuGetErrorName(CUDA_SUCCESS, &s));
  assert_string_equal(s, "CUDA_SUCCESS");
  CK(t->cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &s));
  assert_string_equal(s, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
  CK(t->cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  assert_string_equal(s, "illegal address");
  assert_int_equal(t->cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_null(s);
  assert_int_equal(t->cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);

  /* Neither injection nor a sticky error touches the error-name calls; they still count. */
  t4a_fake_inject(fake, NULL, 0, UINT64_MAX, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
  assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(t->cuInit(0), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_calls(fake, "cuGetErrorName"), 6);
  t4a_fake_clear_injections(fake);
  CK(t->cuInit(0));
  CK(t->cuDeviceGetCount(&n));
  assert_int_equal(n, 1);
  /* A table call after the fake is gone answers, it does not crash. */
  PFN_cuInit_v2000 init = t->cuInit;
  t4a_fake_destroy(fake);
  assert_int_equal(init(0), CUDA_ERROR_DEINITIALIZED);
}

/* ---- failure injection -------------------------------------------------------------------- */

static void test_injection(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr p[4];
  uint64_t before = t4a_fake_calls(x->fake, "cuMemAlloc");
  t4a_fake_inject(x->fake, "cuMemAlloc", 1, 2, CUDA_ERROR_OUT_OF_MEMORY, 0);
  CK(t->cuMemAlloc(&p[0], 8));
  assert_int_equal(t->cuMemAlloc(&p[1], 8), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(t->cuMemAlloc(&p[1], 8), CUDA_ERROR_OUT_OF_MEMORY);
  CK(t->cuMemAlloc(&p[1], 8));
  assert_int_equal(t4a_fake_injected(x->fake), 2);
  assert_int_equal(t4a_fake_calls(x->fake, "cuMemAlloc") - before, 4);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.device_allocs, 2);
  t4a_fake_clear_injections(x->fake);

  /* Any entry: the next call, whatever it is, fails. */
  t4a_fake_inject(x->fake, NULL, 0, 1, CUDA_ERROR_LAUNCH_TIMEOUT, 0);
  int n;
  assert_int_equal(t->cuDeviceGetCount(&n), CUDA_ERROR_LAUNCH_TIMEOUT);
  CK(t->cuDeviceGetCount(&n));
  t4a_fake_clear_injections(x->fake);

  /* Skip counts calls of that entry only. */
  t4a_fake_inject(x->fake, "cuStreamQuery", 2, 1, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuStreamQuery(x->s));
  CK(t->cuDeviceGetCount(&n));
  CK(t->cuStreamQuery(x->s));
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_UNKNOWN);
  CK(t->cuStreamQuery(x->s));
  t4a_fake_clear_injections(x->fake);

  /* after_enqueue: the copy is queued, yet the call fails. */
  char in[8] = "abcdefg", out[8] = {0};
  t4a_fake_inject(x->fake, "cuMemcpyHtoDAsync", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t->cuMemcpyHtoDAsync(p[0], in, 8, x->s), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  CK(t->cuMemcpyDtoHAsync(out, p[0], 8, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_string_equal(out, "abcdefg");
  /* Without after_enqueue nothing is queued. */
  t4a_fake_inject(x->fake, "cuMemcpyHtoDAsync", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t->cuMemcpyHtoDAsync(p[0], in, 8, x->s), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  /* after_enqueue on an entry that enqueues nothing fails before acting. */
  t4a_fake_inject(x->fake, "cuStreamCreate", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  CUstream s2;
  assert_int_equal(t->cuStreamCreate(&s2, 0), CUDA_ERROR_UNKNOWN);
  t4a_fake_clear_injections(x->fake);
  assert_int_equal(t4a_fake_injected(x->fake), 7);

  /* An unknown name never fires. */
  t4a_fake_inject(x->fake, "cuNoSuchEntry", 0, 10, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuMemFree(p[0]));
  CK(t->cuMemFree(p[1]));
  t4a_fake_clear_injections(x->fake);

  t4a_fake_reset_calls(x->fake);
  assert_int_equal(t4a_fake_calls(x->fake, NULL), 0);
  CK(t->cuDeviceGetCount(&n));
  assert_int_equal(t4a_fake_calls(x->fake, NULL), 1);
  assert_int_equal(t4a_fake_calls(x->fake, "cuDeviceGetCount"), 1);
  fx_clean(x);
}

static void test_bad_arguments_do_not_crash(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  assert_int_equal(t->cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemAlloc(NULL, 8), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemGetInfo(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuStreamDestroy((CUstream)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuEventRecord((CUevent)(uintptr_t)0xdeadbeef, x->s),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuStreamWaitEvent(x->s, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuMemcpyHtoDAsync(0, "x", 1, x->s), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  assert_int_equal(t->cuMemcpyHtoDAsync(d, NULL, 1, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemcpyDtoHAsync((void *)(uintptr_t)d, d, 1, x->s),
                   CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemcpyHtoDAsync(d, "x", 0, x->s)); /* zero bytes: nothing to do */
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  /* A stream of the context passed where a handle of another kind is expected. */
  assert_int_equal(t->cuEventQuery((CUevent)x->s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuModuleUnload((CUmodule)x->ctx), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuGraphLaunch(NULL, x->s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, d),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemPoolSetAccess(NULL, NULL, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuFuncGetParamInfo(NULL, 0, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuLaunchKernelEx(NULL, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuGraphGetNodes(NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuStreamEndCapture(x->s, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_null(t4a_fake_host_view(x->fake, d, 9));
  assert_non_null(t4a_fake_host_view(x->fake, d, 8));
  CK(t->cuMemFree(d));
  fx_clean(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test(test_driver_from_table),
cmocka_unit_test(test_not_initialized_and_error_names),
cmocka_unit_test_setup_teardown(test_injection, setup, teardown),
cmocka_unit_test_setup_teardown(test_bad_arguments_do_not_crash, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
