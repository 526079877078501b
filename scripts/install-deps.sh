#!/usr/bin/env bash
# Installs the Debian packages the project builds and tests with, if any is
# missing. Safe to run repeatedly; needs root (or sudo) only when it installs.
set -euo pipefail
PKGS=(cmake ninja-build make gcc g++ clang libclang-rt-14-dev pkg-config libcmocka-dev spin python3-venv protobuf-c-compiler libprotobuf-c-dev libonnx-dev libopenblas-pthread-dev locales)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit found: the GPU parts will not be built (the CPU parts are complete without it)"
fi
