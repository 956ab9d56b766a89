/* t4a_raw on a real GPU (label: gpu, single). Exits 77 without a driver.
 * Inside raw scopes on the runtime's stream: (1) real cuLaunchKernel calls of the committed PTX
 * kernels (testing/gpu/kernels_ptx.h, loaded with cuModuleLoadData), a slow fill then an
 * increment on a bound buffer, the result downloaded and checked, with the buffer dropped by the
 * caller right after the scope; (2) a cuBLAS SGEMM on bound buffers, cuBLAS loaded at run time
 * (dlopen; no cuBLAS header or link), checked against a CPU reference. Without a loadable cuBLAS
 * case (2) prints a SKIP line and passes. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/gpu/gpu_main.h"
#include "testing/gpu/kernels_ptx.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

typedef struct fixture {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  CUmodule module;
  CUfunction slow_fill, add_one;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL || t4a_lane_create(g_drv, 0, NULL, &f->lane) != T4A_OK ||
      t4a_mem_pool_create(f->lane, NULL, &f->pool) != T4A_OK ||
      t4a_retire_create(f->lane, NULL, &f->retire) != T4A_OK ||
      t4a_xfer_create(f->retire, NULL, &f->xfer) != T4A_OK) {
    return -1;
  }
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) != T4A_OK) return -1;
  int ok = T4A_CU(g_drv, cuModuleLoadData, &f->module, t4a_test_kernels_ptx) == T4A_OK &&
           T4A_CU(g_drv, cuModuleGetFunction, &f->slow_fill, f->module, "slow_fill") == T4A_OK &&
           T4A_CU(g_drv, cuModuleGetFunction, &f->add_one, f->module, "add_one") == T4A_OK;
  (void)t4a_ctx_scope_exit(&s);
  *state = f;
  return ok ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  t4a_xfer_destroy(f->xfer);
  int ok = t4a_retire_destroy(f->retire) == T4A_OK; /* a proved drain */
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
    ok &= T4A_CU(g_drv, cuModuleUnload, f->module) == T4A_OK;
    (void)t4a_ctx_scope_exit(&s);
  }
  t4a_mem_pool_release(f->pool);
  t4a_lane_release(f->lane);
  free(f);
  return ok ? 0 : -1;
}

static t4a_counter_values counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  return v;
}

/* ---- (1) real cuLaunchKernel ---- */

typedef struct launch_job {
  fixture *f;
  t4a_buffer *buf;
  unsigned n;
  CUcontext current;
  int same_ctx;
} launch_job;

static t4a_status launch_fn(t4a_raw_scope *scope, void *user) {
  launch_job *j = user;
  CUcontext cur = NULL;
  t4a_status st = T4A_CU(g_drv, cuCtxGetCurrent, &cur);
  if (st != T4A_OK) return st;
  j->same_ctx = cur == (CUcontext)t4a_raw_context(scope);
  uint64_t p = 0;
  if ((st = t4a_raw_devptr(scope, j->buf, T4A_RAW_WRITE, &p)) != T4A_OK) return st;
  CUdeviceptr dp = (CUdeviceptr)p;
  CUstream stream = (CUstream)t4a_raw_stream(scope);
  unsigned n = j->n, v = 1000, spin = 200000; /* ~0.1 ms per thread: still running on return */
  unsigned block = 256, grid = (n + block - 1) / block;
  void *fill_args[] = {&dp, &n, &v, &spin};
  st = T4A_CU(g_drv, cuLaunchKernel, j->f->slow_fill, grid, 1, 1, block, 1, 1, 0, stream,
              fill_args, NULL);
  if (st != T4A_OK) return st;
  void *add_args[] = {&dp, &n};
  return T4A_CU(g_drv, cuLaunchKernel, j->f->add_one, grid, 1, 1, block, 1, 1, 0, stream,
                add_args, NULL);
}

