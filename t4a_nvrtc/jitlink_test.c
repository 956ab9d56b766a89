/* nvJitLink for real (it runs on the CPU): the loader, linking a device library and the kernel
 * that calls it (both LTO-IR from NVRTC) into a CUBIN, bad input (an input of the wrong kind, an
 * undefined symbol with its log, options t4a owns or a cached link refuses, targets), the link
 * cache (memory, disk, a new cache on the same directory, another nvJitLink build, a corrupt
 * entry), and the failure sweeps: every nvJitLink call of a link failed in turn through a
 * wrapped table, and every host allocation and file operation of a cached link that misses and
 * writes to disk and of one that hits the disk. Each failure is typed, returns no artifact,
 * leaves no nvJitLink handle alive and caches nothing. Skipped where NVRTC or nvJitLink is not
 * installed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/jitlink.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/jitlink_table.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

#define CK(x) assert_int_equal((x), T4A_OK)

/* The device library: one function, compiled once. */
static const char k_lib_src[] =
    "extern \"C\" __device__ float lib_affine(float x) { return 3.0f * x + 1.0f; }\n";
/* The kernel that calls it. */
static const char k_kernel_src[] =
    "extern \"C\" __device__ float lib_affine(float x);\n"
    "extern \"C\" __global__ void apply_affine(float *p, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] = lib_affine(p[i]);\n"
    "}\n";
/* A kernel that calls a function no input defines. */
static const char k_missing_src[] =
    "extern \"C\" __device__ float not_in_any_library(float x);\n"
    "extern \"C\" __global__ void calls_missing(float *p) {\n"
    "  p[threadIdx.x] = not_in_any_library(p[threadIdx.x]);\n"
    "}\n";

typedef struct env {
  t4a_nvrtc_lib *nvrtc;
  t4a_jitlink_lib *jl;
  t4a_nvrtc_artifact *lib, *kernel, *missing, *ptx, *cubin;
} env;

static t4a_nvrtc_artifact *compile(t4a_nvrtc_lib *nvrtc, const char *src, const char *name,
                                   t4a_nvrtc_output output) {
  static const char *const rdc[1] = {"-rdc=true"};
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = name;
  r.source = src;
  r.target = "sm_90";
  r.output = output;
  if (output == T4A_NVRTC_OUTPUT_LTOIR) {
    r.options = rdc;
    r.num_options = 1;
  }
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_compile(nvrtc, &r, &a, &o);
  if (st != T4A_OK) fprintf(stderr, "# %s: %s\n", name, o.log != NULL ? o.log : "?");
  t4a_nvrtc_outcome_deinit(&o);
  CK(st);
  return a;
}

static int setup(void **state) {
  env *e = calloc(1, sizeof *e);
  if (e == NULL) return -1;
  *state = e;
  if (t4a_nvrtc_lib_open(NULL, &e->nvrtc) != T4A_OK ||
      t4a_jitlink_lib_open(NULL, &e->jl) != T4A_OK) {
    return 0; /* the tests skip */
  }
  e->lib = compile(e->nvrtc, k_lib_src, "lib.cu", T4A_NVRTC_OUTPUT_LTOIR);
  e->kernel = compile(e->nvrtc, k_kernel_src, "kernel.cu", T4A_NVRTC_OUTPUT_LTOIR);
  e->missing = compile(e->nvrtc, k_missing_src, "missing.cu", T4A_NVRTC_OUTPUT_LTOIR);
  e->ptx = compile(e->nvrtc, k_lib_src, "lib_ptx.cu", T4A_NVRTC_OUTPUT_PTX);
  e->cubin = compile(e->nvrtc, "extern \"C\" __global__ void z(float *p) { p[0] = 1; }\n",
                     "kernel_cubin.cu", T4A_NVRTC_OUTPUT_CUBIN);
  return 0;
}

static int teardown(void **state) {
  env *e = *state;
  t4a_nvrtc_artifact_release(e->lib);
  t4a_nvrtc_artifact_release(e->kernel);
  t4a_nvrtc_artifact_release(e->missing);
  t4a_nvrtc_artifact_release(e->ptx);
  t4a_nvrtc_artifact_release(e->cubin);
  t4a_jitlink_lib_release(e->jl);
  t4a_nvrtc_lib_release(e->nvrtc);
  free(e);
  return 0;
}

static env *need(void **state) {
  env *e = *state;
  if (e->jl == NULL) {
    fprintf(stderr, "# NVRTC or nvJitLink is not available: skipped\n");
    skip();
  }
  return e;
}

static t4a_jitlink_request two(const t4a_nvrtc_artifact **in, t4a_nvrtc_artifact *a,
                               t4a_nvrtc_artifact *b) {
  in[0] = a;
  in[1] = b;
  t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
  r.inputs = in;
  r.num_inputs = 2;
  return r;
}

/* Whether an ELF CUBIN holds a symbol of this name (its string table, byte for byte). */
static int cubin_names(const t4a_nvrtc_artifact *a, const char *name) {
  size_t n = 0;
  const unsigned char *d = t4a_nvrtc_artifact_data(a, &n);
  if (n < 4 || memcmp(d, "\x7f" "ELF", 4) != 0) return 0;
  return memmem(d, n, name, strlen(name) + 1) != NULL;
}

static uint64_t lib_links(const t4a_jitlink_lib *lib) {
  t4a_counter_values v;
  t4a_jitlink_lib_stats(lib, &v);
  return v.jitlink_links;
}

/* ---- the loader ---------------------------------------------------------------------------- */

