/* Occupancy and launch attributes on a real GPU (labels: gpu, single; sm_90 for clusters and
 * programmatic launches). Exits 77 without a driver. Kernels are CUDA C compiled by NVRTC at test
 * time; the grid barrier and the cluster exchange are written with atomics and inline PTX (no
 * cooperative_groups.h, which needs the toolkit's include path).
 *   - A grid-sync reduction of 1<<26 floats: one cooperative launch at the largest grid the device
 *     holds at once (t4a_function_occupancy x SM count), a grid barrier, block 0 summing the
 *     blocks' partial sums; in double, compared with the CPU's double sum: |gpu - cpu| <= 2e-8 x
 *     sum |x| (the worst-case rounding bound of n = 2^26 double additions, (n - 1) x 2^-53 ~
 *     7.5e-9, on either side). Checked, descriptor and raw-bytes paths, 3 runs each (the barrier
 *     reused). One block more is refused by t4a before enqueue, and by the driver itself
 *     (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE): the limit t4a computes is the driver's.
 *   - A cluster kernel: blocks of a cluster of 2, 4, 8 (and 16 with the non-portable attribute)
 *     read their neighbour's shared memory through distributed shared memory (mapa +
 *     ld.shared::cluster); every element and each block's cluster rank checked. Refusals: 16
 *     without the attribute (the driver refuses it too), dims that do not divide the grid.
 *   - A launch chain recording a cluster descriptor fire and a cooperative one, replayed, a
 *     rebind, replayed again: the nodes keep their attributes.
 *   - The suggested block size equals the driver's cuOccupancyMaxPotentialBlockSize (bytes and
 *     per-thread dynamic shared memory, a block limit, a __launch_bounds__ kernel).
 *   - A programmatic dependent launch (griddepcontrol.wait) reads its predecessor's output. */
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
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/nvrtc.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_launch/launch_internal.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

static const char k_source[] =
    "__device__ void grid_barrier(unsigned *count, volatile unsigned *gen, unsigned blocks) {\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    unsigned g = *gen;\n"
    "    __threadfence();\n"
    "    if (atomicAdd(count, 1u) == blocks - 1) {\n"
    "      atomicExch(count, 0u);\n"
    "      __threadfence();\n"
    "      atomicAdd((unsigned *)gen, 1u);\n"
    "    } else {\n"
    "      while (*gen == g) { }\n"
    "    }\n"
    "    __threadfence();\n"
    "  }\n"
    "  __syncthreads();\n"
    "}\n"
    "extern \"C\" __global__ void grid_sum(const float *x, unsigned long long n, double *partial,\n"
    "                                      double *out, unsigned *bar) {\n"
    "  extern __shared__ double s[];\n"
    "  double acc = 0;\n"
    "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "       i < n; i += (unsigned long long)gridDim.x * blockDim.x) acc += x[i];\n"
    "  s[threadIdx.x] = acc;\n"
    "  __syncthreads();\n"
    "  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {\n"
    "    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];\n"
    "  grid_barrier(bar, bar + 1, gridDim.x);\n"
    "  if (blockIdx.x != 0) return;\n"
    "  double a = 0;\n"
    "  for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x)\n"
    "    a += ((volatile double *)partial)[i];\n"
    "  s[threadIdx.x] = a;\n"
    "  __syncthreads();\n"
    "  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {\n"
    "    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) *out = s[0];\n"
    "}\n"
    "__device__ __forceinline__ void cluster_sync() {\n"
    "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\t\"\n"
    "               \"barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
    "}\n"
    "extern \"C\" __global__ void cluster_ring(int *out, unsigned *ranks) {\n"
    "  __shared__ int s[256];\n"
    "  unsigned rank, n;\n"
    "  asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(rank));\n"
    "  asm volatile(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(n));\n"
    "  s[threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;\n"
    "  cluster_sync();\n"
    "  unsigned long long generic = (unsigned long long)&s[threadIdx.x], shared;\n"
    "  asm volatile(\"cvta.to.shared.u64 %0, %1;\" : \"=l\"(shared) : \"l\"(generic));\n"
    "  unsigned local = (unsigned)shared, remote, peer = (rank + 1) % n;\n"
    "  asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote) : \"r\"(local),\n"
    "               \"r\"(peer));\n"
    "  int v;\n"
    "  asm volatile(\"ld.shared::cluster.u32 %0, [%1];\" : \"=r\"(v) : \"r\"(remote) : \"memory\");\n"
    "  cluster_sync();\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] = v;\n"
    "  if (threadIdx.x == 0) ranks[blockIdx.x] = rank | (n << 16);\n"
    "}\n"
    "extern \"C\" __global__ void light(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = a * x[i];\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) heavy(float *x, int n) {\n"
    "  __shared__ float buf[2048];\n"
    "  extern __shared__ float dyn[];\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  float acc = 0;\n"
    "  for (int k = threadIdx.x; k < 2048; k += blockDim.x) buf[k] = k * 0.5f;\n"
    "  __syncthreads();\n"
    "  for (int k = 0; k < 64; k++) acc += buf[(i * 7 + k * 13) & 2047] * acc + k;\n"
    "  dyn[threadIdx.x] = acc;\n"
    "  if (i < n) x[i] = acc + dyn[(threadIdx.x + 1) % blockDim.x];\n"
    "}\n"
    "extern \"C\" __global__ void produce(int *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = 3 * i + 1;\n"
    "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "}\n"
    "extern \"C\" __global__ void consume(const int *x, int *y, int n) {\n"
    "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = 2 * x[i];\n"
    "}\n";

