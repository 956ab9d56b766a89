/* The runtime facade (t4a/t4a.h) on the fake driver: open, every accessor, the short paths and
 * close; a real NVRTC compile (CUBIN and PTX) loaded by the fake and launched as a host kernel
 * registered under the same name, round-tripped through upload and download; NVRTC asked for only
 * at the first compile; close from inside the runtime's own raw scope (REENTRY); buffers and
 * modules that outlive their runtime; two runtimes on one ordinal, each with its own CUmemoryPool
 * and its own pool figures; the stats JSON (parsed, every counter name present, the
 * size asked back when the buffer is too small); and failure sweeps over open/close and over a
 * whole use of the runtime (every driver call, host allocations, lock inits, copy threads) with
 * exact accounting of what the fake still holds. */
#define _GNU_SOURCE /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* The executable a new process of this test is started from (main: argv[0] when it has a path). */
static const char *g_self = "/proc/self/exe";

#include "t4a/t4a.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/runtime_fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)

enum { N = 1000 };

/* The README's kernel, compiled for real by NVRTC. */
static const char k_scale_src[] =
    "extern \"C\" __global__ void scale(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n";

/* The same kernel as PTX text (the fake reads its .entry names; parameters come from
 * t4a_hk_scale's registration). */
static const char k_scale_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry scale(.param .u64 x, .param .f32 a, .param .u32 n)\n{\n  ret;\n}\n";

typedef t4a_fixture fixture;

/* A fake of `devices` devices and its driver (the runtimes open their own lanes); the kernels
 * scale (t4a_hk_scale: the fake runs every thread of the grid) and t4a_nop. */
static int setup_devices(void **state, int devices) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = devices;
  o.stacks = 0;
  o.kernels[0] = &t4a_hk_scale;
  if (t4a_fixture_setup(state, &o) != 0) return -1;
  t4a_host_kernel_register(((fixture *)*state)->fake, &t4a_hk_nop, "t4a_nop", NULL);
  return 0;
}
static int setup(void **state) { return setup_devices(state, 2); }

static int teardown(void **state) { return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT); }

static t4a_runtime_options small_options(fixture *f) { return t4a_fixture_runtime_options(f->drv); }
static t4a_runtime *open_rt(fixture *f) { return t4a_fixture_open_runtime(f->drv, 0); }

static int nvrtc_available(void) {
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) return 0;
  t4a_nvrtc_lib_release(lib);
  return 1;
}

static void fill(float *x, int n) {
  for (int i = 0; i < n; i++) x[i] = (float)i - 17.5f;
}

/* upload, scale by `a`, download: the result must be x * a. */
static void round_trip(t4a_runtime *rt, t4a_function *fn, float a) {
  float x[N], back[N];
  int n = N;
  fill(x, N);
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, sizeof x, &b));
  CK(t4a_runtime_upload(rt, b, 0, x, sizeof x));
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_runtime_launch(rt, fn, (N + 255) / 256, 256, args, 3));
  memset(back, 0, sizeof back);
  t4a_buffer *c = NULL;
  CK(t4a_runtime_buffer(rt, sizeof x, &c));
  CK(t4a_runtime_copy(rt, c, 0, b, 0, sizeof x));
  t4a_buffer_release(b); /* the launch and the copy keep it until they ran */
  CK(t4a_runtime_download(rt, c, 0, back, sizeof back));
  for (int i = 0; i < N; i++) assert_true(back[i] == x[i] * a);
  t4a_buffer_release(c);
}

/* ---- open, accessors, short paths, close ---- */

static void test_open_accessors_close(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  assert_ptr_equal(t4a_runtime_driver(rt), f->drv);
  assert_int_equal(t4a_runtime_ordinal(rt), 0);
  t4a_lane *lane = t4a_runtime_lane(rt);
  assert_non_null(lane);
  assert_int_equal(t4a_lane_ordinal(lane), 0);
  assert_ptr_equal(t4a_mem_pool_lane(t4a_runtime_pool(rt)), lane);
  assert_ptr_equal(t4a_retire_lane(t4a_runtime_retire(rt)), lane);
  assert_ptr_equal(t4a_xfer_lane(t4a_runtime_xfer(rt)), lane);
  assert_int_equal(t4a_xfer_chunk_bytes(t4a_runtime_xfer(rt)), 4096);
  assert_non_null(t4a_runtime_module_cache(rt));
  assert_non_null(t4a_runtime_table(rt));
  assert_string_equal(t4a_runtime_target(rt), "sm_90"); /* the fake's compute capability 9.0 */
  assert_null(t4a_runtime_artifact_cache(rt));          /* NVRTC is not opened by open */
  /* The lower APIs take the pieces as they are: a module through the cache, a launch through
   * t4a_launch on the retire, a fire through the table. */
  t4a_module *m = NULL;
  CK(t4a_module_load(t4a_runtime_module_cache(rt), k_scale_ptx, sizeof k_scale_ptx,
                     T4A_IMAGE_PTX, &m));
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  round_trip(rt, fn, 2.0f);
  float x[N], a = 0.5f;
  int n = N;
  fill(x, N);
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, sizeof x, &b));
  CK(t4a_runtime_upload(rt, b, 0, x, sizeof x));
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  t4a_launch_config c = {{4, 1, 1}, {256, 1, 1}, 0};
  CK(t4a_launch(t4a_runtime_retire(rt), fn, &c, args, 3));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t4a_runtime_table(rt), fn, &c, args, 3, &id));
  CK(t4a_descriptor_fire(t4a_runtime_table(rt), id));
  CK(t4a_runtime_sync(rt));
  float back[N];
  CK(t4a_runtime_download(rt, b, 0, back, sizeof back));
  for (int i = 0; i < N; i++) assert_true(back[i] == x[i] * 0.25f);
  CK(t4a_descriptor_unregister(t4a_runtime_table(rt), id));
  t4a_counter_values v;
  t4a_runtime_stats(rt, &v);
  assert_int_equal(v.launches, 3);
  assert_int_equal(v.module_loads, 1);
  assert_int_equal(v.copies_same_device, 1);
  assert_int_equal(v.bytes_uploaded, 2 * sizeof x);
  assert_int_equal(v.bytes_downloaded, 2 * sizeof x);
  t4a_counter_values lv;
  t4a_lane_stats(lane, &lv);
  assert_memory_equal(&v, &lv, sizeof v);
  t4a_buffer_release(b);
  t4a_function_release(fn);
  t4a_module_release(m);
  CK(t4a_runtime_close(rt));
}

static void test_defaults_and_refusals(void **state) {
  fixture *f = *state;
  t4a_runtime_options o = small_options(f);
  t4a_runtime *rt = (t4a_runtime *)1;
  assert_int_equal(t4a_runtime_open(0, &o, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_open(7, &o, &rt), T4A_INVALID_DEVICE);
  assert_null(rt);
  o.table_capacity = 70000; /* the table's own check */
  assert_int_equal(t4a_runtime_open(0, &o, &rt), T4A_INVALID_ARGUMENT);
  assert_null(rt);
  o.table_capacity = 0;
  /* The launch policy is set in one place, options.launch: a policy in options.modules is
   * refused, as is an unknown strategy (the pieces' own check). */
  o.modules.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
  assert_int_equal(t4a_runtime_open(0, &o, &rt), T4A_INVALID_ARGUMENT);
  assert_null(rt);
  o.modules.launch.strategy = T4A_LAUNCH_STRATEGY_AUTO;
  o.modules.launch.graph_after = 3;
  assert_int_equal(t4a_runtime_open(0, &o, &rt), T4A_INVALID_ARGUMENT);
  o.modules.launch.graph_after = 0;
  o.launch.strategy = (t4a_launch_strategy)5;
  assert_int_equal(t4a_runtime_open(0, &o, &rt), T4A_INVALID_ARGUMENT);
  assert_null(rt);
  o.launch.strategy = T4A_LAUNCH_STRATEGY_AUTO;
  o.target = "sm_90_but_far_longer_than_any_target_name";
  assert_int_equal(t4a_runtime_open(0, &o, &rt), T4A_INVALID_ARGUMENT);
  o.target = "sm_80";
  o.xfer.copy_threads = 0; /* the default pool of copy threads */
  o.xfer.chunk_bytes = 0;  /* the default ring: 2 x 16 MiB */
  CK(t4a_runtime_open(1, &o, &rt));
  assert_string_equal(t4a_runtime_target(rt), "sm_80");
  assert_int_equal(t4a_runtime_ordinal(rt), 1);
  assert_int_equal(t4a_xfer_chunk_bytes(t4a_runtime_xfer(rt)), T4A_XFER_DEFAULT_CHUNK_BYTES);
  assert_int_equal(t4a_xfer_num_chunks(t4a_runtime_xfer(rt)), T4A_XFER_DEFAULT_NUM_CHUNKS);
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_runtime_close(NULL), T4A_OK);
  /* NULL runtimes: typed, outputs cleared. */
  t4a_buffer *b = (t4a_buffer *)1;
  assert_int_equal(t4a_runtime_buffer(NULL, 16, &b), T4A_INVALID_ARGUMENT);
  assert_null(b);
  assert_int_equal(t4a_runtime_upload(NULL, NULL, 0, "x", 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_download(NULL, NULL, 0, &b, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_copy(NULL, NULL, 0, NULL, 0, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_sync(NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_launch(NULL, NULL, 1, 1, NULL, 0), T4A_INVALID_ARGUMENT);
  t4a_function *fn = (t4a_function *)1;
  assert_int_equal(t4a_runtime_kernel(NULL, k_scale_src, "scale", &fn), T4A_INVALID_ARGUMENT);
  assert_null(fn);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_compile(NULL, k_scale_src, NULL, &a), T4A_INVALID_ARGUMENT);
  assert_null(a);
  assert_int_equal(t4a_runtime_stats_json(NULL, NULL, 0, NULL), T4A_INVALID_ARGUMENT);
  t4a_counter_values v;
  memset(&v, 0xff, sizeof v);
  t4a_runtime_stats(NULL, &v);
  assert_int_equal(v.launches, 0);
  assert_null(t4a_runtime_lane(NULL));
  assert_null(t4a_runtime_artifact_cache(NULL));
  assert_int_equal(t4a_runtime_ordinal(NULL), -1);
  /* Defaults everywhere with NULL options reach for the process's driver: none here. */
  rt = (t4a_runtime *)1;
  t4a_status st = t4a_runtime_open(0, NULL, &rt);
  if (st == T4A_OK) { /* a machine with a GPU */
    CK(t4a_runtime_close(rt));
  } else {
    assert_null(rt);
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(e.status, st);
  }
}

/* Buffers and modules outlive their runtime: each holds what it needs. */
static void test_objects_outlive_close(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &b));
  t4a_module *m = NULL;
  CK(t4a_runtime_load_image(rt, k_scale_ptx, sizeof k_scale_ptx, &m));
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  /* The test keeps the lane too, to let the last frees run before the context goes (the
   * fake drops work still queued when the last holder releases the primary context). */
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_buffer_size(b), 4096);
  assert_string_equal(t4a_function_name(fn), "scale");
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  assert_int_equal(l.modules, 1);
  t4a_function_release(fn);
  t4a_module_release(m); /* the last reference: unloaded under the lane's context */
  t4a_buffer_release(b); /* freed on the lane's stream, with the pool */
  t4a_fake_live_objects(f->fake, &l);
  assert_int_equal(l.modules, 0);
  assert_int_equal(l.pools, 0);
  CK(t4a_lane_synchronize(lane));
  t4a_lane_release(lane);
}

