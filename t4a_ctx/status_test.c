/* Status vocabulary, per-thread error detail, fault points and counters. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/status.h"
#include "t4a_ctx/counters_block.h"
#include "t4a_ctx/status_internal.h"

static void test_values_are_stable(void **state) {
  (void)state;
  /* These numbers are ABI: a change here is a break for every user. */
  assert_int_equal(T4A_OK, 0);
  assert_int_equal(T4A_INVALID_ARGUMENT, 1);
  assert_int_equal(T4A_DEVICE_OUT_OF_MEMORY, 3);
  assert_int_equal(T4A_DRIVER_NOT_FOUND, 4);
  assert_int_equal(T4A_CONTEXT_LOST, 11);
  assert_int_equal(T4A_REENTRY, 13);
  assert_int_equal(T4A_BUSY, 29);
}

static void test_names_and_messages(void **state) {
  (void)state;
  assert_string_equal(t4a_status_name(T4A_OK), "OK");
  assert_string_equal(t4a_status_name(T4A_DEVICE_OUT_OF_MEMORY), "DEVICE_OUT_OF_MEMORY");
  assert_string_equal(t4a_status_name((t4a_status)12345), "UNKNOWN");
  assert_string_equal(t4a_status_str((t4a_status)-1), "unknown status");
  /* Every value in the table has a distinct name and a message. */
  const t4a_status all[] = {
#define T4A_ALL_(name, value, msg) T4A_##name,
      T4A_STATUS_MAP(T4A_ALL_)
#undef T4A_ALL_
  };
  size_t n = sizeof all / sizeof all[0];
  for (size_t i = 0; i < n; i++) {
    assert_string_not_equal(t4a_status_name(all[i]), "UNKNOWN");
    assert_true(strlen(t4a_status_str(all[i])) > 0);
    for (size_t j = 0; j < i; j++) assert_int_not_equal(all[i], all[j]);
  }
}

static void test_detail_is_recorded_and_formatted(void **state) {
  (void)state;
  t4a_error_clear();
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_OK);
  assert_string_equal(e.entry, "");
  assert_int_equal(t4a_error_set_(T4A_DEVICE_OUT_OF_MEMORY, "cuMemAllocFromPoolAsync", 2,
                                  "CUDA_ERROR_OUT_OF_MEMORY", 1048576, "pool %d", 7),
                   T4A_DEVICE_OUT_OF_MEMORY);
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_DEVICE_OUT_OF_MEMORY);
  assert_string_equal(e.entry, "cuMemAllocFromPoolAsync");
  assert_int_equal(e.code, 2);
  assert_string_equal(e.code_name, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(e.bytes, 1048576);
  assert_string_equal(e.message, "pool 7");
  char buf[256];
  assert_string_equal(t4a_error_format(&e, buf, sizeof buf),
                      "DEVICE_OUT_OF_MEMORY: pool 7 [cuMemAllocFromPoolAsync -> "
                      "CUDA_ERROR_OUT_OF_MEMORY (2)] (1048576 bytes)");
  /* A failure with an entry but no native code names the entry alone. */
  t4a_error plain = {.status = T4A_DRIVER_NOT_FOUND, .entry = "dlopen", .code_name = ""};
  snprintf(plain.message, sizeof plain.message, "no driver");
  assert_string_equal(t4a_error_format(&plain, buf, sizeof buf),
                      "DRIVER_NOT_FOUND: no driver [dlopen]");
  /* A tiny buffer is still terminated. */
  assert_int_equal(strlen(t4a_error_format(&e, buf, 5)), 4);
}

/* Several threads failing at once each keep their own detail. */
typedef struct thread_arg {
  int id;
  int ok;
} thread_arg;

static void *fail_many(void *p) {
  thread_arg *a = p;
  a->ok = 1;
  for (int i = 0; i < 20000; i++) {
    t4a_error_set_(T4A_DRIVER_ERROR, "cuX", a->id, "NAME", (uint64_t)a->id * 1000 + (uint64_t)i,
                   "thread %d iteration %d", a->id, i);
    t4a_error e;
    t4a_error_last(&e);
    char want[64];
    snprintf(want, sizeof want, "thread %d iteration %d", a->id, i);
    if (e.code != a->id || e.bytes != (uint64_t)a->id * 1000 + (uint64_t)i ||
        strcmp(e.message, want) != 0) {
      a->ok = 0;
    }
  }
  return NULL;
}

