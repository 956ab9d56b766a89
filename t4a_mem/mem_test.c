/* t4a_mem on the fake driver: pools, stream-ordered buffers, the reuse cache, pinned memory,
 * mapped slots, registrations, A1 through buffers, failure sweeps. */
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
#include "t4a/mem.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define MIB ((size_t)1 << 20)

typedef t4a_fixture fixture;

/* A lane on device 0 of a one-device fake of mem_bytes (0: the default); the tests build their
 * own pools. */
static int setup_mem(void **state, uint64_t mem_bytes) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 1;
  o.fake.mem_bytes = mem_bytes;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER;
  o.build = 0;
  return t4a_fixture_setup(state, &o);
}
static int setup(void **state) { return setup_mem(state, 0); }
static int setup_small(void **state) { return setup_mem(state, 8 * MIB); }
static int setup_1000(void **state) { return setup_mem(state, 1000 * MIB); }

/* The GPU finishes; then the context goes: nothing may be left alive. */
static int teardown(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_NOTHING_LIVE);
}

static uint64_t calls(fixture *f, const char *entry) { return t4a_fake_calls(f->fake, entry); }

static void test_pool_threshold(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  uint64_t t = 0;
  assert_int_equal(t4a_mem_pool_query_release_threshold(p, &t), T4A_OK);
  assert_true(t == UINT64_MAX);
  assert_int_equal(t4a_mem_pool_domain(p), t4a_lane_domain(f->lane));
  t4a_mem_pool_release(p);
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.release_threshold_bytes = 64 * MIB;
  assert_int_equal(t4a_mem_pool_create(f->lane, &o, &p), T4A_OK);
  assert_int_equal(t4a_mem_pool_query_release_threshold(p, &t), T4A_OK);
  assert_int_equal(t, 64 * MIB);
  t4a_mem_pool_release(p);
}

/* The free follows the work already queued on the stream: a memset queued before the release
 * still runs on live memory (the fake raises ILLEGAL_ADDRESS otherwise). */
static void test_release_is_stream_ordered(void **state) {
  fixture *f = *state;
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.reuse_disabled = 1;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, &o, &p), T4A_OK);
  t4a_buffer *b = NULL;
  assert_int_equal(t4a_buffer_create(p, MIB, 0, 0, &b), T4A_OK);
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, t4a_buffer_devptr(b), 7, MIB,
                          t4a_lane_stream(f->lane)),
                   T4A_OK);
  (void)t4a_ctx_scope_exit(&s);
  uint64_t frees = calls(f, "cuMemFreeAsync");
  t4a_buffer_release(b); /* the memset has not run yet */
  assert_int_equal(calls(f, "cuMemFreeAsync"), frees + 1);
  assert_true(t4a_fake_pending(f->fake, t4a_lane_stream(f->lane)) >= 2);
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_OK);
  assert_int_equal(t4a_fake_sticky(f->fake, 0), CUDA_SUCCESS);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.device_allocs, 1);
  assert_int_equal(v.device_frees, 1);
  t4a_mem_pool_release(p);
}

static void *release_buffer(void *b) {
  t4a_buffer_release(b);
  return NULL;
}

static void test_reuse_cache_and_foreign_thread_release(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *a = NULL, *b = NULL;
  assert_int_equal(t4a_buffer_create(p, MIB, 0, 0, &a), T4A_OK);
  t4a_devptr first = t4a_buffer_devptr(a);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, release_buffer, a), 0);
  pthread_join(t, NULL);
  uint64_t allocs = calls(f, "cuMemAllocFromPoolAsync"), total = calls(f, NULL);
  /* A fitting size (same class: 1 MiB - 100 rounds to 1 MiB) reuses the block with no call. */
  assert_int_equal(t4a_buffer_create(p, MIB - 100, 0, 0, &b), T4A_OK);
  assert_int_equal(calls(f, "cuMemAllocFromPoolAsync"), allocs);
  assert_int_equal(calls(f, NULL), total); /* no driver call at all */
  assert_int_equal(t4a_buffer_devptr(b), first);
  assert_int_equal(t4a_buffer_size(b), MIB - 100);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.reuse_hits, 1);
  assert_int_equal(v.reuse_misses, 1);
  /* A different class goes to the driver. */
  t4a_buffer *c = NULL;
  assert_int_equal(t4a_buffer_create(p, 2 * MIB, 0, 0, &c), T4A_OK);
  assert_int_equal(calls(f, "cuMemAllocFromPoolAsync"), allocs + 1);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  struct t4a_mem_pool_stats ps;
  t4a_mem_pool_stats(p, &ps);
  assert_int_equal(ps.cached_blocks, 2);
  assert_int_equal(ps.cached_bytes, 3 * MIB);
  assert_int_equal(t4a_mem_pool_trim(p), T4A_OK);
  t4a_mem_pool_stats(p, &ps);
  assert_int_equal(ps.cached_blocks, 0);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.reuse_trimmed, 2);
  t4a_mem_pool_release(p);
}

