/* Private declarations shared by t4a_nvrtc's sources: the validated view of a request, the
 * identity record and its key, artifact construction, the compile core and the disk level.
 * Not exported to any other target. */
#ifndef T4A_NVRTC_NVRTC_INTERNAL_H_
#define T4A_NVRTC_NVRTC_INTERNAL_H_

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation to hash */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#include "t4a/counters.h"
#include "t4a_ctx/counters_block.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_table.h"

/* Version of the identity record (what the key hashes). Bump it whenever the record's fields,
 * their framing, the options t4a adds or what a cached compile may read change: old keys then
 * never match, and old disk entries age out through eviction. 2: cached compiles read nothing
 * but the request (options allowlist, include check); schema-1 entries may hold artifacts built
 * from files the key did not see. 3: include roots (their spellings, in order, and the
 * fingerprints of their trees). 4: include roots keyed by the digest of the request's include
 * manifest (what its includes reach through them: nvrtc_manifest.c), not by whole trees. 5: the
 * manifest recorded by probing the file system (a path with ".." under both its spellings, ".."
 * out of a root keyed like any path). */
#define T4A_NVRTC_KEY_SCHEMA 5u

/* Limits on request counts (LIMIT_EXCEEDED above them). */
#define T4A_NVRTC_MAX_ITEMS 65536u

/* Most include roots of one request (the public limit). */
#define T4A_NVRTC_MAX_ROOTS T4A_NVRTC_MAX_INCLUDE_ROOTS

/* ---- Include roots (nvrtc_roots.c): probing the file system -------------------------------
 * A miss's include check resolves each include through the roots by probing the paths NVRTC
 * would open (stat, then open and read a file), in NVRTC's search order, memoised per check; no
 * tree is walked. While probing, every directory on the way to a probed path (and every file
 * read) gets an inotify watch, placed before the path is looked at; the roots' epoch advances
 * with every event, so a manifest whose paths were all watched before they were probed, with no
 * event since, is known to hold without a stat. */

#define T4A_NVRTC_PROBED_ABSENT 0 /* nothing there (ENOENT, ENOTDIR) */
#define T4A_NVRTC_PROBED_DIR 1
#define T4A_NVRTC_PROBED_FILE 2

/* One path probed (the path as spelled, which the kernel resolves as NVRTC's open would). */
typedef struct t4a_nvrtc_probed {
  char *path;
  size_t path_len;
  uint64_t key; /* XXH3-64 of the path */
  int kind;
  uint64_t dev, ino, size, mtime_ns, ctime_ns, taken_ns; /* files: as hashed */
  uint8_t hash[16];                                      /* files: XXH3-128 of the bytes */
  char *text; /* files: the bytes read (NUL-terminated copy), which were hashed */
  size_t text_bytes;
  int root;   /* the root it was first probed under (report), -1: none */
  int queued; /* the include check has queued it for scanning */
} t4a_nvrtc_probed;

/* The per-check memo of probed paths and the directories watched. */
typedef struct t4a_nvrtc_prober {
  t4a_nvrtc_probed **slots; /* open addressing by key */
  size_t cap, num;
  char **watched; /* directories watched by this check (open addressing) */
  uint64_t *watched_key;
  size_t wcap, wnum;
  uint64_t epoch; /* the roots' epoch read first (0: no inotify) */
  int watch_ok;   /* every watch needed was placed */
  /* settle (set by the caller): note the newest change time (ctime) of every file and directory
   * the check looks at, on the way to each path included; settle_lost: a path it could not
   * follow so (a relative one, a link it cannot read). */
  int settle, settle_lost;
  uint64_t newest_ns;
  uint64_t stats, files_read, bytes_read;
} t4a_nvrtc_prober;

/* Starts a check: reads the roots' epoch (draining events). */
void t4a_nvrtc_prober_init_(t4a_nvrtc_prober *pr);
/* Checks that `root` is a directory (INVALID_ARGUMENT naming it when missing, a file or a link
 * loop; IO). */
