/* README's example: compile, load, launch and download one kernel with the runtime facade.
 * Exit 0 when x[999] came back as 2997, 77 (SKIP) without a CUDA driver or NVRTC, 1 otherwise. */
#include <stdio.h>

#include "t4a/t4a.h"

static const char source[] =
    "extern \"C\" __global__ void scale(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n";

int main(void) {
  float x[1000], a = 3.0f;
  int n = 1000;
  for (int i = 0; i < n; i++) x[i] = (float)i;
  t4a_runtime *rt = NULL;
  t4a_function *scale = NULL;
  t4a_buffer *buf = NULL;
  t4a_status st = t4a_runtime_open(0, NULL, &rt);                         /* device 0 */
  if (st == T4A_OK) st = t4a_runtime_kernel(rt, source, "scale", &scale); /* NVRTC, load */
  if (st == T4A_OK) st = t4a_runtime_buffer(rt, sizeof x, &buf);
  if (st == T4A_OK) st = t4a_runtime_upload(rt, buf, 0, x, sizeof x);
  t4a_arg args[3] = {t4a_arg_buffer(buf, 0), t4a_arg_scalar(&a, sizeof a),
                     t4a_arg_scalar(&n, sizeof n)};
  if (st == T4A_OK) st = t4a_runtime_launch(rt, scale, (n + 255) / 256, 256, args, 3);
  if (st == T4A_OK) st = t4a_runtime_download(rt, buf, 0, x, sizeof x); /* waits */
  int skip = st == T4A_DRIVER_NOT_FOUND || st == T4A_NO_DEVICE || st == T4A_NVRTC_NOT_FOUND;
  if (st != T4A_OK) {
    t4a_error e;
    char msg[512];
    t4a_error_last(&e);
    printf("%s: %s\n", skip ? "SKIP" : "FAILED", t4a_error_format(&e, msg, sizeof msg));
  }
  t4a_buffer_release(buf);
  t4a_function_release(scale);
  if (t4a_runtime_close(rt) != T4A_OK) return 1; /* a proved drain, or a failure */
  if (st != T4A_OK) return skip ? 77 : 1;
  printf("x[999] = %g\n", x[999]); /* 2997 */
  return x[999] == 2997.0f ? 0 : 1;
}
