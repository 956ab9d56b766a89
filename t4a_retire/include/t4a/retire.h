/* t4a/retire.h — admission, completion epochs, keepalives, witnesses and quarantine.
 *
 * Layer: t4a_retire (on t4a_ctx). This library's edges exist from the first build so the layering is
 * enforced; its API arrives with the issue that fills it. Until then this header declares nothing
 * beyond what its dependencies provide.
 *
 * Thread-safety and ownership follow t4a/ctx.h. */
#ifndef T4A_RETIRE_H_
#define T4A_RETIRE_H_

#include "t4a/ctx.h"

#endif /* T4A_RETIRE_H_ */
