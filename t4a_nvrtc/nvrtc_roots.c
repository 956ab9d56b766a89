/* Include roots: a content fingerprint of each root's whole tree, memoised in memory (kept valid
 * by inotify watches on every directory and file of the tree) and on disk (validated by file
 * metadata), and the toolkit's roots found by default.
 *
 * A root's fingerprint is XXH3-128 over its sorted records: every directory and file under it
 * (symbolic links followed), each with its relative path, its kind (file or directory, and
 * whether it was reached through a link) and, for a file, XXH3-128 of its bytes. NVRTC given the
 * root as an include path can open only files of that tree (the include check refuses what could
 * leave it), so a request keyed by its roots' fingerprints sees every byte it may read.
 *
 * Validation. In memory, a snapshot stays valid while no inotify event arrived for any watched
 * root (one non-blocking read per lookup); any event (edit, touch, create, delete, rename,
 * overflow) makes every memo stale, and the next use re-walks the tree. A re-walk (and a new
 * process's walk over a disk memo) re-hashes a file unless its device, inode, size, modification
 * and change times equal the memo's and its change time is more than a second older than the
 * moment it was hashed (an edit within the same clock tick as the hash could leave the metadata
 * equal: such a "racy" record is always re-hashed, as git does). The change time is set by the
 * kernel on every write and attribute change and cannot be set back by a user, so a same-size
 * edit with a restored modification time is still seen. Without inotify (no instance, watch
 * limit), every use re-walks with metadata validation: slower, equally sound.
 *
 * Fault points: FILE_OPEN (opendir, open of a file to hash, of the disk memo), FILE_READ (reading
 * a file, the disk memo), FILE_WRITE, FILE_RENAME (writing the disk memo; failures there are
 * swallowed), HOST_MALLOC. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define ROOTS_MAX_MEMOS 64u
#define ROOTS_MAX_DEPTH 64u
#define ROOTS_MAX_RECORDS (1u << 20)
#define ROOTS_RACY_NS 1000000000ull
#define ROOTS_WALK_TRIES 3
#define ROOTS_MEMO_MAGIC "T4AROOTS"
#define ROOTS_MEMO_FORMAT 1u
#define ROOTS_WATCH_MASK                                                                     \
  (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_DELETE_SELF |         \
   IN_MOVE_SELF | IN_MOVED_FROM | IN_MOVED_TO)

/* One memoised root: its latest snapshot and whether it is still known valid. */
typedef struct root_memo {
  struct root_memo *next;
  char *path;
  t4a_nvrtc_root_snapshot *snap;
  int valid;     /* no event since the snapshot was taken, and every entry is watched */
  uint64_t used; /* for eviction: the use counter at its last use */
} root_memo;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static root_memo *g_memos;
static size_t g_num_memos;
static uint64_t g_use;
static int g_inotify = -2; /* -2: not tried; -1: unavailable */
static _Atomic uint64_t g_walks, g_files_hashed;
/* Advances whenever the memos may have been dropped (an event, a fork, a forget); under g_mu. */
static uint64_t g_epoch = 1;

static uint64_t now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ts_ns(const struct timespec *t) {
  return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

/* ---- Snapshots ---------------------------------------------------------------------------- */

static void snap_free(t4a_nvrtc_root_snapshot *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->num_parent_names; i++) free(s->parent_names[i]);
  free(s->parent_names);
  for (size_t i = 0; i < s->num; i++) free(s->recs[i].rel);
  free(s->recs);
  free(s->path);
  free(s);
}

void t4a_nvrtc_root_snapshot_release_(t4a_nvrtc_root_snapshot *s) {
  if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) snap_free(s);
}

static int rec_cmp(const void *a, const void *b) {
  return strcmp(((const t4a_nvrtc_root_rec *)a)->rel, ((const t4a_nvrtc_root_rec *)b)->rel);
}

const t4a_nvrtc_root_rec *t4a_nvrtc_root_find_(const t4a_nvrtc_root_snapshot *s, const char *rel) {
  t4a_nvrtc_root_rec key;
  memset(&key, 0, sizeof key);
  key.rel = (char *)rel;
  return bsearch(&key, s->recs, s->num, sizeof key, rec_cmp);
}

/* ---- The walk ----------------------------------------------------------------------------- */

typedef struct walk {
  const char *root;
  char path[PATH_MAX];
  size_t root_len; /* bytes of the root in path */
  t4a_nvrtc_root_rec *recs;
  size_t num, cap;
  const t4a_nvrtc_root_snapshot *old; /* records to reuse when the metadata says so */
  int watch;                          /* add inotify watches; cleared when one fails */
  uint64_t stack_dev[ROOTS_MAX_DEPTH + 1], stack_ino[ROOTS_MAX_DEPTH + 1];
  size_t depth;
  uint8_t *buf;
  size_t buf_cap;
  uint64_t hashed, bytes, files, dirs;
} walk;

#define WALK_INVALID(...) \
  t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_include_root", 0, NULL, 0, __VA_ARGS__)

/* Messages say what first, then the path under the root, then the root: the per-thread detail
 * is 256 bytes, and roots can be long. */
static t4a_status walk_io(const char *what, int err, const char *path) {
  return t4a_error_set_(T4A_IO, what, err, NULL, 0, "include root: cannot %s (%s): %.200s", what,
                        strerror(err), path);
}

static const char *rel_of(const walk *w) {
  return w->root_len < strlen(w->path) ? w->path + w->root_len + 1 : w->path;
}

