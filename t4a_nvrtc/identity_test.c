/* The identity record and the key (no NVRTC call): the framing is unambiguous, the hashed,
 * stored and compared bytes agree, every field changes the record, and equal requests from
 * different storage are equal. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;

static int setup(void **state) {
  (void)state;
  return t4a_nvrtc_lib_open(NULL, &g_lib) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  return 0;
}

/* The record of a request, written through the WRITE sink; its key through the HASH sink. */
typedef struct record {
  uint8_t *bytes;
  size_t size;
  uint8_t key[16];
} record;

static record make(const t4a_nvrtc_request *r) {
  t4a_nvrtc_prepared p;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, r, &p), T4A_OK);
  record rec;
  rec.size = t4a_nvrtc_identity_size(g_lib, &p);
  rec.bytes = malloc(rec.size);
  assert_non_null(rec.bytes);
  t4a_nvrtc_identity_write(g_lib, &p, rec.bytes);
  t4a_nvrtc_identity_key(g_lib, &p, rec.key);
  /* The streamed key is XXH3-128 of the written bytes, canonical (big-endian). */
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(rec.bytes, rec.size));
  assert_memory_equal(rec.key, c.digest, 16);
  assert_true(t4a_nvrtc_identity_equal(g_lib, &p, rec.bytes, rec.size));
  return rec;
}

static int same(const record *a, const record *b) {
  return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

static void test_xxh3_check_value(void **state) {
  (void)state;
  /* XXH3-128 of "abc": the library t4a links computes xxHash's documented check value. */
  XXH128_hash_t h = XXH3_128bits("abc", 3);
  assert_true(h.high64 == 0x06b05ab6733a6185ull);
  assert_true(h.low64 == 0x78af5f94892f3950ull);
}

static void test_framing_is_unambiguous(void **state) {
  (void)state;
  /* One option "-DA -DB" against two options "-DA" and "-DB"... */
  const char *one[] = {"-DA=1 -DB=2"};
  const char *two[] = {"-DA=1", "-DB=2"};
  t4a_nvrtc_request r1 = test_add1_request(), r2 = test_add1_request();
  r1.options = one;
  r1.num_options = 1;
  r2.options = two;
  r2.num_options = 2;
  record a = make(&r1), b = make(&r2);
  assert_false(same(&a, &b));
  assert_memory_not_equal(a.key, b.key, 16);
  free(a.bytes);
  free(b.bytes);
  /* ...and a byte moved from a header's name into its content. */
  t4a_nvrtc_header h1 = {"ab", "c", 0, 0}, h2 = {"a", "bc", 0, 0};
  r1 = test_add1_request();
  r2 = test_add1_request();
  r1.headers = &h1;
  r1.num_headers = 1;
  r2.headers = &h2;
  r2.num_headers = 1;
  a = make(&r1);
  b = make(&r2);
  assert_false(same(&a, &b));
  assert_memory_not_equal(a.key, b.key, 16);
  /* The stored record of one does not compare equal to the other request. */
  t4a_nvrtc_prepared p2;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, &r2, &p2), T4A_OK);
  assert_false(t4a_nvrtc_identity_equal(g_lib, &p2, a.bytes, a.size));
  assert_false(t4a_nvrtc_identity_equal(g_lib, &p2, b.bytes, b.size - 1)); /* a prefix */
  free(a.bytes);
  free(b.bytes);
}

static void test_every_field_counts(void **state) {
  (void)state;
  t4a_nvrtc_header h = {"h.h", "#define X 1\n", 0, 0};
  const char *opts[] = {"-DY=2"};
  const char *exprs[] = {"add1"};
  t4a_nvrtc_request base = test_add1_request();
  base.headers = &h;
  base.num_headers = 1;
  base.options = opts;
  base.num_options = 1;
  base.name_expressions = exprs;
  base.num_name_expressions = 1;
  record b = make(&base);
  /* Equal content from other storage, with explicit byte counts: the same record. */
  char *src = strdup(k_add1_src);
  t4a_nvrtc_header hc = {"h.hXXX", "#define X 1\nYYY", 3, 12};
  t4a_nvrtc_request copy = base;
  copy.source = src;
  copy.source_bytes = strlen(src);
  copy.headers = &hc;
  record c = make(&copy);
  assert_true(same(&b, &c));
  free(c.bytes);
  free(src);
  t4a_nvrtc_header h2 = {"h.h", "#define X 2\n", 0, 0};
  t4a_nvrtc_header h3 = {"g.h", "#define X 1\n", 0, 0};
  const char *opts2[] = {"-DY=3"};
  const char *exprs2[] = {"&add1"};
  for (int v = 0; v < 9; v++) {
    t4a_nvrtc_request r = base;
    switch (v) {
      case 0:
        r.source = "extern \"C\" __global__ void add1() {}\n";
        break;
      case 1:
        r.headers = &h2;
        break;
      case 2:
        r.headers = &h3;
        break;
      case 3:
        r.options = opts2;
        break;
      case 4:
        r.num_options = 0;
        break;
      case 5:
        r.target = "sm_80";
        break;
      case 6:
        r.output = T4A_NVRTC_OUTPUT_CUBIN;
        break;
      case 7:
        r.program_name = "other.cu";
        break;
      case 8:
        r.name_expressions = exprs2;
        break;
    }
    record x = make(&r);
    assert_false(same(&b, &x));
    assert_memory_not_equal(b.key, x.key, 16);
    free(x.bytes);
  }
  /* The record starts with the magic and the schema version. */
  assert_memory_equal(b.bytes, "t4a.nvrtc.identity", 18);
  assert_int_equal(b.bytes[18], T4A_NVRTC_KEY_SCHEMA);
  free(b.bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_xxh3_check_value),
      cmocka_unit_test(test_framing_is_unambiguous),
      cmocka_unit_test(test_every_field_counts),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
