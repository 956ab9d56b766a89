/* Module globals and kernel attributes on a real GPU (labels: gpu, single). Exits 77 without a
 * driver; needs NVRTC. For a CUBIN and for PTX (JIT) of one source: a __constant__ table of 1,024
 * floats written through its global is read by a kernel over 1M indices (checked on the CPU); a
 * __device__ counter the kernel increments, and a __device__ array it writes, are read back; an
 * initialised __device__ global reads its initial value; a global is a descriptor argument fired
 * and replayed in a chain after the caller dropped the view and the module; the wrong size and a
 * write past the end are refused before anything is enqueued; an unknown name is
 * UNKNOWN_ENTRY_POINT; the kernel's attributes are plausible and match __launch_bounds__. Prints
 * one line per image with the attributes. */
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
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)
#define TABLE 1024

static t4a_driver *g_drv;

static const char k_source[] =
    "__constant__ float table[1024];\n"
    "__device__ unsigned int calls;\n"
    "__device__ float scratch[256];\n"
    "__device__ int init_val = 42;\n"
    "extern \"C\" __global__ void __launch_bounds__(256) lookup(const int *idx, float *out,\n"
    "                                                           int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = table[idx[i] & 1023] * 2.0f + 1.0f;\n"
    "  if (i < 256) scratch[i] = table[i] + (float)i;\n"
    "  if (threadIdx.x == 0) atomicAdd(&calls, 1u);\n"
    "}\n"
    "extern \"C\" __global__ void scale(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n";

typedef struct env {
  t4a_nvrtc_lib *nvrtc;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  t4a_module_cache *cache;
  char target[16];
} env;

static void env_open(env *e) {
  memset(e, 0, sizeof *e);
  t4a_device_info info;
  CK(t4a_device_query(g_drv, 0, &info));
  snprintf(e->target, sizeof e->target, "sm_%d%d", info.cc_major, info.cc_minor);
  if (t4a_nvrtc_lib_open(NULL, &e->nvrtc) != T4A_OK) fail_msg("NVRTC did not open");
  CK(t4a_lane_create(g_drv, 0, NULL, &e->lane));
  CK(t4a_mem_pool_create(e->lane, NULL, &e->pool));
  CK(t4a_retire_create(e->lane, NULL, &e->retire));
  CK(t4a_xfer_create(e->retire, NULL, &e->xfer));
  CK(t4a_module_cache_create(e->retire, NULL, &e->cache));
}

static void env_close(env *e) {
  t4a_module_cache_destroy(e->cache);
  t4a_xfer_destroy(e->xfer);
  CK(t4a_retire_destroy(e->retire));
  t4a_mem_pool_release(e->pool);
  t4a_lane_release(e->lane);
  t4a_nvrtc_lib_release(e->nvrtc);
}

