#!/usr/bin/env bash
# The main job: installs what it needs, builds, and runs the realtime decoder
# (qec-realtime, src/realtime_app/) on an embedded default: a d=5 rotated
# surface-code memory experiment (5 rounds, p = 0.003), shots sampled by stim,
# streamed by an emulated FPGA thread as RPC requests through the pipeline's
# CPU workers: the shipped d=5 predecoder (models/) on the CPU executor, then
# MWPM. It prints latency percentiles, throughput, detection density and the
# logical error rate; one request every 10 ms, below the two CPU workers' capacity
# (the CNN takes about 10 ms per request on the CPU). No GPU mode yet (issue 11).
# Extra arguments go to qec-realtime (`--help` lists them), e.g.
#   scripts/demo.sh --model local --requests 200000 --interval_us 10
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/venv.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target qec-realtime -j"$(nproc)"
D=build/demo-d5
if [ ! -f "$D/shots.b8" ]; then
  .venv/bin/python tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
    --model models/predecoder_d5_z.onnx --shots 10000 --seed 1 --out "$D"
fi
exec ./build/src/realtime_app/qec-realtime --preset d5 --dem "$D/circuit.dem" --in "$D/shots.b8" \
  --in_format b8 --obs_in "$D/obs.01" --requests 1000 --interval_us 10000 --workers 2 "$@"
