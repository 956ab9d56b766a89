/* testing/fake_driver — module images, functions, registered kernels and launches.
 *
 * An image is one of:
 *   - the fake format: "T4AFAKE1\n" then one kernel name per line;
 *   - PTX text: every ".entry NAME" (with or without ".visible") is a kernel; the text must carry
 *     ".version" and ".target" directives;
 *   - a CUBIN (ELF64, little-endian, EM_CUDA): every defined STT_FUNC symbol of .symtab marked
 *     as a kernel entry (STO_CUDA_ENTRY, 0x10 in st_other) is a kernel; a defined GLOBAL (or
 *     WEAK) STT_FUNC without the mark is a device function.
 *     Measured (sm_90 CUBINs from nvcc and NVRTC, CUDA 13.0, driver 580.159.04): a kernel is an
 *     STT_FUNC with st_other 0x10 in its own ".text.<name>" section - GLOBAL, or LOCAL when it is
 *     static - and cuModuleGetFunctionCount counts exactly those. A __noinline__ device function
 *     has st_other 0: LOCAL "$kernel$name" inside the kernel's .text in whole-program mode (the
 *     driver does not find it), GLOBAL in its own ".text.<name>" with its own ".nv.info.<name>"
 *     under -rdc=true. Such a GLOBAL device function IS found by cuModuleGetFunction (and
 *     answers cuFuncGetAttribute), but cuFuncGetParamInfo fails with INVALID_VALUE and
 *     cuLaunchKernel with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (not sticky); the fake does the
 *     same. Neither binding nor sections tell kernels from device functions; the entry mark
 *     does.
 * Globals (cuModuleGetGlobal): in the fake format a line "global NAME BYTES" (__device__) or
 * "const NAME BYTES" (__constant__), zero-filled; in PTX every module-scope ".global" or ".const"
 * variable declaration (".visible .const .align 4 .b8 table[256];"), its size the element type's
 * times its dimensions, its initialiser (integers, 0f/0d hex floats) applied; in a CUBIN every
 * defined STT_OBJECT symbol in a ".nv.constant*" or ".nv.global*" section, its st_size bytes,
 * initialised from the section's bytes (NOBITS: zeros). LOCAL symbols count: NVRTC's
 * whole-program sm_90 CUBINs (CUDA 13.0) bind every global LOCAL (lut_table in .nv.constant3,
 * lut_calls in .nv.global, an initialised one in .nv.global.init), and cuModuleGetGlobal is how
 * such globals are reached (the GPU test, t4a_launch/globals_gpu_test.c, checks it on the
 * driver). The user constant bank holds 64 KiB: an image whose
 * __constant__ globals add up to more is CUDA_ERROR_INVALID_IMAGE (ptxas refuses such a source).
 * A global's memory lives as long as its module: a copy or kernel touching it after the unload
 * faults (ILLEGAL_ADDRESS), as any access outside live memory does.
 * The driver API passes images without a size, so the ELF reader trusts only what the headers
 * declare and checks every offset, size and string against them (and a 1 GiB sanity bound);
 * the text readers stop at the first NUL or at the first byte that is not text. Anything else is
 * CUDA_ERROR_INVALID_IMAGE, with a reason in the JIT error log when one is supplied. */
#define _GNU_SOURCE
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/fake_driver/fake_internal.h"

#define FK_IMAGE_LIMIT (1ull << 30)
#define FK_DEFAULT_DYN_SHARED 49152
#define FK_OPTIN_DYN_SHARED 232448
#define FK_FAKE_MAGIC "T4AFAKE1\n"
#define FK_STO_CUDA_ENTRY 0x10 /* st_other of a kernel entry symbol in a CUBIN */

/* ---- registered kernels ------------------------------------------------------------------- */

static void kernel_free(fk_kernel *k) {
  free(k->name);
  free(k->sizes);
  free(k->offsets);
  free(k);
}

fk_kernel *fk_kernel_find(t4a_fake *f, const char *name) {
  for (fk_kernel *k = f->kernels; k != NULL; k = k->next) {
    if (strcmp(k->name, name) == 0) return k;
  }
  return NULL;
}

void fk_kernels_free(t4a_fake *f) {
  while (f->kernels != NULL) {
    fk_kernel *k = f->kernels;
    f->kernels = k->next;
    kernel_free(k);
  }
}

void t4a_fake_register_kernel(t4a_fake *fake, const char *name, size_t num_params,
                              const size_t *param_sizes, t4a_fake_kernel_fn fn, void *user) {
  t4a_fake_register_kernel_aligned(fake, name, num_params, param_sizes, NULL, fn, user);
}

void t4a_fake_register_kernel_aligned(t4a_fake *fake, const char *name, size_t num_params,
                                      const size_t *param_sizes,
                                      const size_t *param_alignments, t4a_fake_kernel_fn fn,
                                      void *user) {
  if (fake == NULL || name == NULL || (num_params > 0 && param_sizes == NULL)) return;
  for (size_t i = 0; param_alignments != NULL && i < num_params; i++) {
    size_t al = param_alignments[i];
    if ((al & (al - 1)) != 0) {
      fprintf(stderr,
              "t4a_fake_register_kernel_aligned: %s: parameter %zu's alignment %zu is not a power "
              "of two; not registered\n",
              name, i, al);
      return;
    }
  }
  fk_kernel *k = calloc(1, sizeof *k);
  if (k == NULL) return;
  k->name = strdup(name);
  k->num = num_params;
  k->fn = fn;
  k->user = user;
  if (num_params > 0) {
    k->sizes = calloc(num_params, sizeof *k->sizes);
    k->offsets = calloc(num_params, sizeof *k->offsets);
  }
  if (k->name == NULL || (num_params > 0 && (k->sizes == NULL || k->offsets == NULL))) {
    kernel_free(k);
    return;
  }
  /* C ABI layout: each parameter aligned as given, or by default to min(size, 8), or, for a
   * size that is not a power of two, to the largest power of two dividing it (a char[3] aligns
   * to 1, a 12-byte struct of ints to 4), which is the most a C type of that size needs unless
   * it is over-aligned (float4, double2: 16, which only an explicit alignment can say). */
  size_t off = 0;
  for (size_t i = 0; i < num_params; i++) {
    size_t size = param_sizes[i];
    size_t align = param_alignments != NULL ? param_alignments[i] : 0;
    if (align == 0) {
      align = 1;
      while (align < 8 && size != 0 && size % (align * 2) == 0) align *= 2;
    }
    off = (off + align - 1) / align * align;
    k->sizes[i] = size;
    k->offsets[i] = off;
    off += size;
  }
  k->total = off;

  fk_lock();
  fk_kernel **at = &fake->kernels;
  while (*at != NULL && strcmp((*at)->name, name) != 0) at = &(*at)->next;
  if (*at != NULL) {
    fk_kernel *old = *at;
    k->next = old->next;
    *at = k;
    kernel_free(old);
  } else {
    *at = k;
  }
  fk_unlock();
}