/* A raw scope that fails: its writable buffer is quarantined (held forever, with its pool). */
static t4a_status failing_scope(t4a_raw_scope *scope, void *user) {
  (void)scope;
  (void)user;
  return t4a_error_set_(T4A_INTERNAL, "failing_scope", 0, NULL, 0, "the scope fails");
}

/* Regression (found by testing/fuzz/ops_fuzz.c): a quarantined buffer keeps the runtime's pool
 * alive for ever, so blocks other buffers released into the pool's reuse cache were never freed
 * and never counted. Close returns the cached blocks after a proved drain: what stays alive is
 * exactly the quarantined block, which t4a counts. */
static void test_close_returns_cached_blocks(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  t4a_buffer *q = NULL, *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &q));
  t4a_raw_binding bind = {q, T4A_RAW_WRITE};
  assert_int_equal(t4a_raw_run(t4a_runtime_retire(rt), &bind, 1, failing_scope, NULL),
                   T4A_INTERNAL);
  t4a_buffer_release(q); /* quarantined: t4a keeps it */
  CK(t4a_runtime_buffer(rt, 8192, &b));
  t4a_buffer_release(b); /* into the reuse cache */
  struct t4a_mem_pool_stats ps;
  t4a_mem_pool_stats(t4a_runtime_pool(rt), &ps);
  assert_int_equal(ps.cached_blocks, 1);
  CK(t4a_runtime_close(rt));
  CK(t4a_lane_synchronize(lane));
  t4a_fake_progress(f->fake);
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  assert_int_equal(l.device_allocs, 1); /* the quarantined block only */
  assert_int_equal(v.buffers_leaked + v.leaked, 1);
  t4a_lane_release(lane);
}

/* The same on a lane whose context was lost: the cached block can never be freed, and close
 * counts it (before the fix it stayed alive, uncounted, in a pool the quarantine keeps). */
static void test_close_counts_cached_blocks_of_a_lost_lane(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  t4a_buffer *q = NULL, *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &q));
  CK(t4a_runtime_buffer(rt, 8192, &b));
  t4a_buffer_release(b); /* into the reuse cache */
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  t4a_raw_binding bind = {q, T4A_RAW_WRITE};
  assert_int_equal(t4a_raw_run(t4a_runtime_retire(rt), &bind, 1, failing_scope, NULL),
                   T4A_CONTEXT_LOST);
  t4a_buffer_release(q);
  assert_int_not_equal(t4a_runtime_close(rt), T4A_OK);
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  assert_int_equal(l.device_allocs, 2);
  /* The quarantined block is among the retirement state's leaked keepalives (leaked); the
   * cached block is counted as a leaked buffer. */
  assert_int_equal(v.buffers_leaked, 1);
  t4a_lane_release(lane);
}

/* Regression (found by testing/fuzz/ops_fuzz.c, sticky_after_outliving_release): a buffer that
 * outlives its runtime and is released after close, the device then faulting. Before the fix the
 * release cached the block, the pool's last release enqueued its free on a lane nobody waits for,
 * and after the fault that free never ran and was never counted. Now a closed pool caches nothing
 * and the release frees the block after a proved drain (one counted host wait). */
static void test_release_after_close_then_fault(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane); /* to read its counters after close */
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &b));
  CK(t4a_runtime_close(rt));
  t4a_buffer_release(b); /* after close: nobody drains the lane any more */
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_not_equal(t4a_lane_synchronize(lane), T4A_OK);
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  t4a_lane_release(lane); /* the fake drops work still queued when the context goes */
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  assert_int_equal(v.buffers_leaked + v.leaked, 0);
  assert_int_equal(l.device_allocs, 0); /* freed after a proved drain */
  t4a_fake_set_sticky(f->fake, 0, CUDA_SUCCESS);
}

/* Regression (found by testing/fuzz/ops_fuzz.c, quarantined_pool_caches_after_close): a
 * quarantined buffer keeps the pool alive for ever; before the fix a buffer released after close
 * went into that pool's reuse cache, never freed and never counted. Now a closed pool caches
 * nothing: what stays alive is exactly the quarantined block, which t4a counts. */
static void test_release_after_close_with_quarantine(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  t4a_buffer *q = NULL, *b = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &q));
  t4a_raw_binding bind = {q, T4A_RAW_WRITE};
  assert_int_equal(t4a_raw_run(t4a_runtime_retire(rt), &bind, 1, failing_scope, NULL),
                   T4A_INTERNAL);
  t4a_buffer_release(q); /* quarantined: t4a keeps it, and with it the pool */
  CK(t4a_runtime_buffer(rt, 8192, &b));
  CK(t4a_runtime_close(rt));
  t4a_mem_pool *pool = t4a_buffer_pool(b);
  t4a_buffer_release(b); /* after close */
  struct t4a_mem_pool_stats ps;
  t4a_mem_pool_stats(pool, &ps); /* still alive: the quarantined buffer holds it */
  assert_int_equal(ps.cached_blocks, 0);
  CK(t4a_lane_synchronize(lane));
  t4a_fake_progress(f->fake);
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  assert_int_equal(l.device_allocs, 1); /* the quarantined block only */
  assert_int_equal(v.buffers_leaked + v.leaked, 1);
  t4a_lane_release(lane);
}

static void test_function_of_another_runtime(void **state) {
  fixture *f = *state;
  t4a_runtime *r1 = open_rt(f), *r2 = open_rt(f); /* two lanes on device 0 */
  t4a_module *m = NULL;
  CK(t4a_runtime_load_image(r1, k_scale_ptx, sizeof k_scale_ptx, &m));
  t4a_function *fn = (t4a_function *)1;
  assert_int_equal(t4a_runtime_function(r2, m, "scale", &fn), T4A_FOREIGN_HANDLE);
  assert_null(fn);
  assert_int_equal(t4a_runtime_function(r1, m, "nope", &fn), T4A_UNKNOWN_ENTRY_POINT);
  CK(t4a_runtime_function(r1, m, "scale", &fn));
  float x = 1.0f, a = 2.0f;
  int n = 1;
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(r2, sizeof x, &b));
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  assert_int_equal(t4a_runtime_launch(r2, fn, 1, 1, args, 3), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_launch(r1, fn, 1, 1, args, 3), T4A_FOREIGN_HANDLE);
  t4a_buffer_release(b);
  t4a_function_release(fn);
  t4a_module_release(m);
  CK(t4a_runtime_close(r2));
  CK(t4a_runtime_close(r1));
}

/* A module global through the facade: a view of runtime 1's domain, refused to runtime 2 (lookup,
 * upload, launch argument) with nothing enqueued; written and read back through runtime 1. */
