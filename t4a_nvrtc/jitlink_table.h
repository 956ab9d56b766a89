/* The nvJitLink seam: the entry-point table t4a_nvrtc links through, and the lib object.
 *
 * Layer: private to t4a_nvrtc (its tests reach it through //t4a_nvrtc:internal). It includes the
 * toolkit's nvJitLink.h with NVJITLINK_NO_INLINE for the slot types (no inline wrapper is
 * compiled, nothing is linked).
 *
 * Nothing outside jitlink_loader.c resolves an nvJitLink function by name; every call goes
 * through lib->t.<name>. Tests build a table by wrapping the real one's pointers (failure
 * injection at any call) and hand it to t4a_jitlink_lib_create_from_table(). */
#ifndef T4A_NVRTC_JITLINK_TABLE_H_
#define T4A_NVRTC_JITLINK_TABLE_H_

#ifndef NVJITLINK_NO_INLINE
#define NVJITLINK_NO_INLINE
#endif
#include <nvJitLink.h>
#include <stdatomic.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/jitlink.h"
#include "t4a/status.h"
#include "t4a_ctx/counters_block.h"
#include "t4a_nvrtc/jitlink_catalog.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One slot per catalogue entry, typed by nvJitLink.h's declaration of the versioned symbol.
 * Optional slots may be NULL. */
typedef struct t4a_jitlink_table {
#define T4A_JITLINK_SLOT_(name, symbol, need) __typeof__(symbol) *name;
  T4A_JITLINK_CATALOG(T4A_JITLINK_SLOT_)
#undef T4A_JITLINK_SLOT_
} t4a_jitlink_table;

/* Room for one library description of a path (PATH_MAX + 96 on Linux) and the version. */
#define T4A_JITLINK_BUILD_IDENTITY_MAX 4352

struct t4a_jitlink_lib {
  t4a_jitlink_table t;
  atomic_int refs;
  unsigned major, minor;
  void *dl;              /* dlopen handle of libnvJitLink; NULL for an injected table */
  t4a_counters counters; /* jitlink_links / jitlink_link_successes over every link */
  char origin[512];
  char build_identity[T4A_JITLINK_BUILD_IDENTITY_MAX];
};

/* Builds a lib from a ready table (tests: a wrapped nvJitLink). Every REQUIRED slot must be
 * non-NULL (JITLINK_SYMBOL_MISSING naming the first missing one); nvJitLinkVersion gives the
 * version. origin and build_identity (NULL: "injected:<origin>") are copied. Statuses:
 * INVALID_ARGUMENT, JITLINK_SYMBOL_MISSING, JITLINK_ERROR, HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_jitlink_lib_create_from_table(const t4a_jitlink_table *table,
                                                          const char *origin,
                                                          const char *build_identity,
                                                          t4a_jitlink_lib **out);

/* Threads waiting in t4a_jitlink_cache_link for another thread's link of the same request (tests:
 * hold a link until the others have joined it). */
int t4a_jitlink_cache_waiting(t4a_jitlink_cache *cache);

/* The name of an nvJitLinkResult ("NVJITLINK_ERROR_PTX_COMPILE"); static. */
const char *t4a_jitlink_result_name(nvJitLinkResult r);

/* Records a failed nvJitLink call in this thread's detail and returns the mapped status:
 * UNRECOGNIZED_OPTION, MISSING_ARCH, INCOMPATIBLE_OPTIONS, UNRECOGNIZED_ARCH, NULL_INPUT,
 * INVALID_INPUT, UNRECOGNIZED_INPUT, INCORRECT_INPUT_TYPE, ARCH_MISMATCH, OUTDATED_LIBRARY,
 * MISSING_FATBIN and LTO_NOT_ENABLED -> INVALID_ARGUMENT; UNSUPPORTED_ARCH -> UNSUPPORTED;
 * PTX_COMPILE, NVVM_COMPILE and FINALIZE -> LINK_FAILED; anything else -> JITLINK_ERROR.
 * `what` (may be NULL) is the message's tail, e.g. the error log's headline. */
t4a_status t4a_jitlink_fail(nvJitLinkResult r, const char *entry, const char *what);

#ifdef __cplusplus
}
#endif
#endif /* T4A_NVRTC_JITLINK_TABLE_H_ */
