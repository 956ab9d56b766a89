/* Launches on the fake driver: results in stream order, foreign functions and buffers, argument
 * and config checks before anything is enqueued, the dynamic shared memory attribute raised once,
 * launches the driver refuses (with and without their work enqueued), the warm chain (no heap
 * allocation, one event per 512 launches), descriptors (fire, rebind, rebind-fire, unregister,
 * ids, capacity), raw-bytes launches of struct and 16-byte-aligned parameters, L2 persistence,
 * failure sweeps. */
#include <math.h>

#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_testutil.h"
#include "testing/sweep/sweep.h"

static int setup(void **state) { return fixture_setup(state, T4A_FAKE_QUERY_NEVER, 0); }
static int setup_progressing(void **state) {
  return fixture_setup(state, T4A_FAKE_QUERY_PROGRESSES, 0);
}
/* A ring of 4 sealed epochs: every 2,048 launches the admission retires the completed ones. */
static int setup_small_ring(void **state) {
  t4a_retire_options ro = T4A_RETIRE_OPTIONS_INIT;
  ro.max_sealed_epochs = 4;
  return fixture_setup_with(state, T4A_FAKE_QUERY_PROGRESSES, 0, &ro);
}
static int teardown(void **state) { return fixture_teardown(state, 1); }
static int teardown_counted(void **state) { return fixture_teardown(state, 0); }

/* Tests that leak on purpose (quarantined buffers are held forever; sweeps that cannot prove a
 * drain) keep what t4a counted; LeakSanitizer is told about these frames only. */
__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep",
                             "test_failure_after_enqueue_quarantines_the_buffers")

/* add's four arguments: a, b, out and n. */
typedef struct add_args {
  t4a_buffer *a, *b, *out;
  int n;
  t4a_arg args[4];
} add_args;

static void add_prepare(fixture *f, add_args *x, int n) {
  x->n = n;
  x->a = make_buffer(f, (size_t)n * 4);
  x->b = make_buffer(f, (size_t)n * 4);
  x->out = make_buffer(f, (size_t)n * 4);
  int *pa = view(f, x->a), *pb = view(f, x->b), *pc = view(f, x->out);
  for (int i = 0; i < n; i++) {
    pa[i] = i;
    pb[i] = 1000 * i;
    pc[i] = -1;
  }
  x->args[0] = t4a_arg_buffer(x->a, 0);
  x->args[1] = t4a_arg_buffer(x->b, 0);
  x->args[2] = t4a_arg_buffer(x->out, 0);
  x->args[3] = t4a_arg_scalar(&x->n, sizeof x->n);
}

static void add_release(add_args *x) {
  t4a_buffer_release(x->a);
  t4a_buffer_release(x->b);
  t4a_buffer_release(x->out);
}

static int add_done(fixture *f, t4a_buffer *out, int n) {
  int *pc = view(f, out);
  for (int i = 0; i < n; i++) {
    if (pc[i] != 1001 * i) return 0;
  }
  return 1;
}

/* ---- checked launches ---- */

static void test_add_runs_in_stream_order(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 256);
  t4a_launch_config cfg = config_1d(2, 128, 0);
  CK(t4a_launch(f->retire, fn, &cfg, x.args, 4));
  /* Queued, not run: the host sees the old bytes. */
  assert_int_equal(((int *)view(f, x.out))[5], -1);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.launches, 1);
  assert_int_equal(v.admissions, 1);
  assert_int_equal(calls(f, "cuLaunchKernel"), 1);
  /* The caller may drop everything at once: the epoch keeps module and buffers. */
  t4a_buffer_release(x.a);
  t4a_buffer_release(x.b);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, x.out, 256));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  t4a_buffer_release(x.out);
}

