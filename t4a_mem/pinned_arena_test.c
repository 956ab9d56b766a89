/* //t4a_mem:pinned_arena on the fake driver: mixed sizes from few cuMemHostAlloc calls, no
 * overlap, alignment, invalid arguments, the cap, typed out-of-memory, destroy returning every
 * region, leaks counted when the context cannot be activated, foreign frees, threads, ASan
 * annotations, and failure sweeps over create and alloc (driver calls and host allocations).
 *
 * Pinned memory here comes from mmap, as the real driver's does. The fake's own cuMemHostAlloc
 * takes its bytes from posix_memalign, and in a process that links jemalloc (without ASan or
 * valgrind, whose malloc wins) that is jemalloc's heap: handing jemalloc's own heap to a jemalloc
 * arena makes both map the same pages in jemalloc's page map, and the region's free() at destroy
 * crashes. So the test's driver table is the fake's with cuMemHostAlloc / cuMemFreeHost wrapped:
 * the fake still decides every call (failure injection, context checks, call counts) and tracks
 * one small token allocation per region (so t4a_fake_live counts regions), while the region's
 * bytes are an anonymous mapping. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/pinned_arena.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TEST_ASAN)
#define TEST_ASAN 1
#endif
#ifdef TEST_ASAN
int __asan_address_is_poisoned(void const volatile *addr);
#endif

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

/* ---- the wrapped table: fake decisions, mmap bytes ---- */

typedef struct pin_map {
  void *region;
  size_t bytes;
  void *token; /* the fake's cuMemHostAlloc allocation standing for the region */
} pin_map;

static const t4a_driver_table *g_fake_table;
static pin_map g_pins[4096];
static size_t g_num_pins;
static pthread_mutex_t g_pins_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult CUDAAPI mmap_cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
  if (pp == NULL || bytes == 0) return g_fake_table->cuMemHostAlloc(pp, bytes, flags);
  void *token = NULL;
  CUresult r = g_fake_table->cuMemHostAlloc(&token, 1, flags);
  if (r != CUDA_SUCCESS) return r;
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_mutex_lock(&g_pins_lock);
  if (mem == MAP_FAILED || g_num_pins == sizeof g_pins / sizeof g_pins[0]) {
    pthread_mutex_unlock(&g_pins_lock);
    if (mem != MAP_FAILED) munmap(mem, bytes);
    (void)g_fake_table->cuMemFreeHost(token);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  g_pins[g_num_pins++] = (pin_map){mem, bytes, token};
  pthread_mutex_unlock(&g_pins_lock);
  *pp = mem;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI mmap_cuMemFreeHost(void *p) {
  pthread_mutex_lock(&g_pins_lock);
  for (size_t i = 0; i < g_num_pins; i++) {
    if (g_pins[i].region != p) continue;
    CUresult r = g_fake_table->cuMemFreeHost(g_pins[i].token);
    if (r == CUDA_SUCCESS) {
      munmap(g_pins[i].region, g_pins[i].bytes);
      g_pins[i] = g_pins[--g_num_pins];
    }
    pthread_mutex_unlock(&g_pins_lock);
    return r;
  }
  pthread_mutex_unlock(&g_pins_lock);
  return g_fake_table->cuMemFreeHost(p); /* not a region: the fake answers */
}

/* Unmaps regions the arena leaked on purpose (their tokens die with the fake). */
static void unmap_leaked_regions(void) {
  pthread_mutex_lock(&g_pins_lock);
  for (size_t i = 0; i < g_num_pins; i++) munmap(g_pins[i].region, g_pins[i].bytes);
  g_num_pins = 0;
  pthread_mutex_unlock(&g_pins_lock);
}

typedef struct fixture {
  t4a_fixture fx;               /* a one-device fake, no lane */
  const t4a_driver_table *raw;  /* the fake's own table */
  t4a_ctx_holder *holder;       /* device 0's primary context */
  struct t4a_pinned_arena_process_stats base; /* process totals at setup */
} fixture;

static t4a_driver_table g_fake_entries; /* the fake's own table, behind the mmap entries */

static void mmap_table(t4a_driver_table *table) {
  g_fake_entries = *table;
  g_fake_table = &g_fake_entries;
  table->cuMemHostAlloc = mmap_cuMemHostAlloc;
  table->cuMemFreeHost = mmap_cuMemFreeHost;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  *state = f;
  t4a_fixture_options o = t4a_fixture_defaults();
  o.wrap_table = mmap_table; /* a driver whose pinned memory comes from mmap */
  o.wrapped_name = "fake, pinned memory from mmap";
  o.stacks = 0;
  if (t4a_fixture_init(&f->fx, &o) != T4A_OK) return -1;
  f->raw = t4a_fake_table(f->fx.fake);
  if (t4a_ctx_holder_create(f->fx.drv, 0, &f->holder) != T4A_OK) return -1;
  t4a_pinned_arena_process_stats(&f->base);
  return 0;
}

/* Pinned regions the fake holds beyond those the arena counted as leaked. */
static long unaccounted(fixture *f) {
  struct t4a_pinned_arena_process_stats t;
  t4a_pinned_arena_process_stats(&t);
  return t4a_fixture_live(f->fx.fake, T4A_FIXTURE_LIVE_HOST_ALLOCS) -
         (long)(t.regions_leaked - f->base.regions_leaked);
}

static int finish(fixture *f, int need_nothing_live) {
  (void)t4a_fixture_drop_stacks(&f->fx); /* no context current */
  long extra = unaccounted(f);
  t4a_ctx_holder_release(f->holder);
  int rc = t4a_fixture_fini(&f->fx, need_nothing_live ? T4A_FIXTURE_CHECK_NOTHING_LIVE : 0);
  unmap_leaked_regions();
  free(f);
  if (extra != 0) fprintf(stderr, "teardown: %ld pinned regions alive and not counted\n", extra);
  return rc == 0 && extra == 0 ? 0 : -1;
}

static int teardown(void **state) { return finish(*state, 1); }
/* For tests that leak on purpose: what is alive must be exactly what the arena counted. */
static int teardown_counted_leaks(void **state) { return finish(*state, 0); }

static t4a_pinned_arena *make_arena(fixture *f, const t4a_pinned_arena_options *o) {
  t4a_pinned_arena *a = NULL;
  assert_int_equal(t4a_pinned_arena_create(f->holder, o, &a), T4A_OK);
  assert_non_null(a);
  return a;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Fills an allocation with a pattern derived from its tag, and checks it. */
static void fill(unsigned char *p, size_t n, unsigned tag) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(tag * 131u + i * 7u);
}
static int intact(const unsigned char *p, size_t n, unsigned tag) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != (unsigned char)(tag * 131u + i * 7u)) return 0;
  }
  return 1;
}

