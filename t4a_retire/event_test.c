/* User events and host functions (t4a/event.h) on the fake driver: record, query, host wait,
 * stream waits across lanes, elapsed time and its refusals, records and waits captured as event
 * nodes and replayed; host functions in
 * stream order on another thread, keepalives held until they ran, the re-entry rule (a callback
 * calling back into t4a gets REENTRY, never a deadlock), a host node replayed; failure sweeps. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/event.h"
#include "t4a/retire.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

typedef t4a_fixture fixture; /* f->lane, f->retire on device 0; stack[1] on device 1 */

static CUdeviceptr g_mem; /* 4 KiB on device 0 */

typedef struct object {
  atomic_int refs;
  atomic_int releases;
} object;
static void object_release(void *p) {
  object *o = p;
  atomic_fetch_sub(&o->refs, 1);
  atomic_fetch_add(&o->releases, 1);
}
static t4a_keepalive keep(object *o) {
  atomic_fetch_add(&o->refs, 1);
  return (t4a_keepalive){o, object_release, 0};
}

static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* work runs only on sync or explicit progress */
  o.stacks = 2;
  o.ordinals[1] = 1;
  o.build = T4A_FIXTURE_RETIRE;
  if (t4a_fixture_setup(state, &o) != 0) return -1;
  fixture *f = *state;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) != T4A_OK) return -1;
  if (f->drv->t.cuMemAlloc(&g_mem, 4096) != CUDA_SUCCESS) return -1;
  (void)t4a_ctx_scope_exit(&s);
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
    (void)f->drv->t.cuMemFree(g_mem);
    (void)t4a_ctx_scope_exit(&s);
  }
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT | T4A_FIXTURE_CHECK_FOREIGN_EVENTS);
}

/* After the sweeps: what is alive is what t4a counted as leaked (each step checked events
 * exactly); a step whose drain failed abandoned the lane, whose stream is then leaked (counted
 * in streams_leaked). */
static int teardown_sweep(void **state) {
  fixture *f = *state;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
    (void)f->drv->t.cuMemFree(g_mem);
    (void)t4a_ctx_scope_exit(&s);
  }
  t4a_driver *drv = f->drv;
  t4a_driver_retain(drv); /* its counters are read after the lanes went */
  t4a_fixture_release(f);
  t4a_counter_values v;
  t4a_driver_stats(drv, &v);
  t4a_driver_release(drv);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  if ((uint64_t)live.streams > v.streams_leaked) {
    print_error("%ld streams alive, %llu counted leaked\n", (long)live.streams,
                (unsigned long long)v.streams_leaked);
  }
  int ok = live.device_allocs == 0 && live.pools == 0 && (uint64_t)live.streams <= v.streams_leaked;
  (void)t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_ORDERING);
  return ok ? 0 : -1;
}

/* Some work on r's stream: a fill of g_mem (an admission). */
static t4a_status work(fixture *f, t4a_retire *r, unsigned char v) {
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(r, 0, &adm);
  if (st != T4A_OK) return st;
  st = T4A_CU(f->drv, cuMemsetD8Async, g_mem, v, 4096, t4a_lane_stream(t4a_retire_lane(r)));
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  t4a_admission_commit(&adm);
  return T4A_OK;
}

static uint64_t counter(t4a_lane *l, size_t offset) {
  t4a_counter_values v;
  t4a_lane_stats(l, &v);
  return *(const uint64_t *)((const char *)&v + offset);
}
#define COUNTER(lane, name) counter((lane), offsetof(t4a_counter_values, name))

