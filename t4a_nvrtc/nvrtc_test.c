/* The NVRTC loader, against the real libnvrtc of the machine (NVRTC runs on the CPU). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "testing/lsan/nvrtc_suppressions.h"

static void test_loads_nvrtc_13(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  int major = 0, minor = -1;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  assert_true(major >= 12);
  assert_true(minor >= 0);
  /* Picked by exact soname, never the .alt library. */
  assert_null(strstr(t4a_nvrtc_lib_origin(lib), ".alt"));
  assert_non_null(strstr(t4a_nvrtc_lib_origin(lib), "libnvrtc.so."));
  assert_true(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_CUBIN);
  int archs[128];
  size_t n = 0;
  assert_int_equal(t4a_nvrtc_lib_supported_archs(lib, archs, 128, &n), T4A_OK);
  int has90 = 0;
  for (size_t i = 0; i < n && i < 128; i++) has90 |= archs[i] == 90;
  assert_true(has90);
  t4a_nvrtc_lib_retain(lib);
  t4a_nvrtc_lib_release(lib);
  t4a_nvrtc_lib_release(lib);
  t4a_nvrtc_lib_release(NULL);
}

static void test_missing_library_is_typed(void **state) {
  (void)state;
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = "/nonexistent/libnvrtc.so.13";
  t4a_nvrtc_lib *lib = (t4a_nvrtc_lib *)1;
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_NVRTC_NOT_FOUND);
  assert_null(lib);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/nonexistent/libnvrtc.so.13"));
}

static void test_library_without_nvrtc_symbols(void **state) {
  (void)state;
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = "libm.so.6"; /* loads, but is not NVRTC */
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_NVRTC_SYMBOL_MISSING);
  assert_null(lib);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "nvrtcGetErrorString");
}

static int g_fail_point = -1;
static int fail_point(t4a_fault_point p, void *user) {
  (void)user;
  return (int)p == g_fail_point;
}

static void test_fault_points_are_typed(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  g_fail_point = T4A_FAULT_DLOPEN;
  t4a_fault_set_hook(fail_point, NULL);
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_NVRTC_NOT_FOUND);
  g_fail_point = T4A_FAULT_DLSYM;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_NVRTC_SYMBOL_MISSING);
  g_fail_point = T4A_FAULT_HOST_MALLOC;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_HOST_OUT_OF_MEMORY);
  t4a_fault_set_hook(NULL, NULL);
  assert_null(lib);
  assert_int_equal(t4a_nvrtc_lib_open(NULL, NULL), T4A_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loads_nvrtc_13),
      cmocka_unit_test(test_missing_library_is_typed),
      cmocka_unit_test(test_library_without_nvrtc_symbols),
      cmocka_unit_test(test_fault_points_are_typed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
