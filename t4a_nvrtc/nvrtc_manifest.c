/* Include manifests: what a cached compile's includes can reach through its include roots.
 *
 * The include check of a miss follows every include of the request into the roots and records
 * every path it probed, as NVRTC would open it (root, the includer's directory for a quoted
 * include in a root file, the name): a file with its metadata and the XXH3-128 of its bytes, or
 * "no file" (absent, or a directory). The sorted, deduplicated list is the manifest; its digest
 * (paths, kinds and content hashes, not the metadata) is in the artifact's identity record. A
 * lookup validates a manifest by stat alone: a listed file whose device, inode, size and times are
 * the recorded ones (and whose change time is not racy) is unchanged; a file whose metadata differ
 * is hashed again (a touch stays valid, an edit does not); a "no file" path must still open
 * nothing. Anything else (a FIFO, a link loop, an I/O error, a corrupt manifest) is invalid: a
 * miss, which probes and checks again. See docs/design.md §11 (include roots). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define RACY_NS 1000000000ull /* as nvrtc_roots.c: a change time this close to the hash */
#define MANIFEST_MAGIC "T4AMNF01"
#define FILE_MAGIC "T4AMANI1"
#define FILE_HEADER 48u
#define MAX_MANIFEST_BYTES ((size_t)64 << 20)

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t ts_ns(const struct timespec *t) {
  return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

t4a_status t4a_nvrtc_probes_add_(t4a_nvrtc_probes *m, const char *path_in, size_t n,
                                 const t4a_nvrtc_probed *file, int absent_tree) {
  if (m->num == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 32;
    t4a_nvrtc_probe *v = t4a_host_realloc(m->v, cap * sizeof *v);
    if (v == NULL) return T4A_HOST_OUT_OF_MEMORY;
    m->v = v;
    m->cap = cap;
  }
  char *path = t4a_host_malloc(n + 1);
  if (path == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(path, path_in, n);
  path[n] = '\0';
  t4a_nvrtc_probe *p = &m->v[m->num++];
  memset(p, 0, sizeof *p);
  p->path = path;
  p->file = absent_tree ? 2 : 0;
  if (file != NULL) {
    p->file = 1;
    p->dev = file->dev;
    p->ino = file->ino;
    p->size = file->size;
    p->mtime_ns = file->mtime_ns;
    p->ctime_ns = file->ctime_ns;
    p->taken_ns = file->taken_ns;
    memcpy(p->hash, file->hash, 16);
  }
  return T4A_OK;
}

void t4a_nvrtc_probes_free_(t4a_nvrtc_probes *m) {
  for (size_t i = 0; i < m->num; i++) free(m->v[i].path);
  free(m->v);
  memset(m, 0, sizeof *m);
}

/* By path; for one path, the strictest kind first (2 "nothing at all" before 0 "nothing or a
 * directory"; a file and nothing cannot both have been seen). */
static int probe_cmp(const void *a, const void *b) {
  const t4a_nvrtc_probe *x = a, *y = b;
  int c = strcmp(x->path, y->path);
  return c != 0 ? c : (y->file > x->file) - (y->file < x->file);
}

/* Blob: magic (8), count (8), digest (16), then per probe: path length (8), path, file (8), dev,
 * ino, size, mtime, ctime, taken (8 each), hash (16). */
#define PROBE_FIXED (8u + 8u + 6u * 8u + 16u)

static t4a_status digest_of(const uint8_t *blob, size_t bytes, uint8_t out[16]);

t4a_status t4a_nvrtc_manifest_encode_(t4a_nvrtc_probes *m, uint8_t **out, size_t *out_bytes) {
  *out = NULL;
  *out_bytes = 0;
  if (m->num > 1) qsort(m->v, m->num, sizeof *m->v, probe_cmp);
  /* One path probed twice (two includes of one name) has one result: keep the first. */
  size_t k = 0;
  for (size_t i = 0; i < m->num; i++) {
    if (k > 0 && strcmp(m->v[k - 1].path, m->v[i].path) == 0) {
      free(m->v[i].path);
      continue;
    }
    m->v[k++] = m->v[i];
  }
  m->num = k;
  size_t bytes = 32;
  for (size_t i = 0; i < m->num; i++) bytes += PROBE_FIXED + strlen(m->v[i].path);
  uint8_t *b = t4a_host_malloc(bytes);
  if (b == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(b, MANIFEST_MAGIC, 8);
  put64(b + 8, m->num);
  uint8_t *d = b + 32;
  for (size_t i = 0; i < m->num; i++) {
    const t4a_nvrtc_probe *p = &m->v[i];
    size_t pl = strlen(p->path);
    put64(d, pl);
    memcpy(d + 8, p->path, pl);
    d += 8 + pl;
    put64(d, (uint64_t)p->file);
    put64(d + 8, p->dev);
    put64(d + 16, p->ino);
    put64(d + 24, p->size);
    put64(d + 32, p->mtime_ns);
    put64(d + 40, p->ctime_ns);
    put64(d + 48, p->taken_ns);
    memcpy(d + 56, p->hash, 16);
    d += PROBE_FIXED - 8;
  }
  if (digest_of(b, bytes, b + 16) != T4A_OK) {
    free(b);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  *out = b;
  *out_bytes = bytes;
  return T4A_OK;
}

/* The digest: XXH3-128 over the count, each probe's path, kind and hash (not the metadata, so
 * that a touch keeps it), and which listed files are one file (device and inode): NVRTC's
 * `#pragma once` goes by the file, so two identical headers that became one hard or symbolic
 * link include differently with the same bytes. For each file that shares its identity with an
 * earlier one, the two ordinals are hashed (none: nothing added). The blob must be well formed
 * (checked by the caller). HOST_OUT_OF_MEMORY: no digest. */
static t4a_status digest_of(const uint8_t *blob, size_t bytes, uint8_t out[16]) {
  XXH3_state_t s;
  XXH3_128bits_reset(&s);
  XXH3_128bits_update(&s, blob + 8, 8);
  size_t at = 32, files = 0;
  while (at < bytes) {
    size_t pl = (size_t)get64(blob + at);
    XXH3_128bits_update(&s, blob + at, 8 + pl);
    const uint8_t *f = blob + at + 8 + pl;
    XXH3_128bits_update(&s, f, 8);
    XXH3_128bits_update(&s, f + 56, 16);
    files += get64(f) == 1;
    at += PROBE_FIXED + pl;
  }
  if (files > 1) {
    /* An open-addressing set of the files' identities: the first file of each. */
    size_t slots = 16;
    while (slots < 2 * files) slots *= 2;
    struct ident_slot {
      uint64_t dev, ino, ordinal; /* ordinal + 1; 0: empty */
    } *set = t4a_host_calloc(slots, sizeof *set);
    if (set == NULL) return T4A_HOST_OUT_OF_MEMORY;
    uint64_t ordinal = 0;
    for (at = 32; at < bytes;) {
      size_t pl = (size_t)get64(blob + at);
      const uint8_t *f = blob + at + 8 + pl;
      at += PROBE_FIXED + pl;
      if (get64(f) != 1) continue;
      uint64_t dev = get64(f + 8), ino = get64(f + 16);
      size_t h =
          (size_t)((dev * 0x9e3779b97f4a7c15ULL) ^ (ino * 0xc2b2ae3d27d4eb4fULL)) & (slots - 1);
      while (set[h].ordinal != 0 && !(set[h].dev == dev && set[h].ino == ino)) {
        h = (h + 1) & (slots - 1);
      }
      if (set[h].ordinal == 0) {
        set[h] = (struct ident_slot){dev, ino, ordinal + 1};
      } else { /* one file under two listed paths */
        uint64_t pair[2] = {set[h].ordinal - 1, ordinal};
        XXH3_128bits_update(&s, pair, sizeof pair);
      }
      ordinal++;
    }
    free(set);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&s));
  memcpy(out, c.digest, 16);
  return T4A_OK;
}

/* Whether the blob is well formed (bounds, count, magic). */
static int well_formed(const uint8_t *b, size_t bytes) {
  if (bytes < 32 || memcmp(b, MANIFEST_MAGIC, 8) != 0) return 0;
  uint64_t num = get64(b + 8), seen = 0;
  size_t at = 32;
  while (at < bytes) {
    if (bytes - at < 8) return 0;
    uint64_t pl = get64(b + at);
    if (pl == 0 || pl >= PATH_MAX || bytes - at < PROBE_FIXED + pl) return 0;
    if (memchr(b + at + 8, '\0', (size_t)pl) != NULL) return 0;
    if (get64(b + at + 8 + pl) > 2) return 0;
    at += PROBE_FIXED + (size_t)pl;
    seen++;
  }
  return seen == num;
}

/* XXH3-128 of the file at path, or -1. */
static int hash_path(const char *path, uint8_t out[16], struct stat *st) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    return -1;
  }
  XXH3_state_t s;
  XXH3_128bits_reset(&s);
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return -1;
    }
    if (n == 0) break;
    XXH3_128bits_update(&s, buf, (size_t)n);
  }
  close(fd);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&s));
  memcpy(out, c.digest, 16);
  return 0;
}

