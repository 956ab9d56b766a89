/* testing/sweep — failure sweeps on the fake driver, shared by every library's tests.
 *
 * A sweep runs one operation again and again, failing the Nth fallible call for N = 0, 1, 2 …
 * until the operation succeeds untouched. Each step must return either T4A_OK (the failure hit a
 * drop path, which absorbs and counts it) or the expected status with full detail, and must leave
 * nothing alive in the fake beyond what t4a counted as leaked. Violations fail the running cmocka
 * test with the step number. Test code only. */
#ifndef T4A_TESTING_SWEEP_H_
#define T4A_TESTING_SWEEP_H_

#include <stddef.h>

#include "t4a/status.h"
#include "testing/fake_driver/fake_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The operation under test; `user` is the sweep's. */
typedef t4a_status (*t4a_sweep_op)(void *user);
/* Objects alive beyond what t4a counted as leaked (0 = clean). NULL: not checked. */
typedef long (*t4a_sweep_unaccounted)(void *user);

typedef struct t4a_sweep {
  const char *name;              /* for messages */
  t4a_fake *fake;
  t4a_sweep_op op;
  t4a_sweep_unaccounted unaccounted;
  void *user;
  const char *entry;             /* driver sweeps: the entry to fail, NULL = any entry */
  int after_enqueue;             /* driver sweeps: the failing call still enqueues its work */
  int max_steps;                 /* 0: 500 */
} t4a_sweep;

/* Fails the Nth driver call with `code` for every N; a surfaced failure must be `want` with the
 * injected code and a cu* entry in the detail. Returns how many steps surfaced a failure. */
int t4a_sweep_driver(const t4a_sweep *sweep, CUresult code, t4a_status want);

/* Fails the Nth fault point `point` (host allocation, mutex init…) for every N; a surfaced
 * failure must be one of `allowed`. Returns how many steps surfaced a failure. */
int t4a_sweep_fault(const t4a_sweep *sweep, t4a_fault_point point, const t4a_status *allowed,
                    size_t num_allowed);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TESTING_SWEEP_H_ */
