/* The artifact cache's memory level: a hash table of entries keyed by the request key and
 * matched by full identity, an LRU list bounded by entries and bytes, and in-flight entries that
 * make concurrent requests for one key compile once. The disk level is nvrtc_disk.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define DEFAULT_MAX_ENTRIES 512u
#define DEFAULT_MAX_BYTES ((size_t)256 << 20)
#define DEFAULT_DISK_MAX_BYTES ((uint64_t)1 << 30)
#define HINT_SLOTS T4A_NVRTC_HINT_SLOTS
#define SPEC_SLOTS 8

/* E_RETRY: the owner found, on loading NVRTC, that the identity the key was made with is not the
 * loaded one; owner and waiters start over with the new identity. */
typedef enum entry_state { E_INFLIGHT, E_READY, E_FAILED, E_RETRY } entry_state;

/* One request's slot. key, identity and identity_bytes are set before the entry is inserted and
 * never change (so they are read without the mutex by whoever holds a reference); every other
 * field is guarded by the cache mutex. refs counts the table's membership, the compiling owner
 * and every thread that found the entry and has not answered from it yet; the entry is freed at
 * zero. */
typedef struct entry {
  uint8_t key[16];
  uint8_t *identity;
  size_t identity_bytes;
  entry_state state;
  int refs;
  int in_table;
  t4a_nvrtc_artifact *art; /* E_READY: the entry's own reference */
  size_t charge;           /* E_READY and in the LRU: bytes counted against max_bytes */
  t4a_status st;           /* E_FAILED: what the owner got, for the waiters */
  t4a_error err;
  char *log;
  size_t log_bytes;
  struct entry *hnext;       /* bucket chain */
  struct entry *prev, *next; /* LRU, most recent first (E_READY in the table only) */
  uint64_t sig;              /* t4a_nvrtc_request_sig_ of a request without roots, or 0 */
} entry;

/* A slot of the recent-hit index: a ready entry in the table and its request signature. */
typedef struct hint {
  uint64_t sig;
  entry *e;
} hint;

/* lib is the NVRTC compiles run with; id the identity keys are made with (lib itself, or an
 * identity-only lib of the same build derived from its files: nvrtc_libid.c). A lazy cache starts
 * with lib NULL and loads it at its first miss (under load_mu), then compares the identity of what
 * it loaded with the one it derived: if they differ, id is replaced (the old one is kept in
 * old_id, since calls in progress may hold it) and calls keyed with the old one start over. Both
 * pointers change at most once each, from the loading thread. */
struct t4a_nvrtc_cache {
  t4a_nvrtc_lib *_Atomic lib;
  t4a_nvrtc_lib *_Atomic id;
  t4a_nvrtc_lib *old_id;
  pthread_mutex_t load_mu;
  char *lib_path; /* the lazy cache's t4a_nvrtc_lib_options.library_path (copy), or NULL */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  entry **buckets;
  size_t num_buckets; /* a power of two */
  entry lru;          /* sentinel */
  size_t num_ready, bytes;
  size_t max_entries, max_bytes;
  t4a_counters counters;
  int has_disk;
  int compile_uncacheable; /* t4a_nvrtc_cache_options */
  t4a_nvrtc_disk disk;
  /* Include manifests by first-level key (requests with include roots), oldest evicted first,
   * at most max_entries; guarded by mu. */
  struct mentry **mbuckets;
  struct mentry *mnewest, *moldest;
  size_t num_manifests, manifest_bytes; /* bounded by max_entries and max_bytes / 4 */
  /* The recent-hit index (requests without roots), guarded by mu: a slot names an entry of the
   * table (cleared when the entry leaves it), found by the request's signature, a cheap digest
   * of part of it. A candidate is answered only if its identity record equals the request's,
   * every byte compared: the index spares the hash of the whole request, not the comparison. */
  hint hints[HINT_SLOTS];
  _Atomic uint64_t hint_hits;
  /* The first-level keys whose first miss compiles alongside its include check now (guarded by
   * mu): a second request for one waits for it (see spec_claim). */
  uint8_t spec_keys[SPEC_SLOTS][16];
  unsigned char spec_used[SPEC_SLOTS];
  _Atomic uint64_t roots_misses, check_wait_ns; /* t4a_nvrtc_cache_stats */
};

/* One include manifest in memory: the blob (nvrtc_manifest.c) under its first-level key. */
typedef struct mentry {
  uint8_t key[16];
  uint8_t *blob;
  size_t bytes;
  uint64_t nprobes;
  uint64_t epoch; /* the roots' epoch it was validated at (t4a_nvrtc_roots_epoch_), or 0 */
  struct mentry *hnext, *newer, *older;
} mentry;

static size_t bucket_of(const t4a_nvrtc_cache *c, const uint8_t key[16]) {
  uint64_t h = 0;
  for (int i = 0; i < 8; i++) h = (h << 8) | key[i];
  return (size_t)h & (c->num_buckets - 1);
}

static void entry_free(entry *e) {
  t4a_nvrtc_artifact_release(e->art);
  free(e->identity);
  free(e->log);
  free(e);
}

/* Drops one reference; frees at zero. Caller holds the mutex. */
static void entry_unref(entry *e) {
  if (--e->refs == 0) entry_free(e);
}

