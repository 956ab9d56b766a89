/* t4a_bench: paired, in-process benchmarks of t4a against the raw Driver API on every hot path
 * (issue 9; results in docs/performance.md).
 *
 *   t4a_bench [--fake] [--quick] [--json] [--json-file PATH] [--repeats R] [--list]
 *             [--only NAME]... [NAME|GROUP]...
 *
 * Every measurement runs the same work two ways in this one process, on the same device, lane
 * stream, kernel, arguments and memory: side A through t4a, side B through the raw driver (the
 * lane's own driver table, T4A_CU(driver, cuX, ...), with the lane's context current and the
 * lane's stream). A block is `ops` operations timed as one window; blocks alternate A, B, A, B...
 * (strict ABAB) after `warmup` uncounted blocks of each, `repeats` blocks per side. Per side:
 * min / median / max of the per-operation time over the blocks; the ratio t4a/raw of the medians,
 * and the min-max of the per-block ratios (block i of t4a over block i of raw). Counters are
 * read around every timed window only (the lane counters of both runtimes, t4a_heap_allocations,
 * the artifact cache's NVRTC calls) and printed with every figure.
 *
 * Timing windows (each spec says which):
 *   submit  host time of `ops` submissions back to back; the stream is synchronised after the
 *           window (t4a: t4a_runtime_sync; raw: cuStreamSynchronize), so each block starts on an
 *           idle stream. Launches, descriptor fires, 1-node graph replays, alloc+free, the warm
 *           chain, launch-chain replays, module binds.
 *   done    from the call until the bytes (or kernels) are in place, per operation: t4a's own
 *           wait (t4a_runtime_sync after an upload, t4a_xfer_pending_wait after a download,
 *           t4a_witness_wait after a copy; after the replays of a graph or a chain) against raw
 *           cuStreamSynchronize. Transfers, copies, the 1000-node graph, and NAME_done beside
 *           every submit-time graph and chain row (graph1, chain, chain100, chain100_rebind), so
 *           that no ratio compares submission with completion.
 * The goals are in bench/goals.tsv, checked against the JSON by scripts/check_goals.py.
 * In both kinds the lane's context is current during both sides' windows (a raw caller must
 * make it current; it is set once outside the windows), except launch0_noctx, whose t4a side
 * runs with no current context (a thread that only uses t4a: every call activates and restores).
 *
 * --fake runs the same code paths on the fake driver of the tests (NVRTC still compiles for
 * real; the kernels run as empty host functions) with tiny sizes: a smoke test, whose timings
 * mean nothing and are never printed ("smoke: ok NAME" lines, counters only). Exit status: 0
 * when every selected measurement ran, 1 otherwise (and on the fake when anything was left alive
 * or a stream-ordering violation was seen), 2 for bad usage, 77 without a driver (real mode).
 *
 * Layer: a program over //:t4a, the driver seam (raw baselines), the fake driver and the
 * benchmarks' harness (bench/harness.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "t4a/t4a.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/lsan/nvrtc_suppressions.h"
#define T4A_BENCH_NAME "t4a_bench"
#include "bench/harness.h"

/* The kernels: an empty one, and one with four arguments (ptr, int, float, ptr) that touches
 * nothing (n is never negative), as in the anchors' raw figures. */
static const char k_source[] =
    "extern \"C\" __global__ void empty() {}\n"
    "extern \"C\" __global__ void args4(float *p, int n, float a, float *q) {\n"
    "  if (n < 0) { p[threadIdx.x] = a; q[threadIdx.x] = a; }\n"
    "}\n";

enum { BLOCK_THREADS = 32, SMALL_BYTES = 4096, MAX_SIZES = 6, MAX_RESULTS = 96, CHAIN_FIRES = 100 };
#define MIB ((size_t)1 << 20)

/* ---- time, counters, the window ---- */

/* What a window (or a side's blocks) did, from t4a's counters. */
typedef struct counts {
  uint64_t events, host_waits, heap, nvrtc, admissions, launches, graph_launches, module_loads,
      device_allocs, reuse_hits, staging_waits;
} counts;

static void counts_add(counts *a, const counts *b) {
  a->events += b->events;
  a->host_waits += b->host_waits;
  a->heap += b->heap;
  a->nvrtc += b->nvrtc;
  a->admissions += b->admissions;
  a->launches += b->launches;
  a->graph_launches += b->graph_launches;
  a->module_loads += b->module_loads;
  a->device_allocs += b->device_allocs;
  a->reuse_hits += b->reuse_hits;
  a->staging_waits += b->staging_waits;
}

typedef struct snap {
  t4a_counter_values lane; /* both runtimes' lanes, summed */
  uint64_t heap, nvrtc;
} snap;

/* ---- the bench's state ---- */

typedef struct bench {
  /* options */
  int fake, quick, json_stdout, repeats_override, list;
  FILE *json; /* JSON lines (stdout with --json, or --json-file) */
  FILE *out;  /* the readable table (stdout unless --json) */
  const char *only[64];
  int num_only;
  /* the driver and two runtimes on device 0 (the second one for copies between runtimes) */
  t4a_fake *fk;
  t4a_driver *drv;
  t4a_runtime *rt, *rt2;
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_mem_pool *pool;
  t4a_xfer *xfer;
  t4a_module_cache *modules;
  t4a_launch_table *table;
  CUstream stream;
  /* kernels: through t4a, and the same bytes loaded raw */
  t4a_nvrtc_artifact *art;
  const void *image;
  size_t image_bytes;
  t4a_module *mod;
  t4a_function *f_empty, *f_args4;
  /* the same kernels in a GRAPH module cache: checked launches through their own graphs */
  t4a_module_cache *gmodules;
  t4a_module *gmod;
  t4a_function *g_empty, *g_args4;
  CUmodule raw_mod;
  CUfunction r_empty, r_args4;
  /* arguments of args4, both ways (p, n, a, q) */
  t4a_buffer *p, *q, *c;
  CUdeviceptr dp, dq, dc;
  int32_t n;
  float a;
  t4a_arg args4[4];
  t4a_arg args4b[4]; /* args4 with c in place of q: rebinds alternate the two */
  void *params4[4];
  uint32_t fire0_id, fire4_id;
  /* descriptors of the empty kernel with launch attributes (issue 23): a cluster of 2 blocks
   * (grid 2) and a cooperative launch (grid 2); 0 where the device refused them */
  uint32_t cfire0_id, kfire0_id;
  /* the same descriptors in a table that fires GRAPH from the first fire (issue 14) */
  t4a_launch_table *gtable;
  uint32_t gfire0_id, gfire4_id;
  /* a launch chain (issue 13): CHAIN_FIRES descriptors of args4 in a table of their own, each
   * fired once into the chain; the rebind measurement flips the first one's p between p and c */
  t4a_launch_table *ctable;
  uint32_t chain_ids[CHAIN_FIRES];
  t4a_chain *chain;
  /* graphs: t4a captures, raw captures of the same launches, instantiated alike */
  t4a_graph *g1, *g1000;
  CUgraph rg1_graph, rg1000_graph;
  /* a raw one-node graph of args4 built explicitly (its node known): the driver's own floor for
     a node update + launch */
  CUgraph rn_graph;
  CUgraphNode rn_node;
  CUgraphExec rn_exec;
  void *params4b[4]; /* params4 with dc in place of dq */
  CUgraphExec rg1, rg1000;
  uint32_t big_graph_nodes;
  /* a raw pool like t4a's (release threshold UINT64_MAX) on the same device */
  CUmemoryPool raw_pool;
  /* the window */
  snap w0;
  double t0;
  counts win; /* accumulated by win_end since the harness last cleared it */
  t4a_ctx_scope scope;
  int scope_open;
  /* info */
  t4a_device_info info;
  int nvrtc_major, nvrtc_minor;
  int failures, ran;
} bench;

static void take_snap(bench *b, snap *s) {
  t4a_counter_values v2;
  t4a_runtime_stats(b->rt, &s->lane);
  t4a_runtime_stats(b->rt2, &v2);
#define T4A_BENCH_SUM_(name, desc) s->lane.name += v2.name;
  T4A_COUNTER_LIST(T4A_BENCH_SUM_)
#undef T4A_BENCH_SUM_
  s->heap = t4a_heap_allocations();
  s->nvrtc = 0;
  t4a_nvrtc_cache *cache = t4a_runtime_artifact_cache(b->rt);
  if (cache != NULL) {
    struct t4a_nvrtc_cache_stats c;
    t4a_nvrtc_cache_stats(cache, &c);
    s->nvrtc = c.counters.nvrtc_compile_attempts;
  }
}

/* The timed window: counters are read outside it, before its start and after its end. */
static void win_begin(bench *b) {
  take_snap(b, &b->w0);
  b->t0 = t4a_bench_now();
}

static double win_end(bench *b) {
  double t = t4a_bench_now() - b->t0;
  snap s1;
  take_snap(b, &s1);
  counts d;
  d.events = s1.lane.events_recorded - b->w0.lane.events_recorded;
  d.host_waits = s1.lane.host_waits - b->w0.lane.host_waits;
  d.heap = s1.heap - b->w0.heap;
  d.nvrtc = s1.nvrtc - b->w0.nvrtc;
  d.admissions = s1.lane.admissions - b->w0.lane.admissions;
  d.launches = s1.lane.launches - b->w0.lane.launches;
  d.graph_launches = s1.lane.graph_launches - b->w0.lane.graph_launches;
  d.module_loads = s1.lane.module_loads - b->w0.lane.module_loads;
  d.device_allocs = s1.lane.device_allocs - b->w0.lane.device_allocs;
  d.reuse_hits = s1.lane.reuse_hits - b->w0.lane.reuse_hits;
  d.staging_waits = s1.lane.staging_waits - b->w0.lane.staging_waits;
  counts_add(&b->win, &d);
  return t;
}

/* The lane's context, current for a block (outside its window) unless `no_ctx`. */
static t4a_status ctx_enter(bench *b, int no_ctx) {
  if (no_ctx) return T4A_OK;
  t4a_status st = t4a_ctx_scope_enter(&b->scope, t4a_lane_holder(b->lane), NULL);
  b->scope_open = st == T4A_OK;
  return st;
}

static void ctx_exit(bench *b) {
  if (b->scope_open) t4a_ctx_scope_exit_quiet(&b->scope);
  b->scope_open = 0;
}

/* A sync outside every window (teardown, between groups); a failure is reported and counted. */
static void sync_quiet(bench *b, t4a_runtime *rt) {
  t4a_status st = t4a_runtime_sync(rt);
  if (st != T4A_OK) {
    t4a_error e;
    char buf[512];
    t4a_error_last(&e);
    fprintf(stderr, "t4a_bench: t4a_runtime_sync: %s\n", t4a_error_format(&e, buf, sizeof buf));
    b->failures++;
  }
}

/* The raw side's sync after its window (the lane's context is current). */
static t4a_status raw_sync(bench *b, CUstream s) { return T4A_CU(b->drv, cuStreamSynchronize, s); }

