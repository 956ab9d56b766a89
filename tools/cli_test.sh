#!/bin/sh
# Checks the t4a program: `info --fake` lists the fake devices; `info` without a driver (forced
# with a bogus T4A_LIBCUDA_PATH) says so and exits non-zero; `compile` compiles, then hits the disk
# cache from a second process with no NVRTC call, and prints the log of a failing compile;
# `kernel --fake` prints a compiled kernel's attributes and globals;
# `demo --fake` runs the warm chain on the fake driver, verified, with its counters; `stats` prints
# JSON only; `bench` shows progress on stderr; every command has --help; bad usage exits 2.
set -u
t4a="$1"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$t4a" info --fake 3) || fail "info --fake exited $?"
echo "$out" | grep -q '^devices: 3$' || fail "info --fake 3 did not list 3 devices: $out"
[ "$(echo "$out" | grep -c '^  memory now: .* GiB free of .* GiB')" -eq 3 ] ||
  fail "info --fake 3 did not print each device's free memory: $out"
echo "$out" | grep -q '^device 2: T4A Fake Device 2$' || fail "device 2 missing: $out"
echo "$out" | grep -q 'compute capability: 9.0' || fail "no compute capability: $out"
echo "$out" | grep -q '^driver: CUDA 13.0 (fake)' || fail "no driver line: $out"
echo "$out" | grep -q '^driver capabilities: func-param-info capture-info launch-ex occupancy cluster-occupancy; absent: none$' ||
  fail "no capabilities line: $out"

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

# t4a compile -I DIR: a library header and cuda_fp16.h (the toolkit's roots by default, when a
# toolkit is installed); the roots are listed with what the includes reach there; an edited library
# header is a recompile in a new process, a touched one a disk hit; a missing root exits 2.
if [ -f "${T4A_CUDA_PATH:-/usr/local/cuda}/include/cuda_fp16.h" ]; then
  mkdir -p "$dir/lib"
  printf '#define MYVAL 3.0f\n' > "$dir/lib/mylib.h"
  printf '#include <cuda_fp16.h>\n#include <mylib.h>\nextern "C" __global__ void h(__half *x) { x[0] = __float2half(MYVAL); }\n' > "$dir/h.cu"
  out=$("$t4a" compile "$dir/h.cu" --arch sm_90 -I "$dir/lib" --cache "$dir/rcache" 2>&1) ||
    fail "compile -I exited $?: $out"
  echo "$out" | grep -q '^artifact: compiled$' || fail "-I: not compiled: $out"
  echo "$out" | grep -q "^root 1: $dir/lib: 1 files reached, 19 bytes, [0-9]* paths that opened nothing$" ||
    fail "-I: the root was not listed: $out"
  echo "$out" | grep -q "^root 2: .*/include: [1-9][0-9]* files reached" ||
    fail "-I: the toolkit root was not listed: $out"
  echo "$out" | grep -q '^toolkit: ' || fail "-I: no toolkit line: $out"
  out=$("$t4a" compile "$dir/h.cu" --arch sm_90 -I "$dir/lib" --cache "$dir/rcache" 2>&1) ||
    fail "compile -I (2) exited $?: $out"
  echo "$out" | grep -q '^artifact: disk$' || fail "-I: the second process did not hit: $out"
  echo "$out" | grep -q "^root 1: $dir/lib: 1 files reached" || fail "-I: no root line: $out"
  touch "$dir/lib/mylib.h"
  out=$("$t4a" compile "$dir/h.cu" --arch sm_90 -I "$dir/lib" --cache "$dir/rcache" 2>&1) ||
    fail "compile -I (touch) exited $?: $out"
  echo "$out" | grep -q '^artifact: disk$' || fail "-I: a touch was not a hit: $out"
  printf '#define MYVAL 4.0f\n' > "$dir/lib/mylib.h"
  out=$("$t4a" compile "$dir/h.cu" --arch sm_90 -I "$dir/lib" --cache "$dir/rcache" 2>&1) ||
    fail "compile -I (edit) exited $?: $out"
  echo "$out" | grep -q '^artifact: compiled$' || fail "-I: an edit was not a recompile: $out"
  "$t4a" compile "$dir/h.cu" --arch sm_90 -I "$dir/nowhere" >/dev/null 2>"$dir/err"
  [ $? -eq 2 ] || fail "a missing root did not exit 2"
  grep -q 'does not exist' "$dir/err" || fail "a missing root: no message: $(cat "$dir/err")"
