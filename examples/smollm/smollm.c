/* SmolLM2 through t4a (see smollm.h). Public API only. */
#define _POSIX_C_SOURCE 200809L
#include "examples/smollm/smollm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/smollm/kernels.h"

enum {
  N_LAYERS = 30,
  VOCAB = 49152,
  MAX_ARGS = 11,
  OPS_PER_LAYER = 5,
  N_OPS = 1 + N_LAYERS * OPS_PER_LAYER + 2, /* embed, the blocks, logits, argmax */
  N_FUNCS = 7
};

static const char *const k_func_names[N_FUNCS] = {"smol_embed",      "smol_qkv",    "smol_attn",
                                                  "smol_matvec_res", "smol_ffn_up", "smol_logits",
                                                  "smol_argmax"};
enum { F_EMBED, F_QKV, F_ATTN, F_MATVEC, F_FFN, F_LOGITS, F_ARGMAX };

typedef struct op {
  int func;
  t4a_launch_config cfg;
  t4a_arg args[MAX_ARGS];
  uint32_t nargs;
  uint32_t id; /* its descriptor */
} op;

struct smol_model {
  t4a_file_map *map;
  gguf_file gguf;
  smol_tokenizer *tok;
  t4a_runtime *rt;
  t4a_nvrtc_artifact *artifact;
  t4a_module *module;
  t4a_function *fn[N_FUNCS];
  t4a_buffer *weights, *kv, *act;
  t4a_buffer *prompt_steps; /* {token, pos} per prompt position: the prompt runs without waits */
  t4a_slots *slots;
  uint32_t slot_in, slot_out;
  int slot_in_held, slot_out_held;
  uint32_t positions, context;
  float eps, theta;
  uint64_t step_bytes;
  op ops[N_OPS];
  uint32_t n_ops, n_layer_ops; /* ops[0 .. n_layer_ops): embed and blocks; the rest: the head */
  int descriptors;             /* registered */
  t4a_chain *chain_layers, *chain_full; /* the blocks (prompt tokens but the last); all */
  /* scalars the ops' arguments point at (t4a_arg_scalar copies at the call, but checked
   * launches re-read them every token) */
  int32_t i_dim, i_dim_rows, i_ff, i_vocab;
  t4a_event *gpu_t0, *gpu_t1; /* timing events around each decode step */
};

const char *smol_way_name(smol_way way) {
  return way == SMOL_WAY_CHAIN ? "chain replay"
         : way == SMOL_WAY_DESCRIPTORS ? "descriptor fires"
         : way == SMOL_WAY_CHECKED ? "checked launches" : "unknown";
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A t4a failure into *e, with t4a's per-thread detail. */
static t4a_status t4a_fail(smol_error *e, t4a_status st, const char *what) {
  t4a_error d;
  char buf[256];
  t4a_error_last(&d);
  if (d.status != st) d.status = st;
  return smol_error_set(e, st, UINT64_MAX, "%s: %s", what, t4a_error_format(&d, buf, sizeof buf));
}

const smol_tokenizer *smol_model_tokenizer(const smol_model *m) { return m ? m->tok : NULL; }
t4a_runtime *smol_model_runtime(const smol_model *m) { return m ? m->rt : NULL; }
uint32_t smol_model_context(const smol_model *m) { return m ? m->context : 0; }
uint32_t smol_model_vocab(const smol_model *m) { return m ? VOCAB : 0; }
uint64_t smol_model_step_bytes(const smol_model *m) { return m ? m->step_bytes : 0; }

t4a_status smol_close(smol_model *m) {
  if (m == NULL) return T4A_OK;
  t4a_status st = T4A_OK, ignored;
  if (m->rt != NULL) ignored = t4a_runtime_sync(m->rt);
  t4a_chain_destroy(m->chain_layers);
  t4a_chain_destroy(m->chain_full);
  if (m->descriptors)
    for (uint32_t i = 0; i < m->n_ops; i++)
      ignored = t4a_descriptor_unregister(t4a_runtime_table(m->rt), m->ops[i].id);
  for (int i = 0; i < N_FUNCS; i++) t4a_function_release(m->fn[i]);
  t4a_module_release(m->module);
  t4a_nvrtc_artifact_release(m->artifact);
  t4a_buffer_release(m->weights);
  t4a_buffer_release(m->kv);
  t4a_buffer_release(m->act);
  t4a_buffer_release(m->prompt_steps);
  t4a_event_release(m->gpu_t0);
  t4a_event_release(m->gpu_t1);
  if (m->rt != NULL) ignored = t4a_runtime_sync(m->rt); /* nothing reads the slots any more */
  (void)ignored; /* close reports the runtime's verdict */
  if (m->slot_in_held) t4a_slot_release(m->slots, m->slot_in);
  if (m->slot_out_held) t4a_slot_release(m->slots, m->slot_out);
  t4a_slots_destroy(m->slots);
  if (m->rt != NULL) st = t4a_runtime_close(m->rt);
  smol_tokenizer_destroy(m->tok);
  gguf_free(&m->gguf);
  t4a_file_map_release(m->map);
  free(m);
  return st;
}

/* ---- the file: architecture and tensors ---- */

static t4a_status want_u32(const gguf_file *f, const char *key, uint32_t want, smol_error *e) {
  uint32_t v;
  t4a_status st = gguf_get_u32(f, key, &v, e);
  if (st == T4A_OK && v != want)
    st = smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                        "%s is %u; the kernels are written for %u (SmolLM2-135M)", key, v, want);
  return st;
}

