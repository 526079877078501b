#!/usr/bin/env bash
# One visit to a GPU machine for the pipeline (issues 4 and 15): the GPU test,
# compute-sanitizer (memcheck, racecheck) on it, and the benchmark.
# Build here first (no GPU needed), then either carry the build folder
#   scripts/gpu-build.sh          -> build-gpu/ (Release, sm_90)
# or, lighter, a pack of the binaries this script needs:
#   BUILD=build-gpu CARRY=.gpucarry-pl scripts/gpu-run-pipeline.sh --pack
# and on the GPU machine, with .gpucarry-pl carried:
#   BUILD=.gpucarry-pl scripts/gpu-run-pipeline.sh
# Results go to $OUT (default ./gpu-out). Binaries run directly (not through
# ctest). Knobs: BENCH_REQUESTS (default 200000 per row), BENCH_CPUS
# (dispatcher,consumer,worker_base; default 2,3,4), BENCH_ARGS (more
# bench_pipeline options, e.g. "--modes gpu_cpu,gpu_only --intervals 30,10,0"),
# BENCH_MAILBOX=1 (the rows again with --stage mailbox), BENCH_PRELAUNCH=1 (again with
# --stage prelaunch: graphs pre-launched behind a gate), SOAK (requests of a
# flat-out GPU+CPU 2 KiB soak row, default 0 = none), SCALE_SAN (request scale
# under compute-sanitizer), STEPS (default "test sanitize bench").
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --pack ]; then # here: the light pack (scripts/gpu-pack.sh with these binaries)
  BINS="tests/test_pipeline_gpu bench/bench_pipeline tests/test_pipeline tests/test_host_workers" CARRY=${CARRY:-.gpucarry-pl} exec scripts/gpu-pack.sh
fi
source scripts/gpu-common.sh
BIN=$B/tests BBIN=$B/bench
if ls "$B"/*.xz > /dev/null 2>&1; then # a pack: unpack it
  unpack_xz "$B" /tmp/plbin
  BIN=/tmp/plbin BBIN=/tmp/plbin
fi
SCALE_SAN=${SCALE_SAN:-0.01}
STEPS=${STEPS:-test sanitize bench}
has() { [[ " $STEPS " == *" $1 "* ]]; }
machine_info > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if has test; then
  run test_pipeline_gpu "$BIN/test_pipeline_gpu"
  grep -E "^pipeline|floor|PASSED|FAILED" "$OUT/test_pipeline_gpu.log"
  if [ -x "$BIN/test_pipeline" ]; then
    for t in test_pipeline test_host_workers test_pipeline_stress; do run "$t" "$BIN/$t"; done
    grep -h "^stress" "$OUT/test_pipeline_stress.log"
  fi
fi

if has sanitize; then
  if command -v compute-sanitizer >/dev/null; then
    for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
      STEP_TIMEOUT=${SAN_TIMEOUT:-300} run "pipeline_sanitizer_$tool" env CUDAQ_TEST_SCALE="$SCALE_SAN" \
        compute-sanitizer --tool "$tool" --error-exitcode 1 "$BIN/test_pipeline_gpu"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/pipeline_sanitizer_$tool.log" | tail -3
    done
  else
    echo "compute-sanitizer: not found on this machine"; fails=$((fails + 1))
  fi
fi

if has bench; then
  # shellcheck disable=SC2086
  STEP_TIMEOUT=${BENCH_TIMEOUT:-480} run bench_pipeline "$BBIN/bench_pipeline" \
    --requests "${BENCH_REQUESTS:-200000}" --cpus "${BENCH_CPUS:-2,3,4}" --workers "${BENCH_WORKERS:-8}" \
    ${BENCH_ARGS:-}
  cat "$OUT/bench_pipeline.log"
  if [ "${BENCH_MAILBOX:-0}" = 1 ]; then
    # shellcheck disable=SC2086
    STEP_TIMEOUT=${BENCH_TIMEOUT:-480} run bench_pipeline_mailbox "$BBIN/bench_pipeline" \
      --requests "${BENCH_REQUESTS:-200000}" --cpus "${BENCH_CPUS:-2,3,4}" --workers "${BENCH_WORKERS:-8}" \
      ${BENCH_ARGS:-} --stage mailbox
    grep -v "^floor" "$OUT/bench_pipeline_mailbox.log"
  fi
  if [ "${BENCH_PRELAUNCH:-0}" = 1 ]; then
    # shellcheck disable=SC2086
    STEP_TIMEOUT=${BENCH_TIMEOUT:-480} run bench_pipeline_prelaunch "$BBIN/bench_pipeline" \
      --requests "${BENCH_REQUESTS:-200000}" --cpus "${BENCH_CPUS:-2,3,4}" --workers "${BENCH_WORKERS:-8}" \
      ${BENCH_ARGS:-} --stage prelaunch
    grep -v "^floor" "$OUT/bench_pipeline_prelaunch.log"
  fi
  if [ "${SOAK:-0}" -gt 0 ]; then
    STEP_TIMEOUT=${SOAK_TIMEOUT:-400} run bench_pipeline_soak "$BBIN/bench_pipeline" \
      --requests "$SOAK" --cpus "${BENCH_CPUS:-2,3,4}" --workers "${BENCH_WORKERS:-8}" \
      --modes gpu_cpu --payloads 2048 --intervals 0
    cat "$OUT/bench_pipeline_soak.log"
  fi
fi

echo "gpu-run-pipeline: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
