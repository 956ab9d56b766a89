/** @file
 * t4a/t4a.h — the facade: one include for the whole of t4a, and the composed runtime.
 *
 * Layer: //t4a (alias //:t4a), on top of every library. A program that wants one piece only (say the NVRTC
 * loader) includes that library's header and depends on that library alone; this header is for
 * programs that take all of t4a.
 *
 * The runtime (t4a_runtime) is one device's worth of t4a put together: a lane (a primary-context
 * holder and one non-blocking stream), the lane's memory pool, its retirement state, a transfer
 * state with its staging ring, a module cache and a descriptor table, all on that one lane; and,
 * from the first compile on, an NVRTC artifact cache. The short paths below (buffer, upload,
 * compile, load, launch, download, sync) cover the common program; the accessors hand out each
 * piece for everything else (graphs, copies between runtimes, raw scopes, files, L2): the lower
 * APIs take them as they are.
 *
 *   t4a_runtime *rt = NULL;
 *   t4a_status st = t4a_runtime_open(0, NULL, &rt);        // device 0, every default
 *   ... t4a_runtime_kernel(rt, source, "scale", &fn) ...  // NVRTC -> module -> function
 *   ... t4a_runtime_buffer / _upload / _launch / _download ...
 *   t4a_runtime_close(rt);
 *
 * (README.md has the whole example; it is examples/readme_example.c, built and run in CI.)
 *
 * Teardown. t4a_runtime_close destroys in this order: the descriptor table, the module cache,
 * the transfer state, the runtime's own artifact cache, the retirement state — which proves a
 * drain (the stream synchronised without error) and only then releases what the runtime's work
 * kept alive, or else leaks it, counts it and abandons the lane — then the pool (after a proved
 * drain its cached blocks are returned first, t4a_mem_pool_trim: a buffer the caller or a
 * quarantine still holds keeps the pool alive, but not its cache; and from then on the pool caches
 * nothing: a buffer released after close frees its block and waits for the lane's stream, a
 * counted host wait, or leaks and counts it), the lane and the driver reference. It returns the retirement state's verdict. Buffers, modules and functions
 * the caller still holds stay valid after close (each holds what it needs: a buffer its pool and
 * lane, a module its cache and lane); graphs, pending downloads and descriptor ids of the runtime
 * must be released, and a graph capture on its lane ended, before it is closed.
 *
 * Thread-safety: every function may be called from any thread, except that t4a_runtime_close
 * must not overlap any other call on the runtime. Operations on one runtime serialise on its
 * lane's operation lock (t4a/retire.h). Ownership: open returns the runtime, close destroys it
 * (accepts NULL); accessors return borrowed pointers valid until close; every out-parameter
 * object (buffer, artifact, module, function) is a new reference the caller releases. */
#ifndef T4A_T4A_H_
#define T4A_T4A_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/chain.h"
#include "t4a/ctx.h"
#include "t4a/event.h"
#include "t4a/fault.h"
#include "t4a/graph.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/jitlink.h"
#include "t4a/memset.h"
#include "t4a/nvrtc.h"
#include "t4a/raw.h"
#include "t4a/retire.h"
#include "t4a/status.h"
#include "t4a/xfer.h"
#include "t4a/xfer_copy.h"
#include "t4a/xfer_file.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @{ */
/** The version of these headers: MAJOR.MINOR.PATCH (t4a_version_string() is the linked one's). */
#define T4A_VERSION_MAJOR 0
#define T4A_VERSION_MINOR 1
#define T4A_VERSION_PATCH 0
/** @} */

/** Returns "MAJOR.MINOR.PATCH" of the t4a that was linked (static string). */
const char *t4a_version_string(void);

/* ---- The runtime ------------------------------------------------------------------------- */

/** One device's worth of t4a put together (see the top of this file). Opaque. */
typedef struct t4a_runtime t4a_runtime;

/** The descriptor table's capacity when the option is 0. */
#define T4A_RUNTIME_DEFAULT_TABLE_CAPACITY 256u

/** Options of t4a_runtime_open. Zero everywhere means the default; each piece's defaults are
 * documented in its own header and repeated here. The options are read during open only (strings
 * are copied). */
