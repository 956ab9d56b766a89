/* t4a_raw on the fake driver: native handles and device pointers of bound buffers only; a real
 * (host) kernel launched through cuLaunchKernel on the scope's stream, in stream order; bound
 * buffers kept alive after the caller dropped them; poisoning (writable bindings quarantined,
 * the runtime usable); re-entry; the caller's context restored on every path (fn changing the
 * current context, a nested scope of a runtime on another device); stale handles; a sticky error
 * inside the callback; capture; and failure sweeps with exact leak accounting.
 * The fake runs streams in the order T4A_FAKE_PROGRESS_ORDER says (the suite reruns with reverse
 * and random orders) and every test checks that it saw no ordering violation. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)
#define CHUNK ((size_t)4096)
#define NUM_RT 3
#define N 1000 /* ints per test vector */

/* One runtime: the fixture's stack (a lane with its pool, retirement state and transfer state),
 * and the test kernel loaded in its context. */
typedef struct rt {
  t4a_fixture_stack *s;
  CUmodule module;
  CUfunction axpb;
} rt;

typedef struct fixture {
  t4a_fixture fx;
  const t4a_driver_table *t; /* the fake's raw table (the tests' own driver calls) */
  rt r[NUM_RT];
} fixture;

/* The kernel's module (t4a_hk_axpb), loaded in the lane's context (modules belong to a
 * context). */
static t4a_status rt_load(fixture *f, rt *r) {
  t4a_ctx_scope s;
  t4a_status st = t4a_ctx_scope_enter(&s, t4a_lane_holder(r->s->lane), NULL);
  if (st != T4A_OK) return st;
  if (f->t->cuModuleLoadData(&r->module, "T4AFAKE1\naxpb\n") != CUDA_SUCCESS ||
      f->t->cuModuleGetFunction(&r->axpb, r->module, "axpb") != CUDA_SUCCESS) {
    st = T4A_DRIVER_ERROR;
  }
  t4a_ctx_scope_exit_quiet(&s);
  return st;
}

/* Drops everything but the lane (the frees it enqueued run at the next progress): the xfer, the
 * retire, the module, the pool. */
static t4a_status rt_close(fixture *f, rt *r) {
  t4a_xfer_destroy(r->s->xfer);
  r->s->xfer = NULL;
  t4a_status st = t4a_retire_destroy(r->s->retire);
  r->s->retire = NULL;
  if (r->module != NULL) {
    t4a_ctx_scope s;
    if (t4a_ctx_scope_enter(&s, t4a_lane_holder(r->s->lane), NULL) == T4A_OK) {
      (void)f->t->cuModuleUnload(r->module); /* fails after a sticky error: the fake drops it */
      t4a_ctx_scope_exit_quiet(&s);
    }
  }
  r->module = NULL;
  (void)t4a_fixture_stack_close(r->s); /* the pool */
  return st;
}

/* Runtimes 0 and 1 on device 0 (sharing its primary context), runtime 2 on device 1; each the
 * standard stack (the pool without reuse: a released buffer's block goes back at once, live
 * blocks = buffers) with an xfer of two chunks. */
static fixture *make(void) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* nothing runs unless a sync or the test says so */
  o.kernels[0] = &t4a_hk_axpb;
  o.stacks = NUM_RT;
  o.ordinals[2] = 1;
  o.build |= T4A_FIXTURE_XFER;
  o.xfer.chunk_bytes = CHUNK;
  o.xfer.num_chunks = 2;
  if (t4a_fixture_init(&f->fx, &o) != T4A_OK) return NULL;
  f->t = t4a_fake_table(f->fx.fake);
  for (int i = 0; i < NUM_RT; i++) {
    f->r[i].s = &f->fx.stack[i];
    if (rt_load(f, &f->r[i]) != T4A_OK) return NULL;
  }
  return f;
}

/* counted: the test leaked on purpose (teardown_counted checked the accounting); else
 * everything freed and a proved drain. Never an ordering violation. */
static int finish(fixture *f, int counted) {
  t4a_status st = T4A_OK;
  for (int i = 0; i < NUM_RT; i++) {
    t4a_status s = f->r[i].s->retire != NULL ? rt_close(f, &f->r[i]) : T4A_OK;
    if (st == T4A_OK) st = s;
  }
  int rc = t4a_fixture_fini(&f->fx, counted ? T4A_FIXTURE_CHECK_ORDERING
                                            : T4A_FIXTURE_CHECK_STRICT);
  if (!counted && st != T4A_OK) {
    fprintf(stderr, "# teardown: status %s\n", t4a_status_name(st));
    rc = -1;
  }
  free(f);
  return rc;
}

static int setup(void **state) { return (*state = make()) != NULL ? 0 : -1; }
static int teardown(void **state) { return finish(*state, 0); }

/* For the tests that leak on purpose (quarantined buffers, a sticky fault): the allocations made
 * under these frames are suppressed for LeakSanitizer, and teardown_counted checks that what is
 * left alive is exactly what t4a counted as leaked. */
__attribute__((noinline)) static fixture *make_leaky(void) {
  fixture *f = make();
  __asm__ volatile("" ::: "memory");
  return f;
}
static int setup_leaky(void **state) { return (*state = make_leaky()) != NULL ? 0 : -1; }

static long unaccounted(fixture *f) {
  /* Pools are left out on both sides: a pool pinned by a quarantined (leaked) buffer stays alive
   * uncounted, and t4a_mem counts the pools it leaks apart (pools_leaked). */
  return t4a_fixture_unaccounted(&f->fx, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                             T4A_FIXTURE_LIVE_HOST_ALLOCS |
                                             T4A_FIXTURE_LIVE_EVENTS);
}

static int teardown_counted(void **state) {
  fixture *f = *state;
  for (int i = 0; i < NUM_RT; i++) (void)rt_close(f, &f->r[i]);
  (void)t4a_fixture_drop_stacks(&f->fx); /* baseline 0, no context current */
  long extra = unaccounted(f);
  if (extra != 0) fprintf(stderr, "# teardown: %ld objects alive uncounted\n", extra);
  int rc = finish(f, 1);
  return extra == 0 ? rc : -1;
}

/* make_leaky: the fixture of the sticky-fault test; buffer_leaky: buffers a test poisons on
 * purpose (held by quarantine forever); op_raw: the sweep's steps. All are checked by
 * unaccounted(): whatever they leave alive is exactly what t4a counted as leaked. */
T4A_FIXTURE_DELIBERATE_LEAKS("make_leaky", "buffer_leaky", "op_raw", "op_raw_many")

/* ---- helpers ---- */

static t4a_buffer *buffer(rt *r, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(r->s->pool, bytes, 0, 0, &b));
  return b;
}
__attribute__((noinline)) static t4a_buffer *buffer_leaky(rt *r, size_t bytes) {
  t4a_buffer *b = buffer(r, bytes);
  __asm__ volatile("" ::: "memory");
  return b;
}

static void iota(int *v, int n, int base) {
  for (int i = 0; i < n; i++) v[i] = base + i;
}

static void upload(rt *r, t4a_buffer *b, const void *src, size_t n) {
  CK(t4a_xfer_upload(r->s->xfer, b, 0, src, n));
}

