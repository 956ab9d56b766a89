/* Shared by t4a_launch's tests on the fake driver (test code only): the fixture
 * (testing/fixture) with a module cache and the kernels add, affine and vec16
 * (testing/fixture/host_kernels.h); the fake image; the launch tests' leak accounting. */
#ifndef T4A_LAUNCH_LAUNCH_TESTUTIL_H_
#define T4A_LAUNCH_LAUNCH_TESTUTIL_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef t4a_fixture fixture;

/* The struct parameter of `affine` (C layout: 24 bytes, 8-aligned). */
typedef t4a_hk_affine_s affine_s;

/* A fake image naming `n` kernels (malloc'd, NUL included in *out_bytes). */
static inline char *fake_image(const char *const *names, size_t n, size_t *out_bytes) {
  size_t need = t4a_fake_image(NULL, 0, names, n);
  char *buf = malloc(need);
  t4a_fake_image(buf, need, names, n);
  *out_bytes = need;
  return buf;
}

static const char k_ptx[] =
    "//\n// Generated for the fake driver\n//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry add(\n  .param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n{\n"
    "  ret;\n}\n.visible .entry affine(.param .u64 o, .param .align 8 .b8 s[24], "
    ".param .u16 k)\n{\n  ret;\n}\n.visible .entry vec16(.param .u64 o, .param .align 16 .b8 "
    "v[16])\n{\n  ret;\n}\n";

/* The fixture: the standard stack (lane, pool without reuse, retire) with a module cache, the
 * kernels add, affine and vec16 registered. `ro`: the retire's options (NULL: defaults). */
static inline int fixture_setup_with(void **state, t4a_fake_query_policy policy,
                                     int omit_param_info, const t4a_retire_options *ro) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.query_policy = policy;
  o.fake.omit_param_info = omit_param_info;
  o.build |= T4A_FIXTURE_MODULE_CACHE;
  o.retire = ro;
  o.kernels[0] = &t4a_hk_add;
  o.kernels[1] = &t4a_hk_affine;
  o.kernels[2] = &t4a_hk_vec16;
  return t4a_fixture_setup(state, &o);
}

static inline int fixture_setup(void **state, t4a_fake_query_policy policy, int omit_param_info) {
  return fixture_setup_with(state, policy, omit_param_info, NULL);
}

/* Objects alive in the fake beyond what t4a counted as leaked. */
static inline long unaccounted(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                           T4A_FIXTURE_LIVE_MODULES | T4A_FIXTURE_LIVE_GRAPHS |
                                           T4A_FIXTURE_LIVE_GRAPH_EXECS);
}

/* Tears the fixture down. strict: everything freed, no ordering violation, a proved drain.
 * Otherwise: what is alive must be exactly what t4a counted (tests that leak on purpose). */
static inline int fixture_teardown(void **state, int strict) {
  if (strict) return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT);
  return t4a_fixture_teardown_counted(state, unaccounted, 0);
}

static inline t4a_counter_values lane_counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  return v;
}

static inline t4a_buffer *make_buffer(fixture *f, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, bytes, 0, 0, &b));
  return b;
}

/* The host view of a buffer's device memory (the fake's). */
static inline void *view(fixture *f, t4a_buffer *b) {
  return t4a_fake_host_view(f->fake, (CUdeviceptr)t4a_buffer_devptr(b), t4a_buffer_size(b));
}

static inline uint64_t calls(fixture *f, const char *entry) {
  return t4a_fake_calls(f->fake, entry);
}

/* b[i] = scale * i for i < n (through the fake's host view). */
static inline void fill(fixture *f, t4a_buffer *b, int n, int scale) {
  int *p = view(f, b);
  for (int i = 0; i < n; i++) p[i] = scale * i;
}

/* Every element of b is `scale` * i. */
static inline int holds(fixture *f, t4a_buffer *b, int n, int scale) {
  int *p = view(f, b);
  for (int i = 0; i < n; i++) {
    if (p[i] != scale * i) return 0;
  }
  return 1;
}

/* The start of the failure sweeps of work fired through graphs (chains, graph fires): from a
 * clean fixture, every driver call of s->op failed with UNKNOWN, then INVALID_HANDLE, each
 * surfacing more than 10 times; then a cuGraphLaunch reported failed with its replay queued
 * (typed, quarantined, counted). s->entry and s->after_enqueue are cleared after. */
static inline void sweep_graph_launches(fixture *f, t4a_sweep *s) {
  f->baseline = 0;
  assert_int_equal(unaccounted(f), 0);
  assert_true(t4a_sweep_driver(s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  assert_true(t4a_sweep_driver(s, CUDA_ERROR_INVALID_HANDLE, T4A_DRIVER_ERROR) > 10);
  s->entry = "cuGraphLaunch";
  s->after_enqueue = 1;
  assert_true(t4a_sweep_driver(s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 1);
  s->entry = NULL;
  s->after_enqueue = 0;
}

static inline t4a_module *load_ptx(fixture *f) {
  t4a_module *m = NULL;
  CK(t4a_module_load(f->cache, k_ptx, sizeof k_ptx, T4A_IMAGE_AUTO, &m));
  return m;
}

static inline t4a_function *get_fn(t4a_module *m, const char *name) {
  t4a_function *fn = NULL;
  CK(t4a_module_get_function(m, name, &fn));
  return fn;
}

static inline t4a_launch_config config_1d(uint32_t grid, uint32_t block, uint32_t shared) {
  t4a_launch_config c = {{grid, 1, 1}, {block, 1, 1}, shared};
  return c;
}

/* The thread's last error detail. */
static inline t4a_error last_error(void) {
  t4a_error e;
  t4a_error_last(&e);
  return e;
}

#endif /* T4A_LAUNCH_LAUNCH_TESTUTIL_H_ */
