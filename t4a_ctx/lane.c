/* Lanes: one non-blocking stream on a primary-context holder, with a domain identity. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

#define LANE_COUNTER_SHARDS 2

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
  int priority;
  struct lane_group *_Atomic group; /* the streams of this domain, once it has more than one */
  uint32_t slot;                     /* this lane's member slot in `group` */
  t4a_counters counters;
  /* The single-writer shards of `counters` (counters_block.h, 64 bytes each): one per retire of
   * the lane, for what its admissions count under its lock; retires beyond these count into
   * `counters`. */
  t4a_counter_shard_ shards[LANE_COUNTER_SHARDS];
};

static void lane_init_counters(t4a_lane *lane) {
  lane->counters.shards = lane->shards;
  lane->counters.num_shards = LANE_COUNTER_SHARDS;
}

/* Domain identities start at 1 and are never reused in the process. */
static _Atomic uint64_t g_next_domain = 1;

/* The priority range of the current context's device (context current). 0 is every device's
 * default and always valid, so it asks the driver nothing. */
static t4a_status check_priority(t4a_driver *driver, int ordinal, int priority) {
  if (priority == 0) return T4A_OK;
  int least = 0, greatest = 0;
  t4a_status st = T4A_CU(driver, cuCtxGetStreamPriorityRange, &least, &greatest);
  if (st != T4A_OK) return st;
  if (priority > least || priority < greatest) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "cuCtxGetStreamPriorityRange", 0, NULL, 0,
                          "stream priority %d is outside device %d's range [%d (greatest), %d "
                          "(least)]",
                          priority, ordinal, greatest, least);
  }
  return T4A_OK;
}

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
  if (lane != NULL) lane_init_counters(lane);
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
    st = check_priority(driver, ordinal, opts.priority);
    if (st == T4A_OK) {
      st = T4A_CU(driver, cuStreamCreateWithPriority, &lane->stream, CU_STREAM_NON_BLOCKING,
                  opts.priority);
    }
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
  lane->priority = opts.priority;
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


/* ---- the streams of one domain (t4a_lane_create_sibling) ---------------------------------- *
 *
 * Lanes made by t4a_lane_create_sibling share a holder and a domain: buffers and modules of one
 * are the others'. Their group orders one stream after a point of another with one marker event
 * per member: a point is a mark (slot, generation, sequence number) taken right after work was
 * enqueued; the member's marker, recorded later on its stream, covers every mark taken before the
 * record (the group's sequence number at the record says which). A waiter remembers, per member,
 * the newest marker sequence it waited for, so one record and one wait cover any number of marks
 * (the amortisation). The lock is a leaf: nothing else is taken under it; the driver calls under
 * it only enqueue. */
#define GROUP_MAX T4A_LANE_MAX_STREAMS

typedef struct group_member {
  t4a_lane *lane;   /* borrowed: the member leaves before it goes; NULL: a free slot */
  uint32_t gen;     /* bumped whenever the slot is taken */
  CUevent marker;   /* created at its first record (DISABLE_TIMING) */
  uint64_t marker_seq;  /* the group sequence number at its latest record (0: none) */
  uint64_t last_mark;   /* the newest mark taken on it */
  uint64_t drained_seq; /* the group sequence number at its latest proved drain */
  uint64_t waited[GROUP_MAX];     /* newest marker_seq of member j this stream waited for */
  uint32_t waited_gen[GROUP_MAX]; /* ...of that member's generation */
} group_member;

typedef struct lane_group {
  atomic_int refs;
  pthread_mutex_t lock;
  uint64_t seq;  /* the newest mark handed out */
  int tainted;   /* a member left without a proved drain: its stale marks cannot be proved */
  group_member m[GROUP_MAX];
} lane_group;

static void group_release(lane_group *g) {
  if (g != NULL && atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1) {
    pthread_mutex_destroy(&g->lock);
    free(g);
  }
}

