/* Launch chains: a recording on the retire's capture mode, instantiated once, replayed with its
 * rebound kernel nodes updated in place. See t4a/chain.h.
 *
 * Locking: a chain's mutable state (its current core, the nodes' generations and buffers, its
 * figures) is guarded by its table's lock, which every replay, update and destroy takes before
 * the retire's operation lock (the table's order). A core is refcounted: the chain holds one
 * reference and every replay's epoch one (borrowed, so a warm replay does no counting); its last
 * release never touches the table (it may run inside another admission's retirement). */
#define _GNU_SOURCE
#include "t4a/chain.h"
#include "t4a/memset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_retire/retire_internal.h"

/* One recorded fire of the table's descriptors: its kernel node in the captured graph (and so in
 * the executable graph), the descriptor, and its bind generation the node's parameters reflect.
 * The node's buffers are the descriptor's (it holds them); a rebind of a descriptor that chains
 * name hands the buffer it replaces to the lane's open epoch (the table's hold_buffers hook), and
 * destroying a chain hands its descriptors' current buffers there, so queued replays never
 * outlive what they read. */
typedef struct chain_node {
  CUgraphNode node;
  t4a_launch_desc_ *d; /* stable: unregister is refused while chain_nodes > 0 */
  uint64_t gen;
} chain_node;

/* One fill recorded with t4a_chain_memset: its memset node, what it fills, the value the
 * executable graph's node has and the one the next replay must give it. */
typedef struct chain_memset {
  CUgraphNode node;
  CUdeviceptr dst;
  size_t count;
  unsigned elem;
  uint32_t applied, want;
} chain_memset;

struct t4a_chain_rec_ {
  chain_node *nodes;
  uint32_t num, cap;
  chain_memset *memsets;
  uint32_t num_memsets, cap_memsets;
  t4a_status failed; /* the first failure to record a fire (its detail in `error`) */
  t4a_error error;
  uint64_t capture_seq; /* the retire's capture this recording is (t4a_retire_capture_seq) */
};

/* What one recording produced: the graphs, the gathered references and the nodes. */
typedef struct core {
  atomic_int refs;
  t4a_lane *lane; /* a reference */
  CUgraph graph;
  CUgraphExec exec;
  t4a_keepalive *items;
  size_t count;
  chain_node *nodes;
  uint32_t num_nodes;
  chain_memset *memsets;
  uint32_t num_memsets;
  int memsets_dirty; /* some memset's want differs from applied (table lock) */
} core;

struct t4a_chain {
  t4a_launch_table *table; /* borrowed */
  core *cur;               /* a reference */
  uint64_t seen_binds;     /* the table's binds when every node was last brought up to date;
                              NEVER_SEEN after a recording (a descriptor may have been rebound
                              after its recorded fire: the first replay looks at every node) */
  uint64_t replays, node_updates, reinstantiations, memset_updates;
};

#define NEVER_SEEN UINT64_MAX

/* ---- nodes and recordings ------------------------------------------------------------------ */

/* Table lock held: the nodes no longer name their descriptors. */
static void unpin_descriptors(const chain_node *nodes, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) nodes[i].d->chain_nodes--;
}

static void note_fire(t4a_launch_table *t, t4a_launch_desc_ *d) {
  t4a_chain_rec_ *rec = t->rec;
  if (rec == NULL || rec->failed != T4A_OK) return;
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_status st = d->graph.node_status;
  if (st == T4A_OK && t4a_retire_capture_seq(t->retire) != rec->capture_seq) {
    /* The recording's capture was ended (t4a_graph_capture_end, say) and another began: this
     * node belongs to another graph. */
    st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                        "a fire during a chain recording was captured into another capture (the "
                        "chain's was ended by another call)");
  }
  if (st == T4A_OK && rec->num == rec->cap) {
    uint32_t cap = rec->cap ? rec->cap * 2 : 16;
    chain_node *v = t4a_host_realloc(rec->nodes, (size_t)cap * sizeof *v);
    if (v == NULL) {
      st = t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, NULL, 0, NULL, 0,
                          "cannot grow a chain recording to %u fires", cap);
    } else {
      rec->nodes = v;
      rec->cap = cap;
    }
  }
  if (st != T4A_OK) {
    /* The error detail of the failure (set by the enqueue or just now) is the recording's. */
    rec->failed = st;
    t4a_error_last(&rec->error);
    t4a_error_restore(&saved);
    return;
  }
  rec->nodes[rec->num++] = (chain_node){d->graph.captured_node, d, d->bind_gen};
  d->chain_nodes++;
}

