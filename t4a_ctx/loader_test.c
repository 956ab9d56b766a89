/* The driver loader: dlopen failures, the catalogue, tables that are incomplete or too old. */
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
#include "testing/fake_driver/fake_driver.h"

static void test_missing_library(void **state) {
  (void)state;
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = "/nonexistent/libcuda.so.1";
  t4a_driver *d = (t4a_driver *)1;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_NOT_FOUND);
  assert_null(d);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/nonexistent/libcuda.so.1"));
  assert_string_equal(e.entry, "dlopen");
}

static void test_library_without_resolver_is_too_old(void **state) {
  (void)state;
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = "libm.so.6"; /* loads, but has no cuGetProcAddress_v2 */
  t4a_driver *d = NULL;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_TOO_OLD);
  assert_null(d);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "cuGetProcAddress_v2"));
  assert_non_null(strstr(e.message, "12.0"));
}

static int g_point = -1;
static int fail_point(t4a_fault_point p, void *user) {
  (void)user;
  return (int)p == g_point;
}

static void test_fault_points(void **state) {
  (void)state;
  t4a_driver *d = NULL;
  t4a_fault_set_hook(fail_point, NULL);
  /* A library that loads (libm), so only the simulated dlopen failure can refuse it. */
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = "libm.so.6";
  g_point = T4A_FAULT_DLOPEN;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_NOT_FOUND);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "simulated failure"));
  g_point = T4A_FAULT_DLSYM;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_TOO_OLD);
  g_point = T4A_FAULT_HOST_MALLOC;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_HOST_OUT_OF_MEMORY);
  t4a_fault_set_hook(NULL, NULL);
  assert_null(d);
  assert_int_equal(t4a_driver_open(NULL, NULL), T4A_INVALID_ARGUMENT);
}

/* The process-wide load happens once; its outcome (here, on a machine without a driver, the
 * failure) is remembered with its detail. */
static void test_default_driver_outcome_is_stable(void **state) {
  (void)state;
  t4a_driver *a = NULL, *b = NULL;
  t4a_status s1 = t4a_driver_get_default(&a);
  t4a_error e1;
  t4a_error_last(&e1);
  t4a_status s2 = t4a_driver_get_default(&b);
  assert_int_equal(s1, s2);
  if (s1 == T4A_OK) {
    assert_ptr_equal(a, b);
    assert_true(t4a_driver_version(a) >= T4A_DRIVER_MIN_VERSION);
  } else {
    assert_null(a);
    t4a_error e2;
    t4a_error_last(&e2);
    assert_string_equal(e1.message, e2.message);
  }
  t4a_driver_release(a);
  t4a_driver_release(b);
}

/* The optional entries: the two capabilities, and the entries no library code calls yet (required
 * means used: scripts/check_catalog.py; the fake and the tests may call them). */
static const char *const k_optional[] = {
    "cuFuncGetParamInfo", "cuStreamGetCaptureInfo", "cuCtxSynchronize",  "cuCtxGetDevice",
    "cuStreamCreate",     "cuStreamGetCtx",         "cuStreamGetFlags",
    "cuMemAllocAsync",    "cuMemAlloc",             "cuMemFree",
    "cuMemcpyPeerAsync",  "cuMemcpyAsync",          "cuPointerGetAttribute", "cuModuleLoadData",
    "cuLaunchKernelEx",   "cuGraphGetNodes",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuOccupancyMaxPotentialBlockSize",
    "cuOccupancyMaxPotentialClusterSize",
};
enum { NUM_OPTIONAL = sizeof k_optional / sizeof k_optional[0] };

static int listed_optional(const char *name) {
  for (size_t i = 0; i < NUM_OPTIONAL; i++) {
    if (strcmp(k_optional[i], name) == 0) return 1;
  }
  return 0;
}

