#!/usr/bin/env bash
# One visit to a GPU machine for the NN engine: the GPU test (engine vs CPU
# executor, graph replay, engine cache), compute-sanitizer memcheck on it,
# and the benchmark beside PyTorch. Build here first:
#   scripts/gpu-build.sh   -> build-gpu/ with libs/ and the reference models (nn-ref/)
# then run this from the repository root on the GPU machine with build-gpu
# carried along. Results go to $OUT (default ./gpu-out).
# A smaller carry: BUILD=DIR holding tests/nn/test_nn_gpu, bench/nn/bench_nn_gpu
# (either may be xz-compressed, NAME.xz: unpacked here), libs/ and nn-ref/.
# Knobs: TORCH_ARGS (extra bench/nn/torch_cnn.py arguments, e.g. --layers 3
# --predecoder predecoder_d13_z:14), BENCH_ARGS (e.g. --prec fp16 --impls
# auto,cudnn,tc), BENCH_MODELS (more .onnx files for bench_nn_gpu, e.g. the
# shipped models/predecoder_*.onnx), TEST_FILTER (test_nn_gpu's model filter),
# NO_TORCH=1 (bench_nn_gpu on BENCH_MODELS only, no PyTorch step), NN_AB="VAR=V ..."
# (bench_nn_gpu --impls auto on BENCH_MODELS again under each setting, e.g.
# "CUDAQ_NN_PDL=0 CUDAQ_NN_NO_FUSE=1": the engine without PDL, without fusion),
# NO_SANITIZER=1 (no memcheck), SAN_RACE=1 (racecheck runs, see below),
# NO_TEST=1 (skip the full test run).
set -uo pipefail
STEP_TIMEOUT_DEFAULT=${STEP_TIMEOUT_DEFAULT:-300}
source "$(dirname "$0")/gpu-common.sh"
PY=${PYTHON:-python3}
cudnn_path "$PY"
for f in "$B"/tests/nn/test_nn_gpu.xz "$B"/bench/nn/bench_nn_gpu.xz "$B"/tests/nn/test_nn_device_program.xz; do
  [ -e "$f" ] && [ ! -e "${f%.xz}" ] && xz -dkc "$f" > "${f%.xz}" && chmod +x "${f%.xz}"
done
{
  machine_info
  $PY -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1
} > "$OUT/nn-machine.txt" 2>&1
cat "$OUT/nn-machine.txt"

if [ -z "${NO_TEST:-}" ]; then
  run nn_gpu env CUDAQ_NN_TEST_FILTER="${TEST_FILTER:-}" "$B/tests/nn/test_nn_gpu" "$B/nn-ref"
  grep -E "^(graph|plan|PASSED|FAILED)|^conv #" "$OUT/nn_gpu.log"
  # The shipped predecoders with the tail kernel (nn_gpu_tail in ctest).
  run nn_gpu_tail "$B/tests/nn/test_nn_gpu" --shipped-tail models predecoder_d5_z.onnx predecoder_d5_x.onnx \
    predecoder_d7_z.onnx predecoder_d13_x.onnx
  grep -E "^(ok|FAIL|PASSED|FAILED)" "$OUT/nn_gpu_tail.log"
  # The fast family with the cluster kernel forced (gpu_cnet.cu; AUTO takes it only where it wins).
  run nn_gpu_tail_cluster env CUDAQ_NN_CNET=1 "$B/tests/nn/test_nn_gpu" --shipped-tail models \
    predecoder_d5_z_fast.onnx predecoder_d7_z_fast.onnx predecoder_d13_z_fast.onnx predecoder_d13_x_fast.onnx
  grep -E "^(ok|FAIL|PASSED|FAILED)" "$OUT/nn_gpu_tail_cluster.log"
  # The fast family's first layer folded into a 32-channel wgmma second layer (nn_gpu_tail_fold32 in ctest).
  run nn_gpu_tail_fold32 env CUDAQ_NN_STACK=0 CUDAQ_NN_FIRST_FOLD=1 CUDAQ_NN_TEST_WANT_FIRST_FOLD=1 \
    "$B/tests/nn/test_nn_gpu" --shipped-tail models predecoder_d5_z_fast.onnx predecoder_d13_z_fast.onnx \
    predecoder_d13_x_fast.onnx
  grep -E "^(ok|FAIL|PASSED|FAILED)" "$OUT/nn_gpu_tail_fold32.log"
  # The inference as a device function, served as a DEVICE_CALL handler (nn_device_program in ctest).
  if [ -x "$B/tests/nn/test_nn_device_program" ]; then
    run nn_device_program "$B/tests/nn/test_nn_device_program" models
    grep -E "positions|PASSED|FAILED" "$OUT/nn_device_program.log"
  fi
