/* Include roots through the artifact cache, against the real NVRTC (wrapped: compiles and live
 * programs counted) and the real CUDA toolkit's headers (tests that need the toolkit skip when it
 * is absent): the key covers the content of every file the includes reach through the roots and
 * every path searched before it, so editing one byte of a nested header (even with its size and
 * modification time kept) is a miss at both levels, a touch is a hit, another root order or
 * another root is a miss, a shadowing header is a miss; a miss probes only what the includes
 * reach (no tree walked, nothing beside a root listed); computed includes that cannot be
 * followed, ".." through a symbolic link and what a probe cannot key (a missing root, a file as
 * root, a symbolic link loop, a dangling link, a FIFO, an unreadable file on an include's path)
 * are refused with a typed status naming the path or the include, with nothing compiled and
 * nothing cached; a root edited while NVRTC runs is not cached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
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

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;
static char g_dir[512];   /* the disk cache */
static char g_tree[512];  /* include roots live here */
static char g_root[600];  /* g_tree/r1 */
static char g_root2[600]; /* g_tree/r2 */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char *dir, const char *rel, const char *text) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  mkdir(dir, 0777);
  /* parents */
  for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
    *s = '\0';
    mkdir(p, 0777);
    *s = '/';
  }
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  return nvrtc_wrap_open(&g_lib, NULL) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  nvrtc_wrap_close();
  t4a_nvrtc_roots_forget_();
  return 0;
}

static const char k_top[] = "#pragma once\n#include \"a/b/deep.h\"\n";
static const char k_deep[] = "#pragma once\n#define DEEP_VALUE 1234\n";
static const char k_uses_top[] =
    "#include <top.h>\n"
    "extern \"C\" __global__ void k(int *p) { *p = DEEP_VALUE; }\n";

static int each_setup(void **state) {
  (void)state;
  nvrtc_wrap_reset(-1, 0);
  test_tmpdir(g_dir, sizeof g_dir);
  test_tmpdir(g_tree, sizeof g_tree);
  snprintf(g_root, sizeof g_root, "%s/r1", g_tree);
  snprintf(g_root2, sizeof g_root2, "%s/r2", g_tree);
  write_file(g_root, "top.h", k_top);
  write_file(g_root, "a/b/deep.h", k_deep);
  write_file(g_root, "a/unused.h", "#pragma once\n");
  mkdir(g_root2, 0777);
  return 0;
}

static int each_teardown(void **state) {
  (void)state;
  rm_tree(g_dir);
  rm_tree(g_tree);
  fault_plan_remove();
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

static size_t memory_entries(const t4a_nvrtc_cache *c) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  return s.memory_entries;
}

static t4a_nvrtc_cache *new_cache(int with_disk) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = with_disk ? g_dir : NULL;
  t4a_nvrtc_cache *c = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_OK);
  return c;
}

static t4a_nvrtc_request roots_request(const char *source, const char *const *roots, size_t n) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.source = source;
  r.target = "sm_90";
  r.output = T4A_NVRTC_OUTPUT_PTX;
  r.include_roots = roots;
  r.num_include_roots = n;
  return r;
}

/* Compiles through the cache; returns the origin, and whether the PTX holds `needle`. */
static t4a_nvrtc_origin compile_origin(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r,
                                       const char *needle) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_cache_compile(c, r, &a, &o);
  if (st != T4A_OK) {
    t4a_error e;
    char buf[600];
    t4a_error_last(&e);
    print_error("compile: %s\nlog: %s\n", t4a_error_format(&e, buf, sizeof buf),
                o.log != NULL ? o.log : "");
  }
  assert_int_equal(st, T4A_OK);
  if (needle != NULL) {
    size_t n = 0;
    const char *ptx = t4a_nvrtc_artifact_data(a, &n);
    assert_non_null(memmem(ptx, n, needle, strlen(needle)));
  }
  t4a_nvrtc_origin origin = o.origin;
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  return origin;
}

/* Rewrites a file in place with the same size, then sets its modification time back: only its
 * change time (and content) differ. */
static void edit_keep_mtime(const char *dir, const char *rel, const char *text) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  struct stat before;
  assert_int_equal(stat(p, &before), 0);
  assert_int_equal((size_t)before.st_size, strlen(text));
  int fd = open(p, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
  struct timespec ts[2] = {before.st_atim, before.st_mtim};
  assert_int_equal(futimens(fd, ts), 0);
  close(fd);
}

static void touch(const char *dir, const char *rel) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  assert_int_equal(utimensat(AT_FDCWD, p, NULL, 0), 0);
}

/* Compiles r, which must fail with want (its message holding s1 and s2) with nothing cached;
 * compiled: the NVRTC compiles it may run (a first miss's, alongside the check). */
static void expect_refused_compiled(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r, t4a_status want,
                                    const char *s1, const char *s2, long compiled) {
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  long before = wrapped_compiles() + compiled;
  size_t entries = memory_entries(c), files = test_count_files(g_dir, ".t4a", NULL);
  t4a_status st = t4a_nvrtc_cache_compile(c, r, &a, &o);
  t4a_error e;
  t4a_error_last(&e);
  if (st != want || (s1 != NULL && strstr(e.message, s1) == NULL) ||
      (s2 != NULL && strstr(e.message, s2) == NULL)) {
    print_error("status %d (want %d): %s\n", (int)st, (int)want, e.message);
  }
  assert_int_equal(st, want);
  if (s1 != NULL) assert_non_null(strstr(e.message, s1));
  if (s2 != NULL) assert_non_null(strstr(e.message, s2));
  assert_null(a);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  assert_int_equal(wrapped_compiles(), before);
  assert_int_equal(memory_entries(c), entries); /* nothing cached */
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), files);
  t4a_nvrtc_outcome_deinit(&o);
}

static void expect_refused(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r, t4a_status want,
                           const char *s1, const char *s2) {
  expect_refused_compiled(c, r, want, s1, s2, 0);
}

/* ---- Soundness ---------------------------------------------------------------------------- */

