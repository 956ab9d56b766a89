/* The pinned host arena: a private jemalloc arena whose extent hooks take memory from
 * cuMemHostAlloc (portable) and return it with cuMemFreeHost when the arena is destroyed.
 *
 * Pieces:
 *   regions  every cuMemHostAlloc allocation (base, bytes), sorted by base; freed at destroy.
 *   spans    the free space inside the regions that no extent has been carved from yet. jemalloc
 *            never gives an extent back (the dalloc hook refuses), so spans only shrink; the
 *            alloc hook carves from them (best fit) and pins a new region only when none fits.
 *   live     an open-addressing table of the live allocations (pointer -> requested bytes), so
 *            that free() can refuse pointers that are not live allocations instead of handing
 *            them to jemalloc, and bytes_in_use is exact.
 *
 * Locks: `lock` guards regions and spans and is held only briefly (never across a driver call
 * or a call into jemalloc); `grow_lock` serialises the slow path of the alloc hook (the
 * cuMemHostAlloc call, ~160 ms on an H200 host) so that owns() and the other hooks do not wait
 * for it; `live_lock` guards the live table. jemalloc calls the hooks with its own arena locks
 * held, and our hooks take only our locks (and the process malloc, which jemalloc serves from
 * another arena while it is re-entered), so the order is always jemalloc's, then ours.
 *
 * Failure detail from inside the hooks: jemalloc turns any hook failure into a NULL result. The
 * hooks run on the thread that called mallocx / mallctl, so the failing hook copies this
 * thread's t4a error detail into a thread-local note tagged with the arena, and the public call
 * that was waiting for jemalloc reports it (with the caller's bytes) when jemalloc gives up. */
#define _GNU_SOURCE
#include "t4a/pinned_arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <jemalloc/jemalloc.h>

#include "t4a/fault.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

/* ---- AddressSanitizer annotations --------------------------------------------------------- */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(PA_ASAN)
#define PA_ASAN 1
#endif

#ifdef PA_ASAN
/* From <sanitizer/asan_interface.h>, declared here so that no toolchain-specific include path is
 * needed. */
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define PA_POISON(p, n) __asan_poison_memory_region((p), (n))
#define PA_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define PA_POISON(p, n) ((void)(p), (void)(n))
#define PA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- the arena ---------------------------------------------------------------------------- */

#define PA_PAGE ((size_t)4096)
#define PA_MAX_MIN_EXTENT ((size_t)1 << 40)
#define PA_LIVE_INITIAL 64

typedef struct pa_region {
  uintptr_t base;
  size_t bytes;
} pa_region;

typedef struct pa_span {
  uintptr_t start, end;
} pa_span;

typedef struct pa_live {
  uintptr_t ptr; /* 0: empty slot */
  size_t bytes;
} pa_live;

typedef struct pa_stats {
  _Atomic uint64_t bytes_pinned, bytes_in_use, extents, hook_extents, host_alloc_calls,
      allocations, frees, foreign_frees;
} pa_stats;

struct t4a_pinned_arena {
  /* First member: jemalloc passes &hooks to every hook and we get back to the arena from it.
   * jemalloc keeps the pointer for the arena's whole life, so it lives as long as the arena. */
  extent_hooks_t hooks;
  t4a_ctx_holder *holder; /* a reference */
  t4a_driver *driver;     /* borrowed from the holder */
  unsigned index;         /* jemalloc arena index (set once arenas.create succeeded) */
  int num_locks; /* mutexes initialised (for teardown) */
  uint64_t max_pinned;
  size_t min_extent;

  pthread_mutex_t grow_lock;
  pthread_mutex_t lock;
  pa_region *regions; /* sorted by base */
  size_t num_regions, cap_regions;
  pa_span *spans;
  size_t num_spans, cap_spans;
  uint64_t pinned; /* sum of region bytes; changed only under grow_lock (and lock) */

  pthread_mutex_t live_lock;
  pa_live *live;
  size_t live_cap, live_count, live_reserved;

  pa_stats stats;
};

static t4a_pinned_arena *arena_of(extent_hooks_t *hooks) {
  return (t4a_pinned_arena *)((char *)hooks - offsetof(t4a_pinned_arena, hooks));
}

