/* What every t4a benchmark shares (test code): a monotonic clock, a comparison for sorting
 * samples, and a fatal check that prints the failure's full detail. Include it in the benchmark's
 * one source file after defining T4A_BENCH_NAME (the program's name in messages). */
#ifndef T4A_TESTING_BENCH_BENCH_UTIL_H_
#define T4A_TESTING_BENCH_BENCH_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "t4a/status.h"

#ifndef T4A_BENCH_NAME
#error "define T4A_BENCH_NAME before including testing/bench/bench_util.h"
#endif

/* Seconds on CLOCK_MONOTONIC (needs _POSIX_C_SOURCE >= 199309L in the includer). */
static inline double t4a_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort comparison for doubles, ascending. */
static inline int t4a_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Evaluates a t4a call; on failure prints it with its detail and exits 1. */
#define T4A_BENCH_CHECK(call)                                                                     \
  do {                                                                                            \
    t4a_status st_ = (call);                                                                      \
    if (st_ != T4A_OK) {                                                                          \
      char buf_[512];                                                                             \
      t4a_error e_;                                                                               \
      t4a_error_last(&e_);                                                                        \
      fprintf(stderr, "%s: %s: %s\n", T4A_BENCH_NAME, #call,                                      \
              t4a_error_format(&e_, buf_, sizeof buf_));                                          \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

#endif /* T4A_TESTING_BENCH_BENCH_UTIL_H_ */
