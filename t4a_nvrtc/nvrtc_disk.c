/* The artifact cache's disk level: one checksummed file per request key in a directory that
 * several processes may share. Writes go to a unique temporary file in the same directory and are
 * renamed into place (atomic); readers verify everything and treat any doubt as a miss; a scan,
 * run when the cache's size estimate passes the bound (and every T4A_NVRTC_DISK_RESCAN_WRITES
 * writes), brings the directory back to 90% of its bound, least recently used first (a hit
 * refreshes the file's modification time); include manifests (<key>.t4m, written by
 * nvrtc_manifest.c) count against the bound and are evicted with the entries. Every failure here is counted and swallowed: the
 * disk level can cost a recompile, never a failed compile.
 *
 * Fault points: FILE_OPEN (open, mkdir, opendir), FILE_READ (read), FILE_WRITE (write, fsync of
 * the entry and of the directory, close after writing, futimens on a hit), FILE_RENAME (rename,
 * and unlink when evicting). Removing a corrupt entry, a temporary file after a failed write and a
 * stale temporary file is best effort and not a fault point: it is cleanup, and whatever it
 * leaves behind the next scan, lookup or write deals with. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define DISK_MAGIC "T4ANVRTC"
#define DISK_FORMAT 1u
#define DISK_HEADER_BYTES 64u
#define DISK_MAX_FILE_BYTES ((uint64_t)1 << 32)
#define DISK_SUFFIX ".t4a"
#define MANIFEST_SUFFIX ".t4m" /* include manifests (nvrtc_manifest.c): bounded with the entries */
#define DISK_TMP_PREFIX ".t4a-tmp-"
#define DISK_STALE_TMP_SECONDS 3600

static atomic_ulong g_tmp_counter;

/* ---- Little-endian framing ---------------------------------------------------------------- */

static void le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct writer {
  uint8_t *buf; /* NULL: count only */
  size_t pos;
} writer;

static void w_bytes(writer *w, const void *p, size_t n) {
  if (w->buf != NULL && n > 0) memcpy(w->buf + w->pos, p, n);
  w->pos += n;
}

static void w_u64(writer *w, uint64_t v) {
  uint8_t b[8];
  le64(b, v);
  w_bytes(w, b, 8);
}

static void w_str(writer *w, const void *p, size_t n) {
  w_u64(w, n);
  w_bytes(w, p, n);
}

typedef struct reader {
  const uint8_t *p;
  size_t left;
  int bad;
} reader;

static uint64_t r_u64(reader *r) {
  if (r->bad || r->left < 8) {
    r->bad = 1;
    return 0;
  }
  uint64_t v = rd64(r->p);
  r->p += 8;
  r->left -= 8;
  return v;
}

static t4a_nvrtc_str r_str(reader *r) {
  t4a_nvrtc_str s = {"", 0};
  uint64_t n = r_u64(r);
  if (r->bad || n > r->left) {
    r->bad = 1;
    return s;
  }
  s.p = (const char *)r->p;
  s.n = (size_t)n;
  r->p += n;
  r->left -= (size_t)n;
  return s;
}

/* The payload after the header: the identity record, then the artifact. */
static void write_payload(writer *w, const t4a_nvrtc_artifact *a, const uint8_t *identity,
                          size_t identity_bytes) {
  w_str(w, identity, identity_bytes);
  w_u64(w, (uint64_t)a->output);
  w_u64(w, (uint64_t)a->major);
  w_u64(w, (uint64_t)a->minor);
  w_str(w, a->target, strlen(a->target));
  w_str(w, a->build_identity, strlen(a->build_identity));
  w_str(w, a->program_name, strlen(a->program_name));
  w_str(w, a->data, a->data_bytes);
  w_str(w, a->log, a->log_bytes);
  w_u64(w, a->num_names);
  for (size_t i = 0; i < a->num_names; i++) {
    w_str(w, a->exprs[i], strlen(a->exprs[i]));
    w_str(w, a->lowered[i], strlen(a->lowered[i]));
  }
}

/* ---- Paths and directory ----------------------------------------------------------------- */

