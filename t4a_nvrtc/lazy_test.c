/* A disk hit never loads NVRTC (design §11, "A disk hit never loads NVRTC"), on the real NVRTC:
 * the file identity (a changed byte is another identity, a touch is not, the memo is used and
 * revalidated by metadata), the identity derived from the files equals the one of the loaded
 * library (default search and LD_LIBRARY_PATH), a new process's disk hit makes no NVRTC call and
 * leaves libnvrtc unmapped, another build of NVRTC (a copy with one byte changed) never hits,
 * a derived identity that the loaded NVRTC contradicts is replaced before anything is compiled
 * under it, and NVRTC_NOT_FOUND / a library that cannot load are reported at each ask.
 *
 * New processes are fresh execs of this binary (`lazy_test --child MODE DIR [LIB]`), so nothing
 * the parent mapped leaks into them. The parent itself never loads NVRTC before the last test. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* The executable a new process of this test is started from (main: argv[0] when it has a path). */
static const char *g_self = "/proc/self/exe";
#include <dlfcn.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

#define CK(x) assert_int_equal((x), T4A_OK)

/* ---- Helpers ------------------------------------------------------------------------------ */

/* Whether /proc/self/maps names a file containing `what`. */
static int mapped(const char *what) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, f) != NULL) found |= strstr(line, what) != NULL;
  fclose(f);
  return found;
}

static const char *cuda_lib64(void) {
  static char dir[1024];
  const char *root = getenv("CUDA_PATH");
  snprintf(dir, sizeof dir, "%s/lib64", root != NULL && root[0] ? root : "/usr/local/cuda");
  return dir;
}

static void copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  assert_true(in >= 0);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  assert_true(out >= 0);
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0) assert_int_equal(write(out, buf, (size_t)n), n);
  assert_int_equal(n, 0);
  close(in);
  assert_int_equal(close(out), 0);
}

static void flip_byte(const char *path, off_t at) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  assert_true(fd >= 0);
  unsigned char b;
  assert_int_equal(pread(fd, &b, 1, at), 1);
  b ^= 0x5a;
  assert_int_equal(pwrite(fd, &b, 1, at), 1);
  close(fd);
}

/* The file offset of an ELF section the loader never reads (.comment, else .shstrtab). */
static off_t unloaded_offset(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  Elf64_Ehdr eh;
  assert_int_equal(pread(fd, &eh, sizeof eh, 0), (ssize_t)sizeof eh);
  Elf64_Shdr strtab;
  assert_int_equal(pread(fd, &strtab, sizeof strtab,
                         (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof strtab)),
                   (ssize_t)sizeof strtab);
  off_t found = (off_t)strtab.sh_offset; /* the section names: never loaded */
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    assert_int_equal(pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + (uint64_t)i * sizeof sh)),
                     (ssize_t)sizeof sh);
    char name[16] = "";
    assert_true(pread(fd, name, sizeof name - 1, (off_t)(strtab.sh_offset + sh.sh_name)) > 0);
    if (strcmp(name, ".comment") == 0 && sh.sh_size > 2) found = (off_t)(sh.sh_offset + 1);
  }
  close(fd);
  return found;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Runs `lazy_test --child mode dir [lib]` (with LD_LIBRARY_PATH=ld_path if given), returns its
 * exit status and its stdout (first line) in out. */
