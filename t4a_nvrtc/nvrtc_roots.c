/* Include roots: the file-system probes of a miss's include check, the inotify watches that keep
 * an include manifest known valid, and the toolkit's roots found by default.
 *
 * Probing. The include check of a cached compile that has no valid manifest resolves each include
 * by looking at the paths NVRTC would open, in its search order (nvrtc_cacheable.c): a path is
 * stat'ed; a regular file is read whole and hashed (XXH3-128), the bytes read being those the
 * check scans; a directory or nothing opens nothing. Results are memoised per check (a path is
 * looked at once). No tree is walked and no directory is listed: the cost follows what the
 * includes reach, not the size of the roots.
 *
 * Watches. Before a path is looked at, every directory on the way to it (each prefix of its
 * spelling, from "/" down; a relative path gets none, as chdir moves it without an event, as the kernel resolves them: a symbolic link on the way is
 * watched at its target, and the link itself is an entry of the directory above) gets an inotify
 * watch, and a file gets its own before it is read (its watch sees an edit made through a hard
 * link elsewhere). Any event advances the epoch. A check whose watches were all placed and that
 * saw no event from its first look to its end returns the epoch it started at: its manifest is
 * known valid while the epoch stays there. Without inotify (no instance, watch limit) a manifest
 * is validated by stat at each lookup: slower, equally sound.
 *
 * Fault points: FILE_OPEN (opening a file to read), FILE_READ (reading it), HOST_MALLOC. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

/* A path in a message: its last n bytes (the file names are at the end), "..." before them when
 * cut, so a long root's prefix never pushes the name out of the message. Two format args: %s%s. */
#define PATH_TAIL(p, n) (strlen(p) > (n) ? "..." : ""), (strlen(p) > (n) ? (p) + strlen(p) - (n) : (p))

#define ROOTS_MAX_PROBES (1u << 20)
#define ROOTS_WATCH_MASK                                                                     \
  (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_DELETE_SELF |         \
   IN_MOVE_SELF | IN_MOVED_FROM | IN_MOVED_TO | IN_MASK_ADD)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_inotify = -2; /* -2: not tried; -1: unavailable */
static _Atomic uint64_t g_checks, g_files_hashed;
/* Advances with every event, fork and forget; under g_mu. */
static uint64_t g_epoch = 1;

