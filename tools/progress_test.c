/* tools/progress.c: quiet for a run shorter than one interval, one line per interval with the
 * label and counts set by the caller, off with interval 0, and T4A_PROGRESS_MS parsing. */
#define _POSIX_C_SOURCE 200809L
#include "tools/progress.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000l};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static size_t read_all(FILE *f, char *buf, size_t size) {
  rewind(f);
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  return n;
}

static void quiet_when_short(void **state) {
  (void)state;
  FILE *f = tmpfile();
  assert_non_null(f);
  tool_progress p;
  assert_int_equal(tool_progress_start(&p, f, 60000, "compile k.cu", 0), 0);
  assert_int_equal(tool_progress_stop(&p), 0);
  char buf[256];
  assert_int_equal(read_all(f, buf, sizeof buf), 0);
  fclose(f);
}

static void lines_with_counts(void **state) {
  (void)state;
  FILE *f = tmpfile();
  assert_non_null(f);
  tool_progress p;
  assert_int_equal(tool_progress_start(&p, f, 10, "bench launch", 20), 0);
  tool_progress_set(&p, "bench launch", 7, 20);
  sleep_ms(60);
  unsigned lines = tool_progress_stop(&p);
  assert_true(lines >= 1);
  char buf[4096];
  read_all(f, buf, sizeof buf);
  assert_non_null(strstr(buf, "t4a bench launch: 7/20, "));
  /* one line per tick */
  unsigned n = 0;
  for (const char *s = buf; (s = strchr(s, '\n')) != NULL; s++) n++;
  assert_int_equal(n, lines);
  fclose(f);
}

static void off_at_zero(void **state) {
  (void)state;
  FILE *f = tmpfile();
  assert_non_null(f);
  tool_progress p;
  assert_int_equal(tool_progress_start(&p, f, 0, "x", 0), 0);
  tool_progress_set(&p, "y", 1, 2);
  sleep_ms(20);
  assert_int_equal(tool_progress_stop(&p), 0);
  char buf[64];
  assert_int_equal(read_all(f, buf, sizeof buf), 0);
  fclose(f);
}

static void interval_from_env(void **state) {
  (void)state;
  unsetenv(TOOL_PROGRESS_ENV);
  assert_int_equal(tool_progress_interval(), TOOL_PROGRESS_DEFAULT_MS);
  setenv(TOOL_PROGRESS_ENV, "0", 1);
  assert_int_equal(tool_progress_interval(), 0);
  setenv(TOOL_PROGRESS_ENV, "250", 1);
  assert_int_equal(tool_progress_interval(), 250);
  setenv(TOOL_PROGRESS_ENV, "soon", 1);
  assert_int_equal(tool_progress_interval(), TOOL_PROGRESS_DEFAULT_MS);
  unsetenv(TOOL_PROGRESS_ENV);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quiet_when_short),
      cmocka_unit_test(lines_with_counts),
      cmocka_unit_test(off_at_zero),
      cmocka_unit_test(interval_from_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
