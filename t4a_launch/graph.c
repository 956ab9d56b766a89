/* CUDA graphs captured from a runtime's stream. See t4a/graph.h. */
#define _GNU_SOURCE
#include "t4a/graph.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_retire/retire_internal.h"

/* What one capture referenced: the captured CUgraph and the keepalives of its work. Replays keep
 * the version they ran alive through the lane's epochs; the graph holds its current one. */
typedef struct version {
  atomic_int refs;
  t4a_lane *lane; /* a reference */
  CUgraph graph;
  t4a_keepalive *items;
  size_t count;
} version;

struct t4a_graph {
  atomic_int refs;
  /* exec and current change only under this lock AND inside an admission of `retire`: replays
   * (admissions) read them without the lock, other readers take it. */
  pthread_mutex_t lock;
  t4a_retire *retire;   /* borrowed */
  t4a_lane *lane;       /* a reference */
  t4a_driver *driver;   /* borrowed from the lane */
  CUgraphExec exec;
  version *current; /* a reference */
};

void t4a_launch_release_kept_(t4a_lane *lane, t4a_keepalive *items, size_t n) {
  for (size_t i = 0; i < n; i++) items[i].release(items[i].object);
  free(items);
  if (n > 0) t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_keepalives_released, n);
}

/* An executable graph whose destruction waits for the end of a capture of its lane. */
typedef struct pending_exec {
  t4a_lane *lane; /* a reference */
  CUgraphExec exec;
} pending_exec;
static void destroy_pending_exec(void *p) {
  pending_exec *pe = p;
  t4a_launch_destroy_native_(pe->lane, NULL, pe->exec);
  t4a_lane_release(pe->lane);
  free(pe);
}

void t4a_launch_destroy_native_(t4a_lane *lane, CUgraph graph, CUgraphExec exec) {
  if (graph == NULL && exec == NULL) return;
  if (exec != NULL && t4a_lane_capture_blocks_drops_(lane)) {
    /* cuGraphExecDestroy during a capture of the lane's stream, or of any stream on this thread,
     * would break it (measured on the H200): once the capture ended. (cuGraphDestroy is harmless
     * then.) */
    t4a_error saved;
    t4a_error_last(&saved);
    pending_exec *pe = t4a_host_malloc(sizeof *pe);
    t4a_error_restore(&saved);
    int deferred = -1;
    if (pe != NULL) {
      pe->lane = lane;
      t4a_lane_retain(lane);
      pe->exec = exec;
      deferred = t4a_lane_defer_capture_(lane, destroy_pending_exec, pe);
      if (deferred != 1) {
        t4a_lane_release(lane);
        free(pe);
      }
    }
    if (deferred == 1) {
      exec = NULL;
    } else if (deferred < 0) {
      t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_leaked, 1);
      exec = NULL;
    }
    if (graph == NULL && exec == NULL) return;
  }
  t4a_driver *d = t4a_lane_driver(lane);
  t4a_counters *c = t4a_lane_counters(lane);
  t4a_ctx_scope scope;
  uint64_t leaked = (graph != NULL) + (exec != NULL);
  if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), c) == T4A_OK) {
    leaked = 0;
    /* The driver finishes queued replays of an executable graph before freeing it. */
    if (exec != NULL && T4A_CU_QUIET(d, cuGraphExecDestroy, exec) != T4A_OK) leaked++;
    if (graph != NULL && T4A_CU_QUIET(d, cuGraphDestroy, graph) != T4A_OK) leaked++;
    t4a_ctx_scope_exit_quiet(&scope);
  }
  t4a_counter_add(c, T4A_COUNTER_leaked, leaked);
}

static void version_retain(void *p) {
  atomic_fetch_add_explicit(&((version *)p)->refs, 1, memory_order_relaxed);
}

