/* testing/fake_nvrtc/fake_nvrtc.h — a fake NVRTC for tests, fuzzers and stress runs (never
 * linked into a library).
 *
 * t4a_fake_nvrtc_open() returns a t4a_nvrtc_lib built (t4a_nvrtc_lib_create_from_table) from a
 * table of host functions that "compile" in microseconds: version 13.0 and build identity
 * "fake-nvrtc-13.0" (t4a_fake_nvrtc_open_as: any other), PTX output only (the
 * CUBIN, LTO-IR, PCH and architecture slots are left NULL). A compile writes PTX that the fake
 * driver loads: one `.visible .entry NAME()` per `__global__ void NAME` in the source. A source
 * containing "#error" fails with NVRTC_ERROR_COMPILATION and a one-line log. Name expressions
 * lower to themselves (a leading '&' dropped).
 *
 * Failure injection: the calls to `entry` (NULL: any entry but nvrtcGetErrorString) after `skip`
 * successful ones fail `count` times with `result` (an nvrtcResult).
 *
 * Thread-safe: every entry may be called from any thread (programs are independent; the counts
 * and the injection rule are under one lock). */
#ifndef T4A_TESTING_FAKE_NVRTC_H_
#define T4A_TESTING_FAKE_NVRTC_H_

#include "t4a/nvrtc.h"
#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Statuses as t4a_nvrtc_lib_create_from_table (and an injected failure's). */
T4A_MUST_USE t4a_status t4a_fake_nvrtc_open(t4a_nvrtc_lib **out);
/* The same fake as another NVRTC: nvrtcVersion reports major.minor and the lib's build identity
 * is `build_identity` (NULL: "fake-nvrtc-MAJOR.MINOR"), so artifacts of one identity are misses
 * for another. t4a reads the version once, at open; a later nvrtcVersion call answers the latest
 * open's version (opens are serialised). */
T4A_MUST_USE t4a_status t4a_fake_nvrtc_open_as(int major, int minor, const char *build_identity,
                                               t4a_nvrtc_lib **out);

void t4a_fake_nvrtc_inject(const char *entry, long skip, long count, int result);
void t4a_fake_nvrtc_clear_injections(void);
/* Injected failures delivered so far. */
long t4a_fake_nvrtc_injected(void);
/* nvrtcCompileProgram calls so far (failed ones included). */
long t4a_fake_nvrtc_compiles(void);
/* Makes every nvrtcCompileProgram sleep `usec` microseconds first (0: none), so that
 * concurrent compiles of one request overlap. */
void t4a_fake_nvrtc_set_compile_delay(unsigned usec);
/* Programs created and not yet destroyed. */
long t4a_fake_nvrtc_programs_live(void);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TESTING_FAKE_NVRTC_H_ */
