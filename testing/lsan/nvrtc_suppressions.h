/* LeakSanitizer suppressions for binaries that load NVRTC. Include this header in exactly one
 * source file of such a binary (a test, or the t4a program run under ASan in CI).
 *
 * libnvrtc carries its own C++ runtime, whose emergency exception pool (about 72 KiB) is
 * allocated when the library loads and by design never freed. t4a keeps NVRTC mapped
 * (RTLD_NODELETE), so LeakSanitizer can attribute that block to libnvrtc and this suppression
 * names that library alone: a leak in t4a's own code is still reported. Without sanitizers the
 * function is never called. */
#ifndef T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_
#define T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc.so\n"; }

#endif /* T4A_TESTING_LSAN_NVRTC_SUPPRESSIONS_H_ */
