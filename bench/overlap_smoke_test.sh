#!/bin/sh
# overlap_bench's smoke test (unit lane): `overlap_bench --fake --repeats 2` runs the four
# variants and the word check on the fake driver (NVRTC compiles for real) and must end with
# "smoke: ok" (no ordering violation, nothing left alive); bad usage exits 2.
set -u
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$bench" --fake --repeats 2 2>&1) || fail "overlap_bench --fake exited $?: $out"
echo "$out" | grep -q '^smoke: ok' || fail "no smoke line: $out"
echo "$out" | grep -q '^overlap / longer of the two' || fail "no ratio row: $out"
"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
echo "overlap smoke: ok"