T4A_MUST_USE t4a_status t4a_nvrtc_probe_root_(t4a_nvrtc_prober *pr, const char *root);
/* Probes path[0..n) (memoised): *out is its record. A file is read whole and hashed. Refused
 * (INVALID_ARGUMENT, naming the path): a symbolic link loop, a dangling link, a FIFO or other
 * special file; IO (stat, open, read; path and errno), LIMIT_EXCEEDED (longer than PATH_MAX),
 * HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_nvrtc_probe_(t4a_nvrtc_prober *pr, const char *path, size_t n,
                                         int root, t4a_nvrtc_probed **out);
/* For watching an existing manifest's paths (t4a_nvrtc_roots_watch_manifest_): 0 when this process
 * has no inotify instance or epoch is 0. */
int t4a_nvrtc_prober_resume_(t4a_nvrtc_prober *pr, uint64_t epoch);
/* Watches the directories on the way to path[0..n) and, with file, the path itself. */
T4A_MUST_USE t4a_status t4a_nvrtc_prober_watch_(t4a_nvrtc_prober *pr, const char *path, size_t n,
                                                int file);
/* Whether, in a check with settle set, nothing it looked at (a file, a directory on the way, a
 * link) changed at or after before_ns: what was looked at then was there already. */
int t4a_nvrtc_prober_settled_(const t4a_nvrtc_prober *pr, uint64_t before_ns);
/* Ends the check: the epoch at which everything probed was watched with no event since, or 0. */
uint64_t t4a_nvrtc_prober_finish_(t4a_nvrtc_prober *pr);
void t4a_nvrtc_prober_free_(t4a_nvrtc_prober *pr);
/* The roots' epoch now (events drained): nonzero while this process has inotify; the same value
 * as long as no watched file or directory changed. roots and num are unused. */
uint64_t t4a_nvrtc_roots_epoch_(const char *const *roots, size_t num);
/* Places watches on every directory on the way to each path of a manifest blob and on each file
 * it lists, if this process already has an inotify instance (a process that only hits never
 * creates one). Returns `epoch` if every watch was placed and no event arrived since it was read,
 * else 0. */
uint64_t t4a_nvrtc_roots_watch_manifest_(const uint8_t *blob, size_t bytes, uint64_t epoch);
/* Tests: drops the inotify instance (every watch; the epoch advances). Include checks with
 * roots, and files they read, since start. */
void t4a_nvrtc_roots_forget_(void);
uint64_t t4a_nvrtc_roots_checks_(void);
uint64_t t4a_nvrtc_roots_files_hashed_(void);
/* Tests: whether the include check skips a second pass that could change nothing (no wrapper,
 * and no piece it could meet joins with those recorded; default on), and the second passes run
 * since start. */
void t4a_nvrtc_check_skip_second_pass_(int on);
uint64_t t4a_nvrtc_check_second_passes_(void);
/* Tests: whether the include check skips the groups NVRTC skips by __CUDACC_RTC__ (default on),
 * and the groups skipped since start. */
void t4a_nvrtc_check_skip_groups_(int on);
uint64_t t4a_nvrtc_check_groups_skipped_(void);
/* Tests and the benchmark: whether a first miss with roots compiles alongside its include check
 * (mode 0 no, 1 yes (the default), 2 yes with the compile ending before the check starts), and
 * how long before the compile's start what the check looked at must have last changed for the
 * compile to be taken (settle_ns; default 2 s, the coarsest change times of common file systems;
 * a negative value lets tests take a compile of files just written). */
void t4a_nvrtc_roots_overlap_(int mode, int64_t settle_ns);

/* Faults in the pages of a new buffer of 64 KiB or more in one call (madvise
 * MADV_POPULATE_WRITE), before read() or a copy fills it: a new process's buffers are fresh
 * memory, and a fault per page costs about as much as the copy. Advice only (an older kernel's
 * EINVAL changes nothing). */
void t4a_nvrtc_populate_(void *buf, size_t bytes);

/* ---- The request's macro expansions (nvrtc_expand.c) ---------------------------------------
 * A #define the include check saw: its name, its parameter list (function-like: the text from
 * the name's end to the body, "(a, b)"), its body; all in texts that outlive the check. */
typedef struct t4a_nvrtc_macro_ {
  const char *name, *params, *body;
  size_t name_len, params_len, body_len;
  int func;
} t4a_nvrtc_macro_;

