/* Failure sweeps: fail the Nth NVRTC call (through a wrapped table), the Nth host allocation and
 * the Nth file operation (through the fault hook), for N = 0, 1, 2, ... until the operation
 * succeeds, over an uncached compile, a cached compile that misses (and writes to disk), a cached
 * compile that hits the disk, and cache creation. Each failure must be a typed status with no
 * artifact, no NVRTC program left alive, no temporary file left behind, nothing cached; the
 * sanitizer build proves nothing leaks. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

/* The NVRTC result codes the sweeps inject, and the statuses they must become. */
#define NVRTC_OUT_OF_MEMORY 1
#define NVRTC_INTERNAL 11

static t4a_nvrtc_request sweep_request(void) {
  static const char *exprs[] = {"add1"};
  t4a_nvrtc_request r = test_add1_request();
  r.name_expressions = exprs;
  r.num_name_expressions = 1;
  return r;
}

/* LAZY_MISS / LAZY_DISK: a cache from t4a_nvrtc_cache_create_lazy that misses (loading NVRTC at
 * the miss) / hits the disk (its compiler identity read from the files). */
typedef enum sweep_mode { UNCACHED, CACHED_MISS, CACHED_DISK, LAZY_MISS, LAZY_DISK } sweep_mode;

/* The NVRTC compile attempts the last attempt's cache made (its own counters: a lazy cache's lib
 * is its own). */
static uint64_t g_cache_attempts;

/* One attempt of the operation under test; returns its status, releasing what it made. */
static t4a_status attempt(t4a_nvrtc_lib *lib, sweep_mode mode, const char *dir,
                          t4a_nvrtc_origin *origin) {
  t4a_nvrtc_request r = sweep_request();
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st;
  if (mode == UNCACHED) {
    st = t4a_nvrtc_compile(lib, &r, &a, &o);
  } else {
    t4a_nvrtc_cache_options opts = T4A_NVRTC_CACHE_OPTIONS_INIT;
    opts.disk_dir = dir;
    t4a_nvrtc_cache *c = NULL;
    if (mode == LAZY_MISS || mode == LAZY_DISK) {
      st = t4a_nvrtc_cache_create_lazy(NULL, &opts, &c);
    } else {
      st = t4a_nvrtc_cache_create(lib, &opts, &c);
    }
    if (st != T4A_OK) {
      assert_null(c);
      *origin = T4A_NVRTC_ORIGIN_NONE;
      return st;
    }
    st = t4a_nvrtc_cache_compile(c, &r, &a, &o);
    struct t4a_nvrtc_cache_stats cs;
    t4a_nvrtc_cache_stats(c, &cs);
    assert_int_equal(cs.memory_entries, st == T4A_OK ? 1 : 0); /* a failure is never cached */
    g_cache_attempts = cs.counters.nvrtc_compile_attempts;
    t4a_nvrtc_cache_destroy(c);
  }
  *origin = o.origin;
  if (st == T4A_OK) {
    size_t n = 0;
    assert_non_null(a);
    assert_non_null(strstr(t4a_nvrtc_artifact_data(a, &n), ".entry add1"));
    assert_string_equal(t4a_nvrtc_artifact_lowered_name(a, "add1"), "add1");
  } else {
    assert_null(a);
    assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  }
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  return st;
}

