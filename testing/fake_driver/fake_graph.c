/* testing/fake_driver — graphs and executable graphs.
 *
 * Graphs are linear: node order is the order of capture (or of cuGraphAddKernelNode, whose
 * dependencies are checked but otherwise only order the node after everything added before).
 * Captured graphs hold kernels, copies, fills and frees. An executable graph is a deep copy of
 * its graph's operations, bound to the context current at instantiation; cuGraphLaunch queues
 * copies of them on the stream, ordered after the previous launch of the same executable graph
 * (as the driver orders them). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

/* ---- graph objects ------------------------------------------------------------------------ */

fk_graph *fk_graph_new(t4a_fake *f) {
  fk_graph *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  if (!fk_handle_new(f, &g->o, FK_KIND_GRAPH)) {
    free(g);
    return NULL;
  }
  fk_list_push(&f->graphs, &g->link);
  return g;
}

void fk_graph_free(t4a_fake *f, fk_graph *g) {
  for (size_t i = 0; i < g->num; i++) {
    fk_node *n = g->nodes[i];
    fk_handle_drop(f, &n->o);
    fk_op_release_payload(f, &n->op);
    free(n);
  }
  free(g->nodes);
  if (g->counted) f->live.graphs--;
  fk_handle_drop(f, &g->o);
  fk_list_remove(&g->link);
  free(g);
}

