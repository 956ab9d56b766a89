/* The operation lock's contended paths (oplock.h): a short spin, then a futex sleep. The state
 * moves to 2 before any sleep, so the holder's unlock knows to wake a sleeper. */
#define _GNU_SOURCE
#include "t4a_ctx/oplock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Tries of the spin before the first sleep: a holder's admission lasts well under a microsecond,
 * so most waits end here; a holder inside a driver wait (a full ring) sends waiters to sleep. */
#define SPINS 100

static void pause_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void t4a_oplock_wait_(t4a_oplock_ *lock) {
  for (int i = 0; i < SPINS; i++) {
    if (atomic_load_explicit(&lock->state, memory_order_relaxed) == 0 &&
        t4a_oplock_trylock_(lock)) {
      return;
    }
    pause_cpu();
  }
  /* Taken in state 2: this thread may leave another sleeper behind, so its unlock wakes one. */
  while (atomic_exchange_explicit(&lock->state, 2, memory_order_acquire) != 0) {
    syscall(SYS_futex, &lock->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
  }
}

void t4a_oplock_wake_(t4a_oplock_ *lock) {
  syscall(SYS_futex, &lock->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