static void test_record_query_synchronize(void **state) {
  fixture *f = *state;
  t4a_event *e = NULL;
  assert_int_equal(t4a_event_create(f->lane, NULL, &e), T4A_OK);
  assert_false(t4a_event_is_timing(e));
  assert_int_equal(t4a_event_query(e), T4A_OK); /* never recorded: complete, as the driver says */
  assert_int_equal(work(f, f->retire, 1), T4A_OK);
  assert_int_equal(t4a_event_record(e, f->retire), T4A_OK);
  assert_int_equal(t4a_event_query(e), T4A_NOT_READY);
  uint64_t waits = COUNTER(f->lane, host_waits);
  assert_int_equal(t4a_event_synchronize(e), T4A_OK);
  assert_int_equal(COUNTER(f->lane, host_waits), waits + 1); /* a host wait, counted */
  assert_int_equal(t4a_event_query(e), T4A_OK);
  assert_int_equal(*(unsigned char *)t4a_fake_host_view(f->fake, g_mem, 1), 1);
  assert_int_equal(COUNTER(f->lane, user_events_recorded), 1);
  t4a_event_release(e);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
}

static void test_elapsed_time(void **state) {
  fixture *f = *state;
  t4a_event_options o = T4A_EVENT_OPTIONS_INIT;
  o.flags = T4A_EVENT_TIMING;
  t4a_event *a = NULL, *b = NULL, *plain = NULL;
  assert_int_equal(t4a_event_create(f->lane, &o, &a), T4A_OK);
  assert_int_equal(t4a_event_create(f->lane, &o, &b), T4A_OK);
  assert_int_equal(t4a_event_create(f->lane, NULL, &plain), T4A_OK);
  float ms = -1;
  /* Never recorded. */
  assert_int_equal(t4a_event_elapsed_ms(a, b, &ms), T4A_INVALID_ARGUMENT);
  assert_true(ms == 0);
  assert_int_equal(t4a_event_record(a, f->retire), T4A_OK);
  for (int i = 0; i < 5; i++) assert_int_equal(work(f, f->retire, (unsigned char)i), T4A_OK);
  assert_int_equal(t4a_event_record(b, f->retire), T4A_OK);
  assert_int_equal(t4a_event_record(plain, f->retire), T4A_OK);
  /* Not both completed: NOT_READY, with no driver elapsed-time call. */
  uint64_t calls = t4a_fake_calls(f->fake, "cuEventElapsedTime");
  assert_int_equal(t4a_event_elapsed_ms(a, b, &ms), T4A_NOT_READY);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "not both completed"));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventElapsedTime"), calls);
  /* A non-timing event: refused, whichever side. */
  assert_int_equal(t4a_event_elapsed_ms(a, plain, &ms), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_event_elapsed_ms(plain, b, &ms), T4A_INVALID_ARGUMENT);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "timing"));
  assert_int_equal(t4a_event_synchronize(b), T4A_OK);
  assert_int_equal(t4a_event_elapsed_ms(a, b, &ms), T4A_OK);
  /* The fake's clock advances 1 µs per operation run: the end record runs 6 operations after
   * the start record (5 fills and itself). */
  assert_true(ms > 0.0059f && ms < 0.0061f);
  assert_int_equal(t4a_event_elapsed_ms(b, a, &ms), T4A_OK);
  assert_true(ms < 0);
  assert_int_equal(t4a_event_elapsed_ms(NULL, a, &ms), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_event_elapsed_ms(a, b, NULL), T4A_INVALID_ARGUMENT);
  t4a_event_release(a);
  t4a_event_release(b);
  t4a_event_release(plain);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
}