static void download(rt *r, t4a_buffer *b, void *dst, size_t n) {
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(r->s->xfer, b, 0, dst, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
}

static t4a_counter_values counters(rt *r) {
  t4a_counter_values v;
  t4a_lane_stats(r->s->lane, &v);
  return v;
}

static CUcontext ctx_of(rt *r) { return t4a_ctx_holder_native(t4a_lane_holder(r->s->lane)); }

static CUcontext current(fixture *f) {
  CUcontext c = (CUcontext)(uintptr_t)0xdead;
  assert_int_equal(f->t->cuCtxGetCurrent(&c), CUDA_SUCCESS);
  return c;
}

/* What a callback does, configured by the test, and what it saw. */
typedef struct job {
  fixture *f;
  rt *r;
  t4a_buffer *in, *out; /* out is launched on when `launch` */
  int launch;
  int a, b;
  t4a_status ret;    /* returned after the work */
  CUcontext set_ctx; /* made current before returning, when set_ctx_do */
  int set_ctx_do;
  int ran;
  t4a_raw_scope *handle;
  CUcontext seen_ctx, seen_current;
  CUstream seen_stream;
  int seen_ordinal;
} job;

/* Enqueues axpb(in, out) on the scope's stream through the driver table, as a vendor would. */
static t4a_status launch_axpb(job *j, t4a_raw_scope *scope) {
  uint64_t in = 0, out = 0;
  t4a_status st = t4a_raw_devptr(scope, j->in, T4A_RAW_READ, &in);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->out, T4A_RAW_WRITE, &out);
  if (st != T4A_OK) return st;
  CUdeviceptr pin = (CUdeviceptr)in, pout = (CUdeviceptr)out;
  int n = N;
  void *args[] = {&pin, &pout, &n, &j->a, &j->b};
  return T4A_CU(j->f->fx.drv, cuLaunchKernel, j->r->axpb, 4, 1, 1, 256, 1, 1, 0,
                (CUstream)t4a_raw_stream(scope), args, NULL);
}

static t4a_status job_fn(t4a_raw_scope *scope, void *user) {
  job *j = user;
  j->ran++;
  j->handle = scope;
  j->seen_ctx = t4a_raw_context(scope);
  j->seen_stream = t4a_raw_stream(scope);
  j->seen_ordinal = t4a_raw_device_ordinal(scope);
  (void)j->f->t->cuCtxGetCurrent(&j->seen_current);
  if (j->launch) {
    t4a_status st = launch_axpb(j, scope);
    if (st != T4A_OK) return st;
  }
  if (j->set_ctx_do) (void)j->f->t->cuCtxSetCurrent(j->set_ctx);
  return j->ret;
}

static t4a_status run2(job *j) {
  t4a_raw_binding b[2] = {{j->in, T4A_RAW_READ}, {j->out, T4A_RAW_WRITE}};
  return t4a_raw_run(j->r->s->retire, b, 2, job_fn, j);
}

/* ---- handles and device pointers ---- */

typedef struct ptrs_job {
  t4a_buffer *rd, *wr, *both, *unbound;
  t4a_status st[12];
  uint64_t p[12];
} ptrs_job;

static t4a_status ptrs_fn(t4a_raw_scope *scope, void *user) {
  ptrs_job *j = user;
  int k = 0;
  j->st[k] = t4a_raw_devptr(scope, j->rd, T4A_RAW_READ, &j->p[k]), k++;       /* 0 ok */
  j->st[k] = t4a_raw_devptr(scope, j->rd, T4A_RAW_WRITE, &j->p[k]), k++;      /* 1 refused */
  j->st[k] = t4a_raw_devptr(scope, j->rd, T4A_RAW_READ_WRITE, &j->p[k]), k++; /* 2 refused */
  j->st[k] = t4a_raw_devptr(scope, j->wr, T4A_RAW_WRITE, &j->p[k]), k++;      /* 3 ok */
  j->st[k] = t4a_raw_devptr(scope, j->wr, T4A_RAW_READ, &j->p[k]), k++;       /* 4 ok */
  j->st[k] = t4a_raw_devptr(scope, j->both, T4A_RAW_READ_WRITE, &j->p[k]), k++; /* 5 ok */
  j->st[k] = t4a_raw_devptr(scope, j->unbound, T4A_RAW_READ, &j->p[k]), k++;  /* 6 refused */
  j->st[k] = t4a_raw_devptr(scope, NULL, T4A_RAW_READ, &j->p[k]), k++;        /* 7 refused */
  j->st[k] = t4a_raw_devptr(scope, j->rd, 0, &j->p[k]), k++;                  /* 8 refused */
  j->st[k] = t4a_raw_devptr(scope, j->rd, 4, &j->p[k]), k++;                  /* 9 refused */
  j->st[k] = t4a_raw_devptr(scope, j->rd, T4A_RAW_READ, NULL), k++;           /* 10 refused */
  return T4A_OK;
}

/* Device pointers only for bound buffers, write only for writable bindings; duplicates join. */
static void test_devptr_bound_only(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  ptrs_job j = {buffer(a, 64), buffer(a, 64), buffer(a, 64), buffer(a, 64), {0}, {0}};
  for (int i = 0; i < 12; i++) j.p[i] = 77;
  t4a_raw_binding b[4] = {{j.rd, T4A_RAW_READ}, {j.both, T4A_RAW_READ}, {j.wr, T4A_RAW_WRITE},
                          {j.both, T4A_RAW_WRITE}};
  t4a_counter_values before = counters(a);
  CK(t4a_raw_run(a->s->retire, b, 4, ptrs_fn, &j));
  t4a_status want[11] = {T4A_OK,               T4A_INVALID_ARGUMENT, T4A_INVALID_ARGUMENT,
                         T4A_OK,               T4A_OK,               T4A_OK,
                         T4A_INVALID_ARGUMENT, T4A_INVALID_ARGUMENT, T4A_INVALID_ARGUMENT,
                         T4A_INVALID_ARGUMENT, T4A_INVALID_ARGUMENT};
  for (int i = 0; i < 11; i++) assert_int_equal(j.st[i], want[i]);
  assert_int_equal(j.p[0], t4a_buffer_devptr(j.rd));
  assert_int_equal(j.p[3], t4a_buffer_devptr(j.wr));
  assert_int_equal(j.p[4], t4a_buffer_devptr(j.wr));
  assert_int_equal(j.p[5], t4a_buffer_devptr(j.both));
  for (int i = 1; i < 10; i++) {
    if (want[i] != T4A_OK) assert_int_equal(j.p[i], 0); /* outputs are 0 on failure */
  }
  t4a_counter_values v = counters(a);
  assert_int_equal(v.raw_scopes - before.raw_scopes, 1);
  assert_int_equal(v.raw_scopes_poisoned, 0);
  assert_int_equal(v.keepalives_held - before.keepalives_held, 3); /* three unique buffers */
  assert_int_equal(v.host_waits, before.host_waits);
  /* The typed error of an unbound buffer says so. */
  ptrs_job k = {j.rd, j.wr, j.both, j.unbound, {0}, {0}};
  CK(t4a_raw_run(a->s->retire, b, 1, ptrs_fn, &k));
  assert_int_equal(k.st[3], T4A_INVALID_ARGUMENT); /* wr is not bound in this scope */
  t4a_buffer_release(j.rd);
  t4a_buffer_release(j.wr);
  t4a_buffer_release(j.both);
  t4a_buffer_release(j.unbound);
}

typedef struct detail_job {
  t4a_buffer *unbound;
  t4a_error e;
} detail_job;
static t4a_status detail_fn(t4a_raw_scope *scope, void *user) {
  detail_job *j = user;
  uint64_t p;
  if (t4a_raw_devptr(scope, j->unbound, T4A_RAW_READ, &p) != T4A_INVALID_ARGUMENT) {
    return T4A_INTERNAL;
  }
  t4a_error_last(&j->e);
  return T4A_OK;
}
static void test_unbound_detail(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  detail_job j = {buffer(a, 64), {0}};
  CK(t4a_raw_run(a->s->retire, NULL, 0, detail_fn, &j));
  assert_int_equal(j.e.status, T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(j.e.message, "not bound to this raw scope"));
  t4a_buffer_release(j.unbound);
}

/* The native handles are the lane's, and its context is current inside the scope. */
static void test_native_handles(void **state) {
  fixture *f = *state;
  for (int i = 0; i < NUM_RT; i++) {
    rt *r = &f->r[i];
    job j = {.f = f, .r = r, .in = buffer(r, 64), .out = buffer(r, 64)};
    CK(run2(&j));
    assert_int_equal(j.ran, 1);
    assert_ptr_equal(j.seen_ctx, ctx_of(r));
    assert_ptr_equal(j.seen_current, ctx_of(r));
    assert_ptr_equal(j.seen_stream, t4a_lane_stream(r->s->lane));
    assert_int_equal(j.seen_ordinal, t4a_lane_ordinal(r->s->lane));
    assert_int_equal(j.seen_ordinal, i == 2 ? 1 : 0);
    t4a_buffer_release(j.in);
    t4a_buffer_release(j.out);
  }
}

