/* t4a_xfer_copy on the fake driver: the same-device bracket, the peer and staged paths between
 * devices, the five fault lanes of issue 5, opposing copies from two threads, and failure sweeps.
 * The fake runs streams in the order T4A_FAKE_PROGRESS_ORDER says (the suite reruns with reverse
 * and random orders) and checks every access against a vector clock: a copy not ordered after
 * the source's writes, or a free not ordered after the copy's read, is an ordering violation. */
#include <pthread.h>
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
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CHUNK ((size_t)4096)
#define CK(x) assert_int_equal((x), T4A_OK)
#define MAX_RT 4

/* One runtime: a lane with its pool, retirement state and transfer state (f->stack[i]). */
typedef t4a_fixture_stack rt;
typedef t4a_fixture fixture;

/* Devices: `ordinals` lists each runtime's device; peers: all pairs or none. Each runtime: the
 * standard stack (the pool without reuse: a released buffer's block goes back at once, live
 * blocks = buffers) with an xfer of two chunks. */
static fixture *make(const int *ordinals, int n, int devices, int all_peers) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = devices;
  o.fake.all_peers = all_peers;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* nothing runs unless a sync or the test says so */
  o.stacks = n;
  for (int i = 0; i < n; i++) o.ordinals[i] = ordinals[i];
  o.build |= T4A_FIXTURE_XFER;
  o.xfer.chunk_bytes = CHUNK;
  o.xfer.num_chunks = 2;
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL || t4a_fixture_init(f, &o) != T4A_OK) return NULL;
  return f;
}

/* counted: the test leaked on purpose (teardown_counted checked the accounting); else
 * everything freed and a proved drain. Never an ordering violation, a foreign event observation
 * or a non-portable pinned use. */
static int finish(fixture *f, int counted) {
  unsigned checks = T4A_FIXTURE_CHECK_ORDERING | T4A_FIXTURE_CHECK_FOREIGN_EVENTS |
                    T4A_FIXTURE_CHECK_NONPORTABLE;
  int rc = t4a_fixture_fini(f, counted ? checks : checks | T4A_FIXTURE_CHECK_NOTHING_LIVE);
  free(f);
  return rc;
}

static int setup_same(void **state) { /* two runtimes on device 0, a third on device 1 */
  static const int ord[] = {0, 0, 1};
  return (*state = make(ord, 3, 2, 0)) != NULL ? 0 : -1;
}
static int setup_peer(void **state) { /* devices 0, 1, 2, every pair peer-capable */
  static const int ord[] = {0, 1, 2};
  return (*state = make(ord, 3, 3, 1)) != NULL ? 0 : -1;
}
static int setup_nopeer(void **state) { /* devices 0, 1, 2, no pair peer-capable */
  static const int ord[] = {0, 1, 2};
  return (*state = make(ord, 3, 3, 0)) != NULL ? 0 : -1;
}
static int teardown(void **state) { return finish(*state, 0); }

/* The same fixtures for the tests that fault on purpose. t4a leaks (and counts) what it cannot
 * prove drained — quarantined buffers, and after a sticky error the rings and pools — so the
 * allocations made under this frame are suppressed for LeakSanitizer (see below). */
__attribute__((noinline)) static fixture *make_leaky(const int *ordinals, int n, int devices,
                                                     int all_peers) {
  fixture *f = make(ordinals, n, devices, all_peers);
  __asm__ volatile("" ::: "memory");
  return f;
}
static int setup_same_leaky(void **state) {
  static const int ord[] = {0, 0, 1};
  return (*state = make_leaky(ord, 3, 2, 0)) != NULL ? 0 : -1;
}
static int setup_peer_leaky(void **state) {
  static const int ord[] = {0, 1, 2};
  return (*state = make_leaky(ord, 3, 3, 1)) != NULL ? 0 : -1;
}
static int setup_nopeer_leaky(void **state) {
  static const int ord[] = {0, 1, 2};
  return (*state = make_leaky(ord, 3, 3, 0)) != NULL ? 0 : -1;
}

