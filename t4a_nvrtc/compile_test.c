/* Compile requests and artifacts against the machine's real NVRTC (it runs on the CPU): PTX,
 * CUBIN and LTO-IR output, named headers, name expressions, logs of failed compiles, empty
 * outputs (requirement A3), and the validation of every request field (requirement C6). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;

static int setup(void **state) {
  (void)state;
  return t4a_nvrtc_lib_open(NULL, &g_lib) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  g_lib = NULL;
  return 0;
}

static uint64_t lib_attempts(void) {
  t4a_counter_values v;
  t4a_nvrtc_lib_stats(g_lib, &v);
  return v.nvrtc_compile_attempts;
}

static uint64_t lib_successes(void) {
  t4a_counter_values v;
  t4a_nvrtc_lib_stats(g_lib, &v);
  return v.nvrtc_compile_successes;
}

static void test_ptx(void **state) {
  (void)state;
  uint64_t attempts = lib_attempts(), successes = lib_successes();
  t4a_nvrtc_request r = test_add1_request();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_OK);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_null(o.log);
  size_t n = 0;
  const char *ptx = t4a_nvrtc_artifact_data(a, &n);
  assert_non_null(ptx);
  assert_int_equal(n, strlen(ptx) + 1); /* the PTX size counts its NUL */
  assert_non_null(strstr(ptx, ".entry add1"));
  assert_non_null(strstr(ptx, ".target sm_90"));
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_PTX);
  assert_string_equal(t4a_nvrtc_artifact_target(a), "sm_90");
  assert_string_equal(t4a_nvrtc_artifact_program_name(a), "add1.cu");
  assert_string_equal(t4a_nvrtc_artifact_build_identity(a), t4a_nvrtc_lib_build_identity(g_lib));
  int ma = 0, mi = 0, la = 0, li = 0;
  t4a_nvrtc_artifact_compiler_version(a, &ma, &mi);
  t4a_nvrtc_lib_version(g_lib, &la, &li);
  assert_int_equal(ma, la);
  assert_int_equal(mi, li);
  assert_int_equal(strlen(t4a_nvrtc_artifact_key_hex(a)), 32);
  size_t log_bytes = 99;
  assert_non_null(t4a_nvrtc_artifact_log(a, &log_bytes));
  assert_int_equal(log_bytes, 0);
  assert_int_equal(t4a_nvrtc_artifact_num_lowered_names(a), 0);
  assert_int_equal(lib_attempts(), attempts + 1);
  assert_int_equal(lib_successes(), successes + 1);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
}

static void test_cubin_is_elf(void **state) {
  (void)state;
  t4a_nvrtc_request r = test_add1_request();
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  size_t n = 0;
  const unsigned char *elf = t4a_nvrtc_artifact_data(a, &n);
  assert_true(n > 64);
  assert_memory_equal(elf,
                      "\x7f"
                      "ELF",
                      4);
  assert_int_equal(elf[n], 0); /* a NUL beyond the bytes */
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_CUBIN);
  /* The artifact outlives the lib that made it: it is bound to nothing. */
  t4a_nvrtc_lib *lib2 = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib2), T4A_OK);
  t4a_nvrtc_artifact *b = NULL;
  assert_int_equal(t4a_nvrtc_compile(lib2, &r, &b, NULL), T4A_OK);
  t4a_nvrtc_lib_release(lib2);
  size_t nb = 0;
  const unsigned char *elf2 = t4a_nvrtc_artifact_data(b, &nb);
  assert_int_equal(nb, n);
  assert_memory_equal(elf2, elf, n); /* NVRTC is deterministic for one request */
  uint8_t ka[16], kb[16];
  t4a_nvrtc_artifact_key(a, ka);
  t4a_nvrtc_artifact_key(b, kb);
  assert_memory_equal(ka, kb, 16);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
}

static void test_ltoir(void **state) {
  (void)state;
  if (!(t4a_nvrtc_lib_caps(g_lib) & T4A_NVRTC_CAP_LTOIR)) skip();
  t4a_nvrtc_request r = test_add1_request();
  r.output = T4A_NVRTC_OUTPUT_LTOIR;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  size_t n = 0;
  assert_non_null(t4a_nvrtc_artifact_data(a, &n));
  assert_true(n > 16);
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_LTOIR);
  t4a_nvrtc_artifact_release(a);
}

