/* The NVRTC loader: exact sonames, the catalogue resolver, capabilities, supported
 * architectures, the build identity, and the constructor from a ready table. The only file that
 * resolves NVRTC entry points by name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_nvrtc/nvrtc_internal.h"
#include "t4a_nvrtc/nvrtc_table.h"

typedef struct nvrtc_entry {
  const char *name;
  int required;
  size_t offset;
} nvrtc_entry;

static const nvrtc_entry k_entries[] = {
#define T4A_NVRTC_NEED_REQUIRED 1
#define T4A_NVRTC_NEED_OPTIONAL 0
#define T4A_NVRTC_ENTRY_(name, need) \
  {#name, T4A_NVRTC_NEED_##need, offsetof(t4a_nvrtc_table, name)},
    T4A_NVRTC_CATALOG(T4A_NVRTC_ENTRY_)
#undef T4A_NVRTC_ENTRY_
};
#define NUM_ENTRIES (sizeof k_entries / sizeof k_entries[0])

static void **slot(t4a_nvrtc_table *t, size_t i) {
  return (void **)((char *)t + k_entries[i].offset);
}

/* RTLD_NODELETE: NVRTC is never unmapped once loaded. It keeps process-lifetime state (its own
 * C++ runtime pools, threads), and unloading it buys nothing; releasing the last t4a_nvrtc_lib
 * frees t4a's object only. The same holds for the libnvrtc-builtins pinned below. */
static void *try_open(const char *path) {
  if (t4a_fault_sim(T4A_FAULT_DLOPEN)) return NULL;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

static void lib_free(t4a_nvrtc_lib *lib) {
  if (lib->dl_builtins != NULL) dlclose(lib->dl_builtins);
  if (lib->dl != NULL) dlclose(lib->dl);
  free(lib);
}

/* Opens the first candidate that loads; records the tried list in `tried`. */
static void *open_candidates(const char *explicit_path, char *origin, size_t origin_size,
                             char *tried, size_t tried_size) {
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *env_cuda = getenv("CUDA_PATH");
  const char *dirs[] = {NULL, env_cuda, "/usr/local/cuda"};
  size_t used = 0;
  tried[0] = '\0';
  if (explicit_path != NULL) {
    snprintf(origin, origin_size, "%s", explicit_path);
    void *h = try_open(explicit_path);
    if (h == NULL) {
      const char *why = dlerror();
      snprintf(tried, tried_size, "%s: %s", explicit_path, why != NULL ? why : "simulated failure");
    }
    return h;
  }
  for (size_t s = 0; s < sizeof sonames / sizeof sonames[0]; s++) {
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
      char path[256]; /* fits t4a_nvrtc_lib.origin */
      if (d == 0) {
        snprintf(path, sizeof path, "%s", sonames[s]);
      } else if (dirs[d] != NULL && dirs[d][0] != '\0') {
        snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], sonames[s]);
      } else {
        continue;
      }
      void *h = try_open(path);
      if (h != NULL) {
        snprintf(origin, origin_size, "%s", path);
        return h;
      }
      (void)dlerror();
      if (used < tried_size) {
        used += (size_t)snprintf(tried + used, tried_size - used, "%s%s", used ? ", " : "", path);
      }
    }
  }
  return NULL;
}

/* ---- Build identity ---------------------------------------------------------------------- */

typedef struct build_id_search {
  ElfW(Addr) addr;
  const char *name;
  char *hex; /* out: lowercase hex of NT_GNU_BUILD_ID, or "" */
  size_t hex_size;
} build_id_search;

static void hex_bytes(const unsigned char *p, size_t n, char *out, size_t out_size) {
  static const char digits[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n && o + 2 < out_size; i++) {
    out[o++] = digits[p[i] >> 4];
    out[o++] = digits[p[i] & 15];
  }
  if (out_size > 0) out[o < out_size ? o : out_size - 1] = '\0';
}

/* dl_iterate_phdr callback: finds the loaded object and reads its GNU build-id note from memory,
 * i.e. the build that actually runs, not whatever the file on disk has become. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  build_id_search *s = user;
  if (info->dlpi_addr != s->addr || info->dlpi_name == NULL ||
      strcmp(info->dlpi_name, s->name) != 0) {
    return 0;
  }
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_memsz;
    while (left >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
      size_t name_sz = (nh->n_namesz + 3u) & ~(size_t)3u;
      size_t desc_sz = (nh->n_descsz + 3u) & ~(size_t)3u;
      size_t total = sizeof *nh + name_sz + desc_sz;
      if (total > left) break;
      const unsigned char *name = p + sizeof *nh;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          nh->n_descsz > 0) {
        hex_bytes(name + name_sz, nh->n_descsz, s->hex, s->hex_size);
        return 1;
      }
      p += total;
      left -= total;
    }
  }
  return 1; /* the object was found; it has no build-id */
}

