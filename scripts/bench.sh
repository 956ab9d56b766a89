#!/usr/bin/env bash
# The paired benchmarks of issue 9 (bench/t4a_bench.c; results in docs/performance.md).
#
#   scripts/bench.sh              (on the CPU machine) build the GPU binaries into .gpu/ with
#                                 scripts/gpu-test.sh (static xxHash and jemalloc; .gpu/t4a_bench,
#                                 .gpu/nvrtc_bench and .gpu/overlap_bench among them) and say
#                                 how to run them.
#   scripts/bench.sh --run [DIR]  (on the GPU machine) build nothing; run, each under a time
#                                 limit so the whole stays well under 10 minutes (42 s on an H200,
#                                 2026-11-29, before the cold-start runs):
#                                   .gpu/t4a_bench --json-file DIR/bench.json  > DIR/bench.txt
#                                   .gpu/nvrtc_bench --repeats 7 --batch 2000
#                                                  --json-file DIR/nvrtc.json > DIR/nvrtc.txt
#                                   .gpu/overlap_bench --json-file DIR/overlap.json
#                                                                          > DIR/overlap.txt
#                                   .gpu/coldstart_bench --samples 11 --profile
#                                                  --json-file DIR/coldstart.json > DIR/coldstart.txt
#                                   .gpu/t4a_bench --json-file DIR/bench2.json > DIR/bench2.txt
#                                 (the second t4a_bench run shows the spread between runs), and
#                                 DIR/env.txt (date, nvidia-smi, CPUs, commit). Then the goals
#                                 (bench/goals.tsv) of each recorded run, printed and kept:
#                                   scripts/check_goals.py DIR/bench.json DIR/coldstart.json
#                                     DIR/nvrtc.json DIR/overlap.json      > DIR/goals.txt
#                                   scripts/check_goals.py DIR/bench2.json > DIR/goals2.txt
#                                 DIR defaults to .gpu/bench. Exit 1 if a run failed or timed
#                                 out, else 3 if a goal was missed, failed or missing, else 0.
# Extra arguments after DIR go to both t4a_bench runs (e.g. a group: launch, pageable...); the
# cold-start run is then skipped, and rows the groups leave out are not counted as missing (the
# NVRTC and overlap runs still run and are checked).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--run" ]; then
  scripts/gpu-test.sh || exit 1
  for b in t4a_bench nvrtc_bench coldstart_bench overlap_bench; do
    [ -x ".gpu/$b" ] || { echo "bench: .gpu/$b was not built" >&2; exit 1; }
  done
  echo "bench: built .gpu/t4a_bench, .gpu/nvrtc_bench, .gpu/coldstart_bench and .gpu/overlap_bench; on the GPU machine (carry .gpu):"
  echo "  scripts/bench.sh --run [DIR]     (DIR defaults to .gpu/bench)"
  echo "  or one path: .gpu/t4a_bench launch  (groups: .gpu/t4a_bench --list)"
  exit 0
fi

shift
dir=${1:-.gpu/bench}
[ $# -gt 0 ] && shift
[ -x .gpu/t4a_bench ] || { echo "bench: .gpu/t4a_bench missing: run scripts/bench.sh here first" >&2; exit 2; }
mkdir -p "$dir" || exit 2
{
  echo "# scripts/bench.sh --run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null ||
    echo "no nvidia-smi"
  echo "cpus: $(nproc 2>/dev/null)"
  uname -r
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
} > "$dir/env.txt"
cat "$dir/env.txt"
rc=0
run() { # run LIMIT_S OUTFILE CMD...: the command's stdout to OUTFILE and to the terminal
  local limit=$1 outfile=$2
  shift 2
  echo "==== $* (limit ${limit} s)"
  timeout "$limit" "$@" 2>&1 | tee "$outfile"
  local st=${PIPESTATUS[0]}
  [ "$st" -eq 0 ] || { echo "==== exit $st: $*"; rc=1; }
}
run 170 "$dir/bench.txt" .gpu/t4a_bench --json-file "$dir/bench.json" "$@"
if [ -x .gpu/nvrtc_bench ]; then
  run 60 "$dir/nvrtc.txt" .gpu/nvrtc_bench --repeats 7 --batch 2000 --json-file "$dir/nvrtc.json"
fi
if [ -x .gpu/overlap_bench ]; then
  run 30 "$dir/overlap.txt" .gpu/overlap_bench --json-file "$dir/overlap.json"
fi
groups=$#
if [ "$groups" -eq 0 ] && [ -x .gpu/coldstart_bench ]; then
  run 150 "$dir/coldstart.txt" .gpu/coldstart_bench --samples 11 --profile \
    --json-file "$dir/coldstart.json"
fi
run 120 "$dir/bench2.txt" .gpu/t4a_bench --json-file "$dir/bench2.json" "$@"

# The goals of each recorded run (bench/goals.tsv; scripts/check_goals.py).
goals_rc=0
check() { # check OUTFILE JSON...: the verdicts to OUTFILE and to the terminal
  local outfile=$1
  shift
  local files=() f
  for f in "$@"; do [ -s "$f" ] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || { echo "==== goals: no JSON to check ($*)"; goals_rc=1; return; }
  local only=()
  [ "$groups" -eq 0 ] || only=(--only-present)
  echo "==== goals: scripts/check_goals.py ${only[*]} ${files[*]}"
  python3 scripts/check_goals.py "${only[@]}" "${files[@]}" 2>&1 | tee "$outfile"
  [ "${PIPESTATUS[0]}" -eq 0 ] || goals_rc=1
}
check "$dir/goals.txt" "$dir/bench.json" "$dir/coldstart.json" "$dir/nvrtc.json" "$dir/overlap.json"
check "$dir/goals2.txt" "$dir/bench2.json"
[ $rc -eq 0 ] || exit 1
[ $goals_rc -eq 0 ] || exit 3
exit 0
