#!/usr/bin/env python3
"""Compiles every public header (each library's include/t4a/*.h, from sources.json) on its own:
as C11 with gcc and as C++17 with g++, with -Wall -Wextra -Werror and WITHOUT the CUDA toolkit on
the include path. Public headers must be self-contained, usable from C++, and free of CUDA types.
Exit 1 on the first header that fails."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    with open(os.path.join(ROOT, "sources.json")) as f:
        manifest = json.load(f)
    include_dirs, headers = [], []
    for t in manifest["targets"]:
        prefix = t.get("strip_include_prefix")
        if t["kind"] != "library" or not prefix:
            continue
        pkg = t["label"][2:].split(":", 1)[0]
        inc = os.path.join(ROOT, pkg, prefix)
        include_dirs.append(inc)
        for h in t.get("hdrs", []):
            headers.append(os.path.relpath(os.path.join(ROOT, pkg, h), inc))
    flags = ["-Wall", "-Wextra", "-Werror", "-fsyntax-only"] + ["-I" + d for d in include_dirs]
    bad = 0
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
    print("header check: %d public headers, C11 and C++17, no CUDA on the path: %s"
          % (len(set(headers)), "FAILED" if bad else "ok"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
