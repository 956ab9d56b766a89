/* For t4a's own libraries (target //t4a_ctx:ctx_internal): the calls of t4a_ctx that keep the
 * lanes' and contexts' invariants across libraries (fault marking, capture mode, teardown). */
#ifndef T4A_CTX_CTX_INTERNAL_H_
#define T4A_CTX_CTX_INTERNAL_H_

#include <stdint.h>

#include "t4a/ctx.h"
#include "t4a/status.h"

/* Records that the holder's context took a sticky error described by `cause` (the first record
 * per device wins; later ones are ignored). Counted in ctx_faults on the driver. */
void t4a_ctx_holder_mark_lost_(const t4a_ctx_holder *holder, const t4a_error *cause);

/* Marks the lane's stream as not provably drained: its final release leaks the stream (counted)
 * instead of calling the driver. For teardown after a fault (t4a_retire). The lane no longer
 * counts as open for t4a_device_recover. */
void t4a_lane_abandon_(t4a_lane *lane);

/* Sets whether a graph capture of the lane's stream is in progress (t4a_retire's capture mode;
 * read with t4a_lane_is_capturing). */
void t4a_lane_set_capturing_(t4a_lane *lane, int capturing);

/* For drop paths whose driver call would break a capture of the lane's stream (a module unload,
 * an executable graph's destruction): while the lane is capturing — or the calling thread is
 * capturing another lane's stream (captures are THREAD_LOCAL: the driver refuses such calls on
 * the capturing thread whatever they concern) — remembers fn(object) and runs it right after
 * that capture ended (t4a_lane_set_capturing_(lane, 0), on that thread) and returns 1; returns 0
 * when neither is capturing (the caller goes on now); -1 when it cannot even remember it (host
 * memory): the caller leaks the object and counts it. */
int t4a_lane_defer_capture_(t4a_lane *lane, void (*fn)(void *object), void *object);

/* Whether t4a_lane_defer_capture_ would defer now (the lane is capturing, or this thread is
 * capturing another lane): lets a drop path allocate its deferral record only when needed. */
int t4a_lane_capture_blocks_drops_(const t4a_lane *lane);

/* ---- the streams of one domain (t4a_lane_create_sibling; design §4) ---- */

/* A point of one stream of a domain: its member slot and generation, and the group's sequence
 * number when it was taken (0: no point; nothing to order after). */
typedef struct t4a_lane_mark_ {
  uint32_t slot;
  uint32_t gen;
  uint64_t seq;
} t4a_lane_mark_;

/* Whether the lane's domain has (had) more than one stream: one load. Until then every mark is
 * the zero mark and ordering needs nothing. */
int t4a_lane_grouped_(const t4a_lane *lane);
/* Takes a mark for the work just enqueued on the lane (call after enqueueing): a marker recorded
 * on the lane later covers it. The zero mark when the lane is not grouped. */
t4a_lane_mark_ t4a_lane_mark_now_(t4a_lane *lane);
/* The mark of the lane's work from before its group existed. */
t4a_lane_mark_ t4a_lane_mark_origin_(const t4a_lane *lane);
/* Orders the waiter's later work after `mark` without a host wait: records the marked stream's
 * marker unless its latest record covers the mark (counted in cross_stream_events and
 * events_recorded on the marked lane), then makes the waiter's stream wait for it unless the
 * waiter already waited for a record that covers it (cross_stream_waits on the waiter). The
 * lanes' context must be current. Nothing for the zero mark, a mark of the waiter itself, or a
 * stream that left the group after a proved drain. Statuses: UNSUPPORTED (a record or wait would
 * go into a graph capture: nothing enqueued), LANE_BROKEN (the marked stream left without a
 * proved drain), driver failures. */
t4a_status t4a_lane_order_after_(t4a_lane *waiter, t4a_lane_mark_ mark);
/* Orders the waiter after every mark taken so far on every other stream of its domain. */
t4a_status t4a_lane_order_after_all_(t4a_lane *waiter);
/* Destroys the lane's marker event now (the next order after the lane records a new one): for an
 * owner that is done with the lane while objects it cannot release (a quarantined buffer) may
 * keep the lane alive for ever (t4a_runtime_close). Waits already enqueued on it are unaffected.
 * Leaked and counted (the driver's `leaked`) without a context. */
void t4a_lane_drop_marker_(t4a_lane *lane);
/* The group's newest sequence number (0 when not grouped); read before a drain. */
uint64_t t4a_lane_mark_seq_(const t4a_lane *lane);
/* A proved drain of the lane's stream (t4a_retire's teardown): marks up to `seq` (read with
 * t4a_lane_mark_seq_ before the synchronisation) need no wait when the lane leaves its group. */
void t4a_lane_note_drained_(t4a_lane *lane, uint64_t seq);

/* For libraries reporting a failed driver call on the lane: if `status` is T4A_CONTEXT_LOST, marks
 * the lane's context lost with this thread's error detail. Returns `status`. */
t4a_status t4a_lane_note_(const t4a_lane *lane, t4a_status status);

/* Host functions on a stream (t4a_retire's t4a_host_func_launch): the runtime's re-entry rule.
 * While one runs on this thread (between enter and exit, nested calls counted), every t4a call
 * that would activate a context, wait for a stream or take a lane's operation lock answers
 * T4A_REENTRY (t4a_host_fn_refuse_) instead of calling the driver: the Driver API forbids CUDA
 * calls in a host function, and a wait there for the stream that runs it never ends. */
void t4a_host_fn_enter_(void);
void t4a_host_fn_exit_(void);
int t4a_in_host_fn_(void);
/* Sets and returns T4A_REENTRY with a message naming `what`. */
t4a_status t4a_host_fn_refuse_(const char *what);

/* An admission's entry to its lane, in one call (t4a_retire, after it refused host functions and
 * took its lock): t4a_lane_check's refusal (LANE_BROKEN), then t4a_ctx_scope_enter_borrowed of the
 * lane's holder counting its activation (or skipped activation) into `shard` (counters_block.h:
 * the caller owns it and holds the lock its writes are under; NULL: into `counters`), and
 * *capturing set to t4a_lane_is_capturing. No host-function check (the caller's). On failure the
 * scope is cleared and *capturing is 0. */
struct t4a_counter_shard_;
T4A_MUST_USE t4a_status t4a_lane_admit_(t4a_lane *lane, t4a_ctx_scope *scope,
                                        t4a_counters *counters, struct t4a_counter_shard_ *shard,
                                        int *capturing);
/* t4a_ctx_scope_exit_quiet of a scope t4a_lane_admit_ entered, its usual case inline: a borrowed
 * scope that made nothing current has nothing to restore or release. */
static inline void t4a_lane_admit_exit_(t4a_ctx_scope *scope) {
  if (scope->priv_borrowed && !scope->priv_switched) {
    scope->priv_holder = NULL;
    return;
  }
  t4a_ctx_scope_exit_quiet(scope);
}
/* The scope part of t4a_lane_admit_ (LANE_BROKEN as t4a_ctx_holder_check). */
T4A_MUST_USE t4a_status t4a_ctx_scope_enter_counted_(t4a_ctx_scope *scope,
                                                     t4a_ctx_holder *holder,
                                                     t4a_counters *counters,
                                                     struct t4a_counter_shard_ *shard);

#endif /* T4A_CTX_CTX_INTERNAL_H_ */
