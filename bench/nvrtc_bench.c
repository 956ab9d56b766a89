/* nvrtc_bench: what the artifact cache saves, on the CPU (NVRTC needs no GPU).
 *
 * For a 20-line kernel and a generated 2,000-line source (100 kernels), compiled to sm_90 CUBIN
 * (each figure: the median of R, with the minimum and maximum):
 *   compile      t4a_nvrtc_compile (uncached), after one warm-up compile; R repeats
 *   memory hit   t4a_nvrtc_cache_compile answered from memory, plus the artifact release;
 *                R batches of B calls each (per call)
 *   disk hit     in a new process (fork + exec of this binary with --disk-hit): the first
 *                t4a_nvrtc_cache_compile of a fresh process, answered from the directory;
 *                R processes. The child also reports what it paid before that call (loading
 *                NVRTC, creating the cache), reported separately: every new process pays the
 *                NVRTC load before its first hit.
 *   disk hit, same process: a fresh cache over the populated directory; R caches.
 *   new process, lazy: the same new-process disk hit through t4a_nvrtc_cache_create_lazy (the
 *                compiler identity read from the library files, NVRTC never loaded): cache
 *                creation and the hit, and their sum, the process's first artifact; the child
 *                checks that NVRTC made no call and that /proc/self/maps has no libnvrtc.
 * Then the link rows (bench/link_rows.c): nvJitLink link time and link-cache hits.
 *
 * Include roots (the CUDA toolkit's include and include/cccl, when found):
 *   first use        of the roots in a new process, a miss with no include manifest: the include
 *                      check (t4a_nvrtc_includes_resolve: the paths NVRTC would open probed,
 *                      what they reach read and hashed; no tree walked), for the plain, fp16 and
 *                      CUB kernels; R processes each, interleaved (NVRTC loaded first, not timed)
 *   kernels with toolkit roots: a plain kernel (the 20-line one), a cuda_fp16.h kernel and a
 *                      CUB BlockReduce kernel: cached compile (a miss on a fresh memory cache:
 *                      the include check through the roots and NVRTC) and memory hit (the
 *                      include manifest validated by stat, then the artifact)
 *   new process over a warm directory: the first artifact through a lazy cache (the manifest
 *                      read and validated, the artifact read; NVRTC never loaded), for the
 *                      three kernels with the toolkit roots and the plain one without; R
 *                      processes each, the four kinds interleaved
 *
 * Usage: nvrtc_bench [--repeats R] [--batch B] [--json-file PATH]  (defaults 11 and 2000)
 *        nvrtc_bench --first-artifacts [--repeats R] (the new-process rows with manifests alone)
 *        nvrtc_bench --mem-hits [--repeats R] [--batch B] (the memory-hit rows alone: each
 *                                                   repeat a fresh cache per source, alternated)
 *   --json-file PATH (with any of the three): also writes JSON lines, t4a_bench's shape: a header
 *   {"bench":"nvrtc_bench",...} and one line per figure {"name","window","what","unit":"us",
 *   "samples","t4a":{"min","median","max"}} (bench/goals.tsv's nvrtc_bench rows among them;
 *   scripts/check_goals.py reads it). A share row (roots_share_*) carries the difference of two
 *   medians as its median only; a goal row the run could not measure carries "error".
 *        nvrtc_bench --disk-hit DIR small|large    (the child mode: prints load, create, hit ns)
 *        nvrtc_bench --disk-hit-lazy DIR small|large (child: prints create, hit ns)
 *        nvrtc_bench --populate DIR small|large    (fills a directory for --disk-hit)
 *        nvrtc_bench --roots-miss plain|fp16|cub   (child: the include check of a miss with no
 *                                                   manifest in a new process: ns files empty)
 *        nvrtc_bench --roots-hit DIR none|plain|fp16|cub (child: a new process's first artifact
 *                                                   from DIR through a lazy cache, ns) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "testing/lsan/nvrtc_suppressions.h"
#define T4A_BENCH_NAME "nvrtc_bench"
#include "bench/harness.h"
#include "bench/link_rows.h"

/* The 20-line kernel. */
static const char k_small[] =
    "// saxpy with a grid-stride loop and a clamp: 20 lines\n"
    "#define CLAMP_LO -1.0e30f\n"
    "#define CLAMP_HI 1.0e30f\n"
    "\n"
    "__device__ __forceinline__ float clampf(float v) {\n"
    "  return fminf(fmaxf(v, CLAMP_LO), CLAMP_HI);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void saxpy(float a, const float *__restrict__ x,\n"
    "                                  float *__restrict__ y, int n) {\n"
    "  int stride = blockDim.x * gridDim.x;\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n"
    "    float v = a * x[i] + y[i];\n"
    "    y[i] = clampf(v);\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void fill(float *y, float v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = v;\n"
    "}\n";

/* The ~2,000-line source: 100 kernels of 20 lines each (a large .cu file of many small kernels,
 * the common shape of a kernel library), every one with its own constants. */
static char *make_large(int *out_lines) {
  size_t cap = 256 * 1024, n = 0;
  char *s = malloc(cap);
  if (s == NULL) return NULL;
  int lines = 0;
  for (int k = 0; k < 100; k++) {
    n += (size_t)snprintf(
        s + n, cap - n,
        "// kernel %d\n"
        "__device__ __forceinline__ float op%d(float v, float w) {\n"
        "  float t = v * %d.5e-3f + w;\n"
        "  return t > %d.0f ? t - %d.0f : t;\n"
        "}\n"
        "extern \"C\" __global__ void k%d(const float *__restrict__ x,\n"
        "                              float *__restrict__ y, int n, float w) {\n"
        "  int stride = blockDim.x * gridDim.x;\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n"
        "    float v = x[i];\n"
        "    float acc = 0.0f;\n"
        "#pragma unroll 4\n"
        "    for (int j = 0; j < %d; j++) {\n"
        "      acc += op%d(v, w + (float)j);\n"
        "    }\n"
        "    y[i] = acc;\n"
        "  }\n"
        "}\n"
        "\n"
        "\n",
        k, k, 100 + k, k % 13 + 1, k % 7, k, 4 + k % 9, k);
    lines += 20;
  }
  *out_lines = lines;
  return s;
}

/* --json-file: the JSON lines (NULL without it). */
static FILE *g_json;

static t4a_bench_stats scaled(t4a_bench_stats s, double k) {
  s.min *= k;
  s.med *= k;
  s.max *= k;
  return s;
}

