/* t4a_xfer slot uploads, file mappings, mapped uploads and registered file ranges on the fake
 * driver: round trips, keepalives, typed errors, no heap allocation per slot upload, capture
 * replays reading the slot, read-only device access to a registered range, failure sweeps. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/ctx.h"
#include "t4a/fault.h"
#include "t4a/mem.h"
#include "t4a/retire.h"
#include "t4a/xfer.h"
#include "t4a/xfer_file.h"
#include "t4a_ctx/driver_table.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/sweep/sweep.h"

#define CHUNK ((size_t)4096)
#define CK(x) assert_int_equal((x), T4A_OK)
#define MAX_FILES 8

typedef t4a_fixture fixture;

/* The fixture's directory and the files a test wrote in it (one fixture at a time). */
static struct {
  size_t page;
  char dir[256];
  char files[MAX_FILES][320];
  int num_files;
} g_tmp;

static void remove_files(void) {
  for (int i = 0; i < g_tmp.num_files; i++) (void)unlink(g_tmp.files[i]);
  (void)rmdir(g_tmp.dir);
}

/* The standard stack (the pool without reuse: the fake's live blocks are exactly the buffers
 * alive) with an xfer of two chunks, and a fresh directory. */
static int setup(void **state) {
  memset(&g_tmp, 0, sizeof g_tmp);
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(g_tmp.dir, sizeof g_tmp.dir, "%s/t4a_file_test.XXXXXX", tmp != NULL ? tmp : "/tmp");
  g_tmp.page = (size_t)sysconf(_SC_PAGESIZE);
  char real[PATH_MAX];
  /* The real path: /proc/self/maps names mapped files by it. */
  if (mkdtemp(g_tmp.dir) == NULL || realpath(g_tmp.dir, real) == NULL ||
      strlen(real) >= sizeof g_tmp.dir) {
    return -1;
  }
  strcpy(g_tmp.dir, real);
  t4a_fixture_options o = t4a_fixture_defaults();
  o.fake.num_devices = 2;
  o.fake.query_policy = T4A_FAKE_QUERY_NEVER; /* nothing runs unless a sync or the test says so */
  o.build |= T4A_FIXTURE_XFER;
  o.xfer.chunk_bytes = CHUNK;
  o.xfer.num_chunks = 2;
  return t4a_fixture_setup(state, &o);
}

/* For the sweep, which leaks on purpose: t4a_retire holds quarantined references (buffers, file
 * maps) forever, and a range whose unregistration failed keeps its map. teardown_counted checks
 * that every object alive in the fake is one t4a counted; for LeakSanitizer these allocations are
 * suppressed by the frames below, and only these. */
__attribute__((noinline)) static int setup_leaky(void **state) {
  int rc = setup(state);
  __asm__ volatile("" ::: "memory");
  return rc;
}
T4A_FIXTURE_DELIBERATE_LEAKS("setup_leaky", "test_failure_sweep")

static int teardown(void **state) {
  int rc = t4a_fixture_teardown(state, T4A_FIXTURE_CHECK_STRICT);
  remove_files();
  return rc;
}

static const char *g_sweep_path; /* a file the sweep maps, written by the sweep test */

/* How many mappings of `path` the process holds (from /proc/self/maps). */
static long mappings_of(const char *path) {
  if (path == NULL) return 0;
  FILE *m = fopen("/proc/self/maps", "r");
  if (m == NULL) return 0;
  char line[1024];
  long n = 0;
  while (fgets(line, sizeof line, m) != NULL) n += strstr(line, path) != NULL;
  fclose(m);
  return n;
}

/* Objects alive beyond what t4a counted as leaked: the fake's, plus every mapping of the sweep's
 * file (a file map that t4a leaked, quarantined or kept under a failed unregistration is counted
 * in `leaked` like any keepalive; one it lost track of is not). */
static long unaccounted(void *user) {
  return t4a_fixture_unaccounted(user, T4A_FIXTURE_LIVE_DEVICE_ALLOCS |
                                           T4A_FIXTURE_LIVE_HOST_ALLOCS | T4A_FIXTURE_LIVE_EVENTS |
                                           T4A_FIXTURE_LIVE_HOST_REGISTRATIONS) +
         mappings_of(g_sweep_path);
}

static int teardown_counted(void **state) {
  int rc = t4a_fixture_teardown_counted(state, unaccounted, 0);
  g_sweep_path = NULL;
  remove_files();
  return rc;
}

