/* t4a/t4a.h — the facade: one include for the whole of t4a.
 *
 * Layer: //:t4a, on top of every library. A program that wants one piece only (say the NVRTC
 * loader) includes that library's header and depends on that library alone; this header is for
 * programs that take all of t4a. The composed runtime object arrives with its own issue.
 *
 * Thread-safety and ownership: see each library's header. */
#ifndef T4A_T4A_H_
#define T4A_T4A_H_

#include "t4a/counters.h"
#include "t4a/ctx.h"
#include "t4a/fault.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/nvrtc.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/status.h"
#include "t4a/xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define T4A_VERSION_MAJOR 0
#define T4A_VERSION_MINOR 1
#define T4A_VERSION_PATCH 0

/* Returns "MAJOR.MINOR.PATCH" of the t4a that was linked (static string). */
const char *t4a_version_string(void);

#ifdef __cplusplus
}
#endif
#endif /* T4A_T4A_H_ */