static void test_nested_edit_is_a_miss_at_both_levels(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  /* Validated by stat once; now known valid while the roots' memos see no event. */
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  /* One byte of the nested header, same size, modification time restored. */
  edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 1235\n");
  assert_int_equal(compile_origin(c, &r, "1235"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1235"), T4A_NVRTC_ORIGIN_MEMORY);
  /* Disk: a fresh cache over the directory hits the edited content... */
  t4a_nvrtc_cache *c2 = new_cache(1);
  assert_int_equal(compile_origin(c2, &r, "1235"), T4A_NVRTC_ORIGIN_DISK);
  /* ...and after another edit, seen in a "new process" (every memo dropped), compiles. */
  t4a_nvrtc_roots_forget_();
  edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 1236\n");
  t4a_nvrtc_cache *c3 = new_cache(1);
  assert_int_equal(compile_origin(c3, &r, "1236"), T4A_NVRTC_ORIGIN_COMPILED);
  /* Back to the first content: its entries are still there (the key is the content). */
  edit_keep_mtime(g_root, "a/b/deep.h", k_deep);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(compile_origin(c3, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 3);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c3);
}

static void test_added_and_removed_files_are_misses(void **state) {
  (void)state;
  const char *roots[] = {g_root, g_root2};
  /* <extra.h> is found in r2 now; a file of that name added to r1 (searched first) wins. */
  write_file(g_root2, "extra.h", "#define EXTRA 41\n");
  static const char src[] =
      "#include <extra.h>\n"
      "extern \"C\" __global__ void k(int *p) { *p = EXTRA; }\n";
  t4a_nvrtc_request r = roots_request(src, roots, 2);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "41"), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(g_root, "extra.h", "#define EXTRA 42\n");
  assert_int_equal(compile_origin(c, &r, "42"), T4A_NVRTC_ORIGIN_COMPILED);
  char p[1200];
  snprintf(p, sizeof p, "%s/extra.h", g_root);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(compile_origin(c, &r, "41"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

static void test_touch_is_a_hit(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  touch(g_root, "a/b/deep.h");
  touch(g_root, "top.h");
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  /* A new process (memo dropped) with the disk memo: a disk hit, the touched files re-hashed. */
  t4a_nvrtc_roots_forget_();
  touch(g_root, "a/b/deep.h");
  t4a_nvrtc_cache *c2 = new_cache(1);
  assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 1);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

static void test_root_order_and_other_roots_are_misses(void **state) {
  (void)state;
  write_file(g_root2, "top.h", k_top);
  write_file(g_root2, "a/b/deep.h", k_deep);
  const char *ab[] = {g_root, g_root2};
  const char *ba[] = {g_root2, g_root};
  const char *b[] = {g_root2};
  t4a_nvrtc_cache *c = new_cache(0);
  t4a_nvrtc_request r = roots_request(k_uses_top, ab, 2);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_MEMORY);
  r = roots_request(k_uses_top, ba, 2);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  r = roots_request(k_uses_top, b, 1);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(wrapped_compiles(), 3);
  t4a_nvrtc_cache_destroy(c);
}

/* Two toolkit trees under g_tree, tkA and tkB (700-byte paths into a and b), alike but for
 * deep.h's value: 1234 in tkA, 4242 in tkB. */
static void two_toolkits(char *a, char *b) {
  snprintf(a, 700, "%s/tkA", g_tree);
  snprintf(b, 700, "%s/tkB", g_tree);
  write_file(a, "include/top.h", k_top);
  write_file(a, "include/a/b/deep.h", k_deep);
  write_file(b, "include/top.h", k_top);
  write_file(b, "include/a/b/deep.h", "#pragma once\n#define DEEP_VALUE 4242\n");
}

/* Another toolkit behind the same path (a symbolic link on the way to the root retargeted, as
 * `ln -sfn` does: a new link renamed over the old one) is a miss; back to the first, a hit. */
static void test_retargeted_toolkit_link_is_a_miss(void **state) {
  (void)state;
  char a[700], b[700], link[700], tmp[720], root[720];
  two_toolkits(a, b);
  snprintf(link, sizeof link, "%s/cuda", g_tree);
  snprintf(tmp, sizeof tmp, "%s/cuda.new", g_tree);
  snprintf(root, sizeof root, "%s/include", link);
  assert_int_equal(symlink(a, link), 0);
  const char *roots[] = {root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(symlink(b, tmp), 0);
  assert_int_equal(rename(tmp, link), 0);
  assert_int_equal(compile_origin(c, &r, "4242"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(symlink(a, tmp), 0);
  assert_int_equal(rename(tmp, link), 0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

/* A link on the way whose own target is another link in a directory no watch covers,
 * retargeted: a miss. */
static void test_link_chain_retarget_is_a_miss(void **state) {
  (void)state;
  char a[700], b[700], links[700], alt[720], tmp[720], cuda[700], root[720];
  two_toolkits(a, b);
  snprintf(links, sizeof links, "%s/links", g_tree);
  mkdir(links, 0777);
  snprintf(alt, sizeof alt, "%s/alt", links);
  snprintf(tmp, sizeof tmp, "%s/alt.new", links);
  snprintf(cuda, sizeof cuda, "%s/cuda", g_tree);
  snprintf(root, sizeof root, "%s/include", cuda);
  assert_int_equal(symlink(a, alt), 0);
  assert_int_equal(symlink(alt, cuda), 0);
  const char *roots[] = {root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(symlink(b, tmp), 0);
  assert_int_equal(rename(tmp, alt), 0); /* as update-alternatives does */
  assert_int_equal(compile_origin(c, &r, "4242"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
}

/* The link's target folder moved away and a new one made in its place, in a folder no watch
 * covers: a miss. */
static void test_link_target_parent_replaced_is_a_miss(void **state) {
  (void)state;
  char y[700], yold[720], tk[720], cuda[700], root[720];
  snprintf(y, sizeof y, "%s/x/y", g_tree);
  snprintf(yold, sizeof yold, "%s/x/y.old", g_tree);
  snprintf(tk, sizeof tk, "%s/tk", y);
  char xdir[700];
  snprintf(xdir, sizeof xdir, "%s/x", g_tree);
  mkdir(xdir, 0777);
  mkdir(y, 0777);
  write_file(tk, "include/top.h", k_top);
  write_file(tk, "include/a/b/deep.h", k_deep);
  snprintf(cuda, sizeof cuda, "%s/cuda", g_tree);
  snprintf(root, sizeof root, "%s/include", cuda);
  assert_int_equal(symlink(tk, cuda), 0);
  const char *roots[] = {root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(rename(y, yold), 0);
  assert_int_equal(mkdir(y, 0777), 0);
  write_file(tk, "include/top.h", k_top);
  write_file(tk, "include/a/b/deep.h", "#pragma once\n#define DEEP_VALUE 4343\n");
  assert_int_equal(compile_origin(c, &r, "4343"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
}

static long g_edit_during_compile;
static void edit_on_compile(void *user) {
  (void)user;
  if (g_edit_during_compile++ == 0) {
    edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 9999\n");
  }
}

static void test_root_edited_during_compile_is_not_cached(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  g_edit_during_compile = 0;
  g_nvrtc_wrap.on_compile = edit_on_compile;
  t4a_nvrtc_artifact *changed = NULL, *again = NULL;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &changed, NULL), T4A_OK);
  g_nvrtc_wrap.on_compile = NULL;
  assert_int_equal(counters(c).nvrtc_roots_changed, 1);
  assert_int_equal(memory_entries(c), 0);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
  /* The next compile keys the new content. */
  assert_int_equal(compile_origin(c, &r, "9999"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "9999"), T4A_NVRTC_ORIGIN_MEMORY);
  /* The handed-out artifact (NVRTC read 9999) is not keyed as the content the check saw (1234):
   * a module cache keyed by artifacts does not take one for the other. */
  edit_keep_mtime(g_root, "a/b/deep.h", k_deep);
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &again, NULL), T4A_OK);
  size_t n = 0;
  const char *ptx = t4a_nvrtc_artifact_data(again, &n);
  assert_non_null(memmem(ptx, n, "1234", 4));
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(changed), t4a_nvrtc_artifact_key_hex(again));
  t4a_nvrtc_artifact_release(changed);
  t4a_nvrtc_artifact_release(again);
  t4a_nvrtc_cache_destroy(c);
}

/* ---- The include manifest ------------------------------------------------------------------
 * A request's key names what its includes reached through the roots (files and the paths that
 * opened nothing before them), not the whole trees: a lookup validates that list by stat. A
 * "new process" below is every memo dropped and a new cache over the same directory; that it
 * answered from the manifest alone is shown by t4a_nvrtc_roots_checks_ not moving. */

static t4a_nvrtc_cache *new_process(void) {
  t4a_nvrtc_roots_forget_();
  return new_cache(1);
}

/* NVRTC's #pragma once goes by the file, not its bytes: two identical headers that become one
 * file (a hard link) include once instead of twice, and the other way round. The manifest keeps
 * which listed paths were one file, so such a swap is a miss at both levels though every byte is
 * the same (a stale hit before); a copy swapped for another identical copy keeps the hit. */
static void test_files_that_become_one_are_a_miss(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char once[] = "#pragma once\n#ifdef SEEN\n#define TWICE 1\n#endif\n#define SEEN\n";
  write_file(g_root, "a.h", once);
  write_file(g_root, "b.h", once);
  t4a_nvrtc_request r = roots_request(
      "#include <a.h>\n#include <b.h>\n#ifdef TWICE\n#define V 222\n#else\n#define V 111\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = V; }\n",
      roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "222"), T4A_NVRTC_ORIGIN_COMPILED);
  char a[700], b[700];
  snprintf(a, sizeof a, "%s/a.h", g_root);
  snprintf(b, sizeof b, "%s/b.h", g_root);
  assert_int_equal(unlink(b), 0);
  assert_int_equal(link(a, b), 0);
  assert_int_equal(compile_origin(c, &r, "111"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
  /* Two copies again, in a new process: the disk's manifest of the hard link is not trusted. */
  assert_int_equal(unlink(b), 0);
  write_file(g_root, "b.h", once);
  c = new_process();
  assert_int_equal(compile_origin(c, &r, "222"), T4A_NVRTC_ORIGIN_DISK); /* the first key again */
  t4a_nvrtc_cache_destroy(c);
  /* Another identical copy in b.h's place: the same files, one each, so the hit holds. */
  assert_int_equal(unlink(b), 0);
  write_file(g_root, "b.h", once);
  c = new_process();
  assert_int_equal(compile_origin(c, &r, "222"), T4A_NVRTC_ORIGIN_DISK);
  t4a_nvrtc_cache_destroy(c);
}

/* A manifest known valid in memory (validated at the roots' current epoch) is looked at again
 * after any event, even when another request's miss has probed the roots since. */
static void test_known_valid_manifest_sees_a_later_edit(void **state) {
  (void)state;
  static const char other[] =
      "#include <top.h>\n"
      "extern \"C\" __global__ void k2(int *p) { *p = DEEP_VALUE + 0; }\n";
  const char *roots[] = {g_root};
  t4a_nvrtc_request r1 = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_request r2 = roots_request(other, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r1, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r2, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r2, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(compile_origin(c, &r2, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 1235\n");
  assert_int_equal(compile_origin(c, &r1, "1235"), T4A_NVRTC_ORIGIN_COMPILED); /* probes again */
  assert_int_equal(compile_origin(c, &r2, "1235"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(wrapped_compiles(), 4);
  t4a_nvrtc_cache_destroy(c);
}

/* A header added to an earlier root, where the search finds it before the reached one. */
static void test_shadowing_header_in_an_earlier_root_is_a_miss(void **state) {
  (void)state;
  char p[1200];
  snprintf(p, sizeof p, "%s/top.h", g_root);
  write_file(g_root2, "top.h", "#pragma once\n#define DEEP_VALUE 2468\n");
  assert_int_equal(unlink(p), 0); /* r1 holds a/b/deep.h only; <top.h> is found in r2 */
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 2);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "2468"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache *c2 = new_process();
  uint64_t checks = t4a_nvrtc_roots_checks_();
  assert_int_equal(compile_origin(c2, &r, "2468"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(t4a_nvrtc_roots_checks_(), checks); /* the manifest answered */
  /* r1/top.h now shadows r2/top.h: a miss at both levels. */
  write_file(g_root, "top.h", k_top);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache *c3 = new_process();
  assert_int_equal(compile_origin(c3, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  /* Removed again: the first artifact, from memory. */
  assert_int_equal(unlink(p), 0);
  assert_int_equal(compile_origin(c, &r, "2468"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c3);
}

/* A path under a folder that does not exist is recorded as that folder: creating the folder and
 * a shadowing header in it is a miss (in a new process too). */
static void test_shadowing_header_in_a_new_folder_is_a_miss(void **state) {
  (void)state;
  write_file(g_root2, "sub/deeper/x.h", "#pragma once\n#define XV 1111\n");
  static const char src[] =
      "#include <sub/deeper/x.h>\n"
      "extern \"C\" __global__ void k(int *p) { *p = XV; }\n";
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request(src, roots, 2);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1111"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache *c2 = new_process();
  uint64_t checks = t4a_nvrtc_roots_checks_();
  assert_int_equal(compile_origin(c2, &r, "1111"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(t4a_nvrtc_roots_checks_(), checks);
  write_file(g_root, "sub/deeper/x.h", "#pragma once\n#define XV 2222\n");
  t4a_nvrtc_cache *c3 = new_process();
  assert_int_equal(compile_origin(c3, &r, "2222"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "2222"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c3);
}

/* A quoted include in a root file searches the includer's directory first: a header added there
 * shadows the one found at the root. */
static void test_header_beside_the_includer_is_a_miss(void **state) {
  (void)state;
  write_file(g_root, "lib/mid.h", "#pragma once\n#include \"inner.h\"\n");
  write_file(g_root, "inner.h", "#pragma once\n#define INNER 1357\n");
  static const char src[] =
      "#include <lib/mid.h>\n"
      "extern \"C\" __global__ void k(int *p) { *p = INNER; }\n";
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(src, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1357"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1357"), T4A_NVRTC_ORIGIN_MEMORY);
  write_file(g_root, "lib/inner.h", "#pragma once\n#define INNER 8642\n");
  assert_int_equal(compile_origin(c, &r, "8642"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache *c2 = new_process();
  assert_int_equal(compile_origin(c2, &r, "8642"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

/* Files added elsewhere under the root, and edits of files no include reaches, are hits that
 * validate the manifest only (no probe in a new process). */
static void test_files_the_includes_do_not_reach_keep_the_hit(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(g_root, "a/new.h", "#define NEW 1\n");
  write_file(g_root, "zzz/other.h", "#define OTHER 1\n");
  write_file(g_root, "a/unused.h", "#pragma once\n#define CHANGED 1\n");
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache *c2 = new_process();
  uint64_t checks = t4a_nvrtc_roots_checks_(), hashed = t4a_nvrtc_roots_files_hashed_();
  assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(t4a_nvrtc_roots_checks_(), checks);
  assert_int_equal(t4a_nvrtc_roots_files_hashed_(), hashed);
  assert_int_equal(wrapped_compiles(), 1);
  /* The manifest lists the two reached files and the paths probed before them. */
  assert_int_equal(test_count_files(g_dir, ".t4m", NULL), 1);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

/* A kernel that includes nothing under the roots has an empty manifest: a new process's disk hit
 * stats nothing under them. */
static void test_plain_kernel_validates_nothing(void **state) {
  (void)state;
  static const char src[] = "extern \"C\" __global__ void k(int *p) { *p = 7; }\n";
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request(src, roots, 2);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache *c2 = new_process();
  uint64_t checks = t4a_nvrtc_roots_checks_();
  write_file(g_root, "top.h", "#pragma once\n#define DEEP_VALUE 1\n");
  assert_int_equal(compile_origin(c2, &r, NULL), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(t4a_nvrtc_roots_checks_(), checks);
  /* Another root list is another key. */
  const char *one[] = {g_root};
  r = roots_request(src, one, 1);
  assert_int_equal(compile_origin(c2, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

static int find_manifest(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  size_t n = strlen(path);
  if (flag == FTW_F && n > 4 && strcmp(path + n - 4, ".t4m") == 0) {
    static char found[1200];
    snprintf(found, sizeof found, "%s", path);
    setenv("T4A_TEST_MANIFEST", found, 1);
  }
  return 0;
}

/* A corrupt or truncated manifest on disk is not used: the miss probes and checks again, and the
 * artifact it keys is the one on disk. */
static void test_corrupt_manifest_is_a_miss(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  unsetenv("T4A_TEST_MANIFEST");
  nftw(g_dir, find_manifest, 16, FTW_PHYS);
  const char *m = getenv("T4A_TEST_MANIFEST");
  assert_non_null(m);
  char path[1200];
  snprintf(path, sizeof path, "%s", m);
  for (int round = 0; round < 3; round++) {
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    if (round == 0) { /* one byte flipped in a path */
      uint8_t b;
      assert_int_equal(pread(fd, &b, 1, st.st_size - 90), 1);
      b ^= 1;
      assert_int_equal(pwrite(fd, &b, 1, st.st_size - 90), 1);
    } else if (round == 1) {
      assert_int_equal(ftruncate(fd, st.st_size / 2), 0);
    } else {
      assert_int_equal(ftruncate(fd, 0), 0);
    }
    close(fd);
    t4a_nvrtc_cache *c2 = new_process();
    uint64_t checks = t4a_nvrtc_roots_checks_();
    assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
    assert_true(t4a_nvrtc_roots_checks_() > checks); /* not trusted: checked again */
    t4a_nvrtc_cache_destroy(c2);
  }
  assert_int_equal(wrapped_compiles(), 1);
  t4a_nvrtc_cache_destroy(c);
}

/* ---- What the key cannot see -------------------------------------------------------------- */

static void test_computed_includes_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_cache *c = new_cache(1);
  t4a_nvrtc_request r =
      roots_request("#define H <top.h>\n#include H\n__global__ void k() {}\n", roots, 1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "computed include", "the source, line 2");
  /* In a header under the root: resolved by expanding its object-like macros over every
   * definition the reached texts hold (the source's too), each expansion checked and followed
   * as a literal include... */
  write_file(g_root, "a/computed.h", "#define NEXT \"a/b/deep.h\"\n#include NEXT\n");
  r = roots_request(
      "#include \"a/computed.h\"\nextern \"C\" __global__ void k(int *p) { *p = DEEP_VALUE; }\n",
      roots, 1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  /* ...and refused when an expansion could leave the roots or cannot be followed; any
   * definition counts, in the source, an option or another root file. */
  t4a_nvrtc_cache *cr = new_cache(0);
  static const char *const dangers[][2] = {
      {"#define NEXT \"/etc/hostname\"\n", "an absolute path"},
      {"#define NEXT </etc/hostname>\n", "an absolute path"},
      {"#define F(x) x\n#define NEXT F(\"a/b/deep.h\")\n", "function-like macro"},
      {"#define NEXT ROOTDIR\n#define ROOTDIR \"/tmp/x.h\"\n", "an absolute path"},
      {"#define NEXT \"\\x2ftmp/x.h\"\n", "backslash"},
      {"#define NEXT __DATE__\n", "predefined macro"},
  };
  for (size_t i = 0; i < sizeof dangers / sizeof *dangers; i++) {
    char src[512];
    snprintf(src, sizeof src, "%s#include \"a/computed.h\"\n", dangers[i][0]);
    r = roots_request(src, roots, 1);
    expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/computed.h, line 2", dangers[i][1]);
  }
  static const char *const opt[] = {"-DNEXT=\"/etc/hostname\""};
  r = roots_request("#include \"a/computed.h\"\n", roots, 1);
  r.options = opt;
  r.num_options = 1;
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/computed.h, line 2", "an absolute path");
  write_file(g_root, "a/other.h", "#define NEXT </etc/hostname>\n");
  r = roots_request("#include \"a/other.h\"\n#include \"a/computed.h\"\n", roots, 1);
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/computed.h, line 2", "an absolute path");
  /* A __has_include wrapper applied to a macro in a root file. */
  write_file(g_root, "a/wrapuse.h",
             "#define HAS2(x) __has_include(x)\n#define M2 <top.h>\n#if HAS2(M2)\n#endif\n");
  r = roots_request("#include \"a/wrapuse.h\"\n", roots, 1);
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/wrapuse.h, line 3", "macro operand");
  /* Between the tokens a root file's fast lane skips: an identifier split by a splice, a
   * literal's prefix, `defined`, a wrapper used in code (second pass). */
  static const char *const lanes[][2] = {
      {"int a = b + c; int d = __has_incl\\\nude(\"/etc/hostname\");\n", "line 1: __has_include"},
      {"int a = u8\"(\", b = R\"x( __has_include(\"a\") )x\";\nint c = __has_embed(</etc/x>);\n",
       "line 2: __has_embed"},
      {"int a = defined (__has_include) + defined __has_embed;\nint b = x.y + __has_include_next "
       "(\"/etc/hostname\");\n",
       "line 2: __has_include_next"},
      {"#define HAS3(x) __has_include(x)\n#define M3 <top.h>\nint a = b, c = (HAS3(M3));\n",
       "line 3: HAS3"},
  };
  for (size_t i = 0; i < sizeof lanes / sizeof *lanes; i++) {
    write_file(g_root, "a/lane.h", lanes[i][0]);
    r = roots_request("#include \"a/lane.h\"\n", roots, 1);
    expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/lane.h", lanes[i][1]);
  }
  /* Pieces that ## in the roots could join into __has_include. */
  write_file(g_root, "a/paste.h",
             "#define CAT(a, b) a ## b\n#define P1 __has_\n#define P2 include\n");
  r = roots_request("#include \"a/paste.h\"\n", roots, 1);
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "a/paste.h, line 2", "paste __has_include");
  /* ...however many other pieces come first: 70 distinct ones that start no join (none is a
   * prefix of __has_include_next or __has_embed), then the two that join; NVRTC's own pieces
   * (`_`, `__`) come after them all. */
  {
    static const char *const targets[] = {"__has_include_next", "__has_embed", "__has_include"};
    char text[4096] = "#define CAT(a, b) a ## b\n#define JUNK", seen[80][20];
    size_t num = 0;
    for (size_t t = 0; t < 2; t++) {
      size_t tl = strlen(targets[t]);
      for (size_t i = 1; i < tl && num < 70; i++) {
        for (size_t len = 1; i + len <= tl && len < tl && num < 70; len++) {
          char piece[20];
          memcpy(piece, targets[t] + i, len);
          piece[len] = '\0';
          int skip = 0;
          for (size_t k = 0; k < 3; k++) skip |= strncmp(targets[k], piece, len) == 0;
          for (size_t k = 0; k < num; k++) skip |= strcmp(seen[k], piece) == 0;
          if (skip) continue;
          memcpy(seen[num++], piece, len + 1);
          strcat(text, " ");
          strcat(text, piece);
        }
      }
    }
    assert_int_equal(num, 70);
    strcat(text, "\n#define P1 __has_\n#define P2 include\n");
    write_file(g_root, "a/pieces.h", text);
    r = roots_request("#include \"a/pieces.h\"\n", roots, 1);
    /* (The join may start at NVRTC's own `_`, collected after these: kept past the 64th too.) */
    expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "paste __has_include", NULL);
  }
  /* A named header's "quoted" include of a file: NVRTC looks in the working directory first. */
  t4a_nvrtc_header h = {"mine.h", "#include \"top.h\"\n", 0, 0};
  r = roots_request("#include \"mine.h\"\n", roots, 1);
  r.headers = &h;
  r.num_headers = 1;
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "header \"mine.h\", line 1", "working directory");
  h.content = "#include_next \"top.h\"\n"; /* the same search (a stale hit before) */
  expect_refused(cr, &r, T4A_INVALID_ARGUMENT, "header \"mine.h\", line 1", "working directory");
  h.content = "#include <top.h>\n";
  assert_int_equal(compile_origin(cr, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(cr);
  /* Leaving the root with "..": probed like any path, so keyed by what it reaches. */
  write_file(g_tree, "outside.h", "#define OUTSIDE 31\n");
  write_file(g_root, "a/up.h", "#include \"../../outside.h\"\n");
  r = roots_request(
      "#include <a/up.h>\nextern \"C\" __global__ void k(int *p) { *p = OUTSIDE; }\n", roots, 1);
  assert_int_equal(compile_origin(c, &r, "31"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "31"), T4A_NVRTC_ORIGIN_MEMORY);
  write_file(g_tree, "outside.h", "#define OUTSIDE 32\n");
  assert_int_equal(compile_origin(c, &r, "32"), T4A_NVRTC_ORIGIN_COMPILED);
  /* Absolute paths. */
  write_file(g_root, "a/abs.h", "#include \"/etc/hostname\"\n");
  r = roots_request("#include <a/abs.h>\n", roots, 1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "a/abs.h, line 1", "absolute path");
  /* A wrapper macro applying __has_include to its parameter is checked at each use. */
  write_file(g_root, "w.h", "#define HAS(x) __has_include(x)\n");
  r = roots_request("#include <w.h>\n#if HAS(<top.h>)\n#endif\n__global__ void k() {}\n", roots,
                    1);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  r = roots_request("#include <w.h>\n#define P </etc/hostname>\n#if HAS(P)\n#endif\n", roots, 1);
  t4a_nvrtc_cache *c2 = new_cache(0);
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_cache_compile(c2, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "HAS"));
  assert_int_equal(memory_entries(c2), 0);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c);
}

static void test_links_out_of_the_root_are_refused_or_followed(void **state) {
  (void)state;
  char outside[1200], link[1200];
  snprintf(outside, sizeof outside, "%s/outside", g_tree);
  write_file(outside, "o.h", "#define O_VALUE 77\n");
  write_file(outside, "q.h", "#include \"beside.h\"\n");
  snprintf(link, sizeof link, "%s/o.h", g_root);
  char target[1300];
  snprintf(target, sizeof target, "%s/o.h", outside);
  assert_int_equal(symlink(target, link), 0);
  const char *roots[] = {g_root};
  t4a_nvrtc_cache *c = new_cache(0);
  /* A linked file is followed and keyed by its target's content. */
  t4a_nvrtc_request r = roots_request(
      "#include <o.h>\nextern \"C\" __global__ void k(int *p) { *p = O_VALUE; }\n", roots, 1);
  assert_int_equal(compile_origin(c, &r, "77"), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(outside, "o.h", "#define O_VALUE 78\n");
  assert_int_equal(compile_origin(c, &r, "78"), T4A_NVRTC_ORIGIN_COMPILED);
  /* ".." out of a linked directory goes to the target's parent (the kernel's rule): refused. */
  snprintf(link, sizeof link, "%s/ld", g_root);
  assert_int_equal(symlink(outside, link), 0);
  r = roots_request("#include <ld/../top.h>\n", roots, 1);
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "symbolic link"));
  assert_non_null(strstr(e.message, "ld/../top.h"));
  /* Through the linked directory, without "..", it is followed and keyed. */
  r = roots_request(
      "#include <ld/o.h>\nextern \"C\" __global__ void k(int *p) { *p = O_VALUE; }\n", roots, 1);
  assert_int_equal(compile_origin(c, &r, "78"), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(outside, "o.h", "#define O_VALUE 79\n");
  assert_int_equal(compile_origin(c, &r, "79"), T4A_NVRTC_ORIGIN_COMPILED);
  /* ".." out of the root to a name beside it (the root is a real directory, so the kernel and a
   * lexical reading agree): probed, followed and keyed. */
  r = roots_request(
      "#include \"../outside/o.h\"\nextern \"C\" __global__ void k(int *p) { *p = O_VALUE; }\n",
      roots, 1);
  assert_int_equal(compile_origin(c, &r, "79"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "79"), T4A_NVRTC_ORIGIN_MEMORY);
  write_file(outside, "o.h", "#define O_VALUE 80\n");
  assert_int_equal(compile_origin(c, &r, "80"), T4A_NVRTC_ORIGIN_COMPILED);
  /* A directory of the path replaced by a link after the manifest was recorded: the path with
   * ".." kept is in the manifest too, so the hit is checked as the kernel resolves it. */
  char sub[1300];
  snprintf(sub, sizeof sub, "%s/sub", g_root);
  mkdir(sub, 0777);
  write_file(g_root, "real.h", "#define REAL 5\n");
  write_file(outside, "real.h", "#define REAL 6\n");
  r = roots_request(
      "#include <sub/../real.h>\nextern \"C\" __global__ void k(int *p) { *p = REAL; }\n", roots,
      1);
  assert_int_equal(compile_origin(c, &r, "5"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "5"), T4A_NVRTC_ORIGIN_MEMORY);
  char deeper[1300];
  snprintf(deeper, sizeof deeper, "%s/deeper", outside);
  mkdir(deeper, 0777);
  assert_int_equal(rmdir(sub), 0);
  assert_int_equal(symlink(deeper, sub), 0); /* sub/.. is now outside/, whose real.h differs */
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "symbolic link"));
  t4a_nvrtc_cache_destroy(c);
}

/* ---- Bad roots ---------------------------------------------------------------------------- */

static void test_bad_roots_are_typed_errors(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(1);
  char p[1200], q[1300];
  /* Missing. */
  snprintf(p, sizeof p, "%s/missing", g_tree);
  const char *roots[] = {p};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "does not exist", "missing");
  /* A file. */
  snprintf(p, sizeof p, "%s/top.h", g_root);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "is not a directory", "top.h");
  /* A symbolic link loop on an include's path, and a link to an ancestor elsewhere in the tree
   * (no longer walked: it does not matter). */
  snprintf(p, sizeof p, "%s", g_root);
  snprintf(q, sizeof q, "%s/a/loop", g_root);
  assert_int_equal(symlink("..", q), 0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  unlink(q);
  t4a_nvrtc_request rs = roots_request("#include <self.h>\n", roots, 1);
  snprintf(q, sizeof q, "%s/self.h", g_root);
  assert_int_equal(symlink("self.h", q), 0);
  expect_refused(c, &rs, T4A_INVALID_ARGUMENT, "loop", "self.h");
  unlink(q);
  /* Dangling. */
  assert_int_equal(symlink("nowhere.h", q), 0);
  expect_refused(c, &rs, T4A_INVALID_ARGUMENT, "dangling", "self.h");
  unlink(q);
  /* A FIFO. */
  snprintf(q, sizeof q, "%s/a/fifo", g_root);
  assert_int_equal(mkfifo(q, 0666), 0);
  t4a_nvrtc_request rf = roots_request("#include <a/fifo>\n", roots, 1);
  expect_refused(c, &rf, T4A_INVALID_ARGUMENT, "not a regular file", "a/fifo");
  unlink(q);
  /* Unreadable (tests run as root, so the failure is injected): every open and read of the
   * probes in turn; each is IO naming the path, nothing compiled, nothing cached. */
  int failures = 0;
  for (long n = 0;; n++) {
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_FILE_OPEN) | FAULT_BIT(T4A_FAULT_FILE_READ));
    t4a_nvrtc_root_reach total;
    t4a_status st = t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      assert_int_equal(total.files, 2);
      break;
    }
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(st, T4A_IO);
    size_t rl = strlen(g_root); /* a long root's prefix is cut from the message, its end kept */
    assert_non_null(strstr(e.message, g_root + (rl > 100 ? rl - 100 : 0)));
    failures++;
  }
  assert_true(failures >= 4); /* 2 files: opens and reads */
  /* The cached compile: an unreadable header is IO naming it (a memory-only cache: its first
   * file open is the probes'). */
  t4a_nvrtc_cache *c2 = new_cache(0);
  int refused = 0;
  {
    fault_plan plan;
    fault_plan_install(&plan, 0, FAULT_BIT(T4A_FAULT_FILE_OPEN));
    t4a_nvrtc_artifact *a = NULL;
    long before = wrapped_compiles();
    t4a_status st = t4a_nvrtc_cache_compile(c2, &r, &a, NULL);
    fault_plan_remove();
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(st, T4A_IO);
    size_t rl = strlen(g_root);
    assert_non_null(strstr(e.message, g_root + (rl > 100 ? rl - 100 : 0)));
    assert_null(a);
    assert_int_equal(wrapped_compiles(), before);
    assert_int_equal(memory_entries(c2), 0);
    refused = 1;
  }
  assert_true(refused);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c);
}

/* One root file whose quoted includes outgrow the check's queue (64, then moved): each is still
 * searched for beside the file that includes it (ASan saw the check read the moved queue). */
static void test_many_includes_in_one_root_file(void **state) {
  (void)state;
  char all[4096] = "";
  for (int i = 0; i < 70; i++) {
    char rel[64], line[64];
    snprintf(rel, sizeof rel, "fan/f%d.h", i);
    write_file(g_root, rel, "#include \"leaf.h\"\n");
    snprintf(line, sizeof line, "#include \"f%d.h\"\n", i);
    strcat(all, line);
  }
  write_file(g_root, "fan/leaf.h", "#define LEAF 1\n");
  write_file(g_root, "fan/all.h", all);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request("#include <fan/all.h>\n", roots, 1);
  t4a_nvrtc_root_reach total;
  assert_int_equal(t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total), T4A_OK);
  assert_int_equal(total.files, 72); /* all.h, f0.h ... f69.h, leaf.h */
  assert_int_equal(total.empty, 0);  /* each found beside its includer first */
}

/* A miss probes what the includes reach and nothing else: no tree walked, nothing beside a root
 * listed. A tree of unrelated files and a file added beside the root change neither the cost nor
 * the key. */
static void test_miss_probes_only_what_the_includes_reach(void **state) {
  (void)state;
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 2);
  t4a_nvrtc_root_reach per[2], total;
  uint64_t hashed = t4a_nvrtc_roots_files_hashed_();
  assert_int_equal(t4a_nvrtc_includes_resolve(g_lib, &r, per, &total), T4A_OK);
  assert_int_equal(t4a_nvrtc_roots_files_hashed_() - hashed, 2); /* top.h, a/b/deep.h */
  assert_int_equal(total.files, 2);
  assert_int_equal(total.bytes, strlen(k_top) + strlen(k_deep));
  assert_int_equal(per[0].files, 2);
  assert_int_equal(per[1].files, 0);
  assert_int_equal(per[0].empty, 0); /* found in r1 first: r2 is not searched for them */
  for (int i = 0; i < 200; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "zzz/d%d/f%d.h", i % 10, i);
    write_file(g_root, rel, "#define UNRELATED 1\n");
  }
  hashed = t4a_nvrtc_roots_files_hashed_();
  assert_int_equal(t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total), T4A_OK);
  assert_int_equal(t4a_nvrtc_roots_files_hashed_() - hashed, 2);
  /* The cache: a file beside the root (once part of the root's fingerprint) keeps the hit. */
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(g_tree, "beside.h", "#define BESIDE 1\n");
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache *c2 = new_process();
  assert_int_equal(compile_origin(c2, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 1);
  /* Bad arguments. */
  assert_int_equal(t4a_nvrtc_includes_resolve(NULL, &r, NULL, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_nvrtc_includes_resolve(g_lib, NULL, NULL, NULL), T4A_INVALID_ARGUMENT);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

/* A manifest recorded by a miss is known valid (its paths watched before they were probed) until
 * an event; one validated by stat in a process that watches is watched too. */
static void test_known_valid_until_an_event(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  uint64_t e = t4a_nvrtc_roots_epoch_(NULL, 0);
  assert_true(e != 0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(t4a_nvrtc_roots_epoch_(NULL, 0), e); /* a hit changes nothing */
  /* An edit of a file no include reaches, in a watched directory: an event; the manifest is
   * validated again (still valid) and watched again. */
  write_file(g_root, "a/unused.h", "#pragma once\n#define X 2\n");
  uint64_t e2 = t4a_nvrtc_roots_epoch_(NULL, 0);
  assert_true(e2 != e);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  /* Watched again: the edit of the nested header is seen. */
  edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 1239\n");
  assert_true(t4a_nvrtc_roots_epoch_(NULL, 0) != e2);
  assert_int_equal(compile_origin(c, &r, "1239"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
}

/* A dangling symbolic link on the way to a probed path: its target could appear where no watch
 * is, so the manifest is not known valid; the next lookup validates it by stat and sees the
 * target appear. */
static void test_dangling_link_on_the_way_is_validated_by_stat(void **state) {
  (void)state;
  char link[1200], later[1200];
  snprintf(link, sizeof link, "%s/dl", g_root);
  snprintf(later, sizeof later, "%s/later", g_tree);
  assert_int_equal(symlink(later, link), 0);
  static const char src[] =
      "#if __has_include(<dl/./x.h>)\n#include <dl/./x.h>\n#else\n#define XV 1\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = XV + 1000; }\n";
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(src, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1001"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1001"), T4A_NVRTC_ORIGIN_MEMORY);
  write_file(later, "x.h", "#define XV 2\n");
  assert_int_equal(compile_origin(c, &r, "1002"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
}

/* A relative root resolves from the working directory, which chdir changes without an event:
 * its manifest is validated by stat at each lookup, so the other directory's header is seen. */
static void test_relative_root_follows_the_working_directory(void **state) {
  (void)state;
  char cwd[1200], other[1200];
  assert_non_null(getcwd(cwd, sizeof cwd));
  snprintf(other, sizeof other, "%s/elsewhere", g_tree);
  write_file(other, "r1/top.h", "#pragma once\n#define DEEP_VALUE 9876\n");
  const char *roots[] = {"r1"};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(chdir(g_tree), 0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(chdir(other), 0);
  assert_int_equal(compile_origin(c, &r, "9876"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(chdir(g_tree), 0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(chdir(cwd), 0);
  t4a_nvrtc_cache_destroy(c);
}

/* A forked child has its own inotify instance: its lookups do not take the events the parent's
 * known-valid manifests need. */
static void test_forked_child_does_not_take_the_parents_events(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = new_cache(0);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    t4a_nvrtc_root_reach total;
    int ok = t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total) == T4A_OK && total.files == 2;
    edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 5555\n");
    ok = ok && t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total) == T4A_OK;
    (void)t4a_nvrtc_roots_epoch_(NULL, 0); /* the child reads its own queue */
    t4a_nvrtc_cache_destroy(c); /* its copy of the parent's cache: a leak checker's child too */
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(compile_origin(c, &r, "5555"), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
}

/* The include check of a request, with or without skipping a second pass that could change
 * nothing: status, message and reach. */
typedef struct check_result {
  t4a_status st;
  char message[600];
  t4a_nvrtc_root_reach total;
  uint64_t second_passes;
} check_result;

static check_result check_with(const t4a_nvrtc_request *r, int skip) {
  check_result out;
  memset(&out, 0, sizeof out);
  t4a_nvrtc_check_skip_second_pass_(skip);
  uint64_t before = t4a_nvrtc_check_second_passes_();
  out.st = t4a_nvrtc_includes_resolve(g_lib, r, NULL, &out.total);
  out.second_passes = t4a_nvrtc_check_second_passes_() - before;
  t4a_nvrtc_check_skip_second_pass_(1);
  if (out.st != T4A_OK) {
    t4a_error e;
    t4a_error_last(&e);
    snprintf(out.message, sizeof out.message, "%s", e.message);
  }
  return out;
}

/* Checks r with the second-pass shortcut on and off: refused (INVALID_ARGUMENT) with a message
 * holding `needle` both times; `what` and `i` name the case in a failure. */
static void assert_refused_both_ways(const t4a_nvrtc_request *r, const char *needle,
                                     const char *what, size_t i) {
  for (int skip = 0; skip <= 1; skip++) {
    check_result c = check_with(r, skip);
    if (c.st != T4A_INVALID_ARGUMENT || strstr(c.message, needle) == NULL) {
      fail_msg("%s %zu, skip %d: %s \"%s\"", what, i, skip, t4a_status_name(c.st), c.message);
    }
  }
}

/* The check passes r (with the second pass's shortcut on). */
static void assert_check_passes(const t4a_nvrtc_request *r, const char *what, size_t i) {
  check_result c = check_with(r, 1);
  if (c.st != T4A_OK) fail_msg("%s %zu: %s \"%s\"", what, i, t4a_status_name(c.st), c.message);
}

static void assert_same_check(const check_result *a, const check_result *b, const char *what) {
  if (a->st != b->st || strcmp(a->message, b->message) != 0 || a->total.files != b->total.files ||
      a->total.bytes != b->total.bytes || a->total.empty != b->total.empty) {
    print_error("%s: skipping %d '%s' %llu files, not %d '%s' %llu files\n", what, (int)a->st,
                a->message, (unsigned long long)a->total.files, (int)b->st, b->message,
                (unsigned long long)b->total.files);
  }
  assert_int_equal(a->st, b->st);
  assert_string_equal(a->message, b->message);
  assert_int_equal(a->total.files, b->total.files);
  assert_int_equal(a->total.bytes, b->total.bytes);
  assert_int_equal(a->total.empty, b->total.empty);
}

/* Pieces of __has_include found only in a function-like macro's arguments (the second pass
 * finds them) still join and are refused with the shortcut on; pieces that cannot join let it
 * skip the second pass, with the same verdict; an operand with a backslash keeps it. */
static void test_second_pass_skipped_only_when_it_changes_nothing(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "a/args.h",
             "#define CAT(a, b) a ## b\n#define ID(x) x\nint v = ID(__has_);\nint w = ID(include);\n");
  t4a_nvrtc_request r = roots_request("#include <a/args.h>\n", roots, 1);
  check_result on = check_with(&r, 1), off = check_with(&r, 0);
  assert_same_check(&on, &off, "args");
  assert_int_equal(on.st, T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(on.message, "paste __has_include"));
  assert_int_equal(on.second_passes, 1);
  write_file(g_root, "a/args.h",
             "#define CAT(a, b) a ## b\n#define ID(x) x\nint v = ID(__has_);\nint w = ID(zzz);\n");
  on = check_with(&r, 1);
  off = check_with(&r, 0);
  assert_same_check(&on, &off, "no join");
  assert_int_equal(on.st, T4A_OK);
  assert_int_equal(on.second_passes, 0);
  assert_int_equal(off.second_passes, 1);
  /* "include" only in an include's operand, inside the arguments (the second pass lexes the
   * operand as tokens): refused both ways. */
  write_file(g_root, "a/include/x.h", "#pragma once\n");
  write_file(g_root, "a/args.h",
             "#define CAT(a, b) a ## b\n#define ID(x) x\nint v = ID(__has_\n"
             "#include <a/include/x.h>\n);\n");
  on = check_with(&r, 1);
  off = check_with(&r, 0);
  assert_same_check(&on, &off, "operand");
  assert_int_equal(on.st, T4A_INVALID_ARGUMENT);
  assert_int_equal(on.second_passes, 1);
  /* A backslash in an operand: not split, so kept. */
  write_file(g_root, "a/args.h",
             "#define CAT(a, b) a ## b\n#include \"a\\\\b.h\"\n");
  write_file(g_root, "a/a\\b.h", "#pragma once\n");
  on = check_with(&r, 1);
  off = check_with(&r, 0);
  assert_same_check(&on, &off, "backslash");
  assert_int_equal(on.second_passes, off.second_passes);
}

/* The toolkit's headers (when a toolkit is found): the check with and without the shortcut gives
 * the same status, message and reach; cuda_fp16.h's skips its second pass. */
static void test_second_pass_shortcut_on_toolkit_headers(void **state) {
  (void)state;
  t4a_nvrtc_toolkit tk;
  if (t4a_nvrtc_toolkit_find(NULL, &tk) != T4A_OK) skip();
  static const char *const headers[] = {
      "cuda_fp16.h",       "cuda_bf16.h",           "cuda/std/atomic",
      "cuda/std/complex",  "cuda/std/tuple",        "cooperative_groups.h",
      "cub/block/block_reduce.cuh", "thrust/device_vector.h", "nv/target",
      "cuda/barrier",      "mma.h",                 "cuda_fp8.h",
  };
  uint64_t skipped = 0;
  for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
    char src[200];
    snprintf(src, sizeof src, "#include <%s>\nextern \"C\" __global__ void k(int *p) { *p = 1; }\n",
             headers[i]);
    t4a_nvrtc_request r = roots_request(src, tk.roots, tk.num_roots);
    check_result on = check_with(&r, 1), off = check_with(&r, 0);
    assert_same_check(&on, &off, headers[i]);
    assert_true(on.second_passes <= off.second_passes);
    skipped += off.second_passes - on.second_passes;
    if (i == 0) {
      assert_int_equal(on.st, T4A_OK);
      assert_int_equal(off.second_passes, 1);
      assert_int_equal(on.second_passes, 0);
    }
  }
  assert_true(skipped >= 1);
}

/* An operand that a macro's body hands to __has_include is replaced where the macro is used, so
 * it is refused unless it is a string literal or the one wrapper form tracked: a <...> operand
 * (its identifiers may be parameters, or macros defined anywhere), a wrapper whose name or
 * parameter has 32 bytes or more, or whose operand is past the 16th parameter; and a wrapper's
 * <...> argument that names a macro (replaced before the wrapper substitutes it). Each was a
 * stale hit before: the check read the operand as a literal, or dropped the wrapper. The tracked
 * wrapper and a literal in a body still pass. */
static void test_operands_replaced_in_macro_bodies_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const struct {
    const char *file, *text, *source;
  } refused[] = {
      {"g.h", "#define G(x) __has_include(<x>)\n",
       "#include <g.h>\n#if G(/etc/hostname)\nint yes;\n#endif\n"},
      {"d.h", "#define H __has_include(<D/hostname>)\n",
       "#include <d.h>\n#define D /etc\n#if H\nint yes;\n#endif\n"},
      {"w.h", "#define WRAPPER_WITH_A_NAME_LONGER_THAN_31_CHARS(x) __has_include(x)\n",
       "#include <w.h>\n#if WRAPPER_WITH_A_NAME_LONGER_THAN_31_CHARS(</etc/hostname>)\n#endif\n"},
      {"w17.h",
       "#define W17(a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,x) __has_include(x)\n",
       "#include <w17.h>\n#if W17(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,</etc/hostname>)\n"
       "#endif\n"},
      {"w7.h",
       "#define W7(a_parameter_name_longer_than_31_chars) "
       "__has_include(a_parameter_name_longer_than_31_chars)\n",
       "#include <w7.h>\n#if W7(</etc/hostname>)\n#endif\n"},
      {"s.h", "#define S(x) __has_include(#x)\n", "#include <s.h>\n#if S(/etc/hostname)\n#endif\n"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    write_file(g_root, refused[i].file, refused[i].text);
    t4a_nvrtc_request r = roots_request(refused[i].source, roots, 1);
    assert_refused_both_ways(&r, "replaced where the macro is used", refused[i].file, i);
  }
  /* The request's own <...> operand in a macro body, with a header of that name: refused too. */
  t4a_nvrtc_header h[1] = {{.name = "x", .content = "\n"}};
  t4a_nvrtc_request r = roots_request(
      "#define G(x) __has_include(<x>)\n#if G(/etc/hostname)\nint yes;\n#endif\n", NULL, 0);
  r.headers = h;
  r.num_headers = 1;
  check_result c = check_with(&r, 1);
  assert_int_equal(c.st, T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(c.message, "replaced where the macro is used"));
  /* A wrapper's <...> argument is expanded before it is substituted: a macro in it is a
   * computed include too. */
  write_file(g_root, "wr.h", "#define HAS(x) __has_include(x)\n");
  r = roots_request("#include <wr.h>\n#define D /etc\n#if HAS(<D/hostname>)\nint yes;\n#endif\n",
                    roots, 1);
  assert_refused_both_ways(&r, "names the macro D", "wrapper argument with a macro", 0);
  /* The tracked wrapper, and a literal in a body, still pass. */
  write_file(g_root, "ok.h",
             "#define HAS(x) __has_include(x)\n#define HAS_TOP __has_include(\"top.h\")\n");
  r = roots_request("#include <ok.h>\n#if HAS(<top.h>) && HAS_TOP\nint yes;\n#endif\n", roots, 1);
  for (int skip = 0; skip <= 1; skip++) {
    c = check_with(&r, skip);
    if (c.st != T4A_OK) fail_msg("the wrapper, skip %d: %s \"%s\"", skip, t4a_status_name(c.st), c.message);
  }
}

static int toolkit(t4a_nvrtc_toolkit *tk);

/* Kernels that call their own macros beside the toolkit's headers stay cacheable: MAX-like calls
 * with one-letter arguments, and a pasting CAT(e, n) beside CUB (a check that counted every piece
 * of the request's macro arguments against the closure's refused both). */
static void test_toolkit_kernels_with_macro_calls_are_cached(void **state) {
  (void)state;
  t4a_nvrtc_toolkit tk;
  if (!toolkit(&tk)) skip();
  static const char *const kernels[] = {
      "#include <cuda_fp16.h>\n#include <cub/block/block_reduce.cuh>\n"
      "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#define IDX(i, n) ((i) % (n))\n"
      "extern \"C\" __global__ void k(const float *x, float *out, int n) {\n"
      "  using R = cub::BlockReduce<float, 128>;\n  __shared__ typename R::TempStorage t;\n"
      "  int i = threadIdx.x, e = 1, d = 2, h = 3, s = 4, l = 5, u = 6, c = 7, b = 8, m = 9;\n"
      "  float v = R(t).Sum(x[IDX(i, n)] + MAX(e, d) + MAX(h, s) + MAX(l, u) + MAX(c, b) + m);\n"
      "  if (i == 0) *out = v + __half2float(__float2half(v));\n}\n",
      "#include <cub/block/block_reduce.cuh>\n#define CAT(a, b) a##b\n"
      "extern \"C\" __global__ void k(int *p) { int CAT(e, n) = 1, CAT(x, s) = 1; *p = en + xs; }\n",
  };
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    t4a_nvrtc_request r = roots_request(kernels[i], tk.roots, tk.num_roots);
    for (int skip = 0; skip <= 1; skip++) {
      check_result c = check_with(&r, skip);
      if (c.st != T4A_OK) {
        fail_msg("kernel %zu, skip %d: %s \"%s\"", i, skip, t4a_status_name(c.st), c.message);
      }
    }
  }
}

/* Pastes that join the request's own tokens with the roots' definitions (nvrtc_expand.c): each
 * of these was a stale hit through real NVRTC (an independent review's probes): the root's
 * macros make __has_include, or a wrapper's name, from a token the request passes, so the file
 * the include names is in no manifest. */
static const char k_cat[] = "#define CAT(a, b) a ## b\n";

static void test_pastes_through_the_request_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "ka.h", "#include <k.h>\n#define P K\n#define APPLY(f, x) f(x)\n"
                             "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n");
  write_file(g_root, "kx.h", "#define PFX __has_\n#define CAT(a, b) a ## b\n"
                             "#define XCAT(a, b) CAT(a, b)\n");
  write_file(g_root, "kv.h", "#define CAT(a, b) a ## b\n#define K(...) CAT(__has_, __VA_ARGS__)\n"
                             "#define KO(x, ...) CAT(__has_, __VA_OPT__(x))\n");
  write_file(g_root, "kd.h", "#define CAT(a, b) a %:%: b\n#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "kc.h", "#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "hw.h", "#define HAS(x) __has_include(x)\n#define CAT(a, b) a ## b\n");
  write_file(g_root, "hw2.h", "#define HAS(x) __has_include(x)\n");
  static const struct {
    const char *source, *option;
  } refused[] = {
      {"#include <k.h>\n#if K(include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <ka.h>\n#if P(include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <k.h>\n#define P K\n#if P(include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <kx.h>\n#define SFX include\n#if XCAT(PFX, SFX)(\"/etc/hostname\")\n#endif\n",
       NULL},
      {"#include <k.h>\n#if K(SFX)(\"/etc/hostname\")\n#endif\n", "-DSFX=include"},
      {"#include <ka.h>\n#if APPLY(K, include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <ka.h>\n#if MAX(K(include)(\"/etc/hostname\"), 0)\n#endif\n", NULL},
      {"#include <hw.h>\n#if CAT(H, AS)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <hw2.h>\n#define CAT(a, b) a ## b\n#if CAT(H, AS)(\"/etc/hostname\")\n#endif\n",
       NULL},
      {"#include <kv.h>\n#if K(include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <kv.h>\n#if KO(include, 1)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <k.h>\n#if K(\\\ninclude)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <k.h>\n#if K2(include)(\"/etc/hostname\")\n#endif\n#define K2(x) K(x)\n", NULL},
      {"#include <kd.h>\n#if K(include)(\"/etc/hostname\")\n#endif\n", NULL},
      {"#include <kc.h>\n#if K(include)(\"/etc/hostname\")\n#endif\n", "-DCAT(a,b)=a##b"},
      {"#include <kx.h>\n#define J(x) XCAT(PFX, x)\n#define Q J\n#if Q(include)(\"/etc/hostname\")\n"
       "#endif\n",
       NULL},
      {"#include <k.h>\nint v = K(include)(\"/etc/hostname\");\n", NULL}, /* any line */
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    t4a_nvrtc_request r = roots_request(refused[i].source, roots, 1);
    const char *opts[1] = {refused[i].option};
    r.options = opts;
    r.num_options = refused[i].option != NULL;
    assert_refused_both_ways(&r, "expands to a paste that makes", "case", i);
  }
  /* The message names the text, line, invocation, what was made and where. */
  t4a_nvrtc_header h[1] = {{.name = "h.h", .content = "#include <k.h>\n\n#if K(include)(<x.h>)\n#endif\n"}};
  t4a_nvrtc_request r = roots_request("#include \"h.h\"\n", roots, 1);
  r.headers = h;
  r.num_headers = 1;
  check_result c = check_with(&r, 1);
  assert_int_equal(c.st, T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(c.message, "header \"h.h\", line 3: K expands to a paste that makes "
                                    "__has_include (in the macro CAT)"));
  /* What the preprocessor does not make passes: an operand of ## is not expanded first, an empty
   * __VA_OPT__ drops its tokens, a macro in its own expansion is not expanded again. */
  static const char *const accepted[] = {
      "#include <kx.h>\nint CAT(PFX, include) = 1;\n",
      "#include <kv.h>\nint KO(include) = 1;\n",
      "#include <k.h>\n#define f(x) x f\n#define g g CAT(g, 1)\nint f(1)(2)(3) = 1, g;\n",
      "#include <k.h>\nint K(embed_x) = 1;\n",
  };
  for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
    r = roots_request(accepted[i], roots, 1);
    uint64_t runs = t4a_nvrtc_expand_runs_();
    c = check_with(&r, 1);
    if (c.st != T4A_OK) fail_msg("accepted %zu: %s \"%s\"", i, t4a_status_name(c.st), c.message);
    assert_true(t4a_nvrtc_expand_runs_() > runs); /* the invocations were expanded */
  }
}

/* The same pastes where the expansion must read the texts as NVRTC does (independent reviews'
 * probes, each a stale hit before its fix): placemarkers, __VA_OPT__, literals, comments and
 * splices in directives, long parameter lists and names, directives and includes among a macro's
 * arguments, an invocation a root file leaves open, pragma operands and string literals. */
static void test_pastes_where_the_texts_read_as_nvrtc_reads_them(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define K(x) __has_ ## x\n#define APPLY(f, x) f(x)\n"
                            "#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n"
                            "#define PFX __has_\n");
  write_file(g_root, "kvo.h", "#define R(s, ...) __has_ ## __VA_OPT__(zz) ## s\n");
  write_file(g_root, "inc.h", "include\n");
  write_file(g_root, "open.h", "APPLY(K,\n");
  write_file(g_root, "paren.h", "int z = (\n");
  write_file(g_root, "ks.h", "#include <k.h>\n#define KK K\n#define S \"unroll 2 + KK(include)(\\\"/etc/hostname\\\")\"\n"
                             "static void f(int n) {\n_Pragma(S)\nfor (int i = 0; i < n; i++) {}\n}\n");
  char longname[1101], source[2400];
  memset(longname, 'L', 1100);
  longname[1100] = '\0';
  static const struct {
    const char *source, *option, *needle;
  } refused[] = {
      {"#include <k.h>\n#define M(x, y, z) 0 || x ## y ## z\n#if M(,,K)(include)(\"/etc/hostname\")\n"
       "#endif\n", NULL, "expands to a paste"},
      {"#include <k.h>\n#if M(,,K)(include)(\"/etc/hostname\")\n#endif\n",
       "-DM(x,y,z)=0 || x ## y ## z", "expands to a paste"},
      {"#include <kvo.h>\n#if R(include)(\"/etc/hostname\")\n#endif\n", "-std=c++20",
       "expands to a paste"},
      {"#include <kvo.h>\n#define E\n#if R(include, E)(\"/etc/hostname\")\n#endif\n", "-std=c++20",
       "expands to a paste"},
      {"#include <k.h>\n#define A_ (1'0 + sizeof(\"'/*\"))\n#if K(include)(\"/etc/hostname\")\n"
       "#endif\n", "-std=c++17", "expands to a paste"},
      {"#include <k.h>\n#define S_ R\"(?\?)\"\n#if K(include)(\"/etc/hostname\")\n#endif\n",
       "-std=c++14", "both trigraphs and raw strings"},
      {"#include <k.h>\n#if __has_include(<(.h>) || K(include)(\"/etc/hostname\")\n#endif\n", NULL,
       "expands to a paste"},
      {"#include <k.h>\n#if 0 || K /*\n*/ (include)(\"/etc/hostname\")\n#endif\n", NULL,
       "expands to a paste"},
      {"#include <k.h>\n#define K2(x) K /*\n*/ (x)\n#if 0 || K2(include)(\"/etc/hostname\")\n"
       "#endif\n", NULL, "expands to a paste"},
      {"#include <k.h>\n#define K\\\n2(x) K(x)\n#if 0 || K2(include)(\"/etc/hostname\")\n#endif\n",
       NULL, "expands to a paste"},
      {"#include <k.h>\n#define K17(a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17) "
       "K(a17)\n#if 0 || K17(,,,,,,,,,,,,,,,,include)(\"/etc/hostname\")\n#endif\n", NULL,
       "expands to a paste"},
      {"#include <k.h>\nstatic_assert(!(APPLY(K,\n#if 0\nzz,\n#endif\ninclude)(\"/etc/hostname\")), "
       "\"\");\n", NULL, "a directive stands among the arguments of APPLY"},
      {"#include <k.h>\n#define N XCAT\nstatic_assert(!(N(\n#undef N\n#define N(x) x\nPFX, "
       "N(include))(\"/etc/hostname\")), \"\");\n", NULL, "a directive stands among the arguments"},
      {"#include <k.h>\nstatic_assert(!(APPLY(K,\n#include <inc.h>\n)(\"/etc/hostname\")), \"\");\n",
       NULL, "an include among open parentheses"},
      {"#include <k.h>\nstatic_assert(!(\n#include <paren.h>\ninclude)(\"/etc/hostname\")), \"\");\n",
       NULL, "an include among open parentheses"},
      {"#include <k.h>\nint v = 1;\n#include <open.h>\ninclude)(\"/etc/hostname\");\n", NULL,
       "what a macro's arguments hold there"}, /* the root's rule or the text's */
      {"#include <k.h>\nint v = 1;\n#include <paren.h>\ninclude)(\"/etc/hostname\");\n", NULL,
       "a parenthesis closes one this text did not open"},
      {NULL, NULL, "expands to a paste"}, /* a name of 1,100 bytes */
      /* later probes: operands NVRTC expands outside #if, _Pragma's string, a body's
       * unclosed parenthesis, a wrapper named with a digit */
      {"#include <k.h>\n#line XCAT(1, K(include)(\"/etc/hostname\"))\n", NULL,
       "XCAT expands to a paste"},
      {"#include <k.h>\nvoid f(int n) {\n#pragma unroll XCAT(1, K(include)(\"/etc/hostname\"))\n"
       "for (int i = 0; i < n; i++) {}\n}\n", NULL, "XCAT expands to a paste"},
      {"#include <k.h>\nvoid f(int n) {\n_Pragma(\"unroll XCAT(1, K(include)(\\\"/etc/hostname\\\"))\")\n"
       "for (int i = 0; i < n; i++) {}\n}\n", NULL, "XCAT expands to a paste"},
      {"#include <k.h>\nvoid f(int n) {\n_Pragma(\"unroll 1 + __has_include(\\\"/etc/hostname\\\")\")\n"
       "for (int i = 0; i < n; i++) {}\n}\n", NULL, "in a string literal, line 1: __has_include"},
      {"#include <k.h>\n#define OPEN K(\n#define RP )\nstatic_assert((1 RP, \"\");\n"
       "static_assert(!(OPEN include)(\"/etc/hostname\")), \"\");\n", NULL,
       "the body of OPEN opens a parenthesis it does not close"},
      {"#include <k.h>\n#if OPEN include)(\"/etc/hostname\")\n#endif\n", "-DOPEN=K(",
       "the body of OPEN opens a parenthesis it does not close"},
      /* and a string that becomes a pragma's operand in a body, through a
       * pasted _Pragma, a raw string; a body's ')' first, which closes nothing of its own */
      {"#include <k.h>\n#define PR2 _Pragma(\"unroll 10 + K(include)(\\\"/etc/hostname\\\")\")\n"
       "void f(int n) {\nPR2\nfor (int i = 0; i < n; i++) {}\n}\n", NULL, "K expands to a paste"},
      {"#include <k.h>\nvoid f(int n) {\nCAT(_Pra, gma)(\"unroll 10 + __has_include(\\\"/etc/hostname\\\")\")\n"
       "for (int i = 0; i < n; i++) {}\n}\n", NULL, "in a string literal, line 1: __has_include"},
      {"#include <k.h>\nvoid f(int n) {\n_Pragma(R\"(unroll 10 + __has_include(\"/etc/hostname\"))\")\n"
       "for (int i = 0; i < n; i++) {}\n}\n", NULL, "in a string literal, line 1: __has_include"},
      {"#include <k.h>\n#define OPEN ) || K(\nstatic_assert((0 OPEN include)(\"/etc/hostname\")), \"\");\n",
       NULL, "the body of OPEN opens a parenthesis it does not close"},
      /* a root's own string that becomes a pragma's operand, through an alias of K */
      {"#include <ks.h>\n", NULL, "could paste __has_include together"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    const char *src = refused[i].source;
    if (src == NULL) {
      snprintf(source, sizeof source,
               "#include <k.h>\n#define %s K\n#if 0 || %s(include)(\"/etc/hostname\")\n#endif\n",
               longname, longname);
      src = source;
    }
    t4a_nvrtc_request r = roots_request(src, roots, 1);
    const char *opts[1] = {refused[i].option};
    r.options = opts;
    r.num_options = refused[i].option != NULL;
    assert_refused_both_ways(&r, refused[i].needle, "case", i);
  }
}

/* _Pragma's string is read as a #pragma line, roots or none (it was a stale hit of the plain
 * cache too); a pragma among a macro's arguments changes nothing and passes. */
static void test_pragma_operands_are_checked(void **state) {
  (void)state;
  t4a_nvrtc_request r = roots_request(
      "extern \"C\" __global__ void k(int *p, int n) {\n"
      "_Pragma(\"unroll 10 + __has_include(\\\"/etc/hostname\\\")\")\n"
      "for (int i = 0; i < n; i++) p[i] = i;\n}\n", NULL, 0);
  assert_refused_both_ways(&r, "in a string literal, line 1: __has_include \"/etc/hostname\" is "
                               "an absolute path", "no roots", 0);
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define K(x) __has_ ## x\n#define APPLY(f, x) f(x)\n");
  r = roots_request("#include <k.h>\nextern \"C\" __global__ void k(int *p, int n) {\n"
                    "APPLY(int m =, n);\n_Pragma(\"unroll 4\")\n#pragma unroll 2\n"
                    "for (int i = 0; i < m; i++) p[i] = i;\n}\n", roots, 1);
  r.source = "#include <k.h>\n#define BLOCK(...) __VA_ARGS__\nextern \"C\" __global__ void k(int *p, "
             "int n) {\nBLOCK(\n#pragma unroll 4\nfor (int i = 0; i < n; i++) p[i] = i;)\n"
             "_Pragma(\"unroll 2\") for (int j = 0; j < n; j++) p[j] += j;\n}\n";
  assert_check_passes(&r, "pragmas", 0);
}

/* The request's definitions are used by the roots too: a piece of __has_include in the body of
 * a request's #define or -D joins the roots' pieces. */
static void test_request_definitions_join_the_roots_pieces(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "rr.h",
             "#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n#define PFX __has_\n"
             "#if XCAT(PFX, SFX)(\"/etc/hostname\")\n#endif\n");
  t4a_nvrtc_request r = roots_request("#define SFX include\n#include <rr.h>\n", roots, 1);
  for (int with_option = 0; with_option <= 1; with_option++) {
    const char *opts[1] = {"-DSFX=include"};
    if (with_option) {
      r = roots_request("#include <rr.h>\n", roots, 1);
      r.options = opts;
      r.num_options = 1;
    }
    assert_refused_both_ways(&r, "could paste __has_include", "option", (size_t)with_option);
  }
  /* A parameter of the request's macro is no piece. */
  r = roots_request("#define SFX(include) include\n#include <rr.h>\n", roots, 1);
  assert_check_passes(&r, "parameter", 0);
}

/* NVRTC lets a macro's arguments run past the end of an included file into its includer (and
 * evaluates __has_include outside #if), but the roots' arguments are collected per file: a root
 * file that ends inside a function-like macro's arguments is refused when anything pastes. An
 * open invocation without pastes, and balanced ones, keep their hits. */
static void test_invocations_left_open_at_a_files_end_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "open.h", "#include <k.h>\n__device__ int w = K(\n");
  write_file(g_root, "cont.h", "#include <open.h>\ninclude)(\"/etc/hostname\");\n");
  t4a_nvrtc_request r = roots_request(
      "#include <cont.h>\nextern \"C\" __global__ void k(int *p) { *p = w; }\n", roots, 1);
  assert_refused_both_ways(&r, "ends inside a function-like macro's arguments", "open", 0);
  t4a_nvrtc_cache *c = new_cache(1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "open.h", "ends inside a function-like macro's");
  /* No paste anywhere: an invocation continued in the includer is NVRTC's business. */
  write_file(g_root, "id.h", "#define ID(x) x\n__device__ int v = ID(\n");
  write_file(g_root, "idc.h", "#include <id.h>\n 3);\n");
  r = roots_request("#include <idc.h>\nextern \"C\" __global__ void k(int *p) { *p = v; }\n",
                    roots, 1);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

/* A root's invocation whose result is a function-like name takes the parenthesised group after
 * it when NVRTC rescans (ID(CAT)(__has_, include)), and so does a use of a macro whose body ends
 * in such a call (#define G ID(CAT)): those groups are collected as arguments (stale hits
 * before). */
static void test_calls_whose_result_takes_the_next_group_are_collected(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char *const refused[] = {
      "#define CAT(a,b) a##b\n#define ID(x) x\n#if ID(CAT)(__has_, include)(\"/etc/hostname\")\n"
      "#endif\n",
      "#define CAT(a,b) a##b\n#define F() CAT\n#if F()(__has_, "
      "include)(\"/etc/hostname\")\n#endif\n",
      "#define CAT(a,b) a##b\n#define ID(x) x\n#define G ID(CAT)\n"
      "#if G(__has_, include)(\"/etc/hostname\")\n#endif\n",
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    write_file(g_root, "r.h", refused[i]);
    t4a_nvrtc_request r = roots_request("#include <r.h>\n", roots, 1);
    assert_refused_both_ways(&r, "could paste __has_include together", "next group", i);
  }
  /* The tenth review's shapes: the group on a later line (outside a directive a call's '(' may
   * follow its name there), a body whose last token hides behind a comment or a form feed, a
   * name of 256 bytes and more. */
  char longname[300];
  memset(longname, 'L', 260);
  longname[260] = '\0';
  char long_src[800];
  snprintf(long_src, sizeof long_src,
           "#define %s(a,b) a##b\nstatic const int v = %s(__has_, include)(\"/etc/hostname\");\n",
           longname, longname);
  const char *more[] = {
      "#define CAT(a,b) a##b\n#define ID(x) x\nstatic const int v = ID(CAT)\n\n"
      "(__has_, include)(\"/etc/hostname\");\n",
      "#define CAT(a,b) a##b\nstatic const int v = CAT\n(__has_, include)(\"/etc/hostname\");\n",
      "#define CAT(a,b) a##b\n#define KK CAT\nstatic const int v = KK\n"
      "(__has_, include)(\"/etc/hostname\");\n",
      "#define CAT(a,b) a##b\n#define ID(x) x\n#define G ID(CAT) /* c */\n"
      "static const int v = G(__has_, include)(\"/etc/hostname\");\n",
      "#define CAT(a,b) a##b\n#define G CAT /**/\n"
      "static const int v = G(__has_, include)(\"/etc/hostname\");\n",
      "#define CAT(a,b) a##b\n#define G CAT\f\nstatic const int v = G(__has_, "
      "include)(\"/etc/hostname\");\n",
      long_src,
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
    write_file(g_root, "r.h", more[i]);
    t4a_nvrtc_request r = roots_request("#include <r.h>\n", roots, 1);
    assert_refused_both_ways(&r, "could paste __has_include together", "tenth", i);
  }
  /* An include among a root call's arguments hands that file's tokens to the call. */
  write_file(g_root, "m.h", "#define CAT(a,b) a##b\n");
  write_file(g_root, "pc.h", "__has_, include\n");
  write_file(g_root, "ib.h",
             "#include \"m.h\"\nstatic const int v = CAT(\n#include \"pc.h\"\n"
             ")(\"/etc/hostname\");\n");
  t4a_nvrtc_request r = roots_request("#include <ib.h>\n", roots, 1);
  assert_refused_both_ways(&r, "include stands among the arguments", "include", 0);
}

/* A root's own invocation can paste a wrapper's name too, where no expansion of the request's
 * texts looks: the pieces of a wrapper's name in macro bodies and in the roots' macro arguments
 * that can join into it are refused (the toolkit's kernels keep their hits:
 * test_toolkit_kernels_with_macro_calls_are_cached). */
static void test_root_pasted_wrapper_names_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const struct {
    const char *root, *source;
  } refused[] = {
      {"#define HAS(x) __has_include(x)\n#define CAT(a, b) a ## b\n"
       "#if CAT(H, AS)(\"/etc/hostname\")\n#endif\n",
       "#include <rw.h>\n"},
      {"#define HAS(x) __has_include(x)\n#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n"
       "#define PH H\n#if XCAT(PH, AS)(\"/etc/hostname\")\n#endif\n",
       "#include <rw.h>\n"},
      {"#define HAS(x) __has_include(x)\n#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n"
       "#if XCAT(PH, AS)(\"/etc/hostname\")\n#endif\n",
       "#define PH H\n#include <rw.h>\n"}, /* the piece in the request's definition */
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    write_file(g_root, "rw.h", refused[i].root);
    t4a_nvrtc_request r = roots_request(refused[i].source, roots, 1);
    assert_refused_both_ways(&r, "could paste the name of HAS", "case", i);
  }
  /* A wrapper's name with a digit: a predefined macro's value (__LINE__) could be pasted in. */
  write_file(g_root, "rw3.h", "#define HAS3(x) __has_include(x)\n#define CAT(a, b) a ## b\n"
                              "#define XCAT(a, b) CAT(a, b)\n");
  t4a_nvrtc_request r3 =
      roots_request("#include <rw3.h>\n\n#if XCAT(HAS, __LINE__)(\"/etc/hostname\")\n#endif\n", roots, 1);
  assert_refused_both_ways(&r3, "its name holds a digit", "digit", 0);
  /* The piece in a -D value. */
  t4a_nvrtc_request r = roots_request("#include <rw.h>\n", roots, 1);
  const char *opts[1] = {"-DPH=H"};
  r.options = opts;
  r.num_options = 1;
  assert_refused_both_ways(&r, "could paste the name of HAS", "-D", 0);
  /* Pieces that cannot make the name pass. */
  write_file(g_root, "rw.h",
             "#define HAS(x) __has_include(x)\n#define CAT(a, b) a ## b\n"
             "#if HAS(<top.h>) && CAT(A, S) && CAT(X, Y)\n#endif\n");
  r = roots_request("#include <rw.h>\n", roots, 1);
  assert_check_passes(&r, "no join", 0);
}

/* An invocation whose names have too many definitions to try each way gets the coarse check:
 * refused when its own tokens and the definitions' pieces could make __has_include in some
 * order, passed when they cannot; fewer ways are all tried. */
static void test_too_many_expansions_get_the_coarse_check(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  char text[8192];
  size_t n = (size_t)snprintf(text, sizeof text, "%s", k_cat);
  for (int level = 0; level < 6; level++) { /* 12 choices at each of 6 levels */
    for (int alt = 0; alt < 11; alt++) {
      n += (size_t)snprintf(text + n, sizeof text - n,
                            "#if V == %d\n#define A%d(x) A%d(x) + %d\n#endif\n", alt, level,
                            level + 1, alt);
    }
  }
  snprintf(text + n, sizeof text - n, "#define A6(x) CAT(x, 1)\n#define PFX __has_\n");
  write_file(g_root, "many.h", text);
  t4a_nvrtc_request r = roots_request("#include <many.h>\nint y = A0(include);\n", roots, 1);
  assert_refused_both_ways(&r,
                           "the source, line 2: A0 has too many expansions to check one by one, "
                           "and its tokens with the pieces in the definitions could paste "
                           "__has_include",
                           "coarse", 0);
  /* Tried each way (12 x 12 runs), the same call makes `include1`, no __has_include; and with
   * no piece of its own the coarse check passes. */
  static const char *const pass[] = {"#include <many.h>\nint y = A4(include);\n",
                                     "#include <many.h>\nint y = A0(1);\n"};
  for (size_t i = 0; i < 2; i++) {
    r = roots_request(pass[i], roots, 1);
    assert_check_passes(&r, "pass", i);
  }
}

/* A string literal in the body of one of the request's definitions can become a pragma's operand
 * wherever the body lands: in a root's text, which the expansion does not expand (the roots'
 * own invocations), or inside an invocation the coarse check decided. The expansion reads the
 * strings of the request's own bodies up front, used or not. */
static void test_strings_in_the_requests_definitions_are_read(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "usepr.h", "void f(int n) {\nPR\nfor (int i = 0; i < n; i++) {}\n}\n");
  t4a_nvrtc_request r = roots_request(
      "#include <k.h>\n#define PR _Pragma(\"unroll K(include)(\\\"/etc/hostname\\\")\")\n"
      "#include <usepr.h>\n",
      roots, 1);
  assert_refused_both_ways(&r, "K expands to a paste that makes __has_include", "root use", 0);
  /* The same definition as a -D. */
  r.source = "#include <k.h>\n#include <usepr.h>\n";
  const char *opts[1] = {"-DPR=_Pragma(\"unroll K(include)(\\\"/etc/hostname\\\")\")"};
  r.options = opts;
  r.num_options = 1;
  assert_refused_both_ways(&r, "K expands to a paste that makes __has_include", "-D", 0);
  r.options = NULL;
  r.num_options = 0;
  /* A body's string that names no macro, and one whose macro pastes nothing, pass. */
  r.source =
      "#include <k.h>\n#define MSG \"unroll 4\"\n#define PR _Pragma(\"unroll CAT(1, 2)\")\n"
      "#include <usepr.h>\n";
  assert_check_passes(&r, "strings", 0);
}

/* NVRTC predefines the nv/target machinery with no include, and two of its macros paste their
 * parameters (_NV_CONCAT_EVAL1, _NV_PASTE5: scripts/gen_nvrtc_predefined.py lists them and
 * what reaches them): a text that names one no text defines is refused, since the check cannot
 * read the definition (stale hits before, even of the plain cache). With the header that
 * defines them (the toolkit's nv/target) their definitions are read as any other. */
static void test_macros_nvrtc_predefines_are_refused_undefined(void **state) {
  (void)state;
  static const char paste5[] =
      "#if _NV_PASTE5(__has_, include, , , )(\"/etc/hostname\")\n#define V 222\n#else\n"
      "#define V 111\n#endif\nextern \"C\" __global__ void k(int *p) { *p = V; }\n";
  t4a_nvrtc_request r = roots_request(paste5, NULL, 0);
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK); /* NVRTC knows it */
  t4a_nvrtc_artifact_release(a);
  assert_refused_both_ways(&r, "_NV_PASTE5 is a macro NVRTC predefines", "plain", 0);
  const char *roots[] = {g_root};
  write_file(g_root, "hw.h", "#define HAS(x) __has_include(x)\n");
  r = roots_request("#include <hw.h>\n#if _NV_CONCAT_EVAL(HA, S)(\"/etc/hostname\")\n#endif\n",
                    roots, 1);
  /* With roots NVRTC's own definitions of the paster are read: its paste makes the wrapper. */
  assert_refused_both_ways(&r, "_NV_CONCAT_EVAL expands to a paste that makes HAS", "wrapper", 0);
  r = roots_request(
      "extern \"C\" __global__ void k(int *p) {\n"
      "NV_IF_TARGET(NV_IS_DEVICE, (*p = 1;))\n}\n",
      NULL, 0);
  assert_refused_both_ways(&r, "NV_IF_TARGET is a macro NVRTC predefines", "nv/target", 0);
  /* Its name as the operand of defined or #ifndef is not expanded: no refusal. */
  r = roots_request(
      "#ifndef NV_IF_TARGET\n#define NO_NV 1\n#endif\n"
      "#if defined(__CUDA_MINIMUM_ARCH__) && __CUDA_ARCH__ >= 800\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = 1; }\n",
      NULL, 0);
  assert_check_passes(&r, "operands", 0);
  /* A root that defines the names as nv/target does (NVRTC's own definitions, here with other
   * spacing and a comment): read, and nothing pastes a target here. */
  write_file(g_root, "cat.h",
             "#define _NV_EVAL(...) __VA_ARGS__\n"
             "#define _NV_CONCAT_EVAL1(l,r) _NV_EVAL( l ## r ) /* as NVRTC's */\n"
             "#define _NV_CONCAT_EVAL(l, r) _NV_CONCAT_EVAL1(l, r)\n");
  r = roots_request("#include <cat.h>\nint _NV_CONCAT_EVAL(x, y) = 1;\n", roots, 1);
  assert_check_passes(&r, "defined", 0);
  /* Defined otherwise than NVRTC does, where NVRTC does not apply the text's definition: in a
   * dead branch, after the use, in a root's copy of nv/target that NVRTC skips (its guard is
   * predefined). NVRTC expands its own _NV_PASTE5 there, which makes __has_include: refused. */
  static const char *const other[] = {
      "#if 0\n#define _NV_PASTE5(_0, _1, _2, _3, _4) _0\n#endif\n",
      "",
  };
  for (size_t i = 0; i < 2; i++) {
    char src[512];
    snprintf(src, sizeof src, "%s%s%s", other[i], paste5,
             i == 1 ? "#define _NV_PASTE5(_0, _1, _2, _3, _4) _0\n" : "");
    r = roots_request(src, NULL, 0);
    assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
    t4a_nvrtc_artifact_release(a);
    assert_refused_both_ways(&r, "defines it otherwise than NVRTC does", "other", i);
  }
  write_file(g_root, "nv/target",
             "#ifndef __NV_TARGET_H\n#define __NV_TARGET_H\n"
             "#define _NV_PASTE5(_0, _1, _2, _3, _4) _0\n#endif\n");
  r = roots_request("#include <nv/target>\n#if _NV_PASTE5(__has_, include, , , )(\"/x\")\n#endif\n",
                    roots, 1);
  assert_refused_both_ways(&r, "defines it otherwise than NVRTC does", "copy", 0);
}

/* NVRTC compiles r into its `#error made`: it reached the file the check must see. */
static void assert_nvrtc_reaches(const t4a_nvrtc_request *r) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_compile(g_lib, r, &a, &o), T4A_COMPILE_FAILED);
  assert_null(a);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "made"));
  t4a_nvrtc_outcome_deinit(&o);
}

/* pre + text, a request's own text, makes NVRTC reach the #error and the check refuse it (the
 * message holding needle); so does text as a root file, use.h, that pre + an #include of it
 * reaches. */
static void assert_reached_and_refused_in_text_and_root(const char *pre, const char *text,
                                                        const char *needle, const char *what,
                                                        size_t i) {
  const char *roots[] = {g_root};
  char src[1024], root_what[64];
  snprintf(src, sizeof src, "%s%s", pre, text);
  t4a_nvrtc_request r = roots_request(src, roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, needle, what, i);
  write_file(g_root, "use.h", text);
  snprintf(src, sizeof src, "%s#include <use.h>\n", pre);
  snprintf(root_what, sizeof root_what, "%s in a root", what);
  r = roots_request(src, roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, needle, root_what, i);
}

/* NVRTC folds a backslash (or ??/ where the dialect has trigraphs) followed by any run of CRs
 * and an LF, not only CR LF: a comment closed across `*\\`, CR, CR, LF, `/`, and __has_include
 * spelled across such a splice, were hidden from the check (each #error fires: NVRTC read the
 * operand, in the request's text and in a root's). */
static void test_splices_with_several_crs_are_read(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char *const shapes[] = {
      "/* a *\\\r\r\n/\n#if __has_include(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if __has_incl\\\r\r\r\nude(\"/etc/hostname\")\n#error made\n#endif\n",
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    assert_reached_and_refused_in_text_and_root("", shapes[i], "__has_include", "shape", i);
  }
  /* A body continued across such a splice: M is an alias of CAT, so its arguments meet a paste
   * (the body read as ending at the splice made M no macro that takes arguments). */
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define M \\\r\r\nCAT\n");
  write_file(g_root, "use.h", "#if M(__has_, include)(\"/etc/hostname\")\n#error made\n#endif\n");
  t4a_nvrtc_request alias = roots_request("#include <k.h>\n#include <use.h>\n", roots, 1);
  assert_nvrtc_reaches(&alias);
  assert_refused_both_ways(&alias, "__has_", "alias", 0);
  /* ??/ as the splice's backslash, under a dialect with trigraphs */
  const char *opts[] = {"-std=c++14"};
  t4a_nvrtc_request r = roots_request(
      "/* a *?\?/\r\r\n/\n#if __has_include(\"/etc/hostname\")\n#error made\n#endif\n", roots, 1);
  r.options = opts;
  r.num_options = 1;
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "__has_include", "trigraph", 0);
}

/* What a review found the lexer reading otherwise than NVRTC (each #error fires: NVRTC read the
 * hidden text): a NUL byte in a root file (a blank under --diag-suppress=861), a raw string
 * ended across a splice or with one in its delimiter, a text definition of a predefined paster
 * whose line comment goes on across a splice (it was taken for NVRTC's own), a macro body's
 * block comment closed across a splice, and a computed include whose operand goes on across one.
 * The NUL, the paster and the body's comment were stale hits; in these shapes the raw strings
 * and the operand were also refused by other rules, so here they pin their own refusals. */
static void test_lexer_edges_a_review_found_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char hidden[] = "#if __has_include(\"/etc/hostname\")\n#error made\n#endif\n";
  write_file(g_root, "hid.h", hidden); /* an #include of it hides it from the check */
  /* a NUL byte, then a directive */
  char nul_path[1200];
  snprintf(nul_path, sizeof nul_path, "%s/nul.h", g_root);
  FILE *f = fopen(nul_path, "wb");
  assert_non_null(f);
  fputc('\0', f);
  fputs("#include \"hid.h\"\n", f);
  fclose(f);
  const char *suppress[] = {"--diag-suppress=861"};
  t4a_nvrtc_request r = roots_request("#include <nul.h>\n", roots, 1);
  r.options = suppress;
  r.num_options = 1;
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "NUL byte", "nul", 0);
  /* raw strings, in the request and in a root */
  static const char *const raw[] = {
      "const char *s = R\"x(a)x\\\n\";\n%s// )x\"\n",
      "const char *s = R\"x(a)x\\\r\r\n\";\n%s// )x\"\n",
      "const char *s = R\"x\\\n(/*)x\";\n%s// */\n",
  };
  for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, raw[i], "#include \"hid.h\"\n");
    assert_reached_and_refused_in_text_and_root("", text, "raw string literal has a line splice",
                                                "raw", i);
  }
  /* a predefined paster defined with a line comment that goes on across a splice */
  char src[512];
  snprintf(src, sizeof src, "%s",
           "#if 0\n#define _NV_PASTE5(_0, _1, _2, _3, _4) _0 // \\\n## _1 ## _2 ## _3 ## _4\n"
           "#endif\n#if _NV_PASTE5(__has_, include, , , )(\"/etc/hostname\")\n#error made\n"
           "#endif\n");
  r = roots_request(src, roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "defines it otherwise than NVRTC does", "paster", 0);
  /* a computed include's body with a block comment closed across a splice, and an operand
   * that goes on across one: the header NVRTC opens is hid.h */
  write_file(g_root, "use2.h", "int use2;\n");
  write_file(g_root, "k.h", "#define H /* *\\\n/ \"hid.h\" // */ \"use2.h\"\n#include H\n");
  r = roots_request("#include <k.h>\n", roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "__has_include \"/etc/hostname\"", "comment", 0);
  write_file(g_root, "k.h", "#define EMPTY\n#include EMPTY \\\n\"hid.h\"\n");
  r = roots_request("#include <k.h>\n", roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "written with a line splice", "operand", 0);
  /* __has_include's macro operand with a parenthesis in a block comment: it ends at the ')'
   * that matches, past the comment. A ')' in the comment had ended it there, and the raw
   * string's opening after that ')' hid the rest of the file (a stale hit); a '(' there, the
   * comment spanning lines, was refused by another rule. */
  static const char *const spans[] = {
      "#define M <use2.h>\n#if __has_include(M /* ) R\"x( */ )\n#endif\n%s",
      "#define M <use2.h>\n#if __has_include(M /* ( */ ) && 1 /*\nR\"x( */\n#endif\n%s",
  };
  for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, spans[i], "#include \"hid.h\"\n");
    write_file(g_root, "k.h", text);
    r = roots_request("#include <k.h>\n", roots, 1);
    assert_nvrtc_reaches(&r);
    assert_refused_both_ways(&r, "__has_include \"/etc/hostname\"", "span", i);
  }
  /* A raw string's delimiter of 17 bytes: NVRTC ignores the raw indicator (an error, so nothing
   * is cached) and reads a plain string, so the next line is a directive; the check read it as
   * raw and hid the include. */
  assert_reached_and_refused_in_text_and_root(
      "", "const char *s = R\"aaaaaaaaaaaaaaaaa(\n#include \"hid.h\"\n)aaaaaaaaaaaaaaaaa\";\n",
      "__has_include \"/etc/hostname\"", "delimiter", 0);
}

/* Header names made of tokens (computed includes, wrapper arguments, direct operands among a
 * macro's arguments) as NVRTC 13.0 spells them, and the context the scan keeps for them
 * (docs/design.md §11, "spelled as NVRTC"). Each row's text makes NVRTC reach the #error, or a
 * failed static_assert, through a file the check missed before the row's fix: the check now
 * refuses the row with its needle or, with a NULL needle, follows sq/y.h. The empty macro's row
 * (the third) passed before too; it guards the expansion's white-space marks. */
static void test_header_names_as_nvrtc_spells_them(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char made[] = "#error made\n";
  write_file(g_root, "hid.h", "#if __has_include(\"/etc/hostname\")\n#error made\n#endif\n");
  write_file(g_root, "sp .h", made);
  write_file(g_root, "sp->.h", made);
  write_file(g_root, "c\x01.h", made);
  write_file(g_root, "a.R\"x(\">)x\"", made);
  write_file(g_root, "1'2'//'", made);
  write_file(g_root, "a<=>.h", made);
  write_file(g_root, "a(->)", made);
  write_file(g_root, "sp/x.h", "int x;\n");
  write_file(g_root, "sq/y.h", made);
  write_file(g_root, "sub/a.h", "#define M \"x.h\"\n#include M\n");
  write_file(g_root, "sub/x.h", "#if __has_include(\"/etc/hostname\")\n#error made\n#endif\n");
  write_file(g_root, "other/b.h", "int b;\n");
  static const char kWrapper[] = "#define W(x) __has_include(x)\n";
  static const char kRespelled[] = "holds white space, a comment, a quote";
  static const char kInCall[] = "in a parenthesized group an identifier or a ')' opens";
  static const struct {
    const char *pre, *text, *needle, *option;
  } shapes[] = {
      {"", "#define M \"hid.h\" junk\n#include M\n", "__has_include \"/etc/hostname\"", NULL},
      {"", "#define M <hid.h> junk\n#include M\n", "__has_include \"/etc/hostname\"", NULL},
      {"", "#define E\n#include E \"hid.h\"\n", "__has_include \"/etc/hostname\"", NULL},
      {"", "#define M <sp .h>\n#include M\n", "white space or a comment between its tokens", NULL},
      {"", "#define M <sp/**/.h>\n#include M\n", "white space or a comment between its tokens",
       NULL},
      {"", "#define M <sp->.h>\n#include M\n", "part of another token", NULL},
      {"", "#define M \"c\x01.h\"\n#include M\n", "0x01 or 0x02", NULL},
      {kWrapper, "#if W(<sp   .h>)\n#error made\n#endif\n", kRespelled, NULL},
      {kWrapper, "#if W(<sp/*>)*/.h>)\n#error made\n#endif\n", kRespelled, NULL},
      {"", "#define M <a.R\"x(\">)x\">\n#include M\n", "has a prefixed string", NULL},
      {"", "#define M <1'2'//'>\n#include M\n", "with a quote in it", NULL},
      {"", "#define M <a<=>.h>\n#include M\n", "part of another token", "-std=c++20"},
      {kWrapper, "#if (W(<a(->)>))\n#error made\n#endif\n", kRespelled, NULL},
      {kWrapper, "#define a\\u00e9 sp\n#if W(<a\\u00e9/x.h>)\n#error made\n#endif\n",
       "universal character name", NULL},
      {"", "#define F(y) y\n#define D sp\n#if F(__has_include(<D/x.h>))\n#error made\n#endif\n",
       kInCall, NULL},
      {"",
       "#define F(y) y\n#define H() F\n#define D sp\n#if H()(__has_include(<D/x.h>))\n"
       "#error made\n#endif\n",
       kInCall, NULL},
      {"",
       "#define F(y) y\n#define G F(\n#define D sp\n#if G __has_include(<D/x.h>))\n"
       "#error made\n#endif\n",
       "follows a name on its directive line", NULL},
      {"",
       "#define F(y, z) z\n#define D sp\n#if F( /*\n*/ #x, __has_include(<D/x.h>))\n"
       "#error made\n#endif\n",
       kInCall, NULL},
      {"",
       "#define G(a, b) b\n#define F(x) G(x)\n#define ifdef ,\n"
       "#define V 0 /*\n*/ #ifdef __has_include(\"/etc/hostname\")\n"
       "static_assert(!F(V), \"made\");\n",
       "__has_include \"/etc/hostname\"", NULL},
      {kWrapper, "#define X(b) W(<b/x.h>)\n#if X(sp)\n#error made\n#endif\n",
       "may name one of its parameters", NULL},
      {"", "#define D\\\nX sq\n#define M <DX/y.h>\n#include M\n", NULL, NULL},
      {"", "#define DX sq\n#define M <D\\\nX/y.h>\n#include M\n",
       "joins two tokens across a line splice", NULL},
      {"", "#include \"sub/a.h\"\n#include \"other/b.h\"\n", "__has_include \"/etc/hostname\"",
       NULL},
      {"",
       "#define F(x, y) y\n#define D sp\n#if __has_include(<a'b.h>) || "
       "F(\"')\" \"\\\"\", __has_include(<D/x.h>))\n#error made\n#endif\n",
       kInCall, NULL},
      {"",
       "#define CAT(a, b) a ## b\n#if CA\\\nT(_, _has_include)(<sp/x.h>)\n#error made\n"
       "#endif\n",
       "could paste __has_include together", NULL},
      {"",
       "#define CAT(a, b) a ## b\nstatic_assert(!CAT(_,\n#define RP )\n_has_include)(<sp/x.h>), "
       "\"made\");\n",
       "could paste __has_include together", NULL},
      {"",
       "#define CAT(a, b) a ## b\n#define F(x) x\n#define G F(\nstatic_assert(!CAT(__has_in,\n"
       "#define RP )))\nclude)(<sp/x.h>), \"made\");\n",
       "ends inside a function-like macro's arguments", NULL},
      {"", "#include M\n", NULL, "-D M=<sq/y.h>"},
      {"", "#include M\n", NULL, "-D=M=<sq/y.h>"},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "%s%s", shapes[i].pre, shapes[i].text);
    write_file(g_root, "k.h", text);
    t4a_nvrtc_request r = roots_request("#include <k.h>\n", roots, 1);
    const char *opts[] = {"--diag-suppress=14", shapes[i].option};
    r.options = opts;
    r.num_options = shapes[i].option != NULL ? 2 : 1;
    assert_nvrtc_reaches(&r);
    if (shapes[i].needle != NULL) {
      assert_refused_both_ways(&r, shapes[i].needle, "name", i);
    } else {
      /* followed: the check reaches the file NVRTC opens, and reads its #error's line */
      check_result c = check_with(&r, 1);
      assert_int_equal(c.st, T4A_OK);
      assert_int_equal(c.total.files, 2); /* k.h and sq/y.h */
    }
  }
  /* Outside a directive a direct <...> operand is refused too (a macro's arguments may hold it;
   * there NVRTC's answer is a value in the code, not an #error). */
  write_file(g_root, "k.h", "#define F(y) y\n__device__ int v = F(__has_include(<sp/x.h>));\n");
  t4a_nvrtc_request r = roots_request("#include <k.h>\n", roots, 1);
  assert_refused_both_ways(&r, "outside a directive", "text line", 0);
  /* What the toolkit's computed includes and direct operands look like still resolves. */
  write_file(g_root, "k.h",
             "#define D sp\n#define M <D/x.h>\n#include M\n#if __has_include(<sp/x.h>) && "
             "defined(D) && (__has_include(<sp/x.h>))\n#endif\n");
  r = roots_request("#include <k.h>\n", roots, 1);
  assert_check_passes(&r, "plain", 0);
  char text[256];
  snprintf(text, sizeof text, "%s#if W(<sp/x.h>) || W(\"sp/x.h\")\n#endif\n", kWrapper);
  write_file(g_root, "k.h", text);
  r = roots_request("#include <k.h>\n", roots, 1);
  assert_check_passes(&r, "wrapper", 0);
}

/* Groups NVRTC skips by __CUDACC_RTC__ (which it always defines) are skipped by the check: what
 * they include is not reached, so an edit there keeps the hit. Each skipped row's dead.h holds
 * an #error that NVRTC never reaches; each kept row is a case where NVRTC reaches dead.h (an
 * #undef, a condition it reads true) or where the check cannot tell and reads the group (a
 * condition of another shape, a line a skipped group may lex otherwise, an option naming the
 * macro, a <...> that lexes otherwise there). */
static void test_groups_nvrtc_skips_are_skipped(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "dead.h", "#error made\n");
  write_file(g_root, "live.h", "__device__ int live;\n");
  write_file(g_root, "u.h", "#undef __CUDACC_RTC__\n");
  static const char kOtherwise[] =
      "a block comment across a newline opens where NVRTC, skipping the group, reads no comment";
  static const struct {
    const char *text, *option;
    int files;      /* reached by the check: k.h, then live.h, u.h or dead.h */
    int nvrtc_dead; /* NVRTC reaches dead.h */
    const char *needle; /* refused so (files not counted), or NULL */
  } rows[] = {
      /* skipped */
      {"#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n#include <live.h>\n", NULL, 2, 0, NULL},
      {"#if !defined(__CUDACC_RTC__) && defined(X)\n#include <dead.h>\n#endif\n", NULL, 1, 0, NULL},
      {"#if defined __CUDACC_RTC__ || defined(X)\n#include <live.h>\n#elif 1\n#include <dead.h>\n"
       "#else\n#include <dead.h>\n#endif\n",
       NULL, 2, 0, NULL},
      {"#ifdef __CUDACC_RTC__\n#if defined(Y)\n#else\n#include <live.h>\n#endif\n#else\n"
       "#include <dead.h>\n#endif\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\n#if 1\n#else\n#include <dead.h>\n#endif\n#include <dead.h>\n#else\n"
       "#include <live.h>\n#endif\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\n/*\n#endif\n*/\n#include <dead.h>\n#endif\n#include <live.h>\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\nchar c = '\"'; /*\n#endif\n*/\n#include <dead.h>\n#endif\n"
       "#include <live.h>\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\n#include <dead.h>\n#end\\\nif\n#include <live.h>\n", NULL, 2, 0,
       NULL},
      {"%:ifndef __CUDACC_RTC__\n#include <dead.h>\n%:endif\n#include <live.h>\n", NULL, 2, 0,
       NULL},
      {"#if defined(Y)\n#elif !defined(__CUDACC_RTC__)\n#include <dead.h>\n#else\n"
       "#include <live.h>\n#endif\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\ndon't /*\n#include <dead.h>\n#endif\n", NULL, 1, 0, NULL},
      /* kept */
      {"#undef __CUDACC_RTC__\n#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n", NULL, 2, 1,
       NULL},
      {"#include <u.h>\n#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n", NULL, 3, 1, NULL},
      {"#if !defined(__CUDACC_RTC__) || 1\n#include <dead.h>\n#endif\n", NULL, 2, 1, NULL},
      {"#if not defined(__CUDACC_RTC__)\n#include <dead.h>\n#endif\n", NULL, 2, 0, NULL},
      {"#if __has_include(<a'b.h>)\n#endif\n#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n",
       NULL, 2, 0, NULL},
      {"#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n", "-D__CUDACC_RTC__=1", 2, 0, NULL},
      /* where the check's reading of a group NVRTC skips (#if 0) differs from NVRTC's, a group's
       * end (and the #else after it) is NVRTC's to find: the whole file is read (a review's five
       * stale hits) */
      {"#if defined(__CUDACC_RTC__)\n#if 0\n#define X /*\n*/ #if 1\n#endif\n#else\n"
       "#include <dead.h>\n#endif\n#endif\n",
       NULL, 2, 1, NULL},
      {"#if defined(__CUDACC_RTC__)\n#if 0\n0'1 /*\n#if 1\n*/\n#endif\n#else\n"
       "#include <dead.h>\n#endif\n#endif\n",
       NULL, 2, 1, kOtherwise},
      {"#ifndef __CUDACC_RTC__\n0'1 /*\n#endif\n#if 1\n// */\n#include <dead.h>\n#endif\n", NULL, 2,
       1, kOtherwise},
      {"#if defined(__CUDACC_RTC__)\n#if 0\n#include \"a\\\" /*\n#if 1\n*/\n#endif\n#else\n"
       "#include <dead.h>\n#endif\n#endif\n",
       NULL, 2, 1, kOtherwise},
      {"#if defined(__CUDACC_RTC__)\n#if 0\nR\"a b(\n#endif\n)a b\"\n#else\n"
       "#include <dead.h>\n#endif\n#endif\n",
       NULL, 2, 1, NULL},
      /* '$' and bytes past ASCII are no identifier's for NVRTC, and a universal character name
       * stands in a pp-number (a second review's six stale hits) */
      {"#ifndef __CUDACC_RTC__\n#else$\n#include <dead.h>\n#endif\n", NULL, 2, 1, NULL},
      {"#ifndef __CUDACC_RTC__\n#if 0\n#endif$\n#else\n#include <dead.h>\n#if 0\n#endif\n#endif\n",
       NULL, 2, 1, NULL},
      {"#undef __CUDACC_RTC__$\n#ifndef __CUDACC_RTC__\n#include <dead.h>\n#endif\n", NULL, 2, 1,
       NULL},
      {"#ifdef __CUDACC_RTC__\n#define X $R\"x( \" /* )x\"\n#endif\n#ifdef NOPE\n#define Y */\n"
       "#else\n#include <dead.h>\n#endif\n",
       NULL, 2, 1, NULL},
      {"#ifdef __CUDACC_RTC__\n#define X $1'a' /*\n#endif\n#ifdef NOPE\n#define Y */\n#else\n"
       "#include <dead.h>\n#endif\n",
       NULL, 2, 1, NULL},
      {"#ifdef __CUDACC_RTC__\n#define X 1\\u00c0'a' /*\n#endif\n#ifdef NOPE\n#define Y */\n#else\n"
       "#include <dead.h>\n#endif\n",
       NULL, 2, 1, NULL},
      /* a third review's: where the skipper reads a literal, a header name's tokens */
      {"#if 0\n#include <a'b> /*\n#endif\n#include <dead.h>\n#if 0\n// */\n#endif\n", NULL, 2, 1,
       kOtherwise},
      {"#if 0\n#if 1'0 && __has_include /*\n#endif\n#endif\n#include <dead.h>\n#if 0\n#if 0\n"
       "// */ (\"b.h\")\n#endif\n#endif\n",
       NULL, 2, 1, kOtherwise},
      {"#if 0\n#if __has_include(\"x\\\" /*\n#endif\n#endif\n#include <dead.h>\n#if 0\n#if 0\n"
       "// */ )\n#endif\n#endif\n",
       NULL, 2, 1, kOtherwise},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    write_file(g_root, "k.h", rows[i].text);
    t4a_nvrtc_request r = roots_request("#include <k.h>\n", roots, 1);
    const char *opts[] = {"--diag-suppress=14", rows[i].option};
    r.options = opts;
    r.num_options = rows[i].option != NULL ? 2 : 1;
    if (rows[i].nvrtc_dead) {
      assert_nvrtc_reaches(&r);
    } else if (rows[i].option == NULL) {
      t4a_nvrtc_artifact *a = NULL;
      assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
      t4a_nvrtc_artifact_release(a);
    }
    uint64_t skipped = t4a_nvrtc_check_groups_skipped_();
    if (rows[i].needle != NULL) {
      assert_refused_both_ways(&r, rows[i].needle, "row", i);
      continue;
    }
    check_result c = check_with(&r, 1);
    if (c.st != T4A_OK || c.total.files != (uint64_t)rows[i].files) {
      fail_msg("row %zu: %s \"%s\", %llu files, want %d", i, t4a_status_name(c.st), c.message,
               (unsigned long long)c.total.files, rows[i].files);
    }
    if (i < 11) assert_true(t4a_nvrtc_check_groups_skipped_() > skipped); /* (the kept: files) */
  }
  /* A digit separator and a comment's opening after it on its line, in a group whose condition
   * is not known: where NVRTC skips the group, a character literal runs to the line's end, so the
   * comment that would hide the include is no comment (a stale hit before the groups were read):
   * refused. */
  write_file(g_root, "k.h",
             "#if defined(X)\n0'1 /*\n#endif\n#include <dead.h>\n#if 0\n*/\n#endif\n");
  t4a_nvrtc_request sep = roots_request("#include <k.h>\n", roots, 1);
  assert_nvrtc_reaches(&sep);
  assert_refused_both_ways(&sep, kOtherwise, "separator", 0);
  /* An edit in the skipped group's header keeps the hit, at both levels; the kept one's is a
   * miss. */
  write_file(g_root, "k.h", rows[0].text);
  t4a_nvrtc_request r = roots_request("#include <k.h>\n__global__ void k() {}\n", roots, 1);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  write_file(g_root, "dead.h", "#error made again\n");
  assert_int_equal(compile_origin(c, &r, NULL), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache *c2 = new_process();
  assert_int_equal(compile_origin(c2, &r, NULL), T4A_NVRTC_ORIGIN_DISK);
  write_file(g_root, "live.h", "__device__ int live2;\n");
  assert_int_equal(compile_origin(c2, &r, NULL), T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
}

/* With roots, a paster NVRTC predefines that no text defines (its header stood in a skipped
 * group) is read from NVRTC's own definitions: nv/target's machinery passes, and a paste of the
 * caller's tokens into __has_include through it is refused, as NVRTC makes it. */
static void test_builtin_pasters_no_text_defines_are_read(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "t.h",
             "#if !defined(__CUDACC_RTC__)\n#include <nv/target>\n#endif\n"
             "__device__ int f() { NV_IF_ELSE_TARGET(NV_IS_DEVICE, (return 1;), (return 2;)) }\n");
  write_file(g_root, "nv/target", "#error made\n");
  t4a_nvrtc_request r = roots_request("#include <t.h>\n", roots, 1);
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  t4a_nvrtc_artifact_release(a);
  check_result c = check_with(&r, 1);
  assert_int_equal(c.st, T4A_OK);
  assert_int_equal(c.total.files, 1);
  r = roots_request(
      "#if _NV_PASTE5(__has_, include, , , )(\"/etc/hostname\")\n#error made\n#endif\n", roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "PASTE", "paste5", 0);
}

/* The check reads NVRTC's built-in definitions (every #define of its built-in headers, listed
 * by scripts/gen_nvrtc_predefined.py) as if a text defined them. A built-in that hands back a
 * name (_NV_EVAL, _NV_FIRST_ARG), a built-in paster whose own name is pasted and an alias (an
 * object-like built-in whose body is a name) pass a root's paster the caller's tokens where the
 * check, not knowing them, saw no invocation: each was a stale hit, in the request's text and
 * in a root's (each #error fires: NVRTC made __has_include and found the file). */
static void test_builtin_definitions_are_read(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h",
             "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n"
             "#define KP(x) CAT(_NV_, PASTE5)(__has_, x, , , )\n"
             "#define cudaLaunchAttributeID(x) CAT(__has_, x)\n");
  static const char *const shapes[] = {
      "#if _NV_EVAL(K)(include)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if _NV_FIRST_ARG(K, 1)(include)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if KP(include)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if cudaStreamAttrID(include)(\"/etc/hostname\")\n#error made\n#endif\n",
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    /* (in a root file the invocations are not expanded: their arguments and the group after
     * them are collected) */
    assert_reached_and_refused_in_text_and_root("#include <k.h>\n", shapes[i], "__has_include",
                                                "shape", i);
  }
  /* The built-ins a kernel uses, read, refuse nothing by themselves. */
  t4a_nvrtc_request r = roots_request(
      "#include <k.h>\nextern \"C\" __global__ void __launch_bounds__(128) k(int *p) {\n"
      "  __align__(8) int v[2] = {CAT(1, 2), 3};\n  *p = v[0] + _NV_EVAL(v[1]);\n}\n",
      roots, 1);
  assert_check_passes(&r, "kernel", 0);
}

/* NVRTC's own pastes with one fixed side (`__CUDA_ARCH_FEAT_ ## _FEAT`, `_NV_IF_ ## b`,
 * `_NV_TARGET_BOOL_ ## cond`, `api ## _ptds`, reached also through the object-like cudaMemcpy
 * under CUDA_API_PER_THREAD_DEFAULT_STREAM) make a wrapper's name out of the caller's W where no
 * text pastes: the request's texts are expanded whenever there is a wrapper, and a wrapper that
 * such a paste could name is refused (the roots' texts are not expanded). Each was a stale hit
 * (an independent review's shapes; each #error fires). */
static void test_builtin_pastes_without_a_text_paste_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(
      g_root, "w.h",
      "#define __CUDA_ARCH_FEAT_W(x) __has_include(x)\n#define _NV_IF_W(x) __has_include(x)\n"
      "#define _NV_TARGET_BOOL_W(x) __has_include_next(x)\n#define W_ptds(x) __has_include(x)\n"
      "#define cudaMemcpy_ptds(x) __has_include(x)\n");
  static const char *const shapes[] = {
      "#if __CUDA_ARCH_HAS_FEATURE__(W)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if _NV_IF_BIT(W)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if _NV_ARCH_COND_CAT(W)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if __CUDART_API_PTDS(W)(\"/etc/hostname\")\n#error made\n#endif\n",
      "#if cudaMemcpy(\"/etc/hostname\")\n#error made\n#endif\n", /* an object-like built-in */
  };
  const char *opts[] = {"-DCUDA_API_PER_THREAD_DEFAULT_STREAM"}; /* __CUDART_API_PTDS pastes */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    char src[512];
    for (int in_root = 0; in_root <= 1; in_root++) {
      write_file(g_root, "use.h", shapes[i]);
      snprintf(src, sizeof src, "#include <w.h>\n%s", in_root ? "#include <use.h>\n" : shapes[i]);
      t4a_nvrtc_request r = roots_request(src, roots, 1);
      r.options = opts;
      r.num_options = 1;
      assert_nvrtc_reaches(&r);
      assert_refused_both_ways(&r, "paste", in_root ? "root" : "request", i);
    }
  }
  /* The wrapper in the request's own text, and the message of the name rule. */
  t4a_nvrtc_request r = roots_request(
      "#include <cat.h>\n#define _NV_IF_V(x) __has_include(x)\n"
      "#if _NV_IF_BIT(V)(\"/etc/hostname\")\n#endif\n",
      roots, 1);
  write_file(g_root, "cat.h", "\n");
  assert_refused_both_ways(&r, "paste", "request text", 0);
  write_file(g_root, "w.h", "#define _NV_IF_W(x) __has_include(x)\n");
  write_file(g_root, "use.h", "#if _NV_IF_BIT(W)(\"/etc/hostname\")\n#endif\n");
  r = roots_request("#include <w.h>\n#include <use.h>\n", roots, 1);
  assert_refused_both_ways(&r, "a paste in NVRTC's own definitions (_NV_IF_ ## b in _NV_IF_BIT)",
                           "message", 0);
  /* A wrapper no such paste can name passes beside the built-ins. */
  write_file(g_root, "w.h", "#define HAS(x) __has_include(x)\n");
  r = roots_request("#include <w.h>\n#if HAS(<w.h>) && _NV_EVAL(1)\nint v;\n#endif\n", roots, 1);
  assert_check_passes(&r, "HAS", 0);
}

/* NVRTC's own bodies seen from the wrappers' side: a body that names a wrapper is a use no text
 * shows (the alias cudaStreamAttrID of cudaLaunchAttributeID; assert(e), which calls
 * __assertfail with #e: a header name made by stringizing), and a body's identifier that is a
 * piece of a wrapper's name (`static` of __specialization_static, the fixed _ptds of a paste)
 * can join a text's paste into it, in a root's text or, through the coarse check, in the
 * request's. Each was a stale hit (an independent review's shapes; each #error fires). */
static void test_builtin_bodies_that_name_or_piece_a_wrapper_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char paste[] = "#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n";
  static const struct {
    const char *wrapper, *def, *use;
    int in_request;
  } shapes[] = {
      {"cudaLaunchAttributeID", "",
       "#if cudaStreamAttrID(\"/etc/hostname\")\n#error made\n#endif\n", 1},
      {"__assertfail", "", "#if assert(hostname)\n#error made\n#endif\n", 1},
      {"staticH", paste,
       "#if XCAT(__specialization_static, H)(\"/etc/hostname\")\n#error made\n#endif\n", 0},
      {"W_ptdsZ", paste,
       "#if XCAT(__CUDART_API_PTDS(W), Z)(\"/etc/hostname\")\n#error made\n#endif\n", 0},
  };
  const char *opts[] = {"-DCUDA_API_PER_THREAD_DEFAULT_STREAM"};
  write_file(g_root, "hostname", "\n");
  char src[2048], w[512];
  for (size_t i = 0; i <= 4; i++) {
    size_t k = i < 4 ? i : 2;
    snprintf(w, sizeof w, "%s#define %s(x, ...) __has_include(x)\n", shapes[k].def,
             shapes[k].wrapper);
    write_file(g_root, "w.h", w);
    write_file(g_root, "use.h", shapes[k].use);
    for (int in_root = 0; in_root <= 1; in_root++) {
      if ((i < 4 && !in_root && !shapes[i].in_request) || (i == 4 && in_root)) continue;
      size_t n = (size_t)snprintf(src, sizeof src, "#include <w.h>\n");
      if (i == 4) { /* 3^8 runs: the coarse check decides */
        for (int a = 1; a <= 8; a++) {
          n += (size_t)snprintf(src + n, sizeof src - n,
                                "#if 0\n#define A%d ,\n#endif\n#define A%d\n", a, a);
        }
        snprintf(src + n, sizeof src - n,
                 "#if XCAT(A1 A2 A3 A4 A5 A6 A7 A8 __specialization_static, H)"
                 "(\"/etc/hostname\")\n#error made\n#endif\n");
      } else {
        snprintf(src + n, sizeof src - n, "%s", in_root ? "#include <use.h>\n" : shapes[i].use);
      }
      t4a_nvrtc_request r = roots_request(src, roots, 1);
      r.options = opts;
      r.num_options = 1;
      assert_nvrtc_reaches(&r);
      assert_refused_both_ways(&r, shapes[k].wrapper, in_root ? "root" : "request", i);
    }
  }
}

/* NVRTC's _NV_TEST_PAREN2(...) is _NV_TEST_PAREN3(_NV_CONCAT_EVAL(_, __VA_ARGS__)): its body
 * spells the piece `_` of __has_include, which no text spells, so a text's paste that names it
 * (CAT(_NV_TEST_, PAREN2)) joins `_` to the caller's `_has_include(...)`: in a root's text (the
 * piece rule takes pieces from texts only) and in the request's through the coarse check. Each
 * #error fires: NVRTC made __has_include and found the file. */
static void test_builtin_pieces_of_has_include_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n");
  static const char use[] =
      "#if CAT(_NV_TEST_, PAREN2)(_has_include(\"/etc/hostname\"))\n#error made\n#endif\n";
  char src[2048];
  for (int i = 0; i < 2; i++) {
    size_t n = (size_t)snprintf(src, sizeof src, "#include <k.h>\n");
    if (i == 0) {
      write_file(g_root, "use.h", use);
      snprintf(src + n, sizeof src - n, "#include <use.h>\n");
    } else { /* 3^8 runs: the coarse check decides */
      for (int a = 1; a <= 8; a++) {
        n += (size_t)snprintf(src + n, sizeof src - n,
                              "#if 0\n#define A%d ,\n#endif\n#define A%d\n", a, a);
      }
      snprintf(src + n, sizeof src - n,
               "#if XCAT(A1 A2 A3 A4 A5 A6 A7 A8 _NV_TEST_, PAREN2)"
               "(_has_include(\"/etc/hostname\"))\n#error made\n#endif\n");
    }
    t4a_nvrtc_request r = roots_request(src, roots, 1);
    assert_nvrtc_reaches(&r);
    assert_refused_both_ways(&r, "__has_include", i == 0 ? "root" : "coarse", (size_t)i);
  }
}

