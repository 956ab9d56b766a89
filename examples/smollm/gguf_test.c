/* The GGUF reader: a synthetic file built here (every truncation, corruptions) and, when it has
 * been fetched, the SmolLM2 model (its facts, and truncations of it). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/smollm/gguf.h"
#include "examples/smollm/model_path.h"

/* ---- a small GGUF writer ---- */

typedef struct wbuf {
  uint8_t b[4096];
  size_t n;
  size_t kv_count_at, tensor_offsets[4];
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
  assert_true(w->n + n <= sizeof w->b);
  memcpy(w->b + w->n, p, n);
  w->n += n;
}
static void put_u32(wbuf *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(wbuf *w, uint64_t v) { put(w, &v, 8); }
static void put_str(wbuf *w, const char *s) {
  put_u64(w, strlen(s));
  put(w, s, strlen(s));
}

/* Header (version 3), 5 metadata entries, 2 tensors (F32 [8], Q4_1 [32 x 2]), data aligned to 32.
 * The tensor data offsets are remembered so the tests can corrupt them. */
static void build(wbuf *w) {
  memset(w, 0, sizeof *w);
  put(w, "GGUF", 4);
  put_u32(w, 3);
  put_u64(w, 2); /* tensors */
  put_u64(w, 5); /* kv */
  put_str(w, "general.architecture");
  put_u32(w, GGUF_STRING);
  put_str(w, "llama");
  put_str(w, "llama.block_count");
  put_u32(w, GGUF_U32);
  put_u32(w, 30);
  put_str(w, "llama.rope.freq_base");
  put_u32(w, GGUF_F32);
  float f = 100000.0f;
  put(w, &f, 4);
  put_str(w, "tokenizer.ggml.tokens");
  put_u32(w, GGUF_ARRAY);
  put_u32(w, GGUF_STRING);
  put_u64(w, 3);
  put_str(w, "a");
  put_str(w, "\xc4\xa0the");
  put_str(w, "");
  put_str(w, "tokenizer.ggml.token_type");
  put_u32(w, GGUF_ARRAY);
  put_u32(w, GGUF_I32);
  put_u64(w, 3);
  for (int32_t i = 1; i <= 3; i++) put(w, &i, 4);
  /* tensors */
  put_str(w, "norm.weight");
  put_u32(w, 1);
  put_u64(w, 8);
  put_u32(w, GGUF_T_F32);
  w->tensor_offsets[0] = w->n;
  put_u64(w, 0);
  put_str(w, "q.weight");
  put_u32(w, 2);
  put_u64(w, 32);
  put_u64(w, 2);
  put_u32(w, GGUF_T_Q4_1);
  w->tensor_offsets[1] = w->n;
  put_u64(w, 32); /* after 32 bytes of norm.weight */
  while (w->n % 32) put(w, "\0", 1);
  for (int i = 0; i < 8; i++) {
    float x = (float)i;
    put(w, &x, 4);
  }
  uint8_t q[40];
  for (int i = 0; i < 40; i++) q[i] = (uint8_t)i;
  put(w, q, 40);
}

static void test_parses_synthetic(void **state) {
  (void)state;
  wbuf w;
  build(&w);
  gguf_file f;
  smol_error e = {0};
  assert_int_equal(gguf_parse(w.b, w.n, &f, &e), T4A_OK);
  assert_int_equal(f.version, 3);
  assert_int_equal(f.n_kv, 5);
  assert_int_equal(f.n_tensors, 2);
  assert_int_equal(f.alignment, 32);
  assert_int_equal(f.data_offset % 32, 0);
  gguf_str s;
  assert_int_equal(gguf_get_str(&f, "general.architecture", &s, &e), T4A_OK);
  assert_int_equal(s.len, 5);
  assert_memory_equal(s.ptr, "llama", 5);
  uint32_t u;
  float fl;
  assert_int_equal(gguf_get_u32(&f, "llama.block_count", &u, &e), T4A_OK);
  assert_int_equal(u, 30);
  assert_int_equal(gguf_get_f32(&f, "llama.rope.freq_base", &fl, &e), T4A_OK);
  assert_true(fl == 100000.0f);
  /* wrong type and missing key are typed, naming the key */
  assert_int_equal(gguf_get_u32(&f, "llama.rope.freq_base", &u, &e), T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, "llama.rope.freq_base"));
  assert_non_null(strstr(e.message, "f32"));
  assert_int_equal(gguf_get_u32(&f, "llama.nope", &u, &e), T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, "llama.nope"));
  const gguf_kv *tok = gguf_find(&f, "tokenizer.ggml.tokens");
  assert_non_null(tok);
  gguf_str toks[3];
  assert_int_equal(gguf_str_array(tok, toks, 3), T4A_OK);
  assert_int_equal(toks[1].len, 5);
  assert_memory_equal(toks[1].ptr, "\xc4\xa0the", 5);
  assert_int_equal(toks[2].len, 0);
  assert_int_equal(gguf_str_array(tok, toks, 4), T4A_INVALID_ARGUMENT);
  const gguf_tensor *t = gguf_find_tensor(&f, "q.weight");
  assert_non_null(t);
  assert_int_equal(t->type, GGUF_T_Q4_1);
  assert_int_equal(t->ne[0], 32);
  assert_int_equal(t->ne[1], 2);
  assert_int_equal(t->bytes, 40);
  assert_int_equal(t->file_offset, f.data_offset + 32);
  assert_int_equal(w.b[t->file_offset + 39], 39);
  const gguf_tensor *n = gguf_find_tensor(&f, "norm.weight");
  float x7;
  memcpy(&x7, w.b + n->file_offset + 28, 4);
  assert_true(x7 == 7.0f);
  assert_null(gguf_find_tensor(&f, "nope"));
  gguf_free(&f);
  gguf_free(&f); /* zeroed: harmless */
}

