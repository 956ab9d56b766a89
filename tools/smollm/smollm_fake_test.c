/* The SmolLM2 example end to end on the fake driver (host twins of its kernels, the real NVRTC
 * compiling them): the logits at the last prompt position against the numpy reference
 * (examples/smollm/reference_logits.h, from reference_logits.py: float64, gguf dequantisation)
 * within 1e-3, the greedy continuation, the three ways giving the same tokens with the counters
 * per decode token, and bad input. SKIPs without the fetched model or without NVRTC. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/smollm/model_path.h"
#include "examples/smollm/reference_logits.h"
#include "examples/smollm/smollm.h"
#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "tools/smollm/host_twins.h"

#define TOLERANCE 1e-3f

typedef struct fx {
  t4a_fake *fake;
  t4a_driver *drv;
  char model[4096];
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
  if (t4a_fake_create(&fo, &f->fake) != T4A_OK || t4a_fake_driver(f->fake, &f->drv) != T4A_OK)
    return -1;
  smol_host_twins_register(f->fake);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  t4a_driver_release(f->drv);
  t4a_fake_destroy(f->fake);
  free(f);
  return 0;
}

static void need_model(fx *f) {
  if (!smol_model_path(f->model, sizeof f->model)) {
    print_message("SKIP: model not fetched; run %s\n", SMOL_FETCH_COMMAND);
    skip();
  }
}

static void assert_fake_clean(fx *f) {
  (void)t4a_fake_table(f->fake)->cuCtxSetCurrent(NULL);
  t4a_fake_progress(f->fake);
  if (!t4a_fake_nothing_live(f->fake)) {
    t4a_fake_live v;
    t4a_fake_live_objects(f->fake, &v);
    print_message("live: %llu device allocs (%llu bytes), %llu host, %llu streams, %llu events, "
                  "%llu pools, %llu modules, %llu graphs, %llu execs, primary refs %d\n",
                  (unsigned long long)v.device_allocs, (unsigned long long)v.device_bytes,
                  (unsigned long long)v.host_allocs, (unsigned long long)v.streams,
                  (unsigned long long)v.events, (unsigned long long)v.pools,
                  (unsigned long long)v.modules, (unsigned long long)v.graphs,
                  (unsigned long long)v.graph_execs, v.primary_refs[0]);
  }
  assert_true(t4a_fake_nothing_live(f->fake));
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

static void test_logits_match_numpy_and_ways_agree(void **state) {
  fx *f = *state;
  need_model(f);
  enum { N_NEW = 3 };
  smol_options o = {f->drv, NULL, 0, "The capital of France is", N_NEW, 0, SMOL_L2_WEIGHTS};
  smol_model *m = NULL;
  smol_open_stats os;
  smol_error e = {0};
  t4a_status st = smol_open(f->model, &o, &m, &os, &e);
  if (st == T4A_NVRTC_NOT_FOUND) {
    print_message("SKIP: NVRTC not found (%s)\n", e.message);
    skip();
  }
  if (st != T4A_OK) fail_msg("smol_open: %s: %s", t4a_status_name(st), e.message);
  assert_int_equal(os.nvrtc_calls, 1);
  assert_int_equal(os.module_loads, 1);
  assert_int_equal(os.kernels_per_token, 153);
  /* the prompt's ids are the reference tokenizer's */
  int32_t prompt[16];
  size_t n = 0;
  const char *text = "The capital of France is";
  assert_int_equal(smol_tokenize(smol_model_tokenizer(m), text, strlen(text), prompt, 16, &n, &e),
                   T4A_OK);
  assert_int_equal(n, sizeof k_ref_prompt / sizeof k_ref_prompt[0]);
  assert_memory_equal(prompt, k_ref_prompt, sizeof k_ref_prompt);
  float *logits = malloc(sizeof(float) * smol_model_vocab(m));
  int32_t tokens[3][N_NEW];
  for (int w = 0; w < 3; w++) {
    smol_run_stats rs;
    st = smol_generate(m, (smol_way)w, prompt, n, N_NEW, tokens[w], w == 0 ? logits : NULL, NULL,
                       NULL, &rs, &e);
    if (st != T4A_OK) fail_msg("%s: %s", smol_way_name((smol_way)w), e.message);
    assert_memory_equal(tokens[w], k_ref_next, sizeof k_ref_next);
    assert_int_equal(rs.prefill_tokens, n);
    assert_int_equal(rs.prefill_host_waits, 1); /* none between the prompt's tokens */
    assert_int_equal(rs.decode_tokens, N_NEW - 1);
    /* per decode token: one host wait, no heap allocation; one chain replay, or the 153
     * launches */
    assert_int_equal(rs.decode_counters.host_waits, N_NEW - 1);
    assert_int_equal(rs.decode_heap_allocations, 0);
    assert_true(rs.decode_counters.events_recorded <= N_NEW - 1);
    /* two timing events around each step; their times read without a further wait */
    assert_int_equal(rs.decode_counters.user_events_recorded, 2 * (N_NEW - 1));
    assert_true(rs.decode_gpu_s >= 0.0 && rs.decode_gpu_s <= rs.decode_s);
    if (w == SMOL_WAY_CHAIN) {
      assert_int_equal(rs.decode_counters.chain_replays, N_NEW - 1);
      assert_int_equal(rs.decode_counters.launches, 0);
    } else {
      assert_int_equal(rs.decode_counters.chain_replays, 0);
      assert_int_equal(rs.decode_counters.launches, 153 * (N_NEW - 1));
    }
  }
  float worst = 0;
  for (size_t i = 0; i < sizeof k_ref_ids / sizeof k_ref_ids[0]; i++) {
    float d = fabsf(logits[k_ref_ids[i]] - k_ref_logits[i]);
    if (!(d <= worst)) worst = d;
  }
  print_message("logits: max |t4a (fake, host twins) - numpy| = %g over %zu ids (tolerance %g)\n",
                (double)worst, sizeof k_ref_ids / sizeof k_ref_ids[0], (double)TOLERANCE);
  assert_true(worst <= TOLERANCE);
  free(logits);
  assert_int_equal(smol_close(m), T4A_OK);
  assert_fake_clean(f);
}