typedef struct env {
  t4a_nvrtc_lib *nvrtc;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  t4a_module_cache *cache;
  t4a_launch_table *table;
  t4a_nvrtc_artifact *art;
  t4a_module *module;
  t4a_device_info info;
} env;

static void env_open(env *e) {
  memset(e, 0, sizeof *e);
  CK(t4a_device_query(g_drv, 0, &e->info));
  char target[16];
  snprintf(target, sizeof target, "sm_%d%d", e->info.cc_major, e->info.cc_minor);
  if (t4a_nvrtc_lib_open(NULL, &e->nvrtc) != T4A_OK) fail_msg("NVRTC did not open");
  CK(t4a_lane_create(g_drv, 0, NULL, &e->lane));
  CK(t4a_mem_pool_create(e->lane, NULL, &e->pool));
  CK(t4a_retire_create(e->lane, NULL, &e->retire));
  CK(t4a_xfer_create(e->retire, NULL, &e->xfer));
  CK(t4a_module_cache_create(e->retire, NULL, &e->cache));
  CK(t4a_launch_table_create(e->retire, NULL, &e->table));
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.program_name = "attrs_gpu_test.cu";
  rq.source = k_source;
  rq.target = target;
  rq.output = T4A_NVRTC_OUTPUT_CUBIN;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_compile(e->nvrtc, &rq, &e->art, &oc) != T4A_OK) {
    fail_msg("compile failed: %s", oc.log != NULL ? oc.log : "(no log)");
  }
  t4a_nvrtc_outcome_deinit(&oc);
  CK(t4a_module_load_artifact(e->cache, e->art, &e->module));
}

static void env_close(env *e) {
  CK(t4a_retire_wait(e->retire));
  t4a_module_release(e->module);
  t4a_nvrtc_artifact_release(e->art);
  t4a_launch_table_destroy(e->table);
  t4a_module_cache_destroy(e->cache);
  t4a_xfer_destroy(e->xfer);
  CK(t4a_retire_destroy(e->retire));
  t4a_mem_pool_release(e->pool);
  t4a_lane_release(e->lane);
  t4a_nvrtc_lib_release(e->nvrtc);
}

static int sm90(const env *e) { return e->info.cc_major >= 9; }

static t4a_function *fn_of(env *e, const char *name) {
  t4a_function *f = NULL;
  CK(t4a_module_get_function(e->module, name, &f));
  return f;
}

static t4a_buffer *buffer(env *e, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(e->pool, bytes, 0, 0, &b));
  return b;
}

static void upload(env *e, t4a_buffer *b, const void *src, size_t bytes) {
  CK(t4a_xfer_upload(e->xfer, b, 0, src, bytes));
}

static void download(env *e, t4a_buffer *b, void *dst, size_t bytes) {
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(e->xfer, b, 0, dst, bytes, &p));
  CK(t4a_xfer_pending_wait(p));
}