static void test_global_of_another_runtime(void **state) {
  fixture *f = *state;
  t4a_runtime *r1 = open_rt(f), *r2 = open_rt(f);
  static const char img[] = "T4AFAKE1\nscale\nglobal gx 16\n";
  t4a_module *m = NULL;
  CK(t4a_module_load(t4a_runtime_module_cache(r1), img, sizeof img, T4A_IMAGE_PTX, &m));
  t4a_buffer *g = (t4a_buffer *)1;
  assert_int_equal(t4a_runtime_global(r2, m, "gx", 0, &g), T4A_FOREIGN_HANDLE);
  assert_null(g);
  assert_int_equal(t4a_runtime_global(r1, m, "gy", 0, &g), T4A_UNKNOWN_ENTRY_POINT);
  assert_int_equal(t4a_runtime_global(r1, m, "gx", 8, &g), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(t4a_runtime_global(NULL, m, "gx", 0, &g), T4A_INVALID_ARGUMENT);
  CK(t4a_runtime_global(r1, m, "gx", 16, &g));
  float x[4] = {1, 2, 3, 4}, back[4] = {0};
  assert_int_equal(t4a_runtime_upload(r2, g, 0, x, sizeof x), T4A_FOREIGN_HANDLE);
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(r1, m, "scale", &fn));
  float a = 2.0f;
  int n = 4;
  t4a_arg args[3] = {t4a_arg_buffer(g, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  CK(t4a_runtime_upload(r1, g, 0, x, sizeof x));
  CK(t4a_runtime_launch(r1, fn, 1, 4, args, 3));
  CK(t4a_runtime_download(r1, g, 0, back, sizeof back));
  for (int i = 0; i < 4; i++) assert_true(back[i] == 2.0f * x[i]);
  t4a_function_release(fn);
  t4a_buffer_release(g);
  t4a_module_release(m);
  CK(t4a_runtime_close(r2));
  CK(t4a_runtime_close(r1));
}

/* Inside a raw scope of runtime 2, runtime 1 (opened first: its lane comes before in the lock
 * order) refuses what would wait for its lock — a sync, an upload, a launch, a descriptor
 * (its table's lock) — with REENTRY instead of risking a deadlock, and still closes (no other
 * thread may use a runtime being closed). Runtime 2's scope inside runtime 1's works. */
typedef struct order_probe {
  t4a_runtime *other;
  t4a_function *fn;
  t4a_buffer *b;
  int close;
  t4a_status sync_st, upload_st, launch_st, register_st, close_st;
} order_probe;
static t4a_status order_inside(t4a_raw_scope *scope, void *user) {
  (void)scope;
  order_probe *p = user;
  if (p->close) {
    p->close_st = t4a_runtime_close(p->other);
    return T4A_OK;
  }
  p->sync_st = t4a_runtime_sync(p->other);
  p->upload_st = t4a_runtime_upload(p->other, p->b, 0, "0123", 4);
  float a = 2.0f;
  int n = 1;
  t4a_arg args[3] = {t4a_arg_buffer(p->b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  p->launch_st = t4a_runtime_launch(p->other, p->fn, 1, 32, args, 3);
  t4a_launch_config c = {{1, 1, 1}, {32, 1, 1}, 0};
  uint32_t id = 0;
  p->register_st = t4a_descriptor_register(t4a_runtime_table(p->other), p->fn, &c, args, 3, &id);
  return T4A_OK;
}
static void test_lock_order_across_runtimes(void **state) {
  fixture *f = *state;
  t4a_runtime *r1 = open_rt(f), *r2 = open_rt(f);
  assert_true(t4a_lane_domain(t4a_runtime_lane(r1)) < t4a_lane_domain(t4a_runtime_lane(r2)));
  t4a_module *m = NULL;
  CK(t4a_runtime_load_image(r1, k_scale_ptx, sizeof k_scale_ptx, &m));
  order_probe p = {.other = r1};
  CK(t4a_runtime_function(r1, m, "scale", &p.fn));
  CK(t4a_runtime_buffer(r1, 64, &p.b));
  CK(t4a_raw_run(t4a_runtime_retire(r2), NULL, 0, order_inside, &p));
  assert_int_equal(p.sync_st, T4A_REENTRY);
  assert_int_equal(p.upload_st, T4A_REENTRY);
  assert_int_equal(p.launch_st, T4A_REENTRY);
  assert_int_equal(p.register_st, T4A_REENTRY);
  /* In order: runtime 1's scope, runtime 2's work inside (the descriptor stays registered; the
   * table goes with runtime 2's close). */
  order_probe q = {.other = r2};
  t4a_module *m2 = NULL;
  CK(t4a_runtime_load_image(r2, k_scale_ptx, sizeof k_scale_ptx, &m2));
  CK(t4a_runtime_function(r2, m2, "scale", &q.fn));
  CK(t4a_runtime_buffer(r2, 64, &q.b));
  CK(t4a_raw_run(t4a_runtime_retire(r1), NULL, 0, order_inside, &q));
  CK(q.sync_st);
  CK(q.upload_st);
  CK(q.launch_st);
  CK(q.register_st);
  t4a_buffer_release(q.b);
  t4a_function_release(q.fn);
  t4a_module_release(m2);
  /* Runtime 1 closes from inside runtime 2's scope. */
  t4a_buffer_release(p.b);
  t4a_function_release(p.fn);
  t4a_module_release(m);
  p.close = 1;
  CK(t4a_raw_run(t4a_runtime_retire(r2), NULL, 0, order_inside, &p));
  CK(p.close_st);
  CK(t4a_runtime_close(r2));
}

typedef struct reentry {
  t4a_runtime *rt;
  t4a_status close_st, sync_st, upload_st;
} reentry;

static t4a_status from_inside(t4a_raw_scope *scope, void *user) {
  (void)scope;
  reentry *r = user;
  r->close_st = t4a_runtime_close(r->rt);
  r->sync_st = t4a_runtime_sync(r->rt);
  t4a_buffer *b = NULL;
  r->upload_st = t4a_runtime_buffer(r->rt, 16, &b);
  if (r->upload_st == T4A_OK) r->upload_st = t4a_runtime_upload(r->rt, b, 0, "0123456789", 10);
  t4a_buffer_release(b);
  return T4A_OK;
}

static void test_close_from_inside_is_reentry(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  reentry r = {rt, T4A_OK, T4A_OK, T4A_OK};
  CK(t4a_raw_run(t4a_runtime_retire(rt), NULL, 0, from_inside, &r));
  assert_int_equal(r.close_st, T4A_REENTRY);
  assert_int_equal(r.sync_st, T4A_REENTRY);
  assert_int_equal(r.upload_st, T4A_REENTRY);
  /* Nothing was closed: the runtime works, then closes. */
  t4a_module *m = NULL;
  CK(t4a_runtime_load_image(rt, k_scale_ptx, sizeof k_scale_ptx, &m));
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  round_trip(rt, fn, -3.0f);
  t4a_function_release(fn);
  t4a_module_release(m);
  CK(t4a_runtime_close(rt));
}

/* ---- compile (real NVRTC), load, launch, download ---- */

static void test_compile_load_launch_download(void **state) {
  fixture *f = *state;
  if (!nvrtc_available()) {
    fprintf(stderr, "# NVRTC is not available: skipped\n");
    skip();
  }
  t4a_runtime *rt = open_rt(f);
  /* The one-call path: NVRTC -> CUBIN -> the fake loads it (its ELF entries) -> the host kernel
   * registered as "scale" runs it. */
  t4a_function *fn = NULL;
  CK(t4a_runtime_kernel(rt, k_scale_src, "scale", &fn));
  t4a_nvrtc_cache *cache = t4a_runtime_artifact_cache(rt);
  assert_non_null(cache);
  round_trip(rt, fn, 1.5f);
  t4a_function_release(fn);
  /* The three calls: the compile is a memory hit, the load a module-cache hit. */
  t4a_nvrtc_artifact *a = NULL;
  CK(t4a_runtime_compile(rt, k_scale_src, NULL, &a));
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_CUBIN);
  assert_string_equal(t4a_nvrtc_artifact_target(a), "sm_90");
  t4a_module *m = NULL;
  CK(t4a_runtime_load(rt, a, &m));
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  round_trip(rt, fn, 4.0f);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(cache, &cs);
  t4a_counter_values cv = cs.counters, v;
  assert_int_equal(cv.nvrtc_compile_attempts, 1);
  assert_int_equal(cv.nvrtc_mem_hits, 1);
  t4a_runtime_stats(rt, &v);
  assert_int_equal(v.module_loads, 1);
  /* A failing compile: typed, the log's headline in the detail, nothing cached. */
  t4a_nvrtc_artifact *bad = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_compile(rt, "__global__ void k() { undefined_thing(); }", "bad.cu",
                                       &bad),
                   T4A_COMPILE_FAILED);
  assert_null(bad);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "undefined_thing"));
  /* A full request: its own name expression, the runtime's target filled in; the log of a
   * failure in the outcome. */
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.source = "template <int K> __global__ void twice(float *x) { x[threadIdx.x] *= K; }\n";
  const char *expr[1] = {"twice<2>"};
  rq.name_expressions = expr;
  rq.num_name_expressions = 1;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  t4a_nvrtc_artifact *ta = NULL;
  CK(t4a_runtime_compile_request(rt, &rq, &ta, &oc));
  assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_string_equal(t4a_nvrtc_artifact_target(ta), "sm_90");
  assert_int_equal(t4a_nvrtc_artifact_output(ta), T4A_NVRTC_OUTPUT_PTX); /* as the request says */
  assert_non_null(t4a_nvrtc_artifact_lowered_name(ta, "twice<2>"));
  rq.source = "__global__ void k() { also_undefined(); }\n";
  rq.name_expressions = NULL;
  rq.num_name_expressions = 0;
  t4a_nvrtc_artifact *tb = NULL;
  assert_int_equal(t4a_runtime_compile_request(rt, &rq, &tb, &oc), T4A_COMPILE_FAILED);
  assert_non_null(oc.log);
  assert_non_null(strstr(oc.log, "also_undefined"));
  t4a_nvrtc_outcome_deinit(&oc);
  /* The include-root limit counts the toolkit's roots the runtime adds: the request's own up to
   * the limit, plus the toolkit's, is LIMIT_EXCEEDED before anything is looked at. */
  const char *many[T4A_NVRTC_MAX_INCLUDE_ROOTS];
  for (size_t i = 0; i < T4A_NVRTC_MAX_INCLUDE_ROOTS; i++) many[i] = "/nonexistent-t4a-root";
  rq.include_roots = many;
  rq.num_include_roots = T4A_NVRTC_MAX_INCLUDE_ROOTS;
  t4a_nvrtc_toolkit tk;
  if (t4a_nvrtc_toolkit_find(NULL, &tk) == T4A_OK) {
    t4a_nvrtc_cache_stats(cache, &cs);
    uint64_t attempts = cs.counters.nvrtc_compile_attempts;
    uint64_t misses = cs.counters.nvrtc_mem_misses;
    tb = (t4a_nvrtc_artifact *)1;
    assert_int_equal(t4a_runtime_compile_request(rt, &rq, &tb, NULL), T4A_LIMIT_EXCEEDED);
    assert_null(tb);
    t4a_error_last(&e);
    char want[64];
    snprintf(want, sizeof want, "at most %u", T4A_NVRTC_MAX_INCLUDE_ROOTS);
    assert_non_null(strstr(e.message, want));
    assert_non_null(strstr(e.message, "the toolkit's"));
    t4a_nvrtc_cache_stats(cache, &cs);
    assert_int_equal(cs.counters.nvrtc_compile_attempts, attempts); /* nothing looked at */
    assert_int_equal(cs.counters.nvrtc_mem_misses, misses);
  }
  rq.num_include_roots = 0;
  rq.include_roots = NULL;
  t4a_nvrtc_artifact_release(ta);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(a);
  CK(t4a_runtime_close(rt));
}

/* ---- LTO: a device library linked with nvJitLink (real), loaded by the fake ---- */

static int jitlink_available(void) {
  t4a_jitlink_lib *lib = NULL;
  if (t4a_jitlink_lib_open(NULL, &lib) != T4A_OK) return 0;
  t4a_jitlink_lib_release(lib);
  return 1;
}

/* The library: compiled once to LTO-IR. The kernel calls it; on the fake the host kernel "scale"
 * stands for it (x * a), on a GPU (t4a/lto_gpu_test.c) the linked code runs. */
