/* coldstart_bench: what a new process pays before its first work, t4a against the raw driver
 * (issue 25 item 4; results in docs/performance.md "Cold start").
 *
 *   coldstart_bench [--fake] [--samples N] [--json] [--json-file PATH] [--dir DIR] [--profile]
 *
 * Every sample is a fresh process: this program re-executes itself (posix_spawn of
 * /proc/self/exe with --child MODE) and reads back what the child measured. Samples are paired
 * and interleaved: t4a, raw, t4a, raw... for one row, after one uncounted warm-up pair (the page
 * cache holds the driver, NVRTC and the cache files). Rows, each on its own pair of children:
 *
 *   open          the calls t4a_runtime_open stands for, inside the child: t4a_driver_get_default
 *                 (dlopen, the catalogue resolved) + t4a_runtime_open with the defaults, against
 *                 dlopen("libcuda.so.1") + cuGetProcAddress_v2 of the entries used + cuInit +
 *                 cuDeviceGet + cuDevicePrimaryCtxRetain + cuCtxSetCurrent + cuStreamCreate
 *                 (non-blocking) + cuMemPoolCreate + cuMemPoolSetAttribute (release threshold).
 *   open_spawn    the same children timed from the parent's posix_spawn to the child's last call
 *                 (exec, dynamic loading of this binary included, the same on both sides).
 *   first_kernel  new process to the first kernel's result from a warm disk cache, from the
 *                 parent's posix_spawn: t4a_driver_get_default, t4a_runtime_open with a disk
 *                 directory, t4a_runtime_compile (a disk hit of the lazy cache: the child fails if
 *                 NVRTC compiled), t4a_runtime_load, t4a_runtime_function, t4a_runtime_buffer,
 *                 t4a_runtime_launch, t4a_runtime_download; against dlopen + resolve + cuInit +
 *                 primary context + reading the CUBIN file + cuModuleLoadData +
 *                 cuModuleGetFunction + cuMemAlloc + cuLaunchKernel + cuMemcpyDtoHAsync on the
 *                 legacy stream + cuStreamSynchronize.
 *                 Both children check the value the kernel wrote.
 *   first_kernel_in_process  the same children, timed inside the child from its first call.
 *   first_kernel_pool  first_kernel against a raw child whose buffer comes from a memory pool
 *                 (cuMemPoolCreate + cuMemAllocFromPoolAsync on the legacy stream) instead of
 *                 cuMemAlloc, as t4a's buffers do: a process's first allocation from any pool
 *                 pays the driver's one-time set-up, which cuMemAlloc does not.
 *   open_min_ring  open with the smallest staging ring (one 4 KiB chunk) against the same raw
 *                 sequence: with the ring pinned at the first staged transfer, as open (a check
 *                 that open pays nothing for the ring's size).
 *
 * Figures: min / median / max over the samples per side, t4a/raw of the medians, the min-max of
 * the per-pair ratios; the t4a child's heap allocations (t4a_heap_allocations) during its calls.
 * --profile prints, per t4a child kind, what its calls asked of the driver (on --fake: every
 * entry called, and the pinned bytes; the CPU-side look of issue 25 item 4) and, on a real
 * driver, three first-kernel children per side with each step's own time ("steps:" lines).
 *
 * --fake: the same children on the fake driver of the tests (each child creates its own; NVRTC
 * compiles for real in the parent's setup): a smoke test whose timings mean nothing and are never
 * printed ("smoke: ok NAME" lines). Exit status: 0 when every sample ran and every result was
 * right, 1 otherwise, 2 for bad usage, 77 without a driver (real mode).
 *
 * Layer: a program over //:t4a, the driver seam (the catalogue's pinned versions, for the raw
 * side's cuGetProcAddress_v2), the fake driver and the benchmarks' harness. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t4a/t4a.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/lsan/nvrtc_suppressions.h"
#define T4A_BENCH_NAME "coldstart_bench"
#include "bench/harness.h"

extern char **environ;

static const char k_source[] =
    "extern \"C\" __global__ void set_value(int *p, int v) { *p = v; }\n";
enum { VALUE = 0x5eed, MAX_SAMPLES = 1000 };

/* ---- the children ---- */

typedef enum mode {
  OPEN_T4A,
  OPEN_RAW,
  FIRST_T4A,
  FIRST_RAW,
  OPEN_T4A_MIN_RING,
  FIRST_RAW_POOL,
  NUM_MODES
} mode;
static const char *const k_mode_names[NUM_MODES] = {"open-t4a", "open-raw", "first-t4a",
                                                    "first-raw", "open-t4a-min-ring", "first-raw-pool"};