static t4a_launch_config cfg1(uint32_t grid, uint32_t block, uint32_t shared) {
  t4a_launch_config c = {{grid, 1, 1}, {block, 1, 1}, shared};
  return c;
}

/* A raw cuLaunchKernelEx beside t4a (the driver's own verdict), under the lane's context. */
static CUresult raw_launch_ex(env *e, t4a_function *fn, const t4a_launch_config *c,
                              CUlaunchAttribute *attrs, unsigned num, void **params) {
  CUlaunchConfig lc;
  memset(&lc, 0, sizeof lc);
  lc.gridDimX = c->grid[0];
  lc.gridDimY = c->grid[1];
  lc.gridDimZ = c->grid[2];
  lc.blockDimX = c->block[0];
  lc.blockDimY = c->block[1];
  lc.blockDimZ = c->block[2];
  lc.sharedMemBytes = c->shared_bytes;
  lc.hStream = t4a_lane_stream(e->lane);
  lc.attrs = attrs;
  lc.numAttrs = num;
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(e->lane), NULL));
  CUresult r = g_drv->t.cuLaunchKernelEx(&lc, fn->handle, params, NULL);
  CK(t4a_ctx_scope_exit(&scope));
  return r;
}

/* ---- the grid-sync reduction ---- */

#define N_FLOATS (1u << 26)
#define BLOCK 256u

