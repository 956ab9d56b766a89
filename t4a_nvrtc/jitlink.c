/* Linking LTO-IR artifacts with nvJitLink (one handle per call, destroyed on every path), the
 * link's identity record and key, and the link cache: a bounded LRU in memory over the record,
 * and the artifact cache's disk format (nvrtc_disk.c) for the disk level. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a/jitlink.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/jitlink_table.h"
#include "t4a_nvrtc/nvrtc_internal.h"

#define LINK_MAX_ITEMS 65536u
#define LINK_RECORD_MAGIC "t4a-jitlink-identity"
/* Bump when the record's fields or framing, or the options t4a adds, change. */
#define LINK_KEY_SCHEMA 1u
#define LINK_NAME_MAX 200
#define DEFAULT_MAX_ENTRIES 256u
#define DEFAULT_MAX_BYTES ((size_t)64 << 20)
#define DEFAULT_DISK_MAX_BYTES ((uint64_t)1 << 30)

/* ---- Validation ---------------------------------------------------------------------------- */

typedef struct link_prepared {
  const t4a_jitlink_request *req;
  char target[24];       /* "sm_90a" */
  char arch_option[40];  /* "-arch=sm_90a" */
  const char *implicit[2];
} link_prepared;

static t4a_status bad(const char *what) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0, "%s", what);
}

static t4a_status bad_at(const char *what, size_t i, const char *why) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0, "%s %zu %s", what,
                        i, why);
}

/* "sm_NN" with an optional a/f suffix: copies it into out. */
static int real_arch(const char *t, char *out, size_t out_size) {
  if (strncmp(t, "sm_", 3) != 0) return 0;
  const char *d = t + 3;
  size_t n = 0;
  while (d[n] >= '0' && d[n] <= '9') n++;
  if (n < 2 || n > 4) return 0;
  if (d[n] != '\0' && !((d[n] == 'a' || d[n] == 'f') && d[n + 1] == '\0')) return 0;
  size_t len = 3 + n + (d[n] != '\0'); /* at most 8 */
  if (len + 1 > out_size) return 0;
  memcpy(out, t, len);
  out[len] = '\0';
  return 1;
}

/* The real architecture of an input's target: sm_NN as is, compute_NN as sm_NN. */
static int arch_of_input(const char *t, char *out, size_t out_size) {
  char tmp[32];
  if (strncmp(t, "compute_", 8) == 0) {
    snprintf(tmp, sizeof tmp, "sm_%.20s", t + 8);
    tmp[sizeof tmp - 1] = '\0';
    return real_arch(tmp, out, out_size);
  }
  return real_arch(t, out, out_size);
}

static int has_control(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p < 0x20 || *p == 0x7f) return 1;
  }
  return 0;
}

