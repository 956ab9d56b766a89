/* testing/soak/soak.c — the soak: T threads over R runtimes (two per device, one shared NVRTC
 * artifact cache) mixing every kind of operation for a bounded time, every downloaded byte checked
 * against a host model, every counter balanced at the end (docs/design.md §1, README "Soak").
 *
 *   soak [--threads N] [--runtimes-per-device N] [--seconds S] [--seed X] [--max-bytes B]
 *        [--mem-slack-mib M] [--fake]
 *   soak --fault [--fake]     the faulting second process of the faults-under-load check
 *
 * Real driver (default): libcuda and NVRTC of the host; the kernels below are compiled through the
 * artifact cache. --fake: the fake driver (two peer devices) and the fake NVRTC from testing/, with
 * the fixture's host kernels registered under the kernel names of the CUDA source.
 *
 * Model. Each thread owns its slots (one buffer each, on some runtime) and a host shadow of every
 * byte the device must hold; each operation updates the shadow as the device will. Kernels write
 * deterministic functions: spin_fill(w, n, v) sets w[i] = v + i, add(p, n, v) adds v to n bytes.
 * Every download (pageable or pinned, any range, odd offsets) is compared with the shadow.
 *
 * At the end, per runtime, after the slots were released, the chains destroyed, the descriptors
 * unregistered and the lane synchronised and trimmed: device_allocs = device_frees + cached
 * blocks + buffers_leaked (with 0 leaks), keepalives_held = keepalives_released (those the chain
 * recordings handed to their graphs included), host_waits <= the waits the soak's calls asked
 * for (downloads, syncs, trims, staging waits: a call may find its work done and not wait), bytes
 * uploaded and downloaded as the soak counted, raw scopes and chain replays as counted, nothing
 * quarantined; the shared cache compiled each distinct source once; a quiet phase on one thread
 * after the others (operations that ask for no wait only) grew host_waits by the staging waits
 * alone, exactly; every close returned T4A_OK; and after every runtime closed, the driver's free
 * memory (cuMemGetInfo through a lane's context) is back at its start within --mem-slack-mib.
 * Exit 0 only if all of it holds and no byte mismatched.
 *
 * The kernels launched inside raw scopes go through the driver table (the seam, as a vendor
 * library would call cuLaunchKernel) on the scope's stream, from a module the soak loaded itself
 * inside a raw scope (cuModuleLoadDataEx) and unloads at the end. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/t4a.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/host_kernels.h"
#include "testing/fixture/leaks.h"

enum { MAX_THREADS = 64, MAX_RT = 16, SLOTS = 8, VARIANTS = 4, BLOCK = 256, FIRE_GRID = 64 };

static const char k_source[] =
    "extern \"C\" __global__ void add(unsigned char *p, int n, int v) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    p[i] = (unsigned char)(p[i] + v);\n"
    "}\n"
    "extern \"C\" __global__ void spin_fill(unsigned *w, unsigned n, unsigned v,\n"
    "                                      unsigned long long spin) {\n"
    "  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * "
    "blockDim.x)\n"
    "    w[i] = v + i;\n"
    "}\n"
    "extern \"C\" __global__ void poke(unsigned *w, unsigned v) { *w = v; }\n";

/* ---- operation kinds ---- */
#define SOAK_KINDS(X)   \
  X(create, 8)          \
  X(release, 4)         \
  X(upload, 10)         \
  X(upload_pinned, 8)   \
  X(download, 10)       \
  X(download_pinned, 8) \
  X(launch, 10)         \
  X(fire, 6)            \
  X(rebind_fire, 6)     \
  X(chain_replay, 6)    \
  X(copy, 6)            \
  X(copy_between, 6)    \
  X(raw_launch, 6)      \
  X(compile, 1)         \
  X(sync, 2)
enum {
#define K_ENUM_(name, w) K_##name,
  SOAK_KINDS(K_ENUM_)
#undef K_ENUM_
      K_COUNT
};
static const char *const k_kind_name[K_COUNT] = {
#define K_NAME_(name, w) #name,
    SOAK_KINDS(K_NAME_)
#undef K_NAME_
};
static const int k_kind_weight[K_COUNT] = {
#define K_W_(name, w) w,
    SOAK_KINDS(K_W_)
#undef K_W_
};

typedef struct slot {
  t4a_buffer *buf; /* NULL: empty */
  int rt;
  size_t bytes;
  unsigned char *shadow; /* what the device must hold, once the queued work ran */
} slot;

typedef struct rt_count { /* what one thread asked of one runtime */
  uint64_t host_waits, bytes_up, bytes_down, raw_scopes, chain_replays;
} rt_count;

typedef struct worker {
  int id;
  uint64_t seed;
  slot slots[SLOTS];
  t4a_pinned *pinned;
  int pinned_busy_rt; /* a pinned upload from `pinned` may still read it on this runtime; -1 */
  unsigned char *scratch;
  uint32_t desc_fire[MAX_RT], desc_chain[MAX_RT];
  t4a_chain *chain[MAX_RT];
  uint64_t ops[K_COUNT], bytes[K_COUNT];
  rt_count per_rt[MAX_RT];
  int compiled[VARIANTS + 1];
} worker;

static struct {
  int threads, per_device, fake, fault_mode;
  double seconds;
  uint64_t seed;
  size_t max_bytes;
  long mem_slack_mib;
  t4a_fixture fx;
  t4a_driver *drv;
  int devices, nrt;
  t4a_nvrtc_lib *nvrtc;
  t4a_nvrtc_cache *cache;
  t4a_runtime *rt[MAX_RT];
  t4a_function *fn_add[MAX_RT], *fn_fill[MAX_RT];
  CUmodule raw_mod[MAX_RT];
  CUfunction raw_add[MAX_RT];
  t4a_buffer *dummy[MAX_RT];
  worker *w;
  struct timespec deadline;
  atomic_long failures, mismatches, imbalances;
  atomic_int compiled_variant[VARIANTS + 1];
} g;

/* ---- helpers ---- */

