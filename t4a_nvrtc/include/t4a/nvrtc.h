/** @file
 * t4a/nvrtc.h — NVRTC loaded at run time, compile requests, context-free artifacts and a
 * two-level (memory, disk) artifact cache.
 *
 * Layer: t4a_nvrtc, standalone. It depends only on the status vocabulary (t4a_ctx:status),
 * xxHash, libdl and pthreads, never on the driver loader: a program can take //t4a_nvrtc (or the
 * CMake target t4a_nvrtc) alone. This header compiles without the CUDA toolkit; no CUDA or NVRTC
 * type appears in it.
 *
 * Objects:
 *   t4a_nvrtc_lib       a loaded NVRTC (the table of entry points, its version, capabilities,
 *                       supported architectures, build identity and counters). Refcounted.
 *   t4a_nvrtc_request   caller-owned plain data describing one compilation: program name,
 *                       source, named headers, options, target architecture, output kind and
 *                       name expressions. Borrowed for the duration of a call only.
 *   t4a_nvrtc_artifact  the result of a compilation: the bytes (PTX, CUBIN or LTO-IR), the kind,
 *                       the target, the compiler version and build identity, the lowered names of
 *                       the name expressions and the compile log. Immutable, refcounted, bound to
 *                       no CUDA context: any runtime may load it on any device it suits.
 *   t4a_nvrtc_cache     an artifact cache over one lib: a bounded LRU in memory and, optionally,
 *                       a bounded directory on disk that several processes may share. Requests
 *                       are identified by an XXH3-128 key over every input that can change the
 *                       output; a lookup compares the full stored identity, not the hash alone.
 *   t4a_nvrtc_outcome   caller storage that says where an artifact came from and, when a
 *                       compilation failed, holds NVRTC's full log.
 *
 * Thread-safety: libs, artifacts and caches may be used and released from any thread. Concurrent
 * t4a_nvrtc_cache_compile calls for the same request compile once; the others wait for it.
 * t4a_nvrtc_cache_destroy must not overlap any other call on that cache. Several processes may
 * share one cache directory. Counters are atomic.
 * Ownership: open/create/retain return a reference the caller releases; release/destroy accept
 * NULL, never abort and never change the caller's error detail. Outputs come last (the project's
 * convention); on failure every output is NULL/0. Requests are borrowed, never retained.
 * Errors: every fallible function returns a t4a_status; the detail (entry point, NVRTC result
 * name and number, message) is in t4a_error_last() on the failing thread. The per-thread message
 * is short; a failed compilation's full log is delivered in the t4a_nvrtc_outcome. */
#ifndef T4A_NVRTC_H_
#define T4A_NVRTC_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"
#include "t4a/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The library ------------------------------------------------------------------------- */

/** A loaded NVRTC (see the top of this file). Refcounted, opaque. */
typedef struct t4a_nvrtc_lib t4a_nvrtc_lib;

/** Capabilities: optional NVRTC entry points that resolved. */
#define T4A_NVRTC_CAP_CUBIN (1u << 0)           /**< nvrtcGetCUBIN: CUBIN output */
#define T4A_NVRTC_CAP_LTOIR (1u << 1)           /**< nvrtcGetLTOIR: LTO-IR output */
#define T4A_NVRTC_CAP_PCH (1u << 2)             /**< precompiled-header heap controls */
#define T4A_NVRTC_CAP_SUPPORTED_ARCHS (1u << 3) /**< nvrtcGetSupportedArchs: targets are checked */

/** Options of t4a_nvrtc_lib_open; zero means the default. */
typedef struct t4a_nvrtc_lib_options {
  /** Library to dlopen. NULL: $T4A_LIBNVRTC_PATH if set, else the exact sonames libnvrtc.so.13,
   * then libnvrtc.so.12, each first on the loader's path and then under $CUDA_PATH/lib64 and
   * /usr/local/cuda/lib64. Never the .alt variant unless named here. */
  const char *library_path;
} t4a_nvrtc_lib_options;
/** Every option at its default. */
#define T4A_NVRTC_LIB_OPTIONS_INIT \
  { NULL }

