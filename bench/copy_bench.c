/* Copies between two devices: t4a's peer and staged paths against the raw driver's
 * cuMemcpyPeerAsync, in one process, interleaved.
 *
 *   copy_bench [--bytes N] [--repeats R] [--json]
 *
 * Device 0 -> device 1 and device 1 -> device 0, one runtime (lane, pool, retire, transfer state
 * with the default staging ring) per device. Variants, each timed from the call to the moment the
 * bytes are in place:
 *   raw cuMemcpyPeerAsync  on the destination lane's stream (its context current) + cuStreamSynchronize
 *   t4a peer               t4a_xfer_copy(PEER) + t4a_witness_wait (only where peer access exists)
 *   t4a staged             t4a_xfer_copy(STAGED) + t4a_witness_wait
 * Before timing: what the driver says about peer access both ways, the path AUTO picks
 * (t4a_xfer_copy_plan), one t4a copy per path and direction (peer access enabled and the source
 * pool opened to the other device, once: counters peer_access_enabled and pool_access_granted),
 * and one byte-exact check of every variant's result. Each repeat runs every variant once in each
 * direction, in an order rotated by the repeat number; one warm-up repeat is not counted.
 * Reports min / median / max GB/s (10^9 bytes/s) and the ratio of medians to raw. Needs two GPUs:
 * exits 77 without a driver, 1 with an explicit message on a host with fewer than two. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a_ctx/driver_table.h"
#define T4A_BENCH_NAME "copy_bench"
#include "bench/harness.h"

enum { V_RAW = 0, V_PEER, V_STAGED, NUM_V };
static const char *const k_names[NUM_V] = {"raw cuMemcpyPeerAsync", "t4a peer", "t4a staged"};
static const char *const k_keys[NUM_V] = {"raw_peer_async", "t4a_peer", "t4a_staged"};

typedef struct rt {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  CUcontext ctx;
  t4a_buffer *src, *dst; /* src: read by copies out of this device; dst: written by copies in */
} rt;

static t4a_driver *g_drv;
static size_t g_bytes;

static void rt_open(int ordinal, rt *r) {
  memset(r, 0, sizeof *r);
  T4A_BENCH_CHECK(t4a_lane_create(g_drv, ordinal, NULL, &r->lane));
  T4A_BENCH_CHECK(t4a_mem_pool_create(r->lane, NULL, &r->pool));
  T4A_BENCH_CHECK(t4a_retire_create(r->lane, NULL, &r->retire));
  T4A_BENCH_CHECK(t4a_xfer_create(r->retire, NULL, &r->xfer));
  t4a_ctx_scope s;
  T4A_BENCH_CHECK(t4a_ctx_scope_enter(&s, t4a_lane_holder(r->lane), NULL));
  T4A_BENCH_CHECK(T4A_CU(g_drv, cuCtxGetCurrent, &r->ctx));
  T4A_BENCH_CHECK(t4a_ctx_scope_exit(&s));
  T4A_BENCH_CHECK(t4a_buffer_create(r->pool, g_bytes, 0, 0, &r->src));
  T4A_BENCH_CHECK(t4a_buffer_create(r->pool, g_bytes, 0, 0, &r->dst));
}

static void rt_close(rt *r) {
  t4a_buffer_release(r->src);
  t4a_buffer_release(r->dst);
  t4a_xfer_destroy(r->xfer);
  T4A_BENCH_CHECK(t4a_retire_destroy(r->retire));
  t4a_mem_pool_release(r->pool);
  t4a_lane_release(r->lane);
}

/* One copy from->to by variant v, complete when it returns. */
static void copy_once(rt *to, rt *from, int v) {
  if (v == V_RAW) {
    t4a_ctx_scope s;
    T4A_BENCH_CHECK(t4a_ctx_scope_enter(&s, t4a_lane_holder(to->lane), NULL));
    CUstream stream = t4a_lane_stream(to->lane);
    T4A_BENCH_CHECK(T4A_CU(g_drv, cuMemcpyPeerAsync, (CUdeviceptr)t4a_buffer_devptr(to->dst), to->ctx,
                 (CUdeviceptr)t4a_buffer_devptr(from->src), from->ctx, g_bytes, stream));
    T4A_BENCH_CHECK(T4A_CU(g_drv, cuStreamSynchronize, stream));
    T4A_BENCH_CHECK(t4a_ctx_scope_exit(&s));
    return;
  }
  t4a_witness *w = NULL;
  t4a_copy_path taken = T4A_COPY_AUTO;
  t4a_copy_path want = v == V_PEER ? T4A_COPY_PEER : T4A_COPY_STAGED;
  T4A_BENCH_CHECK(t4a_xfer_copy(to->xfer, to->dst, 0, from->xfer, from->src, 0, g_bytes, want, &taken, &w));
  T4A_BENCH_CHECK(t4a_witness_wait(w));
  t4a_witness_release(w);
  if (taken != want) {
    fprintf(stderr, "copy_bench: %s took path %d\n", k_names[v], (int)taken);
    exit(1);
  }
}