static void print_failure(bench *b, const char *what, t4a_status st) {
  t4a_error e;
  char buf[768];
  t4a_error_last(&e);
  if (e.status != st) e.status = st;
  fprintf(stderr, "t4a_bench: %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  if (b->out != stderr) {
    fprintf(b->out, "FAILED %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  }
}

/* ---- block functions: run `ops` operations, the window around them; return its seconds ---- */

typedef t4a_status (*block_fn)(bench *b, const void *arg, uint32_t ops, double *out_s);

/* Launches (checked, descriptor, raw) of one kernel. */
typedef struct launch_arg {
  int kernel4;    /* 0: empty, 1: args4 */
  int no_ctx;     /* t4a side: no current context during the window */
  uint32_t *fire; /* descriptor id (fire blocks) */
  int graph;      /* fire blocks: the GRAPH table */
  int glaunch;    /* launch blocks: the GRAPH cache's functions (t4a_launch on the retire) */
  int rebind;     /* fire blocks: t4a_descriptor_rebind_fire, every argument, alternating
                     args4 and args4b (so every fire changes the output pointer) */
  int attr;       /* raw cuLaunchKernelEx blocks: 1 a cluster of 2, 2 cooperative (grid 2) */
} launch_arg;

static t4a_status blk_t4a_launch(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const launch_arg *la = arg;
  t4a_status st = ctx_enter(b, la->no_ctx);
  if (st != T4A_OK) return st;
  if (la->no_ctx) { /* the premise of launch0_noctx: nothing is current on this thread */
    CUcontext cur = NULL;
    st = T4A_CU(b->drv, cuCtxGetCurrent, &cur);
    if (st == T4A_OK && cur != NULL) {
      return t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0,
                            "a context is current before the window");
    }
    if (st != T4A_OK) return st;
  }
  t4a_function *f = la->kernel4 ? b->f_args4 : b->f_empty;
  const t4a_arg *args = la->kernel4 ? b->args4 : NULL;
  uint32_t nargs = la->kernel4 ? 4 : 0;
  win_begin(b);
  if (la->glaunch) {
    /* The same call as t4a_runtime_launch makes, with the GRAPH cache's function. */
    const t4a_launch_config cfg = {{1, 1, 1}, {BLOCK_THREADS, 1, 1}, 0};
    f = la->kernel4 ? b->g_args4 : b->g_empty;
    for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
      const t4a_arg *x = la->rebind && (i & 1) ? b->args4b : args;
      st = t4a_launch(b->retire, f, &cfg, x, nargs);
    }
  } else {
    for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
      st = t4a_runtime_launch(b->rt, f, 1, BLOCK_THREADS, args, nargs);
    }
  }
  *out_s = win_end(b);
  ctx_exit(b);
  t4a_status s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_t4a_fire(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const launch_arg *la = arg;
  t4a_status st = ctx_enter(b, la->no_ctx);
  if (st != T4A_OK) return st;
  uint32_t id = *la->fire;
  if (id == 0) {
    ctx_exit(b);
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "the device refused this descriptor's launch attributes");
  }
  t4a_launch_table *t = la->graph ? b->gtable : b->table;
  win_begin(b);
  if (la->rebind) {
    for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
      st = t4a_descriptor_rebind_fire(t, id, (i & 1) ? b->args4b : b->args4, 4);
    }
  } else {
    for (uint32_t i = 0; i < ops && st == T4A_OK; i++) st = t4a_descriptor_fire(t, id);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  t4a_status s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

/* The raw launch loop; `ctxget`: a cuCtxGetCurrent before each launch (launch0_ctxget). */
static t4a_status raw_launches(bench *b, const launch_arg *la, int ctxget, uint32_t ops,
                               double *out_s) {
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUfunction f = la->kernel4 ? b->r_args4 : b->r_empty;
  void **params = la->kernel4 ? b->params4 : NULL;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    if (ctxget) {
      CUcontext cur = NULL;
      if ((st = T4A_CU(b->drv, cuCtxGetCurrent, &cur)) != T4A_OK) break;
    }
    st = T4A_CU(b->drv, cuLaunchKernel, f, 1, 1, 1, BLOCK_THREADS, 1, 1, 0, s, params, NULL);
  }
  *out_s = win_end(b);
  t4a_status s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_launch(bench *b, const void *arg, uint32_t ops, double *out_s) {
  return raw_launches(b, arg, 0, ops, out_s);
}

static t4a_status blk_raw_launch_ctxget(bench *b, const void *arg, uint32_t ops, double *out_s) {
  return raw_launches(b, arg, 1, ops, out_s);
}

/* The raw side of the attribute fires: cuLaunchKernelEx of the empty kernel, grid 2, with a
 * cluster of 2 or the cooperative attribute. */
static t4a_status blk_raw_launch_ex(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const launch_arg *la = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  if (la->attr == 1) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
  } else {
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
  }
  CUlaunchConfig lc;
  memset(&lc, 0, sizeof lc);
  lc.gridDimX = 2;
  lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = BLOCK_THREADS;
  lc.blockDimY = lc.blockDimZ = 1;
  lc.hStream = b->stream;
  lc.attrs = &attr;
  lc.numAttrs = 1;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = T4A_CU(b->drv, cuLaunchKernelEx, &lc, b->r_empty, NULL, NULL);
  }
  *out_s = win_end(b);
  t4a_status s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* Graph replays: `with_sync` puts the wait for the replays inside the window. */
typedef struct graph_arg {
  int big;
  int with_sync;
} graph_arg;

static t4a_status blk_t4a_graph(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const graph_arg *ga = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  t4a_graph *g = ga->big ? b->g1000 : b->g1;
  t4a_status s2 = T4A_OK;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) st = t4a_graph_launch(g);
  if (ga->with_sync) s2 = t4a_runtime_sync(b->rt);
  *out_s = win_end(b);
  ctx_exit(b);
  if (!ga->with_sync) s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_graph(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const graph_arg *ga = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUgraphExec g = ga->big ? b->rg1000 : b->rg1;
  CUstream s = b->stream;
  t4a_status s2 = T4A_OK;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) st = T4A_CU(b->drv, cuGraphLaunch, g, s);
  if (ga->with_sync) s2 = raw_sync(b, s);
  *out_s = win_end(b);
  if (!ga->with_sync) s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* The driver's floor for a rebind per fire: cuGraphExecKernelNodeSetParams (args4, the output
 * alternating as in gfire4_rebind) then cuGraphLaunch of a raw one-node graph. */
static t4a_status blk_raw_update_launch(bench *b, const void *arg, uint32_t ops, double *out_s) {
  (void)arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = b->r_args4;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = BLOCK_THREADS;
  p.blockDimY = p.blockDimZ = 1;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    p.kernelParams = (i & 1) ? b->params4b : b->params4;
    st = T4A_CU(b->drv, cuGraphExecKernelNodeSetParams, b->rn_exec, b->rn_node, &p);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphLaunch, b->rn_exec, s);
  }
  *out_s = win_end(b);
  t4a_status s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* 1 MiB create + release. */
static t4a_status blk_t4a_alloc(bench *b, const void *arg, uint32_t ops, double *out_s) {
  size_t bytes = *(const size_t *)arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    t4a_buffer *buf = NULL;
    st = t4a_buffer_create(b->pool, bytes, 0, 0, &buf);
    t4a_buffer_release(buf);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  t4a_status s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_alloc(bench *b, const void *arg, uint32_t ops, double *out_s) {
  size_t bytes = *(const size_t *)arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    CUdeviceptr ptr = 0;
    st = T4A_CU(b->drv, cuMemAllocFromPoolAsync, &ptr, bytes, b->raw_pool, s);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuMemFreeAsync, ptr, s);
  }
  *out_s = win_end(b);
  t4a_status s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* Transfers: one device buffer, pageable host memory (touched) and one pinned allocation. */
typedef struct xfer_env {
  t4a_buffer *dbuf;
  unsigned char *host_src, *host_dst; /* pageable */
  t4a_pinned *pinned;
  size_t max_bytes;
} xfer_env;
static xfer_env g_xfer;

typedef struct xfer_arg {
  size_t bytes;
  int down;   /* 0: host -> device, 1: device -> host */
  int pinned; /* 0: pageable, 1: from / to the pinned allocation */
} xfer_arg;

static t4a_status blk_t4a_xfer(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const xfer_arg *xa = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    if (!xa->down) {
      st = xa->pinned ? t4a_xfer_upload_pinned(b->xfer, g_xfer.dbuf, 0, g_xfer.pinned, 0, xa->bytes)
                      : t4a_xfer_upload(b->xfer, g_xfer.dbuf, 0, g_xfer.host_src, xa->bytes);
      if (st == T4A_OK) st = t4a_runtime_sync(b->rt);
    } else {
      t4a_xfer_pending *p = NULL;
      st = xa->pinned ? t4a_xfer_download_pinned(b->xfer, g_xfer.dbuf, 0, g_xfer.pinned, 0,
                                                 xa->bytes, &p)
                      : t4a_xfer_download(b->xfer, g_xfer.dbuf, 0, g_xfer.host_dst, xa->bytes, &p);
      if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
      t4a_xfer_pending_release(p);
    }
  }
  *out_s = win_end(b);
  ctx_exit(b);
  return st;
}

static t4a_status blk_raw_xfer(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const xfer_arg *xa = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = b->stream;
  CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(g_xfer.dbuf);
  void *host = xa->pinned ? t4a_pinned_host(g_xfer.pinned)
                          : (xa->down ? (void *)g_xfer.host_dst : (void *)g_xfer.host_src);
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = xa->down ? T4A_CU(b->drv, cuMemcpyDtoHAsync, host, d, xa->bytes, s)
                  : T4A_CU(b->drv, cuMemcpyHtoDAsync, d, host, xa->bytes, s);
    if (st == T4A_OK) st = raw_sync(b, s);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  return st;
}

/* Copies between two runtimes on one device: rt -> rt2. */
typedef struct copy_env {
  t4a_buffer *src, *dst; /* src of rt, dst of rt2 */
  size_t bytes;
} copy_env;
static copy_env g_copy;

static t4a_status blk_t4a_copy(bench *b, const void *arg, uint32_t ops, double *out_s) {
  (void)arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    t4a_witness *w = NULL;
    st = t4a_xfer_copy(t4a_runtime_xfer(b->rt2), g_copy.dst, 0, b->xfer, g_copy.src, 0,
                       g_copy.bytes, T4A_COPY_SAME_DEVICE, NULL, &w);
    if (st == T4A_OK) st = t4a_witness_wait(w);
    t4a_witness_release(w);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  return st;
}

static t4a_status blk_raw_copy(bench *b, const void *arg, uint32_t ops, double *out_s) {
  (void)arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = t4a_lane_stream(t4a_runtime_lane(b->rt2)); /* the destination's stream */
  CUdeviceptr src = (CUdeviceptr)t4a_buffer_devptr(g_copy.src);
  CUdeviceptr dst = (CUdeviceptr)t4a_buffer_devptr(g_copy.dst);
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = T4A_CU(b->drv, cuMemcpyDtoDAsync, dst, src, g_copy.bytes, s);
    if (st == T4A_OK) st = raw_sync(b, s);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  return st;
}

