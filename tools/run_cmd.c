/* `t4a stats` and `t4a bench`: see run_cmd.h. */
#define _POSIX_C_SOURCE 200809L
#include "tools/run_cmd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "tools/progress.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define ELEMS (1 << 18) /* 1 MiB of int */

static const char k_source[] =
    "extern \"C\" __global__ void add1(int *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1;\n"
    "}\n";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* add1 on the fake driver: the same arithmetic on the host, once per launch. */
static void host_add1(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr ptr = *(const CUdeviceptr *)params[0];
  int n = *(const int *)params[1];
  if (n <= 0) return;
  int *x = t4a_fake_deref(l, ptr, (size_t)n * sizeof(int));
  if (x == NULL) return;
  for (int i = 0; i < n; i++) x[i] += 1;
}

typedef struct session {
  const char *cmd; /* "stats" or "bench", for messages */
  t4a_fake *fake;
  t4a_driver *drv;
  t4a_runtime *rt;
  t4a_function *fn;
  t4a_buffer *buf;
  int *host; /* ELEMS ints */
} session;

static int failed(const session *s, const char *what) {
  t4a_error e;
  char msg[600];
  t4a_error_last(&e);
  fprintf(stderr, "t4a %s: %s: %s\n", s->cmd, what, t4a_error_format(&e, msg, sizeof msg));
  return 0;
}

/* The driver (real, or the fake where none loads or when asked), the runtime, add1 and a
 * buffer of ELEMS ints uploaded as zeros. Returns 1, or 0 after printing why. */
static int session_open(session *s, int force_fake) {
  t4a_status st = T4A_DRIVER_NOT_FOUND;
  if (!force_fake) {
    st = t4a_driver_get_default(&s->drv);
    if (st != T4A_OK && st != T4A_DRIVER_NOT_FOUND && st != T4A_NO_DEVICE) {
      return failed(s, "the CUDA driver");
    }
  }
  if (st != T4A_OK) {
    fprintf(stderr, "t4a %s: %s: on the fake driver (host kernels; NVRTC compiles for real)\n",
            s->cmd, force_fake ? "--fake" : "no CUDA driver here");
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    if (t4a_fake_create(&fo, &s->fake) != T4A_OK || t4a_fake_driver(s->fake, &s->drv) != T4A_OK) {
      return failed(s, "the fake driver");
    }
    static const size_t params[2] = {8, 4};
    t4a_fake_register_kernel(s->fake, "add1", 2, params, host_add1, NULL);
  }
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = s->drv;
  if (t4a_runtime_open(0, &o, &s->rt) != T4A_OK) return failed(s, "t4a_runtime_open");
  if (t4a_runtime_kernel(s->rt, k_source, "add1", &s->fn) != T4A_OK) {
    return failed(s, "t4a_runtime_kernel");
  }
  s->host = calloc(ELEMS, sizeof(int));
  if (s->host == NULL) {
    fprintf(stderr, "t4a %s: out of memory\n", s->cmd);
    return 0;
  }
  if (t4a_runtime_buffer(s->rt, ELEMS * sizeof(int), &s->buf) != T4A_OK) {
    return failed(s, "t4a_runtime_buffer");
  }
  if (t4a_runtime_upload(s->rt, s->buf, 0, s->host, ELEMS * sizeof(int)) != T4A_OK) {
    return failed(s, "t4a_runtime_upload");
  }
  return 1;
}

static int launch_add1(session *s) {
  int n = ELEMS;
  t4a_arg args[2] = {t4a_arg_buffer(s->buf, 0), t4a_arg_scalar(&n, sizeof n)};
  if (t4a_runtime_launch(s->rt, s->fn, (ELEMS + 255) / 256, 256, args, 2) != T4A_OK) {
    return failed(s, "t4a_runtime_launch");
  }
  return 1;
}

/* Downloads the buffer and checks every element is `want`. */
static int check(session *s, int want) {
  if (t4a_runtime_download(s->rt, s->buf, 0, s->host, ELEMS * sizeof(int)) != T4A_OK) {
    return failed(s, "t4a_runtime_download");
  }
  for (int i = 0; i < ELEMS; i++) {
    if (s->host[i] != want) {
      fprintf(stderr, "t4a %s: wrong result: x[%d] = %d, expected %d\n", s->cmd, i, s->host[i],
              want);
      return 0;
    }
  }
  return 1;
}

/* Releases everything. Returns 1 when the runtime closed after a proved drain (and, on the fake,
 * nothing was left alive and no stream-ordering violation was seen). */
