/* Raw scopes: a caller's function run inside one admission, with native handles. See t4a/raw.h. */
#include "t4a/raw.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_retire/retire_internal.h"

/* Bindings up to this many unique buffers live on t4a_raw_run's stack: no heap allocation. */
#define RAW_STACK_BINDINGS 16
/* The most bindings one scope takes (t4a_retire's bound on one epoch's keepalives). */
#define RAW_MAX_BINDINGS ((size_t)1 << 24)
/* Scopes of t4a_raw_run_many up to this many targets live on its stack. */
#define RAW_STACK_TARGETS 4

/* One open scope, in t4a_raw_run's frame. The handle given to fn is `token`, never this record's
 * address: a handle is looked up among the scopes open on the calling thread and is never
 * dereferenced, so a stale one (its scope closed, or a later scope now at the same address) is
 * refused instead of read. */
typedef struct raw_rec {
  uintptr_t token;
  struct raw_rec *outer; /* the enclosing open scope on this thread, or NULL */
  t4a_retire *retire;
  t4a_admission adm;
  t4a_lane *lane;
  CUcontext ctx;
  CUstream stream;
  /* The bound buffers, unique and sorted by address; the scope holds one reference to each,
   * handed to the epoch (kept) or to quarantine at the end. */
  t4a_keepalive *items;
  uint8_t *access;
  size_t count;
  /* Storage for up to RAW_STACK_BINDINGS of them (else items is one allocation). */
  t4a_keepalive stack_items[RAW_STACK_BINDINGS];
  uint8_t stack_access[RAW_STACK_BINDINGS];
} raw_rec;

/* The innermost open scope of this thread. */
static _Thread_local raw_rec *t_open;
/* Scope tokens: unique in the process, never 0, never reused (2^64 scopes). */
static _Atomic uint64_t g_next_token = 1;

static t4a_status refuse(const char *what) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "%s", what);
}

static const raw_rec *find_open(const t4a_raw_scope *scope) {
  uintptr_t token = (uintptr_t)scope;
  for (const raw_rec *r = t_open; r != NULL; r = r->outer) {
    if (r->token == token) return r;
  }
  return NULL;
}

static const raw_rec *find_or_refuse(const t4a_raw_scope *scope) {
  const raw_rec *r = find_open(scope);
  if (r == NULL) {
    (void)refuse("raw scope handle is not open on this thread (used after its t4a_raw_run "
                 "returned, or from another thread)");
  }
  return r;
}

/* Index of `buffer` in the sorted unique list, or -1. Compares addresses only. */
static long find_buffer(const raw_rec *r, const t4a_buffer *buffer) {
  size_t lo = 0, hi = r->count;
  uintptr_t key = (uintptr_t)buffer;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uintptr_t at = (uintptr_t)r->items[mid].object;
    if (at == key) return (long)mid;
    if (at < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

/* ---- accessors (inside fn) ---- */

void *t4a_raw_context(const t4a_raw_scope *scope) {
  const raw_rec *r = find_or_refuse(scope);
  return r != NULL ? (void *)r->ctx : NULL;
}

void *t4a_raw_stream(const t4a_raw_scope *scope) {
  const raw_rec *r = find_or_refuse(scope);
  return r != NULL ? (void *)r->stream : NULL;
}

int t4a_raw_device_ordinal(const t4a_raw_scope *scope) {
  const raw_rec *r = find_or_refuse(scope);
  return r != NULL ? t4a_lane_ordinal(r->lane) : -1;
}

t4a_status t4a_raw_fail(t4a_raw_scope *scope, t4a_status status, const char *entry, int code,
                        const char *code_name, const char *fmt, ...) {
  if (find_or_refuse(scope) == NULL) return T4A_INVALID_ARGUMENT;
  if (status == T4A_OK) return refuse("t4a_raw_fail needs a failure status, not T4A_OK");
  char message[sizeof ((t4a_error *)0)->message];
  message[0] = '\0';
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
  }
  return t4a_error_set_(status, entry, code, code_name, 0, "%s", message);
}

t4a_status t4a_raw_devptr(t4a_raw_scope *scope, const t4a_buffer *buffer, int access,
                          uint64_t *out) {
  if (out != NULL) *out = 0;
  const raw_rec *r = find_or_refuse(scope);
  if (r == NULL) return T4A_INVALID_ARGUMENT;
  if (out == NULL) return refuse("t4a_raw_devptr: out is NULL");
  if (access < T4A_RAW_READ || access > T4A_RAW_READ_WRITE) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "t4a_raw_devptr: unknown access %d", access);
  }
  long i = buffer != NULL ? find_buffer(r, buffer) : -1;
  if (i < 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "t4a_raw_devptr: buffer %p is not bound to this raw scope (lane %llu)",
                          (const void *)buffer, (unsigned long long)t4a_lane_domain(r->lane));
  }
  if ((access & T4A_RAW_WRITE) && !(r->access[i] & T4A_RAW_WRITE)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "t4a_raw_devptr: write access asked of buffer %p, bound READ to this "
                          "raw scope", (const void *)buffer);
  }
  *out = t4a_buffer_devptr(buffer);
  return T4A_OK;
}