static void test_open(void **state) {
  env *e = need(state);
  int major = 0, minor = -1;
  t4a_jitlink_lib_version(e->jl, &major, &minor);
  assert_true(major >= 13);
  assert_true(minor >= 0);
  assert_non_null(strstr(t4a_jitlink_lib_origin(e->jl), "libnvJitLink.so.13"));
  const char *id = t4a_jitlink_lib_build_identity(e->jl);
  char want[32];
  snprintf(want, sizeof want, "nvjitlink %d.%d ", major, minor);
  assert_true(strncmp(id, want, strlen(want)) == 0);
  assert_true(strstr(id, "build-id ") != NULL || strstr(id, "file ") != NULL);
  /* A second open is the same build. */
  t4a_jitlink_lib *again = NULL;
  CK(t4a_jitlink_lib_open(NULL, &again));
  assert_string_equal(t4a_jitlink_lib_build_identity(again), id);
  t4a_jitlink_lib_release(again);
  /* NULLs. */
  t4a_jitlink_lib_version(NULL, &major, &minor);
  assert_int_equal(major, 0);
  assert_string_equal(t4a_jitlink_lib_origin(NULL), "");
  assert_int_equal(t4a_jitlink_lib_open(NULL, NULL), T4A_INVALID_ARGUMENT);
  t4a_jitlink_lib_release(NULL);
}

static void test_open_not_found(void **state) {
  (void)state;
  t4a_jitlink_lib_options o = T4A_JITLINK_LIB_OPTIONS_INIT;
  o.library_path = "/nonexistent/dir/libnvJitLink.so.13";
  t4a_jitlink_lib *lib = (t4a_jitlink_lib *)1;
  assert_int_equal(t4a_jitlink_lib_open(&o, &lib), T4A_JITLINK_NOT_FOUND);
  assert_null(lib);
  t4a_error err;
  t4a_error_last(&err);
  assert_non_null(strstr(err.message, "/nonexistent/dir/libnvJitLink.so.13"));
  /* A library that is not nvJitLink: every required entry is missing. */
  o.library_path = "libm.so.6";
  assert_int_equal(t4a_jitlink_lib_open(&o, &lib), T4A_JITLINK_SYMBOL_MISSING);
  assert_null(lib);
  t4a_error_last(&err);
  assert_string_equal(err.entry, "nvJitLinkVersion");
}

static void test_table_missing_entry(void **state) {
  env *e = need(state);
  t4a_jitlink_table t = e->jl->t;
  t.nvJitLinkComplete = NULL;
  t4a_jitlink_lib *lib = (t4a_jitlink_lib *)1;
  assert_int_equal(t4a_jitlink_lib_create_from_table(&t, "dropped", NULL, &lib),
                   T4A_JITLINK_SYMBOL_MISSING);
  assert_null(lib);
  t4a_error err;
  t4a_error_last(&err);
  assert_string_equal(err.entry, "nvJitLinkComplete");
  /* Optional entries may be missing. */
  t = e->jl->t;
  t.nvJitLinkGetLinkedPtx = NULL;
  t.nvJitLinkAddFile = NULL;
  CK(t4a_jitlink_lib_create_from_table(&t, "optional", "other-build", &lib));
  assert_string_equal(t4a_jitlink_lib_build_identity(lib), "other-build");
  t4a_jitlink_lib_release(lib);
}

/* ---- linking --------------------------------------------------------------------------------- */

static void test_link_library_and_kernel(void **state) {
  env *e = need(state);
  uint64_t before = lib_links(e->jl);
  t4a_counter_values v0;
  t4a_jitlink_lib_stats(e->jl, &v0);
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  CK(t4a_jitlink_link(e->jl, &r, &a, &o));
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_null(o.log);
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_CUBIN);
  assert_string_equal(t4a_nvrtc_artifact_target(a), "sm_90"); /* the first input's */
  assert_string_equal(t4a_nvrtc_artifact_program_name(a), "kernel.cu+lib.cu");
  assert_string_equal(t4a_nvrtc_artifact_build_identity(a), t4a_jitlink_lib_build_identity(e->jl));
  assert_true(cubin_names(a, "apply_affine"));
  /* The linked key is the link's, not an input's. */
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(e->kernel));
  assert_int_equal(lib_links(e->jl), before + 1);
  t4a_counter_values v;
  t4a_jitlink_lib_stats(e->jl, &v);
  assert_int_equal(v.jitlink_link_successes, v0.jitlink_link_successes + 1);
  /* The same link again: the same key and the same bytes (nvJitLink is deterministic). */
  t4a_nvrtc_artifact *b = NULL;
  CK(t4a_jitlink_link(e->jl, &r, &b, NULL));
  assert_string_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(b));
  size_t na = 0, nb = 0;
  const void *da = t4a_nvrtc_artifact_data(a, &na), *db = t4a_nvrtc_artifact_data(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(da, db, na);
  /* Another input order is another link (another key). */
  r = two(in, e->lib, e->kernel);
  t4a_nvrtc_artifact *c = NULL;
  CK(t4a_jitlink_link(e->jl, &r, &c, NULL));
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(c));
  /* An explicit target, and an option: other keys. */
  r = two(in, e->kernel, e->lib);
  r.target = "sm_90";
  t4a_nvrtc_artifact *d = NULL;
  CK(t4a_jitlink_link(e->jl, &r, &d, NULL));
  assert_string_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(d));
  t4a_nvrtc_artifact_release(d);
  const char *opt[1] = {"-O3"};
  r.options = opt;
  r.num_options = 1;
  CK(t4a_jitlink_link(e->jl, &r, &d, NULL));
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(d));
  t4a_nvrtc_artifact_release(d);
  t4a_nvrtc_artifact_release(c);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
}

