/* L2 persistence: the persisting-L2 limit of a lane's context, an access-policy window on its
 * stream, and a reset of the persisting lines. Each call checks the lane and runs under the
 * lane's context. */
#include <stdint.h>
#include <string.h>

#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"

static t4a_status device_attr(t4a_lane *lane, CUdevice_attribute attr, const char *what,
                              size_t *out) {
  int v = 0;
  t4a_status st = T4A_CU(t4a_lane_driver(lane), cuDeviceGetAttribute, &v, attr,
                         t4a_ctx_holder_device(t4a_lane_holder(lane)));
  if (st != T4A_OK) return st;
  if (v <= 0) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuDeviceGetAttribute", 0, NULL, 0,
                          "device %d has no %s (L2 persistence needs compute capability 8.0+)",
                          t4a_lane_ordinal(lane), what);
  }
  *out = (size_t)v;
  return T4A_OK;
}

static t4a_status enter(t4a_lane *lane, t4a_ctx_scope *scope) {
  if (lane == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane is NULL");
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  return t4a_ctx_scope_enter(scope, t4a_lane_holder(lane), t4a_lane_counters(lane));
}

/* Ends the scope: after a failure quietly (the failure's detail stays), else reporting a failed
 * restore. */
static t4a_status leave(t4a_lane *lane, t4a_ctx_scope *scope, t4a_status st) {
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(scope);
    return t4a_lane_note_(lane, st);
  }
  return t4a_ctx_scope_exit(scope);
}

t4a_status t4a_l2_set_persisting_limit(t4a_lane *lane, size_t bytes, size_t *out_applied) {
  if (out_applied != NULL) *out_applied = 0;
  if (t4a_lane_is_capturing(lane)) {
    /* cuCtxSetLimit during a capture breaks it on the real driver (measured on the H200). */
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "the lane's stream is capturing a graph: set the L2 limit outside it");
  }
  t4a_ctx_scope scope;
  t4a_status st = enter(lane, &scope);
  if (st != T4A_OK) return st;
  size_t max = 0, applied = 0;
  st = device_attr(lane, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, "persisting L2", &max);
  if (st == T4A_OK) {
    st = T4A_CU(t4a_lane_driver(lane), cuCtxSetLimit, CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                bytes < max ? bytes : max);
  }
  /* What the driver applied (it may round). */
  if (st == T4A_OK) {
    st = T4A_CU(t4a_lane_driver(lane), cuCtxGetLimit, &applied, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  }
  st = leave(lane, &scope, st);
  if (st == T4A_OK && out_applied != NULL) *out_applied = applied;
  return st;
}

t4a_status t4a_l2_set_window(t4a_lane *lane, t4a_devptr base, size_t bytes, float hit_ratio) {
  if (!(hit_ratio >= 0.0f && hit_ratio <= 1.0f)) { /* NaN too */
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "hit_ratio %g is outside [0, 1]",
                          (double)hit_ratio);
  }
  if (bytes > 0 && base == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "a window at address 0");
  }
  t4a_ctx_scope scope;
  t4a_status st = enter(lane, &scope);
  if (st != T4A_OK) return st;
  size_t max = 0;
  st = device_attr(lane, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, "access-policy window",
                   &max);
  if (st == T4A_OK) {
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = bytes > 0 ? (void *)(uintptr_t)base : NULL;
    v.accessPolicyWindow.num_bytes = bytes < max ? bytes : max;
    v.accessPolicyWindow.hitRatio = bytes > 0 ? hit_ratio : 0.0f;
    v.accessPolicyWindow.hitProp =
        bytes > 0 ? CU_ACCESS_PROPERTY_PERSISTING : CU_ACCESS_PROPERTY_NORMAL;
    v.accessPolicyWindow.missProp =
        bytes > 0 ? CU_ACCESS_PROPERTY_STREAMING : CU_ACCESS_PROPERTY_NORMAL;
    st = T4A_CU(t4a_lane_driver(lane), cuStreamSetAttribute, t4a_lane_stream(lane),
                CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
  }
  return leave(lane, &scope, st);
}

t4a_status t4a_l2_reset(t4a_lane *lane) {
  t4a_ctx_scope scope;
  t4a_status st = enter(lane, &scope);
  if (st != T4A_OK) return st;
  st = T4A_CU(t4a_lane_driver(lane), cuCtxResetPersistingL2Cache);
  return leave(lane, &scope, st);
}