static void test_named_header(void **state) {
  (void)state;
  t4a_nvrtc_header h = {"scale.h", "#define SCALE 3.5f\n", 0, 0};
  t4a_nvrtc_request r = test_add1_request();
  r.source = k_scale_src;
  r.headers = &h;
  r.num_headers = 1;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  /* 3.5f is 0x40600000 in PTX */
  assert_non_null(strstr(t4a_nvrtc_artifact_data(a, NULL), "0f40600000"));
  t4a_nvrtc_artifact_release(a);
  /* Without the header the include cannot be found: nothing is read from the disk. */
  r.num_headers = 0;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_COMPILE_FAILED);
  assert_null(a);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "scale.h"));
  t4a_nvrtc_outcome_deinit(&o);
}

static void test_failed_compile_keeps_its_log(void **state) {
  (void)state;
  uint64_t attempts = lib_attempts(), successes = lib_successes();
  t4a_nvrtc_request r = test_add1_request();
  r.program_name = "broken.cu";
  r.source = k_broken_src;
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_COMPILE_FAILED);
  assert_null(a);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  assert_non_null(o.log);
  assert_int_equal(o.log_bytes, strlen(o.log));
  assert_non_null(strstr(o.log, "broken.cu"));
  assert_non_null(strstr(o.log, "undefined_thing"));
  assert_non_null(strstr(o.log, "error"));
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_COMPILE_FAILED);
  assert_string_equal(e.entry, "nvrtcCompileProgram");
  assert_string_equal(e.code_name, "NVRTC_ERROR_COMPILATION");
  assert_non_null(strstr(e.message, "undefined_thing")); /* the headline of the log */
  assert_int_equal(lib_attempts(), attempts + 1);
  assert_int_equal(lib_successes(), successes);
  /* The outcome is reusable: a later call frees the previous log first. */
  r.source = k_add1_src;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_OK);
  assert_null(o.log);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  t4a_nvrtc_outcome_deinit(NULL);
}

static void test_virtual_arch_cubin_is_a_compile_error(void **state) {
  (void)state;
  t4a_counter_values before, after;
  t4a_nvrtc_lib_stats(g_lib, &before);
  t4a_nvrtc_request r = test_add1_request();
  r.target = "compute_90";
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_COMPILE_FAILED);
  assert_null(a);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "empty cubin for compute_90"));
  assert_non_null(strstr(o.log, "virtual architecture"));
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "nvrtcGetCUBINSize");
  t4a_nvrtc_lib_stats(g_lib, &after);
  /* NVRTC itself succeeded; the empty output is what failed. */
  assert_int_equal(after.nvrtc_compile_attempts, before.nvrtc_compile_attempts + 1);
  assert_int_equal(after.nvrtc_compile_successes, before.nvrtc_compile_successes + 1);
  t4a_nvrtc_outcome_deinit(&o);
  /* compute_90 is fine for PTX. */
  r.output = T4A_NVRTC_OUTPUT_PTX;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  assert_non_null(strstr(t4a_nvrtc_artifact_data(a, NULL), ".target sm_90"));
  t4a_nvrtc_artifact_release(a);
}

