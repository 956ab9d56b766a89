/* testing/fake_driver — streams, events, the progress engine and stream capture.
 *
 * A stream is a FIFO of operations. Nothing runs when it is enqueued: work runs only when a sync
 * call, a query (under T4A_FAKE_QUERY_PROGRESSES) or t4a_fake_progress/step asks for it, and then
 * only as much as is needed. Syncing stream A runs A's queue; when A's head waits on a point
 * recorded on stream B, B runs just far enough to reach that point. Streams nobody asked about
 * stay untouched, so a runtime that reads results of work it never synchronized with sees stale
 * bytes, exactly as on a GPU that is still busy. A cycle of waits is reported as
 * CUDA_ERROR_ILLEGAL_STATE instead of hanging. Where several streams could run (t4a_fake_progress,
 * context-wide drains) the progress order option picks which runs first.
 *
 * Happens-before (fake_internal.h): each executed operation joins the host clock it was queued
 * under and ticks its stream's clock component; records copy the clock into their point, waits
 * join it. Successful syncs and complete-answering queries feed the host clock. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

#define FK_PRIORITY_GREATEST (-5)
#define FK_PRIORITY_LEAST 0

/* ---- points ------------------------------------------------------------------------------- */

fk_point *fk_point_new(fk_stream *s) {
  fk_point *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->refs = 1;
  p->stream = s;
  return p;
}

void fk_point_unref(fk_point *p) {
  if (p != NULL && --p->refs == 0) {
    fk_vc_free(&p->vc);
    free(p);
  }
}

/* ---- vector clocks ------------------------------------------------------------------------ */

uint64_t fk_vc_at(const fk_vc *vc, size_t i) { return i < vc->n ? vc->v[i] : 0; }

void fk_vc_free(fk_vc *vc) {
  free(vc->v);
  vc->v = NULL;
  vc->n = 0;
}

/* Grows vc to n components (new ones 0). 0 (and the checks turned off) when out of memory. */
static int vc_reserve(t4a_fake *f, fk_vc *vc, size_t n) {
  if (vc->n >= n) return 1;
  if (n < f->num_vc) n = f->num_vc; /* grow once to every index handed out so far */
  uint64_t *v = realloc(vc->v, n * sizeof *v);
  if (v == NULL) {
    f->vc_broken = 1;
    return 0;
  }
  memset(v + vc->n, 0, (n - vc->n) * sizeof *v);
  vc->v = v;
  vc->n = n;
  return 1;
}

void fk_vc_join(t4a_fake *f, fk_vc *dst, const fk_vc *src) {
  size_t n = src->n;
  while (n > 0 && src->v[n - 1] == 0) n--;
  if (n == 0 || !vc_reserve(f, dst, n)) return;
  for (size_t i = 0; i < n; i++) {
    if (src->v[i] > dst->v[i]) dst->v[i] = src->v[i];
  }
}

static void vc_assign(t4a_fake *f, fk_vc *dst, const fk_vc *src) {
  if (dst->n > 0) memset(dst->v, 0, dst->n * sizeof *dst->v);
  fk_vc_join(f, dst, src);
}

static void vc_tick(t4a_fake *f, fk_stream *s) {
  if (vc_reserve(f, &s->vc, (size_t)s->vc_index + 1)) s->vc.v[s->vc_index]++;
}

void fk_hsnap_unref(fk_hsnap *h) {
  if (h != NULL && --h->refs == 0) {
    fk_vc_free(&h->vc);
    free(h);
  }
}

void fk_host_observe(t4a_fake *f, const fk_vc *vc) {
  fk_hsnap *h = f->host;
  if (h == NULL) return;
  int grows = 0;
  for (size_t i = 0; i < vc->n && !grows; i++) grows = vc->v[i] > fk_vc_at(&h->vc, i);
  if (!grows) return;
  if (h->refs > 1) {
    /* Operations hold the old snapshot: copy on write. */
    fk_hsnap *c = calloc(1, sizeof *c);
    if (c == NULL) {
      f->vc_broken = 1;
      return;
    }
    c->refs = 1;
    fk_vc_join(f, &c->vc, &h->vc);
    fk_hsnap_unref(h);
    f->host = h = c;
  }
  fk_vc_join(f, &h->vc, vc);
  h->version = ++f->host_version;
}

void fk_host_observe_ctx(t4a_fake *f, fk_ctx *ctx) {
  for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    if (s->ctx == ctx && s->head == NULL) fk_host_observe(f, &s->vc);
  }
}

void fk_violation(t4a_fake *f, const char *what, uint64_t addr) {
  f->ordering_violations++;
  fprintf(stderr, "t4a fake driver: ordering violation: %s (address 0x%llx, stream index %u)\n",
          what, (unsigned long long)addr, f->exec != NULL ? f->exec->vc_index : 0u);
}

static void point_complete(t4a_fake *f, fk_point *p) {
  p->done = 1;
  p->stream = NULL;
  p->time_ns = f->clock_ns;
}

/* ---- kernel argument blocks --------------------------------------------------------------- */

