#!/usr/bin/env python3
"""Checks the counts README.md and docs/*.md state against the code that defines them.

Each claim below is a sentence of a document (a regular expression whose group 1 is the stated
number, in digits or in words) and a count computed from the sources: the counters of
T4A_COUNTER_LIST (however many per-module lists it joins), the driver and NVRTC catalogues and
their required entries, the status codes, the fault points, the seven libraries, the faults lane's
scenarios, the fuzz targets, the public and fallible functions of the installed headers (as
scripts/sweep_coverage.py reads them), and the defaults behind "one event per 512 admissions".
A claim whose sentence is no longer found fails too, so rewording a sentence means updating its
claim here. Exit 1 naming each mismatch; runs in the drift lane of scripts/test.sh."""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def headers():
    """The repository's own headers (git's list: never bazel-* links or build outputs)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.h"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for rel in out.split("\n"):
        if rel and not rel.startswith("third_party/") and os.path.isfile(os.path.join(ROOT, rel)):
            yield rel


_XMACROS = None


def xmacros():
    """Every `#define NAME(X) ...` list of the repository's headers: NAME -> (entries, nested)."""
    global _XMACROS
    if _XMACROS is None:
        _XMACROS = {}
        for rel in headers():
            text = strip_comments(read(rel)).replace("\\\n", " ")
            for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(X\)(.*)$", text, re.M):
                body = m.group(2)
                entries = re.findall(r"\bX\(\s*([^,\s)]+)([^)]*)\)", body)
                nested = re.findall(r"\b(\w+)\(X\)", body)
                _XMACROS[m.group(1)] = (entries, nested)
    return _XMACROS


def xentries(name):
    entries, nested = xmacros()[name]
    out = list(entries)
    for n in nested:
        out += xentries(n)
    return out


def counters():
    return len(xentries("T4A_COUNTER_LIST"))


def driver_entries(need=None):
    es = xentries("T4A_DRIVER_CATALOG")
    return len([e for e in es if need is None or e[1].split(",")[-1].strip() == need])


def optional_driver_entries():
    return sorted(e[0] for e in xentries("T4A_DRIVER_CATALOG")
                  if e[1].split(",")[-1].strip() == "OPTIONAL")


def nvrtc_entries(need=None):
    es = xentries("T4A_NVRTC_CATALOG")
    return len([e for e in es if need is None or e[1].split(",")[-1].strip() == need])


def statuses():
    return len(xentries("T4A_STATUS_MAP"))


def fault_points():
    return len(xentries("T4A_FAULT_POINT_LIST"))


def libraries():
    return len([d for d in glob.glob(os.path.join(ROOT, "t4a_*"))
                if os.path.isdir(os.path.join(d, "include", "t4a"))
                and os.path.exists(os.path.join(d, "BUILD.bazel"))])


def fault_lanes():
    text = strip_comments(read("t4a/faults_gpu_test.c"))
    m = re.search(r"k_lanes\[\]\s*=\s*\{(.*?)\};", text, re.S)
    return len(re.findall(r"\{\s*\d+\s*,", m.group(1)))


def fuzz_targets():
    return len(glob.glob(os.path.join(ROOT, "testing", "fuzz", "*_fuzz.c")))


_SWEEP = None


def sweep():
    global _SWEEP
    if _SWEEP is None:
        import sweep_coverage
        _, total, covered = sweep_coverage.render()
        public = sum(len(sweep_coverage.declarations(h)) for h in sweep_coverage.public_headers())
        _SWEEP = {"fallible": total, "swept": covered, "unswept": total - covered,
                  "public": public}
    return _SWEEP


def seal_every():
    text = strip_comments(read("t4a_retire/retire.c"))
    default = int(re.search(r"max_pending_records\s*==\s*0\)\s*o\.max_pending_records\s*=\s*(\d+)",
                            text).group(1))
    assert re.search(r"seal_at\s*=\s*o\.max_pending_records\s*/\s*2", text)
    return default // 2


