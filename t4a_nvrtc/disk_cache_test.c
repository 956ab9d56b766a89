/* The artifact cache's disk level against the real NVRTC: a fresh cache (and a second process)
 * hits the directory with zero NVRTC calls; corrupt, truncated and foreign entries are
 * recompiled, counted and replaced; the size bound evicts least recently used entries; stale
 * temporary files are cleaned; disk failures never fail a compile. */
#define _GNU_SOURCE
#define XXH_STATIC_LINKING_ONLY
#include <fcntl.h>
#include <setjmp.h>
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
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;
static char g_dir[512];

static int setup(void **state) {
  (void)state;
  return t4a_nvrtc_lib_open(NULL, &g_lib) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  return 0;
}

static int each_setup(void **state) {
  (void)state;
  test_tmpdir(g_dir, sizeof g_dir);
  return 0;
}

static int each_teardown(void **state) {
  (void)state;
  test_rmdir(g_dir);
  return 0;
}

static t4a_counter_values counters(const t4a_nvrtc_cache *c) {
  t4a_counter_values v;
  t4a_nvrtc_cache_counters(c, &v);
  return v;
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
  t4a_nvrtc_lib_counters(g_lib, &lib_before);
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
  t4a_nvrtc_lib_counters(g_lib, &lib_after);
  assert_int_equal(lib_after.nvrtc_compile_attempts, lib_before.nvrtc_compile_attempts);
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
    t4a_counter_values v;
    t4a_nvrtc_cache_counters(c, &v);
    if (v.nvrtc_compile_attempts != 0 || v.nvrtc_disk_hits != 1) _exit(13);
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
      cmocka_unit_test_setup_teardown(test_stale_temporary_files_are_removed, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_disk_failures_never_fail_a_compile, each_setup,
                                      each_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
