/* The module cache (content-addressed, LRU-bounded by entries and bytes, strong references),
 * modules (unloaded under their lane's context at the last reference, leaked and counted when
 * that cannot be done safely: requirement A5) and functions (one object per (module, name),
 * parameter list probed once with cuFuncGetParamInfo). */
#define _GNU_SOURCE /* memmem */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"

#define DEFAULT_MAX_ENTRIES 64u
#define DEFAULT_MAX_BYTES ((uint64_t)256 << 20)
#define FATBIN_MAGIC 0xBA55ED50u /* fatBinaryHeader.magic, little-endian */
#define JIT_LOG_BYTES 4096

/* ---- image kinds -------------------------------------------------------------------------- */

static const char *kind_name(t4a_image_kind kind) {
  switch (kind) {
    case T4A_IMAGE_PTX:
      return "PTX";
    case T4A_IMAGE_CUBIN:
      return "CUBIN";
    case T4A_IMAGE_FATBIN:
      return "fatbin";
    case T4A_IMAGE_AUTO:
      break;
  }
  return "unknown";
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* PTX: text (tab, newline, carriage return, printable ASCII) up to a NUL or the end, only NULs
 * after it, and a ".version" directive. */
static int looks_like_ptx(const unsigned char *p, size_t n) {
  size_t len = 0;
  while (len < n && p[len] != 0) {
    unsigned char c = p[len];
    if (!(c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f))) return 0;
    len++;
  }
  for (size_t i = len; i < n; i++) {
    if (p[i] != 0) return 0;
  }
  return len > 0 && memmem(p, len, ".version", 8) != NULL;
}

static int range_in(uint64_t off, uint64_t size, uint64_t n) { return off <= n && size <= n - off; }

/* The driver is given no size: every part of the ELF that its headers declare must lie inside
 * the caller's `n` bytes, or the driver would read past them. 64-bit ELF only (every CUBIN of a
 * driver t4a accepts). */
static int elf_fits(const unsigned char *p, size_t n) {
  if (n < sizeof(Elf64_Ehdr) || p[EI_CLASS] != ELFCLASS64) return 0;
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  if (eh.e_shnum > 0) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !range_in(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), n)) {
      return 0;
    }
    for (unsigned i = 0; i < eh.e_shnum; i++) {
      Elf64_Shdr sh;
      memcpy(&sh, p + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
      if (sh.sh_type != SHT_NOBITS && sh.sh_size > 0 && !range_in(sh.sh_offset, sh.sh_size, n)) {
        return 0;
      }
    }
  }
  if (eh.e_phnum > 0) {
    if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !range_in(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), n)) {
      return 0;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
      Elf64_Phdr ph;
      memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
      if (ph.p_filesz > 0 && !range_in(ph.p_offset, ph.p_filesz, n)) return 0;
    }
  }
  return 1;
}

/* fatBinaryHeader: magic (4), version (2), headerSize (2), fatSize (8); the image is headerSize +
 * fatSize bytes. */
static int fatbin_fits(const unsigned char *p, size_t n) {
  if (n < 16) return 0;
  uint16_t header = (uint16_t)(p[6] | p[7] << 8);
  uint64_t fat = 0;
  for (int i = 7; i >= 0; i--) fat = fat << 8 | p[8 + i];
  return header >= 16 && range_in(header, fat, n);
}

/* What the bytes are: PTX, CUBIN (ELF magic), fatbin (its magic), or AUTO when none of them. */
static t4a_image_kind detect_kind(const unsigned char *p, size_t n) {
  if (n >= 4 && p[0] == ELFMAG0 && p[1] == ELFMAG1 && p[2] == ELFMAG2 && p[3] == ELFMAG3) {
    return T4A_IMAGE_CUBIN;
  }
  if (n >= 4 && le32(p) == FATBIN_MAGIC) return T4A_IMAGE_FATBIN;
  if (looks_like_ptx(p, n)) return T4A_IMAGE_PTX;
  return T4A_IMAGE_AUTO;
}

