#!/usr/bin/env bash
# One GPU visit (issue 12's record): every shipped Z-basis predecoder, both families, through the
# GPU engine (AUTO, the project's own kernels) and the cuDNN path, beside PyTorch's convolution
# stack of the same shape, FP16, batch 1, graph replay, in one run (ROUNDS rounds, default 2).
# Pack here:
#   cmake --build build-gpu --target bench_nn_gpu
#   CARRY=.gpucarry-n BINS=bench/nn/bench_nn_gpu scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-n/
# PyTorch comes from the GPU machine's Python (bench/nn/torch_cnn.py).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-n}
open_pack "$C" /tmp/nr
S=""
for d in 5 7 9 13; do
  S="$S --predecoder predecoder_d${d}_z:$((d + 1)) --predecoder predecoder_d${d}_z_fast:$((d + 1)):32"
done
# shellcheck disable=SC2086
python3 bench/nn/torch_cnn.py --out /tmp/cnn --iters 2000 --skip-grid $S
mkdir -p /tmp/pn
for r in $(seq 1 "${ROUNDS:-2}"); do
  echo "== round $r"
  /tmp/nr/bench_nn_gpu --iters 2000 --prec fp16 --impls auto,cudnn --plan /tmp/pn --torch /tmp/cnn/torch_times.txt \
    models/predecoder_d{5,7,9,13}_z.onnx models/predecoder_d{5,7,9,13}_z_fast.onnx | grep -v '^#'
done
