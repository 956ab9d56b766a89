/* Uploads, downloads and the staging ring (host <-> device on one lane). See t4a/xfer.h, and
 * xfer_internal.h for the locking rules: nobody holds x->lock across a device wait or a
 * chunk-sized memcpy. */
#define _GNU_SOURCE
#include "t4a/xfer.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_retire/retire_internal.h"
#include "t4a_xfer/xfer_internal.h"

/* ---- the budget of callers' pinned memory held by direct uploads ----
 *
 * Every keepalive t4a_xfer hands to t4a_retire for a caller's t4a_pinned is a pin_hold: one
 * record per pinned object while any keepalive on it lives, owning one reference to it. One
 * record per object (not per call) keeps t4a_retire's deduplication by address working — an
 * epoch holds a pinned object once, however many transfers used it — so a teardown that leaks
 * keepalives counts each leaked object once. The size of the object counts against the budget
 * from the first direct upload that uses it until the record's last keepalive goes. The records
 * and their table outlive the t4a_xfer when t4a_retire releases them later: they point only at
 * the shared, refcounted t4a_xfer_holds. */

#define HOLD_BUCKETS 64u

typedef struct pin_hold {
  t4a_xfer_holds *holds; /* a reference */
  t4a_pinned *pinned;    /* a reference */
  uint64_t size;         /* t4a_pinned_size, in held_bytes while `counted` */
  int counted;           /* a direct upload used it: its size counts against the budget */
  uint32_t refs;         /* keepalive references (held by t4a_retire) */
  struct pin_hold *next;
} pin_hold;

struct t4a_xfer_holds {
  atomic_int refs; /* the t4a_xfer's, plus one per live pin_hold */
  pthread_mutex_t lock;
  uint64_t held_bytes;
  pin_hold *buckets[HOLD_BUCKETS];
  pin_hold *spare; /* recycled records (linked through next), at most T4A_XFER_SPARE_RECORDS */
  uint32_t num_spare;
};

static uint32_t hold_bucket(const t4a_pinned *pin) {
  return (uint32_t)(((uint64_t)(uintptr_t)pin * 0x9E3779B97F4A7C15ull) >> 58); /* 64 buckets */
}

static void holds_unref(t4a_xfer_holds *h) {
  if (h != NULL && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
    while (h->spare != NULL) {
      pin_hold *next = h->spare->next;
      free(h->spare);
      h->spare = next;
    }
    pthread_mutex_destroy(&h->lock);
    free(h);
  }
}

/* The keepalive's release: the last reference unlinks the record, gives its bytes back, drops
 * the pinned reference. May run on any thread, after the t4a_xfer is gone. */
static void pin_hold_release(void *object) {
  pin_hold *r = object;
  t4a_xfer_holds *h = r->holds;
  pthread_mutex_lock(&h->lock);
  if (--r->refs > 0) {
    pthread_mutex_unlock(&h->lock);
    return;
  }
  pin_hold **at = &h->buckets[hold_bucket(r->pinned)];
  while (*at != r) at = &(*at)->next;
  *at = r->next;
  if (r->counted) h->held_bytes -= r->size;
  t4a_pinned *pin = r->pinned;
  /* The record serves the next direct transfer of any pinned object: a warm pinned upload with
   * its retirement allocates nothing (xfer_test.c: test_warm_transfers_allocate_nothing). */
  int kept = h->num_spare < T4A_XFER_SPARE_RECORDS;
  if (kept) {
    r->next = h->spare;
    h->spare = r;
    h->num_spare++;
  }
  pthread_mutex_unlock(&h->lock);
  t4a_pinned_release(pin);
  if (!kept) free(r);
  holds_unref(h);
}

/* Takes one keepalive reference on `pin`'s record (created if needed). With `count`, the pinned
 * object's size counts against `limit` (0: unlimited): if it would go over, *out is NULL and
 * nothing was taken. HOST_OUT_OF_MEMORY if a record cannot be allocated. */
static t4a_status hold_take(t4a_xfer_holds *h, t4a_pinned *pin, int count, uint64_t limit,
                            pin_hold **out) {
  *out = NULL;
  pthread_mutex_lock(&h->lock);
  pin_hold *r = h->buckets[hold_bucket(pin)];
  while (r != NULL && r->pinned != pin) r = r->next;
  uint64_t size = t4a_pinned_size(pin);
  if (count && (r == NULL || !r->counted) && limit != 0 &&
      (size > limit || h->held_bytes > limit - size)) {
    pthread_mutex_unlock(&h->lock);
    return T4A_OK; /* over the budget */
  }
  if (r == NULL) {
    if ((r = h->spare) != NULL) {
      h->spare = r->next;
      h->num_spare--;
      memset(r, 0, sizeof *r);
    } else if ((r = t4a_host_calloc(1, sizeof *r)) == NULL) {
      pthread_mutex_unlock(&h->lock);
      return T4A_HOST_OUT_OF_MEMORY;
    }
    r->holds = h;
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    r->pinned = pin;
    t4a_pinned_retain(pin);
    r->size = size;
    uint32_t b = hold_bucket(pin);
    r->next = h->buckets[b];
    h->buckets[b] = r;
  }
  if (count && !r->counted) {
    r->counted = 1;
    h->held_bytes += size;
  }
  r->refs++;
  pthread_mutex_unlock(&h->lock);
  *out = r;
  return T4A_OK;
}

static t4a_keepalive hold_keepalive(pin_hold *r) {
  return (t4a_keepalive){r, pin_hold_release, 0};
}

/* ---- the ring (x->lock held, the lane's context current) ---- */

static void chunk_clear(chunk *c) {
  c->state = CHUNK_FREE;
  c->owner = NULL;
  c->dst = NULL;
  c->bytes = 0;
}

/* A record with sequence number `seq` answered OK: everything enqueued on the lane's stream
 * before it finished, so chunks quarantined before it was recorded go back to the ring. */
static void seq_completed(t4a_xfer *x, uint64_t seq) {
  if (seq <= x->completed_seq) return;
  x->completed_seq = seq;
  for (uint32_t i = 0; i < x->num_chunks && x->num_reclaimable > 0; i++) {
    chunk *c = &x->chunks[i];
    if (c->state == CHUNK_QUARANTINED && !c->foreign && c->reclaim_seq != 0 &&
        c->reclaim_seq <= seq) {
      c->reclaim_seq = 0;
      chunk_clear(c);
      x->num_reclaimable--;
      x->chunks_reclaimed++;
    }
  }
}

void t4a_xfer_chunk_recorded_(t4a_xfer *x, chunk *c) {
  c->seq = ++x->record_seq;
  c->drains = UINT64_MAX;
}

void t4a_xfer_chunk_quarantine_(t4a_xfer *x, chunk *c, int on_lane_stream) {
  if (c->state == CHUNK_QUARANTINED && c->reclaim_seq != 0) x->num_reclaimable--;
  c->owner = NULL;
  c->dst = NULL;
  c->bytes = 0;
  c->state = CHUNK_QUARANTINED;
  if (on_lane_stream && !c->foreign) {
    /* Every record from the next one on was enqueued after the uncertain work. */
    c->reclaim_seq = x->record_seq + 1;
    x->num_reclaimable++;
  } else {
    c->reclaim_seq = 0;
    c->foreign = 1;
  }
}

