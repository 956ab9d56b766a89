/* A sticky fault on the source device during a staged copy between two real GPUs (label: gpu,
 * multi, faults). Its own binary: the fault poisons device 0's primary context for the process.
 * Without a driver it exits 77; on a host with fewer than two GPUs it fails with an explicit
 * message (testing/gpu/gpu_main.h).
 *
 * Each scenario runs in its own child process (forked before anything opened the driver), under a
 * deadline: a hang is reported as a failure naming the last step reached, never waited out.
 * Device 0's lane stream first gets, through a raw scope, a slow kernel (~50 ms) then a kernel
 * that writes to an illegal address. Then:
 *   1. in flight, ring 16 MiB x 2: the staged 64 MiB copy 0 -> 1 (4 chunks) is called
 *      at once; it wraps the destination's ring, so the call itself waits for chunk 0's
 *      destination event, whose stream waits for the source's chunk DMA behind the fault;
 *   2. in flight, ring 4 x 16 MiB: the same copy, wholly enqueued before the fault is reached;
 *   3. observed first: t4a_retire_wait on device 0 sees the fault, then the copy is asked for;
 *   4. control: no copy at all between the devices (device 1's runtimes merely exist).
 * Checked (soft checks: every step runs and prints; the test fails at the end if any failed):
 *  - the copy's failure comes back typed (CONTEXT_LOST or UPSTREAM_FAILED with CUresult 700, from
 *    the call or its witness; LANE_BROKEN in 3, with nothing enqueued on device 1) and stays so
 *    (memoised); a copy observed OK before the fault stays OK;
 *  - device 0's lane is broken: new work answers LANE_BROKEN (the first call that meets the fault
 *    may answer CONTEXT_LOST itself); t4a never crashes, and teardown does not abort;
 *  - counters: what was quarantined or leaked, the context faults (printed);
 *  - device 1: a fresh runtime and the copy's destination runtime each try a byte-exact
 *    upload/download round trip, a kernel (add_one) in a raw scope and a same-device copy. Every
 *    operation must either work byte-exact or fail typed (CONTEXT_LOST or LANE_BROKEN, with the
 *    CUresult): never hang, never report wrong bytes as OK. Whether device 1 still works is the
 *    driver's decision, not t4a's: each scenario prints a verdict line. On 2 x H200 with driver
 *    580.159.04 the driver answered CUDA_ERROR_ILLEGAL_ADDRESS on device 1's context too, after
 *    a fault on device 0 (docs/validation.md). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a_ctx/driver_table.h"
#include "testing/gpu/gpu_main.h"
#include "testing/gpu/kernels_ptx.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef struct grt {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
} grt;

static double gnow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void gfill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
}

static t4a_driver *g_drv;
static int g_scenario;   /* 1, 2, 3 as above */
static uint32_t g_num_chunks; /* 0: the default ring */
static int g_failed_checks;

#define COPY_BYTES ((size_t)64 << 20)
#define DEADLINE_S 60

