/* testing/fake_driver — private layout of the fake driver, shared by its source files.
 *
 * Files:
 *   fake_driver.c   the global fake, its lock, handles, the call prologue (counts, injection),
 *                   the table, error names, counts and the public t4a_fake_* calls.
 *   fake_entries.c  one static wrapper per catalogue entry (fake_cuInit, ...): prologue, body,
 *                   epilogue; the table is filled from T4A_DRIVER_CATALOG.
 *   fake_device.c   cuInit, devices, primary contexts and the current context.
 *   fake_stream.c   streams, events, the progress engine, stream capture.
 *   fake_memory.c   pools, device allocations, copies and fills, host memory, pointer attributes.
 *   fake_module.c   module images, functions, kernels and launches.
 *   fake_graph.c    graphs and executable graphs.
 *
 * Locking: one process-wide recursive mutex guards all of it. Every entry point takes it in its
 * prologue; kernels run with it held (t4a_fake_deref takes it again, recursively). Body functions
 * (fk_cu*) and everything else declared here assume the lock is held.
 *
 * Handles: every object a CUDA handle names (primary context, stream, event, pool, module,
 * function, graph, graph node, executable graph) is found through the handle table. A handle is a
 * number, never a pointer: a tag, the fake's generation and a slot index that is never reused. So
 * a handle to a destroyed object (or one from an earlier fake) is detected, never dereferenced.
 * A primary context handle names the device's fk_pctx, which is stable for the fake's life; each
 * retain after a destruction starts a new incarnation (fk_ctx) behind the same handle.
 *
 * Happens-before: every stream carries a vector clock (fk_vc, one component per stream ever
 * created). Running an operation ticks its stream's component; an event record copies the clock
 * into its point, a wait joins the point's clock in. The host is modelled by one clock that
 * joins what a successful synchronisation observed (stream/event/context sync, a query that
 * answers complete, cuMemFree); every operation carries the host clock of its enqueue, joined
 * when it runs. Device allocations remember the epoch of their allocation operation and each
 * stream's last access; a free or an access that is not ordered after what it must follow is an
 * ordering violation. */
#ifndef T4A_TESTING_FAKE_INTERNAL_H_
#define T4A_TESTING_FAKE_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "testing/fake_driver/fake_driver.h"

/* ---- small helpers ------------------------------------------------------------------------ */

/* An intrusive doubly-linked list node; a list head is a node that points at itself when empty. */
typedef struct fk_link {
  struct fk_link *prev, *next;
} fk_link;

#define FK_CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define FK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void fk_list_init(fk_link *head);
void fk_list_push(fk_link *head, fk_link *node); /* appends */
void fk_list_remove(fk_link *node);
int fk_list_empty(const fk_link *head);

/* A sorted array of disjoint address ranges, each naming an object. */
typedef struct fk_range {
  uint64_t base, size;
  void *obj;
} fk_range;
typedef struct fk_rindex {
  fk_range *v;
  size_t n, cap;
} fk_rindex;

int fk_rindex_insert(fk_rindex *ri, uint64_t base, uint64_t size, void *obj); /* 0: no memory */
void fk_rindex_remove(fk_rindex *ri, uint64_t base);
/* The object whose range contains [addr, addr + len) (len 0: addr inside it or one past its
 * end). */
void *fk_rindex_find(const fk_rindex *ri, uint64_t addr, uint64_t len);
/* Any object whose range overlaps [addr, addr + len). */
void *fk_rindex_overlap(const fk_rindex *ri, uint64_t addr, uint64_t len);
void fk_rindex_free(fk_rindex *ri);

/* ---- objects ------------------------------------------------------------------------------ */

typedef enum fk_kind {
  FK_KIND_CTX = 1,
  FK_KIND_STREAM,
  FK_KIND_EVENT,
  FK_KIND_POOL,
  FK_KIND_MODULE,
  FK_KIND_FUNC,
  FK_KIND_GRAPH,
  FK_KIND_NODE,
  FK_KIND_EXEC,
} fk_kind;

/* The first member of every object that a handle names. handle is 0 once the handle is dropped. */
typedef struct fk_obj {
  fk_kind kind;
  uint64_t handle;
} fk_obj;

typedef struct fk_stream fk_stream;
typedef struct fk_pool fk_pool;

/* A vector clock: v[i] is the latest tick of stream index i known; components past n are 0. */
typedef struct fk_vc {
  uint64_t *v;
  size_t n;
} fk_vc;

/* An immutable snapshot of the host clock, shared by the operations enqueued under it. */
typedef struct fk_hsnap {
  int refs;
  uint64_t version; /* snapshots only grow: a higher version includes every lower one */
  fk_vc vc;
} fk_hsnap;
typedef struct fk_pin fk_pin;
typedef struct fk_graph fk_graph;

/* One incarnation of a device's primary context. Context objects are never freed before the
 * fake: a destroyed one stays as a zombie (alive == 0) so that objects pointing at it can still
 * ask it. o.handle is the device's stable primary-context handle (the handle table holds the
 * fk_pctx, not the incarnation); o.kind is FK_KIND_CTX. */
