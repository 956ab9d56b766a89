/* GPT-2 byte-level BPE with the smollm pre-tokenizer (see tokenizer.h). */
#include "examples/smollm/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "examples/smollm/unicode_tables.h"

enum { TOKEN_CONTROL = 3, MAX_CONTROL = 64, STACK_SYMBOLS = 512 };

typedef struct merge_slot {
  uint64_t key; /* (a << 32 | b) + 1; 0 = empty */
  uint32_t rank;
  int32_t merged;
} merge_slot;

struct smol_tokenizer {
  uint32_t vocab;
  char *text;          /* every token's GGUF spelling, NUL-separated */
  uint32_t *text_at;   /* vocab + 1 offsets into text */
  char *bytes;         /* every token's decoded bytes */
  uint32_t *bytes_at;  /* vocab + 1 offsets into bytes */
  int32_t *vocab_hash; /* token spelling -> id, open addressing; -1 = empty */
  uint32_t vocab_mask;
  merge_slot *merges;
  uint32_t merge_mask;
  int32_t byte_id[256];
  int32_t control[MAX_CONTROL];
  uint32_t n_control;
  int32_t eos;
};

/* ---- GPT-2's byte <-> code point map ---- */

static uint32_t byte_to_cp(unsigned b) {
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
  uint32_t n = 0; /* the rank of b among the bytes that are remapped */
  for (unsigned x = 0; x < b; x++)
    if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
  return 256 + n;
}

/* ---- UTF-8 ---- */

/* Decodes one code point at s[0 .. n) (n > 0). Returns its length (1 for an invalid byte, with
 * *cp = 0x110000 + byte: a non-character that is neither letter, number nor space). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
  unsigned c = s[0];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  uint32_t v = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
  if (len == 0 || len > n) goto invalid;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) goto invalid;
    v = v << 6 | (s[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto invalid;
  *cp = v;
  return len;
invalid:
  *cp = 0x110000 + c;
  return 1;
}

static size_t utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* ---- character classes ---- */

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < r[mid][0]) hi = mid;
    else if (cp > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

static int is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(k_letters, sizeof k_letters / sizeof k_letters[0], cp);
}
static int is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(k_numbers, sizeof k_numbers / sizeof k_numbers[0], cp);
}
/* Unicode White_Space (what \s matches in the reference's regex engine) */
static int is_space(uint32_t cp) {
  return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}
static int is_other(uint32_t cp) { return !is_space(cp) && !is_letter(cp) && !is_number(cp); }

/* ---- hashing ---- */

static uint64_t fnv(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static uint32_t pow2_at_least(uint64_t n) {
  uint32_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

static const char *tok_text(const smol_tokenizer *t, int32_t id, size_t *len) {
  *len = t->text_at[id + 1] - t->text_at[id] - 1;
  return t->text + t->text_at[id];
}

static int32_t find_n(const smol_tokenizer *t, const char *s, size_t n) {
  for (uint32_t i = (uint32_t)fnv(s, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
    int32_t id = t->vocab_hash[i];
    if (id < 0) return -1;
    size_t len;
    const char *x = tok_text(t, id, &len);
    if (len == n && memcmp(x, s, n) == 0) return id;
  }
}

int32_t smol_tokenizer_find(const smol_tokenizer *t, const char *text) {
  return t == NULL || text == NULL ? -1 : find_n(t, text, strlen(text));
}

static uint64_t pair_hash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return key;
}

static const merge_slot *find_merge(const smol_tokenizer *t, int32_t a, int32_t b) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
  for (uint32_t i = (uint32_t)pair_hash(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
    if (t->merges[i].key == 0) return NULL;
    if (t->merges[i].key == key) return &t->merges[i];
  }
}

/* ---- construction ---- */

void smol_tokenizer_destroy(smol_tokenizer *t) {
  if (t == NULL) return;
  free(t->text);
  free(t->text_at);
  free(t->bytes);
  free(t->bytes_at);
  free(t->vocab_hash);
  free(t->merges);
  free(t);
}

static t4a_status get_array(const gguf_file *f, const char *key, gguf_vtype elem,
                            const gguf_kv **kv, smol_error *e) {
  *kv = gguf_find(f, key);
  if (*kv == NULL)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "GGUF metadata '%s' is missing",
                          key);
  if ((*kv)->type != GGUF_ARRAY || (*kv)->elem != elem)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, (*kv)->offset,
                          "GGUF metadata '%s' at offset %llu is not an array of %s", key,
                          (unsigned long long)(*kv)->offset, gguf_vtype_name(elem));
  return T4A_OK;
}

