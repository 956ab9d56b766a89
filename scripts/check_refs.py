#!/usr/bin/env python3
"""Checks that every reference in the repository's code and docs resolves inside the repository:

- a cited requirement (`requirement A5`, `requirements I11–I13, A4 and C2`) is defined in
  docs/requirements.md (a list item starting `- **A5.`);
- a cited design section (`design §13`, `design.md §9`, and any `§N` inside docs/design.md) is a
  `## N.` heading of docs/design.md;
- a relative Markdown link in README.md or docs/*.md names a file that exists;
- in README.md and docs/*.md, a Bazel label in backticks (`//t4a:stress_test`, `//t4a_nvrtc`) is a
  target of a BUILD.bazel file, and a repository path in backticks (`bench/copy_bench.c`) exists
  (the dated rows of docs/validation.md's run table are history and are left as written);
- nothing cites a document outside the repository (a path into ../shared or /work/shared, the
  design brief, a style guide, anchor or toolchain notes) or an unnumbered source ("audit A5",
  "invariant 11", "seed item 3": cite the requirement instead).

Files: every file git tracks outside third_party/ (sources, headers, scripts, build files, docs).
Exit 1 naming each unresolved reference; runs in the drift lane of scripts/test.sh."""
import glob
import os
import re
import subprocess
import sys

import build_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = "docs/requirements.md"
DESIGN = "docs/design.md"
SELF = "scripts/check_refs.py"
SUFFIXES = (".c", ".h", ".py", ".sh", ".bzl", ".md", ".json", ".cmake", ".txt", ".bazel",
            "WORKSPACE", "Doxyfile", ".cc", ".cpp", ".in")

ID = r"[A-Z]\d+"
ID_OR_RANGE = ID + r"(?:\s*[–-]\s*" + ID + r")?"
CITE = re.compile(r"\b[Rr]equirements?\s+(" + ID_OR_RANGE + r"(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+)"
                  + ID_OR_RANGE + r")*)")
DESIGN_CITE = re.compile(r"\bdesign(?:\.md)?(?:\]\([^)]*\))?\s+§\s*(\d+)")
SELF_CITE = re.compile(r"§\s*(\d+)")  # inside docs/design.md, a bare § is one of its sections
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
LABEL = re.compile(r"(?<![@\w])(//[A-Za-z0-9_/]*(?::[A-Za-z0-9_.]+)?)")
TICKED = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^(?:t4a\w*|testing|bench|tools|examples|scripts|docs|cmake|build_defs|gen)/"
                  r"[\w./-]*\.(?:c|h|sh|py|md|bzl|cmake|in)$")
HISTORY = re.compile(r"^\| 20\d\d-\d\d-\d\d")  # a dated row of a run table
OUTSIDE = [
    (re.compile(r"\.\./shared\b|/work/shared\b"), "a path outside the repository"),
    (re.compile(r"design-brief|design brief", re.I), "the design brief (not in the repository)"),
    (re.compile(r"\bstyle\.md\b"), "style.md (not in the repository)"),
    (re.compile(r"\banchors\.md\b"), "anchors.md (not in the repository)"),
    (re.compile(r"\btoolchain\.md\b"), "toolchain.md (not in the repository)"),
    (re.compile(r"\bdriver-entries\.md\b"), "driver-entries.md (not in the repository)"),
    (re.compile(r"\baudit\s+[A-D]\d*\b", re.I), "an audit item: cite its requirement id"),
    (re.compile(r"\b[Ii]nvariants?\s+\d"), "a numbered invariant: cite requirement I<n>"),
    (re.compile(r"\bseed\s+(?:item|audit)\b", re.I), "a seed item: cite its requirement id"),
]
# A comment's or a paragraph's line break inside a citation ("requirement\n * A5").
JOIN = re.compile(r"[ \t]*\n[ \t]*(?:\*(?!/)|//|#(?!#)|>)?[ \t]*")


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for path in out.split("\n"):
        if not path or path.startswith("third_party/") or path == SELF:
            continue
        if path.endswith(SUFFIXES) and os.path.isfile(os.path.join(ROOT, path)):
            yield path


def defined_requirements():
    with open(os.path.join(ROOT, REQUIREMENTS), encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r"^- \*\*(" + ID + r")\b", text, re.M))


