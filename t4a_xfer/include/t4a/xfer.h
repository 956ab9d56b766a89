/** @file
 * t4a/xfer.h — uploads, downloads and the staging ring (host <-> device on one lane).
 *
 * Layer: t4a_xfer, on t4a_mem (buffers, pinned chunks) and t4a_retire (admission, keepalives).
 *
 * A t4a_xfer serves one lane: the lane of the t4a_retire it is created on. It owns a bounded ring
 * of portable pinned staging chunks (CU_MEMHOSTALLOC_PORTABLE, requirement A2) and one event per
 * chunk. Defaults: a ring 4 chunks deep of 16 MiB; 2 are in the ring from the start, each pinned
 * when first used, and the others are made when one transfer needs them (why: docs/design.md);
 * both are options.
 *
 * Every operation is one admission on the lane (t4a_admission_begin ... commit): it holds the
 * lane's operation lock for its whole length, enqueues on the lane's stream, and hands the device
 * buffer (and a caller's pinned memory) to the open epoch as keepalives, so they live until the
 * DMA completes even if the caller drops them at once.
 *
 * Pageable uploads copy the caller's bytes into a chunk before that chunk's DMA is enqueued: when
 * the call returns the caller may reuse or free its memory. The chunk's event is recorded after
 * its DMA; a chunk is reused only once that event reports completion. When the ring has no free
 * chunk the call waits for the oldest (a counted host wait: staging_waits and host_waits), so a
 * transfer larger than the ring pipelines: the host copy into chunk k+1 overlaps the DMA of
 * chunk k. The host copies into and out of chunks are split across a pool of copy threads
 * (copy_threads; what they gain: docs/performance.md).
 * Uploads from the caller's pinned memory go direct (one DMA), holding that memory until
 * the DMA completed; with max_pinned_hold_bytes set, a request that would hold more of the
 * callers' pinned memory than that goes through the ring instead (copied into chunks, the
 * caller's memory not held).
 *
 * Downloads return a pending handle. A pageable download DMAs into chunks; the bytes reach the
 * caller's destination only when completion is observed (t4a_xfer_pending_poll / _wait), or,
 * for a download larger than the ring, when the ring needs one of its chunks back (after that
 * chunk's DMA completed). The caller's destination must therefore stay valid until the handle
 * was waited, polled to OK, or released. Nothing is written after the release, nor after a poll
 * or wait returned the handle's failure. Pinned downloads DMA straight into the caller's
 * t4a_pinned (kept alive until the DMA completes); their events are recycled (a warm pinned
 * download creates no event).
 *
 * Failures are typed. A driver call that fails after work may have been enqueued leaves that
 * work's state unknown: the destination or source buffer is quarantined (t4a_admission_fail) and
 * the chunk is never reused on a guess. A quarantined chunk goes back to the ring once a record
 * made later on the lane's stream is observed complete without error (stream order proves the
 * uncertain work finished; when every chunk is quarantined the ring records and waits for one
 * itself); a failed answer never frees anything. Otherwise it is freed only after a proved drain
 * (t4a_xfer_destroy synchronises the stream) and leaked and counted without one.
 *
 * Counters (the lane's block): bytes_uploaded (when the call returns), bytes_downloaded (when
 * the download is delivered: the first OK of poll or wait; a released or failed download counts
 * nothing), staging_waits, events_recorded (one per staged chunk, per pinned download and per
 * reclaim marker), host_waits. Per-transfer figures (chunk states, reclaimed chunks, pinned bytes
 * held, fallbacks) come from t4a_xfer_stats.
 *
 * Thread-safety: every function may be called from any thread. Operations on one t4a_xfer
 * serialise on the lane's operation lock. Pending handles take only the ring's own lock, which
 * nobody holds across a device wait or a chunk-sized host copy: a poll never waits for the
 * device, nor behind another thread's wait, upload or delivery. (The one exception: a poll that
 * finds its handle failed while another thread is still copying that handle's bytes into the
 * destination waits for that copy, at most one chunk, before it reports the failure.) */
