#!/usr/bin/env bash
# One visit to a GPU machine: GPU tests, compute-sanitizer, benchmarks.
# Build here first (same nvcc as the GPU machine, sm_90):
#   scripts/gpu-build.sh          -> build-gpu/ (Release) with the libraries it needs
# then run this script on the GPU machine from the repository root with
# build-gpu carried along. Results go to $OUT (default ./gpu-out).
# Binaries run directly (not through ctest), since the build folder's
# absolute paths differ there.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
SCALE_SAN=${SCALE_SAN:-0.002}
PARTS=${PARTS:-dispatch pipeline onnx} # what this visit runs (each part's script: scripts/gpu-run-PART.sh)
# A light pack (scripts/gpu-pack.sh with BINS=..., laid out as tests/, bench/,
# libs/): its NAME.xz binaries are unpacked in place; binaries it lacks are
# skipped with a note.
for f in "$B"/tests/*.xz "$B"/bench/*.xz "$B"/tests/nn/*.xz "$B"/bench/nn/*.xz; do
  [ -e "$f" ] && [ ! -e "${f%.xz}" ] && xz -dkc "$f" > "${f%.xz}" && chmod +x "${f%.xz}"
done
[ -e "$B/nn-ref.tar.xz" ] && [ ! -d "$B/nn-ref" ] && tar xJf "$B/nn-ref.tar.xz" -C "$B"
have() { [ -x "$B/$1" ] || { echo "== $1: not in this build, skipped"; return 1; }; }
{
  machine_info
  which compute-sanitizer || ls /usr/local/cuda*/bin | head -50
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [[ " $PARTS " == *" dispatch "* ]]; then
# Smoke first: if the basic path is broken, stop here and save the time.
run smoke env CUDAQ_TEST_FILTER="${SMOKE_FILTER:-test_regular_all*}" CUDAQ_TEST_SCALE=0.05 "$B/tests/test_gpu_dispatch"
cat "$OUT/smoke.log"
if [ "$fails" -ne 0 ] && [ -z "${NO_SMOKE_STOP:-}" ]; then echo "gpu-run: smoke test failed, stopping"; exit 1; fi
run test_gpu_dispatch "$B/tests/test_gpu_dispatch"
tail -3 "$OUT/test_gpu_dispatch.log"
run test_graph_dispatch "$B/tests/test_graph_dispatch"
tail -3 "$OUT/test_graph_dispatch.log"
grep -h "graph launch:\|graph pre-launch" "$OUT/test_graph_dispatch.log"
for t in test_wire test_api test_host_slot test_host_dispatch test_host_stress; do have "tests/$t" && run "$t" "$B/tests/$t"; done

# DISPATCH_BENCH_ARGS: e.g. "--ab 3" (interleaved A/B rounds of the dispatchers' switches)
run bench_gpu_dispatch "$B/bench/bench_gpu_dispatch" --requests "${BENCH_REQUESTS:-200000}" --cpu 2 ${DISPATCH_BENCH_ARGS:-}
cat "$OUT/bench_gpu_dispatch.log"
if have bench/bench_host_dispatch; then
  run bench_host_dispatch "$B/bench/bench_host_dispatch" --requests 500000 --cpus 2,4
  cat "$OUT/bench_host_dispatch.log"
fi
if command -v compute-sanitizer >/dev/null; then
  # memcheck: API errors are not reported, since the wiring-error tests provoke
  # them on purpose (every API result is checked by the tests themselves).
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    STEP_TIMEOUT=${SAN_TIMEOUT:-300} run "sanitizer_$tool" env CUDAQ_TEST_SCALE="$SCALE_SAN" CUDAQ_TEST_SLOW=1 compute-sanitizer --tool "$tool" $( [ "$tool" = memcheck ] && echo --report-api-errors no ) \
      --error-exitcode 1 "$B/tests/test_gpu_dispatch"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer_$tool.log" | tail -3
    STEP_TIMEOUT=${SAN_TIMEOUT:-300} run "sanitizer_graph_$tool" env CUDAQ_TEST_SCALE="$SCALE_SAN" CUDAQ_TEST_SLOW=1 \
      CUDAQ_TEST_SKIP="$([ "$tool" = racecheck ] && echo "$GRAPH_RACECHECK_SKIP")" compute-sanitizer --tool "$tool" \
      $( [ "$tool" = memcheck ] && echo --report-api-errors no ) --error-exitcode 1 "$B/tests/test_graph_dispatch"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer_graph_$tool.log" | tail -3
  done
else
  echo "compute-sanitizer: not found on this machine"; fails=$((fails + 1))
fi
fi # dispatch

# The other parts' GPU tests, sanitizer runs and benchmarks; each script
# prints a last line "PART: N passed, M failed".
for part in $PARTS; do
  [ "$part" = dispatch ] && continue
  if [ -x "scripts/gpu-run-$part.sh" ]; then
    echo "== part $part"
    OUT="$OUT/$part" BUILD="$B" "scripts/gpu-run-$part.sh" 2>&1 | tee "$OUT/part-$part.log"
    line=$(tail -1 "$OUT/part-$part.log")
    p=$(sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/p' <<<"$line")
    f=$(sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/p' <<<"$line")
    passes=$((passes + ${p:-0})); fails=$((fails + ${f:-1}))
  else
    echo "== part $part: no scripts/gpu-run-$part.sh"
  fi
done

echo "gpu-run: $passes passed, $fails failed"
