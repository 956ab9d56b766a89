/* The artifact cache's memory level against the real NVRTC: one compile per request, a new
 * compile for any changed input, one compile for eight concurrent requests, failures never
 * cached, LRU bounds by entries and bytes, and options the key cannot see rejected. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;

static int setup(void **state) {
  (void)state;
  return t4a_nvrtc_lib_open(NULL, &g_lib) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  return 0;
}

static t4a_counter_values counters(const t4a_nvrtc_cache *c) {
  t4a_counter_values v;
  t4a_nvrtc_cache_counters(c, &v);
  return v;
}

static t4a_nvrtc_cache *new_cache(size_t max_entries, size_t max_bytes) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.max_entries = max_entries;
  o.max_bytes = max_bytes;
  t4a_nvrtc_cache *c = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_OK);
  return c;
}

static t4a_nvrtc_artifact *get(t4a_nvrtc_cache *c, const t4a_nvrtc_request *r,
                               t4a_nvrtc_origin want) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_cache_compile(c, r, &a, &o);
  if (st != T4A_OK) {
    t4a_error e;
    t4a_error_last(&e);
    print_error("cache_compile: %s %s\n%s\n", t4a_status_name(st), e.message, o.log ? o.log : "");
  }
  assert_int_equal(st, T4A_OK);
  assert_non_null(a);
  assert_int_equal(o.origin, want);
  assert_null(o.log);
  return a;
}

static void test_same_request_twice_compiles_once(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request r = test_add1_request();
  t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *b = get(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a, b);
  /* An equal request from other storage (copied strings) is the same request. */
  char *src = strdup(k_add1_src), *name = strdup("add1.cu"), *target = strdup("sm_90");
  r.source = src;
  r.program_name = name;
  r.target = target;
  t4a_nvrtc_artifact *b2 = get(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a, b2);
  free(src);
  free(name);
  free(target);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(v.nvrtc_compile_successes, 1);
  assert_int_equal(v.nvrtc_mem_hits, 2);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  assert_int_equal(v.nvrtc_disk_hits + v.nvrtc_disk_misses, 0); /* no directory */
  assert_int_equal(v.ctx_activations, 0);                       /* only nvrtc_* counts */
  size_t entries = 0, bytes = 0;
  t4a_nvrtc_cache_memory_usage(c, &entries, &bytes);
  assert_int_equal(entries, 1);
  assert_true(bytes > 0);
  t4a_nvrtc_artifact_release(b2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_cache_destroy(c);
  /* The artifact outlives the cache. */
  assert_non_null(strstr(t4a_nvrtc_artifact_data(a, NULL), ".entry add1"));
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(NULL);
}

/* Every input that can change the output changes the key: each variant compiles once, then the
 * original is still a memory hit. */
