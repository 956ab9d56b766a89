/* Pinned slot uploads, file mappings, uploads straight from a mapping and registered file ranges.
 * See t4a/xfer_file.h. */
#define _GNU_SOURCE
#include "t4a/xfer_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t4a/fault.h"
#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_mem/mem_internal.h"
#include "t4a_xfer/xfer_internal.h"

/* A path in a message (the error detail holds 256 bytes): its last 100 bytes, after "...". */
static const char *path_cut(const char *p) { return strlen(p) > 100 ? "..." : ""; }
static const char *path_end(const char *p) {
  size_t n = strlen(p);
  return n > 100 ? p + n - 100 : p;
}

/* ---- pinned slots ---- */

t4a_status t4a_xfer_slot_upload(t4a_xfer *x, t4a_slots *slots, uint32_t index, const void *value,
                                size_t bytes, t4a_buffer *dst, size_t dst_offset) {
  if (x == NULL || slots == NULL || value == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer, slots or value is NULL");
  }
  unsigned char *cell = t4a_slot_host(slots, index);
  size_t cell_bytes = t4a_slots_slot_bytes(slots);
  if (cell == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "slot index %u is out of range",
                          index);
  }
  if (bytes == 0 || bytes > cell_bytes) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a slot upload takes 1..%zu bytes (the slot size), not %zu", cell_bytes,
                          bytes);
  }
  if (!t4a_slot_is_acquired(slots, index)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "slot %u is not acquired (t4a_slot_acquire)", index);
  }
  t4a_status st = t4a_xfer_check_buffer_(x, dst, dst_offset, bytes);
  if (st != T4A_OK) return st;
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 1, &adm)) != T4A_OK) return st;
  if ((st = t4a_buffer_use_on_(dst, x->lane)) != T4A_OK) return t4a_admission_abort(&adm, st);
  /* Written only once nothing can refuse the call any more, so a refused call leaves the slot as
   * it was. The copy reads the cell when it runs (and a captured graph at every replay). */
  memcpy(cell, value, bytes);
  st = T4A_CU(x->driver, cuMemcpyHtoDAsync, (CUdeviceptr)t4a_buffer_devptr(dst) + dst_offset,
              cell, bytes, t4a_lane_stream(x->lane));
  if (st != T4A_OK) {
    t4a_keepalive k = t4a_xfer_buffer_ref_(dst); /* a failed copy may still have been enqueued */
    return t4a_admission_fail(&adm, st, &k, 1);
  }
  t4a_xfer_keep_buffer_(&adm, x->lane, dst);
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

/* ---- file mappings ---- */

struct t4a_file_map {
  atomic_int refs;
  void *base;    /* NULL for an empty file */
  uint64_t size; /* the file's size when mapped */
  char path[];   /* a copy, for messages */
};

t4a_status t4a_file_map_open(const char *path, t4a_file_map **out) {
  if (out == NULL || path == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "path or out is NULL");
  }
  *out = NULL;
  size_t n = strlen(path);
  t4a_file_map *m = t4a_host_malloc(sizeof *m + n + 1);
  if (m == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(m->path, path, n + 1);
  int fd = -1;
  if (t4a_fault_sim(T4A_FAULT_FILE_OPEN)) {
    errno = EIO;
  } else {
    /* O_NONBLOCK: opening a FIFO must not block (it is refused below as not a regular file). */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  }
  if (fd < 0) {
    int err = errno;
    free(m);
    return t4a_error_set_(T4A_IO, "open", err, NULL, 0, "cannot open %s%s: %s", path_cut(path),
                          path_end(path), strerror(err));
  }
  struct stat sb;
  t4a_status st = T4A_OK;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    st = t4a_error_set_(T4A_IO, "fstat", err, NULL, 0, "cannot stat %s%s: %s", path_cut(path),
                        path_end(path), strerror(err));
  } else if (!S_ISREG(sb.st_mode)) {
    st = t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                        "%s%s is not a regular file: only regular files are mapped",
                        path_cut(path), path_end(path));