static void lru_unlink(entry *e) {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(t4a_nvrtc_cache *c, entry *e) {
  e->next = c->lru.next;
  e->prev = &c->lru;
  c->lru.next->prev = e;
  c->lru.next = e;
}

static void table_remove(t4a_nvrtc_cache *c, entry *e) {
  hint *h = &c->hints[e->sig & (HINT_SLOTS - 1)];
  if (h->e == e) h->e = NULL;
  entry **pp = &c->buckets[bucket_of(c, e->key)];
  while (*pp != NULL && *pp != e) pp = &(*pp)->hnext;
  if (*pp == e) *pp = e->hnext;
  e->hnext = NULL;
  e->in_table = 0;
  if (e->prev != NULL) {
    lru_unlink(e);
    c->num_ready--;
    c->bytes -= e->charge;
  }
  entry_unref(e);
}

/* The entry holding the request under `key`, compared in full. Caller holds the mutex. Only the
 * rare path (two requests with one 128-bit key) calls it: see find_or_insert. */
static entry *table_find(t4a_nvrtc_cache *c, const t4a_nvrtc_lib *id, const uint8_t key[16],
                         const t4a_nvrtc_prepared *p) {
  for (entry *e = c->buckets[bucket_of(c, key)]; e != NULL; e = e->hnext) {
    if (memcmp(e->key, key, 16) == 0 &&
        t4a_nvrtc_identity_equal(id, p, e->identity, e->identity_bytes)) {
      return e;
    }
  }
  return NULL;
}

static void table_insert(t4a_nvrtc_cache *c, entry *e) {
  size_t b = bucket_of(c, e->key);
  e->in_table = 1;
  e->hnext = c->buckets[b];
  c->buckets[b] = e;
}

/* Finds the entry of the request and returns it with a reference the caller drops, or NULL;
 * *in_flight: whether it was in flight when found. If `mine` (the caller's in-flight entry for
 * the request, its references set) is given and no entry matches, inserts it and returns NULL.
 *
 * The mutex covers walking one bucket and taking the reference only: the comparison of the
 * stored identity with the request (as large as the request) runs outside it, which is safe
 * because an entry's identity never changes and the reference keeps it alive. Only when the first
 * entry with the key holds another request (a 128-bit collision) does the search compare under
 * the mutex. */
static entry *find_or_insert(t4a_nvrtc_cache *c, const t4a_nvrtc_lib *id, const uint8_t key[16],
                             const t4a_nvrtc_prepared *p, entry *mine, int *in_flight) {
  pthread_mutex_lock(&c->mu);
  entry *cand = c->buckets[bucket_of(c, key)];
  while (cand != NULL && memcmp(cand->key, key, 16) != 0) cand = cand->hnext;
  if (cand == NULL) {
    if (mine != NULL) table_insert(c, mine);
    pthread_mutex_unlock(&c->mu);
    return NULL;
  }
  cand->refs++;
  *in_flight = cand->state == E_INFLIGHT;
  pthread_mutex_unlock(&c->mu);
  if (t4a_nvrtc_identity_equal(id, p, cand->identity, cand->identity_bytes)) return cand;

  pthread_mutex_lock(&c->mu);
  entry_unref(cand);
  entry *e = table_find(c, id, key, p);
  if (e != NULL) {
    e->refs++;
    *in_flight = e->state == E_INFLIGHT;
  } else if (mine != NULL) {
    table_insert(c, mine);
  }
  pthread_mutex_unlock(&c->mu);
  return e;
}

/* ---- The recent-hit index ------------------------------------------------------------------ */

#define SIG_EDGE 64u    /* source bytes taken from each end */
#define SIG_SAMPLES 32u /* and 8-byte words spread evenly between */

uint64_t t4a_nvrtc_request_sig_(const t4a_nvrtc_prepared *p) {
  const t4a_nvrtc_request *r = p->req;
  uint8_t b[8 * 8 + 64 + sizeof p->target + 2 * SIG_EDGE + 8 * SIG_SAMPLES];
  size_t n = 0;
  uint64_t counts[8] = {p->source_bytes,        p->program_name_bytes, r->num_headers,
                        r->num_options,         r->num_name_expressions, (uint64_t)r->output,
                        r->num_include_roots,   (uint64_t)p->roots_key};
  memcpy(b, counts, sizeof counts);
  n += sizeof counts;
  size_t pn = p->program_name_bytes < 64 ? p->program_name_bytes : 64;
  memcpy(b + n, p->program_name, pn);
  n += pn;
  memcpy(b + n, p->target, sizeof p->target);
  n += sizeof p->target;
  const char *src = r->source;
  size_t sb = p->source_bytes;
  size_t edge = sb < SIG_EDGE ? sb : SIG_EDGE;
  memcpy(b + n, src, edge);
  n += edge;
  memcpy(b + n, src + sb - edge, edge);
  n += edge;
  if (sb >= 2 * SIG_EDGE + 8) {
    for (size_t i = 0; i < SIG_SAMPLES; i++) {
      memcpy(b + n, src + SIG_EDGE + (sb - 2 * SIG_EDGE - 8) * i / (SIG_SAMPLES - 1), 8);
      n += 8;
    }
  }
  uint64_t sig = XXH3_64bits(b, n);
  return sig != 0 ? sig : 1;
}

/* The entry the index names for sig, if its identity record is the request's (every byte
 * compared, outside the mutex as in find_or_insert), with a reference the caller drops. */
static entry *hint_find(t4a_nvrtc_cache *c, const t4a_nvrtc_lib *id, const t4a_nvrtc_prepared *p,
                        uint64_t sig) {
  pthread_mutex_lock(&c->mu);
  const hint *h = &c->hints[sig & (HINT_SLOTS - 1)];
  entry *e = h->sig == sig ? h->e : NULL;
  if (e != NULL) e->refs++;
  pthread_mutex_unlock(&c->mu);
  if (e == NULL) return NULL;
  if (t4a_nvrtc_identity_equal(id, p, e->identity, e->identity_bytes)) return e;
  pthread_mutex_lock(&c->mu);
  entry_unref(e);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Names e (ready, in the table) in the index. Caller holds the mutex. */
static void hint_set(t4a_nvrtc_cache *c, entry *e) {
  if (e->sig == 0) return;
  hint *h = &c->hints[e->sig & (HINT_SLOTS - 1)];
  h->sig = e->sig;
  h->e = e;
}

uint64_t t4a_nvrtc_cache_hint_hits_(const t4a_nvrtc_cache *cache) {
  return cache != NULL ? atomic_load(&((t4a_nvrtc_cache *)cache)->hint_hits) : 0;
}

/* ---- Include manifests in memory -------------------------------------------------------------- */

static mentry **mslot(t4a_nvrtc_cache *c, const uint8_t key[16]) {
  mentry **pp = &c->mbuckets[bucket_of(c, key)];
  while (*pp != NULL && memcmp((*pp)->key, key, 16) != 0) pp = &(*pp)->hnext;
  return pp;
}

static void mremove(t4a_nvrtc_cache *c, mentry **pp) {
  mentry *m = *pp;
  *pp = m->hnext;
  if (m->newer != NULL) m->newer->older = m->older; else c->mnewest = m->older;
  if (m->older != NULL) m->older->newer = m->newer; else c->moldest = m->newer;
  c->num_manifests--;
  c->manifest_bytes -= m->bytes;
  free(m->blob);
  free(m);
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* The manifest under key. 1: known valid without looking at the files (it lists nothing, or it
 * was validated at the roots' current epoch: no event since), digest set. 0: *blob is a copy to
 * validate (caller frees), or NULL (none); *epoch_now is the roots' epoch read before the copy. */
static int manifest_get(t4a_nvrtc_cache *c, const uint8_t key[16], const char *const *roots,
                        size_t nr, uint8_t digest[16], uint8_t **blob, size_t *bytes,
                        uint64_t *epoch_now) {
  *blob = NULL;
  *bytes = 0;
  *epoch_now = 0;
  pthread_mutex_lock(&c->mu);
  mentry *m = *mslot(c, key);
  if (m == NULL) {
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  if (m->nprobes == 0) {
    memcpy(digest, m->blob + 16, 16);
    pthread_mutex_unlock(&c->mu);
    return 1;
  }
  size_t n = m->bytes;
  pthread_mutex_unlock(&c->mu);
  uint64_t ep = t4a_nvrtc_roots_epoch_(roots, nr);
  *epoch_now = ep;
  t4a_error saved; /* no memory for the copy is a miss, not the caller's error */
  t4a_error_last(&saved);
  uint8_t *copy = t4a_host_malloc(n);
  if (copy == NULL) t4a_error_restore(&saved);
  pthread_mutex_lock(&c->mu);
  m = *mslot(c, key);
  if (m != NULL && ep != 0 && m->epoch == ep) {
    memcpy(digest, m->blob + 16, 16);
    pthread_mutex_unlock(&c->mu);
    free(copy);
    return 1;
  }
  if (m != NULL && copy != NULL && m->bytes == n) {
    memcpy(copy, m->blob, n);
  } else {
    free(copy);
    copy = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  *blob = copy;
  *bytes = copy != NULL ? n : 0;
  return 0;
}

/* Writes the manifest into the disk level, counted against its bound. */
static void manifest_store(t4a_nvrtc_cache *c, const uint8_t key[16], const uint8_t *blob,
                           size_t bytes) {
  size_t n = t4a_nvrtc_manifest_store_(c->disk.dir, key, blob, bytes);
  if (n != 0) t4a_nvrtc_disk_wrote_(&c->disk, n, &c->counters);
}

/* Keeps blob (taken) as the manifest under key, replacing the one there. */
static void manifest_put(t4a_nvrtc_cache *c, const uint8_t key[16], uint8_t *blob, size_t bytes,
                         uint64_t epoch) {
  mentry *m = t4a_host_malloc(sizeof *m);
  if (m == NULL) {
    free(blob);
    return;
  }
  memcpy(m->key, key, 16);
  m->blob = blob;
  m->bytes = bytes;
  m->nprobes = rd64(blob + 8);
  m->epoch = epoch;
  pthread_mutex_lock(&c->mu);
  mentry **pp = mslot(c, key);
  if (*pp != NULL) mremove(c, pp);
  m->hnext = c->mbuckets[bucket_of(c, key)];
  c->mbuckets[bucket_of(c, key)] = m;
  m->newer = NULL;
  m->older = c->mnewest;
  if (c->mnewest != NULL) c->mnewest->newer = m; else c->moldest = m;
  c->mnewest = m;
  c->num_manifests++;
  c->manifest_bytes += bytes;
  while ((c->num_manifests > c->max_entries || c->manifest_bytes > c->max_bytes / 4) &&
         c->moldest != m) {
    mremove(c, mslot(c, c->moldest->key));
  }
  pthread_mutex_unlock(&c->mu);
}

/* Makes an in-flight entry ready and keeps it within the bounds. Caller holds the mutex. */
static void publish_ready(t4a_nvrtc_cache *c, entry *e, t4a_nvrtc_artifact *art) {
  t4a_nvrtc_artifact_retain(art);
  e->art = art;
  e->state = E_READY;
  e->charge = art->total_bytes + e->identity_bytes + sizeof *e;
  if (e->charge > c->max_bytes) {
    table_remove(c, e); /* larger than the whole memory level: handed out, not kept */
    return;
  }
  lru_push_front(c, e);
  hint_set(c, e);
  c->num_ready++;
  c->bytes += e->charge;
  while (c->num_ready > c->max_entries || c->bytes > c->max_bytes) {
    entry *victim = c->lru.prev;
    if (victim == e) break; /* cannot happen: e alone fits both bounds */
    t4a_counter_add(&c->counters, T4A_COUNTER_nvrtc_mem_evictions, 1);
    table_remove(c, victim);
  }
}

static t4a_status lock_init(t4a_nvrtc_cache *c) {
  int rc;
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT)) {
    rc = ENOMEM;
  } else {
    rc = pthread_mutex_init(&c->mu, NULL);
  }
  if (rc != 0) {
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_mutex_init", rc, NULL, 0,
                          "pthread_mutex_init failed: %s", strerror(rc));
  }
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT)) {
    rc = ENOMEM;
  } else {
    rc = pthread_cond_init(&c->cv, NULL);
  }
  if (rc != 0) {
    pthread_mutex_destroy(&c->mu);
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_cond_init", rc, NULL, 0,
                          "pthread_cond_init failed: %s", strerror(rc));
  }
  rc = pthread_mutex_init(&c->load_mu, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_mutex_init", rc, NULL, 0,
                          "pthread_mutex_init failed: %s", strerror(rc));
  }
  return T4A_OK;
}