typedef struct live_alloc {
  unsigned char *p;
  size_t n;
  unsigned tag;
} live_alloc;

static int by_address(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)((const live_alloc *)x)->p, b = (uintptr_t)((const live_alloc *)y)->p;
  return a < b ? -1 : a > b;
}

static void assert_disjoint(const live_alloc *slots, size_t num) {
  live_alloc sorted[64];
  size_t k = 0;
  for (size_t i = 0; i < num; i++) {
    if (slots[i].p != NULL) sorted[k++] = slots[i];
  }
  qsort(sorted, k, sizeof *sorted, by_address);
  for (size_t i = 1; i < k; i++) {
    assert_true((uintptr_t)sorted[i - 1].p + sorted[i - 1].n <= (uintptr_t)sorted[i].p);
  }
}

/* 1,000 allocations of mixed sizes (1 B to 1 MiB, log-uniform) with frees interleaved, at most 64
 * live: every allocation is pinned memory of the arena, writable, disjoint from the others, and
 * keeps its bytes until freed; the arena asks the driver a few times, not 1,000. */
static void test_mixed_sizes_few_host_allocs(void **state) {
  fixture *f = *state;
  uint64_t calls0 = t4a_fake_calls(f->fx.fake, "cuMemHostAlloc");
  t4a_pinned_arena *a = make_arena(f, NULL);
  live_alloc slots[64];
  memset(slots, 0, sizeof slots);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  size_t live_bytes = 0, live_count = 0, frees = 0;
  for (unsigned i = 0; i < 1000; i++) {
    size_t k = (size_t)(rng_next(&seed) % 64);
    if (slots[k].p != NULL) {
      assert_true(intact(slots[k].p, slots[k].n, slots[k].tag));
      t4a_pinned_arena_free(a, slots[k].p);
      live_bytes -= slots[k].n;
      live_count--;
      frees++;
      slots[k].p = NULL;
    }
    unsigned bits = (unsigned)(rng_next(&seed) % 21); /* 2^0 .. 2^20 */
    size_t n = 1 + (size_t)(rng_next(&seed) % ((uint64_t)1 << bits));
    void *p = NULL;
    assert_int_equal(t4a_pinned_arena_alloc(a, n, 0, &p), T4A_OK);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % T4A_PINNED_ARENA_DEFAULT_ALIGNMENT, 0);
    assert_true(t4a_pinned_arena_owns(a, p));
    assert_true(t4a_pinned_arena_owns(a, (char *)p + n - 1));
    fill(p, n, i);
    slots[k] = (live_alloc){p, n, i};
    live_bytes += n;
    live_count++;
    if (i % 50 == 49) assert_disjoint(slots, 64);
  }
  assert_disjoint(slots, 64);
  for (size_t k = 0; k < 64; k++) {
    if (slots[k].p != NULL) assert_true(intact(slots[k].p, slots[k].n, slots[k].tag));
  }

  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  uint64_t calls = t4a_fake_calls(f->fx.fake, "cuMemHostAlloc") - calls0;
  printf("# 1000 mixed allocations: %llu cuMemHostAlloc calls, %llu regions, %.1f MiB pinned, "
         "%.1f MiB in use, %llu extents carved\n",
         (unsigned long long)calls, (unsigned long long)s.extents,
         (double)s.bytes_pinned / (double)MIB, (double)s.bytes_in_use / (double)MIB,
         (unsigned long long)s.hook_extents);
  assert_int_equal(s.host_alloc_calls, calls);
  assert_true(calls >= 1);
  assert_true(calls < 50); /* far fewer than the 1,000 allocations */
  assert_int_equal(s.allocations, 1000);
  assert_int_equal(s.frees, frees);
  assert_int_equal(s.allocations - s.frees, live_count);
  assert_int_equal(s.bytes_in_use, live_bytes);
  assert_int_equal(s.foreign_frees, 0);
  assert_true(s.bytes_pinned >= s.bytes_in_use);
  assert_int_equal(s.extents, calls); /* no failed calls here: one region per call */
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, s.extents); /* the driver sees every region as pinned */

  for (size_t k = 0; k < 64; k++) t4a_pinned_arena_free(a, slots[k].p);
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.allocations, s.frees);
  /* Freed memory is cached: the same work again needs no new region. */
  seed = 0x9E3779B97F4A7C15ull;
  for (unsigned i = 0; i < 1000; i++) {
    size_t k = (size_t)(rng_next(&seed) % 64);
    if (slots[k].p != NULL) t4a_pinned_arena_free(a, slots[k].p);
    unsigned bits = (unsigned)(rng_next(&seed) % 21);
    size_t n = 1 + (size_t)(rng_next(&seed) % ((uint64_t)1 << bits));
    void *p = NULL;
    assert_int_equal(t4a_pinned_arena_alloc(a, n, 0, &p), T4A_OK);
    slots[k] = (live_alloc){p, n, i};
  }
  struct t4a_pinned_arena_stats again;
  t4a_pinned_arena_stats(a, &again);
  assert_int_equal(again.host_alloc_calls, s.host_alloc_calls);
  t4a_pinned_arena_destroy(a); /* with allocations still live: destroy ends them */
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, 0);
}