/* Lowered names of the inputs come through: the linked module is looked up by them. */
static void test_link_keeps_lowered_names(void **state) {
  env *e = need(state);
  static const char *const exprs[1] = {"twice<3>"};
  static const char *const rdc[1] = {"-rdc=true"};
  t4a_nvrtc_request q = T4A_NVRTC_REQUEST_INIT;
  q.source =
      "extern \"C\" __device__ float lib_affine(float x);\n"
      "template <int K> __global__ void twice(float *p) { p[0] = K * lib_affine(p[0]); }\n";
  q.target = "sm_90";
  q.output = T4A_NVRTC_OUTPUT_LTOIR;
  q.options = rdc;
  q.num_options = 1;
  q.name_expressions = exprs;
  q.num_name_expressions = 1;
  t4a_nvrtc_artifact *k = NULL, *a = NULL;
  CK(t4a_nvrtc_compile(e->nvrtc, &q, &k, NULL));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, k, e->lib);
  CK(t4a_jitlink_link(e->jl, &r, &a, NULL));
  const char *lowered = t4a_nvrtc_artifact_lowered_name(a, "twice<3>");
  assert_non_null(lowered);
  assert_string_equal(lowered, t4a_nvrtc_artifact_lowered_name(k, "twice<3>"));
  assert_true(cubin_names(a, lowered));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_artifact_release(k);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_refused(env *e, t4a_jitlink_cache *c, const t4a_jitlink_request *r,
                           t4a_status want, const char *in_message) {
  uint64_t before = lib_links(e->jl);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = c != NULL ? t4a_jitlink_cache_link(c, r, &a, &o) : t4a_jitlink_link(e->jl, r, &a, &o);
  assert_int_equal(st, want);
  assert_null(a);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  t4a_error err;
  t4a_error_last(&err);
  assert_int_equal(err.status, want);
  if (in_message != NULL && strstr(err.message, in_message) == NULL) {
    fail_msg("\"%s\" not in \"%s\"", in_message, err.message);
  }
  assert_int_equal(lib_links(e->jl), before); /* refused before nvJitLink ran */
  t4a_nvrtc_outcome_deinit(&o);
}

static void test_wrong_kind_of_input(void **state) {
  env *e = need(state);
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->ptx);
  expect_refused(e, NULL, &r, T4A_INVALID_ARGUMENT, "input 1 (lib_ptx.cu) is ptx, not LTO-IR");
  r = two(in, e->cubin, e->lib);
  expect_refused(e, NULL, &r, T4A_INVALID_ARGUMENT, "input 0 (kernel_cubin.cu) is cubin");
  t4a_jitlink_cache *c = NULL;
  CK(t4a_jitlink_cache_create(e->jl, NULL, &c));
  expect_refused(e, c, &r, T4A_INVALID_ARGUMENT, "is cubin, not LTO-IR");
  r = two(in, e->kernel, NULL);
  expect_refused(e, c, &r, T4A_INVALID_ARGUMENT, "input 1 is NULL");
  r.num_inputs = 0;
  expect_refused(e, c, &r, T4A_INVALID_ARGUMENT, "at least one input");
  expect_refused(e, c, NULL, T4A_INVALID_ARGUMENT, "NULL");
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 0);
  assert_int_equal(s.counters.jitlink_mem_misses, 0); /* refused before the lookup */
  t4a_jitlink_cache_destroy(c);
  /* And the module cache still refuses an unlinked LTO-IR artifact (t4a_launch/module_test.c);
   * nvJitLink itself refuses bytes that are not LTO-IR: covered by the sweep's injected
   * INCORRECT_INPUT_TYPE below. */
}

static void test_undefined_symbol(void **state) {
  env *e = need(state);
  char dir[256];
  test_tmpdir(dir, sizeof dir);
  t4a_jitlink_cache_options co = T4A_JITLINK_CACHE_OPTIONS_INIT;
  co.disk_dir = dir;
  t4a_jitlink_cache *c = NULL;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->missing, e->lib);
  for (int round = 0; round < 2; round++) { /* never cached: the second links again */
    uint64_t before = lib_links(e->jl);
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    assert_int_equal(t4a_jitlink_cache_link(c, &r, &a, &o), T4A_LINK_FAILED);
    assert_null(a);
    assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
    assert_non_null(o.log);
    assert_non_null(strstr(o.log, "not_in_any_library"));
    assert_int_equal(o.log_bytes, strlen(o.log));
    t4a_error err;
    t4a_error_last(&err);
    assert_string_equal(err.entry, "nvJitLinkComplete");
    assert_string_equal(err.code_name, "NVJITLINK_ERROR_PTX_COMPILE");
    assert_non_null(strstr(err.message, "not_in_any_library")); /* the log's headline */
    assert_int_equal(lib_links(e->jl), before + 1);
    t4a_nvrtc_outcome_deinit(&o);
  }
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 0);
  assert_int_equal(s.counters.jitlink_links, 2);
  assert_int_equal(s.counters.jitlink_link_successes, 0);
  assert_int_equal(s.counters.nvrtc_disk_writes, 0);
  assert_int_equal(test_count_files(dir, NULL, NULL), 0);
  /* The uncached call reports the same. */
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_jitlink_link(e->jl, &r, &a, &o), T4A_LINK_FAILED);
  assert_null(a);
  assert_non_null(strstr(o.log, "not_in_any_library"));
  t4a_nvrtc_outcome_deinit(&o);
  t4a_jitlink_cache_destroy(c);
  test_rmdir(dir);
}

