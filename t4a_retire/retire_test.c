/* t4a_retire on the fake driver: admission, epochs, keepalives, re-entry, quarantine, witnesses,
 * teardown and failure sweeps. */
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
#include "t4a/fault.h"
#include "t4a/retire.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_retire/retire_internal.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

typedef t4a_fixture fixture; /* f->lane on device 0, f->stack[1].lane on device 1 */

static CUdeviceptr g_mem; /* 4 KiB on device 0 */

/* A refcounted test object: counts how often it was released. */
typedef struct object {
  atomic_int refs;
  atomic_int releases;
} object;
static void object_release(void *p) {
  object *o = p;
  atomic_fetch_sub(&o->refs, 1);
  atomic_fetch_add(&o->releases, 1);
}
static t4a_keepalive keep(object *o) {
  atomic_fetch_add(&o->refs, 1);
  return (t4a_keepalive){o, object_release, 0};
}

/* Two lanes, devices 0 and 1, nothing built on them; 4 KiB on device 0. */
static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* work runs only on sync or explicit progress */
  o.stacks = 2;
  o.ordinals[1] = 1;
  o.build = 0;
  if (t4a_fixture_setup(state, &o) != 0) return -1;
  fixture *f = *state;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) != T4A_OK) return -1;
  if (f->drv->t.cuMemAlloc(&g_mem, 4096) != CUDA_SUCCESS) return -1;
  (void)t4a_ctx_scope_exit(&s);
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  t4a_ctx_scope s;
  if (t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL) == T4A_OK) {
    (void)f->drv->t.cuMemFree(g_mem);
    (void)t4a_ctx_scope_exit(&s);
  }
  t4a_fixture_release(f);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  /* Only what t4a counted as leaked may remain (a sticky test abandons streams and events). */
  int ok = live.device_allocs <= 1 && live.pools == 0;
  (void)t4a_fixture_teardown(state, 0);
  return ok ? 0 : -1;
}

/* Whether a failing enqueue in the sweep left its work enqueued (the fake's after-enqueue mode):
 * then the operation reports it through admission_fail, quarantining its object. */
static int g_failures_after_enqueue;

/* One admitted operation: a memset on the lane's stream keeping `o` alive. */
static t4a_status admit_memset(fixture *f, t4a_retire *r, object *o) {
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(r, o != NULL ? 1 : 0, &adm);
  if (st != T4A_OK) return st;
  st = T4A_CU(f->drv, cuMemsetD8Async, g_mem, 0x5a, 4096, t4a_lane_stream(f->lane));
  if (st != T4A_OK && g_failures_after_enqueue && o != NULL) {
    t4a_keepalive k = keep(o);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  if (o != NULL) t4a_admission_keep(&adm, keep(o));
  t4a_admission_commit(&adm);
  return T4A_OK;
}

static void test_warm_chain_records_one_event_per_512(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object o = {0};
  for (int i = 0; i < 10000; i++) {
    assert_int_equal(admit_memset(f, r, &o), T4A_OK);
    if (i % 1000 == 999) t4a_fake_progress(f->fake); /* the GPU keeps up */
  }
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions, 10000);
  /* 10,000 / 512 seals, no more: the warm chain pays one event per 512 admissions. */
  assert_true(v.events_recorded <= 20);
  assert_int_equal(v.events_recorded, 10000 / 512);
  assert_int_equal(v.host_waits, 0);
  /* One object kept by every admission is held once per epoch, the rest deduplicated. */
  assert_int_equal(v.keepalives_held, v.epochs_sealed + 1);
  assert_int_equal(v.keepalives_deduplicated, 10000 - v.keepalives_held);
  assert_int_equal(atomic_load(&o.refs), (int)(v.keepalives_held - v.keepalives_released));
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 0);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Issue 25 item 2: a wait drains by one cuStreamSynchronize on the lane's stream, with no event
 * recorded or waited for, and retires this retire's epochs exactly as a sealed wait would: every
 * sealed epoch (its event back to the spares) and the open one. Another retire of the same lane
 * keeps its own epoch until it observes; a failed synchronisation retires nothing. */