static t4a_status prepare(const t4a_jitlink_request *req, link_prepared *lp) {
  memset(lp, 0, sizeof *lp);
  lp->req = req;
  if (req == NULL) return bad("the request is NULL");
  if (req->num_inputs == 0 || req->inputs == NULL) {
    return bad("a link needs at least one input");
  }
  if (req->num_inputs > LINK_MAX_ITEMS || req->num_options > LINK_MAX_ITEMS) {
    return t4a_error_set_(T4A_LIMIT_EXCEEDED, "t4a_jitlink_link", 0, NULL, 0,
                          "at most %u inputs and %u options", LINK_MAX_ITEMS, LINK_MAX_ITEMS);
  }
  if (req->num_options > 0 && req->options == NULL) {
    return bad("options is NULL with num_options > 0");
  }
  for (size_t i = 0; i < req->num_inputs; i++) {
    const t4a_nvrtc_artifact *a = req->inputs[i];
    if (a == NULL) return bad_at("input", i, "is NULL");
    if (a->output != T4A_NVRTC_OUTPUT_LTOIR) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0,
                            "input %zu (%.100s) is %s, not LTO-IR: nvJitLink links LTO-IR here "
                            "(compile it with T4A_NVRTC_OUTPUT_LTOIR)",
                            i, a->program_name, t4a_nvrtc_output_name(a->output));
    }
  }
  for (size_t i = 0; i < req->num_options; i++) {
    const char *o = req->options[i];
    if (o == NULL || o[0] == '\0') return bad_at("option", i, "is NULL or empty");
    if (has_control(o)) return bad_at("option", i, "contains a control character");
    if (strncmp(o, "-arch", 5) == 0 || strcmp(o, "-lto") == 0 || strcmp(o, "-ptx") == 0) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0,
                            "option %zu (%.60s) sets what t4a sets: the target is the request's "
                            "field, -lto and CUBIN output are t4a's",
                            i, o);
    }
  }
  if (req->target != NULL) {
    if (!real_arch(req->target, lp->target, sizeof lp->target)) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0,
                            "target \"%.40s\" is not a real architecture (sm_NN, sm_NNa, sm_NNf)",
                            req->target);
    }
  } else if (!arch_of_input(req->inputs[0]->target, lp->target, sizeof lp->target)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0,
                          "the first input's target \"%.40s\" names no architecture to link for",
                          req->inputs[0]->target);
  }
  snprintf(lp->arch_option, sizeof lp->arch_option, "-arch=%s", lp->target);
  lp->implicit[0] = lp->arch_option;
  lp->implicit[1] = "-lto";
  return T4A_OK;
}

/* The options a cached link accepts: they read and write no file and change the output only as
 * their text says (so the record sees them whole). */
static int cacheable_option(const char *o) {
  static const char *const exact[] = {"-g",       "-lineinfo", "-optimize-unused-variables",
                                      "-no-cache", "-verbose",  "-device-stack-protector",
                                      "-O0",      "-O1",       "-O2",
                                      "-O3",      "-O4"};
  static const char *const valued[] = {"-maxrregcount=",     "-ftz=",
                                       "-prec-div=",         "-prec-sqrt=",
                                       "-fma=",              "-kernels-used=",
                                       "-variables-used=",   "-jump-table-density=",
                                       "-split-compile=",    "-split-compile-extended="};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    if (strcmp(o, exact[i]) == 0) return 1;
  }
  for (size_t i = 0; i < sizeof valued / sizeof valued[0]; i++) {
    size_t n = strlen(valued[i]);
    if (strncmp(o, valued[i], n) == 0 && o[n] != '\0') return 1;
  }
  return 0;
}

static t4a_status check_cacheable(const link_prepared *lp) {
  for (size_t i = 0; i < lp->req->num_options; i++) {
    if (!cacheable_option(lp->req->options[i])) {
      return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_cache_link", 0, NULL, 0,
                            "option %zu (%.60s) is not one a cached link accepts (it may read a "
                            "file or is unknown to t4a): link uncached",
                            i, lp->req->options[i]);
    }
  }
  return T4A_OK;
}

/* ---- The identity record -------------------------------------------------------------------- */

typedef struct rec {
  uint8_t *buf; /* NULL: count only */
  size_t pos;
} rec;

static void r_bytes(rec *w, const void *p, size_t n) {
  if (w->buf != NULL && n > 0) memcpy(w->buf + w->pos, p, n);
  w->pos += n;
}

static void r_u64(rec *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  r_bytes(w, b, 8);
}

static void r_str(rec *w, const char *s) {
  size_t n = strlen(s);
  r_u64(w, n);
  r_bytes(w, s, n);
}

/* The record: magic, schema, nvJitLink's version and build identity, the target, the caller's
 * options, t4a's options, and per input its kind, key, XXH3-128 of its bytes and their count.
 * The content hash makes the record sound for inputs compiled outside the artifact cache (whose
 * key may not see every file the compile read); the key names the request that made it. */
