/* Private to t4a_launch: the layouts of module caches, modules and functions, and the launch
 * core that checked launches, raw-bytes launches and descriptor fires share.
 *
 * Ownership: a function reference IS a reference to its module (t4a_function_retain retains the
 * module); function objects live in their module and are freed with it. A module holds its cache
 * object (refcounted: the caller's handle is one reference, every module one more), so modules and
 * functions outlive t4a_module_cache_destroy safely; the cache object holds the lane. The cache's
 * table holds one strong reference to each cached module. */
#ifndef T4A_LAUNCH_LAUNCH_INTERNAL_H_
#define T4A_LAUNCH_LAUNCH_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "t4a/launch.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/oplock.h"

/* The device's launch limits, read once when the cache is created. */
typedef struct t4a_launch_limits {
  uint32_t max_threads_per_block;
  uint32_t max_block[3];
  uint32_t max_grid[3];
  uint32_t max_shared_optin; /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
  uint32_t sm_count;         /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
  uint8_t cooperative;       /* CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH */
  uint8_t clusters;          /* CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH */
  uint32_t cc_major;         /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
} t4a_launch_limits;

/* Launch attributes checked and ready for cuLaunchKernelEx (attrs.c): at most one each of
 * cooperative, cluster dimension and programmatic stream serialization. num 0: none (the launch
 * is a plain cuLaunchKernel). Stored inline in a descriptor: no heap per fire. */
typedef struct t4a_launch_ex_ {
  CUlaunchAttribute attrs[3];
  uint32_t num;
} t4a_launch_ex_;

/* A cache key: a tag ('I' an image hashed with its kind, 'A' an NVRTC artifact's key) and 16
 * bytes of XXH3-128. */
typedef struct t4a_module_key {
  uint8_t tag;
  uint8_t kind;
  uint8_t hash[16];
} t4a_module_key;

/* A one-node executable graph (GRAPH strategy) of a descriptor (its table owns it, the table's
 * lock guards it) or of a function (for checked launches: the function owns it, its graph_lock
 * guards it). t4a_launch_enqueue_ builds, updates and launches it inside the admission (the
 * lane's context current). */
typedef struct t4a_launch_graph_ {
  CUgraph graph;
  CUgraphNode node;
  CUgraphExec exec;
  uint32_t fires_left; /* plain fires before the graph is built */
  uint8_t enabled;     /* the table fires GRAPH */
  uint8_t dirty;       /* arguments rebound since the node's parameters were set */
  uint8_t failed;      /* a build or an update failed: plain fires from then on */
  /* Per-fire flags for the table's stats: cleared by the descriptor's fire, set by enqueue. */
  uint8_t used;        /* set by enqueue: this fire went through the graph */
  uint8_t built;       /* set by enqueue: this fire built the graph */
  uint8_t updated;     /* set by enqueue: this fire updated the node */
  uint8_t fell_back;   /* set by enqueue: this fire's build or update failed */
  /* Chain recording (chain.c): when want_node is set and the fire was captured, enqueue asks the
   * capture for the kernel node it just added (cuStreamGetCaptureInfo, inside the admission):
   * captured_node, or node_status (the detail recorded) when that failed. */
  uint8_t want_node;
  CUgraphNode captured_node;
  t4a_status node_status;
} t4a_launch_graph_;

struct t4a_module_cache {
  atomic_long refs; /* the caller's handle + one per module */
  pthread_mutex_t lock;
  t4a_lane *lane; /* a reference */
  t4a_driver *driver;
  t4a_counters *counters; /* the lane's block */
  uint64_t domain;
  t4a_launch_limits limits;
  uint32_t max_entries;
  uint64_t max_bytes;
  t4a_launch_strategy strategy; /* resolved for checked launches: PLAIN or GRAPH */
  uint32_t graph_after;
  /* Guarded by lock: the table (chained hash), the LRU list (most recent first), the stats. */
  t4a_module **buckets;
  uint32_t num_buckets; /* a power of two */
  t4a_module *lru_first, *lru_last;
  uint32_t entries;
  uint64_t bytes;
  uint64_t loads, hits, evictions;
  atomic_uint_fast64_t unloads; /* counted by modules, also after the cache handle is gone */
};

/* A global of a module, learnt once (cuModuleGetGlobal) and kept in the module's list (its
 * lock); freed with the module. */
typedef struct t4a_global_rec_ {
  struct t4a_global_rec_ *next;
  t4a_devptr ptr;
  size_t bytes;
  char name[]; /* NUL-terminated */
} t4a_global_rec_;

