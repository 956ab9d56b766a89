/* examples/warm_chain — the chain `t4a demo` runs (tools/t4a_main.c links it).
 *
 * NVRTC compiles two kernels for real (mix and fold), the runtime (t4a/t4a.h) loads them, and a
 * warm chain of N steps — mix (a -> b), a copy (b -> c), fold (c -> a) — runs three ways: checked
 * launches, launch descriptors, and a captured graph replayed N times. Each way's result is
 * downloaded and compared with a CPU reference, and the counters of its warm pass are printed:
 * launches, events recorded, host waits, NVRTC calls and module loads (the warm pass compiles and
 * loads again: cache hits), heap allocations (t4a_heap_allocations); then the host time per
 * launch of a launch-only loop next to raw cuLaunchKernel through the lane's driver table, in the
 * same process (indicative: a single run).
 *
 * Where no CUDA driver loads (t4a_driver_get_default: DRIVER_NOT_FOUND or NO_DEVICE), or when
 * asked, the same chain runs on the fake driver of the tests (testing/fake_driver), with host
 * implementations of mix and fold registered under the kernels' names (the fake loads the real
 * CUBIN and matches its entries by name); the first line of the output says which.
 *
 * Layer: an example over //:t4a, plus the driver seam (for the raw baseline) and the fake
 * driver. */
#ifndef T4A_EXAMPLES_WARM_CHAIN_H_
#define T4A_EXAMPLES_WARM_CHAIN_H_

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct warm_chain_options {
  uint32_t steps; /* steps of the chain (each: 2 launches and a copy); 0: 1000 */
  int fake;       /* nonzero: the fake driver even where a real one loads */
  int json;       /* nonzero: print the runtime's stats JSON at the end */
} warm_chain_options;
#define WARM_CHAIN_OPTIONS_INIT {0, 0, 0}

/* Runs the demo, writing its report to `out`. Returns the exit code: 0 when every way verified
 * and the runtime closed after a proved drain, 1 otherwise (the failure is printed). */
int warm_chain_run(const warm_chain_options *options, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* T4A_EXAMPLES_WARM_CHAIN_H_ */
