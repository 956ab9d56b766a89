/* Streams of a runtime (issue 22 items 1 and 2; design §4, §6, §16), on the fake driver: priority
 * range and refusals; objects shared across the streams; explicit ordering (t4a_stream_wait);
 * automatic cross-stream lifetimes — a buffer released while a kernel on stream 2 still reads it,
 * its block then reused on stream 1, must never overlap (the fake's per-block race detection),
 * and the same run with the driver's stream waits dropped must be caught; the events recorded
 * per cross-stream release (the stated bound, asserted with the counters); a stream of another
 * runtime (FOREIGN_HANDLE, nothing enqueued); raw scopes, descriptor fires, graph captures and a
 * launch chain on a stream; teardown with streams left; a failure sweep over a whole use of streams. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/runtime_fixture.h"
#include "testing/sweep/sweep.h"

#define CK(x) assert_int_equal((x), T4A_OK)

enum { N = 256 };

typedef t4a_fixture fixture;

static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.stacks = 0;
  o.kernels[0] = &t4a_hk_axpb;
  return t4a_fixture_setup(state, &o);
}

/* The ordering broken once: the driver's cuStreamWaitEvent enqueues nothing (and says it did)
 * while `g_drop_waits` is set, so every order between streams t4a makes is missing. */
static PFN_cuStreamWaitEvent_v3020 g_real_wait;
static int g_drop_waits;
static CUresult dropping_wait(CUstream s, CUevent e, unsigned int flags) {
  if (g_drop_waits) return CUDA_SUCCESS;
  return g_real_wait(s, e, flags);
}
static void wrap_waits(t4a_driver_table *t) {
  g_real_wait = t->cuStreamWaitEvent;
  t->cuStreamWaitEvent = dropping_wait;
}
static int setup_dropping(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.stacks = 0;
  o.kernels[0] = &t4a_hk_axpb;
  o.wrap_table = wrap_waits;
  o.wrapped_name = "fake (cuStreamWaitEvent can drop its wait)";
  g_drop_waits = 0;
  return t4a_fixture_setup(state, &o);
}

static int teardown(void **state) { return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT); }

static t4a_runtime_options small_options(fixture *f) { return t4a_fixture_runtime_options(f->drv); }
static t4a_runtime *open_rt(fixture *f) { return t4a_fixture_open_runtime(f->drv, 0); }

/* axpb(in, out, n, a, b) from a fake image (the fake runs the host kernel). */
static t4a_function *load_axpb(t4a_runtime *rt) {
  char img[256];
  const char *names[] = {"axpb"};
  size_t n = t4a_fake_image(img, sizeof img, names, 1);
  t4a_module *m = NULL;
  CK(t4a_module_load(t4a_runtime_module_cache(rt), img, n, T4A_IMAGE_PTX, &m));
  t4a_function *fn = NULL;
  CK(t4a_runtime_function(rt, m, "axpb", &fn));
  t4a_module_release(m);
  return fn;
}

static t4a_status axpb_on(t4a_runtime *rt, t4a_stream *s, t4a_function *fn, t4a_buffer *in,
                          t4a_buffer *out, int a, int b) {
  int n = N;
  t4a_arg args[5] = {t4a_arg_buffer(in, 0), t4a_arg_buffer(out, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  return t4a_runtime_launch_on(rt, s, fn, 1, N, args, 5);
}

static t4a_buffer *ints(t4a_runtime *rt, int base) {
  int v[N];
  for (int i = 0; i < N; i++) v[i] = base + i;
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, sizeof v, &b));
  CK(t4a_runtime_upload(rt, b, 0, v, sizeof v));
  return b;
}

static void expect_ints(t4a_runtime *rt, t4a_stream *s, t4a_buffer *b, int a, int base) {
  int v[N];
  CK(t4a_runtime_download_on(rt, s, b, 0, v, sizeof v));
  for (int i = 0; i < N; i++) assert_int_equal(v[i], a * i + base);
}

static uint64_t counter(t4a_lane *lane, size_t offset) {
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  uint64_t x;
  memcpy(&x, (const char *)&v + offset, sizeof x);
  return x;
}
#define LANE_COUNT(lane, name) counter((lane), offsetof(t4a_counter_values, name))

/* ---- priorities ---- */

