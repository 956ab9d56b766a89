/* The request's macro expansions, for the include check with roots (nvrtc_cacheable.c).
 *
 * `##` can build __has_include, or the name of a wrapper (a macro that applies __has_include to
 * its parameter), out of the request's own tokens and the roots' definitions, where the lexical
 * check sees neither: a root `#define K(x) CAT(__has_, x)` called by the request as
 * `K(include)("/abs/file.h")`. So every macro invocation of the request's texts (their lines and
 * their #if / #elif expressions) is expanded as the preprocessor would: arguments pre-expanded
 * unless they stand beside # or ##, hide sets, rescanning into the text that follows, __VA_ARGS__,
 * __VA_OPT__, placemarkers and the `, ## __VA_ARGS__` comma. Each name met is tried under every
 * definition the check saw for it and as itself (undefined), one choice per name for the whole
 * invocation, as one point of the real preprocessing has one; the choices are found by running
 * the invocation again whenever it meets a name not yet chosen. Every paste's result is looked
 * at: a target or a wrapper's name is refused. An invocation that cannot be expanded within the
 * bounds below gets a coarse check instead (coarse_check); one whose arguments hold a directive,
 * which NVRTC would apply there, is refused, and so is a text whose parentheses could hand its
 * tokens to another text's invocation (check_text). Definitions come from every branch of every
 * text, so the expansion over-approximates what NVRTC does, which can only refuse more. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"

/* Bounds of one invocation's runs, and of the whole check: past them the invocation gets the
 * coarse check (see coarse_check). */
#define EX_EP_STEPS (1u << 18)     /* tokens read or substituted, over the invocation's runs */
#define EX_EP_RUNS 2048u           /* runs of one invocation (each set of choices is one) */
#define EX_MAX_STEPS (1u << 24)    /* over the whole check: later invocations get the coarse one */
#define EX_MAX_CHOICES 48          /* names chosen within one invocation */
#define EX_MAX_DEPTH 256           /* nested argument expansions */
#define EX_MAX_ARENA (256u << 20)  /* bytes held at once */

static atomic_uint_fast64_t g_runs;

uint64_t t4a_nvrtc_expand_runs_(void) { return atomic_load(&g_runs); }

enum {
  T_ID = 1,
  T_NUM,
  T_STR,
  T_PUNCT,
  T_PASTE,
  T_HASH,
  T_ELLIPSIS,
  T_LPAREN,
  T_RPAREN,
  T_COMMA,
  T_PLACEMARKER, /* an empty operand of ## (removed once the pastes are done) */
};

typedef struct hs { /* a hide set: macro names, a list */
  const char *p;
  uint32_t n;
  const struct hs *next;
} hs;

typedef struct tok {
  const char *p;
  uint32_t n;
  uint32_t off; /* in its cleaned text (text tokens: for the line) */
  int kind;
  int after_directive; /* a text's first token after a directive line */
  const hs *h;
} tok;

typedef struct tvec {
  tok *v;
  size_t n, cap;
} tvec;

/* ---- Arenas ------------------------------------------------------------------------------ */

typedef struct chunk {
  struct chunk *next;
  size_t cap, used;
  _Alignas(16) char data[];
} chunk;

typedef struct arena {
  chunk *head;
  size_t held;
} arena;

typedef struct mark {
  chunk *head;
  size_t used;
} mark;

enum { WHY_NONE, WHY_NEED, WHY_BAD, WHY_LIMIT, WHY_OOM, WHY_DIRECTIVE, WHY_STRINGS };

typedef struct pdef { /* a definition, parsed when first met */
  int state;          /* 0: not yet; 1: parsed; -1: unreadable here (its name: the coarse check) */
  int func, variadic; /* variadic: the last parameter takes the rest */
  tok *params, *body;
  size_t num_params, body_n;
} pdef;

typedef struct name { /* a macro name and its distinct definitions */
  const char *p;
  uint32_t n;
  uint32_t first;  /* first definition + 1 (a chain through next_def) */
  int built, malformed; /* malformed: some definition the check cannot read */
  uint32_t *alts;  /* indices of its distinct, well-formed definitions */
  uint32_t num_alts;
} name;

#define AS_ITSELF UINT32_MAX

typedef struct ex {
  const t4a_nvrtc_macro_ *defs;
  size_t num_defs;
  pdef *pd;
  uint32_t *next_def;
  name *names;
  uint32_t *slots; /* open addressing: index into names + 1 */
  size_t mask, num_names;
  const char (*wrappers)[32];
  size_t num_wrappers;
  int trigraphs, raw_strings, digit_separators;
  arena perm, run;
  struct choice {
    const name *nm;
    uint32_t alt;
  } choice[EX_MAX_CHOICES];
  size_t num_choices;
  uint64_t steps, ep_steps, runs;
  const char *const *pieces; /* every piece of a bad name in the definitions' bodies */
  size_t num_pieces;
  int open_body; /* some body opens a parenthesis it does not close */
  /* String literals met (in a text or an expansion) that spell a macro's name or __has_: any can
   * become a pragma's operand (_Pragma(S)), whose macros NVRTC expands; each is checked as a
   * stream of its own once the text's streams are done. */
  tvec strs; /* in the permanent arena */
  size_t next_str;
  int depth;
  int crossed; /* lex skipped a block comment's newline */
  int why;
  const name *need;
  char bad[40], in_macro[40];
} ex;

static void *arena_alloc(ex *x, arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (a->head == NULL || a->head->cap - a->head->used < n) {
    size_t cap = n > (64u << 10) ? n : (64u << 10);
    if (x->perm.held + x->run.held + cap > EX_MAX_ARENA) {
      x->why = WHY_LIMIT;
      return NULL;
    }
    chunk *c = t4a_host_malloc(sizeof *c + cap);
    if (c == NULL) {
      x->why = WHY_OOM;
      return NULL;
    }
    c->next = a->head;
    c->cap = cap;
    c->used = 0;
    a->head = c;
    a->held += cap;
  }
  void *r = a->head->data + a->head->used;
  a->head->used += n;
  return r;
}

static mark arena_mark(const arena *a) {
  mark m = {a->head, a->head != NULL ? a->head->used : 0};
  return m;
}

static void arena_reset(arena *a, mark m) {
  while (a->head != m.head) {
    chunk *c = a->head;
    a->head = c->next;
    a->held -= c->cap;
    free(c);
  }
  if (a->head != NULL) a->head->used = m.used;
}

static void arena_free(arena *a) {
  arena_reset(a, (mark){NULL, 0});
}

/* Appends t to the array *v of *n tokens (room for *cap), growing it in arena a. */
static int toks_push(ex *x, arena *a, tok **v, size_t *n, size_t *cap, const tok *t) {
  if (*n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 16;
    tok *nv = arena_alloc(x, a, ncap * sizeof *nv);
    if (nv == NULL) return -1;
    if (*n) memcpy(nv, *v, *n * sizeof *nv);
    *v = nv;
    *cap = ncap;
  }
  (*v)[(*n)++] = *t;
  return 0;
}

static int tv_push(ex *x, tvec *v, const tok *t) {
  return toks_push(x, &x->run, &v->v, &v->n, &v->cap, t);
}

/* ---- Cleaning and lexing ------------------------------------------------------------------- */

