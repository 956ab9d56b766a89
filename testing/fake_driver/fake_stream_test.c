/* Self-tests of the fake driver: streams and events: stream order at run time, cross-stream and
 * cross-device waits, progress orders, lifetimes, threads, host functions, D16 fills, the rules
 * of cuMemGetInfo and cuEventElapsedTime. Its table called raw, as t4a would call
 * it (fixture and shared kernels: fake_test_util.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "t4a/ctx.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fake_driver/fake_test_util.h"

/* An event queried or synchronised while another context is current is counted (t4a's rule:
 * observe each event under its own context); with its own context, or none, it is not. */
static void test_foreign_event_observations(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ev, x.s));
  CK(t->cuEventSynchronize(ev));
  CK(t->cuEventQuery(ev));
  CK(t->cuCtxSetCurrent(NULL));
  CK(t->cuEventQuery(ev));
  assert_int_equal(t4a_fake_foreign_event_observations(x.fake), 0);
  CUcontext c1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuEventQuery(ev));
  CK(t->cuEventSynchronize(ev));
  assert_int_equal(t4a_fake_foreign_event_observations(x.fake), 2);
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuEventDestroy(ev));
  CK(t->cuDevicePrimaryCtxRelease(1));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- ordering ----------------------------------------------------------------------------- */

static void test_copies_run_in_stream_order_at_run_time(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 16, x->s));
  char src[16] = "first version!!", out[16] = "untouched......";
  CK(t->cuMemcpyHtoDAsync(d, src, 16, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 16, x->s));
  /* Nothing ran yet (the allocation is an operation too): a host read before the sync sees the
   * old bytes. */
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 3);
  assert_string_equal(out, "untouched......");
  /* Copies read their source when they run, not when they are enqueued. */
  memcpy(src, "second version!", 16);
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_NOT_READY);
  assert_string_equal(out, "untouched......");
  CK(t->cuStreamSynchronize(x->s));
  assert_string_equal(out, "second version!");
  CK(t->cuStreamQuery(x->s));
  /* One step at a time. */
  CK(t->cuMemsetD8Async(d, 'z', 15, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 16, x->s));
  assert_int_equal(t4a_fake_step(x->fake, x->s), 1);
  assert_string_equal(out, "second version!");
  assert_int_equal(t4a_fake_step(x->fake, x->s), 1);
  assert_string_equal(out, "zzzzzzzzzzzzzzz");
  assert_int_equal(t4a_fake_step(x->fake, x->s), 0);
  /* The query policy that progresses. */
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_PROGRESSES);
  uint32_t words[4] = {0};
  CK(t->cuMemsetD32Async(d, 0xA5A5A5A5u, 4, x->s));
  CK(t->cuMemcpyDtoHAsync(words, d, 16, x->s));
  CK(t->cuStreamQuery(x->s));
  assert_int_equal(words[3], 0xA5A5A5A5u);
  assert_int_equal(t->cuMemsetD32Async(d + 1, 0, 1, x->s), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemFreeAsync(d, x->s));
  CK(t->cuStreamSynchronize(x->s));
  fx_clean(x);
}

static void test_cross_stream_event_wait(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  CUstream b, c;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CK(t->cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventQuery(ev)); /* never recorded: complete */
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  char in[8] = "payload", out[8] = "-------", later[8] = "-------";
  CK(t->cuMemcpyHtoDAsync(d, in, 8, x->s));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuMemcpyDtoHAsync(later, d, 8, x->s)); /* after the record: not needed by b */
  CK(t->cuStreamWaitEvent(b, ev, 0));
  CK(t->cuMemcpyDtoHAsync(out, d, 8, b));
  CUdeviceptr other;
  CK(t->cuMemAlloc(&other, 8));
  /* Unrelated stream, another block (a write of d unordered with the copies would be a race the
   * fake reports): must stay untouched. */
  CK(t->cuMemsetD8Async(other, 0, 8, c));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_NOT_READY);

  CK(t->cuStreamSynchronize(b));
  assert_string_equal(out, "payload");
  assert_string_equal(later, "-------");
  assert_int_equal(t4a_fake_pending(x->fake, x->s), 1);
  assert_int_equal(t4a_fake_pending(x->fake, c), 1);
  CK(t->cuEventQuery(ev));

  /* Re-recording makes the event pending again; waits bind to the record they saw. */
  CK(t->cuEventRecord(ev, x->s));
  assert_int_equal(t->cuEventQuery(ev), CUDA_ERROR_NOT_READY);
  CK(t->cuEventSynchronize(ev));
  assert_string_equal(later, "payload");
  CK(t->cuEventQuery(ev));

  assert_int_equal(t4a_fake_progress(x->fake), 1);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 0);
  CK(t->cuMemFree(d));
  CK(t->cuMemFree(other));
  CK(t->cuEventDestroy(ev));
  CK(t->cuStreamDestroy(b));
  CK(t->cuStreamDestroy(c));
  fx_clean(x);
}

