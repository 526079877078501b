#!/usr/bin/env bash
# Builds build-gpu/ here (no GPU needed) for a run of scripts/gpu-run.sh on
# a GPU machine: Release, sm_90 (H100/H200), plus the shared libraries the
# GPU machine may not have (cmocka) in build-gpu/libs.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-gpu} # the build folder (BUILD=... for a second one)
scripts/install-deps.sh
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAQ_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$B" -j"$(nproc)"
mkdir -p "$B/libs"
cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$B/libs"/
git rev-parse HEAD > $B/commit.txt
# NN engine: protobuf-c for the ONNX loader, and the reference models with
# their onnxruntime outputs (the GPU machine has no onnx/onnxruntime).
cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 "$B/libs"/
scripts/venv.sh
rm -rf $B/nn-ref && .venv/bin/python tools/onnx_reference.py gen --out $B/nn-ref >/dev/null
du -sh "$B"