static void test_alignment_honoured(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  static const size_t sizes[] = {1, 3, 100, 4095, 5000, 70000, 300000, 2 * MIB + 1};
  void *ptrs[18 * 8];
  size_t num = 0;
  for (size_t al = 1; al <= T4A_PINNED_ARENA_MAX_ALIGNMENT; al *= 2) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      void *p = NULL;
      assert_int_equal(t4a_pinned_arena_alloc(a, sizes[i], al, &p), T4A_OK);
      assert_int_equal((uintptr_t)p % al, 0);
      memset(p, 0xA5, sizes[i]);
      ptrs[num++] = p;
    }
  }
  void *p = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 1, 0, &p), T4A_OK); /* 0: the default */
  assert_int_equal((uintptr_t)p % T4A_PINNED_ARENA_DEFAULT_ALIGNMENT, 0);
  ptrs[num++] = p;
  for (size_t i = 0; i < num; i++) t4a_pinned_arena_free(a, ptrs[i]);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.frees, num);
  assert_int_equal(s.bytes_in_use, 0);
  t4a_pinned_arena_destroy(a);
}

static void expect_error(t4a_status st, t4a_status want, const char *entry, uint64_t bytes) {
  assert_int_equal(st, want);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, want);
  if (entry != NULL) assert_string_equal(e.entry, entry);
  assert_int_equal(e.bytes, bytes);
}

static void test_invalid_arguments(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = (t4a_pinned_arena *)1;
  expect_error(t4a_pinned_arena_create(NULL, NULL, &a), T4A_INVALID_ARGUMENT, NULL, 0);
  assert_null(a);
  expect_error(t4a_pinned_arena_create(f->holder, NULL, NULL), T4A_INVALID_ARGUMENT, NULL, 0);
  t4a_pinned_arena_options o = T4A_PINNED_ARENA_OPTIONS_INIT;
  o.min_extent_bytes = SIZE_MAX;
  a = (t4a_pinned_arena *)1;
  expect_error(t4a_pinned_arena_create(f->holder, &o, &a), T4A_INVALID_ARGUMENT, NULL, 0);
  assert_null(a);

  a = make_arena(f, NULL);
  void *p = (void *)1;
  expect_error(t4a_pinned_arena_alloc(a, 0, 0, &p), T4A_INVALID_ARGUMENT, NULL, 0);
  assert_null(p);
  p = (void *)1;
  expect_error(t4a_pinned_arena_alloc(a, 10, 3, &p), T4A_INVALID_ARGUMENT, NULL, 0);
  assert_null(p);
  expect_error(t4a_pinned_arena_alloc(a, 10, 48, &p), T4A_INVALID_ARGUMENT, NULL, 0);
  expect_error(t4a_pinned_arena_alloc(a, 10, 2 * T4A_PINNED_ARENA_MAX_ALIGNMENT, &p),
               T4A_INVALID_ARGUMENT, NULL, 0);
  expect_error(t4a_pinned_arena_alloc(NULL, 10, 0, &p), T4A_INVALID_ARGUMENT, NULL, 0);
  expect_error(t4a_pinned_arena_alloc(a, 10, 0, NULL), T4A_INVALID_ARGUMENT, NULL, 0);
  /* A size no allocator can serve: typed out of memory naming the bytes, no abort. */
  expect_error(t4a_pinned_arena_alloc(a, SIZE_MAX - 4096, 0, &p), T4A_HOST_OUT_OF_MEMORY, NULL,
               (uint64_t)(SIZE_MAX - 4096));
  assert_null(p);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.allocations, 0);
  t4a_pinned_arena_destroy(a);

  /* NULL everywhere is harmless. */
  t4a_pinned_arena_destroy(NULL);
  t4a_pinned_arena_free(NULL, &s);
  assert_int_equal(t4a_pinned_arena_owns(NULL, &s), 0);
  t4a_pinned_arena_stats(NULL, &s);
  assert_int_equal(s.allocations, 0);
  assert_int_equal(s.bytes_pinned, 0);
  t4a_pinned_arena_stats(NULL, NULL);
  t4a_pinned_arena_process_stats(NULL);
}

