/* The runtime's events, fills, host functions and memory gauges (issue 22): thin wrappers over
 * t4a/event.h, t4a/memset.h and the gauges of t4a_ctx and t4a_mem, on a stream of the runtime. */
#include "t4a/runtime_internal.h"
#include "t4a/t4a.h"
#include <string.h>

#include "t4a_ctx/status_internal.h"

t4a_status t4a_runtime_memset(t4a_runtime *rt, t4a_stream *stream, t4a_buffer *buffer,
                              size_t offset, size_t count, unsigned elem_bytes, uint32_t value) {
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, &lane, &retire);
  if (st != T4A_OK) return st;
  return t4a_memset(retire, buffer, offset, count, elem_bytes, value);
}

t4a_status t4a_runtime_event(t4a_runtime *rt, uint32_t flags, t4a_event **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "rt is NULL");
  t4a_event_options o = T4A_EVENT_OPTIONS_INIT;
  o.flags = flags;
  return t4a_event_create(rt->lane, &o, out);
}

t4a_status t4a_runtime_event_record(t4a_runtime *rt, t4a_stream *stream, t4a_event *event) {
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, &lane, &retire);
  if (st != T4A_OK) return st;
  return t4a_event_record(event, retire);
}

t4a_status t4a_runtime_event_wait(t4a_runtime *rt, t4a_stream *stream, t4a_event *event) {
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, &lane, &retire);
  if (st != T4A_OK) return st;
  return t4a_event_wait(retire, event);
}

t4a_status t4a_runtime_host_func(t4a_runtime *rt, t4a_stream *stream, t4a_host_fn fn, void *user,
                                 const t4a_keepalive *keep, size_t num_keep) {
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, &lane, &retire);
  if (st != T4A_OK) {
    /* The keepalives are handed over in every case (t4a_host_func_launch). */
    t4a_error saved;
    t4a_error_last(&saved);
    for (size_t i = 0; keep != NULL && i < num_keep; i++) {
      if (keep[i].release != NULL) keep[i].release(keep[i].object);
    }
    t4a_error_restore(&saved);
    return st;
  }
  return t4a_host_func_launch(retire, fn, user, keep, num_keep);
}

t4a_status t4a_runtime_memory(t4a_runtime *rt, t4a_runtime_memory_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (rt == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "rt or out is NULL");
  }
  t4a_status st = t4a_ctx_holder_memory(t4a_lane_holder(rt->lane), &out->device_free_bytes,
                                        &out->device_total_bytes);
  if (st == T4A_OK) st = t4a_mem_pool_gauges(rt->pool, &out->pool);
  if (st != T4A_OK) memset(out, 0, sizeof *out);
  return st;
}

void t4a_runtime_reset_peak(t4a_runtime *rt) {
  if (rt != NULL) t4a_mem_pool_reset_peak(rt->pool);
}
