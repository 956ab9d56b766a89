/* t4a/raw.h — scoped raw access to the runtime's context and stream for vendor libraries.
 *
 * Layer: t4a_raw (on every t4a library). This library's edges exist from the first build so the layering is
 * enforced; its API arrives with the issue that fills it. Until then this header declares nothing
 * beyond what its dependencies provide.
 *
 * Thread-safety and ownership follow t4a/ctx.h. */
#ifndef T4A_RAW_H_
#define T4A_RAW_H_

#include "t4a/xfer.h"
#include "t4a/launch.h"

#endif /* T4A_RAW_H_ */
