#!/usr/bin/env bash
# Faults under load (issue 20), on a GPU machine after scripts/gpu-test.sh built .gpu/:
#
#   scripts/soak_faults.sh [SECONDS] [FAULTS]       default 300 s, 5 faulting processes
#
# Starts the soak (.gpu/soak, 16 threads, two runtimes per device) for SECONDS; while it runs,
# FAULTS times (spread over the run, the last one well before the end) a second process
# (.gpu/soak --fault) opens two runtimes on device 0, launches poke(0x10), an illegal address, and
# must see the fault typed on both runtimes and close fail typed, then exits. The soak must finish
# with PASS (0 mismatches, 0 unbalanced counters, its free-memory check included): another
# process's fault does not reach it. Logs: ${T4A_SOAK_LOG:-.gpu/soak-faults}.{soak,fault-N}.log.
# Exit 0 when the soak passed and every faulting process reported the fault as it should.
# A dry run of this script on the CPU machine: T4A_SOAK_BIN=build/gcc/soak T4A_SOAK_ARGS=--fake
# (each process then has its own fake driver: it checks the script and the fault mode, not the
# isolation).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
faults=${2:-5}
out=.gpu
log=${T4A_SOAK_LOG:-$out/soak-faults}
soak=${T4A_SOAK_BIN:-$out/soak}
read -r -a extra <<< "${T4A_SOAK_ARGS:-}"
[ -x "$soak" ] || { echo "soak_faults: $soak missing: run scripts/gpu-test.sh first" >&2; exit 2; }
mkdir -p "$(dirname "$log")"
export LD_LIBRARY_PATH="$PWD/$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

"$soak" "${extra[@]}" --threads 16 --runtimes-per-device 2 --seconds "$secs" --seed 20 > "$log.soak.log" 2>&1 &
soak_pid=$!
bad=0
gap=$((secs * 2 / 3 / (faults + 1)))
[ $gap -ge 1 ] || gap=1
for i in $(seq 1 "$faults"); do
  sleep "$gap"
  if "$soak" "${extra[@]}" --fault > "$log.fault-$i.log" 2>&1; then
    echo "fault $i: $(tail -1 "$log.fault-$i.log")"
  else
    echo "fault $i: FAIL (exit $?): $(tail -1 "$log.fault-$i.log")"
    bad=1
  fi
done
wait "$soak_pid"
rc=$?
tail -22 "$log.soak.log"
echo "soak_faults: soak exit $rc; faulting processes: $([ $bad -eq 0 ] && echo ok || echo FAILED)"
[ $rc -eq 0 ] && [ $bad -eq 0 ]