static t4a_counter_values counters(fixture *f) {
  t4a_counter_values v;
  t4a_lane_stats(f->lane, &v);
  return v;
}

static t4a_counter_values driver_counters(fixture *f) {
  t4a_counter_values v;
  t4a_driver_stats(f->drv, &v);
  return v;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

/* Writes a file of `n` bytes (pattern `seed`) in the fixture's directory; returns its path and,
 * if want != NULL, a malloc'd copy of its bytes. */
static const char *make_file(const char *name, size_t n, unsigned seed, unsigned char **want) {
  assert_true(g_tmp.num_files < MAX_FILES);
  char *path = g_tmp.files[g_tmp.num_files++];
  snprintf(path, sizeof g_tmp.files[0], "%s/%s", g_tmp.dir, name);
  unsigned char *bytes = malloc(n ? n : 1);
  fill(bytes, n, seed);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, bytes + done, n - done);
    assert_true(w > 0);
    done += (size_t)w;
  }
  assert_int_equal(close(fd), 0);
  if (want != NULL) {
    *want = bytes;
  } else {
    free(bytes);
  }
  return path;
}

/* Whether the process has `path` mapped. */
static int is_mapped(const char *path) { return mappings_of(path) > 0; }

static t4a_buffer *buffer(fixture *f, size_t bytes) {
  t4a_buffer *b = NULL;
  CK(t4a_buffer_create(f->pool, bytes, 0, 0, &b));
  return b;
}

static unsigned char *device_view(fixture *f, t4a_buffer *b) {
  return t4a_fake_host_view(f->fake, (CUdeviceptr)t4a_buffer_devptr(b), t4a_buffer_size(b));
}

static void download_and_check(fixture *f, t4a_buffer *b, size_t offset, const void *want,
                               size_t n) {
  unsigned char *back = malloc(n);
  memset(back, 0, n);
  t4a_xfer_pending *p = NULL;
  CK(t4a_xfer_download(f->xfer, b, offset, back, n, &p));
  CK(t4a_xfer_pending_wait(p));
  t4a_xfer_pending_release(p);
  assert_memory_equal(back, want, n);
  free(back);
}

static void assert_detail_has(t4a_status want, const char *a, const char *b) {
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.status, want);
  if (a != NULL && strstr(e.message, a) == NULL) fail_msg("'%s' not in '%s'", a, e.message);
  if (b != NULL && strstr(e.message, b) == NULL) fail_msg("'%s' not in '%s'", b, e.message);
}

/* ---- file mappings and mapped uploads ---- */

static void test_mapped_round_trip_and_keepalive(void **state) {
  fixture *f = *state;
  const size_t n = 3 * g_tmp.page + 123; /* odd size, several ring chunks' worth */
  unsigned char *want = NULL;
  const char *path = make_file("data.bin", n, 1, &want);
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  assert_int_equal(t4a_file_map_size(m), n);
  assert_memory_equal(t4a_file_map_host(m), want, n);
  assert_string_equal(t4a_file_map_path(m), path);
  assert_true(is_mapped(path));
  const size_t off = 17, len = n - 17 - 5, dst_off = 33;
  t4a_buffer *b = buffer(f, len + 64);
  uint64_t hd = t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync");
  uint64_t events = counters(f).events_recorded;
  CK(t4a_xfer_upload_mapped(f->xfer, b, dst_off, m, off, len));
  /* Straight from the mapping: one copy, no staging chunk, no event. */
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), hd + 1);
  assert_int_equal(counters(f).events_recorded, events);
  assert_int_equal(counters(f).bytes_uploaded, len);
  t4a_file_map_release(m); /* at once: the admission keeps the mapping until the copy ran */
  assert_true(t4a_fake_pending(f->fake, NULL) > 0); /* nothing ran yet */
  assert_true(is_mapped(path));
  struct t4a_retire_stats rs;
  t4a_retire_stats(f->retire, &rs);
  assert_int_equal(rs.open_keepalives, 2); /* the buffer and the map */
  download_and_check(f, b, dst_off, want + off, len);
  t4a_buffer_release(b);
  CK(t4a_retire_wait(f->retire)); /* the copy's epoch completes: the last map reference goes */
  assert_false(is_mapped(path));
  free(want);
}

