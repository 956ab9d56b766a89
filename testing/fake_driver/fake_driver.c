/* testing/fake_driver — the core of the fake driver: the global fake, its lock and handles, the
 * call prologue, failure injection, counts and the public t4a_fake_* calls. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a_ctx/status_internal.h"
#include "testing/fake_driver/fake_errors.h"
#include "testing/fake_driver/fake_internal.h"

/* The one fake, and the lock that guards it (and every entry point). */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mutex;
static t4a_fake *g_fake;
static uint32_t g_generation;
/* Driver calls refused because they came from inside a host function (any fake). */
static atomic_ullong g_host_fn_calls;

static void fk_lock_init(void) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g_mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

void fk_lock(void) {
  pthread_once(&g_once, fk_lock_init);
  pthread_mutex_lock(&g_mutex);
}

void fk_unlock(void) { pthread_mutex_unlock(&g_mutex); }

t4a_fake *fk_global(void) { return g_fake; }

/* ---- lists and range indexes -------------------------------------------------------------- */

void fk_list_init(fk_link *head) { head->prev = head->next = head; }

void fk_list_push(fk_link *head, fk_link *node) {
  node->prev = head->prev;
  node->next = head;
  head->prev->next = node;
  head->prev = node;
}

void fk_list_remove(fk_link *node) {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = node;
}

int fk_list_empty(const fk_link *head) { return head->next == head; }

