/* `t4a kernel`: see kernel_cmd.h. */
#define _GNU_SOURCE
#include "tools/kernel_cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2

void t4a_cmd_kernel_usage(FILE *f) {
  fprintf(f,
          "usage: t4a kernel FILE.cu NAME [--fake] [--arch ARCH] [--ptx] [--global NAME]...\n"
          "                  [NVRTC options: -DNAME=VALUE, --std=c++17, ...]\n"
          "  Compiles FILE.cu with NVRTC (through the runtime's artifact cache), loads it and\n"
          "  prints kernel NAME's attributes as the driver reports them (cuFuncGetAttribute):\n"
          "  registers per thread, static shared, constant and local memory, the dynamic shared\n"
          "  memory a launch may use now and at most, threads per block, PTX and binary\n"
          "  versions; with --global, the size and address of module globals (__device__,\n"
          "  __constant__; cuModuleGetGlobal).\n"
          "  NAME       the kernel's name in the module (extern \"C\" names, or lowered ones)\n"
          "  --fake     on the fake driver of the tests (NVRTC still compiles for real): the\n"
          "             globals' sizes are the compiler's, the attributes the fake's model\n"
          "  --arch A   the target (default: the device's sm_NN; sm_90 on the fake)\n"
          "  --ptx      compile to PTX (the driver JIT-compiles it) instead of a CUBIN\n"
          "  --global G print global G (repeatable)\n"
          "  Any other argument starting with '-' goes to NVRTC, in order.\n"
          "  Exit: 0 printed, 1 a compile error (the log on stderr), no CUDA driver (use --fake),\n"
          "  an unknown kernel or global, or another failure, 2 bad usage.\n");
}

static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, "t4a kernel: %s%s\n", what, arg != NULL ? arg : "");
  t4a_cmd_kernel_usage(stderr);
  return EXIT_USAGE;
}