struct t4a_module {
  atomic_long refs;        /* callers, the cache's table, functions handed out, keepalives,
                              views of its globals */
  t4a_module_cache *cache; /* a reference */
  CUmodule handle;
  t4a_module_key key;
  size_t bytes;
  pthread_mutex_t lock; /* the function list and the global list */
  t4a_function *functions;
  t4a_global_rec_ *globals; /* globals.c */
  /* Guarded by the cache's lock. */
  t4a_module *hash_next, *lru_prev, *lru_next;
  int cached; /* in the table (holding the cache's reference) */
};

#define T4A_PARAMS_UNDECLARED UINT32_MAX

struct t4a_function {
  t4a_function *next; /* in the module's list */
  t4a_module *module;
  CUfunction handle;
  const char *name; /* stored after the struct */
  int known;        /* the layout came from cuFuncGetParamInfo */
  uint32_t num_params;
  const uint32_t *offsets, *sizes; /* num_params each (known only), stored after the struct */
  _Atomic uint32_t declared;       /* t4a_function_declare_params, or T4A_PARAMS_UNDECLARED */
  _Atomic uint32_t dyn_shared_max; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as set */
  pthread_mutex_t attr_lock;       /* serialises raising it */
  /* Checked launches as a one-node graph (the cache's GRAPH strategy, known layouts only). */
  pthread_mutex_t graph_lock; /* try-locked by a launch: graph, graph_cfg, graph_bytes */
  t4a_launch_graph_ graph;
  t4a_launch_config graph_cfg; /* the config the node holds (valid once built) */
  unsigned char *graph_bytes;  /* the parameter bytes the node holds, at the layout's offsets */
};

/* What a launch policy comes to (calibrate.c): the strategy, PLAIN or GRAPH (AUTO: the
 * calibration's, PLAIN without one), and graph_after (0: the calibration's, or 16). NULL is the
 * default policy. INVALID_ARGUMENT for an unknown strategy value. */
t4a_status t4a_launch_policy_resolve_(const t4a_launch_policy *policy,
                                      t4a_launch_strategy *out_strategy, uint32_t *out_graph_after);

/* Checks `config` against the function's device limits: INVALID_LAUNCH naming the dimension. */
t4a_status t4a_launch_check_config_(const t4a_function *fn, const t4a_launch_config *config);
/* A cuLaunchKernelEx config for `cfg` on `stream`, with no attributes (the caller adds them). */
static inline void t4a_launch_ex_config_(CUlaunchConfig *lc, const t4a_launch_config *cfg,
                                         CUstream stream) {
  memset(lc, 0, sizeof *lc);
  lc->gridDimX = cfg->grid[0];
  lc->gridDimY = cfg->grid[1];
  lc->gridDimZ = cfg->grid[2];
  lc->blockDimX = cfg->block[0];
  lc->blockDimY = cfg->block[1];
  lc->blockDimZ = cfg->block[2];
  lc->sharedMemBytes = cfg->shared_bytes;
  lc->hStream = stream;
}

/* The number of parameters launches must pass: the driver's count, or the declared one.
 * ARGUMENT_MISMATCH when neither is known. */
t4a_status t4a_launch_expected_params_(t4a_function *fn, uint32_t *out);

/* Checks argument `index` against the function's parameter `index` (layout known) and the lane's
 * domain, and says where its bytes are: *out_src (for a buffer or a device address, `scratch`
 * receives the 8-byte value and is pointed at) and *out_size. *out_buffer is the buffer (NULL for
 * other kinds). Statuses: INVALID_ARGUMENT, FOREIGN_HANDLE, ARGUMENT_MISMATCH. */
t4a_status t4a_launch_check_arg_(const t4a_function *fn, uint64_t domain, uint32_t index,
                                 const t4a_arg *arg, uint64_t *scratch, const void **out_src,
                                 uint32_t *out_size, t4a_buffer **out_buffer);


/* A registered descriptor (descriptor.c; chain.c reads it under the table's lock). */
typedef struct t4a_launch_desc_ {
  t4a_function *fn; /* a reference */
  t4a_launch_config cfg;
  uint32_t num_params;
  void **ptrs;       /* num_params: the kernel-parameter pointers into bytes */
  t4a_buffer **bufs; /* num_params: the buffer bound to each parameter (a reference) or NULL */
  uint32_t *offsets; /* num_params: where parameter i lives in bytes */
  uint32_t *sizes;   /* num_params */
  unsigned char *bytes;
  t4a_launch_graph_ graph; /* GRAPH strategy: its one-node executable graph */
  t4a_launch_ex_ ex;       /* launch attributes, checked at registration (num 0: none) */
  uint64_t bind_gen;       /* bumped by every (re)bind: chains compare it with their node's */
  uint32_t chain_nodes;    /* kernel nodes of live chains (and of a recording) naming it:
                              unregister is refused (BUSY) while it is not 0 */
} t4a_launch_desc_;

