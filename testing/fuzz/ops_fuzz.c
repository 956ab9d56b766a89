/* Operation-sequence fuzz target: random sequences of t4a's public operations on the fake driver
 * (two devices) and a fake NVRTC, with an invariant check after every step.
 *
 * Input: byte 0 picks the mode (even: clean, odd: faults); then each operation is one byte (its
 * kind, modulo NUM_OPS) followed by the argument bytes it reads; input that runs out reads zeros
 * and ends the sequence.
 *   operations: open/close a runtime (3 slots), create/release buffers (8 slots), uploads and
 *   downloads of byte ranges, copies within a runtime and between runtimes, compiles (through the
 *   fake NVRTC, one failing source), launches, descriptors (register, fire, unregister), graph
 *   launch/release, raw scopes (succeeding or poisoned), syncs, stats JSON; in
 *   faults mode also injected driver failures (any entry or a named one, before or after the
 *   work was enqueued), injected NVRTC failures, host fault points, sticky device faults and graph
 *   captures (a THREAD_LOCAL capture makes this thread's frees on other runtimes fail).
 * Invariants (a violation aborts: a crash for libFuzzer):
 *   - every failure is typed: a status of the table, and the thread's detail carries that status;
 *   - in clean mode (no injection, no sticky fault, no capture) no status a correct call cannot
 *     get (no driver error, lost context, broken lane, internal error, out of memory);
 *   - every download that succeeded returns exactly the bytes the host knows the buffer holds
 *     (a model of each buffer: bytes written by confirmed uploads, copies, launches);
 *   - no memory reused while queued work can touch it, no access outside live memory: the fake
 *     raises a sticky error on any such access and counts ordering violations — both must stay
 *     zero on a device whose fault was not injected;
 *   - no leak at the end: in clean mode the fake holds nothing after every runtime closed; in
 *     faults mode every device block, pinned block, event and module still alive is one t4a
 *     counted as leaked; NVRTC programs alive: none. (Host memory: LeakSanitizer in the fuzzer
 *     build, valgrind in the replay test; faults-mode runs leak on purpose what t4a could not
 *     prove drained, see __lsan_default_suppressions.)
 * Built twice from one source: a libFuzzer binary (scripts/fuzz.sh, clang) and a replay test
 * (testing/fuzz/fuzz_replay_main.c) that runs the regression inputs and a fixed set of
 * generated ones in every unit-test lane. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/t4a.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/host_kernels.h"
#include "testing/fixture/leaks.h"
#include "testing/fuzz/fuzz_replay.h"
#include "testing/fuzz/ops_fuzz_regressions.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"

enum { NRT = 3, NBUF = 8, NDESC = 4, MAXB = 8192, MAX_CLOSED = 64 };

typedef struct reader {
  const uint8_t *p;
  size_t n, i;
} reader;

static uint8_t u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static unsigned u16(reader *r) { return (unsigned)u8(r) | (unsigned)u8(r) << 8; }

typedef struct fz_desc {
  uint32_t id;
  t4a_buffer *buf; /* borrowed identity: the descriptor holds its own reference */
  int n, v;
  int live;
} fz_desc;

typedef struct fz_rt {
  t4a_runtime *rt;
  t4a_lane *lane; /* retained: its leak counters are read after close */
  t4a_function *fn;
  t4a_graph *graph;
  int capturing;
  int dev;
  fz_desc desc[NDESC];
} fz_rt;

typedef struct fz_buf {
  t4a_buffer *b;
  int rt; /* slot of its runtime; -1 once that runtime closed */
  int dev;
  size_t bytes;
  int tainted; /* touched by a capture, a sticky fault or a quarantine: never compared again */
  unsigned char shadow[MAXB];
  unsigned char known[MAXB];
} fz_buf;

typedef struct fz {
  int faults; /* mode */
  t4a_fake *fake;
  t4a_driver *drv;
  t4a_nvrtc_lib *nvrtc;
  t4a_nvrtc_cache *cache;
  fz_rt rt[NRT];
  fz_buf buf[NBUF];
  int sticky_injected[2];
  t4a_lane *closed_lanes[MAX_CLOSED];
  int num_closed;
  uint64_t lane_leaked;
  int injected_any; /* a driver or host failure was armed in this input */
  int captured;     /* a capture began in this input */
} fz;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "ops_fuzz: invariant violated: %s%s%s\n", what, detail ? ": " : "",
          detail ? detail : "");
  abort();
}

/* Every failure is typed; clean mode outside captures admits only a caller's statuses. */
static int any_capturing(fz *z) {
  for (int i = 0; i < NRT; i++) {
    if (z->rt[i].rt != NULL && z->rt[i].capturing) return 1;
  }
  return 0;
}