static void test_foreign_function_and_buffer(void **state) {
  fixture *f = *state;
  t4a_lane *lane2 = NULL;
  t4a_mem_pool *pool2 = NULL;
  t4a_retire *retire2 = NULL;
  t4a_module_cache *cache2 = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &lane2)); /* same device, another domain */
  CK(t4a_mem_pool_create(lane2, NULL, &pool2));
  CK(t4a_retire_create(lane2, NULL, &retire2));
  CK(t4a_module_cache_create(retire2, NULL, &cache2));
  t4a_module *m = load_ptx(f), *m2 = NULL;
  CK(t4a_module_load(cache2, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m2));
  t4a_function *fn = get_fn(m, "add"), *fn2 = get_fn(m2, "add");
  assert_int_not_equal(t4a_function_domain(fn), t4a_function_domain(fn2));
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  assert_int_equal(t4a_launch(f->retire, fn2, &cfg, x.args, 4), T4A_FOREIGN_HANDLE);
  t4a_buffer *foreign = NULL;
  CK(t4a_buffer_create(pool2, 64, 0, 0, &foreign));
  t4a_arg args[4] = {x.args[0], t4a_arg_buffer(foreign, 0), x.args[2], x.args[3]};
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, args, 4), T4A_FOREIGN_HANDLE);
  assert_non_null(strstr(last_error().message, "argument 1"));
  unsigned char raw[28] = {0};
  const uint32_t offs[4] = {0, 8, 16, 24};
  assert_int_equal(t4a_launch_raw(f->retire, fn2, &cfg, raw, sizeof raw, offs, 4),
                   T4A_FOREIGN_HANDLE);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 4}, &t));
  uint32_t id = 0;
  assert_int_equal(t4a_descriptor_register(t, fn2, &cfg, x.args, 4, &id), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_descriptor_register(t, fn, &cfg, args, 4, &id), T4A_FOREIGN_HANDLE);
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id));
  t4a_arg fa = t4a_arg_buffer(foreign, 0);
  assert_int_equal(t4a_descriptor_rebind(t, id, 2, &fa), T4A_FOREIGN_HANDLE);
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  /* The other runtime launches its own function on its own buffers. */
  CK(t4a_launch(retire2, fn2, &cfg,
                (t4a_arg[4]){t4a_arg_buffer(foreign, 0), t4a_arg_buffer(foreign, 0),
                             t4a_arg_buffer(foreign, 0), x.args[3]},
                4));
  CK(t4a_retire_wait(retire2));
  t4a_launch_table_destroy(t);
  t4a_buffer_release(foreign);
  add_release(&x);
  t4a_function_release(fn);
  t4a_function_release(fn2);
  t4a_module_release(m);
  t4a_module_release(m2);
  t4a_module_cache_destroy(cache2);
  CK(t4a_retire_destroy(retire2));
  t4a_mem_pool_release(pool2);
  t4a_lane_release(lane2);
}