static int entry_path(const t4a_nvrtc_disk *d, const uint8_t key[16], char *out, size_t size) {
  char hex[33];
  t4a_nvrtc_key_hex(key, hex);
  int n = snprintf(out, size, "%s/%s%s", d->dir, hex, DISK_SUFFIX);
  return n > 0 && (size_t)n < size;
}

/* An entry (<32 hex>.t4a) or an include manifest (<32 hex>.t4m): what the size bound counts. */
static int is_entry_name(const char *name) {
  size_t n = strlen(name);
  if (n != 32 + sizeof DISK_SUFFIX - 1 ||
      (strcmp(name + 32, DISK_SUFFIX) != 0 && strcmp(name + 32, MANIFEST_SUFFIX) != 0)) {
    return 0;
  }
  for (size_t i = 0; i < 32; i++) {
    char ch = name[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
  }
  return 1;
}

static int make_dir(const char *path) {
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EIO;
    return -1;
  }
  if (mkdir(path, 0777) == 0 || errno == EEXIST) return 0;
  return -1;
}

t4a_status t4a_nvrtc_disk_init(t4a_nvrtc_disk *disk, const char *dir, uint64_t max_bytes,
                               int fsync_writes) {
  memset(disk, 0, sizeof *disk);
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  if (n == 0 || n + 64 >= PATH_MAX) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_cache_create", 0, NULL, 0,
                          "disk_dir \"%.100s\" is empty or too long", dir);
  }
  char *copy = t4a_host_malloc(n + 1);
  if (copy == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(copy, dir, n);
  copy[n] = '\0';
  /* mkdir -p */
  for (size_t i = 1; i <= n; i++) {
    if (i == n || copy[i] == '/') {
      char saved = copy[i];
      copy[i] = '\0';
      int rc = make_dir(copy);
      int err = errno;
      copy[i] = saved;
      if (rc != 0) {
        t4a_status st =
            t4a_error_set_(T4A_IO, "mkdir", err, NULL, 0,
                           "cannot create the cache directory %.180s: %s", copy, strerror(err));
        free(copy);
        return st;
      }
    }
  }
  struct stat st;
  if (stat(copy, &st) != 0 || !S_ISDIR(st.st_mode) || access(copy, W_OK | X_OK) != 0) {
    int err = errno;
    t4a_status s = t4a_error_set_(T4A_IO, "access", err, NULL, 0,
                                  "the cache directory %.180s is not a writable directory: %s",
                                  copy, strerror(err ? err : ENOTDIR));
    free(copy);
    return s;
  }
  disk->dir = copy;
  disk->dir_bytes = n;
  disk->max_bytes = max_bytes;
  disk->fsync = fsync_writes;
  return T4A_OK;
}

void t4a_nvrtc_disk_deinit(t4a_nvrtc_disk *disk) {
  free(disk->dir);
  disk->dir = NULL;
}

/* ---- Reading ------------------------------------------------------------------------------ */

/* Reads exactly n bytes. Returns 0, or -1 with errno (EIO for a simulated failure), or 1 for an
 * early end of file (a truncated entry). */
static int read_full(int fd, uint8_t *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (t4a_fault_sim(T4A_FAULT_FILE_READ)) {
      errno = EIO;
      return -1;
    }
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 1;
    got += (size_t)r;
  }
  return 0;
}

/* Removes a corrupt entry, unless another process has already replaced it. Best effort: if the
 * unlink fails, the recompiled artifact is renamed over the entry anyway. */
static void remove_if_same(const char *path, int fd) {
  struct stat mine, now;
  if (fstat(fd, &mine) == 0 && stat(path, &now) == 0 && mine.st_dev == now.st_dev &&
      mine.st_ino == now.st_ino) {
    (void)unlink(path);
  }
}

/* What a lookup expects to find: a compile's entry (p: its prepared request, compared through
 * the identity emitter), or an entry whose identity record is given whole (a link: record, and
 * the artifact's kind, version and build identity). */
typedef struct disk_expect {
  const t4a_nvrtc_lib *lib;
  const t4a_nvrtc_prepared *p;
  const uint8_t *record;
  size_t record_bytes;
  t4a_nvrtc_output output;
  int major, minor;
  const char *build_identity;
} disk_expect;

