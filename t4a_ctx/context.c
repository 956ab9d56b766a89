/* Primary-context holders and activation scopes. */
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

struct t4a_ctx_holder {
  atomic_int refs;
  int ordinal;
  CUdevice device;
  CUcontext ctx;
  /* The device's healthy fault state in the generation this holder was made in (driver_table.h):
   * the context is usable through this holder only while the device's state equals it. */
  unsigned healthy;
  t4a_driver *driver; /* a reference */
  /* Bit i: this context may access device i's primary context's memory (enabled once; peer
   * access lives as long as the context, which this holder keeps alive). */
  _Atomic uint64_t peers;
};

t4a_status t4a_ctx_holder_create(t4a_driver *driver, int ordinal, t4a_ctx_holder **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (driver == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver is NULL");
  }
  int count = 0;
  t4a_status st = T4A_CU(driver, cuDeviceGetCount, &count);
  if (st != T4A_OK) return st;
  if (ordinal < 0 || ordinal >= count) {
    return t4a_error_set_(T4A_INVALID_DEVICE, NULL, 0, NULL, 0,
                          "device ordinal %d is out of range (the driver sees %d devices)",
                          ordinal, count);
  }
  if (ordinal >= T4A_MAX_DEVICES) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                          "device ordinal %d is beyond t4a's limit of %d devices", ordinal,
                          T4A_MAX_DEVICES);
  }
  t4a_ctx_holder *h = t4a_host_calloc(1, sizeof *h);
  if (h == NULL) return T4A_HOST_OUT_OF_MEMORY;
  if ((st = T4A_CU(driver, cuDeviceGet, &h->device, ordinal)) != T4A_OK ||
      (st = T4A_CU(driver, cuDevicePrimaryCtxRetain, &h->ctx, h->device)) != T4A_OK) {
    free(h);
    return st;
  }
  atomic_init(&h->refs, 1);
  h->healthy = atomic_load(&driver->faults[ordinal].state) & ~3u;
  h->ordinal = ordinal;
  h->driver = driver;
  t4a_driver_retain(driver);
  t4a_counter_add(&driver->counters, T4A_COUNTER_ctx_holders_created, 1);
  *out = h;
  return T4A_OK;
}

void t4a_ctx_holder_retain(t4a_ctx_holder *holder) {
  if (holder != NULL) atomic_fetch_add_explicit(&holder->refs, 1, memory_order_relaxed);
}

/* Releases the primary context. The driver never changes a thread's current context on release;
 * the danger (requirement A1) is in clearing it ourselves. We clear it only when the context was
 * current here AND the release is known to have destroyed it (cuDevicePrimaryCtxGetState answers
 * inactive: no other holder, in t4a or outside, retains it), so the thread is not left with a
 * dangling handle. A failed query proves nothing: the context stays current. */
static void holder_destroy(t4a_ctx_holder *h) {
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_driver *d = h->driver;
  CUcontext current = NULL;
  int was_current = d->t.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == h->ctx;
  if (T4A_CU_QUIET(d, cuDevicePrimaryCtxRelease, h->device) == T4A_OK) {
    t4a_counter_add(&d->counters, T4A_COUNTER_ctx_holders_destroyed, 1);
    if (was_current) {
      unsigned flags = 0;
      int active = 0;
      if (d->t.cuDevicePrimaryCtxGetState(h->device, &flags, &active) == CUDA_SUCCESS &&
          !active) {
        (void)d->t.cuCtxSetCurrent(NULL); /* known to be gone: clear the dangling handle */
      } else {
        /* Still active (another holder keeps it), or unknown (the query failed): another holder
         * may still use it, so it stays current (requirement A1). */
        t4a_counter_add(&d->counters, T4A_COUNTER_ctx_current_kept, 1);
      }
    }
  } else {
    /* Never abort on a drop path: the retain is leaked, and counted. */
    t4a_counter_add(&d->counters, T4A_COUNTER_ctx_release_failures, 1);
  }
  free(h);
  t4a_driver_release(d);
  t4a_error_restore(&saved);
}

