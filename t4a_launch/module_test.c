/* The module cache on the fake driver: image kinds and content addressing, LRU bounds by entries
 * and by bytes, unloads deferred behind queued launches (eviction, clear, destroy), functions
 * (one object per name, unknown entries typed, parameters probed once), the driver without
 * cuFuncGetParamInfo, modules leaked and counted when their context cannot be activated (A5),
 * failure sweeps. */
#include <elf.h>

#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

static int setup(void **state) { return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0); }
static int setup_no_param_info(void **state) {
  return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 1);
}
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) { return fixture_teardown(state, 0); }

/* Tests that leak on purpose (a module whose context cannot be activated, sweeps that cannot
 * prove a drain) keep what t4a counted; LeakSanitizer is told about these frames only. */
__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep",
                             "test_a5_module_leaked_without_context",
                             "test_a5_module_leaked_on_a_broken_lane")

/* ---- images ---- */

static void test_kinds_and_content_addressing(void **state) {
  fixture *f = *state;
  /* PTX told by its text; the same bytes again are a hit: one cuModuleLoadDataEx. */
  t4a_module *a = load_ptx(f), *b = load_ptx(f);
  assert_ptr_equal(a, b);
  assert_int_equal(calls(f, "cuModuleLoadDataEx"), 1);
  /* Two entry points of one image: still one load (requirement C2). */
  t4a_function *add = get_fn(a, "add"), *aff = get_fn(b, "affine");
  assert_int_equal(calls(f, "cuModuleLoadDataEx"), 1);
  /* PTX without its NUL is copied and terminated (the driver takes a C string). */
  t4a_module *c = NULL;
  CK(t4a_module_load(f->cache, k_ptx, sizeof k_ptx - 1, T4A_IMAGE_PTX, &c));
  assert_ptr_not_equal(c, a); /* other bytes, other key */
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(f->cache, &s);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.loads, 2);
  assert_int_equal(s.hits, 1);
  assert_int_equal(s.bytes, 2 * sizeof k_ptx - 1);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.module_loads, 2);

  /* The fake's own image format is none of the known kinds: AUTO refuses it, a named kind hands
   * it to the driver as it is. */
  const char *names[] = {"add"};
  size_t n = 0;
  char *img = fake_image(names, 1, &n);
  t4a_module *m = NULL;
  assert_int_equal(t4a_module_load(f->cache, img, n, T4A_IMAGE_AUTO, &m), T4A_INVALID_ARGUMENT);
  assert_null(m);
  CK(t4a_module_load(f->cache, img, n, T4A_IMAGE_CUBIN, &m));
  t4a_module_release(m);
  free(img);
  /* A kind that contradicts the bytes, truncated ELF and fatbin headers, empty images. */
  assert_int_equal(t4a_module_load(f->cache, k_ptx, sizeof k_ptx, T4A_IMAGE_CUBIN, &m),
                   T4A_INVALID_ARGUMENT);
  unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  elf[60] = 3;                            /* e_shnum: 3 section headers ... */
  memcpy(elf + 40, &(uint64_t){4096}, 8); /* ... at offset 4096 of a 64-byte image */
  elf[58] = sizeof(Elf64_Shdr) & 0xff;
  assert_int_equal(t4a_module_load(f->cache, elf, sizeof elf, T4A_IMAGE_AUTO, &m),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_load(f->cache, elf, sizeof elf, T4A_IMAGE_PTX, &m),
                   T4A_INVALID_ARGUMENT);
  unsigned char fat[32] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0, 0xff, 0xff};
  assert_int_equal(t4a_module_load(f->cache, fat, sizeof fat, T4A_IMAGE_AUTO, &m),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_load(f->cache, k_ptx, 0, T4A_IMAGE_AUTO, &m), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_load(f->cache, NULL, 4, T4A_IMAGE_AUTO, &m), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_load(f->cache, k_ptx, 4, (t4a_image_kind)9, &m),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(calls(f, "cuModuleLoadDataEx"), 3);

  t4a_function_release(add);
  t4a_function_release(aff);
  t4a_module_release(a);
  t4a_module_release(b);
  t4a_module_release(c);
  /* Cached: nothing unloads while the cache holds them. */
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
}

