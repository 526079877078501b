#!/usr/bin/env bash
# One GPU visit for the device-call path and the pipeline's 16 KiB rows
# (issue 15): the dispatch tests (device-call with each setting of the dispatcher's A/B
# switch, graph dispatch), the NN device program's test (the same dispatch loop, cooperative,
# handler inline), bench_gpu_dispatch's floors and interleaved device-call
# rounds, and (PIPE=1) bench_pipeline's 16 KiB GPU + CPU row at 1, 2 and 4
# gate blocks. Pack here first:
#   cmake --build build-gpu --target bench_gpu_dispatch test_gpu_dispatch test_graph_dispatch \
#       test_nn_device_program bench_pipeline test_pipeline_gpu
#   CARRY=.gpucarry-d BINS="tests/test_gpu_dispatch tests/test_graph_dispatch bench/bench_gpu_dispatch \
#       tests/nn/test_nn_device_program bench/bench_pipeline tests/test_pipeline_gpu" scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-d/   # test_nn_device_program needs it
# and carry .gpucarry-d (a binary left out of BINS is skipped). AB: the --call-env settings (default: the early
# clear off and on). ROUNDS, REQUESTS: the bench's rounds and requests; BENCH_EXTRA: more bench options
# (e.g. --call-header: the rows again over a ring with header completion);
# SANITIZE=1 adds compute-sanitizer memcheck, racecheck and synccheck of the dispatch tests.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-d}
unpack_xz "$C" /tmp/dab
cudnn_path python3
machine_info | tee "$OUT/machine.txt"
echo "pack of commit $(cat "$C/commit.txt")"
AB=${AB:-CUDAQ_DISPATCH_EARLY_CLEAR=0 CUDAQ_DISPATCH_EARLY_CLEAR=1}
for kv in $AB; do
  run "test_gpu_dispatch_${kv##*=}" env "$kv" CUDAQ_TEST_SCALE="${TEST_SCALE:-0.3}" /tmp/dab/test_gpu_dispatch
  tail -2 "$OUT/test_gpu_dispatch_${kv##*=}.log"
done
if [ -x /tmp/dab/test_graph_dispatch ]; then
  run test_graph_dispatch env CUDAQ_TEST_SCALE="${TEST_SCALE:-0.3}" /tmp/dab/test_graph_dispatch
  tail -2 "$OUT/test_graph_dispatch.log"
fi
if [ -x /tmp/dab/test_nn_device_program ]; then
  run nn_device_program /tmp/dab/test_nn_device_program models
  grep -E "positions|PASSED|FAILED" "$OUT/nn_device_program.log"
fi
if [ -x /tmp/dab/test_pipeline_gpu ]; then
  run test_pipeline_gpu env CUDAQ_TEST_SCALE=0.3 /tmp/dab/test_pipeline_gpu
  tail -2 "$OUT/test_pipeline_gpu.log"
fi
envs=()
for kv in $AB; do envs+=(--call-env "$kv"); done
run bench_gpu_dispatch /tmp/dab/bench_gpu_dispatch --requests "${REQUESTS:-100000}" --cpu 2 \
  --call-rounds "${ROUNDS:-3}" "${envs[@]}" --call-inline --only-call ${BENCH_EXTRA:-}
cat "$OUT/bench_gpu_dispatch.log"
if [ -n "${PIPE:-}" ] && [ -x /tmp/dab/bench_pipeline ]; then
  for r in 1 2; do
    for gb in ${GATE_BLOCKS:-1 2 4}; do
      run "pipe_r${r}_gb$gb" /tmp/dab/bench_pipeline --requests 30000 --cpus 2,3,4 --workers 8 --modes gpu_cpu \
        --payloads 2048,16384 --intervals 30,10 --stage selfgate_ring --gate_blocks "$gb"
      grep -E "end-to-end|  A |  B " "$OUT/pipe_r${r}_gb$gb.log"
    done
  done
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    run "san_$tool" env CUDAQ_TEST_SCALE=0.002 CUDAQ_TEST_SLOW=1 compute-sanitizer --tool "$tool" \
      $( [ "$tool" = memcheck ] && echo --report-api-errors no ) --error-exitcode 1 /tmp/dab/test_gpu_dispatch
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$tool.log" | tail -1
  done
fi
echo "gpu-run-dispatch-ab: $passes passed, $fails failed"
