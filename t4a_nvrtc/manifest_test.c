/* Include manifests validated by stat (nvrtc_manifest.c), directly: a manifest recorded over a
 * small tree, then every change that must invalidate it (an edit found by its metadata, a file
 * appearing where nothing was, in a folder that did not exist, a folder swapped for a link to
 * another) and every one that must not (a touch, a name still absent under a file). The paths
 * are validated folder by folder through open folder descriptors, so the tree has paths that go
 * down, back up, and deeper than the descriptors kept. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/fault.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static char g_root[1024];

static void write_at(const char *rel, const char *text) {
  char p[1400];
  snprintf(p, sizeof p, "%s/%s", g_root, rel);
  for (char *s = p + strlen(g_root) + 1; (s = strchr(s, '/')) != NULL; s++) {
    *s = '\0';
    mkdir(p, 0777);
    *s = '/';
  }
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static uint64_t ns_of(const struct timespec *t) {
  return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

/* Records ROOT/rel as a file (its metadata and hash, "taken" long enough after its change time
 * that validation trusts the metadata) or, file 0, as a path that opened nothing (kind 2 with
 * absent_tree). */
static void probe(t4a_nvrtc_probes *m, const char *rel, int file) {
  char p[1400];
  snprintf(p, sizeof p, "%s/%s", g_root, rel);
  if (!file) {
    assert_int_equal(t4a_nvrtc_probes_add_(m, p, strlen(p), NULL, 1), T4A_OK);
    return;
  }
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  t4a_nvrtc_probed r;
  memset(&r, 0, sizeof r);
  r.kind = T4A_NVRTC_PROBED_FILE;
  r.dev = (uint64_t)st.st_dev;
  r.ino = (uint64_t)st.st_ino;
  r.size = (uint64_t)st.st_size;
  r.mtime_ns = ns_of(&st.st_mtim);
  r.ctime_ns = ns_of(&st.st_ctim);
  r.taken_ns = r.ctime_ns + 5000000000ull;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(buf, n));
  memcpy(r.hash, c.digest, 16);
  assert_int_equal(t4a_nvrtc_probes_add_(m, p, strlen(p), &r, 0), T4A_OK);
}

#define LEVELS 28 /* folders d1/d2/.../d28, a file in each: deeper than the cursor's levels */
static char k_deep[LEVELS][200]; /* k_deep[i]: the file at depth i + 1 */

static void name_levels(void) {
  char dir[200] = "";
  for (int i = 0; i < LEVELS; i++) {
    size_t l = strlen(dir);
    snprintf(dir + l, sizeof dir - l, "%sd%d", l ? "/" : "", i + 1);
    snprintf(k_deep[i], sizeof k_deep[i], "%s/a.h", dir); /* before d<i+1> in the sort */
  }
}

/* The tree: files going down and back up (a/a0.h, then a/b/c/z.h and a/b/y.h, a/w.h, top.h), a
 * file in each of 28 nested folders (sorted parent first, so the cursor's folders nest deeper
 * than it keeps), and names that opened nothing (0none.h first, so the root itself is a level;
 * a/b/none.h, in a missing folder new/sub/n.h, under a file top.h/under.h). The sorted walk looks
 * each one up in a folder opened relative to its parent's. */
static uint8_t *record(size_t *bytes) {
  t4a_nvrtc_probes m;
  memset(&m, 0, sizeof m);
  probe(&m, "0none.h", 0);
  probe(&m, "a/a0.h", 1);
  probe(&m, "a/x.h", 1);
  probe(&m, "a/b/y.h", 1);
  probe(&m, "a/b/c/z.h", 1);
  probe(&m, "a/w.h", 1);
  probe(&m, "top.h", 1);
  for (int i = 0; i < LEVELS; i++) probe(&m, k_deep[i], 1);
  probe(&m, "a/b/none.h", 0);
  probe(&m, "new/sub/n.h", 0);
  probe(&m, "top.h/under.h", 0);
  uint8_t *blob = NULL;
  assert_int_equal(t4a_nvrtc_manifest_encode_(&m, &blob, bytes), T4A_OK);
  t4a_nvrtc_probes_free_(&m);
  return blob;
}

static int valid(uint8_t *blob, size_t bytes, int *refreshed) {
  uint8_t digest[16];
  return t4a_nvrtc_manifest_validate_(blob, bytes, digest, refreshed);
}

