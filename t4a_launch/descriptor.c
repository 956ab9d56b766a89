/* Launch descriptors: a launch checked and stored once (function, config, packed arguments and
 * the kernel-parameter pointers into them, the buffers retained), then fired by id through the
 * launch core with no check and no heap allocation.
 *
 * Ids: the low 16 bits are the slot, the high 16 bits the slot's generation (bumped at every
 * unregister), so a stale id is refused until its slot was reused 65,536 times. Slots are reused
 * through a free list; the only allocation is the descriptor's own block, at register. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_retire/retire_internal.h"

#define MAX_CAPACITY 65536u

typedef t4a_launch_desc_ desc;

#define DEFAULT_CAPACITY 256u

t4a_status t4a_launch_table_create(t4a_retire *retire, const t4a_launch_table_options *options,
                                   t4a_launch_table **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_launch_table_options o = T4A_LAUNCH_TABLE_OPTIONS_INIT;
  if (options != NULL) o = *options;
  uint32_t capacity = o.capacity != 0 ? o.capacity : DEFAULT_CAPACITY;
  if (retire == NULL || capacity > MAX_CAPACITY) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "retire is NULL or the capacity %u is outside 1..%u", capacity,
                          MAX_CAPACITY);
  }
  t4a_launch_strategy strategy;
  uint32_t graph_after;
  t4a_status st = t4a_launch_policy_resolve_(&o.launch, &strategy, &graph_after);
  if (st != T4A_OK) return st;
  t4a_launch_table *t = t4a_host_calloc(1, sizeof *t);
  if (t == NULL) return T4A_HOST_OUT_OF_MEMORY;
  t->slots = t4a_host_calloc(capacity, sizeof *t->slots);
  t->gens = t->slots != NULL ? t4a_host_calloc(capacity, sizeof *t->gens) : NULL;
  t->free_ids = t->gens != NULL ? t4a_host_calloc(capacity, sizeof *t->free_ids) : NULL;
  if (t->free_ids == NULL) goto oom;
  atomic_init(&t->lock.state, 0);
  t->retire = retire;
  t->domain = t4a_lane_domain(t4a_retire_lane(retire));
  t->capacity = capacity;
  t->strategy = strategy;
  t->graph_after = graph_after;
  *out = t;
  return T4A_OK;
oom:
  free(t->gens);
  free(t->slots);
  free(t);
  return T4A_HOST_OUT_OF_MEMORY;
}

/* Drops a descriptor's graph and references and frees it (no lock held: releases may call the
 * driver). Queued launches of its graph finish before the driver frees it; the epochs keep the
 * module and the buffers for them. */
static void desc_free(t4a_launch_table *t, desc *d) {
  if (d == NULL) return;
  if (d->graph.graph != NULL || d->graph.exec != NULL) {
    t4a_launch_destroy_native_(t4a_retire_lane(t->retire), d->graph.graph, d->graph.exec);
  }
  for (uint32_t i = 0; i < d->num_params; i++) t4a_buffer_release(d->bufs[i]);
  t4a_function_release(d->fn);
  free(d);
}

void t4a_launch_table_destroy(t4a_launch_table *t) {
  if (t == NULL) return;
  t4a_error saved;
  t4a_error_last(&saved);
  /* A recording left open: its references go. */
  if (t->observer != NULL) t->observer->drop_recording(t);
  for (uint32_t i = 0; i < t->next_unused; i++) desc_free(t, t->slots[i]);
  free(t->free_ids);
  free(t->gens);
  free(t->slots);
  free(t);
  t4a_error_restore(&saved);
}

/* The descriptor named by `id` (lock held), or NULL with INVALID_ARGUMENT recorded. */
desc *t4a_launch_table_lookup_(t4a_launch_table *t, uint32_t id) {
  uint32_t slot = id & 0xffffu, gen = id >> 16;
  if (slot < t->next_unused && t->slots[slot] != NULL && t->gens[slot] == gen) {
    return t->slots[slot];
  }
  t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                 "descriptor id %u (slot %u, generation %u) is not registered", id, slot, gen);
  return NULL;
}

/* Writes checked argument i (`size` bytes at `src`, buffer `b` or NULL) into the descriptor. Only
 * changed bytes mark its graph node and its chains' nodes stale, and only a changed buffer is
 * retained (the previous one handed back in *old for the caller to release unlocked; else *old
 * is NULL). */