static void test_grid_sync_reduction(void **state) {
  (void)state;
  env e;
  env_open(&e);
  float *x = malloc((size_t)N_FLOATS * sizeof *x);
  assert_non_null(x);
  double cpu = 0, mag = 0;
  uint32_t h = 12345;
  for (uint32_t i = 0; i < N_FLOATS; i++) {
    h = h * 1664525u + 1013904223u;
    x[i] = (float)((int)(h >> 8) % 2001 - 1000) / 997.0f;
    cpu += x[i];
    mag += fabs((double)x[i]);
  }
  t4a_function *fn = fn_of(&e, "grid_sum");
  uint32_t shared = BLOCK * sizeof(double), per_sm = 0;
  CK(t4a_function_occupancy(fn, BLOCK, shared, &per_sm));
  assert_true(per_sm >= 1);
  uint32_t grid = per_sm * (uint32_t)e.info.sm_count;
  t4a_buffer *bx = buffer(&e, (size_t)N_FLOATS * sizeof *x), *partial = buffer(&e, grid * 8u);
  t4a_buffer *out = buffer(&e, 8), *bar = buffer(&e, 8);
  upload(&e, bx, x, (size_t)N_FLOATS * sizeof *x);
  const uint32_t zero[2] = {0, 0};
  upload(&e, bar, zero, sizeof zero);
  unsigned long long n = N_FLOATS;
  t4a_arg args[5] = {t4a_arg_buffer(bx, 0), t4a_arg_scalar(&n, 8), t4a_arg_buffer(partial, 0),
                     t4a_arg_buffer(out, 0), t4a_arg_buffer(bar, 0)};
  t4a_launch_attrs coop = T4A_LAUNCH_ATTRS_INIT;
  coop.cooperative = 1;
  t4a_launch_config fits = cfg1(grid, BLOCK, shared), over = cfg1(grid + 1, BLOCK, shared);
  uint32_t id = 0;
  CK(t4a_descriptor_register_ex(e.table, fn, &fits, &coop, args, 5, &id));
  double tol = 2e-8 * mag;
  for (int path = 0; path < 3; path++) {
    for (int run = 0; run < 3; run++) {
      double poison = NAN, gpu = 0;
      upload(&e, out, &poison, 8);
      if (path == 0) {
        CK(t4a_launch_ex(e.retire, fn, &fits, &coop, args, 5));
      } else if (path == 1) {
        CK(t4a_descriptor_fire(e.table, id));
      } else {
        struct {
          CUdeviceptr x;
          unsigned long long n;
          CUdeviceptr partial, out, bar;
        } raw = {(CUdeviceptr)t4a_buffer_devptr(bx), n, (CUdeviceptr)t4a_buffer_devptr(partial),
                 (CUdeviceptr)t4a_buffer_devptr(out), (CUdeviceptr)t4a_buffer_devptr(bar)};
        const uint32_t offs[5] = {0, 8, 16, 24, 32};
        CK(t4a_launch_raw_ex(e.retire, fn, &fits, &coop, &raw, sizeof raw, offs, 5));
      }
      download(&e, out, &gpu, 8);
      printf("grid sum (path %d, run %d): %u blocks (%u per SM x %d SMs): gpu %.12f cpu %.12f "
             "|diff| %.3g tolerance %.3g\n",
             path, run, grid, per_sm, e.info.sm_count, gpu, cpu, fabs(gpu - cpu), tol);
      assert_true(fabs(gpu - cpu) <= tol);
    }
  }
  /* One block more: refused by t4a before enqueue, and by the driver itself. */
  t4a_counter_values v0, v1;
  t4a_lane_stats(e.lane, &v0);
  assert_int_equal(t4a_launch_ex(e.retire, fn, &over, &coop, args, 5), T4A_INVALID_LAUNCH);
  t4a_error err;
  t4a_error_last(&err);
  printf("refused: %s\n", err.message);
  t4a_lane_stats(e.lane, &v1);
  assert_int_equal(v1.admissions, v0.admissions);
  CUdeviceptr px = (CUdeviceptr)t4a_buffer_devptr(bx), pp = (CUdeviceptr)t4a_buffer_devptr(partial);
  CUdeviceptr po = (CUdeviceptr)t4a_buffer_devptr(out), pb = (CUdeviceptr)t4a_buffer_devptr(bar);
  void *params[5] = {&px, &n, &pp, &po, &pb};
  CUlaunchAttribute la;
  memset(&la, 0, sizeof la);
  la.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  la.value.cooperative = 1;
  CUresult r = raw_launch_ex(&e, fn, &over, &la, 1, params);
  printf("the driver, for %u blocks: %d\n", grid + 1, (int)r);
  assert_int_equal(r, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  CK(t4a_descriptor_unregister(e.table, id));
  t4a_buffer *all[] = {bx, partial, out, bar};
  for (size_t i = 0; i < 4; i++) t4a_buffer_release(all[i]);
  t4a_function_release(fn);
  free(x);
  env_close(&e);
}

/* ---- clusters and distributed shared memory ---- */

#define CL_GRID 64u
#define CL_BLOCK 256u

static void check_ring(env *e, t4a_buffer *out, t4a_buffer *ranks, uint32_t cluster) {
  int *o = malloc(CL_GRID * CL_BLOCK * sizeof *o);
  unsigned rk[CL_GRID];
  download(e, out, o, CL_GRID * CL_BLOCK * sizeof *o);
  download(e, ranks, rk, sizeof rk);
  for (uint32_t b = 0; b < CL_GRID; b++) {
    uint32_t base = b - b % cluster, peer = base + (b % cluster + 1) % cluster;
    if (rk[b] != ((b % cluster) | (cluster << 16))) {
      fail_msg("cluster %u: block %u has rank word 0x%x", cluster, b, rk[b]);
    }
    for (uint32_t t = 0; t < CL_BLOCK; t++) {
      int want = (int)(peer * 1000 + t);
      if (o[b * CL_BLOCK + t] != want) {
        fail_msg("cluster %u: block %u thread %u read %d, expected %d", cluster, b, t,
                 o[b * CL_BLOCK + t], want);
      }
    }
  }
  free(o);
}

static void clear(env *e, t4a_buffer *b, size_t bytes) {
  void *z = calloc(1, bytes);
  upload(e, b, z, bytes);
  free(z);
}

static void test_cluster_distributed_shared_memory(void **state) {
  (void)state;
  env e;
  env_open(&e);
  if (!sm90(&e)) {
    printf("SKIP: clusters need sm_90 (this is sm_%d%d)\n", e.info.cc_major, e.info.cc_minor);
    env_close(&e);
    skip();
  }
  t4a_function *fn = fn_of(&e, "cluster_ring");
  t4a_buffer *out = buffer(&e, CL_GRID * CL_BLOCK * 4), *ranks = buffer(&e, CL_GRID * 4);
  t4a_arg args[2] = {t4a_arg_buffer(out, 0), t4a_arg_buffer(ranks, 0)};
  t4a_launch_config cfg = cfg1(CL_GRID, CL_BLOCK, 0);
  static const uint32_t sizes[3] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    t4a_launch_attrs a = T4A_LAUNCH_ATTRS_INIT;
    a.cluster[0] = sizes[i];
    a.cluster[1] = a.cluster[2] = 1;
    for (int path = 0; path < 3; path++) {
      clear(&e, out, CL_GRID * CL_BLOCK * 4);
      if (path == 0) {
        CK(t4a_launch_ex(e.retire, fn, &cfg, &a, args, 2));
      } else if (path == 1) {
        uint32_t id = 0;
        CK(t4a_descriptor_register_ex(e.table, fn, &cfg, &a, args, 2, &id));
        CK(t4a_descriptor_fire(e.table, id));
        CK(t4a_descriptor_unregister(e.table, id));
      } else {
        CUdeviceptr raw[2] = {(CUdeviceptr)t4a_buffer_devptr(out),
                              (CUdeviceptr)t4a_buffer_devptr(ranks)};
        const uint32_t offs[2] = {0, 8};
        CK(t4a_launch_raw_ex(e.retire, fn, &cfg, &a, raw, sizeof raw, offs, 2));
      }
      check_ring(&e, out, ranks, sizes[i]);
    }
    printf("cluster of %u: every block read its neighbour's shared memory (3 paths)\n", sizes[i]);
  }
  /* Refusals before enqueue: 16 without the non-portable attribute (the driver refuses it too),
   * dims that do not divide the grid. */
  t4a_launch_attrs sixteen = T4A_LAUNCH_ATTRS_INIT, three = T4A_LAUNCH_ATTRS_INIT;
  sixteen.cluster[0] = 16;
  sixteen.cluster[1] = sixteen.cluster[2] = 1;
  three.cluster[0] = 3;
  three.cluster[1] = three.cluster[2] = 1;
  assert_int_equal(t4a_launch_ex(e.retire, fn, &cfg, &sixteen, args, 2), T4A_INVALID_LAUNCH);
  assert_int_equal(t4a_launch_ex(e.retire, fn, &cfg, &three, args, 2), T4A_INVALID_LAUNCH);
  CUdeviceptr po = (CUdeviceptr)t4a_buffer_devptr(out), pr = (CUdeviceptr)t4a_buffer_devptr(ranks);
  void *params[2] = {&po, &pr};
  CUlaunchAttribute la;
  memset(&la, 0, sizeof la);
  la.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  la.value.clusterDim.x = 16;
  la.value.clusterDim.y = la.value.clusterDim.z = 1;
  CUresult r = raw_launch_ex(&e, fn, &cfg, &la, 1, params);
  printf("the driver, cluster of 16 without the attribute: %d\n", (int)r);
  assert_int_not_equal(r, CUDA_SUCCESS);
  CK(t4a_retire_wait(e.retire)); /* nothing was queued: the stream is clean */
  t4a_buffer_release(out);
  t4a_buffer_release(ranks);
  t4a_function_release(fn);
  env_close(&e);
}

