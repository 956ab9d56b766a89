/* Pageable transfers by size: t4a's staging paths against the raw driver's pageable
 * cuMemcpyHtoDAsync / cuMemcpyDtoHAsync, with raw pinned copies as the bus's reference, in one
 * process, interleaved, both directions, at every size of the pageable goals (issue 25 item 1).
 *
 *   xfer_bench [--sizes LIST] [--repeats R] [--json] [--json-out PATH] [--copy-threads T]
 *              [--chunks C] [--chunk-mib M] [--split-kib K] [--piece-kib P] [--fake]
 *
 * LIST: comma-separated byte counts with an optional K or M suffix (default
 * 4K,64K,1M,8M,64M,256M). R: samples per variant, size and direction (default by size: 2000 up
 * to 64 KiB, 500 up to 1 MiB, 100 up to 8 MiB, 21 up to 64 MiB, 11 above). The t4a options
 * (default: the library's defaults) are there to tune them on a machine.
 *
 * Variants, each timed from the call until the bytes are in place:
 *   raw pageable  cuMemcpyHtoDAsync / cuMemcpyDtoHAsync of the pageable memory on the lane's
 *                 stream + cuStreamSynchronize (the driver stages pageable memory itself);
 *   raw pinned    the same from / into a pinned buffer (the bus's reference; not a pageable path);
 *   t4a           t4a_xfer_upload + t4a_retire_wait; t4a_xfer_download + t4a_xfer_pending_wait.
 * For each size and direction the samples of the variants alternate, in an order rotated per
 * sample, after uncounted warm-ups (a tenth of the samples, at least one), on the same touched
 * pageable memory and device buffer; every download is checked byte-exact outside the timed
 * window. Reports min / median / max GB/s, the median time and the ratio of medians to raw
 * pageable ("x raw"), then the goal lines: >= 1.0x raw up to 8 MiB, >= 44 GB/s from 64 MiB on
 * (both directions), met or missed. --json prints one JSON object per row instead (the text on
 * stdout is then only the JSON); --json-out writes them to PATH as well as the text. Needs a GPU
 * (exits 77 without a driver). --fake runs the same code on the fake driver of the tests (a smoke
 * run: 3 samples unless --repeats, sizes up to 64 MiB unless --sizes; every transfer checked
 * byte-exact, no timing printed) and ends with "smoke: ok" when the fake saw no ordering violation
 * and nothing is left alive. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"
#define T4A_BENCH_NAME "xfer_bench"
#include "bench/harness.h"
#include "testing/fake_driver/fake_driver.h"

enum { V_RAW = 0, V_PINNED, V_T4A, NUM_V };
static const char *const k_names[NUM_V] = {"raw pageable", "raw pinned", "t4a"};
#define MAX_SIZES 16
#define GOAL_RATIO_MAX_BYTES ((size_t)8 << 20) /* >= 1.0x raw up to here */
#define GOAL_GBPS_MIN_BYTES ((size_t)64 << 20) /* >= 44 GB/s from here on */
#define GOAL_GBPS 44.0

static size_t parse_size(const char *s) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 0);
  if (end != NULL && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end != NULL && (*end == 'M' || *end == 'm')) v <<= 20;
  return (size_t)v;
}

static int default_repeats(size_t n) {
  if (n <= ((size_t)64 << 10)) return 2000;
  if (n <= ((size_t)1 << 20)) return 500;
  if (n <= ((size_t)8 << 20)) return 100;
  if (n <= ((size_t)64 << 20)) return 21;
  return 11;
}

static const char *size_name(size_t n, char *buf, size_t len) {
  if (n >= ((size_t)1 << 20) && n % ((size_t)1 << 20) == 0) {
    snprintf(buf, len, "%zu MiB", n >> 20);
  } else if (n >= 1024 && n % 1024 == 0) {
    snprintf(buf, len, "%zu KiB", n >> 10);
  } else {
    snprintf(buf, len, "%zu B", n);
  }
  return buf;
}

