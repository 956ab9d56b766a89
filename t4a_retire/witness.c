/* Witnesses: (event, its context) with a memoised terminal state and prunable upstreams. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a/retire.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_retire/retire_internal.h"

enum { PENDING = 0, COMPLETE = 1, FAILED = 2 };

struct t4a_witness {
  atomic_int refs;
  pthread_mutex_t lock;
  int state;           /* PENDING, COMPLETE or FAILED; terminal states never change */
  t4a_error failure;   /* the memoised failure's detail */
  t4a_lane *lane;      /* a reference: the event's context and stream */
  CUevent event;
  t4a_witness **upstream;
  size_t num_upstream, cap_upstream;
};

t4a_status t4a_witness_record_(t4a_lane *lane, t4a_witness **out) {
  *out = NULL;
  t4a_driver *d = t4a_lane_driver(lane);
  t4a_witness *w = t4a_host_calloc(1, sizeof *w);
  if (w == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&w->lock, NULL) != 0) {
    free(w);
    return t4a_error_set(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                         "cannot initialise a witness lock");
  }
  t4a_status st = T4A_CU(d, cuEventCreate, &w->event, CU_EVENT_DISABLE_TIMING);
  if (st == T4A_OK) {
    st = T4A_CU(d, cuEventRecord, w->event, t4a_lane_stream(lane));
    if (st != T4A_OK) (void)T4A_CU_QUIET(d, cuEventDestroy, w->event);
  }
  if (st != T4A_OK) {
    pthread_mutex_destroy(&w->lock);
    free(w);
    return t4a_lane_note(lane, st);
  }
  atomic_init(&w->refs, 1);
  w->lane = lane;
  t4a_lane_retain(lane);
  t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_witnesses_created, 1);
  *out = w;
  return T4A_OK;
}

t4a_status t4a_witness_add_upstream(t4a_witness *w, t4a_witness *up) {
  if (w == NULL || up == NULL || w == up) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                         "witness or upstream is NULL, or they are the same");
  }
  pthread_mutex_lock(&w->lock);
  t4a_status st = T4A_OK;
  if (w->state == PENDING) {
    if (w->num_upstream == w->cap_upstream) {
      size_t cap = w->cap_upstream ? w->cap_upstream * 2 : 4;
      t4a_witness **n = t4a_host_calloc(cap, sizeof *n);
      if (n == NULL) {
        st = T4A_HOST_OUT_OF_MEMORY;
      } else {
        if (w->num_upstream) memcpy(n, w->upstream, w->num_upstream * sizeof *n);
        free(w->upstream);
        w->upstream = n;
        w->cap_upstream = cap;
      }
    }
    if (st == T4A_OK) {
      t4a_witness_retain(up);
      w->upstream[w->num_upstream++] = up;
    }
  }
  pthread_mutex_unlock(&w->lock);
  return st;
}

/* Memoises a terminal state (the first one wins) and returns it. Lock held. */
static t4a_status settle(t4a_witness *w, t4a_status st, t4a_witness ***pruned, size_t *num) {
  if (w->state == PENDING) {
    if (st == T4A_OK) {
      w->state = COMPLETE;
      /* Complete: the upstream witnesses are complete too and need not be kept. */
      *pruned = w->upstream;
      *num = w->num_upstream;
      w->upstream = NULL;
      w->num_upstream = w->cap_upstream = 0;
    } else {
      w->state = FAILED;
      t4a_error_last(&w->failure);
      w->failure.status = st;
    }
  }
  return w->state == COMPLETE ? T4A_OK : w->failure.status;
}

static t4a_status replay(const t4a_witness *w) {
  if (w->state == COMPLETE) return T4A_OK;
  const t4a_error *e = &w->failure;
  return t4a_error_set(e->status, e->entry, e->code, e->code_name, e->bytes, "%s", e->message);
}

static t4a_status observe(t4a_witness *w, int wait) {
  if (w == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "witness is NULL");
  pthread_mutex_lock(&w->lock);
  if (w->state != PENDING) {
    t4a_status st = replay(w);
    pthread_mutex_unlock(&w->lock);
    return st;
  }
  /* Upstreams first (copied out: their observation must not run under our lock). */
  size_t n = w->num_upstream;
  t4a_witness *ups[16];
  t4a_witness **up = n <= 16 ? ups : t4a_host_calloc(n, sizeof *up);
  if (up == NULL) {
    pthread_mutex_unlock(&w->lock);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < n; i++) {
    up[i] = w->upstream[i];
    t4a_witness_retain(up[i]);
  }
  pthread_mutex_unlock(&w->lock);

  t4a_status st = T4A_OK;
  for (size_t i = 0; i < n && st == T4A_OK; i++) st = observe(up[i], wait);
  for (size_t i = 0; i < n; i++) t4a_witness_release(up[i]);
  if (up != ups) free(up);

  if (st == T4A_OK) {
    t4a_driver *d = t4a_lane_driver(w->lane);
    t4a_ctx_scope scope;
    st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(w->lane), t4a_lane_counters(w->lane));
    if (st == T4A_OK) {
      if (wait) {
        t4a_counter_add(t4a_lane_counters(w->lane), T4A_COUNTER_host_waits, 1);
        st = T4A_CU(d, cuEventSynchronize, w->event);
      } else {
        st = T4A_CU(d, cuEventQuery, w->event);
      }
      if (st == T4A_OK) {
        st = t4a_ctx_scope_exit(&scope);
      } else {
        t4a_ctx_scope_exit_quiet(&scope);
      }
    }
    if (st != T4A_NOT_READY) t4a_lane_note(w->lane, st);
  }
  if (st == T4A_NOT_READY) return st;

  t4a_witness **pruned = NULL;
  size_t num_pruned = 0;
  pthread_mutex_lock(&w->lock);
  st = settle(w, st, &pruned, &num_pruned);
  if (st != T4A_OK) st = replay(w);
  pthread_mutex_unlock(&w->lock);
  for (size_t i = 0; i < num_pruned; i++) t4a_witness_release(pruned[i]);
  free(pruned);
  return st;
}

t4a_status t4a_witness_query(t4a_witness *w) { return observe(w, 0); }
t4a_status t4a_witness_wait(t4a_witness *w) { return observe(w, 1); }

size_t t4a_witness_num_upstream(t4a_witness *w) {
  if (w == NULL) return 0;
  pthread_mutex_lock(&w->lock);
  size_t n = w->num_upstream;
  pthread_mutex_unlock(&w->lock);
  return n;
}

void t4a_witness_retain(t4a_witness *w) {
  if (w != NULL) atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
}

void t4a_witness_release(t4a_witness *w) {
  if (w == NULL || atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_ctx_scope scope;
  if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(w->lane), t4a_lane_counters(w->lane)) ==
      T4A_OK) {
    if (T4A_CU_QUIET(t4a_lane_driver(w->lane), cuEventDestroy, w->event) != T4A_OK) {
      t4a_counter_add(t4a_lane_counters(w->lane), T4A_COUNTER_leaked, 1);
    }
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    /* Without its context the event cannot be destroyed safely: leak it, count it (A5). */
    t4a_counter_add(t4a_lane_counters(w->lane), T4A_COUNTER_leaked, 1);
  }
  for (size_t i = 0; i < w->num_upstream; i++) t4a_witness_release(w->upstream[i]);
  free(w->upstream);
  pthread_mutex_destroy(&w->lock);
  t4a_lane_release(w->lane);
  free(w);
  t4a_error_restore(&saved);
}