/* The handle's terminal failure: memoised with its detail; its held chunks are quarantined (the
 * state of their DMA is not known, so they wait for a later completion to prove it). Chunks it
 * has in DELIVERING completed fine: their deliverer frees them; the failure is reported only
 * once they are done (pending_answer). */
static void pending_fail(t4a_xfer *x, t4a_xfer_pending *p, t4a_status st) {
  if (p->state != PENDING) return;
  p->state = FAILED;
  t4a_error_last(&p->failure);
  if (p->failure.status != st) {
    (void)t4a_error_set_(st, NULL, 0, NULL, 0, "download failed");
    t4a_error_last(&p->failure);
  }
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->owner == p && c->state == CHUNK_HELD) t4a_xfer_chunk_quarantine_(x, c, 1);
  }
}

/* A HELD chunk (its owner PENDING) whose event answered OK: copies its bytes into the owner's
 * destination without the lock — DELIVERING keeps everyone else off it, and the owner can neither
 * answer nor be released while owner->delivering is nonzero — then frees it. */
static void chunk_deliver(t4a_xfer *x, chunk *c) {
  t4a_xfer_pending *p = c->owner;
  c->state = CHUNK_DELIVERING;
  p->delivering++;
  unsigned flags = p->bytes >= T4A_XFER_STREAM_DOWNLOAD_MIN ? T4A_XFER_COPY_STREAM : 0;
  pthread_mutex_unlock(&x->lock);
  int split = t4a_xfer_copier_memcpy_(x->copier, c->dst, c->host, c->bytes, flags);
  pthread_mutex_lock(&x->lock);
  if (!split) x->single_copies++;
  p->delivering--;
  chunk_clear(c);
  pthread_cond_broadcast(&x->cond);
}

/* An in-flight chunk's event answered OK. May drop the lock (delivery); FREE on return. */
static void chunk_complete(t4a_xfer *x, chunk *c) {
  seq_completed(x, c->seq);
  if (c->state == CHUNK_HELD) {
    chunk_deliver(x, c);
  } else {
    chunk_clear(c);
  }
}

/* An in-flight chunk's event answered `st` (a failure): the chunk and its owner are failed. */
static t4a_status chunk_failed(t4a_xfer *x, chunk *c, t4a_status st) {
  st = t4a_lane_note_(x->lane, st);
  if (c->state == CHUNK_HELD) pending_fail(x, c->owner, st);
  t4a_xfer_chunk_quarantine_(x, c, 1);
  return st;
}

/* Asks an in-flight chunk's event (never blocks). OK: the chunk is FREE (delivered if it was
 * held; the lock may have been dropped for that). NOT_READY, or the device's answer (the chunk
 * and its owner are then failed). */
static t4a_status chunk_query(t4a_xfer *x, chunk *c) {
  t4a_status st = T4A_CU(x->driver, cuEventQuery, c->event);
  if (st == T4A_NOT_READY) return st;
  if (st != T4A_OK) return chunk_failed(x, c, st);
  chunk_complete(x, c);
  return T4A_OK;
}

static int chunk_in_flight(const chunk *c) {
  return c->state == CHUNK_BUSY || c->state == CHUNK_HELD || c->state == CHUNK_ORPHAN;
}

/* Waits for an in-flight chunk's event with the lock dropped (a counted host wait); the caller
 * settles it afterwards with a query, since its state may have changed meanwhile. `owner` NULL:
 * called by the acquirer, the only thread that records, so an in-flight chunk still carries the
 * record waited on. Otherwise: by an observer of `owner`, for whom the chunk is the same record
 * only while owner still holds it (the acquirer may have delivered and reused it). A failed
 * answer fails the chunk only if it is still that record; it is returned in any case. */
static t4a_status chunk_wait(t4a_xfer *x, chunk *c, const t4a_xfer_pending *owner) {
  CUevent ev = c->event;
  xfer_count(x, T4A_COUNTER_host_waits, 1);
  pthread_mutex_unlock(&x->lock);
  t4a_status st = T4A_CU(x->driver, cuEventSynchronize, ev);
  pthread_mutex_lock(&x->lock);
  if (st == T4A_OK) return st;
  int same = owner == NULL ? chunk_in_flight(c) : c->owner == owner && c->state == CHUNK_HELD;
  if (same) return chunk_failed(x, c, st);
  return t4a_lane_note_(x->lane, st);
}

/* ---- spare events (x->lock held) ---- */

static CUevent spare_take(t4a_xfer *x) {
  return x->num_spare_events > 0 ? x->spare_events[--x->num_spare_events] : NULL;
}

/* Keeps `ev` (its last record may still be pending: a later record replaces it). 0 if full. */
static int spare_put(t4a_xfer *x, CUevent ev) {
  if (x->num_spare_events == T4A_XFER_SPARE_EVENTS) return 0;
  x->spare_events[x->num_spare_events++] = ev;
  return 1;
}

/* Destroys an event (the lane's context current; the driver defers the destruction of one whose
 * record is pending); one the driver refuses is leaked and counted. */
static void event_drop(t4a_xfer *x, CUevent ev) {
  if (T4A_CU_QUIET(x->driver, cuEventDestroy, ev) != T4A_OK) xfer_count(x, T4A_COUNTER_leaked, 1);
}

/* Every chunk is quarantined and some wait for a later completion: records a marker on the
 * lane's stream (after all the uncertain work) and waits for it, the lock dropped. Its OK frees
 * them; a failed answer frees nothing. */
