/* What a cached compile may read (t4a_nvrtc_check_cacheable), without running NVRTC: the
 * lexical include check over the source, the headers and the -D definitions, in each dialect.
 * Each case's verdict for NVRTC 13.0 itself was measured (see nvrtc_cacheable.c); the options
 * allowlist is tested through the cache in cache_test.c. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_testutil.h"

static t4a_nvrtc_lib *g_lib;

static int setup(void **state) {
  (void)state;
  return t4a_nvrtc_lib_open(NULL, &g_lib) == T4A_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  t4a_nvrtc_lib_release(g_lib);
  return 0;
}

typedef struct check_case {
  const char *source;
  const char *option; /* NULL: none */
  const char *a_h;    /* content of header "a.h" (NULL: empty) */
  const char *want;   /* NULL: accepted; else a part of the refusal's message */
} check_case;

static void run_case(const check_case *c, size_t index) {
  t4a_nvrtc_header h[3] = {
      {"a.h", c->a_h != NULL ? c->a_h : "", 0, 0}, {"dir/b.h", "", 0, 0}, {"cstdio", "", 0, 0}};
  t4a_nvrtc_request r = test_add1_request();
  r.source = c->source;
  r.headers = h;
  r.num_headers = 3;
  const char *opts[1] = {c->option};
  if (c->option != NULL) {
    r.options = opts;
    r.num_options = 1;
  }
  t4a_nvrtc_prepared p;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, &r, &p), T4A_OK);
  t4a_error_clear();
  t4a_status st = t4a_nvrtc_check_cacheable(&p);
  t4a_error e;
  t4a_error_last(&e);
  int ok = c->want == NULL ? st == T4A_OK
                           : st == T4A_INVALID_ARGUMENT && strstr(e.message, c->want) != NULL;
  if (!ok) {
    print_error("case %zu (%s): got %s \"%s\", want %s \"%s\"\n", index, c->source,
                t4a_status_name(st), e.message, c->want == NULL ? "OK" : "INVALID_ARGUMENT",
                c->want != NULL ? c->want : "");
  }
  assert_true(ok);
}

static void run_cases(const check_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) run_case(&cases[i], i);
}

