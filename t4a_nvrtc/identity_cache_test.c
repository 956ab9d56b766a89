/* The compiler's identity in the artifact cache, on the fake NVRTC (testing/fake_nvrtc) reporting
 * other versions and build identities: the key of one request differs for each NVRTC version and
 * build, and an artifact another NVRTC compiled into a shared disk directory is a miss (compiled
 * again, written beside it, nothing read as corrupt), while the NVRTC that wrote it still hits
 * it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_testutil.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static char g_dir[512];

static int each_setup(void **state) {
  (void)state;
  test_tmpdir(g_dir, sizeof g_dir);
  return 0;
}

static int each_teardown(void **state) {
  (void)state;
  test_rmdir(g_dir);
  if (t4a_fake_nvrtc_programs_live() != 0) {
    print_error("%ld fake NVRTC programs are still alive\n", t4a_fake_nvrtc_programs_live());
    return -1;
  }
  return 0;
}

/* The identities: X the default fake, Y another version with X's build identity, Z X's version
 * with another build identity. */
typedef struct identity {
  int major, minor;
  const char *build;
} identity;
static const identity k_x = {13, 0, "fake-nvrtc-13.0"};
static const identity k_y = {12, 9, "fake-nvrtc-13.0"};
static const identity k_z = {13, 0, "fake-nvrtc-13.0 (another build)"};

static t4a_nvrtc_lib *open_as(const identity *id) {
  t4a_nvrtc_lib *lib = NULL;
  CK(t4a_fake_nvrtc_open_as(id->major, id->minor, id->build, &lib));
  int major = 0, minor = 0;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  assert_int_equal(major, id->major);
  assert_int_equal(minor, id->minor);
  return lib;
}

static t4a_nvrtc_request request(void) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = "k.cu";
  r.source = "extern \"C\" __global__ void k(int *x) { *x = 1; }\n";
  r.target = "sm_90";
  r.output = T4A_NVRTC_OUTPUT_PTX;
  return r;
}

typedef struct result {
  t4a_nvrtc_origin origin;
  char key[33];
  t4a_counter_values v; /* the cache's counters after the call */
  long compiles;        /* fake nvrtcCompileProgram calls it made */
} result;

/* One request through a fresh cache of `id`'s NVRTC (over g_dir, or memory only). */
static result compile_as(const identity *id, int disk) {
  t4a_nvrtc_lib *lib = open_as(id);
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  if (disk) o.disk_dir = g_dir;
  t4a_nvrtc_cache *c = NULL;
  CK(t4a_nvrtc_cache_create(lib, &o, &c));
  t4a_nvrtc_request r = request();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  long before = t4a_fake_nvrtc_compiles();
  CK(t4a_nvrtc_cache_compile(c, &r, &a, &out));
  result res;
  res.origin = out.origin;
  res.compiles = t4a_fake_nvrtc_compiles() - before;
  snprintf(res.key, sizeof res.key, "%s", t4a_nvrtc_artifact_key_hex(a));
  /* The artifact carries the identity of the NVRTC that made it, whichever level answered. */
  int major = 0, minor = 0;
  t4a_nvrtc_artifact_compiler_version(a, &major, &minor);
  assert_int_equal(major, id->major);
  assert_int_equal(minor, id->minor);
  assert_string_equal(t4a_nvrtc_artifact_build_identity(a), id->build);
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  res.v = s.counters;
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  t4a_nvrtc_lib_release(lib);
  return res;
}

/* What a miss looks like: NVRTC ran once, the directory had no usable entry, nothing was taken
 * for corrupt, and the new artifact was written beside the others. */
static void assert_disk_miss(const result *r) {
  assert_int_equal(r->origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(r->compiles, 1);
  assert_int_equal(r->v.nvrtc_disk_hits, 0);
  assert_int_equal(r->v.nvrtc_disk_misses, 1);
  assert_int_equal(r->v.nvrtc_disk_corrupt, 0);
  assert_int_equal(r->v.nvrtc_disk_writes, 1);
}

static void assert_disk_hit(const result *r, const char *key) {
  assert_int_equal(r->origin, T4A_NVRTC_ORIGIN_DISK);
  assert_int_equal(r->compiles, 0);
  assert_int_equal(r->v.nvrtc_disk_hits, 1);
  assert_int_equal(r->v.nvrtc_disk_corrupt, 0);
  assert_string_equal(r->key, key);
}

/* One request, three NVRTC identities: three keys. */
static void test_key_covers_version_and_build(void **state) {
  (void)state;
  result x = compile_as(&k_x, 0), y = compile_as(&k_y, 0), z = compile_as(&k_z, 0);
  assert_int_equal(x.origin, T4A_NVRTC_ORIGIN_COMPILED);
  assert_string_not_equal(x.key, y.key);
  assert_string_not_equal(x.key, z.key);
  assert_string_not_equal(y.key, z.key);
  /* The same identity gives the same key (the fake's identity is stable across opens). */
  result x2 = compile_as(&k_x, 0);
  assert_string_equal(x.key, x2.key);
}

/* X compiles into the directory; a cache reopened over it with NVRTC Y (another version) or Z
 * (another build) compiles again and writes its own entry; X, Y and Z then each hit their own. */
static void test_other_nvrtc_misses_the_disk_entry(void **state) {
  (void)state;
  result x = compile_as(&k_x, 1);
  assert_disk_miss(&x);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 1);
  result x_again = compile_as(&k_x, 1);
  assert_disk_hit(&x_again, x.key);

  result y = compile_as(&k_y, 1);
  assert_disk_miss(&y);
  assert_string_not_equal(y.key, x.key);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 2);
  result z = compile_as(&k_z, 1);
  assert_disk_miss(&z);
  assert_string_not_equal(z.key, x.key);
  assert_string_not_equal(z.key, y.key);
  assert_int_equal(test_count_files(g_dir, ".t4a", NULL), 3);

  /* Nothing was replaced: each NVRTC finds its own artifact. */
  result hx = compile_as(&k_x, 1), hy = compile_as(&k_y, 1), hz = compile_as(&k_z, 1);
  assert_disk_hit(&hx, x.key);
  assert_disk_hit(&hy, y.key);
  assert_disk_hit(&hz, z.key);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_key_covers_version_and_build, each_setup,
                                      each_teardown),
      cmocka_unit_test_setup_teardown(test_other_nvrtc_misses_the_disk_entry, each_setup,
                                      each_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
