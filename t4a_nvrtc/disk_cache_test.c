/* The artifact cache's disk level against the real NVRTC, through the wrapped table (which counts
 * compiles and live programs independently of t4a's counters): a fresh cache (and a second
 * process) hits the directory with zero NVRTC calls; corrupt, truncated, foreign, FIFO and
 * symbolic-link entries are recompiled, counted and replaced; requests whose output depends on
 * files the key cannot see are refused; the size bound evicts least recently used entries down to
 * a low-water mark, scanning only when needed; stale temporary files are cleaned; disk failures
 * never fail a compile; processes racing on one small directory see no corrupt entry. After every
 * test no NVRTC program is alive. */
#define _GNU_SOURCE
#include <dirent.h>
#define XXH_STATIC_LINKING_ONLY
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;
static char g_dir[512];

static int setup(void **state) {
  (void)state;
  return nvrtc_wrap_open(&g_lib, NULL) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  nvrtc_wrap_close();
  return 0;
}

static int each_setup(void **state) {
  (void)state;
  nvrtc_wrap_reset(-1, 0);
  test_tmpdir(g_dir, sizeof g_dir);
  return 0;
}

static int each_teardown(void **state) {
  (void)state;
  test_rmdir(g_dir);
  long live = atomic_load(&g_nvrtc_wrap.programs_live);
  if (live != 0) {
    print_error("%ld NVRTC programs are still alive\n", live);
    return -1;
  }
  return 0;
}

static long wrapped_compiles(void) { return atomic_load(&g_nvrtc_wrap.compiles); }

static t4a_counter_values counters(const t4a_nvrtc_cache *c) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  return s.counters;
}

static t4a_nvrtc_cache *disk_cache(uint64_t max_bytes) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = g_dir;
  o.disk_max_bytes = max_bytes;
  t4a_nvrtc_cache *c = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_OK);
  return c;
}

static t4a_nvrtc_artifact *get(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r,
                               t4a_nvrtc_origin want) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_cache_compile(c, r, &a, &o);
  if (st != T4A_OK || o.origin != want) {
    t4a_error e;
    t4a_error_last(&e);
    print_error("cache_compile: %s %s origin %s (want %s)\n", t4a_status_name(st), e.message,
                t4a_nvrtc_origin_name(o.origin), t4a_nvrtc_origin_name(want));
  }
  assert_int_equal(st, T4A_OK);
  assert_int_equal(o.origin, want);
  t4a_nvrtc_outcome_deinit(&o);
  return a;
}

/* A CUBIN request with a name expression (so lowered names travel through the file too). */
static t4a_nvrtc_request cubin_request(void) {
  static const char *exprs[] = {"k<int>"};
  t4a_nvrtc_request r = test_add1_request();
  r.program_name = "tmpl.cu";
  r.source = k_template_src;
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  r.name_expressions = exprs;
  r.num_name_expressions = 1;
  return r;
}

static void assert_same_artifact(const t4a_nvrtc_artifact *a, const t4a_nvrtc_artifact *b) {
  size_t na = 0, nb = 0;
  const void *da = t4a_nvrtc_artifact_data(a, &na), *db = t4a_nvrtc_artifact_data(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(da, db, na);
  assert_string_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(b));
  assert_string_equal(t4a_nvrtc_artifact_target(a), t4a_nvrtc_artifact_target(b));
  assert_int_equal(t4a_nvrtc_artifact_output(a), t4a_nvrtc_artifact_output(b));
  assert_string_equal(t4a_nvrtc_artifact_program_name(a), t4a_nvrtc_artifact_program_name(b));
  assert_string_equal(t4a_nvrtc_artifact_build_identity(a), t4a_nvrtc_artifact_build_identity(b));
  assert_string_equal(t4a_nvrtc_artifact_log(a, NULL), t4a_nvrtc_artifact_log(b, NULL));
  assert_int_equal(t4a_nvrtc_artifact_num_lowered_names(a),
                   t4a_nvrtc_artifact_num_lowered_names(b));
  for (size_t i = 0; i < t4a_nvrtc_artifact_num_lowered_names(a); i++) {
    const char *ea, *la, *eb, *lb;
    assert_int_equal(t4a_nvrtc_artifact_lowered_name_at(a, i, &ea, &la), T4A_OK);
    assert_int_equal(t4a_nvrtc_artifact_lowered_name_at(b, i, &eb, &lb), T4A_OK);
    assert_string_equal(ea, eb);
    assert_string_equal(la, lb);
  }
}

/* Compiles the request into g_dir with a first cache; returns the artifact. */
static t4a_nvrtc_artifact *populate(const t4a_nvrtc_request *r) {
  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *a = get(c, r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_disk_misses, 1);
  assert_int_equal(v.nvrtc_disk_writes, 1);
  assert_int_equal(v.nvrtc_disk_errors, 0);
  t4a_nvrtc_cache_destroy(c);
  return a;
}

