#!/bin/sh
# Checks the t4a program: `info --fake` lists the fake devices; `info` without a driver (forced
# with a bogus T4A_LIBCUDA_PATH) says so and exits non-zero; `compile` compiles, then hits the disk
# cache from a second process with no NVRTC call, and prints the log of a failing compile; bad
# usage exits 2.
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

# t4a compile: a real NVRTC compile to sm_90 CUBIN, then a disk hit from a second process.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'extern "C" __global__ void k(float *p) { p[threadIdx.x] *= 2.0f; }\n' > "$dir/k.cu"
out=$("$t4a" compile "$dir/k.cu" --arch sm_90 -o "$dir/k.cubin" --cache "$dir/cache" 2>&1) ||
  fail "compile exited $?: $out"
echo "$out" | grep -q '^artifact: compiled$' || fail "first compile did not say compiled: $out"
head -c 4 "$dir/k.cubin" | od -An -c | grep -q 'E   L   F' || fail "output is not an ELF CUBIN"
out=$("$t4a" compile "$dir/k.cu" --arch sm_90 -o "$dir/k2.cubin" --cache "$dir/cache" 2>&1) ||
  fail "second compile exited $?: $out"
echo "$out" | grep -q '^artifact: disk$' || fail "second process did not hit the disk cache: $out"
echo "$out" | grep -q '^counter nvrtc_compile_attempts = 0$' || fail "a disk hit called NVRTC: $out"
cmp -s "$dir/k.cubin" "$dir/k2.cubin" || fail "disk hit returned different bytes"
printf 'extern "C" __global__ void k() { undefined_thing(); }\n' > "$dir/bad.cu"
"$t4a" compile "$dir/bad.cu" --arch sm_90 >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "a compile error did not exit 1"
grep -q 'undefined_thing' "$dir/err" || fail "the compile log was not printed"

"$t4a" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown command did not exit 2"
"$t4a" version | grep -q '^0\.1\.0$' || fail "version"
echo "cli_test: ok"
