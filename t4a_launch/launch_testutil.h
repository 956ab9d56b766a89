/* Shared by module_test.c and launch_test.c (test code only): a fixture on the fake driver with
 * one lane, pool, retire and module cache; kernels the fake runs on the host; the fake image;
 * the exact leak accounting of the sweeps. */
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

#define CK(x) assert_int_equal((x), T4A_OK)

typedef struct fixture {
  t4a_fake *fake;
  t4a_driver *drv;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_module_cache *cache;
  long baseline; /* objects the fixture itself holds while a sweep runs */
} fixture;

/* The struct parameter of `affine` (C layout: 24 bytes, 8-aligned). */
typedef struct affine_s {
  int a;
  double b;
  char c;
} affine_s;

/* add(const int *a, const int *b, int *c, int n): c[i] = a[i] + b[i]. */
static inline void k_add(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  CUdeviceptr a, b, c;
  int n;
  memcpy(&a, p[0], 8);
  memcpy(&b, p[1], 8);
  memcpy(&c, p[2], 8);
  memcpy(&n, p[3], 4);
  int *pa = t4a_fake_deref(l, a, (size_t)n * 4), *pb = t4a_fake_deref(l, b, (size_t)n * 4);
  int *pc = t4a_fake_deref(l, c, (size_t)n * 4);
  if (pa == NULL || pb == NULL || pc == NULL) return;
  for (int i = 0; i < n; i++) pc[i] = pa[i] + pb[i];
}

/* affine(long long *out, struct affine_s s, short k): out[0] = (s.a + s.b) * k + s.c, and
 * out[1] = the dynamic shared bytes of the launch. */
static inline void k_affine(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  CUdeviceptr out;
  affine_s s;
  short k;
  memcpy(&out, p[0], 8);
  memcpy(&s, p[1], sizeof s);
  memcpy(&k, p[2], 2);
  long long *po = t4a_fake_deref(l, out, 16);
  if (po == NULL) return;
  unsigned shared = 0;
  t4a_fake_launch_dims(l, NULL, NULL, &shared);
  po[0] = (long long)((s.a + s.b) * k) + s.c;
  po[1] = shared;
}

/* vec16(int *out, float4 v) with v 16-byte aligned: out[i] = (int)v[i]. */
static inline void k_vec16(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  CUdeviceptr out;
  float v[4];
  memcpy(&out, p[0], 8);
  memcpy(v, p[1], 16);
  int *po = t4a_fake_deref(l, out, 16);
  if (po == NULL) return;
  for (int i = 0; i < 4; i++) po[i] = (int)v[i];
}

static inline void register_kernels(t4a_fake *fake) {
  const size_t add[4] = {8, 8, 8, 4};
  t4a_fake_register_kernel(fake, "add", 4, add, k_add, NULL);
  const size_t affine[3] = {8, sizeof(affine_s), 2};
  t4a_fake_register_kernel(fake, "affine", 3, affine, k_affine, NULL);
  const size_t vec[2] = {8, 16}, vec_align[2] = {0, 16};
  t4a_fake_register_kernel_aligned(fake, "vec16", 2, vec, vec_align, k_vec16, NULL);
}

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

/* `ro`: the retire's options (NULL: defaults). */
static inline int fixture_setup_with(void **state, t4a_fake_query_policy policy,
                                     int omit_param_info, const t4a_retire_options *ro) {
  fixture *f = calloc(1, sizeof *f);
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.query_policy = policy;
  o.omit_param_info = omit_param_info;
  t4a_mem_pool_options po = T4A_MEM_POOL_OPTIONS_INIT;
  po.reuse_disabled = 1; /* live blocks = live buffers */
  if (t4a_fake_create(&o, &f->fake) != T4A_OK) return -1;
  register_kernels(f->fake);
  if (t4a_fake_driver(f->fake, &f->drv) != T4A_OK ||
      t4a_lane_create(f->drv, 0, NULL, &f->lane) != T4A_OK ||
      t4a_mem_pool_create(f->lane, &po, &f->pool) != T4A_OK ||
      t4a_retire_create(f->lane, ro, &f->retire) != T4A_OK ||
      t4a_module_cache_create(f->retire, NULL, &f->cache) != T4A_OK) {
    return -1;
  }
  *state = f;
  return 0;
}

static inline int fixture_setup(void **state, t4a_fake_query_policy policy, int omit_param_info) {
  return fixture_setup_with(state, policy, omit_param_info, NULL);
}

/* Objects alive in the fake beyond what t4a counted as leaked. */
static inline long unaccounted(void *user) {
  fixture *f = user;
  t4a_fake_progress(f->fake);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  t4a_counter_values lane, drv;
  t4a_lane_stats(f->lane, &lane);
  t4a_driver_stats(f->drv, &drv);
  return (long)(live.device_allocs + live.events + live.modules + live.graphs + live.graph_execs) -
         (long)(lane.buffers_leaked + lane.leaked + drv.leaked) - f->baseline;
}

/* Tears the fixture down. strict: everything freed, no ordering violation, a proved drain.
 * Otherwise: what is alive must be exactly what t4a counted (tests that leak on purpose). */
static inline int fixture_teardown(void **state, int strict) {
  fixture *f = *state;
  t4a_module_cache_destroy(f->cache);
  t4a_status st = t4a_retire_destroy(f->retire);
  t4a_mem_pool_release(f->pool);
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  f->baseline = 0;
  long extra = unaccounted(f);
  t4a_lane_release(f->lane);
  t4a_driver_release(f->drv);
  int clean = t4a_fake_nothing_live(f->fake);
  uint64_t violations = t4a_fake_ordering_violations(f->fake);
  t4a_fake_destroy(f->fake);
  free(f);
  if (strict && (!clean || st != T4A_OK || violations != 0)) {
    fprintf(stderr, "teardown: clean %d, retire %s, %llu ordering violations\n", clean,
            t4a_status_name(st), (unsigned long long)violations);
    return -1;
  }
  if (!strict && extra != 0) {
    fprintf(stderr, "teardown: %ld objects alive uncounted\n", extra);
    return -1;
  }
  return 0;
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
