/* t4a_launch: filled by a later issue; for now it only proves its dependency edges compile. */
#include "t4a/launch.h"
