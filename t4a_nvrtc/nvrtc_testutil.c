/* Test support: the wrapped NVRTC table, the fault plan, temporary directories, kernels. */
#define _GNU_SOURCE
#include "t4a_nvrtc/nvrtc_testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t4a_nvrtc/nvrtc_table.h"
/* Linked into every t4a_nvrtc test binary exactly once. */
#include "testing/lsan/nvrtc_suppressions.h"

nvrtc_wrap_state g_nvrtc_wrap = {.fail_at = -1};
static t4a_nvrtc_lib *g_real;

static int wrap_fail(const char *entry) {
  long i = atomic_fetch_add(&g_nvrtc_wrap.calls, 1);
  if (i == g_nvrtc_wrap.fail_at) {
    g_nvrtc_wrap.failed_entry = entry;
    return 1;
  }
  return 0;
}

#define FAIL_IF(entry) \
  if (wrap_fail(#entry)) return (nvrtcResult)g_nvrtc_wrap.fail_code

static nvrtcResult w_nvrtcVersion(int *major, int *minor) {
  FAIL_IF(nvrtcVersion);
  return g_real->t.nvrtcVersion(major, minor);
}

static nvrtcResult w_nvrtcGetNumSupportedArchs(int *n) {
  FAIL_IF(nvrtcGetNumSupportedArchs);
  return g_real->t.nvrtcGetNumSupportedArchs(n);
}

static nvrtcResult w_nvrtcGetSupportedArchs(int *archs) {
  FAIL_IF(nvrtcGetSupportedArchs);
  return g_real->t.nvrtcGetSupportedArchs(archs);
}

static nvrtcResult w_nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                                        int num_headers, const char *const *headers,
                                        const char *const *include_names) {
  FAIL_IF(nvrtcCreateProgram);
  nvrtcResult r =
      g_real->t.nvrtcCreateProgram(prog, src, name, num_headers, headers, include_names);
  if (r == NVRTC_SUCCESS) atomic_fetch_add(&g_nvrtc_wrap.programs_live, 1);
  return r;
}

static nvrtcResult w_nvrtcDestroyProgram(nvrtcProgram *prog) {
  int fail = wrap_fail("nvrtcDestroyProgram");
  nvrtcResult r = g_real->t.nvrtcDestroyProgram(prog);
  if (r == NVRTC_SUCCESS) atomic_fetch_sub(&g_nvrtc_wrap.programs_live, 1);
  return fail ? (nvrtcResult)g_nvrtc_wrap.fail_code : r;
}

static nvrtcResult w_nvrtcCompileProgram(nvrtcProgram prog, int n, const char *const *options) {
  FAIL_IF(nvrtcCompileProgram);
  atomic_fetch_add(&g_nvrtc_wrap.compiles, 1);
  if (g_nvrtc_wrap.on_compile != NULL) g_nvrtc_wrap.on_compile(g_nvrtc_wrap.on_compile_user);
  nvrtcResult res = g_real->t.nvrtcCompileProgram(prog, n, options);
  if (g_nvrtc_wrap.on_compiled != NULL) g_nvrtc_wrap.on_compiled(g_nvrtc_wrap.on_compile_user);
  return res;
}

static nvrtcResult w_nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) {
  FAIL_IF(nvrtcGetPTXSize);
  return g_real->t.nvrtcGetPTXSize(prog, size);
}

static nvrtcResult w_nvrtcGetPTX(nvrtcProgram prog, char *out) {
  FAIL_IF(nvrtcGetPTX);
  return g_real->t.nvrtcGetPTX(prog, out);
}

static nvrtcResult w_nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) {
  FAIL_IF(nvrtcGetCUBINSize);
  return g_real->t.nvrtcGetCUBINSize(prog, size);
}

static nvrtcResult w_nvrtcGetCUBIN(nvrtcProgram prog, char *out) {
  FAIL_IF(nvrtcGetCUBIN);
  return g_real->t.nvrtcGetCUBIN(prog, out);
}