/* A cache with its table, locks and disk level, and no lib or identity yet. */
static t4a_status cache_new(const t4a_nvrtc_cache_options *options, t4a_nvrtc_cache **out) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  if (options != NULL) o = *options;
  t4a_nvrtc_cache *c = t4a_host_calloc(1, sizeof *c);
  if (c == NULL) return T4A_HOST_OUT_OF_MEMORY;
  c->max_entries = o.max_entries != 0 ? o.max_entries : DEFAULT_MAX_ENTRIES;
  c->max_bytes = o.max_bytes != 0 ? o.max_bytes : DEFAULT_MAX_BYTES;
  c->compile_uncacheable = o.compile_uncacheable != 0;
  size_t want = c->max_entries < 8192 ? c->max_entries * 2 : 16384;
  c->num_buckets = 16;
  while (c->num_buckets < want) c->num_buckets <<= 1;
  c->buckets = t4a_host_calloc(c->num_buckets, sizeof *c->buckets);
  c->mbuckets = c->buckets != NULL ? t4a_host_calloc(c->num_buckets, sizeof *c->mbuckets) : NULL;
  if (c->mbuckets == NULL) {
    free(c->buckets);
    free(c);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  c->lru.next = c->lru.prev = &c->lru;
  t4a_status st = lock_init(c);
  if (st != T4A_OK) {
    free(c->mbuckets);
    free(c->buckets);
    free(c);
    return st;
  }
  if (o.disk_dir != NULL) {
    st = t4a_nvrtc_disk_init(&c->disk, o.disk_dir,
                             o.disk_max_bytes != 0 ? o.disk_max_bytes : DEFAULT_DISK_MAX_BYTES,
                             o.disk_fsync);
    if (st != T4A_OK) {
      pthread_mutex_destroy(&c->load_mu);
      pthread_cond_destroy(&c->cv);
      pthread_mutex_destroy(&c->mu);
      free(c->mbuckets);
      free(c->buckets);
      free(c);
      return st;
    }
    c->has_disk = 1;
  }
  atomic_init(&c->lib, NULL);
  atomic_init(&c->id, NULL);
  *out = c;
  return T4A_OK;
}

/* The identity keys are made with for a loaded lib: its files' identity with a disk level (shared
 * with lazy caches and other processes), else the lib itself. A new reference. */
static t4a_nvrtc_lib *identity_for(t4a_nvrtc_cache *c, t4a_nvrtc_lib *lib) {
  t4a_nvrtc_lib *id = c->has_disk ? t4a_nvrtc_libid_loaded(lib, c->disk.dir) : NULL;
  if (id == NULL) {
    t4a_nvrtc_lib_retain(lib);
    id = lib;
  }
  return id;
}

t4a_status t4a_nvrtc_cache_create(t4a_nvrtc_lib *lib, const t4a_nvrtc_cache_options *options,
                                  t4a_nvrtc_cache **out) {
  if (out == NULL || lib == NULL) {
    if (out != NULL) *out = NULL;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_cache_create", 0, NULL, 0,
                          "lib or out is NULL");
  }
  *out = NULL;
  t4a_nvrtc_cache *c = NULL;
  t4a_status st = cache_new(options, &c);
  if (st != T4A_OK) return st;
  t4a_nvrtc_lib_retain(lib);
  atomic_store(&c->lib, lib);
  atomic_store(&c->id, identity_for(c, lib));
  *out = c;
  return T4A_OK;
}

t4a_status t4a_nvrtc_cache_create_lazy(const t4a_nvrtc_lib_options *lib_options,
                                       const t4a_nvrtc_cache_options *options,
                                       t4a_nvrtc_cache **out) {
  if (out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_cache_create_lazy", 0, NULL, 0,
                          "out is NULL");
  }
  *out = NULL;
  t4a_nvrtc_cache *c = NULL;
  t4a_status st = cache_new(options, &c);
  if (st != T4A_OK) return st;
  const char *path = lib_options != NULL ? lib_options->library_path : NULL;
  if (path != NULL) {
    c->lib_path = t4a_host_malloc(strlen(path) + 1);
    if (c->lib_path == NULL) {
      t4a_nvrtc_cache_destroy(c);
      return T4A_HOST_OUT_OF_MEMORY;
    }
    memcpy(c->lib_path, path, strlen(path) + 1);
  }
  t4a_nvrtc_lib *id = NULL;
  st = t4a_nvrtc_libid_lazy(path, c->has_disk ? c->disk.dir : NULL, &id);
  if (st != T4A_OK) {
    t4a_nvrtc_cache_destroy(c);
    return st;
  }
  atomic_store(&c->id, id); /* NULL: learnt at the first compile, by loading */
  *out = c;
  return T4A_OK;
}

