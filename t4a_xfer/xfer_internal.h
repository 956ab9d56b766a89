/* Private to t4a_xfer: the staging ring and the transfer state shared by xfer.c, copy.c and
 * file.c. Not a public header; nothing outside t4a_xfer includes it.
 *
 * Locking. Two locks, always taken in this order: the lane's admission (t4a_admission_begin, the
 * retire's operation lock), then x->lock. Every operation that acquires chunks or records on the
 * lane's stream holds the admission, so one thread at a time acquires and records ("the
 * acquirer"). Observers (poll, wait) and release() take only x->lock, and touch only the chunks
 * their handle owns. Nobody holds x->lock across a device wait (cuEventSynchronize) or a
 * chunk-sized memcpy: such a thread first moves the chunk into a state that keeps everyone else
 * off it (FILLING, DELIVERING) or copies the event, drops the lock, and re-checks the chunk's
 * state when it takes the lock again. So a poll never blocks behind another thread's device wait
 * or host copy. */
#ifndef T4A_XFER_INTERNAL_H_
#define T4A_XFER_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"

/* A staging chunk's state. Transitions happen under the ring lock. */
enum {
  CHUNK_FREE = 0,    /* its last DMA is confirmed complete: reusable */
  CHUNK_BUSY,        /* an upload's DMA is enqueued; its event follows it */
  CHUNK_HELD,        /* a pageable download's DMA is enqueued; its bytes belong to `owner` */
  CHUNK_ORPHAN,      /* as HELD, but the handle went (or the download failed): no delivery */
  CHUNK_QUARANTINED, /* a call failed after something may have been enqueued: not reused until a
                        later completion on the lane's stream proves that work finished
                        (reclaim_seq), or never (foreign, or reclaim_seq 0) */
  CHUNK_FILLING,     /* handed out to the acquirer, who fills it and enqueues its DMA without the
                        lock; nobody else touches it; the acquirer sets the next state */
  CHUNK_DELIVERING,  /* a HELD chunk whose event answered OK: one thread copies its bytes to
                        owner's destination without the lock, then frees it and signals x->cond.
                        owner stays set (owner->delivering counts these) */
};

typedef struct chunk {
  t4a_pinned *pinned; /* NULL, and event NULL, until the ring first hands the chunk out */
  unsigned char *host;
  size_t cap; /* the bytes pinned at host (0 until pinned): the ring's chunk_bytes, or
                 T4A_XFER_SMALL_PIN_BYTES for a chunk so far handed out only for small units;
                 the acquire re-pins it at chunk_bytes (a FREE chunk) when a larger unit needs it */
  CUevent event; /* recorded after the chunk's DMA */
  int state;
  t4a_xfer_pending *owner; /* HELD and DELIVERING only */
  unsigned char *dst;      /* HELD and DELIVERING only: where the bytes go */
  size_t bytes;            /* HELD and DELIVERING only */
  int foreign; /* QUARANTINED after work on ANOTHER lane's stream touched it (copy.c's staged
                  path): the ring's own stream proves nothing about it, so it is never reclaimed
                  and a teardown that drained only this lane leaks it (counted) */
  uint64_t seq; /* the record sequence number of its event's last record on the lane's stream
                   (t4a_xfer_chunk_recorded_); 0 when unknown or recorded elsewhere: its
                   completion then proves nothing about other work */
  uint64_t drains; /* BUSY after a staged upload (stage_chunks): x->retire's drain count
                      (t4a_retire_drains_) read inside the admission that recorded the event; a
                      larger count proves the DMA done without asking the event. UINT64_MAX:
                      recorded elsewhere (copy.c), never inferred */
  uint64_t reclaim_seq; /* QUARANTINED only: once a record with this sequence number or a later
                           one is observed complete OK, the uncertain work finished (stream order)
                           and the chunk goes back to FREE. 0: never (set only by
                           t4a_xfer_chunk_quarantine_ for work on the lane's own stream; a chunk
                           quarantined by writing the state directly, as copy.c does after work
                           on another stream, keeps 0 from the acquire) */
} chunk;

/* Host copy threads (copier.c): a chunk-sized memcpy split across a pool, the caller taking
 * slices too. NULL (one thread) copies alone. A caller that finds the pool busy copies alone:
 * nobody waits for another caller's copy. Copies below the pool's split size are not split
 * (handing slices to threads costs microseconds). */
typedef struct t4a_xfer_copier t4a_xfer_copier;
/* threads: all of them, the caller included; 0 or 1 makes no pool (*out NULL). split_min: the
 * smallest copy split across the threads (> 0). Statuses: HOST_OUT_OF_MEMORY, INTERNAL (a thread
 * or lock could not be created). */