static int g_trace = -1; /* T4A_FUZZ_TRACE=1: print each operation and each failure */
static t4a_status check(fz *z, const char *op, t4a_status st, int capturing) {
  if (st == T4A_OK) return st;
  char msg[512];
  if (g_trace) {
    t4a_error te;
    t4a_error_last(&te);
    fprintf(stderr, "    %s: %s\n", op, t4a_error_format(&te, msg, sizeof msg));
  }
  if ((int)st < 0 || (int)st > (int)T4A_UPSTREAM_FAILED) {
    snprintf(msg, sizeof msg, "%s returned %d", op, (int)st);
    die("untyped status", msg);
  }
  t4a_error e;
  t4a_error_last(&e);
  if (e.status != st) {
    snprintf(msg, sizeof msg, "%s returned %s, detail says %s (%s)", op, t4a_status_name(st),
             t4a_status_name(e.status), e.message);
    die("detail does not match the status", msg);
  }
  /* A capture is THREAD_LOCAL: this thread's unsafe calls (frees, unloads) on any runtime
   * invalidate it, as the driver defines; statuses during a capture are not judged. */
  if (!z->faults && !capturing && !any_capturing(z)) {
    switch (st) {
      case T4A_DRIVER_ERROR:
      case T4A_CONTEXT_LOST:
      case T4A_LANE_BROKEN:
      case T4A_INTERNAL:
      case T4A_UPSTREAM_FAILED:
      case T4A_HOST_OUT_OF_MEMORY:
      case T4A_DEVICE_OUT_OF_MEMORY: {
        t4a_error_format(&e, msg, sizeof msg);
        char full[700];
        snprintf(full, sizeof full, "%s: %s", op, msg);
        die("a clean run got a failure only faults can cause", full);
      }
      default:
        break;
    }
  }
  return st;
}

static void unknown(fz_buf *b, size_t off, size_t n) {
  if (off >= b->bytes) return;
  if (n > b->bytes - off) n = b->bytes - off;
  memset(b->known + off, 0, n);
}

/* After a step: no access outside live memory or out of order on a device whose fault was not
 * injected. */
static void check_device(fz *z, const char *op) {
  if (t4a_fake_ordering_violations(z->fake) != 0) die("ordering violation after", op);
  for (int d = 0; d < 2; d++) {
    if (!z->sticky_injected[d] && t4a_fake_sticky(z->fake, d) != CUDA_SUCCESS) {
      die("a device fault nobody injected (an access outside live memory) after", op);
    }
  }
}

static fz_rt *rt_of(fz *z, reader *r) {
  fz_rt *x = &z->rt[u8(r) % NRT];
  return x->rt != NULL ? x : NULL;
}

static fz_buf *buf_of(fz *z, reader *r) {
  fz_buf *b = &z->buf[u8(r) % NBUF];
  return b->b != NULL ? b : NULL;
}

/* A buffer usable with runtime short paths. */
static fz_buf *live_buf(fz *z, reader *r) {
  fz_buf *b = buf_of(z, r);
  return b != NULL && b->rt >= 0 ? b : NULL;
}

static void range(reader *r, size_t bytes, size_t *off, size_t *n) {
  *off = u16(r) % bytes;
  *n = 1 + u16(r) % (bytes - *off);
}

static const char k_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                            ".visible .entry add(.param .u64 p, .param .u32 n, .param .u32 v)\n"
                            "{\n  ret;\n}\n";

static void taint_rt_buffers(fz *z, int slot) {
  for (int i = 0; i < NBUF; i++) {
    if (z->buf[i].b != NULL && z->buf[i].rt == slot) z->buf[i].tainted = 1;
  }
}

static void taint_dev_buffers(fz *z, int dev) {
  for (int i = 0; i < NBUF; i++) {
    if (z->buf[i].b != NULL && z->buf[i].dev == dev) z->buf[i].tainted = 1;
  }
}

/* ---- operations ---- */

static void op_open(fz *z, reader *r) {
  int slot = u8(r) % NRT;
  fz_rt *x = &z->rt[slot];
  if (x->rt != NULL) return;
  int dev = u8(r) % 2;
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = z->drv;
  o.xfer.chunk_bytes = 4096;
  o.xfer.copy_threads = 1;
  o.table_capacity = 4;
  o.artifact_cache = z->cache;
  o.compile_ptx = 1;
  t4a_runtime *rt = (t4a_runtime *)&o;
  t4a_status st = check(z, "t4a_runtime_open", t4a_runtime_open(dev, &o, &rt), 0);
  if (st != T4A_OK) {
    if (rt != NULL) die("t4a_runtime_open failed and left *out set", NULL);
    return;
  }
  memset(x, 0, sizeof *x);
  x->rt = rt;
  x->dev = dev;
  x->lane = t4a_runtime_lane(rt);
  t4a_lane_retain(x->lane);
  t4a_module *m = NULL;
  if (check(z, "t4a_runtime_load_image", t4a_runtime_load_image(rt, k_ptx, sizeof k_ptx, &m),
            0) == T4A_OK) {
    (void)check(z, "t4a_runtime_function", t4a_runtime_function(rt, m, "add", &x->fn), 0);
  }
  t4a_module_release(m);
}