/* The loaded object behind `handle`: the name the loader recorded (l_name), its resolved path and
 * the lowercase hex of its GNU build-id read from memory ("" when it has none). Returns 0 if the
 * handle has no link map. */
int t4a_nvrtc_loaded_object(void *handle, char *l_name, size_t l_name_size, char *real_path,
                            size_t real_path_size, char *build_id, size_t build_id_size) {
  struct link_map *lm = NULL;
  real_path[0] = '\0';
  build_id[0] = '\0';
  if (l_name_size > 0) l_name[0] = '\0';
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return 0;
  build_id_search s = {lm->l_addr, lm->l_name, build_id, build_id_size};
  dl_iterate_phdr(find_build_id, &s);
  char resolved[PATH_MAX];
  if (realpath(lm->l_name, resolved) == NULL) snprintf(resolved, sizeof resolved, "%s", lm->l_name);
  snprintf(real_path, real_path_size, "%s", resolved);
  if (l_name_size > 0) snprintf(l_name, l_name_size, "%s", lm->l_name);
  return 1;
}

/* Describes the loaded object behind `handle`: "build-id <hex>" when it has one, else
 * "file <realpath> size <n> mtime <s.ns>". Writes the resolved path into real_path and the
 * build-id into build_id. */
static void describe_loaded(void *handle, char *out, size_t out_size, char *l_name,
                            size_t l_name_size, char *real_path, size_t real_path_size, char *hex,
                            size_t hex_size) {
  if (!t4a_nvrtc_loaded_object(handle, l_name, l_name_size, real_path, real_path_size, hex,
                               hex_size)) {
    snprintf(out, out_size, "unknown");
    return;
  }
  if (hex[0] != '\0') {
    snprintf(out, out_size, "build-id %s", hex);
    return;
  }
  struct stat st;
  if (stat(real_path, &st) == 0) {
    snprintf(out, out_size, "file %s size %lld mtime %lld.%09ld", real_path, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  } else {
    snprintf(out, out_size, "file %s", real_path);
  }
}

/* NVRTC loads its built-in headers from libnvrtc-builtins.so.<major>.<minor> (the .alt
 * variant from libnvrtc-builtins.alt.so.<major>.<minor>) by that name at each compile. t4a loads
 * that library first, from libnvrtc's own directory (else by soname), so that it stays loaded and
 * its identity can enter the key before anything is compiled. What NVRTC gets for the name is
 * whatever object of that soname the dynamic loader already holds, which is not t4a's copy when
 * another one was loaded into the process before (from another directory): so the identity is
 * that of the object the name resolves to now, asked with RTLD_NOLOAD. */
static void pin_builtins(t4a_nvrtc_lib *lib, const char *nvrtc_real_path, char *out,
                         size_t out_size) {
  /* The .alt variant of NVRTC loads its own .alt builtins. */
  const char *base = strrchr(nvrtc_real_path, '/');
  base = base != NULL ? base + 1 : nvrtc_real_path;
  int alt = strstr(base, ".alt.") != NULL;
  char name[64];
  snprintf(name, sizeof name, "libnvrtc-builtins%s.so.%d.%d", alt ? ".alt" : "", lib->major,
           lib->minor);
  char path[PATH_MAX + 64];
  const char *slash = strrchr(nvrtc_real_path, '/');
  if (slash != NULL) {
    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - nvrtc_real_path), nvrtc_real_path, name);
    lib->dl_builtins = try_open(path);
    if (lib->dl_builtins == NULL) (void)dlerror();
  }
  if (lib->dl_builtins == NULL) {
    lib->dl_builtins = try_open(name);
    if (lib->dl_builtins == NULL) (void)dlerror();
  }
  if (lib->dl_builtins == NULL) {
    snprintf(out, out_size, "%s not found", name);
    return;
  }
  void *resolved = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  if (resolved == NULL) (void)dlerror();
  describe_loaded(resolved != NULL ? resolved : lib->dl_builtins, out, out_size,
                  lib->builtins_load_name, sizeof lib->builtins_load_name, lib->builtins_path,
                  sizeof lib->builtins_path, lib->builtins_build_id, sizeof lib->builtins_build_id);
  if (resolved != NULL) dlclose(resolved); /* the reference RTLD_NOLOAD added */
}