/* A PTX image the driver refuses: its JIT log's line is in the detail. */
static void test_jit_log_in_the_detail(void **state) {
  fixture *f = *state;
  static const char bad[] = ".version 8.0\n.visible .entry k()\n{\n  ret;\n}\n"; /* no .target */
  t4a_module *m = NULL;
  assert_int_equal(t4a_module_load(f->cache, bad, sizeof bad, T4A_IMAGE_AUTO, &m),
                   T4A_DRIVER_ERROR);
  assert_null(m);
  t4a_error e = last_error();
  assert_string_equal(e.entry, "cuModuleLoadDataEx");
  assert_int_equal(e.code, CUDA_ERROR_INVALID_IMAGE);
  assert_non_null(strstr(e.message, "PTX"));
  assert_non_null(strstr(e.message, ".target")); /* the fake's log line */
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(f->cache, &s);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.loads, 0);
}

/* Images that differ in one kernel name; their size grows with `pad`. */
static char *image_n(int i, size_t pad, size_t *bytes) {
  char *name = malloc(pad + 32);
  int at = snprintf(name, pad + 32, "k%d_", i);
  memset(name + at, 'x', pad);
  name[(size_t)at + pad] = '\0';
  const char *names[] = {name};
  char *img = fake_image(names, 1, bytes);
  free(name);
  return img;
}

static t4a_module *load_n(fixture *f, t4a_module_cache *c, int i, size_t pad) {
  size_t n = 0;
  char *img = image_n(i, pad, &n);
  t4a_module *m = NULL;
  CK(t4a_module_load(c, img, n, T4A_IMAGE_CUBIN, &m));
  free(img);
  (void)f;
  return m;
}

static void test_lru_by_entries(void **state) {
  fixture *f = *state;
  t4a_module_cache *c = NULL;
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  o.max_entries = 3;
  CK(t4a_module_cache_create(f->retire, &o, &c));
  t4a_module *m[4];
  for (int i = 0; i < 3; i++) {
    m[i] = load_n(f, c, i, 1);
    t4a_module_release(m[i]); /* the cache's reference is the last one */
  }
  t4a_module_release(load_n(f, c, 0, 1)); /* touch 0: 1 is now the least recently used */
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.hits, 1);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  m[3] = load_n(f, c, 3, 1); /* evicts 1, unloaded at once: nothing else holds it */
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.entries, 3);
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.unloads, 1);
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  /* 0, 2 and 3 are still cached (hits). */
  uint64_t loads = s.loads;
  t4a_module_release(load_n(f, c, 2, 1));
  t4a_module_release(load_n(f, c, 3, 1));
  t4a_module_release(load_n(f, c, 0, 1));
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.loads, loads);
  t4a_module_release(load_n(f, c, 1, 1)); /* loaded again: evicts 2, now the oldest */
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.loads, loads + 1);
  assert_int_equal(s.evictions, 2);
  t4a_module_release(load_n(f, c, 0, 1)); /* 0 survived */
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.loads, loads + 1);
  /* A module the caller still holds is evicted from the cache but not unloaded. */
  uint64_t unloads = calls(f, "cuModuleUnload");
  t4a_module_release(load_n(f, c, 7, 1));
  t4a_module_release(load_n(f, c, 8, 1));
  t4a_module_release(load_n(f, c, 9, 1)); /* evicts everything older, 3 included */
  assert_int_equal(calls(f, "cuModuleUnload"), unloads + 2);
  t4a_module_release(m[3]);
  assert_int_equal(calls(f, "cuModuleUnload"), unloads + 3);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.module_evictions, 5);
  t4a_module_cache_destroy(c);
  assert_int_equal(calls(f, "cuModuleUnload"), calls(f, "cuModuleLoadDataEx"));
}

