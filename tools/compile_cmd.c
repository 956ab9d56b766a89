/* `t4a compile`: see compile_cmd.h. */
#define _GNU_SOURCE
#include "tools/compile_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t4a/counters.h"
#include "t4a/jitlink.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "tools/progress.h"

#define EXIT_COMPILE 1
#define EXIT_USAGE 2

static const char k_usage[] =
    "usage: t4a compile FILE.cu --arch ARCH [--ptx | --cubin | --ltoir] [-o OUT] [--cache DIR]\n"
    "                   [--header NAME=PATH]... [-I DIR]... [--no-toolkit] [--name-expr EXPR]...\n"
    "                   [--repeat N] [--strict-cache]\n"
    "                   [NVRTC options: -DNAME=VALUE, --std=c++17, ...]\n"
    "       t4a compile FILE.cu LIB.cu... --arch ARCH -dlto [-Xnvlink OPT]... [-o OUT] [--cache "
    "DIR]\n";

static const char k_help[] =
    "  Compiles one CUDA C++ source with NVRTC through t4a's artifact cache and says where the\n"
    "  artifact came from (compiled, memory, disk, uncached), its kind, target, size and cache\n"
    "  key, and the cache's counters. Output kind: CUBIN for sm_NN, PTX for compute_NN, unless\n"
    "  given.\n"
    "  --arch ARCH        sm_90, compute_90, sm_90a, ... (required)\n"
    "  -o OUT             write the artifact there (PTX without its NUL)\n"
    "  --cache DIR        a disk cache (shared by processes): a second run is a disk hit\n"
    "  --header NAME=PATH a named header for #include \"NAME\" (repeatable)\n"
    "  -I DIR, -IDIR      an include root, searched in order before the toolkit's (repeatable);\n"
    "                     the cache key covers the content of every file under it\n"
    "  --no-toolkit       no default include roots (else the CUDA toolkit's include and\n"
    "                     include/cccl, from T4A_CUDA_PATH, CUDA_PATH, /usr/local/cuda or\n"
    "                     beside libnvrtc); the roots used and how each was fingerprinted print\n"
    "  --name-expr EXPR   a name expression (e.g. k<int>) whose lowered name is printed\n"
    "  --repeat N         compile N times through the cache (the first compiles, then hits)\n"
    "  --strict-cache     refuse (exit 2) a source whose includes the cache key cannot see (a\n"
    "                     computed include, a paste that could make __has_include); without it\n"
    "                     such a source is compiled uncached (\"artifact: uncached\", and why)\n"
    "  -dlto              device link-time optimisation, as nvcc: each FILE.cu is compiled to\n"
    "                     LTO-IR (-rdc=true added unless -rdc or -dc is given), then nvJitLink\n"
    "                     links them, in order, into a CUBIN for sm_NN (through a link cache;\n"
    "                     --cache DIR holds its entries too)\n"
    "  -Xnvlink OPT       an nvJitLink option (-O3, -maxrregcount=N, ...; repeatable)\n"
    "  Any other argument starting with '-' goes to NVRTC, in order.\n"
    "  A compile that runs longer than a second prints a progress line on stderr every second\n"
    "  (T4A_PROGRESS_MS=N: every N ms, 0: none).\n"
    "  Exit: 0 compiled (or hit), 1 compile error (the log is printed on stderr) or an NVRTC,\n"
    "  cache or output-file failure, 2 bad usage (unknown or missing arguments, an unreadable\n"
    "  input, an option NVRTC or the cache rejects, an unsupported architecture).\n";

/* Why an uncached artifact was not cached (the include check's refusal). */
static void print_uncached(const t4a_nvrtc_outcome *outcome) {
  if (outcome->origin == T4A_NVRTC_ORIGIN_UNCACHED) {
    printf("not cached: %s\n", outcome->uncached_why != NULL ? outcome->uncached_why : "?");
  }
}

static int usage(const char *fmt, const char *arg) {
  fprintf(stderr, "t4a compile: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", k_usage);
  return EXIT_USAGE;
}