NUM = r"(\d[\d,]*|[a-z]+)"
# (document, pattern with the stated number as group 1, what the code says, what it counts)
CLAIMS = [
    ("README.md", r"names all\s+of them \(" + NUM + r" today", counters, "counters"),
    ("docs/design.md", r"joins them into one list \(" + NUM + r" counters today\)", counters, "counters"),
    ("docs/design.md", r"The catalogue lists " + NUM + r" entry points", driver_entries,
     "driver catalogue entries"),
    ("docs/design.md", r"entry points, " + NUM + r" of them required",
     lambda: driver_entries("REQUIRED"), "required driver entries"),
    ("docs/design.md", r"its own catalogue \(" + NUM + r" entry points", nvrtc_entries,
     "NVRTC catalogue entries"),
    ("docs/design.md", r"its own catalogue \(\S+ entry points, " + NUM + r" required",
     lambda: nvrtc_entries("REQUIRED"), "required NVRTC entries"),
    ("docs/design.md", r"X-macro table with\s+stable values, names and messages; " + NUM
     + r" codes", statuses, "status codes"),
    ("docs/design.md", r"through one hook \(`t4a_fault_sim`, " + NUM + r" points", fault_points,
     "fault points"),
    ("README.md", r"\b([A-Za-z]+|\d+) static libraries with strict edges", libraries, "libraries"),
    ("docs/design.md", r"^(\S+) static libraries and a facade", libraries, "libraries"),
    ("README.md", r"faults lane on an H200 \(" + NUM + r" scenarios", fault_lanes,
     "faults lane scenarios"),
    ("docs/design.md", r"runs " + NUM + r" lanes on one GPU", fault_lanes, "faults lane scenarios"),
    ("docs/validation.md", r"\(`faults_gpu_test`, " + NUM + r" lanes\)", fault_lanes,
     "faults lane scenarios"),
    ("README.md", r"\b" + NUM + r" libFuzzer targets", fuzz_targets, "fuzz targets"),
    ("README.md", r"\(" + NUM + r" of \S+ fallible public functions\)",
     lambda: sweep()["swept"], "swept fallible public functions"),
    ("README.md", r"\(\S+ of " + NUM + r" fallible public functions\)",
     lambda: sweep()["fallible"], "fallible public functions"),
    ("docs/validation.md", NUM + r" of \S+\s+fallible public functions",
     lambda: sweep()["swept"], "swept fallible public functions"),
    ("docs/validation.md", r"\S+ of " + NUM + r"\s+fallible public functions",
     lambda: sweep()["fallible"], "fallible public functions"),
    ("README.md", r"installed headers declare " + NUM + r" public functions",
     lambda: sweep()["public"], "public functions of the installed headers"),
    ("README.md", r"public functions \(" + NUM + r" of them return a status",
     lambda: sweep()["fallible"], "fallible public functions"),
    ("README.md", r"one event per " + NUM + r" admissions", seal_every,
     "admissions per sealing event (default)"),
    ("README.md", r"≤ 1 event per " + NUM + r" launches", seal_every,
     "launches per sealing event (default)"),
    ("t4a_retire/include/t4a/retire.h", r"most one event per " + NUM + r" admissions", seal_every,
     "admissions per sealing event (default)"),
]


def stated(s):
    s = s.replace(",", "")
    return int(s) if s.isdigit() else WORDS.get(s.lower())


def main():
    problems = []
    docs = {}
    for rel, pattern, fn, what in CLAIMS:
        if rel not in docs:
            docs[rel] = read(rel)
        text = docs[rel]
        # A sentence may wrap: a space in a pattern matches any run of white space.
        ms = list(re.finditer(pattern.replace(" ", r"\s+"), text, re.M))
        if not ms:
            problems.append("%s: no sentence matches %r (the claim about %s: reword the check "
                            "in scripts/check_counts.py with the sentence)" % (rel, pattern, what))
            continue
        want = fn()
        for m in ms:
            got_s = next(g for g in m.groups() if g is not None)
            got = stated(got_s)
            if got != want:
                line = text.count("\n", 0, m.start()) + 1
                problems.append("%s:%d: says %s %s; the code has %d" % (rel, line, got_s, what,
                                                                        want))
    text = docs["docs/design.md"]
    m = re.search(r"The optional entries\s+are (.*?)(?:, which only|\.\s)", text, re.S)
    named = sorted(set(re.findall(r"`(cu\w+)`", m.group(1)))) if m else None
    if named != optional_driver_entries():
        problems.append("docs/design.md §2: names optional entries %s; the catalogue's are %s"
                        % (named, optional_driver_entries()))
    for p in problems:
        print("counts: " + p)
    if problems:
        print("counts check: %d mismatch(es)" % len(problems))
        return 1
    print("counts check: ok (%d claims: %d counters, %d driver entries, %d statuses, %d public "
          "functions)" % (len(CLAIMS) + 1, counters(), driver_entries(), statuses(),
                          sweep()["public"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
