/* What a cached compile may read. The key covers the request's bytes; anything NVRTC reads from
 * elsewhere would make a hit stale. So a cached compile accepts
 *
 *   - only options known to read no file: an allowlist (k_options), with the value given to
 *     ptxas checked against a second one (k_ptxas), since ptxas reads options files;
 *   - only includes the key sees: every #include, #include_next, #import and #embed directive and
 *     every __has_include, __has_include_next and __has_embed of the source, of every header, of
 *     every -D definition and of every string literal that could become a pragma's operand must
 *     name one of the request's headers with a literal. NVRTC 13
 *     given no -I and --no-source-include resolves nothing else (no system header, no directory
 *     of the program name or of a header: measured), except an absolute path, which it opens.
 *
 * The include check is lexical and strict: it lexes each text as NVRTC's front end would in the
 * request's dialect (line splices, comments, string, character and raw string literals, digraphs,
 * trigraphs where the dialect has them) and does not evaluate the preprocessor, so an include in
 * a group that #if skips counts too, and a macro operand is refused whatever it expands to. Since
 * `##` can paste __has_include together from pieces, a request that pastes anywhere may not
 * also spell a piece of it (an identifier that is a proper prefix of __has_include_next or
 * __has_embed, such as `__has_`).
 *
 * Both checks depend only on bytes the identity record holds, so an entry of either cache level
 * is a request that passed them (entries of key schemas before 2, written before the checks
 * existed, never match). The cache checks the options before its lookup (they are few) and the
 * includes only before it compiles: a lexical pass over the whole request costs about as much as
 * reading it, which a disk hit should not pay. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_predefined.h"

/* The macros NVRTC predefines that can paste a caller's tokens, sorted (strcmp), and NVRTC's own
 * definitions of each (normalized as def_normalize does; one per line). */
#define PREDEFINED_NAME_(n, defs) #n,
static const char *const k_predefined[] = {T4A_NVRTC_PREDEFINED_PASTERS(PREDEFINED_NAME_)};
#undef PREDEFINED_NAME_
#define PREDEFINED_DEFS_(n, defs) defs,
static const char *const k_predefined_defs[] = {T4A_NVRTC_PREDEFINED_PASTERS(PREDEFINED_DEFS_)};
#undef PREDEFINED_DEFS_
#define NUM_PREDEFINED (sizeof k_predefined / sizeof k_predefined[0])
_Static_assert(NUM_PREDEFINED <= 64, "scan.predefined_used has a bit per predefined paster");

/* Every #define of NVRTC's built-in headers (nvrtc_predefined.h), which a check with roots reads
 * as if a text defined them, ahead of the texts' own (design §11, "Macros NVRTC predefines"). */
#define BUILTIN_MACRO_(n, params, body) \
  {n, params, body, sizeof n - 1, sizeof params - 1, sizeof body - 1, sizeof params > 1},
static const t4a_nvrtc_macro_ k_builtin_macros[] = {T4A_NVRTC_BUILTIN_DEFINES(BUILTIN_MACRO_)};
#undef BUILTIN_MACRO_
#define NUM_BUILTIN_MACROS (sizeof k_builtin_macros / sizeof k_builtin_macros[0])

/* The built-ins whose paste with a fixed operand could make __has_include out of a parameter of
 * several tokens (`__location__`'s `__ ## a ## __` with `has_include(...) y`): a text that names
 * one counts as pasting, so the piece rules and the expansion see NVRTC's `__`. NULL-ended. */
#define BUILTIN_TARGET_PASTER_(n) n,
static const char *const k_builtin_target_pasters[] = {
    T4A_NVRTC_BUILTIN_TARGET_PASTERS(BUILTIN_TARGET_PASTER_) NULL};
#undef BUILTIN_TARGET_PASTER_

/* The reserved names the compiler itself predefines (probed with NVRTC by the generator), sorted:
 * a text's definition of one may not be the one applied (a dead branch, a later #define), and
 * the compiler's value may depend on the options (__cplusplus, __CUDA_ARCH__). */
#define COMPILER_PREDEFINED_(n) n,
static const char *const k_compiler_predefined[] = {
    T4A_NVRTC_COMPILER_PREDEFINED(COMPILER_PREDEFINED_)};
#undef COMPILER_PREDEFINED_
#define NUM_COMPILER_PREDEFINED (sizeof k_compiler_predefined / sizeof k_compiler_predefined[0])

/* The index of p[0..n) in the sorted (strcmp) list[0..count), or -1. */
static int sorted_index(const char *const *list, size_t count, const char *p, size_t n) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strncmp(list[mid], p, n);
    if (c == 0 && list[mid][n] != '\0') c = 1;
    if (c == 0) return (int)mid;
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

static int compiler_predefined(const char *p, size_t n) {
  return sorted_index(k_compiler_predefined, NUM_COMPILER_PREDEFINED, p, n) >= 0;
}

/* Every identifier of NVRTC's own bodies that is not a parameter, and the first macro whose body
 * holds it (nvrtc_predefined.h). */
#define BUILTIN_BODY_NAME_(n, macro) {n, macro},
static const char *const k_builtin_body_names[][2] = {
    T4A_NVRTC_BUILTIN_BODY_NAMES(BUILTIN_BODY_NAME_)};
#undef BUILTIN_BODY_NAME_
#define NUM_BUILTIN_BODY_NAMES (sizeof k_builtin_body_names / sizeof k_builtin_body_names[0])

static int builtin_target_paster(const char *p, size_t n) {
  for (const char *const *b = k_builtin_target_pasters; *b != NULL; b++) {
    if (strlen(*b) == n && memcmp(*b, p, n) == 0) return 1;
  }
  return 0;
}

/* A sieve before the search: a bit per hash of the first three bytes of every name (NV_, _NV,
 * __C for NVRTC 13.0's), so that most identifiers of the toolkit's headers, which start with _
 * too, are answered by one load. Made once, on first use (idempotent: a racing thread makes the
 * same words). */
#define PREDEFINED_SIEVE_BITS 256u
static _Atomic uint64_t g_predefined_sieve[PREDEFINED_SIEVE_BITS / 64];
static _Atomic int g_predefined_sieve_made;

static unsigned prefix_bit(const char *p) {
  unsigned h = (unsigned char)p[0] * 961u + (unsigned char)p[1] * 31u + (unsigned char)p[2];
  return h % PREDEFINED_SIEVE_BITS;
}

static int predefined_sieve_has(const char *p) {
  if (!atomic_load_explicit(&g_predefined_sieve_made, memory_order_acquire)) {
    for (size_t i = 0; i < NUM_PREDEFINED; i++) {
      unsigned b = prefix_bit(k_predefined[i]); /* (every name has 6 bytes or more) */
      atomic_fetch_or_explicit(&g_predefined_sieve[b / 64], 1ull << (b % 64), memory_order_relaxed);
    }
    atomic_store_explicit(&g_predefined_sieve_made, 1, memory_order_release);
  }
  unsigned b = prefix_bit(p);
  return (atomic_load_explicit(&g_predefined_sieve[b / 64], memory_order_relaxed) >> (b % 64)) & 1;
}

/* The index of p[0..n) in k_predefined, or -1. */
static int predefined_index(const char *p, size_t n) {
  if (n < 6 || !predefined_sieve_has(p)) return -1;
  return sorted_index(k_predefined, NUM_PREDEFINED, p, n);
}

#define REFUSE_REQUEST(...) \
  t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_request", 0, NULL, 0, __VA_ARGS__)
#define REFUSE(...) \
  t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0, __VA_ARGS__)

/* ---- Options ------------------------------------------------------------------------------ */

typedef enum opt_arg {
  ARG_NONE,     /* a switch */
  ARG_REQUIRED, /* "--name=value", or the next element when written "--name" */
} opt_arg;

typedef enum opt_kind {
  K_SAFE,   /* reads and writes no file */
  K_PTXAS,  /* its value goes to ptxas and is checked against k_ptxas */
  K_DEFINE, /* -D: its text is lexed for includes like the source */
  K_STD,    /* the dialect, which decides how the texts are lexed */
  K_FILE,   /* reads or writes a file: refused */
} opt_kind;

typedef struct known_option {
  const char *name;       /* long spelling, after "--" */
  const char *short_name; /* short spelling, after "-" */
  opt_arg arg;
  opt_kind kind;
  const char *why; /* K_FILE: what it does */
} known_option;

/* Every option of NVRTC 13.0 (nvrtc.h, "Supported Compile Options"; whether each takes a value
 * was measured: NVRTC takes the next element as the value of most that do). The options t4a owns
 * (-arch, -dlto, -optix-ir, -fdevice-syntax-only) never get here: t4a_nvrtc_prepare refuses
 * them for every compile. */
static const known_option k_options[] = {
    {"device-c", "dc", ARG_NONE, K_SAFE, NULL},
    {"device-w", "dw", ARG_NONE, K_SAFE, NULL},
    {"relocatable-device-code", "rdc", ARG_REQUIRED, K_SAFE, NULL},
    {"extensible-whole-program", "ewp", ARG_NONE, K_SAFE, NULL},
    {"device-debug", "G", ARG_NONE, K_SAFE, NULL},
    {"generate-line-info", "lineinfo", ARG_NONE, K_SAFE, NULL},
    {"dopt", "dopt", ARG_REQUIRED, K_SAFE, NULL},
    {"Ofast-compile", "Ofc", ARG_REQUIRED, K_SAFE, NULL},
    {"ptxas-options", "Xptxas", ARG_REQUIRED, K_PTXAS, NULL},
    {"maxrregcount", "maxrregcount", ARG_REQUIRED, K_SAFE, NULL},
    {"ftz", "ftz", ARG_REQUIRED, K_SAFE, NULL},
    {"prec-sqrt", "prec-sqrt", ARG_REQUIRED, K_SAFE, NULL},
    {"prec-div", "prec-div", ARG_REQUIRED, K_SAFE, NULL},
    {"fmad", "fmad", ARG_REQUIRED, K_SAFE, NULL},
    {"use_fast_math", "use_fast_math", ARG_NONE, K_SAFE, NULL},
    {"extra-device-vectorization", "extra-device-vectorization", ARG_NONE, K_SAFE, NULL},
    {"modify-stack-limit", "modify-stack-limit", ARG_REQUIRED, K_SAFE, NULL},
    {"gen-opt-lto", "gen-opt-lto", ARG_NONE, K_SAFE, NULL},
    {"jump-table-density", "jtd", ARG_REQUIRED, K_SAFE, NULL},
    {"device-stack-protector", "device-stack-protector", ARG_REQUIRED, K_SAFE, NULL},
    {"no-cache", "no-cache", ARG_NONE, K_SAFE, NULL},
    {"frandom-seed", "frandom-seed", ARG_REQUIRED, K_SAFE, NULL},
    {"define-macro", "D", ARG_REQUIRED, K_DEFINE, NULL},
    {"undefine-macro", "U", ARG_REQUIRED, K_SAFE, NULL},
    {"no-source-include", "no-source-include", ARG_NONE, K_SAFE, NULL},
    {"std", "std", ARG_REQUIRED, K_STD, NULL},
    {"builtin-move-forward", "builtin-move-forward", ARG_REQUIRED, K_SAFE, NULL},
    {"builtin-initializer-list", "builtin-initializer-list", ARG_REQUIRED, K_SAFE, NULL},
    {"disable-warnings", "w", ARG_NONE, K_SAFE, NULL},
    {"restrict", "restrict", ARG_NONE, K_SAFE, NULL},
    {"device-as-default-execution-space", "default-device", ARG_NONE, K_SAFE, NULL},
    {"device-int128", "device-int128", ARG_NONE, K_SAFE, NULL},
    {"device-float128", "device-float128", ARG_NONE, K_SAFE, NULL},
    {"optimization-info", "opt-info", ARG_REQUIRED, K_SAFE, NULL},
    {"display-error-number", "err-no", ARG_NONE, K_SAFE, NULL},
    {"no-display-error-number", "no-err-no", ARG_NONE, K_SAFE, NULL},
    {"diag-error", "diag-error", ARG_REQUIRED, K_SAFE, NULL},
    {"diag-suppress", "diag-suppress", ARG_REQUIRED, K_SAFE, NULL},
    {"diag-warn", "diag-warn", ARG_REQUIRED, K_SAFE, NULL},
    {"brief-diagnostics", "brief-diag", ARG_REQUIRED, K_SAFE, NULL},
    {"split-compile", "split-compile", ARG_REQUIRED, K_SAFE, NULL},
    {"minimal", "minimal", ARG_NONE, K_SAFE, NULL},
    /* Refused: they read or write files. */
    {"include-path", "I", ARG_REQUIRED, K_FILE, "adds an include path (NVRTC reads files there)"},
    {"pre-include", "include", ARG_REQUIRED, K_FILE, "pre-includes a file"},
    {"pch", "pch", ARG_NONE, K_FILE, "uses precompiled headers (reads and writes files)"},
    {"create-pch", "create-pch", ARG_REQUIRED, K_FILE, "writes a precompiled header"},
    {"use-pch", "use-pch", ARG_REQUIRED, K_FILE, "reads a precompiled header"},
    {"pch-dir", "pch-dir", ARG_REQUIRED, K_FILE, "names a precompiled-header directory"},
    {"pch-verbose", "pch-verbose", ARG_REQUIRED, K_FILE, "configures precompiled headers"},
    {"pch-messages", "pch-messages", ARG_REQUIRED, K_FILE, "configures precompiled headers"},
    {"instantiate-templates-in-pch", "instantiate-templates-in-pch", ARG_REQUIRED, K_FILE,
     "configures precompiled headers"},
    {"time", "time", ARG_REQUIRED, K_FILE, "writes a file that a cache hit would not write"},
    {"fdevice-time-trace", "fdevice-time-trace", ARG_REQUIRED, K_FILE,
     "writes a file that a cache hit would not write"},
};

/* The ptxas options (ptxas --help, CUDA 13.0) that read and write no file. Not here, and so
 * refused: --options-file (-optf), --output-file (-o), --gpu-name (-arch: the request's target
 * says it), and the informational ones. -O<N> is accepted as well. */
static const char *const k_ptxas[][2] = {
    {"Ofast-compile", "Ofc"},
    {"allow-expensive-optimizations", "allow-expensive-optimizations"},
    {"compile-as-tools-patch", "astoolspatch"},
    {"compile-only", "c"},
    {"compiler-annotations", "annotate"},
    {"def-load-cache", "dlcm"},
    {"def-store-cache", "dscm"},
    {"device-debug", "g"},
    {"device-function-maxrregcount", "func-maxrregcount"},
    {"device-stack-protector", "device-stack-protector"},
    {"disable-optimizer-constants", "disable-optimizer-consts"},
    {"disable-warnings", "w"},
    {"dont-merge-basicblocks", "no-bb-merge"},
    {"entry", "e"},
    {"extensible-whole-program", "ewp"},
    {"fmad", "fmad"},
    {"force-load-cache", "flcm"},
    {"force-store-cache", "fscm"},
    {"g-tensor-memory-access-check", "g-tmem-access-check"},
    {"generate-line-info", "lineinfo"},
    {"gno-tensor-memory-access-check", "gno-tmem-access-check"},
    {"input-as-string", "ias"},
    {"legacy-bar-warp-wide-behavior", "legacy-bar-warp-wide-behavior"},
    {"machine", "m"},
    {"make-errors-visible-at-exit", "make-errors-visible-at-exit"},
    {"maxntid", "maxntid"},
    {"maxrregcount", "maxrregcount"},
    {"minnctapersm", "minnctapersm"},
    {"opt-level", "O"},
    {"optimize-float-atomics", "opt-fp-atomics"},
    {"override-directive-values", "override-directive-values"},
    {"position-independent-code", "pic"},
    {"preserve-relocs", "preserve-relocs"},
    {"register-usage-level", "regUsageLevel"},
    {"return-at-end", "ret-end"},
    {"sanitize", "sanitize"},
    {"sp-bounds-check", "sp-bounds-check"},
    {"split-compile", "split-compile"},
    {"suppress-async-bulk-multicast-advisory-warning",
     "suppress-async-bulk-multicast-advisory-warning"},
    {"suppress-debug-info", "suppress-debug-info"},
    {"suppress-double-demote-warning", "suppress-double-demote-warning"},
    {"suppress-sparse-mma-advisory-info", "suppress-sparse-mma-advisory-info"},
    {"suppress-stack-size-warning", "suppress-stack-size-warning"},
    {"verbose", "v"},
    {"warn-on-double-precision-use", "warn-double-usage"},
    {"warn-on-local-memory-usage", "warn-lmem-usage"},
    {"warn-on-spills", "warn-spills"},
    {"warning-as-error", "Werror"},
};

static int span_is(const char *p, size_t n, const char *word) {
  return strlen(word) == n && memcmp(p, word, n) == 0;
}

/* Why a value given to ptxas is refused, or NULL. ptxas matches its option names exactly
 * (measured: no abbreviations, and a long name needs two dashes), and NVRTC hands it the value as
 * one argument. */
static const char *ptxas_refusal(const char *v, size_t n) {
  if (n == 0 || v[0] != '-') return "is not a ptxas option (ptxas could read it as a file)";
  size_t d = n > 1 && v[1] == '-' ? 2 : 1;
  size_t end = d;
  while (end < n && v[end] != '=') end++;
  const char *name = v + d;
  size_t len = end - d;
  if ((d == 2 && span_is(name, len, "options-file")) || (d == 1 && span_is(name, len, "optf"))) {
    return "names a ptxas options file, which ptxas reads";
  }
  if ((d == 2 && span_is(name, len, "output-file")) || (d == 1 && span_is(name, len, "o"))) {
    return "names a ptxas output file";
  }
  if (d == 1 && len >= 2 && name[0] == 'O') { /* -O3 */
    size_t i = 1;
    while (i < len && name[i] >= '0' && name[i] <= '9') i++;
    if (i == len) return NULL;
  }
  for (size_t i = 0; i < sizeof k_ptxas / sizeof k_ptxas[0]; i++) {
    if (span_is(name, len, k_ptxas[i][d == 2 ? 0 : 1])) return NULL;
  }
  return "is not a ptxas option t4a knows to read no file";
}

/* The dialect decides how a text is lexed (measured with NVRTC 13.0: trigraphs up to C++14, raw
 * strings from C++11, digit separators from C++14; C++17 is the default). */
typedef struct dialect {
  int trigraphs, raw_strings, digit_separators;
} dialect;

static void set_dialect(dialect *d, const char *v, size_t n) {
  int year = 17;
  if (n == 5 && memcmp(v, "c++", 3) == 0 && v[3] >= '0' && v[3] <= '9' && v[4] >= '0' &&
      v[4] <= '9') {
    year = (v[3] - '0') * 10 + (v[4] - '0');
  }
  d->trigraphs = year == 3 || year == 11 || year == 14;
  d->raw_strings = year != 3;
  d->digit_separators = year != 3 && year != 11;
}

/* One option (and the element after it, when that is its value), parsed. */
typedef struct parsed_option {
  const known_option *known; /* NULL: refused (why says why) */
  const char *value;         /* NULL: none */
  size_t value_bytes;
  size_t next; /* the index after the option and its value */
} parsed_option;

#define SHOW(n) (int)((n) > 48 ? 48 : (n))

/* Parses option i; refusals are recorded and returned. */
static t4a_status parse_option(const t4a_nvrtc_request *r, size_t i, parsed_option *out) {
  static const char tail[] = ", which the cache key cannot see: compile without the cache";
  const char *o = r->options[i];
  size_t n = t4a_nvrtc_option_bytes(r, i);
  memset(out, 0, sizeof *out);
  out->next = i + 1;
  if (o[0] == '@') {
    return REFUSE_REQUEST("option %zu (%.*s) names a response file%s", i, SHOW(n), o, tail);
  }
  if (n < 2 || o[0] != '-') {
    return REFUSE_REQUEST("option %zu (%.*s) is not an option t4a knows to read no file%s", i,
                          SHOW(n), o, tail);
  }
  int is_long = o[1] == '-';
  size_t d = is_long ? 2 : 1;
  size_t end = d;
  int has_value = 0;
  const char *value = NULL;
  size_t value_bytes = 0;
  if (!is_long && n > 2 && (o[1] == 'D' || o[1] == 'U' || o[1] == 'I')) {
    end = 2; /* -DNAME, -D NAME, -D=NAME */
    has_value = 1;
    value = o + 2;
    value_bytes = n - 2;
  } else {
    while (end < n && o[end] != '=') end++;
    if (end < n) {
      has_value = 1;
      value = o + end + 1;
      value_bytes = n - end - 1;
    }
  }
  const known_option *k = NULL;
  for (size_t j = 0; j < sizeof k_options / sizeof k_options[0] && k == NULL; j++) {
    const char *name = is_long ? k_options[j].name : k_options[j].short_name;
    if (span_is(o + d, end - d, name)) k = &k_options[j];
  }
  if (k == NULL) {
    return REFUSE_REQUEST("option %zu (%.*s) is not an option t4a knows to read no file%s", i,
                          SHOW(n), o, tail);
  }
  if (k->kind == K_FILE) {
    return REFUSE_REQUEST("option %zu (%.*s) %s%s", i, SHOW(n), o, k->why, tail);
  }
  if (has_value && k->arg == ARG_NONE) {
    return REFUSE_REQUEST("option %zu (%.*s) takes no value%s", i, SHOW(n), o, tail);
  }
  if (!has_value && k->arg == ARG_REQUIRED && i + 1 < r->num_options) {
    /* "--maxrregcount" "32": NVRTC takes the next element as the value. */
    value = r->options[i + 1];
    value_bytes = t4a_nvrtc_option_bytes(r, i + 1);
    out->next = i + 2;
    if (k->kind != K_PTXAS && value_bytes > 0 && (value[0] == '-' || value[0] == '@')) {
      return REFUSE_REQUEST("option %zu (%.*s) follows %.*s as its value but reads as an option%s",
                            i + 1, SHOW(value_bytes), value, SHOW(n), o, tail);
    }
  }
  if (k->kind == K_PTXAS && value != NULL) {
    const char *why = ptxas_refusal(value, value_bytes);
    if (why != NULL) {
      return REFUSE_REQUEST("option %zu (%.*s): the ptxas option %.*s %s%s", out->next - 1, SHOW(n),
                            o, SHOW(value_bytes), value, why, tail);
    }
  }
  out->known = k;
  out->value = value;
  out->value_bytes = value_bytes;
  return T4A_OK;
}

/* ---- The lexer ---------------------------------------------------------------------------- */

/* Reads a text the way translation phases 1-3 see it: trigraphs (when the dialect has them) and
 * line splices (a backslash right before a newline, or before CRs and a newline) are folded away
 * as characters are read; a raw string's body is read raw (the standard reverts both there). */
typedef struct lexer {
  const char *s;
  size_t n, i;
  size_t line; /* 1-based line of position i */
  int trigraphs;
  /* NULL, or where lx_blanks records a block comment across a newline that opens where NVRTC,
   * skipping the group, reads no comment (skipper_reaches): 1 + its position, or 0 */
  size_t *mixed;
} lexer;

