#!/bin/sh
# Every model of models/manifest.json fits the model contract (file, sha256,
# size, I/O, operators, circuit: tools/predecoder/check_models.py), and the
# project's loader and CPU executor run it: qec-decode predict --predecoder on
# 2 stim shots of the model's own circuit.
#   shipped_models.sh QEC_DECODE PYTHON TOOLS_DIR MANIFEST WORK
set -eu
QD=$1 PY=$2 TOOLS=$3 MANIFEST=$4 WORK=$5
[ -x "$PY" ] || { echo "FAIL: missing $PY: run scripts/venv.sh" >&2; exit 1; }
"$PY" "$TOOLS/check_models.py" "$MANIFEST"
BASE=$(dirname "$MANIFEST")
rm -rf "$WORK" && mkdir -p "$WORK"
"$PY" -c "import json,sys; [print(m['file']) for m in json.load(open(sys.argv[1]))['models']]" "$MANIFEST" |
while read -r f; do
  d="$WORK/$(basename "$f" .onnx)"
  "$PY" "$TOOLS/reference_eval.py" shots --manifest "$MANIFEST" --model "$BASE/$f" --shots 2 --seed 5 \
    --out "$d" > /dev/null
  "$QD" predict --dem "$d/circuit.dem" --in "$d/shots.b8" --in_format b8 --predecoder "$BASE/$f" \
    --out "$d/pred.01" || { echo "FAIL: qec-decode refused or failed on $f" >&2; exit 1; }
  [ "$(wc -l < "$d/pred.01")" -eq 2 ] || { echo "FAIL: $f: expected 2 predictions" >&2; exit 1; }
  echo "ok   $f runs on the CPU executor"
done
echo "PASS: every shipped model fits the contract and runs"
