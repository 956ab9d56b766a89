/* Occupancy and launch attributes on the fake driver (docs/design.md §13, "Occupancy and launch
 * attributes"): blocks per SM from the fake's occupancy model, the suggested block size against
 * the fake's own cuOccupancyMaxPotentialBlockSize (bytes and per-thread forms), cooperative grids
 * and cluster dimensions checked before anything is enqueued (typed errors naming the limit, no
 * cuLaunchKernelEx call, no admission), the fake agreeing at the driver's call, attributes seen by
 * the kernel on the checked, raw-bytes and descriptor paths, 10,000 descriptor fires with
 * attributes and no heap allocation (also on GRAPH tables and module caches: never a one-node
 * graph), a chain recording a cluster fire and keeping its attributes
 * through a node update, an older driver without the entries (UNSUPPORTED), an older device, and
 * a failure sweep. */
#include "t4a/chain.h"
#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

/* probe(int *out): out[0..2] = the cluster dims it ran with, out[3] = cooperative, out[4] =
 * programmatic, out[5] = grid x, out[6] += 1. */
static void probe_kernel(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p;
  memcpy(&p, params[0], sizeof p);
  int *out = t4a_fake_deref(l, p, 7 * sizeof(int));
  if (out == NULL) return;
  unsigned cluster[3], grid[3];
  int coop = 0, prog = 0;
  t4a_fake_launch_attrs(l, cluster, &coop, &prog);
  t4a_fake_launch_dims(l, grid, NULL, NULL);
  for (int i = 0; i < 3; i++) out[i] = (int)cluster[i];
  out[3] = coop;
  out[4] = prog;
  out[5] = (int)grid[0];
  out[6] += 1;
}
static const size_t k_probe_sizes[1] = {8};
static const t4a_host_kernel k_probe = {"probe", 1, k_probe_sizes, NULL, probe_kernel};

static int setup_opts(void **state, int cc_major, int omit_launch_ex, int omit_occupancy,
                      t4a_launch_strategy strategy) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.query_policy = T4A_FAKE_QUERY_PROGRESSES;
  o.fake.cc_major = cc_major;
  o.fake.omit_launch_ex = omit_launch_ex;
  o.fake.omit_occupancy = omit_occupancy;
  o.fake.gpc_sms = 2; /* a cluster's blocks: at most blocks per SM x 2 */
  o.build |= T4A_FIXTURE_MODULE_CACHE | T4A_FIXTURE_TABLE;
  o.launch_table.launch.strategy = strategy;
  o.launch_table.launch.graph_after = 1;
  static t4a_module_cache_options co = T4A_MODULE_CACHE_OPTIONS_INIT;
  co.launch.strategy = strategy;
  co.launch.graph_after = 1;
  o.cache = &co;
  o.kernels[0] = &t4a_hk_add;
  o.kernels[1] = &k_probe;
  return t4a_fixture_setup(state, &o);
}
static int setup(void **state) { return setup_opts(state, 0, 0, 0, T4A_LAUNCH_STRATEGY_PLAIN); }
static int setup_graph(void **state) {
  return setup_opts(state, 0, 0, 0, T4A_LAUNCH_STRATEGY_GRAPH);
}
static int setup_old_driver(void **state) {
  return setup_opts(state, 0, 1, 1, T4A_LAUNCH_STRATEGY_PLAIN);
}
static int setup_no_occupancy(void **state) {
  return setup_opts(state, 0, 0, 1, T4A_LAUNCH_STRATEGY_PLAIN);
}
static int setup_ampere(void **state) {
  return setup_opts(state, 8, 0, 0, T4A_LAUNCH_STRATEGY_PLAIN);
}
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) { return fixture_teardown(state, 0); }

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep")

static t4a_module *load_probe(fixture *f) {
  const char *names[2] = {"probe", "add"};
  size_t bytes = 0;
  char *image = fake_image(names, 2, &bytes);
  t4a_module *m = NULL;
  CK(t4a_module_load(f->cache, image, bytes, T4A_IMAGE_CUBIN, &m));
  free(image);
  return m;
}

