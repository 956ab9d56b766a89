/* Request validation and the identity record (what the cache key hashes and stores). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

size_t t4a_nvrtc_header_name_bytes(const t4a_nvrtc_header *h) {
  return h->name_bytes != 0 ? h->name_bytes : strlen(h->name);
}

size_t t4a_nvrtc_header_content_bytes(const t4a_nvrtc_header *h) {
  return h->content_bytes != 0 ? h->content_bytes : strlen(h->content);
}

size_t t4a_nvrtc_option_bytes(const t4a_nvrtc_request *req, size_t i) {
  if (req->option_bytes != NULL && req->option_bytes[i] != 0) return req->option_bytes[i];
  return strlen(req->options[i]);
}

#define INVALID(...) \
  t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0, __VA_ARGS__)

/* A name-like field (program name, header name, option, name expression): non-empty, and no
 * NUL, newline, carriage return or other control character anywhere. Returns the offset of the
 * first bad byte, n if none; SIZE_MAX for an empty field. */
static size_t bad_text(const char *p, size_t n) {
  if (n == 0) return SIZE_MAX;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c < 0x20 || c == 0x7f) return i;
  }
  return n;
}

static t4a_status check_text(const char *what, size_t index, const char *p, size_t n) {
  size_t bad = bad_text(p, n);
  if (bad == SIZE_MAX) return INVALID("%s %zu is empty", what, index);
  if (bad < n) {
    return INVALID(
        "%s %zu has a control byte 0x%02x at offset %zu (NUL, newline and other "
        "control characters are rejected: they could inject source)",
        what, index, (unsigned)(unsigned char)p[bad], bad);
  }
  return T4A_OK;
}

/* Whether the option is `name` with one or two leading dashes, alone or followed by '=' or a
 * space (NVRTC spells most options both ways, and t4a refuses the ones it owns in every spelling).
 */
static int option_is(const char *opt, size_t n, const char *name) {
  size_t d = n > 1 && opt[0] == '-' && opt[1] == '-' ? 2 : n > 0 && opt[0] == '-' ? 1 : 0;
  size_t f = strlen(name);
  if (d == 0 || n - d < f || memcmp(opt + d, name, f) != 0) return 0;
  return n - d == f || opt[d + f] == '=' || opt[d + f] == ' ';
}

/* Options that t4a owns: the request's target and output kind say them. */
static const char *owned_option(const char *opt, size_t n) {
  if (option_is(opt, n, "arch") || option_is(opt, n, "gpu-architecture")) {
    return "sets the architecture: use the request's target";
  }
  if (option_is(opt, n, "dlto") || option_is(opt, n, "dlink-time-opt")) {
    return "asks for LTO-IR: use output = T4A_NVRTC_OUTPUT_LTOIR";
  }
  if (option_is(opt, n, "optix-ir")) {
    return "asks for OptiX IR, an output kind t4a does not produce";
  }
  if (option_is(opt, n, "fdevice-syntax-only")) {
    return "stops after syntax checking: the artifact would hold no code";
  }
  return NULL;
}

static t4a_status parse_target(const t4a_nvrtc_lib *lib, const char *target,
                               t4a_nvrtc_prepared *p) {
  if (target == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                          "target is NULL: name an architecture such as sm_90 or compute_90");
  }
  const char *digits;
  if (strncmp(target, "sm_", 3) == 0) {
    digits = target + 3;
    p->virtual_arch = 0;
  } else if (strncmp(target, "compute_", 8) == 0) {
    digits = target + 8;
    p->virtual_arch = 1;
  } else {
    digits = NULL;
  }
  int number = 0;
  size_t nd = 0;
  if (digits != NULL) {
    while (digits[nd] >= '0' && digits[nd] <= '9' && nd < 4) {
      number = number * 10 + (digits[nd] - '0');
      nd++;
    }
  }
  const char *rest = digits != NULL ? digits + nd : NULL;
  int ok = digits != NULL && nd >= 2 && nd <= 3 && digits[0] != '0' &&
           (rest[0] == '\0' || ((rest[0] == 'a' || rest[0] == 'f') && rest[1] == '\0'));
  if (!ok) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                          "target \"%.40s\" is not an architecture (sm_NN or compute_NN, "
                          "optionally with an a or f suffix)",
                          target);
  }
  if (lib->caps & T4A_NVRTC_CAP_SUPPORTED_ARCHS) {
    int found = 0;
    for (size_t i = 0; i < lib->num_archs; i++) found |= lib->archs[i] == number;
    if (!found) {
      char list[256];
      size_t used = 0;
      list[0] = '\0';
      for (size_t i = 0; i < lib->num_archs && used < sizeof list; i++) {
        used +=
            (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? " " : "", lib->archs[i]);
      }
      return t4a_error_set_(T4A_UNSUPPORTED, "t4a_nvrtc_request", 0, NULL, 0,
                            "target %s: NVRTC %d.%d supports %s", target, lib->major, lib->minor,
                            list);
    }
  }
  snprintf(p->target, sizeof p->target, "%s", target);
  snprintf(p->arch_option, sizeof p->arch_option, "--gpu-architecture=%s", target);
  return T4A_OK;
}

