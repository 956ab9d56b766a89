/* An NCCL all-reduce between two runtimes, one per device, through raw scopes (label: gpu,
 * multi). Exits 77 without a driver; fails with an explicit message on a host with fewer than two
 * GPUs (testing/gpu/gpu_main.h). Without a loadable NCCL it prints SKIP and exits 77.
 *
 * NCCL is loaded at run time (dlopen of libnccl.so.2: the loader's path, then $T4A_NCCL_LIB, then
 * the usual install and Python-wheel locations); the few entry points and enum values used are
 * declared here (no NCCL header). ncclCommInitAll makes one communicator per device over the
 * devices' primary contexts, which are the runtimes' contexts. Rank r's send and receive buffers
 * are bound in a raw scope on runtime r; since both ranks' calls must sit inside one
 * ncclGroupStart/End, the scope on runtime 0 runs a nested scope on runtime 1 whose callback
 * issues GroupStart, AllReduce(rank 0, runtime 0's stream), AllReduce(rank 1, runtime 1's
 * stream), GroupEnd. Each rank's result is downloaded through its runtime (stream order, no host
 * sync in the scopes) and compared exactly against the sum computed on the CPU; the send buffers
 * are released right after the scopes. Run for 2^20 floats and 2^24 + 5 floats (64 MiB). */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

/* ---- NCCL, declared here ---- */

typedef struct nccl_comm_opaque *nccl_comm;
enum { NCCL_SUCCESS = 0, NCCL_FLOAT32 = 7 /* ncclFloat */, NCCL_SUM = 0 /* ncclSum */ };
typedef int (*nccl_get_version_fn)(int *version);
typedef int (*nccl_comm_init_all_fn)(nccl_comm *comms, int ndev, const int *devlist);
typedef int (*nccl_comm_destroy_fn)(nccl_comm comm);
typedef int (*nccl_group_fn)(void);
typedef int (*nccl_all_reduce_fn)(const void *sendbuff, void *recvbuff, size_t count,
                                  int datatype, int op, nccl_comm comm, CUstream stream);
typedef const char *(*nccl_get_error_string_fn)(int result);

typedef struct nccl {
  void *dl;
  char path[512];
  int version;
  nccl_get_version_fn get_version;
  nccl_comm_init_all_fn comm_init_all;
  nccl_comm_destroy_fn comm_destroy;
  nccl_group_fn group_start, group_end;
  nccl_all_reduce_fn all_reduce;
  nccl_get_error_string_fn error_string;
} nccl;

static nccl g_nccl;
static int g_nccl_loaded;
static char g_nccl_why[1024];

static void *sym(void *dl, const char *name) {
  return dlsym(dl, name);
}

static int try_open(const char *path) {
  if (g_nccl.dl != NULL) return 1;
  g_nccl.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (g_nccl.dl != NULL) {
    snprintf(g_nccl.path, sizeof g_nccl.path, "%s", path);
    return 1;
  }
  const char *e = dlerror();
  size_t used = strlen(g_nccl_why);
  snprintf(g_nccl_why + used, sizeof g_nccl_why - used, "%s%s", used ? "; " : "",
           e != NULL ? e : path);
  return 0;
}

static int nccl_load(void) {
  memset(&g_nccl, 0, sizeof g_nccl);
  g_nccl_why[0] = '\0';
  if (try_open("libnccl.so.2")) goto found;
  const char *env = getenv("T4A_NCCL_LIB");
  if (env != NULL && *env != '\0' && try_open(env)) goto found;
  static const char *const patterns[] = {
      "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
      "/usr/local/cuda/lib64/libnccl.so.2",
      "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
      "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
      "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
      "/opt/*/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
      "/root/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
      "/usr/local/lib/python3*/dist-packages/torch/lib/libnccl.so.2",
  };
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    glob_t g;
    if (glob(patterns[i], 0, NULL, &g) == 0) {
      for (size_t k = 0; k < g.gl_pathc && g_nccl.dl == NULL; k++) (void)try_open(g.gl_pathv[k]);
    }
    globfree(&g);
    if (g_nccl.dl != NULL) goto found;
  }
  return 0;
found:;
  /* dlsym returns void *; the cast to a function pointer goes through memcpy (ISO C). */
  void *p;
#define LOAD(field, name)        \
  p = sym(g_nccl.dl, name);      \
  if (p == NULL) {               \
    snprintf(g_nccl_why, sizeof g_nccl_why, "%s: no %s", g_nccl.path, name); \
    return 0;                    \
  }                              \
  memcpy(&g_nccl.field, &p, sizeof p)
  LOAD(get_version, "ncclGetVersion");
  LOAD(comm_init_all, "ncclCommInitAll");
  LOAD(comm_destroy, "ncclCommDestroy");
  LOAD(group_start, "ncclGroupStart");
  LOAD(group_end, "ncclGroupEnd");
  LOAD(all_reduce, "ncclAllReduce");
  LOAD(error_string, "ncclGetErrorString");