static void apply_arg(t4a_launch_table *t, desc *d, uint32_t i, const void *src, uint32_t size,
                      t4a_buffer *b, t4a_buffer **old) {
  if (t4a_launch_store_arg_(d->bytes + d->offsets[i], src, size)) {
    d->graph.dirty = 1; /* the graph's node holds the old arguments until the next fire */
    d->bind_gen++;      /* chains' nodes hold them until their next replay */
    /* Chains skip their scan while this figure stands. Only a descriptor chains name can matter
     * (and only such a one is bound under the lock: registration binds before taking it). */
    if (d->chain_nodes > 0) t->binds++;
  }
  *old = NULL;
  if (b != d->bufs[i]) {
    t4a_buffer_retain(b);
    *old = d->bufs[i];
    d->bufs[i] = b;
  }
}

/* Checks argument i against parameter i and writes it into the descriptor, retaining a buffer
 * (the previous one is handed back in *old for the caller to release unlocked). */
static t4a_status bind_arg(t4a_launch_table *t, desc *d, uint32_t i, const t4a_arg *a,
                           t4a_buffer **old) {
  uint64_t scratch = 0;
  const void *src = NULL;
  uint32_t size = 0;
  t4a_buffer *b = NULL;
  t4a_status st = t4a_launch_check_arg_(d->fn, t->domain, i, a, &scratch, &src, &size, &b);
  if (st != T4A_OK) return st;
  if (size != d->sizes[i]) {
    /* Only reachable where the layout is unknown: the slot was sized by the first binding. */
    return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                          "kernel '%s' parameter %u: bound with %u bytes, rebound with %u",
                          d->fn->name, i, d->sizes[i], size);
  }
  apply_arg(t, d, i, src, size, b, old);
  return T4A_OK;
}

/* Takes the table's lock, unless this thread holds the retire's operation lock (inside a raw
 * scope, say): a fire would then wait for that lock while holding the table's, and another
 * thread firing would wait for the table's while holding the retire's — re-entry instead. The
 * table's lock comes just before its retire's in the lock order (t4a_retire_internal.h): one
 * held by this thread ordered after the retire's refuses it too. */
t4a_status t4a_launch_table_lock_(t4a_launch_table *t) {
  /* A host function must not wait for the table: its holder may be waiting for the stream. */
  if (t4a_in_host_fn_()) return t4a_host_fn_refuse_("a launch table");
  if (t4a_retire_lock_would_invert_(t->retire)) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "a launch table was used from inside an admission of its own runtime, "
                          "or of a runtime whose lane comes after its own in the lock order (a "
                          "raw scope's callback?)");
  }
  t4a_oplock_lock_(&t->lock);
  return T4A_OK;
}