static void emit(const t4a_jitlink_lib *lib, const link_prepared *lp, rec *w) {
  const t4a_jitlink_request *q = lp->req;
  r_str(w, LINK_RECORD_MAGIC);
  r_u64(w, LINK_KEY_SCHEMA);
  r_u64(w, lib->major);
  r_u64(w, lib->minor);
  r_str(w, lib->build_identity);
  r_str(w, lp->target);
  r_u64(w, q->num_options);
  for (size_t i = 0; i < q->num_options; i++) r_str(w, q->options[i]);
  r_u64(w, 2);
  r_str(w, lp->implicit[0]);
  r_str(w, lp->implicit[1]);
  r_u64(w, q->num_inputs);
  for (size_t i = 0; i < q->num_inputs; i++) {
    const t4a_nvrtc_artifact *a = q->inputs[i];
    r_u64(w, (uint64_t)a->output);
    r_bytes(w, a->key, 16);
    if (w->buf != NULL) {
      XXH128_canonical_t c;
      XXH128_canonicalFromHash(&c, XXH3_128bits(a->data, a->data_bytes));
      r_bytes(w, c.digest, 16);
    } else {
      w->pos += 16;
    }
    r_u64(w, a->data_bytes);
  }
}

/* Builds the record into `stack` when it fits, else on the heap (*heap, freed by the caller). */
static t4a_status build_record(const t4a_jitlink_lib *lib, const link_prepared *lp, uint8_t *stack,
                               size_t stack_size, uint8_t **record, size_t *bytes, uint8_t **heap,
                               uint8_t key[16]) {
  rec w = {NULL, 0};
  emit(lib, lp, &w);
  *heap = NULL;
  *bytes = w.pos;
  uint8_t *buf = stack;
  if (w.pos > stack_size) {
    buf = t4a_host_malloc(w.pos);
    if (buf == NULL) return T4A_HOST_OUT_OF_MEMORY;
    *heap = buf;
  }
  w.buf = buf;
  w.pos = 0;
  emit(lib, lp, &w);
  *record = buf;
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(buf, w.pos));
  memcpy(key, c.digest, 16);
  return T4A_OK;
}

/* ---- The link core --------------------------------------------------------------------------- */

/* Fetches the handle's error log into *log (heap); failures leave it empty and record nothing. */
static void fetch_error_log(t4a_jitlink_lib *lib, nvJitLinkHandle h, t4a_nvrtc_log *log) {
  if (h == NULL) return;
  t4a_error saved;
  t4a_error_last(&saved);
  size_t size = 0;
  if (lib->t.nvJitLinkGetErrorLogSize(h, &size) != NVJITLINK_SUCCESS) size = 0;
  char *text = size > 0 && size < SIZE_MAX / 2 ? t4a_host_malloc(size + 1) : NULL;
  if (text != NULL) {
    if (lib->t.nvJitLinkGetErrorLog(h, text) == NVJITLINK_SUCCESS) {
      text[size] = '\0';
      log->text = text;
      log->bytes = strlen(text);
    } else {
      free(text);
    }
  }
  t4a_nvrtc_error_restore(&saved);
}

/* The first non-empty line of a log, for the per-thread message. */
static void headline(const t4a_nvrtc_log *log, char *out, size_t size) {
  out[0] = '\0';
  if (log->text == NULL) return;
  const char *p = log->text;
  while (*p == '\n') p++;
  const char *end = strchr(p, '\n');
  size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
  snprintf(out, size, "%.*s", (int)n, p);
}

static void count(t4a_jitlink_lib *lib, t4a_counters *extra, t4a_counter_id id) {
  t4a_counter_add(&lib->counters, id, 1);
  if (extra != NULL) t4a_counter_add(extra, id, 1);
}

/* A failed call: its error log to *log, its headline in the detail. */
static t4a_status failed(t4a_jitlink_lib *lib, nvJitLinkHandle h, nvJitLinkResult r,
                         const char *entry, t4a_nvrtc_log *log) {
  fetch_error_log(lib, h, log);
  char head[200];
  headline(log, head, sizeof head);
  return t4a_jitlink_fail(r, entry, head);
}

