/* Pools, stream-ordered buffers and the same-stream reuse cache. */
#define _GNU_SOURCE
#include "t4a/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"

/* Size classes: up to 2 KiB in 256-byte steps, then 8 classes per power of two (<= 12.5% over). */
#define NUM_CLASSES (8 + 8 * 53)
#define NATIVE_ALIGNMENT 256u
/* Streams whose uses a block remembers one by one; beyond them it is ordered after all. */
#define T4A_BLOCK_MARKS 4

typedef struct block {
  struct block *next_in_class;
  struct block *older, *newer; /* the cache's age list */
  CUdeviceptr ptr;
  size_t bytes; /* bytes actually allocated: the class size when cacheable, else exact */
  uint32_t cls;
  int cacheable; /* allocated at its class size and small enough for the cache */
  /* Uses on other streams of the pool's domain (t4a_buffer_used_on_; under the pool's lock):
   * the pool's stream is ordered after them before the block is reused or freed. */
  t4a_lane_mark_ marks[T4A_BLOCK_MARKS];
  uint8_t num_marks;
  uint8_t marks_overflow; /* more streams than marks: ordered after every stream's work */
} block;

struct t4a_mem_pool {
  atomic_int refs;
  atomic_int abandoned;
  atomic_int closed; /* its owner is gone (t4a_mem_pool_close_): nothing is cached any more */
  t4a_lane *lane; /* a reference */
  t4a_driver *driver;
  t4a_counters *counters;
  CUmemoryPool pool;
  uint64_t device_bytes; /* the device's total memory: larger requests are refused */
  pthread_mutex_t lock;  /* guards the cache and the spare block records */
  block *classes[NUM_CLASSES];
  block *oldest, *newest;
  uint64_t cached_bytes;
  uint32_t cached_blocks;
  uint64_t max_bytes;
  uint32_t max_blocks;
  int reuse;
  block *spare; /* recycled block records (no malloc on the warm path) */
  uint32_t num_spare;
  t4a_buffer *spare_buffers; /* recycled buffer records (linked through next_spare) */
  uint32_t num_spare_buffers;
  _Atomic uint64_t granted; /* bit i: device ordinal i may access the pool (memoised) */
  /* Gauges: blocks held by live buffers (relaxed atomics; the peak is a CAS maximum). */
  _Atomic uint64_t in_use_bytes, in_use_blocks, peak_bytes;
};

struct t4a_buffer {
  atomic_int refs;
  atomic_int quarantined;
  t4a_mem_pool *pool; /* a reference; NULL for a view */
  block *blk;         /* the allocation (its base and class size); NULL for a view */
  CUdeviceptr ptr;    /* aligned address handed out */
  size_t bytes;       /* requested size */
  uint64_t domain;    /* the pool's lane's (read by every launch check: one load) */
  /* A view (t4a_buffer_view_create_): memory t4a_mem did not allocate, kept by its owner. */
  void *owner;
  void (*owner_release)(void *owner);
  t4a_counters *counters; /* the lane's (the owner keeps the lane alive) */
  const char *name;       /* owned by the owner */
  t4a_lane_mark_ alloc_mark; /* its allocation (or reuse) on the pool's stream */
  struct t4a_buffer *next_spare; /* in the pool's spare_buffers while recycled */
};

/* Recycled records kept per pool, each list at most this long (the rest go back to the heap). */
#define SPARE_RECORDS 256u

static uint32_t size_class(size_t bytes, size_t *out_class_bytes) {
  if (bytes <= 2048) {
    size_t n = (bytes + 255) / 256;
    if (n == 0) n = 1;
    *out_class_bytes = n * 256;
    return (uint32_t)(n - 1);
  }
  size_t x = bytes - 1;
  unsigned p = 63u - (unsigned)__builtin_clzll((unsigned long long)x); /* x in [2^p, 2^(p+1)) */
  size_t step = (size_t)1 << (p - 3);
  size_t sub = (x >> (p - 3)) & 7u;
  *out_class_bytes = ((size_t)8 + sub + 1) * step;
  return (uint32_t)(8 + (p - 11) * 8 + sub);
}

/* ---- cache (lock held) ---- */

static void cache_unlink(t4a_mem_pool *p, block *b) {
  block **pp = &p->classes[b->cls];
  while (*pp != b) pp = &(*pp)->next_in_class;
  *pp = b->next_in_class;
  if (b->older) b->older->newer = b->newer;
  else p->oldest = b->newer;
  if (b->newer) b->newer->older = b->older;
  else p->newest = b->older;
  p->cached_bytes -= b->bytes;
  p->cached_blocks--;
}

static block *cache_take(t4a_mem_pool *p, uint32_t cls) {
  block *b = p->classes[cls];
  if (b != NULL) cache_unlink(p, b);
  return b;
}

static void cache_put(t4a_mem_pool *p, block *b) {
  b->next_in_class = p->classes[b->cls];
  p->classes[b->cls] = b;
  b->newer = NULL;
  b->older = p->newest;
  if (p->newest) p->newest->newer = b;
  else p->oldest = b;
  p->newest = b;
  p->cached_bytes += b->bytes;
  p->cached_blocks++;
}