/* ---- image readers ------------------------------------------------------------------------ */

typedef struct global_decl {
  char *name;
  size_t bytes;
  int is_const;
  unsigned char *init; /* bytes initial values (NULL: zeros) */
} global_decl;

typedef struct name_list {
  char **v;
  unsigned char *entry; /* 1: a kernel; 0: a device function (found, not launchable) */
  size_t n, cap;
  global_decl *g; /* the module's globals */
  size_t ng, gcap;
} name_list;

static void names_free(name_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  free(l->entry);
  for (size_t i = 0; i < l->ng; i++) {
    free(l->g[i].name);
    free(l->g[i].init);
  }
  free(l->g);
  memset(l, 0, sizeof *l);
}

#define FK_CONST_BANK_BYTES 65536u /* the user constant bank (__constant__) */

/* Adds a global (a second declaration of one name is an invalid image). `init` (bytes long or
 * NULL) is copied. Returns CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY or CUDA_ERROR_INVALID_IMAGE. */
static CUresult globals_add(name_list *l, const char *s, size_t len, size_t bytes, int is_const,
                            const unsigned char *init, const char **why) {
  if (bytes == 0 || bytes > FK_IMAGE_LIMIT) {
    *why = "a global of 0 bytes or beyond the image limit";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  size_t const_total = 0;
  for (size_t i = 0; i < l->ng; i++) {
    if (strlen(l->g[i].name) == len && memcmp(l->g[i].name, s, len) == 0) {
      *why = "a global is declared twice";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if (l->g[i].is_const) const_total += l->g[i].bytes;
  }
  if (is_const && const_total + bytes > FK_CONST_BANK_BYTES) {
    *why = "the __constant__ globals exceed the 64 KiB constant bank";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (l->ng == l->gcap) {
    size_t cap = l->gcap ? l->gcap * 2 : 4;
    global_decl *g = realloc(l->g, cap * sizeof *g);
    if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    l->g = g;
    l->gcap = cap;
  }
  global_decl d = {malloc(len + 1), bytes, is_const, NULL};
  if (d.name == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(d.name, s, len);
  d.name[len] = '\0';
  if (init != NULL) {
    d.init = malloc(bytes);
    if (d.init == NULL) {
      free(d.name);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(d.init, init, bytes);
  }
  l->g[l->ng++] = d;
  return CUDA_SUCCESS;
}

/* Adds a function unless present (a kernel wins over a device function of the same name).
 * Returns 0 when out of memory. */
static int names_add_fn(name_list *l, const char *s, size_t len, int entry) {
  for (size_t i = 0; i < l->n; i++) {
    if (strlen(l->v[i]) == len && memcmp(l->v[i], s, len) == 0) {
      if (entry) l->entry[i] = 1;
      return 1;
    }
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    char **v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) return 0;
    l->v = v;
    unsigned char *e = realloc(l->entry, cap);
    if (e == NULL) return 0;
    l->entry = e;
    l->cap = cap;
  }
  char *c = malloc(len + 1);
  if (c == NULL) return 0;
  memcpy(c, s, len);
  c[len] = '\0';
  l->entry[l->n] = (unsigned char)(entry != 0);
  l->v[l->n++] = c;
  return 1;
}

static int names_add(name_list *l, const char *s, size_t len) { return names_add_fn(l, s, len, 1); }

static int text_char(unsigned char c) {
  return c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7F);
}

static int ident_start(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

static int ident_char(unsigned char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* A line "global NAME BYTES" or "const NAME BYTES" of the fake format (at t, `n` bytes): 1 if it
 * is one (added, or *r set on failure), 0 if not. */
static int parse_fake_global(const char *t, size_t n, name_list *out, CUresult *r,
                             const char **why) {
  int is_const;
  size_t at;
  if (n > 7 && memcmp(t, "global ", 7) == 0) {
    is_const = 0;
    at = 7;
  } else if (n > 6 && memcmp(t, "const ", 6) == 0) {
    is_const = 1;
    at = 6;
  } else {
    return 0;
  }
  size_t name = at;
  while (at < n && ident_char((unsigned char)t[at])) at++;
  size_t name_len = at - name;
  if (name_len == 0 || !ident_start((unsigned char)t[name]) || at >= n || t[at] != ' ') {
    *why = "fake image: a global line is not \"global|const NAME BYTES\"";
    *r = CUDA_ERROR_INVALID_IMAGE;
    return 1;
  }
  at++;
  uint64_t bytes = 0;
  size_t digits = 0;
  while (at < n && t[at] >= '0' && t[at] <= '9' && bytes <= FK_IMAGE_LIMIT) {
    bytes = bytes * 10 + (uint64_t)(t[at++] - '0');
    digits++;
  }
  if (digits == 0 || at != n) {
    *why = "fake image: a global's size is not a decimal number";
    *r = CUDA_ERROR_INVALID_IMAGE;
    return 1;
  }
  *r = globals_add(out, t + name, name_len, (size_t)bytes, is_const, NULL, why);
  return 1;
}

static CUresult parse_fake(const char *t, name_list *out, const char **why) {
  size_t i = strlen(FK_FAKE_MAGIC);
  while (t[i] != '\0') {
    if (i >= FK_IMAGE_LIMIT) {
      *why = "fake image too long";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    size_t start = i;
    size_t line_end = i;
    while (t[line_end] != '\0' && t[line_end] != '\n') line_end++;
    size_t line_len = line_end > start && t[line_end - 1] == '\r' ? line_end - 1 - start
                                                                  : line_end - start;
    CUresult gr = CUDA_SUCCESS;
    if (parse_fake_global(t + start, line_len, out, &gr, why)) {
      if (gr != CUDA_SUCCESS) return gr;
      i = line_end;
      if (t[i] == '\n') i++;
      continue;
    }
    while (t[i] != '\0' && t[i] != '\n') {
      unsigned char c = (unsigned char)t[i];
      if (c != '\r' && (c <= 0x20 || c >= 0x7F)) {
        *why = "fake image: a kernel name holds a space or a byte that is not printable";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      i++;
    }
    size_t end = i;
    if (end > start && t[end - 1] == '\r') end--;
    if (end > start && !names_add(out, t + start, end - start)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (t[i] == '\n') i++;
  }
  return CUDA_SUCCESS;
}

static size_t skip_space(const char *t, size_t j) {
  while (t[j] == ' ' || t[j] == '\t' || t[j] == '\n' || t[j] == '\r') j++;
  return j;
}

/* The bytes of a PTX fundamental type (".b8" ... ".f64"), 0 if it is not one. */
static size_t ptx_type_bytes(const char *t, size_t len) {
  if (len < 3 || t[0] != '.') return 0;
  char k = t[1];
  if (k != 'b' && k != 'u' && k != 's' && k != 'f') return 0;
  if (len == 3 && t[2] == '8' && k != 'f') return 1;
  if (len == 4 && memcmp(t + 2, "16", 2) == 0) return 2;
  if (len == 4 && memcmp(t + 2, "32", 2) == 0) return 4;
  if (len == 4 && memcmp(t + 2, "64", 2) == 0) return 8;
  return 0;
}

/* One initialiser value for an element of `elem` bytes: a decimal or 0x integer (optionally
 * negative), or a 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX hex float; stored little-endian at dst.
 * Returns the index after it, or 0 if it is not one of those. */
static size_t ptx_init_value(const char *t, size_t j, size_t elem, unsigned char *dst) {
  int neg = 0;
  if (t[j] == '-') {
    neg = 1;
    j++;
  }
  uint64_t v = 0;
  size_t start = j;
  if (t[j] == '0' && (t[j + 1] == 'f' || t[j + 1] == 'F' || t[j + 1] == 'd' || t[j + 1] == 'D' ||
                      t[j + 1] == 'x' || t[j + 1] == 'X')) {
    char kind = (char)(t[j + 1] | 0x20);
    j += 2;
    size_t hex = j;
    while ((t[j] >= '0' && t[j] <= '9') || ((t[j] | 0x20) >= 'a' && (t[j] | 0x20) <= 'f')) {
      int d = t[j] <= '9' ? t[j] - '0' : (t[j] | 0x20) - 'a' + 10;
      v = v << 4 | (uint64_t)d;
      j++;
    }
    size_t n = j - hex;
    if (n == 0 || n > 16 || (kind == 'f' && (n != 8 || elem != 4 || neg)) ||
        (kind == 'd' && (n != 16 || elem != 8 || neg))) {
      return 0;
    }
  } else {
    while (t[j] >= '0' && t[j] <= '9') v = v * 10 + (uint64_t)(t[j++] - '0');
    if (j == start) return 0;
  }
  if (ident_char((unsigned char)t[j])) return 0;
  if (neg) v = (uint64_t)0 - v;
  for (size_t b = 0; b < elem; b++) dst[b] = (unsigned char)(v >> (8 * b));
  return j;
}

/* A module-scope variable declaration after ".global" or ".const" (t[j] is the byte after the
 * directive): [.align N] [.v2|.v4] .TYPE NAME [N]... [= INIT] ;. Declarations that are not of
 * this form (a ".global" qualifying something else) are passed over. *end: where to go on. */
static CUresult parse_ptx_global(const char *t, size_t j, int is_const, name_list *out,
                                 size_t *end, const char **why) {
  *end = j;
  j = skip_space(t, j);
  if (strncmp(t + j, ".align", 6) == 0 && !ident_char((unsigned char)t[j + 6])) {
    j = skip_space(t, j + 6);
    while (t[j] >= '0' && t[j] <= '9') j++;
    j = skip_space(t, j);
  }
  size_t vec = 1;
  if (strncmp(t + j, ".v2", 3) == 0 || strncmp(t + j, ".v4", 3) == 0) {
    vec = (size_t)(t[j + 2] - '0');
    j = skip_space(t, j + 3);
  }
  size_t ts = j;
  if (t[j] == '.') j++;
  while (ident_char((unsigned char)t[j])) j++;
  size_t elem = ptx_type_bytes(t + ts, j - ts);
  if (elem == 0) return CUDA_SUCCESS; /* not a variable declaration */
  elem *= vec;
  j = skip_space(t, j);
  size_t name = j;
  if (!ident_start((unsigned char)t[j])) return CUDA_SUCCESS;
  while (ident_char((unsigned char)t[j])) j++;
  size_t name_len = j - name;
  uint64_t count = 1;
  j = skip_space(t, j);
  while (t[j] == '[') {
    uint64_t dim = 0;
    size_t d0 = ++j;
    while (t[j] >= '0' && t[j] <= '9' && dim <= FK_IMAGE_LIMIT) dim = dim * 10 + (uint64_t)(t[j++] - '0');
    if (j == d0 || t[j] != ']' || dim == 0) {
      *why = "PTX text: a global's dimension is not a positive number";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    count *= dim;
    if (count > FK_IMAGE_LIMIT) {
      *why = "PTX text: a global beyond the image limit";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    j = skip_space(t, j + 1);
  }
  uint64_t bytes = count * elem;
  if (bytes > FK_IMAGE_LIMIT) {
    *why = "PTX text: a global beyond the image limit";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  unsigned char *init = NULL;
  if (t[j] == '=') {
    init = calloc(1, (size_t)bytes);
    if (init == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    j = skip_space(t, j + 1);
    int braced = t[j] == '{';
    if (braced) j = skip_space(t, j + 1);
    for (uint64_t k = 0;; k++) {
      size_t next = k < count ? ptx_init_value(t, j, elem, init + k * elem) : 0;
      if (next == 0) {
        free(init);
        *why = "PTX text: a global's initialiser is not modelled by the fake (integers and "
               "0f/0d hex floats only) or has more values than elements";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      j = skip_space(t, next);
      if (!braced || t[j] != ',') break;
      j = skip_space(t, j + 1);
    }
    if (braced) {
      if (t[j] != '}') {
        free(init);
        *why = "PTX text: a global's initialiser is not closed";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      j = skip_space(t, j + 1);
    }
  }
  if (t[j] != ';') {
    free(init);
    *why = "PTX text: a global's declaration does not end with ';'";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  CUresult r = globals_add(out, t + name, name_len, (size_t)bytes, is_const, init, why);
  free(init);
  *end = j + 1;
  return r;
}

static CUresult parse_ptx(const char *t, name_list *out, const char **why) {
  int has_version = 0, has_target = 0, is_extern = 0;
  int depth = 0; /* braces: module scope at 0 */
  size_t i = 0;
  while (t[i] != '\0') {
    unsigned char c = (unsigned char)t[i];
    if (i >= FK_IMAGE_LIMIT) {
      *why = "PTX text too long";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if (!text_char(c)) {
      *why = "not an image: neither the fake format, ELF, nor PTX text";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if (c == '/' && t[i + 1] == '/') {
      while (t[i] != '\0' && t[i] != '\n') {
        if (!text_char((unsigned char)t[i])) {
          *why = "PTX text holds a byte that is not text";
          return CUDA_ERROR_INVALID_IMAGE;
        }
        i++;
      }
      continue;
    }
    if (c == '/' && t[i + 1] == '*') {
      i += 2;
      while (t[i] != '\0' && !(t[i] == '*' && t[i + 1] == '/')) {
        if (!text_char((unsigned char)t[i])) {
          *why = "PTX text holds a byte that is not text";
          return CUDA_ERROR_INVALID_IMAGE;
        }
        i++;
      }
      if (t[i] == '\0') {
        *why = "PTX text: unterminated comment";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      i += 2;
      continue;
    }
    if (c == '"') {
      i++;
      while (t[i] != '\0' && t[i] != '"' && t[i] != '\n') i++;
      if (t[i] == '"') i++;
      continue;
    }
    if (c == '.' && ident_start((unsigned char)t[i + 1]) &&
        (i == 0 || !ident_char((unsigned char)t[i - 1]))) {
      size_t j = i + 1;
      while (ident_char((unsigned char)t[j])) j++;
      size_t len = j - i;
      if (len == 8 && memcmp(t + i, ".version", 8) == 0) has_version = 1;
      if (len == 7 && memcmp(t + i, ".target", 7) == 0) has_target = 1;
      if (len == 7 && memcmp(t + i, ".extern", 7) == 0) is_extern = 1;
      if (depth == 0 && !is_extern && ((len == 7 && memcmp(t + i, ".global", 7) == 0) ||
                                       (len == 6 && memcmp(t + i, ".const", 6) == 0))) {
        size_t end = j;
        CUresult r = parse_ptx_global(t, j, len == 6, out, &end, why);
        if (r != CUDA_SUCCESS) return r;
        i = end;
        continue;
      }
      if (len == 6 && memcmp(t + i, ".entry", 6) == 0) {
        while (t[j] == ' ' || t[j] == '\t' || t[j] == '\n' || t[j] == '\r') j++;
        size_t start = j;
        if (!ident_start((unsigned char)t[j])) {
          *why = "PTX text: .entry without a name";
          return CUDA_ERROR_INVALID_IMAGE;
        }
        while (ident_char((unsigned char)t[j])) j++;
        if (!names_add(out, t + start, j - start)) return CUDA_ERROR_OUT_OF_MEMORY;
      }
      i = j;
      continue;
    }
    if (c == '{') depth++;
    if (c == '}' && depth > 0) depth--;
    if (c == ';' || c == '{' || c == '}') is_extern = 0;
    i++;
  }
  if (!has_version || !has_target) {
    *why = "not an image: text without PTX .version and .target directives";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return CUDA_SUCCESS;
}

/* Whether [off, off + size) lies after the ELF header and inside the sanity bound. */
static int elf_range_ok(uint64_t off, uint64_t size) {
  if (size == 0) return off <= FK_IMAGE_LIMIT;
  return off >= sizeof(Elf64_Ehdr) && off <= FK_IMAGE_LIMIT && size <= FK_IMAGE_LIMIT - off;
}

/* A defined STT_OBJECT symbol: a global when in a ".nv.constant*" or ".nv.global*" section (LOCAL
 * ones too: whole-program NVRTC output makes every global LOCAL), initialised from the section's bytes (NOBITS: zeros). */
static CUresult elf_global(const unsigned char *img, const Elf64_Ehdr *eh, const char *strtab,
                           uint64_t strtab_size, const Elf64_Sym *sym, name_list *out,
                           const char **why) {
  if (sym->st_size == 0) return CUDA_SUCCESS;
  if (sym->st_shndx >= eh->e_shnum || sym->st_name >= strtab_size) {
    *why = "ELF image: a global's section or name is out of range";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  Elf64_Shdr sec, names;
  memcpy(&sec, img + eh->e_shoff + (uint64_t)sym->st_shndx * sizeof sec, sizeof sec);
  if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum) return CUDA_SUCCESS;
  memcpy(&names, img + eh->e_shoff + (uint64_t)eh->e_shstrndx * sizeof names, sizeof names);
  if (names.sh_type != SHT_STRTAB || names.sh_size == 0 ||
      !elf_range_ok(names.sh_offset, names.sh_size) || sec.sh_name >= names.sh_size ||
      img[names.sh_offset + names.sh_size - 1] != '\0') {
    *why = "ELF image: bad section name table";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  const char *sname = (const char *)img + names.sh_offset + sec.sh_name;
  int is_const = strncmp(sname, ".nv.constant", 12) == 0;
  if (!is_const && strncmp(sname, ".nv.global", 10) != 0) return CUDA_SUCCESS;
  const unsigned char *init = NULL;
  if (sec.sh_type != SHT_NOBITS) {
    if (!elf_range_ok(sec.sh_offset, sec.sh_size) || sym->st_value > sec.sh_size ||
        sym->st_size > sec.sh_size - sym->st_value) {
      *why = "ELF image: a global lies outside its section";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    init = img + sec.sh_offset + sym->st_value;
  }
  const char *name = strtab + sym->st_name;
  return globals_add(out, name, strlen(name), (size_t)sym->st_size, is_const, init, why);
}

static CUresult parse_elf(const unsigned char *img, name_list *out, const char **why) {
  if (img[EI_CLASS] != ELFCLASS64 || img[EI_DATA] != ELFDATA2LSB) {
    *why = "ELF image is not 64-bit little-endian";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  Elf64_Ehdr eh;
  memcpy(&eh, img, sizeof eh);
  if (eh.e_machine != EM_CUDA) {
    *why = "ELF image is not a CUDA binary (e_machine is not EM_CUDA)";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum >= SHN_LORESERVE ||
      !elf_range_ok(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr))) {
    *why = "ELF image: bad section header table";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  int found_symtab = 0;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, img + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB) continue;
    found_symtab = 1;
    if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_size % sizeof(Elf64_Sym) != 0 ||
        !elf_range_ok(sh.sh_offset, sh.sh_size)) {
      *why = "ELF image: bad symbol table";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if (sh.sh_link == 0 || sh.sh_link >= eh.e_shnum) {
      *why = "ELF image: symbol table links no string table";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    Elf64_Shdr st;
    memcpy(&st, img + eh.e_shoff + (uint64_t)sh.sh_link * sizeof st, sizeof st);
    if (st.sh_type != SHT_STRTAB || st.sh_size == 0 || !elf_range_ok(st.sh_offset, st.sh_size)) {
      *why = "ELF image: bad string table";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    const char *strtab = (const char *)img + st.sh_offset;
    if (strtab[st.sh_size - 1] != '\0') {
      *why = "ELF image: string table is not NUL-terminated";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    uint64_t count = sh.sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < count; k++) {
      Elf64_Sym sym;
      memcpy(&sym, img + sh.sh_offset + k * sizeof sym, sizeof sym);
      if (ELF64_ST_TYPE(sym.st_info) == STT_OBJECT && sym.st_shndx != SHN_UNDEF) {
        CUresult gr = elf_global(img, &eh, strtab, st.sh_size, &sym, out, why);
        if (gr != CUDA_SUCCESS) return gr;
        continue;
      }
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
      /* Kernels carry the entry mark. A device function (no mark) is visible only when GLOBAL
       * (or WEAK): the LOCAL "$kernel$helper" copies of whole-program mode are not. */
      int entry = (sym.st_other & FK_STO_CUDA_ENTRY) != 0;
      if (!entry && ELF64_ST_BIND(sym.st_info) == STB_LOCAL) continue;
      if (sym.st_name >= st.sh_size) {
        *why = "ELF image: symbol name outside the string table";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      const char *name = strtab + sym.st_name;
      size_t len = strlen(name); /* bounded: the table ends with a NUL */
      if (len > 0 && !names_add_fn(out, name, len, entry)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (!found_symtab) {
    *why = "ELF image has no symbol table";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return CUDA_SUCCESS;
}

static CUresult parse_image(const void *image, name_list *out, const char **why) {
  const char *t = image;
  const unsigned char *u = image;
  /* strncmp and the byte-by-byte ELF check stop at the first mismatch, so a short image is
   * never read past its terminating NUL here. */
  if (strncmp(t, FK_FAKE_MAGIC, strlen(FK_FAKE_MAGIC)) == 0) return parse_fake(t, out, why);
  if (u[0] == ELFMAG0 && u[1] == ELFMAG1 && u[2] == ELFMAG2 && u[3] == ELFMAG3) {
    return parse_elf(u, out, why);
  }
  return parse_ptx(t, out, why);
}

size_t t4a_fake_image(char *buf, size_t size, const char *const *kernel_names, size_t num) {
  return t4a_fake_image_globals(buf, size, kernel_names, num, NULL, 0);
}

size_t t4a_fake_image_globals(char *buf, size_t size, const char *const *kernel_names, size_t num,
                              const t4a_fake_global *globals, size_t num_globals) {
  size_t need = strlen(FK_FAKE_MAGIC) + 1;
  for (size_t i = 0; kernel_names != NULL && i < num; i++) {
    if (kernel_names[i] != NULL) need += strlen(kernel_names[i]) + 1;
  }
  char line[320];
  for (size_t i = 0; globals != NULL && i < num_globals; i++) {
    int n = snprintf(line, sizeof line, "%s %s %zu\n", globals[i].is_const ? "const" : "global",
                     globals[i].name != NULL ? globals[i].name : "", globals[i].bytes);
    need += n > 0 ? (size_t)n : 0;
  }
  if (buf == NULL || size == 0) return need;
  size_t at = 0;
  const char *magic = FK_FAKE_MAGIC;
  for (size_t k = 0; magic[k] != '\0' && at + 1 < size; k++) buf[at++] = magic[k];
  for (size_t i = 0; kernel_names != NULL && i < num; i++) {
    const char *n = kernel_names[i];
    if (n == NULL) continue;
    for (size_t k = 0; n[k] != '\0' && at + 1 < size; k++) buf[at++] = n[k];
    if (at + 1 < size) buf[at++] = '\n';
  }
  for (size_t i = 0; globals != NULL && i < num_globals; i++) {
    snprintf(line, sizeof line, "%s %s %zu\n", globals[i].is_const ? "const" : "global",
             globals[i].name != NULL ? globals[i].name : "", globals[i].bytes);
    for (size_t k = 0; line[k] != '\0' && at + 1 < size; k++) buf[at++] = line[k];
  }
  buf[at] = '\0';
  return need;
}

/* ---- modules ------------------------------------------------------------------------------ */

void fk_module_free(t4a_fake *f, fk_module *m) {
  if (m->o.handle != 0) {
    fk_handle_drop(f, &m->o);
    f->live.modules--;
  }
  for (size_t i = 0; i < m->num_funcs; i++) {
    fk_func *fn = m->funcs[i];
    if (fn == NULL) continue;
    fk_handle_drop(f, &fn->o);
    free(fn->name);
    free(fn);
  }
  free(m->funcs);
  for (size_t i = 0; i < m->num_globals; i++) {
    if (m->globals[i].alloc != NULL) fk_alloc_free(f, m->globals[i].alloc);
    free(m->globals[i].name);
  }
  free(m->globals);
  fk_list_remove(&m->link);
  free(m);
}

static void write_log(char *buf, size_t size, size_t *used, const char *text) {
  if (buf == NULL || size == 0) {
    *used = 0;
    return;
  }
  size_t n = strlen(text);
  if (n >= size) n = size - 1;
  memcpy(buf, text, n);
  buf[n] = '\0';
  *used = n + 1;
}

static CUresult module_load(t4a_fake *f, CUmodule *mod, const void *image, const char **why) {
  if (mod == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_ctx *ctx;
  CUresult r = fk_need_current(f, &ctx);
  if (r != CUDA_SUCCESS) return r;
  name_list names = {0};
  r = parse_image(image, &names, why);
  if (r != CUDA_SUCCESS) {
    names_free(&names);
    return r;
  }
  fk_module *m = calloc(1, sizeof *m);
  if (m == NULL || !fk_handle_new(f, &m->o, FK_KIND_MODULE)) {
    free(m);
    names_free(&names);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m->ctx = ctx;
  fk_list_push(&f->modules, &m->link);
  f->live.modules++;
  if (names.n > 0) {
    m->funcs = calloc(names.n, sizeof *m->funcs);
    if (m->funcs == NULL) goto oom;
  }
  for (size_t i = 0; i < names.n; i++) {
    fk_func *fn = calloc(1, sizeof *fn);
    if (fn == NULL) goto oom;
    m->funcs[m->num_funcs++] = fn;
    if (!fk_handle_new(f, &fn->o, FK_KIND_FUNC)) goto oom;
    fn->mod = m;
    fn->name = names.v[i];
    fn->device_fn = !names.entry[i];
    names.v[i] = NULL;
    fn->max_dyn_shared = -1; /* the default: 48 KiB less the kernel's static shared memory */
    fn->carveout = -1;
  }
  if (names.ng > 0) {
    m->globals = calloc(names.ng, sizeof *m->globals);
    if (m->globals == NULL) goto oom;
  }
  for (size_t i = 0; i < names.ng; i++) {
    fk_modglobal *g = &m->globals[m->num_globals++];
    g->name = names.g[i].name;
    names.g[i].name = NULL;
    g->is_const = names.g[i].is_const;
    r = fk_module_alloc(f, ctx, names.g[i].bytes, &g->alloc);
    if (r != CUDA_SUCCESS) {
      names_free(&names);
      fk_module_free(f, m);
      return r;
    }
    if (names.g[i].init != NULL) memcpy(g->alloc->host, names.g[i].init, names.g[i].bytes);
  }
  names_free(&names);
  *mod = (CUmodule)(uintptr_t)m->o.handle;
  return CUDA_SUCCESS;
oom:
  names_free(&names);
  fk_module_free(f, m);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult fk_cuModuleLoadData(t4a_fake *f, CUmodule *mod, const void *image) {
  const char *why = "";
  return module_load(f, mod, image, &why);
}

CUresult fk_cuModuleLoadDataEx(t4a_fake *f, CUmodule *mod, const void *image,
                               unsigned int num_options, CUjit_option *options, void **values) {
  if (num_options > 0 && (options == NULL || values == NULL)) return CUDA_ERROR_INVALID_VALUE;
  char *err_buf = NULL, *info_buf = NULL;
  size_t err_size = 0, info_size = 0;
  int err_size_at = -1, info_size_at = -1;
  for (unsigned i = 0; i < num_options; i++) {
    switch (options[i]) {
      case CU_JIT_ERROR_LOG_BUFFER: err_buf = values[i]; break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        err_size = (size_t)(uintptr_t)values[i];
        err_size_at = (int)i;
        break;
      case CU_JIT_INFO_LOG_BUFFER: info_buf = values[i]; break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        info_size = (size_t)(uintptr_t)values[i];
        info_size_at = (int)i;
        break;
      default:
        if ((unsigned)options[i] >= (unsigned)CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
        break;
    }
  }
  const char *why = "";
  CUresult r = module_load(f, mod, image, &why);
  size_t used = 0;
  write_log(err_buf, err_size, &used, r == CUDA_SUCCESS ? "" : why);
  if (err_size_at >= 0) values[err_size_at] = (void *)(uintptr_t)used;
  write_log(info_buf, info_size, &used, "");
  if (info_size_at >= 0) values[info_size_at] = (void *)(uintptr_t)used;
  return r;
}

CUresult fk_cuModuleUnload(t4a_fake *f, CUmodule mod) {
  fk_ctx *cur; /* needs a current context (any), as documented */
  CUresult r = fk_need_current(f, &cur);
  if (r != CUDA_SUCCESS) return r;
  fk_module *m = fk_handle_get(f, FK_H(mod), FK_KIND_MODULE);
  if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
  r = fk_ctx_usable(m->ctx);
  if (r != CUDA_SUCCESS) return r;
  /* As measured on the H200: an unload during a capture (this thread's, or a global one) is
   * refused and breaks the capture. */
  if ((r = fk_capture_check_unsafe(f)) != CUDA_SUCCESS) return r;
  /* Work already queued that uses the module's functions fails when it runs (a sticky
   * CUDA_ERROR_LAUNCH_FAILED): unloading under in-flight launches is a bug the fake reports. */
  fk_module_free(f, m);
  return CUDA_SUCCESS;
}

CUresult fk_cuModuleGetGlobal(t4a_fake *f, CUdeviceptr *dptr, size_t *bytes, CUmodule mod,
                              const char *name) {
  /* One of dptr and bytes (not both) may be NULL, as documented. */
  if (name == NULL || (dptr == NULL && bytes == NULL)) return CUDA_ERROR_INVALID_VALUE;
  fk_module *m = fk_handle_get(f, FK_H(mod), FK_KIND_MODULE);
  if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_ctx_usable(m->ctx);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < m->num_globals; i++) {
    if (strcmp(m->globals[i].name, name) == 0) {
      if (dptr != NULL) *dptr = m->globals[i].alloc->base;
      if (bytes != NULL) *bytes = m->globals[i].alloc->size;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult fk_cuModuleGetFunction(t4a_fake *f, CUfunction *func, CUmodule mod, const char *name) {
  if (func == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_module *m = fk_handle_get(f, FK_H(mod), FK_KIND_MODULE);
  if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = fk_ctx_usable(m->ctx);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < m->num_funcs; i++) {
    if (strcmp(m->funcs[i]->name, name) == 0) {
      *func = (CUfunction)(uintptr_t)m->funcs[i]->o.handle;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

/* ---- functions ---------------------------------------------------------------------------- */

/* The attributes of a function: its registered kernel's (t4a_fake_set_kernel_attrs), zero fields
 * (and unregistered kernels) taking the defaults: 32 registers, no static shared or local
 * memory, 1,024 threads per block. */
t4a_fake_kernel_attrs fk_func_attrs(t4a_fake *f, const fk_func *fn) {
  t4a_fake_kernel_attrs a = {0, 0, 0, 0};
  const fk_kernel *k = fn->device_fn ? NULL : fk_kernel_find(f, fn->name);
  if (k != NULL) a = k->attrs;
  if (a.num_regs <= 0) a.num_regs = 32;
  if (a.static_shared_bytes < 0) a.static_shared_bytes = 0;
  if (a.local_bytes < 0) a.local_bytes = 0;
  if (a.max_threads_per_block <= 0 || a.max_threads_per_block > 1024) {
    a.max_threads_per_block = 1024;
  }
  return a;
}

/* The user constant memory a kernel of the module may read: the module's __constant__ globals
 * (the fake does not track which kernel reads which). */
static int module_const_bytes(const fk_module *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->num_globals; i++) {
    if (m->globals[i].is_const) n += m->globals[i].alloc->size;
  }
  return (int)n;
}

/* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: as raised, or 48 KiB less the kernel's static
 * shared memory (the driver's default). */
int fk_func_max_dyn(t4a_fake *f, const fk_func *fn) {
  if (fn->max_dyn_shared >= 0) return fn->max_dyn_shared;
  int v = FK_DEFAULT_DYN_SHARED - fk_func_attrs(f, fn).static_shared_bytes;
  return v > 0 ? v : 0;
}

static CUresult func_lookup(t4a_fake *f, CUfunction h, fk_func **out) {
  *out = fk_handle_get(f, FK_H(h), FK_KIND_FUNC);
  if (*out == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return fk_ctx_usable((*out)->mod->ctx);
}

CUresult fk_cuFuncGetAttribute(t4a_fake *f, int *pi, CUfunction_attribute attr, CUfunction func) {
  if (pi == NULL) return CUDA_ERROR_INVALID_VALUE;
  fk_func *fn;
  CUresult r = func_lookup(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  int cc = f->opt.cc_major * 10 + f->opt.cc_minor;
  t4a_fake_kernel_attrs a = fk_func_attrs(f, fn);
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = a.max_threads_per_block; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = a.static_shared_bytes; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = module_const_bytes(fn->mod); break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = a.local_bytes; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = a.num_regs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = cc; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = cc; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = fk_func_max_dyn(f, fn); break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = fn->carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *pi = fn->non_portable_cluster; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = 0; break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult fk_cuFuncSetAttribute(t4a_fake *f, CUfunction func, CUfunction_attribute attr,
                               int value) {
  fk_func *fn;
  CUresult r = func_lookup(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      /* Static plus dynamic shared memory must fit the opt-in maximum per block. */
      if (value < 0 || value > FK_OPTIN_DYN_SHARED - fk_func_attrs(f, fn).static_shared_bytes) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      fn->max_dyn_shared = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      fn->carveout = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (value != 0 && value != 1) return CUDA_ERROR_INVALID_VALUE;
      fn->non_portable_cluster = value;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fk_cuFuncGetParamInfo(t4a_fake *f, CUfunction func, size_t index, size_t *offset,
                               size_t *size) {
  fk_func *fn;
  CUresult r = func_lookup(f, func, &fn);
  if (r != CUDA_SUCCESS) return r;
  const fk_kernel *k = fn->device_fn ? NULL : fk_kernel_find(f, fn->name);
  /* Past the end (also index 0 of a kernel without parameters) is INVALID_VALUE, as on the
   * real driver: callers count parameters by probing until it. A device function has none. */
  if (k == NULL || index >= k->num) return CUDA_ERROR_INVALID_VALUE;
  if (offset != NULL) *offset = k->offsets[index];
  if (size != NULL) *size = k->sizes[index];
  return CUDA_SUCCESS;
}

/* ---- launches ----------------------------------------------------------------------------- */

/* Reads CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE from `extra`. */
static CUresult parse_extra(void **extra, const void **buf, size_t *size) {
  *buf = NULL;
  *size = 0;
  const size_t *sizep = NULL;
  for (size_t i = 0; i < 64; i += 2) {
    void *key = extra[i];
    if (key == CU_LAUNCH_PARAM_END) {
      if (*buf == NULL || sizep == NULL) return CUDA_ERROR_INVALID_VALUE;
      *size = *sizep;
      return CUDA_SUCCESS;
    }
    if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      *buf = extra[i + 1];
    } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      sizep = extra[i + 1];
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult fk_build_launch(t4a_fake *f, CUfunction func, const unsigned grid[3],
                         const unsigned block[3], unsigned shared, void **params, void **extra,
                         fk_ctx *ctx, fk_op **out) {
  *out = NULL;
  fk_func *fn = fk_handle_get(f, FK_H(func), FK_KIND_FUNC);
  if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (fn->mod->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
  /* A device function found by name is not a kernel (what the real driver answers). */
  if (fn->device_fn) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > 2147483647u ||
      grid[1] > 65535u || grid[2] > 65535u) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (block[0] == 0 || block[1] == 0 || block[2] == 0 || block[0] > 1024u || block[1] > 1024u ||
      block[2] > 64u || (uint64_t)block[0] * block[1] * block[2] > 1024u) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (shared > (unsigned)fk_func_max_dyn(f, fn)) return CUDA_ERROR_INVALID_VALUE;
  /* A kernel's own limit (__launch_bounds__): measured on the H200, a launch above it is
   * CUDA_ERROR_INVALID_VALUE. */
  if ((uint64_t)block[0] * block[1] * block[2] > (uint64_t)fk_func_attrs(f, fn).max_threads_per_block) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (params != NULL && extra != NULL) return CUDA_ERROR_INVALID_VALUE;

  fk_op *op = fk_op_new(FK_OP_KERNEL);
  if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.kernel.func = func;
  for (int i = 0; i < 3; i++) {
    op->u.kernel.grid[i] = grid[i];
    op->u.kernel.block[i] = block[i];
  }
  op->u.kernel.shared = shared;
  const fk_kernel *k = fk_kernel_find(f, fn->name);
  if (k == NULL) {
    *out = op; /* unregistered: runs as a no-op, arguments unread */
    return CUDA_SUCCESS;
  }
  op->u.kernel.fn = k->fn;
  op->u.kernel.user = k->user;
  fk_args *a = &op->u.kernel.args;
  if (!fk_args_init(a, k->num, k->total)) {
    fk_op_free(f, op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (k->num > 0) {
    memcpy(a->offsets, k->offsets, k->num * sizeof(size_t));
    memcpy(a->sizes, k->sizes, k->num * sizeof(size_t));
  }
  CUresult r = CUDA_SUCCESS;
  if (k->num > 0) {
    if (params != NULL) {
      for (size_t i = 0; i < k->num && r == CUDA_SUCCESS; i++) {
        if (params[i] == NULL) {
          r = CUDA_ERROR_INVALID_VALUE;
        } else {
          memcpy(a->bytes + a->offsets[i], params[i], a->sizes[i]);
        }
      }
    } else if (extra != NULL) {
      const void *buf;
      size_t size;
      r = parse_extra(extra, &buf, &size);
      if (r == CUDA_SUCCESS && size < k->total) r = CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS && k->total > 0) memcpy(a->bytes, buf, k->total);
    } else {
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r != CUDA_SUCCESS) {
    fk_op_free(f, op);
    return r;
  }
  *out = op;
  return CUDA_SUCCESS;
}

void fk_run_kernel(t4a_fake *f, fk_ctx *ctx, const fk_op *op) {
  fk_func *fn = fk_handle_get(f, FK_H(op->u.kernel.func), FK_KIND_FUNC);
  if (fn == NULL) {
    /* The module was unloaded while the launch was queued. */
    fk_raise(ctx, CUDA_ERROR_LAUNCH_FAILED);
    return;
  }
  if (op->u.kernel.fn == NULL) return;
  t4a_fake_launch launch;
  memset(&launch, 0, sizeof launch);
  launch.fake = f;
  launch.ctx = ctx;
  launch.mod = fn->mod;
  for (int i = 0; i < 3; i++) {
    launch.grid[i] = op->u.kernel.grid[i];
    launch.block[i] = op->u.kernel.block[i];
  }
  launch.shared = op->u.kernel.shared;
  launch.attrs = op->u.kernel.attrs;
  const fk_args *a = &op->u.kernel.args;
  void *small[16];
  void **pv = small;
  if (a->num > FK_ARRAY_LEN(small)) {
    pv = calloc(a->num, sizeof *pv);
    if (pv == NULL) {
      fk_raise(ctx, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
      return;
    }
  }
  for (size_t i = 0; i < a->num; i++) pv[i] = a->bytes + a->offsets[i];
  op->u.kernel.fn(&launch, a->num > 0 ? pv : NULL, op->u.kernel.user);
  if (pv != small) free(pv);
}

static void *deref(t4a_fake_launch *launch, CUdeviceptr ptr, size_t bytes, int write) {
  if (launch == NULL || launch->faulted) return NULL;
  fk_lock();
  void *p = fk_resolve_device(launch->fake, launch->ctx, ptr, bytes, write, 1);
  if (p == NULL) {
    fk_raise(launch->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    launch->faulted = 1;
  }
  fk_unlock();
  return p;
}

CUdeviceptr t4a_fake_launch_global(t4a_fake_launch *launch, const char *name, size_t *out_bytes) {
  if (out_bytes != NULL) *out_bytes = 0;
  if (launch == NULL || launch->mod == NULL || name == NULL) return 0;
  fk_lock();
  CUdeviceptr p = 0;
  for (size_t i = 0; i < launch->mod->num_globals; i++) {
    const fk_modglobal *g = &launch->mod->globals[i];
    if (strcmp(g->name, name) == 0) {
      p = g->alloc->base;
      if (out_bytes != NULL) *out_bytes = g->alloc->size;
      break;
    }
  }
  fk_unlock();
  return p;
}

void t4a_fake_set_kernel_attrs(t4a_fake *fake, const char *name,
                               const t4a_fake_kernel_attrs *attrs) {
  if (fake == NULL || name == NULL || attrs == NULL) return;
  fk_lock();
  fk_kernel *k = fk_kernel_find(fake, name);
  if (k != NULL) {
    k->attrs = *attrs;
  } else {
    fprintf(stderr, "t4a_fake_set_kernel_attrs: no kernel '%s' is registered\n", name);
  }
  fk_unlock();
}

void *t4a_fake_deref(t4a_fake_launch *launch, CUdeviceptr ptr, size_t bytes) {
  return deref(launch, ptr, bytes, 0);
}

void *t4a_fake_deref_write(t4a_fake_launch *launch, CUdeviceptr ptr, size_t bytes) {
  return deref(launch, ptr, bytes, 1);
}

void t4a_fake_launch_dims(const t4a_fake_launch *launch, unsigned grid[3], unsigned block[3],
                          unsigned *shared_bytes) {
  if (launch == NULL) return;
  for (int i = 0; i < 3; i++) {
    if (grid != NULL) grid[i] = launch->grid[i];
    if (block != NULL) block[i] = launch->block[i];
  }
  if (shared_bytes != NULL) *shared_bytes = launch->shared;
}

CUresult fk_cuLaunchKernel(t4a_fake *f, CUfunction func, unsigned gx, unsigned gy, unsigned gz,
                           unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream h,
                           void **params, void **extra) {
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, h, &s);
  if (r != CUDA_SUCCESS) return r;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  fk_op *op;
  r = fk_build_launch(f, func, grid, block, shared, params, extra, s->ctx, &op);
  if (r != CUDA_SUCCESS) return r;
  return fk_submit(f, s, op);
}

CUresult fk_cuLaunchKernelEx(t4a_fake *f, const CUlaunchConfig *config, CUfunction func,
                             void **params, void **extra) {
  if (config == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (config->numAttrs > 0 && config->attrs == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < config->numAttrs; i++) {
    if ((unsigned)config->attrs[i].id > 16u) return CUDA_ERROR_INVALID_VALUE;
  }
  fk_stream *s;
  CUresult r = fk_stream_for_enqueue(f, config->hStream, &s);
  if (r != CUDA_SUCCESS) return r;
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  fk_op *op;
  r = fk_build_launch(f, func, grid, block, config->sharedMemBytes, params, extra, s->ctx, &op);
  if (r != CUDA_SUCCESS) return r;
  /* The attributes' limits (fake_occupancy.c): a refusal queues nothing. */
  r = fk_launch_attrs_read(f, config, func, &op->u.kernel.attrs);
  if (r != CUDA_SUCCESS) {
    fk_op_free(f, op);
    return r;
  }
  return fk_submit(f, s, op);
}
