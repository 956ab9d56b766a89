/* The runtime's stats as JSON text (t4a_runtime_stats_json in t4a/t4a.h): a bounded writer
 * over every piece's snapshot. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "t4a/t4a.h"
#include "t4a/runtime_internal.h"
#include "t4a_ctx/status_internal.h"

/* Appends to a bounded buffer, counting what would not fit (as snprintf does). */
typedef struct json_out {
  char *buf;
  size_t size;
  size_t len; /* the text's full length so far, written or not */
} json_out;

static void put(json_out *j, const char *fmt, ...) T4A_PRINTF(2, 3);
static void put(json_out *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *at = j->len < j->size ? j->buf + j->len : NULL;
  size_t room = j->len < j->size ? j->size - j->len : 0;
  int n = vsnprintf(at, room, fmt, ap);
  va_end(ap);
  if (n > 0) j->len += (size_t)n;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(json_out *j, const char *s) {
  put(j, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      put(j, "\\%c", *p);
    } else if (*p < 0x20) {
      put(j, "\\u%04x", *p);
    } else {
      put(j, "%c", *p);
    }
  }
  put(j, "\"");
}

/* Every counter of `v` whose name starts with `prefix` ("" for all), one per line. */
static void put_counters(json_out *j, const t4a_counter_values *v, const char *prefix,
                         const char *indent, int more) {
  size_t plen = strlen(prefix);
  int first = 1;
  for (int i = 0; i < T4A_COUNTER_COUNT; i++) {
    const char *name = t4a_counter_name((t4a_counter_id)i);
    if (strncmp(name, prefix, plen) != 0) continue;
    put(j, "%s\n%s\"%s\": %" PRIu64, first ? "" : ",", indent, name,
        t4a_counter_value(v, (t4a_counter_id)i));
    first = 0;
  }
  if (more) put(j, ",");
}

