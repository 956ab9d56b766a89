/* Admission, completion epochs, keepalives, quarantine and teardown. */
#define _GNU_SOURCE
#include "t4a/retire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/oplock.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_retire/retire_internal.h"

#define EPOCH_RECENT 8 /* a kernel's module and buffers, a rebind's old and new buffer */

/* One epoch: the keepalives of a run of admissions, and (once sealed) the event after them. */
typedef struct epoch {
  t4a_keepalive *items;
  uint32_t count, capacity;
  uint32_t admissions;
  /* Open-addressing set of the objects held, for deduplication (capacity 2 * items capacity). */
  void **set;
  uint32_t set_capacity;
  /* The objects most recently added or found: each is in `set` (cleared with it), so a repeat
   * (the same module and buffers launch after launch) is found without hashing. */
  const void *recent[EPOCH_RECENT];
  uint32_t recent_next;
  CUevent event;
} epoch;

typedef struct release_list {
  t4a_keepalive *items;
  size_t count, capacity;
} release_list;

struct t4a_retire {
  t4a_oplock_ lock;
  _Atomic(const void *) owner; /* the thread holding `lock`, or NULL */
  t4a_lane *lane;              /* a reference */
  t4a_retire_target_ target;   /* the lane, its domain and stream (t4a_retire_target_get_) */
  t4a_driver *driver;          /* borrowed from the lane */
  t4a_counters *counters;      /* the lane's block */
  /* This retire's single-writer shard of `counters` (NULL: none was free), written only under
   * `lock` (count_locked). */
  t4a_counter_shard_ *shard;
  uint32_t seal_at;
  uint32_t max_sealed;
  epoch open;
  epoch *sealed; /* ring of sealed epochs, oldest first */
  uint32_t sealed_head, sealed_count;
  CUevent *spare_events; /* recycled, DISABLE_TIMING */
  uint32_t spare_count, spare_capacity;
  t4a_keepalive *quarantine;
  size_t quarantine_count, quarantine_capacity;
  release_list deferred; /* keepalives of completed epochs, released after unlock */
  /* The storage of a deferred list whose releases ran, kept for the next retirement so that a
   * warm path allocates nothing even when another thread holds `lock` at that moment. Guarded by
   * spare_busy, a spin flag held for a few stores and never while waiting for anything. (The
   * list in `deferred` is taken only under `lock`.) */
  atomic_flag spare_busy;
  t4a_keepalive *spare_list;
  size_t spare_list_capacity;
  /* Capture mode (t4a_retire_capture_begin/_end): the lane's stream is being captured into a
   * graph. Admissions then enqueue nothing that runs now: their keepalives gather in `capture`
   * (handed to the graph at the end), no epoch is sealed, nothing is observed. */
  int capturing;
  epoch capture;
  const void *capture_thread; /* the thread that began it (THREAD_LOCAL: only it may end it) */
  _Atomic uint64_t capture_seq; /* captures begun so far (t4a_retire_capture_seq) */
  _Atomic uint64_t drains;      /* drain_by_stream's successes (t4a_retire_drains_) */
  /* Lock order: (lane domain, order) ascending; `order` is unique per retire (two retires of one
   * lane share its domain). `held_next`: while the owner holds `lock`, the next lock in its
   * thread's list of held retire locks (owner thread only). */
  uint64_t order;
  struct t4a_retire *held_next;
};

/* A distinct address per thread identifies the lock owner without touching pthread_t racily. */
static _Thread_local char t_thread_id;
/* The retire locks this thread holds, most recently taken first (linked through held_next). */
static _Thread_local t4a_retire *t_held;
/* Retire order numbers: unique in the process. */
static _Atomic uint64_t g_next_order = 1;

/* Counts under r's lock: into its shard (a load and a store; the lock orders its writers) or,
 * without one or for a counter the shard has no word for, into the lane's block. */
static inline void count_locked(t4a_retire *r, t4a_counter_id id, uint64_t n) {
  t4a_counter_add_owned_(r->counters, r->shard, id, n);
}

/* ---- small containers ---- */

static size_t ptr_hash(const void *p, uint32_t cap) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= (uintptr_t)0xed5ad4bbU;
  x ^= x >> 11;
  return (size_t)(x & (cap - 1));
}

/* The most keepalives one epoch may hold (a bound on admission_begin's request, too). */
#define MAX_EPOCH_KEEPALIVES (1u << 24)

/* epoch_reserve's growth: room for `extra` more keepalives. */
static __attribute__((noinline)) t4a_status epoch_grow(epoch *e, uint32_t extra) {
  uint64_t need = (uint64_t)e->count + extra;
  if (need > MAX_EPOCH_KEEPALIVES) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                          "an epoch holds at most %u keepalives (%llu asked)",
                          MAX_EPOCH_KEEPALIVES, (unsigned long long)need);
  }
  uint32_t cap = e->capacity ? e->capacity : 16;
  while (cap < need) cap *= 2;
  t4a_keepalive *items = t4a_host_calloc(cap, sizeof *items);
  if (items == NULL) return T4A_HOST_OUT_OF_MEMORY;
  void **set = t4a_host_calloc((size_t)cap * 2, sizeof *set);
  if (set == NULL) {
    free(items);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  if (e->count) memcpy(items, e->items, e->count * sizeof *items);
  for (uint32_t i = 0; i < e->count; i++) {
    size_t h = ptr_hash(items[i].object, cap * 2);
    while (set[h] != NULL) h = (h + 1) & (cap * 2 - 1);
    set[h] = items[i].object;
  }
  free(e->items);
  free(e->set);
  e->items = items;
  e->set = set;
  e->capacity = cap;
  e->set_capacity = cap * 2;
  return T4A_OK;
}

