/* Witnesses: (event, its context) with a memoised terminal state and prunable upstreams. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a/retire.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
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
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a witness lock");
  }
  t4a_status st = T4A_CU(d, cuEventCreate, &w->event, CU_EVENT_DISABLE_TIMING);
  if (st == T4A_OK) {
    st = T4A_CU(d, cuEventRecord, w->event, t4a_lane_stream(lane));
    /* An event that cannot be destroyed is leaked and counted, as t4a_witness_release does
     * (found by testing/fuzz/ops_fuzz.c; regression test_witness_record_failure_counts_event). */
    if (st != T4A_OK && T4A_CU_QUIET(d, cuEventDestroy, w->event) != T4A_OK) {
      t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_leaked, 1);
    }
  }
  if (st != T4A_OK) {
    pthread_mutex_destroy(&w->lock);
    free(w);
    return t4a_lane_note_(lane, st);
  }
  atomic_init(&w->refs, 1);
  w->lane = lane;
  t4a_lane_retain(lane);
  t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_witnesses_created, 1);
  *out = w;
  return T4A_OK;
}

/* Copies w's upstream list with a reference each (caller releases them and frees the array).
 * Lock not held. Returns 0 on host out-of-memory. */
static int copy_upstream(t4a_witness *w, t4a_witness ***out, size_t *num) {
  pthread_mutex_lock(&w->lock);
  size_t n = w->num_upstream;
  t4a_witness **copy = n ? t4a_host_calloc(n, sizeof *copy) : NULL;
  if (n && copy == NULL) {
    pthread_mutex_unlock(&w->lock);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    copy[i] = w->upstream[i];
    t4a_witness_retain(copy[i]);
  }
  pthread_mutex_unlock(&w->lock);
  *out = copy;
  *num = n;
  return 1;
}

static void release_all(t4a_witness **list, size_t n) {
  for (size_t i = 0; i < n; i++) t4a_witness_release(list[i]);
  free(list);
}

/* Whether `target` is reachable upstream from `from` (a cycle if `from` were added to target).
 * Returns -1 on host out-of-memory or a graph deeper than 256. */
static int reaches(t4a_witness *from, const t4a_witness *target, int depth) {
  if (from == target) return 1;
  if (depth > 256) return -1;
  t4a_witness **ups = NULL;
  size_t n = 0;
  if (!copy_upstream(from, &ups, &n)) return -1;
  int found = 0;
  for (size_t i = 0; i < n && found == 0; i++) found = reaches(ups[i], target, depth + 1);
  release_all(ups, n);
  return found;
}

t4a_status t4a_witness_add_upstream(t4a_witness *w, t4a_witness *up) {
  if (w == NULL || up == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "witness or upstream is NULL");
  }
  int cycle = reaches(up, w, 0);
  if (cycle != 0) {
    return cycle < 0 ? t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                                      "the upstream graph is too deep or memory ran out")
                     : t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                                      "adding this upstream would make a cycle");
  }
  pthread_mutex_lock(&w->lock);
  t4a_status st = T4A_OK;
  if (w->state != PENDING) {
    st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                        "the witness is already settled; an upstream added now would be ignored");
  } else if (w->num_upstream == w->cap_upstream) {
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
  pthread_mutex_unlock(&w->lock);
  return st;
}

static t4a_status replay(const t4a_witness *w) {
  if (w->state == COMPLETE) return T4A_OK;
  const t4a_error *e = &w->failure;
  return t4a_error_set_(e->status, e->entry, e->code, e->code_name, e->bytes, "%s", e->message);
}

/* Memoises a terminal state (the first one wins). Lock not held. On COMPLETE the remaining
 * upstream references are dropped (they are complete too). */
static void settle(t4a_witness *w, t4a_status st) {
  t4a_witness **pruned = NULL;
  size_t n = 0;
  pthread_mutex_lock(&w->lock);
  if (w->state == PENDING) {
    if (st == T4A_OK) {
      w->state = COMPLETE;
      pruned = w->upstream;
      n = w->num_upstream;
      w->upstream = NULL;
      w->num_upstream = w->cap_upstream = 0;
    } else {
      w->state = FAILED;
      t4a_error_last(&w->failure);
      w->failure.status = st;
    }
  }
  pthread_mutex_unlock(&w->lock);
  release_all(pruned, n);
}

/* Drops the upstream references that are complete (pruning as soon as each is seen complete). */
static void prune_complete(t4a_witness *w, t4a_witness **done, size_t n) {
  t4a_error saved; /* pruning is best effort: a failed allocation keeps the caller's detail */
  t4a_error_last(&saved);
  t4a_witness **drop = n ? t4a_host_calloc(n, sizeof *drop) : NULL;
  if (n > 0 && drop == NULL) t4a_error_restore(&saved);
  size_t num_drop = 0;
  pthread_mutex_lock(&w->lock);
  for (size_t i = 0; i < n && drop != NULL; i++) {
    for (size_t j = 0; j < w->num_upstream; j++) {
      if (w->upstream[j] == done[i]) {
        drop[num_drop++] = w->upstream[j];
        w->upstream[j] = w->upstream[--w->num_upstream];
        break;
      }
    }
  }
  pthread_mutex_unlock(&w->lock);
  release_all(drop, num_drop);
}

