/* Until the streams of a runtime exist (the streams slice of issue 22 defines the real
 * t4a_runtime_stream_resolve_ and drops this file): only NULL, the runtime's own stream. */
#include "t4a/runtime_internal.h"
#include "t4a_ctx/status_internal.h"

t4a_status t4a_runtime_stream_resolve_(t4a_runtime *rt, t4a_stream *stream, t4a_lane **lane,
                                       t4a_retire **retire) {
  if (lane != NULL) *lane = NULL;
  if (retire != NULL) *retire = NULL;
  if (rt == NULL || lane == NULL || retire == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "rt or an out is NULL");
  }
  if (stream != NULL) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "not a stream of this runtime (only NULL, its own stream, exists)");
  }
  *lane = rt->lane;
  *retire = rt->retire;
  return T4A_OK;
}
