/* Self-tests of the fake driver: its table called raw, as t4a would call it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"

#define CK(call) assert_int_equal((call), CUDA_SUCCESS)

/* ---- fixture ------------------------------------------------------------------------------ */

typedef struct fx {
  t4a_fake *fake;
  const t4a_driver_table *t;
  CUcontext ctx;
  CUstream s;
} fx;

/* Creates a fake, initialises it, retains device 0's primary context, makes it current and
 * creates one non-blocking stream. */
static int fx_open(fx *x, const t4a_fake_options *o) {
  memset(x, 0, sizeof *x);
  if (t4a_fake_create(o, &x->fake) != T4A_OK) return -1;
  x->t = t4a_fake_table(x->fake);
  if (x->t->cuInit(0) != CUDA_SUCCESS) return -1;
  if (x->t->cuDevicePrimaryCtxRetain(&x->ctx, 0) != CUDA_SUCCESS) return -1;
  if (x->t->cuCtxSetCurrent(x->ctx) != CUDA_SUCCESS) return -1;
  if (x->t->cuStreamCreate(&x->s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return -1;
  return 0;
}

/* Destroys the fixture's stream and releases its context, then checks nothing is left. */
static void fx_clean(fx *x) {
  if (x->s != NULL) CK(x->t->cuStreamDestroy(x->s));
  x->s = NULL;
  CK(x->t->cuDevicePrimaryCtxRelease(0));
  CK(x->t->cuCtxSetCurrent(NULL));
  assert_true(t4a_fake_nothing_live(x->fake));
}

static int setup(void **state) {
  fx *x = calloc(1, sizeof *x);
  if (x == NULL || fx_open(x, NULL) != 0) return -1;
  *state = x;
  return 0;
}

static int teardown(void **state) {
  fx *x = *state;
  t4a_fake_destroy(x->fake);
  free(x);
  return 0;
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* fill(int *p, int n, int base): p[i] = base + i. */
static const size_t k_fill_params[] = {8, 4, 4};
static void k_fill(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p;
  int n, base;
  memcpy(&p, params[0], 8);
  memcpy(&n, params[1], 4);
  memcpy(&base, params[2], 4);
  int *v = t4a_fake_deref(l, p, (size_t)n * sizeof(int));
  if (v == NULL) return;
  for (int i = 0; i < n; i++) v[i] = base + i;
}

/* add(const int *src, int *dst, int n, int k): dst[i] = src[i] + k. */
static const size_t k_add_params[] = {8, 8, 4, 4};
static void k_add(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr src, dst;
  int n, k;
  memcpy(&src, params[0], 8);
  memcpy(&dst, params[1], 8);
  memcpy(&n, params[2], 4);
  memcpy(&k, params[3], 4);
  const int *a = t4a_fake_deref(l, src, (size_t)n * sizeof(int));
  int *b = t4a_fake_deref(l, dst, (size_t)n * sizeof(int));
  if (a == NULL || b == NULL) return;
  for (int i = 0; i < n; i++) b[i] = a[i] + k;
}

/* Records what it saw: its first argument (an int64) and the launch geometry. */
typedef struct seen {
  int runs;
  int64_t arg;
  unsigned grid[3], block[3], shared;
} seen;
static const size_t k_seen_params[] = {8};
static void k_seen(t4a_fake_launch *l, void **params, void *user) {
  seen *s = user;
  s->runs++;
  memcpy(&s->arg, params[0], 8);
  t4a_fake_launch_dims(l, s->grid, s->block, &s->shared);
}

static CUmodule load_kernels(fx *x, const char *const *names, size_t num) {
  char buf[512];
  size_t need = t4a_fake_image(buf, sizeof buf, names, num);
  assert_true(need <= sizeof buf);
  CUmodule m = NULL;
  CK(x->t->cuModuleLoadData(&m, buf));
  return m;
}

static CUfunction get_fn(fx *x, CUmodule m, const char *name) {
  CUfunction f = NULL;
  CK(x->t->cuModuleGetFunction(&f, m, name));
  return f;
}

static CUresult launch1(fx *x, CUfunction f, CUstream s, void **args) {
  return x->t->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

/* ---- the table and the loader ------------------------------------------------------------- */

static void test_driver_from_table(void **state) {
  (void)state;
  t4a_fake *fake;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  t4a_fake *second;
  assert_int_equal(t4a_fake_create(NULL, &second), T4A_INVALID_ARGUMENT);
  t4a_driver *drv;
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_OK);
  assert_int_equal(t4a_driver_version(drv), 13000);
  assert_true(t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  assert_string_equal(t4a_driver_origin(drv), "fake");
  t4a_driver_release(drv);
  /* The loader called cuDriverGetVersion and cuInit through the table. */
  assert_int_equal(t4a_fake_calls(fake, "cuInit"), 1);
  assert_true(t4a_fake_calls(fake, NULL) >= 2);
  t4a_fake_destroy(fake);

  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.omit_param_info = 1;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  assert_null(t4a_fake_table(fake)->cuFuncGetParamInfo);
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_OK);
  assert_false(t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO);
  t4a_driver_release(drv);
  t4a_fake_destroy(fake);

  o.omit_param_info = 0;
  o.driver_version = 11080;
  assert_int_equal(t4a_fake_create(&o, &fake), T4A_OK);
  assert_int_equal(t4a_fake_driver(fake, &drv), T4A_DRIVER_TOO_OLD);
  t4a_fake_destroy(fake);
}

static void test_not_initialized_and_error_names(void **state) {
  (void)state;
  t4a_fake *fake;
  assert_int_equal(t4a_fake_create(NULL, &fake), T4A_OK);
  const t4a_driver_table *t = t4a_fake_table(fake);
  int n = -1, v = 0;
  assert_int_equal(t->cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext c;
  assert_int_equal(t->cuDevicePrimaryCtxRetain(&c, 0), CUDA_ERROR_NOT_INITIALIZED);
  CK(t->cuDriverGetVersion(&v));
  assert_int_equal(v, 13000);

  const char *s = NULL;
  CK(t->cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
  CK(t->cuGetErrorName(CUDA_SUCCESS, &s));
  assert_string_equal(s, "CUDA_SUCCESS");
  CK(t->cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &s));
  assert_string_equal(s, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
  CK(t->cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  assert_string_equal(s, "illegal address");
  assert_int_equal(t->cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_null(s);
  assert_int_equal(t->cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);

  /* Neither injection nor a sticky error touches the error-name calls; they still count. */
  t4a_fake_inject(fake, NULL, 0, UINT64_MAX, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
  assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(t->cuInit(0), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_calls(fake, "cuGetErrorName"), 6);
  t4a_fake_clear_injections(fake);
  CK(t->cuInit(0));
  CK(t->cuDeviceGetCount(&n));
  assert_int_equal(n, 1);
  /* A table call after the fake is gone answers, it does not crash. */
  PFN_cuInit_v2000 init = t->cuInit;
  t4a_fake_destroy(fake);
  assert_int_equal(init(0), CUDA_ERROR_DEINITIALIZED);
}

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
  assert_int_equal(t->cuStreamDestroy(x->s), CUDA_ERROR_INVALID_CONTEXT);
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

/* An event queried or synchronised while another context is current is counted (t4a's rule:
 * observe each event under its own context); with its own context, or none, it is not. */
static void test_foreign_event_observations(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ev, x.s));
  CK(t->cuEventSynchronize(ev));
  CK(t->cuEventQuery(ev));
  CK(t->cuCtxSetCurrent(NULL));
  CK(t->cuEventQuery(ev));
  assert_int_equal(t4a_fake_foreign_event_observations(x.fake), 0);
  CUcontext c1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuEventQuery(ev));
  CK(t->cuEventSynchronize(ev));
  assert_int_equal(t4a_fake_foreign_event_observations(x.fake), 2);
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuEventDestroy(ev));
  CK(t->cuDevicePrimaryCtxRelease(1));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- ordering ----------------------------------------------------------------------------- */

static void test_copies_run_in_stream_order_at_run_time(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 16, x->s));
  char src[16] = "first version!!", out[16] = "untouched......";
  CK(t->cuMemcpyHtoDAsync(d, src, 16, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 16, x->s));
  /* Nothing ran yet (the allocation is an operation too): a host read before the sync sees the
   * old bytes. */
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 3);
  assert_string_equal(out, "untouched......");
  /* Copies read their source when they run, not when they are enqueued. */
  memcpy(src, "second version!", 16);
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_NOT_READY);
  assert_string_equal(out, "untouched......");
  CK(t->cuStreamSynchronize(x->s));
  assert_string_equal(out, "second version!");
  CK(t->cuStreamQuery(x->s));
  /* One step at a time. */
  CK(t->cuMemsetD8Async(d, 'z', 15, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 16, x->s));
  assert_int_equal(t4a_fake_step(x->fake, x->s), 1);
  assert_string_equal(out, "second version!");
  assert_int_equal(t4a_fake_step(x->fake, x->s), 1);
  assert_string_equal(out, "zzzzzzzzzzzzzzz");
  assert_int_equal(t4a_fake_step(x->fake, x->s), 0);
  /* The query policy that progresses. */
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_PROGRESSES);
  uint32_t words[4] = {0};
  CK(t->cuMemsetD32Async(d, 0xA5A5A5A5u, 4, x->s));
  CK(t->cuMemcpyDtoHAsync(words, d, 16, x->s));
  CK(t->cuStreamQuery(x->s));
  assert_int_equal(words[3], 0xA5A5A5A5u);
  assert_int_equal(t->cuMemsetD32Async(d + 1, 0, 1, x->s), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFreeAsync(d, x->s));
  CK(t->cuStreamSynchronize(x->s));
  fx_clean(x);
}

static void test_cross_stream_event_wait(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  CUstream b, c;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CK(t->cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventQuery(ev)); /* never recorded: complete */
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  char in[8] = "payload", out[8] = "-------", later[8] = "-------";
  CK(t->cuMemcpyHtoDAsync(d, in, 8, x->s));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuMemcpyDtoHAsync(later, d, 8, x->s)); /* after the record: not needed by b */
  CK(t->cuStreamWaitEvent(b, ev, 0));
  CK(t->cuMemcpyDtoHAsync(out, d, 8, b));
  CK(t->cuMemsetD8Async(d, 0, 8, c)); /* unrelated stream: must stay untouched */
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_NOT_READY);

  CK(t->cuStreamSynchronize(b));
  assert_string_equal(out, "payload");
  assert_string_equal(later, "-------");
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  assert_int_equal(t4a_fake_pending(x->fake, c), 1);
  CK(t->cuEventQuery(ev));

  /* Re-recording makes the event pending again; waits bind to the record they saw. */
  CK(t->cuEventRecord(ev, x->s));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_NOT_READY);
  CK(t->cuEventSynchronize(ev));
  assert_string_equal(later, "payload");
  CK(t->cuEventQuery(ev));

  assert_int_equal(t4a_fake_progress(x->fake), 1);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 0);
  CK(t->cuMemFree(d));
  CK(t->cuEventDestroy(ev));
  CK(t->cuStreamDestroy(b));
  CK(t->cuStreamDestroy(c));
  fx_clean(x);
}

