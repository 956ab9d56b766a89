/* The compile core (one NVRTC program per call, destroyed on every path), artifacts and
 * outcomes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

/* ---- Outcomes and names ------------------------------------------------------------------ */

void t4a_nvrtc_error_restore(const t4a_error *saved) {
  if (saved->status == T4A_OK) {
    t4a_error_clear();
    return;
  }
  t4a_error_set_(saved->status, saved->entry, saved->code, saved->code_name, saved->bytes, "%s",
                 saved->message);
}

const char *t4a_nvrtc_output_name(t4a_nvrtc_output output) {
  switch (output) {
    case T4A_NVRTC_OUTPUT_PTX:
      return "ptx";
    case T4A_NVRTC_OUTPUT_CUBIN:
      return "cubin";
    case T4A_NVRTC_OUTPUT_LTOIR:
      return "lto-ir";
  }
  return "unknown";
}

const char *t4a_nvrtc_origin_name(t4a_nvrtc_origin origin) {
  switch (origin) {
    case T4A_NVRTC_ORIGIN_NONE:
      return "none";
    case T4A_NVRTC_ORIGIN_COMPILED:
      return "compiled";
    case T4A_NVRTC_ORIGIN_MEMORY:
      return "memory";
    case T4A_NVRTC_ORIGIN_DISK:
      return "disk";
    case T4A_NVRTC_ORIGIN_JOINED:
      return "joined";
    case T4A_NVRTC_ORIGIN_UNCACHED:
      return "uncached";
  }
  return "unknown";
}

void t4a_nvrtc_outcome_deinit(t4a_nvrtc_outcome *outcome) {
  if (outcome == NULL) return;
  free(outcome->log);
  free(outcome->uncached_why);
  outcome->origin = T4A_NVRTC_ORIGIN_NONE;
  outcome->log = NULL;
  outcome->log_bytes = 0;
  outcome->uncached_why = NULL;
}

void t4a_nvrtc_outcome_set(t4a_nvrtc_outcome *outcome, t4a_nvrtc_origin origin,
                           t4a_nvrtc_log *log) {
  if (outcome == NULL) {
    free(log->text);
  } else {
    outcome->origin = origin;
    outcome->log = log->text;
    outcome->log_bytes = log->text != NULL ? log->bytes : 0;
  }
  log->text = NULL;
  log->bytes = 0;
}

/* ---- Artifacts --------------------------------------------------------------------------- */

/* Adds n bytes at the given alignment to a running size; 0 on overflow. */
static int grow(size_t *total, size_t n, size_t align) {
  size_t t = (*total + align - 1) & ~(align - 1);
  if (t < *total || n > SIZE_MAX - t) return 0;
  *total = t + n;
  return 1;
}

static char *place_str(char **cursor, t4a_nvrtc_str s) {
  char *p = *cursor;
  if (s.n > 0) memcpy(p, s.p, s.n);
  p[s.n] = '\0';
  *cursor = p + s.n + 1;
  return p;
}