static void test_reuse_cache_is_bounded(void **state) {
  fixture *f = *state;
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.reuse_max_blocks = 2;
  o.reuse_max_bytes = 64 * MIB;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, &o, &p), T4A_OK);
  t4a_buffer *b[3];
  for (int i = 0; i < 3; i++) assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &b[i]), T4A_OK);
  uint64_t frees = calls(f, "cuMemFreeAsync");
  for (int i = 0; i < 3; i++) t4a_buffer_release(b[i]);
  assert_int_equal(calls(f, "cuMemFreeAsync"), frees + 1); /* the oldest went back */
  struct t4a_mem_pool_stats ps;
  t4a_mem_pool_stats(p, &ps);
  assert_int_equal(ps.cached_blocks, 2);
  /* One block larger than the byte bound is never kept, and does not push the small ones out. */
  t4a_buffer *big = NULL;
  assert_int_equal(t4a_buffer_create(p, 65 * MIB, 0, 0, &big), T4A_OK);
  frees = calls(f, "cuMemFreeAsync");
  t4a_buffer_release(big);
  assert_int_equal(calls(f, "cuMemFreeAsync"), frees + 1);
  t4a_mem_pool_stats(p, &ps);
  assert_int_equal(ps.cached_blocks, 2);
  t4a_mem_pool_release(p);
}

/* Blocks the cache will never hold are allocated exactly: no 12.5% class rounding. */
static void test_uncached_blocks_are_exact(void **state) {
  fixture *f = *state;
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.reuse_disabled = 1;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, &o, &p), T4A_OK);
  t4a_buffer *b = NULL;
  /* 961 MiB rounds to a 1024 MiB class, more than this 1000 MiB device has. */
  assert_int_equal(t4a_buffer_create(p, 961 * MIB, 0, T4A_BUFFER_ZERO, &b), T4A_OK);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.device_bytes, 961 * MIB);
  t4a_buffer *c = NULL;
  assert_int_equal(t4a_buffer_create(p, 100 * MIB, 0, 0, &c), T4A_DEVICE_OUT_OF_MEMORY);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.bytes, 100 * MIB); /* the caller's bytes, not a class size */
  t4a_buffer_release(b);
  t4a_mem_pool_release(p);
}

/* A 64 KiB-aligned buffer on a base that is not 64 KiB-aligned still owns all its bytes. */
static void test_alignment_on_an_unaligned_base(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *small[3], *b = NULL;
  for (int i = 0; i < 3; i++) assert_int_equal(t4a_buffer_create(p, 256, 0, 0, &small[i]), T4A_OK);
  assert_int_equal(t4a_buffer_create(p, 64 * 1024, 64 * 1024, 0, &b), T4A_OK);
  assert_int_equal(t4a_buffer_devptr(b) % (64 * 1024), 0);
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, t4a_buffer_devptr(b), 1, 64 * 1024,
                          t4a_lane_stream(f->lane)),
                   T4A_OK);
  (void)t4a_ctx_scope_exit(&s);
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_OK); /* no access outside the block */
  for (int i = 0; i < 3; i++) t4a_buffer_release(small[i]);
  t4a_buffer_release(b);
  t4a_mem_pool_release(p);
}

/* An abandoned lane (no proved drain) makes the pool leak at its release instead of calling the
 * driver. */
static void test_abandoned_lane_leaks_the_pool(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_lane_abandon_(f->lane);
  uint64_t destroys = calls(f, "cuMemPoolDestroy");
  t4a_mem_pool_release(p);
  assert_int_equal(calls(f, "cuMemPoolDestroy"), destroys);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.pools_leaked, 1);
}

