/* Events, fills, host functions and memory gauges on a real GPU (labels: gpu, single). Exits 77
 * without a driver. Needs NVRTC (libnvrtc.so.13) for the spin kernel.
 * - The elapsed time of two timing events around a kernel that spins ~200 ms is within 1 % of the
 *   host-measured time of the same kernel (three runs, each printed).
 * - 8-, 16- and 32-bit fills land where asked and nowhere else; a 1 GiB 32-bit fill is checked at
 *   sampled offsets (first, last and 62 more 4 KiB windows).
 * - A host function runs after the kernel before it wrote its output and before the next work;
 *   inside it t4a calls answer REENTRY (the real driver would deadlock or refuse).
 * - A chain's memset node takes a new value in place (cuGraphExecMemsetNodeSetParams) on the
 *   real driver, no re-instantiation; timing events recorded in the chain (external event record
 *   nodes) give an elapsed time at each replay.
 * - The gauges: device free memory drops by at least a 256 MiB buffer, in use / reserved follow. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

static const char k_source[] =
    "extern \"C\" __global__ void spin_write(unsigned *p, unsigned v, unsigned long long cycles) "
    "{\n"
    "  unsigned long long t0 = clock64();\n"
    "  while (clock64() - t0 < cycles) { }\n"
    "  if (threadIdx.x == 0) p[blockIdx.x] = v;\n"
    "}\n";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static t4a_runtime *open_rt(void) {
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g_drv;
  t4a_runtime *rt = NULL;
  CK(t4a_runtime_open(0, &o, &rt));
  return rt;
}

static t4a_function *spin_kernel(t4a_runtime *rt) {
  t4a_function *fn = NULL;
  t4a_status st = t4a_runtime_kernel(rt, k_source, "spin_write", &fn);
  if (st != T4A_OK) {
    t4a_error e;
    t4a_error_last(&e);
    fail_msg("spin kernel: %s: %s", t4a_status_name(st), e.message);
  }
  return fn;
}

static void launch_spin(t4a_runtime *rt, t4a_function *fn, t4a_buffer *out, unsigned v,
                        unsigned long long cycles) {
  t4a_arg args[3] = {t4a_arg_buffer(out, 0), t4a_arg_scalar(&v, 4), t4a_arg_scalar(&cycles, 8)};
  CK(t4a_runtime_launch(rt, fn, 1, 32, args, 3));
}

static void test_elapsed_time_matches_host_time(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  t4a_function *fn = spin_kernel(rt);
  t4a_buffer *out = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &out));
  t4a_device_info d;
  CK(t4a_device_query(g_drv, 0, &d));
  unsigned long long cycles = (unsigned long long)d.clock_khz * 200ull; /* ~200 ms at peak */
  t4a_event *start = NULL, *end = NULL;
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &start));
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &end));
  launch_spin(rt, fn, out, 1, 1000); /* warm: module and launch path */
  CK(t4a_runtime_sync(rt));
  for (int run = 0; run < 3; run++) {
    double t0 = now_s();
    CK(t4a_runtime_event_record(rt, NULL, start));
    launch_spin(rt, fn, out, (unsigned)run + 2, cycles);
    CK(t4a_runtime_event_record(rt, NULL, end));
    CK(t4a_event_synchronize(end));
    double host_ms = (now_s() - t0) * 1e3;
    float ev_ms = 0;
    CK(t4a_event_elapsed_ms(start, end, &ev_ms));
    double rel = fabs((double)ev_ms - host_ms) / host_ms;
    printf("everyday_gpu_test: run %d: events %.3f ms, host %.3f ms, difference %.3f %%\n", run,
           (double)ev_ms, host_ms, rel * 100.0);
    assert_true(host_ms > 50.0); /* the kernel really spun */
    assert_true(rel < 0.01);
    assert_true((double)ev_ms <= host_ms * 1.0005); /* the events lie inside the host window */
  }
  unsigned got = 0;
  CK(t4a_runtime_download(rt, out, 0, &got, 4));
  assert_int_equal(got, 4);
  /* Refusals on the real driver too: a non-timing event, a record not completed. */
  t4a_event *plain = NULL;
  CK(t4a_runtime_event(rt, 0, &plain));
  CK(t4a_runtime_event_record(rt, NULL, plain));
  float ms = 0;
  assert_int_equal(t4a_event_elapsed_ms(start, plain, &ms), T4A_INVALID_ARGUMENT);
  launch_spin(rt, fn, out, 9, cycles / 4);
  CK(t4a_runtime_event_record(rt, NULL, end));
  assert_int_equal(t4a_event_elapsed_ms(start, end, &ms), T4A_NOT_READY);
  CK(t4a_runtime_sync(rt));
  t4a_event_release(plain);
  t4a_event_release(start);
  t4a_event_release(end);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
}

