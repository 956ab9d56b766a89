#!/bin/sh
# The soak on the fake driver (CI): `soak --fake` for ${T4A_SOAK_SECONDS:-30} s must pass (0
# failed calls, 0 mismatches, 0 unbalanced counters, nothing left alive on the fake), print a
# figure for every kind of operation, and its fault mode on the fake must see the fault typed on
# every runtime of the device. Bad usage exits 2.
set -u
soak="$1"
secs="${T4A_SOAK_SECONDS:-30}"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$soak" --fake --threads 4 --seconds "$secs" --seed 7 2>&1) || fail "soak --fake exited $?: $out"
echo "$out" | tail -25
echo "$out" | grep -q '^soak: PASS$' || fail "no PASS line"
echo "$out" | grep -Eq '^soak: total [0-9]+ ops in .*; 0 failed calls, 0 mismatches, 0 unbalanced counters$' ||
  fail "summary line"
for kind in create release upload upload_pinned download download_pinned launch fire rebind_fire \
    chain_replay copy copy_between raw_launch compile sync; do
  echo "$out" | grep -Eq "^soak: $kind +[1-9][0-9]* " || fail "no operation of kind $kind ran"
done

fault=$("$soak" --fake --fault 2>&1) || fail "soak --fake --fault exited $?: $fault"
echo "$fault"
echo "$fault" | grep -q '^fault: ok' || fail "fault mode"

"$soak" --threads 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage must exit 2"
echo "soak_fake_test: ok"
