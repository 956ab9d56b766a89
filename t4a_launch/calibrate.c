/* Launch-strategy calibration: plain fires against one-node graph fires of an empty kernel on
 * one lane, measured in the process that will use the answer. See t4a/launch.h. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"

#define BLOCKS 8u
#define BUILDS 8u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Host ns per fire over one block of `n` fires (a rebind before each when `touch`). */
static t4a_status time_block(t4a_launch_table *t, uint32_t id, uint32_t n, int touch,
                             double *out_ns) {
  uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < n; i++) {
    if (touch) t4a_launch_table_touch_(t, id);
    t4a_status st = t4a_descriptor_fire(t, id);
    if (st != T4A_OK) return st;
  }
  *out_ns = (double)(now_ns() - t0) / n;
  return T4A_OK;
}

/* Free device memory as the driver reports it (0 when it cannot be read). */
static size_t free_device_bytes(t4a_lane *lane) {
  t4a_ctx_scope scope;
  size_t free_b = 0, total = 0;
  if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane)) != T4A_OK) {
    return 0;
  }
  if (T4A_CU_QUIET(t4a_lane_driver(lane), cuMemGetInfo, &free_b, &total) != T4A_OK) free_b = 0;
  t4a_ctx_scope_exit_quiet(&scope);
  return free_b;
}

t4a_status t4a_launch_calibrate(t4a_retire *retire, t4a_function *fn, uint32_t fires,
                                t4a_launch_calibration *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (retire == NULL || fn == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "retire, function or out is NULL");
  }
  uint32_t expected = 0;
  t4a_status st = t4a_launch_expected_params_(fn, &expected);
  if (st != T4A_OK) return st;
  if (expected != 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "calibration needs a kernel without parameters; '%s' takes %u",
                          fn->name, expected);
  }
  if (fires == 0) fires = 2048;
  if (fires < 64) fires = 64;
  uint32_t per_block = fires / BLOCKS;
  t4a_launch_table_options po = T4A_LAUNCH_TABLE_OPTIONS_INIT, go = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  po.capacity = 1;
  po.launch.strategy = T4A_LAUNCH_STRATEGY_PLAIN;
  go.capacity = 1 + BUILDS;
  go.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  go.launch.graph_after = 1;
  t4a_launch_table *plain = NULL, *graph = NULL;
  const t4a_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  uint32_t pid = 0, gid = 0, bids[BUILDS];
  double p_ns[BLOCKS], g_ns[BLOCKS], r_ns[BLOCKS], b_ns[BUILDS];
  if ((st = t4a_launch_table_create(retire, &po, &plain)) != T4A_OK) return st;
  if ((st = t4a_launch_table_create(retire, &go, &graph)) != T4A_OK) goto done;
  if ((st = t4a_descriptor_register(plain, fn, &cfg, NULL, 0, &pid)) != T4A_OK) goto done;
  if ((st = t4a_descriptor_register(graph, fn, &cfg, NULL, 0, &gid)) != T4A_OK) goto done;
  /* Warm-up: the graph is built at its first fire; both paths run once per block's worth. */
  double warm;
  if ((st = time_block(plain, pid, per_block, 0, &warm)) != T4A_OK) goto done;
  if ((st = time_block(graph, gid, per_block, 0, &warm)) != T4A_OK) goto done;
  if ((st = t4a_retire_wait(retire)) != T4A_OK) goto done;
  struct t4a_launch_table_stats gs;
  t4a_launch_table_stats(graph, &gs);
  if (gs.graphs == 0) {
    st = t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                        "kernel '%s': its one-node graph could not be built (see the counter "
                        "launch_graph_fallbacks)",
                        fn->name);
    goto done;
  }
  for (uint32_t b = 0; b < BLOCKS; b++) {
    /* Each block starts on an idle stream: the queue's depth is not what is measured. */
    if ((st = time_block(plain, pid, per_block, 0, &p_ns[b])) != T4A_OK) goto done;
    if ((st = t4a_retire_wait(retire)) != T4A_OK) goto done;
    if ((st = time_block(graph, gid, per_block, 0, &g_ns[b])) != T4A_OK) goto done;
    if ((st = t4a_retire_wait(retire)) != T4A_OK) goto done;
    if ((st = time_block(graph, gid, per_block, 1, &r_ns[b])) != T4A_OK) goto done;
    if ((st = t4a_retire_wait(retire)) != T4A_OK) goto done;
  }
  size_t free_before = free_device_bytes(t4a_retire_lane(retire));
  for (uint32_t i = 0; i < BUILDS; i++) {
    if ((st = t4a_descriptor_register(graph, fn, &cfg, NULL, 0, &bids[i])) != T4A_OK) goto done;
    if ((st = time_block(graph, bids[i], 1, 0, &b_ns[i])) != T4A_OK) goto done;
  }
  size_t free_after = free_device_bytes(t4a_retire_lane(retire));
  if ((st = t4a_retire_wait(retire)) != T4A_OK) goto done;
  out->fires = per_block * BLOCKS;
  out->plain_ns = median(p_ns, BLOCKS);
  out->graph_ns = median(g_ns, BLOCKS);
  out->graph_rebind_ns = median(r_ns, BLOCKS);
  double first = median(b_ns, BUILDS);
  out->build_ns = first > out->graph_ns ? first - out->graph_ns : 0;
  if (free_before != 0 && free_after != 0 && free_after < free_before) {
    out->device_bytes_per_graph = (uint64_t)(free_before - free_after) / BUILDS;
  }
  out->strategy = out->graph_rebind_ns < 0.9 * out->plain_ns ? T4A_LAUNCH_STRATEGY_GRAPH
                                                             : T4A_LAUNCH_STRATEGY_PLAIN;
  double saved = out->plain_ns - out->graph_ns;
  double after = saved > 0 ? ceil(out->build_ns / saved) : 4096;
  out->graph_after = after < 2 ? 2 : after > 4096 ? 4096 : (uint32_t)after;
done:
  t4a_launch_table_destroy(graph);
  t4a_launch_table_destroy(plain);
  if (st != T4A_OK) memset(out, 0, sizeof *out);
  return st;
}
