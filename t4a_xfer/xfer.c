/* Uploads, downloads and the staging ring (host <-> device on one lane). See t4a/xfer.h. */
#define _GNU_SOURCE
#include "t4a/xfer.h"

#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_xfer/xfer_internal.h"

/* ---- the ring (x->lock held, the lane's context current) ---- */

/* The handle's terminal failure: memoised with its detail; its chunks are quarantined (the state
 * of their DMA is not known, so they are never reused on a guess). */
static void pending_fail(t4a_xfer *x, t4a_xfer_pending *p, t4a_status st) {
  if (p->state != PENDING) return;
  p->state = FAILED;
  t4a_error_last(&p->failure);
  if (p->failure.status != st) {
    (void)t4a_error_set(st, NULL, 0, NULL, 0, "download failed");
    t4a_error_last(&p->failure);
  }
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->owner == p) {
      c->owner = NULL;
      c->state = CHUNK_QUARANTINED;
    }
  }
}

/* Makes an in-flight chunk reusable: asks its event (or waits on it), delivers a held chunk's
 * bytes to its owner's destination. Returns OK (the chunk is FREE), NOT_READY (only without
 * `wait`), or the device's answer (the chunk and its owner are then failed). */
static t4a_status chunk_settle(t4a_xfer *x, chunk *c, int wait) {
  if (c->state == CHUNK_FREE) return T4A_OK;
  t4a_status st;
  if (wait) {
    xfer_count(x, T4A_COUNTER_host_waits, 1);
    st = T4A_CU(x->driver, cuEventSynchronize, c->event);
  } else {
    st = T4A_CU(x->driver, cuEventQuery, c->event);
  }
  if (st == T4A_NOT_READY) return st;
  if (st != T4A_OK) {
    st = t4a_lane_note(x->lane, st);
    if (c->state == CHUNK_HELD && c->owner != NULL) pending_fail(x, c->owner, st);
    c->owner = NULL;
    c->state = CHUNK_QUARANTINED;
    return st;
  }
  if (c->state == CHUNK_HELD) memcpy(c->dst, c->host, c->bytes);
  c->owner = NULL;
  c->dst = NULL;
  c->state = CHUNK_FREE;
  return T4A_OK;
}

/* Hands out the ring's oldest usable chunk, waiting for its DMA if needed (a staging wait). */
t4a_status t4a_xfer_ring_acquire_(t4a_xfer *x, chunk **out) {
  for (uint32_t tries = 0; tries < x->num_chunks; tries++) {
    chunk *c = &x->chunks[x->next];
    x->next = (x->next + 1) % x->num_chunks;
    if (c->state == CHUNK_QUARANTINED) continue;
    t4a_status st = chunk_settle(x, c, 0);
    if (st == T4A_NOT_READY) {
      xfer_count(x, T4A_COUNTER_staging_waits, 1);
      st = chunk_settle(x, c, 1);
    }
    if (st != T4A_OK) return st;
    *out = c;
    return T4A_OK;
  }
  return t4a_error_set(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                       "every staging chunk is quarantined after an earlier failure");
}

/* ---- creation and teardown ---- */

static void xfer_teardown(t4a_xfer *x) {
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  int inflight = 0;
  for (uint32_t i = 0; i < x->num_chunks; i++) inflight |= x->chunks[i].state != CHUNK_FREE;
  t4a_ctx_scope scope;
  int scoped = t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters) == T4A_OK;
  int proved = 0;
  if (scoped) {
    proved = 1;
    if (inflight) {
      /* Proof of drain: every DMA of this ring ran on the lane's stream. */
      xfer_count(x, T4A_COUNTER_host_waits, 1);
      proved = T4A_CU_QUIET(x->driver, cuStreamSynchronize, t4a_lane_stream(x->lane)) == T4A_OK;
    }
  }
  uint64_t leaked = 0;
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->event != NULL) {
      if (!scoped || T4A_CU_QUIET(x->driver, cuEventDestroy, c->event) != T4A_OK) leaked++;
    }
    if (c->pinned != NULL) {
      if (proved || c->state == CHUNK_FREE) {
        t4a_pinned_release(c->pinned);
      } else {
        leaked++; /* its DMA may still read or write it: never freed on a guess */
      }
    }
  }
  xfer_count(x, T4A_COUNTER_leaked, leaked);
  if (scoped) t4a_ctx_scope_exit_quiet(&scope);
  pthread_mutex_destroy(&x->lock);
  t4a_lane_release(x->lane);
  free(x->chunks);
  free(x);
  t4a_error_restore(&saved);
}