#ifndef T4A_XFER_H_
#define T4A_XFER_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/mem.h"
#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @{ */
/** Default staging chunk size and ring depth, and the chunks in the ring from the start (each
 * pinned at its first use): the ring grows to
 * its depth only when one transfer spans more chunks than it has (how they were chosen:
 * docs/design.md, "Pageable paths by size"). */
#define T4A_XFER_DEFAULT_CHUNK_BYTES ((size_t)16 << 20)
#define T4A_XFER_DEFAULT_NUM_CHUNKS 4u
#define T4A_XFER_INITIAL_CHUNKS 2u
/** @} */
/** A chunk first handed out for a unit of at most this many bytes is pinned at this size, not at
 * chunk_bytes, and re-pinned at chunk_bytes when a larger unit first needs it (a small first
 * transfer pins 64 KiB, not a whole chunk). */
#define T4A_XFER_SMALL_PIN_BYTES ((size_t)64 << 10)
/** @{ */
/** Bounds on the options. */
#define T4A_XFER_MIN_CHUNK_BYTES ((size_t)4096)
#define T4A_XFER_MAX_NUM_CHUNKS 64u
/** @} */
/** @{ */
/** Default size thresholds of the pageable paths (see t4a_xfer_options). */
#define T4A_XFER_DEFAULT_SPLIT_COPY_MIN ((size_t)1 << 20)
#define T4A_XFER_DEFAULT_PIPELINE_PIECE ((size_t)2 << 20)
/** @} */

/** A lane's transfer state: its staging ring of pinned chunks and its copy threads. Opaque. */
typedef struct t4a_xfer t4a_xfer;

/** Options of t4a_xfer_create; zero means the default. */
typedef struct t4a_xfer_options {
  size_t chunk_bytes;  /**< 0: T4A_XFER_DEFAULT_CHUNK_BYTES; at least T4A_XFER_MIN_CHUNK_BYTES */
  /** The ring's depth. 0: T4A_XFER_DEFAULT_NUM_CHUNKS; at most T4A_XFER_MAX_NUM_CHUNKS. The
   * first min(num_chunks, T4A_XFER_INITIAL_CHUNKS) are in the ring from the start, each pinned at
   * its first use; the others are made by the first transfer that spans more chunks than the ring
   * has. A chunk that cannot be made or pinned while another is made is absorbed and counted in
   * ring_grow_failures: the transfer runs on the chunks there are. */
  uint32_t num_chunks;
  /** The most of the callers' pinned memory that direct pinned uploads may keep alive at once, in
   * bytes; 0: unlimited. A t4a_pinned is held whole, so it counts with its full size, once, from
   * the first direct upload that uses it until the last keepalive on it is released (its epoch
   * completed). An upload that would go over goes through the staging ring instead. */
  uint64_t max_pinned_hold_bytes;
  /** Threads that copy pageable bytes into chunks (uploads) and out of them (downloads), the
   * calling thread included: 0 = the default (online CPUs up to 8; above 8 CPUs, CPUs - 4, at
   * least 8 and at most T4A_XFER_DEFAULT_COPY_THREADS); 1 = the calling thread alone; at most
   * T4A_XFER_MAX_COPY_THREADS. A caller that finds the threads busy (another thread's transfer)
   * copies alone. */
  uint32_t copy_threads;
  /** Host copies of at least this many bytes are split across the copy threads; smaller ones
   * are one memcpy. 0: T4A_XFER_DEFAULT_SPLIT_COPY_MIN. */
  size_t split_copy_min_bytes;
  /** An upload that fits in one chunk is copied and enqueued piece by piece, so the DMA of one
   * piece overlaps the host copy of the next: in pieces of this size, or of half the upload when
   * that makes less than two; below twice split_copy_min_bytes, in quarters of the upload (at
   * least a sixteenth of this size, whole pages; none when that makes less than two). A transfer
   * of more than one chunk starts and ends with a one-piece unit (whole chunks between). 0:
   * T4A_XFER_DEFAULT_PIPELINE_PIECE; at least T4A_XFER_MIN_CHUNK_BYTES; a piece of chunk_bytes
   * or more turns pieces off. */
  size_t pipeline_piece_bytes;
} t4a_xfer_options;
/** Every option at its default (zero). */
#define T4A_XFER_OPTIONS_INIT {0, 0, 0, 0, 0, 0}
/** @{ */
/** The cap on the default number of copy threads, and the most copy_threads may ask for. */
#define T4A_XFER_DEFAULT_COPY_THREADS 12u
#define T4A_XFER_MAX_COPY_THREADS 64u
/** @} */

