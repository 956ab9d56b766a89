/* The one harness of t4a's benchmarks (bench/): the clock, the samples' min / median / max, the
 * ratio rows and the time format every benchmark prints, and a fatal check that prints a
 * failure's full detail. t4a_bench (paired blocks, ABAB), xfer_bench and copy_bench (variants
 * interleaved in one process, GB/s against raw) and nvrtc_bench (compile against cache hits) all
 * take their figures from here.
 *
 * Include it after defining T4A_BENCH_NAME (the program's name in messages); the includer needs
 * _POSIX_C_SOURCE >= 199309L or _GNU_SOURCE. */
#ifndef T4A_BENCH_HARNESS_H_
#define T4A_BENCH_HARNESS_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "t4a/status.h"

#ifndef T4A_BENCH_NAME
#error "define T4A_BENCH_NAME before including bench/harness.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds, and nanoseconds, on CLOCK_MONOTONIC. */
double t4a_bench_now(void);
uint64_t t4a_bench_now_ns(void);

/* The minimum, median and maximum of samples (the median of an even count: the mean of the two
 * middle samples). */
typedef struct t4a_bench_stats {
  double min, med, max;
} t4a_bench_stats;

/* The stats of `n` samples (the samples are not reordered); all zero when n is 0 or on a failed
 * allocation. */
t4a_bench_stats t4a_bench_stats_of(const double *samples, size_t n);

/* Formats a time in microseconds with a precision that suits it (3, 2 or 1 decimals below 10,
 * 1000 and above). Returns buf. */
const char *t4a_bench_fmt_us(double us, char *buf, size_t n);

/* The current UTC time as 2026-12-01T18:17:54Z (the JSON headers' "date"). Returns buf. */
const char *t4a_bench_utc_date(char *buf, size_t n);

/* A ratio row of a GB/s table: `label` in a field of `label_width` (the direction), `variant`,
 * then min / median / max GB/s (10^9 B/s) of `bytes` moved in the sampled seconds and the speed
 * against raw (raw's median time over this median time). t4a_bench_gbs_header prints the
 * column heads above such rows. */
void t4a_bench_gbs_header(FILE *f, int label_width, const char *label);
void t4a_bench_gbs_row(FILE *f, int label_width, const char *label, const char *variant,
                       size_t bytes, t4a_bench_stats seconds, double raw_median_s);
/* The same row as one JSON line: direction, variant, bytes, repeats, min_s, median_s, max_s,
 * median_gbps, ratio_vs_raw. */
void t4a_bench_gbs_json(FILE *f, const char *label, const char *variant, size_t bytes,
                        int repeats, t4a_bench_stats seconds, double raw_median_s);

/* Prints "NAME: CALL: detail" for a failed t4a call with this thread's error detail. */
void t4a_bench_report_failure(const char *name, const char *call, t4a_status st);

/* Evaluates a t4a call; on failure prints it with its detail and exits 1. */
#define T4A_BENCH_CHECK(call)                                                                     \
  do {                                                                                            \
    t4a_status st_ = (call);                                                                      \
    if (st_ != T4A_OK) {                                                                          \
      t4a_bench_report_failure(T4A_BENCH_NAME, #call, st_);                                       \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* T4A_BENCH_HARNESS_H_ */