static int str_is(gguf_str s, const char *want) {
  return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* Decodes a token's GGUF spelling (GPT-2 mapped code points) into bytes; returns the count. */
static size_t unmap(const int16_t *cp_to_byte, const char *s, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t len = utf8_next((const unsigned char *)s + i, n - i, &cp);
    if (cp < 324 && cp_to_byte[cp] >= 0) out[w++] = (char)cp_to_byte[cp];
    else { memcpy(out + w, s + i, len); w += len; } /* not a mapped byte: kept as it is */
    i += len;
  }
  return w;
}

static t4a_status build(smol_tokenizer *t, const gguf_file *f, smol_error *e) {
  gguf_str model, pre;
  t4a_status st = gguf_get_str(f, "tokenizer.ggml.model", &model, e);
  if (st == T4A_OK && !str_is(model, "gpt2"))
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "tokenizer.ggml.model '%.*s' is not supported (gpt2)", (int)model.len,
                          model.ptr);
  if (st == T4A_OK) st = gguf_get_str(f, "tokenizer.ggml.pre", &pre, e);
  if (st == T4A_OK && !str_is(pre, "smollm"))
    return smol_error_set(e, T4A_UNSUPPORTED, UINT64_MAX,
                          "tokenizer.ggml.pre '%.*s' is not supported (smollm)", (int)pre.len,
                          pre.ptr);
  const gguf_kv *tokens, *types, *merges;
  if (st == T4A_OK) st = get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, e);
  if (st == T4A_OK) st = get_array(f, "tokenizer.ggml.token_type", GGUF_I32, &types, e);
  if (st == T4A_OK) st = get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, e);
  if (st != T4A_OK) return st;
  if (types->count != tokens->count || tokens->count == 0 || tokens->count > (1u << 24))
    return smol_error_set(e, T4A_CACHE_CORRUPT, types->offset,
                          "tokenizer: %llu tokens but %llu token types",
                          (unsigned long long)tokens->count, (unsigned long long)types->count);
  uint32_t eos;
  t->eos = gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos, NULL) == T4A_OK ? (int32_t)eos
                                                                               : -1;
  t->vocab = (uint32_t)tokens->count;
  uint32_t nv = t->vocab;
  gguf_str *strs = malloc(((size_t)nv > merges->count ? nv : (size_t)merges->count + 1) *
                          sizeof *strs);
  if (strs == NULL) return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
  if ((st = gguf_str_array(tokens, strs, nv)) != T4A_OK) goto out;
  size_t total = 0;
  for (uint32_t i = 0; i < nv; i++) total += strs[i].len + 1;
  if (total > UINT32_MAX / 2) {
    st = smol_error_set(e, T4A_LIMIT_EXCEEDED, tokens->offset, "tokenizer: vocabulary too large");
    goto out;
  }
  t->text = malloc(total);
  t->text_at = malloc(((size_t)nv + 1) * sizeof *t->text_at);
  t->bytes = malloc(total);
  t->bytes_at = malloc(((size_t)nv + 1) * sizeof *t->bytes_at);
  t->vocab_mask = pow2_at_least((uint64_t)nv * 2) - 1;
  t->vocab_hash = malloc(((size_t)t->vocab_mask + 1) * sizeof *t->vocab_hash);
  if (!t->text || !t->text_at || !t->bytes || !t->bytes_at || !t->vocab_hash) {
    st = smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
    goto out;
  }
  int16_t cp_to_byte[324];
  for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
  for (unsigned b = 0; b < 256; b++) cp_to_byte[byte_to_cp(b)] = (int16_t)b;
  memset(t->vocab_hash, 0xFF, ((size_t)t->vocab_mask + 1) * sizeof *t->vocab_hash);
  size_t at = 0, bat = 0;
  for (uint32_t i = 0; i < nv; i++) {
    int32_t type;
    memcpy(&type, types->data + 4 * (size_t)i, 4);
    t->text_at[i] = (uint32_t)at;
    memcpy(t->text + at, strs[i].ptr, strs[i].len);
    at += strs[i].len;
    t->text[at++] = '\0';
    t->bytes_at[i] = (uint32_t)bat;
    if (type == TOKEN_CONTROL) {
      memcpy(t->bytes + bat, strs[i].ptr, strs[i].len);
      bat += strs[i].len;
      if (t->n_control < MAX_CONTROL && strs[i].len > 0) t->control[t->n_control++] = (int32_t)i;
    } else {
      bat += unmap(cp_to_byte, strs[i].ptr, strs[i].len, t->bytes + bat);
    }
    t->text_at[i + 1] = (uint32_t)at;
    t->bytes_at[i + 1] = (uint32_t)bat;
    if (type == TOKEN_CONTROL) continue; /* matched literally, never by BPE */
    uint32_t h = (uint32_t)fnv(strs[i].ptr, strs[i].len) & t->vocab_mask;
    int dup = 0;
    for (; t->vocab_hash[h] >= 0; h = (h + 1) & t->vocab_mask) {
      size_t len;
      const char *x = tok_text(t, t->vocab_hash[h], &len);
      if (len == strs[i].len && memcmp(x, strs[i].ptr, len) == 0) dup = 1;
    }
    if (!dup) t->vocab_hash[h] = (int32_t)i; /* the first of duplicates wins */
  }
  /* a byte whose token the vocabulary lacks (SmolLM2 lacks 21, e.g. 0x04, 0xC0, 0xFF) is
   * dropped by encoding, as the reference (BPE without an unknown token) drops it */
  for (unsigned b = 0; b < 256; b++) {
    char s[4];
    size_t n = utf8_put(byte_to_cp(b), s);
    t->byte_id[b] = find_n(t, s, n);
  }
  /* merges "A B" -> (id(A), id(B)) -> rank, id(AB) */
  uint64_t nm = merges->count;
  if ((st = gguf_str_array(merges, strs, nm)) != T4A_OK) goto out;
  t->merge_mask = pow2_at_least(nm * 2 + 1) - 1;
  t->merges = calloc((size_t)t->merge_mask + 1, sizeof *t->merges);
  if (t->merges == NULL) {
    st = smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
    goto out;
  }
  char joined[512];
  for (uint64_t r = 0; r < nm; r++) {
    const char *s = strs[r].ptr, *sp = memchr(s, ' ', (size_t)strs[r].len);
    size_t la = sp ? (size_t)(sp - s) : 0, lb = sp ? (size_t)strs[r].len - la - 1 : 0;
    int32_t a = sp ? find_n(t, s, la) : -1, b = sp ? find_n(t, sp + 1, lb) : -1, ab = -1;
    if (a >= 0 && b >= 0 && la + lb <= sizeof joined) {
      memcpy(joined, s, la);
      memcpy(joined + la, sp + 1, lb);
      ab = find_n(t, joined, la + lb);
    }
    if (ab < 0) {
      st = smol_error_set(e, T4A_CACHE_CORRUPT, merges->offset,
                          "tokenizer: merge %llu '%.*s' names tokens not in the vocabulary",
                          (unsigned long long)r, (int)(strs[r].len > 64 ? 64 : strs[r].len), s);
      goto out;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t i = (uint32_t)pair_hash(key) & t->merge_mask;
    while (t->merges[i].key != 0 && t->merges[i].key != key) i = (i + 1) & t->merge_mask;
    if (t->merges[i].key == 0) t->merges[i] = (merge_slot){key, (uint32_t)r, ab};
  }
out:
  free(strs);
  return st;
}