static const char k_lib_mul_src[] =
    "extern \"C\" __device__ float lib_mul(float x, float a) { return x * a; }\n";
static const char k_scale_linked_src[] =
    "extern \"C\" __device__ float lib_mul(float x, float a);\n"
    "extern \"C\" __global__ void scale(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = lib_mul(x[i], a);\n"
    "}\n";

static void test_link_load_launch(void **state) {
  fixture *f = *state;
  if (!nvrtc_available() || !jitlink_available()) {
    fprintf(stderr, "# NVRTC or nvJitLink is not available: skipped\n");
    skip();
  }
  char dir[] = "/tmp/t4a_facade_lto_XXXXXX";
  assert_non_null(mkdtemp(dir));
  t4a_runtime_options o = small_options(f);
  o.artifacts.disk_dir = dir;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  t4a_nvrtc_artifact *lib = NULL;
  CK(t4a_runtime_compile_lto(rt, k_lib_mul_src, "lib_mul.cu", &lib));
  assert_int_equal(t4a_nvrtc_artifact_output(lib), T4A_NVRTC_OUTPUT_LTOIR);
  /* An unlinked LTO-IR artifact does not load. */
  t4a_module *m = (t4a_module *)1;
  assert_int_equal(t4a_runtime_load(rt, lib, &m), T4A_INVALID_ARGUMENT);
  assert_null(m);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "link LTO-IR first"));
  /* The one-call path: compile the kernel to LTO-IR, link it with the library, load, look up. */
  const t4a_nvrtc_artifact *libs[1] = {lib};
  t4a_function *fn = NULL;
  CK(t4a_runtime_kernel_linked(rt, k_scale_linked_src, libs, 1, "scale", &fn));
  round_trip(rt, fn, 2.5f);
  t4a_function_release(fn);
  /* The same again: the compile and the link are memory hits, the load a module-cache hit. */
  t4a_counter_values v0, v1;
  t4a_runtime_stats(rt, &v0);
  CK(t4a_runtime_kernel_linked(rt, k_scale_linked_src, libs, 1, "scale", &fn));
  t4a_runtime_stats(rt, &v1);
  assert_int_equal(v1.module_loads, v0.module_loads);
  t4a_function_release(fn);
  /* The explicit calls: the link's origin, the linked CUBIN for the runtime's target. */
  t4a_nvrtc_artifact *k = NULL, *linked = NULL;
  CK(t4a_runtime_compile_lto(rt, k_scale_linked_src, NULL, &k));
  const t4a_nvrtc_artifact *in[2] = {k, lib};
  t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
  r.inputs = in;
  r.num_inputs = 2;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  CK(t4a_runtime_link(rt, &r, &linked, &oc));
  assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(t4a_nvrtc_artifact_output(linked), T4A_NVRTC_OUTPUT_CUBIN);
  assert_string_equal(t4a_nvrtc_artifact_target(linked), "sm_90");
  CK(t4a_runtime_load(rt, linked, &m));
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  round_trip(rt, fn, -3.0f);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(linked);
  /* Bad input: a PTX input; an undefined symbol (its log in the outcome); nothing cached. */
  t4a_nvrtc_artifact *ptx = NULL;
  t4a_nvrtc_request pr = T4A_NVRTC_REQUEST_INIT;
  pr.source = k_scale_src;
  pr.output = T4A_NVRTC_OUTPUT_PTX;
  CK(t4a_runtime_compile_request(rt, &pr, &ptx, NULL));
  in[1] = ptx;
  linked = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_link(rt, &r, &linked, &oc), T4A_INVALID_ARGUMENT);
  assert_null(linked);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "is ptx, not LTO-IR"));
  in[1] = k; /* the kernel twice: lib_mul is undefined (and scale defined twice) */
  in[0] = k;
  r.num_inputs = 1;
  linked = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_link(rt, &r, &linked, &oc), T4A_LINK_FAILED);
  assert_null(linked);
  assert_non_null(oc.log);
  assert_non_null(strstr(oc.log, "lib_mul"));
  /* The link cache wrote its entry beside the artifacts, in the runtime's disk directory: a new
   * runtime on the same directory gets the linked CUBIN from disk. */
  t4a_nvrtc_outcome_deinit(&oc);
  t4a_nvrtc_artifact_release(ptx);
  CK(t4a_runtime_close(rt));
  CK(t4a_runtime_open(0, &o, &rt));
  in[0] = k;
  in[1] = lib;
  r.num_inputs = 2;
  CK(t4a_runtime_link(rt, &r, &linked, &oc));
  assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_artifact_release(linked);
  t4a_nvrtc_outcome_deinit(&oc);
  t4a_nvrtc_artifact_release(k);
  t4a_nvrtc_artifact_release(lib);
  CK(t4a_runtime_close(rt));
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- a new process's kernel from the disk cache: NVRTC is never loaded ---- */

static const char *g_lazy_child_dir; /* set in the exec'd child (main: --lazy-child DIR) */

static int libnvrtc_mapped(void) {
  FILE *maps = fopen("/proc/self/maps", "r");
  assert_non_null(maps);
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, maps) != NULL) found |= strstr(line, "libnvrtc") != NULL;
  fclose(maps);
  return found;
}

/* The child: a fresh process whose runtime finds the kernel on disk. Its compile calls NVRTC 0
 * times, libnvrtc is not in its address space, and the kernel runs. */
static void lazy_child(void **state) {
  fixture *f = *state;
  t4a_runtime_options o = small_options(f);
  o.artifacts.disk_dir = g_lazy_child_dir;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  t4a_function *fn = NULL;
  CK(t4a_runtime_kernel(rt, k_scale_src, "scale", &fn));
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_disk_hits, 1);
  assert_int_equal(cs.counters.nvrtc_compile_attempts, 0);
  assert_int_equal(libnvrtc_mapped(), 0);
  round_trip(rt, fn, 2.5f);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
  assert_int_equal(libnvrtc_mapped(), 0);
}

static void test_disk_hit_in_a_new_process_loads_no_nvrtc(void **state) {
  fixture *f = *state;
  if (!nvrtc_available()) {
    fprintf(stderr, "# NVRTC is not available: skipped\n");
    skip();
  }
  char dir[] = "/tmp/t4a-facade-lazy-XXXXXX";
  assert_non_null(mkdtemp(dir));
  /* This process compiles (NVRTC loaded at that first miss) and writes the disk entry. */
  t4a_runtime_options o = small_options(f);
  o.artifacts.disk_dir = dir;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  t4a_function *fn = NULL;
  CK(t4a_runtime_kernel(rt, k_scale_src, "scale", &fn));
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_compile_attempts, 1);
  assert_int_equal(cs.counters.nvrtc_disk_writes, 1);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
  /* A new process (a fresh exec of this test) finds it. */
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl(g_self, "t4a_facade_test", "--lazy-child", dir, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The toolkit's include roots come by default: a half-precision kernel compiles through the
 * cache and hits; options.no_toolkit_roots turns them off (the include names nothing then). */
static void test_toolkit_roots_by_default(void **state) {
  fixture *f = *state;
  t4a_nvrtc_toolkit tk;
  if (!nvrtc_available() || t4a_nvrtc_toolkit_find(NULL, &tk) != T4A_OK) {
    fprintf(stderr, "# NVRTC or the CUDA toolkit is not available: skipped\n");
    skip();
  }
  static const char fp16[] =
      "#include <cuda_fp16.h>\n"
      "extern \"C\" __global__ void h(__half *x) { x[threadIdx.x] = __float2half(1.0f); }\n";
  t4a_runtime *rt = open_rt(f);
  t4a_nvrtc_artifact *a = NULL;
  CK(t4a_runtime_compile(rt, fp16, "h.cu", &a));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.source = fp16;
  rq.program_name = "h.cu";
  rq.output = T4A_NVRTC_OUTPUT_CUBIN;
  CK(t4a_runtime_compile_request(rt, &rq, &a, &oc));
  assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&oc);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_compile_attempts, 1);
  CK(t4a_runtime_close(rt));

  t4a_runtime_options o = small_options(f);
  o.no_toolkit_roots = 1;
  CK(t4a_runtime_open(0, &o, &rt));
  a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_compile(rt, fp16, "h.cu", &a), T4A_INVALID_ARGUMENT);
  assert_null(a);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "cuda_fp16.h"));
  CK(t4a_runtime_close(rt));
}

/* What the cache's key cannot see (a paste that could make __has_include) compiles uncached by
 * default, every time; options.refuse_uncacheable makes it the cache's INVALID_ARGUMENT. */
static void test_uncacheable_kernels_compile_uncached(void **state) {
  fixture *f = *state;
  if (!nvrtc_available()) skip();
  static const char src[] =
      "#define CAT(a, b) a ## b\n"
      "#if CAT(__has_, include)(\"none.h\")\n#endif\n"
      "extern \"C\" __global__ void z(int *x) { x[threadIdx.x] = 5; }\n";
  t4a_runtime *rt = open_rt(f);
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.source = src;
  rq.program_name = "z.cu";
  rq.output = T4A_NVRTC_OUTPUT_CUBIN;
  for (int i = 0; i < 2; i++) {
    t4a_nvrtc_artifact *a = NULL;
    t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
    CK(t4a_runtime_compile_request(rt, &rq, &a, &oc));
    assert_int_equal(oc.origin, T4A_NVRTC_ORIGIN_UNCACHED);
    assert_non_null(strstr(oc.uncached_why, "__has_include"));
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_outcome_deinit(&oc);
  }
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_compile_attempts, 2);
  assert_int_equal(cs.counters.nvrtc_uncached, 2);
  assert_int_equal(cs.memory_entries, 0);
  CK(t4a_runtime_close(rt));

  t4a_runtime_options o = small_options(f);
  o.refuse_uncacheable = 1;
  CK(t4a_runtime_open(0, &o, &rt));
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_runtime_compile(rt, src, "z.cu", &a), T4A_INVALID_ARGUMENT);
  assert_null(a);
  t4a_nvrtc_cache_stats(t4a_runtime_artifact_cache(rt), &cs);
  assert_int_equal(cs.counters.nvrtc_compile_attempts, 0);
  CK(t4a_runtime_close(rt));
}

