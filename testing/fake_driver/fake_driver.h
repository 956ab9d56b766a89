/* testing/fake_driver — an in-process simulated CUDA driver: the CPU GPU of t4a's unit tests.
 *
 * It implements every entry of the driver catalogue (t4a_ctx/driver_catalog.h) as host functions
 * and hands them to t4a through t4a_driver_create_from_table(). It is test code: never linked into
 * a library.
 *
 * Model:
 *  - N devices with configurable memory, compute capability and peer access; primary contexts with
 *    refcounts; the current context per thread. As on the real driver (measured: 580.159.04,
 *    CUDA 13.0), a device's primary context has ONE handle for the fake's life: the last release
 *    (or a reset) destroys the context behind it, and the next retain revives the same handle
 *    with fresh state (no objects, no sticky error).
 *  - Streams are FIFOs. Enqueued work (copies, fills, kernels, frees, event records, waits) runs
 *    only when the fake progresses: on cuStreamSynchronize / cuEventSynchronize /
 *    cuCtxSynchronize, on cuStreamQuery / cuEventQuery when the query policy says so, or on
 *    t4a_fake_progress(). So a host read before completion sees the old bytes.
 *    cuStreamWaitEvent blocks a stream until the event's recorded point has run (any device).
 *    The progress order (which stream runs first when several could) is an option: creation
 *    order, reverse, or seeded random (t4a_fake_progress_order).
 *  - Happens-before is tracked with a vector clock per stream (joined by event record/wait, and by
 *    the host's successful synchronisations for work enqueued after them). Stream-ordered
 *    allocations (cuMemAllocAsync / cuMemAllocFromPoolAsync) are operations in their stream: the
 *    address is returned at once, the block becomes valid when the operation runs. Executed work
 *    that touches a block before its allocation ran, or not ordered after it, or a block freed by
 *    a stream-ordered free it is not ordered after, and a stream-ordered free that runs while an
 *    access from another stream is not ordered before it, are ordering violations: the sticky
 *    CUDA_ERROR_ILLEGAL_ADDRESS on the executing context, a line on stderr, and
 *    t4a_fake_ordering_violations() counts them. So a missing cross-stream wait fails whichever
 *    stream is synchronised first.
 *  - Device memory is host memory behind fake device addresses that are never reused. Any access
 *    by executed work outside a live allocation raises a sticky CUDA_ERROR_ILLEGAL_ADDRESS on the
 *    executing context; from then on every call under that context returns it.
 *  - Modules load from: the fake image format (text starting "T4AFAKE1\n" followed by one kernel
 *    name per line, and "global NAME BYTES" / "const NAME BYTES" lines for globals), PTX text (every ".entry NAME"), and real CUBIN ELF (kernels: the STT_FUNC
 *    symbols marked as entries, STO_CUDA_ENTRY 0x10 in st_other). As measured on the real
 *    driver, a CUBIN's GLOBAL device function (separate compilation) is found by
 *    cuModuleGetFunction too, but has no parameter info and its launch fails with
 *    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; LOCAL device functions are not found.
 *    Kernels are host functions registered by name with their parameter sizes (and optionally
 *    alignments), so cuFuncGetParamInfo answers and launches run on CPU in stream order; their
 *    attributes (registers, static shared and local memory, launch bounds) can be set, and the
 *    launch bound is enforced. Module globals (__device__, __constant__: declared in the fake
 *    format, PTX declarations, CUBIN STT_OBJECT symbols; fake_module.c) are memory of their
 *    module, found by cuModuleGetGlobal and by a host kernel through t4a_fake_launch_global,
 *    gone at the unload; the constant bank's 64 KiB is enforced at load.
 *  - Failure injection per entry point (or for any entry): let `skip` calls succeed, then fail
 *    `count` calls with a chosen CUresult; optionally after enqueueing the work. Sticky errors on
 *    demand. A count of every call per entry.
 *
 * Only one fake exists at a time (the table holds plain function pointers). All entry points are
 * thread-safe (one recursive lock). Kernels run with that lock held, on the thread that made the
 * fake progress: a kernel may call t4a_fake_deref and even driver entries, but must not wait for
 * another thread, and must not use cmocka asserts (they would longjmp out with the lock held).
 *
 * Rules the fake enforces (some stricter than the real driver, so bugs show up on a CPU):
 *  - Enqueueing calls (copies, fills, launches, stream-ordered alloc/free, event record, stream
 *    wait, graph launch/upload) need a current context, and the stream must belong to it
 *    (CUDA_ERROR_INVALID_CONTEXT otherwise). NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD name
 *    the current context's default stream, which is an ordinary FIFO (no implicit legacy
 *    synchronization).
 *  - Creating and freeing what a context owns needs a current context, as the Driver API
 *    documents (cuda.h lists CUDA_ERROR_INVALID_CONTEXT among their results): cuMemAlloc,
 *    cuMemFree, cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister,
 *    cuMemHostGetDevicePointer, cuStreamCreate*, cuStreamDestroy, cuEventCreate,
 *    cuEventDestroy, cuModuleLoadData*, cuModuleUnload, cuGraphInstantiateWithFlags. With no
 *    current context they answer CUDA_ERROR_INVALID_CONTEXT; with a destroyed one current,
 *    CUDA_ERROR_CONTEXT_IS_DESTROYED. Any usable context will do (t4a's pinned memory is
 *    portable), though the object's own context must be alive. So a drop path that could not
 *    activate its context and "destroys anyway" fails here, as it would on the driver; t4a leaks
 *    and counts instead (requirement A5). Not required (lenient, since t4a always works under
 *    the object's own context anyway): syncs and queries of streams and events (their handles
 *    name their context; foreign observations are counted, see below), cuGraphDestroy,
 *    cuGraphExecDestroy and the cuMemPool* calls (whose documented results do not include
 *    CUDA_ERROR_INVALID_CONTEXT), and cuPointerGetAttribute.
 *  - Handles are numbers, never pointers; a destroyed object's handle is never reused, so a stale
 *    handle is always detected (INVALID_HANDLE). Primary-context handles are the exception, as
 *    on the real driver: one stable handle per device (see below).
 *  - The last cuDevicePrimaryCtxRelease destroys the context: queued work is dropped (event
 *    markers complete), and its streams, events, modules, memory and executable graphs stay
 *    counted as live leaks, unusable (INVALID_CONTEXT), also after a revival. The handle stays
 *    valid: cuCtxSetCurrent of it succeeds (and a thread where it was current keeps it), but
 *    every call that needs the current context then returns CUDA_ERROR_CONTEXT_IS_DESTROYED
 *    (709), as do cuCtxEnablePeerAccess / cuMemcpyPeerAsync naming it. The next retain revives
 *    the same handle with fresh state. cuDevicePrimaryCtxReset destroys the context too, but
 *    frees all of that (including its cuMemHostAlloc memory) and clears the sticky error; the
 *    retain count is kept, and the next retain revives the handle.
 *  - A sticky error makes every call under that context fail with it (also stream/event destroy,
 *    module unload, cuMemFree): only cuDevicePrimaryCtxReset recovers. Device queries,
 *    cuCtxGet/SetCurrent and the primary-context calls are not affected. In a faulted context
 *    queued copies, fills and kernels are dropped; queued frees still run.
 *  - Cross-device access by executed work: pool memory needs cuMemPoolSetAccess for the
 *    executing device (copies included); cuMemAlloc memory is copyable from any device, but a
 *    kernel needs cuCtxEnablePeerAccess. Mapped host memory is reachable from every device.
 *  - Pinned host memory (cuMemHostAlloc / cuMemHostRegister) freed or unregistered while a copy
 *    or kernel that uses it is queued makes that work fault (ILLEGAL_ADDRESS) instead of touching
 *    freed memory. Pinned memory without the PORTABLE flag is pinned for its own context only: a
 *    copy that uses it on a stream of another context works (the real driver silently degrades
 *    it to a pageable, synchronous copy) and is counted (t4a_fake_nonportable_pinned_uses).
 *    Registered host memory has its own fake device address (only with DEVICEMAP),
 *    so CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM reports 0.
 *  - cuMemFree synchronizes the owning context first; cuMemFreeHost and cuMemHostUnregister do
 *    not. cuModuleUnload with launches of the module still queued makes them fail when they run
 *    (sticky CUDA_ERROR_LAUNCH_FAILED).
 *  - Capture: graphs are linear (capture order). Captured: kernels, copies, fills, frees.
 *    cuMemAllocAsync/FromPoolAsync during capture, a wait on an event whose work (recorded
 *    outside the capture) is still pending, and waits that would join another stream into a
 *    capture are refused and invalidate it. Syncing or querying a capturing stream,
 *    cuCtxSynchronize, and the unsafe calls (cuMemAlloc, cuMemFree, cuMemHostAlloc,
 *    cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister, and — as measured on the H200 with
 *    driver 580 — cuModuleUnload, cuGraphExecDestroy and cuCtxSetLimit) while a GLOBAL capture
 *    (or this thread's THREAD_LOCAL one) is active fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 *    and invalidate it. So does cuGraphLaunch into a capturing stream (measured likewise). Querying an event recorded in a capture is CUDA_ERROR_CAPTURED_EVENT.
 *  - A cycle of waits (only possible when a kernel synchronizes from inside the engine) is
 *    reported as CUDA_ERROR_ILLEGAL_STATE rather than hanging.
 *  - Ordering (see the model): the host clock joins only what a sync call or a query answering
 *    "complete" observed (one clock for all host threads: host-side synchronisation between
 *    threads is assumed). Inside a stream capture nothing is tracked; a graph's operations are
 *    judged when a launch runs them. */