/* a warm start from the disk cache compiles nothing */
static void test_warm_start_makes_no_nvrtc_call(void **state) {
  fx *f = *state;
  need_model(f);
  char dir[] = "/tmp/smollm_cache_XXXXXX";
  assert_non_null(mkdtemp(dir));
  smol_options o = {f->drv, dir, 8, NULL, 0, 0, SMOL_L2_WEIGHTS};
  for (int round = 0; round < 2; round++) {
    smol_model *m = NULL;
    smol_open_stats os;
    smol_error e = {0};
    t4a_status st = smol_open(f->model, &o, &m, &os, &e);
    if (st == T4A_NVRTC_NOT_FOUND) skip();
    if (st != T4A_OK) fail_msg("smol_open: %s", e.message);
    assert_int_equal(os.nvrtc_calls, round == 0 ? 1 : 0);
    assert_int_equal(smol_close(m), T4A_OK);
  }
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_fake_clean(f);
}

/* a driver failure at each stage of open (allocation, pinned memory, module load, the weights'
 * copy on the upload stream, the KV memset, that stream's creation, the timing events, chain
 * recording and instantiation) is typed, leaves *out NULL, and
 * leaves the fake holding nothing but what t4a's rule keeps: a failed enqueue (the weights' copy,
 * a memset) may have been enqueued, so t4a quarantines the buffer it named (t4a/xfer_file.h,
 * t4a/launch.h), which holds its block, pool and lane for good. Each case on a fake of its own. */