/* For the tests that fault on purpose: what is alive must be exactly what t4a counted. */
static long unaccounted(void *user) {
  /* Pools are left out on both sides: a pool pinned by a quarantined (leaked) buffer stays alive
   * uncounted, and t4a_mem counts the pools it leaks apart (pools_leaked). */
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS | T4A_FIXTURE_LIVE_EVENTS);
}
static int teardown_counted(void **state) {
  fixture *f = *state;
  (void)t4a_fixture_drop_stacks(f); /* the fixture's rings are gone too */
  long extra = unaccounted(f);
  if (extra != 0) {
    t4a_fake_live l;
    t4a_fake_live_objects(f->fake, &l);
    fprintf(stderr, "# teardown: %ld objects alive uncounted (pools %llu; lanes %s %s %s)\n", extra,
            (unsigned long long)l.pools, t4a_status_name(t4a_lane_check(f->stack[0].lane)),
            t4a_status_name(t4a_lane_check(f->stack[1].lane)),
            t4a_status_name(t4a_lane_check(f->stack[2].lane)));
  }
  int rc = finish(f, 1);
  return extra == 0 ? rc : -1;
}
/* make_leaky: the fixtures of the fault tests; op_copy: the sweep's steps; the three fault
 * tests: their quarantined buffers. All are checked by unaccounted(): whatever they leave
 * alive is exactly what t4a counted as leaked. */
T4A_FIXTURE_DELIBERATE_LEAKS("make_leaky", "op_copy", "test_fault_lane_1_partial_staged_enqueue",
                             "test_fault_lane_5_staged_fault", "test_sticky_source_after_confirm")

/* ---- helpers ---- */

static t4a_buffer *buffer(rt *r, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(r->pool, bytes, 0, 0, &b));
  return b;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

static void upload(rt *r, t4a_buffer *b, size_t off, const void *src, size_t n) {
  CK(t4a_xfer_upload(r->xfer, b, off, src, n));
}

static void expect(rt *r, t4a_buffer *b, size_t off, const unsigned char *want, size_t n) {
  unsigned char *got = malloc(n);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(r->xfer, b, off, got, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(got, want, n);
  free(got);
}

static uint64_t counter(rt *r, size_t offset_in_values) {
  t4a_counter_values v;
  t4a_lane_stats(r->lane, &v);
  return *(const uint64_t *)((const char *)&v + offset_in_values);
}
#define COUNTER(r, name) counter((r), offsetof(t4a_counter_values, name))

/* ---- same device ---- */

/* Two runtimes on one device: A -> B with the bracket, no host wait, the source released and then
 * overwritten right after the call; B holds the old bytes; both lanes waited on each other once. */
static void test_same_device_bracket(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  size_t n = 3 * CHUNK + 17;
  unsigned char *old = malloc(n), *newer = malloc(n);
  fill(old, n, 1);
  fill(newer, n, 2);
  t4a_buffer *src = buffer(a, n), *dst = buffer(b, n + 64);
  upload(a, src, 0, old, n);
  uint64_t waits_a = COUNTER(a, host_waits), waits_b = COUNTER(b, host_waits);
  t4a_copy_path path = T4A_COPY_AUTO;
  t4a_witness *w = NULL;
  CK(t4a_xfer_copy(b->xfer, dst, 64, a->xfer, src, 0, n, T4A_COPY_AUTO, &path, &w));
  assert_int_equal(path, T4A_COPY_SAME_DEVICE);
  assert_int_equal(COUNTER(a, host_waits), waits_a);
  assert_int_equal(COUNTER(b, host_waits), waits_b);
  assert_int_equal(COUNTER(a, cross_waits), 1); /* the back-wait */
  assert_int_equal(COUNTER(b, cross_waits), 1); /* source-ready */
  assert_int_equal(COUNTER(b, copies_same_device), 1);
  /* The source is overwritten (on its own stream) right after the copy was admitted. */
  upload(a, src, 0, newer, n);
  t4a_buffer_release(src); /* and dropped: its free is ordered after the copy's read */
  expect(b, dst, 64, old, n);
  CK(t4a_witness_wait(w));
  t4a_witness_release(w);
  t4a_buffer_release(dst);
  free(old);
  free(newer);
}

/* Within one lane: one stream, no waits; overlapping ranges of one buffer are refused. */
static void test_one_lane_and_overlap(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0];
  unsigned char data[1000];
  fill(data, sizeof data, 3);
  t4a_buffer *x = buffer(a, 4096);
  upload(a, x, 0, data, sizeof data);
  t4a_copy_path path;
  assert_int_equal(t4a_xfer_copy(a->xfer, x, 500, a->xfer, x, 0, 1000, T4A_COPY_AUTO, &path,
                                 NULL),
                   T4A_INVALID_ARGUMENT);
  CK(t4a_xfer_copy(a->xfer, x, 2000, a->xfer, x, 0, 1000, T4A_COPY_AUTO, &path, NULL));
  assert_int_equal(path, T4A_COPY_SAME_DEVICE);
  assert_int_equal(COUNTER(a, cross_waits), 0);
  expect(a, x, 2000, data, sizeof data);
  t4a_buffer_release(x);
}