t4a_nvrtc_artifact *t4a_nvrtc_artifact_alloc(const t4a_nvrtc_artifact_parts *parts,
                                             uint8_t **out_data, char **out_log) {
  size_t n = parts->num_names;
  size_t total = sizeof(t4a_nvrtc_artifact);
  size_t strings = 0;
  int ok =
      n <= SIZE_MAX / 4 / sizeof(char *) && grow(&total, 2 * n * sizeof(char *), sizeof(char *));
  size_t data_off = 0, log_off = 0, str_off = 0;
  if (ok) {
    ok = grow(&total, 0, 16);
    data_off = total;
    ok = ok && grow(&total, parts->data_bytes, 1) && grow(&total, 1, 1);
    log_off = total;
    ok = ok && grow(&total, parts->log_bytes, 1) && grow(&total, 1, 1);
    str_off = total;
    ok = ok && grow(&strings, parts->target.n + 1, 1) &&
         grow(&strings, parts->build_identity.n + 1, 1) &&
         grow(&strings, parts->program_name.n + 1, 1);
    for (size_t i = 0; ok && i < n; i++) {
      ok = grow(&strings, parts->exprs[i].n + 1, 1) && grow(&strings, parts->lowered[i].n + 1, 1);
    }
    ok = ok && grow(&total, strings, 1);
  }
  if (!ok) {
    t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "t4a_nvrtc_artifact", 0, NULL, UINT64_MAX,
                   "artifact size overflows");
    return NULL;
  }
  char *block = t4a_host_malloc(total);
  if (block == NULL) return NULL;
  t4a_nvrtc_populate_(block, total);
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)(void *)block;
  memset(a, 0, sizeof *a);
  atomic_init(&a->refs, 1);
  a->output = parts->output;
  a->major = parts->major;
  a->minor = parts->minor;
  memcpy(a->key, parts->key, 16);
  t4a_nvrtc_key_hex(a->key, a->key_hex);
  a->total_bytes = total;
  a->num_names = n;
  a->exprs =
      (const char **)(void *)(block + ((sizeof *a + sizeof(char *) - 1) & ~(sizeof(char *) - 1)));
  a->lowered = a->exprs + n;
  uint8_t *data = (uint8_t *)block + data_off;
  if (parts->data != NULL && parts->data_bytes > 0) memcpy(data, parts->data, parts->data_bytes);
  data[parts->data_bytes] = 0; /* without parts->data the caller fills the bytes */
  a->data = data;
  a->data_bytes = parts->data_bytes;
  char *log = block + log_off;
  if (parts->log != NULL && parts->log_bytes > 0)
    memcpy(log, parts->log, parts->log_bytes);
  else
    memset(log, 0, parts->log_bytes);
  log[parts->log_bytes] = '\0';
  a->log = log;
  a->log_bytes = parts->log_bytes;
  char *cursor = block + str_off;
  a->target = place_str(&cursor, parts->target);
  a->build_identity = place_str(&cursor, parts->build_identity);
  a->program_name = place_str(&cursor, parts->program_name);
  for (size_t i = 0; i < n; i++) {
    a->exprs[i] = place_str(&cursor, parts->exprs[i]);
    a->lowered[i] = place_str(&cursor, parts->lowered[i]);
  }
  if (out_data != NULL) *out_data = data;
  if (out_log != NULL) *out_log = log;
  return a;
}

void t4a_nvrtc_artifact_retain(t4a_nvrtc_artifact *artifact) {
  if (artifact != NULL) atomic_fetch_add_explicit(&artifact->refs, 1, memory_order_relaxed);
}

void t4a_nvrtc_artifact_release(t4a_nvrtc_artifact *artifact) {
  if (artifact == NULL) return;
  if (atomic_fetch_sub_explicit(&artifact->refs, 1, memory_order_acq_rel) == 1) free(artifact);
}

const void *t4a_nvrtc_artifact_data(const t4a_nvrtc_artifact *artifact, size_t *out_bytes) {
  if (out_bytes != NULL) *out_bytes = artifact != NULL ? artifact->data_bytes : 0;
  return artifact != NULL ? artifact->data : NULL;
}

t4a_nvrtc_output t4a_nvrtc_artifact_output(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->output : T4A_NVRTC_OUTPUT_PTX;
}

const char *t4a_nvrtc_artifact_target(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->target : "";
}

const char *t4a_nvrtc_artifact_program_name(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->program_name : "";
}

void t4a_nvrtc_artifact_compiler_version(const t4a_nvrtc_artifact *artifact, int *out_major,
                                         int *out_minor) {
  if (out_major != NULL) *out_major = artifact != NULL ? artifact->major : 0;
  if (out_minor != NULL) *out_minor = artifact != NULL ? artifact->minor : 0;
}

const char *t4a_nvrtc_artifact_build_identity(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->build_identity : "";
}

const char *t4a_nvrtc_artifact_log(const t4a_nvrtc_artifact *artifact, size_t *out_bytes) {
  if (out_bytes != NULL) *out_bytes = artifact != NULL ? artifact->log_bytes : 0;
  return artifact != NULL ? artifact->log : "";
}

void t4a_nvrtc_artifact_key_content_(t4a_nvrtc_artifact *artifact) {
  static const char tag[] = "t4a.nvrtc.content";
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, tag, sizeof tag - 1);
  XXH3_128bits_update(&state, artifact->key, 16);
  XXH3_128bits_update(&state, artifact->data, artifact->data_bytes);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  memcpy(artifact->key, c.digest, 16);
  t4a_nvrtc_key_hex(artifact->key, artifact->key_hex);
}

void t4a_nvrtc_artifact_key(const t4a_nvrtc_artifact *artifact, uint8_t out_key[16]) {
  if (out_key == NULL) return;
  if (artifact == NULL) {
    memset(out_key, 0, 16);
    return;
  }
  memcpy(out_key, artifact->key, 16);
}