/* Table lock held: detaches the recording (its nodes released by rec_free, unlocked). */
static t4a_chain_rec_ *rec_detach(t4a_launch_table *t) {
  t4a_chain_rec_ *rec = t->rec;
  t->rec = NULL;
  if (rec != NULL) unpin_descriptors(rec->nodes, rec->num);
  return rec;
}

static void rec_free(t4a_chain_rec_ *rec) {
  if (rec == NULL) return;
  free(rec->memsets);
  free(rec->nodes);
  free(rec);
}


/* ---- cores --------------------------------------------------------------------------------- */

static void core_retain(void *p) { atomic_fetch_add_explicit(&((core *)p)->refs, 1, memory_order_relaxed); }

static void core_unref(void *p) {
  core *k = p;
  if (k == NULL || atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  /* Every replay of this core completed (each held a reference); the driver would finish queued
   * launches of the executable graph before freeing it anyway. */
  t4a_launch_destroy_native_(k->lane, k->graph, k->exec);
  free(k->nodes);
  free(k->memsets);
  t4a_launch_release_kept_(k->lane, k->items, k->count);
  t4a_lane_release(k->lane);
  free(k);
  t4a_error_restore(&saved);
}

/* Ends the capture and builds a core from it and the recording (table lock held; the recording
 * is detached in every case but a wrong-thread end, which leaves everything as it was). On
 * failure what was gathered is handed back through *out_drop_* for release after the unlock. */
typedef struct dropped {
  t4a_chain_rec_ *rec;
  t4a_keepalive *items;
  size_t count;
  CUgraph graph;
} dropped;

static t4a_status end_recording(t4a_launch_table *t, core **out, dropped *drop) {
  *out = NULL;
  memset(drop, 0, sizeof *drop);
  t4a_lane *lane = t4a_retire_lane(t->retire);
  void *graph = NULL;
  t4a_keepalive *items = NULL;
  size_t count = 0;
  if (t4a_retire_capture_seq(t->retire) != t->rec->capture_seq) {
    /* The chain's capture was ended by another call and another capture began (or none is
     * open): that one is not the chain's to end. The recording is dropped. */
    drop->rec = rec_detach(t);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the chain's capture was ended by another call (t4a_graph_capture_end?) "
                          "before t4a_chain_end");
  }
  t4a_status st = t4a_retire_capture_end(t->retire, &graph, &items, &count);
  if (st != T4A_OK && t4a_retire_is_capturing(t->retire)) return st; /* still open */
  t4a_chain_rec_ *rec = t->rec;
  drop->rec = rec_detach(t);
  drop->items = items;
  drop->count = count;
  drop->graph = (CUgraph)graph;
  if (st != T4A_OK) return st;
  if (rec->failed != T4A_OK) {
    t4a_error_restore(&rec->error);
    return rec->failed;
  }
  core *k = t4a_host_calloc(1, sizeof *k);
  if (k == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_ctx_scope scope;
  st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane));
  if (st == T4A_OK) {
    st = T4A_CU(t4a_lane_driver(lane), cuGraphInstantiateWithFlags, &k->exec, (CUgraph)graph, 0);
    t4a_ctx_scope_exit_quiet(&scope);
  }
  st = t4a_lane_note_(lane, st);
  if (st != T4A_OK) {
    free(k);
    return st;
  }
  atomic_init(&k->refs, 1);
  k->lane = lane;
  t4a_lane_retain(lane);
  k->graph = (CUgraph)graph;
  k->items = items;
  k->count = count;
  k->nodes = rec->nodes;
  k->num_nodes = rec->num;
  for (uint32_t i = 0; i < rec->num; i++) rec->nodes[i].d->chain_nodes++; /* the core's now */
  rec->nodes = NULL;
  rec->num = 0;
  k->memsets = rec->memsets;
  k->num_memsets = rec->num_memsets;
  rec->memsets = NULL;
  rec->num_memsets = 0;
  memset(drop, 0, sizeof *drop);
  drop->rec = rec; /* the empty shell */
  *out = k;
  return T4A_OK;
}