/* Ensures room for `extra` more keepalives without any allocation later. */
static inline t4a_status epoch_reserve(epoch *e, uint32_t extra) {
  if (T4A_LIKELY((uint64_t)e->count + extra <= e->capacity)) return T4A_OK;
  return epoch_grow(e, extra);
}

/* Adds within capacity; returns 0 if the object was already held (caller releases the dup). */
static void epoch_remember(epoch *e, const void *object) {
  e->recent[e->recent_next] = object;
  e->recent_next = (e->recent_next + 1) % EPOCH_RECENT;
}

/* Whether `object` (not NULL) is one of the epoch's recent objects (so in its set). */
static inline int epoch_recent(const epoch *e, const void *object) {
  for (int i = 0; i < EPOCH_RECENT; i++) {
    if (e->recent[i] == object) return 1;
  }
  return 0;
}

static int epoch_add(epoch *e, t4a_keepalive k) {
  if (k.object != NULL && epoch_recent(e, k.object)) return 0;
  size_t h = ptr_hash(k.object, e->set_capacity);
  while (e->set[h] != NULL) {
    if (e->set[h] == k.object) {
      epoch_remember(e, k.object);
      return 0;
    }
    h = (h + 1) & (e->set_capacity - 1);
  }
  e->set[h] = k.object;
  e->items[e->count++] = k;
  epoch_remember(e, k.object);
  return 1;
}

static void epoch_clear_set(epoch *e) {
  if (e->set != NULL) memset(e->set, 0, e->set_capacity * sizeof *e->set);
  memset(e->recent, 0, sizeof e->recent);
  e->recent_next = 0;
}

static void epoch_free(epoch *e) {
  free(e->items);
  free(e->set);
  memset(e, 0, sizeof *e);
}

/* ---- lock ---- */

int t4a_retire_lock_before_(const t4a_retire *a, const t4a_retire *b) {
  uint64_t da = t4a_lane_domain(a->lane), db = t4a_lane_domain(b->lane);
  return da < db || (da == db && a->order < b->order);
}

/* The lock this thread holds that `r`'s must not be waited for under: `r` itself, or one ordered
 * at or after it. NULL when waiting for r's lock keeps this thread's locks in order. */
static const t4a_retire *held_against(const t4a_retire *r) {
  for (const t4a_retire *h = t_held; h != NULL; h = h->held_next) {
    if (h == r || !t4a_retire_lock_before_(h, r)) return h;
  }
  return NULL;
}

int t4a_retire_lock_would_invert_(const t4a_retire *r) {
  return r != NULL && t_held != NULL && held_against(r) != NULL;
}

/* `ordered`: refuse a lock ordered before one this thread holds (everything but teardown, which
 * no other thread may be waiting on). */
static t4a_status lock_enter_(t4a_retire *r, int ordered) {
  if (T4A_UNLIKELY(t4a_in_host_fn_())) {
    /* A host function runs while its stream waits; the lock may be held by a thread waiting for
     * that stream (a t4a_retire_wait), so waiting here could never end. */
    t4a_counter_add(r->counters, T4A_COUNTER_admissions_refused_reentry, 1);
    return t4a_host_fn_refuse_("an operation on a lane (admission, observation or teardown)");
  }
  if (atomic_load_explicit(&r->owner, memory_order_relaxed) == &t_thread_id) {
    t4a_counter_add(r->counters, T4A_COUNTER_admissions_refused_reentry, 1);
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "lane %llu: re-entered from the thread that holds its operation lock "
                          "(a callback called back into its own runtime)",
                          (unsigned long long)t4a_lane_domain(r->lane));
  }
  const t4a_retire *h = ordered && t_held != NULL ? held_against(r) : NULL;
  if (h != NULL) {
    /* Waiting here could deadlock against a thread that holds this lock and waits for h's (a
     * copy or a raw scope taking both in order). */
    t4a_counter_add(r->counters, T4A_COUNTER_admissions_refused_reentry, 1);
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "lane %llu: entered from inside an admission of lane %llu (a raw "
                          "scope's callback?), out of lock order: lanes are locked in ascending "
                          "domain order (take both at once with t4a_raw_run_many)",
                          (unsigned long long)t4a_lane_domain(r->lane),
                          (unsigned long long)t4a_lane_domain(h->lane));
  }
  /* Teardown out of order (inside a scope of a later lane): no other thread may use the retire,
   * so the lock is free; a try-lock takes it without a wait (and without a lock-order edge). */
  if (ordered || held_against(r) == NULL || !t4a_oplock_trylock_(&r->lock)) {
    t4a_oplock_lock_(&r->lock);
  }
  atomic_store_explicit(&r->owner, &t_thread_id, memory_order_relaxed);
  r->held_next = t_held;
  t_held = r;
  return T4A_OK;
}

static t4a_status lock_enter(t4a_retire *r) { return lock_enter_(r, 1); }

static void lock_exit(t4a_retire *r) {
  /* Usually the most recent lock; any order is handled. */
  for (t4a_retire **p = &t_held; *p != NULL; p = &(*p)->held_next) {
    if (*p == r) {
      *p = r->held_next;
      break;
    }
  }
  r->held_next = NULL;
  atomic_store_explicit(&r->owner, NULL, memory_order_relaxed);
  t4a_oplock_unlock_(&r->lock);
}

/* ---- events and epochs (lock held, context active) ---- */

static t4a_status take_event(t4a_retire *r, CUevent *out) {
  if (r->spare_count > 0) {
    *out = r->spare_events[--r->spare_count];
    return T4A_OK;
  }
  return T4A_CU(r->driver, cuEventCreate, out, CU_EVENT_DISABLE_TIMING);
}

/* Destroys an event (context active); one the driver refuses to destroy is leaked and counted. */
static void destroy_event(t4a_retire *r, CUevent ev) {
  if (T4A_CU_QUIET(r->driver, cuEventDestroy, ev) != T4A_OK) {
    t4a_counter_add(r->counters, T4A_COUNTER_leaked, 1);
  }
}