static void test_priority_range_and_refusals(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  int least = 7, greatest = 7;
  CK(t4a_runtime_priority_range(rt, &least, &greatest));
  assert_int_equal(least, 0);
  assert_int_equal(greatest, -5); /* the fake answers as the H200 does */
  t4a_stream_options o = T4A_STREAM_OPTIONS_INIT;
  o.priority = -3;
  t4a_stream *s = NULL;
  CK(t4a_stream_create(rt, &o, &s));
  int p = 0;
  assert_true(t4a_fake_stream_priority(f->fake, t4a_lane_stream(t4a_stream_lane(s)), &p));
  assert_int_equal(p, -3);
  assert_int_equal(t4a_lane_priority(t4a_stream_lane(s)), -3);
  /* Out of range either way: refused before any stream is made. */
  t4a_fake_live before, after;
  t4a_fake_live_objects(f->fake, &before);
  const int bad[] = {1, -6, 100, -1000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.priority = bad[i];
    t4a_stream *x = (t4a_stream *)1;
    assert_int_equal(t4a_stream_create(rt, &o, &x), T4A_INVALID_ARGUMENT);
    assert_null(x);
    t4a_error e;
    t4a_error_last(&e);
    assert_non_null(strstr(e.message, "outside device 0's range"));
  }
  t4a_fake_live_objects(f->fake, &after);
  assert_int_equal(after.streams, before.streams);
  /* The same check for a runtime's (and a lane's) own stream. */
  t4a_runtime_options ro = small_options(f);
  ro.lane.priority = 2;
  t4a_runtime *bad_rt = (t4a_runtime *)1;
  assert_int_equal(t4a_runtime_open(0, &ro, &bad_rt), T4A_INVALID_ARGUMENT);
  assert_null(bad_rt);
  ro.lane.priority = -5;
  t4a_runtime *urgent = NULL;
  CK(t4a_runtime_open(0, &ro, &urgent));
  CK(t4a_runtime_close(urgent));
  /* At most T4A_LANE_MAX_STREAMS streams in a domain, the runtime's own included. */
  t4a_stream *many[T4A_LANE_MAX_STREAMS];
  int made = 0;
  for (; made < T4A_LANE_MAX_STREAMS - 2; made++) CK(t4a_stream_create(rt, NULL, &many[made]));
  t4a_stream *over = NULL;
  assert_int_equal(t4a_stream_create(rt, NULL, &over), T4A_LIMIT_EXCEEDED);
  /* A slot freed is taken again. */
  CK(t4a_stream_destroy(rt, many[0]));
  CK(t4a_stream_create(rt, NULL, &many[0]));
  t4a_counter_values dv;
  t4a_driver_stats(f->drv, &dv);
  assert_int_equal(dv.streams_sibling, T4A_LANE_MAX_STREAMS);
  for (int i = 0; i < made; i++) CK(t4a_stream_destroy(rt, many[i]));
  CK(t4a_stream_destroy(rt, s));
  CK(t4a_runtime_close(rt));
}

/* ---- objects shared, explicit order ---- */

/* Buffers, functions and descriptors of the runtime are used on its streams as they are; a
 * kernel on stream 2 reads an upload of stream 1 after t4a_stream_wait; results in order, no
 * host wait until the downloads. */
static void test_shared_objects_and_explicit_wait(void **state) {
  fixture *f = *state;
  t4a_fake_set_query_policy(f->fake, T4A_FAKE_QUERY_NEVER);
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL, *s3 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  CK(t4a_stream_create(rt, NULL, &s3));
  t4a_buffer *x = ints(rt, 0), *y = NULL, *z = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &y));
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &z));
  uint64_t waits0 = LANE_COUNT(t4a_runtime_lane(rt), host_waits);
  CK(t4a_stream_wait(rt, s2, NULL)); /* s2 after the upload */
  CK(axpb_on(rt, s2, fn, x, y, 3, 1));
  /* A descriptor of the runtime's table fired on s3 after s2's kernel. */
  CK(t4a_stream_wait(rt, s3, s2));
  int n = N, a = 2, b = 5;
  t4a_arg args[5] = {t4a_arg_buffer(y, 0), t4a_arg_buffer(z, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0};
  uint32_t id = 0;
  CK(t4a_descriptor_register(t4a_runtime_table(rt), fn, &cfg, args, 5, &id));
  CK(t4a_runtime_fire_on(rt, s3, id));
  assert_int_equal(LANE_COUNT(t4a_runtime_lane(rt), host_waits), waits0);
  assert_int_equal(t4a_fake_pending(f->fake, NULL) > 0, 1); /* nothing ran yet */
  /* The caller's references go at once: the marks order the blocks' reuse and frees. */
  t4a_buffer_release(x);
  expect_ints(rt, s3, z, 6, 7); /* 2 * (3i + 1) + 5 */
  expect_ints(rt, s2, y, 3, 1);
  assert_int_equal(LANE_COUNT(t4a_stream_lane(s2), cross_stream_waits) >= 1, 1);
  CK(t4a_descriptor_unregister(t4a_runtime_table(rt), id));
  t4a_buffer_release(y);
  t4a_buffer_release(z);
  t4a_function_release(fn);
  CK(t4a_stream_destroy(rt, s2));
  CK(t4a_stream_destroy(rt, s3));
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* ---- the scenario: release while stream 2 reads, reuse on stream 1 ---- */

/* Returns the fake's ordering violations seen by the scenario. x (read by a kernel on s2 that
 * has not run) is released; the next buffer of its size gets x's block from the reuse cache and
 * stream 1 overwrites it at once. The kernel must read x's old values, the new buffer keep the
 * new ones. */
static uint64_t release_then_reuse(fixture *f, int check_results) {
  t4a_fake_set_query_policy(f->fake, T4A_FAKE_QUERY_NEVER);
  uint64_t v0 = t4a_fake_ordering_violations(f->fake);
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_buffer *x = ints(rt, 0), *out = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &out));
  /* Stream 1's epoch lets x go (its own uses are kept until observed): the user's release below
   * is then x's last. Stream 2 has run nothing. */
  CK(t4a_runtime_sync(rt));
  CK(t4a_stream_wait(rt, s2, NULL));
  CK(axpb_on(rt, s2, fn, x, out, 2, 1)); /* queued on s2, not run */
  assert_true(t4a_fake_pending(f->fake, t4a_lane_stream(t4a_stream_lane(s2))) > 0);
  t4a_devptr old = t4a_buffer_devptr(x);
  t4a_buffer_release(x); /* the user's last reference, the kernel still to read it */
  t4a_buffer *y = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &y));
  assert_true(t4a_buffer_devptr(y) == old); /* the same block, from the reuse cache */
  int v[N];
  for (int i = 0; i < N; i++) v[i] = 1000 + i;
  CK(t4a_runtime_upload(rt, y, 0, v, sizeof v)); /* stream 1 writes the block */
  t4a_counter_values mv;
  t4a_lane_stats(t4a_runtime_lane(rt), &mv);
  assert_int_equal(mv.cross_stream_releases, 1);
  assert_true(mv.reuse_hits >= 1);
  assert_int_equal(mv.host_waits, 1); /* the sync above only */
  if (check_results) {
    expect_ints(rt, s2, out, 2, 1); /* what x held: the old values */
    expect_ints(rt, NULL, y, 1, 1000);
  } else {
    (void)t4a_fake_progress(f->fake);
  }
  t4a_buffer_release(y);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  t4a_error saved;
  t4a_error_last(&saved);
  (void)t4a_stream_destroy(rt, s2);
  (void)t4a_runtime_close(rt);
  t4a_error_restore(&saved);
  return t4a_fake_ordering_violations(f->fake) - v0;
}

