/* t4a_launch on a real GPU (labels: gpu, single). Exits 77 without a driver.
 * NVRTC compiles real CUDA C (CUBIN and PTX) for the device's architecture; the module cache
 * loads the artifacts; checked launches run saxpy on 1M floats (checked against the CPU), a
 * kernel with more than 48 KiB of dynamic shared memory, typed refusals (a 2048-thread block
 * before anything is enqueued; a launch the driver refuses synchronously), a descriptor and a
 * raw-bytes launch with a struct argument, the warm chain (no heap allocation, at most 20 events
 * per 10,000 launches), the L2 persistence calls, and a 100-kernel launch chain replayed 10,000
 * times with rebinds and slot writes between replays. Needs NVRTC (libnvrtc.so.13). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/chain.h"
#include "t4a/ctx.h"
#include "t4a/graph.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/nvrtc.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a/xfer_file.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

static const char k_source[] =
    "struct S { int a; double b; char c; };\n"
    "extern \"C\" __global__ void saxpy(int n, float a, const float *x, float *y) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void big_shared(const int *in, int *out, int words) {\n"
    "  extern __shared__ int s[];\n"
    "  for (int i = threadIdx.x; i < words; i += blockDim.x) s[i] = in[i];\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < words; i += blockDim.x) out[i] = s[words - 1 - i];\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(64) bounded(int *p) {\n"
    "  p[threadIdx.x] = threadIdx.x;\n"
    "}\n"
    "extern \"C\" __global__ void affine(long long *out, S s, short k) {\n"
    "  out[0] = (long long)((s.a + s.b) * k) + s.c;\n"
    "}\n"
    "extern \"C\" __global__ void count(unsigned long long *p) { atomicAdd(p, 1ull); }\n"
    "extern \"C\" __global__ void noop() {}\n"
    "extern \"C\" __global__ void add_const(int *p, int a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += a + i;\n"
    "}\n"
    "extern \"C\" __global__ void add_slot(int *p, const int *v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += *v;\n"
    "}\n";

typedef struct affine_s {
  int a;
  double b;
  char c;
} affine_s;

typedef struct env {
  t4a_nvrtc_lib *nvrtc;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  t4a_module_cache *cache;
  char target[16];
} env;

static int env_open(env *e) {
  memset(e, 0, sizeof *e);
  t4a_device_info info;
  if (t4a_device_query(g_drv, 0, &info) != T4A_OK) return 0;
  snprintf(e->target, sizeof e->target, "sm_%d%d", info.cc_major, info.cc_minor);
  t4a_status st = t4a_nvrtc_lib_open(NULL, &e->nvrtc);
  if (st != T4A_OK) {
    char buf[512];
    t4a_error err;
    t4a_error_last(&err);
    fail_msg("NVRTC did not open: %s", t4a_error_format(&err, buf, sizeof buf));
  }
  CK(t4a_lane_create(g_drv, 0, NULL, &e->lane));
  CK(t4a_mem_pool_create(e->lane, NULL, &e->pool));
  CK(t4a_retire_create(e->lane, NULL, &e->retire));
  CK(t4a_xfer_create(e->retire, NULL, &e->xfer));
  CK(t4a_module_cache_create(e->retire, NULL, &e->cache));
  return 1;
}

static void env_close(env *e) {
  t4a_module_cache_destroy(e->cache);
  t4a_xfer_destroy(e->xfer);
  CK(t4a_retire_destroy(e->retire));
  t4a_mem_pool_release(e->pool);
  t4a_lane_release(e->lane);
  t4a_nvrtc_lib_release(e->nvrtc);
}

static t4a_nvrtc_artifact *compile(env *e, t4a_nvrtc_output output) {
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.program_name = "launch_gpu_test.cu";
  rq.source = k_source;
  rq.target = e->target;
  rq.output = output;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  t4a_nvrtc_artifact *a = NULL;
  t4a_status st = t4a_nvrtc_compile(e->nvrtc, &rq, &a, &oc);
  if (st != T4A_OK) fail_msg("compile failed: %s", oc.log != NULL ? oc.log : "(no log)");
  t4a_nvrtc_outcome_deinit(&oc);
  return a;
}

static t4a_function *fn_of(t4a_module *m, const char *name) {
  t4a_function *f = NULL;
  CK(t4a_module_get_function(m, name, &f));
  return f;
}

static t4a_buffer *upload(env *e, const void *src, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(e->pool, bytes, 0, 0, &b));
  CK(t4a_xfer_upload(e->xfer, b, 0, src, bytes));
  return b;
}

static void download(env *e, t4a_buffer *b, void *dst, size_t bytes) {
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(e->xfer, b, 0, dst, bytes, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
}

static t4a_launch_config cfg1(uint32_t grid, uint32_t block, uint32_t shared) {
  t4a_launch_config c = {{grid, 1, 1}, {block, 1, 1}, shared};
  return c;
}

/* saxpy on 1M floats from `m`, checked against the CPU. */
static void run_saxpy(env *e, t4a_module *m) {
  const int n = 1 << 20;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *back = malloc(n * sizeof *y);
  for (int i = 0; i < n; i++) {
    x[i] = (float)(i % 1000) * 0.5f;
    y[i] = (float)(i % 77) - 3.0f;
  }
  t4a_buffer *bx = upload(e, x, n * sizeof *x), *by = upload(e, y, n * sizeof *y);
  t4a_function *f = fn_of(m, "saxpy");
  float a = 2.5f;
  int nn = n;
  t4a_arg args[4] = {t4a_arg_scalar(&nn, sizeof nn), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_buffer(bx, 0), t4a_arg_buffer(by, 0)};
  t4a_launch_config c = cfg1((uint32_t)(n + 255) / 256, 256, 0);
  CK(t4a_launch(e->retire, f, &c, args, 4));
  download(e, by, back, n * sizeof *back);
  for (int i = 0; i < n; i++) {
    float want = fmaf(a, x[i], y[i]);
    if (fabsf(back[i] - want) > 1e-5f * fmaxf(1.0f, fabsf(want))) {
      fail_msg("saxpy[%d] = %g, want %g", i, (double)back[i], (double)want);
    }
  }
  t4a_function_release(f);
  t4a_buffer_release(bx);
  t4a_buffer_release(by);
  free(x);
  free(y);
  free(back);
}