static int is_ident(int c) { /* (NVRTC 13.0 reads '$' and bytes past ASCII as no part) */
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static char trigraph(char c) {
  static const char from[] = "=(/)'<!>-", to[] = "#[\\]^{|}~";
  const char *f = c != '\0' ? strchr(from, c) : NULL;
  return f != NULL ? to[f - from] : '\0';
}

/* Copies text[0..n) into the arena with trigraphs replaced (where the dialect has them), line
 * splices removed (*splices: their offsets in the copy, for lines) and comments blanked (a block
 * comment's newlines as \x01, which ends no directive). */
static char *clean(ex *x, arena *a, const char *text, size_t n, size_t *out_n, uint32_t **splices,
                   size_t *num_splices) {
  char *b = arena_alloc(x, a, n + 1);
  if (b == NULL) return NULL;
  size_t k = 0, ns = 0;
  for (size_t i = 0; i < n;) {
    char c = text[i];
    if (x->trigraphs && c == '?' && i + 2 < n && text[i + 1] == '?' && trigraph(text[i + 2])) {
      c = trigraph(text[i + 2]);
      i += 3;
    } else {
      i++;
    }
    if (c == '\\') {
      size_t j = i;
      while (j < n && text[j] == '\r') j++; /* any CRs, then LF */
      if (j < n && text[j] == '\n') {
        i = j + 1;
        ns++;
        continue;
      }
    }
    b[k++] = c;
  }
  uint32_t *sp = NULL;
  if (splices != NULL && ns > 0) {
    sp = arena_alloc(x, a, ns * sizeof *sp);
    if (sp == NULL) return NULL;
    size_t m = 0, kk = 0; /* again, to note where each splice was */
    for (size_t i = 0; i < n;) {
      char c = text[i];
      size_t w = 1;
      if (x->trigraphs && c == '?' && i + 2 < n && text[i + 1] == '?' && trigraph(text[i + 2])) {
        c = trigraph(text[i + 2]);
        w = 3;
      }
      if (c == '\\') {
        size_t j = i + w;
        while (j < n && text[j] == '\r') j++; /* any CRs, then LF */
        if (j < n && text[j] == '\n') {
          sp[m++] = (uint32_t)kk;
          i = j + 1;
          continue;
        }
      }
      kk++;
      i += w;
    }
  }
  if (splices != NULL) {
    *splices = sp;
    *num_splices = ns;
  }
  /* Comments, outside literals. */
  for (size_t i = 0; i < k;) {
    char c = b[i];
    if (c == '"' || c == '\'') {
      int raw = 0;
      if (c == '"' && x->raw_strings && i > 0 && b[i - 1] == 'R') {
        size_t s = i - 1; /* R, u8R, uR, UR, LR, not preceded by another identifier byte */
        while (s > 0 && is_ident((unsigned char)b[s - 1])) s--;
        size_t len = i - s;
        raw = (len == 1) || (len == 2 && strchr("uUL", b[s])) || (len == 3 && b[s] == 'u' &&
                                                                   b[s + 1] == '8');
      }
      if (raw) {
        size_t d = i + 1;
        while (d < k && d - i <= 16 && b[d] != '(' && b[d] != '\n') d++; /* at most 16 */
        if (d < k && b[d] == '(') {
          size_t dl = d - i - 1;
          size_t j = d + 1;
          for (; j < k; j++) {
            if (b[j] == ')' && j + 1 + dl < k && memcmp(b + j + 1, b + i + 1, dl) == 0 &&
                b[j + 1 + dl] == '"') {
              break;
            }
          }
          i = j < k ? j + 2 + dl : k;
          continue;
        }
      }
      size_t j = i + 1;
      while (j < k && b[j] != c && b[j] != '\n') j += b[j] == '\\' && j + 1 < k ? 2 : 1;
      i = j < k && b[j] == c ? j + 1 : j;
      continue;
    }
    if (c == '/' && i + 1 < k && b[i + 1] == '/') {
      while (i < k && b[i] != '\n') b[i++] = ' ';
      continue;
    }
    if (c == '/' && i + 1 < k && b[i + 1] == '*') {
      b[i] = b[i + 1] = ' ';
      i += 2;
      while (i < k && !(b[i] == '*' && i + 1 < k && b[i + 1] == '/')) {
        b[i] = b[i] == '\n' ? '\x01' : ' '; /* a newline that does not end a directive */
        i++;
      }
      if (i < k) b[i] = b[i + 1] = ' ', i += 2;
      continue;
    }
    if ((c >= '0' && c <= '9') || (c == '.' && i + 1 < k && b[i + 1] >= '0' && b[i + 1] <= '9')) {
      i++; /* a pp-number: its ' (C++14 digit separators) starts no literal */
      while (i < k) {
        if ((b[i] == 'e' || b[i] == 'E' || b[i] == 'p' || b[i] == 'P') && i + 1 < k &&
            (b[i + 1] == '+' || b[i + 1] == '-')) {
          i += 2;
        } else if (b[i] == '\'' && x->digit_separators && i + 1 < k &&
                   is_ident((unsigned char)b[i + 1])) {
          i += 2;
        } else if (is_ident((unsigned char)b[i]) || b[i] == '.') {
          i++;
        } else {
          break;
        }
      }
      continue;
    }
    if (is_ident((unsigned char)c)) { /* skip whole: an identifier's R is not a raw string's */
      while (i < k && is_ident((unsigned char)b[i])) i++;
      if (i < k && (b[i] == '"' || b[i] == '\'')) continue; /* a prefix: the literal next */
      continue;
    }
    i++;
  }
  b[k] = '\0';
  *out_n = k;
  return b;
}

/* The next token of cleaned b at *i (not past a newline); 0 at a newline or the end. */
static int lex(ex *x, const char *b, size_t n, size_t *i, tok *t) {
  while (*i < n && (b[*i] == ' ' || b[*i] == '\t' || b[*i] == '\r' || b[*i] == '\f' ||
                    b[*i] == '\v' || b[*i] == '\x01')) {
    x->crossed |= b[*i] == '\x01'; /* a block comment's newline */
    (*i)++;
  }
  if (*i >= n || b[*i] == '\n') return 0;
  size_t s = *i;
  unsigned char c = (unsigned char)b[s];
  int kind = T_PUNCT;
  if (is_ident(c) && !(c >= '0' && c <= '9')) {
    while (*i < n && is_ident((unsigned char)b[*i])) (*i)++;
    kind = T_ID;
    if (*i < n && (b[*i] == '"' || b[*i] == '\'')) { /* a prefixed literal */
      size_t len = *i - s;
      int pre = (len == 1 && strchr("uULR", b[s])) || (len == 2 && memcmp(b + s, "u8", 2) == 0) ||
                (len == 2 && b[s + 1] == 'R' && strchr("uUL", b[s])) ||
                (len == 3 && memcmp(b + s, "u8R", 3) == 0);
      if (pre) {
        int raw = b[*i - 1] == 'R' && b[*i] == '"' && x->raw_strings;
        if (raw) {
          size_t d = *i + 1;
          while (d < n && d - *i <= 17 && b[d] != '(' && b[d] != '\n') d++;
          if (d < n && b[d] == '(') {
            size_t dl = d - *i - 1, j = d + 1;
            while (j < n && !(b[j] == ')' && j + 1 + dl < n &&
                              memcmp(b + j + 1, b + *i + 1, dl) == 0 && b[j + 1 + dl] == '"')) {
              j++;
            }
            *i = j < n ? j + 2 + dl : n;
          } else {
            *i = d; /* ill-formed: NVRTC errs */
          }
          kind = T_STR;
        } else if (b[*i - 1] != 'R') {
          char q = b[*i];
          size_t j = *i + 1;
          while (j < n && b[j] != q && b[j] != '\n') j += b[j] == '\\' && j + 1 < n ? 2 : 1;
          *i = j < n && b[j] == q ? j + 1 : j;
          kind = T_STR;
        }
      }
    }
  } else if ((c >= '0' && c <= '9') || (c == '.' && s + 1 < n && b[s + 1] >= '0' && b[s + 1] <= '9')) {
    (*i)++;
    for (;;) {
      char d = *i < n ? b[*i] : '\0';
      if ((d == 'e' || d == 'E' || d == 'p' || d == 'P') && *i + 1 < n &&
          (b[*i + 1] == '+' || b[*i + 1] == '-')) {
        *i += 2;
      } else if (d == '\'' && x->digit_separators && *i + 1 < n &&
                 is_ident((unsigned char)b[*i + 1])) {
        *i += 2;
      } else if (is_ident((unsigned char)d) || d == '.') {
        (*i)++;
      } else {
        break;
      }
    }
    kind = T_NUM;
  } else if (c == '"' || c == '\'') {
    size_t j = s + 1;
    while (j < n && b[j] != (char)c && b[j] != '\n') j += b[j] == '\\' && j + 1 < n ? 2 : 1;
    *i = j < n && b[j] == (char)c ? j + 1 : j;
    kind = T_STR;
  } else if (c == '#' || (c == '%' && s + 1 < n && b[s + 1] == ':')) {
    *i += c == '%' ? 2 : 1;
    kind = T_HASH;
    if (*i < n && (b[*i] == '#' || (b[*i] == '%' && *i + 1 < n && b[*i + 1] == ':'))) {
      *i += b[*i] == '%' ? 2 : 1;
      kind = T_PASTE;
    }
  } else if (c == '.' && s + 2 < n && b[s + 1] == '.' && b[s + 2] == '.') {
    *i += 3;
    kind = T_ELLIPSIS;
  } else {
    (*i)++;
    kind = c == '(' ? T_LPAREN : c == ')' ? T_RPAREN : c == ',' ? T_COMMA : T_PUNCT;
  }
  t->p = b + s;
  t->n = (uint32_t)(*i - s);
  t->off = (uint32_t)s;
  t->kind = kind;
  t->after_directive = 0;
  t->h = NULL;
  return kind;
}

static int tok_is(const tok *t, const char *w) {
  size_t n = strlen(w);
  return t->n == n && memcmp(t->p, w, n) == 0;
}

/* ---- Names and definitions --------------------------------------------------------------- */

static size_t hash_name(const char *p, size_t n) { /* FNV-1a */
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return (size_t)(h ^ (h >> 29));
}

static name *find_name(const ex *x, const char *p, size_t n) {
  if (x->slots == NULL) return NULL;
  for (size_t h = hash_name(p, n) & x->mask; x->slots[h] != 0; h = (h + 1) & x->mask) {
    name *nm = &x->names[x->slots[h] - 1];
    if (nm->n == n && memcmp(nm->p, p, n) == 0) return nm;
  }
  return NULL;
}


/* Parses definition d (its parameters and body) into the permanent arena. */
static int parse_def(ex *x, size_t d) {
  pdef *pd = &x->pd[d];
  if (pd->state != 0) return 0;
  const t4a_nvrtc_macro_ *m = &x->defs[d];
  pd->func = m->func;
  pd->state = -1;
  if (x->trigraphs && x->raw_strings && memmem(m->body, m->body_len, "??", 2) != NULL) {
    return 0; /* a raw string reverts trigraphs, which clean() replaces first */
  }
  if (m->func) {
    size_t cn = 0;
    char *c = clean(x, &x->perm, m->params, m->params_len, &cn, NULL, NULL);
    if (c == NULL) return -1;
    for (size_t i = 0; i < cn; i++) {
      if (c[i] == '\n') c[i] = ' '; /* (a -D's span ends at '=') */
    }
    size_t i = 0, cap = 0;
    tok t;
    if (lex(x, c, cn, &i, &t) != T_LPAREN) return 0;
    for (;;) {
      int k = lex(x, c, cn, &i, &t);
      if (k == T_RPAREN && pd->num_params == 0) break;
      if (k == T_ELLIPSIS) {
        static const char va[] = "__VA_ARGS__";
        t.p = va;
        t.n = 11;
        pd->variadic = 1;
      } else if (k != T_ID) {
        return 0;
      }
      if (toks_push(x, &x->perm, &pd->params, &pd->num_params, &cap, &t) != 0) return -1;
      k = lex(x, c, cn, &i, &t);
      if (k == T_ELLIPSIS && !pd->variadic) { /* GNU: NAME... */
        pd->variadic = 1;
        k = lex(x, c, cn, &i, &t);
      }
      if (k == T_RPAREN) break;
      if (k != T_COMMA || pd->variadic) return 0;
    }
  }
  size_t bn = 0;
  char *b = clean(x, &x->perm, m->body, m->body_len, &bn, NULL, NULL);
  if (b == NULL) return -1;
  for (size_t i = 0; i < bn; i++) {
    if (b[i] == '\n') b[i] = ' ';
  }
  size_t i = 0, cap = 0;
  tok t;
  while (lex(x, b, bn, &i, &t) != 0) {
    if (toks_push(x, &x->perm, &pd->body, &pd->body_n, &cap, &t) != 0) return -1;
  }
  pd->state = 1;
  return 0;
}

static int same_tokens(const tok *a, const tok *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (a[i].kind != b[i].kind || a[i].n != b[i].n || memcmp(a[i].p, b[i].p, a[i].n) != 0) {
      return 0;
    }
  }
  return 1;
}

