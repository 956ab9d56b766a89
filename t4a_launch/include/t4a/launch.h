/** @file
 * t4a/launch.h — module cache, checked launches, launch descriptors, L2 persistence.
 *
 * Layer: t4a_launch (on t4a_nvrtc, t4a_ctx, t4a_mem and t4a_retire). Graphs are in
 * t4a/graph.h (same library).
 *
 * A runtime here is a t4a_retire (its lane: context, stream, allocation domain). Everything below
 * is bound to one: a module cache to the retire it was created on, its modules and functions to
 * that cache's lane. A launch names the retire it runs on; a function or buffer of another domain
 * is FOREIGN_HANDLE, checked before anything is enqueued.
 *
 * Modules. t4a_module_load* loads an image (PTX, CUBIN, fatbin; or an NVRTC artifact) into the
 * cache: content-addressed (the artifact's key, or XXH3-128 of the image bytes seeded with their
 * kind), so two loads of one image — for two entry points, say — load it once. Keys are compared,
 * not the bytes (a 128-bit hash; an artifact and the same bytes given as an image are two
 * entries). The kind is told from the bytes: an ELF (CUBIN), the fatbin magic 0xBA55ED50, or text
 * with a ".version" directive (PTX). A named kind the bytes contradict is INVALID_ARGUMENT; bytes
 * of no known kind are refused under AUTO and handed to the driver as they are under a named
 * kind (the driver judges them: the fake driver's own image format loads this way). The driver
 * is given no size, so an ELF or fatbin whose headers declare parts beyond `bytes` is refused,
 * and text without a terminating NUL is copied and terminated. PTX is JIT-compiled by the driver
 * with an error log, whose first lines go into the detail of a refusal. The cache holds a strong
 * reference to each module, bounded by entries and bytes, least recently used first out. A module
 * handed to the caller, and every function of it, holds the module alive; every launch keeps its
 * module alive through the lane's open epoch (a deduplicated keepalive: no per-launch event, no
 * allocation), so eviction or a clear while launches are queued defers the unload until that work
 * completed. The last reference unloads the module under its context; if that context cannot be
 * activated (or is lost) the module is leaked and counted (`leaked`, requirement A5).
 *
 * Globals. t4a_module_get_global looks a __device__ or __constant__ variable up (UNKNOWN_ENTRY_POINT
 * naming it) and hands out a view of it that every buffer operation accepts (below).
 *
 * Functions. t4a_module_get_function looks a kernel up (UNKNOWN_ENTRY_POINT naming it); one
 * function object per (module, name), which lives as long as its module (a function reference is
 * a module reference). Its parameter list comes from cuFuncGetParamInfo, probed once when the
 * function is first looked up (docs/design.md §13). Where the driver lacks cuFuncGetParamInfo
 * (T4A_DRIVER_CAP_FUNC_PARAM_INFO absent from t4a_driver_caps) only the count declared with
 * t4a_function_declare_params is checked, and sizes cannot be; a function with neither is not
 * launched (ARGUMENT_MISMATCH).
 *
 * Checked launches. Arguments are typed (t4a_arg): a buffer (domain-checked; kept alive by the
 * epoch), a raw device address, or a scalar by value with its size. Count and each size must
 * match the kernel's parameters (ARGUMENT_MISMATCH naming the index, the expected and the given
 * size). Config: any zero dimension, a block above the device's max threads per block or above
 * its per-dimension limits, a grid above the device's limits, dynamic
 * shared memory above the device's opt-in maximum -> INVALID_LAUNCH before anything is enqueued.
 * Dynamic shared memory above the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
 * (48 KiB less its static shared memory, until raised) raises that attribute to the size asked,
 * once per new maximum (memoised per function). A launch the driver refuses synchronously
 * returns the driver's error with the entry (cuLaunchKernel) and code: a refusal of its
 * validation (CUDA_ERROR_INVALID_VALUE, _INVALID_HANDLE, _LAUNCH_OUT_OF_RESOURCES, ...) enqueued
 * nothing and leaves everything as it was; after any other failure the kernel may be queued (the
 * driver does not say), so the module stays kept by the epoch until it provably ran, and the
 * buffer arguments are quarantined (t4a_admission_fail: what the kernel wrote is unknown; their
 * memory is never freed on a guess, and leaks, counted, at the retire's teardown).
 * Every launch is one admission on the retire (reserve -> enqueue -> commit). The warm path
 * allocates nothing on the heap (t4a_heap_allocations(), see t4a/fault.h) and records at most one
 * event per 512 launches (`events_recorded`).
 *
 * Descriptors (requirement F3): a launch registered once — function, config and a
 * snapshot of the arguments, all checked at registration — and fired by id with no checks and no
 * allocation; one argument can be rebound (checked), or all rebound and fired in one call. Each
 * fire keeps the function's module and the bound buffers in the epoch, so a descriptor can be
 * rebound or unregistered, and its buffers released, while its fires are queued. A table fires
 * its descriptors plain (cuLaunchKernel) or each as its own one-node executable graph
 * (cuGraphLaunch; t4a_launch_strategy below), chosen by a measurement (t4a_launch_calibrate) or
 * by the caller; both keep the same guarantees (checks at registration, no heap allocation per
 * fire, keepalives through epochs, at most one event per 512 admissions).
 * Raw-bytes launches take the parameters packed as bytes with their offsets (for struct or half
 * parameters) and check offsets and sizes against the kernel's layout.
 *
 * Occupancy and launch attributes: blocks per SM for a block size and dynamic shared memory, a
 * suggested block size and minimum grid; cooperative launches, thread-block clusters and
 * programmatic dependent launch through cuLaunchKernelEx on the checked (t4a_launch_ex),
 * raw-bytes (t4a_launch_raw_ex) and descriptor (t4a_descriptor_register_ex) paths, checked
 * against the device's and the kernel's limits before anything is enqueued. An older driver
 * without the entries answers UNSUPPORTED (T4A_DRIVER_CAP_LAUNCH_EX, _OCCUPANCY,
 * _CLUSTER_OCCUPANCY).
 *
 * L2 persistence: the persisting-L2 limit of the lane's context (clamped to the device maximum,
 * the applied value returned), an access-policy window on the lane's stream, a reset of the
 * persisting lines.
 *
 * Thread-safety: every function may be called from any thread. Launches on one retire serialise
 * on its admission lock; a descriptor table serialises its operations, fires included, on its
 * own lock (taken before the retire's: a keepalive's release must not call back into a table). */