/** Loads NVRTC, resolves its catalogue, reads its version, its supported architectures and its
 * build identity (see t4a_nvrtc_lib_build_identity). Returns a new reference in *out.
 * Statuses: NVRTC_NOT_FOUND (every candidate failed; the message lists them),
 * NVRTC_SYMBOL_MISSING (a required entry is missing: named), NVRTC_ERROR (nvrtcVersion failed),
 * HOST_OUT_OF_MEMORY, INVALID_ARGUMENT (out is NULL). A partial load is torn down. When the
 * optional architecture query fails, the lib opens without T4A_NVRTC_CAP_SUPPORTED_ARCHS. */
T4A_MUST_USE t4a_status t4a_nvrtc_lib_open(const t4a_nvrtc_lib_options *options,
                                           t4a_nvrtc_lib **out);
/** Adds a reference. Accepts NULL. */
void t4a_nvrtc_lib_retain(t4a_nvrtc_lib *lib);
/** Drops a reference; the last unloads the library. Artifacts do not hold the lib. Accepts NULL. */
void t4a_nvrtc_lib_release(t4a_nvrtc_lib *lib);

/** NVRTC's version (nvrtcVersion). 0.0 for NULL. */
void t4a_nvrtc_lib_version(const t4a_nvrtc_lib *lib, int *out_major, int *out_minor);
/** T4A_NVRTC_CAP_* bits. */
uint32_t t4a_nvrtc_lib_caps(const t4a_nvrtc_lib *lib);
/** The path that was opened (or the origin given to an injected table). Owned by the lib. */
const char *t4a_nvrtc_lib_origin(const t4a_nvrtc_lib *lib);
/** What identifies this exact NVRTC build in cache keys: the GNU build-id of the loaded libnvrtc
 * and of the libnvrtc-builtins it will use (or, for a library without a build-id, its resolved
 * path, size and modification time). Printable, owned by the lib. */
const char *t4a_nvrtc_lib_build_identity(const t4a_nvrtc_lib *lib);
/** The SM architectures this NVRTC can target (e.g. 75, 80, 90). Writes at most `capacity`
 * values into out and their total number into *out_num. UNSUPPORTED without
 * T4A_NVRTC_CAP_SUPPORTED_ARCHS; INVALID_ARGUMENT for NULL arguments. */
T4A_MUST_USE t4a_status t4a_nvrtc_lib_supported_archs(const t4a_nvrtc_lib *lib, int *out,
                                                      size_t capacity, size_t *out_num);
/** Copies the lib's counters: nvrtc_compile_attempts, nvrtc_compile_successes and
 * nvrtc_empty_outputs over every compilation made with it, cached or not. The other fields are
 * 0. */
void t4a_nvrtc_lib_stats(const t4a_nvrtc_lib *lib, t4a_counter_values *out);

/* ---- Requests ---------------------------------------------------------------------------- */

/** What NVRTC should produce. Zero is PTX. */
typedef enum t4a_nvrtc_output {
  T4A_NVRTC_OUTPUT_PTX = 0, /**< PTX text; needs nothing optional */
  T4A_NVRTC_OUTPUT_CUBIN =
      1, /**< an ELF CUBIN for a real architecture (sm_XX); T4A_NVRTC_CAP_CUBIN */
  T4A_NVRTC_OUTPUT_LTOIR = 2, /**< LTO-IR for nvJitLink (t4a adds -dlto); T4A_NVRTC_CAP_LTOIR */
} t4a_nvrtc_output;

/** Returns "ptx", "cubin", "lto-ir", or "unknown". Static string. */
const char *t4a_nvrtc_output_name(t4a_nvrtc_output output);

