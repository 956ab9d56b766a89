/* The streams of one domain at the lane level (design §4): siblings share holder and domain;
 * marks, marker events and waits amortised as stated; a member leaving after a proved drain (its
 * marks then need nothing) or without one (the group is tainted: LANE_BROKEN); orders refused
 * into a capture with nothing enqueued; the slot limit and its reuse with a new generation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"

#define CK(x) assert_int_equal((x), T4A_OK)

typedef t4a_fixture fixture;

static int setup(void **state) {
  t4a_fixture_options o = t4a_fixture_defaults();
  o.stacks = 0;
  return t4a_fixture_setup(state, &o);
}
static int teardown(void **state) { return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT); }
/* The test that abandons a lane leaves its stream in the fake (counted): ordering checked only. */
static int teardown_leaky(void **state) {
  return t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_ORDERING);
}

static uint64_t count(t4a_lane *lane, size_t offset) {
  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  uint64_t x;
  memcpy(&x, (const char *)&v + offset, sizeof x);
  return x;
}
#define COUNT(lane, name) count((lane), offsetof(t4a_counter_values, name))

/* Orders b after a's mark inside a's context (the lanes share it). */
static t4a_status order(t4a_lane *waiter, t4a_lane_mark_ m) {
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(waiter), NULL);
  if (st != T4A_OK) return st;
  st = t4a_lane_order_after_(waiter, m);
  t4a_ctx_scope_exit_quiet(&scope);
  return st;
}

static void test_sibling_shares_holder_and_domain(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL, *c = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &a));
  assert_int_equal(t4a_lane_grouped_(a), 0);
  t4a_lane_options o = T4A_LANE_OPTIONS_INIT;
  o.priority = -2;
  CK(t4a_lane_create_sibling(a, &o, &b));
  CK(t4a_lane_create_sibling(b, NULL, &c)); /* a sibling of a sibling: the same group */
  assert_true(t4a_lane_grouped_(a) && t4a_lane_grouped_(b) && t4a_lane_grouped_(c));
  assert_int_equal(t4a_lane_domain(b), t4a_lane_domain(a));
  assert_int_equal(t4a_lane_domain(c), t4a_lane_domain(a));
  assert_ptr_equal(t4a_lane_holder(b), t4a_lane_holder(a));
  assert_true(t4a_lane_stream(b) != t4a_lane_stream(a));
  assert_int_equal(t4a_lane_priority(b), -2);
  assert_int_equal(t4a_lane_priority(c), 0);
  int least = 1, greatest = 1;
  CK(t4a_lane_priority_range(b, &least, &greatest));
  assert_int_equal(least, 0);
  assert_int_equal(greatest, -5);
  /* The origin may go first: the siblings hold the holder. */
  t4a_lane_release(a);
  t4a_lane_mark_ m = t4a_lane_mark_now_(c);
  CK(order(b, m));
  t4a_lane_release(c);
  t4a_lane_release(b);
  t4a_counter_values d;
  t4a_driver_stats(f->drv, &d);
  assert_int_equal(d.streams_sibling, 2);
  assert_int_equal(d.streams_destroyed, 3);
}

/* One marker record and one wait cover any number of marks taken before; a newer mark needs a
 * new record and wait; a mark of the waiter itself, and the zero mark, need nothing. */
static void test_orders_are_amortised(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &a));
  CK(t4a_lane_create_sibling(a, NULL, &b));
  t4a_lane_mark_ m[3];
  for (int i = 0; i < 3; i++) m[i] = t4a_lane_mark_now_(a);
  uint64_t records = t4a_fake_calls(f->fake, "cuEventRecord");
  uint64_t waits = t4a_fake_calls(f->fake, "cuStreamWaitEvent");
  CK(order(b, m[2])); /* the newest first: the record covers the older ones */
  CK(order(b, m[0]));
  CK(order(b, m[1]));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord") - records, 1);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamWaitEvent") - waits, 1);
  assert_int_equal(COUNT(a, cross_stream_events), 1);
  assert_int_equal(COUNT(a, events_recorded), 1);
  assert_int_equal(COUNT(b, cross_stream_waits), 1);
  t4a_lane_mark_ own = t4a_lane_mark_now_(b), zero = {0, 0, 0};
  CK(order(b, own));
  CK(order(b, zero));
  CK(order(a, zero));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord") - records, 1);
  t4a_lane_mark_ newer = t4a_lane_mark_now_(a);
  CK(order(b, newer));
  assert_int_equal(COUNT(a, cross_stream_events), 2);
  assert_int_equal(COUNT(b, cross_stream_waits), 2);
  /* The other way round: a after b's mark taken above. */
  CK(order(a, own));
  assert_int_equal(COUNT(b, cross_stream_events), 1);
  assert_int_equal(COUNT(a, cross_stream_waits), 1);
  /* "After everything": one record and one wait per other stream with marks. */
  CK(t4a_lane_order_after_all_(b)); /* a's marks are covered: nothing */
  assert_int_equal(COUNT(b, cross_stream_waits), 2);
  assert_int_equal(COUNT(b, host_waits) + COUNT(a, host_waits), 0);
  t4a_lane_release(b); /* it had marks: its leave proves a drain (a counted host wait) */
  t4a_lane_release(a);
}

