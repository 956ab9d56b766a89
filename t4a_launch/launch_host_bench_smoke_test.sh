#!/bin/sh
# launch_host_bench --quick runs every row's t4a and raw paths on the stubbed fake driver: one
# "smoke: ok" line per row, no timing, and a clean teardown (exit 0).
set -u
out=$("$1" --quick 2>&1) || { echo "FAIL: launch_host_bench --quick exited $?: $out"; exit 1; }
for row in launch0 launch4 fire0 fire4 fire4_rebind graph1; do
  echo "$out" | grep -q "^smoke: ok $row\$" || { echo "FAIL: no 'smoke: ok $row': $out"; exit 1; }
done
echo "ok"
