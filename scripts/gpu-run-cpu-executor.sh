#!/usr/bin/env bash
# The CPU executor on the GPU machine's host CPU (no GPU used): qec-decode
# --predecoder on the shipped d = 5 / 7 / 9 / 13 Z models, with the OpenBLAS
# kernels the executor picks and with OpenBLAS's own choice kept
# (CUDAQ_NN_BLAS_KEEP=1), OPENBLAS_VERBOSE=2 printing the kernels each time;
# predictions compared between the two; and test_nn_threads (two executors
# at once give one thread's answers) when the pack has it. Prepare here:
#   BUILD=build BINS="src/mwpm/qec-decode tests/nn/test_nn_threads" scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry/
#   for d in 5 7 9 13; do .venv/bin/python tools/predecoder/reference_eval.py shots \
#     --manifest models/manifest.json --model models/predecoder_d${d}_z.onnx --p 0.003 \
#     --shots N --seed 7 --out .gpucarry/shots/cpu$d; done   # N = 200, 200, 60, 20
# then run it with .gpucarry carried.
set -uo pipefail
cd "$(dirname "$0")/.."
C=${CARRY:-.gpucarry}
BUILD=$C source scripts/gpu-common.sh
unpack_xz "$C" /tmp/cebin
export LD_LIBRARY_PATH=$PWD/$C:$LD_LIBRARY_PATH
machine_info 2>&1 | tee "$OUT/machine.txt"
grep -m1 -E "^(cpu family|model)\s" /proc/cpuinfo; grep -m1 "^model\s" /proc/cpuinfo
for d in 5 7 9 13; do
  S=$C/shots/cpu$d
  [ -f "$S/shots.b8" ] || continue
  n=$(sed -n 's/^shots //p' "$S/info.txt")
  for keep in 0 1; do
    s=$(date +%s.%N)
    CUDAQ_NN_BLAS_KEEP=$keep OPENBLAS_VERBOSE=2 /tmp/cebin/qec-decode predict --dem "$S/circuit.dem" \
      --in "$S/shots.b8" --in_format b8 --predecoder models/predecoder_d${d}_z.onnx --predecoder_weights off \
      --out "/tmp/ce$d.$keep.01" 2> "/tmp/ce$d.$keep.err"
    e=$(date +%s.%N)
    echo "d=$d keep=$keep shots=$n: $(awk "BEGIN { printf \"%.2f\", ($e - $s) * 1000 / $n }") ms/shot;" \
      "OpenBLAS: $(grep -o 'Core: [A-Za-z0-9]*' "/tmp/ce$d.$keep.err" | tr '\n' ' ')"
  done
  cmp -s "/tmp/ce$d.0.01" "/tmp/ce$d.1.01" && echo "d=$d: predictions identical" || echo "d=$d: PREDICTIONS DIFFER"
done
if [ -x /tmp/cebin/test_nn_threads ]; then
  for keep in 0 1; do
    echo "test_nn_threads (CUDAQ_NN_BLAS_KEEP=$keep):"
    CUDAQ_NN_BLAS_KEEP=$keep /tmp/cebin/test_nn_threads models/predecoder_d5_z.onnx 2>&1 | grep -E "threads x|PASSED|FAILED"
  done
fi
