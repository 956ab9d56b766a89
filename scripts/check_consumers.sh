#!/usr/bin/env bash
# Uses t4a from the outside, as a Bazel or CMake project would (README "Take one component").
#
#   scripts/check_consumers.sh bazel   examples/bazel_consumer, a separate workspace depending on
#                                      this checkout: builds and runs //:nvrtc_only_test (only
#                                      @t4a//t4a_nvrtc) and //:facade_test (@t4a//:t4a), and checks
#                                      that deps(//:nvrtc_only) has no driver loader.
#   scripts/check_consumers.sh cmake [BUILD]
#                                      `cmake --install` of BUILD (default build/gcc, already built)
#                                      into build/consumers/prefix; checks its layout; builds
#                                      examples/cmake_consumer with find_package, then with
#                                      add_subdirectory, and an nvrtc-only program with pkg-config;
#                                      runs each program; then configures, builds and installs
#                                      this checkout with -DT4A_BUILD_TESTS=OFF (no test build, no
#                                      cmocka) and runs the installed t4a program (demo --fake).
#                                      Also: a program that links t4a::t4a through add_subdirectory
#                                      must fail to include t4a_ctx/driver_table.h (layering probe).
# Exit 0 when every check passed; each failure is printed with "consumers:".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)
fail() { echo "consumers: $*" >&2; exit 1; }

run_ok() { # program: must exit 0 and print its "consumer ok:" line
  local out
  out=$("$1") || fail "$1 exited $?: $out"
  echo "$out"
  echo "$out" | grep -q '^consumer ok:' || fail "$1 printed no 'consumer ok:' line"
}

bazel_consumer() {
  cd "$root/examples/bazel_consumer" || fail "no examples/bazel_consumer"
  bazel test --config=ci //... || fail "bazel test in examples/bazel_consumer"
  local deps
  deps=$(bazel query 'deps(//:nvrtc_only)' 2>/dev/null) || fail "bazel query deps(//:nvrtc_only)"
  echo "$deps" | grep -q '^@t4a//t4a_nvrtc:t4a_nvrtc$' || fail "//:nvrtc_only does not depend on @t4a//t4a_nvrtc"
  # The other libraries' counter lists (//t4a_*:counter_list and its header: macros only, no
  # deps) sit below t4a_ctx:status, which joins them; nothing else of those libraries may be in
  # the graph.
  if echo "$deps" | grep -vE '^@t4a//t4a_[a-z]+:(counter_list|include/t4a/[a-z]+_counters\.h)$' |
    grep -E '^@t4a//t4a_ctx:(t4a_ctx|seam|loader\.c)$|^@t4a//(t4a_mem|t4a_retire|t4a_xfer|t4a_launch|t4a_raw):'; then
    fail "//:nvrtc_only pulls in the driver loader or a library above t4a_nvrtc (listed above)"
  fi
  echo "consumers: bazel: nvrtc_only (no driver loader in its graph) and facade built and ran"
  bazel shutdown 2>/dev/null # one server less on a shared machine
}

