#!/bin/sh
# Checks the t4a program: `info --fake` lists the fake devices; `info` without a driver (forced
# with a bogus T4A_LIBCUDA_PATH) says so and exits non-zero; bad usage exits 2.
set -u
t4a="$1"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$t4a" info --fake 3) || fail "info --fake exited $?"
echo "$out" | grep -q '^devices: 3$' || fail "info --fake 3 did not list 3 devices: $out"
echo "$out" | grep -q '^device 2: T4A Fake Device 2$' || fail "device 2 missing: $out"
echo "$out" | grep -q 'compute capability: 9.0' || fail "no compute capability: $out"
echo "$out" | grep -q '^driver: CUDA 13.0 (fake)' || fail "no driver line: $out"

out=$(T4A_LIBCUDA_PATH=/nonexistent/libcuda.so.1 "$t4a" info)
rc=$?
[ "$rc" -ne 0 ] || fail "info without a driver exited 0"
echo "$out" | grep -q 'no CUDA driver: DRIVER_NOT_FOUND' || fail "no plain message: $out"

"$t4a" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown command did not exit 2"
"$t4a" version | grep -q '^0\.1\.0$' || fail "version"
echo "cli_test: ok"