static void test_cross_device_wait_and_pool_access(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.all_peers = 1;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUcontext c1;
  CUstream s1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dst;
  CK(t->cuMemAllocAsync(&dst, 64, s1));
  /* Work for device 0's stream while device 1 is current: refused. */
  CUdeviceptr bad;
  assert_int_equal(t->cuMemAllocAsync(&bad, 64, x.s), CUDA_ERROR_INVALID_CONTEXT);

  CK(t->cuCtxSetCurrent(x.ctx));
  CUdeviceptr src;
  CK(t->cuMemAllocAsync(&src, 64, x.s));
  CK(t->cuMemsetD8Async(src, 7, 64, x.s));
  CUevent ready;
  CK(t->cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ready, x.s));

  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamWaitEvent(s1, ready, 0));
  /* Device 1 reads device 0's pool memory without access: a fault when it runs. */
  CK(t->cuMemcpyDtoDAsync(dst, src, 64, s1));
  assert_int_equal(t->cuStreamSynchronize(s1), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x.fake, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x.fake, 0), CUDA_SUCCESS);
  t4a_fake_destroy(x.fake);

  /* Again, with access granted on the source pool. */
  assert_int_equal(fx_open(&x, &o), 0);
  t = x.t;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CUmemoryPool pool;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CK(t->cuMemPoolCreate(&pool, &props));
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = 1;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(t->cuMemPoolSetAccess(pool, &desc, 1));
  CK(t->cuMemAllocFromPoolAsync(&src, 64, pool, x.s));
  CK(t->cuMemsetD8Async(src, 9, 64, x.s));
  CK(t->cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ready, x.s));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(t->cuMemAllocAsync(&dst, 64, s1));
  CK(t->cuStreamWaitEvent(s1, ready, 0));
  CK(t->cuMemcpyDtoDAsync(dst, src, 64, s1));
  unsigned char host[64];
  CK(t->cuMemcpyDtoHAsync(host, dst, 64, s1));
  /* Syncing device 1's stream runs device 0's stream up to the event, across devices. */
  CK(t->cuStreamSynchronize(s1));
  assert_int_equal(host[0], 9);
  assert_int_equal(host[63], 9);
  CK(t->cuMemFreeAsync(dst, s1));
  CK(t->cuStreamSynchronize(s1));
  CK(t->cuStreamDestroy(s1));
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuMemFreeAsync(src, x.s));
  CK(t->cuStreamSynchronize(x.s));
  CK(t->cuMemPoolDestroy(pool));
  CK(t->cuEventDestroy(ready));
  CK(t->cuDevicePrimaryCtxRelease(1));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- faults ------------------------------------------------------------------------------- */

