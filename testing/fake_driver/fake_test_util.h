/* The fixture and kernels the fake driver's self-tests (fake_*_test.c) share: a fake with device
 * 0's primary context current and one stream, the cmocka setup and teardown that make one, and
 * host kernels fill, add and seen.
 *
 * Layer: tests of testing/fake_driver only (cmocka). */
#ifndef T4A_TESTING_FAKE_DRIVER_FAKE_TEST_UTIL_H_
#define T4A_TESTING_FAKE_DRIVER_FAKE_TEST_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A driver call that must succeed (cmocka assertion). */
#define CK(call) assert_int_equal((call), CUDA_SUCCESS)

typedef struct fx {
  t4a_fake *fake;
  const t4a_driver_table *t;
  CUcontext ctx;
  CUstream s;
} fx;

/* Creates a fake, initialises it, retains device 0's primary context, makes it current and
 * creates one non-blocking stream. Returns 0, -1 on a failure. */
int fx_open(fx *x, const t4a_fake_options *o);
/* Destroys the fixture's stream and releases its context, then checks nothing is left. */
void fx_clean(fx *x);
/* cmocka setup and teardown: *state is an fx opened with default options. */
int setup(void **state);
int teardown(void **state);

/* fill(int *p, int n, int base): p[i] = base + i. */
extern const size_t k_fill_params[3];
void k_fill(t4a_fake_launch *l, void **params, void *user);
/* add(const int *src, int *dst, int n, int k): dst[i] = src[i] + k. */
extern const size_t k_add_params[4];
void k_add(t4a_fake_launch *l, void **params, void *user);
/* seen(int64 arg), user a `seen`: records what it saw: its first argument and the geometry. */
typedef struct seen {
  int runs;
  int64_t arg;
  unsigned grid[3], block[3], shared;
} seen;
extern const size_t k_seen_params[1];
void k_seen(t4a_fake_launch *l, void **params, void *user);

/* Loads a fake image with kernels `names` (cmocka assertion). */
CUmodule load_kernels(fx *x, const char *const *names, size_t num);
CUfunction get_fn(fx *x, CUmodule m, const char *name);
/* One block of 32 threads of f on s. */
CUresult launch1(fx *x, CUfunction f, CUstream s, void **args);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TESTING_FAKE_DRIVER_FAKE_TEST_UTIL_H_ */
