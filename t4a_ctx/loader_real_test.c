/* The real loader path — dlopen, cuGetProcAddress_v2, version checks, teardown of a partial load —
 * against a stand-in libcuda (testing/fake_libcuda) whose path is argv[1]. */
#define _GNU_SOURCE
#include <dlfcn.h>
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

static const char *g_path;

typedef int (*num_fn)(void);
typedef const char *(*req_fn)(int, int *, unsigned long long *);
typedef void (*reset_fn)(void);

static void *lib(void) {
  void *h = dlopen(g_path, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  return h;
}

static t4a_status open_it(t4a_driver **out) {
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = g_path;
  return t4a_driver_open(&o, out);
}

static int setup(void **state) {
  (void)state;
  unsetenv("T4A_FAKE_LIBCUDA_VERSION");
  unsetenv("T4A_FAKE_LIBCUDA_MISSING");
  unsetenv("T4A_FAKE_LIBCUDA_TOO_OLD");
  unsetenv("T4A_FAKE_LIBCUDA_STUB");
  void *h = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  ((reset_fn)dlsym(h, "t4a_fake_libcuda_reset"))();
  dlclose(h);
  return 0;
}

/* Every catalogue entry is asked for once, by base name, at its pinned version, default flags. */
static void test_every_entry_at_its_pinned_version(void **state) {
  (void)state;
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_OK);
  assert_int_equal(t4a_driver_version(d), 13000);
  assert_string_equal(t4a_driver_origin(d), g_path);
  assert_true(t4a_driver_caps(d) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  void *h = lib();
  int n = ((num_fn)dlsym(h, "t4a_fake_libcuda_num_requests"))();
  req_fn req = (req_fn)dlsym(h, "t4a_fake_libcuda_request");
  assert_int_equal((size_t)n, t4a_driver_entry_count);
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    int version = 0;
    unsigned long long flags = 1;
    const char *name = req((int)i, &version, &flags);
    assert_non_null(name);
    assert_string_equal(name, t4a_driver_entries[i].name);
    assert_int_equal(version, t4a_driver_entries[i].version);
    assert_int_equal(flags, CU_GET_PROC_ADDRESS_DEFAULT);
  }
  assert_int_equal(((num_fn)dlsym(h, "t4a_fake_libcuda_init_calls"))(), 1);
  dlclose(h);
  t4a_driver_release(d);
}

static void test_missing_required_entry(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_MISSING", "cuMemFreeAsync", 1);
  t4a_driver *d = (t4a_driver *)1;
  assert_int_equal(open_it(&d), T4A_DRIVER_SYMBOL_MISSING);
  assert_null(d);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemFreeAsync");
  assert_non_null(strstr(e.message, "11020"));
  assert_non_null(strstr(e.message, g_path));
}

static void test_missing_optional_entry_is_a_capability(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_MISSING", "cuFuncGetParamInfo", 1);
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_OK);
  assert_false(t4a_driver_caps(d) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  assert_null(d->t.cuFuncGetParamInfo);
  t4a_driver_release(d);
}

static void test_entry_needing_newer_driver(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_TOO_OLD", "cuGraphExecUpdate", 1);
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_DRIVER_TOO_OLD);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuGraphExecUpdate");
  assert_non_null(strstr(e.message, "12000"));
}

/* An entry no library code calls is optional (required means used): a driver without it, or
 * with only an older version of it, opens with the slot NULL. */
static void test_missing_unused_entry_opens(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_MISSING", "cuMemAlloc", 1);
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_OK);
  assert_null(d->t.cuMemAlloc);
  assert_non_null(d->t.cuMemAllocFromPoolAsync);
  t4a_driver_release(d);
  unsetenv("T4A_FAKE_LIBCUDA_MISSING");
  setenv("T4A_FAKE_LIBCUDA_TOO_OLD", "cuLaunchKernelEx", 1);
  d = NULL;
  assert_int_equal(open_it(&d), T4A_OK);
  assert_null(d->t.cuLaunchKernelEx);
  assert_non_null(d->t.cuLaunchKernel);
  t4a_driver_release(d);
}

static void test_old_driver_version(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_VERSION", "11080", 1);
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_DRIVER_TOO_OLD);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "11.8"));
  /* A caller may demand more than t4a's own minimum. */
  unsetenv("T4A_FAKE_LIBCUDA_VERSION");
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = g_path;
  o.min_version = 13010;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_TOO_OLD);
  assert_null(d);
}

static void test_stub_library_is_named(void **state) {
  (void)state;
  setenv("T4A_FAKE_LIBCUDA_STUB", "1", 1);
  t4a_driver *d = NULL;
  assert_int_equal(open_it(&d), T4A_DRIVER_NOT_FOUND);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "stub"));
  assert_string_equal(e.code_name, "CUDA_ERROR_STUB_LIBRARY");
}

/* The toolkit's own stub, where the image has one. */
static void test_toolkit_stub(void **state) {
  (void)state;
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    skip();
    return;
  }
  dlclose(h);
  t4a_driver_options o = T4A_DRIVER_OPTIONS_INIT;
  o.library_path = stub;
  t4a_driver *d = NULL;
  assert_int_equal(t4a_driver_open(&o, &d), T4A_DRIVER_NOT_FOUND);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "stub"));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH_TO_FAKE_LIBCUDA\n", argv[0]);
    return 2;
  }
  g_path = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_every_entry_at_its_pinned_version, setup),
      cmocka_unit_test_setup(test_missing_required_entry, setup),
      cmocka_unit_test_setup(test_missing_optional_entry_is_a_capability, setup),
      cmocka_unit_test_setup(test_entry_needing_newer_driver, setup),
      cmocka_unit_test_setup(test_missing_unused_entry_opens, setup),
      cmocka_unit_test_setup(test_old_driver_version, setup),
      cmocka_unit_test_setup(test_stub_library_is_named, setup),
      cmocka_unit_test_setup(test_toolkit_stub, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