/* The linked artifact's program name: the inputs' joined by '+', cut at LINK_NAME_MAX. */
static void joined_name(const t4a_jitlink_request *q, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < q->num_inputs && used + 1 < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s", i ? "+" : "", q->inputs[i]->program_name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

static t4a_status link_run(t4a_jitlink_lib *lib, const link_prepared *lp, const uint8_t key[16],
                           t4a_counters *extra, t4a_nvrtc_artifact **out, t4a_nvrtc_log *log) {
  const t4a_jitlink_request *q = lp->req;
  const t4a_jitlink_table *t = &lib->t;
  *out = NULL;
  log->text = NULL;
  log->bytes = 0;
  nvJitLinkHandle h = NULL;
  nvJitLinkResult r;
  t4a_status st = T4A_OK;
  char *info = NULL;
  t4a_nvrtc_str *names = NULL;
  size_t n_opts = q->num_options + 2;
  const char **opts = t4a_host_malloc(n_opts * sizeof *opts);
  if (opts == NULL) return T4A_HOST_OUT_OF_MEMORY;
  for (size_t i = 0; i < q->num_options; i++) opts[i] = q->options[i];
  opts[q->num_options] = lp->implicit[0];
  opts[q->num_options + 1] = lp->implicit[1];

  r = t->nvJitLinkCreate(&h, (uint32_t)n_opts, opts);
  if (r != NVJITLINK_SUCCESS) {
    st = failed(lib, h, r, "nvJitLinkCreate", log);
    goto out;
  }
  for (size_t i = 0; i < q->num_inputs; i++) {
    const t4a_nvrtc_artifact *a = q->inputs[i];
    r = t->nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, a->data, a->data_bytes, a->program_name);
    if (r != NVJITLINK_SUCCESS) {
      st = failed(lib, h, r, "nvJitLinkAddData", log);
      goto out;
    }
  }
  count(lib, extra, T4A_COUNTER_jitlink_links);
  r = t->nvJitLinkComplete(h);
  if (r != NVJITLINK_SUCCESS) {
    st = failed(lib, h, r, "nvJitLinkComplete", log);
    goto out;
  }
  count(lib, extra, T4A_COUNTER_jitlink_link_successes);
  size_t cubin_bytes = 0;
  r = t->nvJitLinkGetLinkedCubinSize(h, &cubin_bytes);
  if (r != NVJITLINK_SUCCESS) {
    st = failed(lib, h, r, "nvJitLinkGetLinkedCubinSize", log);
    goto out;
  }
  if (cubin_bytes == 0) {
    fetch_error_log(lib, h, log);
    st = t4a_error_set_(T4A_LINK_FAILED, "nvJitLinkGetLinkedCubinSize", 0, NULL, 0,
                        "nvJitLink produced an empty CUBIN for %s", lp->target);
    goto out;
  }
  size_t info_bytes = 0;
  r = t->nvJitLinkGetInfoLogSize(h, &info_bytes);
  if (r != NVJITLINK_SUCCESS) {
    st = failed(lib, h, r, "nvJitLinkGetInfoLogSize", log);
    goto out;
  }
  info = t4a_host_malloc(info_bytes + 1);
  if (info == NULL) {
    st = T4A_HOST_OUT_OF_MEMORY;
    goto out;
  }
  info[0] = '\0';
  if (info_bytes > 0) {
    r = t->nvJitLinkGetInfoLog(h, info);
    if (r != NVJITLINK_SUCCESS) {
      st = failed(lib, h, r, "nvJitLinkGetInfoLog", log);
      goto out;
    }
    info[info_bytes] = '\0';
  }

  /* Lowered names: every input's, first occurrence of each expression. */
  size_t total_names = 0;
  for (size_t i = 0; i < q->num_inputs; i++) total_names += q->inputs[i]->num_names;
  size_t num_names = 0;
  if (total_names > 0) {
    names = t4a_host_malloc(2 * total_names * sizeof *names);
    if (names == NULL) {
      st = T4A_HOST_OUT_OF_MEMORY;
      goto out;
    }
    for (size_t i = 0; i < q->num_inputs; i++) {
      const t4a_nvrtc_artifact *a = q->inputs[i];
      for (size_t k = 0; k < a->num_names; k++) {
        int seen = 0;
        for (size_t j = 0; j < num_names && !seen; j++) seen = strcmp(names[j].p, a->exprs[k]) == 0;
        if (seen) continue;
        names[num_names].p = a->exprs[k];
        names[num_names].n = strlen(a->exprs[k]);
        names[total_names + num_names].p = a->lowered[k];
        names[total_names + num_names].n = strlen(a->lowered[k]);
        num_names++;
      }
    }
  }
  char name[LINK_NAME_MAX + 1];
  joined_name(q, name, sizeof name);
  t4a_nvrtc_artifact_parts parts;
  memset(&parts, 0, sizeof parts);
  parts.output = T4A_NVRTC_OUTPUT_CUBIN;
  parts.major = (int)lib->major;
  parts.minor = (int)lib->minor;
  parts.key = key;
  parts.target = (t4a_nvrtc_str){lp->target, strlen(lp->target)};
  parts.build_identity = (t4a_nvrtc_str){lib->build_identity, strlen(lib->build_identity)};
  parts.program_name = (t4a_nvrtc_str){name, strlen(name)};
  parts.data = NULL;
  parts.data_bytes = cubin_bytes;
  parts.log = info;
  parts.log_bytes = strlen(info);
  parts.num_names = num_names;
  parts.exprs = names;
  parts.lowered = names != NULL ? names + total_names : NULL;
  uint8_t *data = NULL;
  t4a_nvrtc_artifact *art = t4a_nvrtc_artifact_alloc(&parts, &data, NULL);
  if (art == NULL) {
    st = T4A_HOST_OUT_OF_MEMORY;
    goto out;
  }
  r = t->nvJitLinkGetLinkedCubin(h, data);
  if (r != NVJITLINK_SUCCESS) {
    t4a_nvrtc_artifact_release(art);
    st = failed(lib, h, r, "nvJitLinkGetLinkedCubin", log);
    goto out;
  }
  *out = art;
out:
  if (h != NULL) {
    t4a_error saved;
    t4a_error_last(&saved);
    (void)t->nvJitLinkDestroy(&h); /* its failure would change nothing the caller can act on */
    t4a_nvrtc_error_restore(&saved);
  }
  free(names);
  free(info);
  free(opts);
  return st;
}

