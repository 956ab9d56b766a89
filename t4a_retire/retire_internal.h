/* For t4a's own libraries (target //t4a_retire:retire_internal): whether a thread is inside an
 * admission; and, private to t4a_retire, what retire.c uses of witness.c (witness.c uses nothing
 * of retire.c). */
#ifndef T4A_RETIRE_RETIRE_INTERNAL_H_
#define T4A_RETIRE_RETIRE_INTERNAL_H_

#include <stdint.h>

#include "t4a/ctx.h"
#include "t4a/retire.h"

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