t4a_status t4a_xfer_copier_create_(uint32_t threads, size_t split_min, t4a_xfer_copier **out);
void t4a_xfer_copier_destroy_(t4a_xfer_copier *copier);
/* flags: T4A_XFER_COPY_STREAM makes the copy (each slice of a split one) use non-temporal
 * stores (on x86-64; memcpy elsewhere): for bytes a DMA reads next or a large download that
 * leaves the caches anyway (docs/performance.md, "Streaming stores"). Returns 1 if the copy was
 * split across the threads, 0 if it was one memcpy. */
#define T4A_XFER_COPY_STREAM 1u
int t4a_xfer_copier_memcpy_(t4a_xfer_copier *copier, void *dst, const void *src, size_t n,
                            unsigned flags);
/* The streaming copy itself (one thread), for tests: the same bytes as memcpy. */
void t4a_xfer_copy_stream_(void *dst, const void *src, size_t n);
/* Upload copies (pieces) of at least this many bytes go into chunks with streaming stores; a
 * smaller one stays in the caches, where the DMA reads it sooner. */
#define T4A_XFER_STREAM_UPLOAD_MIN ((size_t)64 << 10)
/* Downloads of at least this many bytes deliver with streaming stores. */
#define T4A_XFER_STREAM_DOWNLOAD_MIN ((size_t)8 << 20)
uint32_t t4a_xfer_copier_threads_(const t4a_xfer_copier *copier);
uint64_t t4a_xfer_copier_parallel_copies_(t4a_xfer_copier *copier);

/* The spare events of pinned downloads kept for reuse (created in the lane's context). */
#define T4A_XFER_SPARE_EVENTS 4
/* Recycled host records kept for reuse, per list: pending handles (per t4a_xfer) and pinned-hold
 * records (per t4a_xfer_holds). Beyond it a released record goes back to the heap. */
#define T4A_XFER_SPARE_RECORDS 64u

/* The budget of callers' pinned memory held by direct uploads (see xfer.c). Refcounted and
 * shared with the keepalives handed to t4a_retire, which may release them after the t4a_xfer is
 * gone: nothing in it points at the t4a_xfer. */
typedef struct t4a_xfer_holds t4a_xfer_holds;

struct t4a_xfer {
  atomic_int refs; /* the caller's, plus one per pending handle */
  pthread_mutex_t lock; /* the ring and the pending handles; taken inside the admission lock */
  pthread_cond_t cond;  /* broadcast when a DELIVERING chunk is freed */
  t4a_retire *retire;   /* borrowed */
  t4a_lane *lane;       /* a reference */
  t4a_driver *driver;   /* borrowed from the lane */
  t4a_counters *counters; /* the lane's block */
  size_t chunk_bytes;
  uint32_t num_chunks; /* chunks made (pinned memory and event): the ring's slots; grows (under
                          x->lock, by the acquirer) up to max_chunks */
  uint32_t max_chunks; /* the ring's depth: `chunks` has room for this many */
  uint32_t next; /* the ring's oldest slot: the next one handed out */
  chunk *chunks;
  /* Under x->lock: */
  uint64_t record_seq;    /* the last sequence number given to a record on the lane's stream */
  uint64_t completed_seq; /* the highest sequence number observed complete OK */
  uint32_t num_reclaimable; /* QUARANTINED chunks with a reclaim_seq */
  uint32_t num_spare_events;
  CUevent spare_events[T4A_XFER_SPARE_EVENTS];
  t4a_xfer_pending *spare_pending; /* released handles (linked through next_spare) */
  uint32_t num_spare_pending;       /* at most T4A_XFER_SPARE_RECORDS */
  uint64_t chunks_reclaimed; /* for t4a_xfer_stats */
  uint64_t pinned_fallbacks; /* for t4a_xfer_stats */
  /* The copy strategy's counters, for t4a_xfer_stats (under x->lock): */
  uint32_t max_in_flight;      /* the most chunks in flight at once */
  uint64_t ring_grow_failures; /* chunks the ring could not make when it grew */
  uint64_t pipelined_pieces;   /* pieces enqueued by piece-by-piece uploads */
  uint64_t single_copies;      /* chunk copies made as one memcpy */
  /* Immutable after create: */
  uint64_t max_pinned_hold_bytes; /* 0: unlimited */
  size_t piece_bytes;             /* piece-by-piece uploads (one chunk, >= 2 pieces) */
  size_t split_min;               /* the copier's: copies from here on are split */
  t4a_xfer_copier *copier;        /* NULL: the calling thread copies alone */
  t4a_xfer_holds *holds;          /* a reference */
};

enum { PENDING = 0, DELIVERED, FAILED };