static void test_fresh_cache_hits_disk(void **state) {
  (void)state;
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_artifact *a = populate(&r);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 1);
  assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
  char path[1024], want[1024];
  assert_true(test_find_entry(g_dir, path, sizeof path));
  snprintf(want, sizeof want, "%s/%s.t4a", g_dir, t4a_nvrtc_artifact_key_hex(a));
  assert_string_equal(path, want);

  t4a_counter_values lib_before, lib_after;
  t4a_nvrtc_lib_stats(g_lib, &lib_before);
  long compiles = wrapped_compiles();
  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *b = get(c, &r, T4A_NVRTC_ORIGIN_DISK);
  assert_same_artifact(a, b);
  assert_string_equal(t4a_nvrtc_artifact_lowered_name(b, "k<int>"), "_Z1kIiEvv");
  t4a_nvrtc_artifact *b2 = get(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(b2, b);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts, 0);
  assert_int_equal(v.nvrtc_disk_hits, 1);
  assert_int_equal(v.nvrtc_disk_misses, 0);
  assert_int_equal(v.nvrtc_disk_writes, 0);
  assert_int_equal(v.nvrtc_mem_hits, 1);
  t4a_nvrtc_lib_stats(g_lib, &lib_after);
  assert_int_equal(lib_after.nvrtc_compile_attempts, lib_before.nvrtc_compile_attempts);
  assert_int_equal(wrapped_compiles(), compiles); /* NVRTC itself was not called */
  t4a_nvrtc_artifact_release(b2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_artifact_release(a);
}

/* A genuinely second process (fork) reads what this one wrote, without calling NVRTC. */
static void test_second_process_hits_disk(void **state) {
  (void)state;
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_artifact *a = populate(&r);
  fflush(NULL);
  nvrtc_wrap_reset(-1, 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    t4a_nvrtc_cache *c = NULL;
    t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
    o.disk_dir = g_dir;
    if (t4a_nvrtc_cache_create(g_lib, &o, &c) != T4A_OK) _exit(10);
    t4a_nvrtc_artifact *b = NULL;
    t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
    if (t4a_nvrtc_cache_compile(c, &r, &b, &out) != T4A_OK) _exit(11);
    if (out.origin != T4A_NVRTC_ORIGIN_DISK) _exit(12);
    t4a_counter_values v = counters(c);
    if (v.nvrtc_compile_attempts != 0 || v.nvrtc_disk_hits != 1) _exit(13);
    if (atomic_load(&g_nvrtc_wrap.compiles) != 0) _exit(15);
    size_t na, nb;
    const void *da = t4a_nvrtc_artifact_data(a, &na), *db = t4a_nvrtc_artifact_data(b, &nb);
    if (na != nb || memcmp(da, db, na) != 0) _exit(14);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  t4a_nvrtc_artifact_release(a);
}

typedef enum damage {
  FLIP_PAYLOAD,
  FLIP_HEADER,
  FLIP_LAST,
  TRUNCATE_HALF,
  TRUNCATE_SHORT,
  EMPTY,
  NUM_DAMAGES
} damage;

static void damage_file(const char *path, damage how) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  off_t size = st.st_size;
  if (how == TRUNCATE_HALF || how == TRUNCATE_SHORT || how == EMPTY) {
    off_t to = how == TRUNCATE_HALF ? size / 2 : how == TRUNCATE_SHORT ? 10 : 0;
    assert_int_equal(truncate(path, to), 0);
    return;
  }
  off_t at = how == FLIP_PAYLOAD ? size / 2 : how == FLIP_HEADER ? 20 : size - 1;
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char b = 0;
  assert_int_equal(pread(fd, &b, 1, at), 1);
  b ^= 0x40;
  assert_int_equal(pwrite(fd, &b, 1, at), 1);
  close(fd);
}

static void test_corrupt_entries_are_recompiled_and_replaced(void **state) {
  (void)state;
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_artifact *a = populate(&r);
  char path[1024];
  assert_true(test_find_entry(g_dir, path, sizeof path));
  for (int how = 0; how < NUM_DAMAGES; how++) {
    damage_file(path, (damage)how);
    t4a_nvrtc_cache *c = disk_cache(0);
    t4a_nvrtc_artifact *b = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
    assert_same_artifact(a, b);
    t4a_counter_values v = counters(c);
    assert_int_equal(v.nvrtc_disk_corrupt, 1);
    assert_int_equal(v.nvrtc_disk_misses, 1);
    assert_int_equal(v.nvrtc_disk_hits, 0);
    assert_int_equal(v.nvrtc_compile_attempts, 1);
    assert_int_equal(v.nvrtc_disk_writes, 1); /* replaced */
    t4a_nvrtc_artifact_release(b);
    t4a_nvrtc_cache_destroy(c);
    /* The replacement is good. */
    c = disk_cache(0);
    b = get(c, &r, T4A_NVRTC_ORIGIN_DISK);
    assert_same_artifact(a, b);
    assert_int_equal(counters(c).nvrtc_disk_corrupt, 0);
    t4a_nvrtc_artifact_release(b);
    t4a_nvrtc_cache_destroy(c);
  }
  t4a_nvrtc_artifact_release(a);
}