/* 16 blocks per cluster with the non-portable attribute (sm_90 allows 16). */
static void test_cluster_of_16_non_portable(void **state) {
  (void)state;
  env e;
  env_open(&e);
  if (!sm90(&e)) {
    env_close(&e);
    skip();
  }
  t4a_function *fn = fn_of(&e, "cluster_ring");
  t4a_buffer *out = buffer(&e, CL_GRID * CL_BLOCK * 4), *ranks = buffer(&e, CL_GRID * 4);
  t4a_arg args[2] = {t4a_arg_buffer(out, 0), t4a_arg_buffer(ranks, 0)};
  t4a_launch_config cfg = cfg1(CL_GRID, CL_BLOCK, 0);
  t4a_launch_attrs sixteen = T4A_LAUNCH_ATTRS_INIT;
  sixteen.cluster[0] = 16;
  sixteen.cluster[1] = sixteen.cluster[2] = 1;
  CK(t4a_function_allow_non_portable_clusters(fn, 1));
  t4a_status st = t4a_launch_ex(e.retire, fn, &cfg, &sixteen, args, 2);
  if (st != T4A_OK) {
    t4a_error err;
    t4a_error_last(&err);
    fail_msg("cluster of 16: %s", err.message);
  }
  check_ring(&e, out, ranks, 16);
  printf("cluster of 16 (non-portable): right\n");
  t4a_buffer_release(out);
  t4a_buffer_release(ranks);
  t4a_function_release(fn);
  env_close(&e);
}

