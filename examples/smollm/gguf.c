/* The GGUF reader (see gguf.h). Every read goes through cursor_take, which refuses a read past
 * the end with IO naming the offset and what was being read. */
#include "examples/smollm/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

t4a_status smol_error_set(smol_error *e, t4a_status status, uint64_t offset, const char *fmt,
                          ...) {
  if (e == NULL) return status;
  e->status = status;
  e->offset = offset;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return status;
}

typedef struct cursor {
  const uint8_t *base;
  uint64_t size, pos;
  smol_error *e;
} cursor;

static t4a_status cursor_take(cursor *c, uint64_t n, const char *what, const uint8_t **out) {
  if (n > c->size - c->pos)
    return smol_error_set(c->e, T4A_IO, c->pos,
                          "GGUF truncated at offset %llu: %s needs %llu bytes, %llu left",
                          (unsigned long long)c->pos, what, (unsigned long long)n,
                          (unsigned long long)(c->size - c->pos));
  *out = c->base + c->pos;
  c->pos += n;
  return T4A_OK;
}

static t4a_status read_u32(cursor *c, const char *what, uint32_t *v) {
  const uint8_t *p = NULL;
  t4a_status st = cursor_take(c, 4, what, &p);
  if (st == T4A_OK) memcpy(v, p, 4); /* GGUF is little-endian, as x86-64 */
  return st;
}

static t4a_status read_u64(cursor *c, const char *what, uint64_t *v) {
  const uint8_t *p = NULL;
  t4a_status st = cursor_take(c, 8, what, &p);
  if (st == T4A_OK) memcpy(v, p, 8);
  return st;
}

static t4a_status read_str(cursor *c, const char *what, gguf_str *s) {
  uint64_t len;
  t4a_status st = read_u64(c, what, &len);
  const uint8_t *p = NULL;
  if (st == T4A_OK) st = cursor_take(c, len, what, &p);
  if (st != T4A_OK) return st;
  s->ptr = (const char *)p;
  s->len = len;
  return T4A_OK;
}

static char *str_dup(gguf_str s) {
  char *d = malloc((size_t)s.len + 1);
  if (d == NULL) return NULL;
  memcpy(d, s.ptr, (size_t)s.len);
  d[s.len] = '\0';
  return d;
}

static const uint32_t k_vsize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_vtype_name(uint32_t type) {
  static const char *const names[GGUF_VTYPE_COUNT] = {"u8",  "i8",     "u16",   "i16", "u32",
                                                      "i32", "f32",    "bool",  "string",
                                                      "array", "u64",  "i64",   "f64"};
  return type < GGUF_VTYPE_COUNT ? names[type] : "unknown";
}

uint32_t gguf_ttype_block(uint32_t type, uint32_t *bytes_per_block) {
  uint32_t block = 0, bytes = 0;
  switch (type) {
    case GGUF_T_F32: block = 1, bytes = 4; break;
    case GGUF_T_F16: case GGUF_T_BF16: block = 1, bytes = 2; break;
    case GGUF_T_Q4_0: block = 32, bytes = 18; break;
    case GGUF_T_Q4_1: block = 32, bytes = 20; break;
    case GGUF_T_Q5_0: block = 32, bytes = 22; break;
    case GGUF_T_Q5_1: block = 32, bytes = 24; break;
    case GGUF_T_Q8_0: block = 32, bytes = 34; break;
    default: break;
  }
  if (bytes_per_block != NULL) *bytes_per_block = bytes;
  return block;
}

const char *gguf_ttype_name(uint32_t type) {
  switch (type) {
    case GGUF_T_F32: return "F32";
    case GGUF_T_F16: return "F16";
    case GGUF_T_BF16: return "BF16";
    case GGUF_T_Q4_0: return "Q4_0";
    case GGUF_T_Q4_1: return "Q4_1";
    case GGUF_T_Q5_0: return "Q5_0";
    case GGUF_T_Q5_1: return "Q5_1";
    case GGUF_T_Q8_0: return "Q8_0";
    default: return "unknown";
  }
}

