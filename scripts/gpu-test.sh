#!/usr/bin/env bash
# GPU tests in two steps, because the GPU machine has no Bazel, clang or -dev packages:
#
#   scripts/gpu-test.sh                 (on the CPU machine) build every test binary with CMake
#                                       into .gpu/ — xxHash and jemalloc static, libcmocka.so.0
#                                       copied beside the binaries — and list them with their
#                                       labels in .gpu/tests.tsv. .gpu/ is ignored; carry it.
#   scripts/gpu-test.sh --run LABEL...  (on the GPU machine) build nothing; run the tests that
#                                       carry any of the labels (single, multi, faults, unit),
#                                       each in its own process, one line per test, a final
#                                       'N passed, N failed, N skipped' line; log in
#                                       ${T4A_GPU_LOG:-.gpu/gpu-test.log}. Exit 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=.gpu

if [ "${1:-}" != "--run" ]; then
  set -e
  scripts/deps.sh
  CC=gcc cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT4A_STATIC_DEPS=ON \
    >/dev/null
  cmake --build build/gpu -j "$(nproc 2>/dev/null || echo 2)"
  rm -rf "$out"
  mkdir -p "$out"
  (cd build/gpu && ctest --show-only=json-v1) > build/gpu/tests.json
  python3 - build/gpu/tests.json "$out" <<'PY'
import json, os, shutil, sys
tests = json.load(open(sys.argv[1]))["tests"]
out = sys.argv[2]
with open(os.path.join(out, "tests.tsv"), "w") as f:
    for t in tests:
        labels = []
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = p["value"]
        cmd = t["command"]
        exe = cmd[0]
        if os.path.basename(exe) in ("sh", "bash"):
            continue  # script tests need the source tree; they run in CI
        args = []
        for a in cmd[1:]:  # data files (e.g. the stand-in libcuda) travel beside the binaries
            shutil.copy2(a, os.path.join(out, os.path.basename(a)))
            args.append(os.path.basename(a))
        shutil.copy2(exe, os.path.join(out, os.path.basename(exe)))
        f.write("%s\t%s\t%s\t%s\n" % (t["name"], ",".join(labels), os.path.basename(exe),
                                      " ".join(args)))
PY
  cp build/gpu/t4a "$out/t4a"   # `t4a info` on the GPU machine
  cp build/gpu/xfer_bench "$out/xfer_bench"   # docs/performance.md
  cp build/gpu/copy_bench "$out/copy_bench"   # docs/performance.md (two GPUs)
  cp build/gpu/t4a_bench "$out/t4a_bench"     # scripts/bench.sh, docs/performance.md
  cp build/gpu/nvrtc_bench "$out/nvrtc_bench" # scripts/bench.sh (NVRTC cache on the GPU host)
  cp build/gpu/coldstart_bench "$out/coldstart_bench" # scripts/bench.sh (cold start, issue 25)
  cp build/gpu/overlap_bench "$out/overlap_bench" # scripts/bench.sh (copy/compute overlap, issue 22)
  cp build/gpu/soak "$out/soak"               # testing/soak: the soak (README "Soak")
  cmocka=$(ldconfig -p | awk '/libcmocka\.so\.0 /{print $NF; exit}')
  cp -L "$cmocka" "$out/libcmocka.so.0"
  echo "gpu-test: built $(wc -l < "$out/tests.tsv") test binaries into $out/ (carry it to the GPU machine)"
  exit 0
fi

shift
[ $# -gt 0 ] || { echo "usage: scripts/gpu-test.sh --run LABEL..." >&2; exit 2; }
[ -f "$out/tests.tsv" ] || { echo "gpu-test: $out/tests.tsv missing: build first (no --run)" >&2; exit 2; }
log=${T4A_GPU_LOG:-$out/gpu-test.log}
: > "$log"
{
  echo "# gpu-test $(date -u +%Y-%m-%dT%H:%M:%SZ) labels: $*"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "# no nvidia-smi"
} | tee -a "$log"
passed=0 failed=0 skipped=0
while IFS=$'\t' read -r name labels exe args; do
  want=0
  for l in "$@"; do
    case ",$labels," in *",$l,"*) want=1 ;; esac
  done
  [ $want -eq 1 ] || continue
  start=$(date +%s%N)
  argv=()
  for a in $args; do argv+=("$out/$a"); done
  LD_LIBRARY_PATH="$PWD/$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/$exe" "${argv[@]}" \
    >> "$log.$name" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  case $rc in
    0) verdict=PASS; passed=$((passed + 1)) ;;
    77) verdict=SKIP; skipped=$((skipped + 1)) ;;
    *) verdict="FAIL (exit $rc)"; failed=$((failed + 1)) ;;
  esac
  line="$verdict $name [$labels] ${ms} ms"
  echo "$line" | tee -a "$log"
  sed 's/^/    /' "$log.$name" >> "$log"
  rm -f "$log.$name"
done < "$out/tests.tsv"
echo "$passed passed, $failed failed, $skipped skipped" | tee -a "$log"
[ $failed -eq 0 ]