/* The lane's group, made (with the lane as its member 0, generation 1) when it has none yet. */
static t4a_status lane_group_of(t4a_lane *lane, lane_group **out) {
  lane_group *g = atomic_load_explicit(&lane->group, memory_order_acquire);
  if (g != NULL) {
    *out = g;
    return T4A_OK;
  }
  g = t4a_host_calloc(1, sizeof *g);
  if (g == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&g->lock, NULL) != 0) {
    free(g);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a stream group lock");
  }
  atomic_init(&g->refs, 1);
  /* Work of the lane before the group existed (its buffers' allocations) is mark 1. */
  g->seq = 1;
  g->m[0].lane = lane;
  g->m[0].gen = 1;
  g->m[0].last_mark = 1;
  lane_group *expected = NULL;
  if (!atomic_compare_exchange_strong(&lane->group, &expected, g)) {
    pthread_mutex_destroy(&g->lock);
    free(g);
    g = expected; /* another thread made it first */
  }
  *out = g;
  return T4A_OK;
}

int t4a_lane_grouped_(const t4a_lane *lane) {
  return lane != NULL &&
         atomic_load_explicit(&((t4a_lane *)lane)->group, memory_order_acquire) != NULL;
}

t4a_lane_mark_ t4a_lane_mark_now_(t4a_lane *lane) {
  t4a_lane_mark_ mark = {0, 0, 0};
  lane_group *g = lane != NULL ? atomic_load_explicit(&lane->group, memory_order_acquire) : NULL;
  if (g == NULL) return mark;
  pthread_mutex_lock(&g->lock);
  group_member *m = &g->m[lane->slot];
  mark.slot = lane->slot;
  mark.gen = m->gen;
  mark.seq = ++g->seq;
  m->last_mark = mark.seq;
  pthread_mutex_unlock(&g->lock);
  return mark;
}

t4a_lane_mark_ t4a_lane_mark_origin_(const t4a_lane *lane) {
  t4a_lane_mark_ mark = {0, 0, 0};
  lane_group *g = lane != NULL ? atomic_load_explicit(&((t4a_lane *)lane)->group,
                                                      memory_order_acquire)
                               : NULL;
  if (g == NULL) return mark;
  pthread_mutex_lock(&g->lock);
  mark.slot = lane->slot;
  mark.gen = g->m[lane->slot].gen;
  mark.seq = 1; /* before the group existed: covered by any marker of the lane */
  pthread_mutex_unlock(&g->lock);
  return mark;
}

/* Orders w's later work after `mark` (lock held; the group's context current). */
static t4a_status order_locked(lane_group *g, t4a_lane *waiter, t4a_lane_mark_ mark) {
  if (mark.seq == 0 || mark.slot >= GROUP_MAX) return T4A_OK;
  group_member *t = &g->m[mark.slot];
  if (t->lane == waiter && t->gen == mark.gen) return T4A_OK; /* stream order */
  if (t->lane == NULL || t->gen != mark.gen) {
    /* The marked stream left the group after a proved drain (lane_destroy), unless tainted. */
    if (!g->tainted) return T4A_OK;
    return t4a_error_set_(T4A_LANE_BROKEN, NULL, 0, NULL, 0,
                          "a stream of domain %llu went without a proved drain: work marked on "
                          "it cannot be proved complete",
                          (unsigned long long)waiter->domain);
  }
  group_member *w = &g->m[waiter->slot];
  if (w->waited_gen[mark.slot] == mark.gen && w->waited[mark.slot] >= mark.seq) return T4A_OK;
  t4a_driver *d = waiter->driver;
  if (t->marker_seq < mark.seq) {
    if (atomic_load_explicit(&t->lane->capturing, memory_order_acquire)) {
      return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                            "stream %u of domain %llu is capturing a graph: the order after its "
                            "work cannot be recorded until the capture ended",
                            mark.slot, (unsigned long long)waiter->domain);
    }
  }
  if (atomic_load_explicit(&waiter->capturing, memory_order_acquire)) {
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "stream %u of domain %llu is capturing a graph: it cannot be ordered "
                          "after another stream's work inside the capture (use the buffer on it "
                          "once before the capture, or t4a_lane_wait_for_ before it)",
                          waiter->slot, (unsigned long long)waiter->domain);
  }
  t4a_status st;
  if (t->marker_seq < mark.seq) {
    if (t->marker == NULL) {
      st = T4A_CU(d, cuEventCreate, &t->marker, CU_EVENT_DISABLE_TIMING);
      if (st != T4A_OK) return t4a_lane_note_(waiter, st);
    }
    st = T4A_CU(d, cuEventRecord, t->marker, t->lane->stream);
    if (st != T4A_OK) return t4a_lane_note_(waiter, st);
    t->marker_seq = g->seq;
    t4a_counter_add(&t->lane->counters, T4A_COUNTER_cross_stream_events, 1);
    t4a_counter_add(&t->lane->counters, T4A_COUNTER_events_recorded, 1);
  }
  st = T4A_CU(d, cuStreamWaitEvent, waiter->stream, t->marker, 0);
  if (st != T4A_OK) return t4a_lane_note_(waiter, st);
  w->waited[mark.slot] = t->marker_seq;
  w->waited_gen[mark.slot] = t->gen;
  t4a_counter_add(&waiter->counters, T4A_COUNTER_cross_stream_waits, 1);
  return T4A_OK;
}