/* One figure's line: `us` in microseconds, the stats of `samples` repeats. */
static void json_row(const char *name, const char *window, const char *what, t4a_bench_stats us,
                     int samples) {
  if (g_json == NULL) return;
  fprintf(g_json,
          "{\"name\":\"%s\",\"group\":\"nvrtc\",\"window\":\"%s\",\"what\":\"%s\","
          "\"unit\":\"us\",\"samples\":%d,\"t4a\":{\"min\":%.3f,\"median\":%.3f,\"max\":%.3f}}\n",
          name, window, what, samples, us.min, us.med, us.max);
  fflush(g_json);
}

/* A row of a goal the run could not measure: check_goals.py reports it FAILED. */
static void json_error(const char *name, const char *why) {
  if (g_json == NULL) return;
  fprintf(g_json, "{\"name\":\"%s\",\"group\":\"nvrtc\",\"error\":\"%s\"}\n", name, why);
  fflush(g_json);
}

/* The roots' share of a new process's first artifact: the kernel's median with the toolkit roots
 * minus the plain kernel's without roots (the four kinds interleaved), us. */
static const char *const k_share_kind[3] = {"plain", "fp16", "cub"};
static void json_shares(const t4a_bench_stats first_ms[4], int samples) {
  for (int k = 1; g_json != NULL && k < 4; k++) {
    fprintf(g_json,
            "{\"name\":\"roots_share_first_artifact_%s\",\"group\":\"nvrtc\",\"window\":"
            "\"done\",\"what\":\"a new process's first artifact through a lazy cache over a warm "
            "directory: the %s kernel with the toolkit roots (include manifests validated) minus "
            "the 20-line kernel without roots, difference of the medians\",\"unit\":\"us\","
            "\"samples\":%d,\"t4a\":{\"median\":%.3f}}\n",
            k_share_kind[k - 1], k_share_kind[k - 1], samples,
            (first_ms[k].med - first_ms[0].med) * 1e3);
  }
  if (g_json != NULL) fflush(g_json);
}

/* The new-process first-artifact rows with the roots (ms in), and the shares. */
static void json_first_artifacts(const t4a_bench_stats first_ms[4], int samples) {
  static const char *const name[4] = {"none", "plain", "fp16", "cub"};
  static const char *const what[4] = {
      "new process, first artifact from a warm directory, lazy cache: 20-line kernel, no roots",
      "the same, 20-line kernel, toolkit roots (include manifest validated by stat)",
      "the same, cuda_fp16.h kernel, toolkit roots",
      "the same, CUB BlockReduce kernel, toolkit roots"};
  for (int k = 0; k < 4; k++) {
    char n[80];
    snprintf(n, sizeof n, "new_process_first_artifact_roots_%s", name[k]);
    json_row(n, "done", what[k], scaled(first_ms[k], 1e3), samples);
  }
  json_shares(first_ms, samples);
}

static t4a_nvrtc_request request_for(const char *source, const char *name) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = name;
  r.source = source;
  r.target = "sm_90";
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  return r;
}

static void die(const char *what) {
  t4a_error e;
  char buf[600];
  t4a_error_last(&e);
  fprintf(stderr, "nvrtc_bench: %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  exit(1);
}

/* Child mode: one fresh process, one disk hit. Prints "open_ns create_ns hit_ns". */
static int child_disk_hit(const char *dir, const char *which) {
  uint64_t t0 = t4a_bench_now_ns();
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) die("open");
  uint64_t t1 = t4a_bench_now_ns();
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(lib, &o, &c) != T4A_OK) die("cache");
  int lines = 0;
  char *large = strcmp(which, "large") == 0 ? make_large(&lines) : NULL;
  t4a_nvrtc_request r =
      large != NULL ? request_for(large, "large.cu") : request_for(k_small, "small.cu");
  uint64_t t2 = t4a_bench_now_ns();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_cache_compile(c, &r, &a, &out) != T4A_OK) die("disk hit");
  uint64_t t3 = t4a_bench_now_ns();
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  t4a_counter_values v = cs.counters;
  if (out.origin != T4A_NVRTC_ORIGIN_DISK || v.nvrtc_compile_attempts != 0) {
    fprintf(stderr, "nvrtc_bench: child expected a disk hit, got %s (%llu compiles)\n",
            t4a_nvrtc_origin_name(out.origin), (unsigned long long)v.nvrtc_compile_attempts);
    return 1;
  }
  printf("%llu %llu %llu\n", (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1),
         (unsigned long long)(t3 - t2));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_lib_release(lib);
  free(large);
  return 0;
}

/* Whether /proc/self/maps names a file containing `what`. */
static int mapped(const char *what) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return 1;
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, f) != NULL) found |= strstr(line, what) != NULL;
  fclose(f);
  return found;
}

/* Child mode: one fresh process, one disk hit through a lazy cache. Prints "0 create_ns hit_ns". */
static int child_disk_hit_lazy(const char *dir, const char *which) {
  int lines = 0;
  char *large = strcmp(which, "large") == 0 ? make_large(&lines) : NULL;
  t4a_nvrtc_request r =
      large != NULL ? request_for(large, "large.cu") : request_for(k_small, "small.cu");
  uint64_t t0 = t4a_bench_now_ns();
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create_lazy(NULL, &o, &c) != T4A_OK) die("lazy cache");
  uint64_t t1 = t4a_bench_now_ns();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_cache_compile(c, &r, &a, &out) != T4A_OK) die("lazy disk hit");
  uint64_t t2 = t4a_bench_now_ns();
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  if (out.origin != T4A_NVRTC_ORIGIN_DISK || cs.counters.nvrtc_compile_attempts != 0 ||
      mapped("libnvrtc")) {
    fprintf(stderr, "nvrtc_bench: lazy child expected a disk hit without NVRTC, got %s (%llu "
                    "compiles, libnvrtc %s)\n",
            t4a_nvrtc_origin_name(out.origin),
            (unsigned long long)cs.counters.nvrtc_compile_attempts,
            mapped("libnvrtc") ? "mapped" : "not mapped");
    return 1;
  }
  printf("0 %llu %llu\n", (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  free(large);
  return 0;
}

/* Runs one child; fills its three figures (ns). */
static void run_child(const char *mode, const char *dir, const char *which, double out[3]) {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("pipe");
    exit(1);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "nvrtc_bench", mode, dir, which, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  unsigned long long a = 0, b = 0, c = 0;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      sscanf(buf, "%llu %llu %llu", &a, &b, &c) != 3) {
    fprintf(stderr, "nvrtc_bench: child failed (status %d)\n", status);
    exit(1);
  }
  out[0] = (double)a;
  out[1] = (double)b;
  out[2] = (double)c;
}