/* Index of the first range whose base is greater than addr. */
static size_t rindex_upper(const fk_rindex *ri, uint64_t addr) {
  size_t lo = 0, hi = ri->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ri->v[mid].base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

int fk_rindex_insert(fk_rindex *ri, uint64_t base, uint64_t size, void *obj) {
  if (ri->n == ri->cap) {
    size_t cap = ri->cap ? ri->cap * 2 : 64;
    fk_range *v = realloc(ri->v, cap * sizeof *v);
    if (v == NULL) return 0;
    ri->v = v;
    ri->cap = cap;
  }
  size_t at = rindex_upper(ri, base);
  memmove(&ri->v[at + 1], &ri->v[at], (ri->n - at) * sizeof ri->v[0]);
  ri->v[at].base = base;
  ri->v[at].size = size;
  ri->v[at].obj = obj;
  ri->n++;
  return 1;
}

void fk_rindex_remove(fk_rindex *ri, uint64_t base) {
  size_t at = rindex_upper(ri, base);
  if (at == 0 || ri->v[at - 1].base != base) return;
  at--;
  memmove(&ri->v[at], &ri->v[at + 1], (ri->n - at - 1) * sizeof ri->v[0]);
  ri->n--;
}

void *fk_rindex_find(const fk_rindex *ri, uint64_t addr, uint64_t len) {
  size_t at = rindex_upper(ri, addr);
  if (at == 0) return NULL;
  const fk_range *r = &ri->v[at - 1];
  uint64_t off = addr - r->base;
  if (len == 0) return off <= r->size ? r->obj : NULL;
  if (off >= r->size || len > r->size - off) return NULL;
  return r->obj;
}

void *fk_rindex_overlap(const fk_rindex *ri, uint64_t addr, uint64_t len) {
  if (len == 0) return NULL;
  size_t at = rindex_upper(ri, addr);
  if (at > 0) {
    const fk_range *r = &ri->v[at - 1];
    if (addr - r->base < r->size) return r->obj;
  }
  if (at < ri->n) {
    const fk_range *r = &ri->v[at];
    if (r->base - addr < len) return r->obj;
  }
  return NULL;
}

void fk_rindex_free(fk_rindex *ri) {
  free(ri->v);
  ri->v = NULL;
  ri->n = ri->cap = 0;
}

int fk_is_fake_addr(uint64_t addr) { return addr >= FK_FAKE_ADDR_LO && addr < FK_FAKE_ADDR_HI; }

/* ---- handles ------------------------------------------------------------------------------ */

/* A handle: tag in the top 16 bits, the fake's generation in the next 16, the slot index in the
 * low 32. Index 0 is never used, so no handle is 0, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD. */
#define FK_HANDLE_TAG 0x7F5A000000000000ull

int fk_handle_new(t4a_fake *f, fk_obj *obj, fk_kind kind) {
  obj->kind = kind;
  obj->handle = 0;
  if (f->num_slots == f->cap_slots) {
    if (f->cap_slots >= 0x80000000u) return 0;
    uint32_t cap = f->cap_slots ? f->cap_slots * 2 : 256;
    fk_obj **slots = realloc(f->slots, (size_t)cap * sizeof *slots);
    if (slots == NULL) return 0;
    f->slots = slots;
    f->cap_slots = cap;
  }
  uint32_t index = f->num_slots++;
  f->slots[index] = obj;
  obj->handle = FK_HANDLE_TAG | ((uint64_t)(f->generation & 0xFFFFu) << 32) | index;
  return 1;
}

static uint32_t handle_index(t4a_fake *f, uint64_t handle, int *ok) {
  *ok = 0;
  if ((handle & 0xFFFF000000000000ull) != FK_HANDLE_TAG) return 0;
  if (((handle >> 32) & 0xFFFFu) != (f->generation & 0xFFFFu)) return 0;
  uint32_t index = (uint32_t)handle;
  if (index == 0 || index >= f->num_slots) return 0;
  *ok = 1;
  return index;
}

void fk_handle_drop(t4a_fake *f, fk_obj *obj) {
  int ok;
  uint32_t index = handle_index(f, obj->handle, &ok);
  if (ok && f->slots[index] == obj) f->slots[index] = NULL;
  obj->handle = 0;
}

void *fk_handle_get(t4a_fake *f, uint64_t handle, fk_kind kind) {
  int ok;
  uint32_t index = handle_index(f, handle, &ok);
  if (!ok) return NULL;
  fk_obj *obj = f->slots[index];
  if (obj == NULL || obj->kind != kind) return NULL;
  return obj;
}

/* ---- error names -------------------------------------------------------------------------- */

typedef struct fk_error_row {
  CUresult code;
  const char *name;
  const char *text;
} fk_error_row;

static const fk_error_row k_errors[] = {
#define FK_ERROR_ROW_(name, text) {name, #name, text},
    FK_CURESULT_LIST(FK_ERROR_ROW_)
#undef FK_ERROR_ROW_
};

const char *fk_error_name(CUresult r) {
  for (size_t i = 0; i < FK_ARRAY_LEN(k_errors); i++) {
    if (k_errors[i].code == r) return k_errors[i].name;
  }
  return NULL;
}

const char *fk_error_string(CUresult r) {
  for (size_t i = 0; i < FK_ARRAY_LEN(k_errors); i++) {
    if (k_errors[i].code == r) return k_errors[i].text;
  }
  return NULL;
}

/* ---- the call prologue -------------------------------------------------------------------- */

static const char *const k_entry_names[FK_E_COUNT] = {
#define FK_ENTRY_NAME_(name, version, need) #name,
    T4A_DRIVER_CATALOG(FK_ENTRY_NAME_)
#undef FK_ENTRY_NAME_
};

static int entry_index(const char *name) {
  for (int i = 0; i < FK_E_COUNT; i++) {
    if (strcmp(k_entry_names[i], name) == 0) return i;
  }
  return -2;
}

/* Entries that work before cuInit. */
static int entry_needs_init(int entry) {
  return entry != FK_E_cuInit && entry != FK_E_cuDriverGetVersion &&
         entry != FK_E_cuGetErrorName && entry != FK_E_cuGetErrorString;
}

/* Entries that enqueue work (an after_enqueue injection lets them do it, then fail). */
static int entry_enqueues(int entry) {
  switch (entry) {
    case FK_E_cuStreamWaitEvent:
    case FK_E_cuEventRecord:
    case FK_E_cuEventRecordWithFlags:
    case FK_E_cuMemAllocFromPoolAsync:
    case FK_E_cuMemAllocAsync:
    case FK_E_cuMemFreeAsync:
    case FK_E_cuMemsetD8Async:
    case FK_E_cuMemsetD16Async:
    case FK_E_cuMemsetD32Async:
    case FK_E_cuLaunchHostFunc:
    case FK_E_cuMemcpyHtoDAsync:
    case FK_E_cuMemcpyDtoHAsync:
    case FK_E_cuMemcpyDtoDAsync:
    case FK_E_cuMemcpyPeerAsync:
    case FK_E_cuMemcpyAsync:
    case FK_E_cuLaunchKernel:
    case FK_E_cuLaunchKernelEx:
    case FK_E_cuGraphLaunch:
    case FK_E_cuGraphUpload:
      return 1;
    default:
      return 0;
  }
}

int fk_enter(fk_call *c, int entry) {
  c->f = NULL;
  c->result = CUDA_SUCCESS;
  c->inject_after = 0;
  c->inject_result = CUDA_SUCCESS;
  if (fk_in_host_fn()) {
    /* The Driver API: a host function must not call CUDA (it may fail with NOT_PERMITTED, or
     * deadlock on a stream waiting for the function). The fake refuses every call, without the
     * lock (the engine that runs the function holds it). */
    atomic_fetch_add(&g_host_fn_calls, 1);
    c->result = CUDA_ERROR_NOT_PERMITTED;
    return 0;
  }
  fk_lock();
  t4a_fake *f = g_fake;
  if (f == NULL) {
    fk_unlock();
    c->result = CUDA_ERROR_DEINITIALIZED;
    return 0;
  }
  c->f = f;
  f->calls[entry]++;
  f->total_calls++;

  /* Every matching rule sees the call; the first one inside its failing window fires. */
  int fired = 0;
  for (fk_rule *r = f->rules; r != NULL; r = r->next) {
    if (r->entry != -1 && r->entry != entry) continue;
    uint64_t seen = r->seen++;
    if (fired || seen < r->skip || seen - r->skip >= r->count) continue;
    fired = 1;
    f->injected++;
    if (r->after_enqueue && entry_enqueues(entry)) {
      c->inject_after = 1;
      c->inject_result = r->result;
    } else {
      c->result = r->result;
    }
  }
  if (fired && !c->inject_after) {
    fk_unlock();
    return 0;
  }
  if (entry_needs_init(entry) && !f->initialized) {
    fk_unlock();
    c->result = CUDA_ERROR_NOT_INITIALIZED;
    return 0;
  }
  return 1;
}

CUresult fk_leave(fk_call *c, CUresult r) {
  t4a_fake *f = c->f;
  if (f != NULL && f->engine_depth == 0) fk_reap_streams(f);
  fk_unlock();
  if (c->inject_after) return c->inject_result;
  return r;
}

void fk_count_only(int entry) {
  fk_lock();
  if (g_fake != NULL) {
    g_fake->calls[entry]++;
    g_fake->total_calls++;
  }
  fk_unlock();
}

/* ---- creation and destruction ------------------------------------------------------------- */

/* T4A_FAKE_PROGRESS_ORDER=creation|reverse|random[:SEED] overrides the default order, so that
 * a whole suite can be rerun under another one. An explicit option wins. */
static void progress_order_from_env(t4a_fake_options *opt) {
  if (opt->progress_order != T4A_FAKE_ORDER_CREATION) return;
  const char *e = getenv("T4A_FAKE_PROGRESS_ORDER");
  if (e == NULL || *e == '\0' || strcmp(e, "creation") == 0) return;
  if (strcmp(e, "reverse") == 0) {
    opt->progress_order = T4A_FAKE_ORDER_REVERSE;
  } else if (strncmp(e, "random", 6) == 0 && (e[6] == '\0' || e[6] == ':')) {
    opt->progress_order = T4A_FAKE_ORDER_RANDOM;
    if (e[6] == ':' && opt->progress_seed == 0) opt->progress_seed = strtoull(e + 7, NULL, 0);
  } else {
    fprintf(stderr, "t4a fake driver: T4A_FAKE_PROGRESS_ORDER=%s is not creation, reverse or "
            "random[:SEED]; ignored\n", e);
  }
}

t4a_status t4a_fake_create(const t4a_fake_options *options, t4a_fake **out) {
  if (out == NULL) return T4A_INVALID_ARGUMENT;
  *out = NULL;
  t4a_fake_options opt = T4A_FAKE_OPTIONS_INIT;
  if (options != NULL) opt = *options;
  if (opt.num_devices < 0 || opt.num_devices > T4A_FAKE_MAX_DEVICES) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_fake_create", 0, NULL, 0,
                          "num_devices %d is outside 0..%d", opt.num_devices,
                          T4A_FAKE_MAX_DEVICES);
  }
  if (opt.num_devices == 0) opt.num_devices = 1;
  if (opt.mem_bytes == 0) opt.mem_bytes = 1ull << 30;
  if (opt.cc_major == 0) {
    opt.cc_major = 9;
    opt.cc_minor = 0;
  }
  if (opt.sm_count == 0) opt.sm_count = 132;
  if (opt.driver_version == 0) opt.driver_version = 13000;
  progress_order_from_env(&opt);

  fk_lock();
  if (g_fake != NULL) {
    fk_unlock();
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_fake_create", 0, NULL, 0,
                          "a fake driver exists already");
  }
  t4a_fake *f = calloc(1, sizeof *f);
  if (f == NULL) {
    fk_unlock();
    return T4A_HOST_OUT_OF_MEMORY;
  }
  f->opt = opt;
  f->generation = ++g_generation;
  f->num_devices = opt.num_devices;
  f->query_policy = opt.query_policy;
  f->progress_order = opt.progress_order;
  f->rng = opt.progress_seed != 0 ? opt.progress_seed : 0x9E3779B97F4A7C15ull;
  f->num_slots = 1; /* index 0 is never a handle */
  fk_list_init(&f->contexts);
  fk_list_init(&f->streams);
  fk_list_init(&f->events);
  fk_list_init(&f->pools);
  fk_list_init(&f->modules);
  fk_list_init(&f->graphs);
  fk_list_init(&f->execs);
  f->next_id = 1;
  f->next_mapped = FK_MAPPED_BASE + 0x10000;
  f->slots = calloc(256, sizeof *f->slots);
  f->cap_slots = 256;
  f->host = calloc(1, sizeof *f->host);
  if (f->host != NULL) f->host->refs = 1;
  if (f->slots == NULL || f->host == NULL || !fk_device_setup(f)) {
    g_fake = f;
    t4a_fake_destroy(f);
    fk_unlock();
    return T4A_HOST_OUT_OF_MEMORY;
  }
  fk_fill_table(&f->table);
  if (opt.omit_param_info) f->table.cuFuncGetParamInfo = NULL;
  if (opt.omit_launch_ex) f->table.cuLaunchKernelEx = NULL;
  if (opt.omit_occupancy) {
    f->table.cuOccupancyMaxActiveBlocksPerMultiprocessor = NULL;
    f->table.cuOccupancyMaxPotentialBlockSize = NULL;
    f->table.cuOccupancyMaxPotentialClusterSize = NULL;
  }
  g_fake = f;
  fk_unlock();
  *out = f;
  return T4A_OK;
}