static int run_child(const char *mode, const char *dir, const char *lib, const char *ld_path,
                     char *out, size_t out_size) {
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    close(pipefd[1]);
    if (ld_path != NULL) setenv("LD_LIBRARY_PATH", ld_path, 1);
    char *argv[] = {"lazy_test", "--child", (char *)mode, (char *)dir, (char *)lib, NULL};
    execv(g_self, argv);
    _exit(127);
  }
  close(pipefd[1]);
  size_t used = 0;
  ssize_t n;
  while (used + 1 < out_size && (n = read(pipefd[0], out + used, out_size - 1 - used)) > 0) {
    used += (size_t)n;
  }
  out[used] = '\0';
  char *nl = strchr(out, '\n');
  if (nl != NULL) *nl = '\0';
  close(pipefd[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* ---- The child ---------------------------------------------------------------------------- */

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    return 1;                     \
  } while (0)

/* Modes:
 *   identity DIR [LIB]  prints the lazy cache's identity ("-" while unknown); NVRTC not loaded
 *   loaded DIR [LIB]    opens NVRTC, a cache over it in DIR; prints that cache's identity
 *   compile DIR [LIB]   a lazy cache compiles add1: prints "origin identity"
 *   hit DIR [LIB]       a lazy cache must answer add1 from disk with no NVRTC call, NVRTC not
 *                       loaded, libnvrtc not mapped; prints the identity
 *   threads DIR         eight threads ask a lazy cache (identity derived, NVRTC not loaded) for
 *                       one new request at once: NVRTC is loaded once, compiles once, the
 *                       others join (or, scheduled later, hit memory); prints joins + hits
 *   swap DIR LIB        a lazy cache derives the identity of the default NVRTC; then LIB (a
 *                       changed copy with the same soname) is loaded; a miss must compile under
 *                       LIB's identity, not the derived one; prints "before|after" */
typedef struct racer {
  t4a_nvrtc_cache *cache;
  pthread_barrier_t *start;
  t4a_status st;
  t4a_nvrtc_origin origin;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  t4a_nvrtc_request q = test_add1_request();
  q.program_name = "race.cu"; /* a request no other test compiled */
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  pthread_barrier_wait(r->start);
  r->st = t4a_nvrtc_cache_compile(r->cache, &q, &a, &out);
  r->origin = out.origin;
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(a);
  return NULL;
}

static int child_threads(t4a_nvrtc_cache *c) {
  enum { kThreads = 8 };
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, kThreads);
  racer r[kThreads];
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; i++) {
    r[i] = (racer){c, &start, T4A_OK, T4A_NVRTC_ORIGIN_NONE};
    if (pthread_create(&t[i], NULL, race, &r[i]) != 0) FAIL("pthread_create");
  }
  int compiled = 0;
  for (int i = 0; i < kThreads; i++) {
    pthread_join(t[i], NULL);
    if (r[i].st != T4A_OK) FAIL("thread %d: %s", i, t4a_status_name(r[i].st));
    compiled += r[i].origin == T4A_NVRTC_ORIGIN_COMPILED;
  }
  pthread_barrier_destroy(&start);
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  if (compiled != 1 || s.counters.nvrtc_compile_attempts != 1) FAIL("compiled %d times", compiled);
  if (!t4a_nvrtc_cache_lib_loaded(c)) FAIL("NVRTC not loaded");
  /* The others waited for the compile or, scheduled after it, hit memory. */
  printf("%llu\n", (unsigned long long)(s.counters.nvrtc_mem_joins + s.counters.nvrtc_mem_hits));
  t4a_nvrtc_cache_destroy(c);
  return 0;
}