static nvrtcResult w_nvrtcGetLTOIRSize(nvrtcProgram prog, size_t *size) {
  FAIL_IF(nvrtcGetLTOIRSize);
  return g_real->t.nvrtcGetLTOIRSize(prog, size);
}

static nvrtcResult w_nvrtcGetLTOIR(nvrtcProgram prog, char *out) {
  FAIL_IF(nvrtcGetLTOIR);
  return g_real->t.nvrtcGetLTOIR(prog, out);
}

static nvrtcResult w_nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  FAIL_IF(nvrtcGetProgramLogSize);
  return g_real->t.nvrtcGetProgramLogSize(prog, size);
}

static nvrtcResult w_nvrtcGetProgramLog(nvrtcProgram prog, char *out) {
  FAIL_IF(nvrtcGetProgramLog);
  return g_real->t.nvrtcGetProgramLog(prog, out);
}

static nvrtcResult w_nvrtcAddNameExpression(nvrtcProgram prog, const char *const expr) {
  FAIL_IF(nvrtcAddNameExpression);
  return g_real->t.nvrtcAddNameExpression(prog, expr);
}

static nvrtcResult w_nvrtcGetLoweredName(nvrtcProgram prog, const char *const expr,
                                         const char **lowered) {
  FAIL_IF(nvrtcGetLoweredName);
  return g_real->t.nvrtcGetLoweredName(prog, expr, lowered);
}