/* A member that left after a proved drain: its marks need nothing. One that left abandoned (no
 * proved drain) taints the group: its marks are LANE_BROKEN. */
static void test_leave_with_and_without_a_drain(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL, *c = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &a));
  CK(t4a_lane_create_sibling(a, NULL, &b));
  t4a_lane_mark_ mb = t4a_lane_mark_now_(b);
  uint64_t syncs = t4a_fake_calls(f->fake, "cuStreamSynchronize");
  t4a_lane_release(b); /* marks since its last drain: it waits for its stream */
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamSynchronize") - syncs, 1);
  uint64_t enq = t4a_fake_calls(f->fake, "cuEventRecord") +
                 t4a_fake_calls(f->fake, "cuStreamWaitEvent");
  CK(order(a, mb)); /* its slot is free: nothing to order after */
  /* A new member takes the slot with a new generation; b's old mark is not its. */
  CK(t4a_lane_create_sibling(a, NULL, &c));
  CK(order(a, mb));
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord") +
                       t4a_fake_calls(f->fake, "cuStreamWaitEvent"),
                   enq);
  /* A proved drain noted before leaving: no host wait at the leave. */
  t4a_lane_mark_ mc = t4a_lane_mark_now_(c);
  uint64_t seq = t4a_lane_mark_seq_(c);
  CK(t4a_lane_synchronize(c));
  t4a_lane_note_drained_(c, seq);
  syncs = t4a_fake_calls(f->fake, "cuStreamSynchronize");
  t4a_lane_release(c);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamSynchronize"), syncs);
  CK(order(a, mc));
  /* Abandoned with marks: tainted. */
  t4a_lane *d = NULL;
  CK(t4a_lane_create_sibling(a, NULL, &d));
  t4a_lane_mark_ md = t4a_lane_mark_now_(d);
  t4a_lane_abandon_(d);
  t4a_lane_release(d); /* its stream is leaked (counted) */
  assert_int_equal(order(a, md), T4A_LANE_BROKEN);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "without a proved drain"));
  t4a_lane_release(a);
  t4a_counter_values dv;
  t4a_driver_stats(f->drv, &dv);
  assert_int_equal(dv.streams_leaked, 1);
  /* The fake holds the abandoned stream: what t4a counted. */
  t4a_fake_live lv;
  t4a_fake_live_objects(f->fake, &lv);
  assert_int_equal(lv.streams, 1);
}

/* Orders into a capture are refused with nothing enqueued: the waiter capturing, or the marked
 * stream capturing when a new record would be needed. */
static void test_orders_refused_into_a_capture(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *b = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &a));
  CK(t4a_lane_create_sibling(a, NULL, &b));
  t4a_lane_mark_ m = t4a_lane_mark_now_(a);
  uint64_t calls = t4a_fake_calls(f->fake, NULL);
  t4a_lane_set_capturing_(b, 1);
  assert_int_equal(order(b, m), T4A_UNSUPPORTED);
  t4a_lane_set_capturing_(b, 0);
  t4a_lane_set_capturing_(a, 1);
  assert_int_equal(order(b, m), T4A_UNSUPPORTED);
  t4a_lane_set_capturing_(a, 0);
  /* Only the scope's context calls: nothing recorded or waited. */
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord"), 0);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamWaitEvent"), 0);
  assert_true(t4a_fake_calls(f->fake, NULL) >= calls);
  CK(order(b, m));
  t4a_lane_release(b);
  t4a_lane_release(a);
}

static void test_slot_limit(void **state) {
  fixture *f = *state;
  t4a_lane *a = NULL, *s[T4A_LANE_MAX_STREAMS];
  CK(t4a_lane_create(f->drv, 0, NULL, &a));
  for (int i = 0; i < T4A_LANE_MAX_STREAMS - 1; i++) CK(t4a_lane_create_sibling(a, NULL, &s[i]));
  t4a_lane *over = (t4a_lane *)1;
  uint64_t streams = t4a_fake_calls(f->fake, "cuStreamCreateWithPriority");
  assert_int_equal(t4a_lane_create_sibling(a, NULL, &over), T4A_LIMIT_EXCEEDED);
  assert_null(over);
  assert_int_equal(t4a_fake_calls(f->fake, "cuStreamCreateWithPriority"), streams);
  t4a_lane_options bad = {1};
  assert_int_equal(t4a_lane_create_sibling(s[0], &bad, &over), T4A_LIMIT_EXCEEDED);
  t4a_lane_release(s[3]);
  assert_int_equal(t4a_lane_create_sibling(a, &bad, &over), T4A_INVALID_ARGUMENT);
  assert_null(over);
  CK(t4a_lane_create_sibling(a, NULL, &s[3]));
  for (int i = 0; i < T4A_LANE_MAX_STREAMS - 1; i++) t4a_lane_release(s[i]);
  t4a_lane_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sibling_shares_holder_and_domain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_orders_are_amortised, setup, teardown),
      cmocka_unit_test_setup_teardown(test_leave_with_and_without_a_drain, setup,
                                      teardown_leaky),
      cmocka_unit_test_setup_teardown(test_orders_refused_into_a_capture, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_limit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
