/* The driver seam: the entry-point table every t4a library calls the driver through.
 *
 * Layer: t4a_ctx, exported only to t4a's own libraries and to //testing (Bazel target
 * //t4a_ctx:seam). It includes the CUDA toolkit headers (types only; nothing is linked).
 *
 * Nothing outside t4a_ctx's loader calls a cu* function by name: calls go through
 * T4A_CU(driver, cuName, args...), which calls driver->t.cuName and, on failure, records the
 * entry point, the CUresult name and number (and the bytes for an allocation) in this thread's
 * error detail and returns the mapped t4a_status. The fake driver builds a table of host
 * functions and hands it to t4a_driver_create_from_table(). */
#ifndef T4A_CTX_DRIVER_TABLE_H_
#define T4A_CTX_DRIVER_TABLE_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/ctx.h"
#include "t4a/status.h"
#include "t4a_ctx/counters_block.h"
#include "t4a_ctx/driver_catalog.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define T4A_LIKELY(x) __builtin_expect(!!(x), 1)
#define T4A_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define T4A_LIKELY(x) (x)
#define T4A_UNLIKELY(x) (x)
#endif

/* One slot per catalogue entry, typed by the pinned typedef. Optional slots may be NULL. */
typedef struct t4a_driver_table {
#define T4A_DRIVER_SLOT_(name, version, need) PFN_##name##_v##version name;
  T4A_DRIVER_CATALOG(T4A_DRIVER_SLOT_)
#undef T4A_DRIVER_SLOT_
} t4a_driver_table;

typedef struct t4a_driver_entry_info {
  const char *name;
  int version;
  int required;
  size_t offset; /* offsetof(t4a_driver_table, name) */
} t4a_driver_entry_info;

/* The catalogue as data, in catalogue order. */
extern const t4a_driver_entry_info t4a_driver_entries[];
extern const size_t t4a_driver_entry_count;

/* Devices t4a can address in one process (ordinals 0 .. T4A_MAX_DEVICES-1). */
#define T4A_MAX_DEVICES 64

/* One device's primary context as t4a sees it: its first sticky fault (write-once per
 * generation) and the lanes that may still use it. `state` is (generation << 2) | phase, phase
 * T4A_CTX_HEALTHY, _RECORDING, _LOST or _RESETTING; t4a_device_recover moves it to the next
 * generation, healthy. A holder remembers the healthy state of the generation it was made in, so
 * its check is one load and one compare, and a holder of an older generation (made before a
 * reset) is broken for good. */
#define T4A_CTX_HEALTHY 0u
#define T4A_CTX_RECORDING 1u
#define T4A_CTX_LOST 2u
#define T4A_CTX_RESETTING 3u
#define T4A_CTX_PHASE(state) ((state) & 3u)
typedef struct t4a_ctx_fault {
  atomic_uint state;
  t4a_error cause;
  /* Lanes of this device created and neither destroyed nor abandoned (t4a_device_recover
   * refuses while any is). */
  atomic_int lanes_open;
} t4a_ctx_fault;

struct t4a_driver {
  t4a_driver_table t; /* first: the hot path reads it at offset 0 */
  atomic_int refs;
  int version;
  uint32_t caps;
  void *dl; /* dlopen handle; NULL for an injected table */
  void (*on_destroy)(void *user);
  void *on_destroy_user;
  t4a_counters counters;
  t4a_ctx_fault faults[T4A_MAX_DEVICES];
  char origin[256];
};

/* Builds a driver from a ready table (the fake driver). Every REQUIRED slot must be non-NULL
 * (DRIVER_SYMBOL_MISSING otherwise). cuDriverGetVersion gives the version; below the minimum is
 * DRIVER_TOO_OLD. cuInit(0) is called. on_destroy(user) runs when the last reference goes. */
T4A_MUST_USE t4a_status t4a_driver_create_from_table(const t4a_driver_table *table,
                                                     const char *origin,
                                                     void (*on_destroy)(void *user), void *user,
                                                     t4a_driver **out);

/* Maps a CUresult to a status (no detail recorded). CUDA_ERROR_NOT_FOUND is DRIVER_ERROR here: it
 * means UNKNOWN_ENTRY_POINT only from a symbol lookup, which t4a_cu_fail tells by its entry. */
t4a_status t4a_status_from_cu(CUresult r);
/* Whether r is a sticky error that leaves its context unusable (illegal address, launch failed,
 * hardware exceptions, ECC, assert). */
int t4a_cu_is_sticky(CUresult r);
/* The CUresult's name through the table's cuGetErrorName, or a static fallback. Static string. */
const char *t4a_cu_name(const t4a_driver *driver, CUresult r);

/* Records a failed driver call in this thread's detail and returns the mapped status
 * (t4a_status_from_cu, except CUDA_ERROR_NOT_FOUND from cuModuleGetFunction or cuModuleGetGlobal:
 * UNKNOWN_ENTRY_POINT). */
t4a_status t4a_cu_fail(const t4a_driver *driver, CUresult r, const char *entry, uint64_t bytes);

static inline t4a_status t4a_cu_result_(const t4a_driver *driver, CUresult r, const char *entry,
                                        uint64_t bytes) {
  if (T4A_LIKELY(r == CUDA_SUCCESS)) return T4A_OK;
  return t4a_cu_fail(driver, r, entry, bytes);
}

/* Calls one driver entry and maps its result (see the file comment). */
#define T4A_CU(driver, name, ...) \
  t4a_cu_result_((driver), (driver)->t.name(__VA_ARGS__), #name, 0)
/* Same, recording `bytes` on failure (allocations). */
#define T4A_CU_BYTES(driver, bytes, name, ...) \
  t4a_cu_result_((driver), (driver)->t.name(__VA_ARGS__), #name, (uint64_t)(bytes))

/* For drop and cleanup paths: calls the entry and maps its result WITHOUT recording detail, so the
 * failure a caller is being told about is not overwritten by a later cleanup step. Leaks that
 * follow from a failed cleanup are counted by the caller. */
#define T4A_CU_QUIET(driver, name, ...) t4a_status_from_cu((driver)->t.name(__VA_ARGS__))

/* T4A_OK, or LANE_BROKEN naming the recorded fault when device `ordinal` (valid) is marked lost in
 * its current generation. One atomic load; no driver call. */
t4a_status t4a_ctx_device_check(t4a_driver *driver, int ordinal);
/* Whether the holder's context was marked lost, or reset since the holder was made (no detail). */
int t4a_ctx_holder_is_lost(const t4a_ctx_holder *holder);

/* Native handles, for t4a's own libraries. */
CUcontext t4a_ctx_holder_native(const t4a_ctx_holder *holder);
CUdevice t4a_ctx_holder_device(const t4a_ctx_holder *holder);
CUstream t4a_lane_stream(const t4a_lane *lane);
t4a_driver *t4a_lane_driver(const t4a_lane *lane);
/* The driver-wide counter block. */
t4a_counters *t4a_driver_counter_block(t4a_driver *driver);

#ifdef __cplusplus
}
#endif
#endif /* T4A_CTX_DRIVER_TABLE_H_ */