/* Every prefix of the file is refused, as truncation (IO) naming an offset inside the prefix,
 * or (under 4 bytes) as not a GGUF file; nothing is held after a failure (LeakSanitizer). */
static void test_every_truncation_is_typed(void **state) {
  (void)state;
  wbuf w;
  build(&w);
  for (size_t len = 0; len < w.n; len++) {
    uint8_t *copy = malloc(len ? len : 1); /* exactly len: ASan sees a read past it */
    memcpy(copy, w.b, len);
    gguf_file f;
    smol_error e = {0};
    t4a_status st = gguf_parse(copy, len, &f, &e);
    if (len < 4) {
      assert_int_equal(st, T4A_INVALID_ARGUMENT);
    } else {
      if (st != T4A_IO) fail_msg("prefix %zu: %s (%s)", len, t4a_status_name(st), e.message);
      assert_true(e.offset <= len);
      assert_non_null(strstr(e.message, "truncated"));
    }
    assert_null(f.kv);
    assert_null(f.tensors);
    free(copy);
  }
}

static t4a_status parse_patched(wbuf *w, size_t at, const void *bytes, size_t n, smol_error *e) {
  wbuf c = *w;
  memcpy(c.b + at, bytes, n);
  gguf_file f;
  t4a_status st = gguf_parse(c.b, c.n, &f, e);
  gguf_free(&f);
  return st;
}

static void test_corruptions_are_typed(void **state) {
  (void)state;
  wbuf w;
  build(&w);
  smol_error e = {0};
  assert_int_equal(parse_patched(&w, 0, "GGML", 4, &e), T4A_INVALID_ARGUMENT);
  assert_non_null(strstr(e.message, "not a GGUF file"));
  assert_int_equal(e.offset, 0);
  uint32_t v1 = 1;
  assert_int_equal(parse_patched(&w, 4, &v1, 4, &e), T4A_UNSUPPORTED);
  assert_int_equal(e.offset, 4);
  /* a huge metadata count: refused before allocating */
  uint64_t huge = UINT64_C(1) << 60;
  assert_int_equal(parse_patched(&w, 16, &huge, 8, &e), T4A_IO);
  assert_int_equal(e.offset, 8);
  /* the first key's value type (after the key: 8 + 20 bytes at offset 24) */
  uint32_t bad_type = 99;
  size_t type_at = 24 + 8 + strlen("general.architecture");
  assert_int_equal(parse_patched(&w, type_at, &bad_type, 4, &e), T4A_UNSUPPORTED);
  assert_int_equal(e.offset, type_at);
  assert_non_null(strstr(e.message, "general.architecture"));
  /* a tensor offset that is not aligned, one past the end, and two that overlap */
  uint64_t off = 4;
  assert_int_equal(parse_patched(&w, w.tensor_offsets[1], &off, 8, &e), T4A_CACHE_CORRUPT);
  assert_non_null(strstr(e.message, "alignment"));
  off = 4096;
  assert_int_equal(parse_patched(&w, w.tensor_offsets[1], &off, 8, &e), T4A_IO);
  assert_non_null(strstr(e.message, "q.weight"));
  off = 0;
  assert_int_equal(parse_patched(&w, w.tensor_offsets[1], &off, 8, &e), T4A_CACHE_CORRUPT);
  assert_non_null(strstr(e.message, "overlap"));
  /* an unknown tensor type (4 bytes before the offset) */
  uint32_t tt = 77;
  assert_int_equal(parse_patched(&w, w.tensor_offsets[1] - 4, &tt, 4, &e), T4A_UNSUPPORTED);
  assert_non_null(strstr(e.message, "q.weight"));
  assert_int_equal(e.offset, w.tensor_offsets[1] - 4);
  /* a row that is not whole blocks: q.weight's ne[0] 32 -> 31 */
  uint64_t ne0 = 31;
  assert_int_equal(parse_patched(&w, w.tensor_offsets[1] - 4 - 16, &ne0, 8, &e),
                   T4A_CACHE_CORRUPT);
  assert_non_null(strstr(e.message, "block"));
  assert_int_equal(gguf_parse(NULL, 10, &(gguf_file){0}, &e), T4A_INVALID_ARGUMENT);
}

