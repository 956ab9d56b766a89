/* The t4a command-line program.
 *
 *   t4a info [--fake [N]]   driver and NVRTC versions, then each device with its properties.
 *                           --fake shows the fake driver's N devices (default 2) instead of the
 *                           real driver. Exit 0 on success, 1 when no driver can be loaded.
 *   t4a compile FILE.cu --arch ARCH ...  compile with NVRTC through the artifact cache
 *                           (tools/compile_cmd.h).
 *   t4a kernel FILE.cu NAME [--fake] [--global G]...  a compiled kernel's attributes and module
 *                           globals (tools/kernel_cmd.h).
 *   t4a demo [--n N] [--fake] [--json]  the warm chain of examples/warm_chain.h: NVRTC, the
 *                           runtime facade, N steps of kernel -> copy -> kernel three ways
 *                           (checked launches, descriptors, a graph), verified on the CPU, with
 *                           counters and host times per launch. Without a driver (or with
 *                           --fake) on the fake driver (tools/demo_cmd.h). Exit 0 when verified.
 *   t4a bench [--fake] [--rounds R] [--n N]  a short benchmark of the facade, progress on
 *                           stderr (tools/run_cmd.h).
 *   t4a stats [--fake] [--n N]  a short run of the facade, then its counters as JSON on stdout
 *                           (tools/run_cmd.h).
 *   t4a version             the t4a version.
 *   t4a help [COMMAND], t4a COMMAND --help  what a command does, its options and exit codes.
 *
 * Exit codes, every command: 0 success, 1 the command ran and failed (printed on stderr or in
 * its report), 2 bad usage. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t4a/ctx.h"
#include "t4a/jitlink.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"
#include "t4a/t4a.h"
#include "testing/fake_driver/fake_driver.h"
#include "testing/lsan/nvrtc_suppressions.h"
#include "tools/compile_cmd.h"
#include "tools/demo_cmd.h"
#include "tools/kernel_cmd.h"
#include "tools/run_cmd.h"

static void print_error(const char *what) {
  t4a_error e;
  char buf[512];
  t4a_error_last(&e);
  printf("%s: %s\n", what, t4a_error_format(&e, buf, sizeof buf));
}

static void print_nvrtc(void) {
  t4a_nvrtc_lib *lib = NULL;
  if (t4a_nvrtc_lib_open(NULL, &lib) != T4A_OK) {
    print_error("nvrtc");
    return;
  }
  int major = 0, minor = 0;
  t4a_nvrtc_lib_version(lib, &major, &minor);
  uint32_t caps = t4a_nvrtc_lib_caps(lib);
  printf("nvrtc: %d.%d (%s)%s%s%s\n", major, minor, t4a_nvrtc_lib_origin(lib),
         caps & T4A_NVRTC_CAP_CUBIN ? " cubin" : "", caps & T4A_NVRTC_CAP_LTOIR ? " lto-ir" : "",
         caps & T4A_NVRTC_CAP_PCH ? " pch" : "");
  int archs[64];
  size_t n = 0;
  if (t4a_nvrtc_lib_supported_archs(lib, archs, 64, &n) == T4A_OK) {
    printf("nvrtc archs:");
    for (size_t i = 0; i < n && i < 64; i++) printf(" sm_%d", archs[i]);
    printf("\n");
  }
  t4a_nvrtc_lib_release(lib);
  t4a_jitlink_lib *jl = NULL;
  if (t4a_jitlink_lib_open(NULL, &jl) != T4A_OK) {
    print_error("nvjitlink");
    return;
  }
  t4a_jitlink_lib_version(jl, &major, &minor);
  printf("nvjitlink: %d.%d (%s)\n", major, minor, t4a_jitlink_lib_origin(jl));
  t4a_jitlink_lib_release(jl);
}

static int print_devices(t4a_driver *drv) {
  int v = t4a_driver_version(drv);
  printf("driver: CUDA %d.%d (%s)%s\n", v / 1000, (v % 1000) / 10, t4a_driver_origin(drv),
         t4a_driver_caps(drv) & T4A_DRIVER_CAP_FUNC_PARAM_INFO ? " func-param-info" : "");
  /* The optional entries t4a can work without, each a capability (docs/design.md §2). */
  static const struct {
    uint32_t bit;
    const char *name;
  } caps[] = {
      {T4A_DRIVER_CAP_FUNC_PARAM_INFO, "func-param-info"},
      {T4A_DRIVER_CAP_CAPTURE_INFO, "capture-info"},
      {T4A_DRIVER_CAP_LAUNCH_EX, "launch-ex"},
      {T4A_DRIVER_CAP_OCCUPANCY, "occupancy"},
      {T4A_DRIVER_CAP_CLUSTER_OCCUPANCY, "cluster-occupancy"},
  };
  uint32_t have = t4a_driver_caps(drv);
  printf("driver capabilities:");
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    if (have & caps[i].bit) printf(" %s", caps[i].name);
  }
  printf("; absent:");
  int absent = 0;
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    if (!(have & caps[i].bit)) {
      printf(" %s", caps[i].name);
      absent = 1;
    }
  }
  printf("%s\n", absent ? "" : " none");
  int count = 0;
  if (t4a_device_count(drv, &count) != T4A_OK) {
    print_error("devices");
    return 1;
  }
  printf("devices: %d\n", count);
  for (int i = 0; i < count; i++) {
    t4a_device_info d;
    if (t4a_device_query(drv, i, &d) != T4A_OK) {
      print_error("device");
      return 1;
    }
    char uuid[48];
    printf("device %d: %s\n", i, d.name);
    printf("  uuid: %s\n", t4a_device_uuid_format(d.uuid, uuid, sizeof uuid));
    printf("  compute capability: %d.%d, %d SMs, %d threads/block, warp %d\n", d.cc_major,
           d.cc_minor, d.sm_count, d.max_threads_per_block, d.warp_size);
    printf("  memory: %.1f GiB, bus %d bits; L2 %d KiB (persisting max %d KiB)\n",
           (double)d.total_mem_bytes / (1024.0 * 1024.0 * 1024.0), d.memory_bus_width_bits,
           d.l2_cache_bytes / 1024, d.max_persisting_l2_bytes / 1024);
    /* The live figure (cuMemGetInfo, needs the device's context): what every process left. */
    t4a_ctx_holder *holder = NULL;
    uint64_t free_b = 0, total_b = 0;
    if (t4a_ctx_holder_create(drv, i, &holder) == T4A_OK &&
        t4a_ctx_holder_memory(holder, &free_b, &total_b) == T4A_OK) {
      printf("  memory now: %.2f GiB free of %.2f GiB (%" PRIu64 " of %" PRIu64 " bytes)\n",
             (double)free_b / (1024.0 * 1024.0 * 1024.0),
             (double)total_b / (1024.0 * 1024.0 * 1024.0), free_b, total_b);
    } else {
      print_error("memory now");
    }
    t4a_ctx_holder_release(holder);
    printf("  shared/block: %d KiB (opt-in %d KiB), shared/SM %d KiB\n",
           d.max_shared_per_block_bytes / 1024, d.max_shared_per_block_optin_bytes / 1024,
           d.max_shared_per_sm_bytes / 1024);
    printf("  pci %04x:%02x:%02x, async engines %d, memory pools %s, map host %s\n",
           (unsigned)d.pci_domain, (unsigned)d.pci_bus, (unsigned)d.pci_device,
           d.async_engine_count, d.memory_pools_supported ? "yes" : "no",
           d.can_map_host_memory ? "yes" : "no");
    for (int j = 0; j < count; j++) {
      int can = 0;
      if (j != i && t4a_device_can_access_peer(drv, i, j, &can) == T4A_OK) {
        printf("  peer access to %d: %s\n", j, can ? "yes" : "no");
      }
    }
  }
  return 0;
}

