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
      # boost clocks and warm caches as in a real replay (ncu's defaults lock base
      # clocks and flush the caches before each kernel: small kernels read 2-3x slower)
      run "prof_${n}_${impl}_$mode" "$NCU" --graph-profiling "$mode" --metrics gpu__time_duration.sum --csv \
        --clock-control none --cache-control none \
        "$f" --iters 3 --prec fp16 --impls "$impl" --plan /tmp/nn-plans "$m"
    done
    # the last replay's kernels, in order: name and GPU time (ns)
    grep '"gpu__time_duration.sum"' "$OUT/prof_${n}_${impl}_node.log" | tail -40 |
      awk -F'","' '{printf "%-12s %s\n", $NF, substr($5, 1, 90)}' | tr -d '"' | tail -"${PROFILE_TAIL:-20}"
    grep '"gpu__time_duration.sum"' "$OUT/prof_${n}_${impl}_graph.log" | tail -3 | awk -F'","' '{print "graph: " $NF}' | tr -d '"'
  done
done
# The same replays on a timeline (Nsight Systems, where it exists): kernel times
# with the launch gaps between them, as the graph really runs (PDL overlaps included).
if command -v nsys > /dev/null; then
  for m in ${PROFILE_MODELS:-models/predecoder_d7_z.onnx models/predecoder_d13_z.onnx}; do
    n=$(basename "$m" .onnx)
    run "nsys_${n}" nsys profile -o "/tmp/nsys_$n" --force-overwrite true --trace=cuda \
      --cuda-graph-trace=node "$f" --iters 50 --prec fp16 --impls auto --plan /tmp/nn-plans "$m"
    run "nsys_${n}_trace" nsys stats --report cuda_gpu_trace --format csv "/tmp/nsys_$n.nsys-rep"
    tail -"${PROFILE_TAIL:-20}" "$OUT/nsys_${n}_trace.log" | cut -d, -f1,2,NF | cut -c1-150
  done
fi
echo "gpu-profile-nn: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