static void stat_add(_Atomic uint64_t *s, uint64_t n) {
  atomic_fetch_add_explicit(s, n, memory_order_relaxed);
}
static void stat_sub(_Atomic uint64_t *s, uint64_t n) {
  atomic_fetch_sub_explicit(s, n, memory_order_relaxed);
}
static uint64_t stat_get(const _Atomic uint64_t *s) {
  return atomic_load_explicit((_Atomic uint64_t *)s, memory_order_relaxed);
}

/* Process-wide totals. */
static _Atomic uint64_t g_arenas_created, g_arenas_destroyed, g_arenas_leaked, g_regions_freed,
    g_regions_leaked, g_bytes_leaked;

/* ---- failure notes from inside the hooks -------------------------------------------------- */

typedef struct pa_note {
  const t4a_pinned_arena *arena; /* the arena this thread is waiting on jemalloc for */
  int failed;
  t4a_error err;
} pa_note;

static _Thread_local pa_note t_note;

static void note_begin(const t4a_pinned_arena *a) {
  t_note.arena = a;
  t_note.failed = 0;
}

static void note_end(void) { t_note.arena = NULL; }

/* Called by a hook that fails, right after this thread's error detail describes the failure.
 * The first failure of a call is kept: it is the cause, and jemalloc's retry (an exact-size
 * request after a failed geometric grow) or a failed scope restore must not replace it. */
static void note_failure(const t4a_pinned_arena *a) {
  if (t_note.arena != a || t_note.failed) return; /* not waiting on this arena, or noted */
  t_note.failed = 1;
  t4a_error_last(&t_note.err);
}

/* ---- regions and spans (lock held) -------------------------------------------------------- */

