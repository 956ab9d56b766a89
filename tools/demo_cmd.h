/* `t4a demo`: the warm chain of examples/warm_chain.h on the real driver or, with --fake or where
 * no CUDA driver loads, on the fake driver of the tests with host implementations of its two
 * kernels (NVRTC compiles for real either way).
 *
 * Layer: tools (the t4a program); uses the example, the facade and the fake driver. */
#ifndef T4A_TOOLS_DEMO_CMD_H_
#define T4A_TOOLS_DEMO_CMD_H_

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `t4a demo` with the arguments after the word "demo": [--n N] [--fake] [--json]. Returns
 * the exit code: 0 every way matched the CPU and the runtime closed after a proved drain (and,
 * on the fake, nothing was left alive and no stream-ordering violation was seen), 1 otherwise,
 * 2 on bad usage. */
int t4a_cmd_demo(int argc, char **argv);
void t4a_cmd_demo_usage(FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TOOLS_DEMO_CMD_H_ */
