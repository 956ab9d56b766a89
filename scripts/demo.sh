#!/usr/bin/env bash
# The demo: deps, build, then the main program. Until the runtime demo exists it runs `t4a info`
# (driver, NVRTC, devices). On a machine without a GPU driver `t4a info` says so and exits 1; the
# demo then also shows the fake driver the tests use (`t4a info --fake`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
CC=gcc cmake -S . -B build/gcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/gcc --target t4a_cli -j "$(nproc 2>/dev/null || echo 2)"
if build/gcc/t4a info; then
  exit 0
fi
echo
echo "(no usable CUDA driver on this machine: the fake driver of the tests follows)"
build/gcc/t4a info --fake
