/** @file
 * t4a/pinned_arena.h — a pinned host allocator for arbitrary sizes, on a jemalloc arena.
 *
 * Layer: t4a_mem, target //t4a_mem:pinned_arena (on t4a_ctx), apart from //t4a_mem because:
 *
 *   WARNING: linking this target links jemalloc, and jemalloc REPLACES THE WHOLE PROCESS'S
 *   malloc/free/calloc/realloc/posix_memalign (it exports the unprefixed names). Every
 *   allocation of the program, of libcuda and of every other library then goes through
 *   jemalloc. Depend on //t4a_mem:pinned_arena only where that is wanted; nothing else in t4a
 *   links jemalloc. (Under AddressSanitizer the sanitizer's own malloc still wins.)
 *
 * t4a_pinned_arena_alloc() returns page-locked ("pinned") host memory of any size and alignment
 * (up to 64 KiB), fit for asynchronous DMA, from a private jemalloc arena whose extents are carved
 * out of portable cuMemHostAlloc regions. Requests are rounded to jemalloc's size classes (at most
 * 25% over the request); freed memory is cached and reused; a region is never given back before
 * t4a_pinned_arena_destroy(). How the extent hooks, the sanitizer annotations and the tests work:
 * docs/design.md §6; what it costs: docs/performance.md.
 *
 * Requirement on the driver: the memory cuMemHostAlloc returns must not come from jemalloc's own
 * heap (the real driver maps pinned memory itself; see docs/design.md §6 for the fake's).
 *
 * Thread-safety: alloc, free, owns and t4a_pinned_arena_stats may be called concurrently from any threads
 * (an allocation may be freed by another thread than the one that made it). create and destroy
 * must not race with other calls on the same arena.
 *
 * Ownership: the arena holds a reference to the context holder from create to destroy. Memory
 * returned by t4a_pinned_arena_alloc belongs to the caller until t4a_pinned_arena_free; it must
 * not be passed to free() (nor the other way round). Destroying the arena ends every allocation
 * still live. The caller must ensure no device work that reads or writes the memory is still
 * queued when it frees an allocation or destroys the arena (t4a_retire's keepalives exist for
 * that).
 *
 * Errors: out of memory is always a status (never an abort): T4A_HOST_OUT_OF_MEMORY with the
 * requested bytes in the thread's error detail, whose entry is "cuMemHostAlloc" when the driver
 * refused to pin more, "t4a_pinned_arena_alloc" when the arena's cap would be passed, "malloc" or
 * "calloc" when the arena's own bookkeeping could not be allocated. This header compiles without
 * the CUDA toolkit and without jemalloc's headers. */
#ifndef T4A_PINNED_ARENA_H_
#define T4A_PINNED_ARENA_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/ctx.h"
#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The largest alignment t4a_pinned_arena_alloc accepts. */
#define T4A_PINNED_ARENA_MAX_ALIGNMENT ((size_t)64 * 1024)
/** The alignment given when the caller passes 0 (that of max_align_t on x86-64 and aarch64). */
#define T4A_PINNED_ARENA_DEFAULT_ALIGNMENT ((size_t)16)
/** The default smallest cuMemHostAlloc request. */
#define T4A_PINNED_ARENA_DEFAULT_MIN_EXTENT ((size_t)2 * 1024 * 1024)

/** A jemalloc arena over pinned host memory. Opaque. */
typedef struct t4a_pinned_arena t4a_pinned_arena;

/** Options of t4a_pinned_arena_create; zero means the default. */
typedef struct t4a_pinned_arena_options {
  /** Most bytes the arena may pin in all (regions, jemalloc's metadata included). 0: no cap.
   * A cap below about 4 MiB cannot hold the arena's first region (jemalloc's metadata). */
  uint64_t max_pinned_bytes;
  /** Smallest cuMemHostAlloc request, rounded up to 4 KiB. 0: 2 MiB. Larger values mean fewer,
   * larger regions (one 64 MiB region serves many small arenas' worth of allocations). */
  size_t min_extent_bytes;
} t4a_pinned_arena_options;
/** Every option at its default (zero). */
#define T4A_PINNED_ARENA_OPTIONS_INIT {0, 0}

/** Creates an arena whose memory is pinned with the primary context of `holder` current
 * (CU_MEMHOSTALLOC_PORTABLE: the memory is pinned for every context, not only that one). Takes a
 * reference to `holder`. options may be NULL (defaults). Pins the first region at once (about
 * 4 MiB: jemalloc's metadata for the arena, and room for the first extents).
 * Statuses: INVALID_ARGUMENT (holder or out NULL, min_extent_bytes too large);
 * HOST_OUT_OF_MEMORY (bookkeeping, or the first region: see the file comment);
 * UNSUPPORTED (jemalloc runs with opt.xmalloc, which would abort on out of memory);
 * DRIVER_ERROR, CONTEXT_LOST, INVALID_CONTEXT (activation or cuMemHostAlloc failed);
 * INTERNAL (jemalloc refused to create an arena for another reason). On failure *out is NULL and
 * nothing is left pinned. */
