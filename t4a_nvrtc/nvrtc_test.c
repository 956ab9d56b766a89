/* The NVRTC loader, against the real libnvrtc of the machine (NVRTC runs on the CPU). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "testing/lsan/nvrtc_suppressions.h"

/* Finds the GNU build-id note of an ELF image in memory; returns the offset of its descriptor
 * and its size in *n, or 0. */
static size_t build_id_offset(const unsigned char *img, size_t size, size_t *n) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)img;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return 0;
  for (size_t i = 0; i < eh->e_phnum; i++) {
    const Elf64_Phdr *ph =
        (const Elf64_Phdr *)(const void *)(img + eh->e_phoff + i * eh->e_phentsize);
    if (ph->p_type != PT_NOTE) continue;
    size_t off = ph->p_offset, end = ph->p_offset + ph->p_filesz;
    while (off + sizeof(Elf64_Nhdr) <= end && end <= size) {
      const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(const void *)(img + off);
      size_t name_sz = (nh->n_namesz + 3u) & ~(size_t)3u,
             desc_sz = (nh->n_descsz + 3u) & ~(size_t)3u;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          memcmp(img + off + sizeof *nh, "GNU", 4) == 0) {
        *n = nh->n_descsz;
        return off + sizeof *nh + name_sz;
      }
      off += sizeof *nh + name_sz + desc_sz;
    }
  }
  return 0;
}

/* NVRTC gets its built-in headers by soname, so when another copy of libnvrtc-builtins with that
 * soname is already in the process, that copy is what NVRTC uses, and its identity is what the
 * key must hold (not that of the copy t4a pins from libnvrtc's directory). A copy of the library
 * with a changed build-id is loaded first; the lib's identity must name it. Runs first in this
 * binary, before any lib has loaded the real builtins. */
static void test_builtins_identity_is_the_copy_nvrtc_uses(void **state) {
  (void)state;
  void *nv = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (nv == NULL) skip();
  struct link_map *lm = NULL;
  assert_int_equal(dlinfo(nv, RTLD_DI_LINKMAP, &lm), 0);
  int (*version)(int *, int *) = (int (*)(int *, int *))dlsym(nv, "nvrtcVersion");
  assert_non_null(version);
  int major = 0, minor = 0;
  assert_int_equal(version(&major, &minor), 0);
  char dir[4096], name[64], real[4200];
  snprintf(dir, sizeof dir, "%s", lm->l_name);
  char *slash = strrchr(dir, '/');
  assert_non_null(slash);
  *slash = '\0';
  snprintf(name, sizeof name, "libnvrtc-builtins.so.%d.%d", major, minor);
  snprintf(real, sizeof real, "%s/%s", dir, name);
  FILE *f = fopen(real, "rb");
  if (f == NULL) skip();
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *img = malloc((size_t)size);
  assert_non_null(img);
  assert_int_equal(fread(img, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  size_t id_bytes = 0, at = build_id_offset(img, (size_t)size, &id_bytes);
  assert_true(at > 0 && id_bytes > 0);
  img[at] ^= 0xff; /* another build, as far as the identity can tell */
  char want[300] = "builtins build-id ";
  for (size_t i = 0; i < id_bytes && i < 64; i++) {
    snprintf(want + strlen(want), sizeof want - strlen(want), "%02x", img[at + i]);
  }
  const char *base = getenv("TEST_TMPDIR");
  char copy_dir[4096], copy[4200];
  snprintf(copy_dir, sizeof copy_dir, "%s/t4a-builtins-XXXXXX", base != NULL ? base : "/tmp");
  assert_non_null(mkdtemp(copy_dir));
  snprintf(copy, sizeof copy, "%s/%s", copy_dir, name);
  f = fopen(copy, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(img, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  free(img);
  void *first = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(first);

  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  const char *id = t4a_nvrtc_lib_build_identity(lib);
  if (strstr(id, want) == NULL) print_error("identity \"%s\", want \"%s\"\n", id, want);
  assert_non_null(strstr(id, want));
  t4a_nvrtc_lib_release(lib);
  unlink(copy);
  rmdir(copy_dir);
  dlclose(nv);
  /* `first` stays loaded: NVRTC may hold it, and the process ends soon. */
}

/* T4A_LIBNVRTC_PATH names the library when the options do not; an explicit path wins. */
static void test_library_path_from_the_environment(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = (t4a_nvrtc_lib *)1;
  assert_int_equal(setenv("T4A_LIBNVRTC_PATH", "/nonexistent/env/libnvrtc.so.13", 1), 0);
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_NVRTC_NOT_FOUND);
  assert_null(lib);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/nonexistent/env/libnvrtc.so.13"));
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = "libnvrtc.so.13";
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_OK);
  assert_string_equal(t4a_nvrtc_lib_origin(lib), "libnvrtc.so.13");
  t4a_nvrtc_lib_release(lib);
  const char *alt = "/usr/local/cuda/lib64/libnvrtc.alt.so.13";
  if (access(alt, R_OK) == 0) {
    assert_int_equal(setenv("T4A_LIBNVRTC_PATH", alt, 1), 0);
    assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
    assert_string_equal(t4a_nvrtc_lib_origin(lib), alt);
    t4a_nvrtc_lib_release(lib);
  }
  assert_int_equal(setenv("T4A_LIBNVRTC_PATH", "", 1), 0); /* empty: as if unset */
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  assert_null(strstr(t4a_nvrtc_lib_origin(lib), ".alt"));
  t4a_nvrtc_lib_release(lib);
  assert_int_equal(unsetenv("T4A_LIBNVRTC_PATH"), 0);
}

static void test_loads_nvrtc_13(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_OK);
  int major = 0, minor = -1;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  assert_true(major >= 12);
  assert_true(minor >= 0);
  /* Picked by exact soname, never the .alt library. */
  assert_null(strstr(t4a_nvrtc_lib_origin(lib), ".alt"));
  assert_non_null(strstr(t4a_nvrtc_lib_origin(lib), "libnvrtc.so."));
  assert_true(t4a_nvrtc_lib_caps(lib) & T4A_NVRTC_CAP_CUBIN);
  int archs[128];
  size_t n = 0;
  assert_int_equal(t4a_nvrtc_lib_supported_archs(lib, archs, 128, &n), T4A_OK);
  int has90 = 0;
  for (size_t i = 0; i < n && i < 128; i++) has90 |= archs[i] == 90;
  assert_true(has90);
  t4a_nvrtc_lib_retain(lib);
  t4a_nvrtc_lib_release(lib);
  t4a_nvrtc_lib_release(lib);
  t4a_nvrtc_lib_release(NULL);
}

static void test_missing_library_is_typed(void **state) {
  (void)state;
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = "/nonexistent/libnvrtc.so.13";
  t4a_nvrtc_lib *lib = (t4a_nvrtc_lib *)1;
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_NVRTC_NOT_FOUND);
  assert_null(lib);
  t4a_error e;
  t4a_error_last(&e);
  assert_non_null(strstr(e.message, "/nonexistent/libnvrtc.so.13"));
}