/* Index of the region containing addr, or SIZE_MAX. */
static size_t region_find_locked(const t4a_pinned_arena *a, uintptr_t addr) {
  size_t lo = 0, hi = a->num_regions;
  while (lo < hi) { /* first region whose base is > addr */
    size_t mid = lo + (hi - lo) / 2;
    if (a->regions[mid].base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return SIZE_MAX;
  const pa_region *r = &a->regions[lo - 1];
  return addr - r->base < r->bytes ? lo - 1 : SIZE_MAX;
}

/* Inserts a region; the caller reserved the capacity. */
static void region_insert_locked(t4a_pinned_arena *a, uintptr_t base, size_t bytes) {
  size_t i = a->num_regions;
  while (i > 0 && a->regions[i - 1].base > base) {
    a->regions[i] = a->regions[i - 1];
    i--;
  }
  a->regions[i] = (pa_region){base, bytes};
  a->num_regions++;
}

/* Adds free space. Pieces smaller than a page are given up (jemalloc asks for whole pages), and
 * so is a piece that finds the span array full: it stays pinned, unused, until destroy. Never
 * fails, so carving never fails once a fit is found. */
static void span_add_locked(t4a_pinned_arena *a, uintptr_t start, uintptr_t end) {
  if (end <= start || end - start < PA_PAGE || a->num_spans == a->cap_spans) return;
  a->spans[a->num_spans++] = (pa_span){start, end};
}

static uintptr_t align_up(uintptr_t x, size_t alignment) {
  return (x + (alignment - 1)) & ~(uintptr_t)(alignment - 1);
}

/* Carves [p, p + size) for a hook request: at new_addr exactly when it is not NULL, otherwise
 * at the given alignment from the smallest span that fits. Returns NULL if nothing fits. */
static void *carve_locked(t4a_pinned_arena *a, void *new_addr, size_t size, size_t alignment) {
  size_t best = SIZE_MAX;
  uintptr_t best_p = 0, best_len = UINTPTR_MAX;
  for (size_t i = 0; i < a->num_spans; i++) {
    const pa_span *s = &a->spans[i];
    uintptr_t p;
    if (new_addr != NULL) {
      p = (uintptr_t)new_addr;
      if (p < s->start || p >= s->end || (p & (alignment - 1)) != 0) continue;
    } else {
      p = align_up(s->start, alignment);
      if (p < s->start || p >= s->end) continue; /* wrapped, or no room after aligning */
    }
    if (s->end - p < size) continue;
    if (s->end - s->start < best_len) {
      best = i;
      best_p = p;
      best_len = s->end - s->start;
    }
  }
  if (best == SIZE_MAX) return NULL;
  pa_span s = a->spans[best];
  a->spans[best] = a->spans[--a->num_spans];
  span_add_locked(a, s.start, best_p);
  span_add_locked(a, best_p + size, s.end);
  return (void *)best_p;
}

/* Grows an array of `elem` bytes per element so that it holds at least `need` elements. */
static int reserve_array(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 8;
  while (n < need) n *= 2;
  void *fresh = t4a_host_calloc(n, elem);
  if (fresh == NULL) return -1;
  if (*arr != NULL) memcpy(fresh, *arr, *cap * elem);
  free(*arr);
  *arr = fresh;
  *cap = n;
  return 0;
}

/* ---- the extent hooks ---------------------------------------------------------------------- */

/* Pins a new region for a request no span can serve, and carves the request from it. Runs with
 * grow_lock held and lock not held. Returns NULL after recording the failure (note_failure). */
static void *grow_pinned(t4a_pinned_arena *a, size_t size, size_t alignment) {
  /* Room for the extent at any alignment the driver's base may have. */
  size_t need = size + (alignment - 1);
  if (need < size || need > SIZE_MAX - PA_PAGE) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "t4a_pinned_arena_alloc", 0, NULL, (uint64_t)size,
                   "an extent of %zu bytes at alignment %zu cannot be pinned", size, alignment);
    note_failure(a);
    return NULL;
  }
  need = (size_t)align_up(need, PA_PAGE);
  size_t want = need > a->min_extent ? need : a->min_extent;

  pthread_mutex_lock(&a->lock);
  uint64_t room = a->max_pinned > a->pinned ? a->max_pinned - a->pinned : 0;
  if (a->max_pinned != 0 && want > room) {
    if (need <= room) {
      want = need; /* the minimum extent does not fit under the cap, the request does */
    } else {
      uint64_t pinned = a->pinned;
      pthread_mutex_unlock(&a->lock);
      t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "t4a_pinned_arena_alloc", 0, NULL, (uint64_t)need,
                     "the arena's cap of %llu pinned bytes would be passed: %llu pinned, %zu more "
                     "needed",
                     (unsigned long long)a->max_pinned, (unsigned long long)pinned, need);
      note_failure(a);
      return NULL;
    }
  }
  /* Reserve the bookkeeping first, so that a successful cuMemHostAlloc is always recorded. */
  int bad = reserve_array((void **)&a->regions, &a->cap_regions, a->num_regions + 1,
                          sizeof *a->regions) != 0 ||
            reserve_array((void **)&a->spans, &a->cap_spans, a->num_spans + 4,
                          sizeof *a->spans) != 0;
  pthread_mutex_unlock(&a->lock);
  if (bad) {
    note_failure(a);
    return NULL;
  }

  t4a_ctx_scope scope;
  if (t4a_ctx_scope_enter(&scope, a->holder, NULL) != T4A_OK) {
    note_failure(a);
    return NULL;
  }
  void *base = NULL;
  stat_add(&a->stats.host_alloc_calls, 1);
  t4a_status st = T4A_CU_BYTES(a->driver, want, cuMemHostAlloc, &base, want,
                               CU_MEMHOSTALLOC_PORTABLE);
  if (st != T4A_OK) {
    /* Name the bytes whatever the failure, and call running out of pinnable memory what it is
     * (host memory), whatever the generic CUresult mapping says. */
    t4a_error e;
    t4a_error_last(&e);
    t4a_error_set_(e.code == CUDA_ERROR_OUT_OF_MEMORY ? T4A_HOST_OUT_OF_MEMORY : st,
                   "cuMemHostAlloc", e.code, e.code_name, want, "cuMemHostAlloc could not pin %zu bytes",
                   want);
    note_failure(a);
    t4a_ctx_scope_exit_quiet(&scope); /* a failed restore must not replace this failure */
    return NULL;
  }
  /* A failed restore is counted by the scope (ctx_restore_failures); the memory is good. */
  t4a_ctx_scope_exit_quiet(&scope);

  pthread_mutex_lock(&a->lock);
  uintptr_t b = (uintptr_t)base;
  region_insert_locked(a, b, want);
  a->pinned += want;
  uintptr_t p = align_up(b, alignment);
  span_add_locked(a, b, p);
  span_add_locked(a, p + size, b + want);
  pthread_mutex_unlock(&a->lock);
  stat_add(&a->stats.bytes_pinned, want);
  stat_add(&a->stats.extents, 1);
  return (void *)p;
}

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena_ind) {
  (void)arena_ind;
  t4a_pinned_arena *a = arena_of(hooks);
  if (alignment == 0) alignment = 1;
  if (size == 0 || (alignment & (alignment - 1)) != 0) return NULL;
  pthread_mutex_lock(&a->lock);
  void *p = carve_locked(a, new_addr, size, alignment);
  pthread_mutex_unlock(&a->lock);
  if (p == NULL && new_addr == NULL) {
    pthread_mutex_lock(&a->grow_lock);
    pthread_mutex_lock(&a->lock); /* another thread may have grown meanwhile */
    p = carve_locked(a, NULL, size, alignment);
    pthread_mutex_unlock(&a->lock);
    if (p == NULL) p = grow_pinned(a, size, alignment);
    pthread_mutex_unlock(&a->grow_lock);
  }
  if (p == NULL) return NULL;
  if (*zero) memset(p, 0, size); /* the driver does not promise zeroed memory */
  *commit = true;
  stat_add(&a->stats.hook_extents, 1);
  return p;
}