/* Under pressure the cache is handed back and the allocation retried once. */
static void test_pressure_trims_cache(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *a = NULL, *b = NULL;
  assert_int_equal(t4a_buffer_create(p, 5 * MIB, 0, 0, &a), T4A_OK);
  t4a_buffer_release(a); /* cached: 5 MiB of the device's 8 stay taken */
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_OK);
  assert_int_equal(t4a_buffer_create(p, 6 * MIB, 0, 0, &b), T4A_OK);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.reuse_trimmed, 1);
  /* Truly too much: a typed error naming the call and the bytes. */
  t4a_buffer *c = NULL;
  assert_int_equal(t4a_buffer_create(p, 4 * MIB, 0, 0, &c), T4A_DEVICE_OUT_OF_MEMORY);
  assert_null(c);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemAllocFromPoolAsync");
  assert_int_equal(e.bytes, 4 * MIB);
  assert_string_equal(e.code_name, "CUDA_ERROR_OUT_OF_MEMORY");
  t4a_buffer_release(b);
  t4a_mem_pool_release(p);
}

static void test_bad_requests(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *b = (t4a_buffer *)1;
  assert_int_equal(t4a_buffer_create(p, 0, 0, 0, &b), T4A_INVALID_ARGUMENT);
  assert_null(b);
  /* 3 is not a power of two. */
  assert_int_equal(t4a_buffer_create(p, 64, 3, 0, &b), T4A_INVALID_ARGUMENT);
  /* 128 KiB is above the 64 KiB limit. */
  assert_int_equal(t4a_buffer_create(p, 64, 128 * 1024, 0, &b), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_buffer_create(p, 64, 0, 0x80, &b), T4A_INVALID_ARGUMENT);
  /* More than the device has (the fake's default 1 GiB). */
  assert_int_equal(t4a_buffer_create(p, (size_t)2 << 30, 0, 0, &b), T4A_LIMIT_EXCEEDED);
  assert_int_equal(t4a_buffer_create(p, SIZE_MAX - 10, 64 * 1024, 0, &b), T4A_LIMIT_EXCEEDED);
  /* 64 KiB alignment is honoured. */
  assert_int_equal(t4a_buffer_create(p, 100, 64 * 1024, 0, &b), T4A_OK);
  assert_int_equal(t4a_buffer_devptr(b) % (64 * 1024), 0);
  assert_non_null(t4a_fake_host_view(f->fake, t4a_buffer_devptr(b), 100));
  t4a_buffer_release(b);
  t4a_mem_pool_release(p);
}

static void test_zero_fill_and_quarantine(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *b = NULL;
  assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &b), T4A_OK);
  memset(t4a_fake_host_view(f->fake, t4a_buffer_devptr(b), 4096), 0xab, 4096);
  t4a_buffer_release(b); /* cached, dirty */
  assert_int_equal(t4a_buffer_create(p, 4096, 0, T4A_BUFFER_ZERO, &b), T4A_OK);
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_OK);
  const unsigned char *h = t4a_fake_host_view(f->fake, t4a_buffer_devptr(b), 4096);
  for (int i = 0; i < 4096; i++) assert_int_equal(h[i], 0);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.zero_fills, 1);
  assert_int_equal(v.reuse_hits, 1);
  /* Quarantined: never freed on a guess, counted. */
  t4a_buffer_quarantine(b);
  uint64_t frees = calls(f, "cuMemFreeAsync");
  t4a_buffer_release(b);
  t4a_mem_pool_release(p);
  assert_int_equal(calls(f, "cuMemFreeAsync"), frees);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.buffers_leaked, 1);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.device_allocs, 1);
}

/* Requirement A1 through buffers: the last buffer of runtime A, dropped while B has the shared
 * context current, takes A's pool, lane and holder with it and leaves B's context current. */
