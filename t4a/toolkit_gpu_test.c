/* Kernels that include the CUDA toolkit's headers, compiled by the facade through its artifact
 * cache with the default include roots and run on a real GPU (labels: gpu, single). Exits 77
 * without a driver; needs NVRTC and the CUDA toolkit's headers (fails, never skips, without
 * them: the facade's default roots are what is tested).
 * - cuda_fp16.h and cuda_bf16.h: half and bfloat16 conversions and arithmetic, exact for the
 *   values used; the second compile of the source is a memory hit.
 * - CUB: cub::BlockReduce and cub::BlockScan over 256 threads, exact integer results.
 * - curand_kernel.h, which the include check refuses (design §11): the facade compiles it uncached
 *   (origin UNCACHED, every time); Philox uniforms are in (0, 1], the same for the same seed and
 *   their mean is near 1/2. */
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

static t4a_driver *g_drv;

static t4a_runtime *open_rt(void) {
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g_drv;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  return rt;
}

/* Compiles `source` through the runtime's cache; checks where it came from and returns `name`. */
static t4a_function *compile_kernel(t4a_runtime *rt, const char *source, const char *name,
                                    t4a_nvrtc_origin want) {
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.source = source;
  rq.program_name = name;
  rq.output = T4A_NVRTC_OUTPUT_CUBIN;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_runtime_compile_request(rt, &rq, &a, &oc);
  if (st != T4A_OK) {
    t4a_error e;
    t4a_error_last(&e);
    fail_msg("%s: %s: %s\n%s", name, t4a_status_name(st), e.message, oc.log ? oc.log : "");
  }
  printf("# %s: %s%s%s\n", name, t4a_nvrtc_origin_name(oc.origin),
         oc.uncached_why != NULL ? ": " : "", oc.uncached_why != NULL ? oc.uncached_why : "");
  assert_int_equal(oc.origin, want);
  t4a_nvrtc_outcome_deinit(&oc);
  t4a_module *m = NULL;
  CK(t4a_runtime_load(rt, a, &m));
  t4a_nvrtc_artifact_release(a);
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, name, &fn));
  t4a_module_release(m);
  return fn;
}

static const char k_half[] =
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "extern \"C\" __global__ void halves(const float *x, float *out, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  __half h = __hmul(__float2half(x[i]), __float2half(2.0f));\n"
    "  __nv_bfloat16 b = __float2bfloat16(x[i]);\n"
    "  out[i] = __half2float(h) + __bfloat162float(b);\n"
    "}\n";

static void test_half_and_bfloat16_kernel(void **state) {
  (void)state;
  enum { N = 256 };
  t4a_runtime *rt = open_rt();
  t4a_function *fn = compile_kernel(rt, k_half, "halves", T4A_NVRTC_ORIGIN_COMPILED);
  t4a_function_release(fn);
  fn = compile_kernel(rt, k_half, "halves", T4A_NVRTC_ORIGIN_MEMORY);
  float x[N], out[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 64) * 0.25f - 8.0f; /* exact in both */
  t4a_buffer *dx = NULL, *dout = NULL;
  CK(t4a_runtime_buffer(rt, sizeof x, &dx));
  CK(t4a_runtime_buffer(rt, sizeof out, &dout));
  CK(t4a_runtime_upload(rt, dx, 0, x, sizeof x));
  int n = N;
  t4a_arg args[3] = {t4a_arg_buffer(dx, 0), t4a_arg_buffer(dout, 0), t4a_arg_scalar(&n, 4)};
  CK(t4a_runtime_launch(rt, fn, N / 128, 128, args, 3));
  CK(t4a_runtime_download(rt, dout, 0, out, sizeof out));
  for (int i = 0; i < N; i++) {
    if (out[i] != 3.0f * x[i]) fail_msg("out[%d] = %g, want %g", i, out[i], 3.0f * x[i]);
  }
  t4a_buffer_release(dx);
  t4a_buffer_release(dout);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
}

static const char k_cub[] =
    "#include <cub/block/block_reduce.cuh>\n"
    "#include <cub/block/block_scan.cuh>\n"
    "extern \"C\" __global__ void reduce_scan(const int *x, int *sum, int *prefix) {\n"
    "  using R = cub::BlockReduce<int, 256>;\n"
    "  using S = cub::BlockScan<int, 256>;\n"
    "  __shared__ typename R::TempStorage rt;\n"
    "  __shared__ typename S::TempStorage st;\n"
    "  int v = x[threadIdx.x];\n"
    "  int total = R(rt).Sum(v);\n"
    "  if (threadIdx.x == 0) *sum = total;\n"
    "  int p;\n"
    "  S(st).InclusiveSum(v, p);\n"
    "  prefix[threadIdx.x] = p;\n"
    "}\n";