/* The distinct, well-formed definitions of nm (built when first met). */
static uint64_t def_hash(const pdef *p) { /* FNV-1a over kinds and spellings */
  uint64_t h = 14695981039346656037ULL ^ (uint64_t)(p->func * 2 + p->variadic);
  for (int part = 0; part < 2; part++) {
    const tok *v = part == 0 ? p->params : p->body;
    uint32_t n = part == 0 ? p->num_params : p->body_n;
    h = (h ^ (0x100u + n)) * 1099511628211ULL;
    for (uint32_t i = 0; i < n; i++) {
      h = (h ^ (unsigned)v[i].kind) * 1099511628211ULL;
      for (uint32_t k = 0; k < v[i].n; k++) h = (h ^ (unsigned char)v[i].p[k]) * 1099511628211ULL;
    }
  }
  return h;
}

static int same_def(const pdef *q, const pdef *p) {
  return q->func == p->func && q->variadic == p->variadic && q->num_params == p->num_params &&
         q->body_n == p->body_n && same_tokens(q->params, p->params, p->num_params) &&
         same_tokens(q->body, p->body, p->body_n);
}

/* The distinct, well-formed definitions of nm (built when first met; an open-addressing set of
 * their hashes finds the repeats). */
static int build_alts(ex *x, name *nm) {
  if (nm->built) return 0;
  size_t count = 0;
  for (uint32_t d = nm->first; d != 0; d = x->next_def[d - 1]) count++;
  size_t slots = 4;
  while (slots < 2 * count) slots *= 2;
  nm->alts = arena_alloc(x, &x->perm, count * sizeof *nm->alts);
  mark mk = arena_mark(&x->run);
  uint64_t *hashes = arena_alloc(x, &x->run, slots * (sizeof *hashes + sizeof(uint32_t)));
  if (nm->alts == NULL || hashes == NULL) return -1;
  uint32_t *slot_alt = (uint32_t *)(hashes + slots);
  memset(slot_alt, 0, slots * sizeof *slot_alt);
  for (uint32_t d = nm->first; d != 0; d = x->next_def[d - 1]) {
    if (parse_def(x, d - 1) != 0) return -1;
    const pdef *p = &x->pd[d - 1];
    if (p->state != 1) {
      nm->malformed = 1;
      continue;
    }
    uint64_t h = def_hash(p);
    size_t at = (size_t)(h ^ (h >> 31)) & (slots - 1);
    int dup = 0;
    for (; slot_alt[at] != 0 && !dup; at = (at + 1) & (slots - 1)) {
      dup = hashes[at] == h && same_def(&x->pd[nm->alts[slot_alt[at] - 1]], p);
    }
    if (dup) continue;
    hashes[at] = h;
    nm->alts[nm->num_alts++] = d - 1;
    slot_alt[at] = nm->num_alts;
  }
  arena_reset(&x->run, mk);
  nm->built = 1;
  return 0;
}