typedef struct t4a_chain_rec_ t4a_chain_rec_; /* a recording in progress (chain.c) */

/* What the table tells the chains recorded on it: the table knows chains only through these
 * hooks, which chain.c registers with the table when a recording begins (t4a_chain_begin). */
typedef struct t4a_launch_table_observer_ {
  /* Called by a fire (lock held) whose enqueue asked for its captured node (a recording is in
   * progress): records the node, or the failure to learn it, in the recording. */
  void (*note_fire)(t4a_launch_table *table, t4a_launch_desc_ *d);
  /* Hands `bufs` (NULL entries skipped; borrowed) to the lane's open epoch through an admission
   * that enqueues nothing, so work queued before — replays of chains that read them — completes
   * before they go (lock held: the retire's lock is taken after the table's). If no admission
   * can be made they are held for good and counted in `leaked`. The caller's error detail is
   * kept. */
  void (*hold_buffers)(t4a_launch_table *table, t4a_buffer *const *bufs, uint32_t n);
  /* Drops a recording left behind by a table destroyed mid-recording (no lock needed). */
  void (*drop_recording)(t4a_launch_table *table);
} t4a_launch_table_observer_;

struct t4a_launch_table {
  t4a_oplock_ lock; /* just before its retire's in the lock order (t4a_launch_table_lock_) */
  t4a_retire *retire;
  uint64_t domain;
  uint32_t capacity;
  t4a_launch_desc_ **slots;
  uint16_t *gens;
  uint32_t *free_ids; /* a stack of free slots */
  uint32_t num_free;
  uint32_t next_unused; /* slots below it have been used at least once */
  t4a_launch_strategy strategy; /* resolved: PLAIN or GRAPH */
  uint32_t graph_after;
  /* Guarded by lock. */
  uint32_t descriptors, graphs;
  uint64_t plain_fires, graph_fires, graph_builds, graph_updates, graph_fallbacks;
  uint64_t binds;       /* every (re)bind of any descriptor: a chain whose figure matches skips
                           its scan for rebound nodes */
  uint32_t chains;      /* live chains recorded on this table */
  t4a_chain_rec_ *rec;  /* the chain being recorded, or NULL */
  const t4a_launch_table_observer_ *observer; /* set by the first recording, or NULL */
};

/* The checks and enqueue of t4a_memset (memset.c). With `out_node` (a chain recording), the
 * capture's node for the fill is asked for inside the admission: *out_node is set, or
 * *out_node_status says why it could not be learnt (the fill itself was captured then). */
t4a_status t4a_memset_enqueue_(t4a_retire *retire, t4a_buffer *buffer, size_t offset,
                               size_t count, unsigned elem_bytes, uint32_t value,
                               CUgraphNode *out_node, t4a_status *out_node_status);
/* Within an admission of a capturing lane (context current): the capture's one dependency, the
 * node the last captured call added. Sets and returns the failure otherwise. */
t4a_status t4a_launch_captured_node_(t4a_driver *drv, t4a_lane *lane, CUgraphNode *out);

/* Takes the table's lock: REENTRY (recorded) if this thread holds the retire's operation lock. */
t4a_status t4a_launch_table_lock_(t4a_launch_table *table);

/* The descriptor named by `id` (lock held), or NULL with INVALID_ARGUMENT recorded. */
t4a_launch_desc_ *t4a_launch_table_lookup_(t4a_launch_table *table, uint32_t id);

/* The kernel-node parameters of a launch (pointers into `params`: the driver copies them). */
void t4a_launch_node_params_(const t4a_function *fn, const t4a_launch_config *cfg, void **params,
                             CUDA_KERNEL_NODE_PARAMS *out);

/* The shared tail of every launch: an admission on `retire` reserving 1 + (non-NULL buffers)
 * keepalives, the dynamic shared memory limit raised if needed, the submission, then the module
 * and the buffers kept and the admission committed (`launches` counted). `buffers` has
 * `num_buffers` entries, NULL ones skipped. The submission is cuLaunchKernel with `params`, or,
 * when `graph` is given, enabled, not failed and the lane not captured, cuGraphLaunch of its
 * executable graph (built when its plain fires ran out, its node updated first when dirty). A
 * refusal by the driver's launch validation aborts the admission; any other failure of the
 * submission may have enqueued the kernel: the module is kept by the epoch and the buffers are
 * quarantined. */
