/* Copy/compute overlap with two streams of one runtime (issue 22): a pageable upload on stream 2
 * beside a kernel of about the same length on stream 1, then a kernel on stream 1 that waits for
 * the upload (t4a_stream_wait: an event record and a stream wait, no host wait).
 *
 *   overlap_bench [--mib M] [--repeats R] [--json | --json-file PATH] [--fake]
 *
 * Variants, interleaved in one process (each repeat runs all four, in an order rotated by the
 * repeat number; one warm-up repeat not counted), each timed until its work completed (times
 * completion, not submission):
 *   upload   t4a_runtime_upload_on(stream 2) of M MiB (default 256) of pageable memory, then
 *            t4a_stream_sync(stream 2);
 *   kernel   slow_fill on stream 1, spinning so that it lasts about as long as the upload (its
 *            spin calibrated once against the upload's median beforehand), then a sync;
 *   serial   kernel, sync, upload, sync, add_one over the uploaded words, sync;
 *   overlap  kernel on stream 1, upload on stream 2, stream 1 waits for stream 2, add_one on
 *            stream 1, one sync.
 * Prints the medians, overlap / max(upload, kernel) (the goal: <= 1.15) and overlap / serial;
 * checks the uploaded words (+1) after the last repeat. --json (instead of the text) and
 * --json-file PATH (beside it) write JSON lines in t4a_bench's shape: a header
 * {"bench":"overlap_bench",...}, one row per variant (upload, kernel, serial, overlap: "window":
 * "done", "t4a" {min, median, max} us) and the rows overlap_vs_longer and overlap_vs_serial
 * ("ratio"; bench/goals.tsv, scripts/check_goals.py); with --fake the rows say "smoke" instead.
 * The kernels are compiled with NVRTC through the runtime. Needs a GPU (exits 77 without a
 * driver). --fake runs the same code on the fake driver of the tests with the kernels' host twins
 * (a smoke run: 8 MiB unless --mib, the figures mean nothing and say so). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#define T4A_BENCH_NAME "overlap_bench"
#include "bench/harness.h"

static const char k_src[] =
    "extern \"C\" __global__ void slow_fill(unsigned *p, unsigned n, unsigned v,\n"
    "                                       unsigned long long spin) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  unsigned long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) { }\n"
    "  p[i] = v + i;\n"
    "}\n"
    "extern \"C\" __global__ void add_one(unsigned *p, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += 1u;\n"
    "}\n";

/* --fake: the two kernels on the host (as t4a_bench's empty kernel: the fake runs them). */
static void host_slow_fill(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  unsigned n = *(unsigned *)params[1], v = *(unsigned *)params[2];
  unsigned *w = t4a_fake_deref_write(l, *(CUdeviceptr *)params[0], (size_t)n * 4);
  if (w != NULL) {
    for (unsigned i = 0; i < n; i++) w[i] = v + i;
  }
}
static void host_add_one(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  unsigned n = *(unsigned *)params[1];
  unsigned *w = t4a_fake_deref_write(l, *(CUdeviceptr *)params[0], (size_t)n * 4);
  if (w != NULL) {
    for (unsigned i = 0; i < n; i++) w[i] += 1u;
  }
}

enum { V_UPLOAD = 0, V_KERNEL, V_SERIAL, V_OVERLAP, NUM_V };
static const char *const k_names[NUM_V] = {"upload (stream 2)", "kernel (stream 1)",
                                           "serial", "overlap"};
static const char *const k_rows[NUM_V] = {"upload", "kernel", "serial", "overlap"};

/* One JSON row of a variant's times (us), or a smoke row on the fake. */
static void json_variant(FILE *f, int fake, const char *name, const char *what, int repeats,
                         t4a_bench_stats s) {
  if (fake) {
    fprintf(f, "{\"name\":\"%s\",\"smoke\":\"ok\",\"window\":\"done\",\"what\":\"%s\"}\n",
            name, what);
    return;
  }
  fprintf(f,
          "{\"name\":\"%s\",\"group\":\"overlap\",\"window\":\"done\",\"what\":\"%s\","
          "\"samples\":%d,\"unit\":\"us\",\"t4a\":{\"min\":%.3f,\"median\":%.3f,\"max\":%.3f}}\n",
          name, what, repeats, s.min * 1e6, s.med * 1e6, s.max * 1e6);
}