/* ---- the cache object --------------------------------------------------------------------- */

static void cache_release(t4a_module_cache *c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_lane_release(c->lane);
  pthread_mutex_destroy(&c->lock);
  free(c->buckets);
  free(c);
}

static t4a_status query_limits(t4a_driver *drv, CUdevice dev, t4a_launch_limits *out) {
  static const CUdevice_attribute attrs[12] = {
      CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
      CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
      CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
      CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
      /* launch attributes (attrs.c) */
      CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
      CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
      CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH,
      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
  };
  uint32_t v[12];
  for (int i = 0; i < 12; i++) {
    int x = 0;
    t4a_status st = T4A_CU(drv, cuDeviceGetAttribute, &x, attrs[i], dev);
    if (st != T4A_OK) return st;
    v[i] = x > 0 ? (uint32_t)x : 0;
  }
  out->max_threads_per_block = v[0];
  for (int i = 0; i < 3; i++) {
    out->max_block[i] = v[1 + i];
    out->max_grid[i] = v[4 + i];
  }
  out->max_shared_optin = v[7];
  out->sm_count = v[8];
  out->cooperative = v[9] != 0;
  out->clusters = v[10] != 0;
  out->cc_major = v[11];
  return T4A_OK;
}

t4a_status t4a_module_cache_create(t4a_retire *retire, const t4a_module_cache_options *options,
                                   t4a_module_cache **out) {
  if (out == NULL || retire == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or out is NULL");
  }
  *out = NULL;
  t4a_module_cache_options o = T4A_MODULE_CACHE_OPTIONS_INIT;
  if (options != NULL) o = *options;
  t4a_launch_strategy strategy;
  uint32_t graph_after;
  t4a_status st = t4a_launch_policy_resolve_(&o.launch, &strategy, &graph_after);
  if (st != T4A_OK) return st;
  if (o.max_entries == 0) o.max_entries = DEFAULT_MAX_ENTRIES;
  if (o.max_bytes == 0) o.max_bytes = DEFAULT_MAX_BYTES;
  t4a_lane *lane = t4a_retire_lane(retire);
  st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_driver *drv = t4a_lane_driver(lane);
  t4a_launch_limits limits;
  st = query_limits(drv, t4a_ctx_holder_device(t4a_lane_holder(lane)), &limits);
  if (st != T4A_OK) return st;
  t4a_module_cache *c = t4a_host_calloc(1, sizeof *c);
  if (c == NULL) return T4A_HOST_OUT_OF_MEMORY;
  uint32_t nb = 16;
  while (nb < o.max_entries && nb < 4096) nb *= 2;
  c->buckets = t4a_host_calloc(nb, sizeof *c->buckets);
  if (c->buckets == NULL) {
    free(c);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c->buckets);
    free(c);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise the module cache's lock");
  }
  atomic_init(&c->refs, 1);
  atomic_init(&c->unloads, 0);
  c->num_buckets = nb;
  c->lane = lane;
  t4a_lane_retain(lane);
  c->driver = drv;
  c->counters = t4a_lane_counters(lane);
  c->domain = t4a_lane_domain(lane);
  c->limits = limits;
  c->max_entries = o.max_entries;
  c->max_bytes = o.max_bytes;
  c->strategy = strategy;
  c->graph_after = graph_after;
  *out = c;
  return T4A_OK;
}

/* ---- the table and the LRU list (cache lock held) ----------------------------------------- */

static uint32_t bucket_of(const t4a_module_cache *c, const t4a_module_key *k) {
  uint64_t h;
  memcpy(&h, k->hash, sizeof h);
  return (uint32_t)(h ^ (h >> 29) ^ k->tag ^ (uint64_t)k->kind << 7) & (c->num_buckets - 1);
}

