/* Bad inputs, one table: each is tried on the fake driver and a fake NVRTC, must return its
 * status with a detail that carries it, and must lose nothing: after every input the runtime
 * still round-trips bytes exactly, and at the end the fake driver holds nothing, no NVRTC program
 * is alive and the disk cache directory holds only valid entries. T4A_BAD_INPUT_TABLE=1 prints
 * the table as markdown (docs/validation.md, "Bad inputs"). */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/fixture/fixture.h"
#include "testing/fixture/runtime_fixture.h"
#include "testing/fake_nvrtc/fake_nvrtc.h"

static struct {
  t4a_fixture fx; /* a fake of two devices and its driver; the runtimes open their lanes */
  t4a_runtime *rt, *other;
  t4a_nvrtc_lib *nvrtc;
  t4a_nvrtc_cache *cache;
  t4a_function *fn;
  t4a_buffer *buf, *obuf;
  char dir[256];
  int print;
  int rows;
} g;

static const char k_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                            ".visible .entry k(.param .u64 p, .param .u32 n)\n{\n  ret;\n}\n";

/* Nothing lost: the runtime still round-trips 4 KiB exactly. */
static void still_works(void) {
  unsigned char up[4096], down[4096];
  for (size_t i = 0; i < sizeof up; i++) up[i] = (unsigned char)(i * 13 + 5);
  memset(down, 0, sizeof down);
  assert_int_equal(t4a_runtime_upload(g.rt, g.buf, 0, up, sizeof up), T4A_OK);
  assert_int_equal(t4a_runtime_download(g.rt, g.buf, 0, down, sizeof down), T4A_OK);
  assert_memory_equal(up, down, sizeof up);
}

static void row(const char *area, const char *input, t4a_status got, t4a_status want,
                const char *also) {
  t4a_error e;
  t4a_error_last(&e);
  if (got != want) {
    fail_msg("%s: %s: got %s (%s), want %s", area, input, t4a_status_name(got), e.message,
             t4a_status_name(want));
  }
  if (got != T4A_OK) assert_int_equal(e.status, got);
  still_works();
  g.rows++;
  if (g.print) {
    char msg[sizeof e.message];
    memcpy(msg, got == T4A_OK ? "" : e.message, got == T4A_OK ? 1 : sizeof msg);
    msg[sizeof msg - 1] = '\0';
    for (char *c = msg; *c; c++) {
      if (*c == '|' || *c == '\n') *c = ' ';
    }
    printf("| %s | %s | `%s` %s | %s |\n", area, input, t4a_status_name(got), msg,
           also != NULL ? also : "runtime round-trips 4 KiB afterwards");
  }
}

/* ---- module images ---- */

static t4a_status load(const void *img, size_t n, t4a_image_kind kind) {
  t4a_module *m = NULL;
  t4a_status st = t4a_module_load(t4a_runtime_module_cache(g.rt), img, n, kind, &m);
  if (st != T4A_OK) assert_null(m);
  t4a_module_release(m);
  return st;
}