static void test_cross_device_wait_and_pool_access(void **state) {
  (void)state;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.num_devices = 2;
  o.all_peers = 1;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUcontext c1;
  CUstream s1;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dst;
  CK(t->cuMemAllocAsync(&dst, 64, s1));
  /* Work for device 0's stream while device 1 is current: refused. */
  CUdeviceptr bad;
  assert_int_equal(t->cuMemAllocAsync(&bad, 64, x.s), CUDA_ERROR_INVALID_CONTEXT);

  CK(t->cuCtxSetCurrent(x.ctx));
  CUdeviceptr src;
  CK(t->cuMemAllocAsync(&src, 64, x.s));
  CK(t->cuMemsetD8Async(src, 7, 64, x.s));
  CUevent ready;
  CK(t->cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ready, x.s));

  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamWaitEvent(s1, ready, 0));
  /* Device 1 reads device 0's pool memory without access: a fault when it runs. */
  CK(t->cuMemcpyDtoDAsync(dst, src, 64, s1));
  assert_int_equal(t->cuStreamSynchronize(s1), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x.fake, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_fake_sticky(x.fake, 0), CUDA_SUCCESS);
  t4a_fake_destroy(x.fake);

  /* Again, with access granted on the source pool. */
  assert_int_equal(fx_open(&x, &o), 0);
  t = x.t;
  CK(t->cuDevicePrimaryCtxRetain(&c1, 1));
  CUmemoryPool pool;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CK(t->cuMemPoolCreate(&pool, &props));
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = 1;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(t->cuMemPoolSetAccess(pool, &desc, 1));
  CK(t->cuMemAllocFromPoolAsync(&src, 64, pool, x.s));
  CK(t->cuMemsetD8Async(src, 9, 64, x.s));
  CK(t->cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventRecord(ready, x.s));
  CK(t->cuCtxSetCurrent(c1));
  CK(t->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(t->cuMemAllocAsync(&dst, 64, s1));
  CK(t->cuStreamWaitEvent(s1, ready, 0));
  CK(t->cuMemcpyDtoDAsync(dst, src, 64, s1));
  unsigned char host[64];
  CK(t->cuMemcpyDtoHAsync(host, dst, 64, s1));
  /* Syncing device 1's stream runs device 0's stream up to the event, across devices. */
  CK(t->cuStreamSynchronize(s1));
  assert_int_equal(host[0], 9);
  assert_int_equal(host[63], 9);
  CK(t->cuMemFreeAsync(dst, s1));
  CK(t->cuStreamSynchronize(s1));
  CK(t->cuStreamDestroy(s1));
  CK(t->cuCtxSetCurrent(x.ctx));
  CK(t->cuMemFreeAsync(src, x.s));
  CK(t->cuStreamSynchronize(x.s));
  CK(t->cuMemPoolDestroy(pool));
  CK(t->cuEventDestroy(ready));
  CK(t->cuDevicePrimaryCtxRelease(1));
  fx_clean(&x);
  t4a_fake_destroy(x.fake);
}

/* ---- lifetimes ---------------------------------------------------------------------------- */