static void test_wait_orders_two_lanes_without_host_wait(void **state) {
  fixture *f = *state;
  /* A second lane on device 0 (another stream of the device). */
  t4a_lane *l2 = NULL;
  t4a_retire *r2 = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &l2), T4A_OK);
  assert_int_equal(t4a_retire_create(l2, NULL, &r2), T4A_OK);
  t4a_event *e = NULL;
  assert_int_equal(t4a_event_create(f->lane, NULL, &e), T4A_OK);
  assert_int_equal(work(f, f->retire, 7), T4A_OK);
  assert_int_equal(t4a_event_record(e, f->retire), T4A_OK);
  uint64_t waits = COUNTER(f->lane, host_waits) + COUNTER(l2, host_waits);
  assert_int_equal(t4a_event_wait(r2, e), T4A_OK);
  assert_int_equal(COUNTER(f->lane, host_waits) + COUNTER(l2, host_waits), waits);
  assert_int_equal(COUNTER(l2, user_event_waits), 1);
  assert_int_equal(t4a_event_query(e), T4A_NOT_READY);
  /* Draining only the second stream runs the first up to the event: the wait was enqueued. */
  assert_int_equal(t4a_lane_synchronize(l2), T4A_OK);
  assert_int_equal(t4a_event_query(e), T4A_OK);
  assert_int_equal(*(unsigned char *)t4a_fake_host_view(f->fake, g_mem, 1), 7);
  /* An event of device 1's context: refused, nothing enqueued. */
  t4a_event *e1 = NULL;
  assert_int_equal(t4a_event_create(f->stack[1].lane, NULL, &e1), T4A_OK);
  uint64_t before = t4a_fake_calls(f->fake, "cuStreamWaitEvent");
  uint64_t adm = COUNTER(f->lane, admissions);
  assert_int_equal(t4a_event_wait(f->retire, e1), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_event_record(e1, f->retire), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamWaitEvent"), before);
  assert_int_equal(COUNTER(f->lane, admissions), adm);
  assert_int_equal(t4a_event_wait(NULL, e1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_event_record(NULL, f->retire), T4A_INVALID_ARGUMENT);
  t4a_event_options bad = {2};
  t4a_event *x = (t4a_event *)1;
  assert_int_equal(t4a_event_create(f->lane, &bad, &x), T4A_INVALID_ARGUMENT);
  assert_null(x);
  t4a_event_release(e1);
  t4a_event_release(e);
  assert_int_equal(t4a_retire_destroy(r2), T4A_OK);
  t4a_lane_release(l2);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
}

/* A capture's records and waits are external event nodes: each replay records the events (timed
 * around the captured work) and waits for another lane's latest record; the graph keeps them. */
static void test_capture_records_and_waits_as_nodes(void **state) {
  fixture *f = *state;
  t4a_lane *l2 = NULL;
  t4a_retire *r2 = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &l2), T4A_OK);
  assert_int_equal(t4a_retire_create(l2, NULL, &r2), T4A_OK);
  t4a_event_options timing = {T4A_EVENT_TIMING};
  t4a_event *a = NULL, *b = NULL, *other = NULL;
  assert_int_equal(t4a_event_create(f->lane, &timing, &a), T4A_OK);
  assert_int_equal(t4a_event_create(f->lane, &timing, &b), T4A_OK);
  assert_int_equal(t4a_event_create(l2, NULL, &other), T4A_OK);
  assert_int_equal(t4a_retire_capture_begin(f->retire), T4A_OK);
  assert_int_equal(t4a_event_wait(f->retire, other), T4A_OK); /* a wait node */
  assert_int_equal(t4a_event_record(a, f->retire), T4A_OK);   /* record nodes */
  assert_int_equal(work(f, f->retire, 0x42), T4A_OK);
  assert_int_equal(t4a_event_record(b, f->retire), T4A_OK);
  void *g = NULL;
  t4a_keepalive *items = NULL;
  size_t n = 0;
  assert_int_equal(t4a_retire_capture_end(f->retire, &g, &items, &n), T4A_OK);
  assert_int_equal(n, 3); /* the graph keeps the three events */
  t4a_event_release(a); /* the caller keeps its references to a and b; drops other's */
  t4a_event_retain(a);
  t4a_event_release(other);
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  CUgraphExec ex = NULL;
  assert_int_equal(f->drv->t.cuGraphInstantiateWithFlags(&ex, (CUgraph)g, 0), CUDA_SUCCESS);
  (void)t4a_ctx_scope_exit(&s);
  for (int replay = 0; replay < 2; replay++) {
    /* The other lane writes 7 and records `other` (through the graph's reference). */
    assert_int_equal(work(f, r2, 7), T4A_OK);
    assert_int_equal(t4a_event_record((t4a_event *)items[0].object, r2), T4A_OK);
    assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
    assert_int_equal(f->drv->t.cuGraphLaunch(ex, t4a_lane_stream(f->lane)), CUDA_SUCCESS);
    (void)t4a_ctx_scope_exit(&s);
    assert_int_equal(t4a_event_query(b), T4A_NOT_READY);
    /* Draining the capturing lane runs the other lane first (the wait node), then the fill. */
    assert_int_equal(t4a_event_synchronize(b), T4A_OK);
    assert_int_equal(*(unsigned char *)t4a_fake_host_view(f->fake, g_mem, 1), 0x42);
    float ms = 0;
    assert_int_equal(t4a_event_elapsed_ms(a, b, &ms), T4A_OK);
    assert_true(ms > 0.0019f && ms < 0.0021f); /* the fill and the end record */
  }
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecordWithFlags"), 2 + 2); /* nodes, then other's */
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  assert_int_equal(f->drv->t.cuGraphExecDestroy(ex), CUDA_SUCCESS);
  assert_int_equal(f->drv->t.cuGraphDestroy((CUgraph)g), CUDA_SUCCESS);
  (void)t4a_ctx_scope_exit(&s);
  for (size_t i = 0; i < n; i++) items[i].release(items[i].object);
  free(items);
  t4a_event_release(a);
  t4a_event_release(b);
  assert_int_equal(t4a_retire_destroy(r2), T4A_OK);
  t4a_lane_release(l2);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
}

