/** @file
 * t4a/ctx.h — the CUDA driver, devices, primary contexts and lanes.
 *
 * Layer: t4a_ctx, the base of the runtime (t4a_mem, t4a_retire, t4a_launch and the facade sit on
 * it). The driver is loaded at run time (dlopen of libcuda.so.1, then cuGetProcAddress_v2 for
 * every entry at a pinned ABI version); t4a never links libcuda. This header compiles without the
 * CUDA toolkit: no CUDA type appears in it.
 *
 * Objects:
 *   t4a_driver      a loaded driver (or the fake driver of the tests): the table of entry points,
 *                   its version and capabilities, and driver-wide counters. Refcounted.
 *   t4a_ctx_holder  one retain of a device's primary context. Refcounted; the last release
 *                   releases the primary context without disturbing a context that another
 *                   holder has current on this thread.
 *   t4a_ctx_scope   caller storage that makes a holder's context current for a region and
 *                   restores the previous context on every path.
 *   t4a_lane        one non-blocking stream on a holder, with a process-unique domain identity
 *                   and its own counters. Refcounted (buffers and modules keep their lane).
 *                   Two lanes on one ordinal share the primary context.
 *
 * Faults: a sticky error (illegal address, launch failure…) poisons the device's primary context
 * for every holder. The first such fault seen by any t4a library is recorded once per device
 * (by the library whose driver call saw it); from then on t4a_ctx_holder_check and
 * t4a_lane_check fail fast with T4A_LANE_BROKEN naming that original fault. Lanes on other
 * devices carry on as far as t4a is concerned. t4a_device_recover resets the device's primary
 * context once no lane on it is open; lanes made afterwards work where the driver lets the
 * context recover. What real drivers do on both counts: docs/validation.md.
 *
 * Thread-safety: drivers, holders and lanes may be used and released from any thread. A scope
 * belongs to the thread that entered it. Counters are atomic.
 * Ownership: create/retain return a reference the caller releases; release/destroy accept NULL. */
#ifndef T4A_CTX_H_
#define T4A_CTX_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A device address (CUdeviceptr). */
typedef uint64_t t4a_devptr;

/* ---- Driver ------------------------------------------------------------------------------ */

/** A loaded CUDA driver: its table of entry points, version and capabilities. Refcounted,
 * opaque. */
typedef struct t4a_driver t4a_driver;

/** Driver capabilities: optional entry points that resolved. */
#define T4A_DRIVER_CAP_FUNC_PARAM_INFO (1u << 0) /**< cuFuncGetParamInfo (driver >= 12.4) */
#define T4A_DRIVER_CAP_CAPTURE_INFO (1u << 1)    /**< cuStreamGetCaptureInfo v3 (driver >= 12.3):
                                                    launch chains (t4a/chain.h) */
#define T4A_DRIVER_CAP_LAUNCH_EX (1u << 2)        /**< cuLaunchKernelEx (11.6): launch attributes
                                                    (cooperative, clusters, PDL; t4a/launch.h) */
#define T4A_DRIVER_CAP_OCCUPANCY (1u << 3)        /**< cuOccupancyMaxActiveBlocksPerMultiprocessor:
                                                    occupancy queries, cooperative launches */
#define T4A_DRIVER_CAP_CLUSTER_OCCUPANCY (1u << 4) /**< cuOccupancyMaxPotentialClusterSize (11.7):
                                                     cluster launches */

/** Options of t4a_driver_open; zero means the default. */
typedef struct t4a_driver_options {
  /** Library to dlopen. NULL: $T4A_LIBCUDA_PATH if set, else "libcuda.so.1". */
  const char *library_path;
  /** Oldest accepted driver version (1000*major + 10*minor). 0: T4A's own minimum (12000). */
  int min_version;
} t4a_driver_options;
/** Every option at its default. */
#define T4A_DRIVER_OPTIONS_INIT {NULL, 0}