static void test_cap_gives_typed_out_of_memory(void **state) {
  fixture *f = *state;
  t4a_pinned_arena_options o = T4A_PINNED_ARENA_OPTIONS_INIT;
  o.max_pinned_bytes = 16 * MIB;
  t4a_pinned_arena *a = make_arena(f, &o);
  void *ptrs[32];
  size_t n = 0;
  t4a_status st = T4A_OK;
  while (n < 32) {
    void *p = (void *)1;
    st = t4a_pinned_arena_alloc(a, MIB, 0, &p);
    if (st != T4A_OK) {
      assert_null(p);
      break;
    }
    ptrs[n++] = p;
  }
  expect_error(st, T4A_HOST_OUT_OF_MEMORY, "t4a_pinned_arena_alloc", MIB);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "cap"));
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_true(s.bytes_pinned <= o.max_pinned_bytes);
  assert_true(n >= 8); /* most of the cap serves allocations */
  assert_int_equal(s.bytes_in_use, n * MIB);
  /* Freed memory serves the next request without the driver. */
  uint64_t calls = t4a_fake_calls(f->fx.fake, "cuMemHostAlloc");
  t4a_pinned_arena_free(a, ptrs[--n]);
  assert_int_equal(t4a_pinned_arena_alloc(a, MIB, 0, &ptrs[n]), T4A_OK);
  n++;
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemHostAlloc"), calls);
  /* Above the cap on its own: refused before any driver call. */
  void *p = NULL;
  expect_error(t4a_pinned_arena_alloc(a, 16 * MIB + 1, 0, &p), T4A_HOST_OUT_OF_MEMORY,
               "t4a_pinned_arena_alloc", 16 * MIB + 1);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemHostAlloc"), calls);
  for (size_t i = 0; i < n; i++) t4a_pinned_arena_free(a, ptrs[i]);
  t4a_pinned_arena_destroy(a);

  /* A cap too small for the first region: create fails, typed, and pins nothing. */
  o.max_pinned_bytes = MIB;
  a = (t4a_pinned_arena *)1;
  st = t4a_pinned_arena_create(f->holder, &o, &a);
  assert_int_equal(st, T4A_HOST_OUT_OF_MEMORY);
  assert_null(a);
  t4a_error_last(&e);
  assert_string_equal(e.entry, "t4a_pinned_arena_alloc");
  assert_true(e.bytes > MIB);
}

static void test_host_alloc_failure_is_typed(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  struct t4a_pinned_arena_stats before, after;
  t4a_pinned_arena_stats(a, &before);
  t4a_fake_live live;

  /* Out of pinnable memory: HOST_OUT_OF_MEMORY naming cuMemHostAlloc and the bytes. jemalloc
   * retries with an exact-size request, so fail every call until cleared. */
  t4a_fake_inject(f->fx.fake, "cuMemHostAlloc", 0, 1000, CUDA_ERROR_OUT_OF_MEMORY, 0);
  void *p = (void *)1;
  t4a_status st = t4a_pinned_arena_alloc(a, 32 * MIB, 0, &p);
  expect_error(st, T4A_HOST_OUT_OF_MEMORY, "cuMemHostAlloc", 32 * MIB);
  assert_null(p);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.code, CUDA_ERROR_OUT_OF_MEMORY);
  assert_string_equal(e.code_name, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_non_null(strstr(e.message, "33554432"));
  char buf[512];
  printf("# %s\n", t4a_error_format(&e, buf, sizeof buf));
  t4a_pinned_arena_stats(a, &after);
  assert_int_equal(after.extents, before.extents); /* nothing pinned, nothing leaked */
  assert_int_equal(after.bytes_pinned, before.bytes_pinned);
  assert_true(after.host_alloc_calls > before.host_alloc_calls);
  assert_int_equal(after.allocations, 0);
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, after.extents);

  /* Any other driver failure keeps its mapped status, with the entry and the bytes. */
  t4a_fake_clear_injections(f->fx.fake);
  t4a_fake_inject(f->fx.fake, "cuMemHostAlloc", 0, 1000, CUDA_ERROR_UNKNOWN, 0);
  st = t4a_pinned_arena_alloc(a, 32 * MIB, 0, &p);
  expect_error(st, T4A_DRIVER_ERROR, "cuMemHostAlloc", 32 * MIB);
  t4a_error_last(&e);
  assert_int_equal(e.code, CUDA_ERROR_UNKNOWN);

  /* Activation failure inside the hook: the scope's detail comes through. */
  t4a_fake_clear_injections(f->fx.fake);
  t4a_fake_inject(f->fx.fake, "cuCtxSetCurrent", 0, 1000, CUDA_ERROR_INVALID_CONTEXT, 0);
  st = t4a_pinned_arena_alloc(a, 32 * MIB, 0, &p);
  expect_error(st, T4A_INVALID_CONTEXT, "cuCtxSetCurrent", 32 * MIB);

  t4a_fake_clear_injections(f->fx.fake);
  assert_int_equal(t4a_pinned_arena_alloc(a, 32 * MIB, 0, &p), T4A_OK);
  memset(p, 1, 32 * MIB);
  t4a_pinned_arena_free(a, p);
  t4a_pinned_arena_destroy(a);
}

static int fail_every_host_malloc(t4a_fault_point p, void *user) {
  (void)user;
  return p == T4A_FAULT_HOST_MALLOC;
}

/* The arena's own bookkeeping failing (the live table must grow past 32 entries) is a typed
 * HOST_OUT_OF_MEMORY naming the caller's bytes, and leaves nothing allocated. */
static void test_bookkeeping_failure_is_typed(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  void *ptrs[40];
  size_t n = 0;
  t4a_status st = T4A_OK;
  t4a_fault_set_hook(fail_every_host_malloc, NULL);
  for (; n < 40; n++) {
    ptrs[n] = (void *)1;
    st = t4a_pinned_arena_alloc(a, 777, 0, &ptrs[n]);
    if (st != T4A_OK) break;
  }
  t4a_fault_set_hook(NULL, NULL);
  assert_int_equal(n, 32); /* 64 slots kept at most half full */
  assert_null(ptrs[n]);
  expect_error(st, T4A_HOST_OUT_OF_MEMORY, "calloc", 777);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.allocations, 32);
  assert_int_equal(s.bytes_in_use, 32 * 777);
  assert_int_equal(t4a_pinned_arena_alloc(a, 777, 0, &ptrs[n]), T4A_OK);
  n++;
  for (size_t i = 0; i < n; i++) t4a_pinned_arena_free(a, ptrs[i]);
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.foreign_frees, 0);
  t4a_pinned_arena_destroy(a);
}