static void test_saxpy_cubin_and_ptx(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_nvrtc_artifact *ptx = compile(&e, T4A_NVRTC_OUTPUT_PTX);
  t4a_module *mc = NULL, *mc2 = NULL, *mp = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &mc));
  CK(t4a_module_load_artifact(e.cache, cubin, &mc2)); /* a hit: one load */
  assert_ptr_equal(mc, mc2);
  CK(t4a_module_load_artifact(e.cache, ptx, &mp)); /* the driver JIT-compiles the PTX */
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(e.cache, &s);
  assert_int_equal(s.loads, 2);
  assert_int_equal(s.hits, 1);
  run_saxpy(&e, mc);
  run_saxpy(&e, mp);
  /* The PTX's bytes through t4a_module_load: told PTX by their text. */
  size_t bytes = 0;
  const void *text = t4a_nvrtc_artifact_data(ptx, &bytes);
  t4a_module *mt = NULL;
  CK(t4a_module_load(e.cache, text, bytes, T4A_IMAGE_AUTO, &mt));
  run_saxpy(&e, mt);
  /* The parameter list as the driver reports it. */
  t4a_function *f = fn_of(mc, "saxpy");
  uint32_t np = 0;
  int known = 0;
  CK(t4a_function_num_params(f, &np, &known));
  assert_int_equal(np, 4);
  assert_int_equal(known, 1);
  t4a_function_release(f);
  t4a_function *missing = NULL;
  assert_int_equal(t4a_module_get_function(mc, "nope", &missing), T4A_UNKNOWN_ENTRY_POINT);
  t4a_module_release(mc);
  t4a_module_release(mc2);
  t4a_module_release(mp);
  t4a_module_release(mt);
  t4a_nvrtc_artifact_release(cubin);
  t4a_nvrtc_artifact_release(ptx);
  CK(t4a_retire_wait(e.retire));
  env_close(&e);
}

