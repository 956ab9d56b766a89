/** @file
 * t4a/launch_counters.h — the counters t4a_launch owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_LAUNCH_COUNTERS_H_
#define T4A_LAUNCH_COUNTERS_H_

/** Run 1 of t4a_launch's counters. */
#define T4A_LAUNCH_COUNTERS_1(X)                                                                  \
  X(graph_launches, "graph replays admitted (t4a_graph_launch)")

/** Run 2 of t4a_launch's counters. */
#define T4A_LAUNCH_COUNTERS_2(X)                                                                  \
  X(launches, "kernel launches admitted (checked, raw-bytes and descriptor fires)")               \
  X(module_loads, "modules loaded into a module cache (cuModuleLoadDataEx)")                      \
  X(module_unloads, "modules unloaded at their last reference (cuModuleUnload)")                  \
  X(module_evictions, "modules evicted from a module cache by its bounds (LRU)")                  \
  X(param_info_probes, "cuFuncGetParamInfo calls made to learn kernel parameter lists")

/** Run 3 of t4a_launch's counters. */
#define T4A_LAUNCH_COUNTERS_3(X)                                                                  \
  X(launch_graphs_built, "one-node executable graphs built (GRAPH strategy: descriptors, functions)") \
  X(launch_graph_fires, "launches submitted as cuGraphLaunch of their own one-node graph")        \
  X(launch_graph_updates, "one-node graphs updated for changed arguments (SetParams)")            \
  X(launch_graph_fallbacks, "one-node graphs that failed to build or update: plain launches")     \
  X(chain_replays, "launch-chain replays submitted (cuGraphLaunch of the chain's graph)")         \
  X(chain_node_updates, "chain kernel nodes updated in place after a rebind (SetParams)")         \
  X(chain_reinstantiations, "chains re-recorded into a new executable graph")                    \
  X(memsets, "stream-ordered fills enqueued or captured (t4a_memset, t4a_chain_memset)")          \
  X(chain_memset_updates, "chain memset nodes updated in place for a new value (SetParams)")

/** Every counter of t4a_launch, in the joined order. */
#define T4A_LAUNCH_COUNTERS(X) \
  T4A_LAUNCH_COUNTERS_1(X) T4A_LAUNCH_COUNTERS_2(X) T4A_LAUNCH_COUNTERS_3(X)

#endif /**< T4A_LAUNCH_COUNTERS_H_ */