#ifndef T4A_LAUNCH_H_
#define T4A_LAUNCH_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/mem.h"
#include "t4a/nvrtc.h"
#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modules and functions ---- */

/** A lane's content-addressed LRU cache of loaded modules. Opaque. */
typedef struct t4a_module_cache t4a_module_cache;
/** A loaded module of a module cache. Refcounted, opaque. */
typedef struct t4a_module t4a_module;
/** A kernel of a module, with its parameter list. Refcounted, opaque. */
typedef struct t4a_function t4a_function;

/** How launches are submitted: a descriptor table's fires (t4a_launch_table_options), and the
 * checked and raw-bytes launches of a module cache's functions (t4a_module_cache_options).
 * PLAIN: one cuLaunchKernel per launch.
 * GRAPH: each descriptor — or each function, for checked launches — gets its own one-node
 *   executable graph (cuGraphCreate + cuGraphAddKernelNode + cuGraphInstantiateWithFlags +
 *   cuGraphUpload on the lane's stream), built at its `graph_after`-th launch (the launches before
 *   are plain: one launched once is not worth a graph); a launch is then one cuGraphLaunch on the
 *   lane's stream, ordered with every other operation of the lane exactly as cuLaunchKernel is.
 *   Changed arguments or config (a rebind, or a checked launch with other values than the last)
 *   update the node in place first (cuGraphExecKernelNodeSetParams; unchanged ones do not, but
 *   arguments of other sizes than 1, 2, 4 or 8 bytes always count as changed). A
 *   launch while the lane is captured (t4a/graph.h) is plain: it adds a kernel node to the
 *   captured graph. If building or updating a graph fails, that descriptor or function launches
 *   plain from then on (counted in launch_graph_fallbacks; the launch itself does not fail for
 *   it). Checked launches use a function's graph only when its parameter layout is known (not
 *   declared) and no other thread is launching it at that instant (else plain: a try-lock). One
 *   executable graph's launches are ordered after each other even across streams (the driver's
 *   rule): two retires of one lane launching one function through GRAPH serialise.
 * AUTO: the strategy a calibration chose (t4a_launch_calibrate), PLAIN without one. */
typedef enum t4a_launch_strategy {
  T4A_LAUNCH_STRATEGY_AUTO = 0,
  T4A_LAUNCH_STRATEGY_PLAIN = 1,
  T4A_LAUNCH_STRATEGY_GRAPH = 2,
} t4a_launch_strategy;

/** What t4a_launch_calibrate measured on one lane (host time per fire: the submitting thread's
 * wall clock, medians over blocks). */
typedef struct t4a_launch_calibration {
  uint32_t fires;                /**< fires per strategy measured */
  double plain_ns;               /**< a plain fire (cuLaunchKernel) */
  double graph_ns;               /**< a graph fire (cuGraphLaunch of the descriptor's graph) */
  double graph_rebind_ns;        /**< a rebind, then a graph fire (node update + cuGraphLaunch) */
  double build_ns;               /**< building one descriptor's graph (create, add, instantiate,
                                    upload) */
  uint64_t device_bytes_per_graph; /**< device memory taken per executable graph (cuMemGetInfo
                                      over the built graphs; 0 when none was seen) */
  t4a_launch_strategy strategy;  /**< GRAPH when graph_rebind_ns < 0.9 * plain_ns, else PLAIN */
  uint32_t graph_after;          /**< fires after which a graph has paid for its build:
                                    ceil(build_ns / (plain_ns - graph_ns)), within 2..4096 */
} t4a_launch_calibration;

