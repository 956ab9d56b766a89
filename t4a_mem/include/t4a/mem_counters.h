/** @file
 * t4a/mem_counters.h — the counters t4a_mem owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_MEM_COUNTERS_H_
#define T4A_MEM_COUNTERS_H_

/** Run 1 of t4a_mem's counters. */
#define T4A_MEM_COUNTERS_1(X)                                                                     \
  X(device_allocs, "device allocations from the driver (pool or sync)")                           \
  X(device_frees, "device frees enqueued (cuMemFreeAsync)")                                       \
  X(device_alloc_bytes, "bytes allocated from the driver")                                        \
  X(reuse_hits, "buffer allocations served by the same-stream reuse cache")                       \
  X(reuse_misses, "buffer allocations that went to the driver")                                   \
  X(reuse_cached, "released blocks kept in the same-stream reuse cache")                          \
  X(reuse_trimmed, "cached blocks handed back to the pool (bound or pressure)")                   \
  X(zero_fills, "zero fills enqueued")                                                            \
  X(buffers_leaked, "device blocks leaked: no context to free them, or quarantined")              \
  X(pinned_allocs, "pinned host allocations (cuMemHostAlloc)")                                    \
  X(pinned_bytes, "pinned host bytes allocated")                                                  \
  X(host_registrations, "host ranges registered (cuMemHostRegister)")                             \
  X(host_unregistrations, "host ranges unregistered")

/** Run 2 of t4a_mem's counters. */
#define T4A_MEM_COUNTERS_2(X)                                                                     \
  X(pool_access_granted, "memory pools opened to another device (cuMemPoolSetAccess)")            \
  X(pools_leaked, "memory pools not destroyed: no proved drain, no context, or a failure")

/** Run 3 of t4a_mem's counters. */
#define T4A_MEM_COUNTERS_3(X)                                                                     \
  X(frees_deferred, "buffer releases during a graph capture whose frees waited for its end")

/** Run 4 of t4a_mem's counters. */
#define T4A_MEM_COUNTERS_4(X)                                                                     \
  X(cross_stream_releases, "buffer releases ordered after uses on other streams of the domain")

/** Every counter of t4a_mem, in the joined order. */
#define T4A_MEM_COUNTERS(X) \
  T4A_MEM_COUNTERS_1(X) T4A_MEM_COUNTERS_2(X) T4A_MEM_COUNTERS_3(X) T4A_MEM_COUNTERS_4(X)

#endif /**< T4A_MEM_COUNTERS_H_ */