/* Past a line splice's newline, j just past its backslash (or ??/): NVRTC folds a backslash
 * followed by any run of CRs and then LF (measured with NVRTC 13.0: `\\`, two CRs, LF splices;
 * a lone CR, or a blank before the LF, does not). The index past the LF, or 0 when none. */
static size_t splice_end(const char *s, size_t n, size_t j) {
  while (j < n && s[j] == '\r') j++;
  return j < n && s[j] == '\n' ? j + 1 : 0;
}

/* A line splice starting at k: a backslash (or, where the dialect has trigraphs, ??/), CRs, LF.
 * The index past it, or 0 when none starts there. */
static size_t splice_at(const char *s, size_t n, size_t k, int trigraphs) {
  if (k < n && s[k] == '\\') return splice_end(s, n, k + 1);
  if (trigraphs && k + 2 < n && s[k] == '?' && s[k + 1] == '?' && s[k + 2] == '/') {
    return splice_end(s, n, k + 3);
  }
  return 0;
}

static void lx_splices(lexer *L) {
  size_t end;
  while ((end = splice_at(L->s, L->n, L->i, L->trigraphs)) != 0) {
    L->i = end;
    L->line++;
  }
}

/* The character at the current position, or -1 at the end; *width: its raw bytes. The slow
 * path of lx_peek: a splice, a trigraph or the end. */
static int lx_peek_slow(lexer *L, size_t *width) {
  static const char from[] = "=/'()!<>-", to[] = "#\\^[]|{}~";
  lx_splices(L);
  if (L->i >= L->n) {
    *width = 0;
    return -1;
  }
  unsigned char c = (unsigned char)L->s[L->i];
  if (c == '?' && L->trigraphs && L->i + 2 < L->n && L->s[L->i + 1] == '?' &&
      L->s[L->i + 2] != '\0') {
    const char *t = strchr(from, L->s[L->i + 2]);
    if (t != NULL) {
      *width = 3;
      return (unsigned char)to[t - from];
    }
  }
  *width = 1;
  return c;
}

/* A byte that reads as itself, one character wide: neither a backslash (a splice could start
 * there) nor a question mark (a trigraph could). */
static inline int lx_plain(unsigned char c) { return c != '\\' && c != '?'; }

static inline int lx_peek(lexer *L, size_t *width) {
  if (L->i < L->n && lx_plain((unsigned char)L->s[L->i])) {
    *width = 1;
    return (unsigned char)L->s[L->i];
  }
  return lx_peek_slow(L, width);
}

static inline int lx_cur(lexer *L) {
  size_t w;
  return lx_peek(L, &w);
}

static inline int lx_get(lexer *L) {
  size_t w;
  int c = lx_peek(L, &w);
  L->i += w;
  if (c == '\n') L->line++;
  return c;
}

static int lx_next_slow(lexer *L) {
  lexer save = *L;
  lx_get(L);
  int c = lx_cur(L);
  *L = save;
  return c;
}

static inline int lx_next(lexer *L) { /* the character after the current one */
  if (L->i + 1 < L->n && lx_plain((unsigned char)L->s[L->i]) &&
      lx_plain((unsigned char)L->s[L->i + 1])) {
    return (unsigned char)L->s[L->i + 1];
  }
  return lx_next_slow(L);
}

static int is_blank(int c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }

/* Byte classes for the raw-byte fast paths. CC_IDENT: is_ident. CC_SKIP: a byte that, read as
 * itself where scan_text expects a token, is a blank or a punctuator that only ends what came
 * before (every byte but identifier characters, digits, newline, \\ and ?, # and %, quotes, /, .
 * and the parentheses). CC_PAREN: ( and ), which matter only inside a wrapper's arguments and
 * after `defined`. */
enum { CC_IDENT = 1, CC_SKIP = 2, CC_PAREN = 4 };
#define CC_ROW_ID CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT
#define CC_ROW_SK CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP
/* clang-format off */
static const unsigned char k_cc[256] = {
    /* 0x00 */ CC_ROW_SK, CC_SKIP, CC_SKIP, 0 /* \n */, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP,
    /* 0x10 */ CC_ROW_SK, CC_ROW_SK,
    /* 0x20  !"#$%&' */ CC_SKIP, CC_SKIP, 0, 0, CC_SKIP, 0, CC_SKIP, 0,
    /* ()*+,-./ */ CC_PAREN, CC_PAREN, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, 0, 0,
    /* 0-7 */ CC_ROW_ID,
    /* 89:;<=>? */ CC_IDENT, CC_IDENT, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, 0,
    /* @A-G */ CC_SKIP, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT,
    /* H-O */ CC_ROW_ID,
    /* P-W */ CC_ROW_ID,
    /* XYZ[\]^_ */ CC_IDENT, CC_IDENT, CC_IDENT, CC_SKIP, 0, CC_SKIP, CC_SKIP, CC_IDENT,
    /* `a-g */ CC_SKIP, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT, CC_IDENT,
    /* h-o */ CC_ROW_ID,
    /* p-w */ CC_ROW_ID,
    /* xyz{|}~DEL */ CC_IDENT, CC_IDENT, CC_IDENT, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP, CC_SKIP,
    /* 0x80-0xff: no identifier's for NVRTC 13.0, nor is '$' (measured: an unrecognized token) */
    CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK,
    CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK, CC_ROW_SK,
};
/* clang-format on */
#undef CC_ROW_ID
#undef CC_ROW_SK

/* The newlines in p[0..n), eight bytes at a time: a byte b of w ^ "\n\n..." is zero exactly when
 * the high bit of ((b & 0x7f) + 0x7f) | b is clear (no carry crosses a byte). */
static size_t count_newlines(const char *p, size_t n) {
  const uint64_t nl = 0x0a0a0a0a0a0a0a0aULL, lo7 = 0x7f7f7f7f7f7f7f7fULL;
  size_t count = 0, i = 0;
#if defined(__SSE2__)
  /* Sixteen bytes at a time: each lane counts its newlines (a match is -1) for up to 255
   * blocks, then the lanes are summed. */
  const __m128i nl16 = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
  while (i + 16 <= n) {
    __m128i acc = zero;
    for (int b = 0; b < 255 && i + 16 <= n; b++, i += 16) {
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl16));
    }
    __m128i sums = _mm_sad_epu8(acc, zero);
    count += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
  }
#endif
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    w ^= nl;
    uint64_t t = ((w & lo7) + lo7) | w;
    count += (size_t)((((~t & ~lo7) >> 7) * 0x0101010101010101ULL) >> 56); /* sum of 0/1 bytes */
  }
  for (; i < n; i++) count += p[i] == '\n';
  return count;
}

/* Whether the raw newline at j (> from) ends a line: no splice (a backslash, or ??/ where the
 * dialect has trigraphs, right before it or before CRs before it) within [from, j). */
static int lx_logical_newline(const lexer *L, size_t from, size_t j) {
  size_t k = j;
  while (k > from && L->s[k - 1] == '\r') k--;
  if (k > from && L->s[k - 1] == '\\') return 0;
  if (L->trigraphs && k >= from + 3 && L->s[k - 1] == '/' && L->s[k - 2] == '?' &&
      L->s[k - 3] == '?') {
    return 0;
  }
  return 1;
}

static inline int is_ident(int c) { /* (NVRTC 13.0 reads '$' and bytes past ASCII as no part) */
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The end of a block comment whose opening was read (from: just past its '*'): past the first
 * '/' that reads as itself (not the end of a ??/ trigraph, which reads as a backslash) and whose
 * character before, splices folded, is a '*' at or past from (no trigraph spells one); or n. A
 * doc comment's stars are passed over in one search for '/'. */
static size_t lx_comment_end(const lexer *L, size_t from) {
  const char *s = L->s;
  for (size_t j = from;;) {
    const char *slash = memchr(s + j, '/', L->n - j);
    if (slash == NULL) return L->n;
    size_t p = (size_t)(slash - s), k = p;
    j = p + 1;
    if (L->trigraphs && p >= from + 2 && s[p - 1] == '?' && s[p - 2] == '?') continue;
    while (k > from && s[k - 1] == '\n') { /* a splice right before: \ or ??/, CRs, LF */
      size_t m = k - 1;
      while (m > from && s[m - 1] == '\r') m--;
      if (m > from && s[m - 1] == '\\') {
        k = m - 1;
      } else if (L->trigraphs && m >= from + 3 && s[m - 1] == '/' && s[m - 2] == '?' &&
                 s[m - 3] == '?') {
        k = m - 3;
      } else {
        break;
      }
    }
    if (k > from && s[k - 1] == '*') return p + 1;
  }
}

static int skipper_reaches(const lexer *L, size_t after_open);

/* Skips blanks and comments on this line (a block comment may span lines: *crossed says so). */
static void lx_blanks(lexer *L, int *crossed) {
  for (;;) {
    while (L->i < L->n && is_blank((unsigned char)L->s[L->i])) L->i++; /* raw blanks */
    int c = lx_cur(L);
    if (is_blank(c)) {
      lx_get(L);
    } else if (c == '/' && lx_next(L) == '/') {
      /* To the first newline that no splice hides (the splices' newlines count as lines). */
      size_t from = L->i, j = L->i;
      for (;;) {
        const char *nl = memchr(L->s + j, '\n', L->n - j);
        if (nl == NULL) {
          L->i = L->n;
          break;
        }
        j = (size_t)(nl - L->s);
        if (lx_logical_newline(L, from, j)) {
          L->i = j;
          break;
        }
        L->line++;
        j++;
      }
    } else if (c == '/' && lx_next(L) == '*') {
      lx_get(L);
      lx_get(L);
      /* Lines are counted after: the line is 1 + the newlines before the position. */
      size_t from = L->i, line = L->line;
      L->i = lx_comment_end(L, from);
      if (L->mixed != NULL && *L->mixed == 0 && memchr(L->s + from, '\n', L->i - from) != NULL &&
          !skipper_reaches(L, from)) {
        *L->mixed = from;
      }
      for (size_t j = from; crossed != NULL && !*crossed && j < L->i; j++) {
        const char *nl = memchr(L->s + j, '\n', L->i - j);
        if (nl == NULL) break;
        j = (size_t)(nl - L->s);
        if (lx_logical_newline(L, from, j)) *crossed = 1;
      }
      L->line = line + count_newlines(L->s + from, L->i - from);
    } else {
      return;
    }
  }
}

/* Blanks, and (outside a directive, where a function-like macro's name and its '(' may stand on
 * different lines) the newlines of text lines: up to the next token, or a line's '#'. Lines are
 * counted. */
static void lx_blanks_lines(lexer *L, int in_directive) {
  for (;;) {
    lx_blanks(L, NULL);
    if (in_directive || lx_cur(L) != '\n') return;
    lexer next = *L;
    lx_get(&next);
    lx_blanks(&next, NULL);
    if (lx_cur(&next) == '#' || (lx_cur(&next) == '%' && lx_next(&next) == ':')) return;
    *L = next;
  }
}

/* An identifier (or pp-number tail) starting at the current position; keeps its first bytes. */
typedef struct ident {
  char text[32];
  size_t len; /* full length; text holds min(len, 31) bytes */
} ident;

static void lx_ident(lexer *L, ident *id) {
  size_t start = L->i, j = L->i;
  while (j < L->n && (k_cc[(unsigned char)L->s[j]] & CC_IDENT)) j++; /* raw characters */
  id->len = j - start;
  memcpy(id->text, L->s + start, id->len < sizeof id->text - 1 ? id->len : sizeof id->text - 1);
  L->i = j;
  for (;;) {
    if (L->i < L->n && lx_plain((unsigned char)L->s[L->i]) &&
        !(k_cc[(unsigned char)L->s[L->i]] & CC_IDENT)) {
      break; /* the common end: a byte that reads as itself and ends it */
    }
    int c = lx_cur(L);
    if (c == '\\' && (lx_next(L) == 'u' || lx_next(L) == 'U')) { /* a UCN: \uXXXX */
      lx_get(L);
      c = lx_get(L);
    } else if (is_ident(c)) {
      lx_get(L);
    } else {
      break;
    }
    if (id->len < sizeof id->text - 1) id->text[id->len] = (char)c;
    id->len++;
  }
  id->text[id->len < sizeof id->text - 1 ? id->len : sizeof id->text - 1] = '\0';
}

static inline int ident_is(const ident *id, const char *word) { /* word: under 32 bytes */
  size_t n = strlen(word);
  return id->len == n && memcmp(id->text, word, n) == 0;
}

/* What identifier id makes of the quote q right after it: 'r' a raw string's prefix (R, u8R,
 * uR, UR, LR before '"'), 'p' a literal's prefix (u8, u, U, L), or 0. */
static inline int literal_prefix(const ident *id, int q) {
  if (id->len > 3 || (q != '"' && q != '\'')) return 0;
  if (q == '"' && (ident_is(id, "R") || ident_is(id, "u8R") || ident_is(id, "uR") ||
                   ident_is(id, "UR") || ident_is(id, "LR"))) {
    return 'r';
  }
  return ident_is(id, "u8") || ident_is(id, "u") || ident_is(id, "U") || ident_is(id, "L") ? 'p'
                                                                                           : 0;
}

/* Skips a string or character literal whose opening quote was read. It ends at its closing quote
 * or, unterminated, before the end of the line (as in the front end). */
static int lx_quoted(lexer *L, int quote) { /* 1: closed by its quote; 0: left open */
  for (;;) {
    while (L->i < L->n && L->s[L->i] != quote && L->s[L->i] != '\n' &&
           lx_plain((unsigned char)L->s[L->i])) {
      L->i++; /* raw characters that neither end it nor escape */
    }
    int c = lx_cur(L);
    if (c == -1 || c == '\n') return 0;
    lx_get(L);
    if (c == '\\') {
      c = lx_cur(L);
      if (c != -1 && c != '\n') lx_get(L);
    } else if (c == quote) {
      return 1;
    }
  }
}

/* Skips a raw string literal whose R" was read: R"delim( ... )delim", its body read raw. Returns
 * 1 when its delimiter holds a backslash (or, where the dialect has trigraphs, a '?') or its body
 * a line splice (a backslash, or ??/ there, before CRs and an LF): NVRTC accepts a splice in the
 * delimiter and ends the literal at `)delim`, a splice, `"`, so where it ends is not what the
 * raw reading says. */
static int lx_raw(lexer *L) {
  size_t start = L->i, k = start;
  while (k < L->n && k - start < 16 && L->s[k] != '(') { /* at most 16 (NVRTC 13.0) */
    char c = L->s[k];
    if (c == '\\' || (c == '?' && L->trigraphs)) return 1;
    if (c == ' ' || c == ')' || c == '\t' || c == '\v' || c == '\f' || c == '\n') {
      return 0; /* not a valid delimiter: the front end rejects it, so nothing is cached */
    }
    k++;
  }
  if (k >= L->n || L->s[k] != '(') return 0;
  size_t dlen = k - start;
  for (size_t j = k + 1; j < L->n; j++) {
    if (L->s[j] == '\n') L->line++;
    if (splice_at(L->s, L->n, j, L->trigraphs) != 0) return 1;
    if (L->s[j] == ')' && j + dlen + 1 < L->n && memcmp(L->s + j + 1, L->s + start, dlen) == 0 &&
        L->s[j + 1 + dlen] == '"') {
      L->i = j + dlen + 2;
      return 0;
    }
  }
  L->i = L->n;
  return 0;
}

/* ---- The include check -------------------------------------------------------------------- */

#define MAX_MAY 208 /* the proper substrings of __has_include_next and __has_embed fit */

/* Tests: whether a second pass that could change nothing is skipped (default 1), and the second
 * passes run. */
static atomic_int g_skip_second = 1;
static atomic_ullong g_second_passes;

void t4a_nvrtc_check_skip_second_pass_(int on) { atomic_store(&g_skip_second, on != 0); }
uint64_t t4a_nvrtc_check_second_passes_(void) { return atomic_load(&g_second_passes); }
/* Tests: whether groups NVRTC skips by __CUDACC_RTC__ are skipped (default 1), and the groups
 * skipped. */
static atomic_int g_skip_groups = 1;
static atomic_ullong g_groups_skipped;
void t4a_nvrtc_check_skip_groups_(int on) { atomic_store(&g_skip_groups, on != 0); }
uint64_t t4a_nvrtc_check_groups_skipped_(void) { return atomic_load(&g_groups_skipped); }

typedef struct scan {
  const t4a_nvrtc_prepared *p;
  dialect d;
  const t4a_nvrtc_str *sorted; /* the request's header names, sorted; NULL: few, compared in turn */
  size_t num_sorted;
  int pasted;           /* some text has ## (or %:%:) */
  /* The macros NVRTC predefines that paste (nvrtc_predefined.h) that some text names: a bit each,
   * and where the first use of each was. */
  uint64_t predefined_used;
  char predefined_at[64][160];
  int has_piece;        /* some text spells a piece of __has_include (see scan_text) */
  char piece[32];       /* the first such piece and where */
  char piece_where[330]; /* "the source, line 3" */
  /* the text being scanned, for messages */
  char where[300];
  /* Include roots (cached compiles with roots): the prober that looks at the paths NVRTC would
   * open, the files of the roots the request can reach (a queue; each probed file is queued
   * once), and the function-like macros that apply __has_include to a parameter (checked at
   * every use in a second pass). */
  size_t num_roots;
  const char *const *root_paths;
  t4a_nvrtc_prober *pr;
  struct qitem {
    uint32_t root;           /* the root it was found through */
    t4a_nvrtc_probed *file;  /* its record: path (lexical), bytes */
    char *raw;               /* its path with ".." kept, when that is another spelling; or NULL */
    size_t (*dead)[2]; /* the groups NVRTC skips in it (dead_ranges; read once, both passes) */
    size_t num_dead;
    int dead_read;
  } *queue;
  size_t queue_len, queue_cap;
  int cur_root; /* the root of the text being scanned, -1 for the request's own texts */
  int in_named_header; /* the text is one of the request's named headers */
  struct qitem cur_item; /* a copy: the queue moves as it grows */
  char (*wrappers)[32];
  size_t num_wrappers, wrappers_cap;
  unsigned char wrapper_chars[256]; /* nonzero: the byte is in some wrapper's name */
  /* Second pass: the proper substrings of a wrapper's name that stand where a paste can reach
   * them (a #define body but its parameters, a root's function-like macro's arguments), and
   * where the first of each was. */
  struct wpiece {
    char text[32];
    char at[120];
  } *wpieces;
  size_t num_wpieces, wpieces_cap;
  int pass; /* 1: includes; 2: uses of the wrappers */
  /* Groups NVRTC skips by __CUDACC_RTC__ are skipped (prune); prune_lost: that may not be sound
   * (a text #undefs it, or a name that could be it), so the check runs again without skipping. */
  int prune, prune_lost;
  size_t groups_skipped;
  /* The pasters NVRTC predefines whose built-in definitions were read as a root's text (a bit
   * per T4A_NVRTC_PREDEFINED_PASTERS entry), and those texts, read again by the second pass. */
  uint64_t predefined_read, predefined_defined; /* (the latter: some text defines it) */
  struct {
    const char *text;
    size_t len;
  } builtin_texts[64];
  size_t num_builtin_texts;
  /* The contents of string literals read as texts (a pragma's operand in waiting: freed at the
   * end) and how deep such a scan is nested. */
  char **pragmas;
  size_t num_pragmas, pragmas_cap;
  int pragma_depth;
  int open_body; /* some #define's body opens a parenthesis it does not close */
  /* The first direct __has_include(<...>) that follows a name on its directive line (in_call's
   * AFTER_NAME), where a macro whose body opens a call could stand: "" when none. */
  char angle_after_name[240];
  /* Every #define of the texts scanned (name, function-like or not, body), for computed
   * includes in root files, which are resolved by expanding their object-like macros over every
   * definition seen (each alternative checked and followed like a literal include). With
   * roots, NVRTC's built-in definitions come first: defs[0, num_builtin). */
  t4a_nvrtc_macro_ *defs;
  size_t num_defs, defs_cap, num_builtin;
  struct pending {
    const char *ops; /* the operand's text */
    size_t ops_len, line;
    char what[24];
    char where[300];
    int root; /* the file that holds it, whose directory a quoted name searches */
    struct qitem item;
  } *pend;
  size_t num_pend, pend_cap;
  /* Token pasting in the roots: a piece of __has_include in a #define body or in the arguments
   * of a function-like macro (the only places ## can reach) with a ## anywhere is refused. */
  int root_any_piece;
  /* The distinct substrings of __has_include_next / __has_embed seen there and where (allocated
   * at the first; room for all of them, so that none is dropped). */
  char (*pieces)[20];
  char (*piece_at)[120];
  size_t num_pieces;
  /* The function-like macros' names, for the second pass: an open-addressing set of indices
   * into defs (+1; 0: empty), func_mask + 1 slots. */
  uint32_t *func_set;
  size_t func_mask;
  /* Every definition by name (def_mask + 1 slots, index into defs + 1; built with func_set). */
  uint32_t *def_set;
  size_t def_mask;
  uint64_t func_sieve[64]; /* bit func_sieve_bit(name): some macro or wrapper may be named so */
  /* First pass, root files: every piece a second pass could meet there (the identifiers lexed
   * or skipped, and those of the operands the first pass consumed); may_unknown: an operand the
   * first pass could not split (a backslash, or '?' with trigraphs). When they cannot join with
   * the pieces recorded into a target and there is no wrapper, the second pass, which could only
   * add pieces, is skipped. */
  char may[MAX_MAY][20];
  size_t num_may;
  uint64_t may_bits[8]; /* the pieces noted (see note_may) */
  int may_unknown;
  int may_joined; /* they join already (with the pieces recorded, which they hold): stop noting */
} scan;

static int cmp_str(const void *a, const void *b) {
  const t4a_nvrtc_str *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->p, y->p, n);
  return c != 0 ? c : (x->n > y->n) - (x->n < y->n);
}

static int names_a_header(const scan *s, const char *name, size_t n) {
  t4a_nvrtc_str key = {name, n};
  if (s->sorted != NULL)
    return bsearch(&key, s->sorted, s->num_sorted, sizeof key, cmp_str) != NULL;
  const t4a_nvrtc_request *r = s->p->req;
  for (size_t i = 0; i < r->num_headers; i++) {
    const t4a_nvrtc_header *h = &r->headers[i];
    if (t4a_nvrtc_header_name_bytes(h) == n && memcmp(h->name, name, n) == 0) return 1;
  }
  return 0;
}

static const char k_advice[] =
    "; a cached compile may include only the request's named headers, by a literal name";
static const char k_root_advice[] =
    ", which the key cannot see; a cached compile with include roots may include the request's "
    "headers and files under its roots, by a literal relative name";

/* Joins base[0..bn) and an include name into out: "." and empty components dropped and, unless
 * keep_up, ".." popping the component before it (lexically; "/.." is "/", a relative path keeps
 * a leading ".."). Returns the length, or -1 when it does not fit. */
