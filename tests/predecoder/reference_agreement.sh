#!/bin/sh
# qec-decode predict --predecoder MODEL against the Python reference
# (tools/predecoder/reference_eval.py: onnxruntime + PyMatching) on the same
# shots: the 01 predictions must be byte-identical. The one exception allowed
# is an exact MWPM tie: on a shot where the two differ, our decoder's
# matching weight on the residual must equal PyMatching's (two exact
# decoders may pick different minimum-weight matchings with different
# observables); every such shot is listed, and more than 0.1% of the shots
# fails the test anyway.
#
# Usage:
#   reference_agreement.sh QEC_DECODE MWPM_WEIGHT PYTHON TOOLS_DIR WORK MODEL \
#       --data DEM SHOTS FORMAT            shots given (01, b8 or dets)
#   reference_agreement.sh ... WORK MODEL \
#       --manifest MANIFEST NUM_SHOTS SEED shots sampled by stim from the circuit of
#                                          MODEL's manifest entry
# Environment: JOBS (default: nproc) qec-decode processes over slices of a b8
# shot file with info.txt beside it (the CPU executor is slow on large models).
set -eu
QD=$1 MW=$2 PY=$3 TOOLS=$4 WORK=$5 MODEL=$6
shift 6
[ -x "$PY" ] || { echo "missing $PY: run scripts/venv.sh" >&2; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"
case "${1:-}" in
  --data) DEM=$2 IN=$3 FMT=$4 ;;
  --manifest)
    "$PY" "$TOOLS/reference_eval.py" shots --manifest "$2" --model "$MODEL" --shots "$3" \
      --seed "$4" --out "$WORK"
    DEM=$WORK/circuit.dem IN=$WORK/shots.b8 FMT=b8 ;;
  *) echo "usage: see the head of $0" >&2; exit 2 ;;
esac
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/common.sh"

"$PY" "$TOOLS/reference_eval.py" predict --model "$MODEL" --dem "$DEM" --in "$IN" \
  --in_format "$FMT" --out "$WORK/ref.01" --residual_out "$WORK/residual.b8" \
  --weights_out "$WORK/pm_weights.txt" --frame_out "$WORK/frames.01"

# Ours (over JOBS processes on slices of a b8 file: common.sh).
NSHOTS=$(wc -l < "$WORK/ref.01")
start=$(date +%s)
pd_predict "$QD" "$DEM" "$IN" "$FMT" "$WORK/ours.01" --predecoder "$MODEL" || fail "qec-decode failed"
echo "qec-decode: $NSHOTS shots in $(( $(date +%s) - start )) s (JOBS=${JOBS:-$(nproc)})"

if cmp -s "$WORK/ref.01" "$WORK/ours.01"; then
  echo "PASS: $NSHOTS shots, predictions byte-identical ($(basename "$MODEL"))"
  exit 0
fi
[ "$(wc -l < "$WORK/ours.01")" -eq "$NSHOTS" ] || fail "ours has $(wc -l < "$WORK/ours.01") records, reference $NSHOTS"
# Differing shots (1-based), then our weight on each residual against PyMatching's.
paste -d ' ' "$WORK/ref.01" "$WORK/ours.01" | awk '$1 != $2 { print NR }' > "$WORK/diff.txt"
ndiff=$(wc -l < "$WORK/diff.txt")
# shellcheck disable=SC2046
# (--model: a weighted model's shots are matched with their own edge weights, as qec-decode does)
"$MW" "$DEM" "$WORK/residual.b8" --model "$MODEL" "$IN" "$FMT" $(cat "$WORK/diff.txt") > "$WORK/ours_weights.txt" ||
  fail "mwpm_weight failed"
# A tie: our prediction is the model's frame XOR the observables of our
# matching on the residual, and that matching weighs what PyMatching's does.
awk 'FNR == 1 { f++ }
     f == 1 { pm[FNR] = $1; next }
     f == 2 { frame[FNR] = $0; next }
     f == 3 { ours[FNR] = $0; next }
     { s = $1; w = $2; obs = $3; fr = frame[s]; explained = 1
       for (j = 1; j <= length(fr); j++) {
         bit = int(obs / 2 ^ (j - 1)) % 2
         want = (substr(fr, j, 1) == "1") != bit
         if ((substr(ours[s], j, 1) == "1") != want) explained = 0 }
       d = w - pm[s]; if (d < 0) d = -d; m = pm[s] < 1 ? 1 : pm[s]
       if (explained && d <= 1e-6 * m) { ties++; printf "  shot %d: MWPM tie (weight %.9g both)\n", s, w }
       else { bad++; printf "  shot %d: NOT a tie: ours %s (our matching: weight %.9g, observables %d; frame %s), PyMatching weight %.9g\n", s, ours[s], w, obs, fr, pm[s] } }
     END { exit bad > 0 }' "$WORK/pm_weights.txt" "$WORK/frames.01" "$WORK/ours.01" "$WORK/ours_weights.txt" ||
  fail "$ndiff of $NSHOTS shots differ, not all by MWPM ties"
[ $((ndiff * 1000)) -le "$NSHOTS" ] || fail "$ndiff of $NSHOTS shots differ by MWPM ties: more than 0.1%"
echo "PASS: $NSHOTS shots, predictions byte-identical except $ndiff exact MWPM tie(s) listed above ($(basename "$MODEL"))"