t4a_status t4a_runtime_stats_json(t4a_runtime *rt, char *buf, size_t size, size_t *out_len) {
  if (out_len != NULL) *out_len = 0;
  if (rt == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "the runtime is NULL");
  }
  if (buf == NULL && size != 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "buf is NULL with a size");
  }
  json_out j = {buf, size, 0};
  t4a_counter_values v;
  put(&j, "{\n  \"t4a_version\": \"%s\",\n  \"ordinal\": %d,\n  \"target\": ",
      t4a_version_string(), rt->ordinal);
  put_string(&j, rt->target);
  put(&j, ",\n  \"lane\": {");
  t4a_lane_stats(rt->lane, &v);
  put_counters(&j, &v, "", "    ", 0);
  put(&j, "\n  },\n  \"driver\": {\n    \"origin\": ");
  put_string(&j, t4a_driver_origin(rt->driver));
  put(&j, ",\n    \"version\": %d,\n    \"counters\": {", t4a_driver_version(rt->driver));
  t4a_driver_stats(rt->driver, &v);
  put_counters(&j, &v, "", "      ", 0);
  struct t4a_module_cache_stats ms;
  t4a_module_cache_stats(rt->modules, &ms);
  put(&j,
      "\n    }\n  },\n  \"module_cache\": {\n    \"entries\": %" PRIu32 ",\n    \"bytes\": %" PRIu64
      ",\n    \"loads\": %" PRIu64 ",\n    \"hits\": %" PRIu64 ",\n    \"evictions\": %" PRIu64
      ",\n    \"unloads\": %" PRIu64 "\n  },\n",
      ms.entries, ms.bytes, ms.loads, ms.hits, ms.evictions, ms.unloads);
  struct t4a_retire_stats rs;
  t4a_retire_stats(rt->retire, &rs);
  put(&j,
      "  \"retire\": {\n    \"open_admissions\": %" PRIu32 ",\n    \"open_keepalives\": %" PRIu32
      ",\n    \"sealed_epochs\": %" PRIu32 ",\n    \"quarantined_held\": %" PRIu64 "\n  },\n",
      rs.open_admissions, rs.open_keepalives, rs.sealed_epochs, rs.quarantined_held);
  struct t4a_launch_table_stats ts;
  t4a_launch_table_stats(rt->table, &ts);
  put(&j,
      "  \"launch_table\": {\n    \"strategy\": \"%s\",\n    \"graph_after\": %" PRIu32
      ",\n    \"descriptors\": %" PRIu32 ",\n    \"graphs\": %" PRIu32
      ",\n    \"plain_fires\": %" PRIu64 ",\n    \"graph_fires\": %" PRIu64
      ",\n    \"graph_builds\": %" PRIu64 ",\n    \"graph_updates\": %" PRIu64
      ",\n    \"graph_fallbacks\": %" PRIu64 ",\n    \"calibration\": ",
      ts.strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "graph" : "plain", ts.graph_after,
      ts.descriptors, ts.graphs, ts.plain_fires, ts.graph_fires, ts.graph_builds,
      ts.graph_updates, ts.graph_fallbacks);
  if (!rt->calibrated && rt->calibration_failed != T4A_OK) {
    put(&j, "null,\n    \"calibration_failed\": \"%s\"\n  },\n",
        t4a_status_name(rt->calibration_failed));
  } else if (!rt->calibrated) {
    put(&j, "null\n  },\n");
  } else {
    const t4a_launch_calibration *c = &rt->calibration;
    put(&j,
        "{\n      \"fires\": %" PRIu32 ",\n      \"plain_ns\": %.1f,\n      \"graph_ns\": %.1f"
        ",\n      \"graph_rebind_ns\": %.1f,\n      \"build_ns\": %.1f"
        ",\n      \"device_bytes_per_graph\": %" PRIu64 ",\n      \"strategy\": \"%s\""
        ",\n      \"graph_after\": %" PRIu32 "\n    }\n  },\n",
        c->fires, c->plain_ns, c->graph_ns, c->graph_rebind_ns, c->build_ns,
        c->device_bytes_per_graph, c->strategy == T4A_LAUNCH_STRATEGY_GRAPH ? "graph" : "plain",
        c->graph_after);
  }
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(rt->xfer, &xs);
  put(&j,
      "  \"xfer\": {\n    \"chunk_bytes\": %zu,\n    \"num_chunks\": %" PRIu32
      ",\n    \"free_chunks\": %" PRIu32 ",\n    \"busy_chunks\": %" PRIu32
      ",\n    \"quarantined_chunks\": %" PRIu32 ",\n    \"spare_events\": %" PRIu32
      ",\n    \"chunks_reclaimed\": %" PRIu64 ",\n    \"pinned_hold_bytes\": %" PRIu64
      ",\n    \"pinned_fallbacks\": %" PRIu64 ",\n    \"copy_threads\": %" PRIu32
      ",\n    \"parallel_copies\": %" PRIu64 "\n  },\n",
      t4a_xfer_chunk_bytes(rt->xfer), t4a_xfer_num_chunks(rt->xfer), xs.free_chunks,
      xs.busy_chunks, xs.quarantined_chunks, xs.spare_events, xs.chunks_reclaimed,
      xs.pinned_hold_bytes, xs.pinned_fallbacks, xs.copy_threads, xs.parallel_copies);
  t4a_nvrtc_cache *cache = t4a_runtime_artifact_cache(rt);
  if (cache == NULL) {
    put(&j, "  \"artifact_cache\": null,\n");
  } else {
    put(&j, "  \"artifact_cache\": {");
    struct t4a_nvrtc_cache_stats cs;
    t4a_nvrtc_cache_stats(cache, &cs);
    put_counters(&j, &cs.counters, "nvrtc_", "    ", 1);
    put(&j, "\n    \"memory_entries\": %zu,\n    \"memory_bytes\": %zu\n  },\n",
        cs.memory_entries, cs.memory_bytes);
  }
  /* The gauges ask the driver: a failure gives null and leaves the caller's detail as it was. */
  t4a_runtime_memory_info mi;
  t4a_error saved;
  t4a_error_last(&saved);
  if (t4a_runtime_memory(rt, &mi) != T4A_OK) {
    t4a_error_restore(&saved);
    put(&j, "  \"memory\": null,\n");
  } else {
    put(&j,
        "  \"memory\": {\n    \"device_free_bytes\": %" PRIu64 ",\n    \"device_total_bytes\": %" PRIu64
        ",\n    \"in_use_bytes\": %" PRIu64 ",\n    \"in_use_blocks\": %" PRIu64
        ",\n    \"peak_in_use_bytes\": %" PRIu64 ",\n    \"cached_bytes\": %" PRIu64
        ",\n    \"cached_blocks\": %" PRIu64 ",\n    \"reserved_bytes\": %" PRIu64
        ",\n    \"driver_used_bytes\": %" PRIu64 "\n  },\n",
        mi.device_free_bytes, mi.device_total_bytes, mi.pool.in_use_bytes, mi.pool.in_use_blocks,
        mi.pool.peak_in_use_bytes, mi.pool.cached_bytes, mi.pool.cached_blocks,
        mi.pool.reserved_bytes, mi.pool.driver_used_bytes);
  }
  put(&j, "  \"heap_allocations\": %" PRIu64 "\n}\n", t4a_heap_allocations());
  if (j.len >= size) {
    if (out_len != NULL) *out_len = j.len + 1;
    if (size > 0) buf[0] = '\0';
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, (uint64_t)j.len + 1,
                         "the stats JSON needs %zu bytes, the buffer has %zu", j.len + 1, size);
  }
  if (out_len != NULL) *out_len = j.len;
  return T4A_OK;
}