t4a_status t4a_jitlink_link(t4a_jitlink_lib *lib, const t4a_jitlink_request *request,
                            t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  t4a_nvrtc_outcome_deinit(out_outcome);
  if (out == NULL || lib == NULL) {
    if (out != NULL) *out = NULL;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_link", 0, NULL, 0,
                          "lib or out is NULL");
  }
  *out = NULL;
  link_prepared lp;
  t4a_status st = prepare(request, &lp);
  if (st != T4A_OK) return st;
  uint8_t stack[2048], key[16];
  uint8_t *record = NULL, *heap = NULL;
  size_t record_bytes = 0;
  st = build_record(lib, &lp, stack, sizeof stack, &record, &record_bytes, &heap, key);
  if (st != T4A_OK) return st;
  t4a_nvrtc_log log = {NULL, 0};
  st = link_run(lib, &lp, key, NULL, out, &log);
  free(heap);
  t4a_nvrtc_outcome_set(out_outcome, st == T4A_OK ? T4A_NVRTC_ORIGIN_COMPILED
                                                  : T4A_NVRTC_ORIGIN_NONE,
                        &log);
  return st;
}

/* ---- The link cache --------------------------------------------------------------------------- */

/* One link's slot. key and record are set before the entry is inserted and never change. An
 * in-flight entry (its owner is linking or reading the disk) is in the list but not in the
 * bounds' figures and never evicted; threads that find it wait on the cache's condition
 * variable. refs counts the list's membership and every waiter; the entry is freed at zero. */
typedef struct lentry {
  uint8_t key[16];
  uint8_t *record;
  size_t record_bytes;
  int inflight, failed, in_list, refs;
  t4a_nvrtc_artifact *art; /* ready: the entry's own reference */
  size_t charge;
  struct lentry *prev, *next; /* most recent first */
} lentry;