static int child(const char *mode, const char *dir, const char *lib) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
  lo.library_path = lib;
  t4a_nvrtc_cache *c = NULL;
  t4a_nvrtc_lib *l = NULL;
  if (strcmp(mode, "loaded") == 0) {
    if (t4a_nvrtc_lib_open(&lo, &l) != T4A_OK) FAIL("lib_open failed");
    if (t4a_nvrtc_cache_create(l, &o, &c) != T4A_OK) FAIL("cache_create failed");
    printf("%s\n", t4a_nvrtc_cache_build_identity(c));
    t4a_nvrtc_cache_destroy(c);
    t4a_nvrtc_lib_release(l);
    return 0;
  }
  if (t4a_nvrtc_cache_create_lazy(strcmp(mode, "swap") == 0 ? NULL : &lo, &o, &c) != T4A_OK) {
    FAIL("create_lazy failed");
  }
  if (t4a_nvrtc_cache_lib_loaded(c) || mapped("libnvrtc") != 0) FAIL("NVRTC loaded at creation");
  const char *id = t4a_nvrtc_cache_build_identity(c);
  char before[T4A_NVRTC_BUILD_IDENTITY_MAX];
  snprintf(before, sizeof before, "%s", id);
  if (strcmp(mode, "threads") == 0) {
    if (before[0] == '\0') FAIL("no derived identity");
    return child_threads(c);
  }
  if (strcmp(mode, "identity") == 0) {
    printf("%s\n", id[0] != '\0' ? id : "-");
    t4a_nvrtc_cache_destroy(c);
    return 0;
  }
  if (strcmp(mode, "swap") == 0) {
    if (before[0] == '\0') FAIL("no derived identity");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) FAIL("dlopen %s: %s", lib, dlerror());
  }
  t4a_nvrtc_request r = test_add1_request();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_cache_compile(c, &r, &a, &out) != T4A_OK) FAIL("compile failed");
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  int rc = 0;
  if (strcmp(mode, "hit") == 0) {
    if (out.origin != T4A_NVRTC_ORIGIN_DISK) FAIL("origin %s", t4a_nvrtc_origin_name(out.origin));
    if (s.counters.nvrtc_compile_attempts != 0) FAIL("NVRTC compiled");
    if (t4a_nvrtc_cache_lib_loaded(c)) FAIL("NVRTC loaded");
    if (mapped("libnvrtc") != 0) FAIL("libnvrtc is mapped");
    printf("%s\n", t4a_nvrtc_cache_build_identity(c));
  } else if (strcmp(mode, "compile") == 0) {
    printf("%s %s\n", t4a_nvrtc_origin_name(out.origin), t4a_nvrtc_artifact_build_identity(a));
  } else if (strcmp(mode, "swap") == 0) {
    const char *after = t4a_nvrtc_cache_build_identity(c);
    if (out.origin != T4A_NVRTC_ORIGIN_COMPILED) FAIL("swap: %s", t4a_nvrtc_origin_name(out.origin));
    if (strcmp(t4a_nvrtc_artifact_build_identity(a), after) != 0) FAIL("artifact not re-keyed");
    if (s.counters.nvrtc_compile_attempts != 1) FAIL("swap: attempts");
    /* One request: one miss at each level, though it was looked up under both identities. */
    if (s.counters.nvrtc_mem_misses != 1 || s.counters.nvrtc_disk_misses != 1 ||
        s.counters.nvrtc_mem_hits + s.counters.nvrtc_disk_hits != 0) {
      FAIL("swap: %llu memory misses, %llu disk misses (1 each)",
           (unsigned long long)s.counters.nvrtc_mem_misses,
           (unsigned long long)s.counters.nvrtc_disk_misses);
    }
    printf("%s|%s\n", before, after);
  } else {
    rc = 2;
  }
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  return rc;
}

/* ---- Tests -------------------------------------------------------------------------------- */

static char g_dir[512];  /* the shared cache directory */
static char g_copy[512]; /* a directory with libnvrtc.so.13, one unloaded byte changed */
static char g_nvrtc_copy[600];
static int g_have_nvrtc;

static int group_setup(void **state) {
  (void)state;
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/libnvrtc.so.13", cuda_lib64());
  g_have_nvrtc = access(probe, R_OK) == 0;
  test_tmpdir(g_dir, sizeof g_dir);
  test_tmpdir(g_copy, sizeof g_copy);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  test_rmdir(g_dir);
  test_rmdir(g_copy);
  return 0;
}

/* A copy of a library: its identity is that of its content (not its path); a touch keeps it, one
 * changed byte changes it even with the modification time put back; the memo is what answers
 * while the file's metadata are unchanged. */