/* ---- t4a_raw_run, t4a_raw_run_many ---- */

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const t4a_keepalive *)a)->object;
  uintptr_t y = (uintptr_t)((const t4a_keepalive *)b)->object;
  return x < y ? -1 : x > y;
}

/* Checks one scope's bindings (before anything is taken). `name`: the call, for the detail. */
static t4a_status check_bindings(const char *name, t4a_lane *lane,
                                 const t4a_raw_binding *bindings, size_t count) {
  if (count > 0 && bindings == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "%s: bindings is NULL with a count", name);
  }
  if (count > RAW_MAX_BINDINGS) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                          "%s: %zu bindings (at most %zu)", name, count, RAW_MAX_BINDINGS);
  }
  uint64_t domain = t4a_lane_domain(lane);
  for (size_t i = 0; i < count; i++) {
    const t4a_raw_binding *b = &bindings[i];
    if (b->buffer == NULL) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "%s: binding %zu has no buffer", name, i);
    }
    if (b->access < T4A_RAW_READ || b->access > T4A_RAW_READ_WRITE) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "%s: binding %zu has unknown access %d", name, i, b->access);
    }
    if (t4a_buffer_domain(b->buffer) != domain) {
      return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                            "%s: binding %zu is a buffer of domain %llu, not of this "
                            "scope's lane (domain %llu)", name, i,
                            (unsigned long long)t4a_buffer_domain(b->buffer),
                            (unsigned long long)domain);
    }
  }
  return T4A_OK;
}

/* Fills rec->items/access with the unique bound buffers, sorted by address, accesses joined.
 * Storage: the record's own arrays when they suffice, else one allocation (rec->items). */
static t4a_status collect(raw_rec *rec, const t4a_raw_binding *bindings, size_t count) {
  t4a_keepalive *items = rec->stack_items;
  uint8_t *access = rec->stack_access;
  if (count > RAW_STACK_BINDINGS) {
    items = t4a_host_calloc(count, sizeof *items + 1);
    if (items == NULL) return T4A_HOST_OUT_OF_MEMORY;
    access = (uint8_t *)(items + count);
  }
  for (size_t i = 0; i < count; i++) {
    /* `objects` carries the access while sorting; reset below. */
    items[i] = (t4a_keepalive){bindings[i].buffer, t4a_buffer_release_object_,
                               (uint32_t)bindings[i].access};
  }
  if (count > 1) qsort(items, count, sizeof *items, by_address);
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    if (n > 0 && items[n - 1].object == items[i].object) {
      access[n - 1] |= (uint8_t)items[i].objects;
      continue;
    }
    access[n] = (uint8_t)items[i].objects;
    items[n] = items[i];
    items[n].objects = 0;
    n++;
  }
  rec->items = items;
  rec->access = access;
  rec->count = n;
  return T4A_OK;
}