/* Fails NVRTC call N for every N; `code` is what the failed call returns. */
static void nvrtc_sweep(sweep_mode mode, int code, t4a_status want) {
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(nvrtc_wrap_open(&lib, NULL), T4A_OK);
  char dir[512];
  test_tmpdir(dir, sizeof dir);
  long n = 0;
  for (;; n++) {
    nvrtc_wrap_reset(n, code);
    t4a_nvrtc_origin origin;
    t4a_status st = attempt(lib, mode, dir, &origin);
    const char *failed = g_nvrtc_wrap.failed_entry;
    assert_int_equal(atomic_load(&g_nvrtc_wrap.programs_live), 0); /* destroyed on every path */
    if (failed == NULL) {
      assert_int_equal(st, T4A_OK); /* N is past the last call: the operation ran clean */
      break;
    }
    if (strcmp(failed, "nvrtcDestroyProgram") == 0) {
      assert_int_equal(st, T4A_OK); /* the artifact was complete; the result is ignored */
      continue;
    }
    t4a_error e;
    t4a_error_last(&e);
    if (st != want || strcmp(e.entry, failed) != 0) {
      print_error("call %ld (%s) failed: got %s at %s, want %s\n", n, failed, t4a_status_name(st),
                  e.entry, t4a_status_name(want));
    }
    assert_int_equal(st, want);
    assert_string_equal(e.entry, failed);
    assert_int_equal(e.code, code);
    assert_int_equal(test_count_files(dir, NULL, NULL), 0); /* nothing reached the disk */
  }
  print_message("NVRTC sweep (mode %d, code %d): %ld calls, each failed once\n", (int)mode, code,
                n);
  assert_true(n >= 8); /* create, name, compile, log size, size, lowered, log, data, destroy */
  assert_int_equal(test_count_files(dir, ".t4a", NULL), mode == UNCACHED ? 0 : 1);
  test_rmdir(dir);
  t4a_nvrtc_lib_release(lib);
  nvrtc_wrap_close();
}

static void test_nvrtc_sweep_uncached(void **state) {
  (void)state;
  nvrtc_sweep(UNCACHED, NVRTC_OUT_OF_MEMORY, T4A_HOST_OUT_OF_MEMORY);
  nvrtc_sweep(UNCACHED, NVRTC_INTERNAL, T4A_NVRTC_ERROR);
}

static void test_nvrtc_sweep_cached(void **state) {
  (void)state;
  nvrtc_sweep(CACHED_MISS, NVRTC_OUT_OF_MEMORY, T4A_HOST_OUT_OF_MEMORY);
}

/* Counters at the call boundary: a failure injected at nvrtcCompileProgram is an attempt and
 * not a success; one injected after it is both. */
static void test_attempts_counted_at_the_call(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(nvrtc_wrap_open(&lib, NULL), T4A_OK);
  t4a_nvrtc_request r = test_add1_request();
  t4a_nvrtc_artifact *a = NULL;
  nvrtc_wrap_reset(1, NVRTC_INTERNAL); /* 0: create, 1: compile */
  assert_int_equal(t4a_nvrtc_compile(lib, &r, &a, NULL), T4A_NVRTC_ERROR);
  assert_string_equal(g_nvrtc_wrap.failed_entry, "nvrtcCompileProgram");
  t4a_counter_values v;
  t4a_nvrtc_lib_stats(lib, &v);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(v.nvrtc_compile_successes, 0);
  nvrtc_wrap_reset(3, NVRTC_INTERNAL); /* 2: log size, 3: PTX size */
  assert_int_equal(t4a_nvrtc_compile(lib, &r, &a, NULL), T4A_NVRTC_ERROR);
  assert_string_equal(g_nvrtc_wrap.failed_entry, "nvrtcGetPTXSize");
  t4a_nvrtc_lib_stats(lib, &v);
  assert_int_equal(v.nvrtc_compile_attempts, 2);
  assert_int_equal(v.nvrtc_compile_successes, 1);
  t4a_nvrtc_lib_release(lib);
  nvrtc_wrap_close();
}

/* Copies the library-identity memos (*.t4aid) of the real NVRTC into dir, so that a sweep over a
 * fresh directory does not hash the 100 MB library at every step (LAZY_MISS sweeps that path). */
static char g_memo_template[512];

static void seed_memos(const char *dir) {
  char *tmpl = g_memo_template;
  if (tmpl[0] == '\0') {
    test_tmpdir(tmpl, sizeof g_memo_template);
    t4a_nvrtc_lib *lib = NULL;
    assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
    t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
    o.disk_dir = tmpl;
    t4a_nvrtc_cache *c = NULL;
    assert_int_equal(t4a_nvrtc_cache_create(lib, &o, &c), T4A_OK);
    t4a_nvrtc_cache_destroy(c);
    t4a_nvrtc_lib_release(lib);
  }
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s'/*.t4aid '%s'/ 2>/dev/null", tmpl, dir);
  assert_int_equal(system(cmd), 0);
}

