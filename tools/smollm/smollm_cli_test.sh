#!/bin/sh
# t4a-smollm on the fake driver (host twins), end to end: "The capital of France is" must go on
# with " Paris.", the three ways must agree, the --json report must parse, with one host wait and
# no heap allocation per decode token in each way; the second start (from the disk cache) makes
# no NVRTC call. Without the fetched model it says SKIP and
# passes (Bazel has no skip status); without NVRTC the same.
set -u
bin=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
model=${SMOLLM_MODEL:-$here/examples/smollm/model/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -s "$model" ]; then
  echo "SKIP: model not fetched; run python3 examples/smollm/fetch_model.py"
  exit 0
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
out=$("$bin" --fake --model "$model" -n 3 --way all --cache "$cache" 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ] && echo "$out" | grep -q 'NVRTC_NOT_FOUND'; then
  echo "SKIP: no NVRTC"
  exit 0
fi
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
echo "$out" | grep -q '^The capital of France is Paris\.$' || { echo "FAIL: the text"; exit 1; }
echo "$out" | grep -q 'nothing left alive, 0 stream-ordering violations' ||
  { echo "FAIL: the fake's verdict"; exit 1; }
echo "$out" | grep -q '(1 NVRTC calls, 1 module loads, artifact: compiled)' ||
  { echo "FAIL: a cold start compiles once"; exit 1; }
json=$("$bin" --fake --model "$model" -n 3 --json --cache "$cache" 2>/dev/null) ||
  { echo "FAIL: --json"; exit 1; }
printf '%s' "$json" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["driver"] == "fake" and j["prompt_tokens"] == [504, 3575, 282, 4649, 314], j
assert j["open"]["nvrtc_calls"] == 0 and j["open"]["artifact"] == "disk", j["open"]
for name, w in j["ways"].items():
    assert w["tokens"] == [7042, 30, 198], (name, w["tokens"])
    assert w["same_tokens"] and w["decode_tokens"] == 2, name
    assert w["host_waits"] == 2 and w["heap_allocations"] == 0, (name, w)
print("json ok:", sorted(j["ways"]))
' || { echo "FAIL: the JSON report"; exit 1; }
echo "smollm_cli_test: ok"
