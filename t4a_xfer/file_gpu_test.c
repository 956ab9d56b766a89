/* t4a_xfer slot and file paths on a real GPU (label: gpu, single). Exits 77 without a driver.
 * A mapped upload of a temporary file (a few MiB, odd offset and size) round trip, byte-exact; a
 * slot upload round trip; and a registered (read-only, device-mapped) range of the file read by
 * the device through its device address (a device-to-device copy from it into a buffer),
 * byte-exact, with the map released while the range holds it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_file.h"
#include "t4a_ctx/driver_table.h"
#include "testing/gpu/gpu_main.h"

#define CK(x) assert_int_equal((x), T4A_OK)

static t4a_driver *g_drv;

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
}

static void download(t4a_xfer *x, t4a_buffer *b, size_t offset, void *dst, size_t n) {
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(x, b, offset, dst, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
}

static void test_file_and_slot_round_trips(void **state) {
  (void)state;
  t4a_lane *lane = NULL;
  t4a_mem_pool *pool = NULL;
  t4a_retire *retire = NULL;
  t4a_xfer *x = NULL;
  CK(t4a_lane_create(g_drv, 0, NULL, &lane));
  CK(t4a_mem_pool_create(lane, NULL, &pool));
  CK(t4a_retire_create(lane, NULL, &retire));
  CK(t4a_xfer_create(retire, NULL, &x));

  /* A temporary file of 5 MiB + 333 bytes. */
  const size_t n = ((size_t)5 << 20) + 333;
  const char *tmp = getenv("TEST_TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/t4a_file_gpu_test.XXXXXX", tmp != NULL ? tmp : "/tmp");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  uint8_t *want = malloc(n), *back = malloc(n);
  assert_non_null(want);
  assert_non_null(back);
  fill(want, n, 3);
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, want + done, n - done);
    assert_true(w > 0);
    done += (size_t)w;
  }
  assert_int_equal(close(fd), 0);

  /* Mapped upload at an odd offset and size, the map released at once. */
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  assert_int_equal(t4a_file_map_size(m), n);
  const size_t off = 12345, len = n - off - 77;
  t4a_buffer *buf = NULL;
  CK(t4a_buffer_create(pool, n + 4096, 0, 0, &buf));
  CK(t4a_xfer_upload_mapped(x, buf, 3, m, off, len));
  t4a_file_map_release(m);
  memset(back, 0, n);
  download(x, buf, 3, back, len);
  assert_memory_equal(back, want + off, len);
  /* The convenience path. */
  CK(t4a_xfer_upload_file(x, buf, 0, path, 1, n - 1));
  download(x, buf, 0, back, n - 1);
  assert_memory_equal(back, want + 1, n - 1);

  /* Slot uploads: each value is read from the slot by its copy; the slot is rewritten only after
   * the previous copy completed (t4a_retire_wait). */
  t4a_slots *slots = NULL;
  CK(t4a_slots_create(t4a_lane_holder(lane), 16, 4, &slots));
  uint32_t idx = 0;
  CK(t4a_slot_acquire(slots, &idx));
  for (uint64_t v = 1; v <= 3; v++) {
    uint64_t value = 0xfeedface00000000ull | v;
    CK(t4a_xfer_slot_upload(x, slots, idx, &value, sizeof value, buf, 8 * v));
    CK(t4a_retire_wait(retire));
  }
  uint64_t got[3];
  download(x, buf, 8, got, sizeof got);
  for (uint64_t v = 1; v <= 3; v++) assert_int_equal(got[v - 1], 0xfeedface00000000ull | v);
  t4a_slot_release(slots, idx);
  t4a_slots_destroy(slots);

  /* A registered range read by the device through its device address. */
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  const size_t reg = (size_t)2 << 20;
  CK(t4a_file_map_open(path, &m));
  t4a_file_range *range = NULL;
  CK(t4a_file_map_register(m, t4a_lane_holder(lane), pg, reg, &range));
  t4a_file_map_release(m); /* the range holds it */
  assert_int_not_equal(t4a_file_range_devptr(range), 0);
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(lane), NULL));
  CK(T4A_CU(g_drv, cuMemcpyDtoDAsync, (CUdeviceptr)t4a_buffer_devptr(buf),
            (CUdeviceptr)t4a_file_range_devptr(range), reg, t4a_lane_stream(lane)));
  CK(t4a_ctx_scope_exit(&scope));
  CK(t4a_lane_synchronize(lane)); /* the copy read the range: it may go now */
  t4a_file_range_release(range);
  memset(back, 0, reg);
  download(x, buf, 0, back, reg);
  assert_memory_equal(back, want + pg, reg);

  t4a_counter_values v;
  t4a_lane_stats(lane, &v);
  assert_int_equal(v.bytes_uploaded, len + (n - 1) + 3 * 8);
  t4a_counter_values dv;
  t4a_driver_stats(g_drv, &dv);
  assert_int_equal(dv.host_registrations, dv.host_unregistrations);
  assert_int_equal(dv.leaked, 0);

  t4a_buffer_release(buf);
  (void)unlink(path);
  free(want);
  free(back);
  t4a_xfer_destroy(x);
  CK(t4a_retire_destroy(retire));
  t4a_mem_pool_release(pool);
  t4a_lane_release(lane);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_file_and_slot_round_trips)};
  return t4a_gpu_test_main("file_gpu_test", tests, sizeof tests / sizeof tests[0], 1, &g_drv);
}