static void test_big_shared_and_refusals(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &m));
  /* 100 KiB of dynamic shared memory: the function's limit is raised for it. */
  const int words = 100 * 1024 / 4;
  int *in = malloc(words * sizeof *in), *out = malloc(words * sizeof *out);
  for (int i = 0; i < words; i++) in[i] = i * 3 + 1;
  t4a_buffer *bi = upload(&e, in, words * sizeof *in), *bo = NULL;
  CK(t4a_buffer_create(e.pool, words * sizeof *out, 0, 0, &bo));
  t4a_function *big = fn_of(m, "big_shared");
  int w = words;
  t4a_arg args[3] = {t4a_arg_buffer(bi, 0), t4a_arg_buffer(bo, 0), t4a_arg_scalar(&w, 4)};
  t4a_launch_config c = cfg1(1, 256, (uint32_t)(words * 4));
  CK(t4a_launch(e.retire, big, &c, args, 3));
  download(&e, bo, out, words * sizeof *out);
  for (int i = 0; i < words; i++) assert_int_equal(out[i], in[words - 1 - i]);

  /* 2048 threads: refused before anything is enqueued. */
  t4a_counter_values v0, v1;
  t4a_lane_stats(e.lane, &v0);
  t4a_launch_config c2048 = cfg1(1, 2048, 0);
  assert_int_equal(t4a_launch(e.retire, big, &c2048, args, 3), T4A_INVALID_LAUNCH);
  /* More than __launch_bounds__(64) allows: the driver refuses it synchronously. */
  t4a_function *bounded = fn_of(m, "bounded");
  t4a_arg barg = t4a_arg_buffer(bo, 0);
  t4a_launch_config c1024 = cfg1(1, 1024, 0);
  assert_int_equal(t4a_launch(e.retire, bounded, &c1024, &barg, 1), T4A_DRIVER_ERROR);
  t4a_error err;
  t4a_error_last(&err);
  printf("# __launch_bounds__(64) with 1024 threads: %s %s (%d)\n", err.entry, err.code_name,
         err.code);
  assert_string_equal(err.entry, "cuLaunchKernel");
  /* CUDA_ERROR_INVALID_VALUE (1) expected; CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701) is the
   * driver's other refusal of a block its kernel cannot run. Both enqueue nothing. */
  assert_true(err.code == 1 || err.code == 701);
  t4a_lane_stats(e.lane, &v1);
  assert_int_equal(v1.launches, v0.launches);
  assert_int_equal(v1.admissions, v0.admissions);
  struct t4a_retire_stats rs;
  t4a_retire_stats(e.retire, &rs);
  assert_int_equal(rs.quarantined_held, 0);
  /* The lane is fine afterwards. */
  t4a_launch_config c64 = cfg1(1, 64, 0);
  CK(t4a_launch(e.retire, bounded, &c64, &barg, 1));
  CK(t4a_retire_wait(e.retire));
  CK(t4a_lane_check(e.lane));

  t4a_function_release(big);
  t4a_function_release(bounded);
  t4a_buffer_release(bi);
  t4a_buffer_release(bo);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(cubin);
  free(in);
  free(out);
  env_close(&e);
}

static void test_struct_descriptor_and_raw_bytes(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &m));
  t4a_function *aff = fn_of(m, "affine");
  size_t off[3], size[3];
  for (uint32_t i = 0; i < 3; i++) CK(t4a_function_param(aff, i, &off[i], &size[i]));
  printf("# affine layout: (%zu,%zu) (%zu,%zu) (%zu,%zu)\n", off[0], size[0], off[1], size[1],
         off[2], size[2]);
  assert_int_equal(size[1], sizeof(affine_s));
  t4a_buffer *out = NULL;
  CK(t4a_buffer_create(e.pool, 8, 0, 0, &out));
  affine_s s = {3, 0.5, 7};
  short k = 4;
  t4a_arg args[3] = {t4a_arg_buffer(out, 0), t4a_arg_scalar(&s, sizeof s),
                     t4a_arg_scalar(&k, sizeof k)};
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(e.retire, &(t4a_launch_table_options){.capacity = 4}, &t));
  uint32_t id = 0;
  t4a_launch_config c = cfg1(1, 1, 0);
  CK(t4a_descriptor_register(t, aff, &c, args, 3, &id));
  CK(t4a_descriptor_fire(t, id));
  long long got = 0;
  download(&e, out, &got, 8);
  assert_int_equal(got, 21);
  /* Raw bytes at the driver's offsets. */
  unsigned char raw[64];
  memset(raw, 0, sizeof raw);
  t4a_devptr d = t4a_buffer_devptr(out);
  s.a = 10;
  memcpy(raw + off[0], &d, 8);
  memcpy(raw + off[1], &s, sizeof s);
  memcpy(raw + off[2], &k, 2);
  const uint32_t offs[3] = {(uint32_t)off[0], (uint32_t)off[1], (uint32_t)off[2]};
  CK(t4a_launch_raw(e.retire, aff, &c, raw, off[2] + size[2], offs, 3));
  download(&e, out, &got, 8);
  assert_int_equal(got, (long long)((10 + 0.5) * 4) + 7);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(out);
  t4a_function_release(aff);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(cubin);
  env_close(&e);
}