t4a_status t4a_nvrtc_prepare(const t4a_nvrtc_lib *lib, const t4a_nvrtc_request *req,
                             t4a_nvrtc_prepared *out) {
  memset(out, 0, sizeof *out);
  if (lib == NULL || req == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                          "lib or request is NULL");
  }
  out->req = req;
  if (req->num_headers > T4A_NVRTC_MAX_ITEMS || req->num_options > T4A_NVRTC_MAX_ITEMS ||
      req->num_name_expressions > T4A_NVRTC_MAX_ITEMS) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_nvrtc_request", 0, NULL, 0,
                          "%zu headers, %zu options, %zu name expressions: at most %u each",
                          req->num_headers, req->num_options, req->num_name_expressions,
                          T4A_NVRTC_MAX_ITEMS);
  }
  if ((req->num_headers > 0 && req->headers == NULL) ||
      (req->num_options > 0 && req->options == NULL) ||
      (req->num_name_expressions > 0 && req->name_expressions == NULL)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                          "a count is nonzero but its array is NULL");
  }
  t4a_status st;
  out->program_name = req->program_name != NULL ? req->program_name : "t4a_program.cu";
  out->program_name_bytes = strlen(out->program_name);
  if ((st = check_text("program name", 0, out->program_name, out->program_name_bytes)) != T4A_OK) {
    return st;
  }
  if (req->source == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0, "source is NULL");
  }
  out->source_bytes = req->source_bytes != 0 ? req->source_bytes : strlen(req->source);
  /* Only a counted text can hide a NUL (strlen stops at the first). */
  const char *nul = req->source_bytes != 0 ? memchr(req->source, '\0', out->source_bytes) : NULL;
  if (nul != NULL) {
    return INVALID("the source has a NUL byte at offset %zu (NVRTC would cut the text there)",
                   (size_t)(nul - req->source));
  }
  for (size_t i = 0; i < req->num_headers; i++) {
    const t4a_nvrtc_header *h = &req->headers[i];
    if (h->name == NULL || h->content == NULL) {
      return INVALID("header %zu has a NULL name or content", i);
    }
    if ((st = check_text("header name", i, h->name, t4a_nvrtc_header_name_bytes(h))) != T4A_OK) {
      return st;
    }
    size_t cb = t4a_nvrtc_header_content_bytes(h);
    nul = h->content_bytes != 0 ? memchr(h->content, '\0', cb) : NULL;
    if (nul != NULL) {
      return INVALID(
          "header %zu's content has a NUL byte at offset %zu (NVRTC would cut the "
          "text there)",
          i, (size_t)(nul - h->content));
    }
  }
  for (size_t i = 0; i < req->num_options; i++) {
    const char *o = req->options[i];
    if (o == NULL) return INVALID("option %zu is NULL", i);
    size_t n = t4a_nvrtc_option_bytes(req, i);
    if ((st = check_text("option", i, o, n)) != T4A_OK) return st;
    const char *why = owned_option(o, n);
    if (why != NULL) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                            "option %zu (%.*s) %s", i, (int)(n > 64 ? 64 : n), o, why);
    }
  }
  if (req->num_include_roots > T4A_NVRTC_MAX_ROOTS) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_nvrtc_request", 0, NULL, 0,
                          "%zu include roots: at most %u", req->num_include_roots,
                          T4A_NVRTC_MAX_ROOTS);
  }
  if (req->num_include_roots > 0 && req->include_roots == NULL) {
    return INVALID("num_include_roots is %zu but include_roots is NULL", req->num_include_roots);
  }
  for (size_t i = 0; i < req->num_include_roots; i++) {
    const char *root = req->include_roots[i];
    if (root == NULL) return INVALID("include root %zu is NULL", i);
    if ((st = check_text("include root", i, root, strlen(root))) != T4A_OK) return st;
  }
  for (size_t i = 0; i < req->num_name_expressions; i++) {
    const char *e = req->name_expressions[i];
    if (e == NULL) return INVALID("name expression %zu is NULL", i);
    if ((st = check_text("name expression", i, e, strlen(e))) != T4A_OK) return st;
  }
  switch (req->output) {
    case T4A_NVRTC_OUTPUT_PTX:
      break;
    case T4A_NVRTC_OUTPUT_CUBIN:
      if (!(lib->caps & T4A_NVRTC_CAP_CUBIN)) {
        return t4a_error_set_(T4A_UNSUPPORTED, "nvrtcGetCUBIN", 0, NULL, 0,
                              "%s cannot produce CUBIN (no nvrtcGetCUBIN)", lib->origin);
      }
      break;
    case T4A_NVRTC_OUTPUT_LTOIR:
      if (!(lib->caps & T4A_NVRTC_CAP_LTOIR)) {
        return t4a_error_set_(T4A_UNSUPPORTED, "nvrtcGetLTOIR", 0, NULL, 0,
                              "%s cannot produce LTO-IR (no nvrtcGetLTOIR)", lib->origin);
      }
      break;
    default:
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                            "output kind %d is not PTX (0), CUBIN (1) or LTO-IR (2)",
                            (int)req->output);
  }
  if ((st = parse_target(lib, req->target, out)) != T4A_OK) return st;
  out->implicit[out->num_implicit++] = out->arch_option;
  /* --no-source-include keeps NVRTC from searching the directory of the program name (and of
   * each header) for "quoted" includes. Headers under include roots need their own directory
   * searched (cooperative_groups/details/driver_abi.h includes "info.h" beside it), so with roots
   * t4a leaves it out and names the program /dev/null/<name> instead: a directory that cannot
   * exist, so the source's quoted includes search nothing but the roots (measured with NVRTC
   * 13.0; the include check refuses a named header's quoted include of anything but a request
   * header, which NVRTC would look for in the working directory first). */
  if (req->num_include_roots > 0) {
    out->name_prefix = "/dev/null/";
  } else {
    out->name_prefix = "";
    out->implicit[out->num_implicit++] = "--no-source-include";
  }
  if (req->output == T4A_NVRTC_OUTPUT_LTOIR) out->implicit[out->num_implicit++] = "-dlto";
  return T4A_OK;
}