static int g_fn_runs;
static t4a_status count_fn(t4a_raw_scope *scope, void *user) {
  (void)scope;
  (void)user;
  g_fn_runs++;
  return T4A_OK;
}

/* Arguments are checked before anything is taken; fn does not run. */
static void test_argument_checks(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *c = &f->r[2];
  t4a_buffer *x = buffer(a, 64), *foreign = buffer(&f->r[1], 64), *far = buffer(c, 64);
  t4a_raw_binding ok = {x, T4A_RAW_READ};
  g_fn_runs = 0;
  assert_int_equal(t4a_raw_run(NULL, &ok, 1, count_fn, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run(a->s->retire, &ok, 1, NULL, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run(a->s->retire, NULL, 1, count_fn, NULL), T4A_INVALID_ARGUMENT);
  t4a_raw_binding nobuf = {NULL, T4A_RAW_READ};
  assert_int_equal(t4a_raw_run(a->s->retire, &nobuf, 1, count_fn, NULL), T4A_INVALID_ARGUMENT);
  t4a_raw_binding bad[2] = {{x, 0}, {x, 4}};
  assert_int_equal(t4a_raw_run(a->s->retire, &bad[0], 1, count_fn, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run(a->s->retire, &bad[1], 1, count_fn, NULL), T4A_INVALID_ARGUMENT);
  /* Another runtime's buffer, on the same device (same context) and on another device. */
  t4a_raw_binding other[2] = {{x, T4A_RAW_READ}, {foreign, T4A_RAW_WRITE}};
  assert_int_equal(t4a_raw_run(a->s->retire, other, 2, count_fn, NULL), T4A_FOREIGN_HANDLE);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "binding 1"));
  t4a_raw_binding remote = {far, T4A_RAW_READ};
  assert_int_equal(t4a_raw_run(a->s->retire, &remote, 1, count_fn, NULL), T4A_FOREIGN_HANDLE);
  assert_int_equal(g_fn_runs, 0);
  assert_int_equal(counters(a).raw_scopes, 0);
  assert_int_equal(counters(a).admissions, 0);
  /* No bindings at all is fine. */
  CK(t4a_raw_run(a->s->retire, NULL, 0, count_fn, NULL));
  assert_int_equal(g_fn_runs, 1);
  t4a_buffer_release(x);
  t4a_buffer_release(foreign);
  t4a_buffer_release(far);
}

/* ---- a kernel in stream order, keepalives ---- */

/* A host kernel loaded from a fake image and launched with cuLaunchKernel on the scope's stream
 * runs in stream order: nothing has run when the scope returns (no host wait), and a download
 * through the same lane afterwards sees its result. */
static void test_kernel_in_stream_order(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  int host[N], got[N];
  iota(host, N, 5);
  job j = {.f = f, .r = a, .in = buffer(a, sizeof host), .out = buffer(a, sizeof host),
           .launch = 1, .a = 3, .b = -2};
  upload(a, j.in, host, sizeof host);
  uint64_t waits = counters(a).host_waits, launches = t4a_fake_calls(f->fx.fake, "cuLaunchKernel");
  CK(run2(&j));
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuLaunchKernel"), launches + 1);
  assert_int_equal(counters(a).host_waits, waits);
  assert_true(t4a_fake_pending(f->fx.fake, t4a_lane_stream(a->s->lane)) > 0); /* not run yet */
  const int *view = t4a_fake_host_view(f->fx.fake, t4a_buffer_devptr(j.out), sizeof got);
  assert_non_null(view);
  assert_int_not_equal(view[1], 3 * host[1] - 2);
  download(a, j.out, got, sizeof got);
  for (int i = 0; i < N; i++) assert_int_equal(got[i], 3 * host[i] - 2);
  t4a_buffer_release(j.in);
  t4a_buffer_release(j.out);
}

/* The caller drops both buffers right after t4a_raw_run: the scope's keepalives hold them until
 * the kernel ran (no free is even enqueued before), then observation releases them. */
static void test_buffers_kept_until_work_ran(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  int host[N];
  iota(host, N, 1);
  job j = {.f = f, .r = a, .in = buffer(a, sizeof host), .out = buffer(a, sizeof host),
           .launch = 1, .a = 2, .b = 1};
  upload(a, j.in, host, sizeof host);
  t4a_counter_values before = counters(a);
  uint64_t frees = t4a_fake_calls(f->fx.fake, "cuMemFreeAsync");
  CK(run2(&j));
  t4a_buffer_release(j.in);
  t4a_buffer_release(j.out);
  t4a_counter_values v = counters(a);
  /* Two keepalives handed over (`in` is also held by its upload, in the same open epoch: that
   * one is deduplicated, the epoch holding one reference until the same completion). */
  assert_int_equal(v.keepalives_held + v.keepalives_deduplicated - before.keepalives_held -
                       before.keepalives_deduplicated,
                   2);
  assert_int_equal(v.host_waits, before.host_waits);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemFreeAsync"), frees); /* still held */
  CK(t4a_retire_poll(a->s->retire)); /* seals the open epoch: its event is not complete yet */
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemFreeAsync"), frees);
  t4a_fake_progress(f->fx.fake); /* the kernel (reading and writing both blocks) and the event */
  CK(t4a_retire_poll(a->s->retire));
  assert_int_equal(counters(a).keepalives_released - before.keepalives_released, 2);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemFreeAsync"), frees + 2);
  t4a_fake_progress(f->fx.fake);
  assert_int_equal(t4a_fake_ordering_violations(f->fx.fake), 0);
  assert_int_equal(t4a_fake_sticky(f->fx.fake, 0), CUDA_SUCCESS);
}

/* ---- poisoning ---- */

/* A failing callback: the WRITE binding is quarantined (held forever, leaked and counted at
 * teardown), the READ one kept as on success, fn's status returned with a detail naming the
 * scope; the lane stays usable. */
static void test_failure_quarantines_writes(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  int host[N], got[N];
  iota(host, N, 9);
  job j = {.f = f, .r = a, .in = buffer(a, sizeof host), .out = buffer_leaky(a, sizeof host),
           .launch = 1, .a = 1, .b = 1, .ret = T4A_UNSUPPORTED};
  upload(a, j.in, host, sizeof host);
  t4a_fake_live live_before;
  t4a_fake_live_objects(f->fx.fake, &live_before);
  t4a_counter_values before = counters(a);
  /* A stale detail of the same status on this thread must not pass for fn's. */
  (void)t4a_error_set_(T4A_UNSUPPORTED, "stale", 0, NULL, 0, "an older failure");
  assert_int_equal(run2(&j), T4A_UNSUPPORTED);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_UNSUPPORTED);
  assert_string_equal(e.entry, "t4a_raw_run");
  assert_non_null(strstr(e.message, "raw scope"));
  t4a_counter_values v = counters(a);
  assert_int_equal(v.raw_scopes - before.raw_scopes, 1);
  assert_int_equal(v.raw_scopes_poisoned - before.raw_scopes_poisoned, 1);
  assert_int_equal(v.quarantined - before.quarantined, 1);
  /* The READ binding was kept (deduplicated: its upload holds it in the same epoch). */
  assert_int_equal(v.keepalives_held + v.keepalives_deduplicated - before.keepalives_held -
                       before.keepalives_deduplicated,
                   1);
  struct t4a_retire_stats rs;
  t4a_retire_stats(a->s->retire, &rs);
  assert_int_equal(rs.quarantined_held, 1);
  CK(t4a_lane_check(a->s->lane));
  /* The caller drops both; the quarantined block is never freed. */
  t4a_buffer_release(j.in);
  t4a_buffer_release(j.out);
  CK(t4a_retire_wait(a->s->retire));
  t4a_fake_progress(f->fx.fake); /* the free of `in`, enqueued when its keepalive went */
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.device_allocs, live_before.device_allocs - 1); /* only `in` went */
  /* The runtime is usable: a round trip on the same lane. */
  t4a_buffer *x = buffer(a, sizeof host);
  upload(a, x, host, sizeof host);
  download(a, x, got, sizeof got);
  assert_memory_equal(got, host, sizeof host);
  t4a_buffer_release(x);
}