typedef struct t4a_runtime_options {
  /** The driver. NULL: t4a_driver_get_default() (libcuda.so.1, or $T4A_LIBCUDA_PATH). Borrowed:
   * the runtime takes its own reference. Tests pass the fake driver's. */
  t4a_driver *driver;
  /** The lane's stream priority: 0, the default priority. */
  t4a_lane_options lane;
  /** The pool: release threshold UINT64_MAX (keep everything), a reuse cache of at most 256 MiB
   * and 1024 blocks. */
  t4a_mem_pool_options pool;
  /** Retirement: 1024 pending records (one event per 512 admissions), 64 sealed epochs. */
  t4a_retire_options retire;
  /** The staging ring: 16 MiB chunks 4 deep (2 made at open, the others when a transfer spans
   * them), the default copy threads (t4a_xfer_options), no bound on the callers' pinned memory
   * held by direct uploads. */
  t4a_xfer_options xfer;
  /** The module cache: 64 modules, 256 MiB of images. Its `launch` must stay at its default
   * (zero): the runtime's launch policy is `launch` below. */
  t4a_module_cache_options modules;
  /** The descriptor table: T4A_RUNTIME_DEFAULT_TABLE_CAPACITY descriptors (at most 65536). */
  uint32_t table_capacity;
  /* Compilation (t4a_runtime_compile*). NVRTC is never opened by t4a_runtime_open: only the
   * first compile opens it, so a program that never compiles runs without NVRTC installed. */
  /** An artifact cache to compile through, borrowed: it must outlive the runtime. Several
   * runtimes (one per device, say) may share one. NULL: at the first compile the runtime opens
   * NVRTC with `nvrtc` and creates its own cache with `artifacts`. */
  t4a_nvrtc_cache *artifact_cache;
  /** The runtime's own NVRTC: library_path NULL searches as t4a_nvrtc_lib_open documents. */
  t4a_nvrtc_lib_options nvrtc;
  /** The runtime's own artifact cache: memory only (disk_dir NULL), 512 artifacts, 256 MiB. */
  t4a_nvrtc_cache_options artifacts;
  /** The compile target. NULL: the device's real architecture, "sm_<major><minor>" (sm_90 on an
   * H100 or H200, and on the fake driver). */
  const char *target;
  /** Nonzero: t4a_runtime_compile produces PTX (the driver JIT-compiles it at load) instead of a
   * CUBIN. A "compute_NN" target always produces PTX. */
  int compile_ptx;
  /** How the descriptor table fires and the module cache's checked launches are submitted
   * (t4a/launch.h, t4a_launch_policy): AUTO follows the calibration when there is one, else
   * PLAIN. launch.calibration NULL: the runtime's own (calibrate_launches), if any; given: these
   * figures are used (copied) instead of a measurement, and calibrate_launches is not needed. */
  t4a_launch_policy launch;
  /** Nonzero: open measures plain against graph fires (t4a_launch_calibrate) with an empty kernel
   * (PTX, JIT-compiled by the driver; no NVRTC) once per process and device — a later runtime
   * on the same driver and device reuses the figures — and its table uses the result. The
   * measurement runs on a lane of its own (the runtime's counters do not see it); if it fails
   * (no graph could be built, say), the runtime opens with PLAIN and the stats JSON says why
   * ("calibration_failed"). */
  int calibrate_launches;
  /** A link cache to link through (t4a_runtime_link), borrowed: it must outlive the runtime.
   * NULL: at the first link the runtime opens nvJitLink and creates its own (memory, and the
   * artifact cache's disk directory when it has one). */
  t4a_jitlink_cache *link_cache;
  /** Nonzero: compiles get no default include roots. Zero: t4a_runtime_compile* append the CUDA
   * toolkit's include roots (t4a_nvrtc_toolkit_find: include and include/cccl) after a
   * request's own, so that <cuda_fp16.h>, <cooperative_groups.h>, <cuda/std/...> and <cub/...>
   * resolve as with nvcc, keyed by their content. */
  int no_toolkit_roots;
  /** Zero: the runtime's own cache compiles what its key cannot see (a computed include, a paste
   * that could make __has_include: t4a_nvrtc_cache_options.compile_uncacheable) uncached, origin
   * UNCACHED, so that every kernel NVRTC accepts compiles; artifacts.compile_uncacheable is not
   * read. Nonzero: such a compile is INVALID_ARGUMENT, as the cache refuses it. A borrowed
   * artifact_cache keeps its own setting. */
  int refuse_uncacheable;
} t4a_runtime_options;
/** Every option at its default (zero). */
#define T4A_RUNTIME_OPTIONS_INIT                                                                   \
  {                                                                                                \
    NULL, T4A_LANE_OPTIONS_INIT, T4A_MEM_POOL_OPTIONS_INIT, T4A_RETIRE_OPTIONS_INIT,               \
        T4A_XFER_OPTIONS_INIT, T4A_MODULE_CACHE_OPTIONS_INIT, 0, NULL, T4A_NVRTC_LIB_OPTIONS_INIT, \
        T4A_NVRTC_CACHE_OPTIONS_INIT, NULL, 0, T4A_LAUNCH_POLICY_INIT, 0, NULL, 0, 0               \
  }