static block *record_get(t4a_mem_pool *p) {
  if (p->spare != NULL) {
    block *b = p->spare;
    p->spare = b->next_in_class;
    p->num_spare--;
    memset(b, 0, sizeof *b);
    return b;
  }
  return NULL;
}

static void record_put(t4a_mem_pool *p, block *b) {
  if (p->num_spare < SPARE_RECORDS) {
    b->next_in_class = p->spare;
    p->spare = b;
    p->num_spare++;
  } else {
    free(b);
  }
}

/* Buffer records (lock held): a released buffer's record serves the next create, so a warm
 * create + release allocates nothing (mem_test.c: test_warm_create_release_allocates_nothing).
 * Every field is set by t4a_buffer_create. */
static t4a_buffer *buffer_record_get(t4a_mem_pool *p) {
  t4a_buffer *b = p->spare_buffers;
  if (b != NULL) {
    p->spare_buffers = b->next_spare;
    p->num_spare_buffers--;
  }
  return b;
}

/* Lock held. Returns 0 when the list is full: the caller frees b. */
static int buffer_record_put(t4a_mem_pool *p, t4a_buffer *b) {
  if (p->num_spare_buffers >= SPARE_RECORDS) return 0;
  b->next_spare = p->spare_buffers;
  p->spare_buffers = b;
  p->num_spare_buffers++;
  return 1;
}

/* Without the lock: recycles b's record or frees it. */
static void buffer_record_recycle(t4a_mem_pool *p, t4a_buffer *b) {
  pthread_mutex_lock(&p->lock);
  int kept = buffer_record_put(p, b);
  pthread_mutex_unlock(&p->lock);
  if (!kept) free(b);
}

static void free_one(t4a_mem_pool *p, block *blk);

/* Orders the pool's stream after the block's uses on other streams of the domain (context
 * active), then forgets them. Nothing to do (no driver call) for a block used only on the pool's
 * stream. On failure nothing is forgotten and the detail is set. */
static t4a_status order_block(t4a_mem_pool *p, block *b) {
  if (b->num_marks == 0 && !b->marks_overflow) return T4A_OK;
  t4a_status st = T4A_OK;
  if (b->marks_overflow) {
    st = t4a_lane_order_after_all_(p->lane);
  } else {
    for (uint8_t i = 0; i < b->num_marks && st == T4A_OK; i++) {
      st = t4a_lane_order_after_(p->lane, b->marks[i]);
    }
  }
  if (st == T4A_OK) {
    b->num_marks = 0;
    b->marks_overflow = 0;
  }
  return st;
}

/* Frees a list of blocks in stream order (context active, lock not held) and recycles their
 * records. A block whose uses on other streams cannot be ordered before its free is leaked and
 * counted. */
static void free_blocks(t4a_mem_pool *p, block *list, int count_trim) {
  for (block *b = list; b != NULL; b = b->next_in_class) {
    t4a_error saved;
    t4a_error_last(&saved);
    t4a_status ordered = order_block(p, b);
    t4a_error_restore(&saved);
    if (ordered != T4A_OK) {
      t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
      if (count_trim) t4a_counter_add(p->counters, T4A_COUNTER_reuse_trimmed, 1);
      continue;
    }
    CUresult r = p->driver->t.cuMemFreeAsync(b->ptr, t4a_lane_stream(p->lane));
    if (r == CUDA_SUCCESS) {
      t4a_counter_add(p->counters, T4A_COUNTER_device_frees, 1);
    } else {
      t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
      if (t4a_cu_is_sticky(r)) {
        /* Record the fault for the lane without touching this thread's error detail. */
        t4a_error cause = {.status = T4A_CONTEXT_LOST, .entry = "cuMemFreeAsync", .code = (int)r,
                           .code_name = t4a_cu_name(p->driver, r)};
        t4a_ctx_holder_mark_lost_(t4a_lane_holder(p->lane), &cause);
      }
    }
    if (count_trim) t4a_counter_add(p->counters, T4A_COUNTER_reuse_trimmed, 1);
  }
  pthread_mutex_lock(&p->lock);
  while (list != NULL) {
    block *next = list->next_in_class;
    record_put(p, list);
    list = next;
  }
  pthread_mutex_unlock(&p->lock);
}

/* Detaches blocks from the cache: all of them, or the oldest until within bounds. */
static block *cache_detach(t4a_mem_pool *p, int all) {
  block *out = NULL;
  while (p->oldest != NULL &&
         (all || p->cached_bytes > p->max_bytes || p->cached_blocks > p->max_blocks)) {
    block *b = p->oldest;
    cache_unlink(p, b);
    b->next_in_class = out;
    out = b;
  }
  return out;
}

/* ---- pools ---- */