/* The fake's kernel: *p = v. */
static void fake_set_value(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p = *(CUdeviceptr *)params[0];
  int *dst = t4a_fake_deref_write(l, p, sizeof *dst);
  if (dst != NULL) *dst = *(int *)params[1];
}

static t4a_fake *make_fake(void) {
  t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
  fo.mem_bytes = (uint64_t)256 << 20;
  t4a_fake *fk = NULL;
  if (t4a_fake_create(&fo, &fk) != T4A_OK) return NULL;
  static const size_t sizes[2] = {8, 4};
  t4a_fake_register_kernel(fk, "set_value", 2, sizes, fake_set_value, NULL);
  return fk;
}

/* The catalogue's pinned version of an entry (the same signature t4a calls through). */
static int catalog_version(const char *name) {
#define T4A_COLD_VERSION_(n, version, need) \
  if (strcmp(#n, name) == 0) return version;
  T4A_DRIVER_CATALOG(T4A_COLD_VERSION_)
#undef T4A_COLD_VERSION_
  return 0;
}

/* The raw side's driver: dlopen + cuGetProcAddress_v2 of only the entries it calls (what a
 * program pays to reach them), or the fake's own table. */
#define T4A_COLD_RAW_ENTRIES(X)                                                                  \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuStreamCreate)     \
  X(cuMemPoolCreate) X(cuMemPoolSetAttribute) X(cuModuleLoadData) X(cuModuleGetFunction)        \
  X(cuMemAlloc) X(cuMemAllocFromPoolAsync) X(cuLaunchKernel) X(cuMemcpyDtoHAsync)              \
  X(cuStreamSynchronize)

static int raw_resolve(t4a_fake *fk, t4a_driver_table *t) {
  memset(t, 0, sizeof *t);
  if (fk != NULL) {
    const t4a_driver_table *f = t4a_fake_table(fk);
#define T4A_COLD_COPY_(n) t->n = f->n;
    T4A_COLD_RAW_ENTRIES(T4A_COLD_COPY_)
#undef T4A_COLD_COPY_
    return 1;
  }
  void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) return 0;
  PFN_cuGetProcAddress_v12000 get = NULL;
  *(void **)&get = dlsym(dl, "cuGetProcAddress_v2");
  if (get == NULL) return 0;
  int ok = 1;
#define T4A_COLD_GET_(n)                                                                         \
  {                                                                                              \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                     \
    if (get(#n, (void **)&t->n, catalog_version(#n), CU_GET_PROC_ADDRESS_DEFAULT, &q) !=         \
            CUDA_SUCCESS ||                                                                      \
        t->n == NULL)                                                                            \
      ok = 0;                                                                                    \
  }
  T4A_COLD_RAW_ENTRIES(T4A_COLD_GET_)
#undef T4A_COLD_GET_
  return ok; /* the library stays loaded until the child exits, as a linked libcuda would */
}

typedef struct child_out {
  uint64_t start_ns, end_ns; /* the child's first call, its result */
  uint64_t heap;             /* t4a heap allocations between them */
  int ok;
  char why[200];
  /* --profile: the time after each step of the child (ns since start_ns), named. */
  const char *step_name[12];
  uint64_t step_ns[12];
  int steps;
} child_out;

static void step(child_out *o, const char *name) {
  if (o->steps < (int)(sizeof o->step_ns / sizeof o->step_ns[0])) {
    o->step_name[o->steps] = name;
    o->step_ns[o->steps++] = t4a_bench_now_ns() - o->start_ns;
  }
}

static void why(child_out *o, const char *what, t4a_status st) {
  char buf[160];
  t4a_error e;
  t4a_error_last(&e);
  if (e.status != st) e.status = st;
  snprintf(o->why, sizeof o->why, "%s: %s", what, t4a_error_format(&e, buf, sizeof buf));
}

/* The fake's counts of the entries an open uses, for --profile. */
static void print_fake_profile(t4a_fake *fk, FILE *f) {
  static const char *const entries[] = {
      "cuInit", "cuDeviceGet", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
      "cuCtxSetCurrent", "cuCtxGetCurrent", "cuStreamCreateWithPriority", "cuEventCreate",
      "cuMemPoolCreate", "cuMemPoolSetAttribute", "cuMemHostAlloc", "cuModuleLoadData",
      "cuModuleLoadDataEx", "cuLaunchKernel", "cuMemAllocFromPoolAsync", "cuMemcpyDtoHAsync"};
  fprintf(f, "profile-fake:");
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    uint64_t n = t4a_fake_calls(fk, entries[i]);
    if (n > 0) fprintf(f, " %s=%" PRIu64, entries[i], n);
  }
  fprintf(f, "\n");
}

/* The staging memory the runtime's ring pinned (the fake's allocation sizes), for --profile. */
static void print_fake_staging(t4a_fake *fk, t4a_runtime *rt, FILE *f) {
  size_t bytes = 0;
  uint32_t chunks = 0;
  t4a_xfer *x = rt != NULL ? t4a_runtime_xfer(rt) : NULL;
  for (uint32_t i = 0; x != NULL && i < t4a_xfer_num_chunks(x); i++) {
    void *host = t4a_xfer_chunk_host(x, i);
    if (host == NULL) continue;
    bytes += t4a_fake_host_alloc_bytes(fk, host);
    chunks++;
  }
  fprintf(f, "staging-pinned: %zu bytes in %" PRIu32 " chunks\n", bytes, chunks);
}

static void run_t4a(int first, int min_ring, int fake, const char *dir, int profile,
                    child_out *o) {
  t4a_fake *fk = fake ? make_fake() : NULL;
  if (fake && fk == NULL) {
    snprintf(o->why, sizeof o->why, "the fake driver");
    return;
  }
  t4a_driver *drv = NULL;
  t4a_runtime *rt = NULL;
  t4a_nvrtc_artifact *art = NULL;
  t4a_module *mod = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *buf = NULL;
  char cache[4096];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  uint64_t h0 = t4a_heap_allocations();
  o->start_ns = t4a_bench_now_ns();
  t4a_status st = fk != NULL ? t4a_fake_driver(fk, &drv) : t4a_driver_get_default(&drv);
  if (st != T4A_OK) {
    why(o, "the driver", st);
    goto out;
  }
  step(o, "driver");
  t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
  ro.driver = drv;
  if (first) ro.artifacts.disk_dir = cache;
  if (min_ring) { /* the smallest staging ring: what open costs without the default one */
    ro.xfer.chunk_bytes = T4A_XFER_MIN_CHUNK_BYTES;
    ro.xfer.num_chunks = 1;
  }
  st = t4a_runtime_open(0, &ro, &rt);
  if (st != T4A_OK) {
    why(o, "t4a_runtime_open", st);
    goto out;
  }
  step(o, "open");
  if (!first) {
    o->end_ns = t4a_bench_now_ns();
    o->heap = t4a_heap_allocations() - h0;
    o->ok = 1;
    goto out;
  }
  int value = 0;
  int32_t v = VALUE;
  st = t4a_runtime_compile(rt, k_source, "coldstart.cu", &art);
  step(o, "compile");
  if (st == T4A_OK) st = t4a_runtime_load(rt, art, &mod);
  step(o, "load");
  if (st == T4A_OK) st = t4a_runtime_function(rt, mod, "set_value", &fn);
  step(o, "function");
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof value, &buf);
  step(o, "buffer");
  if (st == T4A_OK) {
    t4a_arg args[2] = {t4a_arg_buffer(buf, 0), t4a_arg_scalar(&v, sizeof v)};
    st = t4a_runtime_launch(rt, fn, 1, 1, args, 2);
  }
  step(o, "launch");
  if (st == T4A_OK) st = t4a_runtime_download(rt, buf, 0, &value, sizeof value);
  step(o, "download");
  o->end_ns = t4a_bench_now_ns();
  o->heap = t4a_heap_allocations() - h0;
  if (st != T4A_OK) {
    why(o, "the first kernel", st);
    goto out;
  }
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  if (cs.counters.nvrtc_compile_attempts != 0 || cs.counters.nvrtc_disk_hits != 1) {
    snprintf(o->why, sizeof o->why,
             "not a warm disk cache: %" PRIu64 " NVRTC compiles, %" PRIu64 " disk hits",
             (uint64_t)cs.counters.nvrtc_compile_attempts, (uint64_t)cs.counters.nvrtc_disk_hits);
  } else if (value != VALUE) {
    snprintf(o->why, sizeof o->why, "the kernel wrote %d, not %d", value, VALUE);
  } else {
    o->ok = 1;
  }
out:
  if (profile && fk != NULL) {
    print_fake_profile(fk, stdout);
    print_fake_staging(fk, rt, stdout);
  }
  t4a_buffer_release(buf);
  t4a_function_release(fn);
  t4a_module_release(mod);
  t4a_nvrtc_artifact_release(art);
  if (rt != NULL && (st = t4a_runtime_close(rt)) != T4A_OK && o->ok) {
    why(o, "t4a_runtime_close", st);
    o->ok = 0;
  }
  t4a_driver_release(drv);
  if (fk != NULL) {
    (void)t4a_fake_table(fk)->cuCtxSetCurrent(NULL);
    t4a_fake_progress(fk);
    if (!t4a_fake_nothing_live(fk) && o->ok) {
      snprintf(o->why, sizeof o->why, "objects left alive on the fake after close");
      o->ok = 0;
    }
    t4a_fake_destroy(fk);
  }
}

