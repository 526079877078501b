#!/usr/bin/env bash
# Training smoke test on the CPU (a few minutes, no GPU): makes .venv-train
# from tools/predecoder/requirements.txt (PyTorch: a large download the first
# time), trains a small d<=5 predecoder for SMOKE_MINUTES (default 3), plots
# its curve, exports it, checks the export against PyTorch, evaluates it on
# held-out stim shots, and fails unless the predecoder removes at least half
# of the detection events. Outputs in build-smoke/.
#   scripts/train-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
V=.venv-train
[ -x $V/bin/python ] || python3 -m venv $V
stamp=$V/.requirements.stamp
if [ ! -f "$stamp" ] || ! cat tools/requirements.txt tools/predecoder/requirements.txt | cmp -s - "$stamp"; then
  $V/bin/pip install -q --disable-pip-version-check -r tools/predecoder/requirements.txt
  cat tools/requirements.txt tools/predecoder/requirements.txt > "$stamp"
fi
O=build-smoke
mkdir -p $O
P=tools/predecoder
$V/bin/python $P/train.py --out $O/smoke.pt --device cpu --distances 3,5 --width 32 \
  --minutes "${SMOKE_MINUTES:-3}" --total-minutes "${SMOKE_MINUTES:-3}" --lr 2e-3 \
  --cells-per-batch 30000 --log-every 100 | tee $O/train.log
$V/bin/python $P/plot.py $O/smoke.pt $O/training.png
$V/bin/python $P/export.py --ckpt $O/smoke.pt --basis z --distance 5 --threshold 0 --out $O/smoke_d5_z.onnx
$V/bin/python $P/evaluate.py --ckpt $O/smoke.pt --device cpu --fp32 --points z:5:0.003:20000 \
  --json $O/eval.json | tee $O/eval.log
$V/bin/python - "$O/eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
ok = r["density_ratio"] < 0.5
print(f"train-smoke: density after/before {r['density_ratio']:.3f}, LER {r['ler_hybrid']:.4g} "
      f"(MWPM alone {r['ler_mwpm']:.4g}): {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
