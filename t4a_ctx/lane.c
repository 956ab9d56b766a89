/* Lanes: one non-blocking stream on a primary-context holder, with a domain identity. */
#include <pthread.h>
#include <stdlib.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

struct t4a_lane {
  atomic_int refs;
  atomic_int abandoned;
  atomic_int counted_open; /* 1 while counted in the device's lanes_open */
  atomic_int capturing; /* a graph capture of the stream is in progress (t4a_retire) */
  pthread_mutex_t deferred_lock; /* `capturing` transitions and `deferred` */
  struct deferred_call *deferred; /* to run once the capture ended (t4a_lane_defer_capture_) */
  t4a_ctx_holder *holder; /* a reference */
  t4a_driver *driver;     /* borrowed from the holder */
  CUstream stream;
  uint64_t domain;
  int ordinal;
  t4a_counters counters;
};

/* Domain identities start at 1 and are never reused in the process. */
static _Atomic uint64_t g_next_domain = 1;

t4a_status t4a_lane_create(t4a_driver *driver, int ordinal, const t4a_lane_options *options,
                           t4a_lane **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_lane_options opts = T4A_LANE_OPTIONS_INIT;
  if (options != NULL) opts = *options;
  /* Counted open before the device's state is read (t4a_device_recover reads them the other way
   * round), so a recovery never resets a context under a lane being made. */
  t4a_ctx_fault *fault = driver != NULL && ordinal >= 0 && ordinal < T4A_MAX_DEVICES
                             ? &driver->faults[ordinal]
                             : NULL;
  if (fault != NULL) {
    atomic_fetch_add(&fault->lanes_open, 1);
    if (T4A_CTX_PHASE(atomic_load(&fault->state)) == T4A_CTX_RESETTING) {
      atomic_fetch_sub(&fault->lanes_open, 1);
      return t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                            "device %d's primary context is being reset (t4a_device_recover)",
                            ordinal);
    }
    /* A device already marked lost: refused at once, naming the fault, without a driver call
     * (a new stream on it would meet the same sticky error). */
    t4a_status lost = t4a_ctx_device_check(driver, ordinal);
    if (lost != T4A_OK) {
      atomic_fetch_sub(&fault->lanes_open, 1);
      return lost;
    }
  }
  t4a_lane *lane = t4a_host_calloc(1, sizeof *lane);
  t4a_status st = lane != NULL ? t4a_ctx_holder_create(driver, ordinal, &lane->holder)
                               : T4A_HOST_OUT_OF_MEMORY;
  if (st != T4A_OK) {
    if (fault != NULL) atomic_fetch_sub(&fault->lanes_open, 1);
    free(lane);
    return st;
  }
  lane->driver = driver;
  lane->ordinal = ordinal;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters)) == T4A_OK) {
    st = T4A_CU(driver, cuStreamCreateWithPriority, &lane->stream, CU_STREAM_NON_BLOCKING,
                opts.priority);
    if (st != T4A_OK) {
      t4a_ctx_scope_exit_quiet(&scope);
    } else if ((st = t4a_ctx_scope_exit(&scope)) != T4A_OK) {
      /* The stream exists but the caller's context could not be put back: report it, and do
       * not hand out a lane built on a thread whose state we disturbed. */
      t4a_error saved;
      t4a_error_last(&saved);
      t4a_ctx_scope undo;
      if (t4a_ctx_scope_enter(&undo, lane->holder, &lane->counters) == T4A_OK &&
          T4A_CU_QUIET(driver, cuStreamDestroy, lane->stream) == T4A_OK) {
        t4a_ctx_scope_exit_quiet(&undo);
      } else {
        t4a_ctx_scope_exit_quiet(&undo);
        t4a_counter_add(&driver->counters, T4A_COUNTER_streams_leaked, 1);
      }
      t4a_error_restore(&saved);
    }
  }
  if (st != T4A_OK) {
    t4a_ctx_holder_release(lane->holder); /* a drop path: keeps this thread's detail */
    atomic_fetch_sub(&fault->lanes_open, 1);
    free(lane);
    return st;
  }
  atomic_init(&lane->refs, 1);
  atomic_init(&lane->abandoned, 0);
  atomic_init(&lane->counted_open, 1);
  atomic_init(&lane->capturing, 0);
  pthread_mutex_init(&lane->deferred_lock, NULL); /* default attributes: cannot fail on glibc */
  lane->domain = atomic_fetch_add_explicit(&g_next_domain, 1, memory_order_relaxed);
  /* Lifetime counts live on the driver: the lane's own block dies with the lane. */
  t4a_counter_add(&driver->counters, T4A_COUNTER_streams_created, 1);
  t4a_counter_add(&driver->counters, T4A_COUNTER_lanes_created, 1);
  *out = lane;
  return T4A_OK;
}

