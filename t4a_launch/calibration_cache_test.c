/* The process's calibration table (t4a_launch_calibrate_device) on the fake driver: one
 * measurement per driver and device (told apart by the driver's address), later calls answered
 * from the table; a failed measurement is not stored; once the table is full a new pair is measured at every call and counted
 * (not_stored), and no stored pair is overwritten. The table is process-wide: this file is the
 * only user in its process, and every test starts from the figures the previous one left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/launch.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/host_kernels.h"

#define CK(x) assert_int_equal((x), T4A_OK)

enum { DRIVERS = 3 };

/* The standard fake of T4A_FAKE_MAX_DEVICES devices (no stacks: the table opens its own lanes)
 * and DRIVERS drivers over it (the fixture's and DRIVERS - 1 more, each its own t4a_driver, so
 * its own pairs): more pairs than the table holds. */
typedef struct fixture {
  t4a_fixture fx;
  t4a_fake *fake;
  t4a_driver *drv[DRIVERS];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  *state = f;
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = T4A_FAKE_MAX_DEVICES;
  o.stacks = 0;
  if (t4a_fixture_init(&f->fx, &o) != T4A_OK) return -1;
  f->fake = f->fx.fake;
  f->drv[0] = f->fx.drv;
  for (int i = 1; i < DRIVERS; i++) {
    if (t4a_fake_driver(f->fake, &f->drv[i]) != T4A_OK) return -1;
  }
  t4a_host_kernel_register(f->fake, &t4a_hk_nop, "t4a_nop", NULL);
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  for (int i = 1; i < DRIVERS; i++) t4a_driver_release(f->drv[i]);
  int rc = t4a_fixture_fini(&f->fx, T4A_FIXTURE_CHECK_STRICT);
  free(f);
  return rc;
}

static struct t4a_launch_calibration_cache_stats table_stats(void) {
  struct t4a_launch_calibration_cache_stats s;
  memset(&s, 0xff, sizeof s);
  t4a_launch_calibration_cache_stats(&s);
  return s;
}

/* Pair i: driver i / T4A_FAKE_MAX_DEVICES, device i % T4A_FAKE_MAX_DEVICES. */
static t4a_driver *drv_of(fixture *f, uint32_t i) { return f->drv[i / T4A_FAKE_MAX_DEVICES]; }
static int ord_of(uint32_t i) { return (int)(i % T4A_FAKE_MAX_DEVICES); }

static void test_refusals(void **state) {
  fixture *f = *state;
  t4a_launch_calibration c;
  memset(&c, 0xff, sizeof c);
  assert_int_equal(t4a_launch_calibrate_device(NULL, 0, &c), T4A_INVALID_ARGUMENT);
  assert_int_equal(c.fires, 0);
  assert_int_equal(t4a_launch_calibrate_device(f->drv[0], 0, NULL), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_launch_calibrate_device(f->drv[0], T4A_FAKE_MAX_DEVICES, &c),
                   T4A_INVALID_DEVICE);
  t4a_launch_calibration_cache_stats(NULL); /* nothing to write */
  struct t4a_launch_calibration_cache_stats s = table_stats();
  assert_int_equal(s.capacity, T4A_LAUNCH_CALIBRATION_CACHE_SLOTS);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.measured, 0);
  assert_int_equal(s.reused, 0);
  assert_int_equal(s.not_stored, 0);
}

/* No graph can be built: UNSUPPORTED, zero figures, nothing stored; the next call measures. */
static void test_failure_is_not_stored(void **state) {
  fixture *f = *state;
  struct t4a_launch_calibration_cache_stats s0 = table_stats();
  t4a_launch_calibration c;
  t4a_fake_inject(f->fake, "cuGraphCreate", 0, 1000, CUDA_ERROR_NOT_SUPPORTED, 0);
  assert_int_equal(t4a_launch_calibrate_device(f->drv[0], 0, &c), T4A_UNSUPPORTED);
  t4a_fake_clear_injections(f->fake);
  assert_int_equal(c.fires, 0);
  struct t4a_launch_calibration_cache_stats s1 = table_stats();
  assert_int_equal(s1.entries, s0.entries);
  assert_int_equal(s1.measured, s0.measured);
  CK(t4a_launch_calibrate_device(f->drv[0], 0, &c));
  assert_true(c.fires >= 64 && c.plain_ns > 0 && c.graph_ns > 0);
  s1 = table_stats();
  assert_int_equal(s1.entries, s0.entries + 1);
  assert_int_equal(s1.measured, s0.measured + 1);
}

/* Fill the table, then one pair more: measured at every call, counted, never stored; every
 * stored pair still answers from the table with its own figures. */
static void test_full_table_is_counted(void **state) {
  fixture *f = *state;
  enum { SLOTS = T4A_LAUNCH_CALIBRATION_CACHE_SLOTS };
  assert_true(SLOTS < DRIVERS * T4A_FAKE_MAX_DEVICES);
  t4a_launch_calibration first[SLOTS], c;
  /* Pair 0 was stored by the test before: a reuse. */
  struct t4a_launch_calibration_cache_stats s = table_stats();
  uint32_t start = s.entries;
  assert_int_equal(start, 1);
  uint64_t built0 = t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags");
  CK(t4a_launch_calibrate_device(f->drv[0], 0, &first[0]));
  assert_int_equal(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags"), built0);
  assert_int_equal(table_stats().reused, s.reused + 1);
  for (uint32_t i = start; i < SLOTS; i++) {
    CK(t4a_launch_calibrate_device(drv_of(f, i), ord_of(i), &first[i]));
    assert_true(first[i].fires >= 64);
    assert_int_equal(table_stats().entries, i + 1);
  }
  s = table_stats();
  assert_int_equal(s.entries, SLOTS);
  assert_int_equal(s.not_stored, 0);
  /* One pair more, twice: two measurements (graphs built each time), nothing stored. */
    for (int k = 1; k <= 2; k++) {
    uint64_t built = t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags");
    CK(t4a_launch_calibrate_device(drv_of(f, SLOTS), ord_of(SLOTS), &c));
    assert_true(c.fires >= 64 && c.plain_ns > 0);
    assert_true(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags") > built);
    struct t4a_launch_calibration_cache_stats t = table_stats();
    assert_int_equal(t.entries, SLOTS);
    assert_int_equal(t.not_stored, (uint64_t)k);
    assert_int_equal(t.measured, s.measured + (uint64_t)k);
  }
  /* Every stored pair, the last one included, still answers from the table. */
  s = table_stats();
  for (uint32_t i = 0; i < SLOTS; i++) {
    uint64_t built = t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags");
    CK(t4a_launch_calibrate_device(drv_of(f, i), ord_of(i), &c));
    assert_memory_equal(&c, &first[i], sizeof c);
    assert_int_equal(t4a_fake_calls(f->fake, "cuGraphInstantiateWithFlags"), built);
  }
  struct t4a_launch_calibration_cache_stats t = table_stats();
  assert_int_equal(t.reused, s.reused + SLOTS);
  assert_int_equal(t.measured, s.measured);
  assert_int_equal(t.not_stored, 2);
}

int main(void) {
  /* In order: each test continues from the table the one before left. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_failure_is_not_stored),
      cmocka_unit_test(test_full_table_is_counted),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