static int join_path(const char *base, size_t bn, const char *name, size_t n, char *out,
                     size_t cap, int keep_up) {
  size_t len = 0;
  int abs = bn > 0 && base[0] == '/';
  if (abs) out[len++] = '/';
  for (int part = 0; part < 2; part++) {
    const char *t = part == 0 ? base : name;
    size_t tn = part == 0 ? bn : n;
    size_t i = 0;
    while (i < tn) {
      size_t j = i;
      while (j < tn && t[j] != '/') j++;
      size_t cl = j - i;
      if (cl == 0 || (cl == 1 && t[i] == '.')) {
        /* nothing */
      } else if (!keep_up && cl == 2 && t[i] == '.' && t[i + 1] == '.') {
        size_t start = len;
        while (start > (size_t)abs && out[start - 1] != '/') start--;
        int last_up = len - start == 2 && out[start] == '.' && out[start + 1] == '.';
        if (len > (size_t)abs && !last_up) {
          len = start > (size_t)abs ? start - 1 : (size_t)abs; /* pop */
        } else if (!abs) {
          if (len > 0 && len + 1 < cap) out[len++] = '/';
          if (len + 2 >= cap) return -1;
          out[len++] = '.';
          out[len++] = '.';
        }
      } else {
        if (len > (size_t)abs) {
          if (len + 1 >= cap) return -1;
          out[len++] = '/';
        }
        if (len + cl >= cap) return -1;
        memcpy(out + len, t + i, cl);
        len += cl;
      }
      i = j + 1;
    }
  }
  if (len == 0) out[len++] = '.';
  out[len] = '\0';
  return (int)len;
}

static t4a_status enqueue(scan *s, size_t ri, t4a_nvrtc_probed *f, const char *raw, size_t rn) {
  if (f->queued) return T4A_OK;
  if (s->queue_len == s->queue_cap) {
    size_t cap = s->queue_cap ? s->queue_cap * 2 : 64;
    struct qitem *q = t4a_host_realloc(s->queue, cap * sizeof *q);
    if (q == NULL) return T4A_HOST_OUT_OF_MEMORY;
    s->queue = q;
    s->queue_cap = cap;
  }
  char *copy = NULL;
  if (raw != NULL) {
    copy = t4a_host_malloc(rn + 1);
    if (copy == NULL) return T4A_HOST_OUT_OF_MEMORY;
    memcpy(copy, raw, rn + 1);
  }
  f->queued = 1;
  s->queue[s->queue_len].root = (uint32_t)ri;
  s->queue[s->queue_len].file = f;
  s->queue[s->queue_len].raw = copy;
  s->queue[s->queue_len].dead = NULL;
  s->queue[s->queue_len].num_dead = 0;
  s->queue[s->queue_len].dead_read = 0;
  s->queue_len++;
  return T4A_OK;
}

/* Whether an include name is plain: no empty, "." or ".." component. */
static int plain_name(const char *name, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0, start = 0; i <= n; i++) {
    if (i < n && name[i] != '/') continue;
    size_t cl = i - start;
    if (cl == 0 || (cl == 1 && name[start] == '.') ||
        (cl == 2 && name[start] == '.' && name[start + 1] == '.')) {
      return 0;
    }
    start = i + 1;
  }
  return 1;
}

/* For a plain name under base (lexical, bn bytes): probes the directories on the way, top down.
 * Returns the length in out of the first that does not exist at all (every path under it holds
 * nothing: recorded as that folder), or 0 when each exists. */
static t4a_status absent_prefix(scan *s, size_t root, const char *base, size_t bn,
                                const char *name, size_t n, char *out, size_t cap, size_t *pre) {
  *pre = 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] != '/') continue;
    int len = join_path(base, bn, name, i, out, cap, 0);
    if (len < 0) return T4A_OK;
    t4a_nvrtc_probed *d = NULL;
    t4a_status st = t4a_nvrtc_probe_(s->pr, out, (size_t)len, (int)root, &d);
    if (st != T4A_OK) return st;
    if (d->kind == T4A_NVRTC_PROBED_ABSENT) {
      *pre = (size_t)len;
      return T4A_OK;
    }
    if (d->kind != T4A_NVRTC_PROBED_DIR) return T4A_OK; /* a file on the way: ENOTDIR below */
  }
  return T4A_OK;
}

/* Every file the include could open, probed and queued for scanning: for "x" in a root file, its
 * own directory first; then each root in order (every candidate is followed, found or not
 * further ones, so the scan covers whichever NVRTC takes). The source's own directory is
 * /dev/null/..., which holds nothing; a named header's is the working directory, which the key
 * cannot see. A name with ".." is probed as spelled (the kernel resolves ".." at a symbolic
 * link's target) and read lexically; the two must be the same file or both nothing. */
static t4a_status resolve_in_roots(scan *s, const char *name, size_t n, int quoted,
                                   const char *what, size_t line, int open, int close) {
  /* (also an #include_next "x.h" there: NVRTC searches the working directory first for it too,
   * measured with 13.0, though from a root file it does not search the includer's) */
  if (open == '"' && s->cur_root < 0 && s->in_named_header && !names_a_header(s, name, n)) {
    return REFUSE(
        "%s, line %zu: %s %c%.*s%c in a named header is searched for in the working "
        "directory first (write <%.*s>, or add it as a named header)%s",
        s->where, line, what, open, SHOW(n), name, close, SHOW(n), name, k_root_advice);
  }
  /* The manifest records the search up to the first file found (NVRTC takes it; the check
   * follows every candidate, a superset); an #include_next's start depends on where its includer
   * was found, so all of its candidates are recorded. */
  int next = strstr(what, "_next") != NULL, recorded_found = 0, plain = plain_name(name, n);
  char lex[PATH_MAX], raw[PATH_MAX], pre_path[PATH_MAX];
  for (size_t ri = 0; ri < s->num_roots + 1; ri++) {
    size_t root;
    const char *lb, *rb;
    size_t lbn, rbn;
    if (ri == 0) { /* a root file's own directory */
      if (!quoted || s->cur_root < 0) continue;
      root = (size_t)s->cur_root;
      lb = s->cur_item.file->path;
      rb = s->cur_item.raw != NULL ? s->cur_item.raw : lb;
      const char *ls = strrchr(lb, '/'), *rs = strrchr(rb, '/');
      lbn = ls != NULL ? (size_t)(ls - lb) : 0;
      rbn = rs != NULL ? (size_t)(rs - rb) : 0;
      if (ls == lb) lbn = 1;
      if (rs == rb) rbn = 1;
    } else {
      root = ri - 1;
      lb = rb = s->root_paths[root];
      lbn = rbn = strlen(lb);
    }
    int ln = join_path(lb, lbn, name, n, lex, sizeof lex, 0);
    int rn = join_path(rb, rbn, name, n, raw, sizeof raw, 1);
    if (ln < 0 || rn < 0) {
      return REFUSE("%s, line %zu: %s %c%.*s%c: a path through the roots is longer than "
                    "PATH_MAX%s",
                    s->where, line, what, open, SHOW(n), name, close, k_root_advice);
    }
    int same = rn == ln && memcmp(raw, lex, (size_t)ln) == 0;
    size_t pre = 0;
    t4a_nvrtc_probed *L = NULL, *R = NULL;
    t4a_status st = T4A_OK;
    if (plain && same) st = absent_prefix(s, root, lb, lbn, name, n, pre_path, sizeof pre_path, &pre);
    if (st == T4A_OK && pre == 0) st = t4a_nvrtc_probe_(s->pr, lex, (size_t)ln, (int)root, &L);
    if (st == T4A_OK && pre == 0) {
      R = L;
      if (!same) st = t4a_nvrtc_probe_(s->pr, raw, (size_t)rn, (int)root, &R);
    }
    if (st != T4A_OK) return st;
    int lf = L != NULL && L->kind == T4A_NVRTC_PROBED_FILE;
    if (L != R) {
      int rf = R->kind == T4A_NVRTC_PROBED_FILE;
      if (lf != rf || (lf && (L->dev != R->dev || L->ino != R->ino))) {
        return REFUSE("%s, line %zu: %s %c%.*s%c goes up (..) out of a directory reached through "
                      "a symbolic link (the kernel resolves .. at the link's target): %.60s and "
                      "%.60s differ%s",
                      s->where, line, what, open, SHOW(n), name, close, lex, raw, k_root_advice);
      }
    }
    if (s->p->probes != NULL && (next || !recorded_found)) {
      /* the manifest: the path as NVRTC opens it (both spellings), and what is there (for nothing
       * under a folder that does not exist, that folder) */
      if (pre > 0) {
        st = t4a_nvrtc_probes_add_(s->p->probes, pre_path, pre, NULL, 1);
      } else {
        st = t4a_nvrtc_probes_add_(s->p->probes, lex, (size_t)ln, lf ? L : NULL, 0);
        if (st == T4A_OK && L != R) {
          st = t4a_nvrtc_probes_add_(s->p->probes, raw, (size_t)rn, lf ? R : NULL, 0);
        }
      }
      if (st != T4A_OK) return st;
      recorded_found = lf;
    }
    if (lf) {
      st = enqueue(s, root, L, L != R ? raw : NULL, (size_t)rn);
      if (st != T4A_OK) return st;
    }
  }
  return T4A_OK;
}

/* Records a computed include of a root file (operand: the rest of the directive, or of the
 * __has_include parentheses), resolved once the closure's definitions are known. */
static t4a_status add_pending(scan *s, const char *ops, size_t n, size_t line, const char *what) {
  if (s->num_pend == s->pend_cap) {
    size_t cap = s->pend_cap ? s->pend_cap * 2 : 8;
    struct pending *np = t4a_host_realloc(s->pend, cap * sizeof *np);
    if (np == NULL) return T4A_HOST_OUT_OF_MEMORY;
    s->pend = np;
    s->pend_cap = cap;
  }
  struct pending *q = &s->pend[s->num_pend++];
  q->ops = ops;
  q->ops_len = n;
  q->line = line;
  snprintf(q->what, sizeof q->what, "%s", what);
  snprintf(q->where, sizeof q->where, "%s", s->where);
  q->root = s->cur_root;
  q->item = s->cur_item;
  return T4A_OK;
}

static size_t directive_end(const scan *s, const lexer *L0);
static size_t paren_operand_end(const scan *s, const lexer *L0);

/* Reads a header name ("x.h" or <x.h>) at the current position and checks it. what and line:
 * the directive or operator and the line it starts on, for the message. */
static t4a_status check_operand(scan *s, lexer *L, const char *what, size_t line) {
  int open = lx_cur(L);
  if (open != '"' && open != '<' && s->cur_root >= 0 && s->pass == 1) {
    /* A computed include in a root file: its operand runs to the directive's end or, inside
     * __has_include( ), to the matching parenthesis. (In the second pass, which checks the uses
     * of __has_include wrappers after the closure is complete, a macro operand is refused.) */
    size_t start = L->i;
    size_t end = what[0] != '#' ? paren_operand_end(s, L) : directive_end(s, L);
    if (memchr(L->s + start, '\\', end - start) != NULL ||
        (s->d.trigraphs && memchr(L->s + start, '?', end - start) != NULL)) {
      /* the operand's tokens across a splice are not what its bytes spell */
      return REFUSE(
          "%s, line %zu: %s has a macro operand written with a line splice or "
          "trigraph (a computed include)%s",
          s->where, line, what, k_root_advice);
    }
    t4a_status st = add_pending(s, L->s + start, end - start, line, what);
    while (L->i < end) lx_get(L);
    return st;
  }
  if (open != '"' && open != '<') {
    if (s->num_roots > 0) {
      return REFUSE("%s, line %zu: %s has a macro operand (a computed include)%s", s->where, line,
                    what, k_root_advice);
    }
    return REFUSE("%s, line %zu: %s has a macro operand (a computed include), which the key "
                  "cannot see%s",
                  s->where, line, what, k_advice);
  }
  int close = open == '"' ? '"' : '>';
  lx_get(L);
  size_t raw_start = L->i, chars = 0;
  int c;
  while ((c = lx_cur(L)) != -1 && c != '\n' && c != close) {
    lx_get(L);
    chars++;
  }
  if (c != close) {
    return REFUSE("%s, line %zu: %s has an unterminated header name%s", s->where, line, what,
                  k_advice);
  }
  const char *name = L->s + raw_start;
  size_t raw = L->i - raw_start;
  lx_get(L);
  if (raw != chars) {
    return REFUSE("%s, line %zu: %s %c%.*s%c is written with a line splice or trigraph%s", s->where,
                  line, what, open, SHOW(raw), name, close, k_advice);
  }
  if (chars > 0 && name[0] == '/') {
    return REFUSE("%s, line %zu: %s %c%.*s%c is an absolute path, which NVRTC opens%s", s->where,
                  line, what, open, SHOW(chars), name, close,
                  s->num_roots > 0 ? k_root_advice : k_advice);
  }
  if (s->num_roots > 0) {
    return resolve_in_roots(s, name, chars, open == '"' && strcmp(what, "#include_next") != 0,
                            what, line, open, close);
  }
  if (!names_a_header(s, name, chars)) {
    /* (not what the key cannot see: nothing provides the header) */
    return REFUSE_REQUEST("%s, line %zu: %s %c%.*s%c names no header of the request%s", s->where,
                          line, what, open, SHOW(chars), name, close, k_advice);
  }
  return T4A_OK;
}

/* A proper prefix of __has_include_next or __has_embed: a piece that ## could complete. */
static int is_piece(const ident *id) {
  static const char a[] = "__has_include_next", b[] = "__has_embed";
  if (id->len == 0 || id->len >= sizeof id->text || id->text[0] != '_') return 0;
  if (id->len < sizeof a - 1 && id->len != 13 && memcmp(a, id->text, id->len) == 0) return 1;
  return id->len < sizeof b - 1 && memcmp(b, id->text, id->len) == 0;
}

/* Records the #define whose name was just read (pass 1): its body is the rest of the logical
 * line. */
/* Skips a pp-number at L (its first character current): digits, letters, '.', e+ e- p+ p- and
 * (C++14) digit separators. */
static void lx_number(lexer *L, int digit_separators) {
  lx_get(L);
  for (;;) {
    int d = lx_cur(L);
    if ((d == 'e' || d == 'E' || d == 'p' || d == 'P') && (lx_next(L) == '+' || lx_next(L) == '-')) {
      lx_get(L);
      lx_get(L);
    } else if (d == '\'' && digit_separators && is_ident(lx_next(L))) {
      lx_get(L);
      lx_get(L);
    } else if (d == '\\' && (lx_next(L) == 'u' || lx_next(L) == 'U')) {
      lx_get(L); /* a universal character name: \uXXXX, its digits read next */
      lx_get(L);
    } else if (is_ident(d) || d == '.') {
      lx_get(L);
    } else {
      break;
    }
  }
}

/* Whether NVRTC, skipping the group, reads a block comment opening just before after_open (as the
 * check's lexer L0 does): the logical line is lexed from its start as NVRTC's skipper lexes
 * (no digit separator, no header name; a literal left open runs to the line's end). Not sure
 * (a raw string's prefix before it): no. */
static int skipper_reaches(const lexer *L0, size_t after_open) {
  size_t ls = 0;
  for (size_t k = after_open; k > 0;) {
    const char *nl = memrchr(L0->s, '\n', k);
    if (nl == NULL) break;
    size_t j = (size_t)(nl - L0->s);
    if (lx_logical_newline(L0, 0, j)) {
      ls = j + 1;
      break;
    }
    k = j;
  }
  lexer S = {L0->s, L0->n, ls, 1, L0->trigraphs, NULL};
  while (S.i < after_open) {
    while (S.i < S.n && is_blank((unsigned char)S.s[S.i])) S.i++;
    int c = lx_cur(&S);
    if (c == -1 || c == '\n' || (c == '/' && lx_next(&S) == '/')) return 0;
    if (c == '/' && lx_next(&S) == '*') {
      lx_get(&S);
      lx_get(&S);
      if (S.i == after_open) return 1;
      S.i = lx_comment_end(&S, S.i);
    } else if (c == '"' || c == '\'') {
      lx_get(&S);
      (void)lx_quoted(&S, c);
    } else if (is_ident(c) && !(c >= '0' && c <= '9')) {
      ident id;
      lx_ident(&S, &id);
      int q = lx_cur(&S), prefix = literal_prefix(&id, q);
      if (prefix == 'r') return 0;
      if (prefix == 'p') {
        lx_get(&S);
        (void)lx_quoted(&S, q);
      }
    } else if ((c >= '0' && c <= '9') || (c == '.' && lx_next(&S) >= '0' && lx_next(&S) <= '9')) {
      lx_number(&S, 0);
    } else {
      lx_get(&S);
    }
  }
  return 0;
}

/* Steps L past the next token of a directive's rest (and the blanks and comments before it),
 * lexed as the scan lexes it: splices, ??/ where the dialect has trigraphs, a block comment's
 * newlines and the literals' contents end nothing. Returns the token's first character, or -1
 * or '\n' at the directive's end (L left there). */
static inline int directive_step(const scan *s, lexer *L) {
  lx_blanks(L, NULL);
  int c = lx_cur(L);
  if (c == -1 || c == '\n') return c;
  if (c == '"' || c == '\'') {
    lx_get(L);
    lx_quoted(L, c);
  } else if (is_ident(c) && !(c >= '0' && c <= '9')) {
    ident id;
    lx_ident(L, &id);
    int q = lx_cur(L);
    int kind = literal_prefix(&id, q);
    if (kind == 'r' && s->d.raw_strings) {
      lx_get(L);
      size_t body = L->i;
      (void)lx_raw(L); /* (one with a splice is refused where the scan reads it) */
      if (L->i == body) lx_quoted(L, '"'); /* no valid delimiter: a plain string */
    } else if (kind == 'p') {
      lx_get(L);
      lx_quoted(L, q);
    }
  } else if (c >= '0' && c <= '9') {
    lx_number(L, s->d.digit_separators);
  } else {
    lx_get(L);
  }
  return c;
}

/* Where the directive whose rest L is at ends: its logical line's newline. */
static size_t directive_end(const scan *s, const lexer *L0) {
  lexer L = *L0;
  int c;
  while ((c = directive_step(s, &L)) != -1 && c != '\n') {
  }
  return L.i;
}

/* Where the operand of __has_include( ) whose first token L is at ends: at its matching ')',
 * lexed as directive_end lexes (a parenthesis in a comment or a literal counts for nothing, and
 * a block comment may span lines), or at the directive's end when none matches. */
static size_t paren_operand_end(const scan *s, const lexer *L0) {
  lexer L = *L0;
  size_t depth = 0;
  for (;;) {
    lx_blanks(&L, NULL);
    size_t at = L.i;
    int c = directive_step(s, &L);
    if (c == -1 || c == '\n') return L.i;
    if (c == '(') depth++;
    if (c == ')' && depth-- == 0) return at;
  }
}

/* ---- Groups NVRTC skips --------------------------------------------------------------------- */

/* NVRTC defines __CUDACC_RTC__ for every compile (T4A_NVRTC_RTC_ALWAYS_DEFINED, probed). Unless
 * an option names it or a text #undefs it (the check then runs again without this), a group whose
 * condition is known false by it, or that follows a group known taken in its chain, is one NVRTC
 * skips: nothing in it is included, defined or expanded, and the check skips it too. Conditions
 * are read only in one shape: `defined NAME` or `defined ( NAME )`, `!`, `&&`, `||` and
 * parentheses, where NAME is __CUDACC_RTC__ (known defined) or another (not known); any other
 * token makes the whole condition not known. */
enum { COND_NONE, COND_IF, COND_IFDEF, COND_IFNDEF, COND_ELIF, COND_ELSE, COND_ENDIF, COND_OTHER };
enum { CT_END, CT_NOT, CT_AND, CT_OR, CT_LP, CT_RP, CT_ID, CT_BAD };

static int cond_kind(const ident *name) {
  if (name->len < 2 || name->len > 8 || (name->text[0] != 'i' && name->text[0] != 'e')) {
    return COND_NONE;
  }
  if (ident_is(name, "if")) return COND_IF;
  if (ident_is(name, "ifdef")) return COND_IFDEF;
  if (ident_is(name, "ifndef")) return COND_IFNDEF;
  if (ident_is(name, "elif")) return COND_ELIF;
  if (ident_is(name, "else")) return COND_ELSE;
  if (ident_is(name, "endif")) return COND_ENDIF;
  /* (#elifdef and #elifndef, no conditionals for NVRTC 13.0: a text with one skips nothing) */
  if (ident_is(name, "elifdef") || ident_is(name, "elifndef")) return COND_OTHER;
  return COND_NONE;
}

typedef struct cond_reader {
  lexer L; /* in the directive's rest */
  ident id; /* the last CT_ID's name */
  int bad, depth;
} cond_reader;

static int cond_token(cond_reader *r) {
  lx_blanks(&r->L, NULL);
  int c = lx_cur(&r->L);
  if (c == -1 || c == '\n') return CT_END;
  lexer at = r->L;
  if (is_ident(c) && !(c >= '0' && c <= '9')) {
    lx_ident(&r->L, &r->id);
    return literal_prefix(&r->id, lx_cur(&r->L)) || r->id.len >= sizeof r->id.text ? CT_BAD
                                                                                     : CT_ID;
  }
  lx_get(&r->L);
  int c2 = lx_cur(&r->L);
  if (c == '(') return CT_LP;
  if (c == ')') return CT_RP;
  if (c == '!' && c2 != '=') return CT_NOT;
  if ((c == '&' || c == '|') && c2 == c) {
    lx_get(&r->L);
    return c == '&' ? CT_AND : CT_OR;
  }
  r->L = at;
  return CT_BAD;
}

static int cond_peek(cond_reader *r) {
  lexer save = r->L;
  int t = cond_token(r);
  r->L = save;
  return t;
}

/* 1 true, 0 false, -1 not known (r->bad: not read). */
static int cond_or(cond_reader *r);
static int cond_unary(cond_reader *r) {
  int t = cond_token(r), v = -1;
  if (++r->depth > 64) {
    r->bad = 1;
  } else if (t == CT_NOT) {
    v = cond_unary(r);
    v = v < 0 ? -1 : !v;
  } else if (t == CT_LP) {
    v = cond_or(r);
    if (cond_token(r) != CT_RP) r->bad = 1;
  } else if (t == CT_ID && ident_is(&r->id, "defined")) {
    int paren = cond_peek(r) == CT_LP;
    if (paren) (void)cond_token(r);
    if (cond_token(r) != CT_ID) r->bad = 1;
    v = ident_is(&r->id, "__CUDACC_RTC__") ? 1 : -1;
    if (paren && cond_token(r) != CT_RP) r->bad = 1;
  } else {
    r->bad = 1;
  }
  r->depth--;
  return v;
}

/* Operands joined by op: CT_OR joins runs of &&, CT_AND unary operands. The value that decides
 * (1 for ||, 0 for &&) wins whatever the others are; else the result is known when all are. */
static int cond_run(cond_reader *r, int op) {
  int decides = op == CT_OR;
  int v = op == CT_OR ? cond_run(r, CT_AND) : cond_unary(r);
  while (!r->bad && cond_peek(r) == op) {
    (void)cond_token(r);
    int w = op == CT_OR ? cond_run(r, CT_AND) : cond_unary(r);
    v = v == decides || w == decides ? decides : v == !decides && w == !decides ? !decides : -1;
  }
  return v;
}

static int cond_or(cond_reader *r) { return cond_run(r, CT_OR); }

