/* t4a_ctx on the fake driver: devices, holders, scopes, lanes, the A1 rule, failure sweeps. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

typedef t4a_fixture fixture;

static const t4a_driver_table *g_raw; /* the fake's own table (the tests' direct driver calls) */

/* A fake of `devices` devices (0 can reach 1, not the other way round) and its driver; no lane:
 * the tests open their own. */
static int setup_n(void **state, int devices) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = devices;
  o.fake.peer[0][1] = 1;
  o.stacks = 0;
  if (t4a_fixture_setup(state, &o) != 0) return -1;
  g_raw = t4a_fake_table(((fixture *)*state)->fake);
  return 0;
}
static int setup(void **state) { return setup_n(state, 2); }

/* Every test leaves the thread with no current context and nothing alive. */
static int teardown(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_NOTHING_LIVE);
}

static CUcontext current(void) {
  CUcontext c = (CUcontext)0x1;
  assert_int_equal(g_raw->cuCtxGetCurrent(&c), CUDA_SUCCESS);
  return c;
}

/* Peer access: enabled once per pair (a second holder of the same context finds it done), refused
 * with a typed error where the driver says the pair cannot, never for one device; the thread's
 * current context is restored. */
static void test_enable_peer_once_per_pair(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h0 = NULL, *h0b = NULL, *h1 = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h0), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h0b), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h1), T4A_OK);
  t4a_fake_reset_calls(f->fake);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, h1), T4A_OK);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, h1), T4A_OK);
  assert_int_equal(t4a_fake_calls(f->fake, "cuCtxEnablePeerAccess"), 1);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0b, h1), T4A_OK); /* already enabled: done */
  assert_int_equal(t4a_fake_calls(f->fake, "cuCtxEnablePeerAccess"), 2);
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.peer_access_enabled, 1);
  assert_int_equal(t4a_ctx_holder_enable_peer(h1, h0), T4A_UNSUPPORTED);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, h0b), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, NULL), T4A_INVALID_ARGUMENT);
  assert_null(current());
  t4a_fake_inject(f->fake, "cuCtxEnablePeerAccess", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_ctx_holder *h1b = NULL; /* a fresh pair member: h0 already has device 1 */
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h1b), T4A_OK);
  t4a_ctx_holder_release(h0b);
  t4a_ctx_holder_release(h1b);
  t4a_ctx_holder_release(h0);
  t4a_ctx_holder_release(h1);
  /* After the contexts died, a new holder pair enables again (fresh context, no memo). */
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h0), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h1), T4A_OK);
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, h1), T4A_DRIVER_ERROR); /* the injected one */
  assert_int_equal(t4a_ctx_holder_enable_peer(h0, h1), T4A_OK);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.peer_access_enabled, 2);
  t4a_ctx_holder_release(h0);
  t4a_ctx_holder_release(h1);
  assert_null(current());
}

static void test_devices(void **state) {
  fixture *f = *state;
  int n = 0;
  assert_int_equal(t4a_device_count(f->drv, &n), T4A_OK);
  assert_int_equal(n, 2);
  t4a_device_info a, b;
  assert_int_equal(t4a_device_query(f->drv, 0, &a), T4A_OK);
  assert_int_equal(t4a_device_query(f->drv, 1, &b), T4A_OK);
  assert_int_equal(a.cc_major, 9);
  assert_int_equal(a.cc_minor, 0);
  assert_int_equal(a.sm_count, 132);
  assert_int_equal(a.max_threads_per_block, 1024);
  assert_int_equal(a.warp_size, 32);
  assert_true(a.total_mem_bytes > 0);
  assert_true(a.max_shared_per_block_optin_bytes > a.max_shared_per_block_bytes);
  assert_true(a.memory_pools_supported);
  assert_memory_not_equal(a.uuid, b.uuid, 16);
  assert_string_not_equal(a.name, b.name);
  char u[48];
  assert_int_equal(strlen(t4a_device_uuid_format(a.uuid, u, sizeof u)), 40);
  assert_memory_equal(u, "GPU-", 4);
  int can = -1;
  assert_int_equal(t4a_device_can_access_peer(f->drv, 0, 1, &can), T4A_OK);
  assert_int_equal(can, 1);
  assert_int_equal(t4a_device_can_access_peer(f->drv, 1, 0, &can), T4A_OK);
  assert_int_equal(can, 0);
  assert_int_equal(t4a_device_query(f->drv, 2, &a), T4A_INVALID_DEVICE);
  assert_int_equal(a.name[0], '\0'); /* outputs zeroed on failure */
  assert_int_equal(a.total_mem_bytes, 0);
  assert_int_equal(t4a_device_query(f->drv, -1, &a), T4A_INVALID_DEVICE);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "-1"));
  assert_int_equal(t4a_device_can_access_peer(f->drv, 0, 7, &can), T4A_INVALID_DEVICE);
  can = -1;
  assert_int_equal(t4a_device_can_access_peer(f->drv, 1, 1, &can), T4A_OK);
  assert_int_equal(can, 0); /* a device is not its own peer */
  assert_int_equal(t4a_device_count(NULL, &n), T4A_INVALID_ARGUMENT);
}

