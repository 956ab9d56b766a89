/* The NVRTC seam: the entry-point table t4a_nvrtc calls NVRTC through, and the lib object.
 *
 * Layer: private to t4a_nvrtc. Exported to t4a_nvrtc's own tests through the internal Bazel
 * target //t4a_nvrtc:internal (private visibility) and to the fake NVRTC (testing/fake_nvrtc)
 * through the seam target //t4a_nvrtc:seam. It includes the toolkit's nvrtc.h for the slot types
 * (nothing is linked).
 *
 * Nothing outside nvrtc_loader.c resolves an nvrtc* function by name; every call goes through
 * lib->t.<name>. Tests build a table by wrapping the real one's pointers (failure injection at
 * any call) and hand it to t4a_nvrtc_lib_create_from_table(); production code has no test
 * branches. */
#ifndef T4A_NVRTC_NVRTC_TABLE_H_
#define T4A_NVRTC_NVRTC_TABLE_H_

#include <nvrtc.h>
#include <stdatomic.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a_ctx/counters_block.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_catalog.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One slot per catalogue entry, typed by nvrtc.h's own declaration. Optional slots may be NULL. */
typedef struct t4a_nvrtc_table {
#define T4A_NVRTC_SLOT_(name, need) __typeof__(name) *name;
  T4A_NVRTC_CATALOG(T4A_NVRTC_SLOT_)
#undef T4A_NVRTC_SLOT_
} t4a_nvrtc_table;

#define T4A_NVRTC_MAX_ARCHS 128
/* Room for two library descriptions of a path each (2 * (PATH_MAX + 96) + 64 on Linux). */
#define T4A_NVRTC_BUILD_IDENTITY_MAX 8448
#define T4A_NVRTC_PATH_MAX 4096 /* PATH_MAX on Linux */

struct t4a_nvrtc_lib {
  t4a_nvrtc_table t;
  atomic_int refs;
  int major, minor;
  uint32_t caps;
  void *dl;          /* dlopen handle of libnvrtc; NULL for an injected table */
  void *dl_builtins; /* the libnvrtc-builtins pinned at open (see build identity); may be NULL */
  size_t num_archs;  /* supported architectures (when T4A_NVRTC_CAP_SUPPORTED_ARCHS) */
  int archs[T4A_NVRTC_MAX_ARCHS];
  t4a_counters counters; /* nvrtc_compile_attempts / _successes over every compile */
  char origin[512];
  char build_identity[T4A_NVRTC_BUILD_IDENTITY_MAX];
  /* A loaded library's objects (empty for an injected table): for libnvrtc and for the
   * libnvrtc-builtins its name resolves to, the name the loader recorded (l_name), the resolved
   * path and the build-id read from memory ("" for none). nvrtc_libid.c derives the cache's file
   * identity from them. */
  char load_name[T4A_NVRTC_PATH_MAX];
  char builtins_load_name[T4A_NVRTC_PATH_MAX];
  char real_path[T4A_NVRTC_PATH_MAX];
  char builtins_path[T4A_NVRTC_PATH_MAX];
  char build_id[129];
  char builtins_build_id[129];
};

/* Builds a lib from a ready table (tests: a wrapped or fake NVRTC). Every REQUIRED slot must be
 * non-NULL (NVRTC_SYMBOL_MISSING naming the first missing one). nvrtcVersion gives the version,
 * nvrtcGetSupportedArchs (if present) the architectures; capabilities follow the optional slots.
 * origin and build_identity (NULL: "injected:<origin>") are copied; they stand where a loaded
 * library's path and build-id would. Statuses: INVALID_ARGUMENT, NVRTC_SYMBOL_MISSING,
 * NVRTC_ERROR, HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_nvrtc_lib_create_from_table(const t4a_nvrtc_table *table,
                                                        const char *origin,
                                                        const char *build_identity,
                                                        t4a_nvrtc_lib **out);

/* Records a failed NVRTC call in this thread's detail and returns the mapped status:
 * OUT_OF_MEMORY -> HOST_OUT_OF_MEMORY, COMPILATION -> COMPILE_FAILED, INVALID_OPTION and
 * NAME_EXPRESSION_NOT_VALID -> INVALID_ARGUMENT, TIME_FILE_WRITE_FAILED and
 * TIME_TRACE_FILE_WRITE_FAILED -> IO, anything else -> NVRTC_ERROR. */
t4a_status t4a_nvrtc_fail(const t4a_nvrtc_lib *lib, nvrtcResult r, const char *entry,
                          const char *what);

#ifdef __cplusplus
}
#endif
#endif /* T4A_NVRTC_NVRTC_TABLE_H_ */
