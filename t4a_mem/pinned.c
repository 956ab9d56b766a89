/* Portable pinned chunks, mapped slots and host registrations. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a/mem.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"

struct t4a_pinned {
  atomic_int refs;
  t4a_ctx_holder *holder; /* a reference */
  void *host;
  CUdeviceptr dev;
  size_t bytes;
};

t4a_status t4a_pinned_create(t4a_ctx_holder *h, size_t bytes, uint32_t flags, t4a_pinned **out) {
  if (out == NULL || h == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "holder or out is NULL");
  }
  *out = NULL;
  if (bytes == 0 || (flags & ~T4A_PINNED_MAPPED)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "pinned memory needs at least 1 byte and known flags (got 0x%x)", flags);
  }
  t4a_status st = t4a_ctx_holder_check(h);
  if (st != T4A_OK) return st;
  t4a_driver *d = t4a_ctx_holder_driver(h);
  t4a_pinned *p = t4a_host_calloc(1, sizeof *p);
  if (p == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, h, NULL)) != T4A_OK) {
    free(p);
    return st;
  }
  /* Portable always (requirement A2): staging chunks serve copies under other contexts too. */
  unsigned cu_flags = CU_MEMHOSTALLOC_PORTABLE;
  if (flags & T4A_PINNED_MAPPED) cu_flags |= CU_MEMHOSTALLOC_DEVICEMAP;
  st = T4A_CU_BYTES(d, bytes, cuMemHostAlloc, &p->host, bytes, cu_flags);
  if (st == T4A_DEVICE_OUT_OF_MEMORY) {
    /* The pinned (host) memory ran out, not the device's. */
    t4a_error e;
    t4a_error_last(&e);
    st = t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, e.entry, e.code, e.code_name, (uint64_t)bytes,
                        "%s", e.message);
  }
  if (st == T4A_OK && (flags & T4A_PINNED_MAPPED)) {
    st = T4A_CU(d, cuMemHostGetDevicePointer, &p->dev, p->host, 0);
    if (st != T4A_OK) (void)T4A_CU_QUIET(d, cuMemFreeHost, p->host);
  }
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    free(p);
    return st;
  }
  t4a_ctx_scope_exit_quiet(&scope); /* the memory is valid in any context: a restore failure is
                                       counted, not a reason to drop it */
  atomic_init(&p->refs, 1);
  p->holder = h;
  t4a_ctx_holder_retain(h);
  p->bytes = bytes;
  t4a_counter_add(&d->counters, T4A_COUNTER_pinned_allocs, 1);
  t4a_counter_add(&d->counters, T4A_COUNTER_pinned_bytes, bytes);
  *out = p;
  return T4A_OK;
}

void t4a_pinned_retain(t4a_pinned *p) {
  if (p != NULL) atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void t4a_pinned_release(t4a_pinned *p) {
  if (p == NULL || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_driver *d = t4a_ctx_holder_driver(p->holder);
  t4a_ctx_scope scope;
  if (t4a_ctx_scope_enter(&scope, p->holder, NULL) == T4A_OK) {
    if (T4A_CU_QUIET(d, cuMemFreeHost, p->host) != T4A_OK) {
      t4a_counter_add(&d->counters, T4A_COUNTER_leaked, 1);
    }
    t4a_ctx_scope_exit_quiet(&scope);
  } else {
    t4a_counter_add(&d->counters, T4A_COUNTER_leaked, 1);
  }
  t4a_ctx_holder_release(p->holder);
  free(p);
  t4a_error_restore(&saved);
}

void t4a_pinned_release_object_(void *p) { t4a_pinned_release(p); }
void *t4a_pinned_host(const t4a_pinned *p) { return p->host; }
t4a_devptr t4a_pinned_devptr(const t4a_pinned *p) { return p->dev; }
size_t t4a_pinned_size(const t4a_pinned *p) { return p->bytes; }

/* ---- mapped slots ---- */

struct t4a_slots {
  t4a_pinned *chunk;
  pthread_mutex_t lock;
  size_t slot_bytes; /* rounded to 64: slots never share a cache line */
  uint32_t num_slots;
  uint32_t *free_list; /* stack of free indices */
  uint32_t num_free;
  unsigned char *taken;
};

t4a_status t4a_slots_create(t4a_ctx_holder *h, size_t slot_bytes, uint32_t num_slots,
                            t4a_slots **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (slot_bytes == 0 || num_slots == 0 || slot_bytes > ((size_t)1 << 20) ||
      num_slots > (1u << 20)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "slots need 1..1 MiB bytes and 1..2^20 slots (got %zu x %u)", slot_bytes,
                          num_slots);
  }
  t4a_slots *s = t4a_host_calloc(1, sizeof *s);
  if (s == NULL) return T4A_HOST_OUT_OF_MEMORY;
  s->slot_bytes = (slot_bytes + 63) & ~(size_t)63;
  s->num_slots = num_slots;
  s->free_list = t4a_host_calloc(num_slots, sizeof *s->free_list);
  s->taken = s->free_list ? t4a_host_calloc(num_slots, 1) : NULL;
  t4a_status st = T4A_HOST_OUT_OF_MEMORY;
  if (s->taken != NULL) {
    if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&s->lock, NULL) != 0) {
      st = t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise a slots lock");
    } else if ((st = t4a_pinned_create(h, s->slot_bytes * num_slots, T4A_PINNED_MAPPED,
                                       &s->chunk)) != T4A_OK) {
      pthread_mutex_destroy(&s->lock);
    }
  }
  if (st != T4A_OK) {
    free(s->free_list);
    free(s->taken);
    free(s);
    return st;
  }
  memset(t4a_pinned_host(s->chunk), 0, s->slot_bytes * num_slots);
  for (uint32_t i = 0; i < num_slots; i++) s->free_list[i] = num_slots - 1 - i;
  s->num_free = num_slots;
  *out = s;
  return T4A_OK;
}

