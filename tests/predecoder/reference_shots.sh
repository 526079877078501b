#!/bin/sh
# reference_eval.py shots: the noise strength a user asks for is the one
# sampled. With --manifest, --p replaces the entry's uniform noise (the layout
# depends only on task, distance and rounds); a strength outside (0, 0.5) is
# refused with a message; without --p the entry's own noise is used; --noise
# si1000 --p P gives SI1000 noise at P (and needs --p).
#   reference_shots.sh VENV_PYTHON TOOLS_DIR MANIFEST MODEL WORK_DIR
set -u
PY=$1 TOOLS=$2 MAN=$3 MODEL=$4 WORK=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot make $WORK"
shots() { "$PY" "$TOOLS/reference_eval.py" shots --manifest "$MAN" --model "$MODEL" --shots 200 --seed 5 "$@"; }
shots --out "$WORK/own" >/dev/null || fail "shots from the manifest entry"
own=$("$PY" -c 'import json, os, sys
e = [e for e in json.load(open(sys.argv[1]))["models"] if e["file"] == os.path.basename(sys.argv[2])][0]
print(e["circuit"]["noise"]["after_clifford_depolarization"])' "$MAN" "$MODEL")
grep -q "\"after_clifford_depolarization\": $own" "$WORK/own/info.txt" ||
  fail "without --p the entry's noise ($own) is not what info.txt records: $(cat "$WORK/own/info.txt")"
shots --p 0.0071 --out "$WORK/p" >/dev/null || fail "shots --p 0.0071"
for k in after_clifford_depolarization before_round_data_depolarization before_measure_flip_probability \
  after_reset_flip_probability; do
  grep -q "\"$k\": 0.0071" "$WORK/p/info.txt" || fail "--p 0.0071 not applied to $k: $(cat "$WORK/p/info.txt")"
done
cmp -s "$WORK/own/circuit.dem" "$WORK/p/circuit.dem" && fail "--p 0.0071 gave the entry's own error model"
shots --p 0.0071 --noise si1000 --out "$WORK/si" >/dev/null || fail "shots --p 0.0071 --noise si1000"
grep -q '"model": "si1000", "p": 0.0071' "$WORK/si/info.txt" || fail "--noise si1000 not applied: $(cat "$WORK/si/info.txt")"
shots --noise si1000 --out "$WORK/bad" 2>"$WORK/bad.err" && fail "--noise without --p accepted"
grep -q "give --p too" "$WORK/bad.err" || fail "--noise without --p: no message ($(cat "$WORK/bad.err"))"
shots --p 0.7 --out "$WORK/bad" 2>"$WORK/bad.err" && fail "--p 0.7 accepted"
grep -q "noise strength is in (0, 0.5)" "$WORK/bad.err" || fail "--p 0.7: no message ($(cat "$WORK/bad.err"))"
echo "reference_eval shots: manifest noise kept without --p, --p applied, --noise si1000 applied, --p 0.7 refused"