static void drop_release(t4a_lane *lane, dropped *drop) {
  t4a_error saved;
  t4a_error_last(&saved);
  if (drop->graph != NULL) t4a_launch_destroy_native_(lane, drop->graph, NULL);
  /* never instantiated: that work cannot run */
  t4a_launch_release_kept_(lane, drop->items, drop->count);
  rec_free(drop->rec);
  t4a_error_restore(&saved);
}

/* The table is being destroyed with a recording open: the recording's references go, and the
 * capture is ended and its work dropped when this thread began it (another thread's capture is
 * left to that thread or to the retire's teardown, as documented). */
static void drop_recording(t4a_launch_table *t) {
  t4a_chain_rec_ *rec = t->rec;
  if (rec == NULL) return;
  t4a_error saved;
  t4a_error_last(&saved);
  dropped drop;
  memset(&drop, 0, sizeof drop);
  if (t4a_retire_is_capturing(t->retire) &&
      t4a_retire_capture_seq(t->retire) == rec->capture_seq) {
    void *graph = NULL;
    if (t4a_retire_capture_end(t->retire, &graph, &drop.items, &drop.count) == T4A_OK) {
      drop.graph = (CUgraph)graph;
    }
  }
  drop.rec = rec_detach(t);
  drop_release(t4a_retire_lane(t->retire), &drop);
  t4a_error_restore(&saved);
}

static void hold_buffers(t4a_launch_table *t, t4a_buffer *const *bufs, uint32_t n);

/* What the table calls back: registered by t4a_chain_begin. */
static const t4a_launch_table_observer_ chain_observer = {note_fire, hold_buffers, drop_recording};

/* ---- public -------------------------------------------------------------------------------- */

t4a_status t4a_chain_begin(t4a_launch_table *t) {
  if (t == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  if (t4a_lane_driver(t4a_retire_lane(t->retire))->t.cuStreamGetCaptureInfo == NULL) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuStreamGetCaptureInfo", 0, NULL, 0,
                          "launch chains need cuStreamGetCaptureInfo (driver 12.3 or newer)");
  }
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  if (t->rec != NULL) {
    t4a_oplock_unlock_(&t->lock);
    return t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0, "a chain is being recorded on this table");
  }
  t4a_chain_rec_ *rec = t4a_host_calloc(1, sizeof *rec);
  if (rec == NULL) {
    t4a_oplock_unlock_(&t->lock);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  st = t4a_retire_capture_begin(t->retire);
  if (st == T4A_OK) {
    rec->capture_seq = t4a_retire_capture_seq(t->retire);
    t->observer = &chain_observer;
    t->rec = rec;
    rec = NULL;
  }
  t4a_oplock_unlock_(&t->lock);
  free(rec);
  return st;
}

