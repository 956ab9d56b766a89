/* NVRTC's build identity read from its files, without loading it (design §11, "A disk hit never
 * loads NVRTC").
 *
 * The identity a disk-backed cache keys on is, for libnvrtc and for the libnvrtc-builtins it
 * uses: the GNU build-id and an XXH3-128 hash of the whole file. The hash of a file is memoised in
 * the cache directory (lib-<hash of the path>.t4aid), valid while the file's device, inode, size,
 * modification time and change time are those recorded; a memo is written only when the file's
 * change time is safely older than the hashing (a write in the same clock tick would otherwise go
 * unseen). The memo also holds the version nvrtcVersion reported for that content, recorded by a
 * process that loaded it: the version is a function of the content, and the builtins' soname
 * depends on it.
 *
 * Which file dlopen would open is found by the loader's own rules without mapping anything: a
 * name with a slash is that file; a bare soname is, in order, an already loaded object of that
 * name (dlopen RTLD_NOLOAD), then the directories of RTLD_DI_SERINFO for the calling object (RPATH,
 * LD_LIBRARY_PATH, RUNPATH), then /etc/ld.so.cache, then the default directories, each candidate
 * checked to be an ELF file of this process's class and machine (the loader skips others). What
 * this emulation cannot decide for certain (glibc-hwcaps subdirectories, hwcap-specific cache
 * entries, an unknown cache format or machine) makes the identity unknown: the cache then loads
 * NVRTC to learn it, as before. When NVRTC is loaded later, the cache compares the identity of what
 * was loaded with the one it derived (nvrtc_cache.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define MEMO_MAGIC "t4a-libid 2"
#define MEMO_PREFIX "lib-"
#define MEMO_SUFFIX ".t4aid"
#define MEMO_TMP_PREFIX ".t4a-tmp-libid-" /* the disk scan removes stale ones */
#define HASH_CHUNK ((size_t)1 << 20)
/* A memo is written only if the file changed at least this long before hashing began (the
 * kernel's file timestamps advance by clock ticks of a few milliseconds). */
#define RACY_NS 100000000LL

#if defined(__x86_64__)
#define OUR_MACHINE EM_X86_64
#define OUR_CACHE_FLAGS 0x0303 /* FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 */
#elif defined(__aarch64__)
#define OUR_MACHINE EM_AARCH64
#define OUR_CACHE_FLAGS 0x0a03 /* FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64 */
#else
#define OUR_MACHINE EM_NONE /* unknown: the identity is learnt by loading */
#define OUR_CACHE_FLAGS (-1)
#endif

static atomic_ulong g_memo_counter;

/* ---- ELF --------------------------------------------------------------------------------- */

static int pread_all(int fd, void *buf, size_t n, off_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

static void hex_of(const unsigned char *p, size_t n, char *out, size_t out_size) {
  static const char digits[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n && o + 2 < out_size; i++) {
    out[o++] = digits[p[i] >> 4];
    out[o++] = digits[p[i] & 15];
  }
  out[o] = '\0';
}

/* Parses GNU build-id notes in [p, p + left) into build_id (hex). */
static void notes_build_id(const unsigned char *p, size_t left, char *build_id, size_t size) {
  while (left >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) nh;
    memcpy(&nh, p, sizeof nh);
    size_t name_sz = (nh.n_namesz + 3u) & ~(size_t)3u;
    size_t desc_sz = (nh.n_descsz + 3u) & ~(size_t)3u;
    size_t total = sizeof nh + name_sz + desc_sz;
    if (total > left) return;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(p + sizeof nh, "GNU", 4) == 0 &&
        nh.n_descsz > 0) {
      hex_of(p + sizeof nh + name_sz, nh.n_descsz, build_id, size);
      return;
    }
    p += total;
    left -= total;
  }
}

/* Bytes [off, off + n) of the file: from `head` (the first head_n bytes) when they lie in it. */
static int file_bytes(int fd, const unsigned char *head, size_t head_n, uint64_t off, size_t n,
                      void *dst) {
  if (off + n <= head_n) {
    memcpy(dst, head + off, n);
    return 1;
  }
  return pread_all(fd, dst, n, (off_t)off);
}

/* Whether fd is a shared object this process could load (class, byte order, machine, ET_DYN),
 * and its GNU build-id from the file's PT_NOTE segments ("" for none). One read in the common
 * case (headers and notes in the first 4 KiB). */
static int elf_probe(int fd, char *build_id, size_t build_id_size) {
  build_id[0] = '\0';
  unsigned char head[4096];
  ssize_t got;
  do {
    got = pread(fd, head, sizeof head, 0);
  } while (got < 0 && errno == EINTR);
  if (got < (ssize_t)sizeof(ElfW(Ehdr))) return 0;
  size_t hn = (size_t)got;
  ElfW(Ehdr) eh;
  memcpy(&eh, head, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return 0;
  if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)) return 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return 0;
#else
  if (eh.e_ident[EI_DATA] != ELFDATA2MSB) return 0;