typedef struct fk_ctx {
  fk_obj o;
  int device;
  uint32_t incarnation; /* 1 for the first retain, +1 for each revival */
  int alive;
  CUresult sticky;
  size_t limits[16];
  unsigned char peer[T4A_FAKE_MAX_DEVICES]; /* cuCtxEnablePeerAccess to that device's context */
  fk_stream *null_stream;                   /* the legacy default stream (no handle) */
  fk_link link;                             /* t4a_fake.contexts */
} fk_ctx;

/* A device's primary context as its handle names it: one per device, created by the first
 * retain and kept until the fake goes. cur is the latest incarnation (alive or destroyed). */
typedef struct fk_pctx {
  fk_obj o;
  int device;
  fk_ctx *cur;
} fk_pctx;

/* A recorded point in a stream: the unit that events complete and waits wait for. Refcounted by
 * the event that last recorded it, the marker operation and every wait on it. */
typedef struct fk_point {
  int refs;
  int done;
  fk_stream *stream; /* where the marker is queued; NULL once done */
  uint64_t time_ns;
  fk_vc vc; /* the recording stream's clock when the marker ran */
} fk_point;

typedef enum fk_op_kind {
  FK_OP_COPY = 1,
  FK_OP_FILL,
  FK_OP_KERNEL,
  FK_OP_FREE,
  FK_OP_RECORD,
  FK_OP_WAIT,
  FK_OP_ALLOC, /* a stream-ordered allocation becomes valid */
  FK_OP_HOST,  /* cuLaunchHostFunc: fn(user) on another thread, in stream order */
  /* Graph nodes only: an external event record / wait node (CU_EVENT_RECORD_EXTERNAL,
   * CU_EVENT_WAIT_EXTERNAL during a capture); a launch turns them into a RECORD of the event (a
   * new point) and a WAIT on its latest point, as cuEventRecord / cuStreamWaitEvent would. */
  FK_OP_EVENT_RECORD_NODE,
  FK_OP_EVENT_WAIT_NODE,
} fk_op_kind;

/* One end of a copy: a fake device address, or a host address (with the id of the pinned range
 * it lay in at enqueue time, 0 for pageable memory). */
typedef struct fk_end {
  int device;
  uint64_t addr;
  uint64_t pin_id;
} fk_end;

/* The launch attributes the fake models (cuLaunchKernelEx; fake_occupancy.c). */
typedef struct fk_launch_attrs {
  unsigned cluster[3]; /* all 0: no cluster */
  int cooperative;
  int programmatic; /* programmatic stream serialization allowed */
} fk_launch_attrs;

/* A snapshot of a kernel's arguments, laid out as the registered parameter list says. */
typedef struct fk_args {
  size_t num;
  size_t *offsets; /* num entries */
  size_t *sizes;   /* num entries */
  unsigned char *bytes;
  size_t total;
} fk_args;

typedef struct fk_op {
  struct fk_op *next;
  fk_op_kind kind;
  fk_hsnap *host; /* the host clock when it was queued (NULL in graphs); owned reference */
  union {
    struct {
      fk_end dst, src;
      size_t bytes;
    } copy;
    struct {
      CUdeviceptr dst;
      uint32_t value;
      size_t elem; /* 1, 2 or 4 */
      size_t count;
    } fill;
    struct {
      CUfunction func;
      unsigned grid[3], block[3], shared;
      t4a_fake_kernel_fn fn; /* NULL: an unregistered kernel, which does nothing */
      void *user;
      fk_args args;
      fk_launch_attrs attrs; /* cuLaunchKernelEx's (kept by graph nodes and their updates) */
    } kernel;
    struct {
      CUdeviceptr ptr;
    } free;
    struct {
      CUdeviceptr ptr;
      uint64_t id; /* the allocation's id: a later allocation never matches */
    } alloc;
    struct {
      fk_point *point;
    } record, wait;
    struct {
      CUhostFn fn;
      void *user;
    } host;
    struct {
      uint64_t event; /* the event's handle */
    } event_node;
  } u;
} fk_op;

/* A stream capture in progress. */
typedef struct fk_capture {
  fk_graph *graph;
  CUstreamCaptureMode mode;
  int invalidated;
  pthread_t owner;
  uint64_t id;     /* unique per capture (cuStreamGetCaptureInfo) */
  CUgraphNode dep; /* the capture's last node, as cuStreamGetCaptureInfo hands it out */
} fk_capture;

#define FK_STREAM_ATTR_SLOTS 32

struct fk_stream {
  fk_obj o;
  fk_ctx *ctx;
  unsigned flags;
  int priority;
  int is_null;        /* the context's legacy default stream */
  int user_destroyed; /* cuStreamDestroy ran; freed once its queue drains */
  int visiting;       /* on the progress engine's stack (cycle detection) */
  int pins;           /* held by an engine loop: not freed until unpinned */
  uint32_t vc_index;  /* this stream's component in vector clocks */
  fk_vc vc;           /* what this stream's executed work is ordered after */
  uint64_t host_seen; /* version of the newest host snapshot joined into vc */
  fk_op *head, *tail;
  size_t pending;
  fk_capture *cap;
  CUstreamAttrValue attrs[FK_STREAM_ATTR_SLOTS];
  unsigned char attr_set[FK_STREAM_ATTR_SLOTS];
  fk_link link; /* t4a_fake.streams */
};

