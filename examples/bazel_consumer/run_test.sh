#!/bin/sh
# Runs one consumer program; passes when it exits 0 and printed its "ok" line.
out=$("$1") || { echo "FAIL: $1 exited $?: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q '^consumer ok:' || { echo "FAIL: no 'consumer ok:' line"; exit 1; }