t4a_status smol_tokenizer_create(const gguf_file *f, smol_tokenizer **out, smol_error *e) {
  if (out != NULL) *out = NULL;
  if (f == NULL || out == NULL)
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "NULL argument");
  smol_tokenizer *t = calloc(1, sizeof *t);
  if (t == NULL) return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
  t4a_status st = build(t, f, e);
  if (st != T4A_OK) {
    smol_tokenizer_destroy(t);
    return st;
  }
  *out = t;
  return T4A_OK;
}

uint32_t smol_tokenizer_vocab(const smol_tokenizer *t) { return t ? t->vocab : 0; }
int32_t smol_tokenizer_eos(const smol_tokenizer *t) { return t ? t->eos : -1; }

/* ---- encoding ---- */

typedef struct emit {
  int32_t *ids;
  size_t cap, n;
} emit;

static void push(emit *o, int32_t id) {
  if (o->n < o->cap) o->ids[o->n] = id;
  o->n++;
}

/* Byte-level BPE of one pre-token (bytes s[0 .. n)). */
static t4a_status bpe(const smol_tokenizer *t, const unsigned char *s, size_t n, emit *o,
                      smol_error *e) {
  int32_t stack[STACK_SYMBOLS], *sym = stack;
  if (n > STACK_SYMBOLS && (sym = malloc(n * sizeof *sym)) == NULL)
    return smol_error_set(e, T4A_HOST_OUT_OF_MEMORY, UINT64_MAX, "out of memory");
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (t->byte_id[s[i]] >= 0) sym[m++] = t->byte_id[s[i]];
  while (m > 1) {
    uint32_t best = UINT32_MAX;
    size_t at = 0;
    int32_t merged = -1;
    for (size_t i = 0; i + 1 < m; i++) {
      const merge_slot *ms = find_merge(t, sym[i], sym[i + 1]);
      if (ms != NULL && ms->rank < best) best = ms->rank, at = i, merged = ms->merged;
    }
    if (merged < 0) break;
    sym[at] = merged;
    memmove(sym + at + 1, sym + at + 2, (m - at - 2) * sizeof *sym);
    m--;
  }
  for (size_t i = 0; i < m; i++) push(o, sym[i]);
  if (sym != stack) free(sym);
  return T4A_OK;
}