static void test_holder_refcounts_primary_context(void **state) {
  fixture *f = *state;
  t4a_fake_live live;
  t4a_ctx_holder *h1 = NULL, *h2 = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h1), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h2), T4A_OK);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[0], 2);
  assert_ptr_equal(t4a_ctx_holder_native(h1), t4a_ctx_holder_native(h2));
  assert_int_equal(t4a_ctx_holder_ordinal(h2), 0);
  t4a_ctx_holder_retain(h1);
  t4a_ctx_holder_release(h1);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[0], 2); /* one holder, one primary retain */
  t4a_ctx_holder_release(h1);
  t4a_ctx_holder_release(h2);
  t4a_ctx_holder_release(NULL);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[0], 0);
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_holders_created, 2);
  assert_int_equal(v.ctx_holders_destroyed, 2);
  t4a_ctx_holder *bad = (t4a_ctx_holder *)1;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 5, &bad), T4A_INVALID_DEVICE);
  assert_null(bad);
}

static void test_scope_skips_set_when_current_and_restores(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h0 = NULL, *h1 = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h0), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h1), T4A_OK);
  CUcontext c0 = t4a_ctx_holder_native(h0), c1 = t4a_ctx_holder_native(h1);
  assert_int_equal(g_raw->cuCtxSetCurrent(c1), CUDA_SUCCESS);
  t4a_counters counters;
  memset(&counters, 0, sizeof counters);

  uint64_t sets = t4a_fake_calls(f->fake, "cuCtxSetCurrent");
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, &counters), T4A_OK);
  assert_ptr_equal(current(), c0);
  /* Nested scope on the same context: no set at all. */
  t4a_ctx_scope inner;
  assert_int_equal(t4a_ctx_scope_enter(&inner, h0, &counters), T4A_OK);
  assert_int_equal(t4a_ctx_scope_exit(&inner), T4A_OK);
  assert_ptr_equal(current(), c0);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_ptr_equal(current(), c1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuCtxSetCurrent") - sets, 2); /* set + restore */

  t4a_counter_values v;
  t4a_counters_stats(&counters, &v);
  assert_int_equal(v.ctx_activations, 1);
  assert_int_equal(v.ctx_activations_skipped, 1);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_restores, 1);

  /* A failed set leaves the previous context in place and needs no exit. */
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, &counters), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuCtxSetCurrent");
  assert_int_equal(e.code, CUDA_ERROR_INVALID_VALUE);
  assert_string_equal(e.code_name, "CUDA_ERROR_INVALID_VALUE");
  assert_ptr_equal(current(), c1);

  /* A failed restore is reported and counted. */
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, &counters), T4A_OK);
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_DRIVER_ERROR);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_restore_failures, 1);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK); /* a second exit does nothing */

  assert_int_equal(g_raw->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  t4a_ctx_holder_release(h0);
  t4a_ctx_holder_release(h1);
}

/* t4a/ctx.h: "On failure nothing changed, the scope is cleared, and exit is a no-op." A scope in
 * caller storage that held anything before (a previous, exited scope) comes back all zero from a
 * refused enter: inside a host function, and after a failed cuCtxSetCurrent. */