static void test_catalogue(void **state) {
  (void)state;
  assert_true(t4a_driver_entry_count > 80);
  int optional = 0;
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    const t4a_driver_entry_info *e = &t4a_driver_entries[i];
    if (e->required == listed_optional(e->name)) {
      fail_msg("%s is %s in the catalogue", e->name, e->required ? "REQUIRED" : "OPTIONAL");
    }
    assert_true(strncmp(e->name, "cu", 2) == 0);
    assert_true(e->version >= 2000 && e->version <= T4A_DRIVER_MIN_VERSION + 100);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(e->name, t4a_driver_entries[j].name);
    optional += !e->required;
    /* The traps measured on the CUDA 13 driver: pin the signature cuda.h declares. */
    if (strcmp(e->name, "cuCtxSynchronize") == 0) assert_int_equal(e->version, 2000);
    if (strcmp(e->name, "cuCtxGetDevice") == 0) assert_int_equal(e->version, 2000);
    if (strcmp(e->name, "cuStreamGetCtx") == 0) assert_int_equal(e->version, 9020);
    if (strcmp(e->name, "cuMemAlloc") == 0) assert_int_equal(e->version, 3020);
    if (strcmp(e->name, "cuFuncGetParamInfo") == 0) assert_false(e->required);
    if (strcmp(e->name, "cuStreamGetCaptureInfo") == 0) {
      assert_false(e->required); /* launch chains only */
      assert_int_equal(e->version, 12030);
    }
  }
  assert_int_equal(optional, NUM_OPTIONAL);
}

static void test_fake_table_resolves_every_entry(void **state) {
  (void)state;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  const t4a_driver_table *t = t4a_fake_table(fake);
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    void *slot = *(void *const *)((const char *)t + t4a_driver_entries[i].offset);
    if (slot == NULL) fail_msg("fake driver lacks %s", t4a_driver_entries[i].name);
  }
  t4a_driver *d = NULL;
  assert_int_equal(t4a_fake_driver(fake, &d), T4A_OK);
  assert_int_equal(t4a_driver_version(d), 13000);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_CAPTURE_INFO);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_LAUNCH_EX);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_OCCUPANCY);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_CLUSTER_OCCUPANCY);
  assert_string_equal(t4a_driver_origin(d), "fake");
  t4a_driver_release(d);
  t4a_fake_destroy(fake);
}