/* Reads a whole file into a NUL-terminated heap buffer; NULL with errno on failure. */
static char *read_file(const char *path, size_t *out_bytes) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
    if (n + 1 == cap) {
      char *grown = realloc(buf, cap * 2);
      if (grown == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  int err = ferror(f) ? EIO : 0;
  fclose(f);
  if (buf == NULL || err) {
    free(buf);
    errno = err ? err : ENOMEM;
    return NULL;
  }
  buf[n] = '\0';
  *out_bytes = n;
  return buf;
}

static void print_failure(const char *what) {
  t4a_error e;
  char buf[600];
  t4a_error_last(&e);
  fprintf(stderr, "t4a compile: %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
}

static void print_counters(const t4a_nvrtc_cache *cache) {
  struct t4a_nvrtc_cache_stats s;
  t4a_nvrtc_cache_stats(cache, &s);
  for (int id = 0; id < T4A_COUNTER_COUNT; id++) {
    const char *name = t4a_counter_name((t4a_counter_id)id);
    if (name == NULL || strncmp(name, "nvrtc_", 6) != 0) continue;
    printf("counter %s = %llu\n", name,
           (unsigned long long)t4a_counter_value(&s.counters, (t4a_counter_id)id));
  }
}

static int write_output(const char *path, const t4a_nvrtc_artifact *art) {
  size_t n = 0;
  const char *data = t4a_nvrtc_artifact_data(art, &n);
  if (t4a_nvrtc_artifact_output(art) == T4A_NVRTC_OUTPUT_PTX && n > 0) n--; /* the text only */
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, n, f) != n) {
    fprintf(stderr, "t4a compile: cannot write %s: %s\n", path, strerror(errno));
    if (f != NULL) fclose(f);
    return EXIT_COMPILE;
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "t4a compile: cannot write %s: %s\n", path, strerror(errno));
    return EXIT_COMPILE;
  }
  printf("wrote: %s (%zu bytes)\n", path, n);
  return 0;
}

/* NVRTC flags whose value may come as the next argument ("-I dir", "-D NAME=1"). */
static int nvrtc_flag_takes_value(const char *s) {
  static const char *const flags[] = {"-I",
                                      "-D",
                                      "-U",
                                      "-include",
                                      "--include-path",
                                      "--pre-include",
                                      "--define-macro",
                                      "--undefine-macro",
                                      "-arch",
                                      "--gpu-architecture"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (strcmp(s, flags[i]) == 0) return 1;
  }
  return 0;
}

typedef struct compile_args {
  const char *file, *arch, *out, *cache_dir;
  const char **files; /* every source file (file is the first); more than one needs -dlto */
  size_t num_files;
  int dlto, rdc_given;
  const char **link_options; /* -Xnvlink values */
  size_t num_link_options;
  int output; /* -1: by architecture */
  long repeat;
  const char **options;
  size_t num_options;
  t4a_nvrtc_header *headers;
  char **header_texts;
  size_t num_headers;
  const char **exprs;
  size_t num_exprs;
  const char **roots;
  size_t num_roots;
  int no_toolkit;
  int strict_cache;
} compile_args;

