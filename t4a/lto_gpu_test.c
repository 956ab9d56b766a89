/* LTO device libraries on one real GPU (labels: gpu, single). Exits 77 without a driver.
 *
 * A device library (an integer mixer and a float polynomial, in one translation unit) is compiled
 * once by NVRTC to LTO-IR; a kernel that calls both is compiled to LTO-IR too; nvJitLink links
 * them into an sm_XX CUBIN for the device; the module cache loads it and the kernel runs over
 * 1 << 20 elements. The results are checked element by element against the same functions on
 * the host: the integer mix exactly, the polynomial within 2 ulp-ish (1e-6 relative: LTO may
 * contract a multiply-add into an FMA). Then: the same link again is a link-cache memory hit and
 * the module a module-cache hit; a kernel linked without the library is LINK_FAILED with the
 * undefined symbol in the log, and a PTX input is INVALID_ARGUMENT, with nothing cached.
 * Needs libnvrtc.so.13 and libnvJitLink.so.13. Prints one line per check and a summary:
 *   lto_gpu_test: linked CUBIN <bytes> bytes for sm_XX; 1048576 of 1048576 outputs match */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_driver;

static const char k_library[] =
    "extern \"C\" __device__ unsigned lib_mix(unsigned x) {\n"
    "  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;\n"
    "  return x;\n"
    "}\n"
    "extern \"C\" __device__ float lib_poly(float x) { return (2.0f * x + 3.0f) * x - 1.0f; }\n";

static const char k_kernel[] =
    "extern \"C\" __device__ unsigned lib_mix(unsigned x);\n"
    "extern \"C\" __device__ float lib_poly(float x);\n"
    "extern \"C\" __global__ void apply_lib(const unsigned *in, unsigned *mixed, float *poly,\n"
    "                                       int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) {\n"
    "    mixed[i] = lib_mix(in[i]) + 7u;\n"
    "    poly[i] = lib_poly((float)(in[i] & 1023u) / 1024.0f);\n"
    "  }\n"
    "}\n";

static unsigned host_mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static float host_poly(float x) { return (2.0f * x + 3.0f) * x - 1.0f; }

enum { N = 1 << 20 };