#endif
  if (eh.e_type != ET_DYN || eh.e_machine != OUR_MACHINE) return 0;
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > 256) return 0;
  ElfW(Phdr) ph[256];
  if (!file_bytes(fd, head, hn, eh.e_phoff, (size_t)eh.e_phnum * sizeof ph[0], ph)) return 0;
  for (size_t i = 0; i < eh.e_phnum && build_id[0] == '\0'; i++) {
    if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_filesz > 65536) continue;
    unsigned char notes[65536];
    if (!file_bytes(fd, head, hn, ph[i].p_offset, ph[i].p_filesz, notes)) return 0;
    notes_build_id(notes, ph[i].p_filesz, build_id, build_id_size);
  }
  return 1;
}

/* ---- The file identity, memoised --------------------------------------------------------- */

typedef struct file_id {
  char real[PATH_MAX]; /* the resolved path */
  char build_id[129];  /* "" for none */
  char hash[33];       /* XXH3-128 of the content, hex */
  long long size;
  int major, minor; /* nvrtcVersion of this content; -1 unknown */
} file_id;

typedef struct file_meta {
  unsigned long long dev, ino;
  long long size, mtime_s, mtime_ns, ctime_s, ctime_ns;
} file_meta;

static file_meta meta_of(const struct stat *st) {
  file_meta m = {(unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
                 (long long)st->st_size,         (long long)st->st_mtim.tv_sec,
                 (long long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
                 (long long)st->st_ctim.tv_nsec};
  return m;
}

/* The memo of a file is keyed by the name the loader uses for it (what dlopen records as the
 * object's name), so that a process that loaded NVRTC and one that did not find the same memo. */
static int memo_path(const char *dir, const char *name, char *out, size_t size) {
  int n = snprintf(out, size, "%s/" MEMO_PREFIX "%016llx" MEMO_SUFFIX, dir,
                   (unsigned long long)XXH3_64bits(name, strlen(name)));
  return n > 0 && (size_t)n < size;
}

/* Reads the memo of `name` into *m and *id. Returns 0 if there is none or it is unreadable. */
static int memo_read(const char *dir, const char *name, file_meta *m, file_id *id) {
  char path[PATH_MAX];
  if (!memo_path(dir, name, path, sizeof path)) return 0;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  char buf[2 * PATH_MAX + 512];
  ssize_t n = t4a_fault_sim(T4A_FAULT_FILE_READ) ? -1 : read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char bid[129], hash[33];
  int pos = 0;
  if (sscanf(buf, MEMO_MAGIC "\n%llu %llu %lld %lld %lld %lld %lld\n%128s %32s %d %d\n%n", &m->dev,
             &m->ino, &m->size, &m->mtime_s, &m->mtime_ns, &m->ctime_s, &m->ctime_ns, bid, hash,
             &id->major, &id->minor, &pos) != 11 ||
      pos <= 0 || strlen(hash) != 32) {
    return 0;
  }
  /* Then the name itself (the file name is only a hash of it) and the resolved path. */
  size_t nl = strlen(name);
  const char *p = buf + pos;
  if (strncmp(p, name, nl) != 0 || p[nl] != '\n') return 0;
  p += nl + 1;
  const char *end = strchr(p, '\n');
  if (end == NULL || end == p || end[1] != '\0' || (size_t)(end - p) >= sizeof id->real) return 0;
  memcpy(id->real, p, (size_t)(end - p));
  id->real[end - p] = '\0';
  int none = strcmp(bid, "-") == 0;
  memcpy(id->build_id, none ? "" : bid, none ? 1 : strlen(bid) + 1);
  memcpy(id->hash, hash, sizeof id->hash);
  id->size = m->size;
  return 1;
}

/* Writes the memo atomically (a temporary file renamed over it). Best effort: a failure costs
 * the next process a hash. */
static void memo_write(const char *dir, const char *name, const file_meta *m, const file_id *id) {
  char path[PATH_MAX], tmp[PATH_MAX];
  if (!memo_path(dir, name, path, sizeof path)) return;
  unsigned long k = atomic_fetch_add_explicit(&g_memo_counter, 1, memory_order_relaxed);
  int len = snprintf(tmp, sizeof tmp, "%s/" MEMO_TMP_PREFIX "%ld-%lu", dir, (long)getpid(), k);
  if (len <= 0 || (size_t)len >= sizeof tmp) return;
  char buf[2 * PATH_MAX + 512];
  int n = snprintf(buf, sizeof buf,
                   MEMO_MAGIC "\n%llu %llu %lld %lld %lld %lld %lld\n%s %s %d %d\n%s\n%s\n", m->dev,
                   m->ino, m->size, m->mtime_s, m->mtime_ns, m->ctime_s, m->ctime_ns,
                   id->build_id[0] != '\0' ? id->build_id : "-", id->hash, id->major, id->minor,
                   name, id->real);
  if (n <= 0 || (size_t)n >= sizeof buf) return;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int ok = !t4a_fault_sim(T4A_FAULT_FILE_WRITE) && write(fd, buf, (size_t)n) == n;
  ok &= close(fd) == 0;
  if (ok && !t4a_fault_sim(T4A_FAULT_FILE_RENAME) && rename(tmp, path) == 0) return;
  (void)unlink(tmp);
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The version of a content, by content (ver-<hash>.t4aid: "major minor"), for processes that
 * find the same file under another name than the process that loaded it. */
static int version_path(const char *dir, const file_id *id, char *out, size_t size) {
  int n = snprintf(out, size, "%s/ver-%s" MEMO_SUFFIX, dir, id->hash);
  return n > 0 && (size_t)n < size;
}

static void version_write(const char *dir, const file_id *id) {
  char path[PATH_MAX], tmp[PATH_MAX], buf[64];
  if (!version_path(dir, id, path, sizeof path)) return;
  unsigned long k = atomic_fetch_add_explicit(&g_memo_counter, 1, memory_order_relaxed);
  int len = snprintf(tmp, sizeof tmp, "%s/" MEMO_TMP_PREFIX "%ld-%lu", dir, (long)getpid(), k);
  if (len <= 0 || (size_t)len >= sizeof tmp) return;
  int n = snprintf(buf, sizeof buf, "%s %d %d\n", id->build_id[0] ? id->build_id : "-", id->major,
                   id->minor);
  if (n <= 0 || (size_t)n >= sizeof buf) return;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int ok = !t4a_fault_sim(T4A_FAULT_FILE_WRITE) && write(fd, buf, (size_t)n) == n;
  ok &= close(fd) == 0;
  if (ok && !t4a_fault_sim(T4A_FAULT_FILE_RENAME) && rename(tmp, path) == 0) return;
  (void)unlink(tmp);
}

/* Fills id's version from the content-keyed memo. Returns whether it found one. */
static int version_read(const char *dir, file_id *id) {
  char path[PATH_MAX], buf[200], bid[129];
  if (!version_path(dir, id, path, sizeof path)) return 0;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  ssize_t n = t4a_fault_sim(T4A_FAULT_FILE_READ) ? -1 : read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  int major = -1, minor = -1;
  if (sscanf(buf, "%128s %d %d", bid, &major, &minor) != 3 || major < 0 || minor < 0) return 0;
  if (strcmp(bid, id->build_id[0] ? id->build_id : "-") != 0) return 0;
  id->major = major;
  id->minor = minor;
  return 1;
}

typedef enum probe_result { PROBE_NONE, PROBE_NOT_ELF, PROBE_OK, PROBE_ERROR } probe_result;

/* What the file the loader would call `name` is: absent (NONE: stat fails or it is no regular
 * file, as the loader would skip it), not a shared object this process can load (NOT_ELF), one
 * whose identity could not be read (ERROR: open or read failed, memory, or it changed while it was
 * read), or one, with its identity in *id (OK): from the memo in
 * memo_dir while the file's metadata match it, else by reading the whole file (then memoised,
 * keeping a memoised version when the content is unchanged). set_major >= 0: records that version
 * for this content (a process that loaded it and asked nvrtcVersion). */
static probe_result file_probe(const char *name, const char *memo_dir, file_id *id, int set_major,
                               int set_minor) {
  id->real[0] = '\0';
  id->build_id[0] = id->hash[0] = '\0';
  id->size = 0;
  id->major = id->minor = -1;
  /* The memo is checked against stat(2) first: a hit opens nothing but the memo. */
  struct stat st;
  if (stat(name, &st) != 0 || !S_ISREG(st.st_mode)) return PROBE_NONE;
  file_meta m = meta_of(&st), old_m;
  file_id local, *o = &local;
  int have_old = memo_dir != NULL && memo_read(memo_dir, name, &old_m, o);
  if (have_old && memcmp(&old_m, &m, sizeof m) == 0) {
    *id = *o;
    if (set_major >= 0 && (id->major != set_major || id->minor != set_minor)) {
      id->major = set_major;
      id->minor = set_minor;
      memo_write(memo_dir, name, &m, id);
      version_write(memo_dir, id);
    } else if (id->major < 0 && version_read(memo_dir, id)) {
      memo_write(memo_dir, name, &m, id); /* found under another name: remember it under this */
    }
    return PROBE_OK; /* only loadable files are memoised */
  }
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) return PROBE_ERROR;
  int fd = open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PROBE_ERROR;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return PROBE_ERROR;
  }
  m = meta_of(&st); /* the file opened (it may have been replaced since the stat) */
  long long started = now_ns();
  if (!elf_probe(fd, id->build_id, sizeof id->build_id)) {
    close(fd);
    return PROBE_NOT_ELF;
  }
  if (realpath(name, id->real) == NULL) snprintf(id->real, sizeof id->real, "%s", name);
  unsigned char *buf = t4a_host_malloc(HASH_CHUNK);
  if (buf == NULL) {
    close(fd);
    return PROBE_ERROR;
  }
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  long long total = 0;
  int ok = 1;
  for (;;) {
    /* One fault point per file, not per chunk. */
    ssize_t r = total == 0 && t4a_fault_sim(T4A_FAULT_FILE_READ) ? -1 : read(fd, buf, HASH_CHUNK);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ok = 0;
      break;
    }
    if (r == 0) break;
    XXH3_128bits_update(&state, buf, (size_t)r);
    total += r;
  }
  free(buf);
  /* The file must not have changed while it was read. */
  struct stat after;
  ok = ok && fstat(fd, &after) == 0;
  close(fd);
  if (!ok) return PROBE_ERROR;
  file_meta m2 = meta_of(&after);
  if (memcmp(&m, &m2, sizeof m) != 0 || total != m.size) return PROBE_ERROR;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  hex_of(c.digest, 16, id->hash, sizeof id->hash);
  id->size = total;
  if (set_major >= 0) {
    id->major = set_major;
    id->minor = set_minor;
    if (memo_dir != NULL) version_write(memo_dir, id);
  } else if (have_old && strcmp(o->hash, id->hash) == 0 && strcmp(o->build_id, id->build_id) == 0) {
    id->major = o->major; /* the same content: the same version */
    id->minor = o->minor;
  } else if (memo_dir != NULL) {
    (void)version_read(memo_dir, id);
  }
  long long changed = m.ctime_s * 1000000000LL + m.ctime_ns;
  if (memo_dir != NULL && changed < started - RACY_NS) memo_write(memo_dir, name, &m, id);
  return PROBE_OK;
}

