/* The facade's own code. */
#include "t4a/t4a.h"

#define T4A_STR_(x) #x
#define T4A_STR(x) T4A_STR_(x)

const char *t4a_version_string(void) {
  return T4A_STR(T4A_VERSION_MAJOR) "." T4A_STR(T4A_VERSION_MINOR) "." T4A_STR(T4A_VERSION_PATCH);
}
