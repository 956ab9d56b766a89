#!/bin/sh
# The cold-start benchmark's smoke test (CI): `coldstart_bench --fake` runs every child (t4a and
# raw, open and first kernel, each a fresh process on its own fake driver; NVRTC compiles for
# real once in the parent) and must print one "smoke: ok NAME" line per row and no timing, its
# JSON one line per row naming the window, and --profile the fake's call counts for the t4a
# children. The first-kernel children check the kernel's value and that the compile was a disk
# hit (no NVRTC compile). Bad usage exits 2.
set -u
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

out=$("$bench" --fake --profile --json-file "$tmp/cold.json" 2>&1) ||
  fail "coldstart_bench --fake exited $?: $out"
for name in open open_spawn first_kernel first_kernel_in_process first_kernel_pool open_min_ring; do
  echo "$out" | grep -q "^smoke: ok $name (3 fresh processes per side; " ||
    fail "no 'smoke: ok $name' line: $out"
  grep -q "^{\"name\":\"$name\",\"smoke\":\"ok\",\"window\":\"done\"," "$tmp/cold.json" ||
    fail "no $name JSON line: $(cat "$tmp/cold.json")"
done
echo "$out" | grep -q '^smoke: ok$' || fail "no final 'smoke: ok': $out"
if echo "$out" | grep -Eq 't4a/raw| us '; then fail "timings printed on the fake: $out"; fi
head -1 "$tmp/cold.json" | grep -q '^{"bench":"coldstart_bench","mode":"fake-smoke",' ||
  fail "no header line: $(cat "$tmp/cold.json")"
[ "$(wc -l < "$tmp/cold.json")" -eq 7 ] || fail "expected a header and 6 rows: $(cat "$tmp/cold.json")"
# --profile: what the t4a children asked of the fake. Open pins nothing and creates no event: the
# staging ring's chunks come when the ring first hands them out (t4a_xfer/xfer.c: chunk_pin).
echo "$out" | grep -Eq '^open-t4a: profile-fake: cuInit=1 .*cuMemPoolCreate=1' ||
  fail "no open profile: $out"
if echo "$out" | grep '^open-t4a: profile-fake:' | grep -Eq 'cuMemHostAlloc|cuEventCreate'; then
  fail "t4a_runtime_open pinned memory or created events: $out"
fi
echo "$out" | grep -Eq '^first-t4a: profile-fake:.* cuLaunchKernel=1( |$)' ||
  fail "no first-kernel profile: $out"
# The first kernel's 4-byte download pins one chunk at T4A_XFER_SMALL_PIN_BYTES (64 KiB), not a
# whole 16 MiB chunk; open pins nothing.
echo "$out" | grep -q '^first-t4a: staging-pinned: 65536 bytes in 1 chunks$' ||
  fail "the first kernel did not pin exactly one 64 KiB chunk: $out"
echo "$out" | grep -q '^open-t4a: staging-pinned: 0 bytes in 0 chunks$' ||
  fail "open pinned staging memory: $out"
echo "$out" | grep -Eq '^open-t4a: [1-9][0-9]* t4a heap allocations$' || fail "no heap count: $out"
# Its goals (bench/goals.tsv) name rows it writes.
here=$(dirname "$(readlink -f "$0")")
goals=$(python3 "$here/../scripts/check_goals.py" "$tmp/cold.json" 2>&1) ||
  fail "check_goals on the fake JSON exited $?: $goals"
echo "$goals" | grep -q '^goals: 0 met, 0 missed, 0 failed, 0 missing, 2 without timing$' ||
  fail "the goals against the fake JSON: $goals"

"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
"$bench" --samples 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--samples 0 did not exit 2"
echo "coldstart smoke: ok"