t4a_status t4a_mem_pool_create(t4a_lane *lane, const t4a_mem_pool_options *options,
                               t4a_mem_pool **out) {
  if (out == NULL || lane == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lane or out is NULL");
  }
  *out = NULL;
  t4a_mem_pool_options o = T4A_MEM_POOL_OPTIONS_INIT;
  if (options != NULL) o = *options;
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_driver *d = t4a_lane_driver(lane);
  t4a_ctx_holder *h = t4a_lane_holder(lane);
  t4a_mem_pool *p = t4a_host_calloc(1, sizeof *p);
  if (p == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a pool lock");
  }
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, h, t4a_lane_counters(lane))) != T4A_OK) goto fail;
  int supported = 0;
  size_t total = 0;
  st = T4A_CU(d, cuDeviceGetAttribute, &supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
              t4a_ctx_holder_device(h));
  if (st == T4A_OK) st = T4A_CU(d, cuDeviceTotalMem, &total, t4a_ctx_holder_device(h));
  if (st == T4A_OK && !supported) {
    st = t4a_error_set_(T4A_UNSUPPORTED, "cuMemPoolCreate", 0, NULL, 0,
                        "device %d does not support memory pools", t4a_lane_ordinal(lane));
  }
  if (st == T4A_OK) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)t4a_ctx_holder_device(h);
    st = T4A_CU(d, cuMemPoolCreate, &p->pool, &props);
    if (st == T4A_OK) {
      cuuint64_t threshold =
          o.release_threshold_bytes ? (cuuint64_t)o.release_threshold_bytes : UINT64_MAX;
      st = T4A_CU(d, cuMemPoolSetAttribute, p->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                  &threshold);
      if (st != T4A_OK) (void)T4A_CU_QUIET(d, cuMemPoolDestroy, p->pool);
    }
  }
  t4a_ctx_scope_exit_quiet(&scope); /* a failed restore is counted (ctx_restore_failures) */
  if (st != T4A_OK) {
    t4a_lane_note_(lane, st);
    goto fail;
  }
  atomic_init(&p->refs, 1);
  atomic_init(&p->abandoned, 0);
  atomic_init(&p->closed, 0);
  p->lane = lane;
  t4a_lane_retain(lane);
  p->driver = d;
  p->counters = t4a_lane_counters(lane);
  p->device_bytes = total;
  p->max_bytes = o.reuse_max_bytes ? o.reuse_max_bytes : (uint64_t)256 << 20;
  p->max_blocks = o.reuse_max_blocks ? o.reuse_max_blocks : 1024;
  p->reuse = !o.reuse_disabled;
  *out = p;
  return T4A_OK;
fail:
  pthread_mutex_destroy(&p->lock);
  free(p);
  return st;
}

void t4a_mem_pool_retain(t4a_mem_pool *p) {
  if (p != NULL) atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void t4a_mem_pool_abandon_(t4a_mem_pool *p) {
  if (p == NULL) return;
  atomic_store_explicit(&p->abandoned, 1, memory_order_relaxed);
  /* An abandoned pool never frees: its cached blocks are leaked and counted now, not at a last
   * release that a buffer held for ever (a quarantine) would never make. */
  pthread_mutex_lock(&p->lock);
  block *cached = cache_detach(p, 1);
  pthread_mutex_unlock(&p->lock);
  uint64_t n = 0;
  while (cached != NULL) {
    block *next = cached->next_in_class;
    free(cached);
    cached = next;
    n++;
  }
  t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, n);
}

void t4a_mem_pool_close_(t4a_mem_pool *p) {
  if (p == NULL) return;
  /* Under the lock: a release racing with this either cached its block before (the caller's
   * trim or abandon that follows takes it) or sees the flag. */
  pthread_mutex_lock(&p->lock);
  atomic_store_explicit(&p->closed, 1, memory_order_relaxed);
  pthread_mutex_unlock(&p->lock);
}

void t4a_mem_pool_release(t4a_mem_pool *p) {
  if (p == NULL || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  block *cached = cache_detach(p, 1);
  t4a_ctx_scope scope;
  /* During a capture the frees would be recorded into the graph: leaked (counted) instead. */
  if (!atomic_load_explicit(&p->abandoned, memory_order_relaxed) &&
      !t4a_lane_is_abandoned(p->lane) && !t4a_lane_is_broken(p->lane) &&
      !t4a_lane_is_capturing(p->lane) &&
      t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters) == T4A_OK) {
    free_blocks(p, cached, 0);
    /* Destroying a pool with frees still queued is defined: the driver releases it once they
     * complete. */
    if (T4A_CU_QUIET(p->driver, cuMemPoolDestroy, p->pool) != T4A_OK) {
      t4a_counter_add(p->counters, T4A_COUNTER_pools_leaked, 1);
    }
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    /* No proved drain or no context: leak the pool and its cached blocks, counted (A5). */
    uint64_t n = 0;
    while (cached != NULL) {
      block *next = cached->next_in_class;
      free(cached);
      cached = next;
      n++;
    }
    t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, n);
    t4a_counter_add(p->counters, T4A_COUNTER_pools_leaked, 1);
  }
  while (p->spare != NULL) {
    block *next = p->spare->next_in_class;
    free(p->spare);
    p->spare = next;
  }
  while (p->spare_buffers != NULL) {
    t4a_buffer *next = p->spare_buffers->next_spare;
    free(p->spare_buffers);
    p->spare_buffers = next;
  }
  pthread_mutex_destroy(&p->lock);
  t4a_lane_release(p->lane);
  free(p);
  t4a_error_restore(&saved);
}

