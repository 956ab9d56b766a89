/* The fake driver's occupancy model and the launch attributes of cuLaunchKernelEx
 * (fake_occupancy.c), called raw: blocks per SM from threads, registers and shared memory, the
 * kernel's resources in cuFuncGetAttribute and its max threads enforced at launch,
 * cuOccupancyMaxPotentialBlockSize (size and callback forms), cuOccupancyMaxPotentialClusterSize,
 * the cooperative grid limit, cluster dims dividing the grid, the portable and non-portable sizes,
 * and attributes kept by a captured kernel node through an update. A refused launch queues
 * nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testing/fake_driver/fake_test_util.h"

static CUlaunchConfig config(unsigned grid, unsigned block, unsigned shared, CUstream s,
                             CUlaunchAttribute *attrs, unsigned num) {
  CUlaunchConfig c;
  memset(&c, 0, sizeof c);
  c.gridDimX = grid;
  c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = block;
  c.blockDimY = c.blockDimZ = 1;
  c.sharedMemBytes = shared;
  c.hStream = s;
  c.attrs = attrs;
  c.numAttrs = num;
  return c;
}

static CUlaunchAttribute cluster(unsigned x) {
  CUlaunchAttribute a;
  memset(&a, 0, sizeof a);
  a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  a.value.clusterDim.x = x;
  a.value.clusterDim.y = a.value.clusterDim.z = 1;
  return a;
}

static CUlaunchAttribute cooperative(void) {
  CUlaunchAttribute a;
  memset(&a, 0, sizeof a);
  a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  a.value.cooperative = 1;
  return a;
}

static size_t CUDAAPI eight_per_thread(int block) { return 8u * (size_t)block; }

static void test_occupancy_model(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "noop", 0, NULL, NULL, NULL);
  t4a_fake_set_kernel_attrs(x->fake, "noop", &(t4a_fake_kernel_attrs){64, 4096, 0, 512});
  CUmodule m = load_kernels(x, (const char *const[]){"noop"}, 1);
  CUfunction f = get_fn(x, m, "noop");
  int v = 0;
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  assert_int_equal(v, 64);
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  assert_int_equal(v, 4096);
  CK(t->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  assert_int_equal(v, 512);
  /* 256 threads: registers 65,536 / (64 x 256) = 4; shared 233,472 / (4,096 + 1,024) = 45. */
  CK(t->cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 0));
  assert_int_equal(v, 4);
  /* 40,000 dynamic bytes: 233,472 / (4,096 + 40,000 + 1,024) = 5; 46,000 exceeds the
   * function's current maximum (48 KiB less its 4,096 static bytes: 45,056): 0. */
  CK(t->cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 64, 40000));
  assert_int_equal(v, 5);
  CK(t->cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 64, 46000));
  assert_int_equal(v, 0);
  /* Above the kernel's max threads: 0, and a launch is refused. */
  CK(t->cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 513, 0));
  assert_int_equal(v, 0);
  assert_int_equal(t->cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 0, 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuLaunchKernel(f, 1, 1, 1, 513, 1, 1, 0, x->s, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  /* The suggestion: 512 threads (limit) of 64 registers: 2 blocks = 1,024 threads; 256: 4 = 1,024
   * (a tie keeps the larger block). */
  int grid = 0, block = 0;
  CK(t->cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0));
  assert_int_equal(block, 512);
  assert_int_equal(grid, 2 * 132);
  /* Limit 100: 100 threads count as 128 (8 blocks, 800 threads); 64 threads: 16 blocks, 1,024. */
  CK(t->cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 100));
  assert_int_equal(block, 64);
  assert_int_equal(grid, 16 * 132);
  CK(t->cuOccupancyMaxPotentialBlockSize(&grid, &block, f, eight_per_thread, 0, 0));
  assert_true(block > 0 && block <= 512);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 0);
  CK(t->cuModuleUnload(m));
}