static void test_failed_scope_enter_clears_the_scope(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h0 = NULL, *h1 = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h0), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h1), T4A_OK);
  assert_int_equal(g_raw->cuCtxSetCurrent(t4a_ctx_holder_native(h1)), CUDA_SUCCESS);
  t4a_ctx_scope zero;
  memset(&zero, 0, sizeof zero);
  t4a_ctx_scope s;
  memset(&s, 0xab, sizeof s);
  t4a_host_fn_enter_();
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, NULL), T4A_REENTRY);
  t4a_host_fn_exit_();
  assert_memory_equal(&s, &zero, sizeof s);
  /* A scope used and exited, then refused by the driver on its next enter. */
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, NULL), T4A_OK);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 0, 1, CUDA_ERROR_INVALID_VALUE, 0);
  assert_int_equal(t4a_ctx_scope_enter(&s, h0, NULL), T4A_DRIVER_ERROR);
  assert_memory_equal(&s, &zero, sizeof s);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK); /* a no-op */
  assert_int_equal(g_raw->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  t4a_ctx_holder_release(h0);
  t4a_ctx_holder_release(h1);
}

/* Requirement A1: two runtimes on one ordinal share the primary context. Dropping the last holder
 * of A on a thread where that context is current on behalf of B must not clear it. */
static void test_a1_last_holder_of_a_keeps_b_current(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &a), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &b), T4A_OK);
  /* A buffer of A would hold A's holder: model it with an extra reference. */
  t4a_ctx_holder *a_holder = t4a_lane_holder(a);
  t4a_ctx_holder_retain(a_holder);
  t4a_lane_release(a);

  assert_ptr_equal(current(), NULL);
  t4a_ctx_scope in_b;
  assert_int_equal(t4a_ctx_scope_enter(&in_b, t4a_lane_holder(b), NULL), T4A_OK);
  CUcontext ctx = t4a_ctx_holder_native(t4a_lane_holder(b));
  assert_ptr_equal(current(), ctx);
  /* The last holder of A goes away inside B's scope. */
  t4a_ctx_holder_release(a_holder);
  assert_ptr_equal(current(), ctx);
  /* B's work under its scope still succeeds. */
  assert_int_equal(t4a_lane_synchronize(b), T4A_OK);
  CUcontext via_stream = NULL;
  assert_int_equal(g_raw->cuStreamGetCtx(t4a_lane_stream(b), &via_stream), CUDA_SUCCESS);
  assert_ptr_equal(via_stream, ctx);
  assert_int_equal(t4a_ctx_scope_exit(&in_b), T4A_OK);
  assert_ptr_equal(current(), NULL); /* B's scope restored what it found */
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_current_kept, 1);
  t4a_lane_release(b);
}