static void test_destroy_returns_every_region(void **state) {
  fixture *f = *state;
  struct t4a_pinned_arena_process_stats t0, t1;
  t4a_pinned_arena_process_stats(&t0);
  t4a_pinned_arena *a = make_arena(f, NULL);
  void *p[4];
  static const size_t sizes[] = {10, 3 * MIB, 40 * MIB, 7 * KIB};
  for (int i = 0; i < 4; i++) assert_int_equal(t4a_pinned_arena_alloc(a, sizes[i], 0, &p[i]), T4A_OK);
  t4a_pinned_arena_free(a, p[1]);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_true(s.extents >= 2);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, s.extents);
  uint64_t frees0 = t4a_fake_calls(f->fx.fake, "cuMemFreeHost");
  t4a_pinned_arena_destroy(a); /* three allocations still live */
  t4a_pinned_arena_process_stats(&t1);
  assert_int_equal(t1.arenas_created - t0.arenas_created, 1);
  assert_int_equal(t1.arenas_destroyed - t0.arenas_destroyed, 1);
  assert_int_equal(t1.regions_freed - t0.regions_freed, s.extents);
  assert_int_equal(t1.regions_leaked, t0.regions_leaked);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemFreeHost") - frees0, s.extents);
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, 0);
  /* The arena index is recycled by jemalloc: a new arena works after many create/destroy. */
  for (int i = 0; i < 20; i++) {
    a = make_arena(f, NULL);
    assert_int_equal(t4a_pinned_arena_alloc(a, 100, 0, &p[0]), T4A_OK);
    t4a_pinned_arena_destroy(a);
  }
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, 0);
}

/* Requirement A5's rule for this arena: a destroy that cannot activate the context leaks the
 * regions and counts them; it does not abort and does not free under the wrong context. */
static void test_destroy_without_context_leaks_and_counts(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  void *p = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 5 * MIB, 0, &p), T4A_OK);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  struct t4a_pinned_arena_process_stats t0, t1;
  t4a_pinned_arena_process_stats(&t0);
  uint64_t frees0 = t4a_fake_calls(f->fx.fake, "cuMemFreeHost");
  t4a_fake_inject(f->fx.fake, "cuCtxGetCurrent", 0, 1, CUDA_ERROR_INVALID_CONTEXT, 0);
  t4a_pinned_arena_destroy(a);
  t4a_fake_clear_injections(f->fx.fake);
  t4a_pinned_arena_process_stats(&t1);
  assert_int_equal(t1.regions_leaked - t0.regions_leaked, s.extents);
  assert_int_equal(t1.bytes_leaked - t0.bytes_leaked, s.bytes_pinned);
  assert_int_equal(t1.regions_freed, t0.regions_freed);
  assert_int_equal(t1.arenas_destroyed - t0.arenas_destroyed, 1);
  assert_int_equal(t4a_fake_calls(f->fx.fake, "cuMemFreeHost"), frees0); /* never freed blind */
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, s.extents); /* the leak is real and visible */
}

/* One cuMemFreeHost failing leaks that region only. */
static void test_destroy_free_failure_leaks_one(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  void *p = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 9 * MIB, 0, &p), T4A_OK);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_true(s.extents >= 2);
  struct t4a_pinned_arena_process_stats t0, t1;
  t4a_pinned_arena_process_stats(&t0);
  t4a_fake_inject(f->fx.fake, "cuMemFreeHost", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_pinned_arena_destroy(a);
  t4a_fake_clear_injections(f->fx.fake);
  t4a_pinned_arena_process_stats(&t1);
  assert_int_equal(t1.regions_leaked - t0.regions_leaked, 1);
  assert_int_equal(t1.regions_freed - t0.regions_freed, s.extents - 1);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, 1);
}

static void test_foreign_frees_are_ignored_and_counted(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  t4a_pinned_arena *b = make_arena(f, NULL);
  void *p = NULL, *q = NULL, *r = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 1000, 0, &p), T4A_OK);
  assert_int_equal(t4a_pinned_arena_alloc(a, 3 * MIB, 0, &q), T4A_OK);
  assert_int_equal(t4a_pinned_arena_alloc(b, 1000, 0, &r), T4A_OK);
  memset(p, 7, 1000);
  int on_stack = 0;
  char *heap = malloc(64);
  assert_non_null(heap);

  t4a_pinned_arena_free(a, &on_stack);        /* never pinned */
  t4a_pinned_arena_free(a, heap);             /* the process heap */
  t4a_pinned_arena_free(a, (char *)p + 8);    /* inside a live allocation */
  t4a_pinned_arena_free(a, (char *)q + MIB);  /* inside a large one */
  t4a_pinned_arena_free(a, r);                /* another arena's */
  t4a_pinned_arena_free(a, NULL);             /* ignored, not counted */
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.foreign_frees, 5);
  assert_int_equal(s.frees, 0);
  assert_int_equal(s.bytes_in_use, 1000 + 3 * MIB);
  for (int i = 0; i < 1000; i++) assert_int_equal(((unsigned char *)p)[i], 7);

  assert_true(t4a_pinned_arena_owns(a, p));
  assert_true(t4a_pinned_arena_owns(a, (char *)q + MIB)); /* interior: still pinned memory */
  assert_false(t4a_pinned_arena_owns(a, &on_stack));
  assert_false(t4a_pinned_arena_owns(a, heap));
  assert_false(t4a_pinned_arena_owns(a, r));
  assert_true(t4a_pinned_arena_owns(b, r));

  t4a_pinned_arena_free(a, p);
  t4a_pinned_arena_free(a, p); /* double free: ignored */
  t4a_pinned_arena_free(a, q);
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.frees, 2);
  assert_int_equal(s.foreign_frees, 6);
  assert_int_equal(s.bytes_in_use, 0);
  t4a_pinned_arena_free(b, r);
  free(heap);
  t4a_pinned_arena_destroy(a);
  t4a_pinned_arena_destroy(b);
}