t4a_status t4a_lane_order_after_(t4a_lane *waiter, t4a_lane_mark_ mark) {
  if (waiter == NULL || mark.seq == 0) return T4A_OK;
  lane_group *g = atomic_load_explicit(&waiter->group, memory_order_acquire);
  if (g == NULL) return T4A_OK; /* no other stream in the domain: stream order */
  pthread_mutex_lock(&g->lock);
  t4a_status st = order_locked(g, waiter, mark);
  pthread_mutex_unlock(&g->lock);
  return st;
}

t4a_status t4a_lane_order_after_all_(t4a_lane *waiter) {
  if (waiter == NULL) return T4A_OK;
  lane_group *g = atomic_load_explicit(&waiter->group, memory_order_acquire);
  if (g == NULL) return T4A_OK;
  pthread_mutex_lock(&g->lock);
  t4a_status st = T4A_OK;
  for (uint32_t j = 0; j < GROUP_MAX && st == T4A_OK; j++) {
    group_member *t = &g->m[j];
    if (t->lane == NULL || t->lane == waiter || t->last_mark == 0) continue;
    st = order_locked(g, waiter, (t4a_lane_mark_){j, t->gen, t->last_mark});
  }
  pthread_mutex_unlock(&g->lock);
  return st;
}

uint64_t t4a_lane_mark_seq_(const t4a_lane *lane) {
  lane_group *g = lane != NULL ? atomic_load_explicit(&((t4a_lane *)lane)->group,
                                                      memory_order_acquire)
                               : NULL;
  if (g == NULL) return 0;
  pthread_mutex_lock(&g->lock);
  uint64_t seq = g->seq;
  pthread_mutex_unlock(&g->lock);
  return seq;
}

void t4a_lane_note_drained_(t4a_lane *lane, uint64_t seq) {
  lane_group *g = lane != NULL ? atomic_load_explicit(&lane->group, memory_order_acquire) : NULL;
  if (g == NULL) return;
  pthread_mutex_lock(&g->lock);
  if (seq > g->m[lane->slot].drained_seq) g->m[lane->slot].drained_seq = seq;
  pthread_mutex_unlock(&g->lock);
}

void t4a_lane_drop_marker_(t4a_lane *lane) {
  lane_group *g = lane != NULL ? atomic_load_explicit(&lane->group, memory_order_acquire) : NULL;
  if (g == NULL) return;
  pthread_mutex_lock(&g->lock);
  group_member *m = &g->m[lane->slot];
  CUevent marker = m->marker;
  m->marker = NULL;
  m->marker_seq = 0; /* the next order after this lane records a new one */
  pthread_mutex_unlock(&g->lock);
  if (marker == NULL) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_ctx_scope scope;
  int destroyed = 0;
  if (!t4a_lane_is_broken(lane) &&
      t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters) == T4A_OK) {
    destroyed = T4A_CU_QUIET(lane->driver, cuEventDestroy, marker) == T4A_OK;
    t4a_ctx_scope_exit_quiet(&scope);
  }
  if (!destroyed) t4a_counter_add(&lane->driver->counters, T4A_COUNTER_leaked, 1);
  t4a_error_restore(&saved);
}

