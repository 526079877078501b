#!/usr/bin/env bash
# One GPU visit (issue 12): what a kernel boundary costs in a CUDA graph (bench_pdl_chain: plain
# launches, PDL, counters between PDL kernels, one cooperative kernel), beside the engine's
# tuner log for the shipped models (CUDAQ_NN_TUNE_LOG=1: every candidate's time per stack/layer).
# Pack here:
#   cmake --build build-gpu --target bench_pdl_chain bench_nn_gpu
#   CARRY=.gpucarry-p BINS="bench/bench_pdl_chain bench/nn/bench_nn_gpu" scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-p/
# MODELS="..." to change the models of the tuner log (default: d5 and d13, both families).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-p}
open_pack "$C" /tmp/pc
/tmp/pc/bench_pdl_chain --iters "${ITERS:-2000}" --rounds "${ROUNDS:-2}" ${CHAIN_ARGS:-}
if [ -x /tmp/pc/bench_nn_gpu ]; then
  mkdir -p /tmp/pp
  # shellcheck disable=SC2086
  CUDAQ_NN_TUNE_LOG=1 /tmp/pc/bench_nn_gpu --iters 2000 --prec fp16 --impls auto --plan /tmp/pp \
    ${MODELS:-models/predecoder_d5_z_fast.onnx models/predecoder_d13_z_fast.onnx models/predecoder_d5_z.onnx models/predecoder_d13_z.onnx} 2>&1 | tail -150
fi