static void end_capture(fz *z, int slot) {
  fz_rt *x = &z->rt[slot];
  if (!x->capturing) return;
  t4a_graph *g = NULL;
  (void)check(z, "t4a_graph_capture_end", t4a_graph_capture_end(t4a_runtime_retire(x->rt), &g),
              1);
  x->capturing = 0;
  t4a_graph_release(g);
}

/* Waits for a closed runtime's lane, adds its leak counts, releases it. */
static void drop_lane(fz *z, t4a_lane *lane) {
  t4a_status st = t4a_lane_synchronize(lane); /* fails on a faulted device: nothing to wait for */
  (void)st;
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  z->lane_leaked += v.leaked + v.buffers_leaked;
  t4a_lane_release(lane);
}

static void close_rt(fz *z, int slot) {
  fz_rt *x = &z->rt[slot];
  if (x->rt == NULL) return;
  end_capture(z, slot);
  t4a_graph_release(x->graph);
  x->graph = NULL;
  for (int i = 0; i < NDESC; i++) {
    if (x->desc[i].live) {
      (void)check(z, "t4a_descriptor_unregister",
                  t4a_descriptor_unregister(t4a_runtime_table(x->rt), x->desc[i].id), 0);
      x->desc[i].live = 0;
    }
  }
  t4a_function_release(x->fn);
  (void)check(z, "t4a_runtime_close", t4a_runtime_close(x->rt), 0);
  /* The lane is kept until the end of the input: a buffer that outlives its runtime counts its
   * release after close (freed after a proved drain, or leaked) in the lane's counters, which
   * drop_lane reads. */
  if (z->num_closed == MAX_CLOSED) drop_lane(z, z->closed_lanes[--z->num_closed]);
  z->closed_lanes[z->num_closed++] = x->lane;
  for (int i = 0; i < NBUF; i++) {
    if (z->buf[i].b != NULL && z->buf[i].rt == slot) z->buf[i].rt = -1;
  }
  memset(x, 0, sizeof *x);
}

static void op_close(fz *z, reader *r) { close_rt(z, u8(r) % NRT); }

static void op_buffer(fz *z, reader *r) {
  fz_buf *b = &z->buf[u8(r) % NBUF];
  int slot = u8(r) % NRT;
  size_t bytes = 1 + u16(r) % MAXB;
  fz_rt *x = &z->rt[slot];
  if (x->rt == NULL) return;
  t4a_buffer *nb = NULL;
  if (check(z, "t4a_runtime_buffer", t4a_runtime_buffer(x->rt, bytes, &nb), x->capturing) !=
      T4A_OK) {
    if (nb != NULL) die("t4a_runtime_buffer failed and left *out set", NULL);
    return;
  }
  t4a_buffer_release(b->b);
  b->b = nb;
  b->rt = slot;
  b->dev = x->dev;
  b->bytes = bytes;
  b->tainted = x->capturing;
  memset(b->known, 0, sizeof b->known);
}

static void op_release(fz *z, reader *r) {
  fz_buf *b = buf_of(z, r);
  if (b == NULL) return;
  t4a_buffer_release(b->b);
  b->b = NULL;
}

static void op_upload(fz *z, reader *r) {
  fz_buf *b = live_buf(z, r);
  if (b == NULL) return;
  size_t off, n;
  range(r, b->bytes, &off, &n);
  uint8_t seed = u8(r);
  unsigned char src[MAXB];
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(seed + i * 7);
  fz_rt *x = &z->rt[b->rt];
  if (x->capturing) b->tainted = 1;
  t4a_status st = check(z, "t4a_runtime_upload", t4a_runtime_upload(x->rt, b->b, off, src, n),
                        x->capturing);
  if (st == T4A_OK) {
    memcpy(b->shadow + off, src, n);
    memset(b->known + off, 1, n);
  } else {
    unknown(b, off, n);
  }
}

