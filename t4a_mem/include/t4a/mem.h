/** @file
 * t4a/mem.h — memory pools, stream-ordered device buffers, pinned host memory.
 *
 * Layer: t4a_mem, on t4a_ctx. (The jemalloc-backed pinned arena is a separate target,
 * //t4a_mem:pinned_arena, because linking jemalloc replaces the process's malloc.)
 *
 * Pools. One explicit CUmemPool per lane (domain), created with the release threshold raised to
 * UINT64_MAX by default: the default threshold of 0 hands memory back to the OS at every
 * synchronisation and makes reuse slow.
 *
 * Buffers. Refcounted handles of stream-ordered device memory on the pool's lane. The last
 * release, from any thread, frees the block in stream order on the lane's stream under the
 * lane's context (cuMemFreeAsync) — no per-buffer event or lease: work already enqueued on the
 * stream that uses the block runs first. Work on another stream must be bracketed by its user so
 * the lane's stream waits for it (t4a_xfer does so).
 *
 * Same-stream reuse cache. A released block is first offered to a bounded per-pool cache keyed by
 * size class (at most 12.5% rounding); the next allocation of that class on the same pool takes it
 * with no driver call. This is safe because all of the pool's allocations live on one stream:
 * whatever the next owner enqueues runs after whatever the previous owner enqueued. The cache is
 * bounded by bytes and blocks (oldest blocks are freed first; a block larger than the byte bound
 * is never cached, and is allocated at its exact size rather than its class), trimmed under
 * allocation pressure (an out-of-memory allocation hands this pool's cache back, waits for the
 * stream and retries once — sibling pools on the same device keep their own reserve) and on
 * t4a_mem_pool_trim(), and counted (reuse_hits, reuse_misses, reuse_cached, reuse_trimmed).
 *
 * Known limit: buffer create and release enqueue on the lane's stream without t4a_retire's
 * operation lock (t4a_mem sits below it), so they must not overlap a graph capture on that stream.
 *
 * Pinned host memory. Portable pinned chunks (CU_MEMHOSTALLOC_PORTABLE: usable from every
 * context, requirement A2), optionally device-mapped; mapped slots for small results the host reads
 * without a driver call after a sync; registration of caller memory, always unregistered.
 *
 * Errors: out of memory is T4A_DEVICE_OUT_OF_MEMORY (device) or T4A_HOST_OUT_OF_MEMORY (pinned)
 * naming the driver call and the bytes — never an abort. Drop paths never abort: a block, pool or
 * pinned chunk whose context cannot be activated is leaked and counted (requirement A5).
 *
 * Thread-safety: every function may be called from any thread. */
#ifndef T4A_MEM_H_
#define T4A_MEM_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The largest alignment a buffer may ask for. */
#define T4A_MEM_MAX_ALIGNMENT ((size_t)64 * 1024)

/* ---- pools ---- */

/** A lane's stream-ordered memory pool with its same-stream reuse cache. Refcounted, opaque. */
typedef struct t4a_mem_pool t4a_mem_pool;

/** Options of t4a_mem_pool_create; zero means the default. */
typedef struct t4a_mem_pool_options {
  uint64_t release_threshold_bytes; /**< 0: UINT64_MAX (keep everything) */
  uint64_t reuse_max_bytes;         /**< 0: 256 MiB cached at most */
  uint32_t reuse_max_blocks;        /**< 0: 1024 blocks cached at most */
  int reuse_disabled;               /**< nonzero: every release frees to the pool */
} t4a_mem_pool_options;
/** Every option at its default (zero). */
#define T4A_MEM_POOL_OPTIONS_INIT {0, 0, 0, 0}