static void test_fills_land_exactly(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  enum { SMALL = 4096 };
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, SMALL, &b));
  CK(t4a_runtime_memset(rt, NULL, b, 0, SMALL, 1, 0xEE));
  CK(t4a_runtime_memset(rt, NULL, b, 10, 6, 1, 0x5A));       /* [10, 16) */
  CK(t4a_runtime_memset(rt, NULL, b, 16, 8, 2, 0xBEEF));     /* [16, 32) */
  CK(t4a_runtime_memset(rt, NULL, b, 32, 4, 4, 0x01020304u)); /* [32, 48) */
  unsigned char h[SMALL];
  CK(t4a_runtime_download(rt, b, 0, h, SMALL));
  for (int i = 0; i < SMALL; i++) {
    unsigned want = i < 10 ? 0xEE : i < 16 ? 0x5A : i < 32 ? ((i & 1) ? 0xBE : 0xEF)
                  : i < 48 ? (unsigned)(4 - (i & 3)) : 0xEE;
    if (h[i] != want) fail_msg("byte %d is 0x%02x, want 0x%02x", i, h[i], want);
  }
  assert_int_equal(t4a_runtime_memset(rt, NULL, b, 4094, 1, 4, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_runtime_memset(rt, NULL, b, 2, 1, 4, 0), T4A_INVALID_ARGUMENT);
  t4a_buffer_release(b);
  /* 1 GiB, 32-bit pattern: sampled windows. */
  size_t big = (size_t)1 << 30;
  CK(t4a_runtime_buffer(rt, big, &b));
  CK(t4a_runtime_memset(rt, NULL, b, 0, big / 4, 4, 0xA5A5F00Du));
  static uint32_t w[1024];
  for (int k = 0; k < 64; k++) {
    size_t off = k == 63 ? big - sizeof w : (size_t)k * (big / 64) + (size_t)k * 4096;
    memset(w, 0, sizeof w);
    CK(t4a_runtime_download(rt, b, off, w, sizeof w));
    for (int i = 0; i < 1024; i++) {
      if (w[i] != 0xA5A5F00Du) fail_msg("word at %zu is 0x%08x", off + 4 * (size_t)i, w[i]);
    }
  }
  t4a_buffer_release(b);
  CK(t4a_runtime_close(rt));
}

typedef struct host_seen {
  t4a_runtime *rt;
  t4a_buffer *buf;
  const volatile unsigned *host_word; /* pinned, written by a copy before the function */
  unsigned word;
  t4a_status sync, memset;
  atomic_int ran;
} host_seen;

static void in_host_fn(void *p) {
  host_seen *s = p;
  s->word = *s->host_word;
  s->sync = t4a_runtime_sync(s->rt);
  s->memset = t4a_runtime_memset(s->rt, NULL, s->buf, 0, 1, 1, 0); /* valid: refused as re-entry */
  atomic_fetch_add(&s->ran, 1);
}

static void buffer_release(void *b) { t4a_buffer_release(b); }

static void test_host_function_order_and_reentry(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  t4a_function *fn = spin_kernel(rt);
  t4a_device_info d;
  CK(t4a_device_query(g_drv, 0, &d));
  t4a_buffer *out = NULL;
  CK(t4a_runtime_buffer(rt, 4096, &out));
  t4a_pinned *pin = NULL;
  CK(t4a_pinned_create(t4a_lane_holder(t4a_runtime_lane(rt)), 4096, 0, &pin));
  volatile unsigned *hw = t4a_pinned_host(pin);
  *hw = 0;
  launch_spin(rt, fn, out, 77, (unsigned long long)d.clock_khz * 20ull); /* ~20 ms */
  /* The kernel's word lands in pinned memory before the function runs. */
  t4a_xfer_pending *dl = NULL;
  CK(t4a_xfer_download_pinned(t4a_runtime_xfer(rt), out, 0, pin, 0, 4, &dl));
  host_seen s = {0};
  s.rt = rt;
  s.buf = out;
  s.host_word = hw;
  t4a_buffer_retain(out);
  t4a_keepalive k = {out, buffer_release, 0};
  CK(t4a_runtime_host_func(rt, NULL, in_host_fn, &s, &k, 1));
  CK(t4a_xfer_pending_wait(dl));
  t4a_xfer_pending_release(dl);
  CK(t4a_runtime_sync(rt));
  assert_int_equal(atomic_load(&s.ran), 1);
  assert_int_equal(s.word, 77);
  assert_int_equal(s.sync, T4A_REENTRY);
  assert_int_equal(s.memset, T4A_REENTRY);
  t4a_pinned_release(pin);
  t4a_buffer_release(out);
  t4a_function_release(fn);
  CK(t4a_runtime_close(rt));
}