static void test_file_identity(void **state) {
  (void)state;
  char src[1100], dir[512], a[600], b[600], id1[512], id2[512], id3[512];
  snprintf(src, sizeof src, "%s/libnvrtc-builtins.so.13.0", cuda_lib64());
  if (access(src, R_OK) != 0) skip();
  test_tmpdir(dir, sizeof dir);
  snprintf(a, sizeof a, "%s/a.so", dir);
  snprintf(b, sizeof b, "%s/b.so", dir);
  copy_file(src, a);
  copy_file(src, b);
  sleep_ms(250); /* older than the memo's racy window */
  CK(t4a_nvrtc_file_identity(a, dir, id1, sizeof id1));
  assert_non_null(strstr(id1, "xxh128 "));
  assert_null(strstr(id1, "build-id none"));
  assert_int_equal(test_count_files(dir, ".t4aid", "lib-"), 1);
  CK(t4a_nvrtc_file_identity(b, dir, id2, sizeof id2));
  assert_string_equal(id1, id2); /* same content, another path */
  assert_int_equal(test_count_files(dir, ".t4aid", "lib-"), 2);

  /* The memo answers while the metadata match: plant a wrong hash in it and it is believed... */
  char memo[700]; /* keyed by the name the file is opened by */
  snprintf(memo, sizeof memo, "%s/lib-%016llx.t4aid", dir,
           (unsigned long long)XXH3_64bits(a, strlen(a)));
  {
    FILE *f = fopen(memo, "r+");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    /* Line 3 is "<build-id> <hash> <major> <minor>". */
    char *line3 = strchr(strchr(text, '\n') + 1, '\n') + 1;
    char *h = strchr(line3, ' ') + 1;
    assert_non_null(strstr(id1, "xxh128 "));
    assert_memory_equal(h, strstr(id1, "xxh128 ") + 7, 32);
    memset(h, 'f', 32);
    rewind(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
  }
  CK(t4a_nvrtc_file_identity(a, dir, id3, sizeof id3));
  assert_non_null(strstr(id3, "ffffffffffffffffffffffffffffffff"));
  /* ...and a touch (new metadata) makes it hash again: the true identity, unchanged. */
  assert_int_equal(utimensat(AT_FDCWD, a, NULL, 0), 0);
  CK(t4a_nvrtc_file_identity(a, dir, id3, sizeof id3));
  assert_string_equal(id3, id1);

  /* One changed byte, with size and modification time put back: another identity. */
  struct stat st;
  assert_int_equal(stat(a, &st), 0);
  flip_byte(a, st.st_size / 2);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, a, times, 0), 0);
  CK(t4a_nvrtc_file_identity(a, dir, id3, sizeof id3));
  assert_string_not_equal(id3, id1);
  flip_byte(a, st.st_size / 2); /* back: the first identity again */
  CK(t4a_nvrtc_file_identity(a, dir, id3, sizeof id3));
  assert_string_equal(id3, id1);

  char missing[700];
  snprintf(missing, sizeof missing, "%s/none.so", dir);
  assert_int_equal(t4a_nvrtc_file_identity(missing, dir, id3, sizeof id3), T4A_IO);
  FILE *txt = fopen(missing, "w");
  assert_non_null(txt);
  fputs("not a shared object\n", txt);
  fclose(txt);
  assert_int_equal(t4a_nvrtc_file_identity(missing, dir, id3, sizeof id3), T4A_INVALID_ARGUMENT);
  test_rmdir(dir);
}

/* Before any process loaded this NVRTC over the directory its version is unknown and the lazy
 * identity too; once one did, a new process derives from the files exactly the identity the
 * loaded library gives, without loading it. */
static void test_derived_equals_loaded(void **state) {
  (void)state;
  if (!g_have_nvrtc) skip();
  char lazy[8192], loaded[8192];
  assert_int_equal(run_child("identity", g_dir, NULL, NULL, lazy, sizeof lazy), 0);
  assert_string_equal(lazy, "-");
  assert_int_equal(run_child("loaded", g_dir, NULL, NULL, loaded, sizeof loaded), 0);
  assert_non_null(strstr(loaded, "xxh128 "));
  assert_non_null(strstr(loaded, "; builtins build-id "));
  assert_int_equal(run_child("identity", g_dir, NULL, NULL, lazy, sizeof lazy), 0);
  assert_string_equal(lazy, loaded);
  /* Named by the environment: the same. */
  char path[1100];
  snprintf(path, sizeof path, "%s/libnvrtc.so.13", cuda_lib64());
  assert_int_equal(run_child("identity", g_dir, path, NULL, lazy, sizeof lazy), 0);
  assert_string_equal(lazy, loaded);
}