static t4a_status register_desc(t4a_launch_table *t, t4a_function *fn,
                                const t4a_launch_config *config, const t4a_launch_attrs *attrs,
                                const t4a_arg *args, uint32_t num_args, uint32_t *out_id) {
  if (out_id == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out_id = 0;
  if (t == NULL || fn == NULL || config == NULL || (num_args > 0 && args == NULL)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "table, function, config or args is NULL");
  }
  if (t4a_function_domain(fn) != t->domain) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "kernel '%s' belongs to domain %llu, the table's retire to %llu",
                          fn->name, (unsigned long long)t4a_function_domain(fn),
                          (unsigned long long)t->domain);
  }
  t4a_status st = t4a_launch_check_config_(fn, config);
  if (st != T4A_OK) return st;
  uint32_t expected = 0;
  if ((st = t4a_launch_expected_params_(fn, &expected)) != T4A_OK) return st;
  if (num_args != expected) {
    return t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                          "kernel '%s' takes %u parameters%s; %u given", fn->name, expected,
                          fn->known ? "" : " (declared)", num_args);
  }
  /* Check every argument and lay the bytes out: at the driver's offsets when the layout is
   * known, else each argument 8-byte aligned. */
  uint32_t offsets[T4A_MAX_KERNEL_PARAMS], sizes[T4A_MAX_KERNEL_PARAMS];
  size_t total = 0;
  for (uint32_t i = 0; i < num_args; i++) {
    uint64_t scratch = 0;
    const void *src = NULL;
    uint32_t size = 0;
    t4a_buffer *b = NULL;
    st = t4a_launch_check_arg_(fn, t->domain, i, &args[i], &scratch, &src, &size, &b);
    if (st != T4A_OK) return st;
    size_t off = fn->known ? fn->offsets[i] : (total + 7) / 8 * 8;
    offsets[i] = (uint32_t)off;
    sizes[i] = size;
    if (off + size > total) total = off + size;
  }
  /* The attributes last: their checks may ask the driver (occupancy, cluster limits). */
  t4a_launch_ex_ ex;
  if ((st = t4a_launch_check_attrs_(fn, config, attrs, &ex)) != T4A_OK) return st;
  size_t n = num_args;
  size_t head = (sizeof(desc) + 7) / 8 * 8;
  size_t block = head + n * (sizeof(void *) + sizeof(t4a_buffer *) + 2 * sizeof(uint32_t)) + total;
  desc *d = t4a_host_calloc(1, block);
  if (d == NULL) return T4A_HOST_OUT_OF_MEMORY;
  unsigned char *p = (unsigned char *)d + head;
  d->ptrs = (void **)p;
  d->bufs = (t4a_buffer **)(p + n * sizeof(void *));
  d->offsets = (uint32_t *)(p + n * (sizeof(void *) + sizeof(t4a_buffer *)));
  d->sizes = d->offsets + n;
  d->bytes = (unsigned char *)(d->sizes + n);
  d->num_params = num_args;
  d->cfg = *config;
  d->ex = ex;
  /* A launch with attributes fires as cuLaunchKernelEx, never through a one-node graph. */
  d->graph.enabled = t->strategy == T4A_LAUNCH_STRATEGY_GRAPH && ex.num == 0;
  d->graph.fires_left = t->graph_after - 1;
  t4a_function_retain(fn);
  d->fn = fn;
  for (uint32_t i = 0; i < num_args; i++) {
    d->offsets[i] = offsets[i];
    d->sizes[i] = sizes[i];
    d->ptrs[i] = d->bytes + offsets[i];
    t4a_buffer *old = NULL;
    st = bind_arg(t, d, i, &args[i], &old); /* checked above: cannot fail */
    if (st != T4A_OK) {
      desc_free(t, d);
      return st;
    }
  }

  t4a_status locked = t4a_launch_table_lock_(t);
  if (locked != T4A_OK) {
    desc_free(t, d);
    return locked;
  }
  uint32_t slot;
  if (t->num_free > 0) {
    slot = t->free_ids[--t->num_free];
  } else if (t->next_unused < t->capacity) {
    slot = t->next_unused++;
    t->gens[slot] = 1; /* id 0 is never valid */
  } else {
    t4a_oplock_unlock_(&t->lock);
    desc_free(t, d);
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, 0,
                          "the launch table is full (%u descriptors)", t->capacity);
  }
  t->slots[slot] = d;
  t->descriptors++;
  *out_id = (uint32_t)t->gens[slot] << 16 | slot;
  t4a_oplock_unlock_(&t->lock);
  return T4A_OK;
}

t4a_status t4a_descriptor_register(t4a_launch_table *t, t4a_function *fn,
                                   const t4a_launch_config *config, const t4a_arg *args,
                                   uint32_t num_args, uint32_t *out_id) {
  return register_desc(t, fn, config, NULL, args, num_args, out_id);
}

t4a_status t4a_descriptor_register_ex(t4a_launch_table *t, t4a_function *fn,
                                      const t4a_launch_config *config,
                                      const t4a_launch_attrs *attrs, const t4a_arg *args,
                                      uint32_t num_args, uint32_t *out_id) {
  return register_desc(t, fn, config, attrs, args, num_args, out_id);
}

static t4a_status fire_locked_on(t4a_launch_table *t, t4a_retire *retire, desc *d) {
  t4a_launch_graph_ *g = &d->graph;
  g->used = g->built = g->updated = g->fell_back = 0;
  g->want_node = t->rec != NULL; /* a chain is being recorded: learn the captured node */
  t4a_status st = t4a_launch_enqueue_ex_(retire, d->fn, &d->cfg,
                                         d->num_params > 0 ? d->ptrs : NULL, d->bufs,
                                         d->num_params, g, &d->ex);
  /* (always the descriptor's graph: a PLAIN table's fires never go through the function's) */
  if (g->want_node) {
    if (st != T4A_OK) g->node_status = st; /* the recording cannot be trusted either */
    t->observer->note_fire(t, d); /* registered with the recording */
    g->want_node = 0;
  }
  t->graph_builds += g->built;
  t->graphs += g->built;
  t->graph_updates += g->updated;
  t->graph_fallbacks += g->fell_back;
  if (st == T4A_OK) {
    if (g->used) {
      t->graph_fires++;
    } else {
      t->plain_fires++;
    }
  }
  return st;
}