static void put_event(t4a_retire *r, CUevent ev) {
  if (r->spare_count < r->spare_capacity) {
    r->spare_events[r->spare_count++] = ev;
  } else {
    destroy_event(r, ev);
  }
}

/* Seals the open epoch with an event. Needs room in the ring (ensured by the caller). */
static t4a_status seal_open(t4a_retire *r) {
  if (r->open.admissions == 0 && r->open.count == 0) return T4A_OK;
  CUevent ev = NULL;
  t4a_status st = take_event(r, &ev);
  if (st != T4A_OK) return st;
  st = T4A_CU(r->driver, cuEventRecord, ev, t4a_lane_stream(r->lane));
  if (st != T4A_OK) {
    put_event(r, ev);
    return t4a_lane_note_(r->lane, st);
  }
  t4a_counter_add(r->counters, T4A_COUNTER_events_recorded, 1);
  t4a_counter_add(r->counters, T4A_COUNTER_epochs_sealed, 1);
  uint32_t slot = (r->sealed_head + r->sealed_count) % r->max_sealed;
  epoch *dst = &r->sealed[slot];
  /* Swap storage: the sealed slot's old (empty) arrays become the new open epoch's. */
  epoch old = *dst;
  *dst = r->open;
  dst->event = ev;
  epoch_clear_set(dst);
  r->open = old;
  r->open.count = 0;
  r->open.admissions = 0;
  r->open.event = NULL;
  epoch_clear_set(&r->open);
  r->sealed_count++;
  return T4A_OK;
}

/* The spare list slot's flag (held for a few stores, never while waiting for anything). */
static void spare_lock(t4a_retire *r) {
  while (atomic_flag_test_and_set_explicit(&r->spare_busy, memory_order_acquire)) {
  }
}
static void spare_unlock(t4a_retire *r) {
  atomic_flag_clear_explicit(&r->spare_busy, memory_order_release);
}

/* Moves a completed epoch's keepalives to the deferred list, released after the lock is dropped
 * (a release may run arbitrary code). If the list cannot grow, they are released in place: still
 * correct, since their work completed. */
static void defer_release(t4a_retire *r, epoch *e) {
  release_list *l = &r->deferred;
  if (l->items == NULL && e->count > 0) { /* the storage a past retirement left, if any */
    spare_lock(r);
    l->items = r->spare_list;
    l->capacity = r->spare_list_capacity;
    r->spare_list = NULL;
    r->spare_list_capacity = 0;
    spare_unlock(r);
  }
  if (l->count + e->count > l->capacity) {
    size_t cap = l->capacity ? l->capacity : 64;
    while (cap < l->count + e->count) cap *= 2;
    t4a_error saved; /* the fallback below absorbs a failure: keep the caller's detail */
    t4a_error_last(&saved);
    t4a_keepalive *n = t4a_host_realloc(l->items, cap * sizeof *n);
    if (n != NULL) {
      l->items = n;
      l->capacity = cap;
    } else {
      t4a_error_restore(&saved);
    }
  }
  for (uint32_t i = 0; i < e->count; i++) {
    if (l->count < l->capacity) {
      l->items[l->count++] = e->items[i];
    } else {
      e->items[i].release(e->items[i].object);
      t4a_counter_add(r->counters, T4A_COUNTER_keepalives_released, 1);
    }
  }
  e->count = 0;
  e->admissions = 0;
  epoch_clear_set(e);
}

/* Drops the lock, then releases what completed epochs handed over. */
static void unlock_and_release(t4a_retire *r) {
  if (r->deferred.count == 0) { /* the warm path: nothing completed meanwhile */
    lock_exit(r);
    return;
  }
  release_list l = r->deferred;
  if (l.count > 0) r->deferred = (release_list){0};
  lock_exit(r);
  if (l.count == 0) return;
  for (size_t i = 0; i < l.count; i++) l.items[i].release(l.items[i].object);
  t4a_counter_add(r->counters, T4A_COUNTER_keepalives_released, l.count);
  /* Hand the list's storage back for the next retirement, so that a warm chain allocates
   * nothing: into the spare slot (never `lock`, which another thread may hold; callers may hold
   * locks ordered after it). If the slot is taken meanwhile, the smaller storage is freed. */
  spare_lock(r);
  if (r->spare_list_capacity < l.capacity) {
    t4a_keepalive *old = r->spare_list;
    r->spare_list = l.items;
    r->spare_list_capacity = l.capacity;
    l.items = old;
  }
  spare_unlock(r);
  free(l.items);
}

/* Retires completed sealed epochs in order; `wait_oldest` blocks on the oldest first. */
static t4a_status retire_completed(t4a_retire *r, int wait_oldest) {
  while (r->sealed_count > 0) {
    epoch *e = &r->sealed[r->sealed_head];
    t4a_status st;
    if (wait_oldest) {
      t4a_counter_add(r->counters, T4A_COUNTER_host_waits, 1);
      st = T4A_CU(r->driver, cuEventSynchronize, e->event);
      wait_oldest = 0;
    } else {
      st = T4A_CU(r->driver, cuEventQuery, e->event);
    }
    if (st == T4A_NOT_READY) return T4A_OK;
    if (st != T4A_OK) return t4a_lane_note_(r->lane, st);
    defer_release(r, e);
    put_event(r, e->event);
    e->event = NULL;
    r->sealed_head = (r->sealed_head + 1) % r->max_sealed;
    r->sealed_count--;
    t4a_counter_add(r->counters, T4A_COUNTER_epochs_retired, 1);
  }
  return T4A_OK;
}

