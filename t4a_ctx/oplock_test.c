/* The operation lock: mutual exclusion under contention, sleepers woken, try-lock. */
#define _POSIX_C_SOURCE 200809L
/* cmocka needs the standard headers before it. */
// clang-format off
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>
// clang-format on

#include "t4a_ctx/oplock.h"

#define THREADS 4
#define ROUNDS 20000

typedef struct shared {
  t4a_oplock_ lock;
  uint64_t plain; /* written only under the lock: a lost update shows a broken exclusion */
  int inside;     /* holders at once: must stay 1 */
  int overlapped;
} shared;

static void *hammer(void *arg) {
  shared *s = arg;
  for (int i = 0; i < ROUNDS; i++) {
    t4a_oplock_lock_(&s->lock);
    if (++s->inside != 1) s->overlapped = 1;
    s->plain++;
    /* Now and then hold it long enough that the others spin out and sleep. */
    if (i % 1024 == 0) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
    s->inside--;
    t4a_oplock_unlock_(&s->lock);
  }
  return NULL;
}

static void test_contended_updates_are_not_lost(void **state) {
  (void)state;
  shared s = {.lock = T4A_OPLOCK_INIT_};
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, hammer, &s), 0);
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(s.plain, (uint64_t)THREADS * ROUNDS);
  assert_int_equal(s.overlapped, 0);
  /* Every sleeper was woken and the last holder left it free. */
  assert_int_equal(atomic_load(&s.lock.state), 0);
}

static void *take_and_mark(void *arg) {
  shared *s = arg;
  t4a_oplock_lock_(&s->lock);
  s->plain = 7;
  t4a_oplock_unlock_(&s->lock);
  return NULL;
}

static void test_a_sleeper_is_woken_by_the_unlock(void **state) {
  (void)state;
  shared s = {.lock = T4A_OPLOCK_INIT_};
  t4a_oplock_lock_(&s.lock);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, take_and_mark, &s), 0);
  /* Wait until the other thread has marked the lock as having a sleeper (it spun out). */
  while (atomic_load(&s.lock.state) != 2) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(s.plain, 0);
  t4a_oplock_unlock_(&s.lock);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(s.plain, 7);
  assert_int_equal(atomic_load(&s.lock.state), 0);
}

static void test_trylock_takes_only_a_free_lock(void **state) {
  (void)state;
  t4a_oplock_ l = T4A_OPLOCK_INIT_;
  assert_true(t4a_oplock_trylock_(&l));
  assert_false(t4a_oplock_trylock_(&l));
  t4a_oplock_unlock_(&l);
  assert_true(t4a_oplock_trylock_(&l));
  t4a_oplock_unlock_(&l);
  assert_int_equal(atomic_load(&l.state), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_contended_updates_are_not_lost),
      cmocka_unit_test(test_a_sleeper_is_woken_by_the_unlock),
      cmocka_unit_test(test_trylock_takes_only_a_free_lock),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
