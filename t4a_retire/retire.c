/* t4a_retire: filled by a later issue; for now it only proves its dependency edges compile. */
#include "t4a/retire.h"