t4a_status t4a_nvrtc_file_identity(const char *path, const char *memo_dir, char *out,
                                   size_t out_size) {
  if (path == NULL || out == NULL || out_size == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_file_identity", 0, NULL, 0,
                          "path or out is NULL");
  }
  out[0] = '\0';
  file_id id;
  switch (file_probe(path, memo_dir, &id, -1, -1)) {
    case PROBE_NONE:
      return t4a_error_set_(T4A_IO, "stat", 0, NULL, 0, "%s is no regular file", path);
    case PROBE_ERROR:
      return t4a_error_set_(T4A_IO, "read", 0, NULL, 0, "cannot read %s", path);
    case PROBE_NOT_ELF:
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_file_identity", 0, NULL, 0,
                            "%s is not a shared object this process can load", path);
    case PROBE_OK:
      break;
  }
  snprintf(out, out_size, "build-id %s xxh128 %s bytes %lld",
           id.build_id[0] != '\0' ? id.build_id : "none", id.hash, id.size);
  return T4A_OK;
}

/* ---- Where dlopen would find a name ------------------------------------------------------ */

typedef enum found_kind { FOUND_NONE, FOUND_FILE, FOUND_LOADED, FOUND_UNCERTAIN } found_kind;

/* A resolved library: the loader's name for it, its file identity and, for a loaded one, the
 * build-id read from memory. */