static int key_equal(const t4a_module_key *a, const t4a_module_key *b) {
  return a->tag == b->tag && a->kind == b->kind && memcmp(a->hash, b->hash, 16) == 0;
}

static t4a_module *table_find(t4a_module_cache *c, const t4a_module_key *k) {
  for (t4a_module *m = c->buckets[bucket_of(c, k)]; m != NULL; m = m->hash_next) {
    if (key_equal(&m->key, k)) return m;
  }
  return NULL;
}

static void lru_unlink(t4a_module_cache *c, t4a_module *m) {
  if (m->lru_prev != NULL) {
    m->lru_prev->lru_next = m->lru_next;
  } else {
    c->lru_first = m->lru_next;
  }
  if (m->lru_next != NULL) {
    m->lru_next->lru_prev = m->lru_prev;
  } else {
    c->lru_last = m->lru_prev;
  }
  m->lru_prev = m->lru_next = NULL;
}

static void lru_push_front(t4a_module_cache *c, t4a_module *m) {
  m->lru_prev = NULL;
  m->lru_next = c->lru_first;
  if (c->lru_first != NULL) c->lru_first->lru_prev = m;
  c->lru_first = m;
  if (c->lru_last == NULL) c->lru_last = m;
}

static void table_insert(t4a_module_cache *c, t4a_module *m) {
  uint32_t b = bucket_of(c, &m->key);
  m->hash_next = c->buckets[b];
  c->buckets[b] = m;
  lru_push_front(c, m);
  m->cached = 1;
  c->entries++;
  c->bytes += m->bytes;
}

/* Takes m out of the table and the list; the cache's reference passes to the caller. */
static void table_remove(t4a_module_cache *c, t4a_module *m) {
  t4a_module **at = &c->buckets[bucket_of(c, &m->key)];
  while (*at != NULL && *at != m) at = &(*at)->hash_next;
  if (*at == m) *at = m->hash_next;
  m->hash_next = NULL;
  lru_unlink(c, m);
  m->cached = 0;
  c->entries--;
  c->bytes -= m->bytes;
}

/* ---- modules ------------------------------------------------------------------------------ */

static void module_destroy(t4a_module *m);
static void module_destroy_object(void *m) { module_destroy(m); }

static void module_destroy(t4a_module *m) {
  t4a_module_cache *c = m->cache;
  /* cuModuleUnload during a capture of the lane's stream would break it (measured on the H200:
   * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, then INVALIDATED): unload once the capture ended. */
  int deferred = m->handle != NULL ? t4a_lane_defer_capture_(c->lane, module_destroy_object, m)
                                   : 0;
  if (deferred == 1) return;
  t4a_error saved;
  t4a_error_last(&saved);
  if (deferred < 0) { /* cannot even remember it: leaked, counted */
    t4a_counter_add(c->counters, T4A_COUNTER_leaked, 1);
    m->handle = NULL;
  }
  if (m->handle != NULL) {
    /* Requirement A5: unload only under the lane's own context, and never when the lane's work
     * cannot be proved finished (abandoned) or its context is lost: leak and count instead. */
    int unloaded = 0;
    if (!t4a_lane_is_broken(c->lane) && !t4a_lane_is_abandoned(c->lane)) {
      t4a_ctx_scope scope;
      if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), c->counters) == T4A_OK) {
        /* The functions' graphs first (the driver finishes their queued launches). */
        for (t4a_function *f = m->functions; f != NULL; f = f->next) {
          if (f->graph.exec != NULL &&
              T4A_CU_QUIET(c->driver, cuGraphExecDestroy, f->graph.exec) == T4A_OK) {
            f->graph.exec = NULL;
          }
          if (f->graph.graph != NULL &&
              T4A_CU_QUIET(c->driver, cuGraphDestroy, f->graph.graph) == T4A_OK) {
            f->graph.graph = NULL;
          }
        }
        unloaded = T4A_CU_QUIET(c->driver, cuModuleUnload, m->handle) == T4A_OK;
        t4a_ctx_scope_exit_quiet(&scope);
      }
    }
    if (unloaded) {
      atomic_fetch_add_explicit(&c->unloads, 1, memory_order_relaxed);
      t4a_counter_add(c->counters, T4A_COUNTER_module_unloads, 1);
    } else {
      t4a_counter_add(c->counters, T4A_COUNTER_leaked, 1);
    }
  }
  while (m->functions != NULL) {
    t4a_function *f = m->functions;
    m->functions = f->next;
    /* Graphs that could not be destroyed (no context, a refusal) are leaked and counted. */
    t4a_counter_add(c->counters, T4A_COUNTER_leaked,
                    (uint64_t)(f->graph.exec != NULL) + (f->graph.graph != NULL));
    pthread_mutex_destroy(&f->attr_lock);
    pthread_mutex_destroy(&f->graph_lock);
    free(f);
  }
  while (m->globals != NULL) {
    t4a_global_rec_ *g = m->globals;
    m->globals = g->next;
    free(g);
  }
  pthread_mutex_destroy(&m->lock);
  free(m);
  t4a_error_restore(&saved);
  cache_release(c);
}

