#!/usr/bin/env bash
# A GPU visit carries the working tree (tracked files: about 58 MiB, most of it models/) and the
# carried folders, 64 MiB in all, so a visit takes only the models it runs. This moves the others
# out of the checkout into .models-stash/ (git-ignored, so not carried) and back:
#   scripts/gpu-models.sh stash [NAME ...]   keep NAME (e.g. d13_z_fast, d21_x) and the models the
#                                            GPU tests read; move every other models/*.onnx away
#   scripts/gpu-models.sh restore            put every stashed model back
#   scripts/gpu-models.sh status             what is stashed, and the size the tree carries
# The GPU tests' models (always kept): d5_z, d5_x, d5_z_fast, d7_z, d13_x (test_realtime_app.sh's
# gpu_hybrid refuses a d = 5 X model by name, test_nn_device_program reads d5_x, the shipped-tail
# checks read d7_z and d13_x).
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=.models-stash
ALWAYS="d5_z d5_x d5_z_fast d7_z d13_x"
carried() { # MiB of the tracked files still present
  git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {printf "%.1f", s / 1048576}'
}
case "${1:-status}" in
  stash)
    shift
    if compgen -G "$STASH/*.onnx" > /dev/null; then
      echo "gpu-models: $STASH/ already holds models; run '$0 restore' first" >&2
      exit 1
    fi
    keep=" $ALWAYS $* "
    for n in "$@"; do
      [ -f "models/predecoder_$n.onnx" ] || { echo "gpu-models: no models/predecoder_$n.onnx" >&2; exit 1; }
    done
    mkdir -p "$STASH"
    for f in models/predecoder_*.onnx; do
      n=${f#models/predecoder_}
      n=${n%.onnx}
      [[ "$keep" == *" $n "* ]] || mv "$f" "$STASH/"
    done
    echo "gpu-models: kept $(ls models/*.onnx | wc -l) models, stashed $(ls "$STASH" | wc -l);" \
      "the tracked files now carry $(carried) MiB (64 MiB with the carried folders)"
    ;;
  restore)
    if compgen -G "$STASH/*.onnx" > /dev/null; then mv "$STASH"/*.onnx models/; fi
    rmdir "$STASH" 2> /dev/null || true
    echo "gpu-models: restored; the tracked files carry $(carried) MiB"
    ;;
  status)
    if compgen -G "$STASH/*.onnx" > /dev/null; then
      echo "stashed: $(cd "$STASH" && ls | tr '\n' ' ')"
    else
      echo "nothing stashed"
    fi
    echo "the tracked files carry $(carried) MiB"
    ;;
  *)
    echo "usage: $0 stash [NAME ...] | restore | status" >&2
    exit 2
    ;;
esac