t4a_status nvrtc_wrap_open(t4a_nvrtc_lib **out, const char *drop_entry) {
  *out = NULL;
  if (g_real == NULL) {
    t4a_status st = t4a_nvrtc_lib_open(NULL, &g_real);
    if (st != T4A_OK) return st;
  }
  t4a_nvrtc_table t = g_real->t; /* PCH and anything unwrapped pass straight through */
  t.nvrtcVersion = w_nvrtcVersion;
  t.nvrtcCreateProgram = w_nvrtcCreateProgram;
  t.nvrtcDestroyProgram = w_nvrtcDestroyProgram;
  t.nvrtcCompileProgram = w_nvrtcCompileProgram;
  t.nvrtcGetPTXSize = w_nvrtcGetPTXSize;
  t.nvrtcGetPTX = w_nvrtcGetPTX;
  t.nvrtcGetProgramLogSize = w_nvrtcGetProgramLogSize;
  t.nvrtcGetProgramLog = w_nvrtcGetProgramLog;
  t.nvrtcAddNameExpression = w_nvrtcAddNameExpression;
  t.nvrtcGetLoweredName = w_nvrtcGetLoweredName;
  if (t.nvrtcGetNumSupportedArchs != NULL)
    t.nvrtcGetNumSupportedArchs = w_nvrtcGetNumSupportedArchs;
  if (t.nvrtcGetSupportedArchs != NULL) t.nvrtcGetSupportedArchs = w_nvrtcGetSupportedArchs;
  if (t.nvrtcGetCUBINSize != NULL) t.nvrtcGetCUBINSize = w_nvrtcGetCUBINSize;
  if (t.nvrtcGetCUBIN != NULL) t.nvrtcGetCUBIN = w_nvrtcGetCUBIN;
  if (t.nvrtcGetLTOIRSize != NULL) t.nvrtcGetLTOIRSize = w_nvrtcGetLTOIRSize;
  if (t.nvrtcGetLTOIR != NULL) t.nvrtcGetLTOIR = w_nvrtcGetLTOIR;
  if (drop_entry != NULL) {
#define T4A_DROP_(name, need) \
  if (strcmp(drop_entry, #name) == 0) t.name = NULL;
    T4A_NVRTC_CATALOG(T4A_DROP_)
#undef T4A_DROP_
  }
  char identity[T4A_NVRTC_BUILD_IDENTITY_MAX];
  snprintf(identity, sizeof identity, "wrapped: %.8000s", g_real->build_identity);
  return t4a_nvrtc_lib_create_from_table(&t, "wrapped", identity, out);
}

void nvrtc_wrap_reset(long fail_at, int fail_code) {
  atomic_store(&g_nvrtc_wrap.calls, 0);
  atomic_store(&g_nvrtc_wrap.compiles, 0);
  g_nvrtc_wrap.fail_at = fail_at;
  g_nvrtc_wrap.fail_code = fail_code;
  g_nvrtc_wrap.failed_entry = NULL;
  g_nvrtc_wrap.on_compile = NULL;
  g_nvrtc_wrap.on_compile_user = NULL;
  g_nvrtc_wrap.on_compiled = NULL;
}

void nvrtc_wrap_close(void) {
  t4a_nvrtc_lib_release(g_real);
  g_real = NULL;
  nvrtc_wrap_reset(-1, 0);
}

/* ---- Fault plan --------------------------------------------------------------------------- */

static int plan_hook(t4a_fault_point point, void *user) {
  fault_plan *plan = user;
  if (!(plan->mask & FAULT_BIT(point))) return 0;
  long i = atomic_fetch_add(&plan->seen, 1);
  if (i == plan->fail_at) {
    plan->failed_point = (int)point;
    return 1;
  }
  return 0;
}

void fault_plan_install(fault_plan *plan, long fail_at, unsigned mask) {
  atomic_store(&plan->seen, 0);
  plan->fail_at = fail_at;
  plan->mask = mask;
  plan->failed_point = -1;
  t4a_fault_set_hook(plan_hook, plan);
}

void fault_plan_remove(void) { t4a_fault_set_hook(NULL, NULL); }

/* ---- Directories -------------------------------------------------------------------------- */

void test_tmpdir(char *out, size_t size) {
  const char *base = getenv("TEST_TMPDIR"); /* Bazel's per-test scratch directory */
  if (base == NULL || base[0] == '\0') base = getenv("TMPDIR");
  if (base == NULL || base[0] == '\0') base = "/tmp";
  snprintf(out, size, "%s/t4a-nvrtc-XXXXXX", base);
  if (mkdtemp(out) == NULL) {
    perror("mkdtemp");
    abort();
  }
}

void test_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int name_matches(const char *name, const char *suffix, const char *prefix) {
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return 0;
  size_t n = strlen(name);
  if (suffix != NULL && (n < strlen(suffix) || strcmp(name + n - strlen(suffix), suffix) != 0)) {
    return 0;
  }
  if (prefix != NULL && strncmp(name, prefix, strlen(prefix)) != 0) return 0;
  return 1;
}

size_t test_count_files(const char *dir, const char *suffix, const char *prefix) {
  size_t n = 0;
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) n += (size_t)name_matches(de->d_name, suffix, prefix);
  closedir(d);
  return n;
}

int test_find_entry(const char *dir, char *out, size_t size) {
  int found = 0;
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    if (name_matches(de->d_name, ".t4a", NULL) && de->d_name[0] != '.') {
      snprintf(out, size, "%s/%s", dir, de->d_name);
      found = 1;
    }
  }
  closedir(d);
  return found;
}

unsigned long long test_entry_bytes(const char *dir) {
  unsigned long long total = 0;
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!name_matches(de->d_name, ".t4a", NULL) || de->d_name[0] == '.') continue;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (stat(path, &st) == 0) total += (unsigned long long)st.st_size;
  }
  closedir(d);
  return total;
}

/* ---- Kernels ------------------------------------------------------------------------------ */

const char k_add1_src[] =
    "extern \"C\" __global__ void add1(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1.0f;\n"
    "}\n";

const char k_template_src[] =
    "template <typename T> __global__ void k() {}\n"
    "template <typename T> __global__ void fill(T *x, T v) { x[threadIdx.x] = v; }\n";

const char k_broken_src[] =
    "extern \"C\" __global__ void broken(float *x) {\n"
    "  x[0] = undefined_thing(x);\n"
    "}\n";

const char k_scale_src[] =
    "#include \"scale.h\"\n"
    "extern \"C\" __global__ void scale(float *x) { x[threadIdx.x] *= SCALE; }\n";

t4a_nvrtc_request test_add1_request(void) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.program_name = "add1.cu";
  r.source = k_add1_src;
  r.target = "sm_90";
  r.output = T4A_NVRTC_OUTPUT_PTX;
  return r;
}