/* ---- host functions ---- */

typedef struct call_log {
  atomic_int runs;
  pthread_t thread;
  int order;            /* the fill value seen when it ran */
  object *watched;      /* its keepalive: must still be held while it runs */
  int held_while_running;
} call_log;

static void log_call(void *p) {
  call_log *c = p;
  c->thread = pthread_self();
  c->order = g_mem != 0 ? 0 : -1;
  if (c->watched != NULL) c->held_while_running = atomic_load(&c->watched->refs) > 0;
  atomic_fetch_add(&c->runs, 1);
}

static void test_host_func_in_stream_order_keepalives_until_ran(void **state) {
  fixture *f = *state;
  object o = {0};
  call_log c = {0};
  c.watched = &o;
  t4a_keepalive k = keep(&o);
  assert_int_equal(work(f, f->retire, 3), T4A_OK);
  assert_int_equal(t4a_host_func_launch(f->retire, log_call, &c, &k, 1), T4A_OK);
  assert_int_equal(COUNTER(f->lane, host_funcs), 1);
  assert_int_equal(atomic_load(&c.runs), 0); /* queued, not run: the fake runs on progress */
  assert_int_equal(t4a_retire_poll(f->retire), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 1); /* held: the function has not run */
  t4a_fake_progress(f->fake);
  assert_int_equal(atomic_load(&c.runs), 1);
  assert_false(pthread_equal(c.thread, pthread_self())); /* on another thread */
  assert_true(c.held_while_running);
  assert_int_equal(t4a_fake_host_fns_run(f->fake), 1);
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 0); /* released once it ran */
  assert_int_equal(atomic_load(&o.releases), 1);
  /* Refusals: keepalives are taken (released at once) when nothing was enqueued. */
  object p = {0};
  t4a_keepalive kp = keep(&p);
  assert_int_equal(t4a_host_func_launch(f->retire, NULL, NULL, &kp, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&p.refs), 0);
  t4a_keepalive nofn = {&p, NULL, 0};
  assert_int_equal(t4a_host_func_launch(f->retire, log_call, &c, &nofn, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_host_func_launch(f->retire, log_call, &c, NULL, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(COUNTER(f->lane, host_funcs), 1);
}

/* What a callback that calls back into t4a gets. */
typedef struct reentry {
  t4a_retire *r;
  t4a_lane *lane;
  t4a_event *e;
  t4a_status poll, wait, begin, sync, query, esync, record, launch, ctx;
  uint64_t host_waits_inside;
  atomic_int ran;
} reentry;

static void reenter(void *p) {
  reentry *x = p;
  x->poll = t4a_retire_poll(x->r);
  x->wait = t4a_retire_wait(x->r);
  t4a_admission adm;
  x->begin = t4a_admission_begin(x->r, 0, &adm);
  x->sync = t4a_lane_synchronize(x->lane);
  x->query = t4a_event_query(x->e);
  x->esync = t4a_event_synchronize(x->e);
  x->record = t4a_event_record(x->e, x->r);
  x->launch = t4a_host_func_launch(x->r, reenter, x, NULL, 0);
  t4a_ctx_scope s;
  x->ctx = t4a_ctx_scope_enter(&s, t4a_lane_holder(x->lane), NULL);
  atomic_fetch_add(&x->ran, 1);
}

static void test_host_func_reentry_is_typed_never_a_deadlock(void **state) {
  fixture *f = *state;
  reentry x = {0};
  x.r = f->retire;
  x.lane = f->lane;
  assert_int_equal(t4a_event_create(f->lane, NULL, &x.e), T4A_OK);
  assert_int_equal(t4a_host_func_launch(f->retire, reenter, &x, NULL, 0), T4A_OK);
  uint64_t refused = COUNTER(f->lane, admissions_refused_reentry);
  uint64_t driver_calls = t4a_fake_host_fn_driver_calls();
  uint64_t waits = COUNTER(f->lane, host_waits);
  /* The wait holds the retire's lock while the stream runs the callback on another thread: a
   * callback that waited for that lock would never return. */
  assert_int_equal(t4a_retire_wait(f->retire), T4A_OK);
  assert_int_equal(atomic_load(&x.ran), 1);
  assert_int_equal(x.poll, T4A_REENTRY);
  assert_int_equal(x.wait, T4A_REENTRY);
  assert_int_equal(x.begin, T4A_REENTRY);
  assert_int_equal(x.sync, T4A_REENTRY);
  assert_int_equal(x.query, T4A_REENTRY);
  assert_int_equal(x.esync, T4A_REENTRY);
  assert_int_equal(x.record, T4A_REENTRY);
  assert_int_equal(x.launch, T4A_REENTRY);
  assert_int_equal(x.ctx, T4A_REENTRY);
  /* No driver call was made from the callback, no host wait counted, and every refused lane
   * operation is counted. */
  assert_int_equal(t4a_fake_host_fn_driver_calls(), driver_calls);
  assert_int_equal(COUNTER(f->lane, host_waits), waits + 1); /* the test's own wait */
  assert_true(COUNTER(f->lane, admissions_refused_reentry) >= refused + 5);
  /* After the callback, everything works again on this thread and the callback's. */
  assert_int_equal(t4a_event_record(x.e, f->retire), T4A_OK);
  assert_int_equal(t4a_event_synchronize(x.e), T4A_OK);
  assert_false(t4a_in_host_fn_());
  t4a_event_release(x.e);
}

static void test_host_func_captured_runs_at_each_replay(void **state) {
  fixture *f = *state;
  object o = {0};
  call_log c = {0};
  assert_int_equal(t4a_retire_capture_begin(f->retire), T4A_OK);
  t4a_keepalive k = keep(&o);
  assert_int_equal(t4a_host_func_launch(f->retire, log_call, &c, &k, 1), T4A_OK);
  void *g = NULL;
  t4a_keepalive *items = NULL;
  size_t n = 0;
  assert_int_equal(t4a_retire_capture_end(f->retire, &g, &items, &n), T4A_OK);
  assert_int_equal(n, 2); /* the call's record and the caller's keepalive go with the graph */
  assert_int_equal(atomic_load(&c.runs), 0);
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  CUgraphExec ex = NULL;
  assert_int_equal(f->drv->t.cuGraphInstantiateWithFlags(&ex, (CUgraph)g, 0), CUDA_SUCCESS);
  CUstream st = t4a_lane_stream(f->lane);
  assert_int_equal(f->drv->t.cuGraphLaunch(ex, st), CUDA_SUCCESS);
  assert_int_equal(f->drv->t.cuGraphLaunch(ex, st), CUDA_SUCCESS);
  assert_int_equal(f->drv->t.cuStreamSynchronize(st), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&c.runs), 2);
  assert_int_equal(f->drv->t.cuGraphExecDestroy(ex), CUDA_SUCCESS);
  assert_int_equal(f->drv->t.cuGraphDestroy((CUgraph)g), CUDA_SUCCESS);
  (void)t4a_ctx_scope_exit(&s);
  assert_int_equal(atomic_load(&o.refs), 1); /* the graph's to release */
  for (size_t i = 0; i < n; i++) items[i].release(items[i].object);
  free(items);
  assert_int_equal(atomic_load(&o.refs), 0);
}

/* ---- failure sweeps ---- */

static void nothing(void *p) { (void)p; }

__attribute__((noinline)) static t4a_status op_everything(fixture *f) {
  t4a_counter_values before, after;
  t4a_lane_stats(f->lane, &before);
  object o = {0};
  t4a_retire *r = NULL; /* the step's own: its teardown counts what it had to leak */
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st != T4A_OK) return st;
  t4a_event_options timing = {T4A_EVENT_TIMING};
  t4a_event *a = NULL, *b = NULL;
  st = t4a_event_create(f->lane, &timing, &a);
  if (st == T4A_OK) st = t4a_event_create(f->lane, &timing, &b);
  if (st == T4A_OK) st = t4a_event_record(a, r);
  if (st == T4A_OK) st = work(f, r, 9);
  if (st == T4A_OK) {
    t4a_keepalive k = keep(&o);
    st = t4a_host_func_launch(r, nothing, NULL, &k, 1);
  }
  if (st == T4A_OK) st = t4a_event_record(b, r);
  if (st == T4A_OK) st = t4a_event_wait(f->retire, b); /* the fixture's retire, same lane */
  if (st == T4A_OK) {
    st = t4a_event_query(b);
    if (st == T4A_NOT_READY) st = T4A_OK;
  }
  if (st == T4A_OK) st = t4a_event_synchronize(b);
  float ms = 0;
  if (st == T4A_OK) st = t4a_event_elapsed_ms(a, b, &ms);
  if (st == T4A_OK && !(ms > 0)) fail_msg("elapsed %f ms", (double)ms);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  t4a_event_release(a);
  t4a_event_release(b);
  t4a_status d = t4a_retire_destroy(r);
  if (st == T4A_OK) st = d;
  /* The keepalive: released, or leaked and counted in this step (quarantined). */
  t4a_lane_stats(f->lane, &after);
  int held = atomic_load(&o.refs);
  if (held > 0 && (uint64_t)held > after.leaked - before.leaked) {
    fail_msg("%d keepalive references neither released nor counted", held);
  }
  return st;
}