/* Loads NVRTC for a lazy cache (once; a failure is returned and retried by the next call) and
 * settles the identity. */
static t4a_status ensure_loaded(t4a_nvrtc_cache *c, t4a_nvrtc_lib **out) {
  t4a_nvrtc_lib *lib = atomic_load(&c->lib);
  if (lib != NULL) {
    *out = lib;
    return T4A_OK;
  }
  t4a_status st = T4A_OK;
  pthread_mutex_lock(&c->load_mu);
  lib = atomic_load(&c->lib);
  if (lib == NULL) {
    t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
    lo.library_path = c->lib_path;
    st = t4a_nvrtc_lib_open(&lo, &lib);
    if (st == T4A_OK) {
      t4a_nvrtc_lib *loaded = identity_for(c, lib);
      t4a_nvrtc_lib *cur = atomic_load(&c->id);
      if (cur != NULL && cur->major == loaded->major && cur->minor == loaded->minor &&
          strcmp(cur->build_identity, loaded->build_identity) == 0) {
        t4a_nvrtc_lib_release(loaded); /* what was derived is what was loaded */
      } else {
        c->old_id = cur;
        atomic_store(&c->id, loaded);
      }
      atomic_store(&c->lib, lib);
    }
  }
  pthread_mutex_unlock(&c->load_mu);
  *out = lib;
  return st;
}

int t4a_nvrtc_cache_lib_loaded(const t4a_nvrtc_cache *cache) {
  return cache != NULL && atomic_load(&((t4a_nvrtc_cache *)cache)->lib) != NULL;
}

const char *t4a_nvrtc_cache_build_identity(const t4a_nvrtc_cache *cache) {
  const t4a_nvrtc_lib *id = cache != NULL ? atomic_load(&((t4a_nvrtc_cache *)cache)->id) : NULL;
  return id != NULL ? id->build_identity : "";
}

void t4a_nvrtc_cache_destroy(t4a_nvrtc_cache *cache) {
  if (cache == NULL) return;
  for (size_t i = 0; i < cache->num_buckets; i++) {
    entry *e = cache->buckets[i];
    while (e != NULL) {
      entry *next = e->hnext;
      entry_free(e); /* no call is in progress, so only the table holds it */
      e = next;
    }
  }
  free(cache->buckets);
  while (cache->moldest != NULL) mremove(cache, mslot(cache, cache->moldest->key));
  free(cache->mbuckets);
  pthread_mutex_destroy(&cache->load_mu);
  pthread_cond_destroy(&cache->cv);
  pthread_mutex_destroy(&cache->mu);
  if (cache->has_disk) t4a_nvrtc_disk_deinit(&cache->disk);
  t4a_nvrtc_lib_release(atomic_load(&cache->id));
  t4a_nvrtc_lib_release(cache->old_id);
  t4a_nvrtc_lib_release(atomic_load(&cache->lib));
  free(cache->lib_path);
  free(cache);
}

void t4a_nvrtc_cache_stats(const t4a_nvrtc_cache *cache, struct t4a_nvrtc_cache_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  t4a_counters_stats(cache != NULL ? &cache->counters : NULL, &out->counters);
  if (cache == NULL) return;
  t4a_nvrtc_cache *c = (t4a_nvrtc_cache *)cache; /* the lock only */
  pthread_mutex_lock(&c->mu);
  out->memory_entries = c->num_ready;
  out->memory_bytes = c->bytes;
  pthread_mutex_unlock(&c->mu);
  out->roots_misses = atomic_load(&c->roots_misses);
  out->roots_check_wait_ns = atomic_load(&c->check_wait_ns);
}

/* Copies a failed entry's result to a waiter: the status, its detail and the log. */
static t4a_status take_failure(const entry *e, t4a_nvrtc_log *log) {
  if (e->log != NULL) {
    char *copy = t4a_host_malloc(e->log_bytes + 1);
    if (copy != NULL) {
      memcpy(copy, e->log, e->log_bytes + 1);
      log->text = copy;
      log->bytes = e->log_bytes;
    }
  }
  t4a_nvrtc_error_restore(&e->err);
  return e->st;
}

/* Answers from an entry found with a reference (which this drops): its artifact, at once or when
 * its owner publishes it, or the owner's failure. *retry: the owner gave the request up to start
 * over with another identity (nothing is answered; the caller starts over too). */
static t4a_status answer(t4a_nvrtc_cache *c, entry *e, int in_flight, t4a_nvrtc_artifact **out,
                         t4a_nvrtc_outcome *out_outcome, int *retry) {
  t4a_nvrtc_log log = {NULL, 0};
  t4a_status st;
  *retry = 0;
  pthread_mutex_lock(&c->mu);
  in_flight |= e->state == E_INFLIGHT;
  if (in_flight) {
    t4a_counter_add(&c->counters, T4A_COUNTER_nvrtc_mem_joins, 1);
    while (e->state == E_INFLIGHT) pthread_cond_wait(&c->cv, &c->mu);
  } else if (e->prev != NULL) { /* still in the LRU: now the most recent */
    lru_unlink(e);
    lru_push_front(c, e);
    hint_set(c, e);
  }
  if (e->state == E_RETRY) {
    entry_unref(e);
    pthread_mutex_unlock(&c->mu);
    *retry = 1;
    return T4A_OK;
  }
  if (e->state == E_READY) {
    t4a_nvrtc_artifact_retain(e->art);
    *out = e->art;
    st = T4A_OK;
  } else {
    st = take_failure(e, &log);
  }
  entry_unref(e);
  pthread_mutex_unlock(&c->mu);
  if (st == T4A_OK && !in_flight) t4a_counter_add(&c->counters, T4A_COUNTER_nvrtc_mem_hits, 1);
  t4a_nvrtc_origin origin = st != T4A_OK ? T4A_NVRTC_ORIGIN_NONE
                            : in_flight  ? T4A_NVRTC_ORIGIN_JOINED
                                         : T4A_NVRTC_ORIGIN_MEMORY;
  t4a_nvrtc_outcome_set(out_outcome, origin, &log);
  return st;
}

/* ---- A first miss's compile alongside its include check ------------------------------------ */

/* A request with include roots and no manifest at any level (its first miss), in a cache that
 * compiles what the check refuses (compile_uncacheable: NVRTC runs whatever the check says),
 * compiles on a helper thread while this thread runs the include check, which only then names
 * the key. A refused request takes it as its uncached compile. Its
 * artifact is taken when the check finds that nothing it looked at (each file, each directory on
 * the way to each path, each link) changed at or after settle_ns before the compile started: what
 * NVRTC read before the check looked was the same, and what changed after the check looked is
 * seen as for any miss (t4a_nvrtc_manifest_holds_). Otherwise it is discarded and NVRTC runs
 * again after the check, as for every other miss (design §11, "A first miss"). */
typedef struct spec_compile {
  pthread_t thread;
  int claimed, started, joined, taken, settled;
  int slot;
  t4a_nvrtc_lib *lib, *id;
  t4a_nvrtc_prepared p; /* a copy: the check fills the caller's */
  t4a_counters *counters;
  t4a_status st;
  t4a_error err;
  t4a_nvrtc_artifact *art;
  t4a_nvrtc_log log;
  uint64_t start_ns, end_ns, check_start_ns, check_end_ns;
} spec_compile;

