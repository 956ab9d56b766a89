/** @file
 * t4a/graph.h — CUDA graphs captured from a runtime's stream: capture, instantiate, replay,
 * update.
 *
 * Layer: t4a_launch (on t4a_retire's capture mode).
 *
 * t4a_graph_capture_begin puts the retire in capture mode (t4a/retire.h): every operation admitted
 * on its lane until t4a_graph_capture_end — checked launches, descriptor fires, pinned and slot
 * uploads, device copies within the lane — is recorded into a graph instead of running, and the
 * references each would have kept alive (modules, buffers, pinned memory) are gathered for the
 * graph. Operations that cannot be captured are refused with UNSUPPORTED and leave the capture
 * intact: creating buffers, staged (pageable) transfers, downloads, copies between lanes,
 * fences, witnesses, and observing the lane (t4a_retire_poll / _wait).
 *
 * t4a_graph_capture_end instantiates the graph. A t4a_graph holds those references until it is
 * released and its last replay completed: each t4a_graph_launch is an admission that keeps the
 * graph's current version alive through the lane's epoch (no host wait, no per-replay event), so
 * the caller may drop the buffers and modules it captured at once.
 *
 * t4a_graph_capture_update ends a new capture into an existing graph: cuGraphExecUpdate when the
 * topology is unchanged (the executable graph is updated in place for later replays), otherwise a
 * new instantiation. Replays already queued keep the references of the version they ran.
 *
 * While a lane is captured, drop paths whose driver calls would break the capture on the real
 * driver (cuModuleUnload, cuGraphExecDestroy; docs/design.md §14) run once it ended; replays and
 * the persisting-L2 limit are refused (UNSUPPORTED); another retire of the same lane admits
 * nothing (UNSUPPORTED).
 *
 * Thread-safety: a graph may be launched from any thread; update and launch of one graph
 * serialise on its retire's admission lock (an update swaps the executable graph inside an
 * admission, so a replay takes no lock of the graph's own). Captures of one lane are one at a
 * time (BUSY). A capture is thread-local: the thread that began it ends it (another thread's end
 * is INVALID_ARGUMENT and leaves it as it was); every thread's admissions on the lane are
 * captured meanwhile. */
#ifndef T4A_GRAPH_H_
#define T4A_GRAPH_H_

#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A captured, instantiated graph bound to one retirement state. Refcounted, opaque. */
typedef struct t4a_graph t4a_graph;

/** Begins capturing `retire`'s lane. Statuses: as t4a_retire_capture_begin (BUSY, REENTRY,
 * LANE_BROKEN, driver failures). */
T4A_MUST_USE t4a_status t4a_graph_capture_begin(t4a_retire *retire);

/** Ends the capture and instantiates it. On success *out is a new graph (one reference) bound to
 * `retire` (borrowed: it must outlive the graph). The capture ends in every case; on failure the
 * captured work is dropped with its references. Statuses: INVALID_ARGUMENT (not capturing),
 * DRIVER_ERROR (e.g. CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; the instantiation's refusal),
 * REENTRY, HOST_OUT_OF_MEMORY, CONTEXT_LOST. */
T4A_MUST_USE t4a_status t4a_graph_capture_end(t4a_retire *retire, t4a_graph **out);

/** Ends the capture into `graph` (captured on the same retire): updated in place when the driver
 * accepts it (*out_in_place 1), re-instantiated otherwise (0). On failure the graph is unchanged.
 * Statuses: as t4a_graph_capture_end, plus INVALID_ARGUMENT for a graph of another retire. */
T4A_MUST_USE t4a_status t4a_graph_capture_update(t4a_retire *retire, t4a_graph *graph,
                                                 int *out_in_place);

/** Replays the graph on its lane's stream (an admission; counted in graph_launches). Statuses:
 * REENTRY, LANE_BROKEN, CONTEXT_LOST, driver failures (cuGraphLaunch). */
T4A_MUST_USE t4a_status t4a_graph_launch(t4a_graph *graph);

/** Adds a reference. Accepts NULL. */
void t4a_graph_retain(t4a_graph *graph);
/** Drops a reference. The last one destroys the executable graph (the driver finishes queued
 * replays first) and drops the current version, whose references go once its last queued
 * replay completed. Without the lane's context the native objects are leaked and counted.
 * Accepts NULL. */
void t4a_graph_release(t4a_graph *graph);

/** How many references (modules, buffers, pinned memory...) the current version holds. */
size_t t4a_graph_num_keepalives(t4a_graph *graph);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_GRAPH_H_ */