/** Loads the driver library, checks its version, resolves every catalogue entry and calls
 * cuInit(0). Returns a new reference in *out.
 * Statuses: DRIVER_NOT_FOUND (dlopen failed; the message names the library and dlerror;
 * also for the toolkit's stub libcuda, named as such),
 * DRIVER_TOO_OLD (no cuGetProcAddress_v2, or a version below the minimum: message gives both),
 * DRIVER_SYMBOL_MISSING (a required entry did not resolve: message names it and its version),
 * NO_DEVICE / DRIVER_ERROR (cuInit failed), HOST_OUT_OF_MEMORY. A partial load is torn down. */
T4A_MUST_USE t4a_status t4a_driver_open(const t4a_driver_options *options, t4a_driver **out);

/** Returns a new reference to the process-wide driver, loaded once (thread-safe) with default
 * options. A failed load is remembered: later calls return the same status and detail. */
T4A_MUST_USE t4a_status t4a_driver_get_default(t4a_driver **out);

/** Adds a reference. Accepts NULL. */
void t4a_driver_retain(t4a_driver *driver);
/** Drops a reference; the last one unloads the library (or tears the fake down). Accepts NULL. */
void t4a_driver_release(t4a_driver *driver);

/** Driver version as cuDriverGetVersion reports it (13000 for CUDA 13.0). */
int t4a_driver_version(const t4a_driver *driver);
/** T4A_DRIVER_CAP_* bits. */
uint32_t t4a_driver_caps(const t4a_driver *driver);
/** The library path that was opened, or the fake driver's name. */
const char *t4a_driver_origin(const t4a_driver *driver);
/** Copies the driver-wide counters (context holders, scopes used without a lane). */
void t4a_driver_stats(const t4a_driver *driver, t4a_counter_values *out);

/* ---- Devices ----------------------------------------------------------------------------- */

/** A device's properties, as the driver reports them (t4a_device_query). */
typedef struct t4a_device_info {
  int ordinal; /**< the device ordinal queried */
  char name[256]; /**< the device name, NUL-terminated */
  uint8_t uuid[16]; /**< the device UUID (t4a_device_uuid_format prints it) */
  int cc_major; /**< compute capability, major */
  int cc_minor; /**< compute capability, minor */
  int sm_count; /**< streaming multiprocessors */
  uint64_t total_mem_bytes; /**< device memory */
  int max_threads_per_block; /**< threads per block at most */
  int max_block_dim[3]; /**< block dimensions at most (x, y, z) */
  int max_grid_dim[3]; /**< grid dimensions at most (x, y, z) */
  int warp_size; /**< threads per warp */
  int max_shared_per_block_bytes;       /**< default static limit (48 KiB) */
  int max_shared_per_block_optin_bytes; /**< opt-in limit for dynamic shared memory */
  int max_shared_per_sm_bytes; /**< shared memory per multiprocessor */
  int max_registers_per_block; /**< 32-bit registers per block at most */
  int l2_cache_bytes; /**< L2 cache size */
  int max_persisting_l2_bytes; /**< the most L2 that may be set aside for persisting accesses */
  int max_access_policy_window_bytes; /**< the largest access policy window */
  int clock_khz; /**< peak clock */
  int memory_clock_khz; /**< peak memory clock */
  int memory_bus_width_bits; /**< global memory bus width */
  int async_engine_count; /**< asynchronous copy engines */
  int unified_addressing; /**< nonzero: unified address space with the host */
  int can_map_host_memory; /**< nonzero: host memory can be mapped into the device */
  int memory_pools_supported; /**< nonzero: stream-ordered memory pools (t4a_mem needs them) */
  int concurrent_managed_access; /**< nonzero: managed memory accessed concurrently with the host */
  int pci_domain; /**< PCI domain */
  int pci_bus;    /**< PCI bus */
  int pci_device; /**< PCI device */
  int integrated; /**< nonzero: an integrated GPU (shares memory with the host) */
} t4a_device_info;

/** Number of devices the driver sees. */
T4A_MUST_USE t4a_status t4a_device_count(t4a_driver *driver, int *out_count);

/** Queries one device. Statuses: INVALID_DEVICE for an ordinal out of range, DRIVER_ERROR. */
T4A_MUST_USE t4a_status t4a_device_query(t4a_driver *driver, int ordinal, t4a_device_info *out);

