/* Failure sweeps on the fake driver (see sweep.h). */
#include "testing/sweep/sweep.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/fault.h"

static int max_steps(const t4a_sweep *s) { return s->max_steps > 0 ? s->max_steps : 500; }

/* Every step leaves the thread with no current context, as it found it. */
static void reset_thread(const t4a_sweep *s) {
  (void)t4a_fake_table(s->fake)->cuCtxSetCurrent(NULL);
}

static void check_leaks(const t4a_sweep *s, const char *what, int n) {
  if (s->unaccounted == NULL) return;
  long extra = s->unaccounted(s->user);
  if (extra > 0) fail_msg("%s: %s %d left %ld objects alive uncounted", s->name, what, n, extra);
}

int t4a_sweep_driver(const t4a_sweep *s, CUresult code, t4a_status want) {
  int surfaced = 0;
  for (int n = 0;; n++) {
    if (n >= max_steps(s)) fail_msg("%s: no success after %d steps", s->name, n);
    t4a_fake_clear_injections(s->fake);
    t4a_fake_inject(s->fake, s->entry, (uint64_t)n, 1, code, s->after_enqueue);
    uint64_t before = t4a_fake_injected(s->fake);
    t4a_error_clear();
    t4a_status st = s->op(s->user);
    int fired = t4a_fake_injected(s->fake) != before;
    t4a_fake_clear_injections(s->fake);
    reset_thread(s);
    if (!fired) {
      if (st != T4A_OK) fail_msg("%s: untouched run returned %s", s->name, t4a_status_name(st));
      break;
    }
    if (st != T4A_OK) {
      surfaced++;
      t4a_error e;
      t4a_error_last(&e);
      if (st != want || e.status != st || e.code != (int)code || strncmp(e.entry, "cu", 2) != 0) {
        fail_msg("%s: driver call %d: returned %s, detail %s from '%s' (%d); want %s (%d)",
                 s->name, n, t4a_status_name(st), t4a_status_name(e.status), e.entry, e.code,
                 t4a_status_name(want), (int)code);
      }
    }
    check_leaks(s, "driver call", n);
  }
  return surfaced;
}

typedef struct fault_plan {
  t4a_fault_point point;
  int fail_at;
  int seen;
} fault_plan;

static int fail_nth(t4a_fault_point p, void *user) {
  fault_plan *plan = user;
  return p == plan->point && plan->seen++ == plan->fail_at;
}

int t4a_sweep_fault(const t4a_sweep *s, t4a_fault_point point, const t4a_status *allowed,
                    size_t num_allowed) {
  int surfaced = 0;
  for (int n = 0;; n++) {
    if (n >= max_steps(s)) fail_msg("%s: no success after %d steps", s->name, n);
    fault_plan plan = {point, n, 0};
    t4a_fault_set_hook(fail_nth, &plan);
    t4a_status st = s->op(s->user);
    t4a_fault_set_hook(NULL, NULL);
    reset_thread(s);
    if (plan.seen <= n) {
      if (st != T4A_OK) fail_msg("%s: untouched run returned %s", s->name, t4a_status_name(st));
      break;
    }
    if (st != T4A_OK) {
      surfaced++;
      int ok = 0;
      for (size_t i = 0; i < num_allowed; i++) ok |= st == allowed[i];
      if (!ok) {
        fail_msg("%s: %s fault %d returned %s", s->name, t4a_fault_point_name(point), n,
                 t4a_status_name(st));
      }
    }
    check_leaks(s, t4a_fault_point_name(point), n);
  }
  return surfaced;
}
