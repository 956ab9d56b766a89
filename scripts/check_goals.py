#!/usr/bin/env python3
"""Checks a benchmark run against bench/goals.tsv: met / MISSED per goal.

    python3 scripts/check_goals.py [--goals FILE] [--only-present] JSON...

Each JSON is a bench's JSON-lines file (--json-file of t4a_bench, coldstart_bench, nvrtc_bench
and overlap_bench): a header line {"bench": NAME, ...} and one line per row ({"name": ROW, ...}).
For every goal of a bench that was given, prints one line: "met", "MISSED", "FAILED" (the row's
line carries an error), "missing" (no such row in the JSON) or, on a fake smoke JSON, "no timing".
Goals of benches no JSON was given for are counted as not checked. Exit status: 1 if any goal
was MISSED, FAILED or missing (missing rows are skipped with --only-present, for a run of a few
groups), 2 for bad usage or an unreadable file, 0 otherwise.
"""
import argparse
import json
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = ("ratio", "speed", "t4a_us", "gbps", "heap_per_op", "waits_per_op",
           "events_per_admission")


class Bad(Exception):
    pass


def read_goals(path):
    goals = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 7:
                raise Bad("%s:%d: %d columns, want 7 (bench row window metric op value source)"
                          % (path, n, len(cols)))
            bench, row, window, metric, op, value, source = cols
            if window not in ("submit", "done"):
                raise Bad("%s:%d: window %r is not submit or done" % (path, n, window))
            if metric not in METRICS:
                raise Bad("%s:%d: unknown metric %r" % (path, n, metric))
            if op not in ("<=", ">="):
                raise Bad("%s:%d: op %r is not <= or >=" % (path, n, op))
            try:
                v = float(value)
            except ValueError:
                raise Bad("%s:%d: value %r is not a number" % (path, n, value))
            goals.append({"bench": bench, "row": row, "window": window, "metric": metric,
                          "op": op, "value": v, "source": source, "line": n})
    return goals


def read_run(path):
    """(bench name, header, {row name: row}) of one JSON-lines file."""
    header, rows = None, {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise Bad("%s:%d: not JSON: %s" % (path, n, e))
            if header is None:
                if "bench" not in obj:
                    raise Bad("%s:%d: the first line has no \"bench\"" % (path, n))
                header = obj
            elif "name" in obj:
                rows[obj["name"]] = obj
    if header is None:
        raise Bad("%s: empty" % path)
    return header["bench"], header, rows


def counter(row, key):
    c = row.get("counters_t4a") or {}
    if key not in c or not c.get("ops"):
        return None
    return c[key], c["ops"]


def value_of(row, metric):
    """The row's figure for the metric, or None when the row does not carry it."""
    if metric == "ratio":
        return row.get("ratio")
    if metric == "speed":
        if "speed_vs_raw" in row:
            return row["speed_vs_raw"]
        r = row.get("ratio")
        return 1.0 / r if r else None
    if metric == "t4a_us":
        return (row.get("t4a") or {}).get("median")
    if metric == "gbps":
        return row.get("t4a_gbs")
    if metric in ("heap_per_op", "waits_per_op"):
        c = counter(row, "heap_allocations" if metric == "heap_per_op" else "host_waits")
        return None if c is None else c[0] / c[1]
    if metric == "events_per_admission":
        c = row.get("counters_t4a") or {}
        if not c.get("admissions"):
            return None
        return c.get("events_recorded", 0) / c["admissions"]
    return None


def fmt(v):
    return "%.4g" % v


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--goals", default=os.path.join(ROOT, "bench", "goals.tsv"))
    p.add_argument("--only-present", action="store_true",
                   help="skip goals whose row the JSON does not hold (a run of some groups)")
    p.add_argument("json", nargs="+")
    a = p.parse_args(argv)
    try:
        goals = read_goals(a.goals)
        runs = {}
        for path in a.json:
            bench, header, rows = read_run(path)
            runs.setdefault(bench, (header, {}))[1].update(rows)
    except (Bad, OSError) as e:
        print("check_goals: %s" % e, file=sys.stderr)
        return 2
    counts = {"met": 0, "MISSED": 0, "FAILED": 0, "missing": 0, "no timing": 0, "skipped": 0}
    unchecked = {}
    for bench in runs:
        h = runs[bench][0]
        print("# %s: %s, %s, t4a %s, %s" % (bench, h.get("device", "?"), h.get("mode", "?"),
                                           h.get("t4a", "?"), h.get("date", "?")))
    for g in goals:
        if g["bench"] not in runs:
            unchecked[g["bench"]] = unchecked.get(g["bench"], 0) + 1
            continue
        header, rows = runs[g["bench"]]
        goal = "%s %s %s" % (g["metric"], g["op"], fmt(g["value"]))
        row = rows.get(g["row"])
        detail = ""
        if row is None:
            if a.only_present:
                counts["skipped"] += 1
                continue
            verdict = "missing"
        elif "error" in row:
            verdict, detail = "FAILED", "error %s" % row["error"]
        elif row.get("smoke") is not None or header.get("mode") == "fake-smoke":
            verdict = "no timing"
        else:
            v = value_of(row, g["metric"])
            if v is None:
                verdict, detail = "FAILED", "the row has no %s" % g["metric"]
            else:
                ok = v <= g["value"] if g["op"] == "<=" else v >= g["value"]
                verdict, detail = ("met" if ok else "MISSED"), "%s = %s" % (g["metric"], fmt(v))
                if row.get("window") not in (None, g["window"]):
                    verdict, detail = "FAILED", "window %s, the goal is for %s" % (
                        row.get("window"), g["window"])
        counts[verdict] += 1
        print("%-9s %-16s %-36s %-6s %-30s %-22s %s" % (
            verdict, g["bench"], g["row"], g["window"], goal, detail, g["source"]))
    for bench, n in sorted(unchecked.items()):
        print("not checked: %d goal(s) of %s (no JSON of it given)" % (n, bench))
    print("goals: %d met, %d missed, %d failed, %d missing, %d without timing%s" % (
        counts["met"], counts["MISSED"], counts["FAILED"], counts["missing"], counts["no timing"],
        ", %d skipped (--only-present)" % counts["skipped"] if counts["skipped"] else ""))
    return 1 if counts["MISSED"] or counts["FAILED"] or counts["missing"] else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    sys.exit(main(sys.argv[1:]))