static void test_argument_checks(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1], *c = &f->stack[2];
  t4a_buffer *x = buffer(a, 256), *y = buffer(b, 256), *z = buffer(c, 256);
  t4a_copy_path path = T4A_COPY_PEER;
  t4a_witness *w = (t4a_witness *)1;
  assert_int_equal(t4a_xfer_copy(b->xfer, x, 0, a->xfer, x, 0, 8, T4A_COPY_AUTO, &path, &w),
                   T4A_FOREIGN_HANDLE); /* dst is not b's */
  assert_int_equal(path, T4A_COPY_AUTO);
  assert_null(w);
  assert_int_equal(t4a_xfer_copy(b->xfer, y, 0, a->xfer, y, 0, 8, T4A_COPY_AUTO, NULL, NULL),
                   T4A_FOREIGN_HANDLE); /* src is not a's */
  assert_int_equal(t4a_xfer_copy(b->xfer, y, 250, a->xfer, x, 0, 8, T4A_COPY_AUTO, NULL, NULL),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, 0, T4A_COPY_AUTO, NULL, NULL),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, 8, T4A_COPY_PEER, NULL, NULL),
                   T4A_INVALID_ARGUMENT); /* one device */
  assert_int_equal(t4a_xfer_copy(c->xfer, z, 0, a->xfer, x, 0, 8, T4A_COPY_SAME_DEVICE, NULL,
                                 NULL),
                   T4A_INVALID_ARGUMENT); /* two devices */
  assert_int_equal(t4a_xfer_copy(c->xfer, z, 0, a->xfer, x, 0, 8, (t4a_copy_path)9, NULL, NULL),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_copy(NULL, z, 0, a->xfer, x, 0, 8, T4A_COPY_AUTO, NULL, NULL),
                   T4A_INVALID_ARGUMENT);
  /* No peer between devices 0 and 1 in this fixture: a requested peer copy is refused, never
   * staged behind the caller's back, and nothing was enqueued or counted. */
  assert_int_equal(t4a_xfer_copy(c->xfer, z, 0, a->xfer, x, 0, 8, T4A_COPY_PEER, NULL, NULL),
                   T4A_UNSUPPORTED);
  assert_int_equal(COUNTER(c, copies_staged) + COUNTER(c, copies_peer), 0);
  CK(t4a_xfer_copy_plan(c->xfer, a->xfer, T4A_COPY_AUTO, &path));
  assert_int_equal(path, T4A_COPY_STAGED);
  CK(t4a_xfer_copy_plan(b->xfer, a->xfer, T4A_COPY_AUTO, &path));
  assert_int_equal(path, T4A_COPY_SAME_DEVICE);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_buffer_release(z);
}

/* Opposing copies from two threads (A -> B and B -> A at once) do not deadlock and each lands. */
typedef struct opposing {
  rt *from, *to;
  t4a_buffer *src, *dst;
  size_t n;
  t4a_status st;
} opposing;
static void *opposing_main(void *p) {
  opposing *o = p;
  for (int i = 0; i < 200 && o->st == T4A_OK; i++) {
    o->st = t4a_xfer_copy(o->to->xfer, o->dst, 0, o->from->xfer, o->src, 0, o->n, T4A_COPY_AUTO,
                          NULL, NULL);
  }
  return NULL;
}
static void run_opposing(fixture *f, rt *a, rt *b, size_t n) {
  unsigned char *pa = malloc(n), *pb = malloc(n);
  fill(pa, n, 4);
  fill(pb, n, 5);
  t4a_buffer *a_src = buffer(a, n), *a_dst = buffer(a, n), *b_src = buffer(b, n),
             *b_dst = buffer(b, n);
  upload(a, a_src, 0, pa, n);
  upload(b, b_src, 0, pb, n);
  opposing ab = {a, b, a_src, b_dst, n, T4A_OK}, ba = {b, a, b_src, a_dst, n, T4A_OK};
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, opposing_main, &ab), 0);
  assert_int_equal(pthread_create(&t2, NULL, opposing_main, &ba), 0);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CK(ab.st);
  CK(ba.st);
  expect(b, b_dst, 0, pa, n);
  expect(a, a_dst, 0, pb, n);
  t4a_buffer_release(a_src);
  t4a_buffer_release(a_dst);
  t4a_buffer_release(b_src);
  t4a_buffer_release(b_dst);
  free(pa);
  free(pb);
  (void)f;
}
static void test_opposing_same_device(void **state) {
  fixture *f = *state;
  run_opposing(f, &f->stack[0], &f->stack[1], 2 * CHUNK + 5);
}
static void test_opposing_staged(void **state) {
  fixture *f = *state;
  run_opposing(f, &f->stack[0], &f->stack[1], 3 * CHUNK + 1);
  assert_int_equal(COUNTER(&f->stack[1], copies_staged), 200);
}
static void test_opposing_peer(void **state) {
  fixture *f = *state;
  run_opposing(f, &f->stack[0], &f->stack[1], 3 * CHUNK + 1);
  assert_int_equal(COUNTER(&f->stack[1], copies_peer), 200);
}