/* jemalloc's growth is geometric; a large minimum extent serves everything from one region. */
static void test_min_extent_one_region(void **state) {
  fixture *f = *state;
  t4a_pinned_arena_options o = T4A_PINNED_ARENA_OPTIONS_INIT;
  o.min_extent_bytes = 64 * MIB;
  t4a_pinned_arena *a = make_arena(f, &o);
  void *ptrs[200];
  uint64_t seed = 42;
  for (int i = 0; i < 200; i++) {
    size_t n = 1 + (size_t)(rng_next(&seed) % (128 * KIB));
    assert_int_equal(t4a_pinned_arena_alloc(a, n, 0, &ptrs[i]), T4A_OK);
    memset(ptrs[i], i, n);
  }
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.host_alloc_calls, 1);
  assert_int_equal(s.extents, 1);
  assert_int_equal(s.bytes_pinned, 64 * MIB);
  assert_true(s.hook_extents >= 2); /* metadata and at least one extent, all from one region */
  for (int i = 0; i < 200; i++) t4a_pinned_arena_free(a, ptrs[i]);
  t4a_pinned_arena_destroy(a);
}

/* The arena keeps its holder: the caller may drop its own reference at once. */
static void test_arena_keeps_its_holder(void **state) {
  fixture *f = *state;
  t4a_ctx_holder *h = NULL;
  assert_int_equal(t4a_ctx_holder_create(f->fx.drv, 0, &h), T4A_OK);
  t4a_pinned_arena *a = NULL;
  assert_int_equal(t4a_pinned_arena_create(h, NULL, &a), T4A_OK);
  t4a_ctx_holder_release(h);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.primary_refs[0], 2); /* fixture's holder and the arena's */
  void *p = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 20 * MIB, 0, &p), T4A_OK);
  t4a_pinned_arena_destroy(a);
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.primary_refs[0], 1);
  assert_int_equal(live.host_allocs, 0);
  /* The thread's current context is as it was (none). */
  CUcontext c = (CUcontext)1;
  assert_int_equal(f->raw->cuCtxGetCurrent(&c), CUDA_SUCCESS);
  assert_null(c);
}

/* ---- threads ---- */

typedef struct worker {
  t4a_pinned_arena *arena;
  void **ptrs;
  size_t num;
  uint64_t seed;
  int bad;
} worker;

static void *free_all(void *arg) {
  worker *w = arg;
  for (size_t i = 0; i < w->num; i++) t4a_pinned_arena_free(w->arena, w->ptrs[i]);
  return NULL;
}

static void *churn(void *arg) {
  worker *w = arg;
  void *mine[32] = {0};
  size_t sizes[32] = {0};
  for (int i = 0; i < 400; i++) {
    size_t k = (size_t)(rng_next(&w->seed) % 32);
    if (mine[k] != NULL) {
      if (((unsigned char *)mine[k])[sizes[k] - 1] != (unsigned char)k) w->bad = 1;
      t4a_pinned_arena_free(w->arena, mine[k]);
      mine[k] = NULL;
    }
    size_t n = 1 + (size_t)(rng_next(&w->seed) % (256 * KIB));
    if (t4a_pinned_arena_alloc(w->arena, n, 64, &mine[k]) != T4A_OK) {
      w->bad = 1;
      break;
    }
    memset(mine[k], (int)k, n);
    sizes[k] = n;
  }
  for (size_t k = 0; k < 32; k++) t4a_pinned_arena_free(w->arena, mine[k]);
  return NULL;
}

static void test_threads_alloc_and_free_anywhere(void **state) {
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  /* Allocated here, freed by four other threads. */
  void *ptrs[256];
  for (int i = 0; i < 256; i++) {
    assert_int_equal(t4a_pinned_arena_alloc(a, (size_t)(i + 1) * 997, 0, &ptrs[i]), T4A_OK);
  }
  pthread_t t[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){a, ptrs + 64 * i, 64, 0, 0};
    assert_int_equal(pthread_create(&t[i], NULL, free_all, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.frees, 256);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.foreign_frees, 0);

  /* Four threads allocating and freeing at once (the hooks and the live table concurrently). */
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){a, NULL, 0, 1000u + (uint64_t)i * 7919u, 0};
    assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].bad, 0);
  }
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.allocations, s.frees);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.foreign_frees, 0);
  assert_int_equal(s.host_alloc_calls, s.extents);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fx.fake, &live);
  assert_int_equal(live.host_allocs, s.extents);
  t4a_pinned_arena_destroy(a);
}

/* ---- AddressSanitizer annotations (ASan lanes only) ---- */