/* ---- a chain recording attribute launches ---- */

static void test_chain_with_attributes(void **state) {
  (void)state;
  env e;
  env_open(&e);
  if (!sm90(&e)) {
    env_close(&e);
    skip();
  }
  t4a_function *ring = fn_of(&e, "cluster_ring"), *sum = fn_of(&e, "grid_sum");
  t4a_buffer *out = buffer(&e, CL_GRID * CL_BLOCK * 4), *out2 = buffer(&e, CL_GRID * CL_BLOCK * 4);
  t4a_buffer *ranks = buffer(&e, CL_GRID * 4);
  /* A small cooperative reduction: 4096 ones over 8 blocks. */
  enum { NS = 4096, GB = 8 };
  float ones[NS];
  for (int i = 0; i < NS; i++) ones[i] = 1.0f;
  t4a_buffer *bx = buffer(&e, sizeof ones), *partial = buffer(&e, GB * 8), *res = buffer(&e, 8);
  t4a_buffer *bar = buffer(&e, 8);
  upload(&e, bx, ones, sizeof ones);
  const uint32_t zero[2] = {0, 0};
  upload(&e, bar, zero, sizeof zero);
  unsigned long long n = NS;
  t4a_arg rargs[2] = {t4a_arg_buffer(out, 0), t4a_arg_buffer(ranks, 0)};
  t4a_arg sargs[5] = {t4a_arg_buffer(bx, 0), t4a_arg_scalar(&n, 8), t4a_arg_buffer(partial, 0),
                      t4a_arg_buffer(res, 0), t4a_arg_buffer(bar, 0)};
  t4a_launch_attrs four = T4A_LAUNCH_ATTRS_INIT, coop = T4A_LAUNCH_ATTRS_INIT;
  four.cluster[0] = 4;
  four.cluster[1] = four.cluster[2] = 1;
  coop.cooperative = 1;
  t4a_launch_config rc = cfg1(CL_GRID, CL_BLOCK, 0), sc = cfg1(GB, BLOCK, BLOCK * 8);
  uint32_t d_ring = 0, d_sum = 0;
  CK(t4a_descriptor_register_ex(e.table, ring, &rc, &four, rargs, 2, &d_ring));
  CK(t4a_descriptor_register_ex(e.table, sum, &sc, &coop, sargs, 5, &d_sum));
  CK(t4a_chain_begin(e.table));
  CK(t4a_descriptor_fire(e.table, d_ring));
  CK(t4a_descriptor_fire(e.table, d_sum));
  t4a_chain *ch = NULL;
  CK(t4a_chain_end(e.table, &ch));
  clear(&e, out, CL_GRID * CL_BLOCK * 4);
  CK(t4a_chain_replay(e.table, ch));
  check_ring(&e, out, ranks, 4);
  double got = 0;
  download(&e, res, &got, 8);
  assert_true(got == (double)NS);
  t4a_arg o2 = t4a_arg_buffer(out2, 0);
  CK(t4a_descriptor_rebind(e.table, d_ring, 0, &o2));
  clear(&e, out2, CL_GRID * CL_BLOCK * 4);
  CK(t4a_chain_replay(e.table, ch));
  check_ring(&e, out2, ranks, 4);
  download(&e, res, &got, 8);
  assert_true(got == (double)NS);
  struct t4a_chain_stats cs;
  t4a_chain_stats(ch, &cs);
  printf("chain: %u kernel nodes, %llu replays, %llu node updates: clusters and the grid "
         "barrier right after an update\n",
         cs.kernel_nodes, (unsigned long long)cs.replays, (unsigned long long)cs.node_updates);
  assert_int_equal(cs.node_updates, 1);
  t4a_chain_destroy(ch);
  CK(t4a_descriptor_unregister(e.table, d_ring));
  CK(t4a_descriptor_unregister(e.table, d_sum));
  t4a_buffer *all[] = {out, out2, ranks, bx, partial, res, bar};
  for (size_t i = 0; i < 7; i++) t4a_buffer_release(all[i]);
  t4a_function_release(ring);
  t4a_function_release(sum);
  env_close(&e);
}