/* Waits for everything this retire enqueued with one cuStreamSynchronize on the lane's stream
 * (a counted host wait), then retires every sealed epoch and the open one. The caller holds the
 * lock, so no admission of this retire enqueues meanwhile: what the synchronisation covers is a
 * superset of what a record after the open epoch and a wait on it would cover (every epoch's work
 * is on the lane's stream), with one driver call less and no event. Work another retire of the
 * lane enqueues meanwhile may be waited for too, never retired here: only this retire's epochs,
 * all enqueued before the call, are. A failure retires nothing (the epochs stay, the open one
 * unsealed, for the next observation). */
static t4a_status drain_by_stream(t4a_retire *r) {
  if (r->sealed_count == 0 && r->open.admissions == 0 && r->open.count == 0) return T4A_OK;
  t4a_counter_add(r->counters, T4A_COUNTER_host_waits, 1);
  t4a_status st = T4A_CU(r->driver, cuStreamSynchronize, t4a_lane_stream(r->lane));
  if (st != T4A_OK) return t4a_lane_note_(r->lane, st);
  atomic_fetch_add_explicit(&r->drains, 1, memory_order_release);
  uint64_t retired = 0;
  while (r->sealed_count > 0) {
    epoch *e = &r->sealed[r->sealed_head];
    defer_release(r, e);
    put_event(r, e->event); /* its record completed: reusable */
    e->event = NULL;
    r->sealed_head = (r->sealed_head + 1) % r->max_sealed;
    r->sealed_count--;
    retired++;
  }
  if (r->open.admissions > 0 || r->open.count > 0) {
    defer_release(r, &r->open); /* retired without a seal: no event */
    retired++;
  }
  t4a_counter_add(r->counters, T4A_COUNTER_epochs_retired, retired);
  return T4A_OK;
}

/* ---- creation and teardown ---- */

t4a_status t4a_retire_create(t4a_lane *lane, const t4a_retire_options *options,
                             t4a_retire **out) {
  if (out == NULL || lane == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane or out is NULL");
  }
  *out = NULL;
  t4a_retire_options o = T4A_RETIRE_OPTIONS_INIT;
  if (options != NULL) o = *options;
  if (o.max_pending_records == 0) o.max_pending_records = 1024;
  if (o.max_sealed_epochs == 0) o.max_sealed_epochs = 64;
  if (o.max_pending_records < 2 || o.max_pending_records > (1u << 24) ||
      o.max_sealed_epochs > 4096) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "max_pending_records must be in [2, 2^24] and max_sealed_epochs <= 4096");
  }
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_retire *r = t4a_host_calloc(1, sizeof *r);
  if (r == NULL) return T4A_HOST_OUT_OF_MEMORY;
  r->sealed = t4a_host_calloc(o.max_sealed_epochs, sizeof *r->sealed);
  r->order = atomic_fetch_add_explicit(&g_next_order, 1, memory_order_relaxed);
  r->spare_capacity = 8;
  r->spare_events = t4a_host_calloc(r->spare_capacity, sizeof *r->spare_events);
  if (r->sealed == NULL || r->spare_events == NULL) goto oom;
  /* Every epoch of the ring gets its keepalive storage now, so a warm chain allocates nothing
   * even while the ring makes its first round (an epoch that needs more grows then). */
  for (uint32_t i = 0; i < o.max_sealed_epochs; i++) {
    if (epoch_reserve(&r->sealed[i], 16) != T4A_OK) goto oom_epochs;
  }
  if (epoch_reserve(&r->open, 16) != T4A_OK) goto oom_epochs;
  atomic_init(&r->lock.state, 0);
  atomic_init(&r->owner, NULL);
  atomic_flag_clear(&r->spare_busy);
  r->lane = lane;
  t4a_lane_retain(lane);
  r->target = (t4a_retire_target_){
      .lane = lane, .domain = t4a_lane_domain(lane), .stream = t4a_lane_stream(lane)};
  r->driver = t4a_lane_driver(lane);
  r->counters = t4a_lane_counters(lane);
  r->shard = t4a_counters_take_shard_(r->counters);
  r->seal_at = o.max_pending_records / 2;
  r->max_sealed = o.max_sealed_epochs;
  *out = r;
  return T4A_OK;
oom_epochs:
  for (uint32_t i = 0; i < o.max_sealed_epochs; i++) epoch_free(&r->sealed[i]);
  epoch_free(&r->open);
oom:
  free(r->sealed);
  free(r->spare_events);
  free(r);
  return T4A_HOST_OUT_OF_MEMORY;
}

/* How many objects a keepalive stands for in the leak count (t4a_keepalive.objects). */
static uint64_t weight(t4a_keepalive k) { return k.objects ? k.objects : 1; }

static uint64_t epoch_weight(const epoch *e) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < e->count; i++) n += weight(e->items[i]);
  return n;
}

static void quarantine_add(t4a_retire *r, t4a_keepalive k) {
  if (r->quarantine_count == r->quarantine_capacity) {
    size_t cap = r->quarantine_capacity ? r->quarantine_capacity * 2 : 8;
    t4a_error saved; /* inside t4a_admission_fail: the failure being reported keeps its detail */
    t4a_error_last(&saved);
    t4a_keepalive *n = t4a_host_realloc(r->quarantine, cap * sizeof *n);
    if (n == NULL) {
      t4a_error_restore(&saved);
      /* Cannot even remember it: leak it (never release on a guess) and count. */
      t4a_counter_add(r->counters, T4A_COUNTER_leaked, weight(k));
      return;
    }
    r->quarantine = n;
    r->quarantine_capacity = cap;
  }
  r->quarantine[r->quarantine_count++] = k;
  t4a_counter_add(r->counters, T4A_COUNTER_quarantined, 1);
}