#ifndef T4A_TESTING_FAKE_DRIVER_H_
#define T4A_TESTING_FAKE_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a_ctx/driver_table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define T4A_FAKE_MAX_DEVICES 8

/* When the query calls (cuStreamQuery, cuEventQuery) run pending work first. */
typedef enum t4a_fake_query_policy {
  T4A_FAKE_QUERY_PROGRESSES = 0, /* a query runs the queried stream's work, then answers */
  T4A_FAKE_QUERY_NEVER = 1,      /* a query only reports; work runs on sync or t4a_fake_progress */
} t4a_fake_query_policy;

/* Which stream runs first when several could (t4a_fake_progress, cuCtxSynchronize, cuMemFree). */
typedef enum t4a_fake_progress_order {
  T4A_FAKE_ORDER_CREATION = 0, /* streams in creation order, each as far as it can go */
  T4A_FAKE_ORDER_REVERSE = 1,  /* newest stream first */
  T4A_FAKE_ORDER_RANDOM = 2,   /* t4a_fake_progress interleaves single operations at random;
                                  context syncs drain the streams in a random order (seeded) */
} t4a_fake_progress_order;

typedef struct t4a_fake_options {
  int num_devices;          /* 0: 1 */
  uint64_t mem_bytes;       /* per device; 0: 1 GiB (allocation beyond it: OUT_OF_MEMORY) */
  int cc_major, cc_minor;   /* 0: 9.0 */
  int sm_count;             /* 0: 132 */
  int driver_version;       /* 0: 13000 */
  /* peer[i][j] != 0: device i can access device j. all_peers != 0 sets every pair. */
  int all_peers;
  unsigned char peer[T4A_FAKE_MAX_DEVICES][T4A_FAKE_MAX_DEVICES];
  int omit_param_info;      /* leave the optional cuFuncGetParamInfo slot NULL */
  int omit_launch_ex;       /* leave cuLaunchKernelEx NULL (an older driver) */
  int omit_occupancy;       /* leave the three cuOccupancy* slots NULL */
  int gpc_sms;              /* SMs per GPC, the bound of a cluster's blocks (0: 16) */
  t4a_fake_query_policy query_policy;
  /* Left at CREATION, the environment may override it for a stress run of a whole suite:
   * T4A_FAKE_PROGRESS_ORDER=reverse or random[:SEED]. */
  t4a_fake_progress_order progress_order;
  uint64_t progress_seed; /* for T4A_FAKE_ORDER_RANDOM (0: a fixed default seed) */
} t4a_fake_options;
#define T4A_FAKE_OPTIONS_INIT {0}

