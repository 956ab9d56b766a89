/* Self-tests of the fake driver: devices and contexts: properties, primary-context reference
 * counts and handles, resets, the current context. Its table called raw, as t4a would call it
 * (fixture and shared kernels: fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

/* ---- devices ------------------------------------------------------------------------------ */

static void test_devices(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 3;
  o.mem_bytes = 64u << 20;
  o.peer[0][1] = 1;
  t4a_fake *fake;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  const t4a_driver_table *t = t4a_fake_table(fake);
  CK(t->cuInit(0));
  int n;
  CK(t->cuDeviceGetCount(&n));
  assert_int_equal(n, 3);
  CUdevice d;
  CK(t->cuDeviceGet(&d, 2));
  assert_int_equal(d, 2);
  assert_int_equal(t->cuDeviceGet(&d, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(t->cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(t->cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);

  char name[64];
  CK(t->cuDeviceGetName(name, sizeof name, 1));
  assert_string_equal(name, "T4A Fake Device 1");
  char small[5];
  CK(t->cuDeviceGetName(small, sizeof small, 1));
  assert_string_equal(small, "T4A ");
  assert_int_equal(t->cuDeviceGetName(name, sizeof name, 7), CUDA_ERROR_INVALID_DEVICE);

  CUuuid u0, u1, u0b;
  CK(t->cuDeviceGetUuid(&u0, 0));
  CK(t->cuDeviceGetUuid(&u1, 1));
  CK(t->cuDeviceGetUuid(&u0b, 0));
  assert_memory_not_equal(&u0, &u1, sizeof u0);
  assert_memory_equal(&u0, &u0b, sizeof u0);

  static const struct {
    CUdevice_attribute a;
    int v;
  } facts[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 60 << 20},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
      {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
  };
  for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
    int v = -7;
    CK(t->cuDeviceGetAttribute(&v, facts[i].a, 0));
    assert_int_equal(v, facts[i].v);
  }
  int v;
  CK(t->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 0));
  assert_true(v > 0 && v <= (60 << 20));
  CK(t->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 0));
  assert_true(v >= 1);
  int bus0, bus1;
  CK(t->cuDeviceGetAttribute(&bus0, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0));
  CK(t->cuDeviceGetAttribute(&bus1, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
  assert_int_not_equal(bus0, bus1);
  assert_int_equal(t->cuDeviceGetAttribute(&v, (CUdevice_attribute)99999, 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3),
                   CUDA_ERROR_INVALID_DEVICE);

  size_t total;
  CK(t->cuDeviceTotalMem(&total, 2));
  assert_int_equal(total, 64u << 20);

  int can = -1;
  CK(t->cuDeviceCanAccessPeer(&can, 0, 1));
  assert_int_equal(can, 1);
  CK(t->cuDeviceCanAccessPeer(&can, 1, 0));
  assert_int_equal(can, 0);
  assert_int_equal(t->cuDeviceCanAccessPeer(&can, 1, 1), CUDA_ERROR_INVALID_DEVICE);
  t4a_fake_destroy(fake);
}

/* ---- contexts ----------------------------------------------------------------------------- */

static void test_primary_ctx_refcount_and_stale_handles(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUcontext again;
  CK(t->cuDevicePrimaryCtxRetain(&again, 0));
  assert_ptr_equal(again, x->ctx);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.primary_refs[0], 2);
  unsigned flags;
  int active;
  CK(t->cuDevicePrimaryCtxGetState(0, &flags, &active));
  assert_int_equal(active, 1);

  CK(t->cuStreamDestroy(x->s));
  x->s = NULL;
  CK(t->cuDevicePrimaryCtxRelease(0));
  CK(t->cuDevicePrimaryCtxGetState(0, &flags, &active));
  assert_int_equal(active, 1);
  CK(t->cuDevicePrimaryCtxRelease(0));
  CK(t->cuDevicePrimaryCtxGetState(0, &flags, &active));
  assert_int_equal(active, 0);
  assert_int_equal(t->cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);

  /* The thread's current context is the destroyed one, like the real driver's: calls that need
   * it say so (709). */
  CUcontext cur;
  CK(t->cuCtxGetCurrent(&cur));
  assert_ptr_equal(cur, x->ctx);
  CUstream s;
  assert_int_equal(t->cuStreamCreate(&s, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUdeviceptr p;
  assert_int_equal(t->cuMemAlloc(&p, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUmodule m;
  assert_int_equal(t->cuModuleLoadData(&m, "T4AFAKE1\nk\n"), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  /* Setting the released context current succeeds, as on the real driver. */
  CK(t->cuCtxSetCurrent(x->ctx));

  /* A new retain revives the same handle. */
  CUcontext fresh;
  CK(t->cuDevicePrimaryCtxRetain(&fresh, 0));
  assert_ptr_equal(fresh, x->ctx);
  CK(t->cuCtxSetCurrent(fresh));
  CUdevice dev = -1;
  CK(t->cuCtxGetDevice(&dev));
  assert_int_equal(dev, 0);
  CK(t->cuDevicePrimaryCtxRelease(0));
  CK(t->cuCtxSetCurrent(NULL));
  CK(t->cuCtxGetCurrent(&cur));
  assert_null(cur);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  assert_true(t4a_fake_nothing_live(x->fake));
}

static void test_release_with_live_objects_leaks(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent e;
  CK(t->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr p;
  CK(t->cuMemAllocAsync(&p, 256, x->s));
  CK(t->cuDevicePrimaryCtxRelease(0));
  /* t4a must clean up before releasing: what it forgot stays counted. */
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.streams, 1);
  assert_int_equal(live.events, 1);
  assert_int_equal(live.device_allocs, 1);
  assert_int_equal(live.primary_refs[0], 0);
  assert_false(t4a_fake_nothing_live(x->fake));
  /* And the dead context's objects refuse work. */
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuEventQuery(e), CUDA_ERROR_INVALID_CONTEXT);
  /* A destroy needs a current context: the destroyed one, still current here, answers that it is
   * destroyed; under the revived context the old incarnation's stream and event are refused. */
  assert_int_equal(t->cuStreamDestroy(x->s), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(t->cuEventDestroy(e), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUcontext revived;
  CK(t->cuDevicePrimaryCtxRetain(&revived, 0));
  assert_int_equal(t->cuStreamDestroy(x->s), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuEventDestroy(e), CUDA_ERROR_INVALID_CONTEXT);
  CK(t->cuDevicePrimaryCtxRelease(0));
}

/* Creating and freeing what a context owns needs a current context (the Driver API documents
 * CUDA_ERROR_INVALID_CONTEXT for each): a drop path that "destroys anyway" after failing to
 * activate its context is refused, as on the driver, instead of passing quietly. */
static void test_frees_and_destroys_need_a_current_context(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent e;
  CK(t->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  void *host;
  CK(t->cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE));
  static char reg[8192] __attribute__((aligned(4096)));
  CK(t->cuMemHostRegister(reg, sizeof reg, CU_MEMHOSTREGISTER_PORTABLE));
  CUmodule m = load_kernels(x, (const char *const[]){"k"}, 1);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 256));
  CK(t->cuCtxSetCurrent(NULL));
  assert_int_equal(t->cuMemFreeHost(host), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuEventDestroy(e), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuStreamDestroy(x->s), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuModuleUnload(m), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuMemHostUnregister(reg), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuMemFree(d), CUDA_ERROR_INVALID_CONTEXT);
  CUevent e2;
  CUstream s2;
  void *h2;
  assert_int_equal(t->cuEventCreate(&e2, 0), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuStreamCreate(&s2, 0), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuMemHostAlloc(&h2, 64, 0), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
  /* Refused, nothing was freed. */
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.events, 1);
  assert_int_equal(live.host_allocs, 1);
  assert_int_equal(live.host_registrations, 1);
  assert_int_equal(live.modules, 1);
  assert_int_equal(live.streams, 1);
  assert_int_equal(live.device_allocs, 1);
  /* With the context current, each succeeds. */
  CK(t->cuCtxSetCurrent(x->ctx));
  CK(t->cuMemFreeHost(host));
  CK(t->cuEventDestroy(e));
  CK(t->cuModuleUnload(m));
  CK(t->cuMemHostUnregister(reg));
  CK(t->cuMemFree(d));
  fx_clean(x);
}

static void test_reset_reclaims(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent e;
  CK(t->cuEventCreate(&e, 0));
  CUdeviceptr p;
  CK(t->cuMemAlloc(&p, 1024));
  void *h;
  CK(t->cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_PORTABLE));
  CUmodule m = load_kernels(x, (const char *const[]){"k"}, 1);
  (void)m;
  t4a_fake_set_sticky(x->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuMemAlloc(&p, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
  CK(t->cuDevicePrimaryCtxReset(0));
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.streams + live.events + live.device_allocs + live.host_allocs +
                       live.modules,
                   0);
  assert_int_equal(live.primary_refs[0], 1);
  assert_int_equal(t4a_fake_sticky(x->fake, 0), CUDA_SUCCESS);
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_INVALID_HANDLE);
  /* The context behind the handle is destroyed until the next retain revives the same handle. */
  CK(t->cuCtxSetCurrent(x->ctx));
  assert_int_equal(t->cuMemAlloc(&p, 8), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUcontext fresh;
  CK(t->cuDevicePrimaryCtxRetain(&fresh, 0));
  assert_ptr_equal(fresh, x->ctx);
  CK(t->cuMemAlloc(&p, 8));
  CK(t->cuMemFree(p));
  CK(t->cuDevicePrimaryCtxRelease(0));
  CK(t->cuDevicePrimaryCtxRelease(0));
  assert_true(t4a_fake_nothing_live(x->fake));
}

typedef struct thread_arg {
  const t4a_driver_table *t;
  CUcontext ctx;
  CUcontext seen_at_start;
  CUcontext seen_after_set;
  CUresult alloc_without;
} thread_arg;

static void *thread_ctx_main(void *p) {
  thread_arg *a = p;
  a->t->cuCtxGetCurrent(&a->seen_at_start);
  CUdeviceptr d;
  a->alloc_without = a->t->cuMemAlloc(&d, 16);
  a->t->cuCtxSetCurrent(a->ctx);
  a->t->cuCtxGetCurrent(&a->seen_after_set);
  a->t->cuCtxSetCurrent(NULL);
  return NULL;
}

static void test_current_context_is_per_thread(void **state) {
  fx *x = *state;
  thread_arg a = {x->t, x->ctx, (CUcontext)1, NULL, CUDA_SUCCESS};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, thread_ctx_main, &a), 0);
  pthread_join(th, NULL);
  assert_null(a.seen_at_start);
  assert_int_equal(a.alloc_without, CUDA_ERROR_INVALID_CONTEXT);
  assert_ptr_equal(a.seen_after_set, x->ctx);
  CUcontext cur;
  CK(x->t->cuCtxGetCurrent(&cur));
  assert_ptr_equal(cur, x->ctx); /* the thread's NULL did not touch this thread */
  fx_clean(x);
}

static void test_ctx_limits_and_peer(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.all_peers = 1;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  size_t v;
  CK(t->cuCtxGetLimit(&v, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
  assert_int_equal(v, 0);
  CK(t->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 4u << 20));
  CK(t->cuCtxGetLimit(&v, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
  assert_int_equal(v, 4u << 20);
  assert_int_equal(t->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 1u << 30),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuCtxSetLimit((CUlimit)77, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
  CK(t->cuCtxResetPersistingL2Cache());
  assert_int_equal(t4a_fake_calls(x.fake, "cuCtxResetPersistingL2Cache"), 1);

  CUcontext c1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  assert_int_equal(t->cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuCtxEnablePeerAccess(c1, 0));
  assert_int_equal(t->cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  assert_int_equal(t->cuCtxEnablePeerAccess(x.ctx, 0), CUDA_ERROR_INVALID_DEVICE);
  CK(t->cuDevicePrimaryCtxRelease(1));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- fidelity to the measured H200 driver (580.159.04, CUDA 13.0) ------------------------- */

/* One stable primary-context handle per device; a destroyed context can be made current, calls
 * that need it answer CONTEXT_IS_DESTROYED, and a retain revives the same handle, fresh. */
static void test_primary_ctx_revives_same_handle(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.all_peers = 1;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUcontext c1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  assert_ptr_not_equal(c1, x.ctx);
  t4a_fake_set_sticky(x.fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);

  /* The last release destroys device 0's context; the stream and event are left behind. */
  CK(t->cuDevicePrimaryCtxRelease(0));
  unsigned flags;
  int active = -1;
  CK(t->cuDevicePrimaryCtxGetState(0, &flags, &active));
  assert_int_equal(active, 0);
  CUcontext cur = NULL;
  CK(t->cuCtxGetCurrent(&cur));
  assert_ptr_equal(cur, x.ctx);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUdevice dev = -1;
  assert_int_equal(t->cuCtxGetDevice(&dev), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(t->cuStreamSynchronize(NULL), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUdeviceptr p;
  assert_int_equal(t->cuMemAllocAsync(&p, 64, NULL), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  /* Objects of the destroyed context stay unusable. */
  assert_int_equal(t->cuStreamSynchronize(x.s), CUDA_ERROR_INVALID_CONTEXT);
  /* Making it current (again) succeeds. */
  CK(t->cuCtxSetCurrent(NULL));
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuCtxGetCurrent(&cur));
  assert_ptr_equal(cur, x.ctx);
  /* Naming it from another context. */
  CK(t->cuCtxSetCurrent(c1));
  assert_int_equal(t->cuCtxEnablePeerAccess(x.ctx, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CK(t->cuCtxSetCurrent(x.ctx));

  /* A retain revives the same handle with fresh state: no sticky error, no objects. */
  CUcontext again;
  CK(t->cuDevicePrimaryCtxRetain(&again, 0));
  assert_ptr_equal(again, x.ctx);
  CK(t->cuDevicePrimaryCtxGetState(0, &flags, &active));
  assert_int_equal(active, 1);
  assert_int_equal(t4a_fake_sticky(x.fake, 0), CUDA_SUCCESS);
  CK(t->cuCtxSynchronize());
  CK(t->cuCtxGetDevice(&dev));
  assert_int_equal(dev, 0);
  assert_int_equal(t->cuStreamSynchronize(x.s), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_INVALID_CONTEXT);
  CUstream s2;
  CK(t->cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUcontext sc = NULL;
  CK(t->cuStreamGetCtx(s2, &sc));
  assert_ptr_equal(sc, x.ctx);
  CK(t->cuMemAllocAsync(&p, 64, s2));
  CK(t->cuMemFreeAsync(p, s2));
  CK(t->cuStreamSynchronize(s2));
  CK(t->cuStreamDestroy(s2));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuCtxEnablePeerAccess(x.ctx, 0));
  /* Leak accounting: what the first incarnation left stays counted. */
  t4a_fake_live live;
  t4a_fake_live_objects(x.fake, &live);
  assert_int_equal(live.streams, 1);
  assert_int_equal(live.events, 1);
  assert_int_equal(live.primary_refs[0], 1);
  CK(t->cuDevicePrimaryCtxRelease(0));
  CK(t->cuDevicePrimaryCtxRelease(1));
  CK(t->cuCtxSetCurrent(NULL));
  t4a_fake_destroy(x.fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test(test_devices),
cmocka_unit_test_setup_teardown(test_primary_ctx_refcount_and_stale_handles, setup,
                                      teardown),
cmocka_unit_test_setup_teardown(test_release_with_live_objects_leaks, setup, teardown),
cmocka_unit_test_setup_teardown(test_frees_and_destroys_need_a_current_context, setup,
                                      teardown),
cmocka_unit_test_setup_teardown(test_reset_reclaims, setup, teardown),
cmocka_unit_test_setup_teardown(test_current_context_is_per_thread, setup, teardown),
cmocka_unit_test(test_ctx_limits_and_peer),
cmocka_unit_test(test_primary_ctx_revives_same_handle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