t4a_status t4a_fake_driver(t4a_fake *fake, t4a_driver **out) {
  if (out == NULL) return T4A_INVALID_ARGUMENT;
  *out = NULL;
  if (fake == NULL) return T4A_INVALID_ARGUMENT;
  return t4a_driver_create_from_table(&fake->table, "fake", NULL, NULL, out);
}

const t4a_driver_table *t4a_fake_table(t4a_fake *fake) {
  return fake == NULL ? NULL : &fake->table;
}

void t4a_fake_destroy(t4a_fake *fake) {
  if (fake == NULL) return;
  fk_lock();
  t4a_fake *f = fake;
  /* Streams first (their queues reference points and kernels), then graphs, modules, memory. */
  while (!fk_list_empty(&f->streams)) {
    fk_stream *s = FK_CONTAINER(f->streams.next, fk_stream, link);
    fk_stream_free(f, s);
  }
  while (!fk_list_empty(&f->execs)) fk_exec_free(f, FK_CONTAINER(f->execs.next, fk_exec, link));
  while (!fk_list_empty(&f->graphs)) {
    fk_graph_free(f, FK_CONTAINER(f->graphs.next, fk_graph, link));
  }
  while (!fk_list_empty(&f->events)) {
    fk_event_free(f, FK_CONTAINER(f->events.next, fk_event, link));
  }
  while (!fk_list_empty(&f->modules)) {
    fk_module_free(f, FK_CONTAINER(f->modules.next, fk_module, link));
  }
  fk_memory_free_all(f);
  fk_device_free_all(f);
  fk_kernels_free(f);
  fk_hsnap_unref(f->host);
  f->host = NULL;
  while (f->rules != NULL) {
    fk_rule *r = f->rules;
    f->rules = r->next;
    free(r);
  }
  free(f->slots);
  if (g_fake == f) g_fake = NULL;
  free(f);
  fk_unlock();
}

