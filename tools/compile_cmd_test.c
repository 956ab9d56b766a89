/* `t4a compile` (tools/compile_cmd.c) against the real NVRTC: exit codes, what it prints, the
 * output file, memory and disk hits across invocations, compile logs, bad usage. */
#define _GNU_SOURCE
#include "tools/compile_cmd.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testing/lsan/nvrtc_suppressions.h"

static char g_dir[512];
static char g_out[1 << 16], g_err[1 << 16];

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void slurp(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  size_t n = f != NULL ? fread(buf, 1, size - 1, f) : 0;
  buf[n] = '\0';
  if (f != NULL) fclose(f);
}

/* Runs the command with stdout and stderr captured into g_out and g_err. */
static int run(const char *const *args, int n) {
  char out_path[600], err_path[600];
  snprintf(out_path, sizeof out_path, "%s/stdout", g_dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", g_dir);
  fflush(stdout);
  fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fo, 1);
  dup2(fe, 2);
  char *argv[32];
  for (int i = 0; i < n; i++) argv[i] = (char *)args[i];
  argv[n] = NULL;
  int rc = t4a_cmd_compile(n, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  close(fo);
  close(fe);
  slurp(out_path, g_out, sizeof g_out);
  slurp(err_path, g_err, sizeof g_err);
  return rc;
}

static char g_kernel[600], g_broken[600], g_cache[600], g_obj[600], g_hdr[600], g_tmpl[600];

static int setup(void **state) {
  (void)state;
  const char *base = getenv("TEST_TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/t4a-compile-XXXXXX", base != NULL ? base : "/tmp");
  if (mkdtemp(g_dir) == NULL) return -1;
  snprintf(g_kernel, sizeof g_kernel, "%s/add.cu", g_dir);
  snprintf(g_broken, sizeof g_broken, "%s/broken.cu", g_dir);
  snprintf(g_cache, sizeof g_cache, "%s/cache", g_dir);
  snprintf(g_obj, sizeof g_obj, "%s/add.cubin", g_dir);
  snprintf(g_hdr, sizeof g_hdr, "%s/val.h", g_dir);
  snprintf(g_tmpl, sizeof g_tmpl, "%s/tmpl.cu", g_dir);
  write_text(g_kernel,
             "#ifndef STEP\n#error STEP must be defined\n#endif\n"
             "extern \"C\" __global__ void add(float *x) { x[threadIdx.x] += STEP; }\n");
  write_text(g_broken, "extern \"C\" __global__ void b(float *x) { x[0] = nope(x); }\n");
  write_text(g_hdr, "#define VAL 42\n");
  write_text(g_tmpl,
             "#include \"val.h\"\ntemplate <int N> __global__ void t(int *x) { *x = N + VAL; }\n");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_compiles_to_a_file(void **state) {
  (void)state;
  const char *args[] = {g_kernel, "--arch", "sm_90", "-DSTEP=2.0f", "-o", g_obj, "--repeat", "2"};
  assert_int_equal(run(args, 8), 0);
  assert_non_null(strstr(g_out, "artifact: compiled\nartifact: memory\n"));
  assert_non_null(strstr(g_out, "output: cubin for sm_90"));
  assert_non_null(strstr(g_out, "counter nvrtc_compile_attempts = 1\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_mem_hits = 1\n"));
  FILE *f = fopen(g_obj, "rb");
  assert_non_null(f);
  unsigned char magic[4] = {0};
  assert_int_equal(fread(magic, 1, 4, f), 4);
  fclose(f);
  assert_memory_equal(magic,
                      "\x7f"
                      "ELF",
                      4);
}

static void test_disk_cache_across_invocations(void **state) {
  (void)state;
  const char *args[] = {g_tmpl,     "--arch", "compute_90",  "--cache", g_cache,
                        "--header", "val.h=", "--name-expr", "t<3>"};
  char header_arg[700];
  snprintf(header_arg, sizeof header_arg, "val.h=%s", g_hdr);
  args[6] = header_arg;
  assert_int_equal(run(args, 9), 0);
  assert_non_null(strstr(g_out, "artifact: compiled\n"));
  assert_non_null(strstr(g_out, "output: ptx for compute_90"));
  assert_non_null(strstr(g_out, "lowered: t<3> -> _Z1tILi3EEvPi\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_disk_writes = 1\n"));
  assert_int_equal(run(args, 9), 0);
  assert_non_null(strstr(g_out, "artifact: disk\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_compile_attempts = 0\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_disk_hits = 1\n"));
  /* A file-reading option is refused with a cache: bad usage. */
  const char *with_pre[] = {g_tmpl, "--arch", "sm_90", "--cache", g_cache, "-include", g_hdr};
  assert_int_equal(run(with_pre, 7), 2);
  assert_non_null(strstr(g_err, "cache key cannot see"));
  /* -I DIR is an include root: keyed by what the includes reach there, listed with that. */
  const char *with_i[] = {g_tmpl,   "--arch", "compute_90", "--cache", g_cache, "-I", g_dir,
                          "--header", header_arg, "--name-expr", "t<3>", "--no-toolkit"};
  assert_int_equal(run(with_i, 12), 0);
  char want[800];
  snprintf(want, sizeof want, "root 1: %s: 1 files reached", g_dir); /* its val.h */
  assert_non_null(strstr(g_out, want));
  assert_non_null(strstr(g_out, "artifact: compiled\n")); /* another key than without the root */
  assert_null(strstr(g_out, "toolkit: "));
}

/* A source whose includes the key cannot see compiles uncached, saying why, every time;
 * --strict-cache refuses it (bad usage). */
static void test_uncacheable_source_compiles_uncached(void **state) {
  (void)state;
  char paste[600];
  snprintf(paste, sizeof paste, "%s/paste.cu", g_dir);
  write_text(paste,
             "#define CAT(a, b) a ## b\n#if CAT(__has_, include)(\"none.h\")\n#endif\n"
             "extern \"C\" __global__ void p(int *x) { *x = 1; }\n");
  const char *args[] = {paste,   "--arch",   "sm_90", "--cache",
                        g_cache, "--repeat", "2",     "--strict-cache"};
  assert_int_equal(run(args, 7), 0);
  assert_non_null(strstr(g_out, "artifact: uncached\nnot cached: "));
  assert_non_null(strstr(g_out, "__has_include"));
  assert_non_null(strstr(g_out, "counter nvrtc_compile_attempts = 2\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_uncached = 2\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_disk_writes = 0\n"));
  assert_int_equal(run(args, 8), 2);
  assert_non_null(strstr(g_err, "__has_include"));
}

static void test_compile_error_prints_the_log(void **state) {
  (void)state;
  const char *args[] = {g_broken, "--arch", "sm_90"};
  assert_int_equal(run(args, 3), 1);
  assert_non_null(strstr(g_err, "broken.cu(1): error"));
  assert_non_null(strstr(g_err, "nope"));
  assert_non_null(strstr(g_err, "COMPILE_FAILED"));
  const char *no_define[] = {g_kernel, "--arch", "sm_90", "--ptx"};
  assert_int_equal(run(no_define, 4), 1);
  assert_non_null(strstr(g_err, "STEP must be defined"));
}

static void test_bad_usage_exits_2(void **state) {
  (void)state;
  const char *none[] = {NULL};
  assert_int_equal(run(none, 0), 2);
  assert_non_null(strstr(g_err, "usage: t4a compile"));
  const char *no_arch[] = {g_kernel};
  assert_int_equal(run(no_arch, 1), 2);
  assert_non_null(strstr(g_err, "--arch is required"));
  const char *two_kinds[] = {g_kernel, "--arch", "sm_90", "--ptx", "--cubin"};
  assert_int_equal(run(two_kinds, 5), 2);
  const char *missing_value[] = {g_kernel, "--arch"};
  assert_int_equal(run(missing_value, 2), 2);
  const char *no_file[] = {"/nonexistent/x.cu", "--arch", "sm_90"};
  assert_int_equal(run(no_file, 3), 2);
  assert_non_null(strstr(g_err, "cannot read /nonexistent/x.cu"));
  const char *two_files[] = {g_kernel, g_broken, "--arch", "sm_90"};
  assert_int_equal(run(two_files, 4), 2);
  const char *bad_repeat[] = {g_kernel, "--arch", "sm_90", "--repeat", "0"};
  assert_int_equal(run(bad_repeat, 5), 2);
  const char *bad_arch[] = {g_kernel, "--arch", "sm_91", "-DSTEP=1"};
  assert_int_equal(run(bad_arch, 4), 2);
  assert_non_null(strstr(g_err, "UNSUPPORTED"));
  const char *bad_opt[] = {g_kernel, "--arch", "sm_90", "-DSTEP=1", "--no-such-option"};
  assert_int_equal(run(bad_opt, 5), 2);
  assert_non_null(strstr(g_err, "--no-such-option"));
  const char *owned[] = {g_kernel, "--arch", "sm_90", "-arch=sm_80"};
  assert_int_equal(run(owned, 4), 2);
  const char *bad_header[] = {g_kernel, "--arch", "sm_90", "--header", "noequals"};
  assert_int_equal(run(bad_header, 5), 2);
}

/* -dlto: a device library and the kernel that calls it, each compiled to LTO-IR, linked by
 * nvJitLink; a second run with the cache is disk hits all the way; an undefined symbol prints
 * nvJitLink's log and exits 1; misuse exits 2. */
static void test_dlto_links_a_library(void **state) {
  (void)state;
  char lib[600], kern[600], cubin[600], cache[600];
  snprintf(lib, sizeof lib, "%s/lib_affine.cu", g_dir);
  snprintf(kern, sizeof kern, "%s/apply.cu", g_dir);
  snprintf(cubin, sizeof cubin, "%s/apply.cubin", g_dir);
  snprintf(cache, sizeof cache, "%s/lto-cache", g_dir);
  write_text(lib, "extern \"C\" __device__ float lib_affine(float x) { return 3.0f * x + 1.0f; }\n");
  write_text(kern,
             "extern \"C\" __device__ float lib_affine(float x);\n"
             "extern \"C\" __global__ void apply(float *p) { p[0] = lib_affine(p[0]); }\n");
  const char *args[] = {kern, lib, "--arch", "sm_90", "-dlto", "--cache", cache, "-o", cubin,
                        "-Xnvlink", "-O3"};
  assert_int_equal(run(args, 11), 0);
  assert_non_null(strstr(g_out, "artifact: compiled (apply.cu: lto-ir"));
  assert_non_null(strstr(g_out, "artifact: compiled (lib_affine.cu: lto-ir"));
  assert_non_null(strstr(g_out, "link: compiled\n"));
  assert_non_null(strstr(g_out, "output: cubin for sm_90"));
  assert_non_null(strstr(g_out, "counter jitlink_links = 1\n"));
  FILE *f = fopen(cubin, "rb");
  assert_non_null(f);
  unsigned char magic[4] = {0};
  assert_int_equal(fread(magic, 1, 4, f), 4);
  fclose(f);
  assert_memory_equal(magic, "\x7f" "ELF", 4);
  assert_int_equal(run(args, 11), 0);
  assert_non_null(strstr(g_out, "artifact: disk (apply.cu"));
  assert_non_null(strstr(g_out, "link: disk\n"));
  assert_non_null(strstr(g_out, "counter nvrtc_compile_attempts = 0\n"));
  assert_non_null(strstr(g_out, "counter jitlink_links = 0\n"));
  /* The kernel alone: lib_affine is undefined. */
  const char *alone[] = {kern, "--arch", "sm_90", "-dlto"};
  assert_int_equal(run(alone, 4), 1);
  assert_non_null(strstr(g_err, "Unresolved extern function 'lib_affine'"));
  assert_non_null(strstr(g_err, "LINK_FAILED"));
  /* Misuse. */
  const char *two_no_dlto[] = {kern, lib, "--arch", "sm_90"};
  assert_int_equal(run(two_no_dlto, 4), 2);
  assert_non_null(strstr(g_err, "unless -dlto"));
  const char *xnvlink_alone[] = {kern, "--arch", "sm_90", "-Xnvlink", "-O3"};
  assert_int_equal(run(xnvlink_alone, 5), 2);
  const char *dlto_ptx[] = {kern, lib, "--arch", "sm_90", "-dlto", "--ptx"};
  assert_int_equal(run(dlto_ptx, 6), 2);
  const char *unlisted[] = {kern, lib, "--arch", "sm_90", "-dlto", "-Xnvlink", "-Xptxas=-v"};
  assert_int_equal(run(unlisted, 7), 2);
  assert_non_null(strstr(g_err, "not one a cached link accepts"));
}

/* A header file is passed with its byte count: a NUL in it is refused (exit 2), not a header
 * silently cut at the NUL. */
static void test_header_with_a_nul_is_refused(void **state) {
  (void)state;
  char nul_hdr[700], arg[800];
  snprintf(nul_hdr, sizeof nul_hdr, "%s/nul.h", g_dir);
  FILE *f = fopen(nul_hdr, "wb");
  assert_non_null(f);
  static const char text[] = "#define VAL 42\n\0#error the rest of the file\n";
  assert_int_equal(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
  fclose(f);
  snprintf(arg, sizeof arg, "val.h=%s", nul_hdr);
  const char *args[] = {g_tmpl, "--arch", "sm_90", "--header", arg, "--name-expr", "t<3>"};
  assert_int_equal(run(args, 7), 2);
  assert_non_null(strstr(g_err, "NUL byte at offset 15"));
  /* An empty header file is an empty header. */
  write_text(nul_hdr, "");
  const char *empty[] = {g_kernel, "--arch", "sm_90", "-DSTEP=1.0f", "--header", arg};
  assert_int_equal(run(empty, 6), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compiles_to_a_file),
      cmocka_unit_test(test_disk_cache_across_invocations),
      cmocka_unit_test(test_uncacheable_source_compiles_uncached),
      cmocka_unit_test(test_compile_error_prints_the_log),
      cmocka_unit_test(test_bad_usage_exits_2),
      cmocka_unit_test(test_header_with_a_nul_is_refused),
      cmocka_unit_test(test_dlto_links_a_library),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