t4a_status t4a_mem_pool_trim(t4a_mem_pool *p) {
  if (p == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pool is NULL");
  t4a_status st = t4a_lane_check(p->lane);
  if (st != T4A_OK) return st;
  if (t4a_lane_is_capturing(p->lane)) {
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "lane %llu is capturing a graph: trim after the capture",
                          (unsigned long long)t4a_lane_domain(p->lane));
  }
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters)) != T4A_OK) {
    return st;
  }
  pthread_mutex_lock(&p->lock);
  block *cached = cache_detach(p, 1);
  pthread_mutex_unlock(&p->lock);
  free_blocks(p, cached, 1);
  /* Trimming cannot release memory behind frees that have not executed: let the stream reach
   * them first (a counted host wait). */
  t4a_counter_add(p->counters, T4A_COUNTER_host_waits, 1);
  st = t4a_lane_note_(p->lane, T4A_CU(p->driver, cuStreamSynchronize, t4a_lane_stream(p->lane)));
  if (st == T4A_OK) st = t4a_lane_note_(p->lane, T4A_CU(p->driver, cuMemPoolTrimTo, p->pool, 0));
  if (st == T4A_OK) return t4a_ctx_scope_exit(&scope);
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}

t4a_lane *t4a_mem_pool_lane(const t4a_mem_pool *p) { return p != NULL ? p->lane : NULL; }
uint64_t t4a_mem_pool_domain(const t4a_mem_pool *p) {
  return p != NULL ? t4a_lane_domain(p->lane) : 0;
}

t4a_status t4a_mem_pool_query_release_threshold(t4a_mem_pool *p, uint64_t *out_bytes) {
  if (p == NULL || out_bytes == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pool or out is NULL");
  }
  *out_bytes = 0;
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters);
  if (st != T4A_OK) return st;
  cuuint64_t v = 0;
  st = T4A_CU(p->driver, cuMemPoolGetAttribute, p->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    return st;
  }
  *out_bytes = v;
  return t4a_ctx_scope_exit(&scope);
}

t4a_status t4a_mem_pool_grant_access(t4a_mem_pool *p, t4a_ctx_holder *peer) {
  if (p == NULL || peer == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pool or peer holder is NULL");
  }
  t4a_ctx_holder *own = t4a_lane_holder(p->lane);
  int ordinal = t4a_ctx_holder_ordinal(peer);
  if (ordinal == t4a_ctx_holder_ordinal(own)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "device %d is the pool's own device", ordinal);
  }
  uint64_t bit = (uint64_t)1 << (ordinal & 63); /* holders exist only for ordinals below 64 */
  if (atomic_load_explicit(&p->granted, memory_order_acquire) & bit) return T4A_OK;
  int can = 0;
  t4a_status st = t4a_device_can_access_peer(p->driver, ordinal, t4a_ctx_holder_ordinal(own), &can);
  if (st != T4A_OK) return st;
  if (!can) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuDeviceCanAccessPeer", 0, NULL, 0,
                          "device %d cannot access device %d's memory pool", ordinal,
                          t4a_ctx_holder_ordinal(own));
  }
  if ((st = t4a_lane_check(p->lane)) != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, own, p->counters)) != T4A_OK) return st;
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = (int)t4a_ctx_holder_device(peer);
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  st = T4A_CU(p->driver, cuMemPoolSetAccess, p->pool, &desc, 1);
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) return t4a_lane_note_(p->lane, st);
  /* Two threads may both set it: harmless (idempotent), counted once per call that did. */
  atomic_fetch_or_explicit(&p->granted, bit, memory_order_acq_rel);
  t4a_counter_add(p->counters, T4A_COUNTER_pool_access_granted, 1);
  return T4A_OK;
}

static void gauge_take(t4a_mem_pool *p, uint64_t bytes) {
  uint64_t now = atomic_fetch_add_explicit(&p->in_use_bytes, bytes, memory_order_relaxed) + bytes;
  atomic_fetch_add_explicit(&p->in_use_blocks, 1, memory_order_relaxed);
  uint64_t peak = atomic_load_explicit(&p->peak_bytes, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&p->peak_bytes, &peak, now,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
}

static void gauge_give(t4a_mem_pool *p, uint64_t bytes) {
  atomic_fetch_sub_explicit(&p->in_use_bytes, bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&p->in_use_blocks, 1, memory_order_relaxed);
}

t4a_status t4a_mem_pool_gauges(t4a_mem_pool *p, struct t4a_mem_pool_gauges *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (p == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pool or out is NULL");
  }
  t4a_status st = t4a_lane_check(p->lane);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters)) != T4A_OK) {
    return st;
  }
  cuuint64_t reserved = 0, used = 0;
  st = T4A_CU(p->driver, cuMemPoolGetAttribute, p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
              &reserved);
  if (st == T4A_OK) {
    st = T4A_CU(p->driver, cuMemPoolGetAttribute, p->pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                &used);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) return t4a_lane_note_(p->lane, st);
  out->in_use_bytes = atomic_load_explicit(&p->in_use_bytes, memory_order_relaxed);
  out->in_use_blocks = atomic_load_explicit(&p->in_use_blocks, memory_order_relaxed);
  out->peak_in_use_bytes = atomic_load_explicit(&p->peak_bytes, memory_order_relaxed);
  pthread_mutex_lock(&p->lock);
  out->cached_bytes = p->cached_bytes;
  out->cached_blocks = p->cached_blocks;
  pthread_mutex_unlock(&p->lock);
  out->reserved_bytes = reserved;
  out->driver_used_bytes = used;
  return T4A_OK;
}