static t4a_status tensor(const smol_model *m, const char *name, uint32_t type, uint64_t ne0,
                         uint64_t ne1, const gguf_tensor **out, smol_error *e) {
  const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
  if (t == NULL)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX, "tensor '%s' is missing", name);
  if (t->type != type)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "tensor '%s' is %s; the kernels read %s", name,
                          gguf_ttype_name(t->type), gguf_ttype_name(type));
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "tensor '%s' is [%llu, %llu, %llu, %llu]; the kernels need [%llu, %llu]",
                          name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                          (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
                          (unsigned long long)ne0, (unsigned long long)ne1);
  *out = t;
  return T4A_OK;
}

static t4a_status check_model(smol_model *m, smol_error *e) {
  const gguf_file *f = &m->gguf;
  gguf_str arch;
  t4a_status st = gguf_get_str(f, "general.architecture", &arch, e);
  if (st != T4A_OK) return st;
  if (arch.len != 5 || memcmp(arch.ptr, "llama", 5) != 0)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "architecture '%.*s' is not supported (llama)", (int)arch.len, arch.ptr);
  if ((st = want_u32(f, "llama.block_count", N_LAYERS, e)) != T4A_OK ||
      (st = want_u32(f, "llama.embedding_length", SMOL_DIM, e)) != T4A_OK ||
      (st = want_u32(f, "llama.feed_forward_length", SMOL_FF, e)) != T4A_OK ||
      (st = want_u32(f, "llama.attention.head_count", SMOL_HEADS, e)) != T4A_OK ||
      (st = want_u32(f, "llama.attention.head_count_kv", SMOL_KV_HEADS, e)) != T4A_OK ||
      (st = gguf_get_u32(f, "llama.context_length", &m->context, e)) != T4A_OK ||
      (st = gguf_get_f32(f, "llama.rope.freq_base", &m->theta, e)) != T4A_OK ||
      (st = gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &m->eps, e)) != T4A_OK)
    return st;
  uint32_t rope_dim;
  if (gguf_get_u32(f, "llama.rope.dimension_count", &rope_dim, NULL) == T4A_OK &&
      rope_dim != SMOL_HEAD_DIM)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "llama.rope.dimension_count is %u (the kernels rotate %d)", rope_dim,
                          SMOL_HEAD_DIM);
  if (gguf_find_tensor(f, "output.weight") != NULL)
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "an untied output.weight is not supported (the logits read the "
                          "token embedding)");
  return T4A_OK;
}

/* ---- ops ---- */

static op *add_op(smol_model *m, int func, uint32_t grid, uint32_t block, uint32_t shared) {
  op *o = &m->ops[m->n_ops++];
  memset(o, 0, sizeof *o);
  o->func = func;
  o->cfg = (t4a_launch_config){{grid, 1, 1}, {block, 1, 1}, shared};
  return o;
}

static void arg_buf(op *o, t4a_buffer *b, uint64_t off) { o->args[o->nargs++] = t4a_arg_buffer(b, (size_t)off); }
static void arg_ptr(op *o, t4a_devptr p) { o->args[o->nargs++] = t4a_arg_devptr(p); }
static void arg_val(op *o, const void *v, uint32_t size) { o->args[o->nargs++] = t4a_arg_scalar(v, size); }