const char *t4a_nvrtc_artifact_key_hex(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->key_hex : "";
}

size_t t4a_nvrtc_artifact_num_lowered_names(const t4a_nvrtc_artifact *artifact) {
  return artifact != NULL ? artifact->num_names : 0;
}

t4a_status t4a_nvrtc_artifact_lowered_name_at(const t4a_nvrtc_artifact *artifact, size_t i,
                                              const char **out_expression,
                                              const char **out_lowered) {
  if (out_expression != NULL) *out_expression = NULL;
  if (out_lowered != NULL) *out_lowered = NULL;
  if (artifact == NULL || i >= artifact->num_names) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_artifact_lowered_name_at", 0, NULL, 0,
                          "index %zu is out of range (%zu name expressions)", i,
                          artifact != NULL ? artifact->num_names : 0);
  }
  if (out_expression != NULL) *out_expression = artifact->exprs[i];
  if (out_lowered != NULL) *out_lowered = artifact->lowered[i];
  return T4A_OK;
}

const char *t4a_nvrtc_artifact_lowered_name(const t4a_nvrtc_artifact *artifact,
                                            const char *expression) {
  if (artifact == NULL || expression == NULL) return NULL;
  for (size_t i = 0; i < artifact->num_names; i++) {
    if (strcmp(artifact->exprs[i], expression) == 0) return artifact->lowered[i];
  }
  return NULL;
}

/* ---- The compile core -------------------------------------------------------------------- */

/* NUL-terminated copies of everything NVRTC reads, in one block. */
typedef struct compile_inputs {
  char *block;
  const char *source, *name;
  const char **header_names, **header_contents, **options;
  const char **sorted; /* scratch for the duplicate checks */
  t4a_nvrtc_str *exprs, *lowered;
  size_t num_options;
} compile_inputs;

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char *copy_text(char **cursor, const char *p, size_t n) {
  char *d = *cursor;
  memcpy(d, p, n);
  d[n] = '\0';
  *cursor = d + n + 1;
  return d;
}

static const char k_include_path[] = "--include-path=";