static void test_options_and_targets(void **state) {
  env *e = need(state);
  t4a_jitlink_cache *c = NULL;
  CK(t4a_jitlink_cache_create(e->jl, NULL, &c));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  static const char *const owned[] = {"-arch=sm_80", "-lto", "-ptx"};
  for (size_t i = 0; i < 3; i++) {
    r.options = &owned[i];
    r.num_options = 1;
    expect_refused(e, NULL, &r, T4A_INVALID_ARGUMENT, "sets what t4a sets");
  }
  static const char *const empty[1] = {""};
  r.options = empty;
  expect_refused(e, NULL, &r, T4A_INVALID_ARGUMENT, "option 0 is NULL or empty");
  static const char *const control[1] = {"-O3\n-g"};
  r.options = control;
  expect_refused(e, NULL, &r, T4A_INVALID_ARGUMENT, "control character");
  /* Not on a cached link's list (-Xptxas may read a file; an unknown option): refused there. */
  static const char *const unlisted[] = {"-Xptxas=-optf=/tmp/x", "-time", "-bogus-option"};
  for (size_t i = 0; i < 3; i++) {
    r.options = &unlisted[i];
    expect_refused(e, c, &r, T4A_INVALID_ARGUMENT, "not one a cached link accepts");
  }
  /* Uncached, nvJitLink rejects an unknown option itself: INVALID_ARGUMENT from nvJitLinkCreate. */
  r.options = &unlisted[2];
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_jitlink_link(e->jl, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);
  t4a_error err;
  t4a_error_last(&err);
  assert_string_equal(err.entry, "nvJitLinkCreate");
  assert_string_equal(err.code_name, "NVJITLINK_ERROR_UNRECOGNIZED_OPTION");
  /* Targets. */
  r.options = NULL;
  r.num_options = 0;
  static const char *const bad_targets[] = {"compute_90", "sm_9", "sm_90x", "90", ""};
  for (size_t i = 0; i < sizeof bad_targets / sizeof bad_targets[0]; i++) {
    r.target = bad_targets[i];
    expect_refused(e, c, &r, T4A_INVALID_ARGUMENT, "not a real architecture");
  }
  /* An architecture below the inputs': nvJitLink's ARCH_MISMATCH, typed, nothing cached. */
  r.target = "sm_80";
  assert_int_equal(t4a_jitlink_cache_link(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);
  t4a_error_last(&err);
  assert_string_equal(err.code_name, "NVJITLINK_ERROR_ARCH_MISMATCH");
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 0);
  t4a_jitlink_cache_destroy(c);
}

/* ---- the link cache ---------------------------------------------------------------------- */

static t4a_nvrtc_artifact *cached(t4a_jitlink_cache *c, const t4a_jitlink_request *r,
                                  t4a_nvrtc_origin want) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  CK(t4a_jitlink_cache_link(c, r, &a, &o));
  assert_int_equal(o.origin, want);
  assert_null(o.log);
  return a;
}