static void test_images(void **state) {
  (void)state;
  static const char *area = "module image";
  row(area, "NULL image", load(NULL, 16, T4A_IMAGE_AUTO), T4A_INVALID_ARGUMENT, NULL);
  row(area, "0 bytes", load(k_ptx, 0, T4A_IMAGE_AUTO), T4A_INVALID_ARGUMENT, NULL);
  row(area, "text that is not PTX, kind AUTO", load("hello, world", 12, T4A_IMAGE_AUTO),
      T4A_INVALID_ARGUMENT, NULL);
  row(area, "an unknown kind value (9)", load(k_ptx, sizeof k_ptx, (t4a_image_kind)9),
      T4A_INVALID_ARGUMENT, NULL);
  row(area, "PTX handed in as CUBIN", load(k_ptx, sizeof k_ptx, T4A_IMAGE_CUBIN),
      T4A_INVALID_ARGUMENT, NULL);
  unsigned char elf[sizeof(Elf64_Ehdr)];
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS32;
  memcpy(elf, &eh, sizeof eh);
  row(area, "ELF, 32-bit class", load(elf, sizeof elf, T4A_IMAGE_AUTO), T4A_INVALID_ARGUMENT,
      NULL);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_shoff = 1u << 20;
  eh.e_shnum = 4;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  memcpy(elf, &eh, sizeof eh);
  row(area, "ELF64 whose section table lies past its end", load(elf, sizeof elf, T4A_IMAGE_AUTO),
      T4A_INVALID_ARGUMENT, NULL);
  eh.e_shnum = 0;
  eh.e_phoff = sizeof eh;
  eh.e_phnum = 1;
  eh.e_phentsize = 12; /* not sizeof(Elf64_Phdr) */
  memcpy(elf, &eh, sizeof eh);
  row(area, "ELF64 with a wrong program-header entry size", load(elf, sizeof elf,
                                                                 T4A_IMAGE_AUTO),
      T4A_INVALID_ARGUMENT, NULL);
  unsigned char fat[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
  fat[8] = 0xff; /* fatSize 255 > 16 bytes that follow */
  row(area, "fatbin header declaring 255 bytes in a 32-byte image", load(fat, sizeof fat,
                                                                         T4A_IMAGE_AUTO),
      T4A_INVALID_ARGUMENT, NULL);
  t4a_module *m = NULL;
  assert_int_equal(t4a_runtime_load_image(g.rt, k_ptx, sizeof k_ptx, &m), T4A_OK);
  t4a_function *f = (t4a_function *)1;
  row(area, "a kernel name the module lacks", t4a_runtime_function(g.rt, m, "nope", &f),
      T4A_UNKNOWN_ENTRY_POINT, NULL);
  assert_null(f);
  t4a_module_release(m);
}

/* ---- NVRTC requests ---- */

static t4a_nvrtc_request good(void) {
  t4a_nvrtc_request r = T4A_NVRTC_REQUEST_INIT;
  r.source = "extern \"C\" __global__ void k(float *p, int n) {}\n";
  r.target = "sm_90";
  return r;
}

static t4a_status compile(const t4a_nvrtc_request *r, int cached) {
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = cached ? t4a_nvrtc_cache_compile(g.cache, r, &a, &out)
                         : t4a_nvrtc_compile(g.nvrtc, r, &a, &out);
  if (st != T4A_OK) assert_null(a);
  t4a_nvrtc_artifact_release(st == T4A_OK ? a : NULL);
  t4a_nvrtc_outcome_deinit(&out);
  assert_int_equal(t4a_fake_nvrtc_programs_live(), 0);
  return st;
}

static void test_requests(void **state) {
  (void)state;
  static const char *area = "NVRTC request";
  static const char *also = "no artifact; no NVRTC program alive; runtime round-trips";
  t4a_nvrtc_request r = good();
  r.source = NULL;
  row(area, "no source", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.source = "__global__ void k() {}\0tail";
  r.source_bytes = 27;
  row(area, "a NUL inside the source (source_bytes)", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.program_name = "a\nb.cu";
  row(area, "a newline in the program name", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  t4a_nvrtc_header h[2] = {{"", "x", 0, 0}, {"a.h", "y", 0, 0}};
  r = good();
  r.headers = h;
  r.num_headers = 1;
  row(area, "an empty header name", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  h[0].name = "a.h";
  r.num_headers = 2;
  row(area, "two headers named a.h", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  h[0].name = "a\x01.h";
  r.num_headers = 1;
  row(area, "a control character in a header name", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  const char *opt[1] = {"-arch=sm_80"};
  r = good();
  r.options = opt;
  r.num_options = 1;
  row(area, "option -arch=sm_80 (the target is the request's)", compile(&r, 0),
      T4A_INVALID_ARGUMENT, also);
  opt[0] = "-I/tmp";
  row(area, "option -I/tmp through the cache (reads files)", compile(&r, 1),
      T4A_INVALID_ARGUMENT, also);
  opt[0] = "@options.txt";
  row(area, "a response file @options.txt through the cache", compile(&r, 1),
      T4A_INVALID_ARGUMENT, also);
  opt[0] = "--unknown-option-xyz";
  row(area, "an option t4a does not know, through the cache", compile(&r, 1),
      T4A_INVALID_ARGUMENT, also);
  opt[0] = "-DA\0B";
  size_t ob[1] = {5};
  r.option_bytes = ob;
  row(area, "a NUL inside an option (option_bytes)", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.target = "sm_9x";
  row(area, "target sm_9x", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.target = NULL;
  row(area, "no target", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.output = (t4a_nvrtc_output)7;
  row(area, "output kind 7", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.output = T4A_NVRTC_OUTPUT_CUBIN;
  row(area, "CUBIN from an NVRTC without nvrtcGetCUBIN", compile(&r, 0), T4A_UNSUPPORTED, also);
  r = good();
  r.source = "#include \"missing.h\"\n__global__ void k() {}\n";
  row(area, "#include of a header the request does not name, through the cache", compile(&r, 1),
      T4A_INVALID_ARGUMENT, also);
  r.source = "#include \"/etc/passwd\"\n__global__ void k() {}\n";
  row(area, "#include of an absolute path, through the cache", compile(&r, 1),
      T4A_INVALID_ARGUMENT, also);
  r.source = "#define H <missing.h>\n#include H\n__global__ void k() {}\n";
  row(area, "#include of a macro, through the cache", compile(&r, 1), T4A_INVALID_ARGUMENT, also);
  const char *ex[2] = {"&k", "&k"};
  r = good();
  r.name_expressions = ex;
  r.num_name_expressions = 2;
  row(area, "the same name expression twice", compile(&r, 0), T4A_INVALID_ARGUMENT, also);
  r = good();
  r.source = "#error no\n";
  row(area, "a source that does not compile", compile(&r, 1), T4A_COMPILE_FAILED,
      "the log in the outcome; nothing cached (the next call compiles again)");
}

/* ---- nvJitLink links (real NVRTC and nvJitLink: skipped without them) ---- */

static t4a_status link_row(t4a_jitlink_cache *c, const t4a_nvrtc_artifact *const *in, size_t n,
                           const char *option, const char *target, t4a_nvrtc_outcome *out) {
  t4a_jitlink_request r = T4A_JITLINK_REQUEST_INIT;
  r.inputs = in;
  r.num_inputs = n;
  r.options = option != NULL ? &option : NULL;
  r.num_options = option != NULL ? 1 : 0;
  r.target = target;
  t4a_nvrtc_artifact *a = (t4a_nvrtc_artifact *)1;
  t4a_status st = t4a_jitlink_cache_link(c, &r, &a, out);
  if (st != T4A_OK) assert_null(a);
  t4a_nvrtc_artifact_release(st == T4A_OK ? a : NULL);
  struct t4a_jitlink_cache_stats s;
  t4a_jitlink_cache_stats(c, &s);
  if (st != T4A_OK) assert_int_equal(s.memory_entries, 0); /* nothing cached */
  return st;
}

static void test_links(void **state) {
  (void)state;
  static const char *area = "nvJitLink link";
  t4a_nvrtc_lib *nv = NULL;
  t4a_jitlink_lib *jl = NULL;
  if (t4a_nvrtc_lib_open(NULL, &nv) != T4A_OK || t4a_jitlink_lib_open(NULL, &jl) != T4A_OK) {
    t4a_nvrtc_lib_release(nv);
    fprintf(stderr, "# NVRTC or nvJitLink is not available: skipped\n");
    skip();
  }
  static const char *const rdc[1] = {"-rdc=true"};
  t4a_nvrtc_request q = T4A_NVRTC_REQUEST_INIT;
  q.source = "extern \"C\" __device__ float missing_fn(float);\n"
             "extern \"C\" __global__ void k(float *p) { p[0] = missing_fn(p[0]); }\n";
  q.target = "sm_90";
  q.output = T4A_NVRTC_OUTPUT_LTOIR;
  q.options = rdc;
  q.num_options = 1;
  t4a_nvrtc_artifact *lto = NULL, *cubin = NULL, *ptx = NULL;
  assert_int_equal(t4a_nvrtc_compile(nv, &q, &lto, NULL), T4A_OK);
  q.source = "extern \"C\" __global__ void z(float *p) { p[0] = 1; }\n";
  q.output = T4A_NVRTC_OUTPUT_CUBIN;
  q.options = NULL;
  q.num_options = 0;
  assert_int_equal(t4a_nvrtc_compile(nv, &q, &cubin, NULL), T4A_OK);
  t4a_nvrtc_request p = good();
  assert_int_equal(t4a_nvrtc_compile(g.nvrtc, &p, &ptx, NULL), T4A_OK); /* the fake's PTX */
  t4a_jitlink_cache *c = NULL;
  assert_int_equal(t4a_jitlink_cache_create(jl, NULL, &c), T4A_OK);
  const char *also = "no artifact; nothing cached; runtime round-trips";
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  const t4a_nvrtc_artifact *in[2] = {lto, ptx};
  row(area, "a PTX input", link_row(c, in, 2, NULL, NULL, &out), T4A_INVALID_ARGUMENT, also);
  in[1] = cubin;
  row(area, "a CUBIN input", link_row(c, in, 2, NULL, NULL, &out), T4A_INVALID_ARGUMENT, also);
  row(area, "no input", link_row(c, in, 0, NULL, NULL, &out), T4A_INVALID_ARGUMENT, also);
  row(area, "option -arch=sm_80 (the target is the request's)",
      link_row(c, in, 1, "-arch=sm_80", NULL, &out), T4A_INVALID_ARGUMENT, also);
  row(area, "option -Xptxas=-v through the link cache (not on its list)",
      link_row(c, in, 1, "-Xptxas=-v", NULL, &out), T4A_INVALID_ARGUMENT, also);
  row(area, "target compute_90", link_row(c, in, 1, NULL, "compute_90", &out),
      T4A_INVALID_ARGUMENT, also);
  row(area, "target sm_80 below the input's sm_90", link_row(c, in, 1, NULL, "sm_80", &out),
      T4A_INVALID_ARGUMENT, also);
  row(area, "an undefined symbol (missing_fn)", link_row(c, in, 1, NULL, NULL, &out),
      T4A_LINK_FAILED, "nvJitLink's log in the outcome; nothing cached (the next call links again)");
  assert_non_null(out.log);
  assert_non_null(strstr(out.log, "missing_fn"));
  t4a_module *m = (t4a_module *)1;
  row(area, "an LTO-IR artifact loaded as a module", t4a_runtime_load(g.rt, lto, &m),
      T4A_INVALID_ARGUMENT, NULL);
  assert_null(m);
  t4a_nvrtc_outcome_deinit(&out);
  t4a_jitlink_cache_destroy(c);
  t4a_jitlink_lib_release(jl);
  t4a_nvrtc_artifact_release(lto);
  t4a_nvrtc_artifact_release(cubin);
  t4a_nvrtc_artifact_release(ptx);
  t4a_nvrtc_lib_release(nv);
}

/* ---- disk-cache files ---- */

static int find_entry(char *out, size_t size) {
  DIR *d = opendir(g.dir);
  struct dirent *e;
  int found = 0;
  while (d != NULL && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > 4 && strcmp(e->d_name + n - 4, ".t4a") == 0) {
      snprintf(out, size, "%s/%s", g.dir, e->d_name);
      found = 1;
    }
  }
  if (d != NULL) closedir(d);
  return found;
}

/* Damages the entry with `how`, then a new cache compiles the request: it must succeed by
 * compiling again, with the same bytes, and count the entry as corrupt. */
static void damaged(const char *input, void (*how)(const char *path)) {
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = g.dir;
  t4a_nvrtc_cache *c = NULL;
  t4a_nvrtc_request r = good();
  t4a_nvrtc_artifact *first = NULL, *again = NULL;
  assert_int_equal(t4a_nvrtc_cache_create(g.nvrtc, &o, &c), T4A_OK);
  assert_int_equal(t4a_nvrtc_cache_compile(c, &r, &first, NULL), T4A_OK);
  t4a_nvrtc_cache_destroy(c);
  char path[512];
  assert_true(find_entry(path, sizeof path));
  how(path);
  assert_int_equal(t4a_nvrtc_cache_create(g.nvrtc, &o, &c), T4A_OK);
  t4a_nvrtc_outcome out = T4A_NVRTC_OUTCOME_INIT;
  t4a_status st = t4a_nvrtc_cache_compile(c, &r, &again, &out);
  assert_int_equal(out.origin, T4A_NVRTC_ORIGIN_COMPILED);
  struct t4a_nvrtc_cache_stats cs;
  t4a_nvrtc_cache_stats(c, &cs);
  assert_int_equal(cs.counters.nvrtc_disk_corrupt, 1);
  size_t n1 = 0, n2 = 0;
  const void *d1 = t4a_nvrtc_artifact_data(first, &n1), *d2 = t4a_nvrtc_artifact_data(again, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(d1, d2, n1);
  t4a_nvrtc_outcome_deinit(&out);
  t4a_nvrtc_artifact_release(first);
  t4a_nvrtc_artifact_release(again);
  t4a_nvrtc_cache_destroy(c);
  row("disk-cache entry", input, st, T4A_OK,
      "recompiled (origin compiled), counted in nvrtc_disk_corrupt, same bytes as before; the "
      "entry is rewritten");
}

static void garbage(const char *path) {
  FILE *f = fopen(path, "wb");
  fputs("not a t4a entry", f);
  fclose(f);
}
static void truncate_half(const char *path) {
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  assert_int_equal(truncate(path, n / 2), 0);
}
static void flip_last(const char *path) {
  FILE *f = fopen(path, "r+b");
  fseek(f, -2, SEEK_END);
  int c = fgetc(f);
  fseek(f, -2, SEEK_END);
  fputc(c ^ 0x40, f);
  fclose(f);
}
static void empty(const char *path) { assert_int_equal(truncate(path, 0), 0); }

static void test_disk(void **state) {
  (void)state;
  damaged("the entry replaced by 15 bytes of text", garbage);
  damaged("the entry cut to half its length", truncate_half);
  damaged("one payload byte flipped", flip_last);
  damaged("the entry emptied (0 bytes)", empty);
  char file[300];
  snprintf(file, sizeof file, "%s/a-file", g.dir);
  FILE *f = fopen(file, "w");
  fclose(f);
  t4a_nvrtc_cache_options o = T4A_NVRTC_CACHE_OPTIONS_INIT;
  o.disk_dir = file;
  t4a_nvrtc_cache *c = (t4a_nvrtc_cache *)1;
  row("disk-cache entry", "disk_dir naming a regular file", t4a_nvrtc_cache_create(g.nvrtc, &o, &c),
      T4A_IO, "no cache");
  assert_null(c);
  unlink(file);
}

/* ---- the runtime's short paths ---- */

static void test_runtime(void **state) {
  (void)state;
  static const char *area = "runtime call";
  unsigned char host[64] = {0};
  row(area, "upload past the buffer's end", t4a_runtime_upload(g.rt, g.buf, 4090, host, 64),
      T4A_INVALID_ARGUMENT, NULL);
  row(area, "download into NULL", t4a_runtime_download(g.rt, g.buf, 0, NULL, 64),
      T4A_INVALID_ARGUMENT, NULL);
  row(area, "copy between overlapping ranges of one buffer",
      t4a_runtime_copy(g.rt, g.buf, 0, g.buf, 32, 64), T4A_INVALID_ARGUMENT, NULL);
  row(area, "copy from a buffer of another runtime",
      t4a_runtime_copy(g.rt, g.buf, 0, g.obuf, 0, 64), T4A_FOREIGN_HANDLE, NULL);
  t4a_buffer *b = (t4a_buffer *)1;
  row(area, "a buffer of 0 bytes", t4a_runtime_buffer(g.rt, 0, &b), T4A_INVALID_ARGUMENT, NULL);
  assert_null(b);
  int n = 1;
  t4a_arg args[2] = {t4a_arg_buffer(g.buf, 0), t4a_arg_scalar(&n, 4)};
  row(area, "launch with 1 argument for 2 parameters",
      t4a_runtime_launch(g.rt, g.fn, 1, 1, args, 1), T4A_ARGUMENT_MISMATCH, NULL);
  t4a_arg wide[2] = {t4a_arg_buffer(g.buf, 0), t4a_arg_scalar(&n, 2)};
  row(area, "launch with a 2-byte scalar for an int", t4a_runtime_launch(g.rt, g.fn, 1, 1, wide, 2),
      T4A_ARGUMENT_MISMATCH, NULL);
  t4a_arg past[2] = {t4a_arg_buffer(g.buf, 5000), t4a_arg_scalar(&n, 4)};
  row(area, "launch with a buffer offset past its end",
      t4a_runtime_launch(g.rt, g.fn, 1, 1, past, 2), T4A_INVALID_ARGUMENT, NULL);
  row(area, "launch with 0 threads per block", t4a_runtime_launch(g.rt, g.fn, 1, 0, args, 2),
      T4A_INVALID_LAUNCH, NULL);
  row(area, "launch with 4096 threads per block", t4a_runtime_launch(g.rt, g.fn, 1, 4096, args, 2),
      T4A_INVALID_LAUNCH, NULL);
  t4a_arg foreign[2] = {t4a_arg_buffer(g.obuf, 0), t4a_arg_scalar(&n, 4)};
  row(area, "launch with a buffer of another runtime",
      t4a_runtime_launch(g.rt, g.fn, 1, 1, foreign, 2), T4A_FOREIGN_HANDLE, NULL);
  char json[16];
  size_t need = 0;
  row(area, "stats JSON into 16 bytes", t4a_runtime_stats_json(g.rt, json, sizeof json, &need),
      T4A_LIMIT_EXCEEDED, "the size needed returned");
  assert_true(need > sizeof json);
  t4a_runtime_options o = T4A_RUNTIME_OPTIONS_INIT;
  o.driver = g.fx.drv;
  t4a_runtime *rt = (t4a_runtime *)1;
  row(area, "open device 5 of 2", t4a_runtime_open(5, &o, &rt), T4A_INVALID_DEVICE, NULL);
  assert_null(rt);
}

/* Issue 22's calls: a stream of another runtime, an event of another device's context, fills
 * past the end or misaligned, elapsed time of non-timing events, a host function that re-enters. */
typedef struct reenter_probe {
  t4a_status sync, memset;
  t4a_error sync_detail, memset_detail; /* the callback thread's, shown on the test's */
  int ran;
} reenter_probe;
static void reenter_fn(void *p) {
  reenter_probe *r = p;
  r->sync = t4a_runtime_sync(g.rt);
  t4a_error_last(&r->sync_detail);
  r->memset = t4a_runtime_memset(g.rt, NULL, g.buf, 0, 4, 4, 0);
  t4a_error_last(&r->memset_detail);
  r->ran = 1;
}

static void test_everyday(void **state) {
  (void)state;
  static const char *area = "events, fills, host functions";
  t4a_stream *stream_of_other = NULL;
  assert_int_equal(t4a_stream_create(g.other, NULL, &stream_of_other), T4A_OK);
  row(area, "a fill on a stream that is not this runtime's",
      t4a_runtime_memset(g.rt, stream_of_other, g.buf, 0, 4, 4, 0), T4A_FOREIGN_HANDLE, NULL);
  row(area, "a fill past the buffer's end", t4a_runtime_memset(g.rt, NULL, g.buf, 4092, 2, 4, 0),
      T4A_INVALID_ARGUMENT, "nothing enqueued; runtime round-trips 4 KiB afterwards");
  row(area, "a 32-bit fill at a 2-byte offset", t4a_runtime_memset(g.rt, NULL, g.buf, 2, 1, 4, 0),
      T4A_INVALID_ARGUMENT, "nothing enqueued; runtime round-trips 4 KiB afterwards");
  row(area, "a fill of a buffer of another runtime",
      t4a_runtime_memset(g.rt, NULL, g.obuf, 0, 4, 4, 0), T4A_FOREIGN_HANDLE, NULL);
  row(area, "a 16-bit fill with a 17-bit value",
      t4a_runtime_memset(g.rt, NULL, g.buf, 0, 4, 2, 0x10000), T4A_INVALID_ARGUMENT, NULL);
  t4a_event *e1 = NULL, *plain = NULL, *timed = NULL;
  assert_int_equal(t4a_runtime_event(g.other, 0, &e1), T4A_OK);
  row(area, "a stream waiting for an event of another device's context",
      t4a_runtime_event_wait(g.rt, NULL, e1), T4A_FOREIGN_HANDLE, "nothing enqueued; runtime "
                                                                  "round-trips 4 KiB afterwards");
  assert_int_equal(t4a_runtime_event(g.rt, 0, &plain), T4A_OK);
  assert_int_equal(t4a_runtime_event(g.rt, T4A_EVENT_TIMING, &timed), T4A_OK);
  assert_int_equal(t4a_runtime_event_record(g.rt, NULL, plain), T4A_OK);
  assert_int_equal(t4a_runtime_event_record(g.rt, NULL, timed), T4A_OK);
  float ms = 1;
  row(area, "elapsed time with a non-timing event", t4a_event_elapsed_ms(timed, plain, &ms),
      T4A_INVALID_ARGUMENT, NULL);
  assert_true(ms == 0);
  reenter_probe r = {0};
  assert_int_equal(t4a_runtime_host_func(g.rt, NULL, reenter_fn, &r, NULL, 0), T4A_OK);
  assert_int_equal(t4a_runtime_sync(g.rt), T4A_OK);
  assert_int_equal(r.ran, 1);
  t4a_error_restore(&r.sync_detail);
  row(area, "a host function calling t4a_runtime_sync", r.sync, T4A_REENTRY,
      "no driver call, no deadlock; runtime round-trips 4 KiB afterwards");
  t4a_error_restore(&r.memset_detail);
  row(area, "a host function calling t4a_runtime_memset", r.memset, T4A_REENTRY,
      "nothing enqueued; runtime round-trips 4 KiB afterwards");
  t4a_event_release(e1);
  t4a_event_release(plain);
  t4a_event_release(timed);
  assert_int_equal(t4a_stream_destroy(g.other, stream_of_other), T4A_OK);
}

static int setup(void **state) {
  (void)state;
  g.print = getenv("T4A_BAD_INPUT_TABLE") != NULL;
  t4a_fixture_options fo = t4a_fixture_defaults();
  fo.fake.num_devices = 2;
  fo.stacks = 0;
  if (t4a_fixture_init(&g.fx, &fo) != T4A_OK) return -1;
  static const size_t params[2] = {8, 4};
  t4a_fake_register_kernel(g.fx.fake, "k", 2, params, t4a_hk_none, NULL);
  if (t4a_fake_nvrtc_open(&g.nvrtc) != T4A_OK ||
      t4a_nvrtc_cache_create(g.nvrtc, NULL, &g.cache) != T4A_OK) {
    return -1;
  }
  t4a_runtime_options o = t4a_fixture_runtime_options(g.fx.drv);
  t4a_module *m = NULL;
  if (t4a_runtime_open(0, &o, &g.rt) != T4A_OK || t4a_runtime_open(1, &o, &g.other) != T4A_OK ||
      t4a_runtime_load_image(g.rt, k_ptx, sizeof k_ptx, &m) != T4A_OK ||
      t4a_runtime_function(g.rt, m, "k", &g.fn) != T4A_OK ||
      t4a_runtime_buffer(g.rt, 4096, &g.buf) != T4A_OK ||
      t4a_runtime_buffer(g.other, 4096, &g.obuf) != T4A_OK) {
    return -1;
  }
  t4a_module_release(m);
  const char *tmp = getenv("TMPDIR");
  snprintf(g.dir, sizeof g.dir, "%s/t4a-bad-input-XXXXXX", tmp != NULL ? tmp : "/tmp");
  if (mkdtemp(g.dir) == NULL) return -1;
  if (g.print) {
    printf("| area | bad input | status returned (detail) | what is kept |\n|---|---|---|---|\n");
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  t4a_buffer_release(g.buf);
  t4a_buffer_release(g.obuf);
  t4a_function_release(g.fn);
  int ok = t4a_runtime_close(g.rt) == T4A_OK && t4a_runtime_close(g.other) == T4A_OK;
  t4a_nvrtc_cache_destroy(g.cache);
  t4a_nvrtc_lib_release(g.nvrtc);
  ok = t4a_fixture_fini(&g.fx, T4A_FIXTURE_CHECK_NOTHING_LIVE) == 0 && ok &&
       t4a_fake_nvrtc_programs_live() == 0;
  /* Only valid entries are left in the directory (no temporary file): remove them. */
  DIR *d = opendir(g.dir);
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)) continue;
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 4, ".t4a") != 0) ok = 0;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", g.dir, e->d_name);
    unlink(p);
  }
  if (d != NULL) closedir(d);
  rmdir(g.dir);
  if (g.print) printf("\n%d bad inputs, each typed; nothing lost: %s\n", g.rows, ok ? "yes" : "NO");
  return ok ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_images),
      cmocka_unit_test(test_requests),
      cmocka_unit_test(test_disk),
      cmocka_unit_test(test_runtime),
      cmocka_unit_test(test_links),
      cmocka_unit_test(test_everyday),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