static void test_wait_drains_by_one_stream_sync(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL, *r2 = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r2), T4A_OK);
  object o = {0}, o2 = {0};
  t4a_counter_values v0, v1;
  /* A warm small wait: one admission, then the wait. */
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  assert_int_equal(admit_memset(f, r2, &o2), T4A_OK);
  t4a_lane_stats(f->lane, &v0);
  uint64_t syncs = t4a_fake_calls(f->fake, "cuStreamSynchronize");
  uint64_t records = t4a_fake_calls(f->fake, "cuEventRecord");
  uint64_t esyncs = t4a_fake_calls(f->fake, "cuEventSynchronize");
  uint64_t queries = t4a_fake_calls(f->fake, "cuEventQuery");
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamSynchronize") - syncs, 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord"), records);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventSynchronize"), esyncs);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventQuery"), queries);
  t4a_lane_stats(f->lane, &v1);
  assert_int_equal(v1.events_recorded - v0.events_recorded, 0);
  assert_int_equal(v1.host_waits - v0.host_waits, 1);
  assert_int_equal(v1.epochs_sealed - v0.epochs_sealed, 0);
  assert_int_equal(v1.epochs_retired - v0.epochs_retired, 1);
  assert_int_equal(atomic_load(&o.refs), 0);
  /* r2's work ran too (one stream), but its epoch is r2's: held until r2 observes. */
  assert_int_equal(atomic_load(&o2.refs), 1);
  assert_int_equal(t4a_retire_poll(r2), T4A_OK); /* seals (one event): not run yet */
  assert_int_equal(atomic_load(&o2.refs), 1);
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_retire_poll(r2), T4A_OK); /* its event answers: released */
  assert_int_equal(atomic_load(&o2.refs), 0);
  /* Nothing pending: a wait makes no driver call at all. */
  syncs = t4a_fake_calls(f->fake, "cuStreamSynchronize");
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamSynchronize"), syncs);
  /* Sealed epochs and the open one: 600 admissions seal one epoch at 512; the wait retires both
   * with one synchronisation and the sealed epoch's event goes back to the spares (the next seal
   * creates none). */
  for (int i = 0; i < 600; i++) assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  t4a_lane_stats(f->lane, &v0);
  assert_int_equal(atomic_load(&o.refs), 2); /* one per epoch (deduplicated within each) */
  syncs = t4a_fake_calls(f->fake, "cuStreamSynchronize");
  esyncs = t4a_fake_calls(f->fake, "cuEventSynchronize");
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamSynchronize") - syncs, 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventSynchronize"), esyncs);
  t4a_lane_stats(f->lane, &v1);
  assert_int_equal(v1.epochs_retired - v0.epochs_retired, 2);
  assert_int_equal(v1.events_recorded, v0.events_recorded);
  assert_int_equal(atomic_load(&o.refs), 0);
  uint64_t creates = t4a_fake_calls(f->fake, "cuEventCreate");
  for (int i = 0; i < 513; i++) assert_int_equal(admit_memset(f, r, NULL), T4A_OK);
  t4a_lane_stats(f->lane, &v0);
  assert_int_equal(v0.epochs_sealed - v1.epochs_sealed, 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventCreate"), creates);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  /* A failed synchronisation retires nothing: the keepalive stays until a wait succeeds. */
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  t4a_lane_stats(f->lane, &v0);
  t4a_fake_inject(f->fake, "cuStreamSynchronize", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_error_clear();
  assert_int_equal(t4a_retire_wait(r), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuStreamSynchronize");
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(atomic_load(&o.refs), 1);
  t4a_lane_stats(f->lane, &v1);
  assert_int_equal(v1.epochs_retired, v0.epochs_retired);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 0);
  assert_int_equal(t4a_retire_destroy(r2), T4A_OK);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

static void object_retain(void *p) { atomic_fetch_add(&((object *)p)->refs, 1); }

/* A borrowed keepalive: the epoch takes its own reference only for an object it does not hold
 * yet; the caller's reference is never touched; everything goes once the epochs completed. */
static void test_borrowed_keepalive_retains_once_per_epoch(void **state) {
  fixture *f = *state;
  t4a_retire_options opt = T4A_RETIRE_OPTIONS_INIT;
  opt.max_pending_records = 8; /* seal every 4 admissions */
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, &opt, &r), T4A_OK);
  object o = {0};
  atomic_store(&o.refs, 1); /* the caller's own reference */
  for (int i = 0; i < 10; i++) {
    t4a_admission adm;
    assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
    assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, g_mem, 1, 64, t4a_lane_stream(f->lane)),
                     T4A_OK);
    t4a_admission_keep_borrowed(&adm, (t4a_keepalive){&o, object_release, 0}, object_retain);
    t4a_admission_commit(&adm);
  }
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  /* Epochs of 4, 4 and 2 admissions (two sealed): one reference each, the rest deduplicated
   * with no reference taken or dropped. */
  assert_int_equal(v.keepalives_held, 3);
  assert_int_equal(v.keepalives_deduplicated, 7);
  assert_int_equal(atomic_load(&o.refs), 1 + 3);
  assert_int_equal(atomic_load(&o.releases), 0);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 1);
  assert_int_equal(atomic_load(&o.releases), 3);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* The batched form: NULL entries skipped; more objects than the epoch's recent window (found
 * through its set); one reference per object per epoch; objects past the reservation still kept
 * (never released before their work); the commit counts what it is given. */
static void test_borrowed_keepalives_in_one_call(void **state) {
  fixture *f = *state;
  t4a_retire_options opt = T4A_RETIRE_OPTIONS_INIT;
  opt.max_pending_records = 8; /* seal every 4 admissions */
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, &opt, &r), T4A_OK);
  enum { N = 12 };
  object o[N];
  void *objs[N + 3];
  uint32_t n = 0;
  for (int i = 0; i < N; i++) {
    atomic_store(&o[i].refs, 1);
    atomic_store(&o[i].releases, 0);
    objs[n++] = &o[i];
    if (i % 4 == 1) objs[n++] = NULL;
  }
  t4a_counter_values before;
  t4a_lane_stats(f->lane, &before);
  for (int k = 0; k < 10; k++) {
    t4a_admission adm;
    /* Reserve half of them: the rest are kept by growing the epoch. */
    assert_int_equal(t4a_admission_begin(r, N / 2, &adm), T4A_OK);
    assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, g_mem, 1, 64, t4a_lane_stream(f->lane)),
                     T4A_OK);
    t4a_admission_keep_borrowed_n_(&adm, objs, n, object_release, object_retain);
    t4a_admission_commit_counting_(&adm, T4A_COUNTER_launches, 2);
  }
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  /* Epochs of 4, 4 and 2 admissions: each object held once per epoch. */
  assert_int_equal(v.keepalives_held - before.keepalives_held, 3 * N);
  assert_int_equal(v.keepalives_deduplicated - before.keepalives_deduplicated, 7 * N);
  assert_int_equal(v.launches - before.launches, 20);
  assert_int_equal(v.admissions - before.admissions, 10);
  assert_int_equal(v.leaked - before.leaked, 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(atomic_load(&o[i].refs), 1 + 3);
    assert_int_equal(atomic_load(&o[i].releases), 0);
  }
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  for (int i = 0; i < N; i++) {
    assert_int_equal(atomic_load(&o[i].refs), 1);
    assert_int_equal(atomic_load(&o[i].releases), 3);
  }
  /* An ended admission takes nothing. */
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
  t4a_admission_commit(&adm);
  t4a_admission_keep_borrowed_n_(&adm, objs, n, object_release, object_retain);
  t4a_admission_commit_counting_(&adm, T4A_COUNTER_launches, 1);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.launches - before.launches, 20);
  assert_int_equal(atomic_load(&o[0].refs), 1);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