/* 0: every miss checks, then compiles; 1: a first miss overlaps (the default); 2: as 1, the
 * helper's compile ending before the check starts (tests). */
static atomic_int g_spec_mode = 1;
static _Atomic int64_t g_settle_ns = 2000000000; /* file systems' coarsest change times */

void t4a_nvrtc_roots_overlap_(int mode, int64_t settle_ns) {
  atomic_store(&g_spec_mode, mode);
  atomic_store(&g_settle_ns, settle_ns);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Claims k1 for a first miss: 1 claimed (slot set), 0 no slot free (no overlap), -1 another
 * request held it and has finished (start over: its manifest may be there now). */
static int spec_claim(t4a_nvrtc_cache *c, const uint8_t k1[16], spec_compile *sc) {
  int waited = 0;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    int held = 0, free_slot = -1;
    for (int i = 0; i < SPEC_SLOTS; i++) {
      if (c->spec_used[i] && memcmp(c->spec_keys[i], k1, 16) == 0) held = 1;
      if (!c->spec_used[i] && free_slot < 0) free_slot = i;
    }
    if (held) {
      waited = 1;
      pthread_cond_wait(&c->cv, &c->mu);
      continue;
    }
    if (waited || free_slot < 0) {
      pthread_mutex_unlock(&c->mu);
      return waited ? -1 : 0;
    }
    c->spec_used[free_slot] = 1;
    memcpy(c->spec_keys[free_slot], k1, 16);
    sc->slot = free_slot;
    sc->claimed = 1;
    pthread_mutex_unlock(&c->mu);
    return 1;
  }
}

static void *spec_main(void *arg) {
  spec_compile *sc = arg;
  static const uint8_t unkeyed[16]; /* keyed by the taker */
  sc->st = t4a_nvrtc_compile_prepared(sc->lib, sc->id, &sc->p, unkeyed, sc->counters, &sc->art,
                                      &sc->log);
  if (sc->st != T4A_OK) t4a_error_last(&sc->err);
  sc->end_ns = mono_ns();
  return NULL;
}

/* Starts the compile of a claimed first miss (NVRTC loaded here if it is not); on any failure
 * none is started, the detail left as it was, and the miss runs as every other. */
static void spec_start(t4a_nvrtc_cache *c, t4a_nvrtc_lib *id, const t4a_nvrtc_prepared *p,
                       spec_compile *sc) {
  t4a_error before;
  t4a_error_last(&before);
  t4a_nvrtc_lib *lib = NULL;
  t4a_status st = ensure_loaded(c, &lib);
  if (st == T4A_OK && atomic_load(&c->id) != id) st = T4A_BUSY; /* a retry will follow */
  t4a_nvrtc_prepared q;
  if (st == T4A_OK && lib != id) st = t4a_nvrtc_prepare(lib, p->req, &q);
  if (st == T4A_OK && t4a_fault_sim(T4A_FAULT_THREAD_CREATE)) st = T4A_HOST_OUT_OF_MEMORY;
  if (st == T4A_OK) {
    sc->lib = lib;
    sc->id = id;
    sc->p = *p;
    for (size_t i = 0; i < p->num_implicit; i++) { /* its own copy of what points into p */
      if (p->implicit[i] == p->arch_option) sc->p.implicit[i] = sc->p.arch_option;
    }
    sc->p.prober = NULL;
    sc->p.probes = NULL;
    sc->counters = &c->counters;
    sc->start_ns = real_ns();
    sc->started = pthread_create(&sc->thread, NULL, spec_main, sc) == 0;
  }
  t4a_nvrtc_error_restore(&before);
}

static void spec_join(spec_compile *sc) {
  if (sc->started && !sc->joined) {
    pthread_join(sc->thread, NULL);
    sc->joined = 1;
  }
}

/* Drops the helper's result, if it has one nobody took. */
static void spec_discard(t4a_nvrtc_cache *c, spec_compile *sc) {
  if (!sc->started) return;
  spec_join(sc);
  t4a_nvrtc_artifact_release(sc->art);
  free(sc->log.text);
  sc->art = NULL;
  sc->log.text = NULL;
  sc->started = 0;
  t4a_counter_add(&c->counters, T4A_COUNTER_nvrtc_roots_overlap_dropped, 1);
}

/* Takes the helper's result (ownership moves to the caller), keyed `key`; 0 if there is none. */
static int spec_take(t4a_nvrtc_cache *c, spec_compile *sc, const uint8_t key[16], t4a_status *st,
                     t4a_nvrtc_artifact **art, t4a_nvrtc_log *log) {
  if (!sc->started) return 0;
  spec_join(sc);
  *st = sc->st;
  *art = sc->art;
  *log = sc->log;
  sc->art = NULL;
  sc->log.text = NULL;
  sc->log.bytes = 0;
  sc->started = 0;
  sc->taken = 1;
  t4a_counter_add(&c->counters, T4A_COUNTER_nvrtc_roots_overlapped, 1);
  if (*st == T4A_OK) {
    memcpy((*art)->key, key, 16);
    t4a_nvrtc_key_hex((*art)->key, (*art)->key_hex);
  } else {
    t4a_nvrtc_error_restore(&sc->err);
  }
  return 1;
}

/* Ends a first miss's overlap: a result nobody took is discarded; the claim is released; the
 * time the miss waited on its check after NVRTC was done is counted. */
static void spec_finish(t4a_nvrtc_cache *c, spec_compile *sc) {
  spec_discard(c, sc);
  if (sc->check_end_ns != 0) {
    uint64_t from = sc->taken && sc->end_ns > sc->check_start_ns ? sc->end_ns : sc->check_start_ns;
    atomic_fetch_add(&c->roots_misses, 1);
    atomic_fetch_add(&c->check_wait_ns, sc->check_end_ns > from ? sc->check_end_ns - from : 0);
  }
  if (sc->claimed) {
    pthread_mutex_lock(&c->mu);
    c->spec_used[sc->slot] = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    sc->claimed = 0;
  }
}

/* Whether every root is an absolute path to a directory (a bad root is refused by the check at
 * once: nothing compiles alongside it). Leaves the detail as it was. */
static int roots_usable(const t4a_nvrtc_request *r) {
  t4a_error before;
  t4a_error_last(&before);
  int ok = 1;
  for (size_t i = 0; ok && i < r->num_include_roots; i++) {
    ok =
        r->include_roots[i][0] == '/' && t4a_nvrtc_probe_root_(NULL, r->include_roots[i]) == T4A_OK;
  }
  t4a_nvrtc_error_restore(&before);
  return ok;
}

/* How a request with include roots goes through compile_prepared_cached (NULL: no roots).
 * lookup_only: answer from memory or disk, or set nothing (found 0). includes_checked: the
 * include check ran (recording the manifest). disk_looked/looked_key: the disk was asked for
 * this key already (not asked twice). found: answered; kept: the artifact is cached. */
typedef struct roots_pass {
  int lookup_only, includes_checked, disk_looked, found, kept;
  uint8_t looked_key[16];
  spec_compile *spec; /* the compile running alongside the check, or NULL */
} roots_pass;

/* One cached compile of a prepared request under identity `id`; *retry set (and nothing else
 * done) when the request must start over (the loaded NVRTC is not the build the key named). */
