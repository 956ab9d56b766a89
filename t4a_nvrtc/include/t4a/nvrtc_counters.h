/** @file
 * t4a/nvrtc_counters.h — the counters t4a_nvrtc owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_NVRTC_COUNTERS_H_
#define T4A_NVRTC_COUNTERS_H_

/** Run 1 of t4a_nvrtc's counters. */
#define T4A_NVRTC_COUNTERS_1(X)                                                                   \
  X(nvrtc_compile_attempts, "nvrtcCompileProgram calls")                                          \
  X(nvrtc_compile_successes, "nvrtcCompileProgram calls that returned NVRTC_SUCCESS")             \
  X(nvrtc_empty_outputs, "successful compiles whose PTX/CUBIN/LTO-IR was empty (an error)")       \
  X(nvrtc_mem_hits, "artifact-cache lookups answered from memory")                                \
  X(nvrtc_mem_misses, "artifact-cache lookups not in memory (went to disk or NVRTC)")             \
  X(nvrtc_mem_joins, "artifact-cache lookups that waited for an in-flight compile")               \
  X(nvrtc_mem_evictions, "artifacts evicted from the memory level (LRU, entries or bytes)")       \
  X(nvrtc_disk_hits, "artifact-cache lookups answered from the disk directory")                   \
  X(nvrtc_disk_misses, "disk lookups that found no usable entry")                                 \
  X(nvrtc_disk_writes, "artifact entries written to disk (renamed into place)")                   \
  X(nvrtc_disk_corrupt, "disk entries rejected as corrupt, truncated or foreign")                 \
  X(nvrtc_disk_errors, "disk-cache I/O failures (never fail a compile)")                          \
  X(nvrtc_disk_evictions, "disk entries removed to stay within the size bound")

/** Run 2 of t4a_nvrtc's counters: include roots. */
#define T4A_NVRTC_COUNTERS_2(X)                                                                   \
  X(nvrtc_roots_changed, "compiles with include roots whose roots changed while NVRTC ran (not cached)")

/** Run 3 of t4a_nvrtc's counters: compiles the key cannot see. */
#define T4A_NVRTC_COUNTERS_3(X)                                                                   \
  X(nvrtc_uncached, "compiles the include check refused, run uncached (compile_uncacheable)")

/** Run 4 of t4a_nvrtc's counters: a first miss's compile alongside its include check. */
#define T4A_NVRTC_COUNTERS_4(X)                                                                   \
  X(nvrtc_roots_overlapped, "first misses with include roots that took the compile run alongside their include check") \
  X(nvrtc_roots_overlap_dropped, "compiles run alongside an include check and dropped (what it read had just changed, or no compile was needed)")

/** Every counter of t4a_nvrtc, in the joined order. */
#define T4A_NVRTC_COUNTERS(X)                                               \
  T4A_NVRTC_COUNTERS_1(X) T4A_NVRTC_COUNTERS_2(X) T4A_NVRTC_COUNTERS_3(X) \
  T4A_NVRTC_COUNTERS_4(X)

#endif /**< T4A_NVRTC_COUNTERS_H_ */