static void test_keepalive_released_only_after_completion(void **state) {
  fixture *f = *state;
  t4a_retire_options opt = T4A_RETIRE_OPTIONS_INIT;
  opt.max_pending_records = 4; /* seal every 2 admissions */
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, &opt, &r), T4A_OK);
  object a = {0}, b = {0}, c = {0};
  assert_int_equal(admit_memset(f, r, &a), T4A_OK);
  assert_int_equal(admit_memset(f, r, &b), T4A_OK);
  assert_int_equal(admit_memset(f, r, &c), T4A_OK); /* seals {a, b} first */
  struct t4a_retire_stats rs;
  t4a_retire_stats(r, &rs);
  assert_int_equal(rs.sealed_epochs, 1);
  assert_int_equal(rs.open_keepalives, 1);
  /* Nothing ran yet: polling releases nothing. */
  assert_int_equal(t4a_retire_poll(r), T4A_OK);
  assert_int_equal(atomic_load(&a.refs), 1);
  assert_int_equal(atomic_load(&b.refs), 1);
  /* The GPU runs the first two memsets and the seal: a and b go, c (open epoch) stays. */
  assert_int_equal(t4a_fake_step(f->fake, t4a_lane_stream(f->lane)), 1);
  assert_int_equal(t4a_fake_step(f->fake, t4a_lane_stream(f->lane)), 1);
  assert_int_equal(t4a_retire_poll(r), T4A_OK);
  assert_int_equal(atomic_load(&a.refs), 1); /* the event itself has not run */
  assert_int_equal(t4a_fake_step(f->fake, t4a_lane_stream(f->lane)), 1);
  assert_int_equal(t4a_retire_poll(r), T4A_OK);
  assert_int_equal(atomic_load(&a.refs), 0);
  assert_int_equal(atomic_load(&b.refs), 0);
  assert_int_equal(atomic_load(&c.refs), 1);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
  assert_int_equal(atomic_load(&c.refs), 0);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.host_waits, 1); /* the drain at destroy */
}

/* Requirement B2: re-entry from the thread holding the operation lock is a typed error. */
static void test_reentry_is_typed(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  t4a_admission adm, inner;
  assert_int_equal(t4a_admission_begin(r, 0, &adm), T4A_OK);
  assert_int_equal(t4a_admission_begin(r, 0, &inner), T4A_REENTRY);
  assert_int_equal(t4a_retire_poll(r), T4A_REENTRY);
  assert_int_equal(t4a_retire_wait(r), T4A_REENTRY);
  t4a_witness *w = NULL;
  assert_int_equal(t4a_retire_fence(r, &w), T4A_REENTRY);
  assert_null(w);
  assert_int_equal(t4a_retire_destroy(r), T4A_REENTRY); /* refused, nothing done */
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "re-entered"));
  t4a_admission_commit(&adm);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions_refused_reentry, 5);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

typedef struct contender {
  t4a_retire *r;
  fixture *f;
  int ok;
} contender;
static void *contend(void *p) {
  contender *c = p;
  object o = {0};
  c->ok = 1;
  for (int i = 0; i < 2000; i++) {
    if (admit_memset(c->f, c->r, &o) != T4A_OK) c->ok = 0;
    if (i % 100 == 0 && t4a_retire_poll(c->r) != T4A_OK) c->ok = 0;
  }
  if (t4a_retire_wait(c->r) != T4A_OK) c->ok = 0;
  return NULL;
}

/* Other threads wait for the lock; only the owner gets REENTRY. */
static void test_threads_share_a_lane(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  pthread_t t[4];
  contender c[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (contender){r, f, 0};
    assert_int_equal(pthread_create(&t[i], NULL, contend, &c[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_true(c[i].ok);
  }
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions, 8000);
  assert_int_equal(v.admissions_refused_reentry, 0);
  assert_int_equal(v.keepalives_held + v.keepalives_deduplicated, 8000);
  assert_int_equal(v.keepalives_released, v.keepalives_held);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Admissions count into their retire's single-writer shard of the lane's counters (a lane has
 * two): threads sharing a retire with a shard, a retire left
 * without one (counting atomically) and a retire that takes over a destroyed one's shard all
 * add up exactly, and a destroyed retire's counts stay. */
static void test_counters_exact_over_shards(void **state) {
  fixture *f = *state;
  t4a_counter_values v0, v;
  t4a_lane_stats(f->lane, &v0);
  t4a_retire *first = NULL, *with = NULL, *without = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &first), T4A_OK);   /* the first shard */
  assert_int_equal(t4a_retire_create(f->lane, NULL, &with), T4A_OK);    /* the second */
  assert_int_equal(t4a_retire_create(f->lane, NULL, &without), T4A_OK); /* none left */
  pthread_t t[5];
  contender c[5];
  t4a_retire *on[5] = {with, with, without, without, first};
  for (int i = 0; i < 5; i++) {
    c[i] = (contender){on[i], f, 0};
    assert_int_equal(pthread_create(&t[i], NULL, contend, &c[i]), 0);
  }
  for (int i = 0; i < 5; i++) {
    pthread_join(t[i], NULL);
    assert_true(c[i].ok);
  }
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions - v0.admissions, 10000);
  assert_int_equal(v.keepalives_held + v.keepalives_deduplicated -
                       (v0.keepalives_held + v0.keepalives_deduplicated),
                   10000);
  /* Every admission entered its context scope once: activated or skipped, counted. */
  assert_true(v.ctx_activations + v.ctx_activations_skipped -
                  (v0.ctx_activations + v0.ctx_activations_skipped) >=
              10000);
  assert_int_equal(t4a_retire_destroy(with), T4A_OK);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions - v0.admissions, 10000); /* its shard's counts stay */
  t4a_retire *next = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &next), T4A_OK); /* takes that shard */
  object o = {0};
  for (int i = 0; i < 100; i++) assert_int_equal(admit_memset(f, next, &o), T4A_OK);
  for (int i = 0; i < 50; i++) assert_int_equal(admit_memset(f, without, &o), T4A_OK);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.admissions - v0.admissions, 10150);
  assert_int_equal(t4a_retire_wait(next), T4A_OK);
  assert_int_equal(t4a_retire_wait(without), T4A_OK);
  assert_int_equal(t4a_retire_destroy(next), T4A_OK);
  assert_int_equal(t4a_retire_destroy(without), T4A_OK);
  assert_int_equal(t4a_retire_destroy(first), T4A_OK);
}