static void test_cache_memory_disk_and_identity(void **state) {
  env *e = need(state);
  char dir[256];
  test_tmpdir(dir, sizeof dir);
  t4a_jitlink_cache_options co = T4A_JITLINK_CACHE_OPTIONS_INIT;
  co.disk_dir = dir;
  t4a_jitlink_cache *c = NULL;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  t4a_nvrtc_artifact *a = cached(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *b = cached(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a, b); /* the entry's own artifact */
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.counters.jitlink_links, 1);
  assert_int_equal(s.counters.jitlink_link_successes, 1);
  assert_int_equal(s.counters.jitlink_mem_hits, 1);
  assert_int_equal(s.counters.jitlink_mem_misses, 1);
  assert_int_equal(s.counters.nvrtc_disk_misses, 1);
  assert_int_equal(s.counters.nvrtc_disk_writes, 1);
  assert_int_equal(s.memory_entries, 1);
  assert_true(s.memory_bytes > 0);
  assert_int_equal(test_count_files(dir, ".t4a", NULL), 1);
  /* A new cache (a new process, as far as the cache can tell) on the same directory: a disk hit
   * with the same bytes and no link. */
  uint64_t before = lib_links(e->jl);
  t4a_jitlink_cache *c2 = NULL;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c2));
  t4a_nvrtc_artifact *d = cached(c2, &r, T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(lib_links(e->jl), before);
  size_t na = 0, nd = 0;
  const void *pa = t4a_nvrtc_artifact_data(a, &na), *pd = t4a_nvrtc_artifact_data(d, &nd);
  assert_int_equal(na, nd);
  assert_memory_equal(pa, pd, na);
  assert_string_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(d));
  assert_string_equal(t4a_nvrtc_artifact_program_name(d), "kernel.cu+lib.cu");
  t4a_nvrtc_artifact_release(cached(c2, &r, T4A_NVRTC_ORIGIN_MEMORY));
  /* An input whose bytes changed (the library recompiled from another source) is a miss. */
  t4a_nvrtc_artifact *lib2 =
      compile(e->nvrtc,
              "extern \"C\" __device__ float lib_affine(float x) { return 5.0f * x - 2.0f; }\n",
              "lib.cu", T4A_NVRTC_OUTPUT_LTOIR);
  t4a_jitlink_request r2 = two(in, e->kernel, lib2);
  t4a_nvrtc_artifact *f = cached(c2, &r2, T4A_NVRTC_ORIGIN_COMPILED);
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(f));
  /* Another nvJitLink build (same table, another identity) is a miss in the shared directory,
   * written beside the first, not taken for corrupt; the first build still hits its entry. */
  t4a_jitlink_lib *other = NULL;
  CK(t4a_jitlink_lib_create_from_table(&e->jl->t, "other", "nvjitlink-other-build", &other));
  t4a_jitlink_cache *c3 = NULL;
  CK(t4a_jitlink_cache_create(other, &co, &c3));
  r = two(in, e->kernel, e->lib);
  t4a_nvrtc_artifact *g = cached(c3, &r, T4A_NVRTC_ORIGIN_COMPILED);
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(g));
  assert_string_equal(t4a_nvrtc_artifact_build_identity(g), "nvjitlink-other-build");
  t4a_jitlink_cache_stats(c3, &s);
  assert_int_equal(s.counters.nvrtc_disk_corrupt, 0);
  assert_int_equal(test_count_files(dir, ".t4a", NULL), 3);
  t4a_jitlink_cache *c4 = NULL;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c4));
  t4a_nvrtc_artifact_release(cached(c4, &r, T4A_NVRTC_ORIGIN_DISK));
  /* A flipped byte in the entry: corrupt, counted, linked again and replaced. */
  t4a_jitlink_cache_destroy(c4);
  CK(t4a_jitlink_cache_create(e->jl, &co, &c4));
  char path[512];
  snprintf(path, sizeof path, "%s/%s.t4a", dir, t4a_nvrtc_artifact_key_hex(a));
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 100, SEEK_SET), 0);
  int ch = fgetc(fp);
  assert_int_equal(fseek(fp, 100, SEEK_SET), 0);
  fputc(ch ^ 0x5a, fp);
  fclose(fp);
  before = lib_links(e->jl);
  t4a_nvrtc_artifact_release(cached(c4, &r, T4A_NVRTC_ORIGIN_COMPILED));
  assert_int_equal(lib_links(e->jl), before + 1);
  t4a_jitlink_cache_stats(c4, &s);
  assert_int_equal(s.counters.nvrtc_disk_corrupt, 1);
  assert_int_equal(s.counters.nvrtc_disk_writes, 1);
  /* The artifact cache shares the directory: its scan counts the link entries in its bound. */
  t4a_nvrtc_cache_options no = T4A_NVRTC_CACHE_OPTIONS_INIT;
  no.disk_dir = dir;
  t4a_nvrtc_cache *nc = NULL;
  CK(t4a_nvrtc_cache_create(e->nvrtc, &no, &nc));
  assert_string_equal(t4a_nvrtc_cache_disk_dir(nc), dir);
  t4a_nvrtc_cache_destroy(nc);
  assert_null(t4a_nvrtc_cache_disk_dir(NULL));

  t4a_jitlink_cache_destroy(c4);
  t4a_jitlink_cache_destroy(c3);
  t4a_jitlink_lib_release(other);
  t4a_nvrtc_artifact_release(g);
  t4a_nvrtc_artifact_release(f);
  t4a_nvrtc_artifact_release(lib2);
  t4a_nvrtc_artifact_release(d);
  t4a_jitlink_cache_destroy(c2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
  t4a_jitlink_cache_destroy(c);
  test_rmdir(dir);
}