/* GPT-2's pattern over one digit-free (or single-digit) piece s[0 .. n). */
static t4a_status split_piece(const smol_tokenizer *t, const unsigned char *s, size_t n, emit *o,
                              smol_error *e) {
  size_t i = 0;
  while (i < n) {
    uint32_t c, c1 = 0;
    size_t lc = utf8_next(s + i, n - i, &c), l1 = 0, j = i;
    if (i + lc < n) l1 = utf8_next(s + i + lc, n - i - lc, &c1);
    if (c == '\'' && l1 == 1 && (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')) {
      j = i + 2;
    } else if (c == '\'' && l1 == 1 && i + 2 < n &&
               ((c1 == 'r' && s[i + 2] == 'e') || (c1 == 'v' && s[i + 2] == 'e') ||
                (c1 == 'l' && s[i + 2] == 'l'))) {
      j = i + 3;
    } else {
      int (*cls)(uint32_t) = NULL;
      size_t k = i;
      if (c == ' ' && l1 > 0 && (is_letter(c1) || is_number(c1) || is_other(c1))) {
        k = i + 1; /* ' ?' takes the space, the class is the next character's */
        cls = is_letter(c1) ? is_letter : is_number(c1) ? is_number : is_other;
      } else if (!is_space(c)) {
        cls = is_letter(c) ? is_letter : is_number(c) ? is_number : is_other;
      }
      if (cls != NULL) {
        j = k;
        while (j < n) {
          uint32_t x;
          size_t lx = utf8_next(s + j, n - j, &x);
          if (!cls(x)) break;
          j += lx;
        }
      } else { /* whitespace: \s+(?!\S) then \s+ */
        size_t last = i; /* start of the run's last character */
        j = i;
        while (j < n) {
          uint32_t x;
          size_t lx = utf8_next(s + j, n - j, &x);
          if (!is_space(x)) break;
          last = j;
          j += lx;
        }
        if (j < n && last > i) j = last; /* leave the last space to the word after it */
      }
    }
    t4a_status st = bpe(t, s + i, j - i, o, e);
    if (st != T4A_OK) return st;
    i = j;
  }
  return T4A_OK;
}

/* Digits one by one, the rest by split_piece. */
static t4a_status encode_plain(const smol_tokenizer *t, const unsigned char *s, size_t n, emit *o,
                               smol_error *e) {
  size_t start = 0;
  for (size_t i = 0; i < n;) {
    uint32_t c;
    size_t lc = utf8_next(s + i, n - i, &c);
    if (is_number(c)) {
      t4a_status st = split_piece(t, s + start, i - start, o, e);
      if (st == T4A_OK) st = split_piece(t, s + i, lc, o, e);
      if (st != T4A_OK) return st;
      start = i + lc;
    }
    i += lc;
  }
  return split_piece(t, s + start, n - start, o, e);
}

t4a_status smol_tokenize(const smol_tokenizer *t, const char *text, size_t len, int32_t *ids,
                         size_t cap, size_t *n, smol_error *e) {
  if (n != NULL) *n = 0;
  if (t == NULL || n == NULL || (text == NULL && len > 0) || (ids == NULL && cap > 0))
    return smol_error_set(e, T4A_INVALID_ARGUMENT, UINT64_MAX, "NULL argument");
  emit o = {ids, cap, 0};
  const unsigned char *s = (const unsigned char *)text;
  size_t start = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] != '<') continue; /* every control token of gpt2 vocabularies starts with '<' */
    int32_t hit = -1;
    size_t hit_len = 0;
    for (uint32_t c = 0; c < t->n_control; c++) {
      size_t cl;
      const char *ct = tok_text(t, t->control[c], &cl);
      if (cl > hit_len && cl <= len - i && memcmp(ct, s + i, cl) == 0)
        hit = t->control[c], hit_len = cl;
    }
    if (hit < 0) continue;
    t4a_status st = encode_plain(t, s + start, i - start, &o, e);
    if (st != T4A_OK) return st;
    push(&o, hit);
    start = i + hit_len;
    i = start - 1;
  }
  t4a_status st = encode_plain(t, s + start, len - start, &o, e);
  *n = o.n;
  if (st == T4A_OK && o.n > cap)
    return smol_error_set(e, T4A_LIMIT_EXCEEDED, UINT64_MAX,
                          "the text is %zu tokens, room for %zu", o.n, cap);
  return st;
}