static void failure(const char *op, t4a_status st) {
  t4a_error e;
  char msg[512];
  t4a_error_last(&e);
  fprintf(stderr, "soak: %s: %s (%s)\n", op, t4a_status_name(st),
          t4a_error_format(&e, msg, sizeof msg));
  atomic_fetch_add(&g.failures, 1);
}
#define OK(op, expr)                       \
  (__extension__({                         \
    t4a_status st_ = (expr);               \
    if (st_ != T4A_OK) failure((op), st_); \
    st_ == T4A_OK;                         \
  }))

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A size in [1, limit]: mostly small (≤ 4 KiB), some up to 1 MiB, a few up to limit. */
static size_t pick_size(uint64_t *s, size_t limit) {
  uint64_t r = next(s);
  size_t cap = (r % 100) < 90 ? 4096 : (r % 100) < 99 ? ((size_t)1 << 20) : g.max_bytes;
  if (cap > limit) cap = limit;
  unsigned bits = 0;
  while (bits < 63 && ((size_t)1 << (bits + 1)) <= cap) bits++;
  size_t top = (size_t)1 << (next(s) % (bits + 1));
  size_t n = 1 + (size_t)(next(s) % top);
  return n > cap ? cap : n;
}

/* A range [off, off + len) of a buffer of `bytes`: odd offsets included. */
static void pick_range(uint64_t *s, size_t bytes, size_t *off, size_t *len) {
  *len = pick_size(s, bytes);
  *off = bytes == *len ? 0 : (size_t)(next(s) % (bytes - *len + 1));
}

static void fill_random(uint64_t *s, unsigned char *p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = next(s);
    memcpy(p + i, &v, 8);
  }
  uint64_t v = next(s);
  for (; i < n; i++, v >>= 8) p[i] = (unsigned char)v;
}

static void compare(worker *w, const char *what, const slot *sl, size_t off,
                    const unsigned char *got, size_t len) {
  if (memcmp(got, sl->shadow + off, len) == 0) return;
  if (atomic_fetch_add(&g.mismatches, 1) >= 20) return; /* the first 20 are printed */
  for (size_t i = 0; i < len; i++) {
    if (got[i] != sl->shadow[off + i]) {
      fprintf(stderr,
              "soak: thread %d: %s: byte %zu of [%zu, +%zu) of a %zu-byte buffer on runtime %d is "
              "%u, the model says %u\n",
              w->id, what, off + i, off, len, sl->bytes, sl->rt, got[i], sl->shadow[off + i]);
      break;
    }
  }
}

static void model_add(slot *sl, size_t off, size_t n, int v) {
  for (size_t i = 0; i < n; i++) sl->shadow[off + i] = (unsigned char)(sl->shadow[off + i] + v);
}

static uint32_t grid_for(size_t n) {
  size_t b = (n + BLOCK - 1) / BLOCK;
  return b < 1 ? 1 : b > 1024 ? 1024 : (uint32_t)b;
}

/* Before the thread writes its pinned memory again: a pinned upload that may still read it was
 * issued on pinned_busy_rt; a sync of that runtime (a host wait the soak asks for) proves it ran.
 */
static void pinned_quiesce(worker *w) {
  if (w->pinned_busy_rt < 0) return;
  OK("sync (pinned reuse)", t4a_runtime_sync(g.rt[w->pinned_busy_rt]));
  w->per_rt[w->pinned_busy_rt].host_waits++;
  w->pinned_busy_rt = -1;
}

static void slot_release(slot *sl) {
  t4a_buffer_release(sl->buf);
  sl->buf = NULL;
  free(sl->shadow);
  sl->shadow = NULL;
}

#define BALANCE(cond, ...)                               \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "soak: unbalanced: " __VA_ARGS__); \
      fputc('\n', stderr);                               \
      atomic_fetch_add(&g.imbalances, 1);                \
    }                                                    \
  } while (0)

/* ---- raw scopes ---- */

typedef struct raw_call {
  int rt;
  t4a_buffer *buf;
  size_t off;
  int n, v;
} raw_call;

static t4a_status raw_launch_body(t4a_raw_scope *scope, void *user) {
  raw_call *c = user;
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, c->buf, T4A_RAW_WRITE, &p);
  if (st != T4A_OK) return st;
  CUdeviceptr ptr = (CUdeviceptr)(p + c->off);
  void *params[3] = {&ptr, &c->n, &c->v};
  uint32_t grid = grid_for((size_t)c->n);
  CUresult r = g.drv->t.cuLaunchKernel(g.raw_add[c->rt], grid, 1, 1, BLOCK, 1, 1, 0,
                                       (CUstream)t4a_raw_stream(scope), params, NULL);
  if (r != CUDA_SUCCESS) {
    return t4a_raw_fail(scope, T4A_DRIVER_ERROR, "cuLaunchKernel", (int)r, NULL, "raw add");
  }
  return T4A_OK;
}

typedef struct raw_module_call {
  int rt;
  const void *image;
  int unload;
} raw_module_call;

static t4a_status raw_module_body(t4a_raw_scope *scope, void *user) {
  raw_module_call *c = user;
  CUresult r;
  if (c->unload) {
    r = g.drv->t.cuModuleUnload(g.raw_mod[c->rt]);
    g.raw_mod[c->rt] = NULL;
    return r == CUDA_SUCCESS ? T4A_OK
                             : t4a_raw_fail(scope, T4A_DRIVER_ERROR, "cuModuleUnload", (int)r, NULL,
                                            "raw module");
  }
  r = g.drv->t.cuModuleLoadDataEx(&g.raw_mod[c->rt], c->image, 0, NULL, NULL);
  if (r == CUDA_SUCCESS)
    r = g.drv->t.cuModuleGetFunction(&g.raw_add[c->rt], g.raw_mod[c->rt], "add");
  return r == CUDA_SUCCESS ? T4A_OK
                           : t4a_raw_fail(scope, T4A_DRIVER_ERROR, "cuModuleLoadDataEx", (int)r,
                                          NULL, "raw module");
}

/* ---- the operations ---- */

enum {
#define K_SUM_(name, w) +(w)
  K_TOTAL_WEIGHT = 0 SOAK_KINDS(K_SUM_)
#undef K_SUM_
};

