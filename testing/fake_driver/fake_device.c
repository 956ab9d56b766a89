/* testing/fake_driver — cuInit, devices, primary contexts and the per-thread current context. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

/* The current context of this thread, as a handle (possibly of a destroyed context, exactly like
 * the real driver's dangling pointer; possibly of an earlier fake, which reads as none). */
static _Thread_local uint64_t t_current;

/* Device facts of an H200 (sm_90) unless the options say otherwise. */
#define FK_SHARED_PER_BLOCK 49152
#define FK_SHARED_OPTIN 232448
#define FK_SHARED_PER_SM 233472
#define FK_L2_BYTES (60 * 1024 * 1024)
#define FK_MAX_PERSISTING_L2 (45 * 1024 * 1024)
#define FK_MAX_WINDOW_BYTES 134213632

int fk_valid_device(t4a_fake *f, CUdevice dev) { return dev >= 0 && dev < f->num_devices; }

int fk_device_setup(t4a_fake *f) {
  for (int d = 0; d < f->num_devices; d++) {
    fk_device *dev = &f->dev[d];
    dev->mem_bytes = f->opt.mem_bytes;
    dev->next_addr = FK_DEVICE_BASE(d) + 0x100000;
    dev->default_pool = fk_pool_new(f, d, 1);
    if (dev->default_pool == NULL) return 0;
  }
  return 1;
}

void fk_device_free_all(t4a_fake *f) {
  while (!fk_list_empty(&f->contexts)) {
    fk_ctx *ctx = FK_CONTAINER(f->contexts.next, fk_ctx, link);
    fk_list_remove(&ctx->link);
    free(ctx);
  }
  for (int d = 0; d < f->num_devices; d++) {
    f->dev[d].primary = NULL;
    if (f->dev[d].pctx != NULL) {
      fk_handle_drop(f, &f->dev[d].pctx->o);
      free(f->dev[d].pctx);
      f->dev[d].pctx = NULL;
    }
  }
}

/* ---- the current context ------------------------------------------------------------------ */

uint64_t fk_current_handle(t4a_fake *f) {
  uint64_t h = t_current;
  if (h == 0) return 0;
  if (((h >> 32) & 0xFFFFu) != (f->generation & 0xFFFFu)) return 0;
  return h;
}

fk_ctx *fk_ctx_of_handle(t4a_fake *f, uint64_t handle) {
  fk_pctx *p = fk_handle_get(f, handle, FK_KIND_CTX);
  return p != NULL ? p->cur : NULL;
}

CUresult fk_ctx_usable(const fk_ctx *ctx) {
  if (ctx == NULL || !ctx->alive) return CUDA_ERROR_INVALID_CONTEXT;
  return ctx->sticky;
}

CUresult fk_ctx_handle_usable(const fk_ctx *ctx) {
  if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return ctx->sticky;
}

CUresult fk_need_current(t4a_fake *f, fk_ctx **out) {
  *out = NULL;
  fk_ctx *ctx = fk_ctx_of_handle(f, fk_current_handle(f));
  CUresult r = fk_ctx_handle_usable(ctx);
  if (r != CUDA_SUCCESS) return r;
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult fk_current_sticky(t4a_fake *f) {
  fk_ctx *ctx = fk_ctx_of_handle(f, fk_current_handle(f));
  if (ctx != NULL && ctx->alive) return ctx->sticky;
  return CUDA_SUCCESS;
}

void fk_raise(fk_ctx *ctx, CUresult r) {
  if (ctx != NULL && ctx->sticky == CUDA_SUCCESS) ctx->sticky = r;
}

/* ---- context life ------------------------------------------------------------------------- */

/* A new incarnation of device `device`'s primary context, behind handle p. */
static fk_ctx *ctx_new(t4a_fake *f, fk_pctx *p, int device) {
  fk_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return NULL;
  ctx->o.kind = FK_KIND_CTX;
  ctx->o.handle = p->o.handle;
  ctx->incarnation = p->cur != NULL ? p->cur->incarnation + 1 : 1;
  ctx->device = device;
  ctx->alive = 1;
  ctx->limits[CU_LIMIT_STACK_SIZE] = 1024;
  ctx->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1u << 20;
  ctx->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8u << 20;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  ctx->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
  fk_list_push(&f->contexts, &ctx->link);
  ctx->null_stream = fk_stream_new(f, ctx, 0, 0, 1);
  if (ctx->null_stream == NULL) {
    ctx->alive = 0; /* stays on the list as a zombie nobody points at */
    return NULL;
  }
  p->cur = ctx;
  return ctx;
}

void fk_ctx_kill(t4a_fake *f, fk_ctx *ctx, int reclaim) {
  /* The handle stays: it names the device's primary context, whose next retain revives it. */
  ctx->alive = 0;
  if (f->dev[ctx->device].primary == ctx) f->dev[ctx->device].primary = NULL;

  /* Queued work never runs: markers complete (so waiters elsewhere are not stuck forever),
   * everything else is dropped. */
  fk_link *l = f->streams.next;
  while (l != &f->streams) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    l = l->next;
    if (s->ctx != ctx) continue;
    if (s->cap != NULL) fk_capture_end_free(f, s);
    fk_stream_discard(f, s);
    if (reclaim || s->is_null || s->user_destroyed) {
      if (s == ctx->null_stream) ctx->null_stream = NULL;
      if (s->pins > 0 || s->visiting) {
        /* An engine loop holds it (a kernel released the context): freed once it lets go. */
        if (s->o.handle != 0) {
          fk_handle_drop(f, &s->o);
          f->live.streams--;
        }
        if (!s->user_destroyed) {
          s->user_destroyed = 1;
          f->zombie_streams++;
        }
      } else {
        fk_stream_free(f, s);
      }
    }
  }
  if (!reclaim) return;

  l = f->events.next;
  while (l != &f->events) {
    fk_event *e = FK_CONTAINER(l, fk_event, link);
    l = l->next;
    if (e->ctx == ctx) fk_event_free(f, e);
  }
  l = f->modules.next;
  while (l != &f->modules) {
    fk_module *m = FK_CONTAINER(l, fk_module, link);
    l = l->next;
    if (m->ctx == ctx) fk_module_free(f, m);
  }
  l = f->execs.next;
  while (l != &f->execs) {
    fk_exec *e = FK_CONTAINER(l, fk_exec, link);
    l = l->next;
    if (e->ctx == ctx) fk_exec_free(f, e);
  }
  fk_memory_reclaim_ctx(f, ctx);
}