static int parse(int argc, char **argv, compile_args *a) {
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 0;
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      printf("%s%s", k_usage, k_help);
      return -1; /* done: exit 0 */
    }
    if (strcmp(s, "--arch") == 0 || strcmp(s, "-o") == 0 || strcmp(s, "--cache") == 0 ||
        strcmp(s, "--header") == 0 || strcmp(s, "--name-expr") == 0 || strcmp(s, "--repeat") == 0 ||
        strcmp(s, "-Xnvlink") == 0) {
      if (next == NULL) return usage("%s needs a value", s);
      takes = 1;
    }
    if (strcmp(s, "-dlto") == 0 || strcmp(s, "--dlink-time-opt") == 0) {
      a->dlto = 1; /* not NVRTC's: each source becomes LTO-IR, then nvJitLink links them */
    } else if (strcmp(s, "-Xnvlink") == 0) {
      a->link_options[a->num_link_options++] = next;
    } else if (strcmp(s, "--arch") == 0) {
      a->arch = next;
    } else if (strcmp(s, "-o") == 0) {
      a->out = next;
    } else if (strcmp(s, "--cache") == 0) {
      a->cache_dir = next;
    } else if (strcmp(s, "--repeat") == 0) {
      char *end = NULL;
      a->repeat = strtol(next, &end, 10);
      if (end == next || *end != '\0' || a->repeat < 1 || a->repeat > 1000000) {
        return usage("--repeat wants a count from 1 to 1000000, not \"%s\"", next);
      }
    } else if (strcmp(s, "--name-expr") == 0) {
      a->exprs[a->num_exprs++] = next;
    } else if (strcmp(s, "--header") == 0) {
      const char *eq = strchr(next, '=');
      if (eq == NULL || eq == next || eq[1] == '\0') {
        return usage("--header wants NAME=PATH, not \"%s\"", next);
      }
      size_t bytes = 0;
      char *text = read_file(eq + 1, &bytes);
      if (text == NULL) {
        fprintf(stderr, "t4a compile: cannot read header %s: %s\n", eq + 1, strerror(errno));
        return EXIT_USAGE;
      }
      a->header_texts[a->num_headers] = text;
      a->headers[a->num_headers].name = next;
      a->headers[a->num_headers].name_bytes = (size_t)(eq - next);
      a->headers[a->num_headers].content = text;
      /* The bytes read, not strlen: a NUL in the file is refused by validation instead of
       * silently cutting the header there. (An empty file reads as "", which 0 also means.) */
      a->headers[a->num_headers].content_bytes = bytes;
      a->num_headers++;
    } else if (strcmp(s, "-I") == 0 || strcmp(s, "--include-path") == 0) {
      if (next == NULL) return usage("%s needs a directory", s);
      a->roots[a->num_roots++] = next;
      i++;
    } else if (strncmp(s, "-I", 2) == 0 || strncmp(s, "--include-path=", 15) == 0) {
      const char *dir = s[1] == 'I' ? s + 2 : s + 15;
      if (dir[0] == '\0') return usage("%s needs a directory", s);
      a->roots[a->num_roots++] = dir;
    } else if (strcmp(s, "--no-toolkit") == 0) {
      a->no_toolkit = 1;
    } else if (strcmp(s, "--strict-cache") == 0) {
      a->strict_cache = 1;
    } else if (strcmp(s, "--ptx") == 0 || strcmp(s, "--cubin") == 0 || strcmp(s, "--ltoir") == 0) {
      int kind = s[2] == 'p'   ? T4A_NVRTC_OUTPUT_PTX
                 : s[2] == 'c' ? T4A_NVRTC_OUTPUT_CUBIN
                               : T4A_NVRTC_OUTPUT_LTOIR;
      if (a->output >= 0 && a->output != kind) return usage("%s conflicts with another kind", s);
      a->output = kind;
    } else if (s[0] == '-' && s[1] != '\0') {
      if (strncmp(s, "-rdc", 4) == 0 || strncmp(s, "--relocatable-device-code", 25) == 0 ||
          strcmp(s, "-dc") == 0 || strcmp(s, "--device-c") == 0) {
        a->rdc_given = 1;
      }
      a->options[a->num_options++] = s; /* for NVRTC, in order */
      if (nvrtc_flag_takes_value(s)) {
        if (next == NULL) return usage("%s needs a value", s);
        a->options[a->num_options++] = next;
        i++;
      }
    } else {
      if (a->file == NULL) a->file = s;
      a->files[a->num_files++] = s;
    }
    i += takes;
  }
  if (a->file == NULL) return usage("%s", "no source file");
  if (a->num_files > 1 && !a->dlto) {
    return usage("one source file only, unless -dlto links several (also got \"%s\")",
                 a->files[1]);
  }
  if (a->dlto) {
    if (a->output >= 0 && a->output != T4A_NVRTC_OUTPUT_CUBIN) {
      return usage("%s", "-dlto links into a CUBIN: --ptx and --ltoir do not apply");
    }
    if (a->num_exprs > 0 || a->repeat > 1) {
      return usage("%s", "--name-expr and --repeat are for one source without -dlto");
    }
  } else if (a->num_link_options > 0) {
    return usage("%s", "-Xnvlink needs -dlto");
  }
  if (a->arch == NULL) return usage("%s", "--arch is required (for example --arch sm_90)");
  if (a->output < 0) {
    a->output =
        strncmp(a->arch, "compute_", 8) == 0 ? T4A_NVRTC_OUTPUT_PTX : T4A_NVRTC_OUTPUT_CUBIN;
  }
  return 0;
}