static void test_upload_file_and_open_errors(void **state) {
  fixture *f = *state;
  const size_t n = 5000;
  unsigned char *want = NULL;
  const char *path = make_file("conv.bin", n, 2, &want);
  t4a_buffer *b = buffer(f, n);
  CK(t4a_xfer_upload_file(f->xfer, b, 0, path, 1000, 4000));
  assert_true(is_mapped(path)); /* the upload's admission holds the mapping */
  download_and_check(f, b, 0, want + 1000, 4000);
  CK(t4a_retire_wait(f->retire));
  assert_false(is_mapped(path));

  char missing[400];
  snprintf(missing, sizeof missing, "%s/no-such-file", g_tmp.dir);
  assert_int_equal(t4a_xfer_upload_file(f->xfer, b, 0, missing, 0, 1), T4A_IO);
  assert_detail_has(T4A_IO, "no-such-file", "No such file");
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "open");
  assert_int_equal(e.code, ENOENT);
  t4a_file_map *m = NULL;
  assert_int_equal(t4a_file_map_open(g_tmp.dir, &m), T4A_INVALID_ARGUMENT); /* a directory */
  assert_detail_has(T4A_INVALID_ARGUMENT, "not a regular file", NULL);
  assert_null(m);
  /* A FIFO is refused without blocking. */
  char fifo[400];
  snprintf(fifo, sizeof fifo, "%s/fifo", g_tmp.dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(t4a_file_map_open(fifo, &m), T4A_INVALID_ARGUMENT);
  assert_null(m);
  (void)unlink(fifo);
  assert_int_equal(t4a_file_map_open(NULL, &m), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_file_map_open(path, NULL), T4A_INVALID_ARGUMENT);
  /* The buffer is checked before the file is opened: no open of a missing file is attempted. */
  assert_int_equal(t4a_xfer_upload_file(f->xfer, b, n, missing, 0, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_file(f->xfer, b, 0, path, 4000, 1001), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "5000 bytes", "[4000, +1001)");
  assert_false(is_mapped(path)); /* a refused upload released its mapping */
  t4a_buffer_release(b);
  free(want);
}

static void test_empty_file(void **state) {
  fixture *f = *state;
  const char *path = make_file("empty.bin", 0, 0, NULL);
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  assert_int_equal(t4a_file_map_size(m), 0);
  assert_null(t4a_file_map_host(m));
  t4a_buffer *b = buffer(f, 64);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, 0, 1), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "(0 bytes)", NULL);
  t4a_file_range *r = NULL;
  assert_int_equal(t4a_file_map_register(m, t4a_lane_holder(f->lane), 0, g_tmp.page, &r),
                   T4A_INVALID_ARGUMENT);
  assert_null(r);
  t4a_file_map_retain(m);
  t4a_file_map_release(m);
  t4a_file_map_release(m);
  t4a_file_map_release(NULL);
  t4a_buffer_release(b);
  assert_int_equal(counters(f).admissions, 0);
}

static void test_mapped_range_errors(void **state) {
  fixture *f = *state;
  const char *path = make_file("short.bin", 1000, 3, NULL);
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  t4a_buffer *b = buffer(f, 4096);
  /* A short file: the detail names the file, its size and the range asked for. */
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, 900, 200), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "[900, +200)", "1000 bytes");
  assert_detail_has(T4A_INVALID_ARGUMENT, "short.bin", NULL);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, 2000, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, UINT64_MAX, 2), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, 1, SIZE_MAX), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, m, 0, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 0, NULL, 0, 1), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(NULL, b, 0, m, 0, 1), T4A_INVALID_ARGUMENT);
  /* The buffer's range, overflow-safe. */
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, 4000, m, 0, 100), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, b, SIZE_MAX, m, 0, 2), T4A_INVALID_ARGUMENT);
  /* A buffer of another domain. */
  t4a_lane *other = NULL;
  t4a_mem_pool *op = NULL;
  t4a_buffer *ob = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &other));
  CK(t4a_mem_pool_create(other, NULL, &op));
  CK(t4a_buffer_create(op, 4096, 0, 0, &ob));
  assert_int_equal(t4a_xfer_upload_mapped(f->xfer, ob, 0, m, 0, 16), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_xfer_upload_file(f->xfer, ob, 0, path, 0, 16), T4A_FOREIGN_HANDLE);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), 0);
  assert_int_equal(counters(f).admissions, 0);
  /* The whole file is fine. */
  CK(t4a_xfer_upload_mapped(f->xfer, b, 96, m, 0, 1000));
  t4a_file_map_release(m);
  t4a_fake_progress(f->fake);
  unsigned char want[1000];
  fill(want, sizeof want, 3);
  assert_memory_equal(device_view(f, b) + 96, want, sizeof want);
  t4a_buffer_release(ob);
  t4a_mem_pool_release(op);
  t4a_lane_release(other);
  t4a_buffer_release(b);
}