static void test_any_input_change_recompiles(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  char content[] = "#define SCALE 2.0f\n";
  t4a_nvrtc_header h = {"scale.h", content, 0, 0};
  const char *opts[] = {"-DUNUSED=1", "--use_fast_math"};
  const char *exprs[] = {"scale"};
  t4a_nvrtc_request base = test_add1_request();
  base.source = k_scale_src;
  base.headers = &h;
  base.num_headers = 1;
  base.options = opts;
  base.num_options = 2;
  base.name_expressions = exprs;
  base.num_name_expressions = 1;
  t4a_nvrtc_artifact *first = get(c, &base, T4A_NVRTC_ORIGIN_COMPILED);
  uint8_t key0[16];
  t4a_nvrtc_artifact_key(first, key0);

  uint64_t attempts = counters(c).nvrtc_compile_attempts;
  t4a_nvrtc_request r;
  const char *opts2[] = {"-DUNUSED=2", "--use_fast_math"};
  const char *opts3[] = {"--use_fast_math", "-DUNUSED=1"}; /* same options, other order */
  const char *opts4[] = {"-DUNUSED=1"};
  const char *exprs2[] = {"&scale"};
  const char *src_edit =
      "#include \"scale.h\"\n"
      "extern \"C\" __global__ void scale(float *x) { x[threadIdx.x] *= SCALE; } \n";
  for (int variant = 0; variant < 10; variant++) {
    r = base;
    t4a_nvrtc_header hv = h;
    r.headers = &hv;
    char content2[sizeof content];
    memcpy(content2, content, sizeof content);
    switch (variant) {
      case 0:
        content2[16] = '5';
        hv.content = content2;
        break; /* one byte of the header */
      case 1:
        r.options = opts2;
        break; /* one option */
      case 2:
        r.options = opts3;
        break; /* option order */
      case 3:
        r.options = opts4;
        r.num_options = 1;
        break; /* one option fewer */
      case 4:
        r.target = "sm_80";
        break; /* the target */
      case 5:
        r.target = "compute_90";
        break; /* virtual target */
      case 6:
        r.output = T4A_NVRTC_OUTPUT_CUBIN;
        break; /* the output kind */
      case 7:
        r.program_name = "other.cu";
        break; /* the program name */
      case 8:
        r.name_expressions = exprs2;
        break; /* a name expression */
      case 9:
        r.source = src_edit;
        break; /* one byte of the source */
    }
    t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
    uint8_t key[16];
    t4a_nvrtc_artifact_key(a, key);
    assert_memory_not_equal(key, key0, 16);
    assert_int_equal(counters(c).nvrtc_compile_attempts, attempts + 1);
    attempts++;
    t4a_nvrtc_artifact *again = get(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
    assert_ptr_equal(again, a);
    t4a_nvrtc_artifact_release(again);
    t4a_nvrtc_artifact_release(a);
  }
  t4a_nvrtc_artifact *back = get(c, &base, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(back, first);
  assert_int_equal(counters(c).nvrtc_compile_attempts, attempts);
  t4a_nvrtc_artifact_release(back);
  t4a_nvrtc_artifact_release(first);
  t4a_nvrtc_cache_destroy(c);
}

typedef struct racer {
  t4a_nvrtc_cache *cache;
  const t4a_nvrtc_request *req;
  pthread_barrier_t *barrier;
  t4a_status st;
  t4a_nvrtc_artifact *art;
  t4a_nvrtc_outcome outcome;
  t4a_error err;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  pthread_barrier_wait(r->barrier);
  r->st = t4a_nvrtc_cache_compile(r->cache, r->req, &r->art, &r->outcome);
  t4a_error_last(&r->err);
  return NULL;
}

static void run_racers(t4a_nvrtc_cache *c, const t4a_nvrtc_request *req, racer *rs, int n) {
  pthread_t th[16];
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    rs[i] = (racer){c, req, &barrier, T4A_OK, NULL, T4A_NVRTC_OUTCOME_INIT, {0}};
    assert_int_equal(pthread_create(&th[i], NULL, race, &rs[i]), 0);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&barrier);
}

static void test_eight_threads_one_compile(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request r = test_add1_request();
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  racer rs[8];
  run_racers(c, &r, rs, 8);
  int compiled = 0, joined = 0, memory = 0;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(rs[i].st, T4A_OK);
    assert_ptr_equal(rs[i].art, rs[0].art);
    compiled += rs[i].outcome.origin == T4A_NVRTC_ORIGIN_COMPILED;
    joined += rs[i].outcome.origin == T4A_NVRTC_ORIGIN_JOINED;
    memory += rs[i].outcome.origin == T4A_NVRTC_ORIGIN_MEMORY;
  }
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(compiled, 1);
  assert_int_equal(joined + memory, 7);
  assert_int_equal(v.nvrtc_mem_joins, (uint64_t)joined);
  assert_int_equal(v.nvrtc_mem_hits, (uint64_t)memory);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  for (int i = 0; i < 8; i++) t4a_nvrtc_artifact_release(rs[i].art);
  t4a_nvrtc_cache_destroy(c);
}

/* A failing compile is shared with the threads that joined it (status, detail and log) and is
 * never cached: the calls that came after it compile again. */
