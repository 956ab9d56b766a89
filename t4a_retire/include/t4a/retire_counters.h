/** @file
 * t4a/retire_counters.h — the counters t4a_retire owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_RETIRE_COUNTERS_H_
#define T4A_RETIRE_COUNTERS_H_

/** Run 1 of t4a_retire's counters. */
#define T4A_RETIRE_COUNTERS_1(X)                                                                  \
  X(events_recorded, "events recorded")                                                           \
  X(admissions, "operations admitted (reserve -> enqueue -> commit)")                             \
  X(admissions_refused_reentry, "admissions or observations refused: re-entry from the owner")    \
  X(epochs_sealed, "completion epochs sealed by an event")                                        \
  X(epochs_retired, "completion epochs observed complete")                                        \
  X(keepalives_held, "keepalive references taken into an epoch")                                  \
  X(keepalives_deduplicated, "keepalives already held by the open epoch (released at once)")      \
  X(keepalives_released, "keepalive references released after their epoch completed")             \
  X(quarantined, "objects quarantined after a failure following an enqueue")                      \
  X(leaked, "objects leaked at teardown because no drain could be proved")                        \
  X(witnesses_created, "completion witnesses created")

/** Run 2 of t4a_retire's counters. */
#define T4A_RETIRE_COUNTERS_2(X)                                                                  \
  X(cross_waits, "stream waits enqueued on another lane's (or device's) witness")

/** Run 3 of t4a_retire's counters. */
#define T4A_RETIRE_COUNTERS_3(X)                                                                  \
  X(captures, "graph captures begun on the lane (t4a_retire_capture_begin)")                      \
  X(user_events_recorded, "user events recorded on the lane (t4a_event_record)")                  \
  X(user_event_waits, "stream waits enqueued on a user event (t4a_event_wait)")                   \
  X(host_funcs, "host functions enqueued on the lane (t4a_host_func_launch)")

/** Every counter of t4a_retire, in the joined order. */
#define T4A_RETIRE_COUNTERS(X) \
  T4A_RETIRE_COUNTERS_1(X) T4A_RETIRE_COUNTERS_2(X) T4A_RETIRE_COUNTERS_3(X)

#endif /**< T4A_RETIRE_COUNTERS_H_ */