static void json_row(FILE *f, const char *dir, const char *variant, size_t bytes, int repeats,
                     t4a_bench_stats s, double raw_med) {
  fprintf(f,
          "{\"direction\":\"%s\",\"variant\":\"%s\",\"bytes\":%zu,\"repeats\":%d,"
          "\"min_s\":%.9g,\"median_s\":%.9g,\"max_s\":%.9g,\"median_us\":%.3f,"
          "\"median_gbps\":%.3f,\"ratio_vs_raw\":%.4f}\n",
          dir, variant, bytes, repeats, s.min, s.med, s.max, s.med * 1e6,
          (double)bytes / 1e9 / s.med, raw_med / s.med);
}

typedef struct bench {
  t4a_driver *d;
  t4a_lane *lane;
  t4a_retire *retire;
  t4a_xfer *x;
  t4a_buffer *buf;
  CUdeviceptr dptr;
  unsigned char *host, *back, *pinned;
} bench;

/* One timed sample of variant v, direction dir (0 up, 1 down), n bytes. */
static double sample(bench *b, int v, int dir, size_t n) {
  double t0 = t4a_bench_now();
  if (v == V_RAW || v == V_PINNED) {
    t4a_ctx_scope scope;
    T4A_BENCH_CHECK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(b->lane), NULL));
    CUstream s = t4a_lane_stream(b->lane);
    void *h = v == V_PINNED ? (void *)b->pinned : dir == 0 ? (void *)b->host : (void *)b->back;
    if (dir == 0) {
      T4A_BENCH_CHECK(T4A_CU(b->d, cuMemcpyHtoDAsync, b->dptr, h, n, s));
    } else {
      T4A_BENCH_CHECK(T4A_CU(b->d, cuMemcpyDtoHAsync, h, b->dptr, n, s));
    }
    T4A_BENCH_CHECK(T4A_CU(b->d, cuStreamSynchronize, s));
    T4A_BENCH_CHECK(t4a_ctx_scope_exit(&scope));
  } else if (dir == 0) {
    T4A_BENCH_CHECK(t4a_xfer_upload(b->x, b->buf, 0, b->host, n));
    T4A_BENCH_CHECK(t4a_retire_wait(b->retire));
  } else {
    t4a_xfer_pending *p = NULL;
    T4A_BENCH_CHECK(t4a_xfer_download(b->x, b->buf, 0, b->back, n, &p));
    T4A_BENCH_CHECK(t4a_xfer_pending_wait(p));
    t4a_xfer_pending_release(p);
  }
  return t4a_bench_now() - t0;
}

/* t4a's upload of n bytes checked byte-exact on its own (the timed downloads read what every
 * variant uploaded alike): a distinct pattern up through t4a, down through raw pinned. */
static int check_upload(bench *b, size_t n) {
  for (size_t i = 0; i < n; i++) b->back[i] = (unsigned char)(b->host[i] ^ 0xA5);
  T4A_BENCH_CHECK(t4a_xfer_upload(b->x, b->buf, 0, b->back, n));
  T4A_BENCH_CHECK(t4a_retire_wait(b->retire));
  memset(b->pinned, 0, n);
  (void)sample(b, V_PINNED, 1, n);
  int ok = memcmp(b->pinned, b->back, n) == 0;
  memcpy(b->pinned, b->host, n);
  memset(b->back, 0, n);
  if (!ok) fprintf(stderr, "xfer_bench: t4a upload of %zu bytes is not byte-exact\n", n);
  return ok;
}