static void op_download(fz *z, reader *r) {
  fz_buf *b = live_buf(z, r);
  if (b == NULL) return;
  size_t off, n;
  range(r, b->bytes, &off, &n);
  unsigned char dst[MAXB];
  memset(dst, 0xA5, n);
  fz_rt *x = &z->rt[b->rt];
  t4a_status st = check(z, "t4a_runtime_download",
                        t4a_runtime_download(x->rt, b->b, off, dst, n), x->capturing);
  if (st != T4A_OK || b->tainted) return;
  for (size_t i = 0; i < n; i++) {
    if (b->known[off + i] && dst[i] != b->shadow[off + i]) {
      char msg[160];
      snprintf(msg, sizeof msg, "byte %zu of a %zu-byte buffer is 0x%02x, want 0x%02x", off + i,
               b->bytes, dst[i], b->shadow[off + i]);
      die("a confirmed download is not byte-exact", msg);
    }
  }
}

/* Copies [so, so+n) of a into [do, do+n) of d in the model (after a success). */
static void model_copy(fz_buf *d, size_t doff, const fz_buf *s, size_t soff, size_t n) {
  unsigned char tmp[MAXB], k[MAXB];
  memcpy(tmp, s->shadow + soff, n);
  memcpy(k, s->known + soff, n);
  memcpy(d->shadow + doff, tmp, n);
  memcpy(d->known + doff, k, n);
  if (s->tainted) d->tainted = 1;
}

static void op_copy(fz *z, reader *r, int between) {
  fz_buf *s = live_buf(z, r), *d = live_buf(z, r);
  if (s == NULL || d == NULL) return;
  size_t soff = u16(r) % s->bytes, doff = u16(r) % d->bytes;
  size_t max = s->bytes - soff < d->bytes - doff ? s->bytes - soff : d->bytes - doff;
  size_t n = 1 + u16(r) % max;
  int cap = z->rt[s->rt].capturing || z->rt[d->rt].capturing;
  if (cap) s->tainted = d->tainted = 1;
  t4a_status st;
  if (!between) {
    st = check(z, "t4a_runtime_copy",
               t4a_runtime_copy(z->rt[d->rt].rt, d->b, doff, s->b, soff, n), cap);
  } else {
    t4a_witness *w = NULL;
    t4a_copy_path path = (t4a_copy_path)(u8(r) % 4);
    st = check(z, "t4a_xfer_copy",
               t4a_xfer_copy(t4a_runtime_xfer(z->rt[d->rt].rt), d->b, doff,
                             t4a_runtime_xfer(z->rt[s->rt].rt), s->b, soff, n, path, NULL, &w),
               cap);
    if (st == T4A_OK && (u8(r) & 1)) {
      (void)check(z, "t4a_witness_wait", t4a_witness_wait(w), cap);
    }
    t4a_witness_release(w);
  }
  if (st == T4A_OK) {
    model_copy(d, doff, s, soff, n);
  } else {
    unknown(d, doff, n);
  }
}

static void model_add(fz_buf *b, int n, int v) {
  for (int i = 0; i < n; i++) b->shadow[i] = (unsigned char)(b->shadow[i] + v);
}

static void op_launch(fz *z, reader *r) {
  fz_buf *b = live_buf(z, r);
  if (b == NULL) return;
  fz_rt *x = &z->rt[b->rt];
  if (x->fn == NULL) return;
  int n = 1 + (int)(u16(r) % b->bytes), v = u8(r);
  uint32_t grid = 1 + u8(r) % 2;
  t4a_arg args[3] = {t4a_arg_buffer(b->b, 0), t4a_arg_scalar(&n, 4), t4a_arg_scalar(&v, 4)};
  uint32_t num = 3 - (u8(r) % 8 == 0); /* sometimes a missing argument: ARGUMENT_MISMATCH */
  if (x->capturing) b->tainted = 1;
  t4a_status st = check(z, "t4a_runtime_launch",
                        t4a_runtime_launch(x->rt, x->fn, grid, 1, args, num), x->capturing);
  if (st == T4A_OK) {
    if (num != 3) die("a launch with a missing argument succeeded", NULL);
    model_add(b, n, v);
  } else {
    unknown(b, 0, (size_t)n);
  }
}

static void op_desc_register(fz *z, reader *r) {
  fz_buf *b = live_buf(z, r);
  if (b == NULL) return;
  fz_rt *x = &z->rt[b->rt];
  if (x->fn == NULL) return;
  fz_desc *dsc = NULL;
  for (int i = 0; i < NDESC; i++) {
    if (!x->desc[i].live) dsc = &x->desc[i];
  }
  if (dsc == NULL) return;
  int n = 1 + (int)(u16(r) % b->bytes), v = u8(r);
  t4a_arg args[3] = {t4a_arg_buffer(b->b, 0), t4a_arg_scalar(&n, 4), t4a_arg_scalar(&v, 4)};
  t4a_launch_config c = {{1, 1, 1}, {1, 1, 1}, 0};
  if (check(z, "t4a_descriptor_register",
            t4a_descriptor_register(t4a_runtime_table(x->rt), x->fn, &c, args, 3, &dsc->id),
            x->capturing) == T4A_OK) {
    dsc->live = 1;
    dsc->buf = b->b;
    dsc->n = n;
    dsc->v = v;
  }
}