static void xfer_unref(t4a_xfer *x) {
  if (x != NULL && atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1) {
    xfer_teardown(x);
  }
}

t4a_status t4a_xfer_create(t4a_retire *retire, const t4a_xfer_options *options, t4a_xfer **out) {
  if (out == NULL || retire == NULL) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or out is NULL");
  }
  *out = NULL;
  size_t chunk_bytes = options != NULL ? options->chunk_bytes : 0;
  uint32_t num_chunks = options != NULL ? options->num_chunks : 0;
  if (chunk_bytes == 0) chunk_bytes = T4A_XFER_DEFAULT_CHUNK_BYTES;
  if (num_chunks == 0) num_chunks = T4A_XFER_DEFAULT_NUM_CHUNKS;
  if (chunk_bytes < T4A_XFER_MIN_CHUNK_BYTES || chunk_bytes > ((size_t)1 << 30) ||
      num_chunks > T4A_XFER_MAX_NUM_CHUNKS) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                         "staging needs 4 KiB..1 GiB chunks and 1..%u of them (got %zu x %u)",
                         T4A_XFER_MAX_NUM_CHUNKS, chunk_bytes, num_chunks);
  }
  t4a_lane *lane = t4a_retire_lane(retire);
  t4a_status st = t4a_lane_check(lane);
  if (st != T4A_OK) return st;
  t4a_xfer *x = t4a_host_calloc(1, sizeof *x);
  if (x == NULL) return T4A_HOST_OUT_OF_MEMORY;
  x->chunks = t4a_host_calloc(num_chunks, sizeof *x->chunks);
  if (x->chunks == NULL) {
    free(x);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&x->lock, NULL) != 0) {
    free(x->chunks);
    free(x);
    return t4a_error_set(T4A_INTERNAL, NULL, 0, NULL, 0, "pthread_mutex_init failed");
  }
  atomic_init(&x->refs, 1);
  x->retire = retire;
  x->lane = lane;
  t4a_lane_retain(lane);
  x->driver = t4a_lane_driver(lane);
  x->counters = t4a_lane_counters(lane);
  x->chunk_bytes = chunk_bytes;
  x->num_chunks = num_chunks;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), x->counters)) != T4A_OK) {
    xfer_teardown(x);
    return st;
  }
  for (uint32_t i = 0; i < num_chunks && st == T4A_OK; i++) {
    chunk *c = &x->chunks[i];
    /* t4a_pinned_create always pins PORTABLE (audit A2): the chunks serve any context. */
    st = t4a_pinned_create(t4a_lane_holder(lane), chunk_bytes, 0, &c->pinned);
    if (st == T4A_OK) {
      c->host = t4a_pinned_host(c->pinned);
      st = T4A_CU(x->driver, cuEventCreate, &c->event, CU_EVENT_DISABLE_TIMING);
    }
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) {
    xfer_teardown(x); /* every chunk is FREE: nothing was enqueued */
    return st;
  }
  *out = x;
  return T4A_OK;
}

void t4a_xfer_destroy(t4a_xfer *x) { xfer_unref(x); }

size_t t4a_xfer_chunk_bytes(const t4a_xfer *x) { return x->chunk_bytes; }
uint32_t t4a_xfer_num_chunks(const t4a_xfer *x) { return x->num_chunks; }
t4a_lane *t4a_xfer_lane(const t4a_xfer *x) { return x->lane; }
void *t4a_xfer_chunk_host(const t4a_xfer *x, uint32_t index) {
  return index < x->num_chunks ? x->chunks[index].host : NULL;
}

/* ---- argument checks ---- */