struct t4a_jitlink_cache {
  t4a_jitlink_lib *lib;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lentry lru; /* sentinel */
  size_t num, bytes, max_entries, max_bytes; /* ready entries only */
  int waiting;                               /* threads waiting for an in-flight link */
  t4a_counters counters;
  int has_disk;
  t4a_nvrtc_disk disk;
};

static void lentry_free(lentry *e) {
  t4a_nvrtc_artifact_release(e->art);
  free(e->record);
  free(e);
}

static void lentry_unref(lentry *e) {
  if (--e->refs == 0) lentry_free(e);
}

static void lru_unlink(lentry *e) {
  e->prev->next = e->next;
  e->next->prev = e->prev;
}

static void lru_front(t4a_jitlink_cache *c, lentry *e) {
  e->next = c->lru.next;
  e->prev = &c->lru;
  c->lru.next->prev = e;
  c->lru.next = e;
}

/* Takes an entry out of the list (and, if ready, out of the figures); caller holds the mutex. */
static void list_remove(t4a_jitlink_cache *c, lentry *e) {
  lru_unlink(e);
  e->in_list = 0;
  if (!e->inflight && !e->failed) {
    c->num--;
    c->bytes -= e->charge;
  }
  lentry_unref(e);
}

/* The entry of a record, moved to the front; caller holds the mutex. */
static lentry *find(t4a_jitlink_cache *c, const uint8_t key[16], const uint8_t *record,
                    size_t record_bytes) {
  for (lentry *e = c->lru.next; e != &c->lru; e = e->next) {
    if (memcmp(e->key, key, 16) == 0 && e->record_bytes == record_bytes &&
        memcmp(e->record, record, record_bytes) == 0) {
      lru_unlink(e);
      lru_front(c, e);
      return e;
    }
  }
  return NULL;
}

t4a_status t4a_jitlink_cache_create(t4a_jitlink_lib *lib, const t4a_jitlink_cache_options *options,
                                    t4a_jitlink_cache **out) {
  if (out == NULL || lib == NULL) {
    if (out != NULL) *out = NULL;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_cache_create", 0, NULL, 0,
                          "lib or out is NULL");
  }
  *out = NULL;
  t4a_jitlink_cache_options o = T4A_JITLINK_CACHE_OPTIONS_INIT;
  if (options != NULL) o = *options;
  t4a_jitlink_cache *c = t4a_host_calloc(1, sizeof *c);
  if (c == NULL) return T4A_HOST_OUT_OF_MEMORY;
  c->max_entries = o.max_entries != 0 ? o.max_entries : DEFAULT_MAX_ENTRIES;
  c->max_bytes = o.max_bytes != 0 ? o.max_bytes : DEFAULT_MAX_BYTES;
  c->lru.next = c->lru.prev = &c->lru;
  int rc = t4a_fault_sim(T4A_FAULT_MUTEX_INIT) ? ENOMEM : pthread_mutex_init(&c->mu, NULL);
  if (rc != 0) {
    free(c);
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_mutex_init", rc, NULL, 0,
                          "pthread_mutex_init failed: %s", strerror(rc));
  }
  rc = t4a_fault_sim(T4A_FAULT_MUTEX_INIT) ? ENOMEM : pthread_cond_init(&c->cv, NULL);
  if (rc != 0) {
    pthread_mutex_destroy(&c->mu);
    free(c);
    return t4a_error_set_(T4A_HOST_OUT_OF_MEMORY, "pthread_cond_init", rc, NULL, 0,
                          "pthread_cond_init failed: %s", strerror(rc));
  }
  if (o.disk_dir != NULL) {
    t4a_status st = t4a_nvrtc_disk_init(
        &c->disk, o.disk_dir, o.disk_max_bytes != 0 ? o.disk_max_bytes : DEFAULT_DISK_MAX_BYTES,
        o.disk_fsync);
    if (st != T4A_OK) {
      pthread_cond_destroy(&c->cv);
      pthread_mutex_destroy(&c->mu);
      free(c);
      return st;
    }
    c->has_disk = 1;
  }
  t4a_jitlink_lib_retain(lib);
  c->lib = lib;
  *out = c;
  return T4A_OK;
}