static void test_name_expressions_give_lowered_names(void **state) {
  (void)state;
  const char *exprs[] = {"k<int>", "k<float>", "fill<double>"};
  t4a_nvrtc_request r = test_add1_request();
  r.source = k_template_src;
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  r.name_expressions = exprs;
  r.num_name_expressions = 3;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  assert_int_equal(t4a_nvrtc_artifact_num_lowered_names(a), 3);
  assert_string_equal(t4a_nvrtc_artifact_lowered_name(a, "k<int>"), "_Z1kIiEvv");
  assert_string_equal(t4a_nvrtc_artifact_lowered_name(a, "k<float>"), "_Z1kIfEvv");
  assert_string_equal(t4a_nvrtc_artifact_lowered_name(a, "fill<double>"), "_Z4fillIdEvPT_S0_");
  assert_null(t4a_nvrtc_artifact_lowered_name(a, "k<char>"));
  const char *e = NULL, *l = NULL;
  assert_int_equal(t4a_nvrtc_artifact_lowered_name_at(a, 1, &e, &l), T4A_OK);
  assert_string_equal(e, "k<float>");
  assert_string_equal(l, "_Z1kIfEvv");
  assert_int_equal(t4a_nvrtc_artifact_lowered_name_at(a, 3, &e, &l), T4A_INVALID_ARGUMENT);
  assert_null(e);
  assert_null(l);
  /* The lowered names are in the CUBIN's symbol table. */
  size_t n = 0;
  const char *bytes = t4a_nvrtc_artifact_data(a, &n);
  assert_non_null(memmem(bytes, n, "_Z1kIiEvv", 9));
  t4a_nvrtc_artifact_release(a);
}

/* Every bad field gets a typed status, no artifact, and no NVRTC call. */
static void expect_rejected(const t4a_nvrtc_request *r, t4a_status want, const char *msg_part) {
  uint64_t attempts = lib_attempts();
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_compile(g_lib, r, &a, &o);
  t4a_error e;
  t4a_error_last(&e);
  if (st != want || (msg_part != NULL && strstr(e.message, msg_part) == NULL)) {
    print_error("got %s (%s), want %s with \"%s\"\n", t4a_status_name(st), e.message,
                t4a_status_name(want), msg_part != NULL ? msg_part : "");
  }
  assert_int_equal(st, want);
  if (msg_part != NULL) assert_non_null(strstr(e.message, msg_part));
  assert_null(a);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  assert_null(o.log);
  assert_int_equal(lib_attempts(), attempts);
}

static void test_validation(void **state) {
  (void)state;
  t4a_nvrtc_request r;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, NULL, &a, NULL), T4A_INVALID_ARGUMENT);
  r = test_add1_request();
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, NULL, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_nvrtc_compile(NULL, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);

  r = test_add1_request();
  r.source = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "source is NULL");
  r = test_add1_request();
  r.source = "__global__ void f() {}\0#include <evil>\n";
  r.source_bytes = 40;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "NUL byte at offset 22");
  r = test_add1_request();
  r.program_name = "p.cu\n#include \"/etc/passwd\"";
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "program name");

  /* Header names (requirement C6): newline, NUL, carriage return, empty, NULL. */
  t4a_nvrtc_header h = {"a.h\n#include \"/etc/shadow\"", "", 0, 0};
  r = test_add1_request();
  r.headers = &h;
  r.num_headers = 1;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "header name 0 has a control byte 0x0a at offset 3");
  h.name = "a.h\0evil.h";
  h.name_bytes = 10;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "control byte 0x00 at offset 3");
  h.name = "a.h\r";
  h.name_bytes = 0;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "control byte 0x0d");
  h.name = "";
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "is empty");
  h.name = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "NULL name or content");
  h.name = "ok.h";
  h.content = "#define X 1\0#define Y 2";
  h.content_bytes = 23;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "content has a NUL byte at offset 11");
  r.headers = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "array is NULL");
  t4a_nvrtc_header two[2] = {{"same.h", "", 0, 0}, {"same.h", "", 0, 0}};
  r = test_add1_request();
  r.headers = two;
  r.num_headers = 2;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "appears twice");

  /* Options: newline, NUL, empty, NULL; the ones t4a owns. */
  const char *opt[1];
  size_t opt_bytes[1] = {0};
  r = test_add1_request();
  r.options = opt;
  r.num_options = 1;
  opt[0] = "-DX=1\n#include \"/etc/passwd\"";
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "option 0 has a control byte 0x0a");
  opt[0] = "-DX=1\0-I/etc";
  opt_bytes[0] = 12;
  r.option_bytes = opt_bytes;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "control byte 0x00");
  r.option_bytes = NULL;
  opt[0] = "";
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "option 0 is empty");
  opt[0] = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "option 0 is NULL");
  /* Every spelling of what the request's target and output own, code-less outputs included. */
  const char *owned[] = {"-arch=sm_80",
                         "-arch",
                         "--arch=sm_80",
                         "--gpu-architecture=sm_80",
                         "-gpu-architecture",
                         "-dlto",
                         "--dlto",
                         "--dlink-time-opt",
                         "--optix-ir",
                         "-optix-ir",
                         "-fdevice-syntax-only",
                         "--fdevice-syntax-only"};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
    opt[0] = owned[i];
    expect_rejected(&r, T4A_INVALID_ARGUMENT, "option 0");
  }

  /* Name expressions. */
  const char *expr[2] = {"k<int>\n", NULL};
  r = test_add1_request();
  r.source = k_template_src;
  r.name_expressions = expr;
  r.num_name_expressions = 1;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "name expression 0");
  expr[0] = "";
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "is empty");
  expr[0] = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "is NULL");
  expr[0] = "k<int>";
  expr[1] = "k<int>";
  r.num_name_expressions = 2;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "appears twice");

  /* Targets and output kinds. */
  const char *bad_targets[] = {"sm_9",   "sm90",     "gfx90a",  "sm_90x", "",
                               "sm_090", "compute_", "sm_1000", "lto_90"};
  for (size_t i = 0; i < sizeof bad_targets / sizeof bad_targets[0]; i++) {
    r = test_add1_request();
    r.target = bad_targets[i];
    expect_rejected(&r, T4A_INVALID_ARGUMENT, "is not an architecture");
  }
  r = test_add1_request();
  r.target = NULL;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "target is NULL");
  r.target = "sm_91";
  expect_rejected(&r, T4A_UNSUPPORTED, "supports");
  r.target = "compute_20";
  expect_rejected(&r, T4A_UNSUPPORTED, "supports");
  r = test_add1_request();
  r.output = (t4a_nvrtc_output)7;
  expect_rejected(&r, T4A_INVALID_ARGUMENT, "output kind 7");
  r = test_add1_request();
  r.num_options = 70000;
  r.options = opt;
  expect_rejected(&r, T4A_LIMIT_EXCEEDED, "at most");
}