static t4a_status reclaim_by_marker(t4a_xfer *x) {
  CUevent ev = spare_take(x);
  t4a_status st = T4A_OK;
  if (ev == NULL) st = T4A_CU(x->driver, cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
  if (st != T4A_OK) return st;
  if ((st = T4A_CU(x->driver, cuEventRecord, ev, t4a_lane_stream(x->lane))) != T4A_OK) {
    event_drop(x, ev);
    return t4a_lane_note_(x->lane, st);
  }
  uint64_t seq = ++x->record_seq;
  xfer_count(x, T4A_COUNTER_events_recorded, 1);
  xfer_count(x, T4A_COUNTER_staging_waits, 1);
  xfer_count(x, T4A_COUNTER_host_waits, 1);
  pthread_mutex_unlock(&x->lock);
  st = T4A_CU(x->driver, cuEventSynchronize, ev);
  pthread_mutex_lock(&x->lock);
  if (st != T4A_OK) {
    event_drop(x, ev);
    return t4a_lane_note_(x->lane, st);
  }
  seq_completed(x, seq);
  if (!spare_put(x, ev)) event_drop(x, ev);
  return T4A_OK;
}

/* The bytes a chunk is pinned at for a unit of `need` bytes: T4A_XFER_SMALL_PIN_BYTES for a small
 * unit when chunks are larger, else the whole chunk. */
static size_t pin_bytes(const t4a_xfer *x, size_t need) {
  size_t small = T4A_XFER_SMALL_PIN_BYTES;
  return need <= small && x->chunk_bytes > small ? small : x->chunk_bytes;
}

/* Pins a chunk for a unit of `need` bytes and creates its event: when the ring first hands it
 * out, so that opening a runtime pays nothing for the ring and a small first transfer pins
 * T4A_XFER_SMALL_PIN_BYTES of one chunk, not a whole chunk or the whole ring (docs/performance.md,
 * "Cold start"); and again, at chunk_bytes, when a unit larger than the chunk's capacity first
 * needs it. Called by the acquirer on a FREE chunk (its last DMA confirmed; the admission held:
 * no other thread acquires or looks at a FREE chunk's memory or event) without x->lock, since
 * pinning takes milliseconds. The new memory is pinned before the old is freed, so a failure
 * keeps the chunk as it was (FREE, its old memory and any event kept; teardown frees them) and
 * hands nothing out; the next acquire of the chunk tries again. */
static t4a_status chunk_pin(t4a_xfer *x, chunk *c, size_t need) {
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters);
  if (st != T4A_OK) return st;
  /* t4a_pinned_create always pins PORTABLE (requirement A2): the chunks serve any context. */
  if (c->pinned == NULL || c->cap < need) {
    size_t bytes = pin_bytes(x, need);
    t4a_pinned *fresh = NULL;
    st = t4a_pinned_create(t4a_lane_holder(x->lane), bytes, 0, &fresh);
    if (st == T4A_OK) {
      t4a_pinned_release(c->pinned); /* NULL, or the small one: nothing in flight uses it */
      c->pinned = fresh;
      c->host = t4a_pinned_host(fresh);
      c->cap = bytes;
    }
  }
  if (st == T4A_OK && c->event == NULL) {
    st = T4A_CU(x->driver, cuEventCreate, &c->event, CU_EVENT_DISABLE_TIMING);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}

/* Hands out the ring's oldest usable chunk (see xfer_internal.h). */
t4a_status t4a_xfer_ring_acquire_(t4a_xfer *x, size_t need, chunk **out) {
  *out = NULL;
  int marked = 0;
  uint32_t skipped = 0;
  for (;;) {
    if (skipped == x->num_chunks) {
      if (marked || x->num_reclaimable == 0) {
        return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                              "every staging chunk is quarantined after an earlier failure");
      }
      marked = 1;
      skipped = 0;
      t4a_status st = reclaim_by_marker(x);
      if (st != T4A_OK) return st;
      continue;
    }
    chunk *c = &x->chunks[x->next];
    if (c->state == CHUNK_QUARANTINED || c->state == CHUNK_FILLING) {
      x->next = (x->next + 1) % x->num_chunks;
      skipped++;
      continue;
    }
    if (c->state == CHUNK_DELIVERING) { /* an observer copies it out: a memcpy, not the device */
      pthread_cond_wait(&x->cond, &x->lock);
      continue;
    }
    if (c->state == CHUNK_BUSY &&
        ((c->seq != 0 && c->seq <= x->completed_seq) ||
         (c->drains != UINT64_MAX && t4a_retire_drains_(x->retire) > c->drains))) {
      /* Proved done without asking its event: a later record on the lane's stream answered OK
       * (a download's wait, say), or, for a staged upload, a later t4a_retire_wait drained the
       * stream. */
      chunk_complete(x, c);
      continue;
    }
    if (c->state != CHUNK_FREE) {
      t4a_status st = chunk_query(x, c);
      if (st == T4A_NOT_READY) {
        xfer_count(x, T4A_COUNTER_staging_waits, 1);
        st = chunk_wait(x, c, NULL);
      }
      if (st != T4A_OK) {
        x->next = (x->next + 1) % x->num_chunks;
        return st;
      }
      continue; /* look again: delivered and freed, settled by its owner, or still to query */
    }
    if (c->event == NULL || c->cap < need) {
      /* Never handed out yet, or too small for this unit: (re-)pin it first (FREE: its last DMA
       * is confirmed and nobody else uses it). */
      t4a_error saved;
      t4a_error_last(&saved);
      pthread_mutex_unlock(&x->lock);
      t4a_status st = chunk_pin(x, c, need);
      pthread_mutex_lock(&x->lock);
      if (st != T4A_OK) {
        /* Another chunk already made that holds the unit, and not quarantined for good, serves
         * instead (a failure the ring absorbs, as when it grows); with none, the failure is the
         * caller's. */
        int made = 0;
        for (uint32_t i = 0; i < x->num_chunks && !made; i++) {
          const chunk *o = &x->chunks[i];
          int lost = o->state == CHUNK_QUARANTINED && o->reclaim_seq == 0;
          made = o != c && o->event != NULL && o->cap >= need && !lost;
        }
        if (!made) return st;
        x->ring_grow_failures++;
        t4a_error_restore(&saved);
        x->next = (x->next + 1) % x->num_chunks;
        skipped++;
      }
      continue; /* look again: still FREE, or the next chunk */
    }
    x->next = (x->next + 1) % x->num_chunks;
    c->seq = 0;
    c->reclaim_seq = 0;
    *out = c;
    return T4A_OK;
  }
}

/* ---- recycled pending handles ----
 * A released handle's record serves the next download of the same t4a_xfer, so a warm download
 * with its wait and release allocates nothing (xfer_test.c: test_warm_transfers_allocate_nothing).
 * The list is bounded (T4A_XFER_SPARE_RECORDS) and freed with the t4a_xfer. */

/* x->lock held. A recycled handle, as fresh as calloc's (PENDING, no event), or NULL. */
static t4a_xfer_pending *pending_take(t4a_xfer *x) {
  t4a_xfer_pending *p = x->spare_pending;
  if (p == NULL) return NULL;
  x->spare_pending = p->next_spare;
  x->num_spare_pending--;
  p->x = NULL;
  p->event = NULL;
  p->state = PENDING;
  p->failure.status = T4A_OK;
  p->seq = 0;
  p->bytes = 0;
  p->delivering = 0;
  p->next_spare = NULL;
  return p;
}

/* x->lock held. Keeps p for reuse (no chunk names it any more); 0 when full: the caller frees it. */
static int pending_put(t4a_xfer *x, t4a_xfer_pending *p) {
  if (x->num_spare_pending >= T4A_XFER_SPARE_RECORDS) return 0;
  p->next_spare = x->spare_pending;
  x->spare_pending = p;
  x->num_spare_pending++;
  return 1;
}

/* A handle for a new download: recycled, else from the heap (HOST_OUT_OF_MEMORY, NULL). */
static t4a_xfer_pending *pending_new(t4a_xfer *x) {
  pthread_mutex_lock(&x->lock);
  t4a_xfer_pending *p = pending_take(x);
  pthread_mutex_unlock(&x->lock);
  return p != NULL ? p : t4a_host_calloc(1, sizeof *p);
}

/* A handle never returned to the caller (its download failed): no chunk names it. */
static void pending_discard(t4a_xfer *x, t4a_xfer_pending *p) {
  pthread_mutex_lock(&x->lock);
  int kept = pending_put(x, p);
  pthread_mutex_unlock(&x->lock);
  if (!kept) free(p);
}

/* ---- creation and teardown ---- */

/* The default number of copy threads for a host of `cpus` online CPUs: all of them up to 8 (as
 * before); above 8, CPUs - 4 (the driver's threads, the caller's other work), at least 8 and at
 * most T4A_XFER_DEFAULT_COPY_THREADS: 12 on a 16-CPU host, where 12 threads moved 49.9 / 48.7
 * GB/s through a 4-deep ring against 49.9 / 51.5 with all 16 (docs/design.md). */