/* ---- between devices ---- */

/* Peer: access is enabled once per pair and the source pool opened once to the destination;
 * odd sizes and offsets land byte-exact. */
static void test_peer_path(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  size_t n = 5 * CHUNK + 3;
  unsigned char *data = malloc(n);
  fill(data, n, 6);
  t4a_buffer *src = buffer(a, n + 7), *dst = buffer(b, n + 11);
  upload(a, src, 7, data, n);
  t4a_copy_path path;
  for (int i = 0; i < 3; i++) {
    CK(t4a_xfer_copy(b->xfer, dst, 11, a->xfer, src, 7, n, T4A_COPY_AUTO, &path, NULL));
    assert_int_equal(path, T4A_COPY_PEER);
  }
  CK(t4a_xfer_copy(b->xfer, dst, 0, a->xfer, src, 7, 1, T4A_COPY_PEER, &path, NULL));
  t4a_counter_values drv;
  t4a_driver_stats(f->drv, &drv);
  assert_int_equal(drv.peer_access_enabled, 1);
  assert_int_equal(COUNTER(a, pool_access_granted), 1);
  assert_int_equal(COUNTER(b, copies_peer), 4);
  /* STAGED may be asked for explicitly on a peer-capable pair. */
  CK(t4a_xfer_copy(b->xfer, dst, 1, a->xfer, src, 8, 2, T4A_COPY_STAGED, &path, NULL));
  assert_int_equal(path, T4A_COPY_STAGED);
  t4a_buffer_release(src);
  expect(b, dst, 11, data, n);
  expect(b, dst, 0, data, 3);
  t4a_buffer_release(dst);
  free(data);
}

/* Staged: multi-chunk, odd offsets, 1 byte, larger than the ring; pinned chunks stay portable
 * (finish() checks the fake's non-portable count); the source may go at once. */
/* A chunk a staged copy used (recorded on the destination's stream after the source's copy, not
 * inside an upload's admission) is never taken back on the strength of a drain: after a staged
 * upload, a wait that drains, and a staged copy through the same one-chunk ring, the next upload
 * asks the chunk's event, and both buffers hold their own bytes. */
static void test_staged_copy_chunk_not_inferred_by_drain(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = CHUNK;
  xo.num_chunks = 1;
  t4a_xfer *dx = NULL;
  CK(t4a_xfer_create(b->retire, &xo, &dx));
  unsigned char d1[CHUNK], z[CHUNK];
  fill(d1, CHUNK, 1);
  fill(z, CHUNK, 2);
  t4a_buffer *src = buffer(a, CHUNK), *dst = buffer(b, CHUNK), *y = buffer(b, CHUNK);
  upload(a, src, 0, d1, CHUNK);
  CK(t4a_retire_wait(a->retire));
  CK(t4a_xfer_upload(dx, y, 0, z, CHUNK)); /* the chunk: a staged upload */
  CK(t4a_retire_wait(b->retire));          /* drained: the retire's count goes up */
  CK(t4a_xfer_copy(dx, dst, 0, a->xfer, src, 0, CHUNK, T4A_COPY_STAGED, NULL, NULL));
  uint64_t asked = t4a_fake_calls(f->fake, "cuEventQuery") +
                   t4a_fake_calls(f->fake, "cuEventSynchronize");
  CK(t4a_xfer_upload(dx, y, 0, z, CHUNK)); /* reuses the copy's chunk */
  assert_true(t4a_fake_calls(f->fake, "cuEventQuery") +
                  t4a_fake_calls(f->fake, "cuEventSynchronize") - asked >
              0);
  CK(t4a_retire_wait(b->retire));
  CK(t4a_retire_wait(a->retire));
  expect(b, dst, 0, d1, CHUNK);
  expect(b, y, 0, z, CHUNK);
  t4a_buffer_release(src);
  t4a_buffer_release(dst);
  t4a_buffer_release(y);
  t4a_xfer_destroy(dx);
}