/* ---- progress ----------------------------------------------------------------------------- */

size_t t4a_fake_progress(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  size_t n = fk_progress_all(fake);
  fk_unlock();
  return n;
}

void t4a_fake_set_query_policy(t4a_fake *fake, t4a_fake_query_policy policy) {
  if (fake == NULL) return;
  fk_lock();
  fake->query_policy = policy;
  fk_unlock();
}

/* ---- failure injection -------------------------------------------------------------------- */

void t4a_fake_inject(t4a_fake *fake, const char *entry, uint64_t skip, uint64_t count,
                     CUresult result, int after_enqueue) {
  if (fake == NULL) return;
  int index = entry == NULL ? -1 : entry_index(entry);
  if (index == -2) {
    fprintf(stderr, "t4a_fake_inject: \"%s\" is not a catalogue entry; the rule never fires\n",
            entry);
  }
  fk_rule *r = calloc(1, sizeof *r);
  if (r == NULL) return;
  r->entry = index;
  r->skip = skip;
  r->count = count;
  r->result = result;
  r->after_enqueue = after_enqueue;
  fk_lock();
  /* Appended, so the oldest rule fires first when several would. */
  fk_rule **at = &fake->rules;
  while (*at != NULL) at = &(*at)->next;
  *at = r;
  fk_unlock();
}