void t4a_mem_pool_reset_peak(t4a_mem_pool *p) {
  if (p == NULL) return;
  atomic_store_explicit(&p->peak_bytes,
                        atomic_load_explicit(&p->in_use_bytes, memory_order_relaxed),
                        memory_order_relaxed);
}

void t4a_mem_pool_stats(const t4a_mem_pool *p, struct t4a_mem_pool_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  if (p == NULL) return;
  t4a_mem_pool *mp = (t4a_mem_pool *)p;
  pthread_mutex_lock(&mp->lock);
  out->cached_bytes = mp->cached_bytes;
  out->cached_blocks = mp->cached_blocks;
  pthread_mutex_unlock(&mp->lock);
}

/* ---- buffers ---- */

/* Allocates a block of `bytes` from the pool (context active); on out-of-memory, hands the cache
 * back to the pool and retries once. */
static t4a_status pool_alloc(t4a_mem_pool *p, size_t bytes, size_t requested, CUdeviceptr *out) {
  CUstream s = t4a_lane_stream(p->lane);
  t4a_status st =
      T4A_CU_BYTES(p->driver, requested, cuMemAllocFromPoolAsync, out, bytes, p->pool, s);
  if (st == T4A_DEVICE_OUT_OF_MEMORY) {
    pthread_mutex_lock(&p->lock);
    block *cached = cache_detach(p, 1);
    pthread_mutex_unlock(&p->lock);
    if (cached != NULL) {
      /* Hand the cache back, let the stream reach those frees (a counted host wait: this is
       * the rare pressure path), then try once more. */
      free_blocks(p, cached, 1);
      t4a_counter_add(p->counters, T4A_COUNTER_host_waits, 1);
      st = T4A_CU(p->driver, cuStreamSynchronize, s);
      if (st == T4A_OK) {
        st = T4A_CU_BYTES(p->driver, requested, cuMemAllocFromPoolAsync, out, bytes, p->pool, s);
      }
    }
  }
  if (st == T4A_OK) {
    t4a_counter_add(p->counters, T4A_COUNTER_device_allocs, 1);
    t4a_counter_add(p->counters, T4A_COUNTER_device_alloc_bytes, bytes);
  }
  return st;
}