static void step(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("# step: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

static void want(int ok, const char *fmt, ...) {
  if (ok) return;
  va_list ap;
  va_start(ap, fmt);
  printf("CHECK FAILED: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  g_failed_checks++;
}

/* Prints a status with this thread's detail (and its CUresult). Returns the status. */
static t4a_status show(const char *what, t4a_status st) {
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  if (st == T4A_OK) {
    printf("# %s: OK\n", what);
  } else if (e.status == st) {
    printf("# %s: %s (CUresult %d %s)\n", what, t4a_error_format(&e, buf, sizeof buf), e.code,
           e.code_name);
  } else {
    printf("# %s: %s (no detail)\n", what, t4a_status_name(st));
  }
  fflush(stdout);
  return st;
}

static int last_cu_code(void) {
  t4a_error e;
  t4a_error_last(&e);
  return e.code;
}

typedef struct rt {
  grt g;
  CUmodule module;
  CUfunction slow_fill, add_one;
} rt;

static t4a_status rt_open(int ordinal, uint32_t num_chunks, rt *r) {
  memset(r, 0, sizeof *r);
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.num_chunks = num_chunks;
  t4a_status st = t4a_lane_create(g_drv, ordinal, NULL, &r->g.lane);
  if (st == T4A_OK) st = t4a_mem_pool_create(r->g.lane, NULL, &r->g.pool);
  if (st == T4A_OK) st = t4a_retire_create(r->g.lane, NULL, &r->g.retire);
  if (st == T4A_OK) st = t4a_xfer_create(r->g.retire, &o, &r->g.xfer);
  if (st != T4A_OK) return st;
  t4a_ctx_scope s;
  if ((st = t4a_ctx_scope_enter(&s, t4a_lane_holder(r->g.lane), NULL)) != T4A_OK) return st;
  st = T4A_CU(g_drv, cuModuleLoadData, &r->module, t4a_test_kernels_ptx);
  if (st == T4A_OK) st = T4A_CU(g_drv, cuModuleGetFunction, &r->slow_fill, r->module, "slow_fill");
  if (st == T4A_OK) st = T4A_CU(g_drv, cuModuleGetFunction, &r->add_one, r->module, "add_one");
  (void)t4a_ctx_scope_exit(&s);
  return st;
}

/* Tears down in the usual order, never asserting (a lost context answers with failures, which
 * are printed): t4a must neither crash nor abort here. */
static void rt_close(const char *name, rt *r) {
  t4a_xfer_destroy(r->g.xfer);
  t4a_status st = t4a_retire_destroy(r->g.retire);
  show(name, st);
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(r->g.lane), NULL) == T4A_OK) {
    (void)T4A_CU_QUIET(g_drv, cuModuleUnload, r->module);
    (void)t4a_ctx_scope_exit(&s);
  } else {
    t4a_error_clear();
  }
  t4a_mem_pool_release(r->g.pool);
  t4a_lane_release(r->g.lane);
}

static void print_counters(const char *name, const t4a_counter_values *v) {
  printf("# counters %s: quarantined %llu, leaked %llu, buffers_leaked %llu, ctx_faults %llu, "
         "copies_staged %llu, staging_waits %llu, host_waits %llu, raw_scopes %llu\n",
         name, (unsigned long long)v->quarantined, (unsigned long long)v->leaked,
         (unsigned long long)v->buffers_leaked, (unsigned long long)v->ctx_faults,
         (unsigned long long)v->copies_staged, (unsigned long long)v->staging_waits,
         (unsigned long long)v->host_waits, (unsigned long long)v->raw_scopes);
  fflush(stdout);
}

/* ---- the fault, enqueued on device 0's lane stream through a raw scope ---- */

typedef struct fault_job {
  rt *r;
  t4a_buffer *scratch;
  unsigned n;
} fault_job;

static t4a_status fault_fn(t4a_raw_scope *scope, void *user) {
  fault_job *j = user;
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->scratch, T4A_RAW_WRITE, &p);
  if (st != T4A_OK) return st;
  CUstream stream = (CUstream)t4a_raw_stream(scope);
  CUdeviceptr dp = (CUdeviceptr)p;
  unsigned n = j->n, v = 7, spin = 100000000u; /* ~50 ms at ~2 GHz, one wave */
  void *slow_args[] = {&dp, &n, &v, &spin};
  st = T4A_CU(g_drv, cuLaunchKernel, j->r->slow_fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0,
              stream, slow_args, NULL);
  if (st != T4A_OK) return st;
  CUdeviceptr bad = (CUdeviceptr)0x10; /* unmapped: the write is an illegal address */
  unsigned one = 1, zero = 0;
  void *bad_args[] = {&bad, &one, &v, &zero};
  return T4A_CU(g_drv, cuLaunchKernel, j->r->slow_fill, 1, 1, 1, 32, 1, 1, 0, stream, bad_args,
                NULL);
}

/* ---- device 1 keeps working ---- */

typedef struct add_job {
  rt *r;
  t4a_buffer *buf;
  unsigned n;
} add_job;

static t4a_status add_fn(t4a_raw_scope *scope, void *user) {
  add_job *j = user;
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->buf, T4A_RAW_READ_WRITE, &p);
  if (st != T4A_OK) return st;
  CUdeviceptr dp = (CUdeviceptr)p;
  unsigned n = j->n;
  void *args[] = {&dp, &n};
  return T4A_CU(g_drv, cuLaunchKernel, j->r->add_one, (n + 255) / 256, 1, 1, 256, 1, 1, 0,
                (CUstream)t4a_raw_stream(scope), args, NULL);
}

