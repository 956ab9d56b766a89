#!/usr/bin/env bash
# The test command (README, .ci/run): deps; the drift check; Bazel (clang, layering_check) build
# and test of //...; the nvrtc isolation check; an ASan+UBSan lane; then the CMake+gcc -Werror
# build and `ctest -LE gpu`, whose closing line ends the output when every lane passed. If a lane
# failed, the last line is a plain 'N passed, N failed' over the lanes, and the exit code is 1.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

scripts/deps.sh || exit 1

passed=0
failed=0
failed_lanes=()
lane() {
  local name=$1
  shift
  echo "==== lane: $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "==== lane $name: ok"
  else
    failed=$((failed + 1))
    failed_lanes+=("$name")
    echo "==== lane $name: FAILED"
  fi
}

drift() { python3 scripts/gen_build.py --check; }

bazel_test() { bazel test --config=ci //... ; }

nvrtc_alone() {
  # //t4a_nvrtc must not pull in the driver loader: only the status vocabulary of t4a_ctx.
  local deps
  deps=$(bazel query 'deps(//t4a_nvrtc)' 2>/dev/null) || return 1
  if echo "$deps" | grep -E '^//t4a_ctx:(t4a_ctx|seam|loader\.c)$'; then
    echo "t4a_nvrtc depends on the driver loader" >&2
    return 1
  fi
  echo "$deps" | grep -q '^//t4a_ctx:status$'
}

bazel_asan() { bazel test --config=ci --config=asan //... ; }

cmake_gcc() {
  CC=gcc cmake -S . -B build/gcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build build/gcc -j "$jobs"
}

lane drift drift
lane bazel-clang-layering bazel_test
lane nvrtc-standalone nvrtc_alone
lane asan-ubsan bazel_asan
lane cmake-gcc-build cmake_gcc

echo "==== lane: ctest (CMake, gcc, -LE gpu)"
if [ -d build/gcc ] && (cd build/gcc && ctest -LE gpu --output-on-failure -j "$jobs"); then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failed_lanes+=(ctest)
fi

if ((failed)); then
  echo "failed lanes: ${failed_lanes[*]}"
  echo "$passed passed, $failed failed"
  exit 1
fi
exit 0
