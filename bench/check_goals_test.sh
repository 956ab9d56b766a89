#!/bin/sh
# scripts/check_goals.py on fabricated runs (CI, no GPU): a goals file of four goals against a
# t4a_bench JSON with one row that meets its goal, one that misses, one that failed, and a goal
# whose row is absent; then a run that meets everything, the fake smoke JSON, --only-present,
# nvrtc_bench- and overlap_bench-shaped runs, bad goals files, and the real bench/goals.tsv parsed.
# Exit 1 on the first wrong answer.
set -u
here=$(dirname "$(readlink -f "$0")")
script="$here/../scripts/check_goals.py"
[ -f "$script" ] || { echo "FAIL: no $script"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tab=$(printf '\t')

cat > "$tmp/goals.tsv" <<G
# comment lines and blank lines are skipped

t4a_bench${tab}launch0${tab}submit${tab}ratio${tab}<=${tab}1.02${tab}issue 25 item 3
t4a_bench${tab}pageable_up_256M${tab}done${tab}gbps${tab}>=${tab}44${tab}issue 25 item 1
t4a_bench${tab}alloc${tab}submit${tab}heap_per_op${tab}<=${tab}0${tab}issue 25 item 2
t4a_bench${tab}graph1${tab}submit${tab}ratio${tab}<=${tab}1.02${tab}issue 25 item 3
coldstart_bench${tab}open${tab}done${tab}ratio${tab}<=${tab}1.1${tab}issue 25 item 4
G
hdr='{"bench":"t4a_bench","mode":"gpu","device":"NVIDIA H200","t4a":"0.0.0","date":"2026-12-01T00:00:00Z"}'
met='{"name":"launch0","window":"submit","t4a":{"median":3.3},"raw":{"median":3.3},"ratio":1.0100,"counters_t4a":{"ops":100,"heap_allocations":0}}'
missed='{"name":"pageable_up_256M","window":"done","t4a":{"median":8570},"ratio":0.2,"t4a_gbs":31.3,"counters_t4a":{"ops":10,"heap_allocations":0}}'
heap_miss='{"name":"alloc","window":"submit","t4a":{"median":0.1},"ratio":0.15,"counters_t4a":{"ops":1000,"heap_allocations":1000}}'
printf '%s\n%s\n%s\n%s\n' "$hdr" "$met" "$missed" "$heap_miss" > "$tmp/run.json"

out=$(python3 "$script" --goals "$tmp/goals.tsv" "$tmp/run.json" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a run with a miss exited $rc, want 1: $out"
echo "$out" | grep -Eq '^met +t4a_bench +launch0 +submit +ratio <= 1.02 +ratio = 1.01 ' ||
  fail "launch0 is not met: $out"
echo "$out" | grep -Eq '^MISSED +t4a_bench +pageable_up_256M +done +gbps >= 44 +gbps = 31.3 ' ||
  fail "pageable_up_256M is not MISSED: $out"
echo "$out" | grep -Eq '^MISSED +t4a_bench +alloc +submit +heap_per_op <= 0 +heap_per_op = 1 ' ||
  fail "alloc's heap allocations are not MISSED: $out"
echo "$out" | grep -Eq '^missing +t4a_bench +graph1 ' || fail "graph1 is not missing: $out"
echo "$out" | grep -q '^not checked: 1 goal(s) of coldstart_bench (no JSON of it given)$' ||
  fail "the coldstart goal is not reported unchecked: $out"
echo "$out" | grep -q '^goals: 1 met, 2 missed, 0 failed, 1 missing, 0 without timing$' ||
  fail "summary: $out"

# A missing row alone fails the check; --only-present skips it.
printf '%s\n%s\n' "$hdr" "$met" > "$tmp/some.json"
python3 "$script" --goals "$tmp/goals.tsv" "$tmp/some.json" >/dev/null 2>&1
[ $? -eq 1 ] || fail "missing rows did not exit 1"
out=$(python3 "$script" --goals "$tmp/goals.tsv" --only-present "$tmp/some.json" 2>&1) ||
  fail "--only-present with every present goal met exited $?: $out"
echo "$out" | grep -q '^goals: 1 met, 0 missed, 0 failed, 0 missing, 0 without timing, 3 skipped (--only-present)$' ||
  fail "--only-present summary: $out"

# A row that carries an error fails; a window other than the goal's fails.
printf '%s\n%s\n' "$hdr" '{"name":"launch0","error":"T4A_CUDA_ERROR"}' > "$tmp/err.json"
out=$(python3 "$script" --goals "$tmp/goals.tsv" --only-present "$tmp/err.json" 2>&1)
[ $? -eq 1 ] || fail "an error row did not exit 1: $out"
echo "$out" | grep -Eq '^FAILED +t4a_bench +launch0 .*error T4A_CUDA_ERROR' || fail "error row: $out"
printf '%s\n%s\n' "$hdr" '{"name":"launch0","window":"done","ratio":1.0}' > "$tmp/win.json"
out=$(python3 "$script" --goals "$tmp/goals.tsv" --only-present "$tmp/win.json" 2>&1)
[ $? -eq 1 ] || fail "a row of another window did not exit 1: $out"
echo "$out" | grep -Eq '^FAILED .*window done, the goal is for submit' || fail "window: $out"

# Everything met, two JSON files (two benches): exit 0.
good_missed='{"name":"pageable_up_256M","window":"done","ratio":0.1,"t4a_gbs":50.0}'
good_heap='{"name":"alloc","window":"submit","ratio":0.1,"counters_t4a":{"ops":1000,"heap_allocations":0}}'
good_graph='{"name":"graph1","window":"submit","ratio":0.99}'
printf '%s\n%s\n%s\n%s\n%s\n' "$hdr" "$met" "$good_missed" "$good_heap" "$good_graph" > "$tmp/good.json"
printf '%s\n%s\n' '{"bench":"coldstart_bench","mode":"gpu"}' \
  '{"name":"open","window":"done","ratio":1.05}' > "$tmp/cold.json"
out=$(python3 "$script" --goals "$tmp/goals.tsv" "$tmp/good.json" "$tmp/cold.json" 2>&1) ||
  fail "an all-met run exited $?: $out"
echo "$out" | grep -q '^goals: 5 met, 0 missed, 0 failed, 0 missing, 0 without timing$' ||
  fail "all-met summary: $out"

# The fake's smoke JSON has no timings: "no timing", not met, and not a failure.
printf '%s\n%s\n' '{"bench":"t4a_bench","mode":"fake-smoke"}' \
  '{"name":"launch0","smoke":"ok","counters_t4a":{"ops":40}}' > "$tmp/fake.json"
out=$(python3 "$script" --goals "$tmp/goals.tsv" --only-present "$tmp/fake.json" 2>&1) ||
  fail "the smoke JSON exited $?: $out"
echo "$out" | grep -Eq '^no timing +t4a_bench +launch0 ' || fail "smoke row: $out"

# Bad input: exit 2 with the file and line named.
printf 't4a_bench\tlaunch0\tsubmit\tratio\t<\t1\tx\n' > "$tmp/bad.tsv"
out=$(python3 "$script" --goals "$tmp/bad.tsv" "$tmp/run.json" 2>&1)
[ $? -eq 2 ] || fail "a bad op did not exit 2: $out"
echo "$out" | grep -q 'bad.tsv:1: op' || fail "bad op message: $out"
printf 'not json\n' > "$tmp/notjson.json"
python3 "$script" --goals "$tmp/goals.tsv" "$tmp/notjson.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "a file that is not JSON did not exit 2"
python3 "$script" --goals "$tmp/goals.tsv" "$tmp/nonexistent.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "an absent file did not exit 2"

# nvrtc_bench's shape (t4a median in us, no raw, no ratio) and overlap_bench's (a ratio row):
# one memory hit met, one missed, a share row (a median only) met, an error row FAILED; the
# overlap ratio missed. Exit 1, and each bench's verdicts named.
cat > "$tmp/nv_goals.tsv" <<G
nvrtc_bench${tab}memory_hit_20_lines${tab}submit${tab}t4a_us${tab}<=${tab}2${tab}NVRTC cache goal
nvrtc_bench${tab}memory_hit_2000_lines${tab}submit${tab}t4a_us${tab}<=${tab}5${tab}issue 25 item 6
nvrtc_bench${tab}roots_share_first_artifact_cub${tab}done${tab}t4a_us${tab}<=${tab}1000${tab}issue 21 item 3
nvrtc_bench${tab}roots_first_use_miss_cub${tab}done${tab}t4a_us${tab}<=${tab}5000${tab}issue 21 item 3
overlap_bench${tab}overlap_vs_longer${tab}done${tab}ratio${tab}<=${tab}1.15${tab}issue 22
G
{
  echo '{"bench":"nvrtc_bench","mode":"cpu","device":"none (NVRTC on the host: Linux 6.1, 16 CPUs)","nvrtc":"13.0","cpus":16,"date":"2026-12-01T00:00:00Z","run":"full","repeats":7,"batch":2000}'
  echo '{"name":"memory_hit_20_lines","group":"nvrtc","window":"submit","what":"memory hit","unit":"us","samples":7,"t4a":{"min":0.6,"median":0.685,"max":0.9}}'
  echo '{"name":"memory_hit_2000_lines","group":"nvrtc","window":"submit","what":"memory hit","unit":"us","samples":7,"t4a":{"min":9.1,"median":9.5,"max":9.9}}'
  echo '{"name":"roots_share_first_artifact_cub","group":"nvrtc","window":"done","what":"share","unit":"us","samples":7,"t4a":{"median":103.0}}'
  echo '{"name":"roots_first_use_miss_cub","group":"nvrtc","error":"no CUDA toolkit found: the include-root rows were not run"}'
} > "$tmp/nvrtc.json"
printf '%s\n%s\n' '{"bench":"overlap_bench","mode":"gpu","device":"NVIDIA H200","t4a":"0.1.0"}' \
  '{"name":"overlap_vs_longer","group":"overlap","window":"done","ratio":1.2}' > "$tmp/overlap.json"
out=$(python3 "$script" --goals "$tmp/nv_goals.tsv" "$tmp/nvrtc.json" "$tmp/overlap.json" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "an nvrtc run with a miss exited $rc, want 1: $out"
echo "$out" | grep -Eq '^met +nvrtc_bench +memory_hit_20_lines +submit +t4a_us <= 2 +t4a_us = 0.685 ' ||
  fail "memory_hit_20_lines is not met: $out"
echo "$out" | grep -Eq '^MISSED +nvrtc_bench +memory_hit_2000_lines +submit +t4a_us <= 5 +t4a_us = 9.5 ' ||
  fail "memory_hit_2000_lines is not MISSED: $out"
echo "$out" | grep -Eq '^met +nvrtc_bench +roots_share_first_artifact_cub +done +t4a_us <= 1000 +t4a_us = 103 ' ||
  fail "the share row is not met: $out"
echo "$out" | grep -Eq '^FAILED +nvrtc_bench +roots_first_use_miss_cub .*error no CUDA toolkit found' ||
  fail "the error row did not fail: $out"
echo "$out" | grep -Eq '^MISSED +overlap_bench +overlap_vs_longer +done +ratio <= 1.15 +ratio = 1.2 ' ||
  fail "overlap_vs_longer is not MISSED: $out"
echo "$out" | grep -q '^# nvrtc_bench: none (NVRTC on the host: Linux 6.1, 16 CPUs), cpu, ' ||
  fail "no nvrtc_bench header line: $out"
echo "$out" | grep -q '^goals: 2 met, 2 missed, 1 failed, 0 missing, 0 without timing$' ||
  fail "nvrtc summary: $out"
# Met alone (the 2,000-line hit under 5 us, the error row and overlap left out): exit 0.
grep -v '2000_lines\|"error"' "$tmp/nvrtc.json" > "$tmp/nvrtc_met.json"
out=$(python3 "$script" --goals "$tmp/nv_goals.tsv" --only-present "$tmp/nvrtc_met.json" 2>&1) ||
  fail "an nvrtc run with its present goals met exited $?: $out"
echo "$out" | grep -q '^not checked: 1 goal(s) of overlap_bench (no JSON of it given)$' ||
  fail "overlap not reported unchecked: $out"

# The real goals file parses (bench_smoke_test.sh checks that its t4a_bench rows exist; the
# overlap and nvrtc smoke tests check theirs).
out=$(python3 "$script" --only-present "$tmp/some.json" 2>&1)
case $? in 0 | 1) ;; *) fail "bench/goals.tsv does not parse: $out" ;; esac
echo "check_goals: ok"