/* ---- decoding ---- */

size_t smol_token_bytes(const smol_tokenizer *t, int32_t id, char *buf, size_t cap) {
  if (t == NULL || id < 0 || (uint32_t)id >= t->vocab) return 0;
  size_t n = t->bytes_at[id + 1] - t->bytes_at[id];
  if (buf != NULL) memcpy(buf, t->bytes + t->bytes_at[id], n < cap ? n : cap);
  return n;
}

size_t smol_detokenize(const smol_tokenizer *t, const int32_t *ids, size_t n, char *buf,
                       size_t cap) {
  size_t w = 0;
  for (size_t i = 0; i < n && ids != NULL; i++) {
    size_t room = cap > w ? cap - w : 0;
    w += smol_token_bytes(t, ids[i], buf ? buf + w : NULL, room);
  }
  if (cap > 0 && buf != NULL) buf[w < cap ? w : cap - 1] = '\0';
  return w;
}

static size_t utf8_need(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

size_t smol_utf8_feed(smol_utf8_stream *s, const char *in, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (s->n > 0 && (c & 0xC0) != 0x80) { /* a sequence cut short: pass what it had */
      memcpy(out + w, s->pending, s->n);
      w += s->n;
      s->n = 0;
    }
    s->pending[s->n++] = c;
    if (s->n == utf8_need(s->pending[0]) || (s->n == 1 && (c & 0xC0) == 0x80)) {
      memcpy(out + w, s->pending, s->n);
      w += s->n;
      s->n = 0;
    }
  }
  return w;
}

size_t smol_utf8_flush(smol_utf8_stream *s, char *out) {
  size_t n = s->n;
  memcpy(out, s->pending, n);
  s->n = 0;
  return n;
}
