/** @file
 * t4a/jitlink_counters.h — the counters of t4a_nvrtc's nvJitLink linking, as X(name,
 * description) lists that t4a/counters.h joins (a new counter goes into a new run). Plain
 * macros: this header includes nothing and compiles as C and as C++. */
#ifndef T4A_JITLINK_COUNTERS_H_
#define T4A_JITLINK_COUNTERS_H_

/** Run 1 of the link counters. */
#define T4A_JITLINK_COUNTERS_1(X)                                                                 \
  X(jitlink_links, "nvJitLinkComplete calls")                                                     \
  X(jitlink_link_successes, "nvJitLinkComplete calls that returned NVJITLINK_SUCCESS")            \
  X(jitlink_mem_hits, "link-cache lookups answered from memory")                                  \
  X(jitlink_mem_misses, "link-cache lookups not in memory (went to disk or nvJitLink)")           \
  X(jitlink_mem_evictions, "linked artifacts evicted from the link cache's memory level")        \
  X(jitlink_mem_joins, "link-cache lookups that waited for another thread's link of the same")

/** Every link counter, in the joined order. */
#define T4A_JITLINK_COUNTERS(X) T4A_JITLINK_COUNTERS_1(X)

#endif /**< T4A_JITLINK_COUNTERS_H_ */