/* The folders of the path being validated, open (O_PATH), each inside the one before it: the
 * manifest is sorted, so its paths come folder by folder in depth-first order, and each folder is
 * opened once, relative to its parent's descriptor, and each path costs a lookup of its last
 * component (fstatat), not of the whole path. The kernel resolves every component as stat(path)
 * would (links followed, `..` taken physically); a folder that cannot be opened keeps its errno,
 * which is what stat gives for any path under it. */
#define CURSOR_DEPTH 24

typedef struct dir_level {
  size_t len; /* of the folder's path: a prefix of the current one */
  int fd, err;
} dir_level;

typedef struct dir_cursor {
  char dir[PATH_MAX];
  dir_level lv[CURSOR_DEPTH];
  int depth;
} dir_cursor;

static void cursor_close(dir_cursor *c) {
  while (c->depth > 0) {
    dir_level *l = &c->lv[--c->depth];
    if (l->fd >= 0) close(l->fd);
  }
}

/* stat(path) through the cursor: 0, or -1 with errno set. */
static int cursor_stat(dir_cursor *c, const char *path, size_t pl, struct stat *st) {
  const char *slash = memrchr(path, '/', pl);
  if (slash == NULL || slash == path || slash[1] == '\0') return stat(path, st);
  size_t dl = (size_t)(slash - path);
  /* Keep the levels that are this folder or folders above it. */
  while (c->depth > 0) {
    dir_level *l = &c->lv[c->depth - 1];
    if (l->len <= dl && memcmp(c->dir, path, l->len) == 0 && (l->len == dl || path[l->len] == '/')) {
      break;
    }
    if (l->fd >= 0) close(l->fd);
    c->depth--;
  }
  dir_level *top = c->depth > 0 ? &c->lv[c->depth - 1] : NULL;
  if (top == NULL || top->len != dl) {
    if (c->depth == CURSOR_DEPTH) { /* deeper than kept: the whole path */
      return stat(path, st);
    }
    memcpy(c->dir, path, dl);
    c->dir[dl] = '\0';
    dir_level *l = &c->lv[c->depth];
    l->len = dl;
    if (top != NULL && top->fd < 0) {
      l->fd = -1;
      l->err = top->err; /* under a folder that did not open: what stat would say */
    } else {
      l->fd = top != NULL ? openat(top->fd, c->dir + top->len + 1, O_PATH | O_DIRECTORY | O_CLOEXEC)
                          : open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      l->err = l->fd < 0 ? errno : 0;
    }
    c->depth++;
    top = l;
  }
  if (top->fd < 0) {
    errno = top->err;
    return -1;
  }
  return fstatat(top->fd, slash + 1, st, 0);
}

