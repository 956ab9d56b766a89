/** @file
 * t4a/counters.h — the named counters that prove t4a's performance and lifetime claims.
 *
 * Layer: t4a_ctx:status (no driver). One list names every counter of every library; a counter
 * block (t4a_counters, opaque) holds one relaxed atomic per name. Each object that counts (a
 * driver, a lane, an artifact cache) owns a block; t4a_counters_stats() copies it into a plain
 * struct whose fields carry the same names. Later libraries append their names to the list.
 * This header compiles as C and as C++.
 *
 * Thread-safety: counting and t4a_counters_stats may run concurrently from any thread. */
#ifndef T4A_COUNTERS_H_
#define T4A_COUNTERS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** X(name, description). Append only. */
#define T4A_COUNTER_LIST(X)                                                                   \
  X(ctx_activations, "context scopes that made a context current (cuCtxSetCurrent)")         \
  X(ctx_activations_skipped, "context scopes that found the context already current")        \
  X(ctx_restores, "scopes that restored the previous context (counted on the driver)")        \
  X(ctx_restore_failures, "scopes whose restore failed (counted on the driver)")              \
  X(ctx_holders_created, "primary-context holders created (cuDevicePrimaryCtxRetain)")       \
  X(ctx_holders_destroyed, "primary-context holders destroyed (cuDevicePrimaryCtxRelease)")  \
  X(ctx_release_failures, "primary-context releases that failed (the retain is leaked)")    \
  X(ctx_faults, "devices whose primary context was marked lost by a sticky error")          \
  X(ctx_current_kept, "final holder releases that left another holder's current context")    \
  X(streams_created, "lane streams created")                                                 \
  X(streams_destroyed, "lane streams destroyed")                                             \
  X(streams_leaked, "lane streams leaked because their context could not be activated")      \
  X(lanes_created, "lanes created")                                                          \
  X(lanes_destroyed, "lanes destroyed")                                                      \
  X(host_waits, "host waits on device work (stream, event or context synchronize)")          \
  X(events_recorded, "events recorded")                                                      \
  X(admissions, "operations admitted (reserve -> enqueue -> commit)")                        \
  X(admissions_refused_reentry, "admissions or observations refused: re-entry from the owner")\
  X(epochs_sealed, "completion epochs sealed by an event")                                   \
  X(epochs_retired, "completion epochs observed complete")                                   \
  X(keepalives_held, "keepalive references taken into an epoch")                             \
  X(keepalives_deduplicated, "keepalives already held by the open epoch (released at once)")  \
  X(keepalives_released, "keepalive references released after their epoch completed")       \
  X(quarantined, "objects quarantined after a failure following an enqueue")               \
  X(leaked, "objects leaked at teardown because no drain could be proved")                 \
  X(witnesses_created, "completion witnesses created")                                       \
  X(device_allocs, "device allocations from the driver (pool or sync)")                      \
  X(device_frees, "device frees enqueued (cuMemFreeAsync)")                                  \
  X(device_alloc_bytes, "bytes allocated from the driver")                                   \
  X(reuse_hits, "buffer allocations served by the same-stream reuse cache")                  \
  X(reuse_misses, "buffer allocations that went to the driver")                              \
  X(reuse_cached, "released blocks kept in the same-stream reuse cache")                     \
  X(reuse_trimmed, "cached blocks handed back to the pool (bound or pressure)")             \
  X(zero_fills, "zero fills enqueued")                                                       \
  X(buffers_leaked, "device blocks leaked: no context to free them, or quarantined")        \
  X(pinned_allocs, "pinned host allocations (cuMemHostAlloc)")                               \
  X(pinned_bytes, "pinned host bytes allocated")                                             \
  X(host_registrations, "host ranges registered (cuMemHostRegister)")                        \
  X(host_unregistrations, "host ranges unregistered")                                                     \
  X(nvrtc_compile_attempts, "nvrtcCompileProgram calls")                                     \
  X(nvrtc_compile_successes, "nvrtcCompileProgram calls that returned NVRTC_SUCCESS")       \
  X(nvrtc_empty_outputs, "successful compiles whose PTX/CUBIN/LTO-IR was empty (an error)")  \
  X(nvrtc_mem_hits, "artifact-cache lookups answered from memory")                          \
  X(nvrtc_mem_misses, "artifact-cache lookups not in memory (went to disk or NVRTC)")        \
  X(nvrtc_mem_joins, "artifact-cache lookups that waited for an in-flight compile")         \
  X(nvrtc_mem_evictions, "artifacts evicted from the memory level (LRU, entries or bytes)")  \
  X(nvrtc_disk_hits, "artifact-cache lookups answered from the disk directory")            \
  X(nvrtc_disk_misses, "disk lookups that found no usable entry")                           \
  X(nvrtc_disk_writes, "artifact entries written to disk (renamed into place)")             \
  X(nvrtc_disk_corrupt, "disk entries rejected as corrupt, truncated or foreign")           \
  X(nvrtc_disk_errors, "disk-cache I/O failures (never fail a compile)")                    \
  X(nvrtc_disk_evictions, "disk entries removed to stay within the size bound")          \
  X(bytes_uploaded, "bytes copied host to device (t4a_xfer uploads)")                     \
  X(bytes_downloaded, "bytes copied device to host (t4a_xfer downloads)")                 \
  X(staging_waits, "host waits for a staging chunk whose DMA had not completed")            \
  X(cross_waits, "stream waits enqueued on another lane's (or device's) witness")          \
  X(copies_same_device, "copies between buffers of one device (t4a_xfer_copy)")            \
  X(copies_peer, "copies between devices through peer access (t4a_xfer_copy)")             \
  X(copies_staged, "copies between devices staged through pinned chunks (t4a_xfer_copy)")  \
  X(peer_access_enabled, "context pairs given peer access (cuCtxEnablePeerAccess)")       \
  X(pool_access_granted, "memory pools opened to another device (cuMemPoolSetAccess)")      \
  X(pools_leaked, "memory pools not destroyed: no proved drain, no context, or a failure")   \
  X(captures, "graph captures begun on the lane (t4a_retire_capture_begin)")                 \
  X(graph_launches, "graph replays admitted (t4a_graph_launch)")                             \
  X(frees_deferred, "buffer releases during a graph capture whose frees waited for its end") \
  X(launches, "kernel launches admitted (checked, raw-bytes and descriptor fires)")         \
  X(module_loads, "modules loaded into a module cache (cuModuleLoadDataEx)")               \
  X(module_unloads, "modules unloaded at their last reference (cuModuleUnload)")            \
  X(module_evictions, "modules evicted from a module cache by its bounds (LRU)")            \
  X(param_info_probes, "cuFuncGetParamInfo calls made to learn kernel parameter lists")     \
  X(raw_scopes, "raw scopes run")                                                            \
  X(raw_scopes_poisoned, "raw scopes whose callback failed: writable bindings quarantined") \
  X(device_recoveries, "primary contexts reset by t4a_device_recover (cuDevicePrimaryCtxReset)") \
  X(device_recoveries_refused, "t4a_device_recover calls refused (BUSY): lanes still open") \
  X(launch_graphs_built, "one-node executable graphs built (GRAPH strategy: descriptors, functions)") \
  X(launch_graph_fires, "launches submitted as cuGraphLaunch of their own one-node graph")   \
  X(launch_graph_updates, "one-node graphs updated for changed arguments (SetParams)")      \
  X(launch_graph_fallbacks, "one-node graphs that failed to build or update: plain launches") \
  X(chain_replays, "launch-chain replays submitted (cuGraphLaunch of the chain's graph)")    \
  X(chain_node_updates, "chain kernel nodes updated in place after a rebind (SetParams)")  \
  X(chain_reinstantiations, "chains re-recorded into a new executable graph")