typedef struct t4a_fake t4a_fake;

/* Creates the fake (INVALID_ARGUMENT if one exists already). */
T4A_MUST_USE t4a_status t4a_fake_create(const t4a_fake_options *options, t4a_fake **out);
/* Returns a new driver reference whose table is the fake's (t4a_driver_create_from_table). */
T4A_MUST_USE t4a_status t4a_fake_driver(t4a_fake *fake, t4a_driver **out);
/* The fake's table, for tests that call it raw. */
const t4a_driver_table *t4a_fake_table(t4a_fake *fake);
/* Destroys the fake and everything it still holds. Call after every driver reference is gone. */
void t4a_fake_destroy(t4a_fake *fake);

/* ---- progress ---- */
/* Runs every runnable operation on every stream until none can run. Returns how many ran. */
size_t t4a_fake_progress(t4a_fake *fake);
/* Runs at most one operation at the head of `stream`; returns 1 if one ran. */
int t4a_fake_step(t4a_fake *fake, CUstream stream);
/* Number of operations queued (not yet run) on `stream`, or on all streams if stream is NULL.
 * Stream-ordered allocations count: they are operations too. */
size_t t4a_fake_pending(t4a_fake *fake, CUstream stream);
void t4a_fake_set_query_policy(t4a_fake *fake, t4a_fake_query_policy policy);
/* Changes the progress order (and reseeds the random order; seed 0: the default seed). */
void t4a_fake_set_progress_order(t4a_fake *fake, t4a_fake_progress_order order, uint64_t seed);
/* Copies the value last set with cuStreamSetAttribute for `attr` on `stream` (NULL: the current
 * context's default stream) into *out. Returns 1 if one was set, else 0. */