static void test_last_buffer_of_a_inside_b(void **state) {
  fixture *f = *state;
  t4a_lane *b_lane = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &b_lane), T4A_OK);
  t4a_lane *a_lane = NULL;
  assert_int_equal(t4a_lane_create(f->drv, 0, NULL, &a_lane), T4A_OK);
  t4a_mem_pool *a_pool = NULL;
  assert_int_equal(t4a_mem_pool_create(a_lane, NULL, &a_pool), T4A_OK);
  t4a_buffer *buf = NULL;
  assert_int_equal(t4a_buffer_create(a_pool, 4096, 0, 0, &buf), T4A_OK);
  t4a_mem_pool_release(a_pool);
  t4a_lane_release(a_lane); /* the buffer keeps A alive */
  t4a_ctx_scope in_b;
  assert_int_equal(t4a_ctx_scope_enter(&in_b, t4a_lane_holder(b_lane), NULL), T4A_OK);
  CUcontext ctx = t4a_ctx_holder_native(t4a_lane_holder(b_lane));
  t4a_buffer_release(buf);
  CUcontext cur = NULL;
  assert_int_equal(f->drv->t.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, ctx);
  assert_int_equal(t4a_lane_synchronize(b_lane), T4A_OK);
  assert_int_equal(t4a_ctx_scope_exit(&in_b), T4A_OK);
  t4a_lane_release(b_lane);
}

static void test_sticky_leaks_instead_of_freeing(void **state) {
  fixture *f = *state;
  t4a_mem_pool *p = NULL;
  assert_int_equal(t4a_mem_pool_create(f->lane, NULL, &p), T4A_OK);
  t4a_buffer *b = NULL;
  assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &b), T4A_OK);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_CONTEXT_LOST);
  t4a_buffer *c = NULL;
  assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &c), T4A_LANE_BROKEN);
  uint64_t frees = calls(f, "cuMemFreeAsync");
  t4a_error_clear();
  t4a_buffer_release(b); /* not cached, not freed: leaked */
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_OK); /* a drop path leaves the caller's detail alone */
  assert_int_equal(calls(f, "cuMemFreeAsync"), frees);
  struct t4a_mem_pool_stats ps;
  memset(&ps, 0xff, sizeof ps);
  t4a_mem_pool_stats(p, &ps);
  assert_int_equal(ps.cached_blocks, 0);
  t4a_mem_pool_release(p); /* the lane is broken: the pool leaks too */
  t4a_lane_abandon_(f->lane);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.buffers_leaked, 1);
  assert_int_equal(v.pools_leaked, 1);
}

static void test_pinned_slots_and_registration(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_pinned *plain = NULL, *mapped = NULL;
  assert_int_equal(t4a_pinned_create(h, 1000, 0, &plain), T4A_OK);
  assert_int_equal(t4a_pinned_devptr(plain), 0);
  /* Requirement A2: staging memory is portable, usable under every context. */
  unsigned host_flags = 0;
  assert_int_equal(t4a_fake_host_alloc_flags(f->fake, t4a_pinned_host(plain), &host_flags), 1);
  assert_true(host_flags & CU_MEMHOSTALLOC_PORTABLE);
  memset(t4a_pinned_host(plain), 1, 1000);
  assert_int_equal(t4a_pinned_create(h, 4096, T4A_PINNED_MAPPED, &mapped), T4A_OK);
  assert_int_not_equal(t4a_pinned_devptr(mapped), 0);
  t4a_pinned *bad = (t4a_pinned *)1;
  assert_int_equal(t4a_pinned_create(h, 0, 0, &bad), T4A_INVALID_ARGUMENT);
  assert_null(bad);
  t4a_fake_inject(f->fake, "cuMemHostAlloc", 0, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
  t4a_pinned *none = NULL;
  assert_int_equal(t4a_pinned_create(h, 12345, 0, &none), T4A_HOST_OUT_OF_MEMORY);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemHostAlloc");
  assert_int_equal(e.bytes, 12345);
  t4a_pinned_release(mapped);

  /* Slots: the device writes, the host reads after a sync with no driver call. */
  t4a_slots *s = NULL;
  assert_int_equal(t4a_slots_create(h, 8, 4, &s), T4A_OK);
  uint32_t idx[4], extra = 0;
  for (int i = 0; i < 4; i++) assert_int_equal(t4a_slot_acquire(s, &idx[i]), T4A_OK);
  assert_int_equal(t4a_slot_acquire(s, &extra), T4A_LIMIT_EXCEEDED);
  assert_int_not_equal(t4a_slot_devptr(s, idx[0]), t4a_slot_devptr(s, idx[1]));
  t4a_ctx_scope sc;
  assert_int_equal(t4a_ctx_scope_enter(&sc, h, NULL), T4A_OK);
  assert_int_equal(T4A_CU(f->drv, cuMemsetD32Async, t4a_slot_devptr(s, idx[2]), 0xC0FFEE, 2,
                          t4a_lane_stream(f->lane)),
                   T4A_OK);
  (void)t4a_ctx_scope_exit(&sc);
  const uint32_t *cell = t4a_slot_host(s, idx[2]);
  assert_int_equal(cell[0], 0); /* not yet: the memset has not run */
  assert_int_equal(t4a_lane_synchronize(f->lane), T4A_OK);
  uint64_t before = calls(f, NULL);
  assert_int_equal(cell[0], 0xC0FFEE);
  assert_int_equal(cell[1], 0xC0FFEE);
  assert_int_equal(calls(f, NULL), before);
  t4a_slot_release(s, idx[0]);
  t4a_slot_release(s, idx[0]); /* double release ignored */
  assert_int_equal(t4a_slot_acquire(s, &extra), T4A_OK);
  assert_int_equal(extra, idx[0]);
  assert_int_equal(t4a_slot_acquire(s, &extra), T4A_LIMIT_EXCEEDED);
  t4a_slots_destroy(s);

  /* Registration: always unregistered; a double registration is typed. */
  void *mem = malloc(8192);
  t4a_host_registration *r = NULL, *r2 = NULL;
  t4a_host_register_options map_opts = {T4A_HOST_REGISTER_MAPPED, NULL, NULL};
  assert_int_equal(t4a_host_register(h, mem, 8192, &map_opts, &r), T4A_OK);
  assert_int_not_equal(t4a_host_registration_devptr(r), 0);
  assert_int_equal(t4a_host_register(h, mem, 8192, NULL, &r2), T4A_DRIVER_ERROR);
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
  assert_null(r2);
  t4a_host_registration_release(r);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.host_registrations, 0);
  free(mem);
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.host_registrations, 1);
  assert_int_equal(v.host_unregistrations, 1);
  t4a_pinned_release(plain);
}