static void test_nvrtc_rejects_an_option(void **state) {
  (void)state;
  const char *opt[] = {"--no-such-option"};
  t4a_nvrtc_request r = test_add1_request();
  r.options = opt;
  r.num_options = 1;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, &o), T4A_INVALID_ARGUMENT);
  assert_null(a);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "--no-such-option"));
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "NVRTC_ERROR_INVALID_OPTION");
  t4a_nvrtc_outcome_deinit(&o);
}

/* Without the cache, an include path is the caller's business; the program name's directory is
 * never searched (t4a adds --no-source-include), with or without the cache. */
static void test_include_paths_uncached(void **state) {
  (void)state;
  char dir[512], path[600], opt_i[600], prog[600];
  test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/scale.h", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("#define SCALE 2.0f\n", f);
  fclose(f);
  snprintf(opt_i, sizeof opt_i, "-I%s", dir);
  const char *opts[] = {opt_i};
  t4a_nvrtc_request r = test_add1_request();
  r.source = k_scale_src;
  r.options = opts;
  r.num_options = 1;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  t4a_nvrtc_artifact_release(a);
  snprintf(prog, sizeof prog, "%s/scale.cu", dir);
  r.program_name = prog;
  r.num_options = 0;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_COMPILE_FAILED);
  assert_null(a);
  test_rmdir(dir);
}