static void test_staged_path(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  size_t sizes[] = {1, CHUNK, 7 * CHUNK + 333};
  for (size_t k = 0; k < 3; k++) {
    size_t n = sizes[k];
    unsigned char *data = malloc(n);
    fill(data, n, (unsigned)(10 + k));
    t4a_buffer *src = buffer(a, n + 3), *dst = buffer(b, n + 5);
    upload(a, src, 3, data, n);
    t4a_copy_path path;
    t4a_witness *w = NULL;
    CK(t4a_xfer_copy(b->xfer, dst, 5, a->xfer, src, 3, n, T4A_COPY_AUTO, &path, &w));
    assert_int_equal(path, T4A_COPY_STAGED);
    t4a_buffer_release(src);
    CK(t4a_witness_wait(w));
    t4a_witness_release(w);
    expect(b, dst, 5, data, n);
    t4a_buffer_release(dst);
    free(data);
  }
  assert_int_equal(COUNTER(b, copies_staged), 3);
  assert_true(COUNTER(a, cross_waits) == 0); /* the source needs no back-wait */
  assert_int_equal(COUNTER(b, cross_waits), 1 + 1 + 8); /* one source witness per chunk */
  /* A destination ring 4 deep (2 made) grows for a staged copy spanning 4 chunks: all four in
   * flight at once, byte-exact. */
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = CHUNK;
  xo.num_chunks = 4;
  t4a_xfer *deep = NULL;
  CK(t4a_xfer_create(b->retire, &xo, &deep));
  struct t4a_xfer_stats xs;
  t4a_xfer_stats(deep, &xs);
  assert_int_equal(xs.ring_chunks, 2);
  size_t n = 4 * CHUNK;
  unsigned char *data = malloc(n);
  fill(data, n, 20);
  t4a_buffer *src = buffer(a, n), *dst = buffer(b, n);
  upload(a, src, 0, data, n);
  t4a_witness *w = NULL;
  CK(t4a_xfer_copy(deep, dst, 0, a->xfer, src, 0, n, T4A_COPY_STAGED, NULL, &w));
  t4a_xfer_stats(deep, &xs);
  assert_int_equal(xs.ring_chunks, 4);
  assert_int_equal(xs.ring_grow_failures, 0);
  CK(t4a_witness_wait(w));
  t4a_witness_release(w);
  expect(b, dst, 0, data, n);
  t4a_buffer_release(src);
  t4a_buffer_release(dst);
  t4a_xfer_destroy(deep);
  free(data);
  {
    /* Staged copies into a ring whose chunks were first pinned small (64 KiB) and re-pinned at
     * full size by a larger copy: byte-exact, the pins' sizes as designed. */
    t4a_xfer_options so = T4A_XFER_OPTIONS_INIT;
    so.chunk_bytes = (size_t)1 << 20;
    so.num_chunks = 3;
    t4a_xfer *sm = NULL;
    CK(t4a_xfer_create(b->retire, &so, &sm));
    size_t sizes2[] = {1, 70000, 1, 3u << 20, 5, (3u << 20) + 17};
    for (size_t k = 0; k < 6; k++) {
      size_t m = sizes2[k];
      unsigned char *d2 = malloc(m);
      fill(d2, m, (unsigned)(40 + k));
      t4a_buffer *s2 = buffer(a, m), *t2 = buffer(b, m);
      upload(a, s2, 0, d2, m);
      t4a_witness *w2 = NULL;
      CK(t4a_xfer_copy(sm, t2, 0, a->xfer, s2, 0, m, T4A_COPY_STAGED, NULL, &w2));
      CK(t4a_witness_wait(w2));
      t4a_witness_release(w2);
      expect(b, t2, 0, d2, m);
      if (k == 0) {
        assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, t4a_xfer_chunk_host(sm, 0)),
                         T4A_XFER_SMALL_PIN_BYTES);
      }
      if (k == 5) {
        for (uint32_t i = 0; i < 3; i++) {
          void *h = t4a_xfer_chunk_host(sm, i);
          if (h != NULL) assert_int_equal(t4a_fake_host_alloc_bytes(f->fake, h), so.chunk_bytes);
        }
      }
      t4a_buffer_release(s2);
      t4a_buffer_release(t2);
      free(d2);
    }
    t4a_xfer_destroy(sm);
  }
}