static void test_release_while_another_stream_reads(void **state) {
  assert_int_equal(release_then_reuse(*state, 1), 0);
}

/* The same run with every stream wait t4a enqueues dropped by the driver: the fake sees stream
 * 1's write of the reused block race stream 2's read (in every progress order). So the test
 * above fails if t4a's ordering goes. */
static void test_dropped_waits_are_seen(void **state) {
  g_drop_waits = 1;
  uint64_t seen = release_then_reuse(*state, 0);
  g_drop_waits = 0;
  assert_true(seen >= 1);
}

/* Without t4a_stream_wait a kernel on stream 2 reading an upload of stream 1 is a race the fake
 * reports (ordering between streams is the caller's, explicitly). */
static void test_missing_explicit_wait_is_seen(void **state) {
  fixture *f = *state;
  t4a_fake_set_query_policy(f->fake, T4A_FAKE_QUERY_NEVER);
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_buffer *x = NULL, *out = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &x));
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &out));
  CK(axpb_on(rt, s2, fn, x, out, 1, 0)); /* orders s2 after x's allocation only */
  int v[N] = {0};
  CK(t4a_runtime_upload(rt, x, 0, v, sizeof v)); /* stream 1 writes what s2 reads: no order */
  (void)t4a_fake_progress(f->fake);
  assert_true(t4a_fake_ordering_violations(f->fake) >= 1);
  t4a_buffer_release(x);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  (void)t4a_stream_destroy(rt, s2);
  (void)t4a_runtime_close(rt);
}

/* ---- the bound on events per cross-stream release ---- */

/* Stated bound (design §6): a release records no event; the block's next reuse or free on the
 * pool's stream records at most one marker on each other stream it was used on — none when that
 * stream's latest marker already covers the use — and waits at most once per marker; a first
 * use on another stream likewise records at most one marker on the pool's stream for every
 * allocation made before it. So a batch of K buffers used on stream 2 and released costs 2
 * events and 2 waits whatever K, and alternating (allocate, use on stream 2, release) at most 2
 * events per release. */