static void test_lru_by_bytes(void **state) {
  fixture *f = *state;
  size_t n = 0;
  free(image_n(0, 40, &n)); /* every image_n(i < 10, 40) has n bytes */
  t4a_module_cache *c = NULL;
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  o.max_bytes = 2 * n + n / 2; /* room for two */
  CK(t4a_module_cache_create(f->retire, &o, &c));
  t4a_module_release(load_n(f, c, 0, 40));
  t4a_module_release(load_n(f, c, 1, 40));
  t4a_module_release(load_n(f, c, 0, 40)); /* 1 is the oldest */
  t4a_module_release(load_n(f, c, 2, 40)); /* evicts 1 */
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.bytes, 2 * n);
  assert_int_equal(s.evictions, 1);
  t4a_module_release(load_n(f, c, 0, 40)); /* still there */
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.loads, 3);
  /* An image larger than the whole bound is refused before the driver sees it. */
  char *big = image_n(5, 4 * n, &n);
  t4a_module *m = NULL;
  uint64_t loads = calls(f, "cuModuleLoadDataEx");
  assert_int_equal(t4a_module_load(c, big, n, T4A_IMAGE_CUBIN, &m), T4A_LIMIT_EXCEEDED);
  assert_int_equal(calls(f, "cuModuleLoadDataEx"), loads);
  free(big);
  t4a_module_cache_clear(c);
  t4a_module_cache_stats(c, &s);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.unloads, 3);
  t4a_module_cache_destroy(c);
}

/* ---- unloads deferred behind queued work ---- */

/* Launches add on a queued (not yet run) stream and drops every caller reference; `drop` then
 * takes the module out of the cache. The unload must wait until the launch ran. */
static void deferred_unload(fixture *f, int how) {
  t4a_module_cache *c = NULL;
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  o.max_entries = 1;
  CK(t4a_module_cache_create(f->retire, &o, &c));
  t4a_module *m = NULL;
  CK(t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  t4a_function *fn = get_fn(m, "add");
  t4a_buffer *a = make_buffer(f, 64), *b = make_buffer(f, 64), *out = make_buffer(f, 64);
  int *pa = view(f, a), *pb = view(f, b), *pc = view(f, out);
  for (int i = 0; i < 16; i++) {
    pa[i] = i;
    pb[i] = 100 * i;
    pc[i] = -1;
  }
  int n = 16;
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(b, 0), t4a_arg_buffer(out, 0),
                     t4a_arg_scalar(&n, sizeof n)};
  t4a_launch_config cfg = config_1d(1, 16, 0);
  CK(t4a_launch(f->retire, fn, &cfg, args, 4));
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  uint64_t unloads = calls(f, "cuModuleUnload");
  if (how == 0) {
    t4a_module_release(load_n(f, c, 1, 1)); /* evicts the PTX module */
  } else if (how == 1) {
    t4a_module_cache_clear(c);
  } else {
    t4a_module_cache_destroy(c);
    c = NULL;
  }
  /* Only the epoch holds the module now: not unloaded while its launch is queued. */
  assert_int_equal(calls(f, "cuModuleUnload"), unloads);
  assert_int_equal(pc[3], -1);
  t4a_fake_progress(f->fake);
  CK(t4a_retire_poll(f->retire)); /* seals the open epoch */
  assert_int_equal(calls(f, "cuModuleUnload"), unloads);
  t4a_fake_progress(f->fake);
  CK(t4a_retire_poll(f->retire)); /* its event completed: the keepalives go */
  assert_int_equal(calls(f, "cuModuleUnload"), unloads + 1);
  for (int i = 0; i < 16; i++) assert_int_equal(pc[i], 101 * i);
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_SUCCESS);
  t4a_buffer_release(out);
  t4a_module_cache_destroy(c);
}

static void test_eviction_waits_for_queued_launches(void **state) { deferred_unload(*state, 0); }
static void test_clear_waits_for_queued_launches(void **state) { deferred_unload(*state, 1); }
static void test_destroy_waits_for_queued_launches(void **state) { deferred_unload(*state, 2); }

/* ---- functions ---- */