/* ---- Identity record ---------------------------------------------------------------------- */

static void sink_flush(t4a_nvrtc_id_sink *s) {
  if (s->pending > 0) {
    XXH3_128bits_update(s->state, s->stage, s->pending);
    s->pending = 0;
  }
}

static void sink_put(t4a_nvrtc_id_sink *s, const void *p, size_t n) {
  switch (s->mode) {
    case ID_SINK_SIZE:
      break;
    case ID_SINK_WRITE:
      memcpy(s->buf + s->pos, p, n);
      break;
    case ID_SINK_HASH:
      if (n >= sizeof s->stage / 2) {
        sink_flush(s);
        XXH3_128bits_update(s->state, p, n);
      } else {
        if (s->pending + n > sizeof s->stage) sink_flush(s);
        memcpy(s->stage + s->pending, p, n);
        s->pending += n;
      }
      break;
    case ID_SINK_COMPARE:
      if (!s->mismatch && (s->pos + n > s->cmp_bytes || memcmp(s->cmp + s->pos, p, n) != 0)) {
        s->mismatch = 1;
      }
      break;
  }
  s->pos += n;
}

static void put_u64(t4a_nvrtc_id_sink *s, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  sink_put(s, b, sizeof b);
}

static void put_str(t4a_nvrtc_id_sink *s, const char *p, size_t n) {
  put_u64(s, n);
  sink_put(s, p, n);
}