t4a_status t4a_xfer_check_buffer_(const t4a_xfer *x, const t4a_buffer *buf, size_t offset,
                               size_t bytes) {
  if (buf == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "buffer is NULL");
  if (t4a_buffer_domain(buf) != t4a_lane_domain(x->lane)) {
    return t4a_error_set(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                         "the buffer belongs to domain %llu, this transfer lane to %llu",
                         (unsigned long long)t4a_buffer_domain(buf),
                         (unsigned long long)t4a_lane_domain(x->lane));
  }
  size_t size = t4a_buffer_size(buf);
  if (bytes == 0 || offset > size || bytes > size - offset) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                         "range [%zu, +%zu) is empty or outside the %zu-byte buffer", offset,
                         bytes, size);
  }
  return T4A_OK;
}

t4a_status t4a_xfer_check_pinned_(const t4a_pinned *p, size_t offset, size_t bytes) {
  if (p == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pinned is NULL");
  size_t size = t4a_pinned_size(p);
  if (offset > size || bytes > size - offset) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                         "range [%zu, +%zu) is outside the %zu-byte pinned memory", offset, bytes,
                         size);
  }
  return T4A_OK;
}

static t4a_status check_common(const t4a_xfer *x, const void *host) {
  if (x == NULL || host == NULL) {
    return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer or host memory is NULL");
  }
  return T4A_OK;
}

t4a_keepalive t4a_xfer_buffer_ref_(t4a_buffer *b) {
  t4a_buffer_retain(b);
  return (t4a_keepalive){b, t4a_buffer_release_object};
}
t4a_keepalive t4a_xfer_pinned_ref_(t4a_pinned *p) {
  t4a_pinned_retain(p);
  return (t4a_keepalive){p, t4a_pinned_release_object};
}

/* ---- uploads ---- */

t4a_status t4a_xfer_upload(t4a_xfer *x, t4a_buffer *dst, size_t offset, const void *src,
                           size_t bytes) {
  t4a_status st = check_common(x, src);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, dst, offset, bytes);
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 1, &adm)) != T4A_OK) return st;
  CUstream stream = t4a_lane_stream(x->lane);
  CUdeviceptr base = (CUdeviceptr)t4a_buffer_devptr(dst) + offset;
  const unsigned char *from = src;
  int enqueued = 0;
  pthread_mutex_lock(&x->lock);
  for (size_t done = 0; done < bytes;) {
    chunk *c;
    if ((st = t4a_xfer_ring_acquire_(x, &c)) != T4A_OK) break;
    size_t n = bytes - done < x->chunk_bytes ? bytes - done : x->chunk_bytes;
    /* The caller's bytes go into the chunk before the DMA: the caller may reuse them at once.
     * While this DMA runs, the next iteration fills the next chunk. */
    memcpy(c->host, from + done, n);
    st = T4A_CU(x->driver, cuMemcpyHtoDAsync, base + done, c->host, n, stream);
    if (st == T4A_OK) st = T4A_CU(x->driver, cuEventRecord, c->event, stream);
    enqueued = 1; /* a failed call may still have enqueued its work */
    if (st != T4A_OK) {
      c->state = CHUNK_QUARANTINED;
      break;
    }
    xfer_count(x, T4A_COUNTER_events_recorded, 1);
    c->state = CHUNK_BUSY;
    done += n;
  }
  pthread_mutex_unlock(&x->lock);
  if (st != T4A_OK) {
    if (!enqueued) return t4a_admission_abort(&adm, st);
    t4a_keepalive k = t4a_xfer_buffer_ref_(dst);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  t4a_admission_keep(&adm, t4a_xfer_buffer_ref_(dst));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

t4a_status t4a_xfer_upload_pinned(t4a_xfer *x, t4a_buffer *dst, size_t offset, t4a_pinned *src,
                                  size_t src_offset, size_t bytes) {
  t4a_status st = check_common(x, src);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, dst, offset, bytes);
  if (st == T4A_OK) st = t4a_xfer_check_pinned_(src, src_offset, bytes);
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 2, &adm)) != T4A_OK) return st;
  st = T4A_CU(x->driver, cuMemcpyHtoDAsync, (CUdeviceptr)t4a_buffer_devptr(dst) + offset,
              (unsigned char *)t4a_pinned_host(src) + src_offset, bytes, t4a_lane_stream(x->lane));
  if (st != T4A_OK) {
    t4a_keepalive k[2] = {t4a_xfer_buffer_ref_(dst), t4a_xfer_pinned_ref_(src)};
    return t4a_admission_fail(&adm, st, k, 2);
  }
  t4a_admission_keep(&adm, t4a_xfer_buffer_ref_(dst));
  t4a_admission_keep(&adm, t4a_xfer_pinned_ref_(src));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