/* Module binds: a cache hit (and the kernel's lookup) against cuModuleLoadData (and
 * cuModuleGetFunction) of the same CUBIN. */
typedef struct module_arg {
  int with_function;
} module_arg;

static t4a_status blk_t4a_module(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const module_arg *ma = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    t4a_module *m = NULL;
    st = t4a_module_load_artifact(b->modules, b->art, &m);
    if (st == T4A_OK && ma->with_function) {
      t4a_function *f = NULL;
      st = t4a_module_get_function(m, "args4", &f);
      t4a_function_release(f);
    }
    t4a_module_release(m);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  return st;
}

static t4a_status blk_raw_module(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const module_arg *ma = arg;
  CUmodule *mods = calloc(ops, sizeof *mods);
  if (mods == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_status st = ctx_enter(b, 0);
  uint32_t loaded = 0;
  if (st == T4A_OK) {
    win_begin(b);
    for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
      st = T4A_CU(b->drv, cuModuleLoadData, &mods[i], b->image);
      if (st != T4A_OK) break;
      loaded++;
      if (ma->with_function) {
        CUfunction f = NULL;
        st = T4A_CU(b->drv, cuModuleGetFunction, &f, mods[i], "args4");
      }
    }
    *out_s = win_end(b);
    for (uint32_t i = 0; i < loaded; i++) { /* outside the window */
      t4a_status su = T4A_CU(b->drv, cuModuleUnload, mods[i]);
      if (st == T4A_OK) st = su;
    }
    ctx_exit(b);
  }
  free(mods);
  return st;
}

/* The warm chain: per step a checked 4-arg launch, a descriptor fire, a 4 KiB copy within the
 * lane and a 1-node graph replay (4 admissions); raw: cuLaunchKernel twice, cuMemcpyDtoDAsync,
 * cuGraphLaunch. `arg` (an int, or NULL for 0): nonzero puts the wait for the work (t4a_runtime_sync
 * / cuStreamSynchronize) inside the window: the completion-time row. */
static int with_sync_of(const void *arg) { return arg != NULL && *(const int *)arg != 0; }

static t4a_status blk_t4a_chain(bench *b, const void *arg, uint32_t ops, double *out_s) {
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  t4a_status s2 = T4A_OK;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = t4a_runtime_launch(b->rt, b->f_args4, 1, BLOCK_THREADS, b->args4, 4);
    if (st == T4A_OK) st = t4a_descriptor_fire(b->table, b->fire4_id);
    if (st == T4A_OK) st = t4a_runtime_copy(b->rt, b->c, 0, b->p, 0, SMALL_BYTES);
    if (st == T4A_OK) st = t4a_graph_launch(b->g1);
  }
  if (with_sync_of(arg)) s2 = t4a_runtime_sync(b->rt);
  *out_s = win_end(b);
  ctx_exit(b);
  if (!with_sync_of(arg)) s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_chain(bench *b, const void *arg, uint32_t ops, double *out_s) {
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = T4A_CU(b->drv, cuLaunchKernel, b->r_args4, 1, 1, 1, BLOCK_THREADS, 1, 1, 0, s,
                b->params4, NULL);
    if (st == T4A_OK) {
      st = T4A_CU(b->drv, cuLaunchKernel, b->r_args4, 1, 1, 1, BLOCK_THREADS, 1, 1, 0, s,
                  b->params4, NULL);
    }
    if (st == T4A_OK) st = T4A_CU(b->drv, cuMemcpyDtoDAsync, b->dc, b->dp, SMALL_BYTES, s);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphLaunch, b->rg1, s);
  }
  t4a_status s2 = T4A_OK;
  if (with_sync_of(arg)) s2 = raw_sync(b, s);
  *out_s = win_end(b);
  if (!with_sync_of(arg)) s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* A launch chain of CHAIN_FIRES args4 fires, replayed (t4a_chain_replay) vs the same kernels
 * launched raw (CHAIN_FIRES cuLaunchKernel per op); `rebind`: t4a rebinds the first fire's p
 * (alternating p and c) before each replay, so each replay updates one kernel node; `with_sync`:
 * the wait for the kernels is inside the window (the completion-time rows). */
typedef struct chain_arg {
  int rebind, with_sync;
} chain_arg;

static t4a_status blk_t4a_chain_replay(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const chain_arg *ca = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  t4a_arg alt[2] = {t4a_arg_buffer(b->p, 0), t4a_arg_buffer(b->c, 0)};
  t4a_status s2 = T4A_OK;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    if (ca->rebind) st = t4a_descriptor_rebind(b->ctable, b->chain_ids[0], 0, &alt[i & 1]);
    if (st == T4A_OK) st = t4a_chain_replay(b->ctable, b->chain);
  }
  if (ca->with_sync) s2 = t4a_runtime_sync(b->rt);
  *out_s = win_end(b);
  ctx_exit(b);
  if (!ca->with_sync) s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_chain_launches(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const chain_arg *ca = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = b->stream;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    for (uint32_t k = 0; k < CHAIN_FIRES && st == T4A_OK; k++) {
      st = T4A_CU(b->drv, cuLaunchKernel, b->r_args4, 1, 1, 1, BLOCK_THREADS, 1, 1, 0, s,
                  b->params4, NULL);
    }
  }
  t4a_status s2 = T4A_OK;
  if (ca->with_sync) s2 = raw_sync(b, s);
  *out_s = win_end(b);
  if (!ca->with_sync) s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* Fills: t4a_memset (a 32-bit pattern) against cuMemsetD32Async on the same stream. */
typedef struct memset_arg {
  size_t bytes;
  int done; /* 1: until the fill completed (sync per fill), 0: submission only */
} memset_arg;
static t4a_buffer *g_memset_buf;

static t4a_status blk_t4a_memset(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const memset_arg *ma = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  size_t count = ma->bytes / 4;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = t4a_runtime_memset(b->rt, NULL, g_memset_buf, 0, count, 4, i);
    if (st == T4A_OK && ma->done) st = t4a_runtime_sync(b->rt);
  }
  *out_s = win_end(b);
  ctx_exit(b);
  t4a_status s2 = t4a_runtime_sync(b->rt);
  return st != T4A_OK ? st : s2;
}

static t4a_status blk_raw_memset(bench *b, const void *arg, uint32_t ops, double *out_s) {
  const memset_arg *ma = arg;
  t4a_status st = ctx_enter(b, 0);
  if (st != T4A_OK) return st;
  CUstream s = b->stream;
  CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(g_memset_buf);
  size_t count = ma->bytes / 4;
  win_begin(b);
  for (uint32_t i = 0; i < ops && st == T4A_OK; i++) {
    st = T4A_CU(b->drv, cuMemsetD32Async, d, i, count, s);
    if (st == T4A_OK && ma->done) st = raw_sync(b, s);
  }
  *out_s = win_end(b);
  t4a_status s2 = raw_sync(b, s);
  ctx_exit(b);
  return st != T4A_OK ? st : s2;
}

/* ---- measurements ---- */

/* The goals are not here: bench/goals.tsv names them per row and scripts/check_goals.py checks
 * a run's JSON against them (scripts/bench.sh --run does after every run). */

typedef struct side {
  block_fn fn;
  const void *arg;
  const char *label;
} side;

typedef struct spec {
  const char *name, *group, *what;
  const char *window; /* "submit" or "done" */
  uint32_t ops, repeats, warmup;
  uint32_t units_per_op; /* figures are per unit (a graph replay of 1000 kernels: 1000); 0: 1 */
  size_t bytes;          /* per operation, for GB/s; 0: none */
  side t4a, raw;
} spec;

typedef struct result {
  const char *name, *window;
  double t4a_med, raw_med, ratio, rmin, rmax;
  size_t bytes;
} result;
static result g_results[MAX_RESULTS];
static int g_num_results;

static int selected(const bench *b, const spec *s) {
  if (b->num_only == 0) return 1;
  for (int i = 0; i < b->num_only; i++) {
    if (strcmp(b->only[i], s->name) == 0 || strcmp(b->only[i], s->group) == 0) return 1;
  }
  return 0;
}

static void json_counts(FILE *f, const char *key, const counts *c, uint64_t ops) {
  fprintf(f,
          "\"%s\":{\"ops\":%" PRIu64 ",\"events_recorded\":%" PRIu64 ",\"host_waits\":%" PRIu64
          ",\"heap_allocations\":%" PRIu64 ",\"nvrtc_calls\":%" PRIu64 ",\"admissions\":%" PRIu64
          ",\"launches\":%" PRIu64 ",\"graph_launches\":%" PRIu64 ",\"module_loads\":%" PRIu64
          ",\"device_allocs\":%" PRIu64 ",\"reuse_hits\":%" PRIu64 ",\"staging_waits\":%" PRIu64
          "}",
          key, ops, c->events, c->host_waits, c->heap, c->nvrtc, c->admissions, c->launches,
          c->graph_launches, c->module_loads, c->device_allocs, c->reuse_hits, c->staging_waits);
}

static void text_counts(FILE *f, const char *label, const counts *c, uint64_t ops) {
  fprintf(f,
          "    %-4s over %" PRIu64 " ops: events %" PRIu64 " (%.5f/op), host waits %" PRIu64
          ", heap allocations %" PRIu64 ", NVRTC calls %" PRIu64 ", admissions %" PRIu64
          ", module loads %" PRIu64 ", device allocs %" PRIu64 "\n",
          label, ops, c->events, ops ? (double)c->events / (double)ops : 0.0, c->host_waits,
          c->heap, c->nvrtc, c->admissions, c->module_loads, c->device_allocs);
}

