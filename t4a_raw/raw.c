/* t4a_raw: filled by a later issue; for now it only proves its dependency edges compile. */
#include "t4a/raw.h"