/** Creates the transfer state of `retire`'s lane (the lane is retained; `retire` is borrowed and
 * must outlive every operation: destroy the t4a_xfer before the t4a_retire). The ring's first
 * chunks (portable pinned memory and an event each) are not made here: each when the ring first
 * hands it out to a staged transfer or copy (whose statuses then include the pinning's); a
 * transfer of more chunks grows the ring up to num_chunks. options may be NULL.
 * Statuses: INVALID_ARGUMENT, LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_xfer_create(t4a_retire *retire, const t4a_xfer_options *options,
                                        t4a_xfer **out);
/** Drops the caller's reference (pending handles hold their own; the last one tears down). The
 * teardown synchronises the lane's stream if any chunk is still in flight or quarantined (a
 * counted host wait) and frees the ring after that proved drain (except a chunk quarantined
 * after work on another lane's stream, which that drain does not cover: leaked and counted);
 * without one (context lost, lane broken or abandoned) it leaks the chunks and events in flight
 * and counts them in `leaked`. The spare events of pinned downloads are destroyed with the ring
 * (leaked and counted if the lane's context cannot be made current). Records of callers' pinned
 * memory still held by t4a_retire outlive the t4a_xfer safely. Never aborts; the caller's error
 * detail is kept. Accepts NULL. */
void t4a_xfer_destroy(t4a_xfer *xfer);

/** @{ */
/** The ring's chunk size and depth (num_chunks, made or not yet), and the lane (borrowed). */
size_t t4a_xfer_chunk_bytes(const t4a_xfer *xfer);
uint32_t t4a_xfer_num_chunks(const t4a_xfer *xfer);
t4a_lane *t4a_xfer_lane(const t4a_xfer *xfer);
/** @} */
/** Borrowed: the host address of staging chunk `index`, for diagnostics and tests (e.g. checking
 * that the chunks are portable pinned memory); NULL until a staged transfer or copy first used
 * that chunk (index < ring_chunks of t4a_xfer_stats). It holds chunk_bytes, or
 * T4A_XFER_SMALL_PIN_BYTES while only small units used it; a re-pin changes the address. */
void *t4a_xfer_chunk_host(const t4a_xfer *xfer, uint32_t index);

/** A snapshot of one t4a_xfer, for diagnostics and tests. */
struct t4a_xfer_stats {
  uint32_t free_chunks;        /**< reusable now */
  uint32_t busy_chunks;        /**< in flight, being filled, or being delivered */
  uint32_t quarantined_chunks; /**< held back after a failure */
  uint32_t spare_events;       /**< recycled events of pinned downloads */
  uint64_t chunks_reclaimed;   /**< quarantined chunks returned to the ring by a later completion */
  uint64_t pinned_hold_bytes;  /**< callers' pinned memory held by direct uploads now */
  uint64_t pinned_fallbacks;   /**< pinned uploads sent through the ring (over the budget) */
  uint32_t copy_threads;       /**< host copy threads, the caller included (1: no pool) */
  uint64_t parallel_copies;    /**< chunk copies split across the copy threads */
  uint32_t ring_chunks;        /**< chunks made so far (grows up to num_chunks) */
  uint32_t max_chunks_in_flight; /**< the most chunks with a DMA in flight at once */
  uint64_t ring_grow_failures; /**< chunks the ring could not make when it grew or first used them (absorbed) */
  uint64_t pipelined_pieces;   /**< pieces enqueued by uploads copied piece by piece */
  uint64_t single_copies;      /**< host chunk copies made as one memcpy (below the split size) */
};
/** Fills *out (all zero for a NULL xfer). Takes the ring's lock briefly. */
void t4a_xfer_stats(t4a_xfer *xfer, struct t4a_xfer_stats *out);

