/** @file
 * t4a/xfer_copy.h — copies between device buffers of two lanes (two runtimes on one device, or
 * two devices), and within one lane.
 *
 * Layer: t4a_xfer. Each side is a t4a_xfer (its lane, its retirement state, and for the
 * destination its staging ring). The result always belongs to the destination: it is ordered on
 * the destination lane's stream, and the source may be released at once after the call.
 *
 * Paths:
 *  - SAME_DEVICE (both lanes on one device): the source lane records a source-ready witness, the
 *    destination stream waits for it, the copy runs on the destination stream, the destination
 *    records a destination-done witness and the source stream waits for that (the back-wait), so
 *    every later free or reuse on the source stays ordered after the copy read it. No host wait.
 *  - PEER (two devices that can reach each other): the same bracket; before the first copy the
 *    destination's context is given peer access to the source's (once per pair) and the source's
 *    pool is opened to the destination device (cuMemPoolSetAccess, once per pool and device).
 *  - STAGED (two devices, any pair): per chunk of the destination's staging ring, the source
 *    stream copies into the portable pinned chunk and records a source witness for that chunk;
 *    the destination stream waits for it, copies the chunk to the destination and records the
 *    chunk's event (the destination-local commit). A chunk is reused only once that event
 *    completed. The source needs no back-wait: its stream did the reading itself.
 *  One lane (dst_xfer == src_xfer, or two t4a_xfer on one lane): one copy on the stream.
 *
 * T4A_COPY_AUTO takes SAME_DEVICE on one device, PEER where the driver says the destination
 * device can access the source device, STAGED otherwise. A requested PEER copy never falls back:
 * it fails with UNSUPPORTED where the pair cannot. The path taken is returned and counted
 * (copies_same_device, copies_peer, copies_staged on the destination lane; cross_waits,
 * events_recorded on both).
 *
 * Failures (typed; the detail names the entry, and for STAGED the chunk and its byte range):
 * a call that fails before anything was enqueued leaves both buffers as they were. After work
 * was enqueued, what may still touch memory is quarantined, never freed on a guess: the
 * destination buffer when a destination-side enqueue failed; the source buffer when its
 * back-wait could not be enqueued (its stream would not be ordered after the read); a staging
 * chunk whose DMA state is unknown (one touched by the source's stream is never reused and, if
 * no drain of both lanes is proved, leaked at teardown and counted). A driver failure is
 * returned as itself, noted against the lane whose call failed (a sticky error marks only that
 * lane's context lost), and the staged path's detail names the side and the chunk. A source
 * witness that had already settled as failed comes back as UPSTREAM_FAILED.
 *
 * The copy's witness is the destination-done event with the source-ready witness as its upstream,
 * and it settles OK only once both answered OK. So a copy never observed before a sticky error on
 * the source's context reads as failed for good, even if its bytes may have landed: after the
 * fault, the source-ready event's completion can no longer be told apart from work the fault
 * dropped, and t4a never reports a copy it cannot confirm. A copy observed OK before the fault
 * stays OK (memoised; requirement B1). If only recording the requested witness fails, the copy was
 * already admitted (its bytes land, ordered as usual, and it is counted): the status says why no
 * witness came back.
 *
 * Staged copies refuse a destination stream that is capturing a graph (UNSUPPORTED), as the
 * staged uploads and downloads do.
 *
 * Lock order: the two lanes' admissions are taken in order of their domain identities, so
 * opposing copies (A -> B and B -> A at once, from different threads) never deadlock. */
#ifndef T4A_XFER_COPY_H_
#define T4A_XFER_COPY_H_

#include <stddef.h>

#include "t4a/retire.h"
#include "t4a/xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a copy between buffers goes (requested, or taken and reported). */
typedef enum t4a_copy_path {
  T4A_COPY_AUTO = 0,        /**< request only: pick as described above */
  T4A_COPY_SAME_DEVICE = 1, /**< both buffers on one device (one lane or two) */
  T4A_COPY_PEER = 2,        /**< two devices, peer access */
  T4A_COPY_STAGED = 3,      /**< two devices, through the destination's staging chunks */
} t4a_copy_path;

/** Copies `bytes` (> 0) of `src` from `src_offset` (a buffer of src_xfer's lane) to `dst` at
 * `dst_offset` (a buffer of dst_xfer's lane), by `path`. On success *out_path (optional) is the
 * path taken, and *out_witness (optional; the caller releases it) completes once the bytes are in
 * `dst`; observing it queries each event under its own context (the source's and the
 * destination's), from any thread or runtime.
 * Statuses: INVALID_ARGUMENT (NULL, 0 bytes, ranges outside a buffer, overlapping ranges of one
 * buffer, SAME_DEVICE requested across devices or PEER/STAGED on one device, an unknown path),
 * FOREIGN_HANDLE (a buffer not of its t4a_xfer's lane), UNSUPPORTED (PEER for a pair that
 * cannot; STAGED while the destination stream captures), REENTRY, LANE_BROKEN, CONTEXT_LOST, UPSTREAM_FAILED, LIMIT_EXCEEDED (every staging
 * chunk quarantined), HOST_OUT_OF_MEMORY, DRIVER_ERROR. */
T4A_MUST_USE t4a_status t4a_xfer_copy(t4a_xfer *dst_xfer, t4a_buffer *dst, size_t dst_offset,
                                      t4a_xfer *src_xfer, t4a_buffer *src, size_t src_offset,
                                      size_t bytes, t4a_copy_path path, t4a_copy_path *out_path,
                                      t4a_witness **out_witness);

/** The path `path` would take between these two lanes (AUTO resolved), without copying.
 * Statuses as t4a_xfer_copy's argument checks. */
T4A_MUST_USE t4a_status t4a_xfer_copy_plan(t4a_xfer *dst_xfer, t4a_xfer *src_xfer,
                                           t4a_copy_path path, t4a_copy_path *out_path);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_XFER_COPY_H_ */