static void free_items(raw_rec *rec) {
  if (rec->items != rec->stack_items) free(rec->items);
  rec->items = NULL;
}

/* After fn: makes the lane's context current again if fn changed it, so the admission's scope
 * restores the caller's context from the state it expects. `quiet`: record no detail. */
static t4a_status reactivate(t4a_driver *d, const raw_rec *rec, int quiet) {
  CUcontext now = NULL;
  if (T4A_CU_QUIET(d, cuCtxGetCurrent, &now) == T4A_OK && now == rec->ctx) return T4A_OK;
  return quiet ? T4A_CU_QUIET(d, cuCtxSetCurrent, rec->ctx)
               : T4A_CU(d, cuCtxSetCurrent, rec->ctx);
}

/* Ends one scope's admission after fn returned `fst`: kept and committed on success, else
 * poisoned. Returns the scope's result, its detail set. */
static t4a_status end_scope(raw_rec *rec, t4a_status fst) {
  t4a_driver *d = t4a_lane_driver(rec->lane);
  t4a_counters *counters = t4a_lane_counters(rec->lane);
  if (fst == T4A_OK) {
    t4a_status st = reactivate(d, rec, 0);
    if (st == T4A_OK) {
      /* Marked as used on this stream (their reuse and free wait for it) and kept in the epoch
       * as well: fn may have enqueued on other streams it joined to this one. */
      for (size_t i = 0; i < rec->count; i++) {
        (void)t4a_buffer_used_on_(rec->items[i].object, rec->lane);
        t4a_admission_keep(&rec->adm, rec->items[i]);
      }
      t4a_admission_commit(&rec->adm);
      return T4A_OK;
    }
    fst = st; /* the context could not be made current again: treat as a failed scope */
  } else {
    (void)reactivate(d, rec, 1); /* fn's detail is what is reported */
  }
  /* Poisoned. A sticky error on the lane's context turns the result into CONTEXT_LOST (the
   * admission's fail then marks the context lost). A capturing stream is not queried: that would
   * invalidate the capture. */
  if (fst != T4A_CONTEXT_LOST && !t4a_retire_is_capturing(rec->retire)) {
    CUresult r = d->t.cuStreamQuery(rec->stream);
    if (t4a_cu_is_sticky(r)) {
      fst = t4a_error_set_(T4A_CONTEXT_LOST, "cuStreamQuery", (int)r, t4a_cu_name(d, r), 0,
                           "raw scope: the callback failed (%s) and the stream of lane %llu "
                           "reports a sticky error: the context is lost", t4a_status_name(fst),
                           (unsigned long long)t4a_lane_domain(rec->lane));
    }
  }
  t4a_counter_add(counters, T4A_COUNTER_raw_scopes_poisoned, 1);
  /* Read-only buffers are kept as on success; the writable ones go to quarantine. */
  size_t w = 0;
  for (size_t i = 0; i < rec->count; i++) {
    if (rec->access[i] & T4A_RAW_WRITE) {
      t4a_keepalive k = rec->items[i];
      rec->items[i] = rec->items[w];
      rec->items[w++] = k;
    } else {
      (void)t4a_buffer_used_on_(rec->items[i].object, rec->lane);
      t4a_admission_keep(&rec->adm, rec->items[i]);
    }
  }
  return t4a_admission_fail(&rec->adm, fst, rec->items, w);
}

static int by_lock_order(const void *a, const void *b) {
  const raw_rec *x = *(raw_rec *const *)a, *y = *(raw_rec *const *)b;
  if (x->retire == y->retire) return 0;
  return t4a_retire_lock_before_(x->retire, y->retire) ? -1 : 1;
}

/* The callback, either kind. */
typedef struct raw_call {
  t4a_raw_fn one;
  t4a_raw_many_fn many;
  void *user;
} raw_call;