typedef struct found_lib {
  char name[PATH_MAX];
  char mem_build_id[129];
  file_id id;
} found_lib;

/* A loaded object whose name or DT_SONAME is `want` (what dlopen(want) would return without
 * loading anything). */
typedef struct loaded_search {
  const char *want;
  found_lib *out;
  int found;
} loaded_search;

static int find_loaded_cb(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  loaded_search *s = user;
  const char *n = info->dlpi_name;
  if (n == NULL || n[0] == '\0' || strncmp(n, "linux-vdso", 10) == 0) return 0;
  int match = strcmp(n, s->want) == 0;
  const ElfW(Phdr) *dyn = NULL;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = &info->dlpi_phdr[i];
  }
  if (!match && dyn != NULL && strchr(s->want, '/') == NULL) {
    /* ld.so relocates the dynamic section's addresses in place (x86-64, AArch64). */
    const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + dyn->p_vaddr);
    ElfW(Addr) strtab = 0;
    ElfW(Xword) soname = (ElfW(Xword))-1;
    for (; d->d_tag != DT_NULL; d++) {
      if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
      if (d->d_tag == DT_SONAME) soname = d->d_un.d_val;
    }
    if (strtab != 0 && soname != (ElfW(Xword))-1) {
      if (strtab < info->dlpi_addr) strtab += info->dlpi_addr;
      match = strcmp((const char *)strtab + soname, s->want) == 0;
    }
  }
  if (!match) return 0;
  snprintf(s->out->name, sizeof s->out->name, "%s", n);
  s->out->mem_build_id[0] = '\0';
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE || s->out->mem_build_id[0] != '\0') continue;
    notes_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz,
                   s->out->mem_build_id, sizeof s->out->mem_build_id);
  }
  s->found = 1;
  return 1;
}

/* The loaded object dlopen(name) would return (FOUND_LOADED), else FOUND_NONE; FOUND_UNCERTAIN if
 * its file cannot be described. */
static found_kind find_loaded(const char *name, const char *memo_dir, found_lib *out) {
  loaded_search s = {name, out, 0};
  dl_iterate_phdr(find_loaded_cb, &s);
  if (!s.found) return FOUND_NONE;
  return file_probe(out->name, memo_dir, &out->id, -1, -1) == PROBE_OK ? FOUND_LOADED
                                                                       : FOUND_UNCERTAIN;
}