static void op_desc_fire(fz *z, reader *r, int unregister) {
  fz_rt *x = rt_of(z, r);
  if (x == NULL) return;
  fz_desc *dsc = &x->desc[u8(r) % NDESC];
  if (!dsc->live) return;
  t4a_launch_table *t = t4a_runtime_table(x->rt);
  if (unregister) {
    (void)check(z, "t4a_descriptor_unregister", t4a_descriptor_unregister(t, dsc->id),
                x->capturing);
    dsc->live = 0;
    return;
  }
  fz_buf *b = NULL;
  for (int i = 0; i < NBUF; i++) {
    if (z->buf[i].b == dsc->buf) b = &z->buf[i];
  }
  if (b != NULL && x->capturing) b->tainted = 1;
  t4a_status st = check(z, "t4a_descriptor_fire", t4a_descriptor_fire(t, dsc->id), x->capturing);
  if (b == NULL) return;
  if (st == T4A_OK) {
    model_add(b, dsc->n, dsc->v);
  } else {
    unknown(b, 0, (size_t)dsc->n);
  }
}

static void op_capture(fz *z, reader *r) {
  int slot = u8(r) % NRT;
  fz_rt *x = &z->rt[slot];
  if (x->rt == NULL) return;
  t4a_retire *re = t4a_runtime_retire(x->rt);
  int what = u8(r) % 4;
  /* Captures are faults-mode only: a THREAD_LOCAL capture makes this thread's unsafe calls on
   * any runtime (pinned allocations of an open, frees, unloads) fail and invalidates itself, so
   * work enqueued after is refused and its buffers quarantined — deliberate leaks, as with
   * injected failures. */
  if (!z->faults) return;
  if (!x->capturing) {
    if (check(z, "t4a_graph_capture_begin", t4a_graph_capture_begin(re), 0) == T4A_OK) {
      x->capturing = 1;
      z->captured = 1;
    }
    return;
  }
  if (what == 0 && x->graph != NULL) {
    int in_place = -1;
    (void)check(z, "t4a_graph_capture_update", t4a_graph_capture_update(re, x->graph, &in_place),
                1);
  } else {
    t4a_graph *g = NULL;
    if (check(z, "t4a_graph_capture_end", t4a_graph_capture_end(re, &g), 1) == T4A_OK) {
      t4a_graph_release(x->graph);
      x->graph = g;
    }
  }
  x->capturing = 0;
}

static void op_graph(fz *z, reader *r) {
  int slot = u8(r) % NRT;
  fz_rt *x = &z->rt[slot];
  if (x->rt == NULL || x->graph == NULL) return;
  if (u8(r) % 3 == 0) {
    t4a_graph_release(x->graph);
    x->graph = NULL;
    return;
  }
  taint_rt_buffers(z, slot);
  (void)check(z, "t4a_graph_launch", t4a_graph_launch(x->graph), x->capturing);
}

static void op_sync(fz *z, reader *r) {
  fz_rt *x = rt_of(z, r);
  if (x == NULL) return;
  (void)check(z, "t4a_runtime_sync", t4a_runtime_sync(x->rt), x->capturing);
}

static const char *const k_sources[] = {
    "extern \"C\" __global__ void add(unsigned char *p, int n, int v) {}\n",
    "extern \"C\" __global__ void add(unsigned char *p, int n, int v) {}\n// v2\n",
    "#error this one does not compile\n",
};

static void op_compile(fz *z, reader *r) {
  fz_rt *x = rt_of(z, r);
  if (x == NULL) return;
  const char *src = k_sources[u8(r) % 3];
  t4a_nvrtc_artifact *a = NULL;
  t4a_module *m = NULL;
  t4a_function *f = NULL;
  t4a_status st = t4a_runtime_compile(x->rt, src, NULL, &a);
  if (st == T4A_COMPILE_FAILED && src != k_sources[2] && !z->faults) {
    die("a good source failed to compile", NULL);
  }
  (void)check(z, "t4a_runtime_compile", st, x->capturing);
  if (st == T4A_OK && src == k_sources[2]) die("a broken source compiled", NULL);
  if (a != NULL) {
    (void)check(z, "t4a_runtime_load", t4a_runtime_load(x->rt, a, &m), x->capturing);
  }
  if (m != NULL) {
    (void)check(z, "t4a_runtime_function", t4a_runtime_function(x->rt, m, "add", &f),
                x->capturing);
  }
  if (f != NULL && x->fn != NULL && (u8(r) & 1)) {
    t4a_function_release(x->fn); /* launch the compiled one from now on */
    x->fn = f;
    f = NULL;
  }
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(a);
}