static void test_events_per_cross_stream_release(void **state) {
  fixture *f = *state;
  t4a_fake_set_query_policy(f->fake, T4A_FAKE_QUERY_NEVER);
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_lane *l1 = t4a_runtime_lane(rt), *l2 = t4a_stream_lane(s2);
  enum { K = 64 };
  t4a_buffer *b[K];
  for (int i = 0; i < K; i++) CK(t4a_runtime_buffer(rt, N * sizeof(int), &b[i]));
  uint64_t e0 = LANE_COUNT(l1, cross_stream_events) + LANE_COUNT(l2, cross_stream_events);
  uint64_t w0 = LANE_COUNT(l1, cross_stream_waits) + LANE_COUNT(l2, cross_stream_waits);
  uint64_t r0 = LANE_COUNT(l1, events_recorded) + LANE_COUNT(l2, events_recorded);
  for (int i = 0; i < K; i++) CK(axpb_on(rt, s2, fn, b[i], b[i], 1, 1));
  for (int i = 0; i < K; i++) t4a_buffer_release(b[i]);
  for (int i = 0; i < K; i++) CK(t4a_runtime_buffer(rt, N * sizeof(int), &b[i]));
  uint64_t events =
      LANE_COUNT(l1, cross_stream_events) + LANE_COUNT(l2, cross_stream_events) - e0;
  uint64_t waits = LANE_COUNT(l1, cross_stream_waits) + LANE_COUNT(l2, cross_stream_waits) - w0;
  assert_int_equal(LANE_COUNT(l1, cross_stream_releases), K);
  assert_int_equal(events, 2); /* one on each stream for K releases */
  assert_int_equal(waits, 2);
  /* Counted among the events recorded too; the launches' epochs record none (K < 512). */
  assert_int_equal(LANE_COUNT(l1, events_recorded) + LANE_COUNT(l2, events_recorded) - r0, 2);
  assert_int_equal(LANE_COUNT(l1, host_waits) + LANE_COUNT(l2, host_waits), 0);
  for (int i = 0; i < K; i++) t4a_buffer_release(b[i]);
  /* Alternating: at most two events per release. */
  e0 = LANE_COUNT(l1, cross_stream_events) + LANE_COUNT(l2, cross_stream_events);
  uint64_t rel0 = LANE_COUNT(l1, cross_stream_releases);
  enum { R = 20 };
  for (int i = 0; i < R; i++) {
    t4a_buffer *x = NULL;
    CK(t4a_runtime_buffer(rt, N * sizeof(int), &x));
    CK(axpb_on(rt, s2, fn, x, x, 1, 1));
    t4a_buffer_release(x);
  }
  events = LANE_COUNT(l1, cross_stream_events) + LANE_COUNT(l2, cross_stream_events) - e0;
  assert_int_equal(LANE_COUNT(l1, cross_stream_releases) - rel0, R);
  assert_true(events <= 2 * R);
  assert_true(events >= R); /* each reuse follows a newer use: not amortisable */
  t4a_function_release(fn);
  CK(t4a_stream_destroy(rt, s2));
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* ---- bad input ---- */

static void test_stream_of_another_runtime(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f), *other = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *theirs = NULL, *mine = NULL;
  CK(t4a_stream_create(other, NULL, &theirs));
  CK(t4a_stream_create(rt, NULL, &mine));
  t4a_buffer *x = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &x));
  int v[N] = {0};
  CK(t4a_runtime_sync(rt));
  uint64_t calls = t4a_fake_calls(f->fake, NULL);
  assert_int_equal(axpb_on(rt, theirs, fn, x, x, 1, 1), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_upload_on(rt, theirs, x, 0, v, sizeof v), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_download_on(rt, theirs, x, 0, v, sizeof v), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_copy_on(rt, theirs, x, 0, x, 0, 16), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_runtime_fire_on(rt, theirs, 1), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_stream_wait(rt, theirs, NULL), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_stream_wait(rt, mine, theirs), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_stream_sync(rt, theirs), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_stream_destroy(rt, theirs), T4A_FOREIGN_HANDLE);
  t4a_xfer *xf = (t4a_xfer *)1;
  assert_int_equal(t4a_stream_xfer(rt, theirs, &xf), T4A_FOREIGN_HANDLE);
  assert_null(xf);
  t4a_error e;
  assert_int_equal(axpb_on(rt, theirs, fn, x, x, 1, 1), T4A_FOREIGN_HANDLE);
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "another runtime"));
  /* Below the facade: a buffer of this runtime on the other's stream is another domain's. */
  t4a_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0};
  int n = N, a = 1, b = 0;
  t4a_arg args[5] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(x, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  assert_int_equal(t4a_launch(t4a_stream_retire(theirs), fn, &cfg, args, 5), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_descriptor_fire_on(t4a_runtime_table(rt), t4a_stream_retire(theirs), 1),
                   T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_fake_calls(f->fake, NULL), calls); /* nothing enqueued, nothing asked */
  /* NULL runtime; NULL out. */
  assert_int_equal(t4a_stream_create(NULL, NULL, &mine), T4A_INVALID_ARGUMENT);
  assert_null(mine);
  assert_int_equal(t4a_stream_create(rt, NULL, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_stream_wait(NULL, NULL, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_lane_create_sibling(NULL, NULL, NULL), T4A_INVALID_ARGUMENT);
  int l = 0, g = 0;
  assert_int_equal(t4a_runtime_priority_range(NULL, &l, &g), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_priority_range(rt, NULL, &g), T4A_INVALID_ARGUMENT);
  t4a_buffer_release(x);
  t4a_function_release(fn);
  CK(t4a_runtime_close(other)); /* destroys `theirs` */
  CK(t4a_runtime_close(rt));    /* destroys the stream made again above, none here */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* ---- the lower paths on a stream ---- */

typedef struct raw_job {
  t4a_runtime *rt;
  t4a_buffer *buf;
  t4a_stream *stream;
  int seen_stream;
} raw_job;

static t4a_status raw_fill(t4a_raw_scope *scope, void *user) {
  raw_job *j = user;
  /* From inside the stream's scope neither the stream nor the runtime may go. */
  if (t4a_stream_destroy(j->rt, j->stream) != T4A_REENTRY) return T4A_INTERNAL;
  if (t4a_runtime_close(j->rt) != T4A_REENTRY) return T4A_INTERNAL;
  t4a_devptr p = 0;
  t4a_status st = t4a_raw_devptr(scope, j->buf, T4A_RAW_WRITE, &p);
  if (st != T4A_OK) return st;
  void *stream = t4a_raw_stream(scope);
  j->seen_stream = stream == (void *)t4a_lane_stream(t4a_stream_lane(j->stream));
  return T4A_OK;
}

/* A raw scope, a graph captured and launched, a copy, pinned transfers and a raw-bytes launch on
 * a stream: each on the stream's own CUstream; buffers of the runtime ordered as everywhere (a
 * raw-bytes launch keeps no buffer: its addresses are the caller's, here kept by `w`). */
static void test_raw_graph_and_copy_on_a_stream(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_buffer *x = ints(rt, 10), *y = NULL, *z = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &y));
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &z));
  CK(t4a_stream_wait(rt, s2, NULL));
  raw_job j = {rt, x, s2, 0};
  t4a_raw_binding bind = {x, T4A_RAW_WRITE};
  CK(t4a_raw_run(t4a_stream_retire(s2), &bind, 1, raw_fill, &j));
  assert_int_equal(j.seen_stream, 1);
  /* A copy on s2, then a graph of one kernel captured on s2 and launched twice. The buffers
   * were used on s2 before the capture (their order is recorded outside it). */
  CK(t4a_runtime_copy_on(rt, s2, y, 0, x, 0, N * sizeof(int)));
  CK(axpb_on(rt, s2, fn, y, z, 1, 0));
  t4a_graph *g = NULL;
  CK(t4a_graph_capture_begin(t4a_stream_retire(s2)));
  int n = N, a = 2, b = 0;
  t4a_arg args[5] = {t4a_arg_buffer(y, 0), t4a_arg_buffer(y, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0};
  CK(t4a_launch(t4a_stream_retire(s2), fn, &cfg, args, 5));
  CK(t4a_graph_capture_end(t4a_stream_retire(s2), &g));
  CK(t4a_graph_launch(g));
  CK(t4a_graph_launch(g));
  expect_ints(rt, s2, y, 4, 40); /* 4 * (10 + i) */
  expect_ints(rt, s2, z, 1, 10);
  /* Pinned transfers through the stream's ring, and a raw-bytes launch, on s2 too. */
  t4a_xfer *x2 = NULL;
  CK(t4a_stream_xfer(rt, s2, &x2));
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(t4a_runtime_lane(rt)), N * sizeof(int), 0, &pin));
  int *ph = t4a_pinned_host(pin);
  for (int i = 0; i < N; i++) ph[i] = 5 * i;
  t4a_buffer *w = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &w));
  CK(t4a_xfer_upload_pinned(x2, w, 0, pin, 0, N * sizeof(int)));
  struct {
    uint64_t in, out;
    int n, a, b;
  } packed = {t4a_buffer_devptr(w), t4a_buffer_devptr(w), N, 1, 1};
  const uint32_t offs[5] = {0, 8, 16, 20, 24};
  CK(t4a_launch_raw(t4a_stream_retire(s2), fn, &cfg, &packed, 28, offs, 5)); /* w += 1 */
  t4a_xfer_pending *pd = NULL;
  CK(t4a_xfer_download_pinned(x2, w, 0, pin, 0, N * sizeof(int), &pd));
  CK(t4a_xfer_pending_wait(pd));
  t4a_xfer_pending_release(pd);
  for (int i = 0; i < N; i++) assert_int_equal(ph[i], 5 * i + 1);
  t4a_buffer_release(w);
  t4a_pinned_release(pin);
  /* A buffer whose first use on s2 would need an order inside a capture is refused. */
  t4a_buffer *fresh = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &fresh));
  CK(t4a_graph_capture_begin(t4a_stream_retire(s2)));
  args[0] = t4a_arg_buffer(fresh, 0);
  args[1] = t4a_arg_buffer(fresh, 0);
  assert_int_equal(t4a_launch(t4a_stream_retire(s2), fn, &cfg, args, 5), T4A_UNSUPPORTED);
  t4a_graph *g2 = NULL;
  CK(t4a_graph_capture_end(t4a_stream_retire(s2), &g2));
  t4a_graph_release(g2);
  t4a_graph_release(g);
  t4a_buffer_release(fresh);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_buffer_release(z);
  t4a_function_release(fn);
  /* Left to the runtime's close. */
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* A launch chain on a stream: a descriptor table made on the stream's retire (the runtime's
 * functions and buffers are the stream's), recorded once and replayed there, with a rebind seen
 * by the next replay. */