static t4a_status fire_locked(t4a_launch_table *t, desc *d) {
  return fire_locked_on(t, t->retire, d);
}

t4a_status t4a_descriptor_fire_on(t4a_launch_table *t, t4a_retire *retire, uint32_t id) {
  if (t == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  if (retire == NULL || retire == t->retire) return t4a_descriptor_fire(t, id);
  uint64_t own = t4a_lane_domain(t4a_retire_lane(t->retire));
  uint64_t other = t4a_lane_domain(t4a_retire_lane(retire));
  if (own != other) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the launch table belongs to domain %llu, the stream to %llu",
                          (unsigned long long)own, (unsigned long long)other);
  }
  /* The table's lock sits just before its own retire's in the lock order: a stream whose retire
   * comes earlier (created before the table's) could only be entered out of order while holding
   * it, and a thread inside that stream's admission firing this table would deadlock with us. */
  if (t4a_retire_lock_before_(retire, t->retire)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a launch table fires on its own stream or on streams made after it "
                          "(the lock order); this stream's retire comes before the table's: use "
                          "a table created on that stream");
  }
  if (t4a_retire_lock_would_invert_(retire)) {
    return t4a_error_set_(T4A_REENTRY, NULL, 0, NULL, 0,
                          "a descriptor was fired on a stream from inside an admission ordered "
                          "after it (a raw scope's callback?)");
  }
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  desc *d = t4a_launch_table_lookup_(t, id);
  if (d == NULL) {
    st = T4A_INVALID_ARGUMENT;
  } else if (t->rec != NULL) {
    st = t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                        "the table is recording a launch chain on its own stream: fire on "
                        "another stream after t4a_chain_end");
  } else {
    st = fire_locked_on(t, retire, d);
  }
  t4a_oplock_unlock_(&t->lock);
  return st;
}

t4a_status t4a_descriptor_fire(t4a_launch_table *t, uint32_t id) {
  if (t == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  desc *d = t4a_launch_table_lookup_(t, id);
  st = d != NULL ? fire_locked(t, d) : T4A_INVALID_ARGUMENT;
  t4a_oplock_unlock_(&t->lock);
  return st;
}

t4a_status t4a_descriptor_rebind(t4a_launch_table *t, uint32_t id, uint32_t index,
                                 const t4a_arg *arg) {
  if (t == NULL || arg == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table or arg is NULL");
  }
  t4a_buffer *old = NULL;
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  desc *d = t4a_launch_table_lookup_(t, id);
  st = T4A_INVALID_ARGUMENT;
  if (d != NULL && index >= d->num_params) {
    st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                        "kernel '%s' has %u parameters; index %u is out of range", d->fn->name,
                        d->num_params, index);
  } else if (d != NULL) {
    st = bind_arg(t, d, index, arg, &old);
    /* Queued chain replays read the old buffer: the epoch keeps it for them. */
    if (old != NULL && d->chain_nodes > 0) t->observer->hold_buffers(t, &old, 1);
  }
  t4a_oplock_unlock_(&t->lock);
  t4a_buffer_release(old); /* queued fires kept it in their epochs */
  return st;
}