typedef struct raw_job {
  t4a_buffer *b;
  int fail;
} raw_job;

static t4a_status raw_body(t4a_raw_scope *scope, void *user) {
  raw_job *j = user;
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->b, T4A_RAW_READ, &p);
  if (st != T4A_OK) return st;
  return j->fail ? t4a_error_set_(T4A_INTERNAL, "raw_body", 0, NULL, 0, "the scope fails") : st;
}

static void op_raw(fz *z, reader *r) {
  fz_buf *b = live_buf(z, r);
  if (b == NULL) return;
  fz_rt *x = &z->rt[b->rt];
  int access = 1 + u8(r) % 3;
  raw_job j = {b->b, z->faults && (u8(r) % 4 == 0)};
  t4a_raw_binding bind = {b->b, access};
  t4a_status st = t4a_raw_run(t4a_runtime_retire(x->rt), &bind, 1, raw_body, &j);
  if (j.fail) {
    if (st == T4A_OK) die("a failing raw scope returned T4A_OK", NULL);
    if (access & T4A_RAW_WRITE) b->tainted = 1; /* quarantined: content unknown */
    return;
  }
  (void)check(z, "t4a_raw_run", st, x->capturing);
}

static void op_stats(fz *z, reader *r) {
  fz_rt *x = rt_of(z, r);
  if (x == NULL) return;
  char json[8192];
  size_t size = (size_t)u16(r) % sizeof json, len = 0;
  t4a_status st = t4a_runtime_stats_json(x->rt, size ? json : NULL, size, &len);
  if (st == T4A_LIMIT_EXCEEDED && len <= size) die("stats_json: LIMIT_EXCEEDED with room", NULL);
  (void)check(z, "t4a_runtime_stats_json", st, 0);
}

static const char *const k_entries[] = {
    NULL, "cuMemAllocFromPoolAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync", "cuLaunchKernel", "cuEventRecord", "cuEventQuery",
    "cuStreamWaitEvent", "cuStreamSynchronize", "cuEventSynchronize", "cuMemFreeAsync",
    "cuModuleLoadData", "cuGraphLaunch", "cuStreamEndCapture", "cuMemcpyPeerAsync"};
static const CUresult k_codes[] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_OUT_OF_MEMORY,
                                   CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY};

static void op_inject(fz *z, reader *r) {
  const char *entry = k_entries[u8(r) % (sizeof k_entries / sizeof k_entries[0])];
  uint64_t skip = u8(r) % 16, count = 1 + u8(r) % 2;
  CUresult code = k_codes[u8(r) % 4];
  int after = u8(r) & 1;
  if (!z->faults) return;
  /* "Failed but enqueued anyway" is how a real driver can fail an enqueueing call (the work may
   * run); an allocation that failed never allocated: no after_enqueue for allocations, nor for
   * a rule that can hit any entry. */
  if (entry == NULL || strstr(entry, "Alloc") != NULL) after = 0;
  /* And only with a code that is no validation refusal: t4a takes CUDA_ERROR_INVALID_VALUE (and
   * _INVALID_HANDLE, ...) from cuLaunchKernel as "nothing was enqueued", as the driver behaves
   * (t4a/launch.h); a refusal that enqueued anyway is no driver's. */
  if (code != CUDA_ERROR_UNKNOWN) after = 0;
  t4a_fake_inject(z->fake, entry, skip, count, code, after);
  z->injected_any = 1;
}

static void op_inject_nvrtc(fz *z, reader *r) {
  long skip = u8(r) % 8;
  int code = 1 + u8(r) % 11; /* an nvrtcResult other than success */
  if (!z->faults) return;
  t4a_fake_nvrtc_inject(NULL, skip, 1, code);
}

static void op_sticky(fz *z, reader *r) {
  int dev = u8(r) % 2;
  if (!z->faults) return;
  t4a_fake_set_sticky(z->fake, dev, CUDA_ERROR_ILLEGAL_ADDRESS);
  z->sticky_injected[dev] = 1;
  taint_dev_buffers(z, dev);
}

typedef struct host_plan {
  int point;
  int fail_at;
  atomic_int seen;
} host_plan;

static int host_hook(t4a_fault_point p, void *user) {
  host_plan *h = user;
  return (int)p == h->point && atomic_fetch_add(&h->seen, 1) == h->fail_at;
}