void t4a_slots_destroy(t4a_slots *s) {
  if (s == NULL) return;
  t4a_pinned_release(s->chunk);
  pthread_mutex_destroy(&s->lock);
  free(s->free_list);
  free(s->taken);
  free(s);
}

t4a_status t4a_slot_acquire(t4a_slots *s, uint32_t *out_index) {
  if (s == NULL || out_index == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "slots or out is NULL");
  }
  *out_index = UINT32_MAX;
  pthread_mutex_lock(&s->lock);
  t4a_status st = T4A_OK;
  if (s->num_free == 0) {
    st = t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0, "all %u slots are taken",
                        s->num_slots);
  } else {
    *out_index = s->free_list[--s->num_free];
    s->taken[*out_index] = 1;
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

void t4a_slot_release(t4a_slots *s, uint32_t i) {
  if (s == NULL || i >= s->num_slots) return;
  pthread_mutex_lock(&s->lock);
  if (s->taken[i]) { /* a double release is ignored, not a corrupt free list */
    s->taken[i] = 0;
    s->free_list[s->num_free++] = i;
  }
  pthread_mutex_unlock(&s->lock);
}

void *t4a_slot_host(const t4a_slots *s, uint32_t i) {
  if (s == NULL || i >= s->num_slots) return NULL;
  return (char *)t4a_pinned_host(s->chunk) + (size_t)i * s->slot_bytes;
}

t4a_devptr t4a_slot_devptr(const t4a_slots *s, uint32_t i) {
  if (s == NULL || i >= s->num_slots) return 0;
  return t4a_pinned_devptr(s->chunk) + (t4a_devptr)i * s->slot_bytes;
}

size_t t4a_slots_slot_bytes(const t4a_slots *s) { return s != NULL ? s->slot_bytes : 0; }

int t4a_slot_is_acquired(t4a_slots *s, uint32_t i) {
  if (s == NULL || i >= s->num_slots) return 0;
  pthread_mutex_lock(&s->lock);
  int taken = s->taken[i] != 0;
  pthread_mutex_unlock(&s->lock);
  return taken;
}

/* ---- host registration ---- */

/* What keeps a registered range's memory alive (a file mapping...): see
 * t4a_host_register_options. */
typedef struct owner_ref {
  void *object;
  void (*release)(void *object);
} owner_ref;

static void owner_drop(owner_ref owner) {
  if (owner.release != NULL) owner.release(owner.object);
}

struct t4a_host_registration {
  atomic_int refs;
  t4a_ctx_holder *holder; /* a reference */
  void *ptr;
  size_t bytes;
  CUdeviceptr dev;
  owner_ref owner; /* released only after a successful unregister */
};

t4a_status t4a_host_register(t4a_ctx_holder *h, void *ptr, size_t bytes,
                             const t4a_host_register_options *options,
                             t4a_host_registration **out) {
  t4a_host_register_options o = T4A_HOST_REGISTER_OPTIONS_INIT;
  if (options != NULL) o = *options;
  uint32_t flags = o.flags;
  owner_ref owner = {o.owner, o.owner_release};
  if (out != NULL) *out = NULL;
  if (out == NULL || h == NULL) {
    owner_drop(owner);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "holder or out is NULL");
  }
  if (ptr == NULL || bytes == 0 ||
      (flags & ~(T4A_HOST_REGISTER_MAPPED | T4A_HOST_REGISTER_READ_ONLY))) {
    owner_drop(owner);
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "registration needs a range of at least 1 byte and known flags");
  }
  t4a_status st = t4a_ctx_holder_check(h);
  if (st != T4A_OK) {
    owner_drop(owner);
    return st;
  }
  t4a_driver *d = t4a_ctx_holder_driver(h);
  if (flags & T4A_HOST_REGISTER_READ_ONLY) {
    int supported = 0;
    st = T4A_CU(d, cuDeviceGetAttribute, &supported,
                CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, t4a_ctx_holder_device(h));
    if (st == T4A_OK && !supported) {
      st = t4a_error_set_(T4A_UNSUPPORTED, NULL, 0, NULL, 0,
                          "device %d cannot register read-only host memory",
                          t4a_ctx_holder_ordinal(h));
    }
    if (st != T4A_OK) {
      owner_drop(owner);
      return st;
    }
  }
  t4a_host_registration *r = t4a_host_calloc(1, sizeof *r);
  if (r == NULL) {
    owner_drop(owner);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  t4a_ctx_scope scope;
  if ((st = t4a_ctx_scope_enter(&scope, h, NULL)) != T4A_OK) {
    free(r);
    owner_drop(owner);
    return st;
  }
  unsigned cu_flags = CU_MEMHOSTREGISTER_PORTABLE;
  if (flags & T4A_HOST_REGISTER_MAPPED) cu_flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
  /* Read-only pages (a PROT_READ file mapping): the driver must not ask for write access. */
  if (flags & T4A_HOST_REGISTER_READ_ONLY) cu_flags |= CU_MEMHOSTREGISTER_READ_ONLY;
  st = T4A_CU_BYTES(d, bytes, cuMemHostRegister, ptr, bytes, cu_flags);
  if (st == T4A_DEVICE_OUT_OF_MEMORY) {
    /* Page-locking ran out of host resources, not device memory. */
    t4a_error e;
    t4a_error_last(&e);
    st = t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, e.entry, e.code, e.code_name, (uint64_t)bytes,
                        "%s", e.message);
  }
  if (st == T4A_OK && (flags & T4A_HOST_REGISTER_MAPPED)) {
    st = T4A_CU(d, cuMemHostGetDevicePointer, &r->dev, ptr, 0);
    if (st != T4A_OK && T4A_CU_QUIET(d, cuMemHostUnregister, ptr) != T4A_OK) {
      /* Still registered: the range (and whatever owns it) must never be freed or unmapped
       * under the driver. Leaked, counted: the registration, and the owner if any. */
      t4a_counter_add(&d->counters, T4A_COUNTER_leaked, owner.release != NULL ? 2 : 1);
      owner.release = NULL;
    }
  }
  if (st != T4A_OK) {
    t4a_ctx_scope_exit_quiet(&scope);
    free(r);
    owner_drop(owner);
    return st;
  }
  t4a_ctx_scope_exit_quiet(&scope);
  atomic_init(&r->refs, 1);
  r->holder = h;
  t4a_ctx_holder_retain(h);
  r->ptr = ptr;
  r->bytes = bytes;
  r->owner = owner;
  t4a_counter_add(&d->counters, T4A_COUNTER_host_registrations, 1);
  *out = r;
  return T4A_OK;
}