void t4a_lane_retain(t4a_lane *lane) {
  if (lane != NULL) atomic_fetch_add_explicit(&lane->refs, 1, memory_order_relaxed);
}

/* The lane stops counting as open on its device (once): abandoned or destroyed. */
static void lane_uncount(t4a_lane *lane) {
  if (atomic_exchange(&lane->counted_open, 0)) {
    atomic_fetch_sub(&lane->driver->faults[lane->ordinal].lanes_open, 1);
  }
}

void t4a_lane_abandon_(t4a_lane *lane) {
  if (lane == NULL) return;
  atomic_store_explicit(&lane->abandoned, 1, memory_order_relaxed);
  lane_uncount(lane);
}

int t4a_lane_is_abandoned(const t4a_lane *lane) {
  return lane != NULL && atomic_load_explicit(&((t4a_lane *)lane)->abandoned, memory_order_relaxed);
}

typedef struct deferred_call {
  struct deferred_call *next;
  void (*fn)(void *object);
  void *object;
} deferred_call;

/* The lane this thread is capturing (a reference), if any. Stream captures are THREAD_LOCAL: while
 * one is open, the driver refuses unsafe calls (cuModuleUnload, cuGraphExecDestroy…) made on the
 * capturing thread whatever lane they concern, and invalidates the capture; so drop paths of
 * other lanes defer onto this one too. A capture ended on another thread (a retire destroyed
 * mid-capture) leaves this reference until the thread next looks (released then). */
static _Thread_local t4a_lane *t_capturing;

/* This thread's capturing lane, or NULL (a stale entry is dropped). */
static t4a_lane *thread_capturing(void) {
  t4a_lane *l = t_capturing;
  if (l != NULL && !atomic_load_explicit(&l->capturing, memory_order_acquire)) {
    t_capturing = NULL;
    t4a_lane_release(l);
    l = NULL;
  }
  return l;
}

void t4a_lane_set_capturing_(t4a_lane *lane, int capturing) {
  if (lane == NULL) return;
  if (capturing) {
    (void)thread_capturing();
    if (t_capturing == NULL) {
      t4a_lane_retain(lane);
      t_capturing = lane;
    }
  } else if (t_capturing == lane) {
    t_capturing = NULL;
    t4a_lane_release(lane); /* the caller (the retire) holds the lane: never the last */
  }
  pthread_mutex_lock(&lane->deferred_lock);
  atomic_store_explicit(&lane->capturing, capturing != 0, memory_order_release);
  deferred_call *run = NULL;
  if (!capturing) {
    run = lane->deferred;
    lane->deferred = NULL;
  }
  pthread_mutex_unlock(&lane->deferred_lock);
  /* Oldest first: the list was built newest first. */
  deferred_call *ordered = NULL;
  while (run != NULL) {
    deferred_call *next = run->next;
    run->next = ordered;
    ordered = run;
    run = next;
  }
  while (ordered != NULL) {
    deferred_call *next = ordered->next;
    ordered->fn(ordered->object);
    free(ordered);
    ordered = next;
  }
}

int t4a_lane_defer_capture_(t4a_lane *lane, void (*fn)(void *object), void *object) {
  if (lane == NULL || fn == NULL) return 0;
  if (!atomic_load_explicit(&lane->capturing, memory_order_acquire)) {
    /* Not this lane's capture; but a capture open on this thread (of another lane) would break
     * as well: run it after that one. */
    t4a_lane *other = thread_capturing();
    if (other == NULL || other == lane) return 0;
    lane = other;
  }
  pthread_mutex_lock(&lane->deferred_lock);
  int deferred = 0;
  if (atomic_load_explicit(&lane->capturing, memory_order_relaxed)) {
    t4a_error saved; /* a drop path: the caller's error detail stays */
    t4a_error_last(&saved);
    deferred_call *d = t4a_host_malloc(sizeof *d);
    t4a_error_restore(&saved);
    if (d != NULL) {
      d->fn = fn;
      d->object = object;
      d->next = lane->deferred;
      lane->deferred = d;
      deferred = 1;
    } else {
      deferred = -1; /* cannot remember it: the caller leaks the object (counted) */
    }
  }
  pthread_mutex_unlock(&lane->deferred_lock);
  return deferred;
}