static t4a_status own_detail_fn(t4a_raw_scope *scope, void *user) {
  (void)user;
  return t4a_raw_fail(scope, T4A_DRIVER_ERROR, "cublasSgemm_v2", 13,
                      "CUBLAS_STATUS_EXECUTION_FAILED", "vendor call %s", "failed");
}
static t4a_status ok_fn(t4a_raw_scope *scope, void *user) {
  (void)scope;
  (void)user;
  return T4A_OK;
}

/* fn's own detail is kept; a successful scope leaves the caller's older detail untouched. */
static void test_details(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  t4a_buffer *w = buffer_leaky(a, 64);
  t4a_raw_binding b = {w, T4A_RAW_READ_WRITE};
  assert_int_equal(t4a_raw_run(a->s->retire, &b, 1, own_detail_fn, NULL), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cublasSgemm_v2");
  assert_int_equal(e.code, 13);
  assert_string_equal(e.code_name, "CUBLAS_STATUS_EXECUTION_FAILED");
  assert_string_equal(e.message, "vendor call failed");
  assert_int_equal(counters(a).quarantined, 1);
  (void)t4a_error_set_(T4A_IO, "older", 0, NULL, 0, "kept");
  CK(t4a_raw_run(a->s->retire, NULL, 0, ok_fn, NULL));
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_IO);
  assert_string_equal(e.entry, "older");
  t4a_buffer_release(w);
}

/* ---- re-entry ---- */

typedef struct reentry_job {
  rt *self, *other;
  t4a_buffer *x;
  t4a_status nested_same, poll, upload, nested_other, fence;
} reentry_job;
static t4a_status reentry_fn(t4a_raw_scope *scope, void *user) {
  (void)scope;
  reentry_job *j = user;
  int v = 1;
  j->nested_same = t4a_raw_run(j->self->s->retire, NULL, 0, ok_fn, NULL);
  j->poll = t4a_retire_poll(j->self->s->retire);
  j->upload = t4a_xfer_upload(j->self->s->xfer, j->x, 0, &v, sizeof v);
  t4a_witness *w = NULL;
  j->fence = t4a_retire_fence(j->self->s->retire, &w);
  t4a_witness_release(w);
  /* Another runtime on the same device (same context) is not re-entry. */
  j->nested_other = t4a_raw_run(j->other->s->retire, NULL, 0, ok_fn, NULL);
  return T4A_OK;
}
static void test_reentry(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  reentry_job j = {a, &f->r[1], buffer(a, 64), T4A_OK, T4A_OK, T4A_OK, T4A_OK, T4A_OK};
  t4a_raw_binding b = {j.x, T4A_RAW_WRITE};
  CK(t4a_raw_run(a->s->retire, &b, 1, reentry_fn, &j));
  assert_int_equal(j.nested_same, T4A_REENTRY);
  assert_int_equal(j.poll, T4A_REENTRY);
  assert_int_equal(j.upload, T4A_REENTRY);
  assert_int_equal(j.fence, T4A_REENTRY);
  CK(j.nested_other);
  assert_int_equal(counters(a).admissions_refused_reentry, 4);
  assert_int_equal(counters(a).raw_scopes, 1); /* the refused nested scope never ran */
  assert_int_equal(counters(&f->r[1]).raw_scopes, 1);
  /* Nothing was poisoned: the scope returned OK. */
  assert_int_equal(counters(a).quarantined, 0);
  CK(t4a_lane_check(a->s->lane));
  t4a_buffer_release(j.x);
}

/* ---- context restore ---- */

/* Every combination of the caller's context (none, the lane's, another device's), fn's outcome
 * and what fn leaves current (unchanged, none, another device's). */
static void test_context_restored(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *c = &f->r[2];
  CUcontext callers[3] = {NULL, ctx_of(a), ctx_of(c)};
  for (int caller = 0; caller < 3; caller++) {
    for (int outcome = 0; outcome < 2; outcome++) {
      for (int change = 0; change < 3; change++) {
        t4a_buffer *in = buffer(a, 64), *out = outcome ? buffer_leaky(a, 64) : buffer(a, 64);
        job j = {.f = f, .r = a, .in = in, .out = out, .ret = outcome ? T4A_INTERNAL : T4A_OK,
                 .set_ctx_do = change != 0, .set_ctx = change == 2 ? ctx_of(c) : NULL};
        assert_int_equal(f->t->cuCtxSetCurrent(callers[caller]), CUDA_SUCCESS);
        assert_int_equal(run2(&j), j.ret);
        assert_ptr_equal(j.seen_current, ctx_of(a));
        assert_ptr_equal(current(f), callers[caller]);
        t4a_buffer_release(in);
        t4a_buffer_release(out);
      }
    }
  }
  (void)f->t->cuCtxSetCurrent(NULL);
  CK(t4a_lane_check(a->s->lane));
  CK(t4a_lane_check(c->s->lane));
}

/* A scope of a runtime on another device nested inside fn: its context is current inside, fn's
 * comes back after it, the caller's after the outer scope; the outer handle stays valid inside
 * the inner scope, and each scope's work lands. */
typedef struct nest_job {
  fixture *f;
  rt *outer_rt, *inner_rt;
  t4a_buffer *outer_buf, *inner_buf;
  t4a_raw_scope *outer;
  int inner_fail;
  CUcontext inner_current, after_inner;
  int outer_ordinal_inside, inner_ordinal;
  t4a_status inner_st;
} nest_job;
static t4a_status nest_inner(t4a_raw_scope *scope, void *user) {
  nest_job *j = user;
  (void)j->f->t->cuCtxGetCurrent(&j->inner_current);
  j->inner_ordinal = t4a_raw_device_ordinal(scope);
  j->outer_ordinal_inside = t4a_raw_device_ordinal(j->outer);
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->inner_buf, T4A_RAW_WRITE, &p);
  if (st != T4A_OK) return st;
  /* The outer scope's buffer is not bound to this one. */
  uint64_t q = 0;
  if (t4a_raw_devptr(scope, j->outer_buf, T4A_RAW_READ, &q) != T4A_INVALID_ARGUMENT) {
    return T4A_INTERNAL;
  }
  st = T4A_CU(j->f->fx.drv, cuMemsetD8Async, (CUdeviceptr)p, 0x5a, 256,
              (CUstream)t4a_raw_stream(scope));
  if (st != T4A_OK) return st;
  return j->inner_fail ? T4A_INTERNAL : T4A_OK;
}
static t4a_status nest_outer(t4a_raw_scope *scope, void *user) {
  nest_job *j = user;
  j->outer = scope;
  t4a_raw_binding b = {j->inner_buf, T4A_RAW_WRITE};
  j->inner_st = t4a_raw_run(j->inner_rt->s->retire, &b, 1, nest_inner, j);
  (void)j->f->t->cuCtxGetCurrent(&j->after_inner);
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->outer_buf, T4A_RAW_WRITE, &p);
  if (st != T4A_OK) return st;
  return T4A_CU(j->f->fx.drv, cuMemsetD8Async, (CUdeviceptr)p, 0x33, 256,
                (CUstream)t4a_raw_stream(scope));
}
static void test_nested_scope_of_another_runtime(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *c = &f->r[2];
  CUcontext callers[2] = {NULL, ctx_of(c)};
  for (int k = 0; k < 4; k++) {
    nest_job j = {.f = f, .outer_rt = a, .inner_rt = c, .outer_buf = buffer(a, 256),
                  .inner_buf = (k & 2) ? buffer_leaky(c, 256) : buffer(c, 256),
                  .inner_fail = (k & 2) != 0};
    CUcontext caller = callers[k & 1];
    assert_int_equal(f->t->cuCtxSetCurrent(caller), CUDA_SUCCESS);
    t4a_raw_binding b = {j.outer_buf, T4A_RAW_WRITE};
    CK(t4a_raw_run(a->s->retire, &b, 1, nest_outer, &j));
    assert_int_equal(j.inner_st, j.inner_fail ? T4A_INTERNAL : T4A_OK);
    assert_ptr_equal(j.inner_current, ctx_of(c));
    assert_int_equal(j.inner_ordinal, 1);
    assert_int_equal(j.outer_ordinal_inside, 0);
    assert_ptr_equal(j.after_inner, ctx_of(a));
    assert_ptr_equal(current(f), caller);
    unsigned char got[256];
    download(a, j.outer_buf, got, sizeof got);
    for (int i = 0; i < 256; i++) assert_int_equal(got[i], 0x33);
    if (!j.inner_fail) {
      download(c, j.inner_buf, got, sizeof got);
      for (int i = 0; i < 256; i++) assert_int_equal(got[i], 0x5a);
    }
    t4a_buffer_release(j.outer_buf);
    t4a_buffer_release(j.inner_buf);
  }
  (void)f->t->cuCtxSetCurrent(NULL);
  assert_int_equal(counters(c).raw_scopes_poisoned, 2);
  assert_int_equal(counters(c).quarantined, 2);
  assert_int_equal(counters(a).raw_scopes_poisoned, 0);
  CK(t4a_lane_check(c->s->lane));
}

