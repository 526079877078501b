#!/usr/bin/env bash
# One GPU visit (issue 16): weighted matching with the shipped predecoders (models/README.md,
# "Weighted matching") through the C path, qec-decode --predecoder on the GPU engine, at
# held-out points; and the checks that the models' new output leaves the GPU paths as they
# were. Pack here (one build, the two test binaries and qec-decode), carry it and .whl (stim):
#   cmake --build build-gpu --target qec-decode test_nn_gpu test_nn_device_program
#   CARRY=.gpucarry-w BINS="src/mwpm/qec-decode tests/nn/test_nn_gpu tests/nn/test_nn_device_program" \
#     scripts/gpu-pack.sh && cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-w/
# Then (GPU machine, repository root): scripts/gpu-run-weighted.sh
#   STEPS="check eval" (default both); POINTS="basis:d:p:shots:seed[:family] ..." (family: accurate
#   or fast, default accurate); JOBS qec-decode processes per point (default 6), PREC fp16|fp32.
# Each point: stim shots of the model's circuit at p (tools/predecoder/reference_eval.py shots),
# count_mistakes over JOBS slices with --json, summed: failures of weighted predecoder + MWPM and
# of MWPM alone on the same shots, events before / after.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
install_wheels
C=${CARRY:-.gpucarry-w}
open_pack "$C" /tmp/pw
QD=/tmp/pw/qec-decode
STEPS=${STEPS:-check eval}
if [[ " $STEPS " == *" check "* ]]; then
  # The shipped files with their edge logits: the GPU engine on residual and frame (pruned
  # graph) against the CPU executor, and the device program's answers against the graph's.
  run shipped_tail /tmp/pw/test_nn_gpu --shipped-tail models predecoder_d5_z.onnx predecoder_d7_z.onnx \
    predecoder_d13_x.onnx predecoder_d5_z_fast.onnx predecoder_d13_z_fast.onnx
  [ -x /tmp/pw/test_nn_device_program ] && run device_program /tmp/pw/test_nn_device_program models
  tail -2 "$OUT"/shipped_tail.log "$OUT"/device_program.log 2>/dev/null
  # Weighted on the GPU (FP32) against the CPU executor on 2,000 d = 5 shots: predictions equal
  # up to matchings that float rounding of the logits moves (counted).
  d=/tmp/pw/w5 && python3 tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
    --model models/predecoder_d5_z.onnx --shots 2000 --seed 77 --out $d > /dev/null
  for dev in cpu gpu; do
    $QD predict --dem $d/circuit.dem --in $d/shots.b8 --in_format b8 --predecoder models/predecoder_d5_z.onnx \
      --device $dev --out $d/$dev.01 || echo "FAILED: weighted $dev"
  done
  echo "weighted d5: GPU FP32 vs CPU: $(paste -d' ' $d/cpu.01 $d/gpu.01 | awk '$1 != $2 {n++} END {print n+0}') of 2000 predictions differ"
fi
if [[ " $STEPS " == *" eval "* ]]; then
  JOBS=${JOBS:-6} PREC=${PREC:-fp16}
  for pt in ${POINTS:-z:13:0.003:1e6:7200001 x:13:0.003:1e6:7200002 z:13:0.006:2e5:7200003 x:13:0.006:2e5:7200004}; do
    IFS=: read -r basis dist p shots seed family <<< "$pt"
    suffix=""; [ "${family:-accurate}" = fast ] && suffix=_fast
    model=models/predecoder_d${dist}_${basis}${suffix}.onnx
    w=/tmp/pw/eval_${basis}${dist}_${p}${suffix}
    n=$(python3 -c "print(int(float('$shots')))")
    python3 tools/predecoder/reference_eval.py shots --manifest models/manifest.json --model "$model" \
      --p "$p" --shots "$n" --seed "$seed" --out "$w" > /dev/null || { echo "FAILED: shots $pt"; continue; }
    nd=$(sed -n 's/^num_detectors //p' "$w/info.txt")
    rec=$(( (nd + 7) / 8 )) per=$(( (n + JOBS - 1) / JOBS ))
    split -a 2 -d -b $((per * rec)) "$w/shots.b8" "$w/s." && split -a 2 -d -l "$per" "$w/obs.01" "$w/o."
    t0=$(date +%s)
    pids=""
    for s in "$w"/s.[0-9][0-9]; do
      k=${s##*.}
      $QD count_mistakes --dem "$w/circuit.dem" --in "$s" --in_format b8 --obs_in "$w/o.$k" \
        --predecoder "$model" --device gpu --precision "$PREC" --json "$w/r.$k.json" > /dev/null 2> "$w/r.$k.err" &
      pids="$pids $!"
    done
    rc=0; for q in $pids; do wait "$q" || rc=1; done
    [ $rc -eq 0 ] || { echo "FAILED: $pt"; cat "$w"/r.*.err | head -5; continue; }
    python3 - "$w" "$pt" "$model" "$PREC" "$(( $(date +%s) - t0 ))" <<'EOF'
import glob, json, sys
w, pt, model, prec, secs = sys.argv[1:]
rs = [json.load(open(f)) for f in sorted(glob.glob(w + "/r.*.json"))]
n = sum(r["shots"] for r in rs)
a = sum(r["predecoder_mwpm"]["mistakes"] for r in rs)
b = sum(r["mwpm"]["mistakes"] for r in rs)
eb = sum(r["events_per_shot"]["before"] * r["shots"] for r in rs)
ea = sum(r["events_per_shot"]["after"] * r["shots"] for r in rs)
print(json.dumps({"point": pt, "model": model, "precision": prec, "weighted": all(r.get("weighted") for r in rs),
                  "shots": n, "fail_weighted": a, "fail_mwpm": b, "ratio": round(a / b, 3) if b else None,
                  "density": round(ea / eb, 4), "seconds": int(secs)}))
EOF
  done
fi
echo "gpu-run-weighted: $passes passed, $fails failed"
