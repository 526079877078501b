#!/usr/bin/env bash
# The main job: installs what it needs, builds, and streams decoding requests
# through the host-thread dispatcher, printing what it measured.
# Extra arguments go to the demo (see examples/realtime_demo.c), e.g.
#   scripts/demo.sh --distance 11 --p 0.05 --interval-us 2
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target realtime_demo -j"$(nproc)"
./build/examples/realtime_demo "$@"
