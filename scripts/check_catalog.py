#!/usr/bin/env python3
"""Required means used: fails when a REQUIRED entry of the driver catalogue
(t4a_ctx/driver_catalog.h), of the NVRTC catalogue (t4a_nvrtc/nvrtc_catalog.h) or of the nvJitLink
catalogue (t4a_nvrtc/jitlink_catalog.h) has no caller in
library code. A driver or NVRTC that lacks a required entry is refused at load, so an entry no
library code calls must be OPTIONAL (it stays in the catalogue: the fake and the tests may call
it, and a later change that calls it makes it REQUIRED again).

Library code is the .c sources of the installed libraries (the BUILD.bazel targets tagged
cmake-install=..., as scripts/build_graph.py reads them): t4a_*/ and t4a/ without tests, test
utilities and fakes. A call is, after comments and string literals are stripped:
  - T4A_CU(driver, cuName, ...), T4A_CU_QUIET(driver, cuName, ...) and
    T4A_CU_BYTES(driver, bytes, cuName, ...) (t4a_ctx/driver_table.h);
  - a member call through the table: `d->t.cuName(`, `lib->t.nvrtcName(`, `t->nvrtcName(`.
A name that is only tested against NULL, or named in a message, is not a call.
Exit 1 naming each required entry without a caller; runs in the drift lane of scripts/test.sh
(requirement C8: no entry required that is never called)."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import build_graph  # noqa: E402

# (catalogue header, its X-macro, what it loads)
CATALOGUES = [
    ("t4a_ctx/driver_catalog.h", "T4A_DRIVER_CATALOG", "a driver"),
    ("t4a_nvrtc/nvrtc_catalog.h", "T4A_NVRTC_CATALOG", "an NVRTC"),
    ("t4a_nvrtc/jitlink_catalog.h", "T4A_JITLINK_CATALOG", "an nvJitLink"),
]
# The T4A_CU macros and the index of the argument that names the entry.
MACROS = {"T4A_CU": 1, "T4A_CU_QUIET": 1, "T4A_CU_BYTES": 2}
MEMBER_CALL = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*\(")
MACRO_CALL = re.compile(r"\b(" + "|".join(sorted(MACROS, key=len, reverse=True)) + r")\s*\(")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def strip(text):
    """Comments and string and character literals out (newlines kept, for line numbers)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def catalogue(rel, macro):
    """[(name, need, line)] of the catalogue's X-macro list."""
    text = strip(read(rel))
    m = re.search(r"^[ \t]*#[ \t]*define[ \t]+" + macro + r"\(X\)((?:[^\n]*\\\n)*[^\n]*)", text,
                  re.M)
    if m is None:
        raise SystemExit("catalog check: %s defines no %s(X)" % (rel, macro))
    start = text.count("\n", 0, m.start(1)) + 1
    out = []
    for e in re.finditer(r"\bX\(\s*(\w+)\s*,([^)]*)\)", m.group(1)):
        need = e.group(2).split(",")[-1].strip()
        if need not in ("REQUIRED", "OPTIONAL"):
            raise SystemExit("catalog check: %s: %s is neither REQUIRED nor OPTIONAL (%r)"
                             % (rel, e.group(1), need))
        out.append((e.group(1), need, start + m.group(1).count("\n", 0, e.start())))
    if not out:
        raise SystemExit("catalog check: %s: %s lists no entry" % (rel, macro))
    return out


def library_sources():
    targets, _ = build_graph.load()
    files = []
    for t in targets:
        if t.kind == "library" and t.install is not None:
            files += [t.path(s) for s in t.srcs if s.endswith(".c")]
    return sorted(set(files))


def macro_args(text, open_paren):
    """The top-level arguments of the call whose '(' is at text[open_paren]."""
    depth, args, cur = 0, [], []
    for ch in text[open_paren:]:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    return args


def callers(files):
    """name -> [file:line, ...] of every call (see the module comment)."""
    found = {}
    for rel in files:
        text = strip(read(rel))

        def add(name, pos):
            found.setdefault(name, []).append("%s:%d" % (rel, text.count("\n", 0, pos) + 1))

        for m in MEMBER_CALL.finditer(text):
            add(m.group(1), m.start(1))
        for m in MACRO_CALL.finditer(text):
            args = macro_args(text, m.end() - 1)
            i = MACROS[m.group(1)]
            if len(args) > i and re.fullmatch(r"\w+", args[i]):
                add(args[i], m.start())
    return found


def main():
    files = library_sources()
    if not files:
        print("catalog check: no library sources found (scripts/build_graph.py)")
        return 1
    found = callers(files)
    problems, summary = [], []
    for rel, macro, what in CATALOGUES:
        entries = catalogue(rel, macro)
        required = [e for e in entries if e[1] == "REQUIRED"]
        for name, _, line in required:
            if name not in found:
                problems.append("%s:%d: %s is REQUIRED but no library code calls it (%s "
                                "lacking it would be refused for nothing): make it OPTIONAL, or "
                                "call it" % (rel, line, name, what))
        summary.append("%s: %d entries, %d required, each called" % (rel, len(entries),
                                                                     len(required)))
    for p in problems:
        print("catalog: " + p)
    if problems:
        print("catalog check: %d required entr%s without a caller in library code (%d files)"
              % (len(problems), "y" if len(problems) == 1 else "ies", len(files)))
        return 1
    print("catalog check: ok (%s; %d library files)" % ("; ".join(summary), len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
