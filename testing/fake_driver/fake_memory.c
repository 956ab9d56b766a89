/* testing/fake_driver — memory pools, device allocations, fills and copies, pinned host memory
 * and pointer attributes.
 *
 * Device memory is calloc'ed host memory behind fake device addresses. Each device has its own
 * address range; addresses only grow (never reused) and every allocation is followed by an
 * unmapped gap, so a stale or out-of-bounds address never lands in another live allocation.
 * Copies and fills resolve their addresses when they run; an address outside every live
 * allocation (or one the executing device may not touch) raises the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS on the executing context instead of touching memory.
 *
 * Stream-ordered allocations are operations in their stream (FK_OP_ALLOC): the address is
 * reserved at the call, the block is valid once the operation ran. Executed work is also judged
 * by happens-before (fake_internal.h): each device allocation keeps the epoch of its allocation
 * operation and the last access of every stream; a block freed by a stream operation leaves a
 * tombstone with the free's epoch. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

#define FK_PAGE 4096u

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* ---- pools -------------------------------------------------------------------------------- */

fk_pool *fk_pool_new(t4a_fake *f, int device, int is_default) {
  fk_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  if (!fk_handle_new(f, &p->o, FK_KIND_POOL)) {
    free(p);
    return NULL;
  }
  p->device = device;
  p->is_default = is_default;
  p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
  p->access[device] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  fk_list_push(&f->pools, &p->link);
  if (!is_default) f->live.pools++;
  return p;
}

void fk_pool_free(t4a_fake *f, fk_pool *p) {
  if (p->o.handle != 0) fk_handle_drop(f, &p->o);
  if (!p->is_default && !p->destroyed) f->live.pools--;
  fk_list_remove(&p->link);
  free(p);
}

void fk_pools_trim_on_sync(t4a_fake *f) {
  for (fk_link *l = f->pools.next; l != &f->pools; l = l->next) {
    fk_pool *p = FK_CONTAINER(l, fk_pool, link);
    if (p->reserved > p->threshold) p->reserved = p->used > p->threshold ? p->used : p->threshold;
  }
}

static fk_pool *pool_lookup(t4a_fake *f, CUmemoryPool h) {
  fk_pool *p = fk_handle_get(f, FK_H(h), FK_KIND_POOL);
  return (p == NULL || p->destroyed) ? NULL : p;
}

/* ---- allocations -------------------------------------------------------------------------- */

