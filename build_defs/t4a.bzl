"""Instantiates a package's targets from the generated list (gen/targets.bzl, made from
sources.json by scripts/gen_build.py). A BUILD.bazel file is one call: t4a_package()."""

load("//gen:targets.bzl", "T4A_COPTS", "T4A_TARGETS")

def t4a_package():
    pkg = native.package_name()
    for t in T4A_TARGETS.get(pkg, []):
        kind = t["kind"]
        if kind == "library":
            native.cc_library(
                name = t["name"],
                srcs = t["srcs"],
                hdrs = t["hdrs"],
                strip_include_prefix = t["strip_include_prefix"] or None,
                deps = t["deps"],
                copts = T4A_COPTS,
                linkopts = t["linkopts"],
                visibility = t["visibility"],
            )
        elif kind == "test":
            tags = t["tags"]
            native.cc_test(
                name = t["name"],
                srcs = t["srcs"],
                deps = t["deps"],
                data = t["data"],
                args = ["$(rootpath %s)" % d for d in t["data"]],
                copts = T4A_COPTS,
                linkopts = t["linkopts"],
                tags = tags,  # gpu tests are built by //... and filtered out of `test` by .bazelrc
                size = "small",
            )
        elif kind == "shared_library":
            # A test-only shared object (e.g. a stand-in libcuda.so.1 for the loader tests).
            native.cc_binary(
                name = t["name"],
                srcs = t["srcs"],
                deps = t["deps"],
                copts = T4A_COPTS,
                linkshared = True,
                visibility = t["visibility"],
                testonly = True,
            )
        elif kind == "binary":
            native.cc_binary(
                name = t["name"],
                srcs = t["srcs"],
                deps = t["deps"],
                copts = T4A_COPTS,
                linkopts = t["linkopts"],
                visibility = t["visibility"],
            )
        elif kind == "fuzzer":
            # A libFuzzer binary (clang only): built on request, never by //... (manual).
            native.cc_binary(
                name = t["name"],
                srcs = t["srcs"],
                deps = t["deps"],
                copts = T4A_COPTS + ["-fsanitize=fuzzer"],
                linkopts = t["linkopts"] + ["-fsanitize=fuzzer"],
                tags = ["manual"],
                testonly = True,
            )
        elif kind == "sh_test":
            native.sh_test(
                name = t["name"],
                srcs = t["srcs"],
                data = t["data"],
                args = ["$(location %s)" % d for d in t["data"]],
                tags = t["tags"],
                size = "small",
            )
        else:
            fail("unknown target kind " + kind)
