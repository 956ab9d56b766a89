/* The benchmarks' harness (see harness.h). */
#define _POSIX_C_SOURCE 200809L
#define T4A_BENCH_NAME "t4a bench harness"
#include "bench/harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double t4a_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t t4a_bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

t4a_bench_stats t4a_bench_stats_of(const double *samples, size_t n) {
  t4a_bench_stats r = {0, 0, 0};
  double *s = n > 0 ? malloc(n * sizeof *s) : NULL;
  if (s == NULL) return r;
  memcpy(s, samples, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  r.min = s[0];
  r.max = s[n - 1];
  r.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return r;
}

const char *t4a_bench_utc_date(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  if (n > 0) buf[0] = '\0';
  if (gmtime_r(&t, &tm) != NULL) strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

const char *t4a_bench_fmt_us(double us, char *buf, size_t n) {
  if (us < 10) {
    snprintf(buf, n, "%.3f", us);
  } else if (us < 1000) {
    snprintf(buf, n, "%.2f", us);
  } else {
    snprintf(buf, n, "%.1f", us);
  }
  return buf;
}

void t4a_bench_gbs_header(FILE *f, int label_width, const char *label) {
  fprintf(f, "%-*s %-22s %9s %9s %9s %9s\n", label_width, label, "variant", "min GB/s",
          "med GB/s", "max GB/s", "x raw");
}

void t4a_bench_gbs_row(FILE *f, int label_width, const char *label, const char *variant,
                       size_t bytes, t4a_bench_stats seconds, double raw_median_s) {
  double gb = (double)bytes / 1e9;
  fprintf(f, "%-*s %-22s %9.2f %9.2f %9.2f %9.2f\n", label_width, label, variant,
          gb / seconds.max, gb / seconds.med, gb / seconds.min, raw_median_s / seconds.med);
}

void t4a_bench_gbs_json(FILE *f, const char *label, const char *variant, size_t bytes,
                        int repeats, t4a_bench_stats seconds, double raw_median_s) {
  fprintf(f,
          "{\"direction\":\"%s\",\"variant\":\"%s\",\"bytes\":%zu,\"repeats\":%d,"
          "\"min_s\":%.6f,\"median_s\":%.6f,\"max_s\":%.6f,\"median_gbps\":%.2f,"
          "\"ratio_vs_raw\":%.3f}\n",
          label, variant, bytes, repeats, seconds.min, seconds.med, seconds.max,
          (double)bytes / 1e9 / seconds.med, raw_median_s / seconds.med);
}

void t4a_bench_report_failure(const char *name, const char *call, t4a_status st) {
  char buf[512];
  t4a_error e;
  t4a_error_last(&e);
  if (e.status != st) e.status = st;
  fprintf(stderr, "%s: %s: %s\n", name, call, t4a_error_format(&e, buf, sizeof buf));
}
