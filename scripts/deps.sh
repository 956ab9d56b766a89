#!/usr/bin/env bash
# Installs what t4a's builds need and is missing, in one apt line; a no-op when all is there.
# The CUDA toolkit headers (cuda.h, nvrtc.h) and libnvrtc come with the machine image, not apt:
# they are checked, not installed. T4A_CUDA_PATH (default /usr/local/cuda) names the toolkit.
set -euo pipefail

packages=(bazel-bootstrap bazel-rules-java libxxhash-dev libjemalloc-dev libcmocka-dev clang
          libclang-rt-14-dev valgrind cmake ninja-build pkgconf python3 gcc g++ make doxygen)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "deps: all present"
fi

cuda="${T4A_CUDA_PATH:-/usr/local/cuda}"
for h in cuda.h cudaTypedefs.h nvrtc.h; do
  if [ ! -f "$cuda/include/$h" ]; then
    echo "deps: $cuda/include/$h is missing: install the CUDA toolkit headers or set T4A_CUDA_PATH" >&2
    exit 1
  fi
done
