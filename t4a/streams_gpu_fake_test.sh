#!/bin/sh
# The GPU streams test's dry run on the fake driver (unit lane): `t4a_streams_gpu_test --fake`
# runs the same three tests with the kernels' host twins (NVRTC compiles for real) and the fake's
# ordering checks. Passes when all three pass; the fake's timings mean nothing.
set -u
bin="$1"
out=$("$bin" --fake 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: $bin --fake exited $rc"; exit 1; }
echo "$out" | grep -q 'PASSED  \] 3 test(s)' || { echo "FAIL: not all 3 tests passed"; exit 1; }
