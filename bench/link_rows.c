/* nvrtc_bench's link rows: what the link cache saves, on the CPU (nvJitLink needs no GPU).
 *
 * Inputs: a device library of 16 functions (one translation unit) and a 20-line kernel that calls
 * all of them, each compiled once by NVRTC to sm_90 LTO-IR (-rdc=true). Figures (median of R, with
 * the minimum and maximum):
 *   link         t4a_jitlink_link (uncached: nvJitLinkCreate .. Destroy), after one warm-up
 *                link; R repeats
 *   memory hit   t4a_jitlink_cache_link answered from memory, plus the artifact release; R
 *                batches of B calls (per call). It hashes both inputs' bytes (XXH3-128) for the
 *                identity record on every call.
 *   disk hit     a fresh link cache over a populated directory, its first call; R caches
 * Every figure times completion (the CUBIN is in hand). Nothing is interleaved with a raw path:
 * the uncached link is nvJitLink's own work plus one allocation and copy of the CUBIN. */
#define _GNU_SOURCE
#include "bench/link_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T4A_BENCH_NAME "nvrtc_bench"
#include "bench/harness.h"
#include "t4a/jitlink.h"
#include "t4a/status.h"

static char *library_source(void) {
  size_t cap = 16384, n = 0;
  char *s = malloc(cap);
  if (s == NULL) return NULL;
  for (int k = 0; k < 16; k++) {
    n += (size_t)snprintf(s + n, cap - n,
                          "extern \"C\" __device__ float lib_f%d(float x, float y) {\n"
                          "  float t = x * %d.25f + y;\n"
                          "  return t > %d.0f ? t - %d.0f : sqrtf(fabsf(t));\n"
                          "}\n",
                          k, k + 1, k + 2, k + 2);
  }
  return s;
}

static char *kernel_source(void) {
  size_t cap = 8192, n = 0;
  char *s = malloc(cap);
  if (s == NULL) return NULL;
  for (int k = 0; k < 16; k++) {
    n += (size_t)snprintf(s + n, cap - n, "extern \"C\" __device__ float lib_f%d(float, float);\n",
                          k);
  }
  n += (size_t)snprintf(s + n, cap - n,
                        "extern \"C\" __global__ void apply(const float *x, float *y, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i >= n) return;\n"
                        "  float v = x[i], w = y[i];\n");
  for (int k = 0; k < 16; k++) n += (size_t)snprintf(s + n, cap - n, "  v = lib_f%d(v, w);\n", k);
  snprintf(s + n, cap - n, "  y[i] = v;\n}\n");
  return s;
}

