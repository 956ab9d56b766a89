/** @file
 * t4a/raw.h — scoped raw access to a runtime's context and stream, for vendor libraries.
 *
 * Layer: t4a_raw, on t4a_retire and t4a_mem. A raw scope runs a caller's function with the lane's
 * context current, hands it the lane's native stream and the device addresses of the buffers the
 * caller bound to the scope, and keeps those buffers alive for whatever the function enqueued.
 * It is the seam for cuBLAS, cuFFT, NCCL and hand-written cuLaunchKernel calls.
 *
 * One scope (t4a_raw_run):
 *   1. Checks the arguments: every binding names a live buffer of this retire's lane (another
 *      domain is T4A_FOREIGN_HANDLE) and a known access.
 *   2. Takes one admission on the retire (t4a/retire.h): the lane's operation lock (re-entry from
 *      the thread that holds it, or out of lock order, is T4A_REENTRY), the lane check
 *      (T4A_LANE_BROKEN), the lane's context made current, room reserved for one keepalive per
 *      bound buffer.
 *   3. Runs fn(scope, user). Inside fn, and only there, the native handles are available:
 *      t4a_raw_context, t4a_raw_stream, t4a_raw_device_ordinal and t4a_raw_devptr (bound
 *      buffers only; a WRITE address only for a writable binding). Work must be enqueued on
 *      t4a_raw_stream (or made to precede it, e.g. by a cuStreamWaitEvent on it): that is what
 *      orders it before the buffers' frees and t4a's later operations.
 *   4. If fn returned T4A_OK: every bound buffer is kept alive by the retire's open epoch until
 *      the work enqueued so far completes (no host wait), and the admission commits.
 *      If fn returned anything else, the scope is POISONED: its writable buffers are quarantined
 *      (their content is unknown: held forever, leaked and counted at teardown, never freed on a
 *      guess), its read-only buffers are kept alive as on success, and fn's status is returned
 *      (with fn's detail if fn left one for that status, else a detail naming the raw scope). The
 *      runtime stays usable, unless the lane's stream then reports a sticky error
 *      (cuStreamQuery, on the failure path only): the result is T4A_CONTEXT_LOST, the lane's
 *      context is marked lost and every later operation on the device is T4A_LANE_BROKEN.
 *   5. The context that was current on the calling thread before t4a_raw_run is current again
 *      when it returns, on every path, even if fn changed the current context.
 *
 * Re-entry and lock order: fn runs under the lane's operation lock. A call from fn into an
 * operation on the same retire (an upload through a t4a_xfer on it, t4a_retire_poll, a nested
 * t4a_raw_run on it…) returns T4A_REENTRY instead of deadlocking. Lanes' locks are taken in one
 * order, ascending lane domain (t4a_lane_domain; as copies between lanes take theirs): inside fn,
 * an operation on another retire — a nested scope, a copy, an upload — is allowed when its lane
 * comes after every lane this thread holds (it restores fn's context when it returns), and
 * returns T4A_REENTRY instead of waiting otherwise, since a thread holding that lane and waiting
 * for this one would deadlock. A scope over several runtimes at once (an NCCL group, say) is
 * t4a_raw_run_many, which takes its locks in order whatever the targets' order. Other threads'
 * operations on the lane wait until the scope ends: keep fn short.
 *
 * Graph capture: while the retire captures (t4a_retire_is_capturing), a raw scope is allowed and
 * what fn enqueues on t4a_raw_stream is captured too; the bound buffers' keepalives go to the
 * graph through the same admission. Vendor calls that allocate or synchronise on this thread
 * invalidate a THREAD_LOCAL capture, as the driver defines. The sticky-error check is skipped
 * while capturing (querying a capturing stream would invalidate the capture).
 *
 * Scope handles are valid only inside fn, on the thread running it. A handle used after its
 * t4a_raw_run returned, or on another thread, is refused with T4A_INVALID_ARGUMENT (never a
 * crash): handles are opaque tokens, never dereferenced, and each scope has a fresh one.
 * A scope of an outer t4a_raw_run stays valid inside a nested scope's fn.
 *
 * Counters (lane): raw_scopes (fn was run), raw_scopes_poisoned (fn failed), plus admissions,
 * keepalives_held and quarantined from t4a_retire.
 *
 * Thread-safety: t4a_raw_run may be called from any thread. Ownership: bindings are borrowed for
 * the call (the scope takes its own buffer references); nothing is returned to own. */
#ifndef T4A_RAW_H_
#define T4A_RAW_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/mem.h"
#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @{ */
/** Access of a binding, and the access asked of t4a_raw_devptr. A writable binding may also be
 * read: T4A_RAW_WRITE and T4A_RAW_READ_WRITE bind the same way. */
#define T4A_RAW_READ 1
#define T4A_RAW_WRITE 2
#define T4A_RAW_READ_WRITE 3
/** @} */

/** A buffer bound to a scope. The same buffer may be bound more than once: its accesses join. */
/** One buffer a raw scope binds, and the access it needs. */
typedef struct t4a_raw_binding {
  t4a_buffer *buffer; /**< the buffer (borrowed for the call) */
  int access; /**< T4A_RAW_READ, T4A_RAW_WRITE or T4A_RAW_READ_WRITE */
} t4a_raw_binding;