fi
# memcheck checks device memory accesses; API errors are not reported by
# default (SAN_API_ERRORS=explicit to see them) because cuDNN probes with
# calls that fail on purpose, and the engine checks every CUDA call itself.
if [ -z "${NO_SANITIZER:-}" ]; then
  if command -v compute-sanitizer >/dev/null; then
    STEP_TIMEOUT=${SAN_TIMEOUT:-420} run nn_gpu_memcheck env CUDAQ_NN_TEST_FILTER="${SAN_FILTER:-conv3d,predecoder,mlp_head,pre_post,gather,where}" \
      compute-sanitizer --tool memcheck --report-api-errors "${SAN_API_ERRORS:-no}" --error-exitcode 1 \
      "$B/tests/nn/test_nn_gpu" "$B/nn-ref"
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/nn_gpu_memcheck.log" | tail -3
  else
    echo "compute-sanitizer: not found on this machine"; fails=$((fails + 1))
  fi
fi
# SAN_RACE=1: compute-sanitizer racecheck on the engine's own kernels. Under
# racecheck a launch of them takes 20-200 ms, so the engine's create-time
# tuning (cuDNN's algorithms, 90 channels-last ones, every mode of every
# model) outlasts any limit. Each run therefore covers one kernel family:
# RACE_RUNS is a list of MODELS:MODES[:CL_ALGO] (test_nn_gpu's model filter,
# its engine modes, the one channels-last algorithm every engine of the run
# may use: index = tile + 9 x split index + 45 x depth index,
# src/nn/gpu_conv_cl.cu), and cuDNN's candidates are left out
# (CUDAQ_NN_TUNE_NO_CUDNN=1).
if [ -n "${SAN_RACE:-}" ]; then
  if command -v compute-sanitizer >/dev/null; then
    for spec in ${RACE_RUNS:-conv3d_same_lower:own:0 conv3d_tc_odd:tc:0 conv3d_cl_chain:cl:13 conv3d_cl_chain:cl:76 conv3d_cl_chain:cl:86 \
                conv3d_stack_deep:stack:0 fuse_chain_gathers,fuse_gather_matmul,predecoder_int32:auto:0}; do
      IFS=: read -r filt impls algo <<<"$spec"
      name="nn_gpu_racecheck_${filt%%,*}_${impls}_${algo:-0}"
      STEP_TIMEOUT=${RACE_TIMEOUT:-150} run "$name" env CUDAQ_NN_TUNE_NO_CUDNN=1 CUDAQ_NN_CL_ALGO="${algo:-0}" \
        CUDAQ_NN_TEST_IMPLS="$impls" CUDAQ_NN_TEST_FILTER="$filt" \
        compute-sanitizer --tool racecheck --error-exitcode 1 "$B/tests/nn/test_nn_gpu" "$B/nn-ref"
      grep -E "RACECHECK SUMMARY|^(PASSED|FAILED)" "$OUT/$name.log" | tail -2
    done
  else
    echo "compute-sanitizer: not found on this machine"; fails=$((fails + 1))
  fi
fi
if [ -z "${NO_BENCH:-}" ] && [ -n "${NO_TORCH:-}" ]; then
  STEP_TIMEOUT=${BENCH_TIMEOUT:-540} run nn_bench "$B/bench/nn/bench_nn_gpu" --iters "${BENCH_ITERS:-3000}" \
    ${BENCH_ARGS:-} ${BENCH_MODELS:-}
  cat "$OUT/nn_bench.log"
fi
for ab in ${NN_AB:-}; do
  STEP_TIMEOUT=${BENCH_TIMEOUT:-540} run "nn_bench_${ab//[^A-Za-z0-9_]/_}" env "$ab" "$B/bench/nn/bench_nn_gpu" \
    --iters "${BENCH_ITERS:-3000}" --prec fp16 --impls auto ${BENCH_MODELS:-}
  grep -E "^predecoder|^cnn" "$OUT/nn_bench_${ab//[^A-Za-z0-9_]/_}.log"
done
if [ -z "${NO_BENCH:-}" ] && [ -z "${NO_TORCH:-}" ]; then
  # PyTorch builds, exports (ONNX) and times the predecoder-shaped CNNs; the
  # engine then loads the exported files and is timed in the same run.
  # The exported models (tens of MB) stay in $CNN_DIR; the times go to $OUT.
  CNN_DIR=${CNN_DIR:-/tmp/nn-cnn}
  run nn_torch $PY bench/nn/torch_cnn.py --out "$CNN_DIR" --iters "${TORCH_ITERS:-2000}" ${TORCH_ARGS:-}
  cat "$OUT/nn_torch.log"
  cp "$CNN_DIR/torch_times.txt" "$OUT/" 2>/dev/null
  STEP_TIMEOUT=${BENCH_TIMEOUT:-540} run nn_bench "$B/bench/nn/bench_nn_gpu" --iters "${BENCH_ITERS:-3000}" \
    ${BENCH_ARGS:-} --torch "$CNN_DIR/torch_times.txt" --check "$CNN_DIR" $(ls "$CNN_DIR"/cnn3d_*.onnx 2>/dev/null) \
    ${BENCH_MODELS:-}
  cat "$OUT/nn_bench.log"
fi
echo "gpu-run-onnx: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
