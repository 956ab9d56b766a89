/* Pageable transfers: t4a's staging ring (one copy thread, and the default pool of copy threads)
 * against the raw driver's pageable cuMemcpyHtoD / cuMemcpyDtoH, in one process, interleaved.
 *
 *   xfer_bench [--bytes N] [--repeats R] [--json] [--copy-threads T] [--chunks C] [--chunk-mib M]
 *
 * The last three set the copy-pool variant's options (default: the library's defaults), to tune
 * them on a machine.
 * Each repeat runs every variant once, in an order rotated by the repeat number, on the same
 * pageable host memory (touched beforehand) and the same device buffer; each variant's time runs
 * from the call to the moment the bytes are in place (raw: the stream synchronisation returns; t4a
 * upload: the call plus t4a_retire_wait; t4a download: the call plus t4a_xfer_pending_wait).
 * Reports min / median / max GB/s and the ratio of medians to raw, with the counters of the t4a
 * runs. One warm-up repeat is not counted. Needs a GPU (exits 77 without a driver). */
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
#include "t4a_ctx/driver_table.h"
#define T4A_BENCH_NAME "xfer_bench"
#include "bench/harness.h"

enum { V_RAW = 0, V_ONE, V_POOL, NUM_V };
static const char *const k_names[NUM_V] = {"raw pageable", "t4a, 1 copy thread",
                                           "t4a, copy pool"};

