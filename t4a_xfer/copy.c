/* Copies between device buffers of two lanes (or one). See t4a/xfer_copy.h. */
#define _GNU_SOURCE
#include "t4a/xfer_copy.h"

#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_xfer/xfer_internal.h"

/* How one side's admission ends. Ends run in the reverse order of the begins, so each admission's
 * context scope is closed innermost first and the caller's context comes back last. */
enum { END_COMMIT = 0, END_ABORT, END_FAIL };

typedef struct side {
  t4a_xfer *x;
  t4a_admission adm;
  int open;
  int end;
  t4a_status status;       /* ABORT / FAIL: noted against this side's lane */
  t4a_buffer *uncertain;   /* FAIL: quarantined (a reference is taken at the end) */
  t4a_buffer *keep;        /* COMMIT: kept alive by this side's open epoch */
} side;

typedef struct pair {
  side *first, *second; /* in lock (domain) order */
} pair;

static t4a_status pair_begin(pair *p, side *d, side *s) {
  int dst_first = t4a_lane_domain(d->x->lane) < t4a_lane_domain(s->x->lane);
  p->first = dst_first ? d : s;
  p->second = dst_first ? s : d;
  t4a_status st = t4a_admission_begin(p->first->x->retire, 1, &p->first->adm);
  if (st != T4A_OK) return st;
  p->first->open = 1;
  if ((st = t4a_admission_begin(p->second->x->retire, 1, &p->second->adm)) != T4A_OK) {
    p->first->open = 0;
    /* The second lane's failure is not the first lane's: nothing noted against it. */
    (void)t4a_admission_abort(&p->first->adm, T4A_OK);
    return st;
  }
  p->second->open = 1;
  return T4A_OK;
}

static void side_end(side *sd) {
  if (!sd->open) return;
  sd->open = 0;
  if (sd->end == END_ABORT) {
    (void)t4a_admission_abort(&sd->adm, sd->status);
  } else if (sd->end == END_FAIL) {
    /* Commits what was enqueued, notes the status against this lane (a sticky error marks its
     * context lost) and quarantines the uncertain buffer, if any. */
    t4a_keepalive k = {NULL, NULL, 0};
    if (sd->uncertain != NULL) k = t4a_xfer_buffer_ref_(sd->uncertain);
    (void)t4a_admission_fail(&sd->adm, sd->status, &k, sd->uncertain != NULL);
  } else {
    if (sd->keep != NULL) t4a_admission_keep(&sd->adm, t4a_xfer_buffer_ref_(sd->keep));
    t4a_admission_commit(&sd->adm);
  }
}

/* Ends both admissions (innermost first) and returns `st`, whose error detail is kept. */
static t4a_status pair_end(pair *p, t4a_status st) {
  t4a_error saved;
  t4a_error_last(&saved);
  side_end(p->second);
  side_end(p->first);
  if (st != T4A_OK) t4a_error_restore(&saved);
  return st;
}

static void end_abort(side *sd, t4a_status st) {
  sd->end = END_ABORT;
  sd->status = st;
}
static void end_fail(side *sd, t4a_status st, t4a_buffer *uncertain) {
  sd->end = END_FAIL;
  sd->status = st;
  sd->uncertain = uncertain;
}

/* ---- path choice ---- */

t4a_status t4a_xfer_copy_plan(t4a_xfer *dx, t4a_xfer *sx, t4a_copy_path path,
                              t4a_copy_path *out_path) {
  if (dx == NULL || sx == NULL || out_path == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer or out_path is NULL");
  }
  *out_path = T4A_COPY_AUTO;
  int dev_d = t4a_lane_ordinal(dx->lane), dev_s = t4a_lane_ordinal(sx->lane);
  if ((unsigned)path > T4A_COPY_STAGED) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "unknown copy path %d",
                          (int)path);
  }
  if (dev_d == dev_s) {
    if (path != T4A_COPY_AUTO && path != T4A_COPY_SAME_DEVICE) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "both lanes are on device %d: a %s copy needs two devices", dev_d,
                            path == T4A_COPY_PEER ? "peer" : "staged");
    }
    *out_path = T4A_COPY_SAME_DEVICE;
    return T4A_OK;
  }
  if (path == T4A_COPY_SAME_DEVICE) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "the lanes are on devices %d and %d, not one", dev_d, dev_s);
  }
  if (path == T4A_COPY_STAGED) {
    *out_path = T4A_COPY_STAGED;
    return T4A_OK;
  }
  int can = 0;
  t4a_status st = t4a_device_can_access_peer(t4a_lane_driver(dx->lane), dev_d, dev_s, &can);
  if (st != T4A_OK) return st;
  if (!can && path == T4A_COPY_PEER) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuDeviceCanAccessPeer", 0, NULL, 0,
                          "a peer copy was requested but device %d cannot access device %d",
                          dev_d, dev_s);
  }
  *out_path = can ? T4A_COPY_PEER : T4A_COPY_STAGED;
  return T4A_OK;
}