static uint32_t default_copy_threads(long cpus) {
  if (cpus < 1) return 1;
  if (cpus <= 8) return (uint32_t)cpus;
  long n = cpus - 4 < 8 ? 8 : cpus - 4;
  return n > (long)T4A_XFER_DEFAULT_COPY_THREADS ? T4A_XFER_DEFAULT_COPY_THREADS : (uint32_t)n;
}

/* Makes one chunk's pinned memory and event (the lane's context current). On failure the chunk
 * is left empty (what was made is freed) and the failure returned. */
static t4a_status chunk_make(t4a_xfer *x, chunk *c) {
  /* t4a_pinned_create always pins PORTABLE (requirement A2): the chunks serve any context. */
  t4a_status st = t4a_pinned_create(t4a_lane_holder(x->lane), x->chunk_bytes, 0, &c->pinned);
  if (st == T4A_OK) st = T4A_CU(x->driver, cuEventCreate, &c->event, CU_EVENT_DISABLE_TIMING);
  if (st == T4A_OK) {
    c->host = t4a_pinned_host(c->pinned);
    c->cap = x->chunk_bytes;
    return st;
  }
  if (c->pinned != NULL) t4a_pinned_release(c->pinned);
  c->pinned = NULL;
  c->event = NULL;
  return st;
}

/* Grows the ring (see xfer_internal.h). Only the acquirer adds chunks; a chunk joins the ring
 * (num_chunks, under x->lock) once made. */
void t4a_xfer_ring_grow_(t4a_xfer *x, size_t units) {
  uint32_t want = units > x->max_chunks ? x->max_chunks : (uint32_t)units;
  if (x->num_chunks >= want) return;
  t4a_error saved;
  t4a_error_last(&saved);
  while (x->num_chunks < want) {
    chunk *c = &x->chunks[x->num_chunks];
    t4a_status st = chunk_make(x, c);
    pthread_mutex_lock(&x->lock);
    if (st != T4A_OK) {
      x->ring_grow_failures++;
      pthread_mutex_unlock(&x->lock);
      break;
    }
    chunk_clear(c);
    x->num_chunks++;
    pthread_mutex_unlock(&x->lock);
  }
  t4a_error_restore(&saved);
}

/* x->lock held, after a chunk went in flight: the high-water mark of chunks in flight. */
static void note_in_flight(t4a_xfer *x) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    int s = x->chunks[i].state;
    n += s == CHUNK_BUSY || s == CHUNK_HELD || s == CHUNK_ORPHAN;
  }
  if (n > x->max_in_flight) x->max_in_flight = n;
}

static void xfer_teardown(t4a_xfer *x) {
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  int inflight = 0;
  for (uint32_t i = 0; i < x->num_chunks; i++) inflight |= x->chunks[i].state != CHUNK_FREE;
  t4a_ctx_scope scope;
  int scoped = t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters) == T4A_OK;
  int proved = 0;
  if (scoped) {
    proved = 1;
    if (inflight) {
      /* Proof of drain: every DMA of this ring ran on the lane's stream (except the source side
       * of a foreign chunk, below). */
      xfer_count(x, T4A_COUNTER_host_waits, 1);
      proved = T4A_CU_QUIET(x->driver, cuStreamSynchronize, t4a_lane_stream(x->lane)) == T4A_OK;
    }
  }
  uint64_t leaked = 0;
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->event != NULL) {
      if (!scoped || T4A_CU_QUIET(x->driver, cuEventDestroy, c->event) != T4A_OK) leaked++;
    }
    if (c->pinned != NULL) {
      int foreign = c->state == CHUNK_QUARANTINED && c->foreign;
      if (c->state == CHUNK_FREE || (proved && !foreign)) {
        t4a_pinned_release(c->pinned);
      } else {
        leaked++; /* its DMA may still read or write it: never freed on a guess */
      }
    }
  }
  for (uint32_t i = 0; i < x->num_spare_events; i++) {
    if (!scoped || T4A_CU_QUIET(x->driver, cuEventDestroy, x->spare_events[i]) != T4A_OK) {
      leaked++;
    }
  }
  xfer_count(x, T4A_COUNTER_leaked, leaked);
  if (scoped) t4a_ctx_scope_exit_quiet(&scope);
  t4a_xfer_copier_destroy_(x->copier);
  pthread_cond_destroy(&x->cond);
  pthread_mutex_destroy(&x->lock);
  holds_unref(x->holds);
  t4a_lane_release(x->lane);
  while (x->spare_pending != NULL) {
    t4a_xfer_pending *next = x->spare_pending->next_spare;
    free(x->spare_pending);
    x->spare_pending = next;
  }
  free(x->chunks);
  free(x);
  t4a_error_restore(&saved);
}

static void xfer_unref(t4a_xfer *x) {
  if (x != NULL && atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1) {
    xfer_teardown(x);
  }
}

static t4a_status mutex_init_failed(void) {
  return t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "pthread_mutex_init failed");
}