int main(int argc, char **argv) {
  size_t bytes = (size_t)256 << 20;
  int repeats = 7, json = 0;
  t4a_xfer_options pool_options = T4A_XFER_OPTIONS_INIT;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      bytes = (size_t)strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--copy-threads") == 0 && i + 1 < argc) {
      pool_options.copy_threads = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc) {
      pool_options.num_chunks = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--chunk-mib") == 0 && i + 1 < argc) {
      pool_options.chunk_bytes = (size_t)atoi(argv[++i]) << 20;
    } else {
      fprintf(stderr, "usage: xfer_bench [--bytes N] [--repeats R] [--json] [--copy-threads T] "
                      "[--chunks C] [--chunk-mib M]\n");
      return 2;
    }
  }
  if (bytes == 0 || repeats < 1 || repeats > 1000) {
    fprintf(stderr, "xfer_bench: --bytes must be > 0 and --repeats 1..1000\n");
    return 2;
  }
  t4a_driver *drv = NULL;
  t4a_status st = t4a_driver_open(NULL, &drv);
  if (st == T4A_DRIVER_NOT_FOUND) {
    printf("SKIP: no CUDA driver\n");
    return 77;
  }
  T4A_BENCH_CHECK(st);
  t4a_lane *lane = NULL;
  t4a_mem_pool *pool = NULL;
  t4a_retire *retire = NULL;
  t4a_xfer *x[NUM_V] = {NULL};
  T4A_BENCH_CHECK(t4a_lane_create(drv, 0, NULL, &lane));
  T4A_BENCH_CHECK(t4a_mem_pool_create(lane, NULL, &pool));
  T4A_BENCH_CHECK(t4a_retire_create(lane, NULL, &retire));
  t4a_xfer_options o = T4A_XFER_OPTIONS_INIT;
  o.copy_threads = 1;
  T4A_BENCH_CHECK(t4a_xfer_create(retire, &o, &x[V_ONE]));
  T4A_BENCH_CHECK(t4a_xfer_create(retire, &pool_options, &x[V_POOL]));
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(x[V_POOL], &xs);
  t4a_buffer *buf = NULL;
  T4A_BENCH_CHECK(t4a_buffer_create(pool, bytes, 0, 0, &buf));
  unsigned char *host = malloc(bytes), *back = malloc(bytes);
  if (host == NULL || back == NULL) return 1;
  for (size_t i = 0; i < bytes; i++) host[i] = (unsigned char)(i * 7u + (i >> 12));
  memset(back, 0, bytes); /* touched: no first-touch page faults inside a timed window */
  t4a_driver *d = t4a_lane_driver(lane);
  CUdeviceptr dptr = (CUdeviceptr)t4a_buffer_devptr(buf);

  double *t[2][NUM_V];
  for (int dir = 0; dir < 2; dir++) {
    for (int v = 0; v < NUM_V; v++) t[dir][v] = calloc((size_t)repeats, sizeof(double));
  }
  for (int r = -1; r < repeats; r++) { /* r = -1: warm-up */
    for (int dir = 0; dir < 2; dir++) {
      for (int k = 0; k < NUM_V; k++) {
        int v = (k + (r < 0 ? 0 : r)) % NUM_V;
        double t0 = t4a_bench_now();
        if (v == V_RAW) {
          t4a_ctx_scope scope;
          T4A_BENCH_CHECK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), NULL));
          CUstream s = t4a_lane_stream(lane);
          if (dir == 0) {
            T4A_BENCH_CHECK(T4A_CU(d, cuMemcpyHtoDAsync, dptr, host, bytes, s));
          } else {
            T4A_BENCH_CHECK(T4A_CU(d, cuMemcpyDtoHAsync, back, dptr, bytes, s));
          }
          T4A_BENCH_CHECK(T4A_CU(d, cuStreamSynchronize, s));
          T4A_BENCH_CHECK(t4a_ctx_scope_exit(&scope));
        } else if (dir == 0) {
          T4A_BENCH_CHECK(t4a_xfer_upload(x[v], buf, 0, host, bytes));
          T4A_BENCH_CHECK(t4a_retire_wait(retire));
        } else {
          t4a_xfer_pending *p = NULL;
          T4A_BENCH_CHECK(t4a_xfer_download(x[v], buf, 0, back, bytes, &p));
          T4A_BENCH_CHECK(t4a_xfer_pending_wait(p));
          t4a_xfer_pending_release(p);
        }
        double dt = t4a_bench_now() - t0;
        if (dir == 1 && memcmp(back, host, bytes) != 0) {
          fprintf(stderr, "xfer_bench: %s download is not byte-exact\n", k_names[v]);
          return 1;
        }
        if (r >= 0) t[dir][v][r] = dt;
      }
    }
  }
  t4a_counter_values cv;
  t4a_lane_stats(lane, &cv);
  static const char *const dirs[2] = {"upload (H2D)", "download (D2H)"};
  double med_raw[2] = {0, 0};
  if (!json) {
    printf("# %zu bytes, %d repeats (+1 warm-up), interleaved; copy pool %u threads; ring %zu MiB x %u\n",
           bytes, repeats, xs.copy_threads, t4a_xfer_chunk_bytes(x[V_POOL]) >> 20,
           t4a_xfer_num_chunks(x[V_POOL]));
    t4a_bench_gbs_header(stdout, 16, "direction");
  }
  for (int dir = 0; dir < 2; dir++) {
    for (int v = 0; v < NUM_V; v++) {
      t4a_bench_stats ts = t4a_bench_stats_of(t[dir][v], (size_t)repeats);
      if (v == V_RAW) med_raw[dir] = ts.med;
      if (json) {
        t4a_bench_gbs_json(stdout, dir ? "d2h" : "h2d", k_names[v], bytes, repeats, ts,
                           med_raw[dir]);
      } else {
        t4a_bench_gbs_row(stdout, 16, dirs[dir], k_names[v], bytes, ts, med_raw[dir]);
      }
    }
  }
  if (!json) {
    printf("# lane counters: staging waits %llu, host waits %llu, events %llu\n",
           (unsigned long long)cv.staging_waits, (unsigned long long)cv.host_waits,
           (unsigned long long)cv.events_recorded);
  }
  for (int dir = 0; dir < 2; dir++) {
    for (int v = 0; v < NUM_V; v++) free(t[dir][v]);
  }
  t4a_buffer_release(buf);
  t4a_xfer_destroy(x[V_ONE]);
  t4a_xfer_destroy(x[V_POOL]);
  T4A_BENCH_CHECK(t4a_retire_destroy(retire));
  t4a_mem_pool_release(pool);
  t4a_lane_release(lane);
  t4a_driver_release(drv);
  free(host);
  free(back);
  return 0;
}