t4a_status t4a_buffer_create(t4a_mem_pool *p, size_t bytes, size_t alignment, uint32_t flags,
                             t4a_buffer **out) {
  if (out == NULL || p == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pool or out is NULL");
  }
  *out = NULL;
  if (bytes == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a buffer of 0 bytes has no address; ask for at least 1 byte");
  }
  if (alignment == 0) alignment = NATIVE_ALIGNMENT;
  if ((alignment & (alignment - 1)) != 0 || alignment > T4A_MEM_MAX_ALIGNMENT) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "alignment %zu is not a power of two up to %zu", alignment,
                          T4A_MEM_MAX_ALIGNMENT);
  }
  if (flags & ~T4A_BUFFER_ZERO) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "unknown buffer flags 0x%x",
                          flags);
  }
  /* Alignment above the pool's native 256 bytes is met by over-allocating. */
  size_t extra = alignment > NATIVE_ALIGNMENT ? alignment - NATIVE_ALIGNMENT : 0;
  if (bytes > p->device_bytes || bytes + extra < bytes || bytes + extra > p->device_bytes) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, (uint64_t)bytes,
                          "%zu bytes (alignment %zu) exceed device %d's %llu bytes of memory",
                          bytes, alignment, t4a_lane_ordinal(p->lane),
                          (unsigned long long)p->device_bytes);
  }
  t4a_status st = t4a_lane_check(p->lane);
  if (st != T4A_OK) return st;
  if (t4a_lane_is_capturing(p->lane)) {
    /* A stream-ordered allocation (or its zero fill) would be recorded into the graph. */
    return t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "lane %llu is capturing a graph: create buffers before the capture",
                          (unsigned long long)t4a_lane_domain(p->lane));
  }

  size_t class_bytes = 0;
  uint32_t cls = size_class(bytes + extra, &class_bytes);
  /* Only blocks the cache can hold are rounded up to their class; others are allocated exactly
   * (no rounding waste when reuse is off or the block exceeds the cache's byte bound). */
  int cacheable = p->reuse && class_bytes <= p->max_bytes;
  size_t alloc_bytes = cacheable ? class_bytes : bytes + extra;
  block *blk = NULL;
  /* A recycled record and a cached block under one lock; cold, the record from the heap first. */
  pthread_mutex_lock(&p->lock);
  t4a_buffer *b = buffer_record_get(p);
  if (b != NULL && cacheable) blk = cache_take(p, cls);
  pthread_mutex_unlock(&p->lock);
  if (b == NULL) {
    if ((b = t4a_host_malloc(sizeof *b)) == NULL) return T4A_HOST_OUT_OF_MEMORY;
    if (cacheable) {
      pthread_mutex_lock(&p->lock);
      blk = cache_take(p, cls);
      pthread_mutex_unlock(&p->lock);
    }
  }
  int need_scope = blk == NULL || (flags & T4A_BUFFER_ZERO) ||
                   (blk != NULL && (blk->num_marks != 0 || blk->marks_overflow));
  t4a_ctx_scope scope;
  if (need_scope &&
      (st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters)) != T4A_OK) {
    if (blk != NULL) {
      pthread_mutex_lock(&p->lock);
      cache_put(p, blk);
      pthread_mutex_unlock(&p->lock);
    }
    free(b);
    return st;
  }
  if (blk != NULL && (blk->num_marks != 0 || blk->marks_overflow)) {
    /* Reused after work of other streams: the pool's stream waits for it first (no host wait).
     * If that cannot be enqueued now, the block stays cached and a fresh one is allocated. */
    t4a_error saved;
    t4a_error_last(&saved);
    if (order_block(p, blk) != T4A_OK) {
      t4a_error_restore(&saved);
      pthread_mutex_lock(&p->lock);
      cache_put(p, blk);
      pthread_mutex_unlock(&p->lock);
      blk = NULL;
    }
  }
  if (blk != NULL) {
    t4a_counter_add(p->counters, T4A_COUNTER_reuse_hits, 1);
  } else {
    pthread_mutex_lock(&p->lock);
    blk = record_get(p);
    pthread_mutex_unlock(&p->lock);
    if (blk == NULL && (blk = t4a_host_calloc(1, sizeof *blk)) == NULL) {
      st = T4A_HOST_OUT_OF_MEMORY;
    } else {
      blk->cls = cls;
      blk->bytes = alloc_bytes;
      blk->cacheable = cacheable;
      st = pool_alloc(p, alloc_bytes, bytes, &blk->ptr);
      if (st != T4A_OK) {
        free(blk);
        blk = NULL;
      } else {
        t4a_counter_add(p->counters, T4A_COUNTER_reuse_misses, 1);
      }
    }
  }
  CUdeviceptr aligned = 0;
  if (st == T4A_OK) aligned = (blk->ptr + (alignment - 1)) & ~(CUdeviceptr)(alignment - 1);
  if (st == T4A_OK && (flags & T4A_BUFFER_ZERO)) {
    st = T4A_CU(p->driver, cuMemsetD8Async, aligned, 0, bytes, t4a_lane_stream(p->lane));
    if (st == T4A_OK) {
      t4a_counter_add(p->counters, T4A_COUNTER_zero_fills, 1);
    } else if (st != T4A_CONTEXT_LOST) {
      /* Nothing else can be using the block: free it in stream order. */
      block *one = blk;
      one->next_in_class = NULL;
      free_blocks(p, one, 0);
      blk = NULL;
    } else {
      t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
      free(blk);
      blk = NULL;
    }
  }
  if (st != T4A_OK) {
    if (need_scope) t4a_ctx_scope_exit_quiet(&scope);
    free(b);
    return t4a_lane_note_(p->lane, st);
  }
  if (need_scope) {
    /* The block is allocated and ordered on the stream; a failed restore is counted
     * (ctx_restore_failures) but does not undo a valid buffer. */
    t4a_ctx_scope_exit_quiet(&scope);
  }
  atomic_init(&b->refs, 1);
  atomic_init(&b->quarantined, 0);
  b->pool = p;
  b->domain = t4a_lane_domain(p->lane);
  t4a_mem_pool_retain(p);
  b->blk = blk;
  b->ptr = aligned;
  b->bytes = bytes;
  /* Another stream of the domain using it first waits for this point of the pool's stream. */
  b->alloc_mark = t4a_lane_grouped_(p->lane) ? t4a_lane_mark_now_(p->lane)
                                             : (t4a_lane_mark_){0, 0, 0};
  gauge_take(p, blk->bytes);
  *out = b;
  return T4A_OK;
}

t4a_status t4a_buffer_use_on_(t4a_buffer *b, t4a_lane *lane) {
  t4a_mem_pool *p = b->pool;
  /* A view's memory (a module global) exists from its module's load: nothing to wait for. */
  if (T4A_LIKELY(p == NULL || p->lane == lane)) return T4A_OK;
  t4a_lane_mark_ mark = b->alloc_mark;
  /* Allocated before the domain had a second stream: the pool's work from then on. */
  if (mark.seq == 0) mark = t4a_lane_mark_origin_(p->lane);
  return t4a_lane_order_after_(lane, mark);
}

void t4a_buffer_facts_get_(const t4a_buffer *b, t4a_buffer_facts_ *out) {
  out->domain = b->domain;
  out->bytes = b->bytes;
  out->ptr = (t4a_devptr)b->ptr;
}

int t4a_buffers_local_(t4a_buffer *const *buffers, uint32_t n, const t4a_lane *lane) {
  for (uint32_t i = 0; i < n; i++) {
    const t4a_buffer *b = buffers[i];
    if (b != NULL && b->pool != NULL && b->pool->lane != lane) return 0;
  }
  return 1;
}