t4a_status t4a_retire_destroy(t4a_retire *r) {
  if (r == NULL) return T4A_OK;
  /* Not order-checked: no other thread may use (so none waits for) a retire being destroyed. */
  t4a_status st = lock_enter_(r, 0);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  st = t4a_lane_check(r->lane);
  int scoped = 0;
  if (st == T4A_OK && (st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(r->lane), r->counters)) ==
                          T4A_OK) {
    scoped = 1;
    if (r->capturing) {
      /* A capture never ended (its end failed before reaching the driver, say): end it now, or
       * the stream stays in capture mode and, THREAD_LOCAL, the capturing thread's later unsafe
       * calls fail. Its graph is only a recording no one will launch. (From another thread the
       * driver refuses; the drain below then fails and the lane is abandoned, as before.) */
      CUgraph g = NULL;
      (void)T4A_CU_QUIET(r->driver, cuStreamEndCapture, t4a_lane_stream(r->lane), &g);
      if (g != NULL && T4A_CU_QUIET(r->driver, cuGraphDestroy, g) != T4A_OK) {
        t4a_counter_add(r->counters, T4A_COUNTER_leaked, 1);
      }
    }
    /* Proof of drain: everything enqueued on the stream finished without error. */
    uint64_t marked = t4a_lane_mark_seq_(r->lane);
    t4a_counter_add(r->counters, T4A_COUNTER_host_waits, 1);
    st = t4a_lane_note_(r->lane,
                        T4A_CU(r->driver, cuStreamSynchronize, t4a_lane_stream(r->lane)));
    if (st == T4A_OK) t4a_lane_note_drained_(r->lane, marked);
  }
  size_t leaked = 0;
  if (st == T4A_OK) {
    for (uint32_t i = 0; i < r->sealed_count; i++) {
      defer_release(r, &r->sealed[(r->sealed_head + i) % r->max_sealed]);
    }
    defer_release(r, &r->open);
    /* Quarantined objects are never released: the work of unknown state may have run on another
     * stream or context than this lane's, which this drain does not cover. They are leaked and
     * counted. */
    for (size_t i = 0; i < r->quarantine_count; i++) leaked += weight(r->quarantine[i]);
    t4a_counter_add(r->counters, T4A_COUNTER_leaked, leaked);
    leaked = 0;
  } else {
    for (uint32_t i = 0; i < r->sealed_count; i++) {
      leaked += epoch_weight(&r->sealed[(r->sealed_head + i) % r->max_sealed]);
    }
    leaked += epoch_weight(&r->open);
    for (size_t i = 0; i < r->quarantine_count; i++) leaked += weight(r->quarantine[i]);
    t4a_counter_add(r->counters, T4A_COUNTER_leaked, leaked);
    t4a_lane_abandon_(r->lane);
  }
  /* Events: destroyed whenever the context is active (the driver defers the destruction of an
   * event whose work is pending); without the context they are leaked and counted. */
  size_t events_leaked = 0;
  for (uint32_t i = 0; i < r->max_sealed; i++) {
    if (r->sealed[i].event != NULL) {
      if (scoped) {
        destroy_event(r, r->sealed[i].event);
      } else {
        events_leaked++;
      }
    }
    epoch_free(&r->sealed[i]);
  }
  for (uint32_t i = 0; i < r->spare_count; i++) {
    if (scoped) {
      destroy_event(r, r->spare_events[i]);
    } else {
      events_leaked++;
    }
  }
  t4a_counter_add(r->counters, T4A_COUNTER_leaked, events_leaked);
  if (scoped) t4a_ctx_scope_exit_quiet(&scope);
  epoch_free(&r->open);
  /* A capture never ended: its work was only recorded into a graph that no one will launch. */
  if (r->capturing) {
    defer_release(r, &r->capture);
    t4a_lane_set_capturing_(r->lane, 0);
  }
  epoch_free(&r->capture);
  unlock_and_release(r);
  free(r->deferred.items);
  free(r->spare_list);
  free(r->sealed);
  free(r->spare_events);
  free(r->quarantine);
  /* Its values stay counted in the lane's block; a later retire of the lane may own it. */
  t4a_counters_put_shard_(r->counters, r->shard);
  t4a_lane_release(r->lane);
  free(r);
  return st;
}

t4a_lane *t4a_retire_lane(const t4a_retire *r) { return r != NULL ? r->lane : NULL; }

const t4a_retire_target_ *t4a_retire_target_get_(const t4a_retire *r) { return &r->target; }

/* ---- admission ---- */

t4a_status t4a_admission_begin(t4a_retire *r, uint32_t num_keepalives, t4a_admission *adm) {
  if (r == NULL || adm == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or admission is NULL");
  }
  /* Filled in on success; cleared on every failure (commit and abort are then no-ops). */
  adm->priv_retire = NULL;
  adm->priv_kept = 0;
  adm->priv_deduplicated = 0;
  t4a_status st = lock_enter(r);
  if (st != T4A_OK) {
    memset(adm, 0, sizeof *adm);
    return st;
  }
  /* The lane's check and context (the retire holds its lane, and the lane its holder, past the
   * admission's end). */
  int lane_capturing = 0;
  if ((st = t4a_lane_admit_(r->lane, &adm->priv_scope, r->counters, r->shard, &lane_capturing)) !=
      T4A_OK) {
    goto unlock;
  }
  if (!r->capturing && lane_capturing) {
    /* Another retire of this lane is capturing its stream: this work would be recorded into
     * that graph while its keepalives went to this retire's epochs. */
    st = t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                        "lane %llu is being captured into a graph through another retire",
                        (unsigned long long)t4a_lane_domain(r->lane));
    goto fail_scoped;
  }
  if (r->capturing) {
    /* Nothing is sealed or observed during a capture: the keepalives go to the graph. */
    if ((st = epoch_reserve(&r->capture, num_keepalives)) != T4A_OK) goto fail_scoped;
    adm->priv_retire = r;
    adm->priv_reserved = num_keepalives;
    return T4A_OK;
  }
  if (r->open.admissions >= r->seal_at) {
    if (r->sealed_count == r->max_sealed) {
      /* The ring is full: retire what finished; if nothing did, wait for the oldest. */
      st = retire_completed(r, 0);
      if (st == T4A_OK && r->sealed_count == r->max_sealed) st = retire_completed(r, 1);
      if (st != T4A_OK) goto fail_scoped;
    }
    if ((st = seal_open(r)) != T4A_OK) goto fail_scoped;
  }
  if ((st = epoch_reserve(&r->open, num_keepalives)) != T4A_OK) goto fail_scoped;
  adm->priv_retire = r;
  adm->priv_reserved = num_keepalives;
  return T4A_OK;