#undef LOAD
  if (g_nccl.get_version(&g_nccl.version) != NCCL_SUCCESS) g_nccl.version = -1;
  return 1;
}

static t4a_status nccl_fail(const char *entry, int result) {
  return t4a_error_set_(T4A_DRIVER_ERROR, entry, result, NULL, 0, "%s returned NCCL result %d (%s)",
                        entry, result, g_nccl.error_string(result));
}

/* ---- two runtimes ---- */

typedef struct rt {
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
} rt;

static void rt_open(int ordinal, rt *r) {
  CK(t4a_lane_create(g_drv, ordinal, NULL, &r->lane));
  CK(t4a_mem_pool_create(r->lane, NULL, &r->pool));
  CK(t4a_retire_create(r->lane, NULL, &r->retire));
  CK(t4a_xfer_create(r->retire, NULL, &r->xfer));
}

static void rt_close(rt *r) {
  t4a_xfer_destroy(r->xfer);
  CK(t4a_retire_destroy(r->retire));
  t4a_mem_pool_release(r->pool);
  t4a_lane_release(r->lane);
}

typedef struct job {
  rt *r[2];
  nccl_comm comm[2];
  t4a_buffer *send[2], *recv[2];
  size_t count;
  t4a_raw_scope *outer; /* runtime 0's scope, valid inside the nested scope */
  int ordinal[2];
  int nested_ran;
  int group_end_result;
} job;

/* Runtime 1's scope, nested in runtime 0's: both ranks' calls in one group. */
static t4a_status inner_fn(t4a_raw_scope *scope, void *user) {
  job *j = user;
  j->nested_ran = 1;
  j->ordinal[1] = t4a_raw_device_ordinal(scope);
  uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
  t4a_status st = t4a_raw_devptr(j->outer, j->send[0], T4A_RAW_READ, &s0);
  if (st == T4A_OK) st = t4a_raw_devptr(j->outer, j->recv[0], T4A_RAW_WRITE, &r0);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->send[1], T4A_RAW_READ, &s1);
  if (st == T4A_OK) st = t4a_raw_devptr(scope, j->recv[1], T4A_RAW_WRITE, &r1);
  if (st != T4A_OK) return st;
  CUstream st0 = (CUstream)t4a_raw_stream(j->outer), st1 = (CUstream)t4a_raw_stream(scope);
  int res = g_nccl.group_start();
  if (res != NCCL_SUCCESS) return nccl_fail("ncclGroupStart", res);
  int a0 = g_nccl.all_reduce((const void *)(uintptr_t)s0, (void *)(uintptr_t)r0, j->count,
                             NCCL_FLOAT32, NCCL_SUM, j->comm[0], st0);
  int a1 = g_nccl.all_reduce((const void *)(uintptr_t)s1, (void *)(uintptr_t)r1, j->count,
                             NCCL_FLOAT32, NCCL_SUM, j->comm[1], st1);
  res = g_nccl.group_end(); /* always: a group left open would poison later NCCL calls */
  j->group_end_result = res;
  if (a0 != NCCL_SUCCESS) return nccl_fail("ncclAllReduce (rank 0)", a0);
  if (a1 != NCCL_SUCCESS) return nccl_fail("ncclAllReduce (rank 1)", a1);
  if (res != NCCL_SUCCESS) return nccl_fail("ncclGroupEnd", res);
  return T4A_OK;
}

/* Runtime 0's scope. */
static t4a_status outer_fn(t4a_raw_scope *scope, void *user) {
  job *j = user;
  j->outer = scope;
  j->ordinal[0] = t4a_raw_device_ordinal(scope);
  t4a_raw_binding b[2] = {{j->send[1], T4A_RAW_READ}, {j->recv[1], T4A_RAW_WRITE}};
  return t4a_raw_run(j->r[1]->retire, b, 2, inner_fn, j);
}

static void fail_detail(const char *what, t4a_status st) {
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  fail_msg("%s: %s (%s)", what, t4a_status_name(st), t4a_error_format(&e, buf, sizeof buf));
}