/** How launches are submitted: the one setting of the launch strategy, read by the module
 * cache (its checked and raw-bytes launches) and by the descriptor table (its fires). Zero means
 * the default. */
typedef struct t4a_launch_policy {
  /** See t4a_launch_strategy: AUTO follows `calibration` (NULL: PLAIN). */
  t4a_launch_strategy strategy;
  /** GRAPH: the launch (of a function) or fire (of a descriptor) that builds its graph (1: the
   * first); 0: the calibration's figure, or 16 without one. */
  uint32_t graph_after;
  const t4a_launch_calibration *calibration; /**< read at create (copied); NULL: none */
} t4a_launch_policy;
/** Every field at its default (zero): AUTO, no calibration (PLAIN). */
#define T4A_LAUNCH_POLICY_INIT {T4A_LAUNCH_STRATEGY_AUTO, 0, NULL}

/** Options of t4a_module_cache_create; zero means the default. */
typedef struct t4a_module_cache_options {
  uint32_t max_entries; /**< 0: 64 */
  uint64_t max_bytes;   /**< image bytes; 0: 256 MiB */
  t4a_launch_policy launch; /**< checked and raw-bytes launches of the cache's functions */
} t4a_module_cache_options;
/** Every option at its default (zero). */
#define T4A_MODULE_CACHE_OPTIONS_INIT {0, 0, T4A_LAUNCH_POLICY_INIT}

/** The kind of a module image given to t4a_module_load. */
typedef enum t4a_image_kind {
  T4A_IMAGE_AUTO = 0, /**< PTX if it is text with ".version", CUBIN if ELF, fatbin if its magic */
  T4A_IMAGE_PTX = 1, /**< PTX text (the driver JIT-compiles it) */
  T4A_IMAGE_CUBIN = 2, /**< an ELF CUBIN */
  T4A_IMAGE_FATBIN = 3, /**< a fatbin */
} t4a_image_kind;

/** Creates the module cache of `retire`'s lane (retire borrowed: it must outlive the cache and
 * every module and function of it). It reads the device's launch limits once (cuDeviceGetAttribute)
 * for the config checks. Statuses: INVALID_ARGUMENT, HOST_OUT_OF_MEMORY, LANE_BROKEN, driver
 * failures, INTERNAL (a lock could not be initialised). */
T4A_MUST_USE t4a_status t4a_module_cache_create(t4a_retire *retire,
                                                const t4a_module_cache_options *options,
                                                t4a_module_cache **out);
/** Drops the cache's references (modules in use or with queued launches stay until those go; they,
 * and their functions, stay valid after the cache is gone). Accepts NULL. */
void t4a_module_cache_destroy(t4a_module_cache *cache);
/** Drops every cached module's cache reference (deferred unloads as above). */
void t4a_module_cache_clear(t4a_module_cache *cache);

/** A snapshot of a module cache (t4a_module_cache_stats). */
struct t4a_module_cache_stats {
  uint32_t entries; /**< modules held now */
  uint64_t bytes; /**< image bytes held now */
  uint64_t loads;     /**< cuModuleLoadData* calls that succeeded */
  uint64_t hits;      /**< loads answered from the cache */
  uint64_t evictions; /**< modules evicted (LRU, entries or bytes) */
  uint64_t unloads;   /**< cuModuleUnload calls that succeeded */
};
/** Copies the cache's stats into *out. */
void t4a_module_cache_stats(t4a_module_cache *cache, struct t4a_module_cache_stats *out);

/** Loads `bytes` of `image` (the caller's memory is not kept). On success *out is a new
 * reference. Statuses: INVALID_ARGUMENT (NULL, 0 bytes, an unknown kind value, an image whose
 * kind cannot be told under AUTO or does not match `kind`, an ELF or fatbin whose headers declare
 * more than `bytes`), LIMIT_EXCEEDED (larger than the cache's byte bound), the driver's refusal
 * (cuModuleLoadDataEx, e.g. DRIVER_ERROR with CUDA_ERROR_INVALID_PTX and the JIT log in the
 * detail), LANE_BROKEN, HOST_OUT_OF_MEMORY, INTERNAL (a lock could not be initialised). Two
 * threads missing on one image at once may both load it; one module is kept and returned to
 * both. */
T4A_MUST_USE t4a_status t4a_module_load(t4a_module_cache *cache, const void *image, size_t bytes,
                                        t4a_image_kind kind, t4a_module **out);
/** As t4a_module_load, for an NVRTC artifact (PTX or CUBIN, a linked one included: t4a/jitlink.h;
 * LTO-IR is INVALID_ARGUMENT until linked), keyed by the artifact's key. */
T4A_MUST_USE t4a_status t4a_module_load_artifact(t4a_module_cache *cache,
                                                 const t4a_nvrtc_artifact *artifact,
                                                 t4a_module **out);
/** Adds a reference. Accepts NULL. */
void t4a_module_retain(t4a_module *module);
/** Drops a reference; the last one unloads (see above). Accepts NULL. */
void t4a_module_release(t4a_module *module);

