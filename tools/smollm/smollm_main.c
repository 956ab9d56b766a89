/* t4a-smollm: SmolLM2-135M generating text through t4a (examples/smollm), on the GPU or, with
 * --fake (or where no CUDA driver loads), on the fake driver with host twins of its kernels.
 *   t4a-smollm [--model FILE] [--prompt TEXT] [-n N] [--json] [--fake]
 *              [--way chain|descriptors|checked|all] [--cache DIR | --no-cache]
 *              [--l2 MIB [--l2-over weights|kv]]
 *              [--logits FILE] [--tokens]
 * Text is streamed as it is generated (to stdout; with --json to stderr, the JSON report to
 * stdout), then tokens/s for prefill and decode, per-token host time and the counters. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/smollm/model_path.h"
#include "examples/smollm/smollm.h"
#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "tools/smollm/host_twins.h"

typedef struct stream_ctx {
  const smol_tokenizer *tok;
  smol_utf8_stream utf8;
  FILE *out;
  int print;
} stream_ctx;

static void on_token(void *user, int32_t token) {
  stream_ctx *s = user;
  if (!s->print) return;
  char bytes[256], out[256 + 4];
  size_t n = smol_token_bytes(s->tok, token, bytes, sizeof bytes);
  if (n > sizeof bytes) n = sizeof bytes;
  size_t w = smol_utf8_feed(&s->utf8, bytes, n, out);
  fwrite(out, 1, w, s->out);
  fflush(s->out);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: t4a-smollm [--model FILE] [--prompt TEXT] [-n N] [--json] [--fake]\n"
          "                  [--way chain|descriptors|checked|all] [--cache DIR | --no-cache]\n"
          "                  [--l2 MIB [--l2-over weights|kv]]\n"
          "                  [--logits FILE] [--tokens]\n"
          "  --model FILE  the GGUF (default: examples/smollm/model/" SMOL_MODEL_NAME
          ", fetched by " SMOL_FETCH_COMMAND ")\n"
          "  -n N          new tokens (default 32); --way: how the decode step runs (all: the\n"
          "                three ways one after the other, each checked to give the same tokens)\n"
          "  --cache DIR   the artifact cache's directory (default $XDG_CACHE_HOME/t4a-smollm or\n"
          "                ~/.cache/t4a-smollm: a warm start compiles nothing); --no-cache: memory\n"
          "  --l2 MIB      an L2 persisting window over the first MIB of the weights (the token\n"
          "                embedding first: 28.7 MB, read whole by the logits every token) or,\n"
          "                with --l2-over kv, of the KV cache\n"
          "  --logits FILE the logits at the prompt's last position (float32, little-endian)\n"
          "  --fake        the fake driver with host twins of the kernels (few tokens)\n");
}

/* A device copy rate (bytes read per second, a copy reading and writing each byte once), for
 * the floor: the weights one step reads over this rate. */
static double copy_rate(t4a_runtime *rt) {
  size_t bytes = (size_t)64 << 20;
  t4a_buffer *a = NULL, *b = NULL;
  double rate = 0;
  if (t4a_runtime_buffer(rt, bytes, &a) == T4A_OK && t4a_runtime_buffer(rt, bytes, &b) == T4A_OK &&
      t4a_runtime_copy(rt, b, 0, a, 0, bytes) == T4A_OK && t4a_runtime_sync(rt) == T4A_OK) {
    double t0 = now_s();
    int ok = 1;
    for (int i = 0; i < 20 && ok; i++) ok = t4a_runtime_copy(rt, b, 0, a, 0, bytes) == T4A_OK;
    ok = ok && t4a_runtime_sync(rt) == T4A_OK;
    double t1 = now_s();
    if (ok && t1 > t0) rate = 20.0 * (double)bytes / (t1 - t0);
  }
  t4a_buffer_release(a);
  t4a_buffer_release(b);
  return rate;
}

typedef struct way_result {
  int ran, same;
  smol_run_stats st;
} way_result;