static int cu_ok(CUresult r, const char *what, child_out *o) {
  if (r == CUDA_SUCCESS) return 1;
  snprintf(o->why, sizeof o->why, "%s: CUresult %d", what, (int)r);
  return 0;
}

/* first: the first kernel (else open); pool: its buffer from a memory pool made for it
 * (cuMemPoolCreate + cuMemAllocFromPoolAsync on the legacy stream, as t4a's buffers come from a
 * pool) instead of cuMemAlloc. */
static void run_raw(int first, int pool_buffer, int fake, const char *dir, child_out *o) {
  t4a_fake *fk = fake ? make_fake() : NULL;
  if (fake && fk == NULL) {
    snprintf(o->why, sizeof o->why, "the fake driver");
    return;
  }
  t4a_driver_table t;
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  CUstream s = NULL;
  CUmemoryPool pool = NULL;
  CUmodule m = NULL;
  CUfunction f = NULL;
  CUdeviceptr d = 0;
  unsigned char *image = NULL;
  int value = 0;
  o->start_ns = t4a_bench_now_ns();
  if (!raw_resolve(fk, &t)) {
    snprintf(o->why, sizeof o->why, "libcuda.so.1 or its entries: %s", dlerror());
    goto out;
  }
  step(o, "resolve");
  if (!cu_ok(t.cuInit(0), "cuInit", o) || !cu_ok(t.cuDeviceGet(&dev, 0), "cuDeviceGet", o)) {
    goto out;
  }
  step(o, "init");
  if (!cu_ok(t.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", o) ||
      !cu_ok(t.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", o)) {
    goto out;
  }
  step(o, "context");
  if (!first) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)dev;
    cuuint64_t threshold = UINT64_MAX;
    if (!cu_ok(t.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", o) ||
        !cu_ok(t.cuMemPoolCreate(&pool, &props), "cuMemPoolCreate", o) ||
        !cu_ok(t.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
               "cuMemPoolSetAttribute", o)) {
      goto out;
    }
    o->end_ns = t4a_bench_now_ns();
    o->ok = 1;
    goto out;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/kernel.cubin", dir);
  FILE *fp = fopen(path, "rb");
  long n = -1;
  if (fp != NULL && fseek(fp, 0, SEEK_END) == 0) n = ftell(fp);
  if (n > 0 && fseek(fp, 0, SEEK_SET) == 0) image = malloc((size_t)n);
  if (image == NULL || fread(image, 1, (size_t)n, fp) != (size_t)n) {
    snprintf(o->why, sizeof o->why, "cannot read %.160s", path);
    if (fp != NULL) fclose(fp);
    goto out;
  }
  fclose(fp);
  step(o, "read");
  int32_t v = VALUE;
  void *params[2] = {&d, &v};
  if (!cu_ok(t.cuModuleLoadData(&m, image), "cuModuleLoadData", o)) goto out;
  step(o, "load");
  if (!cu_ok(t.cuModuleGetFunction(&f, m, "set_value"), "cuModuleGetFunction", o)) goto out;
  step(o, "function");
  if (pool_buffer) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)dev;
    if (!cu_ok(t.cuMemPoolCreate(&pool, &props), "cuMemPoolCreate", o) ||
        !cu_ok(t.cuMemAllocFromPoolAsync(&d, sizeof value, pool, NULL), "cuMemAllocFromPoolAsync",
               o)) {
      goto out;
    }
  } else if (!cu_ok(t.cuMemAlloc(&d, sizeof value), "cuMemAlloc", o)) {
    goto out;
  }
  step(o, "buffer");
  if (!cu_ok(t.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel", o)) {
    goto out;
  }
  step(o, "launch");
  if (!cu_ok(t.cuMemcpyDtoHAsync(&value, d, sizeof value, NULL), "cuMemcpyDtoHAsync", o) ||
      !cu_ok(t.cuStreamSynchronize(NULL), "cuStreamSynchronize", o)) {
    goto out;
  }
  step(o, "download");
  o->end_ns = t4a_bench_now_ns();
  if (value != VALUE) {
    snprintf(o->why, sizeof o->why, "the kernel wrote %d, not %d", value, VALUE);
  } else {
    o->ok = 1;
  }
out:
  /* Nothing is torn down on the real driver: the process exits (as a raw program may). On the
   * fake, the objects go with the fake. */
  free(image);
  if (fk != NULL) t4a_fake_destroy(fk);
}

static int child_main(int argc, char **argv) {
  /* --child MODE T0_NS DIR [--fake] [--profile] */
  if (argc < 5) return 2;
  int m = -1;
  for (int i = 0; i < NUM_MODES; i++) {
    if (strcmp(argv[2], k_mode_names[i]) == 0) m = i;
  }
  if (m < 0) return 2;
  uint64_t t0 = strtoull(argv[3], NULL, 10);
  const char *dir = argv[4];
  int fake = 0, profile = 0;
  for (int i = 5; i < argc; i++) {
    if (strcmp(argv[i], "--fake") == 0) fake = 1;
    if (strcmp(argv[i], "--profile") == 0) profile = 1;
  }
  child_out o;
  memset(&o, 0, sizeof o);
  if (m == OPEN_T4A || m == FIRST_T4A || m == OPEN_T4A_MIN_RING) {
    run_t4a(m == FIRST_T4A, m == OPEN_T4A_MIN_RING, fake, dir, profile, &o);
  } else {
    run_raw(m == FIRST_RAW || m == FIRST_RAW_POOL, m == FIRST_RAW_POOL, fake, dir, &o);
  }
  if (!o.ok) {
    printf("fail %s\n", o.why[0] ? o.why : "?");
    return 1;
  }
  if (profile && !fake && o.steps > 0) { /* each step's own time, us (real mode only) */
    printf("steps:");
    for (int i = 0; i < o.steps; i++) {
      printf(" %s=%.1f", o.step_name[i],
             (double)(o.step_ns[i] - (i > 0 ? o.step_ns[i - 1] : 0)) * 1e-3);
    }
    printf("\n");
  }
  printf("ok %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", o.end_ns - o.start_ns, o.end_ns - t0, o.heap);
  return 0;
}

/* ---- the parent ---- */

typedef struct sample {
  double in_process_s, from_spawn_s;
  uint64_t heap;
} sample;

/* Spawns one child of `m` and reads its answer; 1 on a right answer. */
static int spawn_child(mode m, const char *dir, int fake, int profile, sample *out, char *err,
                       size_t err_n) {
  char t0s[32], self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    snprintf(err, err_n, "readlink /proc/self/exe: %s", strerror(errno));
    return 0;
  }
  self[n] = '\0';
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(err, err_n, "pipe: %s", strerror(errno));
    return 0;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  char *argv[8];
  int a = 0;
  argv[a++] = self;
  argv[a++] = "--child";
  argv[a++] = (char *)k_mode_names[m];
  argv[a++] = t0s;
  argv[a++] = (char *)dir;
  if (fake) argv[a++] = "--fake";
  if (profile) argv[a++] = "--profile";
  argv[a] = NULL;
  pid_t pid;
  snprintf(t0s, sizeof t0s, "%" PRIu64, t4a_bench_now_ns());
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    snprintf(err, err_n, "posix_spawn: %s", strerror(rc));
    return 0;
  }
  char buf[2048];
  size_t got = 0;
  ssize_t r;
  while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) != 0) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    got += (size_t)r;
  }
  buf[got] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  char *line = strstr(buf, "ok ");
  while (line != NULL && line != buf && line[-1] != '\n') line = strstr(line + 1, "ok ");
  uint64_t in_ns = 0, sp_ns = 0, heap = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line == NULL ||
      sscanf(line, "ok %" SCNu64 " %" SCNu64 " %" SCNu64, &in_ns, &sp_ns, &heap) != 3) {
    snprintf(err, err_n, "child %s: exit %d: %s", k_mode_names[m],
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, buf);
    return 0;
  }
  if (profile) {
    static const char *const tags[] = {"profile-fake:", "staging-pinned:", "steps:"};
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
      char *p = strstr(buf, tags[t]);
      if (p == NULL) continue;
      char *e = strchr(p, '\n');
      printf("%s: %.*s\n", k_mode_names[m], e ? (int)(e - p) : (int)strlen(p), p);
    }
  }
  out->in_process_s = (double)in_ns * 1e-9;
  out->from_spawn_s = (double)sp_ns * 1e-9;
  out->heap = heap;
  return 1;
}