/* An entry whose header and checksums are valid for request B's key but which holds request A:
 * the stored identity is compared, not the hash alone. */
static void test_foreign_entry_is_not_returned(void **state) {
  (void)state;
  /* B differs from A in its source only: same program name, target, kind and name expressions,
   * so nothing but the stored identity record tells the two apart. */
  t4a_nvrtc_request ra = cubin_request();
  t4a_nvrtc_request rb = cubin_request();
  char source_b[1024];
  snprintf(source_b, sizeof source_b, "%s__global__ void extra(int *x) { *x = 7; }\n",
           k_template_src);
  rb.source = source_b;
  t4a_nvrtc_artifact *a = populate(&ra);
  /* B's key: compile it in a memory-only cache. */
  t4a_nvrtc_cache *mem = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, NULL, &mem), T4A_OK);
  t4a_nvrtc_artifact *b = get(mem, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(mem);
  uint8_t kb[16];
  t4a_nvrtc_artifact_key(b, kb);

  char pa[1024], pb[1024];
  snprintf(pa, sizeof pa, "%s/%s.t4a", g_dir, t4a_nvrtc_artifact_key_hex(a));
  snprintf(pb, sizeof pb, "%s/%s.t4a", g_dir, t4a_nvrtc_artifact_key_hex(b));
  FILE *f = fopen(pa, "rb");
  assert_non_null(f);
  static unsigned char img[1 << 20];
  size_t n = fread(img, 1, sizeof img, f);
  fclose(f);
  assert_true(n > 64 && n < sizeof img);
  memcpy(img + 24, kb, 16); /* B's key in the header */
  XXH64_hash_t h = XXH3_64bits(img, 56);
  for (int i = 0; i < 8; i++) img[56 + i] = (unsigned char)(h >> (8 * i));
  f = fopen(pb, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(img, 1, n, f), n);
  fclose(f);

  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *got = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  assert_non_null(strstr(t4a_nvrtc_artifact_log(got, NULL), "") /* exists */);
  assert_same_artifact(got, b);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_disk_corrupt, 1);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  t4a_nvrtc_artifact_release(got);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A pause long enough for two modification times to differ on g_dir's file system: 20 ms where
 * timestamps have sub-second resolution, 1.1 s where they do not. */
static void pause_for_mtime(void) {
  static long pause_ms;
  if (pause_ms == 0) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.mtime-probe", g_dir);
    long ns = 0;
    for (int i = 0; i < 3 && ns == 0; i++) { /* an exact 0 ns by chance: look again */
      FILE *f = fopen(path, "w");
      assert_non_null(f);
      fclose(f);
      struct stat st;
      assert_int_equal(stat(path, &st), 0);
      ns = st.st_mtim.tv_nsec;
      unlink(path);
      sleep_ms(3);
    }
    pause_ms = ns != 0 ? 20 : 1100;
  }
  sleep_ms(pause_ms);
}

static t4a_nvrtc_request define_request(const char **slot, const char *define) {
  t4a_nvrtc_request r = test_add1_request();
  *slot = define;
  r.options = slot;
  r.num_options = 1;
  return r;
}

static void test_size_bound_evicts_least_recently_used(void **state) {
  (void)state;
  const char *oa, *ob, *oc;
  t4a_nvrtc_request ra = define_request(&oa, "-DV=1"), rb = define_request(&ob, "-DV=2"),
                    rc = define_request(&oc, "-DV=3");
  t4a_nvrtc_artifact *a = populate(&ra);
  unsigned long long one = test_entry_bytes(g_dir);
  assert_true(one > 0);
  uint64_t bound = one * 2 + one / 2; /* room for two */
  t4a_nvrtc_cache *c = disk_cache(bound);
  pause_for_mtime();
  t4a_nvrtc_artifact *b = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
  pause_for_mtime();
  /* A fresh cache reads A from disk: a use that makes B the least recently used. */
  c = disk_cache(bound);
  t4a_nvrtc_artifact *a2 = get(c, &ra, T4A_NVRTC_ORIGIN_DISK);
  pause_for_mtime();
  t4a_nvrtc_artifact *cc = get(c, &rc, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_disk_evictions, 1);
  assert_true(test_entry_bytes(g_dir) <= bound);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 2);
  t4a_nvrtc_cache_destroy(c);
  c = disk_cache(bound);
  t4a_nvrtc_artifact *x = get(c, &ra, T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_artifact *y = get(c, &rc, T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_artifact *z = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED); /* B was evicted */
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_artifact *list[] = {a, b, a2, cc, x, y, z};
  for (size_t i = 0; i < 7; i++) t4a_nvrtc_artifact_release(list[i]);

  /* A bound smaller than one entry keeps nothing, and says so. */
  test_rmdir(g_dir);
  test_tmpdir(g_dir, sizeof g_dir);
  c = disk_cache(one / 2);
  a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(counters(c).nvrtc_disk_evictions, 1);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

/* Bytes of the files of dir whose names end with suffix. */
static unsigned long long bytes_with_suffix(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  unsigned long long total = 0;
  struct dirent *de;
  size_t sl = strlen(suffix);
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < sl || strcmp(de->d_name + n - sl, suffix) != 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, 0) == 0) total += (unsigned long long)st.st_size;
  }
  closedir(d);
  return total;
}