typedef struct t4a_nvrtc_paste_check_ {
  const t4a_nvrtc_macro_ *defs; /* every definition of the request's texts and the roots */
  size_t num_defs;
  const char (*wrappers)[32]; /* macros that apply __has_include to a parameter */
  size_t num_wrappers;
  const char *const *pieces; /* the pieces of those names and of __has_include the definitions' */
  size_t num_pieces;         /* bodies spell (for an invocation too large to expand each way) */
  int open_body;             /* some body opens a parenthesis it does not close */
  const char *const *texts; /* the request's texts and, for messages, what each is */
  const size_t *text_bytes;
  const char *const *wheres;
  size_t num_texts;
  const char *advice; /* the refusal's last clause */
  int trigraphs, raw_strings, digit_separators;
  const char *const *options; /* the request's options, for the -D bodies' string literals */
  const size_t *option_bytes;
  size_t num_options;
} t4a_nvrtc_paste_check_;

/* Expands every macro invocation of the texts (their lines and #if / #elif expressions) over
 * every definition of each name met, and as itself: INVALID_ARGUMENT, naming the text, line and
 * macro, when a paste makes __has_include, __has_include_next, __has_embed or a wrapper's name,
 * or, for an invocation with too many expansions to run each, when its tokens and `pieces` could
 * be joined into one; HOST_OUT_OF_MEMORY; else OK. */
T4A_MUST_USE t4a_status t4a_nvrtc_check_pastes_(const t4a_nvrtc_paste_check_ *pc);
/* Tests: the runs of invocations since start (one per set of definitions tried). */
uint64_t t4a_nvrtc_expand_runs_(void);

/* ---- Include manifests (nvrtc_manifest.c) ------------------------------------------------- */

/* One path the include check probed, as NVRTC would open it: a file (file 1: its metadata when
 * hashed and the XXH3-128 of its bytes) or nothing (file 0: absent, or a directory; file 2: a
 * directory on the way that does not exist, which covers every path under it). */
typedef struct t4a_nvrtc_probe {
  char *path;
  int file;
  uint64_t dev, ino, size, mtime_ns, ctime_ns, taken_ns;
  uint8_t hash[16];
} t4a_nvrtc_probe;
typedef struct t4a_nvrtc_probes {
  t4a_nvrtc_probe *v;
  size_t num, cap;
} t4a_nvrtc_probes;
/* Records path[0..n) with what is there (file: its record, or NULL; absent_tree: the path does
 * not exist at all, file kind 2). */
T4A_MUST_USE t4a_status t4a_nvrtc_probes_add_(t4a_nvrtc_probes *m, const char *path, size_t n,
                                              const t4a_nvrtc_probed *file, int absent_tree);
void t4a_nvrtc_probes_free_(t4a_nvrtc_probes *m);
/* Sorts and deduplicates the probes and serialises them (a manifest blob, digest inside). */
T4A_MUST_USE t4a_status t4a_nvrtc_manifest_encode_(t4a_nvrtc_probes *m, uint8_t **out,
                                                   size_t *bytes);
/* 1: every probe still holds (digest set); 0: not, or not well formed. Files whose metadata
 * changed but whose bytes did not get their metadata refreshed in the blob (*refreshed 1). */
int t4a_nvrtc_manifest_validate_(uint8_t *blob, size_t bytes, uint8_t digest[16], int *refreshed);
/* Whether a manifest just recorded still holds after the compile that used it: known while the
 * roots' epoch is still `epoch` (nonzero), else validated by stat (a copy). Leaves the error
 * detail as it was. */
int t4a_nvrtc_manifest_holds_(const uint8_t *blob, size_t bytes, uint64_t epoch);
/* The number of files a blob lists. */
size_t t4a_nvrtc_manifest_files_(const uint8_t *blob, size_t bytes);
/* The disk copy under the first-level key: a blob (caller frees) or NULL (absent, corrupt). A
 * valid one's file gets its modification time refreshed (a use, for the disk level's LRU). */
uint8_t *t4a_nvrtc_manifest_load_(const char *dir, const uint8_t key[16], size_t *bytes);
/* Writes it atomically; failures are swallowed. Returns the file's size, 0 if not written (the
 * caller accounts for it in the disk level's bound: t4a_nvrtc_disk_wrote_). */