/* Fault lane 2: A -> B -> C after the original handles were dropped; data arrives intact. Peer
 * and staged legs both (0 -> 1 peer in setup_peer; run again in setup_nopeer: staged). */
static void test_fault_lane_2_chain(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1], *c = &f->stack[2];
  size_t n = 4 * CHUNK + 9;
  unsigned char *data = malloc(n), *junk = malloc(n);
  fill(data, n, 20);
  fill(junk, n, 21);
  t4a_buffer *x = buffer(a, n), *y = buffer(b, n), *z = buffer(c, n);
  upload(a, x, 0, data, n);
  CK(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, n, T4A_COPY_AUTO, NULL, NULL));
  upload(a, x, 0, junk, n); /* overwritten right after the copy was admitted */
  t4a_buffer_release(x);
  CK(t4a_xfer_copy(c->xfer, z, 0, b->xfer, y, 0, n, T4A_COPY_AUTO, NULL, NULL));
  t4a_buffer_release(y);
  t4a_fake_progress(f->fake);
  expect(c, z, 0, data, n);
  t4a_buffer_release(z);
  free(data);
  free(junk);
}

/* Fault lanes 3 and 4: A -> B confirmed, then an unrelated sticky fault on A: the copy still
 * reads as success, B's data is intact, B's lane is not broken. A third runtime (device 2) that
 * observes the copy's witness queries each event under its own context (the fake counts any
 * query made under another context: finish() asserts none). */
static void test_sticky_source_after_confirm(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1], *c = &f->stack[2];
  size_t n = 2 * CHUNK + 1;
  unsigned char *data = malloc(n);
  fill(data, n, 30);
  t4a_buffer *x = buffer(a, n), *y = buffer(b, n);
  upload(a, x, 0, data, n);
  t4a_witness *w = NULL, *w2 = NULL;
  CK(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, n, T4A_COPY_AUTO, NULL, &w));
  /* Observed from device 2's runtime: its context is current, the queries use A's and B's. */
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(c->lane), NULL));
  assert_int_equal(t4a_witness_query(w), T4A_NOT_READY);
  t4a_fake_progress(f->fake);
  CK(t4a_witness_query(w));
  CK(t4a_ctx_scope_exit(&scope));
  /* A second copy, not yet observed when A faults. */
  CK(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, 1, T4A_COPY_AUTO, NULL, &w2));
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  CK(t4a_witness_query(w)); /* memoised: the fault is not retroactive */
  CK(t4a_witness_wait(w));
  /* Not observed before the fault: its source-ready event now answers the sticky error, and a
   * copy whose source cannot be confirmed is reported failed (never folded into not-ready). */
  assert_int_equal(t4a_witness_query(w2), T4A_CONTEXT_LOST);
  expect(b, y, 0, data, n);
  assert_int_equal(t4a_lane_check(b->lane), T4A_OK);
  assert_int_equal(t4a_lane_check(a->lane), T4A_LANE_BROKEN);
  /* A new copy from the faulted source: refused by A's lane, naming the fault; B stays usable. */
  t4a_buffer *y2 = buffer(b, 16);
  assert_int_equal(t4a_xfer_copy(b->xfer, y2, 0, a->xfer, x, 0, 16, T4A_COPY_AUTO, NULL, NULL),
                   T4A_LANE_BROKEN); /* A refuses new work, naming the fault */
  assert_int_equal(t4a_lane_check(b->lane), T4A_OK);
  t4a_witness_release(w);
  t4a_witness_release(w2);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_buffer_release(y2);
  free(data);
}

/* Fault lane 1: a staged copy whose third chunk fails after its DMA was enqueued: the error names
 * the chunk, the destination is quarantined, the chunk is never reused on a guess, and the ring
 * keeps working with the chunk it has left. */
