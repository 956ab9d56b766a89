/* The fixture and kernels the fake driver's self-tests share (see fake_test_util.h). */
#define _GNU_SOURCE
#include "testing/fake_driver/fake_test_util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"

/* ---- fixture ------------------------------------------------------------------------------ */

/* Creates a fake, initialises it, retains device 0's primary context, makes it current and
 * creates one non-blocking stream. */
int fx_open(fx *x, const t4a_fake_options *o) {
  memset(x, 0, sizeof *x);
  if (t4a_fake_create(o, &x->fake) != T4A_OK) return -1;
  x->t = t4a_fake_table(x->fake);
  if (x->t->cuInit(0) != CUDA_SUCCESS) return -1;
  if (x->t->cuDevicePrimaryCtxRetain(&x->ctx, 0) != CUDA_SUCCESS) return -1;
  if (x->t->cuCtxSetCurrent(x->ctx) != CUDA_SUCCESS) return -1;
  if (x->t->cuStreamCreate(&x->s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return -1;
  return 0;
}

/* Destroys the fixture's stream and releases its context, then checks nothing is left. */
void fx_clean(fx *x) {
  if (x->s != NULL) CK(x->t->cuStreamDestroy(x->s));
  x->s = NULL;
  CK(x->t->cuDevicePrimaryCtxRelease(0));
  CK(x->t->cuCtxSetCurrent(NULL));
  assert_true(t4a_fake_nothing_live(x->fake));
}

int setup(void **state) {
  fx *x = calloc(1, sizeof *x);
  if (x == NULL || fx_open(x, NULL) != 0) return -1;
  *state = x;
  return 0;
}

int teardown(void **state) {
  fx *x = *state;
  t4a_fake_destroy(x->fake);
  free(x);
  return 0;
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* fill(int *p, int n, int base): p[i] = base + i. */
const size_t k_fill_params[3] = {8, 4, 4};
void k_fill(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr p;
  int n, base;
  memcpy(&p, params[0], 8);
  memcpy(&n, params[1], 4);
  memcpy(&base, params[2], 4);
  int *v = t4a_fake_deref(l, p, (size_t)n * sizeof(int));
  if (v == NULL) return;
  for (int i = 0; i < n; i++) v[i] = base + i;
}

/* add(const int *src, int *dst, int n, int k): dst[i] = src[i] + k. */
const size_t k_add_params[4] = {8, 8, 4, 4};
void k_add(t4a_fake_launch *l, void **params, void *user) {
  (void)user;
  CUdeviceptr src, dst;
  int n, k;
  memcpy(&src, params[0], 8);
  memcpy(&dst, params[1], 8);
  memcpy(&n, params[2], 4);
  memcpy(&k, params[3], 4);
  const int *a = t4a_fake_deref(l, src, (size_t)n * sizeof(int));
  int *b = t4a_fake_deref(l, dst, (size_t)n * sizeof(int));
  if (a == NULL || b == NULL) return;
  for (int i = 0; i < n; i++) b[i] = a[i] + k;
}

const size_t k_seen_params[1] = {8};
void k_seen(t4a_fake_launch *l, void **params, void *user) {
  seen *s = user;
  s->runs++;
  memcpy(&s->arg, params[0], 8);
  t4a_fake_launch_dims(l, s->grid, s->block, &s->shared);
}

CUmodule load_kernels(fx *x, const char *const *names, size_t num) {
  char buf[512];
  size_t need = t4a_fake_image(buf, sizeof buf, names, num);
  assert_true(need <= sizeof buf);
  CUmodule m = NULL;
  CK(x->t->cuModuleLoadData(&m, buf));
  return m;
}

CUfunction get_fn(fx *x, CUmodule m, const char *name) {
  CUfunction f = NULL;
  CK(x->t->cuModuleGetFunction(&f, m, name));
  return f;
}

CUresult launch1(fx *x, CUfunction f, CUstream s, void **args) {
  return x->t->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}