/* ---- slot uploads ---- */

static void test_slot_upload_round_trip(void **state) {
  fixture *f = *state;
  t4a_slots *s = NULL;
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 16, 4, &s));
  assert_int_equal(t4a_slots_slot_bytes(s), 64); /* rounded to a cache line */
  uint32_t idx = 0;
  CK(t4a_slot_acquire(s, &idx));
  assert_true(t4a_slot_is_acquired(s, idx));
  t4a_buffer *b = buffer(f, 256);
  uint64_t value = 0x1122334455667788ull;
  CK(t4a_xfer_slot_upload(f->xfer, s, idx, &value, sizeof value, b, 8));
  assert_memory_equal(t4a_slot_host(s, idx), &value, sizeof value); /* in the slot already */
  uint64_t want = value;
  value = 0; /* the caller's value may be reused at once */
  assert_true(t4a_fake_pending(f->fake, NULL) > 0);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b) + 8, &want, sizeof want);
  assert_int_equal(counters(f).bytes_uploaded, sizeof want);
  /* The copy reads the slot when it runs (the contract the caller must respect): a rewrite of
   * the slot before the copy ran changes what it delivers. */
  uint32_t a = 0xAAAAAAAAu, c = 0xCCCCCCCCu;
  CK(t4a_xfer_slot_upload(f->xfer, s, idx, &a, sizeof a, b, 64));
  memcpy(t4a_slot_host(s, idx), &c, sizeof c);
  t4a_fake_progress(f->fake);
  assert_memory_equal(device_view(f, b) + 64, &c, sizeof c);
  /* The whole slot. */
  unsigned char big[64];
  fill(big, sizeof big, 4);
  CK(t4a_xfer_slot_upload(f->xfer, s, idx, big, sizeof big, b, 192));
  CK(t4a_retire_wait(f->retire));
  assert_memory_equal(device_view(f, b) + 192, big, sizeof big);
  t4a_buffer_release(b); /* the keepalive went with the wait: the block is freed now */
  t4a_slot_release(s, idx);
  assert_false(t4a_slot_is_acquired(s, idx));
  t4a_slots_destroy(s);
}

static int count_mallocs(t4a_fault_point p, void *user) {
  if (p == T4A_FAULT_HOST_MALLOC) ++*(int *)user;
  return 0; /* never fails: only counts */
}

static void test_slot_upload_allocates_nothing(void **state) {
  fixture *f = *state;
  t4a_slots *s = NULL;
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 8, 2, &s));
  uint32_t idx = 0;
  CK(t4a_slot_acquire(s, &idx));
  t4a_buffer *b = buffer(f, 1024);
  uint32_t v = 0;
  /* Warms the open epoch's keepalive storage (an admission into a fresh epoch sizes it). */
  CK(t4a_xfer_slot_upload(f->xfer, s, idx, &v, sizeof v, b, 0));
  t4a_fake_progress(f->fake);
  t4a_fake_reset_calls(f->fake);
  int mallocs = 0;
  t4a_fault_set_hook(count_mallocs, &mallocs);
  t4a_status st = T4A_OK;
  for (uint32_t i = 1; i <= 100 && st == T4A_OK; i++) {
    v = i;
    st = t4a_xfer_slot_upload(f->xfer, s, idx, &v, sizeof v, b, (i % 4) * 4);
    t4a_fake_progress(f->fake); /* the copy runs before the slot is rewritten */
  }
  t4a_fault_set_hook(NULL, NULL);
  CK(st);
  /* The counter works: one t4a host allocation is seen. */
  int probe = 0;
  t4a_fault_set_hook(count_mallocs, &probe);
  free(t4a_host_malloc(8));
  t4a_fault_set_hook(NULL, NULL);
  assert_int_equal(probe, 1);
  assert_int_equal(mallocs, 0);
  /* One driver call per upload: the copy. No event, no pinned allocation. */
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), 100);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventCreate"), 0);
  assert_int_equal(t4a_fake_calls(f->fake, "cuEventRecord"), 0);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostAlloc"), 0);
  const uint32_t *dev = (const uint32_t *)device_view(f, b);
  assert_int_equal(dev[0], 100);
  assert_int_equal(dev[1], 97);
  assert_int_equal(dev[2], 98);
  assert_int_equal(dev[3], 99);
  struct t4a_retire_stats rs;
  t4a_retire_stats(f->retire, &rs);
  assert_int_equal(rs.open_keepalives, 1); /* the same buffer, deduplicated */
  t4a_buffer_release(b);
  CK(t4a_retire_wait(f->retire));
  t4a_slot_release(s, idx);
  t4a_slots_destroy(s);
}

