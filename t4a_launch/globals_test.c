/* Module globals and kernel attributes on the fake driver: lookups (sizes, the typed errors, one
 * driver call per name), writes and reads through t4a_xfer with size checks before anything is
 * enqueued, a kernel reading a __constant__ table and writing a __device__ counter, the module
 * kept alive by queued copies, a global as a descriptor and chain argument, a quarantined view,
 * real NVRTC CUBIN and PTX globals loaded by the fake, attributes, and failure sweeps. */
#include "t4a/chain.h"
#include "t4a/xfer.h"
#include "t4a_launch/launch_testutil.h"

/* The CUDA source of the fixture's host kernel `lut` (testing/fixture/host_kernels.h) and of a
 * __device__ global with an initialiser; the GPU test runs it on the H200. */
static const char k_lut_cu[] =
    "__constant__ float lut_table[64];\n"
    "__device__ unsigned int lut_calls;\n"
    "__device__ int init_val = 42;\n"
    "extern \"C\" __global__ void lut(const int *idx, float *out, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = lut_table[idx[i] & 63];\n"
    "  if (i == 0) atomicAdd(&lut_calls, 1u);\n"
    "}\n";

static const t4a_fake_global k_globals[3] = {
    {"lut_table", 64 * sizeof(float), 1},
    {"lut_calls", sizeof(unsigned), 0},
    {"gdata", 64 * sizeof(float), 0},
};

/* Objects alive in the fake beyond what t4a counted as leaked, pinned host memory included (the
 * staging rings'). */
static long unaccounted_all(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                           T4A_FIXTURE_LIVE_MODULES | T4A_FIXTURE_LIVE_GRAPHS |
                                           T4A_FIXTURE_LIVE_GRAPH_EXECS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS);
}

static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER;
  o.build |= T4A_FIXTURE_MODULE_CACHE | T4A_FIXTURE_XFER | T4A_FIXTURE_TABLE;
  o.kernels[0] = &t4a_hk_lut;
  o.kernels[1] = &t4a_hk_scale;
  return t4a_fixture_setup(state, &o);
}
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) {
  return t4a_fixture_teardown_counted(state, unaccounted_all, 0);
}

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweeps", "test_quarantined_view")

static t4a_module *load_lut(fixture *f) {
  char img[256];
  size_t need = t4a_fake_image_globals(img, sizeof img, (const char *const[]){"lut", "scale"}, 2,
                                       k_globals, 3);
  assert_true(need <= sizeof img);
  t4a_module *m = NULL;
  CK(t4a_module_load(f->cache, img, need, T4A_IMAGE_PTX, &m)); /* the fake's format, named */
  return m;
}

static t4a_buffer *global(t4a_module *m, const char *name, size_t expected) {
  t4a_buffer *g = NULL;
  CK(t4a_module_get_global(m, name, expected, &g));
  return g;
}

static t4a_status upload(fixture *f, t4a_buffer *dst, size_t off, const void *src, size_t n) {
  return t4a_xfer_upload(f->xfer, dst, off, src, n);
}

static t4a_status download(fixture *f, t4a_buffer *src, size_t off, void *dst, size_t n) {
  t4a_xfer_pending *p = NULL;
  t4a_status st = t4a_xfer_download(f->xfer, src, off, dst, n, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  t4a_xfer_pending_release(p);
  return st;
}

static void expect_error(t4a_status want, const char *entry, const char *text) {
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, want);
  if (entry != NULL) assert_string_equal(e.entry, entry);
  if (text != NULL) assert_non_null(strstr(e.message, text));
}

/* ---- lookups ------------------------------------------------------------------------------ */