static t4a_status compile_prepared_cached(t4a_nvrtc_cache *cache, t4a_nvrtc_lib *id,
                                          t4a_nvrtc_prepared *pp, t4a_nvrtc_artifact **out,
                                          t4a_nvrtc_outcome *out_outcome, int *retry_out,
                                          roots_pass *rp);

static t4a_status compile_with_roots(t4a_nvrtc_cache *cache, t4a_nvrtc_lib *id,
                                     t4a_nvrtc_prepared *p, t4a_nvrtc_artifact **out,
                                     t4a_nvrtc_outcome *out_outcome, int *retry, spec_compile *sc);

static t4a_status compile_uncached(t4a_nvrtc_cache *cache, const t4a_nvrtc_request *request,
                                   const t4a_error *before, t4a_nvrtc_artifact **out,
                                   t4a_nvrtc_outcome *out_outcome, spec_compile *sc);

t4a_status t4a_nvrtc_cache_compile(t4a_nvrtc_cache *cache, const t4a_nvrtc_request *request,
                                   t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  t4a_nvrtc_outcome_deinit(out_outcome);
  if (out == NULL || cache == NULL) {
    if (out != NULL) *out = NULL;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_cache_compile", 0, NULL, 0,
                          "cache or out is NULL");
  }
  *out = NULL;
  /* The caller's failure detail, put back when an uncached compile succeeds after a refusal. */
  t4a_error before;
  if (cache->compile_uncacheable) t4a_error_last(&before);
  for (;;) {
    t4a_status st;
    t4a_nvrtc_lib *lib = NULL;
    /* The identity keys are made with; a lazy cache that could not derive it loads NVRTC now. */
    t4a_nvrtc_lib *id = atomic_load(&cache->id);
    if (id == NULL) {
      st = ensure_loaded(cache, &lib);
      if (st != T4A_OK) return st;
      id = atomic_load(&cache->id);
    }
    t4a_nvrtc_prepared p;
    st = t4a_nvrtc_prepare(id, request, &p);
    if (st != T4A_OK) return st;
    int retry = 0;
    spec_compile sc;
    memset(&sc, 0, sizeof sc);
    if (request->num_include_roots > 0) {
      st = compile_with_roots(cache, id, &p, out, out_outcome, &retry, &sc);
    } else {
      st = compile_prepared_cached(cache, id, &p, out, out_outcome, &retry, NULL);
    }
    if (retry) {
      spec_finish(cache, &sc);
      continue;
    }
    /* What the key cannot see (the include check refused it, here or in the compile this call
     * joined): compiled uncached when the options say so. */
    if (st != T4A_OK && cache->compile_uncacheable && t4a_nvrtc_refused_unseen_(st)) {
      st = compile_uncached(cache, request, &before, out, out_outcome, &sc);
    }
    spec_finish(cache, &sc);
    return st;
  }
}

/* A request the include check refused, in a cache with compile_uncacheable: NVRTC compiles it as
 * t4a_nvrtc_compile does, it is cached at neither level, and its artifact is keyed by its bytes
 * too (t4a_nvrtc_artifact_key). */
static t4a_status compile_uncached(t4a_nvrtc_cache *cache, const t4a_nvrtc_request *request,
                                   const t4a_error *before, t4a_nvrtc_artifact **out,
                                   t4a_nvrtc_outcome *out_outcome, spec_compile *sc) {
  t4a_error why;
  t4a_error_last(&why);
  t4a_nvrtc_outcome_deinit(out_outcome);
  t4a_nvrtc_lib *lib = NULL;
  t4a_status st = ensure_loaded(cache, &lib);
  if (st != T4A_OK) return st;
  t4a_nvrtc_log log = {NULL, 0};
  /* A first miss's compile ran alongside the check: its artifact, keyed as an uncached one. */
  t4a_nvrtc_prepared q;
  uint8_t key[16];
  if (sc->started && sc->lib == lib && t4a_nvrtc_prepare(lib, request, &q) == T4A_OK) {
    t4a_nvrtc_identity_key(lib, &q, key);
    (void)spec_take(cache, sc, key, &st, out, &log);
    if (st == T4A_OK) t4a_nvrtc_artifact_key_content_(*out);
  } else {
    st = t4a_nvrtc_compile_unkeyed_(lib, request, &cache->counters, out, &log);
  }
  char *copy = NULL;
  if (st == T4A_OK) {
    t4a_counter_add(&cache->counters, T4A_COUNTER_nvrtc_uncached, 1);
    size_t n = strlen(why.message);
    copy = out_outcome != NULL ? t4a_host_malloc(n + 1) : NULL;
    if (copy != NULL) memcpy(copy, why.message, n + 1);
    t4a_nvrtc_error_restore(before); /* a success leaves the detail as it was */
  }
  t4a_nvrtc_outcome_set(out_outcome,
                        st == T4A_OK ? T4A_NVRTC_ORIGIN_UNCACHED : T4A_NVRTC_ORIGIN_NONE, &log);
  if (out_outcome != NULL) out_outcome->uncached_why = copy;
  return st;
}

/* A request with include roots. Its first-level key (the request and the roots' spellings)
 * names its include manifest (memory, then disk): when every path the manifest lists still holds
 * what it recorded (checked by stat; see nvrtc_manifest.c), the manifest's digest completes the
 * artifact's key and a hit needs nothing else. Otherwise (no manifest, or a listed file changed,
 * or a path that opened nothing now opens something) the include check follows the includes by
 * probing the paths NVRTC would open, recording a new manifest, whose digest keys the artifact;
 * a cached result keeps that manifest at both levels. */