/* ---- one lane ---- */

static t4a_status copy_one_lane(t4a_xfer *x, t4a_buffer *dst, size_t doff, t4a_buffer *src,
                                size_t soff, size_t bytes, t4a_witness **out_witness) {
  t4a_admission adm;
  t4a_status st = t4a_admission_begin(x->retire, 2, &adm);
  if (st != T4A_OK) return st;
  if ((st = t4a_buffer_use_on_(dst, x->lane)) != T4A_OK ||
      (st = t4a_buffer_use_on_(src, x->lane)) != T4A_OK) {
    return t4a_admission_abort(&adm, st);
  }
  st = T4A_CU_BYTES(x->driver, bytes, cuMemcpyDtoDAsync,
                    (CUdeviceptr)t4a_buffer_devptr(dst) + doff,
                    (CUdeviceptr)t4a_buffer_devptr(src) + soff, bytes, t4a_lane_stream(x->lane));
  if (st != T4A_OK) {
    /* The source is read on this stream, so its later frees stay ordered (marked, when it is
     * another stream's buffer): only dst is unsure. */
    (void)t4a_buffer_used_on_(src, x->lane);
    t4a_keepalive k = t4a_xfer_buffer_ref_(dst);
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  if (out_witness != NULL) st = t4a_admission_record(&adm, out_witness);
  t4a_xfer_keep_buffer_(&adm, x->lane, dst);
  /* Stream order covers the source's later free, except under a graph capture, where the copy
   * runs at each replay: then this keepalive goes to the graph. (Deduplicated per epoch.) */
  t4a_xfer_keep_buffer_(&adm, x->lane, src);
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_copies_same_device, 1); /* admitted, even if no witness came back */
  return st;
}

/* ---- the bracket: same device (two lanes) or peer ---- */

static t4a_status copy_bracket(t4a_xfer *dx, t4a_buffer *dst, size_t doff, t4a_xfer *sx,
                               t4a_buffer *src, size_t soff, size_t bytes, t4a_copy_path path,
                               t4a_witness **out_witness) {
  side d = {.x = dx}, s = {.x = sx};
  pair p;
  t4a_status st = pair_begin(&p, &d, &s);
  if (st != T4A_OK) return st;
  t4a_witness *ready = NULL, *done = NULL;
  /* 1. Source-ready: everything admitted on the source lane so far (its writes to src). */
  if ((st = t4a_admission_record(&s.adm, &ready)) != T4A_OK) {
    end_abort(&s, st);
    end_abort(&d, T4A_OK);
    return pair_end(&p, st);
  }
  /* 2. The destination stream waits for it. */
  if ((st = t4a_admission_wait(&d.adm, ready)) != T4A_OK) {
    end_abort(&d, st);
    t4a_witness_release(ready);
    return pair_end(&p, st);
  }
  /* 3. The copy, on the destination stream (peer: the destination device reads the source). */
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(dx->lane), dx->counters)) == T4A_OK) {
    st = T4A_CU_BYTES(dx->driver, bytes, cuMemcpyDtoDAsync,
                      (CUdeviceptr)t4a_buffer_devptr(dst) + doff,
                      (CUdeviceptr)t4a_buffer_devptr(src) + soff, bytes,
                      t4a_lane_stream(dx->lane));
    t4a_ctx_scope_exit_quiet(&scope);
    /* 4. Destination-done. */
    if (st == T4A_OK) st = t4a_admission_record(&d.adm, &done);
    if (st != T4A_OK) {
      /* The copy may be queued and nothing orders the source's stream after it. */
      end_fail(&d, st, dst);
      end_fail(&s, T4A_UPSTREAM_FAILED, src);
      t4a_witness_release(ready);
      return pair_end(&p, st);
    }
  } else {
    end_abort(&d, st);
    t4a_witness_release(ready);
    return pair_end(&p, st);
  }
  /* 5. The back-wait: later frees and reuse of src on its own stream follow the copy. */
  if ((st = t4a_admission_wait(&s.adm, done)) != T4A_OK) {
    end_fail(&s, st, src);
    d.keep = dst;
    t4a_witness_release(ready);
    t4a_witness_release(done);
    return pair_end(&p, st);
  }
  d.keep = dst;
  xfer_count(dx, path == T4A_COPY_PEER ? T4A_COUNTER_copies_peer : T4A_COUNTER_copies_same_device,
             1);
  (void)pair_end(&p, T4A_OK);
  if (out_witness != NULL) {
    /* Observers query the source's event under the source's context, then the destination's.
     * (If the upstream cannot be added, `done` alone still proves the copy: its stream waited.) */
    if (t4a_witness_add_upstream(done, ready) != T4A_OK) t4a_error_clear();
    *out_witness = done;
    done = NULL;
  }
  t4a_witness_release(ready);
  t4a_witness_release(done);
  return T4A_OK;
}