/* The value of the condition of the directive (kind) whose rest L is at. */
static int cond_value(const lexer *L, int kind) {
  cond_reader r = {*L, {{0}, 0}, 0, 0};
  int v;
  if (kind == COND_IFDEF || kind == COND_IFNDEF) {
    if (cond_token(&r) != CT_ID) return -1;
    v = ident_is(&r.id, "__CUDACC_RTC__") ? 1 : -1;
    if (kind == COND_IFNDEF && v >= 0) v = !v;
  } else {
    v = cond_or(&r);
  }
  return r.bad || cond_token(&r) != CT_END ? -1 : v;
}

/* The chains of conditionals open in a text: how deep, and for the innermost 64 whether a group
 * of each is known taken. */
typedef struct cond_chains {
  size_t depth;
  uint64_t taken;
} cond_chains;

/* Steps the chains over a conditional directive (kind, its rest at L): 1 when the group it
 * opens is one NVRTC skips. */
static int cond_step(const lexer *L, int kind, cond_chains *ch) {
  uint64_t bit = ch->depth >= 1 && ch->depth <= 64 ? (uint64_t)1 << (ch->depth - 1) : 0;
  switch (kind) {
    case COND_IF:
    case COND_IFDEF:
    case COND_IFNDEF: {
      int v = cond_value(L, kind);
      ch->depth++;
      bit = ch->depth <= 64 ? (uint64_t)1 << (ch->depth - 1) : 0;
      ch->taken = v == 1 ? ch->taken | bit : ch->taken & ~bit;
      return v == 0;
    }
    case COND_ELIF: {
      if (ch->taken & bit) return 1;
      int v = ch->depth > 0 ? cond_value(L, kind) : -1;
      if (v == 1) ch->taken |= bit;
      return v == 0;
    }
    case COND_ELSE:
      return (ch->taken & bit) != 0;
    case COND_ENDIF:
      if (ch->depth > 0) {
        ch->taken &= ~bit;
        ch->depth--;
      }
      return 0;
    default:
      return 0;
  }
}

/* Whether p[0..n) is __has_include, __has_include_next or __has_embed. */
static inline int has_operator(const char *p, size_t n) {
  if (n < 11 || p[0] != '_') return 0;
  return (n == 13 && memcmp(p, "__has_include", 13) == 0) ||
         (n == 18 && memcmp(p, "__has_include_next", 18) == 0) ||
         (n == 11 && memcmp(p, "__has_embed", 11) == 0);
}

/* One conditional directive of a text, as the pre-pass of dead_ranges reads it: where its line
 * starts, its kind, its rest (just past its name) and where the next line starts. */
typedef struct cond_dir {
  size_t line_at, next_line;
  int kind;
  lexer rest;
} cond_dir;

/* Where a text's groups that NVRTC skips by __CUDACC_RTC__ lie: [from, to) byte ranges, each from
 * the start of the line after the directive that opens the group to the start of the line of the
 * #elif, #else or #endif that ends it (or the text's end), in order. A text's conditionals are
 * read first, whole, by one lexer that reads them as NVRTC does both where it keeps a group and
 * where it skips one (measured with NVRTC 13.0: comments, literals, an unterminated literal to
 * the line's end, splices, trigraphs, digraphs). Where the two readings can differ, or the
 * check is not sure of NVRTC's, no range is returned (*ranges NULL, 0): a raw string, a digit
 * separator, a <...> or "..." operand of an include or of __has_include holding a quote, a
 * backslash, a '?' or a comment's opening, a '#' after a block comment across a newline, such a
 * comment on a conditional's line, #elifdef or #elifndef. Then any mix of kept and skipped
 * groups ends each group where this reading does, and the chains read from it are NVRTC's.
 * HOST_OUT_OF_MEMORY. */
static t4a_status dead_ranges(const scan *s, const char *text, size_t n, size_t (**ranges)[2],
                              size_t *num) {
  *ranges = NULL;
  *num = 0;
  lexer L = {text, n, 0, 1, s->d.trigraphs, NULL};
  cond_dir *dirs = NULL;
  size_t num_dirs = 0, cap = 0;
  int ok = 1;
  while (ok && L.i < L.n) {
    size_t line_at = L.i;
    int crossed = 0;
    lx_blanks(&L, &crossed);
    int c = lx_cur(&L);
    if (c == -1) break;
    int hash = c == '#' || (c == '%' && lx_next(&L) == ':');
    if (crossed && hash) ok = 0;
    int kind = COND_NONE, operand = 0; /* operand: 1 an include's, 2 __has_include's is next */
    if (ok && hash) {
      lx_get(&L);
      if (c == '%') lx_get(&L);
      crossed = 0;
      lx_blanks(&L, &crossed);
      ok = !crossed;
      if (ok && is_ident(lx_cur(&L)) && !(lx_cur(&L) >= '0' && lx_cur(&L) <= '9')) {
        ident name;
        lx_ident(&L, &name);
        kind = cond_kind(&name);
        ok = kind != COND_OTHER;
        operand = ident_is(&name, "include") || ident_is(&name, "include_next") ||
                  ident_is(&name, "import") || ident_is(&name, "embed");
      }
      if (ok && kind != COND_NONE) {
        if (num_dirs == cap) {
          size_t ncap = cap ? 2 * cap : 32;
          cond_dir *nd = t4a_host_realloc(dirs, ncap * sizeof *nd);
          if (nd == NULL) {
            free(dirs);
            return T4A_HOST_OUT_OF_MEMORY;
          }
          dirs = nd;
          cap = ncap;
        }
        dirs[num_dirs].line_at = line_at;
        dirs[num_dirs].kind = kind;
        dirs[num_dirs++].rest = L;
      }
    }
    /* the rest of the line */
    for (;;) {
      if (operand == 0) { /* blanks and punctuators that end nothing, identifiers: raw bytes */
        for (;;) {
          while (L.i < L.n && (k_cc[(unsigned char)L.s[L.i]] & (CC_SKIP | CC_PAREN))) L.i++;
          unsigned char b = L.i < L.n ? (unsigned char)L.s[L.i] : 0;
          if (!(k_cc[b] & CC_IDENT) || (b >= '0' && b <= '9')) break;
          size_t j = L.i + 1;
          while (j < L.n && (k_cc[(unsigned char)L.s[j]] & CC_IDENT)) j++;
          if (j < L.n && (!lx_plain((unsigned char)L.s[j]) || L.s[j] == '"' || L.s[j] == '\'')) {
            break; /* (a splice, a trigraph or a literal's prefix: lexed below) */
          }
          if (j - L.i >= 11 && has_operator(L.s + L.i, j - L.i)) {
            L.i = j;
            operand = 3;
            break;
          }
          L.i = j;
        }
      }
      crossed = 0;
      lx_blanks(&L, &crossed);
      c = lx_cur(&L);
      if (crossed && (kind != COND_NONE || c == '#' || (c == '%' && lx_next(&L) == ':'))) ok = 0;
      if (!ok || c == -1) break;
      if (c == '\n') {
        lx_get(&L);
        break;
      }
      int was = operand;
      operand = 0;
      if (was == 3 && c == '(') {
        lx_get(&L);
        operand = 2;
        continue;
      }
      if ((c == '<' || c == '"') && (was == 1 || was == 2)) {
        /* a header name: its bytes must read the same as tokens */
        int close = c == '<' ? '>' : '"';
        size_t j = L.i + 1;
        for (; j < L.n && L.s[j] != close && L.s[j] != '\n'; j++) {
          unsigned char b = (unsigned char)L.s[j];
          if (b == '"' || b == '\'' || b == '\\' || b == '?' ||
              (b == '/' && j + 1 < L.n && (L.s[j + 1] == '*' || L.s[j + 1] == '/'))) {
            ok = 0;
          }
        }
        L.i = j < L.n && L.s[j] == close ? j + 1 : j;
        continue;
      }
      if (c == '"' || c == '\'') {
        lx_get(&L);
        (void)lx_quoted(&L, c); /* (one left open runs to the line's end, in both readings) */
      } else if (is_ident(c) && !(c >= '0' && c <= '9')) {
        ident id;
        lx_ident(&L, &id);
        int q = lx_cur(&L);
        int prefix = literal_prefix(&id, q);
        if (prefix == 'r' && s->d.raw_strings) {
          ok = 0;
        } else if (prefix != 0) {
          lx_get(&L);
          (void)lx_quoted(&L, q);
        } else if (id.len < sizeof id.text && has_operator(id.text, id.len)) {
          operand = 3; /* its '(' may follow */
        }
      } else if ((c >= '0' && c <= '9') || (c == '.' && lx_next(&L) >= '0' && lx_next(&L) <= '9')) {
        lx_number(&L, 0);
        if (lx_cur(&L) == '\'' && is_ident(lx_next(&L))) ok = 0; /* a digit separator? */
      } else {
        lx_get(&L);
      }
    }
    if (kind != COND_NONE && num_dirs > 0) dirs[num_dirs - 1].next_line = L.i;
  }
  /* The chains, over the conditionals NVRTC reads: a group that opens dead runs to the next
   * #elif, #else or #endif of its chain, whose conditionals NVRTC does not read. */
  size_t(*out)[2] = NULL;
  size_t count = 0, out_cap = 0;
  cond_chains ch = {0, 0};
  for (size_t d = 0; ok && d < num_dirs; d++) {
    if (!cond_step(&dirs[d].rest, dirs[d].kind, &ch)) continue;
    size_t e = d + 1, depth = 0;
    for (; e < num_dirs; e++) {
      int k = dirs[e].kind;
      if (k == COND_IF || k == COND_IFDEF || k == COND_IFNDEF) {
        depth++;
      } else if (k == COND_ENDIF && depth > 0) {
        depth--;
      } else if (depth == 0) {
        break;
      }
    }
    size_t from = dirs[d].next_line, to = e < num_dirs ? dirs[e].line_at : n;
    if (to > from) {
      if (count == out_cap) {
        size_t ncap = out_cap ? 2 * out_cap : 8;
        size_t(*no)[2] = t4a_host_realloc(out, ncap * sizeof *no);
        if (no == NULL) {
          free(out);
          free(dirs);
          return T4A_HOST_OUT_OF_MEMORY;
        }
        out = no;
        out_cap = ncap;
      }
      out[count][0] = from;
      out[count++][1] = to;
    }
    d = e - 1; /* the loop steps to the directive that ends the group */
  }
  free(dirs);
  if (!ok) {
    free(out);
    return T4A_OK;
  }
  *ranges = out;
  *num = count;
  return T4A_OK;
}

/* Whether the identifier at `at` of L's text, splices folded, is one of has_operator's. */
static int spelled_operator(const lexer *L, size_t at) {
  lexer T = *L;
  T.i = at;
  ident id;
  lx_ident(&T, &id);
  return id.len < sizeof id.text && has_operator(id.text, id.len);
}

/* Where position `until` of a directive's rest (L0 just past its name) stands: IN_CALL inside a
 * parenthesized group that an identifier or a ')' opens (a function-like macro's arguments,
 * perhaps: `F(`, `H()(`), AFTER_NAME after an identifier that could be a macro (not `defined`
 * or its operand), whose body could open such a group. */
enum { IN_CALL = 1, AFTER_NAME = 2 };
static int in_call(const scan *s, const lexer *L0, size_t until) {
  lexer L = *L0;
  uint64_t called = 0; /* a bit per open group (the first 64): a call's, perhaps */
  size_t depth = 0;
  int opens = 0, names = 0, defined = 0; /* defined: 1 after `defined`, 2 after `defined (` */
  int has = 0; /* 1 after __has_include (or _next, __has_embed), 2 after its '(' */
  for (;;) {
    lx_blanks(&L, NULL);
    if (L.i >= until) break;
    size_t at = L.i;
    int q = lx_cur(&L);
    if (has == 2 && (q == '<' || q == '"')) {
      /* its header name, read as check_operand reads it (no literal, comment or escape) */
      int close = q == '"' ? '"' : '>';
      lx_get(&L);
      while ((q = lx_cur(&L)) != -1 && q != '\n' && q != close) lx_get(&L);
      if (q == close) lx_get(&L);
      has = opens = 0;
      continue;
    }
    int c = directive_step(s, &L);
    if (c == -1 || c == '\n') break;
    int name = is_ident(c) && !(c >= '0' && c <= '9');
    int is_defined = name && L.i - at == 7 && memcmp(L.s + at, "defined", 7) == 0;
    if (c == '(') {
      if (opens && depth < 64) called |= (uint64_t)1 << depth;
      depth++;
    } else if (c == ')' && depth > 0) {
      depth--;
      if (depth < 64) called &= ~((uint64_t)1 << depth);
    }
    names |= name && defined == 0 && !is_defined;
    defined = is_defined ? 1 : defined == 1 && c == '(' ? 2 : 0;
    opens = name || c == ')';
    has = name && spelled_operator(&L, at) ? 1 : has == 1 && c == '(' ? 2 : 0;
  }
  return (called != 0 || depth > 64 ? IN_CALL : 0) | (names ? AFTER_NAME : 0);
}

static t4a_status add_define(scan *s, const lexer *L, const char *name, size_t name_len,
                             const char *params, size_t params_len, int func) {
  size_t end = directive_end(s, L);
  if (s->num_defs == s->defs_cap) {
    size_t cap = s->defs_cap ? s->defs_cap * 2 : 64;
    t4a_nvrtc_macro_ *nd = t4a_host_realloc(s->defs, cap * sizeof *nd);
    if (nd == NULL) return T4A_HOST_OUT_OF_MEMORY;
    s->defs = nd;
    s->defs_cap = cap;
  }
  int k = predefined_index(name, name_len);
  if (k >= 0) s->predefined_defined |= (uint64_t)1 << k;
  t4a_nvrtc_macro_ *d = &s->defs[s->num_defs++];
  d->name_len = name_len;
  d->func = func;
  d->body = L->s + L->i;
  d->body_len = end - L->i;
  d->name = name; /* in the text, which outlives the check */
  d->params = params;
  d->params_len = params_len;
  return T4A_OK;
}

/* Appends text[0..n) to out (room for 2n + 1 bytes) as scripts/gen_nvrtc_predefined.py's
 * normalized() writes a definition: tokens joined by one space — identifier and number runs,
 * ## and ..., string and character literals whole, any other byte alone — with comments and
 * line splices dropped. *len: the bytes written so far (a space goes before each token). */
static void def_normalize(const char *text, size_t n, char *out, size_t *len) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)text[i];
    if (c == '\\' && i + 1 < n && text[i + 1] == '\n') {
      i += 2;
      continue;
    }
    if (is_blank(c) || c == '\n' || c == '\r') {
      i++;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      const char *e = i + 2 < n ? memmem(text + i + 2, n - i - 2, "*/", 2) : NULL;
      i = e != NULL ? (size_t)(e - text) + 2 : n;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n') i++;
      continue;
    }
    size_t j = i + 1;
    if (is_ident(c)) {
      while (j < n && is_ident((unsigned char)text[j])) j++;
    } else if (c == '"' || c == '\'') {
      while (j < n && (unsigned char)text[j] != c) j += text[j] == '\\' && j + 1 < n ? 2 : 1;
      if (j < n) j++;
    } else if (c == '#' && j < n && text[j] == '#') {
      j++;
    } else if (c == '.' && j + 1 < n && text[j] == '.' && text[j + 1] == '.') {
      j += 2;
    }
    if (*len > 0) out[(*len)++] = ' ';
    memcpy(out + *len, text + i, j - i);
    *len += j - i;
    i = j;
  }
  out[*len] = '\0';
}

/* Whether a comment in p[0..n) could meet a splice (a backslash or a '?' after a line comment's
 * start, or inside a block comment up to its first raw end), where def_normalize, which ends a
 * line comment at a raw LF and a block comment at a raw `* /`, reads otherwise than the lexer. */
static int comment_meets_splice(const char *p, size_t n) {
  for (size_t i = 0; i + 1 < n; i++) {
    if (p[i] != '/' || (p[i + 1] != '/' && p[i + 1] != '*')) continue;
    const char *e = p[i + 1] == '*' ? memmem(p + i + 2, n - i - 2, "*/", 2) : NULL;
    size_t end = e != NULL ? (size_t)(e - p) : n;
    if (memchr(p + i, '\\', end - i) != NULL || memchr(p + i, '?', end - i) != NULL) return 1;
    i = end;
  }
  return 0;
}

/* Whether definition d (of predefined paster k) is one of NVRTC's own definitions of it: then
 * the check reads what NVRTC may use; otherwise NVRTC may use its own where the text's is not
 * applied (a dead branch, a later #define, a root's copy of a header NVRTC skips). -1: no memory.
 */
static int predefined_def_matches(const t4a_nvrtc_macro_ *d, size_t k) {
  /* A comment beside a splice or a '?': def_normalize reads neither as the lexer does (a line
   * comment goes on across a splice), so such a text is not taken for NVRTC's own. */
  if (comment_meets_splice(d->params, d->params_len) ||
      comment_meets_splice(d->body, d->body_len)) {
    return 0;
  }
  size_t cap = 2 * (d->params_len + d->body_len) + 2;
  char *norm = t4a_host_malloc(cap);
  if (norm == NULL) return -1;
  size_t nl = 0; /* the parameters and the body as one: "( a , b ) a ## b" */
  def_normalize(d->params, d->params_len, norm, &nl);
  def_normalize(d->body, d->body_len, norm, &nl);
  int found = 0;
  for (const char *v = k_predefined_defs[k]; !found && *v != '\0';) {
    const char *e = strchr(v, '\n');
    size_t vl = e != NULL ? (size_t)(e - v) : strlen(v);
    found = vl == nl && memcmp(v, norm, nl) == 0;
    v += vl + (e != NULL);
  }
  free(norm);
  return found;
}

static const char *const k_targets[] = {"__has_include_next", "__has_include", "__has_embed"};

/* A proper, non-empty substring of __has_include_next or __has_embed (other than
 * __has_include itself): what ## could join into one. */
/* Whether text[0..n) (NUL-terminated) is a proper substring of __has_include_next or
 * __has_embed, but __has_include. */
static int piece_text(const char *text, size_t n) {
  if (n == 0 || n >= 19) return 0;
  for (size_t i = 0; i < n; i++) { /* the letters of the targets only */
    char c = text[i];
    if (c != '_' && (c < 'a' || c > 'x' || !((0x9c399fU >> (c - 'a')) & 1))) return 0;
  }
  if (n == 13 && memcmp(text, "__has_include", 13) == 0) return 0;
  for (size_t t = 0; t < 3; t += 2) {
    if (n < strlen(k_targets[t]) && strstr(k_targets[t], text) != NULL) return 1;
  }
  return 0;
}

static int is_substring_piece(const ident *id) {
  return id->len < sizeof id->text && piece_text(id->text, id->len);
}

static int pieces_join_with(const scan *s, int with_may, size_t *first);

/* A byte a piece may hold (the letters of the targets and '_'). */
#define PIECE_CH(ch) \
  ((ch) == '_' || ((ch) >= 'a' && (ch) <= 'x' && ((0x9c399fU >> ((ch) - 'a')) & 1)))

/* Notes p[0..n), an identifier of a root file in the first pass, if a piece (once: a bit per
 * piece, by where it first occurs in the first target that holds it). */
static void note_may(scan *s, const char *p, size_t n) {
  if (n == 0 || n >= 19) return;
  for (size_t i = 0; i < n; i++) {
    if (!PIECE_CH(p[i])) return;
  }
  char t[20];
  memcpy(t, p, n);
  t[n] = '\0';
  if (!piece_text(t, n)) return;
  size_t bit = 0;
  for (size_t k = 0; k < 3; k += 2) {
    const char *at = n < strlen(k_targets[k]) ? strstr(k_targets[k], t) : NULL;
    if (at != NULL) {
      bit = (k == 0 ? 0 : 361) + (size_t)(at - k_targets[k]) * (k == 0 ? 19 : 12) + n;
      break;
    }
  }
  if ((s->may_bits[bit / 64] >> (bit % 64)) & 1) return;
  s->may_bits[bit / 64] |= 1ULL << (bit % 64);
  if (s->num_may == MAX_MAY) { /* not reached: every substring fits */
    s->may_unknown = 1;
    return;
  }
  memcpy(s->may[s->num_may++], t, n + 1);
  size_t unused = 0;
  if (pieces_join_with(s, 1, &unused)) s->may_joined = 1;
}

/* Notes the identifiers of an operand the first pass consumed (a second pass lexes it as
 * tokens): its byte runs of identifier characters, or unknown if it has a backslash or a '?'
 * that could start a trigraph. */
static void note_region(scan *s, const char *p, size_t n);

/* The proper substrings of __has_include_next and __has_embed but __has_include: 205. */
#define MAX_PIECES 208

static t4a_status add_piece(scan *s, const ident *id, size_t line) {
  for (size_t k = 0; k < s->num_pieces; k++) {
    if (strcmp(s->pieces[k], id->text) == 0) return T4A_OK;
  }
  if (s->pieces == NULL) {
    char *block = t4a_host_malloc(MAX_PIECES * (sizeof *s->pieces + sizeof *s->piece_at));
    if (block == NULL) return T4A_HOST_OUT_OF_MEMORY;
    s->pieces = (char(*)[20])block;
    s->piece_at = (char(*)[120])(block + MAX_PIECES * sizeof *s->pieces);
  }
  if (s->num_pieces == MAX_PIECES) return T4A_OK; /* not reached: every substring fits */
  memcpy(s->pieces[s->num_pieces], id->text, id->len + 1); /* id->len < 19 */
  if (line == 0) { /* NVRTC's own definitions: no line */
    snprintf(s->piece_at[s->num_pieces], sizeof s->piece_at[0], "%.110s", s->where);
  } else {
    snprintf(s->piece_at[s->num_pieces], sizeof s->piece_at[0], "%.90s, line %zu", s->where, line);
  }
  s->num_pieces++;
  return T4A_OK;
}

/* Whether the pieces seen can be joined into __has_include(_next) or __has_embed; *first: the
 * index of the piece that starts such a join. */
static int pieces_join_with(const scan *s, int with_may, size_t *first) {
  for (size_t t = 0; t < 3; t++) {
    const char *T = k_targets[t];
    size_t L = strlen(T);
    int reach[24] = {0};
    size_t via[24] = {0};
    reach[0] = 1;
    size_t np = s->num_pieces, nm = with_may ? s->num_may : 0;
    for (size_t i = 0; i < L; i++) {
      if (!reach[i]) continue;
      for (size_t k = 0; k < np + nm; k++) {
        const char *piece = k < np ? s->pieces[k] : s->may[k - np];
        size_t n = strlen(piece);
        if (i + n <= L && memcmp(T + i, piece, n) == 0 && !reach[i + n]) {
          reach[i + n] = 1;
          via[i + n] = i == 0 ? k : via[i];
        }
      }
    }
    if (reach[L]) {
      *first = via[L];
      return 1;
    }
  }
  return 0;
}

static int pieces_join(const scan *s, size_t *first) { return pieces_join_with(s, 0, first); }

