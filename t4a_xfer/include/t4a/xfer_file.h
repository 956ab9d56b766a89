/** @file
 * t4a/xfer_file.h — pinned scalar slots uploaded in one call, uploads straight from a mapped
 * file, and zero-copy registration of a mapped file range.
 *
 * Layer: t4a_xfer (this header extends t4a/xfer.h), on t4a_mem and t4a_retire.
 *
 * Slot uploads. t4a_xfer_slot_upload() writes a small value into a mapped pinned slot
 * (t4a_slots, t4a/mem.h) and enqueues one copy from the slot to a device buffer on the lane's
 * stream, as one admission, with no host heap allocation. The copy reads the slot when it RUNS,
 * not when the call returns: the caller may reuse `value` at once, but must not write the slot
 * again (by hand or by another slot upload), release it or destroy its t4a_slots before the copy
 * completed (observed e.g. with t4a_retire_wait). Inside a stream capture on the lane's stream
 * the copy becomes a graph node that records the slot's host address: every replay reads the
 * slot's contents at the time that replay runs, so a caller may rewrite the slot between replays
 * (after the previous replay completed) to feed a new value.
 *   t4a guarantees: the value is in the slot before the copy is enqueued; the copy is ordered on
 *   the lane's stream; the destination buffer is kept alive until the copy (outside capture)
 *   completed.
 *   t4a does not: track whether an earlier copy from the same slot has run (a rewrite changes what
 *   that copy delivers); keep the t4a_slots alive (they are not refcounted); keep anything alive
 *   for a captured graph's replays (the buffer's keepalive covers the capture, not the replays:
 *   the caller keeps the buffer and the slots alive as long as the graph may be launched).
 *
 * File mappings. A t4a_file_map is a refcounted read-only mapping (PROT_READ, MAP_SHARED) of a
 * whole regular file; the last release unmaps it. An empty file gives a map of size 0 (nothing
 * mapped; every range of it is refused). The file must not be truncated while it is mapped: a
 * read of a page beyond the new end raises SIGBUS in whichever thread touches it (the driver's,
 * for an upload) — t4a cannot detect or survive that. Writes to the file by others are seen by
 * the mapping (MAP_SHARED): an upload copies what the file holds when the copy runs.
 *
 * Mapped uploads. t4a_xfer_upload_mapped() enqueues one cuMemcpyHtoDAsync straight from the
 * mapping (no read() into a buffer, no staging ring); the mapping and the buffer are kept alive
 * until the copy completed, so the caller may release the map as soon as the call returns. The
 * mapping is pageable memory: the driver may synchronise the stream before the copy and stages it
 * through its own pinned buffers (page faults on the file are taken by the driver's copy).
 *
 * Registered ranges. t4a_file_map_register() page-locks a page-aligned range of a mapping and
 * maps it into the device address space (cuMemHostRegister with DEVICEMAP | PORTABLE |
 * READ_ONLY, which a PROT_READ mapping needs: docs/design.md §12), for kernels that read the file
 * in place. The
 * range holds a reference to its map; its last release unregisters and then drops that
 * reference. If unregistering fails, the registration and the map reference are leaked (the
 * pages stay mapped and registered, never unmapped under the driver) and counted in the driver's
 * `leaked` (two objects).
 *
 * Thread-safety: every function may be called from any thread; maps and ranges are immutable
 * after creation (retain/release are atomic). Operations on one t4a_xfer serialise on the lane's
 * operation lock. */
#ifndef T4A_XFER_FILE_H_
#define T4A_XFER_FILE_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/mem.h"
#include "t4a/xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pinned slots ---- */

/** Copies `bytes` (1 .. the slot size, t4a_slots_slot_bytes) of `value` into slot `index` of
 * `slots` (acquired with t4a_slot_acquire), then enqueues a copy of those bytes from the slot to
 * `dst` at `dst_offset` on the lane's stream (see the file comment for what the caller must not
 * do until it ran). `dst` is kept alive until the copy completed. No host heap allocation.
 * Statuses: INVALID_ARGUMENT (NULL, 0 bytes or more than the slot holds, an index out of range or
 * not acquired, a range outside the buffer), FOREIGN_HANDLE (a buffer of another lane's domain),
 * REENTRY, LANE_BROKEN, CONTEXT_LOST, DRIVER_ERROR (a copy that failed after it may have been
 * enqueued quarantines `dst`). */
T4A_MUST_USE t4a_status t4a_xfer_slot_upload(t4a_xfer *xfer, t4a_slots *slots, uint32_t index,
                                             const void *value, size_t bytes, t4a_buffer *dst,
                                             size_t dst_offset);

