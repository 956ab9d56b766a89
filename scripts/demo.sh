#!/usr/bin/env bash
# The demo (README's first command): deps, build, then `t4a demo` — NVRTC compiles two kernels,
# the runtime facade runs a warm chain (kernel -> copy -> kernel) three ways (checked launches,
# descriptors, a captured graph), verifies each result against the CPU and prints the counters
# and the host time per launch next to raw cuLaunchKernel. On a machine without a CUDA driver the
# chain runs on the fake driver of the tests, and the first line says so. Arguments are passed to
# `t4a demo` (`scripts/demo.sh --n 5000`, `--fake`, `--json`; `--help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
CC=gcc cmake -S . -B build/gcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/gcc --target t4a_cli -j "$(nproc 2>/dev/null || echo 2)"
exec build/gcc/t4a demo "$@"
