#!/usr/bin/env python3
"""Fails when library code has a file-level cycle. The files are the library sources of t4a_*/ and
t4a/ (every .c that is not a test, a benchmark, a test utility or a fake). A file A uses a file B
when A calls or names a non-static function that B defines, or includes a header that only B
implements (B defines every function the header declares, and the header is not A's own). Prints
each cycle found (a strongly connected component of that graph, with one path around it) and exits
1; exit 0 with a one-line summary otherwise. Regexes, not a C parser: comments and strings are
stripped first, and a definition is a name and a parameter list at the start of a line followed by
an opening brace."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOT_LIBRARY = re.compile(r"(_test|_bench|_testutil|^fake_[a-z_]*)\.c$")
DEFINITION = re.compile(r"^(static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*\{",
                        re.M)
DECLARATION = re.compile(r"^[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*;", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def library_files():
    files = []
    for d in sorted(glob.glob(os.path.join(ROOT, "t4a_*"))) + [os.path.join(ROOT, "t4a")]:
        for path in sorted(glob.glob(os.path.join(d, "*.c"))):
            if not NOT_LIBRARY.search(os.path.basename(path)):
                files.append(os.path.relpath(path, ROOT))
    return files


def resolve(include, src):
    """The repository file an #include "..." of src names, or None (system, CUDA, generated)."""
    candidates = [os.path.join(os.path.dirname(src), include)]
    candidates += [os.path.relpath(os.path.join(d, include), ROOT)
                   for d in glob.glob(os.path.join(ROOT, "t4a*", "include"))]
    candidates.append(include)
    for c in candidates:
        if os.path.isfile(os.path.join(ROOT, c)):
            return os.path.normpath(c)
    return None


def graph():
    files = library_files()
    text = {f: strip(read(os.path.join(ROOT, f))) for f in files}
    defined_in = {}  # non-static function name -> file
    for f in files:
        for m in DEFINITION.finditer(text[f]):
            if not m.group(1) and m.group(2) not in KEYWORDS:
                defined_in.setdefault(m.group(2), f)
    uses = {f: {} for f in files}  # f -> {g: why}
    for f in files:
        own = {m.group(2) for m in DEFINITION.finditer(text[f])}
        for word in set(WORD.findall(text[f])) - own:
            g = defined_in.get(word)
            if g and g != f:
                uses[f].setdefault(g, "names %s()" % word)
        for inc in INCLUDE.findall(text[f]):
            h = resolve(inc, f)
            if not h or not h.endswith(".h"):
                continue
            declared = set(DECLARATION.findall(strip(read(os.path.join(ROOT, h)))))
            owners = {defined_in[n] for n in declared if n in defined_in}
            if len(owners) == 1:
                g = owners.pop()
                if g != f and os.path.splitext(os.path.basename(h))[0] != os.path.splitext(os.path.basename(f))[0]:
                    uses[f].setdefault(g, 'includes "%s"' % inc)
    return files, uses


def components(files, uses):
    """Tarjan's strongly connected components, those of more than one file."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(uses[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in files:
        if v not in index:
            visit(v)
    return out


def cycle_in(comp, uses):
    """One closed path through the component, starting at its first file."""
    start = comp[0]
    members = set(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(uses[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path.reverse()
                return path + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def main():
    files, uses = graph()
    comps = components(files, uses)
    for comp in comps:
        path = cycle_in(comp, uses)
        print("file cycle among %s:" % ", ".join(comp))
        for a, b in zip(path, path[1:]):
            print("  %s -> %s (%s)" % (a, b, uses[a][b]))
    edges = sum(len(u) for u in uses.values())
    print("cycle check: %d library files, %d uses: %s"
          % (len(files), edges, "%d cycle(s)" % len(comps) if comps else "no cycle"))
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