t4a_status t4a_descriptor_rebind_fire(t4a_launch_table *t, uint32_t id, const t4a_arg *args,
                                      uint32_t num_args) {
  if (t == NULL || (num_args > 0 && args == NULL)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table or args is NULL");
  }
  t4a_buffer *old[T4A_MAX_KERNEL_PARAMS];
  uint32_t num_old = 0;
  t4a_status st = t4a_launch_table_lock_(t);
  if (st != T4A_OK) return st;
  desc *d = t4a_launch_table_lookup_(t, id);
  st = d != NULL ? T4A_OK : T4A_INVALID_ARGUMENT;
  if (d != NULL && num_args != d->num_params) {
    st = t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                        "kernel '%s' takes %u parameters; %u given", d->fn->name, d->num_params,
                        num_args);
  }
  /* Check every argument before changing any, so a refusal leaves the descriptor as it was. */
  uint64_t scratch[T4A_MAX_KERNEL_PARAMS];
  const void *src[T4A_MAX_KERNEL_PARAMS];
  uint32_t size[T4A_MAX_KERNEL_PARAMS];
  t4a_buffer *bufs[T4A_MAX_KERNEL_PARAMS];
  for (uint32_t i = 0; st == T4A_OK && i < num_args; i++) {
    st = t4a_launch_check_arg_(d->fn, t->domain, i, &args[i], &scratch[i], &src[i], &size[i],
                               &bufs[i]);
    if (st == T4A_OK && size[i] != d->sizes[i]) {
      st = t4a_error_set_(T4A_ARGUMENT_MISMATCH, NULL, 0, NULL, 0,
                          "kernel '%s' parameter %u: bound with %u bytes, rebound with %u",
                          d->fn->name, i, d->sizes[i], size[i]);
    }
  }
  for (uint32_t i = 0; st == T4A_OK && i < num_args; i++) {
    t4a_buffer *prev = NULL;
    apply_arg(t, d, i, src[i], size[i], bufs[i], &prev);
    if (prev != NULL) old[num_old++] = prev;
  }
  if (num_old > 0 && d->chain_nodes > 0) t->observer->hold_buffers(t, old, num_old);
  if (st == T4A_OK) st = fire_locked(t, d);
  t4a_oplock_unlock_(&t->lock);
  for (uint32_t i = 0; i < num_old; i++) t4a_buffer_release(old[i]);
  return st;
}

t4a_status t4a_descriptor_unregister(t4a_launch_table *t, uint32_t id) {
  if (t == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  t4a_status locked = t4a_launch_table_lock_(t);
  if (locked != T4A_OK) return locked;
  desc *d = t4a_launch_table_lookup_(t, id);
  if (d != NULL && d->chain_nodes > 0) {
    uint32_t nodes = d->chain_nodes;
    t4a_oplock_unlock_(&t->lock);
    return t4a_error_set_(T4A_BUSY, NULL, 0, NULL, 0,
                          "descriptor %u is fired by %u kernel node(s) of live launch chains: "
                          "destroy those chains first",
                          id, nodes);
  }
  if (d != NULL) {
    uint32_t slot = id & 0xffffu;
    t->slots[slot] = NULL;
    t->gens[slot] = (uint16_t)(t->gens[slot] + 1 == 0 ? 1 : t->gens[slot] + 1);
    t->free_ids[t->num_free++] = slot;
    t->descriptors--;
    t->graphs -= d->graph.exec != NULL;
  }
  t4a_oplock_unlock_(&t->lock);
  if (d == NULL) return T4A_INVALID_ARGUMENT;
  t4a_error saved;
  t4a_error_last(&saved);
  desc_free(t, d); /* its fires kept the module and the buffers in their epochs */
  t4a_error_restore(&saved);
  return T4A_OK;
}

void t4a_launch_table_touch_(t4a_launch_table *t, uint32_t id) {
  t4a_oplock_lock_(&t->lock);
  uint32_t slot = id & 0xffffu;
  if (slot < t->next_unused && t->slots[slot] != NULL && t->gens[slot] == id >> 16) {
    t->slots[slot]->graph.dirty = 1;
  }
  t4a_oplock_unlock_(&t->lock);
}

void t4a_launch_table_stats(t4a_launch_table *t, struct t4a_launch_table_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  /* Inside an admission of the table's runtime (a raw scope's callback) the table's lock could
   * deadlock against a fire waiting for the admission: all zero. */
  if (t == NULL || t4a_retire_lock_would_invert_(t->retire)) return;
  t4a_oplock_lock_(&t->lock);
  out->strategy = t->strategy;
  out->graph_after = t->graph_after;
  out->descriptors = t->descriptors;
  out->graphs = t->graphs;
  out->plain_fires = t->plain_fires;
  out->graph_fires = t->graph_fires;
  out->graph_builds = t->graph_builds;
  out->graph_updates = t->graph_updates;
  out->graph_fallbacks = t->graph_fallbacks;
  t4a_oplock_unlock_(&t->lock);
}