/* A host function whose enqueue failed after enqueueing keeps its record (quarantined, counted). */
T4A_FIXTURE_DELIBERATE_LEAKS("op_everything", "test_failure_sweeps")

static t4a_status op_step(void *user) {
  fixture *f = user;
  t4a_status st = op_everything(f);
  t4a_fake_progress(f->fake);
  return st;
}

static long unaccounted(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_EVENTS);
}

static long live_streams(t4a_fake *fake) {
  t4a_fake_live live;
  t4a_fake_live_objects(fake, &live);
  return (long)live.streams;
}

static void test_failure_sweeps(void **state) {
  fixture *f = *state;
  long streams = live_streams(f->fake);
  t4a_sweep s = {.name = "events", .fake = f->fake, .op = op_step, .user = f,
                 .unaccounted = unaccounted};
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY) > 8);
  assert_int_equal(live_streams(f->fake), streams);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) > 8);
  assert_int_equal(live_streams(f->fake), streams);
  s.entry = "cuLaunchHostFunc";
  s.after_enqueue = 1;
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY), 1);
  s.entry = NULL;
  s.after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_record_query_synchronize, setup, teardown),
      cmocka_unit_test_setup_teardown(test_elapsed_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_orders_two_lanes_without_host_wait, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_capture_records_and_waits_as_nodes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_func_in_stream_order_keepalives_until_ran, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_host_func_reentry_is_typed_never_a_deadlock, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_host_func_captured_runs_at_each_replay, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweeps, setup, teardown_sweep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