static void test_table_missing_required_entry(void **state) {
  (void)state;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  t4a_driver_table t = *t4a_fake_table(fake);
  t.cuMemFreeAsync = NULL;
  t4a_driver *d = (t4a_driver *)1;
  assert_int_equal(t4a_driver_create_from_table(&t, "partial", NULL, NULL, &d),
                   T4A_DRIVER_SYMBOL_MISSING);
  assert_null(d);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemFreeAsync");
  assert_non_null(strstr(e.message, "11020"));
  /* An optional entry may be missing: it only clears a capability. */
  t = *t4a_fake_table(fake);
  t.cuFuncGetParamInfo = NULL;
  assert_int_equal(t4a_driver_create_from_table(&t, "no-param-info", NULL, NULL, &d), T4A_OK);
  assert_false(t4a_driver_caps(d) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  t4a_driver_release(d);
  /* The launch-attribute and occupancy entries are capabilities too (an older driver). */
  t = *t4a_fake_table(fake);
  t.cuLaunchKernelEx = NULL;
  t.cuOccupancyMaxActiveBlocksPerMultiprocessor = NULL;
  t.cuOccupancyMaxPotentialClusterSize = NULL;
  assert_int_equal(t4a_driver_create_from_table(&t, "no-launch-ex", NULL, NULL, &d), T4A_OK);
  assert_int_equal(t4a_driver_caps(d) & (T4A_DRIVER_CAP_LAUNCH_EX | T4A_DRIVER_CAP_OCCUPANCY |
                                         T4A_DRIVER_CAP_CLUSTER_OCCUPANCY),
                   0);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  t4a_driver_release(d);
  t4a_fake_destroy(fake);
}

/* Every required entry refuses the load when missing, naming itself and its version; every
 * optional one (the entries no library code calls among them: cuMemAlloc, cuLaunchKernelEx...)
 * lets the driver open, and so does a table lacking all of them at once. */
static void test_each_entry_missing(void **state) {
  (void)state;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  int required = 0;
  t4a_driver_table none = *t4a_fake_table(fake);
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    const t4a_driver_entry_info *ei = &t4a_driver_entries[i];
    t4a_driver_table t = *t4a_fake_table(fake);
    *(void **)((char *)&t + ei->offset) = NULL;
    t4a_driver *d = (t4a_driver *)1;
    t4a_status st = t4a_driver_create_from_table(&t, "partial", NULL, NULL, &d);
    if (ei->required) {
      required++;
      if (st != T4A_DRIVER_SYMBOL_MISSING) fail_msg("a driver lacking %s opened", ei->name);
      assert_null(d);
      t4a_error e;
      t4a_error_last(&e);
      assert_string_equal(e.entry, ei->name);
      char version[16];
      snprintf(version, sizeof version, "%d", ei->version);
      assert_non_null(strstr(e.message, version));
    } else {
      if (st != T4A_OK) fail_msg("a driver lacking the optional %s was refused", ei->name);
      t4a_driver_release(d);
      *(void **)((char *)&none + ei->offset) = NULL;
    }
  }
  assert_int_equal(required, (int)t4a_driver_entry_count - NUM_OPTIONAL);
  t4a_driver *d = NULL;
  assert_int_equal(t4a_driver_create_from_table(&none, "no-optional", NULL, NULL, &d), T4A_OK);
  assert_int_equal(t4a_driver_caps(d), 0);
  assert_null(d->t.cuMemAlloc);
  assert_null(d->t.cuLaunchKernelEx);
  t4a_driver_release(d);
  t4a_fake_destroy(fake);
}

static void test_too_old_driver(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.driver_version = 11080;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  t4a_driver *d = NULL;
  assert_int_equal(t4a_fake_driver(fake, &d), T4A_DRIVER_TOO_OLD);
  assert_null(d);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "11.8"));
  assert_non_null(strstr(e.message, "12.0"));
  t4a_fake_destroy(fake);
}

static void test_init_failure_is_typed(void **state) {
  (void)state;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  t4a_fake_inject(fake, "cuInit", 0, 1, CUDA_ERROR_NO_DEVICE, 0);
  t4a_driver *d = NULL;
  assert_int_equal(t4a_fake_driver(fake, &d), T4A_NO_DEVICE);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuInit");
  assert_string_equal(e.code_name, "CUDA_ERROR_NO_DEVICE");
  assert_int_equal(e.code, 100);
  t4a_fake_destroy(fake);
}

static void test_result_mapping(void **state) {
  (void)state;
  assert_int_equal(t4a_status_from_cu(CUDA_SUCCESS), T4A_OK);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_OUT_OF_MEMORY), T4A_DEVICE_OUT_OF_MEMORY);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_NOT_READY), T4A_NOT_READY);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_ILLEGAL_ADDRESS), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_LAUNCH_FAILED), T4A_CONTEXT_LOST);
  /* Only a symbol lookup's CUDA_ERROR_NOT_FOUND means an unknown entry point (its call site says
   * which entry it was: test_not_found_means_unknown_entry_only_for_lookups). */
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_NOT_FOUND), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_INVALID_CONTEXT), T4A_INVALID_CONTEXT);
  assert_int_equal(t4a_status_from_cu(CUDA_ERROR_INVALID_VALUE), T4A_DRIVER_ERROR);
  assert_true(t4a_cu_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  assert_false(t4a_cu_is_sticky(CUDA_ERROR_OUT_OF_MEMORY));
  assert_false(t4a_cu_is_sticky(CUDA_ERROR_NOT_READY));
  /* OOM keeps the byte count; other failures do not invent one. */
  assert_int_equal(t4a_cu_fail(NULL, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", 4096),
                   T4A_DEVICE_OUT_OF_MEMORY);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.bytes, 4096);
  assert_int_equal(t4a_cu_fail(NULL, CUDA_ERROR_INVALID_VALUE, "cuMemAlloc", 4096),
                   T4A_DRIVER_ERROR);
  t4a_error_last(&e);
  assert_int_equal(e.bytes, 0);
}