static void note_region(scan *s, const char *p, size_t n) {
  if (s->may_joined) return;
  if (memchr(p, '\\', n) != NULL || (s->d.trigraphs && memchr(p, '?', n) != NULL)) {
    s->may_unknown = 1;
    return;
  }
  for (size_t i = 0; i < n;) {
    if (!(k_cc[(unsigned char)p[i]] & CC_IDENT)) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < n && (k_cc[(unsigned char)p[j]] & CC_IDENT)) j++;
    note_may(s, p + i, j - i);
    i = j;
  }
}

static size_t name_hash(const char *p, size_t n) { /* FNV-1a */
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return (size_t)(h ^ (h >> 29));
}

/* A name's bit in the sieve that rules most identifiers out before hashing: its length and its
 * first and last two bytes. */
static size_t func_sieve_bit(const char *p, size_t n) {
  size_t h = n * 131u + (unsigned char)p[0] * 31u + (unsigned char)p[n - 1] * 7u +
             (n > 1 ? (unsigned char)p[n - 2] * 3u + (unsigned char)p[1] : 0u);
  return h & 4095u;
}

/* Whether a use of m followed by '(' can take arguments: a function-like macro, or an
 * object-like one whose body ends in an identifier (an alias such as `#define KK K`) or ')'. */
static int body_token(const char *p, size_t n, size_t *i, size_t *start, int trigraphs);

static int callable(const t4a_nvrtc_macro_ *m, int trigraphs) {
  if (m->func) return 1;
  /* an alias (#define KK K), or a body whose last group may yield a function-like name that
   * takes the parentheses after the use (#define G ID(CAT)): its last token, past comments,
   * splices and blanks */
  size_t n = m->body_len;
  if (memchr(m->body, '/', n) == NULL && memchr(m->body, '\\', n) == NULL) {
    while (n > 0 && (m->body[n - 1] == ' ' || m->body[n - 1] == '\t' || m->body[n - 1] == '\r' ||
                     m->body[n - 1] == '\f' || m->body[n - 1] == '\v')) {
      n--;
    }
    return n > 0 && (is_ident((unsigned char)m->body[n - 1]) || m->body[n - 1] == ')');
  }
  size_t i = 0, start = 0, last = SIZE_MAX;
  int k, last_kind = 0;
  while ((k = body_token(m->body, m->body_len, &i, &start, trigraphs)) != 0) {
    last = start;
    last_kind = k;
  }
  return last != SIZE_MAX && (last_kind == 'i' || m->body[last] == ')');
}

/* Builds the set of the callable macros' names the second pass looks up. */
static t4a_status build_func_set(scan *s) {
  size_t nf = 0;
  for (size_t i = 0; i < s->num_defs; i++) nf += callable(&s->defs[i], s->d.trigraphs);
  size_t slots = 16;
  while (slots < 2 * nf) slots *= 2;
  s->func_set = t4a_host_malloc(slots * sizeof *s->func_set);
  if (s->func_set == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memset(s->func_set, 0, slots * sizeof *s->func_set);
  s->func_mask = slots - 1;
  for (size_t i = 0; i < s->num_defs; i++) {
    const t4a_nvrtc_macro_ *m = &s->defs[i];
    if (!callable(m, s->d.trigraphs) || m->name_len == 0) continue; /* never looked up */
    size_t h = name_hash(m->name, m->name_len) & s->func_mask;
    while (s->func_set[h] != 0) h = (h + 1) & s->func_mask;
    s->func_set[h] = (uint32_t)(i + 1);
    size_t b = func_sieve_bit(m->name, m->name_len);
    s->func_sieve[b / 64] |= 1ULL << (b % 64);
  }
  size_t dslots = 16;
  while (dslots < 2 * s->num_defs) dslots *= 2;
  s->def_set = t4a_host_calloc(dslots, sizeof *s->def_set);
  if (s->def_set == NULL) return T4A_HOST_OUT_OF_MEMORY;
  s->def_mask = dslots - 1;
  for (size_t i = 0; i < s->num_defs; i++) {
    const t4a_nvrtc_macro_ *m = &s->defs[i];
    if (m->name_len == 0) continue;
    size_t h = name_hash(m->name, m->name_len) & s->def_mask;
    while (s->def_set[h] != 0) h = (h + 1) & s->def_mask;
    s->def_set[h] = (uint32_t)(i + 1);
  }
  for (size_t w = 0; w < s->num_wrappers; w++) { /* for the fast lane of the second pass */
    size_t b = func_sieve_bit(s->wrappers[w], strlen(s->wrappers[w]));
    s->func_sieve[b / 64] |= 1ULL << (b % 64);
  }
  return T4A_OK;
}

static int is_func_macro(const scan *s, const char *name, size_t n) {
  if (s->func_set == NULL || n == 0) return 0;
  size_t b = func_sieve_bit(name, n);
  if (!((s->func_sieve[b / 64] >> (b % 64)) & 1)) return 0;
  for (size_t h = name_hash(name, n) & s->func_mask; s->func_set[h] != 0;
       h = (h + 1) & s->func_mask) {
    const t4a_nvrtc_macro_ *m = &s->defs[s->func_set[h] - 1];
    if (m->name_len == n && memcmp(m->name, name, n) == 0) return 1;
  }
  return 0;
}

/* Whether some definition the scan holds is named name[0..n). */
static int macro_defined(const scan *s, const char *name, size_t n) {
  if (s->def_set == NULL || n == 0) return 0;
  for (size_t h = name_hash(name, n) & s->def_mask; s->def_set[h] != 0;
       h = (h + 1) & s->def_mask) {
    const t4a_nvrtc_macro_ *m = &s->defs[s->def_set[h] - 1];
    if (m->name_len == n && memcmp(m->name, name, n) == 0) return 1;
  }
  return 0;
}

/* Whether p[0..n) is a reserved name (`__x`, `_X`): the compiler predefines such names without
 * a #define any text or NVRTC's built-in headers show (`__cplusplus` 201703L, `__cpp_rtti`,
 * `_BOOL` 1, `_WCHAR_T` 1, `__CUDA_ARCH__`, `__LINE__`), so an operand that holds one no text
 * defines may be replaced by a value the check cannot see. (Measured with NVRTC 13.0: it
 * predefines none of `linux`, `unix`, `__linux`, `__GNUC__`, `__x86_64`, `_LP64`.) */
static int reserved_name(const char *p, size_t n) {
  return n >= 2 && p[0] == '_' && (p[1] == '_' || (p[1] >= 'A' && p[1] <= 'Z'));
}

/* A wrapper's <...> argument at L (before the '<'): its tokens are macro-replaced before the
 * wrapper substitutes them, so an identifier in it that some definition names, or a reserved
 * name (which the compiler may predefine), makes it a computed include. Returns the first such,
 * or NULL. */
static const char *wrapper_arg_macro(const scan *s, const lexer *L, size_t *len) {
  size_t i = L->i + 1;
  while (i < L->n && L->s[i] != '>' && L->s[i] != '\n') {
    unsigned char c = (unsigned char)L->s[i];
    if (!(k_cc[c] & CC_IDENT) || (c >= '0' && c <= '9')) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < L->n && (k_cc[(unsigned char)L->s[j]] & CC_IDENT)) j++;
    size_t n = j - i;
    const char *id = L->s + i;
    if (macro_defined(s, id, n) || reserved_name(id, n)) {
      *len = n;
      return id;
    }
    i = j;
  }
  return NULL;
}

/* A wrapper's <...> argument at L (before the '<'): the first identifier in it, before its first
 * '>', that is one of the n parameters (names under 32 bytes), or NULL. */
static const char *wrapper_arg_param(const lexer *L, const ident *params, size_t n, size_t *len) {
  size_t i = L->i + 1;
  while (i < L->n && L->s[i] != '>' && L->s[i] != '\n') {
    unsigned char c = (unsigned char)L->s[i];
    size_t j = i + 1;
    if (k_cc[c] & CC_IDENT) {
      while (j < L->n && (k_cc[(unsigned char)L->s[j]] & CC_IDENT)) j++;
      for (size_t k = 0; !(c >= '0' && c <= '9') && k < n; k++) {
        if (params[k].len == j - i && memcmp(params[k].text, L->s + i, j - i) == 0) {
          *len = j - i;
          return L->s + i;
        }
      }
    }
    i = j;
  }
  return NULL;
}

/* Whether a wrapper's <...> argument at L (before the '<') holds, before its first '>', a blank,
 * a comment's start, a quote, a parenthesis or a backslash, or whether that '>' is joined to a
 * byte beside it: the argument is tokens, not a header name. NVRTC makes the name of their
 * spellings with one space wherever white space or a comment stood, a parenthesis in it makes
 * the argument run on past check_operand's ')', and a backslash can spell an identifier (a
 * UCN) that a macro replaces; check_operand reads the bytes to the first '>' as written. */
static int wrapper_arg_respelled(const lexer *L) {
  size_t i = L->i + 1;
  for (; i < L->n && L->s[i] != '>' && L->s[i] != '\n'; i++) {
    char c = L->s[i];
    if (is_blank((unsigned char)c) || c == '"' || c == '\'' || c == '(' || c == ')' || c == '\\') {
      return 1;
    }
    if (c == '/' && i + 1 < L->n && (L->s[i + 1] == '*' || L->s[i + 1] == '/')) return 1;
  }
  /* a '>' that NVRTC reads as part of another token (->, >=, <=>, >>, %>, :>) */
  return i < L->n && L->s[i] == '>' &&
         ((i > L->i + 1 && strchr("->%:=", L->s[i - 1]) != NULL) ||
          (i + 1 < L->n && (L->s[i + 1] == '=' || L->s[i + 1] == '>')));
}

/* Whether text[0..n) is a proper, non-empty substring of a wrapper's name. */
static int wrapper_piece(const scan *s, const char *text, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!s->wrapper_chars[(unsigned char)text[i]]) return 0; /* in no wrapper's name */
  }
  for (size_t w = 0; w < s->num_wrappers; w++) {
    const char *name = s->wrappers[w];
    size_t wn = strlen(name);
    if (n >= wn) continue;
    for (size_t k = 0; k + n <= wn; k++) {
      if (name[k] == text[0] && memcmp(name + k + 1, text + 1, n - 1) == 0) return 1;
    }
  }
  return 0;
}

static t4a_status add_wrapper_piece(scan *s, const char *text, size_t n, size_t line) {
  if (n >= 32 || !wrapper_piece(s, text, n)) return T4A_OK;
  for (size_t k = 0; k < s->num_wpieces; k++) {
    if (strlen(s->wpieces[k].text) == n && memcmp(s->wpieces[k].text, text, n) == 0) return T4A_OK;
  }
  if (s->num_wpieces == s->wpieces_cap) {
    size_t cap = s->wpieces_cap ? s->wpieces_cap * 2 : 16;
    struct wpiece *nw = t4a_host_realloc(s->wpieces, cap * sizeof *nw);
    if (nw == NULL) return T4A_HOST_OUT_OF_MEMORY;
    s->wpieces = nw;
    s->wpieces_cap = cap;
  }
  struct wpiece *wp = &s->wpieces[s->num_wpieces++];
  memcpy(wp->text, text, n);
  wp->text[n] = '\0';
  if (line == 0) { /* NVRTC's own definitions: no line */
    snprintf(wp->at, sizeof wp->at, "%.110s", s->where);
  } else {
    snprintf(wp->at, sizeof wp->at, "%.90s, line %zu", s->where, line);
  }
  return T4A_OK;
}

/* Whether the pieces recorded can be joined into a wrapper's name: its index, or -1; *first:
 * the piece that starts the join. */
static long wrapper_pieces_join(const scan *s, size_t *first) {
  for (size_t w = 0; w < s->num_wrappers; w++) {
    const char *T = s->wrappers[w];
    size_t L = strlen(T);
    int reach[32] = {0};
    size_t via[32] = {0};
    reach[0] = 1;
    for (size_t i = 0; i < L; i++) {
      if (!reach[i]) continue;
      for (size_t k = 0; k < s->num_wpieces; k++) {
        size_t n = strlen(s->wpieces[k].text);
        if (i + n <= L && memcmp(T + i, s->wpieces[k].text, n) == 0 && !reach[i + n]) {
          reach[i + n] = 1;
          via[i + n] = i == 0 ? k : via[i];
        }
      }
    }
    if (reach[L]) {
      *first = via[L];
      return (long)w;
    }
  }
  return -1;
}

static t4a_status scan_text(scan *s, const char *text, size_t n);

/* A #define (pass 1) whose body opens a parenthesis it does not close: its expansion takes the
 * tokens that follow wherever it is used. A request's such definition used in a root's text
 * would take the root's tokens as arguments that no collection sees, so with roots it is
 * refused; any such definition widens the expansion's coarse check (nvrtc_expand.c). */
static t4a_status note_open_body(scan *s, const ident *name, size_t line) {
  if (s->pass != 1) return T4A_OK;
  s->open_body = 1;
  if (s->cur_root < 0 && s->num_roots > 0) {
    return REFUSE("%s, line %zu: the body of %s opens a parenthesis it does not close, so where "
                  "a root's text uses it the check cannot tell what its arguments hold%s",
                  s->where, line, name->text, k_root_advice);
  }
  return T4A_OK;
}

/* Keeps buf (heap) to the end of the check, since definitions and computed includes point into
 * it; frees it when it cannot. */
static t4a_status keep_buffer(scan *s, char *buf) {
  if (s->num_pragmas == s->pragmas_cap) {
    size_t ncap = s->pragmas_cap ? s->pragmas_cap * 2 : 8;
    char **np = t4a_host_realloc(s->pragmas, ncap * sizeof *np);
    if (np == NULL) {
      free(buf);
      return T4A_HOST_OUT_OF_MEMORY;
    }
    s->pragmas = np;
    s->pragmas_cap = ncap;
  }
  s->pragmas[s->num_pragmas++] = buf;
  return T4A_OK;
}

/* A #define's name spelled across line splices (`#define D\` LF `X`), *p[0..*n): replaced by a
 * kept copy with the splices folded, so that the definitions' lookups, which compare bytes, see
 * the name NVRTC defines. INVALID_ARGUMENT (nothing set) when folding splices does not give the
 * `len` characters the lexer read: the name holds a universal character name. */
static t4a_status fold_name(scan *s, const char **p, size_t *n, size_t len) {
  char *buf = t4a_host_malloc(*n);
  if (buf == NULL) return T4A_HOST_OUT_OF_MEMORY;
  size_t k = 0;
  for (size_t i = 0; i < *n;) {
    size_t end = splice_at(*p, *n, i, s->d.trigraphs);
    if (end != 0) {
      i = end;
    } else {
      buf[k++] = (*p)[i++];
    }
  }
  if (k != len || memchr(buf, '\\', k) != NULL) {
    free(buf);
    return T4A_INVALID_ARGUMENT;
  }
  t4a_status st = keep_buffer(s, buf);
  if (st != T4A_OK) return st;
  *p = buf;
  *n = k;
  return T4A_OK;
}

/* Scans buf[0..len) (heap, "pragma " and a string literal's destringized content; kept to the
 * end of the check, since computed includes point into it) as a text of its own. */
static t4a_status scan_operand_text(scan *s, char *buf, size_t len, size_t line) {
  t4a_status kept = keep_buffer(s, buf);
  if (kept != T4A_OK) return kept;
  if (s->pragma_depth >= 4) {
    return REFUSE("%s, line %zu: string literals that spell pragmas nested more than 4 deep%s",
                  s->where, line, s->num_roots > 0 ? k_root_advice : k_advice);
  }
  char where[sizeof s->where];
  memcpy(where, s->where, sizeof where);
  snprintf(s->where, sizeof s->where, "%.200s, line %zu, in a string literal", where, line);
  s->pragma_depth++;
  t4a_status st = scan_text(s, buf, len);
  s->pragma_depth--;
  memcpy(s->where, where, sizeof where);
  return st;
}

/* A string literal just lexed, text[from..to) from its first quote (raw: after R"): any string
 * can become a pragma's operand (`#define S "..."` then `_Pragma(S)`, a raw string, a macro
 * that spells _Pragma), so one that spells __has_ or a wrapper's name is scanned as a text of
 * its own (its escapes undone). */
static t4a_status check_string(scan *s, const char *text, size_t from, size_t to, int raw,
                               size_t line) {
  if (to <= from + 1) return T4A_OK;
  /* The content as NVRTC reads it (splices and trigraphs undone: copied only when it has a
   * backslash, or a '?' under trigraphs); it is read as a text when it spells __has_ or a
   * wrapper's name, or holds an identifier a paste in the pragma could join (a piece of either)
   * or, in a root, a macro's name (the roots' own invocations are not expanded: the second pass
   * collects its arguments). */
  const char *p = text + from + 1;
  size_t m = to - from - 1;
  char *buf = NULL;
  if (memchr(p, '\\', m) != NULL || (s->d.trigraphs && memchr(p, '?', m) != NULL)) {
    buf = t4a_host_malloc(m + 8);
    if (buf == NULL) return T4A_HOST_OUT_OF_MEMORY;
    size_t len = 7;
    lexer C = {text, to, from + 1, 1, s->d.trigraphs, NULL};
    int c;
    while (C.i < to && (c = lx_get(&C)) != -1) {
      if (!raw && c == '\\' && (lx_cur(&C) == '"' || lx_cur(&C) == '\\')) c = lx_get(&C);
      buf[len++] = (char)c;
    }
    p = buf + 7;
    m = len - 7;
  }
  int spells = memmem(p, m, "__has_", 6) != NULL;
  for (size_t w = 0; !spells && s->pass == 2 && w < s->num_wrappers; w++) {
    spells = memmem(p, m, s->wrappers[w], strlen(s->wrappers[w])) != NULL;
  }
  /* Also the identifiers the second pass meets when it reads this content as a text, for its
   * shortcut; they can be a macro's arguments there only if the content holds a '('. */
  int args = s->pass == 1 && s->cur_root >= 0 && memchr(p, '(', m) != NULL;
  for (size_t i = 0; i < m && (!spells || (args && !s->may_joined));) {
    size_t j = i;
    while (j < m && is_ident((unsigned char)p[j])) j++;
    if (j == i || (p[i] >= '0' && p[i] <= '9')) { /* no identifier, or a pp-number's run */
      i = j > i ? j : i + 1;
      continue;
    }
    if (args && !s->may_joined) note_may(s, p + i, j - i);
    if (!spells) {
      size_t len = j - i;
      if (p[i] == '_' && len < sizeof ((ident *)0)->text) { /* a piece starts with '_' */
        ident id;
        id.len = len;
        memcpy(id.text, p + i, len);
        id.text[len] = '\0';
        spells = is_piece(&id);
      }
      spells = spells || (s->pass == 2 && s->num_wrappers > 0 && len < 32 &&
                          wrapper_piece(s, p + i, len)) ||
               (s->pass == 2 && s->cur_root >= 0 && macro_defined(s, p + i, len));
    }
    i = j;
  }
  if (!spells) {
    free(buf);
    return T4A_OK;
  }
  if (buf == NULL) {
    buf = t4a_host_malloc(m + 8);
    if (buf == NULL) return T4A_HOST_OUT_OF_MEMORY;
    memcpy(buf + 7, p, m);
  }
  memcpy(buf, "pragma ", 7);
  return scan_operand_text(s, buf, 7 + m, line);
}

/* Lexes one text and checks its includes. */
/* Where NVRTC skips the group (its condition not known to the check) it reads a literal or a
 * header name's tokens at the comment's opening (after_open, see lexer.mixed), so the comment,
 * which hides lines from the check, is none for NVRTC. */
static t4a_status comment_skipper_refusal(const scan *s, const lexer *L, size_t after_open) {
  return REFUSE(
      "%s, line %zu: a block comment across a newline opens where NVRTC, skipping the group, "
      "reads no comment (a digit separator, a quote or a header name before it on its line)%s",
      s->where, count_newlines(L->s, after_open) + 1, s->num_roots > 0 ? k_root_advice : k_advice);
}

