/* Byte-input fuzz target: the inputs users hand t4a as bytes. Byte 0 picks the surface:
 *   0  module images: t4a_module_load with the rest as the image (exactly sized: a read past it
 *      is an AddressSanitizer report), under every image kind; a loaded module is asked for a
 *      kernel. PTX/CUBIN/fatbin detection, the ELF and fatbin header bounds (t4a_launch/module.c)
 *      and the fake driver's loaders behind them.
 *   1  NVRTC requests: the rest split at 0xff into source, program name, target, headers (name,
 *      content), name expressions and options, with explicit byte counts (embedded NULs,
 *      control characters, duplicates, includes, option spellings); compiled without the cache
 *      and through a memory cache, on the fake NVRTC (t4a_nvrtc/nvrtc_request.c,
 *      nvrtc_cacheable.c).
 *   2  disk-cache files: a valid entry of a fixed request is replaced, overwritten in part or
 *      cut by the rest, then a new cache on that directory compiles the request
 *      (t4a_nvrtc/nvrtc_disk.c).
 * Invariants: every failure is typed (a status of the table, the detail carrying it); a request
 * the cache accepts is accepted without the cache too, and a second cached compile of it is a
 * memory hit with the same key; every lowered name asked for comes back; a disk entry, however
 * damaged, never fails the compile and never changes the artifact (byte-exact with the fresh
 * compile's), and a damaged entry is never a disk hit. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/host_kernels.h"
#include "testing/fuzz/bytes_fuzz_regressions.h"
#include "testing/fuzz/fuzz_replay.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bytes_fuzz: invariant violated: %s%s%s\n", what, detail ? ": " : "",
          detail ? detail : "");
  abort();
}

static t4a_status typed(const char *op, t4a_status st) {
  if (st == T4A_OK) return st;
  char msg[400];
  if ((int)st < 0 || (int)st > (int)T4A_UPSTREAM_FAILED) {
    snprintf(msg, sizeof msg, "%s returned %d", op, (int)st);
    die("untyped status", msg);
  }
  t4a_error e;
  t4a_error_last(&e);
  if (e.status != st) {
    snprintf(msg, sizeof msg, "%s returned %s, detail says %s", op, t4a_status_name(st),
             t4a_status_name(e.status));
    die("detail does not match the status", msg);
  }
  return st;
}

/* ---- process-wide fixtures (made at the first input, kept: the fake is costly to rebuild) -- */

static struct {
  t4a_fake *fake;
  t4a_driver *drv;
  t4a_runtime *rt;
  t4a_nvrtc_lib *nvrtc;
  char dir[256];
  char entry[512];
  unsigned char *valid;
  size_t valid_bytes;
  unsigned char *expect; /* the artifact's bytes */
  size_t expect_bytes;
} g;

static const char k_disk_src[] = "extern \"C\" __global__ void disk_k(float *p) {}\n";

static t4a_nvrtc_request disk_request(void) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.source = k_disk_src;
  r.target = "sm_90";
  r.program_name = "disk.cu";
  return r;
}

static void read_file(const char *path, unsigned char **out, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) die("cannot read the disk entry", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc((size_t)n + 1);
  if (*out == NULL || fread(*out, 1, (size_t)n, f) != (size_t)n) die("read", path);
  fclose(f);
  *bytes = (size_t)n;
}

/* Removes the cache directory at exit (flat: entries and temporary files). */
static void remove_dir(void) {
  DIR *dir = opendir(g.dir);
  struct dirent *e;
  while (dir != NULL && (e = readdir(dir)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", g.dir, e->d_name);
    (void)unlink(p);
  }
  if (dir != NULL) closedir(dir);
  (void)rmdir(g.dir);
}

static void setup(void) {
  if (g.fake != NULL) return;
  t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
  static const size_t params[1] = {8};
  if (t4a_fake_create(&o, &g.fake) != T4A_OK || t4a_fake_driver(g.fake, &g.drv) != T4A_OK) {
    die("fake driver", NULL);
  }
  t4a_fake_register_kernel(g.fake, "k", 1, params, t4a_hk_none, NULL);
  t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
  ro.driver = g.drv;
  ro.xfer.chunk_bytes = 4096;
  ro.xfer.copy_threads = 1;
  if (t4a_runtime_open(0, &ro, &g.rt) != T4A_OK) die("runtime", NULL);
  if (t4a_fake_nvrtc_open(&g.nvrtc) != T4A_OK) die("fake NVRTC", NULL);
  const char *tmp = getenv("TMPDIR");
  snprintf(g.dir, sizeof g.dir, "%s/t4a-bytes-fuzz-XXXXXX", tmp != NULL ? tmp : "/tmp");
  if (mkdtemp(g.dir) == NULL) die("mkdtemp", g.dir);
  atexit(remove_dir);
  /* One valid entry: compile through a disk cache, find the file, keep its bytes. */
  t4a_nvrtc_cache_options co = T4A_NVRTC_CACHE_OPTIONS_INIT;
  co.disk_dir = g.dir;
  t4a_nvrtc_cache *c = NULL;
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_request r = disk_request();
  if (t4a_nvrtc_cache_create(g.nvrtc, &co, &c) != T4A_OK ||
      t4a_nvrtc_cache_compile(c, &r, &a, NULL) != T4A_OK) {
    die("the disk entry's first compile", NULL);
  }
  size_t n = 0;
  const void *d = t4a_nvrtc_artifact_data(a, &n);
  g.expect = malloc(n);
  memcpy(g.expect, d, n);
  g.expect_bytes = n;
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  DIR *dir = opendir(g.dir);
  struct dirent *e;
  while (dir != NULL && (e = readdir(dir)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".t4a") == 0) {
      snprintf(g.entry, sizeof g.entry, "%s/%s", g.dir, e->d_name);
    }
  }
  if (dir != NULL) closedir(dir);
  if (g.entry[0] == '\0') die("no disk entry written", g.dir);
  read_file(g.entry, &g.valid, &g.valid_bytes);
}