static void fail(const char *what) {
  t4a_error e;
  char buf[600];
  t4a_error_last(&e);
  fprintf(stderr, "nvrtc_bench: %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  exit(1);
}

static t4a_nvrtc_artifact *lto(t4a_nvrtc_lib *nvrtc, const char *src, const char *name) {
  static const char *const rdc[1] = {"-rdc=true"};
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = name;
  r.source = src;
  r.target = "sm_90";
  r.output = T4A_NVRTC_OUTPUT_LTOIR;
  r.options = rdc;
  r.num_options = 1;
  t4a_nvrtc_artifact *a = NULL;
  if (t4a_nvrtc_compile(nvrtc, &r, &a, NULL) != T4A_OK) fail("compile to LTO-IR");
  return a;
}

int t4a_bench_link_rows(t4a_nvrtc_lib *nvrtc, int repeats, int batch) {
  uint64_t t0 = t4a_bench_now_ns();
  t4a_jitlink_lib *jl = NULL;
  if (t4a_jitlink_lib_open(NULL, &jl) != T4A_OK) {
    printf("\nlink rows: nvJitLink is not available (not run)\n");
    return 1;
  }
  double open_ms = (double)(t4a_bench_now_ns() - t0) / 1e6;
  char *ls = library_source(), *ks = kernel_source();
  if (ls == NULL || ks == NULL) exit(1);
  t4a_nvrtc_artifact *lib = lto(nvrtc, ls, "lib16.cu"), *kern = lto(nvrtc, ks, "apply.cu");
  size_t lib_bytes = 0, kern_bytes = 0, cubin_bytes = 0;
  (void)t4a_nvrtc_artifact_data(lib, &lib_bytes);
  (void)t4a_nvrtc_artifact_data(kern, &kern_bytes);
  const t4a_nvrtc_artifact *in[2] = {kern, lib};
  t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
  r.inputs = in;
  r.num_inputs = 2;
  double *v = calloc((size_t)repeats, sizeof *v);
  if (v == NULL) exit(1);
  t4a_nvrtc_artifact *a = NULL;

  /* Uncached links, after a warm-up. */
  uint64_t w0 = t4a_bench_now_ns();
  if (t4a_jitlink_link(jl, &r, &a, NULL) != T4A_OK) fail("link");
  double first_ms = (double)(t4a_bench_now_ns() - w0) / 1e6;
  (void)t4a_nvrtc_artifact_data(a, &cubin_bytes);
  t4a_nvrtc_artifact_release(a);
  for (int i = 0; i < repeats; i++) {
    uint64_t s = t4a_bench_now_ns();
    if (t4a_jitlink_link(jl, &r, &a, NULL) != T4A_OK) fail("link");
    v[i] = (double)(t4a_bench_now_ns() - s) / 1e6;
    t4a_nvrtc_artifact_release(a);
  }
  t4a_bench_stats link_ms = t4a_bench_stats_of(v, (size_t)repeats);

  /* Memory hits. */
  t4a_jitlink_cache *c = NULL;
  if (t4a_jitlink_cache_create(jl, NULL, &c) != T4A_OK) fail("link cache");
  if (t4a_jitlink_cache_link(c, &r, &a, NULL) != T4A_OK) fail("cached link");
  t4a_nvrtc_artifact_release(a);
  for (int i = 0; i < repeats; i++) {
    uint64_t s = t4a_bench_now_ns();
    for (int j = 0; j < batch; j++) {
      if (t4a_jitlink_cache_link(c, &r, &a, NULL) != T4A_OK) fail("memory hit");
      t4a_nvrtc_artifact_release(a);
    }
    v[i] = (double)(t4a_bench_now_ns() - s) / 1e3 / batch;
  }
  t4a_bench_stats mem_us = t4a_bench_stats_of(v, (size_t)repeats);
  struct t4a_jitlink_cache_stats cs;
  t4a_jitlink_cache_stats(c, &cs);
  if (cs.counters.jitlink_links != 1) {
    fprintf(stderr, "nvrtc_bench: link-cache memory hits linked (%llu)\n",
            (unsigned long long)cs.counters.jitlink_links);
    exit(1);
  }
  t4a_jitlink_cache_destroy(c);

  /* Disk hits: a fresh cache over a populated directory. */
  char dir[] = "/tmp/t4a-link-bench-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  t4a_jitlink_cache_options o = T4A_JITLINK_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  if (t4a_jitlink_cache_create(jl, &o, &c) != T4A_OK) fail("disk link cache");
  if (t4a_jitlink_cache_link(c, &r, &a, NULL) != T4A_OK) fail("populate");
  t4a_nvrtc_artifact_release(a);
  t4a_jitlink_cache_destroy(c);
  for (int i = 0; i < repeats; i++) {
    if (t4a_jitlink_cache_create(jl, &o, &c) != T4A_OK) fail("disk link cache");
    t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
    uint64_t s = t4a_bench_now_ns();
    if (t4a_jitlink_cache_link(c, &r, &a, &out) != T4A_OK) fail("disk hit");
    v[i] = (double)(t4a_bench_now_ns() - s) / 1e3;
    if (out.origin != T4A_NVRTC_ORIGIN_DISK) {
      fprintf(stderr, "nvrtc_bench: expected a link-cache disk hit\n");
      exit(1);
    }
    t4a_nvrtc_artifact_release(a);
    t4a_jitlink_cache_destroy(c);
  }
  t4a_bench_stats disk_us = t4a_bench_stats_of(v, (size_t)repeats);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "nvrtc_bench: could not remove %s\n", dir);

  int major = 0, minor = 0;
  t4a_jitlink_lib_version(jl, &major, &minor);
  printf("\nnvJitLink %d.%d (%s): load + build identity %.2f ms; first link in this process "
         "%.2f ms\n",
         major, minor, t4a_jitlink_lib_origin(jl), open_ms, first_ms);
  printf("\n| link (2 LTO-IR inputs: %zu + %zu bytes -> sm_90 CUBIN %zu bytes) | link (ms) | "
         "link-cache memory hit (us) | link-cache disk hit, same process (us) |\n",
         kern_bytes, lib_bytes, cubin_bytes);
  printf("|---|---:|---:|---:|\n");
  printf("| 16-function library + 20-line kernel | %.2f (%.2f-%.2f) | %.3f (%.3f-%.3f) | %.1f "
         "(%.1f-%.1f) |\n",
         link_ms.med, link_ms.min, link_ms.max, mem_us.med, mem_us.min, mem_us.max, disk_us.med,
         disk_us.min, disk_us.max);
  free(v);
  free(ls);
  free(ks);
  t4a_nvrtc_artifact_release(lib);
  t4a_nvrtc_artifact_release(kern);
  t4a_jitlink_lib_release(jl);
  return 0;
}
