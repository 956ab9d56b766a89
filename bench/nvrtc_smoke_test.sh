#!/bin/sh
# nvrtc_bench's smoke test (unit lane; NVRTC runs on the CPU, no GPU): one short run
# (--repeats 1 --batch 10) with --json-file must write a header {"bench":"nvrtc_bench",...} and
# rows that each say their window and carry a t4a median in us (or an error), and hold every
# nvrtc_bench row of bench/goals.tsv (none "missing"; the figures of a short run on a shared
# machine are not judged). --mem-hits writes its two rows too; bad usage exits 2.
set -u
bench="$1"
here=$(dirname "$(readlink -f "$0")")
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
out=$("$bench" --repeats 1 --batch 10 --json-file "$tmp/n.json" 2>&1) ||
  fail "nvrtc_bench exited $?: $out"
head -1 "$tmp/n.json" | grep -q '^{"bench":"nvrtc_bench","mode":"cpu",.*"run":"full","repeats":1,"batch":10}$' ||
  fail "no header line: $(head -1 "$tmp/n.json")"
python3 - "$tmp/n.json" <<'PY' || fail "a row of the wrong shape: $(cat "$tmp/n.json")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = lines[1:]
assert len(rows) >= 30, len(rows)
for r in rows:
    assert "name" in r, r
    if "error" in r:
        continue
    assert r["window"] in ("submit", "done"), r
    assert r["unit"] == "us" and isinstance(r["t4a"]["median"], (int, float)), r
PY
goals=$(python3 "$here/../scripts/check_goals.py" "$tmp/n.json" 2>&1)
case $? in 0 | 1) ;; *) fail "check_goals on the JSON: $goals" ;; esac
missing=$(echo "$goals" | awk '$1 == "missing" && $2 == "nvrtc_bench" { print $3 }')
[ -z "$missing" ] || fail "bench/goals.tsv names rows nvrtc_bench does not write: $missing"
echo "$goals" | grep -Eq '^goals: [0-9]+ met, [0-9]+ missed, [0-9]+ failed, 0 missing, 0 without timing$' ||
  fail "the JSON against the goals: $goals"
out=$("$bench" --mem-hits --repeats 1 --batch 10 --json-file "$tmp/m.json" 2>&1) ||
  fail "--mem-hits exited $?: $out"
for name in memory_hit_20_lines memory_hit_2000_lines; do
  grep -q "^{\"name\":\"$name\",\"group\":\"nvrtc\",\"window\":\"submit\"," "$tmp/m.json" ||
    fail "--mem-hits wrote no $name row: $(cat "$tmp/m.json")"
done
"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
"$bench" --json-file "$tmp/no/such/dir/x.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unwritable --json-file did not exit 2"
echo "nvrtc smoke: ok"
