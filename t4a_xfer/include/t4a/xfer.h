/* t4a/xfer.h — uploads, downloads, the staging ring and copies between runtimes.
 *
 * Layer: t4a_xfer (on t4a_mem and t4a_retire). This library's edges exist from the first build so the layering is
 * enforced; its API arrives with the issue that fills it. Until then this header declares nothing
 * beyond what its dependencies provide.
 *
 * Thread-safety and ownership follow t4a/ctx.h. */
#ifndef T4A_XFER_H_
#define T4A_XFER_H_

#include "t4a/mem.h"
#include "t4a/retire.h"

#endif /* T4A_XFER_H_ */