/* compile_ptx: the artifact is PTX, the fake reads its .entry, the result is the same. A borrowed
 * artifact cache is the runtime's cache and is not destroyed by close. */
static void test_compile_ptx_through_a_borrowed_cache(void **state) {
  fixture *f = *state;
  if (!nvrtc_available()) skip();
  t4a_nvrtc_lib *lib = NULL;
  t4a_nvrtc_cache *cache = NULL;
  CK(t4a_nvrtc_lib_open(NULL, &lib));
  CK(t4a_nvrtc_cache_create(lib, NULL, &cache));
  t4a_runtime_options o = small_options(f);
  o.artifact_cache = cache;
  o.compile_ptx = 1;
  t4a_runtime *r1 = NULL, *r2 = NULL;
  CK(t4a_runtime_open(0, &o, &r1));
  CK(t4a_runtime_open(1, &o, &r2));
  assert_ptr_equal(t4a_runtime_artifact_cache(r1), cache);
  t4a_function *f1 = NULL, *f2 = NULL;
  CK(t4a_runtime_kernel(r1, k_scale_src, "scale", &f1));
  CK(t4a_runtime_kernel(r2, k_scale_src, "scale", &f2)); /* one compile for both devices */
  round_trip(r1, f1, 3.0f);
  round_trip(r2, f2, -1.0f);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(cache, &cs);
  t4a_counter_values cv = cs.counters;
  assert_int_equal(cv.nvrtc_compile_attempts, 1);
  t4a_nvrtc_artifact *a = NULL;
  CK(t4a_runtime_compile(r1, k_scale_src, NULL, &a));
  assert_int_equal(t4a_nvrtc_artifact_output(a), T4A_NVRTC_OUTPUT_PTX);
  t4a_nvrtc_artifact_release(a);
  t4a_function_release(f1);
  t4a_function_release(f2);
  CK(t4a_runtime_close(r1));
  CK(t4a_runtime_close(r2));
  CK(t4a_nvrtc_cache_compile(cache, &(t4a_nvrtc_request){.source = k_scale_src,
                                                          .target = "sm_90"},
                             &a, NULL)); /* still alive after both closes */
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(cache);
  t4a_nvrtc_lib_release(lib);
}

/* Without NVRTC the runtime opens and runs loaded images; only a compile says NVRTC_NOT_FOUND,
 * each time it is asked. */
static void test_nvrtc_missing_only_at_compile(void **state) {
  fixture *f = *state;
  t4a_runtime_options o = small_options(f);
  o.nvrtc.library_path = "/nonexistent/libnvrtc.so.13";
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  t4a_module *m = NULL;
  CK(t4a_runtime_load_image(rt, k_scale_ptx, sizeof k_scale_ptx, &m));
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, "scale", &fn));
  round_trip(rt, fn, 2.0f);
  for (int i = 0; i < 2; i++) {
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    assert_int_equal(t4a_runtime_compile(rt, k_scale_src, NULL, &a), T4A_NVRTC_NOT_FOUND);
    assert_null(a);
    t4a_error e;
    t4a_error_last(&e);
    assert_non_null(strstr(e.message, "/nonexistent/libnvrtc.so.13"));
    t4a_function *k = (t4a_function *)1;
    assert_int_equal(t4a_runtime_kernel(rt, k_scale_src, "scale", &k), T4A_NVRTC_NOT_FOUND);
    assert_null(k);
  }
  assert_null(t4a_runtime_artifact_cache(rt));
  char json[32768];
  CK(t4a_runtime_stats_json(rt, json, sizeof json, NULL));
  assert_non_null(strstr(json, "\"artifact_cache\": null"));
  t4a_function_release(fn);
  t4a_module_release(m);
  CK(t4a_runtime_close(rt));
}

/* ---- the stats JSON ---- */

/* A validating JSON parser (RFC 8259 grammar, no semantics): objects, arrays, strings with
 * escapes, numbers, true/false/null. */
typedef struct jp {
  const char *s;
  size_t i, n;
} jp;

static void jws(jp *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                         p->s[p->i] == '\r')) {
    p->i++;
  }
}
static int jchar(jp *p, char c) {
  jws(p);
  if (p->i < p->n && p->s[p->i] == c) {
    p->i++;
    return 1;
  }
  return 0;
}
static int jstring(jp *p) {
  if (!jchar(p, '"')) return 0;
  while (p->i < p->n) {
    unsigned char c = (unsigned char)p->s[p->i++];
    if (c == '"') return 1;
    if (c < 0x20) return 0;
    if (c == '\\') {
      if (p->i >= p->n) return 0;
      char e = p->s[p->i++];
      if (e == 'u') {
        for (int k = 0; k < 4; k++) {
          if (p->i >= p->n || strchr("0123456789abcdefABCDEF", p->s[p->i]) == NULL) return 0;
          p->i++;
        }
      } else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
        return 0;
      }
    }
  }
  return 0;
}
static int jdigits(jp *p) {
  size_t start = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  return p->i > start;
}
static int jnumber(jp *p) {
  if (p->i < p->n && p->s[p->i] == '-') p->i++;
  if (p->i < p->n && p->s[p->i] == '0') {
    p->i++;
  } else if (!jdigits(p)) {
    return 0;
  }
  if (p->i < p->n && p->s[p->i] == '.') {
    p->i++;
    if (!jdigits(p)) return 0;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (!jdigits(p)) return 0;
  }
  return 1;
}
static int jvalue(jp *p, int depth);
static int jmembers(jp *p, int depth, char close, int object) {
  if (jchar(p, close)) return 1;
  for (;;) {
    if (object && (!jstring(p) || !jchar(p, ':'))) return 0;
    if (!jvalue(p, depth + 1)) return 0;
    if (jchar(p, close)) return 1;
    if (!jchar(p, ',')) return 0;
    jws(p);
  }
}
static int jvalue(jp *p, int depth) {
  if (depth > 32) return 0;
  jws(p);
  if (p->i >= p->n) return 0;
  char c = p->s[p->i];
  if (c == '{') return p->i++, jmembers(p, depth, '}', 1);
  if (c == '[') return p->i++, jmembers(p, depth, ']', 0);
  if (c == '"') return jstring(p);
  static const char *const words[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t len = strlen(words[k]);
    if (p->n - p->i >= len && strncmp(p->s + p->i, words[k], len) == 0) {
      p->i += len;
      return 1;
    }
  }
  return jnumber(p);
}
static int json_valid(const char *s, size_t n) {
  jp p = {s, 0, n};
  if (!jvalue(&p, 0)) return 0;
  jws(&p);
  return p.i == n;
}

/* The text of the object that follows `"key": ` (braces balance: no string holds one). */
static size_t object_of(const char *json, const char *key, const char **out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": {", key);
  const char *at = strstr(json, pat);
  if (at == NULL) return 0;
  at += strlen(pat) - 1;
  int depth = 0;
  for (const char *p = at; *p != '\0'; p++) {
    depth += *p == '{';
    depth -= *p == '}';
    if (depth == 0) {
      *out = at;
      return (size_t)(p - at + 1);
    }
  }
  return 0;
}

/* Every counter whose name starts with `prefix` is a key of the object, with a number. */
static void expect_counters(const char *obj, size_t len, const char *prefix) {
  char *copy = malloc(len + 1);
  memcpy(copy, obj, len);
  copy[len] = '\0';
  int found = 0;
  for (int i = 0; i < T4A_COUNTER_COUNT; i++) {
    const char *name = t4a_counter_name((t4a_counter_id)i);
    if (strncmp(name, prefix, strlen(prefix)) != 0) continue;
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", name);
    const char *at = strstr(copy, pat);
    if (at == NULL) fail_msg("counter %s missing from %.60s...", name, copy);
    char next = at[strlen(pat)];
    if (next < '0' || next > '9') fail_msg("counter %s is not a number", name);
    found++;
  }
  assert_true(found > 0);
  free(copy);
}

static void test_stats_json(void **state) {
  fixture *f = *state;
  int nvrtc = nvrtc_available();
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = NULL;
  if (nvrtc) {
    CK(t4a_runtime_kernel(rt, k_scale_src, "scale", &fn));
  } else {
    t4a_module *m = NULL;
    CK(t4a_runtime_load_image(rt, k_scale_ptx, sizeof k_scale_ptx, &m));
    CK(t4a_runtime_function(rt, m, "scale", &fn));
    t4a_module_release(m);
  }
  round_trip(rt, fn, 2.0f);
  /* Ask for the size, then give one byte less: LIMIT_EXCEEDED with the size, in the detail too. */
  size_t need = 0;
  assert_int_equal(t4a_runtime_stats_json(rt, NULL, 0, &need), T4A_LIMIT_EXCEEDED);
  assert_true(need > 1000);
  char *buf = malloc(need + 256);
  size_t got = 0;
  assert_int_equal(t4a_runtime_stats_json(rt, buf, need - 1, &got), T4A_LIMIT_EXCEEDED);
  assert_int_equal(got, need);
  assert_string_equal(buf, ""); /* nothing usable is left in a short buffer */
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_LIMIT_EXCEEDED);
  assert_int_equal(e.bytes, need);
  assert_int_equal(t4a_runtime_stats_json(rt, buf, 16, NULL), T4A_LIMIT_EXCEEDED);
  assert_int_equal(t4a_runtime_stats_json(rt, NULL, 16, &got), T4A_INVALID_ARGUMENT);
  CK(t4a_runtime_stats_json(rt, buf, need, &got));
  assert_int_equal(got, need - 1);
  assert_int_equal(strlen(buf), got);
  if (!json_valid(buf, got)) fail_msg("not JSON:\n%s", buf);
  const char *obj = NULL;
  size_t len = object_of(buf, "lane", &obj);
  assert_true(len > 0);
  expect_counters(obj, len, "");
  assert_non_null(strstr(buf, "\"launches\": 1,")); /* the round trip's launch */
  len = object_of(buf, "counters", &obj); /* the driver's */
  assert_true(len > 0);
  expect_counters(obj, len, "");
  assert_true(object_of(buf, "module_cache", &obj) > 0);
  assert_non_null(strstr(obj, "\"loads\": 1,"));
  assert_true(object_of(buf, "xfer", &obj) > 0);
  assert_non_null(strstr(obj, "\"chunk_bytes\": 4096,"));
  assert_true(object_of(buf, "retire", &obj) > 0);
  assert_non_null(strstr(buf, "\"origin\": \"fake\""));
  assert_non_null(strstr(buf, "\"target\": \"sm_90\""));
  assert_non_null(strstr(buf, "\"heap_allocations\": "));
  if (nvrtc) {
    len = object_of(buf, "artifact_cache", &obj);
    assert_true(len > 0);
    expect_counters(obj, len, "nvrtc_");
    assert_non_null(strstr(obj, "\"nvrtc_compile_attempts\": 1,"));
    assert_non_null(strstr(obj, "\"memory_entries\": 1,"));
  } else {
    assert_non_null(strstr(buf, "\"artifact_cache\": null"));
  }
  /* The checker itself refuses broken text. */
  static const char *const bad[] = {"{\"a\": 1,}", "{\"a\": [1, 2}", "{\"a\": 01}",
                                     "{\"a\" 1}", "{\"a\": \"x\\q\"}", "{} {}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_false(json_valid(bad[i], strlen(bad[i])));
  }
  static const char good[] = "{\"a\": [1, -2.5e3, \"x\\u00e9\", null, true], \"b\": {}}";
  assert_true(json_valid(good, strlen(good)));
  free(buf);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
}