/* Include manifests (<key>.t4m) count against disk_max_bytes with the entries and are evicted
 * with them, least recently used first: a directory of requests with include roots stays within
 * its bound, and a request whose manifest went is still answered (its includes checked again). */
static void test_manifests_count_against_the_bound(void **state) {
  (void)state;
  /* The root in a folder of its own: the names beside a root are part of its fingerprint, and
   * other processes' files come and go in the temporary directory. */
  char parent[512], root[600], hpath[700];
  test_tmpdir(parent, sizeof parent);
  snprintf(root, sizeof root, "%s/inc", parent);
  assert_int_equal(mkdir(root, 0777), 0);
  snprintf(hpath, sizeof hpath, "%s/v.h", root);
  FILE *f = fopen(hpath, "w");
  assert_non_null(f);
  fputs("#define V 3\n", f);
  fclose(f);
  /* Older than the racy window (a header changed within a second of a compile is not cached). */
  struct timespec wait = {1, 200000000};
  nanosleep(&wait, NULL);
  const char *roots[1] = {root};
  enum { N = 6 };
  char src[N][160];
  t4a_nvrtc_request r[N];
  for (int i = 0; i < N; i++) {
    snprintf(src[i], sizeof src[i],
             "#include <v.h>\nextern \"C\" __global__ void k%d(float *x) { x[0] = V + %d; }\n", i,
             i);
    r[i] = test_add1_request();
    r[i].source = src[i];
    r[i].include_roots = roots;
    r[i].num_include_roots = 1;
  }
  /* One request's entry and manifest, unbounded. */
  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *a = get(c, &r[0], T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  unsigned long long entry = bytes_with_suffix(g_dir, ".t4a"),
                     manifest = bytes_with_suffix(g_dir, ".t4m");
  assert_true(entry > 0 && manifest > 0);
  assert_int_equal(test_count_files(g_dir, ".t4m", NULL), 1);
  uint64_t bound = (entry + manifest) * 5 / 2; /* room for two requests, not three */
  uint64_t evictions = 0;
  for (int i = 1; i < N; i++) {
    pause_for_mtime();
    c = disk_cache(bound);
    a = get(c, &r[i], T4A_NVRTC_ORIGIN_COMPILED);
    evictions += counters(c).nvrtc_disk_evictions;
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_cache_destroy(c);
    assert_true(bytes_with_suffix(g_dir, ".t4a") + bytes_with_suffix(g_dir, ".t4m") <= bound);
  }
  /* Every eviction is a file of one of the two kinds, and manifests were among them. */
  size_t entries = test_count_files(g_dir, ".t4a", NULL);
  size_t manifests = test_count_files(g_dir, ".t4m", NULL);
  assert_int_equal(evictions, (N - entries) + (N - manifests));
  assert_true(manifests < N);
  assert_true(entries >= 1 && manifests >= 1); /* the newest request's are kept */
  /* The newest is still a disk hit; the first, whose files went, compiles again. */
  c = disk_cache(bound);
  a = get(c, &r[N - 1], T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_artifact_release(a);
  a = get(c, &r[0], T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  unlink(hpath);
  rmdir(root);
  test_rmdir(parent);
}

static void test_stale_temporary_files_are_removed(void **state) {
  (void)state;
  char stale[1024], fresh[1024], other[1024];
  snprintf(stale, sizeof stale, "%s/.t4a-tmp-deadbeef-1-0", g_dir);
  snprintf(fresh, sizeof fresh, "%s/.t4a-tmp-deadbeef-2-0", g_dir);
  snprintf(other, sizeof other, "%s/notes.txt", g_dir);
  const char *paths[] = {stale, fresh, other};
  for (int i = 0; i < 3; i++) {
    FILE *f = fopen(paths[i], "w");
    assert_non_null(f);
    fputs("partial", f);
    fclose(f);
  }
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);
  t4a_nvrtc_request r = test_add1_request();
  t4a_nvrtc_artifact *a = populate(&r);
  assert_int_equal(access(stale, F_OK), -1);
  assert_int_equal(access(fresh, F_OK), 0); /* may be another process's write in progress */
  assert_int_equal(access(other, F_OK), 0); /* not ours */
  t4a_nvrtc_artifact_release(a);
}

/* Disk failures cost a recompile at most; they never fail a compile that succeeded. */
static void test_disk_failures_never_fail_a_compile(void **state) {
  (void)state;
  t4a_nvrtc_request r = test_add1_request();
  const int points[] = {T4A_FAULT_FILE_OPEN, T4A_FAULT_FILE_READ, T4A_FAULT_FILE_WRITE,
                        T4A_FAULT_FILE_RENAME};
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    for (long n = 0; n < 4; n++) {
      /* A populated directory for FILE_READ (only a hit reads), an empty one otherwise. */
      t4a_nvrtc_artifact *seed = points[i] == T4A_FAULT_FILE_READ ? populate(&r) : NULL;
      t4a_nvrtc_cache *c = disk_cache(0);
      fault_plan plan;
      fault_plan_install(&plan, n, FAULT_BIT(points[i]));
      t4a_error_clear();
      t4a_nvrtc_artifact *a = NULL;
      t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, NULL);
      fault_plan_remove();
      assert_int_equal(st, T4A_OK);
      assert_non_null(a);
      t4a_error e;
      t4a_error_last(&e);
      assert_int_equal(e.status, T4A_OK); /* a swallowed disk failure leaves no detail */
      if (plan.failed_point >= 0) assert_true(counters(c).nvrtc_disk_errors >= 1);
      assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
      t4a_nvrtc_artifact_release(a);
      t4a_nvrtc_artifact_release(seed);
      t4a_nvrtc_cache_destroy(c);
      test_rmdir(g_dir);
      test_tmpdir(g_dir, sizeof g_dir);
    }
  }
  /* With fsync: every write-side step (write, fsync, close, the directory's open and fsync) can
   * fail, and none fails the compile or leaves a temporary file. */
  for (long n = 0;; n++) {
    t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
    o.disk_dir = g_dir;
    o.disk_fsync = 1;
    t4a_nvrtc_cache *c = NULL;
    assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_OK);
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_FILE_WRITE) | FAULT_BIT(T4A_FAULT_FILE_OPEN));
    t4a_error_clear();
    t4a_nvrtc_artifact *a = NULL;
    t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, NULL);
    fault_plan_remove();
    assert_int_equal(st, T4A_OK);
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(e.status, T4A_OK);
    assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
    t4a_counter_values v = counters(c);
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_cache_destroy(c);
    test_rmdir(g_dir);
    test_tmpdir(g_dir, sizeof g_dir);
    if (plan.failed_point < 0) {
      assert_int_equal(v.nvrtc_disk_errors, 0);
      assert_true(n >= 6); /* open (lookup), open (temporary), write, fsync, close, open (dir) */
      break;
    }
    assert_int_equal(v.nvrtc_disk_errors, 1);
  }
  /* A rename that fails leaves no temporary file and no entry, and is counted. */
  fault_plan plan;
  fault_plan_install(&plan, 0, FAULT_BIT(T4A_FAULT_FILE_RENAME));
  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  fault_plan_remove();
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_disk_errors, 1);
  assert_int_equal(v.nvrtc_disk_writes, 0);
  assert_int_equal(test_count_files(g_dir, NULL, NULL), 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  /* An unreadable entry (a directory where the file should be) is an error, not a crash. */
  a = populate(&r);
  char path[1024];
  assert_true(test_find_entry(g_dir, path, sizeof path));
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  c = disk_cache(0);
  t4a_nvrtc_artifact *b = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  v = counters(c);
  assert_int_equal(v.nvrtc_disk_corrupt, 1); /* not a regular file */
  assert_int_equal(v.nvrtc_disk_errors, 1);  /* and the rename over a directory fails */
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_cache_destroy(c);
  assert_int_equal(rmdir(path), 0);
  t4a_nvrtc_artifact_release(a);
}