void t4a_module_retain(t4a_module *m) {
  if (m != NULL) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void t4a_module_release(t4a_module *m) {
  if (m != NULL && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) {
    module_destroy(m);
  }
}

void t4a_module_release_object_(void *m) { t4a_module_release(m); }

t4a_keepalive t4a_module_keepalive_(t4a_module *m) {
  t4a_module_retain(m);
  return (t4a_keepalive){.object = m, .release = t4a_module_release_object_};
}

/* Releases a list of modules linked through hash_next (taken out of the table). */
static void release_chain(t4a_module *m) {
  while (m != NULL) {
    t4a_module *next = m->hash_next;
    m->hash_next = NULL;
    t4a_module_release(m);
    m = next;
  }
}

/* One line of the JIT log for the error detail: newlines become " | ". */
static void log_excerpt(const char *log, char *out, size_t size) {
  size_t o = 0;
  for (size_t i = 0; log[i] != '\0' && o + 4 < size; i++) {
    if (log[i] == '\n' || log[i] == '\r') {
      if (o > 0 && log[i + 1] != '\0' && out[o - 1] != ' ') {
        memcpy(out + o, " | ", 3);
        o += 3;
      }
      continue;
    }
    out[o++] = log[i];
  }
  while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '|')) o--;
  out[o] = '\0';
}

/* Loads the image under the lane's context. `terminate`: the bytes need a NUL after them
 * (text images without one), so they are copied first. */
static t4a_status driver_load(t4a_module_cache *c, const void *image, size_t bytes,
                              t4a_image_kind kind, int terminate, CUmodule *out) {
  const void *src = image;
  char *copy = NULL;
  if (terminate) {
    copy = t4a_host_malloc(bytes + 1);
    if (copy == NULL) return T4A_HOST_OUT_OF_MEMORY;
    memcpy(copy, image, bytes);
    copy[bytes] = '\0';
    src = copy;
  }
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), c->counters);
  if (st != T4A_OK) {
    free(copy);
    return st;
  }
  char log[JIT_LOG_BYTES];
  log[0] = '\0';
  CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  CUresult r = c->driver->t.cuModuleLoadDataEx(out, src, 2, opts, vals);
  log[sizeof log - 1] = '\0';
  free(copy);
  if (r != CUDA_SUCCESS) {
    *out = NULL;
    st = t4a_cu_fail(c->driver, r, "cuModuleLoadDataEx", 0);
    if (log[0] != '\0') {
      char excerpt[200];
      log_excerpt(log, excerpt, sizeof excerpt);
      t4a_error_set_(st, "cuModuleLoadDataEx", (int)r, t4a_cu_name(c->driver, r), 0,
                     "loading the %s image (%zu bytes) failed: %s", kind_name(kind), bytes,
                     excerpt);
    }
    t4a_ctx_scope_exit_quiet(&scope);
    return t4a_lane_note_(c->lane, st);
  }
  t4a_ctx_scope_exit_quiet(&scope); /* a failed restore is counted; the module is loaded */
  return T4A_OK;
}