/* ---- handles after the scope ---- */

typedef struct thread_probe {
  t4a_raw_scope *handle;
  void *stream;
  int ordinal;
} thread_probe;
static void *probe_main(void *p) {
  thread_probe *t = p;
  t->stream = t4a_raw_stream(t->handle);
  t->ordinal = t4a_raw_device_ordinal(t->handle);
  return NULL;
}
typedef struct stale_job {
  t4a_buffer *x;
  t4a_raw_scope *saved;   /* the first scope's handle */
  t4a_status in_second;   /* the first handle used inside a second scope */
  uint64_t in_second_ptr;
  thread_probe probe;     /* the live handle used from another thread */
  t4a_status fail_ok;     /* t4a_raw_fail with T4A_OK, on the live handle */
} stale_job;
static t4a_status stale_first(t4a_raw_scope *scope, void *user) {
  stale_job *j = user;
  j->saved = scope;
  j->probe.handle = scope;
  j->probe.ordinal = 42;
  pthread_t t;
  if (pthread_create(&t, NULL, probe_main, &j->probe) != 0) return T4A_INTERNAL;
  pthread_join(t, NULL);
  return T4A_OK;
}
static t4a_status stale_second(t4a_raw_scope *scope, void *user) {
  stale_job *j = user;
  j->in_second_ptr = 99;
  j->in_second = t4a_raw_devptr(j->saved, j->x, T4A_RAW_READ, &j->in_second_ptr);
  j->fail_ok = t4a_raw_fail(scope, T4A_OK, NULL, 0, NULL, "not a failure");
  return scope != j->saved ? T4A_OK : T4A_INTERNAL; /* every scope has a fresh handle */
}
static void test_handle_invalid_after_return(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  stale_job j = {.x = buffer(a, 64)};
  t4a_raw_binding b = {j.x, T4A_RAW_READ};
  CK(t4a_raw_run(a->s->retire, &b, 1, stale_first, &j));
  assert_null(j.probe.stream); /* another thread: not open there */
  assert_int_equal(j.probe.ordinal, -1);
  uint64_t p = 5;
  assert_int_equal(t4a_raw_devptr(j.saved, j.x, T4A_RAW_READ, &p), T4A_INVALID_ARGUMENT);
  assert_int_equal(p, 0);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "not open"));
  assert_null(t4a_raw_stream(j.saved));
  assert_null(t4a_raw_context(j.saved));
  assert_int_equal(t4a_raw_device_ordinal(j.saved), -1);
  assert_null(t4a_raw_stream(NULL));
  assert_int_equal(t4a_raw_fail(j.saved, T4A_IO, "x", 1, NULL, "not recorded"),
                   T4A_INVALID_ARGUMENT);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "not open"));
  /* Inside a later scope (likely at the same stack address) the old handle is still refused. */
  CK(t4a_raw_run(a->s->retire, &b, 1, stale_second, &j));
  assert_int_equal(j.in_second, T4A_INVALID_ARGUMENT);
  assert_int_equal(j.in_second_ptr, 0);
  assert_int_equal(j.fail_ok, T4A_INVALID_ARGUMENT);
  t4a_buffer_release(j.x);
}

/* ---- a sticky error inside the callback ---- */

typedef struct sticky_job {
  job base;
  t4a_fake *fake;
} sticky_job;
static t4a_status sticky_fn(t4a_raw_scope *scope, void *user) {
  sticky_job *j = user;
  t4a_status st = launch_axpb(&j->base, scope);
  if (st != T4A_OK) return st;
  /* The vendor's kernel faults; the vendor library reports an error. */
  t4a_fake_set_sticky(j->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  return t4a_raw_fail(scope, T4A_DRIVER_ERROR, "vendorCall", 14, "VENDOR_STATUS_EXECUTION_FAILED",
                      "the vendor call failed");
}
static void test_sticky_error_in_callback(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *c = &f->r[2];
  sticky_job j = {{.f = f, .r = a, .in = buffer_leaky(a, N * sizeof(int)),
                   .out = buffer_leaky(a, N * sizeof(int)), .a = 1, .b = 0},
                  f->fx.fake};
  t4a_raw_binding b[2] = {{j.base.in, T4A_RAW_READ}, {j.base.out, T4A_RAW_WRITE}};
  assert_int_equal(t4a_raw_run(a->s->retire, b, 2, sticky_fn, &j), T4A_CONTEXT_LOST);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuStreamQuery");
  assert_int_equal(e.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_non_null(strstr(e.message, "DRIVER_ERROR"));
  assert_ptr_equal(current(f), NULL);
  assert_int_equal(t4a_lane_check(a->s->lane), T4A_LANE_BROKEN);
  assert_int_equal(t4a_lane_check(f->r[1].s->lane), T4A_LANE_BROKEN); /* same device */
  CK(t4a_lane_check(c->s->lane));
  assert_int_equal(t4a_raw_run(a->s->retire, b, 2, ok_fn, NULL), T4A_LANE_BROKEN);
  t4a_counter_values v = counters(a);
  assert_int_equal(v.raw_scopes, 1);
  assert_int_equal(v.raw_scopes_poisoned, 1);
  assert_int_equal(v.quarantined, 1);
  /* The other device carries on. */
  t4a_buffer *y = buffer(c, 64);
  t4a_raw_binding by = {y, T4A_RAW_WRITE};
  CK(t4a_raw_run(c->s->retire, &by, 1, ok_fn, NULL));
  t4a_buffer_release(y);
  t4a_buffer_release(j.base.in);
  t4a_buffer_release(j.base.out);
}

/* ---- capture ---- */

/* During a graph capture a raw scope is allowed: its launch is captured, its keepalives go to the
 * graph; a failing scope is poisoned without querying (and invalidating) the capturing stream.
 * The graph, launched afterwards, computes the result. */
static void test_raw_scope_in_capture(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0];
  int host[N], got[N];
  iota(host, N, 100);
  job j = {.f = f, .r = a, .in = buffer(a, sizeof host), .out = buffer(a, sizeof host),
           .launch = 1, .a = -1, .b = 7};
  t4a_buffer *w = buffer_leaky(a, 64);
  upload(a, j.in, host, sizeof host);
  CK(t4a_retire_capture_begin(a->s->retire));
  assert_true(t4a_retire_is_capturing(a->s->retire));
  uint64_t queries = t4a_fake_calls(f->fx.fake, "cuStreamQuery");
  CK(run2(&j));
  t4a_raw_binding bw = {w, T4A_RAW_WRITE};
  assert_int_equal(t4a_raw_run(a->s->retire, &bw, 1, own_detail_fn, NULL), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuStreamQuery"), queries);
  void *graph = NULL;
  t4a_keepalive *items = NULL;
  size_t n = 0;
  CK(t4a_retire_capture_end(a->s->retire, &graph, &items, &n));
  assert_non_null(graph);
  assert_int_equal(n, 2); /* in and out; w went to quarantine */
  assert_int_equal(counters(a).quarantined, 1);
  t4a_ctx_scope s;
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(a->s->lane), NULL));
  CUgraphExec exec = NULL;
  assert_int_equal(f->t->cuGraphInstantiateWithFlags(&exec, (CUgraph)graph, 0), CUDA_SUCCESS);
  assert_int_equal(f->t->cuGraphLaunch(exec, t4a_lane_stream(a->s->lane)), CUDA_SUCCESS);
  t4a_ctx_scope_exit_quiet(&s);
  download(a, j.out, got, sizeof got);
  for (int i = 0; i < N; i++) assert_int_equal(got[i], -host[i] + 7);
  CK(t4a_ctx_scope_enter(&s, t4a_lane_holder(a->s->lane), NULL));
  assert_int_equal(f->t->cuGraphExecDestroy(exec), CUDA_SUCCESS);
  assert_int_equal(f->t->cuGraphDestroy((CUgraph)graph), CUDA_SUCCESS);
  t4a_ctx_scope_exit_quiet(&s);
  for (size_t i = 0; i < n; i++) items[i].release(items[i].object);
  free(items);
  t4a_buffer_release(j.in);
  t4a_buffer_release(j.out);
  t4a_buffer_release(w);
}