/** Copies `bytes` (> 0) from pageable host memory `src` to `dst` at `offset`, through the ring.
 * Returns once every byte is in a chunk and every DMA is enqueued: `src` may be reused at once.
 * Statuses: INVALID_ARGUMENT (NULL, 0 bytes, range outside the buffer), FOREIGN_HANDLE (a buffer of
 * another lane's domain), REENTRY, LANE_BROKEN, CONTEXT_LOST, DRIVER_ERROR (the detail names the
 * chunk and its bytes), LIMIT_EXCEEDED (every chunk quarantined for good: none can be proved
 * reusable), UNSUPPORTED (the lane's stream is capturing a graph: staged transfers recycle their
 * chunks on event answers a graph would not respect; slot and pinned uploads can be captured). */
T4A_MUST_USE t4a_status t4a_xfer_upload(t4a_xfer *xfer, t4a_buffer *dst, size_t offset,
                                        const void *src, size_t bytes);

/** Copies `bytes` of the caller's pinned memory `src` from `src_offset` straight to `dst` at
 * `offset` (no staging). `src` is kept alive until the DMA completes; the caller must not write
 * those bytes until it observed completion (e.g. t4a_retire_wait). If holding `src` would exceed
 * max_pinned_hold_bytes, the bytes go through the ring as t4a_xfer_upload does (src is then not
 * held, and may be reused when the call returns). Statuses as t4a_xfer_upload, plus
 * HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_xfer_upload_pinned(t4a_xfer *xfer, t4a_buffer *dst, size_t offset,
                                               t4a_pinned *src, size_t src_offset, size_t bytes);

/** A download in flight. */
typedef struct t4a_xfer_pending t4a_xfer_pending;

/** Copies `bytes` of `src` from `offset` into pageable `dst` through the ring and returns a pending
 * handle. `dst` is written only after the DMA of the bytes concerned completed, and must stay
 * valid until the handle was waited, polled to OK or released. Statuses as t4a_xfer_upload, plus
 * HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_xfer_download(t4a_xfer *xfer, t4a_buffer *src, size_t offset,
                                          void *dst, size_t bytes, t4a_xfer_pending **out);

/** Copies `bytes` of `src` from `offset` straight into the caller's pinned `dst` at `dst_offset`.
 * Both are kept alive until the DMA completes. Statuses as t4a_xfer_download. */
T4A_MUST_USE t4a_status t4a_xfer_download_pinned(t4a_xfer *xfer, t4a_buffer *src, size_t offset,
                                                 t4a_pinned *dst, size_t dst_offset, size_t bytes,
                                                 t4a_xfer_pending **out);

/** Non-blocking: never waits for the device, nor behind another thread's wait or copy. T4A_OK
 * the first time completion is observed (the bytes are then in the caller's destination;
 * bytes_downloaded counts them now), T4A_NOT_READY before (also while another thread is still
 * copying some of this download's completed bytes into the destination), T4A_ALREADY_CONSUMED
 * after an OK. A device error is returned as itself (CONTEXT_LOST…), never folded into
 * NOT_READY; the terminal state (OK or the failure) is memoised at the first observation, so a
 * later sticky error never turns a delivered download into a failure (requirement B1), and a failed
 * one keeps returning its failure. */
T4A_MUST_USE t4a_status t4a_xfer_pending_poll(t4a_xfer_pending *pending);
/** Blocks until the download completed or failed, then as poll. A staged download waits on the
 * event of its newest chunk only (one counted host wait: stream order proves the older chunks),
 * then settles the others with queries. */
T4A_MUST_USE t4a_status t4a_xfer_pending_wait(t4a_xfer_pending *pending);
/** Drops the handle, waited or not, from any thread. Nothing is written to the destination after
 * this returns (if another thread is copying some of its bytes into the destination right now,
 * it waits for that copy first); a chunk still in flight goes back to the ring only once its DMA
 * completed. A pinned download's event is kept for reuse. Accepts NULL. */
void t4a_xfer_pending_release(t4a_xfer_pending *pending);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_XFER_H_ */