typedef struct figures {
  /* each: the median of the repeats, with their minimum and maximum */
  t4a_bench_stats compile_ms, mem_hit_us, disk_hit_child_us, disk_hit_same_us, child_open_ms,
      child_create_us, lazy_create_us, lazy_hit_us, lazy_first_us;
  size_t bytes;
} figures;

/* Memory hits of one request on a fresh memory cache: R batches of B calls (us per call, the
 * artifact release included); exits if a hit compiled. */
static t4a_bench_stats mem_hits(t4a_nvrtc_lib *lib, const t4a_nvrtc_request *r, int repeats,
                                int batch) {
  double *v = calloc((size_t)repeats, sizeof *v);
  if (v == NULL) exit(1);
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(lib, NULL, &c) != T4A_OK) die("cache");
  if (t4a_nvrtc_cache_compile(c, r, &a, NULL) != T4A_OK) die("cache compile");
  t4a_nvrtc_artifact_release(a);
  for (int i = 0; i < repeats; i++) {
    uint64_t t0 = t4a_bench_now_ns();
    for (int j = 0; j < batch; j++) {
      if (t4a_nvrtc_cache_compile(c, r, &a, NULL) != T4A_OK) die("memory hit");
      t4a_nvrtc_artifact_release(a);
    }
    v[i] = (double)(t4a_bench_now_ns() - t0) / 1e3 / batch;
  }
  t4a_bench_stats s = t4a_bench_stats_of(v, (size_t)repeats);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  if (cs.counters.nvrtc_compile_attempts != 1) {
    fprintf(stderr, "nvrtc_bench: memory hits compiled (%llu)\n",
            (unsigned long long)cs.counters.nvrtc_compile_attempts);
    exit(1);
  }
  t4a_nvrtc_cache_destroy(c);
  free(v);
  return s;
}

static figures measure(t4a_nvrtc_lib *lib, const t4a_nvrtc_request *r, const char *which,
                       int repeats, int batch) {
  figures f;
  memset(&f, 0, sizeof f);
  double *v = calloc((size_t)repeats, sizeof *v);
  double *w = calloc((size_t)repeats, sizeof *w);
  double *x = calloc((size_t)repeats, sizeof *x);
  if (v == NULL || w == NULL || x == NULL) exit(1);
  /* Compile (uncached), after a warm-up. */
  t4a_nvrtc_artifact *a = NULL;
  if (t4a_nvrtc_compile(lib, r, &a, NULL) != T4A_OK) die("compile");
  t4a_nvrtc_artifact_data(a, &f.bytes);
  t4a_nvrtc_artifact_release(a);
  for (int i = 0; i < repeats; i++) {
    uint64_t t0 = t4a_bench_now_ns();
    if (t4a_nvrtc_compile(lib, r, &a, NULL) != T4A_OK) die("compile");
    v[i] = (double)(t4a_bench_now_ns() - t0) / 1e6;
    t4a_nvrtc_artifact_release(a);
  }
  f.compile_ms = t4a_bench_stats_of(v, (size_t)repeats);

  /* Memory hits. */
  f.mem_hit_us = mem_hits(lib, r, repeats, batch);
  t4a_nvrtc_cache *c = NULL;

  /* Disk: populate a directory, then hit it from new processes and from fresh caches. */
  char dir[] = "/tmp/t4a-nvrtc-bench-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  if (t4a_nvrtc_cache_create(lib, &o, &c) != T4A_OK) die("disk cache");
  if (t4a_nvrtc_cache_compile(c, r, &a, NULL) != T4A_OK) die("populate");
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  for (int i = 0; i < repeats; i++) {
    double fig[3];
    run_child("--disk-hit", dir, which, fig);
    v[i] = fig[2] / 1e3;
    w[i] = fig[0] / 1e6;
    x[i] = fig[1] / 1e3;
  }
  f.disk_hit_child_us = t4a_bench_stats_of(v, (size_t)repeats);
  f.child_open_ms = t4a_bench_stats_of(w, (size_t)repeats);
  f.child_create_us = t4a_bench_stats_of(x, (size_t)repeats);
  double *y = calloc((size_t)repeats, sizeof *y);
  if (y == NULL) exit(1);
  for (int i = 0; i < repeats; i++) {
    double fig[3];
    run_child("--disk-hit-lazy", dir, which, fig);
    v[i] = fig[1] / 1e3;
    w[i] = fig[2] / 1e3;
    y[i] = (fig[1] + fig[2]) / 1e3;
  }
  f.lazy_create_us = t4a_bench_stats_of(v, (size_t)repeats);
  f.lazy_hit_us = t4a_bench_stats_of(w, (size_t)repeats);
  f.lazy_first_us = t4a_bench_stats_of(y, (size_t)repeats);
  free(y);
  for (int i = 0; i < repeats; i++) {
    if (t4a_nvrtc_cache_create(lib, &o, &c) != T4A_OK) die("disk cache");
    t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
    uint64_t t0 = t4a_bench_now_ns();
    if (t4a_nvrtc_cache_compile(c, r, &a, &out) != T4A_OK) die("disk hit");
    v[i] = (double)(t4a_bench_now_ns() - t0) / 1e3;
    if (out.origin != T4A_NVRTC_ORIGIN_DISK) {
      fprintf(stderr, "nvrtc_bench: expected a disk hit\n");
      exit(1);
    }
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_cache_destroy(c);
  }
  f.disk_hit_same_us = t4a_bench_stats_of(v, (size_t)repeats);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "nvrtc_bench: could not remove %s\n", dir);
  free(v);
  free(w);
  free(x);
  return f;
}

/* --populate DIR small|large: compiles one kernel into a disk cache (for manual experiments with
 * --disk-hit). */
static int populate(const char *dir, const char *which) {
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) die("open");
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(lib, &o, &c) != T4A_OK) die("cache");
  int lines = 0;
  char *large = strcmp(which, "large") == 0 ? make_large(&lines) : NULL;
  t4a_nvrtc_request r =
      large != NULL ? request_for(large, "large.cu") : request_for(k_small, "small.cu");
  t4a_nvrtc_artifact *a = NULL;
  if (t4a_nvrtc_cache_compile(c, &r, &a, NULL) != T4A_OK) die("compile");
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_lib_release(lib);
  free(large);
  return 0;
}

/* ---- Include roots ----------------------------------------------------------------------- */

static const char k_fp16[] =
    "#include <cuda_fp16.h>\n"
    "extern \"C\" __global__ void hscale(__half *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = __hmul(x[i], __float2half(a));\n"
    "}\n";