static void version_unref(void *p) {
  version *v = p;
  if (v == NULL || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_launch_destroy_native_(v->lane, v->graph, NULL);
  /* Every replay of this version completed (each held a reference): its work is done. */
  t4a_launch_release_kept_(v->lane, v->items, v->count);
  t4a_lane_release(v->lane);
  free(v);
  t4a_error_restore(&saved);
}

/* Ends the retire's capture: a new version (references handed over) or a failure. */
static t4a_status end_capture(t4a_retire *retire, version **out) {
  *out = NULL;
  void *graph = NULL;
  t4a_keepalive *items = NULL;
  size_t count = 0;
  t4a_status st = t4a_retire_capture_end(retire, &graph, &items, &count);
  if (st != T4A_OK) return st;
  version *v = t4a_host_calloc(1, sizeof *v);
  if (v == NULL) {
    t4a_lane *lane = t4a_retire_lane(retire);
    t4a_launch_destroy_native_(lane, (CUgraph)graph, NULL);
    /* never instantiated: the captured work cannot run */
    t4a_launch_release_kept_(lane, items, count);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  atomic_init(&v->refs, 1);
  v->lane = t4a_retire_lane(retire);
  t4a_lane_retain(v->lane);
  v->graph = (CUgraph)graph;
  v->items = items;
  v->count = count;
  *out = v;
  return T4A_OK;
}

static t4a_status instantiate(t4a_lane *lane, CUgraph graph, CUgraphExec *out) {
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), t4a_lane_counters(lane));
  if (st != T4A_OK) return st;
  st = T4A_CU(t4a_lane_driver(lane), cuGraphInstantiateWithFlags, out, graph, 0);
  t4a_ctx_scope_exit_quiet(&scope);
  return t4a_lane_note_(lane, st);
}

t4a_status t4a_graph_capture_begin(t4a_retire *retire) {
  return t4a_retire_capture_begin(retire);
}

t4a_status t4a_graph_capture_end(t4a_retire *retire, t4a_graph **out) {
  if (out != NULL) *out = NULL;
  if (retire == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or out is NULL");
  }
  t4a_graph *g = t4a_host_calloc(1, sizeof *g);
  if (g == NULL || t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&g->lock, NULL)) {
    /* The capture must still end, its work dropped. */
    t4a_status st = g == NULL ? T4A_HOST_OUT_OF_MEMORY
                              : t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                                               "cannot initialise a graph's lock");
    free(g);
    t4a_error saved;
    t4a_error_last(&saved);
    version *v = NULL;
    if (end_capture(retire, &v) == T4A_OK) version_unref(v);
    t4a_error_restore(&saved);
    return st;
  }
  version *v = NULL;
  t4a_status st = end_capture(retire, &v);
  t4a_lane *lane = t4a_retire_lane(retire);
  if (st == T4A_OK) st = instantiate(lane, v->graph, &g->exec);
  if (st != T4A_OK) {
    version_unref(v); /* never replayed: its references go now */
    pthread_mutex_destroy(&g->lock);
    free(g);
    return st;
  }
  atomic_init(&g->refs, 1);
  g->retire = retire;
  g->lane = lane;
  t4a_lane_retain(lane);
  g->driver = t4a_lane_driver(lane);
  g->current = v;
  *out = g;
  return T4A_OK;
}

