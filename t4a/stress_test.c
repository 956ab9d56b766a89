/* Thread stress on the fake driver: 8 threads × T4A_STRESS_OPS (default 10,000) mixed operations
 * on three shared runtimes (two lanes on device 0, one on device 1) — buffers created on one
 * thread and released on another (also right after a launch that uses them), uploads and
 * byte-exact downloads, launches, descriptors, copies within a runtime and between runtimes
 * (same device, two devices), raw scopes, syncs, stats, and compiles through one shared artifact
 * cache (a fake NVRTC). First, all threads compile one request at once: NVRTC must run once.
 * At the end: every operation returned T4A_OK, every download matched the bytes the host expected,
 * the fake holds nothing, no ordering violation, no NVRTC program alive.
 * ThreadSanitizer runs it in the tsan lane of scripts/test.sh (Bazel config tsan). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"

enum { THREADS = 8, RUNTIMES = 3, SLOTS = 48 };
static const size_t k_sizes[3] = {512, 4096, 12288};

static const char k_source[] =
    "extern \"C\" __global__ void add(unsigned char *p, int n, int v) {}\n";

typedef struct slot {
  pthread_mutex_t lock;
  t4a_buffer *buf; /* NULL: empty */
  int rt;
  size_t bytes;
  unsigned char val; /* every byte of the buffer, once its queued work ran */
} slot;

typedef struct held {
  t4a_buffer *buf;
  int rt;
  size_t bytes;
  unsigned char val;
} held;

static struct {
  t4a_fixture fx; /* a fake of two peer devices and its driver; the runtimes open their lanes */
  t4a_nvrtc_lib *nvrtc;
  t4a_nvrtc_cache *cache;
  t4a_runtime *rt[RUNTIMES];
  t4a_function *fn[RUNTIMES];
  slot slots[SLOTS];
  long ops;
  pthread_barrier_t start;
  atomic_long failures, mismatches, done[16];
} g;

static void failure(const char *op, t4a_status st) {
  t4a_error e;
  char msg[512];
  t4a_error_last(&e);
  fprintf(stderr, "stress: %s: %s (%s)\n", op, t4a_status_name(st),
          t4a_error_format(&e, msg, sizeof msg));
  atomic_fetch_add(&g.failures, 1);
}
#define OK(op, expr)                        \
  do {                                      \
    t4a_status st_ = (expr);                \
    if (st_ != T4A_OK) failure((op), st_);  \
  } while (0)

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int take(int i, held *out) {
  slot *s = &g.slots[i];
  pthread_mutex_lock(&s->lock);
  out->buf = s->buf;
  out->rt = s->rt;
  out->bytes = s->bytes;
  out->val = s->val;
  s->buf = NULL;
  pthread_mutex_unlock(&s->lock);
  return out->buf != NULL;
}

/* Puts h into slot i; whatever was there is released (by this thread, whoever made it). */
static void put(int i, const held *h) {
  slot *s = &g.slots[i];
  pthread_mutex_lock(&s->lock);
  t4a_buffer *old = s->buf;
  s->buf = h->buf;
  s->rt = h->rt;
  s->bytes = h->bytes;
  s->val = h->val;
  pthread_mutex_unlock(&s->lock);
  t4a_buffer_release(old);
}

static void fill_upload(held *h, unsigned char val) {
  unsigned char tmp[12288];
  memset(tmp, val, h->bytes);
  OK("upload", t4a_runtime_upload(g.rt[h->rt], h->buf, 0, tmp, h->bytes));
  h->val = val;
}

static void verify(const held *h, const char *what) {
  unsigned char tmp[12288];
  memset(tmp, (unsigned char)~h->val, h->bytes);
  t4a_status st = t4a_runtime_download(g.rt[h->rt], h->buf, 0, tmp, h->bytes);
  if (st != T4A_OK) {
    failure("download", st);
    return;
  }
  for (size_t i = 0; i < h->bytes; i++) {
    if (tmp[i] != h->val) {
      fprintf(stderr, "stress: %s: byte %zu of %zu is %u, want %u\n", what, i, h->bytes, tmp[i],
              h->val);
      atomic_fetch_add(&g.mismatches, 1);
      return;
    }
  }
}

static void launch_add(held *h, int v) {
  int n = (int)h->bytes;
  t4a_arg args[3] = {t4a_arg_buffer(h->buf, 0), t4a_arg_scalar(&n, 4), t4a_arg_scalar(&v, 4)};
  OK("launch", t4a_runtime_launch(g.rt[h->rt], g.fn[h->rt], 1, 1, args, 3));
  h->val = (unsigned char)(h->val + v);
}