/** One named header: what `\#include "name"` in the source (or another header) resolves to.
 * Text fields with a byte count of 0 are NUL-terminated strings; with a count, they may contain
 * no NUL byte within it (an embedded NUL is rejected, since NVRTC would silently cut the text
 * there). */
typedef struct t4a_nvrtc_header {
  const char *name;     /**< non-empty; no NUL, newline or other control character */
  const char *content;  /**< the header's text */
  size_t name_bytes;    /**< 0: strlen(name) */
  size_t content_bytes; /**< 0: strlen(content) */
} t4a_nvrtc_header;

/** One compilation. Zero-initialise it (T4A_NVRTC_REQUEST_INIT) and fill what you need; zero means
 * the default. Every pointer is borrowed for the duration of the call.
 *
 * Validation (every failure is INVALID_ARGUMENT with a message naming the field and index, or
 * LIMIT_EXCEEDED for the counts, or UNSUPPORTED for what this NVRTC lacks):
 *   - source is required and may contain no NUL byte;
 *   - program_name, header names, options and name expressions may contain no NUL, newline,
 *     carriage return or other control character (bytes below 0x20, and 0x7f), and none may be
 *     empty; header names must be distinct, and so must name expressions (checked before NVRTC
 *     runs);
 *   - target is required: "sm_NN", "compute_NN", optionally with an "a" or "f" suffix
 *     ("sm_90a"), and NN must be an architecture the lib supports when it can list them
 *     (UNSUPPORTED otherwise, with the supported list in the message);
 *   - the options may not set what target and output say: the architecture (-arch,
 *     --gpu-architecture), LTO (-dlto, --dlink-time-opt), OptiX IR (-optix-ir, --optix-ir) or
 *     a syntax-only compile (-fdevice-syntax-only, whose artifact would hold no code), in either
 *     dash spelling;
 *   - output must be a known kind (INVALID_ARGUMENT) that the lib can produce (UNSUPPORTED);
 *   - at most 65536 headers, options and name expressions each (LIMIT_EXCEEDED).
 * A cached compilation (t4a_nvrtc_cache_compile) accepts only what its key can see
 * (INVALID_ARGUMENT, naming the option or the include, otherwise):
 *   - options: only those known to read and write no file, spelled as NVRTC 13.0 documents them
 *     (--long or -short; a value after '=' or, for options that take one, in the next element):
 *       -dc -dw -rdc -ewp -G -lineinfo -dopt -Ofc -Xptxas -maxrregcount -ftz -prec-sqrt
 *       -prec-div -fmad -use_fast_math -extra-device-vectorization -modify-stack-limit
 *       -gen-opt-lto -jtd -device-stack-protector -no-cache -frandom-seed -D -U
 *       -no-source-include -std -builtin-move-forward -builtin-initializer-list -w -restrict
 *       -default-device -device-int128 -device-float128 -opt-info -err-no -no-err-no
 *       -diag-error -diag-suppress -diag-warn -brief-diag -split-compile -minimal
 *     and their long forms. Everything else is refused: include paths (-I), pre-includes
 *     (-include), precompiled headers (every pch option), --time and --fdevice-time-trace (they
 *     write files a hit would not write), response files (\@file), and any option t4a does not
 *     know. The value given to ptxas (-Xptxas, --ptxas-options) must be one ptxas option known
 *     to read no file: --options-file / -optf (ptxas reads the file) and --output-file / -o are
 *     refused, and so is anything not on ptxas's own list;
 *   - includes: every \#include, \#include_next, \#import and \#embed, and every __has_include,
 *     __has_include_next and __has_embed, in the source, in every header and in every -D
 *     definition, must name one of the request's headers by a literal ("name.h" or <name.h>,
 *     compared byte for byte with the header names). An absolute path (NVRTC opens it), a macro
 *     operand or a name that is no header of the request is refused, naming the text, the line
 *     and the include. NVRTC 13 given no -I resolves no system header, so every header a cached
 *     compile uses is a named header. The check is lexical: an include in a group that \#if skips
 *     counts too (supply a named header for it, even an empty one), and a request that pastes
 *     tokens with ## may not also spell a piece of __has_include such as `__has_`.
 *     With include roots, an include may also name a file under the roots by a literal relative
 *     name (<x.h> or "x.h"; in a named header only <x.h> or a request header, since NVRTC
 *     looks for a named header's "x.h" in the working directory first). Every file it can reach
 *     is checked the same way, with computed includes there resolved over every definition seen;
 *     refused (naming the file, line and include): an absolute path, ".." out of a
 *     directory reached through a symbolic link (where the kernel and a lexical reading
 *     of the path would open different files), a computed include that cannot be
 *     followed (a function-like macro, more than 64 expansions, an absolute expansion), pieces
 *     that ## there could join into __has_include. A missing root or a file as root, and on a
 *     path the includes probe a symbolic link loop, a dangling link or a special file, are
 *     refused (INVALID_ARGUMENT); an unreadable file is IO.
 * The options are checked when a request is not in memory, the includes only before NVRTC would
 * run (a lexical pass over the whole request, which a disk hit does not pay): an entry of either
 * cache level is a request that passed both. Supply headers as named headers, or compile without
 * the cache.
 *
 * t4a adds its own options after the caller's: --include-path=\<root\> for each include root,
 * --gpu-architecture=\<target\>, --no-source-include (so the directory of the program name is
 * never searched: a request's output depends only on what it names) and -dlto for LTO-IR. With
 * include roots, headers there need their own directory searched, so --no-source-include is left
 * out and NVRTC is given the program name "/dev/null/\<name\>" (a directory that cannot exist;
 * diagnostics and __FILE__ show it). */