t4a_status t4a_xfer_create(t4a_retire *retire, const t4a_xfer_options *options, t4a_xfer **out) {
  if (out == NULL || retire == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or out is NULL");
  }
  *out = NULL;
  size_t chunk_bytes = options != NULL ? options->chunk_bytes : 0;
  uint32_t num_chunks = options != NULL ? options->num_chunks : 0;
  if (chunk_bytes == 0) chunk_bytes = T4A_XFER_DEFAULT_CHUNK_BYTES;
  if (num_chunks == 0) num_chunks = T4A_XFER_DEFAULT_NUM_CHUNKS;
  if (chunk_bytes < T4A_XFER_MIN_CHUNK_BYTES || chunk_bytes > ((size_t)1 << 30) ||
      num_chunks > T4A_XFER_MAX_NUM_CHUNKS) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "staging needs 4 KiB..1 GiB chunks and 1..%u of them (got %zu x %u)",
                          T4A_XFER_MAX_NUM_CHUNKS, chunk_bytes, num_chunks);
  }
  uint32_t copy_threads = options != NULL ? options->copy_threads : 0;
  if (copy_threads > T4A_XFER_MAX_COPY_THREADS) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "at most %u copy threads (got %u)", T4A_XFER_MAX_COPY_THREADS,
                          copy_threads);
  }
  if (copy_threads == 0) copy_threads = default_copy_threads(sysconf(_SC_NPROCESSORS_ONLN));
  size_t split_min = options != NULL ? options->split_copy_min_bytes : 0;
  size_t piece = options != NULL ? options->pipeline_piece_bytes : 0;
  if (split_min == 0) split_min = T4A_XFER_DEFAULT_SPLIT_COPY_MIN;
  if (piece == 0) piece = T4A_XFER_DEFAULT_PIPELINE_PIECE;
  if (piece < T4A_XFER_MIN_CHUNK_BYTES) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "pipeline pieces need at least %zu bytes (got %zu)",
                          T4A_XFER_MIN_CHUNK_BYTES, piece);
  }
  t4a_lane *lane = t4a_retire_lane(retire);
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_xfer *x = t4a_host_calloc(1, sizeof *x);
  if (x == NULL) return T4A_HOST_OUT_OF_MEMORY;
  x->chunks = t4a_host_calloc(num_chunks, sizeof *x->chunks); /* room for the whole depth */
  x->holds = x->chunks != NULL ? t4a_host_calloc(1, sizeof *x->holds) : NULL;
  if (x->holds == NULL) {
    free(x->chunks);
    free(x);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  int inits = 0; /* the holds' lock, the ring's lock, the ring's condition variable */
  if (!t4a_fault_sim(T4A_FAULT_MUTEX_INIT) && pthread_mutex_init(&x->holds->lock, NULL) == 0) {
    inits++;
    if (!t4a_fault_sim(T4A_FAULT_MUTEX_INIT) && pthread_mutex_init(&x->lock, NULL) == 0) {
      inits++;
      if (!t4a_fault_sim(T4A_FAULT_MUTEX_INIT) && pthread_cond_init(&x->cond, NULL) == 0) inits++;
    }
  }
  if (inits < 3) {
    if (inits > 1) pthread_mutex_destroy(&x->lock);
    if (inits > 0) pthread_mutex_destroy(&x->holds->lock);
    free(x->holds);
    free(x->chunks);
    free(x);
    return mutex_init_failed();
  }
  atomic_init(&x->holds->refs, 1);
  atomic_init(&x->refs, 1);
  x->retire = retire;
  x->lane = lane;
  t4a_lane_retain(lane);
  x->driver = t4a_lane_driver(lane);
  x->counters = t4a_lane_counters(lane);
  x->chunk_bytes = chunk_bytes;
  x->max_chunks = num_chunks;
  x->num_chunks = num_chunks < T4A_XFER_INITIAL_CHUNKS ? num_chunks : T4A_XFER_INITIAL_CHUNKS;
  x->max_pinned_hold_bytes = options != NULL ? options->max_pinned_hold_bytes : 0;
  x->piece_bytes = piece;
  x->split_min = split_min;
  if ((st = t4a_xfer_copier_create_(copy_threads, split_min, &x->copier)) != T4A_OK) {
    xfer_teardown(x);
    return st;
  }
  /* Each chunk's pinned memory and event come when the ring first hands it out (chunk_pin). */
  *out = x;
  return T4A_OK;
}

void t4a_xfer_destroy(t4a_xfer *x) { xfer_unref(x); }

size_t t4a_xfer_chunk_bytes(const t4a_xfer *x) { return x->chunk_bytes; }
uint32_t t4a_xfer_num_chunks(const t4a_xfer *x) { return x->max_chunks; }
t4a_lane *t4a_xfer_lane(const t4a_xfer *x) { return x->lane; }
void *t4a_xfer_chunk_host(const t4a_xfer *x, uint32_t index) {
  return index < x->num_chunks ? x->chunks[index].host : NULL;
}

void t4a_xfer_stats(t4a_xfer *x, struct t4a_xfer_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  if (x == NULL) return;
  pthread_mutex_lock(&x->lock);
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    int s = x->chunks[i].state;
    if (s == CHUNK_FREE) {
      out->free_chunks++;
    } else if (s == CHUNK_QUARANTINED) {
      out->quarantined_chunks++;
    } else {
      out->busy_chunks++;
    }
  }
  out->spare_events = x->num_spare_events;
  out->chunks_reclaimed = x->chunks_reclaimed;
  out->pinned_fallbacks = x->pinned_fallbacks;
  out->ring_chunks = x->num_chunks;
  out->max_chunks_in_flight = x->max_in_flight;
  out->ring_grow_failures = x->ring_grow_failures;
  out->pipelined_pieces = x->pipelined_pieces;
  out->single_copies = x->single_copies;
  pthread_mutex_unlock(&x->lock);
  out->copy_threads = t4a_xfer_copier_threads_(x->copier);
  out->parallel_copies = t4a_xfer_copier_parallel_copies_(x->copier);
  pthread_mutex_lock(&x->holds->lock);
  out->pinned_hold_bytes = x->holds->held_bytes;
  pthread_mutex_unlock(&x->holds->lock);
}

/* ---- argument checks ---- */

t4a_status t4a_xfer_check_buffer_(const t4a_xfer *x, const t4a_buffer *buf, size_t offset,
                               size_t bytes) {
  if (buf == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "buffer is NULL");
  if (t4a_buffer_domain(buf) != t4a_lane_domain(x->lane)) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the buffer belongs to domain %llu, this transfer lane to %llu",
                          (unsigned long long)t4a_buffer_domain(buf),
                          (unsigned long long)t4a_lane_domain(x->lane));
  }
  size_t size = t4a_buffer_size(buf);
  if (bytes == 0 || offset > size || bytes > size - offset) {
    const char *global = t4a_buffer_view_name_(buf); /* a module global's view */
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "range [%zu, +%zu) is empty or outside the %zu-byte %s%s%s", offset,
                          bytes, size, global != NULL ? "global '" : "buffer",
                          global != NULL ? global : "", global != NULL ? "'" : "");
  }
  return T4A_OK;
}

t4a_status t4a_xfer_check_pinned_(const t4a_pinned *p, size_t offset, size_t bytes) {
  if (p == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pinned is NULL");
  size_t size = t4a_pinned_size(p);
  if (offset > size || bytes > size - offset) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "range [%zu, +%zu) is outside the %zu-byte pinned memory", offset, bytes,
                          size);
  }
  return T4A_OK;
}

static t4a_status check_common(const t4a_xfer *x, const void *host) {
  if (x == NULL || host == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer or host memory is NULL");
  }
  return T4A_OK;
}

t4a_keepalive t4a_xfer_buffer_ref_(t4a_buffer *b) {
  t4a_buffer_retain(b);
  return (t4a_keepalive){b, t4a_buffer_release_object_, 0};
}
void t4a_xfer_keep_buffer_(t4a_admission *adm, t4a_lane *lane, t4a_buffer *b) {
  if (t4a_buffer_used_on_(b, lane)) t4a_admission_keep(adm, t4a_xfer_buffer_ref_(b));
}
t4a_keepalive t4a_xfer_pinned_ref_(t4a_pinned *p) {
  t4a_pinned_retain(p);
  return (t4a_keepalive){p, t4a_pinned_release_object_, 0};
}

/* ---- staging loops (the caller holds the admission; the lane's context current) ---- */

t4a_status t4a_xfer_refuse_capture_(t4a_xfer *x) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  t4a_status st = T4A_CU(x->driver, cuStreamIsCapturing, t4a_lane_stream(x->lane), &capture);
  if (st != T4A_OK) return st;
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuStreamIsCapturing", 0, NULL, 0,
                          "the lane's stream is capturing a graph: staged transfers recycle their "
                          "chunks and cannot be captured (slot and pinned uploads can)");
  }
  return T4A_OK;
}

t4a_status t4a_xfer_name_chunk_(t4a_status st, const char *what, size_t index, size_t count,
                                size_t offset, size_t n) {
  t4a_error e;
  t4a_error_last(&e);
  if (e.status != st) return st;
  char msg[sizeof e.message];
  memcpy(msg, e.message, sizeof msg);
  return t4a_error_set_(st, e.entry[0] ? e.entry : NULL, e.code,
                        e.code_name[0] ? e.code_name : NULL, e.bytes,
                        "%s, staging chunk %zu of %zu (bytes [%zu, %zu)): %s", what, index + 1,
                        count, offset, offset + n, msg);
}