static void test_asan_sees_overruns_and_freed_memory(void **state) {
#ifdef TEST_ASAN
  fixture *f = *state;
  t4a_pinned_arena *a = make_arena(f, NULL);
  unsigned char *p = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 100, 0, (void **)&p), T4A_OK);
  assert_false(__asan_address_is_poisoned(p));
  assert_false(__asan_address_is_poisoned(p + 99));
  assert_true(__asan_address_is_poisoned(p + 100)); /* past the request, inside the class */
  t4a_pinned_arena_free(a, p);
  assert_true(__asan_address_is_poisoned(p)); /* freed */
  unsigned char *q = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 104, 0, (void **)&q), T4A_OK);
  assert_false(__asan_address_is_poisoned(q + 103));
  unsigned char *big = NULL;
  assert_int_equal(t4a_pinned_arena_alloc(a, 3 * MIB + 5, 0, (void **)&big), T4A_OK);
  assert_false(__asan_address_is_poisoned(big + 3 * MIB + 4));
  assert_true(__asan_address_is_poisoned(big + 3 * MIB + 5));
  t4a_pinned_arena_free(a, big);
  assert_true(__asan_address_is_poisoned(big + MIB));
  t4a_pinned_arena_free(a, q);
  t4a_pinned_arena_destroy(a);
#else
  (void)state;
  skip();
#endif
}

/* ---- failure sweeps ---- */

typedef t4a_status (*op_fn)(fixture *f);
typedef void (*step_fn)(fixture *f);

/* Restores this thread's error detail (after cleanup that ran driver calls). */
static void restore_error(const t4a_error *e) {
  (void)t4a_error_set_(e->status, e->entry, e->code, e->code_name, e->bytes, "%s", e->message);
}

/* create, a small and a large allocation (each needs a new region), free, destroy. */
static t4a_status op_arena_cycle(fixture *f) {
  t4a_pinned_arena *a = NULL;
  t4a_status st = t4a_pinned_arena_create(f->holder, NULL, &a);
  if (st != T4A_OK) {
    assert_null(a);
    return st;
  }
  void *small = NULL, *large = NULL;
  st = t4a_pinned_arena_alloc(a, 1000, 0, &small);
  if (st == T4A_OK) {
    memset(small, 1, 1000);
    st = t4a_pinned_arena_alloc(a, 3 * MIB, 4096, &large);
    if (st == T4A_OK) {
      memset(large, 2, 3 * MIB);
    } else {
      assert_null(large);
    }
  } else {
    assert_null(small);
  }
  t4a_error e;
  t4a_error_last(&e);
  t4a_pinned_arena_free(a, large);
  t4a_pinned_arena_free(a, small);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(a, &s);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.allocations, s.frees);
  /* Under failures that persist, destroy cannot activate the context: it leaks and counts. */
  t4a_pinned_arena_destroy(a);
  if (st != T4A_OK) restore_error(&e); /* the sweep checks the alloc's detail */
  return st;
}

/* An allocation in an existing arena (made before the failures start) that needs a new region:
 * activation, cuMemHostAlloc and the bookkeeping inside the alloc hook. */
static t4a_pinned_arena *g_sweep_arena;
static void prepare_arena(fixture *f) { g_sweep_arena = make_arena(f, NULL); }
static void destroy_arena(fixture *f) {
  (void)f;
  t4a_pinned_arena_destroy(g_sweep_arena);
  g_sweep_arena = NULL;
}
static t4a_status op_grow(fixture *f) {
  (void)f;
  void *p = NULL;
  t4a_status st = t4a_pinned_arena_alloc(g_sweep_arena, 24 * MIB, 0, &p);
  struct t4a_pinned_arena_stats s;
  t4a_pinned_arena_stats(g_sweep_arena, &s);
  if (st != T4A_OK) {
    assert_null(p);
    assert_int_equal(s.allocations, 0);
    assert_int_equal(s.bytes_in_use, 0);
    return st;
  }
  assert_int_equal(s.bytes_in_use, 24 * MIB);
  memset(p, 3, 24 * MIB);
  t4a_pinned_arena_free(g_sweep_arena, p);
  return T4A_OK;
}

static int g_host_fail_at = -1, g_host_seen, g_host_persistent;
static int host_fault(t4a_fault_point p, void *user) {
  (void)user;
  if (p != T4A_FAULT_HOST_MALLOC && p != T4A_FAULT_MUTEX_INIT) return 0;
  int i = g_host_seen++;
  return g_host_persistent ? i >= g_host_fail_at : i == g_host_fail_at;
}

static t4a_status want_status(CUresult r, const char *entry) {
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    return strcmp(entry, "cuMemHostAlloc") == 0 ? T4A_HOST_OUT_OF_MEMORY
                                                : T4A_DEVICE_OUT_OF_MEMORY;
  }
  return t4a_status_from_cu(r);
}

typedef struct sweep_spec {
  const char *name;
  step_fn prepare; /* runs before the failures start (may be NULL) */
  op_fn op;
  step_fn cleanup; /* runs after they stop (may be NULL) */
  int persistent;  /* fail every call from the Nth on, not only the Nth */
  int must_fail;   /* some run must fail, typed (else every run must absorb its failure) */
  int host_must_fail; /* some run must fail from a host allocation or mutex init */
} sweep_spec;

/* For N = 0, 1, ...: prepare, make the Nth driver call of op fail (with each of three results),
 * run op, stop the failures, clean up; until op meets no failure. Then the same with the Nth host
 * allocation or mutex init. Each failure must surface as its typed status with full detail, or
 * be absorbed; never a wrong status, and no pinned region may be left that the arena did not
 * count as leaked. */