CUresult fk_graph_append(t4a_fake *f, fk_graph *g, fk_op *op, fk_node **out) {
  if (out != NULL) *out = NULL;
  if (g->num == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    fk_node **v = realloc(g->nodes, cap * sizeof *v);
    if (v == NULL) {
      fk_op_free(f, op);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes = v;
    g->cap = cap;
  }
  fk_node *n = calloc(1, sizeof *n);
  if (n == NULL || !fk_handle_new(f, &n->o, FK_KIND_NODE)) {
    free(n);
    fk_op_free(f, op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  n->graph = g;
  n->op = *op; /* the node takes the payload; only the shell is freed */
  n->op.next = NULL;
  free(op);
  g->nodes[g->num++] = n;
  if (out != NULL) *out = n;
  return CUDA_SUCCESS;
}

static fk_graph *graph_lookup(t4a_fake *f, CUgraph h) {
  fk_graph *g = fk_handle_get(f, FK_H(h), FK_KIND_GRAPH);
  return (g != NULL && g->counted) ? g : NULL;
}

void fk_exec_free(t4a_fake *f, fk_exec *e) {
  if (e->o.handle != 0) {
    fk_handle_drop(f, &e->o);
    f->live.graph_execs--;
  }
  for (size_t i = 0; i < e->num; i++) fk_op_release_payload(f, &e->nodes[i].op);
  free(e->nodes);
  fk_point_unref(e->last);
  fk_list_remove(&e->link);
  free(e);
}

/* ---- graph entries ------------------------------------------------------------------------ */

CUresult fk_cuGraphCreate(t4a_fake *f, CUgraph *graph, unsigned int flags) {
  if (graph == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  fk_graph *g = fk_graph_new(f);
  if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  g->counted = 1;
  f->live.graphs++;
  *graph = (CUgraph)(uintptr_t)g->o.handle;
  return CUDA_SUCCESS;
}

static CUresult kernel_params_op(t4a_fake *f, const CUDA_KERNEL_NODE_PARAMS *p, fk_ctx *ctx,
                                 fk_op **out) {
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  CUresult r = fk_build_launch(f, p->func, grid, block, p->sharedMemBytes, p->kernelParams,
                               p->extra, ctx, out);
  return r == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_VALUE : r;
}

CUresult fk_cuGraphAddKernelNode(t4a_fake *f, CUgraphNode *node, CUgraph graph,
                                 const CUgraphNode *deps, size_t num_deps,
                                 const CUDA_KERNEL_NODE_PARAMS *params) {
  if (node == NULL || params == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (num_deps > 0 && deps == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_graph *g = graph_lookup(f, graph);
  if (g == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < num_deps; i++) {
    fk_node *d = fk_handle_get(f, FK_H(deps[i]), FK_KIND_NODE);
    if (d == NULL || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
  }
  /* Kernels are functions only (no CUkernel library handles in the fake). */
  if (params->func == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_func *fn = fk_handle_get(f, FK_H(params->func), FK_KIND_FUNC);
  if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
  r = fk_ctx_usable(fn->mod->ctx);
  if (r != CUDA_SUCCESS) return r;
  fk_op *op;
  r = kernel_params_op(f, params, fn->mod->ctx, &op);
  if (r != CUDA_SUCCESS) return r;
  fk_node *n;
  r = fk_graph_append(f, g, op, &n);
  if (r != CUDA_SUCCESS) return r;
  *node = (CUgraphNode)(uintptr_t)n->o.handle;
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphGetNodes(t4a_fake *f, CUgraph graph, CUgraphNode *nodes, size_t *num) {
  if (num == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_graph *g = graph_lookup(f, graph);
  if (g == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (nodes == NULL) {
    *num = g->num;
    return CUDA_SUCCESS;
  }
  size_t n = *num < g->num ? *num : g->num;
  for (size_t i = 0; i < *num; i++) {
    nodes[i] = i < n ? (CUgraphNode)(uintptr_t)g->nodes[i]->o.handle : NULL;
  }
  *num = n;
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphInstantiateWithFlags(t4a_fake *f, CUgraphExec *exec, CUgraph graph,
                                        unsigned long long flags) {
  if (exec == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_graph *g = graph_lookup(f, graph);
  if (g == NULL) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~0xFull) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < g->num; i++) {
    const fk_op *op = &g->nodes[i]->op;
    if (op->kind != FK_OP_KERNEL) continue;
    fk_func *fn = fk_handle_get(f, FK_H(op->u.kernel.func), FK_KIND_FUNC);
    if (fn == NULL || fn->mod->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  }
  fk_exec *e = calloc(1, sizeof *e);
  if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  if (g->num > 0) {
    e->nodes = calloc(g->num, sizeof *e->nodes);
    if (e->nodes == NULL) {
      free(e);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (size_t i = 0; i < g->num; i++) {
    fk_exec_node *en = &e->nodes[i];
    if (!fk_op_copy_payload(&en->op, &g->nodes[i]->op)) {
      for (size_t k = 0; k < i; k++) fk_op_release_payload(f, &e->nodes[k].op);
      free(e->nodes);
      free(e);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    en->origin = en->source = g->nodes[i]->o.handle;
    e->num++;
  }
  if (!fk_handle_new(f, &e->o, FK_KIND_EXEC)) {
    for (size_t k = 0; k < e->num; k++) fk_op_release_payload(f, &e->nodes[k].op);
    free(e->nodes);
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  e->ctx = ctx;
  fk_list_push(&f->execs, &e->link);
  f->live.graph_execs++;
  *exec = (CUgraphExec)(uintptr_t)e->o.handle;
  return CUDA_SUCCESS;
}

static CUresult exec_for_stream(t4a_fake *f, CUgraphExec exec, CUstream h, fk_exec **out_e,
                                fk_stream **out_s) {
  fk_exec *e = fk_handle_get(f, FK_H(exec), FK_KIND_EXEC);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  if (e->ctx != s->ctx) return CUDA_ERROR_INVALID_VALUE;
  *out_e = e;
  *out_s = s;
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphLaunch(t4a_fake *f, CUgraphExec exec, CUstream h) {
  fk_exec *e;
  fk_stream *s;
  CUresult r = exec_for_stream(f, exec, h, &e, &s);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap != NULL) {
    /* Measured on the H200 (driver 580, THREAD_LOCAL capture): a replay into the capturing
     * stream is refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture is
     * invalidated. */
    s->cap->invalidated = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  /* Allocate everything first, so a failure enqueues nothing. */
  size_t n = e->num + 2;
  fk_op **ops = calloc(n, sizeof *ops);
  fk_point *end = fk_point_new(s);
  int ok = ops != NULL && end != NULL;
  size_t k = 0;
  /* After the previous launch: a wait, or (done, and nothing queued here) a clock join now. */
  int wait_prev = e->last != NULL && (!e->last->done || s->head != NULL);
  if (ok && wait_prev) {
    ops[k] = fk_op_new(FK_OP_WAIT);
    if (ops[k] != NULL) {
      ops[k]->u.wait.point = e->last;
      e->last->refs++;
    }
    ok = ops[k++] != NULL;
  }
  CUresult node_r = CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; ok && i < e->num; i++) {
    const fk_op *nop = &e->nodes[i].op;
    if (nop->kind == FK_OP_EVENT_RECORD_NODE || nop->kind == FK_OP_EVENT_WAIT_NODE) {
      int none = 0;
      ops[k] = fk_event_node_op(f, s, nop, &none, &node_r);
      if (ops[k] == NULL && none) continue; /* never recorded: nothing to wait for */
    } else {
      ops[k] = fk_op_clone(nop);
    }
    ok = ops[k++] != NULL;
  }
  if (ok) {
    ops[k] = fk_op_new(FK_OP_RECORD);
    if (ops[k] != NULL) {
      ops[k]->u.record.point = end;
      end->refs++;
    }
    ok = ops[k++] != NULL;
  }
  if (!ok) {
    for (size_t i = 0; ops != NULL && i < k; i++) fk_op_free(f, ops[i]);
    free(ops);
    fk_point_unref(end);
    return node_r;
  }
  if (e->last != NULL && !wait_prev) {
    fk_op *none;
    (void)fk_after_done_point(f, s, e->last, &none); /* s is idle: joins, allocates nothing */
  }
  for (size_t i = 0; i < k; i++) fk_submit(f, s, ops[i]);
  free(ops);
  fk_point_unref(e->last);
  e->last = end;
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphUpload(t4a_fake *f, CUgraphExec exec, CUstream h) {
  fk_exec *e;
  fk_stream *s;
  return exec_for_stream(f, exec, h, &e, &s);
}

CUresult fk_cuGraphDestroy(t4a_fake *f, CUgraph graph) {
  fk_graph *g = graph_lookup(f, graph);
  if (g == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_current_sticky(f);
  if (r != CUDA_SUCCESS) return r;
  fk_graph_free(f, g);
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphExecDestroy(t4a_fake *f, CUgraphExec exec) {
  fk_exec *e = fk_handle_get(f, FK_H(exec), FK_KIND_EXEC);
  if (e == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_ctx_usable(e->ctx);
  if (r != CUDA_SUCCESS) return r;
  if ((r = fk_capture_check_unsafe(f)) != CUDA_SUCCESS) return r; /* measured on the H200 */
  fk_exec_free(f, e);
  return CUDA_SUCCESS;
}

static int same_end_kind(const fk_end *a, const fk_end *b) { return a->device == b->device; }

CUresult fk_cuGraphExecUpdate(t4a_fake *f, CUgraphExec exec, CUgraph graph,
                              CUgraphExecUpdateResultInfo *info) {
  if (info == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_exec *e = fk_handle_get(f, FK_H(exec), FK_KIND_EXEC);
  fk_graph *g = graph_lookup(f, graph);
  if (e == NULL || g == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_ctx_usable(e->ctx);
  if (r != CUDA_SUCCESS) return r;
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  info->errorNode = NULL;
  info->errorFromNode = NULL;
  if (g->num != e->num) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (size_t i = 0; i < g->num; i++) {
    const fk_op *a = &e->nodes[i].op, *b = &g->nodes[i]->op;
    CUgraphExecUpdateResult why = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    if (a->kind != b->kind) {
      why = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    } else if (b->kind == FK_OP_KERNEL) {
      fk_func *fn = fk_handle_get(f, FK_H(b->u.kernel.func), FK_KIND_FUNC);
      if (fn == NULL) {
        why = CU_GRAPH_EXEC_UPDATE_ERROR;
      } else if (fn->mod->ctx != e->ctx) {
        why = CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
      }
    } else if (b->kind == FK_OP_FREE) {
      if (a->u.free.ptr != b->u.free.ptr) why = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    } else if (b->kind == FK_OP_COPY) {
      if (!same_end_kind(&a->u.copy.dst, &b->u.copy.dst) ||
          !same_end_kind(&a->u.copy.src, &b->u.copy.src)) {
        why = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
      }
    }
    if (why != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      info->result = why;
      info->errorNode = (CUgraphNode)(uintptr_t)g->nodes[i]->o.handle;
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
  }
  /* Copy every new payload first, so running out of memory changes nothing. */
  fk_op *fresh = g->num > 0 ? calloc(g->num, sizeof *fresh) : NULL;
  if (g->num > 0 && fresh == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < g->num; i++) {
    if (!fk_op_copy_payload(&fresh[i], &g->nodes[i]->op)) {
      for (size_t k = 0; k < i; k++) fk_op_release_payload(f, &fresh[k]);
      free(fresh);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (size_t i = 0; i < g->num; i++) {
    fk_op_release_payload(f, &e->nodes[i].op);
    e->nodes[i].op = fresh[i];
    e->nodes[i].source = g->nodes[i]->o.handle;
  }
  free(fresh);
  return CUDA_SUCCESS;
}

CUresult fk_cuGraphExecKernelNodeSetParams(t4a_fake *f, CUgraphExec exec, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *params) {
  if (params == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_exec *e = fk_handle_get(f, FK_H(exec), FK_KIND_EXEC);
  if (e == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_ctx_usable(e->ctx);
  if (r != CUDA_SUCCESS) return r;
  uint64_t h = FK_H(node);
  fk_exec_node *en = NULL;
  for (size_t i = 0; i < e->num && en == NULL; i++) {
    if (h != 0 && (e->nodes[i].origin == h || e->nodes[i].source == h)) en = &e->nodes[i];
  }
  if (en == NULL || en->op.kind != FK_OP_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  if (params->func == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_op *op;
  r = kernel_params_op(f, params, e->ctx, &op);
  if (r != CUDA_SUCCESS) return r;
  /* A node's launch attributes (a captured cuLaunchKernelEx's) are not part of its parameters:
   * an update keeps them. */
  op->u.kernel.attrs = en->op.u.kernel.attrs;
  fk_op_release_payload(f, &en->op);
  en->op = *op;
  en->op.next = NULL;
  free(op);
  return CUDA_SUCCESS;
}

/* As the Driver API documents: the node must be a memset node of the graph, `ctx` the context it
 * runs on (the executable graph's), a 1-D fill (height 1) of 1-, 2- or 4-byte elements of at
 * least one element, the destination aligned to the element and inside one live allocation of
 * that context's device. */
CUresult fk_cuGraphExecMemsetNodeSetParams(t4a_fake *f, CUgraphExec exec, CUgraphNode node,
                                           const CUDA_MEMSET_NODE_PARAMS *params, CUcontext ctx) {
  if (params == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_exec *e = fk_handle_get(f, FK_H(exec), FK_KIND_EXEC);
  if (e == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fk_ctx_usable(e->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (FK_H(ctx) != e->ctx->o.handle) return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = FK_H(node);
  fk_exec_node *en = NULL;
  for (size_t i = 0; i < e->num && en == NULL; i++) {
    if (h != 0 && (e->nodes[i].origin == h || e->nodes[i].source == h)) en = &e->nodes[i];
  }
  if (en == NULL || en->op.kind != FK_OP_FILL) return CUDA_ERROR_INVALID_VALUE;
  size_t elem = params->elementSize;
  if ((elem != 1 && elem != 2 && elem != 4) || params->width == 0 || params->height != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((params->dst & (elem - 1)) != 0 || params->width > SIZE_MAX / elem) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fk_alloc *a = fk_rindex_find(&f->allocs, params->dst, params->width * elem);
  if (a == NULL || a->device != e->ctx->device) return CUDA_ERROR_INVALID_VALUE;
  en->op.u.fill.dst = params->dst;
  en->op.u.fill.value = elem == 1 ? (params->value & 0xFFu)
                                  : elem == 2 ? (params->value & 0xFFFFu) : params->value;
  en->op.u.fill.elem = elem;
  en->op.u.fill.count = params->width;
  return CUDA_SUCCESS;
}