/* The goal: a new process's first artifact from a warm disk cache, no NVRTC call, no libnvrtc
 * mapped. */
static void test_new_process_disk_hit(void **state) {
  (void)state;
  if (!g_have_nvrtc) skip();
  char outp[8192], hit[8192];
  assert_int_equal(run_child("compile", g_dir, NULL, NULL, outp, sizeof outp), 0);
  /* Compiled the first time (or a disk hit if an earlier run of this group wrote it). */
  assert_true(strncmp(outp, "compiled ", 9) == 0 || strncmp(outp, "disk ", 5) == 0);
  assert_int_equal(run_child("hit", g_dir, NULL, NULL, hit, sizeof hit), 0);
  assert_string_equal(hit, strchr(outp, ' ') + 1); /* keyed by the compiling NVRTC's identity */
  assert_int_equal(run_child("hit", g_dir, NULL, NULL, hit, sizeof hit), 0);
}

/* Eight threads at a lazy cache's first miss: one load, one compile, seven answered by it. */
static void test_threads_at_the_first_miss(void **state) {
  (void)state;
  if (!g_have_nvrtc) skip();
  char dir[512], joins[64];
  test_tmpdir(dir, sizeof dir);
  char loaded[8192];
  assert_int_equal(run_child("loaded", dir, NULL, NULL, loaded, sizeof loaded), 0); /* memos */
  assert_int_equal(run_child("threads", dir, NULL, NULL, joins, sizeof joins), 0);
  assert_string_equal(joins, "7");
  test_rmdir(dir);
}

/* Another build of NVRTC (libnvrtc with one byte changed where the loader never reads, so it
 * loads and compiles): its key is another, the original's entry is never its hit, and each hits
 * its own. Found through LD_LIBRARY_PATH, the derived identity is the copy's too (the search
 * order of the loader). */
static void test_other_build_never_hits(void **state) {
  (void)state;
  if (!g_have_nvrtc) skip();
  char src[1100];
  snprintf(src, sizeof src, "%s/libnvrtc.so.13", cuda_lib64());
  snprintf(g_nvrtc_copy, sizeof g_nvrtc_copy, "%s/libnvrtc.so.13", g_copy);
  copy_file(src, g_nvrtc_copy);
  flip_byte(g_nvrtc_copy, unloaded_offset(g_nvrtc_copy));
  sleep_ms(250);

  char orig[8192], other[8192], again[8192];
  assert_int_equal(run_child("hit", g_dir, NULL, NULL, orig, sizeof orig), 0);
  assert_int_equal(run_child("compile", g_dir, g_nvrtc_copy, NULL, other, sizeof other), 0);
  assert_true(strncmp(other, "compiled ", 9) == 0);
  assert_string_not_equal(strchr(other, ' ') + 1, orig);
  assert_int_equal(run_child("hit", g_dir, g_nvrtc_copy, NULL, again, sizeof again), 0);
  assert_string_equal(again, strchr(other, ' ') + 1);
  assert_int_equal(run_child("hit", g_dir, NULL, NULL, again, sizeof again), 0);
  assert_string_equal(again, orig);

  /* LD_LIBRARY_PATH comes before ld.so.cache: the bare soname is the copy. */
  char loaded[8192];
  assert_int_equal(run_child("loaded", g_dir, NULL, g_copy, loaded, sizeof loaded), 0);
  assert_string_equal(loaded, strchr(other, ' ') + 1);
  assert_int_equal(run_child("identity", g_dir, NULL, g_copy, again, sizeof again), 0);
  assert_string_equal(again, loaded);
}

/* A derived identity the loaded NVRTC contradicts (another object of the soname was loaded into
 * the process after the cache derived it): the miss compiles under the loaded identity. */
