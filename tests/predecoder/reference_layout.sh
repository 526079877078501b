#!/bin/sh
# reference_eval.py predict checks the detector layout a model records, by the
# rule qec-decode applies (tools/predecoder/layout.py: layout_mismatch): the
# X-basis model on Z-basis shots is refused, and so is a DEM without detector
# coordinates unless --skip_layout_check; the model's own circuit runs.
#   reference_layout.sh VENV_PYTHON TOOLS_DIR MANIFEST MODELS_DIR WORK_DIR
set -u
PY=$1 TOOLS=$2 MAN=$3 MODELS=$4 WORK=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot make $WORK"
"$PY" "$TOOLS/reference_eval.py" shots --manifest "$MAN" --model "$MODELS/predecoder_d5_z.onnx" --shots 20 \
  --seed 7 --out "$WORK/z" >/dev/null || fail "shots"
pred() { "$PY" "$TOOLS/reference_eval.py" predict --dem "$1" --in "$WORK/z/shots.b8" --in_format b8 \
  --out "$WORK/out.01" --model "$2" "$3" 2>"$WORK/err"; }
pred "$WORK/z/circuit.dem" "$MODELS/predecoder_d5_z.onnx" --in_format=b8 || fail "own circuit: $(cat "$WORK/err")"
pred "$WORK/z/circuit.dem" "$MODELS/predecoder_d5_x.onnx" --in_format=b8 && fail "X model on Z shots accepted"
grep -q "the DEM's detector layout is not the model's: detector" "$WORK/err" || fail "X on Z: $(cat "$WORK/err")"
grep -v '^detector' "$WORK/z/circuit.dem" >"$WORK/bare.dem"
pred "$WORK/bare.dem" "$MODELS/predecoder_d5_z.onnx" --in_format=b8 && fail "a DEM without coordinates accepted"
grep -q "the DEM has no detector coordinates" "$WORK/err" || fail "bare DEM: $(cat "$WORK/err")"
pred "$WORK/bare.dem" "$MODELS/predecoder_d5_z.onnx" --skip_layout_check ||
  fail "--skip_layout_check refused: $(cat "$WORK/err")"
echo "reference_eval predict: own layout runs, X on Z refused, no coordinates refused unless --skip_layout_check"