static int failure(const char *what) {
  t4a_error e;
  char buf[600];
  t4a_error_last(&e);
  fprintf(stderr, "t4a kernel: %s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
  return EXIT_FAILED;
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (buf == NULL) break;
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
  int err = ferror(f);
  fclose(f);
  if (buf == NULL || err) {
    free(buf);
    errno = err ? EIO : ENOMEM;
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

/* NVRTC flags whose value may come as the next argument. */
static int takes_value(const char *s) {
  static const char *const flags[] = {"-I", "-D", "-U", "-include", "--include-path",
                                      "--pre-include", "--define-macro", "--undefine-macro"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (strcmp(s, flags[i]) == 0) return 1;
  }
  return 0;
}

int t4a_cmd_kernel(int argc, char **argv) {
  const char *file = NULL, *name = NULL, *arch = NULL;
  int fake_mode = 0, ptx = 0;
  size_t slots = argc > 0 ? (size_t)argc : 1;
  const char **options = calloc(slots, sizeof *options);
  const char **globals = calloc(slots, sizeof *globals);
  size_t num_options = 0, num_globals = 0;
  char *source = NULL;
  t4a_fake *fake = NULL;
  t4a_driver *drv = NULL;
  t4a_runtime *rt = NULL;
  t4a_nvrtc_artifact *art = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_nvrtc_outcome oc = T4A_NVRTC_OUTCOME_INIT;
  int rc = 0;
  if (options == NULL || globals == NULL) {
    fprintf(stderr, "t4a kernel: out of memory\n");
    rc = EXIT_FAILED;
    goto done;
  }
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      t4a_cmd_kernel_usage(stdout);
      goto done;
    } else if (strcmp(s, "--fake") == 0) {
      fake_mode = 1;
    } else if (strcmp(s, "--ptx") == 0) {
      ptx = 1;
    } else if (strcmp(s, "--arch") == 0 || strcmp(s, "--global") == 0) {
      if (next == NULL) {
        rc = usage_error(s, " needs a value");
        goto done;
      }
      if (s[2] == 'a') {
        arch = next;
      } else {
        globals[num_globals++] = next;
      }
      i++;
    } else if (s[0] == '-' && s[1] != '\0') {
      options[num_options++] = s;
      if (takes_value(s)) {
        if (next == NULL) {
          rc = usage_error(s, " needs a value");
          goto done;
        }
        options[num_options++] = next;
        i++;
      }
    } else if (file == NULL) {
      file = s;
    } else if (name == NULL) {
      name = s;
    } else {
      rc = usage_error("one source file and one kernel name only; also got ", s);
      goto done;
    }
  }
  if (file == NULL || name == NULL) {
    rc = usage_error("needs FILE.cu and the kernel's NAME", NULL);
    goto done;
  }
  source = read_all(file);
  if (source == NULL) {
    fprintf(stderr, "t4a kernel: cannot read %s: %s\n", file, strerror(errno));
    rc = EXIT_USAGE;
    goto done;
  }
  t4a_status st;
  if (fake_mode) {
    t4a_fake_options fo = T4A_FAKE_OPTIONS_INIT;
    st = t4a_fake_create(&fo, &fake);
    if (st == T4A_OK) st = t4a_fake_driver(fake, &drv);
    if (st != T4A_OK) {
      rc = failure("the fake driver");
      goto done;
    }
  } else if ((st = t4a_driver_get_default(&drv)) != T4A_OK) {
    rc = failure("no CUDA driver (--fake runs on the fake driver of the tests)");
    goto done;
  }
  t4a_runtime_options ro = T4A_RUNTIME_OPTIONS_INIT;
  ro.driver = drv;
  ro.target = arch;
  if ((st = t4a_runtime_open(0, &ro, &rt)) != T4A_OK) {
    rc = failure("opening the runtime");
    goto done;
  }
  const char *target = t4a_runtime_target(rt);
  const char *base = strrchr(file, '/');
  t4a_nvrtc_request rq = T4A_NVRTC_REQUEST_INIT;
  rq.program_name = base != NULL ? base + 1 : file;
  rq.source = source;
  rq.options = options;
  rq.num_options = num_options;
  rq.output = ptx || strncmp(target, "compute_", 8) == 0 ? T4A_NVRTC_OUTPUT_PTX
                                                          : T4A_NVRTC_OUTPUT_CUBIN;
  if ((st = t4a_runtime_compile_request(rt, &rq, &art, &oc)) != T4A_OK) {
    if (oc.log != NULL && oc.log_bytes > 0) fputs(oc.log, stderr);
    rc = failure(st == T4A_COMPILE_FAILED ? "compile error" : "compiling");
    goto done;
  }
  if ((st = t4a_runtime_load(rt, art, &m)) != T4A_OK) {
    rc = failure("loading the module");
    goto done;
  }
  if ((st = t4a_runtime_function(rt, m, name, &fn)) != T4A_OK) {
    rc = failure("the kernel");
    goto done;
  }
  t4a_kernel_attributes a;
  if ((st = t4a_function_get_attributes(fn, &a)) != T4A_OK) {
    rc = failure("the kernel's attributes");
    goto done;
  }
  size_t bytes = 0;
  (void)t4a_nvrtc_artifact_data(art, &bytes);
  int v = t4a_driver_version(drv);
  printf("kernel: %s (%s for %s, %zu bytes)\n", name,
         t4a_nvrtc_output_name(t4a_nvrtc_artifact_output(art)), t4a_nvrtc_artifact_target(art),
         bytes);
  printf("driver: %s, CUDA %d.%d%s\n", fake_mode ? "fake" : t4a_driver_origin(drv), v / 1000,
         (v % 1000) / 10,
         fake_mode ? " (the attributes are the fake's model, not the compiler's)" : "");
  printf("registers: %u per thread\n", a.num_regs);
  printf("static shared memory: %u bytes\n", a.static_shared_bytes);
  printf("constant memory: %u bytes\n", a.const_bytes);
  printf("local memory: %u bytes per thread\n", a.local_bytes);
  printf("dynamic shared memory: %u bytes now, %u at most\n", a.max_dynamic_shared_bytes,
         a.max_dynamic_shared_optin_bytes);
  printf("max threads per block: %u\n", a.max_threads_per_block);
  printf("ptx version: %u.%u\n", a.ptx_version / 10, a.ptx_version % 10);
  printf("binary version: %u.%u\n", a.binary_version / 10, a.binary_version % 10);
  for (size_t i = 0; i < num_globals; i++) {
    t4a_buffer *g = NULL;
    if ((st = t4a_runtime_global(rt, m, globals[i], 0, &g)) != T4A_OK) {
      rc = failure("a global");
      goto done;
    }
    printf("global %s: %zu bytes at 0x%" PRIx64 "\n", globals[i], t4a_buffer_size(g),
           (uint64_t)t4a_buffer_devptr(g));
    t4a_buffer_release(g);
  }
done:
  fflush(stdout);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_nvrtc_artifact_release(art);
  t4a_nvrtc_outcome_deinit(&oc);
  if (rt != NULL && t4a_runtime_close(rt) != T4A_OK && rc == 0) rc = failure("closing");
  t4a_driver_release(drv);
  t4a_fake_destroy(fake);
  free(source);
  free(options);
  free(globals);
  return rc;
}