typedef struct fk_event {
  fk_obj o;
  fk_ctx *ctx;
  unsigned flags;
  fk_point *last;            /* the most recent record outside capture, or NULL */
  uint64_t captured_stream;  /* handle of the capturing stream of the last record, or 0 */
  fk_link link;              /* t4a_fake.events */
} fk_event;

struct fk_pool {
  fk_obj o;
  int device;
  int is_default;
  int destroyed;
  uint64_t outstanding; /* live allocations from this pool */
  uint64_t used, used_high, reserved, reserved_high, threshold;
  int reuse[3];
  unsigned char access[T4A_FAKE_MAX_DEVICES]; /* CUmemAccess_flags per device */
  fk_link link;                               /* t4a_fake.pools */
};

/* A live range of fake device addresses: device memory, or the device mapping of pinned host
 * memory (device == -1, pin set, host points into the pinned range). */
/* The last access to an allocation by one stream (its clock component at the access). */
typedef struct fk_access {
  uint32_t stream;
  uint64_t time;  /* its last access of any kind */
  uint64_t wtime; /* its last write (0: none); a kernel's t4a_fake_deref is a read */
} fk_access;

typedef struct fk_alloc {
  CUdeviceptr base;
  size_t size;
  unsigned char *host;
  int device;
  fk_ctx *ctx;
  fk_pool *pool;
  fk_pin *pin;
  int free_pending;
  int alloc_pending; /* a stream-ordered allocation whose operation has not run: not valid yet */
  int ordered;       /* allocated by a stream operation at (alloc_stream, alloc_time) */
  uint32_t alloc_stream;
  uint64_t alloc_time;
  fk_access *acc; /* the last access of each stream that touched it */
  size_t num_acc, cap_acc;
  uint64_t id;
  int module_mem; /* a module global's memory: freed with its module, never by cuMemFree*, not
                     counted in t4a_fake_live.device_allocs (the module is counted) */
} fk_alloc;

/* A block freed by a stream operation: where and when, to judge later accesses to it. */
typedef struct fk_tomb {
  uint32_t stream;
  uint64_t time;
} fk_tomb;

/* A pinned host range: cuMemHostAlloc memory or a cuMemHostRegister range. */
struct fk_pin {
  unsigned char *base;
  size_t size;
  unsigned flags;
  int registered;
  fk_ctx *ctx;
  fk_alloc *map; /* its device mapping, or NULL */
  uint64_t id;
};

