#!/usr/bin/env python3
"""Compiles every public header (each library's include/t4a/*.h, from the BUILD files) on its own:
as C11 with gcc and as C++17 with g++, with -Wall -Wextra -Werror and WITHOUT the CUDA toolkit on
the include path. Public headers must be self-contained, usable from C++, and free of CUDA types.
They hold the user API only: no identifier of theirs but a macro ends in `_` (t4a's internal
names do; the X-macro helpers of the enums are macros), none
names what an internal header declares (the header-only library targets without an include
prefix: //t4a_ctx:status_internal, //t4a_ctx:ctx_internal, ...), and none includes an internal
header. Exit 1 if a header fails."""
import os
import re
import subprocess
import sys
import tempfile

import build_graph
from build_graph import ROOT


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared_names(text):
    """Functions, typedefs, struct/union/enum tags and macros a header declares."""
    code = strip_comments(text)
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:T4A_\w+\([^)]*\)\s*)?;", code))
    names |= set(re.findall(r"\btypedef\b[^;]*?\b([A-Za-z_]\w*)\s*(?:\[[^]]*\])?\s*;", code))
    names |= set(re.findall(r"\b(?:struct|union|enum)\s+([A-Za-z_]\w*)\s*\{", code))
    names |= set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, flags=re.M))
    return names - {"if", "for", "while", "switch", "return", "sizeof"}


def internal_headers(targets):
    """Headers of the library targets that have no include prefix (t4a's internal ones)."""
    out = []
    for t in targets:
        if t.kind != "library" or t.strip_include_prefix or not t.pkg.startswith("t4a"):
            continue
        out += [t.path(h) for h in t.hdrs]
    return sorted(set(out))


def user_api_only(targets, public):
    """The public headers (repository paths) that declare or name internal ones: a list of
    problems, empty when none."""
    internal = internal_headers(targets)
    internal_names, public_names = set(), set()
    for h in internal:
        with open(os.path.join(ROOT, h)) as f:
            internal_names |= {n for n in declared_names(f.read())
                               if re.match(r"(t4a|T4A)_", n) and not re.match(r"T4A_\w+_H_$", n)}
    for h in public:
        with open(os.path.join(ROOT, h)) as f:
            public_names |= declared_names(f.read())
    internal_names -= public_names  # a public type an internal header also names (forward)
    problems = []
    for h in public:
        with open(os.path.join(ROOT, h)) as f:
            text = f.read()
        code = strip_comments(text)
        body = "\n".join(l for l in code.split("\n") if not re.match(r"\s*#\s*(ifndef|define|endif)\b.*_H_", l))
        macros = set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, flags=re.M))
        pasted = set(re.findall(r"\b(\w+)\s*##", code))  # X-macro prefixes: T4A_COUNTER_##name
        for name in sorted(set(re.findall(r"\b([A-Za-z]\w*_)\b", body)) - macros - pasted):
            problems.append("%s: the internal name %s (ends in _)" % (h, name))
        for name in sorted(internal_names & set(re.findall(r"\b[A-Za-z_]\w*\b", text))):
            problems.append("%s: %s, declared by an internal header" % (h, name))
        for inc in re.findall(r'#\s*include\s*"([^"]+)"', code):
            if inc in internal or os.path.basename(inc) in {os.path.basename(i) for i in internal}:
                problems.append("%s: includes the internal header %s" % (h, inc))
    return problems


def main():
    include_dirs, headers = [], []
    targets = build_graph.load()[0]
    for t in targets:
        prefix = t.strip_include_prefix
        if t.kind != "library" or not prefix:
            continue
        inc = os.path.join(ROOT, t.path(prefix))
        include_dirs.append(inc)
        for h in t.hdrs:
            headers.append(os.path.relpath(os.path.join(ROOT, t.path(h)), inc))
    flags = ["-Wall", "-Wextra", "-Werror", "-fsyntax-only"] + ["-I" + d for d in include_dirs]
    bad = 0
    public = sorted({os.path.relpath(os.path.join(i, h), ROOT) for i in include_dirs for h in headers
                     if os.path.exists(os.path.join(i, h))})
    problems = user_api_only(targets, public)
    for p in problems:
        print("header check: %s" % p)
    if problems:
        bad = 1
    with tempfile.TemporaryDirectory() as tmp:
        for h in sorted(set(headers)):
            for lang, compiler, std, ext in (("C", "gcc", "-std=c11", "c"),
                                             ("C++", "g++", "-std=c++17", "cc")):
                src = os.path.join(tmp, "one." + ext)
                with open(src, "w") as f:
                    f.write('#include "%s"\n#include "%s"\nint t4a_header_check_%s;\n'
                            % (h, h, lang == "C" and "c" or "cc"))
                r = subprocess.run([compiler, std] + flags + [src], capture_output=True, text=True)
                if r.returncode != 0:
                    print("header check: %s fails as %s:\n%s" % (h, lang, r.stderr))
                    bad = 1
    print("header check: %d public headers, C11 and C++17, no CUDA on the path, no internal name "
          "(%d internal headers): %s" % (len(set(headers)), len(internal_headers(targets)),
                                          "FAILED" if bad else "ok"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