static void test_chain_on_a_stream(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_buffer *x = ints(rt, 1), *y = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &y));
  CK(t4a_stream_wait(rt, s2, NULL));
  t4a_launch_table *table = NULL;
  CK(t4a_launch_table_create(t4a_stream_retire(s2), NULL, &table));
  int n = N, a = 2, b = 3;
  t4a_arg args[5] = {t4a_arg_buffer(x, 0), t4a_arg_buffer(y, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0};
  uint32_t id = 0;
  CK(t4a_descriptor_register(table, fn, &cfg, args, 5, &id));
  CK(t4a_chain_begin(table));
  CK(t4a_descriptor_fire(table, id));
  t4a_chain *chain = NULL;
  CK(t4a_chain_end(table, &chain));
  CK(t4a_chain_replay(table, chain));
  expect_ints(rt, s2, y, 2, 5); /* 2 * (1 + i) + 3 */
  int b2 = 10;
  t4a_arg nb = t4a_arg_scalar(&b2, 4);
  CK(t4a_descriptor_rebind(table, id, 4, &nb));
  CK(t4a_chain_replay(table, chain));
  expect_ints(rt, s2, y, 2, 12);
  /* A table on stream 2 fires on the runtime's own stream, made before it: the lock order forbids
   * it (holding the table while entering an earlier retire would deadlock against a raw scope on
   * that retire firing the table), refused with nothing enqueued. */
  t4a_counter_values v0, v1;
  t4a_runtime_stats(rt, &v0);
  assert_int_equal(t4a_descriptor_fire_on(table, t4a_runtime_retire(rt), id), T4A_INVALID_ARGUMENT);
  t4a_runtime_stats(rt, &v1);
  assert_int_equal(v1.admissions, v0.admissions);
  assert_int_equal(v1.launches, v0.launches);
  t4a_chain_destroy(chain);
  CK(t4a_descriptor_unregister(table, id));
  t4a_launch_table_destroy(table);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_function_release(fn);
  CK(t4a_stream_destroy(rt, s2));
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* Destroying a stream with work queued proves its drain; its blocks' marks then need nothing. */
static void test_destroy_with_work_queued(void **state) {
  fixture *f = *state;
  t4a_fake_set_query_policy(f->fake, T4A_FAKE_QUERY_NEVER);
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_stream *s2 = NULL;
  CK(t4a_stream_create(rt, NULL, &s2));
  t4a_buffer *x = ints(rt, 0), *y = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &y));
  CK(t4a_stream_wait(rt, s2, NULL));
  CK(axpb_on(rt, s2, fn, x, y, 5, 5));
  t4a_buffer_release(x);
  CK(t4a_stream_destroy(rt, s2)); /* waits for the kernel (and what it waited for) */
  t4a_buffer *z = NULL;
  CK(t4a_runtime_buffer(rt, N * sizeof(int), &z)); /* x's block: nothing more to wait for */
  int v[N];
  for (int i = 0; i < N; i++) v[i] = -i;
  CK(t4a_runtime_upload(rt, z, 0, v, sizeof v));
  expect_ints(rt, NULL, y, 5, 5);
  expect_ints(rt, NULL, z, -1, 0);
  t4a_buffer_release(y);
  t4a_buffer_release(z);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* ---- threads ---- */