static void test_launch_attributes(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  seen sn;
  memset(&sn, 0, sizeof sn);
  t4a_fake_register_kernel(x->fake, "seen", 1, k_seen_params, k_seen, &sn);
  CUmodule m = load_kernels(x, (const char *const[]){"seen"}, 1);
  CUfunction f = get_fn(x, m, "seen");
  int64_t arg = 5;
  void *args[1] = {&arg};
  /* Cooperative: 32 registers, 256 threads: 8 per SM x 132 = 1,056 at once. */
  CUlaunchAttribute co = cooperative();
  CUlaunchConfig c = config(1056, 256, 0, x->s, &co, 1);
  CK(t->cuLaunchKernelEx(&c, f, args, NULL));
  c.gridDimX = 1057;
  assert_int_equal(t->cuLaunchKernelEx(&c, f, args, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  /* Clusters: dims dividing the grid, 8 portable, 16 with the attribute, never 32. */
  CUlaunchAttribute cl = cluster(3);
  c = config(16, 128, 0, x->s, &cl, 1);
  assert_int_equal(t->cuLaunchKernelEx(&c, f, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  cl = cluster(0);
  assert_int_equal(t->cuLaunchKernelEx(&c, f, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  cl = cluster(16);
  assert_int_equal(t->cuLaunchKernelEx(&c, f, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  int size = 0;
  CK(t->cuOccupancyMaxPotentialClusterSize(&size, f, &c));
  assert_int_equal(size, 8);
  CK(t->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  CK(t->cuOccupancyMaxPotentialClusterSize(&size, f, &c));
  assert_int_equal(size, 16);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 1); /* only the cooperative launch */
  CK(t->cuLaunchKernelEx(&c, f, args, NULL));
  c.gridDimX = 32;
  cl = cluster(32);
  assert_int_equal(t->cuLaunchKernelEx(&c, f, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  assert_int_equal(t->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2),
                   CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(sn.runs, 2);
  /* A captured launch keeps its attributes through an executable node update. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  cl = cluster(4);
  c = config(8, 64, 0, x->s, &cl, 1);
  CK(t->cuLaunchKernelEx(&c, f, args, NULL));
  CUgraph g = NULL;
  CK(t->cuStreamEndCapture(x->s, &g));
  CUgraphNode nodes[1];
  size_t n = 1;
  CK(t->cuGraphGetNodes(g, nodes, &n));
  assert_int_equal(n, 1);
  CUgraphExec e = NULL;
  CK(t->cuGraphInstantiateWithFlags(&e, g, 0));
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  int64_t arg2 = 9;
  void *args2[1] = {&arg2};
  p.func = f;
  p.gridDimX = 8;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 64;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args2;
  CK(t->cuGraphExecKernelNodeSetParams(e, nodes[0], &p));
  CK(t->cuGraphLaunch(e, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(sn.runs, 3);
  assert_int_equal(sn.arg, 9);
  CK(t->cuGraphExecDestroy(e));
  CK(t->cuGraphDestroy(g));
  CK(t->cuModuleUnload(m));
}

/* The attributes reach the kernel (t4a_fake_launch_attrs). */
static unsigned g_cluster;
static int g_coop;
static void k_attrs(t4a_fake_launch *l, void **params, void *user) {
  (void)params;
  (void)user;
  unsigned c[3];
  t4a_fake_launch_attrs(l, c, &g_coop, NULL);
  g_cluster = c[0];
}

static void test_attributes_seen_by_the_kernel(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "attrs", 0, NULL, k_attrs, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"attrs"}, 1);
  CUfunction f = get_fn(x, m, "attrs");
  CUlaunchAttribute two[2] = {cluster(2), cooperative()};
  CUlaunchConfig c = config(4, 32, 0, x->s, two, 1);
  CK(t->cuLaunchKernelEx(&c, f, NULL, NULL));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(g_cluster, 2);
  assert_int_equal(g_coop, 0);
  c.attrs = &two[1];
  CK(t->cuLaunchKernelEx(&c, f, NULL, NULL));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(g_cluster, 0);
  assert_int_equal(g_coop, 1);
  CK(t->cuModuleUnload(m));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_occupancy_model, setup, teardown),
      cmocka_unit_test_setup_teardown(test_launch_attributes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attributes_seen_by_the_kernel, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
