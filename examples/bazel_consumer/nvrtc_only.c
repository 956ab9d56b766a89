/* A consumer of one t4a component: t4a_nvrtc alone (no driver, no GPU needed). It loads NVRTC,
 * compiles one kernel to PTX and checks the PTX names the kernel. Exit 0 and a "consumer ok:"
 * line on success, 1 otherwise (with t4a's error detail). */
#include <stdio.h>
#include <string.h>

#include "t4a/nvrtc.h"
#include "t4a/status.h"

static int fail(const char *what) {
  t4a_error e;
  char msg[512];
  t4a_error_last(&e);
  printf("FAILED: %s: %s\n", what, t4a_error_format(&e, msg, sizeof msg));
  return 1;
}

int main(void) {
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) return fail("t4a_nvrtc_lib_open");
  t4a_nvrtc_request req = T4A_NVRTC_REQUEST_INIT;
  req.program_name = "consumer.cu";
  req.source = "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n";
  req.target = "compute_90";
  req.output = T4A_NVRTC_OUTPUT_PTX;
  t4a_nvrtc_artifact *art = NULL;
  t4a_nvrtc_outcome outcome = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_compile(lib, &req, &art, &outcome);
  if (st != T4A_OK) {
    if (outcome.log != NULL) printf("%s\n", outcome.log);
    t4a_nvrtc_outcome_deinit(&outcome);
    t4a_nvrtc_lib_release(lib);
    return fail("t4a_nvrtc_compile");
  }
  size_t bytes = 0;
  const char *ptx = t4a_nvrtc_artifact_data(art, &bytes);
  int major = 0, minor = 0;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  int found = bytes > 0 && strstr(ptx, ".entry twice") != NULL;
  if (found) printf("consumer ok: NVRTC %d.%d compiled %zu bytes of PTX\n", major, minor, bytes);
  else printf("FAILED: the PTX has no .entry twice\n");
  t4a_nvrtc_artifact_release(art);
  t4a_nvrtc_outcome_deinit(&outcome);
  t4a_nvrtc_lib_release(lib);
  return found ? 0 : 1;
}