static t4a_status scan_text_ranges(scan *s, const char *text, size_t n, size_t (*dead)[2],
                                   size_t num_dead) {
  size_t next_dead = 0;
  size_t mixed = 0; /* (see lexer.mixed) */
  lexer L = {text, n, 0, 1, s->d.trigraphs, &mixed};
  int line_start = 1;
  int ifdef_operand = 0; /* the next token is the operand of #ifdef / #ifndef */
  int after_defined = 0; /* 1: the last token was `defined`; 2: `defined (` */
  /* The function-like macro being defined on this line (its name and parameters), if any. */
  ident def_name;
  ident def_params[16];
  size_t num_params = 0;
  int params_lost = 0; /* a parameter past the 16th, or with a name of 32 bytes or more */
  int in_define = 0;
  int in_directive = 0; /* the line is a directive's (its newline ends it) */
  lexer dir_rest = L;   /* in a directive: just past its name */
  long body_parens = 0; /* '(' less ')' in the body of the #define being read (pass 1) */
  def_name.len = 0;
  size_t arg_depth = 0; /* pass 2: inside the arguments of a function-like macro */
  int args_on_directive = 0; /* the outermost invocation opened on a directive's line */
  int def_is_func = 0;
  size_t def_start = 0, def_end = 0;
  t4a_status st;
  for (;;) {
    if (s->cur_root >= 0 && s->root_any_piece && !line_start && !in_define && after_defined == 0 &&
        ifdef_operand == 0 && arg_depth == 0) {
      /* The fast lane of a root file, between tokens that change nothing: blanks, punctuators
       * but # % / . and quotes, and identifiers that end at a byte read as itself (no splice,
       * no literal's prefix) and are not `defined`, nor could be __has_include or (second
       * pass) a wrapper or a function-like macro. What stops it is lexed below as before. */
      size_t i = L.i;
      while (i < L.n) {
        unsigned char b = (unsigned char)L.s[i], cc = k_cc[b];
        if (cc & (CC_SKIP | CC_PAREN)) {
          i++;
          continue;
        }
        if (!(cc & CC_IDENT) || (b >= '0' && b <= '9')) break;
        size_t j = i + 1;
        while (j < L.n && (k_cc[(unsigned char)L.s[j]] & CC_IDENT)) j++;
        if (j < L.n && (!lx_plain((unsigned char)L.s[j]) || L.s[j] == '"' || L.s[j] == '\'')) break;
        size_t len = j - i;
        if (s->pass == 1 && !s->may_joined && len < 19 && PIECE_CH(L.s[i]) &&
            PIECE_CH(L.s[j - 1])) {
          note_may(s, L.s + i, len);
        }
        if (len == 7 && memcmp(L.s + i, "defined", 7) == 0) break;
        if (len >= 11 && memcmp(L.s + i, "__has_", 6) == 0) break;
        if (s->pass == 1 && predefined_index(L.s + i, len) >= 0) break; /* noted below */
        if (s->pass == 2) {
          size_t bit = func_sieve_bit(L.s + i, len);
          if ((s->func_sieve[bit / 64] >> (bit % 64)) & 1) break;
        }
        i = j;
      }
      L.i = i;
    }
    int crossed = 0;
    if (L.i >= L.n || is_blank((unsigned char)L.s[L.i]) || L.s[L.i] == '/' ||
        !lx_plain((unsigned char)L.s[L.i])) {
      lx_blanks(&L, &crossed); /* (nothing to skip at any other byte) */
    }
    if (mixed != 0) return comment_skipper_refusal(s, &L, mixed);
    /* a '#' after a block comment's newline starts a directive on a text line only: inside a
     * directive NVRTC reads it as the directive's (measured with NVRTC 13.0) */
    if (crossed && !in_directive) line_start = 1;
    int c = lx_cur(&L);
    if (c == -1) break;
    if (c == '\n') {
      if (in_define && body_parens > 0 && (st = note_open_body(s, &def_name, L.line)) != T4A_OK) {
        return st;
      }
      lx_get(&L);
      line_start = 1;
      /* An invocation a directive's line left open (a body's `F(`, an #if line NVRTC may skip)
       * is collected on as if a text line had opened it: a later directive's parentheses are not
       * its. */
      if (in_directive) args_on_directive = 0;
      in_directive = 0;
      ifdef_operand = 0;
      after_defined = 0;
      in_define = 0;
      while (next_dead < num_dead && dead[next_dead][0] < L.i) next_dead++;
      if (next_dead < num_dead && dead[next_dead][0] == L.i) { /* a group NVRTC skips */
        L.line += count_newlines(L.s + L.i, dead[next_dead][1] - L.i);
        L.i = dead[next_dead++][1];
        s->groups_skipped++;
      }
      continue;
    }
    int was_line_start = line_start;
    line_start = 0;
    int hash = c == '#' || (c == '%' && lx_next(&L) == ':');
    if (hash) {
      size_t hash_line = L.line;
      lx_get(&L);
      if (c == '%') lx_get(&L);
      int c2 = lx_cur(&L);
      if (c2 == '#' || (c2 == '%' && lx_next(&L) == ':')) { /* ## */
        s->pasted = 1;
        lx_get(&L);
        if (c2 == '%') lx_get(&L);
        after_defined = 0;
        continue;
      }
      after_defined = 0;
      if (!was_line_start) continue;
      /* A directive. */
      in_directive = 1;
      lx_blanks(&L, NULL);
      if (!is_ident(lx_cur(&L))) continue;
      ident name;
      lx_ident(&L, &name);
      dir_rest = L;
      if (s->pass == 2 && s->cur_root >= 0 && arg_depth > 0 &&
          (ident_is(&name, "include") || ident_is(&name, "include_next") ||
           ident_is(&name, "import") || ident_is(&name, "embed"))) {
        /* The included file's tokens would be this invocation's arguments, which the file's
         * own collection never sees. */
        return REFUSE(
            "%s, line %zu: %s stands among the arguments of a function-like macro, "
            "so the check cannot tell what the arguments hold (a paste could make "
            "__has_include)%s",
            s->where, hash_line, name.text, k_root_advice);
      }
      if (ident_is(&name, "define")) {
        /* Remember a function-like macro's parameters: __has_include applied to one makes the
         * macro a wrapper, whose every use is checked in the second pass. */
        lx_blanks(&L, NULL);
        if (is_ident(lx_cur(&L))) {
          def_start = L.i;
          body_parens = 0;
          lx_ident(&L, &def_name);
          def_end = L.i;
          const char *def_spelled = L.s + def_start; /* the name as looked up */
          size_t def_spelled_len = def_end - def_start;
          if (s->pass == 1 && def_spelled_len != def_name.len &&
              (st = fold_name(s, &def_spelled, &def_spelled_len, def_name.len)) != T4A_OK) {
            return st == T4A_INVALID_ARGUMENT
                       ? REFUSE(
                             "%s, line %zu: the name of the macro %s is written with a "
                             "universal character name%s",
                             s->where, L.line, def_name.text,
                             s->num_roots > 0 ? k_root_advice : k_advice)
                       : st;
          }
          num_params = 0;
          params_lost = 0;
          in_define = 1;
          def_is_func = lx_cur(&L) == '(';
          if (lx_cur(&L) == '(') {
            lx_get(&L);
            for (;;) {
              lx_blanks(&L, NULL);
              int pc = lx_cur(&L);
              if (is_ident(pc) && num_params < 16) {
                lx_ident(&L, &def_params[num_params]);
                params_lost |= def_params[num_params++].len >= sizeof def_params[0].text;
              } else if (is_ident(pc)) { /* past 16: read, not kept (the body starts after) */
                ident extra;
                lx_ident(&L, &extra);
                params_lost = 1;
              } else if (pc == ',' || pc == '.') {
                lx_get(&L);
              } else {
                if (pc == ')') lx_get(&L);
                break;
              }
            }
          }
          if (s->pass == 1 && (st = add_define(s, &L, def_spelled, def_spelled_len, L.s + def_end,
                                               L.i - def_end, def_is_func)) != T4A_OK) {
            return st;
          }
        }
        continue;
      }
      if (ident_is(&name, "undef")) {
        if (s->prune && !s->prune_lost) {
          /* its name, or one that a splice, a trigraph or a universal character name spells */
          lexer u = L;
          lx_blanks(&u, NULL);
          size_t at = u.i;
          int c1 = lx_cur(&u), named = c1 == '\\';
          if (is_ident(c1) && !(c1 >= '0' && c1 <= '9')) {
            ident id;
            lx_ident(&u, &id);
            named = ident_is(&id, "__CUDACC_RTC__") || memchr(u.s + at, '\\', u.i - at) != NULL ||
                    memchr(u.s + at, '?', u.i - at) != NULL;
          }
          s->prune_lost = named;
        }
        ifdef_operand = 1;
        continue;
      }
      if (s->pass == 2) {
        if (ident_is(&name, "ifdef") || ident_is(&name, "ifndef") ||
            ident_is(&name, "elifdef") || ident_is(&name, "elifndef")) {
          ifdef_operand = 1;
        }
        continue;
      }
      if (ident_is(&name, "include") || ident_is(&name, "include_next") ||
          ident_is(&name, "import") || ident_is(&name, "embed")) {
        char what[40];
        snprintf(what, sizeof what, "#%s", name.text);
        lx_blanks(&L, NULL);
        size_t op = L.i;
        if ((st = check_operand(s, &L, what, hash_line)) != T4A_OK) return st;
        if (s->cur_root >= 0) note_region(s, L.s + op, L.i - op); /* (pass 1 only here) */
      } else if (ident_is(&name, "ifdef") || ident_is(&name, "ifndef") ||
                 ident_is(&name, "elifdef") || ident_is(&name, "elifndef")) {
        ifdef_operand = 1;
      }
      continue;
    }
    if (is_ident(c) && !(c >= '0' && c <= '9')) {
      size_t line = L.line;
      ident id;
      size_t id_start = L.i;
      lx_ident(&L, &id);
      const char *id_raw = L.s + id_start;
      size_t id_raw_len = L.i - id_start;
      if (s->pass == 1 && s->cur_root >= 0 && !s->may_joined) note_may(s, id.text, id.len);
      if (s->pass == 1 && id.len < sizeof id.text && !ifdef_operand && after_defined == 0) {
        /* (an operand of defined, #ifdef or #ifndef is not expanded) */
        if (id.text[0] == '_' && builtin_target_paster(id.text, id.len)) s->pasted = 1;
        int k = predefined_index(id.text, id.len);
        if (k >= 0 && !((s->predefined_used >> k) & 1)) {
          s->predefined_used |= (uint64_t)1 << k;
          snprintf(s->predefined_at[k], sizeof s->predefined_at[k], "%.140s, line %zu", s->where,
                   line);
        }
      }
      int q = lx_cur(&L);
      int prefix = literal_prefix(&id, q);
      if (prefix == 'r' && s->d.raw_strings) {
        size_t from = L.i;
        lx_get(&L);
        size_t body = L.i;
        if (lx_raw(&L)) {
          return REFUSE(
              "%s, line %zu: a raw string literal has a line splice in its delimiter or "
              "body, so where NVRTC ends it is not certain%s",
              s->where, line, s->num_roots > 0 ? k_root_advice : k_advice);
        }
        /* No valid delimiter: NVRTC ignores the raw indicator and reads a plain string (and
         * fails the compile, measured with 13.0), and so does the check. */
        int plain = L.i == body;
        if (plain) lx_quoted(&L, '"');
        if ((st = check_string(s, L.s, from, L.i, !plain, line)) != T4A_OK) return st;
        after_defined = ifdef_operand = 0;
        continue;
      }
      if (prefix == 'p') {
        size_t from = L.i;
        lx_get(&L);
        lx_quoted(&L, q);
        if (q == '"' && (st = check_string(s, L.s, from, L.i, 0, line)) != T4A_OK) return st;
        after_defined = ifdef_operand = 0;
        continue;
      }
      int has_include = id.len < sizeof id.text && has_operator(id.text, id.len);
      int wrapper = 0;
      if (s->pass == 2) {
        for (size_t w = 0; w < s->num_wrappers && !wrapper; w++) {
          wrapper = id.len < sizeof id.text && memcmp(id.text, s->wrappers[w], id.len + 1) == 0;
        }
        has_include = 0;
      }
      if (wrapper && !ifdef_operand && after_defined == 0) {
        /* A use of a macro that applies __has_include to its argument: a literal, checked. */
        lx_blanks(&L, NULL);
        if (lx_cur(&L) != '(') {
          return REFUSE("%s, line %zu: %s (it applies __has_include to its argument) is not "
                        "applied to a literal header name here%s",
                        s->where, line, id.text, k_root_advice);
        }
        lx_get(&L);
        lx_blanks(&L, NULL);
        size_t mlen = 0;
        const char *macro = lx_cur(&L) == '<' ? wrapper_arg_macro(s, &L, &mlen) : NULL;
        if (macro == NULL && lx_cur(&L) == '<' && in_define && def_is_func &&
            (params_lost || wrapper_arg_param(&L, def_params, num_params, &mlen) != NULL)) {
          /* In a function-like macro's body a parameter in the argument is replaced by the
           * caller's tokens. */
          return REFUSE(
              "%s, line %zu: %s's argument in the body of the macro %s may name one of "
              "its parameters, which the caller's tokens replace (a computed include)%s",
              s->where, line, id.text, def_name.text, k_root_advice);
        }
        if (macro != NULL) {
          return REFUSE("%s, line %zu: %s's argument names the macro %.*s, which is replaced "
                        "before %s applies __has_include to it (a computed include)%s",
                        s->where, line, id.text, (int)(mlen < 64 ? mlen : 64), macro, id.text,
                        k_root_advice);
        }
        if (lx_cur(&L) == '<' && wrapper_arg_respelled(&L)) {
          return REFUSE(
              "%s, line %zu: %s's argument <...> holds white space, a comment, a quote, "
              "a parenthesis, a backslash or a '>' joined to another token, so the "
              "header name NVRTC makes of the argument's tokens is not the bytes "
              "written (measured: a comment or a run of blanks is one space)%s",
              s->where, line, id.text, k_root_advice);
        }
        if ((st = check_operand(s, &L, id.text, line)) != T4A_OK) return st;
        lx_blanks(&L, NULL);
        if (lx_cur(&L) != ')') {
          return REFUSE("%s, line %zu: %s is not applied to one literal header name here%s",
                        s->where, line, id.text, k_root_advice);
        }
        lx_get(&L);
        after_defined = ifdef_operand = 0;
        continue;
      }
      if (has_include && !ifdef_operand && after_defined == 0 && in_define && num_params > 0 &&
          s->num_roots > 0) {
        /* In a function-like macro: __has_include(PARAM) makes the macro a wrapper. */
        lexer save = L;
        lx_blanks(&L, NULL);
        int is_wrapper = 0;
        if (lx_cur(&L) == '(') {
          lx_get(&L);
          lx_blanks(&L, NULL);
          if (is_ident(lx_cur(&L))) {
            ident arg;
            lx_ident(&L, &arg);
            lx_blanks(&L, NULL);
            for (size_t k = 0; k < num_params && lx_cur(&L) == ')'; k++) {
              is_wrapper |= arg.len == def_params[k].len && arg.len < sizeof arg.text &&
                            strcmp(arg.text, def_params[k].text) == 0;
            }
          }
        }
        if (is_wrapper && def_name.len < sizeof def_name.text) {
          lx_get(&L); /* ')' */
          int known = 0;
          for (size_t w = 0; w < s->num_wrappers; w++) known |= strcmp(s->wrappers[w], def_name.text) == 0;
          if (!known) {
            if (s->num_wrappers == s->wrappers_cap) {
              size_t cap = s->wrappers_cap ? s->wrappers_cap * 2 : 8;
              char(*nw)[32] = t4a_host_realloc(s->wrappers, cap * sizeof *nw);
              if (nw == NULL) return T4A_HOST_OUT_OF_MEMORY;
              s->wrappers = nw;
              s->wrappers_cap = cap;
            }
            snprintf(s->wrappers[s->num_wrappers++], 32, "%s", def_name.text);
            for (const char *wc = def_name.text; *wc != '\0'; wc++) {
              s->wrapper_chars[(unsigned char)*wc] = 1;
            }
          }
          after_defined = ifdef_operand = 0;
          continue;
        }
        L = save;
      }
      if (has_include && !ifdef_operand && after_defined == 0) {
        /* A use: it must be applied to a literal here (a macro could apply it to any path). */
        lx_blanks(&L, NULL);
        if (lx_cur(&L) != '(') {
          return REFUSE("%s, line %zu: %s is not applied to a literal header name here%s", s->where,
                        line, id.text, k_advice);
        }
        lx_get(&L);
        lx_blanks(&L, NULL);
        if (in_define && lx_cur(&L) != '"' &&
            (lx_cur(&L) == '<' || (def_is_func && s->cur_root >= 0))) {
          /* In a macro's body the operand's tokens are replaced where the macro is used: a <...>
           * operand's identifiers may be macros (or, in a function-like macro, parameters), and
           * a root's function-like macro whose operand is not a string literal is a wrapper only
           * in the one form tracked above (the operand one of its parameters, names under 32
           * bytes, at most 16 parameters); as a computed include it would be resolved as if its
           * parameters were macros. (The request's own macro operands are refused below.) */
          return REFUSE("%s, line %zu: %s in the body of the macro %s is applied to an operand "
                        "replaced where the macro is used (a computed include)%s",
                        s->where, line, id.text, def_name.text,
                        s->num_roots > 0 ? k_root_advice : k_advice);
        }
        int where =
            lx_cur(&L) == '<' && !in_define && in_directive ? in_call(s, &dir_rest, id_start) : 0;
        if ((where & AFTER_NAME) && s->angle_after_name[0] == '\0') {
          /* refused at the end if some body opens a parenthesis it does not close */
          snprintf(s->angle_after_name, sizeof s->angle_after_name, "%.200s, line %zu", s->where,
                   line);
        }
        if (lx_cur(&L) == '<' && !in_define && (!in_directive || (where & IN_CALL))) {
          /* There a function-like macro's arguments may hold it: NVRTC then replaces the
           * operand's identifiers and makes the name of its tokens again (a run of blanks or a
           * comment as one space), where the check reads the bytes as a header name. */
          return REFUSE(
              "%s, line %zu: %s(<...>) stands %s, where a function-like macro's "
              "arguments could hold it and NVRTC would replace and respell its "
              "operand%s",
              s->where, line, id.text,
              in_directive ? "in a parenthesized group an identifier or a ')' opens"
                           : "outside a directive",
              s->num_roots > 0 ? k_root_advice : k_advice);
        }
        size_t op = L.i;
        if ((st = check_operand(s, &L, id.text, line)) != T4A_OK) return st;
        if (s->cur_root >= 0) note_region(s, L.s + op, L.i - op); /* (pass 1 only here) */
        lx_blanks(&L, NULL);
        if (lx_cur(&L) != ')') {
          return REFUSE("%s, line %zu: %s is not applied to a literal header name here%s", s->where,
                        line, id.text, k_advice);
        }
        lx_get(&L);
      }
      /* Once a root file has shown a piece, only pieces where ## can reach them matter. */
      if (s->cur_root >= 0 &&
          (!s->root_any_piece || (in_define && s->pass == 1) || (arg_depth > 0 && s->pass == 2)) &&
          is_substring_piece(&id)) {
        s->root_any_piece = 1;
        int is_param = 0;
        for (size_t k = 0; in_define && k < num_params; k++) {
          is_param |= strcmp(def_params[k].text, id.text) == 0;
        }
        if ((in_define && !is_param && s->pass == 1) || (arg_depth > 0 && s->pass == 2)) {
          if ((st = add_piece(s, &id, line)) != T4A_OK) return st; /* where ## can reach it */
        }
      }
      if (s->cur_root < 0 && s->num_roots > 0 && in_define && s->pass == 1 &&
          is_substring_piece(&id)) {
        /* The request's own definitions are used by the roots too: a piece in a body is a
         * piece the roots' pastes can reach. */
        int is_param = 0;
        for (size_t k = 0; k < num_params; k++) is_param |= strcmp(def_params[k].text, id.text) == 0;
        if (!is_param && (st = add_piece(s, &id, line)) != T4A_OK) return st;
      }
      if (s->pass == 2 && s->num_wrappers > 0 && (in_define || arg_depth > 0) && id.len < 32) {
        /* A wrapper's name pasted together in a root's own invocation hides its use. */
        int is_param = 0;
        for (size_t k = 0; in_define && k < num_params; k++) {
          is_param |= strcmp(def_params[k].text, id.text) == 0;
        }
        if ((!is_param || arg_depth > 0) && (st = add_wrapper_piece(s, id.text, id.len, line)) != T4A_OK) {
          return st;
        }
      }
      if (s->pass == 2 && s->cur_root >= 0 && id_raw_len != id.len && id.len >= sizeof id.text) {
        /* (the definitions' names are kept folded; this one does not fit the ident) */
        return REFUSE(
            "%s, line %zu: a name of 32 bytes or more is written across a line splice "
            "or with a universal character name%s",
            s->where, line, k_root_advice);
      }
      if (s->pass == 2 && s->cur_root >= 0 &&
          (arg_depth == 0 || !in_directive || args_on_directive) &&
          is_func_macro(s, id_raw_len == id.len ? id_raw : id.text, id.len)) {
        lexer peek = L;
        lx_blanks_lines(&peek, in_directive || in_define);
        if (lx_cur(&peek) == '(') {
          L = peek;
          lx_get(&L);
          if (arg_depth == 0) args_on_directive = in_directive;
          arg_depth++;
          after_defined = ifdef_operand = 0;
          continue;
        }
      }
      if (s->cur_root < 0 && s->pass == 1 && !s->has_piece && is_piece(&id)) {
        s->has_piece = 1;
        snprintf(s->piece, sizeof s->piece, "%s", id.text);
        snprintf(s->piece_where, sizeof s->piece_where, "%s, line %zu", s->where, line);
      }
      after_defined = id.len == 7 && ident_is(&id, "defined") ? 1 : 0;
      ifdef_operand = 0;
      continue;
    }
    if ((c >= '0' && c <= '9') || (c == '.' && lx_next(&L) >= '0' && lx_next(&L) <= '9')) {
      lx_number(&L, s->d.digit_separators); /* a pp-number */
      after_defined = ifdef_operand = 0;
      continue;
    }
    size_t tok_from = L.i;
    lx_get(&L);
    /* (a directive's parentheses among the arguments of an invocation opened on a text line are
     * not the invocation's: NVRTC runs the directive, and `#define RP )` there closes nothing) */
    int counted = arg_depth > 0 && (!in_directive || args_on_directive);
    if (counted && c == '(') arg_depth++;
    if (counted && c == ')' && --arg_depth == 0) {
      /* What an invocation expands to can be a function-like name that takes the group right
       * after it (ID(CAT)(a, b)): its tokens are arguments too. */
      lexer peek = L;
      lx_blanks_lines(&peek, in_directive || in_define);
      if (lx_cur(&peek) == '(') {
        L = peek;
        lx_get(&L);
        arg_depth = 1;
        after_defined = ifdef_operand = 0;
        continue;
      }
    }
    if (in_define && s->pass == 1) {
      /* unclosed opens only: a ')' first closes nothing of the body's */
      if (c == '(') body_parens++;
      if (c == ')' && body_parens > 0) body_parens--;
    }
    if (c == '"' || c == '\'') {
      lx_quoted(&L, c);
      if (c == '"' && (st = check_string(s, L.s, tok_from, L.i, 0, L.line)) != T4A_OK) return st;
    } else if (c == '(' && after_defined == 1) {
      after_defined = 2;
      ifdef_operand = 0;
      continue;
    }
    after_defined = ifdef_operand = 0;
    /* A run of blanks and punctuators after this one changes nothing more (outside a wrapper's
     * arguments, parentheses too): skipped as raw bytes. */
    unsigned char skip = arg_depth > 0 ? CC_SKIP : CC_SKIP | CC_PAREN;
    if (in_define && s->pass == 1) {
      for (; L.i < L.n && (k_cc[(unsigned char)L.s[L.i]] & skip); L.i++) {
        if (L.s[L.i] == '(') body_parens++;
        if (L.s[L.i] == ')' && body_parens > 0) body_parens--;
      }
    }
    while (L.i < L.n && (k_cc[(unsigned char)L.s[L.i]] & skip)) L.i++;
  }
  if (mixed != 0) return comment_skipper_refusal(s, &L, mixed);
  if (in_define && body_parens > 0) return note_open_body(s, &def_name, L.line);
  if (s->pass == 2 && s->cur_root >= 0 && arg_depth > 0) {
    /* The arguments are collected per file: an invocation this file leaves open could be
     * continued by the file that included it, whose tokens no collection would see. */
    return REFUSE("%s, line %zu: the file ends inside a function-like macro's arguments, which "
                  "its includer could continue, so the check cannot tell what a macro's "
                  "arguments hold there (a paste could make __has_include)%s",
                  s->where, L.line, k_root_advice);
  }
  return T4A_OK;
}

/* dead_ranges where the text spells __CUDACC_RTC__ (else no condition is known: no range). */
static t4a_status text_dead_ranges(const scan *s, const char *text, size_t n, size_t (**dead)[2],
                                   size_t *num_dead) {
  *dead = NULL;
  *num_dead = 0;
  if (!s->prune || s->prune_lost || memmem(text, n, "__CUDACC_RTC__", 14) == NULL) return T4A_OK;
  return dead_ranges(s, text, n, dead, num_dead);
}

/* Scans a text, the groups NVRTC skips by __CUDACC_RTC__ left out. */
static t4a_status scan_text(scan *s, const char *text, size_t n) {
  size_t(*dead)[2] = NULL;
  size_t num_dead = 0;
  t4a_status st = text_dead_ranges(s, text, n, &dead, &num_dead);
  if (st == T4A_OK) st = scan_text_ranges(s, text, n, dead, num_dead);
  free(dead);
  return st;
}

/* Scans queue[i], its groups NVRTC skips read once for both passes. */
static t4a_status scan_item(scan *s, size_t i) {
  struct qitem *q = &s->queue[i];
  if (!q->dead_read) {
    q->dead_read = 1;
    t4a_status st = text_dead_ranges(s, q->file->text, q->file->text_bytes, &q->dead, &q->num_dead);
    if (st != T4A_OK) return st;
  }
  /* (the queue may move while the file is scanned; its ranges do not) */
  size_t(*dead)[2] = q->dead;
  return scan_text_ranges(s, q->file->text, q->file->text_bytes, dead, q->num_dead);
}