size_t t4a_nvrtc_manifest_store_(const char *dir, const uint8_t key[16], const uint8_t *blob,
                                 size_t bytes);

/* A validated request: lengths resolved, target parsed, t4a's own options spelled out. Holds
 * borrowed pointers into the request only. */
typedef struct t4a_nvrtc_prepared {
  const t4a_nvrtc_request *req;
  const char *program_name;
  size_t program_name_bytes;
  size_t source_bytes;
  char target[24];         /* "sm_90a" */
  int virtual_arch;        /* compute_NN */
  char arch_option[48];    /* "--gpu-architecture=sm_90a" */
  const char *implicit[3]; /* t4a's options, after the caller's (and the roots') */
  /* Before the program name given to NVRTC: "" or, with include roots, "/dev/null/" (see
   * t4a_nvrtc_prepare). */
  const char *name_prefix;
  size_t num_implicit;
  /* Cached compiles with roots: the prober the include check of a miss resolves includes with
   * (set by the cache; NULL otherwise: the roots are not followed). */
  t4a_nvrtc_prober *prober;
  /* Where the include check records what it probes under the roots (NULL: not recorded). */
  t4a_nvrtc_probes *probes;
  /* After a miss's check: the manifest it recorded and the epoch it is known valid at, for the
   * check after NVRTC ran (NULL: none). */
  const uint8_t *check_blob;
  size_t check_bytes;
  uint64_t check_epoch;
  /* The identity's roots part: 0 the spellings only (an uncached compile), 1 the spellings of a
   * cached compile's first-level key (which names its manifest), 2 those and manifest_digest. */
  int roots_key;
  uint8_t manifest_digest[16];
  uint8_t first_key[16]; /* roots_key 2: the first-level key (t4a_nvrtc_identity_key) */
} t4a_nvrtc_prepared;

/* The byte count of header i's name / content and of option i (resolving 0 as strlen). */
size_t t4a_nvrtc_header_name_bytes(const t4a_nvrtc_header *h);
size_t t4a_nvrtc_header_content_bytes(const t4a_nvrtc_header *h);
size_t t4a_nvrtc_option_bytes(const t4a_nvrtc_request *req, size_t i);

/* Validates a request against lib (see t4a/nvrtc.h for the rules) and fills *out. What only a
 * cached compile refuses is checked by t4a_nvrtc_check_cacheable. */
T4A_MUST_USE t4a_status t4a_nvrtc_prepare(const t4a_nvrtc_lib *lib, const t4a_nvrtc_request *req,
                                          t4a_nvrtc_prepared *out);

/* Whether the key sees everything NVRTC will read for this request (nvrtc_cacheable.c).
 * check_options: every option is on the allowlist of options known to read no file (ptxas
 * options included). check_includes: every #include, #include_next, #import, #embed,
 * __has_include, __has_include_next and __has_embed of the source, the headers and the -D
 * definitions names one of the request's headers by a literal (a lexical pass over the whole
 * request). check_cacheable: both. INVALID_ARGUMENT naming the option or the include;
 * HOST_OUT_OF_MEMORY. The verdicts depend only on bytes the identity record holds, so a request
 * found in either cache level has passed them: the cache checks the options before its lookup
 * and the includes only before compiling (a disk hit does not pay for the pass). */
T4A_MUST_USE t4a_status t4a_nvrtc_check_options(const t4a_nvrtc_prepared *p);
T4A_MUST_USE t4a_status t4a_nvrtc_check_includes(const t4a_nvrtc_prepared *p);
T4A_MUST_USE t4a_status t4a_nvrtc_check_cacheable(const t4a_nvrtc_prepared *p);
/* The entry of the include check's refusals (INVALID_ARGUMENT, LIMIT_EXCEEDED): what the key
 * cannot see, which a cache with compile_uncacheable compiles uncached. The option check's
 * refusals, an include that names nothing and bad roots name other entries. */
#define T4A_NVRTC_INCLUDES_ENTRY "t4a_nvrtc_includes"
/* Whether st, this thread's last failure, is one of the include check's refusals. */
int t4a_nvrtc_refused_unseen_(t4a_status st);

/* ---- The identity record ----------------------------------------------------------------- */