/* The final holder of a context that was current here clears the dangling handle. */
static void test_final_holder_clears_only_a_destroyed_context(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h), T4A_OK);
  CUcontext c = t4a_ctx_holder_native(h);
  assert_int_equal(g_raw->cuCtxSetCurrent(c), CUDA_SUCCESS);
  t4a_ctx_holder_release(h);
  assert_ptr_equal(current(), NULL);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[1], 0);

  /* A context that someone outside t4a still retains stays current. */
  CUcontext outside = NULL;
  assert_int_equal(g_raw->cuDevicePrimaryCtxRetain(&outside, 1), CUDA_SUCCESS);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h), T4A_OK);
  assert_int_equal(g_raw->cuCtxSetCurrent(outside), CUDA_SUCCESS);
  t4a_ctx_holder_release(h);
  assert_ptr_equal(current(), outside);
  assert_int_equal(g_raw->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  assert_int_equal(g_raw->cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
}

/* Requirement A1 through an error path: when cuDevicePrimaryCtxGetState fails, the final holder
 * does not know whether the release destroyed the context, so it keeps it current: another holder
 * may still use it. Only a context known to be gone (the query answers inactive) is cleared. */
static void test_state_query_failure_keeps_the_current_context(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *a = NULL, *b = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &a), T4A_OK);
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &b), T4A_OK);
  CUcontext c = t4a_ctx_holder_native(b);
  t4a_ctx_scope in_b;
  assert_int_equal(t4a_ctx_scope_enter(&in_b, b, NULL), T4A_OK);
  assert_ptr_equal(current(), c);
  t4a_counter_values v0, v1;
  t4a_driver_stats(f->drv, &v0);
  uint64_t injected = t4a_fake_injected(f->fake);
  t4a_fake_inject(f->fake, "cuDevicePrimaryCtxGetState", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_ctx_holder_release(a); /* the last holder of A; B is alive and current */
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_fake_injected(f->fake) - injected, 1);
  assert_ptr_equal(current(), c); /* still B's */
  /* B's work under its scope still succeeds. */
  CUevent e = NULL;
  assert_int_equal(g_raw->cuEventCreate(&e, 0), CUDA_SUCCESS);
  assert_int_equal(g_raw->cuEventDestroy(e), CUDA_SUCCESS);
  assert_int_equal(t4a_ctx_scope_exit(&in_b), T4A_OK);
  assert_ptr_equal(current(), NULL);
  t4a_driver_stats(f->drv, &v1);
  assert_int_equal(v1.ctx_current_kept - v0.ctx_current_kept, 1);
  assert_int_equal(v1.ctx_holders_destroyed - v0.ctx_holders_destroyed, 1);

  /* The last holder of all, current here, with the query failing: the context is gone in fact,
   * but that is not known, so the handle stays (a later call answers CONTEXT_IS_DESTROYED rather
   * than t4a guessing); a query that answers inactive clears it (the test above). */
  assert_int_equal(g_raw->cuCtxSetCurrent(c), CUDA_SUCCESS);
  t4a_fake_inject(f->fake, "cuDevicePrimaryCtxGetState", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_ctx_holder_release(b);
  t4a_fake_clear_injections(f->fake);
  assert_ptr_equal(current(), c);
  assert_int_equal(g_raw->cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(g_raw->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[0], 0);
}

static void *release_holder(void *h) {
  t4a_ctx_holder_release(h);
  return NULL;
}

static void test_lanes_are_independent_and_release_anywhere(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL;
  t4a_lane_options opts = T4A_LANE_OPTIONS_INIT;
  assert_int_equal(t4a_lane_create(f->drv, 0, &opts, &a), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &b), T4A_OK);
  assert_ptr_not_equal(t4a_lane_stream(a), t4a_lane_stream(b));
  assert_int_not_equal(t4a_lane_domain(a), t4a_lane_domain(b));
  assert_true(t4a_lane_domain(a) != 0 && t4a_lane_domain(b) != 0);
  assert_ptr_equal(t4a_ctx_holder_native(t4a_lane_holder(a)),
                   t4a_ctx_holder_native(t4a_lane_holder(b)));
  assert_int_equal(t4a_lane_ordinal(b), 0);
  assert_ptr_equal(t4a_lane_driver(a), f->drv);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.streams, 2);
  assert_int_equal(live.primary_refs[0], 2);
  /* The stream is non-blocking and belongs to the lane's context. */
  unsigned flags = 0;
  assert_int_equal(g_raw->cuStreamGetFlags(t4a_lane_stream(a), &flags), CUDA_SUCCESS);
  assert_int_equal(flags & CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
  CUcontext sc = NULL;
  assert_int_equal(g_raw->cuStreamGetCtx(t4a_lane_stream(a), &sc), CUDA_SUCCESS);
  assert_ptr_equal(sc, t4a_ctx_holder_native(t4a_lane_holder(a)));
  /* Creation left the thread's context as it found it. */
  assert_ptr_equal(current(), NULL);

  assert_int_equal(t4a_lane_synchronize(a), T4A_OK);
  t4a_counter_values v;
  t4a_lane_stats(a, &v);
  assert_int_equal(v.host_waits, 1);

  /* A holder reference released on another thread. */
  t4a_ctx_holder *h = t4a_lane_holder(a);
  t4a_ctx_holder_retain(h);
  t4a_lane_release(a);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, release_holder, h), 0);
  pthread_join(t, NULL);
  t4a_lane_release(b);
  t4a_lane_release(NULL);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.lanes_created, 2);
  assert_int_equal(v.lanes_destroyed, 2);
  assert_int_equal(v.streams_destroyed, 2);
  assert_int_equal(v.streams_leaked, 0);
}