fi

# t4a demo on the fake driver: NVRTC for real, three ways verified, the warm pass's counters.
out=$("$t4a" demo --fake --n 1000 --json 2>&1) || fail "demo exited $?: $out"
echo "$out" | head -1 | grep -q '^t4a demo: --fake: the chain runs on the fake driver' ||
  fail "the first line does not say fake: $out"
echo "$out" | grep -q '^result: verified OK (3 ways x 1000 steps match the CPU reference)$' ||
  fail "not verified: $out"
echo "$out" | grep -Eq '^  verified against the CPU +OK +OK +OK$' || fail "a way failed: $out"
echo "$out" | grep -Eq '^  launches +2000 +2000 +0$' || fail "launches: $out"
echo "$out" | grep -Eq '^  graph replays +0 +0 +1000$' || fail "graph replays: $out"
echo "$out" | grep -Eq '^  host waits +0 +0 +0$' || fail "host waits on the warm path: $out"
echo "$out" | grep -Eq '^  NVRTC calls \(compile again\) +0 +0 +0$' || fail "NVRTC calls: $out"
echo "$out" | grep -Eq '^  module loads \(load again\) +0 +0 +0$' || fail "module loads: $out"
echo "$out" | grep -Eq '^  heap allocations \(t4a\) +0 +0 +0$' || fail "heap allocations: $out"
echo "$out" | grep -Eq '^  events recorded +[0-9] +[0-9] +[0-9]$' || fail "events recorded: $out"
echo "$out" | grep -Eq '^  t4a descriptor fire \(t4a_descriptor_fire\) +[0-9.]+ us' || fail "no fire time: $out"
echo "$out" | grep -q 'raw cuLaunchKernel next to these.*t4a_bench launch' ||
  fail "no pointer to the paired raw baseline: $out"
echo "$out" | grep -q '^fake driver: nothing left alive after close, 0 stream-ordering' ||
  fail "the fake saw leaks or ordering violations: $out"
echo "$out" | grep -q '^    "launches": [0-9]' || fail "no stats JSON: $out"
"$t4a" demo --help | grep -q '^usage: t4a demo' || fail "demo --help"
"$t4a" demo --n 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "demo --n 0 did not exit 2"

# Help for every command, on stdout, exit 0; the top-level help documents the exit codes.
for c in info compile kernel demo bench stats version; do
  "$t4a" "$c" --help | grep -q "^usage: t4a $c" || fail "$c --help"
  "$t4a" help "$c" | grep -q "^usage: t4a $c" || fail "help $c"
done
"$t4a" --help | grep -q '^Exit codes: 0 success; 1 ' || fail "--help does not document exit codes"
"$t4a" help bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "help of an unknown command did not exit 2"

# t4a stats: JSON only on stdout, with the launches it made; notes on stderr.
"$t4a" stats --fake --n 7 >"$dir/stats.json" 2>"$dir/stats.err" || fail "stats exited $?"
head -c 1 "$dir/stats.json" | grep -q '{' || fail "stats did not start with JSON: $(cat "$dir/stats.json")"
grep -q '^    "launches": 7,' "$dir/stats.json" || fail "stats JSON has no 7 launches"
grep -q '^    "device_total_bytes": [1-9]' "$dir/stats.json" || fail "stats JSON has no memory gauges"
grep -q '^    "peak_in_use_bytes": [1-9]' "$dir/stats.json" || fail "stats JSON has no peak in use"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/stats.json" || fail "stats is not JSON"
fi
grep -q 'fake driver' "$dir/stats.err" || fail "stats did not say fake on stderr"
"$t4a" stats --n 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "stats --n 0 did not exit 2"