/* Runs one paired measurement. Returns 1 if it ran. */
static int measure(bench *b, const spec *s) {
  if (!selected(b, s)) return 1;
  uint32_t reps = s->repeats, warm = s->warmup, ops = s->ops;
  if (b->repeats_override > 0 && !b->fake) reps = (uint32_t)b->repeats_override;
  if (b->fake) {
    reps = 2;
    warm = 1;
  }
  double *ta = calloc(reps, sizeof *ta), *tr = calloc(reps, sizeof *tr);
  if (ta == NULL || tr == NULL) {
    free(ta);
    free(tr);
    return 0;
  }
  counts ca, cr;
  memset(&ca, 0, sizeof ca);
  memset(&cr, 0, sizeof cr);
  t4a_status st = T4A_OK;
  const char *failed_side = NULL;
  double secs = 0;
  for (uint32_t w = 0; w < warm && st == T4A_OK; w++) {
    st = s->t4a.fn(b, s->t4a.arg, ops, &secs);
    if (st != T4A_OK) {
      failed_side = "t4a (warm-up)";
      break;
    }
    st = s->raw.fn(b, s->raw.arg, ops, &secs);
    if (st != T4A_OK) failed_side = "raw (warm-up)";
  }
  double units = (double)ops * (s->units_per_op ? s->units_per_op : 1);
  for (uint32_t r = 0; r < reps && st == T4A_OK; r++) { /* A B A B ... */
    memset(&b->win, 0, sizeof b->win);
    st = s->t4a.fn(b, s->t4a.arg, ops, &secs);
    counts_add(&ca, &b->win);
    ta[r] = secs / units;
    if (st != T4A_OK) {
      failed_side = "t4a";
      break;
    }
    memset(&b->win, 0, sizeof b->win);
    st = s->raw.fn(b, s->raw.arg, ops, &secs);
    counts_add(&cr, &b->win);
    tr[r] = secs / units;
    if (st != T4A_OK) failed_side = "raw";
  }
  if (st != T4A_OK) {
    char what[256];
    snprintf(what, sizeof what, "%s, %s side", s->name, failed_side ? failed_side : "?");
    print_failure(b, what, st);
    if (b->json) {
      fprintf(b->json, "{\"name\":\"%s\",\"error\":\"%s\"}\n", s->name, t4a_status_name(st));
      fflush(b->json);
    }
    free(ta);
    free(tr);
    b->failures++;
    return 0;
  }
  b->ran++;
  uint64_t nops = (uint64_t)ops * reps;
  if (b->fake) { /* a smoke test: the timings mean nothing and are not printed */
    if (b->out) {
      fprintf(b->out,
              "smoke: ok %s (%u blocks of %u ops per side; t4a: events %" PRIu64
              ", host waits %" PRIu64 ", heap allocations %" PRIu64 ", NVRTC calls %" PRIu64
              ", admissions %" PRIu64 ")\n",
              s->name, reps, ops, ca.events, ca.host_waits, ca.heap, ca.nvrtc, ca.admissions);
      fflush(b->out);
    }
    if (b->json) {
      fprintf(b->json, "{\"name\":\"%s\",\"smoke\":\"ok\",\"window\":\"%s\",", s->name, s->window);
      json_counts(b->json, "counters_t4a", &ca, nops);
      fprintf(b->json, ",");
      json_counts(b->json, "counters_raw", &cr, nops);
      fprintf(b->json, "}\n");
      fflush(b->json);
    }
    free(ta);
    free(tr);
    return 1;
  }
  t4a_bench_stats sa = t4a_bench_stats_of(ta, reps), sr = t4a_bench_stats_of(tr, reps);
  double *pr = malloc(reps * sizeof *pr);
  for (uint32_t r = 0; pr != NULL && r < reps; r++) pr[r] = ta[r] / tr[r];
  t4a_bench_stats sp = pr != NULL ? t4a_bench_stats_of(pr, reps) : (t4a_bench_stats){0, 0, 0};
  free(pr);
  double ratio = sa.med / sr.med;
  if (g_num_results < MAX_RESULTS) {
    result *res = &g_results[g_num_results++];
    res->name = s->name;
    res->window = s->window;
    res->t4a_med = sa.med;
    res->raw_med = sr.med;
    res->ratio = ratio;
    res->rmin = sp.min;
    res->rmax = sp.max;
    res->bytes = s->bytes;
  }
  if (b->out) {
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    fprintf(b->out, "%-22s %-6s %6u x%-3u  t4a %s [%s-%s]  raw %s [%s-%s] us  t4a/raw %.3f [%.3f-%.3f]",
            s->name, s->window, ops, reps, t4a_bench_fmt_us(sa.med * 1e6, b1, sizeof b1),
            t4a_bench_fmt_us(sa.min * 1e6, b2, sizeof b2),
            t4a_bench_fmt_us(sa.max * 1e6, b3, sizeof b3),
            t4a_bench_fmt_us(sr.med * 1e6, b4, sizeof b4),
            t4a_bench_fmt_us(sr.min * 1e6, b5, sizeof b5),
            t4a_bench_fmt_us(sr.max * 1e6, b6, sizeof b6), ratio, sp.min, sp.max);
    fprintf(b->out, "\n");
    if (s->bytes > 0) {
      fprintf(b->out, "    GB/s (1e9 B/s): t4a %.2f [%.2f-%.2f], raw %.2f [%.2f-%.2f], t4a speed %.2fx raw\n",
              (double)s->bytes / sa.med / 1e9, (double)s->bytes / sa.max / 1e9,
              (double)s->bytes / sa.min / 1e9, (double)s->bytes / sr.med / 1e9,
              (double)s->bytes / sr.max / 1e9, (double)s->bytes / sr.min / 1e9, 1.0 / ratio);
    }
    fprintf(b->out, "    %s\n", s->what);
    text_counts(b->out, "t4a", &ca, nops);
    text_counts(b->out, "raw", &cr, nops);
    fflush(b->out);
  }
  if (b->json) {
    FILE *f = b->json;
    fprintf(f,
            "{\"name\":\"%s\",\"group\":\"%s\",\"what\":\"%s\",\"window\":\"%s\",\"ops_per_block\":%u,"
            "\"units_per_op\":%u,\"repeats\":%u,\"warmup\":%u,\"order\":\"ABAB\",\"unit\":\"us\","
            "\"t4a\":{\"label\":\"%s\",\"min\":%.6f,\"median\":%.6f,\"max\":%.6f},"
            "\"raw\":{\"label\":\"%s\",\"min\":%.6f,\"median\":%.6f,\"max\":%.6f},"
            "\"ratio\":%.4f,\"ratio_block_min\":%.4f,\"ratio_block_max\":%.4f,\"bytes\":%zu,",
            s->name, s->group, s->what, s->window, ops, s->units_per_op ? s->units_per_op : 1, reps,
            warm, s->t4a.label, sa.min * 1e6, sa.med * 1e6, sa.max * 1e6, s->raw.label,
            sr.min * 1e6, sr.med * 1e6, sr.max * 1e6, ratio, sp.min, sp.max, s->bytes);
    if (s->bytes > 0) {
      fprintf(f, "\"t4a_gbs\":%.3f,\"raw_gbs\":%.3f,\"speed_vs_raw\":%.4f,",
              (double)s->bytes / sa.med / 1e9, (double)s->bytes / sr.med / 1e9, 1.0 / ratio);
    }
    json_counts(f, "counters_t4a", &ca, nops);
    fprintf(f, ",");
    json_counts(f, "counters_raw", &cr, nops);
    fprintf(f, "}\n");
    fflush(f);
  }
  free(ta);
  free(tr);
  return 1;
}

/* ---- setup and teardown ---- */

static void host_empty(t4a_fake_launch *l, void **p, void *user) {
  (void)l;
  (void)p;
  (void)user;
}

static int fail_setup(bench *b, const char *what, t4a_status st) {
  print_failure(b, what, st);
  b->failures++;
  return 0;
}

