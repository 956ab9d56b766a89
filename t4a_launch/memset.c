/* Stream-ordered fills of a buffer range (cuMemsetD8/D16/D32Async). See t4a/memset.h. */
#include "t4a/memset.h"

#include "t4a_ctx/ctx_internal.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_launch/launch_internal.h"
#include "t4a_mem/mem_internal.h"

static void buffer_retain_object(void *b) { t4a_buffer_retain(b); }

/* Everything that can be refused without the driver: the element, the value, the range. */
static t4a_status check(t4a_retire *r, const t4a_buffer *b, size_t offset, size_t count,
                        unsigned elem, uint32_t value) {
  if (r == NULL || b == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "retire or buffer is NULL");
  }
  if (elem != 1 && elem != 2 && elem != 4) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a memset element is 1, 2 or 4 bytes (not %u)", elem);
  }
  if (elem < 4 && (value >> (8 * elem)) != 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "value 0x%x does not fit a %u-byte element", value, elem);
  }
  uint64_t domain = t4a_lane_domain(t4a_retire_lane(r));
  if (t4a_buffer_domain(b) != domain) {
    return t4a_error_set_(T4A_FOREIGN_HANDLE, NULL, 0, NULL, 0,
                          "the buffer belongs to allocation domain %llu, the stream to %llu",
                          (unsigned long long)t4a_buffer_domain(b), (unsigned long long)domain);
  }
  if (count == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "a memset of 0 elements");
  }
  if (offset % elem != 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "memset offset %zu is misaligned for %u-byte elements", offset, elem);
  }
  size_t size = t4a_buffer_size(b);
  if (offset > size || count > (size - offset) / elem) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "memset of %zu %u-byte elements at offset %zu runs past the end of the "
                          "%zu-byte buffer",
                          count, elem, offset, size);
  }
  return T4A_OK;
}

t4a_status t4a_memset_enqueue_(t4a_retire *r, t4a_buffer *b, size_t offset, size_t count,
                               unsigned elem, uint32_t value, CUgraphNode *out_node,
                               t4a_status *out_node_status) {
  t4a_status st = check(r, b, offset, count, elem, value);
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(r, 1, &adm)) != T4A_OK) return st;
  t4a_lane *lane = t4a_retire_lane(r);
  t4a_driver *drv = t4a_lane_driver(lane);
  CUstream s = t4a_lane_stream(lane);
  /* A buffer of another stream's pool: this stream waits for its allocation first. */
  if ((st = t4a_buffer_use_on_(b, lane)) != T4A_OK) return t4a_admission_abort(&adm, st);
  CUdeviceptr dst = (CUdeviceptr)t4a_buffer_devptr(b) + offset;
  if (elem == 1) {
    st = T4A_CU(drv, cuMemsetD8Async, dst, (unsigned char)value, count, s);
  } else if (elem == 2) {
    st = T4A_CU(drv, cuMemsetD16Async, dst, (unsigned short)value, count, s);
  } else {
    st = T4A_CU(drv, cuMemsetD32Async, dst, value, count, s);
  }
  if (st != T4A_OK) {
    /* The fill may have been enqueued: the buffer's contents are of unknown state. */
    t4a_buffer_retain(b);
    t4a_keepalive k = {.object = b, .release = t4a_buffer_release_object_};
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  if (out_node != NULL) {
    t4a_error saved;
    t4a_error_last(&saved);
    *out_node_status = t4a_launch_captured_node_(drv, lane, out_node);
    if (*out_node_status == T4A_OK) t4a_error_restore(&saved);
  }
  /* A buffer of another stream's pool is ordered by its marks instead (t4a_buffer_used_on_). */
  if (t4a_buffer_used_on_(b, lane)) {
    t4a_admission_keep_borrowed(
        &adm, (t4a_keepalive){.object = b, .release = t4a_buffer_release_object_},
        buffer_retain_object);
  }
  t4a_counter_add(t4a_lane_counters(lane), T4A_COUNTER_memsets, 1);
  t4a_admission_commit(&adm);
  return T4A_OK;
}

t4a_status t4a_memset(t4a_retire *r, t4a_buffer *b, size_t offset, size_t count,
                      unsigned elem_bytes, uint32_t value) {
  return t4a_memset_enqueue_(r, b, offset, count, elem_bytes, value, NULL, NULL);
}