/** Whether device `ordinal` can access `peer_ordinal`'s memory directly (0 when ordinals equal). */
T4A_MUST_USE t4a_status t4a_device_can_access_peer(t4a_driver *driver, int ordinal,
                                                   int peer_ordinal, int *out_can);

/** Formats a UUID as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into buf (at least 41 bytes). */
char *t4a_device_uuid_format(const uint8_t uuid[16], char *buf, size_t size);

/* ---- Primary-context holders and scopes -------------------------------------------------- */

/** A retained reference to one device's primary context. Refcounted, opaque. */
typedef struct t4a_ctx_holder t4a_ctx_holder;

/** Retains device `ordinal`'s primary context; returns a holder with one reference.
 * Statuses: INVALID_DEVICE, DRIVER_ERROR, CONTEXT_LOST, HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_ctx_holder_create(t4a_driver *driver, int ordinal,
                                              t4a_ctx_holder **out);
/** Adds a reference. Accepts NULL. */
void t4a_ctx_holder_retain(t4a_ctx_holder *holder);
/** Drops a reference. The last one releases the primary context. If that context is current on
 * this thread and still alive (another holder retains it), it stays current; only when the
 * release destroyed it is the thread's current context cleared. Never aborts; a failed release
 * leaks the retain, is counted in ctx_release_failures, and the holder memory is freed. */
void t4a_ctx_holder_release(t4a_ctx_holder *holder);
/** @{ */
/** The holder's device ordinal, and its driver (borrowed). */
int t4a_ctx_holder_ordinal(const t4a_ctx_holder *holder);
t4a_driver *t4a_ctx_holder_driver(const t4a_ctx_holder *holder);
/** @} */

/** Lets `holder`'s context access the memory of `peer`'s (cuCtxEnablePeerAccess), once per pair
 * for the life of the context (memoised; an access another holder already enabled counts as
 * done). Statuses: INVALID_ARGUMENT (NULL, or both on one device), UNSUPPORTED (the driver says
 * the pair cannot: cuDeviceCanAccessPeer), CONTEXT_LOST, driver failures. Counted in the driver's
 * peer_access_enabled when this call enabled it. */
T4A_MUST_USE t4a_status t4a_ctx_holder_enable_peer(t4a_ctx_holder *holder, t4a_ctx_holder *peer);

/** The device's free and total memory as the driver sees it (cuMemGetInfo, with the holder's
 * context made current). Statuses: INVALID_ARGUMENT (NULL), LANE_BROKEN, REENTRY (inside a host
 * function), driver failures (both 0 then). */
T4A_MUST_USE t4a_status t4a_ctx_holder_memory(t4a_ctx_holder *holder, uint64_t *out_free,
                                              uint64_t *out_total);

/** T4A_OK, or T4A_LANE_BROKEN (with detail naming the original fault's entry point and result) if
 * the holder's context was marked lost. Cheap: one atomic load on the healthy path. */
T4A_MUST_USE t4a_status t4a_ctx_holder_check(const t4a_ctx_holder *holder);

/** An activation scope, in caller storage. Fields are private. */
typedef struct t4a_ctx_scope {
  void *priv_prev; /**< private: the context current before the scope */
  void *priv_ctx; /**< private: the scope's context */
  t4a_ctx_holder *priv_holder; /**< a reference while the scope is open (unless borrowed) */
  int priv_switched; /**< private: whether the scope made its context current */
  int priv_borrowed; /**< private: t4a_ctx_scope_enter_borrowed: no reference of its own */
} t4a_ctx_scope;

/** Makes the holder's context current on this thread unless it already is, remembering the
 * previous one, and holds a reference to the holder until exit (so the scope stays valid even if
 * the caller drops its own last reference inside it). `counters` (may be NULL: the driver's)
 * receives the activation counts. On failure nothing changed, the scope is cleared, and exit is
 * a no-op. A holder made before its device was reset
 * (t4a_device_recover) is refused with LANE_BROKEN, without a driver call. */