/* A failure after enqueue quarantines the uncertain object: never released on a guess. */
static void test_fail_after_enqueue_quarantines(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object target = {0};
  t4a_fake_inject(f->fake, "cuMemsetD8Async", 0, 1, CUDA_ERROR_UNKNOWN, 1);
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
  t4a_status st = T4A_CU(f->drv, cuMemsetD8Async, g_mem, 1, 16, t4a_lane_stream(f->lane));
  assert_int_equal(st, T4A_DRIVER_ERROR);
  t4a_keepalive k = keep(&target);
  assert_int_equal(t4a_admission_fail(&adm, st, &k, 1), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  assert_int_equal(atomic_load(&target.releases), 0); /* still held */
  struct t4a_retire_stats rs;
  t4a_retire_stats(r, &rs);
  assert_int_equal(rs.quarantined_held, 1);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.quarantined, 1);
  /* Even after a proved drain of this lane it is never released (the uncertain work may have
   * run elsewhere): leaked, and counted exactly. */
  t4a_lane_stats(f->lane, &v);
  uint64_t leaked = v.leaked;
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
  assert_int_equal(atomic_load(&target.releases), 0);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.leaked - leaked, 1);
}

/* A sticky status handed to admission_fail marks the lane's context lost. */
static void test_fail_marks_context_lost(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->stack[1].lane, NULL, &r), T4A_OK);
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 0, &adm), T4A_OK);
  t4a_error cause = {.status = T4A_CONTEXT_LOST, .entry = "cuLaunchKernel", .code = 700,
                     .code_name = "CUDA_ERROR_ILLEGAL_ADDRESS"};
  t4a_error_restore(&cause);
  assert_int_equal(t4a_admission_fail(&adm, T4A_CONTEXT_LOST, NULL, 0), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_lane_check(f->stack[1].lane), T4A_LANE_BROKEN);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "cuLaunchKernel");
  t4a_lane_abandon_(f->stack[1].lane);
  assert_int_not_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Observation seals: a short chain's keepalives go once its work ran, with no host wait. */
static void test_poll_seals_the_open_epoch(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object o = {0};
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_retire_poll(r), T4A_OK); /* seals: one event after the memset */
  assert_int_equal(atomic_load(&o.refs), 1);
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_retire_poll(r), T4A_OK);
  assert_int_equal(atomic_load(&o.refs), 0);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.events_recorded, 1);
  assert_int_equal(v.host_waits, 0);
  /* Polling an empty lane records nothing. */
  assert_int_equal(t4a_retire_poll(r), T4A_OK);
  t4a_lane_stats(f->lane, &v);
  assert_int_equal(v.events_recorded, 1);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Keepalive releases run outside the lock: a release may observe the same retire. */
static t4a_retire *g_reentrant;
static t4a_status g_inner_poll = T4A_INTERNAL;
static void polling_release(void *p) {
  object_release(p);
  g_inner_poll = t4a_retire_poll(g_reentrant);
}

static void test_release_runs_outside_the_lock(void **state) {
  fixture *f = *state;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &g_reentrant), T4A_OK);
  object o = {0};
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(g_reentrant, 1, &adm), T4A_OK);
  atomic_fetch_add(&o.refs, 1);
  t4a_admission_keep(&adm, (t4a_keepalive){&o, polling_release, 0});
  /* t4a_retire_stats from inside the admission does not deadlock. */
  struct t4a_retire_stats rs;
  t4a_retire_stats(g_reentrant, &rs);
  assert_int_equal(rs.open_keepalives, 1);
  t4a_admission_commit(&adm);
  assert_int_equal(t4a_retire_wait(g_reentrant), T4A_OK);
  assert_int_equal(atomic_load(&o.releases), 1);
  assert_int_equal(g_inner_poll, T4A_OK);
  assert_int_equal(t4a_retire_destroy(g_reentrant), T4A_OK);
}

/* A warm retirement allocates nothing even when another thread holds the retire's lock while the
 * releases run (the storage of the list goes to a spare slot, not back under the lock). The
 * first release of a retirement makes a second thread take the lock (an admission it holds)
 * and waits until it has: the retiring thread then finds the lock taken. Afterwards a warm
 * admission + wait allocates nothing. */
