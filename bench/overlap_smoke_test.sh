#!/bin/sh
# overlap_bench's smoke test (unit lane): `overlap_bench --fake --repeats 2` runs the four
# variants and the word check on the fake driver (NVRTC compiles for real) and must end with
# "smoke: ok" (no ordering violation, nothing left alive); its --json-file lines (a header and
# smoke rows, no timings) hold every overlap_bench row of bench/goals.tsv, and --json writes JSON
# lines alone on stdout; bad usage exits 2.
set -u
bench="$1"
here=$(dirname "$(readlink -f "$0")")
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
out=$("$bench" --fake --repeats 2 --json-file "$tmp/o.json" 2>&1) ||
  fail "overlap_bench --fake exited $?: $out"
echo "$out" | grep -q '^smoke: ok' || fail "no smoke line: $out"
echo "$out" | grep -q '^overlap / longer of the two' || fail "no ratio row: $out"
head -1 "$tmp/o.json" | grep -q '^{"bench":"overlap_bench","mode":"fake-smoke",' ||
  fail "no fake header line: $(cat "$tmp/o.json")"
for name in upload kernel serial overlap overlap_vs_longer overlap_vs_serial; do
  grep -q "^{\"name\":\"$name\",\"smoke\":\"ok\",\"window\":\"done\"," "$tmp/o.json" ||
    fail "no $name row: $(cat "$tmp/o.json")"
done
if grep -q '"median"\|"ratio"' "$tmp/o.json"; then fail "timings in the fake JSON: $(cat "$tmp/o.json")"; fi
# Every overlap_bench goal names a row the bench writes: none is missing, each says "no timing".
goals=$(python3 "$here/../scripts/check_goals.py" "$tmp/o.json" 2>&1) ||
  fail "check_goals on the fake JSON exited $?: $goals"
echo "$goals" | grep -Eq '^goals: 0 met, 0 missed, 0 failed, 0 missing, [1-9][0-9]* without timing$' ||
  fail "the fake JSON against the goals: $goals"
json=$("$bench" --fake --repeats 2 --json 2>/dev/null) || fail "--json exited $?: $json"
echo "$json" | python3 -c 'import json, sys; [json.loads(l) for l in sys.stdin if l.strip()]' ||
  fail "--json wrote a line that is not JSON: $json"
[ "$(echo "$json" | wc -l)" -eq 7 ] || fail "expected a header and 6 rows: $json"
"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
"$bench" --json --json-file "$tmp/x.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--json with --json-file did not exit 2"
echo "overlap smoke: ok"