typedef struct t4a_nvrtc_request {
  const char *program_name; /**< NULL: "t4a_program.cu". Appears in diagnostics and debug info */
  const char *source;       /**< CUDA C++ source */
  size_t source_bytes;      /**< 0: strlen(source) */
  const t4a_nvrtc_header *headers; /**< named headers, num_headers of them */
  size_t num_headers; /**< how many headers */
  const char *const *options; /**< NVRTC options, in order */
  const size_t *option_bytes; /**< NULL, or the byte count of each option (0: NUL-terminated) */
  size_t num_options; /**< how many options */
  const char *target;                  /**< "sm_90", "compute_90", "sm_90a", ... */
  t4a_nvrtc_output output;             /**< PTX, CUBIN or LTO-IR */
  const char *const *name_expressions; /**< e.g. "k<int>": their lowered names come back */
  size_t num_name_expressions; /**< how many name expressions */
  /** Include roots, searched in order (t4a passes --include-path=ROOT for each, after the
   * caller's options). A cached compile keys the request by the roots' spellings, in order, and
   * by what its includes reach through them: every file (its content) and every path searched
   * before it that held nothing. At most T4A_NVRTC_MAX_INCLUDE_ROOTS. */
  const char *const *include_roots;
  size_t num_include_roots; /**< how many include roots */
} t4a_nvrtc_request;
/** The most include roots one request may name (LIMIT_EXCEEDED above). */
#define T4A_NVRTC_MAX_INCLUDE_ROOTS 64u

/** An empty request (every field zero). */
#define T4A_NVRTC_REQUEST_INIT \
  { 0 }

/* ---- Include roots ----------------------------------------------------------------------- */

/** What a request's includes reach through one include root (t4a_nvrtc_includes_resolve). */
typedef struct t4a_nvrtc_root_reach {
  uint64_t files; /**< files reached (read and hashed), attributed to the root they lie under */
  uint64_t bytes; /**< their total size */
  uint64_t empty; /**< paths searched that opened nothing (a folder that does not exist counts once) */
} t4a_nvrtc_root_reach;

