/* examples/warm_chain — the chain `t4a demo` runs (tools/demo_cmd.c links it).
 *
 * NVRTC compiles two kernels for real (mix and fold), the runtime (t4a/t4a.h) loads them, and a
 * warm chain of N steps — mix (a -> b), a copy (b -> c), fold (c -> a) — runs three ways: checked
 * launches, launch descriptors, and a captured graph replayed N times. Each way's result is
 * downloaded and compared with a CPU reference, and the counters of its warm pass are printed:
 * launches, events recorded, host waits, NVRTC calls and module loads (the warm pass compiles and
 * loads again: cache hits), heap allocations (t4a_heap_allocations); then the host time per
 * launch of a launch-only loop, checked launch and descriptor fire (indicative: a single run;
 * the paired comparison with raw cuLaunchKernel is `t4a_bench launch`, bench/).
 *
 * The driver is the default one (t4a_driver_get_default) or one the caller gives: `t4a demo`
 * gives the fake driver of the tests where no CUDA driver loads or with --fake, with host
 * implementations of mix and fold (warm_chain_mix, warm_chain_fold) registered under the
 * kernels' names.
 *
 * Layer: an example over the installed headers of //t4a only. */
#ifndef T4A_EXAMPLES_WARM_CHAIN_H_
#define T4A_EXAMPLES_WARM_CHAIN_H_

#include <stdint.h>
#include <stdio.h>

#include "t4a/t4a.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct warm_chain_options {
  uint32_t steps;     /* steps of the chain (each: 2 launches and a copy); 0: 1000 */
  t4a_driver *driver; /* the driver to run on (borrowed); NULL: t4a_driver_get_default() */
  int simulated;      /* nonzero: `driver` is a simulation (host kernels): the report says so */
  int json;           /* nonzero: print the runtime's stats JSON at the end */
  /* NULL, or called once the runtime is closed, before the result line (the caller's own check,
   * e.g. that the fake driver holds nothing alive): returns nonzero when it passed. */
  int (*after_close)(void *user);
  void *after_close_user;
} warm_chain_options;
#define WARM_CHAIN_OPTIONS_INIT {0, NULL, 0, 0, NULL, NULL}

/* The kernels, one element each: mix(in, out, k, n): out[i] = warm_chain_mix(in[i], k, i);
 * fold(in, out, k, n): out[i] = warm_chain_fold(in[i], k); for i < n. The chain passes the
 * constants below as k. */
#define WARM_CHAIN_MIX_K 0x9e3779b9u
#define WARM_CHAIN_FOLD_K 0x7f4a7c15u
static inline uint32_t warm_chain_mix(uint32_t x, uint32_t k, uint32_t i) {
  return x * 1664525u + k + i;
}
static inline uint32_t warm_chain_fold(uint32_t x, uint32_t k) { return (x ^ (x >> 13)) + k; }

/* Runs the demo, writing its report to `out`. Returns the exit code: 0 when every way verified
 * and the runtime closed after a proved drain, 1 otherwise (the failure is printed). */
int warm_chain_run(const warm_chain_options *options, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* T4A_EXAMPLES_WARM_CHAIN_H_ */
