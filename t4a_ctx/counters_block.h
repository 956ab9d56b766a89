/* The counter block's layout and the increment, for t4a's own libraries (target
 * //t4a_ctx:counters_internal). Public headers keep t4a_counters opaque so that they compile as
 * C++; only C sources of t4a include this. */
#ifndef T4A_CTX_COUNTERS_BLOCK_H_
#define T4A_CTX_COUNTERS_BLOCK_H_

#include <stdatomic.h>
#include <stdint.h>

#include "t4a/counters.h"

/* Zero-initialise (static storage, calloc or memset) before use. */
struct t4a_counters {
  _Atomic uint64_t v[T4A_COUNTER_COUNT];
};

/* Adds n to one counter (relaxed: counters order nothing). */
static inline void t4a_counter_add(t4a_counters *c, t4a_counter_id id, uint64_t n) {
  atomic_fetch_add_explicit(&c->v[id], n, memory_order_relaxed);
}

#endif /* T4A_CTX_COUNTERS_BLOCK_H_ */