/** Resolves a request's includes through its include roots as a cached compile's miss does,
 * without compiling: the paths NVRTC would open are probed in its search order (no tree is
 * walked) and what they hold is what a cached compile's include manifest records.
 * per_root (may be NULL) receives num_include_roots entries, total (may be NULL) their sum.
 * Statuses: the request's validation statuses and those of a cached compile's checks
 * (INVALID_ARGUMENT naming the root or the include; IO naming the path; LIMIT_EXCEEDED;
 * HOST_OUT_OF_MEMORY). */
T4A_MUST_USE t4a_status t4a_nvrtc_includes_resolve(const t4a_nvrtc_lib *lib,
                                                   const t4a_nvrtc_request *request,
                                                   t4a_nvrtc_root_reach *per_root,
                                                   t4a_nvrtc_root_reach *total);

/** The CUDA toolkit's include roots (t4a_nvrtc_toolkit_find). */
typedef struct t4a_nvrtc_toolkit {
  const char *roots[2];    /**< include, then include/cccl when present; point into this */
  size_t num_roots;        /**< 1 or 2 */
  char include[4096];      /**< the toolkit's folder + "/include" */
  char cccl[4096];         /**< the toolkit's folder + "/include/cccl", or empty */
  char from[32];           /**< "T4A_CUDA_PATH", "CUDA_PATH", "default", "beside libnvrtc" */
  char looked[1024];       /**< every folder tried, in order */
} t4a_nvrtc_toolkit;

/** Finds the CUDA toolkit's headers: $T4A_CUDA_PATH, $CUDA_PATH, /usr/local/cuda, then the
 * folder above the one holding `libnvrtc_path` (may be NULL; t4a_nvrtc_lib_origin), the first
 * whose include/cuda_runtime.h exists. Statuses: UNSUPPORTED (none found: the message lists
 * where it looked, as does out->looked), INVALID_ARGUMENT (out is NULL). */
T4A_MUST_USE t4a_status t4a_nvrtc_toolkit_find(const char *libnvrtc_path, t4a_nvrtc_toolkit *out);

/* ---- Outcomes ---------------------------------------------------------------------------- */

/** Where an artifact came from. */
typedef enum t4a_nvrtc_origin {
  T4A_NVRTC_ORIGIN_NONE = 0,     /**< no artifact: the call failed */
  T4A_NVRTC_ORIGIN_COMPILED = 1, /**< this call ran NVRTC */
  T4A_NVRTC_ORIGIN_MEMORY = 2,   /**< the cache's memory level */
  T4A_NVRTC_ORIGIN_DISK = 3,     /**< the cache's directory */
  T4A_NVRTC_ORIGIN_JOINED = 4,   /**< another thread's in-flight lookup or compile of the request */
  /** This call ran NVRTC for a request whose includes the key cannot see (the cache's
   * compile_uncacheable option): cached at neither level; the outcome's `uncached_why` says why. */
  T4A_NVRTC_ORIGIN_UNCACHED = 5,
} t4a_nvrtc_origin;

/** Returns "none", "compiled", "memory", "disk", "joined", "uncached" or "unknown". Static
 * string. */
const char *t4a_nvrtc_origin_name(t4a_nvrtc_origin origin);

/** Caller storage for what a compile call reports besides its status. Initialise it with
 * T4A_NVRTC_OUTCOME_INIT; each compile call first frees what it held, then fills it; release it
 * with t4a_nvrtc_outcome_deinit. */
typedef struct t4a_nvrtc_outcome {
  t4a_nvrtc_origin origin; /**< where the artifact came from; NONE when the call failed */
  /** When nvrtcCompileProgram failed (COMPILE_FAILED; INVALID_ARGUMENT for an option NVRTC
   * rejected; any other status it mapped to) or produced an empty output (COMPILE_FAILED): NVRTC's
   * full log, NUL-terminated (for an empty output, followed by a line from t4a saying so). NULL
   * otherwise, and NULL if the log itself could not be retrieved or copied. A successful
   * compilation's log (warnings) is in the artifact instead. */
  char *log;
  size_t log_bytes; /**< strlen(log) */
  /** Origin UNCACHED: the include check's refusal, NUL-terminated (what the key cannot see, as
   * the cache's INVALID_ARGUMENT would have said it). NULL otherwise, and NULL if it could not be
   * copied. */
  char *uncached_why;
} t4a_nvrtc_outcome;
/** An empty outcome: no origin, no log. */
#define T4A_NVRTC_OUTCOME_INIT \
  { T4A_NVRTC_ORIGIN_NONE, NULL, 0, NULL }