void t4a_ctx_holder_release(t4a_ctx_holder *holder) {
  if (holder == NULL) return;
  if (atomic_fetch_sub_explicit(&holder->refs, 1, memory_order_acq_rel) == 1) {
    holder_destroy(holder);
  }
}

int t4a_ctx_holder_ordinal(const t4a_ctx_holder *holder) { return holder->ordinal; }
t4a_driver *t4a_ctx_holder_driver(const t4a_ctx_holder *holder) { return holder->driver; }
CUcontext t4a_ctx_holder_native(const t4a_ctx_holder *holder) { return holder->ctx; }
CUdevice t4a_ctx_holder_device(const t4a_ctx_holder *holder) { return holder->device; }

void t4a_ctx_holder_mark_lost_(const t4a_ctx_holder *holder, const t4a_error *cause) {
  if (holder == NULL) return;
  t4a_ctx_fault *f = &holder->driver->faults[holder->ordinal];
  /* Only from the holder's own generation, healthy: the first fault is the one reported, and a
   * holder made before a reset (t4a_device_recover) cannot mark the new context lost. */
  unsigned expected = holder->healthy;
  if (!atomic_compare_exchange_strong_explicit(&f->state, &expected,
                                               holder->healthy | T4A_CTX_RECORDING,
                                               memory_order_acq_rel, memory_order_relaxed)) {
    return;
  }
  if (cause != NULL) {
    f->cause = *cause;
  } else {
    f->cause = (t4a_error){.status = T4A_CONTEXT_LOST, .entry = "", .code_name = ""};
  }
  atomic_store_explicit(&f->state, holder->healthy | T4A_CTX_LOST, memory_order_release);
  t4a_counter_add(&holder->driver->counters, T4A_COUNTER_ctx_faults, 1);
}

/* Whether the device was reset (t4a_device_recover) since the holder was made. */
static int holder_is_stale(const t4a_ctx_holder *holder, unsigned state) {
  return (state >> 2) != (holder->healthy >> 2);
}

int t4a_ctx_holder_is_lost(const t4a_ctx_holder *holder) {
  if (holder == NULL) return 0;
  return atomic_load_explicit(&holder->driver->faults[holder->ordinal].state,
                              memory_order_acquire) != holder->healthy;
}

t4a_status t4a_ctx_device_check(t4a_driver *driver, int ordinal) {
  const t4a_ctx_fault *f = &driver->faults[ordinal];
  unsigned state = atomic_load_explicit(&f->state, memory_order_acquire);
  if (T4A_LIKELY(T4A_CTX_PHASE(state) != T4A_CTX_LOST)) return T4A_OK;
  const t4a_error *c = &f->cause;
  return t4a_error_set_(T4A_LANE_BROKEN, c->entry, c->code, c->code_name, 0,
                        "device %d's context is lost since %s failed with %s (%d): %.120s",
                        ordinal, c->entry[0] ? c->entry : "an operation",
                        c->code_name[0] ? c->code_name : "a sticky error", c->code, c->message);
}

t4a_status t4a_ctx_holder_check(const t4a_ctx_holder *holder) {
  if (holder == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "holder is NULL");
  }
  const t4a_ctx_fault *f = &holder->driver->faults[holder->ordinal];
  unsigned state = atomic_load_explicit(&f->state, memory_order_acquire);
  if (T4A_LIKELY(state == holder->healthy)) return T4A_OK;
  if (holder_is_stale(holder, state)) {
    return t4a_error_set_(T4A_LANE_BROKEN, NULL, 0, NULL, 0,
                          "device %d's primary context was reset (t4a_device_recover) after this "
                          "object was made: it belongs to the context before the reset",
                          holder->ordinal);
  }
  if (T4A_CTX_PHASE(state) != T4A_CTX_LOST) {
    return t4a_error_set_(T4A_LANE_BROKEN, NULL, 0, NULL, 0,
                          "device %d's context took a sticky error (being recorded) or is being "
                          "reset", holder->ordinal);
  }
  const t4a_error *c = &f->cause;
  return t4a_error_set_(T4A_LANE_BROKEN, c->entry, c->code, c->code_name, 0,
                        "device %d's context is lost since %s failed with %s (%d): %.120s",
                        holder->ordinal, c->entry[0] ? c->entry : "an operation",
                        c->code_name[0] ? c->code_name : "a sticky error", c->code, c->message);
}

