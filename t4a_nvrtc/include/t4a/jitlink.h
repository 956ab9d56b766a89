/** @file
 * t4a/jitlink.h — nvJitLink loaded at run time: LTO-IR artifacts linked into a CUBIN, and a
 * two-level (memory, disk) link cache.
 *
 * Layer: t4a_nvrtc, standalone (as t4a/nvrtc.h). No CUDA or nvJitLink type appears here.
 *
 * Objects:
 *   t4a_jitlink_lib      a loaded nvJitLink (its table, version, build identity and counters).
 *                        Refcounted.
 *   t4a_jitlink_request  caller-owned plain data: the LTO-IR artifacts to link (a device
 *                        library compiled once and the kernels that call it), nvJitLink
 *                        options and the target. Borrowed for the duration of a call only.
 *   t4a_jitlink_cache    a link cache over one lib: a bounded LRU in memory and, optionally, a
 *                        directory on disk (it may be the artifact cache's: the entries share
 *                        its format and its bound). A link is identified by an XXH3-128 key
 *                        over its identity record (every input's kind, key, content hash and
 *                        size, the options, the target, nvJitLink's version and build identity).
 * The result of a link is a t4a_nvrtc_artifact of kind CUBIN (t4a/nvrtc.h): its key is the
 * link's, its compiler version and build identity are nvJitLink's, its lowered names are the
 * inputs' (first occurrence of each expression), its log nvJitLink's info log. It loads through
 * the module cache like any CUBIN artifact (t4a_module_load_artifact).
 *
 * Thread-safety: libs and caches may be used from any thread; t4a_jitlink_cache_destroy must not
 * overlap another call on that cache. Concurrent cached links of one request link once; the
 * others wait for it (origin JOINED). Ownership and errors as t4a/nvrtc.h: a failed link's full
 * error log is delivered in the t4a_nvrtc_outcome. */
#ifndef T4A_JITLINK_H_
#define T4A_JITLINK_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A loaded nvJitLink. Refcounted, opaque. */
typedef struct t4a_jitlink_lib t4a_jitlink_lib;

/** Options of t4a_jitlink_lib_open; zero means the default. */
typedef struct t4a_jitlink_lib_options {
  /** Library to dlopen. NULL: $T4A_LIBNVJITLINK_PATH if set, else the exact soname
   * libnvJitLink.so.13, first on the loader's path, then under $CUDA_PATH/lib64 and
   * /usr/local/cuda/lib64. */
  const char *library_path;
} t4a_jitlink_lib_options;
/** Every option at its default. */
#define T4A_JITLINK_LIB_OPTIONS_INIT \
  { NULL }

/** Loads nvJitLink, resolves its catalogue, reads its version and build identity. Returns a new
 * reference in *out. Statuses: JITLINK_NOT_FOUND (every candidate failed; the message lists
 * them), JITLINK_SYMBOL_MISSING (a required entry is missing: named), JITLINK_ERROR
 * (nvJitLinkVersion failed), HOST_OUT_OF_MEMORY, INVALID_ARGUMENT (out is NULL). */
T4A_MUST_USE t4a_status t4a_jitlink_lib_open(const t4a_jitlink_lib_options *options,
                                             t4a_jitlink_lib **out);
/** Adds a reference. Accepts NULL. */
void t4a_jitlink_lib_retain(t4a_jitlink_lib *lib);
/** Drops a reference. Linked artifacts do not hold the lib. Accepts NULL. */
void t4a_jitlink_lib_release(t4a_jitlink_lib *lib);
/** nvJitLink's version (nvJitLinkVersion). 0.0 for NULL. */
void t4a_jitlink_lib_version(const t4a_jitlink_lib *lib, int *out_major, int *out_minor);
/** The path that was opened (or the origin given to an injected table). Owned by the lib. */
const char *t4a_jitlink_lib_origin(const t4a_jitlink_lib *lib);
/** What identifies this nvJitLink build in link keys: its version and the GNU build-id of the
 * loaded libnvJitLink (else its resolved path, size and modification time). Owned by the lib. */
const char *t4a_jitlink_lib_build_identity(const t4a_jitlink_lib *lib);
/** Copies the lib's counters: jitlink_links and jitlink_link_successes over every link made with
 * it, cached or not. The other fields are 0. */
void t4a_jitlink_lib_stats(const t4a_jitlink_lib *lib, t4a_counter_values *out);