static void test_open_failures_leave_nothing(void **state) {
  fx *f = *state;
  need_model(f);
  static const struct {
    const char *entry;
    uint64_t skip;
    int quarantines; /* device blocks t4a keeps for good */
  } cases[] = {{"cuMemAllocFromPoolAsync", 0, 0}, {"cuMemAllocFromPoolAsync", 2, 0},
               {"cuMemAllocFromPoolAsync", 3, 0}, {"cuMemHostAlloc", 0, 0},
               {"cuModuleLoadDataEx", 0, 0},      {"cuMemcpyHtoDAsync", 0, 1},
               {"cuMemsetD32Async", 0, 1},        {"cuStreamCreateWithPriority", 1, 0},
               {"cuEventCreate", 0, 0},           {"cuEventCreate", 2, 0},
               {"cuEventCreate", 3, 0},
               {"cuStreamBeginCapture", 0, 0},
               {"cuStreamBeginCapture", 1, 0},    {"cuGraphInstantiateWithFlags", 1, 0}};
  char dir[] = "/tmp/smollm_fail_XXXXXX";
  assert_non_null(mkdtemp(dir));
  t4a_driver_release(f->drv); /* one fake at a time: the fixture's goes, and comes back below */
  t4a_fake_destroy(f->fake);
  f->drv = NULL;
  f->fake = NULL;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t4a_fake *fake = NULL;
    t4a_driver *drv = NULL;
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    assert_int_equal(t4a_fake_create(&fo, &fake), T4A_OK);
    assert_int_equal(t4a_fake_driver(fake, &drv), T4A_OK);
    smol_host_twins_register(fake);
    smol_options o = {drv, dir, 8, NULL, 0, 0, SMOL_L2_WEIGHTS};
    smol_model *m = (smol_model *)f;
    smol_error e = {0};
    t4a_fake_inject(fake, cases[i].entry, cases[i].skip, 1, CUDA_ERROR_OUT_OF_MEMORY, 0);
    t4a_status st = smol_open(f->model, &o, &m, NULL, &e);
    uint64_t injected = t4a_fake_injected(fake);
    t4a_fake_clear_injections(fake);
    if (st == T4A_NVRTC_NOT_FOUND) skip();
    if (injected == 0) fail_msg("%s: never called", cases[i].entry);
    if (st == T4A_OK) fail_msg("%s (after %llu): opened", cases[i].entry,
                               (unsigned long long)cases[i].skip);
    assert_true(st == T4A_DRIVER_ERROR || st == T4A_DEVICE_OUT_OF_MEMORY ||
                st == T4A_HOST_OUT_OF_MEMORY);
    assert_null(m);
    assert_non_null(strstr(e.message, cases[i].entry));
    (void)t4a_fake_table(fake)->cuCtxSetCurrent(NULL);
    t4a_fake_progress(fake);
    t4a_fake_live v;
    t4a_fake_live_objects(fake, &v);
    print_message("%s after %llu: %s; live device blocks %llu, pools %llu\n", cases[i].entry,
                  (unsigned long long)cases[i].skip, e.message,
                  (unsigned long long)v.device_allocs, (unsigned long long)v.pools);
    assert_int_equal(v.device_allocs, cases[i].quarantines);
    assert_int_equal(v.pools + v.streams, cases[i].quarantines ? 2 : 0);
    assert_int_equal(v.events + v.modules + v.graphs + v.graph_execs + v.host_allocs, 0);
    assert_int_equal(t4a_fake_ordering_violations(fake), 0);
    t4a_driver_release(drv);
    t4a_fake_destroy(fake);
  }
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
  assert_int_equal(t4a_fake_create(&fo, &f->fake), T4A_OK);
  assert_int_equal(t4a_fake_driver(f->fake, &f->drv), T4A_OK);
  smol_host_twins_register(f->fake);
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(p, 1, n, fp), n);
  fclose(fp);
}

static t4a_status open_bad(fx *f, const char *path, smol_options *o, smol_error *e) {
  smol_model *m = (smol_model *)f;
  t4a_status st = smol_open(path, o, &m, NULL, e);
  assert_null(m);
  assert_fake_clean(f);
  return st;
}

