/* A bounds-checked reader of GGUF files (version 2 and 3): header, metadata, tensor table,
 * alignment. It reads a byte range the caller holds (a file mapping) and never reads outside it;
 * a truncated or corrupt file is a typed status with the byte offset where parsing stopped.
 * Public t4a API only (the status vocabulary). */
#ifndef T4A_EXAMPLES_SMOLLM_GGUF_H_
#define T4A_EXAMPLES_SMOLLM_GGUF_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/status.h"

/* What went wrong, where: status, the file offset parsing stopped at (UINT64_MAX: none) and a
 * message naming it. */
typedef struct smol_error {
  t4a_status status;
  uint64_t offset;
  char message[320];
} smol_error;

/* Sets *e (NULL: ignored) and returns status. */
t4a_status smol_error_set(smol_error *e, t4a_status status, uint64_t offset, const char *fmt, ...)
    T4A_PRINTF(4, 5);

/* GGUF metadata value types (the file's numbering). */
typedef enum gguf_vtype {
  GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
  GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11,
  GGUF_F64 = 12, GGUF_VTYPE_COUNT = 13
} gguf_vtype;

/* ggml tensor types this reader knows the sizes of (the file's numbering). */
typedef enum gguf_ttype {
  GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_Q4_0 = 2, GGUF_T_Q4_1 = 3, GGUF_T_Q5_0 = 6,
  GGUF_T_Q5_1 = 7, GGUF_T_Q8_0 = 8, GGUF_T_BF16 = 30
} gguf_ttype;

/* A string inside the file: not NUL-terminated. */
typedef struct gguf_str {
  const char *ptr;
  uint64_t len;
} gguf_str;

typedef struct gguf_kv {
  char *key;            /* NUL-terminated copy */
  gguf_vtype type;
  uint64_t offset;      /* of the value in the file */
  union {
    uint64_t u; /* every unsigned integer and bool */
    int64_t i;  /* every signed integer */
    double f;   /* F32 and F64 */
    gguf_str s;
  } v;
  gguf_vtype elem;      /* ARRAY: element type (never ARRAY: nested arrays are refused) */
  uint64_t count;       /* ARRAY: element count */
  const uint8_t *data;  /* ARRAY: the first element in the file */
} gguf_kv;

typedef struct gguf_tensor {
  char *name;           /* NUL-terminated copy */
  uint32_t n_dims;
  uint64_t ne[4];       /* ne[0] is the contiguous dimension; unused ones are 1 */
  gguf_ttype type;
  uint64_t offset;      /* from the start of the data section (checked aligned) */
  uint64_t file_offset; /* absolute: data_offset + offset */
  uint64_t bytes;
  uint64_t elements;
} gguf_tensor;

typedef struct gguf_file {
  const uint8_t *base;
  uint64_t size;
  uint32_t version;
  uint64_t alignment;
  uint64_t data_offset; /* absolute, aligned */
  uint64_t n_kv, n_tensors;
  gguf_kv *kv;
  gguf_tensor *tensors;
} gguf_file;

/* Parses [data, data + size). On success *out refers to data (kept by the caller) and owns
 * copies of keys and names. Statuses: INVALID_ARGUMENT (NULL, not a GGUF file: bad magic),
 * UNSUPPORTED (version other than 2 or 3, unknown value or tensor type, nested array, more than
 * 4 dimensions), IO (truncated: a read past the end), CACHE_CORRUPT (inconsistent: misaligned or
 * overlapping tensor data, a tensor past the end, a duplicate name, a size that overflows, an
 * alignment that is not a power of two), HOST_OUT_OF_MEMORY. e->offset names where. On failure
 * *out is zeroed and nothing is held. */
T4A_MUST_USE t4a_status gguf_parse(const void *data, uint64_t size, gguf_file *out, smol_error *e);
/* Frees what gguf_parse allocated; accepts a zeroed file. */
void gguf_free(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
/* A STRING array's element i (the array was validated by gguf_parse; walks from the start:
 * use gguf_str_array for all of them). */
T4A_MUST_USE t4a_status gguf_str_array(const gguf_kv *kv, gguf_str *out, uint64_t n);
const char *gguf_ttype_name(uint32_t type);
const char *gguf_vtype_name(uint32_t type);
/* Block size (elements) and bytes per block of a tensor type; 0 if unknown. */
uint32_t gguf_ttype_block(uint32_t type, uint32_t *bytes_per_block);

/* Typed metadata getters: INVALID_ARGUMENT naming the key when missing or of another type. */
T4A_MUST_USE t4a_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out,
                                     smol_error *e);
T4A_MUST_USE t4a_status gguf_get_f32(const gguf_file *f, const char *key, float *out,
                                     smol_error *e);
T4A_MUST_USE t4a_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out,
                                     smol_error *e);

#endif /* T4A_EXAMPLES_SMOLLM_GGUF_H_ */