static void sweep(fixture *f, const sweep_spec *spec) {
  static const CUresult codes[] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_OUT_OF_MEMORY,
                                   CUDA_ERROR_ILLEGAL_ADDRESS};
  int failures_seen = 0, host_alloc_failures = 0, runs = 0, absorbed = 0;
  for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
    int n = 0;
    for (;; n++) {
      assert_true(n < 200);
      if (spec->prepare != NULL) spec->prepare(f);
      t4a_fake_clear_injections(f->fx.fake);
      t4a_fake_inject(f->fx.fake, NULL, (uint64_t)n, spec->persistent ? 100000 : 1, codes[c], 0);
      uint64_t before = t4a_fake_injected(f->fx.fake);
      t4a_error_clear();
      t4a_status st = spec->op(f);
      int fired = t4a_fake_injected(f->fx.fake) != before;
      t4a_fake_clear_injections(f->fx.fake);
      (void)f->raw->cuCtxSetCurrent(NULL);
      t4a_error e;
      t4a_error_last(&e);
      if (spec->cleanup != NULL) spec->cleanup(f);
      runs++;
      if (!fired) {
        assert_int_equal(st, T4A_OK);
        break;
      }
      if (st == T4A_OK) absorbed++;
      if (st != T4A_OK) {
        failures_seen++;
        if (!spec->must_fail) {
          fail_msg("%s: call %d (%s): one failure should be absorbed, got %s", spec->name, n,
                   e.entry, t4a_status_name(st));
        }
        if (st != want_status(codes[c], e.entry)) {
          fail_msg("%s: call %d (%s): got %s, want %s", spec->name, n, e.entry,
                   t4a_status_name(st), t4a_status_name(want_status(codes[c], e.entry)));
        }
        assert_int_equal(e.status, st);
        assert_int_equal(e.code, codes[c]);
        assert_true(strncmp(e.entry, "cu", 2) == 0);
        if (strcmp(e.entry, "cuMemHostAlloc") == 0) {
          host_alloc_failures++;
          assert_true(e.bytes > 0); /* the bytes are named */
        }
      }
      if (unaccounted(f) != 0) fail_msg("%s: failing call %d leaked silently", spec->name, n);
    }
    assert_true(n > 0);
  }
  if (spec->must_fail) {
    assert_true(failures_seen > 0);
    assert_true(host_alloc_failures > 0);
  }
  /* Host allocations and mutex inits. */
  int host_failures = 0;
  for (int n = 0;; n++) {
    assert_true(n < 100);
    if (spec->prepare != NULL) spec->prepare(f);
    g_host_fail_at = n;
    g_host_seen = 0;
    g_host_persistent = spec->persistent;
    t4a_error_clear();
    t4a_fault_set_hook(host_fault, NULL);
    t4a_status st = spec->op(f);
    t4a_fault_set_hook(NULL, NULL);
    (void)f->raw->cuCtxSetCurrent(NULL);
    t4a_error e;
    t4a_error_last(&e);
    if (spec->cleanup != NULL) spec->cleanup(f);
    if (g_host_seen <= n) {
      assert_int_equal(st, T4A_OK);
      break;
    }
    if (st != T4A_OK) { /* else absorbed (jemalloc retried the hook) */
      host_failures++;
      assert_int_equal(st, T4A_HOST_OUT_OF_MEMORY);
      assert_int_equal(e.status, T4A_HOST_OUT_OF_MEMORY);
    }
    if (unaccounted(f) != 0) fail_msg("%s: host failure %d leaked", spec->name, n);
  }
  if (spec->host_must_fail) assert_true(host_failures > 0);
  printf("# sweep %s: %d runs, %d driver failures surfaced (%d in cuMemHostAlloc), %d absorbed, "
         "%d host failures surfaced\n",
         spec->name, runs, failures_seen, host_alloc_failures, absorbed, host_failures);
}

/* create + alloc + free + destroy, each driver call failing once: failures in create surface;
 * one failure inside an allocation's hook is absorbed (jemalloc retries with an exact-size
 * request); failures in destroy leak and count. */
static void test_sweep_arena_cycle_once(void **state) {
  sweep_spec spec = {"cycle once", NULL, op_arena_cycle, NULL, 0, 1, 1};
  sweep(*state, &spec);
}

/* The same with failures that persist from the Nth call on: every path surfaces. */
static void test_sweep_arena_cycle_persistent(void **state) {
  sweep_spec spec = {"cycle persistent", NULL, op_arena_cycle, NULL, 1, 1, 1};
  sweep(*state, &spec);
}

/* A growing allocation in a live arena: a single failure is always absorbed by jemalloc's
 * retry; persistent ones surface, typed, with nothing pinned and nothing recorded as live. */
static void test_sweep_grow(void **state) {
  sweep_spec once = {"grow once", prepare_arena, op_grow, destroy_arena, 0, 0, 0};
  sweep(*state, &once);
  sweep_spec persistent = {"grow persistent", prepare_arena, op_grow, destroy_arena, 1, 1, 0};
  sweep(*state, &persistent);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_mixed_sizes_few_host_allocs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alignment_honoured, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cap_gives_typed_out_of_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_alloc_failure_is_typed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bookkeeping_failure_is_typed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_returns_every_region, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_without_context_leaks_and_counts, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_destroy_free_failure_leaks_one, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_foreign_frees_are_ignored_and_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_min_extent_one_region, setup, teardown),
      cmocka_unit_test_setup_teardown(test_arena_keeps_its_holder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads_alloc_and_free_anywhere, setup, teardown),
      cmocka_unit_test_setup_teardown(test_asan_sees_overruns_and_freed_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sweep_arena_cycle_once, setup, teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_sweep_arena_cycle_persistent, setup,
                                      teardown_counted_leaks),
      cmocka_unit_test_setup_teardown(test_sweep_grow, setup, teardown_counted_leaks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
