#!/usr/bin/env bash
# Builds build-gpu/ here (no GPU needed) for a run of scripts/gpu-run.sh on
# a GPU machine: Release, sm_90 (H100/H200), plus the shared libraries the
# GPU machine may not have (cmocka) in build-gpu/libs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAQ_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-gpu -j"$(nproc)"
mkdir -p build-gpu/libs
cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 build-gpu/libs/
git rev-parse HEAD > build-gpu/commit.txt
# NN engine: protobuf-c for the ONNX loader, and the reference models with
# their onnxruntime outputs (the GPU machine has no onnx/onnxruntime).
cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 build-gpu/libs/
scripts/venv.sh
rm -rf build-gpu/nn-ref && .venv/bin/python tools/onnx_reference.py gen --out build-gpu/nn-ref >/dev/null
du -sh build-gpu