static void zero_dst(rt *r) {
  t4a_ctx_scope s;
  T4A_BENCH_CHECK(t4a_ctx_scope_enter(&s, t4a_lane_holder(r->lane), NULL));
  CUstream stream = t4a_lane_stream(r->lane);
  T4A_BENCH_CHECK(T4A_CU(g_drv, cuMemsetD8Async, (CUdeviceptr)t4a_buffer_devptr(r->dst), 0, g_bytes,
               stream));
  T4A_BENCH_CHECK(T4A_CU(g_drv, cuStreamSynchronize, stream));
  T4A_BENCH_CHECK(t4a_ctx_scope_exit(&s));
}

static void verify(rt *r, const unsigned char *want, unsigned char *back, const char *what) {
  t4a_xfer_pending *p = NULL;
  T4A_BENCH_CHECK(t4a_xfer_download(r->xfer, r->dst, 0, back, g_bytes, &p));
  T4A_BENCH_CHECK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  if (memcmp(back, want, g_bytes) != 0) {
    fprintf(stderr, "copy_bench: %s is not byte-exact\n", what);
    exit(1);
  }
}

/* peer_access_enabled is counted by the driver (context pairs); pool_access_granted by the lane
 * whose pool was opened. */
typedef struct snap {
  unsigned long long peer, pool;
} snap;

static snap take_snap(rt r[2]) {
  t4a_counter_values d, a, b;
  t4a_driver_stats(g_drv, &d);
  t4a_lane_stats(r[0].lane, &a);
  t4a_lane_stats(r[1].lane, &b);
  snap s = {(unsigned long long)d.peer_access_enabled,
            (unsigned long long)(a.pool_access_granted + b.pool_access_granted)};
  return s;
}

static const char *path_name(t4a_copy_path p) {
  switch (p) {
    case T4A_COPY_PEER: return "PEER";
    case T4A_COPY_STAGED: return "STAGED";
    case T4A_COPY_SAME_DEVICE: return "SAME_DEVICE";
    default: return "AUTO";
  }
}