/** Opens a runtime on device `ordinal`: takes a driver reference, creates the lane, the pool, the
 * retirement state, the transfer state (its staging ring's pinned chunks and events come with the
 * first pageable transfers that use them), the module cache and the descriptor table, and works out the compile
 * target.
 * options may be NULL (every default).
 * Statuses: INVALID_ARGUMENT (out NULL, a bad option: the piece's own checks), DRIVER_NOT_FOUND,
 * DRIVER_TOO_OLD, DRIVER_SYMBOL_MISSING, NO_DEVICE (no driver, or a driver that cannot start:
 * t4a_driver_get_default), INVALID_DEVICE (no device `ordinal`), UNSUPPORTED (a device without
 * memory pools), LANE_BROKEN (the device's context took a sticky error earlier), CONTEXT_LOST,
 * DRIVER_ERROR, HOST_OUT_OF_MEMORY, INTERNAL (a lock or a copy thread could not be started). On
 * failure *out is NULL and every piece made so far was released (the detail is the first
 * failure's). */
T4A_MUST_USE t4a_status t4a_runtime_open(int ordinal, const t4a_runtime_options *options,
                                         t4a_runtime **out);

/** Closes the runtime in the order given at the top of this file and frees it. Returns T4A_OK
 * after a proved drain; otherwise the retirement state's failure (CONTEXT_LOST, LANE_BROKEN, a
 * driver error…), everything it could not prove finished having been leaked and counted — never
 * freed on a guess. Called from inside one of this runtime's own callbacks (a raw scope on its
 * lane or on one of its streams), it returns REENTRY and does nothing. Streams left are destroyed
 * first. Accepts NULL (T4A_OK). */
t4a_status t4a_runtime_close(t4a_runtime *rt);

/* ---- Accessors (borrowed; valid until close) ---- */

/** @{ */
/** Accessors of the runtime's pieces: its driver, device ordinal, lane, pool, retirement state,
 * transfer state, module cache and descriptor table. Borrowed; valid until close. */
t4a_driver *t4a_runtime_driver(const t4a_runtime *rt);
int t4a_runtime_ordinal(const t4a_runtime *rt);
t4a_lane *t4a_runtime_lane(const t4a_runtime *rt);
t4a_mem_pool *t4a_runtime_pool(const t4a_runtime *rt);
t4a_retire *t4a_runtime_retire(const t4a_runtime *rt);
t4a_xfer *t4a_runtime_xfer(const t4a_runtime *rt);
t4a_module_cache *t4a_runtime_module_cache(const t4a_runtime *rt);
t4a_launch_table *t4a_runtime_table(const t4a_runtime *rt);
/** @} */
/** The launch calibration this runtime's table was created with: 1 and *out filled, or 0 (none
 * asked, or NULL). */
int t4a_runtime_launch_calibration(const t4a_runtime *rt, t4a_launch_calibration *out);
/** The compile target ("sm_90"). */
const char *t4a_runtime_target(const t4a_runtime *rt);
/** The artifact cache compiles go through: the caller's (options), or the runtime's own once the
 * first compile created it; NULL before that. */