/* A ratio row of the medians (the goal's form), or a smoke row on the fake. */
static void json_ratio(FILE *f, int fake, const char *name, const char *what, double ratio) {
  if (fake) {
    fprintf(f, "{\"name\":\"%s\",\"smoke\":\"ok\",\"window\":\"done\",\"what\":\"%s\"}\n",
            name, what);
    return;
  }
  fprintf(f,
          "{\"name\":\"%s\",\"group\":\"overlap\",\"window\":\"done\",\"what\":\"%s\","
          "\"ratio\":%.4f}\n",
          name, what, ratio);
}

typedef struct bench {
  t4a_runtime *rt;
  t4a_stream *s2;
  t4a_function *slow, *add;
  t4a_buffer *dst, *fill;
  unsigned *host;
  size_t bytes;
  unsigned words, fill_n;
  unsigned long long spin;
} bench;

static void kernel(bench *b) {
  unsigned v = 7;
  t4a_arg a[4] = {t4a_arg_buffer(b->fill, 0), t4a_arg_scalar(&b->fill_n, 4),
                  t4a_arg_scalar(&v, 4), t4a_arg_scalar(&b->spin, 8)};
  T4A_BENCH_CHECK(t4a_runtime_launch(b->rt, b->slow, (b->fill_n + 255) / 256, 256, a, 4));
}
static void add_one(bench *b) {
  t4a_arg a[2] = {t4a_arg_buffer(b->dst, 0), t4a_arg_scalar(&b->words, 4)};
  T4A_BENCH_CHECK(t4a_runtime_launch(b->rt, b->add, (b->words + 255) / 256, 256, a, 2));
}
static void upload(bench *b) {
  T4A_BENCH_CHECK(t4a_runtime_upload_on(b->rt, b->s2, b->dst, 0, b->host, b->bytes));
}

static double run(bench *b, int v) {
  double t0 = t4a_bench_now();
  switch (v) {
    case V_UPLOAD:
      upload(b);
      T4A_BENCH_CHECK(t4a_stream_sync(b->rt, b->s2));
      break;
    case V_KERNEL:
      kernel(b);
      T4A_BENCH_CHECK(t4a_runtime_sync(b->rt));
      break;
    case V_SERIAL:
      kernel(b);
      T4A_BENCH_CHECK(t4a_runtime_sync(b->rt));
      upload(b);
      T4A_BENCH_CHECK(t4a_stream_sync(b->rt, b->s2));
      add_one(b);
      T4A_BENCH_CHECK(t4a_runtime_sync(b->rt));
      break;
    default:
      kernel(b);
      upload(b);
      T4A_BENCH_CHECK(t4a_stream_wait(b->rt, NULL, b->s2));
      add_one(b);
      T4A_BENCH_CHECK(t4a_runtime_sync(b->rt));
      T4A_BENCH_CHECK(t4a_stream_sync(b->rt, b->s2)); /* nothing left: releases its epoch */
      break;
  }
  return t4a_bench_now() - t0;
}

static double median_of(bench *b, int v, int n) {
  double s[16];
  for (int i = 0; i < n; i++) s[i] = run(b, v);
  return t4a_bench_stats_of(s, (size_t)n).med;
}

