/* The artifact cache's memory level against the real NVRTC, through the wrapped table (which
 * counts compiles and live programs independently of t4a's counters): one compile per request, a
 * new compile for any changed input, one compile for eight concurrent requests, a failure shared
 * with the seven threads that joined it, failures never cached, LRU bounds by entries and bytes,
 * and options the key cannot see rejected. After every test no NVRTC program is alive. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "t4a/counters.h"
#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;

static int setup(void **state) {
  (void)state;
  return nvrtc_wrap_open(&g_lib, NULL) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  nvrtc_wrap_close();
  return 0;
}

/* Every test resets the wrapped counts first and leaves no NVRTC program alive. */
static int each_setup(void **state) {
  (void)state;
  nvrtc_wrap_reset(-1, 0);
  return 0;
}

static int each_teardown(void **state) {
  (void)state;
  long live = atomic_load(&g_nvrtc_wrap.programs_live);
  if (live != 0) {
    print_error("%ld NVRTC programs are still alive\n", live);
    return -1;
  }
  return 0;
}

static long wrapped_compiles(void) { return atomic_load(&g_nvrtc_wrap.compiles); }

static t4a_counter_values counters(const t4a_nvrtc_cache *c) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(c, &s);
  return s.counters;
}

/* Artifacts the memory level holds now (9 if the snapshot wrote nothing). */
static size_t memory_entries(const t4a_nvrtc_cache *c) {
  struct t4a_nvrtc_cache_stats s;
  s.memory_entries = 9;
  t4a_nvrtc_cache_stats(c, &s);
  return s.memory_entries;
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
  assert_int_equal(wrapped_compiles(), 1); /* NVRTC itself saw one compile */
  assert_int_equal(v.nvrtc_mem_hits, 2);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  assert_int_equal(v.nvrtc_disk_hits + v.nvrtc_disk_misses, 0); /* no directory */
  assert_int_equal(v.ctx_activations, 0);                       /* only nvrtc_* counts */
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  assert_int_equal(cs.memory_entries, 1);
  assert_true(cs.memory_bytes > 0);
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
  long compiles = wrapped_compiles();
  assert_int_equal(compiles, 1);
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
    assert_int_equal(wrapped_compiles(), compiles + 1);
    attempts++;
    compiles++;
    t4a_nvrtc_artifact *again = get(c, &r, T4A_NVRTC_ORIGIN_MEMORY);
    assert_ptr_equal(again, a);
    assert_int_equal(wrapped_compiles(), compiles);
    t4a_nvrtc_artifact_release(again);
    t4a_nvrtc_artifact_release(a);
  }
  t4a_nvrtc_artifact *back = get(c, &base, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(back, first);
  assert_int_equal(counters(c).nvrtc_compile_attempts, attempts);
  assert_int_equal(wrapped_compiles(), compiles);
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
  assert_int_equal(wrapped_compiles(), 1);
  assert_int_equal(compiled, 1);
  assert_int_equal(joined + memory, 7);
  assert_int_equal(v.nvrtc_mem_joins, (uint64_t)joined);
  assert_int_equal(v.nvrtc_mem_hits, (uint64_t)memory);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  for (int i = 0; i < 8; i++) t4a_nvrtc_artifact_release(rs[i].art);
  t4a_nvrtc_cache_destroy(c);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Holds the compiling owner inside nvrtcCompileProgram until `joins` threads joined it. */
typedef struct hold {
  t4a_nvrtc_cache *cache;
  uint64_t joins;
  int timed_out;
} hold;

static void hold_until_joined(void *user) {
  hold *h = user;
  for (int i = 0; i < 60000; i++) { /* at most a minute */
    if (counters(h->cache).nvrtc_mem_joins >= h->joins) return;
    sleep_ms(1);
  }
  h->timed_out = 1;
}

/* A failing compile is shared with the threads that joined it (status, detail and log) and is
 * never cached. The owner is held in nvrtcCompileProgram until the seven others joined, so the
 * split is exact: one compile, seven joins. */
static void test_eight_threads_share_a_failure(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request r = test_add1_request();
  r.program_name = "broken.cu";
  r.source = k_broken_src;
  hold h = {c, 7, 0};
  g_nvrtc_wrap.on_compile_user = &h;
  g_nvrtc_wrap.on_compile = hold_until_joined;
  racer rs[8];
  run_racers(c, &r, rs, 8);
  g_nvrtc_wrap.on_compile = NULL;
  assert_false(h.timed_out);
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
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(wrapped_compiles(), 1);
  assert_int_equal(v.nvrtc_mem_joins, 7);
  assert_int_equal(v.nvrtc_mem_misses, 1);
  assert_int_equal(v.nvrtc_mem_hits, 0);
  assert_int_equal(memory_entries(c), 0);
  /* Never cached: the next call compiles again. */
  t4a_nvrtc_artifact *a = NULL;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_COMPILE_FAILED);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_cache_destroy(c);
}