/* Reads one value of `type` (not ARRAY) into kv->v (kv may be NULL: skip). */
static t4a_status read_scalar(cursor *c, uint32_t type, const char *key, gguf_kv *kv) {
  if (type == GGUF_STRING) {
    gguf_str s;
    t4a_status st = read_str(c, key, &s);
    if (st == T4A_OK && kv != NULL) kv->v.s = s;
    return st;
  }
  const uint8_t *p = NULL;
  t4a_status st = cursor_take(c, k_vsize[type], key, &p);
  if (st != T4A_OK || kv == NULL) return st;
  switch (type) {
    case GGUF_U8: case GGUF_BOOL: kv->v.u = p[0]; break;
    case GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case GGUF_U16: { uint16_t x; memcpy(&x, p, 2); kv->v.u = x; break; }
    case GGUF_I16: { int16_t x; memcpy(&x, p, 2); kv->v.i = x; break; }
    case GGUF_U32: { uint32_t x; memcpy(&x, p, 4); kv->v.u = x; break; }
    case GGUF_I32: { int32_t x; memcpy(&x, p, 4); kv->v.i = x; break; }
    case GGUF_F32: { float x; memcpy(&x, p, 4); kv->v.f = x; break; }
    case GGUF_U64: { uint64_t x; memcpy(&x, p, 8); kv->v.u = x; break; }
    case GGUF_I64: { int64_t x; memcpy(&x, p, 8); kv->v.i = x; break; }
    case GGUF_F64: { double x; memcpy(&x, p, 8); kv->v.f = x; break; }
    default: break;
  }
  return T4A_OK;
}

static t4a_status read_kv(cursor *c, gguf_kv *kv) {
  gguf_str key;
  uint32_t type;
  uint64_t at = c->pos;
  t4a_status st = read_str(c, "a metadata key", &key);
  if (st != T4A_OK) return st;
  if (key.len == 0 || key.len > 65535)
    return smol_error_set(c->e, T4A_CACHE_CORRUPT, at,
                          "GGUF metadata key at offset %llu has length %llu (1..65535)",
                          (unsigned long long)at, (unsigned long long)key.len);
  kv->key = str_dup(key);
  if (kv->key == NULL) return smol_error_set(c->e, T4A_HOST_OUT_OF_MEMORY, at, "out of memory");
  at = c->pos;
  if ((st = read_u32(c, kv->key, &type)) != T4A_OK) return st;
  if (type >= GGUF_VTYPE_COUNT)
    return smol_error_set(c->e, T4A_UNSUPPORTED, at,
                          "GGUF metadata '%s': unknown value type %u at offset %llu", kv->key,
                          type, (unsigned long long)at);
  kv->type = (gguf_vtype)type;
  kv->offset = c->pos;
  if (type != GGUF_ARRAY) return read_scalar(c, type, kv->key, kv);
  uint32_t elem;
  at = c->pos;
  if ((st = read_u32(c, kv->key, &elem)) != T4A_OK) return st;
  if (elem >= GGUF_VTYPE_COUNT || elem == GGUF_ARRAY)
    return smol_error_set(c->e, T4A_UNSUPPORTED, at,
                          "GGUF metadata '%s': array of %s at offset %llu is not supported",
                          kv->key, gguf_vtype_name(elem), (unsigned long long)at);
  kv->elem = (gguf_vtype)elem;
  if ((st = read_u64(c, kv->key, &kv->count)) != T4A_OK) return st;
  kv->data = c->base + c->pos;
  if (elem != GGUF_STRING) {
    const uint8_t *p = NULL;
    at = c->pos;
    if (kv->count > (c->size - c->pos) / k_vsize[elem])
      return smol_error_set(c->e, T4A_IO, at,
                            "GGUF truncated at offset %llu: array '%s' of %llu %s runs past the "
                            "end (%llu bytes left)",
                            (unsigned long long)at, kv->key, (unsigned long long)kv->count,
                            gguf_vtype_name(elem), (unsigned long long)(c->size - c->pos));
    return cursor_take(c, kv->count * k_vsize[elem], kv->key, &p);
  }
  for (uint64_t i = 0; i < kv->count; i++)
    if ((st = read_scalar(c, GGUF_STRING, kv->key, NULL)) != T4A_OK) return st;
  return T4A_OK;
}