/* Runs fn in a child process with a deadline: a lookup that blocks fails the test instead of
 * hanging it. fn returns the child's exit code. */
static void in_child_with_deadline(int (*fn)(void), unsigned seconds) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(seconds);
    _exit(fn());
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) {
    print_error("the child was killed by signal %d (SIGALRM: it blocked)\n", WTERMSIG(status));
  }
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static char g_entry[1024];

static int lookup_over_odd_entry(void) {
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = g_dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(g_lib, &o, &c) != T4A_OK) return 10;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  if (t4a_nvrtc_cache_compile(c, &r, &a, &out) != T4A_OK) return 11;
  if (out.origin != T4A_NVRTC_ORIGIN_COMPILED) return 12; /* not read through the odd entry */
  t4a_counter_values v = counters(c);
  if (v.nvrtc_disk_corrupt != 1 || v.nvrtc_disk_errors != 0 || v.nvrtc_disk_writes != 1) return 13;
  struct stat st;
  if (lstat(g_entry, &st) != 0 || !S_ISREG(st.st_mode)) return 14; /* replaced by an entry */
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  return 0;
}

/* A FIFO at an entry's path is not a file to wait on: the lookup opens without blocking, calls
 * it corrupt, and the recompiled entry replaces it. */
static void test_fifo_entry_is_not_waited_on(void **state) {
  (void)state;
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_artifact *a = populate(&r);
  assert_true(test_find_entry(g_dir, g_entry, sizeof g_entry));
  assert_int_equal(unlink(g_entry), 0);
  assert_int_equal(mkfifo(g_entry, 0600), 0);
  in_child_with_deadline(lookup_over_odd_entry, 20);
  t4a_nvrtc_artifact_release(a);
}