int fk_args_init(fk_args *a, size_t num, size_t total) {
  memset(a, 0, sizeof *a);
  if (num == 0 && total == 0) return 1;
  size_t head = 2 * num * sizeof(size_t);
  unsigned char *block = calloc(1, head + total + 1);
  if (block == NULL) return 0;
  a->num = num;
  a->offsets = (size_t *)(void *)block;
  a->sizes = a->offsets + num;
  a->bytes = block + head;
  a->total = total;
  return 1;
}

void fk_args_release(fk_args *a) {
  free(a->offsets);
  memset(a, 0, sizeof *a);
}

int fk_args_copy(fk_args *dst, const fk_args *src) {
  if (!fk_args_init(dst, src->num, src->total)) return 0;
  if (src->num > 0) {
    memcpy(dst->offsets, src->offsets, src->num * sizeof(size_t));
    memcpy(dst->sizes, src->sizes, src->num * sizeof(size_t));
  }
  if (src->total > 0) memcpy(dst->bytes, src->bytes, src->total);
  return 1;
}

/* ---- operations --------------------------------------------------------------------------- */

fk_op *fk_op_new(fk_op_kind kind) {
  fk_op *op = calloc(1, sizeof *op);
  if (op != NULL) op->kind = kind;
  return op;
}

void fk_op_release_payload(t4a_fake *f, fk_op *op) {
  (void)f;
  fk_hsnap_unref(op->host);
  op->host = NULL;
  switch (op->kind) {
    case FK_OP_KERNEL:
      fk_args_release(&op->u.kernel.args);
      break;
    case FK_OP_RECORD:
      fk_point_unref(op->u.record.point);
      op->u.record.point = NULL;
      break;
    case FK_OP_WAIT:
      fk_point_unref(op->u.wait.point);
      op->u.wait.point = NULL;
      break;
    default:
      break;
  }
}

void fk_op_free(t4a_fake *f, fk_op *op) {
  if (op == NULL) return;
  fk_op_release_payload(f, op);
  free(op);
}

int fk_op_copy_payload(fk_op *dst, const fk_op *src) {
  fk_op *next = dst->next;
  *dst = *src;
  dst->next = next;
  dst->host = NULL; /* a copy is queued (and stamped) on its own */
  switch (src->kind) {
    case FK_OP_KERNEL:
      if (!fk_args_copy(&dst->u.kernel.args, &src->u.kernel.args)) {
        memset(&dst->u.kernel.args, 0, sizeof dst->u.kernel.args);
        return 0;
      }
      break;
    case FK_OP_RECORD:
      dst->u.record.point->refs++;
      break;
    case FK_OP_WAIT:
      dst->u.wait.point->refs++;
      break;
    default:
      break;
  }
  return 1;
}

fk_op *fk_op_clone(const fk_op *op) {
  fk_op *c = fk_op_new(op->kind);
  if (c == NULL) return NULL;
  if (!fk_op_copy_payload(c, op)) {
    free(c);
    return NULL;
  }
  c->next = NULL;
  return c;
}

/* ---- stream objects ----------------------------------------------------------------------- */

fk_stream *fk_stream_new(t4a_fake *f, fk_ctx *ctx, unsigned flags, int priority, int is_null) {
  fk_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  if (!is_null) {
    if (!fk_handle_new(f, &s->o, FK_KIND_STREAM)) {
      free(s);
      return NULL;
    }
    f->live.streams++;
  } else {
    s->o.kind = FK_KIND_STREAM;
  }
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  s->is_null = is_null;
  s->vc_index = f->num_vc++;
  fk_list_push(&f->streams, &s->link);
  return s;
}

static fk_op *stream_pop(fk_stream *s) {
  fk_op *op = s->head;
  s->head = op->next;
  if (s->head == NULL) s->tail = NULL;
  s->pending--;
  op->next = NULL;
  return op;
}

void fk_stream_discard(t4a_fake *f, fk_stream *s) {
  while (s->head != NULL) {
    fk_op *op = stream_pop(s);
    if (op->kind == FK_OP_RECORD) point_complete(f, op->u.record.point);
    fk_op_free(f, op);
  }
}

void fk_stream_free(t4a_fake *f, fk_stream *s) {
  fk_stream_discard(f, s);
  if (s->cap != NULL) fk_capture_end_free(f, s);
  if (s->o.handle != 0) {
    fk_handle_drop(f, &s->o);
    f->live.streams--;
  }
  if (s->user_destroyed) f->zombie_streams--;
  if (s->ctx != NULL && s->ctx->null_stream == s) s->ctx->null_stream = NULL;
  fk_list_remove(&s->link);
  fk_vc_free(&s->vc);
  free(s);
}

void fk_reap_streams(t4a_fake *f) {
  if (f->zombie_streams == 0) return;
  fk_link *l = f->streams.next;
  while (l != &f->streams) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    l = l->next;
    if (s->user_destroyed && s->head == NULL && !s->visiting && s->pins == 0) {
      fk_stream_free(f, s);
    }
  }
}