static void expect_detail(const char *needle) {
  t4a_error e;
  t4a_error_last(&e);
  if (strstr(e.message, needle) == NULL) fail_msg("detail \"%s\" lacks \"%s\"", e.message, needle);
}

static t4a_launch_attrs cluster_attrs(uint32_t x, uint32_t y, uint32_t z) {
  t4a_launch_attrs a = T4A_LAUNCH_ATTRS_INIT;
  a.cluster[0] = x;
  a.cluster[1] = y;
  a.cluster[2] = z;
  return a;
}

static t4a_launch_attrs coop_attrs(void) {
  t4a_launch_attrs a = T4A_LAUNCH_ATTRS_INIT;
  a.cooperative = 1;
  return a;
}

/* ---- occupancy ---- */

static void test_occupancy(void **state) {
  fixture *f = *state;
  t4a_fake_set_kernel_attrs(f->fake, "probe", &(t4a_fake_kernel_attrs){64, 0, 0, 0});
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  uint32_t n = 99;
  /* 256 threads of 64 registers: 65,536 / (64 x 256) = 4 blocks (threads alone would allow 8). */
  CK(t4a_function_occupancy(fn, 256, 0, &n));
  assert_int_equal(n, 4);
  /* 1,024 threads: 1 block (registers). */
  CK(t4a_function_occupancy(fn, 1024, 0, &n));
  assert_int_equal(n, 1);
  /* 64 KiB of dynamic shared memory: 233,472 / (65,536 + 1,024) = 3 blocks; the function's limit
   * is raised first (once), as a launch would. */
  uint64_t raises = calls(f, "cuFuncSetAttribute");
  CK(t4a_function_occupancy(fn, 256, 65536, &n));
  assert_int_equal(n, 3);
  CK(t4a_function_occupancy(fn, 256, 65536, &n));
  assert_int_equal(calls(f, "cuFuncSetAttribute") - raises, 1);
  /* Bad input: typed, no occupancy query. */
  uint64_t queries = calls(f, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  assert_int_equal(t4a_function_occupancy(fn, 0, 0, &n), T4A_INVALID_ARGUMENT);
  assert_int_equal(n, 0);
  assert_int_equal(t4a_function_occupancy(fn, 1025, 0, &n), T4A_INVALID_ARGUMENT);
  expect_detail("1025");
  assert_int_equal(t4a_function_occupancy(fn, 256, 300000, &n), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_function_occupancy(NULL, 256, 0, &n), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_function_occupancy(fn, 256, 0, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(calls(f, "cuOccupancyMaxActiveBlocksPerMultiprocessor"), queries);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static size_t g_bytes, g_per_thread;
static size_t CUDAAPI per_thread_bytes(int block) { return g_bytes + g_per_thread * (size_t)block; }

/* The suggestion equals the fake's own cuOccupancyMaxPotentialBlockSize for the same dynamic
 * shared memory (given as bytes through its size argument, or per thread through its callback). */
static void test_suggest_matches_the_driver(void **state) {
  fixture *f = *state;
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  static const struct {
    int regs, static_shared, max_threads;
    uint32_t bytes, per_thread, limit;
  } cases[] = {
      {0, 0, 0, 0, 0, 0},          {64, 0, 0, 0, 0, 0},        {64, 0, 0, 4096, 0, 0},
      {40, 10000, 0, 0, 16, 0},    {64, 0, 768, 1024, 64, 0},  {32, 0, 0, 0, 0, 200},
      {72, 2048, 0, 20000, 100, 0}, {32, 0, 0, 0, 232, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%zu", i);
    t4a_host_kernel_register(f->fake, &k_probe, name, NULL);
    t4a_fake_kernel_attrs ka = {cases[i].regs, cases[i].static_shared, 0, cases[i].max_threads};
    t4a_fake_set_kernel_attrs(f->fake, name, &ka);
    const char *names[1] = {name};
    size_t bytes = 0;
    char *image = fake_image(names, 1, &bytes);
    t4a_module *m = NULL;
    CK(t4a_module_load(f->cache, image, bytes, T4A_IMAGE_CUBIN, &m));
    free(image);
    t4a_function *fn = get_fn(m, name);
    t4a_block_suggestion s;
    CK(t4a_function_suggest_block(fn, cases[i].bytes, cases[i].per_thread, cases[i].limit, &s));
    int min_grid = 0, block = 0;
    g_bytes = cases[i].bytes;
    g_per_thread = cases[i].per_thread;
    assert_int_equal(t->cuOccupancyMaxPotentialBlockSize(
                         &min_grid, &block, fn->handle,
                         cases[i].per_thread != 0 ? per_thread_bytes : NULL, cases[i].bytes,
                         (int)cases[i].limit),
                     CUDA_SUCCESS);
    print_message("case %zu: t4a %u threads, %u per SM, grid %u; driver %d threads, grid %d\n", i,
                  s.block_threads, s.blocks_per_sm, s.min_grid, block, min_grid);
    assert_int_equal(s.block_threads, block);
    assert_int_equal(s.min_grid, min_grid);
    assert_int_equal(s.min_grid, s.blocks_per_sm * 132);
    assert_int_equal(s.shared_bytes, cases[i].bytes + cases[i].per_thread * s.block_threads);
    if (cases[i].limit != 0) assert_true(s.block_threads <= cases[i].limit);
    t4a_function_release(fn);
    t4a_module_release(m);
  }
  /* Nothing fits: 232 bytes per thread and 233,000 more. */
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_block_suggestion s;
  assert_int_equal(t4a_function_suggest_block(fn, 233000, 232, 0, &s), T4A_LIMIT_EXCEEDED);
  assert_int_equal(s.block_threads, 0);
  assert_int_equal(t4a_function_suggest_block(fn, 0, 0, 0, NULL), T4A_INVALID_ARGUMENT);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- cooperative launches ---- */

static int *probe_out(fixture *f, t4a_buffer *b) { return view(f, b); }

static void test_cooperative_grid_checked_before_enqueue(void **state) {
  fixture *f = *state;
  t4a_fake_set_kernel_attrs(f->fake, "probe", &(t4a_fake_kernel_attrs){64, 0, 0, 0});
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_attrs coop = coop_attrs();
  /* 4 blocks of 256 threads per SM x 132 SMs = 528 at once. */
  t4a_launch_config fits = config_1d(528, 256, 0), over = config_1d(529, 256, 0);
  CK(t4a_launch_ex(f->retire, fn, &fits, &coop, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  int *o = probe_out(f, out);
  assert_int_equal(o[3], 1);
  assert_int_equal(o[5], 528);
  assert_int_equal(o[6], 1);
  t4a_counter_values v0 = lane_counters(f);
  uint64_t ex0 = calls(f, "cuLaunchKernelEx");
  assert_int_equal(t4a_launch_ex(f->retire, fn, &over, &coop, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("529 blocks exceeds the 528");
  expect_detail("4 blocks of 256 threads");
  /* The descriptor and raw-bytes paths refuse it the same way. */
  uint32_t id = 0;
  assert_int_equal(t4a_descriptor_register_ex(f->table, fn, &over, &coop, &arg, 1, &id),
                   T4A_INVALID_LAUNCH);
  assert_int_equal(id, 0);
  CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(out);
  const uint32_t off[1] = {0};
  assert_int_equal(t4a_launch_raw_ex(f->retire, fn, &over, &coop, &d, 8, off, 1),
                   T4A_INVALID_LAUNCH);
  /* 64 KiB of dynamic shared memory: 3 per SM, 396. */
  t4a_launch_config shared = config_1d(397, 256, 65536);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &shared, &coop, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("exceeds the 396");
  /* Nothing was enqueued or admitted. */
  t4a_counter_values v1 = lane_counters(f);
  assert_int_equal(calls(f, "cuLaunchKernelEx"), ex0);
  assert_int_equal(v1.admissions, v0.admissions);
  struct t4a_launch_table_stats ts;
  t4a_launch_table_stats(f->table, &ts);
  assert_int_equal(ts.descriptors, 0);
  /* The fake enforces the same limit at the driver: 529 is refused there too. */
  CUlaunchAttribute la;
  memset(&la, 0, sizeof la);
  la.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  la.value.cooperative = 1;
  CUlaunchConfig lc;
  memset(&lc, 0, sizeof lc);
  lc.gridDimX = 529;
  lc.gridDimY = lc.gridDimZ = lc.blockDimY = lc.blockDimZ = 1;
  lc.blockDimX = 256;
  lc.hStream = t4a_lane_stream(f->lane);
  lc.attrs = &la;
  lc.numAttrs = 1;
  void *params[1] = {&d};
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(f->lane), NULL));
  assert_int_equal(t4a_fake_table(f->fake)->cuLaunchKernelEx(&lc, fn->handle, params, NULL),
                   CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  CK(t4a_ctx_scope_exit(&scope));
  assert_int_equal(t4a_fake_pending(f->fake, NULL), 0);
  ex0++; /* that raw call */
  /* A descriptor and a raw-bytes launch that fit run cooperatively. */
  CK(t4a_descriptor_register_ex(f->table, fn, &fits, &coop, &arg, 1, &id));
  CK(t4a_descriptor_fire(f->table, id));
  CK(t4a_launch_raw_ex(f->retire, fn, &fits, &coop, &d, 8, off, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[3], 1);
  assert_int_equal(o[6], 3);
  assert_int_equal(calls(f, "cuLaunchKernelEx"), ex0 + 2);
  CK(t4a_descriptor_unregister(f->table, id));
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- clusters ---- */

static void test_cluster_limits(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  int *o = probe_out(f, out);
  t4a_launch_config cfg = config_1d(16, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1);
  CK(t4a_launch_ex(f->retire, fn, &cfg, &two, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[0], 2);
  assert_int_equal(o[1], 1);
  assert_int_equal(o[3], 0);
  /* 2-D clusters. */
  t4a_launch_config grid2 = {{4, 4, 1}, {64, 1, 1}, 0};
  t4a_launch_attrs sq = cluster_attrs(2, 2, 1);
  CK(t4a_launch_ex(f->retire, fn, &grid2, &sq, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[1], 2);
  uint64_t ex0 = calls(f, "cuLaunchKernelEx");
  t4a_counter_values v0 = lane_counters(f);
  /* Dims that do not divide the grid. */
  t4a_launch_attrs three = cluster_attrs(3, 1, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &three, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("grid x = 16 is not a multiple of the cluster's x = 3");
  t4a_launch_attrs ydim = cluster_attrs(1, 2, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &ydim, &arg, 1), T4A_INVALID_LAUNCH);
  t4a_launch_attrs zero = cluster_attrs(2, 0, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &zero, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("zero dimension");
  /* 16 without the non-portable attribute. */
  t4a_launch_attrs sixteen = cluster_attrs(16, 1, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &sixteen, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("portable size 8");
  uint32_t id = 0;
  assert_int_equal(t4a_descriptor_register_ex(f->table, fn, &cfg, &sixteen, &arg, 1, &id),
                   T4A_INVALID_LAUNCH);
  /* Above 16, whatever the attribute. */
  t4a_launch_config g32 = config_1d(32, 128, 0);
  t4a_launch_attrs big = cluster_attrs(32, 1, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &g32, &big, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("exceeds 16");
  /* The kernel's limit: with 100,000 bytes of dynamic shared memory 2 blocks fit an SM, and a
   * cluster spans at most 2 SMs here (the fake's gpc_sms): 4 blocks. */
  t4a_launch_config heavy = config_1d(16, 128, 100000);
  t4a_launch_attrs eight = cluster_attrs(8, 1, 1), four = cluster_attrs(4, 1, 1);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &heavy, &eight, &arg, 1), T4A_INVALID_LAUNCH);
  expect_detail("exceeds the 4 the device can co-schedule");
  assert_int_equal(calls(f, "cuLaunchKernelEx"), ex0);
  assert_int_equal(lane_counters(f).admissions, v0.admissions);
  CK(t4a_launch_ex(f->retire, fn, &heavy, &four, &arg, 1));
  /* Non-portable sizes once allowed. */
  CK(t4a_function_allow_non_portable_clusters(fn, 1));
  CK(t4a_launch_ex(f->retire, fn, &cfg, &sixteen, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[0], 16);
  assert_int_equal(t4a_function_allow_non_portable_clusters(fn, 2), T4A_INVALID_ARGUMENT);
  CK(t4a_function_allow_non_portable_clusters(fn, 0));
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &sixteen, &arg, 1), T4A_INVALID_LAUNCH);
  /* Cooperative with clusters is not combined; attributes out of range. */
  t4a_launch_attrs both = cluster_attrs(2, 1, 1);
  both.cooperative = 1;
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &both, &arg, 1), T4A_UNSUPPORTED);
  t4a_launch_attrs odd = T4A_LAUNCH_ATTRS_INIT;
  odd.programmatic = 2;
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &odd, &arg, 1), T4A_INVALID_ARGUMENT);
  /* The raw-bytes path runs the same checks. */
  CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(out);
  const uint32_t off[1] = {0};
  assert_int_equal(t4a_launch_raw_ex(f->retire, fn, &cfg, &three, &d, 8, off, 1),
                   T4A_INVALID_LAUNCH);
  t4a_launch_attrs eight_ok = cluster_attrs(8, 1, 1);
  CK(t4a_launch_raw_ex(f->retire, fn, &cfg, &eight_ok, &d, 8, off, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[0], 8);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* Programmatic dependent launch, and attributes all zero (a plain launch). */
static void test_programmatic_and_no_attributes(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(4, 64, 0);
  t4a_launch_attrs pdl = T4A_LAUNCH_ATTRS_INIT, none = T4A_LAUNCH_ATTRS_INIT;
  pdl.programmatic = 1;
  CK(t4a_launch_ex(f->retire, fn, &cfg, &pdl, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  int *o = probe_out(f, out);
  assert_int_equal(o[4], 1);
  assert_int_equal(calls(f, "cuLaunchKernelEx"), 1);
  CK(t4a_launch_ex(f->retire, fn, &cfg, &none, &arg, 1));
  CK(t4a_launch_ex(f->retire, fn, &cfg, NULL, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(o[4], 0);
  assert_int_equal(o[6], 3);
  assert_int_equal(calls(f, "cuLaunchKernelEx"), 1);
  assert_int_equal(calls(f, "cuLaunchKernel"), 2);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- descriptors: no heap per fire; GRAPH tables fire them as cuLaunchKernelEx ---- */

static void fire_without_heap(fixture *f, const t4a_launch_config *cfg, const t4a_launch_attrs *a,
                              int cooperative, unsigned cluster) {
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  uint32_t id = 0;
  struct t4a_launch_table_stats ts0, ts;
  t4a_launch_table_stats(f->table, &ts0);
  CK(t4a_descriptor_register_ex(f->table, fn, cfg, a, &arg, 1, &id));
  for (int i = 0; i < 2000; i++) CK(t4a_descriptor_fire(f->table, id));
  uint64_t ex0 = calls(f, "cuLaunchKernelEx"), plain0 = calls(f, "cuLaunchKernel");
  uint64_t occ0 = calls(f, "cuOccupancyMaxActiveBlocksPerMultiprocessor") +
                  calls(f, "cuOccupancyMaxPotentialClusterSize");
  t4a_counter_values v0 = lane_counters(f);
  uint64_t heap0 = t4a_heap_allocations();
  for (int i = 0; i < 10000; i++) CK(t4a_descriptor_fire(f->table, id));
  uint64_t heap1 = t4a_heap_allocations();
  t4a_counter_values v1 = lane_counters(f);
  assert_int_equal(heap1 - heap0, 0);
  assert_true(v1.events_recorded - v0.events_recorded <= 20);
  assert_int_equal(v1.launches - v0.launches, 10000);
  assert_int_equal(calls(f, "cuLaunchKernelEx") - ex0, 10000);
  assert_int_equal(calls(f, "cuLaunchKernel"), plain0);
  assert_int_equal(calls(f, "cuGraphLaunch"), 0);
  /* Checked once at registration, never per fire. */
  assert_int_equal(calls(f, "cuOccupancyMaxActiveBlocksPerMultiprocessor") +
                       calls(f, "cuOccupancyMaxPotentialClusterSize"),
                   occ0);
  CK(t4a_retire_wait(f->retire));
  int *o = probe_out(f, out);
  assert_int_equal(o[6], 12000);
  assert_int_equal(o[3], cooperative);
  assert_int_equal(o[0], (int)cluster);
  t4a_launch_table_stats(f->table, &ts);
  assert_int_equal(ts.graph_builds, 0);
  assert_int_equal(ts.plain_fires - ts0.plain_fires, 12000);
  CK(t4a_descriptor_unregister(f->table, id));
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static void test_descriptor_fires_allocate_nothing(void **state) {
  fixture *f = *state;
  t4a_launch_config cfg = config_1d(8, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1), coop = coop_attrs();
  fire_without_heap(f, &cfg, &two, 0, 2);
  fire_without_heap(f, &cfg, &coop, 1, 0);
}
/* The same on a GRAPH table: such descriptors never get a one-node graph. */
static void test_graph_table_fires_them_plain(void **state) {
  test_descriptor_fires_allocate_nothing(state);
}

/* A GRAPH module cache: checked launches with attributes are cuLaunchKernelEx, never the
 * function's one-node graph; the same function without attributes goes through its graph. */
static void test_graph_cache_checked_launches(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(8, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1);
  for (int i = 0; i < 100; i++) CK(t4a_launch_ex(f->retire, fn, &cfg, &two, &arg, 1));
  assert_int_equal(calls(f, "cuLaunchKernelEx"), 100);
  assert_int_equal(calls(f, "cuGraphLaunch"), 0);
  assert_int_equal(lane_counters(f).launch_graphs_built, 0);
  for (int i = 0; i < 3; i++) CK(t4a_launch(f->retire, fn, &cfg, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(lane_counters(f).launch_graphs_built, 1);
  assert_true(calls(f, "cuGraphLaunch") >= 2);
  int *o = probe_out(f, out);
  assert_int_equal(o[6], 103);
  assert_int_equal(o[0], 0); /* the last, graphed, launch had no cluster */
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- chains ---- */

static void test_chain_records_attributes(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *a = make_buffer(f, 64), *b = make_buffer(f, 64);
  memset(view(f, a), 0, 64);
  memset(view(f, b), 0, 64);
  t4a_arg arg = t4a_arg_buffer(a, 0);
  t4a_launch_config cfg = config_1d(8, 128, 0), coop_cfg = config_1d(132, 256, 0);
  t4a_launch_attrs four = cluster_attrs(4, 1, 1), coop = coop_attrs();
  uint32_t id = 0, id2 = 0;
  CK(t4a_descriptor_register_ex(f->table, fn, &cfg, &four, &arg, 1, &id));
  CK(t4a_descriptor_register_ex(f->table, fn, &coop_cfg, &coop, &arg, 1, &id2));
  CK(t4a_chain_begin(f->table));
  CK(t4a_descriptor_fire(f->table, id));
  CK(t4a_descriptor_fire(f->table, id2));
  CK(t4a_descriptor_fire(f->table, id));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(f->table, &c));
  CK(t4a_retire_wait(f->retire));
  int *oa = probe_out(f, a), *ob = probe_out(f, b);
  assert_int_equal(oa[6], 0); /* recorded, not run */
  CK(t4a_chain_replay(f->table, c));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(oa[6], 3);
  assert_int_equal(oa[0], 4); /* the last node: the cluster fire */
  assert_int_equal(oa[3], 0);
  /* Rebind the cluster descriptor: its two nodes are updated and keep their attributes. */
  t4a_arg rb = t4a_arg_buffer(b, 0);
  CK(t4a_descriptor_rebind(f->table, id, 0, &rb));
  CK(t4a_chain_replay(f->table, c));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(ob[6], 2);
  assert_int_equal(ob[0], 4);
  assert_int_equal(oa[6], 4);
  assert_int_equal(oa[3], 1); /* the cooperative node, not rebound */
  assert_int_equal(oa[5], 132);
  assert_int_equal(calls(f, "cuGraphExecKernelNodeSetParams"), 2);
  t4a_chain_destroy(c);
  CK(t4a_descriptor_unregister(f->table, id));
  CK(t4a_descriptor_unregister(f->table, id2));
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- older drivers and devices ---- */

static void test_older_driver(void **state) {
  fixture *f = *state;
  uint32_t caps = t4a_driver_caps(f->drv);
  assert_int_equal(caps & (T4A_DRIVER_CAP_LAUNCH_EX | T4A_DRIVER_CAP_OCCUPANCY |
                           T4A_DRIVER_CAP_CLUSTER_OCCUPANCY),
                   0);
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(8, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1), coop = coop_attrs(), pdl = T4A_LAUNCH_ATTRS_INIT;
  pdl.programmatic = 1;
  uint32_t n = 7;
  assert_int_equal(t4a_function_occupancy(fn, 128, 0, &n), T4A_UNSUPPORTED);
  expect_detail("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  t4a_block_suggestion s;
  assert_int_equal(t4a_function_suggest_block(fn, 0, 0, 0, &s), T4A_UNSUPPORTED);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &two, &arg, 1), T4A_UNSUPPORTED);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuLaunchKernelEx");
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &coop, &arg, 1), T4A_UNSUPPORTED);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &pdl, &arg, 1), T4A_UNSUPPORTED);
  uint32_t id = 0;
  assert_int_equal(t4a_descriptor_register_ex(f->table, fn, &cfg, &two, &arg, 1, &id),
                   T4A_UNSUPPORTED);
  /* Launches without attributes work as ever. */
  CK(t4a_launch_ex(f->retire, fn, &cfg, NULL, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(lane_counters(f).launches, 1);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* cuLaunchKernelEx present, the occupancy entries missing: cooperative and cluster launches
 * cannot be checked, so they are refused; programmatic launches need no check. */
static void test_driver_without_occupancy(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(8, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1), coop = coop_attrs(), pdl = T4A_LAUNCH_ATTRS_INIT;
  pdl.programmatic = 1;
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &coop, &arg, 1), T4A_UNSUPPORTED);
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &two, &arg, 1), T4A_UNSUPPORTED);
  expect_detail("cuOccupancyMaxPotentialClusterSize");
  CK(t4a_launch_ex(f->retire, fn, &cfg, &pdl, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(calls(f, "cuLaunchKernelEx"), 1);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* A compute capability 8 device: no clusters, no programmatic launches; cooperative works. */
static void test_older_device(void **state) {
  fixture *f = *state;
  t4a_module *m = load_probe(f);
  t4a_function *fn = get_fn(m, "probe");
  t4a_buffer *out = make_buffer(f, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(8, 128, 0);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1), coop = coop_attrs(), pdl = T4A_LAUNCH_ATTRS_INIT;
  pdl.programmatic = 1;
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &two, &arg, 1), T4A_UNSUPPORTED);
  expect_detail("clusters");
  assert_int_equal(t4a_launch_ex(f->retire, fn, &cfg, &pdl, &arg, 1), T4A_UNSUPPORTED);
  assert_int_equal(t4a_function_allow_non_portable_clusters(fn, 1), T4A_UNSUPPORTED);
  CK(t4a_launch_ex(f->retire, fn, &cfg, &coop, &arg, 1));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(calls(f, "cuLaunchKernelEx"), 1);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- failure sweep ---- */

static t4a_status op_attrs(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *out = NULL;
  t4a_launch_table *t = NULL;
  uint32_t id = 0, n = 0;
  t4a_block_suggestion s;
  const char *names[1] = {"probe"};
  size_t bytes = 0;
  char *image = fake_image(names, 1, &bytes);
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_module_cache_create(r, NULL, &c);
  if (st == T4A_OK) st = t4a_module_load(c, image, bytes, T4A_IMAGE_CUBIN, &m);
  free(image);
  if (st == T4A_OK) st = t4a_module_get_function(m, "probe", &fn);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &out);
  if (st == T4A_OK) memset(view(f, out), 0, 64);
  t4a_arg arg = t4a_arg_buffer(out, 0);
  t4a_launch_config cfg = config_1d(16, 128, 0), heavy = config_1d(16, 128, 65536);
  t4a_launch_attrs two = cluster_attrs(2, 1, 1), sixteen = cluster_attrs(16, 1, 1);
  t4a_launch_attrs coop = coop_attrs();
  if (st == T4A_OK) st = t4a_function_occupancy(fn, 128, 65536, &n);
  if (st == T4A_OK) st = t4a_function_suggest_block(fn, 1024, 8, 0, &s);
  if (st == T4A_OK) st = t4a_function_allow_non_portable_clusters(fn, 1);
  if (st == T4A_OK) st = t4a_launch_ex(r, fn, &cfg, &sixteen, &arg, 1);
  if (st == T4A_OK) st = t4a_launch_ex(r, fn, &heavy, &coop, &arg, 1);
  if (st == T4A_OK) {
    CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(out);
    const uint32_t off[1] = {0};
    st = t4a_launch_raw_ex(r, fn, &cfg, &two, &d, 8, off, 1);
  }
  if (st == T4A_OK) st = t4a_launch_table_create(r, NULL, &t);
  if (st == T4A_OK) st = t4a_descriptor_register_ex(t, fn, &cfg, &two, &arg, 1, &id);
  if (st == T4A_OK) st = t4a_descriptor_fire(t, id);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  if (st == T4A_OK && ((int *)view(f, out))[6] != 4) {
    st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "bad count");
  }
  t4a_launch_table_destroy(t);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {
      .name = "attrs", .fake = f->fake, .op = op_attrs, .unaccounted = unaccounted, .user = f};
  f->baseline = unaccounted(f);
  assert_int_equal(f->baseline, 0);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 20);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_HANDLE, T4A_DRIVER_ERROR) > 20);
  /* cuLaunchKernelEx reporting failure with its kernel queued: typed, buffer quarantined. */
  s.entry = "cuLaunchKernelEx";
  s.after_enqueue = 1;
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR), 4);
  s.entry = NULL;
  s.after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 5);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_occupancy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_suggest_matches_the_driver, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cooperative_grid_checked_before_enqueue, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cluster_limits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_programmatic_and_no_attributes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_descriptor_fires_allocate_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_table_fires_them_plain, setup_graph, teardown),
      cmocka_unit_test_setup_teardown(test_graph_cache_checked_launches, setup_graph, teardown),
      cmocka_unit_test_setup_teardown(test_chain_records_attributes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_older_driver, setup_old_driver, teardown),
      cmocka_unit_test_setup_teardown(test_driver_without_occupancy, setup_no_occupancy,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_older_device, setup_ampere, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