/* The one path of both calls: `n` scopes over targets[0..n) in recs[0..n), `sorted` and `scopes`
 * arrays of n. The arguments were checked (all but duplicate retires); rec->retire and
 * rec->lane are set. */
static t4a_status run_scopes(const char *name, const t4a_raw_target *targets, size_t n,
                             raw_rec *recs, raw_rec **sorted, t4a_raw_scope **scopes,
                             raw_call call) {
  t4a_status st = T4A_OK;
  size_t collected = 0;
  for (; collected < n && st == T4A_OK; collected++) {
    st = collect(&recs[collected], targets[collected].bindings, targets[collected].count);
  }
  if (st != T4A_OK) {
    collected--; /* the failed one allocated nothing */
    goto free_collected;
  }
  /* The admissions are taken in lock order (t4a_retire's: ascending domain), as copies take
   * theirs, whatever the targets' order. */
  for (size_t i = 0; i < n; i++) sorted[i] = &recs[i];
  if (n > 1) qsort(sorted, n, sizeof *sorted, by_lock_order);
  for (size_t i = 1; i < n; i++) {
    if (sorted[i - 1]->retire == sorted[i]->retire) {
      st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "%s: a retire is named by two targets (lane %llu)", name,
                          (unsigned long long)t4a_lane_domain(sorted[i]->lane));
      goto free_collected;
    }
  }
  size_t begun = 0;
  for (; begun < n; begun++) {
    raw_rec *r = sorted[begun];
    if ((st = t4a_admission_begin(r->retire, (uint32_t)r->count, &r->adm)) != T4A_OK) break;
    /* Buffers of another stream's pool: this stream is ordered after their allocation before fn
     * may enqueue anything (the lane's context is current here). */
    for (size_t k = 0; k < r->count && st == T4A_OK; k++) {
      st = t4a_buffer_use_on_(r->items[k].object, r->lane);
    }
    if (st != T4A_OK) {
      begun++;
      break;
    }
  }
  t4a_driver *d = t4a_lane_driver(recs[0].lane);
  for (size_t i = 0; i < n; i++) {
    recs[i].ctx = t4a_ctx_holder_native(t4a_lane_holder(recs[i].lane));
    recs[i].stream = t4a_lane_stream(recs[i].lane);
  }
  /* targets[0]'s context is current while fn runs (the last admission made its own current). */
  if (st == T4A_OK && n > 1 && sorted[n - 1] != &recs[0]) st = reactivate(d, &recs[0], 0);
  if (st != T4A_OK) {
    /* Nothing was enqueued: the admissions taken are let go, innermost first, with nothing
     * noted against their lanes (another lane's failure is not theirs). */
    t4a_error saved;
    t4a_error_last(&saved);
    while (begun > 0) {
      raw_rec *r = sorted[--begun];
      (void)reactivate(t4a_lane_driver(r->lane), r, 1);
      (void)t4a_admission_abort(&r->adm, T4A_OK);
    }
    t4a_error_restore(&saved);
    goto free_collected;
  }
  /* The scopes' own references: fn may drop the caller's. */
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < recs[i].count; k++) t4a_buffer_retain(recs[i].items[k].object);
  }
  raw_rec *outer = t_open;
  for (size_t i = 0; i < n; i++) {
    recs[i].token = (uintptr_t)atomic_fetch_add_explicit(&g_next_token, 1, memory_order_relaxed);
    recs[i].outer = i == 0 ? outer : &recs[i - 1];
    scopes[i] = (t4a_raw_scope *)recs[i].token;
  }

  /* fn's failure detail is told apart from an older one by clearing it first; on success the
   * caller's detail is put back untouched. */
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_error_clear();
  t_open = &recs[n - 1];
  t4a_status fst = call.one != NULL ? call.one(scopes[0], call.user)
                                    : call.many(scopes, n, call.user);
  t_open = outer;
  for (size_t i = 0; i < n; i++) {
    t4a_counter_add(t4a_lane_counters(recs[i].lane), T4A_COUNTER_raw_scopes, 1);
  }
  if (fst != T4A_OK) {
    t4a_error e;
    t4a_error_last(&e);
    if (e.status != fst) {
      (void)t4a_error_set_(fst, name, 0, NULL, 0,
                           "the raw scope's callback failed with %s and left no detail",
                           t4a_status_name(fst));
    }
  }
  /* Ended innermost first, so each admission's context scope sees the state it expects and the
   * caller's context comes back last. The result: the first failure met, a lost context first. */
  t4a_status result = T4A_OK;
  t4a_error detail;
  t4a_error_last(&detail);
  for (size_t i = n; i-- > 0;) {
    st = end_scope(sorted[i], fst);
    if (st != T4A_OK &&
        (result == T4A_OK || (st == T4A_CONTEXT_LOST && result != T4A_CONTEXT_LOST))) {
      result = st;
      t4a_error_last(&detail);
    }
  }
  t4a_error_restore(result == T4A_OK ? &saved : &detail);
  st = result;
  collected = n;