static t4a_status raw_body(t4a_raw_scope *scope, void *user) {
  held *h = user;
  uint64_t p = 0;
  t4a_status st = t4a_raw_devptr(scope, h->buf, T4A_RAW_READ, &p);
  if (st == T4A_OK && (p != t4a_buffer_devptr(h->buf) || t4a_raw_stream(scope) == NULL)) {
    st = T4A_INTERNAL;
  }
  return st;
}

static void compile_once(void) {
  t4a_nvrtc_artifact *a = NULL;
  t4a_module *m = NULL;
  t4a_function *f = NULL;
  t4a_runtime *rt = g.rt[0];
  OK("compile", t4a_runtime_compile(rt, k_source, "stress.cu", &a));
  if (a != NULL) OK("load", t4a_runtime_load(rt, a, &m));
  if (m != NULL) OK("function", t4a_runtime_function(rt, m, "add", &f));
  t4a_function_release(f);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(a);
}

static void one_op(uint64_t *seed) {
  uint64_t r = next(seed);
  int op = (int)(r % 13);
  int i = (int)((r >> 8) % SLOTS), j = (int)((r >> 16) % SLOTS);
  int v = (int)((r >> 24) % 7) + 1;
  held a, b;
  atomic_fetch_add(&g.done[op], 1);
  switch (op) {
    case 0:   /* create, fill, put (releasing what was there) */
    case 1: {
      a.rt = (int)((r >> 32) % RUNTIMES);
      a.bytes = k_sizes[(r >> 40) % 3];
      a.buf = NULL;
      OK("buffer", t4a_runtime_buffer(g.rt[a.rt], a.bytes, &a.buf));
      if (a.buf == NULL) return;
      fill_upload(&a, (unsigned char)(r >> 48));
      put(i, &a);
      return;
    }
    case 2: /* verify */
      if (!take(i, &a)) return;
      verify(&a, "download");
      put(i, &a);
      return;
    case 3: /* launch and keep */
      if (!take(i, &a)) return;
      launch_add(&a, v);
      put(i, &a);
      return;
    case 4: /* launch, then release at once: the launch keeps it alive */
      if (!take(i, &a)) return;
      launch_add(&a, v);
      t4a_buffer_release(a.buf);
      return;
    case 5:   /* copy, within one runtime or between two */
    case 6: {
      if (i == j || !take(i, &a)) return;
      if (!take(j, &b)) {
        put(i, &a);
        return;
      }
      if (a.bytes == b.bytes) {
        if (a.rt == b.rt) {
          OK("copy", t4a_runtime_copy(g.rt[a.rt], b.buf, 0, a.buf, 0, a.bytes));
        } else {
          OK("xfer_copy", t4a_xfer_copy(t4a_runtime_xfer(g.rt[b.rt]), b.buf, 0,
                                        t4a_runtime_xfer(g.rt[a.rt]), a.buf, 0, a.bytes,
                                        T4A_COPY_AUTO, NULL, NULL));
        }
        b.val = a.val;
        if (op == 6) launch_add(&a, v); /* a write to the source right after the copy */
      }
      put(i, &a);
      put(j, &b);
      return;
    }
    case 7: /* a descriptor: register, fire, unregister */
      if (!take(i, &a)) return;
      {
        int n = (int)a.bytes;
        t4a_arg args[3] = {t4a_arg_buffer(a.buf, 0), t4a_arg_scalar(&n, 4),
                           t4a_arg_scalar(&v, 4)};
        t4a_launch_config c = {{1, 1, 1}, {1, 1, 1}, 0};
        t4a_launch_table *t = t4a_runtime_table(g.rt[a.rt]);
        uint32_t id = 0;
        t4a_status st = t4a_descriptor_register(t, g.fn[a.rt], &c, args, 3, &id);
        if (st == T4A_LIMIT_EXCEEDED) {
          /* the table is full of other threads' descriptors: a valid answer */
        } else if (st != T4A_OK) {
          failure("descriptor_register", st);
        } else {
          OK("descriptor_fire", t4a_descriptor_fire(t, id));
          a.val = (unsigned char)(a.val + v);
          OK("descriptor_unregister", t4a_descriptor_unregister(t, id));
        }
      }
      put(i, &a);
      return;
    case 8: /* a raw scope binding the buffer */
      if (!take(i, &a)) return;
      {
        t4a_raw_binding bind = {a.buf, T4A_RAW_READ};
        OK("raw_run", t4a_raw_run(t4a_runtime_retire(g.rt[a.rt]), &bind, 1, raw_body, &a));
      }
      put(i, &a);
      return;
    case 9:
      OK("sync", t4a_runtime_sync(g.rt[(r >> 32) % RUNTIMES]));
      return;
    case 10:
      compile_once();
      return;
    case 11: {
      char json[16384];
      size_t len = 0;
      OK("stats_json", t4a_runtime_stats_json(g.rt[(r >> 32) % RUNTIMES], json, sizeof json,
                                              &len));
      return;
    }
    default: /* release from whichever thread got it */
      if (take(i, &a)) t4a_buffer_release(a.buf);
      return;
  }
}