int t4a_fake_stream_attr(t4a_fake *fake, CUstream stream, CUstreamAttrID attr,
                         CUstreamAttrValue *out);

/* ---- failure injection ---- */
/* For entry `entry` (its catalogue name, e.g. "cuMemAllocFromPoolAsync"; NULL = any entry):
 * the next `skip` calls behave normally, the `count` after that return `result`. With
 * after_enqueue, a failing call that enqueues work enqueues it anyway (ignored for entries that
 * enqueue nothing). Rules stack: every matching rule counts every call of its entry, and when
 * several would fail one call the oldest decides. An unknown entry name is reported on stderr
 * and never fires. Clear with t4a_fake_clear_injections. */
void t4a_fake_inject(t4a_fake *fake, const char *entry, uint64_t skip, uint64_t count,
                     CUresult result, int after_enqueue);
void t4a_fake_clear_injections(t4a_fake *fake);
/* Number of injected failures delivered so far. */
uint64_t t4a_fake_injected(t4a_fake *fake);
/* Puts device `ordinal`'s primary context into a sticky error (every later call under it, and
 * every query of its streams and events, returns `result`). */
void t4a_fake_set_sticky(t4a_fake *fake, int ordinal, CUresult result);
/* The sticky error of device `ordinal`'s context, or CUDA_SUCCESS. */
CUresult t4a_fake_sticky(t4a_fake *fake, int ordinal);

/* ---- counts ---- */
/* Calls made to `entry` (NULL: all entries) since creation or the last reset. */
uint64_t t4a_fake_calls(t4a_fake *fake, const char *entry);
void t4a_fake_reset_calls(t4a_fake *fake);

typedef struct t4a_fake_live {
  uint64_t device_allocs, device_bytes; /* pool, async and sync allocations */
  uint64_t host_allocs;                 /* cuMemHostAlloc */
  uint64_t host_registrations;          /* cuMemHostRegister */
  uint64_t streams, events, pools, modules, graphs, graph_execs;
  int primary_refs[T4A_FAKE_MAX_DEVICES]; /* primary-context retain counts */
} t4a_fake_live;
void t4a_fake_live_objects(t4a_fake *fake, t4a_fake_live *out);
/* 1 if every count in t4a_fake_live is 0 (nothing leaked), else 0. */
int t4a_fake_nothing_live(t4a_fake *fake);

