/* For t4a's own libraries (target //t4a_ctx:status_internal): recording a failure detail. Users
 * of a raw scope record theirs with t4a_raw_fail (t4a/raw.h). */
#ifndef T4A_CTX_STATUS_INTERNAL_H_
#define T4A_CTX_STATUS_INTERNAL_H_

#include <stdint.h>

#include "t4a/status.h"

/* Records a failure on this thread and returns `status` (so a caller can write
 * `return t4a_error_set_(...)`). entry and code_name must be static strings or NULL. */
t4a_status t4a_error_set_(t4a_status status, const char *entry, int code, const char *code_name,
                          uint64_t bytes, const char *fmt, ...) T4A_PRINTF(6, 7);

#endif /* T4A_CTX_STATUS_INTERNAL_H_ */