/* One of NVRTC's definitions of __location__(a) is __annotate__(__ ## a ## __): with an argument
 * of several tokens its paste joins `__` to the first (`__location__(has_include("...") y)` makes
 * __has_include) where no text pastes. NVRTC 13.0 on Linux applies its other definition
 * (__attribute__((a))), so this is refused on the definition, not shown through NVRTC: a text
 * that names __location__ counts as pasting (scripts/gen_nvrtc_predefined.py lists such
 * built-ins), in a root's text and in the request's; its aliases (__device__) do not. */
static void test_builtin_target_pasters_count_as_pasting(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const char use[] =
      "#if 0\nint v __location__(has_include(\"/etc/hostname\") y);\n#endif\n";
  write_file(g_root, "use.h", use);
  t4a_nvrtc_request r = roots_request("#include <use.h>\n", roots, 1);
  assert_refused_both_ways(&r, "__has_include", "root", 0);
  r = roots_request(use, roots, 1);
  assert_refused_both_ways(&r, "__has_include", "request", 0);
  write_file(g_root, "use.h", "__device__ int has_include;\n");
  r = roots_request("#include <use.h>\n__global__ void k() { has_include = 1; }\n", roots, 1);
  assert_check_passes(&r, "alias", 0);
}

/* The compiler (not libnvrtc-builtins) predefines names that are not __NAME__: _BOOL and
 * _WCHAR_T (1), __cplusplus (201703L), __cpp_rtti (199711L) and the other __cpp_* feature
 * macros. In a root's computed include and in a wrapper's <...> argument they are replaced
 * (a/_BOOL.h is a/1.h), while the check, seeing no definition, follows a/_BOOL.h. Each #error
 * fires: NVRTC opened a file the check did not record. */