t4a_status t4a_launch_enqueue_(t4a_retire *retire, t4a_function *fn,
                               const t4a_launch_config *config, void **params,
                               t4a_buffer *const *buffers, uint32_t num_buffers,
                               t4a_launch_graph_ *graph);
/* As t4a_launch_enqueue_, with launch attributes (`ex` NULL or num 0: none). A launch with
 * attributes is one cuLaunchKernelEx, never a one-node graph's cuGraphLaunch (`graph` is then
 * used only for a chain recording's captured node). */
t4a_status t4a_launch_enqueue_ex_(t4a_retire *retire, t4a_function *fn,
                                  const t4a_launch_config *config, void **params,
                                  t4a_buffer *const *buffers, uint32_t num_buffers,
                                  t4a_launch_graph_ *graph, const t4a_launch_ex_ *ex);

/* Checks `attrs` (NULL: none) for a launch of `fn` with `config` (already checked) against the
 * driver's capabilities, the device's and the kernel's limits (attrs.c; driver calls under the
 * lane's context: occupancy for a cooperative grid, the non-portable attribute and
 * cuOccupancyMaxPotentialClusterSize for a cluster) and fills *out. Statuses: INVALID_LAUNCH
 * (naming the limit), UNSUPPORTED (capability or device), LANE_BROKEN, driver failures. */
t4a_status t4a_launch_check_attrs_(t4a_function *fn, const t4a_launch_config *config,
                                   const t4a_launch_attrs *attrs, t4a_launch_ex_ *out);

/* Raises the function's dynamic shared memory limit to `shared` if it is below (memoised: the
 * highest value set). Context current. */
t4a_status t4a_launch_raise_shared_(t4a_function *fn, uint32_t shared);

/* Marks descriptor `id`'s graph node stale, as a rebind does (calibration's rebind figure; an
 * unknown id is ignored). */
void t4a_launch_table_touch_(t4a_launch_table *table, uint32_t id);

/* Stores `size` argument bytes at `dst` for a one-node graph's node (a descriptor's bytes, or a
 * function's copy of the bytes its node holds) and says whether they changed. Arguments of other
 * sizes than 1, 2, 4 or 8 bytes may be structs whose padding the caller never set: they are
 * copied and count as changed rather than having that padding compared. */
static inline int t4a_launch_store_arg_(unsigned char *dst, const void *src, uint32_t size) {
  /* Pointers and 4-byte scalars (almost every argument): one load-compare, no libc call. */
  if (size == 8) {
    uint64_t a, b;
    memcpy(&a, dst, 8);
    memcpy(&b, src, 8);
    if (a == b) return 0;
    memcpy(dst, &b, 8);
    return 1;
  }
  if (size == 4) {
    uint32_t a, b;
    memcpy(&a, dst, 4);
    memcpy(&b, src, 4);
    if (a == b) return 0;
    memcpy(dst, &b, 4);
    return 1;
  }
  int scalar = size == 1 || size == 2;
  if (scalar && memcmp(dst, src, size) == 0) return 0;
  memcpy(dst, src, size);
  return 1;
}

/* Destroys a graph and an executable graph (either may be NULL) under the lane's context, after
 * the end of a capture of the lane for an executable graph; what cannot be destroyed is leaked
 * and counted. The driver finishes queued launches of an executable graph before freeing it. */
void t4a_launch_destroy_native_(t4a_lane *lane, CUgraph graph, CUgraphExec exec);
/* Releases the keepalives a capture handed over (t4a_retire_capture_end; the retire counted them
 * held), frees the array and counts them released on the lane, as the retire does for an epoch. */
void t4a_launch_release_kept_(t4a_lane *lane, t4a_keepalive *items, size_t n);

/* t4a_module_release with a void * argument, for keepalive lists. */
void t4a_module_release_object_(void *module);

/* A module reference as a keepalive (retains the module). */
t4a_keepalive t4a_module_keepalive_(t4a_module *module);

/* Whether a failed cuLaunchKernel / cuGraphLaunch queued nothing: validation refusals and the
 * stream-capture codes (work of an invalidated capture never runs). Otherwise the work may be
 * queued and what it touches is of unknown state. */
int t4a_launch_refused_before_enqueue_(CUresult r);

#endif /* T4A_LAUNCH_LAUNCH_INTERNAL_H_ */