static int pick_kind(uint64_t *s) {
  const int total = K_TOTAL_WEIGHT;
  int r = (int)(next(s) % (uint64_t)total);
  for (int k = 0; k < K_COUNT; k++) {
    if (r < k_kind_weight[k]) return k;
    r -= k_kind_weight[k];
  }
  return K_sync;
}

static void op_create(worker *w, slot *sl) {
  uint64_t *s = &w->seed;
  if (sl->buf != NULL) slot_release(sl);
  int r = (int)(next(s) % (uint64_t)g.nrt);
  size_t bytes = pick_size(s, g.max_bytes);
  unsigned char *shadow = malloc(bytes);
  if (shadow == NULL) {
    atomic_fetch_add(&g.failures, 1);
    return;
  }
  t4a_buffer *b = NULL;
  if (!OK("buffer", t4a_runtime_buffer(g.rt[r], bytes, &b))) {
    free(shadow);
    return;
  }
  sl->buf = b;
  sl->rt = r;
  sl->bytes = bytes;
  sl->shadow = shadow;
  /* spin_fill over the whole words, a pageable upload of the tail */
  unsigned n = (unsigned)(bytes / 4), v = (unsigned)next(s);
  if (n > 0) {
    unsigned long long spin = 0;
    t4a_arg args[4] = {t4a_arg_buffer(b, 0), t4a_arg_scalar(&n, 4), t4a_arg_scalar(&v, 4),
                       t4a_arg_scalar(&spin, 8)};
    OK("launch spin_fill", t4a_runtime_launch(g.rt[r], g.fn_fill[r], grid_for(n), BLOCK, args, 4));
    for (unsigned i = 0; i < n; i++) {
      unsigned x = v + i;
      memcpy(shadow + (size_t)i * 4, &x, 4);
    }
  }
  size_t tail = bytes % 4;
  if (tail > 0) {
    fill_random(s, shadow + (size_t)n * 4, tail);
    if (OK("upload tail",
           t4a_runtime_upload(g.rt[r], b, (size_t)n * 4, shadow + (size_t)n * 4, tail)))
      w->per_rt[r].bytes_up += tail;
  }
  w->bytes[K_create] += bytes;
}