/* Maps a failed compile to the exit code, printing what the user needs. */
static int report_failure(t4a_status st, const t4a_nvrtc_outcome *o) {
  if (o->log != NULL && o->log_bytes > 0) {
    fputs(o->log, stderr);
    if (o->log[o->log_bytes - 1] != '\n') fputc('\n', stderr);
  }
  print_failure(st == T4A_COMPILE_FAILED ? "compile error" : "failed");
  if (st == T4A_INVALID_ARGUMENT || st == T4A_UNSUPPORTED || st == T4A_LIMIT_EXCEEDED) {
    return EXIT_USAGE;
  }
  return EXIT_COMPILE;
}

static void print_link_counters(const t4a_jitlink_cache *cache) {
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(cache, &s);
  for (int id = 0; id < T4A_COUNTER_COUNT; id++) {
    const char *name = t4a_counter_name((t4a_counter_id)id);
    if (name == NULL || strncmp(name, "jitlink_", 8) != 0) continue;
    printf("counter %s = %llu\n", name,
           (unsigned long long)t4a_counter_value(&s.counters, (t4a_counter_id)id));
  }
}

/* -dlto: every source to LTO-IR through the artifact cache, then one link through the link
 * cache (both on --cache DIR when given). */
static int compile_and_link(const compile_args *a) {
  int rc = 0;
  t4a_nvrtc_lib *lib = NULL;
  t4a_nvrtc_cache *cache = NULL;
  t4a_jitlink_lib *jl = NULL;
  t4a_jitlink_cache *links = NULL;
  t4a_nvrtc_outcome outcome = T4A_NVRTC_OUTCOME_INIT;
  t4a_nvrtc_artifact **inputs = calloc(a->num_files, sizeof *inputs);
  char **sources = calloc(a->num_files, sizeof *sources);
  const char **options = calloc(a->num_options + 1, sizeof *options);
  t4a_nvrtc_artifact *linked = NULL;
  t4a_status st;
  if (inputs == NULL || sources == NULL || options == NULL) {
    fprintf(stderr, "t4a compile: out of memory\n");
    rc = EXIT_COMPILE;
    goto done;
  }
  for (size_t i = 0; i < a->num_options; i++) options[i] = a->options[i];
  size_t num_options = a->num_options;
  if (!a->rdc_given) options[num_options++] = "-rdc=true";
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) {
    print_failure("NVRTC");
    rc = EXIT_COMPILE;
    goto done;
  }
  t4a_nvrtc_cache_options co = T4A_NVRTC_CACHE_OPTIONS_INIT;
  co.disk_dir = a->cache_dir;
  co.compile_uncacheable = !a->strict_cache;
  if ((st = t4a_nvrtc_cache_create(lib, &co, &cache)) != T4A_OK) {
    print_failure("cache");
    rc = st == T4A_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_COMPILE;
    goto done;
  }
  for (size_t i = 0; i < a->num_files; i++) {
    size_t bytes = 0;
    sources[i] = read_file(a->files[i], &bytes);
    if (sources[i] == NULL) {
      fprintf(stderr, "t4a compile: cannot read %s: %s\n", a->files[i], strerror(errno));
      rc = EXIT_USAGE;
      goto done;
    }
    const char *base = strrchr(a->files[i], '/');
    t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
    r.program_name = base != NULL ? base + 1 : a->files[i];
    r.source = sources[i];
    r.source_bytes = bytes;
    r.headers = a->headers;
    r.num_headers = a->num_headers;
    r.options = options;
    r.num_options = num_options;
    r.include_roots = a->roots;
    r.num_include_roots = a->num_roots;
    r.target = a->arch;
    r.output = T4A_NVRTC_OUTPUT_LTOIR;
    st = t4a_nvrtc_cache_compile(cache, &r, &inputs[i], &outcome);
    if (st != T4A_OK) {
      rc = report_failure(st, &outcome);
      goto done;
    }
    size_t n = 0;
    (void)t4a_nvrtc_artifact_data(inputs[i], &n);
    printf("artifact: %s (%s: lto-ir, %zu bytes, key %s)\n",
           t4a_nvrtc_origin_name(outcome.origin), r.program_name, n,
           t4a_nvrtc_artifact_key_hex(inputs[i]));
    print_uncached(&outcome);
  }
  if (t4a_jitlink_lib_open(NULL, &jl) != T4A_OK) {
    print_failure("nvJitLink");
    rc = EXIT_COMPILE;
    goto done;
  }
  t4a_jitlink_cache_options lo = T4A_JITLINK_CACHE_OPTIONS_INIT;
  lo.disk_dir = a->cache_dir;
  if ((st = t4a_jitlink_cache_create(jl, &lo, &links)) != T4A_OK) {
    print_failure("link cache");
    rc = EXIT_COMPILE;
    goto done;
  }
  t4a_jitlink_request lr = T4A_JITLINK_REQUEST_INIT;
  lr.inputs = (const t4a_nvrtc_artifact *const *)inputs;
  lr.num_inputs = a->num_files;
  lr.options = a->link_options;
  lr.num_options = a->num_link_options;
  st = t4a_jitlink_cache_link(links, &lr, &linked, &outcome);
  if (st != T4A_OK) {
    if (outcome.log != NULL && outcome.log_bytes > 0) {
      fputs(outcome.log, stderr);
      if (outcome.log[outcome.log_bytes - 1] != '\n') fputc('\n', stderr);
    }
    print_failure(st == T4A_LINK_FAILED ? "link error" : "link failed");
    rc = st == T4A_INVALID_ARGUMENT || st == T4A_UNSUPPORTED || st == T4A_LIMIT_EXCEEDED
             ? EXIT_USAGE
             : EXIT_COMPILE;
    goto done;
  }
  size_t bytes = 0;
  int major = 0, minor = 0;
  (void)t4a_nvrtc_artifact_data(linked, &bytes);
  t4a_jitlink_lib_version(jl, &major, &minor);
  printf("link: %s\n", t4a_nvrtc_origin_name(outcome.origin));
  printf("output: cubin for %s, %zu bytes, key %s\n", t4a_nvrtc_artifact_target(linked), bytes,
         t4a_nvrtc_artifact_key_hex(linked));
  printf("nvjitlink: %d.%d (%s)\n", major, minor, t4a_jitlink_lib_origin(jl));
  size_t log_bytes = 0;
  const char *log = t4a_nvrtc_artifact_log(linked, &log_bytes);
  if (log_bytes > 0) fprintf(stderr, "%s", log);
  if (a->out != NULL) rc = write_output(a->out, linked);
  print_counters(cache);
  print_link_counters(links);
