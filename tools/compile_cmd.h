/* `t4a compile`: compiles one CUDA source with NVRTC through the t4a_nvrtc artifact cache and
 * reports where the artifact came from (compiled, memory, disk, uncached) and the cache's counters.
 *
 * Layer: tools (the t4a program); uses t4a_nvrtc and the status vocabulary only. */
#ifndef T4A_TOOLS_COMPILE_CMD_H_
#define T4A_TOOLS_COMPILE_CMD_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `t4a compile` with the arguments after the word "compile" (argv[0] is the first of them;
 * argv[argc] need not be NULL):
 *
 *   FILE.cu --arch ARCH [--ptx | --cubin | --ltoir] [-o OUT] [--cache DIR]
 *           [--header NAME=PATH]... [--name-expr EXPR]... [--repeat N] [NVRTC options...]
 *   FILE.cu LIB.cu... --arch ARCH -dlto [-Xnvlink OPT]... [-o OUT] [--cache DIR] [...]
 *
 * -dlto (as nvcc): every source is compiled to LTO-IR (with -rdc=true unless -rdc or -dc is
 * given) and nvJitLink links them, in order, into a CUBIN through a link cache (on --cache DIR
 * when given); each source's origin, the link's origin and both caches' counters are printed.
 * A link error prints nvJitLink's log and exits 1.
 *
 * Any other argument that starts with '-' (-DNAME=V, -U, --std=c++17, -lineinfo, ...) is passed
 * to NVRTC in order. The output kind defaults to CUBIN for sm_NN and PTX for compute_NN. Output
 * goes to stdout; diagnostics and the compile log to stderr.
 * Returns the process exit code: 0 on success, 1 when the source does not compile (the log is
 * printed) or NVRTC, the cache or the output file fails, 2 on bad usage (unknown or missing
 * arguments, an unreadable input, an option NVRTC or the cache rejects, an unsupported
 * architecture). */
int t4a_cmd_compile(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TOOLS_COMPILE_CMD_H_ */