/** Frees the log and the reason and resets *outcome to T4A_NVRTC_OUTCOME_INIT. Accepts NULL. */
void t4a_nvrtc_outcome_deinit(t4a_nvrtc_outcome *outcome);

/* ---- Artifacts --------------------------------------------------------------------------- */

/** A compiled artifact (see the top of this file). Immutable, refcounted, opaque. */
typedef struct t4a_nvrtc_artifact t4a_nvrtc_artifact;

/** Compiles one request with NVRTC, with no cache. On success *out is a new artifact (origin
 * COMPILED). nvrtcDestroyProgram runs on every path.
 * out_outcome may be NULL (the log of a failure is then dropped).
 * Statuses: the validation statuses of t4a_nvrtc_request (file-reading options are allowed
 * here); COMPILE_FAILED (the source did not compile, or NVRTC produced an empty PTX, CUBIN or
 * LTO-IR — for instance a CUBIN for a virtual architecture such as compute_90; the log is in
 * the outcome); INVALID_ARGUMENT (NVRTC rejected an option or a name expression; log in the
 * outcome); HOST_OUT_OF_MEMORY (ours or NVRTC's); IO (NVRTC could not write a --time file);
 * NVRTC_ERROR (another NVRTC failure: entry point and result in the detail). */
T4A_MUST_USE t4a_status t4a_nvrtc_compile(t4a_nvrtc_lib *lib, const t4a_nvrtc_request *request,
                                          t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome);

/** Adds a reference. Accepts NULL. */
void t4a_nvrtc_artifact_retain(t4a_nvrtc_artifact *artifact);
/** Drops a reference; the last frees the artifact. Accepts NULL. */
void t4a_nvrtc_artifact_release(t4a_nvrtc_artifact *artifact);

/** The compiled bytes and their count. For PTX the count includes the terminating NUL (as
 * nvrtcGetPTXSize reports it); every kind is followed by a NUL byte beyond the count, so the data
 * can be handed to cuModuleLoadData as is. Never empty. Owned by the artifact. */
const void *t4a_nvrtc_artifact_data(const t4a_nvrtc_artifact *artifact, size_t *out_bytes);
/** The output kind (PTX, CUBIN or LTO-IR). */
t4a_nvrtc_output t4a_nvrtc_artifact_output(const t4a_nvrtc_artifact *artifact);
/** The target it was compiled for ("sm_90"). Owned by the artifact. */
const char *t4a_nvrtc_artifact_target(const t4a_nvrtc_artifact *artifact);
/** The program name of the request. Owned by the artifact. */
const char *t4a_nvrtc_artifact_program_name(const t4a_nvrtc_artifact *artifact);
/** @{ */
/** The NVRTC version and build identity that produced it. */
void t4a_nvrtc_artifact_compiler_version(const t4a_nvrtc_artifact *artifact, int *out_major,
                                         int *out_minor);
const char *t4a_nvrtc_artifact_build_identity(const t4a_nvrtc_artifact *artifact);
/** @} */
/** NVRTC's log of the successful compilation (warnings), NUL-terminated, possibly empty. */
const char *t4a_nvrtc_artifact_log(const t4a_nvrtc_artifact *artifact, size_t *out_bytes);
/** @{ */
/** The request's key: XXH3-128 of its full identity, as 16 bytes (big-endian high half first)
 * and as 32 lowercase hex digits (the disk cache's file name). An artifact whose inputs no key
 * saw (from t4a_nvrtc_compile, which may read any file, or compiled UNCACHED) is keyed by that
 * identity and its own bytes, so that a header edited between two such compiles gives another
 * key wherever keys name artifacts (the module cache's, a link's). */