/* A symbolic link at an entry's path is not followed, even to a valid entry elsewhere. */
static void test_symlink_entry_is_not_followed(void **state) {
  (void)state;
  t4a_nvrtc_request r = cubin_request();
  t4a_nvrtc_artifact *a = populate(&r);
  assert_true(test_find_entry(g_dir, g_entry, sizeof g_entry));
  char elsewhere[1100];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.bin", g_dir);
  assert_int_equal(rename(g_entry, elsewhere), 0); /* a valid entry for this very key */
  assert_int_equal(symlink(elsewhere, g_entry), 0);
  in_child_with_deadline(lookup_over_odd_entry, 60);
  assert_int_equal(access(elsewhere, F_OK), 0); /* the target is left alone */
  t4a_nvrtc_artifact_release(a);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static t4a_nvrtc_artifact *compile_uncached(const t4a_nvrtc_request *r) {
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, r, &a, NULL), T4A_OK);
  return a;
}

static int same_bytes(const t4a_nvrtc_artifact *a, const t4a_nvrtc_artifact *b) {
  size_t na = 0, nb = 0;
  const void *da = t4a_nvrtc_artifact_data(a, &na), *db = t4a_nvrtc_artifact_data(b, &nb);
  return na == nb && memcmp(da, db, na) == 0;
}

/* Refused by the disk cache before NVRTC runs and before anything is written (options before
 * the lookup, includes after it: either way nothing is compiled). */
static void expect_cache_refuses(const t4a_nvrtc_request *r, const char *msg_part) {
  t4a_nvrtc_cache *c = disk_cache(0);
  long compiles = wrapped_compiles();
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_status st = t4a_nvrtc_cache_compile(c, r, &a, NULL);
  t4a_error e;
  t4a_error_last(&e);
  if (st != T4A_INVALID_ARGUMENT || strstr(e.message, msg_part) == NULL) {
    print_error("got %s (%s), want INVALID_ARGUMENT with \"%s\"\n", t4a_status_name(st), e.message,
                msg_part);
  }
  assert_int_equal(st, T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, msg_part));
  assert_null(a);
  assert_int_equal(wrapped_compiles(), compiles);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts + v.nvrtc_disk_hits + v.nvrtc_disk_writes, 0);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
  t4a_nvrtc_cache_destroy(c);
}

/* The reviewer's repro (a): ptxas reads an options file named in -Xptxas, so changing the file
 * changed the CUBIN while the cache kept answering with the old one from disk. Every spelling of
 * it is refused by the cache (and still accepted without it). */
static void test_ptxas_options_file_is_refused(void **state) {
  (void)state;
  char file[1100], eq[1200], eq2[1200], optf[1200], value[1200];
  snprintf(file, sizeof file, "%s/ptxas-options.txt", g_dir);
  snprintf(eq, sizeof eq, "-Xptxas=--options-file=%s", file);
  snprintf(eq2, sizeof eq2, "--ptxas-options=--options-file=%s", file);
  snprintf(optf, sizeof optf, "-Xptxas=-optf=%s", file);
  snprintf(value, sizeof value, "--options-file=%s", file);
  t4a_nvrtc_request r = test_add1_request();
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  /* Uncached, the file's content is part of the output. */
  const char *one[] = {eq};
  r.options = one;
  r.num_options = 1;
  write_file(file, "-O0\n");
  t4a_nvrtc_artifact *o0 = compile_uncached(&r);
  write_file(file, "-O3\n");
  t4a_nvrtc_artifact *o3 = compile_uncached(&r);
  /* On this machine's NVRTC the file changed the CUBIN; the H200 machine's NVRTC 13.0 gave the
   * same bytes for this kernel. The refusal below does not depend on it. */
  if (same_bytes(o0, o3)) {
    print_message("# note: the options file did not change this CUBIN here; refusal still checked\n");
  }
  t4a_nvrtc_artifact_release(o0);
  t4a_nvrtc_artifact_release(o3);
  /* Cached, it is refused in every spelling. */
  const char *spellings[] = {eq, eq2, optf};
  for (size_t i = 0; i < 3; i++) {
    const char *opts[] = {spellings[i]};
    r.options = opts;
    r.num_options = 1;
    expect_cache_refuses(&r, "options file");
  }
  const char *two[] = {"-Xptxas", value};
  r.options = two;
  r.num_options = 2;
  expect_cache_refuses(&r, "options file");
}

/* The reviewer's repro (b): --no-source-include does not stop an absolute include, so changing
 * the header changed the output while the cache kept answering with the old one. Every form is
 * refused by the cache (and still compiled without it); a named header is the way. */