/* Where identity bytes go. One emitter (t4a_nvrtc_identity_emit) feeds every use, so the bytes
 * hashed, stored and compared are the same by construction. */
typedef enum id_sink_mode {
  ID_SINK_SIZE,    /* count bytes */
  ID_SINK_WRITE,   /* copy into buf */
  ID_SINK_HASH,    /* feed XXH3-128 (through a small coalescing buffer) */
  ID_SINK_COMPARE, /* compare against cmp; mismatch set at the first difference */
} id_sink_mode;

typedef struct t4a_nvrtc_id_sink {
  id_sink_mode mode;
  size_t pos;
  uint8_t *buf;       /* WRITE */
  const uint8_t *cmp; /* COMPARE */
  size_t cmp_bytes;
  int mismatch;
  XXH3_state_t *state; /* HASH */
  size_t pending;
  uint8_t stage[512];
} t4a_nvrtc_id_sink;

/* Emits the identity record of a prepared request into a sink. */
void t4a_nvrtc_identity_emit(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p,
                             t4a_nvrtc_id_sink *sink);
/* The record's size in bytes. */
size_t t4a_nvrtc_identity_size(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p);
/* The key: XXH3-128 of the record, canonical (big-endian) bytes. Allocates nothing. */
void t4a_nvrtc_identity_key(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p, uint8_t key[16]);
/* Writes the record into buf (t4a_nvrtc_identity_size bytes). */
void t4a_nvrtc_identity_write(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p, uint8_t *buf);
/* Whether a stored record equals the request's, byte for byte. Allocates nothing. */
int t4a_nvrtc_identity_equal(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p,
                             const uint8_t *stored, size_t stored_bytes);

/* ---- Artifacts --------------------------------------------------------------------------- */

/* A counted string: (pointer, bytes), not necessarily NUL-terminated. */
typedef struct t4a_nvrtc_str {
  const char *p;
  size_t n;
} t4a_nvrtc_str;

/* What an artifact is made of. data or log may be NULL: the space is reserved (and
 * zero-filled) for the caller to fill through the pointers t4a_nvrtc_artifact_alloc returns. */
typedef struct t4a_nvrtc_artifact_parts {
  t4a_nvrtc_output output;
  int major, minor;
  const uint8_t *key;
  t4a_nvrtc_str target, build_identity, program_name;
  const void *data;
  size_t data_bytes;
  const char *log;
  size_t log_bytes;
  size_t num_names;
  const t4a_nvrtc_str *exprs; /* num_names each */
  const t4a_nvrtc_str *lowered;
} t4a_nvrtc_artifact_parts;

struct t4a_nvrtc_artifact {
  atomic_int refs;
  t4a_nvrtc_output output;
  int major, minor;
  uint8_t key[16];
  char key_hex[33];
  size_t data_bytes, log_bytes, num_names, total_bytes;
  const char *target, *build_identity, *program_name, *log;
  const uint8_t *data;
  const char **exprs, **lowered;
};

/* Allocates one block holding the artifact and copies of every part (refs = 1). Returns NULL
 * with HOST_OUT_OF_MEMORY recorded. *out_data and *out_log (optional) point at the writable
 * data and log space. */
t4a_nvrtc_artifact *t4a_nvrtc_artifact_alloc(const t4a_nvrtc_artifact_parts *parts,
                                             uint8_t **out_data, char **out_log);

/* Re-keys an artifact this thread alone holds (just made) by its key and its bytes: for one whose
 * inputs no key saw (t4a_nvrtc_compile, an UNCACHED compile; see t4a_nvrtc_artifact_key). */
void t4a_nvrtc_artifact_key_content_(t4a_nvrtc_artifact *artifact);

/* ---- The compile core -------------------------------------------------------------------- */

/* A failed compile's log, handed to the outcome. */
typedef struct t4a_nvrtc_log {
  char *text; /* heap, NUL-terminated, or NULL */
  size_t bytes;
} t4a_nvrtc_log;

/* Runs NVRTC for a prepared request. key is the request's key (stored in the artifact); the
 * artifact carries id's version and build identity (the identity the key was made with: lib
 * itself, or the cache's identity of the same build from its files). Counts
 * attempts and successes in lib's block and, if non-NULL, in extra. On COMPILE_FAILED and on
 * INVALID_ARGUMENT from NVRTC, *log receives the log (or stays NULL). */
