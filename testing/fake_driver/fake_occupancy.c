/* testing/fake_driver — the occupancy model and the launch attributes of cuLaunchKernelEx.
 *
 * Resident blocks per SM (fk_blocks_per_sm) is the least of: 32 blocks, 2048 threads (a block's
 * threads rounded up to whole warps), 65,536 registers (registers per thread x the rounded
 * threads) and 233,472 bytes of shared memory (static + dynamic + 1 KiB the hardware reserves per
 * block, as on sm_90); 0 when the block exceeds the kernel's max threads per block or the dynamic
 * bytes exceed the function's current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. The
 * numbers are the H100/H200's (sm_90); register allocation granularity is not modelled.
 *
 * cuLaunchKernelEx enforces what the driver does: a cooperative grid larger than blocks per SM x
 * SM count is CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE; a cluster needs a device with cluster
 * launch (cc >= 9), dims >= 1 that divide the grid, a size of at most 8 (the portable size) or,
 * with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED set, 16, and at most what one GPC
 * holds (blocks per SM x gpc_sms); otherwise CUDA_ERROR_INVALID_CLUSTER_SIZE. Nothing is queued
 * when a check fails. */
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

#define FK_SM_THREADS 2048
#define FK_SM_BLOCKS 32
#define FK_SM_REGS 65536
#define FK_SM_SHARED 233472
#define FK_BLOCK_RESERVED_SHARED 1024
#define FK_PORTABLE_CLUSTER 8
#define FK_NON_PORTABLE_CLUSTER 16

static int imin(int a, int b) { return a < b ? a : b; }

int fk_blocks_per_sm(t4a_fake *f, const fk_func *fn, unsigned threads, size_t dyn) {
  t4a_fake_kernel_attrs a = fk_func_attrs(f, fn);
  int regs = a.num_regs, stat = a.static_shared_bytes, max_threads = a.max_threads_per_block;
  if (threads == 0 || threads > (unsigned)max_threads) return 0;
  if (dyn > (size_t)fk_func_max_dyn(f, fn)) return 0;
  int warps_threads = (int)((threads + 31) / 32 * 32);
  int n = FK_SM_BLOCKS;
  n = imin(n, FK_SM_THREADS / warps_threads);
  n = imin(n, FK_SM_REGS / (regs * warps_threads));
  size_t per_block = (size_t)stat + dyn + FK_BLOCK_RESERVED_SHARED;
  n = imin(n, (int)(FK_SM_SHARED / per_block));
  return n > 0 ? n : 0;
}

static int gpc_sms(const t4a_fake *f) { return f->opt.gpc_sms > 0 ? f->opt.gpc_sms : 16; }

int fk_max_cluster(t4a_fake *f, const fk_func *fn, unsigned threads, size_t dyn) {
  if (f->opt.cc_major < 9) return 0;
  int limit = fn->non_portable_cluster ? FK_NON_PORTABLE_CLUSTER : FK_PORTABLE_CLUSTER;
  int per_sm = fk_blocks_per_sm(f, fn, threads, dyn);
  return imin(limit, per_sm * gpc_sms(f));
}