static void test_argument_checks_before_enqueue(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, x.args, 3), T4A_ARGUMENT_MISMATCH);
  assert_non_null(strstr(last_error().message, "takes 4 parameters; 3 given"));
  long long wide = 16;
  t4a_arg bad[4] = {x.args[0], x.args[1], x.args[2], t4a_arg_scalar(&wide, sizeof wide)};
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_ARGUMENT_MISMATCH);
  assert_non_null(strstr(last_error().message, "parameter 3: expected 4 bytes, given 8"));
  bad[3] = t4a_arg_scalar(&x.n, 4);
  bad[0] = t4a_arg_scalar(&x.n, 4); /* a 4-byte value where a pointer goes */
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_ARGUMENT_MISMATCH);
  assert_non_null(strstr(last_error().message, "parameter 0: expected 8 bytes, given 4"));
  bad[0] = t4a_arg_scalar(NULL, 8);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_INVALID_ARGUMENT);
  bad[0] = t4a_arg_buffer(x.a, 65); /* past the 64-byte buffer */
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_INVALID_ARGUMENT);
  bad[0] = t4a_arg_buffer(NULL, 0);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_INVALID_ARGUMENT);
  bad[0] = x.args[0];
  bad[0].kind = (t4a_arg_kind)42;
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, bad, 4), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, NULL, 4), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch(NULL, fn, &cfg, x.args, 4), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch(f->retire, NULL, &cfg, x.args, 4), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch(f->retire, fn, NULL, x.args, 4), T4A_INVALID_ARGUMENT);
  /* Nothing reached the driver, nothing was admitted. */
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  assert_int_equal(lane_counters(f).admissions, 0);
  /* A device address and an offset into a buffer are fine. */
  t4a_arg ok[4] = {t4a_arg_devptr(t4a_buffer_devptr(x.a)), t4a_arg_buffer(x.b, 0),
                   t4a_arg_buffer(x.out, 8), t4a_arg_scalar(&x.n, 4)};
  x.n = 14;
  CK(t4a_launch(f->retire, fn, &cfg, ok, 4));
  CK(t4a_retire_wait(f->retire));
  int *pc = view(f, x.out);
  assert_int_equal(pc[0], -1);
  assert_int_equal(pc[2], 0);
  assert_int_equal(pc[15], 1001 * 13);
  add_release(&x);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static void test_config_checks(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  const t4a_launch_config bad[] = {
      {{1, 1, 1}, {2048, 1, 1}, 0},   /* 2048 threads */
      {{1, 1, 1}, {1024, 2, 1}, 0},   /* 2048 threads in two dimensions */
      {{1, 1, 1}, {1, 1, 65}, 0},     /* block z above 64 */
      {{0, 1, 1}, {1, 1, 1}, 0},      /* zero */
      {{1, 1, 1}, {1, 0, 1}, 0},      /* zero */
      {{1, 65536, 1}, {1, 1, 1}, 0},  /* grid y above 65535 */
      {{1, 1, 65536}, {1, 1, 1}, 0},  /* grid z above 65535 */
      {{1, 1, 1}, {1, 1, 1}, 232449}, /* above the opt-in maximum */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(t4a_launch(f->retire, fn, &bad[i], x.args, 4), T4A_INVALID_LAUNCH);
    if (i == 0) assert_non_null(strstr(last_error().message, "block x = 2048"));
  }
  assert_int_equal(calls(f, "cuLaunchKernel"), 0);
  assert_int_equal(calls(f, "cuFuncSetAttribute"), 0);
  /* The limits themselves pass. */
  const t4a_launch_config edge = {{1, 65535, 1}, {1024, 1, 1}, 232448};
  CK(t4a_launch(f->retire, fn, &edge, x.args, 4));
  CK(t4a_retire_wait(f->retire));
  add_release(&x);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static void test_dynamic_shared_raised_once(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "affine");
  t4a_buffer *out = make_buffer(f, 16);
  long long *po = view(f, out);
  affine_s s = {3, 0.5, 7};
  short k = 4;
  t4a_arg args[3] = {t4a_arg_buffer(out, 0), t4a_arg_scalar(&s, sizeof s),
                     t4a_arg_scalar(&k, sizeof k)};
  const uint32_t shared[] = {40000, 49152, 65536, 65536, 50000, 100000, 49152};
  const uint64_t sets[] = {0, 0, 1, 1, 1, 2, 2};
  for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
    t4a_launch_config cfg = config_1d(1, 32, shared[i]);
    CK(t4a_launch(f->retire, fn, &cfg, args, 3));
    assert_int_equal(calls(f, "cuFuncSetAttribute"), sets[i]);
    CK(t4a_retire_wait(f->retire));
    assert_int_equal(po[0], 21);
    assert_int_equal(po[1], shared[i]);
  }
  /* The attribute's refusal is returned before anything is enqueued. */
  t4a_fake_inject(f->fake, "cuFuncSetAttribute", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  t4a_launch_config big = config_1d(1, 32, 200000);
  assert_int_equal(t4a_launch(f->retire, fn, &big, args, 3), T4A_DRIVER_ERROR);
  assert_string_equal(last_error().entry, "cuFuncSetAttribute");
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(calls(f, "cuLaunchKernel"), 7);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_module_release(m);
}

/* ---- launches the driver refuses ---- */