t4a_nvrtc_cache *t4a_runtime_artifact_cache(t4a_runtime *rt);

/* ---- Short paths ---- */

/** A device buffer of `bytes` from the runtime's pool (t4a_buffer_create, default alignment, no
 * zero fill; stream-ordered on the runtime's lane). Statuses as t4a_buffer_create, and
 * INVALID_ARGUMENT for a NULL rt. */
T4A_MUST_USE t4a_status t4a_runtime_buffer(t4a_runtime *rt, size_t bytes, t4a_buffer **out);

/** Copies `bytes` of pageable host memory `src` into `dst` at `offset` (t4a_xfer_upload through
 * the staging ring): `src` may be reused when the call returns; no host wait unless the ring
 * must recycle a chunk. Statuses as t4a_xfer_upload. */
T4A_MUST_USE t4a_status t4a_runtime_upload(t4a_runtime *rt, t4a_buffer *dst, size_t offset,
                                           const void *src, size_t bytes);

/** Copies `bytes` of `src` from `offset` into host memory `dst` and waits for them (download,
 * wait, release: one counted host wait). Statuses as t4a_xfer_download and
 * t4a_xfer_pending_wait; on failure `dst` may hold part of the bytes. */
T4A_MUST_USE t4a_status t4a_runtime_download(t4a_runtime *rt, t4a_buffer *src, size_t offset,
                                             void *dst, size_t bytes);

/** Copies `bytes` from `src` at `src_offset` to `dst` at `dst_offset`, both buffers of this
 * runtime, on its stream (t4a_xfer_copy within one lane: no host wait, no event). Statuses as
 * t4a_xfer_copy (FOREIGN_HANDLE for a buffer of another runtime: use t4a_xfer_copy with both
 * runtimes' t4a_xfer). */
T4A_MUST_USE t4a_status t4a_runtime_copy(t4a_runtime *rt, t4a_buffer *dst, size_t dst_offset,
                                         t4a_buffer *src, size_t src_offset, size_t bytes);

/** Compiles CUDA C++ `source` for the runtime's target through the artifact cache (a request
 * compiled before comes back from memory or disk with no NVRTC call). `program_name` (NULL:
 * "t4a_program.cu") names it in diagnostics. Output: a CUBIN, or PTX (compile_ptx, or a
 * compute_NN target). Unless options.no_toolkit_roots, the CUDA toolkit's include roots are
 * appended to every compile's (found at the first compile; when none was found, a compile whose
 * include needed one is INVALID_ARGUMENT saying where t4a looked). What the cache's key cannot
 * see compiles uncached unless options.refuse_uncacheable. The first compile opens NVRTC
 * and creates the runtime's own cache (unless
 * the options gave one). Statuses: NVRTC_NOT_FOUND (NVRTC cannot be loaded: only here, never at
 * open; asked again at the next compile), NVRTC_SYMBOL_MISSING, COMPILE_FAILED (the headline of
 * NVRTC's log in the detail; the whole log through t4a_runtime_compile_request),
 * UNSUPPORTED (the target is not one this NVRTC supports: set options.target),
 * INVALID_ARGUMENT, HOST_OUT_OF_MEMORY, IO, NVRTC_ERROR: as t4a_nvrtc_cache_compile. */
T4A_MUST_USE t4a_status t4a_runtime_compile(t4a_runtime *rt, const char *source,
                                            const char *program_name,
                                            t4a_nvrtc_artifact **out);

/** Compiles a full request (headers, options, name expressions) through the artifact cache.
 * request->target NULL means the runtime's target; request->output is taken as given (zero is
 * PTX). out_outcome (may be NULL) receives where the artifact came from and a failure's full
 * log. Statuses as t4a_runtime_compile, with the cache's checks of what the key can see. */
T4A_MUST_USE t4a_status t4a_runtime_compile_request(t4a_runtime *rt,
                                                    const t4a_nvrtc_request *request,
                                                    t4a_nvrtc_artifact **out,
                                                    t4a_nvrtc_outcome *out_outcome);