/* ---- initialisation and devices ----------------------------------------------------------- */

CUresult fk_cuInit(t4a_fake *f, unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  f->initialized = 1;
  return CUDA_SUCCESS;
}

CUresult fk_cuDriverGetVersion(t4a_fake *f, int *version) {
  if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
  *version = f->opt.driver_version;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGet(t4a_fake *f, CUdevice *device, int ordinal) {
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetCount(t4a_fake *f, int *count) {
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = f->num_devices;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetName(t4a_fake *f, char *name, int len, CUdevice dev) {
  if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "T4A Fake Device %d", dev);
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceGetUuid(t4a_fake *f, CUuuid *uuid, CUdevice dev) {
  if (uuid == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  static const unsigned char k_prefix[8] = {'t', '4', 'a', '-', 'f', 'a', 'k', 'e'};
  memset(uuid, 0, sizeof *uuid);
  memcpy(uuid->bytes, k_prefix, sizeof k_prefix);
  uuid->bytes[15] = (char)(0x10 + dev);
  return CUDA_SUCCESS;
}

/* The attribute's value, or -1 (with *known = 0) for an attribute the fake does not know. */
static int device_attribute(t4a_fake *f, CUdevice_attribute a, int dev, int *known) {
  *known = 1;
  const t4a_fake_options *o = &f->opt;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return FK_SHARED_PER_BLOCK;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return o->sm_count;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + 0x10 * dev;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return FK_L2_BYTES;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return o->cc_major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return o->cc_minor;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return FK_SHARED_PER_SM;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return dev;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    /* 0, unlike real hardware: in the fake a registered host range has a distinct device
     * address (cuMemHostGetDevicePointer), never the host pointer itself. */
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH: return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return FK_SHARED_OPTIN;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: return 0;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: return 0;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return FK_MAX_PERSISTING_L2;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return FK_MAX_WINDOW_BYTES;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return 0;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return o->cc_major >= 9;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 0;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return o->cc_major >= 9;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: return 0;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return -1;
    default:
      *known = 0;
      return -1;
  }
}

CUresult fk_cuDeviceGetAttribute(t4a_fake *f, int *pi, CUdevice_attribute attrib, CUdevice dev) {
  if (pi == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  int known;
  int v = device_attribute(f, attrib, dev, &known);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  *pi = v;
  return CUDA_SUCCESS;
}

CUresult fk_cuDeviceTotalMem(t4a_fake *f, size_t *bytes, CUdevice dev) {
  if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)f->dev[dev].mem_bytes;
  return CUDA_SUCCESS;
}

static int peer_allowed(t4a_fake *f, int dev, int peer) {
  if (dev == peer) return 0;
  return f->opt.all_peers || f->opt.peer[dev][peer];
}

CUresult fk_cuDeviceCanAccessPeer(t4a_fake *f, int *can, CUdevice dev, CUdevice peer) {
  if (can == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev) || !fk_valid_device(f, peer)) return CUDA_ERROR_INVALID_DEVICE;
  if (dev == peer) return CUDA_ERROR_INVALID_DEVICE;
  *can = peer_allowed(f, dev, peer);
  return CUDA_SUCCESS;
}

/* ---- primary contexts --------------------------------------------------------------------- */

CUresult fk_cuDevicePrimaryCtxRetain(t4a_fake *f, CUcontext *pctx, CUdevice dev) {
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  fk_device *d = &f->dev[dev];
  if (d->pctx == NULL) {
    fk_pctx *p = calloc(1, sizeof *p);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!fk_handle_new(f, &p->o, FK_KIND_CTX)) {
      free(p);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->device = dev;
    d->pctx = p;
  }
  if (d->primary == NULL) {
    /* First retain, or the first since the context was destroyed: a fresh incarnation behind
     * the same handle (measured on the real driver: the handle does not change). */
    d->primary = ctx_new(f, d->pctx, dev);
    if (d->primary == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->refs++;
  *pctx = (CUcontext)(uintptr_t)d->pctx->o.handle;
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxRelease(t4a_fake *f, CUdevice dev) {
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  fk_device *d = &f->dev[dev];
  if (d->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  d->refs--;
  if (d->refs == 0 && d->primary != NULL) fk_ctx_kill(f, d->primary, 0);
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxReset(t4a_fake *f, CUdevice dev) {
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  fk_device *d = &f->dev[dev];
  if (d->primary != NULL) fk_ctx_kill(f, d->primary, 1);
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxGetState(t4a_fake *f, CUdevice dev, unsigned int *flags,
                                       int *active) {
  if (flags == NULL || active == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(f, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = f->dev[dev].primary != NULL;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxGetCurrent(t4a_fake *f, CUcontext *pctx) {
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)(uintptr_t)fk_current_handle(f);
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxSetCurrent(t4a_fake *f, CUcontext ctx) {
  if (ctx == NULL) {
    t_current = 0;
    return CUDA_SUCCESS;
  }
  /* A destroyed primary context can be made current (the real driver answers success); the
   * calls that need it then fail with CONTEXT_IS_DESTROYED until a retain revives it. */
  fk_pctx *p = fk_handle_get(f, FK_H(ctx), FK_KIND_CTX);
  if (p == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = p->o.handle;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxSynchronize(t4a_fake *f) {
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  r = fk_capture_check_unsafe(f);
  if (r != CUDA_SUCCESS) return r;
  /* Synchronizing a context that has a capturing stream is illegal and breaks the capture. */
  int capturing = 0;
  for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    if (s->ctx == ctx && s->cap != NULL) {
      fk_capture_invalidate(s);
      capturing = 1;
    }
  }
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  r = fk_drain_ctx(f, ctx);
  fk_pools_trim_on_sync(f);
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  if (r == CUDA_SUCCESS) fk_host_observe_ctx(f, ctx);
  return r;
}

CUresult fk_cuCtxGetDevice(t4a_fake *f, CUdevice *device) {
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxSetLimit(t4a_fake *f, CUlimit limit, size_t value) {
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  if ((r = fk_capture_check_unsafe(f)) != CUDA_SUCCESS) return r; /* measured on the H200 */
  switch (limit) {
    case CU_LIMIT_STACK_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
      break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
      if (value > 128) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
      if (value > FK_MAX_PERSISTING_L2) return CUDA_ERROR_INVALID_VALUE;
      break;
    default:
      return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  ctx->limits[limit] = value;
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxGetLimit(t4a_fake *f, size_t *value, CUlimit limit) {
  if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  if ((unsigned)limit >= (unsigned)CU_LIMIT_MAX || (unsigned)limit >= FK_ARRAY_LEN(ctx->limits)) {
    return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  *value = ctx->limits[limit];
  return CUDA_SUCCESS;
}

CUresult fk_cuCtxResetPersistingL2Cache(t4a_fake *f) {
  fk_ctx *ctx;
  return fk_need_current(f, &ctx);
}

CUresult fk_cuCtxEnablePeerAccess(t4a_fake *f, CUcontext peer, unsigned int flags) {
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *p = fk_ctx_of_handle(f, FK_H(peer));
  if (p == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (!p->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (p->device == ctx->device) return CUDA_ERROR_INVALID_DEVICE;
  if (!peer_allowed(f, ctx->device, p->device)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (ctx->peer[p->device]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  ctx->peer[p->device] = 1;
  return CUDA_SUCCESS;
}

/* ---- sticky errors on demand -------------------------------------------------------------- */

void t4a_fake_set_sticky(t4a_fake *fake, int ordinal, CUresult result) {
  if (fake == NULL) return;
  fk_lock();
  if (fk_valid_device(fake, ordinal) && fake->dev[ordinal].primary != NULL) {
    fake->dev[ordinal].primary->sticky = result; /* CUDA_SUCCESS clears it */
  }
  fk_unlock();
}

CUresult t4a_fake_sticky(t4a_fake *fake, int ordinal) {
  if (fake == NULL) return CUDA_SUCCESS;
  fk_lock();
  CUresult r = CUDA_SUCCESS;
  if (fk_valid_device(fake, ordinal) && fake->dev[ordinal].primary != NULL) {
    r = fake->dev[ordinal].primary->sticky;
  }
  fk_unlock();
  return r;
}
