#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan+UBSan, CMake build in build/fuzz) and runs each
# for a given time on its seed corpus.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 s, every target (ops_fuzz bytes_fuzz)
#
# A target's work corpus is build/fuzz/corpus/<target> (new inputs land there, never in the
# repository); the seeds are testing/fuzz/corpus/<target> (read only). A crash is written to
# build/fuzz/artifacts/<target>/ and fails the script. Reproduce one with the replay test built
# by any build: build/gcc/testing_fuzz_<target>_replay_test <file> (T4A_FUZZ_TRACE=1 prints
# each operation). Every crash becomes a regression input in testing/fuzz/<target>_regressions.h.
# The last line per target is "fuzz <target>: <executions> executions in <s> s, <crashes> crashes".
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(ops_fuzz bytes_fuzz)
jobs=$(nproc 2>/dev/null || echo 2)

CC=clang cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT4A_FUZZ=ON \
  -DT4A_SANITIZE=ON >/dev/null || exit 1
names=()
for t in "${targets[@]}"; do names+=("testing_fuzz_$t"); done
cmake --build build/fuzz -j "$jobs" --target "${names[@]}" || exit 1

rc=0
for t in "${targets[@]}"; do
  work=build/fuzz/corpus/$t
  art=build/fuzz/artifacts/$t
  log=build/fuzz/$t.log
  rm -rf "$art"
  mkdir -p "$work" "$art"
  # Leaks: LeakSanitizer checks every input; the faults mode's deliberate leaks are suppressed
  # by the target (__lsan_default_suppressions) and accounted on the fake driver instead.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build/fuzz/testing_fuzz_$t" -max_total_time="$seconds" -max_len=4096 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "testing/fuzz/corpus/$t" >"$log" 2>&1
  status=$?
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
  crashes=$(find "$art" -type f | wc -l)
  if ((status != 0)) || ((crashes != 0)); then
    tail -40 "$log"
    rc=1
  fi
  echo "fuzz $t: ${execs:-0} executions in $seconds s, $crashes crashes (log: $log)"
done
exit $rc