static t4a_status load_keyed(t4a_module_cache *c, const t4a_module_key *key, const void *image,
                             size_t bytes, t4a_image_kind kind, int terminate, t4a_module **out) {
  if (bytes > c->max_bytes) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, (uint64_t)bytes,
                          "a %zu-byte image exceeds the module cache's bound of %llu bytes", bytes,
                          (unsigned long long)c->max_bytes);
  }
  pthread_mutex_lock(&c->lock);
  t4a_module *m = table_find(c, key);
  if (m != NULL) {
    lru_unlink(c, m);
    lru_push_front(c, m);
    t4a_module_retain(m);
    c->hits++;
    pthread_mutex_unlock(&c->lock);
    *out = m;
    return T4A_OK;
  }
  pthread_mutex_unlock(&c->lock);

  t4a_status st = t4a_lane_check(c->lane);
  if (st != T4A_OK) return st;
  m = t4a_host_calloc(1, sizeof *m);
  if (m == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&m->lock, NULL) != 0) {
    free(m);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a module's lock");
  }
  st = driver_load(c, image, bytes, kind, terminate, &m->handle);
  if (st != T4A_OK) {
    pthread_mutex_destroy(&m->lock);
    free(m);
    return st;
  }
  t4a_counter_add(c->counters, T4A_COUNTER_module_loads, 1);
  atomic_init(&m->refs, 2); /* the caller's and the cache's */
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  m->cache = c;
  m->key = *key;
  m->bytes = bytes;

  t4a_module *victims = NULL;
  pthread_mutex_lock(&c->lock);
  c->loads++;
  t4a_module *other = table_find(c, key);
  if (other != NULL) {
    /* Another thread loaded the same image meanwhile: answer with its module, drop ours. */
    lru_unlink(c, other);
    lru_push_front(c, other);
    t4a_module_retain(other);
    c->hits++;
    pthread_mutex_unlock(&c->lock);
    atomic_store_explicit(&m->refs, 1, memory_order_relaxed);
    t4a_module_release(m);
    *out = other;
    return T4A_OK;
  }
  table_insert(c, m);
  /* Least recently used first out, never the module just loaded (it fits the byte bound). */
  while ((c->entries > c->max_entries || c->bytes > c->max_bytes) && c->lru_last != m) {
    t4a_module *v = c->lru_last;
    table_remove(c, v);
    v->hash_next = victims;
    victims = v;
    c->evictions++;
    t4a_counter_add(c->counters, T4A_COUNTER_module_evictions, 1);
  }
  pthread_mutex_unlock(&c->lock);
  release_chain(victims);
  *out = m;
  return T4A_OK;
}

t4a_status t4a_module_load(t4a_module_cache *c, const void *image, size_t bytes,
                           t4a_image_kind kind, t4a_module **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (c == NULL || image == NULL || bytes == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "cache or image is NULL, or the image is empty");
  }
  if ((unsigned)kind > (unsigned)T4A_IMAGE_FATBIN) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "unknown image kind %d",
                          (int)kind);
  }
  const unsigned char *p = image;
  t4a_image_kind seen = detect_kind(p, bytes);
  if (seen == T4A_IMAGE_AUTO && kind == T4A_IMAGE_AUTO) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the %zu-byte image is neither PTX text (with .version), an ELF CUBIN "
                          "nor a fatbin; name its kind to hand it to the driver as it is",
                          bytes);
  }
  if (seen != T4A_IMAGE_AUTO && kind != T4A_IMAGE_AUTO && seen != kind) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the image was given as %s but its bytes are %s", kind_name(kind),
                          kind_name(seen));
  }
  if (seen == T4A_IMAGE_CUBIN && !elf_fits(p, bytes)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the ELF image is not 64-bit or declares parts beyond its %zu bytes",
                          bytes);
  }
  if (seen == T4A_IMAGE_FATBIN && !fatbin_fits(p, bytes)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the fatbin header declares more than its %zu bytes", bytes);
  }
  t4a_image_kind k = seen != T4A_IMAGE_AUTO ? seen : kind;
  t4a_module_key key = {'I', (uint8_t)k, {0}};
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_withSeed(image, bytes, (XXH64_hash_t)k));
  memcpy(key.hash, canon.digest, 16);
  /* Text (PTX, or bytes of no known kind given as a kind) must reach the driver NUL-terminated. */
  int terminate = (seen == T4A_IMAGE_PTX || seen == T4A_IMAGE_AUTO) && p[bytes - 1] != '\0';
  return load_keyed(c, &key, image, bytes, k, terminate, out);
}