static t4a_status push_rec(walk *w, const char *rel, uint32_t kind, const struct stat *st) {
  if (w->num == w->cap) {
    if (w->cap >= ROOTS_MAX_RECORDS) {
      return t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_nvrtc_include_root", 0, NULL, 0,
                            "include root %.200s holds more than %u files and directories",
                            w->root, ROOTS_MAX_RECORDS);
    }
    size_t cap = w->cap ? w->cap * 2 : 256;
    t4a_nvrtc_root_rec *r = t4a_host_realloc(w->recs, cap * sizeof *r);
    if (r == NULL) return T4A_HOST_OUT_OF_MEMORY;
    w->recs = r;
    w->cap = cap;
  }
  size_t n = strlen(rel);
  char *copy = t4a_host_malloc(n + 1);
  if (copy == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(copy, rel, n + 1);
  t4a_nvrtc_root_rec *r = &w->recs[w->num++];
  memset(r, 0, sizeof *r);
  r->rel = copy;
  r->kind = kind;
  r->dev = (uint64_t)st->st_dev;
  r->ino = (uint64_t)st->st_ino;
  r->size = (uint64_t)st->st_size;
  r->mtime_ns = ts_ns(&st->st_mtim);
  r->ctime_ns = ts_ns(&st->st_ctim);
  return T4A_OK;
}

static void add_watch(walk *w, const char *path) {
  if (!w->watch) return;
  if (inotify_add_watch(g_inotify, path, ROOTS_WATCH_MASK | IN_MASK_ADD) < 0) w->watch = 0;
}

/* Watches every directory on the way to the root (links followed): renaming, replacing or
 * retargeting any of them (another toolkit behind /usr/local/cuda) is an event. */
static void watch_ancestors(walk *w, const char *root, size_t rn) {
  if (!w->watch) return;
  char p[PATH_MAX];
  if (rn >= sizeof p) {
    w->watch = 0;
    return;
  }
  memcpy(p, root, rn);
  p[rn] = '\0';
  const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                        IN_MOVE_SELF | IN_MASK_ADD;
  if (root[0] != '/' && inotify_add_watch(g_inotify, ".", mask) < 0) w->watch = 0;
  for (size_t i = 1; i < rn && w->watch; i++) {
    if (p[i] != '/') continue;
    p[i] = '\0';
    if (inotify_add_watch(g_inotify, p, mask) < 0) w->watch = 0;
    p[i] = '/';
  }
  if (root[0] == '/' && inotify_add_watch(g_inotify, "/", mask) < 0) w->watch = 0;
  if (rn + 4 < sizeof p) { /* the physical parent, which "ROOT/.." names */
    memcpy(p, root, rn);
    memcpy(p + rn, "/..", 4);
    if (inotify_add_watch(g_inotify, p, mask) < 0) w->watch = 0;
  }
}

/* Hashes the file at w->path into r (reusing the old record when its metadata says so). */
static t4a_status hash_file(walk *w, t4a_nvrtc_root_rec *r) {
  if (w->old != NULL) {
    const t4a_nvrtc_root_rec *o = t4a_nvrtc_root_find_(w->old, r->rel);
    if (o != NULL && o->kind == r->kind && o->dev == r->dev && o->ino == r->ino &&
        o->size == r->size && o->mtime_ns == r->mtime_ns && o->ctime_ns == r->ctime_ns &&
        o->ctime_ns + ROOTS_RACY_NS < o->taken_ns) {
      memcpy(r->hash, o->hash, 16);
      r->taken_ns = o->taken_ns;
      return T4A_OK;
    }
  }
  r->taken_ns = now_realtime_ns();
  int fd = -1;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EACCES;
  } else {
    fd = open(w->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  }
  if (fd < 0) return walk_io("open", errno, w->path);
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  t4a_status st = T4A_OK;
  for (;;) {
    ssize_t n;
    if (t4a_fault_sim(T4A_FAULT_FILE_READ)) {
      errno = EIO;
      n = -1;
    } else {
      n = read(fd, w->buf, w->buf_cap);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = walk_io("read", errno, w->path);
      break;
    }
    if (n == 0) break;
    XXH3_128bits_update(&state, w->buf, (size_t)n);
    w->bytes += (uint64_t)n;
  }
  close(fd);
  if (st != T4A_OK) return st;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  memcpy(r->hash, c.digest, 16);
  w->hashed++;
  return T4A_OK;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int t4a_nvrtc_root_beside_(const t4a_nvrtc_root_snapshot *s, const char *name, size_t n) {
  char key[NAME_MAX + 1];
  if (n > NAME_MAX) return 0;
  memcpy(key, name, n);
  key[n] = '\0';
  const char *k = key;
  return bsearch(&k, s->parent_names, s->num_parent_names, sizeof *s->parent_names, name_cmp) !=
         NULL;
}

/* Adds the names in directory `dir` to the snapshot's parent names (unsorted). 0: unreadable. */
static int list_beside(t4a_nvrtc_root_snapshot *s, const char *dir, size_t *cap) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  struct dirent *e;
  int ok = 1;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (s->num_parent_names == *cap) {
      size_t nc = *cap ? *cap * 2 : 16;
      char **nn = t4a_host_realloc(s->parent_names, nc * sizeof *nn);
      if (nn == NULL) {
        ok = -1;
        break;
      }
      s->parent_names = nn;
      *cap = nc;
    }
    size_t n = strlen(e->d_name);
    char *c = t4a_host_malloc(n + 1);
    if (c == NULL) {
      ok = -1;
      break;
    }
    memcpy(c, e->d_name, n + 1);
    s->parent_names[s->num_parent_names++] = c;
  }
  closedir(d);
  return ok;
}

/* Lists what is beside the root: in "ROOT/.." (the kernel's, physical parent) and, when it is
 * another directory, in the lexical parent. Sorted, duplicates removed. */