static void test_compiler_predefined_names_in_operands_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const struct {
    const char *name, *value;
  } names[] = {
      {"_BOOL", "1"}, {"_WCHAR_T", "1"}, {"__cplusplus", "201703L"}, {"__cpp_rtti", "199711L"}};
  write_file(g_root, "w.h", "#define HAS(x) __has_include(x)\n");
  char text[512], rel[128];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(rel, sizeof rel, "a/%s.h", names[i].value);
    write_file(g_root, rel, "#error made\n");
    for (int shape = 0; shape < 3; shape++) {
      const char *src = "#include <use.h>\n";
      if (shape == 0) { /* a root's computed include */
        snprintf(text, sizeof text, "#define H <a/%s.h>\n#include H\n", names[i].name);
      } else { /* a wrapper's argument, in a root's text or in the request's */
        snprintf(text, sizeof text, "#include <w.h>\n#if HAS(<a/%s.h>)\n#error made\n#endif\n",
                 names[i].name);
        if (shape == 2) src = text;
      }
      write_file(g_root, "use.h", text);
      t4a_nvrtc_request r = roots_request(src, roots, 1);
      assert_nvrtc_reaches(&r);
      assert_refused_both_ways(&r, shape == 0 ? "goes through a predefined macro" : names[i].name,
                               "predefined", i * 3 + (size_t)shape);
    }
    write_file(g_root, rel, "\n");
  }
}