#if SIZE_MAX < UINT64_MAX
  } else if ((uint64_t)sb.st_size > SIZE_MAX) {
    st = t4a_error_set_(T4A_LIMIT_EXCEEDED, NULL, 0, NULL, (uint64_t)sb.st_size,
                        "%s%s (%llu bytes) is larger than the address space", path_cut(path),
                        path_end(path), (unsigned long long)sb.st_size);
#endif
  }
  void *base = NULL;
  if (st == T4A_OK && sb.st_size > 0) {
    size_t size = (size_t)sb.st_size;
    if (t4a_fault_sim(T4A_FAULT_MMAP)) {
      base = MAP_FAILED;
      errno = ENOMEM;
    } else {
      base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    }
    if (base == MAP_FAILED) {
      int err = errno;
      base = NULL;
      st = t4a_error_set_(err == ENOMEM ? T4A_HOST_OUT_OF_MEMORY : T4A_IO, "mmap", err, NULL,
                          (uint64_t)size, "cannot map %s%s (%zu bytes): %s", path_cut(path),
                          path_end(path), size, strerror(err));
    }
  }
  (void)close(fd); /* the mapping keeps the file; a read-only descriptor has nothing to flush */
  if (st != T4A_OK) {
    free(m);
    return st;
  }
  atomic_init(&m->refs, 1);
  m->base = base;
  m->size = (uint64_t)sb.st_size;
  *out = m;
  return T4A_OK;
}

void t4a_file_map_retain(t4a_file_map *m) {
  if (m != NULL) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void t4a_file_map_release(t4a_file_map *m) {
  if (m == NULL || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  if (m->base != NULL) (void)munmap(m->base, (size_t)m->size); /* records no error detail */
  free(m);
}

static void file_map_release_object(void *m) { t4a_file_map_release(m); }
uint64_t t4a_file_map_size(const t4a_file_map *m) { return m->size; }
const void *t4a_file_map_host(const t4a_file_map *m) { return m->base; }
const char *t4a_file_map_path(const t4a_file_map *m) { return m->path; }

static t4a_keepalive map_ref(t4a_file_map *m) {
  t4a_file_map_retain(m);
  return (t4a_keepalive){m, file_map_release_object, 0};
}

/* ---- uploads from a mapping ---- */

t4a_status t4a_xfer_upload_mapped(t4a_xfer *x, t4a_buffer *dst, size_t dst_offset,
                                  t4a_file_map *map, uint64_t map_offset, size_t bytes) {
  if (x == NULL || map == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer or map is NULL");
  }
  t4a_status st = t4a_xfer_check_buffer_(x, dst, dst_offset, bytes);
  if (st != T4A_OK) return st;
  if (map_offset > map->size || bytes > map->size - map_offset) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "range [%llu, +%zu) is beyond the end of %s%s (%llu bytes)",
                          (unsigned long long)map_offset, bytes, path_cut(map->path),
                          path_end(map->path), (unsigned long long)map->size);
  }
  t4a_admission adm;
  if ((st = t4a_admission_begin(x->retire, 2, &adm)) != T4A_OK) return st;
  if ((st = t4a_buffer_use_on_(dst, x->lane)) != T4A_OK) return t4a_admission_abort(&adm, st);
  /* Straight from the mapped pages: pageable memory, so the driver stages it itself. */
  st = T4A_CU(x->driver, cuMemcpyHtoDAsync, (CUdeviceptr)t4a_buffer_devptr(dst) + dst_offset,
              (const unsigned char *)map->base + map_offset, bytes, t4a_lane_stream(x->lane));
  if (st != T4A_OK) {
    /* The copy may have been enqueued: the buffer and the mapping are held forever. */
    t4a_keepalive k[2] = {t4a_xfer_buffer_ref_(dst), map_ref(map)};
    return t4a_admission_fail(&adm, st, k, 2);
  }
  t4a_xfer_keep_buffer_(&adm, x->lane, dst);
  t4a_admission_keep(&adm, map_ref(map));
  t4a_admission_commit(&adm);
  xfer_count(x, T4A_COUNTER_bytes_uploaded, bytes);
  return T4A_OK;
}

