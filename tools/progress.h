/* Progress lines for the t4a program's long runs (`t4a compile` of a big source, `t4a bench`).
 *
 * A ticker thread wakes every `interval_ms` while a run goes on and writes one line to its stream
 * (stderr in the program): "t4a LABEL: DONE/TOTAL, S s" (or "t4a LABEL: S s" with no total).
 * Nothing is printed for a run shorter than one interval, so quick commands stay quiet. The
 * label and counts are set by the caller while the ticker runs; lines never go to stdout, whose
 * content scripts read.
 *
 * Layer: tools (the t4a program); uses pthreads only. */
#ifndef T4A_TOOLS_PROGRESS_H_
#define T4A_TOOLS_PROGRESS_H_

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The default interval, and the environment variable that overrides it (milliseconds; 0 turns
 * the lines off). */
#define TOOL_PROGRESS_DEFAULT_MS 1000u
#define TOOL_PROGRESS_ENV "T4A_PROGRESS_MS"

typedef struct tool_progress {
  FILE *out;
  unsigned interval_ms; /* 0: no ticker */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int running, stop;
  char label[96];
  uint64_t done, total;
  double start_s;
  unsigned lines; /* lines written so far */
} tool_progress;

/* The interval to use: $T4A_PROGRESS_MS when it is a number (0 = off), else the default. */
unsigned tool_progress_interval(void);

/* Starts a ticker writing to `out` every interval_ms (0: starts nothing; the other calls are then
 * no-ops). Returns 0, or -1 when the thread cannot be started (the run goes on without lines). */
int tool_progress_start(tool_progress *p, FILE *out, unsigned interval_ms, const char *label,
                        uint64_t total);
/* Sets what the next line says. */
void tool_progress_set(tool_progress *p, const char *label, uint64_t done, uint64_t total);
/* Stops and joins the ticker. Returns the number of lines it wrote. Safe after a failed start. */
unsigned tool_progress_stop(tool_progress *p);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TOOLS_PROGRESS_H_ */
