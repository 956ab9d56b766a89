#!/usr/bin/env python3
"""The valgrind memcheck lane: every CPU unit test of a CMake build under memcheck.

  scripts/valgrind_lane.py [--build DIR] [-j N] [-R REGEX] [-E REGEX]

Each test binary runs under `valgrind --leak-check=full --errors-for-leak-kinds=definite
--error-exitcode=99`: any invalid read or write, use of uninitialised memory, bad free or
definitely lost block fails it. Logs go to DIR/valgrind/<test>.log.

Deliberate leaks. Where t4a cannot prove that queued work finished it leaks (and counts) what
that work may touch instead of freeing it on a guess, and the failure sweeps make it do so on
purpose; those tests name the functions whose allocations may leak with
T4A_FIXTURE_DELIBERATE_LEAKS("NAME", ...) (testing/fixture/leaks.h: it defines their
__lsan_default_suppressions(); a hand-written one's "leak:NAME" lines are read too), and check
with the fake driver that whatever is left alive is exactly what t4a counted. This script reads those names from the test's own
sources (its BUILD target's srcs) and turns them into a valgrind suppression file for that test alone, so
one list serves LeakSanitizer and valgrind and no other test inherits it.

Skipped, with the reason printed: sh_test targets (they drive other binaries through a shell;
memcheck would only watch the shell, and the binaries they drive are the CLI and examples, whose
library code the cmocka tests already cover under memcheck).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

import build_graph

from build_graph import ROOT
VALGRIND = ["valgrind", "--quiet", "--vgdb=no", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite", "--num-callers=50",
            "--track-origins=no"]


def deliberate_leaks(target):
    """The "leak:NAME" entries of the test's __lsan_default_suppressions()."""
    names = []
    for src in target.srcs:
        with open(os.path.join(ROOT, target.path(src))) as f:
            text = f.read()
        m = re.search(r"__lsan_default_suppressions\(void\)\s*\{(.*?)\}", text, re.S)
        if m:
            names += re.findall(r"leak:([A-Za-z_][A-Za-z0-9_]*)", m.group(1))
        # testing/fixture/leaks.h: T4A_FIXTURE_DELIBERATE_LEAKS("NAME", ...) at the start of a line
        for m in re.finditer(r"^T4A_FIXTURE_DELIBERATE_LEAKS\((.*?)\)", text, re.S | re.M):
            names += re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', m.group(1))
    return sorted(set(names))


def suppressions(names):
    out = []
    for n in names:
        # gcc may clone a static function (NAME.isra.0, NAME.constprop.0): match those too.
        for fun in (n, n + ".*"):
            out.append("{\n   t4a-deliberate-%s\n   Memcheck:Leak\n   match-leak-kinds: all\n"
                       "   ...\n   fun:%s\n   ...\n}\n" % (n, fun))
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "gcc"))
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("-R", default=None, help="only tests whose name matches")
    ap.add_argument("-E", default=None, help="not the tests whose name matches")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)  # the tests run with the build directory as cwd

    targets = {t.cmake_name: t for t in build_graph.load()[0]}
    listing = subprocess.run(["ctest", "--show-only=json-v1", "-LE", "gpu"], cwd=args.build,
                             check=True, capture_output=True, text=True).stdout
    tests = json.loads(listing)["tests"]
    logdir = os.path.join(args.build, "valgrind")
    os.makedirs(logdir, exist_ok=True)

    jobs = []
    for t in tests:
        name, cmd = t["name"], t["command"]
        if args.R and not re.search(args.R, name):
            continue
        if args.E and re.search(args.E, name):
            print("skip %-40s excluded (-E)" % name)
            continue
        if os.path.basename(cmd[0]) == "sh":
            print("skip %-40s a shell script (sh_test): memcheck would watch the shell" % name)
            continue
        supp = os.path.join(logdir, name + ".supp")
        with open(supp, "w") as f:
            f.write(suppressions(deliberate_leaks(targets[name])) if name in targets else "")
        jobs.append((name, cmd, supp))

    def run(job):
        name, cmd, supp = job
        log = os.path.join(logdir, name + ".log")
        start = time.time()
        with open(log, "w") as out:
            rc = subprocess.call(VALGRIND + ["--suppressions=" + supp] + cmd, cwd=args.build,
                                 stdout=out, stderr=subprocess.STDOUT)
        return name, rc, time.time() - start, log

    failed = []
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        for name, rc, secs, log in pool.map(run, jobs):
            verdict = "ok" if rc == 0 else ("SKIP (77)" if rc == 77 else "FAILED (rc %d)" % rc)
            print("%-44s %6.1f s  %s" % (name, secs, verdict), flush=True)
            if rc not in (0, 77):
                failed.append((name, log))
    for name, log in failed:
        print("---- %s (%s), last lines:" % (name, os.path.relpath(log, ROOT)))
        with open(log) as f:
            sys.stdout.write("".join(f.readlines()[-40:]))
    print("valgrind memcheck: %d tests, %d failed, %.0f s" % (len(jobs), len(failed),
                                                               time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