/* A lane whose context cannot be activated at teardown leaks its stream, counts it, and does
 * not abort (requirement A5). */
static void test_lane_destroy_leaks_without_context(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 1, NULL, &a), T4A_OK);
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 0, 1, CUDA_ERROR_INVALID_CONTEXT, 0);
  t4a_lane_release(a);
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.streams_leaked, 1);
  assert_int_equal(v.streams_destroyed, 0);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.streams, 1); /* the leak is real and visible */
  assert_int_equal(live.primary_refs[1], 0);
}

/* A sticky fault seen through one lane breaks every lane on that device, naming the fault, and
 * leaves the other device alone. */
static void test_sticky_fault_breaks_lanes_of_that_device(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL, *c = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &a), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &b), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 1, NULL, &c), T4A_OK);
  assert_int_equal(t4a_lane_check(b), T4A_OK);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_lane_synchronize(a), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_lane_check(b), T4A_LANE_BROKEN);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuStreamSynchronize");
  assert_string_equal(e.code_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_non_null(strstr(e.message, "device 0"));
  assert_int_equal(t4a_lane_check(a), T4A_LANE_BROKEN);
  assert_int_equal(t4a_lane_check(c), T4A_OK);
  assert_int_equal(t4a_lane_synchronize(c), T4A_OK);
  /* A second fault does not overwrite the first. */
  t4a_error other = {.status = T4A_CONTEXT_LOST, .entry = "cuOther", .code_name = "X"};
  t4a_ctx_holder_mark_lost_(t4a_lane_holder(b), &other);
  assert_int_equal(t4a_lane_check(b), T4A_LANE_BROKEN);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuStreamSynchronize");
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_faults, 1);
  /* Teardown after the fault: the streams of the lost context are abandoned, not destroyed under
   * a context that cannot prove their work finished. */
  t4a_lane_abandon_(a);
  t4a_lane_abandon_(b);
  t4a_lane_release(a);
  t4a_lane_release(b);
  t4a_lane_release(c);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.streams_leaked, 2);
  assert_int_equal(v.streams_destroyed, 1);
}

/* t4a_device_recover: refused (BUSY, no driver call) while a lane of the device is open; once
 * every lane was abandoned or released, one cuDevicePrimaryCtxReset clears the sticky error and
 * t4a's record, so a new lane works; the lanes made before stay broken for good (checks, scopes
 * and the mark of a new fault), and their drop paths call nothing under the reset context. */