t4a_status t4a_chain_end(t4a_launch_table *t, t4a_chain **out) {
  if (out != NULL) *out = NULL;
  if (t == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table or out is NULL");
  }
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  if (t->rec == NULL) {
    t4a_oplock_unlock_(&t->lock);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "no chain is being recorded on this table");
  }
  t4a_chain *c = t4a_host_calloc(1, sizeof *c);
  core *k = NULL;
  dropped drop;
  if (c == NULL) {
    /* The recording must still end, its work dropped. */
    t4a_error saved;
    t4a_error_last(&saved);
    (void)end_recording(t, &k, &drop);
    t4a_error_restore(&saved);
    st = T4A_HOST_OUT_OF_MEMORY;
  } else {
    st = end_recording(t, &k, &drop);
  }
  if (k != NULL && st != T4A_OK) {
    unpin_descriptors(k->nodes, k->num_nodes);
  } else if (k != NULL) {
    c->table = t;
    c->cur = k;
    c->seen_binds = NEVER_SEEN;
    t->chains++;
    *out = c;
    c = NULL;
  }
  t4a_oplock_unlock_(&t->lock);
  if (k != NULL && st != T4A_OK) core_unref(k);
  drop_release(t4a_retire_lane(t->retire), &drop);
  free(c);
  return st;
}

t4a_status t4a_chain_end_update(t4a_launch_table *t, t4a_chain *c) {
  if (t == NULL || c == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table or chain is NULL");
  }
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  if (t->rec == NULL) {
    t4a_oplock_unlock_(&t->lock);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "no chain is being recorded on this table");
  }
  core *k = NULL, *old = NULL;
  dropped drop;
  st = end_recording(t, &k, &drop);
  if (st == T4A_OK && c->table != t) {
    unpin_descriptors(k->nodes, k->num_nodes);
    old = k; /* dropped below */
    st = t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                        "the chain was recorded on another descriptor table");
  } else if (st == T4A_OK) {
    old = c->cur;
    unpin_descriptors(old->nodes, old->num_nodes);
    c->cur = k;
    c->seen_binds = NEVER_SEEN;
    c->reinstantiations++;
  }
  t4a_oplock_unlock_(&t->lock);
  /* Queued replays of the old core hold their own references. */
  core_unref(old);
  drop_release(t4a_retire_lane(t->retire), &drop);
  if (st == T4A_OK) {
    t4a_counter_add(t4a_lane_counters(t4a_retire_lane(t->retire)),
                    T4A_COUNTER_chain_reinstantiations, 1);
  }
  return st;
}

/* Brings every rebound node of the core up to date (lock held, inside the admission, context
 * current). The buffers the nodes named before were handed to the epoch at their rebind. */
static t4a_status update_nodes(t4a_chain *c, t4a_driver *drv, uint64_t *out_updates) {
  core *k = c->cur;
  for (uint32_t i = 0; i < k->num_nodes; i++) {
    chain_node *n = &k->nodes[i];
    t4a_launch_desc_ *d = n->d;
    if (d->bind_gen == n->gen) continue;
    CUDA_KERNEL_NODE_PARAMS p;
    t4a_launch_node_params_(d->fn, &d->cfg, d->num_params > 0 ? d->ptrs : NULL, &p);
    t4a_status st = T4A_CU(drv, cuGraphExecKernelNodeSetParams, k->exec, n->node, &p);
    if (st != T4A_OK) return st;
    n->gen = d->bind_gen;
    (*out_updates)++;
  }
  return T4A_OK;
}

/* Gives every memset node whose wanted value changed that value (lock held, inside the
 * admission, context current). */
static t4a_status update_memsets(core *k, t4a_driver *drv, t4a_lane *lane, uint64_t *out_updates) {
  CUcontext ctx = t4a_ctx_holder_native(t4a_lane_holder(lane));
  for (uint32_t i = 0; i < k->num_memsets; i++) {
    chain_memset *m = &k->memsets[i];
    if (m->want == m->applied) continue;
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.dst = m->dst;
    p.pitch = 0;
    p.value = m->want;
    p.elementSize = m->elem;
    p.width = m->count;
    p.height = 1;
    t4a_status st = T4A_CU(drv, cuGraphExecMemsetNodeSetParams, k->exec, m->node, &p, ctx);
    if (st != T4A_OK) return st;
    m->applied = m->want;
    (*out_updates)++;
  }
  k->memsets_dirty = 0;
  return T4A_OK;
}