static void test_cache_bounds(void **state) {
  env *e = need(state);
  t4a_jitlink_cache_options co = T4A_JITLINK_CACHE_OPTIONS_INIT;
  co.max_entries = 1;
  t4a_jitlink_cache *c = NULL;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  const t4a_nvrtc_artifact *in2[2];
  t4a_jitlink_request q = two(in2, e->lib, e->kernel);
  t4a_nvrtc_artifact_release(cached(c, &r, T4A_NVRTC_ORIGIN_COMPILED));
  t4a_nvrtc_artifact_release(cached(c, &q, T4A_NVRTC_ORIGIN_COMPILED)); /* evicts r */
  t4a_nvrtc_artifact_release(cached(c, &r, T4A_NVRTC_ORIGIN_COMPILED));
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 1);
  assert_int_equal(s.counters.jitlink_mem_evictions, 2);
  t4a_jitlink_cache_destroy(c);
  /* An artifact larger than the whole level is handed out, not kept. */
  co.max_entries = 0;
  co.max_bytes = 64;
  CK(t4a_jitlink_cache_create(e->jl, &co, &c));
  t4a_nvrtc_artifact_release(cached(c, &r, T4A_NVRTC_ORIGIN_COMPILED));
  t4a_nvrtc_artifact_release(cached(c, &r, T4A_NVRTC_ORIGIN_COMPILED));
  t4a_jitlink_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 0);
  t4a_jitlink_cache_destroy(c);
  /* Bad arguments. */
  assert_int_equal(t4a_jitlink_cache_create(NULL, NULL, &c), T4A_INVALID_ARGUMENT);
  assert_null(c);
  co = (t4a_jitlink_cache_options)T4A_JITLINK_CACHE_OPTIONS_INIT;
  co.disk_dir = "/proc/no/such/dir";
  assert_int_equal(t4a_jitlink_cache_create(e->jl, &co, &c), T4A_IO);
  assert_null(c);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_jitlink_cache_link(NULL, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);
  assert_int_equal(t4a_jitlink_link(NULL, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_jitlink_cache_destroy(NULL);
  t4a_jitlink_cache_stats(NULL, &s);
  assert_int_equal(s.memory_entries, 0);
}

/* ---- failure sweeps ------------------------------------------------------------------------ */

/* A table wrapping the real nvJitLink: counts calls and live handles, fails call `fail_at`. */
static struct {
  t4a_jitlink_table real;
  atomic_long calls, live; /* the race test calls from several threads */
  long fail_at;
  nvJitLinkResult code;
  const char *failed;
  /* If set, nvJitLinkComplete calls it first; a nonzero result is returned instead of linking. */
  nvJitLinkResult (*on_complete)(void);
} g_w;

static int wfail(const char *entry) {
  long i = atomic_fetch_add(&g_w.calls, 1);
  if (i == g_w.fail_at) {
    g_w.failed = entry;
    return 1;
  }
  return 0;
}

static nvJitLinkResult w_version(unsigned *a, unsigned *b) {
  return wfail("nvJitLinkVersion") ? g_w.code : g_w.real.nvJitLinkVersion(a, b);
}
static nvJitLinkResult w_create(nvJitLinkHandle *h, uint32_t n, const char *const *o) {
  if (wfail("nvJitLinkCreate")) return g_w.code;
  nvJitLinkResult r = g_w.real.nvJitLinkCreate(h, n, o);
  if (r == NVJITLINK_SUCCESS) g_w.live++;
  return r;
}
static nvJitLinkResult w_destroy(nvJitLinkHandle *h) {
  nvJitLinkResult r = g_w.real.nvJitLinkDestroy(h); /* always runs: nothing leaks */
  if (r == NVJITLINK_SUCCESS) g_w.live--;
  return wfail("nvJitLinkDestroy") ? g_w.code : r;
}
static nvJitLinkResult w_add(nvJitLinkHandle h, nvJitLinkInputType t, const void *d, size_t n,
                             const char *name) {
  return wfail("nvJitLinkAddData") ? g_w.code : g_w.real.nvJitLinkAddData(h, t, d, n, name);
}
static nvJitLinkResult w_complete(nvJitLinkHandle h) {
  if (g_w.on_complete != NULL) {
    nvJitLinkResult r = g_w.on_complete();
    if (r != NVJITLINK_SUCCESS) return r;
  }
  return wfail("nvJitLinkComplete") ? g_w.code : g_w.real.nvJitLinkComplete(h);
}
static nvJitLinkResult w_cubin_size(nvJitLinkHandle h, size_t *n) {
  return wfail("nvJitLinkGetLinkedCubinSize") ? g_w.code
                                               : g_w.real.nvJitLinkGetLinkedCubinSize(h, n);
}
static nvJitLinkResult w_cubin(nvJitLinkHandle h, void *p) {
  return wfail("nvJitLinkGetLinkedCubin") ? g_w.code : g_w.real.nvJitLinkGetLinkedCubin(h, p);
}
static nvJitLinkResult w_err_size(nvJitLinkHandle h, size_t *n) {
  return wfail("nvJitLinkGetErrorLogSize") ? g_w.code : g_w.real.nvJitLinkGetErrorLogSize(h, n);
}
static nvJitLinkResult w_err(nvJitLinkHandle h, char *p) {
  return wfail("nvJitLinkGetErrorLog") ? g_w.code : g_w.real.nvJitLinkGetErrorLog(h, p);
}
static nvJitLinkResult w_info_size(nvJitLinkHandle h, size_t *n) {
  return wfail("nvJitLinkGetInfoLogSize") ? g_w.code : g_w.real.nvJitLinkGetInfoLogSize(h, n);
}
static nvJitLinkResult w_info(nvJitLinkHandle h, char *p) {
  return wfail("nvJitLinkGetInfoLog") ? g_w.code : g_w.real.nvJitLinkGetInfoLog(h, p);
}

static t4a_jitlink_table wrapped(const t4a_jitlink_lib *real) {
  g_w.real = real->t;
  t4a_jitlink_table t = real->t;
  t.nvJitLinkVersion = w_version;
  t.nvJitLinkCreate = w_create;
  t.nvJitLinkDestroy = w_destroy;
  t.nvJitLinkAddData = w_add;
  t.nvJitLinkComplete = w_complete;
  t.nvJitLinkGetLinkedCubinSize = w_cubin_size;
  t.nvJitLinkGetLinkedCubin = w_cubin;
  t.nvJitLinkGetErrorLogSize = w_err_size;
  t.nvJitLinkGetErrorLog = w_err;
  t.nvJitLinkGetInfoLogSize = w_info_size;
  t.nvJitLinkGetInfoLog = w_info;
  return t;
}

static void wrap_reset(long fail_at, nvJitLinkResult code) {
  g_w.on_complete = NULL;
  atomic_store(&g_w.calls, 0);
  g_w.fail_at = fail_at;
  g_w.code = code;
  g_w.failed = NULL;
}

typedef enum link_mode { LINK_UNCACHED, LINK_MISS, LINK_DISK } link_mode;
static t4a_nvrtc_origin g_last_origin; /* of link_attempt's last success */

/* One attempt of the operation under test; returns its status, releasing what it made and
 * checking that a failure returned no artifact and cached nothing. */
static t4a_status link_attempt(t4a_jitlink_lib *lib, const t4a_jitlink_request *r, link_mode mode,
                               const char *dir) {
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st;
  if (mode == LINK_UNCACHED) {
    st = t4a_jitlink_link(lib, r, &a, &o);
  } else {
    t4a_jitlink_cache_options co = T4A_JITLINK_CACHE_OPTIONS_INIT;
    co.disk_dir = dir;
    t4a_jitlink_cache *c = NULL;
    st = t4a_jitlink_cache_create(lib, &co, &c);
    if (st != T4A_OK) {
      assert_null(c);
      return st;
    }
    st = t4a_jitlink_cache_link(c, r, &a, &o);
    struct t4a_jitlink_cache_stats s;
    t4a_jitlink_cache_stats(c, &s);
    if (st != T4A_OK) assert_int_equal(s.memory_entries, 0);
    t4a_jitlink_cache_destroy(c);
  }
  if (st != T4A_OK) {
    assert_null(a);
    assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  } else {
    assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_CUBIN);
    /* A disk hit that failed (a read, an allocation) links again. */
    if (mode != LINK_DISK || o.origin != T4A_NVRTC_ORIGIN_COMPILED) {
      assert_int_equal(o.origin,
                       mode == LINK_DISK ? T4A_NVRTC_ORIGIN_DISK : T4A_NVRTC_ORIGIN_COMPILED);
    }
    g_last_origin = o.origin;
  }
  t4a_nvrtc_artifact_release(st == T4A_OK ? a : NULL);
  t4a_nvrtc_outcome_deinit(&o);
  return st;
}

