#!/usr/bin/env bash
# One GPU visit for the trained predecoders (models/): GPU engine against the
# CPU executor through qec-decode, batch-1 inference latency of every model
# (FP32/FP16 graph replay), compute-sanitizer memcheck, and extra held-out
# evaluation points of the training checkpoint.
# Prepare here (the build folder is too large to carry whole):
#   scripts/gpu-build.sh && scripts/gpu-pack.sh      -> .gpucarry/ (xz binaries, libraries)
# then run with .gpucarry, .whl (stim, PyMatching wheels) and .ckpt carried.
# Steps: STEPS="agree bench memcheck eval d13" (default all); results in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
C=${CARRY:-.gpucarry}
BUILD=$C source scripts/gpu-common.sh
mkdir -p /tmp/pdbin
for f in "$C"/*.xz; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" "/tmp/pdbin/$(basename "${f%.xz}")"
done
cp "$C"/mwpm_weight /tmp/pdbin/ 2>/dev/null; chmod +x /tmp/pdbin/*
export LD_LIBRARY_PATH=$PWD/$C:$LD_LIBRARY_PATH
install_wheels
QD=/tmp/pdbin/qec-decode
STEPS=${STEPS:-agree bench memcheck eval d13}
machine_info 2>&1 | tee "$OUT/machine.txt"
step() { # step NAME SECONDS CMD...: run() with a limit; its log's tail also on success
  local name=$1 secs=$2 before=$fails; shift 2
  STEP_TIMEOUT=$secs run "$name" "$@"
  [ "$fails" -eq "$before" ] && tail -"${TAIL:-12}" "$OUT/$name.log"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has agree; then
  step agree_d5_z 150 sh tests/predecoder/gpu_agreement.sh "$QD" "$(command -v python3)" tools/predecoder /tmp/pd-agree \
    models/predecoder_d5_z.onnx 0.001 0.01 --manifest models/manifest.json 10000 20261124
fi
if has bench; then
  step bench_nn 150 /tmp/pdbin/bench_nn_gpu --iters "${ITERS:-500}" models/predecoder_d5_z.onnx \
    models/predecoder_d7_z.onnx models/predecoder_d9_z.onnx models/predecoder_d13_z.onnx models/predecoder_d21_x.onnx
fi
if has memcheck; then
  python3 tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
    --model models/predecoder_d5_z.onnx --shots 50 --seed 7 --out /tmp/pd-san > /dev/null 2>&1
  step memcheck_d5 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
    "$QD" predict --dem /tmp/pd-san/circuit.dem --in /tmp/pd-san/shots.b8 --in_format b8 \
    --predecoder models/predecoder_d5_z.onnx --device gpu --precision fp16 --out /tmp/pd-san/p.01
fi
if has d13; then
  python3 tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
    --model models/predecoder_d13_z.onnx --shots 20000 --seed 99 --out /tmp/pd-13 > /dev/null 2>&1
  for prec in fp16 fp32; do
    step "qec_decode_d13_$prec" 90 "$QD" count_mistakes --dem /tmp/pd-13/circuit.dem --in /tmp/pd-13/shots.b8 \
      --in_format b8 --obs_in /tmp/pd-13/obs.01 --predecoder models/predecoder_d13_z.onnx --predecoder_weights off --device gpu \
      --precision "$prec" --json "$OUT/qec_decode_d13_$prec.json"
  done
fi
if has eval; then
  TAIL=40 step eval_extra 200 python3 tools/predecoder/evaluate.py --ckpt .ckpt/predecoder.pt --thresholds=0,2,3 \
    --points "${EVAL_POINTS:-z:7:0.001:4000000,z:9:0.002:1000000,x:9:0.003:1000000}" --json "$OUT/eval_extra.json"
  TAIL=40 step eval_si1000 90 python3 tools/predecoder/evaluate.py --ckpt .ckpt/predecoder.pt --noise si1000 \
    --thresholds=0,2,3 --points "z:7:0.003:1000000" --json "$OUT/eval_si1000.json"
fi
echo "gpu-run-predecoder: $fails failed"