static void op_do(worker *w, int k) {
  uint64_t *s = &w->seed;
  slot *sl = &w->slots[next(s) % SLOTS];
  slot *s2 = &w->slots[next(s) % SLOTS];
  int v = (int)(next(s) % 255) + 1;
  size_t off = 0, len = 0;
  if (k != K_create && k != K_compile && k != K_sync && sl->buf == NULL) k = K_create;
  w->ops[k]++;
  switch (k) {
    case K_create:
      op_create(w, sl);
      return;
    case K_release:
      slot_release(sl);
      return;
    case K_upload:
      pick_range(s, sl->bytes, &off, &len);
      fill_random(s, w->scratch, len);
      if (OK("upload", t4a_runtime_upload(g.rt[sl->rt], sl->buf, off, w->scratch, len))) {
        memcpy(sl->shadow + off, w->scratch, len);
        w->per_rt[sl->rt].bytes_up += len;
        w->bytes[k] += len;
      }
      return;
    case K_upload_pinned: {
      pick_range(s, sl->bytes, &off, &len);
      size_t poff = (size_t)(next(s) % (g.max_bytes - len + 1));
      pinned_quiesce(w);
      unsigned char *h = (unsigned char *)t4a_pinned_host(w->pinned) + poff;
      fill_random(s, h, len);
      memcpy(sl->shadow + off, h, len);
      if (OK("upload_pinned", t4a_xfer_upload_pinned(t4a_runtime_xfer(g.rt[sl->rt]), sl->buf, off,
                                                     w->pinned, poff, len))) {
        w->pinned_busy_rt = sl->rt;
        w->per_rt[sl->rt].bytes_up += len;
        w->bytes[k] += len;
      }
      return;
    }
    case K_download:
      pick_range(s, sl->bytes, &off, &len);
      memset(w->scratch, 0xA5, len);
      w->per_rt[sl->rt].host_waits++;
      if (OK("download", t4a_runtime_download(g.rt[sl->rt], sl->buf, off, w->scratch, len))) {
        compare(w, "download", sl, off, w->scratch, len);
        w->per_rt[sl->rt].bytes_down += len;
        w->bytes[k] += len;
      }
      return;
    case K_download_pinned: {
      pick_range(s, sl->bytes, &off, &len);
      size_t poff = (size_t)(next(s) % (g.max_bytes - len + 1));
      pinned_quiesce(w);
      unsigned char *h = (unsigned char *)t4a_pinned_host(w->pinned) + poff;
      memset(h, 0x5A, len);
      t4a_xfer_pending *p = NULL;
      if (!OK("download_pinned", t4a_xfer_download_pinned(t4a_runtime_xfer(g.rt[sl->rt]), sl->buf,
                                                          off, w->pinned, poff, len, &p)))
        return;
      w->per_rt[sl->rt].host_waits++;
      t4a_status st = t4a_xfer_pending_wait(p);
      t4a_xfer_pending_release(p);
      if (st != T4A_OK) {
        failure("pending_wait", st);
        return;
      }
      compare(w, "download_pinned", sl, off, h, len);
      w->per_rt[sl->rt].bytes_down += len;
      w->bytes[k] += len;
      return;
    }
    case K_launch: {
      pick_range(s, sl->bytes, &off, &len);
      int n = (int)len;
      t4a_arg args[3] = {t4a_arg_buffer(sl->buf, off), t4a_arg_scalar(&n, 4),
                         t4a_arg_scalar(&v, 4)};
      if (OK("launch",
             t4a_runtime_launch(g.rt[sl->rt], g.fn_add[sl->rt], grid_for(len), BLOCK, args, 3))) {
        model_add(sl, off, len, v);
        w->bytes[k] += len;
      }
      return;
    }
    case K_fire: /* rebind argument by argument, then fire */
    case K_rebind_fire:
    case K_chain_replay: {
      pick_range(s, sl->bytes, &off, &len);
      int n = (int)len;
      t4a_arg args[3] = {t4a_arg_buffer(sl->buf, off), t4a_arg_scalar(&n, 4),
                         t4a_arg_scalar(&v, 4)};
      t4a_launch_table *t = t4a_runtime_table(g.rt[sl->rt]);
      if (k == K_rebind_fire) {
        if (OK("rebind_fire", t4a_descriptor_rebind_fire(t, w->desc_fire[sl->rt], args, 3))) {
          model_add(sl, off, len, v);
          w->bytes[k] += len;
        }
        return;
      }
      uint32_t id = k == K_fire ? w->desc_fire[sl->rt] : w->desc_chain[sl->rt];
      int ok = 1;
      for (uint32_t i = 0; i < 3 && ok; i++)
        ok = OK("rebind", t4a_descriptor_rebind(t, id, i, &args[i]));
      if (!ok) return;
      if (k == K_fire) {
        if (OK("fire", t4a_descriptor_fire(t, id))) {
          model_add(sl, off, len, v);
          w->bytes[k] += len;
        }
      } else if (OK("chain_replay", t4a_chain_replay(t, w->chain[sl->rt]))) {
        model_add(sl, off, len, 2 * v); /* the chain fires its descriptor twice */
        w->per_rt[sl->rt].chain_replays++;
        w->bytes[k] += 2 * len;
      }
      return;
    }
    case K_copy:
    case K_copy_between: {
      if (s2 == sl || s2->buf == NULL) return;
      if ((k == K_copy) != (s2->rt == sl->rt)) return; /* not the pair this kind wants */
      size_t soff = 0;
      pick_range(s, sl->bytes < s2->bytes ? sl->bytes : s2->bytes, &soff, &len);
      soff = (size_t)(next(s) % (sl->bytes - len + 1));
      off = (size_t)(next(s) % (s2->bytes - len + 1));
      t4a_status st;
      if (k == K_copy) {
        st = t4a_runtime_copy(g.rt[sl->rt], s2->buf, off, sl->buf, soff, len);
      } else {
        st = t4a_xfer_copy(t4a_runtime_xfer(g.rt[s2->rt]), s2->buf, off,
                           t4a_runtime_xfer(g.rt[sl->rt]), sl->buf, soff, len, T4A_COPY_AUTO, NULL,
                           NULL);
      }
      if (OK(k == K_copy ? "copy" : "xfer_copy", st)) {
        memcpy(s2->shadow + off, sl->shadow + soff, len);
        w->bytes[k] += len;
      }
      return;
    }
    case K_raw_launch: {
      pick_range(s, sl->bytes, &off, &len);
      raw_call c = {sl->rt, sl->buf, off, (int)len, v};
      t4a_raw_binding bind = {sl->buf, T4A_RAW_READ_WRITE};
      if (OK("raw_run",
             t4a_raw_run(t4a_runtime_retire(g.rt[sl->rt]), &bind, 1, raw_launch_body, &c))) {
        model_add(sl, off, len, v);
        w->bytes[k] += len;
      }
      w->per_rt[sl->rt].raw_scopes++;
      return;
    }
    case K_compile: {
      /* the base source (a memory hit) or one of VARIANTS variants: each distinct source is
       * compiled once by NVRTC, whichever thread or runtime asks first */
      int var = (int)(next(s) % (VARIANTS + 1));
      int r = (int)(next(s) % (uint64_t)g.nrt);
      char src[sizeof k_source + 64];
      snprintf(src, sizeof src, "%s// variant %d\n", k_source, var);
      t4a_nvrtc_artifact *a = NULL;
      t4a_module *m = NULL;
      t4a_function *f = NULL;
      if (OK("compile", t4a_runtime_compile(g.rt[r], var == 0 ? k_source : src, "soak.cu", &a))) {
        atomic_store(&g.compiled_variant[var], 1);
        if (OK("load", t4a_runtime_load(g.rt[r], a, &m)))
          OK("function", t4a_runtime_function(g.rt[r], m, "add", &f));
      }
      t4a_function_release(f);
      t4a_module_release(m);
      t4a_nvrtc_artifact_release(a);
      return;
    }
    default: { /* sync */
      int r = (int)(next(s) % (uint64_t)g.nrt);
      w->per_rt[r].host_waits++;
      OK("sync", t4a_runtime_sync(g.rt[r]));
      return;
    }
  }
}

static void op_one(worker *w) { op_do(w, pick_kind(&w->seed)); }

/* The kinds that ask for no host wait (staging waits of the ring aside). */
static const int k_quiet[] = {K_create,       K_release,     K_upload,       K_launch,
                              K_fire,         K_rebind_fire, K_chain_replay, K_copy,
                              K_copy_between, K_raw_launch,  K_compile};

/* Checks every slot of w in full (one download each), then releases it. */
static void check_and_release_slots(worker *w) {
  for (int i = 0; i < SLOTS; i++) {
    slot *sl = &w->slots[i];
    if (sl->buf == NULL) continue;
    unsigned char *tmp = malloc(sl->bytes);
    if (tmp != NULL) {
      w->per_rt[sl->rt].host_waits++;
      if (OK("final download", t4a_runtime_download(g.rt[sl->rt], sl->buf, 0, tmp, sl->bytes))) {
        compare(w, "final download", sl, 0, tmp, sl->bytes);
        w->per_rt[sl->rt].bytes_down += sl->bytes;
      }
      free(tmp);
    }
    slot_release(sl);
  }
}

/* After the threads: one thread runs `n` operations of the kinds that ask for no wait, and every
 * runtime's host waits must grow by its staging waits only (exact, where the soak's bound is
 * loose: a call that may wait can also find its work done). Then the slots are checked. */