static void test_lookup(void **state) {
  fixture *f = *state;
  t4a_module *m = load_lut(f);
  t4a_buffer *t = global(m, "lut_table", 0), *c = global(m, "lut_calls", sizeof(unsigned));
  assert_int_equal(t4a_buffer_size(t), 256);
  assert_int_equal(t4a_buffer_size(c), 4);
  assert_true(t4a_buffer_devptr(t) != 0 && t4a_buffer_devptr(t) != t4a_buffer_devptr(c));
  assert_int_equal(t4a_buffer_domain(t), t4a_lane_domain(f->lane));
  assert_null(t4a_buffer_pool(t)); /* a view: no pool allocated it */
  /* Learnt once per name: a second lookup is a new view of the same memory, no driver call. */
  uint64_t lookups = calls(f, "cuModuleGetGlobal");
  assert_int_equal(lookups, 2);
  t4a_buffer *t2 = global(m, "lut_table", 256);
  assert_ptr_not_equal(t2, t);
  assert_int_equal(t4a_buffer_devptr(t2), t4a_buffer_devptr(t));
  assert_int_equal(calls(f, "cuModuleGetGlobal"), lookups);
  /* Typed refusals, nothing handed out. */
  t4a_buffer *none = (t4a_buffer *)1;
  assert_int_equal(t4a_module_get_global(m, "lut", 0, &none), T4A_UNKNOWN_ENTRY_POINT);
  assert_null(none);
  expect_error(T4A_UNKNOWN_ENTRY_POINT, "cuModuleGetGlobal", "'lut'");
  assert_int_equal(t4a_module_get_global(m, "lut_table", 512, &none), T4A_ARGUMENT_MISMATCH);
  assert_null(none);
  expect_error(T4A_ARGUMENT_MISMATCH, NULL, "global 'lut_table' is 256 bytes, not the 512");
  assert_int_equal(t4a_module_get_global(m, "", 0, &none), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_get_global(NULL, "x", 0, &none), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_get_global(m, NULL, 0, &none), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_module_get_global(m, "x", 0, NULL), T4A_INVALID_ARGUMENT);
  /* A view holds its module: the views outlive every other reference, the cache included. */
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  t4a_buffer_release(t);
  t4a_buffer_release(t2);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  t4a_buffer_release(c); /* the last reference to the module */
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
}

/* ---- writes, reads and a kernel ------------------------------------------------------------ */

static void test_write_read_and_a_kernel(void **state) {
  fixture *f = *state;
  t4a_module *m = load_lut(f);
  t4a_function *lut = get_fn(m, "lut");
  t4a_buffer *t = global(m, "lut_table", 256), *c = global(m, "lut_calls", 4);
  float table[64];
  for (int i = 0; i < 64; i++) table[i] = 0.5f * (float)i + 3.0f;
  CK(upload(f, t, 0, table, sizeof table));
  /* Sizes and offsets are checked before anything is enqueued, naming the global. */
  uint64_t copies = calls(f, "cuMemcpyHtoDAsync");
  float big[65] = {0};
  assert_int_equal(upload(f, t, 0, big, sizeof big), T4A_INVALID_ARGUMENT);
  expect_error(T4A_INVALID_ARGUMENT, NULL, "outside the 256-byte global 'lut_table'");
  assert_int_equal(upload(f, t, 4, table, sizeof table), T4A_INVALID_ARGUMENT);
  assert_int_equal(upload(f, t, 257, table, 1), T4A_INVALID_ARGUMENT);
  float one = 0;
  assert_int_equal(download(f, t, 256, &one, 4), T4A_INVALID_ARGUMENT);
  assert_int_equal(calls(f, "cuMemcpyHtoDAsync"), copies);
  assert_int_equal(calls(f, "cuMemcpyDtoHAsync"), 0);
  /* A partial write at an offset lands where it should. */
  float patch = -1.0f;
  CK(upload(f, t, 63 * 4, &patch, 4));
  table[63] = patch;

  enum { N = 100 };
  int idx[N];
  for (int i = 0; i < N; i++) idx[i] = (i * 7) % 200;
  t4a_buffer *ib = make_buffer(f, sizeof idx), *ob = make_buffer(f, N * sizeof(float));
  CK(upload(f, ib, 0, idx, sizeof idx));
  int n = N;
  t4a_arg args[3] = {t4a_arg_buffer(ib, 0), t4a_arg_buffer(ob, 0), t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {128, 1, 1}, 0};
  CK(t4a_launch(f->retire, lut, &cfg, args, 3));
  CK(t4a_launch(f->retire, lut, &cfg, args, 3));
  float out[N];
  unsigned count = 0;
  CK(download(f, ob, 0, out, sizeof out));
  CK(download(f, c, 0, &count, 4)); /* the __device__ counter the kernel wrote */
  for (int i = 0; i < N; i++) assert_true(out[i] == table[idx[i] & 63]);
  assert_int_equal(count, 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  t4a_buffer_release(ib);
  t4a_buffer_release(ob);
  t4a_buffer_release(t);
  t4a_buffer_release(c);
  t4a_function_release(lut);
  t4a_module_release(m);
  CK(t4a_retire_wait(f->retire));
}

/* The module stays loaded while a copy into its global is queued: every caller reference dropped
 * and the cache cleared, cuModuleUnload waits for the copy's epoch (the fake faults a copy into
 * the memory of an unloaded module, so an early unload fails this test). */
static void test_queued_copy_keeps_the_module(void **state) {
  fixture *f = *state;
  t4a_module *m = load_lut(f);
  t4a_buffer *g = global(m, "gdata", 256);
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)i;
  CK(upload(f, g, 0, v, sizeof v));
  t4a_buffer_release(g);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  assert_true(t4a_fake_pending(f->fake, NULL) > 0); /* the copy is still queued */
  t4a_fake_progress(f->fake);
  CK(t4a_retire_poll(f->retire)); /* seals the open epoch: its event is queued now */
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  t4a_fake_progress(f->fake);
  CK(t4a_retire_poll(f->retire));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_SUCCESS);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* A global as a descriptor argument (its address), fired and replayed in a chain after the
 * caller dropped the view and the module. */