static void test_slot_upload_errors(void **state) {
  fixture *f = *state;
  t4a_slots *s = NULL;
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 32, 2, &s));
  uint32_t idx = 0;
  CK(t4a_slot_acquire(s, &idx));
  memset(t4a_slot_host(s, idx), 0x5A, 64);
  t4a_buffer *b = buffer(f, 128);
  unsigned char v[80];
  memset(v, 0x11, sizeof v);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 65, b, 0), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "1..64 bytes", "not 65");
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 0, b, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, 2, v, 4, b, 0), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "out of range", NULL);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, 1 - idx, v, 4, b, 0), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "not acquired", NULL);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, NULL, 4, b, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, NULL, idx, v, 4, b, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(NULL, s, idx, v, 4, b, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 4, NULL, 0), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 64, b, 65), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 4, b, SIZE_MAX), T4A_INVALID_ARGUMENT);
  t4a_lane *other = NULL;
  t4a_mem_pool *op = NULL;
  t4a_buffer *ob = NULL;
  CK(t4a_lane_create(f->drv, 0, NULL, &other));
  CK(t4a_mem_pool_create(other, NULL, &op));
  CK(t4a_buffer_create(op, 128, 0, 0, &ob));
  assert_int_equal(t4a_xfer_slot_upload(f->xfer, s, idx, v, 4, ob, 0), T4A_FOREIGN_HANDLE);
  /* A refused call leaves the slot untouched and enqueues nothing. */
  const unsigned char *cell = t4a_slot_host(s, idx);
  for (int i = 0; i < 64; i++) assert_int_equal(cell[i], 0x5A);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemcpyHtoDAsync"), 0);
  assert_int_equal(counters(f).admissions, 0);
  t4a_buffer_release(ob);
  t4a_mem_pool_release(op);
  t4a_lane_release(other);
  t4a_buffer_release(b);
  t4a_slot_release(s, idx);
  t4a_slots_destroy(s);
}

/* Inside a capture on the lane's stream the copy is a graph node reading the slot's host
 * address: every replay reads what the slot holds when it runs. */
static void test_slot_upload_under_capture_replays_read_the_slot(void **state) {
  fixture *f = *state;
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  t4a_slots *s = NULL;
  CK(t4a_slots_create(t4a_lane_holder(f->lane), 8, 1, &s));
  uint32_t idx = 0;
  CK(t4a_slot_acquire(s, &idx));
  t4a_buffer *b = buffer(f, 64);
  t4a_fake_progress(f->fake); /* the buffer's allocation ran: nothing pending before capture */
  CUstream stream = t4a_lane_stream(f->lane);
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, t4a_lane_holder(f->lane), NULL));
  assert_int_equal(t->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  uint64_t first = 1;
  CK(t4a_xfer_slot_upload(f->xfer, s, idx, &first, sizeof first, b, 16));
  CUgraph g = NULL;
  assert_int_equal(t->cuStreamEndCapture(stream, &g), CUDA_SUCCESS);
  assert_int_equal(t4a_fake_pending(f->fake, stream), 0); /* captured, not queued */
  CUgraphExec ge = NULL;
  assert_int_equal(t->cuGraphInstantiateWithFlags(&ge, g, 0), CUDA_SUCCESS);
  uint64_t *cell = t4a_slot_host(s, idx);
  for (uint64_t v = 41; v < 44; v++) {
    *cell = v; /* the previous replay completed (synchronised below) */
    assert_int_equal(t->cuGraphLaunch(ge, stream), CUDA_SUCCESS);
    assert_int_equal(t->cuStreamSynchronize(stream), CUDA_SUCCESS);
    uint64_t got;
    memcpy(&got, device_view(f, b) + 16, sizeof got);
    assert_int_equal(got, v);
  }
  assert_int_equal(t->cuGraphExecDestroy(ge), CUDA_SUCCESS);
  assert_int_equal(t->cuGraphDestroy(g), CUDA_SUCCESS);
  t4a_ctx_scope_exit_quiet(&scope);
  CK(t4a_retire_wait(f->retire));
  t4a_buffer_release(b);
  t4a_slot_release(s, idx);
  t4a_slots_destroy(s);
}

