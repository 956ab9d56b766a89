#!/usr/bin/env python3
"""Reads t4a's BUILD.bazel files, the one truth for targets, file lists and dependencies, into
plain records for the scripts that need them (gen_cmake.py, check_headers.py, valgrind_lane.py).

A BUILD file is read by running it as Python with stand-ins for the rules it may use: cc_library,
cc_test, cc_binary, sh_test, alias, exports_files, package_group. Anything else (glob, select,
macros) is refused: the files list their targets and files explicitly. Two tags carry what CMake needs and Bazel
ignores: "cmake-install=NAME" (the library is installed as t4a::NAME; on a program, installed
into bin/) and "cmake-name=NAME" (the CMake target's name when the default would clash).
A cc_binary is a shared object with linkshared = True and a libFuzzer target with the tag
"fuzzer". The other tags of a test are its CTest labels ("manual" excepted).
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPTS_FILE = os.path.join(ROOT, "build_defs", "copts.bzl")

# Folders that are not part of t4a's own build: other workspaces and projects, build outputs.
SKIP_DIRS = ("third_party",)

# External dependencies: Bazel label -> CMake target.
EXTERNALS = {
    "@cuda//:headers": "t4a_ext_cuda_headers",
    "@cmocka//:cmocka": "t4a_ext_cmocka",
    "@xxhash//:xxhash": "t4a_ext_xxhash",
    "@jemalloc//:jemalloc": "t4a_ext_jemalloc",
}
# System link options -> CMake link item.
SYSLIBS = {"-ldl": "${CMAKE_DL_LIBS}", "-lpthread": "Threads::Threads", "-lm": "m"}


class Target:
    """One rule of a BUILD file, with its files as paths from the repository root."""

    def __init__(self, pkg, rule, attrs):
        unknown = set(attrs) - ALLOWED[rule]
        if unknown:
            raise SystemExit("//%s:%s: %s takes no %s here (scripts/build_graph.py would lose it)"
                             % (pkg, attrs.get("name"), rule, ", ".join(sorted(unknown))))
        self.pkg = pkg
        self.rule = rule
        self.name = attrs["name"]
        self.label = "//%s:%s" % (pkg, self.name)
        self.srcs = list(attrs.get("srcs", []))
        self.hdrs = list(attrs.get("hdrs", []))
        self.deps = [normalize(d, pkg) for d in attrs.get("deps", [])]
        self.data = [normalize(d, pkg) for d in attrs.get("data", [])]
        self.tags = list(attrs.get("tags", []))
        self.linkopts = list(attrs.get("linkopts", []))
        self.copts = list(attrs.get("copts", []))
        self.visibility = list(attrs.get("visibility", []))
        self.strip_include_prefix = attrs.get("strip_include_prefix", "")
        self.actual = normalize(attrs["actual"], pkg) if "actual" in attrs else None
        self.linkshared = bool(attrs.get("linkshared", False))
        self.kind = self._kind()
        self._check(attrs)

    def _check(self, attrs):
        """What CMake cannot reproduce is refused, never dropped."""
        where = self.label
        fuzz = ["-fsanitize=fuzzer"] if self.kind == "fuzzer" else []
        if self.rule.startswith("cc_") and self.srcs and self.copts != copts() + fuzz:
            raise SystemExit("%s: copts must be T4A_COPTS%s" % (where, " + fuzzer" if fuzz else ""))
        for o in self.linkopts:
            if o not in SYSLIBS and o not in fuzz:
                raise SystemExit("%s: linkopt %s has no CMake form (known: %s)"
                                 % (where, o, ", ".join(sorted(SYSLIBS))))
        if self.kind in ("test", "sh_test"):
            form = "$(rootpath %s)" if self.kind == "test" else "$(location %s)"
            given = [normalize(a[a.index(" ") + 1:-1], self.pkg) if a.startswith("$(") else a
                     for a in attrs.get("args", [])]
            if given != self.data:
                raise SystemExit("%s: args must be [%s] for each data target, in order (CMake "
                                 "passes the data targets' files)" % (where, form % "<data>"))

    def _kind(self):
        if self.rule == "cc_library":
            return "library"
        if self.rule == "cc_test":
            return "test"
        if self.rule == "sh_test":
            return "sh_test"
        if self.rule == "alias":
            return "alias"
        if self.linkshared:
            return "shared_library"
        if "fuzzer" in self.tags:
            return "fuzzer"
        return "binary"

    def tag_value(self, key):
        for t in self.tags:
            if t == key:
                return ""
            if t.startswith(key + "="):
                return t.split("=", 1)[1]
        return None

    @property
    def install(self):
        return self.tag_value("cmake-install")

    @property
    def labels(self):
        return [t for t in self.tags if "=" not in t and t not in ("manual", "fuzzer")]

    def path(self, f):
        return "%s/%s" % (self.pkg, f) if self.pkg else f

    @property
    def cmake_name(self):
        given = self.tag_value("cmake-name")
        if given:
            return given
        base = self.pkg.rsplit("/", 1)[-1] if self.pkg else ""
        if self.name == base or not self.pkg:
            return self.name
        return "%s_%s" % (self.pkg.replace("/", "_"), self.name)


_COMMON = {"name", "srcs", "deps", "tags", "visibility", "testonly"}
ALLOWED = {
    "cc_library": _COMMON | {"hdrs", "copts", "linkopts", "strip_include_prefix"},
    "cc_test": _COMMON | {"copts", "linkopts", "data", "args", "size"},
    "cc_binary": _COMMON | {"copts", "linkopts", "linkshared"},
    "sh_test": _COMMON | {"data", "args", "size"},
    "alias": {"name", "actual", "visibility"},
}


def normalize(dep, pkg):
    """The full //pkg:name form of a label written relative to pkg (externals stay as they are)."""
    if dep.startswith(":"):
        return "//%s%s" % (pkg, dep)
    if not dep.startswith(("//", "@")):
        return "//%s:%s" % (pkg, dep)
    if dep.startswith("//") and ":" not in dep:
        return "%s:%s" % (dep, dep.rsplit("/", 1)[-1])
    return dep


