#!/usr/bin/env bash
# Packs what a predecoder or qec-realtime GPU visit needs from build-gpu/ (scripts/gpu-build.sh)
# into .gpucarry/ (CARRY=dir for another; keep it under /.gpucarry* so git ignores it): the stripped, xz-compressed binaries (the whole build
# folder is over the 64 MiB a visit carries) and the shared libraries the GPU
# machine lacks. scripts/gpu-run-predecoder.sh unpacks them there.
# BINS="tests/X bench/Y ..." packs only those binaries (with the library, cmocka
# and commit.txt): a light pack, e.g. the pipeline visit's.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-gpu} # the build folder (BUILD=... for a second one)
C=${CARRY:-.gpucarry}
case "$C" in .gpucarry*) ;; *) echo "gpu-pack.sh: CARRY must start with .gpucarry (git-ignored)" >&2; exit 2 ;; esac
rm -rf "$C" && mkdir -p "$C"
ALL="src/mwpm/qec-decode bench/nn/bench_nn_gpu src/realtime_app/qec-realtime
    tests/test_gpu_dispatch tests/test_graph_dispatch tests/test_pipeline_gpu bench/bench_udp
    bench/bench_gpu_dispatch bench/bench_pipeline tests/test_api tests/nn/test_nn_gpu
    tests/nn/test_nn_device_program"
for b in ${BINS:-$ALL}; do
  strip -o "$C/$(basename $b)" "$B/$b" && xz -T0 -6 "$C/$(basename $b)"
done
if [ -z "${BINS:-}" ]; then
  # the NN engine's reference models and outputs (test_nn_gpu), when the build made them
  if [ -d "$B/nn-ref" ]; then cp -r "$B/nn-ref" "$C"/; fi
  cp $B/tests/predecoder/mwpm_weight $B/libs/* $B/commit.txt "$C"/
else # a light pack of a build that may not come from gpu-build.sh (no libs/, no commit.txt)
  cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$C"/
  git rev-parse HEAD > "$C/commit.txt"
fi
cp -L $B/src/libcudaq_realtime.so.0 "$C"/ # for the dispatch tests
du -sh "$C"