int t4a_buffer_used_on_(t4a_buffer *b, t4a_lane *lane) {
  t4a_mem_pool *p = b->pool;
  /* A view has no block to carry marks: the using stream's epoch keeps it (and its module). */
  if (T4A_LIKELY(p == NULL || p->lane == lane)) return 1;
  t4a_lane_mark_ mark = t4a_lane_mark_now_(lane);
  pthread_mutex_lock(&p->lock);
  block *blk = b->blk;
  uint8_t i = 0;
  while (i < blk->num_marks && blk->marks[i].slot != mark.slot) i++;
  if (i < blk->num_marks) {
    blk->marks[i] = mark;
  } else if (blk->num_marks < T4A_BLOCK_MARKS) {
    blk->marks[blk->num_marks++] = mark;
  } else {
    blk->marks_overflow = 1;
  }
  pthread_mutex_unlock(&p->lock);
  /* Outside a capture the marks order the block's reuse and free: the epoch need not hold it.
   * A captured use is replayed later: the graph keeps the buffer. */
  return t4a_lane_is_capturing(lane);
}

void t4a_buffer_retain(t4a_buffer *b) {
  if (b != NULL) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void t4a_buffer_quarantine(t4a_buffer *b) {
  if (b != NULL) atomic_store_explicit(&b->quarantined, 1, memory_order_relaxed);
}

/* Frees one block in stream order under the pool's context, or leaks and counts it. */
static void free_one(t4a_mem_pool *p, block *blk) {
  t4a_ctx_scope scope;
  if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters) == T4A_OK) {
    blk->next_in_class = NULL;
    free_blocks(p, blk, 0);
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
    free(blk);
  }
}

/* Frees one block of a closed pool (its owner gone: no later drain of the lane covers the free)
 * and waits for the lane's stream to reach it (a counted host wait), so that the block is freed
 * after a proved drain; when the free or the wait fails, or the context cannot be activated, the
 * block is leaked and counted, and the pool abandoned (no drain can be proved any more). */
static void free_proved(t4a_mem_pool *p, block *blk) {
  t4a_ctx_scope scope;
  int freed = 0;
  if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(p->lane), p->counters) == T4A_OK) {
    t4a_status st = order_block(p, blk);
    if (st == T4A_OK) st = T4A_CU(p->driver, cuMemFreeAsync, blk->ptr, t4a_lane_stream(p->lane));
    if (st == T4A_OK) {
      t4a_counter_add(p->counters, T4A_COUNTER_host_waits, 1);
      st = T4A_CU(p->driver, cuStreamSynchronize, t4a_lane_stream(p->lane));
    }
    (void)t4a_lane_note_(p->lane, st); /* a lost context marks the lane's holder */
    freed = st == T4A_OK;
    t4a_ctx_scope_exit_quiet(&scope);
  }
  if (freed) {
    t4a_counter_add(p->counters, T4A_COUNTER_device_frees, 1);
  } else {
    t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
    atomic_store_explicit(&p->abandoned, 1, memory_order_relaxed);
  }
  pthread_mutex_lock(&p->lock);
  record_put(p, blk);
  pthread_mutex_unlock(&p->lock);
}

/* Frees handed to the lane during a capture: a free enqueued then would be recorded into the
 * graph, so they run in stream order right after the capture ended (t4a_lane_defer_capture_). */
typedef struct deferred_frees {
  t4a_mem_pool *pool; /* a reference */
  block *list;        /* linked through next_in_class */
} deferred_frees;

static void run_deferred_frees(void *object) {
  deferred_frees *df = object;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  while (df->list != NULL) {
    block *next = df->list->next_in_class;
    free_one(df->pool, df->list);
    df->list = next;
  }
  t4a_error_restore(&saved);
  t4a_mem_pool_release(df->pool);
  free(df);
}

/* Hands blk and the `over` list to the lane while it captures. Returns 1 if they were taken (run
 * later, or leaked and counted when even that could not be remembered), 0 if the capture ended
 * meanwhile (the caller frees them now). */
static int defer_frees(t4a_mem_pool *p, block *blk, block *over) {
  t4a_error saved;
  t4a_error_last(&saved);
  deferred_frees *df = t4a_host_malloc(sizeof *df);
  t4a_error_restore(&saved);
  if (blk != NULL) {
    blk->next_in_class = over;
    over = blk;
  }
  int deferred = -1;
  if (df != NULL) {
    df->pool = p;
    t4a_mem_pool_retain(p);
    df->list = over;
    deferred = t4a_lane_defer_capture_(p->lane, run_deferred_frees, df);
    if (deferred == 1) {
      t4a_counter_add(p->counters, T4A_COUNTER_frees_deferred, 1);
      return 1;
    }
    t4a_mem_pool_release(p); /* the caller still holds its own reference */
    free(df);
  }
  if (deferred == 0) return 0;
  while (over != NULL) { /* cannot remember them: never freed into a capture, leaked */
    block *next = over->next_in_class;
    free(over);
    t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
    over = next;
  }
  return 1;
}

