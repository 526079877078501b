#!/usr/bin/env bash
# One GPU visit (issue 12): one convolution's algorithm forced through the engine's plan file, to
# see what the whole inference costs with each candidate (the tuner times layers alone; choices
# made after tuning, such as folding the first layer into the second's window when the second runs
# a wgmma algorithm, show only in the whole graph). For each model: tune once (plan in /tmp/ps0),
# then per algo in ALGOS rewrite the CONV-th "conv" line's algo field (CONV: 1-based, default 2)
# and time the whole inference with that plan (a plan the engine refuses is re-tuned: the
# output's '#' lines say what ran).
# Pack: CARRY=.gpucarry-s BINS=bench/nn/bench_nn_gpu scripts/gpu-pack.sh (+ libprotobuf-c.so.1)
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-s}
open_pack "$C" /tmp/ps
CONV=${CONV:-2}
for m in ${MODELS:-models/predecoder_d5_z_fast.onnx}; do
  rm -rf /tmp/ps0 && mkdir -p /tmp/ps0
  echo "== $m, tuned"
  CUDAQ_NN_TUNE_LOG=1 /tmp/ps/bench_nn_gpu --iters 2000 --prec fp16 --impls auto --plan /tmp/ps0 "$m" 2>&1 |
    grep -E "^(tune: conv 'conv1'.*algo 1[1-6][0-9] |predecoder|floor|#)" | head -${TUNE_LINES:-80}
  for a in ${ALGOS:-}; do
    rm -rf /tmp/ps1 && cp -r /tmp/ps0 /tmp/ps1
    for f in /tmp/ps1/*; do
      awk -v n="$CONV" -v a="$a" '/^conv /{k++; if (k == n) $4 = a} {print}' "$f" > "$f.t" && mv "$f.t" "$f"
    done
    printf "== algo %s:" "$a"
    /tmp/ps/bench_nn_gpu --iters 2000 --prec fp16 --impls auto --plan /tmp/ps1 "$m" 2>&1 |
      awk '/^predecoder/{p=$4" / "$5} /^#   conv #1/{sub(/.*-> /, ""); c=$0} END{print "   p50 / p99 " p " us; conv #1: " c}'
  done
done
