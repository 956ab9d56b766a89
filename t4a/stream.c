/* Further streams of a runtime (t4a/t4a.h, "Streams"; design §16): each a sibling lane of the
 * runtime's lane (t4a_lane_create_sibling: the same context holder and allocation domain, its own
 * CUstream and priority) with its own t4a_retire, sharing the runtime's pool, module cache and
 * descriptor table. Buffers used on several streams are ordered by t4a_mem's marks (design §6). */
#include <pthread.h>
#include <stdlib.h>

#include "t4a/runtime_internal.h"
#include "t4a/t4a.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_retire/retire_internal.h"

static t4a_status null_runtime(void) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "the runtime is NULL");
}

t4a_status t4a_runtime_stream_resolve_(t4a_runtime *rt, t4a_stream *stream, t4a_lane **lane,
                                       t4a_retire **retire) {
  if (lane != NULL) *lane = NULL;
  if (retire != NULL) *retire = NULL;
  if (rt == NULL) return null_runtime();
  if (stream == NULL) {
    if (lane != NULL) *lane = rt->lane;
    if (retire != NULL) *retire = rt->retire;
    return T4A_OK;
  }
  if (stream->rt != rt) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the stream belongs to another runtime (domain %llu, this runtime's "
                          "%llu)",
                          (unsigned long long)t4a_lane_domain(stream->lane),
                          (unsigned long long)t4a_lane_domain(rt->lane));
  }
  if (lane != NULL) *lane = stream->lane;
  if (retire != NULL) *retire = stream->retire;
  return T4A_OK;
}

t4a_status t4a_runtime_priority_range(t4a_runtime *rt, int *out_least, int *out_greatest) {
  if (rt == NULL) return null_runtime();
  return t4a_lane_priority_range(rt->lane, out_least, out_greatest);
}

t4a_status t4a_stream_create(t4a_runtime *rt, const t4a_stream_options *options,
                             t4a_stream **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (rt == NULL) return null_runtime();
  t4a_stream_options o = T4A_STREAM_OPTIONS_INIT;
  if (options != NULL) o = *options;
  t4a_stream *s = t4a_host_calloc(1, sizeof *s);
  if (s == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_lane_options lo = T4A_LANE_OPTIONS_INIT;
  lo.priority = o.priority;
  t4a_status st = t4a_lane_create_sibling(rt->lane, &lo, &s->lane);
  if (st == T4A_OK) st = t4a_retire_create(s->lane, &o.retire, &s->retire);
  if (st != T4A_OK) {
    t4a_error saved;
    t4a_error_last(&saved);
    (void)t4a_retire_destroy(s->retire); /* nothing admitted: a drain of an empty stream */
    t4a_lane_release(s->lane);
    free(s);
    t4a_error_restore(&saved);
    return st;
  }
  s->rt = rt;
  pthread_mutex_lock(&rt->lock);
  s->next = rt->streams;
  if (rt->streams != NULL) rt->streams->prev = s;
  rt->streams = s;
  pthread_mutex_unlock(&rt->lock);
  *out = s;
  return T4A_OK;
}

/* Tears one stream down (unlinked already): its staging ring, its retire (a proved drain of its
 * stream, or leaks counted and the lane abandoned), its lane. */
static t4a_status stream_teardown(t4a_stream *s) {
  t4a_xfer_destroy(s->xfer);
  t4a_status st = t4a_retire_destroy(s->retire);
  t4a_lane_release(s->lane);
  free(s);
  return st;
}

t4a_status t4a_stream_destroy(t4a_runtime *rt, t4a_stream *stream) {
  if (stream == NULL) return T4A_OK;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, NULL, NULL);
  if (st != T4A_OK) return st;
  /* From inside the stream's own admission (a raw scope on it) nothing is torn down. */
  if (t4a_retire_held_by_this_thread_(stream->retire)) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "t4a_stream_destroy called from inside one of the stream's own "
                          "admissions (a raw scope's callback): nothing was destroyed");
  }
  pthread_mutex_lock(&rt->lock);
  if (stream->prev != NULL) {
    stream->prev->next = stream->next;
  } else {
    rt->streams = stream->next;
  }
  if (stream->next != NULL) stream->next->prev = stream->prev;
  pthread_mutex_unlock(&rt->lock);
  return stream_teardown(stream);
}

int t4a_runtime_streams_held_(t4a_runtime *rt) {
  int held = 0;
  pthread_mutex_lock(&rt->lock);
  for (t4a_stream *s = rt->streams; s != NULL && !held; s = s->next) {
    held = t4a_retire_held_by_this_thread_(s->retire);
  }
  pthread_mutex_unlock(&rt->lock);
  return held;
}