/* Refuse: jemalloc keeps the extent (as retained memory) and reuses it. Pinned memory goes back
 * to the driver only at destroy. */
static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                        unsigned arena_ind) {
  (void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
  return true;
}

/* Called for every retained extent by arena.<i>.destroy: nothing to do, destroy frees regions. */
static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                         unsigned arena_ind) {
  (void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
}

static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a,
                       size_t size_b, bool committed, unsigned arena_ind) {
  (void)hooks, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed;
  (void)arena_ind;
  return false; /* allowed */
}

/* Allowed only inside one region: an extent must never straddle two cuMemHostAlloc regions,
 * even adjacent ones, because the driver pins (and DMA maps) each region on its own. */
static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b,
                       size_t size_b, bool committed, unsigned arena_ind) {
  (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
  t4a_pinned_arena *a = arena_of(hooks);
  pthread_mutex_lock(&a->lock);
  size_t ra = region_find_locked(a, (uintptr_t)addr_a);
  size_t rb = region_find_locked(a, (uintptr_t)addr_b);
  pthread_mutex_unlock(&a->lock);
  return !(ra != SIZE_MAX && ra == rb);
}

static const extent_hooks_t pa_hooks = {
    .alloc = hook_alloc,
    .dalloc = hook_dalloc,
    .destroy = hook_destroy,
    .commit = NULL, /* opt out: memory is always committed */
    .decommit = NULL,
    .purge_lazy = NULL, /* opt out: pinned memory is never purged */
    .purge_forced = NULL,
    .split = hook_split,
    .merge = hook_merge,
};

/* ---- the live table ------------------------------------------------------------------------ */

static size_t live_slot(uintptr_t p, size_t mask) {
  uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h ^ (h >> 29)) & mask;
}

static void live_put(pa_live *table, size_t cap, uintptr_t p, size_t bytes) {
  size_t mask = cap - 1, i = live_slot(p, mask);
  while (table[i].ptr != 0) i = (i + 1) & mask;
  table[i] = (pa_live){p, bytes};
}

/* Makes room for one more entry and reserves it. Returns -1 (error recorded) on failure. */
static int live_reserve(t4a_pinned_arena *a) {
  pthread_mutex_lock(&a->live_lock);
  size_t need = a->live_count + a->live_reserved + 1;
  if (need * 2 > a->live_cap) {
    size_t cap = a->live_cap * 2;
    while (need * 2 > cap) cap *= 2;
    pa_live *fresh = t4a_host_calloc(cap, sizeof *fresh);
    if (fresh == NULL) {
      pthread_mutex_unlock(&a->live_lock);
      return -1;
    }
    for (size_t i = 0; i < a->live_cap; i++) {
      if (a->live[i].ptr != 0) live_put(fresh, cap, a->live[i].ptr, a->live[i].bytes);
    }
    free(a->live);
    a->live = fresh;
    a->live_cap = cap;
  }
  a->live_reserved++;
  pthread_mutex_unlock(&a->live_lock);
  return 0;
}

static void live_unreserve(t4a_pinned_arena *a) {
  pthread_mutex_lock(&a->live_lock);
  a->live_reserved--;
  pthread_mutex_unlock(&a->live_lock);
}