/* ---- Hide sets --------------------------------------------------------------------------- */

static int hs_has(const hs *h, const char *p, uint32_t n) {
  for (; h != NULL; h = h->next) {
    if (h->n == n && memcmp(h->p, p, n) == 0) return 1;
  }
  return 0;
}

static const hs *hs_add(ex *x, const hs *h, const char *p, uint32_t n) {
  if (hs_has(h, p, n)) return h;
  hs *e = arena_alloc(x, &x->run, sizeof *e);
  if (e == NULL) return NULL;
  e->p = p;
  e->n = n;
  e->next = h;
  return e;
}

static int hs_union(ex *x, const hs *a, const hs **b) {
  for (; a != NULL; a = a->next) {
    const hs *r = hs_add(x, *b, a->p, a->n);
    if (r == NULL) return -1;
    *b = r;
  }
  return 0;
}

static int hs_inter(ex *x, const hs *a, const hs *b, const hs **out) {
  *out = NULL;
  for (; a != NULL; a = a->next) {
    if (!hs_has(b, a->p, a->n)) continue;
    const hs *r = hs_add(x, *out, a->p, a->n);
    if (r == NULL) return -1;
    *out = r;
  }
  return 0;
}

/* ---- Expansion --------------------------------------------------------------------------- */

typedef struct input {
  const tok *src;
  size_t n, i;
  tvec stack; /* tokens to read before src: the next at the end */
} input;

static int in_next(input *in, tok *t) {
  if (in->stack.n > 0) {
    *t = in->stack.v[--in->stack.n];
    return 1;
  }
  if (in->i < in->n) {
    *t = in->src[in->i++];
    return 1;
  }
  return 0;
}

static const tok *in_peek(const input *in) {
  if (in->stack.n > 0) return &in->stack.v[in->stack.n - 1];
  return in->i < in->n ? &in->src[in->i] : NULL;
}

static int push_front(ex *x, input *in, const tvec *r) {
  for (size_t k = r->n; k-- > 0;) {
    if (tv_push(x, &in->stack, &r->v[k]) != 0) return -1;
  }
  return 0;
}

static int is_bad_name(const ex *x, const char *p, size_t n) {
  static const char *const targets[] = {"__has_include", "__has_include_next", "__has_embed"};
  for (size_t k = 0; k < 3; k++) {
    if (n == strlen(targets[k]) && memcmp(p, targets[k], n) == 0) return 1;
  }
  for (size_t w = 0; w < x->num_wrappers; w++) {
    if (n == strlen(x->wrappers[w]) && memcmp(p, x->wrappers[w], n) == 0) return 1;
  }
  return 0;
}

/* Pastes r onto l (in place; a placemarker on either side leaves the other); a target or a
 * wrapper's name stops the check. */
static int paste(ex *x, tok *l, const tok *r, const name *in) {
  if (r->kind == T_PLACEMARKER) return 0;
  if (l->kind == T_PLACEMARKER) {
    *l = *r;
    return 0;
  }
  size_t n = (size_t)l->n + r->n;
  char *b = arena_alloc(x, &x->run, n + 1);
  if (b == NULL) return -1;
  memcpy(b, l->p, l->n);
  memcpy(b + l->n, r->p, r->n);
  b[n] = '\0';
  int ident = n > 0 && !(b[0] >= '0' && b[0] <= '9');
  for (size_t i = 0; i < n && ident; i++) ident = is_ident((unsigned char)b[i]);
  if (ident && is_bad_name(x, b, n)) {
    snprintf(x->bad, sizeof x->bad, "%.*s", (int)(n < 39 ? n : 39), b);
    snprintf(x->in_macro, sizeof x->in_macro, "%.*s", (int)(in->n < 39 ? in->n : 39), in->p);
    x->why = WHY_BAD;
    return -1;
  }
  l->p = b;
  l->n = (uint32_t)n;
  l->kind = ident ? T_ID : l->kind == T_NUM ? T_NUM : T_PUNCT;
  return 0;
}

static int step(ex *x, input *in, const tok *t, tvec *out);

/* Counts a token read or substituted: 0 (with WHY_LIMIT) past a bound. */
static int count_step(ex *x) {
  if (++x->ep_steps > EX_EP_STEPS || ++x->steps > EX_MAX_STEPS) {
    x->why = WHY_LIMIT;
    return 0;
  }
  return 1;
}

/* The full expansion of an argument on its own. */
static int expand_arg(ex *x, const tvec *arg, tvec *out) {
  if (++x->depth > EX_MAX_DEPTH) {
    x->why = WHY_LIMIT;
    return -1;
  }
  input in = {arg->v, arg->n, 0, {NULL, 0, 0}};
  tok t;
  while (in_next(&in, &t)) {
    if (step(x, &in, &t, out) != 0) return -1;
  }
  x->depth--;
  return 0;
}

static int param_index(const pdef *m, const tok *t) {
  if (t->kind != T_ID) return -1;
  for (uint32_t k = 0; k < m->num_params; k++) {
    if (m->params[k].n == t->n && memcmp(m->params[k].p, t->p, t->n) == 0) return (int)k;
  }
  return -1;
}

/* m's body with each __VA_OPT__(...) replaced by its contents, or by a placemarker when the
 * variable arguments expand to nothing. */
static int va_opt(ex *x, const pdef *m, int va_empty, const tok **body, size_t *n) {
  size_t k = 0;
  for (; k < m->body_n && !tok_is(&m->body[k], "__VA_OPT__"); k++) {
  }
  *body = m->body;
  *n = m->body_n;
  if (k == m->body_n || !m->variadic) return 0;
  tok *b = arena_alloc(x, &x->run, (m->body_n + 1) * sizeof *b);
  if (b == NULL) return -1;
  size_t o = 0;
  for (size_t i = 0; i < m->body_n; i++) {
    if (!tok_is(&m->body[i], "__VA_OPT__") || i + 1 >= m->body_n ||
        m->body[i + 1].kind != T_LPAREN) {
      b[o++] = m->body[i];
      continue;
    }
    size_t j = i + 2;
    for (int depth = 1; j < m->body_n; j++) {
      depth += m->body[j].kind == T_LPAREN;
      depth -= m->body[j].kind == T_RPAREN;
      if (depth == 0) break;
    }
    if (va_empty || j == i + 2) {
      static const char pm[] = "";
      tok t = {pm, 0, m->body[i].off, T_PLACEMARKER, 0, NULL};
      b[o++] = t;
    } else {
      for (size_t k2 = i + 2; k2 < j; k2++) b[o++] = m->body[k2];
    }
    i = j; /* the closing parenthesis */
  }
  *body = b;
  *n = o;
  return 0;
}

/* Appends an operand of ## (an argument unexpanded, or a placemarker for an empty one). */
static int push_raw(ex *x, tvec *res, const tvec *a, uint32_t off) {
  if (a->n == 0) {
    static const char pm[] = "";
    tok t = {pm, 0, off, T_PLACEMARKER, 0, NULL};
    return tv_push(x, res, &t);
  }
  for (size_t k = 0; k < a->n; k++) {
    if (tv_push(x, res, &a->v[k]) != 0) return -1;
  }
  return 0;
}