/** An open raw scope (opaque; valid only inside its callback). */
typedef struct t4a_raw_scope t4a_raw_scope;

/** The caller's function. Returns T4A_OK when everything it meant to enqueue was enqueued; any
 * other status poisons the scope (see above), even if nothing was enqueued (t4a cannot tell). It
 * may record a detail with t4a_raw_fail. It must return normally (no longjmp or exit through
 * it): the lane's operation lock and the open scope are released when it returns. */
typedef t4a_status (*t4a_raw_fn)(t4a_raw_scope *scope, void *user);

/** Runs fn(scope, user) inside a raw scope on `retire`'s lane with `count` bindings (bindings may
 * be NULL when count is 0). Statuses: INVALID_ARGUMENT (NULL retire or fn, NULL bindings with a
 * count, a NULL buffer, an unknown access), FOREIGN_HANDLE (a buffer of another domain), and
 * before fn runs: REENTRY, LANE_BROKEN, HOST_OUT_OF_MEMORY, LIMIT_EXCEEDED, driver failures (fn
 * was not run, nothing is held). After fn ran: T4A_OK, fn's failure, or CONTEXT_LOST. */
T4A_MUST_USE t4a_status t4a_raw_run(t4a_retire *retire, const t4a_raw_binding *bindings,
                                    size_t count, t4a_raw_fn fn, void *user);

/** One runtime of a raw scope over several (t4a_raw_run_many): its retire and the buffers bound
 * to its scope (bindings may be NULL when count is 0). */
typedef struct t4a_raw_target {
  t4a_retire *retire; /**< the runtime's retirement state */
  const t4a_raw_binding *bindings; /**< borrowed for the call */
  size_t count; /**< number of bindings */
} t4a_raw_target;

/** The caller's function of t4a_raw_run_many: scopes[i] is targets[i]'s scope, for the accessors
 * below; `count` is the targets' count. Returns as t4a_raw_fn does. */
typedef t4a_status (*t4a_raw_many_fn)(t4a_raw_scope *const *scopes, size_t count, void *user);

/** Runs fn(scopes, count, user) inside one raw scope per target, all open at once: what one call
 * over several runtimes needs (an NCCL group over two devices). The targets' admissions are taken
 * in lock order (see above), all or none: if one fails, those taken are let go and fn is not run.
 * While fn runs, targets[0]'s context is current. Each scope is as t4a_raw_run's (same checks,
 * keepalives, REENTRY and nesting rules): if fn returns T4A_OK every scope commits; otherwise
 * every scope is poisoned (each lane's writable bindings quarantined), and a lane whose stream
 * then reports a sticky error is marked lost. The caller's context is current again on return.
 * Statuses: t4a_raw_run's, plus INVALID_ARGUMENT for NULL targets, a count of 0, a target
 * without a retire or two targets naming one retire. After fn failed: CONTEXT_LOST if a lane was
 * found lost, else fn's failure. Counters: raw_scopes and raw_scopes_poisoned on each lane. */
T4A_MUST_USE t4a_status t4a_raw_run_many(const t4a_raw_target *targets, size_t count,
                                         t4a_raw_many_fn fn, void *user);

/** Inside fn: the lane's CUcontext (current on this thread while fn runs), as void *. NULL (with
 * an INVALID_ARGUMENT detail) for a handle that is not open on this thread. */
void *t4a_raw_context(const t4a_raw_scope *scope);
/** Inside fn: the lane's CUstream (non-blocking), as void *. NULL for a handle not open here. */
void *t4a_raw_stream(const t4a_raw_scope *scope);
/** Inside fn: the lane's device ordinal; -1 for a handle not open here. */
int t4a_raw_device_ordinal(const t4a_raw_scope *scope);
/** Inside fn: the device address (CUdeviceptr) of a buffer bound to this scope, for `access`
 * (T4A_RAW_READ, T4A_RAW_WRITE or T4A_RAW_READ_WRITE). Statuses: INVALID_ARGUMENT — a handle not
 * open on this thread, a NULL out, an unknown access, a buffer not bound to this scope, or write
 * access asked of a READ binding. On failure *out is 0. */
T4A_MUST_USE t4a_status t4a_raw_devptr(t4a_raw_scope *scope, const t4a_buffer *buffer,
                                       int access, uint64_t *out);
/** Inside fn: records why fn fails — `status` (not T4A_OK), the failed call's name `entry`, its
 * result `code` and the result's name `code_name` (string literals or NULL: they are kept by
 * address), and a message formatted from fmt — as this thread's error detail, and returns
 * `status`, so fn may end with `return t4a_raw_fail(scope, ...)`; t4a_raw_run then reports that
 * detail. Records and returns INVALID_ARGUMENT instead for a handle not open on this thread or
 * a `status` of T4A_OK. */
t4a_status t4a_raw_fail(t4a_raw_scope *scope, t4a_status status, const char *entry, int code,
                        const char *code_name, const char *fmt, ...) T4A_PRINTF(6, 7);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_RAW_H_ */