typedef struct lock_holder {
  t4a_retire *r;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go, holding, done;
} lock_holder;
static lock_holder g_holder;
static void *holder_main(void *arg) {
  lock_holder *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->go) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(c->r, 0, &adm);
  pthread_mutex_lock(&c->mu);
  c->holding = st == T4A_OK ? 1 : -1;
  pthread_cond_broadcast(&c->cv);
  while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  if (st == T4A_OK) t4a_admission_abort(&adm, T4A_OK);
  return NULL;
}
static void holding_release(void *p) {
  object_release(p);
  lock_holder *c = &g_holder;
  pthread_mutex_lock(&c->mu);
  if (!c->go) { /* the first release only */
    c->go = 1;
    pthread_cond_broadcast(&c->cv);
    while (c->holding == 0) pthread_cond_wait(&c->cv, &c->mu);
  }
  pthread_mutex_unlock(&c->mu);
}

static void test_retirement_under_contention_allocates_nothing(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object o = {0};
  /* Warm: the deferred list's storage exists. */
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  lock_holder *c = &g_holder;
  memset(c, 0, sizeof *c);
  c->r = r;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, holder_main, c), 0);
  /* This retirement's release lets the holder take the lock before the storage goes back. */
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
  assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, g_mem, 1, 64, t4a_lane_stream(f->lane)), T4A_OK);
  atomic_fetch_add(&o.refs, 1);
  t4a_admission_keep(&adm, (t4a_keepalive){&o, holding_release, 0});
  t4a_admission_commit(&adm);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  pthread_mutex_lock(&c->mu);
  assert_int_equal(c->holding, 1);
  c->done = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  assert_int_equal(pthread_join(t, NULL), 0);
  /* Warm again: no allocation. */
  uint64_t h0 = t4a_heap_allocations();
  for (int i = 0; i < 4; i++) {
    assert_int_equal(admit_memset(f, r, &o), T4A_OK);
    assert_int_equal(t4a_retire_wait(r), T4A_OK);
  }
  assert_int_equal(t4a_heap_allocations() - h0, 0);
  assert_int_equal(atomic_load(&o.refs), 0);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* The drain is real: nothing is queued on the stream when teardown releases keepalives. */
static fixture *g_drain_fixture;
static size_t g_pending_at_release = 99;
static void checking_release(void *p) {
  object_release(p);
  g_pending_at_release = t4a_fake_pending(g_drain_fixture->fake, t4a_lane_stream(g_drain_fixture->lane));
}

static void test_destroy_proves_the_drain(void **state) {
  fixture *f = *state;
  g_drain_fixture = f;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object o = {0};
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
  assert_int_equal(T4A_CU(f->drv, cuMemsetD8Async, g_mem, 1, 4096, t4a_lane_stream(f->lane)),
                   T4A_OK);
  atomic_fetch_add(&o.refs, 1);
  t4a_admission_keep(&adm, (t4a_keepalive){&o, checking_release, 0});
  t4a_admission_commit(&adm);
  assert_true(t4a_fake_pending(f->fake, t4a_lane_stream(f->lane)) > 0);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
  assert_int_equal(atomic_load(&o.releases), 1);
  assert_int_equal(g_pending_at_release, 0);
}

static void test_keep_beyond_reservation_and_limits(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(r, 0xFFFFFFFFu, &adm), T4A_LIMIT_EXCEEDED);
  object o[40];
  memset(o, 0, sizeof o);
  assert_int_equal(t4a_admission_begin(r, 1, &adm), T4A_OK);
  for (int i = 0; i < 40; i++) t4a_admission_keep(&adm, keep(&o[i])); /* 39 beyond */
  t4a_admission_commit(&adm);
  struct t4a_retire_stats rs;
  t4a_retire_stats(r, &rs);
  assert_int_equal(rs.open_keepalives, 40);
  assert_int_equal(t4a_retire_wait(r), T4A_OK);
  for (int i = 0; i < 40; i++) assert_int_equal(atomic_load(&o[i].refs), 0);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Requirement B1: a witness confirmed before an unrelated sticky error still reads success; one not
 * yet confirmed reads the fault. */
static void test_witness_memoised_across_sticky_error(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  object o = {0};
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  t4a_witness *done = NULL, *later = NULL;
  assert_int_equal(t4a_retire_fence(r, &done), T4A_OK);
  assert_int_equal(t4a_witness_query(done), T4A_NOT_READY);
  assert_int_equal(t4a_witness_wait(done), T4A_OK);
  assert_int_equal(admit_memset(f, r, &o), T4A_OK);
  assert_int_equal(t4a_retire_fence(r, &later), T4A_OK);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_witness_query(done), T4A_OK);
  assert_int_equal(t4a_witness_wait(done), T4A_OK);
  assert_int_equal(t4a_witness_query(later), T4A_CONTEXT_LOST);
  assert_int_equal(t4a_witness_query(later), T4A_CONTEXT_LOST); /* memoised too */
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  /* The lane is now broken for new work, naming the fault. */
  assert_int_equal(admit_memset(f, r, &o), T4A_LANE_BROKEN);
  /* Teardown after the sticky error leaks (counted) instead of releasing on a guess. */
  t4a_witness_release(done);
  t4a_witness_release(later);
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  uint64_t leaked = v.leaked;
  struct t4a_retire_stats rs;
  t4a_retire_stats(r, &rs);
  assert_int_not_equal(t4a_retire_destroy(r), T4A_OK);
  t4a_lane_stats(f->lane, &v);
  /* Exactly the keepalive still held by the open epoch (nothing was sealed; no spare events). */
  assert_int_equal(rs.sealed_epochs, 0);
  assert_int_equal(v.leaked - leaked, rs.open_keepalives);
  assert_int_equal(rs.open_keepalives, 1);
  assert_int_equal(atomic_load(&o.refs), 1); /* never released */
  t4a_driver_stats(f->drv, &v);
  assert_int_equal(v.streams_leaked, 0); /* the lane still has a reference: leak comes at release */
}