static void quiet_phase(worker *w, long n) {
  t4a_counter_values before[MAX_RT], after;
  for (int r = 0; r < g.nrt; r++) t4a_runtime_stats(g.rt[r], &before[r]);
  uint64_t kinds = sizeof k_quiet / sizeof k_quiet[0];
  uint64_t ops[K_COUNT], bytes[K_COUNT]; /* the figures are the threads' */
  memcpy(ops, w->ops, sizeof ops);
  memcpy(bytes, w->bytes, sizeof bytes);
  for (long i = 0; i < n; i++) op_do(w, k_quiet[next(&w->seed) % kinds]);
  memcpy(w->ops, ops, sizeof ops);
  memcpy(w->bytes, bytes, sizeof bytes);
  printf("soak: quiet phase: %ld operations that ask for no host wait, on one thread\n", n);
  for (int r = 0; r < g.nrt; r++) {
    t4a_runtime_stats(g.rt[r], &after);
    uint64_t waits = after.host_waits - before[r].host_waits;
    uint64_t staging = after.staging_waits - before[r].staging_waits;
    BALANCE(waits == staging,
            "runtime %d: %" PRIu64 " host waits (%" PRIu64
            " staging) during %ld operations that "
            "ask for none",
            r, waits, staging, n);
  }
  check_and_release_slots(w);
}

static int past_deadline(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec > g.deadline.tv_sec ||
         (t.tv_sec == g.deadline.tv_sec && t.tv_nsec >= g.deadline.tv_nsec);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  while (!past_deadline()) {
    for (int i = 0; i < 16; i++) op_one(w);
  }
  check_and_release_slots(w); /* every slot checked once more in full, then released */
  pinned_quiesce(w);
  return NULL;
}

/* ---- memory of the devices ---- */

/* Free bytes of device `ordinal` (cuMemGetInfo with a lane's context current). */
static int device_free(t4a_lane *lane, size_t *out) {
  t4a_ctx_scope sc;
  if (!OK("ctx_scope_enter", t4a_ctx_scope_enter(&sc, t4a_lane_holder(lane), NULL))) return 0;
  size_t free_b = 0, total = 0;
  CUresult r = g.drv->t.cuMemGetInfo(&free_b, &total);
  t4a_ctx_scope_exit_quiet(&sc);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "soak: cuMemGetInfo: %d\n", (int)r);
    atomic_fetch_add(&g.failures, 1);
    return 0;
  }
  *out = free_b;
  return 1;
}

/* ---- the fault mode (the second process of the faults-under-load check) ---- */

/* What the faulted runtimes could not prove finished is leaked on purpose (counted, never freed):
 * LeakSanitizer and the valgrind lane are told, for this function's allocations only. */
T4A_FIXTURE_DELIBERATE_LEAKS("fault_main")

__attribute__((noinline)) static int fault_main(void) {
  /* Two runtimes on device 0; runtime A launches poke(0x10) (an illegal address); every runtime
   * of the device must then report the fault as a typed status, and close must return a typed
   * failure with what it could not prove counted as leaked. */
  t4a_runtime *a = NULL, *b = NULL;
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g.drv;
  o.artifact_cache = g.cache;
  o.compile_ptx = g.fake; /* the fake NVRTC makes PTX only */
  if (!OK("open A", t4a_runtime_open(0, &o, &a)) || !OK("open B", t4a_runtime_open(0, &o, &b))) {
    (void)t4a_runtime_close(a);
    return 1;
  }
  t4a_function *poke = NULL;
  t4a_buffer *ba = NULL, *bb = NULL;
  int bad = 0;
  if (!OK("kernel poke", t4a_runtime_kernel(a, k_source, "poke", &poke))) bad = 1;
  if (!bad && !OK("buffer A", t4a_runtime_buffer(a, 1 << 20, &ba))) bad = 1;
  if (!bad && !OK("buffer B", t4a_runtime_buffer(b, 1 << 20, &bb))) bad = 1;
  if (!bad) {
    unsigned v = 7;
    t4a_arg args[2] = {t4a_arg_devptr((t4a_devptr)0x10), t4a_arg_scalar(&v, 4)};
    t4a_status st = t4a_runtime_launch(a, poke, 1, 1, args, 2);
    printf("fault: launch poke(0x10): %s\n", t4a_status_name(st));
    if (g.fake) t4a_fake_set_sticky(g.fx.fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
    t4a_status sa = t4a_runtime_sync(a), sb = t4a_runtime_sync(b);
    unsigned char byte = 0;
    t4a_status db = t4a_runtime_download(b, bb, 0, &byte, 1);
    printf("fault: sync A: %s, sync B: %s, download B: %s\n", t4a_status_name(sa),
           t4a_status_name(sb), t4a_status_name(db));
    /* B shares the device's context: its next operation that reaches the device must fail,
     * typed (a sync with nothing admitted on B may answer OK without asking the driver) */
    if (sa == T4A_OK || db == T4A_OK) bad = 1;
  }
  t4a_buffer_release(ba);
  t4a_buffer_release(bb);
  t4a_function_release(poke);
  t4a_counter_values va, vb;
  t4a_runtime_stats(a, &va);
  t4a_runtime_stats(b, &vb);
  t4a_status ca = t4a_runtime_close(a), cb = t4a_runtime_close(b);
  printf("fault: close A: %s, close B: %s\n", t4a_status_name(ca), t4a_status_name(cb));
  t4a_counter_values d;
  t4a_driver_stats(g.drv, &d);
  printf("fault: driver counters: ctx_faults %" PRIu64 ", leaked %" PRIu64 ", streams leaked %" PRIu64
         ", buffers leaked %" PRIu64 ", pools leaked %" PRIu64 "\n",
         d.ctx_faults, d.leaked, d.streams_leaked, d.buffers_leaked, d.pools_leaked);
  /* What close could not prove finished is counted in one of the leak counters (a staging ring
   * is pinned only by a staged transfer, so its chunks need not be among them). */
  if (ca == T4A_OK || cb == T4A_OK || d.ctx_faults == 0 ||
      d.leaked + d.streams_leaked + d.buffers_leaked + d.pools_leaked == 0) {
    bad = 1;
  }
  if (g.fake) { /* what could not be proved finished was not freed */
    long allocs = t4a_fixture_live(g.fx.fake, T4A_FIXTURE_LIVE_DEVICE_ALLOCS);
    printf("fault: device allocations the fake still holds: %ld\n", allocs);
    if (allocs == 0) bad = 1;
  }
  printf("fault: %s\n",
         bad ? "FAIL: a runtime of the faulted device did not report the fault"
             : "ok: every runtime of the device reported the fault; close failed, typed");
  return bad;
}

/* ---- setup, run, checks ---- */

static void usage(void) {
  fprintf(stderr,
          "usage: soak [--threads N] [--runtimes-per-device N] [--seconds S] [--seed X]\n"
          "            [--max-bytes B] [--mem-slack-mib M] [--fake] [--fault]\n");
}

static int parse(int argc, char **argv) {
  g.threads = 4;
  g.per_device = 2;
  g.seconds = 10;
  g.seed = 1;
  g.max_bytes = 0;
  g.mem_slack_mib = 8;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NUM_OPT(name, dst, conv)             \
  if (strcmp(a, name) == 0 && val != NULL) { \
    dst = conv;                              \
    i++;                                     \
    continue;                                \
  }
    NUM_OPT("--threads", g.threads, atoi(val))
    NUM_OPT("--runtimes-per-device", g.per_device, atoi(val))
    NUM_OPT("--seconds", g.seconds, atof(val))
    NUM_OPT("--seed", g.seed, strtoull(val, NULL, 0))
    NUM_OPT("--max-bytes", g.max_bytes, (size_t)strtoull(val, NULL, 0))
    NUM_OPT("--mem-slack-mib", g.mem_slack_mib, atol(val))
#undef NUM_OPT
    if (strcmp(a, "--fake") == 0) {
      g.fake = 1;
      continue;
    }
    if (strcmp(a, "--fault") == 0) {
      g.fault_mode = 1;
      continue;
    }
    usage();
    return 0;
  }
  if (g.max_bytes == 0) g.max_bytes = g.fake ? ((size_t)4 << 20) : ((size_t)64 << 20);
  if (g.threads < 1 || g.threads > MAX_THREADS || g.per_device < 1 || g.seconds < 0 ||
      g.max_bytes < 16 || g.seed == 0) {
    usage();
    return 0;
  }
  return 1;
}