static const char k_cub[] =
    "#include <cub/block/block_reduce.cuh>\n"
    "extern \"C\" __global__ void bsum(const float *x, float *out) {\n"
    "  using R = cub::BlockReduce<float, 128>;\n"
    "  __shared__ typename R::TempStorage t;\n"
    "  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x]);\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n"
    "}\n";

/* Child: one fresh process's first artifact from a warm directory through a lazy cache, for a
 * kernel with the toolkit roots (plain, fp16, cub) or the plain kernel without roots (none): the
 * include manifest loaded and validated, then the disk hit. Prints "ns files". */
static int child_roots_hit(const char *dir, const char *which) {
  t4a_nvrtc_toolkit tk;
  if (t4a_nvrtc_toolkit_find(NULL, &tk) != T4A_OK) die("toolkit");
  const char *src = strcmp(which, "fp16") == 0 ? k_fp16 : strcmp(which, "cub") == 0 ? k_cub : k_small;
  t4a_nvrtc_request r = request_for(src, "roots.cu");
  if (strcmp(which, "none") != 0) {
    r.include_roots = tk.roots;
    r.num_include_roots = tk.num_roots;
  }
  uint64_t t0 = t4a_bench_now_ns();
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create_lazy(NULL, &o, &c) != T4A_OK) die("lazy cache");
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_cache_compile(c, &r, &a, &out) != T4A_OK) die("roots disk hit");
  uint64_t t1 = t4a_bench_now_ns();
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  if (out.origin != T4A_NVRTC_ORIGIN_DISK || cs.counters.nvrtc_compile_attempts != 0 ||
      mapped("libnvrtc")) {
    fprintf(stderr, "nvrtc_bench: roots child (%s) expected a disk hit without NVRTC, got %s\n",
            which, t4a_nvrtc_origin_name(out.origin));
    return 1;
  }
  printf("%llu\n", (unsigned long long)(t1 - t0));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  return 0;
}

static long long rusage_us(const struct timeval *tv) {
  return (long long)tv->tv_sec * 1000000 + tv->tv_usec;
}

/* Child: a new process's first use of the toolkit roots for a kernel (plain, fp16, cub) with no
 * include manifest: what a miss pays before NVRTC runs (the include check, probing the paths
 * NVRTC would open through the roots; NVRTC loaded first, not timed). Prints "ns files empty
 * user_us system_us" (the process's CPU time in that window, from getrusage: the lexing's share
 * against the file system's). */
static int child_roots_miss(const char *which) {
  t4a_nvrtc_toolkit tk;
  if (t4a_nvrtc_toolkit_find(NULL, &tk) != T4A_OK) die("toolkit");
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) die("NVRTC");
  const char *src = strcmp(which, "fp16") == 0 ? k_fp16 : strcmp(which, "cub") == 0 ? k_cub : k_small;
  t4a_nvrtc_request r = request_for(src, "roots.cu");
  r.include_roots = tk.roots;
  r.num_include_roots = tk.num_roots;
  t4a_nvrtc_root_reach total;
  struct rusage u0, u1;
  getrusage(RUSAGE_SELF, &u0);
  uint64_t t0 = t4a_bench_now_ns();
  if (t4a_nvrtc_includes_resolve(lib, &r, NULL, &total) != T4A_OK) die("includes");
  uint64_t t1 = t4a_bench_now_ns();
  getrusage(RUSAGE_SELF, &u1);
  printf("%llu %llu %llu %lld %lld\n", (unsigned long long)(t1 - t0),
         (unsigned long long)total.files, (unsigned long long)total.empty,
         rusage_us(&u1.ru_utime) - rusage_us(&u0.ru_utime),
         rusage_us(&u1.ru_stime) - rusage_us(&u0.ru_stime));
  t4a_nvrtc_lib_release(lib);
  return 0;
}

/* Runs `nvrtc_bench MODE A B` (B may be NULL); returns the first number it printed (ns). */
static double run_ns_child(const char *mode, const char *a, const char *b) {
  int fds[2];
  if (pipe(fds) != 0) exit(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) exit(1);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "nvrtc_bench", mode, a, b, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  unsigned long long ns = 0;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || sscanf(buf, "%llu", &ns) < 1) {
    fprintf(stderr, "nvrtc_bench: %s child failed (status %d)\n", mode, status);
    exit(1);
  }
  return (double)ns;
}

/* Runs `nvrtc_bench --roots-miss WHICH`; returns ns, and the files and empty paths it reached
 * and its user and system CPU time (us). */
static double run_roots_miss(const char *which, unsigned long long *files,
                             unsigned long long *empty, double *user_us, double *sys_us) {
  int fds[2];
  if (pipe(fds) != 0) exit(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) exit(1);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "nvrtc_bench", "--roots-miss", which, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  unsigned long long ns = 0;
  long long user = 0, sys = 0;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      sscanf(buf, "%llu %llu %llu %lld %lld", &ns, files, empty, &user, &sys) < 5) {
    fprintf(stderr, "nvrtc_bench: roots-miss child failed (status %d)\n", status);
    exit(1);
  }
  *user_us = (double)user;
  *sys_us = (double)sys;
  return (double)ns;
}

/* New processes over a warm directory (artifacts and include manifests on disk): the first
 * artifact through a lazy cache, with the toolkit roots and (plain kernel) without; the four
 * kinds interleaved, R processes each. */
static void measure_first_artifacts(t4a_nvrtc_lib *lib, const t4a_nvrtc_toolkit *tkp, int repeats,
                                    t4a_bench_stats first[4]) {
  static const char *const which[4] = {"none", "plain", "fp16", "cub"};
  t4a_nvrtc_toolkit tk = *tkp;
  char cmd[160];
  char dd[] = "/tmp/t4a-nvrtc-bench-manifest-XXXXXX";
  if (mkdtemp(dd) == NULL) exit(1);
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dd;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(lib, &o, &c) != T4A_OK) die("cache");
  for (int k = 0; k < 4; k++) {
    t4a_nvrtc_request r = request_for(k == 2 ? k_fp16 : k == 3 ? k_cub : k_small, "roots.cu");
    if (k > 0) {
      r.include_roots = tk.roots;
      r.num_include_roots = tk.num_roots;
    }
    t4a_nvrtc_artifact *a = NULL;
    if (t4a_nvrtc_cache_compile(c, &r, &a, NULL) != T4A_OK) die("populate");
    t4a_nvrtc_artifact_release(a);
  }
  t4a_nvrtc_cache_destroy(c);
  double *fv = calloc((size_t)repeats * 4, sizeof *fv);
  if (fv == NULL) exit(1);
  for (int i = 0; i < repeats; i++) { /* interleaved: each round runs the four kinds */
    for (int k = 0; k < 4; k++) fv[k * repeats + i] = run_ns_child("--roots-hit", dd, which[k]) / 1e6;
  }
  for (int k = 0; k < 4; k++) first[k] = t4a_bench_stats_of(fv + k * repeats, (size_t)repeats);
  free(fv);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dd);
  if (system(cmd) != 0) fprintf(stderr, "nvrtc_bench: could not remove %s\n", dd);
}

