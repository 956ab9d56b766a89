/* Progress lines: see progress.h. */
#define _POSIX_C_SOURCE 200809L
#include "tools/progress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

unsigned tool_progress_interval(void) {
  const char *s = getenv(TOOL_PROGRESS_ENV);
  if (s == NULL || *s == '\0') return TOOL_PROGRESS_DEFAULT_MS;
  char *end = NULL;
  unsigned long v = strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v > 3600000ul) return TOOL_PROGRESS_DEFAULT_MS;
  return (unsigned)v;
}

static void *ticker(void *arg) {
  tool_progress *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += p->interval_ms / 1000u;
    until.tv_nsec += (long)(p->interval_ms % 1000u) * 1000000l;
    if (until.tv_nsec >= 1000000000l) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000l;
    }
    int rc = 0;
    while (!p->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&p->cv, &p->mu, &until);
    if (p->stop) break;
    double s = now_s() - p->start_s;
    if (p->total > 0) {
      fprintf(p->out, "t4a %s: %llu/%llu, %.1f s\n", p->label, (unsigned long long)p->done,
              (unsigned long long)p->total, s);
    } else {
      fprintf(p->out, "t4a %s: %.1f s\n", p->label, s);
    }
    fflush(p->out);
    p->lines++;
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void set_label(tool_progress *p, const char *label) {
  snprintf(p->label, sizeof p->label, "%s", label != NULL ? label : "");
}

int tool_progress_start(tool_progress *p, FILE *out, unsigned interval_ms, const char *label,
                        uint64_t total) {
  memset(p, 0, sizeof *p);
  p->out = out;
  p->interval_ms = interval_ms;
  set_label(p, label);
  p->total = total;
  p->start_s = now_s();
  if (interval_ms == 0 || out == NULL) return 0;
  if (pthread_mutex_init(&p->mu, NULL) != 0) return -1;
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    return -1;
  }
  if (pthread_create(&p->thread, NULL, ticker, p) != 0) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    return -1;
  }
  p->running = 1;
  return 0;
}

void tool_progress_set(tool_progress *p, const char *label, uint64_t done, uint64_t total) {
  if (!p->running) return;
  pthread_mutex_lock(&p->mu);
  if (label != NULL) set_label(p, label);
  p->done = done;
  p->total = total;
  pthread_mutex_unlock(&p->mu);
}

unsigned tool_progress_stop(tool_progress *p) {
  if (!p->running) return 0;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  p->running = 0;
  return p->lines;
}