static t4a_status compile_with_roots(t4a_nvrtc_cache *cache, t4a_nvrtc_lib *id,
                                     t4a_nvrtc_prepared *p, t4a_nvrtc_artifact **out,
                                     t4a_nvrtc_outcome *out_outcome, int *retry, spec_compile *sc) {
  const t4a_nvrtc_request *request = p->req;
  const char *dir = cache->has_disk ? cache->disk.dir : NULL;
  t4a_status st;
  uint8_t k1[16];
  p->roots_key = 1;
  t4a_nvrtc_identity_key(id, p, k1);
  memcpy(p->first_key, k1, 16);
  roots_pass rp;
  memset(&rp, 0, sizeof rp);
  size_t nr = request->num_include_roots;
  size_t mb = 0;
  uint64_t epoch = 0;
  uint8_t *blob = NULL;
  int known = manifest_get(cache, k1, request->include_roots, nr, p->manifest_digest, &blob, &mb,
                           &epoch);
  if (!known && blob == NULL && dir != NULL) {
    epoch = t4a_nvrtc_roots_epoch_(request->include_roots, nr);
    blob = t4a_nvrtc_manifest_load_(dir, k1, &mb);
  }
  int refreshed = 0;
  int first_miss = !known && blob == NULL; /* no manifest at either level */
  /* In a process that watches (it has probed before), the manifest's paths are watched before
   * they are validated, so that it is known valid afterwards while no event arrives. */
  if (!known && blob != NULL) epoch = t4a_nvrtc_roots_watch_manifest_(blob, mb, epoch);
  if (known || (blob != NULL && t4a_nvrtc_manifest_validate_(blob, mb, p->manifest_digest,
                                                            &refreshed))) {
    p->roots_key = 2;
    rp.lookup_only = 1;
    st = compile_prepared_cached(cache, id, p, out, out_outcome, retry, &rp);
    rp.lookup_only = 0;
    if (!*retry && rp.found && st == T4A_OK && rp.kept && blob != NULL) {
      /* Validated by stat: kept with the epoch read before (valid while no event). */
      if (refreshed && dir != NULL) manifest_store(cache, k1, blob, mb);
      manifest_put(cache, k1, blob, mb, epoch);
      blob = NULL;
    }
    if (*retry || rp.found) {
      free(blob);
      return st;
    }
  }
  free(blob);
  /* A miss: the include check probes the paths the includes can open through the roots,
   * recording the manifest (no tree is walked). A first miss compiles alongside it. */
  int mode = atomic_load(&g_spec_mode);
  if (first_miss && mode != 0 && cache->compile_uncacheable && roots_usable(request)) {
    int claim = spec_claim(cache, k1, sc);
    if (claim < 0) {
      *retry = 1; /* the other request's manifest may be there now */
      return T4A_OK;
    }
    if (claim > 0) spec_start(cache, id, p, sc);
    if (mode == 2) spec_join(sc);
  }
  t4a_nvrtc_prober pr;
  t4a_nvrtc_prober_init_(&pr);
  pr.settle = sc->started;
  sc->check_start_ns = mono_ns();
  p->prober = &pr;
  t4a_nvrtc_probes probes;
  memset(&probes, 0, sizeof probes);
  uint8_t *nb = NULL;
  size_t nbytes = 0;
  st = t4a_nvrtc_check_options(p);
  if (st == T4A_OK) {
    p->probes = &probes;
    st = t4a_nvrtc_check_includes(p);
    p->probes = NULL;
  }
  /* Known valid at the epoch the check started at, if every path was watched before it was
   * looked at and nothing changed since. */
  epoch = t4a_nvrtc_prober_finish_(&pr);
  sc->check_end_ns = mono_ns();
  sc->settled = sc->started &&
                t4a_nvrtc_prober_settled_(&pr, sc->start_ns - (uint64_t)atomic_load(&g_settle_ns));
  p->prober = NULL;
  t4a_nvrtc_prober_free_(&pr);
  if (st == T4A_OK) st = t4a_nvrtc_manifest_encode_(&probes, &nb, &nbytes);
  t4a_nvrtc_probes_free_(&probes);
  if (st == T4A_OK) {
    memcpy(p->manifest_digest, nb + 16, 16);
    p->roots_key = 2;
    p->check_blob = nb;
    p->check_bytes = nbytes;
    p->check_epoch = epoch;
    rp.includes_checked = 1;
    rp.spec = sc;
    st = compile_prepared_cached(cache, id, p, out, out_outcome, retry, &rp);
    p->check_blob = NULL;
    if (!*retry && st == T4A_OK && rp.kept) {
      if (dir != NULL) manifest_store(cache, k1, nb, nbytes);
      manifest_put(cache, k1, nb, nbytes, epoch);
      nb = NULL;
    }
  }
  free(nb);
  return st;
}

/* Whether a request keyed with `id` may still start over: a lazy cache that has not loaded NVRTC
 * (the loaded build may contradict id), or id already replaced. Otherwise it never will (the
 * identity changes at most once, when NVRTC is loaded). */
static int might_retry(t4a_nvrtc_cache *cache, const t4a_nvrtc_lib *id) {
  return atomic_load(&cache->lib) == NULL || atomic_load(&cache->id) != id;
}

/* Adds a deferred disk lookup's counts to the cache's; without the miss if no_miss. */
static void add_disk_counts(t4a_nvrtc_cache *cache, t4a_counters *counts, int no_miss) {
  static const t4a_counter_id ids[] = {T4A_COUNTER_nvrtc_disk_hits, T4A_COUNTER_nvrtc_disk_corrupt,
                                       T4A_COUNTER_nvrtc_disk_errors, T4A_COUNTER_nvrtc_disk_misses};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0] - (no_miss ? 1 : 0); i++) {
    uint64_t n = atomic_load_explicit(&counts->v[ids[i]], memory_order_relaxed);
    if (n != 0) t4a_counter_add(&cache->counters, ids[i], n);
  }
}

/* Publishes an artifact found on disk by a lookup-only pass (its entry built here). */
static void publish_disk_hit(t4a_nvrtc_cache *cache, t4a_nvrtc_lib *id, const uint8_t key[16],
                             const t4a_nvrtc_prepared *p, t4a_nvrtc_artifact *art) {
  size_t id_bytes = t4a_nvrtc_identity_size(id, p);
  entry *e = t4a_host_calloc(1, sizeof *e);
  uint8_t *identity = e != NULL ? t4a_host_malloc(id_bytes) : NULL;
  if (identity == NULL) {
    free(e);
    return; /* handed out, not kept in memory */
  }
  t4a_nvrtc_identity_write(id, p, identity);
  memcpy(e->key, key, 16);
  e->identity = identity;
  e->identity_bytes = id_bytes;
  e->state = E_INFLIGHT;
  e->refs = 2;
  int in_flight = 0;
  entry *other = find_or_insert(cache, id, key, p, e, &in_flight);
  pthread_mutex_lock(&cache->mu);
  if (other != NULL) {
    entry_unref(other);
    pthread_mutex_unlock(&cache->mu);
    entry_free(e);
    return;
  }
  publish_ready(cache, e, art);
  pthread_cond_broadcast(&cache->cv);
  entry_unref(e);
  pthread_mutex_unlock(&cache->mu);
}