/* ---- downloads ---- */

t4a_status t4a_xfer_download(t4a_xfer *x, t4a_buffer *src, size_t offset, void *dst, size_t bytes,
                             t4a_xfer_pending **out) {
  if (out == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_status st = check_common(x, dst);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, src, offset, bytes);
  if (st != T4A_OK) return st;
  t4a_xfer_pending *p = t4a_host_calloc(1, sizeof *p);
  if (p == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 1, &adm)) != T4A_OK) {
    free(p);
    return st;
  }
  CUstream stream = t4a_lane_stream(x->lane);
  CUdeviceptr base = (CUdeviceptr)t4a_buffer_devptr(src) + offset;
  unsigned char *to = dst;
  int enqueued = 0;
  pthread_mutex_lock(&x->lock);
  for (size_t done = 0; done < bytes;) {
    chunk *c;
    /* Wrapping onto one of this download's own chunks delivers that chunk's bytes first (after
     * its DMA completed): a download larger than the ring writes its leading part here. */
    if ((st = t4a_xfer_ring_acquire_(x, &c)) != T4A_OK) break;
    size_t n = bytes - done < x->chunk_bytes ? bytes - done : x->chunk_bytes;
    st = T4A_CU(x->driver, cuMemcpyDtoHAsync, c->host, base + done, n, stream);
    if (st == T4A_OK) st = T4A_CU(x->driver, cuEventRecord, c->event, stream);
    enqueued = 1;
    if (st != T4A_OK) {
      c->state = CHUNK_QUARANTINED;
      break;
    }
    xfer_count(x, T4A_COUNTER_events_recorded, 1);
    c->state = CHUNK_HELD;
    c->owner = p;
    c->dst = to + done;
    c->bytes = n;
    done += n;
  }
  if (st != T4A_OK) {
    /* No handle is returned: nothing may be written to `dst` from now on. */
    for (uint32_t i = 0; i < x->num_chunks; i++) {
      if (x->chunks[i].owner == p) {
        x->chunks[i].owner = NULL;
        x->chunks[i].state = CHUNK_ORPHAN;
      }
    }
  }
  pthread_mutex_unlock(&x->lock);
  if (st != T4A_OK) {
    free(p);
    if (!enqueued) return t4a_admission_abort(&adm, st);
    t4a_keepalive k = t4a_xfer_buffer_ref_(src);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  t4a_admission_keep(&adm, t4a_xfer_buffer_ref_(src));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_downloaded, bytes);
  atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
  p->x = x;
  *out = p;
  return T4A_OK;
}

t4a_status t4a_xfer_download_pinned(t4a_xfer *x, t4a_buffer *src, size_t offset, t4a_pinned *dst,
                                    size_t dst_offset, size_t bytes, t4a_xfer_pending **out) {
  if (out == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_status st = check_common(x, dst);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(x, src, offset, bytes);
  if (st == T4A_OK) st = t4a_xfer_check_pinned_(dst, dst_offset, bytes);
  if (st != T4A_OK) return st;
  t4a_xfer_pending *p = t4a_host_calloc(1, sizeof *p);
  if (p == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 2, &adm)) != T4A_OK) {
    free(p);
    return st;
  }
  CUstream stream = t4a_lane_stream(x->lane);
  if ((st = T4A_CU(x->driver, cuEventCreate, &p->event, CU_EVENT_DISABLE_TIMING)) != T4A_OK) {
    free(p);
    return t4a_admission_abort(&adm, st);
  }
  st = T4A_CU(x->driver, cuMemcpyDtoHAsync, (unsigned char *)t4a_pinned_host(dst) + dst_offset,
              (CUdeviceptr)t4a_buffer_devptr(src) + offset, bytes, stream);
  if (st == T4A_OK) st = T4A_CU(x->driver, cuEventRecord, p->event, stream);
  if (st != T4A_OK) {
    /* The driver defers destroying an event whose record is pending. */
    if (T4A_CU_QUIET(x->driver, cuEventDestroy, p->event) != T4A_OK) xfer_count(x, T4A_COUNTER_leaked, 1);
    free(p);
    t4a_keepalive k[2] = {t4a_xfer_buffer_ref_(src), t4a_xfer_pinned_ref_(dst)};
    return t4a_admission_fail(&adm, st, k, 2);
  }
  xfer_count(x, T4A_COUNTER_events_recorded, 1);
  t4a_admission_keep(&adm, t4a_xfer_buffer_ref_(src));
  t4a_admission_keep(&adm, t4a_xfer_pinned_ref_(dst));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_downloaded, bytes);
  atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
  p->x = x;
  *out = p;
  return T4A_OK;
}

