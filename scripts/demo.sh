#!/usr/bin/env bash
# The main job: installs what it needs, builds, and runs the realtime decoder
# (qec-realtime, src/realtime_app/) on an embedded default, shots sampled by
# stim and streamed by an emulated FPGA thread as RPC requests:
#  - with a GPU (nvidia-smi sees one): hybrid mode at d=13 (13 rounds,
#    p = 0.005): per request a CUDA graph copies the syndrome from the ring,
#    runs the shipped d=13 predecoder (FP16) and compacts the residual, then a
#    CPU worker runs MWPM on it; one request every 200 us for 5 s (the GPU
#    engine sustains ~10k/s at d=13 on an H100: bench/results/realtime-h100-*);
#  - without: CPU-only mode at d=5 (p = 0.003): the shipped d=5 predecoder on
#    the CPU executor, then MWPM; 500 requests, one every 20 ms (the CNN takes
#    7-9 ms per request on a 2-core machine, so two workers keep up).
# It prints latency percentiles, throughput, the stage breakdown, detection
# density and the logical error rate beside MWPM alone on the same shots.
# DEMO_MODE=cpu forces the CPU-only default. Extra arguments go to qec-realtime
# (`--help` lists them), e.g.
#   scripts/demo.sh --model local --requests 200000 --interval_us 10
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/venv.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target qec-realtime -j"$(nproc)"
for a in "$@"; do # --help needs no shots: straight to qec-realtime's own
  case $a in -h | --help) exec ./build/src/realtime_app/qec-realtime --help ;; esac
done
if [ "${DEMO_MODE:-auto}" != cpu ] && nvidia-smi -L > /dev/null 2>&1; then
  D=build/demo-d13
  if [ ! -f "$D/shots.b8" ]; then
    .venv/bin/python tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
      --model models/predecoder_d13_z.onnx --p 0.005 --shots 10000 --seed 1 --out "$D"
  fi
  mkdir -p build/plans
  exec ./build/src/realtime_app/qec-realtime --preset d13 --mode hybrid --dem "$D/circuit.dem" \
    --in "$D/shots.b8" --in_format b8 --obs_in "$D/obs.01" --duration_s 5 --interval_us 200 \
    --workers 4 --plan_dir build/plans "$@"
fi
D=build/demo-d5
if [ ! -f "$D/shots.b8" ]; then
  .venv/bin/python tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
    --model models/predecoder_d5_z.onnx --shots 10000 --seed 1 --out "$D"
fi
exec ./build/src/realtime_app/qec-realtime --preset d5 --dem "$D/circuit.dem" --in "$D/shots.b8" \
  --in_format b8 --obs_in "$D/obs.01" --requests 500 --interval_us 20000 --workers 2 "$@"