static t4a_status build_inputs(const t4a_nvrtc_prepared *p, compile_inputs *in) {
  const t4a_nvrtc_request *r = p->req;
  size_t nh = r->num_headers, no = r->num_options + r->num_include_roots + p->num_implicit;
  size_t ne = r->num_name_expressions;
  size_t nsort = nh > ne ? nh : ne;
  /* The counts are at most T4A_NVRTC_MAX_ITEMS each, so the pointer arrays cannot overflow; the
   * text sizes are the caller's and are added with overflow checks. */
  size_t ptrs = 2 * nh + no + nsort;
  size_t total = ptrs * sizeof(char *) + 2 * ne * sizeof(t4a_nvrtc_str);
  int ok = grow(&total, p->source_bytes, 1) && grow(&total, 1, 1) &&
           grow(&total, p->program_name_bytes, 1) && grow(&total, 1, 1) &&
           grow(&total, strlen(p->name_prefix), 1);
  for (size_t i = 0; ok && i < nh; i++) {
    ok = grow(&total, t4a_nvrtc_header_name_bytes(&r->headers[i]), 1) && grow(&total, 1, 1) &&
         grow(&total, t4a_nvrtc_header_content_bytes(&r->headers[i]), 1) && grow(&total, 1, 1);
  }
  for (size_t i = 0; ok && i < r->num_options; i++) {
    ok = grow(&total, t4a_nvrtc_option_bytes(r, i), 1) && grow(&total, 1, 1);
  }
  for (size_t i = 0; ok && i < r->num_include_roots; i++) {
    ok = grow(&total, strlen(r->include_roots[i]), 1) && grow(&total, sizeof k_include_path, 1);
  }
  if (!ok) {
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "t4a_nvrtc_compile", 0, NULL, UINT64_MAX,
                          "the request's texts add up to more than the address space");
  }
  in->block = t4a_host_malloc(total);
  if (in->block == NULL) return T4A_HOST_OUT_OF_MEMORY;
  const char **pp = (const char **)(void *)in->block;
  in->header_names = pp;
  in->header_contents = pp + nh;
  in->options = pp + 2 * nh;
  in->sorted = pp + 2 * nh + no;
  in->exprs = (t4a_nvrtc_str *)(void *)(pp + ptrs);
  in->lowered = in->exprs + ne;
  char *cursor = (char *)(in->lowered + ne);
  in->source = copy_text(&cursor, r->source, p->source_bytes);
  {
    size_t pl = strlen(p->name_prefix);
    char *d = cursor;
    memcpy(d, p->name_prefix, pl);
    cursor += pl;
    copy_text(&cursor, p->program_name, p->program_name_bytes);
    in->name = d;
  }
  for (size_t i = 0; i < nh; i++) {
    const t4a_nvrtc_header *h = &r->headers[i];
    in->header_names[i] = copy_text(&cursor, h->name, t4a_nvrtc_header_name_bytes(h));
    in->header_contents[i] = copy_text(&cursor, h->content, t4a_nvrtc_header_content_bytes(h));
  }
  for (size_t i = 0; i < r->num_options; i++) {
    in->options[i] = copy_text(&cursor, r->options[i], t4a_nvrtc_option_bytes(r, i));
  }
  for (size_t i = 0; i < r->num_include_roots; i++) {
    char *d = cursor;
    size_t pl = sizeof k_include_path - 1, n = strlen(r->include_roots[i]);
    memcpy(d, k_include_path, pl);
    memcpy(d + pl, r->include_roots[i], n);
    d[pl + n] = '\0';
    cursor = d + pl + n + 1;
    in->options[r->num_options + i] = d;
  }
  for (size_t i = 0; i < p->num_implicit; i++) {
    in->options[r->num_options + r->num_include_roots + i] = p->implicit[i];
  }
  in->num_options = no;
  for (size_t i = 0; i < ne; i++) {
    in->exprs[i].p = r->name_expressions[i];
    in->exprs[i].n = strlen(r->name_expressions[i]);
  }
  /* Duplicates are ambiguous (which header does #include see? which lowered name is whose?).
   * Checked here, before NVRTC, and not on lookups: a request with duplicates never compiles, so
   * nothing is ever cached under it. */
  if (nh > 1) {
    memcpy(in->sorted, in->header_names, nh * sizeof(char *));
    qsort(in->sorted, nh, sizeof(char *), cmp_cstr);
    for (size_t i = 1; i < nh; i++) {
      if (strcmp(in->sorted[i - 1], in->sorted[i]) == 0) {
        return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                              "header name \"%.80s\" appears twice", in->sorted[i]);
      }
    }
  }
  if (ne > 1) {
    for (size_t i = 0; i < ne; i++) in->sorted[i] = r->name_expressions[i];
    qsort(in->sorted, ne, sizeof(char *), cmp_cstr);
    for (size_t i = 1; i < ne; i++) {
      if (strcmp(in->sorted[i - 1], in->sorted[i]) == 0) {
        return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0,
                              "name expression \"%.80s\" appears twice", in->sorted[i]);
      }
    }
  }
  return T4A_OK;
}

/* The first line of a log that mentions an error (else its first line), for the short
 * per-thread message. */
static void log_headline(const char *log, char *out, size_t size) {
  out[0] = '\0';
  if (log == NULL) return;
  const char *line = log, *pick = NULL;
  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    if (pick == NULL && len > 0) pick = line;
    if (len > 0 && memmem(line, len, "error", 5) != NULL) {
      pick = line;
      break;
    }
    if (end == NULL) break;
    line = end + 1;
  }
  if (pick == NULL) return;
  const char *end = strchr(pick, '\n');
  size_t len = end != NULL ? (size_t)(end - pick) : strlen(pick);
  snprintf(out, size, "%.*s", (int)len, pick);
}

/* Fetches the program's log into a heap string; failures leave *log empty and record nothing
 * (the caller's status is the one that matters). */
static void fetch_log(t4a_nvrtc_lib *lib, nvrtcProgram prog, const char *note, t4a_nvrtc_log *log) {
  t4a_error saved;
  t4a_error_last(&saved);
  size_t size = 0;
  if (lib->t.nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS) size = 0;
  size_t note_bytes = note != NULL ? strlen(note) : 0;
  char *text = size < SIZE_MAX / 2 ? t4a_host_malloc(size + note_bytes + 1) : NULL;
  if (text != NULL) {
    size_t used = 0;
    if (size > 0 && lib->t.nvrtcGetProgramLog(prog, text) == NVRTC_SUCCESS) {
      text[size - 1] = '\0'; /* the size counts NVRTC's terminating NUL */
      used = strlen(text);
    }
    if (note_bytes > 0) memcpy(text + used, note, note_bytes);
    text[used + note_bytes] = '\0';
    log->text = text;
    log->bytes = used + note_bytes;
  }
  t4a_nvrtc_error_restore(&saved);
}