/* A failure to ask (context activation) is not a verdict on the work: not memoised. */
static void test_witness_transient_failure_not_memoised(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  t4a_witness *w = NULL, *up = NULL;
  assert_int_equal(t4a_retire_fence(r, &w), T4A_OK);
  t4a_fake_progress(f->fake);
  t4a_fake_inject(f->fake, "cuCtxGetCurrent", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  assert_int_equal(t4a_witness_query(w), T4A_DRIVER_ERROR);
  assert_int_equal(t4a_witness_query(w), T4A_OK);
  /* Settled: an upstream added now would be ignored, so it is refused. */
  assert_int_equal(t4a_retire_fence(r, &up), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(w, up), T4A_INVALID_ARGUMENT);
  t4a_witness_release(up);
  t4a_witness_release(w);
  /* Cycles are refused. */
  t4a_witness *a = NULL, *b = NULL;
  assert_int_equal(t4a_retire_fence(r, &a), T4A_OK);
  assert_int_equal(t4a_retire_fence(r, &b), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(a, b), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(b, a), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_witness_add_upstream(a, a), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_witness_wait(a), T4A_OK);
  t4a_witness_release(a);
  t4a_witness_release(b);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

static void test_upstream_witness_pruned(void **state) {
  fixture *f = *state;
  t4a_retire *r0 = NULL, *r1 = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r0), T4A_OK);
  assert_int_equal(t4a_retire_create(f->stack[1].lane, NULL, &r1), T4A_OK);
  t4a_witness *up = NULL, *down = NULL;
  assert_int_equal(admit_memset(f, r0, NULL), T4A_OK);
  assert_int_equal(t4a_retire_fence(r0, &up), T4A_OK);
  assert_int_equal(t4a_retire_fence(r1, &down), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(down, up), T4A_OK);
  assert_int_equal(t4a_witness_num_upstream(down), 1);
  /* down's own event runs, up's does not: down is not complete. */
  t4a_fake_step(f->fake, t4a_lane_stream(f->stack[1].lane));
  assert_int_equal(t4a_witness_query(down), T4A_NOT_READY);
  assert_int_equal(t4a_witness_wait(down), T4A_OK);
  assert_int_equal(t4a_witness_num_upstream(down), 0); /* pruned */
  assert_int_equal(t4a_witness_query(up), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(down, down), T4A_INVALID_ARGUMENT);
  /* An upstream is pruned as soon as it is seen complete, even while the downstream is not. */
  t4a_witness *up2 = NULL, *down2 = NULL;
  assert_int_equal(t4a_retire_fence(r0, &up2), T4A_OK);
  assert_int_equal(t4a_retire_fence(r1, &down2), T4A_OK);
  assert_int_equal(t4a_witness_add_upstream(down2, up2), T4A_OK);
  t4a_fake_step(f->fake, t4a_lane_stream(f->lane)); /* up2's event */
  assert_int_equal(t4a_witness_query(down2), T4A_NOT_READY);
  assert_int_equal(t4a_witness_num_upstream(down2), 0);
  assert_int_equal(t4a_witness_wait(down2), T4A_OK);
  t4a_witness_release(up2);
  t4a_witness_release(down2);
  t4a_witness_release(up);
  t4a_witness_release(down);
  assert_int_equal(t4a_retire_destroy(r0), T4A_OK);
  assert_int_equal(t4a_retire_destroy(r1), T4A_OK);
}

/* Two admissions held at once by one thread (two lanes, two devices): a witness recorded in one
 * and waited in the other orders the second stream after the first without a host wait; the
 * contexts are restored in order; a complete witness enqueues no wait. */
static void test_admission_record_and_cross_wait(void **state) {
  fixture *f = *state;
  t4a_retire *r0 = NULL, *r1 = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r0), T4A_OK);
  assert_int_equal(t4a_retire_create(f->stack[1].lane, NULL, &r1), T4A_OK);
  CUcontext before = NULL, now = NULL;
  assert_int_equal(f->drv->t.cuCtxGetCurrent(&before), CUDA_SUCCESS);
  t4a_counter_values v0, v1;
  t4a_lane_stats(f->stack[1].lane, &v0);
  uint64_t waits_before = v0.host_waits;
  t4a_admission a0, a1;
  assert_int_equal(t4a_admission_begin(r0, 0, &a0), T4A_OK);
  assert_int_equal(t4a_admission_begin(r1, 0, &a1), T4A_OK); /* device 1's context is current */
  t4a_witness *w0 = NULL, *w1 = NULL;
  assert_int_equal(t4a_admission_record(&a0, &w0), T4A_OK); /* recorded under device 0's */
  assert_int_equal(t4a_admission_wait(&a1, w0), T4A_OK);
  assert_int_equal(t4a_admission_record(&a1, &w1), T4A_OK);
  t4a_admission_commit(&a1);
  t4a_admission_commit(&a0);
  assert_int_equal(f->drv->t.cuCtxGetCurrent(&now), CUDA_SUCCESS);
  assert_ptr_equal(now, before);
  /* Stream 1 cannot pass its wait before stream 0 ran. */
  assert_int_equal(t4a_fake_step(f->fake, t4a_lane_stream(f->stack[1].lane)), 0);
  assert_int_equal(t4a_witness_query(w1), T4A_NOT_READY);
  assert_int_equal(t4a_fake_step(f->fake, t4a_lane_stream(f->lane)), 1);
  t4a_fake_progress(f->fake);
  assert_int_equal(t4a_witness_query(w1), T4A_OK);
  t4a_lane_stats(f->stack[1].lane, &v1);
  assert_int_equal(v1.cross_waits - v0.cross_waits, 1);
  assert_int_equal(v1.host_waits, waits_before);
  assert_int_equal(v1.events_recorded - v0.events_recorded, 1);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
  /* w0 is settled complete once observed: waiting on it again enqueues nothing. */
  assert_int_equal(t4a_witness_query(w0), T4A_OK);
  assert_int_equal(t4a_admission_begin(r1, 0, &a1), T4A_OK);
  assert_int_equal(t4a_admission_wait(&a1, w0), T4A_OK);
  t4a_admission_commit(&a1);
  t4a_lane_stats(f->stack[1].lane, &v0);
  assert_int_equal(v0.cross_waits, v1.cross_waits);
  /* Outside an admission: typed. */
  t4a_admission none;
  memset(&none, 0, sizeof none);
  assert_int_equal(t4a_admission_wait(&none, w0), T4A_INVALID_ARGUMENT);
  t4a_witness *w2 = NULL;
  assert_int_equal(t4a_admission_record(&none, &w2), T4A_INVALID_ARGUMENT);
  assert_null(w2);
  t4a_witness_release(w0);
  t4a_witness_release(w1);
  assert_int_equal(t4a_retire_destroy(r0), T4A_OK);
  assert_int_equal(t4a_retire_destroy(r1), T4A_OK);
}