/* The argument of parameter pi fully expanded (once per substitution). */
static int expanded_arg(ex *x, tvec *args, tvec *expanded, uint8_t *done, int pi) {
  if (!done[pi]) {
    tvec e = {NULL, 0, 0};
    if (args[pi].n > 0 && expand_arg(x, &args[pi], &e) != 0) return -1;
    expanded[pi] = e;
    done[pi] = 1;
  }
  return 0;
}

/* Substitutes args into m's body, pastes, and adds hide set h to every token of the result. */
static int subst(ex *x, const name *nm, const pdef *m, tvec *args, const hs *h, tvec *res) {
  tvec *expanded = NULL;
  uint8_t *done = NULL;
  if (m->num_params > 0) {
    expanded = arena_alloc(x, &x->run, m->num_params * (sizeof *expanded + 1));
    if (expanded == NULL) return -1;
    memset(expanded, 0, m->num_params * (sizeof *expanded + 1));
    done = (uint8_t *)(expanded + m->num_params);
  }
  int va_empty = 0;
  if (m->variadic) { /* __VA_OPT__ looks at the variable arguments once expanded */
    int va = (int)m->num_params - 1;
    if (expanded_arg(x, args, expanded, done, va) != 0) return -1;
    va_empty = expanded[va].n == 0;
  }
  const tok *body;
  size_t bn;
  if (va_opt(x, m, va_empty, &body, &bn) != 0) return -1;
  size_t start = res->n;
  for (size_t i = 0; i < bn; i++) {
    const tok *tk = &body[i];
    if (!count_step(x)) return -1;
    int pi = m->func ? param_index(m, tk) : -1;
    int next_pastes = i + 1 < bn && body[i + 1].kind == T_PASTE;
    if (tk->kind == T_HASH && m->func && i + 1 < bn && param_index(m, &body[i + 1]) >= 0) {
      static const char str[] = "\"#\"";
      tok t = {str, 3, tk->off, T_STR, 0, NULL};
      if (tv_push(x, res, &t) != 0) return -1;
      i++;
      continue;
    }
    if (tk->kind == T_PASTE) {
      if (res->n == start || i + 1 >= bn) continue; /* ill-formed: NVRTC errs */
      const tok *rt = &body[i + 1];
      int ri = m->func ? param_index(m, rt) : -1;
      i++;
      if (ri >= 0 && m->variadic && (uint32_t)ri == m->num_params - 1 &&
          res->v[res->n - 1].kind == T_COMMA) { /* GNU: , ## __VA_ARGS__ */
        if (args[ri].n == 0) {
          res->n--;
        } else if (push_raw(x, res, &args[ri], rt->off) != 0) {
          return -1;
        }
        continue;
      }
      tvec one = {NULL, 0, 0};
      const tvec *rhs = &one;
      tok single;
      if (ri >= 0) {
        rhs = &args[ri];
      } else if (rt->kind == T_HASH && m->func && i + 1 < bn && param_index(m, &body[i + 1]) >= 0) {
        static const char str[] = "\"#\"";
        single = (tok){str, 3, rt->off, T_STR, 0, NULL};
        one.v = &single;
        one.n = 1;
        i++;
      } else {
        single = *rt;
        one.v = &single;
        one.n = 1;
      }
      if (rhs->n == 0) continue; /* a placemarker: the left operand stays */
      if (paste(x, &res->v[res->n - 1], &rhs->v[0], nm) != 0) return -1;
      for (size_t k = 1; k < rhs->n; k++) {
        if (tv_push(x, res, &rhs->v[k]) != 0) return -1;
      }
      continue;
    }
    if (pi >= 0 && next_pastes) { /* the left operand of ##, unexpanded */
      if (push_raw(x, res, &args[pi], tk->off) != 0) return -1;
      continue;
    }
    if (pi >= 0) {
      if (expanded_arg(x, args, expanded, done, pi) != 0) return -1;
      for (size_t k = 0; k < expanded[pi].n; k++) {
        if (tv_push(x, res, &expanded[pi].v[k]) != 0) return -1;
      }
      continue;
    }
    if (tv_push(x, res, tk) != 0) return -1;
  }
  size_t o = start;
  for (size_t k = start; k < res->n; k++) {
    if (res->v[k].kind == T_PLACEMARKER) continue;
    tok t = res->v[k];
    const hs *th = h;
    if (hs_union(x, t.h, &th) != 0) return -1;
    t.h = th;
    t.off = UINT32_MAX; /* from a body */
    t.after_directive = 0;
    res->v[o++] = t;
  }
  res->n = o;
  return 0;
}

static uint32_t chosen(const ex *x, const name *nm) {
  for (size_t k = 0; k < x->num_choices; k++) {
    if (x->choice[k].nm == nm) return x->choice[k].alt;
  }
  return AS_ITSELF - 1; /* not chosen */
}

static int directive_inside(ex *x, const name *nm) {
  snprintf(x->in_macro, sizeof x->in_macro, "%.*s", (int)(nm->n < 39 ? nm->n : 39), nm->p);
  x->why = WHY_DIRECTIVE;
  return -1;
}

#define EX_MAX_STRINGS 4096

/* The content of string literal t: after its opening quote (a raw string's after its '('), up to
 * its closing one; *raw: a raw string (escapes stay). 0 when t is no string literal. */
static int string_content(const tok *t, const char **p, size_t *n, int *raw) {
  const char *q = memchr(t->p, '"', t->n);
  if (q == NULL || t->n < 2 || t->p[t->n - 1] != '"' || q == t->p + t->n - 1) return 0;
  *raw = q > t->p && q[-1] == 'R';
  const char *b = q + 1, *e = t->p + t->n - 1;
  if (*raw) {
    const char *lp = memchr(b, '(', (size_t)(e - b));
    if (lp == NULL) return 0;
    size_t dl = (size_t)(lp - b);
    if ((size_t)(e - (lp + 1)) < dl + 1) return 0;
    e -= dl + 1; /* ")delim" */
    b = lp + 1;
  }
  *p = b;
  *n = (size_t)(e - b);
  return 1;
}

static int note_string(ex *x, const tok *t) {
  const char *p;
  size_t n;
  int raw;
  if (!string_content(t, &p, &n, &raw)) return 0;
  int spells = memmem(p, n, "__has_", 6) != NULL;
  for (size_t i = 0; i < n && !spells;) {
    if (!is_ident((unsigned char)p[i]) || (p[i] >= '0' && p[i] <= '9')) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && is_ident((unsigned char)p[j])) j++;
    spells = find_name(x, p + i, j - i) != NULL;
    i = j;
  }
  if (!spells) return 0;
  for (size_t k = 0; k < x->strs.n; k++) {
    if (x->strs.v[k].n == t->n && memcmp(x->strs.v[k].p, t->p, t->n) == 0) return 0;
  }
  if (x->strs.n == EX_MAX_STRINGS) {
    x->why = WHY_STRINGS;
    return -1;
  }
  char *copy = arena_alloc(x, &x->perm, t->n + 1);
  if (copy == NULL) return -1;
  memcpy(copy, t->p, t->n);
  copy[t->n] = '\0';
  tok c = *t;
  c.p = copy;
  c.h = NULL;
  return toks_push(x, &x->perm, &x->strs.v, &x->strs.n, &x->strs.cap, &c);
}

/* Reads token t (already taken from in): emits it to out (when collecting), or expands it
 * under the current choices and pushes the result back onto in. */