static int is_default_stream_handle(CUstream h) {
  return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

CUresult fk_stream_for_enqueue(t4a_fake *f, CUstream h, fk_stream **out) {
  *out = NULL;
  fk_ctx *cur;
  CUresult r = fk_need_current(f, &cur);
  if (r != CUDA_SUCCESS) return r;
  fk_stream *s;
  if (is_default_stream_handle(h)) {
    s = cur->null_stream;
    if (s == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  } else {
    s = fk_handle_get(f, FK_H(h), FK_KIND_STREAM);
    if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
    /* The fake is strict here: work goes only to a stream of the current context. */
    if (s->ctx != cur) return CUDA_ERROR_INVALID_CONTEXT;
  }
  *out = s;
  return CUDA_SUCCESS;
}

CUresult fk_stream_lookup(t4a_fake *f, CUstream h, fk_stream **out) {
  *out = NULL;
  fk_stream *s;
  if (is_default_stream_handle(h)) {
    fk_ctx *cur = fk_ctx_of_handle(f, fk_current_handle(f));
    CUresult r = fk_ctx_handle_usable(cur);
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) return r;
    if (cur->null_stream == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    s = cur->null_stream;
  } else {
    s = fk_handle_get(f, FK_H(h), FK_KIND_STREAM);
    if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (!s->ctx->alive) return CUDA_ERROR_INVALID_CONTEXT;
  }
  *out = s;
  return CUDA_SUCCESS;
}

CUresult fk_submit(t4a_fake *f, fk_stream *s, fk_op *op) {
  op->next = NULL;
  if (s->cap != NULL) {
    if (s->cap->invalidated) {
      fk_op_free(f, op);
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    return fk_graph_append(f, s->cap->graph, op, NULL);
  }
  /* The operation is ordered after everything the host has seen complete so far. */
  op->host = f->host;
  if (op->host != NULL) op->host->refs++;
  if (s->tail != NULL) {
    s->tail->next = op;
  } else {
    s->head = op;
  }
  s->tail = op;
  s->pending++;
  return CUDA_SUCCESS;
}

/* ---- the engine --------------------------------------------------------------------------- */

static int stream_healthy(const fk_stream *s) {
  return s->ctx->alive && s->ctx->sticky == CUDA_SUCCESS;
}

/* A waiting head blocks its stream; in a faulted context waits are skipped like all work. */
static int op_runnable(const fk_stream *s, const fk_op *op) {
  return op->kind != FK_OP_WAIT || op->u.wait.point->done || !stream_healthy(s);
}

/* Runs (or, in a faulted context, drops) the head operation of s. */
static void run_head(t4a_fake *f, fk_stream *s) {
  fk_op *op = stream_pop(s);
  int healthy = stream_healthy(s);
  f->engine_depth++;
  f->clock_ns += 1000;
  fk_stream *outer = f->exec;
  f->exec = s;
  s->pins++; /* a kernel may destroy its own stream */
  if (op->host != NULL && op->host->version > s->host_seen) {
    fk_vc_join(f, &s->vc, &op->host->vc);
    s->host_seen = op->host->version;
  }
  vc_tick(f, s);
  switch (op->kind) {
    case FK_OP_COPY:
      if (healthy) fk_run_copy(f, s->ctx, op);
      break;
    case FK_OP_FILL:
      if (healthy) fk_run_fill(f, s->ctx, op);
      break;
    case FK_OP_KERNEL:
      if (healthy) fk_run_kernel(f, s->ctx, op);
      break;
    case FK_OP_FREE:
      fk_run_free(f, s->ctx, op, healthy);
      break;
    case FK_OP_RECORD:
      vc_assign(f, &op->u.record.point->vc, &s->vc);
      point_complete(f, op->u.record.point);
      break;
    case FK_OP_WAIT:
      if (op->u.wait.point->done) fk_vc_join(f, &s->vc, &op->u.wait.point->vc);
      break;
    case FK_OP_ALLOC:
      fk_run_alloc(f, op); /* also in a faulted context: the block exists either way */
      break;
    case FK_OP_HOST:
      if (healthy) fk_run_host(f, op);
      break;
    case FK_OP_EVENT_RECORD_NODE:
    case FK_OP_EVENT_WAIT_NODE:
      break; /* graph nodes only: a launch turned them into RECORD / WAIT */
  }
  fk_op_free(f, op);
  s->pins--;
  f->exec = outer;
  f->engine_depth--;
}

/* ---- progress order ----------------------------------------------------------------------- */

static uint64_t rng_next(t4a_fake *f) {
  /* xorshift64* */
  uint64_t x = f->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  f->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

void t4a_fake_set_progress_order(t4a_fake *fake, t4a_fake_progress_order order, uint64_t seed) {
  if (fake == NULL) return;
  fk_lock();
  fake->progress_order = order;
  fake->rng = seed != 0 ? seed : 0x9E3779B97F4A7C15ull;
  fk_unlock();
}

/* The streams (of ctx, or all when ctx is NULL) in the progress order, each pinned; release with
 * streams_unpin. NULL with *n = 0 when there are none or when out of memory. */
static fk_stream **streams_ordered(t4a_fake *f, fk_ctx *ctx, size_t *n) {
  size_t count = 0;
  for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    if (ctx == NULL || s->ctx == ctx) count++;
  }
  *n = 0;
  if (count == 0) return NULL;
  fk_stream **v = malloc(count * sizeof *v);
  if (v == NULL) return NULL;
  size_t k = 0;
  for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    if (ctx == NULL || s->ctx == ctx) v[k++] = s;
  }
  if (f->progress_order == T4A_FAKE_ORDER_REVERSE) {
    for (size_t i = 0; i < k / 2; i++) {
      fk_stream *t = v[i];
      v[i] = v[k - 1 - i];
      v[k - 1 - i] = t;
    }
  } else if (f->progress_order == T4A_FAKE_ORDER_RANDOM) {
    for (size_t i = k; i > 1; i--) {
      size_t j = (size_t)(rng_next(f) % i);
      fk_stream *t = v[i - 1];
      v[i - 1] = v[j];
      v[j] = t;
    }
  }
  for (size_t i = 0; i < k; i++) v[i]->pins++;
  *n = k;
  return v;
}

static void streams_unpin(fk_stream **v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i]->pins--;
  free(v);
}

/* Runs s until `target` (a point queued on s) is done, or until s is empty when target is NULL.
 * A head that waits on another stream's point runs that stream first, recursively. */
static CUresult drain_until(t4a_fake *f, fk_stream *s, fk_point *target) {
  if (s->visiting) {
    fprintf(stderr, "t4a fake driver: deadlock: streams wait on each other in a cycle\n");
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  s->visiting = 1;
  f->engine_depth++;
  CUresult r = CUDA_SUCCESS;
  while (target != NULL ? !target->done : s->head != NULL) {
    fk_op *op = s->head;
    if (op == NULL) {
      r = CUDA_ERROR_ILLEGAL_STATE; /* the point is not on this stream: an internal error */
      break;
    }
    if (!op_runnable(s, op)) {
      fk_point *p = op->u.wait.point;
      if (p->stream == NULL) {
        r = CUDA_ERROR_ILLEGAL_STATE;
        break;
      }
      r = drain_until(f, p->stream, p);
      if (r != CUDA_SUCCESS) break;
      continue;
    }
    run_head(f, s);
  }
  f->engine_depth--;
  s->visiting = 0;
  return r;
}

CUresult fk_drain_stream(t4a_fake *f, fk_stream *s) { return drain_until(f, s, NULL); }

CUresult fk_drain_point(t4a_fake *f, fk_point *p) {
  if (p == NULL || p->done) return CUDA_SUCCESS;
  if (p->stream == NULL) return CUDA_ERROR_ILLEGAL_STATE;
  p->refs++;
  CUresult r = drain_until(f, p->stream, p);
  fk_point_unref(p);
  return r;
}

CUresult fk_drain_ctx(t4a_fake *f, fk_ctx *ctx) {
  CUresult first = CUDA_SUCCESS;
  size_t n;
  fk_stream **v = streams_ordered(f, ctx, &n);
  if (v == NULL) {
    /* None, or out of memory: creation order, straight from the list. */
    for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
      fk_stream *s = FK_CONTAINER(l, fk_stream, link);
      if (s->ctx != ctx) continue;
      CUresult r = fk_drain_stream(f, s);
      if (first == CUDA_SUCCESS) first = r;
    }
    return first;
  }
  for (size_t i = 0; i < n; i++) {
    CUresult r = fk_drain_stream(f, v[i]);
    if (first == CUDA_SUCCESS) first = r;
  }
  streams_unpin(v, n);
  return first;
}

/* T4A_FAKE_ORDER_RANDOM: one operation at a time, from a random stream that can run. */
static size_t progress_random(t4a_fake *f) {
  size_t n = 0, cap = 0;
  fk_stream **ready = NULL;
  for (;;) {
    size_t k = 0;
    for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
      fk_stream *s = FK_CONTAINER(l, fk_stream, link);
      if (s->head == NULL || !op_runnable(s, s->head)) continue;
      if (k == cap) {
        size_t c = cap ? cap * 2 : 16;
        fk_stream **r = realloc(ready, c * sizeof *r);
        if (r == NULL) break;
        ready = r;
        cap = c;
      }
      ready[k++] = s;
    }
    if (k == 0) break;
    run_head(f, ready[rng_next(f) % k]);
    n++;
  }
  free(ready);
  return n;
}