struct t4a_xfer_pending {
  t4a_xfer *x;    /* a reference (once returned to the caller) */
  CUevent event;  /* pinned downloads: recorded after the DMA; NULL for staged ones */
  int state;      /* PENDING, DELIVERED, FAILED: terminal states are memoised */
  t4a_error failure;
  uint64_t seq;   /* pinned downloads: the sequence number of the event's record */
  size_t bytes;   /* counted in bytes_downloaded when delivered */
  uint32_t delivering; /* chunks of this handle in DELIVERING: no terminal answer and no release
                          while nonzero (the destination is being written) */
  struct t4a_xfer_pending *next_spare; /* in x->spare_pending while recycled */
};


static inline void xfer_count(t4a_xfer *x, t4a_counter_id id, uint64_t n) {
  t4a_counter_add(x->counters, id, n);
}

/* The ring. Called with x->lock held, returns with it held; the lane's context current; the
 * caller holds an admission on x's lane, so no other thread acquires or enqueues on the lane
 * meanwhile. Hands out the ring's oldest usable chunk, FREE on return with seq and reclaim_seq 0:
 * the caller sets its next state before it drops the lock (FILLING while it fills or enqueues
 * without the lock). If that chunk is in flight it first queries its event, then waits for it (a
 * counted staging wait). It may drop x->lock meanwhile — while waiting on the device, while
 * another thread delivers the chunk, and while delivering a held chunk into its owner's
 * destination — so any chunk's state may change meanwhile: callers re-read what they need.
 * `need`: the bytes of the unit (at most chunk_bytes); the chunk handed out holds at least that
 * many (c->cap). A chunk never pinned is pinned first, at T4A_XFER_SMALL_PIN_BYTES for a small
 * unit, else at chunk_bytes; a FREE chunk too small for the unit is re-pinned at chunk_bytes (the
 * new memory first, then the old freed: its last DMA is confirmed). A chunk that cannot be pinned
 * is skipped while another made chunk holds `need` and is not quarantined for good (counted in
 * ring_grow_failures, the caller's detail kept); with none, the pinning's failure is returned.
 * When every chunk is quarantined and some can be reclaimed, it records a marker event on the
 * lane's stream and waits for it (a staging wait); its OK proves the uncertain work finished.
 * LIMIT_EXCEEDED when every chunk is quarantined for good; a device error as itself. */
t4a_status t4a_xfer_ring_acquire_(t4a_xfer *x, size_t need, chunk **out);

/* The acquirer (the admission held, the lane's context current, x->lock NOT held), before a
 * transfer of `units` chunk-sized DMAs: grows the ring to min(units, its depth) chunks. A chunk
 * that cannot be made stops the growth for this transfer, counted (ring_grow_failures) and
 * absorbed: the transfer runs on the chunks there are; the caller's error detail is kept. */
void t4a_xfer_ring_grow_(t4a_xfer *x, size_t units);

/* x->lock held, right after c->event was recorded on the lane's stream under the admission:
 * gives that record the next sequence number (so its completion proves earlier work). */
void t4a_xfer_chunk_recorded_(t4a_xfer *x, chunk *c);

/* x->lock held: quarantines c (owner and destination dropped). `on_lane_stream`: every piece of
 * uncertain work that may touch c was enqueued on the lane's stream before now, so a later record
 * observed complete OK reclaims it; 0 (work on another stream) marks it foreign: never reclaimed,
 * leaked at a teardown that proved only this lane's drain. */
void t4a_xfer_chunk_quarantine_(t4a_xfer *x, chunk *c, int on_lane_stream);

/* Within an admission (the lane's context current): UNSUPPORTED if the lane's stream is capturing
 * a graph. Staged transfers recycle their chunks when their events answer, which a captured graph
 * would not respect, so they refuse capture. */
t4a_status t4a_xfer_refuse_capture_(t4a_xfer *x);

/* Re-sets the current failure detail (entry and code kept) with where it happened: `what` ("upload",
 * "download", "source side of a copy"...), the chunk (0-based index of count) and its bytes. Returns
 * st. */
t4a_status t4a_xfer_name_chunk_(t4a_status st, const char *what, size_t index, size_t count,
                                size_t offset, size_t n);

/* Argument checks shared by every operation (typed errors with the detail set). */
t4a_status t4a_xfer_check_buffer_(const t4a_xfer *x, const t4a_buffer *buf, size_t offset,
                                  size_t bytes);
t4a_status t4a_xfer_check_pinned_(const t4a_pinned *p, size_t offset, size_t bytes);

/* A new reference packaged as a keepalive. */
/* After enqueueing work that uses b on `lane`: keeps b in the admission's epoch unless it is a
 * buffer of another stream's pool, whose marks order its memory (t4a_buffer_used_on_). */
void t4a_xfer_keep_buffer_(t4a_admission *adm, t4a_lane *lane, t4a_buffer *b);
t4a_keepalive t4a_xfer_buffer_ref_(t4a_buffer *b);
t4a_keepalive t4a_xfer_pinned_ref_(t4a_pinned *p);

#endif /* T4A_XFER_INTERNAL_H_ */