# t4a bench: the table, a verified result, and progress lines on stderr (forced with a 1 ms tick).
T4A_PROGRESS_MS=1 "$t4a" bench --fake --rounds 3 --n 50 >"$dir/bench.out" 2>"$dir/bench.err" ||
  fail "bench exited $?: $(cat "$dir/bench.out" "$dir/bench.err")"
grep -q '^result: verified (150 launches)$' "$dir/bench.out" || fail "bench: $(cat "$dir/bench.out")"
grep -Eq '^  t4a_runtime_launch \(submit\) +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$dir/bench.out" ||
  fail "bench: no launch row: $(cat "$dir/bench.out")"
grep -Eq '^t4a bench [a-z].*: [0-9]+/3, [0-9.]+ s$' "$dir/bench.err" ||
  fail "bench: no progress line on stderr: $(cat "$dir/bench.err")"
! grep -q '^t4a bench [a-z].*/3, ' "$dir/bench.out" || fail "bench: progress on stdout"
"$t4a" bench --rounds x >/dev/null 2>&1
[ $? -eq 2 ] || fail "bench --rounds x did not exit 2"

# t4a compile: a compile longer than the tick shows progress on stderr, never on stdout.
T4A_PROGRESS_MS=1 "$t4a" compile "$dir/k.cu" --arch sm_90 >"$dir/c.out" 2>"$dir/c.err" ||
  fail "compile with progress exited $?"
grep -Eq '^t4a compile k\.cu for sm_90: [0-9.]+ s$' "$dir/c.err" ||
  fail "compile: no progress line: $(cat "$dir/c.err")"
! grep -q '^t4a compile k' "$dir/c.out" || fail "compile: progress on stdout"

# t4a kernel --fake: a real NVRTC CUBIN loaded by the fake; its globals' sizes are the compiler's.
cat >"$dir/g.cu" <<'EOF_CU'
__constant__ float table[64];
__device__ int init_val = 42;
extern "C" __global__ void lut(const int *idx, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = table[idx[i] & 63] + (float)init_val;
}
EOF_CU
out=$("$t4a" kernel "$dir/g.cu" lut --fake --global table --global init_val 2>&1) ||
  fail "kernel --fake exited $?: $out"
echo "$out" | grep -q '^kernel: lut (cubin for sm_90, ' || fail "kernel: no kernel line: $out"
echo "$out" | grep -q '^registers: [0-9]* per thread$' || fail "kernel: no registers: $out"
echo "$out" | grep -q '^constant memory: 256 bytes$' || fail "kernel: constant memory: $out"
echo "$out" | grep -q '^max threads per block: 1024$' || fail "kernel: threads: $out"
echo "$out" | grep -q '^global table: 256 bytes at 0x' || fail "kernel: global table: $out"
echo "$out" | grep -q '^global init_val: 4 bytes at 0x' || fail "kernel: global init_val: $out"
"$t4a" kernel "$dir/g.cu" nope --fake >/dev/null 2>"$dir/kerr"
[ $? -eq 1 ] || fail "kernel: an unknown kernel did not exit 1"
grep -q "no kernel named 'nope'" "$dir/kerr" || fail "kernel: no message: $(cat "$dir/kerr")"
"$t4a" kernel "$dir/g.cu" lut --fake --global tabel >/dev/null 2>"$dir/kerr"
[ $? -eq 1 ] || fail "kernel: an unknown global did not exit 1"
grep -q "no global (__device__ or __constant__) named 'tabel'" "$dir/kerr" ||
  fail "kernel: no global message: $(cat "$dir/kerr")"
"$t4a" kernel "$dir/g.cu" >/dev/null 2>&1
[ $? -eq 2 ] || fail "kernel without a NAME did not exit 2"

"$t4a" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown command did not exit 2"
"$t4a" version | grep -q '^0\.1\.0$' || fail "version"
echo "cli_test: ok"