static void test_absolute_include_is_refused(void **state) {
  (void)state;
  char header[1100], quoted[1300], angled[1300], has[1400], next[1400];
  snprintf(header, sizeof header, "%s/abs.h", g_dir);
  const char *body = "extern \"C\" __global__ void k(int *x) { *x = VAL; }\n";
  snprintf(quoted, sizeof quoted, "#include \"%s\"\n%s", header, body);
  snprintf(angled, sizeof angled, "#include <%s>\n%s", header, body);
  snprintf(has, sizeof has,
           "#if __has_include(\"%s\")\n#define VAL 1\n#else\n#define VAL 2\n#endif\n%s", header,
           body);
  snprintf(next, sizeof next, "// a header\n#include_next <%s>\n%s", header, body);
  t4a_nvrtc_request r = test_add1_request();
  r.source = quoted;
  write_file(header, "#define VAL 7\n");
  t4a_nvrtc_artifact *v7 = compile_uncached(&r);
  write_file(header, "#define VAL 8\n");
  t4a_nvrtc_artifact *v8 = compile_uncached(&r);
  assert_false(same_bytes(v7, v8)); /* NVRTC read the file */
  t4a_nvrtc_artifact_release(v7);
  t4a_nvrtc_artifact_release(v8);
  const char *sources[] = {quoted, angled, has, next};
  const char *parts[] = {"line 1: #include \"", "line 1: #include <", "line 1: __has_include",
                         "line 2: #include_next"};
  for (size_t i = 0; i < 4; i++) {
    r.source = sources[i];
    expect_cache_refuses(&r, parts[i]);
    expect_cache_refuses(&r, "absolute path");
  }
  /* In a named header too, and through a macro. */
  t4a_nvrtc_header h = {"inc.h", quoted, 0, 0};
  r.source = "#include \"inc.h\"\n";
  r.headers = &h;
  r.num_headers = 1;
  expect_cache_refuses(&r, "header \"inc.h\", line 1");
  char macro[1400];
  snprintf(macro, sizeof macro, "#define H \"%s\"\n#include H\n%s", header, body);
  r.source = macro;
  r.num_headers = 0;
  expect_cache_refuses(&r, "line 2: #include has a macro operand");
  /* The same header, named: cached, and its content is in the key. */
  t4a_nvrtc_header named = {"abs.h", "#define VAL 7\n", 0, 0};
  char by_name[300];
  snprintf(by_name, sizeof by_name, "#include \"abs.h\"\n%s", body);
  r.source = by_name;
  r.headers = &named;
  r.num_headers = 1;
  t4a_nvrtc_cache *c = disk_cache(0);
  t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  named.content = "#define VAL 8\n";
  c = disk_cache(0);
  a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED); /* another key: no stale hit */
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

/* Ten same-size entries with room for ten and a half: one scan (the cache's first write), not
 * ten; the eleventh write passes the bound, and its scan evicts down to 90%: two entries. */
static void test_writes_scan_only_when_needed(void **state) {
  (void)state;
  const char *opt[12];
  char defs[12][16];
  t4a_nvrtc_request rs[12];
  for (int i = 0; i < 12; i++) {
    snprintf(defs[i], sizeof defs[i], "-DV=%d", 10 + i); /* same length: same entry size */
    rs[i] = define_request(&opt[i], defs[i]);
  }
  t4a_nvrtc_artifact *a = populate(&rs[11]);
  unsigned long long one = test_entry_bytes(g_dir);
  t4a_nvrtc_artifact_release(a);
  test_rmdir(g_dir);
  test_tmpdir(g_dir, sizeof g_dir);
  uint64_t bound = one * 10 + one / 2;
  t4a_nvrtc_cache *c = disk_cache(bound);
  for (int i = 0; i < 10; i++) {
    a = get(c, &rs[i], T4A_NVRTC_ORIGIN_COMPILED);
    t4a_nvrtc_artifact_release(a);
  }
  assert_int_equal(counters(c).nvrtc_disk_writes, 10);
  assert_int_equal(t4a_nvrtc_cache_disk_scans(c), 1);
  assert_int_equal(counters(c).nvrtc_disk_evictions, 0);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 10);
  a = get(c, &rs[10], T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  assert_int_equal(t4a_nvrtc_cache_disk_scans(c), 2);
  assert_int_equal(counters(c).nvrtc_disk_evictions, 2);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 9);
  assert_true(test_entry_bytes(g_dir) <= bound - bound / 10);
  assert_int_equal(counters(c).nvrtc_disk_errors, 0);
  t4a_nvrtc_cache_destroy(c);
}

/* An entry that cannot be removed (EACCES: another user's file in a shared directory) does not
 * make the scan remove a newer one in its place. */