t4a_status t4a_module_load_artifact(t4a_module_cache *c, const t4a_nvrtc_artifact *artifact,
                                    t4a_module **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (c == NULL || artifact == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "cache or artifact is NULL");
  }
  t4a_image_kind kind;
  switch (t4a_nvrtc_artifact_output(artifact)) {
    case T4A_NVRTC_OUTPUT_PTX:
      kind = T4A_IMAGE_PTX;
      break;
    case T4A_NVRTC_OUTPUT_CUBIN:
      kind = T4A_IMAGE_CUBIN;
      break;
    default:
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "only PTX and CUBIN artifacts load as modules (link LTO-IR first: "
                            "t4a_jitlink_link, t4a_runtime_link)");
  }
  size_t bytes = 0;
  const void *data = t4a_nvrtc_artifact_data(artifact, &bytes);
  t4a_module_key key = {'A', (uint8_t)kind, {0}};
  t4a_nvrtc_artifact_key(artifact, key.hash);
  /* The artifact's bytes are followed by a NUL (t4a/nvrtc.h): no copy. */
  return load_keyed(c, &key, data, bytes, kind, 0, out);
}

/* ---- cache maintenance -------------------------------------------------------------------- */

void t4a_module_cache_clear(t4a_module_cache *c) {
  if (c == NULL) return;
  t4a_module *all = NULL;
  pthread_mutex_lock(&c->lock);
  while (c->lru_last != NULL) {
    t4a_module *m = c->lru_last;
    table_remove(c, m);
    m->hash_next = all;
    all = m;
  }
  pthread_mutex_unlock(&c->lock);
  release_chain(all); /* drop paths: each release keeps the caller's error detail */
}

void t4a_module_cache_destroy(t4a_module_cache *c) {
  if (c == NULL) return;
  t4a_module_cache_clear(c);
  cache_release(c); /* modules still alive hold the rest */
}

void t4a_module_cache_stats(t4a_module_cache *c, struct t4a_module_cache_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  if (c == NULL) return;
  pthread_mutex_lock(&c->lock);
  out->entries = c->entries;
  out->bytes = c->bytes;
  out->loads = c->loads;
  out->hits = c->hits;
  out->evictions = c->evictions;
  pthread_mutex_unlock(&c->lock);
  out->unloads = atomic_load_explicit(&c->unloads, memory_order_relaxed);
}

/* ---- functions ---------------------------------------------------------------------------- */

static t4a_function *find_function(t4a_module *m, const char *name) {
  for (t4a_function *f = m->functions; f != NULL; f = f->next) {
    if (strcmp(f->name, name) == 0) return f;
  }
  return NULL;
}

typedef struct probed {
  CUfunction handle;
  int known;
  uint32_t num;
  uint32_t offsets[T4A_MAX_KERNEL_PARAMS], sizes[T4A_MAX_KERNEL_PARAMS];
  int dyn_shared;
} probed;