def design_sections():
    with open(os.path.join(ROOT, DESIGN), encoding="utf-8") as f:
        return set(int(n) for n in re.findall(r"^## (\d+)\.", f.read(), re.M))


def expand(item, defined):
    """The ids one cited item names: A5, or every id of a range I11–I13 (one prefix)."""
    ends = re.split(r"\s*[–-]\s*", item)
    if len(ends) == 1:
        return [ends[0]], None
    (pa, na), (pb, nb) = [(e[0], int(e[1:])) for e in ends]
    if pa != pb or na >= nb:
        return [], "a malformed range %r" % item
    return ["%s%d" % (pa, n) for n in range(na, nb + 1)], None


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check_ticks(path, text, labels, problems):
    """Labels and repository paths in backticks, in a document; returns how many were checked."""
    count = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        if HISTORY.match(line):
            continue
        for tick in TICKED.finditer(line):
            body = tick.group(1)
            for m in LABEL.finditer(body):
                label = m.group(1)
                if body.startswith("...", m.end()):
                    continue  # a pattern (//..., //t4a/...), not a label
                count += 1
                full = build_graph.normalize(label, "")
                if full not in labels:
                    problems.append("%s:%d: %s names no target of a BUILD.bazel file"
                                    % (path, lineno, label))
            for word in re.split(r"[\s,;()]+", body):
                word = word.rstrip(".:")
                if PATH.match(word) and "*" not in word and "<" not in word:
                    count += 1
                    # t4a/x.h is an installed header's include name: any library's include/t4a/x.h
                    if word.startswith("t4a/") and glob.glob(os.path.join(ROOT, "*", "include", word)):
                        continue
                    if not os.path.exists(os.path.join(ROOT, word)):
                        problems.append("%s:%d: %s names no file of the repository"
                                        % (path, lineno, word))
    return count


def check_file(path, defined, sections, problems, labels):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        return 0
    cites = 0
    for rx, why in OUTSIDE:
        for m in rx.finditer(text):
            problems.append("%s:%d: %r cites %s"
                            % (path, line_of(text, m.start()), m.group(0), why))
    # Citations may wrap across lines (and comment prefixes): search a joined copy, keeping a map
    # back to line numbers through the count of joins before each position.
    joined = JOIN.sub(" ", text)
    for m in CITE.finditer(joined):
        for item in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", m.group(1)):
            ids, err = expand(item.strip(), defined)
            if err:
                problems.append("%s: %s in %r" % (path, err, m.group(0)))
            for rid in ids:
                cites += 1
                if rid not in defined:
                    problems.append("%s: %r cites %s, which %s does not define"
                                    % (path, m.group(0), rid, REQUIREMENTS))
    for m in (SELF_CITE if path == DESIGN else DESIGN_CITE).finditer(joined):
        cites += 1
        if int(m.group(1)) not in sections:
            problems.append("%s: %r: %s has no section %s" % (path, m.group(0), DESIGN, m.group(1)))
    if path.endswith(".md"):
        cites += check_ticks(path, text, labels, problems)
        base = os.path.dirname(path)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            cites += 1
            if not os.path.exists(os.path.normpath(os.path.join(ROOT, base, target))):
                problems.append("%s:%d: link %r names no file of the repository"
                                % (path, line_of(text, m.start()), target))
    return cites


def main():
    defined = defined_requirements()
    sections = design_sections()
    problems = []
    files = 0
    cites = 0
    labels = set(build_graph.load()[1])
    for pkg in build_graph.build_files():  # package groups are labels too
        with open(os.path.join(ROOT, pkg, "BUILD.bazel")) as f:
            labels |= {"//%s:%s" % (pkg, n) for n in
                       re.findall(r'package_group\(\s*name\s*=\s*"([^"]+)"', f.read())}
    # examples/bazel_consumer is a workspace of its own; its labels are its targets
    with open(os.path.join(ROOT, "examples", "bazel_consumer", "BUILD.bazel")) as f:
        labels |= {"//:" + n for n in re.findall(r'name\s*=\s*"([^"]+)"', f.read())}
    for path in tracked_files():
        files += 1
        cites += check_file(path, defined, sections, problems, labels)
    for p in problems:
        print("refs: " + p)
    if problems:
        print("refs check: %d unresolved reference(s)" % len(problems))
        return 1
    print("refs check: ok (%d files, %d references resolve; %d requirements defined)"
          % (files, cites, len(defined)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