/** One id per counter of T4A_COUNTER_LIST (T4A_COUNTER_<name>), then T4A_COUNTER_COUNT. */
typedef enum t4a_counter_id {
#define T4A_COUNTER_ENUM_(name, desc) T4A_COUNTER_##name,
  T4A_COUNTER_LIST(T4A_COUNTER_ENUM_)
#undef T4A_COUNTER_ENUM_
  T4A_COUNTER_COUNT
} t4a_counter_id;

/** A block of live counters (opaque: its relaxed atomics are private to t4a's libraries, which
 * reach them through t4a_ctx/counters_block.h). Users read a block with t4a_counters_stats. */
typedef struct t4a_counters t4a_counters;

/** A snapshot: one plain field per counter name. */
typedef struct t4a_counter_values {
#define T4A_COUNTER_FIELD_(name, desc) uint64_t name;
  T4A_COUNTER_LIST(T4A_COUNTER_FIELD_)
#undef T4A_COUNTER_FIELD_
} t4a_counter_values;

/** Copies every counter of *c into *out. */
void t4a_counters_stats(const t4a_counters *c, t4a_counter_values *out);

/** @{ */
/** Returns the counter's name ("host_waits") or description; static strings, NULL if out of range. */
const char *t4a_counter_name(t4a_counter_id id);
const char *t4a_counter_description(t4a_counter_id id);
/** @} */

/** Returns the value of counter `id` in a snapshot. */
uint64_t t4a_counter_value(const t4a_counter_values *values, t4a_counter_id id);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_COUNTERS_H_ */
