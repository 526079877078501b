#!/bin/sh
# qec-decode --predecoder: models that break the contract are refused at start
# with a message naming the problem; a residual value outside 0/1 stops the
# run with a message naming the shot; bad flag combinations are refused;
# count_mistakes prints the report after its usual line and writes it as JSON
# (checked against plain count_mistakes); the local predecoder runs.
# Usage: test_cli.sh QEC_DECODE DATA_DIR PYTHON
set -eu
QD=$1 D=$2 PY=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass=0
DEM=$D/circuit.dem
SHOTS="--in $D/shots.b8 --in_format b8"
OBS="--obs_in $D/obs.01 --obs_in_format 01"

# refuses NAME PHRASE ARGS...: non-zero exit, PHRASE in stderr.
refuses() {
  name=$1 phrase=$2
  shift 2
  if "$QD" "$@" > "$T/out" 2> "$T/err"; then fail "$name: accepted"; fi
  grep -qF -- "$phrase" "$T/err" || fail "$name: message '$(cat "$T/err")' lacks '$phrase'"
  pass=$((pass + 1))
}

# 1. Models that do not fit: every line of refusals.txt, for both commands.
while IFS='|' read -r file phrase; do
  [ -n "$file" ] || continue
  refuses "$file predict" "qec-decode: --predecoder $D/$file: $phrase" \
    predict --dem "$DEM" $SHOTS --predecoder "$D/$file"
  refuses "$file count_mistakes" "$phrase" count_mistakes --dem "$DEM" $SHOTS $OBS \
    --predecoder "$D/$file"
done < "$D/refusals.txt"
# A model recording the DEM's layout shifted in space and time (metadata
# detector_coordinates) runs: the same answers as the identity model.
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/layout_shifted.onnx" --out "$T/shifted.01" ||
  fail "layout_shifted.onnx refused"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/identity.onnx" --out "$T/ident.01" ||
  fail "identity.onnx refused"
cmp -s "$T/shifted.01" "$T/ident.01" || fail "layout_shifted.onnx and identity.onnx answer differently"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/layout_spaced.onnx" --out "$T/spaced.01" ||
  fail "layout_spaced.onnx (pretty-printed JSON, floats, exponents, negative numbers) refused"
cmp -s "$T/spaced.01" "$T/ident.01" || fail "layout_spaced.onnx and identity.onnx answer differently"
# The DEM without its detector coordinates: a model that records its layout
# cannot be checked, so it is refused, unless --skip_layout_check vouches for it.
grep -v '^detector' "$DEM" > "$T/bare.dem"
refuses "no coordinates" "the DEM has no detector coordinates, so the model's detector layout" predict \
  --dem "$T/bare.dem" $SHOTS --predecoder "$D/layout_shifted.onnx"
"$QD" predict --dem "$T/bare.dem" $SHOTS --predecoder "$D/layout_shifted.onnx" --skip_layout_check \
  --out "$T/bare.01" || fail "--skip_layout_check refused"
cmp -s "$T/bare.01" "$T/ident.01" || fail "--skip_layout_check answers differently"
refuses "skip local" "--skip_layout_check is for ONNX models" predict --dem "$DEM" $SHOTS \
  --predecoder local --skip_layout_check
refuses "skip alone" "--skip_layout_check needs --predecoder" predict --dem "$DEM" $SHOTS --skip_layout_check
pass=$((pass + 1))
# A model for another DEM (d = 3: 24 detectors).
printf 'error(0.1) D0 D1\n' > "$T/small.dem"
refuses "other DEM" "model input 0 'detectors' has shape [1, 120], the DEM needs [1, 2] (it has 2 detectors)" \
  predict --dem "$T/small.dem" --in /dev/null --predecoder "$D/identity.onnx"
refuses "missing file" "qec-decode: --predecoder $T/none.onnx: cannot load:" \
  predict --dem "$DEM" $SHOTS --predecoder "$T/none.onnx"
printf 'not a model' > "$T/junk.onnx"
refuses "not ONNX" "cannot load:" predict --dem "$DEM" $SHOTS --predecoder "$T/junk.onnx"

# 2. A residual value outside 0/1: the first shot with an event is named.
first=$("$PY" -c 'import stim, sys; d = stim.read_shot_data_file(path=sys.argv[1], format="b8", num_detectors=120); print(next(i for i in range(len(d)) if d[i].any()) + 1)' "$D/shots.b8")
refuses "nonbinary" "qec-decode: shot $first: predecoder: model output 'residual_detectors'[" \
  predict --dem "$DEM" $SHOTS --predecoder "$D/nonbinary.onnx"