T4A_MUST_USE t4a_status t4a_ctx_scope_enter(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                                            t4a_counters *counters);
/** As t4a_ctx_scope_enter, without a reference of its own: for a caller that holds the holder
 * (through a lane, say) until after the exit — the hot path's admissions, which save the two
 * atomic read-modify-writes of a reference. */
T4A_MUST_USE t4a_status t4a_ctx_scope_enter_borrowed(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                                                     t4a_counters *counters);
/** Restores the context that was current at enter, then drops the scope's holder reference.
 * Returns the mapped driver status if the restore failed (counted as ctx_restore_failures on the
 * driver). A second exit does nothing. */
t4a_status t4a_ctx_scope_exit(t4a_ctx_scope *scope);
/** Same, for cleanup after another failure: a failed restore is counted but does not overwrite
 * this thread's error detail. */
void t4a_ctx_scope_exit_quiet(t4a_ctx_scope *scope);

/* ---- Recovery after a sticky fault ------------------------------------------------------ */

/** Resets device `ordinal`'s primary context (cuDevicePrimaryCtxReset: the driver destroys every
 * stream, event, module, allocation and pinned host allocation made in it and clears its sticky
 * error) and starts a new generation of t4a's record for the device: lanes and runtimes created
 * afterwards work, while every holder made before the reset — kept alive by objects t4a leaked
 * after the fault (quarantined buffers, abandoned lanes, staging chunks in flight) or by the
 * caller — stays broken for good: its checks answer LANE_BROKEN, no scope activates it, and its
 * drop paths leak (counted) instead of calling the driver with handles the reset destroyed.
 * Refused with BUSY (nothing done; counted in device_recoveries_refused) while any lane of the
 * device is open: created and neither destroyed nor abandoned (a runtime not yet closed; closing
 * a runtime after a fault abandons its lane). Pinned memory, slots and host registrations the
 * caller made on the device's holders are not counted: release them first (the reset frees and
 * unregisters them). Only this driver object's lanes are seen; anything else in the process using
 * the primary context (another t4a_driver, a vendor library) must be done with it. Counted in
 * device_recoveries. A lane created while the reset runs is refused with BUSY.
 * After the reset, one retain and release of the primary context asks the driver whether the
 * device is usable again. Where the driver keeps the sticky error for the whole process (CUDA
 * documents that the process must be relaunched; docs/validation.md) the retain answers it: the
 * call returns CONTEXT_LOST naming
 * cuDevicePrimaryCtxRetain and its CUresult, and the new generation starts lost with that cause
 * (new lanes answer LANE_BROKEN at once). Only a new process can use the device then.
 * Statuses: INVALID_ARGUMENT, INVALID_DEVICE, BUSY, CONTEXT_LOST (reset, still lost for this
 * process), DRIVER_ERROR (the reset failed: the record is left as it was). */
T4A_MUST_USE t4a_status t4a_device_recover(t4a_driver *driver, int ordinal);
/** Lanes of device `ordinal` that are open in the sense above (0 for a bad ordinal). */
int t4a_device_open_lanes(const t4a_driver *driver, int ordinal);

/* ---- Lanes ------------------------------------------------------------------------------- */

/** A lane: a primary-context holder and one non-blocking stream of a device. Refcounted,
 * opaque. */
typedef struct t4a_lane t4a_lane;

/** Options of t4a_lane_create; zero means the default. */
typedef struct t4a_lane_options {
  int priority; /**< stream priority (cuStreamCreateWithPriority); 0 = default; outside the
                    device's range (t4a_lane_priority_range): INVALID_ARGUMENT */
} t4a_lane_options;
/** Every option at its default (zero). */
#define T4A_LANE_OPTIONS_INIT {0}

/** Creates a lane on device `ordinal`: a holder of its primary context, one non-blocking stream
 * and a process-unique domain identity. options may be NULL.
 * Statuses: INVALID_DEVICE, INVALID_ARGUMENT (a priority outside the device's range), DRIVER_ERROR, CONTEXT_LOST, HOST_OUT_OF_MEMORY, LANE_BROKEN (the
 * device is marked lost: refused without a driver call, naming the recorded fault), BUSY (the
 * device's primary context is being reset by t4a_device_recover). */
