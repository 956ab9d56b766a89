/* Finds the fetched model (see model_path.h). */
#define _POSIX_C_SOURCE 200809L
#include "examples/smollm/model_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int smol_model_path(char *buf, size_t size) {
  const char *env = getenv("SMOLLM_MODEL");
  struct stat sb;
  if (env != NULL && env[0] != '\0') {
    snprintf(buf, size, "%s", env);
    return stat(buf, &sb) == 0;
  }
  static const char *const ups[] = {"", "../", "../../", "../../../", "../../../../"};
  for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
    snprintf(buf, size, "%sexamples/smollm/model/" SMOL_MODEL_NAME, ups[i]);
    if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
  }
  snprintf(buf, size, "examples/smollm/model/" SMOL_MODEL_NAME);
  return 0;
}
