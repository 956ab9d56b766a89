/** @file
 * t4a/raw_counters.h — the counters t4a_raw owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_RAW_COUNTERS_H_
#define T4A_RAW_COUNTERS_H_

/** Run 1 of t4a_raw's counters. */
#define T4A_RAW_COUNTERS_1(X)                                                                     \
  X(raw_scopes, "raw scopes run")                                                                 \
  X(raw_scopes_poisoned, "raw scopes whose callback failed: writable bindings quarantined")

/** Every counter of t4a_raw, in the joined order. */
#define T4A_RAW_COUNTERS(X) T4A_RAW_COUNTERS_1(X)

#endif /**< T4A_RAW_COUNTERS_H_ */