static int str_is(t4a_nvrtc_str s, const char *want) {
  return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

/* Checks a whole file image and builds the artifact. Returns NULL and sets *corrupt for anything
 * wrong with the bytes; NULL without *corrupt for an allocation failure. */
static t4a_nvrtc_artifact *decode(const uint8_t *buf, size_t size, const disk_expect *x,
                                  const uint8_t key[16], int *corrupt) {
  const t4a_nvrtc_lib *lib = x->lib;
  const t4a_nvrtc_prepared *p = x->p;
  *corrupt = 1;
  if (size < DISK_HEADER_BYTES || memcmp(buf, DISK_MAGIC, 8) != 0 || rd32(buf + 8) != DISK_FORMAT ||
      rd32(buf + 12) != DISK_HEADER_BYTES || rd64(buf + 56) != XXH3_64bits(buf, 56) ||
      rd64(buf + 16) != size - DISK_HEADER_BYTES || memcmp(buf + 24, key, 16) != 0) {
    return NULL;
  }
  const uint8_t *payload = buf + DISK_HEADER_BYTES;
  size_t payload_bytes = size - DISK_HEADER_BYTES;
  if (rd64(buf + 40) != XXH3_64bits(payload, payload_bytes)) return NULL;
  reader r = {payload, payload_bytes, 0};
  t4a_nvrtc_str identity = r_str(&r);
  int same = p != NULL ? t4a_nvrtc_identity_equal(lib, p, (const uint8_t *)identity.p, identity.n)
                       : identity.n == x->record_bytes &&
                             memcmp(identity.p, x->record, identity.n) == 0;
  if (r.bad || !same) {
    return NULL; /* a foreign entry (a hash collision, or a file put there by hand) */
  }
  t4a_nvrtc_artifact_parts parts;
  memset(&parts, 0, sizeof parts);
  uint64_t output = r_u64(&r), major = r_u64(&r), minor = r_u64(&r);
  parts.target = r_str(&r);
  parts.build_identity = r_str(&r);
  parts.program_name = r_str(&r);
  t4a_nvrtc_str data = r_str(&r), log = r_str(&r);
  uint64_t num_names = r_u64(&r);
  if (p == NULL) {
    if (r.bad || output != (uint64_t)x->output || major != (uint64_t)x->major ||
        minor != (uint64_t)x->minor || !str_is(parts.build_identity, x->build_identity) ||
        num_names > r.left / 16 || data.n == 0) {
      return NULL;
    }
  } else if (r.bad || output != (uint64_t)p->req->output || major != (uint64_t)lib->major ||
      minor != (uint64_t)lib->minor || parts.target.n != strlen(p->target) ||
      memcmp(parts.target.p, p->target, parts.target.n) != 0 ||
      parts.build_identity.n != strlen(lib->build_identity) ||
      memcmp(parts.build_identity.p, lib->build_identity, parts.build_identity.n) != 0 ||
      parts.program_name.n != p->program_name_bytes ||
      memcmp(parts.program_name.p, p->program_name, parts.program_name.n) != 0 ||
      num_names != p->req->num_name_expressions || num_names > r.left / 16 || data.n == 0 ||
      (output == T4A_NVRTC_OUTPUT_PTX && data.n <= 1)) {
    return NULL;
  }
  t4a_nvrtc_str names_stack[16];
  t4a_nvrtc_str *names = names_stack;
  if (num_names > 8) {
    names = t4a_host_malloc((size_t)num_names * 2 * sizeof *names);
    if (names == NULL) {
      *corrupt = 0;
      return NULL;
    }
  }
  for (size_t i = 0; i < num_names; i++) {
    names[i] = r_str(&r);
    names[num_names + i] = r_str(&r);
    if (memchr(names[i].p, '\0', names[i].n) != NULL ||
        memchr(names[num_names + i].p, '\0', names[num_names + i].n) != NULL) {
      r.bad = 1;
    }
  }
  t4a_nvrtc_artifact *art = NULL;
  if (!r.bad && r.left == 0) {
    parts.output = (t4a_nvrtc_output)output;
    parts.major = (int)major;
    parts.minor = (int)minor;
    parts.key = key;
    parts.data = data.p;
    parts.data_bytes = data.n;
    parts.log = log.p;
    parts.log_bytes = log.n;
    parts.num_names = (size_t)num_names;
    parts.exprs = names;
    parts.lowered = names + num_names;
    art = t4a_nvrtc_artifact_alloc(&parts, NULL, NULL);
    *corrupt = 0;
  }
  if (names != names_stack) free(names);
  return art;
}

static t4a_nvrtc_artifact *lookup(t4a_nvrtc_disk *disk, const disk_expect *x,
                                  const uint8_t key[16], t4a_counters *c) {
  t4a_error saved;
  t4a_error_last(&saved);
  char path[PATH_MAX];
  t4a_nvrtc_artifact *art = NULL;
  uint8_t *buf = NULL;
  int corrupt = 0, error = 0;
  int fd = -1;
  if (!entry_path(disk, key, path, sizeof path)) {
    error = 1;
    goto out;
  }
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EIO;
  } else {
    /* O_NONBLOCK: a FIFO at the path must not block the lookup (the S_ISREG check below then
     * refuses it); O_NOFOLLOW: an entry is never a symbolic link to a file elsewhere. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  }
  if (fd < 0) {
    if (errno == ELOOP) {
      corrupt = 1; /* a symbolic link: not ours; the recompiled entry is renamed over it */
    } else {
      error = errno != ENOENT;
    }
    goto out;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    error = 1;
    goto out;
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < DISK_HEADER_BYTES ||
      (uint64_t)st.st_size > DISK_MAX_FILE_BYTES) {
    corrupt = 1;
    goto out;
  }
  size_t size = (size_t)st.st_size;
  buf = t4a_host_malloc(size);
  if (buf == NULL) {
    error = 1;
    goto out;
  }
  t4a_nvrtc_populate_(buf, size);
  int rc = read_full(fd, buf, size);
  if (rc != 0) {
    if (rc > 0)
      corrupt = 1;
    else
      error = 1;
    goto out;
  }
  art = decode(buf, size, x, key, &corrupt);
  if (art == NULL && !corrupt) error = 1;
  if (art != NULL && !t4a_fault_sim(T4A_FAULT_FILE_WRITE)) {
    (void)futimens(fd, NULL); /* a hit is a use: the LRU scan keeps recently used entries */
  }