/* Fails fault-point consultation N (of the points in mask) for every N. */
static void fault_sweep(t4a_nvrtc_lib *lib, sweep_mode mode, unsigned mask, int populate_first,
                        long min_points) {
  char dir[512];
  long n = 0;
  for (;; n++) {
    test_tmpdir(dir, sizeof dir);
    if (mode != LAZY_MISS) seed_memos(dir);
    if (populate_first) {
      t4a_nvrtc_origin origin;
      assert_int_equal(attempt(lib, CACHED_MISS, dir, &origin), T4A_OK);
      assert_int_equal(test_count_files(dir, ".t4a", NULL), 1);
    }
    t4a_counter_values before, after;
    t4a_nvrtc_lib_stats(lib, &before);
    fault_plan plan;
    fault_plan_install(&plan, n, mask);
    t4a_nvrtc_origin origin = T4A_NVRTC_ORIGIN_NONE;
    g_cache_attempts = 0;
    t4a_status st = attempt(lib, mode, dir, &origin);
    fault_plan_remove();
    t4a_nvrtc_lib_stats(lib, &after);
    if (mode == LAZY_MISS || mode == LAZY_DISK) { /* the lazy cache loaded its own lib */
      before.nvrtc_compile_attempts = 0;
      after.nvrtc_compile_attempts = g_cache_attempts;
    }
    int point = plan.failed_point;
    assert_int_equal(test_count_files(dir, NULL, ".t4a-tmp-"), 0);
    if (point < 0) {
      assert_int_equal(st, T4A_OK);
      if (populate_first) assert_int_equal(origin, T4A_NVRTC_ORIGIN_DISK);
      test_rmdir(dir);
      break;
    }
    t4a_error e;
    t4a_error_last(&e);
    switch (point) {
      case T4A_FAULT_HOST_MALLOC:
        /* Main path: typed. Disk path: swallowed, and the compile goes on. */
        assert_true(st == T4A_OK || st == T4A_HOST_OUT_OF_MEMORY);
        if (st != T4A_OK) assert_int_equal(e.status, T4A_HOST_OUT_OF_MEMORY);
        break;
      case T4A_FAULT_MUTEX_INIT:
        assert_int_equal(st, T4A_HOST_OUT_OF_MEMORY);
        assert_non_null(strstr(e.entry, "pthread_"));
        break;
      case T4A_FAULT_DLOPEN:
        /* A lazy cache loading NVRTC at its miss: NOT_FOUND (nothing cached; asked again at the
         * next miss), or the builtins' load, which only changes the identity. */
        assert_true(st == T4A_OK || st == T4A_NVRTC_NOT_FOUND);
        if (st != T4A_OK) assert_string_equal(e.entry, "dlopen");
        break;
      case T4A_FAULT_DLSYM:
        /* A required entry: named; an optional one: a capability less (PTX needs none). */
        assert_true(st == T4A_OK || st == T4A_NVRTC_SYMBOL_MISSING);
        if (st != T4A_OK) assert_non_null(strstr(e.entry, "nvrtc"));
        break;
      default:
        /* A file failure: only creating the directory may fail the call (IO); a disk failure
         * during a compile never does. */
        if (st != T4A_OK) {
          assert_int_equal(st, T4A_IO);
          assert_string_equal(e.entry, "mkdir");
          assert_int_equal(after.nvrtc_compile_attempts, before.nvrtc_compile_attempts);
        }
        break;
    }
    if (populate_first && st == T4A_OK && origin == T4A_NVRTC_ORIGIN_COMPILED) {
      /* A failed disk read cost one recompile, and the entry was written again. */
      assert_int_equal(after.nvrtc_compile_attempts, before.nvrtc_compile_attempts + 1);
    }
    test_rmdir(dir);
  }
  print_message("fault sweep (mode %d, mask 0x%x): %ld fault points, each failed once\n", (int)mode,
                mask, n);
  assert_true(n >= min_points);
}

static void test_host_malloc_sweep_uncached(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  fault_sweep(lib, UNCACHED, FAULT_BIT(T4A_FAULT_HOST_MALLOC), 0, 2); /* inputs, artifact */
  t4a_nvrtc_lib_release(lib);
}

static void test_every_fault_point_sweep_cached_miss(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  fault_sweep(lib, CACHED_MISS, FAULT_ALL_BITS, 0, 12);
  t4a_nvrtc_lib_release(lib);
}