/** Looks up a kernel and, the first time, its parameter list. On success *out is a new reference
 * (the same function object for the same name). Statuses: INVALID_ARGUMENT, UNKNOWN_ENTRY_POINT
 * (the name in the detail), LIMIT_EXCEEDED (more than T4A_MAX_KERNEL_PARAMS parameters),
 * LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures (cuModuleGetFunction, cuFuncGetParamInfo,
 * cuFuncGetAttribute). */
T4A_MUST_USE t4a_status t4a_module_get_function(t4a_module *module, const char *name,
                                                t4a_function **out);
/** Adds a reference. Accepts NULL. */
void t4a_function_retain(t4a_function *function);
/** Drops a reference (a function's references are its module's). Accepts NULL. */
void t4a_function_release(t4a_function *function);
/** The kernel's name, as looked up. Owned by the function. */
const char *t4a_function_name(const t4a_function *function);
/** The allocation domain the function belongs to (its module cache's lane). */
uint64_t t4a_function_domain(const t4a_function *function);

/** @{ */
/** The kernel's parameter list (learnt at lookup: these calls reach no driver). *out_known is 1
 * when it came from the driver (cuFuncGetParamInfo), 0 when only a declared count is known
 * (sizes and offsets 0; count 0 before a declaration). Statuses: INVALID_ARGUMENT (NULL, an index
 * out of range). */
T4A_MUST_USE t4a_status t4a_function_num_params(t4a_function *function, uint32_t *out_count,
                                                int *out_known);
T4A_MUST_USE t4a_status t4a_function_param(t4a_function *function, uint32_t index,
                                           size_t *out_offset, size_t *out_size);
/** @} */
/** Where the driver has no cuFuncGetParamInfo: the number of parameters launches must pass.
 * INVALID_ARGUMENT where the driver knows the list and it differs. */
T4A_MUST_USE t4a_status t4a_function_declare_params(t4a_function *function, uint32_t count);

/* ---- module globals ---- */

/** Looks up global `name` of `module` (a __device__ or __constant__ variable; cuModuleGetGlobal,
 * learnt once per module and name) and returns a new reference to a view of it: a t4a_buffer
 * whose t4a_buffer_devptr and t4a_buffer_size are the global's address and size, in the module's
 * allocation domain. It is written and read as any buffer — t4a_xfer uploads and downloads,
 * copies, memsets, raw scopes — with offsets and sizes checked against the global's size (typed
 * errors, nothing enqueued), and it is a launch, descriptor or chain argument
 * (t4a_arg_buffer: its address). Every such use keeps the view, and the view keeps the module:
 * the module is not unloaded while work that touches the global is queued. t4a_buffer_pool of a
 * view is NULL. Each lookup makes its own view (one host allocation). `expected_bytes` 0 accepts
 * any size; otherwise the global must be exactly that big. Statuses: INVALID_ARGUMENT (NULL, an
 * empty name), UNKNOWN_ENTRY_POINT (no global of that name: the name in the detail),
 * ARGUMENT_MISMATCH (the global's size is not `expected_bytes`: both in the detail),
 * LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures (cuModuleGetGlobal). */
T4A_MUST_USE t4a_status t4a_module_get_global(t4a_module *module, const char *name,
                                              size_t expected_bytes, t4a_buffer **out);

/* ---- kernel attributes ---- */

/** What the driver says about a compiled kernel (cuFuncGetAttribute). */
typedef struct t4a_kernel_attributes {
  uint32_t num_regs;              /**< registers per thread */
  uint32_t static_shared_bytes;   /**< statically allocated shared memory per block */
  uint32_t const_bytes;           /**< user constant memory (__constant__) the kernel needs */
  uint32_t local_bytes;           /**< local memory per thread (spills, stack arrays) */
  uint32_t max_dynamic_shared_bytes; /**< dynamic shared memory a launch may use as the
                                        function is now (48 KiB less the static part until
                                        raised; t4a_launch raises it on demand) */
  uint32_t max_dynamic_shared_optin_bytes; /**< the most it can be raised to: the device's
                                              opt-in maximum per block less the static part */
  uint32_t max_threads_per_block; /**< threads per block beyond which a launch fails
                                     (__launch_bounds__, registers) */
  uint32_t ptx_version;           /**< virtual architecture, major * 10 + minor (90) */
  uint32_t binary_version;        /**< binary architecture, major * 10 + minor (90) */
} t4a_kernel_attributes;

/** Reads the kernel's attributes from the driver (eight cuFuncGetAttribute calls under the lane's
 * context). On failure *out is zero. Statuses: INVALID_ARGUMENT (NULL), LANE_BROKEN, driver
 * failures (cuFuncGetAttribute). */
T4A_MUST_USE t4a_status t4a_function_get_attributes(t4a_function *function,
                                                    t4a_kernel_attributes *out);

/* ---- checked launches ---- */

#define T4A_MAX_KERNEL_PARAMS 64u /**< parameters per kernel t4a checks and packs */