/* A fourth review's stale hits. (1) A reserved name the compiler predefines that some text
 * "defines" where NVRTC does not apply it (a dead branch, a later line) passed the
 * computed-include rule, while NVRTC used the compiler's value (__cplusplus 201703L): a/201703L.h
 * was read and in no manifest (a memory hit after its edit). (2) EDG predefines
 * __EDG_PTRDIFF_TYPE__ as `long` with no #define any text or libnvrtc-builtins shows, so the
 * request's expansion read it as itself while NVRTC pasted `long` to `_HAS` and called the root's
 * wrapper long_HAS, or called a root's `long` alias of a paster. The generator now asks NVRTC
 * which reserved names it predefines and their values (nvrtc_predefined.h). */
static void test_names_the_compiler_predefines_are_read_and_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  char text[1024];
  write_file(g_root, "a/201703L.h", "#error made\n");
  static const char *const uses[] = {
      "#if 0\n#define __cplusplus 1\n#endif\n#define H <a/__cplusplus.h>\n#include H\n",
      "#define H <a/__cplusplus.h>\n#include H\n#ifdef NEVER\n#define __cplusplus 1\n#endif\n",
  };
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
    write_file(g_root, "use.h", uses[i]);
    t4a_nvrtc_request r = roots_request("#include <use.h>\n", roots, 1);
    assert_nvrtc_reaches(&r);
    assert_refused_both_ways(&r, "goes through a predefined macro", "defined where not applied", i);
  }
  write_file(g_tree, "f.h", "\n");
  write_file(g_root, "w.h",
             "#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n"
             "#define long_HAS(x) __has_include(x)\n");
  snprintf(text, sizeof text,
           "#include <w.h>\n#if XCAT(__EDG_PTRDIFF_TYPE__, _HAS)(\"%s/f.h\")\n#error made\n"
           "#endif\n",
           g_tree);
  t4a_nvrtc_request r = roots_request(text, roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "long_HAS", "a compiler-predefined type name", 0);
  write_file(g_root, "k.h",
             "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n#define long K\n");
  snprintf(text, sizeof text,
           "#include <k.h>\n#if __EDG_PTRDIFF_TYPE__(include)(\"%s/f.h\")\n#error made\n#endif\n",
           g_tree);
  r = roots_request(text, roots, 1);
  assert_nvrtc_reaches(&r);
  assert_refused_both_ways(&r, "__has_include", "a compiler-predefined type name", 1);
}