static void test_table_requires_entries(void **state) {
  (void)state;
  t4a_nvrtc_lib *w = (t4a_nvrtc_lib *)1;
  assert_int_equal(nvrtc_wrap_open(&w, "nvrtcCompileProgram"), T4A_NVRTC_SYMBOL_MISSING);
  assert_null(w);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "nvrtcCompileProgram");

  /* Without nvrtcGetCUBIN, CUBIN is unsupported and says so before NVRTC runs. */
  assert_int_equal(nvrtc_wrap_open(&w, "nvrtcGetCUBIN"), T4A_OK);
  assert_false(t4a_nvrtc_lib_caps(w) & T4A_NVRTC_CAP_CUBIN);
  t4a_nvrtc_request r = test_add1_request();
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(w, &r, &a, NULL), T4A_UNSUPPORTED);
  assert_int_equal(atomic_load(&g_nvrtc_wrap.compiles), 0);
  t4a_nvrtc_lib_release(w);

  /* Without the architecture list, targets go to NVRTC, which rejects an unknown one. */
  assert_int_equal(nvrtc_wrap_open(&w, "nvrtcGetSupportedArchs"), T4A_OK);
  assert_false(t4a_nvrtc_lib_caps(w) & T4A_NVRTC_CAP_SUPPORTED_ARCHS);
  size_t n = 0;
  int archs[4];
  assert_int_equal(t4a_nvrtc_lib_supported_archs(w, archs, 4, &n), T4A_UNSUPPORTED);
  r = test_add1_request();
  r.target = "sm_91";
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(w, &r, &a, &o), T4A_INVALID_ARGUMENT);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "gpu-architecture"));
  t4a_nvrtc_outcome_deinit(&o);
  assert_string_equal(t4a_nvrtc_lib_origin(w), "wrapped");
  assert_non_null(strstr(t4a_nvrtc_lib_build_identity(w), "wrapped: nvrtc"));
  t4a_nvrtc_lib_release(w);
  nvrtc_wrap_close();
}

static void test_build_identity(void **state) {
  (void)state;
  const char *id = t4a_nvrtc_lib_build_identity(g_lib);
  /* This machine's libnvrtc and libnvrtc-builtins both carry a GNU build-id. */
  assert_non_null(strstr(id, "nvrtc 1"));
  const char *first = strstr(id, "build-id ");
  assert_non_null(first);
  assert_non_null(strstr(id, "; builtins build-id "));
  assert_true(strlen(first + 9) >= 40);
  assert_string_equal(t4a_nvrtc_output_name(T4A_NVRTC_OUTPUT_LTOIR), "lto-ir");
  assert_string_equal(t4a_nvrtc_origin_name(T4A_NVRTC_ORIGIN_DISK), "disk");
  assert_string_equal(t4a_nvrtc_origin_name((t4a_nvrtc_origin)99), "unknown");
}

/* The .alt NVRTC (beside the regular one in the toolkit) pins its own .alt builtins, so its
 * identity differs in both parts, and it compiles. */
static void test_alt_library_has_its_own_identity(void **state) {
  (void)state;
  const char *alt = "/usr/local/cuda/lib64/libnvrtc.alt.so.13";
  if (access(alt, R_OK) != 0) skip();
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = alt;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_OK);
  const char *a = t4a_nvrtc_lib_build_identity(lib), *r = t4a_nvrtc_lib_build_identity(g_lib);
  const char *ba = strstr(a, "; builtins build-id "), *br = strstr(r, "; builtins build-id ");
  assert_non_null(ba);
  assert_non_null(br);
  assert_string_not_equal(ba, br);
  assert_string_not_equal(a, r);
  t4a_nvrtc_request req = test_add1_request();
  t4a_nvrtc_artifact *art = NULL;
  assert_int_equal(t4a_nvrtc_compile(lib, &req, &art, NULL), T4A_OK);
  t4a_nvrtc_artifact *reg = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &req, &reg, NULL), T4A_OK);
  /* Another NVRTC build, another key. */
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(art), t4a_nvrtc_artifact_key_hex(reg));
  t4a_nvrtc_artifact_release(reg);
  t4a_nvrtc_artifact_release(art);
  t4a_nvrtc_lib_release(lib);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ptx),
      cmocka_unit_test(test_cubin_is_elf),
      cmocka_unit_test(test_ltoir),
      cmocka_unit_test(test_named_header),
      cmocka_unit_test(test_failed_compile_keeps_its_log),
      cmocka_unit_test(test_virtual_arch_cubin_is_a_compile_error),
      cmocka_unit_test(test_name_expressions_give_lowered_names),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_nvrtc_rejects_an_option),
      cmocka_unit_test(test_include_paths_uncached),
      cmocka_unit_test(test_table_requires_entries),
      cmocka_unit_test(test_build_identity),
      cmocka_unit_test(test_alt_library_has_its_own_identity),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