int main(int argc, char **argv) {
  size_t bytes = (size_t)256 << 20;
  int repeats = 7, json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      bytes = (size_t)strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else {
      fprintf(stderr, "usage: copy_bench [--bytes N] [--repeats R] [--json]\n");
      return 2;
    }
  }
  if (bytes == 0 || repeats < 1 || repeats > 1000) {
    fprintf(stderr, "copy_bench: --bytes must be > 0 and --repeats 1..1000\n");
    return 2;
  }
  g_bytes = bytes;
  t4a_status st = t4a_driver_open(NULL, &g_drv);
  if (st == T4A_DRIVER_NOT_FOUND) {
    printf("SKIP: no CUDA driver\n");
    return 77;
  }
  T4A_BENCH_CHECK(st);
  int devices = 0;
  if (t4a_device_count(g_drv, &devices) != T4A_OK || devices < 2) {
    printf("FAIL: copy_bench needs 2 GPUs and the host has %d; nothing was measured\n", devices);
    t4a_driver_release(g_drv);
    return 1;
  }
  int can[2] = {0, 0}; /* can[d]: device d can access the other device's memory */
  T4A_BENCH_CHECK(t4a_device_can_access_peer(g_drv, 0, 1, &can[0]));
  T4A_BENCH_CHECK(t4a_device_can_access_peer(g_drv, 1, 0, &can[1]));
  rt r[2];
  rt_open(0, &r[0]);
  rt_open(1, &r[1]);
  t4a_copy_path plan[2]; /* plan[dir]: dir 0 is 0 -> 1 (destination 1), dir 1 is 1 -> 0 */
  T4A_BENCH_CHECK(t4a_xfer_copy_plan(r[1].xfer, r[0].xfer, T4A_COPY_AUTO, &plan[0]));
  T4A_BENCH_CHECK(t4a_xfer_copy_plan(r[0].xfer, r[1].xfer, T4A_COPY_AUTO, &plan[1]));
  int peer_ok[2] = {can[1], can[0]}; /* dir 0's destination is device 1 */
  for (int dir = 0; dir < 2; dir++) {
    t4a_copy_path want = peer_ok[dir] ? T4A_COPY_PEER : T4A_COPY_STAGED;
    if (plan[dir] != want) {
      fprintf(stderr, "copy_bench: AUTO plans %s for direction %d, peer access says %s\n",
              path_name(plan[dir]), dir, path_name(want));
      return 1;
    }
    if (!peer_ok[dir]) {
      t4a_copy_path taken;
      if (t4a_xfer_copy_plan(dir ? r[0].xfer : r[1].xfer, dir ? r[1].xfer : r[0].xfer,
                             T4A_COPY_PEER, &taken) != T4A_UNSUPPORTED) {
        fprintf(stderr, "copy_bench: PEER is not refused where peer access is missing\n");
        return 1;
      }
      t4a_error_clear();
    }
  }
  unsigned char *pat[2], *back = malloc(bytes);
  for (int d = 0; d < 2; d++) {
    pat[d] = malloc(bytes);
    if (pat[d] == NULL || back == NULL) return 1;
    for (size_t i = 0; i < bytes; i++) pat[d][i] = (unsigned char)(i * (5u + 2u * d) + (i >> 13));
    T4A_BENCH_CHECK(t4a_xfer_upload(r[d].xfer, r[d].src, 0, pat[d], bytes));
    T4A_BENCH_CHECK(t4a_retire_wait(r[d].retire));
  }
  snap s0 = take_snap(r);
  /* The first copy of each path and direction (peer access, pool access), each result checked,
   * the destination zeroed before each variant. */
  for (int dir = 0; dir < 2; dir++) {
    rt *to = dir ? &r[0] : &r[1], *from = dir ? &r[1] : &r[0];
    for (int v = NUM_V - 1; v >= 0; v--) { /* peer before raw: raw then sees peer access on */
      if (v == V_PEER && !peer_ok[dir]) continue;
      char what[96];
      snprintf(what, sizeof what, "%s %d -> %d", k_names[v], dir, 1 - dir);
      zero_dst(to);
      copy_once(to, from, v);
      verify(to, pat[dir], back, what);
    }
  }
  snap s1 = take_snap(r);

  double *t[2][NUM_V];
  for (int dir = 0; dir < 2; dir++) {
    for (int v = 0; v < NUM_V; v++) t[dir][v] = calloc((size_t)repeats, sizeof(double));
  }
  for (int rep = -1; rep < repeats; rep++) { /* rep = -1: warm-up */
    for (int dir = 0; dir < 2; dir++) {
      rt *to = dir ? &r[0] : &r[1], *from = dir ? &r[1] : &r[0];
      for (int k = 0; k < NUM_V; k++) {
        int v = (k + (rep < 0 ? 0 : rep)) % NUM_V;
        if (v == V_PEER && !peer_ok[dir]) continue;
        double t0 = t4a_bench_now();
        copy_once(to, from, v);
        double dt = t4a_bench_now() - t0;
        if (rep >= 0) t[dir][v][rep] = dt;
      }
    }
  }
  t4a_counter_values c[2];
  t4a_lane_stats(r[0].lane, &c[0]);
  t4a_lane_stats(r[1].lane, &c[1]);
  snap s2 = take_snap(r);
  static const char *const dirs[2] = {"0 -> 1", "1 -> 0"};
  if (!json) {
    printf("# %zu bytes, %d repeats (+1 warm-up), interleaved; staging ring %zu MiB x %u\n",
           bytes, repeats, t4a_xfer_chunk_bytes(r[1].xfer) >> 20, t4a_xfer_num_chunks(r[1].xfer));
    printf("# peer access: device 0 -> 1 memory %d, device 1 -> 0 memory %d; AUTO plans "
           "0 -> 1 %s, 1 -> 0 %s\n", can[0], can[1], path_name(plan[0]), path_name(plan[1]));
    printf("# first copies: peer_access_enabled +%llu, pool_access_granted +%llu; after all "
           "repeats: +%llu, +%llu\n",
           s1.peer - s0.peer, s1.pool - s0.pool, s2.peer - s0.peer, s2.pool - s0.pool);
    printf("# every variant's result checked byte-exact once, both directions\n");
    t4a_bench_gbs_header(stdout, 8, "dir");
  }
  for (int dir = 0; dir < 2; dir++) {
    double med_raw = 0;
    for (int v = 0; v < NUM_V; v++) {
      if (v == V_PEER && !peer_ok[dir]) {
        if (!json) printf("%-8s %-22s (no peer access)\n", dirs[dir], k_names[v]);
        continue;
      }
      t4a_bench_stats ts = t4a_bench_stats_of(t[dir][v], (size_t)repeats);
      if (v == V_RAW) med_raw = ts.med;
      if (json) {
        static const char *const keys[2] = {"0->1", "1->0"};
        t4a_bench_gbs_json(stdout, keys[dir], k_keys[v], bytes, repeats, ts, med_raw);
      } else {
        t4a_bench_gbs_row(stdout, 8, dirs[dir], k_names[v], bytes, ts, med_raw);
      }
    }
  }
  if (json) {
    printf("{\"peer_access\":[%d,%d],\"auto_plan\":[\"%s\",\"%s\"],\"peer_access_enabled\":%llu,"
           "\"pool_access_granted\":%llu}\n", can[0], can[1], path_name(plan[0]),
           path_name(plan[1]), s2.peer - s0.peer, s2.pool - s0.pool);
  } else {
    for (int d = 0; d < 2; d++) {
      printf("# lane %d: copies peer %llu, staged %llu; staging waits %llu, cross waits %llu, "
             "host waits %llu\n", d, (unsigned long long)c[d].copies_peer,
             (unsigned long long)c[d].copies_staged, (unsigned long long)c[d].staging_waits,
             (unsigned long long)c[d].cross_waits, (unsigned long long)c[d].host_waits);
    }
  }
  for (int dir = 0; dir < 2; dir++) {
    for (int v = 0; v < NUM_V; v++) free(t[dir][v]);
  }
  rt_close(&r[0]);
  rt_close(&r[1]);
  t4a_driver_release(g_drv);
  free(pat[0]);
  free(pat[1]);
  free(back);
  return 0;
}