static void test_every_fault_point_sweep_cached_disk_hit(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  fault_sweep(lib, CACHED_DISK, FAULT_ALL_BITS, 1, 12);
  t4a_nvrtc_lib_release(lib);
}

/* The lazy cache: every fault point, including the load of NVRTC at the miss. The populated
 * directory of LAZY_DISK was written by a cache over the loaded lib, so it holds the memos the
 * lazy cache derives its identity from: each fault costs at most a hash of the library files, a
 * load of NVRTC or a recompile. */
#define FAULT_LAZY_BITS (FAULT_ALL_BITS | FAULT_BIT(T4A_FAULT_DLOPEN) | FAULT_BIT(T4A_FAULT_DLSYM))

static void test_every_fault_point_sweep_lazy_miss(void **state) {
  (void)state;
  fault_sweep(NULL, LAZY_MISS, FAULT_LAZY_BITS, 0, 12);
}

static void test_every_fault_point_sweep_lazy_disk_hit(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  fault_sweep(lib, LAZY_DISK, FAULT_LAZY_BITS, 1, 12);
  t4a_nvrtc_lib_release(lib);
}

static void test_lib_from_table_sweep(void **state) {
  (void)state;
  /* Failing nvrtcVersion while building a lib is typed; failing the optional architecture query
   * drops the capability (targets then go to NVRTC unchecked) and the lib opens. */
  t4a_nvrtc_lib *lib = NULL;
  long n = 0;
  for (;; n++) {
    nvrtc_wrap_reset(n, NVRTC_INTERNAL);
    t4a_status st = nvrtc_wrap_open(&lib, NULL);
    const char *failed = g_nvrtc_wrap.failed_entry;
    if (failed == NULL) {
      assert_int_equal(st, T4A_OK);
      assert_true(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_SUPPORTED_ARCHS);
      t4a_nvrtc_lib_release(lib);
      break;
    }
    if (strcmp(failed, "nvrtcVersion") == 0) {
      assert_int_equal(st, T4A_NVRTC_ERROR);
      assert_null(lib);
      t4a_error e;
      t4a_error_last(&e);
      assert_string_equal(e.entry, failed);
      continue;
    }
    assert_int_equal(st, T4A_OK);
    assert_false(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_SUPPORTED_ARCHS);
    size_t num = 9;
    int archs[4];
    assert_int_equal(t4a_nvrtc_lib_supported_archs(lib, archs, 4, &num), T4A_UNSUPPORTED);
    assert_int_equal(num, 0);
    /* Unchecked, the target still compiles. */
    nvrtc_wrap_reset(-1, 0);
    t4a_nvrtc_request r = test_add1_request();
    t4a_nvrtc_artifact *a = NULL;
    assert_int_equal(t4a_nvrtc_compile(lib, &r, &a, NULL), T4A_OK);
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_lib_release(lib);
  }
  assert_int_equal(n, 3); /* nvrtcVersion, nvrtcGetNumSupportedArchs, nvrtcGetSupportedArchs */
  nvrtc_wrap_reset(-1, 0);
  fault_plan plan;
  fault_plan_install(&plan, 0, FAULT_BIT(T4A_FAULT_HOST_MALLOC));
  assert_int_equal(nvrtc_wrap_open(&lib, NULL), T4A_HOST_OUT_OF_MEMORY);
  fault_plan_remove();
  assert_null(lib);
  nvrtc_wrap_close();
}

static int group_teardown(void **state) {
  (void)state;
  if (g_memo_template[0] != '\0') test_rmdir(g_memo_template);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_sweep_uncached),
      cmocka_unit_test(test_nvrtc_sweep_cached),
      cmocka_unit_test(test_attempts_counted_at_the_call),
      cmocka_unit_test(test_host_malloc_sweep_uncached),
      cmocka_unit_test(test_every_fault_point_sweep_cached_miss),
      cmocka_unit_test(test_every_fault_point_sweep_cached_disk_hit),
      cmocka_unit_test(test_lib_from_table_sweep),
      cmocka_unit_test(test_every_fault_point_sweep_lazy_miss),
      cmocka_unit_test(test_every_fault_point_sweep_lazy_disk_hit),
  };
  return cmocka_run_group_tests(tests, NULL, group_teardown);
}
