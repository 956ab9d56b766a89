/* `t4a kernel`: compiles one CUDA source with NVRTC through the runtime, loads it and prints the
 * attributes of one kernel (registers, static, constant and local memory, dynamic shared memory,
 * threads per block, PTX and binary versions) and, on request, the size and address of module
 * globals.
 *
 * Layer: tools (the t4a program); uses the facade, and the fake driver for --fake. */
#ifndef T4A_TOOLS_KERNEL_CMD_H_
#define T4A_TOOLS_KERNEL_CMD_H_

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `t4a kernel` with the arguments after the word "kernel":
 *
 *   FILE.cu NAME [--fake] [--arch ARCH] [--ptx] [--global NAME]... [NVRTC options...]
 *
 * Returns the process exit code: 0 printed, 1 the source does not compile, no driver loads (and
 * no --fake), the kernel or a global is not in the module, or another step failed (the reason on
 * stderr), 2 bad usage (missing or unknown arguments, an unreadable file). */
int t4a_cmd_kernel(int argc, char **argv);
/* The usage text (t4a help kernel). */
void t4a_cmd_kernel_usage(FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TOOLS_KERNEL_CMD_H_ */