/* The bytes of a staged transfer's next unit (one chunk's DMA, from `done` of `bytes`). A
 * transfer of more than one chunk starts and ends with a unit of one piece when a chunk holds two
 * pieces or more: the first DMA (upload) or the first copy out (download) starts after a piece,
 * not a whole chunk, and what is left exposed at the end — the last DMA of an upload, the last
 * copy out of a download — is one piece; the units between are whole chunks. Otherwise (one
 * chunk, or pieces too large) whole chunks, the last one partial. */
static size_t next_unit(const t4a_xfer *x, size_t bytes, size_t done) {
  size_t r = bytes - done, c = x->chunk_bytes, piece = x->piece_bytes;
  if (bytes <= c || piece > c / 2) return r < c ? r : c;
  if (done == 0) return piece;   /* the head */
  if (r > c + piece) return c;   /* whole chunks */
  if (r > piece) return r - piece; /* what leaves exactly one piece */
  return r;                      /* the tail */
}

/* The piece of a one-chunk upload of `bytes` (`bytes` itself: one copy, one DMA). Below twice
 * the split size (pieces the calling thread copies alone): a quarter of the upload rounded up,
 * at least a sixteenth of pipeline_piece_bytes; from there on (pieces split across the copy
 * threads): pipeline_piece_bytes, or half the upload rounded up when that makes less than two.
 * Pieces are whole pages (the last one what is left) and there are at least two; none when
 * pipeline_piece_bytes >= chunk_bytes. Why these sizes: docs/performance.md, "Upload pieces by
 * size". */
static size_t upload_piece(const t4a_xfer *x, size_t bytes) {
  if (x->piece_bytes >= x->chunk_bytes) return bytes; /* pieces turned off */
  size_t piece;
  if (bytes / 2 < x->split_min) {
    piece = bytes - 3 * (bytes / 4); /* a quarter, rounded up */
    if (piece < x->piece_bytes / 16) piece = x->piece_bytes / 16;
  } else if (bytes / 2 >= x->piece_bytes) {
    piece = x->piece_bytes;
  } else { /* halves: the first rounded up to whole pages, the second what is left */
    piece = ((bytes - bytes / 2) + 4095) & ~(size_t)4095;
    return piece < bytes ? piece : bytes;
  }
  if (piece < T4A_XFER_MIN_CHUNK_BYTES) piece = T4A_XFER_MIN_CHUNK_BYTES;
  piece = (piece + 4095) & ~(size_t)4095;
  return bytes >= 2 * piece ? piece : bytes;
}

static size_t count_units(const t4a_xfer *x, size_t bytes) {
  size_t units = 0;
  for (size_t done = 0; done < bytes; units++) done += next_unit(x, bytes, done);
  return units;
}

/* An upload (`from`, p NULL) or a download for handle p (into `to`) through the ring. Each chunk
 * is handed out FILLING: the host copy and the enqueues run without x->lock (only this thread
 * touches a FILLING chunk), so observers of other handles never wait behind them. *enqueued is
 * set once a call that may enqueue was made (a failed one may still have). */
static t4a_status stage_chunks(t4a_xfer *x, CUdeviceptr dev, const unsigned char *from,
                               unsigned char *to, size_t bytes, t4a_xfer_pending *p,
                               int *enqueued) {
  CUstream stream = t4a_lane_stream(x->lane);
  t4a_status st = t4a_xfer_refuse_capture_(x);
  if (st != T4A_OK) return st;
  size_t done = 0, index = 0, count = count_units(x, bytes), n;
  t4a_xfer_ring_grow_(x, count);
  /* An upload that fits in one chunk and is at least two pieces: copied and enqueued piece by
   * piece (the DMA of a piece overlaps the copy of the next; one event after the last). */
  size_t piece = p == NULL && count == 1 ? upload_piece(x, bytes) : bytes;
  pthread_mutex_lock(&x->lock);
  for (; done < bytes; index++) {
    chunk *c;
    /* A download wrapping onto one of its own chunks delivers that chunk first (after its DMA
     * completed): a download larger than the ring writes its leading part here. */
    n = next_unit(x, bytes, done);
    if ((st = t4a_xfer_ring_acquire_(x, n, &c)) != T4A_OK) break;
    c->state = CHUNK_FILLING;
    pthread_mutex_unlock(&x->lock);
    uint64_t singles = 0, pieces = 0;
    if (p == NULL) {
      /* The caller's bytes go into the chunk before the DMA: the caller may reuse them at once.
       * While this DMA runs, the next iteration fills the next chunk (or the next piece). */
      for (size_t at = 0; at < n && st == T4A_OK; at += piece) {
        size_t m = n - at < piece ? n - at : piece;
        unsigned flags = m >= T4A_XFER_STREAM_UPLOAD_MIN ? T4A_XFER_COPY_STREAM : 0;
        singles += !t4a_xfer_copier_memcpy_(x->copier, c->host + at, from + done + at, m, flags);
        st = T4A_CU(x->driver, cuMemcpyHtoDAsync, dev + done + at, c->host + at, m, stream);
        pieces += piece < n;
      }
    } else {
      st = T4A_CU(x->driver, cuMemcpyDtoHAsync, c->host, dev + done, n, stream);
    }
    if (st == T4A_OK) st = T4A_CU(x->driver, cuEventRecord, c->event, stream);
    pthread_mutex_lock(&x->lock);
    *enqueued = 1;
    x->single_copies += singles;
    x->pipelined_pieces += pieces;
    if (st != T4A_OK) {
      t4a_xfer_chunk_quarantine_(x, c, 1); /* its work, if any, is on the lane's stream */
      break;
    }
    t4a_xfer_chunk_recorded_(x, c);
    xfer_count(x, T4A_COUNTER_events_recorded, 1);
    if (p == NULL) {
      c->state = CHUNK_BUSY;
      c->drains = t4a_retire_drains_(x->retire); /* inside x->retire's admission */
    } else {
      c->state = CHUNK_HELD;
      c->owner = p;
      c->dst = to + done;
      c->bytes = n;
    }
    note_in_flight(x);
    done += n;
  }
  if (st != T4A_OK) {
    n = next_unit(x, bytes, done); /* the failed unit (the loop broke before moving on) */
    st = t4a_xfer_name_chunk_(st, p == NULL ? "upload" : "download", index, count, done, n);
  }
  if (st != T4A_OK && p != NULL) {
    /* No handle is returned: nothing may be written to the destination from now on (no other
     * thread knows p, so none of its chunks is being delivered). */
    for (uint32_t i = 0; i < x->num_chunks; i++) {
      chunk *c = &x->chunks[i];
      if (c->owner == p && c->state == CHUNK_HELD) {
        c->owner = NULL;
        c->dst = NULL;
        c->state = CHUNK_ORPHAN;
      }
    }
  }
  pthread_mutex_unlock(&x->lock);
  return st;
}

/* ---- uploads ---- */