/* ---- diagnostics ---- */
/* Ordering violations detected so far (see the model above): accesses not ordered after a
 * block's stream-ordered allocation or after its stream-ordered free, and stream-ordered frees
 * not ordered after every other stream's access; and, per block, a write not ordered after
 * another stream's access or an access not ordered after another stream's write (a copy's or
 * fill's destination and t4a_fake_deref_write are writes). Each also raised ILLEGAL_ADDRESS. */
uint64_t t4a_fake_ordering_violations(t4a_fake *fake);
/* Copies enqueued on a stream of one context that use pinned host memory (cuMemHostAlloc or
 * cuMemHostRegister) pinned without the PORTABLE flag by another context. */
uint64_t t4a_fake_nonportable_pinned_uses(t4a_fake *fake);
/* cuEventQuery / cuEventSynchronize calls made while a context other than the event's was
 * current (allowed by the driver; t4a observes every event under its own context). */
uint64_t t4a_fake_foreign_event_observations(t4a_fake *fake);
/* The priority a live stream was created with (after the driver's clamping): 1 and *out, or 0
 * for an unknown handle. */
int t4a_fake_stream_priority(t4a_fake *fake, CUstream stream, int *out);
/* Host functions (cuLaunchHostFunc) the fake ran so far: each on a thread of its own, in stream
 * order, when progress reaches it (not run on a faulted stream). */
uint64_t t4a_fake_host_fns_run(t4a_fake *fake);
/* Driver calls made from inside a host function, in the process (each refused with
 * CUDA_ERROR_NOT_PERMITTED, as the Driver API allows: host functions must not call CUDA). */
uint64_t t4a_fake_host_fn_driver_calls(void);
/* If host_ptr lies inside a live cuMemHostAlloc allocation: stores its cuMemHostAlloc flags in
 * *out_flags (when not NULL) and returns 1. Otherwise (registered or pageable memory) 0. */
int t4a_fake_host_alloc_flags(t4a_fake *fake, const void *host_ptr, unsigned *out_flags);
/* The bytes asked of cuMemHostAlloc for the live allocation that starts at host_ptr, or 0 (not
 * the start of one: registered, pageable or freed memory). */
size_t t4a_fake_host_alloc_bytes(t4a_fake *fake, const void *host_ptr);

/* ---- memory seen from the host ---- */
/* Host address behind [ptr, ptr + bytes) of a live device allocation (or device-mapped host
 * memory), or NULL if the range is not inside one live allocation. A stream-ordered allocation
 * whose operation has not run yet is already visible here. */
void *t4a_fake_host_view(t4a_fake *fake, CUdeviceptr ptr, size_t bytes);

/* ---- kernels ---- */
typedef struct t4a_fake_launch t4a_fake_launch;
/* A kernel: runs once per launch (not per thread) on the host, in stream order. params[i] points
 * at a copy of argument i (taken at launch time, as the driver does). */
typedef void (*t4a_fake_kernel_fn)(t4a_fake_launch *launch, void **params, void *user);
/* Registers kernel `name` with its parameter sizes (offsets follow the C ABI: each parameter
 * aligned to min(size, 8); a size that is not a power of two aligns to the largest power of two
 * dividing it, e.g. 3 -> 1, 12 -> 4). num_params may be 0. Re-registering replaces. Launches
 * snapshot the kernel (function, user pointer, sizes) when they are enqueued. */
void t4a_fake_register_kernel(t4a_fake *fake, const char *name, size_t num_params,
                              const size_t *param_sizes, t4a_fake_kernel_fn fn, void *user);
/* Same, with explicit alignments (e.g. 16 for float4 / double2): param_alignments[i] is a power
 * of two, or 0 for the rule above. param_alignments NULL: the rule above for every parameter.
 * An alignment that is not a power of two refuses the registration (reported on stderr). */
void t4a_fake_register_kernel_aligned(t4a_fake *fake, const char *name, size_t num_params,
                                      const size_t *param_sizes,
                                      const size_t *param_alignments, t4a_fake_kernel_fn fn,
                                      void *user);