/** Creates the lane's pool (the lane is retained). options may be NULL.
 * Statuses: INVALID_ARGUMENT, LANE_BROKEN, UNSUPPORTED (no memory pools), DRIVER_ERROR,
 * HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_mem_pool_create(t4a_lane *lane, const t4a_mem_pool_options *options,
                                            t4a_mem_pool **out);
/** Adds a reference. Accepts NULL. */
void t4a_mem_pool_retain(t4a_mem_pool *pool);
/** Drops a reference (buffers hold one each). The last frees the cached blocks and destroys the
 * pool under the lane's context — or, if the pool or its lane was abandoned (no proved drain:
 * t4a_retire_destroy abandons the lane), the lane's context is lost, or the context cannot be
 * activated, leaks them and counts (pools_leaked, buffers_leaked for its cached blocks). Accepts
 * NULL. */
void t4a_mem_pool_release(t4a_mem_pool *pool);
/** Returns every cached block to the pool (stream-ordered frees), waits for the lane's stream
 * (a counted host wait: the pool cannot release memory behind frees that have not run) and
 * trims the pool's reserve. Statuses: LANE_BROKEN, driver failures. */
T4A_MUST_USE t4a_status t4a_mem_pool_trim(t4a_mem_pool *pool);
/** @{ */
/** The pool's lane (borrowed) and its allocation domain. */
t4a_lane *t4a_mem_pool_lane(const t4a_mem_pool *pool);
uint64_t t4a_mem_pool_domain(const t4a_mem_pool *pool);
/** @} */
/** The release threshold the driver reports for the pool. */
T4A_MUST_USE t4a_status t4a_mem_pool_query_release_threshold(t4a_mem_pool *pool,
                                                             uint64_t *out_bytes);
/** Lets work running on `peer`'s device read and write this pool's memory (cuMemPoolSetAccess,
 * read-write), once per device for the pool's life (memoised). Peer copies between devices need
 * it; the pool's own device always has access. Statuses: INVALID_ARGUMENT (NULL, or the pool's
 * own device), UNSUPPORTED (the driver says that device cannot reach this one), LANE_BROKEN,
 * driver failures. Counted in pool_access_granted. */
T4A_MUST_USE t4a_status t4a_mem_pool_grant_access(t4a_mem_pool *pool, t4a_ctx_holder *peer);
/** A snapshot of a pool (t4a_mem_pool_stats). */
struct t4a_mem_pool_stats {
  uint64_t cached_bytes;  /**< bytes held by the reuse cache now */
  uint32_t cached_blocks; /**< blocks held by the reuse cache now */
};
/** Copies the pool's figures into *out (all zero for a NULL pool; nothing for a NULL out). */
void t4a_mem_pool_stats(const t4a_mem_pool *pool, struct t4a_mem_pool_stats *out);

/** The pool's memory gauges (t4a_mem_pool_gauges): t4a's view and the driver pool's. */
struct t4a_mem_pool_gauges {
  uint64_t in_use_bytes;      /**< bytes of the blocks live buffers hold (class-rounded) */
  uint64_t in_use_blocks;     /**< blocks live buffers hold */
  uint64_t peak_in_use_bytes; /**< the most in_use_bytes since creation or the last reset */
  uint64_t cached_bytes;      /**< bytes the reuse cache holds (released buffers' blocks) */
  uint64_t cached_blocks;     /**< blocks the reuse cache holds */
  uint64_t reserved_bytes;    /**< memory the driver pool holds from the device
                                   (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) */
  uint64_t driver_used_bytes; /**< memory the driver pool has handed out: in use + cached + frees
                                   not yet run (CU_MEMPOOL_ATTR_USED_MEM_CURRENT) */
};
/** Reads the gauges: t4a's own figures without a driver call, the driver pool's with the lane's
 * context made current. Statuses: INVALID_ARGUMENT (NULL), REENTRY (inside a host function),
 * LANE_BROKEN, driver failures (*out is all zero then). */
T4A_MUST_USE t4a_status t4a_mem_pool_gauges(t4a_mem_pool *pool, struct t4a_mem_pool_gauges *out);
/** Starts a new peak: peak_in_use_bytes becomes the bytes in use now. Accepts NULL. */
void t4a_mem_pool_reset_peak(t4a_mem_pool *pool);