t4a_status t4a_graph_capture_update(t4a_retire *retire, t4a_graph *g, int *out_in_place) {
  if (out_in_place != NULL) *out_in_place = 0;
  if (retire == NULL || g == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or graph is NULL");
  }
  if (g->retire != retire) {
    /* Still end the capture: a caller's mistake must not leave the lane capturing. */
    version *v = NULL;
    if (end_capture(retire, &v) == T4A_OK) version_unref(v);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the graph was captured on another runtime (lane %llu, not %llu)",
                          (unsigned long long)t4a_lane_domain(g->lane),
                          (unsigned long long)t4a_lane_domain(t4a_retire_lane(retire)));
  }
  version *v = NULL;
  t4a_status st = end_capture(retire, &v);
  if (st != T4A_OK) return st;
  /* The swap happens inside an admission of the graph's retire (which enqueues nothing): a
   * replay, itself an admission, then reads the executable graph and the version without the
   * graph's lock. The admission also makes the lane's context current. */
  t4a_admission adm;
  if ((st = t4a_admission_begin(g->retire, 0, &adm)) != T4A_OK) {
    version_unref(v);
    return st;
  }
  pthread_mutex_lock(&g->lock);
  CUgraphExecUpdateResultInfo info;
  CUresult r = g->driver->t.cuGraphExecUpdate(g->exec, v->graph, &info);
  int in_place = r == CUDA_SUCCESS;
  CUgraphExec old_exec = NULL;
  if (!in_place) {
    /* A changed topology (or anything the update refuses): instantiate anew. */
    CUgraphExec fresh = NULL;
    st = T4A_CU(g->driver, cuGraphInstantiateWithFlags, &fresh, v->graph, 0);
    if (st == T4A_OK) {
      old_exec = g->exec;
      g->exec = fresh;
    }
  }
  version *old = NULL;
  if (st == T4A_OK) {
    old = g->current;
    g->current = v;
    v = NULL;
  }
  pthread_mutex_unlock(&g->lock);
  (void)t4a_admission_abort(&adm, T4A_OK);
  /* Queued replays of the old executable graph finish before the driver frees it; queued replays
   * of the old version hold their own references. */
  if (old_exec != NULL) t4a_launch_destroy_native_(g->lane, NULL, old_exec);
  version_unref(old);
  version_unref(v); /* the new capture, when it could not be used */
  if (st != T4A_OK) return t4a_lane_note_(g->lane, st);
  if (out_in_place != NULL) *out_in_place = in_place;
  return T4A_OK;
}

t4a_status t4a_graph_launch(t4a_graph *g) {
  if (g == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "graph is NULL");
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(g->retire, 1, &adm);
  if (st != T4A_OK) return st;
  if (t4a_lane_is_capturing(g->lane)) {
    /* A replay into a capture of the same stream breaks it on the real driver (measured). */
    return t4a_admission_abort(
        &adm, t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                             "the lane's stream is capturing a graph: replay after the capture"));
  }
  /* No graph lock: an update swaps the executable graph and the version only inside an admission
   * of this retire, which this replay's admission excludes. */
  version *v = g->current;
  /* If it must be leaked, the version stands for its CUgraph and every reference it holds. */
  t4a_keepalive k = {v, version_unref, (uint32_t)(1 + v->count)};
  CUresult r = g->driver->t.cuGraphLaunch(g->exec, t4a_lane_stream(g->lane));
  st = r == CUDA_SUCCESS ? T4A_OK : t4a_cu_result_(g->driver, r, "cuGraphLaunch", 0);
  if (st != T4A_OK && !t4a_launch_refused_before_enqueue_(r)) {
    /* The replay may be queued: its version is quarantined, held for good (and counted with
     * what it keeps alive when the retire leaks it). */
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  /* The version lives until this replay completed: the epoch takes its own reference only when
   * it does not hold this version yet (the graph's reference covers it meanwhile). */
  t4a_admission_keep_borrowed(&adm, k, version_retain);
  t4a_admission_commit_counting_(&adm, T4A_COUNTER_graph_launches, 1); /* the shard */
  return T4A_OK;
}

void t4a_graph_retain(t4a_graph *g) {
  if (g != NULL) atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void t4a_graph_release(t4a_graph *g) {
  if (g == NULL || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_launch_destroy_native_(g->lane, NULL, g->exec);
  version_unref(g->current);
  pthread_mutex_destroy(&g->lock);
  t4a_lane_release(g->lane);
  free(g);
  t4a_error_restore(&saved);
}

size_t t4a_graph_num_keepalives(t4a_graph *g) {
  if (g == NULL) return 0;
  pthread_mutex_lock(&g->lock);
  size_t n = g->current->count;
  pthread_mutex_unlock(&g->lock);
  return n;
}
