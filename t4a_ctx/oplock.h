/* The operation lock of a retire and of a launch table, for t4a's own libraries (target
 * //t4a_ctx:oplock): a mutex taken on every admission, so its uncontended path is one
 * compare-and-swap to take it and one exchange to drop it, inline. A thread that finds it taken
 * spins briefly, then sleeps in the kernel (a futex) until the holder drops it. Nothing to
 * initialise but the zero state, nothing that can fail, nothing to destroy; not recursive (the
 * callers refuse re-entry before taking it). Acquire on taking and release on dropping: what one
 * holder wrote is seen by the next (the sanitizers see the same order through the atomics). */
#ifndef T4A_CTX_OPLOCK_H_
#define T4A_CTX_OPLOCK_H_

#include <stdatomic.h>
#include <stdint.h>

/* 0: free; 1: taken; 2: taken, and a thread may be sleeping on it. */
typedef struct t4a_oplock_ {
  _Atomic uint32_t state;
} t4a_oplock_;

#define T4A_OPLOCK_INIT_ \
  { 0 }

/* The contended paths (oplock.c). */
void t4a_oplock_wait_(t4a_oplock_ *lock);
void t4a_oplock_wake_(t4a_oplock_ *lock);

/* Takes the lock if it is free: 1 taken, 0 not (never waits). */
static inline int t4a_oplock_trylock_(t4a_oplock_ *lock) {
  uint32_t free_state = 0;
  return atomic_compare_exchange_strong_explicit(&lock->state, &free_state, 1, memory_order_acquire,
                                                 memory_order_relaxed);
}

static inline void t4a_oplock_lock_(t4a_oplock_ *lock) {
  if (!t4a_oplock_trylock_(lock)) t4a_oplock_wait_(lock);
}

static inline void t4a_oplock_unlock_(t4a_oplock_ *lock) {
  if (atomic_exchange_explicit(&lock->state, 0, memory_order_release) == 2) t4a_oplock_wake_(lock);
}

#endif /* T4A_CTX_OPLOCK_H_ */