T4A_MUST_USE t4a_status t4a_pinned_arena_create(t4a_ctx_holder *holder,
                                                const t4a_pinned_arena_options *options,
                                                t4a_pinned_arena **out);

/** Destroys the jemalloc arena (ending every live allocation), then returns every region to the
 * driver with cuMemFreeHost under the holder's scope, and releases the holder. Never aborts: if
 * the context cannot be activated, or a cuMemFreeHost fails, those regions are leaked and counted
 * in the process totals (regions_leaked, bytes_leaked); if jemalloc refuses to destroy the arena,
 * the whole arena (regions, bookkeeping and holder reference) is leaked and counted
 * (arenas_leaked), because jemalloc still points into it. Accepts NULL. */
void t4a_pinned_arena_destroy(t4a_pinned_arena *arena);

/** Allocates `bytes` of pinned host memory aligned to `alignment` (a power of two up to
 * T4A_PINNED_ARENA_MAX_ALIGNMENT; 0 means T4A_PINNED_ARENA_DEFAULT_ALIGNMENT) and stores it in
 * *out. The contents are unspecified. Usually no driver call: only when no cached memory fits
 * does the arena pin a new region.
 * Statuses: INVALID_ARGUMENT (arena or out NULL, bytes 0, alignment not a power of two or above
 * the maximum); HOST_OUT_OF_MEMORY with `bytes` in the error detail (the cap would be passed,
 * cuMemHostAlloc ran out of memory, or bookkeeping failed: the entry says which);
 * DRIVER_ERROR, CONTEXT_LOST, INVALID_CONTEXT (activating the context or cuMemHostAlloc failed
 * otherwise: entry and CUresult in the detail). On failure *out is NULL and nothing leaked. */
T4A_MUST_USE t4a_status t4a_pinned_arena_alloc(t4a_pinned_arena *arena, size_t bytes,
                                               size_t alignment, void **out);

/** Frees an allocation of this arena, from any thread. The memory stays pinned and cached for
 * later allocations. NULL is ignored. A pointer that is not a live allocation of this arena
 * (never allocated here, already freed, or pointing inside an allocation) is ignored and counted
 * in foreign_frees: it never crashes and never corrupts the arena. */
void t4a_pinned_arena_free(t4a_pinned_arena *arena, void *ptr);

/** Returns 1 if `ptr` points anywhere inside memory this arena has pinned (a live allocation,
 * cached free memory, or jemalloc's metadata), else 0 (also for NULL arguments). Use it to ask
 * "is this host pointer pinned by this arena?", e.g. before choosing a copy path. */
int t4a_pinned_arena_owns(const t4a_pinned_arena *arena, const void *ptr);

/** A snapshot of one arena's counters. Each field is read atomically; fields are not read as one
 * consistent set while other threads allocate. */
struct t4a_pinned_arena_stats {
  uint64_t bytes_pinned;     /**< bytes of the pinned regions held now (metadata included) */
  uint64_t bytes_in_use;     /**< bytes requested by the live allocations (before rounding) */
  uint64_t extents;          /**< pinned regions held now: one cuMemHostAlloc each */
  uint64_t hook_extents;     /**< extents the alloc hook handed to jemalloc (cumulative) */
  uint64_t host_alloc_calls; /**< cuMemHostAlloc calls made, failed ones included */
  uint64_t allocations;      /**< successful t4a_pinned_arena_alloc calls */
  uint64_t frees;            /**< allocations freed */
  uint64_t foreign_frees;    /**< t4a_pinned_arena_free calls ignored (see there) */
};

/** Copies the arena's counters into *out (all zero for a NULL arena). */
void t4a_pinned_arena_stats(const t4a_pinned_arena *arena, struct t4a_pinned_arena_stats *out);

/** Process-wide totals, for what outlives one arena: its teardown. */
struct t4a_pinned_arena_process_stats {
  uint64_t arenas_created; /**< arenas created */
  uint64_t arenas_destroyed; /**< destroyed, whether or not every region could be returned */
  uint64_t arenas_leaked;    /**< jemalloc refused arena.\<i\>.destroy: everything kept (leak) */
  uint64_t regions_freed;    /**< regions returned with cuMemFreeHost */
  uint64_t regions_leaked;   /**< regions never returned (activation or cuMemFreeHost failed) */
  uint64_t bytes_leaked;     /**< their bytes */
};

/** Copies the process-wide totals into *out. Thread-safe. */
void t4a_pinned_arena_process_stats(struct t4a_pinned_arena_process_stats *out);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_PINNED_ARENA_H_ */