static int step(ex *x, input *in, const tok *t, tvec *out) {
  if (!count_step(x)) return -1;
  if (t->kind == T_STR && note_string(x, t) != 0) return -1;
  name *nm = t->kind == T_ID ? find_name(x, t->p, t->n) : NULL;
  if (nm == NULL || hs_has(t->h, t->p, t->n)) return out != NULL ? tv_push(x, out, t) : 0;
  if (build_alts(x, nm) != 0) return -1;
  if (nm->malformed) { /* a definition the check cannot read: the coarse check decides */
    x->why = WHY_LIMIT;
    return -1;
  }
  uint32_t alt = nm->num_alts == 0 ? AS_ITSELF : chosen(x, nm);
  if (alt == AS_ITSELF - 1) {
    x->why = WHY_NEED;
    x->need = nm;
    return -1;
  }
  if (alt == AS_ITSELF) return out != NULL ? tv_push(x, out, t) : 0;
  const pdef *m = &x->pd[nm->alts[alt]];
  tvec res = {NULL, 0, 0};
  const hs *h = NULL;
  if (!m->func) {
    h = hs_add(x, t->h, nm->p, nm->n);
    if (h == NULL || subst(x, nm, m, NULL, h, &res) != 0) return -1;
    return push_front(x, in, &res);
  }
  const tok *nx = in_peek(in);
  if (nx == NULL || nx->kind != T_LPAREN) return out != NULL ? tv_push(x, out, t) : 0;
  tok lp;
  int from_src = in->stack.n == 0;
  (void)in_next(in, &lp);
  if (from_src && lp.after_directive) return directive_inside(x, nm);
  size_t na = m->num_params > 0 ? m->num_params : 1;
  tvec *args = arena_alloc(x, &x->run, na * sizeof *args);
  if (args == NULL) return -1;
  memset(args, 0, na * sizeof *args);
  size_t ai = 0;
  int depth = 0, closed = 0, too_many = 0;
  tok a, rp = {NULL, 0, 0, 0, 0, NULL};
  for (;;) {
    from_src = in->stack.n == 0;
    if (!in_next(in, &a)) break;
    if (!count_step(x)) return -1;
    /* NVRTC applies a directive among the arguments (a group skipped, a macro redefined, a
     * file included), which this expansion does not follow. */
    if (from_src && a.after_directive) return directive_inside(x, nm);
    if (a.kind == T_RPAREN && depth == 0) {
      closed = 1;
      rp = a;
      break;
    }
    depth += a.kind == T_LPAREN;
    depth -= a.kind == T_RPAREN;
    if (a.kind == T_COMMA && depth == 0 && !(m->variadic && ai + 1 == na)) {
      if (++ai == na) too_many = 1;
      if (ai >= na) ai = na - 1;
      continue;
    }
    if (tv_push(x, &args[ai], &a) != 0) return -1;
  }
  /* Unterminated, or the wrong number of arguments: NVRTC errs, nothing is cached. */
  if (!closed || too_many || (ai + 1 < m->num_params && !(m->variadic && ai + 2 == m->num_params)) ||
      (m->num_params == 0 && args[0].n > 0)) {
    return 0;
  }
  const hs *hi = NULL;
  if (hs_inter(x, t->h, rp.h, &hi) != 0) return -1;
  h = hs_add(x, hi, nm->p, nm->n);
  if (h == NULL || subst(x, nm, m, args, h, &res) != 0) return -1;
  return push_front(x, in, &res);
}

/* ---- The driver -------------------------------------------------------------------------- */

typedef struct text_ctx {
  const char *where, *advice;
  const uint32_t *splices;
  size_t num_splices;
  const char *clean;
} text_ctx;

static size_t line_of(const text_ctx *c, uint32_t off) {
  size_t line = 1;
  for (uint32_t i = 0; i < off; i++) line += c->clean[i] == '\n' || c->clean[i] == '\x01';
  for (size_t k = 0; k < c->num_splices; k++) line += c->splices[k] <= off;
  return line;
}

static t4a_status refusal(ex *x, const text_ctx *c, const tok *start) {
  size_t line = line_of(c, start->off);
  int nn = (int)(start->n < 64 ? start->n : 64);
  if (x->why == WHY_OOM) return T4A_HOST_OUT_OF_MEMORY;
  if (x->why == WHY_STRINGS) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                          "%s, line %zu: more than %d string literals name macros, and the check "
                          "reads no more of them as pragma operands%s",
                          c->where, line, EX_MAX_STRINGS, c->advice);
  }
  if (x->why == WHY_DIRECTIVE) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                          "%s, line %zu: a directive stands among the arguments of %s, which "
                          "NVRTC applies there (its tokens may paste __has_include)%s",
                          c->where, line, x->in_macro, c->advice);
  }
  if (x->why == WHY_BAD) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                          "%s, line %zu: %.*s expands to a paste that makes %s (in the macro "
                          "%s)%s",
                          c->where, line, nn, start->p, x->bad, x->in_macro, c->advice);
  }
  return t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                        "%s, line %zu: %.*s has too many expansions to check one by one, and its "
                        "tokens with the pieces in the definitions could paste %s%s",
                        c->where, line, nn, start->p, x->bad, c->advice);
}

/* Runs the invocation at s[p] under the current choices, then under each choice of the name
 * it needs next. Marks reach[end] for every place an expansion ends. */
static int explore(ex *x, const tok *s, size_t m, size_t p, uint8_t *reach) {
  if (++x->runs > EX_EP_RUNS) {
    x->why = WHY_LIMIT;
    return -1;
  }
  atomic_fetch_add(&g_runs, 1);
  mark mk = arena_mark(&x->run);
  input in = {s, m, p, {NULL, 0, 0}};
  tok t;
  (void)in_next(&in, &t);
  x->depth = 0;
  int r = step(x, &in, &t, NULL);
  while (r == 0 && in.stack.n > 0) {
    (void)in_next(&in, &t);
    r = step(x, &in, &t, NULL);
  }
  size_t end = in.i;
  arena_reset(&x->run, mk);
  if (r == 0) {
    reach[end] = 1;
    return 0;
  }
  if (x->why != WHY_NEED) return -1;
  name *nm = (name *)x->need;
  x->why = WHY_NONE;
  if (x->num_choices == EX_MAX_CHOICES) {
    x->why = WHY_LIMIT;
    return -1;
  }
  size_t slot = x->num_choices++;
  x->choice[slot].nm = nm;
  for (uint32_t alt = 0; alt <= nm->num_alts; alt++) {
    x->choice[slot].alt = alt == nm->num_alts ? AS_ITSELF : alt;
    if (explore(x, s, m, p, reach) != 0) {
      x->num_choices = slot;
      return -1;
    }
  }
  x->num_choices = slot;
  return 0;
}

/* Whether pieces (the definitions' and n more) can be joined, in any order, into bad name b. */
static int joins_into(const ex *x, const char *b, const tok *more, size_t n) {
  size_t L = strlen(b);
  uint8_t reach[64] = {0};
  if (L >= sizeof reach) return 1; /* (wrapper names are under 32 bytes) */
  reach[0] = 1;
  for (size_t i = 0; i < L; i++) {
    if (!reach[i]) continue;
    for (size_t k = 0; k < x->num_pieces + n; k++) {
      const char *piece = k < x->num_pieces ? x->pieces[k] : more[k - x->num_pieces].p;
      size_t pn = k < x->num_pieces ? strlen(piece) : more[k - x->num_pieces].n;
      if (pn > 0 && pn < L && i + pn <= L && memcmp(b + i, piece, pn) == 0) reach[i + pn] = 1;
    }
  }
  return reach[L];
}