static void live_insert(t4a_pinned_arena *a, void *p, size_t bytes) {
  pthread_mutex_lock(&a->live_lock);
  a->live_reserved--;
  live_put(a->live, a->live_cap, (uintptr_t)p, bytes);
  a->live_count++;
  pthread_mutex_unlock(&a->live_lock);
}

/* Removes p; returns 1 and its bytes if it was a live allocation, else 0. */
static int live_remove(t4a_pinned_arena *a, void *ptr, size_t *bytes) {
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&a->live_lock);
  size_t mask = a->live_cap - 1, i = live_slot(p, mask);
  while (a->live[i].ptr != 0 && a->live[i].ptr != p) i = (i + 1) & mask;
  if (a->live[i].ptr == 0) {
    pthread_mutex_unlock(&a->live_lock);
    return 0;
  }
  *bytes = a->live[i].bytes;
  /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
  for (;;) {
    a->live[i].ptr = 0;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (a->live[j].ptr == 0) goto done;
      size_t k = live_slot(a->live[j].ptr, mask);
      /* The entry at j may stay if its home k lies cyclically in (i, j]. */
      int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) break;
    }
    a->live[i] = a->live[j];
    i = j;
  }
done:
  a->live_count--;
  pthread_mutex_unlock(&a->live_lock);
  return 1;
}

/* ---- create and destroy -------------------------------------------------------------------- */

/* Returns every region to the driver under the holder's scope; what cannot be returned is
 * leaked and counted. */
static void release_regions(t4a_pinned_arena *a) {
  if (a->num_regions == 0) return;
  for (size_t i = 0; i < a->num_regions; i++) {
    PA_UNPOISON((void *)a->regions[i].base, a->regions[i].bytes);
  }
  t4a_ctx_scope scope;
  int active = t4a_ctx_scope_enter(&scope, a->holder, NULL) == T4A_OK;
  for (size_t i = 0; i < a->num_regions; i++) {
    const pa_region *r = &a->regions[i];
    if (active && T4A_CU_QUIET(a->driver, cuMemFreeHost, (void *)r->base) == T4A_OK) {
      stat_add(&g_regions_freed, 1);
    } else {
      stat_add(&g_regions_leaked, 1);
      stat_add(&g_bytes_leaked, r->bytes);
    }
  }
  if (active) t4a_ctx_scope_exit_quiet(&scope);
  a->num_regions = 0;
  a->num_spans = 0;
  a->pinned = 0;
}

/* Frees the bookkeeping and drops the holder. */
static void free_arena(t4a_pinned_arena *a) {
  if (a->num_locks > 2) pthread_mutex_destroy(&a->live_lock);
  if (a->num_locks > 1) pthread_mutex_destroy(&a->lock);
  if (a->num_locks > 0) pthread_mutex_destroy(&a->grow_lock);
  t4a_ctx_holder_release(a->holder);
  free(a->regions);
  free(a->spans);
  free(a->live);
  free(a);
}

static t4a_status init_locks(t4a_pinned_arena *a) {
  pthread_mutex_t *locks[3] = {&a->grow_lock, &a->lock, &a->live_lock};
  for (int i = 0; i < 3; i++) {
    int rc = t4a_fault_sim(T4A_FAULT_MUTEX_INIT) ? ENOMEM : pthread_mutex_init(locks[i], NULL);
    if (rc != 0) {
      return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_mutex_init", rc, NULL, 0,
                            "cannot initialise the pinned arena's locks (error %d)", rc);
    }
    a->num_locks++;
  }
  return T4A_OK;
}

/* The detail of a failed jemalloc call: the hook's note if a hook failed, else `fallback`. The
 * message is prefixed with what was being done; `bytes` replaces the note's bytes when not 0. */
static t4a_status report_jemalloc_failure(uint64_t bytes, t4a_status fallback,
                                          const char *entry, const char *what) {
  if (t_note.failed) {
    t4a_error e = t_note.err;
    return t4a_error_set_(e.status, e.entry, e.code, e.code_name, bytes != 0 ? bytes : e.bytes,
                          "%s: %s", what, e.message);
  }
  return t4a_error_set_(fallback, entry, 0, NULL, bytes, "%s: jemalloc refused", what);
}

