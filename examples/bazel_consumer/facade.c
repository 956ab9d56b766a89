/* A consumer of the whole of t4a through the facade (t4a/t4a.h). On a GPU it compiles, launches
 * and downloads one kernel; without a CUDA driver it checks that the runtime says so with the
 * right status (DRIVER_NOT_FOUND or NO_DEVICE) and a message. Exit 0 and a "consumer ok:" line
 * on success, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "t4a/t4a.h"

static const char source[] =
    "extern \"C\" __global__ void add1(int *x) { x[threadIdx.x] += 1; }\n";

int main(void) {
  t4a_runtime *rt = NULL;
  t4a_error e;
  char msg[512];
  t4a_status st = t4a_runtime_open(0, NULL, &rt);
  if (st == T4A_DRIVER_NOT_FOUND || st == T4A_NO_DEVICE) {
    t4a_error_last(&e);
    t4a_error_format(&e, msg, sizeof msg);
    if (rt != NULL || strstr(msg, t4a_status_name(st)) == NULL) {
      printf("FAILED: open without a driver: %s\n", msg);
      return 1;
    }
    printf("consumer ok: t4a %s linked; no GPU here (%s)\n", t4a_version_string(), msg);
    return 0;
  }
  int x[32] = {0};
  t4a_function *fn = NULL;
  t4a_buffer *buf = NULL;
  if (st == T4A_OK) st = t4a_runtime_kernel(rt, source, "add1", &fn);
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof x, &buf);
  if (st == T4A_OK) st = t4a_runtime_upload(rt, buf, 0, x, sizeof x);
  t4a_arg args[1] = {t4a_arg_buffer(buf, 0)};
  if (st == T4A_OK) st = t4a_runtime_launch(rt, fn, 1, 32, args, 1);
  if (st == T4A_OK) st = t4a_runtime_download(rt, buf, 0, x, sizeof x);
  if (st != T4A_OK) {
    t4a_error_last(&e);
    printf("FAILED: %s\n", t4a_error_format(&e, msg, sizeof msg));
  }
  t4a_buffer_release(buf);
  t4a_function_release(fn);
  if (t4a_runtime_close(rt) != T4A_OK || st != T4A_OK) return 1;
  if (x[0] != 1 || x[31] != 1) {
    printf("FAILED: x[0] = %d, x[31] = %d (want 1)\n", x[0], x[31]);
    return 1;
  }
  printf("consumer ok: t4a %s ran add1 on device 0\n", t4a_version_string());
  return 0;
}
