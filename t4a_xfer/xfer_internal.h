/* Private to t4a_xfer: the staging ring and the transfer state shared by xfer.c, copy.c and
 * file.c. Not a public header; nothing outside t4a_xfer includes it. */
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
  CHUNK_QUARANTINED, /* a call failed after something may have been enqueued: never reused */
};

typedef struct chunk {
  t4a_pinned *pinned;
  unsigned char *host;
  CUevent event; /* recorded after the chunk's DMA */
  int state;
  t4a_xfer_pending *owner; /* HELD only */
  unsigned char *dst;      /* HELD only: where the bytes go */
  size_t bytes;            /* HELD only */
} chunk;

struct t4a_xfer {
  atomic_int refs; /* the caller's, plus one per pending handle */
  pthread_mutex_t lock; /* the ring and the pending handles; taken inside the admission lock */
  t4a_retire *retire;   /* borrowed */
  t4a_lane *lane;       /* a reference */
  t4a_driver *driver;   /* borrowed from the lane */
  t4a_counters *counters; /* the lane's block */
  size_t chunk_bytes;
  uint32_t num_chunks;
  uint32_t next; /* the ring's oldest slot: the next one handed out */
  chunk *chunks;
};

enum { PENDING = 0, DELIVERED, FAILED };

struct t4a_xfer_pending {
  t4a_xfer *x;    /* a reference (once returned to the caller) */
  CUevent event;  /* pinned downloads: recorded after the DMA; NULL for staged ones */
  int state;      /* PENDING, DELIVERED, FAILED: terminal states are memoised */
  t4a_error failure;
};


static inline void xfer_count(t4a_xfer *x, t4a_counter_id id, uint64_t n) {
  t4a_counter_add(x->counters, id, n);
}

/* The ring (x->lock held on entry and on return; the lane's context current; the caller holds
 * an admission on x's lane, so no other thread enqueues on the lane meanwhile). Hands out the
 * ring's oldest usable chunk (FREE on return; the caller sets its next state), waiting for its
 * DMA if needed (a counted staging wait). LIMIT_EXCEEDED when every chunk is quarantined; a
 * device error as itself. */
t4a_status t4a_xfer_ring_acquire_(t4a_xfer *x, chunk **out);

/* Argument checks shared by every operation (typed errors with the detail set). */
t4a_status t4a_xfer_check_buffer_(const t4a_xfer *x, const t4a_buffer *buf, size_t offset,
                                  size_t bytes);
t4a_status t4a_xfer_check_pinned_(const t4a_pinned *p, size_t offset, size_t bytes);

/* A new reference packaged as a keepalive. */
t4a_keepalive t4a_xfer_buffer_ref_(t4a_buffer *b);
t4a_keepalive t4a_xfer_pinned_ref_(t4a_pinned *p);

#endif /* T4A_XFER_INTERNAL_H_ */
