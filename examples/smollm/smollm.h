/* SmolLM2-135M (llama, Q4_1 GGUF) through t4a's public API: the file mapped and its tensor data
 * uploaded straight from the mapping, the kernels (kernels.h) compiled through the runtime's
 * artifact cache, and one decode step — embed, 30 blocks of 5 kernels, logits, argmax — run
 * three ways: a launch chain recorded once and replayed per token (one replay), descriptor
 * fires, or checked launches. The token id and position go to the device through a mapped pinned slot, argmax
 * writes the next token id into another, and the host waits once per token. */
#ifndef T4A_EXAMPLES_SMOLLM_SMOLLM_H_
#define T4A_EXAMPLES_SMOLLM_SMOLLM_H_

#include <stddef.h>
#include <stdint.h>

#include "examples/smollm/gguf.h"
#include "examples/smollm/tokenizer.h"
#include "t4a/t4a.h"

typedef struct smol_options {
  t4a_driver *driver;     /* NULL: the process's default driver */
  const char *cache_dir;  /* the artifact cache's directory (a warm start compiles nothing);
                           * NULL: memory only */
  uint32_t positions;     /* KV-cache positions to allocate, at most the model's context; 0:
                           * the tokens of `prompt` plus `n_new` */
  const char *prompt;     /* with positions 0 */
  uint32_t n_new;
  size_t l2_bytes;        /* > 0: an L2 persisting window over the first l2_bytes of l2_region
                           * (clamped by the device and the region), set before the chains are
                           * recorded (graph kernel nodes keep the window they were captured with) */
  int l2_region;          /* SMOL_L2_WEIGHTS (0): the weights from their first byte (the token
                           * embedding, 28.7 MB, read whole by the logits every token, then the
                           * blocks in file order); SMOL_L2_KV: the KV cache (then the activations
                           * are not in it) */
} smol_options;

enum { SMOL_L2_WEIGHTS = 0, SMOL_L2_KV = 1 };

typedef enum smol_way { SMOL_WAY_CHAIN = 0, SMOL_WAY_DESCRIPTORS = 1, SMOL_WAY_CHECKED = 2 } smol_way;
const char *smol_way_name(smol_way way);

typedef struct smol_model smol_model;

/* What opening cost. */
typedef struct smol_open_stats {
  double map_s, parse_s, tokenizer_s, compile_s, upload_s, record_s;
  /* upload_s = upload_enqueue_s (allocations, the mapped copy and the KV memset enqueued on a
   * second stream) + upload_wait_s (what was left of them after compile_s and record_s) */
  double upload_enqueue_s, upload_wait_s;
  uint64_t nvrtc_calls;  /* NVRTC compiles at open (0 on a warm disk cache) */
  uint64_t module_loads;
  const char *artifact_origin; /* "compiled", "memory", "disk" */
  uint64_t weight_bytes;       /* uploaded from the mapping */
  uint64_t kv_bytes;
  uint32_t kernels_per_token;  /* launches of one decode step */
  int l2_window;               /* 1 if an L2 persisting window was set */
  int l2_region;               /* over what (smol_options.l2_region) */
  size_t l2_window_bytes;
} smol_open_stats;

/* Opens path: maps and parses it, checks the architecture and every tensor's type and shape
 * (UNSUPPORTED naming the first that differs from what the kernels are written for), builds the
 * tokenizer, opens a runtime, compiles and loads the kernels, uploads the weights, zeroes the KV
 * cache, registers the step's descriptors and records its chains. Statuses: those of the GGUF
 * reader (a missing file is IO naming it), UNSUPPORTED, LIMIT_EXCEEDED (positions beyond the
 * context, or a prompt that with n_new does not fit in it), the runtime's. On failure nothing stays allocated and *out is NULL. */
T4A_MUST_USE t4a_status smol_open(const char *path, const smol_options *options,
                                  smol_model **out, smol_open_stats *stats, smol_error *e);
/* Closes everything; returns the runtime's close status. Accepts NULL. */
t4a_status smol_close(smol_model *m);

const smol_tokenizer *smol_model_tokenizer(const smol_model *m);
t4a_runtime *smol_model_runtime(const smol_model *m);
uint32_t smol_model_context(const smol_model *m);
uint32_t smol_model_vocab(const smol_model *m);
/* Bytes of weights one decode step reads (every tensor but the norms, the embedding row once). */
uint64_t smol_model_step_bytes(const smol_model *m);

/* Called with each new token as soon as its step completed. */
typedef void (*smol_token_fn)(void *user, int32_t token);

typedef struct smol_run_stats {
  uint32_t prefill_tokens, decode_tokens;
  uint64_t prefill_host_waits; /* 1: the prompt runs without waiting between its tokens */
  double prefill_s, decode_s;
  double decode_gpu_s;    /* decode: the steps' GPU time, summed (timing events around each) */
  double host_submit_s;   /* decode: total host time in the per-token calls before the wait */
  double host_max_s;      /* the longest of them */
  t4a_counter_values decode_counters; /* the lane's counters over the decode steps */
  uint64_t decode_heap_allocations;   /* t4a_heap_allocations() over the decode steps */
} smol_run_stats;

/* Runs the prompt (one step per token: the blocks for every token, reading {token, pos} from a
 * device buffer uploaded once, with no wait between them; logits and argmax for the last, from
 * the slot; then one wait) then n_new - 1 decode steps, each writing {token, pos} into the input slot, running the
 * step `way` and waiting once. tokens[0 .. n_new) gets the new tokens. last_logits (NULL, or
 * vocab floats) gets the logits at the prompt's last position. Statuses: INVALID_ARGUMENT (an
 * empty prompt, a token out of range), LIMIT_EXCEEDED (prompt + n_new beyond the positions
 * allocated), the runtime's. */
T4A_MUST_USE t4a_status smol_generate(smol_model *m, smol_way way, const int32_t *prompt,
                                      size_t n_prompt, uint32_t n_new, int32_t *tokens,
                                      float *last_logits, smol_token_fn on_token, void *user,
                                      smol_run_stats *stats, smol_error *e);

#endif /* T4A_EXAMPLES_SMOLLM_SMOLLM_H_ */