def copts():
    scope = {}
    with open(COPTS_FILE) as f:
        exec(compile(f.read(), COPTS_FILE, "exec"), scope)
    return scope["T4A_COPTS"]


def is_build_output(parent, d):
    """Hidden folders, Bazel's output links and CMake build folders (build, build-*, or any
    folder holding a CMakeCache.txt)."""
    return (d.startswith((".", "bazel-")) or d == "build" or d.startswith("build-")
            or os.path.exists(os.path.join(parent, d, "CMakeCache.txt")))


def build_files():
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        rel = "" if rel == "." else rel
        dirnames[:] = sorted(
            d for d in dirnames
            if not is_build_output(dirpath, d)
            and (os.path.join(rel, d) if rel else d) not in SKIP_DIRS
            and not os.path.exists(os.path.join(dirpath, d, "WORKSPACE")))
        if "BUILD.bazel" in filenames:
            found.append(rel)
    return found


def _reader(pkg, targets, t4a_copts):
    def rule(name):
        def add(**attrs):
            targets.append(Target(pkg, name, attrs))
        return add

    def refused(what):
        def fail(*_a, **_k):
            raise SystemExit("%s/BUILD.bazel: %s is not used in t4a's BUILD files (list files "
                             "and targets explicitly)" % (pkg or ".", what))
        return fail

    return {
        "load": lambda *a, **k: None,
        "T4A_COPTS": t4a_copts,
        "cc_library": rule("cc_library"),
        "cc_test": rule("cc_test"),
        "cc_binary": rule("cc_binary"),
        "sh_test": rule("sh_test"),
        "alias": rule("alias"),
        "exports_files": lambda *a, **k: None,
        "package_group": lambda *a, **k: None,  # visibility only: nothing CMake builds
        "glob": refused("glob"),
        "select": refused("select"),
    }


def load():
    """Every target of every package, packages in path order, targets in file order."""
    t4a_copts = copts()
    targets = []
    for pkg in build_files():
        path = os.path.join(ROOT, pkg, "BUILD.bazel")
        with open(path) as f:
            text = f.read()
        exec(compile(text, path, "exec"), _reader(pkg, targets, t4a_copts))
    by_label = {}
    for t in targets:
        if t.label in by_label:
            raise SystemExit("duplicate target %s" % t.label)
        by_label[t.label] = t
    cmake_names = {}
    for t in targets:
        for d in t.deps + t.data + ([t.actual] if t.actual else []):
            if d not in EXTERNALS and d not in by_label:
                raise SystemExit("%s depends on unknown target %s" % (t.label, d))
        if t.kind != "alias":
            if t.cmake_name in cmake_names:
                raise SystemExit("%s and %s have the same CMake name %s (tag one cmake-name=...)"
                                 % (cmake_names[t.cmake_name], t.label, t.cmake_name))
            cmake_names[t.cmake_name] = t.label
    return targets, by_label
