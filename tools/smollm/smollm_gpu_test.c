/* The SmolLM2 example on a real GPU: the CUDA kernels' logits at the last position of "The
 * capital of France is" against the numpy reference (examples/smollm/reference_logits.h) within
 * 1e-2, the greedy continuation, the three ways agreeing over 128 new tokens, one host wait and
 * no heap allocation per decode token. SKIPs without a driver (gpu_main.h) or the model. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/smollm/model_path.h"
#include "examples/smollm/reference_logits.h"
#include "examples/smollm/smollm.h"
#include "t4a/t4a.h"
#include "testing/gpu/gpu_main.h"

#define TOLERANCE 1e-2f
enum { N_NEW = 128 };

static t4a_driver *g_driver;

static void test_gpu_logits_tokens_and_counters(void **state) {
  (void)state;
  char path[4096];
  if (!smol_model_path(path, sizeof path)) {
    print_message("SKIP: model not fetched; run %s (or set SMOLLM_MODEL)\n", SMOL_FETCH_COMMAND);
    skip();
  }
  smol_options o = {g_driver, NULL, 0, "The capital of France is", N_NEW, 0, SMOL_L2_WEIGHTS};
  smol_model *m = NULL;
  smol_open_stats os;
  smol_error e = {0};
  t4a_status st = smol_open(path, &o, &m, &os, &e);
  if (st != T4A_OK) fail_msg("smol_open: %s: %s", t4a_status_name(st), e.message);
  size_t n = sizeof k_ref_prompt / sizeof k_ref_prompt[0];
  float *logits = malloc(sizeof(float) * smol_model_vocab(m));
  static int32_t tokens[3][N_NEW];
  for (int w = 0; w < 3; w++) {
    smol_run_stats rs;
    st = smol_generate(m, (smol_way)w, k_ref_prompt, n, N_NEW, tokens[w], w == 0 ? logits : NULL,
                       NULL, NULL, &rs, &e);
    if (st != T4A_OK) fail_msg("%s: %s", smol_way_name((smol_way)w), e.message);
    assert_memory_equal(tokens[w], k_ref_next, sizeof k_ref_next);
    assert_memory_equal(tokens[w], tokens[0], sizeof tokens[0]);
    /* The prompt's one wait blocks once per sealed epoch still pending on a GPU (2 on the H200,
     * 2026-12-01), once on the fake: at least one, and the decode's exactly one per token. */
    assert_true(rs.prefill_host_waits >= 1);
    assert_int_equal(rs.decode_counters.host_waits, N_NEW - 1);
    assert_int_equal(rs.decode_heap_allocations, 0);
    assert_int_equal(rs.decode_counters.user_events_recorded, 2 * (N_NEW - 1));
    assert_true(rs.decode_gpu_s > 0.0 && rs.decode_gpu_s <= rs.decode_s);
    print_message("%s: prefill %.1f tok/s, decode %.1f tok/s (GPU-timed %.1f tok/s), host "
                  "%.2f us/token, %.2f events per token\n", smol_way_name((smol_way)w),
                  rs.prefill_tokens / rs.prefill_s, rs.decode_tokens / rs.decode_s,
                  rs.decode_tokens / rs.decode_gpu_s, rs.host_submit_s * 1e6 / rs.decode_tokens,
                  (double)rs.decode_counters.events_recorded / rs.decode_tokens);
  }
  float worst = 0;
  for (size_t i = 0; i < sizeof k_ref_ids / sizeof k_ref_ids[0]; i++) {
    float d = fabsf(logits[k_ref_ids[i]] - k_ref_logits[i]);
    if (!(d <= worst)) worst = d;
  }
  print_message("logits: max |t4a (GPU) - numpy| = %g over %zu ids (tolerance %g)\n",
                (double)worst, sizeof k_ref_ids / sizeof k_ref_ids[0], (double)TOLERANCE);
  assert_true(worst <= TOLERANCE);
  free(logits);
  assert_int_equal(smol_close(m), T4A_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_gpu_logits_tokens_and_counters)};
  return t4a_gpu_test_main("smollm_gpu_test", tests, 1, 1, &g_driver);
}