size_t fk_progress_all(t4a_fake *f) {
  size_t n = 0;
  int again = 1;
  f->engine_depth++;
  if (f->progress_order == T4A_FAKE_ORDER_RANDOM) {
    n = progress_random(f);
    again = 0;
  }
  while (again) {
    again = 0;
    size_t k;
    fk_stream **v = streams_ordered(f, NULL, &k);
    if (v == NULL) {
      for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
        fk_stream *s = FK_CONTAINER(l, fk_stream, link);
        while (s->head != NULL && op_runnable(s, s->head)) {
          run_head(f, s);
          n++;
          again = 1;
        }
      }
      continue;
    }
    for (size_t i = 0; i < k; i++) {
      fk_stream *s = v[i];
      while (s->head != NULL && op_runnable(s, s->head)) {
        run_head(f, s);
        n++;
        again = 1;
      }
    }
    streams_unpin(v, k);
  }
  f->engine_depth--;
  if (f->engine_depth == 0) fk_reap_streams(f);
  return n;
}

CUresult fk_after_done_point(t4a_fake *f, fk_stream *s, fk_point *p, fk_op **wait) {
  *wait = NULL;
  if (s->head == NULL) {
    /* Nothing queued: the stream's next work is ordered after p from now on. */
    fk_vc_join(f, &s->vc, &p->vc);
    return CUDA_SUCCESS;
  }
  fk_op *op = fk_op_new(FK_OP_WAIT);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.wait.point = p;
  p->refs++;
  *wait = op;
  return CUDA_SUCCESS;
}