/* ---- staged through the destination's ring ---- */

static t4a_status copy_staged(t4a_xfer *dx, t4a_buffer *dst, size_t doff, t4a_xfer *sx,
                              t4a_buffer *src, size_t soff, size_t bytes,
                              t4a_witness **out_witness) {
  side d = {.x = dx}, s = {.x = sx};
  pair p;
  t4a_status st = pair_begin(&p, &d, &s);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(dx->lane), dx->counters)) == T4A_OK) {
    st = t4a_xfer_refuse_capture_(dx);
    /* A copy spanning more chunks than the destination's ring has grows it (to its depth). */
    if (st == T4A_OK) t4a_xfer_ring_grow_(dx, (bytes + dx->chunk_bytes - 1) / dx->chunk_bytes);
    t4a_ctx_scope_exit_quiet(&scope);
  }
  if (st != T4A_OK) {
    end_abort(&d, st);
    end_abort(&s, T4A_OK);
    return pair_end(&p, st);
  }
  CUstream sstream = t4a_lane_stream(sx->lane), dstream = t4a_lane_stream(dx->lane);
  CUdeviceptr from = (CUdeviceptr)t4a_buffer_devptr(src) + soff;
  CUdeviceptr to = (CUdeviceptr)t4a_buffer_devptr(dst) + doff;
  size_t count = (bytes + dx->chunk_bytes - 1) / dx->chunk_bytes;
  int src_enqueued = 0, src_failed = 0, dst_enqueued = 0, dst_uncertain = 0;
  t4a_witness *last = NULL;
  size_t done = 0, index = 0;
  for (; done < bytes; index++) {
    chunk *c;
    size_t n = bytes - done < dx->chunk_bytes ? bytes - done : dx->chunk_bytes;
    /* The ring's events are the destination's: asked under its context. The chunk is handed out
     * FILLING, so the enqueues below run without dx->lock (see xfer_internal.h). */
    if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(dx->lane), dx->counters)) != T4A_OK) {
      break;
    }
    pthread_mutex_lock(&dx->lock);
    st = t4a_xfer_ring_acquire_(dx, n, &c);
    if (st == T4A_OK) c->state = CHUNK_FILLING;
    pthread_mutex_unlock(&dx->lock);
    t4a_ctx_scope_exit_quiet(&scope);
    if (st != T4A_OK) break;
    /* Source side: device -> chunk on the source stream, then this chunk's source witness. */
    t4a_witness *ready = NULL;
    int touched = 0; /* a copy into this chunk may be queued on the source stream */
    if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(sx->lane), sx->counters)) == T4A_OK) {
      st = T4A_CU_BYTES(sx->driver, n, cuMemcpyDtoHAsync, c->host, from + done, n, sstream);
      src_enqueued = touched = 1;
      t4a_ctx_scope_exit_quiet(&scope);
      if (st == T4A_OK) st = t4a_admission_record(&s.adm, &ready);
    }
    if (st != T4A_OK) {
      src_failed = 1;
      pthread_mutex_lock(&dx->lock);
      if (touched) {
        /* The chunk may still be written by the source's copy: never reused on a guess. */
        t4a_xfer_chunk_quarantine_(dx, c, 0);
      } else {
        c->state = CHUNK_FREE; /* nothing was asked of it */
      }
      pthread_mutex_unlock(&dx->lock);
      break;
    }
    /* Destination side: wait for the chunk, chunk -> device, the chunk's event (local commit). */
    st = t4a_admission_wait(&d.adm, ready);
    t4a_witness_release(last);
    last = ready;
    int waited = st == T4A_OK; /* the ring's stream is ordered after the source's copy */
    if (st == T4A_OK) {
      dst_enqueued = 1;
      if ((st = t4a_ctx_scope_enter(&scope, t4a_lane_holder(dx->lane), dx->counters)) ==
          T4A_OK) {
        st = T4A_CU_BYTES(dx->driver, n, cuMemcpyHtoDAsync, to + done, c->host, n, dstream);
        if (st == T4A_OK) st = T4A_CU(dx->driver, cuEventRecord, c->event, dstream);
        if (st != T4A_OK) dst_uncertain = 1;
        t4a_ctx_scope_exit_quiet(&scope);
      }
    }
    pthread_mutex_lock(&dx->lock);
    if (st != T4A_OK) {
      /* Once the ring's stream waited for the source's copy into the chunk, a later completion
       * on it proves that copy and the failed one finished (reclaimable); before, the source's
       * stream may still write the chunk (foreign: never reused on a guess). */
      t4a_xfer_chunk_quarantine_(dx, c, waited);
      pthread_mutex_unlock(&dx->lock);
      break;
    }
    /* The event follows the chunk's copy on the ring's own stream: its completion proves
     * earlier work there (the ring's reclaim rule). */
    t4a_xfer_chunk_recorded_(dx, c);
    c->state = CHUNK_BUSY;
    pthread_mutex_unlock(&dx->lock);
    xfer_count(dx, T4A_COUNTER_events_recorded, 1);
    done += n;
  }
  if (st != T4A_OK) {
    st = t4a_xfer_name_chunk_(st, src_failed ? "source side" : "destination side", index, count,
                              done, bytes - done < dx->chunk_bytes ? bytes - done
                                                                   : dx->chunk_bytes);
    /* The source was only read, on its own stream: its frees stay ordered after the reads, so
     * it is never quarantined here; its own failure is noted against its lane. */
    if (src_enqueued) {
      end_fail(&s, src_failed ? st : T4A_OK, NULL);
    } else {
      end_abort(&s, src_failed ? st : T4A_OK);
    }
    if (dst_uncertain) {
      end_fail(&d, st, dst);
    } else if (dst_enqueued) {
      d.keep = dst;
    } else {
      end_abort(&d, T4A_OK);
    }
    t4a_witness_release(last);
    return pair_end(&p, st);
  }
  t4a_witness *result = NULL;
  if (out_witness != NULL) {
    if ((st = t4a_admission_record(&d.adm, &result)) == T4A_OK) {
      /* The last source witness, as in the bracket (best effort, see there). */
      if (t4a_witness_add_upstream(result, last) != T4A_OK) t4a_error_clear();
    }
  }
  d.keep = dst;
  xfer_count(dx, T4A_COUNTER_copies_staged, 1); /* admitted, even if no witness came back */
  (void)pair_end(&p, st);
  t4a_witness_release(last);
  if (out_witness != NULL) *out_witness = result;
  return st;
}