static void test_sweep_jitlink_calls(void **state) {
  env *e = need(state);
  wrap_reset(-1, NVJITLINK_SUCCESS);
  t4a_jitlink_table t = wrapped(e->jl);
  t4a_jitlink_lib *lib = NULL;
  CK(t4a_jitlink_lib_create_from_table(&t, "wrapped", NULL, &lib));
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  char dir[256];
  test_tmpdir(dir, sizeof dir);
  int failures = 0;
  for (link_mode mode = LINK_UNCACHED; mode <= LINK_MISS; mode++) {
    for (long n = 0;; n++) {
      assert_true(n < 100);
      wrap_reset(n, NVJITLINK_ERROR_INTERNAL);
      t4a_status st = link_attempt(lib, &r, mode, dir);
      assert_int_equal(g_w.live, 0); /* the handle is destroyed on every path */
      if (g_w.failed == NULL) {
        CK(st);
        break;
      }
      if (strcmp(g_w.failed, "nvJitLinkDestroy") == 0 || strstr(g_w.failed, "ErrorLog") != NULL) {
        /* A failed destroy is ignored; an error log is fetched only after another failure. */
        CK(st);
      } else {
        assert_int_equal(st, T4A_JITLINK_ERROR);
        t4a_error err;
        t4a_error_last(&err);
        assert_string_equal(err.entry, g_w.failed);
        assert_string_equal(err.code_name, "NVJITLINK_ERROR_INTERNAL");
        failures++;
      }
      test_rmdir(dir);
      test_tmpdir(dir, sizeof dir);
      assert_int_equal(test_count_files(dir, NULL, NULL), 0);
    }
  }
  fprintf(stderr, "# nvJitLink call sweep: %d typed failures\n", failures);
  assert_true(failures >= 2 * 6); /* create, add x2, complete, cubin size, info size, cubin... */
  /* An input nvJitLink refuses (INCORRECT_INPUT_TYPE at AddData): INVALID_ARGUMENT. */
  wrap_reset(1, NVJITLINK_ERROR_INCORRECT_INPUT_TYPE);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_jitlink_link(lib, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);
  assert_string_equal(g_w.failed, "nvJitLinkAddData");
  assert_int_equal(g_w.live, 0);
  /* Opening nvJitLink with every dlopen, dlsym and host allocation failed in turn: typed, or
   * absorbed (another candidate path loads). */
  for (long n = 0;; n++) {
    assert_true(n < 100);
    fault_plan plan;
    fault_plan_install(&plan, n,
                       FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_BIT(T4A_FAULT_DLOPEN) |
                           FAULT_BIT(T4A_FAULT_DLSYM));
    t4a_jitlink_lib *opened = (t4a_jitlink_lib *)1;
    t4a_status st = t4a_jitlink_lib_open(NULL, &opened);
    fault_plan_remove();
    if (st == T4A_OK) {
      t4a_jitlink_lib_release(opened);
      if (plan.failed_point < 0) break;
      continue;
    }
    assert_null(opened);
    assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_JITLINK_NOT_FOUND ||
                st == T4A_JITLINK_SYMBOL_MISSING);
  }
  /* Lib construction: a failed version query is typed. */
  wrap_reset(0, NVJITLINK_ERROR_INTERNAL);
  t4a_jitlink_lib *l2 = (t4a_jitlink_lib *)1;
  assert_int_equal(t4a_jitlink_lib_create_from_table(&t, "wrapped", NULL, &l2), T4A_JITLINK_ERROR);
  assert_null(l2);
  wrap_reset(-1, NVJITLINK_SUCCESS);
  t4a_jitlink_lib_release(lib);
  test_rmdir(dir);
}

static void test_sweep_faults(void **state) {
  env *e = need(state);
  const t4a_nvrtc_artifact *in[2];
  t4a_jitlink_request r = two(in, e->kernel, e->lib);
  char dir[256];
  for (link_mode mode = LINK_UNCACHED; mode <= LINK_DISK; mode++) {
    int surfaced = 0;
    for (long n = 0;; n++) {
      assert_true(n < 400);
      test_tmpdir(dir, sizeof dir);
      if (mode == LINK_DISK) CK(link_attempt(e->jl, &r, LINK_MISS, dir)); /* fill the entry */
      size_t files = test_count_files(dir, NULL, NULL);
      fault_plan plan;
      fault_plan_install(&plan, n, FAULT_ALL_BITS);
      t4a_status st = link_attempt(e->jl, &r, mode, dir);
      fault_plan_remove();
      if (plan.failed_point < 0) {
        CK(st);
        assert_int_equal(g_last_origin,
                         mode == LINK_DISK ? T4A_NVRTC_ORIGIN_DISK : T4A_NVRTC_ORIGIN_COMPILED);
        fprintf(stderr, "# fault sweep, mode %d: %ld steps, %d surfaced\n", (int)mode, n,
                surfaced);
        test_rmdir(dir);
        break;
      }
      if (st != T4A_OK) {
        surfaced++;
        assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_IO);
      }
      /* No temporary file is left; a failed miss writes no entry. */
      assert_int_equal(test_count_files(dir, NULL, ".t4a-tmp-"), 0);
      if (st != T4A_OK) assert_int_equal(test_count_files(dir, ".t4a", NULL), files);
      test_rmdir(dir);
    }
    assert_true(surfaced > 0);
  }
}