static void info_usage(FILE *f) {
  fprintf(f,
          "usage: t4a info [--fake [N]]\n"
          "  Prints the t4a version, the NVRTC that loads (version, origin, capabilities, target\n"
          "  architectures), the nvJitLink that loads, the CUDA driver's version and capabilities\n"
          "  (present and absent), and each device: name, UUID, compute capability, SMs, memory, L2,\n"
          "  shared memory, PCI, peers.\n"
          "  --fake [N]  the fake driver of the tests with N devices (1..%d, default 2)\n"
          "  Exit: 0 listed, 1 no CUDA driver loads (or a device query failed), 2 bad usage.\n",
          T4A_FAKE_MAX_DEVICES);
}

static int cmd_info(int argc, char **argv) {
  int fake_devices = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      info_usage(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--fake") == 0) {
      fake_devices = 2;
      if (i + 1 < argc && argv[i + 1][0] != '-') fake_devices = atoi(argv[++i]);
      if (fake_devices < 1 || fake_devices > T4A_FAKE_MAX_DEVICES) {
        fprintf(stderr, "t4a info: --fake takes 1..%d devices\n", T4A_FAKE_MAX_DEVICES);
        return 2;
      }
    } else {
      fprintf(stderr, "t4a info: unknown option %s\n", argv[i]);
      info_usage(stderr);
      return 2;
    }
  }
  printf("t4a %s\n", t4a_version_string());
  print_nvrtc();
  int rc;
  if (fake_devices > 0) {
    t4a_fake_options o = T4A_FAKE_OPTIONS_INIT;
    o.num_devices = fake_devices;
    o.all_peers = 1;
    t4a_fake *fake = NULL;
    t4a_driver *drv = NULL;
    if (t4a_fake_create(&o, &fake) != T4A_OK || t4a_fake_driver(fake, &drv) != T4A_OK) {
      print_error("fake driver");
      t4a_fake_destroy(fake);
      return 1;
    }
    rc = print_devices(drv);
    t4a_driver_release(drv);
    t4a_fake_destroy(fake);
    return rc;
  }
  t4a_driver *drv = NULL;
  if (t4a_driver_get_default(&drv) != T4A_OK) {
    print_error("no CUDA driver");
    printf("(run `t4a info --fake` to see the fake driver used by the tests)\n");
    return 1;
  }
  rc = print_devices(drv);
  t4a_driver_release(drv);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: t4a COMMAND [OPTIONS]   (t4a help COMMAND, or t4a COMMAND --help, for more)\n"
          "  info [--fake [N]]             driver, NVRTC and devices\n"
          "  compile FILE.cu --arch ARCH [--ptx|--cubin] [-o OUT] [--cache DIR] ...\n"
          "                                compile with NVRTC through the artifact cache\n"
          "  kernel FILE.cu NAME [--fake] [--arch ARCH] [--global G]...\n"
          "                                a compiled kernel's attributes, module globals\n"
          "  demo [--n N] [--fake] [--json]\n"
          "                                the warm chain, verified, with counters and times\n"
          "  bench [--fake] [--rounds R] [--n N]\n"
          "                                a short benchmark of the runtime (progress on stderr)\n"
          "  stats [--fake] [--n N]        a short run, then the runtime's counters as JSON\n"
          "  version                       the t4a version\n"
          "Without a CUDA driver, demo, bench and stats run on the fake driver of the tests\n"
          "(NVRTC compiles for real); info says there is no driver.\n"
          "Exit codes: 0 success; 1 the command ran and failed (no CUDA driver for info, a\n"
          "compile error, a failed step or a wrong result: the reason is printed); 2 bad usage.\n");
}