static void test_linked_library_kernel_runs(void **state) {
  (void)state;
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g_driver;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  const char *target = t4a_runtime_target(rt);
  printf("lto_gpu_test: target %s\n", target);

  t4a_nvrtc_artifact *lib = NULL;
  t4a_status st = t4a_runtime_compile_lto(rt, k_library, "lib.cu", &lib);
  if (st == T4A_NVRTC_NOT_FOUND) {
    printf("SKIP: NVRTC is not installed\n");
    CK(t4a_runtime_close(rt));
    skip();
  }
  CK(st);
  assert_int_equal(t4a_nvrtc_artifact_output(lib), T4A_NVRTC_OUTPUT_LTOIR);

  /* The explicit path: compile the kernel, link, load, look up. */
  t4a_nvrtc_artifact *kern = NULL, *linked = NULL;
  CK(t4a_runtime_compile_lto(rt, k_kernel, "apply_lib.cu", &kern));
  const t4a_nvrtc_artifact *in[2] = {kern, lib};
  t4a_jitlink_request lr = T4A_JITLINK_REQUEST_INIT;
  lr.inputs = in;
  lr.num_inputs = 2;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  st = t4a_runtime_link(rt, &lr, &linked, &oc);
  if (st == T4A_JITLINK_NOT_FOUND) {
    printf("FAIL: nvJitLink is not installed (libnvJitLink.so.13)\n");
  }
  CK(st);
  assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(t4a_nvrtc_artifact_output(linked), T4A_NVRTC_OUTPUT_CUBIN);
  size_t cubin_bytes = 0;
  (void)t4a_nvrtc_artifact_data(linked, &cubin_bytes);
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  CK(t4a_runtime_load(rt, linked, &m));
  CK(t4a_runtime_function(rt, m, "apply_lib", &fn));

  unsigned *host_in = malloc(N * sizeof *host_in), *mixed = malloc(N * sizeof *mixed);
  float *poly = malloc(N * sizeof *poly);
  assert_non_null(host_in);
  assert_non_null(mixed);
  assert_non_null(poly);
  for (unsigned i = 0; i < N; i++) host_in[i] = i * 2654435761u + 12345u;
  t4a_buffer *bin = NULL, *bmix = NULL, *bpoly = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof *host_in, &bin));
  CK(t4a_runtime_buffer(rt, N * sizeof *mixed, &bmix));
  CK(t4a_runtime_buffer(rt, N * sizeof *poly, &bpoly));
  CK(t4a_runtime_upload(rt, bin, 0, host_in, N * sizeof *host_in));
  int n = N;
  t4a_arg args[4] = {t4a_arg_buffer(bin, 0), t4a_arg_buffer(bmix, 0), t4a_arg_buffer(bpoly, 0),
                     t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_runtime_launch(rt, fn, (N + 255) / 256, 256, args, 4));
  memset(mixed, 0, N * sizeof *mixed);
  memset(poly, 0, N * sizeof *poly);
  CK(t4a_runtime_download(rt, bmix, 0, mixed, N * sizeof *mixed));
  CK(t4a_runtime_download(rt, bpoly, 0, poly, N * sizeof *poly));
  long ok = 0, bad = 0;
  for (unsigned i = 0; i < N; i++) {
    float want = host_poly((float)(host_in[i] & 1023u) / 1024.0f);
    int good = mixed[i] == host_mix(host_in[i]) + 7u &&
               fabsf(poly[i] - want) <= 1e-6f * fmaxf(1.0f, fabsf(want));
    if (good) {
      ok++;
    } else if (bad++ < 5) {
      printf("lto_gpu_test: element %u: mixed %u (want %u), poly %.9g (want %.9g)\n", i,
             mixed[i], host_mix(host_in[i]) + 7u, poly[i], want);
    }
  }
  printf("lto_gpu_test: linked CUBIN %zu bytes for %s; %ld of %d outputs match\n", cubin_bytes,
         t4a_nvrtc_artifact_target(linked), ok, N);
  assert_int_equal(bad, 0);

  /* The one-call path, twice: the second time the compile and the link are memory hits and the
   * module is the one loaded the first time (no new module). */
  t4a_counter_values v0, v1;
  t4a_function *fn2 = NULL;
  const t4a_nvrtc_artifact *libs[1] = {lib};
  CK(t4a_runtime_kernel_linked(rt, k_kernel, libs, 1, "apply_lib", &fn2));
  t4a_function_release(fn2);
  t4a_runtime_stats(rt, &v0);
  CK(t4a_runtime_kernel_linked(rt, k_kernel, libs, 1, "apply_lib", &fn2));
  t4a_runtime_stats(rt, &v1);
  assert_int_equal(v1.module_loads, v0.module_loads);
  printf("lto_gpu_test: second link: memory hit, module loads %llu -> %llu\n",
         (unsigned long long)v0.module_loads, (unsigned long long)v1.module_loads);
  t4a_function_release(fn2);

  /* Bad input on the real path: the kernel alone (undefined symbols), a PTX input. */
  lr.num_inputs = 1;
  t4a_nvrtc_artifact *none = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_link(rt, &lr, &none, &oc), T4A_LINK_FAILED);
  assert_null(none);
  assert_non_null(oc.log);
  assert_non_null(strstr(oc.log, "lib_mix"));
  printf("lto_gpu_test: without the library: LINK_FAILED, log: %.80s\n", oc.log);
  t4a_nvrtc_artifact *ptx = NULL;
  t4a_nvrtc_request pr = T4A_NVRTC_REQUEST_INIT;
  pr.source = "extern \"C\" __global__ void z(int *p) { *p = 1; }\n";
  pr.output = T4A_NVRTC_OUTPUT_PTX;
  CK(t4a_runtime_compile_request(rt, &pr, &ptx, NULL));
  in[1] = ptx;
  lr.num_inputs = 2;
  assert_int_equal(t4a_runtime_link(rt, &lr, &none, &oc), T4A_INVALID_ARGUMENT);
  assert_null(none);
  printf("lto_gpu_test: a PTX input: INVALID_ARGUMENT\n");

  t4a_nvrtc_outcome_deinit(&oc);
  t4a_nvrtc_artifact_release(ptx);
  t4a_buffer_release(bin);
  t4a_buffer_release(bmix);
  t4a_buffer_release(bpoly);
  free(host_in);
  free(mixed);
  free(poly);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(linked);
  t4a_nvrtc_artifact_release(kern);
  t4a_nvrtc_artifact_release(lib);
  CK(t4a_runtime_close(rt));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_linked_library_kernel_runs),
  };
  return t4a_gpu_test_main("lto_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_driver);
}