/* ---- 0: module images ---- */

static void fuzz_image(const uint8_t *data, size_t size) {
  if (size < 1) return;
  t4a_image_kind kind = (t4a_image_kind)(data[0] % 5); /* 4: an unknown kind value */
  size_t n = size - 1;
  unsigned char *img = malloc(n ? n : 1);
  if (n) memcpy(img, data + 1, n);
  t4a_module *m = (t4a_module *)img;
  t4a_status st = typed("t4a_module_load",
                        t4a_module_load(t4a_runtime_module_cache(g.rt), n ? img : NULL, n, kind,
                                        &m));
  if (st != T4A_OK && m != NULL) die("t4a_module_load failed and left *out set", NULL);
  if (st == T4A_OK && kind == 4) die("an unknown image kind loaded", NULL);
  if (st == T4A_OK) {
    t4a_function *f = NULL;
    (void)typed("t4a_module_get_function", t4a_module_get_function(m, "k", &f));
    t4a_function_release(f);
  }
  t4a_module_release(m);
  free(img);
  (void)t4a_fake_table(g.fake)->cuCtxSetCurrent(NULL);
  if (t4a_fake_sticky(g.fake, 0) != CUDA_SUCCESS) die("a module load faulted the device", NULL);
}

/* ---- 1: NVRTC requests ---- */

enum { MAXF = 48 };

typedef struct field {
  const char *p; /* into a NUL-terminated copy */
  size_t n;
} field;

static void fuzz_request(const uint8_t *data, size_t size) {
  if (size < 1) return;
  uint8_t flags = data[0];
  /* Fields: split at 0xff, each copied NUL-terminated (so a count of 0 also works). */
  char *copy = malloc(size + MAXF + 1);
  field f[MAXF];
  size_t nf = 0, w = 0, start = 1;
  for (size_t i = 1; i <= size && nf < MAXF; i++) {
    if (i == size || data[i] == 0xff) {
      size_t len = i - start;
      memcpy(copy + w, data + start, len);
      copy[w + len] = '\0';
      f[nf].p = copy + w;
      f[nf].n = len;
      nf++;
      w += len + 1;
      start = i + 1;
    }
  }
  size_t k = 0;
#define NEXT() (k < nf ? &f[k++] : NULL)
  field *src = NEXT(), *name = NEXT(), *target = NEXT();
  size_t num_headers = (flags >> 2) % 4, num_exprs = (flags >> 4) % 3;
  t4a_nvrtc_header headers[4];
  size_t h = 0;
  for (; h < num_headers; h++) {
    field *hn = NEXT(), *hc = NEXT();
    if (hn == NULL || hc == NULL) break;
    headers[h].name = hn->p;
    headers[h].name_bytes = (flags & 0x40) ? hn->n : 0;
    headers[h].content = hc->p;
    headers[h].content_bytes = (flags & 0x40) ? hc->n : 0;
  }
  const char *exprs[3];
  size_t x = 0;
  for (; x < num_exprs; x++) {
    field *e = NEXT();
    if (e == NULL) break;
    exprs[x] = e->p;
  }
  const char *opts[MAXF];
  size_t opt_bytes[MAXF], no = 0;
  for (field *o; (o = NEXT()) != NULL;) {
    opts[no] = o->p;
    opt_bytes[no++] = o->n;
  }
#undef NEXT
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.source = src != NULL ? src->p : NULL;
  r.source_bytes = src != NULL && (flags & 0x40) ? src->n : 0;
  r.program_name = name != NULL && name->n > 0 ? name->p : NULL;
  r.target = target != NULL && target->n > 0 ? target->p : "sm_90";
  r.output = (t4a_nvrtc_output)(flags % 4); /* 3: an unknown output */
  r.headers = h ? headers : NULL;
  r.num_headers = h;
  r.name_expressions = x ? exprs : NULL;
  r.num_name_expressions = x;
  r.options = no ? opts : NULL;
  r.option_bytes = no && (flags & 0x80) ? opt_bytes : NULL;
  r.num_options = no;

  t4a_nvrtc_artifact *plain = NULL, *cached = NULL, *again = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  t4a_status sp = typed("t4a_nvrtc_compile", t4a_nvrtc_compile(g.nvrtc, &r, &plain, &out));
  if (sp == T4A_OK) {
    if (t4a_nvrtc_artifact_num_lowered_names(plain) != x) {
      die("a compile lost a name expression", NULL);
    }
    for (size_t i = 0; i < x; i++) {
      if (t4a_nvrtc_artifact_lowered_name(plain, exprs[i]) == NULL) {
        die("a name expression has no lowered name", exprs[i]);
      }
    }
  }
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(g.nvrtc, NULL, &c) != T4A_OK) die("memory cache", NULL);
  t4a_status sc = typed("t4a_nvrtc_cache_compile", t4a_nvrtc_cache_compile(c, &r, &cached, &out));
  if (sc == T4A_OK) {
    if (sp != T4A_OK) die("the cache accepted a request the plain compile refused", NULL);
    t4a_status s2 = typed("t4a_nvrtc_cache_compile (again)",
                          t4a_nvrtc_cache_compile(c, &r, &again, &out));
    if (s2 != T4A_OK || out.origin != T4A_NVRTC_ORIGIN_MEMORY) {
      die("a second cached compile is not a memory hit", NULL);
    }
    uint8_t k1[16], k2[16];
    t4a_nvrtc_artifact_key(cached, k1);
    t4a_nvrtc_artifact_key(again, k2);
    if (memcmp(k1, k2, 16) != 0) die("one request, two keys", NULL);
  }
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(plain);
  t4a_nvrtc_artifact_release(cached);
  t4a_nvrtc_artifact_release(again);
  t4a_nvrtc_cache_destroy(c);
  free(copy);
}