static void test_fault_lane_1_partial_staged_enqueue(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  size_t n = 4 * CHUNK;
  unsigned char *data = malloc(n);
  fill(data, n, 40);
  t4a_buffer *x = buffer(a, n), *y = buffer(b, n);
  upload(a, x, 0, data, n);
  t4a_fake_progress(f->fake);
  uint64_t q = COUNTER(b, quarantined);
  /* Uploads use cuMemcpyHtoDAsync too: inject only now. */
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 2, 1, CUDA_ERROR_UNKNOWN, 1);
  assert_int_equal(t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, n, T4A_COPY_STAGED, NULL, NULL),
                   T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemcpyHtoDAsync");
  assert_non_null(strstr(e.message, "destination side, staging chunk 3 of 4"));
  assert_int_equal(COUNTER(b, quarantined) - q, 1);
  t4a_buffer_release(y); /* quarantined: leaked and counted, never freed on a guess */
  /* A second one quarantines the ring's other chunk. Both were quarantined after the ring's
   * stream waited for the source's copy into them, so a later completion on that stream proves
   * them: the destination's ring heals, and copies and uploads through it land. */
  t4a_buffer *y1 = buffer(b, n), *y2 = buffer(b, n);
  t4a_fake_inject(f->fake, "cuMemcpyHtoDAsync", 0, 1, CUDA_ERROR_INVALID_VALUE, 1);
  assert_int_equal(t4a_xfer_copy(b->xfer, y1, 0, a->xfer, x, 0, n, T4A_COPY_STAGED, NULL, NULL),
                   T4A_DRIVER_ERROR);
  t4a_fake_clear_injections(f->fake);
  t4a_buffer_release(y1);
  CK(t4a_xfer_copy(b->xfer, y2, 0, a->xfer, x, 0, n, T4A_COPY_STAGED, NULL, NULL));
  expect(b, y2, 0, data, n);
  CK(t4a_xfer_upload(b->xfer, y2, 0, data + 1, n - 1));
  expect(b, y2, 0, data + 1, n - 1);
  t4a_buffer_release(y2);
  t4a_buffer_release(x);
  free(data);
}

/* Fault lane 5: a sticky fault on the source device during a staged copy: the copy reports it
 * (the entry and the side named), the source lane is broken, the destination's is not, and the
 * chunk the source was writing is never freed on a guess (leaked and counted at teardown). */