/* ---- The host-function rule (ctx_internal.h) ---- */

static _Thread_local int t_host_fn_depth;

void t4a_host_fn_enter_(void) { t_host_fn_depth++; }
void t4a_host_fn_exit_(void) {
  if (t_host_fn_depth > 0) t_host_fn_depth--;
}
int t4a_in_host_fn_(void) { return t_host_fn_depth > 0; }

t4a_status t4a_host_fn_refuse_(const char *what) {
  return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                        "%s from inside a host function on a stream: a host function must not "
                        "call CUDA (nor wait for its own stream); do it after the function ran",
                        what);
}

/* Makes the holder's context current unless it is, counts that, and fills the scope (the
 * caller checked the holder; borrowed: no reference of the scope's own). On failure the scope
 * is as it was. Inline: the admissions' path (t4a_ctx_scope_enter_counted_) is a leaf. */
static inline t4a_status activate(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                                  t4a_counters *counters, t4a_counter_shard_ *shard, int borrowed) {
  t4a_driver *d = holder->driver;
  if (counters == NULL) counters = &d->counters;
  CUcontext prev = NULL;
  t4a_status st = T4A_CU(d, cuCtxGetCurrent, &prev);
  if (st != T4A_OK) return st;
  int switched = prev != holder->ctx;
  if (T4A_UNLIKELY(switched)) {
    if ((st = T4A_CU(d, cuCtxSetCurrent, holder->ctx)) != T4A_OK) return st;
    t4a_counter_add_owned_(counters, shard, T4A_COUNTER_ctx_activations, 1);
  } else {
    t4a_counter_add_owned_(counters, shard, T4A_COUNTER_ctx_activations_skipped, 1);
  }
  if (!borrowed) atomic_fetch_add_explicit(&holder->refs, 1, memory_order_relaxed);
  scope->priv_borrowed = borrowed;
  scope->priv_prev = prev;
  scope->priv_ctx = holder->ctx;
  scope->priv_holder = holder;
  scope->priv_switched = switched;
  return T4A_OK;
}

static t4a_status scope_enter(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                              t4a_counters *counters, int borrowed) {
  if (scope == NULL || holder == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "scope or holder is NULL");
  }
  memset(scope, 0, sizeof *scope); /* what a failure leaves: exit is then a no-op */
  if (T4A_UNLIKELY(t_host_fn_depth > 0)) return t4a_host_fn_refuse_("activating a context");
  if (T4A_UNLIKELY(holder_is_stale(holder, atomic_load_explicit(
                                               &holder->driver->faults[holder->ordinal].state,
                                               memory_order_acquire)))) {
    /* The objects of a context that was reset never call the driver under it again: their drop
     * paths find no scope and leak (counted), as after any failed activation. */
    return t4a_ctx_holder_check(holder);
  }
  return activate(scope, holder, counters, NULL, borrowed);
}

t4a_status t4a_ctx_scope_enter(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                               t4a_counters *counters) {
  return scope_enter(scope, holder, counters, 0);
}

t4a_status t4a_ctx_scope_enter_borrowed(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                                        t4a_counters *counters) {
  return scope_enter(scope, holder, counters, 1);
}

t4a_status t4a_ctx_scope_enter_counted_(t4a_ctx_scope *scope, t4a_ctx_holder *holder,
                                        t4a_counters *counters, t4a_counter_shard_ *shard) {
  /* The lane check (one load): anything but healthy is refused as t4a_ctx_holder_check says. */
  unsigned state =
      atomic_load_explicit(&holder->driver->faults[holder->ordinal].state, memory_order_acquire);
  t4a_status st = T4A_LIKELY(state == holder->healthy)
                      ? activate(scope, holder, counters, shard, 1)
                      : t4a_ctx_holder_check(holder);
  if (st != T4A_OK) memset(scope, 0, sizeof *scope); /* cleared: exit is a no-op */
  return st;
}