static void test_warm_chain(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &m));
  t4a_function *f = fn_of(m, "count");
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(e.pool, 8, 0, T4A_BUFFER_ZERO, &b));
  t4a_arg arg = t4a_arg_buffer(b, 0);
  t4a_launch_config c = cfg1(1, 32, 0);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(e.retire, &(t4a_launch_table_options){.capacity = 1}, &t));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, f, &c, &arg, 1, &id));
  for (int i = 0; i < 40000; i++) CK(t4a_launch(e.retire, f, &c, &arg, 1)); /* warm up */
  for (int phase = 0; phase < 2; phase++) {
    t4a_counter_values v0, v1;
    t4a_lane_stats(e.lane, &v0);
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < 10000; i++) {
      if (phase == 0) {
        CK(t4a_launch(e.retire, f, &c, &arg, 1));
      } else {
        CK(t4a_descriptor_fire(t, id));
      }
    }
    uint64_t heap1 = t4a_heap_allocations();
    t4a_lane_stats(e.lane, &v1);
    printf("# %s: %llu heap allocations, %llu events, %llu host waits per 10,000\n",
           phase == 0 ? "checked launches" : "descriptor fires",
           (unsigned long long)(heap1 - heap0),
           (unsigned long long)(v1.events_recorded - v0.events_recorded),
           (unsigned long long)(v1.host_waits - v0.host_waits));
    assert_int_equal(heap1, heap0);
    assert_true(v1.events_recorded - v0.events_recorded <= 20);
    assert_int_equal(v1.launches - v0.launches, 10000);
  }
  unsigned long long total = 0;
  download(&e, b, &total, 8);
  assert_int_equal(total, 32ull * 60000);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(b);
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(cubin);
  env_close(&e);
}


/* add_const accumulates into two 1024-int buffers: after the launches, element i of buffer k is
 * want[k] + calls[k] * i (each launch adds its scalar plus the element's index). Downloads both
 * and checks every element. */
static void check_accumulated(env *e, t4a_buffer *const p[2], const long long want[2],
                              const long long calls[2]) {
  enum { N = 1024 };
  int back[2][N];
  download(e, p[0], back[0], sizeof back[0]);
  download(e, p[1], back[1], sizeof back[1]);
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < N; i++) {
      long long expect = want[k] + calls[k] * i;
      if (back[k][i] != (int)expect) {
        fail_msg("buffer %d [%d] = %d, want %lld", k, i, back[k][i], expect);
      }
    }
  }
}

/* A descriptor fired as its own one-node graph (GRAPH strategy) 10,000 times with its
 * arguments changed before every fire (output buffer and scalar), plain checked launches of the
 * same kernel interleaved every 100 fires: every fire sees its own arguments, in stream order;
 * no heap allocation; at most one event per 512 admissions. */