/** Compiles `source` to LTO-IR (relocatable device code, -rdc=true) for the runtime's target
 * through the artifact cache: a device library compiled once, or kernels that call one. Statuses
 * as t4a_runtime_compile. */
T4A_MUST_USE t4a_status t4a_runtime_compile_lto(t4a_runtime *rt, const char *source,
                                                const char *program_name,
                                                t4a_nvrtc_artifact **out);
/** Links LTO-IR artifacts into a CUBIN artifact through the runtime's link cache (t4a/jitlink.h),
 * for the runtime's target when request->target is NULL (sm_NN for a compute_NN target). The
 * first link opens nvJitLink and creates the link cache: in memory, and in the artifact cache's
 * disk directory when it has one. out_outcome (may be NULL): where the CUBIN came from, a failed
 * link's log. Statuses: as t4a_jitlink_cache_link; JITLINK_NOT_FOUND, JITLINK_SYMBOL_MISSING
 * (nvJitLink cannot be opened; asked again at the next link). */
T4A_MUST_USE t4a_status t4a_runtime_link(t4a_runtime *rt, const t4a_jitlink_request *request,
                                         t4a_nvrtc_artifact **out,
                                         t4a_nvrtc_outcome *out_outcome);
/** One call: compiles `source` to LTO-IR (t4a_runtime_compile_lto), links it with `libraries`
 * (LTO-IR artifacts, num_libraries of them, may be 0), loads the CUBIN and looks up kernel
 * `name`. Statuses: as the calls it makes. */
T4A_MUST_USE t4a_status t4a_runtime_kernel_linked(t4a_runtime *rt, const char *source,
                                                  const t4a_nvrtc_artifact *const *libraries,
                                                  size_t num_libraries, const char *name,
                                                  t4a_function **out);

/** Loads an artifact (PTX or CUBIN) into the runtime's module cache (t4a_module_load_artifact: a
 * second load of one artifact is a cache hit). Statuses as t4a_module_load_artifact. */
T4A_MUST_USE t4a_status t4a_runtime_load(t4a_runtime *rt, const t4a_nvrtc_artifact *artifact,
                                         t4a_module **out);

/** Loads an image (PTX text, CUBIN or fatbin, told from its bytes) into the module cache
 * (t4a_module_load with T4A_IMAGE_AUTO; the caller's bytes are not kept). Statuses as
 * t4a_module_load. */
T4A_MUST_USE t4a_status t4a_runtime_load_image(t4a_runtime *rt, const void *image, size_t bytes,
                                               t4a_module **out);

/** Looks kernel `name` up in `module` (t4a_module_get_function). Statuses as
 * t4a_module_get_function, and FOREIGN_HANDLE for a module of another runtime. */
T4A_MUST_USE t4a_status t4a_runtime_function(t4a_runtime *rt, t4a_module *module,
                                             const char *name, t4a_function **out);

/** Looks global `name` (__device__ or __constant__) up in `module` and returns a view of it
 * (t4a_module_get_global): a buffer that t4a_runtime_upload, _download, _copy and launches take,
 * holding the module alive while work on it is queued; `expected_bytes` 0 accepts any size.
 * Statuses as t4a_module_get_global, and FOREIGN_HANDLE for a module of another runtime. */
T4A_MUST_USE t4a_status t4a_runtime_global(t4a_runtime *rt, t4a_module *module, const char *name,
                                           size_t expected_bytes, t4a_buffer **out);

/** Compile, load and look up in one call: kernel `name` (an extern "C" name, or a lowered one)
 * of `source`. The function holds its module; the artifact is not kept (the cache has it).
 * Statuses as the three calls. */
T4A_MUST_USE t4a_status t4a_runtime_kernel(t4a_runtime *rt, const char *source, const char *name,
                                           t4a_function **out);

/** A checked launch of `function` on the runtime's stream with a 1-D config: `grid` blocks of
 * `block` threads, no dynamic shared memory (t4a_launch; for 2-D/3-D or shared memory call
 * t4a_launch with t4a_runtime_retire(rt)). Arguments are checked against the kernel's
 * parameters; buffers stay alive until the kernel ran. Statuses as t4a_launch. */