void t4a_nvrtc_artifact_key(const t4a_nvrtc_artifact *artifact, uint8_t out_key[16]);
const char *t4a_nvrtc_artifact_key_hex(const t4a_nvrtc_artifact *artifact);
/** @} */
/** Name expressions and their lowered (mangled) names, in request order. */
size_t t4a_nvrtc_artifact_num_lowered_names(const t4a_nvrtc_artifact *artifact);
/** Writes the i-th expression and its lowered name; INVALID_ARGUMENT if i is out of range. The
 * strings are owned by the artifact. */
T4A_MUST_USE t4a_status t4a_nvrtc_artifact_lowered_name_at(const t4a_nvrtc_artifact *artifact,
                                                           size_t i, const char **out_expression,
                                                           const char **out_lowered);
/** The lowered name of `expression` as given in the request, or NULL if it was not one. */
const char *t4a_nvrtc_artifact_lowered_name(const t4a_nvrtc_artifact *artifact,
                                            const char *expression);

/* ---- The artifact cache ------------------------------------------------------------------ */

/** An artifact cache: memory and, optionally, disk (see the top of this file). Opaque. */
typedef struct t4a_nvrtc_cache t4a_nvrtc_cache;

/** Options of t4a_nvrtc_cache_create; zero means the default. */
typedef struct t4a_nvrtc_cache_options {
  size_t max_entries;      /**< memory level: most artifacts kept; 0: 512 */
  size_t max_bytes;        /**< memory level: most bytes kept (artifacts + identities); 0: 256 MiB */
  const char *disk_dir;    /**< NULL: memory only. Created (with parents) if missing */
  uint64_t disk_max_bytes; /**< disk level: most bytes of entries kept; 0: 1 GiB. Enforced by a
                              scan that runs at this cache's first write, when its estimate
                              (the last scan's total plus its own writes since) passes the
                              bound, and every 64 writes; a scan
                              evicts the least recently used entries down to 90% of it. Other
                              processes' writes are seen at the next scan. */
  int disk_fsync;          /**< nonzero: fsync each entry before its rename and the directory
                              after it (durability across power loss; correctness never needs
                              it, since every entry is checksummed) */
  /** Zero: a request whose includes the key cannot see (the include check refuses it: a computed
   * include, a paste that could make __has_include, ...) is INVALID_ARGUMENT. Nonzero: NVRTC
   * compiles it as t4a_nvrtc_compile would and the artifact is cached at neither level (origin
   * UNCACHED, the refusal in the outcome, the counter nvrtc_uncached); each such call compiles
   * again. The options' refusals, an include that names nothing and bad include roots stay
   * INVALID_ARGUMENT either way. */
  int compile_uncacheable;
} t4a_nvrtc_cache_options;
/** Every option at its default (memory only). */
#define T4A_NVRTC_CACHE_OPTIONS_INIT \
  { 0, 0, NULL, 0, 0, 0 }

/** Creates a cache over `lib` (retained). options may be NULL (memory only, defaults). With a
 * disk level and a loaded (not injected) lib, the key's compiler identity is that of the
 * library files: version, GNU build-id and an XXH3-128 hash of the content of libnvrtc and of
 * its libnvrtc-builtins (hashes memoised in the directory, revalidated by file metadata), so that
 * caches of any process over the same build share entries; otherwise it is the lib's build
 * identity.
 * Statuses: INVALID_ARGUMENT (lib or out NULL, an unusable path), IO (the directory cannot be
 * created or is not a writable directory: path and errno in the message), HOST_OUT_OF_MEMORY
 * (also when the mutex or condition variable cannot be initialised). */
T4A_MUST_USE t4a_status t4a_nvrtc_cache_create(t4a_nvrtc_lib *lib,
                                               const t4a_nvrtc_cache_options *options,
                                               t4a_nvrtc_cache **out);