static void test_cub_block_reduce_and_scan(void **state) {
  (void)state;
  enum { N = 256 };
  t4a_runtime *rt = open_rt();
  t4a_function *fn = compile_kernel(rt, k_cub, "reduce_scan", T4A_NVRTC_ORIGIN_COMPILED);
  int x[N], prefix[N], sum = 0;
  for (int i = 0; i < N; i++) x[i] = (i * 7919) % 1000 - 500;
  t4a_buffer *dx = NULL, *dsum = NULL, *dprefix = NULL;
  CK(t4a_runtime_buffer(rt, sizeof x, &dx));
  CK(t4a_runtime_buffer(rt, sizeof sum, &dsum));
  CK(t4a_runtime_buffer(rt, sizeof prefix, &dprefix));
  CK(t4a_runtime_upload(rt, dx, 0, x, sizeof x));
  t4a_arg args[3] = {t4a_arg_buffer(dx, 0), t4a_arg_buffer(dsum, 0), t4a_arg_buffer(dprefix, 0)};
  CK(t4a_runtime_launch(rt, fn, 1, N, args, 3));
  CK(t4a_runtime_download(rt, dsum, 0, &sum, sizeof sum));
  CK(t4a_runtime_download(rt, dprefix, 0, prefix, sizeof prefix));
  int run = 0;
  for (int i = 0; i < N; i++) {
    run += x[i];
    if (prefix[i] != run) fail_msg("prefix[%d] = %d, want %d", i, prefix[i], run);
  }
  if (sum != run) fail_msg("sum = %d, want %d", sum, run);
  t4a_buffer_release(dx);
  t4a_buffer_release(dsum);
  t4a_buffer_release(dprefix);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
}

static const char k_curand[] =
    "#include <curand_kernel.h>\n"
    "extern \"C\" __global__ void uniforms(float *out, unsigned long long seed, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  curandStatePhilox4_32_10_t s;\n"
    "  curand_init(seed, i, 0, &s);\n"
    "  out[i] = curand_uniform(&s);\n"
    "}\n";

/* Runs the curand kernel with `seed` into out (n floats). */
static void uniforms(t4a_runtime *rt, t4a_function *fn, unsigned long long seed, float *out,
                     int n) {
  t4a_buffer *d = NULL;
  CK(t4a_runtime_buffer(rt, (size_t)n * sizeof *out, &d));
  t4a_arg args[3] = {t4a_arg_buffer(d, 0), t4a_arg_scalar(&seed, 8), t4a_arg_scalar(&n, 4)};
  CK(t4a_runtime_launch(rt, fn, (uint32_t)(n / 256), 256, args, 3));
  CK(t4a_runtime_download(rt, d, 0, out, (size_t)n * sizeof *out));
  t4a_buffer_release(d);
}

static void test_curand_kernel_compiles_uncached(void **state) {
  (void)state;
  enum { N = 4096 };
  t4a_runtime *rt = open_rt();
  t4a_function *fn = compile_kernel(rt, k_curand, "uniforms", T4A_NVRTC_ORIGIN_UNCACHED);
  t4a_function *again = compile_kernel(rt, k_curand, "uniforms", T4A_NVRTC_ORIGIN_UNCACHED);
  static float a[N], b[N], c[N];
  uniforms(rt, fn, 1234, a, N);
  uniforms(rt, again, 1234, b, N);
  uniforms(rt, fn, 99, c, N);
  double mean = 0;
  int same_c = 0;
  for (int i = 0; i < N; i++) {
    if (!(a[i] > 0.0f && a[i] <= 1.0f)) fail_msg("a[%d] = %g is not in (0, 1]", i, a[i]);
    if (a[i] != b[i]) fail_msg("the same seed gave a[%d] = %g and %g", i, a[i], b[i]);
    same_c += a[i] == c[i];
    mean += a[i];
  }
  mean /= N;
  printf("# %d Philox uniforms: mean %.4f; %d equal under another seed\n", N, mean, same_c);
  assert_true(mean > 0.47 && mean < 0.53); /* 4096 uniforms: the mean's sd is 0.0045 */
  assert_true(same_c < 16);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_uncached, 2);
  t4a_function_release(fn);
  t4a_function_release(again);
  CK(t4a_runtime_close(rt));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_and_bfloat16_kernel),
      cmocka_unit_test(test_cub_block_reduce_and_scan),
      cmocka_unit_test(test_curand_kernel_compiles_uncached),
  };
  return t4a_gpu_test_main("toolkit_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