static void test_detail_is_per_thread(void **state) {
  (void)state;
  pthread_t t[8];
  thread_arg args[8];
  for (int i = 0; i < 8; i++) {
    args[i].id = i + 1;
    assert_int_equal(pthread_create(&t[i], NULL, fail_many, &args[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    assert_true(args[i].ok);
  }
}

static int g_fail_at;
static int g_seen;
static int fail_nth(t4a_fault_point point, void *user) {
  (void)point;
  (void)user;
  return g_seen++ == g_fail_at;
}

static void test_fault_points(void **state) {
  (void)state;
  assert_int_equal(t4a_fault_sim(T4A_FAULT_HOST_MALLOC), 0);
  assert_string_equal(t4a_fault_point_name(T4A_FAULT_DLOPEN), "DLOPEN");
  assert_string_equal(t4a_fault_point_name(T4A_FAULT_POINT_COUNT), "UNKNOWN");
  g_fail_at = 1;
  g_seen = 0;
  t4a_fault_set_hook(fail_nth, NULL);
  void *a = t4a_host_malloc(16);
  void *b = t4a_host_malloc(32);
  void *c = t4a_host_calloc(4, 8);
  t4a_fault_set_hook(NULL, NULL);
  assert_non_null(a);
  assert_null(b);
  assert_non_null(c);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_HOST_OUT_OF_MEMORY);
  assert_int_equal(e.bytes, 32);
  free(a);
  free(c);
  /* Overflowing calloc is refused without calling the allocator. */
  assert_null(t4a_host_calloc(SIZE_MAX / 2, 4));
  t4a_error_last(&e);
  assert_int_equal(e.status, T4A_HOST_OUT_OF_MEMORY);
}

static void test_counters(void **state) {
  (void)state;
  t4a_counters c;
  memset(&c, 0, sizeof c);
  t4a_counter_add(&c, T4A_COUNTER_host_waits, 3);
  t4a_counter_add(&c, T4A_COUNTER_events_recorded, 1);
  t4a_counter_values v;
  t4a_counters_stats(&c, &v);
  assert_int_equal(v.host_waits, 3);
  assert_int_equal(v.events_recorded, 1);
  assert_int_equal(v.ctx_activations, 0);
  assert_int_equal(t4a_counter_value(&v, T4A_COUNTER_host_waits), 3);
  assert_string_equal(t4a_counter_name(T4A_COUNTER_host_waits), "host_waits");
  assert_non_null(t4a_counter_description(T4A_COUNTER_host_waits));
  assert_null(t4a_counter_name(T4A_COUNTER_COUNT));
  t4a_counters_stats(NULL, &v);
  assert_int_equal(v.host_waits, 0);
}

/* Single-writer shards: summed into every read, one owner each, values kept when given back. */
static void test_counter_shards(void **state) {
  (void)state;
  t4a_counters c;
  memset(&c, 0, sizeof c);
  t4a_counter_shard_ sh[2];
  memset(sh, 0, sizeof sh);
  assert_null(t4a_counters_take_shard_(&c)); /* a block without shards */
  c.shards = sh;
  c.num_shards = 2;
  t4a_counter_shard_ *a = t4a_counters_take_shard_(&c), *b = t4a_counters_take_shard_(&c);
  assert_ptr_equal(a, &sh[0]);
  assert_ptr_equal(b, &sh[1]);
  assert_null(t4a_counters_take_shard_(&c)); /* both owned: the owner counts atomically */
  t4a_counter_add(&c, T4A_COUNTER_admissions, 1);
  t4a_counter_add_owned_(&c, a, T4A_COUNTER_admissions, 10);
  t4a_counter_add_owned_(&c, b, T4A_COUNTER_admissions, 100);
  t4a_counter_add_owned_(&c, b, T4A_COUNTER_launches, 7);
  t4a_counter_add_owned_(&c, b, T4A_COUNTER_host_waits, 2); /* no word in a shard: the block's */
  t4a_counter_add_owned_(&c, NULL, T4A_COUNTER_launches, 1); /* no shard: the block's */
  assert_int_equal(atomic_load(&c.v[T4A_COUNTER_host_waits]), 2);
  assert_int_equal(atomic_load(&b->v[T4A_SHARD_SLOT_launches]), 7);
  t4a_counter_values v;
  t4a_counters_stats(&c, &v);
  assert_int_equal(v.admissions, 111);
  assert_int_equal(v.launches, 8);
  assert_int_equal(v.host_waits, 2);
  t4a_counters_put_shard_(&c, a);
  t4a_counters_put_shard_(&c, NULL); /* nothing */
  t4a_counters_stats(&c, &v);
  assert_int_equal(v.admissions, 111); /* a shard given back stays counted */
  assert_ptr_equal(t4a_counters_take_shard_(&c), a); /* and is the next owner's */
  t4a_counter_add_owned_(&c, a, T4A_COUNTER_admissions, 1);
  t4a_counters_stats(&c, &v);
  assert_int_equal(v.admissions, 112);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter_shards),
      cmocka_unit_test(test_values_are_stable),
      cmocka_unit_test(test_names_and_messages),
      cmocka_unit_test(test_detail_is_recorded_and_formatted),
      cmocka_unit_test(test_detail_is_per_thread),
      cmocka_unit_test(test_fault_points),
      cmocka_unit_test(test_counters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