/** One link. Zero-initialise it (T4A_JITLINK_REQUEST_INIT); every pointer is borrowed.
 *
 * Validation (INVALID_ARGUMENT naming the field and index, LIMIT_EXCEEDED for the counts):
 *   - 1 to 65536 inputs, each a non-NULL artifact of kind LTO-IR (a PTX or CUBIN artifact is
 *     refused, naming the input and its kind: compile it with T4A_NVRTC_OUTPUT_LTOIR);
 *   - target NULL takes the first input's architecture as sm_NN (compute_90 -> sm_90); given, it
 *     must be a real architecture "sm_NN" with an optional "a" or "f" suffix;
 *   - options (at most 65536) may not be empty or contain a control byte, and may not set what
 *     t4a sets: the architecture (-arch), -lto, or PTX output (-ptx);
 *   - a cached link (t4a_jitlink_cache_link) accepts only options known to read and write no
 *     file and to change the output deterministically: -maxrregcount=N, -O0 to -O4, -g,
 *     -lineinfo, -ftz=, -prec-div=, -prec-sqrt=, -fma=, -kernels-used=, -variables-used=,
 *     -optimize-unused-variables, -jump-table-density=, -no-cache, -device-stack-protector,
 *     -split-compile=, -split-compile-extended=, -verbose. Everything else (-Xptxas, -time, any
 *     option t4a does not know) is refused: link uncached.
 * t4a passes -arch=\<target\> and -lto after the caller's options. */
typedef struct t4a_jitlink_request {
  const t4a_nvrtc_artifact *const *inputs; /**< LTO-IR artifacts, linked in this order */
  size_t num_inputs;                       /**< how many inputs */
  const char *const *options;              /**< nvJitLink options, in order */
  size_t num_options;                      /**< how many options */
  const char *target;                      /**< "sm_90"; NULL: the first input's */
} t4a_jitlink_request;
/** An empty request. */
#define T4A_JITLINK_REQUEST_INIT \
  { 0 }

/** Links a request with nvJitLink, no cache. On success *out is a new CUBIN artifact (origin
 * COMPILED in the outcome). The nvJitLink handle is destroyed on every path. out_outcome may be
 * NULL. Statuses: the validation statuses above; LINK_FAILED (nvJitLink could not link, e.g. an
 * undefined symbol, or produced an empty CUBIN: its error log is in the outcome); INVALID_ARGUMENT
 * also for an input or option nvJitLink rejects (log in the outcome); UNSUPPORTED (an
 * architecture this nvJitLink cannot target); HOST_OUT_OF_MEMORY; JITLINK_ERROR (another
 * nvJitLink failure: entry point and result in the detail). */
T4A_MUST_USE t4a_status t4a_jitlink_link(t4a_jitlink_lib *lib, const t4a_jitlink_request *request,
                                         t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome);

/** A link cache (see the top of this file). Opaque. */
typedef struct t4a_jitlink_cache t4a_jitlink_cache;

/** Options of t4a_jitlink_cache_create; zero means the default. */
typedef struct t4a_jitlink_cache_options {
  size_t max_entries;      /**< memory level: most linked artifacts kept; 0: 256 */
  size_t max_bytes;        /**< memory level: most bytes kept; 0: 64 MiB */
  const char *disk_dir;    /**< NULL: memory only. Created (with parents) if missing */
  uint64_t disk_max_bytes; /**< as t4a_nvrtc_cache_options.disk_max_bytes; 0: 1 GiB */
  int disk_fsync;          /**< as t4a_nvrtc_cache_options.disk_fsync */
} t4a_jitlink_cache_options;
/** Every option at its default (memory only). */
#define T4A_JITLINK_CACHE_OPTIONS_INIT \
  { 0, 0, NULL, 0, 0 }

/** Creates a link cache over `lib` (retained). options may be NULL. Statuses as
 * t4a_nvrtc_cache_create. */
T4A_MUST_USE t4a_status t4a_jitlink_cache_create(t4a_jitlink_lib *lib,
                                                 const t4a_jitlink_cache_options *options,
                                                 t4a_jitlink_cache **out);
/** Destroys the cache (artifacts handed out stay valid); leaves the directory. Accepts NULL. */
void t4a_jitlink_cache_destroy(t4a_jitlink_cache *cache);

/** Returns the linked artifact for a request: from memory, from disk, from another thread's
 * in-flight link of it, or by linking (then kept in memory and written to disk). A failed link is
 * never cached: the threads that waited for it look again (one of them links). A disk problem is counted and
 * never fails the call. out_outcome may be NULL. Statuses: as t4a_jitlink_link, plus
 * INVALID_ARGUMENT for an option that is not on the cached allowlist. */
T4A_MUST_USE t4a_status t4a_jitlink_cache_link(t4a_jitlink_cache *cache,
                                               const t4a_jitlink_request *request,
                                               t4a_nvrtc_artifact **out,
                                               t4a_nvrtc_outcome *out_outcome);

/** A snapshot of a link cache (t4a_jitlink_cache_stats). */
struct t4a_jitlink_cache_stats {
  /** The cache's counters: jitlink_links and jitlink_link_successes made for it,
   * jitlink_mem_hits, jitlink_mem_misses, jitlink_mem_joins, jitlink_mem_evictions, and its disk
   * level's
   * nvrtc_disk_hits, _misses, _writes, _corrupt, _errors and _evictions. Others are 0. */
  t4a_counter_values counters;
  size_t memory_entries; /**< linked artifacts the memory level holds now */
  size_t memory_bytes;   /**< their bytes */
};
/** Copies the cache's figures (all zero for NULL; nothing for a NULL out). */
void t4a_jitlink_cache_stats(const t4a_jitlink_cache *cache, struct t4a_jitlink_cache_stats *out);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_JITLINK_H_ */