/* ---- entry ---- */

t4a_status t4a_xfer_copy(t4a_xfer *dx, t4a_buffer *dst, size_t doff, t4a_xfer *sx,
                         t4a_buffer *src, size_t soff, size_t bytes, t4a_copy_path path,
                         t4a_copy_path *out_path, t4a_witness **out_witness) {
  if (out_path != NULL) *out_path = T4A_COPY_AUTO;
  if (out_witness != NULL) *out_witness = NULL;
  if (dx == NULL || sx == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "an xfer is NULL");
  }
  t4a_status st = t4a_xfer_check_buffer_(dx, dst, doff, bytes);
  if (st == T4A_OK) st = t4a_xfer_check_buffer_(sx, src, soff, bytes);
  if (st != T4A_OK) return st;
  if (dst == src && doff < soff + bytes && soff < doff + bytes) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "source [%zu, +%zu) and destination [%zu, +%zu) overlap in one buffer",
                          soff, bytes, doff, bytes);
  }
  t4a_copy_path taken;
  if ((st = t4a_xfer_copy_plan(dx, sx, path, &taken)) != T4A_OK) return st;
  if (t4a_lane_domain(dx->lane) == t4a_lane_domain(sx->lane)) {
    st = copy_one_lane(dx, dst, doff, src, soff, bytes, out_witness);
  } else if (taken == T4A_COPY_STAGED) {
    st = copy_staged(dx, dst, doff, sx, src, soff, bytes, out_witness);
  } else {
    if (taken == T4A_COPY_PEER) {
      /* Once per pair / pool: the destination context reaches the source's memory. */
      st = t4a_ctx_holder_enable_peer(t4a_lane_holder(dx->lane), t4a_lane_holder(sx->lane));
      /* A view of module memory (a module global) has no pool to grant access to. */
      if (st == T4A_OK && t4a_buffer_pool(src) != NULL) {
        st = t4a_mem_pool_grant_access(t4a_buffer_pool(src), t4a_lane_holder(dx->lane));
      }
      if (st != T4A_OK) return st;
    }
    st = copy_bracket(dx, dst, doff, sx, src, soff, bytes, taken, out_witness);
  }
  if (st == T4A_OK && out_path != NULL) *out_path = taken;
  return st;
}