fail_scoped:
  t4a_ctx_scope_exit_quiet(&adm->priv_scope);
unlock:
  unlock_and_release(r);
  memset(adm, 0, sizeof *adm);
  return st;
}

void t4a_admission_keep(t4a_admission *adm, t4a_keepalive k) {
  if (adm == NULL || adm->priv_retire == NULL || k.release == NULL) return;
  t4a_retire *r = adm->priv_retire;
  epoch *e = r->capturing ? &r->capture : &r->open;
  if (adm->priv_kept >= adm->priv_reserved && epoch_reserve(e, 1) != T4A_OK) {
    t4a_counter_add(r->counters, T4A_COUNTER_leaked, weight(k));
    return;
  }
  adm->priv_kept++;
  if (epoch_add(e, k)) {
    count_locked(r, T4A_COUNTER_keepalives_held, 1);
  } else {
    /* The open epoch already holds this object until the same completion: drop the extra ref. */
    k.release(k.object);
    adm->priv_deduplicated++;
  }
}

/* The warm case of a borrowed keepalive: the epoch holds the object already (a recent one) and
 * the admission is within its reservation; then it is counted as such and 1 is returned. */
static inline int keep_warm(t4a_admission *adm, const epoch *e, const void *object) {
  if (adm->priv_kept >= adm->priv_reserved || !epoch_recent(e, object)) return 0;
  adm->priv_kept++;
  adm->priv_deduplicated++;
  return 1;
}

/* One borrowed keepalive into epoch e (the admission's, lock held). */
static void keep_borrowed(t4a_admission *adm, t4a_retire *r, epoch *e, t4a_keepalive k,
                          void (*retain)(void *)) {
  if (adm->priv_kept >= adm->priv_reserved && epoch_reserve(e, 1) != T4A_OK) {
    retain(k.object); /* leaked: the work may use it, so it is never released */
    t4a_counter_add(r->counters, T4A_COUNTER_leaked, weight(k));
    return;
  }
  adm->priv_kept++;
  /* The caller's reference keeps the object alive through this call, and the lock is held: the
   * epoch's own reference can be taken after the insertion. */
  if (epoch_add(e, k)) {
    retain(k.object);
    count_locked(r, T4A_COUNTER_keepalives_held, 1);
  } else {
    adm->priv_deduplicated++;
  }
}

void t4a_admission_keep_borrowed(t4a_admission *adm, t4a_keepalive k, void (*retain)(void *)) {
  if (adm == NULL || adm->priv_retire == NULL || k.release == NULL || retain == NULL) return;
  t4a_retire *r = adm->priv_retire;
  epoch *e = r->capturing ? &r->capture : &r->open;
  if (k.object != NULL && keep_warm(adm, e, k.object)) return;
  keep_borrowed(adm, r, e, k, retain);
}

/* The rest of t4a_admission_keep_borrowed_n_, from the first object not held yet. */
static __attribute__((noinline)) void keep_borrowed_rest(t4a_admission *adm, t4a_retire *r,
                                                         epoch *e, void *const *objects, uint32_t n,
                                                         void (*release)(void *),
                                                         void (*retain)(void *)) {
  for (uint32_t i = 0; i < n; i++) {
    if (objects[i] == NULL) continue;
    keep_borrowed(adm, r, e, (t4a_keepalive){.object = objects[i], .release = release}, retain);
  }
}

void t4a_admission_keep_borrowed_n_(t4a_admission *adm, void *const *objects, uint32_t n,
                                    void (*release)(void *), void (*retain)(void *)) {
  if (adm == NULL || adm->priv_retire == NULL || release == NULL || retain == NULL) return;
  t4a_retire *r = adm->priv_retire;
  epoch *e = r->capturing ? &r->capture : &r->open;
  /* The warm case, a leaf: each object is held already (a recent one), within the reservation.
   * From the first that is not, keep_borrowed_rest. */
  for (uint32_t i = 0; i < n; i++) {
    void *o = objects[i];
    if (o == NULL) continue;
    if (!keep_warm(adm, e, o)) {
      keep_borrowed_rest(adm, r, e, objects + i, n - i, release, retain);
      return;
    }
  }
}

static void admission_end(t4a_admission *adm, int enqueued) {
  t4a_retire *r = adm->priv_retire;
  if (adm->priv_deduplicated > 0) {
    count_locked(r, T4A_COUNTER_keepalives_deduplicated, adm->priv_deduplicated);
  }
  if (enqueued) {
    if (r->capturing) {
      r->capture.admissions++;
    } else {
      r->open.admissions++;
    }
    count_locked(r, T4A_COUNTER_admissions, 1);
  }
  /* A failed restore is counted (ctx_restore_failures); commit and abort have no status for it. */
  t4a_lane_admit_exit_(&adm->priv_scope);
  unlock_and_release(r);
  adm->priv_retire = NULL; /* ended: a second commit or abort is a no-op */
}

void t4a_admission_count_(t4a_admission *adm, t4a_counter_id id, uint64_t n) {
  if (adm == NULL || adm->priv_retire == NULL) return;
  count_locked(adm->priv_retire, id, n);
}

