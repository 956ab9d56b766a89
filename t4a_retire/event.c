/* User events and host functions on a lane's stream. See t4a/event.h. */
#include "t4a/event.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_retire/retire_internal.h"

struct t4a_event {
  atomic_int refs;
  atomic_int recorded; /* set once a record was enqueued (elapsed time needs two) */
  t4a_lane *lane;      /* a reference: its holder is the event's context */
  t4a_driver *driver;
  CUevent event;
  uint32_t flags;
};

t4a_status t4a_event_create(t4a_lane *lane, const t4a_event_options *options, t4a_event **out) {
  if (out != NULL) *out = NULL;
  if (lane == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane or out is NULL");
  }
  t4a_event_options o = T4A_EVENT_OPTIONS_INIT;
  if (options != NULL) o = *options;
  if (o.flags & ~T4A_EVENT_TIMING) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "unknown event flags 0x%x",
                          o.flags);
  }
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_event *e = t4a_host_calloc(1, sizeof *e);
  if (e == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_driver *d = t4a_lane_driver(lane);
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane))) !=
      T4A_OK) {
    free(e);
    return st;
  }
  unsigned flags = (o.flags & T4A_EVENT_TIMING) ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  st = t4a_lane_note_(lane, T4A_CU(d, cuEventCreate, &e->event, flags));
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) {
    free(e);
    return st;
  }
  atomic_init(&e->refs, 1);
  atomic_init(&e->recorded, 0);
  e->lane = lane;
  t4a_lane_retain(lane);
  e->driver = d;
  e->flags = o.flags;
  *out = e;
  return T4A_OK;
}

void t4a_event_retain(t4a_event *e) {
  if (e != NULL) atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

void t4a_event_release(t4a_event *e) {
  if (e == NULL || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_ctx_scope scope;
  int destroyed = 0;
  if (!t4a_lane_is_abandoned(e->lane) &&
      t4a_ctx_scope_enter(&scope, t4a_lane_holder(e->lane), t4a_lane_counters(e->lane)) ==
          T4A_OK) {
    destroyed = T4A_CU_QUIET(e->driver, cuEventDestroy, e->event) == T4A_OK;
    t4a_ctx_scope_exit_quiet(&scope);
  }
  if (!destroyed) t4a_counter_add(t4a_lane_counters(e->lane), T4A_COUNTER_leaked, 1);
  t4a_lane_release(e->lane);
  free(e);
  t4a_error_restore(&saved);
}

int t4a_event_is_timing(const t4a_event *e) {
  return e != NULL && (e->flags & T4A_EVENT_TIMING) != 0;
}

/* An event can be recorded on, or waited for by, a stream of its own device's context only. */
static t4a_status check_same_device(const t4a_event *e, t4a_retire *r, const char *what) {
  t4a_lane *l = t4a_retire_lane(r);
  if (t4a_lane_ordinal(l) != t4a_lane_ordinal(e->lane) ||
      t4a_lane_driver(l) != t4a_lane_driver(e->lane)) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "%s: the event belongs to device %d's context, the stream to device %d's",
                          what, t4a_lane_ordinal(e->lane), t4a_lane_ordinal(l));
  }
  return T4A_OK;
}

static void event_release_object(void *p) { t4a_event_release(p); }
static void event_retain_object(void *p) { t4a_event_retain(p); }

t4a_status t4a_event_record(t4a_event *e, t4a_retire *r) {
  if (e == NULL || r == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "event or retire is NULL");
  }
  t4a_status st = check_same_device(e, r, "recording an event");
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(r, 1, &adm)) != T4A_OK) return st;
  t4a_lane *l = t4a_retire_lane(r);
  /* In a capture (a graph or a chain recording): an external event record node, run at each
   * replay; the graph keeps the event. */
  int captured = t4a_retire_is_capturing(r);
  st = T4A_CU(e->driver, cuEventRecordWithFlags, e->event, t4a_lane_stream(l),
              captured ? CU_EVENT_RECORD_EXTERNAL : CU_EVENT_RECORD_DEFAULT);
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  if (captured) {
    t4a_admission_keep_borrowed(&adm, (t4a_keepalive){e, event_release_object, 1},
                                event_retain_object);
  }
  atomic_store_explicit(&e->recorded, 1, memory_order_release);
  t4a_counter_add(t4a_lane_counters(l), T4A_COUNTER_user_events_recorded, 1);
  t4a_admission_commit(&adm);
  return T4A_OK;
}

static t4a_status observe(t4a_event *e, int wait) {
  if (e == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "event is NULL");
  if (wait && t4a_in_host_fn_()) return t4a_host_fn_refuse_("waiting for an event");
  t4a_status st = t4a_lane_check(e->lane);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(e->lane), t4a_lane_counters(e->lane));
  if (st != T4A_OK) return st;
  if (wait) {
    t4a_counter_add(t4a_lane_counters(e->lane), T4A_COUNTER_host_waits, 1);
    st = T4A_CU(e->driver, cuEventSynchronize, e->event);
  } else {
    st = T4A_CU(e->driver, cuEventQuery, e->event);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  return t4a_lane_note_(e->lane, st);
}

t4a_status t4a_event_query(t4a_event *e) { return observe(e, 0); }
t4a_status t4a_event_synchronize(t4a_event *e) { return observe(e, 1); }