static void test_refused_launch_returns_the_driver_error(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_fake_inject(f->fake, "cuLaunchKernel", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, x.args, 4), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  t4a_error e = last_error();
  assert_string_equal(e.entry, "cuLaunchKernel");
  assert_int_equal(e.code, CUDA_ERROR_INVALID_VALUE);
  assert_string_equal(e.code_name, "CUDA_ERROR_INVALID_VALUE");
  /* Refused while validating: nothing queued, so nothing quarantined or admitted. */
  struct t4a_retire_stats rs;
  t4a_retire_stats(f->retire, &rs);
  assert_int_equal(rs.quarantined_held, 0);
  assert_int_equal(rs.open_admissions, 0);
  t4a_counter_values v = lane_counters(f);
  assert_int_equal(v.launches, 0);
  assert_int_equal(v.admissions, 0);
  /* The next launch works. */
  CK(t4a_launch(f->retire, fn, &cfg, x.args, 4));
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, x.out, 16));
  add_release(&x);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static void test_failure_after_enqueue_quarantines_the_buffers(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_fake_inject(f->fake, "cuLaunchKernel", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t4a_launch(f->retire, fn, &cfg, x.args, 4), T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  assert_string_equal(last_error().entry, "cuLaunchKernel");
  struct t4a_retire_stats rs;
  t4a_retire_stats(f->retire, &rs);
  assert_int_equal(rs.quarantined_held, 3); /* a, b, out: their state is unknown */
  /* The module is kept by the epoch: it outlives every reference until the work ran. */
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  assert_true(add_done(f, x.out, 16)); /* here the kernel was queued, and ran */
  add_release(&x);                     /* quarantined: their blocks are leaked, counted */
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_SUCCESS);
}

/* ---- the warm chain ---- */

/* Warm, a launch, a fire and a rebind-fire allocate nothing on the heap and record at most one
 * event per 512; epochs seal, and (with a ring that fills) retire, inside the measured runs. */
static void warm_chain(fixture *f) {
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 8}, &t));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id));
  /* Warm up: every epoch slot of the retire's ring (64 by default) gets its arrays, and epochs
   * retire once the ring is full. */
  for (int i = 0; i < 40000; i++) CK(t4a_launch(f->retire, fn, &cfg, x.args, 4));
  for (int i = 0; i < 2000; i++) CK(t4a_descriptor_fire(t, id));

  const char *what[3] = {"checked launches", "descriptor fires", "rebind-fires"};
  uint64_t retired = 0;
  for (int phase = 0; phase < 3; phase++) {
    t4a_counter_values v0 = lane_counters(f);
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < 10000; i++) {
      if (phase == 0) {
        CK(t4a_launch(f->retire, fn, &cfg, x.args, 4));
      } else if (phase == 1) {
        CK(t4a_descriptor_fire(t, id));
      } else {
        CK(t4a_descriptor_rebind_fire(t, id, x.args, 4));
      }
    }
    uint64_t heap1 = t4a_heap_allocations();
    t4a_counter_values v1 = lane_counters(f);
    if (heap1 != heap0 || v1.events_recorded - v0.events_recorded > 20) {
      fail_msg("%s: %llu heap allocations, %llu events for 10,000", what[phase],
               (unsigned long long)(heap1 - heap0),
               (unsigned long long)(v1.events_recorded - v0.events_recorded));
    }
    assert_int_equal(v1.launches - v0.launches, 10000);
    assert_int_equal(v1.host_waits - v0.host_waits, 0);
    assert_int_equal(v1.keepalives_held - v0.keepalives_held,
                     4 * (v1.epochs_sealed - v0.epochs_sealed)); /* module + 3 buffers */
    assert_true(v1.epochs_sealed - v0.epochs_sealed >= 19);
    retired += v1.epochs_retired - v0.epochs_retired;
  }
  print_message("warm chain: %llu epochs retired during the measured runs\n",
                (unsigned long long)retired);
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, x.out, 16));
  t4a_launch_table_destroy(t);
  add_release(&x);
  t4a_function_release(fn);
  t4a_module_release(m);
}

static void test_warm_chain_allocates_nothing(void **state) { warm_chain(*state); }
static void test_warm_chain_retiring_epochs(void **state) { warm_chain(*state); }

/* ---- descriptors ---- */