/* A fifth review's stale hits: reserved names NVRTC predefines that the generator's candidates
 * miss (__CUDA_FTZ: NVRTC passes it to itself as -D__CUDA_FTZ=0, no header spells it) or that
 * only some options or targets define (-G's __CUDACC_DEBUG__, -std=c++20's __cpp_concepts,
 * sm_90a's __CUDA_ARCH_SPECIFIC__). A root "defines" each where NVRTC does not apply it (a dead
 * branch, an #ifndef fallback), so the computed-include rule read the text's value and the name
 * as itself, while NVRTC used its own value and opened a/<value>.h, in no manifest. */
static void test_predefines_the_probe_misses_are_refused(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  static const struct {
    const char *use, *file, *target, *option;
  } cases[] = {
      {"#if 0\n#define __CUDA_FTZ 7\n#endif\n#define H <a/__CUDA_FTZ.h>\n#include H\n", "a/0.h",
       "sm_90", NULL},
      {"#ifndef __CUDACC_DEBUG__\n#define __CUDACC_DEBUG__ 0\n#endif\n"
       "#define H <a/__CUDACC_DEBUG__.h>\n#include H\n",
       "a/1.h", "sm_90", "-G"},
      {"#ifndef __cpp_concepts\n#define __cpp_concepts 0\n#endif\n"
       "#define H <a/__cpp_concepts.h>\n#include H\n",
       "a/202002L.h", "sm_90", "-std=c++20"},
      {"#ifndef __CUDA_ARCH_SPECIFIC__\n#define __CUDA_ARCH_SPECIFIC__ 0\n#endif\n"
       "#define H <a/__CUDA_ARCH_SPECIFIC__.h>\n#include H\n",
       "a/900.h", "sm_90a", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_file(g_root, cases[i].file, "#error made\n");
    write_file(g_root, "use.h", cases[i].use);
    t4a_nvrtc_request r = roots_request("#include <use.h>\n", roots, 1);
    const char *opts[1] = {cases[i].option};
    r.target = cases[i].target;
    r.options = opts;
    r.num_options = cases[i].option != NULL;
    assert_nvrtc_reaches(&r);
    assert_refused_both_ways(&r, "goes through a predefined macro", "unprobed predefine", i);
  }
}

/* Ordinary toolkit kernels (cuda_fp16.h, CUB, cuda/std, Thrust) pass the include check beside
 * NVRTC's built-in and compiler-predefined definitions and the rules that read them. */
static void test_toolkit_kernels_pass_beside_the_builtins(void **state) {
  (void)state;
  const char *roots[] = {"/usr/local/cuda/include", "/usr/local/cuda/include/cccl"};
  static const char *const srcs[] = {
      "#include <cuda_fp16.h>\n__global__ void k(__half *p) { p[0] = __hadd(p[0], p[1]); }\n",
      "#include <cub/block/block_reduce.cuh>\n__global__ void k(int *p) { using R = "
      "cub::BlockReduce<int, 128>; __shared__ R::TempStorage t; p[0] = R(t).Sum(p[threadIdx.x]); "
      "}\n",
      "#include <cuda/std/atomic>\n__global__ void k(int *p) { cuda::std::atomic_ref<int> a(*p); "
      "a.fetch_add(1); }\n",
      "#include <thrust/functional.h>\n__global__ void k(int *p) { p[0] = "
      "thrust::plus<int>()(p[1], "
      "p[2]); }\n",
  };
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    t4a_nvrtc_request r = roots_request(srcs[i], roots, 2);
    assert_check_passes(&r, "toolkit", i);
  }
}