/* The cache mutex covers the table only: a miss builds its in-flight entry and identity record
 * (allocations as large as the request) before taking it. Every host allocation of a miss asks
 * the fault hook, which checks from another thread that the mutex is free at that moment. */
typedef struct lock_probe {
  t4a_nvrtc_cache *cache;
  atomic_int done;
  int probes, blocked;
  pthread_t threads[64];
} lock_probe;

static void *take_the_mutex(void *arg) {
  lock_probe *p = arg;
  (void)memory_entries(p->cache); /* locks and unlocks the mutex */
  atomic_store(&p->done, 1);
  return NULL;
}

static int probe_the_mutex(t4a_fault_point point, void *user) {
  lock_probe *p = user;
  if (point != T4A_FAULT_HOST_MALLOC || p->probes == 64) return 0;
  atomic_store(&p->done, 0);
  if (pthread_create(&p->threads[p->probes], NULL, take_the_mutex, p) != 0) return 0;
  p->probes++;
  for (int i = 0; i < 5000 && !atomic_load(&p->done); i++) sleep_ms(1); /* 5 s */
  if (!atomic_load(&p->done)) p->blocked++; /* held by this thread: it finishes once released */
  return 0;
}

static void test_miss_allocates_outside_the_mutex(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  lock_probe p;
  memset(&p, 0, sizeof p);
  p.cache = c;
  t4a_nvrtc_request r = test_add1_request();
  t4a_fault_set_hook(probe_the_mutex, &p);
  t4a_nvrtc_artifact *a = NULL;
  t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, NULL);
  t4a_fault_set_hook(NULL, NULL);
  for (int i = 0; i < p.probes; i++) pthread_join(p.threads[i], NULL);
  assert_int_equal(st, T4A_OK);
  assert_true(p.probes >= 2); /* the entry and its identity record, then the compile's own */
  assert_int_equal(p.blocked, 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

static void test_failures_are_never_cached(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request bad = test_add1_request();
  bad.source = k_broken_src;
  t4a_nvrtc_request empty = test_add1_request();
  empty.target = "compute_90";
  empty.output = T4A_NVRTC_OUTPUT_CUBIN; /* requirement A3: an empty CUBIN */
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
  assert_int_equal(memory_entries(c), 0);
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
  assert_int_equal(memory_entries(c), 2);
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

/* A long add1 source: the kernel, then a comment of n filler bytes. */
static char *long_source(size_t n) {
  size_t k = strlen(k_add1_src);
  char *s = malloc(k + n + 5);
  assert_non_null(s);
  memcpy(s, k_add1_src, k);
  memcpy(s + k, "//", 2);
  for (size_t i = 0; i < n; i++) s[k + 2 + i] = (char)('a' + i % 26);
  memcpy(s + k + 2 + n, "\n", 2);
  return s;
}

static uint64_t sig_of(const t4a_nvrtc_request *r) {
  t4a_nvrtc_prepared p;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, r, &p), T4A_OK);
  return t4a_nvrtc_request_sig_(&p);
}

/* The recent-hit index answers a repeated request without hashing it, but only after comparing
 * every byte: two sources with one signature (one byte apart where the signature does not look)
 * are two artifacts, each a hit of its own, never the other's. */