static void test_library_without_nvrtc_symbols(void **state) {
  (void)state;
  t4a_nvrtc_lib_options o = T4A_NVRTC_LIB_OPTIONS_INIT;
  o.library_path = "libm.so.6"; /* loads, but is not NVRTC */
  t4a_nvrtc_lib *lib = NULL;
  assert_int_equal(t4a_nvrtc_lib_open(&o, &lib), T4A_NVRTC_SYMBOL_MISSING);
  assert_null(lib);
  t4a_error e;
  t4a_error_last(&e);
  assert_string_equal(e.entry, "nvrtcGetErrorString");
}

static int g_fail_point = -1;
static int fail_point(t4a_fault_point p, void *user) {
  (void)user;
  return (int)p == g_fail_point;
}

static void test_fault_points_are_typed(void **state) {
  (void)state;
  t4a_nvrtc_lib *lib = NULL;
  g_fail_point = T4A_FAULT_DLOPEN;
  t4a_fault_set_hook(fail_point, NULL);
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_NVRTC_NOT_FOUND);
  g_fail_point = T4A_FAULT_DLSYM;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_NVRTC_SYMBOL_MISSING);
  g_fail_point = T4A_FAULT_HOST_MALLOC;
  assert_int_equal(t4a_nvrtc_lib_open(NULL, &lib), T4A_HOST_OUT_OF_MEMORY);
  t4a_fault_set_hook(NULL, NULL);
  assert_null(lib);
  assert_int_equal(t4a_nvrtc_lib_open(NULL, NULL), T4A_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtins_identity_is_the_copy_nvrtc_uses), /* first: see there */
      cmocka_unit_test(test_loads_nvrtc_13),
      cmocka_unit_test(test_library_path_from_the_environment),
      cmocka_unit_test(test_missing_library_is_typed),
      cmocka_unit_test(test_library_without_nvrtc_symbols),
      cmocka_unit_test(test_fault_points_are_typed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
