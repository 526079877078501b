#!/usr/bin/env bash
# test_udp_serve_MODEL: the hybrid decoder as a UDP service (issue 14 with
# issue 11's CPU worker). cudaq-udp-serve --model MODEL decodes the d = 5
# fixture's shots (tests/predecoder: stim, p = 0.005) sent by the FPGA
# emulator over loopback; every request must be answered, and the logical
# errors the emulator counts against the true observables must equal
# qec-decode count_mistakes --predecoder MODEL on the same shots (the
# offline evaluation, one home for the decoding: qrt_worker.c vs qec-decode),
# weighted matching by default for a model with edge logits (WEIGHTS=off: not).
# Usage: serve_model.sh SERVE EMU QEC_DECODE PYTHON DATA_DIR WORK_DIR MODEL [SHOTS]
#   MODEL: none | local | path to an ONNX predecoder
set -uo pipefail
SERVE=$1 EMU=$2 QD=$3 PY=$4 DATA=$5 WORK=$6 MODEL=$7 SHOTS=${8:-600}
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
# The emulator reads shots with appended observables (01 format).
"$PY" - "$DATA" "$WORK" "$SHOTS" <<'PY' || { echo "FAIL: could not build the shot file"; exit 1; }
import sys, stim
data, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
info = dict(l.split(None, 1) for l in open(f"{data}/info.txt"))
nd, no = int(info["num_detectors"]), int(info["num_observables"])
dets = stim.read_shot_data_file(path=f"{data}/shots.b8", format="b8", num_detectors=nd)[:n]
obs = stim.read_shot_data_file(path=f"{data}/obs.01", format="01", num_observables=no)[:n]
import numpy as np
stim.write_shot_data_file(data=np.concatenate([dets, obs], axis=1), path=f"{work}/shots.01",
                          format="01", num_detectors=nd, num_observables=no)
stim.write_shot_data_file(data=dets, path=f"{work}/dets.01", format="01", num_detectors=nd)
stim.write_shot_data_file(data=obs, path=f"{work}/obs.01", format="01", num_observables=no)
PY
# WEIGHTS (auto, on, off; unset: the defaults, auto in both): --predecoder_weights for both programs
pd=(); [ "$MODEL" != none ] && pd=(--predecoder "$MODEL")
sw=(); [ -n "${WEIGHTS:-}" ] && pd+=(--predecoder_weights "$WEIGHTS") && sw=(--predecoder_weights "$WEIGHTS")
expected=$("$QD" count_mistakes --dem "$DATA/circuit.dem" --in "$WORK/dets.01" --in_format 01 \
  --obs_in "$WORK/obs.01" --obs_in_format 01 "${pd[@]}" | sed -nE 's/^([0-9]+) \/ .*/\1/p')
[ -n "$expected" ] || { echo "FAIL: qec-decode count_mistakes gave no count"; exit 1; }

# Port 0: the service binds a free port and prints it.
"$SERVE" --dem "$DATA/circuit.dem" --model "$MODEL" "${sw[@]}" --workers 2 --port 0 --seconds 120 \
  --counters "$WORK/counters" > "$WORK/serve.log" 2>&1 &
spid=$!
port=
for _ in $(seq 100); do
  port=$(sed -nE 's/.* on port ([0-9]+) .*/\1/p' "$WORK/serve.log")
  [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: the service did not start"; cat "$WORK/serve.log"; kill "$spid"; exit 1; }
"$EMU" --shots "$WORK/shots.01" --format 01 --dem "$DATA/circuit.dem" --port "$port" \
  --closed-loop --count "$SHOTS" --wait-ms 5000 > "$WORK/emu.log" 2>&1
erc=$?
kill -INT "$spid" 2>/dev/null; wait "$spid"
got=$(sed -nE 's/^decoded ([0-9]+), logical errors ([0-9]+)/\2/p' "$WORK/emu.log")
decoded=$(sed -nE 's/^decoded ([0-9]+), logical errors ([0-9]+)/\1/p' "$WORK/emu.log")
echo "model $MODEL: $SHOTS requests, decoded ${decoded:-?}, logical errors ${got:-?} (qec-decode: $expected)"
if [ "$erc" != 0 ] || [ "${decoded:-}" != "$SHOTS" ] || [ "${got:-}" != "$expected" ]; then
  echo "FAIL (emulator exit $erc)"; cat "$WORK/emu.log" "$WORK/serve.log"; exit 1
fi
grep -q "^pipeline_errors=0$" "$WORK/counters" || { echo "FAIL: pipeline errors"; cat "$WORK/counters"; exit 1; }
# The shipped ONNX models give edge logits: weighted matching unless WEIGHTS=off.
case "$MODEL" in *.onnx)
  if [ "${WEIGHTS:-auto}" = off ]; then
    ! grep -q "(weighted matching)" "$WORK/serve.log" || { echo "FAIL: weighted with --predecoder_weights off"; exit 1; }
  else
    grep -q "(weighted matching)" "$WORK/serve.log" || { echo "FAIL: the service does not say weighted matching"; cat "$WORK/serve.log"; exit 1; }
  fi ;;
esac
echo PASS