typedef struct fk_module fk_module;
typedef struct fk_func {
  fk_obj o;
  fk_module *mod;
  char *name;
  int device_fn; /* a CUBIN's GLOBAL device function: found by name, not launchable */
  int max_dyn_shared;
  int carveout;
  int non_portable_cluster; /* CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
} fk_func;

/* A global of a module (__device__ or __constant__): its name, size and memory. */
typedef struct fk_modglobal {
  char *name;
  int is_const;    /* __constant__ (counted in CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES) */
  fk_alloc *alloc; /* module memory (fk_alloc.module_mem), freed with the module */
} fk_modglobal;

struct fk_module {
  fk_obj o;
  fk_ctx *ctx;
  size_t num_funcs;
  fk_func **funcs;
  size_t num_globals;
  fk_modglobal *globals;
  fk_link link; /* t4a_fake.modules */
};

/* A kernel registered by name (t4a_fake_register_kernel). */
typedef struct fk_kernel {
  struct fk_kernel *next;
  char *name;
  size_t num;
  size_t *sizes, *offsets;
  size_t total;
  t4a_fake_kernel_fn fn;
  void *user;
  t4a_fake_kernel_attrs attrs; /* t4a_fake_set_kernel_attrs; zero fields: the defaults */
} fk_kernel;

typedef struct fk_node {
  fk_obj o;
  fk_graph *graph;
  fk_op op;
} fk_node;

struct fk_graph {
  fk_obj o;
  fk_node **nodes;
  size_t num, cap;
  int counted; /* in t4a_fake_live.graphs (not while it is still a capture's graph) */
  fk_link link;
};

typedef struct fk_exec_node {
  uint64_t origin; /* handle of the node it was instantiated from */
  uint64_t source; /* handle of the node it was last updated from */
  fk_op op;
} fk_exec_node;

typedef struct fk_exec {
  fk_obj o;
  fk_ctx *ctx;
  fk_exec_node *nodes;
  size_t num;
  fk_point *last; /* end of the latest launch: launches of one executable graph are ordered */
  fk_link link;
} fk_exec;

struct t4a_fake_launch {
  t4a_fake *fake;
  fk_ctx *ctx;
  fk_module *mod; /* the launched function's module (its globals) */
  unsigned grid[3], block[3], shared;
  fk_launch_attrs attrs;
  int faulted;
};

typedef struct fk_rule {
  struct fk_rule *next;
  int entry; /* -1: any entry */
  uint64_t skip, count, seen;
  CUresult result;
  int after_enqueue;
} fk_rule;

typedef struct fk_device {
  uint64_t mem_bytes, used_bytes;
  int refs;
  fk_pctx *pctx;   /* the stable primary-context handle, from the first retain on */
  fk_ctx *primary; /* the live incarnation, or NULL while destroyed / never retained */
  fk_pool *default_pool;
  CUdeviceptr next_addr;
} fk_device;

/* The catalogue as an enum: FK_E_cuInit, ... */
enum {
#define FK_ENTRY_ENUM_(name, version, need) FK_E_##name,
  T4A_DRIVER_CATALOG(FK_ENTRY_ENUM_)
#undef FK_ENTRY_ENUM_
      FK_E_COUNT
};

struct t4a_fake {
  t4a_driver_table table;
  t4a_fake_options opt;
  uint32_t generation;
  int initialized;
  int num_devices;
  fk_device dev[T4A_FAKE_MAX_DEVICES];
  t4a_fake_query_policy query_policy;

  /* Handle table: slots[i] is the object of index i, NULL once dropped. Index 0 is unused. */
  fk_obj **slots;
  uint32_t num_slots, cap_slots;

  fk_link contexts, streams, events, pools, modules, graphs, execs;
  fk_rindex allocs; /* by fake device address */
  fk_rindex pins;   /* by host address */
  fk_kernel *kernels;

  fk_rule *rules;
  uint64_t injected;
  uint64_t calls[FK_E_COUNT];
  uint64_t total_calls;

  t4a_fake_live live;
  uint64_t clock_ns;
  uint64_t next_id;
  CUdeviceptr next_mapped;
  int engine_depth;
  size_t zombie_streams; /* destroyed by the user, still draining */

  /* Progress policy. */
  t4a_fake_progress_order progress_order;
  uint64_t rng;

  /* Happens-before (see the file comment). */
  uint32_t num_vc;     /* stream indices handed out */
  fk_hsnap *host;      /* the current host clock snapshot (one reference owned here) */
  uint64_t host_version;
  fk_stream *exec;     /* the stream whose operation is running, or NULL */
  int vc_broken;       /* out of memory in a clock operation: ordering checks are off */
  fk_rindex freed;     /* fk_tomb of blocks freed by stream operations */
  uint64_t ordering_violations;
  uint64_t nonportable_pinned_uses;
  uint64_t foreign_event_observations; /* event query/sync with another context current */
  uint64_t host_fns_run;               /* cuLaunchHostFunc functions run */
};

/* The fake's fixed address layout: device d's memory starts at FK_DEVICE_BASE(d); the device
 * mappings of pinned host memory start at FK_MAPPED_BASE. These addresses are outside the x86-64
 * canonical user range, so they can never be host pointers. */
#define FK_DEVICE_BASE(d) (0x7A00000000000000ull + ((uint64_t)(d) << 48))
#define FK_MAPPED_BASE 0x7900000000000000ull
#define FK_FAKE_ADDR_LO 0x7900000000000000ull
#define FK_FAKE_ADDR_HI 0x7B00000000000000ull
int fk_is_fake_addr(uint64_t addr);

/* ---- core (fake_driver.c) ----------------------------------------------------------------- */

/* The state of one entry call between its prologue and epilogue. */
typedef struct fk_call {
  t4a_fake *f;
  CUresult result;
  int inject_after;
  CUresult inject_result;
} fk_call;

/* The prologue: takes the lock, counts the call, applies the injection rules and the
 * initialisation check. Returns 0 when the call must return c->result at once (lock released). */
int fk_enter(fk_call *c, int entry);
/* The epilogue: applies an after-enqueue injection and releases the lock. */
CUresult fk_leave(fk_call *c, CUresult r);
/* Counts a call that bypasses the prologue (cuGetErrorName, cuGetErrorString). */
void fk_count_only(int entry);

/* Fills the table with every entry (fake_entries.c). */
void fk_fill_table(t4a_driver_table *table);

void fk_lock(void);
void fk_unlock(void);
t4a_fake *fk_global(void);

/* Handle table. */
int fk_handle_new(t4a_fake *f, fk_obj *obj, fk_kind kind); /* 0: no memory */
void fk_handle_drop(t4a_fake *f, fk_obj *obj);
void *fk_handle_get(t4a_fake *f, uint64_t handle, fk_kind kind);
#define FK_H(ptr) ((uint64_t)(uintptr_t)(ptr))

const char *fk_error_name(CUresult r);
const char *fk_error_string(CUresult r);

/* ---- devices and contexts (fake_device.c) ------------------------------------------------- */

int fk_valid_device(t4a_fake *f, CUdevice dev);
/* The calling thread's current context handle (0 if none or from another fake). */
uint64_t fk_current_handle(t4a_fake *f);
/* The latest incarnation behind a primary-context handle (alive or destroyed), or NULL for a
 * handle that names no primary context. */
fk_ctx *fk_ctx_of_handle(t4a_fake *f, uint64_t handle);
/* The current context, which a call needs: INVALID_CONTEXT when none,
 * CONTEXT_IS_DESTROYED when it is a released primary context, else its sticky error, else
 * success. */
CUresult fk_need_current(t4a_fake *f, fk_ctx **out);
/* For calls that need no context: the current context's sticky error, if one is current. */
CUresult fk_current_sticky(t4a_fake *f);
/* A context's usability through an object made under it: INVALID_CONTEXT when that incarnation
 * was destroyed, else its sticky error. */
CUresult fk_ctx_usable(const fk_ctx *ctx);
/* A context named by a handle the caller passed: INVALID_CONTEXT for NULL, CONTEXT_IS_DESTROYED
 * when destroyed, else its sticky error. */
CUresult fk_ctx_handle_usable(const fk_ctx *ctx);
void fk_raise(fk_ctx *ctx, CUresult r);
/* Destroys a context: its queued work is dropped. With reclaim (cuDevicePrimaryCtxReset) its
 * streams, events, modules, memory and executable graphs are freed too; without, they stay as
 * leaks (still counted live). */
void fk_ctx_kill(t4a_fake *f, fk_ctx *ctx, int reclaim);
void fk_device_free_all(t4a_fake *f);
int fk_device_setup(t4a_fake *f);

/* ---- streams, events, engine (fake_stream.c) ---------------------------------------------- */

fk_stream *fk_stream_new(t4a_fake *f, fk_ctx *ctx, unsigned flags, int priority, int is_null);
void fk_stream_free(t4a_fake *f, fk_stream *s);
/* Resolves a stream for an enqueueing call: NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD name
 * the current context's default stream; the current context must be alive and be the stream's
 * (INVALID_CONTEXT); an unknown handle is INVALID_HANDLE; a sticky context returns its error. */
CUresult fk_stream_for_enqueue(t4a_fake *f, CUstream h, fk_stream **out);
/* Resolves a stream for a query or sync: no current context needed (except for NULL). */
CUresult fk_stream_lookup(t4a_fake *f, CUstream h, fk_stream **out);
/* Queues op on s, or adds it to s's capture graph. Takes op (frees it on failure). */
CUresult fk_submit(t4a_fake *f, fk_stream *s, fk_op *op);
int fk_args_init(fk_args *a, size_t num, size_t total); /* zero-filled; 0: no memory */
void fk_args_release(fk_args *a);
int fk_args_copy(fk_args *dst, const fk_args *src);
fk_op *fk_op_new(fk_op_kind kind);
void fk_op_free(t4a_fake *f, fk_op *op);
/* Deep copy (arguments duplicated; points referenced). NULL: no memory. */
fk_op *fk_op_clone(const fk_op *op);
void fk_op_release_payload(t4a_fake *f, fk_op *op);
int fk_op_copy_payload(fk_op *dst, const fk_op *src);
fk_point *fk_point_new(fk_stream *s);
void fk_point_unref(fk_point *p);
/* Drops every queued operation of s (markers complete, frees dropped). */
void fk_stream_discard(t4a_fake *f, fk_stream *s);
/* Runs s (and whatever it waits for) until its queue is empty. */
CUresult fk_drain_stream(t4a_fake *f, fk_stream *s);
/* Runs until p is done. */
CUresult fk_drain_point(t4a_fake *f, fk_point *p);
/* Drains every stream of ctx. */
CUresult fk_drain_ctx(t4a_fake *f, fk_ctx *ctx);
size_t fk_progress_all(t4a_fake *f);
void fk_reap_streams(t4a_fake *f);
/* Orders the next work of s after point p, which is done: at once when s is idle, else through
 * a wait operation (returned in *wait, NULL when none is needed). */
CUresult fk_after_done_point(t4a_fake *f, fk_stream *s, fk_point *p, fk_op **wait);

/* Vector clocks. Running out of memory turns the ordering checks off (f->vc_broken) rather than
 * reporting false violations. */
uint64_t fk_vc_at(const fk_vc *vc, size_t i);
void fk_vc_join(t4a_fake *f, fk_vc *dst, const fk_vc *src);
void fk_vc_free(fk_vc *vc);
/* The host observed that everything ordered before vc completed (a successful sync). */
void fk_host_observe(t4a_fake *f, const fk_vc *vc);
/* The host observed every stream of ctx drained. */
void fk_host_observe_ctx(t4a_fake *f, fk_ctx *ctx);
/* Counts an ordering violation and says what it was on stderr. */
void fk_violation(t4a_fake *f, const char *what, uint64_t addr);
void fk_hsnap_unref(fk_hsnap *h);
void fk_event_free(t4a_fake *f, fk_event *e);
/* Whether an unsafe call is prohibited by an active capture (mode rules); if so the captures
 * that prohibit it are invalidated and STREAM_CAPTURE_UNSUPPORTED is returned. */
CUresult fk_capture_check_unsafe(t4a_fake *f);
void fk_capture_invalidate(fk_stream *s);
void fk_capture_end_free(t4a_fake *f, fk_stream *s);

/* ---- memory (fake_memory.c) --------------------------------------------------------------- */

fk_pool *fk_pool_new(t4a_fake *f, int device, int is_default);
void fk_pool_free(t4a_fake *f, fk_pool *p);
void fk_alloc_free(t4a_fake *f, fk_alloc *a);
/* Memory for a module global of `bytes` on ctx's device, valid at once (zero-filled). */
CUresult fk_module_alloc(t4a_fake *f, fk_ctx *ctx, size_t bytes, fk_alloc **out);
void fk_pin_free(t4a_fake *f, fk_pin *p);
/* The host bytes behind [addr, addr + bytes) if it lies in one live range accessible from ctx's
 * device (kernel: stricter peer rules), else NULL. */
unsigned char *fk_resolve_device(t4a_fake *f, fk_ctx *ctx, uint64_t addr, size_t bytes, int write,
                                 int kernel);
void fk_run_copy(t4a_fake *f, fk_ctx *ctx, const fk_op *op);
void fk_run_fill(t4a_fake *f, fk_ctx *ctx, const fk_op *op);
void fk_run_free(t4a_fake *f, fk_ctx *ctx, const fk_op *op, int healthy);
/* A stream-ordered allocation's operation ran on f->exec: the block becomes valid. */
void fk_run_alloc(t4a_fake *f, const fk_op *op);
/* Sync points: pools above their release threshold shrink back to it. */
void fk_pools_trim_on_sync(t4a_fake *f);
void fk_memory_free_all(t4a_fake *f);
void fk_memory_reclaim_ctx(t4a_fake *f, fk_ctx *ctx);

/* ---- modules and launches (fake_module.c) ------------------------------------------------- */

void fk_module_free(t4a_fake *f, fk_module *m);
fk_kernel *fk_kernel_find(t4a_fake *f, const char *name);
void fk_kernels_free(t4a_fake *f);
/* Validates a launch and builds its op (kernel snapshot and arguments). */
CUresult fk_build_launch(t4a_fake *f, CUfunction func, const unsigned grid[3],
                         const unsigned block[3], unsigned shared, void **params, void **extra,
                         fk_ctx *ctx, fk_op **out);
void fk_run_kernel(t4a_fake *f, fk_ctx *ctx, const fk_op *op);

/* ---- graphs (fake_graph.c) ---------------------------------------------------------------- */

fk_graph *fk_graph_new(t4a_fake *f);
void fk_graph_free(t4a_fake *f, fk_graph *g);
/* Appends op as a new node (takes op; frees it on failure). *out (if not NULL) is the node. */
CUresult fk_graph_append(t4a_fake *f, fk_graph *g, fk_op *op, fk_node **out);
void fk_exec_free(t4a_fake *f, fk_exec *e);

/* ---- entry bodies: one per catalogue entry, same arguments after the fake --------------- */

CUresult fk_cuInit(t4a_fake *f, unsigned int flags);
CUresult fk_cuDriverGetVersion(t4a_fake *f, int *version);
CUresult fk_cuDeviceGet(t4a_fake *f, CUdevice *device, int ordinal);
CUresult fk_cuDeviceGetCount(t4a_fake *f, int *count);
CUresult fk_cuDeviceGetName(t4a_fake *f, char *name, int len, CUdevice dev);
CUresult fk_cuDeviceGetUuid(t4a_fake *f, CUuuid *uuid, CUdevice dev);
CUresult fk_cuDeviceGetAttribute(t4a_fake *f, int *pi, CUdevice_attribute attrib, CUdevice dev);
CUresult fk_cuDeviceTotalMem(t4a_fake *f, size_t *bytes, CUdevice dev);
CUresult fk_cuDeviceCanAccessPeer(t4a_fake *f, int *can, CUdevice dev, CUdevice peer);
CUresult fk_cuDevicePrimaryCtxRetain(t4a_fake *f, CUcontext *pctx, CUdevice dev);
CUresult fk_cuDevicePrimaryCtxRelease(t4a_fake *f, CUdevice dev);
CUresult fk_cuDevicePrimaryCtxReset(t4a_fake *f, CUdevice dev);
CUresult fk_cuDevicePrimaryCtxGetState(t4a_fake *f, CUdevice dev, unsigned int *flags,
                                       int *active);
CUresult fk_cuCtxGetCurrent(t4a_fake *f, CUcontext *pctx);
CUresult fk_cuCtxSetCurrent(t4a_fake *f, CUcontext ctx);
CUresult fk_cuCtxSynchronize(t4a_fake *f);
CUresult fk_cuCtxGetDevice(t4a_fake *f, CUdevice *device);
CUresult fk_cuCtxSetLimit(t4a_fake *f, CUlimit limit, size_t value);
CUresult fk_cuCtxGetLimit(t4a_fake *f, size_t *value, CUlimit limit);
CUresult fk_cuCtxResetPersistingL2Cache(t4a_fake *f);
CUresult fk_cuCtxEnablePeerAccess(t4a_fake *f, CUcontext peer, unsigned int flags);
CUresult fk_cuCtxGetStreamPriorityRange(t4a_fake *f, int *least, int *greatest);

CUresult fk_cuStreamCreate(t4a_fake *f, CUstream *ph, unsigned int flags);
CUresult fk_cuStreamCreateWithPriority(t4a_fake *f, CUstream *ph, unsigned int flags,
                                       int priority);
CUresult fk_cuStreamDestroy(t4a_fake *f, CUstream h);
CUresult fk_cuStreamSynchronize(t4a_fake *f, CUstream h);
CUresult fk_cuStreamQuery(t4a_fake *f, CUstream h);
CUresult fk_cuStreamWaitEvent(t4a_fake *f, CUstream h, CUevent e, unsigned int flags);
CUresult fk_cuStreamSetAttribute(t4a_fake *f, CUstream h, CUstreamAttrID attr,
                                 const CUstreamAttrValue *value);
CUresult fk_cuStreamGetCtx(t4a_fake *f, CUstream h, CUcontext *pctx);
CUresult fk_cuStreamGetFlags(t4a_fake *f, CUstream h, unsigned int *flags);
CUresult fk_cuStreamBeginCapture(t4a_fake *f, CUstream h, CUstreamCaptureMode mode);
CUresult fk_cuStreamEndCapture(t4a_fake *f, CUstream h, CUgraph *graph);
CUresult fk_cuStreamIsCapturing(t4a_fake *f, CUstream h, CUstreamCaptureStatus *status);
CUresult fk_cuStreamGetCaptureInfo(t4a_fake *f, CUstream h, CUstreamCaptureStatus *status,
                                   cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                   const CUgraphEdgeData **edges, size_t *num_deps);
CUresult fk_cuEventCreate(t4a_fake *f, CUevent *ph, unsigned int flags);
CUresult fk_cuEventDestroy(t4a_fake *f, CUevent e);
CUresult fk_cuEventRecord(t4a_fake *f, CUevent e, CUstream h);
CUresult fk_cuEventRecordWithFlags(t4a_fake *f, CUevent e, CUstream h, unsigned int flags);
/* A launch's op for an event node (FK_OP_EVENT_*_NODE of an executable graph) on stream s: a
 * RECORD that becomes the event's latest point, a WAIT on its latest point, or NULL with
 * *out_none = 1 when there is nothing to wait for. NULL with *out_none = 0: no memory or a
 * destroyed event (*out_result). */
fk_op *fk_event_node_op(t4a_fake *f, fk_stream *s, const fk_op *node, int *out_none,
                        CUresult *out_result);
CUresult fk_cuEventQuery(t4a_fake *f, CUevent e);
CUresult fk_cuEventSynchronize(t4a_fake *f, CUevent e);
CUresult fk_cuEventElapsedTime(t4a_fake *f, float *ms, CUevent start, CUevent end);

CUresult fk_cuMemPoolCreate(t4a_fake *f, CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult fk_cuMemPoolDestroy(t4a_fake *f, CUmemoryPool pool);
CUresult fk_cuMemPoolSetAttribute(t4a_fake *f, CUmemoryPool pool, CUmemPool_attribute attr,
                                  void *value);
CUresult fk_cuMemPoolGetAttribute(t4a_fake *f, CUmemoryPool pool, CUmemPool_attribute attr,
                                  void *value);
CUresult fk_cuMemPoolSetAccess(t4a_fake *f, CUmemoryPool pool, const CUmemAccessDesc *map,
                               size_t count);
CUresult fk_cuMemPoolTrimTo(t4a_fake *f, CUmemoryPool pool, size_t keep);
CUresult fk_cuMemAllocFromPoolAsync(t4a_fake *f, CUdeviceptr *dptr, size_t bytes,
                                    CUmemoryPool pool, CUstream h);
CUresult fk_cuMemAllocAsync(t4a_fake *f, CUdeviceptr *dptr, size_t bytes, CUstream h);
CUresult fk_cuMemFreeAsync(t4a_fake *f, CUdeviceptr ptr, CUstream h);
CUresult fk_cuMemAlloc(t4a_fake *f, CUdeviceptr *dptr, size_t bytes);
CUresult fk_cuMemFree(t4a_fake *f, CUdeviceptr ptr);
CUresult fk_cuMemGetInfo(t4a_fake *f, size_t *free_bytes, size_t *total_bytes);
CUresult fk_cuMemsetD8Async(t4a_fake *f, CUdeviceptr dst, unsigned char value, size_t n,
                            CUstream h);
CUresult fk_cuMemsetD16Async(t4a_fake *f, CUdeviceptr dst, unsigned short value, size_t n,
                             CUstream h);
CUresult fk_cuMemsetD32Async(t4a_fake *f, CUdeviceptr dst, unsigned int value, size_t n,
                             CUstream h);
CUresult fk_cuLaunchHostFunc(t4a_fake *f, CUstream h, CUhostFn fn, void *user);
/* Runs a host function's operation on a thread of its own and waits for it (lock held). */
void fk_run_host(t4a_fake *f, const fk_op *op);
/* Nonzero on the thread running a host function (its driver calls are refused). */
int fk_in_host_fn(void);
CUresult fk_cuMemcpyHtoDAsync(t4a_fake *f, CUdeviceptr dst, const void *src, size_t bytes,
                              CUstream h);
CUresult fk_cuMemcpyDtoHAsync(t4a_fake *f, void *dst, CUdeviceptr src, size_t bytes, CUstream h);
CUresult fk_cuMemcpyDtoDAsync(t4a_fake *f, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                              CUstream h);
CUresult fk_cuMemcpyPeerAsync(t4a_fake *f, CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                              CUcontext src_ctx, size_t bytes, CUstream h);
CUresult fk_cuMemcpyAsync(t4a_fake *f, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                          CUstream h);
CUresult fk_cuMemHostAlloc(t4a_fake *f, void **pp, size_t bytes, unsigned int flags);
CUresult fk_cuMemFreeHost(t4a_fake *f, void *p);
CUresult fk_cuMemHostGetDevicePointer(t4a_fake *f, CUdeviceptr *dptr, void *p,
                                      unsigned int flags);
CUresult fk_cuMemHostRegister(t4a_fake *f, void *p, size_t bytes, unsigned int flags);
CUresult fk_cuMemHostUnregister(t4a_fake *f, void *p);
CUresult fk_cuPointerGetAttribute(t4a_fake *f, void *data, CUpointer_attribute attr,
                                  CUdeviceptr ptr);

CUresult fk_cuModuleLoadData(t4a_fake *f, CUmodule *mod, const void *image);
CUresult fk_cuModuleLoadDataEx(t4a_fake *f, CUmodule *mod, const void *image,
                               unsigned int num_options, CUjit_option *options, void **values);
CUresult fk_cuModuleUnload(t4a_fake *f, CUmodule mod);
CUresult fk_cuModuleGetFunction(t4a_fake *f, CUfunction *func, CUmodule mod, const char *name);
CUresult fk_cuModuleGetGlobal(t4a_fake *f, CUdeviceptr *dptr, size_t *bytes, CUmodule mod,
                              const char *name);
CUresult fk_cuFuncGetAttribute(t4a_fake *f, int *pi, CUfunction_attribute attr, CUfunction func);
CUresult fk_cuFuncSetAttribute(t4a_fake *f, CUfunction func, CUfunction_attribute attr,
                               int value);
CUresult fk_cuFuncGetParamInfo(t4a_fake *f, CUfunction func, size_t index, size_t *offset,
                               size_t *size);
CUresult fk_cuLaunchKernel(t4a_fake *f, CUfunction func, unsigned gx, unsigned gy, unsigned gz,
                           unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream h,
                           void **params, void **extra);
CUresult fk_cuLaunchKernelEx(t4a_fake *f, const CUlaunchConfig *config, CUfunction func,
                             void **params, void **extra);

/* ---- occupancy and launch attributes (fake_occupancy.c) ----------------------------------- */

/* The function's attributes (fake_module.c): its registered kernel's (t4a_fake_set_kernel_attrs),
 * zero fields taking the defaults (32 registers, no static shared or local memory, 1,024
 * threads per block). */
t4a_fake_kernel_attrs fk_func_attrs(t4a_fake *f, const fk_func *fn);
/* Its current dynamic shared memory maximum: as raised, or 48 KiB less its static shared memory. */
int fk_func_max_dyn(t4a_fake *f, const fk_func *fn);
/* Resident blocks per SM for `threads` per block and `dyn` dynamic shared bytes (0 when one
 * block does not fit). */
int fk_blocks_per_sm(t4a_fake *f, const fk_func *fn, unsigned threads, size_t dyn);
/* The largest cluster the function can launch with (block, dyn), as
 * cuOccupancyMaxPotentialClusterSize answers. */
int fk_max_cluster(t4a_fake *f, const fk_func *fn, unsigned threads, size_t dyn);
/* Reads cuLaunchKernelEx's attributes and checks them against the device's and the function's
 * limits (the driver's rules: cooperative grid resident at once, cluster dims dividing the grid,
 * the portable size 8 unless the function allows non-portable sizes, 16 at most). */
CUresult fk_launch_attrs_read(t4a_fake *f, const CUlaunchConfig *config, CUfunction func,
                              fk_launch_attrs *out);
CUresult fk_cuOccupancyMaxActiveBlocksPerMultiprocessor(t4a_fake *f, int *num, CUfunction func,
                                                        int block, size_t dyn);
CUresult fk_cuOccupancyMaxPotentialBlockSize(t4a_fake *f, int *min_grid, int *block,
                                             CUfunction func, CUoccupancyB2DSize to_dyn,
                                             size_t dyn, int limit);
CUresult fk_cuOccupancyMaxPotentialClusterSize(t4a_fake *f, int *size, CUfunction func,
                                               const CUlaunchConfig *config);

CUresult fk_cuGraphCreate(t4a_fake *f, CUgraph *graph, unsigned int flags);
CUresult fk_cuGraphAddKernelNode(t4a_fake *f, CUgraphNode *node, CUgraph graph,
                                 const CUgraphNode *deps, size_t num_deps,
                                 const CUDA_KERNEL_NODE_PARAMS *params);
CUresult fk_cuGraphInstantiateWithFlags(t4a_fake *f, CUgraphExec *exec, CUgraph graph,
                                        unsigned long long flags);
CUresult fk_cuGraphLaunch(t4a_fake *f, CUgraphExec exec, CUstream h);
CUresult fk_cuGraphUpload(t4a_fake *f, CUgraphExec exec, CUstream h);
CUresult fk_cuGraphDestroy(t4a_fake *f, CUgraph graph);
CUresult fk_cuGraphExecDestroy(t4a_fake *f, CUgraphExec exec);
CUresult fk_cuGraphExecUpdate(t4a_fake *f, CUgraphExec exec, CUgraph graph,
                              CUgraphExecUpdateResultInfo *info);
CUresult fk_cuGraphExecKernelNodeSetParams(t4a_fake *f, CUgraphExec exec, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *params);
CUresult fk_cuGraphExecMemsetNodeSetParams(t4a_fake *f, CUgraphExec exec, CUgraphNode node,
                                           const CUDA_MEMSET_NODE_PARAMS *params, CUcontext ctx);
CUresult fk_cuGraphGetNodes(t4a_fake *f, CUgraph graph, CUgraphNode *nodes, size_t *num);

#endif /* T4A_TESTING_FAKE_INTERNAL_H_ */