void t4a_fake_clear_injections(t4a_fake *fake) {
  if (fake == NULL) return;
  fk_lock();
  while (fake->rules != NULL) {
    fk_rule *r = fake->rules;
    fake->rules = r->next;
    free(r);
  }
  fk_unlock();
}

uint64_t t4a_fake_injected(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = fake->injected;
  fk_unlock();
  return n;
}

/* ---- counts ------------------------------------------------------------------------------- */

uint64_t t4a_fake_calls(t4a_fake *fake, const char *entry) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = 0;
  if (entry == NULL) {
    n = fake->total_calls;
  } else {
    int index = entry_index(entry);
    if (index >= 0) n = fake->calls[index];
  }
  fk_unlock();
  return n;
}

void t4a_fake_reset_calls(t4a_fake *fake) {
  if (fake == NULL) return;
  fk_lock();
  memset(fake->calls, 0, sizeof fake->calls);
  fake->total_calls = 0;
  fk_unlock();
}

void t4a_fake_live_objects(t4a_fake *fake, t4a_fake_live *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  if (fake == NULL) return;
  fk_lock();
  *out = fake->live;
  for (int i = 0; i < fake->num_devices; i++) out->primary_refs[i] = fake->dev[i].refs;
  fk_unlock();
}

uint64_t t4a_fake_ordering_violations(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = fake->ordering_violations;
  fk_unlock();
  return n;
}

uint64_t t4a_fake_host_fn_driver_calls(void) { return atomic_load(&g_host_fn_calls); }

uint64_t t4a_fake_host_fns_run(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = fake->host_fns_run;
  fk_unlock();
  return n;
}

uint64_t t4a_fake_foreign_event_observations(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = fake->foreign_event_observations;
  fk_unlock();
  return n;
}

uint64_t t4a_fake_nonportable_pinned_uses(t4a_fake *fake) {
  if (fake == NULL) return 0;
  fk_lock();
  uint64_t n = fake->nonportable_pinned_uses;
  fk_unlock();
  return n;
}

int t4a_fake_nothing_live(t4a_fake *fake) {
  t4a_fake_live l;
  t4a_fake_live_objects(fake, &l);
  if (l.device_allocs || l.device_bytes || l.host_allocs || l.host_registrations || l.streams ||
      l.events || l.pools || l.modules || l.graphs || l.graph_execs) {
    return 0;
  }
  for (int i = 0; i < T4A_FAKE_MAX_DEVICES; i++) {
    if (l.primary_refs[i] != 0) return 0;
  }
  return 1;
}

/* ---- memory seen from the host ------------------------------------------------------------ */

void *t4a_fake_host_view(t4a_fake *fake, CUdeviceptr ptr, size_t bytes) {
  if (fake == NULL) return NULL;
  fk_lock();
  void *p = NULL;
  fk_alloc *a = fk_rindex_find(&fake->allocs, ptr, bytes);
  if (a != NULL) p = a->host + (ptr - a->base);
  fk_unlock();
  return p;
}