/* Validates `count` entries from byte `at` of the blob on (one cursor; refreshes the metadata of a
 * file whose content is unchanged): 1 valid, 0 not. */
static int validate_range(uint8_t *blob, size_t at, size_t count, int *refreshed) {
  dir_cursor cur;
  cur.depth = 0;
  int ok = 1;
  for (size_t e = 0; ok && e < count; e++, at += PROBE_FIXED + (size_t)get64(blob + at)) {
    size_t pl = (size_t)get64(blob + at);
    char path[PATH_MAX];
    memcpy(path, blob + at + 8, pl);
    path[pl] = '\0';
    uint8_t *f = blob + at + 8 + pl;
    struct stat st;
    int rc = cursor_stat(&cur, path, pl, &st);
    uint64_t kind = get64(f);
    if (kind != 1) { /* nothing opened here: still nothing (2: nothing at all, not even a folder) */
      if (kind == 0 && rc == 0 && S_ISDIR(st.st_mode)) continue;
      if (rc != 0 && (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG)) continue;
      ok = 0;
      break;
    }
    if (rc != 0 || !S_ISREG(st.st_mode)) {
      ok = 0;
      break;
    }
    uint64_t ct = ts_ns(&st.st_ctim), taken = get64(f + 48);
    if ((uint64_t)st.st_dev == get64(f + 8) && (uint64_t)st.st_ino == get64(f + 16) &&
        (uint64_t)st.st_size == get64(f + 24) && ts_ns(&st.st_mtim) == get64(f + 32) &&
        ct == get64(f + 40) && ct + RACY_NS < taken) {
      continue;
    }
    /* Metadata changed (or racy): the content decides. */
    uint64_t when = now_ns();
    uint8_t h[16];
    struct stat hs;
    if (hash_path(path, h, &hs) != 0 || memcmp(h, f + 56, 16) != 0) {
      ok = 0;
      break;
    }
    put64(f + 8, (uint64_t)hs.st_dev);
    put64(f + 16, (uint64_t)hs.st_ino);
    put64(f + 24, (uint64_t)hs.st_size);
    put64(f + 32, ts_ns(&hs.st_mtim));
    put64(f + 40, ts_ns(&hs.st_ctim));
    put64(f + 48, when);
    *refreshed = 1;
  }
  cursor_close(&cur);
  return ok;
}