/* A witness settled as failed is never waited on: the admission gets its memoised failure. */
/* Regression (found by testing/fuzz/ops_fuzz.c): when a witness's cuEventRecord failed and the
 * cleanup's cuEventDestroy failed too, the event stayed alive in the driver and was not counted.
 * It is now leaked and counted (`leaked`), as t4a_witness_release does. */
static void test_witness_record_failure_counts_event(void **state) {
  fixture *f = *state;
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  t4a_counter_values before, after;
  t4a_lane_stats(f->lane, &before);
  t4a_fake_live l0, l1;
  t4a_fake_live_objects(f->fake, &l0);
  t4a_admission a;
  assert_int_equal(t4a_admission_begin(r, 0, &a), T4A_OK);
  t4a_fake_inject(f->fake, "cuEventRecord", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_fake_inject(f->fake, "cuEventDestroy", 0, 1, CUDA_ERROR_UNKNOWN, 0);
  t4a_witness *w = (t4a_witness *)1;
  assert_int_equal(t4a_admission_record(&a, &w), T4A_DRIVER_ERROR);
  assert_null(w);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(t4a_admission_abort(&a, T4A_DRIVER_ERROR), T4A_DRIVER_ERROR);
  t4a_fake_live_objects(f->fake, &l1);
  t4a_lane_stats(f->lane, &after);
  assert_int_equal(l1.events - l0.events, 1);           /* the event the driver kept */
  assert_int_equal(after.leaked - before.leaked, 1);    /* ... is counted */
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

/* Requirement A5: a witness whose context cannot be activated at its last release leaks its event
 * (counted), never destroys it without the context. The fake, like the driver, refuses
 * cuEventDestroy with no current context: a release that "destroys anyway" is answered
 * INVALID_CONTEXT (shown on an event made and recorded the way a witness's is). */
static void test_witness_leaked_without_context(void **state) {
  fixture *f = *state;
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  t4a_retire *r = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r), T4A_OK);
  CUcontext cur = (CUcontext)1;
  assert_int_equal(t->cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_null(cur); /* so the release must switch, and the switch can fail */
  static const char *const k_fail[] = {"cuCtxGetCurrent", "cuCtxSetCurrent"};
  for (int i = 0; i < 2; i++) {
    t4a_witness *w = NULL;
    assert_int_equal(t4a_retire_fence(r, &w), T4A_OK);
    assert_int_equal(t4a_witness_wait(w), T4A_OK);
    t4a_counter_values before, after;
    t4a_lane_stats(f->lane, &before);
    t4a_fake_live l0, l1;
    t4a_fake_live_objects(f->fake, &l0);
    uint64_t destroys = t4a_fake_calls(f->fake, "cuEventDestroy");
    uint64_t injected = t4a_fake_injected(f->fake);
    t4a_error_clear();
    t4a_fake_inject(f->fake, k_fail[i], 0, 1, CUDA_ERROR_UNKNOWN, 0);
    t4a_witness_release(w); /* the last reference: the scope cannot be entered */
    t4a_fake_clear_injections(f->fake);
    assert_int_equal(t4a_fake_injected(f->fake) - injected, 1);
    t4a_error e;
    t4a_error_last(&e);
    assert_int_equal(e.status, T4A_OK); /* a drop path leaves the caller's detail alone */
    assert_int_equal(t4a_fake_calls(f->fake, "cuEventDestroy"), destroys);
    t4a_lane_stats(f->lane, &after);
    assert_int_equal(after.leaked - before.leaked, 1); /* leaked, counted */
    t4a_fake_live_objects(f->fake, &l1);
    assert_int_equal(l1.events, l0.events); /* still alive in the driver */
  }
  /* "Destroy anyway": an event of the lane's context, recorded on its stream as a witness's is,
   * destroyed with no context current, is refused and stays alive. */
  t4a_ctx_scope s;
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  CUevent ev = NULL;
  assert_int_equal(t->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  assert_int_equal(t->cuEventRecord(ev, t4a_lane_stream(f->lane)), CUDA_SUCCESS);
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_int_equal(t->cuEventDestroy(ev), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(t4a_ctx_scope_enter(&s, t4a_lane_holder(f->lane), NULL), T4A_OK);
  assert_int_equal(t->cuEventDestroy(ev), CUDA_SUCCESS); /* under its context it goes */
  assert_int_equal(t4a_ctx_scope_exit(&s), T4A_OK);
  assert_int_equal(t4a_retire_destroy(r), T4A_OK);
}

static void test_admission_wait_on_failed_witness(void **state) {
  fixture *f = *state;
  t4a_retire *r0 = NULL, *r1 = NULL;
  assert_int_equal(t4a_retire_create(f->lane, NULL, &r0), T4A_OK);
  assert_int_equal(t4a_retire_create(f->stack[1].lane, NULL, &r1), T4A_OK);
  t4a_witness *w = NULL;
  assert_int_equal(t4a_retire_fence(r0, &w), T4A_OK);
  t4a_fake_set_sticky(f->fake, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(t4a_witness_query(w), T4A_CONTEXT_LOST);
  t4a_admission a1;
  assert_int_equal(t4a_admission_begin(r1, 0, &a1), T4A_OK);
  assert_int_equal(t4a_admission_wait(&a1, w), T4A_UPSTREAM_FAILED);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.code_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(t4a_admission_abort(&a1, T4A_UPSTREAM_FAILED), T4A_UPSTREAM_FAILED);
  /* device 1's lane is not broken by it */
  assert_int_equal(t4a_lane_check(f->stack[1].lane), T4A_OK);
  t4a_witness_release(w);
  assert_int_not_equal(t4a_retire_destroy(r0), T4A_OK);
  assert_int_equal(t4a_retire_destroy(r1), T4A_OK);
}

static void test_bad_arguments(void **state) {
  fixture *f = *state;
  t4a_retire *r = (t4a_retire *)1;
  t4a_retire_options o = T4A_RETIRE_OPTIONS_INIT;
  o.max_pending_records = 1;
  assert_int_equal(t4a_retire_create(f->lane, &o, &r), T4A_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(t4a_retire_create(NULL, NULL, &r), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_retire_destroy(NULL), T4A_OK);
  assert_int_equal(t4a_retire_poll(NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_witness_query(NULL), T4A_INVALID_ARGUMENT);
  t4a_admission adm;
  assert_int_equal(t4a_admission_begin(NULL, 0, &adm), T4A_INVALID_ARGUMENT);
  t4a_witness_release(NULL);
}

/* ---- failure sweep: every public operation, failing the Nth driver call and host alloc ---- */

static t4a_status op_everything(fixture *f) {
  t4a_counter_values before, after;
  t4a_lane_stats(f->lane, &before);
  t4a_retire_options opt = T4A_RETIRE_OPTIONS_INIT;
  opt.max_pending_records = 4;
  opt.max_sealed_epochs = 2;
  t4a_retire *r = NULL;
  t4a_status st = t4a_retire_create(f->lane, &opt, &r);
  if (st != T4A_OK) return st;
  object o = {0};
  t4a_witness *w = NULL, *w2 = NULL;
  for (int i = 0; i < 8 && st == T4A_OK; i++) st = admit_memset(f, r, &o);
  if (st == T4A_OK) st = t4a_retire_poll(r);
  if (st == T4A_OK) st = t4a_retire_fence(r, &w);
  if (st == T4A_OK) st = t4a_retire_fence(r, &w2);
  if (st == T4A_OK) st = t4a_witness_add_upstream(w2, w);
  if (st == T4A_OK) st = t4a_witness_query(w2);
  if (st == T4A_NOT_READY) st = T4A_OK;
  if (st == T4A_OK) st = t4a_witness_wait(w2);
  if (st == T4A_OK) st = t4a_retire_wait(r);
  t4a_witness_release(w);
  t4a_witness_release(w2);
  t4a_status d = t4a_retire_destroy(r);
  if (st == T4A_OK) st = d;
  /* This step's references: every one released, or leaked and counted in this step. */
  t4a_lane_stats(f->lane, &after);
  int held = atomic_load(&o.refs);
  if (held > 0 && (uint64_t)held > after.leaked - before.leaked) {
    fail_msg("%d keepalive references neither released nor counted", held);
  }
  return st;
}

/* Each step ends with the GPU idle, so the next starts from a quiet lane. */
static t4a_status op_step(void *user) {
  fixture *f = user;
  t4a_status st = op_everything(f);
  t4a_fake_progress(f->fake);
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  t4a_sweep s = {.name = "retire", .fake = f->fake, .op = op_step, .user = f};
  g_failures_after_enqueue = 0;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY) > 10);
  /* The work is enqueued but the call reports failure: the operation quarantines through
   * admission_fail. */
  g_failures_after_enqueue = 1;
  s.entry = "cuMemsetD8Async";
  s.after_enqueue = 1;
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_OUT_OF_MEMORY, T4A_DEVICE_OUT_OF_MEMORY) > 4);
  g_failures_after_enqueue = 0;
  const t4a_status allowed[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, allowed, 1) > 0);
  const t4a_status mutex[] = {T4A_INTERNAL};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_MUTEX_INIT, mutex, 1) > 0);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  /* Events still alive are exactly those t4a could not destroy and counted as leaked. */
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  assert_true(live.events <= v.leaked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_warm_chain_records_one_event_per_512, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_drains_by_one_stream_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(test_retirement_under_contention_allocates_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_keepalive_released_only_after_completion, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_borrowed_keepalives_in_one_call, setup, teardown),
      cmocka_unit_test_setup_teardown(test_borrowed_keepalive_retains_once_per_epoch, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reentry_is_typed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads_share_a_lane, setup, teardown),
      cmocka_unit_test_setup_teardown(test_counters_exact_over_shards, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fail_after_enqueue_quarantines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_witness_memoised_across_sticky_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_witness_transient_failure_not_memoised, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_upstream_witness_pruned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fail_marks_context_lost, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_seals_the_open_epoch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_release_runs_outside_the_lock, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_proves_the_drain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keep_beyond_reservation_and_limits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_admission_record_and_cross_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_admission_wait_on_failed_witness, setup, teardown),
      cmocka_unit_test_setup_teardown(test_witness_record_failure_counts_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_witness_leaked_without_context, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