/* Inside a kernel: the host address of [ptr, ptr + bytes) in device memory. Out of bounds: raises
 * the sticky ILLEGAL_ADDRESS on the launching context and returns NULL (the kernel must return). */
void *t4a_fake_deref(t4a_fake_launch *launch, CUdeviceptr ptr, size_t bytes);
/* Inside a kernel: the device address of global `name` of the module the launched function came
 * from (what a CUDA kernel reaches by the variable's name), and its size in *out_bytes; 0 (and
 * 0 bytes) when the module has none of that name. Read it with t4a_fake_deref: beyond its size
 * is ILLEGAL_ADDRESS, as everywhere. */
CUdeviceptr t4a_fake_launch_global(t4a_fake_launch *launch, const char *name, size_t *out_bytes);

/* What cuFuncGetAttribute reports for a registered kernel, and the limit a launch is held to.
 * A field <= 0 keeps its default: 32 registers, no static shared or local memory, 1,024
 * threads per block. CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES is the module's __constant__ bytes. */
typedef struct t4a_fake_kernel_attrs {
  int num_regs;
  int static_shared_bytes; /* the default dynamic maximum is 48 KiB less this; a raise may go to
                              the opt-in 227 KiB less this */
  int local_bytes;
  int max_threads_per_block; /* __launch_bounds__: a launch of more threads per block is
                                CUDA_ERROR_INVALID_VALUE (as measured on the H200) */
} t4a_fake_kernel_attrs;
/* Sets the attributes of registered kernel `name` (re-registering it resets them). */
void t4a_fake_set_kernel_attrs(t4a_fake *fake, const char *name,
                               const t4a_fake_kernel_attrs *attrs);

/* As t4a_fake_deref, declaring a write: judged as one by the ordering checks (a write must be
 * ordered after every other stream's access of the block; t4a_fake_deref counts as a read). */
void *t4a_fake_deref_write(t4a_fake_launch *launch, CUdeviceptr ptr, size_t bytes);
/* Inside a kernel: the launch geometry. */
void t4a_fake_launch_dims(const t4a_fake_launch *launch, unsigned grid[3], unsigned block[3],
                          unsigned *shared_bytes);
/* Inside a kernel: the launch attributes it was launched with (cuLaunchKernelEx, or the kernel
 * node's): cluster dims (all 0: none), cooperative, programmatic (NULL outputs skipped). */
void t4a_fake_launch_attrs(const t4a_fake_launch *launch, unsigned cluster[3], int *cooperative,
                           int *programmatic);
/* The occupancy model (cuOccupancy*, and cooperative and cluster launches), over the attributes
 * t4a_fake_set_kernel_attrs gives a kernel: resident blocks per
 * SM = the least of 32, 2048 / (threads rounded up to 32), 65536 / (registers x threads rounded
 * up to 32), and shared memory per SM (233,472) / (static + dynamic + 1 KiB reserved per block);
 * 0 when the block exceeds the kernel's max threads or the dynamic bytes its current maximum. A
 * cooperative launch needs the grid <= that x SM count (else
 * CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE); a cluster needs CLUSTER_LAUNCH (cc >= 9), dims that
 * divide the grid, a size <= 8, or <= 16 with the non-portable attribute set, and <= blocks per
 * SM x gpc_sms (else CUDA_ERROR_INVALID_CLUSTER_SIZE). */

/* ---- module images ---- */
/* Builds a fake module image naming `num` kernels into buf; returns the bytes needed (incl. NUL). */
size_t t4a_fake_image(char *buf, size_t size, const char *const *kernel_names, size_t num);
/* A global of a fake module image: "global NAME BYTES" (__device__) or "const NAME BYTES"
 * (__constant__) lines, zero-filled at load. */
typedef struct t4a_fake_global {
  const char *name;
  size_t bytes;
  int is_const;
} t4a_fake_global;
/* As t4a_fake_image, with `num_globals` globals after the kernels. */
size_t t4a_fake_image_globals(char *buf, size_t size, const char *const *kernel_names, size_t num,
                              const t4a_fake_global *globals, size_t num_globals);

#ifdef __cplusplus
}
#endif
#endif /* T4A_TESTING_FAKE_DRIVER_H_ */