T4A_MUST_USE t4a_status t4a_nvrtc_compile_prepared(t4a_nvrtc_lib *lib, const t4a_nvrtc_lib *id,
                                                   const t4a_nvrtc_prepared *p,
                                                   const uint8_t key[16], t4a_counters *extra,
                                                   t4a_nvrtc_artifact **out, t4a_nvrtc_log *log);

/* Compiles a request no key sees the inputs of (t4a_nvrtc_compile, a cache's uncached compile):
 * validated against lib, keyed by its identity and its bytes (t4a_nvrtc_artifact_key_content_),
 * counted in lib's block and extra (may be NULL). */
T4A_MUST_USE t4a_status t4a_nvrtc_compile_unkeyed_(t4a_nvrtc_lib *lib,
                                                   const t4a_nvrtc_request *request,
                                                   t4a_counters *extra, t4a_nvrtc_artifact **out,
                                                   t4a_nvrtc_log *log);

/* Puts back a failure detail saved with t4a_error_last (clears it if it was T4A_OK): for paths
 * that swallow an internal failure, since a successful call leaves the detail untouched. */
void t4a_nvrtc_error_restore(const t4a_error *saved);

/* Hands a log to an outcome (outcome may be NULL: the log is freed). */
void t4a_nvrtc_outcome_set(t4a_nvrtc_outcome *outcome, t4a_nvrtc_origin origin, t4a_nvrtc_log *log);

/* ---- The disk level ---------------------------------------------------------------------- */

/* Writes between two scans of the directory, at most (other processes' writes are seen only by a
 * scan). */
#define T4A_NVRTC_DISK_RESCAN_WRITES 64u

typedef struct t4a_nvrtc_disk {
  char *dir;
  size_t dir_bytes;
  uint64_t max_bytes;
  int fsync;
  /* The size estimate that decides when to scan: the total the last scan left, plus what this
   * cache wrote since. Other processes' writes are not in it until the next scan. */
  _Atomic uint64_t estimate;
  atomic_uint writes_since_scan;
  atomic_int scanned;  /* a scan has run since the cache was created */
  atomic_int scanning; /* one scan at a time per cache */
  _Atomic uint64_t scans;
} t4a_nvrtc_disk;

/* Creates the directory (and parents) if needed and checks it is a writable directory. IO
 * otherwise. */
T4A_MUST_USE t4a_status t4a_nvrtc_disk_init(t4a_nvrtc_disk *disk, const char *dir,
                                            uint64_t max_bytes, int fsync_writes);
void t4a_nvrtc_disk_deinit(t4a_nvrtc_disk *disk);

/* Looks the request up on disk. Returns a new artifact or NULL (miss, corrupt, I/O error: all
 * counted in c). Never records an error detail that outlives the call. */
t4a_nvrtc_artifact *t4a_nvrtc_disk_lookup(t4a_nvrtc_disk *disk, const t4a_nvrtc_lib *lib,
                                          const t4a_nvrtc_prepared *p, const uint8_t key[16],
                                          t4a_counters *c);

/* As t4a_nvrtc_disk_lookup, for an entry whose identity record is given whole (a link, see
 * jitlink.c): the stored record must equal it byte for byte, and the stored artifact must have
 * this kind, version and build identity. */
t4a_nvrtc_artifact *t4a_nvrtc_disk_lookup_record(t4a_nvrtc_disk *disk, const uint8_t *record,
                                                 size_t record_bytes, t4a_nvrtc_output output,
                                                 int major, int minor, const char *build_identity,
                                                 const uint8_t key[16], t4a_counters *c);

/* Writes an artifact with its identity record atomically, then scans the directory if the size
 * estimate passed the bound, if this cache never scanned it, or every
 * T4A_NVRTC_DISK_RESCAN_WRITES writes. Every failure is counted (nvrtc_disk_errors) and otherwise
 * ignored. */
void t4a_nvrtc_disk_store(t4a_nvrtc_disk *disk, const t4a_nvrtc_artifact *art,
                          const uint8_t *identity, size_t identity_bytes, t4a_counters *c);