enum {
  OP_OPEN, OP_CLOSE, OP_BUFFER, OP_RELEASE, OP_UPLOAD, OP_DOWNLOAD, OP_COPY, OP_XFER_COPY,
  OP_LAUNCH, OP_DESC_REGISTER, OP_DESC_FIRE, OP_DESC_UNREGISTER, OP_CAPTURE, OP_GRAPH, OP_SYNC,
  OP_COMPILE, OP_RAW, OP_STATS, OP_INJECT, OP_INJECT_NVRTC, OP_STICKY, OP_HOST_FAULT,
  OP_CLEAR, NUM_OPS
};

static void op_once(fz *z, reader *r, int op);

/* The next operation runs with its Nth host allocation (or lock init, thread start) failing. */
static void op_host_fault(fz *z, reader *r) {
  static const t4a_fault_point points[] = {T4A_FAULT_HOST_MALLOC, T4A_FAULT_MUTEX_INIT,
                                           T4A_FAULT_THREAD_CREATE};
  host_plan h = {(int)points[u8(r) % 3], u8(r) % 8, 0};
  int next = u8(r);
  if (!z->faults) return;
  /* One level only: nested fault ops would only deepen the stack past LeakSanitizer's
   * allocation context (and its suppression of run_faults' deliberate leaks). */
  if (next % NUM_OPS == OP_HOST_FAULT) return;
  z->injected_any = 1;
  t4a_fault_set_hook(host_hook, &h);
  op_once(z, r, next);
  t4a_fault_set_hook(NULL, NULL);
}


static const char *const k_op_names[] = {
    "open", "close", "buffer", "release", "upload", "download", "copy", "xfer_copy", "launch",
    "desc_register", "desc_fire", "desc_unregister", "capture", "graph", "sync", "compile", "raw",
    "stats", "inject", "inject_nvrtc", "sticky", "host_fault", "clear"};

static void op_once(fz *z, reader *r, int op) {
  if (g_trace) fprintf(stderr, "[%zu] %s\n", r->i - 1, k_op_names[op % NUM_OPS]);
  switch (op % NUM_OPS) {
    case OP_OPEN: op_open(z, r); break;
    case OP_CLOSE: op_close(z, r); break;
    case OP_BUFFER: op_buffer(z, r); break;
    case OP_RELEASE: op_release(z, r); break;
    case OP_UPLOAD: op_upload(z, r); break;
    case OP_DOWNLOAD: op_download(z, r); break;
    case OP_COPY: op_copy(z, r, 0); break;
    case OP_XFER_COPY: op_copy(z, r, 1); break;
    case OP_LAUNCH: op_launch(z, r); break;
    case OP_DESC_REGISTER: op_desc_register(z, r); break;
    case OP_DESC_FIRE: op_desc_fire(z, r, 0); break;
    case OP_DESC_UNREGISTER: op_desc_fire(z, r, 1); break;
    case OP_CAPTURE: op_capture(z, r); break;
    case OP_GRAPH: op_graph(z, r); break;
    case OP_SYNC: op_sync(z, r); break;
    case OP_COMPILE: op_compile(z, r); break;
    case OP_RAW: op_raw(z, r); break;
    case OP_STATS: op_stats(z, r); break;
    case OP_INJECT: op_inject(z, r); break;
    case OP_INJECT_NVRTC: op_inject_nvrtc(z, r); break;
    case OP_STICKY: op_sticky(z, r); break;
    case OP_HOST_FAULT: op_host_fault(z, r); break;
    default:
      t4a_fake_clear_injections(z->fake);
      t4a_fake_nvrtc_clear_injections();
      break;
  }
  (void)any_capturing;
}