static CUresult device_alloc(t4a_fake *f, fk_ctx *ctx, int device, fk_pool *pool, size_t bytes,
                             fk_alloc **out) {
  *out = NULL;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  fk_device *d = &f->dev[device];
  if (bytes > d->mem_bytes - d->used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  fk_alloc *a = calloc(1, sizeof *a);
  if (a == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  a->host = calloc(1, bytes);
  if (a->host == NULL) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->base = d->next_addr;
  a->size = bytes;
  a->device = device;
  a->ctx = ctx;
  a->pool = pool;
  a->id = f->next_id++;
  if (!fk_rindex_insert(&f->allocs, a->base, a->size, a)) {
    free(a->host);
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->next_addr += round_up(bytes, FK_PAGE) + FK_PAGE;
  d->used_bytes += bytes;
  f->live.device_allocs++;
  f->live.device_bytes += bytes;
  if (pool != NULL) {
    pool->outstanding++;
    pool->used += bytes;
    if (pool->used > pool->used_high) pool->used_high = pool->used;
    if (pool->used > pool->reserved) pool->reserved = pool->used;
    if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
  }
  *out = a;
  return CUDA_SUCCESS;
}

void fk_alloc_free(t4a_fake *f, fk_alloc *a) {
  fk_rindex_remove(&f->allocs, a->base);
  free(a->acc);
  if (a->device >= 0) {
    f->dev[a->device].used_bytes -= a->size;
    if (!a->module_mem) {
      f->live.device_allocs--;
      f->live.device_bytes -= a->size;
    }
    free(a->host);
    fk_pool *p = a->pool;
    if (p != NULL) {
      p->outstanding--;
      p->used -= a->size;
      if (p->destroyed && p->outstanding == 0) fk_pool_free(f, p);
    }
  } else if (a->pin != NULL) {
    a->pin->map = NULL;
  }
  free(a);
}

CUresult fk_module_alloc(t4a_fake *f, fk_ctx *ctx, size_t bytes, fk_alloc **out) {
  CUresult r = device_alloc(f, ctx, ctx->device, NULL, bytes, out);
  if (r != CUDA_SUCCESS) return r;
  (*out)->module_mem = 1; /* the module is what is live, not an allocation */
  f->live.device_allocs--;
  f->live.device_bytes -= bytes;
  return CUDA_SUCCESS;
}

/* A live device allocation starting exactly at ptr (mappings of host memory and module globals
 * excluded: neither is freed with cuMemFree*). */
static fk_alloc *alloc_at(t4a_fake *f, CUdeviceptr ptr) {
  fk_alloc *a = fk_rindex_find(&f->allocs, ptr, 0);
  if (a == NULL || a->base != ptr || a->device < 0 || a->module_mem) return NULL;
  return a;
}

/* Maps [host, host + bytes) of pin p at fresh fake device addresses. */
static int pin_map(t4a_fake *f, fk_pin *p) {
  fk_alloc *a = calloc(1, sizeof *a);
  if (a == NULL) return 0;
  a->base = f->next_mapped;
  a->size = p->size;
  a->host = p->base;
  a->device = -1;
  a->ctx = p->ctx;
  a->pin = p;
  a->id = p->id;
  if (!fk_rindex_insert(&f->allocs, a->base, a->size, a)) {
    free(a);
    return 0;
  }
  f->next_mapped += round_up(p->size, FK_PAGE) + FK_PAGE;
  p->map = a;
  return 1;
}

void fk_pin_free(t4a_fake *f, fk_pin *p) {
  if (p->map != NULL) fk_alloc_free(f, p->map);
  fk_rindex_remove(&f->pins, (uint64_t)(uintptr_t)p->base);
  if (p->registered) {
    f->live.host_registrations--;
  } else {
    free(p->base);
    f->live.host_allocs--;
  }
  free(p);
}

void fk_memory_reclaim_ctx(t4a_fake *f, fk_ctx *ctx) {
  for (size_t i = f->pins.n; i-- > 0;) {
    fk_pin *p = f->pins.v[i].obj;
    if (p->ctx == ctx) fk_pin_free(f, p);
  }
  for (size_t i = f->allocs.n; i-- > 0;) {
    fk_alloc *a = f->allocs.v[i].obj;
    if (a->ctx == ctx && a->device >= 0 && !a->module_mem) fk_alloc_free(f, a);
  }
}

void fk_memory_free_all(t4a_fake *f) {
  while (f->pins.n > 0) fk_pin_free(f, f->pins.v[f->pins.n - 1].obj);
  while (f->allocs.n > 0) fk_alloc_free(f, f->allocs.v[f->allocs.n - 1].obj);
  while (!fk_list_empty(&f->pools)) fk_pool_free(f, FK_CONTAINER(f->pools.next, fk_pool, link));
  fk_rindex_free(&f->allocs);
  fk_rindex_free(&f->pins);
  for (size_t i = 0; i < f->freed.n; i++) free(f->freed.v[i].obj);
  fk_rindex_free(&f->freed);
}

/* ---- happens-before of executed work -------------------------------------------------------- */

/* Remembers that stream s (running now) touched a (wrote it, when write). */
static void note_access(t4a_fake *f, fk_alloc *a, const fk_stream *s, int write) {
  uint64_t t = fk_vc_at(&s->vc, s->vc_index);
  for (size_t i = 0; i < a->num_acc; i++) {
    if (a->acc[i].stream == s->vc_index) {
      a->acc[i].time = t;
      if (write) a->acc[i].wtime = t;
      return;
    }
  }
  if (a->num_acc == a->cap_acc) {
    size_t cap = a->cap_acc ? a->cap_acc * 2 : 4;
    fk_access *v = realloc(a->acc, cap * sizeof *v);
    if (v == NULL) {
      f->vc_broken = 1;
      return;
    }
    a->acc = v;
    a->cap_acc = cap;
  }
  a->acc[a->num_acc].stream = s->vc_index;
  a->acc[a->num_acc].time = t;
  a->acc[a->num_acc].wtime = write ? t : 0;
  a->num_acc++;
}

/* Whether the running work may touch device allocation a: its allocation must have run and be
 * ordered before. A write must also be ordered after every other stream's last access of the
 * block, and any access after every other stream's last write: the same memory handed to new
 * work on one stream (a reuse cache) while another stream's work on it is still unordered is a
 * use after free the driver cannot see. A violation is counted; the caller raises
 * ILLEGAL_ADDRESS. */
static int ordered_access(t4a_fake *f, fk_alloc *a, uint64_t addr, int write) {
  const fk_stream *s = f->exec;
  if (a->alloc_pending) {
    if (s != NULL) fk_violation(f, "access before the block's stream-ordered allocation ran", addr);
    return 0;
  }
  if (s == NULL || f->vc_broken) return 1;
  if (a->ordered && fk_vc_at(&s->vc, a->alloc_stream) < a->alloc_time) {
    fk_violation(f, "access not ordered after the block's stream-ordered allocation", addr);
    return 0;
  }
  for (size_t i = 0; i < a->num_acc; i++) {
    const fk_access *o = &a->acc[i];
    if (o->stream == s->vc_index) continue;
    uint64_t must = write ? o->time : o->wtime;
    if (must != 0 && fk_vc_at(&s->vc, o->stream) < must) {
      fk_violation(f,
                   write ? "write not ordered after another stream's access of the block"
                         : "access not ordered after another stream's write of the block",
                   addr);
      return 0;
    }
  }
  note_access(f, a, s, write);
  return 1;
}

/* An address outside every live allocation: if a stream-ordered free released it and the running
 * work is not ordered after that free, it is a race, not only a stale pointer. */
static void judge_freed(t4a_fake *f, uint64_t addr, const char *what) {
  const fk_stream *s = f->exec;
  if (s == NULL || f->vc_broken) return;
  const fk_tomb *t = fk_rindex_find(&f->freed, addr, 1);
  if (t != NULL && fk_vc_at(&s->vc, t->stream) < t->time) fk_violation(f, what, addr);
}

/* A stream-ordered free of a running on f->exec: whether it races with the allocation or with
 * another stream's access (counted). */
static int free_races(t4a_fake *f, const fk_alloc *a) {
  const fk_stream *s = f->exec;
  if (a->alloc_pending) {
    fk_violation(f, "stream-ordered free before the block's allocation ran", a->base);
    return 1;
  }
  if (f->vc_broken) return 0;
  if (a->ordered && fk_vc_at(&s->vc, a->alloc_stream) < a->alloc_time) {
    fk_violation(f, "stream-ordered free not ordered after the block's allocation", a->base);
    return 1;
  }
  for (size_t i = 0; i < a->num_acc; i++) {
    if (fk_vc_at(&s->vc, a->acc[i].stream) < a->acc[i].time) {
      fk_violation(f, "stream-ordered free not ordered after another stream's access", a->base);
      return 1;
    }
  }
  return 0;
}

/* Leaves a tombstone for a block a stream-ordered free released (addresses are never reused). */
static void bury(t4a_fake *f, const fk_alloc *a) {
  const fk_stream *s = f->exec;
  if (s == NULL || f->vc_broken) return;
  fk_tomb *t = malloc(sizeof *t);
  if (t == NULL || !fk_rindex_insert(&f->freed, a->base, a->size, t)) {
    free(t);
    f->vc_broken = 1;
    return;
  }
  t->stream = s->vc_index;
  t->time = fk_vc_at(&s->vc, s->vc_index);
}

void fk_run_alloc(t4a_fake *f, const fk_op *op) {
  fk_alloc *a = fk_rindex_find(&f->allocs, op->u.alloc.ptr, 0);
  /* Gone already: a free ran first (counted as a violation then). */
  if (a == NULL || a->id != op->u.alloc.id) return;
  a->alloc_pending = 0;
  if (f->exec != NULL) {
    a->ordered = 1;
    a->alloc_stream = f->exec->vc_index;
    a->alloc_time = fk_vc_at(&f->exec->vc, f->exec->vc_index);
  }
}

/* ---- access from executing work ----------------------------------------------------------- */

unsigned char *fk_resolve_device(t4a_fake *f, fk_ctx *ctx, uint64_t addr, size_t bytes, int write,
                                 int kernel) {
  fk_alloc *a = fk_rindex_find(&f->allocs, addr, bytes);
  if (a == NULL) {
    judge_freed(f, addr,
                "access to a block freed by a stream-ordered free it is not ordered after");
    return NULL;
  }
  if (a->device < 0) {
    /* Mapped host memory: any device may use it, except to write a read-only registration. */
    if (write && a->pin != NULL && (a->pin->flags & CU_MEMHOSTREGISTER_READ_ONLY) &&
        a->pin->registered) {
      return NULL;
    }
  } else if (a->device != ctx->device) {
    if (a->pool != NULL) {
      unsigned need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
      if ((a->pool->access[ctx->device] & need) != need) return NULL;
    } else if (kernel && !ctx->peer[a->device]) {
      return NULL;
    }
  }
  if (a->device >= 0 && !ordered_access(f, a, addr, write)) return NULL;
  return a->host + (addr - a->base);
}

/* Host memory for a copy: pinned memory must still be the same pinned range it was at enqueue. */
static unsigned char *resolve_host(t4a_fake *f, const fk_end *e, size_t bytes, int write) {
  if (e->pin_id != 0) {
    fk_pin *p = fk_rindex_find(&f->pins, e->addr, bytes);
    if (p == NULL || p->id != e->pin_id) return NULL;
    if (write && p->registered && (p->flags & CU_MEMHOSTREGISTER_READ_ONLY)) return NULL;
  }
  return (unsigned char *)(uintptr_t)e->addr;
}

static unsigned char *resolve_end(t4a_fake *f, fk_ctx *ctx, const fk_end *e, size_t bytes,
                                  int write) {
  if (e->device) return fk_resolve_device(f, ctx, e->addr, bytes, write, 0);
  return resolve_host(f, e, bytes, write);
}

void fk_run_copy(t4a_fake *f, fk_ctx *ctx, const fk_op *op) {
  size_t n = op->u.copy.bytes;
  unsigned char *dst = resolve_end(f, ctx, &op->u.copy.dst, n, 1);
  unsigned char *src = resolve_end(f, ctx, &op->u.copy.src, n, 0);
  if (dst == NULL || src == NULL) {
    fk_raise(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    return;
  }
  memmove(dst, src, n);
}

void fk_run_fill(t4a_fake *f, fk_ctx *ctx, const fk_op *op) {
  size_t elem = op->u.fill.elem, count = op->u.fill.count;
  unsigned char *dst = fk_resolve_device(f, ctx, op->u.fill.dst, elem * count, 1, 0);
  if (dst == NULL) {
    fk_raise(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    return;
  }
  if (elem == 1) {
    memset(dst, (int)(op->u.fill.value & 0xFFu), count);
  } else if (elem == 2) {
    uint16_t v = (uint16_t)op->u.fill.value;
    for (size_t i = 0; i < count; i++) memcpy(dst + i * 2, &v, 2);
  } else {
    uint32_t v = op->u.fill.value;
    for (size_t i = 0; i < count; i++) memcpy(dst + i * 4, &v, 4);
  }
}

void fk_run_free(t4a_fake *f, fk_ctx *ctx, const fk_op *op, int healthy) {
  fk_alloc *a = alloc_at(f, op->u.free.ptr);
  if (a != NULL) {
    /* The free happens either way; a race with it faults the freeing context. */
    if (healthy && f->exec != NULL && free_races(f, a)) fk_raise(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    bury(f, a);
    fk_alloc_free(f, a);
  } else if (healthy) {
    /* A free of memory that is already gone (a graph replaying a free node). */
    judge_freed(f, op->u.free.ptr,
                "stream-ordered free of a block that an unordered free released");
    fk_raise(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
  }
}

/* ---- pool entries ------------------------------------------------------------------------- */

CUresult fk_cuMemPoolCreate(t4a_fake *f, CUmemoryPool *pool, const CUmemPoolProps *props) {
  if (pool == NULL || props == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  fk_pool *p = fk_pool_new(f, props->location.id, 0);
  if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *pool = (CUmemoryPool)(uintptr_t)p->o.handle;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemPoolDestroy(t4a_fake *f, CUmemoryPool pool) {
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  if (p->is_default) return CUDA_ERROR_INVALID_VALUE;
  /* Like the driver: the pool goes away once its last allocation is freed. */
  fk_handle_drop(f, &p->o);
  p->destroyed = 1;
  f->live.pools--;
  if (p->outstanding == 0) fk_pool_free(f, p);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemPoolSetAttribute(t4a_fake *f, CUmemoryPool pool, CUmemPool_attribute attr,
                                  void *value) {
  if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  cuuint64_t v64 = 0;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
      int v;
      memcpy(&v, value, sizeof v);
      p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = v != 0;
      return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      memcpy(&v64, value, sizeof v64);
      p->threshold = v64;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      memcpy(&v64, value, sizeof v64);
      if (v64 != 0) return CUDA_ERROR_INVALID_VALUE;
      p->reserved_high = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      memcpy(&v64, value, sizeof v64);
      if (v64 != 0) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fk_cuMemPoolGetAttribute(t4a_fake *f, CUmemoryPool pool, CUmemPool_attribute attr,
                                  void *value) {
  if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  cuuint64_t v64;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
      int v = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
      memcpy(value, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v64 = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v64 = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v64 = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v64 = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v64 = p->used_high; break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(value, &v64, sizeof v64);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemPoolSetAccess(t4a_fake *f, CUmemoryPool pool, const CUmemAccessDesc *map,
                               size_t count) {
  if (map == NULL && count > 0) return CUDA_ERROR_INVALID_VALUE;
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  /* Validate every descriptor before applying any. */
  for (size_t i = 0; i < count; i++) {
    const CUmemAccessDesc *d = &map[i];
    if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!fk_valid_device(f, d->location.id)) return CUDA_ERROR_INVALID_DEVICE;
    if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    int id = d->location.id;
    if (id == p->device) {
      if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
    } else if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
               !(f->opt.all_peers || f->opt.peer[id][p->device])) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
  }
  for (size_t i = 0; i < count; i++) {
    p->access[map[i].location.id] = (unsigned char)map[i].flags;
  }
  return CUDA_SUCCESS;
}

CUresult fk_cuMemPoolTrimTo(t4a_fake *f, CUmemoryPool pool, size_t keep) {
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  if (p->reserved > keep) p->reserved = p->used > keep ? p->used : keep;
  return CUDA_SUCCESS;
}

/* ---- stream-ordered allocation ------------------------------------------------------------ */

static CUresult alloc_async(t4a_fake *f, CUdeviceptr *dptr, size_t bytes, fk_pool *p,
                            fk_stream *s) {
  if (s->cap != NULL) {
    /* Allocation nodes are not modelled: refuse, and break the capture like the driver would
     * for an unsupported operation. */
    fk_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  fk_alloc *a;
  CUresult r = device_alloc(f, s->ctx, p->device, p, bytes, &a);
  if (r != CUDA_SUCCESS) return r;
  /* The address is the caller's at once; the block is valid once this operation runs. */
  fk_op *op = fk_op_new(FK_OP_ALLOC);
  if (op == NULL) {
    fk_alloc_free(f, a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->alloc_pending = 1;
  op->u.alloc.ptr = a->base;
  op->u.alloc.id = a->id;
  *dptr = a->base;
  return fk_submit(f, s, op);
}

CUresult fk_cuMemAllocFromPoolAsync(t4a_fake *f, CUdeviceptr *dptr, size_t bytes,
                                    CUmemoryPool pool, CUstream h) {
  if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_pool *p = pool_lookup(f, pool);
  if (p == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return alloc_async(f, dptr, bytes, p, s);
}

CUresult fk_cuMemAllocAsync(t4a_fake *f, CUdeviceptr *dptr, size_t bytes, CUstream h) {
  if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  return alloc_async(f, dptr, bytes, f->dev[s->ctx->device].default_pool, s);
}

CUresult fk_cuMemFreeAsync(t4a_fake *f, CUdeviceptr ptr, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_alloc *a = alloc_at(f, ptr);
  if (a == NULL || a->free_pending) return CUDA_ERROR_INVALID_VALUE;
  fk_op *op = fk_op_new(FK_OP_FREE);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.free.ptr = ptr;
  /* A captured free runs when the graph does; only a queued one makes the pointer unusable
   * for further frees now. */
  if (s->cap == NULL) a->free_pending = 1;
  return fk_submit(f, s, op);
}

/* ---- synchronous memory ------------------------------------------------------------------- */

CUresult fk_cuMemAlloc(t4a_fake *f, CUdeviceptr *dptr, size_t bytes) {
  if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  fk_alloc *a;
  r = device_alloc(f, ctx, ctx->device, NULL, bytes, &a);
  if (r != CUDA_SUCCESS) return r;
  *dptr = a->base;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemFree(t4a_fake *f, CUdeviceptr ptr) {
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  fk_alloc *a = alloc_at(f, ptr);
  if (a == NULL || a->free_pending) return CUDA_ERROR_INVALID_VALUE;
  /* cuMemFree synchronizes: the owning context's queued work completes first (and a fault
   * that work raises is reported, the memory left in place). */
  if (a->ctx != NULL && a->ctx->alive) {
    fk_ctx *owner = a->ctx;
    r = fk_drain_ctx(f, owner);
    if (r == CUDA_SUCCESS) r = owner->sticky;
    if (r == CUDA_SUCCESS) r = ctx->sticky;
    if (r != CUDA_SUCCESS) return r;
    fk_host_observe_ctx(f, owner);
    a = alloc_at(f, ptr);
    if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  }
  fk_alloc_free(f, a);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemGetInfo(t4a_fake *f, size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes == NULL || total_bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  const fk_device *d = &f->dev[ctx->device];
  *free_bytes = (size_t)(d->mem_bytes - d->used_bytes);
  *total_bytes = (size_t)d->mem_bytes;
  return CUDA_SUCCESS;
}

/* ---- fills and copies --------------------------------------------------------------------- */

static CUresult device_end(fk_end *e, CUdeviceptr p) {
  if (p == 0 || !fk_is_fake_addr(p)) return CUDA_ERROR_INVALID_VALUE;
  e->device = 1;
  e->addr = p;
  e->pin_id = 0;
  return CUDA_SUCCESS;
}

static CUresult host_end(t4a_fake *f, fk_end *e, const void *p, size_t bytes) {
  uint64_t addr = (uint64_t)(uintptr_t)p;
  if (p == NULL || fk_is_fake_addr(addr)) return CUDA_ERROR_INVALID_VALUE;
  e->device = 0;
  e->addr = addr;
  fk_pin *pin = fk_rindex_find(&f->pins, addr, bytes);
  e->pin_id = pin != NULL ? pin->id : 0;
  return CUDA_SUCCESS;
}

/* A unified address: a fake device address, or else a host pointer. */
static CUresult unified_end(t4a_fake *f, fk_end *e, CUdeviceptr p, size_t bytes) {
  if (fk_is_fake_addr(p)) return device_end(e, p);
  return host_end(f, e, (const void *)(uintptr_t)p, bytes);
}

/* Pinned memory without PORTABLE is page-locked for the context that pinned it only; elsewhere
 * the real driver silently falls back to a pageable, synchronous copy. Counted, not refused. */
static void note_pinned_use(t4a_fake *f, const fk_stream *s, const fk_end *e, size_t bytes) {
  if (e->device || e->pin_id == 0) return;
  const fk_pin *p = fk_rindex_find(&f->pins, e->addr, bytes);
  if (p == NULL) return;
  unsigned portable = p->registered ? CU_MEMHOSTREGISTER_PORTABLE : CU_MEMHOSTALLOC_PORTABLE;
  if (!(p->flags & portable) && p->ctx != s->ctx) f->nonportable_pinned_uses++;
}

static CUresult enqueue_copy(t4a_fake *f, fk_stream *s, const fk_end *dst, const fk_end *src,
                             size_t bytes) {
  if (bytes == 0) return CUDA_SUCCESS;
  note_pinned_use(f, s, dst, bytes);
  note_pinned_use(f, s, src, bytes);
  fk_op *op = fk_op_new(FK_OP_COPY);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.copy.dst = *dst;
  op->u.copy.src = *src;
  op->u.copy.bytes = bytes;
  return fk_submit(f, s, op);
}

static CUresult enqueue_fill(t4a_fake *f, CUdeviceptr dst, uint32_t value, size_t elem,
                             size_t count, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_end e;
  r = device_end(&e, dst);
  if (r != CUDA_SUCCESS) return r;
  if ((dst & (elem - 1)) != 0) return CUDA_ERROR_INVALID_VALUE; /* D16: 2-byte, D32: 4-byte */
  if (count > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return CUDA_SUCCESS;
  fk_op *op = fk_op_new(FK_OP_FILL);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.fill.dst = dst;
  op->u.fill.value = value;
  op->u.fill.elem = elem;
  op->u.fill.count = count;
  return fk_submit(f, s, op);
}

CUresult fk_cuMemsetD8Async(t4a_fake *f, CUdeviceptr dst, unsigned char value, size_t n,
                            CUstream h) {
  return enqueue_fill(f, dst, value, 1, n, h);
}

CUresult fk_cuMemsetD16Async(t4a_fake *f, CUdeviceptr dst, unsigned short value, size_t n,
                             CUstream h) {
  return enqueue_fill(f, dst, value, 2, n, h);
}

CUresult fk_cuMemsetD32Async(t4a_fake *f, CUdeviceptr dst, unsigned int value, size_t n,
                             CUstream h) {
  return enqueue_fill(f, dst, value, 4, n, h);
}

CUresult fk_cuMemcpyHtoDAsync(t4a_fake *f, CUdeviceptr dst, const void *src, size_t bytes,
                              CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_end d, e;
  if ((r = device_end(&d, dst)) != CUDA_SUCCESS) return r;
  if ((r = host_end(f, &e, src, bytes)) != CUDA_SUCCESS) return r;
  return enqueue_copy(f, s, &d, &e, bytes);
}

CUresult fk_cuMemcpyDtoHAsync(t4a_fake *f, void *dst, CUdeviceptr src, size_t bytes, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_end d, e;
  if ((r = host_end(f, &d, dst, bytes)) != CUDA_SUCCESS) return r;
  if ((r = device_end(&e, src)) != CUDA_SUCCESS) return r;
  return enqueue_copy(f, s, &d, &e, bytes);
}

CUresult fk_cuMemcpyDtoDAsync(t4a_fake *f, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                              CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_end d, e;
  if ((r = device_end(&d, dst)) != CUDA_SUCCESS) return r;
  if ((r = device_end(&e, src)) != CUDA_SUCCESS) return r;
  return enqueue_copy(f, s, &d, &e, bytes);
}

CUresult fk_cuMemcpyPeerAsync(t4a_fake *f, CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                              CUcontext src_ctx, size_t bytes, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_ctx *dc = fk_ctx_of_handle(f, FK_H(dst_ctx));
  fk_ctx *sc = fk_ctx_of_handle(f, FK_H(src_ctx));
  if ((r = fk_ctx_handle_usable(dc)) != CUDA_SUCCESS) return r;
  if ((r = fk_ctx_handle_usable(sc)) != CUDA_SUCCESS) return r;
  fk_end d, e;
  if ((r = device_end(&d, dst)) != CUDA_SUCCESS) return r;
  if ((r = device_end(&e, src)) != CUDA_SUCCESS) return r;
  return enqueue_copy(f, s, &d, &e, bytes);
}

CUresult fk_cuMemcpyAsync(t4a_fake *f, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                          CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_end d, e;
  if ((r = unified_end(f, &d, dst, bytes)) != CUDA_SUCCESS) return r;
  if ((r = unified_end(f, &e, src, bytes)) != CUDA_SUCCESS) return r;
  return enqueue_copy(f, s, &d, &e, bytes);
}

/* ---- host memory -------------------------------------------------------------------------- */

static fk_pin *pin_new(t4a_fake *f, fk_ctx *ctx, unsigned char *base, size_t bytes,
                       unsigned flags, int registered, int map) {
  fk_pin *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->base = base;
  p->size = bytes;
  p->flags = flags;
  p->registered = registered;
  p->ctx = ctx;
  p->id = f->next_id++;
  if (!fk_rindex_insert(&f->pins, (uint64_t)(uintptr_t)base, bytes, p)) {
    free(p);
    return NULL;
  }
  if (map && !pin_map(f, p)) {
    fk_rindex_remove(&f->pins, (uint64_t)(uintptr_t)base);
    free(p);
    return NULL;
  }
  if (registered) {
    f->live.host_registrations++;
  } else {
    f->live.host_allocs++;
  }
  return p;
}

CUresult fk_cuMemHostAlloc(t4a_fake *f, void **pp, size_t bytes, unsigned int flags) {
  if (pp == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned all = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                 CU_MEMHOSTALLOC_WRITECOMBINED;
  if ((flags & ~all) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  if (bytes > SIZE_MAX - FK_PAGE) return CUDA_ERROR_OUT_OF_MEMORY;
  void *mem = NULL;
  if (posix_memalign(&mem, FK_PAGE, (size_t)round_up(bytes, FK_PAGE)) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(mem, 0, bytes);
  fk_pin *p = pin_new(f, ctx, mem, bytes, flags, 0, (flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0);
  if (p == NULL) {
    free(mem);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pp = mem;
  return CUDA_SUCCESS;
}

CUresult fk_cuMemFreeHost(t4a_fake *f, void *ptr) {
  if (ptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  /* Needs a current context (any: the memory t4a frees is portable), as documented. */
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  fk_pin *p = fk_rindex_find(&f->pins, (uint64_t)(uintptr_t)ptr, 0);
  if (p == NULL || p->base != ptr || p->registered) return CUDA_ERROR_INVALID_VALUE;
  fk_pin_free(f, p);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemHostGetDevicePointer(t4a_fake *f, CUdeviceptr *dptr, void *ptr,
                                      unsigned int flags) {
  if (dptr == NULL || ptr == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  uint64_t addr = (uint64_t)(uintptr_t)ptr;
  fk_pin *p = fk_rindex_find(&f->pins, addr, 1);
  if (p == NULL || p->map == NULL) return CUDA_ERROR_INVALID_VALUE;
  /* Memory that is not portable belongs to the context that pinned it. */
  unsigned portable = p->registered ? CU_MEMHOSTREGISTER_PORTABLE : CU_MEMHOSTALLOC_PORTABLE;
  if (!(p->flags & portable) && p->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  *dptr = p->map->base + (addr - (uint64_t)(uintptr_t)p->base);
  return CUDA_SUCCESS;
}

CUresult fk_cuMemHostRegister(t4a_fake *f, void *ptr, size_t bytes, unsigned int flags) {
  if (ptr == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned all = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if ((flags & ~all) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  if (flags & CU_MEMHOSTREGISTER_IOMEMORY) return CUDA_ERROR_NOT_SUPPORTED;
  uint64_t addr = (uint64_t)(uintptr_t)ptr;
  if (fk_is_fake_addr(addr) || bytes > UINT64_MAX - addr) return CUDA_ERROR_INVALID_VALUE;
  if (fk_rindex_overlap(&f->pins, addr, bytes) != NULL) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  fk_pin *p = pin_new(f, ctx, ptr, bytes, flags, 1, (flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0);
  return p == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult fk_cuMemHostUnregister(t4a_fake *f, void *ptr) {
  if (ptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx; /* needs a current context, as documented */
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  fk_pin *p = fk_rindex_find(&f->pins, (uint64_t)(uintptr_t)ptr, 0);
  if (p == NULL || p->base != ptr || !p->registered) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  fk_pin_free(f, p);
  return CUDA_SUCCESS;
}

/* ---- pointer attributes ------------------------------------------------------------------- */

CUresult fk_cuPointerGetAttribute(t4a_fake *f, void *data, CUpointer_attribute attr,
                                  CUdeviceptr ptr) {
  if (data == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;

  /* What the address is: device memory, a device mapping of host memory, or pinned host memory
   * named by its host address. */
  fk_alloc *a = fk_is_fake_addr(ptr) ? fk_rindex_find(&f->allocs, ptr, 1) : NULL;
  fk_pin *pin = NULL;
  if (a != NULL && a->device < 0) pin = a->pin;
  if (a == NULL) {
    pin = fk_rindex_find(&f->pins, ptr, 1);
    if (pin == NULL) return CUDA_ERROR_INVALID_VALUE;
  }
  int is_device = a != NULL && a->device >= 0;
  fk_ctx *ctx = is_device ? a->ctx : pin->ctx;
  uint64_t base = a != NULL ? a->base : (uint64_t)(uintptr_t)pin->base;
  uint64_t size = a != NULL ? a->size : pin->size;
  uint64_t off = ptr - base;

  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
      CUcontext c = ctx != NULL ? (CUcontext)(uintptr_t)ctx->o.handle : NULL;
      memcpy(data, &c, sizeof c);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
      unsigned t = is_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      memcpy(data, &t, sizeof t);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
      CUdeviceptr d;
      if (a != NULL) {
        d = ptr;
      } else if (pin->map != NULL) {
        d = pin->map->base + off;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
      memcpy(data, &d, sizeof d);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: {
      if (is_device) return CUDA_ERROR_INVALID_VALUE;
      void *h = pin->base + off;
      memcpy(data, &h, sizeof h);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
      int d = is_device ? a->device : (ctx != NULL ? ctx->device : 0);
      memcpy(data, &d, sizeof d);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
      if (!is_device) return CUDA_ERROR_INVALID_VALUE;
      CUmemoryPool p = NULL;
      if (a->pool != NULL) {
        /* A destroyed pool keeps reporting the handle it had. */
        p = (CUmemoryPool)(uintptr_t)(a->pool->o.handle);
      }
      memcpy(data, &p, sizeof p);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: {
      unsigned v = 0;
      memcpy(data, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MAPPED: {
      unsigned v = 1;
      memcpy(data, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: {
      unsigned long long v = a != NULL ? a->id : pin->id;
      memcpy(data, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: {
      CUdeviceptr v = base;
      memcpy(data, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: {
      size_t v = (size_t)size;
      memcpy(data, &v, sizeof v);
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

/* ---- host memory seen by tests ------------------------------------------------------------ */

int t4a_fake_host_alloc_flags(t4a_fake *fake, const void *host_ptr, unsigned *out_flags) {
  if (fake == NULL || host_ptr == NULL) return 0;
  fk_lock();
  int found = 0;
  const fk_pin *p = fk_rindex_find(&fake->pins, (uint64_t)(uintptr_t)host_ptr, 1);
  if (p != NULL && !p->registered) {
    if (out_flags != NULL) *out_flags = p->flags;
    found = 1;
  }
  fk_unlock();
  return found;
}

size_t t4a_fake_host_alloc_bytes(t4a_fake *fake, const void *host_ptr) {
  if (fake == NULL || host_ptr == NULL) return 0;
  fk_lock();
  size_t bytes = 0;
  const fk_pin *p = fk_rindex_find(&fake->pins, (uint64_t)(uintptr_t)host_ptr, 1);
  if (p != NULL && !p->registered && p->base == host_ptr) bytes = p->size;
  fk_unlock();
  return bytes;
}