t4a_status t4a_chain_replay(t4a_launch_table *t, t4a_chain *c) {
  if (t == NULL || c == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table or chain is NULL");
  }
  if (c->table != t) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the chain was recorded on another descriptor table (domain %llu, not "
                          "%llu)",
                          (unsigned long long)c->table->domain, (unsigned long long)t->domain);
  }
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  core *k = c->cur;
  int stale = c->seen_binds != t->binds;
  t4a_admission adm;
  st = t4a_admission_begin(t->retire, 1, &adm);
  if (st != T4A_OK) {
    t4a_oplock_unlock_(&t->lock);
    return st;
  }
  t4a_lane *lane = t4a_retire_lane(t->retire);
  t4a_driver *drv = t4a_lane_driver(lane);
  if (t4a_lane_is_capturing(lane)) {
    t4a_oplock_unlock_(&t->lock);
    return t4a_admission_abort(
        &adm, t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                             "the lane's stream is capturing: replay the chain after the capture"));
  }
  uint64_t updates = 0;
  if (stale) {
    st = update_nodes(c, drv, &updates);
    c->node_updates += updates;
    t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_chain_node_updates, updates);
    if (st != T4A_OK) {
      /* Nothing launched; the nodes updated so far stay updated, the others are retried by the
       * next replay. */
      t4a_oplock_unlock_(&t->lock);
      return t4a_admission_abort(&adm, st);
    }
    c->seen_binds = t->binds;
  }
  if (k->memsets_dirty) {
    uint64_t n = 0;
    st = update_memsets(k, drv, lane, &n);
    c->memset_updates += n;
    t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_chain_memset_updates, n);
    if (st != T4A_OK) {
      t4a_oplock_unlock_(&t->lock);
      return t4a_admission_abort(&adm, st); /* nothing launched; the rest retried next time */
    }
  }
  /* If it must be leaked, the core stands for its two graphs and every reference it holds. */
  t4a_keepalive kk = {k, core_unref, (uint32_t)(2 + k->count)};
  CUresult r = drv->t.cuGraphLaunch(k->exec, t4a_lane_stream(lane));
  if (T4A_UNLIKELY(r != CUDA_SUCCESS)) {
    st = t4a_cu_fail(drv, r, "cuGraphLaunch", 0);
    if (!t4a_launch_refused_before_enqueue_(r)) {
      /* The replay may be queued: the core is quarantined, held for good. */
      core_retain(k);
      t4a_oplock_unlock_(&t->lock);
      return t4a_admission_fail(&adm, st, &kk, 1);
    }
    t4a_oplock_unlock_(&t->lock);
    return t4a_admission_abort(&adm, st);
  }
  /* The core lives until this replay completed; the epoch takes its own reference only when it
   * does not hold this core yet (the chain's reference covers it meanwhile, under the lock). */
  t4a_admission_keep_borrowed(&adm, kk, core_retain);
  c->replays++;
  t4a_oplock_unlock_(&t->lock);
  t4a_admission_commit(&adm);
  t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_chain_replays, 1);
  return T4A_OK;
}

void t4a_chain_stats(t4a_chain *c, struct t4a_chain_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  /* Inside an admission of the runtime the table's lock could deadlock: all zero. */
  if (c == NULL || t4a_retire_lock_would_invert_(c->table->retire)) return;
  t4a_oplock_lock_(&c->table->lock);
  out->kernel_nodes = c->cur->num_nodes;
  out->keepalives = (uint32_t)c->cur->count;
  out->replays = c->replays;
  out->node_updates = c->node_updates;
  out->reinstantiations = c->reinstantiations;
  out->memset_nodes = c->cur->num_memsets;
  out->memset_updates = c->memset_updates;
  t4a_oplock_unlock_(&c->table->lock);
}

static void buffer_retain_object(void *b) { t4a_buffer_retain(b); }