/* `t4a help COMMAND` and `t4a COMMAND --help`. Returns the exit code. */
static int help(const char *cmd) {
  if (cmd == NULL) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "info") == 0) {
    info_usage(stdout);
  } else if (strcmp(cmd, "compile") == 0) {
    char h[] = "--help";
    char *args[] = {h, NULL};
    return t4a_cmd_compile(1, args);
  } else if (strcmp(cmd, "kernel") == 0) {
    t4a_cmd_kernel_usage(stdout);
  } else if (strcmp(cmd, "demo") == 0) {
    t4a_cmd_demo_usage(stdout);
  } else if (strcmp(cmd, "bench") == 0) {
    t4a_cmd_bench_usage(stdout);
  } else if (strcmp(cmd, "stats") == 0) {
    t4a_cmd_stats_usage(stdout);
  } else if (strcmp(cmd, "version") == 0) {
    printf("usage: t4a version\n  Prints the t4a version (MAJOR.MINOR.PATCH). Exit 0.\n");
  } else {
    fprintf(stderr, "t4a help: unknown command %s\n", cmd);
    usage(stderr);
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
  if (strcmp(cmd, "compile") == 0) return t4a_cmd_compile(argc - 2, argv + 2);
  if (strcmp(cmd, "kernel") == 0) return t4a_cmd_kernel(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0) return t4a_cmd_demo(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return t4a_cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "stats") == 0) return t4a_cmd_stats(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0) {
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
      return help("version");
    }
    if (argc > 2) {
      fprintf(stderr, "t4a version: takes no arguments\n");
      return 2;
    }
    printf("%s\n", t4a_version_string());
    return 0;
  }
  if (strcmp(cmd, "help") == 0) return help(argc > 2 ? argv[2] : NULL);
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return help(NULL);
  fprintf(stderr, "t4a: unknown command %s\n", cmd);
  usage(stderr);
  return 2;
}