static void test_real_launch_in_raw_scope(void **state) {
  fixture *f = *state;
  const unsigned n = 1u << 20;
  launch_job j = {f, NULL, n, NULL, 0};
  CK(t4a_buffer_create(f->pool, (size_t)n * sizeof(unsigned), 0, 0, &j.buf));
  t4a_counter_values before = counters(f);
  t4a_raw_binding b = {j.buf, T4A_RAW_WRITE};
  CK(t4a_raw_run(f->retire, &b, 1, launch_fn, &j));
  assert_true(j.same_ctx);
  t4a_counter_values after = counters(f);
  assert_int_equal(after.host_waits, before.host_waits); /* no host wait in the scope */
  assert_int_equal(after.raw_scopes - before.raw_scopes, 1);
  /* Download in stream order, and drop the buffer at once: the scope's keepalive and stream
   * order keep the block until the kernels and the download ran. */
  unsigned *got = malloc((size_t)n * sizeof *got);
  assert_non_null(got);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, j.buf, 0, got, (size_t)n * sizeof *got, &p));
  t4a_buffer_release(j.buf);
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  for (unsigned i = 0; i < n; i++) {
    if (got[i] != 1000u + i + 1u) fail_msg("element %u: %u, want %u", i, got[i], 1000u + i + 1u);
  }
  free(got);
  CK(t4a_retire_wait(f->retire));
  printf("# raw launch: slow_fill + add_one on 2^20 elements checked; scopes %llu, admissions "
         "%llu\n",
         (unsigned long long)counters(f).raw_scopes, (unsigned long long)counters(f).admissions);
}

/* ---- (2) cuBLAS, loaded at run time ---- */

/* The few cuBLAS v2 entry points used, declared here (no cuBLAS header). The handle is opaque;
 * cudaStream_t is the driver's CUstream. Status 0 is CUBLAS_STATUS_SUCCESS; op 0 is
 * CUBLAS_OP_N. Pointer mode stays the default (host scalars). */
typedef struct cublas_handle_opaque *cublas_handle;
typedef int (*cublas_create_fn)(cublas_handle *handle);
typedef int (*cublas_destroy_fn)(cublas_handle handle);
typedef int (*cublas_set_stream_fn)(cublas_handle handle, CUstream stream);
typedef int (*cublas_sgemm_fn)(cublas_handle handle, int transa, int transb, int m, int n, int k,
                               const float *alpha, const float *a, int lda, const float *b,
                               int ldb, const float *beta, float *c, int ldc);

typedef struct cublas {
  void *dl;
  const char *name;
  cublas_create_fn create;
  cublas_destroy_fn destroy;
  cublas_set_stream_fn set_stream;
  cublas_sgemm_fn sgemm;
} cublas;

/* Loads cuBLAS by soname (13, then 12, then the unversioned name). 0 if none loads. */
static int cublas_load(cublas *c, char *why, size_t why_size) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  memset(c, 0, sizeof *c);
  why[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof *names && c->dl == NULL; i++) {
    c->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (c->dl != NULL) {
      c->name = names[i];
    } else {
      const char *e = dlerror();
      snprintf(why, why_size, "%s", e != NULL ? e : names[i]);
    }
  }
  if (c->dl == NULL) return 0;
  /* dlsym returns void *; the cast to a function pointer goes through memcpy (ISO C). */
  void *p;
  p = dlsym(c->dl, "cublasCreate_v2");
  memcpy(&c->create, &p, sizeof p);
  p = dlsym(c->dl, "cublasDestroy_v2");
  memcpy(&c->destroy, &p, sizeof p);
  p = dlsym(c->dl, "cublasSetStream_v2");
  memcpy(&c->set_stream, &p, sizeof p);
  p = dlsym(c->dl, "cublasSgemm_v2");
  memcpy(&c->sgemm, &p, sizeof p);
  return 1;
}

typedef struct gemm_job {
  cublas *lib;
  t4a_buffer *a, *b, *c;
  int m, n, k;
  float alpha, beta;
} gemm_job;

static t4a_status cublas_fail(const char *entry, int status) {
  return t4a_error_set_(T4A_DRIVER_ERROR, entry, status, NULL, 0, "%s returned cuBLAS status %d",
                        entry, status);
}

/* C = alpha * A * B + beta * C (column-major) on the scope's stream. */
static t4a_status gemm_fn(t4a_raw_scope *scope, void *user) {
  gemm_job *j = user;
  uint64_t pa = 0, pb = 0, pc = 0;
  t4a_status st = t4a_raw_devptr(scope, j->a, T4A_RAW_READ, &pa);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->b, T4A_RAW_READ, &pb);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->c, T4A_RAW_WRITE, &pc);
  if (st != T4A_OK) return st;
  cublas_handle h = NULL;
  int cs = j->lib->create(&h);
  if (cs != 0) return cublas_fail("cublasCreate_v2", cs);
  cs = j->lib->set_stream(h, (CUstream)t4a_raw_stream(scope));
  if (cs != 0) {
    (void)j->lib->destroy(h);
    return cublas_fail("cublasSetStream_v2", cs);
  }
  cs = j->lib->sgemm(h, 0, 0, j->m, j->n, j->k, &j->alpha, (const float *)(uintptr_t)pa, j->m,
                     (const float *)(uintptr_t)pb, j->k, &j->beta, (float *)(uintptr_t)pc, j->m);
  int ds = j->lib->destroy(h);
  if (cs != 0) return cublas_fail("cublasSgemm_v2", cs);
  if (ds != 0) return cublas_fail("cublasDestroy_v2", ds);
  return T4A_OK;
}