void t4a_admission_commit_counting_(t4a_admission *adm, t4a_counter_id id, uint64_t n) {
  if (adm == NULL || adm->priv_retire == NULL) return;
  count_locked(adm->priv_retire, id, n);
  admission_end(adm, 1);
}

void t4a_admission_commit(t4a_admission *adm) {
  if (adm == NULL || adm->priv_retire == NULL) return;
  admission_end(adm, 1);
}

t4a_status t4a_admission_abort(t4a_admission *adm, t4a_status status) {
  if (adm == NULL || adm->priv_retire == NULL) return status;
  t4a_lane_note_(adm->priv_retire->lane, status);
  admission_end(adm, 0);
  return status;
}

t4a_status t4a_admission_fail(t4a_admission *adm, t4a_status status,
                              const t4a_keepalive *uncertain, size_t num_uncertain) {
  if (adm == NULL || adm->priv_retire == NULL) return status;
  t4a_retire *r = adm->priv_retire;
  t4a_lane_note_(r->lane, status);
  for (size_t i = 0; i < num_uncertain; i++) {
    if (uncertain[i].release != NULL) quarantine_add(r, uncertain[i]);
  }
  admission_end(adm, 1);
  return status;
}

/* ---- observation ---- */

static t4a_status refuse_in_capture(t4a_retire *r, const char *what) {
  return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                        "lane %llu is capturing a graph: %s cannot be captured (end the capture "
                        "first)",
                        (unsigned long long)t4a_lane_domain(r->lane), what);
}

static t4a_status observe(t4a_retire *r, int wait_all) {
  if (r == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire is NULL");
  t4a_status st = lock_enter(r);
  if (st != T4A_OK) return st;
  if (r->capturing || t4a_lane_is_capturing(r->lane)) {
    st = refuse_in_capture(r, wait_all ? "waiting for the lane's work" : "observing completions");
    lock_exit(r);
    return st;
  }
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(r->lane), r->counters)) == T4A_OK) {
    if (wait_all) {
      st = drain_by_stream(r);
    } else {
      st = retire_completed(r, 0);
      /* Observation seals: keepalives in the open epoch get an event of their own once nothing
       * older is pending, so a short chain does not hold them until a host wait. */
      if (st == T4A_OK && r->sealed_count == 0 && r->open.count > 0) st = seal_open(r);
    }
    if (st == T4A_OK) {
      st = t4a_ctx_scope_exit(&scope);
    } else {
      t4a_ctx_scope_exit_quiet(&scope);
    }
  }
  unlock_and_release(r);
  return st;
}

t4a_status t4a_retire_poll(t4a_retire *r) { return observe(r, 0); }
t4a_status t4a_retire_wait(t4a_retire *r) { return observe(r, 1); }

void t4a_retire_stats(t4a_retire *r, struct t4a_retire_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  if (r == NULL) return;
  /* From inside an admission the caller already holds the lock: read without taking it. */
  int owned = atomic_load_explicit(&r->owner, memory_order_relaxed) == &t_thread_id;
  if (!owned) t4a_oplock_lock_(&r->lock);
  out->open_admissions = r->open.admissions;
  out->open_keepalives = r->open.count;
  out->sealed_epochs = r->sealed_count;
  out->quarantined_held = r->quarantine_count;
  if (!owned) t4a_oplock_unlock_(&r->lock);
}

t4a_status t4a_retire_fence(t4a_retire *r, t4a_witness **out) {
  if (out == NULL || r == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or out is NULL");
  }
  *out = NULL;
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(r, 0, &adm);
  if (st != T4A_OK) return st;
  if (r->capturing) return t4a_admission_abort(&adm, refuse_in_capture(r, "a fence (an event)"));
  st = t4a_witness_record_(t4a_retire_lane(r), out);
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  t4a_counter_add(r->counters, T4A_COUNTER_events_recorded, 1);
  admission_end(&adm, 0);
  return T4A_OK;
}

/* ---- witnesses inside an admission (the witness's side is in witness.c) ---- */

t4a_status t4a_admission_record(t4a_admission *adm, t4a_witness **out) {
  if (out != NULL) *out = NULL;
  if (adm == NULL || adm->priv_retire == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "no open admission (or out is NULL) to record a witness in");
  }
  t4a_lane *lane = adm->priv_retire->lane;
  if (adm->priv_retire->capturing) {
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "lane %llu is capturing a graph: a witness (an event observed from the "
                          "host) cannot be captured",
                          (unsigned long long)t4a_lane_domain(lane));
  }
  t4a_ctx_scope scope; /* another admission of this thread may have made its context current */
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane));
  if (st != T4A_OK) return st;
  st = t4a_witness_record_(lane, out);
  if (st == T4A_OK) t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_events_recorded, 1);
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}

t4a_status t4a_admission_wait(t4a_admission *adm, t4a_witness *w) {
  if (adm == NULL || adm->priv_retire == NULL || w == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "no open admission (or the witness is NULL) to wait in");
  }
  t4a_lane *lane = adm->priv_retire->lane;
  if (adm->priv_retire->capturing) {
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "lane %llu is capturing a graph: a wait on work outside the capture "
                          "cannot be captured",
                          (unsigned long long)t4a_lane_domain(lane));
  }
  return t4a_witness_stream_wait_(w, lane);
}

/* ---- capture mode ---- */