out:
  if (corrupt) {
    t4a_counter_add(c, T4A_COUNTER_nvrtc_disk_corrupt, 1);
    remove_if_same(path, fd);
  }
  if (error) t4a_counter_add(c, T4A_COUNTER_nvrtc_disk_errors, 1);
  t4a_counter_add(c, art != NULL ? T4A_COUNTER_nvrtc_disk_hits : T4A_COUNTER_nvrtc_disk_misses, 1);
  if (fd >= 0) close(fd);
  free(buf);
  t4a_nvrtc_error_restore(&saved);
  return art;
}

t4a_nvrtc_artifact *t4a_nvrtc_disk_lookup(t4a_nvrtc_disk *disk, const t4a_nvrtc_lib *lib,
                                          const t4a_nvrtc_prepared *p, const uint8_t key[16],
                                          t4a_counters *c) {
  disk_expect x = {lib, p, NULL, 0, T4A_NVRTC_OUTPUT_PTX, 0, 0, NULL};
  return lookup(disk, &x, key, c);
}

t4a_nvrtc_artifact *t4a_nvrtc_disk_lookup_record(t4a_nvrtc_disk *disk, const uint8_t *record,
                                                 size_t record_bytes, t4a_nvrtc_output output,
                                                 int major, int minor, const char *build_identity,
                                                 const uint8_t key[16], t4a_counters *c) {
  disk_expect x = {NULL, NULL, record, record_bytes, output, major, minor, build_identity};
  return lookup(disk, &x, key, c);
}

/* ---- Writing ------------------------------------------------------------------------------ */

static int write_full(int fd, const uint8_t *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    if (t4a_fault_sim(T4A_FAULT_FILE_WRITE)) {
      errno = EIO;
      return -1;
    }
    ssize_t w = write(fd, buf + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    done += (size_t)w;
  }
  return 0;
}