/* Failure sweep of the expansion check: every allocation in turn fails with HOST_OUT_OF_MEMORY
 * (nothing else), until the check passes. */
static void test_paste_check_failure_sweep(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x, ...) CAT(x, __VA_ARGS__)\n"
                            "#define S(x) #x\n#define P K\n");
  t4a_nvrtc_header h[1] = {{.name = "h.h", .content = "#if P(a, b) || S(c)\n#endif\n"}};
  t4a_nvrtc_request r =
      roots_request("#include <k.h>\n#include \"h.h\"\nint P(x, y), K(e, n), CAT(K, 1);\n", roots, 1);
  r.headers = h;
  r.num_headers = 1;
  int failures = 0;
  for (long n = 0;; n++) {
    t4a_nvrtc_roots_forget_();
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_HOST_MALLOC));
    t4a_nvrtc_root_reach total;
    t4a_status st = t4a_nvrtc_includes_resolve(g_lib, &r, NULL, &total);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      break;
    }
    failures++;
    assert_int_equal(st, T4A_HOST_OUT_OF_MEMORY);
  }
  assert_true(failures > 10);
}

/* Failure sweep of t4a_nvrtc_includes_resolve: every allocation and file operation in turn. */
static void test_includes_resolve_failure_sweep(void **state) {
  (void)state;
  write_file(g_root, "lib/mid.h", "#pragma once\n#include \"inner.h\"\n#include <top.h>\n");
  write_file(g_root, "inner.h", "#pragma once\n");
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request("#include <lib/mid.h>\n#include <no/such.h>\n", roots, 2);
  int failures = 0;
  for (long n = 0;; n++) {
    t4a_nvrtc_roots_forget_();
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_FILE_BITS);
    t4a_nvrtc_root_reach per[2], total;
    t4a_status st = t4a_nvrtc_includes_resolve(g_lib, &r, per, &total);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      assert_int_equal(total.files, 4); /* mid.h, inner.h, top.h, a/b/deep.h */
      assert_true(total.empty >= 3);    /* lib/inner.h, no/ in r1 and r2 */
      break;
    }
    failures++;
    assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_IO);
  }
  assert_true(failures > 10);
}

/* Failure sweep of a cached compile with include roots (fresh memos each time, a disk cache):
 * every allocation and file operation in turn. A failure is typed (HOST_OUT_OF_MEMORY, IO)
 * with nothing cached and no temporary file, or swallowed (the disk level, the disk memo). */
static void test_cached_compile_with_roots_failure_sweep(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  int failures = 0;
  for (long n = 0;; n++) {
    t4a_nvrtc_roots_forget_();
    rm_tree(g_dir);
    mkdir(g_dir, 0777);
    t4a_nvrtc_cache *c = new_cache(1);
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_FILE_BITS);
    t4a_nvrtc_artifact *a = NULL;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, &o);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
    if (st == T4A_OK) {
      assert_non_null(a);
    } else {
      assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_IO);
      assert_null(a);
      assert_int_equal(memory_entries(c), 0);
      assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
      failures++;
    }
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_outcome_deinit(&o);
    t4a_nvrtc_cache_destroy(c);
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      break;
    }
  }
  assert_true(failures > 10);
  /* t4a_nvrtc_toolkit_find has no fault point (stat and realpath only): it never fails on one. */
  fault_plan plan;
  fault_plan_install(&plan, 0, FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_FILE_BITS);
  t4a_nvrtc_toolkit tk;
  t4a_status st = t4a_nvrtc_toolkit_find(NULL, &tk);
  fault_plan_remove();
  assert_true(st == T4A_OK || st == T4A_UNSUPPORTED);
  assert_int_equal(plan.failed_point, -1);
}

/* ---- What the key cannot see, compiled uncached (compile_uncacheable) ----------------------- */

static t4a_nvrtc_cache *uncacheable_cache(void) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = g_dir;
  o.compile_uncacheable = 1;
  t4a_nvrtc_cache *c = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_OK);
  return c;
}

/* Compiles r uncached through c: UNCACHED, the refusal in the outcome, `needle` in the PTX,
 * nothing cached at either level; returns the artifact's key (hex) in key. */
static void compile_uncached_ok(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r, const char *needle,
                                char key[33]) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  long before = wrapped_compiles();
  uint64_t uncached = counters(c).nvrtc_uncached;
  assert_int_equal(t4a_nvrtc_cache_compile(c, r, &a, &o), T4A_OK);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_UNCACHED);
  assert_string_equal(t4a_nvrtc_origin_name(o.origin), "uncached");
  assert_non_null(o.uncached_why);
  assert_non_null(strstr(o.uncached_why, "__has_include"));
  size_t n = 0;
  const char *ptx = t4a_nvrtc_artifact_data(a, &n);
  assert_non_null(memmem(ptx, n, needle, strlen(needle)));
  assert_int_equal(wrapped_compiles(), before + 1);
  assert_int_equal(counters(c).nvrtc_uncached, uncached + 1);
  assert_int_equal(memory_entries(c), 0);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
  assert_int_equal(test_count_files(g_dir, ".t4m", NULL), 0); /* nor its include manifest */
  snprintf(key, 33, "%s", t4a_nvrtc_artifact_key_hex(a));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
}

/* A request the include check refuses compiles, uncached, every time; its artifact's key follows
 * the header it read (so a module cache keyed by artifacts loads the edited kernel), as does that
 * of t4a_nvrtc_compile, which reads the roots unkeyed. Without the option it is refused. */
static void test_uncacheable_requests_compile_uncached(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n");
  write_file(g_root, "v.h", "#define V 111\n");
  static const char src[] =
      "#include <k.h>\n#include <v.h>\n#if K(include)(<v.h>)\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = V; }\n";
  t4a_nvrtc_request r = roots_request(src, roots, 1);
  t4a_nvrtc_cache *strict = new_cache(1);
  expect_refused(strict, &r, T4A_INVALID_ARGUMENT, "__has_include", NULL);
  t4a_nvrtc_cache_destroy(strict);

  t4a_nvrtc_cache *c = uncacheable_cache();
  char k1[33], k2[33], k3[33];
  compile_uncached_ok(c, &r, "111", k1);
  compile_uncached_ok(c, &r, "111", k2); /* compiled again: the same bytes, the same key */
  assert_string_equal(k1, k2);
  edit_keep_mtime(g_root, "v.h", "#define V 222\n");
  compile_uncached_ok(c, &r, "222", k3);
  assert_string_not_equal(k1, k3);
  t4a_nvrtc_artifact *a = NULL, *b = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  edit_keep_mtime(g_root, "v.h", "#define V 333\n");
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &b, NULL), T4A_OK);
  assert_string_not_equal(t4a_nvrtc_artifact_key_hex(a), t4a_nvrtc_artifact_key_hex(b));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_artifact_release(b);

  /* A failed compile: its log, nothing cached. */
  static const char bad[] = "#include <k.h>\n#if K(include)(<v.h>)\n#endif\nsyntax error here\n";
  r = roots_request(bad, roots, 1);
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  a = (t4a_nvrtc_artifact *)1;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, &o), T4A_COMPILE_FAILED);
  assert_null(a);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
  assert_non_null(o.log);
  assert_null(o.uncached_why);
  t4a_nvrtc_outcome_deinit(&o);
  assert_int_equal(memory_entries(c), 0);
  t4a_nvrtc_cache_destroy(c);
}

/* Only what the key cannot see is compiled uncached: bad roots, an include nothing provides and
 * the options' refusals stay errors, with nothing compiled. */
static void test_uncacheable_keeps_the_other_refusals(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = uncacheable_cache();
  char missing[700];
  snprintf(missing, sizeof missing, "%s/none", g_tree);
  const char *bad_roots[] = {missing};
  t4a_nvrtc_request r = roots_request(k_uses_top, bad_roots, 1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, missing, NULL);
  r = roots_request("#include \"nothere.h\"\n__global__ void k() {}\n", NULL, 0);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "names no header", NULL);
  static const char *const opts[] = {"--pre-include=/etc/hostname"};
  r = roots_request("__global__ void k() {}\n", NULL, 0);
  r.options = opts;
  r.num_options = 1;
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "--pre-include", NULL);
  /* A root that is a file, a symbolic link loop on an include's path. */
  char file_root[700], loop[700];
  snprintf(file_root, sizeof file_root, "%s/top.h", g_root);
  const char *file_roots[] = {file_root};
  r = roots_request(k_uses_top, file_roots, 1);
  expect_refused(c, &r, T4A_INVALID_ARGUMENT, "not a directory", NULL);
  snprintf(loop, sizeof loop, "%s/loop.h", g_root);
  assert_int_equal(symlink(loop, loop), 0);
  const char *roots[] = {g_root};
  r = roots_request("#include <loop.h>\n__global__ void k() {}\n", roots, 1);
  /* (a first miss: its compile ran alongside the check, and is dropped) */
  expect_refused_compiled(c, &r, T4A_INVALID_ARGUMENT, "loop", NULL, 1);
  assert_int_equal(counters(c).nvrtc_uncached, 0);
  t4a_nvrtc_cache_destroy(c);
}

/* A dangling symbolic link on an include's path is what the key cannot see (its target could
 * appear unseen), not a bad input: NVRTC skips it and finds the header in the next root, and so
 * does an uncached compile. The caller's failure detail is left as it was. */
static void test_dangling_link_compiles_uncached(void **state) {
  (void)state;
  char dangling[700], missing[700];
  snprintf(dangling, sizeof dangling, "%s/v.h", g_root);
  snprintf(missing, sizeof missing, "%s/nowhere.h", g_tree);
  assert_int_equal(symlink(missing, dangling), 0);
  write_file(g_root2, "v.h", "#define V 4321\n");
  const char *roots[] = {g_root, g_root2};
  t4a_nvrtc_request r = roots_request(
      "#include <v.h>\nextern \"C\" __global__ void k(int *p) { *p = V; }\n", roots, 2);
  t4a_nvrtc_cache *strict = new_cache(1);
  expect_refused(strict, &r, T4A_INVALID_ARGUMENT, "dangling", NULL);
  t4a_nvrtc_cache_destroy(strict);
  t4a_nvrtc_cache *c = uncacheable_cache();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_cache_compile(c, NULL, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_error before, after;
  t4a_error_last(&before);
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, &o), T4A_OK);
  t4a_error_last(&after);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_UNCACHED);
  assert_non_null(strstr(o.uncached_why, "dangling"));
  assert_string_equal(after.message, before.message);
  size_t n = 0;
  const char *ptx = t4a_nvrtc_artifact_data(a, &n);
  assert_non_null(memmem(ptx, n, "4321", 4));
  assert_int_equal(memory_entries(c), 0);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
  assert_int_equal(test_count_files(g_dir, ".t4m", NULL), 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  t4a_nvrtc_cache_destroy(c);
}

/* Host allocation and file faults at every point of an uncached compile: a typed status or
 * success, nothing cached. */
static void test_uncached_compile_failure_sweep(void **state) {
  (void)state;
  const char *roots[] = {g_root};
  write_file(g_root, "k.h", "#define CAT(a, b) a ## b\n#define K(x) CAT(__has_, x)\n");
  static const char src[] =
      "#include <k.h>\n#if K(include)(<k.h>)\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = 7; }\n";
  t4a_nvrtc_request r = roots_request(src, roots, 1);
  int failures = 0;
  for (long n = 0;; n++) {
    t4a_nvrtc_roots_forget_();
    t4a_nvrtc_cache *c = uncacheable_cache();
    fault_plan plan;
    fault_plan_install(&plan, n, FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_FILE_BITS);
    t4a_nvrtc_artifact *a = NULL;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, &o);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    if (st == T4A_OK) {
      assert_non_null(a);
      assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_UNCACHED);
    } else {
      assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_IO);
      assert_null(a);
      failures++;
    }
    assert_int_equal(memory_entries(c), 0);
    assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_outcome_deinit(&o);
    t4a_nvrtc_cache_destroy(c);
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      break;
    }
  }
  assert_true(failures > 5);
}