/* The coarse check of an invocation with too many expansions to run each: every token a paste
 * in any of them could join comes from a definition's body (x->pieces: each piece of a bad name
 * there) or from the text the invocation can take, its name and the parenthesised groups right
 * after it (an expansion takes more of the text only by ending in a function-like macro's name
 * followed by '('); if no order of those pieces makes a bad name, no expansion pastes one. Sets
 * *end past the groups. 0: passes; -1: x->bad names what the pieces could make. */
static int coarse_check(ex *x, const tok *s, size_t m, size_t p, size_t *end) {
  size_t q = p + 1;
  if (x->open_body) q = m; /* a body's unclosed '(' takes whatever follows */
  while (q < m && s[q].kind == T_LPAREN) {
    int depth = 0;
    do {
      depth += s[q].kind == T_LPAREN;
      depth -= s[q].kind == T_RPAREN;
      q++;
    } while (q < m && depth > 0);
  }
  *end = q;
  for (size_t k = p + 1; k < q; k++) {
    if (s[k].after_directive) return -2; /* the tokens could differ from those seen */
  }
  static const char *const targets[] = {"__has_include", "__has_include_next", "__has_embed"};
  for (size_t b = 0; b < 3 + x->num_wrappers; b++) {
    const char *bad = b < 3 ? targets[b] : x->wrappers[b - 3];
    if (joins_into(x, bad, s + p, q - p)) {
      snprintf(x->bad, sizeof x->bad, "%s", bad);
      return -1;
    }
  }
  return 0;
}

/* Every invocation of one token sequence (a text's lines, or one #if expression). */
static t4a_status check_stream(ex *x, const text_ctx *c, const tok *s, size_t m) {
  if (m == 0) return T4A_OK;
  uint8_t *reach = arena_alloc(x, &x->run, m + 1);
  if (reach == NULL) return refusal(x, c, &s[0]);
  memset(reach, 0, m + 1);
  reach[0] = 1;
  t4a_status st = T4A_OK;
  for (size_t p = 0; p < m && st == T4A_OK; p++) {
    if (!reach[p]) continue;
    name *nm = s[p].kind == T_ID ? find_name(x, s[p].p, s[p].n) : NULL;
    if (nm == NULL) {
      reach[p + 1] = 1;
      continue;
    }
    x->num_choices = 0;
    x->runs = 0;
    x->ep_steps = 0;
    int r = x->steps >= EX_MAX_STEPS ? -1 : explore(x, s, m, p, reach);
    if (r == 0) continue;
    if (x->why == WHY_LIMIT || x->steps >= EX_MAX_STEPS) {
      size_t end = 0;
      x->why = WHY_NONE;
      int cr = coarse_check(x, s, m, p, &end);
      if (cr == 0) {
        reach[p + 1] = 1; /* what is inside is checked on its own */
        continue;
      }
      if (cr == -2) {
        (void)directive_inside(x, nm);
      } else {
        x->why = WHY_LIMIT;
      }
    }
    st = refusal(x, c, &s[p]);
  }
  return st;
}

static t4a_status text_refusal(const text_ctx *c, size_t line, const char *what) {
  return t4a_error_set_(T4A_INVALID_ARGUMENT, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                        "%s, line %zu: %s, so the check cannot tell what a macro's arguments "
                        "hold there (a paste could make __has_include)%s",
                        c->where, line, what, c->advice);
}

/* The operand of _Pragma("..."), destringized: NVRTC reads it as a #pragma line, whose macros
 * some pragmas expand (unroll N); checked as a stream of its own. */
static t4a_status check_pragma(ex *x, const text_ctx *c, const tok *str) {
  const char *q;
  size_t n;
  int is_raw;
  if (!string_content(str, &q, &n, &is_raw)) return T4A_OK; /* not a string */
  char *raw = arena_alloc(x, &x->run, n + 1);
  if (raw == NULL) return refusal(x, c, str);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = q[i];
    if (!is_raw && ch == '\\' && i + 1 < n && (q[i + 1] == '"' || q[i + 1] == '\\')) ch = q[++i];
    raw[k++] = ch;
  }
  size_t cn = 0;
  char *b = clean(x, &x->run, raw, k, &cn, NULL, NULL);
  if (b == NULL) return refusal(x, c, str);
  tvec v = {NULL, 0, 0};
  size_t i = 0;
  tok t;
  for (;;) {
    if (lex(x, b, cn, &i, &t) != 0) {
      t.off = str->off; /* for the line */
      if (tv_push(x, &v, &t) != 0) return refusal(x, c, str);
    } else if (i < cn) {
      i++; /* a newline in a block comment's place */
    } else {
      break;
    }
  }
  return check_stream(x, c, v.v, v.n);
}

/* Notes the string literals in the bodies of the definitions whose bodies lie in text[0..n) (the
 * request's own: a text, a -D option): a body reached only where nothing is expanded (a root's
 * text, an invocation the coarse check decided) can still make its strings a pragma's operand. */
static t4a_status note_body_strings(ex *x, const text_ctx *c, const char *text, size_t n) {
  for (size_t d = 0; d < x->num_defs; d++) {
    const t4a_nvrtc_macro_ *m = &x->defs[d];
    if (m->body < text || m->body >= text + n || memchr(m->body, '"', m->body_len) == NULL) {
      continue;
    }
    if (parse_def(x, d) != 0) {
      return refusal(x, c, &(tok){m->name, (uint32_t)m->name_len, 0, 0, 0, NULL});
    }
    const pdef *pd = &x->pd[d];
    if (pd->state != 1) {
      return text_refusal(c, line_of(c, (size_t)(m->body - text)),
                          "a string literal stands in a definition the check cannot read");
    }
    for (size_t k = 0; k < pd->body_n; k++) {
      tok str = pd->body[k];
      str.off = UINT32_MAX; /* (its offset is the body's) */
      if (str.kind == T_STR && note_string(x, &str) != 0) return refusal(x, c, &pd->body[k]);
    }
  }
  return T4A_OK;
}

/* Lexes one request text into its line tokens and its #if / #elif expressions (without the
 * operands of `defined` and of __has_include and its kind), and checks each. An invocation's
 * arguments must lie within the text and hold no directive: a parenthesis closing one the text
 * did not open, or an #include among open parentheses, could hand one text's tokens to another
 * text's invocation, and is refused. */