/* ---- lock order: nesting, several runtimes at once ---- */

/* Inside fn, a scope of a runtime whose lane comes after the outer one's is allowed; one whose
 * lane comes before is refused with REENTRY (it could deadlock against a thread holding that lane
 * and waiting for this one), as are a copy and an upload that would take it. */
typedef struct order_job {
  rt *inner;
  rt *copy_a, *copy_b;
  t4a_buffer *xa, *xb;
  t4a_status nested, copy, upload;
} order_job;
static t4a_status order_fn(t4a_raw_scope *scope, void *user) {
  (void)scope;
  order_job *j = user;
  int v = 7;
  j->nested = t4a_raw_run(j->inner->s->retire, NULL, 0, ok_fn, NULL);
  if (j->copy_a != NULL) {
    j->copy = t4a_xfer_copy(j->copy_b->s->xfer, j->xb, 0, j->copy_a->s->xfer, j->xa, 0, 64,
                            T4A_COPY_AUTO, NULL, NULL);
    j->upload = t4a_xfer_upload(j->copy_a->s->xfer, j->xa, 0, &v, sizeof v);
  }
  return T4A_OK;
}
static void test_nesting_out_of_lock_order_refused(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *b = &f->r[1], *c = &f->r[2];
  assert_true(t4a_lane_domain(a->s->lane) < t4a_lane_domain(b->s->lane));
  assert_true(t4a_lane_domain(b->s->lane) < t4a_lane_domain(c->s->lane));
  t4a_buffer *xa = buffer(a, 64), *xb = buffer(b, 64);
  /* In order: c inside a, and inside b (a copy a -> b and an upload to a from inside c's). */
  order_job j = {.inner = c};
  CK(t4a_raw_run(a->s->retire, NULL, 0, order_fn, &j));
  CK(j.nested);
  /* Out of order: a inside c; the copy between a and b and the upload to a inside c's scope. */
  uint64_t refused = counters(a).admissions_refused_reentry;
  j = (order_job){.inner = a, .copy_a = a, .copy_b = b, .xa = xa, .xb = xb};
  CK(t4a_raw_run(c->s->retire, NULL, 0, order_fn, &j));
  assert_int_equal(j.nested, T4A_REENTRY);
  assert_int_equal(j.copy, T4A_REENTRY);
  assert_int_equal(j.upload, T4A_REENTRY);
  assert_int_equal(counters(a).admissions_refused_reentry, refused + 3);
  /* a inside b: refused too. */
  j = (order_job){.inner = a};
  CK(t4a_raw_run(b->s->retire, NULL, 0, order_fn, &j));
  assert_int_equal(j.nested, T4A_REENTRY);
  /* The refused scopes never ran; nothing was poisoned, every lane is usable. */
  assert_int_equal(counters(a).raw_scopes, 1);
  assert_int_equal(counters(c).raw_scopes, 2);
  assert_int_equal(counters(a).quarantined + counters(b).quarantined + counters(c).quarantined, 0);
  CK(t4a_xfer_copy(b->s->xfer, xb, 0, a->s->xfer, xa, 0, 64, T4A_COPY_AUTO, NULL, NULL));
  t4a_buffer_release(xa);
  t4a_buffer_release(xb);
}

typedef struct order_detail_job {
  t4a_retire *inner;
  t4a_error e;
} order_detail_job;
static t4a_status refused_detail_fn(t4a_raw_scope *scope, void *user) {
  (void)scope;
  order_detail_job *j = user;
  t4a_status st = t4a_raw_run(j->inner, NULL, 0, ok_fn, NULL);
  t4a_error_last(&j->e);
  return st == T4A_REENTRY ? T4A_OK : T4A_INTERNAL;
}
/* The refusal's detail names the way out. */
static void test_out_of_order_detail(void **state) {
  fixture *f = *state;
  order_detail_job j = {.inner = f->r[0].s->retire};
  CK(t4a_raw_run(f->r[2].s->retire, NULL, 0, refused_detail_fn, &j));
  assert_int_equal(j.e.status, T4A_REENTRY);
  assert_non_null(strstr(j.e.message, "out of lock order"));
  assert_non_null(strstr(j.e.message, "t4a_raw_run_many"));
}

/* One scope over three runtimes (two devices), named out of lock order: every scope's stream and
 * bound buffers inside, targets[0]'s context current, each one's work lands; a nested scope
 * ordered before one of them is refused; the caller's context comes back. */