typedef struct worker {
  t4a_runtime *rt;
  t4a_stream *stream; /* NULL: the runtime's own */
  t4a_function *fn;
  t4a_buffer *shared; /* read by every worker */
  int base, failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int it = 0; it < 200 && w->failures == 0; it++) {
    int v[N], back[N];
    for (int i = 0; i < N; i++) v[i] = w->base + it + i;
    t4a_buffer *in = NULL, *out = NULL;
    t4a_status st = t4a_runtime_buffer(w->rt, sizeof v, &in);
    if (st == T4A_OK) st = t4a_runtime_buffer(w->rt, sizeof v, &out);
    if (st == T4A_OK) st = t4a_runtime_upload_on(w->rt, w->stream, in, 0, v, sizeof v);
    if (st == T4A_OK) st = axpb_on(w->rt, w->stream, w->fn, in, out, 3, 0);
    t4a_buffer_release(in); /* its block may go to another thread's stream next */
    t4a_buffer *sh = NULL;
    if (st == T4A_OK) st = t4a_runtime_buffer(w->rt, sizeof v, &sh);
    if (st == T4A_OK) st = axpb_on(w->rt, w->stream, w->fn, w->shared, sh, 1, 0);
    if (st == T4A_OK) st = t4a_runtime_download_on(w->rt, w->stream, out, 0, back, sizeof back);
    for (int i = 0; st == T4A_OK && i < N; i++) {
      if (back[i] != 3 * v[i]) w->failures++;
    }
    if (st == T4A_OK) st = t4a_runtime_download_on(w->rt, w->stream, sh, 0, back, sizeof back);
    for (int i = 0; st == T4A_OK && i < N; i++) {
      if (back[i] != 7 + i) w->failures++;
    }
    if (st != T4A_OK) w->failures++;
    t4a_buffer_release(out);
    t4a_buffer_release(sh);
  }
  return NULL;
}

