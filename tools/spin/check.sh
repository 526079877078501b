#!/usr/bin/env bash
# Model-checks a Promela model with spin (default tools/spin/pipeline.pml):
# the model must verify with no error, and each mutated model (a real
# ordering bug; the model's "MUTATIONS:" comment line lists them) must be
# rejected, which proves that the check can fail. Used by ctest
# (test_spin_pipeline, test_spin_consumer_order).
# Usage: tools/spin/check.sh [model.pml]
set -euo pipefail
MODEL=$(realpath "${1:-$(dirname "$0")/pipeline.pml}")
CC=${CC:-gcc}
command -v spin >/dev/null || { echo "skipped: spin not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
verify() { # verify MUT -> prints pan's error count
  spin -DMUT="$1" -a "$MODEL" >/dev/null
  "$CC" -O2 -w -o pan pan.c
  ./pan -a -m1000000 > "pan$1.txt" 2>&1 || true
  if grep -q "depth too small" "pan$1.txt"; then echo "search depth too small" >&2; echo 99; return; fi
  sed -nE 's/.*errors: ([0-9]+).*/\1/p' "pan$1.txt" | tail -1
}
fail=0
e=$(verify 0)
grep -E "states, stored" pan0.txt
if [ "$e" = "0" ]; then echo "model $(basename "$MODEL"): verified, no assertion violated"; else
  echo "model: FAILED ($e errors)"; cat pan0.txt; fail=1; fi
muts=$(sed -nE 's/^ \* MUTATIONS: *//p' "$MODEL")
[ -n "$muts" ] || { echo "$(basename "$MODEL"): no MUTATIONS: line (nothing shows the check can fail)"; exit 1; }
for m in $muts; do
  e=$(verify "$m")
  if [ -n "$e" ] && [ "$e" != "0" ] && [ "$e" != "99" ]; then
    echo "mutation $m: rejected as expected ($(grep -m1 -E 'assertion violated|invalid end' "pan$m.txt" | sed 's/^ *//'))"
  else
    echo "mutation $m: NOT rejected - the check does not bite"; fail=1
  fi
done
exit $fail