/* ---- failure sweeps ---- */

typedef struct sweep_ctx {
  fixture *f;
  t4a_runtime_options options;
  int use;                  /* 0: open and close; 1: open, a whole use, close */
  t4a_nvrtc_cache *cache;   /* a warm artifact cache for the use (NULL: PTX text instead) */
  uint64_t lane_leaked;     /* leaked + buffers_leaked of the lanes of closed runtimes */
  uint64_t lane_pools_leaked;
} sweep_ctx;

static t4a_status use(sweep_ctx *c, t4a_runtime *rt) {
  enum { M = 300 };
  float x[M], back[M], a = 3.0f;
  int n = M;
  fill(x, M);
  t4a_buffer *b = NULL, *d = NULL;
  t4a_nvrtc_artifact *art = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  uint32_t id = 0;
  char json[32768];
  t4a_status st = t4a_runtime_buffer(rt, sizeof x, &b);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof x, &d);
  if (st == T4A_OK) st = t4a_runtime_upload(rt, b, 0, x, sizeof x);
  if (st == T4A_OK && c->cache != NULL) st = t4a_runtime_compile(rt, k_scale_src, NULL, &art);
  if (st == T4A_OK && art != NULL) st = t4a_runtime_load(rt, art, &m);
  if (st == T4A_OK && art == NULL) {
    st = t4a_runtime_load_image(rt, k_scale_ptx, sizeof k_scale_ptx, &m);
  }
  if (st == T4A_OK) st = t4a_runtime_function(rt, m, "scale", &fn);
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  if (st == T4A_OK) st = t4a_runtime_launch(rt, fn, 2, 256, args, 3);
  t4a_launch_config cfg = {{2, 1, 1}, {256, 1, 1}, 0};
  if (st == T4A_OK) st = t4a_descriptor_register(t4a_runtime_table(rt), fn, &cfg, args, 3, &id);
  if (st == T4A_OK) st = t4a_descriptor_fire(t4a_runtime_table(rt), id);
  if (id != 0) {
    t4a_status un = t4a_descriptor_unregister(t4a_runtime_table(rt), id);
    if (st == T4A_OK) st = un;
  }
  if (st == T4A_OK) st = t4a_runtime_copy(rt, d, 0, b, 0, sizeof x);
  if (st == T4A_OK) st = t4a_runtime_download(rt, d, 0, back, sizeof back);
  if (st == T4A_OK) {
    for (int i = 0; i < M; i++) {
      if (back[i] != x[i] * 9.0f) st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong");
    }
  }
  if (st == T4A_OK) st = t4a_runtime_sync(rt);
  if (st == T4A_OK) st = t4a_runtime_stats_json(rt, json, sizeof json, NULL);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(art);
  t4a_buffer_release(b);
  t4a_buffer_release(d);
  return st;
}

static t4a_status run_once(sweep_ctx *c) {
  t4a_runtime *rt = (t4a_runtime *)1;
  t4a_status st = t4a_runtime_open(0, &c->options, &rt);
  if (st != T4A_OK) {
    if (rt != NULL) return t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "out not cleared");
    return st;
  }
  /* Keep the lane to read its leak counts after close (then release it: the stream goes). */
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  if (c->use) st = use(c, rt);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_status closed = t4a_runtime_close(rt);
  if (st == T4A_OK) {
    st = closed;
  } else {
    t4a_error_restore(&saved);
  }
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  c->lane_leaked += v.leaked + v.buffers_leaked;
  c->lane_pools_leaked += v.pools_leaked;
  t4a_lane_release(lane);
  return st;
}

/* The sweeps' steps: open and close leak nothing on the host (LeakSanitizer checks it); a use
 * that failed after enqueueing leaks its quarantined buffers (and what they hold) on purpose. */
__attribute__((noinline)) static t4a_status op_open_close(void *user) {
  t4a_status st = run_once(user);
  __asm__ volatile("" ::: "memory");
  return st;
}
__attribute__((noinline)) static t4a_status op_use(void *user) {
  t4a_status st = run_once(user);
  __asm__ volatile("" ::: "memory");
  return st;
}

/* Open and close: everything the fake holds is exactly what t4a counted as leaked — device and
 * pinned memory, events, modules, streams, pools and primary-context retains. */
static long unaccounted_strict(void *user) {
  sweep_ctx *c = user;
  t4a_counter_values drv;
  t4a_driver_stats(c->f->drv, &drv);
  long counted = (long)(drv.streams_leaked + drv.ctx_release_failures + c->lane_leaked +
                        c->lane_pools_leaked);
  return t4a_fixture_unaccounted(c->f, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_REGISTRATIONS |
                                           T4A_FIXTURE_LIVE_EVENTS | T4A_FIXTURE_LIVE_MODULES |
                                           T4A_FIXTURE_LIVE_STREAMS | T4A_FIXTURE_LIVE_POOLS |
                                           T4A_FIXTURE_LIVE_PRIMARY_REFS) -
         counted;
}

/* A whole use: a buffer quarantined by a launch that may have run keeps its pool, lane and
 * context alive, so streams, pools and retains are left out (t4a_ctx's and t4a_mem's own sweeps
 * count those); memory, events and modules must match what t4a counted. */
static long unaccounted_use(void *user) {
  sweep_ctx *c = user;
  return t4a_fixture_unaccounted(c->f, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_REGISTRATIONS |
                                           T4A_FIXTURE_LIVE_EVENTS | T4A_FIXTURE_LIVE_MODULES) -
         (long)c->lane_leaked;
}

/* `second`: another code to fail every call with (a use probes kernel parameters until
 * CUDA_ERROR_INVALID_VALUE, which there means "no more parameters"). */
static void sweep_all(sweep_ctx *c, const char *name, t4a_sweep_unaccounted unaccounted,
                      CUresult second) {
  t4a_sweep s = {.name = name, .fake = c->f->fake, .op = c->use ? op_use : op_open_close,
                 .unaccounted = unaccounted, .user = c, .max_steps = 3000};
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 20);
  assert_true(t4a_sweep_driver(&s, second, T4A_DRIVER_ERROR) > 20);
  if (c->use) {
    /* Enqueueing calls that fail after their work was queued: the buffers they touch are
     * quarantined (leaked and counted at close), never freed on a guess. */
    static const char *const enqueueing[] = {"cuLaunchKernel", "cuMemcpyDtoDAsync",
                                             "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"};
    s.after_enqueue = 1;
    for (size_t i = 0; i < sizeof enqueueing / sizeof enqueueing[0]; i++) {
      s.entry = enqueueing[i];
      assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
    }
    s.after_enqueue = 0;
    s.entry = NULL;
  }
  const t4a_status oom[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, oom, 1) > 5);
  const t4a_status internal[] = {T4A_INTERNAL, T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, internal, 2) > 2);
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_THREAD_CREATE, internal, 2) > 0);
  assert_int_equal(t4a_fake_ordering_violations(c->f->fake), 0);
}

static void test_open_close_sweep(void **state) {
  fixture *f = *state;
  sweep_ctx c = {.f = f, .options = small_options(f)};
  c.options.xfer.copy_threads = 2; /* one copy thread to start (THREAD_CREATE) */
  sweep_all(&c, "open/close", unaccounted_strict, CUDA_ERROR_INVALID_VALUE);
}

static void test_use_sweep(void **state) {
  fixture *f = *state;
  sweep_ctx c = {.f = f, .options = small_options(f), .use = 1};
  c.options.xfer.copy_threads = 2;
  /* No reuse cache: a pool kept alive by a quarantined buffer would keep its cached blocks
   * alive uncounted; without it the fake's live blocks are the buffers t4a holds. */
  c.options.pool.reuse_disabled = 1;
  t4a_nvrtc_lib *lib = NULL;
  if (nvrtc_available()) {
    /* A warm artifact cache: the sweep's compiles are memory hits (NVRTC runs once, here). */
    CK(t4a_nvrtc_lib_open(NULL, &lib));
    CK(t4a_nvrtc_cache_create(lib, NULL, &c.cache));
    c.options.artifact_cache = c.cache;
    t4a_runtime *rt = NULL;
    CK(t4a_runtime_open(0, &c.options, &rt));
    t4a_nvrtc_artifact *a = NULL;
    CK(t4a_runtime_compile(rt, k_scale_src, NULL, &a));
    t4a_nvrtc_artifact_release(a);
    CK(t4a_runtime_close(rt));
  }
  sweep_all(&c, "use", unaccounted_use, CUDA_ERROR_INVALID_HANDLE);
  t4a_nvrtc_cache_destroy(c.cache);
  t4a_nvrtc_lib_release(lib);
}