typedef struct many_job {
  fixture *f;
  t4a_buffer *buf[3];
  int ordinals[3];
  CUcontext current_inside;
  t4a_status nested, foreign_devptr;
  int fail;
} many_job;
static t4a_status many_fn(t4a_raw_scope *const *scopes, size_t count, void *user) {
  many_job *j = user;
  if (count != 3) return T4A_INTERNAL;
  (void)j->f->t->cuCtxGetCurrent(&j->current_inside);
  for (size_t i = 0; i < count; i++) {
    j->ordinals[i] = t4a_raw_device_ordinal(scopes[i]);
    uint64_t p = 0;
    t4a_status st = t4a_raw_devptr(scopes[i], j->buf[i], T4A_RAW_WRITE, &p);
    if (st != T4A_OK) return st;
    /* Each stream's work under its own context (fn may change the current one). */
    st = T4A_CU(j->f->fx.drv, cuCtxSetCurrent, (CUcontext)t4a_raw_context(scopes[i]));
    if (st != T4A_OK) return st;
    st = T4A_CU(j->f->fx.drv, cuMemsetD8Async, (CUdeviceptr)p, (unsigned char)(0x10 + i), 128,
                (CUstream)t4a_raw_stream(scopes[i]));
    if (st != T4A_OK) return st;
  }
  uint64_t q = 0;
  j->foreign_devptr = t4a_raw_devptr(scopes[0], j->buf[1], T4A_RAW_READ, &q);
  j->nested = t4a_raw_run(j->f->r[1].s->retire, NULL, 0, ok_fn, NULL); /* b: held */
  if (j->fail) return t4a_raw_fail(scopes[1], T4A_INTERNAL, "vendorGroupEnd", 3, NULL, "group");
  return T4A_OK;
}
static void test_run_many(void **state) {
  fixture *f = *state;
  rt *a = &f->r[0], *b = &f->r[1], *c = &f->r[2];
  for (int fail = 0; fail < 2; fail++) {
    many_job j = {.f = f, .fail = fail};
    rt *order[3] = {c, a, b}; /* not the lock order */
    t4a_raw_binding bind[3];
    t4a_raw_target t[3];
    for (int i = 0; i < 3; i++) {
      j.buf[i] = fail ? buffer_leaky(order[i], 128) : buffer(order[i], 128);
      bind[i] = (t4a_raw_binding){j.buf[i], T4A_RAW_WRITE};
      t[i] = (t4a_raw_target){order[i]->s->retire, &bind[i], 1};
    }
    assert_int_equal(f->t->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    t4a_status st = t4a_raw_run_many(t, 3, many_fn, &j);
    assert_int_equal(st, fail ? T4A_INTERNAL : T4A_OK);
    if (fail) {
      t4a_error e;
      t4a_error_last(&e);
      assert_string_equal(e.entry, "vendorGroupEnd");
    }
    assert_ptr_equal(current(f), NULL);
    assert_ptr_equal(j.current_inside, ctx_of(c));
    assert_int_equal(j.ordinals[0], 1);
    assert_int_equal(j.ordinals[1], 0);
    assert_int_equal(j.ordinals[2], 0);
    assert_int_equal(j.foreign_devptr, T4A_INVALID_ARGUMENT);
    assert_int_equal(j.nested, T4A_REENTRY);
    if (!fail) {
      for (int i = 0; i < 3; i++) {
        unsigned char got[128];
        download(order[i], j.buf[i], got, sizeof got);
        for (int k = 0; k < 128; k++) assert_int_equal(got[k], 0x10 + i);
      }
    }
    for (int i = 0; i < 3; i++) t4a_buffer_release(j.buf[i]);
  }
  for (int i = 0; i < 3; i++) {
    assert_int_equal(counters(&f->r[i]).raw_scopes, 2);
    assert_int_equal(counters(&f->r[i]).raw_scopes_poisoned, 1);
    assert_int_equal(counters(&f->r[i]).quarantined, 1);
    CK(t4a_lane_check(f->r[i].s->lane));
  }
  /* Argument checks: nothing taken. */
  t4a_raw_target dup[2] = {{a->s->retire, NULL, 0}, {a->s->retire, NULL, 0}};
  many_job j = {.f = f};
  assert_int_equal(t4a_raw_run_many(dup, 2, many_fn, &j), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run_many(NULL, 1, many_fn, &j), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run_many(dup, 0, many_fn, &j), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_raw_run_many(dup, 1, NULL, &j), T4A_INVALID_ARGUMENT);
  t4a_buffer *x = buffer(c, 64);
  t4a_raw_binding foreign = {x, T4A_RAW_READ};
  t4a_raw_target ft[2] = {{b->s->retire, NULL, 0}, {a->s->retire, &foreign, 1}};
  assert_int_equal(t4a_raw_run_many(ft, 2, many_fn, &j), T4A_FOREIGN_HANDLE);
  ft[1].retire = NULL;
  assert_int_equal(t4a_raw_run_many(ft, 2, many_fn, &j), T4A_INVALID_ARGUMENT);
  t4a_buffer_release(x);
  assert_int_equal(counters(a).raw_scopes, 2);
}

/* Opposite nestings, scopes over both runtimes and copies both ways, on several threads at once,
 * many times: with the lock order nothing waits forever (a wrong-order nesting is REENTRY at
 * once). A watchdog fails the test instead of letting a deadlock hang it. */
#define STRESS_ITERS 3000
typedef struct stress {
  fixture *f;
  rt *a, *b;
  t4a_buffer *xa, *xb;
  _Atomic int bad;
  _Atomic long refused;
} stress;
typedef struct stress_arg {
  stress *s;
  int kind;
} stress_arg;
static t4a_status stress_inner(t4a_raw_scope *scope, void *user) {
  (void)scope;
  (void)user;
  return T4A_OK;
}
/* kind 0: raw(b){raw(a)} (refused inside); kind 1: raw(a){raw(b)}. */
static t4a_status stress_outer(t4a_raw_scope *scope, void *user) {
  (void)scope;
  stress_arg *g = user;
  stress *s = g->s;
  rt *inner = g->kind == 0 ? s->a : s->b;
  t4a_status st = t4a_raw_run(inner->s->retire, NULL, 0, stress_inner, NULL);
  /* Only the refusal is right for kind 0, but the loop goes on either way (checked at the end),
   * so that without the lock order the threads meet the deadlock instead of stopping early. */
  if (st == T4A_REENTRY && g->kind == 0) {
    atomic_fetch_add(&s->refused, 1);
  } else if (st != T4A_OK) {
    atomic_store(&s->bad, 1);
  }
  return T4A_OK;
}
static t4a_status stress_many(t4a_raw_scope *const *scopes, size_t count, void *user) {
  (void)scopes;
  (void)count;
  (void)user;
  return T4A_OK;
}
static void *stress_main(void *p) {
  stress_arg *g = p;
  stress *s = g->s;
  for (int i = 0; i < STRESS_ITERS && !atomic_load(&s->bad); i++) {
    t4a_status st = T4A_OK;
    switch (g->kind) {
      case 0:
      case 1: {
        rt *outer = g->kind == 0 ? s->b : s->a;
        t4a_raw_binding bind = {g->kind == 0 ? s->xb : s->xa, T4A_RAW_READ};
        st = t4a_raw_run(outer->s->retire, &bind, 1, stress_outer, g);
        break;
      }
      case 2:
        st = t4a_xfer_copy(s->b->s->xfer, s->xb, 0, s->a->s->xfer, s->xa, 64, 64, T4A_COPY_AUTO,
                           NULL, NULL);
        break;
      case 3:
        st = t4a_xfer_copy(s->a->s->xfer, s->xa, 0, s->b->s->xfer, s->xb, 64, 64, T4A_COPY_AUTO,
                           NULL, NULL);
        break;
      default: {
        t4a_raw_target t[2] = {{s->b->s->retire, NULL, 0}, {s->a->s->retire, NULL, 0}};
        st = t4a_raw_run_many(t, 2, stress_many, NULL);
        break;
      }
    }
    if (st != T4A_OK) {
      fprintf(stderr, "# stress kind %d: %s\n", g->kind, t4a_status_name(st));
      atomic_store(&s->bad, 1);
    }
  }
  return NULL;
}
static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "# lock-order stress: no progress in time (a deadlock)\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}
static void test_opposite_nestings_and_copies_never_deadlock(void **state) {
  fixture *f = *state;
  stress s = {.f = f, .a = &f->r[0], .b = &f->r[1]};
  s.xa = buffer(s.a, 256);
  s.xb = buffer(s.b, 256);
  signal(SIGALRM, on_watchdog);
  alarm(45); /* generous under TSan on a loaded machine (a run takes well under 1 s); a deadlock
              * never finishes. Under the size-small test timeout (60 s). */
  enum { THREADS = 6 };
  stress_arg args[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (stress_arg){&s, i % 5};
    assert_int_equal(pthread_create(&th[i], NULL, stress_main, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  assert_int_equal(atomic_load(&s.bad), 0);
  assert_int_equal(atomic_load(&s.refused), 2 * STRESS_ITERS); /* kinds 0: threads 0 and 5 */
  CK(t4a_retire_wait(s.a->s->retire));
  CK(t4a_retire_wait(s.b->s->retire));
  t4a_buffer_release(s.xa);
  t4a_buffer_release(s.xb);
}

/* ---- failure sweeps ---- */

typedef struct sweep_ctx {
  fixture *f;
  rt *r;
} sweep_ctx;

typedef struct op_job {
  fixture *f;
  rt *r;
  t4a_buffer *in, *out, *both;
} op_job;

/* A vendor-like callback: a fill and a kernel on the scope's stream. */
static t4a_status op_fn(t4a_raw_scope *scope, void *user) {
  op_job *j = user;
  uint64_t in = 0, out = 0, both = 0;
  t4a_status st = t4a_raw_devptr(scope, j->in, T4A_RAW_READ, &in);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->out, T4A_RAW_WRITE, &out);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->both, T4A_RAW_READ_WRITE, &both);
  if (st != T4A_OK) return st;
  CUstream s = t4a_raw_stream(scope);
  st = T4A_CU(j->f->fx.drv, cuMemsetD8Async, (CUdeviceptr)both, 1, 64, s);
  if (st != T4A_OK) return st;
  CUdeviceptr pin = (CUdeviceptr)in, pout = (CUdeviceptr)out;
  int n = 16, a = 2, b = 3;
  void *args[] = {&pin, &pout, &n, &a, &b};
  return T4A_CU(j->f->fx.drv, cuLaunchKernel, j->r->axpb, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

/* On a fresh retirement state over the fixture's lane and pool: a scope with two bindings (on
 * the stack) and one with 20 (duplicates joined; heap), a wait, and the teardown (quarantined
 * buffers are counted as leaked by it). */
static t4a_status op_raw(void *user) {
  sweep_ctx *s = user;
  t4a_retire *retire = NULL;
  op_job j = {s->f, s->r, NULL, NULL, NULL};
  t4a_status st = t4a_retire_create(s->r->s->lane, NULL, &retire);
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &j.in);
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &j.out);
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &j.both);
  if (st == T4A_OK) {
    t4a_raw_binding b[3] = {{j.out, T4A_RAW_WRITE}, {j.in, T4A_RAW_READ},
                            {j.both, T4A_RAW_READ_WRITE}};
    st = t4a_raw_run(retire, b, 3, op_fn, &j);
  }
  if (st == T4A_OK) {
    t4a_raw_binding b[20];
    for (int i = 0; i < 20; i++) {
      t4a_buffer *pick[3] = {j.in, j.out, j.both};
      int acc[3] = {T4A_RAW_READ, T4A_RAW_WRITE, i % 2 ? T4A_RAW_READ : T4A_RAW_WRITE};
      b[i] = (t4a_raw_binding){pick[i % 3], acc[i % 3]};
    }
    st = t4a_raw_run(retire, b, 20, op_fn, &j);
  }
  if (st == T4A_OK) st = t4a_retire_wait(retire);
  t4a_buffer_release(j.in);
  t4a_buffer_release(j.out);
  t4a_buffer_release(j.both);
  t4a_status d = t4a_retire_destroy(retire);
  return st != T4A_OK ? st : d;
}

/* On fresh retirement states — three over runtime 0's lane, two over runtime 2's (device 1), so
 * the scopes' records go to the heap — one scope over all five, named out of lock order: a fill
 * on each stream, a kernel on targets[0]'s (device 0, current inside), 20 bindings (heap) on one;
 * a wait on each, and the teardowns. */
typedef struct many_op {
  op_job j;
  t4a_buffer *far; /* runtime 2's */
} many_op;
static t4a_status op_many_fn(t4a_raw_scope *const *scopes, size_t count, void *user) {
  many_op *m = user;
  t4a_status st = count == 5 ? op_fn(scopes[0], &m->j) : T4A_INTERNAL;
  /* The far scope's fill runs under its own context, made current here (restored after). */
  uint64_t p = 0;
  if (st == T4A_OK) st = t4a_raw_devptr(scopes[1], m->far, T4A_RAW_WRITE, &p);
  if (st == T4A_OK) {
    st = T4A_CU(m->j.f->fx.drv, cuCtxSetCurrent, (CUcontext)t4a_raw_context(scopes[1]));
  }
  if (st == T4A_OK) {
    st = T4A_CU(m->j.f->fx.drv, cuMemsetD8Async, (CUdeviceptr)p, 2, 64,
                (CUstream)t4a_raw_stream(scopes[1]));
  }
  return st;
}
static long sweep_unaccounted(void *user);
static t4a_status op_raw_many(void *user) {
  sweep_ctx *s = user;
  enum { M = 5 };
  rt *on[M] = {s->r, &s->f->r[2], s->r, &s->f->r[2], s->r};
  t4a_retire *retire[M] = {NULL};
  many_op m = {{s->f, s->r, NULL, NULL, NULL}, NULL};
  op_job *jp = &m.j;
  t4a_status st = T4A_OK;
  for (int i = 0; i < M && st == T4A_OK; i++) {
    st = t4a_retire_create(on[i]->s->lane, NULL, &retire[i]);
  }
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &jp->in);
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &jp->out);
  if (st == T4A_OK) st = t4a_buffer_create(s->r->s->pool, 64, 0, 0, &jp->both);
  if (st == T4A_OK) st = t4a_buffer_create(s->f->r[2].s->pool, 64, 0, 0, &m.far);
  if (st == T4A_OK) {
    t4a_raw_binding b0[3] = {{jp->out, T4A_RAW_WRITE}, {jp->in, T4A_RAW_READ},
                             {jp->both, T4A_RAW_READ_WRITE}};
    t4a_raw_binding b1[20];
    for (int i = 0; i < 20; i++) {
      b1[i] = (t4a_raw_binding){m.far, i % 2 ? T4A_RAW_READ : T4A_RAW_WRITE};
    }
    t4a_raw_binding b2 = {jp->in, T4A_RAW_READ};
    t4a_raw_target t[M] = {{retire[4], b0, 3}, {retire[3], b1, 20}, {retire[2], &b2, 1},
                           {retire[1], NULL, 0}, {retire[0], NULL, 0}};
    st = t4a_raw_run_many(t, M, op_many_fn, &m);
  }
  for (int i = 0; i < M && st == T4A_OK; i++) st = t4a_retire_wait(retire[i]);
  t4a_buffer_release(jp->in);
  t4a_buffer_release(jp->out);
  t4a_buffer_release(jp->both);
  t4a_buffer_release(m.far);
  for (int i = M; i-- > 0;) {
    t4a_status d = t4a_retire_destroy(retire[i]);
    if (st == T4A_OK) st = d;
  }
  return st;
}