static void compute_build_identity(t4a_nvrtc_lib *lib) {
  char nvrtc_desc[PATH_MAX + 96], builtins_desc[PATH_MAX + 96];
  describe_loaded(lib->dl, nvrtc_desc, sizeof nvrtc_desc, lib->load_name, sizeof lib->load_name,
                  lib->real_path, sizeof lib->real_path,
                  lib->build_id, sizeof lib->build_id);
  pin_builtins(lib, lib->real_path, builtins_desc, sizeof builtins_desc);
  snprintf(lib->build_identity, sizeof lib->build_identity, "nvrtc %d.%d %s; builtins %s",
           lib->major, lib->minor, nvrtc_desc, builtins_desc);
}

/* ---- Common finish ----------------------------------------------------------------------- */

t4a_status t4a_nvrtc_fail(const t4a_nvrtc_lib *lib, nvrtcResult r, const char *entry,
                          const char *what) {
  t4a_status st;
  switch (r) {
    case NVRTC_ERROR_OUT_OF_MEMORY:
      st = T4A_HOST_OUT_OF_MEMORY;
      break;
    case NVRTC_ERROR_COMPILATION:
      st = T4A_COMPILE_FAILED;
      break;
    case NVRTC_ERROR_INVALID_OPTION:
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      st = T4A_INVALID_ARGUMENT;
      break;
    case NVRTC_ERROR_TIME_FILE_WRITE_FAILED:
    case NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED:
      st = T4A_IO;
      break;
    default:
      st = T4A_NVRTC_ERROR;
      break;
  }
  const char *name = NULL;
  if (lib != NULL && lib->t.nvrtcGetErrorString != NULL) name = lib->t.nvrtcGetErrorString(r);
  return t4a_error_set_(st, entry, (int)r, name != NULL ? name : "NVRTC_ERROR_?", 0,
                        "%s failed: %s", entry, what != NULL ? what : (name != NULL ? name : "?"));
}

/* Version, capabilities and architectures, for a lib whose table is filled. */
static t4a_status finish(t4a_nvrtc_lib *lib) {
  nvrtcResult r = lib->t.nvrtcVersion(&lib->major, &lib->minor);
  if (r != NVRTC_SUCCESS) return t4a_nvrtc_fail(lib, r, "nvrtcVersion", NULL);
  lib->caps = 0;
  if (lib->t.nvrtcGetCUBINSize != NULL && lib->t.nvrtcGetCUBIN != NULL) {
    lib->caps |= T4A_NVRTC_CAP_CUBIN;
  }
  if (lib->t.nvrtcGetLTOIRSize != NULL && lib->t.nvrtcGetLTOIR != NULL) {
    lib->caps |= T4A_NVRTC_CAP_LTOIR;
  }
  if (lib->t.nvrtcGetPCHHeapSize != NULL && lib->t.nvrtcSetPCHHeapSize != NULL &&
      lib->t.nvrtcGetPCHCreateStatus != NULL && lib->t.nvrtcGetPCHHeapSizeRequired != NULL) {
    lib->caps |= T4A_NVRTC_CAP_PCH;
  }
  /* The architecture list is optional: when NVRTC cannot give it (or gives a count t4a cannot
   * hold), the capability is dropped and targets go to NVRTC unchecked, as without the entries. */
  if (lib->t.nvrtcGetNumSupportedArchs != NULL && lib->t.nvrtcGetSupportedArchs != NULL) {
    int n = 0;
    int archs[T4A_NVRTC_MAX_ARCHS];
    if (lib->t.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
        n <= T4A_NVRTC_MAX_ARCHS && lib->t.nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
      memcpy(lib->archs, archs, (size_t)n * sizeof archs[0]);
      lib->num_archs = (size_t)n;
      lib->caps |= T4A_NVRTC_CAP_SUPPORTED_ARCHS;
    }
  }
  return T4A_OK;
}