static CUresult func_of(t4a_fake *f, CUfunction h, fk_func **out) {
  *out = fk_handle_get(f, FK_H(h), FK_KIND_FUNC);
  if (*out == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return fk_ctx_usable((*out)->mod->ctx);
}

CUresult fk_cuOccupancyMaxActiveBlocksPerMultiprocessor(t4a_fake *f, int *num, CUfunction func,
                                                        int block, size_t dyn) {
  if (num == NULL || block <= 0) return CUDA_ERROR_INVALID_VALUE;
  fk_func *fn;
  CUresult r = func_of(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  *num = fk_blocks_per_sm(f, fn, (unsigned)block, dyn);
  return CUDA_SUCCESS;
}

/* As the CUDA runtime's cudaOccupancyMaxPotentialBlockSize documents it: from the largest block
 * (rounded up to a warp, clamped to the limit) down in warps, the first strictly best occupancy in
 * threads wins, stopping at full occupancy. */
CUresult fk_cuOccupancyMaxPotentialBlockSize(t4a_fake *f, int *min_grid, int *block,
                                             CUfunction func, CUoccupancyB2DSize to_dyn,
                                             size_t dyn, int limit) {
  if (min_grid == NULL || block == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_func *fn;
  CUresult r = func_of(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  int max_threads = fk_func_attrs(f, fn).max_threads_per_block;
  int top = max_threads < 1024 ? max_threads : 1024;
  if (limit > 0 && limit < top) top = limit;
  int best_blocks = 0, best_size = 0, best_threads = 0;
  for (int aligned = (top + 31) / 32 * 32; aligned > 0; aligned -= 32) {
    int size = aligned < top ? aligned : top;
    size_t d = to_dyn != NULL ? to_dyn(size) : dyn;
    int blocks = fk_blocks_per_sm(f, fn, (unsigned)size, d);
    if (blocks * size > best_threads) {
      best_threads = blocks * size;
      best_blocks = blocks;
      best_size = size;
    }
    if (best_threads == FK_SM_THREADS) break;
  }
  *min_grid = best_blocks * f->opt.sm_count;
  *block = best_size;
  return CUDA_SUCCESS;
}

CUresult fk_cuOccupancyMaxPotentialClusterSize(t4a_fake *f, int *size, CUfunction func,
                                               const CUlaunchConfig *config) {
  if (size == NULL || config == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_func *fn;
  CUresult r = func_of(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  uint64_t threads = (uint64_t)config->blockDimX * config->blockDimY * config->blockDimZ;
  if (threads == 0 || threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  *size = fk_max_cluster(f, fn, (unsigned)threads, config->sharedMemBytes);
  return CUDA_SUCCESS;
}

CUresult fk_launch_attrs_read(t4a_fake *f, const CUlaunchConfig *config, CUfunction func,
                              fk_launch_attrs *out) {
  memset(out, 0, sizeof *out);
  if (config->numAttrs > 0 && config->attrs == NULL) return CUDA_ERROR_INVALID_VALUE;
  int have_cluster = 0;
  for (unsigned i = 0; i < config->numAttrs; i++) {
    const CUlaunchAttribute *a = &config->attrs[i];
    switch (a->id) {
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        out->cooperative = a->value.cooperative != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        out->cluster[0] = a->value.clusterDim.x;
        out->cluster[1] = a->value.clusterDim.y;
        out->cluster[2] = a->value.clusterDim.z;
        have_cluster = 1;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        out->programmatic = a->value.programmaticStreamSerializationAllowed != 0;
        break;
      default:
        if ((unsigned)a->id > 16u) return CUDA_ERROR_INVALID_VALUE;
        break; /* other known attributes: accepted, not modelled */
    }
  }
  fk_func *fn = fk_handle_get(f, FK_H(func), FK_KIND_FUNC);
  if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  uint64_t threads = (uint64_t)config->blockDimX * config->blockDimY * config->blockDimZ;
  if (threads == 0 || threads > 1024 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0) {
    return CUDA_ERROR_INVALID_VALUE; /* what fk_build_launch answers too */
  }
  if (have_cluster) {
    if (f->opt.cc_major < 9) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    uint64_t size = 1;
    for (int d = 0; d < 3; d++) {
      if (out->cluster[d] == 0 || grid[d] % out->cluster[d] != 0) {
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      }
      size *= out->cluster[d];
    }
    if (size > (uint64_t)fk_max_cluster(f, fn, (unsigned)threads, config->sharedMemBytes)) {
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
  }
  if (out->cooperative) {
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    uint64_t fit = (uint64_t)fk_blocks_per_sm(f, fn, (unsigned)threads, config->sharedMemBytes) *
                   (uint64_t)f->opt.sm_count;
    if (blocks > fit) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  return CUDA_SUCCESS;
}

void t4a_fake_launch_attrs(const t4a_fake_launch *launch, unsigned cluster[3], int *cooperative,
                           int *programmatic) {
  if (launch == NULL) return;
  for (int i = 0; i < 3 && cluster != NULL; i++) cluster[i] = launch->attrs.cluster[i];
  if (cooperative != NULL) *cooperative = launch->attrs.cooperative;
  if (programmatic != NULL) *programmatic = launch->attrs.programmatic;
}