/* ---- registered ranges ---- */

static void test_registered_range(void **state) {
  fixture *f = *state;
  const size_t pg = g_tmp.page, n = 4 * pg + 100; /* the last page is partial */
  unsigned char *want = NULL;
  const char *path = make_file("reg.bin", n, 5, &want);
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_counter_values before = driver_counters(f);
  t4a_file_range *r = NULL, *tail = NULL;
  CK(t4a_file_map_register(m, h, pg, 2 * pg, &r));
  CK(t4a_file_map_register(m, h, 4 * pg, pg, &tail)); /* the partial last page */
  assert_ptr_equal(t4a_file_range_host(r), (const unsigned char *)t4a_file_map_host(m) + pg);
  assert_int_equal(t4a_file_range_size(r), 2 * pg);
  assert_int_not_equal(t4a_file_range_devptr(r), 0);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.host_registrations, 2);
  t4a_file_map_release(m); /* the ranges hold the map */
  assert_true(is_mapped(path));

  /* The device reads the file through the range's device address. */
  const t4a_driver_table *t = t4a_fake_table(f->fake);
  CUstream stream = t4a_lane_stream(f->lane);
  unsigned char *back = calloc(1, 2 * pg);
  t4a_ctx_scope scope;
  CK(t4a_ctx_scope_enter(&scope, h, NULL));
  assert_int_equal(t->cuMemcpyDtoHAsync(back, (CUdeviceptr)t4a_file_range_devptr(r), 2 * pg,
                                        stream),
                   CUDA_SUCCESS);
  assert_int_equal(t->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_memory_equal(back, want + pg, 2 * pg);
  memset(back, 0xFF, pg);
  assert_int_equal(
      t->cuMemcpyDtoHAsync(back, (CUdeviceptr)t4a_file_range_devptr(tail), pg, stream),
      CUDA_SUCCESS);
  assert_int_equal(t->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_memory_equal(back, want + 4 * pg, 100);
  for (size_t i = 100; i < pg; i++) assert_int_equal(back[i], 0); /* past the end of the file */
  t4a_ctx_scope_exit_quiet(&scope);

  /* Read-only: a device write through the range faults (on device 1, which the fixture does
   * not use, so the fault stays there), while a read from there works. */
  CUcontext c1 = NULL;
  assert_int_equal(t->cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
  assert_int_equal(t->cuCtxSetCurrent(c1), CUDA_SUCCESS);
  memset(back, 0, pg);
  assert_int_equal(t->cuMemcpyDtoHAsync(back, (CUdeviceptr)t4a_file_range_devptr(r), pg, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_memory_equal(back, want + pg, pg);
  assert_int_equal(t->cuMemcpyHtoDAsync((CUdeviceptr)t4a_file_range_devptr(r), back, 16, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(t->cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_memory_equal(t4a_file_range_host(r), want + pg, pg); /* unchanged */
  assert_int_equal(t->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
  assert_int_equal(t->cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);

  /* A retained range stays registered until its last release. */
  t4a_file_range_retain(r);
  t4a_file_range_release(r);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.host_registrations, 2);
  t4a_file_range_release(tail);
  t4a_file_range_release(r);
  t4a_file_range_release(NULL);
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.host_registrations, 0);
  assert_false(is_mapped(path)); /* the last range dropped the last map reference */
  t4a_counter_values after = driver_counters(f);
  assert_int_equal(after.host_registrations - before.host_registrations, 2);
  assert_int_equal(after.host_unregistrations - before.host_unregistrations, 2);
  assert_int_equal(after.leaked, before.leaked);
  free(back);
  free(want);
}

static void test_register_errors(void **state) {
  fixture *f = *state;
  const size_t pg = g_tmp.page;
  const char *path = make_file("reg_err.bin", 3 * pg + 1, 6, NULL);
  t4a_file_map *m = NULL;
  CK(t4a_file_map_open(path, &m));
  t4a_ctx_holder *h = t4a_lane_holder(f->lane);
  t4a_file_range *r = NULL;
  assert_int_equal(t4a_file_map_register(m, h, 100, pg, &r), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "offset 100 is 100 bytes past", "page size");
  assert_int_equal(t4a_file_map_register(m, h, pg, pg + 8, &r), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "size", "8 bytes past");
  assert_int_equal(t4a_file_map_register(m, h, 0, 0, &r), T4A_INVALID_ARGUMENT);
  /* Beyond the mapping: 3 pages + 1 byte map 4 pages. */
  assert_int_equal(t4a_file_map_register(m, h, 4 * pg, pg, &r), T4A_INVALID_ARGUMENT);
  assert_detail_has(T4A_INVALID_ARGUMENT, "beyond", "reg_err.bin");
  assert_int_equal(t4a_file_map_register(m, h, 2 * pg, 3 * pg, &r), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_file_map_register(m, h, UINT64_MAX - pg + 1, pg, &r),
                   T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_file_map_register(NULL, h, 0, pg, &r), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_file_map_register(m, NULL, 0, pg, &r), T4A_INVALID_ARGUMENT);
  assert_int_equal(t4a_file_map_register(m, h, 0, pg, NULL), T4A_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(t4a_fake_calls(f->fake, "cuMemHostRegister"), 0);
  /* An overlapping registration is the driver's refusal, typed, and leaves nothing behind. */
  t4a_file_range *a = NULL;
  CK(t4a_file_map_register(m, h, 0, 2 * pg, &a));
  assert_int_equal(t4a_file_map_register(m, h, pg, pg, &r), T4A_DRIVER_ERROR);
  t4a_error e;
  t4a_error_last(&e);
  assert_int_equal(e.code, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  assert_string_equal(e.entry, "cuMemHostRegister");
  assert_null(r);
  t4a_file_range_release(a);
  /* The whole mapping, last partial page included. */
  CK(t4a_file_map_register(m, h, 0, 4 * pg, &r));
  t4a_file_range_release(r);
  t4a_file_map_release(m);
  t4a_fake_live live;
  t4a_fake_live_objects(f->fake, &live);
  assert_int_equal(live.host_registrations, 0);
  assert_false(is_mapped(path));
}

/* ---- failure sweeps ---- */

#define SWEEP_N ((size_t)2 * 4096 + 77)

static t4a_status op_all(void *user) {
  fixture *f = user;
  static unsigned char want[SWEEP_N], back[SWEEP_N];
  fill(want, SWEEP_N, 7);
  memset(back, 0, SWEEP_N);
  t4a_retire *r = NULL;
  t4a_xfer *x = NULL;
  t4a_buffer *b = NULL;
  t4a_file_map *m = NULL;
  t4a_slots *s = NULL;
  t4a_file_range *range = NULL;
  t4a_xfer_pending *p = NULL;
  t4a_xfer_options xo = T4A_XFER_OPTIONS_INIT;
  xo.chunk_bytes = CHUNK;
  xo.num_chunks = 2;
  uint32_t idx = 0;
  uint64_t value = 0x0123456789abcdefull;
  t4a_status st = t4a_retire_create(f->lane, NULL, &r);
  if (st == T4A_OK) st = t4a_xfer_create(r, &xo, &x);
  if (st == T4A_OK) st = t4a_buffer_create(f->pool, SWEEP_N + 64, 0, 0, &b);
  if (st == T4A_OK) st = t4a_file_map_open(g_sweep_path, &m);
  if (st == T4A_OK) st = t4a_xfer_upload_mapped(x, b, 0, m, 0, SWEEP_N);
  t4a_file_map_release(m); /* the upload keeps it */
  m = NULL;
  if (st == T4A_OK) st = t4a_slots_create(t4a_lane_holder(f->lane), 8, 1, &s);
  if (st == T4A_OK) st = t4a_slot_acquire(s, &idx);
  if (st == T4A_OK) st = t4a_xfer_slot_upload(x, s, idx, &value, sizeof value, b, SWEEP_N);
  if (st == T4A_OK) st = t4a_xfer_download(x, b, 0, back, SWEEP_N, &p);
  if (st == T4A_OK) st = t4a_xfer_pending_wait(p);
  if (st == T4A_OK && memcmp(want, back, SWEEP_N) != 0) st = T4A_INTERNAL;
  if (st == T4A_OK) st = t4a_xfer_upload_file(x, b, 1, g_sweep_path, 5, 100);
  if (st == T4A_OK) st = t4a_file_map_open(g_sweep_path, &m);
  if (st == T4A_OK) st = t4a_file_map_register(m, t4a_lane_holder(f->lane), 0, g_tmp.page, &range);
  t4a_file_map_release(m);
  if (st == T4A_OK && memcmp(t4a_file_range_host(range), want, 4096) != 0) st = T4A_INTERNAL;
  t4a_file_range_release(range);
  t4a_xfer_pending_release(p);
  t4a_buffer_release(b);
  t4a_xfer_destroy(x);
  t4a_status dst_st = t4a_retire_destroy(r);
  if (st == T4A_OK) st = dst_st;
  /* The slot may be read by a copy (queued even by a failed call) until the stream drained. The
   * sweep fails one call at most, so a second synchronisation succeeds if the first did not. */
  t4a_status sync_st = t4a_lane_synchronize(f->lane);
  if (sync_st != T4A_OK) {
    if (st == T4A_OK) st = sync_st;
    sync_st = t4a_lane_synchronize(f->lane);
  }
  if (sync_st == T4A_OK) {
    t4a_slots_destroy(s);
  } else if (s != NULL) {
    fail_msg("the lane could not be synchronised twice: the slots would be freed under a copy");
  }
  return st;
}

static void test_failure_sweep(void **state) {
  fixture *f = *state;
  unsigned char *want = NULL;
  g_sweep_path = make_file("sweep.bin", SWEEP_N, 7, &want);
  free(want);
  t4a_sweep s = {.name = "xfer_file", .fake = f->fake, .op = op_all, .unaccounted = unaccounted,
                 .user = f};
  /* The ring pins each chunk when it first hands it out (xfer.c: chunk_pin): a two-chunk upload
   * pins both, so that the baseline holds its 2 chunks and 2 events. */
  t4a_buffer *pb = NULL;
  unsigned char *zeros = calloc(1, 2 * CHUNK);
  assert_non_null(zeros);
  CK(t4a_buffer_create(f->pool, 2 * CHUNK, 0, 0, &pb));
  CK(t4a_xfer_upload(f->xfer, pb, 0, zeros, 2 * CHUNK));
  CK(t4a_lane_synchronize(f->lane));
  t4a_buffer_release(pb);
  free(zeros);
  f->baseline = unaccounted(f); /* the ring's 2 chunks and 2 events, pb's block in the pool */
  assert_int_equal(f->baseline, 5);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) > 10);
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_INVALID_VALUE, T4A_DRIVER_ERROR) > 10);
  /* The copy is enqueued but reported failed: typed, the buffer (and the map) quarantined. */
  s.after_enqueue = 1;
  s.entry = "cuMemcpyHtoDAsync";
  assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 3);
  s.entry = NULL;
  s.after_enqueue = 0;
  /* Every registration step, and the unregistration (leaked and counted, the map kept). */
  const char *entries[] = {"cuDeviceGetAttribute", "cuMemHostRegister",
                           "cuMemHostGetDevicePointer"};
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    s.entry = entries[i];
    assert_true(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR) >= 1);
  }
  t4a_counter_values before = driver_counters(f);
  s.entry = "cuMemHostUnregister";
  assert_int_equal(t4a_sweep_driver(&s, CUDA_ERROR_UNKNOWN, T4A_DRIVER_ERROR), 0); /* absorbed */
  assert_true(driver_counters(f).leaked > before.leaked);
  s.entry = NULL;
  const t4a_status oom[] = {T4A_HOST_OUT_OF_MEMORY};
  assert_true(t4a_sweep_fault(&s, T4A_FAULT_HOST_MALLOC, oom, 1) > 5);
  const t4a_status io[] = {T4A_IO};
  /* Three opens: the map, the convenience upload, the map to register. */
  assert_int_equal(t4a_sweep_fault(&s, T4A_FAULT_FILE_OPEN, io, 1), 3);
  assert_int_equal(t4a_sweep_fault(&s, T4A_FAULT_MMAP, oom, 1), 3);
  assert_int_equal(t4a_fake_ordering_violations(f->fake), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_mapped_round_trip_and_keepalive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upload_file_and_open_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mapped_range_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_upload_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_upload_allocates_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_upload_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_upload_under_capture_replays_read_the_slot, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_registered_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_register_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_sweep, setup_leaky, teardown_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