/* ---- concurrent links of one request -------------------------------------------------------- */

enum { THREADS = 8 };
static struct {
  t4a_jitlink_cache *cache;
  t4a_jitlink_request req;
  t4a_nvrtc_artifact *got[THREADS];
  t4a_status st[THREADS];
  t4a_nvrtc_origin origin[THREADS];
  atomic_int completes;
  int fail_first;
} g_race;

/* The first link holds until the seven other threads wait for it (then fails it if asked);
 * later links run at once. */
static nvJitLinkResult hold_first(void) {
  if (atomic_fetch_add(&g_race.completes, 1) != 0) return NVJITLINK_SUCCESS;
  for (int i = 0; i < 20000 && t4a_jitlink_cache_waiting(g_race.cache) < THREADS - 1; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(t4a_jitlink_cache_waiting(g_race.cache), THREADS - 1);
  return g_race.fail_first ? NVJITLINK_ERROR_PTX_COMPILE : NVJITLINK_SUCCESS;
}

static void *race_thread(void *arg) {
  long i = (long)(intptr_t)arg;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  g_race.st[i] = t4a_jitlink_cache_link(g_race.cache, &g_race.req, &g_race.got[i], &o);
  g_race.origin[i] = o.origin;
  t4a_nvrtc_outcome_deinit(&o);
  return NULL;
}

static void race(t4a_jitlink_lib *lib, int fail_first, struct t4a_jitlink_cache_stats *s) {
  memset(g_race.got, 0, sizeof g_race.got);
  atomic_store(&g_race.completes, 0);
  g_race.fail_first = fail_first;
  CK(t4a_jitlink_cache_create(lib, NULL, &g_race.cache));
  g_w.on_complete = hold_first;
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) {
    assert_int_equal(pthread_create(&t[i], NULL, race_thread, (void *)(intptr_t)i), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  g_w.on_complete = NULL;
  t4a_jitlink_cache_stats(g_race.cache, s);
  assert_int_equal(g_w.live, 0);
}

static void test_concurrent_links_join(void **state) {
  env *e = need(state);
  wrap_reset(-1, NVJITLINK_SUCCESS);
  t4a_jitlink_table t = wrapped(e->jl);
  t4a_jitlink_lib *lib = NULL;
  CK(t4a_jitlink_lib_create_from_table(&t, "wrapped", NULL, &lib));
  const t4a_nvrtc_artifact *in[2];
  g_race.req = two(in, e->kernel, e->lib);
  /* Eight threads, one request: one links, seven wait for it and get its artifact. */
  struct t4a_jitlink_cache_stats s;
  race(lib, 0, &s);
  int joined = 0;
  for (int i = 0; i < THREADS; i++) {
    CK(g_race.st[i]);
    assert_ptr_equal(g_race.got[i], g_race.got[0]);
    joined += g_race.origin[i] == T4A_NVRTC_ORIGIN_JOINED;
  }
  assert_int_equal(joined, THREADS - 1);
  assert_int_equal(s.counters.jitlink_links, 1);
  assert_int_equal(s.counters.jitlink_mem_misses, 1);
  assert_int_equal(s.counters.jitlink_mem_joins, THREADS - 1);
  assert_int_equal(s.memory_entries, 1);
  for (int i = 0; i < THREADS; i++) t4a_nvrtc_artifact_release(g_race.got[i]);
  t4a_jitlink_cache_destroy(g_race.cache);
  /* The held link fails: its thread gets LINK_FAILED, nothing is cached, the waiters look again
   * and one of them links (once) for the others. */
  race(lib, 1, &s);
  int failed = 0;
  t4a_nvrtc_artifact *ok = NULL;
  for (int i = 0; i < THREADS; i++) {
    if (g_race.st[i] == T4A_LINK_FAILED) {
      failed++;
      assert_null(g_race.got[i]);
      continue;
    }
    CK(g_race.st[i]);
    if (ok == NULL) ok = g_race.got[i];
    assert_ptr_equal(g_race.got[i], ok);
  }
  assert_int_equal(failed, 1);
  assert_int_equal(s.counters.jitlink_links, 2);
  assert_int_equal(s.counters.jitlink_link_successes, 1);
  assert_int_equal(s.counters.jitlink_mem_misses, 2);
  assert_int_equal(s.counters.jitlink_mem_joins, THREADS - 2);
  assert_int_equal(s.memory_entries, 1);
  for (int i = 0; i < THREADS; i++) t4a_nvrtc_artifact_release(g_race.got[i]);
  t4a_jitlink_cache_destroy(g_race.cache);
  t4a_jitlink_lib_release(lib);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open),
      cmocka_unit_test(test_open_not_found),
      cmocka_unit_test(test_table_missing_entry),
      cmocka_unit_test(test_link_library_and_kernel),
      cmocka_unit_test(test_link_keeps_lowered_names),
      cmocka_unit_test(test_wrong_kind_of_input),
      cmocka_unit_test(test_undefined_symbol),
      cmocka_unit_test(test_options_and_targets),
      cmocka_unit_test(test_cache_memory_disk_and_identity),
      cmocka_unit_test(test_cache_bounds),
      cmocka_unit_test(test_sweep_jitlink_calls),
      cmocka_unit_test(test_sweep_faults),
      cmocka_unit_test(test_concurrent_links_join),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