/* A long manifest (CUB's: about 700 paths, each a stat) is validated by up to VALIDATE_THREADS
 * threads at once, each over a contiguous run of the sorted paths with its own cursor: the same
 * checks, in a quarter of the time where the stats are the cost. A thread that cannot start has
 * its run validated by the caller. */
#define VALIDATE_THREADS 4
#define VALIDATE_MIN_PER_THREAD 96         /* below this a thread costs more than its stats */
#define VALIDATE_STACK ((size_t)256 << 10) /* hash_path's 64 KiB buffer, the cursor, margin */

typedef struct validate_part {
  uint8_t *blob;
  size_t at, count;
  int ok, refreshed;
  pthread_t thread;
  int started;
} validate_part;

static void *validate_part_main(void *arg) {
  validate_part *p = arg;
  p->ok = validate_range(p->blob, p->at, p->count, &p->refreshed);
  return NULL;
}

static unsigned online_cpus(void) {
  static _Atomic unsigned cached; /* 0: not asked yet (sysconf reads a file) */
  unsigned n = atomic_load_explicit(&cached, memory_order_relaxed);
  if (n == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (unsigned)c : 1;
    atomic_store_explicit(&cached, n, memory_order_relaxed);
  }
  return n;
}

/* Validates every entry (a well-formed blob); 1 valid, 0 not. Threads for a long one (above). */
static int validate_entries(uint8_t *blob, size_t bytes, int *refreshed) {
  size_t n = (size_t)get64(blob + 8);
  size_t parts = n / VALIDATE_MIN_PER_THREAD;
  if (parts > VALIDATE_THREADS) parts = VALIDATE_THREADS;
  if (parts > online_cpus()) parts = online_cpus();
  if (parts <= 1) return validate_range(blob, 32, n, refreshed);
  validate_part part[VALIDATE_THREADS];
  /* Each part's first entry: entry n * k / parts, found in one walk. */
  size_t k = 0, e = 0;
  for (size_t at = 32; at < bytes && k < parts; e++, at += PROBE_FIXED + (size_t)get64(blob + at)) {
    if (e == n * k / parts) {
      part[k] = (validate_part){.blob = blob, .at = at, .count = n * (k + 1) / parts - e};
      k++;
    }
  }
  pthread_attr_t attr;
  int attr_ok = pthread_attr_init(&attr) == 0;
  if (attr_ok) (void)pthread_attr_setstacksize(&attr, VALIDATE_STACK);
  for (k = 1; k < parts; k++) { /* part 0 is the caller's own */
    part[k].started = attr_ok && !t4a_fault_sim(T4A_FAULT_THREAD_CREATE) &&
                      pthread_create(&part[k].thread, &attr, validate_part_main, &part[k]) == 0;
  }
  if (attr_ok) pthread_attr_destroy(&attr);
  validate_part_main(&part[0]);
  int ok = 1;
  for (k = 0; k < parts; k++) {
    if (k > 0 && part[k].started) {
      pthread_join(part[k].thread, NULL);
    } else if (k > 0) {
      validate_part_main(&part[k]);
    }
    ok = ok && part[k].ok;
    *refreshed |= part[k].refreshed;
  }
  return ok;
}