/* ---- 2: disk-cache files ---- */

static void write_entry(const unsigned char *p, size_t n) {
  FILE *f = fopen(g.entry, "wb");
  if (f == NULL) die("cannot write the disk entry", g.entry);
  if (n > 0 && fwrite(p, 1, n, f) != n) die("write", g.entry);
  fclose(f);
}

static void fuzz_disk(const uint8_t *data, size_t size) {
  if (size < 1) return;
  uint8_t how = data[0] % 3;
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  unsigned char *buf = malloc(g.valid_bytes + n + 1);
  size_t len = 0;
  if (how == 0) { /* the whole file */
    memcpy(buf, p, n);
    len = n;
  } else if (how == 1) { /* the valid entry with bytes overwritten at an offset */
    memcpy(buf, g.valid, g.valid_bytes);
    len = g.valid_bytes;
    size_t off = n >= 2 ? ((size_t)p[0] | (size_t)p[1] << 8) % g.valid_bytes : 0;
    size_t m = n >= 2 ? n - 2 : 0;
    if (m > g.valid_bytes - off) m = g.valid_bytes - off;
    memcpy(buf + off, p + (n >= 2 ? 2 : 0), m);
  } else { /* the valid entry cut short */
    len = n >= 2 ? ((size_t)p[0] | (size_t)p[1] << 8) % (g.valid_bytes + 1) : 0;
    memcpy(buf, g.valid, len);
  }
  write_entry(buf, len);
  int damaged = len != g.valid_bytes || memcmp(buf, g.valid, len) != 0;
  t4a_nvrtc_cache_options co = T4A_NVRTC_CACHE_OPTIONS_INIT;
  co.disk_dir = g.dir;
  t4a_nvrtc_cache *c = NULL;
  if (t4a_nvrtc_cache_create(g.nvrtc, &co, &c) != T4A_OK) die("disk cache", NULL);
  t4a_nvrtc_request r = disk_request();
  t4a_nvrtc_artifact *a = NULL;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_cache_compile(c, &r, &a, &out);
  if (st != T4A_OK) die("a damaged disk entry failed the compile", t4a_status_name(st));
  size_t an = 0;
  const void *ad = t4a_nvrtc_artifact_data(a, &an);
  if (an != g.expect_bytes || memcmp(ad, g.expect, an) != 0) {
    die("a disk entry changed the artifact", NULL);
  }
  if (damaged && out.origin == T4A_NVRTC_ORIGIN_DISK) {
    die("a damaged disk entry was a disk hit", NULL);
  }
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(a);
  t4a_nvrtc_cache_destroy(c);
  free(buf);
  write_entry(g.valid, g.valid_bytes); /* the next input starts from the valid entry */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 65536) return 0;
  setup();
  t4a_error_clear();
  switch (data[0] % 3) {
    case 0: fuzz_image(data + 1, size - 1); break;
    case 1: fuzz_request(data + 1, size - 1); break;
    default: fuzz_disk(data + 1, size - 1); break;
  }
  return 0;
}