static void test_functions(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *a = get_fn(m, "add"), *b = get_fn(m, "add");
  assert_ptr_equal(a, b);
  assert_string_equal(t4a_function_name(a), "add");
  assert_int_equal(t4a_function_domain(a), t4a_lane_domain(f->lane));
  uint32_t count = 0;
  int known = 0;
  CK(t4a_function_num_params(a, &count, &known));
  assert_int_equal(count, 4);
  assert_int_equal(known, 1);
  size_t off = 0, size = 0;
  CK(t4a_function_param(a, 3, &off, &size));
  assert_int_equal(off, 24);
  assert_int_equal(size, 4);
  assert_int_equal(t4a_function_param(a, 4, &off, &size), T4A_INVALID_ARGUMENT);
  /* Probed once: four parameters and the INVALID_VALUE that ends them. */
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.param_info_probes, 5);
  assert_int_equal(calls(f, "cuFuncGetParamInfo"), 5);
  /* The struct kernel's layout as the driver reports it. */
  t4a_function *aff = get_fn(m, "affine"), *vec = get_fn(m, "vec16");
  CK(t4a_function_param(aff, 1, &off, &size));
  assert_int_equal(off, 8);
  assert_int_equal(size, 24);
  CK(t4a_function_param(aff, 2, &off, &size));
  assert_int_equal(off, 32);
  CK(t4a_function_param(vec, 1, &off, &size));
  assert_int_equal(off, 16); /* 16-byte aligned */
  /* A declared count must agree with the driver's. */
  assert_int_equal(t4a_function_declare_params(a, 3), T4A_INVALID_ARGUMENT);
  CK(t4a_function_declare_params(a, 4));
  /* Unknown entry: typed, with the name. */
  t4a_function *x = NULL;
  assert_int_equal(t4a_module_get_function(m, "no_such_kernel", &x), T4A_UNKNOWN_ENTRY_POINT);
  assert_null(x);
  t4a_error e = last_error();
  assert_string_equal(e.entry, "cuModuleGetFunction");
  assert_non_null(strstr(e.message, "no_such_kernel"));
  assert_int_equal(t4a_module_get_function(m, "", &x), T4A_INVALID_ARGUMENT);
  /* Functions hold their module: it outlives the caller's module reference and the cache. */
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  t4a_function_release(a);
  t4a_function_release(b);
  t4a_function_release(aff);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  t4a_function_release(vec);
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  v = lane_counters(f);
  assert_int_equal(v.module_unloads, 1);
}

/* The driver without cuFuncGetParamInfo: only a declared count is checked. */
static void test_param_info_absent(void **state) {
  fixture *f = *state;
  assert_int_equal(t4a_driver_caps(f->drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO, 0);
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  uint32_t count = 9;
  int known = 1;
  CK(t4a_function_num_params(fn, &count, &known));
  assert_int_equal(count, 0);
  assert_int_equal(known, 0);
  assert_int_equal(lane_counters(f).param_info_probes, 0);
  t4a_buffer *a = make_buffer(f, 64), *out = make_buffer(f, 64);
  int *pa = view(f, a), *pc = view(f, out);
  for (int i = 0; i < 16; i++) pa[i] = i;
  int n = 16;
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(out, 0),
                     t4a_arg_scalar(&n, sizeof n)};
  t4a_launch_config cfg = config_1d(1, 16, 0);
  /* Undeclared: refused, nothing enqueued. */
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, args, 4), T4A_ARGUMENT_MISMATCH);
  assert_non_null(strstr(last_error().message, "t4a_function_declare_params"));
  CK(t4a_function_declare_params(fn, 4));
  CK(t4a_function_num_params(fn, &count, &known));
  assert_int_equal(count, 4);
  size_t off = 1, size = 1;
  CK(t4a_function_param(fn, 2, &off, &size));
  assert_int_equal(size, 0);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, args, 3), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  CK(t4a_launch(f->retire, fn, &cfg, args, 4));
  CK(t4a_retire_wait(f->retire));
  for (int i = 0; i < 16; i++) assert_int_equal(pc[i], 2 * i);
  /* Raw bytes: the count and the offsets' order only. */
  unsigned char raw[28];
  CUdeviceptr pa_d = (CUdeviceptr)t4a_buffer_devptr(a), po_d = (CUdeviceptr)t4a_buffer_devptr(out);
  memcpy(raw, &pa_d, 8);
  memcpy(raw + 8, &pa_d, 8);
  memcpy(raw + 16, &po_d, 8);
  int three = 3;
  memcpy(raw + 24, &three, 4);
  const uint32_t offs[4] = {0, 8, 16, 24}, bad[4] = {0, 16, 8, 24};
  assert_int_equal(t4a_launch_raw(f->retire, fn, &cfg, raw, sizeof raw, bad, 4),
                   T4A_ARGUMENT_MISMATCH);
  memset(pc, 0, 64);
  CK(t4a_launch_raw(f->retire, fn, &cfg, raw, sizeof raw, offs, 4));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(pc[2], 4);
  assert_int_equal(pc[3], 0);
  t4a_buffer_release(a);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- NVRTC artifacts (real CUBIN and PTX, loaded by the fake) ---- */