static void test_eight_threads_share_a_failure(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request r = test_add1_request();
  r.program_name = "broken.cu";
  r.source = k_broken_src;
  racer rs[8];
  run_racers(c, &r, rs, 8);
  int owners = 0, joined = 0;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(rs[i].st, T4A_COMPILE_FAILED);
    assert_null(rs[i].art);
    assert_int_equal(rs[i].outcome.origin, T4A_NVRTC_ORIGIN_NONE);
    assert_non_null(rs[i].outcome.log);
    assert_non_null(strstr(rs[i].outcome.log, "undefined_thing"));
    assert_int_equal(rs[i].err.status, T4A_COMPILE_FAILED);
    assert_string_equal(rs[i].err.entry, "nvrtcCompileProgram");
    assert_non_null(strstr(rs[i].err.message, "undefined_thing"));
    t4a_nvrtc_outcome_deinit(&rs[i].outcome);
  }
  t4a_counter_values v = counters(c);
  owners = (int)v.nvrtc_compile_attempts;
  joined = (int)v.nvrtc_mem_joins;
  assert_true(owners >= 1);
  assert_int_equal(owners + joined, 8);
  assert_int_equal(v.nvrtc_mem_misses, (uint64_t)owners);
  assert_int_equal(v.nvrtc_mem_hits, 0);
  size_t entries = 9;
  t4a_nvrtc_cache_memory_usage(c, &entries, NULL);
  assert_int_equal(entries, 0);
  t4a_nvrtc_cache_destroy(c);
}

static void test_failures_are_never_cached(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request bad = test_add1_request();
  bad.source = k_broken_src;
  t4a_nvrtc_request empty = test_add1_request();
  empty.target = "compute_90";
  empty.output = T4A_NVRTC_OUTPUT_CUBIN; /* audit A3: an empty CUBIN */
  for (int round = 1; round <= 2; round++) {
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    assert_int_equal(t4a_nvrtc_cache_compile(c, &bad, &a, &o), T4A_COMPILE_FAILED);
    assert_null(a);
    assert_non_null(strstr(o.log, "undefined_thing"));
    assert_int_equal(t4a_nvrtc_cache_compile(c, &empty, &a, &o), T4A_COMPILE_FAILED);
    assert_null(a);
    assert_non_null(strstr(o.log, "empty cubin"));
    t4a_nvrtc_outcome_deinit(&o);
    t4a_counter_values v = counters(c);
    assert_int_equal(v.nvrtc_compile_attempts, 2 * (uint64_t)round); /* compiled again */
    assert_int_equal(v.nvrtc_empty_outputs, (uint64_t)round);
    assert_int_equal(v.nvrtc_mem_hits, 0);
  }
  size_t entries = 9;
  t4a_nvrtc_cache_memory_usage(c, &entries, NULL);
  assert_int_equal(entries, 0);
  t4a_nvrtc_cache_destroy(c);
}

static t4a_nvrtc_request variant(const char **opt_slot, const char *define) {
  t4a_nvrtc_request r = test_add1_request();
  *opt_slot = define;
  r.options = opt_slot;
  r.num_options = 1;
  return r;
}