t4a_status t4a_nvrtc_lib_open(const t4a_nvrtc_lib_options *options, t4a_nvrtc_lib **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  const char *path = options != NULL ? options->library_path : NULL;
  if (path == NULL || path[0] == '\0') path = getenv("T4A_LIBNVRTC_PATH");
  if (path != NULL && path[0] == '\0') path = NULL;

  t4a_nvrtc_lib *lib = t4a_host_calloc(1, sizeof *lib);
  if (lib == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&lib->refs, 1);
  char tried[768];
  t4a_status st;
  lib->dl = open_candidates(path, lib->origin, sizeof lib->origin, tried, sizeof tried);
  if (lib->dl == NULL) {
    st = t4a_error_set_(T4A_NVRTC_NOT_FOUND, "dlopen", 0, NULL, 0,
                        "cannot load NVRTC (tried %s); install the CUDA toolkit's NVRTC or set "
                        "T4A_LIBNVRTC_PATH",
                        tried);
    goto fail;
  }
  for (size_t i = 0; i < NUM_ENTRIES; i++) {
    void *fn = t4a_fault_sim(T4A_FAULT_DLSYM) ? NULL : dlsym(lib->dl, k_entries[i].name);
    *slot(&lib->t, i) = fn;
    if (fn == NULL && k_entries[i].required) {
      st = t4a_error_set_(T4A_NVRTC_SYMBOL_MISSING, k_entries[i].name, 0, NULL, 0,
                          "%s has no %s; t4a needs NVRTC 12.0 or newer", lib->origin,
                          k_entries[i].name);
      goto fail;
    }
  }
  st = finish(lib);
  if (st != T4A_OK) goto fail;
  compute_build_identity(lib);
  *out = lib;
  return T4A_OK;
fail:
  lib_free(lib);
  return st;
}

t4a_status t4a_nvrtc_lib_create_from_table(const t4a_nvrtc_table *table, const char *origin,
                                           const char *build_identity, t4a_nvrtc_lib **out) {
  if (out == NULL) return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "out is NULL");
  *out = NULL;
  if (table == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "table is NULL");
  }
  t4a_nvrtc_lib *lib = t4a_host_calloc(1, sizeof *lib);
  if (lib == NULL) return T4A_HOST_OUT_OF_MEMORY;
  atomic_init(&lib->refs, 1);
  lib->t = *table;
  snprintf(lib->origin, sizeof lib->origin, "%s", origin != NULL ? origin : "injected");
  for (size_t i = 0; i < NUM_ENTRIES; i++) {
    if (*slot(&lib->t, i) == NULL && k_entries[i].required) {
      t4a_status st = t4a_error_set_(T4A_NVRTC_SYMBOL_MISSING, k_entries[i].name, 0, NULL, 0,
                                     "the table %s has no %s", lib->origin, k_entries[i].name);
      free(lib);
      return st;
    }
  }
  t4a_status st = finish(lib);
  if (st != T4A_OK) {
    free(lib);
    return st;
  }
  if (build_identity != NULL) {
    snprintf(lib->build_identity, sizeof lib->build_identity, "%s", build_identity);
  } else {
    snprintf(lib->build_identity, sizeof lib->build_identity, "injected:%s", lib->origin);
  }
  *out = lib;
  return T4A_OK;
}

void t4a_nvrtc_lib_retain(t4a_nvrtc_lib *lib) {
  if (lib != NULL) atomic_fetch_add_explicit(&lib->refs, 1, memory_order_relaxed);
}

void t4a_nvrtc_lib_release(t4a_nvrtc_lib *lib) {
  if (lib == NULL) return;
  if (atomic_fetch_sub_explicit(&lib->refs, 1, memory_order_acq_rel) == 1) lib_free(lib);
}

void t4a_nvrtc_lib_version(const t4a_nvrtc_lib *lib, int *out_major, int *out_minor) {
  if (out_major != NULL) *out_major = lib != NULL ? lib->major : 0;
  if (out_minor != NULL) *out_minor = lib != NULL ? lib->minor : 0;
}

uint32_t t4a_nvrtc_lib_caps(const t4a_nvrtc_lib *lib) { return lib != NULL ? lib->caps : 0; }

const char *t4a_nvrtc_lib_origin(const t4a_nvrtc_lib *lib) {
  return lib != NULL ? lib->origin : "";
}

const char *t4a_nvrtc_lib_build_identity(const t4a_nvrtc_lib *lib) {
  return lib != NULL ? lib->build_identity : "";
}

void t4a_nvrtc_lib_stats(const t4a_nvrtc_lib *lib, t4a_counter_values *out) {
  t4a_counters_stats(lib != NULL ? &lib->counters : NULL, out);
}

t4a_status t4a_nvrtc_lib_supported_archs(const t4a_nvrtc_lib *lib, int *out, size_t capacity,
                                         size_t *out_num) {
  if (out_num != NULL) *out_num = 0;
  if (lib == NULL || out_num == NULL || (out == NULL && capacity > 0)) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "lib, out or out_num is NULL");
  }
  if (!(lib->caps & T4A_NVRTC_CAP_SUPPORTED_ARCHS)) {
    return t4a_error_set_(T4A_UNSUPPORTED, "nvrtcGetSupportedArchs", 0, NULL, 0,
                          "%s cannot list its architectures", lib->origin);
  }
  for (size_t i = 0; i < lib->num_archs && i < capacity; i++) out[i] = lib->archs[i];
  *out_num = lib->num_archs;
  return T4A_OK;
}