t4a_status t4a_runtime_streams_close_(t4a_runtime *rt) {
  t4a_status first = T4A_OK;
  t4a_error detail;
  for (;;) {
    pthread_mutex_lock(&rt->lock);
    t4a_stream *s = rt->streams;
    if (s != NULL) {
      rt->streams = s->next;
      if (s->next != NULL) s->next->prev = NULL;
    }
    pthread_mutex_unlock(&rt->lock);
    if (s == NULL) break;
    t4a_status st = stream_teardown(s);
    if (st != T4A_OK && first == T4A_OK) {
      first = st;
      t4a_error_last(&detail);
    }
  }
  if (first != T4A_OK) t4a_error_restore(&detail);
  return first;
}

t4a_lane *t4a_stream_lane(const t4a_stream *stream) {
  return stream != NULL ? stream->lane : NULL;
}
t4a_retire *t4a_stream_retire(const t4a_stream *stream) {
  return stream != NULL ? stream->retire : NULL;
}

t4a_status t4a_stream_xfer(t4a_runtime *rt, t4a_stream *stream, t4a_xfer **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, NULL, NULL);
  if (st != T4A_OK) return st;
  if (stream == NULL) {
    *out = rt->xfer;
    return T4A_OK;
  }
  pthread_mutex_lock(&rt->lock);
  if (stream->xfer == NULL) st = t4a_xfer_create(stream->retire, &rt->xfer_options, &stream->xfer);
  *out = stream->xfer;
  pthread_mutex_unlock(&rt->lock);
  return st;
}

t4a_status t4a_stream_wait(t4a_runtime *rt, t4a_stream *waiter, t4a_stream *target) {
  t4a_lane *wl = NULL, *tl = NULL;
  t4a_retire *wr = NULL;
  t4a_status st = t4a_runtime_stream_resolve_(rt, waiter, &wl, &wr);
  if (st == T4A_OK) st = t4a_runtime_stream_resolve_(rt, target, &tl, NULL);
  if (st != T4A_OK) return st;
  if (wl == tl) return T4A_OK; /* stream order */
  /* Inside an admission on the waiter (its lock, its context current): a mark of the target's
   * work so far, then the waiter ordered after it through the domain's markers — one event on
   * the target, one wait on the waiter, no host wait; and buffers allocated or used on the
   * target before need no further order on the waiter (the marks are covered). */
  t4a_admission adm;
  if ((st = t4a_admission_begin(wr, 0, &adm)) != T4A_OK) return st;
  st = t4a_lane_order_after_(wl, t4a_lane_mark_now_(tl));
  if (st != T4A_OK) return t4a_admission_abort(&adm, st);
  t4a_admission_commit(&adm);
  return T4A_OK;
}

t4a_status t4a_stream_sync(t4a_runtime *rt, t4a_stream *stream) {
  t4a_retire *r = NULL;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, NULL, &r);
  if (st != T4A_OK) return st;
  return t4a_retire_wait(r);
}

/* ---- the short paths on a stream ---- */

t4a_status t4a_runtime_launch_on(t4a_runtime *rt, t4a_stream *stream, t4a_function *function,
                                 uint32_t grid, uint32_t block, const t4a_arg *args,
                                 uint32_t num_args) {
  t4a_retire *r = NULL;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, NULL, &r);
  if (st != T4A_OK) return st;
  t4a_launch_config c = {{grid, 1, 1}, {block, 1, 1}, 0};
  return t4a_launch(r, function, &c, args, num_args);
}

t4a_status t4a_runtime_fire_on(t4a_runtime *rt, t4a_stream *stream, uint32_t id) {
  t4a_retire *r = NULL;
  t4a_status st = t4a_runtime_stream_resolve_(rt, stream, NULL, &r);
  if (st != T4A_OK) return st;
  return t4a_descriptor_fire_on(rt->table, r, id);
}

t4a_status t4a_runtime_upload_on(t4a_runtime *rt, t4a_stream *stream, t4a_buffer *dst,
                                 size_t offset, const void *src, size_t bytes) {
  t4a_xfer *x = NULL;
  t4a_status st = t4a_stream_xfer(rt, stream, &x);
  if (st != T4A_OK) return st;
  return t4a_xfer_upload(x, dst, offset, src, bytes);
}

t4a_status t4a_runtime_download_on(t4a_runtime *rt, t4a_stream *stream, t4a_buffer *src,
                                   size_t offset, void *dst, size_t bytes) {
  t4a_xfer *x = NULL;
  t4a_status st = t4a_stream_xfer(rt, stream, &x);
  if (st != T4A_OK) return st;
  t4a_xfer_pending *p = NULL;
  st = t4a_xfer_download(x, src, offset, dst, bytes, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  t4a_xfer_pending_release(p);
  return st;
}

t4a_status t4a_runtime_copy_on(t4a_runtime *rt, t4a_stream *stream, t4a_buffer *dst,
                               size_t dst_offset, t4a_buffer *src, size_t src_offset,
                               size_t bytes) {
  t4a_xfer *x = NULL;
  t4a_status st = t4a_stream_xfer(rt, stream, &x);
  if (st != T4A_OK) return st;
  return t4a_xfer_copy(x, dst, dst_offset, x, src, src_offset, bytes, T4A_COPY_AUTO, NULL, NULL);
}