static void test_bad_input(void **state) {
  fx *f = *state;
  smol_options o = {f->drv, NULL, 0, "hi", 4, 0, SMOL_L2_WEIGHTS};
  smol_error e = {0};
  /* a missing file */
  assert_int_equal(open_bad(f, "/nonexistent/model.gguf", &o, &e), T4A_IO);
  assert_non_null(strstr(e.message, "/nonexistent/model.gguf"));
  /* not a GGUF file */
  char path[] = "/tmp/smollm_bad_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  write_file(path, "#!/bin/sh\necho not a model\n", 27);
  assert_int_equal(open_bad(f, path, &o, &e), T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, "not a GGUF file"));
  assert_non_null(strstr(e.message, path));
  /* a GGUF of another architecture */
  uint8_t g[128];
  size_t w = 0;
#define PUT(v, n) (memcpy(g + w, (v), (n)), w += (n))
  uint32_t u32 = 3, type = 8;
  uint64_t u64 = 0, one = 1, klen = 20, vlen = 4;
  PUT("GGUF", 4);
  PUT(&u32, 4);
  PUT(&u64, 8);
  PUT(&one, 8);
  PUT(&klen, 8);
  PUT("general.architecture", 20);
  PUT(&type, 4);
  PUT(&vlen, 8);
  PUT("gpt2", 4);
#undef PUT
  write_file(path, g, w);
  assert_int_equal(open_bad(f, path, &o, &e), T4A_UNSUPPORTED);
  assert_non_null(strstr(e.message, "'gpt2'"));
  unlink(path);
  if (!smol_model_path(f->model, sizeof f->model)) {
    print_message("SKIP (the rest): model not fetched; run %s\n", SMOL_FETCH_COMMAND);
    return;
  }
  /* a prompt longer than the context (8192 positions with the new tokens) */
  o.n_new = 8192; /* "hi" is one token: 8193 positions */
  assert_int_equal(open_bad(f, f->model, &o, &e), T4A_LIMIT_EXCEEDED);
  assert_non_null(strstr(e.message, "context"));
  o.n_new = 4;
  /* an L2 window over an unknown region */
  o.l2_bytes = 1u << 20;
  o.l2_region = 7;
  assert_int_equal(open_bad(f, f->model, &o, &e), T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, "unknown L2 region"));
  o.l2_bytes = 0;
  o.l2_region = SMOL_L2_WEIGHTS;
  /* an unsupported tensor type: blk.0.attn_q.weight's type patched from Q4_1 to Q4_0 in a copy */
  int in = open(f->model, O_RDONLY);
  struct stat sb;
  assert_int_equal(fstat(in, &sb), 0);
  uint8_t *bytes = malloc((size_t)sb.st_size);
  assert_int_equal(read(in, bytes, (size_t)sb.st_size), sb.st_size);
  close(in);
  const char *name = "blk.0.attn_q.weight";
  uint8_t *at = memmem(bytes, 4 << 20, name, strlen(name));
  assert_non_null(at);
  uint8_t *tt = at + strlen(name) + 4 + 16; /* n_dims, two dimensions, then the type */
  uint32_t was;
  memcpy(&was, tt, 4);
  assert_int_equal(was, 3);
  uint32_t q4_0 = 2;
  memcpy(tt, &q4_0, 4);
  char copy[] = "/tmp/smollm_patched_XXXXXX";
  fd = mkstemp(copy);
  assert_true(fd >= 0);
  close(fd);
  write_file(copy, bytes, (size_t)sb.st_size);
  free(bytes);
  assert_int_equal(open_bad(f, copy, &o, &e), T4A_UNSUPPORTED);
  assert_non_null(strstr(e.message, "blk.0.attn_q.weight"));
  assert_non_null(strstr(e.message, "Q4_0"));
  unlink(copy);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_logits_match_numpy_and_ways_agree),
      cmocka_unit_test(test_warm_start_makes_no_nvrtc_call),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_open_failures_leave_nothing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