grep -q "is 2, not 0 or 1" "$T/err" || fail "nonbinary: $(cat "$T/err")"

# 3. Flags.
refuses "device alone" "--device needs --predecoder" predict --dem "$DEM" $SHOTS --device gpu
refuses "json alone" "--json needs --predecoder" count_mistakes --dem "$DEM" $SHOTS $OBS --json "$T/j"
refuses "json predict" "--json is for count_mistakes" predict --dem "$DEM" $SHOTS \
  --predecoder local --json "$T/j"
refuses "fp16 cpu" "--precision fp16 needs --device gpu" predict --dem "$DEM" $SHOTS \
  --predecoder "$D/identity.onnx" --precision fp16
refuses "bad device" "--device is cpu or gpu, not 'tpu'" predict --dem "$DEM" $SHOTS \
  --predecoder "$D/identity.onnx" --device tpu
# Weighted matching (a model with edge logits; models/README.md).
refuses "weights alone" "--predecoder_weights needs --predecoder" predict --dem "$DEM" $SHOTS \
  --predecoder_weights on
refuses "weights local" "--predecoder_weights is for ONNX models" predict --dem "$DEM" $SHOTS \
  --predecoder local --predecoder_weights on
refuses "weights value" "--predecoder_weights is auto, on or off, not 'yes'" predict --dem "$DEM" \
  $SHOTS --predecoder "$D/weighted.onnx" --predecoder_weights yes
refuses "weights on, no logits" "weighted matching asked for, but the model has no output 'edge_logits'" \
  predict --dem "$DEM" $SHOTS --predecoder "$D/identity.onnx" --predecoder_weights on
refuses "weights on and correlations" "--enable_correlations does not combine with --predecoder_weights on" \
  predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --predecoder_weights on --enable_correlations
# auto with --enable_correlations: the thresholded residual, as off
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --enable_correlations \
  --out "$T/w_corr_auto.01" || fail "auto with --enable_correlations refused"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --enable_correlations \
  --predecoder_weights off --out "$T/w_corr_off.01" || fail "off with --enable_correlations refused"
cmp -s "$T/w_corr_auto.01" "$T/w_corr_off.01" || fail "auto and off differ with --enable_correlations"
# off: the model's own (identity) residual, matched plainly: the identity model's answers;
# auto and on: weighted, which answers differently on this model.
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --predecoder_weights off \
  --out "$T/w_off.01" || fail "--predecoder_weights off refused"
cmp -s "$T/w_off.01" "$T/ident.01" || fail "--predecoder_weights off: not the identity model's answers"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --out "$T/w_auto.01" || fail "weighted refused"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/weighted.onnx" --predecoder_weights on \
  --out "$T/w_on.01" || fail "--predecoder_weights on refused"
cmp -s "$T/w_auto.01" "$T/w_on.01" || fail "--predecoder_weights auto and on answer differently"
cmp -s "$T/w_auto.01" "$T/ident.01" && fail "weighted matching answers as the identity model"
pass=$((pass + 1))
refuses "bad precision" "--precision is fp32 or fp16, not 'int8'" predict --dem "$DEM" $SHOTS \
  --predecoder "$D/identity.onnx" --device gpu --precision int8
refuses "device local" "--device is for ONNX models" predict --dem "$DEM" $SHOTS \
  --predecoder local --device gpu
refuses "factor onnx" "--local_weight_factor is for --predecoder local" predict --dem "$DEM" $SHOTS \
  --predecoder "$D/identity.onnx" --local_weight_factor 2
refuses "factor text" "--local_weight_factor 'abc' is not a positive number" predict --dem "$DEM" $SHOTS \
  --predecoder local --local_weight_factor abc
for v in 0 -1 nan inf 1e400; do # command-line mistakes: exit 2, as the text above
  refuses "factor $v" "--local_weight_factor '$v' is not a positive number" predict --dem "$DEM" $SHOTS \
    --predecoder local --local_weight_factor "$v"
  rc=0; "$QD" predict --dem "$DEM" $SHOTS --predecoder local --local_weight_factor "$v" >/dev/null 2>&1 || rc=$?
  [ $rc -eq 2 ] || fail "factor $v: exit $rc, not 2"
done
refuses "no value" "--predecoder needs a value" predict --dem "$DEM" --predecoder
printf 'garbage\n' > "$T/garbage.onnx" # the kind of failure named once, then why
refuses "garbage model" "cannot load: not a valid ONNX model: the protobuf does not parse" predict \
  --dem "$DEM" $SHOTS --predecoder "$T/garbage.onnx"
grep -q "model: not a valid ONNX model" "$T/err" && fail "garbage model: the kind is named twice: $(cat "$T/err")"

