/* The GPT-2 byte-level BPE tokenizer of a GGUF file (tokenizer.ggml.model "gpt2"), with the
 * "smollm" pre-tokenizer: digits split one by one, then GPT-2's pattern
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ . Control tokens
 * (token type 3, e.g. <|im_start|>) are matched literally first. Encode takes any bytes (invalid
 * UTF-8 is encoded byte by byte; a byte the vocabulary has no token for is dropped, as the
 * reference drops it); decode gives the bytes back, and smol_utf8_stream holds back
 * an incomplete UTF-8 sequence so streamed text is only ever cut between characters. */
#ifndef T4A_EXAMPLES_SMOLLM_TOKENIZER_H_
#define T4A_EXAMPLES_SMOLLM_TOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "examples/smollm/gguf.h"

typedef struct smol_tokenizer smol_tokenizer;

/* Builds the tokenizer from f's tokenizer.ggml.{model,pre,tokens,token_type,merges} (copies
 * what it keeps: f's bytes may go afterwards). Statuses: UNSUPPORTED (a model other than gpt2 or
 * a pre-tokenizer other than smollm, naming it), CACHE_CORRUPT (a merge that names tokens not in
 * the vocabulary, arrays of different lengths), INVALID_ARGUMENT
 * (missing metadata, naming the key), HOST_OUT_OF_MEMORY. */
T4A_MUST_USE t4a_status smol_tokenizer_create(const gguf_file *f, smol_tokenizer **out,
                                              smol_error *e);
void smol_tokenizer_destroy(smol_tokenizer *t);

uint32_t smol_tokenizer_vocab(const smol_tokenizer *t);
int32_t smol_tokenizer_eos(const smol_tokenizer *t);
/* The id of a token spelled exactly `text` (its GGUF spelling), or -1. */
int32_t smol_tokenizer_find(const smol_tokenizer *t, const char *text);

/* Encodes len bytes of text into ids[0 .. cap). *n is the number of ids (also when they do not
 * fit: LIMIT_EXCEEDED, ids holding the first cap). Allocates only for a pre-token of more than
 * 512 bytes. */
T4A_MUST_USE t4a_status smol_tokenize(const smol_tokenizer *t, const char *text, size_t len,
                                      int32_t *ids, size_t cap, size_t *n, smol_error *e);

/* The bytes of token id (a control token: its text). Returns the byte count (which may exceed
 * cap: then buf holds the first cap), or 0 for an id out of range. */
size_t smol_token_bytes(const smol_tokenizer *t, int32_t id, char *buf, size_t cap);

/* Decodes ids into buf (NUL-terminated when cap > 0); returns the byte count needed (without the
 * NUL). Ids out of range decode to nothing. */
size_t smol_detokenize(const smol_tokenizer *t, const int32_t *ids, size_t n, char *buf,
                       size_t cap);

/* Streaming UTF-8: bytes in, only whole characters out (an invalid byte passes as it is). */
typedef struct smol_utf8_stream {
  unsigned char pending[4];
  size_t n;
} smol_utf8_stream;

/* Appends n bytes; writes the whole characters now complete to out (room for n + 4 bytes) and
 * returns how many bytes it wrote. */
size_t smol_utf8_feed(smol_utf8_stream *s, const char *in, size_t n, char *out);
/* The bytes still held (an incomplete sequence at the end of the stream); returns their count. */
size_t smol_utf8_flush(smol_utf8_stream *s, char *out);

#endif /* T4A_EXAMPLES_SMOLLM_TOKENIZER_H_ */