static int setup(void **state) {
  (void)state;
  test_tmpdir(g_root, sizeof g_root);
  write_at("a/a0.h", "a0\n");
  write_at("a/x.h", "x\n");
  write_at("a/b/y.h", "y\n");
  write_at("a/b/c/z.h", "z\n");
  write_at("a/w.h", "w\n");
  write_at("top.h", "top\n");
  name_levels();
  for (int i = 0; i < LEVELS; i++) write_at(k_deep[i], "deep\n");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Rewrites rel with text of the same length, keeping the old mtime: only the change time (and
 * then the bytes) can tell. */
static void edit_keeping_mtime(const char *rel, const char *text) {
  char p[1400];
  snprintf(p, sizeof p, "%s/%s", g_root, rel);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  write_at(rel, text);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static void test_unchanged_tree_is_valid_without_rehashing(void **state) {
  setup(state);
  size_t n = 0;
  uint8_t *b = record(&n);
  int refreshed = -1;
  assert_int_equal(valid(b, n, &refreshed), 1);
  assert_int_equal(refreshed, 0); /* every file's metadata matched: nothing hashed again */
  free(b);
  teardown(state);
}

/* Each edit, in each position of the walk (a folder's first file, a folder entered from its
 * parent's, back up after a deeper one, the root, within and deeper than the levels kept):
 * invalid. */
static void test_edits_anywhere_are_invalid(void **state) {
  static const char *const files[] = {"a/a0.h", "a/b/c/z.h", "a/w.h", "top.h", NULL, NULL};
  for (int i = 0; i < 6; i++) {
    setup(state);
    size_t n = 0;
    uint8_t *b = record(&n);
    const char *rel = files[i] != NULL ? files[i] : k_deep[i == 4 ? 20 : LEVELS - 1];
    char text[16];
    snprintf(text, sizeof text, "%s", i == 3 ? "TOP\n" : i >= 4 ? "DEEP\n" : "Q\n");
    if (i == 0) snprintf(text, sizeof text, "A0\n");
    edit_keeping_mtime(rel, text);
    int refreshed = 0;
    assert_int_equal(valid(b, n, &refreshed), 0);
    free(b);
    teardown(state);
  }
}

static void test_touch_is_valid_and_refreshed(void **state) {
  setup(state);
  size_t n = 0;
  uint8_t *b = record(&n);
  char p[1400];
  snprintf(p, sizeof p, "%s/a/w.h", g_root);
  assert_int_equal(utimensat(AT_FDCWD, p, NULL, 0), 0); /* now */
  int refreshed = 0;
  assert_int_equal(valid(b, n, &refreshed), 1);
  assert_int_equal(refreshed, 1);
  free(b);
  teardown(state);
}

/* A file where nothing opened: beside files of a folder already open, in a folder (and its
 * parent) that did not exist; a name under a file stays nothing. */
static void test_new_files_where_nothing_was_are_invalid(void **state) {
  setup(state);
  size_t n = 0;
  uint8_t *b = record(&n);
  int refreshed = 0;
  write_at("a/b/none.h", "now\n");
  assert_int_equal(valid(b, n, &refreshed), 0);
  teardown(state);
  setup(state);
  free(b);
  b = record(&n);
  write_at("new/sub/n.h", "now\n");
  assert_int_equal(valid(b, n, &refreshed), 0);
  teardown(state);
  setup(state);
  free(b);
  b = record(&n);
  char p[1400];
  snprintf(p, sizeof p, "%s/new", g_root);
  assert_int_equal(mkdir(p, 0777), 0); /* the folder alone: still nothing at new/sub/n.h */
  assert_int_equal(valid(b, n, &refreshed), 1);
  free(b);
  teardown(state);
}

/* A folder replaced by a link to a copy whose file differs (same size, mtime and, on most file
 * systems, a different inode): invalid; a link to an identical copy is validated by content. */
static void test_folder_swapped_for_a_link_is_invalid(void **state) {
  setup(state);
  size_t n = 0;
  uint8_t *b = record(&n);
  char a[1400], moved[1400];
  snprintf(a, sizeof a, "%s/a/b", g_root);
  snprintf(moved, sizeof moved, "%s/b-old", g_root);
  write_at("other/y.h", "Y\n");
  write_at("other/c/z.h", "z\n");
  assert_int_equal(rename(a, moved), 0);
  char target[1400];
  snprintf(target, sizeof target, "%s/other", g_root);
  assert_int_equal(symlink(target, a), 0);
  int refreshed = 0;
  assert_int_equal(valid(b, n, &refreshed), 0);
  /* The same link to a folder with the same bytes: valid again, by content (other inodes). */
  write_at("other/y.h", "y\n");
  assert_int_equal(valid(b, n, &refreshed), 1);
  assert_int_equal(refreshed, 1);
  free(b);
  teardown(state);
}

/* A manifest long enough to be validated by several threads (nvrtc_manifest.c: from 96 paths a
 * thread, at most 4): 20 folders of 20 files and 4 absent names each, 480 paths. Whichever part a
 * change falls in, the answer is the one-thread walk's; a touch refreshed by another thread is
 * reported; with no thread able to start (the THREAD_CREATE fault point) the caller validates
 * every part itself. */
#define LONG_DIRS 20
#define LONG_FILES 20

static void long_name(char *out, size_t cap, int d, int f, int absent) {
  snprintf(out, cap, "long/d%02d/%s%02d.h", d, absent ? "none" : "f", f);
}

static uint8_t *record_long(size_t *bytes) {
  t4a_nvrtc_probes m;
  memset(&m, 0, sizeof m);
  char rel[64];
  for (int d = 0; d < LONG_DIRS; d++) {
    for (int f = 0; f < LONG_FILES; f++) {
      long_name(rel, sizeof rel, d, f, 0);
      probe(&m, rel, 1);
    }
    for (int f = 0; f < 4; f++) {
      long_name(rel, sizeof rel, d, f, 1);
      probe(&m, rel, 0);
    }
  }
  uint8_t *blob = NULL;
  assert_int_equal(t4a_nvrtc_manifest_encode_(&m, &blob, bytes), T4A_OK);
  t4a_nvrtc_probes_free_(&m);
  return blob;
}

static void setup_long(void) {
  test_tmpdir(g_root, sizeof g_root);
  char rel[64];
  for (int d = 0; d < LONG_DIRS; d++) {
    for (int f = 0; f < LONG_FILES; f++) {
      long_name(rel, sizeof rel, d, f, 0);
      write_at(rel, "long\n");
    }
  }
}

static int g_refuse_threads;
static int refuse_threads(t4a_fault_point point, void *user) {
  (void)user;
  return g_refuse_threads && point == T4A_FAULT_THREAD_CREATE;
}

static void test_long_manifests_are_validated_in_parts(void **state) {
  (void)state;
  t4a_fault_set_hook(refuse_threads, NULL);
  for (g_refuse_threads = 0; g_refuse_threads < 2; g_refuse_threads++) {
    setup_long();
    size_t n = 0;
    uint8_t *b = record_long(&n);
    int refreshed = -1;
    assert_int_equal(valid(b, n, &refreshed), 1);
    assert_int_equal(refreshed, 0);
    /* A touch in the last part: valid, and the refresh is reported. */
    char rel[64], p[1400];
    long_name(rel, sizeof rel, LONG_DIRS - 1, LONG_FILES - 1, 0);
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    assert_int_equal(utimensat(AT_FDCWD, p, NULL, 0), 0);
    refreshed = 0;
    assert_int_equal(valid(b, n, &refreshed), 1);
    assert_int_equal(refreshed, 1);
    free(b);
    /* An edit in each quarter, and a file where nothing was in the last: invalid. */
    static const int dirs[4] = {0, 6, 12, LONG_DIRS - 1};
    for (int q = 0; q < 5; q++) {
      b = record_long(&n);
      if (q < 4) {
        long_name(rel, sizeof rel, dirs[q], 7, 0);
        edit_keeping_mtime(rel, "LONG\n");
      } else {
        long_name(rel, sizeof rel, LONG_DIRS - 1, 3, 1);
        write_at(rel, "now\n");
      }
      refreshed = 0;
      assert_int_equal(valid(b, n, &refreshed), 0);
      free(b);
      if (q < 4) write_at(rel, "long\n"); /* back, for the next quarter's recording */
    }
    teardown(state);
  }
  t4a_fault_set_hook(NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unchanged_tree_is_valid_without_rehashing),
      cmocka_unit_test(test_edits_anywhere_are_invalid),
      cmocka_unit_test(test_touch_is_valid_and_refreshed),
      cmocka_unit_test(test_new_files_where_nothing_was_are_invalid),
      cmocka_unit_test(test_folder_swapped_for_a_link_is_invalid),
      cmocka_unit_test(test_long_manifests_are_validated_in_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