/* ---- pending handles ---- */

static t4a_status pending_observe(t4a_xfer_pending *p, int wait) {
  if (p == NULL) return t4a_error_set(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "pending is NULL");
  t4a_xfer *x = p->x;
  pthread_mutex_lock(&x->lock);
  if (p->state == DELIVERED) {
    pthread_mutex_unlock(&x->lock);
    return t4a_error_set(T4A_ALREADY_CONSUMED, NULL, 0, NULL, 0,
                         "the download's bytes were already delivered");
  }
  if (p->state == FAILED) {
    t4a_error_restore(&p->failure);
    pthread_mutex_unlock(&x->lock);
    return p->failure.status;
  }
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters);
  if (st != T4A_OK) { /* could not ask: nothing is known about the work, nothing memoised */
    pthread_mutex_unlock(&x->lock);
    return st;
  }
  if (p->event != NULL) {
    if (wait) {
      xfer_count(x, T4A_COUNTER_host_waits, 1);
      st = T4A_CU(x->driver, cuEventSynchronize, p->event);
    } else {
      st = T4A_CU(x->driver, cuEventQuery, p->event);
    }
    if (st != T4A_OK && st != T4A_NOT_READY) {
      st = t4a_lane_note(x->lane, st);
      pending_fail(x, p, st);
    }
  } else {
    /* Every chunk still held must be complete; each settles (and delivers) on its own answer. */
    for (uint32_t i = 0; i < x->num_chunks && st == T4A_OK; i++) {
      chunk *c = &x->chunks[(x->next + i) % x->num_chunks]; /* oldest first */
      if (c->owner == p) st = chunk_settle(x, c, wait);
    }
  }
  /* Delivered: the bytes are in the caller's memory and this call says so. A failed restore of
   * the caller's context is counted (ctx_restore_failures), not reported in place of the OK that
   * no later call could repeat. */
  if (st == T4A_OK) p->state = DELIVERED;
  t4a_ctx_scope_exit_quiet(&scope);
  pthread_mutex_unlock(&x->lock);
  return st;
}

t4a_status t4a_xfer_pending_poll(t4a_xfer_pending *p) { return pending_observe(p, 0); }
t4a_status t4a_xfer_pending_wait(t4a_xfer_pending *p) { return pending_observe(p, 1); }

void t4a_xfer_pending_release(t4a_xfer_pending *p) {
  if (p == NULL) return;
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_xfer *x = p->x;
  pthread_mutex_lock(&x->lock);
  /* Chunks still in flight stay out of the ring until their DMA completes; no delivery. */
  for (uint32_t i = 0; i < x->num_chunks; i++) {
    chunk *c = &x->chunks[i];
    if (c->owner == p) {
      c->owner = NULL;
      c->state = CHUNK_ORPHAN;
    }
  }
  pthread_mutex_unlock(&x->lock);
  if (p->event != NULL) {
    t4a_ctx_scope scope;
    if (t4a_ctx_scope_enter(&scope, t4a_lane_holder(x->lane), x->counters) == T4A_OK) {
      if (T4A_CU_QUIET(x->driver, cuEventDestroy, p->event) != T4A_OK) {
        xfer_count(x, T4A_COUNTER_leaked, 1);
      }
      t4a_ctx_scope_exit_quiet(&scope);
    } else {
      xfer_count(x, T4A_COUNTER_leaked, 1);
    }
  }
  free(p);
  xfer_unref(x);
  t4a_error_restore(&saved);
}
