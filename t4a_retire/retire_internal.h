/* For t4a's own libraries (target //t4a_retire:retire_internal): whether a thread is inside an
 * admission; and, private to t4a_retire, what retire.c uses of witness.c (witness.c uses nothing
 * of retire.c). */
#ifndef T4A_RETIRE_RETIRE_INTERNAL_H_
#define T4A_RETIRE_RETIRE_INTERNAL_H_

#include <stdint.h>

#include "t4a/ctx.h"
#include "t4a/retire.h"

/* What a launch reads of its retire, fixed for the retire's life: its lane, the lane's domain and
 * stream (t4a_retire_lane, t4a_lane_domain, t4a_lane_stream in one call). retire is not NULL. */
typedef struct t4a_retire_target_ {
  t4a_lane *lane;
  uint64_t domain;
  struct CUstream_st *stream; /* CUstream */
} t4a_retire_target_;
const t4a_retire_target_ *t4a_retire_target_get_(const t4a_retire *retire);

/* Whether the calling thread holds the retire's operation lock (it is inside an admission: a raw
 * scope's callback, say). Libraries with locks of their own use it to answer REENTRY instead of
 * waiting in the wrong order. */
int t4a_retire_held_by_this_thread_(const t4a_retire *retire);

/* Lock order of retires' operation locks: ascending (lane domain, creation order of the retire).
 * A thread holding retire locks may wait only for one ordered after all of them; admissions and
 * observations that would wait out of order return T4A_REENTRY instead (t4a_retire_destroy is
 * exempt: no other thread may be using a retire being destroyed). Nonzero if a is before b. */
int t4a_retire_lock_before_(const t4a_retire *a, const t4a_retire *b);

/* Whether waiting for `retire`'s lock now, on this thread, would break the lock order: this
 * thread holds it, or holds a retire lock ordered at or after it. */
int t4a_retire_lock_would_invert_(const t4a_retire *retire);

/* Adds n to one of the lane's counters from inside an admission (between begin and its commit,
 * abort or fail): under the admission's lock, into the retire's single-writer shard
 * (counters_block.h), so no locked read-modify-write. NULL or an ended admission: nothing. */
void t4a_admission_count_(t4a_admission *admission, t4a_counter_id id, uint64_t n);
/* t4a_admission_count_ of (id, n), then t4a_admission_commit: one call. */
void t4a_admission_commit_counting_(t4a_admission *admission, t4a_counter_id id, uint64_t n);

/* t4a_admission_keep_borrowed of each non-NULL object of `objects` (n of them), all with the same
 * release and retain: one call for a launch's buffers. */
void t4a_admission_keep_borrowed_n_(t4a_admission *admission, void *const *objects, uint32_t n,
                                    void (*release)(void *object), void (*retain)(void *object));

/* How many times `retire` drained the lane's stream (t4a_retire_wait's cuStreamSynchronize
 * answered OK). Changed only under the retire's lock: a value read inside an admission of
 * `retire`, then a later larger value, prove that everything that admission enqueued on the lane's
 * stream finished. */
uint64_t t4a_retire_drains_(const t4a_retire *retire);

/* Records a fresh event on the lane's stream and wraps it in a witness (one reference). The
 * lane's context must be current. */
t4a_status t4a_witness_record_(t4a_lane *lane, t4a_witness **out);

/* Within an admission of `lane`'s retire: the stream waits for the witness and its upstreams
 * (t4a_admission_wait after its checks). */
t4a_status t4a_witness_stream_wait_(t4a_witness *witness, t4a_lane *lane);

#endif /* T4A_RETIRE_RETIRE_INTERNAL_H_ */