int t4a_nvrtc_manifest_validate_(uint8_t *blob, size_t bytes, uint8_t digest[16], int *refreshed) {
  *refreshed = 0;
  if (!well_formed(blob, bytes)) return 0;
  if (!validate_entries(blob, bytes, refreshed)) return 0;
  uint8_t d[16];
  if (digest_of(blob, bytes, d) != T4A_OK) return 0; /* unproved: a miss */
  if (memcmp(d, blob + 16, 16) != 0) return 0;
  memcpy(digest, d, 16);
  return 1;
}

size_t t4a_nvrtc_manifest_files_(const uint8_t *blob, size_t bytes) {
  size_t files = 0, at = 32;
  if (!well_formed(blob, bytes)) return 0;
  while (at < bytes) {
    size_t pl = (size_t)get64(blob + at);
    files += get64(blob + at + 8 + pl) == 1;
    at += PROBE_FIXED + pl;
  }
  return files;
}

int t4a_nvrtc_manifest_holds_(const uint8_t *blob, size_t bytes, uint64_t epoch) {
  if (epoch != 0 && t4a_nvrtc_roots_epoch_(NULL, 0) == epoch) return 1;
  uint8_t *copy = t4a_host_malloc(bytes);
  if (copy == NULL) return 0; /* not known to hold: not cached */
  memcpy(copy, blob, bytes);
  uint8_t d[16];
  int refreshed = 0;
  int ok = t4a_nvrtc_manifest_validate_(copy, bytes, d, &refreshed) && memcmp(d, blob + 16, 16) == 0;
  free(copy);
  return ok;
}

uint64_t t4a_nvrtc_roots_watch_manifest_(const uint8_t *blob, size_t bytes, uint64_t epoch) {
  if (epoch == 0 || !well_formed(blob, bytes)) return 0;
  t4a_nvrtc_prober pr;
  if (!t4a_nvrtc_prober_resume_(&pr, epoch)) return 0;
  size_t at = 32;
  t4a_status st = T4A_OK;
  while (st == T4A_OK && at < bytes) {
    size_t pl = (size_t)get64(blob + at);
    st = t4a_nvrtc_prober_watch_(&pr, (const char *)blob + at + 8, pl,
                                 get64(blob + at + 8 + pl) == 1);
    at += PROBE_FIXED + pl;
  }
  uint64_t e = st == T4A_OK ? t4a_nvrtc_prober_finish_(&pr) : 0;
  t4a_nvrtc_prober_free_(&pr);
  return e;
}

