/** @file
 * t4a/ctx_counters.h — the counters t4a_ctx owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_CTX_COUNTERS_H_
#define T4A_CTX_COUNTERS_H_

/** Run 1 of t4a_ctx's counters. */
#define T4A_CTX_COUNTERS_1(X)                                                                     \
  X(ctx_activations, "context scopes that made a context current (cuCtxSetCurrent)")              \
  X(ctx_activations_skipped, "context scopes that found the context already current")             \
  X(ctx_restores, "scopes that restored the previous context (counted on the driver)")            \
  X(ctx_restore_failures, "scopes whose restore failed (counted on the driver)")                  \
  X(ctx_holders_created, "primary-context holders created (cuDevicePrimaryCtxRetain)")            \
  X(ctx_holders_destroyed, "primary-context holders destroyed (cuDevicePrimaryCtxRelease)")       \
  X(ctx_release_failures, "primary-context releases that failed (the retain is leaked)")          \
  X(ctx_faults, "devices whose primary context was marked lost by a sticky error")                \
  X(ctx_current_kept, "final holder releases that kept the context current (active, or unknown)")  \
  X(streams_created, "lane streams created")                                                      \
  X(streams_destroyed, "lane streams destroyed")                                                  \
  X(streams_leaked, "lane streams leaked because their context could not be activated")           \
  X(lanes_created, "lanes created")                                                               \
  X(lanes_destroyed, "lanes destroyed")                                                           \
  X(host_waits, "host waits on device work (stream, event or context synchronize)")

/** Run 2 of t4a_ctx's counters. */
#define T4A_CTX_COUNTERS_2(X)                                                                     \
  X(peer_access_enabled, "context pairs given peer access (cuCtxEnablePeerAccess)")

/** Run 3 of t4a_ctx's counters. */
#define T4A_CTX_COUNTERS_3(X)                                                                     \
  X(device_recoveries, "primary contexts reset by t4a_device_recover (cuDevicePrimaryCtxReset)")  \
  X(device_recoveries_refused, "t4a_device_recover calls refused (BUSY): lanes still open")

/** Run 4 of t4a_ctx's counters: ordering between the streams of one domain (t4a_lane_create_sibling). */
#define T4A_CTX_COUNTERS_4(X)                                                                     \
  X(streams_sibling, "further streams created beside a lane (same context and domain)")           \
  X(cross_stream_events, "marker events recorded to order one stream of a domain after another")  \
  X(cross_stream_waits, "stream waits enqueued on another stream of the domain's marker event")

/** Every counter of t4a_ctx, in the joined order. */
#define T4A_CTX_COUNTERS(X) \
  T4A_CTX_COUNTERS_1(X) T4A_CTX_COUNTERS_2(X) T4A_CTX_COUNTERS_3(X) T4A_CTX_COUNTERS_4(X)

#endif /**< T4A_CTX_COUNTERS_H_ */