/* Parses every option; the last -std sets the dialect. */
static t4a_status options_pass(const t4a_nvrtc_request *r, dialect *d) {
  set_dialect(d, "", 0);
  parsed_option po;
  for (size_t i = 0; i < r->num_options; i = po.next) {
    t4a_status st = parse_option(r, i, &po);
    if (st != T4A_OK) return st;
    if (po.known->kind == K_STD && po.value != NULL) set_dialect(d, po.value, po.value_bytes);
  }
  return T4A_OK;
}

t4a_status t4a_nvrtc_check_options(const t4a_nvrtc_prepared *p) {
  dialect d;
  return options_pass(p->req, &d);
}

/* ---- Computed includes in root files ------------------------------------------------------- */

#define EXPAND_MAX_ALTERNATIVES 64
#define EXPAND_MAX_DEPTH 16

/* Alternatives of an expansion: token spellings separated by \x01; a token that white space or a
 * comment came before in its text (not the text's first) is marked by a \x02 before it, as is
 * the first token of each expansion of such a macro name: NVRTC spells a header name made of
 * tokens with a space there. */
typedef struct alts {
  char *v[EXPAND_MAX_ALTERNATIVES];
  size_t n;
} alts;

static void alts_free(alts *a) {
  for (size_t i = 0; i < a->n; i++) free(a->v[i]);
  a->n = 0;
}

/* The next token of a macro body or operand: 'i' identifier, 's' string, 'c' character, 'n'
 * number, '#' for # and ##, 'p' other. 0 at the end. Splices (??/ ones where the dialect has
 * trigraphs) and comments are blanks; a block comment ends as the lexer ends one. */
static int body_token(const char *p, size_t n, size_t *i, size_t *start, int trigraphs) {
  for (;;) {
    while (*i < n && (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\r' || p[*i] == '\f' ||
                      p[*i] == '\v')) {
      (*i)++;
    }
    size_t end = splice_at(p, n, *i, trigraphs);
    if (end != 0) {
      *i = end;
      continue;
    }
    if (*i + 1 < n && p[*i] == '\\' && p[*i + 1] == '\r') { /* a lone CR after it: a blank */
      *i += 2;
      continue;
    }
    if (*i + 1 < n && p[*i] == '/' && p[*i + 1] == '*') {
      lexer C = {p, n, *i + 2, 1, trigraphs, NULL};
      *i = lx_comment_end(&C, *i + 2);
      continue;
    }
    if (*i + 1 < n && p[*i] == '/' && p[*i + 1] == '/') *i = n;
    break;
  }
  if (*i >= n || p[*i] == '\n') return 0;
  *start = *i;
  unsigned char c = (unsigned char)p[*i];
  if (is_ident(c) && !(c >= '0' && c <= '9')) {
    while (*i < n && is_ident((unsigned char)p[*i])) (*i)++;
    if (*i < n && (p[*i] == '"' || p[*i] == '\'')) return 'p'; /* a literal's prefix: refused */
    return 'i';
  }
  if (c == '"' || c == '\'') {
    (*i)++;
    while (*i < n && p[*i] != (char)c && p[*i] != '\n') {
      if (p[*i] == '\\' && *i + 1 < n) (*i)++;
      (*i)++;
    }
    if (*i < n && p[*i] == (char)c) (*i)++;
    return c == '"' ? 's' : 'c';
  }
  if ((c >= '0' && c <= '9') || (c == '.' && *i + 1 < n && p[*i + 1] >= '0' && p[*i + 1] <= '9')) {
    while (*i < n && (is_ident((unsigned char)p[*i]) || p[*i] == '.')) (*i)++;
    return 'n';
  }
  if (c == '#' || (c == '%' && *i + 1 < n && p[*i + 1] == ':')) {
    *i += c == '%' ? 2 : 1;
    return '#';
  }
  (*i)++;
  return 'p';
}

static char *join2(const char *a, const char *b, size_t bn) {
  size_t an = strlen(a);
  char *r = t4a_host_malloc(an + 1 + bn + 1);
  if (r == NULL) return NULL;
  memcpy(r, a, an);
  size_t k = an;
  if (an > 0 && bn > 0) r[k++] = '\x01';
  memcpy(r + k, b, bn);
  r[k + bn] = '\0';
  return r;
}

/* What the bytes between two tokens of a body or operand, p[0..n), hold (body_token passed over
 * them): GAP_WHITE white space or a comment, GAP_SPLICED line splices only (NVRTC joins the
 * two tokens' bytes: `D\` LF `X` is one name), 0 nothing. */
enum { GAP_WHITE = 1, GAP_SPLICED = 2 };
static int gap_between(const char *p, size_t n, int trigraphs) {
  int spliced = 0;
  for (size_t k = 0; k < n;) {
    size_t end = splice_at(p, n, k, trigraphs);
    if (end == 0) return GAP_WHITE; /* a blank, a comment */
    spliced = 1;
    k = end;
  }
  return spliced ? GAP_SPLICED : 0;
}

/* Expands text p[0..n) over every object-like definition seen (and each identifier as itself,
 * for where it is not defined) into out. 0; -1 with *why. */
static int expand_text(const scan *s, const char *p, size_t n, int depth, const char **active,
                       size_t *active_len, size_t num_active, alts *out, const char **why) {
  out->n = 0;
  out->v[0] = t4a_host_malloc(1);
  if (out->v[0] == NULL) {
    *why = NULL;
    return -1;
  }
  out->v[0][0] = '\0';
  out->n = 1;
  size_t i = 0, start = 0, tokens = 0;
  int kind;
  for (;;) {
    size_t gap = i;
    if ((kind = body_token(p, n, &i, &start, s->d.trigraphs)) == 0) break;
    int between = tokens++ > 0 ? gap_between(p + gap, start - gap, s->d.trigraphs) : 0;
    int spaced = between == GAP_WHITE;
    const char *t = p + start;
    size_t tn = i - start;
    if (between == GAP_SPLICED) {
      *why = "joins two tokens across a line splice"; /* (one token to NVRTC, two here) */
      alts_free(out);
      return -1;
    }
    if (memchr(t, '\x01', tn) != NULL || memchr(t, '\x02', tn) != NULL) {
      *why = "holds a byte 0x01 or 0x02"; /* (the alternatives' separators) */
      alts_free(out);
      return -1;
    }
    alts opts;
    opts.n = 0;
    if (kind == '#') {
      *why = "pastes or stringizes";
      alts_free(out);
      return -1;
    }
    if (kind == 'p' && is_ident((unsigned char)t[0])) { /* R"...", L'x', u8"..." */
      *why = "has a prefixed string";
      alts_free(out);
      return -1;
    }
    int self = 1;
    if (kind == 'i' && reserved_name(t, tn)) {
      int defined = 0; /* by a text: a built-in reserved name may be the compiler's instead */
      for (size_t d = s->num_builtin; d < s->num_defs && !defined; d++) {
        defined = s->defs[d].name_len == tn && memcmp(s->defs[d].name, t, tn) == 0;
      }
      /* __FILE__, __cplusplus, _BOOL, ...: a value the definitions do not show; one the compiler
       * predefines, whatever a text defines (it may not be applied) */
      if (!defined || compiler_predefined(t, tn)) {
        *why = "goes through a predefined macro";
        alts_free(out);
        return -1;
      }
    }
    if (kind == 'i') {
      for (size_t k = 0; k < num_active; k++) {
        if (active_len[k] == tn && memcmp(active[k], t, tn) == 0) self = 2; /* not re-expanded */
      }
      for (size_t d = 0; self != 2 && d < s->num_defs; d++) {
        const t4a_nvrtc_macro_ *m = &s->defs[d];
        if (m->name_len != tn || memcmp(m->name, t, tn) != 0) continue;
        if (m->func) {
          *why = "goes through a function-like macro";
          alts_free(out);
          alts_free(&opts);
          return -1;
        }
        if (depth >= EXPAND_MAX_DEPTH || num_active >= EXPAND_MAX_DEPTH) {
          *why = "nests macros too deeply";
          alts_free(out);
          alts_free(&opts);
          return -1;
        }
        active[num_active] = t;
        active_len[num_active] = tn;
        alts sub;
        if (expand_text(s, m->body, m->body_len, depth + 1, active, active_len, num_active + 1,
                        &sub, why) != 0) {
          alts_free(out);
          alts_free(&opts);
          return -1;
        }
        for (size_t k = 0; k < sub.n; k++) {
          if (opts.n == EXPAND_MAX_ALTERNATIVES) {
            alts_free(&sub);
            alts_free(out);
            alts_free(&opts);
            *why = "has too many possible expansions";
            return -1;
          }
          opts.v[opts.n++] = sub.v[k];
          sub.v[k] = NULL;
        }
        sub.n = 0;
      }
    }
    /* The token as itself. */
    char *me = t4a_host_malloc(tn + 1);
    if (me == NULL || opts.n == EXPAND_MAX_ALTERNATIVES) {
      free(me);
      alts_free(out);
      alts_free(&opts);
      *why = me == NULL ? NULL : "has too many possible expansions";
      return -1;
    }
    memcpy(me, t, tn);
    me[tn] = '\0';
    opts.v[opts.n++] = me;
    for (size_t b = 0; spaced && b < opts.n; b++) {
      size_t len = strlen(opts.v[b]);
      char *m = t4a_host_malloc(len + 2);
      if (m == NULL) {
        alts_free(out);
        alts_free(&opts);
        *why = NULL;
        return -1;
      }
      m[0] = '\x02';
      memcpy(m + 1, opts.v[b], len + 1);
      free(opts.v[b]);
      opts.v[b] = m;
    }
    /* out = out x opts */
    if (out->n * opts.n > EXPAND_MAX_ALTERNATIVES) {
      alts_free(out);
      alts_free(&opts);
      *why = "has too many possible expansions";
      return -1;
    }
    alts next;
    next.n = 0;
    for (size_t a = 0; a < out->n; a++) {
      for (size_t b = 0; b < opts.n; b++) {
        char *j = join2(out->v[a], opts.v[b], strlen(opts.v[b]));
        if (j == NULL) {
          alts_free(&next);
          alts_free(out);
          alts_free(&opts);
          *why = NULL;
          return -1;
        }
        next.v[next.n++] = j;
      }
    }
    alts_free(out);
    alts_free(&opts);
    *out = next;
  }
  return 0;
}

/* Resolves a root file's computed include: every expansion must be a header name, each checked
 * and followed as a literal include would be. */
static t4a_status resolve_pending_here(scan *s, const struct pending *q) {
  const char *active[EXPAND_MAX_DEPTH + 1];
  size_t active_len[EXPAND_MAX_DEPTH + 1];
  alts a;
  const char *why = NULL;
  char saved[sizeof s->where];
  memcpy(saved, s->where, sizeof saved);
  snprintf(s->where, sizeof s->where, "%s", q->where);
  t4a_status st = T4A_OK;
  if (expand_text(s, q->ops, q->ops_len, 0, active, active_len, 0, &a, &why) != 0) {
    st = why == NULL ? T4A_HOST_OUT_OF_MEMORY
                     : REFUSE("%s, line %zu: %s %.*s (a computed include) %s, which the key "
                              "cannot follow%s",
                              s->where, q->line, q->what, SHOW(q->ops_len), q->ops, why,
                              k_root_advice);
    memcpy(s->where, saved, sizeof saved);
    return st;
  }
  for (size_t k = 0; st == T4A_OK && k < a.n; k++) {
    /* A header name: a string literal, or '<', tokens spelled as written and '>'; extra tokens
     * after it are what NVRTC warns about and includes the header anyway (measured with NVRTC
     * 13.0: #14-D), and white space before it counts for nothing. */
    const char *v = a.v[k];
    while (*v == '\x01' || *v == '\x02') v++;
    char path[PATH_MAX];
    size_t pn = 0;
    int ok = 0, open = v[0], spaced = 0;
    if (open == '"') {
      size_t len = strcspn(v, "\x01\x02");
      ok = len >= 2 && v[len - 1] == '"' && len - 2 < sizeof path;
      if (ok) {
        memcpy(path, v + 1, len - 2);
        pn = len - 2;
      }
    } else if (open == '<' && (v[1] == '\x01' || v[1] == '\x02')) {
      for (size_t j = 1; ok == 0;) {
        while (v[j] == '\x01' || v[j] == '\x02') spaced |= v[j++] == '\x02';
        size_t len = strcspn(v + j, "\x01\x02");
        if (len == 0) break; /* no '>': NVRTC fails */
        if (v[j] == '>' && len == 1) {
          /* The lexing here reads punctuators a byte each: a '>' beside a byte it would join
           * (->, >>, >=, %>, :>, <=>) is no '>' token to NVRTC, which ends the name later. */
          int joined = (v[j - 1] == '\x01' && strchr("->%:=", v[j - 2]) != NULL) ||
                       (v[j + 1] == '\x01' && (v[j + 2] == '=' || v[j + 2] == '>'));
          ok = joined ? -1 : 1;
        } else if (v[j] == '"' || v[j] == '\'') {
          /* a literal: NVRTC may lex it otherwise (a raw string, a digit separator) */
          ok = -1;
        } else if (pn + len >= sizeof path) {
          break; /* longer than any path NVRTC opens */
        } else {
          memcpy(path + pn, v + j, len);
          pn += len;
          j += len;
        }
      }
      path[pn] = '\0';
      if (ok == 1 && pn == 0) ok = 0; /* <>: no name, NVRTC fails */
      if (ok == 1 && spaced) {
        st = REFUSE(
            "%s, line %zu: %s %.*s (a computed include) can expand to <%s> with white "
            "space or a comment between its tokens, where NVRTC's name holds a space%s",
            s->where, q->line, q->what, SHOW(q->ops_len), q->ops, path, k_root_advice);
        break;
      }
      if (ok == -1) {
        st = REFUSE(
            "%s, line %zu: %s %.*s (a computed include) can expand to a '<' name whose "
            "'>' NVRTC may read as part of another token (->, >=, <=>), or with a quote "
            "in it (a literal, a raw string or a digit separator to NVRTC), so where its "
            "name ends is not certain%s",
            s->where, q->line, q->what, SHOW(q->ops_len), q->ops, k_root_advice);
        break;
      }
    }
    if (!ok) continue; /* not a header name: NVRTC would fail on it, nothing is cached */
    path[pn] = '\0';
    if (memchr(path, '\\', pn) != NULL) {
      st = REFUSE("%s, line %zu: %s %.*s (a computed include) can expand to %c%s%c, whose "
                  "backslash the front end might read as an escape%s",
                  s->where, q->line, q->what, SHOW(q->ops_len), q->ops, open, path,
                  open == '"' ? '"' : '>', k_root_advice);
      break;
    }
    if (pn > 0 && path[0] == '/') {
      st = REFUSE("%s, line %zu: %s %.*s (a computed include) can expand to %c%s%c, an absolute "
                  "path%s",
                  s->where, q->line, q->what, SHOW(q->ops_len), q->ops, open,
                  path, open == '"' ? '"' : '>', k_root_advice);
      break;
    }
    st = resolve_in_roots(s, path, pn, open == '"', q->what, q->line, open,
                          open == '"' ? '"' : '>');
  }
  alts_free(&a);
  memcpy(s->where, saved, sizeof saved);
  return st;
}

/* As resolve_pending_here, in the file that holds the include (after the scan of the queue the
 * current file is another's, and a quoted name searches the holder's directory first). */
static t4a_status resolve_pending(scan *s, const struct pending *q) {
  int root = s->cur_root;
  struct qitem item = s->cur_item;
  s->cur_root = q->root;
  s->cur_item = q->item;
  t4a_status st = resolve_pending_here(s, q);
  s->cur_root = root;
  s->cur_item = item;
  return st;
}

/* "include root N: path under it" (or the whole path when it is not under its root) for
 * messages: the per-thread detail is 256 bytes. */
static void where_of(scan *s, const struct qitem *q) {
  const char *path = q->file->path, *root = s->root_paths[q->root];
  char rl[PATH_MAX];
  int n = join_path(root, strlen(root), "", 0, rl, sizeof rl, 0);
  const char *rel = path;
  if (n > 0 && strncmp(path, rl, (size_t)n) == 0 && path[n] == '/') rel = path + n + 1;
  snprintf(s->where, sizeof s->where, "include root %u: %.200s", q->root + 1, rel);
}

/* A -D definition's body, for the pieces of __has_include (first pass) or of a wrapper's name
 * (second pass) it spells outside its parameters (see scan_text: the roots' pastes can reach
 * them). */
static t4a_status add_body_pieces(scan *s, const char *body, size_t n, const char *params,
                                  size_t params_len) {
  size_t i = 0, start = 0;
  int kind;
  while ((kind = body_token(body, n, &i, &start, s->d.trigraphs)) != 0) {
    if (kind != 'i') continue;
    ident id;
    id.len = i - start;
    if (id.len >= sizeof id.text) continue;
    memcpy(id.text, body + start, id.len);
    id.text[id.len] = '\0';
    if (s->pass == 1 ? !is_substring_piece(&id) : !wrapper_piece(s, id.text, id.len)) continue;
    size_t pi = 0, ps = 0;
    int pk, is_param = 0;
    while (!is_param && (pk = body_token(params, params_len, &pi, &ps, s->d.trigraphs)) != 0) {
      is_param = pk == 'i' && pi - ps == id.len && memcmp(params + ps, id.text, id.len) == 0;
    }
    if (!is_param) {
      t4a_status st =
          s->pass == 1 ? add_piece(s, &id, 1) : add_wrapper_piece(s, id.text, id.len, 1);
      if (st != T4A_OK) return st;
    }
  }
  return T4A_OK;
}

/* Expands the request's macro invocations (nvrtc_expand.c): what a paste can make there. */
static t4a_status check_request_pastes(scan *s) {
  const t4a_nvrtc_request *r = s->p->req;
  size_t nt = 1 + r->num_headers;
  const char **texts = t4a_host_malloc(nt * (2 * sizeof(char *) + sizeof(size_t) + 300) +
                                       r->num_options * sizeof(size_t));
  if (texts == NULL) return T4A_HOST_OUT_OF_MEMORY;
  const char **wheres = texts + nt;
  size_t *bytes = (size_t *)(wheres + nt);
  size_t *option_bytes = bytes + nt;
  char *names = (char *)(option_bytes + r->num_options);
  texts[0] = r->source;
  bytes[0] = s->p->source_bytes;
  wheres[0] = "the source";
  for (size_t i = 0; i < r->num_headers; i++) {
    const t4a_nvrtc_header *h = &r->headers[i];
    size_t hn = t4a_nvrtc_header_name_bytes(h);
    snprintf(names + 300 * i, 300, "header \"%.*s\"", SHOW(hn), h->name);
    texts[1 + i] = h->content;
    bytes[1 + i] = t4a_nvrtc_header_content_bytes(h);
    wheres[1 + i] = names + 300 * i;
  }
  size_t np = s->num_pieces + s->num_wpieces;
  const char **pieces = t4a_host_malloc((np > 0 ? np : 1) * sizeof *pieces);
  if (pieces == NULL) {
    free(texts);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < s->num_pieces; i++) pieces[i] = s->pieces[i];
  for (size_t i = 0; i < s->num_wpieces; i++) pieces[s->num_pieces + i] = s->wpieces[i].text;
  for (size_t i = 0; i < r->num_options; i++) option_bytes[i] = t4a_nvrtc_option_bytes(r, i);
  t4a_nvrtc_paste_check_ pc = {s->defs, s->num_defs, (const char(*)[32])s->wrappers,
                               s->num_wrappers, pieces, np, s->open_body, texts, bytes, wheres,
                               nt, k_root_advice, s->d.trigraphs, s->d.raw_strings,
                               s->d.digit_separators, r->options, option_bytes, r->num_options};
  t4a_status st = t4a_nvrtc_check_pastes_(&pc);
  free(pieces);
  free(texts);
  return st;
}

static t4a_status scan_request_texts(scan *s) {
  const t4a_nvrtc_request *r = s->p->req;
  s->cur_root = -1;
  memset(&s->cur_item, 0, sizeof s->cur_item);
  snprintf(s->where, sizeof s->where, "the source");
  t4a_status st = scan_text(s, r->source, s->p->source_bytes);
  for (size_t i = 0; st == T4A_OK && i < r->num_headers; i++) {
    const t4a_nvrtc_header *h = &r->headers[i];
    size_t hn = t4a_nvrtc_header_name_bytes(h);
    snprintf(s->where, sizeof s->where, "header \"%.*s\"", SHOW(hn), h->name);
    s->in_named_header = 1;
    st = scan_text(s, h->content, t4a_nvrtc_header_content_bytes(h));
    s->in_named_header = 0;
  }
  parsed_option po;
  for (size_t i = 0; st == T4A_OK && i < r->num_options; i = po.next) {
    (void)parse_option(r, i, &po); /* accepted by options_pass */
    if (po.known->kind == K_DEFINE && po.value != NULL) {
      snprintf(s->where, sizeof s->where, "the definition in option %zu", po.next - 1);
      st = scan_text(s, po.value, po.value_bytes);
      /* NVRTC passes over one '=' (`-D=M=<a.h>`) and then the blanks before the name
       * (`-D M=<a.h>`), measured with 13.0; where it refuses such a value nothing is cached */
      const char *dv = po.value;
      size_t dv_bytes = po.value_bytes;
      if (dv_bytes > 0 && *dv == '=') dv++, dv_bytes--;
      while (dv_bytes > 0 && *dv == ' ') dv++, dv_bytes--;
      if (st == T4A_OK && s->pass == 2 && s->num_wrappers > 0) {
        size_t k = 0, eq = 0;
        while (k < dv_bytes && is_ident((unsigned char)dv[k])) k++;
        for (eq = k; eq < dv_bytes && dv[eq] != '='; eq++) {
        }
        if (eq < dv_bytes) {
          st = add_body_pieces(s, dv + eq + 1, dv_bytes - eq - 1, dv + k, eq - k);
        }
      }
      if (st == T4A_OK && s->pass == 1 && s->num_roots > 0) {
        /* -DNAME, -DNAME=body, -DNAME(args)=body: a definition the computed includes see. */
        size_t k = 0;
        while (k < dv_bytes && is_ident((unsigned char)dv[k])) k++;
        lexer L = {dv, dv_bytes, k, 1, 0, NULL};
        int func = k < dv_bytes && dv[k] == '(';
        while (L.i < L.n && dv[L.i] != '=') L.i++;
        static const char one[] = "1";
        size_t eq = L.i;
        if (L.i < L.n) {
          L.i++;
          st = add_define(s, &L, dv, k, dv + k, eq - k, func);
          if (st == T4A_OK) {
            st = add_body_pieces(s, dv + L.i, dv_bytes - L.i, dv + k, eq - k);
          }
          long open = 0;
          size_t bi = L.i, bs = 0;
          int bk;
          while (st == T4A_OK && (bk = body_token(dv, dv_bytes, &bi, &bs, s->d.trigraphs)) != 0) {
            if (bk == 'p' && dv[bs] == '(') open++;
            if (bk == 'p' && dv[bs] == ')' && open > 0) open--;
          }
          ident dn;
          dn.len = k < sizeof dn.text ? k : sizeof dn.text - 1;
          memcpy(dn.text, dv, dn.len);
          dn.text[dn.len] = '\0';
          if (st == T4A_OK && open > 0) st = note_open_body(s, &dn, 1);
        } else {
          lexer L1 = {one, 1, 0, 1, 0, NULL};
          st = add_define(s, &L1, dv, k, dv + k, eq - k, func);
        }
      }
    }
  }
  return st;
}