static t4a_status read_tensor(cursor *c, gguf_tensor *t) {
  gguf_str name;
  uint64_t at = c->pos;
  t4a_status st = read_str(c, "a tensor name", &name);
  if (st != T4A_OK) return st;
  if (name.len == 0 || name.len > 65535)
    return smol_error_set(c->e, T4A_CACHE_CORRUPT, at,
                          "GGUF tensor name at offset %llu has length %llu (1..65535)",
                          (unsigned long long)at, (unsigned long long)name.len);
  if ((t->name = str_dup(name)) == NULL)
    return smol_error_set(c->e, T4A_HOST_OUT_OF_MEMORY, at, "out of memory");
  at = c->pos;
  if ((st = read_u32(c, t->name, &t->n_dims)) != T4A_OK) return st;
  if (t->n_dims == 0 || t->n_dims > 4)
    return smol_error_set(c->e, T4A_UNSUPPORTED, at,
                          "GGUF tensor '%s' has %u dimensions at offset %llu (1..4)", t->name,
                          t->n_dims, (unsigned long long)at);
  t->elements = 1;
  for (uint32_t d = 0; d < 4; d++) {
    t->ne[d] = 1;
    if (d >= t->n_dims) continue;
    at = c->pos;
    if ((st = read_u64(c, t->name, &t->ne[d])) != T4A_OK) return st;
    if (t->ne[d] == 0 || t->ne[d] > (UINT64_C(1) << 40) / t->elements)
      return smol_error_set(c->e, T4A_CACHE_CORRUPT, at,
                            "GGUF tensor '%s': dimension %u = %llu at offset %llu is zero or "
                            "overflows", t->name, d, (unsigned long long)t->ne[d],
                            (unsigned long long)at);
    t->elements *= t->ne[d];
  }
  uint32_t type;
  at = c->pos;
  if ((st = read_u32(c, t->name, &type)) != T4A_OK) return st;
  uint32_t bpb, block = gguf_ttype_block(type, &bpb);
  if (block == 0)
    return smol_error_set(c->e, T4A_UNSUPPORTED, at,
                          "GGUF tensor '%s': unsupported tensor type %u at offset %llu", t->name,
                          type, (unsigned long long)at);
  if (t->ne[0] % block != 0)
    return smol_error_set(c->e, T4A_CACHE_CORRUPT, at,
                          "GGUF tensor '%s': row of %llu elements is not a multiple of %s's "
                          "block of %u", t->name, (unsigned long long)t->ne[0],
                          gguf_ttype_name(type), block);
  t->type = (gguf_ttype)type;
  t->bytes = t->elements / block * bpb;
  return read_u64(c, t->name, &t->offset);
}