/* Requirement A5: a pinned chunk whose context cannot be activated at its last release is leaked
 * and counted, never freed without its context. The fake, like the driver, refuses cuMemFreeHost
 * with no current context: a release that "frees anyway" would be answered INVALID_CONTEXT. */
static void test_pinned_leaked_without_context(void **state) {
  fixture *f = *state;
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  CUcontext cur = (CUcontext)1;
  assert_int_equal(t->cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_null(cur); /* so the release must switch, and the switch can fail */
  static const char *const k_fail[] = {"cuCtxGetCurrent", "cuCtxSetCurrent"};
  for (int i = 0; i < 2; i++) {
    t4a_pinned *p = NULL;
    assert_int_equal(t4a_pinned_create(h, 4096, i == 0 ? 0 : T4A_PINNED_MAPPED, &p), T4A_OK);
    void *host = t4a_pinned_host(p);
    t4a_counter_values before, after;
    t4a_driver_stats(f->drv, &before);
    t4a_fake_live l0, l1;
    t4a_fake_live_objects(f->fake, &l0);
    uint64_t frees = calls(f, "cuMemFreeHost"), injected = t4a_fake_injected(f->fake);
    t4a_error_clear();
    t4a_fake_inject(f->fake, k_fail[i], 0, 1, CUDA_ERROR_UNKNOWN, 0);
    t4a_pinned_release(p); /* the last reference: the scope cannot be entered */
    t4a_fake_clear_injections(f->fake);
    assert_int_equal(t4a_fake_injected(f->fake) - injected, 1);
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(e.status, T4A_OK); /* a drop path leaves the caller's detail alone */
    assert_int_equal(calls(f, "cuMemFreeHost"), frees); /* never freed without its context */
    t4a_driver_stats(f->drv, &after);
    assert_int_equal(after.leaked - before.leaked, 1); /* leaked, counted */
    t4a_fake_live_objects(f->fake, &l1);
    assert_int_equal(l1.host_allocs, l0.host_allocs); /* still pinned in the driver */
    /* "Free anyway" (no context current, as the failed activation left it) is refused. */
    assert_int_equal(t->cuMemFreeHost(host), CUDA_ERROR_INVALID_CONTEXT);
    t4a_fake_live_objects(f->fake, &l1);
    assert_int_equal(l1.host_allocs, l0.host_allocs);
  }
}

/* An owned registration releases its owner only after a successful unregister; a failed one
 * leaks both (counted); a refused registration releases the owner at once; read-only works. */
static int g_owner_releases;
static void owner_release(void *p) {
  (void)p;
  g_owner_releases++;
}
static void test_owned_registration(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  void *mem = malloc(8192);
  t4a_host_registration *r = NULL;
  g_owner_releases = 0;
  t4a_host_register_options ro = {T4A_HOST_REGISTER_MAPPED | T4A_HOST_REGISTER_READ_ONLY, mem,
                                   owner_release};
  assert_int_equal(t4a_host_register(h, mem, 8192, &ro, &r), T4A_OK);
  assert_ptr_equal(t4a_host_registration_host(r), mem);
  assert_int_equal(t4a_host_registration_size(r), 8192);
  t4a_host_registration_release(r);
  assert_int_equal(g_owner_releases, 1);
  /* A refused registration (unknown flag) still consumes the owner. */
  ro.flags = 0x80;
  assert_int_equal(t4a_host_register(h, mem, 8192, &ro, &r), T4A_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(g_owner_releases, 2);
  /* The unregister fails: the range stays registered and the owner is never released. */
  ro.flags = 0;
  assert_int_equal(t4a_host_register(h, mem, 8192, &ro, &r), T4A_OK);
  t4a_counter_values before, after;
  t4a_driver_stats(f->drv, &before);
  t4a_fake_inject(f->fake, "cuMemHostUnregister", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_host_registration_release(r);
  t4a_fake_clear_injections(f->fake);
  t4a_driver_stats(f->drv, &after);
  assert_int_equal(g_owner_releases, 2);
  assert_int_equal(after.leaked - before.leaked, 2);
  /* Clean up the fake's registration by hand (the test owns the memory). */
  t4a_ctx_scope sc;
  assert_int_equal(t4a_ctx_scope_enter(&sc, h, NULL), T4A_OK);
  assert_int_equal(t4a_fake_table(f->fake)->cuMemHostUnregister(mem), CUDA_SUCCESS);
  assert_int_equal(t4a_ctx_scope_exit(&sc), T4A_OK);
  free(mem);
}

/* Issue 25 item 2: a warm buffer create + release makes no heap allocation — the buffer's record
 * and its block's record come back from the pool's spare lists — with the reuse cache on (the
 * block cached: no driver call either) and off (the block freed and allocated again in stream
 * order). Each list is bounded (256 records per pool, mem.c's SPARE_RECORDS): with 300 buffers
 * alive at once, their release keeps 256 of each, so the next 300 creates allocate exactly 44
 * buffer records (and, with the cache off, 44 block records). The pool's release frees the
 * spares (the teardown and LeakSanitizer see nothing left). */
#define SPARE_RECORDS 256
static void test_warm_create_release_allocates_nothing(void **state) {
  fixture *f = *state;
  enum { LIVE = 300 };
  static t4a_buffer *live[LIVE];
  for (int reuse = 0; reuse < 2; reuse++) {
    t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
    o.reuse_disabled = !reuse;
    t4a_mem_pool *p = NULL;
    assert_int_equal(t4a_mem_pool_create(f->lane, &o, &p), T4A_OK);
    t4a_buffer *b = NULL;
    assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &b), T4A_OK); /* cold */
    t4a_buffer_release(b);
    uint64_t allocs = calls(f, "cuMemAllocFromPoolAsync");
    uint64_t heap0 = t4a_heap_allocations();
    for (int i = 0; i < 100; i++) {
      assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &b), T4A_OK);
      assert_int_equal(t4a_buffer_size(b), 4096);
      t4a_buffer_release(b);
    }
    assert_int_equal(t4a_heap_allocations() - heap0, 0);
    assert_int_equal(calls(f, "cuMemAllocFromPoolAsync") - allocs, reuse ? 0 : 100);
    for (int round = 0; round < 2; round++) {
      heap0 = t4a_heap_allocations();
      for (int i = 0; i < LIVE; i++) {
        assert_int_equal(t4a_buffer_create(p, 4096, 0, 0, &live[i]), T4A_OK);
      }
      uint64_t made = t4a_heap_allocations() - heap0;
      for (int i = 0; i < LIVE; i++) t4a_buffer_release(live[i]);
      if (round == 1) assert_int_equal(made, (uint64_t)(LIVE - SPARE_RECORDS) * (reuse ? 1 : 2));
    }
    t4a_mem_pool_release(p);
  }
}