static void test_graph_fires_with_changing_arguments(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &m));
  t4a_function *f = fn_of(m, "add_const");
  enum { N = 1024, FIRES = 10000 };
  t4a_buffer *p[2] = {NULL, NULL};
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[0]));
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[1]));
  int n = N, a = 0, one = 1;
  t4a_arg args[3] = {t4a_arg_buffer(p[0], 0), t4a_arg_scalar(&a, 4), t4a_arg_scalar(&n, 4)};
  t4a_launch_config c = cfg1(N / 256, 256, 0);
  t4a_launch_table_options o = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  o.capacity = 1;
  o.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  o.launch.graph_after = 1;
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(e.retire, &o, &t));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, f, &c, args, 3, &id));
  long long want[2] = {0, 0}, calls[2] = {0, 0};
  t4a_counter_values v0, v1;
  t4a_lane_stats(e.lane, &v0);
  uint64_t heap0 = t4a_heap_allocations();
  for (int i = 0; i < FIRES; i++) {
    int k = (i * 7 / 3) & 1;
    a = i % 1000;
    args[0] = t4a_arg_buffer(p[k], 0);
    CK(t4a_descriptor_rebind_fire(t, id, args, 3));
    want[k] += a;
    calls[k]++;
    if (i % 100 == 99) {
      t4a_arg plain[3] = {t4a_arg_buffer(p[0], 0), t4a_arg_scalar(&one, 4),
                          t4a_arg_scalar(&n, 4)};
      CK(t4a_launch(e.retire, f, &c, plain, 3));
      want[0] += 1;
      calls[0]++;
    }
  }
  uint64_t heap1 = t4a_heap_allocations();
  t4a_lane_stats(e.lane, &v1);
  check_accumulated(&e, p, want, calls);
  struct t4a_launch_table_stats s;
  t4a_launch_table_stats(t, &s);
  printf("# GRAPH fires with a rebind each: %llu graph fires, %llu node updates, %llu builds, "
         "%llu fallbacks; %llu heap allocations, %llu events, %llu host waits for %d admissions\n",
         (unsigned long long)s.graph_fires, (unsigned long long)s.graph_updates,
         (unsigned long long)s.graph_builds, (unsigned long long)s.graph_fallbacks,
         (unsigned long long)(heap1 - heap0),
         (unsigned long long)(v1.events_recorded - v0.events_recorded),
         (unsigned long long)(v1.host_waits - v0.host_waits), FIRES + FIRES / 100);
  assert_int_equal(s.graph_fires, FIRES);
  assert_int_equal(s.graph_builds, 1);
  assert_int_equal(s.graph_updates, FIRES - 1);
  assert_int_equal(s.graph_fallbacks, 0);
  assert_int_equal(heap1, heap0);
  assert_true(v1.events_recorded - v0.events_recorded <= (FIRES + FIRES / 100) / 512 + 1);
  assert_int_equal(v1.host_waits - v0.host_waits, 0);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(p[0]);
  t4a_buffer_release(p[1]);
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(cubin);
  env_close(&e);
}


/* Checked launches through the function's own one-node graph (a GRAPH module cache): 10,000
 * launches alternating output buffers and scalars (a node update each), correct in order. */
static void test_checked_launches_through_function_graph(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module_cache_options mo = T4A_MODULE_CACHE_OPTIONS_INIT;
  mo.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  mo.launch.graph_after = 2;
  t4a_module_cache *gc = NULL;
  CK(t4a_module_cache_create(e.retire, &mo, &gc));
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(gc, cubin, &m));
  t4a_function *f = fn_of(m, "add_const");
  enum { N = 1024, LAUNCHES = 10000 };
  t4a_buffer *p[2] = {NULL, NULL};
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[0]));
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[1]));
  int n = N, a = 0;
  t4a_launch_config c = cfg1(N / 256, 256, 0);
  long long want[2] = {0, 0}, calls[2] = {0, 0};
  t4a_counter_values v0, v1;
  t4a_lane_stats(e.lane, &v0);
  for (int i = 0; i < LAUNCHES; i++) {
    int k = (i / 3) & 1;
    a = (i * 13) % 777;
    t4a_arg args[3] = {t4a_arg_buffer(p[k], 0), t4a_arg_scalar(&a, 4), t4a_arg_scalar(&n, 4)};
    CK(t4a_launch(e.retire, f, &c, args, 3));
    want[k] += a;
    calls[k]++;
  }
  t4a_lane_stats(e.lane, &v1);
  check_accumulated(&e, p, want, calls);
  printf("# checked launches through the function's graph: %llu graph launches, %llu updates, "
         "%llu builds, %llu fallbacks of %d\n",
         (unsigned long long)(v1.launch_graph_fires - v0.launch_graph_fires),
         (unsigned long long)(v1.launch_graph_updates - v0.launch_graph_updates),
         (unsigned long long)(v1.launch_graphs_built - v0.launch_graphs_built),
         (unsigned long long)(v1.launch_graph_fallbacks - v0.launch_graph_fallbacks), LAUNCHES);
  assert_int_equal(v1.launch_graph_fires - v0.launch_graph_fires, LAUNCHES - 1);
  assert_int_equal(v1.launch_graph_fallbacks - v0.launch_graph_fallbacks, 0);
  t4a_buffer_release(p[0]);
  t4a_buffer_release(p[1]);
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_module_cache_destroy(gc);
  t4a_nvrtc_artifact_release(cubin);
  env_close(&e);
}

/* What t4a_launch_calibrate measures and chooses on this device (printed; the choice is the
 * calibration's to make, so only its shape is asserted). */