static void test_recent_hit_index_compares_every_byte(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  char *s1 = long_source(4000), *s2 = long_source(4000);
  size_t at = strlen(k_add1_src) + 2 + 1000; /* inside the comment, between sampled words */
  s2[at] = s2[at] == 'x' ? 'y' : 'x';
  t4a_nvrtc_request r1 = test_add1_request(), r2 = test_add1_request();
  r1.source = s1;
  r2.source = s2;
  assert_int_equal(sig_of(&r1), sig_of(&r2)); /* the case the comparison must catch */
  r2.source = k_add1_src;
  assert_int_not_equal(sig_of(&r1), sig_of(&r2));
  r2.source = s2;

  t4a_nvrtc_artifact *a = get(c, &r1, T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 0);
  t4a_nvrtc_artifact *a2 = get(c, &r1, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a2, a);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 1);
  /* r2 finds r1's entry by signature; the comparison refuses it: compiled. */
  t4a_nvrtc_artifact *b = get(c, &r2, T4A_NVRTC_ORIGIN_COMPILED);
  assert_ptr_not_equal(b, a);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 1);
  assert_int_equal(wrapped_compiles(), 2);
  t4a_nvrtc_artifact *b2 = get(c, &r2, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(b2, b);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 2);
  /* r1 again: the index names r2's entry now; refused, then found by its key. */
  t4a_nvrtc_artifact *a3 = get(c, &r1, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a3, a);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 2);
  t4a_nvrtc_artifact *a4 = get(c, &r1, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a4, a);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 3);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_mem_hits, 4);
  assert_int_equal(v.nvrtc_mem_misses, 2);
  assert_int_equal(v.nvrtc_compile_attempts, 2);
  t4a_nvrtc_artifact *list[] = {a, a2, b, b2, a3, a4};
  for (size_t i = 0; i < 6; i++) t4a_nvrtc_artifact_release(list[i]);
  t4a_nvrtc_cache_destroy(c);
  free(s1);
  free(s2);
}

/* An evicted entry leaves the index with the table: the next request compiles (and a stale
 * slot would be a use after free, which the sanitizer lanes catch). A and B are in different
 * slots, so that B's slot does not simply replace A's. */
static void test_recent_hit_index_forgets_evicted(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(1, 0);
  t4a_nvrtc_request ra = test_add1_request(), rb = test_add1_request();
  ra.program_name = "a.cu";
  static char bname[32];
  for (int i = 0;; i++) {
    snprintf(bname, sizeof bname, "b%d.cu", i);
    rb.program_name = bname;
    if (sig_of(&ra) % T4A_NVRTC_HINT_SLOTS != sig_of(&rb) % T4A_NVRTC_HINT_SLOTS) break;
  }
  t4a_nvrtc_artifact *a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *a2 = get(c, &ra, T4A_NVRTC_ORIGIN_MEMORY);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 1);
  t4a_nvrtc_artifact *b = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED); /* evicts A */
  assert_int_equal(counters(c).nvrtc_mem_evictions, 1);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_artifact_release(a2); /* A's artifact is gone now */
  t4a_nvrtc_artifact *a3 = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 1);
  assert_int_equal(counters(c).nvrtc_compile_attempts, 3);
  t4a_nvrtc_artifact *a4 = get(c, &ra, T4A_NVRTC_ORIGIN_MEMORY);
  assert_ptr_equal(a4, a3);
  assert_int_equal(t4a_nvrtc_cache_hint_hits_(c), 2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a3);
  t4a_nvrtc_artifact_release(a4);
  t4a_nvrtc_cache_destroy(c);
}