/* Downloads and compares; 1 if byte-exact. */
static int matches(rt *r, t4a_buffer *b, size_t off, const void *expect, size_t n) {
  uint8_t *got = malloc(n);
  if (got == NULL) return 0;
  t4a_xfer_pending *p = NULL;
  t4a_status st = t4a_xfer_download(r->g.xfer, b, off, got, n, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  t4a_xfer_pending_release(p);
  int ok = st == T4A_OK && memcmp(got, expect, n) == 0;
  if (st != T4A_OK) show("download", st);
  free(got);
  return ok;
}

/* One operation's answer on device 1: OK, or (where device 1 may be poisoned) a typed loss. */
static void op_ok(const char *name, const char *what, t4a_status st, int must_work, int *worked) {
  show(what, st);
  if (st != T4A_OK) *worked = 0;
  if (must_work) {
    want(st == T4A_OK, "%s: %s failed", name, what);
  } else {
    want(st == T4A_OK || st == T4A_CONTEXT_LOST || st == T4A_LANE_BROKEN,
         "%s: %s answered %s: neither OK nor a typed context loss", name, what,
         t4a_status_name(st));
  }
}

/* Round trip, kernel and same-device copy (from `peer`, another runtime on the same device) on
 * runtime r. Returns 1 if everything worked byte-exact. Bytes reported OK must be exact always. */
static int check_working(const char *name, rt *r, rt *peer, int must_work) {
  int worked = 1;
  const size_t n = ((size_t)4 << 20) + 3;
  uint8_t *pat = malloc(n);
  assert_non_null(pat);
  gfill(pat, n, 99u + (uint32_t)n);
  t4a_buffer *b = NULL, *c = NULL, *d = NULL, *k = NULL;
  t4a_status st = t4a_buffer_create(r->g.pool, n + 1, 0, 0, &b);
  if (st == T4A_OK) st = t4a_xfer_upload(r->g.xfer, b, 1, pat, n);
  op_ok(name, "round trip: upload", st, must_work, &worked);
  if (st == T4A_OK) {
    int exact = matches(r, b, 1, pat, n);
    if (!exact) worked = 0;
    want(exact || !must_work, "%s: round trip of %zu bytes not byte-exact", name, n);
    step("%s: round trip of %zu bytes at offset 1: %s", name, n, exact ? "byte-exact" : "failed");
  }
  /* A kernel: add_one on 2^20 words. */
  const unsigned words = 1u << 20;
  unsigned *w = malloc(words * sizeof *w);
  assert_non_null(w);
  for (unsigned i = 0; i < words; i++) w[i] = i * 3u;
  st = t4a_buffer_create(r->g.pool, words * sizeof *w, 0, 0, &k);
  if (st == T4A_OK) st = t4a_xfer_upload(r->g.xfer, k, 0, w, words * sizeof *w);
  add_job j = {r, k, words};
  t4a_raw_binding bind = {k, T4A_RAW_READ_WRITE};
  if (st == T4A_OK) st = t4a_raw_run(r->g.retire, &bind, 1, add_fn, &j);
  op_ok(name, "add_one in a raw scope", st, must_work, &worked);
  if (st == T4A_OK) {
    for (unsigned i = 0; i < words; i++) w[i] = i * 3u + 1u;
    int exact = matches(r, k, 0, w, words * sizeof *w);
    if (!exact) worked = 0;
    want(exact || !must_work, "%s: add_one result wrong", name);
    step("%s: add_one on 2^20 words: %s", name, exact ? "checked" : "failed");
  }
  /* A same-device copy from the other runtime on this device into r. */
  st = t4a_buffer_create(peer->g.pool, n, 0, 0, &c);
  if (st == T4A_OK) st = t4a_xfer_upload(peer->g.xfer, c, 0, pat, n);
  t4a_copy_path taken = T4A_COPY_AUTO;
  t4a_witness *wit = NULL;
  if (st == T4A_OK) st = t4a_buffer_create(r->g.pool, n, 0, 0, &d);
  if (st == T4A_OK) {
    st = t4a_xfer_copy(r->g.xfer, d, 0, peer->g.xfer, c, 0, n, T4A_COPY_AUTO, &taken, &wit);
  }
  if (st == T4A_OK) st = t4a_witness_wait(wit);
  op_ok(name, "same-device copy", st, must_work, &worked);
  if (st == T4A_OK) {
    want(taken == T4A_COPY_SAME_DEVICE, "%s: path %d, want SAME_DEVICE", name, (int)taken);
    int exact = matches(r, d, 0, pat, n);
    if (!exact) worked = 0;
    want(exact || !must_work, "%s: same-device copy not byte-exact", name);
    step("%s: same-device copy of %zu bytes: %s", name, n, exact ? "byte-exact" : "failed");
  }
  t4a_witness_release(wit);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  t4a_buffer_release(d);
  t4a_buffer_release(k);
  free(w);
  free(pat);
  printf("# %s after the fault: %s\n", name, worked ? "WORKS (every check byte-exact)"
                                                    : "does not work (typed failures above)");
  return worked;
}

static void test_source_fault_during_staged_copy(void **state) {
  (void)state;
  rt a, b, c;
  step("open runtimes: A on device 0, B on device 1 (ring %u chunks), C on device 1",
       g_num_chunks);
  CK(rt_open(0, 0, &a));
  CK(rt_open(1, g_num_chunks, &b));
  CK(rt_open(1, 0, &c));
  printf("# B's ring: %zu MiB x %u; the copy is %zu MiB (%zu chunks)\n",
         t4a_xfer_chunk_bytes(b.g.xfer) >> 20, t4a_xfer_num_chunks(b.g.xfer), COPY_BYTES >> 20,
         COPY_BYTES / t4a_xfer_chunk_bytes(b.g.xfer));
  uint8_t *pat = malloc(COPY_BYTES);
  assert_non_null(pat);
  gfill(pat, COPY_BYTES, 12345u);
  t4a_buffer *src = NULL, *dst = NULL, *scratch = NULL, *small = NULL;
  CK(t4a_buffer_create(a.g.pool, COPY_BYTES, 0, 0, &src));
  CK(t4a_buffer_create(b.g.pool, COPY_BYTES, 0, 0, &dst));
  CK(t4a_buffer_create(b.g.pool, (size_t)1 << 20, 0, 0, &small));
  const unsigned scratch_words = 132u * 256u;
  CK(t4a_buffer_create(a.g.pool, scratch_words * sizeof(unsigned), 0, 0, &scratch));
  CK(t4a_xfer_upload(a.g.xfer, src, 0, pat, COPY_BYTES));
  CK(t4a_retire_wait(a.g.retire));

  /* Before the fault: a 1 MiB staged copy observed OK (not in 4: no interaction at all). */
  const int cross = g_scenario != 4;
  t4a_witness *before = NULL;
  if (cross) {
    CK(t4a_xfer_copy(b.g.xfer, small, 0, a.g.xfer, src, 0, (size_t)1 << 20, T4A_COPY_STAGED,
                     NULL, &before));
    CK(t4a_witness_wait(before));
    assert_true(matches(&b, small, 0, pat, (size_t)1 << 20));
    step("a 1 MiB staged copy 0 -> 1 before the fault: OK and byte-exact");
  }

  t4a_counter_values a0, b0, d0;
  t4a_lane_stats(a.g.lane, &a0);
  t4a_lane_stats(b.g.lane, &b0);
  t4a_driver_stats(g_drv, &d0);

  /* The fault, queued on device 0's lane stream. */
  fault_job fj = {&a, scratch, scratch_words};
  t4a_raw_binding fb = {scratch, T4A_RAW_WRITE};
  t4a_status st = t4a_raw_run(a.g.retire, &fb, 1, fault_fn, &fj);
  want(show("raw scope: slow kernel + illegal-address kernel on device 0", st) == T4A_OK,
       "the fault's raw scope did not enqueue");
  const int observed_first = g_scenario >= 3;
  if (observed_first) {
    step("t4a_retire_wait on device 0 (observes the fault before any copy)");
    st = t4a_retire_wait(a.g.retire);
    int code = st == T4A_OK ? 0 : last_cu_code();
    show("t4a_retire_wait(device 0)", st);
    want(st == T4A_CONTEXT_LOST && code != 0, "retire wait after the fault: %s (CUresult %d)",
         t4a_status_name(st), code);
  }
  t4a_witness *w = NULL;
  t4a_status call = T4A_OK;
  int call_code = 0;
  if (cross) {
    step("calling t4a_xfer_copy(STAGED, %zu MiB, device 0 -> device 1)", COPY_BYTES >> 20);
    t4a_copy_path taken = T4A_COPY_AUTO;
    double t0 = gnow();
    call = t4a_xfer_copy(b.g.xfer, dst, 0, a.g.xfer, src, 0, COPY_BYTES, T4A_COPY_STAGED, &taken,
                         &w);
    call_code = call == T4A_OK ? 0 : last_cu_code();
    show("t4a_xfer_copy", call);
    printf("# the call returned after %.1f ms, path %d\n", (gnow() - t0) * 1e3, (int)taken);
  }
  if (!cross) {
    step("no copy: device 0 and device 1 never interacted");
  } else if (observed_first) {
    t4a_counter_values b2;
    t4a_lane_stats(b.g.lane, &b2);
    want(call == T4A_LANE_BROKEN && w == NULL, "a copy from the broken lane: %s, want LANE_BROKEN",
         t4a_status_name(call));
    want(b2.copies_staged == b0.copies_staged && b2.cross_waits == b0.cross_waits &&
             b2.events_recorded == b0.events_recorded,
         "the refused copy touched device 1's lane (staged %llu -> %llu, cross waits %llu -> "
         "%llu, events %llu -> %llu)", (unsigned long long)b0.copies_staged,
         (unsigned long long)b2.copies_staged, (unsigned long long)b0.cross_waits,
         (unsigned long long)b2.cross_waits, (unsigned long long)b0.events_recorded,
         (unsigned long long)b2.events_recorded);
    step("the copy was refused before anything was enqueued on device 1");
  } else {
    t4a_status seen = call;
    int seen_code = call_code;
    if (call == T4A_OK) {
      want(w != NULL, "no witness from an OK call");
      step("waiting on the copy's witness");
      t4a_status ws = t4a_witness_wait(w);
      seen_code = ws == T4A_OK ? 0 : last_cu_code();
      show("t4a_witness_wait(copy)", ws);
      want(ws != T4A_OK, "the witness of a copy whose source faulted settled OK");
      t4a_status again = t4a_witness_query(w);
      show("t4a_witness_query(copy) again", again);
      want(again == ws, "the witness's answer changed (%s, then %s)", t4a_status_name(ws),
           t4a_status_name(again));
      seen = ws;
    }
    want(seen == T4A_CONTEXT_LOST || seen == T4A_UPSTREAM_FAILED,
         "the failure is %s, want CONTEXT_LOST or UPSTREAM_FAILED", t4a_status_name(seen));
    printf("# CUresult seen for the copy: %d\n", seen_code);
    want(seen != T4A_CONTEXT_LOST || seen_code != 0, "CONTEXT_LOST without the CUresult");
  }
  if (cross) {
    want(show("t4a_witness_query(before the fault)", t4a_witness_query(before)) == T4A_OK,
         "a copy observed OK before the fault no longer reads OK");
  }

  /* Device 0's lane is broken for new work (the first call to meet the fault may report it). */
  st = t4a_xfer_upload(a.g.xfer, src, 0, pat, 4096);
  show("new upload on device 0's lane", st);
  want(st == T4A_LANE_BROKEN || (!observed_first && st == T4A_CONTEXT_LOST),
       "new work on device 0's lane: %s, want LANE_BROKEN", t4a_status_name(st));
  st = t4a_raw_run(a.g.retire, &fb, 1, fault_fn, &fj);
  show("new raw scope on device 0's lane", st);
  want(st == T4A_LANE_BROKEN, "a raw scope on device 0's lane: %s, want LANE_BROKEN",
       t4a_status_name(st));
  t4a_buffer_release(src); /* the caller's references go; what is uncertain stays held */
  t4a_buffer_release(scratch);
  t4a_buffer_release(dst);
  t4a_witness_release(w);
  t4a_witness_release(before);

  t4a_counter_values a1, b1, d1;
  t4a_lane_stats(a.g.lane, &a1);
  t4a_lane_stats(b.g.lane, &b1);
  t4a_driver_stats(g_drv, &d1);
  print_counters("A (device 0) after the fault", &a1);
  print_counters("B (device 1) after the fault", &b1);
  print_counters("driver after the fault", &d1);
  printf("# t4a marks device 1 lost: %s\n", t4a_lane_is_broken(b.g.lane) ? "yes" : "not (yet)");
  if (observed_first) {
    want(d1.ctx_faults - d0.ctx_faults == 1, "ctx_faults grew by %llu, want 1 (device 0 only)",
         (unsigned long long)(d1.ctx_faults - d0.ctx_faults));
  }

  /* Device 1: a fresh runtime first, then the copy's destination runtime. */
  step("device 1 after the fault: runtime C (fresh)");
  int c_works = check_working("C (device 1)", &c, &b, 0);
  step("device 1 after the fault: runtime B (the copy's destination)");
  int b_works = check_working("B (device 1)", &b, &c, 0);
  t4a_driver_stats(g_drv, &d1);
  printf("# verdict, scenario %d: device 1 after device 0's fault: C %s, B %s; ctx_faults +%llu "
         "(device 1 marked lost: %s)\n", g_scenario,
         c_works ? "WORKS" : "POISONED (typed failures)",
         b_works ? "WORKS" : "POISONED (typed failures)",
         (unsigned long long)(d1.ctx_faults - d0.ctx_faults),
         t4a_lane_is_broken(b.g.lane) ? "yes" : "no");

  step("teardown");
  free(pat);
  t4a_buffer_release(small);
  rt_close("teardown A (device 0, faulted): t4a_retire_destroy", &a);
  rt_close("teardown B (device 1): t4a_retire_destroy", &b);
  rt_close("teardown C (device 1): t4a_retire_destroy", &c);
  t4a_driver_stats(g_drv, &d1);
  print_counters("driver after teardown", &d1);
  printf("# pools_leaked %llu, streams_leaked %llu\n", (unsigned long long)d1.pools_leaked,
         (unsigned long long)d1.streams_leaked);
  step("done, %d failed checks", g_failed_checks);
  assert_int_equal(g_failed_checks, 0);
}

static int run_child(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_source_fault_during_staged_copy),
  };
  return t4a_gpu_test_main("copy_fault_multi_gpu_test", tests, sizeof tests / sizeof *tests, 2,
                           &g_drv);
}

