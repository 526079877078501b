#!/usr/bin/env bash
# One GPU visit (issue 12): two builds of bench_nn_gpu side by side, rounds interleaved (old, new,
# old, new, ...), each with its own plan folder, on the shipped Z-basis predecoders (both
# families); then bench_pdl_chain when packed. Pack here (the old binary from an earlier pack):
#   CARRY=.gpucarry-t BINS="bench/bench_pdl_chain bench/nn/bench_nn_gpu" scripts/gpu-pack.sh
#   cp OLD_PACK/bench_nn_gpu.xz .gpucarry-t/bench_nn_gpu_old.xz
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-t/
# ROUNDS (default 3), MODELS (default: d5, d7, d9, d13 Z, both families), NN_ENV (for both).
# BINS may add tests/nn/test_nn_gpu: the shipped models are then checked first (TEST_ENVS, TEST_MODELS).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-t}
open_pack "$C" /tmp/ab
# The shipped models against the CPU executor first, when test_nn_gpu is packed (TEST_ENVS: one run
# per word, variables joined by commas, e.g. "- CUDAQ_NN_STACK=0,CUDAQ_NN_FIRST_FOLD=1"; "-" for none).
if [ -x /tmp/ab/test_nn_gpu ]; then
  for e in ${TEST_ENVS:--}; do
    [ "$e" = - ] && e=
    e=${e//,/ }
    echo "== test_nn_gpu --shipped-tail ${e:-(AUTO)}"
    # shellcheck disable=SC2086
    env $e /tmp/ab/test_nn_gpu --shipped-tail models ${TEST_MODELS:-predecoder_d5_z_fast.onnx \
      predecoder_d7_z_fast.onnx predecoder_d9_z_fast.onnx predecoder_d13_z_fast.onnx predecoder_d13_x_fast.onnx \
      predecoder_d13_z.onnx} 2>&1 | grep -E "^(ok|FAIL|PASSED|FAILED)"
  done
fi
M=${MODELS:-$(echo models/predecoder_d{5,7,9,13}_z.onnx models/predecoder_d{5,7,9,13}_z_fast.onnx)}
mkdir -p /tmp/ab-old /tmp/ab-new
for r in $(seq 1 "${ROUNDS:-3}"); do
  for v in old new; do
    b=/tmp/ab/bench_nn_gpu; [ "$v" = old ] && b=/tmp/ab/bench_nn_gpu_old
    echo "== round $r, $v"
    # shellcheck disable=SC2086
    env ${NN_ENV:-} "$b" --iters 2000 --prec fp16 --impls auto --plan /tmp/ab-$v $M |
      awk -v s="${SHOW:-}" '!/^#/ || (s != "" && $0 ~ s)' # SHOW='conv #1': those lines of the plan description
  done
done
if [ -x /tmp/ab/bench_pdl_chain ]; then /tmp/ab/bench_pdl_chain --iters 2000 ${CHAIN_ARGS:-}; fi