T4A_MUST_USE t4a_status t4a_runtime_launch(t4a_runtime *rt, t4a_function *function,
                                           uint32_t grid, uint32_t block, const t4a_arg *args,
                                           uint32_t num_args);

/** Waits for all work admitted on the runtime (t4a_retire_wait: one counted host wait) and
 * releases what it kept alive. Statuses as t4a_retire_wait (a device error of that work,
 * REENTRY, LANE_BROKEN…). */
T4A_MUST_USE t4a_status t4a_runtime_sync(t4a_runtime *rt);

/* ---- Streams ---- */

/** A further stream of a runtime (t4a_stream_create). Every call that takes a `t4a_stream *`
 * takes NULL for the runtime's own stream. Opaque. */
typedef struct t4a_stream t4a_stream;

/** Options of t4a_stream_create; zero means the default. */
typedef struct t4a_stream_options {
  /** The stream's priority: 0 (the default), or within t4a_runtime_priority_range (lower is more
   * urgent); outside it INVALID_ARGUMENT. */
  int priority;
  /** The stream's retirement state: as the runtime's defaults. */
  t4a_retire_options retire;
} t4a_stream_options;
/** Every option at its default (zero). */
#define T4A_STREAM_OPTIONS_INIT {0, T4A_RETIRE_OPTIONS_INIT}

/** The device's stream priorities: `*out_least` (0) to `*out_greatest` (numerically lowest, the
 * most urgent; -5 on the H200). Statuses: INVALID_ARGUMENT, LANE_BROKEN, driver failures. */
T4A_MUST_USE t4a_status t4a_runtime_priority_range(t4a_runtime *rt, int *out_least,
                                                   int *out_greatest);

/** Creates a further stream of the runtime: its own CUstream (non-blocking, `options->priority`)
 * on the runtime's context, sharing the runtime's pool, allocation domain, module cache and
 * descriptor table: buffers, modules, functions and descriptors of the runtime are used on it as
 * they are (no FOREIGN_HANDLE). Work on two streams is unordered unless ordered explicitly
 * (t4a_stream_wait); lifetimes are not: a buffer used on several streams is freed or its memory
 * reused only after every use on every stream ran, with no host wait and nothing to call
 * (design §6). options may be NULL. The runtime destroys streams left at close.
 * Statuses: INVALID_ARGUMENT (NULL; a priority outside the device's range), LIMIT_EXCEEDED
 * (T4A_LANE_MAX_STREAMS streams with the runtime's own), LANE_BROKEN, HOST_OUT_OF_MEMORY,
 * driver failures. */
T4A_MUST_USE t4a_status t4a_stream_create(t4a_runtime *rt, const t4a_stream_options *options,
                                          t4a_stream **out);
/** Destroys a stream: its staging ring, then its retirement state (waits for its work: one
 * counted host wait, and releases what it kept), then its CUstream. Returns T4A_OK after a
 * proved drain, else the failure (what could not be proved was leaked and counted). Statuses
 * also FOREIGN_HANDLE (another runtime's: nothing done), REENTRY (from inside the stream's own
 * raw scope: nothing done). Accepts a NULL stream (T4A_OK). */
t4a_status t4a_stream_destroy(t4a_runtime *rt, t4a_stream *stream);
/** @{ */
/** The stream's lane and retirement state (borrowed; valid until the stream is destroyed): every
 * lower-level operation on a t4a_retire — t4a_launch, t4a_launch_raw, t4a_raw_run, graph
 * captures and launches, t4a_xfer on it — runs on the stream. NULL for NULL. */
t4a_lane *t4a_stream_lane(const t4a_stream *stream);
t4a_retire *t4a_stream_retire(const t4a_stream *stream);
/** @} */
/** The stream's transfer state (NULL stream: the runtime's), made at the first call with the
 * runtime's transfer options (its own staging ring). Statuses: INVALID_ARGUMENT, FOREIGN_HANDLE,
 * t4a_xfer_create's. */
T4A_MUST_USE t4a_status t4a_stream_xfer(t4a_runtime *rt, t4a_stream *stream, t4a_xfer **out);

