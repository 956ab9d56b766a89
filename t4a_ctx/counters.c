/* Counter snapshots and names. */
#include "t4a/counters.h"

#include "t4a_ctx/counters_block.h"

#include <stddef.h>

void t4a_counters_stats(const t4a_counters *c, t4a_counter_values *out) {
  if (out == NULL) return;
  if (c == NULL) {
    *out = (t4a_counter_values){0};
    return;
  }
#define T4A_COUNTER_COPY_(name, desc)                                                          \
  out->name = atomic_load_explicit((_Atomic uint64_t *)&c->v[T4A_COUNTER_##name],             \
                                   memory_order_relaxed);
  T4A_COUNTER_LIST(T4A_COUNTER_COPY_)
#undef T4A_COUNTER_COPY_
  /* The single-writer shards (counters_block.h) are part of the block's values. */
  for (uint32_t i = 0; i < c->num_shards; i++) {
    const t4a_counter_shard_ *s = &c->shards[i];
#define T4A_COUNTER_SUM_(name)                                                                 \
  out->name += atomic_load_explicit((_Atomic uint64_t *)&s->v[T4A_SHARD_SLOT_##name],         \
                                    memory_order_relaxed);
    T4A_COUNTER_SHARD_LIST(T4A_COUNTER_SUM_)
#undef T4A_COUNTER_SUM_
  }
}

const char *t4a_counter_name(t4a_counter_id id) {
  switch (id) {
#define T4A_COUNTER_NAME_(name, desc) \
  case T4A_COUNTER_##name:            \
    return #name;
    T4A_COUNTER_LIST(T4A_COUNTER_NAME_)
#undef T4A_COUNTER_NAME_
    case T4A_COUNTER_COUNT:
      break;
  }
  return NULL;
}

const char *t4a_counter_description(t4a_counter_id id) {
  switch (id) {
#define T4A_COUNTER_DESC_(name, desc) \
  case T4A_COUNTER_##name:            \
    return desc;
    T4A_COUNTER_LIST(T4A_COUNTER_DESC_)
#undef T4A_COUNTER_DESC_
    case T4A_COUNTER_COUNT:
      break;
  }
  return NULL;
}

uint64_t t4a_counter_value(const t4a_counter_values *values, t4a_counter_id id) {
  if (values == NULL) return 0;
  switch (id) {
#define T4A_COUNTER_VAL_(name, desc) \
  case T4A_COUNTER_##name:           \
    return values->name;
    T4A_COUNTER_LIST(T4A_COUNTER_VAL_)
#undef T4A_COUNTER_VAL_
    case T4A_COUNTER_COUNT:
      break;
  }
  return 0;
}
