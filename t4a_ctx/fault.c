/* The fault-point hook and the host allocation wrappers that consult it. */
#include "t4a/fault.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "t4a/status.h"
#include "t4a_ctx/status_internal.h"

typedef struct fault_hook {
  t4a_fault_hook_fn fn;
  void *user;
} fault_hook;

/* The hook and its user pointer are published together: the pair lives in one of two slots and
 * the active slot pointer is swapped atomically, so a reader never sees a torn pair. */
static fault_hook g_slots[2];
static _Atomic(fault_hook *) g_active = NULL;
static atomic_int g_next_slot = 0;
/* Successful host allocations (t4a_heap_allocations). */
static _Atomic uint64_t g_heap_allocations = 0;

static void *counted(void *p) {
  if (p != NULL) atomic_fetch_add_explicit(&g_heap_allocations, 1, memory_order_relaxed);
  return p;
}

uint64_t t4a_heap_allocations(void) {
  return atomic_load_explicit(&g_heap_allocations, memory_order_relaxed);
}

void t4a_fault_set_hook(t4a_fault_hook_fn hook, void *user) {
  if (hook == NULL) {
    atomic_store_explicit(&g_active, NULL, memory_order_release);
    return;
  }
  int i = atomic_fetch_add_explicit(&g_next_slot, 1, memory_order_relaxed) & 1;
  g_slots[i].fn = hook;
  g_slots[i].user = user;
  atomic_store_explicit(&g_active, &g_slots[i], memory_order_release);
}

int t4a_fault_sim(t4a_fault_point point) {
  fault_hook *h = atomic_load_explicit(&g_active, memory_order_acquire);
  if (h == NULL) return 0;
  return h->fn(point, h->user);
}

const char *t4a_fault_point_name(t4a_fault_point point) {
  switch (point) {
#define T4A_FAULT_NAME_(name) \
  case T4A_FAULT_##name:      \
    return #name;
    T4A_FAULT_POINT_LIST(T4A_FAULT_NAME_)
#undef T4A_FAULT_NAME_
    case T4A_FAULT_POINT_COUNT:
      break;
  }
  return "UNKNOWN";
}

void *t4a_host_malloc(size_t bytes) {
  void *p = NULL;
  if (!t4a_fault_sim(T4A_FAULT_HOST_MALLOC)) p = malloc(bytes == 0 ? 1 : bytes);
  if (p == NULL) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "malloc", 0, NULL, (uint64_t)bytes,
                   "host allocation of %zu bytes failed", bytes);
  }
  return counted(p);
}

void *t4a_host_calloc(size_t n, size_t size) {
  if (size != 0 && n > SIZE_MAX / size) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "calloc", 0, NULL, UINT64_MAX,
                   "host allocation of %zu x %zu bytes overflows", n, size);
    return NULL;
  }
  void *p = NULL;
  if (!t4a_fault_sim(T4A_FAULT_HOST_MALLOC)) p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
  if (p == NULL) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "calloc", 0, NULL, (uint64_t)(n * size),
                   "host allocation of %zu bytes failed", n * size);
  }
  return counted(p);
}

void *t4a_host_realloc(void *p, size_t bytes) {
  void *n = NULL;
  if (!t4a_fault_sim(T4A_FAULT_HOST_MALLOC)) n = realloc(p, bytes == 0 ? 1 : bytes);
  if (n == NULL) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "realloc", 0, NULL, (uint64_t)bytes,
                   "host reallocation to %zu bytes failed", bytes);
  }
  return counted(n);
}