/** What a launch argument is. */
typedef enum t4a_arg_kind {
  T4A_ARG_BUFFER = 1, /**< a t4a_buffer of the launch's domain (its device address + offset) */
  T4A_ARG_DEVPTR = 2, /**< a raw device address (8 bytes), unchecked */
  T4A_ARG_SCALAR = 3, /**< `size` bytes at `value`, copied at the call */
} t4a_arg_kind;

/** One launch argument; build it with t4a_arg_buffer, t4a_arg_devptr or t4a_arg_scalar. */
typedef struct t4a_arg {
  t4a_arg_kind kind; /**< what the argument is */
  uint32_t size; /**< SCALAR: bytes at value; BUFFER and DEVPTR: 8 (set by the helpers) */
  union {
    struct {
      t4a_buffer *buffer;
      size_t offset;
    } buf;
    t4a_devptr devptr;
    const void *value;
  } u; /**< the value, by kind: buf (buffer and offset), devptr or value */
} t4a_arg;

/** An argument: the device address of `buffer` plus `offset` (checked at the launch; borrowed:
 * the launch keeps the buffer alive). */
static inline t4a_arg t4a_arg_buffer(t4a_buffer *buffer, size_t offset) {
  t4a_arg a;
  a.kind = T4A_ARG_BUFFER;
  a.size = 8;
  a.u.buf.buffer = buffer;
  a.u.buf.offset = offset;
  return a;
}
/** An argument: a raw device address, unchecked (the caller keeps its memory alive). */
static inline t4a_arg t4a_arg_devptr(t4a_devptr devptr) {
  t4a_arg a;
  a.kind = T4A_ARG_DEVPTR;
  a.size = 8;
  a.u.devptr = devptr;
  return a;
}
/** An argument: `size` bytes at `value`, copied at the launch call. */
static inline t4a_arg t4a_arg_scalar(const void *value, uint32_t size) {
  t4a_arg a;
  a.kind = T4A_ARG_SCALAR;
  a.size = size;
  a.u.value = value;
  return a;
}

/** A launch configuration: grid, block and dynamic shared memory. */
typedef struct t4a_launch_config {
  uint32_t grid[3];      /**< blocks; every dimension >= 1 */
  uint32_t block[3];     /**< threads; every dimension >= 1 */
  uint32_t shared_bytes; /**< dynamic shared memory */
} t4a_launch_config;

/** Checks and launches `function` on `retire`'s stream. Statuses: INVALID_ARGUMENT (NULL, a NULL
 * scalar value or size 0, an unknown kind, a buffer offset past its end), FOREIGN_HANDLE
 * (function or buffer of another domain), ARGUMENT_MISMATCH (count or a size; a function whose
 * parameter list is neither known nor declared), INVALID_LAUNCH (config), REENTRY, LANE_BROKEN,
 * CONTEXT_LOST, driver failures (entry cuLaunchKernel, or cuFuncSetAttribute raising the dynamic
 * shared memory limit; see the rule above for what a failed cuLaunchKernel leaves). */
T4A_MUST_USE t4a_status t4a_launch(t4a_retire *retire, t4a_function *function,
                                   const t4a_launch_config *config, const t4a_arg *args,
                                   uint32_t num_args);

/** Launches with the parameters packed in `params` (`bytes` long): parameter i at offsets[i].
 * Offsets and the sizes they imply (the next offset, or `bytes` for the last) must agree with the
 * kernel's layout: every offset the driver's, ascending, inside `bytes`, and the last parameter
 * spanning its size plus at most its padding to 8 bytes (ARGUMENT_MISMATCH otherwise; where the
 * layout is unknown, only the count and the order). The driver copies the bytes at the call.
 * Device addresses inside them are not checked and nothing but the module is kept alive: the
 * caller keeps the memory they name alive until the kernel ran. Statuses as t4a_launch. */
T4A_MUST_USE t4a_status t4a_launch_raw(t4a_retire *retire, t4a_function *function,
                                       const t4a_launch_config *config, const void *params,
                                       size_t bytes, const uint32_t *offsets,
                                       uint32_t num_params);

/* ---- occupancy and launch attributes ---- */

/** Resident blocks per multiprocessor of `function` launched with `block_threads` threads per
 * block and `shared_bytes` of dynamic shared memory (cuOccupancyMaxActiveBlocksPerMultiprocessor;
 * 0 when one block does not fit). The function's dynamic shared memory limit is raised to
 * `shared_bytes` first, as a launch with it would. Statuses: INVALID_ARGUMENT (NULL,
 * block_threads 0 or above the device's max threads per block, shared_bytes above the device's
 * opt-in maximum), UNSUPPORTED (no cuOccupancyMaxActiveBlocksPerMultiprocessor:
 * T4A_DRIVER_CAP_OCCUPANCY), LANE_BROKEN, driver failures. */
T4A_MUST_USE t4a_status t4a_function_occupancy(t4a_function *function, uint32_t block_threads,
                                               uint32_t shared_bytes, uint32_t *out_blocks_per_sm);