/* ---- failure sweep over every public operation ---- */

/* A fresh range per sweep step: a step whose unregistration failed leaves its range registered
 * (leaked and counted), which must not make later steps fail. */
static char g_ranges[512][4096];
static int g_range_next;

static t4a_status op_all(void *user) {
  fixture *f = user;
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  o.reuse_max_blocks = 1;
  t4a_mem_pool *p = NULL;
  t4a_status st = t4a_mem_pool_create(f->lane, &o, &p);
  if (st != T4A_OK) return st;
  t4a_buffer *a = NULL, *b = NULL, *c = NULL;
  st = t4a_buffer_create(p, 4096, 0, T4A_BUFFER_ZERO, &a);
  if (st == T4A_OK) st = t4a_buffer_create(p, 4096, 4096, 0, &b);
  if (st == T4A_OK) {
    t4a_buffer_release(a);
    a = NULL;
    st = t4a_buffer_create(p, 4096, 0, 0, &c); /* cache hit */
  }
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  t4a_buffer_release(c);
  if (st == T4A_OK) st = t4a_mem_pool_trim(p);
  uint64_t threshold = 0;
  if (st == T4A_OK) st = t4a_mem_pool_query_release_threshold(p, &threshold);
  t4a_mem_pool_release(p);
  t4a_pinned *pin = NULL;
  if (st == T4A_OK) st = t4a_pinned_create(h, 100, T4A_PINNED_MAPPED, &pin);
  t4a_pinned_release(pin);
  t4a_slots *s = NULL;
  if (st == T4A_OK) st = t4a_slots_create(h, 16, 2, &s);
  uint32_t slot = 0;
  if (st == T4A_OK) st = t4a_slot_acquire(s, &slot);
  if (st == T4A_OK) t4a_slot_release(s, slot);
  t4a_slots_destroy(s);
  char *range = g_ranges[g_range_next++ % 512];
  t4a_host_registration *r = NULL;
  t4a_host_register_options mapped = {T4A_HOST_REGISTER_MAPPED, NULL, NULL};
  if (st == T4A_OK) st = t4a_host_register(h, range, 4096, &mapped, &r);
  t4a_host_registration_release(r);
  return st;
}