/* Four threads, each on its own stream (one on the runtime's), allocating, uploading, launching,
 * releasing and reusing blocks of one pool and reading one shared buffer at once: every result
 * right, no ordering violation (in every progress order the suite reruns). */
static void test_threads_on_streams(void **state) {
  fixture *f = *state;
  t4a_runtime *rt = open_rt(f);
  t4a_function *fn = load_axpb(rt);
  t4a_buffer *shared = ints(rt, 7);
  CK(t4a_runtime_sync(rt));
  enum { T = 4 };
  worker w[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    w[i] = (worker){rt, NULL, fn, shared, 1000 * i, 0};
    if (i > 0) CK(t4a_stream_create(rt, NULL, &w[i].stream));
    CK(t4a_stream_wait(rt, w[i].stream, NULL)); /* each stream after the shared upload */
  }
  for (int i = 0; i < T; i++) assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
  for (int i = 0; i < T; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < T; i++) assert_int_equal(w[i].failures, 0);
  t4a_counter_values v;
  t4a_lane_stats(t4a_runtime_lane(rt), &v);
  assert_true(v.cross_stream_releases > 0);
  t4a_buffer_release(shared);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt)); /* destroys the three streams */
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* ---- failure sweep ---- */

typedef struct sweep_ctx {
  fixture *f;
  t4a_runtime_options options;
  uint64_t lane_leaked;
} sweep_ctx;

static void add_leaks(sweep_ctx *c, t4a_lane *lane) {
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  c->lane_leaked += v.leaked + v.buffers_leaked;
}

static t4a_status use(t4a_runtime *rt, t4a_lane **keep) {
  int v[N], back[N];
  for (int i = 0; i < N; i++) v[i] = i;
  t4a_stream *s2 = NULL;
  t4a_buffer *x = NULL, *y = NULL, *z = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  char img[256];
  const char *names[] = {"axpb"};
  size_t bytes = t4a_fake_image(img, sizeof img, names, 1);
  t4a_stream_options so = T4A_STREAM_OPTIONS_INIT;
  so.priority = -1;
  t4a_status st = t4a_stream_create(rt, &so, &s2);
  if (st == T4A_OK) {
    *keep = t4a_stream_lane(s2);
    t4a_lane_retain(*keep);
  }
  if (st == T4A_OK) st = t4a_module_load(t4a_runtime_module_cache(rt), img, bytes, T4A_IMAGE_PTX, &m);
  if (st == T4A_OK) st = t4a_runtime_function(rt, m, "axpb", &fn);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof v, &x);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof v, &y);
  if (st == T4A_OK) st = t4a_runtime_upload_on(rt, s2, x, 0, v, sizeof v);
  if (st == T4A_OK) st = axpb_on(rt, s2, fn, x, y, 3, 0);
  if (st == T4A_OK) st = t4a_stream_wait(rt, NULL, s2);
  /* A descriptor of the runtime's table fired on s2, at both levels. */
  uint32_t id = 0;
  int n = N, a = 1, b = 0;
  t4a_arg args[5] = {t4a_arg_buffer(y, 0), t4a_arg_buffer(y, 0), t4a_arg_scalar(&n, 4),
                     t4a_arg_scalar(&a, 4), t4a_arg_scalar(&b, 4)};
  t4a_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0};
  if (st == T4A_OK) st = t4a_descriptor_register(t4a_runtime_table(rt), fn, &cfg, args, 5, &id);
  if (st == T4A_OK) st = t4a_runtime_fire_on(rt, s2, id);
  if (st == T4A_OK) {
    st = t4a_descriptor_fire_on(t4a_runtime_table(rt), t4a_stream_retire(s2), id);
  }
  if (id != 0) {
    t4a_status un = t4a_descriptor_unregister(t4a_runtime_table(rt), id);
    if (st == T4A_OK) st = un;
  }
  if (st == T4A_OK) st = t4a_stream_wait(rt, NULL, s2);
  if (st == T4A_OK) st = t4a_stream_sync(rt, s2);
  t4a_xfer *xf = NULL;
  if (st == T4A_OK) st = t4a_stream_xfer(rt, s2, &xf);
  int least = 0, greatest = 0;
  if (st == T4A_OK) st = t4a_runtime_priority_range(rt, &least, &greatest);
  /* The lower level: a lane beside the runtime's, at the most urgent priority. */
  t4a_lane *sib = NULL;
  t4a_lane_options lo = T4A_LANE_OPTIONS_INIT;
  lo.priority = greatest;
  if (st == T4A_OK) st = t4a_lane_create_sibling(t4a_runtime_lane(rt), &lo, &sib);
  if (st == T4A_OK) st = t4a_lane_priority_range(sib, &least, &greatest);
  t4a_lane_release(sib);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof v, &z);
  if (st == T4A_OK) st = t4a_runtime_copy_on(rt, NULL, z, 0, y, 0, sizeof v);
  t4a_buffer_release(x);
  x = NULL;
  if (st == T4A_OK) st = t4a_runtime_download_on(rt, s2, z, 0, back, sizeof back);
  if (st == T4A_OK) {
    for (int i = 0; i < N; i++) {
      if (back[i] != 3 * i) st = t4a_error_set_(T4A_INTERNAL, NULL, 0, NULL, 0, "wrong");
    }
  }
  if (s2 != NULL) {
    t4a_status d = t4a_stream_destroy(rt, s2);
    if (st == T4A_OK) st = d;
  }
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_buffer_release(y);
  t4a_buffer_release(z);
  return st;
}