static t4a_status list_parents(t4a_nvrtc_root_snapshot *s, const char *root, size_t rn) {
  char phys[PATH_MAX], lex[PATH_MAX];
  if (rn + 4 >= sizeof phys) return T4A_OK; /* parent_listed stays 0: climbing out is refused */
  memcpy(phys, root, rn);
  memcpy(phys + rn, "/..", 4);
  memcpy(lex, root, rn);
  lex[rn] = '\0';
  char *slash = strrchr(lex, '/');
  if (slash == NULL) {
    strcpy(lex, ".");
  } else if (slash == lex) {
    lex[1] = '\0';
  } else {
    *slash = '\0';
  }
  size_t cap = 0;
  int a = list_beside(s, phys, &cap);
  if (a < 0) return T4A_HOST_OUT_OF_MEMORY;
  struct stat sp, sl;
  int b = 1;
  if (stat(phys, &sp) == 0 && stat(lex, &sl) == 0 && sp.st_dev == sl.st_dev &&
      sp.st_ino == sl.st_ino) {
    s->parent_same = 1;
    s->parent_dev = (uint64_t)sp.st_dev;
    s->parent_ino = (uint64_t)sp.st_ino;
  } else {
    b = list_beside(s, lex, &cap);
    if (b < 0) return T4A_HOST_OUT_OF_MEMORY;
  }
  s->parent_listed = a > 0 && b > 0;
  qsort(s->parent_names, s->num_parent_names, sizeof *s->parent_names, name_cmp);
  size_t out = 0;
  for (size_t i = 0; i < s->num_parent_names; i++) {
    if (out > 0 && strcmp(s->parent_names[out - 1], s->parent_names[i]) == 0) {
      free(s->parent_names[i]);
    } else {
      s->parent_names[out++] = s->parent_names[i];
    }
  }
  s->num_parent_names = out;
  return T4A_OK;
}

static t4a_status walk_dir(walk *w, size_t len, size_t rel_start);

/* One entry of a directory: w->path[0..len) is its path. */
static t4a_status walk_entry(walk *w, int dfd, const char *name, size_t len, size_t rel_start) {
  struct stat st;
  uint32_t kind = 0;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return walk_io("stat", errno, w->path);
  if (S_ISLNK(st.st_mode)) {
    kind |= T4A_NVRTC_ROOT_LINK;
    if (fstatat(dfd, name, &st, 0) != 0) {
      int err = errno;
      if (err == ELOOP) {
        return WALK_INVALID("include root: symbolic link loop at %.100s, under %.140s",
                            rel_of(w), w->root);
      }
      if (err == ENOENT) {
        return WALK_INVALID(
            "include root: dangling symbolic link %.100s (its target could appear unseen), "
            "under %.120s",
            rel_of(w), w->root);
      }
      return walk_io("stat", err, w->path);
    }
  }
  const char *rel = w->path + rel_start;
  if (S_ISDIR(st.st_mode)) {
    for (size_t i = 0; i <= w->depth; i++) {
      if (w->stack_dev[i] == (uint64_t)st.st_dev && w->stack_ino[i] == (uint64_t)st.st_ino) {
        return WALK_INVALID(
            "include root: symbolic link loop at %.100s (it leads back to a directory above "
            "it), under %.100s",
            rel_of(w), w->root);
      }
    }
    if (w->depth + 1 >= ROOTS_MAX_DEPTH) {
      return t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_nvrtc_include_root", 0, NULL, 0,
                            "include root %.200s is deeper than %u directories at %.200s",
                            w->root, ROOTS_MAX_DEPTH, w->path);
    }
    t4a_status s = push_rec(w, rel, kind | T4A_NVRTC_ROOT_DIR, &st);
    if (s != T4A_OK) return s;
    w->dirs++;
    w->depth++;
    w->stack_dev[w->depth] = (uint64_t)st.st_dev;
    w->stack_ino[w->depth] = (uint64_t)st.st_ino;
    s = walk_dir(w, len, rel_start);
    w->depth--;
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    return WALK_INVALID("include root: %.100s is not a regular file or a directory, under %.120s",
                        rel_of(w), w->root);
  }
  t4a_status s = push_rec(w, rel, kind | T4A_NVRTC_ROOT_FILE, &st);
  if (s != T4A_OK) return s;
  w->files++;
  add_watch(w, w->path); /* before reading: an edit after this is an event */
  return hash_file(w, &w->recs[w->num - 1]);
}

/* Walks the directory at w->path[0..len) (watched, listed, entries sorted). */
static t4a_status walk_dir(walk *w, size_t len, size_t rel_start) {
  w->path[len] = '\0';
  add_watch(w, w->path);
  DIR *d = NULL;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EACCES;
  } else {
    d = opendir(w->path);
  }
  if (d == NULL) return walk_io("opendir", errno, w->path);
  char **names = NULL;
  size_t num = 0, cap = 0;
  t4a_status st = T4A_OK;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (num == cap) {
      size_t nc = cap ? cap * 2 : 32;
      char **nn = t4a_host_realloc(names, nc * sizeof *nn);
      if (nn == NULL) {
        st = T4A_HOST_OUT_OF_MEMORY;
        break;
      }
      names = nn;
      cap = nc;
    }
    size_t n = strlen(e->d_name);
    names[num] = t4a_host_malloc(n + 1);
    if (names[num] == NULL) {
      st = T4A_HOST_OUT_OF_MEMORY;
      break;
    }
    memcpy(names[num++], e->d_name, n + 1);
  }
  if (st == T4A_OK && errno != 0) st = walk_io("readdir", errno, w->path);
  /* names is NULL for an empty directory (qsort's pointer must not be). */
  if (st == T4A_OK && num > 1) qsort(names, num, sizeof *names, name_cmp);
  for (size_t i = 0; st == T4A_OK && i < num; i++) {
    size_t n = strlen(names[i]);
    if (len + 1 + n + 1 >= sizeof w->path) {
      st = t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_nvrtc_include_root", 0, NULL, 0,
                          "include root %.200s: a path is longer than PATH_MAX", w->root);
      break;
    }
    w->path[len] = '/';
    memcpy(w->path + len + 1, names[i], n + 1);
    size_t rs = rel_start <= len ? rel_start : len + 1;
    st = walk_entry(w, dirfd(d), names[i], len + 1 + n, rs);
    w->path[len] = '\0';
  }
  for (size_t i = 0; i < num; i++) free(names[i]);
  free(names);
  closedir(d);
  return st;
}

