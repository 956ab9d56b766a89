/* t4a_mem: filled by a later issue; for now it only proves its dependency edges compile. */
#include "t4a/mem.h"