static t4a_status scope_exit(t4a_ctx_scope *scope, int quiet) {
  if (scope == NULL || scope->priv_holder == NULL) return T4A_OK;
  t4a_ctx_holder *h = scope->priv_holder;
  t4a_driver *d = h->driver;
  t4a_status st = T4A_OK;
  if (scope->priv_switched) {
    st = quiet ? T4A_CU_QUIET(d, cuCtxSetCurrent, (CUcontext)scope->priv_prev)
               : T4A_CU(d, cuCtxSetCurrent, (CUcontext)scope->priv_prev);
    t4a_counter_add(&d->counters,
                    st == T4A_OK ? T4A_COUNTER_ctx_restores : T4A_COUNTER_ctx_restore_failures, 1);
  }
  int borrowed = scope->priv_borrowed;
  memset(scope, 0, sizeof *scope); /* a second exit is a no-op */
  /* After the restore: if this was the last reference, the A1 rule runs against the context the
   * thread now has current. */
  if (!borrowed) t4a_ctx_holder_release(h);
  return st;
}

t4a_status t4a_ctx_scope_exit(t4a_ctx_scope *scope) { return scope_exit(scope, 0); }
void t4a_ctx_scope_exit_quiet(t4a_ctx_scope *scope) { (void)scope_exit(scope, 1); }

t4a_status t4a_ctx_holder_memory(t4a_ctx_holder *holder, uint64_t *out_free,
                                 uint64_t *out_total) {
  if (out_free != NULL) *out_free = 0;
  if (out_total != NULL) *out_total = 0;
  if (holder == NULL || out_free == NULL || out_total == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "holder or an out is NULL");
  }
  t4a_status st = t4a_ctx_holder_check(holder);
  if (st != T4A_OK) return st;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, holder, NULL)) != T4A_OK) return st;
  size_t free_b = 0, total_b = 0;
  st = T4A_CU(holder->driver, cuMemGetInfo, &free_b, &total_b);
  t4a_ctx_scope_exit_quiet(&scope);
  if (st != T4A_OK) return st;
  *out_free = free_b;
  *out_total = total_b;
  return T4A_OK;
}

t4a_status t4a_ctx_holder_enable_peer(t4a_ctx_holder *holder, t4a_ctx_holder *peer) {
  if (holder == NULL || peer == NULL || holder->ordinal == peer->ordinal) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "peer access needs two holders of different devices");
  }
  /* Holders exist only for ordinals below T4A_MAX_DEVICES (64): the bit fits. */
  uint64_t bit = (uint64_t)1 << (peer->ordinal & 63);
  if (atomic_load_explicit(&holder->peers, memory_order_acquire) & bit) return T4A_OK;
  t4a_driver *d = holder->driver;
  int can = 0;
  t4a_status st = T4A_CU(d, cuDeviceCanAccessPeer, &can, holder->device, peer->device);
  if (st != T4A_OK) return st;
  if (!can) {
    return t4a_error_set_(T4A_UNSUPPORTED, "cuDeviceCanAccessPeer", 0, NULL, 0,
                          "device %d cannot access device %d's memory directly", holder->ordinal,
                          peer->ordinal);
  }
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, holder, NULL)) != T4A_OK) return st;
  CUresult r = d->t.cuCtxEnablePeerAccess(peer->ctx, 0);
  if (r == CUDA_SUCCESS) {
    t4a_counter_add(&d->counters, T4A_COUNTER_peer_access_enabled, 1);
  } else if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) { /* another holder of it did it */
    st = t4a_cu_result_(d, r, "cuCtxEnablePeerAccess", 0);
  }
  t4a_ctx_scope_exit_quiet(&scope);
  if (st == T4A_OK) atomic_fetch_or_explicit(&holder->peers, bit, memory_order_acq_rel);
  return st;
}

/* ---- Recovery ---- */

int t4a_device_open_lanes(const t4a_driver *driver, int ordinal) {
  if (driver == NULL || ordinal < 0 || ordinal >= T4A_MAX_DEVICES) return 0;
  return atomic_load(&((t4a_driver *)driver)->faults[ordinal].lanes_open);
}