static void all_reduce_once(rt *r0, rt *r1, nccl_comm comm[2], size_t count) {
  const size_t bytes = count * sizeof(float);
  float *h[2], *got = malloc(bytes);
  assert_non_null(got);
  job j;
  memset(&j, 0, sizeof j);
  j.r[0] = r0;
  j.r[1] = r1;
  j.comm[0] = comm[0];
  j.comm[1] = comm[1];
  j.count = count;
  rt *r[2] = {r0, r1};
  for (int k = 0; k < 2; k++) {
    h[k] = malloc(bytes);
    assert_non_null(h[k]);
    /* Small integers: every sum is exact in float. */
    for (size_t i = 0; i < count; i++) h[k][i] = (float)((i * (3u + 4u * k) + 11u * k) % 4099u);
    CK(t4a_buffer_create(r[k]->pool, bytes, 0, 0, &j.send[k]));
    CK(t4a_buffer_create(r[k]->pool, bytes, 0, 0, &j.recv[k]));
    CK(t4a_xfer_upload(r[k]->xfer, j.send[k], 0, h[k], bytes));
  }
  t4a_counter_values c0[2], c1[2];
  for (int k = 0; k < 2; k++) t4a_lane_stats(r[k]->lane, &c0[k]);
  t4a_raw_binding b[2] = {{j.send[0], T4A_RAW_READ}, {j.recv[0], T4A_RAW_WRITE}};
  t4a_status st = t4a_raw_run(r0->retire, b, 2, outer_fn, &j);
  if (st != T4A_OK) fail_detail("nested raw scopes with the NCCL group", st);
  assert_true(j.nested_ran);
  assert_int_equal(j.ordinal[0], t4a_lane_ordinal(r0->lane));
  assert_int_equal(j.ordinal[1], t4a_lane_ordinal(r1->lane));
  for (int k = 0; k < 2; k++) t4a_lane_stats(r[k]->lane, &c1[k]);
  /* The inputs may go at once: each scope keeps its bindings until its stream passed them. */
  t4a_buffer_release(j.send[0]);
  t4a_buffer_release(j.send[1]);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(c1[k].raw_scopes - c0[k].raw_scopes, 1);
    assert_int_equal(c1[k].host_waits, c0[k].host_waits); /* no host wait in the scopes */
    memset(got, 0xFF, bytes);
    t4a_xfer_pending *p = NULL;
    CK(t4a_xfer_download(r[k]->xfer, j.recv[k], 0, got, bytes, &p));
    CK(t4a_xfer_pending_wait(p));
    t4a_xfer_pending_release(p);
    for (size_t i = 0; i < count; i++) {
      float want = h[0][i] + h[1][i];
      if (got[i] != want) {
        fail_msg("rank %d element %zu: %g, want %g", k, i, (double)got[i], (double)want);
      }
    }
    t4a_buffer_release(j.recv[k]);
  }
  printf("# all-reduce (sum) of %zu floats on devices %d and %d, each rank's result exact\n",
         count, j.ordinal[0], j.ordinal[1]);
  free(h[0]);
  free(h[1]);
  free(got);
}

static void test_nccl_all_reduce_two_runtimes(void **state) {
  (void)state;
  if (!g_nccl_loaded) {
    skip();
  }
  rt r0, r1;
  memset(&r0, 0, sizeof r0);
  memset(&r1, 0, sizeof r1);
  rt_open(0, &r0);
  rt_open(1, &r1);
  /* Communicator setup outside any scope (it may change this thread's current context; each
   * scope sets its own and restores the caller's). */
  nccl_comm comm[2] = {NULL, NULL};
  int devs[2] = {0, 1};
  int res = g_nccl.comm_init_all(comm, 2, devs);
  if (res != NCCL_SUCCESS) {
    fail_msg("ncclCommInitAll: %d (%s)", res, g_nccl.error_string(res));
  }
  all_reduce_once(&r0, &r1, comm, (size_t)1 << 20);
  all_reduce_once(&r0, &r1, comm, ((size_t)1 << 24) + 5);
  CK(t4a_retire_wait(r0.retire));
  CK(t4a_retire_wait(r1.retire));
  for (int k = 0; k < 2; k++) {
    res = g_nccl.comm_destroy(comm[k]);
    if (res != NCCL_SUCCESS) fail_msg("ncclCommDestroy: %d (%s)", res, g_nccl.error_string(res));
  }
  t4a_counter_values v[2];
  t4a_lane_stats(r0.lane, &v[0]);
  t4a_lane_stats(r1.lane, &v[1]);
  printf("# raw scopes: runtime 0 %llu, runtime 1 %llu; poisoned %llu / %llu\n",
         (unsigned long long)v[0].raw_scopes, (unsigned long long)v[1].raw_scopes,
         (unsigned long long)v[0].raw_scopes_poisoned, (unsigned long long)v[1].raw_scopes_poisoned);
  rt_close(&r0);
  rt_close(&r1);
  /* NCCL stays loaded: it registers teardown with the CUDA runtime it pulled in. */
}

int main(void) {
  g_nccl_loaded = nccl_load();
  if (!g_nccl_loaded) {
    printf("SKIP: no loadable NCCL (%s)\n", g_nccl_why);
    /* Without a driver the usual answer (77) comes first; on one GPU the explicit failure. */
    t4a_driver *d = NULL;
    if (t4a_driver_open(NULL, &d) != T4A_OK) {
      printf("SKIP: no CUDA driver either\n");
      return 77;
    }
    int n = 0;
    if (t4a_device_count(d, &n) != T4A_OK || n < 2) {
      printf("FAIL: nccl_multi_gpu_test needs 2 GPUs and the host has %d; it was not run\n", n);
      t4a_driver_release(d);
      return 1;
    }
    t4a_driver_release(d);
    return 77;
  }
  printf("# NCCL %d loaded from %s\n", g_nccl.version, g_nccl.path);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nccl_all_reduce_two_runtimes),
  };
  return t4a_gpu_test_main("nccl_multi_gpu_test", tests, sizeof tests / sizeof *tests, 2, &g_drv);
}