static int open_all(bench *b) {
  t4a_status st;
  if (b->fake) {
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    fo.mem_bytes = (uint64_t)1 << 30;
    st = t4a_fake_create(&fo, &b->fk);
    if (st == T4A_OK) st = t4a_fake_driver(b->fk, &b->drv);
    if (st != T4A_OK) return fail_setup(b, "the fake driver", st);
    static const size_t sizes4[4] = {8, 4, 4, 8};
    t4a_fake_register_kernel(b->fk, "empty", 0, NULL, host_empty, NULL);
    t4a_fake_register_kernel(b->fk, "args4", 4, sizes4, host_empty, NULL);
  } else {
    st = t4a_driver_get_default(&b->drv);
    if (st == T4A_DRIVER_NOT_FOUND || st == T4A_NO_DEVICE) {
      printf("SKIP: no CUDA driver (%s); try --fake\n", t4a_status_name(st));
      return -1;
    }
    if (st != T4A_OK) return fail_setup(b, "the driver", st);
  }
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = b->drv;
  o.modules.max_entries = 12000; /* the live-modules scaling keeps 10,000 modules cached */
  st = t4a_runtime_open(0, &o, &b->rt);
  if (st != T4A_OK) return fail_setup(b, "t4a_runtime_open", st);
  t4a_runtime_options o2 = T4A_RUNTIME_OPTIONS_INIT;
  o2.driver = b->drv;
  o2.xfer.copy_threads = 1; /* the second runtime only receives copies */
  st = t4a_runtime_open(0, &o2, &b->rt2);
  if (st != T4A_OK) return fail_setup(b, "t4a_runtime_open (second runtime)", st);
  b->lane = t4a_runtime_lane(b->rt);
  b->retire = t4a_runtime_retire(b->rt);
  b->pool = t4a_runtime_pool(b->rt);
  b->xfer = t4a_runtime_xfer(b->rt);
  b->modules = t4a_runtime_module_cache(b->rt);
  b->table = t4a_runtime_table(b->rt);
  b->stream = t4a_lane_stream(b->lane);
  st = t4a_device_query(b->drv, 0, &b->info);
  if (st != T4A_OK) return fail_setup(b, "t4a_device_query", st);

  /* Kernels: NVRTC -> CUBIN -> the module cache; the same bytes loaded raw. */
  st = t4a_runtime_compile(b->rt, k_source, "t4a_bench.cu", &b->art);
  if (st != T4A_OK) return fail_setup(b, "NVRTC", st);
  t4a_nvrtc_artifact_compiler_version(b->art, &b->nvrtc_major, &b->nvrtc_minor);
  b->image = t4a_nvrtc_artifact_data(b->art, &b->image_bytes);
  st = t4a_runtime_load(b->rt, b->art, &b->mod);
  if (st == T4A_OK) st = t4a_runtime_function(b->rt, b->mod, "empty", &b->f_empty);
  if (st == T4A_OK) st = t4a_runtime_function(b->rt, b->mod, "args4", &b->f_args4);
  t4a_module_cache_options gmo = T4A_MODULE_CACHE_OPTIONS_INIT;
  gmo.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  gmo.launch.graph_after = 1;
  if (st == T4A_OK) st = t4a_module_cache_create(b->retire, &gmo, &b->gmodules);
  if (st == T4A_OK) st = t4a_module_load_artifact(b->gmodules, b->art, &b->gmod);
  if (st == T4A_OK) st = t4a_module_get_function(b->gmod, "empty", &b->g_empty);
  if (st == T4A_OK) st = t4a_module_get_function(b->gmod, "args4", &b->g_args4);
  if (st != T4A_OK) return fail_setup(b, "loading the kernels", st);
  st = t4a_runtime_buffer(b->rt, SMALL_BYTES, &b->p);
  if (st == T4A_OK) st = t4a_runtime_buffer(b->rt, SMALL_BYTES, &b->q);
  if (st == T4A_OK) st = t4a_runtime_buffer(b->rt, SMALL_BYTES, &b->c);
  if (st == T4A_OK) st = t4a_runtime_sync(b->rt);
  if (st != T4A_OK) return fail_setup(b, "buffers", st);
  b->dp = (CUdeviceptr)t4a_buffer_devptr(b->p);
  b->dq = (CUdeviceptr)t4a_buffer_devptr(b->q);
  b->dc = (CUdeviceptr)t4a_buffer_devptr(b->c);
  b->n = 1000;
  b->a = 2.5f;
  b->args4[0] = t4a_arg_buffer(b->p, 0);
  b->args4[1] = t4a_arg_scalar(&b->n, sizeof b->n);
  b->args4[2] = t4a_arg_scalar(&b->a, sizeof b->a);
  b->args4[3] = t4a_arg_buffer(b->q, 0);
  memcpy(b->args4b, b->args4, sizeof b->args4b);
  b->args4b[3] = t4a_arg_buffer(b->c, 0);
  b->params4[0] = &b->dp;
  b->params4[1] = &b->n;
  b->params4[2] = &b->a;
  b->params4[3] = &b->dq;
  memcpy(b->params4b, b->params4, sizeof b->params4b);
  b->params4b[3] = &b->dc;
  t4a_launch_config cfg = {{1, 1, 1}, {BLOCK_THREADS, 1, 1}, 0};
  st = t4a_descriptor_register(b->table, b->f_empty, &cfg, NULL, 0, &b->fire0_id);
  if (st == T4A_OK) st = t4a_descriptor_register(b->table, b->f_args4, &cfg, b->args4, 4, &b->fire4_id);
  if (st == T4A_OK) {
    /* Launch attributes (checked once, here): a cluster of 2 and a cooperative grid of 2. */
    t4a_launch_config cfg2 = {{2, 1, 1}, {BLOCK_THREADS, 1, 1}, 0};
    t4a_launch_attrs cl = T4A_LAUNCH_ATTRS_INIT, co = T4A_LAUNCH_ATTRS_INIT;
    cl.cluster[0] = 2;
    cl.cluster[1] = cl.cluster[2] = 1;
    co.cooperative = 1;
    st = t4a_descriptor_register_ex(b->table, b->f_empty, &cfg2, &cl, NULL, 0, &b->cfire0_id);
    if (st == T4A_UNSUPPORTED) st = T4A_OK; /* no clusters here: the row fails, typed */
    if (st == T4A_OK) {
      st = t4a_descriptor_register_ex(b->table, b->f_empty, &cfg2, &co, NULL, 0, &b->kfire0_id);
    }
    if (st == T4A_UNSUPPORTED) st = T4A_OK;
  }
  t4a_launch_table_options go = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  go.capacity = 4;
  go.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  go.launch.graph_after = 1;
  if (st == T4A_OK) st = t4a_launch_table_create(b->retire, &go, &b->gtable);
  if (st == T4A_OK) st = t4a_descriptor_register(b->gtable, b->f_empty, &cfg, NULL, 0, &b->gfire0_id);
  if (st == T4A_OK) st = t4a_descriptor_register(b->gtable, b->f_args4, &cfg, b->args4, 4, &b->gfire4_id);
  if (st != T4A_OK) return fail_setup(b, "descriptors", st);

  /* The launch chain: CHAIN_FIRES descriptors of args4, each fired once into it. */
  st = t4a_launch_table_create(b->retire,
                               &(t4a_launch_table_options){.capacity = CHAIN_FIRES}, &b->ctable);
  for (uint32_t i = 0; i < CHAIN_FIRES && st == T4A_OK; i++) {
    st = t4a_descriptor_register(b->ctable, b->f_args4, &cfg, b->args4, 4, &b->chain_ids[i]);
  }
  if (st != T4A_OK) return fail_setup(b, "the chain's descriptors", st);
  st = t4a_chain_begin(b->ctable);
  if (st != T4A_OK) return fail_setup(b, "t4a_chain_begin", st);
  for (uint32_t i = 0; i < CHAIN_FIRES && st == T4A_OK; i++) {
    st = t4a_descriptor_fire(b->ctable, b->chain_ids[i]);
  }
  t4a_status chain_end = t4a_chain_end(b->ctable, &b->chain);
  if (st != T4A_OK) return fail_setup(b, "a fire recorded into the chain", st);
  if (chain_end != T4A_OK) return fail_setup(b, "t4a_chain_end", chain_end);

  /* Graphs through t4a: one launch of args4, and big_graph_nodes launches. */
  b->big_graph_nodes = b->fake ? 10 : 1000;
  for (int g = 0; g < 2; g++) {
    uint32_t nodes = g == 0 ? 1 : b->big_graph_nodes;
    st = t4a_graph_capture_begin(b->retire);
    if (st != T4A_OK) return fail_setup(b, "t4a_graph_capture_begin", st);
    for (uint32_t i = 0; i < nodes && st == T4A_OK; i++) {
      st = t4a_runtime_launch(b->rt, b->f_args4, 1, BLOCK_THREADS, b->args4, 4);
    }
    t4a_status end = t4a_graph_capture_end(b->retire, g == 0 ? &b->g1 : &b->g1000);
    if (st != T4A_OK) return fail_setup(b, "a captured launch", st);
    if (end != T4A_OK) return fail_setup(b, "t4a_graph_capture_end", end);
  }

  /* Raw: the module, the same graphs captured on a raw stream and instantiated alike, a pool. */
  t4a_ctx_scope scope;
  st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(b->lane), NULL);
  if (st != T4A_OK) return fail_setup(b, "the lane's context", st);
  st = T4A_CU(b->drv, cuModuleLoadData, &b->raw_mod, b->image);
  if (st == T4A_OK) st = T4A_CU(b->drv, cuModuleGetFunction, &b->r_empty, b->raw_mod, "empty");
  if (st == T4A_OK) st = T4A_CU(b->drv, cuModuleGetFunction, &b->r_args4, b->raw_mod, "args4");
  CUstream cs = NULL;
  if (st == T4A_OK) st = T4A_CU(b->drv, cuStreamCreate, &cs, CU_STREAM_NON_BLOCKING);
  for (int g = 0; g < 2 && st == T4A_OK; g++) {
    uint32_t nodes = g == 0 ? 1 : b->big_graph_nodes;
    CUgraph *graph = g == 0 ? &b->rg1_graph : &b->rg1000_graph;
    CUgraphExec *exec = g == 0 ? &b->rg1 : &b->rg1000;
    st = T4A_CU(b->drv, cuStreamBeginCapture, cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    for (uint32_t i = 0; i < nodes && st == T4A_OK; i++) {
      st = T4A_CU(b->drv, cuLaunchKernel, b->r_args4, 1, 1, 1, BLOCK_THREADS, 1, 1, 0, cs,
                  b->params4, NULL);
    }
    t4a_status end = T4A_CU(b->drv, cuStreamEndCapture, cs, graph);
    if (st == T4A_OK) st = end;
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphInstantiateWithFlags, exec, *graph, 0);
  }
  if (cs != NULL) (void)T4A_CU_QUIET(b->drv, cuStreamDestroy, cs);
  if (st == T4A_OK) {
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = b->r_args4;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = BLOCK_THREADS;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = b->params4;
    st = T4A_CU(b->drv, cuGraphCreate, &b->rn_graph, 0);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphAddKernelNode, &b->rn_node, b->rn_graph, NULL, 0, &p);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphInstantiateWithFlags, &b->rn_exec, b->rn_graph, 0);
    if (st == T4A_OK) st = T4A_CU(b->drv, cuGraphUpload, b->rn_exec, b->stream);
  }
  if (st == T4A_OK) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    st = T4A_CU(b->drv, cuMemPoolCreate, &b->raw_pool, &props);
    if (st == T4A_OK) {
      cuuint64_t threshold = UINT64_MAX;
      st = T4A_CU(b->drv, cuMemPoolSetAttribute, b->raw_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                  &threshold);
    }
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) return fail_setup(b, "the raw baseline's module, graphs and pool", st);
  return 1;
}

static void close_all(bench *b) {
  t4a_status st;
  if (b->rt != NULL) sync_quiet(b, b->rt);
  t4a_graph_release(b->g1);
  t4a_graph_release(b->g1000);
  if (b->table != NULL) {
    uint32_t ids[4] = {b->fire0_id, b->fire4_id, b->cfire0_id, b->kfire0_id};
    for (int i = 0; i < 4; i++) {
      if (ids[i] != 0 && (st = t4a_descriptor_unregister(b->table, ids[i])) != T4A_OK) {
        print_failure(b, "t4a_descriptor_unregister", st);
        b->failures++;
      }
    }
  }
  t4a_launch_table_destroy(b->gtable);
  t4a_chain_destroy(b->chain); /* before its table; its replays' references go with the epochs */
  t4a_launch_table_destroy(b->ctable);
  if (b->lane != NULL) {
    t4a_ctx_scope scope;
    if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(b->lane), NULL) == T4A_OK) {
      (void)T4A_CU_QUIET(b->drv, cuStreamSynchronize, b->stream);
      if (b->rg1) (void)T4A_CU_QUIET(b->drv, cuGraphExecDestroy, b->rg1);
      if (b->rg1000) (void)T4A_CU_QUIET(b->drv, cuGraphExecDestroy, b->rg1000);
      if (b->rg1_graph) (void)T4A_CU_QUIET(b->drv, cuGraphDestroy, b->rg1_graph);
      if (b->rn_exec) (void)T4A_CU_QUIET(b->drv, cuGraphExecDestroy, b->rn_exec);
      if (b->rn_graph) (void)T4A_CU_QUIET(b->drv, cuGraphDestroy, b->rn_graph);
      if (b->rg1000_graph) (void)T4A_CU_QUIET(b->drv, cuGraphDestroy, b->rg1000_graph);
      if (b->raw_mod) (void)T4A_CU_QUIET(b->drv, cuModuleUnload, b->raw_mod);
      if (b->raw_pool) (void)T4A_CU_QUIET(b->drv, cuMemPoolDestroy, b->raw_pool);
      t4a_ctx_scope_exit_quiet(&scope);
    }
  }
  t4a_buffer_release(b->p);
  t4a_buffer_release(b->q);
  t4a_buffer_release(b->c);
  t4a_function_release(b->g_empty);
  t4a_function_release(b->g_args4);
  t4a_module_release(b->gmod);
  t4a_module_cache_destroy(b->gmodules);
  t4a_function_release(b->f_empty);
  t4a_function_release(b->f_args4);
  t4a_module_release(b->mod);
  t4a_nvrtc_artifact_release(b->art);
  if (b->rt2 != NULL && (st = t4a_runtime_close(b->rt2)) != T4A_OK) {
    print_failure(b, "t4a_runtime_close (second runtime)", st);
    b->failures++;
  }
  if (b->rt != NULL && (st = t4a_runtime_close(b->rt)) != T4A_OK) {
    print_failure(b, "t4a_runtime_close", st);
    b->failures++;
  }
  t4a_driver_release(b->drv);
  if (b->fk != NULL) {
    (void)t4a_fake_table(b->fk)->cuCtxSetCurrent(NULL);
    t4a_fake_progress(b->fk);
    int clean = t4a_fake_nothing_live(b->fk);
    uint64_t violations = t4a_fake_ordering_violations(b->fk);
    if (b->out) {
      fprintf(b->out, "fake driver: %s, %" PRIu64 " stream-ordering violations\n",
              clean ? "nothing left alive after close" : "OBJECTS LEFT ALIVE after close",
              violations);
    }
    if (!clean || violations != 0) b->failures++;
    t4a_fake_destroy(b->fk);
  }
}