/** Makes `waiter`'s later work wait for everything enqueued on `target` so far: one event
 * recorded on `target` and one cuStreamWaitEvent on `waiter`, no host wait (counted in
 * cross_stream_events and events_recorded on the target's lane, cross_stream_waits on the
 * waiter's); buffers allocated or used on `target` before then need no further ordering on
 * `waiter`. The same stream twice does nothing. Statuses: INVALID_ARGUMENT, FOREIGN_HANDLE (a stream of another runtime: nothing
 * enqueued), UNSUPPORTED (target capturing a graph), REENTRY, LANE_BROKEN, driver failures. */
T4A_MUST_USE t4a_status t4a_stream_wait(t4a_runtime *rt, t4a_stream *waiter, t4a_stream *target);
/** Waits for the stream's work (t4a_retire_wait on it: one counted host wait). */
T4A_MUST_USE t4a_status t4a_stream_sync(t4a_runtime *rt, t4a_stream *stream);

/** @{ */
/** The short paths on a stream (NULL: the runtime's own, as the calls without _on): a checked
 * 1-D launch, a descriptor fire of the runtime's table (t4a_descriptor_fire_on), a pageable
 * upload and a download (through the stream's staging ring; the download waits), a copy between
 * two buffers of the runtime on the stream. Statuses as the calls they wrap, and FOREIGN_HANDLE
 * for a stream of another runtime (nothing enqueued). */
T4A_MUST_USE t4a_status t4a_runtime_launch_on(t4a_runtime *rt, t4a_stream *stream,
                                              t4a_function *function, uint32_t grid,
                                              uint32_t block, const t4a_arg *args,
                                              uint32_t num_args);
T4A_MUST_USE t4a_status t4a_runtime_fire_on(t4a_runtime *rt, t4a_stream *stream, uint32_t id);
T4A_MUST_USE t4a_status t4a_runtime_upload_on(t4a_runtime *rt, t4a_stream *stream,
                                              t4a_buffer *dst, size_t offset, const void *src,
                                              size_t bytes);
T4A_MUST_USE t4a_status t4a_runtime_download_on(t4a_runtime *rt, t4a_stream *stream,
                                                t4a_buffer *src, size_t offset, void *dst,
                                                size_t bytes);
T4A_MUST_USE t4a_status t4a_runtime_copy_on(t4a_runtime *rt, t4a_stream *stream,
                                            t4a_buffer *dst, size_t dst_offset, t4a_buffer *src,
                                            size_t src_offset, size_t bytes);
/** @} */

/* ---- Events, fills, host functions, memory gauges ---- */

/** Fills `count` elements of `elem_bytes` (1, 2 or 4) of `buffer` from byte `offset` with `value`
 * on `stream` (t4a_memset). Statuses as t4a_memset; INVALID_ARGUMENT (NULL rt), FOREIGN_HANDLE
 * (a stream or buffer of another runtime). */
T4A_MUST_USE t4a_status t4a_runtime_memset(t4a_runtime *rt, t4a_stream *stream,
                                           t4a_buffer *buffer, size_t offset, size_t count,
                                           unsigned elem_bytes, uint32_t value);

/** An event of the runtime's device (t4a_event_create; flags: T4A_EVENT_TIMING). Observe it with
 * t4a_event_query, t4a_event_synchronize (a counted host wait) and t4a_event_elapsed_ms; drop it
 * with t4a_event_release. Statuses as t4a_event_create. */
T4A_MUST_USE t4a_status t4a_runtime_event(t4a_runtime *rt, uint32_t flags, t4a_event **out);
/** Records `event` on `stream` after the work enqueued there so far (t4a_event_record). */
T4A_MUST_USE t4a_status t4a_runtime_event_record(t4a_runtime *rt, t4a_stream *stream,
                                                 t4a_event *event);
/** Makes `stream` wait for `event`'s latest record, no host wait (t4a_event_wait;
 * FOREIGN_HANDLE for an event of another device's context). */
T4A_MUST_USE t4a_status t4a_runtime_event_wait(t4a_runtime *rt, t4a_stream *stream,
                                               t4a_event *event);
