#!/bin/sh
# qec-decode predict --predecoder MODEL --device gpu against the CPU executor
# on the same shots: FP32 and FP16 predictions may differ from the CPU ones
# on at most the given fractions of the shots (0: byte-identical). Without a
# CUDA device (or in a build without CUDA) it prints "skipped: no CUDA
# device" and exits 77.
#
# Usage:
#   gpu_agreement.sh QEC_DECODE PYTHON TOOLS_DIR WORK MODEL FP32_MAX FP16_MAX \
#       --data DEM SHOTS FORMAT | --manifest MANIFEST NUM_SHOTS SEED
set -eu
QD=$1 PY=$2 TOOLS=$3 WORK=$4 MODEL=$5 FP32_MAX=$6 FP16_MAX=$7
shift 7
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/common.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
case "${1:-}" in
  --data) DEM=$2 IN=$3 FMT=$4 ;;
  --manifest)
    [ -x "$PY" ] || fail "missing $PY: run scripts/venv.sh"
    "$PY" "$TOOLS/reference_eval.py" shots --manifest "$2" --model "$MODEL" --shots "$3" \
      --seed "$4" --out "$WORK"
    DEM=$WORK/circuit.dem IN=$WORK/shots.b8 FMT=b8 ;;
  *) echo "usage: see the head of $0" >&2; exit 2 ;;
esac

# The device first: without one there is nothing to compare.
if ! "$QD" predict --dem "$DEM" --in "$IN" --in_format "$FMT" --out_format 01 \
       --predecoder "$MODEL" --device gpu --out "$WORK/gpu32.01" 2> "$WORK/gpu.err"; then
  if grep -qE "no CUDA device|built without CUDA" "$WORK/gpu.err"; then
    echo "skipped: no CUDA device"
    exit 77
  fi
  cat "$WORK/gpu.err" >&2
  fail "qec-decode --device gpu failed"
fi
pd_predict "$QD" "$DEM" "$IN" "$FMT" "$WORK/cpu.01" --predecoder "$MODEL" || fail "CPU run failed"
"$QD" predict --dem "$DEM" --in "$IN" --in_format "$FMT" --out_format 01 --predecoder "$MODEL" \
  --device gpu --precision fp16 --out "$WORK/gpu16.01" || fail "qec-decode --precision fp16 failed"
n=$(wc -l < "$WORK/cpu.01")
[ "$(wc -l < "$WORK/gpu32.01")" -eq "$n" ] && [ "$(wc -l < "$WORK/gpu16.01")" -eq "$n" ] ||
  fail "record counts differ"
bad=0
for prec in 32 16; do
  d=$(pd_count_diff "$WORK/cpu.01" "$WORK/gpu$prec.01")
  max=$FP32_MAX
  [ "$prec" = 16 ] && max=$FP16_MAX
  echo "fp$prec: $d of $n shots differ from the CPU executor (allowed fraction $max)"
  awk -v d="$d" -v n="$n" -v m="$max" 'BEGIN { exit !(d <= m * n) }' || bad=1
done
[ "$bad" -eq 0 ] || fail "GPU predictions differ from the CPU ones beyond the allowance"
echo "PASS: GPU fp32 and fp16 against the CPU executor on $n shots ($(basename "$MODEL"))"