t4a_status t4a_xfer_upload(t4a_xfer *x, t4a_buffer *dst, size_t offset, const void *src,
                           size_t bytes) {
  t4a_status st = check_common(x, src);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, dst, offset, bytes);
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 1, &adm)) != T4A_OK) return st;
  if ((st = t4a_buffer_use_on_(dst, x->lane)) != T4A_OK) return t4a_admission_abort(&adm, st);
  int enqueued = 0;
  st = stage_chunks(x, (CUdeviceptr)t4a_buffer_devptr(dst) + offset, src, NULL, bytes, NULL,
                    &enqueued);
  if (st != T4A_OK) {
    if (!enqueued) return t4a_admission_abort(&adm, st);
    t4a_keepalive k = t4a_xfer_buffer_ref_(dst);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  t4a_xfer_keep_buffer_(&adm, x->lane, dst);
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

t4a_status t4a_xfer_upload_pinned(t4a_xfer *x, t4a_buffer *dst, size_t offset, t4a_pinned *src,
                                  size_t src_offset, size_t bytes) {
  t4a_status st = check_common(x, src);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, dst, offset, bytes);
  if (st == T4A_OK) st = t4a_xfer_check_pinned_(src, src_offset, bytes);
  if (st != T4A_OK) return st;
  pin_hold *hold;
  if ((st = hold_take(x->holds, src, 1, x->max_pinned_hold_bytes, &hold)) != T4A_OK) return st;
  unsigned char *host = (unsigned char *)t4a_pinned_host(src) + src_offset;
  if (hold == NULL) {
    /* Over the budget: through the ring; src is copied before the call returns, never held. */
    pthread_mutex_lock(&x->lock);
    x->pinned_fallbacks++;
    pthread_mutex_unlock(&x->lock);
    return t4a_xfer_upload(x, dst, offset, host, bytes);
  }
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 2, &adm)) != T4A_OK) {
    pin_hold_release(hold);
    return st;
  }
  if ((st = t4a_buffer_use_on_(dst, x->lane)) != T4A_OK) {
    pin_hold_release(hold);
    return t4a_admission_abort(&adm, st);
  }
  st = T4A_CU(x->driver, cuMemcpyHtoDAsync, (CUdeviceptr)t4a_buffer_devptr(dst) + offset, host,
              bytes, t4a_lane_stream(x->lane));
  if (st != T4A_OK) {
    /* The hold goes into quarantine with the memory: its bytes stay counted (still held). */
    t4a_keepalive k[2] = {t4a_xfer_buffer_ref_(dst), hold_keepalive(hold)};
    return t4a_admission_fail(&adm, st, k, 2);
  }
  t4a_xfer_keep_buffer_(&adm, x->lane, dst);
  t4a_admission_keep(&adm, hold_keepalive(hold));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

/* ---- downloads ---- */

t4a_status t4a_xfer_download(t4a_xfer *x, t4a_buffer *src, size_t offset, void *dst, size_t bytes,
                             t4a_xfer_pending **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_status st = check_common(x, dst);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, src, offset, bytes);
  if (st != T4A_OK) return st;
  t4a_xfer_pending *p = pending_new(x);
  if (p == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 1, &adm)) != T4A_OK) {
    pending_discard(x, p);
    return st;
  }
  if ((st = t4a_buffer_use_on_(src, x->lane)) != T4A_OK) {
    pending_discard(x, p);
    return t4a_admission_abort(&adm, st);
  }
  int enqueued = 0;
  p->bytes = bytes; /* before any chunk of p can be delivered (a wrap in stage_chunks) */
  st = stage_chunks(x, (CUdeviceptr)t4a_buffer_devptr(src) + offset, NULL, dst, bytes, p,
                    &enqueued);
  if (st != T4A_OK) {
    pending_discard(x, p);
    if (!enqueued) return t4a_admission_abort(&adm, st);
    t4a_keepalive k = t4a_xfer_buffer_ref_(src);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  t4a_xfer_keep_buffer_(&adm, x->lane, src);
  t4a_admission_commit(&adm);
  atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
  p->x = x;
  *out = p;
  return T4A_OK;
}

t4a_status t4a_xfer_download_pinned(t4a_xfer *x, t4a_buffer *src, size_t offset, t4a_pinned *dst,
                                    size_t dst_offset, size_t bytes, t4a_xfer_pending **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_status st = check_common(x, dst);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, src, offset, bytes);
  if (st == T4A_OK) st = t4a_xfer_check_pinned_(dst, dst_offset, bytes);
  if (st != T4A_OK) return st;
  pin_hold *hold; /* downloads do not count against the budget: never NULL here */
  if ((st = hold_take(x->holds, dst, 0, 0, &hold)) != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 2, &adm)) != T4A_OK) {
    pin_hold_release(hold);
    return st;
  }
  if (t4a_lane_is_capturing(x->lane)) {
    /* Its completion event would be recorded into the graph, never observable from here. */
    pin_hold_release(hold);
    return t4a_admission_abort(
        &adm, t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                             "the lane's stream is capturing a graph: a download's completion "
                             "cannot be captured (pinned uploads and slot uploads can)"));
  }
  if ((st = t4a_buffer_use_on_(src, x->lane)) != T4A_OK) {
    pin_hold_release(hold);
    return t4a_admission_abort(&adm, st);
  }
  CUstream stream = t4a_lane_stream(x->lane);
  pthread_mutex_lock(&x->lock);
  CUevent ev = spare_take(x);            /* a warm download creates no event */
  t4a_xfer_pending *p = pending_take(x); /* and allocates no handle */
  pthread_mutex_unlock(&x->lock);
  CUevent spare = ev;
  if (p == NULL && (p = t4a_host_calloc(1, sizeof *p)) == NULL) {
    st = T4A_HOST_OUT_OF_MEMORY;
  } else if (ev == NULL) {
    st = T4A_CU(x->driver, cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
  }
  if (st != T4A_OK) {
    if ((ev = spare) != NULL) { /* not recorded here: kept (destroyed if the spares filled) */
      pthread_mutex_lock(&x->lock);
      int kept = spare_put(x, ev);
      pthread_mutex_unlock(&x->lock);
      if (!kept) event_drop(x, ev);
    }
    pin_hold_release(hold);
    if (p != NULL) pending_discard(x, p);
    return t4a_admission_abort(&adm, st);
  }
  st = T4A_CU(x->driver, cuMemcpyDtoHAsync, (unsigned char *)t4a_pinned_host(dst) + dst_offset,
              (CUdeviceptr)t4a_buffer_devptr(src) + offset, bytes, stream);
  if (st == T4A_OK) st = T4A_CU(x->driver, cuEventRecord, ev, stream);
  if (st != T4A_OK) {
    event_drop(x, ev); /* its record, if enqueued, is of unknown state: not kept for reuse */
    pending_discard(x, p);
    t4a_keepalive k[2] = {t4a_xfer_buffer_ref_(src), hold_keepalive(hold)};
    return t4a_admission_fail(&adm, st, k, 2);
  }
  pthread_mutex_lock(&x->lock);
  p->seq = ++x->record_seq; /* its OK proves the work before it, too */
  pthread_mutex_unlock(&x->lock);
  xfer_count(x, T4A_COUNTER_events_recorded, 1);
  t4a_xfer_keep_buffer_(&adm, x->lane, src);
  t4a_admission_keep(&adm, hold_keepalive(hold));
  t4a_admission_commit(&adm);
  p->event = ev;
  p->bytes = bytes;
  atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
  p->x = x;
  *out = p;
  return T4A_OK;
}

