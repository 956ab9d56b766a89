/* The copy threads' copies (copier.c): the streaming copy writes exactly memcpy's bytes at any
 * alignment and length and nothing outside them; a split copy, streaming or not, across the
 * threads gives the same bytes and counts itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a_xfer/xfer_internal.h"

enum { GUARD = 64, MAX_LEN = 4096 + 200 };

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

/* Every source and destination misalignment in 0..31, lengths around the 16- and 64-byte steps
 * and a few pages; guard bytes on both sides stay untouched. */
static void test_stream_copy_matches_memcpy(void **state) {
  (void)state;
  static const size_t lens[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096, MAX_LEN};
  unsigned char *src = malloc(MAX_LEN + 2 * GUARD), *dst = malloc(MAX_LEN + 2 * GUARD),
                *want = malloc(MAX_LEN + 2 * GUARD);
  assert_non_null(src);
  assert_non_null(dst);
  assert_non_null(want);
  unsigned seed = 1;
  for (size_t so = 0; so < 32; so++) {
    for (size_t d = 0; d < 32; d++) {
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        size_t n = lens[l];
        fill(src, MAX_LEN + 2 * GUARD, seed++);
        memset(dst, 0xa5, MAX_LEN + 2 * GUARD);
        memcpy(want, dst, MAX_LEN + 2 * GUARD);
        memcpy(want + GUARD + d, src + so, n);
        t4a_xfer_copy_stream_(dst + GUARD + d, src + so, n);
        assert_memory_equal(dst, want, MAX_LEN + 2 * GUARD);
      }
    }
  }
  free(src);
  free(dst);
  free(want);
}

/* A split copy across 4 threads (the caller one of them), with and without streaming stores, at
 * an odd destination offset and length: byte-exact, and counted as split. Below the split size:
 * one copy by the caller (0 returned), streaming or not, byte-exact. */
static void test_split_copy(void **state) {
  (void)state;
  t4a_xfer_copier *c = NULL;
  assert_int_equal(t4a_xfer_copier_create_(4, 64 << 10, &c), T4A_OK);
  assert_non_null(c);
  assert_int_equal(t4a_xfer_copier_threads_(c), 4);
  const size_t n = ((size_t)3 << 20) + 4093;
  unsigned char *src = malloc(n + 64), *dst = malloc(n + 64);
  assert_non_null(src);
  assert_non_null(dst);
  for (unsigned flags = 0; flags <= T4A_XFER_COPY_STREAM; flags++) {
    fill(src, n + 64, 7 + flags);
    memset(dst, 0, n + 64);
    uint64_t before = t4a_xfer_copier_parallel_copies_(c);
    assert_int_equal(t4a_xfer_copier_memcpy_(c, dst + 3, src + 5, n, flags), 1);
    assert_int_equal(t4a_xfer_copier_parallel_copies_(c) - before, 1);
    assert_memory_equal(dst + 3, src + 5, n);
    for (size_t i = 0; i < 3; i++) assert_int_equal(dst[i], 0);
    for (size_t i = n + 3; i < n + 64; i++) assert_int_equal(dst[i], 0);
    memset(dst, 0, 4096);
    assert_int_equal(t4a_xfer_copier_memcpy_(c, dst, src, 4096, flags), 0);
    assert_memory_equal(dst, src, 4096);
  }
  t4a_xfer_copier_destroy_(c);
  free(src);
  free(dst);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_copy_matches_memcpy),
      cmocka_unit_test(test_split_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