static void test_lru_bound_by_bytes(void **state) {
  (void)state;
  const char *oa, *ob;
  t4a_nvrtc_request ra = variant(&oa, "-DV=1"), rb = variant(&ob, "-DV=2");
  /* Measure one entry, then allow a bit more than one. */
  t4a_nvrtc_cache *probe = new_cache(0, 0);
  t4a_nvrtc_artifact *a = get(probe, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(probe, &cs);
  size_t one = cs.memory_bytes;
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(probe);

  t4a_nvrtc_cache *c = new_cache(0, one + one / 2);
  a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact *b = get(c, &rb, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_stats(c, &cs);
  assert_int_equal(cs.memory_entries, 1);
  assert_true(cs.memory_bytes <= one + one / 2);
  assert_int_equal(counters(c).nvrtc_mem_evictions, 1);
  t4a_nvrtc_artifact *b2 = get(c, &rb, T4A_NVRTC_ORIGIN_MEMORY);
  t4a_nvrtc_artifact_release(b2);
  t4a_nvrtc_artifact_release(b);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);

  /* Larger than the whole level: returned, not kept, nothing else evicted. */
  c = new_cache(0, one / 2);
  a = get(c, &ra, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_cache_stats(c, &cs);
  assert_int_equal(cs.memory_entries, 0);
  assert_int_equal(cs.memory_bytes, 0);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

static void expect_refused(t4a_nvrtc_cache *c, const char *const *opts, size_t n,
                           const char *msg_part) {
  t4a_nvrtc_request r = test_add1_request();
  r.options = opts;
  r.num_options = n;
  long compiles = wrapped_compiles();
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, NULL);
  t4a_error e;
  t4a_error_last(&e);
  if (st != T4A_INVALID_ARGUMENT || strstr(e.message, msg_part) == NULL ||
      strstr(e.message, "cache key cannot see") == NULL) {
    print_error("options [%s%s%s]: got %s (%s), want INVALID_ARGUMENT with \"%s\"\n", opts[0],
                n > 1 ? " " : "", n > 1 ? opts[n - 1] : "", t4a_status_name(st), e.message,
                msg_part);
  }
  assert_int_equal(st, T4A_INVALID_ARGUMENT);
  assert_null(a);
  assert_non_null(strstr(e.message, msg_part));
  assert_non_null(strstr(e.message, "cache key cannot see"));
  assert_int_equal(wrapped_compiles(), compiles); /* refused before NVRTC */
}

/* A cached compile takes only options known to read no file (an allowlist), in every spelling
 * NVRTC accepts, the element after a flag included; ptxas options too. */
static void test_cache_rejects_options_it_cannot_key(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  const char *bad[] = {
      "-I/usr/include", "-I", "--include-path=/x", "--include-path", "-include",
      "--pre-include=x.h", "--pch", "-use-pch=/tmp/x.pch", "--create-pch=y.pch", "--pch-dir=/tmp",
      "--time=t.csv", "-fdevice-time-trace=trace.json", "@options.rsp",
      /* not on the allowlist */
      "--no-such-option", "-fno-such", "--device-debug=1", "-G=1", "options.txt",
      /* ptxas: options files, output files, unknown options, file names */
      "-Xptxas=--options-file=/tmp/po.txt", "--ptxas-options=--options-file=/tmp/po.txt",
      "-Xptxas=-optf=/tmp/po.txt", "-Xptxas=-o=/tmp/x.cubin", "-Xptxas=--output-file=/tmp/x.cubin",
      "-Xptxas=--gpu-name=sm_80", "-Xptxas=--no-such", "-Xptxas=input.ptx"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *opts[] = {"-DOK=1", bad[i]};
    expect_refused(c, opts, 2, "option 1");
  }
  /* The element after a flag that takes a value is its value, and is checked as such. */
  const char *pairs[][2] = {{"-Xptxas", "--options-file=/tmp/po.txt"},
                            {"--ptxas-options", "-optf=/tmp/po.txt"},
                            {"-Xptxas", "-o=/tmp/x.cubin"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    const char *opts[] = {"-DOK=1", pairs[i][0], pairs[i][1]};
    expect_refused(c, opts, 3, "option 2 (");
  }
  const char *i_pair[] = {"-I", "/usr/include"};
  expect_refused(c, i_pair, 2, "adds an include path");
  const char *hidden[] = {"--maxrregcount", "-I/usr/include"};
  expect_refused(c, hidden, 2, "reads as an option");
  const char *optf[] = {"-Xptxas", "--options-file=/tmp/po.txt"};
  expect_refused(c, optf, 2, "options file");

  /* What reads no file is fine, in both spellings and with the value in the next element. */
  const char *fine[] = {"-DINCLUDE=1",
                        "--std=c++17",
                        "-lineinfo",
                        "--use_fast_math",
                        "-Xptxas=-v",
                        "-Xptxas",
                        "-O3",
                        "--ptxas-options=--warn-on-spills",
                        "--maxrregcount",
                        "64",
                        "-D",
                        "X=1",
                        "-D Y=2",
                        "-U",
                        "Z",
                        "-ftz=true",
                        "--device-stack-protector=false",
                        "-no-source-include",
                        "--diag-suppress=177",
                        "-opt-info=inline"};
  t4a_nvrtc_request r = test_add1_request();
  r.options = fine;
  r.num_options = sizeof fine / sizeof fine[0];
  t4a_nvrtc_artifact *a = get(c, &r, T4A_NVRTC_ORIGIN_COMPILED);
  t4a_nvrtc_artifact_release(a);
  t4a_counter_values v = counters(c);
  assert_int_equal(v.nvrtc_compile_attempts, 1);
  assert_int_equal(wrapped_compiles(), 1);
  assert_int_equal(v.nvrtc_mem_misses, 1); /* refusals are not lookups */
  /* The shared validation applies too. */
  const char *nl[] = {"-DX=1\n#include \"/etc/passwd\""};
  r.options = nl;
  r.num_options = 1;
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, NULL), T4A_INVALID_ARGUMENT);
  /* Without the cache, the file-reading options are the caller's business. */
  const char *po[] = {"-Xptxas=-v", "--ptxas-options=--warn-on-spills"};
  r = test_add1_request();
  r.options = po;
  r.num_options = 2;
  assert_int_equal(t4a_nvrtc_compile(g_lib, &r, &a, NULL), T4A_OK);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
}

/* An include the key cannot see is refused before NVRTC runs, every time (never cached), and
 * the refusal names it. */
static void test_include_refusal_is_never_cached(void **state) {
  (void)state;
  t4a_nvrtc_cache *c = new_cache(0, 0);
  t4a_nvrtc_request r = test_add1_request();
  r.source = "#include </usr/include/stdio.h>\nextern \"C\" __global__ void k() {}\n";
  for (int round = 1; round <= 2; round++) {
    t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
    t4a_nvrtc_outcome o = T4A_NVRTC_OUTCOME_INIT;
    assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &a, &o), T4A_INVALID_ARGUMENT);
    assert_null(a);
    assert_int_equal(o.origin, T4A_NVRTC_ORIGIN_NONE);
    t4a_error e;
    t4a_error_last(&e);
    assert_non_null(strstr(e.message,
                           "the source, line 1: #include </usr/include/stdio.h> is an "
                           "absolute path"));
    assert_int_equal(counters(c).nvrtc_mem_misses, (uint64_t)round);
    t4a_nvrtc_outcome_deinit(&o);
  }
  assert_int_equal(wrapped_compiles(), 0);
  assert_int_equal(counters(c).nvrtc_compile_attempts, 0);
  assert_int_equal(memory_entries(c), 0);
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
#define T(f) cmocka_unit_test_setup_teardown(f, each_setup, each_teardown)
  const struct CMUnitTest tests[] = {
      T(test_same_request_twice_compiles_once),
      T(test_any_input_change_recompiles),
      T(test_eight_threads_one_compile),
      T(test_eight_threads_share_a_failure),
      T(test_miss_allocates_outside_the_mutex),
      T(test_failures_are_never_cached),
      T(test_lru_bound_by_entries),
      T(test_lru_bound_by_bytes),
      T(test_recent_hit_index_compares_every_byte),
      T(test_recent_hit_index_forgets_evicted),
      T(test_cache_rejects_options_it_cannot_key),
      T(test_include_refusal_is_never_cached),
      T(test_create_arguments),
  };
#undef T
  return cmocka_run_group_tests(tests, setup, teardown);
}
