#!/bin/sh
# xfer_bench's smoke test (unit lane): `xfer_bench --fake` runs every variant at every size up to
# 64 MiB, both ways, on the fake driver, checks every transfer byte-exact, and must end with
# "smoke: ok" (no ordering violation, nothing left alive) and print no timing; the t4a paths it
# reports must include split copies, single copies, pipelined pieces and a ring grown to its depth
# with all of it in flight; bad usage exits 2.
set -u
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$bench" --fake 2>&1) || fail "xfer_bench --fake exited $?: $out"
echo "$out" | grep -q '^smoke: ok' || fail "no smoke line: $out"
echo "$out" | grep -Eq '^smoke: 5 sizes both ways, every transfer byte-exact; t4a: [0-9]+ copy threads, ring made 4 of 4, most chunks in flight 4, split copies [1-9][0-9]*, single copies [1-9][0-9]*, pipelined pieces [1-9][0-9]*$' ||
  fail "paths line: $out"
if echo "$out" | grep -Eq 'GB/s| us |goal'; then fail "timings printed on the fake: $out"; fi
"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
echo "xfer smoke: ok"
