/** @file
 * t4a/retire.h — admission, completion epochs, keepalives, witnesses, quarantine and teardown.
 *
 * Layer: t4a_retire, on t4a_ctx. One t4a_retire serves one lane (its stream and domain).
 *
 * Admission. Every operation that enqueues work on the lane runs as reserve -> enqueue -> commit:
 * t4a_admission_begin() takes the lane's operation lock, refuses a broken lane, activates the
 * lane's context, seals the open epoch when it is due and reserves room for the keepalives the
 * operation will hand over — everything that can fail, before anything is enqueued. The caller
 * then enqueues, hands its keepalives over with t4a_admission_keep() (which cannot fail), and
 * ends with t4a_admission_commit(); or, if nothing was enqueued, t4a_admission_abort(); or, if a
 * call failed after work was enqueued, t4a_admission_fail() with the objects whose state is now
 * unknown, which are quarantined: held forever, never released (leaked and counted at teardown,
 * since the uncertain work may have run on a stream this lane's drain does not cover).
 * The lock records its owner thread: a second begin (or an observation) from the thread that
 * holds it — for instance from inside a raw callback — returns T4A_REENTRY instead of
 * deadlocking. Lanes' locks have one order, ascending lane domain (then the retire's creation,
 * for two retires of one lane): a begin or observation that would wait for a lock ordered before
 * one the thread holds returns T4A_REENTRY too (t4a_retire_destroy excepted), so admissions
 * nested over several lanes — raw scopes, copies — never wait in a cycle.
 *
 * Epochs. Keepalives join the open epoch (deduplicated: an object the open epoch already holds is
 * released at once). The open epoch is sealed by one event (CU_EVENT_DISABLE_TIMING) when it holds
 * half of max_pending_records admissions, or when a poll observes; so a warm chain records at
 * most one event per 512 admissions with the defaults (counter events_recorded). A wait seals
 * nothing: it synchronises the lane's stream. Observation (t4a_retire_poll, t4a_retire_wait)
 * releases the keepalives of completed epochs, outside the lock.
 *
 * Witnesses. A witness is (event, its context): its terminal state is memoised at the first
 * observation that finds it complete or failed, so a later sticky error never re-fails a
 * confirmed witness. Upstream witnesses (work this one depends on) are pruned once complete.
 *
 * Teardown. t4a_retire_destroy() releases held objects only after a proved drain (the stream
 * synchronised without error); otherwise it leaks them, abandons the lane (whose stream is then
 * leaked too) and counts every leak. Nothing here aborts.
 *
 * Thread-safety: all functions may be called from any thread. Counters go to the lane's block. */
#ifndef T4A_RETIRE_H_
#define T4A_RETIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A reference to keep alive until the work of its epoch completes: release(object) drops it.
 * `objects`: how many objects it stands for when it has to be leaked (a graph version keeps its
 * buffers and modules alive with it), for the `leaked` count; 0 means 1. */
typedef struct t4a_keepalive {
  void *object; /**< the object to drop */
  void (*release)(void *object); /**< drops one reference of object */
  uint32_t objects; /**< objects it stands for when leaked; 0 means 1 */
} t4a_keepalive;

/** A lane's retirement state: admissions, epochs, keepalives, quarantine. Opaque. */
typedef struct t4a_retire t4a_retire;

/** Options of t4a_retire_create; zero means the default. */
typedef struct t4a_retire_options {
  uint32_t max_pending_records; /**< 0: 1024. The open epoch is sealed at half of this. */
  uint32_t max_sealed_epochs;   /**< 0: 64. Beyond it, begin retires completed epochs, then waits. */
} t4a_retire_options;
/** Every option at its default (zero). */
#define T4A_RETIRE_OPTIONS_INIT {0, 0}

/** Creates the retirement state of `lane` (retained). options may be NULL.
 * Statuses: INVALID_ARGUMENT, HOST_OUT_OF_MEMORY, LANE_BROKEN. */
T4A_MUST_USE t4a_status t4a_retire_create(t4a_lane *lane, const t4a_retire_options *options,
                                          t4a_retire **out);

/** Drains and destroys. Returns T4A_OK after a proved drain (every keepalive released;
 * quarantined objects are still leaked and counted); otherwise the failure (REENTRY, CONTEXT_LOST,
 * LANE_BROKEN…), having leaked the held objects, abandoned the lane and counted the leaks. Frees
 * the retire object in every case except REENTRY (called from inside its own admission: nothing
 * is done). Accepts NULL. */
