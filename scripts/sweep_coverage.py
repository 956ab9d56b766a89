#!/usr/bin/env python3
"""Lists every public function and whether a failure sweep covers it (docs/sweep-coverage.md).

  scripts/sweep_coverage.py          write docs/sweep-coverage.md
  scripts/sweep_coverage.py --check  fail (exit 1) if the file differs from what the sources give

Public functions: every function declared in a public header (<module>/include/t4a/*.h and
t4a/include/t4a/t4a.h). Fallible: it returns t4a_status.

Covered: the function is called by a sweep's operation, directly or through functions of the
same test file (called, or handed over by name as a callback). A sweep is either
  - testing/sweep (t4a_sweep_driver / t4a_sweep_fault: fail the Nth driver call or fault point
    for every N): its operations are the `t4a_status NAME(void *user)` functions of a test file
    that calls the harness; or
  - the NVRTC sweeps of t4a_nvrtc/failure_test.c and t4a_nvrtc/roots_test.c (fail the Nth NVRTC
    call, host allocation or file operation for every N, through t4a_nvrtc/nvrtc_testutil), and the
    nvJitLink sweeps of t4a_nvrtc/jitlink_test.c (fail the Nth nvJitLink call through a wrapped
    table, and the Nth host allocation or file operation): the functions they name as attempts
    (NVRTC_ROOTS).
This is a lexical reading (a call site in an operation's body), not a measurement: a function
counted as covered is exercised by a sweep; whether every one of its failure paths is reached is
what each sweep's own step count shows.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "sweep-coverage.md")
NVRTC_ROOTS = {
    "t4a_nvrtc/failure_test.c": ["attempt", "test_lib_from_table_sweep"],
    "t4a_nvrtc/jitlink_test.c": ["link_attempt", "test_sweep_jitlink_calls"],
    "t4a_nvrtc/roots_test.c": [
        "test_includes_resolve_failure_sweep",
        "test_cached_compile_with_roots_failure_sweep",
    ],
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def public_headers():
    hs = sorted(glob.glob(os.path.join(ROOT, "*", "include", "t4a", "*.h")))
    hs += [os.path.join(ROOT, "t4a", "include", "t4a", "t4a.h")]
    hs = sorted(set(hs))  # the facade's folder matches the glob too: list each header once
    return [h for h in hs if os.path.exists(h) and
            not os.path.relpath(h, ROOT).startswith(("bazel-", "build"))]


def matching_paren(text, i):
    """Index just past the parenthesis that closes the one at text[i]."""
    depth = 0
    while i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return i
    return i


def declarations(path):
    text = strip_comments(open(path).read())
    text = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))
    text = re.sub(r"\bT4A_PRINTF\s*\([^)]*\)", "", text)  # a format attribute after the list
    out, seen = [], set()
    for m in re.finditer(r"\b(t4a_\w+)\s*\(", text):
        name = m.group(1)
        end = matching_paren(text, m.end() - 1)
        rest = text[end:end + 40].lstrip()
        if not rest or rest[0] not in ";{" or name in seen:
            continue
        start = max(text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start()),
                    text.rfind("{", 0, m.start()))
        ret = " ".join(text[start + 1:m.start()].split())
        if not ret or "typedef" in ret or "(" in ret or "=" in ret or "return" in ret:
            continue
        seen.add(name)
        inline = "inline" in ret
        ret = " ".join(w for w in ret.split() if w not in ("T4A_MUST_USE", "static", "inline",
                                                            "extern"))
        out.append((name, ret, inline))
    return out


HEADER_LINE = re.compile(r"^(?:static\s+)?(?:__attribute__\(\(\w+\)\)\s+)?(?:static\s+)?"
                         r"(?:const\s+)?\w+[\s\*]+(\w+)\(")


def function_bodies(text):
    """name -> body text of every function defined at the top level of a C file."""
    bodies = {}
    lines = text.split("\n")
    offsets, pos = [], 0
    for l in lines:
        offsets.append(pos)
        pos += len(l) + 1
    for n, l in enumerate(lines):
        m = HEADER_LINE.match(l)
        if not m:
            continue
        i = matching_paren(text, offsets[n] + l.index("(", m.start(1)))
        j = i
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j >= len(text) or text[j] != "{":
            continue
        depth, k = 1, j + 1
        while k < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
        bodies[m.group(1)] = text[j:k]
    return bodies


def closure(bodies, roots):
    done, todo = set(), [r for r in roots if r in bodies]
    while todo:
        f = todo.pop()
        if f in done:
            continue
        done.add(f)
        # Calls, and functions handed over by name (callbacks such as a raw scope's body).
        for callee in re.findall(r"\b(\w+)\b", bodies[f]):
            if callee in bodies and callee not in done:
                todo.append(callee)
    return done


def sweeps():
    """[(test file, set of reachable function names, {name: body})]."""
    found = []
    tests = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith((".", "build", "bazel-")) and
                             not os.path.islink(os.path.join(dirpath, d)))
        tests += [os.path.join(dirpath, f) for f in filenames if f.endswith("_test.c")]
    for path in sorted(tests):
        rel = os.path.relpath(path, ROOT)
        text = strip_comments(open(path).read())
        bodies = function_bodies(text)
        roots = []
        if re.search(r"\bt4a_sweep_(driver|fault)\s*\(", text):
            roots += re.findall(r"t4a_status\s+(\w+)\s*\(\s*void\s*\*\s*\w*\s*\)\s*\{", text)
        roots += NVRTC_ROOTS.get(rel, [])
        if roots:
            found.append((rel, closure(bodies, roots), bodies))
    return found


def render():
    swept = sweeps()
    rows, total, covered, helpers = [], 0, 0, 0
    for h in public_headers():
        rel = os.path.relpath(h, ROOT)
        for name, ret, inline in declarations(h):
            fallible = ret == "t4a_status"
            by = []
            for test, reach, bodies in swept:
                if any(re.search(r"\b%s\s*\(" % name, bodies[f]) for f in reach):
                    by.append(test)
            if fallible:
                total += 1
                covered += bool(by)
            else:
                helpers += 1
            rows.append((rel, name, fallible, inline, by))
    pct = 100.0 * covered / total if total else 0.0
    out = ["# Failure-sweep coverage of the public API",
           "",
           "Generated by `scripts/sweep_coverage.py` from the public headers and the tests; the drift "
           "lane of `scripts/test.sh` fails when it is stale. A function is *swept* when a failure "
           "sweep's operation calls it (directly or through the test file's own functions): "
           "`testing/sweep` (`t4a_sweep_driver`, `t4a_sweep_fault`: every driver call or fault "
           "point of the operation failed in turn, typed status and exact leak accounting checked "
           "at each step) or the NVRTC sweeps of `t4a_nvrtc/failure_test.c`. The reading is "
           "lexical: it shows which functions a sweep runs, not which of their failure paths it "
           "reaches.",
           "",
           "**Fallible public functions (returning `t4a_status`): %d; swept: %d (%.0f %%).** "
           "Infallible ones (accessors, retain/release, void): %d, listed for completeness."
           % (total, covered, pct, helpers),
           ""]
    cur = None
    for rel, name, fallible, inline, by in rows:
        if rel != cur:
            out += ["", "## `%s`" % rel, "", "| function | fallible | swept by |", "|---|---|---|"]
            cur = rel
        mark = "yes" if fallible else ("no (inline)" if inline else "no")
        sweeps_by = ", ".join("`%s`" % b for b in by) if by else ("**none**" if fallible else "")
        out.append("| `%s` | %s | %s |" % (name, mark, sweeps_by))
    unswept = [name for rel, name, fallible, inline, by in rows if fallible and not by]
    out += ["", "## Fallible functions no sweep runs (%d)" % len(unswept), ""]
    out += ["- `%s`" % n for n in unswept] if unswept else ["None."]
    return "\n".join(out) + "\n", total, covered


def main(argv):
    text, total, covered = render()
    if "--check" in argv:
        have = open(OUT).read() if os.path.exists(OUT) else None
        ok = have == text
        print("sweep coverage: %s (%d of %d fallible public functions swept)" %
              ("ok" if ok else "drift: run scripts/sweep_coverage.py", covered, total))
        return 0 if ok else 1
    with open(OUT, "w") as f:
        f.write(text)
    print("sweep coverage: %d of %d fallible public functions swept" % (covered, total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