static void *worker(void *arg) {
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)((intptr_t)arg + 1);
  pthread_barrier_wait(&g.start);
  compile_once(); /* every thread at once: one NVRTC compile */
  pthread_barrier_wait(&g.start);
  for (long n = 0; n < g.ops; n++) one_op(&seed);
  return NULL;
}

static void test_stress(void **state) {
  (void)state;
  const char *env = getenv("T4A_STRESS_OPS");
  g.ops = env != NULL ? atol(env) : 10000;
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.all_peers = 1;
  o.stacks = 0;
  o.kernels[0] = &t4a_hk_add_bytes; /* add(p, n, v): p[i] += v */
  assert_int_equal(t4a_fixture_init(&g.fx, &o), T4A_OK);
  assert_int_equal(t4a_fake_nvrtc_open(&g.nvrtc), T4A_OK);
  assert_int_equal(t4a_nvrtc_cache_create(g.nvrtc, NULL, &g.cache), T4A_OK);
  t4a_fake_nvrtc_set_compile_delay(20000); /* the first compile overlaps the others */

  static const char image[] = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                              ".visible .entry add(.param .u64 p, .param .u32 n, .param .u32 v)\n"
                              "{\n  ret;\n}\n";
  size_t image_bytes = sizeof image;
  for (int r = 0; r < RUNTIMES; r++) {
    t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
    ro.driver = g.fx.drv;
    ro.xfer.chunk_bytes = 8192;
    ro.xfer.copy_threads = 2;
    ro.table_capacity = 4;
    ro.artifact_cache = g.cache;
    ro.compile_ptx = 1;
    assert_int_equal(t4a_runtime_open(r == 1 ? 1 : 0, &ro, &g.rt[r]), T4A_OK);
    t4a_module *m = NULL;
    assert_int_equal(t4a_runtime_load_image(g.rt[r], image, image_bytes, &m), T4A_OK);
    assert_int_equal(t4a_runtime_function(g.rt[r], m, "add", &g.fn[r]), T4A_OK);
    t4a_module_release(m);
  }
  for (int i = 0; i < SLOTS; i++) pthread_mutex_init(&g.slots[i].lock, NULL);
  pthread_barrier_init(&g.start, NULL, THREADS);

  pthread_t t[THREADS];
  for (intptr_t k = 0; k < THREADS; k++) {
    assert_int_equal(pthread_create(&t[k], NULL, worker, (void *)k), 0);
  }
  for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
  long compiles = t4a_fake_nvrtc_compiles();

  /* Every buffer left is checked, then released. */
  for (int i = 0; i < SLOTS; i++) {
    held a;
    if (take(i, &a)) {
      verify(&a, "final download");
      t4a_buffer_release(a.buf);
    }
    pthread_mutex_destroy(&g.slots[i].lock);
  }
  pthread_barrier_destroy(&g.start);
  for (int r = 0; r < RUNTIMES; r++) {
    t4a_function_release(g.fn[r]);
    assert_int_equal(t4a_runtime_close(g.rt[r]), T4A_OK);
  }
  t4a_nvrtc_cache_destroy(g.cache);
  t4a_nvrtc_lib_release(g.nvrtc);
  t4a_fixture_release(&g.fx); /* no context current, the GPU finishes, the driver goes */
  fprintf(stderr, "# stress: %d threads x %ld ops; per kind:", THREADS, g.ops);
  for (int k = 0; k < 13; k++) fprintf(stderr, " %ld", atomic_load(&g.done[k]));
  fprintf(stderr, "; NVRTC compiles %ld\n", compiles);
  assert_int_equal(atomic_load(&g.failures), 0);
  assert_int_equal(atomic_load(&g.mismatches), 0);
  assert_int_equal(compiles, 1);
  assert_int_equal(t4a_fake_nvrtc_programs_live(), 0);
  assert_int_equal(t4a_fake_ordering_violations(g.fx.fake), 0);
  assert_true(t4a_fake_nothing_live(g.fx.fake));
  (void)t4a_fixture_fini(&g.fx, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