static void test_descriptors(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_buffer *d = make_buffer(f, 64), *e = make_buffer(f, 64);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_launch_table *t = NULL;
  /* Capacity 0 is the default (256); above 65536 is refused. */
  t4a_launch_table_options big_table = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  CK(t4a_launch_table_create(f->retire, &big_table, &t));
  t4a_launch_table_destroy(t);
  t = NULL;
  big_table.capacity = 65537;
  assert_int_equal(t4a_launch_table_create(f->retire, &big_table, &t), T4A_INVALID_ARGUMENT);
  assert_null(t);
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 2}, &t));
  uint32_t id = 0, id2 = 0, id3 = 0;
  /* Checked at registration. */
  assert_int_equal(t4a_descriptor_register(t, fn, &cfg, x.args, 3, &id), T4A_ARGUMENT_MISMATCH);
  t4a_launch_config big = config_1d(1, 2048, 0);
  assert_int_equal(t4a_descriptor_register(t, fn, &big, x.args, 4, &id), T4A_INVALID_LAUNCH);
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id));
  x.n = 3; /* the snapshot holds 16 */
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, x.out, 16));
  /* Rebind the output (checked), fire. */
  t4a_arg ad = t4a_arg_buffer(d, 0);
  CK(t4a_descriptor_rebind(t, id, 2, &ad));
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, d, 16));
  long long wide = 1;
  t4a_arg aw = t4a_arg_scalar(&wide, 8);
  assert_int_equal(t4a_descriptor_rebind(t, id, 3, &aw), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(t4a_descriptor_rebind(t, id, 4, &ad), T4A_INVALID_ARGUMENT);
  /* Rebind all and fire: out = a + a into e, n = 8. */
  int eight = 8;
  t4a_arg all[4] = {t4a_arg_buffer(x.a, 0), t4a_arg_buffer(x.a, 0), t4a_arg_buffer(e, 0),
                    t4a_arg_scalar(&eight, 4)};
  memset(view(f, e), 0, 64);
  CK(t4a_descriptor_rebind_fire(t, id, all, 4));
  CK(t4a_retire_wait(f->retire));
  int *pe = view(f, e);
  assert_int_equal(pe[7], 14);
  assert_int_equal(pe[8], 0);
  /* A refused rebind-fire changes nothing and fires nothing. */
  uint64_t launches = calls(f, "cuLaunchKernel");
  all[3] = aw;
  assert_int_equal(t4a_descriptor_rebind_fire(t, id, all, 4), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(t4a_descriptor_rebind_fire(t, id, all, 3), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(calls(f, "cuLaunchKernel"), launches);
  memset(view(f, e), 0, 64);
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(pe[7], 14);
  assert_int_equal(pe[8], 0);
  /* Capacity, unregister, ids. */
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id2));
  assert_int_equal(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id3), T4A_LIMIT_EXCEEDED);
  CK(t4a_descriptor_unregister(t, id));
  assert_int_equal(t4a_descriptor_fire(t, id), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_descriptor_unregister(t, id), T4A_INVALID_ARGUMENT);
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id3)); /* the slot again */
  assert_int_equal(id3 & 0xffff, id & 0xffff);
  assert_int_not_equal(id3, id);
  assert_int_equal(t4a_descriptor_fire(t, id), T4A_INVALID_ARGUMENT); /* stale */
  assert_int_equal(t4a_descriptor_fire(t, 0), T4A_INVALID_ARGUMENT);
  CK(t4a_descriptor_fire(t, id3));
  CK(t4a_descriptor_fire(t, id2));
  CK(t4a_retire_wait(f->retire));
  t4a_launch_table_destroy(t); /* releases both descriptors' references */
  t4a_buffer_release(d);
  t4a_buffer_release(e);
  add_release(&x);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
}

/* Unregistered (and the caller's references dropped) while its fire is queued: the fire's
 * epoch keeps the module and the buffers until the kernel ran. */
static void test_unregister_while_queued(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *fn = get_fn(m, "add");
  add_args x;
  add_prepare(f, &x, 16);
  t4a_launch_config cfg = config_1d(1, 16, 0);
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 4}, &t));
  uint32_t id = 0;
  CK(t4a_descriptor_register(t, fn, &cfg, x.args, 4, &id));
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_descriptor_unregister(t, id));
  t4a_launch_table_destroy(t);
  t4a_buffer_release(x.a);
  t4a_buffer_release(x.b);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_clear(f->cache);
  assert_int_equal(calls(f, "cuModuleUnload"), 0);
  assert_int_equal(((int *)view(f, x.out))[3], -1);
  CK(t4a_retire_wait(f->retire));
  assert_true(add_done(f, x.out, 16));
  assert_int_equal(calls(f, "cuModuleUnload"), 1);
  t4a_buffer_release(x.out);
}

/* ---- raw bytes and struct parameters ---- */

