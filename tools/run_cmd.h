/* `t4a stats` and `t4a bench`: short runs of the runtime facade (t4a.h) on device 0, on the real
 * driver or, with --fake or where no CUDA driver loads, on the fake driver of the tests (NVRTC
 * compiles for real either way).
 *
 * Layer: tools (the t4a program); uses the facade and the fake driver. */
#ifndef T4A_TOOLS_RUN_CMD_H_
#define T4A_TOOLS_RUN_CMD_H_

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `t4a stats` with the arguments after the word "stats": [--fake] [--n N]. Compiles and
 * loads one kernel, runs N checked launches (default 100) and an upload/download round trip,
 * checks the result, and prints the runtime's counters as JSON (t4a_runtime_stats_json) on
 * stdout and nothing else there. Returns the exit code: 0, 1 when a step failed (printed on
 * stderr), 2 on bad usage. */
int t4a_cmd_stats(int argc, char **argv);
void t4a_cmd_stats_usage(FILE *f);

/* Runs `t4a bench` with the arguments after the word "bench": [--fake] [--rounds R] [--n N].
 * Times R rounds each of: a compile that hits the artifact cache, N checked launches (per
 * launch, submission only, synchronised after each round), and a 1 MiB upload + download round
 * trip; prints min / median / max per operation and the counters. Progress lines go to stderr
 * (tools/progress.h). Returns 0, 1 when a step failed or the result was wrong, 2 on bad usage. */
int t4a_cmd_bench(int argc, char **argv);
void t4a_cmd_bench_usage(FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TOOLS_RUN_CMD_H_ */
