/* LeakSanitizer suppressions for binaries that load NVRTC. Include this header in exactly one
 * source file of such a binary (a test, or the t4a program run under ASan in CI).
 *
 * It suppresses nothing. libnvrtc carries its own C++ runtime, whose emergency exception pool
 * (72,704 bytes) is allocated when the library loads and by design never freed; LeakSanitizer
 * reports it only if the library is unmapped, since the pool's pointer then leaves the globals
 * LeakSanitizer scans (measured: a plain dlopen + dlclose of libnvrtc.so.13 reports it, from
 * frames in "<unknown module>"). t4a opens NVRTC with RTLD_NODELETE, so the pointer stays in
 * libnvrtc's data and the block is reachable: every t4a_nvrtc and tools test runs clean without
 * a suppression under gcc and clang ASan, in Bazel and in CMake.
 *
 * The former suppression, "leak:libnvrtc.so", matched no report of that block (its frames have no
 * module once the library is gone) but did match every allocation made inside a loaded libnvrtc:
 * it hid a leaked nvrtcProgram (488 bytes from nvrtcCreateProgram, measured). Without it such a
 * leak is reported; the tests also count live programs through the wrapped table.
 *
 * Without sanitizers the function is never called. */
#ifndef T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_
#define T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return ""; }

#endif /* T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_ */