int t4a_lane_capture_blocks_drops_(const t4a_lane *lane) {
  if (lane == NULL) return 0;
  if (atomic_load_explicit(&((t4a_lane *)lane)->capturing, memory_order_acquire)) return 1;
  return thread_capturing() != NULL;
}

int t4a_lane_is_capturing(const t4a_lane *lane) {
  return lane != NULL &&
         atomic_load_explicit(&((t4a_lane *)lane)->capturing, memory_order_acquire);
}

static void lane_destroy(t4a_lane *lane) {
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_driver *d = lane->driver;
  t4a_ctx_scope scope;
  if (atomic_load_explicit(&lane->abandoned, memory_order_relaxed)) {
    /* No proved drain: the stream may still hold work; leave it to the driver and count it. */
    t4a_counter_add(&d->counters, T4A_COUNTER_streams_leaked, 1);
  } else if (t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters) == T4A_OK) {
    if (T4A_CU_QUIET(d, cuStreamDestroy, lane->stream) == T4A_OK) {
      t4a_counter_add(&d->counters, T4A_COUNTER_streams_destroyed, 1);
    } else {
      t4a_counter_add(&d->counters, T4A_COUNTER_streams_leaked, 1);
    }
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    /* Without its context the stream cannot be destroyed safely: leak it and count (A5). */
    t4a_counter_add(&d->counters, T4A_COUNTER_streams_leaked, 1);
  }
  t4a_counter_add(&d->counters, T4A_COUNTER_lanes_destroyed, 1);
  lane_uncount(lane);
  t4a_lane_set_capturing_(lane, 0); /* runs anything still deferred (none after a proper end) */
  pthread_mutex_destroy(&lane->deferred_lock);
  t4a_ctx_holder_release(lane->holder);
  free(lane);
  t4a_error_restore(&saved);
}

void t4a_lane_release(t4a_lane *lane) {
  if (lane == NULL) return;
  if (atomic_fetch_sub_explicit(&lane->refs, 1, memory_order_acq_rel) == 1) lane_destroy(lane);
}

int t4a_lane_ordinal(const t4a_lane *lane) { return lane->ordinal; }
uint64_t t4a_lane_domain(const t4a_lane *lane) { return lane->domain; }
t4a_ctx_holder *t4a_lane_holder(const t4a_lane *lane) { return lane->holder; }
t4a_counters *t4a_lane_counters(t4a_lane *lane) { return &lane->counters; }
void t4a_lane_stats(const t4a_lane *lane, t4a_counter_values *out) {
  t4a_counters_stats(lane != NULL ? &lane->counters : NULL, out);
}
CUstream t4a_lane_stream(const t4a_lane *lane) { return lane->stream; }
t4a_driver *t4a_lane_driver(const t4a_lane *lane) { return lane->driver; }

t4a_status t4a_lane_synchronize(t4a_lane *lane) {
  if (lane == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane is NULL");
  if (t4a_in_host_fn_()) return t4a_host_fn_refuse_("waiting for a lane's stream");
  t4a_counter_add(&lane->counters, T4A_COUNTER_host_waits, 1);
  return t4a_lane_note_(lane, T4A_CU(lane->driver, cuStreamSynchronize, lane->stream));
}

t4a_status t4a_lane_check(const t4a_lane *lane) {
  if (lane == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane is NULL");
  return t4a_ctx_holder_check(lane->holder);
}

int t4a_lane_is_broken(const t4a_lane *lane) {
  if (lane == NULL) return 0;
  return t4a_ctx_holder_is_lost(lane->holder);
}

t4a_status t4a_lane_note_(const t4a_lane *lane, t4a_status status) {
  if (T4A_UNLIKELY(status == T4A_CONTEXT_LOST) && lane != NULL) {
    t4a_error cause;
    t4a_error_last(&cause);
    t4a_ctx_holder_mark_lost_(lane->holder, &cause);
  }
  return status;
}