static void download(env *e, t4a_buffer *b, void *dst, size_t bytes) {
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(e->xfer, b, 0, dst, bytes, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
}

static t4a_buffer *global(t4a_module *m, const char *name, size_t bytes) {
  t4a_buffer *g = NULL;
  CK(t4a_module_get_global(m, name, bytes, &g));
  return g;
}

static void run(env *e, t4a_nvrtc_output output) {
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.program_name = "globals_gpu_test.cu";
  rq.source = k_source;
  rq.target = e->target;
  char compute[24];
  if (output == T4A_NVRTC_OUTPUT_PTX) {
    snprintf(compute, sizeof compute, "compute_%s", e->target + 3);
    rq.target = compute;
  }
  rq.output = output;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  t4a_nvrtc_artifact *art = NULL;
  if (t4a_nvrtc_compile(e->nvrtc, &rq, &art, &oc) != T4A_OK) {
    fail_msg("compile failed: %s", oc.log != NULL ? oc.log : "(no log)");
  }
  t4a_nvrtc_outcome_deinit(&oc);
  t4a_module *m = NULL;
  CK(t4a_module_load_artifact(e->cache, art, &m));
  const char *kind = output == T4A_NVRTC_OUTPUT_PTX ? "PTX" : "CUBIN";

  /* Lookups: sizes from the driver, typed refusals. */
  t4a_buffer *table = global(m, "table", TABLE * sizeof(float));
  t4a_buffer *calls = global(m, "calls", sizeof(unsigned));
  t4a_buffer *scratch = global(m, "scratch", 256 * sizeof(float));
  t4a_buffer *init = global(m, "init_val", 0);
  assert_int_equal(t4a_buffer_size(init), sizeof(int));
  t4a_buffer *none = NULL;
  assert_int_equal(t4a_module_get_global(m, "tabel", 0, &none), T4A_UNKNOWN_ENTRY_POINT);
  assert_int_equal(t4a_module_get_global(m, "table", 1023 * sizeof(float), &none),
                   T4A_ARGUMENT_MISMATCH);
  int iv = 0;
  download(e, init, &iv, sizeof iv);
  assert_int_equal(iv, 42);

  /* The table written through the global; the wrong size refused with nothing enqueued. */
  float *tab = malloc((TABLE + 1) * sizeof *tab);
  for (int i = 0; i <= TABLE; i++) tab[i] = (float)((i * 37) % 1001) * 0.25f - 7.0f;
  t4a_counter_values c0, c1;
  t4a_lane_stats(e->lane, &c0);
  assert_int_equal(t4a_xfer_upload(e->xfer, table, 0, tab, (TABLE + 1) * sizeof *tab),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload(e->xfer, table, 4, tab, TABLE * sizeof *tab),
                   T4A_INVALID_ARGUMENT);
  t4a_lane_stats(e->lane, &c1);
  assert_int_equal(c1.admissions, c0.admissions);
  CK(t4a_xfer_upload(e->xfer, table, 0, tab, TABLE * sizeof *tab));
  unsigned zero = 0;
  CK(t4a_xfer_upload(e->xfer, calls, 0, &zero, sizeof zero));

  const int n = 1 << 20;
  int *idx = malloc(n * sizeof *idx);
  float *out = malloc(n * sizeof *out);
  for (int i = 0; i < n; i++) idx[i] = (int)(((unsigned)i * 2654435761u) >> 7);
  t4a_buffer *bi = NULL, *bo = NULL;
  CK(t4a_buffer_create(e->pool, n * sizeof *idx, 0, 0, &bi));
  CK(t4a_buffer_create(e->pool, n * sizeof *out, 0, 0, &bo));
  CK(t4a_xfer_upload(e->xfer, bi, 0, idx, n * sizeof *idx));
  t4a_function *lookup = NULL, *scale = NULL;
  CK(t4a_module_get_function(m, "lookup", &lookup));
  CK(t4a_module_get_function(m, "scale", &scale));
  int nn = n;
  t4a_arg args[3] = {t4a_arg_buffer(bi, 0), t4a_arg_buffer(bo, 0), t4a_arg_scalar(&nn, 4)};
  t4a_launch_config cfg = {{(uint32_t)(n / 256), 1, 1}, {256, 1, 1}, 0};
  CK(t4a_launch(e->retire, lookup, &cfg, args, 3));
  download(e, bo, out, n * sizeof *out);
  for (int i = 0; i < n; i++) {
    float want = tab[idx[i] & 1023] * 2.0f + 1.0f;
    if (out[i] != want) fail_msg("%s: out[%d] = %g, want %g", kind, i, (double)out[i], (double)want);
  }
  unsigned counted = 0;
  download(e, calls, &counted, sizeof counted);
  assert_int_equal(counted, (unsigned)(n / 256)); /* one per block: the kernel wrote it */
  float sc[256];
  download(e, scratch, sc, sizeof sc);
  for (int i = 0; i < 256; i++) assert_true(sc[i] == tab[i] + (float)i);

  /* A global as a descriptor argument, fired and replayed in a chain after the caller dropped
   * its view and the module (the descriptor and the chain keep them). */
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(e->retire, NULL, &t));
  float a = 2.0f;
  int sn = 256;
  t4a_arg sargs[3] = {t4a_arg_buffer(scratch, 0), t4a_arg_scalar(&a, 4), t4a_arg_scalar(&sn, 4)};
  t4a_launch_config scfg = {{1, 1, 1}, {256, 1, 1}, 0};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, scale, &scfg, sargs, 3, &id));
  t4a_buffer *keep = scratch;
  t4a_buffer_retain(keep);
  t4a_buffer_release(scratch);
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_chain_begin(t));
  CK(t4a_descriptor_fire(t, id));
  t4a_chain *ch = NULL;
  CK(t4a_chain_end(t, &ch));
  for (int r = 0; r < 3; r++) CK(t4a_chain_replay(t, ch));
  float sc2[256];
  download(e, keep, sc2, sizeof sc2);
  for (int i = 0; i < 256; i++) assert_true(sc2[i] == sc[i] * 16.0f);

  t4a_kernel_attributes at;
  CK(t4a_function_get_attributes(lookup, &at));
  printf("%s: lookup: %u registers, %u B static shared, %u B const, %u B local, max %u threads, "
         "dynamic shared %u (opt-in %u), PTX %u, binary %u\n",
         kind, at.num_regs, at.static_shared_bytes, at.const_bytes, at.local_bytes,
         at.max_threads_per_block, at.max_dynamic_shared_bytes, at.max_dynamic_shared_optin_bytes,
         at.ptx_version, at.binary_version);
  assert_true(at.num_regs > 0 && at.num_regs <= 255);
  assert_true(at.max_threads_per_block <= 256); /* __launch_bounds__(256) */
  assert_true(at.const_bytes >= TABLE * sizeof(float));
  assert_true(at.binary_version > 0);
  assert_true(at.ptx_version > 0);

  t4a_chain_destroy(ch);
  CK(t4a_descriptor_unregister(t, id));
  t4a_launch_table_destroy(t);
  t4a_buffer_release(keep);
  t4a_buffer_release(table);
  t4a_buffer_release(calls);
  t4a_buffer_release(init);
  t4a_buffer_release(bi);
  t4a_buffer_release(bo);
  t4a_function_release(lookup);
  t4a_function_release(scale);
  t4a_module_release(m);
  t4a_module_cache_clear(e->cache);
  CK(t4a_retire_wait(e->retire));
  t4a_nvrtc_artifact_release(art);
  free(tab);
  free(idx);
  free(out);
}

static void test_constant_table_cubin(void **state) {
  (void)state;
  env e;
  env_open(&e);
  run(&e, T4A_NVRTC_OUTPUT_CUBIN);
  env_close(&e);
}

static void test_constant_table_ptx(void **state) {
  (void)state;
  env e;
  env_open(&e);
  run(&e, T4A_NVRTC_OUTPUT_PTX);
  env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_constant_table_cubin),
      cmocka_unit_test(test_constant_table_ptx),
  };
  return t4a_gpu_test_main("globals_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