static void test_lru_bound_by_entries(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(2, 0);
  const char *oa, *ob, *oc;
  t4a_nvrtc_request ra = variant(&oa, "-DV=1"), rb = variant(&ob, "-DV=2"),
                    rc = variant(&oc, "-DV=3");
  t4a_nvrtc_artifact *a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *b = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *a2 = get(c, &ra, T4A_NVRTC_ORIGIN_MEMORY);   /* A is now the most recent */
  t4a_nvrtc_artifact *cc = get(c, &rc, T4A_NVRTC_ORIGIN_COMPILED); /* evicts B, the oldest */
  size_t entries = 0;
  t4a_nvrtc_cache_memory_usage(c, &entries, NULL);
  assert_int_equal(entries, 2);
  assert_int_equal(counters(c).nvrtc_mem_evictions, 1);
  t4a_nvrtc_artifact *a3 = get(c, &ra, T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_artifact *b2 = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  /* The evicted artifact a caller still holds is still valid. */
  assert_non_null(strstr(t4a_nvrtc_artifact_data(b, NULL), ".entry add1"));
  assert_ptr_not_equal(b2, b);
  assert_int_equal(counters(c).nvrtc_compile_attempts, 4);
  t4a_nvrtc_artifact *list[] = {a, b, a2, cc, a3, b2};
  for (size_t i = 0; i < 6; i++) t4a_nvrtc_artifact_release(list[i]);
  t4a_nvrtc_cache_destroy(c);
}

static void test_lru_bound_by_bytes(void **state) {
  (void)state;
  const char *oa, *ob;
  t4a_nvrtc_request ra = variant(&oa, "-DV=1"), rb = variant(&ob, "-DV=2");
  /* Measure one entry, then allow a bit more than one. */
  t4a_nvrtc_cache *probe = new_cache(0, 0);
  t4a_nvrtc_artifact *a = get(probe, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  size_t one = 0;
  t4a_nvrtc_cache_memory_usage(probe, NULL, &one);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(probe);

  t4a_nvrtc_cache *c = new_cache(0, one + one / 2);
  a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *b = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  size_t entries = 0, bytes = 0;
  t4a_nvrtc_cache_memory_usage(c, &entries, &bytes);
  assert_int_equal(entries, 1);
  assert_true(bytes <= one + one / 2);
  assert_int_equal(counters(c).nvrtc_mem_evictions, 1);
  t4a_nvrtc_artifact *b2 = get(c, &rb, T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_artifact_release(b2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);

  /* Larger than the whole level: returned, not kept, nothing else evicted. */
  c = new_cache(0, one / 2);
  a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_memory_usage(c, &entries, &bytes);
  assert_int_equal(entries, 0);
  assert_int_equal(bytes, 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

static void test_cache_rejects_options_it_cannot_key(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  const char *bad[] = {"-I/usr/include",
                       "-I",
                       "--include-path=/x",
                       "--include-path",
                       "-include",
                       "--pre-include=x.h",
                       "--pch",
                       "-use-pch=/tmp/x.pch",
                       "--create-pch=y.pch",
                       "--pch-dir=/tmp",
                       "--time=t.csv",
                       "-fdevice-time-trace=trace.json",
                       "@options.rsp"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *opts[] = {"-DOK=1", bad[i]};
    t4a_nvrtc_request r = test_add1_request();
    r.options = opts;
    r.num_options = 2;
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
    assert_null(a);
    t4a_error e;
    t4a_error_last(&e);
    assert_non_null(strstr(e.message, "option 1"));
    assert_non_null(strstr(e.message, "cache key cannot see"));
  }
  /* Look-alikes that read no file are fine. */
  const char *fine[] = {"-DINCLUDE=1", "--std=c++17", "-lineinfo", "--device-debug"};
  t4a_nvrtc_request r = test_add1_request();
  r.options = fine;
  r.num_options = 4;
  t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  /* The shared validation applies too. */
  const char *nl[] = {"-DX=1\n#include \"/etc/passwd\""};
  r.options = nl;
  r.num_options = 1;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  t4a_nvrtc_cache_destroy(c);
}

static void test_create_arguments(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = (t4a_nvrtc_cache *)1;
  assert_int_equal(t4a_nvrtc_cache_create(NULL, NULL, &c), T4A_INVALID_ARGUMENT);
  assert_null(c);
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, NULL, NULL), T4A_INVALID_ARGUMENT);
  /* A directory path that is a file. */
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = "/dev/null";
  c = (t4a_nvrtc_cache *)1;
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_IO);
  assert_null(c);
  o.disk_dir = "/dev/null/below";
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_IO);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/dev/null"));
  o.disk_dir = "";
  assert_int_equal(t4a_nvrtc_cache_create(g_lib, &o, &c), T4A_INVALID_ARGUMENT);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_request r = test_add1_request();
  assert_int_equal(t4a_nvrtc_cache_compile(NULL, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  assert_null(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_request_twice_compiles_once),
      cmocka_unit_test(test_any_input_change_recompiles),
      cmocka_unit_test(test_eight_threads_one_compile),
      cmocka_unit_test(test_eight_threads_share_a_failure),
      cmocka_unit_test(test_failures_are_never_cached),
      cmocka_unit_test(test_lru_bound_by_entries),
      cmocka_unit_test(test_lru_bound_by_bytes),
      cmocka_unit_test(test_cache_rejects_options_it_cannot_key),
      cmocka_unit_test(test_create_arguments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