/* The LTO path under the sweeps: open, compile the library and the kernel to LTO-IR (memory
 * hits of a warm artifact cache), link (a memory hit of a warm, borrowed link cache), load the
 * CUBIN, look the kernel up, launch it, download, close. Every driver call and host allocation
 * failed in turn; open/close's strict accounting holds (a launch that failed after enqueueing is
 * not possible here: the kernel's buffer is downloaded and released before close). */
static t4a_status use_linked(t4a_runtime *rt) {
  enum { M = 300 };
  float x[M], back[M], a = 2.0f;
  int n = M;
  fill(x, M);
  t4a_nvrtc_artifact *lib = NULL;
  t4a_function *fn = NULL;
  t4a_buffer *b = NULL;
  t4a_status st = t4a_runtime_compile_lto(rt, k_lib_mul_src, "lib_mul.cu", &lib);
  const t4a_nvrtc_artifact *libs[1] = {lib};
  if (st == T4A_OK) st = t4a_runtime_kernel_linked(rt, k_scale_linked_src, libs, 1, "scale", &fn);
  /* The explicit link too (a memory hit of the same link). */
  t4a_nvrtc_artifact *k = NULL, *linked = NULL;
  if (st == T4A_OK) st = t4a_runtime_compile_lto(rt, k_scale_linked_src, NULL, &k);
  const t4a_nvrtc_artifact *in[2] = {k, lib};
  t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
  r.inputs = in;
  r.num_inputs = 2;
  if (st == T4A_OK) st = t4a_runtime_link(rt, &r, &linked, NULL);
  t4a_nvrtc_artifact_release(linked);
  t4a_nvrtc_artifact_release(k);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof x, &b);
  if (st == T4A_OK) st = t4a_runtime_upload(rt, b, 0, x, sizeof x);
  t4a_arg args[3] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  if (st == T4A_OK) st = t4a_runtime_launch(rt, fn, 2, 256, args, 3);
  if (st == T4A_OK) st = t4a_runtime_download(rt, b, 0, back, sizeof back);
  for (int i = 0; st == T4A_OK && i < M; i++) {
    if (back[i] != x[i] * a) st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong");
  }
  t4a_buffer_release(b);
  t4a_function_release(fn);
  t4a_nvrtc_artifact_release(lib);
  return st;
}

__attribute__((noinline)) static t4a_status op_link(void *user) {
  sweep_ctx *c = user;
  t4a_runtime *rt = NULL;
  t4a_status st = t4a_runtime_open(0, &c->options, &rt);
  if (st != T4A_OK) return st;
  t4a_lane *lane = t4a_runtime_lane(rt);
  t4a_lane_retain(lane);
  st = use_linked(rt);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_status closed = t4a_runtime_close(rt);
  if (st == T4A_OK) {
    st = closed;
  } else {
    t4a_error_restore(&saved);
  }
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  c->lane_leaked += v.leaked + v.buffers_leaked;
  c->lane_pools_leaked += v.pools_leaked;
  t4a_lane_release(lane);
  __asm__ volatile("" ::: "memory");
  return st;
}

static void test_link_sweep(void **state) {
  fixture *f = *state;
  if (!nvrtc_available() || !jitlink_available()) {
    fprintf(stderr, "# NVRTC or nvJitLink is not available: skipped\n");
    skip();
  }
  sweep_ctx c = {.f = f, .options = small_options(f), .use = 1};
  c.options.pool.reuse_disabled = 1;
  t4a_nvrtc_lib *lib = NULL;
  t4a_jitlink_lib *jl = NULL;
  t4a_jitlink_cache *links = NULL;
  CK(t4a_nvrtc_lib_open(NULL, &lib));
  CK(t4a_nvrtc_cache_create(lib, NULL, &c.cache));
  CK(t4a_jitlink_lib_open(NULL, &jl));
  CK(t4a_jitlink_cache_create(jl, NULL, &links));
  c.options.artifact_cache = c.cache;
  c.options.link_cache = links;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &c.options, &rt));
  CK(use_linked(rt)); /* warm: NVRTC and nvJitLink run here, once */
  CK(t4a_runtime_close(rt));
  t4a_sweep s = {.name = "link", .fake = f->fake, .op = op_link, .unaccounted = unaccounted_use,
                 .user = &c, .max_steps = 3000};
  int driver = t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR);
  const t4a_status oom[] = {T4A_HOST_OUT_OF_MEMORY};
  int malloc_steps = t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, oom, 1);
  fprintf(stderr, "# link sweep: %d driver failures, %d allocation failures surfaced\n", driver,
          malloc_steps);
  assert_true(driver > 20);
  assert_true(malloc_steps > 5);
  /* The link ran once (the warm-up): every step's link was a memory hit of the borrowed cache,
   * and no step's failure was cached. */
  struct t4a_jitlink_cache_stats ls;
  t4a_jitlink_cache_stats(links, &ls);
  assert_int_equal(ls.counters.jitlink_links, 1);
  assert_int_equal(ls.memory_entries, 1);
  t4a_jitlink_cache_destroy(links);
  t4a_jitlink_lib_release(jl);
  t4a_nvrtc_cache_destroy(c.cache);
  t4a_nvrtc_lib_release(lib);
}

/* The use sweep's quarantined buffers (a launch or copy that failed after it may have been
 * enqueued) are held forever with their pool, lane and context, as t4a must: LeakSanitizer is
 * told about the sweep's frames only, and unaccounted_use checks that what stays alive is exactly
 * what t4a counted. The fixture's fake and driver go with them (the driver's last reference is
 * held by those lanes). */
T4A_FIXTURE_DELIBERATE_LEAKS("op_use", "op_link", "setup_leaky", "test_close_returns_cached_blocks",
                             "test_close_counts_cached_blocks_of_a_lost_lane",
                             "test_release_after_close_with_quarantine")

__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}

/* The sweeps leak on purpose (counted); teardown checks the fake's ordering only. */
static int teardown_counted(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_ORDERING);
}


/* calibrate_launches: open measures once per driver and device (a second runtime reuses the
 * figures: no second calibration), the table follows the result, the stats show both; an
 * explicit strategy wins over the calibration. Descriptor fires through the facade's table give
 * the same results either way. */
static void test_launch_calibration(void **state) {
  fixture *f = *state;
  t4a_runtime_options o = small_options(f);
  t4a_runtime *plain = open_rt(f);
  t4a_launch_calibration c;
  assert_int_equal(t4a_runtime_launch_calibration(plain, &c), 0);
  assert_int_equal(t4a_runtime_launch_calibration(NULL, &c), 0);
  o.calibrate_launches = 1;
  t4a_runtime *a = NULL, *b = NULL;
  /* No graph can be built: the runtime opens all the same, PLAIN, and says why. */
  t4a_fake_inject(f->fake, "cuGraphCreate", 0, 1000, CUDA_ERROR_NOT_SUPPORTED, 0);
  CK(t4a_runtime_open(0, &o, &a));
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_runtime_launch_calibration(a, &c), 0);
  struct t4a_launch_table_stats fs;
  t4a_launch_table_stats(t4a_runtime_table(a), &fs);
  assert_int_equal(fs.strategy, T4A_LAUNCH_STRATEGY_PLAIN);
  char fjson[16384];
  CK(t4a_runtime_stats_json(a, fjson, sizeof fjson, NULL));
  assert_non_null(strstr(fjson, "\"calibration_failed\": \"UNSUPPORTED\""));
  CK(t4a_runtime_close(a));
  a = NULL;
  CK(t4a_runtime_open(0, &o, &a));
  /* The measurement ran on a lane of its own: this runtime's counters saw none of it. */
  t4a_counter_values fresh;
  t4a_runtime_stats(a, &fresh);
  assert_int_equal(fresh.launches, 0);
  assert_int_equal(fresh.module_loads, 0);
  assert_int_equal(t4a_runtime_launch_calibration(a, &c), 1);
  assert_true(c.fires >= 64 && c.plain_ns > 0 && c.graph_ns > 0);
  uint64_t built = t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags");
  assert_true(built >= 9);
  o.launch.strategy = T4A_LAUNCH_STRATEGY_GRAPH; /* explicit */
  o.launch.graph_after = 1;
  CK(t4a_runtime_open(0, &o, &b));
  assert_int_equal(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags"), built); /* reused */
  t4a_launch_calibration c2;
  assert_int_equal(t4a_runtime_launch_calibration(b, &c2), 1);
  assert_memory_equal(&c, &c2, sizeof c);
  struct t4a_launch_table_stats ts;
  t4a_launch_table_stats(t4a_runtime_table(a), &ts);
  assert_int_equal(ts.strategy, c.strategy);
  assert_int_equal(ts.graph_after, c.graph_after);
  t4a_launch_table_stats(t4a_runtime_table(b), &ts);
  assert_int_equal(ts.strategy, T4A_LAUNCH_STRATEGY_GRAPH);
  assert_int_equal(ts.graph_after, 1);
  t4a_launch_table_stats(t4a_runtime_table(plain), &ts);
  assert_int_equal(ts.strategy, T4A_LAUNCH_STRATEGY_PLAIN);
  /* Figures given in options.launch are used (copied) instead of a measurement. */
  {
    t4a_runtime_options go = small_options(f);
    t4a_launch_calibration given = c;
    given.strategy = T4A_LAUNCH_STRATEGY_GRAPH;
    given.graph_after = 7;
    go.launch.calibration = &given;
    t4a_runtime *g = NULL;
    CK(t4a_runtime_open(0, &go, &g));
    assert_int_equal(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags"), built);
    memset(&given, 0, sizeof given); /* copied at open */
    t4a_launch_calibration gc;
    assert_int_equal(t4a_runtime_launch_calibration(g, &gc), 1);
    assert_int_equal(gc.graph_after, 7);
    t4a_launch_table_stats(t4a_runtime_table(g), &ts);
    assert_int_equal(ts.strategy, T4A_LAUNCH_STRATEGY_GRAPH);
    assert_int_equal(ts.graph_after, 7);
    CK(t4a_runtime_close(g));
  }
  /* b's table fires through graphs; the results are the plain path's. */
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  CK(t4a_runtime_load_image(b, k_scale_ptx, sizeof k_scale_ptx, &m));
  CK(t4a_runtime_function(b, m, "scale", &fn));
  t4a_buffer *buf = NULL;
  float x[N], back[N], s = 2.0f;
  int n = N;
  fill(x, N);
  CK(t4a_runtime_buffer(b, sizeof x, &buf));
  CK(t4a_runtime_upload(b, buf, 0, x, sizeof x));
  t4a_arg args[3] = {t4a_arg_buffer(buf, 0), t4a_arg_scalar(&s, 4), t4a_arg_scalar(&n, 4)};
  t4a_launch_config cfg = {{(N + 63) / 64, 1, 1}, {64, 1, 1}, 0};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t4a_runtime_table(b), fn, &cfg, args, 3, &id));
  for (int i = 0; i < 3; i++) CK(t4a_descriptor_fire(t4a_runtime_table(b), id));
  /* Checked launches go through the function's own graph too (the runtime's strategy). */
  t4a_counter_values v0, v1;
  t4a_runtime_stats(b, &v0);
  CK(t4a_runtime_launch(b, fn, (N + 63) / 64, 64, args, 3));
  t4a_runtime_stats(b, &v1);
  assert_int_equal(v1.launch_graph_fires - v0.launch_graph_fires, 1);
  CK(t4a_runtime_download(b, buf, 0, back, sizeof back));
  for (int i = 0; i < N; i++) assert_float_equal(back[i], x[i] * 16.0f, 0);
  t4a_launch_table_stats(t4a_runtime_table(b), &ts);
  assert_int_equal(ts.graph_fires, 3);
  char json[16384];
  CK(t4a_runtime_stats_json(b, json, sizeof json, NULL));
  assert_non_null(strstr(json, "\"launch_table\": {\n    \"strategy\": \"graph\""));
  assert_non_null(strstr(json, "\"graph_fires\": 3"));
  assert_non_null(strstr(json, "\"calibration\": {"));
  CK(t4a_runtime_stats_json(plain, json, sizeof json, NULL));
  assert_non_null(strstr(json, "\"calibration\": null"));
  t4a_buffer_release(buf);
  t4a_function_release(fn);
  t4a_module_release(m);
  CK(t4a_runtime_close(b));
  CK(t4a_runtime_close(a));
  CK(t4a_runtime_close(plain));
}