done:
  fflush(stdout);
  t4a_nvrtc_artifact_release(linked);
  for (size_t i = 0; inputs != NULL && i < a->num_files; i++) {
    t4a_nvrtc_artifact_release(inputs[i]);
  }
  for (size_t i = 0; sources != NULL && i < a->num_files; i++) free(sources[i]);
  t4a_nvrtc_outcome_deinit(&outcome);
  t4a_jitlink_cache_destroy(links);
  t4a_jitlink_lib_release(jl);
  t4a_nvrtc_cache_destroy(cache);
  t4a_nvrtc_lib_release(lib);
  free(inputs);
  free(sources);
  free(options);
  return rc;
}

int t4a_cmd_compile(int argc, char **argv) {
  if (argc < 0) argc = 0;
  size_t slots = (size_t)argc + 1;
  compile_args a;
  memset(&a, 0, sizeof a);
  a.output = -1;
  a.repeat = 1;
  a.options = calloc(slots, sizeof *a.options);
  a.headers = calloc(slots, sizeof *a.headers);
  a.header_texts = calloc(slots, sizeof *a.header_texts);
  a.exprs = calloc(slots, sizeof *a.exprs);
  a.files = calloc(slots, sizeof *a.files);
  a.link_options = calloc(slots, sizeof *a.link_options);
  a.roots = calloc(slots + 2, sizeof *a.roots);
  char *source = NULL;
  t4a_nvrtc_lib *lib = NULL;
  t4a_nvrtc_cache *cache = NULL;
  t4a_nvrtc_outcome outcome = T4A_NVRTC_OUTCOME_INIT;
  int rc = 0;
  if (a.options == NULL || a.headers == NULL || a.header_texts == NULL || a.exprs == NULL ||
      a.files == NULL || a.link_options == NULL || a.roots == NULL) {
    fprintf(stderr, "t4a compile: out of memory\n");
    rc = EXIT_COMPILE;
    goto done;
  }
  if ((rc = parse(argc, argv, &a)) != 0) {
    if (rc < 0) rc = 0; /* --help */
    goto done;
  }
  if (a.dlto) {
    /* Each source's include roots: -I's, then the toolkit's (as below). */
    t4a_nvrtc_toolkit dtk;
    if (!a.no_toolkit && t4a_nvrtc_toolkit_find(NULL, &dtk) == T4A_OK) {
      for (size_t i = 0; i < dtk.num_roots; i++) a.roots[a.num_roots++] = dtk.roots[i];
    }
    rc = compile_and_link(&a);
    goto done;
  }
  size_t source_bytes = 0;
  source = read_file(a.file, &source_bytes);
  if (source == NULL) {
    fprintf(stderr, "t4a compile: cannot read %s: %s\n", a.file, strerror(errno));
    rc = EXIT_USAGE;
    goto done;
  }
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) {
    print_failure("NVRTC");
    rc = EXIT_COMPILE;
    goto done;
  }
  t4a_nvrtc_cache_options co = T4A_NVRTC_CACHE_OPTIONS_INIT;
  co.disk_dir = a.cache_dir;
  co.compile_uncacheable = !a.strict_cache;
  t4a_status st = t4a_nvrtc_cache_create(lib, &co, &cache);
  if (st != T4A_OK) {
    print_failure("cache");
    rc = st == T4A_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_COMPILE;
    goto done;
  }
  const char *base = strrchr(a.file, '/');
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = base != NULL ? base + 1 : a.file;
  r.source = source;
  r.source_bytes = source_bytes;
  r.headers = a.headers;
  r.num_headers = a.num_headers;
  r.options = a.options;
  r.num_options = a.num_options;
  r.target = a.arch;
  r.output = (t4a_nvrtc_output)a.output;
  r.name_expressions = a.exprs;
  r.num_name_expressions = a.num_exprs;
  /* Include roots: -I's, then the toolkit's. What the includes reach through each is resolved
   * here first (the paths NVRTC would open, probed as a miss does; no tree is walked), so that
   * the output says what the key covers and what it cost. A refusal is left to the compile
   * below, which reports it. */
  t4a_nvrtc_toolkit tk;
  memset(&tk, 0, sizeof tk);
  t4a_status tk_st = T4A_UNSUPPORTED;
  if (!a.no_toolkit) {
    tk_st = t4a_nvrtc_toolkit_find(t4a_nvrtc_lib_origin(lib), &tk);
    if (tk_st == T4A_OK) {
      printf("toolkit: %s (%s)\n", tk.include, tk.from);
      for (size_t i = 0; i < tk.num_roots; i++) a.roots[a.num_roots++] = tk.roots[i];
    } else {
      printf("toolkit: none found (looked in %s)\n", tk.looked);
    }
  }
  r.include_roots = a.roots;
  r.num_include_roots = a.num_roots;
  if (a.num_roots > 0) {
    t4a_nvrtc_root_reach total, *per = calloc(a.num_roots, sizeof *per);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = per != NULL ? t4a_nvrtc_includes_resolve(lib, &r, per, &total) : T4A_HOST_OUT_OF_MEMORY;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    for (size_t i = 0; st == T4A_OK && i < a.num_roots; i++) {
      printf("root %zu: %s: %llu files reached, %llu bytes, %llu paths that opened nothing\n",
             i + 1, a.roots[i], (unsigned long long)per[i].files,
             (unsigned long long)per[i].bytes, (unsigned long long)per[i].empty);
    }
    if (st == T4A_OK) {
      printf("includes: %llu files, %llu bytes, %llu empty paths (probed in %.2f ms)\n",
             (unsigned long long)total.files, (unsigned long long)total.bytes,
             (unsigned long long)total.empty, ms);
    }
    free(per);
  }

  t4a_nvrtc_artifact *art = NULL;
  char label[200];
  snprintf(label, sizeof label, "compile %s for %s", r.program_name, a.arch);
  tool_progress progress; /* quiet unless a compile takes longer than the interval */
  (void)tool_progress_start(&progress, stderr, tool_progress_interval(), label,
                            a.repeat > 1 ? (uint64_t)a.repeat : 0);
  for (long i = 0; i < a.repeat; i++) {
    t4a_nvrtc_artifact_release(art);
    art = NULL;
    if (a.repeat > 1) tool_progress_set(&progress, NULL, (uint64_t)i, (uint64_t)a.repeat);
    st = t4a_nvrtc_cache_compile(cache, &r, &art, &outcome);
    if (st != T4A_OK) {
      tool_progress_stop(&progress);
      rc = report_failure(st, &outcome);
      if (st == T4A_INVALID_ARGUMENT && !a.no_toolkit && tk_st != T4A_OK) {
        fprintf(stderr, "t4a compile: no CUDA toolkit for the default include roots (looked in %s)\n",
                tk.looked);
      }
      goto done;
    }
    printf("artifact: %s\n", t4a_nvrtc_origin_name(outcome.origin));
    print_uncached(&outcome);
  }
  tool_progress_stop(&progress);
  size_t bytes = 0;
  int major = 0, minor = 0;
  (void)t4a_nvrtc_artifact_data(art, &bytes);
  t4a_nvrtc_artifact_compiler_version(art, &major, &minor);
  printf("output: %s for %s, %zu bytes, key %s\n",
         t4a_nvrtc_output_name(t4a_nvrtc_artifact_output(art)), t4a_nvrtc_artifact_target(art),
         bytes, t4a_nvrtc_artifact_key_hex(art));
  printf("nvrtc: %d.%d (%s)\n", major, minor, t4a_nvrtc_lib_origin(lib));
  for (size_t i = 0; i < t4a_nvrtc_artifact_num_lowered_names(art); i++) {
    const char *e = NULL, *l = NULL;
    if (t4a_nvrtc_artifact_lowered_name_at(art, i, &e, &l) == T4A_OK) {
      printf("lowered: %s -> %s\n", e, l);
    }
  }
  size_t log_bytes = 0;
  const char *log = t4a_nvrtc_artifact_log(art, &log_bytes);
  if (log_bytes > 0) fprintf(stderr, "%s", log); /* warnings */
  if (a.out != NULL) rc = write_output(a.out, art);
  print_counters(cache);
  t4a_nvrtc_artifact_release(art);
done:
  fflush(stdout);
  t4a_nvrtc_outcome_deinit(&outcome);
  t4a_nvrtc_cache_destroy(cache);
  t4a_nvrtc_lib_release(lib);
  free(source);
  for (size_t i = 0; a.header_texts != NULL && i < a.num_headers; i++) free(a.header_texts[i]);
  free(a.options);
  free(a.headers);
  free(a.header_texts);
  free(a.exprs);
  free(a.files);
  free(a.link_options);
  free(a.roots);
  return rc;
}
