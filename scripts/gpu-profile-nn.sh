#!/usr/bin/env bash
# GPU time of each kernel of one inference of the NN engine (Nsight Compute),
# to see where a model's latency goes (issue 12). bench_nn_gpu tunes each
# model once with its plan cached in /tmp/nn-plans, then runs under ncu with
# the plan (no tuning): per kernel node (gpu__time_duration) and per whole
# graph launch. Carry the pack of scripts/gpu-run-onnx.sh (BUILD=DIR with
# bench/nn/bench_nn_gpu[.xz] and libs/). Knobs: PROFILE_MODELS (default the
# shipped d=7 and d=13 models), PROFILE_IMPLS (default auto).
set -uo pipefail
STEP_TIMEOUT_DEFAULT=${STEP_TIMEOUT_DEFAULT:-300}
source "$(dirname "$0")/gpu-common.sh"
cudnn_path "${PYTHON:-python3}"
f="$B/bench/nn/bench_nn_gpu"
[ -e "$f.xz" ] && [ ! -e "$f" ] && xz -dkc "$f.xz" > "$f" && chmod +x "$f"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p /tmp/nn-plans
for m in ${PROFILE_MODELS:-models/predecoder_d7_z.onnx models/predecoder_d13_z.onnx}; do
  n=$(basename "$m" .onnx)
  for impl in ${PROFILE_IMPLS:-auto}; do
    run "prof_${n}_${impl}_bench" "$f" --iters 300 --prec fp16 --impls "$impl" --plan /tmp/nn-plans "$m"
    grep -E "^$n|conv #" "$OUT/prof_${n}_${impl}_bench.log"
    for mode in node graph; do
      run "prof_${n}_${impl}_$mode" "$NCU" --graph-profiling "$mode" --metrics gpu__time_duration.sum --csv \
        "$f" --iters 3 --prec fp16 --impls "$impl" --plan /tmp/nn-plans "$m"
    done
    # the last replay's kernels, in order: name and GPU time (ns)
    grep '"gpu__time_duration.sum"' "$OUT/prof_${n}_${impl}_node.log" | tail -40 |
      awk -F'","' '{printf "%-12s %s\n", $NF, substr($5, 1, 90)}' | tr -d '"' | tail -"${PROFILE_TAIL:-20}"
    grep '"gpu__time_duration.sum"' "$OUT/prof_${n}_${impl}_graph.log" | tail -3 | awk -F'","' '{print "graph: " $NF}' | tr -d '"'
  done
done
echo "gpu-profile-nn: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