t4a_status t4a_event_wait(t4a_retire *r, t4a_event *e) {
  if (e == NULL || r == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "event or retire is NULL");
  }
  t4a_status st = check_same_device(e, r, "waiting for an event");
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(r, 1, &adm)) != T4A_OK) return st;
  t4a_lane *l = t4a_retire_lane(r);
  /* In a capture: an external event wait node (the replay waits for the event's latest record
   * when it runs); the graph keeps the event. */
  int captured = t4a_retire_is_capturing(r);
  st = T4A_CU(e->driver, cuStreamWaitEvent, t4a_lane_stream(l), e->event,
              captured ? CU_EVENT_WAIT_EXTERNAL : CU_EVENT_WAIT_DEFAULT);
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  if (captured) {
    t4a_admission_keep_borrowed(&adm, (t4a_keepalive){e, event_release_object, 1},
                                event_retain_object);
  }
  t4a_counter_add(t4a_lane_counters(l), T4A_COUNTER_user_event_waits, 1);
  t4a_admission_commit(&adm);
  return T4A_OK;
}

t4a_status t4a_event_elapsed_ms(t4a_event *a, t4a_event *b, float *out_ms) {
  if (out_ms != NULL) *out_ms = 0;
  if (a == NULL || b == NULL || out_ms == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "an event or out_ms is NULL");
  }
  if (!t4a_event_is_timing(a) || !t4a_event_is_timing(b)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "elapsed time needs two timing events (T4A_EVENT_TIMING); the %s event "
                          "has no timestamps",
                          !t4a_event_is_timing(a) ? "start" : "end");
  }
  if (!atomic_load_explicit(&a->recorded, memory_order_acquire) ||
      !atomic_load_explicit(&b->recorded, memory_order_acquire)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "elapsed time: the %s event was never recorded",
                          !atomic_load(&a->recorded) ? "start" : "end");
  }
  if (t4a_lane_ordinal(a->lane) != t4a_lane_ordinal(b->lane) || a->driver != b->driver) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "elapsed time between events of devices %d and %d",
                          t4a_lane_ordinal(a->lane), t4a_lane_ordinal(b->lane));
  }
  /* Both must have completed: the driver's NOT_READY, with a message saying which. */
  t4a_status st = t4a_event_query(a);
  if (st == T4A_OK) st = t4a_event_query(b);
  if (st == T4A_NOT_READY) {
    return t4a_error_set_(T4A_NOT_READY, NULL, 0, NULL, 0,
                          "elapsed time: the events' records have not both completed (wait for "
                          "the end event first)");
  }
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(a->lane), t4a_lane_counters(a->lane))) !=
      T4A_OK) {
    return st;
  }
  float ms = 0;
  st = T4A_CU(a->driver, cuEventElapsedTime, &ms, a->event, b->event);
  t4a_ctx_scope_exit_quiet(&scope);
  if (st == T4A_OK) *out_ms = ms;
  return t4a_lane_note_(a->lane, st);
}

/* ---- host functions ---- */

typedef struct host_call {
  t4a_host_fn fn;
  void *user;
} host_call;

/* On the driver's thread: the re-entry rule holds for the function's duration. */
static void CUDA_CB host_trampoline(void *p) {
  host_call *c = p;
  t4a_host_fn_enter_();
  c->fn(c->user);
  t4a_host_fn_exit_();
}

static void host_call_free(void *p) { free(p); }

static void release_all(const t4a_keepalive *keep, size_t n) {
  for (size_t i = 0; i < n; i++) keep[i].release(keep[i].object);
}

t4a_status t4a_host_func_launch(t4a_retire *r, t4a_host_fn fn, void *user,
                                const t4a_keepalive *keep, size_t num_keep) {
  int bad_keep = num_keep > 0 && keep == NULL;
  for (size_t i = 0; !bad_keep && i < num_keep; i++) bad_keep = keep[i].release == NULL;
  if (bad_keep) {
    /* Nothing can be released without a release function: the caller keeps them. */
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a keepalive without a release function");
  }
  if (r == NULL || fn == NULL || num_keep > (1u << 20)) {
    release_all(keep, num_keep);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "retire or fn is NULL (or more than 2^20 keepalives)");
  }
  host_call *c = t4a_host_malloc(sizeof *c);
  /* The quarantine list for a failed enqueue, made before anything is enqueued. */
  t4a_keepalive small[8];
  t4a_keepalive *q = num_keep + 1 <= 8 ? small : t4a_host_malloc((num_keep + 1) * sizeof *q);
  if (c == NULL || q == NULL) {
    free(c);
    if (q != small) free(q);
    release_all(keep, num_keep);
    return T4A_HOST_OUT_OF_MEMORY; /* the allocation's detail */
  }
  c->fn = fn;
  c->user = user;
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(r, (uint32_t)num_keep + 1, &adm);
  if (st != T4A_OK) {
    free(c);
    if (q != small) free(q);
    t4a_error saved;
    t4a_error_last(&saved);
    release_all(keep, num_keep);
    t4a_error_restore(&saved);
    return st;
  }
  t4a_lane *l = t4a_retire_lane(r);
  st = T4A_CU(t4a_lane_driver(l), cuLaunchHostFunc, t4a_lane_stream(l), host_trampoline, c);
  if (st != T4A_OK) {
    /* The function may have been enqueued: its record and keepalives are held for good. */
    q[0] = (t4a_keepalive){c, host_call_free, 1};
    for (size_t i = 0; i < num_keep; i++) q[i + 1] = keep[i];
    st = t4a_admission_fail(&adm, st, q, num_keep + 1);
    if (q != small) free(q);
    return st;
  }
  if (q != small) free(q);
  t4a_admission_keep(&adm, (t4a_keepalive){c, host_call_free, 1});
  for (size_t i = 0; i < num_keep; i++) t4a_admission_keep(&adm, keep[i]);
  t4a_counter_add(t4a_lane_counters(l), T4A_COUNTER_host_funcs, 1);
  t4a_admission_commit(&adm);
  return T4A_OK;
}