static fk_stream *stream_for_test_call(t4a_fake *f, CUstream h) {
  if (is_default_stream_handle(h)) {
    fk_ctx *cur = fk_ctx_of_handle(f, fk_current_handle(f));
    return cur != NULL ? cur->null_stream : NULL;
  }
  return fk_handle_get(f, FK_H(h), FK_KIND_STREAM);
}

int t4a_fake_step(t4a_fake *fake, CUstream stream) {
  if (fake == NULL) return 0;
  fk_lock();
  int ran = 0;
  fk_stream *s = stream_for_test_call(fake, stream);
  if (s != NULL && s->head != NULL && op_runnable(s, s->head)) {
    run_head(fake, s);
    ran = 1;
  }
  if (fake->engine_depth == 0) fk_reap_streams(fake);
  fk_unlock();
  return ran;
}

size_t t4a_fake_pending(t4a_fake *fake, CUstream stream) {
  if (fake == NULL) return 0;
  fk_lock();
  size_t n = 0;
  if (stream == NULL) {
    for (fk_link *l = fake->streams.next; l != &fake->streams; l = l->next) {
      n += FK_CONTAINER(l, fk_stream, link)->pending;
    }
  } else {
    fk_stream *s = stream_for_test_call(fake, stream);
    if (s != NULL) n = s->pending;
  }
  fk_unlock();
  return n;
}

int t4a_fake_stream_attr(t4a_fake *fake, CUstream stream, CUstreamAttrID attr,
                         CUstreamAttrValue *out) {
  if (fake == NULL || out == NULL) return 0;
  fk_lock();
  int found = 0;
  fk_stream *s = stream_for_test_call(fake, stream);
  if (s != NULL && (unsigned)attr < FK_STREAM_ATTR_SLOTS && s->attr_set[attr]) {
    *out = s->attrs[attr];
    found = 1;
  }
  fk_unlock();
  return found;
}

/* ---- capture ------------------------------------------------------------------------------ */

void fk_capture_invalidate(fk_stream *s) {
  if (s->cap != NULL) s->cap->invalidated = 1;
}

void fk_capture_end_free(t4a_fake *f, fk_stream *s) {
  if (s->cap == NULL) return;
  if (s->cap->graph != NULL) fk_graph_free(f, s->cap->graph);
  free(s->cap);
  s->cap = NULL;
}