static uint64_t now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ts_ns(const struct timespec *t) {
  return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
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
 * other needs. So the child gets its own instance at its next check, and its epoch moves on. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void atfork_child(void) {
  if (g_inotify >= 0) close(g_inotify);
  g_inotify = -2;
  g_epoch++;
  pthread_mutex_unlock(&g_mu);
}

/* Caller holds g_mu. */
static void ensure_inotify(void) {
  static int registered;
  if (!registered) {
    registered = pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0;
    if (!registered) {
      g_inotify = -1; /* a child could share the queue: validate by stat every time */
      return;
    }
  }
  if (g_inotify != -2) return;
  g_inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (g_inotify < 0) g_inotify = -1;
}

uint64_t t4a_nvrtc_roots_epoch_(const char *const *roots, size_t num) {
  (void)roots;
  (void)num;
  pthread_mutex_lock(&g_mu);
  uint64_t e = 0;
  if (g_inotify >= 0) {
    drain_events();
    e = g_epoch;
  }
  pthread_mutex_unlock(&g_mu);
  return e;
}

/* Watches path[0..n) (a NUL-terminated copy is made). 1: placed; 0: nothing there (ENOENT,
 * ENOTDIR: the directory above, watched, sees it appear); -1: failed otherwise (limit). */
static int watch_path(const char *path) {
  pthread_mutex_lock(&g_mu);
  int rc = -1;
  if (g_inotify >= 0) {
    if (inotify_add_watch(g_inotify, path, ROOTS_WATCH_MASK) >= 0) {
      rc = 1;
    } else if (errno == ENOENT || errno == ENOTDIR) {
      rc = 0;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void t4a_nvrtc_roots_forget_(void) {
  pthread_mutex_lock(&g_mu);
  if (g_inotify >= 0) close(g_inotify);
  g_inotify = -2;
  g_epoch++;
  pthread_mutex_unlock(&g_mu);
}

uint64_t t4a_nvrtc_roots_checks_(void) { return atomic_load(&g_checks); }
uint64_t t4a_nvrtc_roots_files_hashed_(void) { return atomic_load(&g_files_hashed); }

/* ---- The prober --------------------------------------------------------------------------- */

void t4a_nvrtc_prober_init_(t4a_nvrtc_prober *pr) {
  memset(pr, 0, sizeof *pr);
  pthread_mutex_lock(&g_mu);
  ensure_inotify();
  if (g_inotify >= 0) {
    drain_events();
    pr->epoch = g_epoch;
    pr->watch_ok = 1;
  }
  pthread_mutex_unlock(&g_mu);
  atomic_fetch_add(&g_checks, 1);
}

uint64_t t4a_nvrtc_prober_finish_(t4a_nvrtc_prober *pr) {
  pthread_mutex_lock(&g_mu);
  uint64_t e = 0;
  if (g_inotify >= 0 && pr->watch_ok && pr->epoch != 0) {
    drain_events();
    if (g_epoch == pr->epoch) e = pr->epoch;
  }
  pthread_mutex_unlock(&g_mu);
  return e;
}

void t4a_nvrtc_prober_free_(t4a_nvrtc_prober *pr) {
  for (size_t i = 0; i < pr->cap; i++) {
    t4a_nvrtc_probed *r = pr->slots[i];
    if (r == NULL) continue;
    free(r->text);
    free(r->path);
    free(r);
  }
  free(pr->slots);
  for (size_t i = 0; i < pr->wcap; i++) free(pr->watched[i]);
  free(pr->watched);
  free(pr->watched_key);
  memset(pr, 0, sizeof *pr);
}

#define PROBE_INVALID(...) \
  t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_include_root", 0, NULL, 0, __VA_ARGS__)
/* What the key cannot see on an include's path (not a bad root or file): the include check's
 * refusals, which a cache with compile_uncacheable compiles uncached. */
#define PROBE_UNSEEN(st, ...) t4a_error_set_(st, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0, __VA_ARGS__)

static t4a_status probe_io(const char *what, int err, const char *path) {
  return t4a_error_set_(T4A_IO, what, err, NULL, 0, "include root: cannot %s (%s): %s%s", what,
                        strerror(err), PATH_TAIL(path, 160));
}

/* Whether directory dir[0..n) was watched by this check already; marks it. -1: no memory. */
static int watched_before(t4a_nvrtc_prober *pr, const char *dir, size_t n) {
  uint64_t k = XXH3_64bits(dir, n);
  if (2 * (pr->wnum + 1) > pr->wcap) {
    size_t cap = pr->wcap ? pr->wcap * 2 : 64;
    char **w = t4a_host_calloc(cap, sizeof *w);
    uint64_t *wk = w != NULL ? t4a_host_calloc(cap, sizeof *wk) : NULL;
    if (wk == NULL) {
      free(w);
      return -1;
    }
    for (size_t i = 0; i < pr->wcap; i++) {
      if (pr->watched[i] == NULL) continue;
      size_t j = (size_t)pr->watched_key[i] & (cap - 1);
      while (w[j] != NULL) j = (j + 1) & (cap - 1);
      w[j] = pr->watched[i];
      wk[j] = pr->watched_key[i];
    }
    free(pr->watched);
    free(pr->watched_key);
    pr->watched = w;
    pr->watched_key = wk;
    pr->wcap = cap;
  }
  size_t j = (size_t)k & (pr->wcap - 1);
  while (pr->watched[j] != NULL) {
    if (pr->watched_key[j] == k && strlen(pr->watched[j]) == n &&
        memcmp(pr->watched[j], dir, n) == 0) {
      return 1;
    }
    j = (j + 1) & (pr->wcap - 1);
  }
  char *c = t4a_host_malloc(n + 1);
  if (c == NULL) return -1;
  memcpy(c, dir, n);
  c[n] = '\0';
  pr->watched[j] = c;
  pr->watched_key[j] = k;
  pr->wnum++;
  return 0;
}

static t4a_status watch_ancestors_at(t4a_nvrtc_prober *pr, const char *path, size_t n, int depth);

/* A settling check notes what it looked at (see t4a_nvrtc_prober_settled_). */
static void settle_note(t4a_nvrtc_prober *pr, const struct stat *st) {
  uint64_t c = ts_ns(&st->st_ctim);
  if (pr->settle && c > pr->newest_ns) pr->newest_ns = c;
}

/* A path the walk cannot follow: no epoch, and not settled. */
static void walk_lost(t4a_nvrtc_prober *pr) {
  pr->watch_ok = 0;
  pr->settle_lost = 1;
}

static int walking(const t4a_nvrtc_prober *pr) {
  return pr->watch_ok || (pr->settle && !pr->settle_lost);
}

int t4a_nvrtc_prober_settled_(const t4a_nvrtc_prober *pr, uint64_t before_ns) {
  return pr->settle && !pr->settle_lost && pr->newest_ns < before_ns;
}

/* A prefix that is a symbolic link: inotify watches what it resolves to, not the directories
 * that hold the rest of the chain or the target's ancestors, where a retargeted link or a
 * replaced folder changes what the path reaches. So the link's target (relative to the link's
 * folder) gets the same treatment: every directory on its way is watched, links in it followed,
 * at most 8 links deep; beyond that, or when the link cannot be read, no
 * epoch. */
static t4a_status watch_link_target(t4a_nvrtc_prober *pr, const char *link, size_t n, int depth) {
  char target[PATH_MAX], full[PATH_MAX];
  ssize_t t = readlink(link, target, sizeof target - 1);
  if (t <= 0 || depth >= 8) {
    walk_lost(pr);
    return T4A_OK;
  }
  target[t] = '\0';
  size_t len;
  if (target[0] == '/') {
    len = (size_t)t;
    memcpy(full, target, len + 1);
  } else {
    size_t d = n;
    while (d > 0 && link[d - 1] != '/') d--;
    if (d + (size_t)t >= sizeof full) {
      walk_lost(pr);
      return T4A_OK;
    }
    memcpy(full, link, d);
    memcpy(full + d, target, (size_t)t + 1);
    len = d + (size_t)t;
  }
  /* The target's own directory is watched through the link; its ancestors here. A trailing
   * '/' makes watch_ancestors_at reach the target itself as a prefix too (its lstat: a link to
   * a link is followed). */
  if (len + 1 >= sizeof full) {
    walk_lost(pr);
    return T4A_OK;
  }
  full[len] = '/';
  full[len + 1] = '\0';
  return watch_ancestors_at(pr, full, len + 1, depth + 1);
}

/* Watches every directory on the way to path (NUL-terminated, n bytes): "/" or ".", then each
 * prefix ending before a '/', top down, stopping at the first that does not exist; the targets
 * of symbolic links on the way too (watch_link_target). A settling check notes each one's change
 * time as well, also where it watches nothing. */
static t4a_status watch_ancestors(t4a_nvrtc_prober *pr, const char *path, size_t n) {
  return watch_ancestors_at(pr, path, n, 0);
}

static t4a_status watch_ancestors_at(t4a_nvrtc_prober *pr, const char *path, size_t n, int depth) {
  if (!walking(pr)) return T4A_OK;
  char buf[PATH_MAX];
  if (n >= sizeof buf) return T4A_OK; /* refused by the caller */
  if (path[0] != '/') {
    /* A relative path resolves from the working directory, which chdir changes without an
     * event or a change time: no epoch (the manifest is validated by stat at each lookup), and
     * not settled. */
    walk_lost(pr);
    return T4A_OK;
  }
  int w = watched_before(pr, "/", 1);
  if (w < 0) return T4A_HOST_OUT_OF_MEMORY;
  if (w == 0) {
    if (pr->watch_ok && watch_path("/") != 1) pr->watch_ok = 0;
    struct stat rs;
    if (pr->settle && lstat("/", &rs) != 0) pr->settle_lost = 1;
    if (pr->settle && !pr->settle_lost) settle_note(pr, &rs);
  }
  for (size_t i = 1; i < n && walking(pr); i++) {
    if (path[i] != '/' || path[i - 1] == '/') continue;
    w = watched_before(pr, path, i);
    if (w < 0) return T4A_HOST_OUT_OF_MEMORY;
    if (w == 1) continue;
    memcpy(buf, path, i);
    buf[i] = '\0';
    int rc = pr->watch_ok ? watch_path(buf) : 1; /* 1: watched, or not watching */
    struct stat ls;
    int lrc = lstat(buf, &ls);
    int lerr = errno;
    if (lrc == 0) settle_note(pr, &ls);
    if (rc == 0) {
      /* Nothing there: the directory above sees it appear, unless it is a dangling symbolic
       * link, whose target could appear where no watch is. */
      if (lrc == 0 && S_ISLNK(ls.st_mode)) pr->watch_ok = 0;
      if (lrc == 0 && S_ISLNK(ls.st_mode) && pr->settle) {
        t4a_status st = watch_link_target(pr, buf, i, depth); /* its folder's change time */
        if (st != T4A_OK) return st;
      }
      break;
    }
    if (rc < 0) pr->watch_ok = 0;
    if (lrc != 0) {
      if (rc == 1) pr->watch_ok = 0;
      /* nothing there (the folder above was noted), else not followed */
      if (lerr != ENOENT && lerr != ENOTDIR) pr->settle_lost = 1;
      break;
    }
    if (S_ISLNK(ls.st_mode)) {
      t4a_status st = watch_link_target(pr, buf, i, depth);
      if (st != T4A_OK) return st;
    }
  }
  return T4A_OK;
}

/* Watches a file (NUL-terminated path, n bytes) as read: the inode it resolves to and, when the
 * path itself is a symbolic link, what holds its target (watch_link_target). link: whether the
 * path is one, or -1 when not known (an lstat tells). */
static t4a_status watch_file(t4a_nvrtc_prober *pr, const char *path, size_t n, int link) {
  if (watch_path(path) != 1) {
    pr->watch_ok = 0;
    return T4A_OK;
  }
  if (link < 0) {
    struct stat ls;
    if (lstat(path, &ls) != 0) {
      pr->watch_ok = 0;
      return T4A_OK;
    }
    link = S_ISLNK(ls.st_mode);
  }
  return link ? watch_link_target(pr, path, n, 0) : T4A_OK;
}

static t4a_nvrtc_probed *memo_find(const t4a_nvrtc_prober *pr, const char *path, size_t n,
                                   uint64_t k) {
  if (pr->cap == 0) return NULL;
  size_t j = (size_t)k & (pr->cap - 1);
  while (pr->slots[j] != NULL) {
    const t4a_nvrtc_probed *r = pr->slots[j];
    if (r->key == k && r->path_len == n && memcmp(r->path, path, n) == 0) return pr->slots[j];
    j = (j + 1) & (pr->cap - 1);
  }
  return NULL;
}

static t4a_status memo_insert(t4a_nvrtc_prober *pr, t4a_nvrtc_probed *r) {
  if (pr->num >= ROOTS_MAX_PROBES) {
    return PROBE_UNSEEN(T4A_LIMIT_EXCEEDED,
                        "the includes probe more than %u paths under the include roots",
                        ROOTS_MAX_PROBES);
  }
  if (2 * (pr->num + 1) > pr->cap) {
    size_t cap = pr->cap ? pr->cap * 2 : 256;
    t4a_nvrtc_probed **s = t4a_host_calloc(cap, sizeof *s);
    if (s == NULL) return T4A_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < pr->cap; i++) {
      if (pr->slots[i] == NULL) continue;
      size_t j = (size_t)pr->slots[i]->key & (cap - 1);
      while (s[j] != NULL) j = (j + 1) & (cap - 1);
      s[j] = pr->slots[i];
    }
    free(pr->slots);
    pr->slots = s;
    pr->cap = cap;
  }
  size_t j = (size_t)r->key & (pr->cap - 1);
  while (pr->slots[j] != NULL) j = (j + 1) & (pr->cap - 1);
  pr->slots[j] = r;
  pr->num++;
  return T4A_OK;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void t4a_nvrtc_populate_(void *buf, size_t bytes) {
  if (buf == NULL || bytes < 65536) return;
  long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0) return;
  uintptr_t a = ((uintptr_t)buf + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
  uintptr_t e = ((uintptr_t)buf + bytes) & ~((uintptr_t)pg - 1);
  if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

/* Reads the regular file at path into r (text, hash, metadata of the open file). */
static t4a_status read_file(t4a_nvrtc_prober *pr, const char *path, t4a_nvrtc_probed *r) {
  r->taken_ns = now_realtime_ns();
  int fd = -1;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EACCES;
  } else {
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  }
  if (fd < 0) return probe_io("open", errno, path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return probe_io("stat", err, path);
  }
  if (!S_ISREG(st.st_mode)) { /* replaced between the stat and the open */
    close(fd);
    return t4a_error_set_(T4A_BUSY, "t4a_nvrtc_include_root", 0, NULL, 0,
                          "%s%s changed while the request was checked: try again", PATH_TAIL(path, 180));
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = t4a_host_malloc(cap + 1);
  t4a_status s = buf != NULL ? T4A_OK : T4A_HOST_OUT_OF_MEMORY;
  t4a_nvrtc_populate_(buf, cap);
  while (s == T4A_OK) {
    if (n == cap) {
      char *nb = t4a_host_realloc(buf, cap * 2 + 1);
      if (nb == NULL) {
        s = T4A_HOST_OUT_OF_MEMORY;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got;
    if (t4a_fault_sim(T4A_FAULT_FILE_READ)) {
      errno = EIO;
      got = -1;
    } else {
      got = read(fd, buf + n, cap - n);
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      s = probe_io("read", errno, path);
      break;
    }
    if (got == 0) break;
    n += (size_t)got;
    /* A regular file's read stops short only at its end: at the size fstat gave, no read is
     * needed to see the end (a file grown since fills the spare byte and is read on). */
    if (n == (size_t)st.st_size && n < cap) break;
  }
  close(fd);
  if (s != T4A_OK) {
    free(buf);
    return s;
  }
  buf[n] = '\0';
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(buf, n));
  memcpy(r->hash, c.digest, 16);
  r->text = buf;
  r->text_bytes = n;
  r->dev = (uint64_t)st.st_dev;
  r->ino = (uint64_t)st.st_ino;
  r->size = (uint64_t)st.st_size;
  r->mtime_ns = ts_ns(&st.st_mtim);
  r->ctime_ns = ts_ns(&st.st_ctim);
  settle_note(pr, &st);
  pr->files_read++;
  pr->bytes_read += n;
  atomic_fetch_add(&g_files_hashed, 1);
  return T4A_OK;
}

t4a_status t4a_nvrtc_probe_(t4a_nvrtc_prober *pr, const char *path, size_t n, int root,
                            t4a_nvrtc_probed **out) {
  *out = NULL;
  if (n >= PATH_MAX) {
    return PROBE_UNSEEN(T4A_LIMIT_EXCEEDED,
                        "an include resolves to a path longer than PATH_MAX: %s%s",
                        PATH_TAIL(path, 180));
  }
  uint64_t k = XXH3_64bits(path, n);
  t4a_nvrtc_probed *r = memo_find(pr, path, n, k);
  if (r != NULL) {
    *out = r;
    return T4A_OK;
  }
  r = t4a_host_calloc(1, sizeof *r);
  char *p = r != NULL ? t4a_host_malloc(n + 1) : NULL;
  if (p == NULL) {
    free(r);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  memcpy(p, path, n);
  p[n] = '\0';
  r->path = p;
  r->path_len = n;
  r->key = k;
  r->root = root;
  t4a_status s = watch_ancestors(pr, p, n);
  struct stat st;
  int rc = -1, err = 0, link = 0;
  if (s == T4A_OK) {
    /* The path's own entry first (an absent path or a plain file costs one call); a symbolic
     * link is then followed. */
    rc = lstat(p, &st);
    err = errno;
    if (rc == 0) settle_note(pr, &st);
    if (rc == 0 && S_ISLNK(st.st_mode)) {
      link = 1;
      if (pr->settle) { /* the folders on the way to its target */
        t4a_status w = watch_link_target(pr, p, n, 0);
        if (w != T4A_OK) s = w;
      }
      rc = stat(p, &st);
      err = errno;
      if (rc == 0) settle_note(pr, &st);
    }
    pr->stats++;
  }
  if (s != T4A_OK) {
    /* failed above */
  } else if (rc != 0 && (err == ENOENT || err == ENOTDIR)) {
    if (err == ENOENT && link) {
      s = PROBE_UNSEEN(T4A_INVALID_ARGUMENT,
                       "include root: dangling symbolic link %s%s (its target could appear unseen)",
                       PATH_TAIL(p, 150));
    } else {
      r->kind = T4A_NVRTC_PROBED_ABSENT;
    }
  } else if (rc != 0 && err == ELOOP) {
    s = PROBE_INVALID("include root: symbolic link loop at %s%s", PATH_TAIL(p, 180));
  } else if (rc != 0 && err == ENAMETOOLONG) {
    r->kind = T4A_NVRTC_PROBED_ABSENT; /* opens nothing */
  } else if (rc != 0) {
    s = probe_io("stat", err, p);
  } else if (S_ISDIR(st.st_mode)) {
    r->kind = T4A_NVRTC_PROBED_DIR;
  } else if (!S_ISREG(st.st_mode)) {
    s = PROBE_INVALID("include root: %s%s is not a regular file or a directory", PATH_TAIL(p, 150));
  } else {
    r->kind = T4A_NVRTC_PROBED_FILE;
    if (pr->watch_ok) { /* before reading */
      t4a_status w = watch_file(pr, p, n, link);
      if (w != T4A_OK) return w;
    }
    s = read_file(pr, p, r);
  }
  if (s == T4A_OK) s = memo_insert(pr, r);
  if (s != T4A_OK) {
    free(r->text);
    free(r->path);
    free(r);
    return s;
  }
  *out = r;
  return T4A_OK;
}

int t4a_nvrtc_prober_resume_(t4a_nvrtc_prober *pr, uint64_t epoch) {
  memset(pr, 0, sizeof *pr);
  pthread_mutex_lock(&g_mu);
  int ok = g_inotify >= 0 && epoch != 0;
  pthread_mutex_unlock(&g_mu);
  pr->epoch = epoch;
  pr->watch_ok = ok;
  return ok;
}

t4a_status t4a_nvrtc_prober_watch_(t4a_nvrtc_prober *pr, const char *path, size_t n, int file) {
  char p[PATH_MAX];
  if (n >= sizeof p) {
    pr->watch_ok = 0;
    return T4A_OK;
  }
  memcpy(p, path, n);
  p[n] = '\0';
  t4a_status st = watch_ancestors(pr, p, n);
  if (st == T4A_OK && file && pr->watch_ok) st = watch_file(pr, p, n, -1);
  return st;
}

t4a_status t4a_nvrtc_probe_root_(t4a_nvrtc_prober *pr, const char *root) {
  (void)pr;
  struct stat st;
  if (stat(root, &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return PROBE_INVALID("include root does not exist: %s%s", PATH_TAIL(root, 180));
    }
    if (err == ELOOP) return PROBE_INVALID("include root is a symbolic link loop: %s%s", PATH_TAIL(root, 180));
    return probe_io("stat", err, root);
  }
  if (!S_ISDIR(st.st_mode)) return PROBE_INVALID("include root is not a directory: %s%s", PATH_TAIL(root, 180));
  return T4A_OK;
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
