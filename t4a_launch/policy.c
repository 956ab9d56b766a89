/* The launch policy (strategy, graph_after, calibration) resolved to what a module cache or a
 * descriptor table runs with. See t4a/launch.h. */
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"

#define DEFAULT_GRAPH_AFTER 16u

t4a_status t4a_launch_policy_resolve_(const t4a_launch_policy *policy,
                                      t4a_launch_strategy *out_strategy, uint32_t *out_graph_after) {
  t4a_launch_policy p = T4A_LAUNCH_POLICY_INIT;
  if (policy != NULL) p = *policy;
  if (p.strategy != T4A_LAUNCH_STRATEGY_AUTO && p.strategy != T4A_LAUNCH_STRATEGY_PLAIN &&
      p.strategy != T4A_LAUNCH_STRATEGY_GRAPH) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "unknown launch strategy %d",
                         (int)p.strategy);
  }
  const t4a_launch_calibration *c = p.calibration;
  *out_strategy = p.strategy;
  if (p.strategy == T4A_LAUNCH_STRATEGY_AUTO) {
    *out_strategy = c != NULL && c->strategy == T4A_LAUNCH_STRATEGY_GRAPH
                        ? T4A_LAUNCH_STRATEGY_GRAPH
                        : T4A_LAUNCH_STRATEGY_PLAIN;
  }
  *out_graph_after = p.graph_after != 0                        ? p.graph_after
                     : c != NULL && c->graph_after != 0         ? c->graph_after
                                                                : DEFAULT_GRAPH_AFTER;
  return T4A_OK;
}