/* Whether the directory has glibc-hwcaps subdirectories (which the loader searches first). */
static int has_hwcaps(const char *dir) {
  char p[PATH_MAX];
  int n = snprintf(p, sizeof p, "%s/glibc-hwcaps", dir);
  struct stat st;
  return n > 0 && (size_t)n < sizeof p && stat(p, &st) == 0;
}

/* Probes a candidate file: FOUND_FILE (described in *out), else FOUND_NONE. */
static found_kind candidate(const char *path, const char *memo_dir, found_lib *out) {
  size_t n = strlen(path);
  if (n >= sizeof out->name) return FOUND_NONE;
  switch (file_probe(path, memo_dir, &out->id, -1, -1)) {
    case PROBE_NONE:
    case PROBE_NOT_ELF:
      return FOUND_NONE; /* the loader moves on too */
    case PROBE_ERROR:
      return FOUND_UNCERTAIN; /* exists, but cannot be identified: learnt by loading */
    case PROBE_OK:
      break;
  }
  memcpy(out->name, path, n + 1);
  out->mem_build_id[0] = '\0';
  return FOUND_FILE;
}

#define LD_CACHE "/etc/ld.so.cache"
#define LD_MEMO_MAGIC "t4a-ldcache 1"

/* Looks `name` up in /etc/ld.so.cache as glibc does for this process's flags. FOUND_FILE with the
 * path in out, FOUND_NONE, or FOUND_UNCERTAIN (a format or entry this cannot decide). *st_out:
 * the cache file's metadata, as read. */
static found_kind ld_cache_parse(const char *name, char *out, size_t out_size, struct stat *st_out) {
  static const char new_magic[] = "glibc-ld.so.cache1.1";
  static const char old_magic[] = "ld.so-1.7.0";
  if (OUR_CACHE_FLAGS < 0) return FOUND_UNCERTAIN;
  int fd = open(LD_CACHE, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? FOUND_NONE : FOUND_UNCERTAIN;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 64 || st.st_size > (64 << 20)) {
    close(fd);
    return FOUND_UNCERTAIN;
  }
  *st_out = st;
  size_t size = (size_t)st.st_size;
  unsigned char *buf = t4a_host_malloc(size);
  if (buf == NULL || !pread_all(fd, buf, size, 0)) {
    free(buf);
    close(fd);
    return FOUND_UNCERTAIN;
  }
  close(fd);
  found_kind result = FOUND_UNCERTAIN;
  size_t base = 0;
  /* The combined old + new format (glibc before 2.32 wrote it): undecided, not guessed. */
  if (memcmp(buf, old_magic, sizeof old_magic - 1) == 0) goto out;
  if (base + 48 > size || memcmp(buf + base, new_magic, sizeof new_magic - 1) != 0) goto out;
  uint32_t nlibs;
  memcpy(&nlibs, buf + base + 20, 4);
  if ((uint64_t)nlibs * 24 + 48 > size - base) goto out;
  result = FOUND_NONE;
  size_t name_len = strlen(name);
  for (uint32_t i = 0; i < nlibs; i++) {
    const unsigned char *e = buf + base + 48 + (size_t)i * 24;
    int32_t flags;
    uint32_t key, value;
    uint64_t hwcap;
    memcpy(&flags, e, 4);
    memcpy(&key, e + 4, 4);
    memcpy(&value, e + 8, 4);
    memcpy(&hwcap, e + 16, 8);
    if ((size_t)key + name_len + 1 > size - base || memcmp(buf + base + key, name, name_len + 1) != 0) {
      continue;
    }
    if (flags == 0 || flags == 1) { /* libc4 / plain ELF entries: glibc's rule varies by port */
      result = FOUND_UNCERTAIN;
      break;
    }
    if (flags != OUR_CACHE_FLAGS) continue; /* another ABI's library (multilib) */
    if (hwcap != 0) { /* a glibc-hwcaps or legacy hwcap entry: chosen by CPU features */
      result = FOUND_UNCERTAIN;
      break;
    }
    if (result == FOUND_FILE) continue; /* the first matching entry wins */
    const char *v = (const char *)buf + base + value;
    if ((size_t)value >= size - base || memchr(v, '\0', size - base - value) == NULL) {
      result = FOUND_UNCERTAIN;
      break;
    }
    snprintf(out, out_size, "%s", v);
    result = FOUND_FILE;
  }
out:
  free(buf);
  return result;
}

/* ld_cache_parse, memoised in memo_dir (ldc-<hash of the name>.t4aid) while /etc/ld.so.cache's
 * metadata are those recorded: reading and scanning the whole cache costs a new process a page
 * fault per page. */