/* Runs one scenario in a child process; a child still running at the deadline is killed and
 * counted as a failure. Returns the child's exit code (1 for a hang or a signal). */
static int run_scenario(int scenario, const char *what, uint32_t num_chunks) {
  printf("# scenario: %s\n", what);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    printf("FAIL: fork\n");
    return 1;
  }
  if (pid == 0) {
    g_scenario = scenario;
    g_num_chunks = num_chunks;
    int rc = run_child();
    fflush(stdout); /* _exit flushes nothing */
    _exit(rc);
  }
  double t0 = gnow();
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      printf("FAIL: scenario '%s' ended by signal %d\n", what, WTERMSIG(status));
      return 1;
    }
    if (gnow() - t0 > DEADLINE_S) {
      kill(pid, SIGKILL);
      (void)waitpid(pid, &status, 0);
      printf("FAIL: scenario '%s' still running after %d s: it hung at the last step printed "
             "above (killed)\n", what, DEADLINE_S);
      return 1;
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

int main(void) {
  int r1 = run_scenario(1, "1. in flight, ring 2 x 16 MiB: the 64 MiB copy wraps the "
                           "destination's ring", 2);
  if (r1 == 77) return 77; /* no driver: the other scenarios would say the same */
  int r2 = run_scenario(2, "2. in flight, ring 4 x 16 MiB: the whole 64 MiB copy is enqueued "
                           "before the fault", 4);
  int r3 = run_scenario(3, "3. observed first: the fault is seen on device 0, then the copy is "
                           "asked for", 0);
  int r4 = run_scenario(4, "4. control: the devices never interacted (no copy at all)", 0);
  printf("# scenarios: 1 exit %d, 2 exit %d, 3 exit %d, 4 exit %d\n", r1, r2, r3, r4);
  return r1 == 0 && r2 == 0 && r3 == 0 && r4 == 0 ? 0 : 1;
}
