/* Private to t4a_retire: what retire.c and witness.c share. */
#ifndef T4A_RETIRE_RETIRE_INTERNAL_H_
#define T4A_RETIRE_RETIRE_INTERNAL_H_

#include "t4a/retire.h"

/* Records a fresh event on the lane's stream and wraps it in a witness (one reference). The
 * lane's context must be current. */
t4a_status t4a_witness_record_(t4a_lane *lane, t4a_witness **out);

/* Whether the retire is in capture mode (its lock held by the caller, as in an admission). */
int t4a_retire_capturing_(const t4a_retire *retire);

#endif /* T4A_RETIRE_RETIRE_INTERNAL_H_ */
