/* A fake NVRTC (see fake_nvrtc.h): host functions behind the NVRTC table. */
#define _GNU_SOURCE
#include "testing/fake_nvrtc/fake_nvrtc.h"

#include <ctype.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t4a_nvrtc/nvrtc_table.h"

enum { MAX_EXPRS = 64 };

struct _nvrtcProgram {
  char *src;
  char *ptx; /* after a successful compile */
  size_t ptx_bytes;
  char log[128];
  int compiled;
  size_t num_exprs;
  char *exprs[MAX_EXPRS];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *g_entry; /* injection: NULL any */
static int g_armed;
static long g_skip, g_count, g_injected, g_compiles, g_live;
static int g_result;
static unsigned g_delay_us;
static int g_major = 13, g_minor = 0; /* what nvrtcVersion reports (the latest open's) */
/* Serialises opens, so that each lib reads the version its own open set. */
static pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;

static nvrtcResult injected(const char *entry) {
  nvrtcResult r = NVRTC_SUCCESS;
  pthread_mutex_lock(&g_lock);
  if (g_armed && g_count > 0 && (g_entry == NULL || strcmp(g_entry, entry) == 0)) {
    if (g_skip > 0) {
      g_skip--;
    } else {
      g_count--;
      g_injected++;
      r = (nvrtcResult)g_result;
    }
  }
  pthread_mutex_unlock(&g_lock);
  return r;
}

#define INJECT(entry)                            \
  do {                                           \
    nvrtcResult r_ = injected(#entry);           \
    if (r_ != NVRTC_SUCCESS) return r_;          \
  } while (0)

void t4a_fake_nvrtc_inject(const char *entry, long skip, long count, int result) {
  pthread_mutex_lock(&g_lock);
  g_entry = entry;
  g_skip = skip;
  g_count = count;
  g_result = result;
  g_armed = 1;
  pthread_mutex_unlock(&g_lock);
}

void t4a_fake_nvrtc_clear_injections(void) {
  pthread_mutex_lock(&g_lock);
  g_armed = 0;
  g_count = 0;
  pthread_mutex_unlock(&g_lock);
}

static long read_count(const long *v) {
  pthread_mutex_lock(&g_lock);
  long n = *v;
  pthread_mutex_unlock(&g_lock);
  return n;
}
void t4a_fake_nvrtc_set_compile_delay(unsigned usec) {
  pthread_mutex_lock(&g_lock);
  g_delay_us = usec;
  pthread_mutex_unlock(&g_lock);
}

long t4a_fake_nvrtc_injected(void) { return read_count(&g_injected); }
long t4a_fake_nvrtc_compiles(void) { return read_count(&g_compiles); }
long t4a_fake_nvrtc_programs_live(void) { return read_count(&g_live); }

static const char *f_nvrtcGetErrorString(nvrtcResult r) {
  switch (r) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR (fake)";
  }
}

static nvrtcResult f_nvrtcVersion(int *major, int *minor) {
  INJECT(nvrtcVersion);
  if (major == NULL || minor == NULL) return NVRTC_ERROR_INVALID_INPUT;
  pthread_mutex_lock(&g_lock);
  *major = g_major;
  *minor = g_minor;
  pthread_mutex_unlock(&g_lock);
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                                        int num_headers, const char *const *headers,
                                        const char *const *include_names) {
  (void)name;
  (void)headers;
  (void)include_names;
  INJECT(nvrtcCreateProgram);
  if (prog == NULL || src == NULL || num_headers < 0) return NVRTC_ERROR_INVALID_INPUT;
  struct _nvrtcProgram *p = calloc(1, sizeof *p);
  if (p == NULL || (p->src = strdup(src)) == NULL) {
    free(p);
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g_lock);
  g_live++;
  pthread_mutex_unlock(&g_lock);
  *prog = p;
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcDestroyProgram(nvrtcProgram *prog) {
  if (prog == NULL || *prog == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  struct _nvrtcProgram *p = *prog;
  free(p->src);
  free(p->ptx);
  for (size_t i = 0; i < p->num_exprs; i++) free(p->exprs[i]);
  free(p);
  *prog = NULL;
  pthread_mutex_lock(&g_lock);
  g_live--;
  pthread_mutex_unlock(&g_lock);
  /* Injected after the destroy: nothing leaks, as with the real library's error paths. */
  INJECT(nvrtcDestroyProgram);
  return NVRTC_SUCCESS;
}

/* Appends to a growing buffer; 0 when out of memory. */
static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t c = (*cap ? *cap * 2 : 256);
    while (c < *len + n + 1) c *= 2;
    char *b = realloc(*buf, c);
    if (b == NULL) return 0;
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 1;
}

static nvrtcResult f_nvrtcCompileProgram(nvrtcProgram prog, int num_options,
                                         const char *const *options) {
  pthread_mutex_lock(&g_lock);
  g_compiles++;
  unsigned delay = g_delay_us;
  pthread_mutex_unlock(&g_lock);
  if (delay > 0) usleep(delay);
  INJECT(nvrtcCompileProgram);
  if (prog == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  if (num_options < 0 || (num_options > 0 && options == NULL)) return NVRTC_ERROR_INVALID_INPUT;
  if (strstr(prog->src, "#error") != NULL) {
    snprintf(prog->log, sizeof prog->log, "fake.cu(1): error: #error directive\n");
    return NVRTC_ERROR_COMPILATION;
  }
  const char *target = "sm_90";
  for (int i = 0; i < num_options; i++) {
    if (options[i] != NULL && strncmp(options[i], "--gpu-architecture=", 19) == 0) {
      target = options[i] + 19;
    } else if (options[i] != NULL && strncmp(options[i], "-arch=", 6) == 0) {
      target = options[i] + 6;
    }
  }
  char *out = NULL;
  size_t len = 0, cap = 0;
  char head[160];
  int n = snprintf(head, sizeof head, "//\n// fake NVRTC\n//\n.version 8.0\n.target %.64s\n"
                   ".address_size 64\n\n", target);
  int ok = append(&out, &len, &cap, head, (size_t)n);
  static const char key[] = "__global__ void ";
  for (const char *s = strstr(prog->src, key); ok && s != NULL; s = strstr(s, key)) {
    s += sizeof key - 1;
    while (*s == ' ') s++;
    size_t k = 0;
    while (isalnum((unsigned char)s[k]) || s[k] == '_') k++;
    if (k == 0) continue;
    ok = append(&out, &len, &cap, ".visible .entry ", 16) && append(&out, &len, &cap, s, k) &&
         append(&out, &len, &cap, "()\n{\n  ret;\n}\n", 14);
  }
  if (!ok) {
    free(out);
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  free(prog->ptx);
  prog->ptx = out;
  prog->ptx_bytes = len + 1;
  prog->compiled = 1;
  prog->log[0] = '\0';
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) {
  INJECT(nvrtcGetPTXSize);
  if (prog == NULL || size == NULL) return NVRTC_ERROR_INVALID_INPUT;
  if (!prog->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = prog->ptx_bytes;
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcGetPTX(nvrtcProgram prog, char *ptx) {
  INJECT(nvrtcGetPTX);
  if (prog == NULL || ptx == NULL) return NVRTC_ERROR_INVALID_INPUT;
  if (!prog->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
  memcpy(ptx, prog->ptx, prog->ptx_bytes);
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  INJECT(nvrtcGetProgramLogSize);
  if (prog == NULL || size == NULL) return NVRTC_ERROR_INVALID_INPUT;
  *size = strlen(prog->log) + 1;
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  INJECT(nvrtcGetProgramLog);
  if (prog == NULL || log == NULL) return NVRTC_ERROR_INVALID_INPUT;
  memcpy(log, prog->log, strlen(prog->log) + 1);
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcAddNameExpression(nvrtcProgram prog, const char *expr) {
  INJECT(nvrtcAddNameExpression);
  if (prog == NULL || expr == NULL) return NVRTC_ERROR_INVALID_INPUT;
  if (prog->compiled) return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
  if (prog->num_exprs == MAX_EXPRS) return NVRTC_ERROR_OUT_OF_MEMORY;
  char *copy = strdup(expr);
  if (copy == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
  prog->exprs[prog->num_exprs++] = copy;
  return NVRTC_SUCCESS;
}

static nvrtcResult f_nvrtcGetLoweredName(nvrtcProgram prog, const char *expr,
                                         const char **lowered) {
  INJECT(nvrtcGetLoweredName);
  if (prog == NULL || expr == NULL || lowered == NULL) return NVRTC_ERROR_INVALID_INPUT;
  if (!prog->compiled) return NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION;
  for (size_t i = 0; i < prog->num_exprs; i++) {
    if (strcmp(prog->exprs[i], expr) == 0) {
      *lowered = prog->exprs[i][0] == '&' ? prog->exprs[i] + 1 : prog->exprs[i];
      return NVRTC_SUCCESS;
    }
  }
  return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}

t4a_status t4a_fake_nvrtc_open(t4a_nvrtc_lib **out) {
  return t4a_fake_nvrtc_open_as(13, 0, "fake-nvrtc-13.0", out);
}

t4a_status t4a_fake_nvrtc_open_as(int major, int minor, const char *build_identity,
                                  t4a_nvrtc_lib **out) {
  char fallback[64];
  if (build_identity == NULL) {
    snprintf(fallback, sizeof fallback, "fake-nvrtc-%d.%d", major, minor);
    build_identity = fallback;
  }
  t4a_nvrtc_table t;
  memset(&t, 0, sizeof t);
  t.nvrtcGetErrorString = f_nvrtcGetErrorString;
  t.nvrtcVersion = f_nvrtcVersion;
  t.nvrtcCreateProgram = f_nvrtcCreateProgram;
  t.nvrtcDestroyProgram = f_nvrtcDestroyProgram;
  t.nvrtcCompileProgram = f_nvrtcCompileProgram;
  t.nvrtcGetPTXSize = f_nvrtcGetPTXSize;
  t.nvrtcGetPTX = f_nvrtcGetPTX;
  t.nvrtcGetProgramLogSize = f_nvrtcGetProgramLogSize;
  t.nvrtcGetProgramLog = f_nvrtcGetProgramLog;
  t.nvrtcAddNameExpression = f_nvrtcAddNameExpression;
  t.nvrtcGetLoweredName = f_nvrtcGetLoweredName;
  pthread_mutex_lock(&g_open_lock);
  pthread_mutex_lock(&g_lock);
  g_major = major;
  g_minor = minor;
  pthread_mutex_unlock(&g_lock);
  t4a_status st = t4a_nvrtc_lib_create_from_table(&t, "fake NVRTC", build_identity, out);
  pthread_mutex_unlock(&g_open_lock);
  return st;
}