t4a_status t4a_retire_destroy(t4a_retire *retire);

/** The retirement state's lane (borrowed). */
t4a_lane *t4a_retire_lane(const t4a_retire *retire);

/* ---- admission ---- */

/** Caller storage for one admission. Fields are private. */
typedef struct t4a_admission {
  t4a_retire *priv_retire; /**< private */
  t4a_ctx_scope priv_scope; /**< private */
  uint32_t priv_reserved; /**< private */
  uint32_t priv_kept; /**< private */
  uint32_t priv_deduplicated; /**< counted once, at the end of the admission */
} t4a_admission;

/** Reserve: lock (REENTRY if this thread holds it), check the lane (LANE_BROKEN), activate the
 * lane's context, seal or retire epochs as due, reserve `num_keepalives` keepalive slots (at most
 * 2^24 per epoch: LIMIT_EXCEEDED beyond). On failure nothing is held and nothing was enqueued. */
T4A_MUST_USE t4a_status t4a_admission_begin(t4a_retire *retire, uint32_t num_keepalives,
                                            t4a_admission *admission);
/** Hands one reference to the open epoch; call only after the work was enqueued. Within the
 * reserved count it cannot fail. Beyond it (a caller bug), room is grown if possible; if not, the
 * reference is leaked and counted in `leaked` — never released before its work completes. */
void t4a_admission_keep(t4a_admission *admission, t4a_keepalive keepalive);
/** As t4a_admission_keep, for an object the caller holds and keeps holding (borrowed): the epoch
 * takes its own reference, `retain(keepalive.object)`, only when it does not hold the object yet,
 * so a keepalive the open epoch already has (the same module and buffers, launch after launch)
 * costs no reference-count traffic. Beyond the reservation, as above: if no room can be made the
 * object is retained and that reference leaked (counted), never released early. */
void t4a_admission_keep_borrowed(t4a_admission *admission, t4a_keepalive keepalive,
                                 void (*retain)(void *object));
/** The work was enqueued: count it in the open epoch, restore the context, unlock. */
void t4a_admission_commit(t4a_admission *admission);
/** Nothing was enqueued: restore the context, unlock. `status` (returned) may be CONTEXT_LOST, in
 * which case the lane's context is marked lost. */
t4a_status t4a_admission_abort(t4a_admission *admission, t4a_status status);
/** A call failed after work was enqueued: quarantines `uncertain` (references handed over, never
 * released on a guess), marks the context lost on a sticky error, commits what was enqueued and
 * returns `status`. */
t4a_status t4a_admission_fail(t4a_admission *admission, t4a_status status,
                              const t4a_keepalive *uncertain, size_t num_uncertain);

/* ---- observation ---- */

/** Non-blocking: releases the keepalives of every completed epoch, and seals the open epoch (one
 * event) if it holds keepalives and nothing older is pending. Returns OK, REENTRY, or the device
 * error an epoch's event reported (never folded into "not ready"). */
T4A_MUST_USE t4a_status t4a_retire_poll(t4a_retire *retire);
/** Waits for all admitted work with one synchronisation of the lane's stream (counted in
 * host_waits; no event), then releases every epoch's keepalives. The wait covers everything on
 * the lane's stream, other retires' later work included, with this retire's lock held: a host
 * function on the lane must not block on what the waiting thread does next. Returns OK, REENTRY,
 * UNSUPPORTED during a capture, or the device error the synchronisation reported (nothing is
 * released then). */
T4A_MUST_USE t4a_status t4a_retire_wait(t4a_retire *retire);

/** Snapshot of the retirement state (also safe from inside an admission on this thread). */
struct t4a_retire_stats {
  uint32_t open_admissions;  /**< admissions in the open epoch */
  uint32_t open_keepalives;  /**< keepalives held by the open epoch */
  uint32_t sealed_epochs;    /**< sealed, not yet observed complete */
  uint64_t quarantined_held; /**< objects held in quarantine */
};
/** Copies the state into *out. */
void t4a_retire_stats(t4a_retire *retire, struct t4a_retire_stats *out);

/* ---- capture mode (for graphs: t4a_launch's t4a/graph.h) ---- */