static t4a_nvrtc_artifact *compile_add(t4a_nvrtc_lib *lib, t4a_nvrtc_output output) {
  static const char src[] =
      "extern \"C\" __global__ void add(const int *a, const int *b, int *c, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) c[i] = a[i] + b[i];\n"
      "}\n";
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.source = src;
  rq.target = "sm_90";
  rq.output = output;
  t4a_nvrtc_artifact *a = NULL;
  CK(t4a_nvrtc_compile(lib, &rq, &a, NULL));
  return a;
}

static void test_nvrtc_artifacts(void **state) {
  fixture *f = *state;
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) skip(); /* no NVRTC on this machine */
  if (!(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_CUBIN)) {
    t4a_nvrtc_lib_release(lib);
    skip();
  }
  t4a_nvrtc_artifact *cubin = compile_add(lib, T4A_NVRTC_OUTPUT_CUBIN);
  t4a_nvrtc_artifact *ptx = compile_add(lib, T4A_NVRTC_OUTPUT_PTX);
  t4a_module *m = NULL, *again = NULL, *mp = NULL, *raw = NULL;
  CK(t4a_module_load_artifact(f->cache, cubin, &m)); /* keyed by the artifact's key */
  CK(t4a_module_load_artifact(f->cache, cubin, &again));
  assert_ptr_equal(m, again);
  t4a_module_release(again);
  CK(t4a_module_load_artifact(f->cache, ptx, &mp));
  assert_ptr_not_equal(m, mp);
  /* The same CUBIN bytes as an image: told CUBIN by its ELF magic, keyed by its bytes. */
  size_t bytes = 0;
  const unsigned char *data = t4a_nvrtc_artifact_data(cubin, &bytes);
  CK(t4a_module_load(f->cache, data, bytes, T4A_IMAGE_AUTO, &raw));
  assert_int_equal(t4a_module_load(f->cache, data, bytes, T4A_IMAGE_FATBIN, &again),
                   T4A_INVALID_ARGUMENT);
  /* A CUBIN cut short: its headers declare more than the bytes given. */
  assert_int_equal(t4a_module_load(f->cache, data, bytes / 2, T4A_IMAGE_AUTO, &again),
                   T4A_INVALID_ARGUMENT);
  struct t4a_module_cache_stats s;
  t4a_module_cache_stats(f->cache, &s);
  assert_int_equal(s.loads, 3);
  assert_int_equal(s.hits, 1);
  /* The kernel found in the real CUBIN runs (as the fake's host function of that name). */
  t4a_module *ms[3] = {m, mp, raw};
  for (int k = 0; k < 3; k++) {
    t4a_function *fn = get_fn(ms[k], "add");
    t4a_buffer *a = make_buffer(f, 64), *out = make_buffer(f, 64);
    int *pa = view(f, a), *pc = view(f, out);
    for (int i = 0; i < 16; i++) pa[i] = i + k;
    int n = 16;
    t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(out, 0),
                       t4a_arg_scalar(&n, sizeof n)};
    t4a_launch_config cfg = config_1d(1, 16, 0);
    CK(t4a_launch(f->retire, fn, &cfg, args, 4));
    CK(t4a_retire_wait(f->retire));
    for (int i = 0; i < 16; i++) assert_int_equal(pc[i], 2 * (i + k));
    t4a_buffer_release(a);
    t4a_buffer_release(out);
    t4a_function_release(fn);
  }
  if (t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_LTOIR) {
    t4a_nvrtc_artifact *lto = compile_add(lib, T4A_NVRTC_OUTPUT_LTOIR);
    assert_int_equal(t4a_module_load_artifact(f->cache, lto, &again), T4A_INVALID_ARGUMENT);
    t4a_nvrtc_artifact_release(lto);
  }
  assert_null(again);
  t4a_module_release(m);
  t4a_module_release(mp);
  t4a_module_release(raw);
  t4a_nvrtc_artifact_release(cubin);
  t4a_nvrtc_artifact_release(ptx);
  t4a_nvrtc_lib_release(lib);
}