void t4a_jitlink_cache_destroy(t4a_jitlink_cache *cache) {
  if (cache == NULL) return;
  lentry *e = cache->lru.next;
  while (e != &cache->lru) {
    lentry *next = e->next;
    lentry_free(e); /* no call is in progress: only the list holds it */
    e = next;
  }
  pthread_cond_destroy(&cache->cv);
  pthread_mutex_destroy(&cache->mu);
  if (cache->has_disk) t4a_nvrtc_disk_deinit(&cache->disk);
  t4a_jitlink_lib_release(cache->lib);
  free(cache);
}

int t4a_jitlink_cache_waiting(t4a_jitlink_cache *cache) {
  pthread_mutex_lock(&cache->mu);
  int n = cache->waiting;
  pthread_mutex_unlock(&cache->mu);
  return n;
}

void t4a_jitlink_cache_stats(const t4a_jitlink_cache *cache, struct t4a_jitlink_cache_stats *out) {
  if (out == NULL) return;
  memset(out, 0, sizeof *out);
  t4a_counters_stats(cache != NULL ? &cache->counters : NULL, &out->counters);
  if (cache == NULL) return;
  t4a_jitlink_cache *c = (t4a_jitlink_cache *)cache; /* the lock only */
  pthread_mutex_lock(&c->mu);
  out->memory_entries = c->num;
  out->memory_bytes = c->bytes;
  pthread_mutex_unlock(&c->mu);
}

/* Makes the owner's in-flight entry ready with `art` (or drops it when larger than the whole
 * level) and keeps the level within its bounds. Caller holds the mutex. */
static void publish_ready(t4a_jitlink_cache *c, lentry *e, t4a_nvrtc_artifact *art) {
  t4a_nvrtc_artifact_retain(art);
  e->art = art;
  e->inflight = 0;
  e->charge = art->total_bytes + e->record_bytes + sizeof *e;
  if (e->charge > c->max_bytes) {
    e->failed = 1; /* not kept: out of the list, out of no figures */
    list_remove(c, e);
    return;
  }
  c->num++;
  c->bytes += e->charge;
  while (c->num > c->max_entries || c->bytes > c->max_bytes) {
    lentry *victim = c->lru.prev;
    while (victim != &c->lru && (victim->inflight || victim == e)) victim = victim->prev;
    if (victim == &c->lru) break; /* cannot happen: e alone fits both bounds */
    t4a_counter_add(&c->counters, T4A_COUNTER_jitlink_mem_evictions, 1);
    list_remove(c, victim);
  }
}

/* A new in-flight entry for the record (NULL when it cannot be allocated: the call then links
 * without caching). */
static lentry *new_entry(const uint8_t key[16], const uint8_t *record, size_t record_bytes) {
  t4a_error saved;
  t4a_error_last(&saved);
  lentry *e = t4a_host_calloc(1, sizeof *e);
  uint8_t *copy = e != NULL ? t4a_host_malloc(record_bytes) : NULL;
  if (copy == NULL) {
    free(e);
    t4a_nvrtc_error_restore(&saved);
    return NULL;
  }
  memcpy(copy, record, record_bytes);
  memcpy(e->key, key, 16);
  e->record = copy;
  e->record_bytes = record_bytes;
  e->inflight = 1;
  return e;
}