t4a_status t4a_xfer_upload_file(t4a_xfer *x, t4a_buffer *dst, size_t dst_offset, const char *path,
                                uint64_t file_offset, size_t bytes) {
  if (x == NULL || path == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "xfer or path is NULL");
  }
  t4a_status st = t4a_xfer_check_buffer_(x, dst, dst_offset, bytes);
  if (st != T4A_OK) return st;
  t4a_file_map *m = NULL;
  if ((st = t4a_file_map_open(path, &m)) != T4A_OK) return st;
  st = t4a_xfer_upload_mapped(x, dst, dst_offset, m, file_offset, bytes);
  t4a_file_map_release(m); /* the admission holds its own reference */
  return st;
}

/* ---- registered ranges ---- */

/* A t4a_file_range is a t4a_host_registration (read-only, device-mapped) that owns a reference
 * to its map: t4a_mem releases the map only after a successful unregister (t4a_host_register_
 * owned), so a range still registered is never unmapped. The handle types differ only so that
 * callers cannot mix them up. */
static t4a_host_registration *reg_of(const t4a_file_range *r) {
  return (t4a_host_registration *)(uintptr_t)r;
}

static uint64_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (uint64_t)p : 4096;
}

t4a_status t4a_file_map_register(t4a_file_map *map, t4a_ctx_holder *holder, uint64_t offset,
                                 size_t bytes, t4a_file_range **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (map == NULL || holder == NULL || bytes == 0) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "registration needs a map, a holder and at least one page");
  }
  uint64_t page = page_size();
  if (offset % page != 0 || bytes % page != 0) {
    int off_bad = offset % page != 0;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "a registered range must be page-aligned: %s %llu is %llu bytes past a "
                          "multiple of the %llu-byte page size",
                          off_bad ? "offset" : "size",
                          (unsigned long long)(off_bad ? offset : (uint64_t)bytes),
                          (unsigned long long)((off_bad ? offset : (uint64_t)bytes) % page),
                          (unsigned long long)page);
  }
  /* The kernel maps whole pages: the file's last partial page is mapped (zero past the end). */
  uint64_t mapped = map->size % page ? map->size + (page - map->size % page) : map->size;
  if (offset > mapped || bytes > mapped - offset) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0,
                          "range [%llu, +%zu) is beyond the %llu mapped bytes of %s%s "
                          "(%llu-byte file)",
                          (unsigned long long)offset, bytes, (unsigned long long)mapped,
                          path_cut(map->path), path_end(map->path), (unsigned long long)map->size);
  }
  void *host = (unsigned char *)map->base + offset;
  t4a_file_map_retain(map); /* handed to the registration */
  t4a_host_registration *reg = NULL;
  t4a_host_register_options ro = {T4A_HOST_REGISTER_MAPPED | T4A_HOST_REGISTER_READ_ONLY, map,
                                   file_map_release_object};
  t4a_status st = t4a_host_register(holder, host, bytes, &ro, &reg);
  if (st != T4A_OK) return st;
  *out = (t4a_file_range *)(uintptr_t)reg;
  return T4A_OK;
}

void t4a_file_range_retain(t4a_file_range *r) {
  if (r != NULL) t4a_host_registration_retain(reg_of(r));
}

void t4a_file_range_release(t4a_file_range *r) {
  if (r != NULL) t4a_host_registration_release(reg_of(r));
}

t4a_devptr t4a_file_range_devptr(const t4a_file_range *r) {
  return t4a_host_registration_devptr(reg_of(r));
}
const void *t4a_file_range_host(const t4a_file_range *r) {
  return t4a_host_registration_host(reg_of(r));
}
size_t t4a_file_range_size(const t4a_file_range *r) {
  return t4a_host_registration_size(reg_of(r));
}
