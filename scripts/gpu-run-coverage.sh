#!/usr/bin/env bash
# Two GPU visits: every shipped model family on circuits and noise it was not
# trained or tested on (X and Z, SI1000, p from 0.0015 to 0.008, d = 5 to 31),
# through the CPU executor, the GPU engine (FP32, FP16) and qec-realtime's
# hybrid mode; predictions compared shot for shot (qec-decode with
# --predecoder_weights off: the hybrid mode matches the thresholded residual). The two binaries and the
# repository pass the 64 MiB a visit carries, so each visit carries one:
#   cmake --build build-gpu --target qec-decode qec-realtime
#   CARRY=.gpucarry-c BINS=src/mwpm/qec-decode scripts/gpu-pack.sh             # visit 1
#   CARRY=.gpucarry-c BINS=src/realtime_app/qec-realtime scripts/gpu-pack.sh   # visit 2
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-c/
# and .gpucarry-c/shots/<model name>/ from tools/predecoder/reference_eval.py shots
# --manifest models/manifest.json --model models/<model>.onnx --p P --seed S --shots N
# --out .gpucarry-c/shots/<model name> (each directory names the model it is for, found in MODELS,
# default models/: MODELS=.gpucarry-x/models runs models made for the visit), its
# circuit.dem xz-compressed (xz -9). Visit 1 (qec-decode) writes the CPU executor's and the
# engine's predictions to $OUT/preds.tar.xz; unpack it into .gpucarry-c/preds/ for visit 2
# (qec-realtime), which compares its answers with them.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-c}
open_pack "$C" /tmp/cv
QD=/tmp/cv/qec-decode RT=/tmp/cv/qec-realtime P=/tmp/cvpreds M=${MODELS:-models}
mkdir -p /tmp/cvplans "$P"
[ -d "$C/preds" ] && cp "$C"/preds/* "$P"/
for f in "$C"/shots/*/circuit.dem.xz; do
  [ -e "$f" ] && python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" "${f%.xz}"
done
diffs() { [ -s "$1" ] && [ -s "$2" ] && paste "$1" "$2" | awk '$1 != $2' | wc -l || echo "n/a"; }
if [ -x "$QD" ]; then
  for d in "$C"/shots/*/; do # the CPU executor, every model at once on the host's cores
    m=$(basename "$d")
    ( timeout 500 $QD predict --dem "$d/circuit.dem" --in "$d/shots.b8" --in_format b8 --predecoder "$M/$m.onnx" --predecoder_weights off \
        --device cpu --out "$P/$m.cpu.01" > "$P/$m.cpu.log" 2>&1; echo $? > "$P/$m.cpu.rc" ) &
  done
  for d in "$C"/shots/*/; do
    m=$(basename "$d")
    for prec in fp32 fp16; do
      timeout 300 $QD predict --dem "$d/circuit.dem" --in "$d/shots.b8" --in_format b8 --predecoder "$M/$m.onnx" --predecoder_weights off \
        --device gpu --precision $prec --out "$P/$m.$prec.01" > "$P/$m.$prec.log" 2>&1 ||
        echo "$m $prec: FAILED rc $? ($(tail -2 "$P/$m.$prec.log"))"
    done
    timeout 300 $QD count_mistakes --dem "$d/circuit.dem" --in "$d/shots.b8" --in_format b8 --obs_in "$d/obs.01" \
      --predecoder "$M/$m.onnx" --predecoder_weights off --device gpu --precision fp16 > "$P/$m.count.log" 2>&1 || echo "$m count: FAILED"
  done
  wait
  echo "| model | shots | CPU executor rc | GPU FP32 vs CPU executor (shots differing) | GPU FP16 vs CPU | LER predecoder + MWPM (GPU FP16) | LER MWPM alone |"
  for d in "$C"/shots/*/; do
    m=$(basename "$d")
    echo "| $m | $(wc -l < "$d/obs.01") | $(cat "$P/$m.cpu.rc") | $(diffs "$P/$m.fp32.01" "$P/$m.cpu.01") |" \
      "$(diffs "$P/$m.fp16.01" "$P/$m.cpu.01") | $(grep 'predecoder + MWPM:' "$P/$m.count.log" | sed 's/.*MWPM: *//') |" \
      "$(grep 'MWPM alone:' "$P/$m.count.log" | sed 's/.*alone: *//') |"
  done
  tar -C "$P" -cJf "$OUT/preds.tar.xz" .
fi
if [ -x "$RT" ]; then
  echo "| model | shots | qec-realtime hybrid (FP16) vs CPU executor (shots differing) | vs GPU engine FP16 | requests | LER |"
  for d in "$C"/shots/*/; do
    m=$(basename "$d")
    timeout 300 $RT --mode hybrid --model "$M/$m.onnx" --dem "$d/circuit.dem" --in "$d/shots.b8" --in_format b8 \
      --obs_in "$d/obs.01" --requests "$(wc -l < "$d/obs.01")" --interval_us 100 --workers 4 --plan_dir /tmp/cvplans \
      --compare_mwpm 0 --out "$P/$m.rt.01" > "$P/$m.rt.log" 2>&1 || echo "$m realtime: FAILED rc $? ($(tail -3 "$P/$m.rt.log"))"
    echo "| $m | $(wc -l < "$d/obs.01") | $(diffs "$P/$m.rt.01" "$P/$m.cpu.01") | $(diffs "$P/$m.rt.01" "$P/$m.fp16.01") |" \
      "$(grep -o 'completed [0-9]*, ok [0-9]*, errors [0-9]*' "$P/$m.rt.log") | $(grep -o 'logical error rate [0-9.e-]* ([0-9]* / [0-9]*)' "$P/$m.rt.log") |"
  done
fi
