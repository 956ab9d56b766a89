#!/usr/bin/env python3
"""Checks that README.md shows examples/readme_example.c exactly: the fenced ```c block that
follows the line `<!-- examples/readme_example.c -->` must equal the file byte for byte (the
example is built and run in CI, so the README's code is what CI compiles). Exit 1 on a
difference, naming the first differing line; runs in the drift lane of scripts/test.sh."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = "<!-- examples/readme_example.c -->"
EXAMPLE = "examples/readme_example.c"


def readme_block(text):
    lines = text.split("\n")
    try:
        at = lines.index(MARKER)
    except ValueError:
        return None, "README.md has no line %r before the example's code block" % MARKER
    if at + 1 >= len(lines) or lines[at + 1] != "```c":
        return None, "README.md: the line after %r must open a ```c block" % MARKER
    body = []
    for line in lines[at + 2:]:
        if line == "```":
            return "\n".join(body) + "\n", None
        body.append(line)
    return None, "README.md: the example's code block is not closed"


def main():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        block, err = readme_block(f.read())
    if err is None:
        with open(os.path.join(ROOT, EXAMPLE), encoding="utf-8") as f:
            code = f.read()
        if block != code:
            a, b = block.split("\n"), code.split("\n")
            n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            err = ("README.md's example differs from %s at line %d of the file:\n  README: %r\n"
                   "  file:   %r\n(copy the file into the README's block)"
                   % (EXAMPLE, n + 1, a[n] if n < len(a) else "<end>",
                      b[n] if n < len(b) else "<end>"))
    print("readme check: %s" % (err if err else "ok (README.md shows %s exactly)" % EXAMPLE))
    return 1 if err else 0


if __name__ == "__main__":
    sys.exit(main())