static found_kind ld_cache_lookup(const char *name, const char *memo_dir, char *out,
                                  size_t out_size) {
  struct stat st;
  if (stat(LD_CACHE, &st) != 0) return errno == ENOENT ? FOUND_NONE : FOUND_UNCERTAIN;
  file_meta now = meta_of(&st);
  char memo[PATH_MAX];
  int have_memo = memo_dir != NULL &&
                  snprintf(memo, sizeof memo, "%s/ldc-%016llx" MEMO_SUFFIX, memo_dir,
                           (unsigned long long)XXH3_64bits(name, strlen(name))) <
                      (int)sizeof memo;
  if (have_memo && !t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    int fd = open(memo, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      char buf[PATH_MAX + 512];
      ssize_t n = t4a_fault_sim(T4A_FAULT_FILE_READ) ? -1 : read(fd, buf, sizeof buf - 1);
      close(fd);
      file_meta m;
      int kind = -1, pos = 0;
      if (n > 0) {
        buf[n] = '\0';
        if (sscanf(buf, LD_MEMO_MAGIC "\n%llu %llu %lld %lld %lld %lld %lld\n%d\n%n", &m.dev,
                   &m.ino, &m.size, &m.mtime_s, &m.mtime_ns, &m.ctime_s, &m.ctime_ns, &kind,
                   &pos) == 8 &&
            pos > 0 && memcmp(&m, &now, sizeof m) == 0) {
          /* then the name and the result */
          size_t nl = strlen(name);
          const char *p = buf + pos;
          const char *end = strncmp(p, name, nl) == 0 && p[nl] == '\n' ? strchr(p + nl + 1, '\n')
                                                                          : NULL;
          if (end != NULL && end[1] == '\0' && (size_t)(end - (p + nl + 1)) < out_size &&
              (kind == FOUND_NONE || kind == FOUND_FILE)) {
            memcpy(out, p + nl + 1, (size_t)(end - (p + nl + 1)));
            out[end - (p + nl + 1)] = '\0';
            return (found_kind)kind;
          }
        }
      }
    }
  }
  long long started = now_ns();
  struct stat parsed;
  memset(&parsed, 0, sizeof parsed);
  out[0] = '\0';
  found_kind k = ld_cache_parse(name, out, out_size, &parsed);
  file_meta pm = meta_of(&parsed);
  long long changed = pm.ctime_s * 1000000000LL + pm.ctime_ns;
  if (have_memo && (k == FOUND_NONE || k == FOUND_FILE) && memcmp(&pm, &now, sizeof pm) == 0 &&
      changed < started - RACY_NS) {
    char tmp[PATH_MAX], text[2 * PATH_MAX + 512];
    unsigned long c = atomic_fetch_add_explicit(&g_memo_counter, 1, memory_order_relaxed);
    int len = snprintf(tmp, sizeof tmp, "%s/" MEMO_TMP_PREFIX "%ld-%lu", memo_dir, (long)getpid(), c);
    int n = snprintf(text, sizeof text, LD_MEMO_MAGIC "\n%llu %llu %lld %lld %lld %lld %lld\n%d\n%s\n%s\n",
                     pm.dev, pm.ino, pm.size, pm.mtime_s, pm.mtime_ns, pm.ctime_s, pm.ctime_ns,
                     (int)k, name, out);
    if (len > 0 && (size_t)len < sizeof tmp && n > 0 && (size_t)n < sizeof text &&
        !t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
      int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        int ok = !t4a_fault_sim(T4A_FAULT_FILE_WRITE) && write(fd, text, (size_t)n) == n;
        ok &= close(fd) == 0;
        if (!(ok && !t4a_fault_sim(T4A_FAULT_FILE_RENAME) && rename(tmp, memo) == 0)) {
          (void)unlink(tmp);
        }
      }
    }
  }
  return k;
}

/* Whether entry i of the search list is a standard system directory that does not occur again
 * among entries i+1..n-1. */
static int is_system_dir(const Dl_serinfo *si, unsigned i, unsigned n) {
  static const char *const k_system[] = {
#if defined(__x86_64__)
      "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
      "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#endif
      "/lib64", "/usr/lib64", "/lib", "/usr/lib",
  };
  const char *d = si->dls_serpath[i].dls_name;
  if (d == NULL) return 0;
  size_t len = strlen(d);
  while (len > 1 && d[len - 1] == '/') len--;
  int standard = 0;
  for (size_t k = 0; k < sizeof k_system / sizeof k_system[0]; k++) {
    standard |= strlen(k_system[k]) == len && memcmp(k_system[k], d, len) == 0;
  }
  if (!standard) return 0;
  for (unsigned j = i + 1; j < n; j++) {
    const char *e = si->dls_serpath[j].dls_name;
    if (e != NULL && strncmp(e, d, len) == 0 && (e[len] == '\0' || strcmp(e + len, "/") == 0)) {
      return 0;
    }
  }
  return 1;
}