static void test_raw_bytes(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *aff = get_fn(m, "affine"), *vec = get_fn(m, "vec16");
  t4a_buffer *out = make_buffer(f, 16);
  long long *po = view(f, out);
  CUdeviceptr dout = (CUdeviceptr)t4a_buffer_devptr(out);
  /* affine(long long *out, struct {int; double; char}, short): offsets 0, 8, 32. */
  unsigned char raw[48];
  memset(raw, 0, sizeof raw);
  affine_s s = {3, 0.5, 7};
  short k = 4;
  memcpy(raw, &dout, 8);
  memcpy(raw + 8, &s, sizeof s);
  memcpy(raw + 32, &k, 2);
  const uint32_t offs[3] = {0, 8, 32};
  t4a_launch_config cfg = config_1d(1, 1, 0);
  CK(t4a_launch_raw(f->retire, aff, &cfg, raw, 34, offs, 3));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(po[0], 21);
  CK(t4a_launch_raw(f->retire, aff, &cfg, raw, 40, offs, 3)); /* trailing padding */
  /* Offsets and implied sizes must agree with the kernel's layout. */
  const uint32_t shifted[3] = {0, 16, 32}, unordered[3] = {0, 32, 8};
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, raw, 34, shifted, 3),
                   T4A_ARGUMENT_MISMATCH);
  assert_non_null(strstr(last_error().message, "parameter 1"));
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, raw, 34, unordered, 3),
                   T4A_ARGUMENT_MISMATCH);
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, raw, 33, offs, 3),
                   T4A_ARGUMENT_MISMATCH); /* the short is cut */
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, raw, 41, offs, 3),
                   T4A_ARGUMENT_MISMATCH); /* more than padding after it */
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, raw, 34, offs, 2), T4A_ARGUMENT_MISMATCH);
  assert_int_equal(t4a_launch_raw(f->retire, aff, &cfg, NULL, 34, offs, 3), T4A_INVALID_ARGUMENT);
  /* vec16(int *out, float4 v): v at 16, not 8. */
  float v4[4] = {1, 2, 3, 4};
  memset(raw, 0, sizeof raw);
  memcpy(raw, &dout, 8);
  memcpy(raw + 16, v4, 16);
  const uint32_t voffs[2] = {0, 16}, vbad[2] = {0, 8};
  assert_int_equal(t4a_launch_raw(f->retire, vec, &cfg, raw, 24, vbad, 2), T4A_ARGUMENT_MISMATCH);
  CK(t4a_launch_raw(f->retire, vec, &cfg, raw, 32, voffs, 2));
  CK(t4a_retire_wait(f->retire));
  int *pi = view(f, out);
  for (int i = 0; i < 4; i++) assert_int_equal(pi[i], i + 1);
  assert_int_equal(calls(f, "cuLaunchKernel"), 3);
  t4a_buffer_release(out);
  t4a_function_release(aff);
  t4a_function_release(vec);
  t4a_module_release(m);
}

/* A descriptor with a struct argument: the snapshot is taken at registration. */
static void test_descriptor_struct_argument(void **state) {
  fixture *f = *state;
  t4a_module *m = load_ptx(f);
  t4a_function *aff = get_fn(m, "affine");
  t4a_buffer *out = make_buffer(f, 16);
  long long *po = view(f, out);
  affine_s s = {3, 0.5, 7};
  short k = 4;
  t4a_arg args[3] = {t4a_arg_buffer(out, 0), t4a_arg_scalar(&s, sizeof s),
                     t4a_arg_scalar(&k, sizeof k)};
  t4a_launch_table *t = NULL;
  CK(t4a_launch_table_create(f->retire, &(t4a_launch_table_options){.capacity = 1}, &t));
  uint32_t id = 0;
  t4a_launch_config cfg = config_1d(1, 1, 64 * 1024);
  CK(t4a_descriptor_register(t, aff, &cfg, args, 3, &id));
  s.a = 100; /* not seen by the descriptor */
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(po[0], 21);
  assert_int_equal(po[1], 64 * 1024); /* the shared memory attribute was raised for it */
  t4a_arg as = t4a_arg_scalar(&s, sizeof s);
  CK(t4a_descriptor_rebind(t, id, 1, &as)); /* now it is */
  CK(t4a_descriptor_fire(t, id));
  CK(t4a_retire_wait(f->retire));
  assert_int_equal(po[0], (long long)((100 + 0.5) * 4) + 7);
  t4a_arg small = t4a_arg_scalar(&s, 16);
  assert_int_equal(t4a_descriptor_rebind(t, id, 1, &small), T4A_ARGUMENT_MISMATCH);
  t4a_launch_table_destroy(t);
  t4a_buffer_release(out);
  t4a_function_release(aff);
  t4a_module_release(m);
}