static void test_device_recover_after_sticky_fault(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &a), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &b), T4A_OK);
  assert_int_equal(t4a_lane_create(f->drv, 1, NULL, &c), T4A_OK);
  assert_int_equal(t4a_device_open_lanes(f->drv, 0), 2);
  assert_int_equal(t4a_device_open_lanes(f->drv, 1), 1);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_lane_synchronize(a), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_lane_check(b), T4A_LANE_BROKEN);
  /* A new lane on the lost device is refused at once, naming the fault, no driver call. */
  t4a_fake_reset_calls(f->fake);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &d), T4A_LANE_BROKEN);
  assert_int_equal(t4a_fake_calls(f->fake, NULL), 0);
  assert_int_equal(t4a_device_open_lanes(f->drv, 0), 2);

  /* Refused while lanes are open: typed, counted, no driver call. */
  t4a_fake_reset_calls(f->fake);
  assert_int_equal(t4a_device_recover(f->drv, 0), T4A_BUSY);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "2 open lanes"));
  assert_int_equal(t4a_fake_calls(f->fake, "cuDevicePrimaryCtxReset"), 0);
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_lane_check(b), T4A_LANE_BROKEN);
  /* Teardown after the fault abandons the lanes (t4a_retire); `a` stays referenced, as a lane
   * kept by a leaked object is. One open lane still refuses. */
  t4a_lane_abandon_(a);
  assert_int_equal(t4a_device_open_lanes(f->drv, 0), 1);
  assert_int_equal(t4a_device_recover(f->drv, 0), T4A_BUSY);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "1 open lane "));
  t4a_lane_abandon_(b);
  t4a_lane_abandon_(b); /* counted once */
  t4a_lane_release(b);
  assert_int_equal(t4a_device_open_lanes(f->drv, 0), 0);
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.device_recoveries_refused, 2);
  assert_int_equal(v.device_recoveries, 0);

  /* A driver that keeps the fault for the process (driver 580 after an illegal address): the
   * reset succeeds but a new retain answers the sticky error; the new generation starts lost. */
  t4a_fake_inject(f->fake, "cuDevicePrimaryCtxRetain", 0, 1, CUDA_ERROR_ILLEGAL_ADDRESS, 0);
  assert_int_equal(t4a_device_recover(f->drv, 0), T4A_CONTEXT_LOST);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuDevicePrimaryCtxRetain");
  assert_int_equal(e.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_non_null(strstr(e.message, "new process"));
  t4a_fake_clear_injections(f->fake);
  t4a_fake_reset_calls(f->fake);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &d), T4A_LANE_BROKEN); /* at once */
  assert_null(d);
  assert_int_equal(t4a_fake_calls(f->fake, NULL), 0);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuDevicePrimaryCtxRetain");
  assert_int_equal(t4a_lane_check(a), T4A_LANE_BROKEN); /* stale: the first generation's */
  assert_int_equal(t4a_device_open_lanes(f->drv, 0), 0);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.device_recoveries, 0);
  assert_int_equal(v.ctx_faults, 2);

  /* Recovered: one reset, the sticky error gone, a new lane works. */
  assert_int_equal(t4a_device_recover(f->drv, 0), T4A_OK);
  assert_int_equal(t4a_fake_calls(f->fake, "cuDevicePrimaryCtxReset"), 1);
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_SUCCESS);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.device_recoveries, 1);
  assert_int_equal(v.ctx_faults, 2);
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &d), T4A_OK);
  assert_int_equal(t4a_lane_check(d), T4A_OK);
  assert_int_equal(t4a_lane_synchronize(d), T4A_OK);
  assert_false(t4a_lane_is_broken(d));

  /* The lane made before the reset stays broken, without a driver call. */
  t4a_fake_reset_calls(f->fake);
  assert_int_equal(t4a_lane_check(a), T4A_LANE_BROKEN);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "was reset"));
  assert_true(t4a_lane_is_broken(a));
  t4a_ctx_scope scope;
  assert_int_equal(t4a_ctx_scope_enter(&scope, t4a_lane_holder(a), NULL), T4A_LANE_BROKEN);
  assert_int_equal(t4a_ctx_scope_exit(&scope), T4A_OK); /* cleared: a no-op */
  assert_int_equal(t4a_fake_calls(f->fake, NULL), 0);
  /* A fault reported through an old holder does not mark the new context lost. */
  t4a_error other = {.status = T4A_CONTEXT_LOST, .entry = "cuOld", .code = 700,
                     .code_name = "CUDA_ERROR_ILLEGAL_ADDRESS"};
  t4a_ctx_holder_mark_lost_(t4a_lane_holder(a), &other);
  assert_int_equal(t4a_lane_check(d), T4A_OK);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_faults, 2);
  /* A new fault in the new generation is recorded and reported as before. */
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_LAUNCH_FAILED);
  assert_int_equal(t4a_lane_synchronize(d), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_lane_check(d), T4A_LANE_BROKEN);
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "CUDA_ERROR_LAUNCH_FAILED");
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.ctx_faults, 3);
  /* Device 1 was never involved. */
  assert_int_equal(t4a_lane_check(c), T4A_OK);
  assert_int_equal(t4a_device_recover(f->drv, 1), T4A_BUSY);
  assert_int_equal(t4a_device_recover(f->drv, 2), T4A_INVALID_DEVICE);
  assert_int_equal(t4a_device_recover(NULL, 0), T4A_INVALID_ARGUMENT);

  /* The old lanes' final releases destroy nothing under the reset context (their streams went
   * with the reset): a second recovery while d is abandoned but still referenced. */
  t4a_lane_abandon_(d);
  assert_int_equal(t4a_device_recover(f->drv, 0), T4A_OK);
  t4a_fake_reset_calls(f->fake);
  t4a_lane_release(a);
  t4a_lane_release(d);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamDestroy"), 0);
  t4a_lane_release(c);
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.device_recoveries, 2);
  assert_int_equal(v.device_recoveries_refused, 3);
}

