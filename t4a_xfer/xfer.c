/* t4a_xfer: filled by a later issue; for now it only proves its dependency edges compile. */
#include "t4a/xfer.h"
