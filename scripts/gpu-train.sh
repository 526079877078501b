#!/usr/bin/env bash
# One training visit to a GPU machine (see tools/predecoder/README.md):
#   STAGE=train   train (or resume) the predecoder for TRAIN_MINUTES, plot its curve
#   STAGE=eval    evaluate a checkpoint on held-out stim shots (EVAL_POINTS)
#   STAGE=both    train, then evaluate the new checkpoint
# The machine has PyTorch, onnx and onnxruntime; stim and PyMatching travel as
# wheels in .whl/ (carry it: see the README). Checkpoints travel in .ckpt/
# (carry it); results come back in $OUT (a checkpoint over 15 MB as predecoder.pt.part-*, see the end).
#   STAGE=train TRAIN_MINUTES=8 scripts/gpu-train.sh
#   STAGE=eval CKPT=.ckpt/predecoder.pt EVAL_POINTS=z:7:0.003:1e6 scripts/gpu-train.sh
#   STAGE=eval ONNX=models/predecoder_d7_z.onnx EVAL_POINTS=... scripts/gpu-train.sh   (a shipped model's weights)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh
install_wheels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/machine.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee -a "$OUT/machine.txt"
P=tools/predecoder
CKPT=${CKPT:-.ckpt/predecoder.pt}
STAGE=${STAGE:-train}
case "$STAGE" in
  train|both)
    resume=()
    [ -f "$CKPT" ] && resume=(--resume "$CKPT")
    python3 $P/train.py --out "$OUT/predecoder.pt" --minutes "${TRAIN_MINUTES:-8}" \
      --total-minutes "${TOTAL_MINUTES:-14}" ${TRAIN_ARGS:-} "${resume[@]}" 2>&1 | tee "$OUT/train.log"
    python3 $P/plot.py "$OUT/predecoder.pt" "$OUT/training.png" --log "$OUT/training_log.jsonl"
    CKPT=$OUT/predecoder.pt
    ;;&
  eval|both)
    src=(--ckpt "$CKPT")
    [ -n "${ONNX:-}" ] && src=(--onnx "$ONNX")
    python3 $P/evaluate.py "${src[@]}" --points "$EVAL_POINTS" --json "$OUT/eval.json" \
      ${EVAL_ARGS:-} 2>&1 | tee "$OUT/eval.log"
    ;;
  train) ;;
  *) echo "gpu-train: unknown STAGE ${STAGE}"; exit 2 ;;
esac
# The device tool brings back files of at most 16 MB: a larger checkpoint (a 6 x 128 network with its
# optimizer state is 22 MB) comes back in parts; put it together here with
#   cat <files_at>/predecoder.pt.part-* > .ckpt/predecoder.pt
if [ -f "$OUT/predecoder.pt" ] && [ "$(stat -c %s "$OUT/predecoder.pt")" -gt 15000000 ]; then
  split -b 15m "$OUT/predecoder.pt" "$OUT/predecoder.pt.part-" && rm "$OUT/predecoder.pt"
fi