static void test_illegal_address_from_copy_is_sticky(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent ev;
  CK(t->cuEventCreate(&ev, 0));
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 64, x->s));
  char out[128];
  CK(t->cuMemcpyDtoHAsync(out, d, 128, x->s)); /* enqueued fine: checked when it runs */
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuMemsetD8Async(d, 1, 64, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x->fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Every later call under the context returns it, and queries of its streams and events. */
  CUdeviceptr p;
  assert_int_equal(t->cuMemAlloc(&p, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream s2;
  assert_int_equal(t->cuStreamCreate(&s2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuEventSynchronize(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t->cuMemFreeAsync(d, x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Device queries are not under a context. */
  int n;
  CK(t->cuDeviceGetCount(&n));
  /* Recovery: reset the primary context. */
  CK(t->cuDevicePrimaryCtxReset(0));
  x->s = NULL;
  CK(t->cuDevicePrimaryCtxRelease(0));
  assert_true(t4a_fake_nothing_live(x->fake));
}

static const size_t k_oob_params[] = {8, 8};
static void k_oob(t4a_fake_launch *l, void **params, void *user) {
  int *ran_after_fault = user;
  CUdeviceptr p;
  uint64_t bytes;
  memcpy(&p, params[0], 8);
  memcpy(&bytes, params[1], 8);
  if (t4a_fake_deref(l, p, (size_t)bytes) != NULL) return;
  /* After the first fault every deref answers NULL. */
  if (t4a_fake_deref(l, p, 1) == NULL) (*ran_after_fault)++;
}

static void test_illegal_address_from_kernel(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  int after = 0;
  t4a_fake_register_kernel(x->fake, "oob", 2, k_oob_params, k_oob, &after);
  CUmodule m = load_kernels(x, (const char *const[]){"oob"}, 1);
  CUfunction f = get_fn(x, m, "oob");
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 100));
  uint64_t ok_bytes = 100, bad_bytes = 101;
  void *args_ok[] = {&d, &ok_bytes};
  void *args_bad[] = {&d, &bad_bytes};
  CK(launch1(x, f, x->s, args_ok));
  CK(t->cuStreamSynchronize(x->s));
  CK(launch1(x, f, x->s, args_bad));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(after, 1);
  assert_int_equal(t->cuModuleUnload(m), CUDA_ERROR_ILLEGAL_ADDRESS);
}

static void test_free_then_use(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 32, x->s));
  CK(t->cuMemFreeAsync(d, x->s));
  /* The free is queued: a second one is a double free. */
  assert_int_equal(t->cuMemFreeAsync(d, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFreeAsync(d + 8, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFreeAsync(0x1234, x->s), CUDA_ERROR_INVALID_VALUE);
  /* Still readable until the free runs... */
  assert_non_null(t4a_fake_host_view(x->fake, d, 32));
  char buf[32] = {0};
  CK(t->cuMemcpyHtoDAsync(d, buf, 32, x->s)); /* ...but this use comes after the free */
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_null(t4a_fake_host_view(x->fake, d, 32));
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.device_allocs, 0);
}

static void test_out_of_memory(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.mem_bytes = 1u << 20;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUdeviceptr a, b, c;
  CK(t->cuMemAllocAsync(&a, 768u << 10, x.s));
  assert_int_equal(t->cuMemAllocAsync(&b, 512u << 10, x.s), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(t->cuMemAlloc(&b, 512u << 10), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b, total_b;
  CK(t->cuMemGetInfo(&free_b, &total_b));
  assert_int_equal(total_b, 1u << 20);
  assert_int_equal(free_b, 256u << 10);
  CK(t->cuMemAlloc(&c, 256u << 10));
  /* The async free returns the memory when it runs, not before. */
  CK(t->cuMemFreeAsync(a, x.s));
  assert_int_equal(t->cuMemAllocAsync(&b, 512u << 10, x.s), CUDA_ERROR_OUT_OF_MEMORY);
  CK(t->cuStreamSynchronize(x.s));
  CK(t->cuMemAllocAsync(&b, 512u << 10, x.s));
  assert_true(b > a); /* addresses are never reused */
  assert_int_equal(t->cuMemAlloc(&c, 0), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFreeAsync(b, x.s));
  CK(t->cuMemFree(c));
  CK(t->cuStreamSynchronize(x.s));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- failure injection -------------------------------------------------------------------- */

static void test_injection(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr p[4];
  uint64_t before = t4a_fake_calls(x->fake, "cuMemAlloc");
  t4a_fake_inject(x->fake, "cuMemAlloc", 1, 2, CUDA_ERROR_OUT_OF_MEMORY, 0);
  CK(t->cuMemAlloc(&p[0], 8));
  assert_int_equal(t->cuMemAlloc(&p[1], 8), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(t->cuMemAlloc(&p[1], 8), CUDA_ERROR_OUT_OF_MEMORY);
  CK(t->cuMemAlloc(&p[1], 8));
  assert_int_equal(t4a_fake_injected(x->fake), 2);
  assert_int_equal(t4a_fake_calls(x->fake, "cuMemAlloc") - before, 4);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.device_allocs, 2);
  t4a_fake_clear_injections(x->fake);

  /* Any entry: the next call, whatever it is, fails. */
  t4a_fake_inject(x->fake, NULL, 0, 1, CUDA_ERROR_LAUNCH_TIMEOUT, 0);
  int n;
  assert_int_equal(t->cuDeviceGetCount(&n), CUDA_ERROR_LAUNCH_TIMEOUT);
  CK(t->cuDeviceGetCount(&n));
  t4a_fake_clear_injections(x->fake);

  /* Skip counts calls of that entry only. */
  t4a_fake_inject(x->fake, "cuStreamQuery", 2, 1, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuStreamQuery(x->s));
  CK(t->cuDeviceGetCount(&n));
  CK(t->cuStreamQuery(x->s));
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_UNKNOWN);
  CK(t->cuStreamQuery(x->s));
  t4a_fake_clear_injections(x->fake);

  /* after_enqueue: the copy is queued, yet the call fails. */
  char in[8] = "abcdefg", out[8] = {0};
  t4a_fake_inject(x->fake, "cuMemcpyHtoDAsync", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t->cuMemcpyHtoDAsync(p[0], in, 8, x->s), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  CK(t->cuMemcpyDtoHAsync(out, p[0], 8, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_string_equal(out, "abcdefg");
  /* Without after_enqueue nothing is queued. */
  t4a_fake_inject(x->fake, "cuMemcpyHtoDAsync", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t->cuMemcpyHtoDAsync(p[0], in, 8, x->s), CUDA_ERROR_UNKNOWN);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  /* after_enqueue on an entry that enqueues nothing fails before acting. */
  t4a_fake_inject(x->fake, "cuStreamCreate", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  CUstream s2;
  assert_int_equal(t->cuStreamCreate(&s2, 0), CUDA_ERROR_UNKNOWN);
  t4a_fake_clear_injections(x->fake);
  assert_int_equal(t4a_fake_injected(x->fake), 7);

  /* An unknown name never fires. */
  t4a_fake_inject(x->fake, "cuNoSuchEntry", 0, 10, CUDA_ERROR_UNKNOWN, 0);
  CK(t->cuMemFree(p[0]));
  CK(t->cuMemFree(p[1]));
  t4a_fake_clear_injections(x->fake);

  t4a_fake_reset_calls(x->fake);
  assert_int_equal(t4a_fake_calls(x->fake, NULL), 0);
  CK(t->cuDeviceGetCount(&n));
  assert_int_equal(t4a_fake_calls(x->fake, NULL), 1);
  assert_int_equal(t4a_fake_calls(x->fake, "cuDeviceGetCount"), 1);
  fx_clean(x);
}

/* ---- modules ------------------------------------------------------------------------------ */

/* Builds a minimal CUBIN-shaped ELF64: .strtab, .symtab and .shstrtab. Symbols: two kernel
 * entries (STT_FUNC with STO_CUDA_ENTRY 0x10 in st_other; one GLOBAL, one LOCAL as a static
 * kernel is), an STT_OBJECT, a GLOBAL device function (STT_FUNC without the mark: found, not
 * launchable), a LOCAL one (whole-program "$kernel$helper": invisible) and an undefined GLOBAL
 * function (invisible). Defined symbols name section 3 (any defined section will do here).
 * Returns its size. */
static size_t build_cubin(unsigned char *buf, size_t cap) {
  static const char strtab[] =
      "\0kern_elf_a\0kern_elf_b\0some_var\0dev_fn\0$kern_elf_a$local_fn\0ext_fn";
  static const char shstr[] = "\0.strtab\0.symtab\0.shstrtab";
  Elf64_Sym syms[7];
  memset(syms, 0, sizeof syms);
  syms[1].st_name = 1;
  syms[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  syms[1].st_other = 0x10;
  syms[1].st_shndx = 3;
  syms[2].st_name = 23;
  syms[2].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
  syms[2].st_shndx = 3;
  syms[3].st_name = 12;
  syms[3].st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
  syms[3].st_other = 0x10;
  syms[3].st_shndx = 3;
  syms[4].st_name = 32;
  syms[4].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  syms[4].st_shndx = 3;
  syms[5].st_name = 39;
  syms[5].st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
  syms[5].st_shndx = 3;
  syms[6].st_name = 60;
  syms[6].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC); /* st_shndx 0: undefined */
  size_t off_str = sizeof(Elf64_Ehdr);
  size_t off_sym = (off_str + sizeof strtab + 7) & ~(size_t)7;
  size_t off_shstr = off_sym + sizeof syms;
  size_t off_sh = (off_shstr + sizeof shstr + 7) & ~(size_t)7;
  size_t total = off_sh + 4 * sizeof(Elf64_Shdr);
  assert_true(total <= cap);
  memset(buf, 0, total);
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = EM_CUDA;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof eh;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 4;
  eh.e_shstrndx = 3;
  eh.e_shoff = off_sh;
  memcpy(buf, &eh, sizeof eh);
  memcpy(buf + off_str, strtab, sizeof strtab);
  memcpy(buf + off_sym, syms, sizeof syms);
  memcpy(buf + off_shstr, shstr, sizeof shstr);
  Elf64_Shdr sh[4];
  memset(sh, 0, sizeof sh);
  sh[1].sh_name = 1;
  sh[1].sh_type = SHT_STRTAB;
  sh[1].sh_offset = off_str;
  sh[1].sh_size = sizeof strtab;
  sh[2].sh_name = 9;
  sh[2].sh_type = SHT_SYMTAB;
  sh[2].sh_offset = off_sym;
  sh[2].sh_size = sizeof syms;
  sh[2].sh_link = 1;
  sh[2].sh_entsize = sizeof(Elf64_Sym);
  sh[3].sh_name = 17;
  sh[3].sh_type = SHT_STRTAB;
  sh[3].sh_offset = off_shstr;
  sh[3].sh_size = sizeof shstr;
  memcpy(buf + off_sh, sh, sizeof sh);
  return total;
}

static void patch_shdr(unsigned char *buf, int index, size_t field_off, const void *v, size_t n) {
  Elf64_Ehdr eh;
  memcpy(&eh, buf, sizeof eh);
  memcpy(buf + eh.e_shoff + (size_t)index * sizeof(Elf64_Shdr) + field_off, v, n);
}

static void test_modules_all_formats(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUmodule m;
  CUfunction f;

  /* The fake format. */
  m = load_kernels(x, (const char *const[]){"alpha", "beta"}, 2);
  CK(t->cuModuleGetFunction(&f, m, "beta"));
  assert_int_equal(t->cuModuleGetFunction(&f, m, "gamma"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t->cuModuleGetFunction(&f, m, NULL), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuModuleUnload(m));
  assert_int_equal(t->cuModuleGetFunction(&f, m, "beta"), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
  CK(t->cuModuleLoadData(&m, "T4AFAKE1\nwin_line\r\n\nlast"));
  CK(t->cuModuleGetFunction(&f, m, "win_line"));
  CK(t->cuModuleGetFunction(&f, m, "last"));
  CK(t->cuModuleUnload(m));
  char small[12];
  size_t need = t4a_fake_image(small, sizeof small, (const char *const[]){"abcdef"}, 1);
  assert_int_equal(need, 17);
  assert_int_equal(strlen(small), sizeof small - 1);

  /* PTX text. */
  static const char ptx[] =
      "//\n// Generated by a test\n//\n\n.version 8.5\n.target sm_90\n.address_size 64\n\n"
      "/* .entry not_me( */\n"
      "\t// .globl\t_Z4axpyfPKfPf\n"
      ".visible .entry _Z4axpyfPKfPf(\n\t.param .f32 _Z4axpyfPKfPf_param_0\n)\n{\n\tret;\n}\n"
      ".entry plain_kernel()\n{\n\tret;\n}\n"
      ".func helper()\n{\n\tret;\n}\n";
  CK(t->cuModuleLoadData(&m, ptx));
  CK(t->cuModuleGetFunction(&f, m, "_Z4axpyfPKfPf"));
  CK(t->cuModuleGetFunction(&f, m, "plain_kernel"));
  assert_int_equal(t->cuModuleGetFunction(&f, m, "helper"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t->cuModuleGetFunction(&f, m, "not_me"), CUDA_ERROR_NOT_FOUND);
  CK(t->cuModuleUnload(m));

  /* A CUBIN. */
  unsigned char elf[1024];
  size_t n = build_cubin(elf, sizeof elf);
  CK(t->cuModuleLoadData(&m, elf));
  CK(t->cuModuleGetFunction(&f, m, "kern_elf_a"));
  CK(t->cuModuleGetFunction(&f, m, "kern_elf_b"));
  assert_int_equal(t->cuModuleGetFunction(&f, m, "some_var"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t->cuModuleGetFunction(&f, m, "$kern_elf_a$local_fn"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t->cuModuleGetFunction(&f, m, "ext_fn"), CUDA_ERROR_NOT_FOUND);
  CK(t->cuModuleGetFunction(&f, m, "dev_fn")); /* a device function: found, not a kernel */
  assert_int_equal(launch1(x, f, x->s, NULL), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  CK(t->cuModuleUnload(m));

  /* Garbage, in each format. */
  static const unsigned char junk[] = {0x01, 0x02, 0xFF, 0x7F, 0x00};
  assert_int_equal(t->cuModuleLoadData(&m, junk), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, ""), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, "hello world"), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, ".version 8.0\n.entry k()"), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, ".version 8.0\n.target sm_90\n.entry ("),
                   CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, ".version 8.0 /* open"), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, "T4AFAKE1\nbad name\n"), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(t->cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
  unsigned char bad[1024];
  memcpy(bad, elf, n);
  uint16_t machine = EM_X86_64;
  memcpy(bad + offsetof(Elf64_Ehdr, e_machine), &machine, 2);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  bad[EI_CLASS] = ELFCLASS32;
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint64_t far = 1ull << 40;
  memcpy(bad + offsetof(Elf64_Ehdr, e_shoff), &far, 8);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint32_t link = 9;
  patch_shdr(bad, 2, offsetof(Elf64_Shdr, sh_link), &link, 4);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint64_t huge = UINT64_MAX - 16;
  patch_shdr(bad, 2, offsetof(Elf64_Shdr, sh_size), &huge, 8);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint64_t entsize = 7;
  patch_shdr(bad, 2, offsetof(Elf64_Shdr, sh_entsize), &entsize, 8);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint64_t strsize = 5; /* cuts the names: the table no longer ends in a NUL */
  patch_shdr(bad, 1, offsetof(Elf64_Shdr, sh_size), &strsize, 8);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);
  memcpy(bad, elf, n);
  uint32_t no_symtab = SHT_PROGBITS;
  patch_shdr(bad, 2, offsetof(Elf64_Shdr, sh_type), &no_symtab, 4);
  assert_int_equal(t->cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_IMAGE);

  /* The JIT error log explains a refusal. */
  char log[128] = "";
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)sizeof log};
  assert_int_equal(t->cuModuleLoadDataEx(&m, "hello", 2, opts, vals), CUDA_ERROR_INVALID_IMAGE);
  assert_true(strlen(log) > 0);
  assert_int_equal((size_t)(uintptr_t)vals[1], strlen(log) + 1);
  CK(t->cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_param_info_matches_h200(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  static const size_t sizes[] = {4, 8, 8, 4, 24, 2, 8};
  t4a_fake_register_kernel(x->fake, "k7", 7, sizes, NULL, NULL);
  t4a_fake_register_kernel(x->fake, "k0", 0, NULL, NULL, NULL);
  static const size_t odd[] = {1, 3, 12, 6, 8};
  t4a_fake_register_kernel(x->fake, "kodd", 5, odd, NULL, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"k7", "k0", "unregistered", "kodd"}, 4);
  CUfunction f = get_fn(x, m, "k7");
  static const size_t want[7][2] = {{0, 4}, {8, 8}, {16, 8}, {24, 4}, {32, 24}, {56, 2}, {64, 8}};
  for (size_t i = 0; i < 7; i++) {
    size_t off = 99, size = 99;
    CK(t->cuFuncGetParamInfo(f, i, &off, &size));
    assert_int_equal(off, want[i][0]);
    assert_int_equal(size, want[i][1]);
  }
  size_t off, size;
  assert_int_equal(t->cuFuncGetParamInfo(f, 7, &off, &size), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuFuncGetParamInfo(get_fn(x, m, "k0"), 0, &off, &size),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuFuncGetParamInfo(get_fn(x, m, "unregistered"), 0, &off, &size),
                   CUDA_ERROR_INVALID_VALUE);
  CUfunction fo = get_fn(x, m, "kodd");
  static const size_t want_odd[5] = {0, 1, 4, 16, 24};
  for (size_t i = 0; i < 5; i++) {
    CK(t->cuFuncGetParamInfo(fo, i, &off, NULL));
    assert_int_equal(off, want_odd[i]);
  }
  /* Re-registering replaces. */
  t4a_fake_register_kernel(x->fake, "k7", 1, sizes, NULL, NULL);
  assert_int_equal(t->cuFuncGetParamInfo(f, 1, &off, &size), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuModuleUnload(m));
  assert_int_equal(t->cuFuncGetParamInfo(f, 0, &off, &size), CUDA_ERROR_INVALID_HANDLE);
  fx_clean(x);
}

static void test_function_attributes_and_launch_checks(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  seen sn;
  memset(&sn, 0, sizeof sn);
  t4a_fake_register_kernel(x->fake, "seen", 1, k_seen_params, k_seen, &sn);
  CUmodule m = load_kernels(x, (const char *const[]){"seen", "noop"}, 2);
  CUfunction f = get_fn(x, m, "seen");
  int v;
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  assert_int_equal(v, 1024);
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  assert_int_equal(v, 49152);
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  assert_int_equal(t->cuFuncGetAttribute(&v, (CUfunction_attribute)999, f),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 3),
                   CUDA_ERROR_INVALID_VALUE);

  int64_t arg = 41;
  void *args[] = {&arg};
  assert_int_equal(t->cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, x->s, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, x->s, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, x->s, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, x->s, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 49153, x->s, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, x->s, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(NULL, 1, 1, 1, 64, 1, 1, 0, x->s, args, NULL),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         232449),
                   CUDA_ERROR_INVALID_VALUE);
  CK(t->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
  CK(t->cuLaunchKernel(f, 2, 3, 4, 8, 4, 2, 100000, x->s, args, NULL));
  arg = 99; /* the launch copied the argument already */
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(sn.runs, 1);
  assert_int_equal(sn.arg, 41);
  assert_int_equal(sn.grid[2], 4);
  assert_int_equal(sn.block[1], 4);
  assert_int_equal(sn.shared, 100000);

  /* Arguments packed in one buffer (CU_LAUNCH_PARAM_BUFFER_*). */
  int64_t packed = 7;
  size_t packed_size = sizeof packed;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  CK(t->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, x->s, NULL, extra));
  size_t short_size = 4;
  void *extra_short[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &short_size, CU_LAUNCH_PARAM_END};
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, x->s, NULL, extra_short),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, x->s, args, extra),
                   CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(sn.arg, 7);

  /* cuLaunchKernelEx. */
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 128;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = x->s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  arg = 5;
  CK(t->cuLaunchKernelEx(&cfg, f, args, NULL));
  cfg.blockDimX = 2048;
  assert_int_equal(t->cuLaunchKernelEx(&cfg, f, args, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernelEx(NULL, f, args, NULL), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(sn.arg, 5);
  assert_int_equal(sn.block[0], 128);
  assert_int_equal(sn.runs, 3);

  /* An unregistered kernel launches as a no-op. */
  CK(launch1(x, get_fn(x, m, "noop"), x->s, NULL));
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_unload_with_launch_in_flight(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  seen sn;
  memset(&sn, 0, sizeof sn);
  t4a_fake_register_kernel(x->fake, "seen", 1, k_seen_params, k_seen, &sn);
  CUmodule m = load_kernels(x, (const char *const[]){"seen"}, 1);
  int64_t arg = 1;
  void *args[] = {&arg};
  CK(launch1(x, get_fn(x, m, "seen"), x->s, args));
  CK(t->cuModuleUnload(m)); /* a bug in the runtime: the launch is still queued */
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_LAUNCH_FAILED);
  assert_int_equal(sn.runs, 0);
}

static void test_kernel_copy_kernel_chain(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "fill", 3, k_fill_params, k_fill, NULL);
  t4a_fake_register_kernel(x->fake, "add", 4, k_add_params, k_add, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"fill", "add"}, 2);
  CUfunction fill = get_fn(x, m, "fill"), add = get_fn(x, m, "add");
  enum { N = 64 };
  CUdeviceptr a, b, c;
  CK(t->cuMemAllocAsync(&a, N * sizeof(int), x->s));
  CK(t->cuMemAllocAsync(&b, N * sizeof(int), x->s));
  CK(t->cuMemAllocAsync(&c, N * sizeof(int), x->s));
  int n = N, base = 100, k = 1000;
  void *fill_args[] = {&a, &n, &base};
  void *add_args[] = {&b, &c, &n, &k};
  CK(launch1(x, fill, x->s, fill_args));
  CK(t->cuMemcpyDtoDAsync(b, a, N * sizeof(int), x->s));
  CK(launch1(x, add, x->s, add_args));
  int out[N];
  memset(out, 0, sizeof out);
  CK(t->cuMemcpyDtoHAsync(out, c, sizeof out, x->s));
  assert_int_equal(out[5], 0);
  CK(t->cuMemFreeAsync(a, x->s));
  CK(t->cuMemFreeAsync(b, x->s));
  CK(t->cuMemFreeAsync(c, x->s));
  CK(t->cuStreamSynchronize(x->s));
  for (int i = 0; i < N; i++) assert_int_equal(out[i], 1100 + i);
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* ---- graphs ------------------------------------------------------------------------------- */

static void test_graph_capture_and_replay(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "add", 4, k_add_params, k_add, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"add"}, 1);
  CUfunction add = get_fn(x, m, "add");
  enum { N = 8 };
  CUdeviceptr a, b;
  CK(t->cuMemAlloc(&a, N * sizeof(int)));
  CK(t->cuMemAlloc(&b, N * sizeof(int)));
  int in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = i;
  memset(out, 0, sizeof out);
  int n = N, k = 10;
  void *args[] = {&a, &b, &n, &k};

  CUstreamCaptureStatus st;
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  assert_int_equal(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                   CUDA_ERROR_ILLEGAL_STATE);
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CK(t->cuMemcpyHtoDAsync(a, in, sizeof in, x->s));
  CK(launch1(x, add, x->s, args));
  /* The capture's one dependency is the node just added (linear graphs): launch chains learn
   * each fire's kernel node this way. Edge data is not asked. */
  cuuint64_t cap_id = 0;
  CUgraph cap_graph = NULL;
  const CUgraphNode *deps = NULL;
  size_t num_deps = 0;
  CK(t->cuStreamGetCaptureInfo(x->s, &st, &cap_id, &cap_graph, &deps, NULL, &num_deps));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(num_deps, 1);
  assert_non_null(deps);
  assert_non_null(cap_graph);
  assert_true(cap_id != 0);
  CUgraphNode launched = deps[0];
  CK(t->cuMemcpyDtoHAsync(out, b, sizeof out, x->s));
  CUgraph g;
  CK(t->cuStreamEndCapture(x->s, &g));
  CK(t->cuStreamGetCaptureInfo(x->s, &st, NULL, NULL, NULL, NULL, NULL));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0); /* captured, not queued */
  size_t num = 0;
  CK(t->cuGraphGetNodes(g, NULL, &num));
  assert_int_equal(num, 3);
  CUgraphNode nodes[4];
  num = 4;
  CK(t->cuGraphGetNodes(g, nodes, &num));
  assert_int_equal(num, 3);
  assert_null(nodes[3]);
  assert_ptr_equal(nodes[1], launched);

  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphUpload(ge, x->s));
  CK(t->cuGraphLaunch(ge, x->s));
  assert_int_equal(out[3], 0);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 13);
  /* Replay reads the host source again and reuses the captured argument values. */
  in[3] = 100;
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 110);
  /* Rebind the kernel node's arguments. */
  int k2 = 1000;
  void *args2[] = {&a, &b, &n, &k2};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = add;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 32;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args2;
  CK(t->cuGraphExecKernelNodeSetParams(ge, nodes[1], &p));
  assert_int_equal(t->cuGraphExecKernelNodeSetParams(ge, nodes[0], &p), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 1100);

  /* Update: a graph of another shape is refused; one of the same shape is taken. */
  CUgraph g2;
  CK(t->cuGraphCreate(&g2, 0));
  CUgraphNode kn;
  CK(t->cuGraphAddKernelNode(&kn, g2, NULL, 0, &p));
  CUgraphExecUpdateResultInfo info;
  assert_int_equal(t->cuGraphExecUpdate(ge, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CK(t->cuGraphExecUpdate(ge, g, &info));
  assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 110);

  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuGraphDestroy(g2));
  assert_int_equal(t->cuGraphDestroy(g2), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFree(a));
  CK(t->cuMemFree(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_graph_built_by_hand(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "fill", 3, k_fill_params, k_fill, NULL);
  t4a_fake_register_kernel(x->fake, "add", 4, k_add_params, k_add, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"fill", "add"}, 2);
  CUdeviceptr a, b;
  CK(t->cuMemAlloc(&a, 16));
  CK(t->cuMemAlloc(&b, 16));
  int n = 4, base = 1, k = 2;
  void *fa[] = {&a, &n, &base};
  void *aa[] = {&a, &b, &n, &k};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraph g;
  CK(t->cuGraphCreate(&g, 0));
  assert_int_equal(t->cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode n1, n2;
  p.func = get_fn(x, m, "fill");
  p.kernelParams = fa;
  CK(t->cuGraphAddKernelNode(&n1, g, NULL, 0, &p));
  p.func = get_fn(x, m, "add");
  p.kernelParams = aa;
  CK(t->cuGraphAddKernelNode(&n2, g, &n1, 1, &p));
  CUgraph other;
  CK(t->cuGraphCreate(&other, 0));
  CUgraphNode n3;
  assert_int_equal(t->cuGraphAddKernelNode(&n3, other, &n1, 1, &p), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuGraphDestroy(other));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphLaunch(ge, x->s));
  int out[4] = {0};
  CK(t->cuMemcpyDtoHAsync(out, b, sizeof out, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[0], 3);
  assert_int_equal(out[3], 6);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.graphs, 1);
  assert_int_equal(live.graph_execs, 1);
  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuMemFree(a));
  CK(t->cuMemFree(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_capture_rules(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 64));
  CUgraph g;
  /* A sync of the capturing stream is illegal and breaks the capture. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(t->cuMemsetD8Async(d, 1, 64, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus st;
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(t->cuMemsetD8Async(d, 1, 64, x->s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_ILLEGAL_STATE);

  /* An unsafe call during a global capture fails and breaks it. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr e;
  assert_int_equal(t->cuMemAlloc(&e, 8), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  /* ... but not during a relaxed one. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(t->cuMemAlloc(&e, 8));
  CK(t->cuMemFree(e));
  /* Stream-ordered allocation nodes are not modelled. */
  assert_int_equal(t->cuMemAllocAsync(&e, 8, x->s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  /* Events recorded in a capture: waits inside it are fine, queries are not. */
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuStreamWaitEvent(x->s, ev, 0));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
  /* A captured free runs when the graph runs, once per launch. */
  CK(t->cuMemFreeAsync(d, x->s));
  CK(t->cuStreamEndCapture(x->s, &g));
  assert_non_null(t4a_fake_host_view(x->fake, d, 64));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_null(t4a_fake_host_view(x->fake, d, 64));
  CK(t->cuGraphLaunch(ge, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
}

/* ---- host memory -------------------------------------------------------------------------- */

static const size_t k_store_params[] = {8, 4};
static void k_store(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p;
  int v;
  memcpy(&p, params[0], 8);
  memcpy(&v, params[1], 4);
  int *dst = t4a_fake_deref(l, p, sizeof(int));
  if (dst != NULL) *dst = v;
}

static void test_host_memory(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "store", 2, k_store_params, k_store, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"store"}, 1);
  CUfunction store = get_fn(x, m, "store");

  /* Mapped pinned memory: the device writes, the host reads after a sync. */
  int *mapped;
  CK(t->cuMemHostAlloc((void **)&mapped, 4096,
                       CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr dm;
  CK(t->cuMemHostGetDevicePointer(&dm, mapped + 1, 0));
  assert_true(dm != (CUdeviceptr)(uintptr_t)(mapped + 1));
  int v = 77;
  void *args[] = {&dm, &v};
  CK(launch1(x, store, x->s, args));
  assert_int_equal(mapped[1], 0);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(mapped[1], 77);

  unsigned mt;
  CK(t->cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              (CUdeviceptr)(uintptr_t)mapped));
  assert_int_equal(mt, CU_MEMORYTYPE_HOST);
  CUdeviceptr dp;
  CK(t->cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                              (CUdeviceptr)(uintptr_t)(mapped + 1)));
  assert_int_equal(dp, dm);

  /* Not mapped: no device pointer. */
  void *plain;
  CK(t->cuMemHostAlloc(&plain, 100, CU_MEMHOSTALLOC_WRITECOMBINED));
  assert_int_equal(t->cuMemHostGetDevicePointer(&dp, plain, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemHostAlloc(&plain, 100, 0x80), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemFreeHost((char *)mapped + 4), CUDA_ERROR_INVALID_VALUE);

  /* Registration. */
  size_t page = 4096;
  unsigned char *reg = aligned_alloc(page, 2 * page);
  assert_non_null(reg);
  memset(reg, 0, 2 * page);
  CK(t->cuMemHostRegister(reg, 2 * page, CU_MEMHOSTREGISTER_DEVICEMAP));
  assert_int_equal(t->cuMemHostRegister(reg + page, page, 0),
                   CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  assert_int_equal(t->cuMemHostRegister(mapped, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  assert_int_equal(t->cuMemHostUnregister(reg + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  assert_int_equal(t->cuMemHostUnregister(mapped), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CUdeviceptr dr;
  CK(t->cuMemHostGetDevicePointer(&dr, reg, 0));
  void *args2[] = {&dr, &v};
  v = 5;
  CK(launch1(x, store, x->s, args2));
  CK(t->cuStreamSynchronize(x->s));
  int got;
  memcpy(&got, reg, sizeof got);
  assert_int_equal(got, 5);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.host_allocs, 2);
  assert_int_equal(live.host_registrations, 1);

  /* Unregistering while a kernel that uses the mapping is queued: a fault, not a wild write. */
  CK(launch1(x, store, x->s, args2));
  CK(t->cuMemHostUnregister(reg));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
  CK(t->cuDevicePrimaryCtxReset(0));
  x->s = NULL;
  free(reg);
  CK(t->cuDevicePrimaryCtxRelease(0));
  assert_true(t4a_fake_nothing_live(x->fake));
}

static void test_pinned_free_before_copy_runs(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 256));
  void *stage;
  CK(t->cuMemHostAlloc(&stage, 256, CU_MEMHOSTALLOC_PORTABLE));
  CK(t->cuMemcpyHtoDAsync(d, stage, 256, x->s));
  CK(t->cuMemFreeHost(stage)); /* the runtime forgot to wait for the copy */
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
}

static void test_pointer_attributes_and_pools(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CK(t->cuMemPoolCreate(&pool, &props));
  props.location.id = 4;
  CUmemoryPool bad;
  assert_int_equal(t->cuMemPoolCreate(&bad, &props), CUDA_ERROR_INVALID_DEVICE);
  cuuint64_t thr = UINT64_MAX, got = 0;
  CK(t->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  CK(t->cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &got));
  assert_true(got == UINT64_MAX);
  assert_int_equal(t->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &thr),
                   CUDA_ERROR_INVALID_VALUE);

  CUdeviceptr p;
  CK(t->cuMemAllocFromPoolAsync(&p, 1000, pool, x->s));
  CK(t->cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &got));
  assert_int_equal(got, 1000);
  assert_int_equal(p % 256, 0);
  CUcontext c;
  CK(t->cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p + 10));
  assert_ptr_equal(c, x->ctx);
  unsigned mt;
  CK(t->cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  assert_int_equal(mt, CU_MEMORYTYPE_DEVICE);
  CUdeviceptr dp;
  CK(t->cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 4));
  assert_int_equal(dp, p + 4);
  int ord = -1;
  CK(t->cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  assert_int_equal(ord, 0);
  CUmemoryPool pp;
  CK(t->cuPointerGetAttribute(&pp, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  assert_ptr_equal(pp, pool);
  assert_int_equal(t->cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 1000),
                   CUDA_ERROR_INVALID_VALUE);
  int local;
  assert_int_equal(t->cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                            (CUdeviceptr)(uintptr_t)&local),
                   CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr s;
  CK(t->cuMemAlloc(&s, 8));
  CK(t->cuPointerGetAttribute(&pp, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, s));
  assert_null(pp);
  CK(t->cuMemFree(s));

  /* A pool destroyed with an allocation outstanding goes away once the allocation does. */
  CK(t->cuMemPoolDestroy(pool));
  assert_int_equal(t->cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_HANDLE);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.pools, 0);
  assert_int_equal(live.device_allocs, 1);
  CK(t->cuMemFreeAsync(p, x->s));
  CK(t->cuStreamSynchronize(x->s));
  fx_clean(x);
}

/* ---- lifetimes ---------------------------------------------------------------------------- */

static void test_stream_destroy_lets_work_finish(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  char in[8] = "1234567", out[8] = {0};
  CK(t->cuMemcpyHtoDAsync(d, in, 8, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 8, x->s));
  CK(t->cuStreamDestroy(x->s));
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_INVALID_HANDLE);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.streams, 0);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 2);
  assert_int_equal(t4a_fake_progress(x->fake), 2);
  assert_string_equal(out, "1234567");
  x->s = NULL;
  CK(t->cuMemFree(d));
  fx_clean(x);
}

static void test_event_timing_and_stream_attributes(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent a, b, nt;
  CK(t->cuEventCreate(&a, 0));
  CK(t->cuEventCreate(&b, 0));
  CK(t->cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
  assert_int_equal(t->cuEventCreate(&nt, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  float ms;
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  CK(t->cuEventRecord(a, x->s));
  CK(t->cuMemsetD8Async(d, 0, 8, x->s));
  CK(t->cuEventRecord(b, x->s));
  CK(t->cuEventRecord(nt, x->s));
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
  CK(t->cuEventSynchronize(b));
  CK(t->cuEventElapsedTime(&ms, a, b));
  assert_true(ms > 0.0f);
  assert_int_equal(t->cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);

  CUstreamAttrValue v;
  memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)d;
  v.accessPolicyWindow.num_bytes = 8;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CK(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  CUstreamAttrValue back;
  assert_int_equal(t4a_fake_stream_attr(x->fake, x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                        &back),
                   1);
  assert_true(back.accessPolicyWindow.hitRatio == 0.5f);
  v.accessPolicyWindow.hitRatio = 1.5f;
  assert_int_equal(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);
  v.accessPolicyWindow.hitRatio = 1.0f;
  v.accessPolicyWindow.num_bytes = (size_t)1 << 40;
  assert_int_equal(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);

  CUcontext sc;
  CK(t->cuStreamGetCtx(x->s, &sc));
  assert_ptr_equal(sc, x->ctx);
  CUstream prio;
  CK(t->cuStreamCreateWithPriority(&prio, CU_STREAM_NON_BLOCKING, -100));
  assert_int_equal(t->cuStreamCreate(&prio, 0x10), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamDestroy(prio));
  CK(t->cuEventDestroy(a));
  CK(t->cuEventDestroy(b));
  CK(t->cuEventDestroy(nt));
  assert_int_equal(t->cuEventDestroy(nt), CUDA_ERROR_INVALID_HANDLE);
  CK(t->cuMemFree(d));
  CK(t->cuCtxSynchronize());
  fx_clean(x);
}

/* A kernel (a host function here) that synchronizes a stream: on a GPU this hangs when the
 * stream needs the kernel itself; the fake reports CUDA_ERROR_ILLEGAL_STATE instead. */
typedef struct reentry {
  const t4a_driver_table *t;
  CUstream s;
  CUresult r;
} reentry;
static void k_sync_stream(t4a_fake_launch *l, void **params, void *user) {
  (void)l;
  (void)params;
  reentry *re = user;
  re->r = re->t->cuStreamSynchronize(re->s);
}

static void test_wait_cycles_are_reported(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  reentry re = {t, x->s, CUDA_SUCCESS};
  t4a_fake_register_kernel(x->fake, "sync_stream", 0, NULL, k_sync_stream, &re);
  CUmodule m = load_kernels(x, (const char *const[]){"sync_stream"}, 1);
  CUfunction f = get_fn(x, m, "sync_stream");
  /* The kernel waits for its own stream. */
  CK(launch1(x, f, x->s, NULL));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(re.r, CUDA_ERROR_ILLEGAL_STATE);
  /* The kernel waits for stream b, which waits for an event recorded after the kernel. */
  CUstream b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  re.s = b;
  re.r = CUDA_SUCCESS;
  CK(launch1(x, f, x->s, NULL));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuStreamWaitEvent(b, ev, 0));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(re.r, CUDA_ERROR_ILLEGAL_STATE);
  CK(t->cuStreamSynchronize(b)); /* the event completed once the kernel returned */
  CK(t->cuEventDestroy(ev));
  CK(t->cuStreamDestroy(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* Launches of one executable graph are ordered, even on different streams. */
static void test_graph_launches_are_ordered_across_streams(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  seen sn;
  memset(&sn, 0, sizeof sn);
  t4a_fake_register_kernel(x->fake, "seen", 1, k_seen_params, k_seen, &sn);
  CUmodule m = load_kernels(x, (const char *const[]){"seen"}, 1);
  int64_t arg = 3;
  void *args[] = {&arg};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = get_fn(x, m, "seen");
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  CUgraph g;
  CK(t->cuGraphCreate(&g, 0));
  CUgraphNode node;
  CK(t->cuGraphAddKernelNode(&node, g, NULL, 0, &p));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CUstream b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuGraphLaunch(ge, b));
  CK(t->cuStreamSynchronize(b));
  assert_int_equal(sn.runs, 2);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuStreamDestroy(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* Many threads, each with its own stream and buffers, share the one lock. */
typedef struct worker_arg {
  const t4a_driver_table *t;
  CUcontext ctx;
  int id;
  int ok;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg *w = p;
  const t4a_driver_table *t = w->t;
  if (t->cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS) return NULL;
  CUstream s;
  if (t->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  int good = 1;
  for (int round = 0; round < 50 && good; round++) {
    CUdeviceptr d;
    int in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = w->id * 1000 + round * 16 + i;
    good = t->cuMemAllocAsync(&d, sizeof in, s) == CUDA_SUCCESS &&
           t->cuMemcpyHtoDAsync(d, in, sizeof in, s) == CUDA_SUCCESS &&
           t->cuMemcpyDtoHAsync(out, d, sizeof out, s) == CUDA_SUCCESS &&
           t->cuMemFreeAsync(d, s) == CUDA_SUCCESS && t->cuStreamSynchronize(s) == CUDA_SUCCESS &&
           memcmp(in, out, sizeof in) == 0;
  }
  w->ok = good && t->cuStreamDestroy(s) == CUDA_SUCCESS;
  t->cuCtxSetCurrent(NULL);
  return NULL;
}

static void test_many_threads(void **state) {
  fx *x = *state;
  enum { THREADS = 8 };
  pthread_t th[THREADS];
  worker_arg w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_arg){x->t, x->ctx, i, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_true(w[i].ok);
  }
  fx_clean(x);
}

static void test_bad_arguments_do_not_crash(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  assert_int_equal(t->cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemAlloc(NULL, 8), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemGetInfo(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuStreamDestroy((CUstream)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuEventRecord((CUevent)(uintptr_t)0xdeadbeef, x->s),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuStreamWaitEvent(x->s, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuMemcpyHtoDAsync(0, "x", 1, x->s), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  assert_int_equal(t->cuMemcpyHtoDAsync(d, NULL, 1, x->s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemcpyDtoHAsync((void *)(uintptr_t)d, d, 1, x->s),
                   CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemcpyHtoDAsync(d, "x", 0, x->s)); /* zero bytes: nothing to do */
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  /* A stream of the context passed where a handle of another kind is expected. */
  assert_int_equal(t->cuEventQuery((CUevent)x->s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuModuleUnload((CUmodule)x->ctx), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuGraphLaunch(NULL, x->s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, d),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuMemPoolSetAccess(NULL, NULL, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuFuncGetParamInfo(NULL, 0, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuLaunchKernelEx(NULL, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuGraphGetNodes(NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuStreamEndCapture(x->s, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_null(t4a_fake_host_view(x->fake, d, 9));
  assert_non_null(t4a_fake_host_view(x->fake, d, 8));
  CK(t->cuMemFree(d));
  fx_clean(x);
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

/* cuMemAllocAsync is an operation in its stream: the address comes back at once, the block is
 * valid once the operation ran. */
static void test_stream_ordered_alloc_is_an_operation(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUstream b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr y;
  CK(t->cuMemAllocAsync(&y, 64, x->s));
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  assert_non_null(t4a_fake_host_view(x->fake, y, 64)); /* the test's peek sees it already */
  /* Ordered through an event: fine. Syncing b runs x->s up to the record, allocation included. */
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuStreamWaitEvent(b, ev, 0));
  CK(t->cuMemsetD8Async(y, 5, 64, b));
  CK(t->cuEventRecord(ev, b));
  CK(t->cuStreamWaitEvent(x->s, ev, 0));
  CK(t->cuMemFreeAsync(y, x->s));
  CK(t->cuStreamSynchronize(b));
  CK(t->cuStreamSynchronize(x->s));
  /* Ordered through the host: a sync of the allocating stream, then work elsewhere. */
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CK(t->cuMemPoolCreate(&pool, &props));
  CUdeviceptr z;
  CK(t->cuMemAllocFromPoolAsync(&z, 64, pool, x->s));
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuMemsetD8Async(z, 6, 64, b));
  CK(t->cuStreamSynchronize(b));
  CK(t->cuMemFreeAsync(z, x->s));
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuMemPoolDestroy(pool));
  /* Ordered after an event that completed without the host seeing it (the work ran through
   * t4a_fake_progress): the wait still orders b, idle or busy. */
  CUdeviceptr w, v;
  CK(t->cuMemAllocAsync(&w, 64, x->s));
  CK(t->cuMemAllocAsync(&v, 64, b));
  CK(t->cuEventRecord(ev, x->s));
  assert_int_equal(t4a_fake_progress(x->fake), 3);
  CK(t->cuStreamWaitEvent(b, ev, 0)); /* b is idle: joined at once */
  CK(t->cuMemsetD8Async(w, 7, 64, b));
  CK(t->cuMemAllocAsync(&y, 64, x->s));
  CK(t->cuEventRecord(ev, x->s));
  t4a_fake_progress(x->fake);
  CK(t->cuMemsetD8Async(v, 1, 64, b));
  CK(t->cuStreamWaitEvent(b, ev, 0)); /* b is busy: a wait operation, runnable at once */
  CK(t->cuMemsetD8Async(y, 8, 64, b));
  CK(t->cuEventRecord(ev, b));
  CK(t->cuStreamWaitEvent(x->s, ev, 0));
  CK(t->cuMemFreeAsync(w, x->s));
  CK(t->cuMemFreeAsync(y, x->s));
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuMemFreeAsync(v, b));
  CK(t->cuStreamSynchronize(b));
  assert_int_equal(t4a_fake_ordering_violations(x->fake), 0);

  /* Not ordered: b touches the block before its allocation ran. */
  CUdeviceptr u;
  CK(t->cuMemAllocAsync(&u, 64, x->s));
  CK(t->cuMemsetD8Async(u, 9, 64, b));
  assert_int_equal(t->cuStreamSynchronize(b), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_ordering_violations(x->fake), 1);
  assert_int_equal(t4a_fake_sticky(x->fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
}

typedef enum { RUN_SYNC_A_FIRST, RUN_SYNC_B_FIRST, RUN_CTX_SYNC, RUN_PROGRESS } run_how;

/* Allocates X on stream A, fills it on stream B, frees it on A. ordering: 0 no waits, 1 only B
 * waits for the allocation, 2 both directions waited for. Returns the violations counted. */
static uint64_t alloc_fill_free(t4a_fake_progress_order order, uint64_t seed, run_how how,
                                int ordering, CUresult *sticky) {
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.progress_order = order;
  o.progress_seed = seed;
  o.query_policy = T4A_FAKE_QUERY_NEVER;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUstream a = x.s, b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e1, e2;
  CK(t->cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 256, a));
  if (ordering >= 1) {
    CK(t->cuEventRecord(e1, a));
    CK(t->cuStreamWaitEvent(b, e1, 0));
  }
  CK(t->cuMemsetD8Async(d, 0x5A, 256, b));
  if (ordering >= 2) {
    CK(t->cuEventRecord(e2, b));
    CK(t->cuStreamWaitEvent(a, e2, 0));
  }
  CK(t->cuMemFreeAsync(d, a));
  switch (how) {
    case RUN_SYNC_A_FIRST:
      (void)t->cuStreamSynchronize(a);
      (void)t->cuStreamSynchronize(b);
      break;
    case RUN_SYNC_B_FIRST:
      (void)t->cuStreamSynchronize(b);
      (void)t->cuStreamSynchronize(a);
      break;
    case RUN_CTX_SYNC:
      (void)t->cuCtxSynchronize();
      break;
    case RUN_PROGRESS:
      t4a_fake_progress(x.fake);
      break;
  }
  /* (After a fault the context refuses further syncs: work may be left queued.) */
  *sticky = t4a_fake_sticky(x.fake, 0);
  uint64_t n = t4a_fake_ordering_violations(x.fake);
  t4a_fake_destroy(x.fake);
  return n;
}

/* The reviewer's demo: a missing cross-stream wait fails whichever stream runs first. */
static void test_missing_cross_stream_wait_fails_in_every_order(void **state) {
  (void)state;
  static const t4a_fake_progress_order orders[] = {
      T4A_FAKE_ORDER_CREATION, T4A_FAKE_ORDER_REVERSE, T4A_FAKE_ORDER_RANDOM};
  for (size_t oi = 0; oi < sizeof orders / sizeof orders[0]; oi++) {
    for (uint64_t seed = 1; seed <= (orders[oi] == T4A_FAKE_ORDER_RANDOM ? 8u : 1u); seed++) {
      for (int how = RUN_SYNC_A_FIRST; how <= RUN_PROGRESS; how++) {
        for (int ordering = 0; ordering <= 2; ordering++) {
          CUresult sticky;
          uint64_t n = alloc_fill_free(orders[oi], seed, (run_how)how, ordering, &sticky);
          if (ordering < 2) {
            if (n == 0 || sticky != CUDA_ERROR_ILLEGAL_ADDRESS) {
              fail_msg("order %d seed %llu run %d ordering %d: %llu violations, sticky %d",
                       (int)orders[oi], (unsigned long long)seed, how, ordering,
                       (unsigned long long)n, (int)sticky);
            }
          } else if (n != 0 || sticky != CUDA_SUCCESS) {
            fail_msg("order %d seed %llu run %d, fully ordered: %llu violations, sticky %d",
                     (int)orders[oi], (unsigned long long)seed, how, (unsigned long long)n,
                     (int)sticky);
          }
        }
      }
    }
  }
}

/* A stream-ordered free racing another stream's access to cuMemAlloc memory (valid from the
 * start): detected whether the access or the free runs first. */
static void test_free_racing_an_access(void **state) {
  (void)state;
  for (int b_first = 0; b_first <= 1; b_first++) {
    fx x;
    assert_int_equal(fx_open(&x, NULL), 0);
    const t4a_driver_table *t = x.t;
    CUstream b;
    CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CK(t->cuMemAlloc(&d, 128));
    int host[32];
    CK(t->cuMemcpyDtoHAsync(host, d, sizeof host, b));
    CK(t->cuMemFreeAsync(d, x.s));
    CUstream first = b_first ? b : x.s, second = b_first ? x.s : b;
    (void)t->cuStreamSynchronize(first);
    (void)t->cuStreamSynchronize(second);
    assert_int_equal(t4a_fake_ordering_violations(x.fake), 1);
    assert_int_equal(t4a_fake_sticky(x.fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    t4a_fake_destroy(x.fake);
  }
  /* The allocation ran, but the access on another stream is not ordered after it. */
  fx x;
  assert_int_equal(fx_open(&x, NULL), 0);
  CUstream b;
  CK(x.t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d;
  CK(x.t->cuMemAllocAsync(&d, 64, x.s));
  CK(x.t->cuMemsetD8Async(d, 0, 64, b));
  assert_int_equal(t4a_fake_step(x.fake, x.s), 1); /* the allocation */
  assert_int_equal(t4a_fake_step(x.fake, b), 1);   /* the fill */
  assert_int_equal(t4a_fake_ordering_violations(x.fake), 1);
  assert_int_equal(t4a_fake_sticky(x.fake, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  t4a_fake_destroy(x.fake);

  /* A plain use after a free in the same stream is an illegal address, not a race. */
  assert_int_equal(fx_open(&x, NULL), 0);
  CK(x.t->cuMemAllocAsync(&d, 64, x.s));
  CK(x.t->cuMemFreeAsync(d, x.s));
  CK(x.t->cuMemsetD8Async(d, 0, 64, x.s));
  assert_int_equal(x.t->cuStreamSynchronize(x.s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_ordering_violations(x.fake), 0);
  t4a_fake_destroy(x.fake);
}

/* tag(int id): appends id to the log in user data. */
typedef struct tag_log {
  int v[32];
  int n;
} tag_log;
static const size_t k_tag_params[] = {4};
static void k_tag(t4a_fake_launch *l, void **params, void *user) {
  (void)l;
  tag_log *log = user;
  int id;
  memcpy(&id, params[0], 4);
  if (log->n < 32) log->v[log->n++] = id;
}

/* Launches tag(10 s + k) for k = 0, 1 on each of the fixture's stream and two more. */
static void tag_three_streams(fx *x, CUfunction f, CUstream s[3]) {
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++) {
      int id = 10 * (i + 1) + k;
      void *args[] = {&id};
      CK(launch1(x, f, s[i], args));
    }
  }
}

static void test_progress_order_option(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  tag_log log;
  memset(&log, 0, sizeof log);
  t4a_fake_register_kernel(x->fake, "tag", 1, k_tag_params, k_tag, &log);
  CUmodule m = load_kernels(x, (const char *const[]){"tag"}, 1);
  CUfunction f = get_fn(x, m, "tag");
  CUstream s[3] = {x->s, NULL, NULL};
  CK(t->cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
  CK(t->cuStreamCreate(&s[2], CU_STREAM_NON_BLOCKING));

  /* Creation order (the default; set anyway, T4A_FAKE_PROGRESS_ORDER may override the default):
   * each stream as far as it goes, oldest first. */
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_CREATION, 0);
  tag_three_streams(x, f, s);
  assert_int_equal(t4a_fake_progress(x->fake), 6);
  static const int creation[6] = {10, 11, 20, 21, 30, 31};
  assert_memory_equal(log.v, creation, sizeof creation);

  /* Reverse: newest first, for t4a_fake_progress and for a context sync alike. */
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_REVERSE, 0);
  log.n = 0;
  tag_three_streams(x, f, s);
  t4a_fake_progress(x->fake);
  static const int reverse[6] = {30, 31, 20, 21, 10, 11};
  assert_memory_equal(log.v, reverse, sizeof reverse);
  log.n = 0;
  tag_three_streams(x, f, s);
  CK(t->cuCtxSynchronize());
  assert_memory_equal(log.v, reverse, sizeof reverse);

  /* Random: single operations interleaved, each stream still in order; a seed repeats. */
  int first_run[6];
  int differs_from_creation = 0;
  for (uint64_t seed = 1; seed <= 16; seed++) {
    for (int round = 0; round < 2; round++) {
      t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_RANDOM, seed);
      log.n = 0;
      tag_three_streams(x, f, s);
      assert_int_equal(t4a_fake_progress(x->fake), 6);
      assert_int_equal(log.n, 6);
      for (int i = 0; i < 3; i++) {
        int at0 = -1, at1 = -1;
        for (int k = 0; k < 6; k++) {
          if (log.v[k] == 10 * (i + 1)) at0 = k;
          if (log.v[k] == 10 * (i + 1) + 1) at1 = k;
        }
        assert_true(at0 >= 0 && at1 > at0);
      }
      if (round == 0) {
        memcpy(first_run, log.v, sizeof first_run);
        differs_from_creation |= memcmp(log.v, creation, sizeof creation) != 0;
      } else {
        assert_memory_equal(log.v, first_run, sizeof first_run);
      }
    }
  }
  assert_true(differs_from_creation);
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_CREATION, 0);
  CK(t->cuStreamDestroy(s[1]));
  CK(t->cuStreamDestroy(s[2]));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* Requirement A2: portable versus context-bound pinned memory. */
static void test_host_alloc_flags_and_nonportable_pinned(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  char *np, *port, *mapped;
  CK(t->cuMemHostAlloc((void **)&np, 4096, 0));
  CK(t->cuMemHostAlloc((void **)&port, 4096, CU_MEMHOSTALLOC_PORTABLE));
  CK(t->cuMemHostAlloc((void **)&mapped, 4096,
                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED));
  size_t page = 4096;
  char *reg = aligned_alloc(page, page), *reg_port = aligned_alloc(page, page);
  assert_non_null(reg);
  assert_non_null(reg_port);
  memset(reg, 1, page);
  memset(reg_port, 2, page);
  CK(t->cuMemHostRegister(reg, page, 0));
  CK(t->cuMemHostRegister(reg_port, page, CU_MEMHOSTREGISTER_PORTABLE));

  unsigned fl = 99;
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, np + 100, &fl), 1);
  assert_int_equal(fl, 0);
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, port + 4095, &fl), 1);
  assert_int_equal(fl, CU_MEMHOSTALLOC_PORTABLE);
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, mapped, NULL), 1);
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, mapped, &fl), 1);
  assert_int_equal(fl, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED);
  fl = 99;
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, reg, &fl), 0); /* registered, not allocated */
  assert_int_equal(fl, 99);
  int local;
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, &local, &fl), 0);
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, NULL, &fl), 0);

  /* Uses on the pinning context's own stream are fine. */
  CUdeviceptr d0;
  CK(t->cuMemAlloc(&d0, 4096));
  CK(t->cuMemcpyHtoDAsync(d0, np, 4096, x.s));
  CK(t->cuMemcpyDtoHAsync(reg, d0, 4096, x.s));
  CK(t->cuStreamSynchronize(x.s));
  assert_int_equal(t4a_fake_nonportable_pinned_uses(x.fake), 0);

  /* On device 1's stream: non-portable memory of device 0's context is counted. */
  CUcontext c1;
  CUstream s1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d1;
  CK(t->cuMemAlloc(&d1, 4096));
  CK(t->cuMemcpyHtoDAsync(d1, np, 4096, s1));
  assert_int_equal(t4a_fake_nonportable_pinned_uses(x.fake), 1);
  CK(t->cuMemcpyHtoDAsync(d1, port, 4096, s1));
  CK(t->cuMemcpyHtoDAsync(d1, reg_port, 4096, s1));
  assert_int_equal(t4a_fake_nonportable_pinned_uses(x.fake), 1);
  CK(t->cuMemcpyDtoHAsync(np + 16, d1, 64, s1));
  CK(t->cuMemcpyAsync((CUdeviceptr)(uintptr_t)reg, d1, 64, s1));
  assert_int_equal(t4a_fake_nonportable_pinned_uses(x.fake), 3);
  CK(t->cuStreamSynchronize(s1));
  CK(t->cuMemFree(d1));
  CK(t->cuStreamDestroy(s1));
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuDevicePrimaryCtxRelease(1));

  CK(t->cuMemFreeHost(np));
  assert_int_equal(t4a_fake_host_alloc_flags(x.fake, np, &fl), 0);
  CK(t->cuMemFreeHost(port));
  CK(t->cuMemFreeHost(mapped));
  CK(t->cuMemHostUnregister(reg));
  CK(t->cuMemHostUnregister(reg_port));
  free(reg);
  free(reg_port);
  CK(t->cuMemFree(d0));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

static void test_stream_get_flags(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  /* In the catalogue at the version whose typedef exists (PFN_cuStreamGetFlags_v5050; the real
   * driver answers VERSION_NOT_SUFFICIENT for 2000). */
  int listed = 0;
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    if (strcmp(t4a_driver_entries[i].name, "cuStreamGetFlags") != 0) continue;
    listed = 1;
    assert_int_equal(t4a_driver_entries[i].version, 5050);
    assert_true(t4a_driver_entries[i].required);
  }
  assert_true(listed);
  unsigned fl = 99;
  CK(t->cuStreamGetFlags(x->s, &fl));
  assert_int_equal(fl, CU_STREAM_NON_BLOCKING);
  CUstream plain;
  CK(t->cuStreamCreateWithPriority(&plain, CU_STREAM_DEFAULT, -1));
  fl = 99;
  CK(t->cuStreamGetFlags(plain, &fl));
  assert_int_equal(fl, 0);
  fl = 99;
  CK(t->cuStreamGetFlags(NULL, &fl));
  assert_int_equal(fl, 0);
  CK(t->cuStreamGetFlags(CU_STREAM_PER_THREAD, &fl));
  assert_int_equal(fl, 0);
  assert_int_equal(t->cuStreamGetFlags(x->s, NULL), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamDestroy(plain));
  assert_int_equal(t->cuStreamGetFlags(plain, &fl), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t4a_fake_calls(x->fake, "cuStreamGetFlags"), 6);
  fx_clean(x);
}

/* vec(int n, float4 a, double d, double2 b) - float4 and double2 are 16-byte aligned. */
typedef struct vec_seen {
  int n;
  float a[4];
  double d;
  double b[2];
} vec_seen;
static const size_t k_vec_sizes[] = {4, 16, 8, 16};
static const size_t k_vec_aligns[] = {0, 16, 0, 16};
static void k_vec(t4a_fake_launch *l, void **params, void *user) {
  (void)l;
  vec_seen *v = user;
  memcpy(&v->n, params[0], 4);
  memcpy(v->a, params[1], 16);
  memcpy(&v->d, params[2], 8);
  memcpy(v->b, params[3], 16);
}

static void test_explicit_param_alignment(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  vec_seen seen_v;
  memset(&seen_v, 0, sizeof seen_v);
  t4a_fake_register_kernel_aligned(x->fake, "vec", 4, k_vec_sizes, k_vec_aligns, k_vec, &seen_v);
  t4a_fake_register_kernel_aligned(x->fake, "vec_default", 4, k_vec_sizes, NULL, NULL, NULL);
  static const size_t bad_align[] = {0, 12, 0, 16};
  t4a_fake_register_kernel_aligned(x->fake, "vec_bad", 4, k_vec_sizes, bad_align, NULL, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"vec", "vec_default", "vec_bad"}, 3);
  CUfunction f = get_fn(x, m, "vec");
  static const size_t want[4] = {0, 16, 32, 48};
  size_t off, size;
  for (size_t i = 0; i < 4; i++) {
    CK(t->cuFuncGetParamInfo(f, i, &off, &size));
    assert_int_equal(off, want[i]);
    assert_int_equal(size, k_vec_sizes[i]);
  }
  static const size_t want_default[4] = {0, 8, 24, 32}; /* the size rule caps at 8 */
  for (size_t i = 0; i < 4; i++) {
    CK(t->cuFuncGetParamInfo(get_fn(x, m, "vec_default"), i, &off, NULL));
    assert_int_equal(off, want_default[i]);
  }
  assert_int_equal(t->cuFuncGetParamInfo(get_fn(x, m, "vec_bad"), 0, &off, &size),
                   CUDA_ERROR_INVALID_VALUE); /* refused: not registered */

  /* Arguments land where the layout says, by pointer array and by packed buffer. */
  int n = 7;
  float a[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  double d = 5.5, b[2] = {6.25, 7.75};
  void *args[] = {&n, a, &d, b};
  CK(launch1(x, f, x->s, args));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(seen_v.n, 7);
  assert_true(seen_v.a[3] == 4.0f && seen_v.d == 5.5 && seen_v.b[1] == 7.75);
  unsigned char packed[64];
  memset(packed, 0, sizeof packed);
  n = 8;
  memcpy(packed + 0, &n, 4);
  memcpy(packed + 16, a, 16);
  d = 9.0;
  memcpy(packed + 32, &d, 8);
  memcpy(packed + 48, b, 16);
  size_t packed_size = sizeof packed;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  CK(t->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, x->s, NULL, extra));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(seen_v.n, 8);
  assert_true(seen_v.a[0] == 1.0f && seen_v.d == 9.0 && seen_v.b[0] == 6.25);
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* A real sm_90 CUBIN: one kernel and one __noinline__ device function, compiled with separate
 * compilation so that the device function is a GLOBAL STT_FUNC in its own .text section:
 *
 *   // t4a_fake_cubin.cu
 *   __device__ __noinline__ int helper(int v) { return v * 3 + 1; }
 *   extern "C" __global__ void kern(int *p) { *p = helper(*p); }
 *
 *   nvcc -cubin -rdc=true -arch=sm_90 -o t4a_fake_cubin.cubin t4a_fake_cubin.cu   # CUDA 13.0
 *   python3 -c "import sys; b=open(sys.argv[1],'rb').read(); [print('    ' + ', '.join(
 *       '0x%02x' % c for c in b[i:i+16]) + ',') for i in range(0, len(b), 16)]" \
 *       t4a_fake_cubin.cubin
 *
 * readelf -s: kern is FUNC GLOBAL with st_other 0x10 (the entry mark) in .text.kern; _Z6helperi
 * is FUNC GLOBAL with st_other 0 in .text._Z6helperi (with its own .nv.info._Z6helperi). On the
 * H200 (580.159.04) cuModuleGetFunctionCount says 1; cuModuleGetFunction finds both, but
 * _Z6helperi has no parameter info (INVALID_VALUE) and its launch fails with 701. */
static const unsigned char k_real_cubin[] = {
    0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0x41, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0xbe, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x98, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x5a, 0x00, 0x06, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x12, 0x00, 0x01, 0x00,
    0x00, 0x2e, 0x73, 0x68, 0x73, 0x74, 0x72, 0x74, 0x61, 0x62, 0x00, 0x2e, 0x73, 0x74, 0x72, 0x74,
    0x61, 0x62, 0x00, 0x2e, 0x73, 0x79, 0x6d, 0x74, 0x61, 0x62, 0x00, 0x2e, 0x73, 0x79, 0x6d, 0x74,
    0x61, 0x62, 0x5f, 0x73, 0x68, 0x6e, 0x64, 0x78, 0x00, 0x2e, 0x6e, 0x6f, 0x74, 0x65, 0x2e, 0x6e,
    0x76, 0x2e, 0x74, 0x6b, 0x69, 0x6e, 0x66, 0x6f, 0x00, 0x2e, 0x6e, 0x6f, 0x74, 0x65, 0x2e, 0x6e,
    0x76, 0x2e, 0x63, 0x75, 0x69, 0x6e, 0x66, 0x6f, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x69, 0x6e, 0x66,
    0x6f, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x63, 0x6f, 0x6d, 0x70, 0x61, 0x74, 0x00, 0x2e, 0x74, 0x65,
    0x78, 0x74, 0x2e, 0x5f, 0x5a, 0x36, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72, 0x69, 0x00, 0x2e, 0x6e,
    0x76, 0x2e, 0x69, 0x6e, 0x66, 0x6f, 0x2e, 0x5f, 0x5a, 0x36, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72,
    0x69, 0x00, 0x2e, 0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x6e, 0x76,
    0x2e, 0x69, 0x6e, 0x66, 0x6f, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x73,
    0x68, 0x61, 0x72, 0x65, 0x64, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x61,
    0x2e, 0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x2e,
    0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x64, 0x65, 0x62, 0x75, 0x67,
    0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x2e, 0x64, 0x65, 0x62, 0x75,
    0x67, 0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x61, 0x2e, 0x64, 0x65,
    0x62, 0x75, 0x67, 0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x63, 0x61,
    0x6c, 0x6c, 0x67, 0x72, 0x61, 0x70, 0x68, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x70, 0x72, 0x6f, 0x74,
    0x6f, 0x74, 0x79, 0x70, 0x65, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x63, 0x6f, 0x6e, 0x73, 0x74, 0x61,
    0x6e, 0x74, 0x30, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x23, 0x69, 0x69, 0x00, 0x2e, 0x73,
    0x68, 0x73, 0x74, 0x72, 0x74, 0x61, 0x62, 0x00, 0x2e, 0x73, 0x74, 0x72, 0x74, 0x61, 0x62, 0x00,
    0x2e, 0x73, 0x79, 0x6d, 0x74, 0x61, 0x62, 0x00, 0x2e, 0x73, 0x79, 0x6d, 0x74, 0x61, 0x62, 0x5f,
    0x73, 0x68, 0x6e, 0x64, 0x78, 0x00, 0x2e, 0x6e, 0x6f, 0x74, 0x65, 0x2e, 0x6e, 0x76, 0x2e, 0x74,
    0x6b, 0x69, 0x6e, 0x66, 0x6f, 0x00, 0x2e, 0x6e, 0x6f, 0x74, 0x65, 0x2e, 0x6e, 0x76, 0x2e, 0x63,
    0x75, 0x69, 0x6e, 0x66, 0x6f, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x69, 0x6e, 0x66, 0x6f, 0x00, 0x2e,
    0x6e, 0x76, 0x2e, 0x63, 0x6f, 0x6d, 0x70, 0x61, 0x74, 0x00, 0x2e, 0x74, 0x65, 0x78, 0x74, 0x2e,
    0x5f, 0x5a, 0x36, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72, 0x69, 0x00, 0x5f, 0x5f, 0x55, 0x44, 0x54,
    0x5f, 0x4f, 0x46, 0x46, 0x53, 0x45, 0x54, 0x00, 0x5f, 0x5f, 0x55, 0x46, 0x54, 0x5f, 0x4f, 0x46,
    0x46, 0x53, 0x45, 0x54, 0x00, 0x5f, 0x5f, 0x55, 0x46, 0x54, 0x5f, 0x43, 0x41, 0x4e, 0x4f, 0x4e,
    0x49, 0x43, 0x41, 0x4c, 0x00, 0x5f, 0x5f, 0x55, 0x44, 0x54, 0x5f, 0x43, 0x41, 0x4e, 0x4f, 0x4e,
    0x49, 0x43, 0x41, 0x4c, 0x00, 0x5f, 0x5f, 0x55, 0x46, 0x54, 0x00, 0x5f, 0x5f, 0x55, 0x44, 0x54,
    0x00, 0x5f, 0x5f, 0x55, 0x46, 0x54, 0x5f, 0x45, 0x4e, 0x44, 0x00, 0x5f, 0x5f, 0x55, 0x44, 0x54,
    0x5f, 0x45, 0x4e, 0x44, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x72, 0x65, 0x73, 0x65, 0x72, 0x76, 0x65,
    0x64, 0x53, 0x6d, 0x65, 0x6d, 0x2e, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x30, 0x00, 0x2e, 0x6e,
    0x76, 0x2e, 0x69, 0x6e, 0x66, 0x6f, 0x2e, 0x5f, 0x5a, 0x36, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72,
    0x69, 0x00, 0x2e, 0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x6e, 0x76,
    0x2e, 0x69, 0x6e, 0x66, 0x6f, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x73,
    0x68, 0x61, 0x72, 0x65, 0x64, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x61,
    0x2e, 0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x2e,
    0x74, 0x65, 0x78, 0x74, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x64, 0x65, 0x62, 0x75, 0x67,
    0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x2e, 0x64, 0x65, 0x62, 0x75,
    0x67, 0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x72, 0x65, 0x6c, 0x61, 0x2e, 0x64, 0x65,
    0x62, 0x75, 0x67, 0x5f, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x63, 0x61,
    0x6c, 0x6c, 0x67, 0x72, 0x61, 0x70, 0x68, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x70, 0x72, 0x6f, 0x74,
    0x6f, 0x74, 0x79, 0x70, 0x65, 0x00, 0x5f, 0x5a, 0x36, 0x68, 0x65, 0x6c, 0x70, 0x65, 0x72, 0x69,
    0x00, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x2e, 0x6e, 0x76, 0x2e, 0x63, 0x6f, 0x6e, 0x73, 0x74, 0x61,
    0x6e, 0x74, 0x30, 0x2e, 0x6b, 0x65, 0x72, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2d, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x3d, 0x00, 0x00, 0x00, 0x03, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x61, 0x00, 0x00, 0x00, 0x03, 0x00, 0x0f, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x72, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x8c, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9c, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xac, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb2, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xb8, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc2, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xcc, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf9, 0x00, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x41, 0x01, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x71, 0x01, 0x00, 0x00, 0x03, 0x00, 0x0b, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x7f, 0x01, 0x00, 0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8d, 0x01, 0x00, 0x00, 0x12, 0x00, 0x0f, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x98, 0x01, 0x00, 0x00, 0x12, 0x10, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x00, 0x00, 0x03, 0x00, 0x11, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x04, 0x7c, 0x94, 0x80, 0x80, 0x28, 0x0c, 0x81, 0x80, 0x80,
    0x28, 0x00, 0x08, 0xff, 0x81, 0x80, 0x28, 0x08, 0x81, 0x80, 0x80, 0x28, 0x08, 0x94, 0x80, 0x80,
    0x28, 0x08, 0x95, 0x80, 0x80, 0x28, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x24, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x81, 0x80, 0x80,
    0x28, 0x00, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x24, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x04, 0x7c,
    0xff, 0xff, 0xff, 0xff, 0x0f, 0x0c, 0x81, 0x80, 0x80, 0x28, 0x00, 0x08, 0xff, 0x81, 0x80, 0x28,
    0x08, 0x81, 0x80, 0x80, 0x28, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x2c, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x10, 0x00, 0x00,
    0x00, 0x0c, 0x81, 0x80, 0x80, 0x28, 0x00, 0x04, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x0c, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0xd0, 0x07, 0x00, 0x00, 0x4e, 0x56, 0x49, 0x44,
    0x49, 0x41, 0x20, 0x43, 0x6f, 0x72, 0x70, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x36, 0x00, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00,
    0x00, 0x70, 0x74, 0x78, 0x61, 0x73, 0x00, 0x43, 0x75, 0x64, 0x61, 0x20, 0x63, 0x6f, 0x6d, 0x70,
    0x69, 0x6c, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x20, 0x74, 0x6f, 0x6f, 0x6c, 0x73, 0x2c, 0x20, 0x72,
    0x65, 0x6c, 0x65, 0x61, 0x73, 0x65, 0x20, 0x31, 0x33, 0x2e, 0x30, 0x2c, 0x20, 0x56, 0x31, 0x33,
    0x2e, 0x30, 0x2e, 0x38, 0x38, 0x00, 0x42, 0x75, 0x69, 0x6c, 0x64, 0x20, 0x63, 0x75, 0x64, 0x61,
    0x5f, 0x31, 0x33, 0x2e, 0x30, 0x2e, 0x72, 0x31, 0x33, 0x2e, 0x30, 0x2f, 0x63, 0x6f, 0x6d, 0x70,
    0x69, 0x6c, 0x65, 0x72, 0x2e, 0x33, 0x36, 0x34, 0x32, 0x34, 0x37, 0x31, 0x34, 0x5f, 0x30, 0x00,
    0x2d, 0x61, 0x72, 0x63, 0x68, 0x20, 0x73, 0x6d, 0x5f, 0x39, 0x30, 0x20, 0x2d, 0x6d, 0x20, 0x36,
    0x34, 0x20, 0x2d, 0x63, 0x20, 0x20, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
    0xe8, 0x03, 0x00, 0x00, 0x4e, 0x56, 0x49, 0x44, 0x49, 0x41, 0x20, 0x43, 0x6f, 0x72, 0x70, 0x00,
    0x02, 0x00, 0x5a, 0x00, 0x82, 0x00, 0x00, 0x00, 0x04, 0x2f, 0x08, 0x00, 0x12, 0x00, 0x00, 0x00,
    0x18, 0x00, 0x00, 0x00, 0x04, 0x23, 0x08, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x11, 0x08, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x2f, 0x08, 0x00,
    0x11, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x04, 0x23, 0x08, 0x00, 0x11, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x04, 0x11, 0x08, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x09, 0x00, 0x00, 0x02, 0x02, 0x01, 0x00, 0x02, 0x05, 0x05, 0x00, 0x03, 0x07, 0x01, 0x01,
    0x02, 0x03, 0x00, 0x00, 0x02, 0x06, 0x01, 0x00, 0x04, 0x0b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x04, 0x37, 0x04, 0x00, 0x82, 0x00, 0x00, 0x00, 0x03, 0x50, 0x00, 0x00,
    0x03, 0x5f, 0x01, 0x01, 0x04, 0x36, 0x04, 0x00, 0x08, 0x00, 0x00, 0x00, 0x04, 0x37, 0x04, 0x00,
    0x82, 0x00, 0x00, 0x00, 0x04, 0x17, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xf0, 0x21, 0x00, 0x03, 0x50, 0x00, 0x00, 0x03, 0x1b, 0xff, 0x00, 0x03, 0x5f, 0x01, 0x01,
    0x04, 0x1c, 0x04, 0x00, 0x90, 0x00, 0x00, 0x00, 0x03, 0x19, 0x08, 0x00, 0x04, 0x0a, 0x08, 0x00,
    0x13, 0x00, 0x00, 0x00, 0x10, 0x02, 0x08, 0x00, 0x04, 0x36, 0x04, 0x00, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x12, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xfe, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xfd, 0xff, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x00, 0xfc, 0xff, 0xff, 0xff, 0x11, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4b, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x39, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x38, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00,
    0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x49, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xac, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x54, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x44, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x35, 0x74, 0x03, 0xff, 0x03, 0x00, 0x00, 0x00, 0xff, 0x01, 0x00, 0x00, 0x00, 0xd4, 0x0f, 0x00,
    0x24, 0x74, 0x04, 0x04, 0x01, 0x00, 0x00, 0x00, 0x03, 0x02, 0x8e, 0x07, 0x00, 0xe2, 0x0f, 0x00,
    0x50, 0x79, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x03, 0x00, 0xec, 0x0f, 0x00,
    0x47, 0x79, 0xfc, 0x00, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0x83, 0x03, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x82, 0x7b, 0x01, 0xff, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x30, 0x0e, 0x00,
    0x82, 0x7b, 0x04, 0xff, 0x00, 0x84, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x62, 0x0e, 0x00,
    0xb9, 0x7a, 0x24, 0x00, 0x00, 0x82, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0xe4, 0x0f, 0x00,
    0x81, 0x79, 0x04, 0x04, 0x24, 0x00, 0x00, 0x00, 0x00, 0x19, 0x1e, 0x0c, 0x00, 0x62, 0x23, 0x00,
    0x02, 0x78, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0xc4, 0x0f, 0x00,
    0x02, 0x78, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0xce, 0x1f, 0x00,
    0x43, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x03, 0x00, 0xea, 0x2f, 0x02,
    0x82, 0x7b, 0x02, 0xff, 0x00, 0x84, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x24, 0x0e, 0x00,
    0x86, 0x79, 0x00, 0x02, 0x04, 0x00, 0x00, 0x00, 0x24, 0x19, 0x10, 0x0c, 0x00, 0xe2, 0x1f, 0x00,
    0x4d, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x03, 0x00, 0xea, 0x0f, 0x00,
    0x47, 0x79, 0xfc, 0x00, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0x83, 0x03, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x18, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x0f, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xa9, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x60, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xca, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x10, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x39, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xb8, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x70,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xd8, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x52, 0x00, 0x00, 0x00, 0x86, 0x00, 0x00, 0x70,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x20, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x70,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x44, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x70,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x5c, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x44, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfa, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x70,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xa0, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x70,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xc8, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xab, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xd0, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe8, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x18, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5d, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x01, 0x00, 0x00, 0x64, 0x00, 0x00, 0x70,
    0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x80, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const size_t k_inc_params[] = {8};
static void k_inc(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p;
  memcpy(&p, params[0], 8);
  int *v = t4a_fake_deref(l, p, sizeof(int));
  if (v != NULL) *v = *v * 3 + 1;
}

static void test_real_cubin_kernels_and_device_functions(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  /* The driver reads images in place; keep the copy 8-byte aligned like a loaded file. */
  uint64_t image[(sizeof k_real_cubin + 7) / 8];
  memcpy(image, k_real_cubin, sizeof k_real_cubin);
  t4a_fake_register_kernel(x->fake, "kern", 1, k_inc_params, k_inc, NULL);
  t4a_fake_register_kernel(x->fake, "_Z6helperi", 1, k_inc_params, k_inc, NULL);
  CUmodule m;
  CK(t->cuModuleLoadData(&m, image));
  CUfunction kern = get_fn(x, m, "kern");
  size_t off = 99, size = 99;
  CK(t->cuFuncGetParamInfo(kern, 0, &off, &size));
  assert_int_equal(size, 8);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, sizeof(int)));
  int v = 4;
  CK(t->cuMemcpyHtoDAsync(d, &v, sizeof v, x->s));
  void *args[] = {&d};
  CK(launch1(x, kern, x->s, args));
  CK(t->cuMemcpyDtoHAsync(&v, d, sizeof v, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(v, 13);

  /* The device function: found by name, answers attributes, is not a kernel. */
  CUfunction helper = get_fn(x, m, "_Z6helperi");
  int regs = -1;
  CK(t->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, helper));
  assert_int_equal(t->cuFuncGetParamInfo(helper, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(launch1(x, helper, x->s, args), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  CK(t->cuStreamSynchronize(x->s)); /* not sticky */
  CUfunction none;
  assert_int_equal(t->cuModuleGetFunction(&none, m, "helper"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(t->cuModuleGetFunction(&none, m, "$kern$_Z6helperi"), CUDA_ERROR_NOT_FOUND);
  CK(t->cuMemFree(d));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_driver_from_table),
      cmocka_unit_test(test_not_initialized_and_error_names),
      cmocka_unit_test(test_devices),
      cmocka_unit_test_setup_teardown(test_primary_ctx_refcount_and_stale_handles, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_with_live_objects_leaks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reset_reclaims, setup, teardown),
      cmocka_unit_test_setup_teardown(test_current_context_is_per_thread, setup, teardown),
      cmocka_unit_test(test_ctx_limits_and_peer),
      cmocka_unit_test(test_foreign_event_observations),
      cmocka_unit_test_setup_teardown(test_copies_run_in_stream_order_at_run_time, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cross_stream_event_wait, setup, teardown),
      cmocka_unit_test(test_cross_device_wait_and_pool_access),
      cmocka_unit_test_setup_teardown(test_illegal_address_from_copy_is_sticky, setup, teardown),
      cmocka_unit_test_setup_teardown(test_illegal_address_from_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_then_use, setup, teardown),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test_setup_teardown(test_injection, setup, teardown),
      cmocka_unit_test_setup_teardown(test_modules_all_formats, setup, teardown),
      cmocka_unit_test_setup_teardown(test_param_info_matches_h200, setup, teardown),
      cmocka_unit_test_setup_teardown(test_function_attributes_and_launch_checks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unload_with_launch_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_copy_kernel_chain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_capture_and_replay, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_built_by_hand, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capture_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_free_before_copy_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pointer_attributes_and_pools, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_destroy_lets_work_finish, setup, teardown),
      cmocka_unit_test_setup_teardown(test_event_timing_and_stream_attributes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_cycles_are_reported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_launches_are_ordered_across_streams, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments_do_not_crash, setup, teardown),
      cmocka_unit_test(test_primary_ctx_revives_same_handle),
      cmocka_unit_test_setup_teardown(test_stream_ordered_alloc_is_an_operation, setup, teardown),
      cmocka_unit_test(test_missing_cross_stream_wait_fails_in_every_order),
      cmocka_unit_test(test_free_racing_an_access),
      cmocka_unit_test_setup_teardown(test_progress_order_option, setup, teardown),
      cmocka_unit_test(test_host_alloc_flags_and_nonportable_pinned),
      cmocka_unit_test_setup_teardown(test_stream_get_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_explicit_param_alignment, setup, teardown),
      cmocka_unit_test_setup_teardown(test_real_cubin_kernels_and_device_functions, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