/* fsync through the FILE_WRITE fault point. */
static int sync_fd(int fd) {
  if (t4a_fault_sim(T4A_FAULT_FILE_WRITE)) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

/* Syncs the directory (the rename). Returns 0 or -1. */
static int sync_dir(const t4a_nvrtc_disk *disk) {
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return -1;
  int dfd = open(disk->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  int rc = sync_fd(dfd);
  close(dfd);
  return rc;
}

void t4a_nvrtc_disk_store(t4a_nvrtc_disk *disk, const t4a_nvrtc_artifact *art,
                          const uint8_t *identity, size_t identity_bytes, t4a_counters *c) {
  t4a_error saved;
  t4a_error_last(&saved);
  char path[PATH_MAX], tmp[PATH_MAX];
  uint8_t *buf = NULL;
  int fd = -1, ok = 0, tmp_made = 0;
  writer w = {NULL, 0};
  write_payload(&w, art, identity, identity_bytes);
  size_t payload_bytes = w.pos;
  if (!entry_path(disk, art->key, path, sizeof path)) goto out;
  buf = t4a_host_malloc(DISK_HEADER_BYTES + payload_bytes);
  if (buf == NULL) goto out;
  w.buf = buf + DISK_HEADER_BYTES;
  w.pos = 0;
  write_payload(&w, art, identity, identity_bytes);
  memset(buf, 0, DISK_HEADER_BYTES);
  memcpy(buf, DISK_MAGIC, 8);
  le32(buf + 8, DISK_FORMAT);
  le32(buf + 12, DISK_HEADER_BYTES);
  le64(buf + 16, payload_bytes);
  memcpy(buf + 24, art->key, 16);
  le64(buf + 40, XXH3_64bits(buf + DISK_HEADER_BYTES, payload_bytes));
  le64(buf + 56, XXH3_64bits(buf, 56));

  for (int attempt = 0; attempt < 4 && fd < 0; attempt++) {
    unsigned long n = atomic_fetch_add_explicit(&g_tmp_counter, 1, memory_order_relaxed);
    int len = snprintf(tmp, sizeof tmp, "%s/%s%s-%ld-%lu", disk->dir, DISK_TMP_PREFIX, art->key_hex,
                       (long)getpid(), n);
    if (len <= 0 || (size_t)len >= sizeof tmp) goto out;
    if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
      errno = EIO;
      goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) goto out;
  }
  if (fd < 0) goto out;
  tmp_made = 1;
  if (write_full(fd, buf, DISK_HEADER_BYTES + payload_bytes) != 0) goto out;
  if (disk->fsync && sync_fd(fd) != 0) goto out;
  int failed_close = t4a_fault_sim(T4A_FAULT_FILE_WRITE);
  int rc = close(fd); /* closed either way: a simulated failure must not leak the descriptor */
  fd = -1;
  if (rc != 0 || failed_close) goto out;
  if (t4a_fault_sim(T4A_FAULT_FILE_RENAME)) {
    errno = EIO;
    goto out;
  }
  if (rename(tmp, path) != 0) goto out;
  tmp_made = 0;
  ok = 1;
  /* The entry is in place; a failed directory sync costs durability only, and is counted. */
  if (disk->fsync && sync_dir(disk) != 0) t4a_counter_add(c, T4A_COUNTER_nvrtc_disk_errors, 1);
out:
  if (fd >= 0) close(fd);
  if (tmp_made) (void)unlink(tmp);
  free(buf);
  t4a_counter_add(c, ok ? T4A_COUNTER_nvrtc_disk_writes : T4A_COUNTER_nvrtc_disk_errors, 1);
  if (ok) {
    /* Scan only when needed: the estimate (last scan's total plus this cache's writes since) is
     * past the bound, this cache never scanned, or enough writes went by that other processes'
     * writes may have filled the directory. */
    t4a_nvrtc_disk_wrote_(disk, (uint64_t)(DISK_HEADER_BYTES + payload_bytes), c);
  }
  t4a_nvrtc_error_restore(&saved);
}

void t4a_nvrtc_disk_wrote_(t4a_nvrtc_disk *disk, uint64_t bytes, t4a_counters *c) {
  uint64_t est = atomic_fetch_add(&disk->estimate, bytes) + bytes;
  unsigned writes = atomic_fetch_add(&disk->writes_since_scan, 1) + 1;
  if (!atomic_load(&disk->scanned) || est > disk->max_bytes ||
      writes >= T4A_NVRTC_DISK_RESCAN_WRITES) {
    t4a_nvrtc_disk_evict(disk, c);
  }
}

/* ---- Eviction ----------------------------------------------------------------------------- */

typedef struct scan_item {
  char name[40];
  uint64_t bytes;
  struct timespec mtime;
} scan_item;

static int older_first(const void *a, const void *b) {
  const scan_item *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

void t4a_nvrtc_disk_evict(t4a_nvrtc_disk *disk, t4a_counters *c) {
  int idle = 0;
  if (!atomic_compare_exchange_strong(&disk->scanning, &idle, 1)) return; /* one is running */
  t4a_error saved;
  t4a_error_last(&saved);
  DIR *d = NULL;
  scan_item *items = NULL;
  size_t num = 0, cap = 0;
  uint64_t total = 0;
  int failed = 0;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN) || (d = opendir(disk->dir)) == NULL) {
    failed = 1;
    goto out;
  }
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    struct stat st;
    int is_entry = is_entry_name(de->d_name);
    int is_tmp = strncmp(de->d_name, DISK_TMP_PREFIX, sizeof DISK_TMP_PREFIX - 1) == 0;
    if (!is_entry && !is_tmp) continue;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue; /* vanished (another process evicted or replaced it), or not ours */
    }
    if (is_tmp) {
      /* A writer that crashed between create and rename leaves one of these. */
      if (now - st.st_mtim.tv_sec > DISK_STALE_TMP_SECONDS) {
        (void)unlinkat(dirfd(d), de->d_name, 0);
      }
      continue;
    }
    if (num == cap) {
      size_t ncap = cap != 0 ? 2 * cap : 64;
      scan_item *grown = t4a_host_malloc(ncap * sizeof *grown);
      if (grown == NULL) {
        failed = 1;
        goto out;
      }
      if (num > 0) memcpy(grown, items, num * sizeof *items);
      free(items);
      items = grown;
      cap = ncap;
    }
    memcpy(items[num].name, de->d_name, 32 + sizeof DISK_SUFFIX); /* checked: 36 chars + NUL */
    items[num].bytes = (uint64_t)st.st_size;
    items[num].mtime = st.st_mtim;
    total += (uint64_t)st.st_size;
    num++;
  }
  if (total > disk->max_bytes) {
    /* Down to the low-water mark, so that the next few writes do not scan again. */
    uint64_t low = disk->max_bytes - disk->max_bytes / 10;
    qsort(items, num, sizeof *items, older_first);
    for (size_t i = 0; i < num && total > low; i++) {
      int rc;
      if (t4a_fault_sim(T4A_FAULT_FILE_RENAME)) {
        errno = EACCES;
        rc = -1;
      } else {
        rc = unlinkat(dirfd(d), items[i].name, 0);
      }
      if (rc == 0) t4a_counter_add(c, T4A_COUNTER_nvrtc_disk_evictions, 1);
      if (rc != 0 && errno != ENOENT) failed = 1; /* ENOENT: another process got there first */
      /* Subtracted whatever happened: an entry that cannot be removed (EACCES, EPERM: another
       * user's file) must not make this scan remove newer entries in its place. */
      total -= items[i].bytes;
    }
  }
  atomic_store(&disk->estimate, total);
  atomic_store(&disk->writes_since_scan, 0);
  atomic_store(&disk->scanned, 1);
  atomic_fetch_add(&disk->scans, 1);
out:
  if (failed) t4a_counter_add(c, T4A_COUNTER_nvrtc_disk_errors, 1);
  if (d != NULL) closedir(d);
  free(items);
  atomic_store(&disk->scanning, 0);
  t4a_nvrtc_error_restore(&saved);
}