/* ---- A5: a module whose context cannot be activated is leaked and counted ---- */

static void test_a5_module_leaked_without_context(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_module_release(m); /* the cache holds the last reference */
  t4a_error_set_(T4A_NOT_READY, "caller", 7, NULL, 0, "the caller's detail");
  uint64_t leaked = lane_counters(f).leaked;
  t4a_fake_inject(f->fake, "cuCtxGetCurrent", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_module_cache_clear(f->cache); /* the last release cannot activate the context */
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_fake_injected(f->fake), 1);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  assert_int_equal(lane_counters(f).leaked, leaked + 1);
  assert_int_equal(lane_counters(f).module_unloads, 0);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.modules, 1);
  /* A drop path: the caller's detail is untouched. */
  t4a_error e = last_error();
  assert_int_equal(e.status, T4A_NOT_READY);
  assert_string_equal(e.entry, "caller");
  /* And when the set (not the get) fails. */
  m = load_ptx(f);
  t4a_module_release(m);
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_module_cache_clear(f->cache);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  assert_int_equal(lane_counters(f).leaked, leaked + 2);
  /* A refused unload is a leak too. */
  m = load_ptx(f);
  t4a_module_release(m);
  t4a_fake_inject(f->fake, "cuModuleUnload", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_module_cache_clear(f->cache);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(lane_counters(f).leaked, leaked + 3);
  assert_int_equal(unaccounted(f), 0);
}

static void test_a5_module_leaked_on_a_broken_lane(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  t4a_error cause = {0};
  cause.status = T4A_CONTEXT_LOST;
  cause.entry = "test";
  cause.code = CUDA_ERROR_ILLEGAL_ADDRESS;
  cause.code_name = "CUDA_ERROR_ILLEGAL_ADDRESS";
  t4a_ctx_holder_mark_lost_(t4a_lane_holder(f->lane), &cause);
  uint64_t leaked = lane_counters(f).leaked, driver_calls = calls(f, NULL);
  t4a_function_release(fn); /* the last reference: no driver call on a lost context */
  assert_int_equal(calls(f, NULL), driver_calls);
  assert_int_equal(lane_counters(f).leaked, leaked + 1);
  /* Nothing new is loaded on a broken lane. */
  assert_int_equal(t4a_module_load(f->cache, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m),
                   T4A_LANE_BROKEN);
}

/* ---- failure sweeps ---- */

static t4a_status op_modules(void *user) {
  fixture *f = user;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL, *again = NULL;
  t4a_function *fn = NULL, *fn2 = NULL;
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  o.max_entries = 1;
  t4a_status st = t4a_module_cache_create(f->retire, &o, &c);
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx - 1, T4A_IMAGE_AUTO, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "add", &fn);
  if (st == T4A_OK) st = t4a_module_get_function(m, "vec16", &fn2);
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx - 1, T4A_IMAGE_AUTO, &again);
  if (st == T4A_OK && again != m) st = T4A_INTERNAL;
  t4a_module_release(again);
  again = NULL;
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &again);
  t4a_function_release(fn);
  t4a_function_release(fn2);
  t4a_module_release(m);
  t4a_module_release(again);
  t4a_module_cache_destroy(c);
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {
      .name = "modules", .fake = f->fake, .op = op_modules, .unaccounted = unaccounted, .user = f};
  f->baseline = unaccounted(f);
  assert_int_equal(f->baseline, 0);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 5);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY) > 5);
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 3);
  const t4a_status mutex[] = {T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1) > 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_kinds_and_content_addressing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_jit_log_in_the_detail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lru_by_entries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lru_by_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_eviction_waits_for_queued_launches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clear_waits_for_queued_launches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_waits_for_queued_launches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_functions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_param_info_absent, setup_no_param_info, teardown),
      cmocka_unit_test_setup_teardown(test_nvrtc_artifacts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a5_module_leaked_without_context, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_a5_module_leaked_on_a_broken_lane, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