static void fingerprint_of(t4a_nvrtc_root_snapshot *s) {
  static const char magic[] = "t4a.nvrtc.root";
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, magic, sizeof magic - 1);
  uint8_t b[8];
  for (size_t i = 0; i < s->num; i++) {
    const t4a_nvrtc_root_rec *r = &s->recs[i];
    uint64_t n = strlen(r->rel);
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(n >> (8 * k));
    XXH3_128bits_update(&state, b, 8);
    XXH3_128bits_update(&state, r->rel, (size_t)n);
    for (int k = 0; k < 4; k++) b[k] = (uint8_t)(r->kind >> (8 * k));
    XXH3_128bits_update(&state, b, 4);
    if (r->kind & T4A_NVRTC_ROOT_FILE) XXH3_128bits_update(&state, r->hash, 16);
  }
  /* What is beside the root (see parent_names). */
  uint64_t m = s->parent_listed ? s->num_parent_names : UINT64_MAX;
  for (int k = 0; k < 8; k++) b[k] = (uint8_t)(m >> (8 * k));
  XXH3_128bits_update(&state, b, 8);
  for (size_t i = 0; i < s->num_parent_names; i++) {
    uint64_t n = strlen(s->parent_names[i]) + 1;
    XXH3_128bits_update(&state, s->parent_names[i], (size_t)n);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  memcpy(s->fp, c.digest, 16);
}

/* Walks `root` (old: records to reuse, may be NULL). */
static t4a_status walk_root(const char *root, const t4a_nvrtc_root_snapshot *old, int watch,
                            t4a_nvrtc_root_snapshot **out, int *all_watched) {
  *out = NULL;
  size_t rn = strlen(root);
  while (rn > 1 && root[rn - 1] == '/') rn--;
  struct stat st;
  if (stat(root, &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return WALK_INVALID("include root does not exist: %.200s", root);
    }
    if (err == ELOOP) return WALK_INVALID("include root is a symbolic link loop: %.200s", root);
    return walk_io("stat", err, root);
  }
  if (!S_ISDIR(st.st_mode)) return WALK_INVALID("include root is not a directory: %.200s", root);
  walk *w = t4a_host_calloc(1, sizeof *w);
  if (w == NULL) return T4A_HOST_OUT_OF_MEMORY;
  w->root = root;
  w->old = old;
  w->watch = watch && g_inotify >= 0;
  w->buf_cap = 1 << 16;
  w->buf = t4a_host_malloc(w->buf_cap);
  t4a_status s = w->buf != NULL ? T4A_OK : T4A_HOST_OUT_OF_MEMORY;
  if (s == T4A_OK && rn + 2 >= sizeof w->path) {
    s = WALK_INVALID("include root %.100s... is too long", root);
  }
  t4a_nvrtc_root_snapshot *snap = NULL;
  if (s == T4A_OK) {
    memcpy(w->path, root, rn);
    w->path[rn] = '\0';
    w->root_len = rn;
    w->stack_dev[0] = (uint64_t)st.st_dev;
    w->stack_ino[0] = (uint64_t)st.st_ino;
    watch_ancestors(w, root, rn);
    s = push_rec(w, "", T4A_NVRTC_ROOT_DIR, &st);
    if (s == T4A_OK) s = walk_dir(w, rn, rn + 1);
  }
  if (s == T4A_OK) {
    snap = t4a_host_calloc(1, sizeof *snap);
    char *path = snap != NULL ? t4a_host_malloc(strlen(root) + 1) : NULL;
    if (path == NULL) {
      free(snap);
      snap = NULL;
      s = T4A_HOST_OUT_OF_MEMORY;
    } else {
      strcpy(path, root);
      snap->path = path;
    }
  }
  if (s != T4A_OK) {
    for (size_t i = 0; i < w->num; i++) free(w->recs[i].rel);
    free(w->recs);
    free(w->buf);
    free(w);
    return s;
  }
  atomic_init(&snap->refs, 1);
  snap->recs = w->recs;
  snap->num = w->num;
  qsort(snap->recs, snap->num, sizeof *snap->recs, rec_cmp);
  for (size_t i = 0; i < snap->num; i++) snap->has_links |= (snap->recs[i].kind & T4A_NVRTC_ROOT_LINK) != 0;
  snap->files = w->files;
  snap->dirs = w->dirs;
  snap->files_hashed = w->hashed;
  for (size_t i = 0; i < snap->num; i++) snap->bytes += snap->recs[i].size * ((snap->recs[i].kind & T4A_NVRTC_ROOT_FILE) != 0);
  if (list_parents(snap, root, rn) != T4A_OK) {
    free(w->buf);
    free(w);
    snap_free(snap);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  fingerprint_of(snap);
  *all_watched = w->watch;
  atomic_fetch_add(&g_walks, 1);
  atomic_fetch_add(&g_files_hashed, w->hashed);
  free(w->buf);
  free(w);
  *out = snap;
  return T4A_OK;
}

/* ---- inotify ------------------------------------------------------------------------------ */

/* Reads every pending event; returns whether there was any (or the queue overflowed). Caller
 * holds g_mu. */
static int drain_events(void) {
  if (g_inotify < 0) return 0;
  int any = 0;
  union {
    struct inotify_event e;
    char b[8192];
  } u;
  for (;;) {
    ssize_t n = read(g_inotify, u.b, sizeof u.b);
    if (n > 0) {
      any = 1;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (any) g_epoch++;
  return any;
}

/* fork: a child shares the parent's inotify queue, and either reading it would take events the
 * other needs. So the child gets its own instance at its next use, with every memo revalidated. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void atfork_child(void) {
  if (g_inotify >= 0) close(g_inotify);
  g_inotify = -2;
  for (root_memo *m = g_memos; m != NULL; m = m->next) m->valid = 0;
  g_epoch++;
  pthread_mutex_unlock(&g_mu);
}

static void ensure_inotify(void) {
  static int registered;
  if (!registered) {
    registered = pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0;
    if (!registered) {
      g_inotify = -1; /* a child could share the queue: validate by metadata every time */
      return;
    }
  }
  if (g_inotify != -2) return;
  g_inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (g_inotify < 0) g_inotify = -1;
}