/* The lane leaves its group (its context current, or `ctx_ok` 0): after a proved drain of what
 * was marked on it since its last one (a counted host wait), so later orderings after its marks
 * need nothing; without one the group is tainted. Destroys its marker. */
static void group_leave(t4a_lane *lane, int ctx_ok) {
  lane_group *g = atomic_load_explicit(&lane->group, memory_order_acquire);
  if (g == NULL) return;
  pthread_mutex_lock(&g->lock);
  group_member *m = &g->m[lane->slot];
  int need_drain = m->last_mark > m->drained_seq;
  CUevent marker = m->marker;
  pthread_mutex_unlock(&g->lock);
  int drained = !need_drain;
  if (need_drain && ctx_ok && !atomic_load_explicit(&lane->abandoned, memory_order_relaxed)) {
    t4a_counter_add(&lane->counters, T4A_COUNTER_host_waits, 1);
    drained = T4A_CU_QUIET(lane->driver, cuStreamSynchronize, lane->stream) == T4A_OK;
  }
  if (marker != NULL) {
    if (!ctx_ok || T4A_CU_QUIET(lane->driver, cuEventDestroy, marker) != T4A_OK) {
      /* Counted on the driver: the lane's own block goes with it. */
      t4a_counter_add(&lane->driver->counters, T4A_COUNTER_leaked, 1);
    }
  }
  pthread_mutex_lock(&g->lock);
  if (!drained) g->tainted = 1;
  m->lane = NULL;
  m->marker = NULL;
  m->marker_seq = m->last_mark = m->drained_seq = 0;
  pthread_mutex_unlock(&g->lock);
  atomic_store_explicit(&lane->group, NULL, memory_order_release);
  group_release(g);
}

t4a_status t4a_lane_create_sibling(t4a_lane *lane, const t4a_lane_options *options,
                                   t4a_lane **out) {
  if (out == NULL || lane == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane or out is NULL");
  }
  *out = NULL;
  t4a_lane_options opts = T4A_LANE_OPTIONS_INIT;
  if (options != NULL) opts = *options;
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_driver *driver = lane->driver;
  t4a_ctx_fault *fault = &driver->faults[lane->ordinal];
  t4a_lane *s = t4a_host_calloc(1, sizeof *s);
  if (s == NULL) return T4A_HOST_OUT_OF_MEMORY;
  lane_init_counters(s);
  lane_group *g = NULL;
  if ((st = lane_group_of(lane, &g)) != T4A_OK) {
    free(s);
    return st;
  }
  /* Take a slot first: a full group is refused before anything is made. */
  pthread_mutex_lock(&g->lock);
  uint32_t slot = GROUP_MAX;
  for (uint32_t j = 0; j < GROUP_MAX; j++) {
    if (g->m[j].lane == NULL) {
      slot = j;
      break;
    }
  }
  if (slot < GROUP_MAX) {
    group_member *m = &g->m[slot];
    m->lane = s; /* reserved: `s` is not reachable by anyone else yet */
    m->gen++;
    if (m->gen == 0) m->gen = 1;
    m->marker = NULL;
    m->marker_seq = m->last_mark = m->drained_seq = 0;
    for (uint32_t j = 0; j < GROUP_MAX; j++) {
      m->waited[j] = 0;
      m->waited_gen[j] = 0;
    }
  }
  pthread_mutex_unlock(&g->lock);
  if (slot == GROUP_MAX) {
    free(s);
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                          "domain %llu already has %d streams (the most a domain can have at once)",
                          (unsigned long long)lane->domain, GROUP_MAX);
  }
  atomic_fetch_add(&fault->lanes_open, 1);
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters)) == T4A_OK) {
    st = check_priority(driver, lane->ordinal, opts.priority);
    if (st == T4A_OK) {
      st = T4A_CU(driver, cuStreamCreateWithPriority, &s->stream, CU_STREAM_NON_BLOCKING,
                  opts.priority);
    }
    t4a_ctx_scope_exit_quiet(&scope);
    if (st != T4A_OK) (void)t4a_lane_note_(lane, st);
  }
  if (st != T4A_OK) {
    pthread_mutex_lock(&g->lock);
    g->m[slot].lane = NULL;
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_sub(&fault->lanes_open, 1);
    free(s);
    return st;
  }
  atomic_init(&s->refs, 1);
  atomic_init(&s->abandoned, 0);
  atomic_init(&s->counted_open, 1);
  atomic_init(&s->capturing, 0);
  pthread_mutex_init(&s->deferred_lock, NULL); /* default attributes: cannot fail on glibc */
  t4a_ctx_holder_retain(lane->holder);
  s->holder = lane->holder;
  s->driver = driver;
  s->ordinal = lane->ordinal;
  s->domain = lane->domain;
  s->priority = opts.priority;
  s->slot = slot;
  atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
  atomic_store_explicit(&s->group, g, memory_order_release);
  t4a_counter_add(&driver->counters, T4A_COUNTER_streams_created, 1);
  t4a_counter_add(&driver->counters, T4A_COUNTER_lanes_created, 1);
  t4a_counter_add(&driver->counters, T4A_COUNTER_streams_sibling, 1);
  *out = s;
  return T4A_OK;
}