/* Scans the directory: removes stale temporary files of crashed writers and, when the entries
 * exceed the bound, the least recently used ones until they are within 90% of it (the low-water
 * mark, so that the next writes do not scan again at once). Counts removals; resets the estimate.
 * Returns at once if another thread of this cache is scanning. */
void t4a_nvrtc_disk_evict(t4a_nvrtc_disk *disk, t4a_counters *c);

/* Accounts for a file of `bytes` just written into the directory (an entry, or an include
 * manifest): adds it to the estimate and scans when the estimate passes the bound. */
void t4a_nvrtc_disk_wrote_(t4a_nvrtc_disk *disk, uint64_t bytes, t4a_counters *c);

/* Scans of the directory made by this cache (tests: writes do not scan every time). */
uint64_t t4a_nvrtc_cache_disk_scans(const t4a_nvrtc_cache *cache);

/* A request's signature for the memory level's recent-hit index (nvrtc_cache.c): XXH3-64 of its
 * counts, program name, target, the first and last 64 source bytes and 32 words between; never
 * 0. Equal requests have equal signatures; a match is only a candidate, compared in full. */
uint64_t t4a_nvrtc_request_sig_(const t4a_nvrtc_prepared *p);

/* Slots of the recent-hit index (a power of two): a signature's slot is sig % this. */
#define T4A_NVRTC_HINT_SLOTS 64u

/* Memory hits answered through the recent-hit index (tests). */
uint64_t t4a_nvrtc_cache_hint_hits_(const t4a_nvrtc_cache *cache);

/* ---- The identity from files (nvrtc_libid.c) ---------------------------------------------- */

/* The loaded object behind a dlopen handle: the loader's name for it (l_name), resolved path and
 * in-memory GNU build-id ("" for none). Returns 0 if the handle has no link map
 * (nvrtc_loader.c). */
int t4a_nvrtc_loaded_object(void *handle, char *l_name, size_t l_name_size, char *real_path,
                            size_t real_path_size, char *build_id, size_t build_id_size);

/* The identity of the NVRTC that t4a_nvrtc_lib_open(library_path) would load, derived from the
 * files without loading (see nvrtc_libid.c): *out_id is an identity-only lib (no table) holding
 * the version, the identity string "nvrtc M.m build-id B xxh128 H; builtins build-id B xxh128 H",
 * capabilities CUBIN and LTO-IR assumed and no architecture list. *out_id stays NULL (status OK)
 * when the identity can only be learnt by loading: memo_dir NULL, no process recorded the version
 * of this content in memo_dir yet, or a search the emulation cannot decide. NVRTC_NOT_FOUND when
 * no candidate file exists (the message lists them); HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_nvrtc_libid_lazy(const char *library_path, const char *memo_dir,
                                             t4a_nvrtc_lib **out_id);
/* The same identity for a loaded lib (its objects' files, hashes memoised in memo_dir), with its
 * capabilities and architectures; records its version for the content in memo_dir. NULL for an
 * injected table, without memo_dir, or when a file cannot be read. Leaves the error detail. */
t4a_nvrtc_lib *t4a_nvrtc_libid_loaded(const t4a_nvrtc_lib *lib, const char *memo_dir);
/* "build-id B xxh128 H bytes N" of any file, its hash memoised in memo_dir (may be NULL). IO if it
 * cannot be read; INVALID_ARGUMENT. (Tests: a changed byte changes it, a touch does not.) */
T4A_MUST_USE t4a_status t4a_nvrtc_file_identity(const char *path, const char *memo_dir, char *out,
                                                size_t out_size);
/* Whether the cache has loaded NVRTC (a lazy cache loads it at its first miss). */
int t4a_nvrtc_cache_lib_loaded(const t4a_nvrtc_cache *cache);
/* The identity string the cache keys on now ("" while unknown). */
const char *t4a_nvrtc_cache_build_identity(const t4a_nvrtc_cache *cache);

/* Formats a key as 32 lowercase hex digits and a NUL. */
void t4a_nvrtc_key_hex(const uint8_t key[16], char out[33]);

#endif /* T4A_NVRTC_NVRTC_INTERNAL_H_ */