static t4a_status run_once(sweep_ctx *c) {
  t4a_runtime *rt = NULL;
  t4a_status st = t4a_runtime_open(0, &c->options, &rt);
  if (st != T4A_OK) return st;
  t4a_lane *lane = t4a_runtime_lane(rt), *s2 = NULL;
  t4a_lane_retain(lane);
  st = use(rt, &s2);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_status closed = t4a_runtime_close(rt);
  if (st == T4A_OK) {
    st = closed;
  } else {
    t4a_error_restore(&saved);
  }
  add_leaks(c, lane);
  t4a_lane_release(lane);
  if (s2 != NULL) {
    add_leaks(c, s2);
    t4a_lane_release(s2);
  }
  return st;
}

__attribute__((noinline)) static t4a_status op_streams(void *user) {
  t4a_status st = run_once(user);
  __asm__ volatile("" ::: "memory");
  return st;
}

static long unaccounted(void *user) {
  sweep_ctx *c = user;
  return t4a_fixture_unaccounted(c->f, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS |
                                           T4A_FIXTURE_LIVE_EVENTS | T4A_FIXTURE_LIVE_MODULES) -
         (long)c->lane_leaked;
}

static void test_streams_sweep(void **state) {
  fixture *f = *state;
  sweep_ctx c = {.f = f, .options = small_options(f)};
  c.options.pool.reuse_disabled = 1; /* a quarantined buffer would keep cached blocks alive */
  t4a_sweep s = {.name = "streams", .fake = f->fake, .op = op_streams, .unaccounted = unaccounted,
                 .user = &c, .max_steps = 3000};
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 20);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_HANDLE, T4A_DRIVER_ERROR) > 20);
  static const char *const enqueueing[] = {"cuLaunchKernel", "cuMemcpyHtoDAsync",
                                           "cuMemcpyDtoDAsync", "cuStreamWaitEvent",
                                           "cuEventRecord"};
  s.after_enqueue = 1;
  for (size_t i = 0; i < sizeof enqueueing / sizeof enqueueing[0]; i++) {
    s.entry = enqueueing[i];
    assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 0);
  }
  s.after_enqueue = 0;
  s.entry = NULL;
  const t4a_status oom[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, oom, 1) > 5);
  const t4a_status internal[] = {T4A_INTERNAL, T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, internal, 2) > 2);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

/* The sweep's quarantined buffers and the races made on purpose leave objects held with their
 * lanes (counted); LeakSanitizer is told about these frames only. */
T4A_FIXTURE_DELIBERATE_LEAKS("op_streams", "test_dropped_waits_are_seen",
                             "test_missing_explicit_wait_is_seen", "release_then_reuse")

static int teardown_counted(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_ORDERING);
}
static int teardown_faulted(void **state) { return t4a_fixture_teardown(state, 0); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_priority_range_and_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared_objects_and_explicit_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_release_while_another_stream_reads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dropped_waits_are_seen, setup_dropping,
                                      teardown_faulted),
      cmocka_unit_test_setup_teardown(test_missing_explicit_wait_is_seen, setup,
                                      teardown_faulted),
      cmocka_unit_test_setup_teardown(test_events_per_cross_stream_release, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_of_another_runtime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_raw_graph_and_copy_on_a_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chain_on_a_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_with_work_queued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads_on_streams, setup, teardown),
      cmocka_unit_test_setup_teardown(test_streams_sweep, setup, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