static void count(t4a_nvrtc_lib *lib, t4a_counters *extra, t4a_counter_id id) {
  t4a_counter_add(&lib->counters, id, 1);
  if (extra != NULL) t4a_counter_add(extra, id, 1);
}

t4a_status t4a_nvrtc_compile_prepared(t4a_nvrtc_lib *lib, const t4a_nvrtc_lib *id,
                                      const t4a_nvrtc_prepared *p,
                                      const uint8_t key[16], t4a_counters *extra,
                                      t4a_nvrtc_artifact **out, t4a_nvrtc_log *log) {
  const t4a_nvrtc_request *r = p->req;
  const t4a_nvrtc_table *t = &lib->t;
  *out = NULL;
  log->text = NULL;
  log->bytes = 0;
  compile_inputs in = {0};
  nvrtcProgram prog = NULL;
  nvrtcResult res;
  t4a_status st = build_inputs(p, &in);
  if (st != T4A_OK) goto done;

  res = t->nvrtcCreateProgram(&prog, in.source, in.name, (int)r->num_headers, in.header_contents,
                              in.header_names);
  if (res != NVRTC_SUCCESS) {
    prog = NULL;
    st = t4a_nvrtc_fail(lib, res, "nvrtcCreateProgram", NULL);
    goto done;
  }
  for (size_t i = 0; i < r->num_name_expressions; i++) {
    res = t->nvrtcAddNameExpression(prog, r->name_expressions[i]);
    if (res != NVRTC_SUCCESS) {
      st = t4a_nvrtc_fail(lib, res, "nvrtcAddNameExpression", NULL);
      goto done;
    }
  }

  /* Counted exactly around the call (requirement A6). */
  count(lib, extra, T4A_COUNTER_nvrtc_compile_attempts);
  res = t->nvrtcCompileProgram(prog, (int)in.num_options, in.options);
  if (res == NVRTC_SUCCESS) count(lib, extra, T4A_COUNTER_nvrtc_compile_successes);

  if (res != NVRTC_SUCCESS) {
    fetch_log(lib, prog, NULL, log);
    char headline[200];
    log_headline(log->text, headline, sizeof headline);
    st = t4a_nvrtc_fail(lib, res, "nvrtcCompileProgram", headline[0] ? headline : NULL);
    goto done;
  }

  size_t log_size = 0, data_size = 0;
  res = t->nvrtcGetProgramLogSize(prog, &log_size);
  if (res != NVRTC_SUCCESS) {
    st = t4a_nvrtc_fail(lib, res, "nvrtcGetProgramLogSize", NULL);
    goto done;
  }
  const char *size_entry;
  switch (r->output) {
    case T4A_NVRTC_OUTPUT_CUBIN:
      size_entry = "nvrtcGetCUBINSize";
      res = t->nvrtcGetCUBINSize(prog, &data_size);
      break;
    case T4A_NVRTC_OUTPUT_LTOIR:
      size_entry = "nvrtcGetLTOIRSize";
      res = t->nvrtcGetLTOIRSize(prog, &data_size);
      break;
    default:
      size_entry = "nvrtcGetPTXSize";
      res = t->nvrtcGetPTXSize(prog, &data_size);
      break;
  }
  if (res != NVRTC_SUCCESS) {
    st = t4a_nvrtc_fail(lib, res, size_entry, NULL);
    goto done;
  }
  /* Requirement A3: an empty output is a compile error, reported here and never cached. A PTX size
   * counts its terminating NUL, so 1 is empty too. */
  if (data_size == 0 || (r->output == T4A_NVRTC_OUTPUT_PTX && data_size <= 1)) {
    count(lib, extra, T4A_COUNTER_nvrtc_empty_outputs);
    char note[256];
    snprintf(note, sizeof note, "t4a: NVRTC produced an empty %s for %s%s\n",
             t4a_nvrtc_output_name(r->output), p->target,
             p->virtual_arch && r->output == T4A_NVRTC_OUTPUT_CUBIN
                 ? " (a virtual architecture has no CUBIN: use sm_NN)"
                 : "");
    fetch_log(lib, prog, note, log);
    st = t4a_error_set_(T4A_COMPILE_FAILED, size_entry, 0, NULL, 0, "%.*s", (int)strlen(note) - 1,
                        note);
    goto done;
  }
  for (size_t i = 0; i < r->num_name_expressions; i++) {
    const char *lowered = NULL;
    res = t->nvrtcGetLoweredName(prog, r->name_expressions[i], &lowered);
    if (res != NVRTC_SUCCESS || lowered == NULL) {
      st = t4a_nvrtc_fail(lib, res != NVRTC_SUCCESS ? res : NVRTC_ERROR_INTERNAL_ERROR,
                          "nvrtcGetLoweredName", NULL);
      goto done;
    }
    in.lowered[i].p = lowered;
    in.lowered[i].n = strlen(lowered);
  }

  t4a_nvrtc_artifact_parts parts = {
      .output = r->output,
      .major = id->major,
      .minor = id->minor,
      .key = key,
      .target = {p->target, strlen(p->target)},
      .build_identity = {id->build_identity, strlen(id->build_identity)},
      .program_name = {p->program_name, p->program_name_bytes},
      .data = NULL,
      .data_bytes = data_size,
      .log = NULL,
      .log_bytes = log_size,
      .num_names = r->num_name_expressions,
      .exprs = in.exprs,
      .lowered = in.lowered,
  };
  uint8_t *data = NULL;
  char *logbuf = NULL;
  t4a_nvrtc_artifact *art = t4a_nvrtc_artifact_alloc(&parts, &data, &logbuf);
  if (art == NULL) {
    st = T4A_HOST_OUT_OF_MEMORY;
    goto done;
  }
  if (log_size > 0) {
    res = t->nvrtcGetProgramLog(prog, logbuf);
    if (res != NVRTC_SUCCESS) {
      t4a_nvrtc_artifact_release(art);
      st = t4a_nvrtc_fail(lib, res, "nvrtcGetProgramLog", NULL);
      goto done;
    }
    logbuf[log_size] = '\0';
    art->log_bytes = strlen(logbuf);
  }
  const char *get_entry;
  switch (r->output) {
    case T4A_NVRTC_OUTPUT_CUBIN:
      get_entry = "nvrtcGetCUBIN";
      res = t->nvrtcGetCUBIN(prog, (char *)data);
      break;
    case T4A_NVRTC_OUTPUT_LTOIR:
      get_entry = "nvrtcGetLTOIR";
      res = t->nvrtcGetLTOIR(prog, (char *)data);
      break;
    default:
      get_entry = "nvrtcGetPTX";
      res = t->nvrtcGetPTX(prog, (char *)data);
      break;
  }
  if (res != NVRTC_SUCCESS) {
    t4a_nvrtc_artifact_release(art);
    st = t4a_nvrtc_fail(lib, res, get_entry, NULL);
    goto done;
  }
  *out = art;
  st = T4A_OK;
done:
  if (prog != NULL) (void)t->nvrtcDestroyProgram(&prog);
  free(in.block);
  return st;
}

