/* Self-tests of the fake driver: memory: host memory, pinned memory, pointer attributes, pools,
 * stream-ordered allocation. Its table called raw, as t4a would call it (fixture and shared
 * kernels: fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

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

/* ---- fidelity to the measured H200 driver (580.159.04, CUDA 13.0) ------------------------- */

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
  assert_int_equal(t4a_fake_host_alloc_bytes(x.fake, np), 4096);
  assert_int_equal(t4a_fake_host_alloc_bytes(x.fake, np + 100), 0); /* not its start */
  assert_int_equal(t4a_fake_host_alloc_bytes(x.fake, reg), 0);      /* registered */
  assert_int_equal(t4a_fake_host_alloc_bytes(x.fake, NULL), 0);

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

/* Per block, accesses of two streams are judged against each other: a write not ordered after
 * another stream's access, or a read not ordered after another stream's write, is a violation in
 * either running order; reads of two streams, and accesses ordered by an event, are not. (The use
 * after free a reuse cache hides: the same block handed to new work on another stream.) */
static void test_unordered_accesses_of_two_streams(void **state) {
  (void)state;
  for (int b_first = 0; b_first <= 1; b_first++) {
    for (int reader_writes = 0; reader_writes <= 1; reader_writes++) {
      fx x;
      assert_int_equal(fx_open(&x, NULL), 0);
      const t4a_driver_table *t = x.t;
      CUstream b;
      CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
      CUdeviceptr d;
      CK(t->cuMemAlloc(&d, 64));
      char host[64];
      CK(t->cuMemcpyDtoHAsync(host, d, sizeof host, x.s)); /* a read on the first stream */
      if (reader_writes) {
        CK(t->cuMemsetD8Async(d, 1, 64, b)); /* a write on another, unordered */
      } else {
        CK(t->cuMemcpyDtoHAsync(host, d, sizeof host, b)); /* a read: no race */
      }
      CUstream first = b_first ? b : x.s, second = b_first ? x.s : b;
      (void)t->cuStreamSynchronize(first);
      (void)t->cuStreamSynchronize(second);
      assert_int_equal(t4a_fake_ordering_violations(x.fake), (uint64_t)reader_writes);
      t4a_fake_destroy(x.fake);
    }
  }
  /* Ordered by an event: the write waits for the read. */
  fx x;
  assert_int_equal(fx_open(&x, NULL), 0);
  CUstream b;
  CK(x.t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d;
  CK(x.t->cuMemAlloc(&d, 64));
  char host[64];
  CUevent ev;
  CK(x.t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(x.t->cuMemcpyDtoHAsync(host, d, sizeof host, x.s));
  CK(x.t->cuEventRecord(ev, x.s));
  CK(x.t->cuStreamWaitEvent(b, ev, 0));
  CK(x.t->cuMemsetD8Async(d, 1, 64, b));
  CK(x.t->cuStreamSynchronize(b));
  assert_int_equal(t4a_fake_ordering_violations(x.fake), 0);
  CK(x.t->cuEventDestroy(ev));
  CK(x.t->cuStreamDestroy(b));
  CK(x.t->cuMemFree(d));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test_setup_teardown(test_host_memory, setup, teardown),
cmocka_unit_test_setup_teardown(test_pinned_free_before_copy_runs, setup, teardown),
cmocka_unit_test_setup_teardown(test_pointer_attributes_and_pools, setup, teardown),
cmocka_unit_test_setup_teardown(test_stream_ordered_alloc_is_an_operation, setup, teardown),
cmocka_unit_test(test_free_racing_an_access),
cmocka_unit_test(test_unordered_accesses_of_two_streams),
cmocka_unit_test(test_host_alloc_flags_and_nonportable_pinned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