/* ---- buffers ---- */

/** A stream-ordered device buffer of a pool. Refcounted, opaque. */
typedef struct t4a_buffer t4a_buffer;

#define T4A_BUFFER_ZERO 1u /**< zero-fill (stream-ordered) after allocating */

/** Allocates `bytes` (> 0) at `alignment` (0 or a power of two up to 64 KiB; 0 means 256) on the
 * pool's lane, stream-ordered. flags: T4A_BUFFER_ZERO.
 * Statuses: INVALID_ARGUMENT (0 bytes, bad alignment, unknown flag), LIMIT_EXCEEDED (more than
 * the device's memory), DEVICE_OUT_OF_MEMORY (entry and bytes in the detail), LANE_BROKEN,
 * driver failures, HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_buffer_create(t4a_mem_pool *pool, size_t bytes, size_t alignment,
                                          uint32_t flags, t4a_buffer **out);
/** Adds a reference. Accepts NULL. */
void t4a_buffer_retain(t4a_buffer *buffer);
/** Drops a reference; the last one frees the block in stream order (see above). Accepts NULL. */
void t4a_buffer_release(t4a_buffer *buffer);
/** Quarantines the buffer: its content and the work touching it are of unknown state, so its final
 * release leaks the block (counted in buffers_leaked) instead of freeing it on a guess. */
void t4a_buffer_quarantine(t4a_buffer *buffer);

/** @{ */
/** The buffer's device address and size in bytes. */
t4a_devptr t4a_buffer_devptr(const t4a_buffer *buffer);
size_t t4a_buffer_size(const t4a_buffer *buffer);
/** @} */
/** The allocation domain the buffer belongs to (its pool's lane's domain). */
uint64_t t4a_buffer_domain(const t4a_buffer *buffer);
/** The buffer's pool (borrowed); NULL for a view of memory no pool allocated (a module global,
 * t4a_module_get_global in t4a/launch.h), which is otherwise used as any buffer. */
t4a_mem_pool *t4a_buffer_pool(const t4a_buffer *buffer);

/* ---- pinned host memory ---- */

/** Portable pinned host memory (cuMemHostAlloc). Refcounted, opaque. */
typedef struct t4a_pinned t4a_pinned;

#define T4A_PINNED_MAPPED 1u /**< also map into the device address space (CU_MEMHOSTALLOC_DEVICEMAP) */

/** Allocates `bytes` of portable pinned host memory with `holder`'s context active (the holder is
 * retained). Statuses: INVALID_ARGUMENT, HOST_OUT_OF_MEMORY (entry cuMemHostAlloc, bytes),
 * driver failures. */
T4A_MUST_USE t4a_status t4a_pinned_create(t4a_ctx_holder *holder, size_t bytes, uint32_t flags,
                                          t4a_pinned **out);
/** Adds a reference. Accepts NULL. */
void t4a_pinned_retain(t4a_pinned *pinned);
/** The last reference frees the memory (cuMemFreeHost). Accepts NULL. */
void t4a_pinned_release(t4a_pinned *pinned);
/** The host address of the memory. */
void *t4a_pinned_host(const t4a_pinned *pinned);
/** The device address of mapped memory; 0 if not mapped. */
t4a_devptr t4a_pinned_devptr(const t4a_pinned *pinned);
/** The size in bytes. */
size_t t4a_pinned_size(const t4a_pinned *pinned);

/** Mapped slots: fixed-size cells of one device-mapped pinned chunk. The device writes a slot
 * (through its device address); after a sync the host reads it with no driver call. */
typedef struct t4a_slots t4a_slots;
/** Creates `num_slots` slots of `slot_bytes` (rounded up to 64) in one device-mapped pinned
 * chunk allocated with `holder`'s context. Statuses: INVALID_ARGUMENT (out NULL, a zero or too
 * large size or count), HOST_OUT_OF_MEMORY, INTERNAL (a lock could not be initialised), the
 * statuses of t4a_pinned_create. */