cmake_consumer() {
  local build=${1:-build/gcc}
  local out="$root/build/consumers"
  local prefix="$out/prefix"
  [ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured CMake build"
  rm -rf "$out"
  cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install $build"
  local f
  for f in include/t4a/t4a.h include/t4a/nvrtc.h include/t4a/status.h lib/libt4a.a \
      lib/libt4a_nvrtc.a lib/libt4a_ctx.a lib/cmake/t4a/t4aConfig.cmake \
      lib/cmake/t4a/t4aConfigVersion.cmake lib/pkgconfig/t4a.pc lib/pkgconfig/t4a-nvrtc.pc bin/t4a; do
    [ -e "$prefix/$f" ] || fail "the install has no $f"
  done
  # Private headers stay private.
  [ -z "$(find "$prefix/include" -name '*internal*' -o -name 'driver_table.h')" ] ||
    fail "a private header was installed"
  for t in status ctx mem pinned_arena retire xfer nvrtc launch raw t4a; do
    grep -q "add_library(t4a::$t STATIC IMPORTED)" "$prefix/lib/cmake/t4a/t4aTargets.cmake" ||
      fail "t4aTargets.cmake does not define t4a::$t"
  done

  # 1. find_package from the installed prefix.
  cmake -S examples/cmake_consumer -B "$out/find" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    >/dev/null || fail "configure examples/cmake_consumer with find_package"
  cmake --build "$out/find" -j "$jobs" >/dev/null || fail "build examples/cmake_consumer (find_package)"
  run_ok "$out/find/nvrtc_only" && run_ok "$out/find/facade"

  # 2. add_subdirectory of this checkout (libraries only: no tests, no cmocka needed).
  cmake -S examples/cmake_consumer -B "$out/subdir" -G Ninja -DT4A_SOURCE_DIR="$root" \
    >/dev/null || fail "configure examples/cmake_consumer with add_subdirectory"
  cmake --build "$out/subdir" -j "$jobs" >/dev/null || fail "build examples/cmake_consumer (add_subdirectory)"
  [ ! -e "$out/subdir/t4a/t4a_facade_test" ] || fail "add_subdirectory built t4a's tests"
  run_ok "$out/subdir/nvrtc_only" && run_ok "$out/subdir/facade"
  # The layers hold in CMake too: linking t4a::t4a does not put t4a's internal headers on the
  # include path (the probe includes the private driver table and must not compile).
  probe=$(cmake --build "$out/subdir" --target layering_probe 2>&1) &&
    fail "layering_probe compiled: a consumer of t4a::t4a sees t4a_ctx/driver_table.h"
  echo "$probe" | grep -q 't4a_ctx/driver_table.h: No such file' ||
    fail "layering_probe failed for another reason: $probe"

  # 3. pkg-config, static: one component.
  local flags
  flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs t4a-nvrtc) ||
    fail "pkg-config t4a-nvrtc"
  cc -std=c11 -Wall -Wextra -Werror examples/bazel_consumer/nvrtc_only.c $flags -o "$out/nvrtc_only_pc" ||
    fail "cc with pkg-config t4a-nvrtc"
  run_ok "$out/nvrtc_only_pc"

  # 4. The t4a program without the test build: nothing of cmocka is looked for or linked, no
  #    test is built, and the installed program runs on the fake driver.
  local nt="$out/no_tests"
  cmake -S . -B "$nt/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT4A_BUILD_TESTS=OFF \
    >/dev/null || fail "configure with -DT4A_BUILD_TESTS=OFF"
  ! grep -q 'CMOCKA' "$nt/build/CMakeCache.txt" || fail "-DT4A_BUILD_TESTS=OFF looked for cmocka"
  cmake --build "$nt/build" -j "$jobs" >/dev/null || fail "build with -DT4A_BUILD_TESTS=OFF"
  ! grep -Eq 'lcmocka|libcmocka' "$nt/build/build.ninja" || fail "-DT4A_BUILD_TESTS=OFF links cmocka"
  [ ! -e "$nt/build/t4a/t4a_facade_test" ] || fail "-DT4A_BUILD_TESTS=OFF built the tests"
  cmake --install "$nt/build" --prefix "$nt/prefix" >/dev/null || fail "cmake --install (no tests)"
  [ -x "$nt/prefix/bin/t4a" ] || fail "-DT4A_BUILD_TESTS=OFF installed no bin/t4a"
  local demo
  demo=$("$nt/prefix/bin/t4a" demo --fake --n 100 2>&1) || fail "installed t4a demo --fake exited $?: $demo"
  echo "$demo" | grep -q '^result: verified OK' || fail "installed t4a demo --fake: $demo"
  "$nt/prefix/bin/t4a" info --fake 1 | grep -q '^devices: 1$' || fail "installed t4a info --fake 1"
  echo "consumers: cmake: t4a built and installed without the tests (no cmocka), demo --fake verified"
  echo "consumers: cmake: install layout, find_package, add_subdirectory, pkg-config and the program without tests all built and ran"
}

case "${1:-}" in
  bazel) bazel_consumer ;;
  cmake) shift; cmake_consumer "$@" ;;
  *) echo "usage: scripts/check_consumers.sh bazel | cmake [BUILD]" >&2; exit 2 ;;
esac