/* ---- the groups of measurements ---- */

static launch_arg k_glaunch0 = {0, 0, NULL, 0, 1, 0, 0}, k_glaunch4 = {1, 0, NULL, 0, 1, 0, 0},
                  k_glaunch4_alt = {1, 0, NULL, 0, 1, 1, 0};
static launch_arg k_launch0 = {0, 0, NULL, 0, 0, 0, 0}, k_launch4 = {1, 0, NULL, 0, 0, 0, 0},
                  k_launch0_noctx = {0, 1, NULL, 0, 0, 0, 0};

static void run_launches(bench *b) {
  uint32_t ops = b->fake ? 20 : 5000, reps = 21, warm = 2;
  static launch_arg fire0 = {0, 0, NULL, 0, 0, 0, 0}, fire4 = {1, 0, NULL, 0, 0, 0, 0};
  static launch_arg fire4_rb = {1, 0, NULL, 0, 0, 1, 0}, gfire0 = {0, 0, NULL, 1, 0, 0, 0},
                    gfire4 = {1, 0, NULL, 1, 0, 0, 0}, gfire4_rb = {1, 0, NULL, 1, 0, 1, 0};
  static launch_arg cfire0 = {0, 0, NULL, 0, 0, 0, 1}, kfire0 = {0, 0, NULL, 0, 0, 0, 2};
  fire0.fire = &b->fire0_id;
  cfire0.fire = &b->cfire0_id;
  kfire0.fire = &b->kfire0_id;
  fire4.fire = fire4_rb.fire = &b->fire4_id;
  gfire0.fire = &b->gfire0_id;
  gfire4.fire = gfire4_rb.fire = &b->gfire4_id;
  spec specs[] = {
      {"launch0", "launch",
       "checked launch of an empty kernel (t4a_runtime_launch, 0 args) vs cuLaunchKernel, grid 1 x 32",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_launch0, "t4a_runtime_launch"}, {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"launch4", "launch",
       "checked launch of args4(ptr p, int n, float a, ptr q): 2 buffers, 2 scalars vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_launch4, "t4a_runtime_launch"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"launch0_noctx", "launch",
       "launch0 with no current context on the t4a side (each call activates and restores); raw as launch0",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_launch0_noctx, "t4a_runtime_launch, no current context"},
       {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"launch0_ctxget", "launch",
       "the floor of a context check per call: cuCtxGetCurrent + cuLaunchKernel vs cuLaunchKernel "
       "(both raw; t4a's admission makes that one driver call besides the launch)",
       "submit", ops, reps, warm, 0, 0,
       {blk_raw_launch_ctxget, &k_launch0, "cuCtxGetCurrent + cuLaunchKernel"},
       {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"glaunch0", "launch",
       "checked launch of the empty kernel through its own 1-node graph (GRAPH module cache) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_glaunch0, "t4a_launch (GRAPH cache)"}, {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"glaunch4", "launch",
       "checked launch of args4 through its own 1-node graph, same arguments each time, vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_glaunch4, "t4a_launch (GRAPH cache)"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"glaunch4_alt", "launch",
       "glaunch4 with the output alternating every launch (a node update each time) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_launch, &k_glaunch4_alt, "t4a_launch (GRAPH cache)"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"fire0", "fire", "descriptor fire of the empty kernel (t4a_descriptor_fire) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &fire0, "t4a_descriptor_fire"}, {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"fire4", "fire", "descriptor fire of args4 (2 buffers, 2 scalars bound) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &fire4, "t4a_descriptor_fire"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"cfire0", "fire",
       "descriptor fire of the empty kernel with a cluster of 2 blocks (grid 2) vs cuLaunchKernelEx with the same attribute",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &cfire0, "t4a_descriptor_fire (cluster 2)"},
       {blk_raw_launch_ex, &cfire0, "cuLaunchKernelEx (cluster 2)"}},
      {"kfire0", "fire",
       "descriptor fire of the empty kernel as a cooperative launch (grid 2) vs cuLaunchKernelEx with the same attribute",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &kfire0, "t4a_descriptor_fire (cooperative)"},
       {blk_raw_launch_ex, &kfire0, "cuLaunchKernelEx (cooperative)"}},
      {"fire4_rebind", "fire",
       "plain descriptor, every argument rebound before each fire (output alternating) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &fire4_rb, "t4a_descriptor_rebind_fire"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"gfire0", "fire",
       "descriptor fired as its own 1-node graph (GRAPH strategy), empty kernel, vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &gfire0, "t4a_descriptor_fire (GRAPH)"}, {blk_raw_launch, &k_launch0, "cuLaunchKernel"}},
      {"gfire4", "fire", "args4 descriptor fired as its own 1-node graph (GRAPH) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &gfire4, "t4a_descriptor_fire (GRAPH)"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"gfire4_rebind", "fire",
       "GRAPH args4 descriptor, every argument rebound before each fire, output alternating (node update + cuGraphLaunch) vs cuLaunchKernel",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &gfire4_rb, "t4a_descriptor_rebind_fire (GRAPH)"}, {blk_raw_launch, &k_launch4, "cuLaunchKernel"}},
      {"gfire4_rebind_floor", "fire",
       "gfire4_rebind against the driver's floor: cuGraphExecKernelNodeSetParams + cuGraphLaunch of a raw 1-node graph",
       "submit", ops, reps, warm, 0, 0,
       {blk_t4a_fire, &gfire4_rb, "t4a_descriptor_rebind_fire (GRAPH)"},
       {blk_raw_update_launch, NULL, "cuGraphExecKernelNodeSetParams + cuGraphLaunch"}},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
  /* What t4a_launch_calibrate decides on this machine (its own blocks; not a paired figure). */
  int any = 0;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) any |= selected(b, &specs[i]);
  if (!any) return;
  t4a_launch_calibration c;
  t4a_status st = t4a_launch_calibrate(b->retire, b->f_empty, b->fake ? 64 : 8192, &c);
  if (st != T4A_OK) {
    print_failure(b, "t4a_launch_calibrate", st);
    b->failures++;
    return;
  }
  if (b->out && !b->fake) {
    fprintf(b->out,
            "calibration (t4a_launch_calibrate, %u fires per strategy): plain %.0f ns, graph %.0f "
            "ns, graph with a rebind %.0f ns, build %.0f ns, %llu device bytes per graph -> %s, "
            "graph after %u fires\n",
            c.fires, c.plain_ns, c.graph_ns, c.graph_rebind_ns, c.build_ns,
            (unsigned long long)c.device_bytes_per_graph,
            c.strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "GRAPH" : "PLAIN", c.graph_after);
  } else if (b->out) {
    fprintf(b->out, "smoke: ok calibration\n");
  }
  if (b->json && !b->fake) {
    fprintf(b->json,
            "{\"name\":\"calibration\",\"fires\":%u,\"plain_ns\":%.1f,\"graph_ns\":%.1f,"
            "\"graph_rebind_ns\":%.1f,\"build_ns\":%.1f,\"device_bytes_per_graph\":%llu,"
            "\"strategy\":\"%s\",\"graph_after\":%u}\n",
            c.fires, c.plain_ns, c.graph_ns, c.graph_rebind_ns, c.build_ns,
            (unsigned long long)c.device_bytes_per_graph,
            c.strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "graph" : "plain", c.graph_after);
    fflush(b->json);
  }
}

static void run_graphs(bench *b) {
  static graph_arg small = {0, 0}, small_done = {0, 1}, big = {1, 1};
  uint32_t nodes = b->big_graph_nodes;
  spec specs[] = {
      {"graph1", "graph",
       "replay of a 1-node graph of args4 (t4a_graph_launch) vs cuGraphLaunch of the same launch "
       "captured raw and instantiated alike, per replay",
       "submit", b->fake ? 20 : 5000, 21, 2, 0, 0,
       {blk_t4a_graph, &small, "t4a_graph_launch"}, {blk_raw_graph, &small, "cuGraphLaunch"}},
      {"graph1_done", "graph",
       "graph1 until done: the replays back to back, then t4a_runtime_sync vs cuStreamSynchronize "
       "inside the window; per replay (one kernel each)",
       "done", b->fake ? 20 : 5000, 21, 2, 0, 0,
       {blk_t4a_graph, &small_done, "t4a_graph_launch + t4a_runtime_sync"},
       {blk_raw_graph, &small_done, "cuGraphLaunch + cuStreamSynchronize"}},
      {"graph1000", "graph",
       "replays of a 1000-node graph of args4, back to back, then the wait (t4a_runtime_sync vs "
       "cuStreamSynchronize) inside the window; per kernel",
       "done", b->fake ? 2 : 10, 21, 2, nodes, 0,
       {blk_t4a_graph, &big, "t4a_graph_launch + t4a_runtime_sync"},
       {blk_raw_graph, &big, "cuGraphLaunch + cuStreamSynchronize"}},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
}

static void run_alloc(bench *b) {
  static size_t mib = MIB;
  spec s = {"alloc", "alloc",
            "1 MiB t4a_buffer_create + t4a_buffer_release vs cuMemAllocFromPoolAsync + "
            "cuMemFreeAsync on the same stream, a pool like t4a's (release threshold UINT64_MAX)",
            "submit", b->fake ? 20 : 5000, 21, 2, 0, 0,
            {blk_t4a_alloc, &mib, "t4a_buffer_create+release"},
            {blk_raw_alloc, &mib, "cuMemAllocFromPoolAsync+cuMemFreeAsync"}};
  measure(b, &s);
}

static void run_memset(bench *b) {
  static memset_arg submit = {4096, 0}, big = {0, 1};
  big.bytes = b->fake ? MIB : 1024 * MIB;
  spec specs[] = {
      {"memset_submit", "memset",
       "submission of a 4 KiB 32-bit fill: t4a_runtime_memset vs cuMemsetD32Async on the same "
       "stream",
       "submit", b->fake ? 20 : 5000, 21, 2, 0, 0,
       {blk_t4a_memset, &submit, "t4a_runtime_memset"}, {blk_raw_memset, &submit, "cuMemsetD32Async"}},
      {"memset1g", "memset",
       "a 1 GiB 32-bit fill until done: t4a_runtime_memset + t4a_runtime_sync vs "
       "cuMemsetD32Async + cuStreamSynchronize",
       "done", b->fake ? 2 : 5, 11, 1, 0, big.bytes,
       {blk_t4a_memset, &big, "t4a_runtime_memset"}, {blk_raw_memset, &big, "cuMemsetD32Async"}},
  };
  int any = 0;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) any |= selected(b, &specs[i]);
  if (!any) return;
  t4a_status st = t4a_runtime_buffer(b->rt, big.bytes, &g_memset_buf);
  if (st != T4A_OK) {
    (void)fail_setup(b, "memset buffer", st);
    return;
  }
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
  /* Outside the timings: the last fill's pattern is in place (raw wrote ops - 1 last). */
  sync_quiet(b, b->rt);
  t4a_buffer_release(g_memset_buf);
  g_memset_buf = NULL;
}