static void test_lane_refcount(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &a), T4A_OK);
  t4a_lane_retain(a);
  t4a_lane_release(a);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.streams, 1);
  t4a_lane_release(a);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.streams, 0);
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, T4A_MAX_DEVICES, &h), T4A_INVALID_DEVICE);
}

/* ---- failure sweeps: fail the Nth driver call (and the Nth host allocation) for every N ---- */

static t4a_status op_lane_cycle(void *user) {
  fixture *f = user;
  t4a_lane *lane = NULL;
  t4a_status st = t4a_lane_create(f->drv, 1, NULL, &lane);
  if (st != T4A_OK) {
    assert_null(lane);
    return st;
  }
  t4a_lane_release(lane);
  return T4A_OK;
}

static t4a_status op_holder_scope(void *user) {
  fixture *f = user;
  t4a_ctx_holder *h = NULL;
  t4a_status st = t4a_ctx_holder_create(f->drv, 0, &h);
  if (st != T4A_OK) {
    assert_null(h);
    return st;
  }
  t4a_ctx_scope s;
  st = t4a_ctx_scope_enter(&s, h, NULL);
  if (st == T4A_OK) st = t4a_ctx_scope_exit(&s);
  t4a_ctx_holder_release(h);
  return st;
}

static t4a_status op_device_query(void *user) {
  fixture *f = user;
  t4a_device_info info;
  t4a_status st = t4a_device_query(f->drv, 1, &info);
  if (st != T4A_OK) assert_int_equal(info.total_mem_bytes, 0);
  return st;
}

static t4a_status op_peer(void *user) {
  fixture *f = user;
  int can = 7;
  t4a_status st = t4a_device_can_access_peer(f->drv, 0, 1, &can);
  if (st != T4A_OK) assert_int_equal(can, 0);
  return st;
}

/* Objects the fake holds beyond what t4a's leak counters account for. Zero means every object
 * alive is either none or a leak that t4a counted (a drop path that could not prove safety). */
static long unaccounted(void *user) {
  fixture *f = user;
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  return t4a_fixture_live(f->fake, T4A_FIXTURE_LIVE_STREAMS | T4A_FIXTURE_LIVE_PRIMARY_REFS |
                                       T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                       T4A_FIXTURE_LIVE_HOST_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                       T4A_FIXTURE_LIVE_POOLS | T4A_FIXTURE_LIVE_MODULES) -
         (long)v.streams_leaked - (long)v.ctx_release_failures;
}

/* Fails the Nth driver call with three result codes, then the Nth host allocation (see
 * testing/sweep). */
static void sweep(fixture *f, t4a_sweep_op op, const char *name) {
  t4a_sweep s = {.name = name, .fake = f->fake, .op = op, .unaccounted = unaccounted, .user = f};
  int surfaced = t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) +
                 t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY) +
                 t4a_sweep_driver(&s, CUDA_ERROR_ILLEGAL_ADDRESS, T4A_CONTEXT_LOST);
  assert_true(surfaced > 0);
  const t4a_status oom = T4A_HOST_OUT_OF_MEMORY;
  (void)t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, &oom, 1);
}

/* For tests that leak on purpose: what is alive must be exactly what t4a counted. */
static int teardown_counted_leaks(void **state) {
  return t4a_fixture_teardown_counted(state, unaccounted, 0);
}

static void test_sweep_lane(void **state) { sweep(*state, op_lane_cycle, "lane"); }
static void test_sweep_holder_scope(void **state) { sweep(*state, op_holder_scope, "holder"); }
static void test_sweep_device_query(void **state) { sweep(*state, op_device_query, "query"); }
static void test_sweep_peer(void **state) { sweep(*state, op_peer, "peer"); }

static void test_failed_create_leaves_context_alone(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 1, &h), T4A_OK);
  CUcontext c1 = t4a_ctx_holder_native(h);
  assert_int_equal(g_raw->cuCtxSetCurrent(c1), CUDA_SUCCESS);
  t4a_fake_inject(f->fake, "cuStreamCreateWithPriority", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  t4a_lane *lane = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &lane), T4A_DEVICE_OUT_OF_MEMORY);
  assert_null(lane);
  assert_ptr_equal(current(), c1);
  assert_int_equal(g_raw->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  t4a_ctx_holder_release(h);
}

