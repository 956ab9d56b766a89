/* The counter block's layout and the increment, for t4a's own libraries (target
 * //t4a_ctx:counters_internal). Public headers keep t4a_counters opaque so that they compile as
 * C++; only C sources of t4a include this. */
#ifndef T4A_CTX_COUNTERS_BLOCK_H_
#define T4A_CTX_COUNTERS_BLOCK_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "t4a/counters.h"

/* A single-writer part of a block, for the counters an admission makes (T4A_COUNTER_SHARD_LIST,
 * 8 words: one or two cache lines instead of one per counter). One owner at a time
 * (t4a_counters_take_shard_), which writes it only under one lock of its own, so an increment is
 * a load and a store, not a locked read-modify-write. Readers sum it into the block
 * (t4a_counters_stats). */
#define T4A_COUNTER_SHARD_LIST(X)                                                              \
  X(admissions)                                                                                \
  X(launches)                                                                                  \
  X(ctx_activations_skipped)                                                                   \
  X(keepalives_deduplicated)                                                                   \
  X(keepalives_held)                                                                           \
  X(ctx_activations)                                                                           \
  X(graph_launches)                                                                            \
  X(launch_graph_fires)
enum {
#define T4A_COUNTER_SHARD_SLOT_(name) T4A_SHARD_SLOT_##name,
  T4A_COUNTER_SHARD_LIST(T4A_COUNTER_SHARD_SLOT_)
#undef T4A_COUNTER_SHARD_SLOT_
  T4A_COUNTER_SHARD_SLOTS
};
typedef struct t4a_counter_shard_ {
  _Atomic uint64_t v[T4A_COUNTER_SHARD_SLOTS];
} t4a_counter_shard_;

/* A counter's word in a shard, or -1 (it has none: counted in the block). */
static inline int t4a_counter_shard_slot_(t4a_counter_id id) {
  switch (id) {
#define T4A_COUNTER_SHARD_CASE_(name) \
  case T4A_COUNTER_##name:            \
    return T4A_SHARD_SLOT_##name;
    T4A_COUNTER_SHARD_LIST(T4A_COUNTER_SHARD_CASE_)
#undef T4A_COUNTER_SHARD_CASE_
    default:
      return -1;
  }
}

/* Zero-initialise (static storage, calloc or memset) before use. `shards`: NULL, or an array of
 * num_shards set before the block is shared and kept as long as the block (`taken`: a bit per
 * shard with an owner). */
struct t4a_counters {
  _Atomic uint64_t v[T4A_COUNTER_COUNT];
  t4a_counter_shard_ *shards;
  uint32_t num_shards;
  _Atomic uint32_t taken;
};

/* Adds n to one counter (relaxed: counters order nothing). */
static inline void t4a_counter_add(t4a_counters *c, t4a_counter_id id, uint64_t n) {
  atomic_fetch_add_explicit(&c->v[id], n, memory_order_relaxed);
}

/* Adds n to one counter of `c` from the owner of shard `s` (NULL: none), under the lock that
 * serialises the owner's writes: into the shard when the counter has a word there — no other
 * thread writes that word, so the relaxed load and store lose nothing, and both being atomic they
 * race with no reader — else into the block, atomically. */
static inline void t4a_counter_add_owned_(t4a_counters *c, t4a_counter_shard_ *s,
                                          t4a_counter_id id, uint64_t n) {
  int k = s != NULL ? t4a_counter_shard_slot_(id) : -1;
  if (k >= 0) {
    atomic_store_explicit(&s->v[k], atomic_load_explicit(&s->v[k], memory_order_relaxed) + n,
                          memory_order_relaxed);
  } else {
    t4a_counter_add(c, id, n);
  }
}

/* A free shard of `c` for one owner (acquire: the previous owner's writes come before), or NULL
 * when all are taken (the owner then counts with t4a_counter_add). Its values stay counted. */
static inline t4a_counter_shard_ *t4a_counters_take_shard_(t4a_counters *c) {
  for (uint32_t i = 0; i < c->num_shards && i < 32; i++) {
    uint32_t bit = 1u << i;
    uint32_t old = atomic_load_explicit(&c->taken, memory_order_relaxed);
    while (!(old & bit)) {
      if (atomic_compare_exchange_weak_explicit(&c->taken, &old, old | bit,
                                                memory_order_acquire, memory_order_relaxed)) {
        return &c->shards[i];
      }
    }
  }
  return NULL;
}

/* Gives a shard back (release: its writes come before the next owner's). NULL: nothing. */
static inline void t4a_counters_put_shard_(t4a_counters *c, t4a_counter_shard_ *s) {
  if (s == NULL) return;
  uint32_t i = (uint32_t)(s - c->shards);
  atomic_fetch_and_explicit(&c->taken, ~(1u << i), memory_order_release);
}

#endif /* T4A_CTX_COUNTERS_BLOCK_H_ */