static int session_close(session *s) {
  int ok = 1;
  t4a_buffer_release(s->buf);
  t4a_function_release(s->fn);
  if (s->rt != NULL && t4a_runtime_close(s->rt) != T4A_OK) ok = failed(s, "t4a_runtime_close");
  t4a_driver_release(s->drv);
  if (s->fake != NULL) {
    (void)t4a_fake_table(s->fake)->cuCtxSetCurrent(NULL);
    t4a_fake_progress(s->fake);
    if (!t4a_fake_nothing_live(s->fake) || t4a_fake_ordering_violations(s->fake) != 0) {
      fprintf(stderr, "t4a %s: the fake driver saw objects left alive or misordered work\n",
              s->cmd);
      ok = 0;
    }
    t4a_fake_destroy(s->fake);
  }
  free(s->host);
  return ok;
}

/* Parses "--name VALUE" as a count in [1, max]; returns 0 on a bad value (printed). */
static int parse_count(const char *cmd, const char *name, const char *value, unsigned long max,
                       unsigned long *out) {
  char *end = NULL;
  unsigned long v = value != NULL ? strtoul(value, &end, 10) : 0;
  if (value == NULL || end == value || *end != '\0' || v < 1 || v > max) {
    fprintf(stderr, "t4a %s: %s takes 1..%lu\n", cmd, name, max);
    return 0;
  }
  *out = v;
  return 1;
}

/* ---- t4a stats ---------------------------------------------------------------------------- */

void t4a_cmd_stats_usage(FILE *f) {
  fprintf(f,
          "usage: t4a stats [--fake] [--n N]\n"
          "  Opens a runtime on device 0, compiles and loads a kernel (add1) with NVRTC, runs N\n"
          "  checked launches of it over 1 MiB (default N = 100), downloads and checks the\n"
          "  result, and prints the runtime's counters as JSON (t4a_runtime_stats_json) on\n"
          "  stdout -- only the JSON goes there; notes go to stderr.\n"
          "  --fake   the fake driver of the tests (host kernels) even with a GPU; it is used\n"
          "           anyway when no CUDA driver loads\n"
          "  --n N    launches, 1..1000000\n"
          "  Exit: 0 the JSON was printed, 1 a step failed or the result was wrong (stderr says\n"
          "  which), 2 bad usage.\n");
}

int t4a_cmd_stats(int argc, char **argv) {
  int fake = 0;
  unsigned long n = 100;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--fake") == 0) {
      fake = 1;
    } else if (strcmp(argv[i], "--n") == 0) {
      if (!parse_count("stats", "--n", i + 1 < argc ? argv[++i] : NULL, 1000000, &n)) {
        return EXIT_USAGE;
      }
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      t4a_cmd_stats_usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "t4a stats: unknown option %s\n", argv[i]);
      t4a_cmd_stats_usage(stderr);
      return EXIT_USAGE;
    }
  }
  session s = {.cmd = "stats"};
  int ok = session_open(&s, fake);
  for (unsigned long i = 0; ok && i < n; i++) ok = launch_add1(&s);
  ok = ok && check(&s, (int)n);
  char *json = NULL;
  if (ok) {
    size_t need = 0;
    t4a_status ask = t4a_runtime_stats_json(s.rt, NULL, 0, &need); /* LIMIT_EXCEEDED: the size */
    (void)ask;
    need += 1024; /* room for counters that grow */
    json = malloc(need);
    if (json == NULL || t4a_runtime_stats_json(s.rt, json, need, NULL) != T4A_OK) {
      ok = json == NULL ? (fprintf(stderr, "t4a stats: out of memory\n"), 0)
                        : failed(&s, "t4a_runtime_stats_json");
    }
  }
  ok = session_close(&s) && ok;
  if (ok) fputs(json, stdout);
  free(json);
  return ok ? 0 : EXIT_FAILED;
}

/* ---- t4a bench ---------------------------------------------------------------------------- */