T4A_MUST_USE t4a_status t4a_lane_create(t4a_driver *driver, int ordinal,
                                        const t4a_lane_options *options, t4a_lane **out);
/** Adds a reference. Accepts NULL. */
void t4a_lane_retain(t4a_lane *lane);
/** Drops a reference. The last one destroys the stream (with the lane's context active; if
 * activation fails, or the lane was abandoned, the stream is leaked and counted in
 * streams_leaked) and releases the holder. Does not wait for the stream's work; the driver
 * completes it. Accepts NULL. Never aborts. */
void t4a_lane_release(t4a_lane *lane);
/** Whether the lane was abandoned (objects built on it — a memory pool — then leak at their final
 * release too, instead of calling the driver). */
int t4a_lane_is_abandoned(const t4a_lane *lane);
/** Whether a graph capture of the lane's stream is in progress (set by t4a_retire's capture mode,
 * read by the libraries whose operations cannot be captured: one atomic load). */
int t4a_lane_is_capturing(const t4a_lane *lane);

/** The lane's device ordinal. */
int t4a_lane_ordinal(const t4a_lane *lane);
/** The lane's allocation-domain identity: unique in the process, never 0, never reused. */
uint64_t t4a_lane_domain(const t4a_lane *lane);
/** Borrowed: the lane's context holder (retain it to keep it past the lane). */
t4a_ctx_holder *t4a_lane_holder(const t4a_lane *lane);
/** @{ */
/** Borrowed: the lane's live counter block, and a snapshot of it. */
t4a_counters *t4a_lane_counters(t4a_lane *lane);
void t4a_lane_stats(const t4a_lane *lane, t4a_counter_values *out);
/** @} */
/** The most streams one domain has at once (a lane and its siblings). */
#define T4A_LANE_MAX_STREAMS 32

/** Creates a further stream beside `lane`: the same context holder and allocation domain (the
 * buffers, modules and functions of one are the other's: no FOREIGN_HANDLE between them), its
 * own non-blocking stream created with `options->priority` (options may be NULL), its own
 * counters. Buffers used on several streams of a domain are ordered across them by t4a_mem
 * (design §4): their memory is freed or reused only after every use. The sibling is an ordinary
 * lane (build a t4a_retire on it); it may be released before or after `lane`. A lane that used
 * buffers of another stream's pool waits for its own stream at its last release if nothing
 * proved it drained (a counted host wait).
 * Statuses: INVALID_ARGUMENT (NULL; a priority outside the device's range, named in the
 * detail), LIMIT_EXCEEDED (T4A_LANE_MAX_STREAMS streams in the domain), LANE_BROKEN,
 * HOST_OUT_OF_MEMORY, driver failures. Counted in streams_sibling on the driver. */
T4A_MUST_USE t4a_status t4a_lane_create_sibling(t4a_lane *lane, const t4a_lane_options *options,
                                                t4a_lane **out);
/** The device's stream priority range (cuCtxGetStreamPriorityRange): `*out_least` is the least
 * urgent (0 on current GPUs), `*out_greatest` the most urgent (numerically lowest, -5 on the
 * H200). A priority is valid when greatest <= priority <= least; lanes refuse others with
 * INVALID_ARGUMENT. */
T4A_MUST_USE t4a_status t4a_lane_priority_range(t4a_lane *lane, int *out_least,
                                                int *out_greatest);
/** The priority the lane's stream was created with. */
int t4a_lane_priority(const t4a_lane *lane);

/** Waits for all work on the lane's stream (counted in host_waits). A sticky error found here marks
 * the context lost. */
T4A_MUST_USE t4a_status t4a_lane_synchronize(t4a_lane *lane);
/** t4a_ctx_holder_check on the lane's holder. */
T4A_MUST_USE t4a_status t4a_lane_check(const t4a_lane *lane);
/** Whether the lane's context was marked lost (or reset since the lane was made), without touching
 * this thread's error detail (for drop paths). */
int t4a_lane_is_broken(const t4a_lane *lane);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_CTX_H_ */