/* The buffers of nodes[0..num_nodes) (their descriptors' current ones), each visited once per
 * node parameter; with `distinct`, only the first occurrence of each buffer. */
typedef void (*visit_fn)(t4a_buffer *b, void *user);
static void visit_buffers(const chain_node *nodes, uint32_t num_nodes, int distinct, visit_fn fn,
                          void *user) {
  for (uint32_t i = 0; i < num_nodes; i++) {
    const t4a_launch_desc_ *d = nodes[i].d;
    for (uint32_t j = 0; j < d->num_params; j++) {
      t4a_buffer *b = d->bufs[j];
      if (b == NULL) continue;
      int seen = 0;
      /* Earlier occurrences (only on the failure path: quadratic, no allocation). */
      for (uint32_t pi = 0; distinct && !seen && pi <= i; pi++) {
        const t4a_launch_desc_ *pd = nodes[pi].d;
        uint32_t end = pi == i ? j : pd->num_params;
        for (uint32_t pj = 0; pj < end && !seen; pj++) seen = pd->bufs[pj] == b;
      }
      if (!seen) fn(b, user);
    }
  }
}

static void keep_buffer(t4a_buffer *b, void *user) {
  t4a_admission_keep_borrowed(
      user, (t4a_keepalive){.object = b, .release = t4a_buffer_release_object_},
      buffer_retain_object);
}

static void leak_buffer(t4a_buffer *b, void *user) {
  t4a_buffer_retain(b);
  t4a_counter_add(user, T4A_COUNTER_leaked, 1);
}

/* Hands the buffers the nodes read to the lane's open epoch (see hold_buffers). */
static void hold_node_buffers(t4a_launch_table *t, const chain_node *nodes, uint32_t num_nodes) {
  uint32_t live = 0;
  for (uint32_t i = 0; i < num_nodes; i++) {
    for (uint32_t j = 0; j < nodes[i].d->num_params; j++) live += nodes[i].d->bufs[j] != NULL;
  }
  if (live == 0) return;
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_admission adm;
  if (t4a_admission_begin(t->retire, live, &adm) != T4A_OK) {
    /* Replays that read them may be queued, and no epoch can be made to cover them: held for
     * good and counted (once per buffer), never released on a guess. */
    visit_buffers(nodes, num_nodes, 1, leak_buffer,
                  t4a_lane_counters(t4a_retire_lane(t->retire)));
  } else {
    visit_buffers(nodes, num_nodes, 0, keep_buffer, &adm);
    (void)t4a_admission_abort(&adm, T4A_OK); /* nothing enqueued: the epoch keeps them */
  }
  t4a_error_restore(&saved);
}

static void hold_buffers(t4a_launch_table *t, t4a_buffer *const *bufs, uint32_t n) {
  /* As the parameters of one pseudo-descriptor. */
  t4a_launch_desc_ d;
  memset(&d, 0, sizeof d);
  d.bufs = (t4a_buffer **)(uintptr_t)bufs;
  d.num_params = n;
  chain_node node = {NULL, &d, 0};
  hold_node_buffers(t, &node, 1);
}

void t4a_chain_destroy(t4a_chain *c) {
  if (c == NULL) return;
  t4a_launch_table *t = c->table;
  if (t4a_retire_lock_would_invert_(t->retire)) {
    /* Inside an admission of the runtime (a raw scope's callback), or of one ordered after it:
     * the table's lock could deadlock against a fire waiting for that admission, and the
     * hand-over of the buffers needs an admission of its own. The chain is kept for good
     * (counted), as REENTRY would leave it. */
    t4a_counter_add(t4a_lane_counters(t4a_retire_lane(t->retire)), T4A_COUNTER_leaked, 1);
    return;
  }
  t4a_oplock_lock_(&t->lock);
  core *k = c->cur;
  /* Queued replays read the descriptors' current buffers: the epoch keeps them, so the
   * descriptors may be unregistered and their buffers dropped at once. */
  hold_node_buffers(t, k->nodes, k->num_nodes);
  unpin_descriptors(k->nodes, k->num_nodes);
  t->chains--;
  t4a_oplock_unlock_(&t->lock);
  core_unref(k); /* queued replays hold their own references */
  free(c);
}