void t4a_cmd_bench_usage(FILE *f) {
  fprintf(f,
          "usage: t4a bench [--fake] [--rounds R] [--n N]\n"
          "  A short in-process benchmark of the runtime facade on device 0: R rounds (default\n"
          "  20) each of a compile that hits the artifact cache, N checked launches (default\n"
          "  1000; host submission time per launch, synchronised after each round) and a 1 MiB\n"
          "  upload + download round trip. Prints min / median / max per operation and the\n"
          "  runtime's counters; the result of every launch is checked at the end. Progress\n"
          "  lines go to stderr every second (T4A_PROGRESS_MS=N: every N ms, 0: none). The\n"
          "  paired comparison with the raw driver is bench/t4a_bench (docs/performance.md).\n"
          "  --fake       the fake driver of the tests even with a GPU (used anyway when no CUDA\n"
          "               driver loads): its timings are of the fake's host code\n"
          "  --rounds R   1..10000      --n N   launches per round, 1..1000000\n"
          "  Exit: 0 done and verified, 1 a step failed or a result was wrong, 2 bad usage.\n");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(const char *what, double *per_op_s, unsigned long rounds) {
  qsort(per_op_s, rounds, sizeof *per_op_s, cmp_double);
  printf("  %-34s %10.2f %10.2f %10.2f\n", what, per_op_s[0] * 1e6, per_op_s[rounds / 2] * 1e6,
         per_op_s[rounds - 1] * 1e6);
}

int t4a_cmd_bench(int argc, char **argv) {
  int fake = 0;
  unsigned long rounds = 20, n = 1000;
  for (int i = 0; i < argc; i++) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--fake") == 0) {
      fake = 1;
    } else if (strcmp(argv[i], "--rounds") == 0) {
      if (!parse_count("bench", "--rounds", next, 10000, &rounds)) return EXIT_USAGE;
      i++;
    } else if (strcmp(argv[i], "--n") == 0) {
      if (!parse_count("bench", "--n", next, 1000000, &n)) return EXIT_USAGE;
      i++;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      t4a_cmd_bench_usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "t4a bench: unknown option %s\n", argv[i]);
      t4a_cmd_bench_usage(stderr);
      return EXIT_USAGE;
    }
  }
  double *compile_s = calloc(rounds, sizeof(double));
  double *launch_s = calloc(rounds, sizeof(double));
  double *trip_s = calloc(rounds, sizeof(double));
  session s = {.cmd = "bench"};
  int ok = compile_s != NULL && launch_s != NULL && trip_s != NULL;
  if (!ok) fprintf(stderr, "t4a bench: out of memory\n");
  ok = ok && session_open(&s, fake);
  if (ok) { /* the first compile of this request runs NVRTC: untimed, so the rounds are hits */
    t4a_nvrtc_artifact *art = NULL;
    ok = t4a_runtime_compile(s.rt, k_source, "add1.cu", &art) == T4A_OK ||
         failed(&s, "t4a_runtime_compile");
    t4a_nvrtc_artifact_release(art);
  }
  tool_progress p;
  (void)tool_progress_start(&p, stderr, tool_progress_interval(), "bench compile (cache hit)",
                            rounds);
  for (unsigned long r = 0; ok && r < rounds; r++) {
    tool_progress_set(&p, "bench compile (cache hit)", r, rounds);
    t4a_nvrtc_artifact *art = NULL;
    double t0 = now_s();
    ok = t4a_runtime_compile(s.rt, k_source, "add1.cu", &art) == T4A_OK ||
         failed(&s, "t4a_runtime_compile");
    compile_s[r] = now_s() - t0;
    t4a_nvrtc_artifact_release(art);
  }
  for (unsigned long r = 0; ok && r < rounds; r++) {
    tool_progress_set(&p, "bench launch", r, rounds);
    double t0 = now_s();
    for (unsigned long i = 0; ok && i < n; i++) ok = launch_add1(&s);
    launch_s[r] = (now_s() - t0) / (double)n;
    ok = ok && (t4a_runtime_sync(s.rt) == T4A_OK || failed(&s, "t4a_runtime_sync"));
  }
  /* Every launch added 1 to every element: check before the round trips overwrite it. */
  ok = ok && check(&s, (int)(rounds * n));
  for (unsigned long r = 0; ok && r < rounds; r++) {
    tool_progress_set(&p, "bench upload+download 1 MiB", r, rounds);
    double t0 = now_s();
    ok = (t4a_runtime_upload(s.rt, s.buf, 0, s.host, ELEMS * sizeof(int)) == T4A_OK ||
          failed(&s, "t4a_runtime_upload")) &&
         (t4a_runtime_download(s.rt, s.buf, 0, s.host, ELEMS * sizeof(int)) == T4A_OK ||
          failed(&s, "t4a_runtime_download"));
    trip_s[r] = now_s() - t0;
  }
  tool_progress_stop(&p);
  if (ok) {
    printf("t4a bench: device 0 (%s), %lu rounds, %lu launches per round%s\n",
           t4a_runtime_target(s.rt), rounds, n,
           s.fake != NULL ? "; fake driver: the times are of its host code" : "");
    printf("  %-34s %10s %10s %10s\n", "per operation (us)", "min", "median", "max");
    report("compile, artifact cache hit", compile_s, rounds);
    report("t4a_runtime_launch (submit)", launch_s, rounds);
    report("upload + download 1 MiB", trip_s, rounds);
    t4a_counter_values v;
    t4a_runtime_stats(s.rt, &v);
    printf("counters:");
    for (int id = 0; id < T4A_COUNTER_COUNT; id++) {
      uint64_t x = t4a_counter_value(&v, (t4a_counter_id)id);
      const char *name = t4a_counter_name((t4a_counter_id)id);
      if (x != 0 && name != NULL) printf(" %s=%llu", name, (unsigned long long)x);
    }
    printf("\nresult: verified (%lu launches)\n", rounds * n);
  }
  ok = session_close(&s) && ok;
  free(compile_s);
  free(launch_s);
  free(trip_s);
  return ok ? 0 : EXIT_FAILED;
}
