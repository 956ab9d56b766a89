#!/bin/sh
# The benchmark's smoke test (CI): `t4a_bench --fake --quick` runs every measurement's code path,
# t4a and raw, on the fake driver (NVRTC compiles for real). It must print one "smoke: ok" line
# per measurement and no timing (the fake's timings mean nothing), leave nothing alive on the
# fake, and its --json lines must say "smoke" too. Bad usage exits 2.
set -u
bench="$1"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bench" --fake --quick 2>&1) || fail "t4a_bench --fake --quick exited $?: $out"
for name in launch0 launch4 launch0_noctx glaunch0 glaunch4 glaunch4_alt fire0 fire4 cfire0 kfire0 fire4_rebind gfire0 gfire4 gfire4_rebind gfire4_rebind_floor graph1 graph1000 alloc memset_submit memset1g modhit modhit_fn \
    chain chain100 chain100_rebind pinned_up_4K pinned_down_1M pageable_up_1M pageable_down_4K copy1g \
    launch4_live_buffers_100 launch4_live_modules_10; do
  echo "$out" | grep -q "^smoke: ok $name (" || fail "no 'smoke: ok $name' line: $out"
done
# No timing is printed as a result on the fake.
if echo "$out" | grep -Eq 't4a/raw|GB/s| us '; then fail "timings printed on the fake: $out"; fi
echo "$out" | grep -q '^fake driver: nothing left alive after close, 0 stream-ordering violations$' ||
  fail "the fake saw leaks or ordering violations: $out"
echo "$out" | grep -q '^smoke: 40 measurements ran, 0 failures$' || fail "summary line: $out"
echo "$out" | grep -q '^smoke: ok calibration$' || fail "no calibration line: $out"
# The warm chain on the fake: no host wait and no heap allocation inside the windows.
echo "$out" | grep -Eq '^smoke: ok chain \(.*host waits 0, heap allocations 0, NVRTC calls 0' ||
  fail "the warm chain waited or allocated: $out"

json=$("$bench" --fake --quick --json launch4 chain 2>&1) || fail "--json exited $?: $json"
echo "$json" | head -1 | grep -q '"mode":"fake-smoke"' || fail "no fake header line: $json"
echo "$json" | grep -q '^{"name":"launch4","smoke":"ok",' || fail "no launch4 JSON line: $json"
if echo "$json" | grep -q '"median"'; then fail "timings in the fake JSON: $json"; fi
[ "$(echo "$json" | wc -l)" -eq 3 ] || fail "expected a header and 2 lines: $json"

"$bench" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad usage did not exit 2"
"$bench" --list | grep -q '^launch: launch0 launch4' || fail "--list"
echo "bench smoke: ok"