CUresult fk_capture_check_unsafe(t4a_fake *f) {
  pthread_t self = pthread_self();
  int prohibited = 0;
  for (fk_link *l = f->streams.next; l != &f->streams; l = l->next) {
    fk_stream *s = FK_CONTAINER(l, fk_stream, link);
    fk_capture *c = s->cap;
    if (c == NULL) continue;
    if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && pthread_equal(c->owner, self))) {
      c->invalidated = 1;
      prohibited = 1;
    }
  }
  return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult fk_cuStreamBeginCapture(t4a_fake *f, CUstream h, CUstreamCaptureMode mode) {
  if ((unsigned)mode > (unsigned)CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (is_default_stream_handle(h)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap != NULL) return CUDA_ERROR_ILLEGAL_STATE;
  fk_capture *c = calloc(1, sizeof *c);
  if (c == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  c->graph = fk_graph_new(f);
  if (c->graph == NULL) {
    free(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  c->mode = mode;
  c->owner = pthread_self();
  c->id = c->graph->o.handle;
  s->cap = c;
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamEndCapture(t4a_fake *f, CUstream h, CUgraph *graph) {
  if (graph == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (is_default_stream_handle(h)) return CUDA_ERROR_ILLEGAL_STATE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap == NULL) return CUDA_ERROR_ILLEGAL_STATE;
  fk_capture *c = s->cap;
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->owner, pthread_self())) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  if (c->invalidated) {
    fk_capture_end_free(f, s);
    *graph = NULL;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  fk_graph *g = c->graph;
  c->graph = NULL;
  fk_capture_end_free(f, s);
  g->counted = 1;
  f->live.graphs++;
  *graph = (CUgraph)(uintptr_t)g->o.handle;
  return CUDA_SUCCESS;
}

/* Graphs are linear: the stream's one dependency is the capture's last node (none before the
 * first). Edge data is always default (NULL is accepted, as on the driver). */
CUresult fk_cuStreamGetCaptureInfo(t4a_fake *f, CUstream h, CUstreamCaptureStatus *status,
                                   cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                   const CUgraphEdgeData **edges, size_t *num_deps) {
  if (status == NULL || (edges != NULL && deps == NULL)) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap == NULL) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  fk_capture *c = s->cap;
  *status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (c->invalidated) return CUDA_SUCCESS;
  if (id != NULL) *id = c->id;
  if (graph != NULL) *graph = (CUgraph)(uintptr_t)c->graph->o.handle;
  size_t n = c->graph->num;
  c->dep = n > 0 ? (CUgraphNode)(uintptr_t)c->graph->nodes[n - 1]->o.handle : NULL;
  if (deps != NULL) *deps = n > 0 ? &c->dep : NULL;
  if (edges != NULL) *edges = NULL;
  if (num_deps != NULL) *num_deps = n > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamIsCapturing(t4a_fake *f, CUstream h, CUstreamCaptureStatus *status) {
  if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap == NULL) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *status = s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                  : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}

/* ---- streams ------------------------------------------------------------------------------ */

static CUresult stream_create(t4a_fake *f, CUstream *ph, unsigned flags, int priority) {
  if (ph == NULL) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  if (priority < FK_PRIORITY_GREATEST) priority = FK_PRIORITY_GREATEST;
  if (priority > FK_PRIORITY_LEAST) priority = FK_PRIORITY_LEAST;
  fk_stream *s = fk_stream_new(f, ctx, flags, priority, 0);
  if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *ph = (CUstream)(uintptr_t)s->o.handle;
  return CUDA_SUCCESS;
}

/* As the driver: the range of the current context's device (the H200 answers 0 and -5). */
CUresult fk_cuCtxGetStreamPriorityRange(t4a_fake *f, int *least, int *greatest) {
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  if (least != NULL) *least = FK_PRIORITY_LEAST;
  if (greatest != NULL) *greatest = FK_PRIORITY_GREATEST;
  return CUDA_SUCCESS;
}

int t4a_fake_stream_priority(t4a_fake *fake, CUstream stream, int *out) {
  if (fake == NULL || out == NULL) return 0;
  fk_lock();
  fk_stream *s = fk_handle_get(fake, FK_H(stream), FK_KIND_STREAM);
  if (s != NULL) *out = s->priority;
  fk_unlock();
  return s != NULL;
}

CUresult fk_cuStreamCreate(t4a_fake *f, CUstream *ph, unsigned int flags) {
  return stream_create(f, ph, flags, 0);
}

CUresult fk_cuStreamCreateWithPriority(t4a_fake *f, CUstream *ph, unsigned int flags,
                                       int priority) {
  return stream_create(f, ph, flags, priority);
}

CUresult fk_cuStreamDestroy(t4a_fake *f, CUstream h) {
  if (is_default_stream_handle(h)) return CUDA_ERROR_INVALID_HANDLE;
  fk_ctx *cur; /* needs a current context (any), as documented */
  CUresult r = fk_need_current(f, &cur);
  if (r != CUDA_SUCCESS) return r;
  fk_stream *s;
  r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap != NULL) fk_capture_end_free(f, s);
  fk_handle_drop(f, &s->o);
  f->live.streams--;
  /* Like the driver: queued work still completes; the stream goes away after it. */
  if (s->head == NULL && !s->visiting && s->pins == 0) {
    fk_stream_free(f, s);
  } else {
    s->user_destroyed = 1;
    f->zombie_streams++;
  }
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamSynchronize(t4a_fake *f, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap != NULL) {
    fk_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  r = fk_drain_stream(f, s);
  fk_pools_trim_on_sync(f);
  if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
  if (r == CUDA_SUCCESS) fk_host_observe(f, &s->vc);
  return r;
}

CUresult fk_cuStreamQuery(t4a_fake *f, CUstream h) {
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  if (s->cap != NULL) {
    fk_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (f->query_policy == T4A_FAKE_QUERY_PROGRESSES) {
    r = fk_drain_stream(f, s);
    if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
    if (r != CUDA_SUCCESS) return r;
  }
  if (s->head != NULL) return CUDA_ERROR_NOT_READY;
  fk_host_observe(f, &s->vc);
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamWaitEvent(t4a_fake *f, CUstream h, CUevent e, unsigned int flags) {
  if ((flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_event *ev = fk_handle_get(f, FK_H(e), FK_KIND_EVENT);
  if (ev == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (!ev->ctx->alive) return CUDA_ERROR_INVALID_CONTEXT;
  if (s->cap != NULL && (flags & CU_EVENT_WAIT_EXTERNAL)) {
    /* An event wait node: at each launch the stream waits for the event's latest record. */
    if (ev->ctx->device != s->ctx->device) return CUDA_ERROR_INVALID_HANDLE;
    fk_op *op = fk_op_new(FK_OP_EVENT_WAIT_NODE);
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.event_node.event = ev->o.handle;
    return fk_submit(f, s, op);
  }
  if (ev->captured_stream != 0) {
    /* Linear graphs only: a capture may wait on its own events, nothing may join a capture. */
    if (s->cap != NULL && ev->captured_stream == s->o.handle) return CUDA_SUCCESS;
    if (s->cap != NULL) fk_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (s->cap != NULL) {
    if (ev->last == NULL || ev->last->done) return CUDA_SUCCESS;
    fk_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (ev->last == NULL) return CUDA_SUCCESS;
  if (ev->last->done) {
    /* Complete already, yet the stream's later work must still be ordered after it. */
    fk_op *wait;
    r = fk_after_done_point(f, s, ev->last, &wait);
    if (r != CUDA_SUCCESS || wait == NULL) return r;
    return fk_submit(f, s, wait);
  }
  fk_op *op = fk_op_new(FK_OP_WAIT);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.wait.point = ev->last;
  ev->last->refs++;
  return fk_submit(f, s, op);
}

CUresult fk_cuStreamSetAttribute(t4a_fake *f, CUstream h, CUstreamAttrID attr,
                                 const CUstreamAttrValue *value) {
  if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  switch (attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow *w = &value->accessPolicyWindow;
      int max_window = 0;
      if (fk_cuDeviceGetAttribute(f, &max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE,
                                  s->ctx->device) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (w->num_bytes > (size_t)max_window) return CUDA_ERROR_INVALID_VALUE;
      if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f)) return CUDA_ERROR_INVALID_VALUE;
      if ((unsigned)w->hitProp > (unsigned)CU_ACCESS_PROPERTY_PERSISTING) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (w->missProp != CU_ACCESS_PROPERTY_NORMAL && w->missProp != CU_ACCESS_PROPERTY_STREAMING) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  s->attrs[attr] = *value;
  s->attr_set[attr] = 1;
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamGetCtx(t4a_fake *f, CUstream h, CUcontext *pctx) {
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  *pctx = (CUcontext)(uintptr_t)s->ctx->o.handle;
  return CUDA_SUCCESS;
}

CUresult fk_cuStreamGetFlags(t4a_fake *f, CUstream h, unsigned int *flags) {
  if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_lookup(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  r = fk_ctx_usable(s->ctx);
  if (r != CUDA_SUCCESS) return r;
  *flags = s->flags; /* the default stream: 0 */
  return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------------- */

void fk_event_free(t4a_fake *f, fk_event *e) {
  if (e->o.handle != 0) {
    fk_handle_drop(f, &e->o);
    f->live.events--;
  }
  fk_point_unref(e->last);
  fk_list_remove(&e->link);
  free(e);
}

CUresult fk_cuEventCreate(t4a_fake *f, CUevent *ph, unsigned int flags) {
  if (ph == NULL) return CUDA_ERROR_INVALID_VALUE;
  unsigned all = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if ((flags & ~all) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  fk_event *e = calloc(1, sizeof *e);
  if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!fk_handle_new(f, &e->o, FK_KIND_EVENT)) {
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  e->ctx = ctx;
  e->flags = flags;
  fk_list_push(&f->events, &e->link);
  f->live.events++;
  *ph = (CUevent)(uintptr_t)e->o.handle;
  return CUDA_SUCCESS;
}

static CUresult event_lookup(t4a_fake *f, CUevent h, fk_event **out) {
  *out = fk_handle_get(f, FK_H(h), FK_KIND_EVENT);
  if (*out == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return fk_ctx_usable((*out)->ctx);
}

CUresult fk_cuEventDestroy(t4a_fake *f, CUevent h) {
  fk_ctx *cur; /* needs a current context (any), as documented */
  CUresult r = fk_need_current(f, &cur);
  if (r != CUDA_SUCCESS) return r;
  fk_event *e;
  r = event_lookup(f, h, &e);
  if (r != CUDA_SUCCESS) return r;
  fk_event_free(f, e);
  return CUDA_SUCCESS;
}

CUresult fk_cuEventRecord(t4a_fake *f, CUevent h, CUstream hs) {
  fk_event *e = fk_handle_get(f, FK_H(h), FK_KIND_EVENT);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, hs, &s);
  if (r != CUDA_SUCCESS) return r;
  if (e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (s->cap != NULL) {
    if (s->cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fk_point_unref(e->last);
    e->last = NULL;
    e->captured_stream = s->o.handle;
    return CUDA_SUCCESS;
  }
  fk_point *p = fk_point_new(s);
  fk_op *op = fk_op_new(FK_OP_RECORD);
  if (p == NULL || op == NULL) {
    free(p);
    free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p->refs++; /* one for the event, one for the marker */
  op->u.record.point = p;
  fk_point_unref(e->last);
  e->last = p;
  e->captured_stream = 0;
  return fk_submit(f, s, op);
}

CUresult fk_cuEventRecordWithFlags(t4a_fake *f, CUevent h, CUstream hs, unsigned int flags) {
  if ((flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, hs, &s);
  if (r != CUDA_SUCCESS) return r;
  if (!(flags & CU_EVENT_RECORD_EXTERNAL) || s->cap == NULL) return fk_cuEventRecord(f, h, hs);
  /* During a capture: an event record node; the event itself is not recorded now. */
  fk_event *e = fk_handle_get(f, FK_H(h), FK_KIND_EVENT);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
  fk_op *op = fk_op_new(FK_OP_EVENT_RECORD_NODE);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.event_node.event = e->o.handle;
  return fk_submit(f, s, op);
}

fk_op *fk_event_node_op(t4a_fake *f, fk_stream *s, const fk_op *node, int *out_none,
                        CUresult *out_result) {
  *out_none = 0;
  *out_result = CUDA_ERROR_OUT_OF_MEMORY;
  fk_event *e = fk_handle_get(f, node->u.event_node.event, FK_KIND_EVENT);
  if (e == NULL || !e->ctx->alive) {
    *out_result = CUDA_ERROR_INVALID_HANDLE; /* destroyed while the graph lives */
    return NULL;
  }
  if (node->kind == FK_OP_EVENT_WAIT_NODE) {
    if (e->last == NULL) {
      *out_none = 1;
      return NULL;
    }
    fk_op *op = fk_op_new(FK_OP_WAIT);
    if (op == NULL) return NULL;
    op->u.wait.point = e->last;
    e->last->refs++;
    return op;
  }
  fk_point *p = fk_point_new(s);
  fk_op *op = fk_op_new(FK_OP_RECORD);
  if (p == NULL || op == NULL) {
    free(p);
    free(op);
    return NULL;
  }
  p->refs++; /* the event's and the marker's */
  op->u.record.point = p;
  fk_point_unref(e->last);
  e->last = p;
  e->captured_stream = 0;
  return op;
}

/* t4a's rule (stricter than the driver): an event is observed under its own context. */
static void note_observer(t4a_fake *f, const fk_event *e) {
  uint64_t cur = fk_current_handle(f);
  if (cur != 0 && cur != e->ctx->o.handle) f->foreign_event_observations++;
}

CUresult fk_cuEventQuery(t4a_fake *f, CUevent h) {
  fk_event *e;
  CUresult r = event_lookup(f, h, &e);
  if (r != CUDA_SUCCESS) return r;
  note_observer(f, e);
  if (e->captured_stream != 0) return CUDA_ERROR_CAPTURED_EVENT;
  if (e->last == NULL) return CUDA_SUCCESS;
  if (!e->last->done && f->query_policy == T4A_FAKE_QUERY_PROGRESSES) {
    r = fk_drain_point(f, e->last);
    if (e->ctx->sticky != CUDA_SUCCESS) return e->ctx->sticky;
    if (r != CUDA_SUCCESS) return r;
  }
  if (!e->last->done) return CUDA_ERROR_NOT_READY;
  fk_host_observe(f, &e->last->vc);
  return CUDA_SUCCESS;
}

CUresult fk_cuEventSynchronize(t4a_fake *f, CUevent h) {
  fk_event *e;
  CUresult r = event_lookup(f, h, &e);
  if (r != CUDA_SUCCESS) return r;
  note_observer(f, e);
  if (e->captured_stream != 0) return CUDA_ERROR_CAPTURED_EVENT;
  r = fk_drain_point(f, e->last);
  fk_pools_trim_on_sync(f);
  if (e->ctx->sticky != CUDA_SUCCESS) return e->ctx->sticky;
  if (r == CUDA_SUCCESS && e->last != NULL && e->last->done) fk_host_observe(f, &e->last->vc);
  return r;
}

CUresult fk_cuEventElapsedTime(t4a_fake *f, float *ms, CUevent start, CUevent end) {
  if (ms == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_event *a, *b;
  CUresult r = event_lookup(f, start, &a);
  if (r != CUDA_SUCCESS) return r;
  r = event_lookup(f, end, &b);
  if (r != CUDA_SUCCESS) return r;
  if ((a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (a->captured_stream != 0 || b->captured_stream != 0) return CUDA_ERROR_CAPTURED_EVENT;
  if (a->last == NULL || b->last == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->last->done || !b->last->done) return CUDA_ERROR_NOT_READY;
  *ms = (float)(((double)b->last->time_ns - (double)a->last->time_ns) / 1e6);
  return CUDA_SUCCESS;
}

/* ---- host functions ------------------------------------------------------------------------ */

static _Thread_local int t_in_host_fn;

int fk_in_host_fn(void) { return t_in_host_fn; }

typedef struct host_call {
  CUhostFn fn;
  void *user;
} host_call;

static void *host_thread(void *arg) {
  host_call *c = arg;
  t_in_host_fn = 1; /* every driver call from here is refused (fk_enter) */
  c->fn(c->user);
  t_in_host_fn = 0;
  return NULL;
}

/* As the driver does, on a thread that is not the caller's: the function runs while the engine
 * (holding the fake's lock) waits for it, so a function that called into the driver and waited
 * there would deadlock, as it can on the real driver; fk_enter refuses such calls first. */
void fk_run_host(t4a_fake *f, const fk_op *op) {
  host_call c = {op->u.host.fn, op->u.host.user};
  pthread_t th;
  if (pthread_create(&th, NULL, host_thread, &c) != 0) {
    host_thread(&c); /* no thread: run it here, still flagged */
  } else {
    pthread_join(th, NULL);
  }
  f->host_fns_run++;
}

CUresult fk_cuLaunchHostFunc(t4a_fake *f, CUstream h, CUhostFn fn, void *user) {
  if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  fk_op *op = fk_op_new(FK_OP_HOST);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.host.fn = fn;
  op->u.host.user = user;
  return fk_submit(f, s, op); /* in a capture: a host node */
}