/* Looks the kernel up and learns its parameters (context current). */
static t4a_status probe_function(t4a_module *m, const char *name, probed *p) {
  t4a_module_cache *c = m->cache;
  t4a_driver *drv = c->driver;
  CUresult r = drv->t.cuModuleGetFunction(&p->handle, m->handle, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    return t4a_error_set_(T4A_UNKNOWN_ENTRY_POINT, "cuModuleGetFunction", (int)r,
                          t4a_cu_name(drv, r), 0, "the module has no kernel named '%s'", name);
  }
  if (r != CUDA_SUCCESS) return t4a_cu_fail(drv, r, "cuModuleGetFunction", 0);
  p->known = 0;
  p->num = 0;
  if (drv->t.cuFuncGetParamInfo != NULL &&
      (t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO) != 0) {
    /* No count call exists: probe indices until CUDA_ERROR_INVALID_VALUE marks the end. */
    for (uint32_t i = 0;; i++) {
      size_t off = 0, size = 0;
      t4a_counter_add(c->counters, T4A_COUNTER_param_info_probes, 1);
      r = drv->t.cuFuncGetParamInfo(p->handle, i, &off, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) break;
      if (r != CUDA_SUCCESS) return t4a_cu_fail(drv, r, "cuFuncGetParamInfo", 0);
      if (i == T4A_MAX_KERNEL_PARAMS) {
        return t4a_error_set_(T4A_LIMIT_EXCEEDED, "cuFuncGetParamInfo", 0, NULL, 0,
                              "kernel '%s' has more than %u parameters, which t4a cannot check",
                              name, T4A_MAX_KERNEL_PARAMS);
      }
      if (off > UINT32_MAX || size > UINT32_MAX) {
        return t4a_error_set_(T4A_INTERNAL, "cuFuncGetParamInfo", 0, NULL, 0,
                              "kernel '%s' parameter %u: offset %zu, size %zu out of range", name,
                              i, off, size);
      }
      p->offsets[i] = (uint32_t)off;
      p->sizes[i] = (uint32_t)size;
      p->num = i + 1;
    }
    p->known = 1;
  }
  return T4A_CU(drv, cuFuncGetAttribute, &p->dyn_shared,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, p->handle);
}

t4a_status t4a_module_get_function(t4a_module *m, const char *name, t4a_function **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (m == NULL || name == NULL || name[0] == '\0') {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "module or name is NULL/empty");
  }
  pthread_mutex_lock(&m->lock);
  t4a_function *f = find_function(m, name);
  if (f != NULL) t4a_module_retain(m);
  pthread_mutex_unlock(&m->lock);
  if (f != NULL) {
    *out = f;
    return T4A_OK;
  }

  t4a_module_cache *c = m->cache;
  t4a_status st = t4a_lane_check(c->lane);
  if (st != T4A_OK) return st;
  probed p;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), c->counters)) != T4A_OK) {
    return st;
  }
  st = probe_function(m, name, &p);
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    return t4a_lane_note_(c->lane, st);
  }
  t4a_ctx_scope_exit_quiet(&scope); /* a failed restore is counted */

  size_t name_len = strlen(name);
  size_t arrays = p.known ? 2 * (size_t)p.num * sizeof(uint32_t) : 0;
  /* The bytes a GRAPH node's parameters were set from: the layout's extent. */
  size_t extent = 0;
  int graphed = c->strategy == T4A_LAUNCH_STRATEGY_GRAPH && p.known;
  for (uint32_t i = 0; graphed && i < p.num; i++) {
    if ((size_t)p.offsets[i] + p.sizes[i] > extent) extent = (size_t)p.offsets[i] + p.sizes[i];
  }
  f = t4a_host_calloc(1, sizeof *f + arrays + extent + name_len + 1);
  if (f == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&f->attr_lock, NULL) != 0) {
    free(f);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a function's lock");
  }
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&f->graph_lock, NULL) != 0) {
    pthread_mutex_destroy(&f->attr_lock);
    free(f);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a function's lock");
  }
  unsigned char *tail = (unsigned char *)(f + 1);
  uint32_t *offsets = (uint32_t *)tail, *sizes = offsets + (p.known ? p.num : 0);
  if (p.known && p.num > 0) {
    memcpy(offsets, p.offsets, p.num * sizeof *offsets);
    memcpy(sizes, p.sizes, p.num * sizeof *sizes);
  }
  f->graph_bytes = tail + arrays;
  f->graph.enabled = (uint8_t)graphed;
  f->graph.fires_left = c->graph_after - 1;
  char *stored = (char *)(tail + arrays + extent);
  memcpy(stored, name, name_len + 1);
  f->module = m;
  f->handle = p.handle;
  f->name = stored;
  f->known = p.known;
  f->num_params = p.known ? p.num : 0;
  f->offsets = offsets;
  f->sizes = sizes;
  atomic_init(&f->declared, T4A_PARAMS_UNDECLARED);
  atomic_init(&f->dyn_shared_max, p.dyn_shared > 0 ? (uint32_t)p.dyn_shared : 0);

  pthread_mutex_lock(&m->lock);
  t4a_function *other = find_function(m, name);
  if (other == NULL) {
    f->next = m->functions;
    m->functions = f;
  }
  t4a_module_retain(m);
  pthread_mutex_unlock(&m->lock);
  if (other != NULL) { /* another thread looked it up meanwhile */
    pthread_mutex_destroy(&f->attr_lock);
    pthread_mutex_destroy(&f->graph_lock);
    free(f);
    f = other;
  }
  *out = f;
  return T4A_OK;
}