static int cmp_range(const void *a, const void *b) {
  const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

/* Tensor data inside the file, aligned, not overlapping, names unique. */
static t4a_status check_tensors(gguf_file *f, smol_error *e) {
  if (f->n_tensors == 0) return T4A_OK;
  const gguf_tensor **order = malloc((size_t)f->n_tensors * sizeof *order);
  if (order == NULL) return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
  t4a_status st = T4A_OK;
  uint64_t room = f->size - f->data_offset;
  for (uint64_t i = 0; i < f->n_tensors && st == T4A_OK; i++) {
    gguf_tensor *t = &f->tensors[i];
    order[i] = t;
    t->file_offset = f->data_offset + t->offset;
    if (t->offset % f->alignment != 0)
      st = smol_error_set(e, T4A_CACHE_CORRUPT, f->data_offset + t->offset,
                          "GGUF tensor '%s': data offset %llu is not a multiple of the "
                          "alignment %llu", t->name, (unsigned long long)t->offset,
                          (unsigned long long)f->alignment);
    else if (t->offset > room || t->bytes > room - t->offset)
      st = smol_error_set(e, T4A_IO, f->size,
                          "GGUF truncated: tensor '%s' (%llu bytes at file offset %llu) runs "
                          "past the end of the file (%llu bytes)", t->name,
                          (unsigned long long)t->bytes,
                          (unsigned long long)(f->data_offset + t->offset),
                          (unsigned long long)f->size);
  }
  if (st == T4A_OK) {
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_range);
    for (uint64_t i = 1; i < f->n_tensors && st == T4A_OK; i++)
      if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset)
        st = smol_error_set(e, T4A_CACHE_CORRUPT, order[i]->file_offset,
                            "GGUF tensors '%s' and '%s' overlap at file offset %llu",
                            order[i - 1]->name, order[i]->name,
                            (unsigned long long)order[i]->file_offset);
  }
  if (st == T4A_OK) {
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_name);
    for (uint64_t i = 1; i < f->n_tensors && st == T4A_OK; i++)
      if (strcmp(order[i - 1]->name, order[i]->name) == 0)
        st = smol_error_set(e, T4A_CACHE_CORRUPT, UINT64_MAX,
                            "GGUF tensor name '%s' appears twice", order[i]->name);
  }
  free(order);
  return st;
}

void gguf_free(gguf_file *f) {
  if (f == NULL) return;
  if (f->kv != NULL)
    for (uint64_t i = 0; i < f->n_kv; i++) free(f->kv[i].key);
  if (f->tensors != NULL)
    for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
  free(f->kv);
  free(f->tensors);
  memset(f, 0, sizeof *f);
}

t4a_status gguf_parse(const void *data, uint64_t size, gguf_file *out, smol_error *e) {
  if (out == NULL) return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "NULL output");
  memset(out, 0, sizeof *out);
  if (data == NULL && size > 0)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "NULL data");
  cursor c = {data, size, 0, e};
  const uint8_t *magic = NULL;
  t4a_status st = cursor_take(&c, 4, "the magic", &magic);
  if (st != T4A_OK) {
    smol_error_set(e, T4A_INVALID_ARGUMENT, 0, "not a GGUF file: %llu bytes, no magic",
                   (unsigned long long)size);
    return T4A_INVALID_ARGUMENT;
  }
  if (memcmp(magic, "GGUF", 4) != 0)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, 0,
                          "not a GGUF file: magic at offset 0 is %02x %02x %02x %02x, not "
                          "'GGUF'", magic[0], magic[1], magic[2], magic[3]);
  gguf_file f = {.base = data, .size = size, .alignment = 32};
  if ((st = read_u32(&c, "the version", &f.version)) != T4A_OK) return st;
  if (f.version != 2 && f.version != 3)
    return smol_error_set(e, T4A_UNSUPPORTED, 4, "GGUF version %u at offset 4 (2 or 3 read)",
                          f.version);
  uint64_t n_tensors, n_kv, at = c.pos;
  if ((st = read_u64(&c, "the tensor count", &n_tensors)) != T4A_OK) return st;
  if ((st = read_u64(&c, "the metadata count", &n_kv)) != T4A_OK) return st;
  /* every entry takes at least 12 (kv: key length 8 + type 4) or 24 bytes (tensor): counts
   * beyond what the rest of the file can hold are truncation, found before allocating */
  if (n_kv > (size - c.pos) / 12 || n_tensors > (size - c.pos) / 24)
    return smol_error_set(e, T4A_IO, at,
                          "GGUF truncated: %llu tensors and %llu metadata entries (counts at "
                          "offset %llu) cannot fit in the %llu bytes left",
                          (unsigned long long)n_tensors, (unsigned long long)n_kv,
                          (unsigned long long)at, (unsigned long long)(size - c.pos));
  f.kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f.kv);
  f.tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f.tensors);
  if (f.kv == NULL || f.tensors == NULL) {
    gguf_free(&f);
    return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, at, "out of memory");
  }
  for (uint64_t i = 0; i < n_kv && st == T4A_OK; i++, f.n_kv = i) st = read_kv(&c, &f.kv[i]);
  f.n_kv = n_kv;
  const gguf_kv *al = st == T4A_OK ? gguf_find(&f, "general.alignment") : NULL;
  if (al != NULL) {
    if (al->type != GGUF_U32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)) != 0)
      st = smol_error_set(e, T4A_CACHE_CORRUPT, al->offset,
                          "GGUF general.alignment at offset %llu is not a u32 power of two",
                          (unsigned long long)al->offset);
    else
      f.alignment = al->v.u;
  }
  for (uint64_t i = 0; i < n_tensors && st == T4A_OK; i++) st = read_tensor(&c, &f.tensors[i]);
  f.n_tensors = n_tensors;
  if (st == T4A_OK) {
    f.data_offset = (c.pos + f.alignment - 1) / f.alignment * f.alignment;
    if (f.data_offset > size && n_tensors > 0)
      st = smol_error_set(e, T4A_IO, c.pos,
                          "GGUF truncated at offset %llu: the data section starts at %llu",
                          (unsigned long long)c.pos, (unsigned long long)f.data_offset);
    else if (f.data_offset > size)
      f.data_offset = size;
  }
  if (st == T4A_OK) st = check_tensors(&f, e);
  if (st != T4A_OK) {
    gguf_free(&f);
    return st;
  }
  *out = f;
  return T4A_OK;
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
  for (uint64_t i = 0; f != NULL && i < f->n_kv; i++)
    if (f->kv[i].key != NULL && strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
  return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
  for (uint64_t i = 0; f != NULL && i < f->n_tensors; i++)
    if (f->tensors[i].name != NULL && strcmp(f->tensors[i].name, name) == 0)
      return &f->tensors[i];
  return NULL;
}