/* ---- The disk memo ------------------------------------------------------------------------ */

static void memo_path(const char *dir, const char *root, char *out, size_t size) {
  XXH64_hash_t h = XXH3_64bits(root, strlen(root));
  snprintf(out, size, "%s/roots-%016llx.t4r", dir, (unsigned long long)h);
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Loads the disk memo of `root` as a snapshot whose records can be reused (NULL: none usable).
 * Never fails the caller: any doubt is no memo. */
static t4a_nvrtc_root_snapshot *memo_load(const char *dir, const char *root) {
  char path[PATH_MAX];
  memo_path(dir, root, path, sizeof path);
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return NULL;
  struct stat st;
  uint8_t *buf = NULL;
  t4a_nvrtc_root_snapshot *s = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 40 ||
      (uint64_t)st.st_size > ((uint64_t)1 << 30)) {
    goto out;
  }
  size_t n = (size_t)st.st_size;
  buf = t4a_host_malloc(n);
  if (buf == NULL) goto out;
  size_t got = 0;
  while (got < n) {
    ssize_t r;
    if (t4a_fault_sim(T4A_FAULT_FILE_READ)) {
      r = -1;
    } else {
      r = read(fd, buf + got, n - got);
    }
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) goto out;
    got += (size_t)r;
  }
  if (memcmp(buf, ROOTS_MEMO_MAGIC, 8) != 0 || get64(buf + 8) != ROOTS_MEMO_FORMAT ||
      get64(buf + n - 8) != XXH3_64bits(buf, n - 8)) {
    goto out;
  }
  size_t pos = 16, end = n - 8;
  uint64_t pl = get64(buf + pos);
  pos += 8;
  if (pl != strlen(root) || pl > end - pos || memcmp(buf + pos, root, pl) != 0) goto out;
  pos += pl;
  if (end - pos < 8) goto out;
  uint64_t num = get64(buf + pos);
  pos += 8;
  if (num > ROOTS_MAX_RECORDS) goto out;
  s = t4a_host_calloc(1, sizeof *s);
  if (s == NULL) goto out;
  atomic_init(&s->refs, 1);
  s->recs = t4a_host_calloc(num ? num : 1, sizeof *s->recs);
  if (s->recs == NULL) goto bad;
  for (uint64_t i = 0; i < num; i++) {
    if (end - pos < 8) goto bad;
    uint64_t rl = get64(buf + pos);
    pos += 8;
    if (rl > PATH_MAX || end - pos < rl + 8 * 7 + 16) goto bad;
    t4a_nvrtc_root_rec *r = &s->recs[s->num];
    r->rel = t4a_host_malloc(rl + 1);
    if (r->rel == NULL) goto bad;
    memcpy(r->rel, buf + pos, rl);
    r->rel[rl] = '\0';
    s->num++;
    pos += rl;
    r->kind = (uint32_t)get64(buf + pos);
    r->dev = get64(buf + pos + 8);
    r->ino = get64(buf + pos + 16);
    r->size = get64(buf + pos + 24);
    r->mtime_ns = get64(buf + pos + 32);
    r->ctime_ns = get64(buf + pos + 40);
    r->taken_ns = get64(buf + pos + 48);
    memcpy(r->hash, buf + pos + 56, 16);
    pos += 72;
    if (i > 0 && strcmp(s->recs[i - 1].rel, r->rel) >= 0) goto bad; /* must be sorted */
  }
  if (pos != end) goto bad;
  goto out;
bad:
  snap_free(s);
  s = NULL;
out:
  free(buf);
  close(fd);
  return s;
}