int main(int argc, char **argv) {
  char default_model[4096];
  smol_model_path(default_model, sizeof default_model);
  const char *model = default_model, *prompt = "The capital of France is", *cache = NULL;
  const char *logits_path = NULL, *way_arg = "all";
  /* the artifact cache's directory by default, so that a second start compiles nothing */
  char default_cache[4096] = "";
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg != NULL && xdg[0] == '/') snprintf(default_cache, sizeof default_cache, "%s/t4a-smollm", xdg);
  else if (home != NULL && home[0] == '/')
    snprintf(default_cache, sizeof default_cache, "%s/.cache/t4a-smollm", home);
  if (default_cache[0] != '\0') cache = default_cache;
  long n_new = 32;
  int json = 0, fake_mode = 0, print_tokens = 0;
  double l2_mib = 0;
  int l2_region = SMOL_L2_WEIGHTS;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--fake") == 0) fake_mode = 1;
    else if (strcmp(a, "--tokens") == 0) print_tokens = 1;
    else if (strcmp(a, "--no-cache") == 0) cache = NULL;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); return 0; }
    else if (v == NULL) { usage(stderr); return 2; }
    else if (strcmp(a, "--model") == 0) model = v, i++;
    else if (strcmp(a, "--prompt") == 0) prompt = v, i++;
    else if (strcmp(a, "-n") == 0) n_new = strtol(v, NULL, 10), i++;
    else if (strcmp(a, "--way") == 0) way_arg = v, i++;
    else if (strcmp(a, "--cache") == 0) cache = v, i++;
    else if (strcmp(a, "--l2") == 0) l2_mib = strtod(v, NULL), i++;
    else if (strcmp(a, "--l2-over") == 0 && strcmp(v, "weights") == 0) l2_region = SMOL_L2_WEIGHTS, i++;
    else if (strcmp(a, "--l2-over") == 0 && strcmp(v, "kv") == 0) l2_region = SMOL_L2_KV, i++;
    else if (strcmp(a, "--logits") == 0) logits_path = v, i++;
    else { usage(stderr); return 2; }
  }
  int ways[3] = {0, 0, 0};
  if (strcmp(way_arg, "all") == 0) ways[0] = ways[1] = ways[2] = 1;
  else if (strcmp(way_arg, "chain") == 0) ways[0] = 1;
  else if (strcmp(way_arg, "descriptors") == 0) ways[1] = 1;
  else if (strcmp(way_arg, "checked") == 0) ways[2] = 1;
  else { usage(stderr); return 2; }
  if (n_new < 1 || n_new > 8192) {
    fprintf(stderr, "t4a-smollm: -n must be 1..8192\n");
    return 2;
  }
  FILE *text = json ? stderr : stdout;
  /* the driver */
  t4a_driver *drv = NULL;
  t4a_fake *fake = NULL;
  t4a_status st = fake_mode ? T4A_DRIVER_NOT_FOUND : t4a_driver_get_default(&drv);
  if (st != T4A_OK) {
    if (!fake_mode) fprintf(stderr, "t4a-smollm: no CUDA driver (%s): ", t4a_status_name(st));
    fprintf(stderr, "t4a-smollm: the fake driver runs host twins of the kernels\n");
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    st = t4a_fake_create(&fo, &fake);
    if (st == T4A_OK) st = t4a_fake_driver(fake, &drv);
    if (st != T4A_OK) {
      fprintf(stderr, "t4a-smollm: the fake driver: %s\n", t4a_status_name(st));
      t4a_fake_destroy(fake);
      return 1;
    }
    smol_host_twins_register(fake);
  }
  smol_options o = {drv, cache, 0, prompt, (uint32_t)n_new, (size_t)(l2_mib * 1048576.0),
                   l2_region};
  smol_model *m = NULL;
  smol_open_stats os;
  smol_error e = {0};
  double t_open = now_s();
  st = smol_open(model, &o, &m, &os, &e);
  t_open = now_s() - t_open;
  int rc = 0;
  int32_t *prompt_ids = NULL, *tokens[3] = {NULL, NULL, NULL};
  float *logits = NULL;
  size_t n_prompt = 0;
  way_result r[3];
  memset(r, 0, sizeof r);
  double rate = 0;
  if (st != T4A_OK) {
    fprintf(stderr, "t4a-smollm: %s: %s\n", t4a_status_name(st), e.message);
    if (e.status == T4A_IO || st == T4A_IO)
      fprintf(stderr, "t4a-smollm: to fetch the model: %s\n", SMOL_FETCH_COMMAND);
    rc = 1;
    goto done;
  }
  const smol_tokenizer *tok = smol_model_tokenizer(m);
  prompt_ids = malloc(sizeof *prompt_ids * (strlen(prompt) + 1));
  for (int w = 0; w < 3; w++) tokens[w] = calloc((size_t)n_new, sizeof *tokens[w]);
  logits = logits_path ? malloc(sizeof *logits * smol_model_vocab(m)) : NULL;
  st = smol_tokenize(tok, prompt, strlen(prompt), prompt_ids, strlen(prompt) + 1, &n_prompt, &e);
  if (st != T4A_OK || n_prompt == 0) {
    fprintf(stderr, "t4a-smollm: the prompt: %s\n", n_prompt == 0 ? "empty" : e.message);
    rc = 1;
    goto done;
  }
  int first = 1;
  for (int w = 0; w < 3; w++) {
    if (!ways[w]) continue;
    stream_ctx sc = {tok, {{0}, 0}, text, first};
    if (first) {
      fprintf(text, "%s", prompt);
      fflush(text);
    }
    st = smol_generate(m, (smol_way)w, prompt_ids, n_prompt, (uint32_t)n_new, tokens[w],
                       first ? logits : NULL, on_token, &sc, &r[w].st, &e);
    if (first) {
      char tail[8];
      size_t k = smol_utf8_flush(&sc.utf8, tail);
      fwrite(tail, 1, k, text);
      fprintf(text, "\n");
    }
    if (st != T4A_OK) {
      fprintf(stderr, "t4a-smollm: %s: %s: %s\n", smol_way_name((smol_way)w),
              t4a_status_name(st), e.message);
      rc = 1;
      goto done;
    }
    r[w].ran = 1;
    int ref = ways[0] ? 0 : ways[1] ? 1 : 2;
    r[w].same = memcmp(tokens[w], tokens[ref], sizeof(int32_t) * (size_t)n_new) == 0;
    if (!r[w].same) rc = 1;
    first = 0;
  }
  if (logits != NULL) {
    FILE *f = fopen(logits_path, "wb");
    if (f == NULL || fwrite(logits, 4, smol_model_vocab(m), f) != smol_model_vocab(m)) rc = 1;
    if (f != NULL) fclose(f);
  }
  if (fake == NULL) rate = copy_rate(smol_model_runtime(m));
  /* the report */
  double floor_s = rate > 0 ? (double)smol_model_step_bytes(m) / rate : 0;
  if (!json) {
    printf("t4a-smollm: %s; prompt %zu tokens, %ld new; %u kernels per token\n",
           fake ? "fake driver (host twins: times are of host code)" : "GPU", n_prompt, n_new,
           os.kernels_per_token);
    printf("open %.3f s: map %.3f, parse %.3f, tokenizer %.3f, compile+load %.3f (%" PRIu64
           " NVRTC calls, %" PRIu64 " module loads, artifact: %s), upload %.3f (%.1f MB from the "
           "mapping on a second stream: enqueue %.3f, left after compile and record %.3f), KV %.1f MB "
           "(memset), record %.3f; L2 window %s (%zu bytes%s)\n",
           t_open, os.map_s, os.parse_s, os.tokenizer_s, os.compile_s, os.nvrtc_calls,
           os.module_loads, os.artifact_origin, os.upload_s, (double)os.weight_bytes / 1e6,
           os.upload_enqueue_s, os.upload_wait_s, (double)os.kv_bytes / 1e6, os.record_s, os.l2_window ? "set" : "off",
           os.l2_window_bytes, !os.l2_window ? "" : os.l2_region == SMOL_L2_KV ? " of the KV cache"
                                                                            : " of the weights");
    if (print_tokens) {
      printf("tokens:");
      for (long k = 0; k < n_new; k++) printf(" %d", tokens[ways[0] ? 0 : ways[1] ? 1 : 2][k]);
      printf("\n");
    }
    for (int w = 0; w < 3; w++) {
      if (!r[w].ran) continue;
      const smol_run_stats *s = &r[w].st;
      double dt = s->decode_tokens ? (double)s->decode_tokens : 1;
      printf("%-17s prefill %8.1f tok/s  decode %8.1f tok/s (GPU-timed %8.1f tok/s, %.1f us/token)"
             "  host %.2f us/token (max %.2f)  "
             "per token: %.2f host waits, %.2f events, %.2f launches, %.2f chain replays, "
             "%.2f heap allocations%s\n",
             smol_way_name((smol_way)w), s->prefill_tokens / (s->prefill_s > 0 ? s->prefill_s : 1),
             s->decode_tokens / (s->decode_s > 0 ? s->decode_s : 1),
             s->decode_tokens / (s->decode_gpu_s > 0 ? s->decode_gpu_s : 1),
             s->decode_gpu_s * 1e6 / dt, s->host_submit_s * 1e6 / dt,
             s->host_max_s * 1e6, (double)s->decode_counters.host_waits / dt,
             (double)s->decode_counters.events_recorded / dt,
             (double)s->decode_counters.launches / dt,
             (double)s->decode_counters.chain_replays / dt,
             (double)s->decode_heap_allocations / dt, r[w].same ? "" : "  TOKENS DIFFER");
    }
    if (rate > 0)
      printf("floor: %.1f MB of weights per token / %.0f GB/s device copy rate = %.1f us "
             "(%.0f tok/s)\n", (double)smol_model_step_bytes(m) / 1e6, rate / 1e9, floor_s * 1e6,
             1.0 / floor_s);
  } else {
    printf("{\"driver\": \"%s\", \"prompt\": \"", fake ? "fake" : "gpu");
    for (const char *p = prompt; *p; p++) {
      if (*p == '"' || *p == '\\') printf("\\%c", *p);
      else if ((unsigned char)*p < 0x20) printf("\\u%04x", *p);
      else putchar(*p);
    }
    printf("\", \"prompt_tokens\": [");
    for (size_t k = 0; k < n_prompt; k++) printf("%s%d", k ? ", " : "", prompt_ids[k]);
    printf("], \"new_tokens\": %ld, \"kernels_per_token\": %u, \"open\": {\"seconds\": %.6f, "
           "\"compile_load_s\": %.6f, \"upload_s\": %.6f, \"upload_enqueue_s\": %.6f, "
           "\"upload_wait_s\": %.6f, \"nvrtc_calls\": %" PRIu64
           ", \"module_loads\": %" PRIu64 ", \"artifact\": \"%s\", \"weight_bytes\": %" PRIu64
           ", \"kv_bytes\": %" PRIu64 ", \"l2_window_bytes\": %zu, \"l2_region\": \"%s\"}, \"step_weight_bytes\": %" PRIu64
           ", \"copy_rate_bytes_per_s\": %.0f, \"floor_us\": %.3f, \"ways\": {",
           n_new, os.kernels_per_token, t_open, os.compile_s, os.upload_s, os.upload_enqueue_s,
           os.upload_wait_s, os.nvrtc_calls,
           os.module_loads, os.artifact_origin, os.weight_bytes, os.kv_bytes,
           os.l2_window_bytes, !os.l2_window ? "none" : os.l2_region == SMOL_L2_KV ? "kv" : "weights",
           smol_model_step_bytes(m), rate, floor_s * 1e6);
    int comma = 0;
    for (int w = 0; w < 3; w++) {
      if (!r[w].ran) continue;
      const smol_run_stats *s = &r[w].st;
      static const char *const keys[3] = {"chain", "descriptors", "checked"};
      printf("%s\"%s\": {\"prefill_tokens\": %u, \"prefill_s\": %.6f, \"decode_tokens\": %u, "
             "\"decode_s\": %.6f, \"decode_gpu_s\": %.6f, \"host_submit_s\": %.9f, \"host_max_s\": %.9f, "
             "\"prefill_host_waits\": %" PRIu64 ", \"host_waits\": %" PRIu64 ", \"events_recorded\": %" PRIu64 ", \"launches\": %" PRIu64
             ", \"chain_replays\": %" PRIu64 ", \"heap_allocations\": %" PRIu64
             ", \"same_tokens\": %s, \"tokens\": [",
             comma ? ", " : "", keys[w], s->prefill_tokens, s->prefill_s, s->decode_tokens,
             s->decode_s, s->decode_gpu_s, s->host_submit_s, s->host_max_s, s->prefill_host_waits,
             s->decode_counters.host_waits,
             s->decode_counters.events_recorded, s->decode_counters.launches,
             s->decode_counters.chain_replays, s->decode_heap_allocations,
             r[w].same ? "true" : "false");
      for (long k = 0; k < n_new; k++) printf("%s%d", k ? ", " : "", tokens[w][k]);
      printf("]}");
      comma = 1;
    }
    printf("}}\n");
  }
done:
  free(prompt_ids);
  for (int w = 0; w < 3; w++) free(tokens[w]);
  free(logits);
  if (smol_close(m) != T4A_OK) rc = 1;
  t4a_driver_release(drv);
  if (fake != NULL) {
    (void)t4a_fake_table(fake)->cuCtxSetCurrent(NULL);
    t4a_fake_progress(fake);
    int clean = t4a_fake_nothing_live(fake);
    uint64_t violations = t4a_fake_ordering_violations(fake);
    fprintf(stderr, "fake driver: %s, %" PRIu64 " stream-ordering violations\n",
            clean ? "nothing left alive" : "OBJECTS LEFT ALIVE", violations);
    if (!clean || violations) rc = 1;
    t4a_fake_destroy(fake);
  }
  return rc;
}