/* Includes that name a header of the request, and text that only looks like an include. */
static void test_accepted(void **state) {
  (void)state;
  static const check_case cases[] = {
      {"#include \"a.h\"\n", NULL, NULL, NULL},
      {"#include <a.h>\n", NULL, NULL, NULL},
      {"  #  include \"dir/b.h\"\n", NULL, NULL, NULL},
      {"%:include \"a.h\"\n", NULL, NULL, NULL},
      {"#include_next \"a.h\"\n", NULL, NULL, NULL},
      {"/* c */ #include \"a.h\" // trailing\n", NULL, NULL, NULL},
      {"#include <cstdio>\n", NULL, NULL, NULL},
      {"#inc\\\nlude \"a.h\"\n", NULL, NULL, NULL}, /* a splice inside the directive name */
      {"#if __has_include(\"a.h\") && __has_include ( <dir/b.h> )\n#endif\n", NULL, NULL, NULL},
      {"#ifdef __has_include\n#endif\n#ifndef __has_include_next\n#endif\n", NULL, NULL, NULL},
      {"#if defined(__has_include) && defined __has_embed\n#endif\n", NULL, NULL, NULL},
      {"// #include \"/etc/passwd\"\n/* #include </abs>\n __has_include(\"/x\") */\n", NULL, NULL,
       NULL},
      {"const char *s = \"#include \\\"/abs\\\" #embed \\\"/x\\\"\";\n", NULL, NULL, NULL},
      {"const char *s = u8\"#include </x>\"; char c = L'\"';\n", NULL, NULL, NULL},
      {"__device__ const char *r = R\"x(\n#include \"/abs\"\n)x\";\n", NULL, NULL, NULL},
      {"char c = '\"'; int n = 1'000; // __has_include(\"/x\")\n", NULL, NULL, NULL},
      {"#define CAT(a, b) a##b\nint CAT(x, y);\n", NULL, NULL, NULL},      /* pasting, no piece */
      {"#define S(a) #a\nconst char *s = S(__has_);\n", NULL, NULL, NULL}, /* a piece, no ## */
      {"?\?=include \"a.h\"\n", "-std=c++14", NULL, NULL},                 /* a trigraph # */
      {"// a comment ?\?/\n#include \"/abs.h\"\n", "-std=c++14", NULL, NULL}, /* a ??/ splice */
      {"#include \"a.h\"\n", NULL, "#include \"dir/b.h\"\n", NULL},
      {"int x;\n", "-DHI=__has_include(\"a.h\")", NULL, NULL},
      {"int x;\n", "-DX=1", NULL, NULL},
      /* What the lexer's raw-byte runs must read as the front end does: a block comment's
       * newline behind a splice does not end the line; a line comment runs on over a splice. */
      {"int a; /* x \\\n*/ #include \"/abs\"\n", NULL, NULL, NULL},
      {"int a; /* x \\\r\n*/ #include \"/abs\"\n", NULL, NULL, NULL},
      {"int a; /* x ?\?/\n*/ #include \"/abs\"\n", "-std=c++14", NULL, NULL},
      {"// x \\\r\n#include \"/abs\"\n", NULL, NULL, NULL},
      {"// x \\\n\\\n#include \"/abs\"\n", NULL, NULL, NULL},
      {"/* *\\\n *\\\n / __has_include(\"/x\") */ int a;\n", NULL, NULL, NULL},
      {"/*/ #include \"/abs\" */ int a;\n", NULL, NULL,
       NULL}, /* the opening's star closes nothing */
      {"/* *?\?/\n/ #include \"/abs\" */ int a;\n", NULL, NULL, NULL}, /* C++17: ??/ is no splice */
      {"/* ?\?/ #include \"/abs\" *?\?/ */ int a;\n", "-std=c++14", NULL, NULL},
      {"int a; /* x \\\r\r\n*/ #include \"/abs\"\n", NULL, NULL, NULL}, /* no line start */
      {"// x \\\r\r\n#include \"/abs\"\n", NULL, NULL, NULL},
      {"/* a *\\\r/ #include \"/abs\" */ int a;\n", NULL, NULL, NULL}, /* a lone CR: no splice */
      {"const char *s = \"a\\\"b #include \\\"/x\\\"\\\\\"; int a;\n", NULL, NULL, NULL},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Includes the key cannot see, each named with its text and line. */
static void test_refused(void **state) {
  (void)state;
  static const check_case cases[] = {
      {"#include \"/abs/x.h\"\n", NULL, NULL,
       "the source, line 1: #include \"/abs/x.h\" is an "
       "absolute path"},
      {"#include </abs/x.h>\n", NULL, NULL, "#include </abs/x.h> is an absolute path"},
      {"#include \"nothere.h\"\n", NULL, NULL, "#include \"nothere.h\" names no header"},
      {"#include \"./a.h\"\n", NULL, NULL, "names no header"}, /* names compare byte for byte */
      {"#define HDR \"a.h\"\n#include HDR\n", NULL, NULL, "line 2: #include has a macro operand"},
      {"#include_next </abs>\n", NULL, NULL, "#include_next </abs> is an absolute path"},
      {"#import \"/abs\"\n", NULL, NULL, "#import \"/abs\""},
      {"#embed \"/abs\"\n", NULL, NULL, "#embed \"/abs\""},
      /* Any string literal can become a pragma's operand (_Pragma(S), a raw string, a macro that
       * spells _Pragma), whose __has_include NVRTC evaluates: one that spells it is read. */
      {"const char *s = \"unroll 2 + __has_include(\\\"/x\\\")\";\n", NULL, NULL,
       "in a string literal, line 1: __has_include \"/x\" is an absolute path"},
      {"#define S \"unroll 2 + __has_include(\\\"/x\\\")\"\nvoid f() { _Pragma(S) }\n", NULL, NULL,
       "in a string literal, line 1: __has_include \"/x\""},
      {"void f() { _Pragma(R\"(unroll 2 + __has_include(\"/x\"))\") }\n", NULL, NULL,
       "in a string literal, line 1: __has_include \"/x\""},
      {"void f() { _Pragma(\"unroll 2 + __has_include(\\\"/x\\\")\") }\n", NULL, NULL,
       "in a string literal, line 1: __has_include \"/x\""},
      /* read as NVRTC reads it: through a splice; and a piece a paste in the pragma can join */
      {"#define S \"unroll 2 + __ha\\\ns_include(\\\"/x\\\")\"\nvoid f() { _Pragma(S) }\n", NULL,
       NULL, "in a string literal, line 1: __has_include \"/x\""},
      {"#define CAT(a, b) a##b\n#define S \"unroll 2 + CAT(__ha, s_include)(\\\"/x\\\")\"\n"
       "void f() { _Pragma(S) }\n",
       NULL, NULL, "in a string literal, line 1: \"__ha\" and a ##"},
      {"#if __has_include(\"/abs\")\n#endif\n", NULL, NULL,
       "__has_include \"/abs\" is an absolute"},
      {"#if __has_include_next(<nothere.h>)\n#endif\n", NULL, NULL,
       "__has_include_next <nothere.h> names no header"},
      {"#if __has_embed(\"/abs\")\n#endif\n", NULL, NULL, "__has_embed \"/abs\""},
      {"#define HI __has_include\n", NULL, NULL, "__has_include is not applied to a literal"},
      {"#define HI(x) __has_include(x)\n", NULL, NULL, "__has_include has a macro operand"},
      {"#inc\\\nlude \"/abs\"\n", NULL, NULL, "line 1: #include \"/abs\" is an absolute"},
      {"#include \"a\\\n.h\"\n", NULL, NULL, "written with a line splice"},
      {"%:include \"/abs\"\n", NULL, NULL, "absolute path"},
      {"# /* c */ include \"/abs\"\n", NULL, NULL, "absolute path"},
      {"/* a comment\n*/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"int a; \\\n\n#include \"/abs\"\n", NULL, NULL, "line 3: #include"},
      {"#include <a.h\n", NULL, NULL, "unterminated"},
      {"?\?=include \"/abs\"\n", "-std=c++14", NULL, "absolute path"},
      {"?\?=include \"/abs\"\n#include \"/abs2\"\n", NULL, NULL, "line 2"}, /* C++17: no trigraph */
      {"// a comment ?\?/\n#include \"/abs.h\"\n", NULL, NULL, "line 2"},
      {"__device__ const char *r = R\"x(\n#include \"/abs\"\n)x\";\n", "-std=c++03", NULL,
       "line 2: #include \"/abs\""}, /* no raw strings in C++03 */
      {"#if 0\n#include <cmath>\n#endif\n", NULL, NULL, "#include <cmath> names no header"},
      {"#include \"a.h\"\n", NULL, "int a;\n#include \"/abs\"\n",
       "header \"a.h\", line 2: #include \"/abs\""},
      {"int x;\n", "-DHI=__has_include(\"/abs\")", NULL, "the definition in option 0, line 1"},
      {"#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"/abs\")\n#endif\n", NULL, NULL,
       "\"__has_\" and a ## elsewhere could paste"},
      {"#define CAT(a, b) a %:%: b\nint _;\n", NULL, NULL, "\"_\" and a ##"},
      {"int __has_include_;\n", NULL, "#define P(a, b) a ## b\n", "\"__has_include_\" and a ##"},
      /* ...and where they must stop: a comment closed across a splice, a line comment's
       * backslash that is not a splice, an identifier or a string split by a splice, the lines
       * counted through comments. */
      {"/* a *\\\n/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"/* a **/ #include \"/abs\"\n", NULL, NULL, "line 1: #include \"/abs\""},
      {"/* a *\\\r\n/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"/* a *\\\n\\\r\n\\\n/ #include \"/abs\"\n", NULL, NULL, "line 4: #include \"/abs\""},
      {"/* a *?\?/\n/ #include \"/abs\"\n", "-std=c++14", NULL, "line 2: #include \"/abs\""},
      {"/* a *?\?/\r\n\\\n/ #include \"/abs\"\n", "-std=c++14", NULL, "line 3: #include"},
      {"/* a /* b *\n*/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      /* NVRTC folds a backslash, any run of CRs and an LF (a lone CR is no splice) */
      {"/* a *\\\r\r\n/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"/* a *?\?/\r\r\r\n/ #include \"/abs\"\n", "-std=c++14", NULL, "line 2: #include"},
      {"#if __has_incl\\\r\r\nude(\"/abs\")\n#endif\n", NULL, NULL,
       "line 1: __has_include \"/abs\" is an absolute"},
      {"#inc\\\r\r\nlude \"/abs\"\n", NULL, NULL, "line 1: #include \"/abs\" is an absolute"},
      {"int a; /* x \\\r\r\n*/ int b;\n#include \"/abs\"\n", NULL, NULL, "line 3: #include"},
      {"/* *\\\n*\\\n/ __has_include(\"/x\") */\n", NULL, NULL, "line 3: __has_include \"/x\""},
      {"// x \\ \n#include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"int a; /* x\r\n*/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"int a; /* x ?\?/\n*/ #include \"/abs\"\n", NULL, NULL, "line 2: #include \"/abs\""},
      {"/* one\ntwo\nthree *** */\n// four \\\nfive\nint x = __has_incl\\\nude(\"/abs\");\n", NULL,
       NULL, "line 6: __has_include \"/abs\" is an absolute"},
      {"const char *s = \"x\\\\\"; int y = __has_include(\"/abs\");\n", NULL, NULL,
       "line 1: __has_include \"/abs\""},
      {"const char *s = \"x\\\ny\"; int y = __has_include(\"/abs\");\n", NULL, NULL,
       "line 2: __has_include \"/abs\""},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Many headers are looked up sorted; the verdicts are the same. */
static void test_many_headers(void **state) {
  (void)state;
  enum { N = 40 };
  t4a_nvrtc_header h[N];
  char names[N][16];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "h%02d.h", N - 1 - i);
    h[i] = (t4a_nvrtc_header){names[i], "", 0, 0};
  }
  t4a_nvrtc_request r = test_add1_request();
  r.headers = h;
  r.num_headers = N;
  const char *ok = "#include \"h00.h\"\n#include <h39.h>\n#include \"h17.h\"\n";
  const char *bad = "#include \"h00.h\"\n#include \"h40.h\"\n";
  t4a_nvrtc_prepared p;
  r.source = ok;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, &r, &p), T4A_OK);
  assert_int_equal(t4a_nvrtc_check_cacheable(&p), T4A_OK);
  r.source = bad;
  assert_int_equal(t4a_nvrtc_prepare(g_lib, &r, &p), T4A_OK);
  assert_int_equal(t4a_nvrtc_check_cacheable(&p), T4A_INVALID_ARGUMENT);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "line 2: #include \"h40.h\" names no header"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accepted),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_many_headers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