/* Activation layout (floats) in m->act */
enum {
  A_X = 0,
  A_Q = A_X + SMOL_DIM,
  A_ATT = A_Q + SMOL_DIM,
  A_H = A_ATT + SMOL_DIM,
  A_STEP = A_H + SMOL_FF, /* two ints */
  A_LOGITS = A_STEP + 64,
  A_FLOATS = A_LOGITS + VOCAB
};
#define AOFF(x) ((uint64_t)(x) * 4u)

static t4a_status build_ops(smol_model *m, smol_error *e) {
  const gguf_tensor *emb, *t;
  t4a_status st = tensor(m, "token_embd.weight", GGUF_T_Q8_0, SMOL_DIM, VOCAB, &emb, e);
  if (st != T4A_OK) return st;
  const gguf_tensor *out_norm;
  if ((st = tensor(m, "output_norm.weight", GGUF_T_F32, SMOL_DIM, 1, &out_norm, e)) != T4A_OK)
    return st;
  m->i_dim = SMOL_DIM;
  m->i_dim_rows = SMOL_DIM;
  m->i_ff = SMOL_FF;
  m->i_vocab = VOCAB;
  uint64_t kv_layer = (uint64_t)m->positions * SMOL_KV_DIM * 4u;
  t4a_devptr slot_in = t4a_slot_devptr(m->slots, m->slot_in);
  t4a_devptr slot_out = t4a_slot_devptr(m->slots, m->slot_out);
  m->step_bytes = emb->bytes / VOCAB; /* the embedding row */
  op *o = add_op(m, F_EMBED, 1, SMOL_THREADS, 0);
  arg_buf(o, m->weights, emb->offset);
  arg_ptr(o, slot_in);
  arg_buf(o, m->act, AOFF(A_STEP));
  arg_buf(o, m->act, AOFF(A_X));
  arg_val(o, &m->i_dim, 4);
  for (uint32_t l = 0; l < N_LAYERS; l++) {
    char name[64];
    const gguf_tensor *an, *wq, *wk, *wv, *wo, *fn, *wg, *wu, *wd;
#define T4A_SMOL_T(var, suffix, type, ne0, ne1)                             \
  snprintf(name, sizeof name, "blk.%u.%s", l, suffix);                      \
  if ((st = tensor(m, name, type, ne0, ne1, &var, e)) != T4A_OK) return st; \
  if (type != GGUF_T_F32) m->step_bytes += var->bytes;
    T4A_SMOL_T(an, "attn_norm.weight", GGUF_T_F32, SMOL_DIM, 1)
    T4A_SMOL_T(wq, "attn_q.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_DIM)
    T4A_SMOL_T(wk, "attn_k.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_KV_DIM)
    T4A_SMOL_T(wv, "attn_v.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_KV_DIM)
    T4A_SMOL_T(wo, "attn_output.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_DIM)
    T4A_SMOL_T(fn, "ffn_norm.weight", GGUF_T_F32, SMOL_DIM, 1)
    T4A_SMOL_T(wg, "ffn_gate.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_FF)
    T4A_SMOL_T(wu, "ffn_up.weight", GGUF_T_Q4_1, SMOL_DIM, SMOL_FF)
    T4A_SMOL_T(wd, "ffn_down.weight", GGUF_T_Q4_1, SMOL_FF, SMOL_DIM)
#undef T4A_SMOL_T
    uint64_t kc = (uint64_t)l * 2 * kv_layer, vc = kc + kv_layer;
    o = add_op(m, F_QKV, SMOL_QKV_BLOCKS, SMOL_MV_THREADS, 0);
    arg_buf(o, m->act, AOFF(A_X));
    arg_buf(o, m->weights, an->offset);
    arg_buf(o, m->weights, wq->offset);
    arg_buf(o, m->weights, wk->offset);
    arg_buf(o, m->weights, wv->offset);
    arg_buf(o, m->act, AOFF(A_STEP));
    arg_buf(o, m->act, AOFF(A_Q));
    arg_buf(o, m->kv, kc);
    arg_buf(o, m->kv, vc);
    arg_val(o, &m->eps, 4);
    arg_val(o, &m->theta, 4);
    o = add_op(m, F_ATTN, SMOL_HEADS, SMOL_THREADS, m->positions * 4u);
    arg_buf(o, m->act, AOFF(A_Q));
    arg_buf(o, m->kv, kc);
    arg_buf(o, m->kv, vc);
    arg_buf(o, m->act, AOFF(A_STEP));
    arg_buf(o, m->act, AOFF(A_ATT));
    o = add_op(m, F_MATVEC, SMOL_DIM / (SMOL_MV_THREADS / 32), SMOL_MV_THREADS, 0);
    arg_buf(o, m->weights, wo->offset);
    arg_buf(o, m->act, AOFF(A_ATT));
    arg_buf(o, m->act, AOFF(A_X));
    arg_val(o, &m->i_dim, 4);
    arg_val(o, &m->i_dim_rows, 4);
    o = add_op(m, F_FFN, SMOL_FF / (SMOL_MV_THREADS / 32), SMOL_MV_THREADS, 0);
    arg_buf(o, m->act, AOFF(A_X));
    arg_buf(o, m->weights, fn->offset);
    arg_buf(o, m->weights, wg->offset);
    arg_buf(o, m->weights, wu->offset);
    arg_buf(o, m->act, AOFF(A_H));
    arg_val(o, &m->eps, 4);
    o = add_op(m, F_MATVEC, SMOL_DIM / (SMOL_MV_THREADS / 32), SMOL_MV_THREADS, 0);
    arg_buf(o, m->weights, wd->offset);
    arg_buf(o, m->act, AOFF(A_H));
    arg_buf(o, m->act, AOFF(A_X));
    arg_val(o, &m->i_ff, 4);
    arg_val(o, &m->i_dim_rows, 4);
  }
  m->n_layer_ops = m->n_ops;
  m->step_bytes += emb->bytes; /* the logits read every row */
  uint32_t rows_per_block = SMOL_THREADS / 32 * SMOL_LOGIT_ROWS_PER_WARP;
  o = add_op(m, F_LOGITS, (VOCAB + rows_per_block - 1) / rows_per_block, SMOL_THREADS, 0);
  arg_buf(o, m->act, AOFF(A_X));
  arg_buf(o, m->weights, out_norm->offset);
  arg_buf(o, m->weights, emb->offset);
  arg_buf(o, m->act, AOFF(A_LOGITS));
  arg_val(o, &m->eps, 4);
  arg_val(o, &m->i_vocab, 4);
  o = add_op(m, F_ARGMAX, 1, SMOL_ARGMAX_THREADS, 0);
  arg_buf(o, m->act, AOFF(A_LOGITS));
  arg_val(o, &m->i_vocab, 4);
  arg_ptr(o, slot_out);
  (void)t;
  return T4A_OK;
}

static t4a_status fire_range(smol_model *m, uint32_t from, uint32_t to) {
  t4a_launch_table *table = t4a_runtime_table(m->rt);
  for (uint32_t i = from; i < to; i++) {
    t4a_status st = t4a_descriptor_fire(table, m->ops[i].id);
    if (st != T4A_OK) return st;
  }
  return T4A_OK;
}

static t4a_status record(smol_model *m, uint32_t from, uint32_t to, t4a_chain **out) {
  t4a_launch_table *table = t4a_runtime_table(m->rt);
  t4a_status st = t4a_chain_begin(table);
  if (st != T4A_OK) return st;
  t4a_status fst = fire_range(m, from, to);
  st = t4a_chain_end(table, out);
  return fst != T4A_OK ? fst : st;
}

static uint64_t nvrtc_calls(smol_model *m) {
  t4a_nvrtc_cache *c = t4a_runtime_artifact_cache(m->rt);
  struct t4a_nvrtc_cache_stats s;
  if (c == NULL) return 0;
  t4a_nvrtc_cache_stats(c, &s);
  return s.counters.nvrtc_compile_attempts;
}

/* The kernels: compiled through the artifact cache (or found there), loaded, looked up. */
static t4a_status open_kernels(smol_model *m, smol_open_stats *s, const smol_options *o,
                               smol_error *e) {
  double t0 = now_s();
  uint64_t n0 = nvrtc_calls(m);
  t4a_counter_values c0, c1;
  t4a_runtime_stats(m->rt, &c0);
  t4a_status st = t4a_runtime_compile(m->rt, smol_kernel_source, "smollm.cu", &m->artifact);
  if (st != T4A_OK) return t4a_fail(e, st, "compiling the kernels");
  if ((st = t4a_runtime_load(m->rt, m->artifact, &m->module)) != T4A_OK)
    return t4a_fail(e, st, "loading the kernels");
  for (int i = 0; i < N_FUNCS; i++)
    if ((st = t4a_runtime_function(m->rt, m->module, k_func_names[i], &m->fn[i])) != T4A_OK)
      return t4a_fail(e, st, k_func_names[i]);
  t4a_runtime_stats(m->rt, &c1);
  s->nvrtc_calls = nvrtc_calls(m) - n0;
  s->module_loads = c1.module_loads - c0.module_loads;
  s->artifact_origin = s->nvrtc_calls > 0 ? "compiled" : o->cache_dir ? "disk" : "memory";
  s->compile_s = now_s() - t0;
  return T4A_OK;
}

/* The step: its descriptors, the L2 window, then its two chains (blocks; logits and argmax). */
static t4a_status open_step(smol_model *m, smol_open_stats *s, const smol_options *o,
                            uint64_t wbytes, smol_error *e) {
  double t0 = now_s();
  t4a_lane *lane = t4a_runtime_lane(m->rt);
  t4a_status st = build_ops(m, e);
  if (st != T4A_OK) return st;
  for (uint32_t i = 0; i < m->n_ops; i++) {
    op *p = &m->ops[i];
    st = t4a_descriptor_register(t4a_runtime_table(m->rt), m->fn[p->func], &p->cfg, p->args,
                                 p->nargs, &p->id);
    if (st != T4A_OK) {
      t4a_status failed = t4a_fail(e, st, k_func_names[p->func]);
      for (uint32_t j = 0; j < i; j++)
        st = t4a_descriptor_unregister(t4a_runtime_table(m->rt), m->ops[j].id);
      return failed;
    }
  }
  m->descriptors = 1;
  if (o->l2_bytes > 0) {
    if (o->l2_region != SMOL_L2_WEIGHTS && o->l2_region != SMOL_L2_KV)
      return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "unknown L2 region %d",
                            o->l2_region);
    t4a_buffer *region = o->l2_region == SMOL_L2_KV ? m->kv : m->weights;
    size_t limit = o->l2_region == SMOL_L2_KV ? t4a_buffer_size(m->kv) : (size_t)wbytes;
    size_t applied = 0, want = o->l2_bytes < limit ? o->l2_bytes : limit;
    st = t4a_l2_set_persisting_limit(lane, want, &applied);
    if (st == T4A_OK && applied > 0) {
      want = applied < want ? applied : want;
      st = t4a_l2_set_window(lane, t4a_buffer_devptr(region), want, 1.0f);
    }
    s->l2_region = o->l2_region;
    if (st != T4A_OK) return t4a_fail(e, st, "the L2 persisting window");
    s->l2_window = applied > 0;
    s->l2_window_bytes = want;
  }
  if ((st = record(m, 0, m->n_layer_ops, &m->chain_layers)) != T4A_OK ||
      (st = record(m, 0, m->n_ops, &m->chain_full)) != T4A_OK)
    return t4a_fail(e, st, "recording the decode chain");
  s->record_s = now_s() - t0;
  return T4A_OK;
}

static t4a_status open_model(smol_model *m, const char *path, const smol_options *o,
                             smol_open_stats *s, smol_error *e) {
  double t0 = now_s();
  t4a_status st = t4a_file_map_open(path, &m->map);
  if (st != T4A_OK) return t4a_fail(e, st, "opening the model");
  double t1 = now_s();
  if ((st = gguf_parse(t4a_file_map_host(m->map), t4a_file_map_size(m->map), &m->gguf, e)) !=
      T4A_OK) {
    char msg[sizeof e->message];
    snprintf(msg, sizeof msg, "%s", e ? e->message : "");
    return smol_error_set(e, st, e ? e->offset : UINT64_MAX, "%s: %s", path, msg);
  }
  if ((st = check_model(m, e)) != T4A_OK) return st;
  double t2 = now_s();
  if ((st = smol_tokenizer_create(&m->gguf, &m->tok, e)) != T4A_OK) return st;
  double t3 = now_s();
  uint64_t positions = o->positions;
  if (positions == 0) {
    size_t n = 0;
    const char *p = o->prompt ? o->prompt : "";
    st = smol_tokenize(m->tok, p, strlen(p), NULL, 0, &n, NULL);
    if (st != T4A_OK && st != T4A_LIMIT_EXCEEDED)
      return smol_error_set(e, st, UINT64_MAX, "tokenizing the prompt failed");
    positions = (uint64_t)n + o->n_new;
    if (positions > m->context)
      return smol_error_set(e, T4A_LIMIT_EXCEEDED, UINT64_MAX,
                            "the prompt is %zu tokens; with %u new tokens that is %llu positions, "
                            "longer than the model's context of %u", n, o->n_new,
                            (unsigned long long)positions, m->context);
    if (positions == 0) positions = 1;
  }
  if (positions > m->context)
    return smol_error_set(e, T4A_LIMIT_EXCEEDED, UINT64_MAX,
                          "%llu positions asked for; the model's context is %u",
                          (unsigned long long)positions, m->context);
  m->positions = (uint32_t)positions;
  t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
  ro.driver = o->driver;
  ro.artifacts.disk_dir = o->cache_dir;
  ro.table_capacity = N_OPS + 16;
  if ((st = t4a_runtime_open(0, &ro, &m->rt)) != T4A_OK)
    return t4a_fail(e, st, "opening the runtime");
  /* buffers, slots; then the weights straight from the mapping and the KV cache's zeroing on a
   * second stream, so that the copy's tail runs while the host compiles or loads the kernels,
   * registers the descriptors and records the chains; the runtime's stream waits for it (no host
   * wait) before the first step */
  double t3b = now_s();
  uint64_t data = m->gguf.data_offset, wbytes = t4a_file_map_size(m->map) - data;
  uint64_t kv_bytes = (uint64_t)N_LAYERS * 2 * m->positions * SMOL_KV_DIM * 4u;
  t4a_lane *lane = t4a_runtime_lane(m->rt);
  if ((st = t4a_runtime_buffer(m->rt, (size_t)wbytes, &m->weights)) != T4A_OK ||
      (st = t4a_runtime_buffer(m->rt, (size_t)kv_bytes, &m->kv)) != T4A_OK ||
      (st = t4a_runtime_buffer(m->rt, AOFF(A_FLOATS), &m->act)) != T4A_OK ||
      (st = t4a_runtime_buffer(m->rt, (size_t)m->positions * 8u, &m->prompt_steps)) != T4A_OK)
    return t4a_fail(e, st, "allocating device memory");
  if ((st = t4a_slots_create(t4a_lane_holder(lane), 64, 2, &m->slots)) != T4A_OK ||
      (st = t4a_slot_acquire(m->slots, &m->slot_in)) != T4A_OK ||
      !(m->slot_in_held = 1) || (st = t4a_slot_acquire(m->slots, &m->slot_out)) != T4A_OK ||
      !(m->slot_out_held = 1))
    return t4a_fail(e, st, "the mapped slots");
  memset(t4a_slot_host(m->slots, m->slot_in), 0, 8);
  memset(t4a_slot_host(m->slots, m->slot_out), 0xFF, 4);
  if ((st = t4a_runtime_event(m->rt, T4A_EVENT_TIMING, &m->gpu_t0)) != T4A_OK ||
      (st = t4a_runtime_event(m->rt, T4A_EVENT_TIMING, &m->gpu_t1)) != T4A_OK)
    return t4a_fail(e, st, "the timing events");
  t4a_stream *upload = NULL;
  t4a_xfer *upload_xfer = NULL;
  if ((st = t4a_stream_create(m->rt, NULL, &upload)) != T4A_OK)
    return t4a_fail(e, st, "the upload stream");
  if ((st = t4a_stream_wait(m->rt, upload, NULL)) != T4A_OK || /* after the allocations */
      (st = t4a_stream_xfer(m->rt, upload, &upload_xfer)) != T4A_OK ||
      (st = t4a_xfer_upload_mapped(upload_xfer, m->weights, 0, m->map, data, (size_t)wbytes)) !=
          T4A_OK) {
    t4a_status failed = t4a_fail(e, st, "uploading the weights from the mapping");
    (void)t4a_stream_destroy(m->rt, upload);
    return failed;
  }
  if ((st = t4a_runtime_memset(m->rt, upload, m->kv, 0, (size_t)(kv_bytes / 4), 4, 0)) !=
      T4A_OK) {
    t4a_status failed = t4a_fail(e, st, "zeroing the KV cache");
    (void)t4a_stream_destroy(m->rt, upload);
    return failed;
  }
  double t3c = now_s();
  st = open_kernels(m, s, o, e);
  if (st == T4A_OK) st = open_step(m, s, o, wbytes, e);
  double t4 = now_s();
  /* the runtime's stream after the upload and the memset; the stream's end waits for them */
  t4a_status ord = t4a_stream_wait(m->rt, NULL, upload);
  t4a_status gone = t4a_stream_destroy(m->rt, upload);
  if (st != T4A_OK) return st;
  if (ord != T4A_OK) return t4a_fail(e, ord, "ordering the step after the upload");
  if (gone != T4A_OK) return t4a_fail(e, gone, "the upload");
  double t5 = now_s();
  s->weight_bytes = wbytes;
  s->kv_bytes = kv_bytes;
  s->map_s = t1 - t0;
  s->parse_s = t2 - t1;
  s->tokenizer_s = t3 - t2;
  s->upload_enqueue_s = t3c - t3b;
  s->upload_wait_s = t5 - t4;
  s->upload_s = s->upload_enqueue_s + s->upload_wait_s;
  s->kernels_per_token = m->n_ops;
  return T4A_OK;
}
t4a_status smol_open(const char *path, const smol_options *options, smol_model **out,
                     smol_open_stats *stats, smol_error *e) {
  smol_options defaults = {0};
  smol_open_stats ignored;
  if (out != NULL) *out = NULL;
  if (path == NULL || out == NULL)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "NULL argument");
  smol_model *m = calloc(1, sizeof *m);
  if (m == NULL) return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
  memset(stats ? stats : &ignored, 0, sizeof ignored);
  t4a_status st = open_model(m, path, options ? options : &defaults, stats ? stats : &ignored, e);
  if (st != T4A_OK) {
    (void)smol_close(m);
    return st;
  }
  *out = m;
  return T4A_OK;
}

/* ---- one step, three ways ---- */

/* The step's launches: the blocks only, or (head) everything up to argmax. */
static t4a_status run_ops(smol_model *m, smol_way way, int head) {
  uint32_t from = 0, to = head ? m->n_ops : m->n_layer_ops;
  t4a_launch_table *table = t4a_runtime_table(m->rt);
  switch (way) {
    case SMOL_WAY_CHAIN:
      return t4a_chain_replay(table, head ? m->chain_full : m->chain_layers);
    case SMOL_WAY_DESCRIPTORS:
      return fire_range(m, from, to);
    case SMOL_WAY_CHECKED: {
      t4a_retire *r = t4a_runtime_retire(m->rt);
      for (uint32_t i = from; i < to; i++) {
        op *p = &m->ops[i];
        t4a_status st = t4a_launch(r, m->fn[p->func], &p->cfg, p->args, p->nargs);
        if (st != T4A_OK) return st;
      }
      return T4A_OK;
    }
  }
  return T4A_INVALID_ARGUMENT;
}

/* Where the embed launch reads {token, pos}: the mapped input slot, or a device address (a
 * prompt position's pair). Rebinding the descriptor is seen by both chains at their next replay
 * (one kernel-node update); a checked launch reads its op's arguments. */
static t4a_status embed_input(smol_model *m, t4a_devptr from) {
  t4a_arg a = t4a_arg_devptr(from);
  m->ops[0].args[1] = a;
  return t4a_descriptor_rebind(t4a_runtime_table(m->rt), m->ops[0].id, 1, &a);
}

/* {token, pos} into the input slot, then the step (head: up to argmax). */
static t4a_status step(smol_model *m, smol_way way, int32_t token, uint32_t pos, int head) {
  volatile int32_t *in = t4a_slot_host(m->slots, m->slot_in);
  in[0] = token;
  in[1] = (int32_t)pos;
  return run_ops(m, way, head);
}

static int32_t slot_token(smol_model *m) {
  return *(volatile int32_t *)t4a_slot_host(m->slots, m->slot_out);
}

t4a_status smol_generate(smol_model *m, smol_way way, const int32_t *prompt, size_t n_prompt,
                         uint32_t n_new, int32_t *tokens, float *last_logits,
                         smol_token_fn on_token, void *user, smol_run_stats *stats,
                         smol_error *e) {
  smol_run_stats ignored;
  smol_run_stats *s = stats ? stats : &ignored;
  memset(s, 0, sizeof *s);
  if (m == NULL || prompt == NULL || n_prompt == 0 || (n_new > 0 && tokens == NULL) ||
      (unsigned)way > SMOL_WAY_CHECKED)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX,
                          "NULL argument, an empty prompt or an unknown way");
  if (n_prompt + n_new > m->positions)
    return smol_error_set(e, T4A_LIMIT_EXCEEDED, UINT64_MAX,
                          "the prompt (%zu tokens) and %u new tokens need %zu positions; %u "
                          "allocated (the model's context is %u)",
                          n_prompt, n_new, n_prompt + n_new, m->positions, m->context);
  for (size_t i = 0; i < n_prompt; i++)
    if (prompt[i] < 0 || prompt[i] >= VOCAB)
      return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX,
                            "prompt token %zu is %d, outside the vocabulary", i, prompt[i]);
  t4a_status st = t4a_runtime_sync(m->rt);
  if (st != T4A_OK) return t4a_fail(e, st, "before the prompt");
  /* prefill: one step per prompt token; all but the last read their {token, pos} from a device
   * buffer uploaded once (no wait between them), the last from the slot, then one wait */
  t4a_counter_values p0, p1;
  t4a_runtime_stats(m->rt, &p0);
  double t0 = now_s();
  int32_t pairs[2 * 256];
  t4a_devptr steps = t4a_buffer_devptr(m->prompt_steps);
  for (size_t i = 0; i + 1 < n_prompt && st == T4A_OK; i += 256) {
    size_t k = 0;
    for (; k < 256 && i + k + 1 < n_prompt; k++) {
      pairs[2 * k] = prompt[i + k];
      pairs[2 * k + 1] = (int32_t)(i + k);
    }
    st = t4a_runtime_upload(m->rt, m->prompt_steps, i * 8, pairs, k * 8);
  }
  for (size_t i = 0; i + 1 < n_prompt && st == T4A_OK; i++) {
    st = embed_input(m, steps + i * 8);
    if (st == T4A_OK) st = run_ops(m, way, 0);
  }
  t4a_status back = embed_input(m, t4a_slot_devptr(m->slots, m->slot_in));
  if (st == T4A_OK) st = back;
  if (st == T4A_OK) st = step(m, way, prompt[n_prompt - 1], (uint32_t)(n_prompt - 1), 1);
  if (st == T4A_OK) st = t4a_runtime_sync(m->rt);
  if (st != T4A_OK) return t4a_fail(e, st, "the prompt");
  double t1 = now_s();
  t4a_runtime_stats(m->rt, &p1);
  s->prefill_host_waits = p1.host_waits - p0.host_waits;
  s->prefill_tokens = (uint32_t)n_prompt;
  s->prefill_s = t1 - t0;
  if (n_new == 0) return T4A_OK;
  tokens[0] = slot_token(m);
  if (last_logits != NULL) {
    st = t4a_runtime_download(m->rt, m->act, AOFF(A_LOGITS), last_logits, VOCAB * 4u);
    if (st != T4A_OK) return t4a_fail(e, st, "downloading the logits");
  }
  if (on_token) on_token(user, tokens[0]);
  /* decode: n_new - 1 steps, one wait each */
  t4a_counter_values c0, c1;
  t4a_runtime_stats(m->rt, &c0);
  uint64_t heap0 = t4a_heap_allocations();
  double d0 = now_s(), submit = 0, worst = 0, gpu_ms = 0;
  for (uint32_t k = 1; k < n_new && st == T4A_OK; k++) {
    /* the step between two timing events on the runtime's stream: its GPU time, read after the
     * token's one wait (both records completed by then: no further wait) */
    st = t4a_runtime_event_record(m->rt, NULL, m->gpu_t0);
    double h0 = now_s();
    if (st == T4A_OK) st = step(m, way, tokens[k - 1], (uint32_t)(n_prompt + k - 1), 1);
    double h1 = now_s();
    if (st == T4A_OK) st = t4a_runtime_event_record(m->rt, NULL, m->gpu_t1);
    submit += h1 - h0;
    if (h1 - h0 > worst) worst = h1 - h0;
    if (st == T4A_OK) st = t4a_runtime_sync(m->rt);
    float ms = 0;
    if (st == T4A_OK) st = t4a_event_elapsed_ms(m->gpu_t0, m->gpu_t1, &ms);
    gpu_ms += ms;
    if (st == T4A_OK) tokens[k] = slot_token(m);
    if (st == T4A_OK && on_token) on_token(user, tokens[k]);
  }
  double d1 = now_s();
  uint64_t heap1 = t4a_heap_allocations();
  t4a_runtime_stats(m->rt, &c1);
  if (st != T4A_OK) return t4a_fail(e, st, "decoding");
  s->decode_tokens = n_new - 1;
  s->decode_s = d1 - d0;
  s->decode_gpu_s = gpu_ms * 1e-3;
  s->host_submit_s = submit;
  s->host_max_s = worst;
  s->decode_heap_allocations = heap1 - heap0;
#define T4A_SMOL_DELTA_(name, desc) s->decode_counters.name = c1.name - c0.name;
  T4A_COUNTER_LIST(T4A_SMOL_DELTA_)
#undef T4A_SMOL_DELTA_
  return T4A_OK;
}