static void test_calibration(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_nvrtc_artifact *cubin = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, cubin, &m));
  t4a_function *f = fn_of(m, "noop");
  t4a_launch_calibration c;
  CK(t4a_launch_calibrate(e.retire, f, 4096, &c));
  printf("# calibration: plain %.0f ns, graph %.0f ns, graph + rebind %.0f ns, build %.0f ns, "
         "%llu device bytes per graph -> %s after %u fires\n",
         c.plain_ns, c.graph_ns, c.graph_rebind_ns, c.build_ns,
         (unsigned long long)c.device_bytes_per_graph,
         c.strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "GRAPH" : "PLAIN", c.graph_after);
  assert_int_equal(c.fires, 4096);
  assert_true(c.plain_ns > 0 && c.graph_ns > 0 && c.build_ns >= 0);
  assert_true(c.graph_after >= 2 && c.graph_after <= 4096);
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(cubin);
  env_close(&e);
}

static void test_l2_persistence(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("device 0 cannot be queried");
  t4a_device_info info;
  CK(t4a_device_query(g_drv, 0, &info));
  size_t max = (size_t)info.max_persisting_l2_bytes, applied = 0;
  /* The driver rounds the limit to its own granularity (the H200 applied 7.5 MiB for 4 MiB). */
  CK(t4a_l2_set_persisting_limit(e.lane, 4 << 20, &applied));
  printf("# persisting L2 limit: asked 4 MiB, applied %zu bytes (device maximum %zu)\n", applied,
         max);
  assert_true(applied > 0 && applied <= max);
  CK(t4a_l2_set_persisting_limit(e.lane, (size_t)1 << 40, &applied));
  printf("# persisting L2 limit: asked 1 TiB, applied %zu bytes\n", applied);
  assert_true(applied > 0 && applied <= max);
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(e.pool, 8 << 20, 0, 0, &b));
  CK(t4a_l2_set_window(e.lane, t4a_buffer_devptr(b), 8 << 20, 0.75f));
  assert_int_equal(t4a_l2_set_window(e.lane, t4a_buffer_devptr(b), 64, 2.0f), T4A_INVALID_ARGUMENT);
  CK(t4a_l2_set_window(e.lane, 0, 0, 0.0f));
  CK(t4a_l2_reset(e.lane));
  t4a_buffer_release(b);
  env_close(&e);
}

/* A captured graph — a slot upload (the value a replay adds), a kernel, a copy within the lane —
 * replayed 1,000 times with correct results; the buffers and module the caller dropped after the
 * capture stay alive for the replays; one host wait at the end. */
static void test_graph_replayed_1000_times(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("env");
  t4a_nvrtc_artifact *art = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, art, &m));
  t4a_function *add = fn_of(m, "add_slot");
  const int n = 1 << 20;
  int *host = malloc((size_t)n * sizeof *host), *back = malloc((size_t)n * sizeof *back);
  assert_non_null(host);
  assert_non_null(back);
  for (int i = 0; i < n; i++) host[i] = i;
  t4a_buffer *x = upload(&e, host, (size_t)n * sizeof *host), *y = NULL, *v = NULL;
  CK(t4a_buffer_create(e.pool, (size_t)n * sizeof *host, 0, 0, &y));
  CK(t4a_buffer_create(e.pool, sizeof(int), 0, 0, &v));
  t4a_slots *slots = NULL;
  uint32_t slot = 0;
  CK(t4a_slots_create(t4a_lane_holder(e.lane), sizeof(int), 1, &slots));
  CK(t4a_slot_acquire(slots, &slot));
  CK(t4a_retire_wait(e.retire)); /* the upload ran: the capture starts on a quiet lane */
  int one = 1;
  t4a_launch_config cfg = {{(uint32_t)(n / 256), 1, 1}, {256, 1, 1}, 0};
  t4a_arg args[3] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(v, 0), t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_graph_capture_begin(e.retire));
  CK(t4a_xfer_slot_upload(e.xfer, slots, slot, &one, sizeof one, v, 0));
  CK(t4a_launch(e.retire, add, &cfg, args, 3));
  CK(t4a_xfer_copy(e.xfer, y, 0, e.xfer, x, 0, (size_t)n * sizeof *host, T4A_COPY_AUTO, NULL,
                   NULL));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_end(e.retire, &g));
  assert_int_equal(t4a_graph_num_keepalives(g), 4); /* the module, x, v, y */
  t4a_function_release(add);
  t4a_module_release(m);
  t4a_module_cache_clear(e.cache);
  t4a_buffer_release(x);
  t4a_buffer_release(v);
  t4a_counter_values before, after;
  t4a_lane_stats(e.lane, &before);
  for (int r = 0; r < 1000; r++) CK(t4a_graph_launch(g));
  t4a_lane_stats(e.lane, &after);
  assert_int_equal(after.graph_launches - before.graph_launches, 1000);
  assert_int_equal(after.host_waits, before.host_waits); /* no host wait to replay */
  download(&e, y, back, (size_t)n * sizeof *back);
  for (int i = 0; i < n; i++) {
    if (back[i] != i + 1000) fail_msg("y[%d] = %d, want %d", i, back[i], i + 1000);
  }
  printf("# 1000 replays: events recorded %llu, host waits %llu\n",
         (unsigned long long)(after.events_recorded - before.events_recorded),
         (unsigned long long)(after.host_waits - before.host_waits));
  t4a_graph_release(g);
  CK(t4a_retire_wait(e.retire));
  t4a_buffer_release(y);
  t4a_slot_release(slots, slot);
  t4a_slots_destroy(slots);
  t4a_nvrtc_artifact_release(art);
  free(host);
  free(back);
  env_close(&e);
}