static void test_fault_lane_5_staged_fault(void **state) {
  fixture *f = *state;
  rt *a = &f->stack[0], *b = &f->stack[1];
  size_t n = 3 * CHUNK;
  unsigned char *data = malloc(n);
  fill(data, n, 50);
  t4a_buffer *x = buffer(a, n), *y = buffer(b, n);
  upload(a, x, 0, data, n);
  t4a_fake_inject(f->fake, "cuMemcpyDtoHAsync", 1, 1, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
  t4a_status st = t4a_xfer_copy(b->xfer, y, 0, a->xfer, x, 0, n, T4A_COPY_STAGED, NULL, NULL);
  assert_int_equal(st, T4A_CONTEXT_LOST);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuMemcpyDtoHAsync");
  assert_non_null(strstr(e.message, "source side, staging chunk 2 of 3"));
  assert_int_equal(t4a_lane_check(a->lane), T4A_LANE_BROKEN);
  assert_int_equal(t4a_lane_check(b->lane), T4A_OK);
  /* B keeps working: its first chunk's copy landed; the quarantined chunk is not reused. */
  unsigned char got[16];
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(b->xfer, y, 0, got, sizeof got, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(got, data, sizeof got);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  free(data);
}

/* ---- failure sweeps ---- */

typedef struct sweep_ctx {
  fixture *f;
  rt *to, *from;
  t4a_copy_path path;
  size_t n;
} sweep_ctx;

/* One copy between two fresh retirement/transfer states on the fixture's lanes and pools, torn
 * down at the end (quarantined objects are counted as leaked by that teardown). */
static t4a_status op_copy(void *user) {
  sweep_ctx *s = user;
  t4a_retire *rt_to = NULL, *rt_from = NULL;
  t4a_xfer *x_to = NULL, *x_from = NULL;
  t4a_buffer *x = NULL, *y = NULL;
  t4a_witness *w = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = CHUNK;
  xo.num_chunks = 4; /* 2 made: a copy of more than two chunks grows the destination's ring */
  t4a_status st = t4a_retire_create(s->to->lane, NULL, &rt_to);
  if (st == T4A_OK) st = t4a_retire_create(s->from->lane, NULL, &rt_from);
  if (st == T4A_OK) st = t4a_xfer_create(rt_to, &xo, &x_to);
  if (st == T4A_OK) st = t4a_xfer_create(rt_from, &xo, &x_from);
  if (st == T4A_OK) st = t4a_buffer_create(s->from->pool, s->n, 0, 0, &x);
  if (st == T4A_OK) st = t4a_buffer_create(s->to->pool, s->n, 0, 0, &y);
  if (st == T4A_OK) st = t4a_xfer_copy(x_to, y, 0, x_from, x, 0, s->n, s->path, NULL, &w);
  if (st == T4A_OK) st = t4a_witness_wait(w);
  t4a_witness_release(w);
  t4a_buffer_release(x);
  t4a_buffer_release(y);
  t4a_xfer_destroy(x_to);
  t4a_xfer_destroy(x_from);
  t4a_status a = t4a_retire_destroy(rt_to), b = t4a_retire_destroy(rt_from);
  if (st == T4A_OK) st = a != T4A_OK ? a : b;
  return st;
}

static long sweep_unaccounted(void *user) { return unaccounted(((sweep_ctx *)user)->f); }

static void sweep_path(void **state, int to, int from, t4a_copy_path path) {
  fixture *f = *state;
  sweep_ctx c = {f, &f->stack[to], &f->stack[from], path, 3 * CHUNK + 1};
  t4a_sweep s = {.name = "copy", .fake = f->fake, .op = op_copy,
                 .unaccounted = sweep_unaccounted, .user = &c};
  f->baseline = unaccounted(f);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 3);
  /* The enqueueing calls of the copy paths fail after their work was enqueued: typed, the
   * uncertain buffers quarantined, chunks never reused on a guess, nothing leaked uncounted.
   * (Allocation entries are left out: a failed allocation returns no address to free.) */
  static const char *const enqueueing[] = {"cuMemcpyDtoDAsync", "cuMemcpyDtoHAsync",
                                           "cuMemcpyHtoDAsync", "cuEventRecord",
                                           "cuStreamWaitEvent"};
  s.after_enqueue = 1;
  int surfaced = 0;
  for (size_t i = 0; i < sizeof enqueueing / sizeof *enqueueing; i++) {
    s.entry = enqueueing[i];
    surfaced += t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR);
  }
  assert_true(surfaced > 3);
  s.entry = NULL;
  s.after_enqueue = 0;
  static const t4a_status host[] = {T4A_HOST_OUT_OF_MEMORY, T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, host, 2) > 0);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}
static void test_copy_failure_sweep(void **state) {
  sweep_path(state, 1, 0, T4A_COPY_AUTO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_same_device_bracket, setup_same, teardown),
      cmocka_unit_test_setup_teardown(test_one_lane_and_overlap, setup_same, teardown),
      cmocka_unit_test_setup_teardown(test_argument_checks, setup_same, teardown),
      cmocka_unit_test_setup_teardown(test_opposing_same_device, setup_same, teardown),
      cmocka_unit_test_setup_teardown(test_opposing_staged, setup_nopeer, teardown),
      cmocka_unit_test_setup_teardown(test_opposing_peer, setup_peer, teardown),
      cmocka_unit_test_setup_teardown(test_peer_path, setup_peer, teardown),
      cmocka_unit_test_setup_teardown(test_staged_copy_chunk_not_inferred_by_drain, setup_nopeer,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_staged_path, setup_nopeer, teardown),
      cmocka_unit_test_setup_teardown(test_fault_lane_2_chain, setup_peer, teardown),
      cmocka_unit_test_setup_teardown(test_fault_lane_2_chain, setup_nopeer, teardown),
      cmocka_unit_test_setup_teardown(test_fault_lane_2_chain, setup_same, teardown),
      cmocka_unit_test_setup_teardown(test_sticky_source_after_confirm, setup_peer_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_fault_lane_1_partial_staged_enqueue, setup_nopeer_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_fault_lane_5_staged_fault, setup_nopeer_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_copy_failure_sweep, setup_same_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_copy_failure_sweep, setup_peer_leaky,
                                      teardown_counted),
      cmocka_unit_test_setup_teardown(test_copy_failure_sweep, setup_nopeer_leaky,
                                      teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