/* ---- L2 persistence ---- */

static void test_l2(void **state) {
  fixture *f = *state;
  size_t applied = 0;
  CK(t4a_l2_set_persisting_limit(f->lane, 1 << 20, &applied));
  assert_int_equal(applied, 1 << 20);
  CK(t4a_l2_set_persisting_limit(f->lane, (size_t)1 << 40, &applied));
  assert_int_equal(applied, 45 * 1024 * 1024); /* the fake H200's maximum */
  CK(t4a_l2_set_persisting_limit(f->lane, 4096, NULL));
  t4a_buffer *b = make_buffer(f, 1 << 20);
  CUstream stream = t4a_lane_stream(f->lane);
  CK(t4a_l2_set_window(f->lane, t4a_buffer_devptr(b), 1 << 20, 0.6f));
  CUstreamAttrValue v;
  assert_int_equal(
      t4a_fake_stream_attr(f->fake, stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), 1);
  assert_int_equal((uintptr_t)v.accessPolicyWindow.base_ptr, t4a_buffer_devptr(b));
  assert_int_equal(v.accessPolicyWindow.num_bytes, 1 << 20);
  assert_true(v.accessPolicyWindow.hitRatio == 0.6f);
  assert_int_equal(v.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
  assert_int_equal(v.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);
  /* Clamped to the device's largest window. */
  CK(t4a_l2_set_window(f->lane, t4a_buffer_devptr(b), (size_t)1 << 30, 1.0f));
  t4a_fake_stream_attr(f->fake, stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
  assert_int_equal(v.accessPolicyWindow.num_bytes, 134213632);
  assert_int_equal(t4a_l2_set_window(f->lane, t4a_buffer_devptr(b), 64, 1.5f),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_l2_set_window(f->lane, t4a_buffer_devptr(b), 64, -0.1f),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_l2_set_window(f->lane, t4a_buffer_devptr(b), 64, NAN), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_l2_set_window(f->lane, 0, 64, 0.5f), T4A_INVALID_ARGUMENT);
  CK(t4a_l2_set_window(f->lane, 0, 0, 0.0f)); /* clears */
  t4a_fake_stream_attr(f->fake, stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
  assert_int_equal(v.accessPolicyWindow.num_bytes, 0);
  CK(t4a_l2_reset(f->lane));
  assert_int_equal(calls(f, "cuCtxResetPersistingL2Cache"), 1);
  assert_int_equal(t4a_l2_reset(NULL), T4A_INVALID_ARGUMENT);
  /* A driver refusal is typed with its entry. */
  t4a_fake_inject(f->fake, "cuCtxSetLimit", 0, 1, CUDA_ERROR_UNSUPPORTED_LIMIT, 0);
  assert_int_equal(t4a_l2_set_persisting_limit(f->lane, 4096, &applied), T4A_DRIVER_ERROR);
  assert_string_equal(last_error().entry, "cuCtxSetLimit");
  assert_int_equal(applied, 0);
  t4a_fake_clear_injections(f->fake);
  t4a_buffer_release(b);
}

/* ---- failure sweeps ---- */

static t4a_status op_launch(void *user) {
  fixture *f = user;
  t4a_retire *r = NULL;
  t4a_module_cache *c = NULL;
  t4a_module *m = NULL;
  t4a_function *add = NULL, *aff = NULL;
  t4a_buffer *a = NULL, *out = NULL, *o2 = NULL;
  t4a_launch_table *t = NULL;
  uint32_t id = 0, id2 = 0;
  int n = 16;
  affine_s s = {3, 0.5, 7};
  short k = 4;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_module_cache_create(r, NULL, &c);
  if (st == T4A_OK) st = t4a_module_load(c, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "add", &add);
  if (st == T4A_OK) st = t4a_module_get_function(m, "affine", &aff);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &a);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 64, 0, 0, &out);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, 16, 0, 0, &o2);
  if (st == T4A_OK) {
    int *pa = view(f, a);
    for (int i = 0; i < n; i++) pa[i] = i;
  }
  t4a_arg args[4] = {t4a_arg_buffer(a, 0), t4a_arg_buffer(a, 0), t4a_arg_buffer(out, 0),
                     t4a_arg_scalar(&n, 4)};
  t4a_arg aargs[3] = {t4a_arg_buffer(o2, 0), t4a_arg_scalar(&s, sizeof s), t4a_arg_scalar(&k, 2)};
  t4a_launch_config cfg = config_1d(1, 16, 0), shared = config_1d(1, 1, 65536);
  if (st == T4A_OK) st = t4a_launch(r, add, &cfg, args, 4);
  if (st == T4A_OK) st = t4a_launch(r, aff, &shared, aargs, 3);
  if (st == T4A_OK) st = t4a_launch_table_create(r, &(t4a_launch_table_options){.capacity = 4}, &t);
  if (st == T4A_OK) st = t4a_descriptor_register(t, add, &cfg, args, 4, &id);
  if (st == T4A_OK) st = t4a_descriptor_register(t, aff, &cfg, aargs, 3, &id2);
  if (st == T4A_OK) st = t4a_descriptor_fire(t, id);
  if (st == T4A_OK) st = t4a_descriptor_rebind_fire(t, id2, aargs, 3);
  if (st == T4A_OK) {
    unsigned char raw[34];
    CUdeviceptr d = (CUdeviceptr)t4a_buffer_devptr(o2);
    memcpy(raw, &d, 8);
    memcpy(raw + 8, &s, sizeof s);
    memcpy(raw + 32, &k, 2);
    const uint32_t offs[3] = {0, 8, 32};
    st = t4a_launch_raw(r, aff, &cfg, raw, sizeof raw, offs, 3);
  }
  if (st == T4A_OK) st = t4a_l2_set_persisting_limit(f->lane, 1 << 20, NULL);
  if (st == T4A_OK) st = t4a_l2_set_window(f->lane, t4a_buffer_devptr(a), 64, 0.5f);
  if (st == T4A_OK) st = t4a_l2_reset(f->lane);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  if (st == T4A_OK) {
    int *pc = view(f, out);
    long long *p2 = view(f, o2);
    if (pc[15] != 30 || p2[0] != 21) st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "bad");
  }
  t4a_launch_table_destroy(t);
  t4a_buffer_release(a);
  t4a_buffer_release(out);
  t4a_buffer_release(o2);
  t4a_function_release(add);
  t4a_function_release(aff);
  t4a_module_release(m);
  t4a_module_cache_destroy(c);
  t4a_status dst = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst;
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {
      .name = "launch", .fake = f->fake, .op = op_launch, .unaccounted = unaccounted, .user = f};
  f->baseline = unaccounted(f);
  assert_int_equal(f->baseline, 0);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 20);
  /* (Not INVALID_VALUE: from cuFuncGetParamInfo it means "no more parameters".) */
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_HANDLE, T4A_DRIVER_ERROR) > 20);
  /* The kernel is queued but the call reports failure: typed, buffers quarantined, the module
   * kept until the drain, nothing alive uncounted. */
  s.entry = "cuLaunchKernel";
  s.after_enqueue = 1;
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR), 5);
  s.entry = NULL;
  s.after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 5);
  const t4a_status mutex[] = {T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1) > 3);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_add_runs_in_stream_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_function_and_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_argument_checks_before_enqueue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_config_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dynamic_shared_raised_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_launch_returns_the_driver_error, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failure_after_enqueue_quarantines_the_buffers,
                                      setup_leaky, teardown_counted),
      cmocka_unit_test_setup_teardown(test_warm_chain_allocates_nothing, setup_progressing,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_warm_chain_retiring_epochs, setup_small_ring, teardown),
      cmocka_unit_test_setup_teardown(test_descriptors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unregister_while_queued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_raw_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_descriptor_struct_argument, setup, teardown),
      cmocka_unit_test_setup_teardown(test_l2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