t4a_status t4a_pinned_arena_create(t4a_ctx_holder *holder, const t4a_pinned_arena_options *options,
                                   t4a_pinned_arena **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (holder == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "holder is NULL");
  }
  t4a_pinned_arena_options o = T4A_PINNED_ARENA_OPTIONS_INIT;
  if (options != NULL) o = *options;
  size_t min_extent = o.min_extent_bytes != 0 ? o.min_extent_bytes
                                              : T4A_PINNED_ARENA_DEFAULT_MIN_EXTENT;
  if (min_extent > PA_MAX_MIN_EXTENT) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "min_extent_bytes %zu is above the limit of %zu", min_extent,
                          PA_MAX_MIN_EXTENT);
  }
  bool xmalloc = false;
  size_t sz = sizeof xmalloc;
  if (mallctl("opt.xmalloc", &xmalloc, &sz, NULL, 0) == 0 && xmalloc) {
    return t4a_error_set_(T4A_UNSUPPORTED, "mallctl", 0, NULL, 0,
                          "jemalloc runs with opt.xmalloc (MALLOC_CONF), which aborts on out of "
                          "memory; the pinned arena needs failures to return");
  }

  t4a_pinned_arena *a = t4a_host_calloc(1, sizeof *a);
  if (a == NULL) return T4A_HOST_OUT_OF_MEMORY;
  a->holder = holder;
  t4a_ctx_holder_retain(holder);
  a->driver = t4a_ctx_holder_driver(holder);
  a->max_pinned = o.max_pinned_bytes;
  a->min_extent = (size_t)align_up(min_extent, PA_PAGE);
  a->hooks = pa_hooks;
  a->live_cap = PA_LIVE_INITIAL;
  a->live = t4a_host_calloc(a->live_cap, sizeof *a->live);
  if (a->live == NULL) {
    free_arena(a);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  t4a_status st = init_locks(a);
  if (st != T4A_OK) {
    free_arena(a);
    return st;
  }

  /* jemalloc allocates the arena's metadata through the hooks at once (a first region). */
  unsigned index = 0;
  extent_hooks_t *hooks = &a->hooks;
  sz = sizeof index;
  note_begin(a);
  int rc = mallctl("arenas.create", &index, &sz, &hooks, sizeof hooks);
  if (rc != 0) {
    st = report_jemalloc_failure(0, T4A_INTERNAL, "mallctl",
                                 "jemalloc could not create the pinned arena");
    note_end();
    release_regions(a);
    free_arena(a);
    return st;
  }
  note_end();
  a->index = index;
  /* Nothing to purge: turn decay off, so freed extents stay dirty and are reused at once instead
   * of going through purge attempts that the hooks refuse anyway. Best effort: with decay on,
   * the arena still works (the refused purges leave the extents retained and reusable). */
  ssize_t never = -1;
  char name[64];
  snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", index);
  (void)mallctl(name, NULL, NULL, &never, sizeof never);
  snprintf(name, sizeof name, "arena.%u.muzzy_decay_ms", index);
  (void)mallctl(name, NULL, NULL, &never, sizeof never);
  stat_add(&g_arenas_created, 1);
  *out = a;
  return T4A_OK;
}

void t4a_pinned_arena_destroy(t4a_pinned_arena *a) {
  if (a == NULL) return;
  char name[64];
  snprintf(name, sizeof name, "arena.%u.destroy", a->index);
  if (mallctl(name, NULL, NULL, NULL, 0) != 0) {
    /* jemalloc still owns the arena and may call our hooks: keep everything, count the leak. */
    stat_add(&g_arenas_leaked, 1);
    stat_add(&g_regions_leaked, a->num_regions);
    stat_add(&g_bytes_leaked, a->pinned);
    return;
  }
  stat_add(&g_arenas_destroyed, 1);
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  release_regions(a);
  free_arena(a);
  t4a_error_restore(&saved);
}

/* ---- allocation ---------------------------------------------------------------------------- */