# 4. count_mistakes: the usual line first (predecoder + MWPM), then the
# report; MWPM alone in the report equals plain count_mistakes.
plain=$("$QD" count_mistakes --dem "$DEM" $SHOTS $OBS)
"$QD" count_mistakes --dem "$DEM" $SHOTS $OBS --predecoder "$D/identity.onnx" \
  --json "$T/id.json" > "$T/id.txt"
[ "$(head -1 "$T/id.txt")" = "$plain" ] || fail "identity: first line $(head -1 "$T/id.txt") != $plain"
for part in "predecoder: $D/identity.onnx (cpu, fp32)" "logical error rate, predecoder + MWPM:" \
            "logical error rate, MWPM alone:" "95% Wilson interval [" \
            "disagree: 0" "(after / before 1.0000)" "MWPM time per shot:" "speedup" \
            "MWPM time of one shot, p50 / p99 / slowest:" "inference time per shot:"; do
  grep -qF -- "$part" "$T/id.txt" || fail "identity report lacks '$part': $(cat "$T/id.txt")"
done
"$QD" count_mistakes --dem "$DEM" $SHOTS $OBS --predecoder "$D/pairs.onnx" \
  --json "$T/pairs.json" > "$T/pairs.txt"
"$QD" count_mistakes --dem "$DEM" $SHOTS $OBS --predecoder local --json "$T/local.json" \
  > "$T/local.txt"
grep -qF "predecoder: local" "$T/local.txt" || fail "local report: $(cat "$T/local.txt")"
"$PY" - "$plain" "$T/id.txt" "$T/id.json" "$T/pairs.txt" "$T/pairs.json" "$T/local.txt" \
  "$T/local.json" <<'EOF' || fail "JSON report"
import json, sys
plain = int(sys.argv[1].split()[0])
for txt, js in zip(sys.argv[2::2], sys.argv[3::2]):
    r = json.load(open(js))
    first = open(txt).readline().split()
    assert r["shots"] == 10000 == int(first[2]), (js, r["shots"], first)
    assert r["predecoder_mwpm"]["mistakes"] == int(first[0]), js
    assert r["mwpm"]["mistakes"] == plain, (js, r["mwpm"], plain)
    for k in ("predecoder_mwpm", "mwpm"):
        lo, hi = r[k]["wilson95"]
        assert 0 <= lo <= r[k]["logical_error_rate"] <= hi <= 1, (js, r[k])
    e = r["events_per_shot"]
    assert e["before"] > 0 and abs(e["ratio"] - e["after"] / e["before"]) < 1e-9, (js, e)
    assert r["mwpm_us_per_shot"]["raw"] > 0 and r["inference_us_per_shot"] > 0, js
    for k in ("raw", "residual"):  # each decode of one more pass timed alone
        t = r["mwpm_us_one_shot"][k]
        assert 0 < t["max"] and 0 <= t["p50"] <= t["p99"] <= t["max"], (js, k, t)
    assert isinstance(r["disagreements"], int), js
ident = json.load(open(sys.argv[3]))
assert ident["disagreements"] == 0 and ident["events_per_shot"]["ratio"] == 1, ident
assert ident["device"] == "cpu" and ident["precision"] == "fp32", ident
pairs = json.load(open(sys.argv[5]))
assert pairs["events_per_shot"]["ratio"] < 0.95, pairs
local = json.load(open(sys.argv[7]))
assert local["device"] is None and local["events_per_shot"]["ratio"] < 0.9, local
print("json reports ok")
EOF
pass=$((pass + 1))

# 5. predict with the local predecoder: one record per shot; the frame model
# (frame = first detector) flips exactly the shots whose detector 0 fired.
"$QD" predict --dem "$DEM" $SHOTS --predecoder local > "$T/local.01"
[ "$(wc -l < "$T/local.01")" -eq 10000 ] || fail "local predict: $(wc -l < "$T/local.01") records"
"$QD" predict --dem "$DEM" $SHOTS > "$T/plain.01"
"$QD" predict --dem "$DEM" $SHOTS --predecoder "$D/frame.onnx" > "$T/frame.01"
"$PY" - "$D/shots.b8" "$T/plain.01" "$T/frame.01" <<'EOF' || fail "frame model XOR"
import sys, numpy as np, stim
d = stim.read_shot_data_file(path=sys.argv[1], format="b8", num_detectors=120)
plain = np.array([int(x) for x in open(sys.argv[2]).read().split()])
frame = np.array([int(x) for x in open(sys.argv[3]).read().split()])
assert (frame == plain ^ d[:, 0]).all()
EOF
pass=$((pass + 3))
echo "$pass passed, 0 failed"