static t4a_status check_text(ex *x, const char *text, size_t n, const char *where,
                             const char *advice) {
  text_ctx c = {where, advice, NULL, 0, NULL};
  if (x->trigraphs && x->raw_strings && memmem(text, n, "??", 2) != NULL) {
    /* A raw string reverts trigraphs, which the cleaning here replaces first. */
    return text_refusal(&c, 1, "'?\?' in a dialect with both trigraphs and raw strings");
  }
  size_t cn = 0;
  uint32_t *sp = NULL;
  size_t ns = 0;
  char *b = clean(x, &x->run, text, n, &cn, &sp, &ns); /* freed with the run arena */
  if (b == NULL) {
    return x->why == WHY_OOM ? T4A_HOST_OUT_OF_MEMORY
                             : refusal(x, &c, &(tok){text, 0, 0, 0, 0, NULL});
  }
  c.splices = sp;
  c.num_splices = ns;
  c.clean = b;
  tvec lines = {NULL, 0, 0}, expr = {NULL, 0, 0};
  t4a_status st = T4A_OK;
  size_t i = 0;
  int line_start = 1, after_directive = 0;
  long depth = 0; /* parentheses open on the text's lines */
  while (i < cn && st == T4A_OK) {
    tok t;
    x->crossed = 0;
    int k = lex(x, b, cn, &i, &t);
    if (x->crossed) line_start = 1; /* a # after a block comment's newline starts a directive */
    if (k == 0) {
      if (i < cn && b[i] == '\n') {
        i++;
        line_start = 1;
      }
      continue;
    }
    int was = line_start;
    line_start = 0;
    if (k == T_HASH && was) { /* a directive */
      tok d;
      int dk = lex(x, b, cn, &i, &d);
      /* NVRTC expands the macros of #if, #elif and #line operands, and of some pragmas'
       * (#pragma unroll N): each is a stream of its own. */
      int is_pragma = dk == T_ID && tok_is(&d, "pragma");
      int is_if = dk == T_ID && (tok_is(&d, "if") || tok_is(&d, "elif") || tok_is(&d, "line") ||
                                 is_pragma);
      int is_include = dk == T_ID && (tok_is(&d, "include") || tok_is(&d, "include_next") ||
                                      tok_is(&d, "import") || tok_is(&d, "embed"));
      if (is_include && depth > 0) {
        st = text_refusal(&c, line_of(&c, d.off), "an include among open parentheses");
        break;
      }
      /* A pragma among a macro's arguments changes no definition and no token (NVRTC knows no
       * push_macro); any other directive there is refused (directive_inside). */
      if (!is_pragma) after_directive = 1;
      expr.n = 0;
      while ((k = lex(x, b, cn, &i, &t)) != 0) {
        if (!is_if) continue;
        if (t.kind == T_ID && tok_is(&t, "defined")) {
          size_t j = i;
          tok u;
          int uk = lex(x, b, cn, &j, &u);
          if (uk == T_LPAREN) {
            (void)lex(x, b, cn, &j, &u);
            (void)lex(x, b, cn, &j, &u); /* ) */
          }
          i = j;
          continue;
        }
        if (t.kind == T_ID && (tok_is(&t, "__has_include") || tok_is(&t, "__has_include_next") ||
                               tok_is(&t, "__has_embed"))) {
          size_t j = i;
          tok u;
          if (lex(x, b, cn, &j, &u) == T_LPAREN) {
            while (j < cn && (b[j] == ' ' || b[j] == '\t')) j++;
            if (j < cn && b[j] == '<') { /* a header name: one token to the '>' */
              while (j < cn && b[j] != '>' && b[j] != '\n') j++;
              if (j < cn && b[j] == '>') j++;
            }
            int open = 1;
            while (open > 0 && (k = lex(x, b, cn, &j, &u)) != 0) {
              open += k == T_LPAREN;
              open -= k == T_RPAREN;
            }
            i = j;
          }
          continue;
        }
        if (tv_push(x, &expr, &t) != 0) break;
      }
      if (x->why != WHY_NONE) break;
      if (is_if) st = check_stream(x, &c, expr.v, expr.n);
      continue;
    }
    depth += t.kind == T_LPAREN;
    depth -= t.kind == T_RPAREN;
    if (depth < 0) {
      st = text_refusal(&c, line_of(&c, t.off), "a parenthesis closes one this text did not open");
      break;
    }
    t.after_directive = after_directive;
    after_directive = 0;
    if (tv_push(x, &lines, &t) != 0) break;
  }
  if (st == T4A_OK && x->why != WHY_NONE) st = refusal(x, &c, &(tok){b, 0, 0, 0, 0, NULL});
  if (st == T4A_OK) st = check_stream(x, &c, lines.v, lines.n);
  /* The text's own string literals, then those the expansions made (each may add more). */
  for (size_t k = 0; st == T4A_OK && k < lines.n; k++) {
    if (lines.v[k].kind == T_STR && note_string(x, &lines.v[k]) != 0) {
      st = refusal(x, &c, &lines.v[k]);
    }
  }
  if (st == T4A_OK) st = note_body_strings(x, &c, text, n);
  while (st == T4A_OK && x->next_str < x->strs.n) {
    tok str = x->strs.v[x->next_str++];
    str.off = str.off == UINT32_MAX ? 0 : str.off;
    st = check_pragma(x, &c, &str);
  }
  x->strs.n = x->next_str = 0;
  arena_free(&x->run); /* the text, its streams: below every run's mark */
  return st;
}

t4a_status t4a_nvrtc_check_pastes_(const t4a_nvrtc_paste_check_ *pc) {
  ex x;
  memset(&x, 0, sizeof x);
  x.defs = pc->defs;
  x.num_defs = pc->num_defs;
  x.wrappers = pc->wrappers;
  x.num_wrappers = pc->num_wrappers;
  x.trigraphs = pc->trigraphs;
  x.raw_strings = pc->raw_strings;
  x.digit_separators = pc->digit_separators;
  x.pieces = pc->pieces;
  x.num_pieces = pc->num_pieces;
  x.open_body = pc->open_body;
  t4a_status st = T4A_OK;
  if (x.num_defs > 0) {
    size_t slots = 16;
    while (slots < 2 * x.num_defs) slots *= 2;
    x.pd = t4a_host_calloc(x.num_defs, sizeof *x.pd);
    x.next_def = t4a_host_calloc(x.num_defs, sizeof *x.next_def);
    x.names = t4a_host_calloc(x.num_defs, sizeof *x.names);
    x.slots = t4a_host_calloc(slots, sizeof *x.slots);
    if (x.pd == NULL || x.next_def == NULL || x.names == NULL || x.slots == NULL) {
      st = T4A_HOST_OUT_OF_MEMORY;
    }
    x.mask = slots - 1;
    for (size_t d = x.num_defs; st == T4A_OK && d-- > 0;) { /* chains in text order */
      const t4a_nvrtc_macro_ *m = &x.defs[d];
      const char *np = m->name;
      size_t nn = m->name_len;
      if (memchr(np, '\\', nn) != NULL || (x.trigraphs && memchr(np, '?', nn) != NULL)) {
        np = clean(&x, &x.perm, m->name, m->name_len, &nn, NULL, NULL); /* a spliced name */
        if (np == NULL) {
          st = x.why == WHY_OOM
                   ? T4A_HOST_OUT_OF_MEMORY
                   : t4a_error_set_(T4A_LIMIT_EXCEEDED, T4A_NVRTC_INCLUDES_ENTRY, 0, NULL, 0,
                                    "the definitions are too large to expand");
          break;
        }
      }
      if (nn == 0) continue;
      name *nm = find_name(&x, np, nn);
      if (nm == NULL) {
        size_t h = hash_name(np, nn) & x.mask;
        while (x.slots[h] != 0) h = (h + 1) & x.mask;
        nm = &x.names[x.num_names];
        x.slots[h] = (uint32_t)++x.num_names;
        nm->p = np;
        nm->n = (uint32_t)nn;
      }
      x.next_def[d] = nm->first;
      nm->first = (uint32_t)(d + 1);
    }
  }
  for (size_t t = 0; st == T4A_OK && t < pc->num_texts; t++) {
    if (x.num_names == 0) break;
    st = check_text(&x, pc->texts[t], pc->text_bytes[t], pc->wheres[t], pc->advice);
  }
  for (size_t o = 0; st == T4A_OK && x.num_names > 0 && o < pc->num_options; o++) {
    text_ctx c = {"a -D option", pc->advice, NULL, 0, NULL};
    st = note_body_strings(&x, &c, pc->options[o], pc->option_bytes[o]);
    while (st == T4A_OK && x.next_str < x.strs.n) {
      tok str = x.strs.v[x.next_str++];
      str.off = 0;
      st = check_pragma(&x, &c, &str);
    }
    x.strs.n = x.next_str = 0;
    arena_free(&x.run);
  }
  arena_free(&x.perm);
  arena_free(&x.run);
  free(x.pd);
  free(x.next_def);
  free(x.names);
  free(x.slots);
  return st;
}