static t4a_status compile_prepared_cached(t4a_nvrtc_cache *cache, t4a_nvrtc_lib *id,
                                          t4a_nvrtc_prepared *pp, t4a_nvrtc_artifact **out,
                                          t4a_nvrtc_outcome *out_outcome, int *retry_out,
                                          roots_pass *rp) {
  t4a_nvrtc_prepared p = *pp;
  t4a_nvrtc_lib *lib = NULL;
  t4a_status st;
  int in_flight = 0, retry = 0;
  /* Without roots, a request just answered is found by its signature and compared, unhashed. */
  uint64_t sig = rp == NULL ? t4a_nvrtc_request_sig_(&p) : 0;
  entry *e = sig != 0 ? hint_find(cache, id, &p, sig) : NULL;
  if (e != NULL) {
    atomic_fetch_add(&cache->hint_hits, 1);
    st = answer(cache, e, 0, out, out_outcome, &retry);
    *retry_out = retry;
    return st;
  }
  uint8_t key[16];
  t4a_nvrtc_identity_key(id, &p, key);
  e = find_or_insert(cache, id, key, &p, NULL, &in_flight);
  if (e != NULL) {
    st = answer(cache, e, in_flight, out, out_outcome, &retry);
    *retry_out = retry;
    if (rp != NULL) {
      rp->found = 1;
      rp->kept = st == T4A_OK;
    }
    return st;
  }
  if (rp != NULL && rp->lookup_only) {
    if (!cache->has_disk) return T4A_OK;
    rp->disk_looked = 1;
    memcpy(rp->looked_key, key, 16);
    /* A lazy cache's miss here is not counted: the request may start over; if not, the next
     * pass looks again and counts it (once). */
    int may_retry = might_retry(cache, id);
    t4a_counters counts;
    memset(&counts, 0, sizeof counts);
    t4a_nvrtc_artifact *art =
        t4a_nvrtc_disk_lookup(&cache->disk, id, &p, key, may_retry ? &counts : &cache->counters);
    if (may_retry) add_disk_counts(cache, &counts, art == NULL);
    if (art == NULL) {
      rp->disk_looked = !may_retry;
      return T4A_OK;
    }
    t4a_counter_add(&cache->counters, T4A_COUNTER_nvrtc_mem_misses, 1);
    publish_disk_hit(cache, id, key, &p, art);
    *out = art;
    t4a_nvrtc_log none = {NULL, 0};
    t4a_nvrtc_outcome_set(out_outcome, T4A_NVRTC_ORIGIN_DISK, &none);
    rp->found = rp->kept = 1;
    return T4A_OK;
  }

  /* Not in memory. What a cached compile may read is checked on a miss only: an entry of either
   * level is a request that passed the checks (their verdict depends on the identity alone). The
   * options are checked now, the includes before compiling (see t4a_nvrtc_check_includes). */
  st = t4a_nvrtc_check_options(&p);
  if (st != T4A_OK) return st;
  /* The in-flight entry, identity record included, is built before the mutex is taken. */
  size_t id_bytes = t4a_nvrtc_identity_size(id, &p);
  e = t4a_host_calloc(1, sizeof *e);
  uint8_t *identity = e != NULL ? t4a_host_malloc(id_bytes) : NULL;
  if (identity == NULL) {
    free(e);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  t4a_nvrtc_identity_write(id, &p, identity);
  memcpy(e->key, key, 16);
  e->identity = identity;
  e->identity_bytes = id_bytes;
  e->sig = sig;
  e->state = E_INFLIGHT;
  e->refs = 2; /* the table and this owner */
  entry *other = find_or_insert(cache, id, key, &p, e, &in_flight);
  if (other != NULL) { /* another thread got there first */
    entry_free(e);
    st = answer(cache, other, in_flight, out, out_outcome, &retry);
    *retry_out = retry;
    return st;
  }
  /* A miss: this thread owns the request until it is published. A lazy cache that has not loaded
   * NVRTC may yet find the key's identity contradicted (a retry): its lookups are counted once the
   * request is known not to start over, so that a retried request counts one miss per level. */
  int may_retry = might_retry(cache, id);
  if (!may_retry) t4a_counter_add(&cache->counters, T4A_COUNTER_nvrtc_mem_misses, 1);
  t4a_counters disk_counts; /* a lazy cache's disk lookup, counted below */
  memset(&disk_counts, 0, sizeof disk_counts);
  t4a_nvrtc_log log = {NULL, 0};

  t4a_nvrtc_artifact *art = NULL;
  t4a_nvrtc_origin origin = T4A_NVRTC_ORIGIN_COMPILED;
  if (cache->has_disk && !(rp != NULL && rp->disk_looked && memcmp(rp->looked_key, key, 16) == 0)) {
    art = t4a_nvrtc_disk_lookup(&cache->disk, id, &p, key,
                                may_retry ? &disk_counts : &cache->counters);
    if (art != NULL) origin = T4A_NVRTC_ORIGIN_DISK;
  }
  if (art == NULL) {
    /* NVRTC must run: a lazy cache loads it now. */
    st = ensure_loaded(cache, &lib);
    if (st == T4A_OK && atomic_load(&cache->id) != id) {
      retry = 1; /* what was loaded is not the build the key names */
    } else if (st == T4A_OK && lib != id) {
      /* The key's identity cannot check what only the loaded lib knows (its architectures and
       * outputs, for a lazily derived identity): validate against the lib too. */
      t4a_nvrtc_prepared q;
      st = t4a_nvrtc_prepare(lib, p.req, &q);
    }
    if (st == T4A_OK && !retry && !(rp != NULL && rp->includes_checked)) {
      st = t4a_nvrtc_check_includes(&p);
    }
    spec_compile *sc = rp != NULL ? rp->spec : NULL;
    if (st == T4A_OK && !retry && sc != NULL && sc->settled && sc->started) {
      (void)spec_take(cache, sc, key, &st, &art, &log);
    } else if (st == T4A_OK && !retry) {
      if (sc != NULL) spec_discard(cache, sc); /* unsettled: NVRTC may have read what the key is not */
      st = t4a_nvrtc_compile_prepared(lib, id, &p, key, &cache->counters, &art, &log);
    }
  }
  if (may_retry) {
    /* Started over: the lookups under the old identity are not counted as misses (the retry's
     * are); what the disk lookup found wrong is. */
    add_disk_counts(cache, &disk_counts, retry);
    if (!retry) t4a_counter_add(&cache->counters, T4A_COUNTER_nvrtc_mem_misses, 1);
  }
  if (retry) {
    pthread_mutex_lock(&cache->mu);
    e->state = E_RETRY;
    table_remove(cache, e);
    pthread_cond_broadcast(&cache->cv);
    entry_unref(e);
    pthread_mutex_unlock(&cache->mu);
    *retry_out = 1;
    return T4A_OK;
  }
  t4a_error failure;
  if (st != T4A_OK) t4a_error_last(&failure);
  /* A root that changed while NVRTC read it: the artifact may hold bytes the key does not name,
   * so it is handed out (as compiled) but cached at neither level. */
  int keep = 1;
  if (st == T4A_OK && origin == T4A_NVRTC_ORIGIN_COMPILED && p.check_blob != NULL &&
      !t4a_nvrtc_manifest_holds_(p.check_blob, p.check_bytes, p.check_epoch)) {
    keep = 0;
    t4a_counter_add(&cache->counters, T4A_COUNTER_nvrtc_roots_changed, 1);
    /* Its key names the content the check saw, not what NVRTC read: keyed by its bytes too
     * (no other thread holds it yet). */
    t4a_nvrtc_artifact_key_content_(art);
  }

  pthread_mutex_lock(&cache->mu);
  if (st == T4A_OK && keep) {
    publish_ready(cache, e, art);
  } else if (st == T4A_OK) {
    e->state = E_READY; /* waiters take this artifact; nothing stays in the table */
    t4a_nvrtc_artifact_retain(art);
    e->art = art;
    table_remove(cache, e);
  } else {
    e->state = E_FAILED;
    e->st = st;
    e->err = failure;
    if (e->refs > 2 && log.text != NULL) { /* waiters will want the log */
      e->log = t4a_host_malloc(log.bytes + 1);
      if (e->log != NULL) {
        memcpy(e->log, log.text, log.bytes + 1);
        e->log_bytes = log.bytes;
      }
      t4a_nvrtc_error_restore(&failure);
    }
    table_remove(cache, e); /* never cached: the next request compiles again */
  }
  pthread_cond_broadcast(&cache->cv);
  pthread_mutex_unlock(&cache->mu);

  if (st == T4A_OK && keep && origin == T4A_NVRTC_ORIGIN_COMPILED && cache->has_disk) {
    /* The owner's reference keeps e (and its identity) alive here. */
    t4a_nvrtc_disk_store(&cache->disk, art, e->identity, e->identity_bytes, &cache->counters);
  }
  pthread_mutex_lock(&cache->mu);
  entry_unref(e);
  pthread_mutex_unlock(&cache->mu);

  *out = art;
  t4a_nvrtc_outcome_set(out_outcome, st == T4A_OK ? origin : T4A_NVRTC_ORIGIN_NONE, &log);
  if (rp != NULL) {
    rp->found = 1;
    rp->kept = st == T4A_OK && keep;
  }
  return st;
}

uint64_t t4a_nvrtc_cache_disk_scans(const t4a_nvrtc_cache *cache) {
  return cache != NULL && cache->has_disk ? atomic_load(&cache->disk.scans) : 0;
}

const char *t4a_nvrtc_cache_disk_dir(const t4a_nvrtc_cache *cache) {
  return cache != NULL && cache->has_disk ? cache->disk.dir : NULL;
}
