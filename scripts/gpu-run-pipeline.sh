#!/usr/bin/env bash
# One visit to a GPU machine for the pipeline (issue 4): the GPU test,
# compute-sanitizer (memcheck, racecheck) on it, and the benchmark.
# Build here first (no GPU needed):
#   scripts/gpu-build.sh          -> build-gpu/ (Release, sm_90)
# then run this script on the GPU machine from the repository root with
# build-gpu carried along. Results go to $OUT (default ./gpu-out).
# Binaries run directly (not through ctest). Knobs: BENCH_REQUESTS
# (default 200000 per row), BENCH_CPUS (dispatcher,consumer,worker_base;
# default 2,3,4), SCALE_SAN (request scale under compute-sanitizer).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
SCALE_SAN=${SCALE_SAN:-0.01}
{
  machine_info
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

run test_pipeline_gpu "$B/tests/test_pipeline_gpu"
grep -E "^pipeline|floor|PASSED|FAILED" "$OUT/test_pipeline_gpu.log"
for t in test_pipeline test_host_workers test_pipeline_stress; do run "$t" "$B/tests/$t"; done
grep -h "^stress" "$OUT/test_pipeline_stress.log"

if command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    STEP_TIMEOUT=${SAN_TIMEOUT:-300} run "pipeline_sanitizer_$tool" env CUDAQ_TEST_SCALE="$SCALE_SAN" \
      compute-sanitizer --tool "$tool" --error-exitcode 1 "$B/tests/test_pipeline_gpu"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/pipeline_sanitizer_$tool.log" | tail -3
  done
else
  echo "compute-sanitizer: not found on this machine"; fails=$((fails + 1))
fi

STEP_TIMEOUT=${BENCH_TIMEOUT:-480} run bench_pipeline "$B/bench/bench_pipeline" \
  --requests "${BENCH_REQUESTS:-200000}" --cpus "${BENCH_CPUS:-2,3,4}" --workers "${BENCH_WORKERS:-8}"
cat "$OUT/bench_pipeline.log"

echo "gpu-run-pipeline: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