/** Enqueues fn(user) on `stream` (t4a_host_func_launch: the keepalives are handed over and held
 * until it ran; inside fn, t4a calls answer REENTRY). */
T4A_MUST_USE t4a_status t4a_runtime_host_func(t4a_runtime *rt, t4a_stream *stream, t4a_host_fn fn,
                                              void *user, const t4a_keepalive *keep,
                                              size_t num_keep);

/** The runtime's memory: the device's free and total memory, and its pool's gauges. */
typedef struct t4a_runtime_memory_info {
  uint64_t device_free_bytes;  /**< cuMemGetInfo: free on the device (every process) */
  uint64_t device_total_bytes; /**< cuMemGetInfo: the device's memory */
  struct t4a_mem_pool_gauges pool; /**< the runtime's pool, shared by all its streams */
} t4a_runtime_memory_info;
/** Reads the gauges (t4a_ctx_holder_memory, t4a_mem_pool_gauges). Statuses as those, and
 * INVALID_ARGUMENT for NULLs. */
T4A_MUST_USE t4a_status t4a_runtime_memory(t4a_runtime *rt, t4a_runtime_memory_info *out);
/** Starts a new peak of the pool's bytes in use (t4a_mem_pool_reset_peak). Accepts NULL. */
void t4a_runtime_reset_peak(t4a_runtime *rt);

/* ---- Stats ---- */

/** Copies the lane's counters (every name of T4A_COUNTER_LIST: launches, events, host waits,
 * transfers, module loads… of this runtime). All zero for NULL. */
void t4a_runtime_stats(const t4a_runtime *rt, t4a_counter_values *out);

/** Writes every counter of the runtime as JSON text into buf (NUL-terminated):
 *   {"t4a_version": "0.1.0", "ordinal": 0, "target": "sm_90",
 *    "lane": {\<every counter of T4A_COUNTER_LIST by name\>: \<number\>, ...},
 *    "driver": {"origin": "...", "version": 13000, "counters": {\<every counter by name\>}},
 *    "module_cache": {"entries", "bytes", "loads", "hits", "evictions", "unloads"},
 *    "retire": {"open_admissions", "open_keepalives", "sealed_epochs", "quarantined_held"},
 *    "launch_table": {"strategy": "plain"|"graph", "graph_after", "descriptors", "graphs",
 *                     "plain_fires", "graph_fires", "graph_builds", "graph_updates",
 *                     "graph_fallbacks", "calibration": null (then "calibration_failed":
 *                     "STATUS" when the measurement failed), or {"fires", "plain_ns",
 *                     "graph_ns", "graph_rebind_ns", "build_ns", "device_bytes_per_graph",
 *                     "strategy", "graph_after"}},
 *    "xfer": {"chunk_bytes", "num_chunks", "free_chunks", "busy_chunks", "quarantined_chunks",
 *             "spare_events", "chunks_reclaimed", "pinned_hold_bytes", "pinned_fallbacks",
 *             "copy_threads", "parallel_copies"},
 *    "artifact_cache": null, or {<every nvrtc_* counter of the cache>, "memory_entries",
 *                                "memory_bytes"},
 *    "memory": null (the gauges could not be read), or {"device_free_bytes",
 *              "device_total_bytes", "in_use_bytes", "in_use_blocks", "peak_in_use_bytes",
 *              "cached_bytes", "cached_blocks", "reserved_bytes", "driver_used_bytes"},
 *    "heap_allocations": <t4a_heap_allocations(), process-wide>}
 * On success *out_len (optional) is the text's length without the NUL. If `size` is too small
 * (buf may then be NULL with size 0, to ask), nothing usable is written, the status is
 * LIMIT_EXCEEDED and *out_len is the size needed, NUL included (also in the detail's bytes);
 * counters may grow between two calls, so leave room. Statuses: INVALID_ARGUMENT (NULL rt, NULL
 * buf with a size), LIMIT_EXCEEDED. */
T4A_MUST_USE t4a_status t4a_runtime_stats_json(t4a_runtime *rt, char *buf, size_t size,
                                               size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_T4A_H_ */