/** A suggested launch shape (t4a_function_suggest_block). */
typedef struct t4a_block_suggestion {
  uint32_t block_threads; /**< the block size with the highest occupancy */
  uint32_t blocks_per_sm; /**< resident blocks per SM at that size */
  uint32_t min_grid;      /**< blocks for full occupancy: blocks_per_sm x the SM count */
  uint32_t shared_bytes;  /**< the dynamic shared memory per block at that size */
} t4a_block_suggestion;

/** Suggests the block size with the most resident threads per SM, as the driver's
 * cuOccupancyMaxPotentialBlockSize does: from the largest block (the least of the kernel's and the
 * device's max threads per block and `block_limit`, 0: no limit of its own) down in steps of 32
 * threads, the first strictly highest occupancy wins (ties go to the larger block), stopping at
 * full occupancy. Dynamic shared memory per block is `shared_bytes` + `shared_per_thread` x the
 * block size (bytes, per-thread, or both); sizes needing more than the device's opt-in maximum are
 * skipped. Computed over t4a_function_occupancy (one query per size tried; the function's dynamic
 * shared memory limit raised as each would need). Statuses: INVALID_ARGUMENT (NULL),
 * UNSUPPORTED (as t4a_function_occupancy), LIMIT_EXCEEDED (no size fits a block), LANE_BROKEN,
 * driver failures (cuFuncGetAttribute, cuOccupancyMaxActiveBlocksPerMultiprocessor). */
T4A_MUST_USE t4a_status t4a_function_suggest_block(t4a_function *function, uint32_t shared_bytes,
                                                   uint32_t shared_per_thread,
                                                   uint32_t block_limit,
                                                   t4a_block_suggestion *out);

/** Allows (1) or forbids (0) cluster sizes above the portable 8 blocks for `function`
 * (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED; sm_90 allows 16). Statuses:
 * INVALID_ARGUMENT (NULL, allow not 0 or 1), UNSUPPORTED (the device has no clusters),
 * LANE_BROKEN, driver failures (cuFuncSetAttribute). */
T4A_MUST_USE t4a_status t4a_function_allow_non_portable_clusters(t4a_function *function,
                                                                 int allow);

/** Launch attributes (cuLaunchKernelEx); zero means none. */
typedef struct t4a_launch_attrs {
  /** Blocks per thread-block cluster in each dimension (sm_90: distributed shared memory); all 0:
   * no cluster. Each must divide the grid's dimension; the size (their product) is at most 8, or
   * 16 where the kernel allows non-portable sizes, and at most what the device can co-schedule for
   * this block and shared memory (cuOccupancyMaxPotentialClusterSize). */
  uint32_t cluster[3];
  /** 1: a cooperative launch (every block resident at once, so a grid-wide barrier is safe); the
   * grid must not exceed blocks per SM (t4a_function_occupancy) x the SM count. */
  int cooperative;
  /** 1: programmatic dependent launch: the kernel may start before the previous kernel of the
   * stream completed (it waits with griddepcontrol.wait / cudaGridDependencySynchronize); sm_90. */
  int programmatic;
} t4a_launch_attrs;
/** No attributes. */
#define T4A_LAUNCH_ATTRS_INIT {{0, 0, 0}, 0, 0}

/** As t4a_launch, with launch attributes (NULL or all zero: exactly t4a_launch). Attributes are
 * checked after the arguments, before anything is enqueued; the launch is one cuLaunchKernelEx
 * (never a one-node graph, whatever the module cache's strategy). Statuses: those of t4a_launch;
 * INVALID_LAUNCH (a cooperative grid above what the device holds at once, naming the limit; a
 * cluster dimension of 0 or not dividing the grid; a cluster above 8 blocks without the
 * non-portable attribute, above 16, or above the kernel's co-schedulable size), UNSUPPORTED
 * (cooperative and cluster together; no cuLaunchKernelEx, T4A_DRIVER_CAP_LAUNCH_EX; no occupancy
 * entry for a cooperative launch or no cuOccupancyMaxPotentialClusterSize for a cluster; a device
 * without cooperative launches, clusters or, for programmatic launches, sm_90), driver failures
 * (also cuOccupancyMaxActiveBlocksPerMultiprocessor, cuFuncGetAttribute,
 * cuOccupancyMaxPotentialClusterSize, cuLaunchKernelEx). */
T4A_MUST_USE t4a_status t4a_launch_ex(t4a_retire *retire, t4a_function *function,
                                      const t4a_launch_config *config,
                                      const t4a_launch_attrs *attrs, const t4a_arg *args,
                                      uint32_t num_args);
/** As t4a_launch_raw, with launch attributes checked as t4a_launch_ex does. */
T4A_MUST_USE t4a_status t4a_launch_raw_ex(t4a_retire *retire, t4a_function *function,
                                          const t4a_launch_config *config,
                                          const t4a_launch_attrs *attrs, const void *params,
                                          size_t bytes, const uint32_t *offsets,
                                          uint32_t num_params);

/* ---- descriptors ---- */