int main(int argc, char **argv) {
  size_t sizes[MAX_SIZES] = {(size_t)4 << 10,  (size_t)64 << 10, (size_t)1 << 20,
                             (size_t)8 << 20,  (size_t)64 << 20, (size_t)256 << 20};
  int num_sizes = 6, repeats_opt = 0, json = 0, fake = 0, sizes_given = 0;
  const char *json_path = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      num_sizes = 0;
      sizes_given = 1;
      for (char *tok = strtok(argv[++i], ","); tok != NULL && num_sizes < MAX_SIZES;
           tok = strtok(NULL, ",")) {
        sizes[num_sizes++] = parse_size(tok);
      }
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats_opt = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--fake") == 0) {
      fake = 1;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--json-out") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (strcmp(argv[i], "--copy-threads") == 0 && i + 1 < argc) {
      xo.copy_threads = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc) {
      xo.num_chunks = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--chunk-mib") == 0 && i + 1 < argc) {
      xo.chunk_bytes = (size_t)atoi(argv[++i]) << 20;
    } else if (strcmp(argv[i], "--split-kib") == 0 && i + 1 < argc) {
      xo.split_copy_min_bytes = (size_t)atoi(argv[++i]) << 10;
    } else if (strcmp(argv[i], "--piece-kib") == 0 && i + 1 < argc) {
      xo.pipeline_piece_bytes = (size_t)atoi(argv[++i]) << 10;
    } else {
      fprintf(stderr, "usage: xfer_bench [--sizes LIST] [--repeats R] [--json] [--json-out PATH] "
                      "[--copy-threads T] [--chunks C] [--chunk-mib M] [--split-kib K] "
                      "[--piece-kib P] [--fake]\n");
      return 2;
    }
  }
  if (fake && !sizes_given) num_sizes = 5; /* up to 64 MiB */
  if (fake && repeats_opt == 0) repeats_opt = 3;
  if (fake) json = 0;
  size_t max_bytes = 0;
  for (int i = 0; i < num_sizes; i++) {
    if (sizes[i] == 0) {
      fprintf(stderr, "xfer_bench: sizes must be > 0\n");
      return 2;
    }
    if (sizes[i] > max_bytes) max_bytes = sizes[i];
  }
  if (num_sizes == 0 || repeats_opt < 0 || repeats_opt > 100000) {
    fprintf(stderr, "xfer_bench: give at least one size, and --repeats 1..100000\n");
    return 2;
  }
  FILE *jf = NULL;
  if (json_path != NULL && (jf = fopen(json_path, "w")) == NULL) {
    perror(json_path);
    return 2;
  }
  t4a_driver *drv = NULL;
  t4a_fake *fk = NULL;
  t4a_status st = T4A_OK;
  if (fake) {
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    fo.mem_bytes = (uint64_t)max_bytes + ((uint64_t)64 << 20);
    st = t4a_fake_create(&fo, &fk);
    if (st == T4A_OK) st = t4a_fake_driver(fk, &drv);
  } else {
    st = t4a_driver_open(NULL, &drv);
  }
  if (st == T4A_DRIVER_NOT_FOUND) {
    printf("SKIP: no CUDA driver\n");
    return 77;
  }
  T4A_BENCH_CHECK(st);
  bench b = {0};
  t4a_mem_pool *pool = NULL;
  t4a_pinned *pin = NULL;
  T4A_BENCH_CHECK(t4a_lane_create(drv, 0, NULL, &b.lane));
  T4A_BENCH_CHECK(t4a_mem_pool_create(b.lane, NULL, &pool));
  T4A_BENCH_CHECK(t4a_retire_create(b.lane, NULL, &b.retire));
  T4A_BENCH_CHECK(t4a_xfer_create(b.retire, &xo, &b.x));
  T4A_BENCH_CHECK(t4a_buffer_create(pool, max_bytes, 0, 0, &b.buf));
  T4A_BENCH_CHECK(t4a_pinned_create(t4a_lane_holder(b.lane), max_bytes, 0, &pin));
  b.d = t4a_lane_driver(b.lane);
  b.dptr = (CUdeviceptr)t4a_buffer_devptr(b.buf);
  b.pinned = t4a_pinned_host(pin);
  b.host = malloc(max_bytes);
  b.back = malloc(max_bytes);
  if (b.host == NULL || b.back == NULL) return 1;
  for (size_t i = 0; i < max_bytes; i++) b.host[i] = (unsigned char)(i * 7u + (i >> 12));
  memset(b.back, 0, max_bytes); /* touched: no first-touch page faults inside a timed window */
  memcpy(b.pinned, b.host, max_bytes);

  struct t4a_xfer_stats xs;
  t4a_xfer_stats(b.x, &xs);
  if (!json && !fake) {
    printf("# pageable transfers by size, interleaved (raw pageable, raw pinned, t4a); t4a: %u copy "
           "threads, ring %zu MiB x %u (made %u), split copies from %zu KiB, pieces of %zu KiB\n",
           xs.copy_threads, t4a_xfer_chunk_bytes(b.x) >> 20, t4a_xfer_num_chunks(b.x),
           xs.ring_chunks,
           (xo.split_copy_min_bytes ? xo.split_copy_min_bytes : T4A_XFER_DEFAULT_SPLIT_COPY_MIN) >> 10,
           (xo.pipeline_piece_bytes ? xo.pipeline_piece_bytes : T4A_XFER_DEFAULT_PIPELINE_PIECE) >> 10);
    t4a_bench_gbs_header(stdout, 18, "direction size");
  }
  double med[MAX_SIZES][2][NUM_V];
  int met_all = 1;
  for (int si = 0; si < num_sizes; si++) {
    size_t n = sizes[si];
    int repeats = repeats_opt > 0 ? repeats_opt : default_repeats(n);
    int warm = repeats / 10 > 0 ? repeats / 10 : 1;
    if (!check_upload(&b, n)) return 1;
    double *t[2][NUM_V];
    for (int dir = 0; dir < 2; dir++) {
      for (int v = 0; v < NUM_V; v++) t[dir][v] = calloc((size_t)repeats, sizeof(double));
    }
    for (int dir = 0; dir < 2; dir++) {
      for (int r = -warm; r < repeats; r++) {
        for (int k = 0; k < NUM_V; k++) {
          int v = (k + (r < 0 ? 0 : r)) % NUM_V;
          if (dir == 1) { /* a stale result cannot pass */
            memset(v == V_PINNED ? b.pinned : b.back, 0, n < 64 ? n : 64);
          }
          double dt = sample(&b, v, dir, n);
          if (dir == 1 && memcmp(v == V_PINNED ? b.pinned : b.back, b.host, n) != 0) {
            fprintf(stderr, "xfer_bench: %s download of %zu bytes is not byte-exact\n", k_names[v],
                    n);
            return 1;
          }
          if (r >= 0) t[dir][v][r] = dt;
        }
      }
    }
    char nm[32], label[48];
    size_name(n, nm, sizeof nm);
    for (int dir = 0; dir < 2; dir++) {
      t4a_bench_stats ts[NUM_V];
      for (int v = 0; v < NUM_V; v++) {
        ts[v] = t4a_bench_stats_of(t[dir][v], (size_t)repeats);
        med[si][dir][v] = ts[v].med;
      }
      for (int v = 0; v < NUM_V; v++) {
        const char *d = dir ? "d2h" : "h2d";
        if (json) json_row(stdout, d, k_names[v], n, repeats, ts[v], ts[V_RAW].med);
        if (jf != NULL) json_row(jf, d, k_names[v], n, repeats, ts[v], ts[V_RAW].med);
        if (!json && !fake) {
          snprintf(label, sizeof label, "%s %s", dir ? "down" : "up", nm);
          t4a_bench_gbs_row(stdout, 18, label, k_names[v], n, ts[v], ts[V_RAW].med);
        }
      }
    }
    for (int dir = 0; dir < 2; dir++) {
      for (int v = 0; v < NUM_V; v++) free(t[dir][v]);
    }
  }
  t4a_counter_values cv;
  t4a_lane_stats(b.lane, &cv);
  t4a_xfer_stats(b.x, &xs);
  if (fake) {
    printf("smoke: %d sizes both ways, every transfer byte-exact; t4a: %u copy threads, ring made "
           "%u of %u, most chunks in flight %u, split copies %llu, single copies %llu, pipelined "
           "pieces %llu\n",
           num_sizes, xs.copy_threads, xs.ring_chunks, t4a_xfer_num_chunks(b.x),
           xs.max_chunks_in_flight, (unsigned long long)xs.parallel_copies,
           (unsigned long long)xs.single_copies, (unsigned long long)xs.pipelined_pieces);
  } else if (!json) {
    printf("# goals (issue 25 item 1): >= 1.0x raw pageable up to 8 MiB, >= %.0f GB/s from 64 MiB "
           "on, both directions\n", GOAL_GBPS);
    for (int si = 0; si < num_sizes; si++) {
      size_t n = sizes[si];
      char nm[32];
      size_name(n, nm, sizeof nm);
      for (int dir = 0; dir < 2; dir++) {
        double t4a = med[si][dir][V_T4A], raw = med[si][dir][V_RAW];
        double gbps = (double)n / 1e9 / t4a, pinned_gbps = (double)n / 1e9 / med[si][dir][V_PINNED];
        int ratio_goal = n <= GOAL_RATIO_MAX_BYTES, gbps_goal = n >= GOAL_GBPS_MIN_BYTES;
        int met = (!ratio_goal || raw / t4a >= 1.0) && (!gbps_goal || gbps >= GOAL_GBPS);
        if (ratio_goal || gbps_goal) met_all &= met;
        printf("goal %-4s %-8s t4a %10.2f us (%6.2f GB/s, %.2fx pinned)  raw %10.2f us  %.3fx raw  "
               "%s\n", dir ? "down" : "up", nm, t4a * 1e6, gbps, gbps / pinned_gbps, raw * 1e6,
               raw / t4a, !ratio_goal && !gbps_goal ? "(no goal)" : met ? "met" : "MISSED");
      }
    }
    printf("# t4a: ring made %u of %u, most chunks in flight %u, grow failures %llu; split copies "
           "%llu, single copies %llu, pipelined pieces %llu; lane: staging waits %llu, host waits "
           "%llu, events %llu\n",
           xs.ring_chunks, t4a_xfer_num_chunks(b.x), xs.max_chunks_in_flight,
           (unsigned long long)xs.ring_grow_failures, (unsigned long long)xs.parallel_copies,
           (unsigned long long)xs.single_copies, (unsigned long long)xs.pipelined_pieces,
           (unsigned long long)cv.staging_waits, (unsigned long long)cv.host_waits,
           (unsigned long long)cv.events_recorded);
    printf("# pageable goals: %s\n", met_all ? "all met" : "some MISSED");
  }
  if (jf != NULL) fclose(jf);
  t4a_pinned_release(pin);
  t4a_buffer_release(b.buf);
  t4a_xfer_destroy(b.x);
  T4A_BENCH_CHECK(t4a_retire_wait(b.retire)); /* the epochs' keepalives (the buffer) go */
  T4A_BENCH_CHECK(t4a_retire_destroy(b.retire));
  t4a_mem_pool_release(pool);
  { /* the buffer's stream-ordered free runs (the fake counts it live until then) */
    t4a_ctx_scope scope;
    T4A_BENCH_CHECK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(b.lane), NULL));
    T4A_BENCH_CHECK(T4A_CU(b.d, cuStreamSynchronize, t4a_lane_stream(b.lane)));
    T4A_BENCH_CHECK(t4a_ctx_scope_exit(&scope));
  }
  t4a_lane_release(b.lane);
  t4a_driver_release(drv);
  free(b.host);
  free(b.back);
  if (fk != NULL) {
    uint64_t violations = t4a_fake_ordering_violations(fk);
    int clean = t4a_fake_nothing_live(fk);
    t4a_fake_destroy(fk);
    if (violations != 0 || !clean) {
      fprintf(stderr, "xfer_bench --fake: %llu ordering violations, %s\n",
              (unsigned long long)violations, clean ? "nothing left" : "objects left alive");
      return 1;
    }
    printf("smoke: ok (fake driver: no ordering violation, nothing left alive)\n");
  }
  return 0;
}