/* ---- two runtimes on one ordinal ---- */

/* The CUmemoryPools the driver made and the pool each pool allocation came from, recorded by
 * wrapping the fake's entries (the fixture's wrap_table). */
enum { MAX_RECORDED = 256 };
static struct {
  PFN_cuMemPoolCreate_v11020 create;
  PFN_cuMemAllocFromPoolAsync_v11020 alloc;
  CUmemoryPool pools[MAX_RECORDED];
  size_t num_pools;
  CUmemoryPool alloc_pool[MAX_RECORDED];
  size_t num_allocs;
} g_rec;

static CUresult rec_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props) {
  CUresult r = g_rec.create(pool, props);
  if (r == CUDA_SUCCESS && g_rec.num_pools < MAX_RECORDED) g_rec.pools[g_rec.num_pools++] = *pool;
  return r;
}

static CUresult rec_alloc(CUdeviceptr *ptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  CUresult r = g_rec.alloc(ptr, bytes, pool, s);
  if (r == CUDA_SUCCESS && g_rec.num_allocs < MAX_RECORDED) {
    g_rec.alloc_pool[g_rec.num_allocs++] = pool;
  }
  return r;
}

static void record_pools(t4a_driver_table *t) {
  memset(&g_rec, 0, sizeof g_rec);
  g_rec.create = t->cuMemPoolCreate;
  g_rec.alloc = t->cuMemAllocFromPoolAsync;
  t->cuMemPoolCreate = rec_pool_create;
  t->cuMemAllocFromPoolAsync = rec_alloc;
}

static int setup_recording(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 1;
  o.stacks = 0;
  o.wrap_table = record_pools;
  o.wrapped_name = "recording pools";
  return t4a_fixture_setup(state, &o);
}

/* A buffer of `bytes` from rt; *pool: the CUmemoryPool of the driver allocation it took, or NULL
 * when the runtime's reuse cache served it (no driver allocation). */
static t4a_buffer *buffer_from(t4a_runtime *rt, size_t bytes, CUmemoryPool *pool) {
  size_t before = g_rec.num_allocs;
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, bytes, &b));
  assert_true(g_rec.num_allocs <= before + 1);
  *pool = g_rec.num_allocs > before ? g_rec.alloc_pool[before] : NULL;
  return b;
}

/* Two runtimes on one ordinal: each has its own t4a pool over its own CUmemoryPool, allocates
 * from it, and counts its own pool figures (t4a_mem_pool_stats) and reuse counters
 * (t4a_runtime_stats): a block one runtime released is never handed to the other. */
static void test_two_runtimes_on_one_ordinal_own_their_pools(void **state) {
  fixture *f = *state;
  size_t pools0 = g_rec.num_pools;
  t4a_runtime *a = open_rt(f);
  assert_int_equal(g_rec.num_pools, pools0 + 1);
  t4a_runtime *b = open_rt(f);
  assert_int_equal(g_rec.num_pools, pools0 + 2);
  CUmemoryPool pool_a = g_rec.pools[pools0], pool_b = g_rec.pools[pools0 + 1];
  assert_int_equal(t4a_runtime_ordinal(a), t4a_runtime_ordinal(b));
  assert_ptr_not_equal(t4a_runtime_lane(a), t4a_runtime_lane(b));
  assert_ptr_not_equal(t4a_runtime_pool(a), t4a_runtime_pool(b));
  assert_true(pool_a != NULL && pool_b != NULL && pool_a != pool_b);
  t4a_fake_live l;
  t4a_fake_live_objects(f->fake, &l);
  assert_int_equal(l.pools, 2);

  t4a_counter_values va0, vb0, va, vb;
  t4a_runtime_stats(a, &va0);
  t4a_runtime_stats(b, &vb0);
  CUmemoryPool got = NULL;
  t4a_buffer *xa = buffer_from(a, 8192, &got);
  assert_true(got == pool_a);
  t4a_buffer *xb = buffer_from(b, 8192, &got);
  assert_true(got == pool_b);

  /* A's released block waits in A's cache, and A's figures alone say so. */
  t4a_buffer_release(xa);
  struct t4a_mem_pool_stats sa, sb;
  t4a_mem_pool_stats(t4a_runtime_pool(a), &sa);
  t4a_mem_pool_stats(t4a_runtime_pool(b), &sb);
  assert_int_equal(sa.cached_blocks, 1);
  assert_true(sa.cached_bytes >= 8192);
  assert_int_equal(sb.cached_blocks, 0);
  assert_int_equal(sb.cached_bytes, 0);
  t4a_runtime_stats(a, &va);
  t4a_runtime_stats(b, &vb);
  assert_int_equal(va.reuse_cached - va0.reuse_cached, 1);
  assert_int_equal(vb.reuse_cached - vb0.reuse_cached, 0);

  /* B asks for the same size: a new block from B's own CUmemoryPool, not A's cached one. */
  t4a_buffer *yb = buffer_from(b, 8192, &got);
  assert_true(got == pool_b);
  t4a_mem_pool_stats(t4a_runtime_pool(a), &sa);
  assert_int_equal(sa.cached_blocks, 1);
  t4a_runtime_stats(b, &vb);
  assert_int_equal(vb.reuse_hits - vb0.reuse_hits, 0);
  assert_int_equal(vb.reuse_misses - vb0.reuse_misses, 2);
  assert_int_equal(vb.device_allocs - vb0.device_allocs, 2);
  /* A asks for it: its own cached block, no driver allocation. */
  t4a_buffer *ya = buffer_from(a, 8192, &got);
  assert_null(got);
  t4a_mem_pool_stats(t4a_runtime_pool(a), &sa);
  assert_int_equal(sa.cached_blocks, 0);
  t4a_runtime_stats(a, &va);
  assert_int_equal(va.reuse_hits - va0.reuse_hits, 1);
  assert_int_equal(va.device_allocs - va0.device_allocs, 1);

  t4a_buffer_release(ya);
  t4a_buffer_release(xb);
  t4a_buffer_release(yb);
  t4a_mem_pool_stats(t4a_runtime_pool(a), &sa);
  t4a_mem_pool_stats(t4a_runtime_pool(b), &sb);
  assert_int_equal(sa.cached_blocks, 1);
  assert_int_equal(sb.cached_blocks, 2);
  CK(t4a_runtime_close(b));
  CK(t4a_runtime_close(a));
  t4a_fake_live_objects(f->fake, &l);
  assert_int_equal(l.pools, 0);
}

int main(int argc, char **argv) {
  /* The path this test was started by: under valgrind /proc/self/exe is valgrind's tool. */
  if (strchr(argv[0], '/') != NULL) g_self = argv[0];
  if (argc == 3 && strcmp(argv[1], "--lazy-child") == 0) {
    g_lazy_child_dir = argv[2];
    const struct CMUnitTest child[] = {cmocka_unit_test_setup_teardown(lazy_child, setup, teardown)};
    return cmocka_run_group_tests(child, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_open_accessors_close, setup, teardown),
      cmocka_unit_test_setup_teardown(test_defaults_and_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_toolkit_roots_by_default, setup, teardown),
      cmocka_unit_test_setup_teardown(test_uncacheable_kernels_compile_uncached, setup, teardown),
      cmocka_unit_test_setup_teardown(test_objects_outlive_close, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_returns_cached_blocks, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_close_counts_cached_blocks_of_a_lost_lane, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_release_after_close_then_fault, setup, teardown_counted),
      cmocka_unit_test_setup_teardown(test_release_after_close_with_quarantine, setup_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_function_of_another_runtime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_global_of_another_runtime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_order_across_runtimes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_from_inside_is_reentry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_compile_load_launch_download, setup, teardown),
      cmocka_unit_test_setup_teardown(test_compile_ptx_through_a_borrowed_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_link_load_launch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nvrtc_missing_only_at_compile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_disk_hit_in_a_new_process_loads_no_nvrtc, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stats_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_launch_calibration, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_runtimes_on_one_ordinal_own_their_pools,
                                      setup_recording, teardown),
      cmocka_unit_test_setup_teardown(test_open_close_sweep, setup, teardown_counted),
      cmocka_unit_test_setup_teardown(test_use_sweep, setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_link_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
