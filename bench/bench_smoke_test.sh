#!/bin/sh
# The benchmark's smoke test (CI): `t4a_bench --fake --quick` runs every measurement's code path,
# t4a and raw, on the fake driver (NVRTC compiles for real). It must print one "smoke: ok" line
# per measurement and no timing (the fake's timings mean nothing), leave nothing alive on the
# fake, and its --json lines must say "smoke" too. Bad usage exits 2.
set -u
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
out=$("$bench" --fake --quick --json-file "$tmp/fake.json" 2>&1) ||
  fail "t4a_bench --fake --quick exited $?: $out"
for name in launch0 launch4 launch0_noctx launch0_ctxget glaunch0 glaunch4 glaunch4_alt fire0 fire4 cfire0 kfire0 fire4_rebind gfire0 gfire4 gfire4_rebind gfire4_rebind_floor graph1 graph1_done graph1000 alloc memset_submit memset1g modhit modhit_fn \
    chain chain_done chain100 chain100_done chain100_rebind chain100_rebind_done \
    pinned_up_4K pinned_up_64K pinned_down_1M pageable_up_1M pageable_down_4K pageable_down_64K copy1g \
    launch4_live_buffers_100 launch4_live_modules_10; do
  echo "$out" | grep -q "^smoke: ok $name (" || fail "no 'smoke: ok $name' line: $out"
done
# No timing is printed as a result on the fake.
if echo "$out" | grep -Eq 't4a/raw|GB/s| us '; then fail "timings printed on the fake: $out"; fi
echo "$out" | grep -q '^fake driver: nothing left alive after close, 0 stream-ordering violations$' ||
  fail "the fake saw leaks or ordering violations: $out"
echo "$out" | grep -q '^smoke: 49 measurements ran, 0 failures$' || fail "summary line: $out"
# Every t4a_bench row of bench/goals.tsv is a row this binary writes: the fake's JSON holds each
# one, except the transfer sizes the fake skips (8, 64 and 256 MiB). Each row says its window.
here=$(dirname "$(readlink -f "$0")")
goals=$(python3 "$here/../scripts/check_goals.py" "$tmp/fake.json" 2>&1)
case $? in 0 | 1) ;; *) fail "check_goals on the fake JSON: $goals" ;; esac
missing=$(echo "$goals" | awk '$1 == "missing" && $2 == "t4a_bench" { print $3 }' |
  grep -Ev '_(8M|64M|256M)$')
[ -z "$missing" ] || fail "bench/goals.tsv names rows t4a_bench does not write: $missing"
echo "$goals" | grep -Eq '^goals: 0 met, 0 missed, 0 failed, [0-9]+ missing, [1-9][0-9]* without timing$' ||
  fail "the fake JSON against the goals: $goals"
if grep -v '"bench"' "$tmp/fake.json" | grep -Eqv '"window":"(submit|done)"'; then
  fail "a JSON line says neither submit nor done: $(cat "$tmp/fake.json")"
fi
echo "$out" | grep -q '^smoke: ok calibration$' || fail "no calibration line: $out"
# The warm chain on the fake: no host wait and no heap allocation inside the windows.
echo "$out" | grep -Eq '^smoke: ok chain \(.*host waits 0, heap allocations 0, NVRTC calls 0' ||
  fail "the warm chain waited or allocated: $out"

json=$("$bench" --fake --quick --json launch4 chain 2>&1) || fail "--json exited $?: $json"
echo "$json" | head -1 | grep -q '"mode":"fake-smoke"' || fail "no fake header line: $json"
echo "$json" | grep -q '^{"name":"launch4","smoke":"ok","window":"submit",' || fail "no launch4 JSON line: $json"
if echo "$json" | grep -q '"median"'; then fail "timings in the fake JSON: $json"; fi
echo "$json" | grep -q '^{"name":"chain_done","smoke":"ok","window":"done",' || fail "no chain_done line: $json"
[ "$(echo "$json" | wc -l)" -eq 4 ] || fail "expected a header and 3 lines (launch4, chain, chain_done): $json"

"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
"$bench" --list | grep -q '^launch: launch0 launch4' || fail "--list"
echo "bench smoke: ok"