t4a_status t4a_nvrtc_compile_unkeyed_(t4a_nvrtc_lib *lib, const t4a_nvrtc_request *request,
                                      t4a_counters *extra, t4a_nvrtc_artifact **out,
                                      t4a_nvrtc_log *log) {
  t4a_nvrtc_prepared p;
  t4a_status st = t4a_nvrtc_prepare(lib, request, &p);
  if (st != T4A_OK) return st;
  uint8_t key[16];
  t4a_nvrtc_identity_key(lib, &p, key);
  st = t4a_nvrtc_compile_prepared(lib, lib, &p, key, extra, out, log);
  if (st == T4A_OK) t4a_nvrtc_artifact_key_content_(*out);
  return st;
}

t4a_status t4a_nvrtc_compile(t4a_nvrtc_lib *lib, const t4a_nvrtc_request *request,
                             t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  t4a_nvrtc_outcome_deinit(out_outcome);
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  t4a_nvrtc_log log = {NULL, 0};
  t4a_status st = t4a_nvrtc_compile_unkeyed_(lib, request, NULL, out, &log);
  t4a_nvrtc_outcome_set(out_outcome,
                        st == T4A_OK ? T4A_NVRTC_ORIGIN_COMPILED : T4A_NVRTC_ORIGIN_NONE, &log);
  return st;
}