t4a_status t4a_buffer_view_create_(t4a_lane *lane, t4a_devptr ptr, size_t bytes, const char *name,
                                   void *owner, void (*owner_release)(void *owner),
                                   t4a_buffer **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (lane == NULL || ptr == 0 || bytes == 0 || owner == NULL || owner_release == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a view needs a lane, an address, a size and an owner");
  }
  t4a_buffer *b = t4a_host_calloc(1, sizeof *b);
  if (b == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&b->refs, 1);
  atomic_init(&b->quarantined, 0);
  b->ptr = ptr;
  b->bytes = bytes;
  b->domain = t4a_lane_domain(lane);
  b->owner = owner;
  b->owner_release = owner_release;
  b->counters = t4a_lane_counters(lane);
  b->name = name;
  *out = b;
  return T4A_OK;
}

const char *t4a_buffer_view_name_(const t4a_buffer *b) {
  return b != NULL && b->pool == NULL ? b->name : NULL;
}

/* The last reference of a view: its owner's reference goes, unless the view was quarantined
 * (work touching its memory is of unknown state): then the owner is kept for good, counted. */
static void view_release(t4a_buffer *b) {
  if (atomic_load_explicit(&b->quarantined, memory_order_relaxed)) {
    t4a_counter_add(b->counters, T4A_COUNTER_leaked, 1);
  } else {
    t4a_error saved; /* a drop path never changes the caller's error detail */
    t4a_error_last(&saved);
    b->owner_release(b->owner);
    t4a_error_restore(&saved);
  }
  free(b);
}

void t4a_buffer_release(t4a_buffer *b) {
  if (b == NULL || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  if (b->pool == NULL) {
    view_release(b);
    return;
  }
  t4a_mem_pool *p = b->pool;
  block *blk = b->blk;
  int quarantined = atomic_load_explicit(&b->quarantined, memory_order_relaxed);
  /* From here on only p and blk are used: b's record goes back to the pool (under the cache's
   * lock below when the block is cached, else on its own) before p's reference is dropped. */
  if (blk->num_marks != 0 || blk->marks_overflow) {
    /* Its block carries the marks: the next reuse or free orders after them (no driver call
     * here, no host wait). */
    t4a_counter_add(p->counters, T4A_COUNTER_cross_stream_releases, 1);
  }
  gauge_give(p, blk->bytes); /* a leaked block is no buffer's any more either */
  if (quarantined || t4a_lane_is_broken(p->lane) ||
      atomic_load_explicit(&p->abandoned, memory_order_relaxed)) {
    /* Unknown state, a lost context or an abandoned pool: never free on a guess. */
    t4a_counter_add(p->counters, T4A_COUNTER_buffers_leaked, 1);
    free(blk);
    buffer_record_recycle(p, b);
    t4a_mem_pool_release(p);
    return;
  }
  block *over = NULL;
  int closed = 0;
  if (blk->cacheable) {
    /* Same stream, stream order: the next owner's work runs after ours. No driver call. */
    pthread_mutex_lock(&p->lock);
    closed = atomic_load_explicit(&p->closed, memory_order_relaxed);
    if (!closed) {
      cache_put(p, blk);
      t4a_counter_add(p->counters, T4A_COUNTER_reuse_cached, 1);
      over = cache_detach(p, 0);
      blk = NULL;
    }
    int kept = buffer_record_put(p, b);
    pthread_mutex_unlock(&p->lock);
    if (!kept) free(b);
  } else {
    closed = atomic_load_explicit(&p->closed, memory_order_relaxed);
    buffer_record_recycle(p, b);
  }
  if (closed && !t4a_lane_is_capturing(p->lane)) {
    /* The owner is gone: nobody will drain this lane for us (t4a_facade_test.c:
     * test_release_after_close_then_fault, test_release_after_close_with_quarantine). */
    t4a_error saved; /* a drop path never changes the caller's error detail */
    t4a_error_last(&saved);
    free_proved(p, blk);
    t4a_error_restore(&saved);
    t4a_mem_pool_release(p);
    return;
  }
  if ((blk != NULL || over != NULL) && t4a_lane_is_capturing(p->lane) &&
      defer_frees(p, blk, over)) {
    blk = over = NULL;
  }
  if (blk != NULL || over != NULL) {
    t4a_error saved; /* a drop path never changes the caller's error detail */
    t4a_error_last(&saved);
    if (blk != NULL) free_one(p, blk);
    while (over != NULL) {
      block *next = over->next_in_class;
      free_one(p, over);
      t4a_counter_add(p->counters, T4A_COUNTER_reuse_trimmed, 1);
      over = next;
    }
    t4a_error_restore(&saved);
  }
  t4a_mem_pool_release(p);
}

void t4a_buffer_release_object_(void *b) { t4a_buffer_release(b); }
t4a_devptr t4a_buffer_devptr(const t4a_buffer *b) { return b->ptr; }
size_t t4a_buffer_size(const t4a_buffer *b) { return b->bytes; }
uint64_t t4a_buffer_domain(const t4a_buffer *b) { return b->domain; }
t4a_mem_pool *t4a_buffer_pool(const t4a_buffer *b) { return b->pool; }