int main(int argc, char **argv) {
  size_t mib = 0;
  int repeats = 9, json = 0, fake = 0;
  const char *json_file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
      mib = (size_t)strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) {
      json_file = argv[++i];
    } else if (strcmp(argv[i], "--fake") == 0) {
      fake = 1;
    } else {
      fprintf(stderr, "usage: overlap_bench [--mib M] [--repeats R] [--json | --json-file PATH] "
                      "[--fake]\n");
      return 2;
    }
  }
  if (json && json_file != NULL) {
    fprintf(stderr, "overlap_bench: --json and --json-file exclude each other\n");
    return 2;
  }
  if (mib == 0) mib = fake ? 8 : 256;
  if (mib > 16384 || repeats < 1 || repeats > 1000) {
    fprintf(stderr, "overlap_bench: --mib must be 1..16384 and --repeats 1..1000\n");
    return 2;
  }
  t4a_driver *drv = NULL;
  t4a_fake *fk = NULL;
  t4a_status st = T4A_OK;
  if (fake) {
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    fo.mem_bytes = (uint64_t)(mib * 4 + 64) << 20;
    st = t4a_fake_create(&fo, &fk);
    if (st == T4A_OK) st = t4a_fake_driver(fk, &drv);
    if (st == T4A_OK) {
      static const size_t fill_sizes[4] = {8, 4, 4, 8}, add_sizes[2] = {8, 4};
      t4a_fake_register_kernel(fk, "slow_fill", 4, fill_sizes, host_slow_fill, NULL);
      t4a_fake_register_kernel(fk, "add_one", 2, add_sizes, host_add_one, NULL);
    }
  } else {
    st = t4a_driver_open(NULL, &drv);
  }
  if (st == T4A_DRIVER_NOT_FOUND) {
    printf("SKIP: no CUDA driver\n");
    return 77;
  }
  T4A_BENCH_CHECK(st);
  bench b;
  memset(&b, 0, sizeof b);
  b.bytes = mib << 20;
  b.words = (unsigned)(b.bytes / 4);
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = drv;
  T4A_BENCH_CHECK(t4a_runtime_open(0, &o, &b.rt));
  T4A_BENCH_CHECK(t4a_stream_create(b.rt, NULL, &b.s2));
  T4A_BENCH_CHECK(t4a_runtime_kernel(b.rt, k_src, "slow_fill", &b.slow));
  T4A_BENCH_CHECK(t4a_runtime_kernel(b.rt, k_src, "add_one", &b.add));
  t4a_device_info info;
  T4A_BENCH_CHECK(t4a_device_query(drv, 0, &info));
  b.fill_n = (unsigned)info.sm_count * 2048u; /* one full wave of spinning threads */
  T4A_BENCH_CHECK(t4a_runtime_buffer(b.rt, b.bytes, &b.dst));
  T4A_BENCH_CHECK(t4a_runtime_buffer(b.rt, (size_t)b.fill_n * 4, &b.fill));
  b.host = malloc(b.bytes);
  if (b.host == NULL) return 1;
  for (unsigned i = 0; i < b.words; i++) b.host[i] = i * 2654435761u;
  /* The kernel's length: calibrated once against the upload's median. */
  (void)run(&b, V_UPLOAD);
  double up = median_of(&b, V_UPLOAD, 3);
  b.spin = 1000000ull;
  (void)run(&b, V_KERNEL);
  double k0 = median_of(&b, V_KERNEL, 3);
  b.spin = (unsigned long long)((double)b.spin * up / (k0 > 0 ? k0 : 1e-6));
  if (b.spin == 0) b.spin = 1;

  double *t[NUM_V];
  for (int v = 0; v < NUM_V; v++) t[v] = calloc((size_t)repeats, sizeof(double));
  for (int r = -1; r < repeats; r++) {
    for (int k = 0; k < NUM_V; k++) {
      int v = (k + (r < 0 ? 0 : r)) % NUM_V;
      double dt = run(&b, v);
      if (r >= 0) t[v][r] = dt;
    }
  }
  /* The last variant's upload and add_one: every word + 1 (serial and overlap both end so). */
  (void)run(&b, V_OVERLAP);
  unsigned *back = malloc(b.bytes);
  if (back == NULL) return 1;
  T4A_BENCH_CHECK(t4a_runtime_download(b.rt, b.dst, 0, back, b.bytes));
  for (unsigned i = 0; i < b.words; i++) {
    if (back[i] != b.host[i] + 1u) {
      fprintf(stderr, "overlap_bench: word %u is %u, expected %u\n", i, back[i], b.host[i] + 1u);
      return 1;
    }
  }
  t4a_bench_stats s[NUM_V];
  for (int v = 0; v < NUM_V; v++) s[v] = t4a_bench_stats_of(t[v], (size_t)repeats);
  double longer = s[V_UPLOAD].med > s[V_KERNEL].med ? s[V_UPLOAD].med : s[V_KERNEL].med;
  t4a_counter_values c1, c2;
  t4a_lane_stats(t4a_runtime_lane(b.rt), &c1);
  t4a_lane_stats(t4a_stream_lane(b.s2), &c2);
  FILE *jf = json ? stdout : NULL;
  if (json_file != NULL && (jf = fopen(json_file, "w")) == NULL) {
    perror(json_file);
    return 1;
  }
  if (jf != NULL) {
    char date[32];
    t4a_bench_utc_date(date, sizeof date);
    fprintf(jf,
            "{\"bench\":\"overlap_bench\",\"mode\":\"%s\",\"device\":\"%s\",\"cpus\":%ld,"
            "\"t4a\":\"%s\",\"date\":\"%s\",\"times\":\"completion\",\"bytes\":%zu,"
            "\"repeats\":%d,\"spin_cycles\":%llu,\"fill_threads\":%u,"
            "\"counters\":{\"stream1_cross_stream_waits\":%llu,\"stream1_host_waits\":%llu,"
            "\"stream2_cross_stream_events\":%llu,\"stream2_staging_waits\":%llu}}\n",
            fake ? "fake-smoke" : "gpu", info.name, sysconf(_SC_NPROCESSORS_ONLN),
            t4a_version_string(), date, b.bytes, repeats, b.spin, b.fill_n,
            (unsigned long long)c1.cross_stream_waits, (unsigned long long)c1.host_waits,
            (unsigned long long)c2.cross_stream_events, (unsigned long long)c2.staging_waits);
    static const char *const what[NUM_V] = {
        "t4a_runtime_upload_on(stream 2) of pageable memory, then t4a_stream_sync",
        "slow_fill on stream 1 (spin calibrated to the upload's length), then a sync",
        "kernel, sync, upload, sync, add_one, sync",
        "kernel on stream 1, upload on stream 2, stream 1 waits for stream 2, add_one, one sync"};
    for (int v = 0; v < NUM_V; v++) json_variant(jf, fake, k_rows[v], what[v], repeats, s[v]);
    json_ratio(jf, fake, "overlap_vs_longer",
               "overlap's median over the longer of the upload's and the kernel's medians",
               s[V_OVERLAP].med / longer);
    json_ratio(jf, fake, "overlap_vs_serial", "overlap's median over serial's median",
               s[V_OVERLAP].med / s[V_SERIAL].med);
    fflush(jf);
    if (jf != stdout && (ferror(jf) || fclose(jf) != 0)) {
      fprintf(stderr, "overlap_bench: writing %s failed\n", json_file);
      return 1;
    }
  }
  if (!json) {
    char m[3][32];
    if (fake) printf("# FAKE DRIVER: a smoke run; the times below mean nothing\n");
    printf("# %zu MiB pageable upload on stream 2 vs slow_fill on stream 1 (spin %llu cycles, "
           "%u threads), %d repeats (+1 warm-up), interleaved; times until completion\n",
           mib, b.spin, b.fill_n, repeats);
    printf("%-20s %12s %12s %12s\n", "variant", "min ms", "median ms", "max ms");
    for (int v = 0; v < NUM_V; v++) {
      printf("%-20s %12s %12s %12s\n", k_names[v], t4a_bench_fmt_us(s[v].min * 1e3, m[0], 32),
             t4a_bench_fmt_us(s[v].med * 1e3, m[1], 32), t4a_bench_fmt_us(s[v].max * 1e3, m[2], 32));
    }
    printf("overlap / longer of the two: %.3f (goal <= 1.15); overlap / serial: %.3f\n",
           s[V_OVERLAP].med / longer, s[V_OVERLAP].med / s[V_SERIAL].med);
    printf("# counters: stream 1 cross_stream_waits %llu, host_waits %llu; stream 2 "
           "cross_stream_events %llu, staging_waits %llu\n",
           (unsigned long long)c1.cross_stream_waits, (unsigned long long)c1.host_waits,
           (unsigned long long)c2.cross_stream_events, (unsigned long long)c2.staging_waits);
  }
  for (int v = 0; v < NUM_V; v++) free(t[v]);
  free(back);
  free(b.host);
  t4a_buffer_release(b.dst);
  t4a_buffer_release(b.fill);
  t4a_function_release(b.slow);
  t4a_function_release(b.add);
  T4A_BENCH_CHECK(t4a_stream_destroy(b.rt, b.s2));
  T4A_BENCH_CHECK(t4a_runtime_close(b.rt));
  t4a_driver_release(drv);
  if (fk != NULL) {
    uint64_t violations = t4a_fake_ordering_violations(fk);
    int clean = t4a_fake_nothing_live(fk);
    t4a_fake_destroy(fk);
    if (violations != 0 || !clean) {
      fprintf(stderr, "overlap_bench --fake: %llu ordering violations, %s\n",
              (unsigned long long)violations, clean ? "nothing left" : "objects left alive");
      return 1;
    }
    /* With --json stdout holds the JSON lines alone. */
    fprintf(json ? stderr : stdout, "smoke: ok (fake driver: no ordering violation, nothing left "
                                    "alive)\n");
  }
  return 0;
}
