/* `t4a demo`: see demo_cmd.h. */
#include "tools/demo_cmd.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "examples/warm_chain.h"
#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"

enum { NUM_ARGS = 4 };

/* ---- the kernels on the fake driver: the same arithmetic, for every thread of the grid ---- */

static void host_kernel(t4a_fake_launch *l, void **p, int is_mix) {
  CUdeviceptr in, out;
  uint32_t k;
  int32_t n;
  memcpy(&in, p[0], 8);
  memcpy(&out, p[1], 8);
  memcpy(&k, p[2], 4);
  memcpy(&n, p[3], 4);
  unsigned grid[3], block[3];
  t4a_fake_launch_dims(l, grid, block, NULL);
  int64_t threads = (int64_t)grid[0] * block[0];
  int64_t count = n < threads ? n : threads;
  if (count <= 0) return;
  const uint32_t *x = t4a_fake_deref(l, in, (size_t)count * 4);
  uint32_t *y = t4a_fake_deref(l, out, (size_t)count * 4);
  if (x == NULL || y == NULL) return;
  for (int64_t i = 0; i < count; i++) {
    y[i] = is_mix ? warm_chain_mix(x[i], k, (uint32_t)i) : warm_chain_fold(x[i], k);
  }
}
static void host_mix(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  host_kernel(l, p, 1);
}
static void host_fold(t4a_fake_launch *l, void **p, void *user) {
  (void)user;
  host_kernel(l, p, 0);
}

static int failed(t4a_status st, const char *what) {
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  if (e.status != st) e.status = st;
  printf("t4a demo: %s failed: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  return 0;
}

/* The driver: the default one, or the fake (with the two host kernels) when asked or where no
 * CUDA driver loads. Returns 1, or 0 after printing why. */
static int open_driver(int force_fake, t4a_driver **drv, t4a_fake **fake) {
  t4a_status st = T4A_OK;
  t4a_error e;
  if (!force_fake) {
    st = t4a_driver_get_default(drv);
    if (st == T4A_OK) return 1;
    if (st != T4A_DRIVER_NOT_FOUND && st != T4A_NO_DEVICE) return failed(st, "the driver");
    t4a_error_last(&e);
  }
  printf("t4a demo: %s%s%s: the chain runs on the fake driver (host implementations of its "
         "kernels); NVRTC compiles for real\n",
         force_fake ? "--fake" : "no CUDA driver here (", force_fake ? "" : t4a_status_name(st),
         force_fake ? "" : ")");
  if (!force_fake) printf("driver: %s\n", e.message);
  t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
  st = t4a_fake_create(&fo, fake);
  if (st == T4A_OK) st = t4a_fake_driver(*fake, drv);
  if (st != T4A_OK) return failed(st, "the fake driver");
  static const size_t params[NUM_ARGS] = {8, 8, 4, 4};
  t4a_fake_register_kernel(*fake, "mix", NUM_ARGS, params, host_mix, NULL);
  t4a_fake_register_kernel(*fake, "fold", NUM_ARGS, params, host_fold, NULL);
  return 1;
}

typedef struct demo_driver {
  t4a_driver *drv;
  t4a_fake *fake;
} demo_driver;

/* After the runtime closed: releases the driver; on the fake, returns 1 when nothing is left
 * alive and no stream-ordering violation was seen (printed either way). */
static int close_driver(void *user) {
  demo_driver *dd = user;
  t4a_driver_release(dd->drv);
  t4a_fake *fake = dd->fake;
  if (fake == NULL) return 1;
  (void)t4a_fake_table(fake)->cuCtxSetCurrent(NULL);
  t4a_fake_progress(fake);
  int clean = t4a_fake_nothing_live(fake);
  uint64_t violations = t4a_fake_ordering_violations(fake);
  printf("fake driver: %s, %" PRIu64 " stream-ordering violations\n",
         clean ? "nothing left alive after close" : "OBJECTS LEFT ALIVE after close", violations);
  t4a_fake_destroy(fake);
  return clean && violations == 0;
}

void t4a_cmd_demo_usage(FILE *f) {
  fprintf(f,
          "usage: t4a demo [--n N] [--fake] [--json]\n"
          "  NVRTC compiles two kernels (mix, fold); the runtime (t4a.h) runs a warm chain of N\n"
          "  steps -- mix (a -> b), copy (b -> c), fold (c -> a) -- three ways: checked launches,\n"
          "  launch descriptors and a captured graph; each result is checked against the CPU,\n"
          "  and the counters of the warm pass (launches, events, host waits, NVRTC calls,\n"
          "  module loads, heap allocations) are printed with the host time per launch\n"
          "  (indicative, single run; raw cuLaunchKernel next to it: t4a_bench launch).\n"
          "  --n N    steps of the chain (each: 2 launches and a copy); default 1000\n"
          "  --fake   run on the fake driver of the tests (host kernels) even with a GPU; it is\n"
          "           used anyway when no CUDA driver loads\n"
          "  --json   also print the runtime's counters as JSON (t4a_runtime_stats_json)\n"
          "  Exit: 0 every way matched the CPU and the runtime closed after a proved drain,\n"
          "  1 a step failed or a result was wrong, 2 bad usage.\n");
}

int t4a_cmd_demo(int argc, char **argv) {
  warm_chain_options o = WARM_CHAIN_OPTIONS_INIT;
  int force_fake = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--fake") == 0) {
      force_fake = 1;
    } else if (strcmp(argv[i], "--json") == 0) {
      o.json = 1;
    } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
      char *end = NULL;
      unsigned long n = strtoul(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || n < 1 || n > 10000000) {
        fprintf(stderr, "t4a demo: --n takes 1..10000000 steps\n");
        return 2;
      }
      o.steps = (uint32_t)n;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      t4a_cmd_demo_usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "t4a demo: unknown option %s\n", argv[i]);
      t4a_cmd_demo_usage(stderr);
      return 2;
    }
  }
  demo_driver dd = {NULL, NULL};
  if (!open_driver(force_fake, &dd.drv, &dd.fake)) {
    t4a_driver_release(dd.drv);
    t4a_fake_destroy(dd.fake);
    printf("result: FAILED\n");
    return 1;
  }
  o.driver = dd.drv;
  o.simulated = dd.fake != NULL;
  o.after_close = close_driver;
  o.after_close_user = &dd;
  return warm_chain_run(&o, stdout);
}