/* What dlopen(name) from this library would open, without opening it, described. */
static found_kind find_library(const char *name, const char *memo_dir, found_lib *out) {
  found_kind k = find_loaded(name, memo_dir, out);
  if (k != FOUND_NONE) return k;
  if (strchr(name, '/') != NULL) return candidate(name, memo_dir, out);
  /* The search path of the object dlopen is called from (this library's). */
  Dl_info info;
  struct link_map *lm = NULL;
  if (dladdr1((void *)&t4a_nvrtc_lib_open, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0 ||
      lm == NULL) {
    return FOUND_UNCERTAIN;
  }
  Dl_serinfo size_info;
  if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size_info) != 0 || size_info.dls_size < sizeof size_info) {
    (void)dlerror();
    return FOUND_UNCERTAIN;
  }
  Dl_serinfo *si = t4a_host_malloc(size_info.dls_size);
  if (si == NULL) return FOUND_UNCERTAIN;
  si->dls_size = size_info.dls_size;
  si->dls_cnt = size_info.dls_cnt;
  found_kind result = FOUND_UNCERTAIN;
  char path[PATH_MAX];
  if (dlinfo(lm, RTLD_DI_SERINFO, si) != 0) {
    (void)dlerror();
    goto out;
  }
  /* glibc's list ends with its system directories (unless the caller was linked -z nodeflib), and
   * ld.so.cache is consulted just before them; dls_flags do not mark them, so they are recognised
   * as the longest suffix of distinct standard system directories. None recognised: undecided. */
  unsigned first_default = si->dls_cnt;
  while (first_default > 0 && is_system_dir(si, first_default - 1, si->dls_cnt)) first_default--;
  if (first_default == si->dls_cnt) goto out;
  result = FOUND_NONE;
  for (unsigned i = 0; i < si->dls_cnt && result == FOUND_NONE; i++) {
    const char *dir = si->dls_serpath[i].dls_name;
    if (i == first_default) {
      found_kind c = ld_cache_lookup(name, memo_dir, path, sizeof path);
      if (c == FOUND_UNCERTAIN) {
        result = c;
        break;
      }
      if (c == FOUND_FILE && candidate(path, memo_dir, out) == FOUND_FILE) {
        result = FOUND_FILE;
        break;
      }
    }
    if (dir == NULL || dir[0] == '\0') continue;
    if (has_hwcaps(dir)) {
      result = FOUND_UNCERTAIN;
      break;
    }
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n <= 0 || (size_t)n >= sizeof path) continue;
    result = candidate(path, memo_dir, out);
  }
out:
  free(si);
  return result;
}

/* ---- The identity ------------------------------------------------------------------------- */

/* Describes one library for the identity: its build-id (from memory when loaded) and hash. */
static void describe(const found_lib *f, char *out, size_t out_size) {
  const char *bid = f->mem_build_id[0] != '\0' ? f->mem_build_id : f->id.build_id;
  snprintf(out, out_size, "build-id %s xxh128 %s", bid[0] != '\0' ? bid : "none", f->id.hash);
}

/* The name of the builtins NVRTC at `nvrtc_real` of version major.minor loads. */
static void builtins_name(const char *nvrtc_real, int major, int minor, char *out, size_t size) {
  const char *base = strrchr(nvrtc_real, '/');
  base = base != NULL ? base + 1 : nvrtc_real;
  int alt = strstr(base, ".alt.") != NULL;
  snprintf(out, size, "libnvrtc-builtins%s.so.%d.%d", alt ? ".alt" : "", major, minor);
}

/* Builds the identity lib: version, capabilities and the identity string. */
static t4a_nvrtc_lib *make_id(int major, int minor, uint32_t caps, const char *origin,
                              const char *nvrtc_desc, const char *builtins_desc) {
  /* The object paths at the end of the lib are a loaded lib's only (dl == NULL here: nothing reads
   * them), so only what precedes them is cleared: a new process then touches two pages, not
   * seven. */
  t4a_nvrtc_lib *id = t4a_host_malloc(sizeof *id);
  if (id == NULL) return NULL;
  memset(id, 0, offsetof(t4a_nvrtc_lib, load_name));
  atomic_init(&id->refs, 1);
  id->major = major;
  id->minor = minor;
  id->caps = caps;
  snprintf(id->origin, sizeof id->origin, "%.511s", origin); /* origin[512] */
  snprintf(id->build_identity, sizeof id->build_identity, "nvrtc %d.%d %s; builtins %s", major,
           minor, nvrtc_desc, builtins_desc);
  return id;
}

/* The builtins' description for the NVRTC at nvrtc_real, as the loader pins them: the loaded
 * object of that soname if there is one, else the file beside libnvrtc, else what the soname
 * resolves to. Returns 0 if it cannot be decided. */
static int describe_builtins(const char *nvrtc_real, int major, int minor, const char *memo_dir,
                             char *out, size_t out_size) {
  char name[64];
  builtins_name(nvrtc_real, major, minor, name, sizeof name);
  found_lib f;
  found_kind k = find_loaded(name, memo_dir, &f);
  if (k == FOUND_NONE) {
    const char *slash = strrchr(nvrtc_real, '/');
    if (slash != NULL) {
      char beside[PATH_MAX + 64];
      snprintf(beside, sizeof beside, "%.*s/%s", (int)(slash - nvrtc_real), nvrtc_real, name);
      k = candidate(beside, memo_dir, &f);
    }
  }
  if (k == FOUND_NONE) k = find_library(name, memo_dir, &f);
  if (k == FOUND_UNCERTAIN) return 0;
  if (k == FOUND_NONE) {
    snprintf(out, out_size, "%s not found", name);
    return 1;
  }
  describe(&f, out, out_size);
  return 1;
}