static void test_failure_sweep_many(void **state) {
  fixture *f = *state;
  sweep_ctx c = {f, &f->r[0]};
  t4a_sweep s = {.name = "raw_many", .fake = f->fx.fake, .op = op_raw_many,
                 .unaccounted = sweep_unaccounted, .user = &c, .max_steps = 5000};
  f->fx.baseline = unaccounted(f);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  /* The callback's enqueueing calls (two fills, one on each device, and a kernel) fail after
   * enqueueing their work: typed, every scope's writable bindings quarantined. */
  static const char *const enqueueing[] = {"cuMemsetD8Async", "cuLaunchKernel"};
  static const int steps[] = {2, 1};
  s.after_enqueue = 1;
  for (size_t i = 0; i < 2; i++) {
    s.entry = enqueueing[i];
    assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= steps[i]);
  }
  s.entry = NULL;
  s.after_enqueue = 0;
  static const t4a_status host[] = {T4A_HOST_OUT_OF_MEMORY, T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, host, 2) > 0);
  t4a_counter_values v = counters(&f->r[2]);
  assert_true(v.raw_scopes_poisoned > 0);
  assert_true(v.quarantined > 0);
  assert_int_equal(t4a_fake_ordering_violations(f->fx.fake), 0);
}

static long sweep_unaccounted(void *user) { return unaccounted(((sweep_ctx *)user)->f); }

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  sweep_ctx c = {f, &f->r[0]};
  t4a_sweep s = {.name = "raw", .fake = f->fx.fake, .op = op_raw,
                 .unaccounted = sweep_unaccounted, .user = &c};
  f->fx.baseline = unaccounted(f);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  /* The callback's enqueueing calls fail after enqueueing their work: typed, the writable
   * bindings quarantined, nothing leaked uncounted. */
  static const char *const enqueueing[] = {"cuMemsetD8Async", "cuLaunchKernel"};
  s.after_enqueue = 1;
  for (size_t i = 0; i < 2; i++) {
    s.entry = enqueueing[i];
    assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 2);
  }
  s.entry = NULL;
  s.after_enqueue = 0;
  static const t4a_status host[] = {T4A_HOST_OUT_OF_MEMORY, T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, host, 2) > 0);
  t4a_counter_values v = counters(&f->r[0]);
  assert_true(v.raw_scopes_poisoned > 0);
  assert_true(v.quarantined > 0);
  assert_int_equal(t4a_fake_ordering_violations(f->fx.fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_devptr_bound_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unbound_detail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_native_handles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_argument_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_in_stream_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_buffers_kept_until_work_ran, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_quarantines_writes, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_details, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_reentry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_context_restored, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_nested_scope_of_another_runtime, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_handle_invalid_after_return, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sticky_error_in_callback, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_raw_scope_in_capture, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_nesting_out_of_lock_order_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_order_detail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_many, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_opposite_nestings_and_copies_never_deadlock, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep_many, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