/* Objects alive in the fake beyond what t4a counted as leaked. */
static long unaccounted(void *user) {
  fixture *f = user;
  t4a_counter_values lane;
  t4a_lane_stats(f->lane, &lane);
  return t4a_fixture_unaccounted(f, T4A_FIXTURE_LIVE_DEVICE_ALLOCS | T4A_FIXTURE_LIVE_POOLS |
                                        T4A_FIXTURE_LIVE_HOST_ALLOCS |
                                        T4A_FIXTURE_LIVE_HOST_REGISTRATIONS) -
         (long)lane.pools_leaked;
}

/* For tests that leak on purpose: what is alive must be exactly what t4a counted. */
static int teardown_counted(void **state) {
  return t4a_fixture_teardown_counted(state, unaccounted, 0);
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "mem", .fake = f->fake, .op = op_all, .unaccounted = unaccounted,
                 .user = f};
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  /* The work is enqueued but the call reports failure: still typed, nothing freed on a guess,
   * nothing leaked silently. Only the zero fill: a failed allocation or free is taken at its word
   * (the driver allocates or frees nothing when it reports failure). */
  s.entry = "cuMemsetD8Async";
  s.after_enqueue = 1;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  const t4a_status mutex[] = {T4A_INTERNAL};
  (void)t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_pool_threshold, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm_create_release_allocates_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_is_stream_ordered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reuse_cache_and_foreign_thread_release, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reuse_cache_is_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pressure_trims_cache, setup_small, teardown),
      cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_uncached_blocks_are_exact, setup_1000, teardown),
      cmocka_unit_test_setup_teardown(test_alignment_on_an_unaligned_base, setup, teardown),
      cmocka_unit_test_setup_teardown(test_abandoned_lane_leaks_the_pool, setup,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_last_buffer_of_a_inside_b, setup, teardown),
      cmocka_unit_test_setup_teardown(test_owned_registration, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_slots_and_registration, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup, teardown_counted),
      cmocka_unit_test_setup_teardown(test_zero_fill_and_quarantine, setup, teardown_counted),
      cmocka_unit_test_setup_teardown(test_sticky_leaks_instead_of_freeing, setup,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_pinned_leaked_without_context, setup,
                                      teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