/* ---- memset nodes (t4a/memset.h) ------------------------------------------------------------ */

/* Table lock held: the recording fails with this thread's current detail. */
static void rec_fail(t4a_chain_rec_ *rec, t4a_status st) {
  if (rec->failed != T4A_OK) return;
  rec->failed = st;
  t4a_error_last(&rec->error);
}

t4a_status t4a_chain_memset(t4a_launch_table *t, t4a_buffer *buffer, size_t offset, size_t count,
                            unsigned elem_bytes, uint32_t value, uint32_t *out_id) {
  if (out_id != NULL) *out_id = 0;
  if (t == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  t4a_chain_rec_ *rec = t->rec;
  if (rec == NULL) {
    t4a_oplock_unlock_(&t->lock);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "no chain is being recorded on this table (t4a_memset fills outside "
                          "chains)");
  }
  if (rec->num_memsets == rec->cap_memsets) {
    uint32_t cap = rec->cap_memsets ? rec->cap_memsets * 2 : 8;
    chain_memset *v = t4a_host_realloc(rec->memsets, (size_t)cap * sizeof *v);
    if (v == NULL) { /* refused before anything was enqueued: the recording goes on */
      t4a_oplock_unlock_(&t->lock);
      return T4A_HOST_OUT_OF_MEMORY;
    }
    rec->memsets = v;
    rec->cap_memsets = cap;
  }
  CUgraphNode node = NULL;
  t4a_status node_st = T4A_OK;
  st = t4a_memset_enqueue_(t->retire, buffer, offset, count, elem_bytes, value, &node, &node_st);
  if (st == T4A_OK && node_st == T4A_OK &&
      t4a_retire_capture_seq(t->retire) != rec->capture_seq) {
    node_st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                             "a memset during a chain recording was captured into another capture "
                             "(the chain's was ended by another call)");
  }
  if (st == T4A_OK && node_st != T4A_OK) {
    rec_fail(rec, node_st); /* a node the chain cannot update: t4a_chain_end fails */
  } else if (st == T4A_OK) {
    uint32_t id = rec->num_memsets++;
    rec->memsets[id] = (chain_memset){node, (CUdeviceptr)t4a_buffer_devptr(buffer) + offset,
                                      count, elem_bytes, value, value};
    if (out_id != NULL) *out_id = id;
  } else if (st != T4A_INVALID_ARGUMENT && st != T4A_FOREIGN_HANDLE && st != T4A_REENTRY) {
    /* A driver failure: the fill may be in the capture without the chain knowing its node. */
    t4a_error saved;
    t4a_error_last(&saved);
    rec_fail(rec, st);
    t4a_error_restore(&saved);
  }
  t4a_oplock_unlock_(&t->lock);
  return st;
}

t4a_status t4a_chain_set_memset(t4a_chain *c, uint32_t id, uint32_t value) {
  if (c == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "chain is NULL");
  t4a_status st = t4a_launch_table_lock_(c->table);
  if (st != T4A_OK) return st;
  core *k = c->cur;
  if (id >= k->num_memsets) {
    t4a_oplock_unlock_(&c->table->lock);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the chain has %u memsets: no memset %u", k->num_memsets, id);
  }
  chain_memset *m = &k->memsets[id];
  if (m->elem < 4 && (value >> (8 * m->elem)) != 0) {
    t4a_oplock_unlock_(&c->table->lock);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "value 0x%x does not fit memset %u's %u-byte element", value, id,
                          m->elem);
  }
  m->want = value;
  if (m->want != m->applied) k->memsets_dirty = 1;
  t4a_oplock_unlock_(&c->table->lock);
  return T4A_OK;
}