static void test_cublas_sgemm_in_raw_scope(void **state) {
  fixture *f = *state;
  cublas lib;
  char why[512];
  if (!cublas_load(&lib, why, sizeof why)) {
    printf("SKIP: cuBLAS case: no loadable libcublas (%s)\n", why);
    return;
  }
  assert_non_null(lib.create);
  assert_non_null(lib.destroy);
  assert_non_null(lib.set_stream);
  assert_non_null(lib.sgemm);
  const int m = 96, n = 80, k = 64;
  float *a = malloc(sizeof(float) * (size_t)(m * k));
  float *b = malloc(sizeof(float) * (size_t)(k * n));
  float *c0 = malloc(sizeof(float) * (size_t)(m * n));
  float *got = malloc(sizeof(float) * (size_t)(m * n));
  assert_true(a && b && c0 && got);
  for (int i = 0; i < m * k; i++) a[i] = (float)((i * 7) % 13 - 6) / 8.0f;
  for (int i = 0; i < k * n; i++) b[i] = (float)((i * 5) % 11 - 5) / 4.0f;
  for (int i = 0; i < m * n; i++) c0[i] = (float)(i % 9) - 4.0f;
  gemm_job j = {&lib, NULL, NULL, NULL, m, n, k, 1.5f, 0.5f};
  CK(t4a_buffer_create(f->pool, sizeof(float) * (size_t)(m * k), 0, 0, &j.a));
  CK(t4a_buffer_create(f->pool, sizeof(float) * (size_t)(k * n), 0, 0, &j.b));
  CK(t4a_buffer_create(f->pool, sizeof(float) * (size_t)(m * n), 0, 0, &j.c));
  CK(t4a_xfer_upload(f->xfer, j.a, 0, a, sizeof(float) * (size_t)(m * k)));
  CK(t4a_xfer_upload(f->xfer, j.b, 0, b, sizeof(float) * (size_t)(k * n)));
  CK(t4a_xfer_upload(f->xfer, j.c, 0, c0, sizeof(float) * (size_t)(m * n)));
  t4a_raw_binding bind[3] = {{j.a, T4A_RAW_READ}, {j.b, T4A_RAW_READ}, {j.c, T4A_RAW_WRITE}};
  t4a_status st = t4a_raw_run(f->retire, bind, 3, gemm_fn, &j);
  if (st != T4A_OK) {
    t4a_error e;
    char buf[512];
    t4a_error_last(&e);
    fail_msg("raw scope with cuBLAS: %s", t4a_error_format(&e, buf, sizeof buf));
  }
  /* The inputs may go at once: the scope keeps them until the GEMM ran. */
  t4a_buffer_release(j.a);
  t4a_buffer_release(j.b);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, j.c, 0, got, sizeof(float) * (size_t)(m * n), &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  double worst = 0;
  for (int col = 0; col < n; col++) {
    for (int row = 0; row < m; row++) {
      double want = 0.5 * c0[row + col * m];
      double dot = 0;
      for (int i = 0; i < k; i++) dot += (double)a[row + i * m] * (double)b[i + col * k];
      want += 1.5 * dot;
      double err = fabs(got[row + col * m] - want) / (1.0 + fabs(want));
      if (err > worst) worst = err;
      if (err > 1e-3) {
        fail_msg("C[%d,%d] = %g, want %g", row, col, (double)got[row + col * m], want);
      }
    }
  }
  printf("# cuBLAS (%s): SGEMM %dx%dx%d in a raw scope on the runtime's stream, max rel err "
         "%.2e\n", lib.name, m, n, k, worst);
  t4a_buffer_release(j.c);
  CK(t4a_retire_wait(f->retire));
  /* cuBLAS stays loaded: it registers teardown with the CUDA runtime it pulled in. */
  free(a);
  free(b);
  free(c0);
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_real_launch_in_raw_scope, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cublas_sgemm_in_raw_scope, setup, teardown),
  };
  return t4a_gpu_test_main("raw_gpu_test", tests, sizeof tests / sizeof *tests, 1, &g_drv);
}