static void teardown(fz *z) {
  t4a_fake_clear_injections(z->fake);
  t4a_fake_nvrtc_clear_injections();
  for (int i = 0; i < NBUF; i++) {
    t4a_buffer_release(z->buf[i].b);
    z->buf[i].b = NULL;
  }
  for (int i = 0; i < NRT; i++) close_rt(z, i);
  while (z->num_closed > 0) drop_lane(z, z->closed_lanes[--z->num_closed]);
  t4a_nvrtc_cache_destroy(z->cache);
  t4a_nvrtc_lib_release(z->nvrtc);
  (void)t4a_fake_table(z->fake)->cuCtxSetCurrent(NULL);
  t4a_fake_progress(z->fake);
  t4a_counter_values drv;
  t4a_driver_stats(z->drv, &drv);
  t4a_driver_release(z->drv);
  t4a_fake_progress(z->fake);
  check_device(z, "teardown");
  if (t4a_fake_nvrtc_programs_live() != 0) die("NVRTC programs left alive", NULL);
  t4a_fake_live l;
  t4a_fake_live_objects(z->fake, &l);
  long live = (long)(l.device_allocs + l.host_allocs + l.host_registrations + l.events +
                     l.modules);
  /* A clean run frees everything, unless a capture made some of its frees fail (the capturing
   * thread's own frees and unloads on other runtimes are refused by the driver: leaked and
   * counted, like the faults mode's). */
  char what[300];
  snprintf(what, sizeof what,
           "%llu device blocks, %llu pinned, %llu registrations, %llu events, %llu modules, "
           "%llu streams, %llu pools, %llu graphs, %llu executable graphs; %llu counted as leaked",
           (unsigned long long)l.device_allocs, (unsigned long long)l.host_allocs,
           (unsigned long long)l.host_registrations, (unsigned long long)l.events,
           (unsigned long long)l.modules, (unsigned long long)l.streams,
           (unsigned long long)l.pools, (unsigned long long)l.graphs,
           (unsigned long long)l.graph_execs, (unsigned long long)(drv.leaked + z->lane_leaked));
  /* A clean run frees everything, unless a capture made some of its frees fail (the capturing
   * thread's own frees and unloads on other runtimes are refused by the driver: leaked and
   * counted, like the faults mode's). Every input is judged, buffers that outlived their runtime
   * included: a closed pool caches nothing and frees each block released after close behind a
   * proved drain, or counts it (sticky_after_outliving_release,
   * quarantined_pool_caches_after_close). */
  if (!z->faults && !z->captured) {
    if (!t4a_fake_nothing_live(z->fake)) die("a clean run left objects alive in the driver", what);
  } else if (live > (long)(drv.leaked + z->lane_leaked)) {
    die("objects left alive that t4a did not count", what);
  }
  t4a_fake_destroy(z->fake);
}

/* Faults-mode runs leak on purpose what t4a could not prove drained (quarantined buffers and
 * what they hold): every allocation made under run_faults stays out of LeakSanitizer's (and
 * scripts/valgrind_lane.py's) report; the fake's accounting above checks those objects. */
__attribute__((noinline)) static void run_ops(fz *z, reader *r) {
  while (r->i < r->n) {
    int op = u8(r);
    op_once(z, r, op);
    if (g_trace) {
      t4a_fake_live l;
      t4a_fake_live_objects(z->fake, &l);
      fprintf(stderr, "    rts %d%d%d capturing %d%d%d bufs", z->rt[0].rt != NULL,
              z->rt[1].rt != NULL, z->rt[2].rt != NULL, z->rt[0].capturing, z->rt[1].capturing,
              z->rt[2].capturing);
      for (int i = 0; i < NBUF; i++) fprintf(stderr, " %d", z->buf[i].b ? z->buf[i].rt : 9);
      fprintf(stderr, "; fake: %llu blocks %llu modules %llu graphs\n",
              (unsigned long long)l.device_allocs, (unsigned long long)l.modules,
              (unsigned long long)l.graph_execs);
    }
    (void)t4a_fake_table(z->fake)->cuCtxSetCurrent(NULL);
    check_device(z, "an operation");
  }
  teardown(z);
}
__attribute__((noinline)) static void run_faults(fz *z, reader *r) {
  run_ops(z, r);
  __asm__ volatile("" ::: "memory");
}
T4A_FIXTURE_DELIBERATE_LEAKS("run_faults")

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fz z; /* large: not on the stack */
  if (size < 1 || size > 4096) return 0;
  if (g_trace < 0) g_trace = getenv("T4A_FUZZ_TRACE") != NULL;
  memset(&z, 0, sizeof z);
  reader r = {data, size, 1};
  z.faults = data[0] & 1;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.all_peers = (data[0] >> 1) & 1;
  o.mem_bytes = 1u << 20;
  o.query_policy = (data[0] >> 2) & 1 ? T4A_FAKE_QUERY_NEVER : T4A_FAKE_QUERY_PROGRESSES;
  if (t4a_fake_create(&o, &z.fake) != T4A_OK || t4a_fake_driver(z.fake, &z.drv) != T4A_OK) {
    die("fake driver", NULL);
  }
  t4a_host_kernel_register(z.fake, &t4a_hk_add_bytes, NULL, NULL); /* add(p, n, v): p[i] += v */
  t4a_fake_nvrtc_clear_injections();
  if (t4a_fake_nvrtc_open(&z.nvrtc) != T4A_OK ||
      t4a_nvrtc_cache_create(z.nvrtc, NULL, &z.cache) != T4A_OK) {
    die("fake NVRTC", NULL);
  }
  if (z.faults) {
    run_faults(&z, &r);
  } else {
    run_ops(&z, &r);
  }
  return 0;
}