static int open_driver_and_nvrtc(void) {
  if (g.fake) {
    t4a_fixture_options o = t4a_fixture_defaults();
    o.fake.num_devices = 2;
    o.fake.all_peers = 1;
    o.stacks = 0;
    o.kernels[0] = &t4a_hk_add_bytes; /* add(p, n, v) */
    o.kernels[1] = &t4a_hk_spin_fill; /* spin_fill(w, n, v, spin) */
    o.kernels[2] = &t4a_hk_poke;      /* poke(w, v) */
    if (!OK("fixture", t4a_fixture_init(&g.fx, &o))) return 0;
    g.drv = g.fx.drv;
    t4a_driver_retain(g.drv);
    if (!OK("fake nvrtc", t4a_fake_nvrtc_open(&g.nvrtc))) return 0;
  } else {
    t4a_status st = t4a_driver_open(NULL, &g.drv);
    if (st != T4A_OK) {
      failure("driver_open", st);
      return 0;
    }
    t4a_nvrtc_lib_options no = T4A_NVRTC_LIB_OPTIONS_INIT;
    if (!OK("nvrtc_lib_open", t4a_nvrtc_lib_open(&no, &g.nvrtc))) return 0;
  }
  return OK("nvrtc_cache_create", t4a_nvrtc_cache_create(g.nvrtc, NULL, &g.cache));
}

static void close_driver_and_nvrtc(void) {
  t4a_nvrtc_cache_destroy(g.cache);
  t4a_nvrtc_lib_release(g.nvrtc);
  t4a_driver_release(g.drv);
  if (g.fake) {
    t4a_fixture_release(&g.fx);
    if (t4a_fake_nvrtc_programs_live() != 0) {
      fprintf(stderr, "soak: fake NVRTC programs alive at the end\n");
      atomic_fetch_add(&g.imbalances, 1);
    }
    if (t4a_fake_ordering_violations(g.fx.fake) != 0) {
      fprintf(stderr, "soak: the fake saw %ld stream-ordering violations\n",
              (long)t4a_fake_ordering_violations(g.fx.fake));
      atomic_fetch_add(&g.imbalances, 1);
    }
    if (!g.fault_mode && !t4a_fake_nothing_live(g.fx.fake)) {
      fprintf(stderr, "soak: the fake driver holds objects after every close\n");
      atomic_fetch_add(&g.imbalances, 1);
    }
    (void)t4a_fixture_fini(&g.fx, 0);
  }
}