/* The stream exists but the caller's context cannot be put back: the lane is not handed out, the
 * stream is destroyed, and the detail names the failed restore. */
static void test_lane_create_restore_failure(void **state) {
  fixture *f = *state;
  t4a_fake_inject(f->fake, "cuCtxSetCurrent", 1, 1, CUDA_ERROR_INVALID_VALUE, 0);
  t4a_lane *lane = (t4a_lane *)1;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &lane), T4A_DRIVER_ERROR);
  assert_null(lane);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuCtxSetCurrent");
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.streams, 0);
  assert_int_equal(live.primary_refs[0], 0);
}

/* Cleanup after a failure never replaces the detail of that failure: the first injected code is
 * the one reported even when every later driver call (the cleanup) fails too. */
static void test_cleanup_keeps_first_failure(void **state) {
  fixture *f = *state;
  for (uint64_t n = 0; n < 12; n++) {
    t4a_fake_clear_injections(f->fake);
    t4a_fake_inject(f->fake, NULL, n, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
    t4a_fake_inject(f->fake, NULL, n + 1, 1000, CUDA_ERROR_UNKNOWN, 0);
    t4a_lane *lane = NULL;
    t4a_status st = t4a_lane_create(f->drv, 1, NULL, &lane);
    t4a_fake_clear_injections(f->fake);
    if (st == T4A_OK) {
      t4a_lane_release(lane);
      break;
    }
    t4a_error e;
    t4a_error_last(&e);
    if (e.status != st || e.code != CUDA_ERROR_OUT_OF_MEMORY) {
      fail_msg("call %d: returned %s, detail says %s from %s (%d)", (int)n, t4a_status_name(st),
               t4a_status_name(e.status), e.entry, e.code);
    }
    (void)g_raw->cuCtxSetCurrent(NULL);
  }
  /* A drop path leaves the detail of an earlier failure alone. */
  t4a_lane *lane = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &lane), T4A_OK);
  t4a_device_info info;
  assert_int_equal(t4a_device_query(f->drv, 9, &info), T4A_INVALID_DEVICE);
  t4a_fake_inject(f->fake, NULL, 0, 1000, CUDA_ERROR_UNKNOWN, 0);
  t4a_lane_release(lane);
  t4a_fake_clear_injections(f->fake);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_INVALID_DEVICE);
}

/* A scope holds its holder: dropping the lane inside its own scope is safe (ASan checks). */
static void test_scope_outlives_lane(void **state) {
  fixture *f = *state;
  t4a_lane *lane = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &lane), T4A_OK);
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(lane), NULL), T4A_OK);
  t4a_lane_release(lane);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_ptr_equal(current(), NULL);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.primary_refs[0], 0);
  /* An exit after a failed enter does nothing. */
  t4a_fake_inject(f->fake, "cuCtxGetCurrent", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->drv, 0, &h), T4A_OK);
  assert_int_equal(t4a_ctx_scope_enter(&s, h, NULL), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  t4a_ctx_holder_release(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enable_peer_once_per_pair, setup, teardown),
      cmocka_unit_test_setup_teardown(test_holder_refcounts_primary_context, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scope_skips_set_when_current_and_restores, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failed_scope_enter_clears_the_scope, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a1_last_holder_of_a_keeps_b_current, setup, teardown),
      cmocka_unit_test_setup_teardown(test_final_holder_clears_only_a_destroyed_context, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_state_query_failure_keeps_the_current_context, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_lanes_are_independent_and_release_anywhere, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failed_create_leaves_context_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lane_destroy_leaks_without_context, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_sticky_fault_breaks_lanes_of_that_device, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_device_recover_after_sticky_fault, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lane_refcount, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lane_create_restore_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cleanup_keeps_first_failure, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_scope_outlives_lane, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sweep_lane, setup, teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_sweep_holder_scope, setup, teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_sweep_device_query, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sweep_peer, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