/* Puts NVRTC's own definitions ahead of the texts' (once, with roots), read as a text's would
 * be: a built-in that hands back a name (_NV_EVAL(K)(...)), an alias, or a paster whose name is
 * pasted passes a caller's tokens to a paste that the expansion, the roots' second pass and the
 * computed includes must see. Only those read the definitions, so a check that runs none of them
 * (no ##, no computed include) never copies them. */
/* A paster NVRTC predefines that a text names (not as the operand of defined or #ifdef) while no
 * text defines it: its header stood in a group NVRTC skips, as cuda_fp16.h's <nv/target> does
 * under `#if !defined(__CUDACC_RTC__)`, and NVRTC's built-in copy of the header defines it. Each
 * of NVRTC's own definitions of such a name is read as a root's text (in both passes), as the
 * toolkit's copy of the header would have been read; the names their bodies use are read in
 * turn. */
static signed char g_builtin_paster[NUM_BUILTIN_MACROS]; /* each built-in's paster index, or -1 */
static pthread_once_t g_builtin_paster_once = PTHREAD_ONCE_INIT;
static void find_builtin_pasters(void) {
  for (size_t m = 0; m < NUM_BUILTIN_MACROS; m++) {
    g_builtin_paster[m] =
        (signed char)predefined_index(k_builtin_macros[m].name, k_builtin_macros[m].name_len);
  }
}

static t4a_status read_builtin_pasters(scan *s) {
  for (;;) {
    uint64_t todo = s->predefined_used & ~s->predefined_read & ~s->predefined_defined;
    if (todo == 0 || s->num_builtin_texts == sizeof s->builtin_texts / sizeof s->builtin_texts[0]) {
      return T4A_OK; /* (past 64 texts the names left are refused as undefined) */
    }
    pthread_once(&g_builtin_paster_once, find_builtin_pasters);
    size_t bytes = 1;
    for (size_t m = 0; m < NUM_BUILTIN_MACROS; m++) {
      const t4a_nvrtc_macro_ *d = &k_builtin_macros[m];
      int k = g_builtin_paster[m];
      if (k >= 0 && ((todo >> k) & 1)) bytes += 10 + d->name_len + d->params_len + d->body_len;
    }
    char *buf = t4a_host_malloc(bytes);
    if (buf == NULL) return T4A_HOST_OUT_OF_MEMORY;
    size_t n = 0;
    for (size_t m = 0; m < NUM_BUILTIN_MACROS; m++) {
      const t4a_nvrtc_macro_ *d = &k_builtin_macros[m];
      int k = g_builtin_paster[m];
      if (k < 0 || !((todo >> k) & 1)) continue;
      memcpy(buf + n, "#define ", 8);
      memcpy(buf + n + 8, d->name, d->name_len);
      n += 8 + d->name_len;
      memcpy(buf + n, d->params, d->params_len);
      n += d->params_len;
      buf[n++] = ' ';
      memcpy(buf + n, d->body, d->body_len);
      n += d->body_len;
      buf[n++] = '\n';
    }
    buf[n] = '\0';
    t4a_status st = keep_buffer(s, buf);
    if (st != T4A_OK) return st;
    s->predefined_read |= todo;
    s->builtin_texts[s->num_builtin_texts].text = buf;
    s->builtin_texts[s->num_builtin_texts++].len = n;
    s->cur_root = 0;
    snprintf(s->where, sizeof s->where, "NVRTC's built-in definitions of the pasters a text names");
    if ((st = scan_text(s, buf, n)) != T4A_OK) return st;
  }
}

static t4a_status add_builtins(scan *s) {
  if (s->num_builtin > 0 || s->num_roots == 0) return T4A_OK;
  size_t n = s->num_defs + NUM_BUILTIN_MACROS;
  t4a_nvrtc_macro_ *defs = t4a_host_malloc(n * sizeof *defs);
  if (defs == NULL) return T4A_HOST_OUT_OF_MEMORY;
  memcpy(defs, k_builtin_macros, sizeof k_builtin_macros);
  if (s->num_defs > 0) memcpy(defs + NUM_BUILTIN_MACROS, s->defs, s->num_defs * sizeof *defs);
  free(s->defs);
  s->defs = defs;
  s->num_defs = s->defs_cap = n;
  s->num_builtin = NUM_BUILTIN_MACROS;
  return T4A_OK;
}

/* The fixed operands of NVRTC's chains of pastes (nvrtc_predefined.h): `_NV_IF_` of
 * `_NV_IF_ ## b`, `_ptds` of `api ## _ptds`, both `__` of `__ ## a ## __`, `0` of `N ## 0`. */
typedef struct builtin_operand {
  const char *text;
  char pos; /* 'f' first: can start a pasted name; 'l' last: end it; 'm' between: stand in it */
  const char *chain; /* "chain in macro" */
} builtin_operand;
#define BUILTIN_OPERAND_(t, pos, chain) {t, pos, chain},
static const builtin_operand k_builtin_operands[] = {
    T4A_NVRTC_BUILTIN_PASTE_OPERANDS(BUILTIN_OPERAND_)};
#undef BUILTIN_OPERAND_
#define NUM_BUILTIN_OPERANDS (sizeof k_builtin_operands / sizeof k_builtin_operands[0])

/* Whether a paste with a fixed operand in NVRTC's own definitions could make `name` (a parameter
 * may take several tokens, and a paste joins only the tokens beside it, so a chain's fixed first
 * operand can start a name, its last one end it, one between stand in it). The roots'
 * invocations are not expanded and those operands stand in no text, so a wrapper named so could
 * be pasted together unseen. Returns the chain ("chain in macro"), or NULL. */
static const char *builtin_paste_makes(const char *name) {
  size_t nn = strlen(name);
  for (size_t i = 0; i < NUM_BUILTIN_OPERANDS; i++) {
    const builtin_operand *o = &k_builtin_operands[i];
    size_t n = strlen(o->text);
    int hit = o->pos == 'm'
                  ? strstr(name, o->text) != NULL
                  : nn >= n && memcmp(o->pos == 'f' ? name : name + nn - n, o->text, n) == 0;
    if (hit) return o->chain;
  }
  return NULL;
}

/* The identifiers of NVRTC's own bodies (not parameters), read as a text's would be (with
 * roots, where some text pastes or some macro is a wrapper):
 * - a piece of __has_include, __has_include_next or __has_embed (`_` in _NV_TEST_PAREN2, `__`
 *   in a __location__) joins the pieces the roots' rule and the expansion's coarse check read:
 *   a text's paste can name the built-in and join its piece to the caller's
 *   (`CAT(_NV_TEST_, PAREN2)(_has_include(...))`);
 * - a wrapper's name is a use of it no text shows (`cudaStreamAttrID` is NVRTC's alias of
 *   `cudaLaunchAttributeID`; `assert(e)` calls `__assertfail` with `#e`): refused;
 * - a proper piece of a wrapper's name (`static` of `__specialization_static`, the fixed `_ptds`
 *   of a paste) joins the wrapper pieces a text's paste could join into the name. */
static t4a_status builtin_body_names(scan *s) {
  char where[sizeof s->where];
  memcpy(where, s->where, sizeof where);
  t4a_status st = T4A_OK;
  for (size_t b = 0; st == T4A_OK && b < NUM_BUILTIN_BODY_NAMES; b++) {
    ident id;
    id.len = strlen(k_builtin_body_names[b][0]);
    if (id.len >= sizeof id.text) continue; /* longer than any piece or wrapper's name */
    memcpy(id.text, k_builtin_body_names[b][0], id.len + 1);
    snprintf(s->where, sizeof s->where, "NVRTC's own definition of %s", k_builtin_body_names[b][1]);
    if (s->pasted && is_substring_piece(&id)) {
      s->root_any_piece = 1;
      st = add_piece(s, &id, 0);
    }
    for (size_t w = 0; st == T4A_OK && w < s->num_wrappers; w++) {
      if (strcmp(s->wrappers[w], id.text) == 0) {
        st = REFUSE(
            "%s names the macro %s, which applies __has_include to its argument: a use whose "
            "operand no text shows%s",
            s->where, s->wrappers[w], k_root_advice);
      }
    }
    if (st == T4A_OK && s->num_wrappers > 0) st = add_wrapper_piece(s, id.text, id.len, 0);
  }
  memcpy(s->where, where, sizeof where);
  return st;
}

static t4a_status check_includes_once(const t4a_nvrtc_prepared *p, int prune, int *prune_lost) {
  const t4a_nvrtc_request *r = p->req;
  scan s;
  memset(&s, 0, sizeof s);
  s.p = p;
  s.pass = 1;
  s.prune = prune;
  *prune_lost = 0;
  t4a_status st = options_pass(r, &s.d);
  if (st != T4A_OK) return st;
  if (p->prober != NULL && r->num_include_roots > 0) {
    s.num_roots = r->num_include_roots;
    s.root_paths = r->include_roots;
    s.pr = p->prober;
  }
  for (size_t i = 0; st == T4A_OK && i < s.num_roots; i++) {
    st = t4a_nvrtc_probe_root_(s.pr, s.root_paths[i]);
  }
  t4a_nvrtc_str *sorted = NULL;
  if (r->num_headers > 16) {
    sorted = t4a_host_malloc(r->num_headers * sizeof *sorted);
    if (sorted == NULL) return T4A_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < r->num_headers; i++) {
      sorted[i].p = r->headers[i].name;
      sorted[i].n = t4a_nvrtc_header_name_bytes(&r->headers[i]);
    }
    qsort(sorted, r->num_headers, sizeof *sorted, cmp_str);
    s.sorted = sorted;
    s.num_sorted = r->num_headers;
  }
  /* Every text NVRTC preprocesses: the source, the headers, the -D definitions, and every file
   * under the roots that an include of them (or of a file reached so) could open. */
  if (st == T4A_OK) st = scan_request_texts(&s);
  size_t scanned = 0;
  if (st == T4A_OK && s.num_roots > 0) {
  again:
    for (; st == T4A_OK && scanned < s.queue_len; scanned++) {
      const struct qitem *q = &s.queue[scanned];
      s.cur_root = (int)q->root;
      s.cur_item = *q;
      where_of(&s, q);
      if (memchr(q->file->text, '\0', q->file->text_bytes) != NULL) {
        /* NVRTC reads a NUL as a blank under --diag-suppress=861 (a `#` after it starts a
         * directive); the request's own texts cannot hold one */
        st = REFUSE("%s holds a NUL byte, which NVRTC may read as a blank%s", s.where,
                    k_root_advice);
        break;
      }
      st = scan_item(&s, scanned);
    }
    if (st == T4A_OK) st = read_builtin_pasters(&s);
    /* Computed includes: resolved over every definition of the files reached so far; what they
     * reach joins the scan, whose definitions can widen them again: to a fixed point. */
    if (st == T4A_OK && s.num_pend > 0) st = add_builtins(&s);
    if (st == T4A_OK && s.num_pend > 0) {
      size_t before = s.queue_len;
      for (size_t i = 0; st == T4A_OK && i < s.num_pend; i++) st = resolve_pending(&s, &s.pend[i]);
      if (st == T4A_OK && s.queue_len > before) goto again;
    }
    /* Without wrappers the second pass only adds pieces (from function-like macros'
     * arguments): when nothing it could meet joins with what is recorded, it changes nothing. */
    size_t unused = 0;
    if (st == T4A_OK && (s.pasted || s.num_wrappers > 0)) st = builtin_body_names(&s);
    int second = s.num_wrappers > 0 || (s.pasted && s.root_any_piece);
    if (second && s.num_wrappers == 0 && !s.may_unknown && !s.may_joined &&
        atomic_load(&g_skip_second) && !pieces_join_with(&s, 1, &unused)) {
      second = 0;
    }
    if (st == T4A_OK && second) st = add_builtins(&s);
    if (st == T4A_OK && second) {
      /* The second pass looks up the function-like macros' names. */
      st = build_func_set(&s);
    }
    if (st == T4A_OK && second) {
      atomic_fetch_add(&g_second_passes, 1);
      s.pass = 2;
      st = scan_request_texts(&s);
      for (size_t i = 0; st == T4A_OK && i < scanned; i++) {
        const struct qitem *q = &s.queue[i];
        s.cur_root = (int)q->root;
        s.cur_item = *q;
        where_of(&s, q);
        st = scan_item(&s, i);
      }
      for (size_t i = 0; st == T4A_OK && i < s.num_builtin_texts; i++) {
        s.cur_root = 0;
        snprintf(s.where, sizeof s.where, "NVRTC's built-in definitions of the pasters a text names");
        st = scan_text(&s, s.builtin_texts[i].text, s.builtin_texts[i].len);
      }
    }
  }
  /* A macro NVRTC predefines that pastes, named where no text defines it: its definition, which
   * the check cannot read, could paste __has_include out of the caller's tokens. */
  /* One pass over the texts' definitions: which of those names each defines, and whether each
   * such definition is one of NVRTC's own (as the toolkit's nv/target's are: NVRTC may use its
   * own where a text's is not applied, and the check reads the text's). bad: 1 a definition
   * otherwise than NVRTC's, 2 out of memory (the first in definition order). */
  uint64_t defined = 0;
  char bad[NUM_PREDEFINED] = {0};
  for (size_t d = s.num_builtin; st == T4A_OK && s.predefined_used != 0 && d < s.num_defs; d++) {
    int k = predefined_index(s.defs[d].name, s.defs[d].name_len);
    if (k < 0 || !((s.predefined_used >> k) & 1)) continue;
    defined |= (uint64_t)1 << k;
    int m = bad[k] != 0 ? 1 : predefined_def_matches(&s.defs[d], (size_t)k);
    if (m <= 0) bad[k] = m < 0 ? 2 : 1;
  }
  for (size_t k = 0; st == T4A_OK && k < NUM_PREDEFINED; k++) {
    if (!((s.predefined_used >> k) & 1)) continue;
    if (!((defined >> k) & 1)) {
      st = REFUSE(
          "%s: %s is a macro NVRTC predefines whose expansion pastes tokens (it could make "
          "__has_include), and no text of the request defines it%s",
          s.predefined_at[k], k_predefined[k], s.num_roots > 0 ? k_root_advice : k_advice);
    } else if (bad[k] == 2) {
      st = T4A_HOST_OUT_OF_MEMORY;
    } else if (bad[k] == 1) {
      st = REFUSE(
          "%s: %s is a macro NVRTC predefines whose expansion pastes tokens, and a text "
          "of the request defines it otherwise than NVRTC does (NVRTC uses its own "
          "definition where the text's is not applied: a dead branch, a later #define, "
          "a header it skips)%s",
          s.predefined_at[k], k_predefined[k], s.num_roots > 0 ? k_root_advice : k_advice);
    }
  }
  if (st == T4A_OK && s.open_body && s.angle_after_name[0] != '\0') {
    /* `#define G F(` then `#if G __has_include(<D/x.h>))`: the call NVRTC makes holds the
     * operand, whose tokens it replaces and spells again. */
    st = REFUSE(
        "%s: __has_include(<...>) follows a name on its directive line, and a macro's body "
        "opens a parenthesis it does not close, so that name could open a function-like "
        "macro's arguments around the operand%s",
        s.angle_after_name, s.num_roots > 0 ? k_root_advice : k_advice);
  }
  /* pastes that join the request's own tokens with the roots' definitions; NVRTC's own pastes
   * with a fixed side can make a wrapper's name out of the caller's tokens with no text pasting */
  int expand = s.pasted || s.num_wrappers > 0;
  if (st == T4A_OK && s.num_roots > 0 && expand) st = add_builtins(&s);
  if (st == T4A_OK && s.num_roots > 0 && expand) st = check_request_pastes(&s);
  for (size_t k = 0; st == T4A_OK && s.num_roots > 0 && k < s.num_wrappers; k++) {
    const char *chain = builtin_paste_makes(s.wrappers[k]);
    if (chain != NULL) {
      st = REFUSE(
          "the macro %s applies __has_include to its argument, and a paste in NVRTC's own "
          "definitions (%s) could make its name%s",
          s.wrappers[k], chain, k_root_advice);
    }
  }
  for (size_t k = 0; st == T4A_OK && s.pasted && k < s.num_wrappers; k++) {
    if (strpbrk(s.wrappers[k], "0123456789") != NULL) {
      /* A predefined macro's value (__LINE__, __COUNTER__, __CUDA_ARCH__) is a number no text
       * shows: with a paste anywhere, such a name could be pasted together unseen. */
      st = REFUSE("the macro %s applies __has_include to its argument and its name holds a digit, "
                  "which a paste of a predefined macro's value could make%s",
                  s.wrappers[k], k_root_advice);
    }
  }
  size_t wfirst = 0;
  long w = st == T4A_OK && s.pasted ? wrapper_pieces_join(&s, &wfirst) : -1;
  if (w >= 0) {
    st = REFUSE("%s: \"%s\" and other pieces in macro bodies or arguments, with a ## there, could "
                "paste the name of %s (it applies __has_include to its argument)%s",
                s.wpieces[wfirst].at, s.wpieces[wfirst].text, s.wrappers[w], k_root_advice);
  }
  free(s.wpieces);
  for (size_t i = 0; i < s.num_pragmas; i++) free(s.pragmas[i]);
  free(s.pragmas);
  for (size_t i = 0; i < s.queue_len; i++) {
    free(s.queue[i].raw);
    s.queue[i].file->queued = 0; /* (a run without skipping queues them again) */
    free(s.queue[i].dead);
  }
  free(s.queue);
  free(s.wrappers);
  free(s.defs);
  free(s.pend);
  free(s.func_set);
  free(s.def_set);
  size_t first = 0;
  if (st == T4A_OK && s.pasted && pieces_join(&s, &first)) {
    st = REFUSE("%s: \"%s\" and other pieces in macro bodies or arguments of the roots, with a ## "
                "there, could paste __has_include together%s",
                s.piece_at[first], s.pieces[first], k_root_advice);
  }
  free(s.pieces); /* one block with piece_at */
  if (st == T4A_OK && s.pasted && s.has_piece) {
    st = REFUSE(
        "%s: \"%s\" and a ## elsewhere could paste __has_include together, whose operand "
        "the key cannot see%s",
        s.piece_where, s.piece, k_advice);
  }
  free(sorted);
  *prune_lost = s.prune_lost;
  if (!s.prune_lost) atomic_fetch_add(&g_groups_skipped, s.groups_skipped);
  return st;
}

t4a_status t4a_nvrtc_check_includes(const t4a_nvrtc_prepared *p) {
  /* Groups NVRTC skips by __CUDACC_RTC__ are skipped unless an option names it. */
  int prune = T4A_NVRTC_RTC_ALWAYS_DEFINED && atomic_load(&g_skip_groups);
  for (size_t i = 0; prune && i < p->req->num_options; i++) {
    prune = strstr(p->req->options[i], "__CUDACC_RTC__") == NULL;
  }
  int prune_lost = 0;
  t4a_status st = check_includes_once(p, prune, &prune_lost);
  /* Skipping was not sound here: what was skipped may be kept (the second run's probes cover the
   * first's). */
  if (prune_lost) st = check_includes_once(p, 0, &prune_lost);
  return st;
}

int t4a_nvrtc_refused_unseen_(t4a_status st) {
  if (st != T4A_INVALID_ARGUMENT && st != T4A_LIMIT_EXCEEDED) return 0;
  t4a_error e;
  t4a_error_last(&e);
  return e.status == st && strcmp(e.entry, T4A_NVRTC_INCLUDES_ENTRY) == 0;
}

t4a_status t4a_nvrtc_check_cacheable(const t4a_nvrtc_prepared *p) {
  t4a_status st = t4a_nvrtc_check_options(p);
  return st != T4A_OK ? st : t4a_nvrtc_check_includes(p);
}

/* ---- What the includes reach (t4a_nvrtc_includes_resolve) --------------------------------- */

/* The root a probed path lies under: the longest root that is a prefix of it, or -1. */
static int root_of(const t4a_nvrtc_request *r, const char *path) {
  int best = -1;
  size_t best_len = 0, pl = strlen(path);
  for (size_t i = 0; i < r->num_include_roots; i++) {
    size_t n = strlen(r->include_roots[i]);
    while (n > 1 && r->include_roots[i][n - 1] == '/') n--;
    if (n < pl && path[n] == '/' && memcmp(path, r->include_roots[i], n) == 0 &&
        (best < 0 || n > best_len)) {
      best = (int)i;
      best_len = n;
    }
  }
  return best;
}

t4a_status t4a_nvrtc_includes_resolve(const t4a_nvrtc_lib *lib, const t4a_nvrtc_request *request,
                                      t4a_nvrtc_root_reach *per_root,
                                      t4a_nvrtc_root_reach *total) {
  if (total != NULL) memset(total, 0, sizeof *total);
  if (lib == NULL || request == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, "t4a_nvrtc_includes_resolve", 0, NULL, 0,
                          "lib or request is NULL");
  }
  if (per_root != NULL && request->num_include_roots <= T4A_NVRTC_MAX_ROOTS) {
    memset(per_root, 0, request->num_include_roots * sizeof *per_root);
  }
  t4a_nvrtc_prepared p;
  t4a_status st = t4a_nvrtc_prepare(lib, request, &p);
  if (st != T4A_OK) return st;
  t4a_nvrtc_prober pr;
  t4a_nvrtc_prober_init_(&pr);
  t4a_nvrtc_probes probes;
  memset(&probes, 0, sizeof probes);
  p.prober = &pr;
  p.probes = &probes;
  st = t4a_nvrtc_check_cacheable(&p);
  (void)t4a_nvrtc_prober_finish_(&pr);
  t4a_nvrtc_prober_free_(&pr);
  /* The manifest a miss would record (sorted, one entry per path). */
  uint8_t *blob = NULL;
  size_t bytes = 0;
  if (st == T4A_OK) st = t4a_nvrtc_manifest_encode_(&probes, &blob, &bytes);
  free(blob);
  t4a_nvrtc_root_reach sum;
  memset(&sum, 0, sizeof sum);
  for (size_t i = 0; st == T4A_OK && i < probes.num; i++) {
    const t4a_nvrtc_probe *q = &probes.v[i];
    int ri = root_of(request, q->path);
    t4a_nvrtc_root_reach *one = per_root != NULL && ri >= 0 ? &per_root[ri] : NULL;
    if (q->file == 1) {
      sum.files++;
      sum.bytes += q->size;
      if (one != NULL) {
        one->files++;
        one->bytes += q->size;
      }
    } else {
      sum.empty++;
      if (one != NULL) one->empty++;
    }
  }
  t4a_nvrtc_probes_free_(&probes);
  if (st != T4A_OK) return st;
  if (total != NULL) *total = sum;
  return T4A_OK;
}