static void test_failed_eviction_removes_no_more(void **state) {
  (void)state;
  const char *opt[11];
  char defs[11][16];
  t4a_nvrtc_request rs[11];
  for (int i = 0; i < 11; i++) {
    snprintf(defs[i], sizeof defs[i], "-DV=%d", 10 + i);
    rs[i] = define_request(&opt[i], defs[i]);
  }
  t4a_nvrtc_artifact *a = populate(&rs[10]);
  unsigned long long one = test_entry_bytes(g_dir);
  t4a_nvrtc_artifact_release(a);
  test_rmdir(g_dir);
  test_tmpdir(g_dir, sizeof g_dir);
  t4a_nvrtc_cache *c = disk_cache(one * 10 + one / 2);
  for (int i = 0; i < 10; i++) {
    a = get(c, &rs[i], T4A_NVRTC_ORIGIN_COMPILED);
    t4a_nvrtc_artifact_release(a);
    if (i < 9) pause_for_mtime(); /* a strict age order: rs[0] is the oldest */
  }
  pause_for_mtime();
  /* FILE_RENAME: 0 is the eleventh write's rename, 1 the scan's first unlink (the oldest). */
  fault_plan plan;
  fault_plan_install(&plan, 1, FAULT_BIT(T4A_FAULT_FILE_RENAME));
  a = get(c, &rs[10], T4A_NVRTC_ORIGIN_COMPILED);
  fault_plan_remove();
  t4a_nvrtc_artifact_release(a);
  assert_int_equal(plan.failed_point, T4A_FAULT_FILE_RENAME);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_disk_evictions, 1); /* the second oldest only, as without the failure */
  assert_int_equal(v.nvrtc_disk_errors, 1);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 10);
  t4a_nvrtc_cache_destroy(c);
  /* The oldest is still there; the second oldest is not. */
  c = disk_cache(0);
  a = get(c, &rs[0], T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_artifact_release(a);
  a = get(c, &rs[1], T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

/* Several processes share one directory with room for two entries of three: writers, readers and
 * eviction race. Every answer has the right bytes and nothing is ever corrupt or an error. */
#ifndef RACE_PROCS /* -DRACE_PROCS=8 -DRACE_ITERS=100 for a longer run by hand */
#define RACE_PROCS 4
#endif
#ifndef RACE_ITERS
#define RACE_ITERS 8
#endif
#define RACE_KEYS 3

static t4a_nvrtc_artifact *g_race_want[RACE_KEYS];
static t4a_nvrtc_request g_race_req[RACE_KEYS];
static uint64_t g_race_bound;
static int g_race_fsync;

static int race_child(unsigned seed) {
  for (int it = 0; it < RACE_ITERS; it++) {
    seed = seed * 1103515245u + 12345u;
    int k = (int)((seed >> 16) % RACE_KEYS);
    t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
    o.disk_dir = g_dir;
    o.disk_max_bytes = g_race_bound;
    o.disk_fsync = g_race_fsync;
    t4a_nvrtc_cache *c = NULL;
    if (t4a_nvrtc_cache_create(g_lib, &o, &c) != T4A_OK) return 10;
    t4a_nvrtc_artifact *a = NULL;
    t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
    if (t4a_nvrtc_cache_compile(c, &g_race_req[k], &a, &out) != T4A_OK) return 11;
    if (out.origin != T4A_NVRTC_ORIGIN_COMPILED && out.origin != T4A_NVRTC_ORIGIN_DISK) return 12;
    if (!same_bytes(a, g_race_want[k])) return 13;
    t4a_counter_values v = counters(c);
    if (v.nvrtc_disk_corrupt != 0) return 14;
    if (v.nvrtc_disk_errors != 0) return 15;
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_cache_destroy(c);
  }
  return 0;
}

static void race(int fsync_writes) {
  g_race_fsync = fsync_writes;
  fflush(NULL);
  pid_t pids[RACE_PROCS];
  for (int p = 0; p < RACE_PROCS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      alarm(120);
      _exit(race_child(0x9e3779b9u * (unsigned)(p + 1) + (unsigned)fsync_writes));
    }
  }
  for (int p = 0; p < RACE_PROCS; p++) {
    int status = 0;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      print_error("process %d: status 0x%x (exit 13: wrong bytes, 14: corrupt, 15: error)\n", p,
                  (unsigned)status);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
}

static void test_processes_race_on_a_small_directory(void **state) {
  (void)state;
  static const char *opts[RACE_KEYS];
  static const char *const defs[RACE_KEYS] = {"-DV=1", "-DV=2", "-DV=3"};
  for (int k = 0; k < RACE_KEYS; k++) {
    g_race_req[k] = define_request(&opts[k], defs[k]);
    g_race_want[k] = compile_uncached(&g_race_req[k]);
  }
  t4a_nvrtc_artifact *a = populate(&g_race_req[0]);
  g_race_bound = test_entry_bytes(g_dir) * 2 + test_entry_bytes(g_dir) / 2; /* room for two */
  t4a_nvrtc_artifact_release(a);
  race(0);
  test_rmdir(g_dir);
  test_tmpdir(g_dir, sizeof g_dir);
  race(1);
  for (int k = 0; k < RACE_KEYS; k++) t4a_nvrtc_artifact_release(g_race_want[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_fresh_cache_hits_disk, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_second_process_hits_disk, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_entries_are_recompiled_and_replaced, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_foreign_entry_is_not_returned, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_size_bound_evicts_least_recently_used, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_manifests_count_against_the_bound, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_stale_temporary_files_are_removed, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_disk_failures_never_fail_a_compile, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_fifo_entry_is_not_waited_on, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_symlink_entry_is_not_followed, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_ptxas_options_file_is_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_absolute_include_is_refused, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_writes_scan_only_when_needed, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_failed_eviction_removes_no_more, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_processes_race_on_a_small_directory, each_setup,
                                      each_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