/* ---- The real toolkit --------------------------------------------------------------------- */

static int toolkit(t4a_nvrtc_toolkit *tk) {
  return t4a_nvrtc_toolkit_find(t4a_nvrtc_lib_origin(g_lib), tk) == T4A_OK;
}

static void test_toolkit_headers_through_the_cache(void **state) {
  (void)state;
  t4a_nvrtc_toolkit tk;
  if (!toolkit(&tk)) skip();
  assert_int_equal(tk.num_roots, 2);
  static const char fp16[] =
      "#include <cuda_fp16.h>\n"
      "#include <cuda_bf16.h>\n"
      "#include <cooperative_groups.h>\n"
      "#include <cuda/std/type_traits>\n"
      "extern \"C\" __global__ void h(__half *x, __nv_bfloat16 *y) {\n"
      "  static_assert(cuda::std::is_same<int, int>::value, \"\");\n"
      "  x[threadIdx.x] = __hadd(x[threadIdx.x], __float2half(1.0f));\n"
      "  y[threadIdx.x] = __float2bfloat16(2.0f);\n"
      "}\n";
  t4a_nvrtc_request r = roots_request(fp16, tk.roots, tk.num_roots);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, ".entry h"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, ".entry h"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache *c2 = new_cache(1);
  assert_int_equal(compile_origin(c2, &r, ".entry h"), T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(wrapped_compiles(), 1);
  /* The uncached compile takes roots too. */
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  t4a_nvrtc_artifact_release(a);
  /* Thrust's computed includes (#include __THRUST_DEVICE_SYSTEM_TAG_HEADER) are resolved over
   * Thrust's definitions; a definition that could take them out of the roots is refused. */
  static const char tag[] =
      "#include <thrust/iterator/detail/device_system_tag.h>\n"
      "extern \"C\" __global__ void t(int *p) { *p = 1; }\n";
  r = roots_request(tag, tk.roots, tk.num_roots);
  t4a_nvrtc_cache *c3 = new_cache(0);
  assert_int_equal(compile_origin(c3, &r, ".entry t"), T4A_NVRTC_ORIGIN_COMPILED);
  static const char bad_tag[] =
      "#define __THRUST_DEVICE_SYSTEM_ROOT /etc\n"
      "#include <thrust/iterator/detail/device_system_tag.h>\n";
  r = roots_request(bad_tag, tk.roots, tk.num_roots);
  assert_int_equal(t4a_nvrtc_cache_compile(c3, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "computed include"));
  assert_non_null(strstr(e.message, "device_system_tag.h"));
  assert_int_equal(memory_entries(c3), 1);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_cache_destroy(c2);
  t4a_nvrtc_cache_destroy(c3);
}

static void test_cub_kernel_through_the_cache(void **state) {
  (void)state;
  t4a_nvrtc_toolkit tk;
  if (!toolkit(&tk)) skip();
  static const char cub[] =
      "#include <cub/block/block_reduce.cuh>\n"
      "extern \"C\" __global__ void sum(const float *x, float *out) {\n"
      "  using R = cub::BlockReduce<float, 128>;\n"
      "  __shared__ typename R::TempStorage t;\n"
      "  float v = R(t).Sum(x[threadIdx.x]);\n"
      "  if (threadIdx.x == 0) *out = v;\n"
      "}\n";
  t4a_nvrtc_request r = roots_request(cub, tk.roots, tk.num_roots);
  t4a_nvrtc_cache *c = new_cache(1);
  assert_int_equal(compile_origin(c, &r, ".entry sum"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, ".entry sum"), T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(wrapped_compiles(), 1);
  t4a_nvrtc_cache_destroy(c);
}

/* ---- A first miss compiles alongside its include check (nvrtc_cache.c, spec_compile) -------- */

typedef struct check_waits_t {
  uint64_t misses, overlap_taken, overlap_discarded;
} check_waits_t;

/* A cache's first misses that took or dropped an overlapped compile, and its misses with roots. */
static check_waits_t check_waits(const t4a_nvrtc_cache *c) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  check_waits_t w = {s.roots_misses, s.counters.nvrtc_roots_overlapped,
                     s.counters.nvrtc_roots_overlap_dropped};
  return w;
}

/* The roots' files were written more than settle_ms before the compiles that follow. */
static void let_roots_settle(int mode, int settle_ms) {
  t4a_nvrtc_roots_overlap_(mode, (int64_t)settle_ms * 1000000);
  struct timespec d = {0, (long)(settle_ms + 70) * 1000000};
  nanosleep(&d, NULL);
}

static int overlap_teardown(void **state) {
  t4a_nvrtc_roots_overlap_(1, 2000000000);
  return each_teardown(state);
}

/* Settled roots: NVRTC's compile, run while the check ran, is taken (one compile), cached at both
 * levels with the manifest, so a new cache hits on disk. */
static void test_first_miss_compiles_alongside_the_check(void **state) {
  (void)state;
  let_roots_settle(1, 30);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  check_waits_t w0 = check_waits(c);
  long before = wrapped_compiles();
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  check_waits_t w1 = check_waits(c);
  assert_int_equal(wrapped_compiles(), before + 1);
  assert_int_equal(w1.overlap_taken, w0.overlap_taken + 1);
  assert_int_equal(w1.overlap_discarded, w0.overlap_discarded);
  assert_int_equal(w1.misses, w0.misses + 1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
  c = uncacheable_cache();
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_DISK);
  /* An edit later is a miss with a manifest (no overlap), compiled after its check. */
  edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 1235\n");
  assert_int_equal(compile_origin(c, &r, "1235"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(check_waits(c).overlap_taken, 0); /* (a disk hit, then a miss with a manifest) */
  assert_int_equal(wrapped_compiles(), before + 2);
  t4a_nvrtc_cache_destroy(c);
}

/* Files changed within the settle time: the overlapped compile is dropped and NVRTC runs again
 * after the check, whose result is cached. */
static void test_first_miss_of_files_just_written_compiles_after_the_check(void **state) {
  (void)state;
  t4a_nvrtc_roots_overlap_(1, 2000000000);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  check_waits_t w0 = check_waits(c);
  long before = wrapped_compiles();
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  check_waits_t w1 = check_waits(c);
  assert_int_equal(wrapped_compiles(), before + 2);
  assert_int_equal(w1.overlap_taken, w0.overlap_taken);
  assert_int_equal(w1.overlap_discarded, w0.overlap_discarded + 1);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

static long g_edits_after_compile;
static void edit_after_compile(void *user) {
  (void)user;
  if (g_edits_after_compile++ == 0) {
    edit_keep_mtime(g_root, "a/b/deep.h", "#pragma once\n#define DEEP_VALUE 9999\n");
  }
}

/* NVRTC read deep.h, then it changed, then the check read it: the key names what the check read,
 * so the compile NVRTC ran before is not taken; the one after the check is, and holds 9999. */
static void test_first_miss_edited_before_the_check_reads_is_not_taken(void **state) {
  (void)state;
  let_roots_settle(2, 30); /* the compile ends before the check starts */
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  g_edits_after_compile = 0;
  g_nvrtc_wrap.on_compiled = edit_after_compile;
  check_waits_t w0 = check_waits(c);
  assert_int_equal(compile_origin(c, &r, "9999"), T4A_NVRTC_ORIGIN_COMPILED);
  g_nvrtc_wrap.on_compiled = NULL;
  assert_int_equal(check_waits(c).overlap_discarded, w0.overlap_discarded + 1);
  assert_int_equal(compile_origin(c, &r, "9999"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

static void move_shadow_after_compile(void *user) {
  (void)user;
  if (g_edits_after_compile++ == 0) {
    char from[1200], to[1200];
    snprintf(from, sizeof from, "%s/top.h", g_root2);
    snprintf(to, sizeof to, "%s/moved.h", g_tree);
    assert_int_equal(rename(from, to), 0);
  }
}

/* NVRTC read the first root's top.h, which then moved away before the check looked: every file
 * the check reads is old, but the folder that held top.h changed, so the compile is not taken. */
static void test_first_miss_folder_changed_before_the_check_is_not_taken(void **state) {
  (void)state;
  write_file(g_root2, "top.h", "#pragma once\n#define DEEP_VALUE 7777\n");
  let_roots_settle(2, 30);
  const char *roots[] = {g_root2, g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 2);
  t4a_nvrtc_cache *c = uncacheable_cache();
  g_edits_after_compile = 0;
  g_nvrtc_wrap.on_compiled = move_shadow_after_compile;
  check_waits_t w0 = check_waits(c);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  g_nvrtc_wrap.on_compiled = NULL;
  assert_int_equal(check_waits(c).overlap_discarded, w0.overlap_discarded + 1);
  t4a_nvrtc_cache_destroy(c);
}

/* A root edited after the check read it, while NVRTC still ran: seen as for any miss (not kept). */
static void test_first_miss_edited_after_the_check_is_not_cached(void **state) {
  (void)state;
  let_roots_settle(1, 30);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  g_edit_during_compile = 0;
  g_nvrtc_wrap.on_compile = edit_on_compile;
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_OK);
  g_nvrtc_wrap.on_compile = NULL;
  t4a_nvrtc_artifact_release(a);
  /* Either the check read 1234 and the edit was an event (not kept), or it read 9999 after the
   * edit (changed then: not taken, compiled again): never 1234's key with 9999's code. */
  t4a_nvrtc_origin expected =
      memory_entries(c) == 0 ? T4A_NVRTC_ORIGIN_COMPILED : T4A_NVRTC_ORIGIN_MEMORY;
  assert_int_equal(compile_origin(c, &r, "9999"), expected);
  t4a_nvrtc_cache_destroy(c);
}

typedef struct same_request {
  t4a_nvrtc_cache *c;
  const t4a_nvrtc_request *r;
  t4a_status st;
  t4a_nvrtc_origin origin;
} same_request;

static void *compile_same(void *arg) {
  same_request *s = arg;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  s->st = t4a_nvrtc_cache_compile(s->c, s->r, &a, &o);
  s->origin = o.origin;
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  return NULL;
}

static void hold_compile(void *user) {
  (void)user;
  struct timespec d = {0, 200000000};
  nanosleep(&d, NULL);
}

/* Threads asking for one first miss: one compiles (alongside its check), the others wait for it
 * and take its artifact from memory. */
static void test_first_miss_from_threads_compiles_once(void **state) {
  (void)state;
  let_roots_settle(1, 30);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  long before = wrapped_compiles();
  g_nvrtc_wrap.on_compile = hold_compile; /* the others arrive while it runs */
  same_request s[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    s[i] = (same_request){c, &r, T4A_OK, T4A_NVRTC_ORIGIN_NONE};
    assert_int_equal(pthread_create(&th[i], NULL, compile_same, &s[i]), 0);
  }
  int compiled = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(s[i].st, T4A_OK);
    compiled += s[i].origin == T4A_NVRTC_ORIGIN_COMPILED;
  }
  g_nvrtc_wrap.on_compile = NULL;
  assert_int_equal(compiled, 1);
  assert_int_equal(wrapped_compiles(), before + 1);
  t4a_nvrtc_cache_destroy(c);
}

/* No thread for the overlap: the miss runs as every other (check, then compile). */
static void test_first_miss_without_a_thread_compiles_after_the_check(void **state) {
  (void)state;
  let_roots_settle(1, 30);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  t4a_nvrtc_cache *c = uncacheable_cache();
  check_waits_t w0 = check_waits(c);
  long before = wrapped_compiles();
  fault_plan plan;
  fault_plan_install(&plan, 0, FAULT_BIT(T4A_FAULT_THREAD_CREATE));
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_COMPILED);
  fault_plan_remove();
  assert_int_equal(plan.failed_point, T4A_FAULT_THREAD_CREATE);
  check_waits_t w1 = check_waits(c);
  assert_int_equal(wrapped_compiles(), before + 1);
  assert_int_equal(w1.overlap_taken + w1.overlap_discarded,
                   w0.overlap_taken + w0.overlap_discarded);
  assert_int_equal(compile_origin(c, &r, "1234"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

/* Failure sweep of a first miss taken from its overlapped compile: every allocation, file
 * operation and thread creation in turn, on either thread. */
static void test_first_miss_overlap_failure_sweep(void **state) {
  (void)state;
  let_roots_settle(1, 30);
  const char *roots[] = {g_root};
  t4a_nvrtc_request r = roots_request(k_uses_top, roots, 1);
  int failures = 0;
  for (long n = 0;; n++) {
    t4a_nvrtc_roots_forget_();
    rm_tree(g_dir);
    mkdir(g_dir, 0777);
    t4a_nvrtc_cache *c = uncacheable_cache();
    fault_plan plan;
    fault_plan_install(
        &plan, n,
        FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_FILE_BITS | FAULT_BIT(T4A_FAULT_THREAD_CREATE));
    t4a_nvrtc_artifact *a = NULL;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, &o);
    int failed = plan.failed_point >= 0;
    fault_plan_remove();
    assert_int_equal(test_count_files(g_dir, NULL, ".t4a-tmp-"), 0);
    if (st == T4A_OK) {
      assert_non_null(a);
    } else {
      assert_true(st == T4A_HOST_OUT_OF_MEMORY || st == T4A_IO);
      assert_null(a);
      assert_int_equal(memory_entries(c), 0);
      assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 0);
      failures++;
    }
    t4a_nvrtc_artifact_release(a);
    t4a_nvrtc_outcome_deinit(&o);
    t4a_nvrtc_cache_destroy(c);
    if (!failed) {
      assert_int_equal(st, T4A_OK);
      break;
    }
  }
  assert_true(failures > 10);
}

/* A curand kernel: read whole, the include check refuses curand_kernel.h (design §11: its
 * macros' arguments spell every letter of __has_include, in groups NVRTC skips by __CUDACC_RTC__),
 * so through a cache that compiles what it cannot key the kernel compiles, uncached, as with nvcc;
 * skipping those groups, the check keys it and it is cached. */
static void test_curand_kernel_compiles_uncached(void **state) {
  (void)state;
  t4a_nvrtc_toolkit tk;
  if (!toolkit(&tk)) skip();
  t4a_nvrtc_check_skip_groups_(0);
  static const char src[] =
      "#include <curand_kernel.h>\n"
      "extern \"C\" __global__ void u(float *o, unsigned long long seed) {\n"
      "  curandStatePhilox4_32_10_t s;\n"
      "  curand_init(seed, threadIdx.x, 0, &s);\n"
      "  o[threadIdx.x] = curand_uniform(&s);\n"
      "}\n";
  t4a_nvrtc_request r = roots_request(src, tk.roots, tk.num_roots);
  t4a_nvrtc_cache *c = uncacheable_cache();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, &o), T4A_OK);
  assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_UNCACHED);
  size_t n = 0;
  const char *ptx = t4a_nvrtc_artifact_data(a, &n);
  assert_non_null(memmem(ptx, n, ".entry u", 8));
  assert_int_equal(memory_entries(c), 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_outcome_deinit(&o);
  t4a_nvrtc_check_skip_groups_(1);
  assert_int_equal(compile_origin(c, &r, ".entry u"), T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(compile_origin(c, &r, ".entry u"), T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_cache_destroy(c);
}

static void test_toolkit_find_says_where_it_looked(void **state) {
  (void)state;
  char *saved = getenv("T4A_CUDA_PATH") ? strdup(getenv("T4A_CUDA_PATH")) : NULL;
  /* T4A_CUDA_PATH wins when it holds a toolkit; a folder without one is skipped and listed. */
  setenv("T4A_CUDA_PATH", g_tree, 1);
  t4a_nvrtc_toolkit tk;
  t4a_status st = t4a_nvrtc_toolkit_find(NULL, &tk);
  assert_non_null(strstr(tk.looked, g_tree));
  if (st == T4A_OK) assert_string_not_equal(tk.from, "T4A_CUDA_PATH");
  write_file(g_tree, "include/cuda_runtime.h", "\n");
  assert_int_equal(t4a_nvrtc_toolkit_find(NULL, &tk), T4A_OK);
  assert_string_equal(tk.from, "T4A_CUDA_PATH");
  assert_int_equal(tk.num_roots, 1);
  assert_non_null(strstr(tk.include, g_tree));
  if (saved != NULL) {
    setenv("T4A_CUDA_PATH", saved, 1);
    free(saved);
  } else {
    unsetenv("T4A_CUDA_PATH");
  }
  assert_int_equal(t4a_nvrtc_toolkit_find(NULL, NULL), T4A_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_nested_edit_is_a_miss_at_both_levels, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_added_and_removed_files_are_misses, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_touch_is_a_hit, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_many_includes_in_one_root_file, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_root_order_and_other_roots_are_misses, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_link_chain_retarget_is_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_link_target_parent_replaced_is_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_retargeted_toolkit_link_is_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_root_edited_during_compile_is_not_cached, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_files_that_become_one_are_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_known_valid_manifest_sees_a_later_edit, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_shadowing_header_in_an_earlier_root_is_a_miss,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_shadowing_header_in_a_new_folder_is_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_second_pass_skipped_only_when_it_changes_nothing,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_second_pass_shortcut_on_toolkit_headers, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_operands_replaced_in_macro_bodies_are_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_toolkit_kernels_with_macro_calls_are_cached, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_pastes_through_the_request_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_pastes_where_the_texts_read_as_nvrtc_reads_them,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_pragma_operands_are_checked, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_request_definitions_join_the_roots_pieces, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_invocations_left_open_at_a_files_end_are_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_calls_whose_result_takes_the_next_group_are_collected,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_root_pasted_wrapper_names_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_too_many_expansions_get_the_coarse_check, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_strings_in_the_requests_definitions_are_read, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_macros_nvrtc_predefines_are_refused_undefined,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_splices_with_several_crs_are_read, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_lexer_edges_a_review_found_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_header_names_as_nvrtc_spells_them, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_groups_nvrtc_skips_are_skipped, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_pasters_no_text_defines_are_read, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_definitions_are_read, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_pastes_without_a_text_paste_are_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_bodies_that_name_or_piece_a_wrapper_are_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_pieces_of_has_include_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_target_pasters_count_as_pasting, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_compiler_predefined_names_in_operands_are_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_names_the_compiler_predefines_are_read_and_refused,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_predefines_the_probe_misses_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_toolkit_kernels_pass_beside_the_builtins, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_paste_check_failure_sweep, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_header_beside_the_includer_is_a_miss, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_files_the_includes_do_not_reach_keep_the_hit, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_plain_kernel_validates_nothing, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_manifest_is_a_miss, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_computed_includes_are_refused, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_links_out_of_the_root_are_refused_or_followed,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_bad_roots_are_typed_errors, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_miss_probes_only_what_the_includes_reach, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_known_valid_until_an_event, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_dangling_link_on_the_way_is_validated_by_stat,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_relative_root_follows_the_working_directory, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_forked_child_does_not_take_the_parents_events,
                                      each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_includes_resolve_failure_sweep, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_cached_compile_with_roots_failure_sweep, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_toolkit_headers_through_the_cache, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_cub_kernel_through_the_cache, each_setup, each_teardown),
      cmocka_unit_test_setup_teardown(test_uncacheable_requests_compile_uncached, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_uncacheable_keeps_the_other_refusals, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_uncached_compile_failure_sweep, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_dangling_link_compiles_uncached, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_curand_kernel_compiles_uncached, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_toolkit_find_says_where_it_looked, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_compiles_alongside_the_check, each_setup,
                                      overlap_teardown),
      cmocka_unit_test_setup_teardown(
          test_first_miss_of_files_just_written_compiles_after_the_check, each_setup,
          overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_edited_before_the_check_reads_is_not_taken,
                                      each_setup, overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_folder_changed_before_the_check_is_not_taken,
                                      each_setup, overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_edited_after_the_check_is_not_cached,
                                      each_setup, overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_from_threads_compiles_once, each_setup,
                                      overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_without_a_thread_compiles_after_the_check,
                                      each_setup, overlap_teardown),
      cmocka_unit_test_setup_teardown(test_first_miss_overlap_failure_sweep, each_setup,
                                      overlap_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
