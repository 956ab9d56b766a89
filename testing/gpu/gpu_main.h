/* The shared entry of every GPU test (label gpu): opens the real driver and runs the cmocka group.
 * Without a driver (DRIVER_NOT_FOUND) it prints SKIP and returns 77, which CTest counts as a
 * skip; any other load failure (too old, symbol missing) is a failure, never a skip. With
 * min_devices > 1 a host with fewer devices fails with an explicit message: a multi-GPU claim must
 * never pass silently. Test code; include it in exactly one file per test binary. */
#ifndef T4A_TESTING_GPU_GPU_MAIN_H_
#define T4A_TESTING_GPU_GPU_MAIN_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "t4a/ctx.h"

/* Runs `tests` with *driver open (released afterwards). Returns the process exit code. */
static inline int t4a_gpu_test_main(const char *name, const struct CMUnitTest *tests, size_t count,
                                    int min_devices, t4a_driver **driver) {
  char buf[512];
  t4a_error e;
  t4a_status st = t4a_driver_open(NULL, driver);
  if (st != T4A_OK) {
    t4a_error_last(&e);
    printf("%s: %s\n", st == T4A_DRIVER_NOT_FOUND ? "SKIP" : "FAIL: driver load",
           t4a_error_format(&e, buf, sizeof buf));
    return st == T4A_DRIVER_NOT_FOUND ? 77 : 1;
  }
  int n = 0;
  if (t4a_device_count(*driver, &n) != T4A_OK || n < min_devices) {
    printf("FAIL: %s needs %d GPUs and the host has %d; it was not run\n", name, min_devices, n);
    t4a_driver_release(*driver);
    return 1;
  }
  int rc = _cmocka_run_group_tests(name, tests, count, NULL, NULL);
  t4a_driver_release(*driver);
  *driver = NULL;
  return rc;
}

#endif /* T4A_TESTING_GPU_GPU_MAIN_H_ */
