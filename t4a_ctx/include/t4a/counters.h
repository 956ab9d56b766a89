/** @file
 * t4a/counters.h — the named counters that prove t4a's performance and lifetime claims.
 *
 * Layer: t4a_ctx:status (no driver). Each library names its counters in its own list header
 * (t4a/ctx_counters.h, t4a/retire_counters.h, ...: plain macros, below every library); this
 * header joins them into one list, T4A_COUNTER_LIST. A counter block (t4a_counters, opaque)
 * holds one relaxed atomic per name. Each object that counts (a driver, a lane, an artifact
 * cache) owns a block; t4a_counters_stats() copies it into a plain struct whose fields carry the
 * same names. This header compiles as C and as C++.
 *
 * Thread-safety: counting and t4a_counters_stats may run concurrently from any thread. */
#ifndef T4A_COUNTERS_H_
#define T4A_COUNTERS_H_

#include <stdint.h>

#include "t4a/ctx_counters.h"
#include "t4a/jitlink_counters.h"
#include "t4a/launch_counters.h"
#include "t4a/mem_counters.h"
#include "t4a/nvrtc_counters.h"
#include "t4a/raw_counters.h"
#include "t4a/retire_counters.h"
#include "t4a/xfer_counters.h"

#ifdef __cplusplus
extern "C" {
#endif

/** X(name, description) for every counter: the runs each library owns in its own header,
 * joined in the order the counters were added (ids stay put: a new run joins at the end). */
#define T4A_COUNTER_LIST(X)             \
  T4A_CTX_COUNTERS_1(X)                 \
  T4A_RETIRE_COUNTERS_1(X)              \
  T4A_MEM_COUNTERS_1(X)                 \
  T4A_NVRTC_COUNTERS_1(X)               \
  T4A_XFER_COUNTERS_1(X)                \
  T4A_RETIRE_COUNTERS_2(X)              \
  T4A_XFER_COUNTERS_2(X)                \
  T4A_CTX_COUNTERS_2(X)                 \
  T4A_MEM_COUNTERS_2(X)                 \
  T4A_RETIRE_COUNTERS_3(X)              \
  T4A_LAUNCH_COUNTERS_1(X)              \
  T4A_MEM_COUNTERS_3(X)                 \
  T4A_LAUNCH_COUNTERS_2(X)              \
  T4A_RAW_COUNTERS_1(X)                 \
  T4A_CTX_COUNTERS_3(X)                 \
  T4A_LAUNCH_COUNTERS_3(X)              \
  T4A_JITLINK_COUNTERS_1(X)             \
  T4A_CTX_COUNTERS_4(X)                 \
  T4A_MEM_COUNTERS_4(X)                 \
  T4A_NVRTC_COUNTERS_2(X)               \
  T4A_NVRTC_COUNTERS_3(X)               \
  T4A_NVRTC_COUNTERS_4(X)

/** One id per counter of T4A_COUNTER_LIST (T4A_COUNTER_<name>), then T4A_COUNTER_COUNT. */
typedef enum t4a_counter_id {
#define T4A_COUNTER_ENUM_(name, desc) T4A_COUNTER_##name,
  T4A_COUNTER_LIST(T4A_COUNTER_ENUM_)
#undef T4A_COUNTER_ENUM_
  T4A_COUNTER_COUNT
} t4a_counter_id;

/** A block of live counters (opaque: its relaxed atomics are private to t4a's libraries, which
 * reach them through t4a_ctx/counters_block.h). Users read a block with t4a_counters_stats. */
typedef struct t4a_counters t4a_counters;

/** A snapshot: one plain field per counter name. */
typedef struct t4a_counter_values {
#define T4A_COUNTER_FIELD_(name, desc) uint64_t name;
  T4A_COUNTER_LIST(T4A_COUNTER_FIELD_)
#undef T4A_COUNTER_FIELD_
} t4a_counter_values;

/** Copies every counter of *c into *out. */
void t4a_counters_stats(const t4a_counters *c, t4a_counter_values *out);

/** @{ */
/** Returns the counter's name ("host_waits") or description; static strings, NULL if out of range. */
const char *t4a_counter_name(t4a_counter_id id);
const char *t4a_counter_description(t4a_counter_id id);
/** @} */

/** Returns the value of counter `id` in a snapshot. */
uint64_t t4a_counter_value(const t4a_counter_values *values, t4a_counter_id id);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_COUNTERS_H_ */