T4A_MUST_USE t4a_status t4a_slots_create(t4a_ctx_holder *holder, size_t slot_bytes,
                                         uint32_t num_slots, t4a_slots **out);
/** Destroys the slots; outstanding slot indices become invalid. The caller must have waited for
 * device work writing them. Accepts NULL. */
void t4a_slots_destroy(t4a_slots *slots);
/** Takes a free slot. Status LIMIT_EXCEEDED when all are taken. */
T4A_MUST_USE t4a_status t4a_slot_acquire(t4a_slots *slots, uint32_t *out_index);
/** Gives slot `index` back (a double release, NULL or an index out of range is ignored). */
void t4a_slot_release(t4a_slots *slots, uint32_t index);
/** @{ */
/** Slot `index`'s host address and device address. */
void *t4a_slot_host(const t4a_slots *slots, uint32_t index);
t4a_devptr t4a_slot_devptr(const t4a_slots *slots, uint32_t index);
/** @} */
/** The bytes every slot holds (slot_bytes as created, rounded up to 64). */
size_t t4a_slots_slot_bytes(const t4a_slots *slots);
/** 1 if slot `index` is acquired now, else 0 (also for NULL or an index out of range). */
int t4a_slot_is_acquired(t4a_slots *slots, uint32_t index);

/** Registration of caller memory (page-locks it; mapped with T4A_HOST_REGISTER_MAPPED). */
typedef struct t4a_host_registration t4a_host_registration;
#define T4A_HOST_REGISTER_MAPPED 1u /**< also map the range into the device address space */
/** The pages are read-only (a PROT_READ mapping): CU_MEMHOSTREGISTER_READ_ONLY; UNSUPPORTED where
 * the device cannot (CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED). */
#define T4A_HOST_REGISTER_READ_ONLY 2u
/** Options of t4a_host_register; zero means the default. */
typedef struct t4a_host_register_options {
  uint32_t flags; /**< T4A_HOST_REGISTER_* bits; 0: page-locked, not mapped */
  /** A reference to whatever keeps the range's memory alive (a file mapping, say), handed to the
   * registration: owner_release(owner) drops it right after a successful unregister, never
   * before. Consumed on every path: on failure it is released, except when a failed
   * registration could not be undone — then the range stays registered and the owner is leaked
   * with it (counted), so the memory is never unmapped or reused under the driver. NULL: none. */
  void *owner;
  void (*owner_release)(void *owner); /**< NULL: the owner is not released */
} t4a_host_register_options;
/** Every option at its default (zero). */
#define T4A_HOST_REGISTER_OPTIONS_INIT {0, NULL, NULL}

/** Registers `bytes` of caller memory at `ptr` with the driver (cuMemHostRegister). options may
 * be NULL (every default). Statuses: INVALID_ARGUMENT (NULL or 0 bytes, unknown flag),
 * DRIVER_ERROR (e.g. the range is already registered: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
 * in the detail), HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_host_register(t4a_ctx_holder *holder, void *ptr, size_t bytes,
                                          const t4a_host_register_options *options,
                                          t4a_host_registration **out);
/** Adds a reference. Accepts NULL. */
void t4a_host_registration_retain(t4a_host_registration *reg);
/** The last reference unregisters the range (always; a failure is counted, never ignored
 * silently). Accepts NULL. */
void t4a_host_registration_release(t4a_host_registration *reg);
/** @{ */
/** The registered range's device address (0 unless mapped), host address and size in bytes. */
t4a_devptr t4a_host_registration_devptr(const t4a_host_registration *reg);
void *t4a_host_registration_host(const t4a_host_registration *reg);
size_t t4a_host_registration_size(const t4a_host_registration *reg);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /**< T4A_MEM_H_ */