t4a_status t4a_retire_capture_begin(t4a_retire *r) {
  if (r == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire is NULL");
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(r, 0, &adm); /* the lock, the lane check, the context */
  if (st != T4A_OK) return st;
  if (r->capturing) {
    return t4a_admission_abort(&adm, t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                                                    "lane %llu is already capturing a graph",
                                                    (unsigned long long)t4a_lane_domain(r->lane)));
  }
  /* What is admitted so far gets its event outside the capture, so its keepalives are not mixed
   * with the graph's. */
  if (r->sealed_count == r->max_sealed) st = retire_completed(r, 1);
  if (st == T4A_OK) st = seal_open(r);
  /* THREAD_LOCAL: this thread's unsafe calls (host allocations, syncs) fail and invalidate the
   * capture; every thread's admissions on the lane are captured (the stream is). */
  if (st == T4A_OK) {
    st = T4A_CU(r->driver, cuStreamBeginCapture, t4a_lane_stream(r->lane),
                CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  }
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  r->capturing = 1;
  atomic_fetch_add_explicit(&r->capture_seq, 1, memory_order_relaxed);
  r->capture_thread = &t_thread_id;
  r->capture.count = 0;
  r->capture.admissions = 0;
  epoch_clear_set(&r->capture);
  t4a_lane_set_capturing_(r->lane, 1);
  t4a_counter_add(r->counters, T4A_COUNTER_captures, 1);
  admission_end(&adm, 0);
  return T4A_OK;
}

t4a_status t4a_retire_capture_end(t4a_retire *r, void **out_graph, t4a_keepalive **out_items,
                                  size_t *out_count) {
  if (out_graph != NULL) *out_graph = NULL;
  if (out_items != NULL) *out_items = NULL;
  if (out_count != NULL) *out_count = 0;
  if (r == NULL || out_graph == NULL || out_items == NULL || out_count == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or an out is NULL");
  }
  t4a_status st = lock_enter(r);
  if (st != T4A_OK) return st;
  if (!r->capturing) {
    lock_exit(r);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "lane %llu is not capturing a graph",
                          (unsigned long long)t4a_lane_domain(r->lane));
  }
  if (r->capture_thread != &t_thread_id) {
    lock_exit(r);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "lane %llu's capture was begun on another thread: only that thread can "
                          "end it (a thread-local capture)",
                          (unsigned long long)t4a_lane_domain(r->lane));
  }
  t4a_ctx_scope scope;
  CUgraph graph = NULL;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(r->lane), r->counters)) != T4A_OK) {
    /* Not even asked: the stream is still capturing, so the mode stays; the call may be
     * repeated. */
    lock_exit(r);
    return st;
  }
  CUstream stream = t4a_lane_stream(r->lane);
  st = T4A_CU(r->driver, cuStreamEndCapture, stream, &graph);
  CUstreamCaptureStatus still = CU_STREAM_CAPTURE_STATUS_NONE;
  int asked = T4A_CU_QUIET(r->driver, cuStreamIsCapturing, stream, &still) == T4A_OK;
  if (st != T4A_OK && asked && still != CU_STREAM_CAPTURE_STATUS_NONE) {
    /* The end itself failed with the stream still capturing: try once more. */
    t4a_error first;
    t4a_error_last(&first);
    graph = NULL;
    if (T4A_CU(r->driver, cuStreamEndCapture, stream, &graph) != T4A_OK) {
      t4a_error_restore(&first);
    } else {
      st = T4A_OK;
    }
    asked = T4A_CU_QUIET(r->driver, cuStreamIsCapturing, stream, &still) == T4A_OK;
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK && (!asked || still != CU_STREAM_CAPTURE_STATUS_NONE)) {
    /* The stream is (or may be) still capturing: the mode stays; the call may be repeated. */
    lock_exit(r);
    return st;
  }
  /* The capture ended: the mode is left; what was deferred for it (module unloads, executable
   * graph destructions) runs now. */
  r->capturing = 0;
  t4a_lane_set_capturing_(r->lane, 0);
  t4a_keepalive *items = NULL;
  size_t n = r->capture.count;
  if (st == T4A_OK && n > 0 && (items = t4a_host_calloc(n, sizeof *items)) == NULL) {
    st = T4A_HOST_OUT_OF_MEMORY;
  }
  if (st != T4A_OK) {
    /* No graph (an invalidated capture, or no memory for the list): the captured work will never
     * run, so its keepalives can go now. A graph that was made is destroyed. */
    if (graph != NULL && t4a_ctx_scope_enter(&scope, t4a_lane_holder(r->lane), r->counters) ==
                             T4A_OK) {
      if (T4A_CU_QUIET(r->driver, cuGraphDestroy, graph) != T4A_OK) {
        t4a_counter_add(r->counters, T4A_COUNTER_leaked, 1);
      }
      t4a_ctx_scope_exit_quiet(&scope);
    } else if (graph != NULL) {
      t4a_counter_add(r->counters, T4A_COUNTER_leaked, 1);
    }
    defer_release(r, &r->capture);
    t4a_error saved;
    t4a_error_last(&saved);
    unlock_and_release(r);
    t4a_error_restore(&saved);
    return t4a_lane_note_(r->lane, st);
  }
  if (n > 0) memcpy(items, r->capture.items, n * sizeof *items);
  r->capture.count = 0;
  r->capture.admissions = 0;
  epoch_clear_set(&r->capture);
  lock_exit(r);
  *out_graph = graph;
  *out_items = items;
  *out_count = n;
  return T4A_OK;
}

int t4a_retire_is_capturing(t4a_retire *r) {
  if (r == NULL) return 0;
  return t4a_lane_is_capturing(r->lane);
}

uint64_t t4a_retire_capture_seq(const t4a_retire *r) {
  return r != NULL ? atomic_load_explicit(&((t4a_retire *)r)->capture_seq, memory_order_relaxed) : 0;
}

uint64_t t4a_retire_drains_(const t4a_retire *r) {
  return atomic_load_explicit(&((t4a_retire *)r)->drains, memory_order_acquire);
}

int t4a_retire_held_by_this_thread_(const t4a_retire *r) {
  return r != NULL && atomic_load_explicit(&((t4a_retire *)r)->owner, memory_order_relaxed) ==
                          &t_thread_id;
}
