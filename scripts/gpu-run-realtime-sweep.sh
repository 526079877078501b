#!/usr/bin/env bash
# One GPU visit: qec-realtime hybrid rows over one option's values, interleaved
# rounds, the report's key lines per row (issue 11). Pack here first:
#   cmake --build build-gpu --target qec-realtime
#   CARRY=.gpucarry-r BINS=src/realtime_app/qec-realtime scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-r/
# and shots in .gpucarry-f/shots/dN (tools/predecoder/reference_eval.py shots
# --manifest models/manifest.json --model models/predecoder_dN_z_fast.onnx --p 0.003
# --seed S --shots 10000 --out .gpucarry-f/shots/dN); carry both.
# PRESET (d13-fast), D (13), WORKERS (12), INTERVAL (10), ROUNDS (2), OPT (the
# option swept, e.g. --prelaunch), VALUES ("2 4"), EXTRA (more options).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
cudnn_path python3
unpack_xz "${CARRY:-.gpucarry-r}" /tmp/rt
machine_info
echo "pack of commit $(cat "${CARRY:-.gpucarry-r}/commit.txt")"
mkdir -p /tmp/plans
S=${SHOTS:-.gpucarry-f/shots}/d${D:-13}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in ${VALUES:-2 4}; do
    echo "== round $r ${OPT:-} $v"
    /tmp/rt/qec-realtime --preset "${PRESET:-d13-fast}" --mode hybrid --dem "$S/circuit.dem" --in "$S/shots.b8" \
      --in_format b8 --obs_in "$S/obs.01" --duration_s 2 --interval_us "${INTERVAL:-10}" --workers "${WORKERS:-12}" \
      --pin 1 --plan_dir /tmp/plans --compare_mwpm 0 --payload bits ${OPT:+$OPT $v} ${EXTRA:-} > "$OUT/r${r}_$v.log" 2>&1
    grep -E "Throughput|p50 |p99 |dispatch\+GPU:|MWPM:|graph's kernels|pre-launched|requests: submitted|backpressure" \
      "$OUT/r${r}_$v.log"
  done
done