typedef struct row {
  const char *name, *what, *t4a_label, *raw_label;
  mode t4a, raw;
  int from_spawn;
} row;

static void print_stats_json(FILE *f, const char *key, const char *label, t4a_bench_stats s) {
  fprintf(f, "\"%s\":{\"label\":\"%s\",\"min\":%.3f,\"median\":%.3f,\"max\":%.3f}", key, label,
          s.min * 1e6, s.med * 1e6, s.max * 1e6);
}

/* The two kinds of children, `samples` pairs each (after a warm-up pair); the four rows come
 * from them: open / open_spawn from the open children, first_kernel / first_kernel_in_process
 * from the first-kernel children. */
static int measure_pairs(mode mt, mode mr, const row *rows, int nrows, const char *dir, int fake,
                         int samples, FILE *out, FILE *json) {
  sample *st = calloc((size_t)samples, sizeof *st), *sr = calloc((size_t)samples, sizeof *sr);
  double *x = calloc((size_t)samples, sizeof *x), *y = calloc((size_t)samples, sizeof *y),
         *p = calloc((size_t)samples, sizeof *p);
  char err[2400];
  int ok = st != NULL && sr != NULL && x != NULL && y != NULL && p != NULL;
  sample warm;
  if (ok) ok = spawn_child(mt, dir, fake, 0, &warm, err, sizeof err) &&
               spawn_child(mr, dir, fake, 0, &warm, err, sizeof err);
  for (int i = 0; ok && i < samples; i++) { /* t4a, raw, t4a, raw... */
    ok = spawn_child(mt, dir, fake, 0, &st[i], err, sizeof err) &&
         spawn_child(mr, dir, fake, 0, &sr[i], err, sizeof err);
  }
  if (!ok) {
    fprintf(stderr, "coldstart_bench: %s\n", st == NULL ? "out of memory" : err);
    if (out != NULL) fprintf(out, "FAILED %s: %s\n", rows[0].name, err);
    for (int r = 0; json != NULL && r < nrows; r++) {
      fprintf(json, "{\"name\":\"%s\",\"error\":\"a child failed\"}\n", rows[r].name);
    }
  }
  uint64_t heap = 0;
  for (int i = 0; ok && i < samples; i++) heap += st[i].heap;
  for (int r = 0; ok && r < nrows; r++) {
    const row *w = &rows[r];
    for (int i = 0; i < samples; i++) {
      x[i] = w->from_spawn ? st[i].from_spawn_s : st[i].in_process_s;
      y[i] = w->from_spawn ? sr[i].from_spawn_s : sr[i].in_process_s;
      p[i] = x[i] / y[i];
    }
    t4a_bench_stats a = t4a_bench_stats_of(x, (size_t)samples),
                    b = t4a_bench_stats_of(y, (size_t)samples),
                    q = t4a_bench_stats_of(p, (size_t)samples);
    if (fake) {
      if (out != NULL) {
        fprintf(out, "smoke: ok %s (%d fresh processes per side; t4a heap allocations %" PRIu64
                     " per process)\n", w->name, samples + 1, heap / (uint64_t)samples);
      }
      if (json != NULL) {
        fprintf(json, "{\"name\":\"%s\",\"smoke\":\"ok\",\"window\":\"done\",\"samples\":%d,"
                      "\"counters_t4a\":{\"ops\":%d,\"heap_allocations\":%" PRIu64 "}}\n",
                w->name, samples, samples, heap);
      }
      continue;
    }
    if (out != NULL) {
      char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
      fprintf(out, "%-24s done %3d x  t4a %s [%s-%s]  raw %s [%s-%s] us  t4a/raw %.3f "
                   "[%.3f-%.3f]\n    %s\n    t4a heap allocations per process: %" PRIu64 "\n",
              w->name, samples, t4a_bench_fmt_us(a.med * 1e6, b1, sizeof b1),
              t4a_bench_fmt_us(a.min * 1e6, b2, sizeof b2),
              t4a_bench_fmt_us(a.max * 1e6, b3, sizeof b3),
              t4a_bench_fmt_us(b.med * 1e6, b4, sizeof b4),
              t4a_bench_fmt_us(b.min * 1e6, b5, sizeof b5),
              t4a_bench_fmt_us(b.max * 1e6, b6, sizeof b6), a.med / b.med, q.min, q.max, w->what,
              heap / (uint64_t)samples);
    }
    if (json != NULL) {
      fprintf(json, "{\"name\":\"%s\",\"group\":\"coldstart\",\"what\":\"%s\",\"window\":\"done\","
                    "\"samples\":%d,\"order\":\"ABAB, one fresh process per sample\","
                    "\"unit\":\"us\",",
              w->name, w->what, samples);
      print_stats_json(json, "t4a", w->t4a_label, a);
      fprintf(json, ",");
      print_stats_json(json, "raw", w->raw_label, b);
      fprintf(json, ",\"ratio\":%.4f,\"ratio_block_min\":%.4f,\"ratio_block_max\":%.4f,"
                    "\"counters_t4a\":{\"ops\":%d,\"heap_allocations\":%" PRIu64 "}}\n",
              a.med / b.med, q.min, q.max, samples, heap);
    }
  }
  if (out != NULL) fflush(out);
  if (json != NULL) fflush(json);
  free(st);
  free(sr);
  free(x);
  free(y);
  free(p);
  return ok;
}