/** A table of launch descriptors on one retirement state. Opaque. */
typedef struct t4a_launch_table t4a_launch_table;

/** Measures plain and graph fires of `empty_kernel` (a function of the retire's lane taking no
 * parameters) on `retire`'s stream: `fires` fires per strategy (0: 2048; at least 64), in
 * alternating blocks after a warm-up, plus 8 graph builds, then waits for the lane (a host wait).
 * Chooses a strategy as documented above. Statuses: INVALID_ARGUMENT (NULL, a kernel with
 * parameters), FOREIGN_HANDLE, REENTRY, LANE_BROKEN, CONTEXT_LOST, HOST_OUT_OF_MEMORY, driver
 * failures. */
T4A_MUST_USE t4a_status t4a_launch_calibrate(t4a_retire *retire, t4a_function *empty_kernel,
                                             uint32_t fires, t4a_launch_calibration *out);

/** How many (driver, device) pairs the process's calibration table remembers. */
#define T4A_LAUNCH_CALIBRATION_CACHE_SLOTS 16u

/** Calibrates launches on device `ordinal` of `driver` once per process: the first call for a
 * pair measures (t4a_launch_calibrate, 2048 fires, with an empty PTX kernel JIT-compiled by the
 * driver, on a lane, retirement state and module cache of its own, released before it returns:
 * no other lane's counters see it) and remembers the figures; later calls for the pair return
 * them without a launch. Pairs are told apart by the driver's address. Two callers for one pair
 * measure once (the table's lock is held across the measurement). When the table holds
 * T4A_LAUNCH_CALIBRATION_CACHE_SLOTS pairs, a new pair is measured at every call and not stored
 * (counted in t4a_launch_calibration_cache_stats, `not_stored`); no pair is ever forgotten.
 * A failed measurement is not stored. Statuses: INVALID_ARGUMENT (NULL driver or out), those of
 * t4a_lane_create, t4a_module_load and t4a_launch_calibrate (UNSUPPORTED when no graph can be
 * built). On failure *out is zero. Thread-safe. */
T4A_MUST_USE t4a_status t4a_launch_calibrate_device(t4a_driver *driver, int ordinal,
                                                    t4a_launch_calibration *out);

/** A snapshot of the process's calibration table (t4a_launch_calibrate_device). */
struct t4a_launch_calibration_cache_stats {
  uint32_t entries;    /**< pairs remembered now */
  uint32_t capacity;   /**< T4A_LAUNCH_CALIBRATION_CACHE_SLOTS */
  uint64_t measured;   /**< measurements that succeeded */
  uint64_t reused;     /**< calls answered from the table */
  uint64_t not_stored; /**< measurements not remembered because the table was full */
};
/** Copies the table's figures into *out (nothing for NULL). Thread-safe. */
void t4a_launch_calibration_cache_stats(struct t4a_launch_calibration_cache_stats *out);

/** Options of t4a_launch_table_create; zero means the default. */
typedef struct t4a_launch_table_options {
  uint32_t capacity;        /**< descriptors, 1..65536; 0: 256 */
  t4a_launch_policy launch; /**< how the table's descriptors fire */
} t4a_launch_table_options;
/** Every option at its default (zero). */
#define T4A_LAUNCH_TABLE_OPTIONS_INIT {0, T4A_LAUNCH_POLICY_INIT}

/** A table of at most `options->capacity` descriptors for launches on `retire` (borrowed), fired
 * as the options say. options may be NULL (every default: 256 descriptors, PLAIN). Ids name a
 * slot (low 16 bits) and the slot's generation (high 16 bits, never 0): a slot is reused after
 * unregister, and a stale id is refused until the slot was reused 65,535 times. Statuses:
 * INVALID_ARGUMENT (NULL retire or out, a capacity above 65536, an unknown strategy value),
 * HOST_OUT_OF_MEMORY, INTERNAL. */
T4A_MUST_USE t4a_status t4a_launch_table_create(t4a_retire *retire,
                                                const t4a_launch_table_options *options,
                                                t4a_launch_table **out);

/** A snapshot of a descriptor table (t4a_launch_table_stats). */
struct t4a_launch_table_stats {
  t4a_launch_strategy strategy; /**< as resolved at create: PLAIN or GRAPH */
  uint32_t graph_after;         /**< the fire that builds a descriptor's graph */
  uint32_t descriptors;         /**< registered now */
  uint32_t graphs;              /**< descriptors holding an executable graph now */
  uint64_t plain_fires;         /**< fires submitted with cuLaunchKernel */
  uint64_t graph_fires;         /**< fires submitted with cuGraphLaunch of their graph */
  uint64_t graph_builds;        /**< graphs built */
  uint64_t graph_updates;       /**< node updates after rebinds */
  uint64_t graph_fallbacks;     /**< builds or updates the driver refused (plain since) */
};
/** A snapshot (all zero for NULL). */
void t4a_launch_table_stats(t4a_launch_table *table, struct t4a_launch_table_stats *out);
/** Releases every descriptor (their functions and buffers) and the table. Accepts NULL. */
void t4a_launch_table_destroy(t4a_launch_table *table);