/** Creates a cache that loads NVRTC only when it must compile: at its first miss. The key's
 * compiler identity is read from the library files t4a_nvrtc_lib_open(lib_options) would load,
 * without loading them (see t4a_nvrtc_cache_create for what it holds), so a process whose
 * requests are all on disk never loads NVRTC. lib_options may be NULL. Without a disk level, or
 * when the identity can only be learnt by loading (the first process after NVRTC changed), the
 * first compile call loads NVRTC. Statuses: as t4a_nvrtc_cache_create, and NVRTC_NOT_FOUND when
 * no candidate library file exists (nothing is created). t4a_nvrtc_cache_compile on a lazy cache
 * may also return t4a_nvrtc_lib_open's statuses at a miss (NVRTC_NOT_FOUND, NVRTC_SYMBOL_MISSING,
 * ...): nothing is cached and the next miss tries to load again. */
T4A_MUST_USE t4a_status t4a_nvrtc_cache_create_lazy(const t4a_nvrtc_lib_options *lib_options,
                                                    const t4a_nvrtc_cache_options *options,
                                                    t4a_nvrtc_cache **out);
/** Destroys the cache: drops its references to artifacts (those handed out stay valid) and to the
 * lib. No call on the cache may be in progress. Leaves the directory as it is. Accepts NULL. */
void t4a_nvrtc_cache_destroy(t4a_nvrtc_cache *cache);

/** Returns the artifact for a request: from memory, from disk, from another thread's in-flight
 * compilation of the same request, or by compiling it (then kept in memory and written to disk).
 * A failed compilation is never cached: the next call compiles again. A disk problem (I/O error,
 * corrupt or foreign entry) is counted and never fails the call: a corrupt entry is recompiled
 * and replaced. out_outcome may be NULL.
 * Statuses: as t4a_nvrtc_compile, plus INVALID_ARGUMENT for options that are not on the
 * allowlist and includes that name no header of the request (see t4a_nvrtc_request), and
 * INVALID_ARGUMENT or LIMIT_EXCEEDED for the includes the key cannot see (a computed include, a
 * paste that could make __has_include, a dangling link on an include's path, ...) unless the
 * options' compile_uncacheable compiles those uncached (origin UNCACHED). Threads that joined a
 * failed compilation get its status, detail and log. */
T4A_MUST_USE t4a_status t4a_nvrtc_cache_compile(t4a_nvrtc_cache *cache,
                                                const t4a_nvrtc_request *request,
                                                t4a_nvrtc_artifact **out,
                                                t4a_nvrtc_outcome *out_outcome);

/** A snapshot of an artifact cache (t4a_nvrtc_cache_stats). */
struct t4a_nvrtc_cache_stats {
  /** The cache's counters (the nvrtc_* fields; the others are 0): NVRTC attempts and successes
   * made for this cache, memory hits, misses, joins and evictions, disk hits, misses, writes,
   * corrupt entries, I/O errors and evictions. */
  t4a_counter_values counters;
  size_t memory_entries; /**< artifacts the memory level holds now */
  size_t memory_bytes;   /**< their bytes */
  uint64_t roots_misses; /**< misses of requests with include roots */
  /** The time those misses waited on the include check beyond NVRTC's compile (all of the
   * check, where no compile ran alongside it), nanoseconds. */
  uint64_t roots_check_wait_ns;
};
/** Copies the cache's figures into *out (all zero for a NULL cache; nothing for a NULL out).
 * Takes the cache's lock for the memory level's figures. */
void t4a_nvrtc_cache_stats(const t4a_nvrtc_cache *cache, struct t4a_nvrtc_cache_stats *out);
/** The cache's disk directory as given (trailing slashes dropped), or NULL for a memory-only or
 * NULL cache. Owned by the cache. */
const char *t4a_nvrtc_cache_disk_dir(const t4a_nvrtc_cache *cache);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_NVRTC_H_ */