/* Writes the snapshot's records as the disk memo of its root (atomically; failures ignored). */
static void memo_store(const char *dir, const t4a_nvrtc_root_snapshot *s) {
  size_t pl = strlen(s->path), n = 8 + 8 + 8 + pl + 8 + 8;
  for (size_t i = 0; i < s->num; i++) n += 8 + strlen(s->recs[i].rel) + 72;
  uint8_t *buf = t4a_host_malloc(n);
  if (buf == NULL) return;
  size_t pos = 0;
  memcpy(buf, ROOTS_MEMO_MAGIC, 8);
  put64(buf + 8, ROOTS_MEMO_FORMAT);
  put64(buf + 16, pl);
  memcpy(buf + 24, s->path, pl);
  pos = 24 + pl;
  put64(buf + pos, s->num);
  pos += 8;
  for (size_t i = 0; i < s->num; i++) {
    const t4a_nvrtc_root_rec *r = &s->recs[i];
    size_t rl = strlen(r->rel);
    put64(buf + pos, rl);
    memcpy(buf + pos + 8, r->rel, rl);
    pos += 8 + rl;
    put64(buf + pos, r->kind);
    put64(buf + pos + 8, r->dev);
    put64(buf + pos + 16, r->ino);
    put64(buf + pos + 24, r->size);
    put64(buf + pos + 32, r->mtime_ns);
    put64(buf + pos + 40, r->ctime_ns);
    put64(buf + pos + 48, r->taken_ns);
    memcpy(buf + pos + 56, r->hash, 16);
    pos += 72;
  }
  put64(buf + pos, XXH3_64bits(buf, pos));
  pos += 8;
  char path[PATH_MAX], tmp[PATH_MAX + 64];
  memo_path(dir, s->path, path, sizeof path);
  static atomic_ulong counter;
  snprintf(tmp, sizeof tmp, "%s/.t4a-tmp-roots-%ld-%lu", dir, (long)getpid(),
           atomic_fetch_add(&counter, 1));
  int fd = -1;
  if (!t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  }
  if (fd >= 0) {
    size_t off = 0;
    int ok = 1;
    while (ok && off < pos) {
      ssize_t w = t4a_fault_sim(T4A_FAULT_FILE_WRITE) ? -1 : write(fd, buf + off, pos - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ok = 0;
      else off += (size_t)w;
    }
    if (close(fd) != 0) ok = 0;
    if (!ok || t4a_fault_sim(T4A_FAULT_FILE_RENAME) || rename(tmp, path) != 0) unlink(tmp);
  }
  free(buf);
}

/* ---- Fingerprints ------------------------------------------------------------------------- */

static root_memo *memo_find(const char *root) {
  for (root_memo *m = g_memos; m != NULL; m = m->next) {
    if (strcmp(m->path, root) == 0) return m;
  }
  return NULL;
}

static void memo_evict_one(void) {
  root_memo **victim = NULL;
  for (root_memo **pp = &g_memos; *pp != NULL; pp = &(*pp)->next) {
    if (victim == NULL || (*pp)->used < (*victim)->used) victim = pp;
  }
  if (victim == NULL) return;
  root_memo *m = *victim;
  *victim = m->next;
  t4a_nvrtc_root_snapshot_release_(m->snap);
  free(m->path);
  free(m);
  g_num_memos--;
}

/* A root inside another root's valid memo (the toolkit's include/cccl inside include): its
 * snapshot is that memo's records under it, with no file system work; the same records a walk
 * would give, so the same fingerprint. NULL when there is none (or a link is on the way). */
static t4a_nvrtc_root_snapshot *derive_nested(const char *root) {
  size_t rn = strlen(root);
  for (root_memo *m = g_memos; m != NULL; m = m->next) {
    size_t mn = strlen(m->path);
    if (!m->valid || mn >= rn || memcmp(m->path, root, mn) != 0 || root[mn] != '/') continue;
    const char *sub = root + mn + 1;
    size_t sn = strlen(sub);
    if (sn == 0 || strchr(sub, '/') != NULL || strcmp(sub, ".") == 0 || strcmp(sub, "..") == 0) {
      continue; /* one level down, by a plain name */
    }
    const t4a_nvrtc_root_snapshot *ms = m->snap;
    const t4a_nvrtc_root_rec *top = t4a_nvrtc_root_find_(ms, sub);
    const t4a_nvrtc_root_rec *mtop = t4a_nvrtc_root_find_(ms, "");
    if (top == NULL || mtop == NULL || top->kind != T4A_NVRTC_ROOT_DIR) continue;
    t4a_nvrtc_root_snapshot *d = t4a_host_calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    atomic_init(&d->refs, 1);
    d->path = t4a_host_malloc(rn + 1);
    size_t lo = (size_t)(top - ms->recs), hi = lo + 1;
    while (hi < ms->num && strncmp(ms->recs[hi].rel, sub, sn) == 0 && ms->recs[hi].rel[sn] == '/') {
      hi++;
    }
    d->recs = t4a_host_calloc(hi - lo, sizeof *d->recs);
    size_t names = 0;
    for (size_t i = 0; i < ms->num; i++) names += ms->recs[i].rel[0] != '\0' && strchr(ms->recs[i].rel, '/') == NULL;
    d->parent_names = t4a_host_calloc(names ? names : 1, sizeof *d->parent_names);
    int ok = d->path != NULL && d->recs != NULL && d->parent_names != NULL;
    if (ok) memcpy(d->path, root, rn + 1);
    for (size_t i = lo; ok && i < hi; i++) {
      const t4a_nvrtc_root_rec *r = &ms->recs[i];
      const char *rel = i == lo ? "" : r->rel + sn + 1;
      t4a_nvrtc_root_rec *o = &d->recs[d->num];
      *o = *r;
      o->rel = t4a_host_malloc(strlen(rel) + 1);
      if (o->rel == NULL) {
        ok = 0;
        break;
      }
      strcpy(o->rel, rel);
      d->num++;
      if (r->kind & T4A_NVRTC_ROOT_FILE) {
        d->files++;
        d->bytes += r->size;
      } else if (i != lo) {
        d->dirs++;
      }
      d->has_links |= (r->kind & T4A_NVRTC_ROOT_LINK) != 0;
    }
    for (size_t i = 0; ok && i < ms->num; i++) {
      const char *rel = ms->recs[i].rel;
      if (rel[0] == '\0' || strchr(rel, '/') != NULL) continue;
      char *c = t4a_host_malloc(strlen(rel) + 1);
      if (c == NULL) {
        ok = 0;
        break;
      }
      strcpy(c, rel);
      d->parent_names[d->num_parent_names++] = c;
    }
    if (!ok) {
      snap_free(d);
      return NULL;
    }
    d->parent_listed = 1;
    d->parent_same = 1;
    d->parent_dev = mtop->dev;
    d->parent_ino = mtop->ino;
    fingerprint_of(d);
    return d;
  }
  return NULL;
}

/* Fingerprints one root; caller holds g_mu and has drained the events. */
static t4a_status fingerprint_locked(const char *root, const char *memo_dir,
                                     t4a_nvrtc_root_snapshot **out, t4a_nvrtc_root_source *how) {
  *out = NULL;
  root_memo *m = memo_find(root);
  g_use++;
  if (m != NULL && m->valid) {
    m->used = g_use;
    atomic_fetch_add(&m->snap->refs, 1);
    *out = m->snap;
    *how = T4A_NVRTC_ROOT_FROM_MEMORY;
    return T4A_OK;
  }
  t4a_nvrtc_root_snapshot *nested = derive_nested(root);
  if (nested != NULL) {
    if (m == NULL && g_num_memos < ROOTS_MAX_MEMOS) {
      m = t4a_host_calloc(1, sizeof *m);
      char *p = m != NULL ? t4a_host_malloc(strlen(root) + 1) : NULL;
      if (p == NULL) {
        free(m);
        m = NULL;
      } else {
        strcpy(p, root);
        m->path = p;
        m->next = g_memos;
        g_memos = m;
        g_num_memos++;
      }
    }
    if (m != NULL) {
      t4a_nvrtc_root_snapshot_release_(m->snap);
      m->snap = nested;
      m->valid = 1; /* as valid as the memo it came from: any event drops both */
      m->used = g_use;
      atomic_fetch_add(&nested->refs, 1);
    }
    *out = nested;
    *how = T4A_NVRTC_ROOT_FROM_MEMORY;
    return T4A_OK;
  }
  t4a_nvrtc_root_snapshot *disk = NULL;
  const t4a_nvrtc_root_snapshot *old = m != NULL ? m->snap : NULL;
  *how = old != NULL ? T4A_NVRTC_ROOT_FROM_REVALIDATED : T4A_NVRTC_ROOT_FROM_WALK;
  if (old == NULL && memo_dir != NULL) {
    disk = memo_load(memo_dir, root);
    if (disk != NULL) {
      old = disk;
      *how = T4A_NVRTC_ROOT_FROM_DISK;
    }
  }
  t4a_nvrtc_root_snapshot *snap = NULL;
  int watched = 0;
  t4a_status st = T4A_OK;
  for (int attempt = 0;; attempt++) {
    st = walk_root(root, old, 1, &snap, &watched);
    if (st != T4A_OK) break;
    if (!drain_events()) break; /* nothing changed while the tree was read */
    for (root_memo *o = g_memos; o != NULL; o = o->next) o->valid = 0;
    if (attempt + 1 >= ROOTS_WALK_TRIES) {
      /* Still changing: the fingerprint is good for this call (every file was hashed after its
       * watch was placed) but is not memoised as valid. */
      watched = 0;
      break;
    }
    t4a_nvrtc_root_snapshot_release_(snap);
    snap = NULL;
  }
  if (st == T4A_OK && memo_dir != NULL &&
      (disk == NULL || snap->files_hashed > 0 || disk->num != snap->num)) {
    memo_store(memo_dir, snap);
  }
  t4a_nvrtc_root_snapshot_release_(disk);
  if (st != T4A_OK) return st;
  if (m == NULL) {
    if (g_num_memos >= ROOTS_MAX_MEMOS) memo_evict_one();
    m = t4a_host_calloc(1, sizeof *m);
    char *p = m != NULL ? t4a_host_malloc(strlen(root) + 1) : NULL;
    if (p == NULL) {
      free(m);
      *out = snap; /* correct, just not memoised */
      return T4A_OK;
    }
    strcpy(p, root);
    m->path = p;
    m->next = g_memos;
    g_memos = m;
    g_num_memos++;
  }
  t4a_nvrtc_root_snapshot_release_(m->snap);
  m->snap = snap;
  m->valid = watched;
  m->used = g_use;
  atomic_fetch_add(&snap->refs, 1);
  *out = snap;
  return T4A_OK;
}

t4a_status t4a_nvrtc_roots_fingerprint_(const char *const *roots, size_t num, const char *memo_dir,
                                        t4a_nvrtc_root_snapshot **out,
                                        t4a_nvrtc_root_source *how) {
  for (size_t i = 0; i < num; i++) out[i] = NULL;
  pthread_mutex_lock(&g_mu);
  ensure_inotify();
  if (drain_events()) {
    for (root_memo *m = g_memos; m != NULL; m = m->next) m->valid = 0;
  }
  t4a_status st = T4A_OK;
  for (size_t i = 0; st == T4A_OK && i < num; i++) {
    t4a_nvrtc_root_source h = T4A_NVRTC_ROOT_FROM_MEMORY;
    st = fingerprint_locked(roots[i], memo_dir, &out[i], &h);
    if (how != NULL) how[i] = h;
  }
  pthread_mutex_unlock(&g_mu);
  if (st != T4A_OK) {
    for (size_t i = 0; i < num; i++) {
      t4a_nvrtc_root_snapshot_release_(out[i]);
      out[i] = NULL;
    }
  }
  return st;
}

int t4a_nvrtc_roots_unchanged_(t4a_nvrtc_root_snapshot *const *snaps, size_t num,
                               const char *const *roots, const char *memo_dir) {
  t4a_nvrtc_root_snapshot *now[T4A_NVRTC_MAX_ROOTS];
  t4a_error saved;
  t4a_error_last(&saved);
  if (t4a_nvrtc_roots_fingerprint_(roots, num, memo_dir, now, NULL) != T4A_OK) {
    t4a_nvrtc_error_restore(&saved);
    return 0;
  }
  int same = 1;
  for (size_t i = 0; i < num; i++) {
    same &= memcmp(now[i]->fp, snaps[i]->fp, 16) == 0;
    t4a_nvrtc_root_snapshot_release_(now[i]);
  }
  return same;
}

void t4a_nvrtc_roots_forget_(void) {
  pthread_mutex_lock(&g_mu);
  while (g_memos != NULL) memo_evict_one();
  if (g_inotify >= 0) close(g_inotify);
  g_inotify = -2;
  g_epoch++;
  pthread_mutex_unlock(&g_mu);
}

uint64_t t4a_nvrtc_roots_epoch_(const char *const *roots, size_t num) {
  uint64_t e = 0;
  pthread_mutex_lock(&g_mu);
  if (g_inotify >= 0) {
    if (drain_events()) {
      for (root_memo *m = g_memos; m != NULL; m = m->next) m->valid = 0;
    }
    e = g_epoch;
    for (size_t i = 0; i < num && e != 0; i++) {
      root_memo *m = memo_find(roots[i]);
      if (m == NULL || !m->valid) e = 0;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return e;
}

uint64_t t4a_nvrtc_roots_walks_(void) { return atomic_load(&g_walks); }
uint64_t t4a_nvrtc_roots_files_hashed_(void) { return atomic_load(&g_files_hashed); }

t4a_status t4a_nvrtc_root_fingerprint(const char *root, const char *memo_dir,
                                      t4a_nvrtc_root_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (root == NULL || out == NULL || root[0] == '\0') {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_root_fingerprint", 0, NULL, 0,
                          "root or out is NULL, or root is empty");
  }
  t4a_nvrtc_root_snapshot *s = NULL;
  t4a_nvrtc_root_source how = T4A_NVRTC_ROOT_FROM_MEMORY;
  t4a_status st = t4a_nvrtc_roots_fingerprint_(&root, 1, memo_dir, &s, &how);
  if (st != T4A_OK) return st;
  memcpy(out->fingerprint, s->fp, 16);
  out->files = s->files;
  out->directories = s->dirs;
  out->bytes = s->bytes;
  out->files_hashed = how == T4A_NVRTC_ROOT_FROM_MEMORY ? 0 : s->files_hashed;
  out->source = how;
  t4a_nvrtc_root_snapshot_release_(s);
  return T4A_OK;
}

const char *t4a_nvrtc_root_source_name(t4a_nvrtc_root_source source) {
  switch (source) {
    case T4A_NVRTC_ROOT_FROM_MEMORY:
      return "memory";
    case T4A_NVRTC_ROOT_FROM_REVALIDATED:
      return "revalidated";
    case T4A_NVRTC_ROOT_FROM_DISK:
      return "disk memo";
    case T4A_NVRTC_ROOT_FROM_WALK:
      return "walked";
  }
  return "unknown";
}

/* ---- The toolkit -------------------------------------------------------------------------- */

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Takes `base` (a toolkit folder) if base/include/cuda_fp16.h... exists: fills out. */
static int take_toolkit(const char *base, t4a_nvrtc_toolkit *out, const char *from) {
  char probe[PATH_MAX];
  size_t used = strlen(out->looked);
  snprintf(out->looked + used, sizeof out->looked - used, "%s%s (%s)", used ? ", " : "", base,
           from);
  if (snprintf(probe, sizeof probe, "%s/include/cuda_runtime.h", base) >= (int)sizeof probe) {
    return 0;
  }
  struct stat st;
  if (stat(probe, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  snprintf(out->include, sizeof out->include, "%s/include", base);
  out->roots[0] = out->include;
  out->num_roots = 1;
  if (snprintf(out->cccl, sizeof out->cccl, "%s/include/cccl", base) < (int)sizeof out->cccl &&
      is_dir(out->cccl)) {
    out->roots[1] = out->cccl;
    out->num_roots = 2;
  } else {
    out->cccl[0] = '\0';
  }
  snprintf(out->from, sizeof out->from, "%s", from);
  return 1;
}

t4a_status t4a_nvrtc_toolkit_find(const char *libnvrtc_path, t4a_nvrtc_toolkit *out) {
  if (out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_toolkit_find", 0, NULL, 0,
                          "out is NULL");
  }
  memset(out, 0, sizeof *out);
  const char *env = getenv("T4A_CUDA_PATH");
  if (env != NULL && env[0] != '\0' && take_toolkit(env, out, "T4A_CUDA_PATH")) return T4A_OK;
  env = getenv("CUDA_PATH");
  if (env != NULL && env[0] != '\0' && take_toolkit(env, out, "CUDA_PATH")) return T4A_OK;
  if (take_toolkit("/usr/local/cuda", out, "default")) return T4A_OK;
  if (libnvrtc_path != NULL && libnvrtc_path[0] != '\0') {
    char real[PATH_MAX];
    if (realpath(libnvrtc_path, real) != NULL) {
      /* <toolkit>/lib64/libnvrtc.so.13 or <toolkit>/targets/<arch>/lib/libnvrtc.so.13 */
      for (int up = 0; up < 2; up++) { /* <toolkit>/lib64/libnvrtc.so.13: the file, lib64 */
        char *slash = strrchr(real, '/');
        if (slash == NULL || slash == real) break;
        *slash = '\0';
      }
      if (real[0] == '/' && real[1] != '\0' && take_toolkit(real, out, "beside libnvrtc")) {
        return T4A_OK;
      }
    }
  }
  return t4a_error_set_(T4A_UNSUPPORTED, "t4a_nvrtc_toolkit_find", 0, NULL, 0,
                        "no CUDA toolkit headers (include/cuda_runtime.h) found; looked in %.400s",
                        out->looked);
}
