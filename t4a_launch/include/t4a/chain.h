/** @file
 * t4a/chain.h — launch chains: a fixed sequence of operations recorded once on a runtime and
 * replayed with one call, as one executable graph whose kernel nodes follow descriptor rebinds.
 *
 * Layer: t4a_launch (on t4a_retire's capture mode and the descriptor table of t4a/launch.h).
 *
 * A chain gives a fixed per-step sequence (a decoder step, a solver iteration) a graph's replay
 * cost without capture code, and keeps descriptor rebinds working between replays (why and what
 * it costs: docs/design.md §18, docs/performance.md).
 *
 * Recording. t4a_chain_begin(table) puts the table's runtime (its retire) in capture mode
 * (t4a/retire.h, t4a/graph.h): until t4a_chain_end, every operation admitted on the lane is
 * recorded instead of run — descriptor fires of `table`, uploads from pinned memory and slots
 * (t4a_xfer_upload_pinned, t4a_xfer_slot_upload), copies within the lane (t4a_xfer_copy),
 * checked and raw launches — and the references each would keep alive (modules, buffers, pinned
 * memory) gather for the chain. What cannot be captured is refused with UNSUPPORTED and the
 * recording goes on (buffer creation, staged transfers, downloads, copies between lanes, fences,
 * observing the lane). t4a
 * has no memset operation, so a chain has none either. For each fire of `table`'s descriptors the
 * chain learns the kernel node it added (cuStreamGetCaptureInfo, driver 12.3) and remembers
 * (node, descriptor, the descriptor's bind generation then). Fires of other tables, checked
 * launches and raw launches are recorded with the arguments they had: they do not follow rebinds.
 *
 * Replay. t4a_chain_replay is one admission on the lane: for every recorded fire whose descriptor
 * was rebound (t4a_descriptor_rebind, _rebind_fire) since the chain last saw it, the kernel node
 * of the executable graph is updated in place (cuGraphExecKernelNodeSetParams, counted in
 * chain_node_updates; never a re-instantiation), then one cuGraphLaunch on the lane's stream
 * (chain_replays). So a replay sees every rebind made before it, and replays are ordered with
 * every other operation of the lane exactly as a launch is. Pinned and slot uploads read the host
 * bytes when the replay runs (write a slot, then replay). A warm replay (no rebind) allocates
 * nothing on the heap, takes no reference count and records no event of its own (at most one per
 * 512 admissions, as every admission). t4a_chain_end_update re-records an existing chain: a new
 * executable graph replaces the old (chain_reinstantiations), for sequences whose shape changes.
 *
 * Ownership and lifetime. A chain holds the executable graph, the captured graph and every
 * reference the recording gathered; the buffers its kernel nodes name now are their descriptors'
 * (which hold them). Each replay keeps the chain's state alive through the lane's epoch; a rebind
 * of a descriptor a chain names hands the buffer it replaces to the lane's open epoch (an
 * admission that enqueues nothing), and destroying a chain does the same for its descriptors'
 * current buffers. So the caller may release buffers, rebind descriptors to new ones and drop the
 * old ones, destroy the chain, then unregister the descriptors, with replays queued: everything
 * goes only after the last replay that used it completed. A descriptor named
 * by a live chain (or by a recording in progress) cannot be unregistered: BUSY. The table is
 * borrowed: destroy every chain of a table before the table (a recording still open when the
 * table is destroyed is dropped with it, the capture left to the retire's teardown).
 *
 * Thread-safety: every function may be called from any thread, except t4a_chain_end and
 * t4a_chain_end_update, which must run on the thread that called t4a_chain_begin (the capture is
 * THREAD_LOCAL; another thread's end is INVALID_ARGUMENT and leaves the recording open). Replays,
 * rebinds and fires of one table serialise on the table's lock (taken before the retire's). None
 * may be called from inside an admission of the runtime (a raw scope's callback): REENTRY. */
#ifndef T4A_CHAIN_H_
#define T4A_CHAIN_H_

#include <stdint.h>

#include "t4a/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A recorded launch chain (opaque). */
typedef struct t4a_chain t4a_chain;

/** Begins recording a chain on `table`'s runtime. Statuses: INVALID_ARGUMENT (NULL), BUSY (a
 * recording or a capture is in progress on the lane), UNSUPPORTED (the driver lacks
 * cuStreamGetCaptureInfo), REENTRY, LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures
 * (cuStreamBeginCapture). */
T4A_MUST_USE t4a_status t4a_chain_begin(t4a_launch_table *table);

/** Ends the recording and instantiates it: on success *out is a new chain (owned by the caller).
 * The recording ends in every case but one (the wrong thread: INVALID_ARGUMENT, still open); on
 * failure the recorded work is dropped with its references. Statuses: INVALID_ARGUMENT (NULL, no
 * recording on this table, the wrong thread), the failure of learning a fire's node
 * (cuStreamGetCaptureInfo, with its detail), a fire that failed during the recording (its
 * status), DRIVER_ERROR (e.g. CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; the instantiation's
 * refusal), HOST_OUT_OF_MEMORY, REENTRY, CONTEXT_LOST. */
T4A_MUST_USE t4a_status t4a_chain_end(t4a_launch_table *table, t4a_chain **out);

/** Ends the recording into `chain` (recorded on `table`), replacing its graph with a new
 * instantiation (counted in chain_reinstantiations); replays already queued keep what the old
 * one used. On failure the chain is unchanged. Statuses: as t4a_chain_end, plus FOREIGN_HANDLE
 * (a chain of another table: the recording is still ended and dropped). */
T4A_MUST_USE t4a_status t4a_chain_end_update(t4a_launch_table *table, t4a_chain *chain);

/** Replays the chain on its runtime's stream, its rebound kernel nodes updated first (see above).
 * Statuses: INVALID_ARGUMENT (NULL), FOREIGN_HANDLE (`chain` was recorded on another table),
 * UNSUPPORTED (the lane is capturing), REENTRY, LANE_BROKEN, CONTEXT_LOST, driver failures
 * (cuGraphExecKernelNodeSetParams: nothing was launched, and a later replay retries the update;
 * cuGraphLaunch: a launch that may be queued quarantines the chain's state, counted when
 * leaked). */
T4A_MUST_USE t4a_status t4a_chain_replay(t4a_launch_table *table, t4a_chain *chain);

/** A snapshot of a chain (t4a_chain_stats). */
struct t4a_chain_stats {
  uint32_t kernel_nodes;     /**< recorded fires of the table's descriptors (nodes that follow
                                  rebinds) */
  uint32_t keepalives;       /**< references gathered by the recording */
  uint64_t replays;          /**< t4a_chain_replay calls that launched */
  uint64_t node_updates;     /**< kernel nodes updated in place after rebinds */
  uint64_t reinstantiations; /**< t4a_chain_end_update calls that succeeded */
  uint32_t memset_nodes;     /**< fills recorded with t4a_chain_memset (t4a/memset.h) */
  uint64_t memset_updates;   /**< memset nodes updated in place for a new value */
};
/** A snapshot (all zero for NULL). */
void t4a_chain_stats(t4a_chain *chain, struct t4a_chain_stats *out);

/** Destroys the chain: its descriptors may be unregistered again; the executable graph and every
 * reference go once the last queued replay completed (the driver finishes queued replays before
 * freeing the graph). Without the lane's context the native objects are leaked and counted.
 * Accepts NULL. */
void t4a_chain_destroy(t4a_chain *chain);

#ifdef __cplusplus
}
#endif
#endif /* T4A_CHAIN_H_ */