t4a_status t4a_device_recover(t4a_driver *driver, int ordinal) {
  if (driver == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver is NULL");
  }
  int count = 0;
  t4a_status st = T4A_CU(driver, cuDeviceGetCount, &count);
  if (st != T4A_OK) return st;
  if (ordinal < 0 || ordinal >= count || ordinal >= T4A_MAX_DEVICES) {
    return t4a_error_set_(T4A_INVALID_DEVICE, NULL, 0, NULL, 0,
                          "device ordinal %d is out of range (the driver sees %d devices)",
                          ordinal, count);
  }
  t4a_ctx_fault *f = &driver->faults[ordinal];
  unsigned state = atomic_load(&f->state);
  unsigned phase = T4A_CTX_PHASE(state);
  /* Claim the device (RESETTING), then look for open lanes: t4a_lane_create counts itself open
   * before it reads the state, so either it sees RESETTING and refuses, or this sees it (both
   * sequentially consistent). */
  if (phase == T4A_CTX_RECORDING || phase == T4A_CTX_RESETTING ||
      !atomic_compare_exchange_strong(&f->state, &state, (state & ~3u) | T4A_CTX_RESETTING)) {
    t4a_counter_add(&driver->counters, T4A_COUNTER_device_recoveries_refused, 1);
    return t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                          "device %d: a fault is being recorded or another recovery is running",
                          ordinal);
  }
  int open = atomic_load(&f->lanes_open);
  if (open > 0) {
    atomic_store(&f->state, state);
    t4a_counter_add(&driver->counters, T4A_COUNTER_device_recoveries_refused, 1);
    return t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                          "device %d still has %d open lane%s (a runtime not closed, or a lane "
                          "neither released nor abandoned): its primary context was not reset",
                          ordinal, open, open == 1 ? "" : "s");
  }
  CUdevice dev = 0;
  st = T4A_CU(driver, cuDeviceGet, &dev, ordinal);
  if (st == T4A_OK) st = T4A_CU(driver, cuDevicePrimaryCtxReset, dev);
  if (st != T4A_OK) {
    atomic_store(&f->state, state); /* not reset: the record stays as it was */
    return st;
  }
  /* The next generation: holders made before it (kept by objects t4a leaked, or by the caller)
   * stay broken and never call the driver under their context again. Whether the new context is
   * usable is the driver's answer to a retain: on the H200 with driver 580 an illegal address
   * stays the process's error after the reset (the retain answers CUDA_ERROR_ILLEGAL_ADDRESS),
   * and then the new generation starts lost, with that answer as its cause. */
  unsigned next = ((state >> 2) + 1u) << 2;
  CUcontext probe = NULL;
  CUresult r = driver->t.cuDevicePrimaryCtxRetain(&probe, dev);
  if (r == CUDA_SUCCESS) {
    if (T4A_CU_QUIET(driver, cuDevicePrimaryCtxRelease, dev) != T4A_OK) {
      t4a_counter_add(&driver->counters, T4A_COUNTER_ctx_release_failures, 1);
    }
    atomic_store(&f->state, next);
    t4a_counter_add(&driver->counters, T4A_COUNTER_device_recoveries, 1);
    return T4A_OK;
  }
  st = t4a_cu_fail(driver, r, "cuDevicePrimaryCtxRetain", 0);
  if (st != T4A_CONTEXT_LOST) {
    atomic_store(&f->state, next); /* reset; not proved usable, not proved lost either */
    return st;
  }
  t4a_error_last(&f->cause); /* RESETTING: no reader of this generation's cause yet */
  atomic_store(&f->state, next | T4A_CTX_LOST);
  t4a_counter_add(&driver->counters, T4A_COUNTER_ctx_faults, 1);
  return t4a_error_set_(T4A_CONTEXT_LOST, f->cause.entry, f->cause.code, f->cause.code_name, 0,
                        "device %d's primary context was reset, but a new retain still answers "
                        "%s (%d): the driver keeps the sticky error for this process; only a new "
                        "process can use the device", ordinal, f->cause.code_name, f->cause.code);
}