static void run_modules(bench *b) {
  static module_arg load = {0}, with_fn = {1};
  spec specs[] = {
      {"modhit", "module",
       "module bind: t4a_module_load_artifact answered by the module cache (+ release) vs "
       "cuModuleLoadData of the same CUBIN (unloaded after the window)",
       "submit", b->fake ? 5 : 200, 21, 2, 0, 0,
       {blk_t4a_module, &load, "t4a_module_load_artifact (hit)"},
       {blk_raw_module, &load, "cuModuleLoadData"}},
      {"modhit_fn", "module",
       "modhit plus the kernel's lookup: t4a_module_get_function (+ release) vs cuModuleGetFunction",
       "submit", b->fake ? 5 : 200, 21, 2, 0, 0,
       {blk_t4a_module, &with_fn, "load_artifact hit + get_function"},
       {blk_raw_module, &with_fn, "cuModuleLoadData + cuModuleGetFunction"}},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
}

/* Every submit-time chain row has a completion-time row beside it (NAME_done): the same work
 * with the wait for it inside the window, so that no ratio compares one side's submission with
 * the other's completion. */
static void run_chain(bench *b) {
  static const int done = 1;
  spec specs[] = {
      {"chain", "chain",
       "warm chain, per step: checked launch4, fire4, 4 KiB copy in the lane, 1-node graph "
       "replay (4 admissions) vs 2 cuLaunchKernel, cuMemcpyDtoDAsync, cuGraphLaunch; per step",
       "submit", b->fake ? 20 : 2500, 11, 1, 0, 0,
       {blk_t4a_chain, NULL, "t4a chain"}, {blk_raw_chain, NULL, "raw chain"}},
      {"chain_done", "chain",
       "chain until done: the same steps, then t4a_runtime_sync vs cuStreamSynchronize inside the "
       "window; per step (3 kernels and a 4 KiB copy on the GPU)",
       "done", b->fake ? 20 : 2500, 11, 1, 0, 0,
       {blk_t4a_chain, &done, "t4a chain + t4a_runtime_sync"},
       {blk_raw_chain, &done, "raw chain + cuStreamSynchronize"}},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
}

static void run_chains(bench *b) {
  static const chain_arg plain = {0, 0}, rebind = {1, 0}, plain_done = {0, 1},
                         rebind_done = {1, 1}, raw = {0, 0}, raw_done = {0, 1};
  uint32_t ops = b->fake ? 5 : 500, done_ops = b->fake ? 5 : 100;
  spec specs[] = {
      {"chain100", "chains",
       "replay of a launch chain of 100 args4 descriptor fires (t4a_chain_replay) vs 100 "
       "cuLaunchKernel of the same kernel and arguments; submission, per kernel",
       "submit", ops, 21, 2, CHAIN_FIRES, 0,
       {blk_t4a_chain_replay, &plain, "t4a_chain_replay"},
       {blk_raw_chain_launches, &raw, "100 cuLaunchKernel"}},
      {"chain100_done", "chains",
       "chain100 until done: the replays, then t4a_runtime_sync vs cuStreamSynchronize inside the "
       "window; per kernel (the GPU runs 100 kernels per replay)",
       "done", done_ops, 21, 2, CHAIN_FIRES, 0,
       {blk_t4a_chain_replay, &plain_done, "t4a_chain_replay + t4a_runtime_sync"},
       {blk_raw_chain_launches, &raw_done, "100 cuLaunchKernel + cuStreamSynchronize"}},
      {"chain100_rebind", "chains",
       "chain100 with one argument rebound before each replay (t4a_descriptor_rebind + "
       "t4a_chain_replay: one kernel-node update); submission, per kernel",
       "submit", ops, 21, 2, CHAIN_FIRES, 0,
       {blk_t4a_chain_replay, &rebind, "t4a_descriptor_rebind + t4a_chain_replay"},
       {blk_raw_chain_launches, &raw, "100 cuLaunchKernel"}},
      {"chain100_rebind_done", "chains",
       "chain100_rebind until done: rebind + replay, then t4a_runtime_sync vs cuStreamSynchronize "
       "inside the window; per kernel",
       "done", done_ops, 21, 2, CHAIN_FIRES, 0,
       {blk_t4a_chain_replay, &rebind_done, "t4a_descriptor_rebind + t4a_chain_replay + sync"},
       {blk_raw_chain_launches, &raw_done, "100 cuLaunchKernel + cuStreamSynchronize"}},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) measure(b, &specs[i]);
}

/* Pinned and pageable transfers at several sizes. */
static void run_xfers(bench *b, int pinned) {
  static const size_t real_sizes[MAX_SIZES] = {4096, 64 << 10, MIB, 8 * MIB, 64 * MIB, 256 * MIB};
  static const char *const real_names[MAX_SIZES] = {"4K", "64K", "1M", "8M", "64M", "256M"};
  static const size_t fake_sizes[MAX_SIZES] = {4096, 64 << 10, MIB, 0, 0, 0};
  const size_t *sizes = b->fake ? fake_sizes : real_sizes;
  static xfer_arg args[2][2][MAX_SIZES];
  static char names[2][2][MAX_SIZES][40];
  static char whats[2][2][MAX_SIZES][200];
  for (int dir = 0; dir < 2; dir++) {
    for (int i = 0; i < MAX_SIZES; i++) {
      size_t bytes = sizes[i];
      if (bytes == 0) continue;
      xfer_arg *xa = &args[pinned][dir][i];
      xa->bytes = bytes;
      xa->down = dir;
      xa->pinned = pinned;
      snprintf(names[pinned][dir][i], sizeof names[0][0][0], "%s_%s_%s",
               pinned ? "pinned" : "pageable", dir ? "down" : "up", real_names[i]);
      snprintf(whats[pinned][dir][i], sizeof whats[0][0][0],
               "%s %s of %zu bytes, until in place: %s vs %s + cuStreamSynchronize",
               pinned ? "pinned" : "pageable", dir ? "download" : "upload", bytes,
               dir ? (pinned ? "t4a_xfer_download_pinned + pending_wait"
                             : "t4a_xfer_download + pending_wait")
                   : (pinned ? "t4a_xfer_upload_pinned + t4a_runtime_sync"
                             : "t4a_xfer_upload + t4a_runtime_sync"),
               dir ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync");
      uint32_t ops = bytes <= (64 << 10) ? 200 : bytes <= MIB ? 50 : bytes <= 8 * MIB ? 10
                                                                : bytes <= 64 * MIB ? 2 : 1;
      if (b->fake) ops = 2;
      uint32_t reps = bytes <= MIB ? 21 : 11;
      spec s = {names[pinned][dir][i], pinned ? "pinned" : "pageable", whats[pinned][dir][i],
                "done", ops, reps, 1, 0, bytes,
                {blk_t4a_xfer, xa, "t4a"}, {blk_raw_xfer, xa, "raw"}};
      measure(b, &s);
      if (dir == 1 && selected(b, &s)) {
        /* Outside the timings: a t4a round trip of these bytes is exact. */
        memset(g_xfer.host_dst, 0, bytes);
        t4a_status st = t4a_xfer_upload(b->xfer, g_xfer.dbuf, 0, g_xfer.host_src, bytes);
        t4a_xfer_pending *p = NULL;
        if (st == T4A_OK) st = t4a_xfer_download(b->xfer, g_xfer.dbuf, 0, g_xfer.host_dst, bytes, &p);
        if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
        t4a_xfer_pending_release(p);
        if (st != T4A_OK || memcmp(g_xfer.host_src, g_xfer.host_dst, bytes) != 0) {
          if (b->out) fprintf(b->out, "FAILED %s: the round trip is not byte-exact\n", s.name);
          b->failures++;
        }
      }
    }
  }
}

static int xfer_setup(bench *b) {
  size_t max = b->fake ? MIB : 256 * MIB;
  g_xfer.max_bytes = max;
  g_xfer.host_src = malloc(max);
  g_xfer.host_dst = malloc(max);
  if (g_xfer.host_src == NULL || g_xfer.host_dst == NULL) return 0;
  for (size_t i = 0; i < max; i++) g_xfer.host_src[i] = (unsigned char)(i * 7u + (i >> 12));
  memset(g_xfer.host_dst, 0, max); /* touched: no first-touch page faults inside a window */
  t4a_status st = t4a_runtime_buffer(b->rt, max, &g_xfer.dbuf);
  if (st == T4A_OK) st = t4a_pinned_create(t4a_lane_holder(b->lane), max, 0, &g_xfer.pinned);
  if (st == T4A_OK) memcpy(t4a_pinned_host(g_xfer.pinned), g_xfer.host_src, max);
  if (st == T4A_OK) st = t4a_runtime_sync(b->rt);
  if (st != T4A_OK) return fail_setup(b, "transfer buffers", st);
  return 1;
}

static void xfer_teardown(bench *b) {
  sync_quiet(b, b->rt);
  t4a_buffer_release(g_xfer.dbuf);
  t4a_pinned_release(g_xfer.pinned);
  free(g_xfer.host_src);
  free(g_xfer.host_dst);
  memset(&g_xfer, 0, sizeof g_xfer);
}

static void run_copy(bench *b) {
  g_copy.bytes = b->fake ? MIB : (size_t)1 << 30;
  t4a_status st = t4a_runtime_buffer(b->rt, g_copy.bytes, &g_copy.src);
  if (st == T4A_OK) st = t4a_runtime_buffer(b->rt2, g_copy.bytes, &g_copy.dst);
  if (st == T4A_OK) st = t4a_runtime_sync(b->rt);
  if (st == T4A_OK) st = t4a_runtime_sync(b->rt2);
  if (st != T4A_OK) {
    fail_setup(b, "copy buffers", st);
  } else {
    spec s = {"copy1g", "copy",
              "same-device copy of 1 GiB between two runtimes (t4a_xfer_copy SAME_DEVICE + "
              "t4a_witness_wait) vs cuMemcpyDtoDAsync on the destination's stream + "
              "cuStreamSynchronize",
              "done", b->fake ? 1 : 2, 21, 1, 0, g_copy.bytes,  {blk_t4a_copy, NULL, "t4a_xfer_copy"},
              {blk_raw_copy, NULL, "cuMemcpyDtoDAsync"}};
    measure(b, &s);
  }
  sync_quiet(b, b->rt);
  sync_quiet(b, b->rt2);
  /* The raw copies read src on rt2's stream: both streams were synchronised above, so the
   * stream-ordered frees below run after every read. */
  t4a_buffer_release(g_copy.src);
  t4a_buffer_release(g_copy.dst);
  memset(&g_copy, 0, sizeof g_copy);
}

/* Per-launch cost (launch4) with 1, 100 and 10,000 live buffers, and with 1, 100 and 10,000 live
 * modules in the cache. */
static void run_scale(bench *b) {
  static const uint32_t real_bufs[3] = {1, 100, 10000}, real_mods[3] = {1, 100, 10000};
  static const uint32_t fake_bufs[3] = {1, 10, 100}, fake_mods[3] = {1, 5, 10};
  const uint32_t *nb = b->fake ? fake_bufs : real_bufs, *nm = b->fake ? fake_mods : real_mods;
  static char names[6][48];
  static char whats[6][200];
  uint32_t ops = b->fake ? 20 : 5000;
  spec probe = {"launch4_live_buffers_1", "scale", "", "submit", 0, 0, 0, 0, 0,
                {NULL, NULL, ""}, {NULL, NULL, ""}};
  int any = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "launch4_live_buffers_%u", nb[i]);
    snprintf(names[3 + i], sizeof names[i], "launch4_live_modules_%u", nm[i]);
    probe.name = names[i];
    any = any || selected(b, &probe);
    probe.name = names[3 + i];
    any = any || selected(b, &probe);
  }
  if (!any) return;
  /* Buffers: extra live 256-byte buffers of the runtime's pool, held during the launches. */
  t4a_buffer **bufs = calloc(nb[2], sizeof *bufs);
  uint32_t have = 0;
  t4a_status st = bufs != NULL ? T4A_OK : T4A_HOST_OUT_OF_MEMORY;
  for (int i = 0; i < 3 && st == T4A_OK; i++) {
    while (have < nb[i] && st == T4A_OK) st = t4a_runtime_buffer(b->rt, 256, &bufs[have++]);
    if (st == T4A_OK) st = t4a_runtime_sync(b->rt);
    if (st != T4A_OK) break;
    snprintf(whats[i], sizeof whats[i],
             "launch4 (checked, 4 args) vs cuLaunchKernel with %u more live t4a buffers", nb[i]);
    spec s = {names[i], "scale", whats[i], "submit", ops, 21, 2, 0, 0,
              {blk_t4a_launch, &k_launch4, "t4a_runtime_launch"},
              {blk_raw_launch, &k_launch4, "cuLaunchKernel"}};
    measure(b, &s);
  }
  if (st != T4A_OK) fail_setup(b, "live buffers", st);
  sync_quiet(b, b->rt);
  for (uint32_t i = 0; i < have; i++) t4a_buffer_release(bufs[i]);
  free(bufs);
  /* Modules: distinct images (the CUBIN with 16 distinct trailing bytes, which the driver
   * ignores and t4a's content key sees), loaded into the module cache and held. The count
   * includes the bench's own module. */
  t4a_module **mods = calloc(nm[2], sizeof *mods);
  unsigned char *img = malloc(b->image_bytes + 16);
  uint32_t nmods = 1; /* the bench's own module */
  st = mods != NULL && img != NULL ? T4A_OK : T4A_HOST_OUT_OF_MEMORY;
  if (st == T4A_OK) memcpy(img, b->image, b->image_bytes);
  for (int i = 0; i < 3 && st == T4A_OK; i++) {
    while (nmods < nm[i] && st == T4A_OK) {
      char tag[32];
      snprintf(tag, sizeof tag, "T4ABENCH%08" PRIu32, nmods % 100000000u);
      memcpy(img + b->image_bytes, tag, 16);
      st = t4a_module_load(b->modules, img, b->image_bytes + 16, T4A_IMAGE_CUBIN, &mods[nmods]);
      if (st == T4A_OK) nmods++;
    }
    if (st != T4A_OK) break;
    snprintf(whats[3 + i], sizeof whats[3 + i],
             "launch4 (checked, 4 args) vs cuLaunchKernel with %u live modules in the module cache",
             nm[i]);
    spec s = {names[3 + i], "scale", whats[3 + i], "submit", ops, 21, 2, 0, 0,
              {blk_t4a_launch, &k_launch4, "t4a_runtime_launch"},
              {blk_raw_launch, &k_launch4, "cuLaunchKernel"}};
    measure(b, &s);
  }
  if (st != T4A_OK) fail_setup(b, "live modules", st);
  for (uint32_t i = 1; i < nmods; i++) t4a_module_release(mods[i]);
  free(mods);
  free(img);
}

/* ---- main ---- */

static void summary(bench *b) {
  if (b->out == NULL || b->fake || g_num_results == 0) return;
  fprintf(b->out, "\n# every row (medians; t4a/raw = ratio of medians, [min-max of per-block "
                  "ratios]); goals: scripts/check_goals.py JSON (bench/goals.tsv)\n");
  fprintf(b->out, "%-24s %-6s %12s %12s %8s %17s\n", "path", "window", "t4a us", "raw us",
          "t4a/raw", "[blocks]");
  for (int i = 0; i < g_num_results; i++) {
    result *r = &g_results[i];
    char b1[32], b2[32];
    fprintf(b->out, "%-24s %-6s %12s %12s %8.3f [%6.3f-%6.3f]", r->name, r->window,
            t4a_bench_fmt_us(r->t4a_med * 1e6, b1, sizeof b1),
            t4a_bench_fmt_us(r->raw_med * 1e6, b2, sizeof b2), r->ratio, r->rmin, r->rmax);
    if (r->bytes > 0) fprintf(b->out, " (speed %.2fx raw)", 1.0 / r->ratio);
    fprintf(b->out, "\n");
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: t4a_bench [--fake] [--quick] [--json] [--json-file PATH] [--repeats R] [--list]\n"
          "                 [--only NAME]... [NAME|GROUP]...\n"
          "groups: launch fire graph alloc memset module chain chains pinned pageable copy scale\n");
}

static void list_names(void) {
  printf("launch: launch0 launch4 launch0_noctx launch0_ctxget glaunch0 glaunch4 glaunch4_alt\nfire: fire0 fire4 fire4_rebind gfire0 gfire4 gfire4_rebind gfire4_rebind_floor\ngraph: graph1 graph1_done graph1000\n"
         "alloc: alloc\nmemset: memset_submit memset1g\nmodule: modhit modhit_fn\nchain: chain chain_done\n"
         "chains: chain100 chain100_done chain100_rebind chain100_rebind_done\n"
         "pinned: pinned_{up,down}_{4K,64K,1M,8M,64M,256M}\n"
         "pageable: pageable_{up,down}_{4K,64K,1M,8M,64M,256M}\n"
         "copy: copy1g\nscale: launch4_live_buffers_{1,100,10000} launch4_live_modules_{1,100,10000}\n");
}

int main(int argc, char **argv) {
  static bench B;
  bench *b = &B;
  const char *json_file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--fake") == 0) {
      b->fake = 1;
    } else if (strcmp(argv[i], "--quick") == 0) {
      b->quick = 1;
    } else if (strcmp(argv[i], "--json") == 0) {
      b->json_stdout = 1;
    } else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) {
      json_file = argv[++i];
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      b->repeats_override = atoi(argv[++i]);
      if (b->repeats_override < 1 || b->repeats_override > 1000) {
        usage(stderr);
        return 2;
      }
    } else if (strcmp(argv[i], "--list") == 0) {
      list_names();
      return 0;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc && b->num_only < 64) {
      b->only[b->num_only++] = argv[++i];
    } else if (argv[i][0] != '-' && b->num_only < 64) {
      b->only[b->num_only++] = argv[i];
    } else {
      usage(stderr);
      return 2;
    }
  }
  /* --quick shortens only the fake run (CI); the GPU run keeps its figures. */
  if (b->quick && !b->fake) b->repeats_override = 5;
  b->out = b->json_stdout ? NULL : stdout;
  if (b->json_stdout) b->json = stdout;
  if (json_file != NULL) {
    if (b->json_stdout) {
      fprintf(stderr, "t4a_bench: --json and --json-file exclude each other\n");
      return 2;
    }
    b->json = fopen(json_file, "w");
    if (b->json == NULL) {
      perror(json_file);
      return 2;
    }
  }
  int opened = open_all(b);
  if (opened < 0) return 77;
  if (opened > 0) {
    char date[64];
    t4a_bench_utc_date(date, sizeof date);
    int v = t4a_driver_version(b->drv);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct t4a_xfer_stats xs;
    t4a_xfer_stats(b->xfer, &xs);
    if (b->out) {
      fprintf(b->out,
              "# t4a_bench%s: device 0 %s (sm_%d%d, %d SMs), CUDA driver %d.%d (%s), NVRTC %d.%d, "
              "%ld CPUs, t4a %s, %s\n",
              b->fake ? " --fake (smoke test: no timings)" : "", b->info.name, b->info.cc_major,
              b->info.cc_minor, b->info.sm_count, v / 1000, (v % 1000) / 10,
              t4a_driver_origin(b->drv), b->nvrtc_major, b->nvrtc_minor, cpus,
              t4a_version_string(), date);
      if (!b->fake) {
        fprintf(b->out,
                "# blocks alternate t4a, raw, t4a, raw... after warm-up; per side min/median/max "
                "per op over the blocks; t4a/raw = ratio of medians [min-max of per-block "
                "ratios]; staging ring %u x %zu MiB, %u copy threads\n",
                t4a_xfer_num_chunks(b->xfer), t4a_xfer_chunk_bytes(b->xfer) >> 20,
                xs.copy_threads);
      }
      fflush(b->out);
    }
    if (b->json) {
      fprintf(b->json,
              "{\"bench\":\"t4a_bench\",\"mode\":\"%s\",\"device\":\"%s\",\"cc\":\"%d.%d\","
              "\"sms\":%d,\"driver_version\":%d,\"driver_origin\":\"%s\",\"nvrtc\":\"%d.%d\","
              "\"cpus\":%ld,\"t4a\":\"%s\",\"date\":\"%s\",\"copy_threads\":%u,"
              "\"ring_chunks\":%u,\"ring_chunk_bytes\":%zu}\n",
              b->fake ? "fake-smoke" : "gpu", b->info.name, b->info.cc_major, b->info.cc_minor,
              b->info.sm_count, v, t4a_driver_origin(b->drv), b->nvrtc_major, b->nvrtc_minor,
              cpus, t4a_version_string(), date, xs.copy_threads, t4a_xfer_num_chunks(b->xfer),
              t4a_xfer_chunk_bytes(b->xfer));
      fflush(b->json);
    }
    run_launches(b);
    run_graphs(b);
    run_alloc(b);
    run_memset(b);
    run_modules(b);
    run_chain(b);
    run_chains(b);
    int want_xfer = b->num_only == 0;
    for (int i = 0; i < b->num_only && !want_xfer; i++) {
      want_xfer = strncmp(b->only[i], "pinned", 6) == 0 || strncmp(b->only[i], "pageable", 8) == 0;
    }
    if (want_xfer) {
      if (xfer_setup(b)) {
        run_xfers(b, 1);
        run_xfers(b, 0);
      }
      xfer_teardown(b);
    }
    spec probe_c = {"copy1g", "copy", "", "", 0, 0, 0, 0, 0,
                    {NULL, NULL, ""}, {NULL, NULL, ""}};
    if (selected(b, &probe_c)) run_copy(b);
    run_scale(b);
    summary(b);
  }
  close_all(b);
  if (b->out) {
    fprintf(b->out, "%s: %d measurements ran, %d failures\n", b->fake ? "smoke" : "t4a_bench",
            b->ran, b->failures);
  }
  if (json_file != NULL && b->json != NULL) fclose(b->json);
  return b->failures == 0 && opened > 0 ? 0 : 1;
}
