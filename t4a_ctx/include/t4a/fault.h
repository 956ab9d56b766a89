/** @file
 * t4a/fault.h — named fault points outside the driver, for failure sweeps.
 *
 * Layer: t4a_ctx:status (no driver, no CUDA header). Every place where t4a can fail for a reason
 * other than a driver call (a host allocation, dlopen, a mutex init, a file write) asks
 * t4a_fault_sim(point) first; with no hook installed it returns 0 at the cost of one relaxed
 * atomic load. Tests install a hook to fail the Nth fallible call (SQLite's sqlite3FaultSim).
 *
 * Thread-safety: the hook is process-wide; install it before the threads it should affect start.
 * Production code never installs one. */
#ifndef T4A_FAULT_H_
#define T4A_FAULT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** X(name): the one list of fault points. Append only. */
#define T4A_FAULT_POINT_LIST(X) \
  X(HOST_MALLOC)                \
  X(DLOPEN)                     \
  X(DLSYM)                      \
  X(MUTEX_INIT)                 \
  X(THREAD_CREATE)              \
  X(FILE_OPEN)                  \
  X(FILE_READ)                  \
  X(FILE_WRITE)                 \
  X(FILE_RENAME)                \
  X(MMAP)

/** One id per fault point of T4A_FAULT_POINT_LIST (T4A_FAULT_<name>), then
 * T4A_FAULT_POINT_COUNT. */
typedef enum t4a_fault_point {
#define T4A_FAULT_ENUM_(name) T4A_FAULT_##name,
  T4A_FAULT_POINT_LIST(T4A_FAULT_ENUM_)
#undef T4A_FAULT_ENUM_
  T4A_FAULT_POINT_COUNT
} t4a_fault_point;

/** A hook returns nonzero to make the operation at `point` fail. */
typedef int (*t4a_fault_hook_fn)(t4a_fault_point point, void *user);

/** Installs (or, with NULL, removes) the process-wide hook. */
void t4a_fault_set_hook(t4a_fault_hook_fn hook, void *user);

/** Returns nonzero if the operation at `point` must fail now; 0 when no hook is installed. */
int t4a_fault_sim(t4a_fault_point point);

/** Returns the point's name ("HOST_MALLOC"); static string. */
const char *t4a_fault_point_name(t4a_fault_point point);

/** @{ */
/** Host allocation through the HOST_MALLOC fault point. On failure (real or simulated) returns
 * NULL and records T4A_HOST_OUT_OF_MEMORY with `bytes` in this thread's error detail. Free the
 * result with free(). t4a_host_calloc zero-fills and checks n * size for overflow.
 * t4a_host_realloc resizes `p` (NULL: allocates); on failure `p` is left as it was. Every heap
 * allocation of t4a's libraries goes through these three, so t4a_heap_allocations() sees them
 * all. A caller that must not change the thread's error detail (a drop path, a fallback that
 * absorbs the failure) saves and restores it around the call. */
void *t4a_host_malloc(size_t bytes);
void *t4a_host_calloc(size_t n, size_t size);
void *t4a_host_realloc(void *p, size_t bytes);
/** @} */

/** The number of successful t4a_host_malloc / _calloc / _realloc calls in this process since it
 * started (relaxed, process-wide). Tests read it before and after a warm path to prove that the
 * path allocates nothing. */
uint64_t t4a_heap_allocations(void);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_FAULT_H_ */