/** Checks (as t4a_launch) and stores a launch: the function and buffers are retained, scalars
 * copied (the descriptor's one allocation). Statuses: as t4a_launch's checks, LIMIT_EXCEEDED
 * (table full), HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_descriptor_register(t4a_launch_table *table, t4a_function *function,
                                                const t4a_launch_config *config,
                                                const t4a_arg *args, uint32_t num_args,
                                                uint32_t *out_id);
/** As t4a_descriptor_register, with launch attributes checked once here as t4a_launch_ex does
 * (the statuses of both). Its fires are cuLaunchKernelEx with the attributes (no heap allocation
 * per fire; never through a GRAPH table's one-node graph); a chain records them as kernel nodes
 * with the attributes. */
T4A_MUST_USE t4a_status t4a_descriptor_register_ex(t4a_launch_table *table,
                                                   t4a_function *function,
                                                   const t4a_launch_config *config,
                                                   const t4a_launch_attrs *attrs,
                                                   const t4a_arg *args, uint32_t num_args,
                                                   uint32_t *out_id);
/** Launches descriptor `id` (no checks beyond the id; no heap allocation), as t4a_launch does
 * after its checks. Statuses: INVALID_ARGUMENT (unknown or stale id), REENTRY, LANE_BROKEN,
 * CONTEXT_LOST, driver failures. */
T4A_MUST_USE t4a_status t4a_descriptor_fire(t4a_launch_table *table, uint32_t id);
/** As t4a_descriptor_fire, on another stream of the table's domain (a retire on a lane made by
 * t4a_lane_create_sibling; NULL or the table's own retire: t4a_descriptor_fire). The bound
 * buffers are ordered across the streams as for any launch (design §4). Statuses: as
 * t4a_descriptor_fire, FOREIGN_HANDLE (a retire of another domain), INVALID_ARGUMENT (a
 * retire created before the table's, which the lock order forbids: nothing enqueued), BUSY (a
 * chain is being recorded on the table). */
T4A_MUST_USE t4a_status t4a_descriptor_fire_on(t4a_launch_table *table, t4a_retire *retire,
                                               uint32_t id);
/** Replaces argument `index` (checked against that parameter: INVALID_ARGUMENT, FOREIGN_HANDLE,
 * ARGUMENT_MISMATCH; a refused rebind changes nothing). Launch chains that name the descriptor
 * see it at their next replay (t4a/chain.h); the buffer it replaces is then handed to the lane's
 * open epoch, since queued replays may read it. */
T4A_MUST_USE t4a_status t4a_descriptor_rebind(t4a_launch_table *table, uint32_t id,
                                              uint32_t index, const t4a_arg *arg);
/** Replaces every argument and fires, in one call. Every argument is checked before any is
 * replaced: a refusal changes nothing and fires nothing. If only the fire fails, the new
 * arguments stay bound. */
T4A_MUST_USE t4a_status t4a_descriptor_rebind_fire(t4a_launch_table *table, uint32_t id,
                                                   const t4a_arg *args, uint32_t num_args);
/** Frees descriptor `id` (its references go with the epoch of its last launch). Statuses:
 * INVALID_ARGUMENT (unknown or stale id), BUSY (a live launch chain, or a recording in progress,
 * names it: t4a/chain.h), REENTRY. */
T4A_MUST_USE t4a_status t4a_descriptor_unregister(t4a_launch_table *table, uint32_t id);

/* ---- L2 persistence ---- */

/** Sets the persisting-L2 limit of the lane's context to `bytes`, clamped to the device maximum
 * (CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE); *out_applied (optional) gets the value the
 * driver applied, read back with cuCtxGetLimit (the driver rounds the value).
 * Statuses: INVALID_ARGUMENT, LANE_BROKEN, UNSUPPORTED (the device has no persisting L2), driver
 * failures (cuCtxSetLimit, cuCtxGetLimit). */
T4A_MUST_USE t4a_status t4a_l2_set_persisting_limit(t4a_lane *lane, size_t bytes,
                                                    size_t *out_applied);
/** Sets an access-policy window on the lane's stream: [base, base + bytes) with `hit_ratio`
 * (0..1) of its lines persisting, the rest streaming; `bytes` is clamped to the device's largest
 * window (CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE). bytes 0 clears the window.
 * Statuses: INVALID_ARGUMENT (hit_ratio outside [0, 1] or NaN, base 0 with bytes > 0),
 * LANE_BROKEN, UNSUPPORTED (no window on this device), driver failures (cuStreamSetAttribute). */
T4A_MUST_USE t4a_status t4a_l2_set_window(t4a_lane *lane, t4a_devptr base, size_t bytes,
                                          float hit_ratio);
/** Resets all persisting L2 lines of the lane's context to normal
 * (cuCtxResetPersistingL2Cache). */
T4A_MUST_USE t4a_status t4a_l2_reset(t4a_lane *lane);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_LAUNCH_H_ */