/* Observes the witness. Only a result about the work itself settles it: the event's own query or
 * synchronize, or an upstream's settled failure. A failure to activate the context, to restore it,
 * or to allocate while observing is returned without settling, so a later observation can still
 * confirm the work. *terminal says whether the returned status is the settled state. */
static t4a_status observe(t4a_witness *w, int wait, int *terminal) {
  *terminal = 0;
  if (w == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "witness is NULL");
  pthread_mutex_lock(&w->lock);
  if (w->state != PENDING) {
    t4a_status st = replay(w);
    pthread_mutex_unlock(&w->lock);
    *terminal = 1;
    return st;
  }
  pthread_mutex_unlock(&w->lock);

  t4a_witness **ups = NULL;
  size_t n = 0;
  if (!copy_upstream(w, &ups, &n)) return T4A_HOST_OUT_OF_MEMORY;
  t4a_status st = T4A_OK;
  int up_terminal = 0;
  size_t complete = 0;
  for (size_t i = 0; i < n; i++) {
    st = observe(ups[i], wait, &up_terminal);
    if (st != T4A_OK) break;
    ups[complete++] = ups[i]; /* complete upstreams gather at the front */
  }
  prune_complete(w, ups, complete);
  release_all(ups, n);
  if (st != T4A_OK) {
    if (up_terminal) settle(w, st); /* the work this depends on failed for good */
    *terminal = up_terminal;
    return st;
  }

  t4a_driver *d = t4a_lane_driver(w->lane);
  t4a_ctx_scope scope;
  st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(w->lane), t4a_lane_counters(w->lane));
  if (st != T4A_OK) return st; /* could not ask: nothing is known about the work */
  if (wait) {
    t4a_counter_add(t4a_lane_counters(w->lane), T4A_COUNTER_host_waits, 1);
    st = T4A_CU(d, cuEventSynchronize, w->event);
  } else {
    st = T4A_CU(d, cuEventQuery, w->event);
  }
  if (st == T4A_NOT_READY) {
    t4a_ctx_scope_exit_quiet(&scope);
    return st;
  }
  *terminal = 1;
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    t4a_lane_note_(w->lane, st);
    settle(w, st);
    return st;
  }
  settle(w, T4A_OK);
  /* The work is confirmed; a failed restore is reported now but does not unsettle it. */
  st = t4a_ctx_scope_exit(&scope);
  if (st != T4A_OK) *terminal = 0;
  return st;
}

t4a_status t4a_witness_query(t4a_witness *w) {
  int terminal;
  return observe(w, 0, &terminal);
}

t4a_status t4a_witness_wait(t4a_witness *w) {
  int terminal;
  return observe(w, 1, &terminal);
}

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

/* ---- witnesses inside an admission (the admission's side is in retire.c) ---- */

t4a_status t4a_witness_stream_wait_(t4a_witness *w, t4a_lane *lane) {
  pthread_mutex_lock(&w->lock);
  int state = w->state;
  t4a_status settled = T4A_OK;
  if (state == FAILED && w->lane != lane) {
    /* Another lane's failure: reported as such, so it is not mistaken for this lane's own. */
    const t4a_error *e = &w->failure;
    settled = t4a_error_set_(T4A_UPSTREAM_FAILED, e->entry, e->code, e->code_name, e->bytes,
                             "a witness this work waits on failed (%s): %s",
                             t4a_status_name(e->status), e->message);
  } else if (state == FAILED) {
    settled = replay(w);
  }
  pthread_mutex_unlock(&w->lock);
  if (state != PENDING) return settled; /* complete: nothing to wait for; failed: its failure */
  /* The witness completes only with its upstreams: the stream waits for each of them too. */
  t4a_witness **ups = NULL;
  size_t n = 0;
  if (!copy_upstream(w, &ups, &n)) return T4A_HOST_OUT_OF_MEMORY;
  t4a_status st = T4A_OK;
  for (size_t i = 0; i < n && st == T4A_OK; i++) st = t4a_witness_stream_wait_(ups[i], lane);
  release_all(ups, n);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane))) != T4A_OK) {
    return st;
  }
  st = T4A_CU(t4a_lane_driver(lane), cuStreamWaitEvent, t4a_lane_stream(lane), w->event, 0);
  if (st == T4A_OK) {
    t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_cross_waits, 1);
  } else {
    st = t4a_lane_note_(lane, st);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}