/* The warm disk cache and the CUBIN file: one compile in this process, outside every sample. */
static int setup(const char *dir, int fake, char *target, size_t target_n) {
  t4a_fake *fk = fake ? make_fake() : NULL;
  t4a_driver *drv = NULL;
  t4a_runtime *rt = NULL;
  t4a_nvrtc_artifact *art = NULL;
  char cache[4096], path[4096];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(path, sizeof path, "%s/kernel.cubin", dir);
  t4a_status st = fk != NULL ? t4a_fake_driver(fk, &drv) : t4a_driver_get_default(&drv);
  if (st == T4A_DRIVER_NOT_FOUND || st == T4A_NO_DEVICE) {
    printf("SKIP: no CUDA driver (%s); try --fake\n", t4a_status_name(st));
    return -1;
  }
  t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
  ro.driver = drv;
  ro.artifacts.disk_dir = cache;
  if (st == T4A_OK) st = t4a_runtime_open(0, &ro, &rt);
  if (st == T4A_OK) st = t4a_runtime_compile(rt, k_source, "coldstart.cu", &art);
  int ok = st == T4A_OK;
  if (!ok) t4a_bench_report_failure(T4A_BENCH_NAME, "the setup's compile", st);
  if (ok) {
    size_t n = 0;
    const void *img = t4a_nvrtc_artifact_data(art, &n);
    FILE *f = fopen(path, "wb");
    ok = f != NULL && fwrite(img, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "coldstart_bench: cannot write %s\n", path);
    snprintf(target, target_n, "%s", t4a_runtime_target(rt));
  }
  t4a_nvrtc_artifact_release(art);
  if (rt != NULL && t4a_runtime_close(rt) != T4A_OK) ok = 0;
  t4a_driver_release(drv);
  if (fk != NULL) t4a_fake_destroy(fk);
  return ok;
}