/* ---- the suggested block size against the driver's ---- */

static size_t g_bytes, g_per_thread;
static size_t CUDAAPI dyn_of(int block) { return g_bytes + g_per_thread * (size_t)block; }

static void test_suggest_matches_the_driver(void **state) {
  (void)state;
  env e;
  env_open(&e);
  static const struct {
    const char *kernel;
    uint32_t bytes, per_thread, limit;
  } cases[] = {
      {"light", 0, 0, 0},     {"light", 4096, 0, 0},  {"light", 0, 16, 0},
      {"light", 1024, 32, 0}, {"light", 0, 0, 200},   {"heavy", 0, 0, 0},
      {"heavy", 0, 4, 0},     {"heavy", 8192, 0, 0},  {"grid_sum", 0, 8, 0},
      {"cluster_ring", 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t4a_function *fn = fn_of(&e, cases[i].kernel);
    t4a_block_suggestion s;
    CK(t4a_function_suggest_block(fn, cases[i].bytes, cases[i].per_thread, cases[i].limit, &s));
    g_bytes = cases[i].bytes;
    g_per_thread = cases[i].per_thread;
    int min_grid = 0, block = 0;
    t4a_ctx_scope scope;
    CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(e.lane), NULL));
    CUresult r = g_drv->t.cuOccupancyMaxPotentialBlockSize(
        &min_grid, &block, fn->handle, cases[i].per_thread != 0 ? dyn_of : NULL, cases[i].bytes,
        (int)cases[i].limit);
    CK(t4a_ctx_scope_exit(&scope));
    assert_int_equal(r, CUDA_SUCCESS);
    printf("%-12s %5u B + %3u B/thread, limit %3u: t4a %4u threads (%u per SM, grid %u), driver "
           "%4d threads (grid %d)\n",
           cases[i].kernel, cases[i].bytes, cases[i].per_thread, cases[i].limit, s.block_threads,
           s.blocks_per_sm, s.min_grid, block, min_grid);
    assert_int_equal(s.block_threads, block);
    assert_int_equal(s.min_grid, min_grid);
    t4a_function_release(fn);
  }
  env_close(&e);
}

/* ---- programmatic dependent launch ---- */

static void test_programmatic_dependent_launch(void **state) {
  (void)state;
  env e;
  env_open(&e);
  if (!sm90(&e)) {
    env_close(&e);
    skip();
  }
  enum { NP = 1 << 20 };
  t4a_function *prod = fn_of(&e, "produce"), *cons = fn_of(&e, "consume");
  t4a_buffer *x = buffer(&e, NP * 4), *y = buffer(&e, NP * 4);
  clear(&e, y, NP * 4);
  int n = NP;
  t4a_arg pa[2] = {t4a_arg_buffer(x, 0), t4a_arg_scalar(&n, 4)};
  t4a_arg ca[3] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(y, 0), t4a_arg_scalar(&n, 4)};
  t4a_launch_attrs pdl = T4A_LAUNCH_ATTRS_INIT;
  pdl.programmatic = 1;
  t4a_launch_config c = cfg1(NP / 256, 256, 0);
  for (int rep = 0; rep < 10; rep++) {
    CK(t4a_launch(e.retire, prod, &c, pa, 2));
    CK(t4a_launch_ex(e.retire, cons, &c, &pdl, ca, 3));
  }
  int *hy = malloc(NP * 4);
  download(&e, y, hy, NP * 4);
  for (int i = 0; i < NP; i++) {
    if (hy[i] != 2 * (3 * i + 1)) fail_msg("y[%d] = %d", i, hy[i]);
  }
  printf("programmatic dependent launch: %d elements right\n", NP);
  free(hy);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_function_release(prod);
  t4a_function_release(cons);
  env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid_sync_reduction),
      cmocka_unit_test(test_cluster_distributed_shared_memory),
      cmocka_unit_test(test_cluster_of_16_non_portable),
      cmocka_unit_test(test_chain_with_attributes),
      cmocka_unit_test(test_suggest_matches_the_driver),
      cmocka_unit_test(test_programmatic_dependent_launch),
  };
  return t4a_gpu_test_main("attrs_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