static void measure_roots(t4a_nvrtc_lib *lib, int repeats, int batch) {
  t4a_nvrtc_toolkit tk;
  if (t4a_nvrtc_toolkit_find(t4a_nvrtc_lib_origin(lib), &tk) != T4A_OK) {
    printf("\ninclude roots: no CUDA toolkit found (looked in %s): rows skipped\n", tk.looked);
    static const char *const goal_rows[] = {
        "roots_first_miss_wait_plain", "roots_first_miss_wait_fp16", "roots_first_miss_wait_cub",
        "roots_memory_hit_20_lines", "roots_share_first_artifact_plain",
        "roots_share_first_artifact_fp16", "roots_share_first_artifact_cub"};
    for (size_t i = 0; i < sizeof goal_rows / sizeof goal_rows[0]; i++) {
      json_error(goal_rows[i], "no CUDA toolkit found: the include-root rows were not run");
    }
    return;
  }
  double *v = calloc((size_t)repeats, sizeof *v);
  if (v == NULL) exit(1);
  /* The first use of the roots in a new process, a miss with no include manifest: the include
   * check's probes before NVRTC, per kernel, the three kinds interleaved. */
  static const char *const miss_kind[3] = {"plain", "fp16", "cub"};
  static const char *const miss_label[3] = {"20-line kernel", "cuda_fp16.h kernel",
                                            "CUB BlockReduce kernel"};
  double *mv = calloc((size_t)repeats * 9, sizeof *mv), *mu = mv + 3 * repeats,
         *ms = mu + 3 * repeats; /* wall, user, system */
  unsigned long long mfiles[3] = {0}, mempty[3] = {0};
  if (mv == NULL) exit(1);
  for (int i = 0; i < repeats; i++) {
    for (int k = 0; k < 3; k++) {
      int at = k * repeats + i;
      mv[at] = run_roots_miss(miss_kind[k], &mfiles[k], &mempty[k], &mu[at], &ms[at]) / 1e6;
      mu[at] /= 1e3;
      ms[at] /= 1e3;
    }
  }
  printf("\ninclude roots: %s and %s\n", tk.include, tk.num_roots > 1 ? tk.cccl : "-");
  printf(
      "\n| first use of the toolkit roots in a new process, a miss with no include manifest "
      "(the include check's probes, before NVRTC) | ms (median, min-max) | user / system CPU ms "
      "(means, getrusage) | files reached | empty paths |\n|---|---:|---:|---:|---:|\n");
  for (int k = 0; k < 3; k++) {
    t4a_bench_stats st = t4a_bench_stats_of(mv + k * repeats, (size_t)repeats);
    double su = 0, ss = 0; /* means: the kernel may account CPU time by the tick */
    for (int i = 0; i < repeats; i++) {
      su += mu[k * repeats + i] / repeats;
      ss += ms[k * repeats + i] / repeats;
    }
    printf("| %s | %.2f (%.2f-%.2f) | %.2f / %.2f | %llu | %llu |\n", miss_label[k], st.med, st.min,
           st.max, su, ss, mfiles[k], mempty[k]);
    char n[64], what[260];
    snprintf(n, sizeof n, "roots_first_use_miss_%s", miss_kind[k]);
    snprintf(what, sizeof what,
             "first use of the toolkit roots in a new process, a miss with no "
             "include manifest: the include check's probes before NVRTC, %s (CPU: user %.2f ms, "
             "system %.2f ms)",
             miss_label[k], su, ss);
    json_row(n, "done", what, scaled(st, 1e3), repeats);
  }
  double miss_worst = 0;
  for (int k = 0; k < 3; k++) {
    t4a_bench_stats st = t4a_bench_stats_of(mv + k * repeats, (size_t)repeats);
    if (st.med > miss_worst) miss_worst = st.med;
  }
  free(mv);

  /* Kernels with the toolkit roots. */
  struct {
    const char *what, *src;
    int reps;
  } ks[3] = {{"20-line kernel", k_small, repeats},
             {"cuda_fp16.h kernel", k_fp16, repeats},
             {"CUB BlockReduce kernel", k_cub, repeats < 3 ? repeats : 3}};
  printf("\n| kernel, toolkit roots, sm_90 CUBIN | cached compile, miss (ms) | memory hit (us) |\n");
  printf("|---|---:|---:|\n");
  double hit20 = 0;
  for (int k = 0; k < 3; k++) {
    t4a_nvrtc_request r = request_for(ks[k].src, "roots.cu");
    r.include_roots = tk.roots;
    r.num_include_roots = tk.num_roots;
    /* A fresh cache (compile_uncacheable, as the facade's) has no manifest: its first miss
     * compiles alongside the include check; what it waited on the check beyond NVRTC is in its
     * stats. */
    double *wait = calloc((size_t)ks[k].reps, sizeof *wait);
    if (wait == NULL) exit(1);
    int overlapped = 0;
    for (int i = 0; i < ks[k].reps; i++) {
      t4a_nvrtc_cache_options co = T4A_NVRTC_CACHE_OPTIONS_INIT;
      co.compile_uncacheable = 1;
      t4a_nvrtc_cache *c = NULL;
      if (t4a_nvrtc_cache_create(lib, &co, &c) != T4A_OK) die("cache");
      t4a_nvrtc_artifact *a = NULL;
      t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
      uint64_t t0 = t4a_bench_now_ns();
      if (t4a_nvrtc_cache_compile(c, &r, &a, &oc) != T4A_OK) die(ks[k].what);
      v[i] = (double)(t4a_bench_now_ns() - t0) / 1e6;
      struct t4a_nvrtc_cache_stats ws;
      t4a_nvrtc_cache_stats(c, &ws);
      if (oc.origin != T4A_NVRTC_ORIGIN_COMPILED || ws.roots_misses != 1) die("first miss");
      wait[i] = (double)ws.roots_check_wait_ns / 1e6;
      overlapped += ws.counters.nvrtc_roots_overlapped == 1;
      t4a_nvrtc_outcome_deinit(&oc);
      t4a_nvrtc_artifact_release(a);
      t4a_nvrtc_cache_destroy(c);
    }
    t4a_bench_stats comp = t4a_bench_stats_of(v, (size_t)ks[k].reps);
    t4a_bench_stats waited = t4a_bench_stats_of(wait, (size_t)ks[k].reps);
    free(wait);
    {
      char wn[64], wwhat[260];
      snprintf(wn, sizeof wn, "roots_first_miss_wait_%s", miss_kind[k]);
      snprintf(wwhat, sizeof wwhat,
               "%s with the toolkit roots, a fresh cache's first miss (no manifest): time it "
               "waited on the include check beyond NVRTC's compile (%d of %d compiled alongside "
               "the check)",
               ks[k].what, overlapped, ks[k].reps);
      json_row(wn, "done", wwhat, scaled(waited, 1e3), ks[k].reps);
      printf("| %s: first miss's wait on the include check beyond NVRTC | %.3f ms (%.3f-%.3f), "
             "%d of %d overlapped |\n",
             ks[k].what, waited.med, waited.min, waited.max, overlapped, ks[k].reps);
    }
    t4a_nvrtc_cache *c = NULL;
    if (t4a_nvrtc_cache_create(lib, NULL, &c) != T4A_OK) die("cache");
    t4a_nvrtc_artifact *a = NULL;
    if (t4a_nvrtc_cache_compile(c, &r, &a, NULL) != T4A_OK) die(ks[k].what);
    t4a_nvrtc_artifact_release(a);
    for (int i = 0; i < repeats; i++) {
      uint64_t t0 = t4a_bench_now_ns();
      for (int j = 0; j < batch; j++) {
        if (t4a_nvrtc_cache_compile(c, &r, &a, NULL) != T4A_OK) die("memory hit");
        t4a_nvrtc_artifact_release(a);
      }
      v[i] = (double)(t4a_bench_now_ns() - t0) / 1e3 / batch;
    }
    t4a_bench_stats hit = t4a_bench_stats_of(v, (size_t)repeats);
    struct t4a_nvrtc_cache_stats cs;
    t4a_nvrtc_cache_stats(c, &cs);
    if (cs.counters.nvrtc_compile_attempts != 1) {
      fprintf(stderr, "nvrtc_bench: memory hits with roots compiled\n");
      exit(1);
    }
    t4a_nvrtc_cache_destroy(c);
    if (k == 0) hit20 = hit.med;
    char n[64], what[160];
    snprintf(n, sizeof n, "roots_compile_miss_%s", miss_kind[k]);
    snprintf(what, sizeof what, "%s with the toolkit roots: cached compile, a miss on a fresh "
             "memory cache", ks[k].what);
    json_row(n, "done", what, scaled(comp, 1e3), ks[k].reps);
    snprintf(n, sizeof n, "roots_memory_hit_%s", miss_kind[k]);
    snprintf(what, sizeof what, "%s with the toolkit roots: memory hit (manifest validated by "
             "stat, artifact released), per call", ks[k].what);
    json_row(n, "submit", what, hit, repeats);
    printf("| %s | %.2f (%.2f-%.2f) | %.3f (%.3f-%.3f) |\n", ks[k].what, comp.med, comp.min,
           comp.max, hit.med, hit.min, hit.max);
  }
  t4a_bench_stats first[4];
  measure_first_artifacts(lib, &tk, repeats, first);
  json_first_artifacts(first, repeats);
  printf("\n| new process, first artifact from a warm directory (lazy cache: NVRTC not loaded; "
         "include manifests validated by stat) | ms (median, min-max) |\n|---|---:|\n");
  static const char *const label[4] = {"20-line kernel, no roots", "20-line kernel, toolkit roots",
                                        "cuda_fp16.h kernel, toolkit roots",
                                        "CUB BlockReduce kernel, toolkit roots"};
  for (int k = 0; k < 4; k++) {
    printf("| %s | %.3f (%.3f-%.3f) |\n", label[k], first[k].med, first[k].min, first[k].max);
  }

  /* The roots' share of a memory hit, paired: batches with and without the toolkit roots
   * alternate (the 20-line kernel, one cache each), so both see the same machine. */
  {
    t4a_nvrtc_request plain = request_for(k_small, "roots.cu");
    t4a_nvrtc_request rooted = plain;
    rooted.include_roots = tk.roots;
    rooted.num_include_roots = tk.num_roots;
    t4a_nvrtc_cache *cp = NULL, *cr = NULL;
    if (t4a_nvrtc_cache_create(lib, NULL, &cp) != T4A_OK) die("cache");
    if (t4a_nvrtc_cache_create(lib, NULL, &cr) != T4A_OK) die("cache");
    t4a_nvrtc_artifact *a = NULL;
    if (t4a_nvrtc_cache_compile(cp, &plain, &a, NULL) != T4A_OK) die("plain");
    t4a_nvrtc_artifact_release(a);
    if (t4a_nvrtc_cache_compile(cr, &rooted, &a, NULL) != T4A_OK) die("rooted");
    t4a_nvrtc_artifact_release(a);
    double *w = calloc((size_t)repeats, sizeof *w);
    if (w == NULL) exit(1);
    for (int i = 0; i < repeats; i++) {
      for (int side = 0; side < 2; side++) {
        t4a_nvrtc_cache *c = side == 0 ? cp : cr;
        const t4a_nvrtc_request *r = side == 0 ? &plain : &rooted;
        uint64_t t0 = t4a_bench_now_ns();
        for (int j = 0; j < batch; j++) {
          if (t4a_nvrtc_cache_compile(c, r, &a, NULL) != T4A_OK) die("memory hit");
          t4a_nvrtc_artifact_release(a);
        }
        (side == 0 ? v : w)[i] = (double)(t4a_bench_now_ns() - t0) / 1e3 / batch;
      }
    }
    t4a_bench_stats sp = t4a_bench_stats_of(v, (size_t)repeats);
    t4a_bench_stats sr = t4a_bench_stats_of(w, (size_t)repeats);
    printf("\npaired memory hits, 20-line kernel (alternating batches): without roots %.3f us "
           "(%.3f-%.3f), with the toolkit roots %.3f us (%.3f-%.3f), ratio %.2f\n",
           sp.med, sp.min, sp.max, sr.med, sr.min, sr.max, sr.med / sp.med);
    hit20 = sr.med;
    json_row("roots_memory_hit_20_lines", "submit",
             "memory hit of the 20-line kernel with the toolkit roots, per call, batches "
             "alternating with roots_memory_hit_20_lines_baseline", sr, repeats);
    json_row("roots_memory_hit_20_lines_baseline", "submit",
             "memory hit of the 20-line kernel without roots, the other side of the pair", sp,
             repeats);
    free(w);
    t4a_nvrtc_cache_destroy(cp);
    t4a_nvrtc_cache_destroy(cr);
  }
  printf("\ngoal: memory hit with toolkit roots <= 2 us (20 lines, paired run): %s (%.3f us)\n",
         hit20 <= 2.0 ? "met" : "MISSED", hit20);
  double worst = 0;
  for (int k = 1; k < 4; k++) {
    double share = first[k].med - first[0].med;
    if (share > worst) worst = share;
  }
  printf("goal: new process, manifests on disk: the roots' share of the first artifact <= 1 ms: "
         "%s (worst of the three kernels %.3f ms over the same process without roots)\n",
         worst <= 1.0 ? "met" : "MISSED", worst);
  printf("goal: first use of the toolkit roots in a process <= 5 ms: a hit (manifest on disk) %s "
         "(%.3f ms); a miss with no manifest: see roots_first_miss_wait_* (what it waits on the "
         "include check beyond NVRTC; the check alone, on this thread: worst of the three kernels "
         "%.2f ms)\n",
         worst <= 5.0 ? "met" : "MISSED", worst, miss_worst);
  free(v);
}