static void test_chain_memset_node_update_on_the_driver(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  t4a_launch_table *t = t4a_runtime_table(rt);
  t4a_buffer *b = NULL;
  CK(t4a_runtime_buffer(rt, 1 << 20, &b));
  t4a_event *e0 = NULL, *e1 = NULL;
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &e0));
  CK(t4a_runtime_event(rt, T4A_EVENT_TIMING, &e1));
  CK(t4a_chain_begin(t));
  CK(t4a_runtime_event_record(rt, NULL, e0)); /* external event record nodes */
  uint32_t id = 9;
  CK(t4a_chain_memset(t, b, 0, (1 << 20) / 4, 4, 0x11111111u, &id));
  CK(t4a_runtime_event_record(rt, NULL, e1));
  t4a_chain *c = NULL;
  CK(t4a_chain_end(t, &c));
  assert_int_equal(id, 0);
  uint32_t h[4];
  for (uint32_t v = 1; v <= 5; v++) {
    CK(t4a_chain_set_memset(c, 0, v * 0x01010101u));
    CK(t4a_chain_replay(t, c));
    CK(t4a_runtime_download(rt, b, (1 << 20) - sizeof h, h, sizeof h));
    for (int i = 0; i < 4; i++) assert_int_equal(h[i], v * 0x01010101u);
    float ms = -1;
    t4a_status est = t4a_event_elapsed_ms(e0, e1, &ms);
    printf("everyday_gpu_test: replay %u: elapsed between the chain's event nodes: %s, %.4f ms\n",
           v, t4a_status_name(est), (double)ms);
    CK(est);
    assert_true(ms >= 0);
  }
  t4a_event_release(e0);
  t4a_event_release(e1);
  struct t4a_chain_stats cs;
  t4a_chain_stats(c, &cs);
  assert_int_equal(cs.memset_updates, 5);
  assert_int_equal(cs.reinstantiations, 0);
  t4a_chain_destroy(c);
  t4a_buffer_release(b);
  CK(t4a_runtime_close(rt));
}

static void test_gauges(void **state) {
  (void)state;
  t4a_runtime *rt = open_rt();
  t4a_runtime_memory_info m0, m1;
  CK(t4a_runtime_memory(rt, &m0));
  t4a_buffer *b = NULL;
  size_t bytes = (size_t)256 << 20;
  CK(t4a_runtime_buffer(rt, bytes, &b));
  CK(t4a_runtime_sync(rt));
  CK(t4a_runtime_memory(rt, &m1));
  printf("everyday_gpu_test: device free %.1f -> %.1f MiB of %.1f MiB; in use %llu, reserved "
         "%llu bytes\n",
         (double)m0.device_free_bytes / 1048576.0, (double)m1.device_free_bytes / 1048576.0,
         (double)m1.device_total_bytes / 1048576.0, (unsigned long long)m1.pool.in_use_bytes,
         (unsigned long long)m1.pool.reserved_bytes);
  assert_true(m1.device_total_bytes > bytes);
  assert_true(m0.device_free_bytes - m1.device_free_bytes >= bytes);
  assert_true(m1.pool.in_use_bytes >= bytes);
  assert_true(m1.pool.reserved_bytes >= m1.pool.in_use_bytes);
  assert_int_equal(m1.pool.in_use_blocks, m0.pool.in_use_blocks + 1);
  t4a_buffer_release(b);
  CK(t4a_runtime_close(rt));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elapsed_time_matches_host_time),
      cmocka_unit_test(test_fills_land_exactly),
      cmocka_unit_test(test_host_function_order_and_reentry),
      cmocka_unit_test(test_chain_memset_node_update_on_the_driver),
      cmocka_unit_test(test_gauges),
  };
  return t4a_gpu_test_main("everyday_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