static void usage(FILE *f) {
  fprintf(f, "usage: coldstart_bench [--fake] [--samples N] [--json] [--json-file PATH] "
             "[--dir DIR] [--profile]\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  int fake = 0, samples = 0, json_stdout = 0, profile = 0;
  const char *json_file = NULL, *dir_opt = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--fake") == 0) {
      fake = 1;
    } else if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = atoi(argv[++i]);
      if (samples < 1 || samples > MAX_SAMPLES) {
        usage(stderr);
        return 2;
      }
    } else if (strcmp(argv[i], "--json") == 0) {
      json_stdout = 1;
    } else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) {
      json_file = argv[++i];
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir_opt = argv[++i];
    } else if (strcmp(argv[i], "--profile") == 0) {
      profile = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (json_stdout && json_file != NULL) {
    fprintf(stderr, "coldstart_bench: --json and --json-file exclude each other\n");
    return 2;
  }
  if (samples == 0) samples = fake ? 2 : 21;
  char dir[3800];
  if (dir_opt != NULL) {
    snprintf(dir, sizeof dir, "%s", dir_opt);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
      perror(dir);
      return 2;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/coldstart_bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
      perror("mkdtemp");
      return 1;
    }
  }
  FILE *out = json_stdout ? NULL : stdout;
  FILE *json = json_stdout ? stdout : NULL;
  if (json_file != NULL && (json = fopen(json_file, "w")) == NULL) {
    perror(json_file);
    return 2;
  }
  char target[32] = "?";
  int ok = setup(dir, fake, target, sizeof target);
  if (ok < 0) return 77;
  if (ok) {
    char date[64];
    t4a_bench_utc_date(date, sizeof date);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (out != NULL) {
      fprintf(out, "# coldstart_bench%s: device 0 (%s), %ld CPUs, t4a %s, %s, %d fresh processes "
                   "per side and row kind, t4a and raw alternating; cache and CUBIN in %s\n",
              fake ? " --fake (smoke test: no timings)" : "", target, cpus, t4a_version_string(),
              date, samples, dir);
    }
    if (json != NULL) {
      fprintf(json, "{\"bench\":\"coldstart_bench\",\"mode\":\"%s\",\"target\":\"%s\","
                    "\"cpus\":%ld,\"t4a\":\"%s\",\"date\":\"%s\",\"samples\":%d}\n",
              fake ? "fake-smoke" : "gpu", target, cpus, t4a_version_string(), date, samples);
    }
    static const row open_rows[2] = {
        {"open", "t4a_driver_get_default + t4a_runtime_open (defaults) vs dlopen + "
                 "cuGetProcAddress_v2 + cuInit + primary context retain + set current + "
                 "cuStreamCreate + cuMemPoolCreate + release threshold; inside the new process",
         "t4a_driver_get_default + t4a_runtime_open", "raw open sequence", OPEN_T4A, OPEN_RAW, 0},
        {"open_spawn", "open, timed from the parent's posix_spawn (exec and this binary's "
                       "loading included on both sides)",
         "spawn to t4a_runtime_open", "spawn to the raw open sequence", OPEN_T4A, OPEN_RAW, 1},
    };
    static const row first_rows[2] = {
        {"first_kernel", "new process to the first kernel's result, warm disk cache: t4a open + "
                         "compile (disk hit) + load + launch + download vs cuInit + context + "
                         "cuModuleLoadData of the CUBIN file + launch + copy back + sync; from "
                         "posix_spawn",
         "spawn to the result through t4a", "spawn to the result, raw", FIRST_T4A, FIRST_RAW, 1},
        {"first_kernel_in_process", "first_kernel timed inside the new process from its first "
                                    "call",
         "t4a calls to the result", "raw calls to the result", FIRST_T4A, FIRST_RAW, 0},
    };
    static const row pool_rows[1] = {
        {"first_kernel_pool", "first_kernel against a raw program whose buffer comes from a memory "
                              "pool (cuMemPoolCreate + cuMemAllocFromPoolAsync) instead of "
                              "cuMemAlloc, as t4a's do: the pool's first allocation is in both; "
                              "from posix_spawn",
         "spawn to the result through t4a", "spawn to the result, raw with a pool", FIRST_T4A,
         FIRST_RAW_POOL, 1},
    };
    static const row min_ring_rows[1] = {
        {"open_min_ring", "open with the smallest staging ring (1 chunk of T4A_XFER_MIN_CHUNK_BYTES "
                          "instead of the default 2 x 16 MiB, pinned at first use either way): "
                          "open's cost does not depend on the ring; inside the new process",
         "t4a_driver_get_default + t4a_runtime_open, minimal ring", "raw open sequence",
         OPEN_T4A_MIN_RING, OPEN_RAW, 0},
    };
    if (profile) {
      sample s;
      char err[2400];
      /* open-t4a once, then first-t4a, first-raw and first-raw-pool in turn: each prints its
       * steps' times */
      static const mode kinds[] = {OPEN_T4A,  FIRST_T4A, FIRST_RAW, FIRST_RAW_POOL,
                                   FIRST_T4A, FIRST_RAW, FIRST_RAW_POOL, FIRST_T4A,
                                   FIRST_RAW, FIRST_RAW_POOL};
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        mode m = kinds[k];
        if ((m == FIRST_RAW || m == FIRST_RAW_POOL) && fake) continue;
        if (!spawn_child((mode)m, dir, fake, 1, &s, err, sizeof err)) {
          fprintf(stderr, "coldstart_bench: %s\n", err);
          ok = 0;
        } else if (out != NULL) {
          fprintf(out, "%s: %" PRIu64 " t4a heap allocations\n", k_mode_names[m], s.heap);
        }
      }
    }
    ok = measure_pairs(OPEN_T4A, OPEN_RAW, open_rows, 2, dir, fake, samples, out, json) && ok;
    ok = measure_pairs(FIRST_T4A, FIRST_RAW, first_rows, 2, dir, fake, samples, out, json) && ok;
    ok = measure_pairs(FIRST_T4A, FIRST_RAW_POOL, pool_rows, 1, dir, fake, samples, out, json) &&
         ok;
    ok = measure_pairs(OPEN_T4A_MIN_RING, OPEN_RAW, min_ring_rows, 1, dir, fake, samples, out,
                       json) &&
         ok;
  }
  if (out != NULL) fprintf(out, "%s: %s\n", fake ? "smoke" : "coldstart_bench", ok ? "ok" : "FAILED");
  if (json_file != NULL) fclose(json);
  if (dir_opt == NULL) { /* the temporary directory: its files, then itself */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (strchr(dir, '\'') == NULL && system(cmd) != 0) fprintf(stderr, "coldstart_bench: %s\n", cmd);
  }
  return ok ? 0 : 1;
}