/* A launch chain of a slot upload and 100 descriptor fires (add_slot, then add_const into one of
 * two buffers), replayed 10,000 times. Between replays: every 7th replay rebinds one fire's
 * scalar, every 13th moves one fire to the other buffer (each a kernel-node update at the next
 * replay, never a re-instantiation), and every 2,500th replay waits and writes a new value into
 * the slot. Every element of both buffers is checked against the CPU's account. The caller drops
 * its module and the recorded buffers' handles it does not need right after recording. */
static void test_chain_100_kernels_10000_replays(void **state) {
  (void)state;
  env e;
  if (!env_open(&e)) fail_msg("env");
  t4a_nvrtc_artifact *art = compile(&e, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e.cache, art, &m));
  t4a_function *add = fn_of(m, "add_const"), *adds = fn_of(m, "add_slot");
  enum { N = 1024, K = 100, REPLAYS = 10000 };
  t4a_buffer *p[2] = {NULL, NULL}, *v = NULL;
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[0]));
  CK(t4a_buffer_create(e.pool, N * 4, 0, T4A_BUFFER_ZERO, &p[1]));
  CK(t4a_buffer_create(e.pool, sizeof(int), 0, 0, &v));
  t4a_slots *slots = NULL;
  uint32_t slot = 0;
  CK(t4a_slots_create(t4a_lane_holder(e.lane), sizeof(int), 1, &slots));
  CK(t4a_slot_acquire(slots, &slot));
  int n = N, slot_value = 2;
  t4a_launch_config c = cfg1(N / 256, 256, 0);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(e.retire, &(t4a_launch_table_options){.capacity = K + 1}, &t));
  uint32_t sid = 0, ids[K];
  int target[K], scalar[K];
  t4a_arg sargs[3] = {t4a_arg_buffer(p[0], 0), t4a_arg_buffer(v, 0), t4a_arg_scalar(&n, 4)};
  CK(t4a_descriptor_register(t, adds, &c, sargs, 3, &sid));
  for (int k = 0; k < K; k++) {
    target[k] = k % 2;
    scalar[k] = k % 10;
    t4a_arg args[3] = {t4a_arg_buffer(p[target[k]], 0), t4a_arg_scalar(&scalar[k], 4),
                       t4a_arg_scalar(&n, 4)};
    CK(t4a_descriptor_register(t, add, &c, args, 3, &ids[k]));
  }
  CK(t4a_retire_wait(e.retire)); /* the zero fills ran: the recording starts on a quiet lane */
  CK(t4a_chain_begin(t));
  CK(t4a_xfer_slot_upload(e.xfer, slots, slot, &slot_value, sizeof slot_value, v, 0));
  CK(t4a_descriptor_fire(t, sid));
  for (int k = 0; k < K; k++) CK(t4a_descriptor_fire(t, ids[k]));
  t4a_chain *ch = NULL;
  CK(t4a_chain_end(t, &ch));
  t4a_buffer_release(v); /* the chain keeps it */
  t4a_function_release(add);
  t4a_function_release(adds);
  t4a_module_release(m);
  t4a_module_cache_clear(e.cache);
  long long want[2] = {0, 0}, calls[2] = {0, 0};
  uint64_t expected_updates = 0, waits = 0, wait_host_waits = 0;
  t4a_counter_values v0, v1;
  t4a_lane_stats(e.lane, &v0);
  for (int r = 0; r < REPLAYS; r++) {
    int touched = -1;
    if (r % 7 == 3) {
      int k = (r / 7) % K;
      scalar[k] = (scalar[k] + 3) % 10;
      t4a_arg a = t4a_arg_scalar(&scalar[k], 4);
      CK(t4a_descriptor_rebind(t, ids[k], 1, &a));
      touched = k;
      expected_updates++;
    }
    if (r % 13 == 5) {
      int k = (r * 5) % K;
      target[k] ^= 1;
      t4a_arg b = t4a_arg_buffer(p[target[k]], 0);
      CK(t4a_descriptor_rebind(t, ids[k], 0, &b));
      if (k != touched) expected_updates++;
    }
    if (r > 0 && r % 2500 == 0) {
      /* No replay reads the slot now. The wait blocks on each epoch still pending (one host wait
       * per sealed epoch on a real GPU): counted apart from the replays'. */
      t4a_counter_values w0, w1;
      t4a_lane_stats(e.lane, &w0);
      CK(t4a_retire_wait(e.retire));
      t4a_lane_stats(e.lane, &w1);
      wait_host_waits += w1.host_waits - w0.host_waits;
      waits++;
      slot_value = r / 2500 + 2;
      memcpy(t4a_slot_host(slots, slot), &slot_value, sizeof slot_value);
    }
    CK(t4a_chain_replay(t, ch));
    want[0] += slot_value;
    for (int k = 0; k < K; k++) {
      want[target[k]] += scalar[k];
      calls[target[k]]++;
    }
  }
  t4a_lane_stats(e.lane, &v1);
  /* A warm stretch: no rebind, no allocation. */
  uint64_t heap0 = t4a_heap_allocations();
  for (int r = 0; r < 1000; r++) CK(t4a_chain_replay(t, ch));
  uint64_t heap1 = t4a_heap_allocations();
  want[0] += 1000LL * slot_value;
  for (int k = 0; k < K; k++) {
    want[target[k]] += 1000LL * scalar[k];
    calls[target[k]] += 1000;
  }
  check_accumulated(&e, p, want, calls);
  struct t4a_chain_stats cs;
  t4a_chain_stats(ch, &cs);
  printf("# chain of %u kernel nodes: %llu replays, %llu node updates, %llu re-instantiations; "
         "%llu events, %llu host waits (all %llu inside the %llu waits asked) over %d replays; "
         "%llu heap allocations over 1000 warm replays\n",
         cs.kernel_nodes, (unsigned long long)cs.replays, (unsigned long long)cs.node_updates,
         (unsigned long long)cs.reinstantiations,
         (unsigned long long)(v1.events_recorded - v0.events_recorded),
         (unsigned long long)(v1.host_waits - v0.host_waits), (unsigned long long)wait_host_waits,
         (unsigned long long)waits, REPLAYS,
         (unsigned long long)(heap1 - heap0));
  assert_int_equal(cs.kernel_nodes, K + 1);
  assert_int_equal(cs.replays, REPLAYS + 1000);
  assert_int_equal(cs.node_updates, expected_updates);
  assert_int_equal(cs.reinstantiations, 0);
  /* Replays and rebinds never wait on the host: every host wait was inside an asked wait. */
  assert_int_equal(v1.host_waits - v0.host_waits, wait_host_waits);
  assert_true(wait_host_waits >= waits);
  assert_int_equal(heap1, heap0);
  t4a_chain_destroy(ch);
  t4a_launch_table_destroy(t);
  CK(t4a_retire_wait(e.retire));
  t4a_buffer_release(p[0]);
  t4a_buffer_release(p[1]);
  t4a_slot_release(slots, slot);
  t4a_slots_destroy(slots);
  t4a_nvrtc_artifact_release(art);
  env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saxpy_cubin_and_ptx),
      cmocka_unit_test(test_big_shared_and_refusals),
      cmocka_unit_test(test_struct_descriptor_and_raw_bytes),
      cmocka_unit_test(test_warm_chain),
      cmocka_unit_test(test_graph_fires_with_changing_arguments),
      cmocka_unit_test(test_checked_launches_through_function_graph),
      cmocka_unit_test(test_calibration),
      cmocka_unit_test(test_l2_persistence),
      cmocka_unit_test(test_graph_replayed_1000_times),
      cmocka_unit_test(test_chain_100_kernels_10000_replays),
  };
  return t4a_gpu_test_main("launch_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