void t4a_function_retain(t4a_function *f) {
  if (f != NULL) t4a_module_retain(f->module);
}

void t4a_function_release(t4a_function *f) {
  if (f != NULL) t4a_module_release(f->module);
}

const char *t4a_function_name(const t4a_function *f) { return f != NULL ? f->name : NULL; }

uint64_t t4a_function_domain(const t4a_function *f) {
  return f != NULL ? f->module->cache->domain : 0;
}

t4a_status t4a_function_num_params(t4a_function *f, uint32_t *out_count, int *out_known) {
  if (out_count != NULL) *out_count = 0;
  if (out_known != NULL) *out_known = 0;
  if (f == NULL || out_count == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "function or out is NULL");
  }
  if (f->known) {
    *out_count = f->num_params;
  } else {
    uint32_t d = atomic_load_explicit(&f->declared, memory_order_acquire);
    *out_count = d == T4A_PARAMS_UNDECLARED ? 0 : d;
  }
  if (out_known != NULL) *out_known = f->known;
  return T4A_OK;
}

t4a_status t4a_function_param(t4a_function *f, uint32_t index, size_t *out_offset,
                              size_t *out_size) {
  if (out_offset != NULL) *out_offset = 0;
  if (out_size != NULL) *out_size = 0;
  uint32_t n = 0;
  t4a_status st = t4a_function_num_params(f, &n, NULL);
  if (st != T4A_OK) return st;
  if (index >= n) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "kernel '%s' has %u parameters; index %u is out of range", f->name, n,
                          index);
  }
  if (f->known) {
    if (out_offset != NULL) *out_offset = f->offsets[index];
    if (out_size != NULL) *out_size = f->sizes[index];
  }
  return T4A_OK;
}

t4a_status t4a_function_declare_params(t4a_function *f, uint32_t count) {
  if (f == NULL || count > T4A_MAX_KERNEL_PARAMS) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "function is NULL or the count exceeds %u", T4A_MAX_KERNEL_PARAMS);
  }
  if (f->known && count != f->num_params) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "kernel '%s' takes %u parameters (driver), not %u", f->name,
                          f->num_params, count);
  }
  atomic_store_explicit(&f->declared, count, memory_order_release);
  return T4A_OK;
}
