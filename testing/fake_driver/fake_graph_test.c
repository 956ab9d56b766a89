/* Self-tests of the fake driver: graphs: capture and replay, graphs built by hand, capture rules,
 * graph launches across streams. Its table called raw, as t4a would call it (fixture and shared
 * kernels: fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

/* ---- graphs ------------------------------------------------------------------------------- */

static void test_graph_capture_and_replay(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "add", 4, k_add_params, k_add, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"add"}, 1);
  CUfunction add = get_fn(x, m, "add");
  enum { N = 8 };
  CUdeviceptr a, b;
  CK(t->cuMemAlloc(&a, N * sizeof(int)));
  CK(t->cuMemAlloc(&b, N * sizeof(int)));
  int in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = i;
  memset(out, 0, sizeof out);
  int n = N, k = 10;
  void *args[] = {&a, &b, &n, &k};

  CUstreamCaptureStatus st;
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  assert_int_equal(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                   CUDA_ERROR_ILLEGAL_STATE);
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CK(t->cuMemcpyHtoDAsync(a, in, sizeof in, x->s));
  CK(launch1(x, add, x->s, args));
  /* The capture's one dependency is the node just added (linear graphs): launch chains learn
   * each fire's kernel node this way. Edge data is not asked. */
  cuuint64_t cap_id = 0;
  CUgraph cap_graph = NULL;
  const CUgraphNode *deps = NULL;
  size_t num_deps = 0;
  CK(t->cuStreamGetCaptureInfo(x->s, &st, &cap_id, &cap_graph, &deps, NULL, &num_deps));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(num_deps, 1);
  assert_non_null(deps);
  assert_non_null(cap_graph);
  assert_true(cap_id != 0);
  CUgraphNode launched = deps[0];
  CK(t->cuMemcpyDtoHAsync(out, b, sizeof out, x->s));
  CUgraph g;
  CK(t->cuStreamEndCapture(x->s, &g));
  CK(t->cuStreamGetCaptureInfo(x->s, &st, NULL, NULL, NULL, NULL, NULL));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0); /* captured, not queued */
  size_t num = 0;
  CK(t->cuGraphGetNodes(g, NULL, &num));
  assert_int_equal(num, 3);
  CUgraphNode nodes[4];
  num = 4;
  CK(t->cuGraphGetNodes(g, nodes, &num));
  assert_int_equal(num, 3);
  assert_null(nodes[3]);
  assert_ptr_equal(nodes[1], launched);

  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphUpload(ge, x->s));
  CK(t->cuGraphLaunch(ge, x->s));
  assert_int_equal(out[3], 0);
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 13);
  /* Replay reads the host source again and reuses the captured argument values. */
  in[3] = 100;
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 110);
  /* Rebind the kernel node's arguments. */
  int k2 = 1000;
  void *args2[] = {&a, &b, &n, &k2};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = add;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 32;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args2;
  CK(t->cuGraphExecKernelNodeSetParams(ge, nodes[1], &p));
  assert_int_equal(t->cuGraphExecKernelNodeSetParams(ge, nodes[0], &p), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 1100);

  /* Update: a graph of another shape is refused; one of the same shape is taken. */
  CUgraph g2;
  CK(t->cuGraphCreate(&g2, 0));
  CUgraphNode kn;
  CK(t->cuGraphAddKernelNode(&kn, g2, NULL, 0, &p));
  CUgraphExecUpdateResultInfo info;
  assert_int_equal(t->cuGraphExecUpdate(ge, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CK(t->cuGraphExecUpdate(ge, g, &info));
  assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[3], 110);

  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuGraphDestroy(g2));
  assert_int_equal(t->cuGraphDestroy(g2), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFree(a));
  CK(t->cuMemFree(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_graph_built_by_hand(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_register_kernel(x->fake, "fill", 3, k_fill_params, k_fill, NULL);
  t4a_fake_register_kernel(x->fake, "add", 4, k_add_params, k_add, NULL);
  CUmodule m = load_kernels(x, (const char *const[]){"fill", "add"}, 2);
  CUdeviceptr a, b;
  CK(t->cuMemAlloc(&a, 16));
  CK(t->cuMemAlloc(&b, 16));
  int n = 4, base = 1, k = 2;
  void *fa[] = {&a, &n, &base};
  void *aa[] = {&a, &b, &n, &k};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraph g;
  CK(t->cuGraphCreate(&g, 0));
  assert_int_equal(t->cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode n1, n2;
  p.func = get_fn(x, m, "fill");
  p.kernelParams = fa;
  CK(t->cuGraphAddKernelNode(&n1, g, NULL, 0, &p));
  p.func = get_fn(x, m, "add");
  p.kernelParams = aa;
  CK(t->cuGraphAddKernelNode(&n2, g, &n1, 1, &p));
  CUgraph other;
  CK(t->cuGraphCreate(&other, 0));
  CUgraphNode n3;
  assert_int_equal(t->cuGraphAddKernelNode(&n3, other, &n1, 1, &p), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuGraphDestroy(other));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphLaunch(ge, x->s));
  int out[4] = {0};
  CK(t->cuMemcpyDtoHAsync(out, b, sizeof out, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(out[0], 3);
  assert_int_equal(out[3], 6);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.graphs, 1);
  assert_int_equal(live.graph_execs, 1);
  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuMemFree(a));
  CK(t->cuMemFree(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_capture_rules(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 64));
  CUgraph g;
  /* A sync of the capturing stream is illegal and breaks the capture. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(t->cuMemsetD8Async(d, 1, 64, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus st;
  CK(t->cuStreamIsCapturing(x->s, &st));
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(t->cuMemsetD8Async(d, 1, 64, x->s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_ILLEGAL_STATE);

  /* An unsafe call during a global capture fails and breaks it. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr e;
  assert_int_equal(t->cuMemAlloc(&e, 8), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  /* ... but not during a relaxed one. */
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(t->cuMemAlloc(&e, 8));
  CK(t->cuMemFree(e));
  /* Stream-ordered allocation nodes are not modelled. */
  assert_int_equal(t->cuMemAllocAsync(&e, 8, x->s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(t->cuStreamEndCapture(x->s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  /* Events recorded in a capture: waits inside it are fine, queries are not. */
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuStreamWaitEvent(x->s, ev, 0));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
  /* A captured free runs when the graph runs, once per launch. */
  CK(t->cuMemFreeAsync(d, x->s));
  CK(t->cuStreamEndCapture(x->s, &g));
  assert_non_null(t4a_fake_host_view(x->fake, d, 64));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_null(t4a_fake_host_view(x->fake, d, 64));
  CK(t->cuGraphLaunch(ge, x->s));
  assert_int_equal(t->cuStreamSynchronize(x->s), CUDA_ERROR_ILLEGAL_ADDRESS);
}

/* Launches of one executable graph are ordered, even on different streams. */
static void test_graph_launches_are_ordered_across_streams(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  seen sn;
  memset(&sn, 0, sizeof sn);
  t4a_fake_register_kernel(x->fake, "seen", 1, k_seen_params, k_seen, &sn);
  CUmodule m = load_kernels(x, (const char *const[]){"seen"}, 1);
  int64_t arg = 3;
  void *args[] = {&arg};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = get_fn(x, m, "seen");
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  CUgraph g;
  CK(t->cuGraphCreate(&g, 0));
  CUgraphNode node;
  CK(t->cuGraphAddKernelNode(&node, g, NULL, 0, &p));
  CUgraphExec ge;
  CK(t->cuGraphInstantiateWithFlags(&ge, g, 0));
  CUstream b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CK(t->cuGraphLaunch(ge, x->s));
  CK(t->cuGraphLaunch(ge, b));
  CK(t->cuStreamSynchronize(b));
  assert_int_equal(sn.runs, 2);
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 0);
  CK(t->cuGraphExecDestroy(ge));
  CK(t->cuGraphDestroy(g));
  CK(t->cuStreamDestroy(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* cuGraphExecMemsetNodeSetParams as documented: a memset node of that graph, its context, 1-D,
 * element 1/2/4, the destination aligned and inside one live allocation; the next launch fills
 * the new value. External event nodes: recorded (or waited for) at each launch. */
static void count_host_run(void *p) { ++*(int *)p; }

static void test_memset_nodes_and_event_nodes(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 64));
  const unsigned *h = t4a_fake_host_view(x->fake, d, 64);
  CUevent ev;
  CK(t->cuEventCreate(&ev, 0));
  CK(t->cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CK(t->cuMemsetD32Async(d, 1, 16, x->s));
  CUstreamCaptureStatus cs;
  cuuint64_t id;
  CUgraph cg;
  const CUgraphNode *deps;
  size_t nd;
  CK(t->cuStreamGetCaptureInfo(x->s, &cs, &id, &cg, &deps, NULL, &nd));
  CUgraphNode fill = deps[0];
  CK(t->cuEventRecordWithFlags(ev, x->s, CU_EVENT_RECORD_EXTERNAL));
  int host_runs = 0;
  CK(t->cuLaunchHostFunc(x->s, count_host_run, &host_runs));
  CUgraph g;
  CK(t->cuStreamEndCapture(x->s, &g));
  size_t n = 0;
  CK(t->cuGraphGetNodes(g, NULL, &n));
  assert_int_equal(n, 3); /* fill, event record node, host node */
  assert_int_equal(t->cuEventQuery(ev), CUDA_SUCCESS); /* not recorded by the capture */
  CUgraphExec ex;
  CK(t->cuGraphInstantiateWithFlags(&ex, g, 0));
  CUDA_MEMSET_NODE_PARAMS p = {0};
  p.dst = d;
  p.value = 7;
  p.elementSize = 4;
  p.width = 16;
  p.height = 1;
  CK(t->cuGraphExecMemsetNodeSetParams(ex, fill, &p, x->ctx));
  CUDA_MEMSET_NODE_PARAMS bad = p;
  bad.dst = d + 2;
  assert_int_equal(t->cuGraphExecMemsetNodeSetParams(ex, fill, &bad, x->ctx), CUDA_ERROR_INVALID_VALUE);
  bad = p;
  bad.width = 17; /* past the allocation */
  assert_int_equal(t->cuGraphExecMemsetNodeSetParams(ex, fill, &bad, x->ctx), CUDA_ERROR_INVALID_VALUE);
  bad = p;
  bad.elementSize = 8;
  assert_int_equal(t->cuGraphExecMemsetNodeSetParams(ex, fill, &bad, x->ctx), CUDA_ERROR_INVALID_VALUE);
  bad = p;
  bad.height = 2;
  assert_int_equal(t->cuGraphExecMemsetNodeSetParams(ex, fill, &bad, x->ctx), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(t->cuGraphExecMemsetNodeSetParams(ex, fill, &p, NULL), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuGraphLaunch(ex, x->s));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_NOT_READY); /* the node recorded it */
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuEventQuery(ev));
  assert_int_equal(h[15], 7);
  assert_int_equal(host_runs, 1); /* the host node ran at the launch */
  CK(t->cuGraphExecDestroy(ex));
  CK(t->cuGraphDestroy(g));
  CK(t->cuEventDestroy(ev));
  CK(t->cuMemFree(d));
  fx_clean(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test_setup_teardown(test_graph_capture_and_replay, setup, teardown),
cmocka_unit_test_setup_teardown(test_memset_nodes_and_event_nodes, setup, teardown),
cmocka_unit_test_setup_teardown(test_graph_built_by_hand, setup, teardown),
cmocka_unit_test_setup_teardown(test_capture_rules, setup, teardown),
cmocka_unit_test_setup_teardown(test_graph_launches_are_ordered_across_streams, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