void t4a_nvrtc_identity_emit(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p,
                             t4a_nvrtc_id_sink *s) {
  static const char magic[] = "t4a.nvrtc.identity";
  const t4a_nvrtc_request *r = p->req;
  sink_put(s, magic, sizeof magic - 1);
  put_u64(s, T4A_NVRTC_KEY_SCHEMA);
  put_u64(s, (uint64_t)lib->major);
  put_u64(s, (uint64_t)lib->minor);
  put_str(s, lib->build_identity, strlen(lib->build_identity));
  put_str(s, p->program_name, p->program_name_bytes);
  put_str(s, r->source, p->source_bytes);
  put_u64(s, r->num_headers);
  for (size_t i = 0; i < r->num_headers; i++) {
    const t4a_nvrtc_header *h = &r->headers[i];
    put_str(s, h->name, t4a_nvrtc_header_name_bytes(h));
    put_str(s, h->content, t4a_nvrtc_header_content_bytes(h));
  }
  put_u64(s, r->num_options);
  for (size_t i = 0; i < r->num_options; i++) {
    put_str(s, r->options[i], t4a_nvrtc_option_bytes(r, i));
  }
  put_u64(s, r->num_include_roots);
  for (size_t i = 0; i < r->num_include_roots; i++) {
    put_str(s, r->include_roots[i], strlen(r->include_roots[i]));
  }
  /* With roots: a cached compile's artifact key holds the digest of its include manifest (what
   * its includes reach through the roots); the first-level key that names the manifest, and an
   * uncached artifact's key (stored, never looked up), only the spellings. */
  if (r->num_include_roots > 0) {
    static const uint8_t none[16] = {0};
    put_u64(s, (uint64_t)p->roots_key);
    sink_put(s, p->roots_key == 2 ? p->manifest_digest : none, 16);
  }
  put_u64(s, p->num_implicit);
  for (size_t i = 0; i < p->num_implicit; i++) {
    put_str(s, p->implicit[i], strlen(p->implicit[i]));
  }
  put_str(s, p->target, strlen(p->target));
  put_u64(s, (uint64_t)r->output);
  put_u64(s, r->num_name_expressions);
  for (size_t i = 0; i < r->num_name_expressions; i++) {
    put_str(s, r->name_expressions[i], strlen(r->name_expressions[i]));
  }
}

size_t t4a_nvrtc_identity_size(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p) {
  t4a_nvrtc_id_sink s;
  s.mode = ID_SINK_SIZE;
  s.pos = 0;
  t4a_nvrtc_identity_emit(lib, p, &s);
  return s.pos;
}

void t4a_nvrtc_identity_key(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p,
                            uint8_t key[16]) {
  if (p->roots_key == 2) {
    /* The artifact key of a request with roots: its first-level key (the hash of the same
     * record less the digest) and the manifest's digest; entries still compare the record. */
    static const char tag[] = "t4a.nvrtc.key2";
    uint8_t b[sizeof tag - 1 + 32];
    memcpy(b, tag, sizeof tag - 1);
    memcpy(b + sizeof tag - 1, p->first_key, 16);
    memcpy(b + sizeof tag - 1 + 16, p->manifest_digest, 16);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(b, sizeof b));
    memcpy(key, c.digest, 16);
    return;
  }
  XXH3_state_t state;
  t4a_nvrtc_id_sink s;
  s.mode = ID_SINK_HASH;
  s.pos = 0;
  s.pending = 0;
  s.state = &state;
  XXH3_128bits_reset(&state);
  t4a_nvrtc_identity_emit(lib, p, &s);
  sink_flush(&s);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  memcpy(key, c.digest, 16);
}

void t4a_nvrtc_identity_write(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p, uint8_t *buf) {
  t4a_nvrtc_id_sink s;
  s.mode = ID_SINK_WRITE;
  s.pos = 0;
  s.buf = buf;
  t4a_nvrtc_identity_emit(lib, p, &s);
}

int t4a_nvrtc_identity_equal(const t4a_nvrtc_lib *lib, const t4a_nvrtc_prepared *p,
                             const uint8_t *stored, size_t stored_bytes) {
  t4a_nvrtc_id_sink s;
  s.mode = ID_SINK_COMPARE;
  s.pos = 0;
  s.cmp = stored;
  s.cmp_bytes = stored_bytes;
  s.mismatch = 0;
  t4a_nvrtc_identity_emit(lib, p, &s);
  return !s.mismatch && s.pos == stored_bytes;
}

void t4a_nvrtc_key_hex(const uint8_t key[16], char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = digits[key[i] >> 4];
    out[2 * i + 1] = digits[key[i] & 15];
  }
  out[32] = '\0';
}