/* ---- On disk: <dir>/<32 hex of the first-level key>.t4m -------------------------------------
 * Header: magic (8), key (16), blob size (8), XXH3-64 of the blob (8), XXH3-64 of bytes 0-39 (8);
 * then the blob. Counted against the disk level's size bound and evicted with its entries, least
 * recently used first (a load that finds a valid file refreshes its modification time). */

static void manifest_path(const char *dir, const uint8_t key[16], char *out, size_t size) {
  static const char hex[] = "0123456789abcdef";
  char h[33];
  for (int i = 0; i < 16; i++) {
    h[2 * i] = hex[key[i] >> 4];
    h[2 * i + 1] = hex[key[i] & 15];
  }
  h[32] = '\0';
  snprintf(out, size, "%s/%s.t4m", dir, h);
}

uint8_t *t4a_nvrtc_manifest_load_(const char *dir, const uint8_t key[16], size_t *out_bytes) {
  char path[PATH_MAX];
  manifest_path(dir, key, path, sizeof path);
  *out_bytes = 0;
  int fd = -1;
  if (!t4a_fault_sim(T4A_FAULT_FILE_OPEN)) fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return NULL;
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)FILE_HEADER + 32 ||
      (size_t)st.st_size > MAX_MANIFEST_BYTES + FILE_HEADER) {
    close(fd);
    return NULL;
  }
  size_t size = (size_t)st.st_size;
  buf = t4a_host_malloc(size);
  t4a_nvrtc_populate_(buf, size);
  size_t got = 0;
  while (buf != NULL && got < size) {
    ssize_t n = t4a_fault_sim(T4A_FAULT_FILE_READ) ? -1 : read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (buf == NULL || got != size || memcmp(buf, FILE_MAGIC, 8) != 0 ||
      memcmp(buf + 8, key, 16) != 0 || get64(buf + 24) != size - FILE_HEADER ||
      XXH3_64bits(buf, 40) != get64(buf + 40) ||
      XXH3_64bits(buf + FILE_HEADER, size - FILE_HEADER) != get64(buf + 32)) {
    close(fd);
    free(buf);
    return NULL;
  }
  /* A use: the disk level's eviction keeps recently used files. */
  if (!t4a_fault_sim(T4A_FAULT_FILE_WRITE)) (void)futimens(fd, NULL);
  close(fd);
  memmove(buf, buf + FILE_HEADER, size - FILE_HEADER);
  *out_bytes = size - FILE_HEADER;
  return buf;
}

size_t t4a_nvrtc_manifest_store_(const char *dir, const uint8_t key[16], const uint8_t *blob,
                                 size_t bytes) {
  static atomic_uint counter;
  char path[PATH_MAX], tmp[PATH_MAX];
  manifest_path(dir, key, path, sizeof path);
  if (snprintf(tmp, sizeof tmp, "%s/.t4a-tmp-m-%d-%u", dir, (int)getpid(),
               atomic_fetch_add(&counter, 1)) >= (int)sizeof tmp) {
    return 0;
  }
  uint8_t *buf = t4a_host_malloc(FILE_HEADER + bytes);
  if (buf == NULL) return 0;
  memcpy(buf, FILE_MAGIC, 8);
  memcpy(buf + 8, key, 16);
  put64(buf + 24, bytes);
  put64(buf + 32, XXH3_64bits(blob, bytes));
  put64(buf + 40, XXH3_64bits(buf, 40));
  memcpy(buf + FILE_HEADER, blob, bytes);
  int fd = -1;
  if (!t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    free(buf);
    return 0;
  }
  size_t done = 0, total = FILE_HEADER + bytes;
  int ok = 1;
  while (done < total) {
    ssize_t n = t4a_fault_sim(T4A_FAULT_FILE_WRITE) ? -1 : write(fd, buf + done, total - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = 0;
      break;
    }
    done += (size_t)n;
  }
  free(buf);
  if (close(fd) != 0) ok = 0;
  if (ok && !t4a_fault_sim(T4A_FAULT_FILE_RENAME) && rename(tmp, path) == 0) return total;
  unlink(tmp);
  return 0;
}