static void test_descriptor_and_chain_argument(void **state) {
  fixture *f = *state;
  t4a_module *m = load_lut(f);
  t4a_function *scale = get_fn(m, "scale");
  t4a_buffer *g = global(m, "gdata", 256);
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)(i + 1);
  CK(upload(f, g, 0, v, sizeof v));
  float a = 2.0f;
  int n = 64;
  t4a_arg args[3] = {t4a_arg_buffer(g, 0), t4a_arg_scalar(&a, 4), t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  uint32_t id = 0;
  CK(t4a_descriptor_register(f->table, scale, &cfg, args, 3, &id));
  /* An offset past the global's end is refused at registration. */
  uint32_t bad = 0;
  t4a_arg past[3] = {t4a_arg_buffer(g, 257), t4a_arg_scalar(&a, 4), t4a_arg_scalar(&n, 4)};
  assert_int_equal(t4a_descriptor_register(f->table, scale, &cfg, past, 3, &bad),
                   T4A_INVALID_ARGUMENT);
  t4a_buffer *keep = g;
  t4a_buffer_retain(keep); /* to read the result back */
  t4a_buffer_release(g);
  t4a_function_release(scale);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  CK(t4a_descriptor_fire(f->table, id));
  CK(t4a_chain_begin(f->table));
  CK(t4a_descriptor_fire(f->table, id));
  t4a_chain *ch = NULL;
  CK(t4a_chain_end(f->table, &ch));
  for (int r = 0; r < 3; r++) CK(t4a_chain_replay(f->table, ch));
  float back[64];
  CK(download(f, keep, 0, back, sizeof back));
  for (int i = 0; i < 64; i++) assert_true(back[i] == (float)(i + 1) * 16.0f); /* 2^(1+3) */
  t4a_buffer_release(keep);
  t4a_chain_destroy(ch);
  CK(t4a_descriptor_unregister(f->table, id));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* A quarantined view never lets its module go (its memory's state is unknown): counted. */
static void test_quarantined_view(void **state) {
  fixture *f = *state;
  t4a_module *m = load_lut(f);
  t4a_buffer *g = global(m, "gdata", 0);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  t4a_counter_values before = lane_counters(f);
  t4a_buffer_quarantine(g);
  t4a_buffer_release(g);
  t4a_counter_values after = lane_counters(f);
  assert_int_equal(t4a_counter_value(&after, T4A_COUNTER_leaked),
                   t4a_counter_value(&before, T4A_COUNTER_leaked) + 1);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  assert_int_equal(t4a_fixture_live(f->fake, T4A_FIXTURE_LIVE_MODULES), 1);
}

/* ---- kernel attributes -------------------------------------------------------------------- */

static void test_attributes(void **state) {
  fixture *f = *state;
  t4a_fake_kernel_attrs fa = {40, 2048, 24, 256};
  t4a_fake_set_kernel_attrs(f->fake, "lut", &fa);
  t4a_module *m = load_lut(f);
  t4a_function *lut = get_fn(m, "lut");
  t4a_kernel_attributes a;
  CK(t4a_function_get_attributes(lut, &a));
  assert_int_equal(a.num_regs, 40);
  assert_int_equal(a.static_shared_bytes, 2048);
  assert_int_equal(a.local_bytes, 24);
  assert_int_equal(a.max_threads_per_block, 256);
  assert_int_equal(a.const_bytes, 256); /* the module's __constant__ table */
  assert_int_equal(a.max_dynamic_shared_bytes, 49152 - 2048);
  int optin = 0;
  CK(T4A_CU(f->drv, cuDeviceGetAttribute, &optin,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
  assert_int_equal(a.max_dynamic_shared_optin_bytes, (uint32_t)optin - 2048);
  assert_int_equal(a.ptx_version, 90);
  assert_int_equal(a.binary_version, 90);
  assert_int_equal(calls(f, "cuFuncGetAttribute"), 1 + 8); /* the lookup's, then eight */
  /* A launch raises the dynamic maximum; the attributes say so. */
  int one = 0;
  t4a_buffer *b = make_buffer(f, 64);
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_buffer(b, 0), t4a_arg_scalar(&one, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 64 * 1024};
  CK(t4a_launch(f->retire, lut, &cfg, args, 3));
  CK(t4a_function_get_attributes(lut, &a));
  assert_int_equal(a.max_dynamic_shared_bytes, 64 * 1024);
  /* Refusals and a failing driver: typed, *out zero. */
  assert_int_equal(t4a_function_get_attributes(NULL, &a), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_function_get_attributes(lut, NULL), T4A_INVALID_ARGUMENT);
  t4a_fake_inject(f->fake, "cuFuncGetAttribute", 3, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_function_get_attributes(lut, &a), T4A_DRIVER_ERROR);
  expect_error(T4A_DRIVER_ERROR, "cuFuncGetAttribute", NULL);
  assert_int_equal(a.num_regs, 0);
  t4a_fake_clear_injections(f->fake);
  t4a_buffer_release(b);
  t4a_function_release(lut);
  t4a_module_release(m);
  CK(t4a_retire_wait(f->retire));
}

/* ---- real NVRTC output loaded by the fake ------------------------------------------------- */

static void test_nvrtc_globals(void **state) {
  fixture *f = *state;
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) skip(); /* no NVRTC on this machine */
  const t4a_nvrtc_output outs[2] = {T4A_NVRTC_OUTPUT_CUBIN, T4A_NVRTC_OUTPUT_PTX};
  for (int k = 0; k < 2; k++) {
    if (outs[k] == T4A_NVRTC_OUTPUT_CUBIN && !(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_CUBIN)) {
      continue;
    }
    t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
    rq.source = k_lut_cu;
    rq.target = "sm_90";
    rq.output = outs[k];
    t4a_nvrtc_artifact *art = NULL;
    CK(t4a_nvrtc_compile(lib, &rq, &art, NULL));
    t4a_module *m = NULL;
    CK(t4a_module_load_artifact(f->cache, art, &m));
    t4a_buffer *t = global(m, "lut_table", 256), *c = global(m, "lut_calls", 4);
    t4a_buffer *iv = global(m, "init_val", sizeof(int));
    int init = 0;
    CK(download(f, iv, 0, &init, 4)); /* the initialiser, from the CUBIN's bytes or the PTX */
    assert_int_equal(init, 42);
    float table[64];
    for (int i = 0; i < 64; i++) table[i] = (float)(64 - i);
    CK(upload(f, t, 0, table, sizeof table));
    int idx[8] = {0, 1, 2, 63, 64, 65, 127, 5};
    t4a_buffer *ib = make_buffer(f, sizeof idx), *ob = make_buffer(f, sizeof(float) * 8);
    CK(upload(f, ib, 0, idx, sizeof idx));
    t4a_function *lut = get_fn(m, "lut");
    int n = 8;
    t4a_arg args[3] = {t4a_arg_buffer(ib, 0), t4a_arg_buffer(ob, 0), t4a_arg_scalar(&n, 4)};
    t4a_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0};
    CK(t4a_launch(f->retire, lut, &cfg, args, 3));
    float out[8];
    unsigned count = 0;
    CK(download(f, ob, 0, out, sizeof out));
    CK(download(f, c, 0, &count, 4));
    for (int i = 0; i < 8; i++) assert_true(out[i] == table[idx[i] & 63]);
    assert_int_equal(count, 1);
    t4a_buffer *none = NULL;
    assert_int_equal(t4a_module_get_global(m, "lut_tablee", 0, &none), T4A_UNKNOWN_ENTRY_POINT);
    t4a_buffer_release(ib);
    t4a_buffer_release(ob);
    t4a_buffer_release(t);
    t4a_buffer_release(c);
    t4a_buffer_release(iv);
    t4a_function_release(lut);
    t4a_module_release(m);
    t4a_nvrtc_artifact_release(art);
  }
  t4a_nvrtc_lib_release(lib);
  CK(t4a_retire_wait(f->retire));
}

/* ---- failure sweeps ----------------------------------------------------------------------- */

/* On a retire, transfer state and module cache of its own (so that what a failure quarantines is
 * counted when the retire goes): look two globals up (the second twice), read the kernel's
 * attributes, write the table, launch the kernel, read the counter back. */
static t4a_status op_globals(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL;
  t4a_function *lut = NULL;
  t4a_buffer *t = NULL, *cnt = NULL, *again = NULL, *ib = NULL, *ob = NULL;
  char img[256];
  size_t need = t4a_fake_image_globals(img, sizeof img, (const char *const[]){"lut", "scale"}, 2,
                                       k_globals, 3);
  float table[64] = {0};
  int idx[4] = {1, 2, 3, 4}, n = 4;
  unsigned count = 0;
  t4a_kernel_attributes a;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = T4A_XFER_MIN_CHUNK_BYTES;
  xo.num_chunks = 1;
  xo.copy_threads = 1;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &xo, &x);
  if (st == T4A_OK) st = t4a_module_cache_create(r, NULL, &c);
  if (st == T4A_OK) st = t4a_module_load(c, img, need, T4A_IMAGE_PTX, &m);
  if (st == T4A_OK) st = t4a_module_get_global(m, "lut_table", 256, &t);
  if (st == T4A_OK) st = t4a_module_get_global(m, "lut_calls", 4, &cnt);
  if (st == T4A_OK) st = t4a_module_get_global(m, "lut_calls", 4, &again);
  if (st == T4A_OK) st = t4a_module_get_function(m, "lut", &lut);
  if (st == T4A_OK) st = t4a_function_get_attributes(lut, &a);
  if (st == T4A_OK) st = t4a_xfer_upload(x, t, 0, table, sizeof table);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, sizeof idx, 0, 0, &ib);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 4 * sizeof(float), 0, 0, &ob);
  if (st == T4A_OK) st = t4a_xfer_upload(x, ib, 0, idx, sizeof idx);
  if (st == T4A_OK) {
    t4a_arg args[3] = {t4a_arg_buffer(ib, 0), t4a_arg_buffer(ob, 0), t4a_arg_scalar(&n, 4)};
    t4a_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0};
    st = t4a_launch(r, lut, &cfg, args, 3);
  }
  if (st == T4A_OK) {
    t4a_xfer_pending *p = NULL;
    st = t4a_xfer_download(x, again, 0, &count, 4, &p);
    if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
    t4a_xfer_pending_release(p);
  }
  if (st == T4A_OK && count != 1) st = T4A_INTERNAL;
  t4a_buffer_release(ib);
  t4a_buffer_release(ob);
  t4a_buffer_release(t);
  t4a_buffer_release(cnt);
  t4a_buffer_release(again);
  t4a_function_release(lut);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  t4a_xfer_destroy(x);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}

static void test_failure_sweeps(void **state) {
  fixture *f = *state;
  t4a_sweep s = {
      .name = "globals", .fake = f->fake, .op = op_globals, .unaccounted = unaccounted_all, .user = f};
  f->baseline = unaccounted_all(f);
  /* The fixture's staging ring: a chunk and an event each. */
  assert_int_equal(f->baseline, 2 * T4A_XFER_INITIAL_CHUNKS); /* made at open; 4 deep */
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_HANDLE, T4A_DRIVER_ERROR) > 10);
  s.entry = "cuModuleGetGlobal";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY), 2);
  s.entry = "cuMemcpyHtoDAsync"; /* the write to the global failing after it was enqueued */
  s.after_enqueue = 1;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 2);
  s.entry = NULL;
  s.after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 5);
  const t4a_status mutex[] = {T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1) > 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  f->baseline = 0; /* the teardown drops the fixture's ring too */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_read_and_a_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queued_copy_keeps_the_module, setup, teardown),
      cmocka_unit_test_setup_teardown(test_descriptor_and_chain_argument, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quarantined_view, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_attributes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nvrtc_globals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweeps, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