/* ---- file mappings ---- */

/** A regular file mapped read-only and shared. Refcounted, opaque. */
typedef struct t4a_file_map t4a_file_map;

/** Opens `path` (O_RDONLY | O_CLOEXEC | O_NONBLOCK, so a FIFO does not block) and maps the whole
 * regular file read-only and shared; the descriptor is closed again before returning.
 * Statuses: INVALID_ARGUMENT (NULL, not a regular file), IO (open, fstat or mmap failed: the
 * path and errno in the detail), LIMIT_EXCEEDED (larger than the address space),
 * HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status t4a_file_map_open(const char *path, t4a_file_map **out);
/** Adds a reference. Accepts NULL. */
void t4a_file_map_retain(t4a_file_map *map);
/** Drops a reference; the last one unmaps the file. Accepts NULL. */
void t4a_file_map_release(t4a_file_map *map);
/** The file's size in bytes when it was mapped. */
uint64_t t4a_file_map_size(const t4a_file_map *map);
/** The mapping's first byte (NULL for an empty file). Read-only: writing faults. */
const void *t4a_file_map_host(const t4a_file_map *map);
/** The path the map was opened with (a copy, for messages). */
const char *t4a_file_map_path(const t4a_file_map *map);

/** Enqueues a copy of `bytes` (> 0) of the mapping from `map_offset` to `dst` at `dst_offset`,
 * straight from the mapped pages. The map and `dst` are kept alive until the copy completed (the
 * caller may release both at once). Statuses: INVALID_ARGUMENT (NULL, 0 bytes, a range beyond the
 * end of the file — the detail names the file, its size and the range — or outside the buffer,
 * offsets that overflow), FOREIGN_HANDLE, REENTRY, LANE_BROKEN, CONTEXT_LOST, DRIVER_ERROR (a copy
 * that failed after it may have been enqueued quarantines `dst` and the map: both are then held
 * forever, the map never unmapped). */
T4A_MUST_USE t4a_status t4a_xfer_upload_mapped(t4a_xfer *xfer, t4a_buffer *dst, size_t dst_offset,
                                               t4a_file_map *map, uint64_t map_offset,
                                               size_t bytes);

/** Convenience: t4a_file_map_open(path), t4a_xfer_upload_mapped(), release. The buffer is checked
 * before the file is opened. Statuses: those of both. */
T4A_MUST_USE t4a_status t4a_xfer_upload_file(t4a_xfer *xfer, t4a_buffer *dst, size_t dst_offset,
                                             const char *path, uint64_t file_offset,
                                             size_t bytes);

/* ---- registered ranges ---- */

/** A page-locked (registered) range of a file mapping, usable by device work. Refcounted,
 * opaque. */
typedef struct t4a_file_range t4a_file_range;

/** Registers [offset, offset + bytes) of `map` for device access with `holder`'s context active
 * (the holder and the map are retained). `offset` and `bytes` (> 0) must be multiples of the host
 * page size (sysconf(_SC_PAGESIZE)); the range may cover the file's last partial page (the bytes
 * past the end of the file read as zero) but no page beyond it. The device must report
 * CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED. A range overlapping a range already
 * registered in this process is refused by the driver.
 * Statuses: INVALID_ARGUMENT (NULL, 0 bytes, misaligned — the detail names the page size and the
 * offending value — or beyond the mapping), UNSUPPORTED (no read-only registration on this device),
 * DRIVER_ERROR (e.g. CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), HOST_OUT_OF_MEMORY (page-locking
 * ran out), INVALID_CONTEXT, CONTEXT_LOST. */
T4A_MUST_USE t4a_status t4a_file_map_register(t4a_file_map *map, t4a_ctx_holder *holder,
                                              uint64_t offset, size_t bytes,
                                              t4a_file_range **out);
/** Adds a reference. Accepts NULL. */
void t4a_file_range_retain(t4a_file_range *range);
/** Drops a reference; the last one unregisters the range under its holder's context and then
 * drops the map reference (see the file comment for a failed unregistration). The caller must not
 * drop the last reference while device work reading the range may still run: make the range an
 * admission keepalive (whose release calls t4a_file_range_release) instead. Accepts NULL. */
void t4a_file_range_release(t4a_file_range *range);
/** The device address of the range's first byte (valid in every context: PORTABLE). */
t4a_devptr t4a_file_range_devptr(const t4a_file_range *range);
/** The host address of the range's first byte, and its size. */
const void *t4a_file_range_host(const t4a_file_range *range);
size_t t4a_file_range_size(const t4a_file_range *range);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_XFER_FILE_H_ */