t4a_status t4a_nvrtc_libid_lazy(const char *library_path, const char *memo_dir,
                                t4a_nvrtc_lib **out_id) {
  *out_id = NULL;
  const char *path = library_path;
  if (path == NULL || path[0] == '\0') path = getenv("T4A_LIBNVRTC_PATH");
  if (path != NULL && path[0] == '\0') path = NULL;
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *env_cuda = getenv("CUDA_PATH");
  const char *dirs[] = {NULL, env_cuda, "/usr/local/cuda"};
  char tried[768];
  size_t used = 0;
  tried[0] = '\0';
  found_lib f;
  found_kind k = FOUND_NONE;
  if (path != NULL) {
    k = find_library(path, memo_dir, &f);
    if (k == FOUND_NONE) snprintf(tried, sizeof tried, "%s: no loadable file", path);
  } else {
    for (size_t s = 0; s < 2 && k == FOUND_NONE; s++) {
      for (size_t d = 0; d < 3 && k == FOUND_NONE; d++) {
        char cand[256]; /* as the loader's candidates */
        if (d == 0) {
          snprintf(cand, sizeof cand, "%s", sonames[s]);
        } else if (dirs[d] != NULL && dirs[d][0] != '\0') {
          snprintf(cand, sizeof cand, "%s/lib64/%s", dirs[d], sonames[s]);
        } else {
          continue;
        }
        k = find_library(cand, memo_dir, &f);
        if (k == FOUND_NONE && used < sizeof tried) {
          used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", cand);
        }
      }
    }
  }
  if (k == FOUND_NONE) {
    return t4a_error_set_(T4A_NVRTC_NOT_FOUND, "dlopen", 0, NULL, 0,
                          "cannot load NVRTC (tried %s); install the CUDA toolkit's NVRTC or set "
                          "T4A_LIBNVRTC_PATH",
                          tried);
  }
  if (k == FOUND_UNCERTAIN || memo_dir == NULL) return T4A_OK; /* learnt by loading */
  if (f.id.major < 0 || f.id.minor < 0) return T4A_OK; /* no process recorded its version yet */
  char nvrtc_desc[400], builtins_desc[PATH_MAX + 96];
  describe(&f, nvrtc_desc, sizeof nvrtc_desc);
  if (!describe_builtins(f.id.real, f.id.major, f.id.minor, memo_dir, builtins_desc,
                         sizeof builtins_desc)) {
    return T4A_OK;
  }
  /* Unknown until loaded: what it can produce and target. Lookups accept what a hit proves was
   * accepted by this very build; a miss checks the request against the loaded lib. */
  *out_id = make_id(f.id.major, f.id.minor, T4A_NVRTC_CAP_CUBIN | T4A_NVRTC_CAP_LTOIR, f.name,
                    nvrtc_desc, builtins_desc);
  if (*out_id == NULL) return T4A_HOST_OUT_OF_MEMORY;
  return T4A_OK;
}

t4a_nvrtc_lib *t4a_nvrtc_libid_loaded(const t4a_nvrtc_lib *lib, const char *memo_dir) {
  if (lib == NULL || lib->dl == NULL || lib->load_name[0] == '\0' || memo_dir == NULL) return NULL;
  t4a_error saved;
  t4a_error_last(&saved);
  found_lib f;
  char nvrtc_desc[400], builtins_desc[PATH_MAX + 96];
  t4a_nvrtc_lib *id = NULL;
  /* Records this content's version for the processes that will not load it. */
  if (file_probe(lib->load_name, memo_dir, &f.id, lib->major, lib->minor) != PROBE_OK) goto out;
  snprintf(f.mem_build_id, sizeof f.mem_build_id, "%s", lib->build_id);
  describe(&f, nvrtc_desc, sizeof nvrtc_desc);
  if (lib->builtins_load_name[0] != '\0') {
    if (file_probe(lib->builtins_load_name, memo_dir, &f.id, -1, -1) != PROBE_OK) goto out;
    snprintf(f.mem_build_id, sizeof f.mem_build_id, "%s", lib->builtins_build_id);
    describe(&f, builtins_desc, sizeof builtins_desc);
  } else {
    char name[64];
    builtins_name(lib->real_path, lib->major, lib->minor, name, sizeof name);
    snprintf(builtins_desc, sizeof builtins_desc, "%s not found", name);
  }
  id = make_id(lib->major, lib->minor, lib->caps, lib->origin, nvrtc_desc, builtins_desc);
  if (id != NULL) {
    id->num_archs = lib->num_archs;
    memcpy(id->archs, lib->archs, sizeof id->archs);
  }
out:
  t4a_nvrtc_error_restore(&saved);
  return id;
}