void t4a_host_registration_retain(t4a_host_registration *r) {
  if (r != NULL) atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void t4a_host_registration_release(t4a_host_registration *r) {
  if (r == NULL || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) return;
  t4a_error saved; /* a drop path never changes the caller's error detail */
  t4a_error_last(&saved);
  t4a_driver *d = t4a_ctx_holder_driver(r->holder);
  t4a_ctx_scope scope;
  t4a_status st = t4a_ctx_scope_enter(&scope, r->holder, NULL);
  if (st == T4A_OK) {
    st = T4A_CU_QUIET(d, cuMemHostUnregister, r->ptr);
    t4a_ctx_scope_exit_quiet(&scope);
  }
  if (st == T4A_OK) {
    t4a_counter_add(&d->counters, T4A_COUNTER_host_unregistrations, 1);
    owner_drop(r->owner);
  } else {
    /* The range stays page-locked: the caller must not free it as ordinary memory assuming
     * otherwise, and its owner (if any) is never released, so it is never unmapped or reused
     * under the driver; counted (the registration, and the owner) so it is never silent. */
    t4a_counter_add(&d->counters, T4A_COUNTER_leaked, r->owner.release != NULL ? 2 : 1);
  }
  t4a_ctx_holder_release(r->holder);
  free(r);
  t4a_error_restore(&saved);
}

t4a_devptr t4a_host_registration_devptr(const t4a_host_registration *r) { return r->dev; }
void *t4a_host_registration_host(const t4a_host_registration *r) { return r->ptr; }
size_t t4a_host_registration_size(const t4a_host_registration *r) { return r->bytes; }