t4a_status t4a_lane_priority_range(t4a_lane *lane, int *out_least, int *out_greatest) {
  if (lane == NULL || out_least == NULL || out_greatest == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane or out is NULL");
  }
  *out_least = *out_greatest = 0;
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters)) != T4A_OK) return st;
  int least = 0, greatest = 0;
  st = T4A_CU(lane->driver, cuCtxGetStreamPriorityRange, &least, &greatest);
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    return t4a_lane_note_(lane, st);
  }
  *out_least = least;
  *out_greatest = greatest;
  return t4a_ctx_scope_exit(&scope);
}

int t4a_lane_priority(const t4a_lane *lane) { return lane != NULL ? lane->priority : 0; }

static void lane_destroy(t4a_lane *lane) {
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_driver *d = lane->driver;
  t4a_ctx_scope scope;
  if (atomic_load_explicit(&lane->abandoned, memory_order_relaxed)) {
    /* No proved drain: the stream may still hold work; leave it to the driver and count it. */
    t4a_counter_add(&d->counters, T4A_COUNTER_streams_leaked, 1);
    group_leave(lane, 0); /* no driver call either: its marker is leaked (counted), the group
                           * tainted if it had marks */
  } else if (t4a_ctx_scope_enter(&scope, lane->holder, &lane->counters) == T4A_OK) {
    group_leave(lane, 1);
    if (T4A_CU_QUIET(d, cuStreamDestroy, lane->stream) == T4A_OK) {
      t4a_counter_add(&d->counters, T4A_COUNTER_streams_destroyed, 1);
    } else {
      t4a_counter_add(&d->counters, T4A_COUNTER_streams_leaked, 1);
    }
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    /* Without its context the stream cannot be destroyed safely: leak it and count (A5). */
    group_leave(lane, 0);
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

t4a_status t4a_lane_admit_(t4a_lane *lane, t4a_ctx_scope *scope, t4a_counters *counters,
                           t4a_counter_shard_ *shard, int *capturing) {
  *capturing = 0;
  if (lane == NULL) {
    memset(scope, 0, sizeof *scope);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane is NULL");
  }
  t4a_status st = t4a_ctx_scope_enter_counted_(scope, lane->holder, counters, shard);
  if (st == T4A_OK) *capturing = atomic_load_explicit(&lane->capturing, memory_order_acquire);
  return st;
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