t4a_status t4a_jitlink_cache_link(t4a_jitlink_cache *cache, const t4a_jitlink_request *request,
                                  t4a_nvrtc_artifact **out, t4a_nvrtc_outcome *out_outcome) {
  t4a_nvrtc_outcome_deinit(out_outcome);
  if (out == NULL || cache == NULL) {
    if (out != NULL) *out = NULL;
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_jitlink_cache_link", 0, NULL, 0,
                          "cache or out is NULL");
  }
  *out = NULL;
  t4a_jitlink_lib *lib = cache->lib;
  link_prepared lp;
  t4a_status st = prepare(request, &lp);
  if (st == T4A_OK) st = check_cacheable(&lp);
  if (st != T4A_OK) return st;
  uint8_t stack[2048], key[16];
  uint8_t *record = NULL, *heap = NULL;
  size_t record_bytes = 0;
  st = build_record(lib, &lp, stack, sizeof stack, &record, &record_bytes, &heap, key);
  if (st != T4A_OK) return st;

  t4a_nvrtc_log log = {NULL, 0};
  t4a_nvrtc_origin origin = T4A_NVRTC_ORIGIN_MEMORY;
  t4a_nvrtc_artifact *art = NULL;
  lentry *mine = NULL;
  int joined = 0;
  pthread_mutex_lock(&cache->mu);
  for (;;) {
    lentry *e = find(cache, key, record, record_bytes);
    if (e != NULL && e->inflight) { /* another thread links it: wait for its result */
      joined = 1;
      e->refs++;
      cache->waiting++;
      while (e->inflight) pthread_cond_wait(&cache->cv, &cache->mu);
      cache->waiting--;
      int ready = e->art != NULL; /* kept, or too large to keep: handed to the waiters */
      if (ready) {
        art = e->art;
        t4a_nvrtc_artifact_retain(art);
      }
      lentry_unref(e);
      if (ready) break;
      continue; /* its link failed (never cached): look again, and link if nobody does */
    }
    if (e != NULL) {
      art = e->art;
      t4a_nvrtc_artifact_retain(art);
      break;
    }
    if (mine == NULL) { /* a miss: build the in-flight entry outside the mutex, look again */
      pthread_mutex_unlock(&cache->mu);
      mine = new_entry(key, record, record_bytes);
      pthread_mutex_lock(&cache->mu);
      if (mine == NULL) break; /* no memory for the entry: link uncached */
      continue;
    }
    mine->refs = 1;
    mine->in_list = 1;
    lru_front(cache, mine);
    break;
  }
  pthread_mutex_unlock(&cache->mu);
  if (art != NULL) {
    if (mine != NULL) lentry_free(mine); /* built for a miss that another thread filled */
    t4a_counter_add(&cache->counters,
                    joined ? T4A_COUNTER_jitlink_mem_joins : T4A_COUNTER_jitlink_mem_hits, 1);
    origin = joined ? T4A_NVRTC_ORIGIN_JOINED : T4A_NVRTC_ORIGIN_MEMORY;
  } else {
    /* This thread owns the link (mine in the list, or NULL: uncached). */
    t4a_counter_add(&cache->counters, T4A_COUNTER_jitlink_mem_misses, 1);
    origin = T4A_NVRTC_ORIGIN_DISK;
    if (cache->has_disk) {
      art = t4a_nvrtc_disk_lookup_record(&cache->disk, record, record_bytes,
                                         T4A_NVRTC_OUTPUT_CUBIN, (int)lib->major,
                                         (int)lib->minor, lib->build_identity, key,
                                         &cache->counters);
    }
    if (art == NULL) {
      origin = T4A_NVRTC_ORIGIN_COMPILED;
      st = link_run(lib, &lp, key, &cache->counters, &art, &log);
    }
    if (mine != NULL) {
      pthread_mutex_lock(&cache->mu);
      if (st == T4A_OK) {
        publish_ready(cache, mine, art);
      } else {
        mine->inflight = 0;
        mine->failed = 1;
        list_remove(cache, mine); /* never cached: the next call links again */
      }
      pthread_cond_broadcast(&cache->cv);
      pthread_mutex_unlock(&cache->mu);
    }
    if (st == T4A_OK && origin == T4A_NVRTC_ORIGIN_COMPILED && cache->has_disk) {
      t4a_nvrtc_disk_store(&cache->disk, art, record, record_bytes, &cache->counters);
    }
  }
  free(heap);
  *out = art;
  t4a_nvrtc_outcome_set(out_outcome, st == T4A_OK ? origin : T4A_NVRTC_ORIGIN_NONE, &log);
  return st;
}