t4a_status t4a_pinned_arena_alloc(t4a_pinned_arena *a, size_t bytes, size_t alignment,
                                  void **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (a == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "arena is NULL");
  if (bytes == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "a pinned allocation of 0 bytes");
  }
  if (alignment == 0) alignment = T4A_PINNED_ARENA_DEFAULT_ALIGNMENT;
  if ((alignment & (alignment - 1)) != 0 || alignment > T4A_PINNED_ARENA_MAX_ALIGNMENT) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "alignment %zu is not a power of two up to %zu", alignment,
                          T4A_PINNED_ARENA_MAX_ALIGNMENT);
  }
  if (a->max_pinned != 0 && bytes > a->max_pinned) {
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "t4a_pinned_arena_alloc", 0, NULL,
                          (uint64_t)bytes,
                          "a pinned allocation of %zu bytes is above the arena's cap of %llu bytes",
                          bytes, (unsigned long long)a->max_pinned);
  }
  if (live_reserve(a) != 0) { /* the live table could not grow: name the caller's bytes */
    t4a_error e;
    t4a_error_last(&e);
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, e.entry, 0, NULL, (uint64_t)bytes,
                          "pinned allocation of %zu bytes: the arena's live table could not grow: %s",
                          bytes, e.message);
  }
  int lg_align = __builtin_ctzll((unsigned long long)alignment);
  note_begin(a);
  void *p = mallocx(bytes, MALLOCX_ARENA(a->index) | MALLOCX_TCACHE_NONE |
                               MALLOCX_LG_ALIGN(lg_align));
  if (p == NULL) {
    char what[96];
    snprintf(what, sizeof what, "pinned allocation of %zu bytes", bytes);
    t4a_status st = report_jemalloc_failure((uint64_t)bytes, T4A_HOST_OUT_OF_MEMORY, "mallocx",
                                            what);
    note_end();
    live_unreserve(a);
    return st;
  }
  note_end();
  live_insert(a, p, bytes);
#ifdef PA_ASAN
  size_t usable = sallocx(p, 0);
  PA_UNPOISON(p, bytes);
  if (usable > bytes) PA_POISON((char *)p + bytes, usable - bytes);
#endif
  stat_add(&a->stats.allocations, 1);
  stat_add(&a->stats.bytes_in_use, bytes);
  *out = p;
  return T4A_OK;
}

void t4a_pinned_arena_free(t4a_pinned_arena *a, void *ptr) {
  if (a == NULL || ptr == NULL) return;
  size_t bytes = 0;
  if (!live_remove(a, ptr, &bytes)) {
    stat_add(&a->stats.foreign_frees, 1);
    return;
  }
#ifdef PA_ASAN
  PA_POISON(ptr, sallocx(ptr, 0));
#endif
  dallocx(ptr, MALLOCX_TCACHE_NONE);
  stat_add(&a->stats.frees, 1);
  stat_sub(&a->stats.bytes_in_use, bytes);
}

int t4a_pinned_arena_owns(const t4a_pinned_arena *arena, const void *ptr) {
  if (arena == NULL || ptr == NULL) return 0;
  t4a_pinned_arena *a = (t4a_pinned_arena *)arena; /* the lock is internal, mutable state */
  pthread_mutex_lock(&a->lock);
  int owns = region_find_locked(a, (uintptr_t)ptr) != SIZE_MAX;
  pthread_mutex_unlock(&a->lock);
  return owns;
}

void t4a_pinned_arena_stats(const t4a_pinned_arena *a, struct t4a_pinned_arena_stats *out) {
  if (out == NULL) return;
  *out = (struct t4a_pinned_arena_stats){0};
  if (a == NULL) return;
  out->bytes_pinned = stat_get(&a->stats.bytes_pinned);
  out->bytes_in_use = stat_get(&a->stats.bytes_in_use);
  out->extents = stat_get(&a->stats.extents);
  out->hook_extents = stat_get(&a->stats.hook_extents);
  out->host_alloc_calls = stat_get(&a->stats.host_alloc_calls);
  out->allocations = stat_get(&a->stats.allocations);
  out->frees = stat_get(&a->stats.frees);
  out->foreign_frees = stat_get(&a->stats.foreign_frees);
}

void t4a_pinned_arena_process_stats(struct t4a_pinned_arena_process_stats *out) {
  if (out == NULL) return;
  out->arenas_created = stat_get(&g_arenas_created);
  out->arenas_destroyed = stat_get(&g_arenas_destroyed);
  out->arenas_leaked = stat_get(&g_arenas_leaked);
  out->regions_freed = stat_get(&g_regions_freed);
  out->regions_leaked = stat_get(&g_regions_leaked);
  out->bytes_leaked = stat_get(&g_bytes_leaked);
}