/* CUDA_ERROR_NOT_FOUND is UNKNOWN_ENTRY_POINT only from a symbol lookup (cuModuleGetFunction, and
 * cuModuleGetGlobal were it used); from any other entry it is the driver error, with its code. */
static void test_not_found_means_unknown_entry_only_for_lookups(void **state) {
  (void)state;
  t4a_fake *fake = NULL;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  t4a_driver *d = NULL;
  assert_int_equal(t4a_fake_driver(fake, &d), T4A_OK);
  t4a_error e;
  /* Another entry: DRIVER_ERROR naming the entry and CUDA_ERROR_NOT_FOUND (500). */
  t4a_fake_inject(fake, "cuDeviceGetCount", 0, 1, CUDA_ERROR_NOT_FOUND, 0);
  int n = 0;
  assert_int_equal(T4A_CU(d, cuDeviceGetCount, &n), T4A_DRIVER_ERROR);
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_DRIVER_ERROR);
  assert_string_equal(e.entry, "cuDeviceGetCount");
  assert_int_equal(e.code, CUDA_ERROR_NOT_FOUND);
  assert_string_equal(e.code_name, "CUDA_ERROR_NOT_FOUND");
  assert_int_equal(t4a_cu_fail(d, CUDA_ERROR_NOT_FOUND, "cuStreamGetAttribute", 0),
                   T4A_DRIVER_ERROR);
  /* Quietly (a drop path): the same status. */
  t4a_fake_inject(fake, "cuDeviceGetCount", 0, 1, CUDA_ERROR_NOT_FOUND, 0);
  assert_int_equal(T4A_CU_QUIET(d, cuDeviceGetCount, &n), T4A_DRIVER_ERROR);
  /* A symbol lookup: UNKNOWN_ENTRY_POINT, with the code kept. */
  t4a_fake_inject(fake, "cuModuleGetFunction", 0, 1, CUDA_ERROR_NOT_FOUND, 0);
  CUfunction fn = NULL;
  assert_int_equal(T4A_CU(d, cuModuleGetFunction, &fn, NULL, "missing"),
                   T4A_UNKNOWN_ENTRY_POINT);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuModuleGetFunction");
  assert_int_equal(e.code, CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t4a_cu_fail(d, CUDA_ERROR_NOT_FOUND, "cuModuleGetGlobal", 0),
                   T4A_UNKNOWN_ENTRY_POINT);
  /* Other results of a lookup keep their own mapping. */
  assert_int_equal(t4a_cu_fail(d, CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction", 0),
                   T4A_DRIVER_ERROR);
  assert_int_equal(t4a_fake_injected(fake), 3);
  t4a_driver_release(d);
  t4a_fake_destroy(fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_library),
      cmocka_unit_test(test_library_without_resolver_is_too_old),
      cmocka_unit_test(test_fault_points),
      cmocka_unit_test(test_default_driver_outcome_is_stable),
      cmocka_unit_test(test_catalogue),
      cmocka_unit_test(test_fake_table_resolves_every_entry),
      cmocka_unit_test(test_table_missing_required_entry),
      cmocka_unit_test(test_each_entry_missing),
      cmocka_unit_test(test_too_old_driver),
      cmocka_unit_test(test_init_failure_is_typed),
      cmocka_unit_test(test_result_mapping),
      cmocka_unit_test(test_not_found_means_unknown_entry_only_for_lookups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