/* ---- pending handles ---- */

/* x->lock held. A handle already settled: its memoised answer, once no other thread is copying
 * its bytes into the destination (so nothing is written after a failure is reported; that wait
 * is for a host copy of at most one chunk, never for the device). */
static int pending_answer(t4a_xfer *x, t4a_xfer_pending *p, t4a_status *out) {
  if (p->state == DELIVERED) {
    *out = t4a_error_set_(T4A_ALREADY_CONSUMED, NULL, 0, NULL, 0,
                          "the download's bytes were already delivered");
    return 1;
  }
  if (p->state == FAILED) {
    while (p->delivering > 0) pthread_cond_wait(&x->cond, &x->lock);
    t4a_error_restore(&p->failure);
    *out = p->failure.status;
    return 1;
  }
  return 0;
}

/* Delivered: the bytes are in the caller's memory, counted now (never at enqueue). */
static t4a_status pending_delivered(t4a_xfer *x, t4a_xfer_pending *p) {
  p->state = DELIVERED;
  xfer_count(x, T4A_COUNTER_bytes_downloaded, p->bytes);
  return T4A_OK;
}

/* chunk_query for a wait: its NOT_READY is no answer (a host wait follows), so it records no
 * detail (no cuGetErrorName / cuGetErrorString calls); any other answer is as chunk_query's. */
static t4a_status chunk_query_before_wait(t4a_xfer *x, chunk *c) {
  CUresult r = x->driver->t.cuEventQuery(c->event);
  if (r == CUDA_ERROR_NOT_READY) return T4A_NOT_READY;
  t4a_status st = t4a_cu_result_(x->driver, r, "cuEventQuery", 0);
  if (st != T4A_OK) return chunk_failed(x, c, st);
  chunk_complete(x, c);
  return T4A_OK;
}

/* One observation (x->lock held, the lane's context current). Never blocks without `wait`. */
static t4a_status pending_step(t4a_xfer *x, t4a_xfer_pending *p, int wait) {
  t4a_status st;
  for (;;) {
    if (pending_answer(x, p, &st)) return st;
    if (p->event != NULL) {
      CUevent ev = p->event;
      if (wait) {
        xfer_count(x, T4A_COUNTER_host_waits, 1);
        pthread_mutex_unlock(&x->lock);
        st = T4A_CU(x->driver, cuEventSynchronize, ev);
        pthread_mutex_lock(&x->lock);
        if (p->state != PENDING) continue; /* another observer settled it meanwhile */
      } else {
        st = T4A_CU(x->driver, cuEventQuery, ev);
      }
      if (st == T4A_NOT_READY) return st;
      if (st != T4A_OK) {
        pending_fail(x, p, t4a_lane_note_(x->lane, st));
        continue;
      }
      seq_completed(x, p->seq);
      return pending_delivered(x, p);
    }
    /* Staged: settle the handle's held chunks oldest first, each on its own event's answer. */
    chunk *oldest = NULL;
    int delivering = 0;
    for (uint32_t i = 0; i < x->num_chunks; i++) {
      chunk *c = &x->chunks[i];
      if (c->owner != p) continue;
      if (c->state == CHUNK_DELIVERING) {
        delivering = 1;
      } else if (c->state == CHUNK_HELD) {
        if (oldest == NULL || c->seq < oldest->seq) oldest = c;
      }
    }
    if (oldest == NULL) {
      if (!delivering) return pending_delivered(x, p);
      /* Only copies by other threads remain (completed DMA, bytes on their way). */
      if (!wait) {
        return t4a_error_set_(T4A_NOT_READY, NULL, 0, NULL, 0,
                              "another thread is still copying this download into its destination");
      }
      pthread_cond_wait(&x->cond, &x->lock);
      continue;
    }
    st = wait ? chunk_query_before_wait(x, oldest) : chunk_query(x, oldest);
    if (st != T4A_NOT_READY) continue; /* delivered, or failed: answered at the top */
    if (!wait) return st;
    /* A host wait on the oldest, which is delivered as soon as it answers while the DMA of the
     * later ones goes on (their delivery overlaps the bus, not after it); a later chunk already
     * complete by then is delivered on its query, without a wait. A failed answer fails the
     * handle if that chunk is still its own; otherwise look again. An OK answer for a chunk
     * still held by p with the same record (p's chunks are never recorded again once p is out,
     * and p still PENDING) completes it without a query to settle it. */
    uint64_t waited = oldest->seq;
    if (chunk_wait(x, oldest, p) == T4A_OK && p->state == PENDING && oldest->owner == p &&
        oldest->state == CHUNK_HELD && oldest->seq == waited) {
      chunk_complete(x, oldest);
    }
  }
}

static t4a_status pending_observe(t4a_xfer_pending *p, int wait) {
  if (p == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pending is NULL");
  t4a_xfer *x = p->x;
  t4a_status st;
  pthread_mutex_lock(&x->lock);
  int answered = pending_answer(x, p, &st);
  pthread_mutex_unlock(&x->lock);
  if (answered) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters)) != T4A_OK) {
    return st; /* could not ask: nothing is known about the work, nothing memoised */
  }
  pthread_mutex_lock(&x->lock);
  st = pending_step(x, p, wait);
  pthread_mutex_unlock(&x->lock);
  /* A failed restore of the caller's context is counted (ctx_restore_failures), not reported in
   * place of an OK that no later call could repeat. */
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}

t4a_status t4a_xfer_pending_poll(t4a_xfer_pending *p) { return pending_observe(p, 0); }
t4a_status t4a_xfer_pending_wait(t4a_xfer_pending *p) { return pending_observe(p, 1); }

/* The handle goes back to x's spare handles, its event to the spare events, when there is room. */
void t4a_xfer_pending_release(t4a_xfer_pending *p) {
  if (p == NULL) return;
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_xfer *x = p->x;
  pthread_mutex_lock(&x->lock);
  /* Another thread copying some of its bytes into the destination finishes first. */
  while (p->delivering > 0) pthread_cond_wait(&x->cond, &x->lock);
  /* Chunks still in flight stay out of the ring until their DMA completes; no delivery. */
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->owner == p && c->state == CHUNK_HELD) {
      c->owner = NULL;
      c->dst = NULL;
      c->state = CHUNK_ORPHAN;
    }
  }
  CUevent ev = p->event;
  /* A failed handle's event answered an error: not reused. */
  if (ev != NULL && p->state != FAILED && spare_put(x, ev)) ev = NULL;
  /* No chunk names p any more, and nobody is delivering into it: its record can serve again. */
  if (pending_put(x, p)) p = NULL;
  pthread_mutex_unlock(&x->lock);
  if (ev != NULL) {
    t4a_ctx_scope scope;
    if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters) == T4A_OK) {
      event_drop(x, ev);
      t4a_ctx_scope_exit_quiet(&scope);
    } else {
      xfer_count(x, T4A_COUNTER_leaked, 1);
    }
  }
  free(p);
  xfer_unref(x);
  t4a_error_restore(&saved);
}