/* Closes the --json-file; 1 if its writes failed. */
static int close_json(void) {
  if (g_json == NULL) return 0;
  int bad = ferror(g_json) != 0;
  bad |= fclose(g_json) != 0;
  g_json = NULL;
  if (bad) fprintf(stderr, "nvrtc_bench: writing the --json-file failed\n");
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--roots-miss") == 0) return child_roots_miss(argv[2]);
  if (argc == 4 && strcmp(argv[1], "--roots-hit") == 0) return child_roots_hit(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--disk-hit") == 0) return child_disk_hit(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--disk-hit-lazy") == 0) {
    return child_disk_hit_lazy(argv[2], argv[3]);
  }
  if (argc == 4 && strcmp(argv[1], "--populate") == 0) return populate(argv[2], argv[3]);
  int repeats = 11, batch = 2000, only_mem_hits = 0, only_first = 0;
  const char *json_file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mem-hits") == 0) {
      only_mem_hits = 1;
    } else if (strcmp(argv[i], "--first-artifacts") == 0) {
      only_first = 1;
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batch = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) {
      json_file = argv[++i];
    } else {
      fprintf(stderr, "usage: nvrtc_bench [--repeats R] [--batch B] "
                      "[--mem-hits | --first-artifacts] [--json-file PATH]\n");
      return 2;
    }
  }
  if (repeats < 1 || batch < 1) {
    fprintf(stderr, "nvrtc_bench: repeats and batch must be positive\n");
    return 2;
  }
  if (json_file != NULL && (g_json = fopen(json_file, "w")) == NULL) {
    perror(json_file);
    return 2;
  }
  uint64_t t0 = t4a_bench_now_ns();
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) die("open");
  double open_ms = (double)(t4a_bench_now_ns() - t0) / 1e6;
  int major = 0, minor = 0;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  struct utsname u;
  uname(&u);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf(
      "nvrtc_bench: NVRTC %d.%d (%s), %s %s, %ld CPUs; medians of %d (min-max), memory hits in "
      "batches of %d\n",
      major, minor, t4a_nvrtc_lib_origin(lib), u.sysname, u.release, cpus, repeats, batch);
  printf("NVRTC load + build identity in this process: %.2f ms\n", open_ms);
  if (g_json != NULL) {
    char date[32];
    t4a_bench_utc_date(date, sizeof date);
    fprintf(g_json,
            "{\"bench\":\"nvrtc_bench\",\"mode\":\"cpu\",\"device\":\"none (NVRTC on the "
            "host: %s %s, %ld CPUs)\",\"nvrtc\":\"%d.%d\",\"nvrtc_origin\":\"%s\",\"cpus\":%ld,"
            "\"date\":\"%s\",\"run\":\"%s\",\"repeats\":%d,\"batch\":%d}\n",
            u.sysname, u.release, cpus, major, minor, t4a_nvrtc_lib_origin(lib), cpus, date,
            only_first ? "first-artifacts" : only_mem_hits ? "mem-hits" : "full", repeats, batch);
    fflush(g_json);
  }
  int large_lines = 0;
  char *large = make_large(&large_lines);
  if (large == NULL) return 1;
  int small_lines = 0;
  for (const char *p = k_small; *p; p++) small_lines += *p == '\n';
  t4a_nvrtc_request rs = request_for(k_small, "small.cu");
  t4a_nvrtc_request rl = request_for(large, "large.cu");
  if (only_first) {
    /* The new-process rows with include manifests alone. */
    t4a_nvrtc_toolkit tk;
    if (t4a_nvrtc_toolkit_find(t4a_nvrtc_lib_origin(lib), &tk) != T4A_OK) die("toolkit");
    t4a_bench_stats first[4];
    measure_first_artifacts(lib, &tk, repeats, first);
    json_first_artifacts(first, repeats);
    static const char *const label[4] = {"20-line kernel, no roots", "20-line kernel, toolkit roots",
                                          "cuda_fp16.h kernel, toolkit roots",
                                          "CUB BlockReduce kernel, toolkit roots"};
    printf("\n| new process, first artifact from a warm directory (lazy cache) | ms (median, "
           "min-max) | the roots' share (ms) |\n|---|---:|---:|\n");
    for (int k = 0; k < 4; k++) {
      printf("| %s | %.3f (%.3f-%.3f) | %.3f |\n", label[k], first[k].med, first[k].min,
             first[k].max, first[k].med - first[0].med);
    }
    double share = first[3].med - first[0].med;
    printf("\ngoal: the roots' share of a new process's first artifact <= 1 ms (CUB): %s "
           "(%.3f ms)\n", share <= 1.0 ? "met" : "MISSED", share);
    free(large);
    t4a_nvrtc_lib_release(lib);
    return close_json();
  }
  if (only_mem_hits) {
    /* The memory-hit rows alone (no roots), the two sources alternated per repeat. */
    double *v[2] = {calloc((size_t)repeats, sizeof(double)), calloc((size_t)repeats, sizeof(double))};
    if (v[0] == NULL || v[1] == NULL) return 1;
    for (int i = 0; i < repeats; i++) {
      v[0][i] = mem_hits(lib, &rs, 1, batch).med;
      v[1][i] = mem_hits(lib, &rl, 1, batch).med;
    }
    int nl[2] = {small_lines, large_lines};
    size_t nb[2] = {strlen(k_small), strlen(large)};
    printf("\n| source (no roots) | source bytes | memory hit (us) |\n|---|---:|---:|\n");
    for (int k = 0; k < 2; k++) {
      t4a_bench_stats s = t4a_bench_stats_of(v[k], (size_t)repeats);
      printf("| %d lines | %zu | %.3f (%.3f-%.3f) |\n", nl[k], nb[k], s.med, s.min, s.max);
      char n[64];
      snprintf(n, sizeof n, "memory_hit_%d_lines", nl[k]);
      json_row(n, "submit",
               "t4a_nvrtc_cache_compile answered from memory plus the artifact release, per call "
               "(--mem-hits: each repeat a fresh cache, the two sources alternated)",
               s, repeats);
      if (k == 1) {
        printf("\ngoal: memory hit <= 5 us (2,000 lines): %s (%.3f us)\n",
               s.med <= 5.0 ? "met" : "MISSED", s.med);
      }
    }
    free(v[0]);
    free(v[1]);
    free(large);
    t4a_nvrtc_lib_release(lib);
    return close_json();
  }
  figures fs = measure(lib, &rs, "small", repeats, batch);
  figures fl = measure(lib, &rl, "large", repeats, batch);
  printf(
      "\n| kernel (sm_90 CUBIN) | bytes | compile (ms) | memory hit (us) | disk hit, new process "
      "(us) | disk hit, same process (us) | new process: load NVRTC (ms) / create cache (us) |\n");
  printf("|---|---:|---:|---:|---:|---:|---:|\n");
  const figures *all[2] = {&fs, &fl};
  int lines[2] = {small_lines, large_lines};
  for (int i = 0; i < 2; i++) {
    const figures *f = all[i];
    printf(
        "| %d lines | %zu | %.2f (%.2f-%.2f) | %.3f (%.3f-%.3f) | %.1f (%.1f-%.1f) | %.1f "
        "(%.1f-%.1f) | %.2f (%.2f-%.2f) / %.1f (%.1f-%.1f) |\n",
        lines[i], f->bytes, f->compile_ms.med, f->compile_ms.min, f->compile_ms.max,
        f->mem_hit_us.med, f->mem_hit_us.min, f->mem_hit_us.max, f->disk_hit_child_us.med,
        f->disk_hit_child_us.min, f->disk_hit_child_us.max, f->disk_hit_same_us.med,
        f->disk_hit_same_us.min, f->disk_hit_same_us.max, f->child_open_ms.med,
        f->child_open_ms.min, f->child_open_ms.max, f->child_create_us.med, f->child_create_us.min,
        f->child_create_us.max);
  }
  for (int i = 0; i < 2; i++) {
    const figures *f = all[i];
    char n[80];
    snprintf(n, sizeof n, "compile_%d_lines", lines[i]);
    json_row(n, "done", "t4a_nvrtc_compile, uncached, to sm_90 CUBIN", scaled(f->compile_ms, 1e3),
             repeats);
    snprintf(n, sizeof n, "memory_hit_%d_lines", lines[i]);
    json_row(n, "submit",
             "t4a_nvrtc_cache_compile answered from memory plus the artifact release, per call",
             f->mem_hit_us, repeats);
    snprintf(n, sizeof n, "disk_hit_new_process_%d_lines", lines[i]);
    json_row(n, "done",
             "a new process's first t4a_nvrtc_cache_compile, answered from the directory (the hit "
             "itself; NVRTC loaded and the cache created before it)",
             f->disk_hit_child_us, repeats);
    snprintf(n, sizeof n, "new_process_load_nvrtc_%d_lines", lines[i]);
    json_row(n, "done", "a new process's NVRTC load (t4a_nvrtc_lib_open), before its disk hit",
             scaled(f->child_open_ms, 1e3), repeats);
    snprintf(n, sizeof n, "disk_hit_same_process_%d_lines", lines[i]);
    json_row(n, "done", "a fresh cache over the populated directory, its first compile call",
             f->disk_hit_same_us, repeats);
    snprintf(n, sizeof n, "new_process_first_artifact_%d_lines", lines[i]);
    json_row(n, "done",
             "a new process's first artifact from a warm directory through a lazy cache (NVRTC "
             "not loaded: 0 NVRTC calls, libnvrtc not mapped, checked in each child): create + hit",
             f->lazy_first_us, repeats);
  }
  printf("\ngoal: memory hit: 20 lines <= 2 us %s (%.3f us); 2,000 lines <= 5 us %s (%.3f us)\n",
         fs.mem_hit_us.med <= 2.0 ? "met" : "MISSED", fs.mem_hit_us.med,
         fl.mem_hit_us.med <= 5.0 ? "met" : "MISSED", fl.mem_hit_us.med);
  printf(
      "goal: disk hit in a new process <= 0.5 ms (20 lines): %s (%.3f ms) for the hit itself; "
      "before it every new process pays the NVRTC load (%.2f ms here), so a new process's first "
      "artifact costs %.2f ms\n",
      fs.disk_hit_child_us.med <= 500.0 ? "met" : "MISSED", fs.disk_hit_child_us.med / 1e3,
      fs.child_open_ms.med, fs.child_open_ms.med + fs.disk_hit_child_us.med / 1e3);
  printf(
      "\n| kernel (sm_90 CUBIN) | new process, NVRTC loaded: load + create + hit (ms) | new "
      "process, lazy (NVRTC not loaded): create (us) | hit (us) | first artifact (ms) |\n");
  printf("|---|---:|---:|---:|---:|\n");
  for (int i = 0; i < 2; i++) {
    const figures *f = all[i];
    printf("| %d lines | %.2f | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.3f (%.3f-%.3f) |\n",
           lines[i],
           f->child_open_ms.med + (f->child_create_us.med + f->disk_hit_child_us.med) / 1e3,
           f->lazy_create_us.med, f->lazy_create_us.min, f->lazy_create_us.max,
           f->lazy_hit_us.med, f->lazy_hit_us.min, f->lazy_hit_us.max, f->lazy_first_us.med / 1e3,
           f->lazy_first_us.min / 1e3, f->lazy_first_us.max / 1e3);
  }
  printf(
      "goal: a new process's first artifact from a warm disk cache <= 0.3 ms with NVRTC not "
      "loaded (20 lines): %s (%.3f ms; 0 NVRTC calls, libnvrtc not mapped: checked in each "
      "child)\n",
      fs.lazy_first_us.med <= 300.0 ? "met" : "MISSED", fs.lazy_first_us.med / 1e3);
  measure_roots(lib, repeats, batch);
  (void)t4a_bench_link_rows(lib, repeats, batch / 10 > 0 ? batch / 10 : 1);
  free(large);
  t4a_nvrtc_lib_release(lib);
  return close_json();
}