t4a_status gguf_str_array(const gguf_kv *kv, gguf_str *out, uint64_t n) {
  if (kv == NULL || out == NULL || kv->type != GGUF_ARRAY || kv->elem != GGUF_STRING ||
      n > kv->count)
    return T4A_INVALID_ARGUMENT;
  const uint8_t *p = kv->data; /* validated by gguf_parse */
  for (uint64_t i = 0; i < n; i++) {
    uint64_t len;
    memcpy(&len, p, 8);
    out[i].ptr = (const char *)p + 8;
    out[i].len = len;
    p += 8 + len;
  }
  return T4A_OK;
}

static t4a_status get_kv(const gguf_file *f, const char *key, gguf_vtype want, const gguf_kv **kv,
                         smol_error *e) {
  *kv = gguf_find(f, key);
  if (*kv == NULL)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "GGUF metadata '%s' is missing",
                          key);
  if ((*kv)->type != want)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, (*kv)->offset,
                          "GGUF metadata '%s' at offset %llu is %s, not %s", key,
                          (unsigned long long)(*kv)->offset, gguf_vtype_name((*kv)->type),
                          gguf_vtype_name(want));
  return T4A_OK;
}

t4a_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, smol_error *e) {
  const gguf_kv *kv;
  t4a_status st = get_kv(f, key, GGUF_U32, &kv, e);
  if (st == T4A_OK) *out = (uint32_t)kv->v.u;
  return st;
}

t4a_status gguf_get_f32(const gguf_file *f, const char *key, float *out, smol_error *e) {
  const gguf_kv *kv;
  t4a_status st = get_kv(f, key, GGUF_F32, &kv, e);
  if (st == T4A_OK) *out = (float)kv->v.f;
  return st;
}

t4a_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, smol_error *e) {
  const gguf_kv *kv;
  t4a_status st = get_kv(f, key, GGUF_STRING, &kv, e);
  if (st == T4A_OK) *out = kv->v.s;
  return st;
}