/** Begins a graph capture of the lane's stream (cuStreamBeginCapture, THREAD_LOCAL mode), after
 * sealing what was admitted before (its event is recorded outside the capture). Until
 * t4a_retire_capture_end, every admission on this retire — from any thread — is captured: its
 * work is recorded into the graph instead of running, its keepalives gather for the graph, and
 * no epoch is sealed. Observation (poll, wait, fence), witnesses (t4a_admission_record / _wait)
 * and, in t4a_mem and t4a_xfer, allocations and staged transfers are refused with UNSUPPORTED
 * meanwhile (they cannot be captured). The lane is marked (t4a_lane_is_capturing).
 * Statuses: BUSY (already capturing), REENTRY, LANE_BROKEN, driver failures. Counted in
 * `captures`. */
T4A_MUST_USE t4a_status t4a_retire_capture_begin(t4a_retire *retire);
/** Ends the capture (cuStreamEndCapture) and leaves capture mode — in every case once the driver
 * was asked (if the lane's context cannot even be activated, the mode stays and the call may be
 * repeated; a failed end with the stream still capturing is retried once). On success
 * *out_graph is the captured CUgraph (as void *, owned by the caller) and *out_items the
 * keepalives of the captured work (references handed to the caller; the array is the caller's
 * to free(); NULL when none). On failure (e.g. the capture was invalidated: DRIVER_ERROR with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) nothing is returned: the captured work will never run,
 * so its keepalives are released. Statuses: INVALID_ARGUMENT (not capturing), REENTRY,
 * HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_retire_capture_end(t4a_retire *retire, void **out_graph,
                                               t4a_keepalive **out_items, size_t *out_count);
/** Whether a capture begun by t4a_retire_capture_begin is in progress. */
int t4a_retire_is_capturing(t4a_retire *retire);
/** How many captures were begun on the retire so far: a capture in progress is the one whose
 * number this was when it began (a recording that must stay within one capture compares it). */
uint64_t t4a_retire_capture_seq(const t4a_retire *retire);

/* ---- witnesses ---- */

/** A recorded event that proves the work admitted before it completed. Refcounted, opaque. */
typedef struct t4a_witness t4a_witness;

/** Records one event after all work admitted so far and returns a witness of it (the witness owns
 * that event; the open epoch is not sealed by it). Admission rules apply (lock, lane check).
 * Statuses: REENTRY, LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_retire_fence(t4a_retire *retire, t4a_witness **out);

/** Makes `witness` complete only once `upstream` is (retains upstream). */
T4A_MUST_USE t4a_status t4a_witness_add_upstream(t4a_witness *witness, t4a_witness *upstream);
/** T4A_OK once complete (memoised), T4A_NOT_READY, or the memoised failure. Never blocks. */
T4A_MUST_USE t4a_status t4a_witness_query(t4a_witness *witness);
/** Waits until complete or failed (counted in host_waits of the witness's lane). */
T4A_MUST_USE t4a_status t4a_witness_wait(t4a_witness *witness);
/** Adds a reference. Accepts NULL. */
void t4a_witness_retain(t4a_witness *witness);
/** Drops a reference; the last destroys the event under its context (leaked and counted if the
 * context cannot be activated). Accepts NULL. */
void t4a_witness_release(t4a_witness *witness);
/** Within an admission (between begin and commit/abort/fail, on the admitting thread): records an
 * event on the admission's lane stream after everything enqueued on it so far and returns a
 * witness of it (counted in events_recorded). The lane's context is activated for the call.
 * Statuses: INVALID_ARGUMENT (no open admission), HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_admission_record(t4a_admission *admission, t4a_witness **out);
/** Within an admission: makes the lane's stream wait (cuStreamWaitEvent) until `witness`'s work
 * ran, and until each of its upstreams' work ran. The witness may belong to another lane, context
 * or device: nothing waits on the host. A witness already settled complete needs no wait and
 * enqueues nothing; one settled as failed enqueues nothing and returns its memoised failure — as
 * UPSTREAM_FAILED (the original entry and code in the detail) when the witness belongs to another
 * lane, so that lane's fault is never taken for this one's. Counted in cross_waits. */
T4A_MUST_USE t4a_status t4a_admission_wait(t4a_admission *admission, t4a_witness *witness);

/** Number of upstream witnesses still referenced (pruned ones are gone). */
size_t t4a_witness_num_upstream(t4a_witness *witness);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_RETIRE_H_ */