static void test_contradicted_identity_is_replaced(void **state) {
  (void)state;
  if (!g_have_nvrtc || g_nvrtc_copy[0] == '\0') skip();
  char dir[512], line[16384];
  test_tmpdir(dir, sizeof dir);
  char loaded[8192], copy_id[8192];
  assert_int_equal(run_child("loaded", dir, NULL, NULL, loaded, sizeof loaded), 0);
  assert_int_equal(run_child("loaded", dir, g_nvrtc_copy, NULL, copy_id, sizeof copy_id), 0);
  assert_int_equal(run_child("swap", dir, g_nvrtc_copy, NULL, line, sizeof line), 0);
  char *bar = strchr(line, '|');
  assert_non_null(bar);
  *bar = '\0';
  assert_string_equal(line, loaded);
  assert_string_equal(bar + 1, copy_id);
  test_rmdir(dir);
}

/* No library file: NVRTC_NOT_FOUND naming what was tried, nothing created. */
static void test_not_found(void **state) {
  (void)state;
  t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
  lo.library_path = "/nonexistent/libnvrtc.so.13";
  t4a_nvrtc_cache *c = (t4a_nvrtc_cache *)1;
  assert_int_equal(t4a_nvrtc_cache_create_lazy(&lo, NULL, &c), T4A_NVRTC_NOT_FOUND);
  assert_null(c);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/nonexistent/libnvrtc.so.13"));
  assert_int_equal(t4a_nvrtc_cache_create_lazy(&lo, NULL, NULL), T4A_INVALID_ARGUMENT);
  /* A file that is no shared object is not a candidate either. */
  char dir[512], path[600];
  test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/libnvrtc.so.13", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not an ELF file\n", f);
  fclose(f);
  lo.library_path = path;
  assert_int_equal(t4a_nvrtc_cache_create_lazy(&lo, NULL, &c), T4A_NVRTC_NOT_FOUND);
  assert_null(c);
  test_rmdir(dir);
}

/* A library file that exists but is no NVRTC: the lazy cache is created, each compile tries to
 * load it and reports why, nothing is cached. (Runs last: it maps that file into this process.) */
static void test_load_failure_each_time(void **state) {
  (void)state;
  char src[1100], dir[512], path[600];
  snprintf(src, sizeof src, "%s/libnvrtc-builtins.so.13.0", cuda_lib64());
  if (access(src, R_OK) != 0) skip();
  test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/libnotnvrtc.so", dir);
  copy_file(src, path);
  t4a_nvrtc_lib_options lo = T4A_NVRTC_LIB_OPTIONS_INIT;
  lo.library_path = path;
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = dir;
  t4a_nvrtc_cache *c = NULL;
  CK(t4a_nvrtc_cache_create_lazy(&lo, &o, &c));
  assert_false(t4a_nvrtc_cache_lib_loaded(c));
  for (int i = 0; i < 2; i++) {
    t4a_nvrtc_request r = test_add1_request();
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_NVRTC_SYMBOL_MISSING);
    assert_null(a);
    assert_false(t4a_nvrtc_cache_lib_loaded(c));
  }
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  assert_int_equal(s.memory_entries, 0);
  assert_int_equal(s.counters.nvrtc_compile_attempts, 0);
  assert_int_equal(test_count_files(dir, ".t4a", NULL), 0);
  t4a_nvrtc_cache_destroy(c);
  test_rmdir(dir);
}

int main(int argc, char **argv) {
  /* The path this test was started by: under valgrind /proc/self/exe is valgrind's tool. */
  if (strchr(argv[0], '/') != NULL) g_self = argv[0];
  if (argc >= 4 && strcmp(argv[1], "--child") == 0) {
    return child(argv[2], argv[3], argc >= 5 ? argv[4] : NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_identity),
      cmocka_unit_test(test_derived_equals_loaded),
      cmocka_unit_test(test_new_process_disk_hit),
      cmocka_unit_test(test_threads_at_the_first_miss),
      cmocka_unit_test(test_other_build_never_hits),
      cmocka_unit_test(test_contradicted_identity_is_replaced),
      cmocka_unit_test(test_not_found),
      cmocka_unit_test(test_load_failure_each_time),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