/* ---- the real model, when fetched ---- */

typedef struct mapped {
  const uint8_t *p;
  size_t n;
} mapped;

static int map_model(mapped *m) {
  char path[4096];
  if (!smol_model_path(path, sizeof path)) return 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  struct stat sb;
  fstat(fd, &sb);
  m->n = (size_t)sb.st_size;
  m->p = MAP_FAILED;
  if (m->n > 0) m->p = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  return m->p != MAP_FAILED;
}

static void test_model_facts(void **state) {
  (void)state;
  mapped m = {0};
  if (!map_model(&m)) {
    print_message("SKIP: model not fetched; run %s\n", SMOL_FETCH_COMMAND);
    skip();
  }
  gguf_file f;
  smol_error e = {0};
  assert_int_equal(gguf_parse(m.p, m.n, &f, &e), T4A_OK);
  assert_int_equal(f.n_tensors, 272);
  int q41 = 0, f32 = 0, q80 = 0;
  for (uint64_t i = 0; i < f.n_tensors; i++) {
    q41 += f.tensors[i].type == GGUF_T_Q4_1;
    f32 += f.tensors[i].type == GGUF_T_F32;
    q80 += f.tensors[i].type == GGUF_T_Q8_0;
  }
  assert_int_equal(q41, 210);
  assert_int_equal(f32, 61);
  assert_int_equal(q80, 1);
  uint32_t u;
  float fl;
  gguf_str s;
  assert_int_equal(gguf_get_str(&f, "general.architecture", &s, &e), T4A_OK);
  assert_memory_equal(s.ptr, "llama", 5);
  assert_int_equal(gguf_get_str(&f, "tokenizer.ggml.pre", &s, &e), T4A_OK);
  assert_memory_equal(s.ptr, "smollm", 6);
  assert_int_equal(gguf_get_u32(&f, "llama.block_count", &u, &e), T4A_OK);
  assert_int_equal(u, 30);
  assert_int_equal(gguf_get_u32(&f, "llama.embedding_length", &u, &e), T4A_OK);
  assert_int_equal(u, 576);
  assert_int_equal(gguf_get_u32(&f, "llama.attention.head_count_kv", &u, &e), T4A_OK);
  assert_int_equal(u, 3);
  assert_int_equal(gguf_get_f32(&f, "llama.rope.freq_base", &fl, &e), T4A_OK);
  assert_true(fl == 100000.0f);
  const gguf_tensor *emb = gguf_find_tensor(&f, "token_embd.weight");
  assert_non_null(emb);
  assert_int_equal(emb->type, GGUF_T_Q8_0);
  assert_int_equal(emb->ne[0], 576);
  assert_int_equal(emb->ne[1], 49152);
  assert_null(gguf_find_tensor(&f, "output.weight")); /* tied to the embedding */
  uint64_t data_end = 0;
  for (uint64_t i = 0; i < f.n_tensors; i++)
    if (f.tensors[i].file_offset + f.tensors[i].bytes > data_end)
      data_end = f.tensors[i].file_offset + f.tensors[i].bytes;
  size_t header_end = (size_t)f.data_offset;
  gguf_free(&f);
  /* truncations: 128 across the header (metadata and tensor table) and 64 across the data, each
   * a typed IO naming an offset inside the prefix */
  for (size_t len = 0; len < m.n;
       len += len < header_end ? header_end / 128 + 1 : (m.n - header_end) / 64 + 1) {
    t4a_status st = gguf_parse(m.p, len, &f, &e);
    if (len >= 4 && len < data_end) {
      if (st != T4A_IO) fail_msg("prefix %zu: %s (%s)", len, t4a_status_name(st), e.message);
      assert_true(e.offset <= len);
    } else if (len < 4) {
      assert_int_equal(st, T4A_INVALID_ARGUMENT);
    }
    gguf_free(&f);
  }
  munmap((void *)m.p, m.n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parses_synthetic),
      cmocka_unit_test(test_every_truncation_is_typed),
      cmocka_unit_test(test_corruptions_are_typed),
      cmocka_unit_test(test_model_facts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