static void test_stream_destroy_lets_work_finish(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  char in[8] = "1234567", out[8] = {0};
  CK(t->cuMemcpyHtoDAsync(d, in, 8, x->s));
  CK(t->cuMemcpyDtoHAsync(out, d, 8, x->s));
  CK(t->cuStreamDestroy(x->s));
  assert_int_equal(t->cuStreamQuery(x->s), CUDA_ERROR_INVALID_HANDLE);
  t4a_fake_live live;
  t4a_fake_live_objects(x->fake, &live);
  assert_int_equal(live.streams, 0);
  assert_int_equal(t4a_fake_pending(x->fake, NULL), 2);
  assert_int_equal(t4a_fake_progress(x->fake), 2);
  assert_string_equal(out, "1234567");
  x->s = NULL;
  CK(t->cuMemFree(d));
  fx_clean(x);
}

static void test_event_timing_and_stream_attributes(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  CUevent a, b, nt;
  CK(t->cuEventCreate(&a, 0));
  CK(t->cuEventCreate(&b, 0));
  CK(t->cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
  assert_int_equal(t->cuEventCreate(&nt, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  float ms;
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 8));
  CK(t->cuEventRecord(a, x->s));
  CK(t->cuMemsetD8Async(d, 0, 8, x->s));
  CK(t->cuEventRecord(b, x->s));
  CK(t->cuEventRecord(nt, x->s));
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
  CK(t->cuEventSynchronize(b));
  CK(t->cuEventElapsedTime(&ms, a, b));
  assert_true(ms > 0.0f);
  assert_int_equal(t->cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);

  CUstreamAttrValue v;
  memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)d;
  v.accessPolicyWindow.num_bytes = 8;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CK(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  CUstreamAttrValue back;
  assert_int_equal(t4a_fake_stream_attr(x->fake, x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                        &back),
                   1);
  assert_true(back.accessPolicyWindow.hitRatio == 0.5f);
  v.accessPolicyWindow.hitRatio = 1.5f;
  assert_int_equal(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);
  v.accessPolicyWindow.hitRatio = 1.0f;
  v.accessPolicyWindow.num_bytes = (size_t)1 << 40;
  assert_int_equal(t->cuStreamSetAttribute(x->s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);

  CUcontext sc;
  CK(t->cuStreamGetCtx(x->s, &sc));
  assert_ptr_equal(sc, x->ctx);
  CUstream prio;
  CK(t->cuStreamCreateWithPriority(&prio, CU_STREAM_NON_BLOCKING, -100));
  assert_int_equal(t->cuStreamCreate(&prio, 0x10), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamDestroy(prio));
  CK(t->cuEventDestroy(a));
  CK(t->cuEventDestroy(b));
  CK(t->cuEventDestroy(nt));
  assert_int_equal(t->cuEventDestroy(nt), CUDA_ERROR_INVALID_HANDLE);
  CK(t->cuMemFree(d));
  CK(t->cuCtxSynchronize());
  fx_clean(x);
}

/* A kernel (a host function here) that synchronizes a stream: on a GPU this hangs when the
 * stream needs the kernel itself; the fake reports CUDA_ERROR_ILLEGAL_STATE instead. */
typedef struct reentry {
  const t4a_driver_table *t;
  CUstream s;
  CUresult r;
} reentry;

static void k_sync_stream(t4a_fake_launch *l, void **params, void *user) {
  (void)l;
  (void)params;
  reentry *re = user;
  re->r = re->t->cuStreamSynchronize(re->s);
}

static void test_wait_cycles_are_reported(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  reentry re = {t, x->s, CUDA_SUCCESS};
  t4a_fake_register_kernel(x->fake, "sync_stream", 0, NULL, k_sync_stream, &re);
  CUmodule m = load_kernels(x, (const char *const[]){"sync_stream"}, 1);
  CUfunction f = get_fn(x, m, "sync_stream");
  /* The kernel waits for its own stream. */
  CK(launch1(x, f, x->s, NULL));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(re.r, CUDA_ERROR_ILLEGAL_STATE);
  /* The kernel waits for stream b, which waits for an event recorded after the kernel. */
  CUstream b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  CK(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  re.s = b;
  re.r = CUDA_SUCCESS;
  CK(launch1(x, f, x->s, NULL));
  CK(t->cuEventRecord(ev, x->s));
  CK(t->cuStreamWaitEvent(b, ev, 0));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(re.r, CUDA_ERROR_ILLEGAL_STATE);
  CK(t->cuStreamSynchronize(b)); /* the event completed once the kernel returned */
  CK(t->cuEventDestroy(ev));
  CK(t->cuStreamDestroy(b));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

/* Many threads, each with its own stream and buffers, share the one lock. */
typedef struct worker_arg {
  const t4a_driver_table *t;
  CUcontext ctx;
  int id;
  int ok;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg *w = p;
  const t4a_driver_table *t = w->t;
  if (t->cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS) return NULL;
  CUstream s;
  if (t->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  int good = 1;
  for (int round = 0; round < 50 && good; round++) {
    CUdeviceptr d;
    int in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = w->id * 1000 + round * 16 + i;
    good = t->cuMemAllocAsync(&d, sizeof in, s) == CUDA_SUCCESS &&
           t->cuMemcpyHtoDAsync(d, in, sizeof in, s) == CUDA_SUCCESS &&
           t->cuMemcpyDtoHAsync(out, d, sizeof out, s) == CUDA_SUCCESS &&
           t->cuMemFreeAsync(d, s) == CUDA_SUCCESS && t->cuStreamSynchronize(s) == CUDA_SUCCESS &&
           memcmp(in, out, sizeof in) == 0;
  }
  w->ok = good && t->cuStreamDestroy(s) == CUDA_SUCCESS;
  t->cuCtxSetCurrent(NULL);
  return NULL;
}

static void test_many_threads(void **state) {
  fx *x = *state;
  enum { THREADS = 8 };
  pthread_t th[THREADS];
  worker_arg w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_arg){x->t, x->ctx, i, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_true(w[i].ok);
  }
  fx_clean(x);
}

/* ---- fidelity to the measured H200 driver (580.159.04, CUDA 13.0) ------------------------- */

typedef enum { RUN_SYNC_A_FIRST, RUN_SYNC_B_FIRST, RUN_CTX_SYNC, RUN_PROGRESS } run_how;

/* Allocates X on stream A, fills it on stream B, frees it on A. ordering: 0 no waits, 1 only B
 * waits for the allocation, 2 both directions waited for. Returns the violations counted. */
static uint64_t alloc_fill_free(t4a_fake_progress_order order, uint64_t seed, run_how how,
                                int ordering, CUresult *sticky) {
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  o.progress_order = order;
  o.progress_seed = seed;
  o.query_policy = T4A_FAKE_QUERY_NEVER;
  fx x;
  assert_int_equal(fx_open(&x, &o), 0);
  const t4a_driver_table *t = x.t;
  CUstream a = x.s, b;
  CK(t->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e1, e2;
  CK(t->cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  CK(t->cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr d;
  CK(t->cuMemAllocAsync(&d, 256, a));
  if (ordering >= 1) {
    CK(t->cuEventRecord(e1, a));
    CK(t->cuStreamWaitEvent(b, e1, 0));
  }
  CK(t->cuMemsetD8Async(d, 0x5A, 256, b));
  if (ordering >= 2) {
    CK(t->cuEventRecord(e2, b));
    CK(t->cuStreamWaitEvent(a, e2, 0));
  }
  CK(t->cuMemFreeAsync(d, a));
  switch (how) {
    case RUN_SYNC_A_FIRST:
      (void)t->cuStreamSynchronize(a);
      (void)t->cuStreamSynchronize(b);
      break;
    case RUN_SYNC_B_FIRST:
      (void)t->cuStreamSynchronize(b);
      (void)t->cuStreamSynchronize(a);
      break;
    case RUN_CTX_SYNC:
      (void)t->cuCtxSynchronize();
      break;
    case RUN_PROGRESS:
      t4a_fake_progress(x.fake);
      break;
  }
  /* (After a fault the context refuses further syncs: work may be left queued.) */
  *sticky = t4a_fake_sticky(x.fake, 0);
  uint64_t n = t4a_fake_ordering_violations(x.fake);
  t4a_fake_destroy(x.fake);
  return n;
}

/* The reviewer's demo: a missing cross-stream wait fails whichever stream runs first. */
static void test_missing_cross_stream_wait_fails_in_every_order(void **state) {
  (void)state;
  static const t4a_fake_progress_order orders[] = {
      T4A_FAKE_ORDER_CREATION, T4A_FAKE_ORDER_REVERSE, T4A_FAKE_ORDER_RANDOM};
  for (size_t oi = 0; oi < sizeof orders / sizeof orders[0]; oi++) {
    for (uint64_t seed = 1; seed <= (orders[oi] == T4A_FAKE_ORDER_RANDOM ? 8u : 1u); seed++) {
      for (int how = RUN_SYNC_A_FIRST; how <= RUN_PROGRESS; how++) {
        for (int ordering = 0; ordering <= 2; ordering++) {
          CUresult sticky;
          uint64_t n = alloc_fill_free(orders[oi], seed, (run_how)how, ordering, &sticky);
          if (ordering < 2) {
            if (n == 0 || sticky != CUDA_ERROR_ILLEGAL_ADDRESS) {
              fail_msg("order %d seed %llu run %d ordering %d: %llu violations, sticky %d",
                       (int)orders[oi], (unsigned long long)seed, how, ordering,
                       (unsigned long long)n, (int)sticky);
            }
          } else if (n != 0 || sticky != CUDA_SUCCESS) {
            fail_msg("order %d seed %llu run %d, fully ordered: %llu violations, sticky %d",
                     (int)orders[oi], (unsigned long long)seed, how, (unsigned long long)n,
                     (int)sticky);
          }
        }
      }
    }
  }
}

/* tag(int id): appends id to the log in user data. */
typedef struct tag_log {
  int v[32];
  int n;
} tag_log;

static const size_t k_tag_params[] = {4};

static void k_tag(t4a_fake_launch *l, void **params, void *user) {
  (void)l;
  tag_log *log = user;
  int id;
  memcpy(&id, params[0], 4);
  if (log->n < 32) log->v[log->n++] = id;
}

/* Launches tag(10 s + k) for k = 0, 1 on each of the fixture's stream and two more. */
static void tag_three_streams(fx *x, CUfunction f, CUstream s[3]) {
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++) {
      int id = 10 * (i + 1) + k;
      void *args[] = {&id};
      CK(launch1(x, f, s[i], args));
    }
  }
}

static void test_progress_order_option(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  tag_log log;
  memset(&log, 0, sizeof log);
  t4a_fake_register_kernel(x->fake, "tag", 1, k_tag_params, k_tag, &log);
  CUmodule m = load_kernels(x, (const char *const[]){"tag"}, 1);
  CUfunction f = get_fn(x, m, "tag");
  CUstream s[3] = {x->s, NULL, NULL};
  CK(t->cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
  CK(t->cuStreamCreate(&s[2], CU_STREAM_NON_BLOCKING));

  /* Creation order (the default; set anyway, T4A_FAKE_PROGRESS_ORDER may override the default):
   * each stream as far as it goes, oldest first. */
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_CREATION, 0);
  tag_three_streams(x, f, s);
  assert_int_equal(t4a_fake_progress(x->fake), 6);
  static const int creation[6] = {10, 11, 20, 21, 30, 31};
  assert_memory_equal(log.v, creation, sizeof creation);

  /* Reverse: newest first, for t4a_fake_progress and for a context sync alike. */
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_REVERSE, 0);
  log.n = 0;
  tag_three_streams(x, f, s);
  t4a_fake_progress(x->fake);
  static const int reverse[6] = {30, 31, 20, 21, 10, 11};
  assert_memory_equal(log.v, reverse, sizeof reverse);
  log.n = 0;
  tag_three_streams(x, f, s);
  CK(t->cuCtxSynchronize());
  assert_memory_equal(log.v, reverse, sizeof reverse);

  /* Random: single operations interleaved, each stream still in order; a seed repeats. */
  int first_run[6];
  int differs_from_creation = 0;
  for (uint64_t seed = 1; seed <= 16; seed++) {
    for (int round = 0; round < 2; round++) {
      t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_RANDOM, seed);
      log.n = 0;
      tag_three_streams(x, f, s);
      assert_int_equal(t4a_fake_progress(x->fake), 6);
      assert_int_equal(log.n, 6);
      for (int i = 0; i < 3; i++) {
        int at0 = -1, at1 = -1;
        for (int k = 0; k < 6; k++) {
          if (log.v[k] == 10 * (i + 1)) at0 = k;
          if (log.v[k] == 10 * (i + 1) + 1) at1 = k;
        }
        assert_true(at0 >= 0 && at1 > at0);
      }
      if (round == 0) {
        memcpy(first_run, log.v, sizeof first_run);
        differs_from_creation |= memcmp(log.v, creation, sizeof creation) != 0;
      } else {
        assert_memory_equal(log.v, first_run, sizeof first_run);
      }
    }
  }
  assert_true(differs_from_creation);
  t4a_fake_set_progress_order(x->fake, T4A_FAKE_ORDER_CREATION, 0);
  CK(t->cuStreamDestroy(s[1]));
  CK(t->cuStreamDestroy(s[2]));
  CK(t->cuModuleUnload(m));
  fx_clean(x);
}

static void test_stream_get_flags(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  /* In the catalogue at the version whose typedef exists (PFN_cuStreamGetFlags_v5050; the real
   * driver answers VERSION_NOT_SUFFICIENT for 2000). */
  int listed = 0;
  for (size_t i = 0; i < t4a_driver_entry_count; i++) {
    if (strcmp(t4a_driver_entries[i].name, "cuStreamGetFlags") != 0) continue;
    listed = 1;
    assert_int_equal(t4a_driver_entries[i].version, 5050);
    assert_false(t4a_driver_entries[i].required); /* no library code calls it yet */
  }
  assert_true(listed);
  unsigned fl = 99;
  CK(t->cuStreamGetFlags(x->s, &fl));
  assert_int_equal(fl, CU_STREAM_NON_BLOCKING);
  CUstream plain;
  CK(t->cuStreamCreateWithPriority(&plain, CU_STREAM_DEFAULT, -1));
  fl = 99;
  CK(t->cuStreamGetFlags(plain, &fl));
  assert_int_equal(fl, 0);
  fl = 99;
  CK(t->cuStreamGetFlags(NULL, &fl));
  assert_int_equal(fl, 0);
  CK(t->cuStreamGetFlags(CU_STREAM_PER_THREAD, &fl));
  assert_int_equal(fl, 0);
  assert_int_equal(t->cuStreamGetFlags(x->s, NULL), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuStreamDestroy(plain));
  assert_int_equal(t->cuStreamGetFlags(plain, &fl), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t4a_fake_calls(x->fake, "cuStreamGetFlags"), 6);
  fx_clean(x);
}

/* Host functions (cuLaunchHostFunc): in stream order, when progress reaches them, on a thread
 * that is not the caller's; every driver call from inside is refused (NOT_PERMITTED) without a
 * deadlock on the fake's lock; not run on a faulted stream. D16 fills need 2-byte alignment. */
typedef struct host_probe {
  const t4a_driver_table *t;
  pthread_t thread;
  unsigned char first; /* the filled byte seen by the function */
  const unsigned char *mem;
  CUresult inside;     /* a driver call made from the function */
  int runs;
} host_probe;

static void host_probe_fn(void *p) {
  host_probe *h = p;
  h->thread = pthread_self();
  h->first = h->mem[0];
  CUcontext c = NULL;
  h->inside = h->t->cuCtxGetCurrent(&c);
  h->runs++;
}

static void test_host_functions(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  CUdeviceptr d;
  CK(t->cuMemAlloc(&d, 64));
  host_probe h = {0};
  h.t = t;
  h.mem = t4a_fake_host_view(x->fake, d, 64);
  CK(t->cuMemsetD8Async(d, 0x3C, 64, x->s));
  CK(t->cuLaunchHostFunc(x->s, host_probe_fn, &h));
  assert_int_equal(h.runs, 0); /* queued */
  uint64_t refused = t4a_fake_host_fn_driver_calls();
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(h.runs, 1);
  assert_int_equal(h.first, 0x3C); /* after the fill */
  assert_false(pthread_equal(h.thread, pthread_self()));
  assert_int_equal(h.inside, CUDA_ERROR_NOT_PERMITTED);
  assert_int_equal(t4a_fake_host_fn_driver_calls(), refused + 1);
  assert_int_equal(t4a_fake_host_fns_run(x->fake), 1);
  assert_int_equal(t->cuLaunchHostFunc(x->s, NULL, &h), CUDA_ERROR_INVALID_VALUE);
  /* Without a current context (the fake's stricter enqueue rule). */
  CK(t->cuCtxSetCurrent(NULL));
  assert_int_equal(t->cuLaunchHostFunc(x->s, host_probe_fn, &h), CUDA_ERROR_INVALID_CONTEXT);
  CK(t->cuCtxSetCurrent(x->ctx));
  /* D16: 2-byte aligned, and the pattern. */
  assert_int_equal(t->cuMemsetD16Async(d + 1, 0xBEEF, 2, x->s), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuMemsetD16Async(d + 2, 0xBEEF, 2, x->s));
  CK(t->cuStreamSynchronize(x->s));
  assert_int_equal(h.mem[2], 0xEF);
  assert_int_equal(h.mem[3], 0xBE);
  assert_int_equal(h.mem[5], 0xBE);
  assert_int_equal(h.mem[6], 0x3C);
  CK(t->cuMemFree(d));
  fx_clean(x);
}

/* cuMemGetInfo needs a current context; elapsed time needs two completed timing records. */
static void test_mem_info_and_elapsed_rules(void **state) {
  fx *x = *state;
  const t4a_driver_table *t = x->t;
  t4a_fake_set_query_policy(x->fake, T4A_FAKE_QUERY_NEVER);
  size_t fr = 0, tot = 0;
  CK(t->cuMemGetInfo(&fr, &tot));
  assert_true(tot > 0 && fr <= tot);
  CK(t->cuCtxSetCurrent(NULL));
  assert_int_equal(t->cuMemGetInfo(&fr, &tot), CUDA_ERROR_INVALID_CONTEXT);
  CK(t->cuCtxSetCurrent(x->ctx));
  CUevent a, b, plain;
  CK(t->cuEventCreate(&a, 0));
  CK(t->cuEventCreate(&b, 0));
  CK(t->cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* unrecorded */
  CK(t->cuEventRecordWithFlags(a, x->s, CU_EVENT_RECORD_DEFAULT));
  CK(t->cuEventRecord(b, x->s));
  CK(t->cuEventRecord(plain, x->s));
  assert_int_equal(t->cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
  CK(t->cuStreamSynchronize(x->s));
  CK(t->cuEventElapsedTime(&ms, a, b));
  assert_true(ms > 0);
  assert_int_equal(t->cuEventElapsedTime(&ms, a, plain), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(t->cuEventRecordWithFlags(a, x->s, 0x80), CUDA_ERROR_INVALID_VALUE);
  CK(t->cuEventDestroy(a));
  CK(t->cuEventDestroy(b));
  CK(t->cuEventDestroy(plain));
  fx_clean(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
cmocka_unit_test(test_foreign_event_observations),
cmocka_unit_test_setup_teardown(test_copies_run_in_stream_order_at_run_time, setup,
                                      teardown),
cmocka_unit_test_setup_teardown(test_cross_stream_event_wait, setup, teardown),
cmocka_unit_test(test_cross_device_wait_and_pool_access),
cmocka_unit_test_setup_teardown(test_stream_destroy_lets_work_finish, setup, teardown),
cmocka_unit_test_setup_teardown(test_event_timing_and_stream_attributes, setup, teardown),
cmocka_unit_test_setup_teardown(test_wait_cycles_are_reported, setup, teardown),
cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
cmocka_unit_test(test_missing_cross_stream_wait_fails_in_every_order),
cmocka_unit_test_setup_teardown(test_progress_order_option, setup, teardown),
cmocka_unit_test_setup_teardown(test_stream_get_flags, setup, teardown),
cmocka_unit_test_setup_teardown(test_host_functions, setup, teardown),
cmocka_unit_test_setup_teardown(test_mem_info_and_elapsed_rules, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