free_collected:
  for (size_t i = 0; i < collected; i++) free_items(&recs[i]);
  return st;
}

t4a_status t4a_raw_run(t4a_retire *retire, const t4a_raw_binding *bindings, size_t count,
                       t4a_raw_fn fn, void *user) {
  if (retire == NULL || fn == NULL) return refuse("t4a_raw_run: retire or fn is NULL");
  t4a_lane *lane = t4a_retire_lane(retire);
  t4a_status st = check_bindings("t4a_raw_run", lane, bindings, count);
  if (st != T4A_OK) return st;
  t4a_raw_target target = {retire, bindings, count};
  raw_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.retire = retire;
  rec.lane = lane;
  raw_rec *sorted[1];
  t4a_raw_scope *scopes[1];
  return run_scopes("t4a_raw_run", &target, 1, &rec, sorted, scopes,
                    (raw_call){fn, NULL, user});
}

t4a_status t4a_raw_run_many(const t4a_raw_target *targets, size_t count, t4a_raw_many_fn fn,
                            void *user) {
  if (targets == NULL || count == 0 || fn == NULL) {
    return refuse("t4a_raw_run_many: targets, count or fn is NULL or 0");
  }
  for (size_t i = 0; i < count; i++) {
    if (targets[i].retire == NULL) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                            "t4a_raw_run_many: target %zu has no retire", i);
    }
    t4a_status st = check_bindings("t4a_raw_run_many", t4a_retire_lane(targets[i].retire),
                                   targets[i].bindings, targets[i].count);
    if (st != T4A_OK) return st;
  }
  raw_rec stack_recs[RAW_STACK_TARGETS];
  raw_rec *stack_sorted[RAW_STACK_TARGETS];
  t4a_raw_scope *stack_scopes[RAW_STACK_TARGETS];
  raw_rec *recs = stack_recs;
  raw_rec **sorted = stack_sorted;
  t4a_raw_scope **scopes = stack_scopes;
  void *heap = NULL;
  if (count > RAW_STACK_TARGETS) {
    heap = t4a_host_calloc(count, sizeof *recs + sizeof *sorted + sizeof *scopes);
    if (heap == NULL) return T4A_HOST_OUT_OF_MEMORY;
    recs = heap;
    sorted = (raw_rec **)(recs + count);
    scopes = (t4a_raw_scope **)(sorted + count);
  } else {
    memset(stack_recs, 0, sizeof stack_recs);
  }
  for (size_t i = 0; i < count; i++) {
    recs[i].retire = targets[i].retire;
    recs[i].lane = t4a_retire_lane(targets[i].retire);
  }
  t4a_status st = run_scopes("t4a_raw_run_many", targets, count, recs, sorted, scopes,
                             (raw_call){NULL, fn, user});
  free(heap);
  return st;
}
