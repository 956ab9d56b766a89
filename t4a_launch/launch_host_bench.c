/* Host cost of t4a's launch paths, on this machine's CPU, against the fake driver with its launch
 * entries replaced by stubs (docs/performance.md "Host cost per launch, on the CPU build machine"):
 *
 *   launch_host_bench [--quick] [--evict KIB] [--row NAME]
 *
 * cuLaunchKernel and cuGraphLaunch return CUDA_SUCCESS at once; cuCtxGetCurrent reads a
 * thread-local copy of what cuCtxSetCurrent made current (the real driver's is about that).
 * Each row times blocks of t4a calls interleaved with blocks of the raw stub call they stand for
 * (the same function-pointer call through the same table), and prints both medians and the
 * difference: the nanoseconds of t4a's own work per call. --evict KIB: each stub call walks
 * KIB KiB of memory first (both sides), so that t4a's data leaves the near caches between calls
 * as the real driver's launch path evicts it. No GPU, and no claim about one: the lead measures
 * the ratios on the H200 with bench/t4a_bench.c. --row NAME: that row only. --quick: few iterations (a smoke run; exit 0
 * when every path ran). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/ctx.h"
#include "t4a/graph.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"

static const char k_ptx[] =
    "//\n// Generated for the fake driver\n//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry nop()\n{\n  ret;\n}\n"
    ".visible .entry add(\n  .param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n{\n"
    "  ret;\n}\n";

static CUresult(CUDAAPI *g_fake_set_current)(CUcontext);
static _Thread_local CUcontext t_current;
static unsigned char *g_evict;
static size_t g_evict_bytes;
static volatile unsigned g_sink;

static void evict(void) {
  unsigned s = 0;
  for (size_t i = 0; i < g_evict_bytes; i += 64) s += g_evict[i]++;
  g_sink += s;
}

static CUresult CUDAAPI stub_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream s, void **params, void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s;
  (void)params, (void)extra;
  if (g_evict_bytes) evict();
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI stub_graph_launch(CUgraphExec g, CUstream s) {
  (void)g, (void)s;
  if (g_evict_bytes) evict();
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI stub_get_current(CUcontext *out) {
  *out = t_current;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI wrap_set_current(CUcontext c) {
  CUresult r = g_fake_set_current(c);
  if (r == CUDA_SUCCESS) t_current = c;
  return r;
}

static void wrap(t4a_driver_table *t) {
  g_fake_set_current = t->cuCtxSetCurrent;
  t->cuCtxSetCurrent = wrap_set_current;
  t->cuCtxGetCurrent = stub_get_current;
  t->cuLaunchKernel = stub_launch;
  t->cuGraphLaunch = stub_graph_launch;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct env {
  t4a_fixture f;
  const t4a_driver_table *tbl;
  t4a_function *nop, *add;
  t4a_buffer *a, *b, *c, *d;
  int n;
  t4a_arg args4[4], args4b[4];
  uint32_t fire0, fire4;
  t4a_graph *g1;
} env;

enum { ROW_LAUNCH0, ROW_LAUNCH4, ROW_FIRE0, ROW_FIRE4, ROW_REBIND4, ROW_GRAPH1, ROWS };
static const char *const k_rows[ROWS] = {"launch0", "launch4", "fire0", "fire4", "fire4_rebind",
                                         "graph1"};

static t4a_status t4a_block(env *e, int row, uint32_t ops) {
  t4a_status st = T4A_OK;
  t4a_launch_config cfg = {{1, 1, 1}, {128, 1, 1}, 0};
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    switch (row) {
      case ROW_LAUNCH0: st = t4a_launch(e->f.retire, e->nop, &cfg, NULL, 0); break;
      case ROW_LAUNCH4: st = t4a_launch(e->f.retire, e->add, &cfg, e->args4, 4); break;
      case ROW_FIRE0: st = t4a_descriptor_fire(e->f.table, e->fire0); break;
      case ROW_FIRE4: st = t4a_descriptor_fire(e->f.table, e->fire4); break;
      case ROW_REBIND4:
        st = t4a_descriptor_rebind_fire(e->f.table, e->fire4, (i & 1) ? e->args4b : e->args4, 4);
        break;
      default: st = t4a_graph_launch(e->g1); break;
    }
  }
  return st;
}

static t4a_status raw_block(env *e, int row, uint32_t ops) {
  CUresult r = CUDA_SUCCESS;
  CUstream s = t4a_lane_stream(e->f.lane);
  void *params[4] = {&e->n, &e->n, &e->n, &e->n};
  for (uint32_t i = 0; i < ops && r == CUDA_SUCCESS; i++) {
    if (row == ROW_GRAPH1) {
      r = e->tbl->cuGraphLaunch((CUgraphExec)e, s);
    } else {
      r = e->tbl->cuLaunchKernel((CUfunction)e, 1, 1, 1, 128, 1, 1, 0, s,
                                 row == ROW_LAUNCH0 || row == ROW_FIRE0 ? NULL : params, NULL);
    }
  }
  return r == CUDA_SUCCESS ? T4A_OK : T4A_DRIVER_ERROR;
}

#define CKS(x)                                                                        \
  do {                                                                                \
    t4a_status st_ = (x);                                                             \
    if (st_ != T4A_OK) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, t4a_status_name(st_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(int argc, char **argv) {
  int quick = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--row") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (strcmp(argv[i], "--evict") == 0 && i + 1 < argc) {
      g_evict_bytes = (size_t)strtoul(argv[++i], NULL, 10) * 1024;
    } else {
      fprintf(stderr, "usage: launch_host_bench [--quick] [--evict KIB] [--row NAME]\n");
      return 2;
    }
  }
  if (g_evict_bytes) g_evict = calloc(1, g_evict_bytes);
  static env e;
  t4a_fixture_options o = t4a_fixture_defaults();
  o.wrap_table = wrap;
  o.wrapped_name = "launch_host_bench stubs";
  o.build |= T4A_FIXTURE_MODULE_CACHE | T4A_FIXTURE_TABLE;
  o.kernels[0] = &t4a_hk_nop;
  o.kernels[1] = &t4a_hk_add;
  CKS(t4a_fixture_init(&e.f, &o));
  e.tbl = &e.f.drv->t;
  t4a_module *m = NULL;
  CKS(t4a_module_load(e.f.cache, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  CKS(t4a_module_get_function(m, "nop", &e.nop));
  CKS(t4a_module_get_function(m, "add", &e.add));
  CKS(t4a_buffer_create(e.f.pool, 4096, 0, 0, &e.a));
  CKS(t4a_buffer_create(e.f.pool, 4096, 0, 0, &e.b));
  CKS(t4a_buffer_create(e.f.pool, 4096, 0, 0, &e.c));
  CKS(t4a_buffer_create(e.f.pool, 4096, 0, 0, &e.d));
  e.n = 1;
  e.args4[0] = t4a_arg_buffer(e.a, 0);
  e.args4[1] = t4a_arg_buffer(e.b, 0);
  e.args4[2] = t4a_arg_buffer(e.c, 0);
  e.args4[3] = t4a_arg_scalar(&e.n, sizeof e.n);
  memcpy(e.args4b, e.args4, sizeof e.args4b);
  e.args4b[2] = t4a_arg_buffer(e.d, 0);
  t4a_launch_config cfg = {{1, 1, 1}, {128, 1, 1}, 0};
  CKS(t4a_descriptor_register(e.f.table, e.nop, &cfg, NULL, 0, &e.fire0));
  CKS(t4a_descriptor_register(e.f.table, e.add, &cfg, e.args4, 4, &e.fire4));
  CKS(t4a_graph_capture_begin(e.f.retire));
  t4a_status cap = t4a_launch(e.f.retire, e.add, &cfg, e.args4, 4);
  CKS(t4a_graph_capture_end(e.f.retire, &e.g1));
  CKS(cap);
  /* The lane's context current on this thread, as in t4a_bench's windows. */
  t4a_ctx_scope scope;
  CKS(t4a_ctx_scope_enter(&scope, t4a_lane_holder(e.f.lane), NULL));

  uint32_t ops = quick ? 100 : 20000, reps = quick ? 2 : 41;
  printf("host ns per call, stubs for cuLaunchKernel/cuGraphLaunch/cuCtxGetCurrent%s\n",
         g_evict_bytes ? " (each stub walks the eviction buffer)" : "");
  if (g_evict_bytes) printf("eviction buffer: %zu KiB per stub call\n", g_evict_bytes / 1024);
  printf("%-14s %10s %10s %10s\n", "row", "raw", "t4a", "t4a-raw");
  for (int row = 0; row < ROWS; row++) {
    if (only != NULL && strcmp(only, k_rows[row]) != 0) continue;
    double tr[64], tt[64];
    CKS(t4a_block(&e, row, ops)); /* warm */
    CKS(raw_block(&e, row, ops));
    for (uint32_t k = 0; k < reps; k++) {
      double t0 = now_ns();
      CKS(raw_block(&e, row, ops));
      double t1 = now_ns();
      CKS(t4a_block(&e, row, ops));
      double t2 = now_ns();
      tr[k] = (t1 - t0) / ops;
      tt[k] = (t2 - t1) / ops;
    }
    qsort(tr, reps, sizeof *tr, cmp_double);
    qsort(tt, reps, sizeof *tt, cmp_double);
    if (quick) {
      printf("smoke: ok %s\n", k_rows[row]);
    } else {
      printf("%-14s %10.1f %10.1f %10.1f\n", k_rows[row], tr[reps / 2], tt[reps / 2],
             tt[reps / 2] - tr[reps / 2]);
    }
  }
  t4a_ctx_scope_exit_quiet(&scope);
  CKS(t4a_retire_wait(e.f.retire));
  t4a_graph_release(e.g1);
  CKS(t4a_descriptor_unregister(e.f.table, e.fire0));
  CKS(t4a_descriptor_unregister(e.f.table, e.fire4));
  t4a_buffer_release(e.a);
  t4a_buffer_release(e.b);
  t4a_buffer_release(e.c);
  t4a_buffer_release(e.d);
  t4a_module_release(m);
  int bad = t4a_fixture_fini(&e.f, 0);
  free(g_evict);
  return bad ? 1 : 0;
}