int main(int argc, char **argv) {
  if (!parse(argc, argv)) return 2;
  if (!open_driver_and_nvrtc()) return 1;
  if (g.fault_mode) {
    int rc = fault_main();
    close_driver_and_nvrtc();
    return rc;
  }
  if (!OK("device_count", t4a_device_count(g.drv, &g.devices))) return 1;
  g.nrt = g.devices * g.per_device;
  if (g.nrt > MAX_RT) g.nrt = MAX_RT - MAX_RT % g.per_device;

  /* one lane per device, held from start to end: the baseline of the free-memory check */
  t4a_lane *mlane[MAX_RT] = {NULL};
  size_t free0[MAX_RT] = {0};
  int ndev = g.nrt / g.per_device;
  for (int d = 0; d < ndev; d++) {
    if (!OK("lane", t4a_lane_create(g.drv, d, NULL, &mlane[d]))) return 1;
    if (!device_free(mlane[d], &free0[d])) return 1;
  }

  /* the runtimes, their kernels (compiled through the shared cache), raw modules */
  for (int r = 0; r < g.nrt; r++) {
    t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
    ro.driver = g.drv;
    ro.artifact_cache = g.cache;
    ro.table_capacity = (uint32_t)(2 * g.threads + 8);
    if (g.fake) {
      ro.xfer.chunk_bytes = 64 << 10;
      ro.xfer.copy_threads = 2;
      ro.compile_ptx = 1;
    }
    if (!OK("runtime_open", t4a_runtime_open(r / g.per_device, &ro, &g.rt[r]))) return 1;
    if (!OK("kernel add", t4a_runtime_kernel(g.rt[r], k_source, "add", &g.fn_add[r]))) return 1;
    if (!OK("kernel spin_fill", t4a_runtime_kernel(g.rt[r], k_source, "spin_fill", &g.fn_fill[r])))
      return 1;
    t4a_nvrtc_artifact *a = NULL;
    if (!OK("compile", t4a_runtime_compile(g.rt[r], k_source, "soak.cu", &a))) return 1;
    raw_module_call mc = {r, t4a_nvrtc_artifact_data(a, NULL), 0};
    t4a_status st = t4a_raw_run(t4a_runtime_retire(g.rt[r]), NULL, 0, raw_module_body, &mc);
    t4a_nvrtc_artifact_release(a);
    if (!OK("raw module load", st)) return 1;
    if (!OK("dummy buffer", t4a_runtime_buffer(g.rt[r], 256, &g.dummy[r]))) return 1;
  }

  /* the workers: slots, pinned memory, a descriptor and a recorded chain per runtime */
  g.w = calloc((size_t)g.threads, sizeof *g.w);
  if (g.w == NULL) return 1;
  for (int t = 0; t < g.threads; t++) {
    worker *w = &g.w[t];
    w->id = t;
    w->seed = g.seed * 0x9e3779b97f4a7c15ull + (uint64_t)t * 0xbf58476d1ce4e5b9ull + 1;
    w->pinned_busy_rt = -1;
    w->scratch = malloc(g.max_bytes);
    if (w->scratch == NULL) return 1;
    if (!OK("pinned", t4a_pinned_create(t4a_lane_holder(t4a_runtime_lane(g.rt[0])), g.max_bytes, 0,
                                        &w->pinned)))
      return 1;
    for (int r = 0; r < g.nrt; r++) {
      int n = 0, v = 0;
      t4a_arg args[3] = {t4a_arg_buffer(g.dummy[r], 0), t4a_arg_scalar(&n, 4),
                         t4a_arg_scalar(&v, 4)};
      t4a_launch_config c = {{FIRE_GRID, 1, 1}, {BLOCK, 1, 1}, 0};
      t4a_launch_table *tab = t4a_runtime_table(g.rt[r]);
      if (!OK("register",
              t4a_descriptor_register(tab, g.fn_add[r], &c, args, 3, &w->desc_fire[r])) ||
          !OK("register",
              t4a_descriptor_register(tab, g.fn_add[r], &c, args, 3, &w->desc_chain[r])) ||
          !OK("chain_begin", t4a_chain_begin(tab)))
        return 1;
      int ok = OK("fire (recording)", t4a_descriptor_fire(tab, w->desc_chain[r]));
      ok &= OK("fire (recording)", t4a_descriptor_fire(tab, w->desc_chain[r]));
      if (!OK("chain_end", t4a_chain_end(tab, &w->chain[r])) || !ok) return 1;
    }
  }
  t4a_counter_values base[MAX_RT];
  for (int r = 0; r < g.nrt; r++) {
    if (!OK("sync", t4a_runtime_sync(g.rt[r]))) return 1;
    t4a_runtime_stats(g.rt[r], &base[r]);
  }
  t4a_counter_values nc0;
  t4a_nvrtc_lib_stats(g.nvrtc, &nc0);

  /* the soak */
  printf(
      "soak: %s driver, %d device(s), %d runtimes (%d per device), %d threads, %.0f s, seed "
      "%" PRIu64 ", buffers 1 B .. %zu B\n",
      g.fake ? "fake" : "real", ndev, g.nrt, g.per_device, g.threads, g.seconds, g.seed,
      g.max_bytes);
  fflush(stdout);
  double t0 = now_s();
  clock_gettime(CLOCK_MONOTONIC, &g.deadline);
  g.deadline.tv_sec += (time_t)g.seconds;
  g.deadline.tv_nsec += (long)((g.seconds - (double)(time_t)g.seconds) * 1e9);
  if (g.deadline.tv_nsec >= 1000000000L) {
    g.deadline.tv_sec++;
    g.deadline.tv_nsec -= 1000000000L;
  }
  pthread_t th[MAX_THREADS];
  for (int t = 0; t < g.threads; t++) {
    if (pthread_create(&th[t], NULL, worker_main, &g.w[t]) != 0) return 1;
  }
  for (int t = 0; t < g.threads; t++) pthread_join(th[t], NULL);
  double elapsed = now_s() - t0;
  quiet_phase(&g.w[0], g.fake ? 20000 : 5000);

  /* the chains and descriptors go (their buffers with the epochs of their last launches), then
   * every lane drains */
  for (int t = 0; t < g.threads; t++) {
    worker *w = &g.w[t];
    for (int r = 0; r < g.nrt; r++) {
      t4a_launch_table *tab = t4a_runtime_table(g.rt[r]);
      t4a_chain_destroy(w->chain[r]);
      OK("unregister", t4a_descriptor_unregister(tab, w->desc_chain[r]));
      OK("unregister", t4a_descriptor_unregister(tab, w->desc_fire[r]));
    }
  }
  uint64_t total_ops = 0;
  rt_count want[MAX_RT];
  memset(want, 0, sizeof want);
  for (int t = 0; t < g.threads; t++) {
    for (int k = 0; k < K_COUNT; k++) total_ops += g.w[t].ops[k];
    for (int r = 0; r < g.nrt; r++) {
      rt_count *c = &g.w[t].per_rt[r];
      want[r].host_waits += c->host_waits;
      want[r].bytes_up += c->bytes_up;
      want[r].bytes_down += c->bytes_down;
      want[r].raw_scopes += c->raw_scopes;
      want[r].chain_replays += c->chain_replays;
    }
  }

  /* per runtime: the counters balance */
  int variants = 0;
  for (int v = 0; v <= VARIANTS; v++) variants += atomic_load(&g.compiled_variant[v]) && v != 0;
  for (int r = 0; r < g.nrt; r++) {
    OK("sync (end)", t4a_runtime_sync(g.rt[r]));
    want[r].host_waits++;
    OK("pool_trim", t4a_mem_pool_trim(t4a_runtime_pool(g.rt[r])));
    want[r].host_waits++; /* the trim waits for the stream */
    t4a_counter_values c;
    t4a_runtime_stats(g.rt[r], &c);
    struct t4a_mem_pool_stats ps;
    t4a_mem_pool_stats(t4a_runtime_pool(g.rt[r]), &ps);
    /* the dummy buffer (256 B) and whatever blocks the reuse cache keeps are still allocated */
    uint64_t live = 1;
    BALANCE(c.device_allocs == c.device_frees + ps.cached_blocks + c.buffers_leaked + live,
            "runtime %d: device_allocs %" PRIu64 " != frees %" PRIu64
            " + cached %u + leaked %" PRIu64 " + 1 live",
            r, c.device_allocs, c.device_frees, ps.cached_blocks, c.buffers_leaked);
    BALANCE(c.buffers_leaked == 0 && c.leaked == 0 && c.quarantined == 0 && c.pools_leaked == 0,
            "runtime %d: leaked %" PRIu64 " buffers, %" PRIu64 " objects, %" PRIu64 " quarantined",
            r, c.buffers_leaked, c.leaked, c.quarantined);
    /* a keepalive taken during a recording goes to the chain's graph, which counts it released
     * when the graph is destroyed (the chains are destroyed by now) */
    BALANCE(c.keepalives_held == c.keepalives_released,
            "runtime %d: keepalives held %" PRIu64 " != released %" PRIu64, r,
            c.keepalives_held, c.keepalives_released);
    uint64_t waits = c.host_waits - base[r].host_waits;
    uint64_t staging = c.staging_waits - base[r].staging_waits;
    /* a call that asks for a wait may find the work done and not wait; nothing else waits */
    BALANCE(waits <= want[r].host_waits + staging,
            "runtime %d: host waits %" PRIu64 " > %" PRIu64 " asked + %" PRIu64 " staging waits", r,
            waits, want[r].host_waits, staging);
    BALANCE(c.bytes_uploaded - base[r].bytes_uploaded == want[r].bytes_up,
            "runtime %d: bytes_uploaded %" PRIu64 " != %" PRIu64, r,
            c.bytes_uploaded - base[r].bytes_uploaded, want[r].bytes_up);
    BALANCE(c.bytes_downloaded - base[r].bytes_downloaded == want[r].bytes_down,
            "runtime %d: bytes_downloaded %" PRIu64 " != %" PRIu64, r,
            c.bytes_downloaded - base[r].bytes_downloaded, want[r].bytes_down);
    BALANCE(c.raw_scopes - base[r].raw_scopes == want[r].raw_scopes && c.raw_scopes_poisoned == 0,
            "runtime %d: raw scopes %" PRIu64 " != %" PRIu64 " (poisoned %" PRIu64 ")", r,
            c.raw_scopes - base[r].raw_scopes, want[r].raw_scopes, c.raw_scopes_poisoned);
    BALANCE(c.chain_replays - base[r].chain_replays == want[r].chain_replays,
            "runtime %d: chain replays %" PRIu64 " != %" PRIu64, r,
            c.chain_replays - base[r].chain_replays, want[r].chain_replays);
  }
  t4a_counter_values nc;
  t4a_nvrtc_lib_stats(g.nvrtc, &nc);
  BALANCE(nc.nvrtc_compile_attempts - nc0.nvrtc_compile_attempts == (uint64_t)variants,
          "NVRTC compiled %" PRIu64 " times during the soak for %d new sources",
          nc.nvrtc_compile_attempts - nc0.nvrtc_compile_attempts, variants);

  /* teardown: chains, descriptors, raw modules, kernels, the small buffers, the runtimes */
  for (int t = 0; t < g.threads; t++) {
    t4a_pinned_release(g.w[t].pinned);
    free(g.w[t].scratch);
  }
  for (int r = 0; r < g.nrt; r++) {
    raw_module_call mc = {r, NULL, 1};
    OK("raw module unload",
       t4a_raw_run(t4a_runtime_retire(g.rt[r]), NULL, 0, raw_module_body, &mc));
    t4a_function_release(g.fn_add[r]);
    t4a_function_release(g.fn_fill[r]);
    t4a_buffer_release(g.dummy[r]);
  }
  for (int r = 0; r < g.nrt; r++) {
    t4a_status st = t4a_runtime_close(g.rt[r]);
    BALANCE(st == T4A_OK, "runtime %d: close returned %s", r, t4a_status_name(st));
  }
  for (int d = 0; d < ndev; d++) {
    size_t free1 = 0;
    if (device_free(mlane[d], &free1)) {
      long long lost = (long long)free0[d] - (long long)free1;
      printf("soak: device %d: free memory %zu B at the start, %zu B after close (%+lld B)\n", d,
             free0[d], free1, -lost);
      BALANCE(lost <= g.mem_slack_mib * (1LL << 20),
              "device %d: %lld B of device memory not back after every close (slack %ld MiB)", d,
              lost, g.mem_slack_mib);
    }
    t4a_lane_release(mlane[d]);
  }

  /* figures */
  uint64_t ops[K_COUNT] = {0}, bytes[K_COUNT] = {0};
  for (int t = 0; t < g.threads; t++) {
    for (int k = 0; k < K_COUNT; k++) {
      ops[k] += g.w[t].ops[k];
      bytes[k] += g.w[t].bytes[k];
    }
  }
  printf("soak: %-16s %12s %12s %14s\n", "kind", "ops", "ops/s", "MiB");
  for (int k = 0; k < K_COUNT; k++) {
    printf("soak: %-16s %12" PRIu64 " %12.0f %14.1f\n", k_kind_name[k], ops[k],
           (double)ops[k] / elapsed, (double)bytes[k] / (1 << 20));
  }
  free(g.w);
  close_driver_and_nvrtc();
  long f = atomic_load(&g.failures), m = atomic_load(&g.mismatches),
       im = atomic_load(&g.imbalances);
  printf("soak: total %" PRIu64
         " ops in %.1f s (%.0f ops/s); %ld failed calls, %ld mismatches, %ld "
         "unbalanced counters\n",
         total_ops, elapsed, (double)total_ops / elapsed, f, m, im);
  printf("soak: %s\n", f == 0 && m == 0 && im == 0 ? "PASS" : "FAIL");
  return f == 0 && m == 0 && im == 0 ? 0 : 1;
}
