#!/usr/bin/env bash
# One GPU visit for qec-realtime (issue 11): the GPU-mode tests (hybrid and
# passthrough answers identical to the offline CPU evaluation), compute-
# sanitizer memcheck and racecheck on short GPU runs, an Nsight Systems NVTX
# summary where nsys exists, and the benchmark matrix: d = 7, 13 x {hybrid
# FP16, passthrough} x arrivals every 10 us, 30 us and flat out, plus d = 21
# passthrough, each with its JSON report in $OUT; and the UDP service (issue 14)
# on the GPU machine's 16-core host (bench_udp: latency rows and a 10^6-request
# run at 100k/s), which needs no GPU but more cores than the development VM.
# STEPS=dispatch adds the dispatch and pipeline GPU tests (test_gpu_dispatch,
# test_graph_dispatch, test_pipeline_gpu; test_api), test_gpu_dispatch under compute-sanitizer
# memcheck, racecheck and synccheck and test_graph_dispatch under memcheck and racecheck,
# at a reduced scale (SCALE_SAN; SAN_PIPELINE=1: test_pipeline_gpu
# under memcheck and racecheck too), and bench_gpu_dispatch (BENCH_PIPELINE=1: bench_pipeline),
# from the packed binaries.
# Prepare here (the build folder is too large to carry whole):
#   scripts/gpu-build.sh && scripts/gpu-pack.sh      -> .gpucarry/
# then run with .gpucarry and .whl (stim, PyMatching wheels) carried, or with the
# shots made here instead (no wheels needed there), e.g. for the bench step:
#   for a in "d7 7_z 0.003 20000 21" "d13 13_z 0.003 5000 31"; do set -- $a
#     .venv/bin/python tools/predecoder/reference_eval.py shots --manifest models/manifest.json \
#       --model models/predecoder_d$2.onnx --p $3 --shots $4 --seed $5 --out .gpucarry/shots/$1; done
# STEPS=sanitize_all: every GPU test binary under memcheck, racecheck and synccheck (SAN_TOOLS).
# STEPS=hybrid: d = 7 and 13 hybrid at one request every 30 us, 10 us and flat out.
# STEPS=fast: the fast models (models/predecoder_d*_fast.onnx): first test_nn_gpu --shipped-tail on
# them (when the pack has it), the hybrid GPU test with the d = 5 fast model and memcheck on a short
# run; then d = 13 and 7 hybrid at 30 us, 10 us and flat out, d = 13 with 12 workers (also with --prelaunch 2,
# planned for throughput and for latency), bit-packed, at
# one request every 2 ms (FP16 and FP32), and bench_nn_gpu on the fast models when the pack has it.
# STEPS=weighted: weighted matching in the hybrid mode (the default for a model with edge logits)
# against --predecoder_weights off, side by side: d = 13 fast with 12 workers, bit-packed, one request
# every 10 us and every 2 ms; d = 13 accurate at 30 us and 2 ms; d = 7 fast at 10 us.
# STEPS=corr: d = 7 and 13 hybrid at 30 and 10 us with --enable_correlations and without, and
# MWPM alone on the CPU workers (--mode cpu --model none), correlated and plain, at 100 us.
# The GPU rows run qec-realtime's defaults unless they say otherwise: since 946299a graphs are
# pre-launched (--prelaunch 2, the ingest kernel waiting at the gate); "launched on arrival" rows
# pass --prelaunch 0.
# STEPS=prelaunch: d = 7 hybrid and passthrough at one request every 30 and 10 us, d = 13 hybrid
# at 30 us, launched on arrival against --prelaunch 1 (the pipeline's gpu_prelaunch), interleaved
# (PL_ROUNDS rounds, default 1).
# STEPS="test sanitize nsys bench lowload udp dispatch sanitize_all" (default: the first six); DURATION (s per bench run,
# default 2); WORKERS (default 8). Logs and reports go to $OUT (default gpu-out/); the
# device tool returns few files, so run it as
#   OUT=/tmp/rt-out scripts/gpu-run-realtime.sh; tar czf "$OUT/rt.tgz" -C /tmp/rt-out .
set -uo pipefail
cd "$(dirname "$0")/.."
C=${CARRY:-.gpucarry}
BUILD=$C source scripts/gpu-common.sh
mkdir -p /tmp/plans
unpack_xz "$C" /tmp/rtbin
install_wheels
RT=/tmp/rtbin/qec-realtime QD=/tmp/rtbin/qec-decode BENCHNN=/tmp/rtbin/bench_nn_gpu
STEPS=${STEPS:-test sanitize nsys bench lowload udp}
DURATION=${DURATION:-2} WORKERS=${WORKERS:-8}
machine_info 2>&1 | tee "$OUT/machine.txt"
has() { [[ " $STEPS " == *" $1 "* ]]; }
shots() { # shots NAME MODEL P N SEED -> /tmp/rt-NAME/{circuit.dem,shots.b8,obs.01}
  # (copied from the pack's shots/NAME/ when it has them: made here by
  # SHOTS_ONLY=1, so the visit needs no stim wheel)
  if [ -d "$C/shots/$1" ]; then rm -rf "/tmp/rt-$1" && cp -r "$C/shots/$1" "/tmp/rt-$1" && return 0; fi
  python3 tools/predecoder/reference_eval.py shots --manifest models/manifest.json --model "$2" \
    --p "$3" --shots "$4" --seed "$5" --out "/tmp/rt-$1" > /dev/null
}
shots d5 models/predecoder_d5_z.onnx 0.003 10000 11
if has test; then
  for c in gpu_hybrid gpu_passthrough; do
    STEP_TIMEOUT=300 run "test_$c" sh tests/realtime_app/test_realtime_app.sh "$RT" "$QD" /tmp/rt-d5 \
      "/tmp/rt-work-$c" models "$c"
    tail -4 "$OUT/test_$c.log"
  done
fi
D5="--dem /tmp/rt-d5/circuit.dem --in /tmp/rt-d5/shots.b8 --in_format b8 --obs_in /tmp/rt-d5/obs.01"
if has sanitize; then # short runs: the tools slow every kernel 10-100x
  for tool in memcheck racecheck; do
    for mode in passthrough hybrid; do
      m=""; [ $mode = hybrid ] && m="--model models/predecoder_d5_z.onnx"
      STEP_TIMEOUT=${SAN_TIMEOUT:-60} run "sanitize_${tool}_$mode" compute-sanitizer --tool $tool \
        --error-exitcode 1 "$RT" $D5 --mode $mode $m --requests "${SAN_REQUESTS:-20}" --workers 1 \
        --timeout_ms 50000 --progress_s 0
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^requests:" "$OUT/sanitize_${tool}_$mode.log"
    done
  done
fi
if has nsys && command -v nsys > /dev/null; then
  run nsys_d5 nsys profile -o /tmp/rt-nsys --force-overwrite true --trace=cuda,nvtx \
    "$RT" $D5 --mode hybrid --model models/predecoder_d5_z.onnx --requests 2000 --interval_us 30
  run nsys_stats nsys stats --report nvtx_sum,cuda_gpu_kern_sum --format csv /tmp/rt-nsys.nsys-rep
  head -30 "$OUT/nsys_stats.log"
fi
mkdir -p "$OUT/bench"
bench() { # bench PRESET MODE INTERVAL [args...]
  local pr=$1 mode=$2 iv=$3; shift 3
  local name="$pr-$mode-$([ "$iv" = 0 ] && echo flat || echo "${iv}us")${SFX:-}"
  local plan=""; [ "$mode" = hybrid ] && plan="--plan_dir /tmp/plans" # qec-realtime: GPU engine flags are hybrid only
  # shellcheck disable=SC2086
  STEP_TIMEOUT=120 run "bench_$name" "$RT" --preset "$pr" --mode "$mode" \
    --dem "/tmp/rt-$pr/circuit.dem" --in "/tmp/rt-$pr/shots.b8" --in_format b8 \
    --obs_in "/tmp/rt-$pr/obs.01" --duration_s "$DURATION" --interval_us "$iv" \
    --workers "$WORKERS" --pin 1 $plan --progress_s 0 \
    --json "$OUT/bench/$name.json" "$@"
  grep -E "Throughput|p50|p99|^requests:|^logical|MWPM alone|^stage|^dispatch \+ GPU split|^GPU" "$OUT/bench_$name.log"
}
if has bench || has lowload || has prelaunch || has hybrid || has corr || has fast || has weighted; then
  shots d7 models/predecoder_d7_z.onnx 0.003 20000 21
  shots d13 models/predecoder_d13_z.onnx 0.003 10000 31
  shots d21 models/predecoder_d21_x.onnx 0.003 2000 41
fi
if has bench; then
  for pr in d7 d13; do
    for mode in hybrid passthrough; do
      for iv in 10 30 0; do bench $pr $mode $iv; done
    done
  done
  for iv in 10 30 0; do bench d21 passthrough $iv; done
  bench d7 cpu 10 --model none
fi
if has hybrid; then # the hybrid mode alone at d = 7 and 13 (re-measuring after an engine change)
  for pr in d7 d13; do for iv in 30 10 0; do bench $pr hybrid $iv; done; done
fi
if has weighted; then # weighted matching (the network's edge logits as per-shot MWPM weights) vs off
  F13=models/predecoder_d13_z_fast.onnx
  for w in auto off; do
    SFX=-fast-w12-bits-$w WORKERS=12 bench d13 hybrid 10 --model $F13 --payload bits --predecoder_weights $w
    SFX=-fast-bits-lowload-$w bench d13 hybrid 2000 --model $F13 --payload bits --predecoder_weights $w
    SFX=-$w bench d13 hybrid 30 --predecoder_weights $w
    SFX=-lowload-$w bench d13 hybrid 2000 --predecoder_weights $w
    SFX=-fast-$w bench d7 hybrid 10 --model models/predecoder_d7_z_fast.onnx --predecoder_weights $w
  done
fi
if has corr; then # correlated matching (--enable_correlations) behind the GPU stage, and alone on the CPU
  for pr in d7 d13; do
    for iv in 30 10; do
      SFX=-corr bench $pr hybrid $iv --enable_correlations
      bench $pr hybrid $iv
    done
    SFX=-corr bench $pr cpu 100 --model none --enable_correlations
    bench $pr cpu 100 --model none
  done
fi
if has lowload; then # the hybrid mode's latency below its capacity (engine-bound, issue 12)
  bench d5 hybrid 1000
  bench d7 hybrid 1000
  bench d13 hybrid 2000
  SFX=-fp32 bench d7 hybrid 1000 --precision fp32
  SFX=-bits bench d7 hybrid 1000 --payload bits
  SFX=-bits bench d7 passthrough 10 --payload bits
fi
if has prelaunch; then # graphs pre-launched behind a gate vs launched on arrival, A/B in one visit
  for round in $(seq 1 "${PL_ROUNDS:-1}"); do
    for iv in 30 10; do
      for pl in 0 1; do
        SFX=-pl$pl-r$round bench d7 hybrid $iv --prelaunch $pl
        SFX=-pl$pl-r$round bench d7 passthrough $iv --prelaunch $pl
        [ $iv = 30 ] && SFX=-pl$pl-r$round bench d13 hybrid $iv --prelaunch $pl
      done
    done
  done
fi
if has fast; then # the fast predecoder family (models/*_fast.onnx, 4 x 32 channels) against the shipped 4 x 128
  # correctness first: GPU engine vs CPU executor on the fast models (test_nn_gpu in the pack), the
  # hybrid test's answers identical to qec-decode with the d = 5 fast model, memcheck on a short run
  cudnn_path python3
  if [ -f "$C/test_nn_gpu.xz" ]; then
    STEP_TIMEOUT=300 run nn_fast_tail /tmp/rtbin/test_nn_gpu --shipped-tail models \
      predecoder_d{5,7,9,13}_{z,x}_fast.onnx # names inside MODELS_DIR
    tail -12 "$OUT/nn_fast_tail.log"
  fi
  HYBRID_MODEL=$PWD/models/predecoder_d5_z_fast.onnx STEP_TIMEOUT=300 run test_gpu_hybrid_fast \
    sh tests/realtime_app/test_realtime_app.sh "$RT" "$QD" /tmp/rt-d5 /tmp/rt-work-fast models gpu_hybrid
  tail -4 "$OUT/test_gpu_hybrid_fast.log"
  STEP_TIMEOUT=${SAN_TIMEOUT:-90} run sanitize_memcheck_hybrid_fast compute-sanitizer --tool memcheck \
    --error-exitcode 1 "$RT" $D5 --mode hybrid --model models/predecoder_d5_z_fast.onnx \
    --requests "${SAN_REQUESTS:-20}" --workers 1 --timeout_ms 50000 --progress_s 0
  grep -E "ERROR SUMMARY|^requests:" "$OUT/sanitize_memcheck_hybrid_fast.log"
  for pr in d13 d7; do
    for iv in 30 10 0; do SFX=-fast bench $pr hybrid $iv --model "models/predecoder_${pr}_z_fast.onnx"; done
  done
  F13=models/predecoder_d13_z_fast.onnx
  SFX=-fast-w12 WORKERS=12 bench d13 hybrid 10 --model $F13
  # d = 13 at 100k requests/s: engines planned for throughput (the default) and two graphs pre-launched;
  # planned for latency beside it (nn-cluster-throughput-h200-2026-11-28.md)
  SFX=-fast-w12-pl2 WORKERS=12 bench d13 hybrid 10 --model $F13 --prelaunch 2
  SFX=-fast-w12-pl2-latency WORKERS=12 bench d13 hybrid 10 --model $F13 --prelaunch 2 --gpu_plan latency
  SFX=-fast-lowload bench d13 hybrid 2000 --model $F13
  SFX=-fast-bits bench d13 hybrid 10 --model $F13 --payload bits
  SFX=-fast-bits bench d13 hybrid 30 --model $F13 --payload bits
  SFX=-fast-fp32-lowload bench d13 hybrid 2000 --model $F13 --precision fp32
  [ -f "$C/bench_nn_gpu.xz" ] && STEP_TIMEOUT=240 run nn_fast "$BENCHNN" --iters 3000 --prec fp16 --impls auto,cudnn --plan /tmp/plans \
    models/predecoder_d{5,7,9,13}_z_fast.onnx models/predecoder_d13_z.onnx && cat "$OUT/nn_fast.log"
fi
if has dispatch; then
  STEP_TIMEOUT=120 run test_api /tmp/rtbin/test_api # its device-path branches need a GPU
  tail -3 "$OUT/test_api.log"
  for t in test_gpu_dispatch test_graph_dispatch test_pipeline_gpu; do
    STEP_TIMEOUT=240 run "$t" "/tmp/rtbin/$t"
    grep -E "PASSED|FAILED|^\[ +(OK|FAILED)|graph launch:|graph pre-launch|floor" "$OUT/$t.log" | tail -40
    tools=""; [ $t = test_gpu_dispatch ] && tools="memcheck racecheck synccheck"
    # synccheck does not support device-side launches (compute-sanitizer's known limitations):
    # every handler graph of test_graph_dispatch is launched from the GPU.
    [ $t = test_graph_dispatch ] && tools="memcheck racecheck"
    [ -n "${SAN_PIPELINE:-}" ] && [ $t = test_pipeline_gpu ] && tools="memcheck racecheck"
    for tool in $tools; do
      skip=""; [ $t = test_graph_dispatch ] && [ $tool = racecheck ] && skip="$GRAPH_RACECHECK_SKIP"
      STEP_TIMEOUT=${SAN_TIMEOUT:-120} run "${t}_$tool" env CUDAQ_TEST_SKIP="$skip" CUDAQ_TEST_SCALE="${SCALE_SAN:-0.005}" \
        CUDAQ_TEST_SLOW=1 compute-sanitizer --tool $tool $([ $tool = memcheck ] && echo --report-api-errors no) \
        --error-exitcode 1 "/tmp/rtbin/$t"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/${t}_$tool.log" | tail -3
    done
  done
  STEP_TIMEOUT=120 run bench_gpu_dispatch /tmp/rtbin/bench_gpu_dispatch --requests 200000 --cpu 2
  cat "$OUT/bench_gpu_dispatch.log"
  if [ -n "${BENCH_PIPELINE:-}" ]; then
    STEP_TIMEOUT=180 run bench_pipeline /tmp/rtbin/bench_pipeline --requests 100000 --cpus 2,3,4 --workers 8
    cat "$OUT/bench_pipeline.log"
  fi
fi
if has sanitize_all; then
  # Every GPU test binary of the suite under compute-sanitizer memcheck, racecheck and synccheck
  # (issue 15), at reduced scale: the dispatch and pipeline tests, test_api, qec-realtime hybrid
  # and passthrough, qec-decode's GPU predecoder, and test_nn_gpu on SAN_NN_FILTER's models
  # (it needs tests/nn/test_nn_gpu.xz and nn-ref/ in the pack; skipped, and counted, without).
  shots d5s models/predecoder_d5_z.onnx 0.003 "${SAN_SHOTS:-200}" 12
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    san() { # san NAME [VAR=value...] -- CMD...: CMD under $tool, env vars before it (SAN_ONLY: these NAMEs only)
      local name=$1; shift; local envs=()
      [ -n "${SAN_ONLY:-}" ] && [[ " $SAN_ONLY " != *" $name "* ]] && return 0
      while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
      STEP_TIMEOUT=${SAN_TIMEOUT:-240} run "san_${tool}_$name" env "${envs[@]}" compute-sanitizer \
        --tool "$tool" $([ "$tool" = memcheck ] && echo --report-api-errors no) --error-exitcode 1 "$@"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|^requests:|/ [0-9]+$" \
        "$OUT/san_${tool}_$name.log" | tail -3
    }
    # synccheck does not support device-side launches: test_graph_dispatch (every handler
    # graph is launched from the GPU) is left out of it.
    san test_gpu_dispatch CUDAQ_TEST_SCALE="${SCALE_SAN:-0.005}" CUDAQ_TEST_SLOW=1 -- /tmp/rtbin/test_gpu_dispatch
    [ "$tool" != synccheck ] && san test_graph_dispatch CUDAQ_TEST_SCALE="${SCALE_SAN:-0.005}" CUDAQ_TEST_SLOW=1 \
      CUDAQ_TEST_SKIP="$([ "$tool" = racecheck ] && echo "$GRAPH_RACECHECK_SKIP")" -- /tmp/rtbin/test_graph_dispatch
    san test_pipeline_gpu CUDAQ_TEST_SCALE="${SCALE_SAN_PIPELINE:-0.01}" -- /tmp/rtbin/test_pipeline_gpu
    san test_api CUDAQ_TEST_SLOW=1 -- /tmp/rtbin/test_api
    # Under racecheck the NN engine's create-time tuning (every candidate kernel, instrumented)
    # outlasts any sensible limit: the hybrid run reuses a plan tuned by a plain run first, and
    # test_nn_gpu runs on SAN_NN_FILTER_RACE's models only. qec-decode's GPU predecoder runs the
    # same engine kernels as the hybrid run, so racecheck skips it.
    plan=""
    if [ "$tool" = racecheck ] && { [ -z "${SAN_ONLY:-}" ] || [[ " $SAN_ONLY " == *" qec_realtime_hybrid "* ]]; }; then
      mkdir -p /tmp/san-plans # qec-realtime refuses a plan directory that does not exist
      STEP_TIMEOUT=120 run san_plan "$RT" $D5 --mode hybrid --model models/predecoder_d5_z.onnx \
        --requests 5 --workers 1 --plan_dir /tmp/san-plans --progress_s 0
      plan="--plan_dir /tmp/san-plans"
    fi
    for mode in passthrough hybrid; do
      m=""; [ $mode = hybrid ] && m="--model models/predecoder_d5_z.onnx $plan"
      san "qec_realtime_$mode" -- "$RT" $D5 --mode $mode $m --requests "${SAN_REQUESTS:-20}" \
        --workers 1 --timeout_ms 50000 --progress_s 0
    done
    # The fast model: its convolutions as the cluster kernel (qec-realtime plans for throughput by
    # default); racecheck cannot finish on that kernel within a visit, so it skips this run.
    [ "$tool" != racecheck ] &&
      san qec_realtime_hybrid_fast -- "$RT" $D5 --mode hybrid --model models/predecoder_d5_z_fast.onnx \
        --requests "${SAN_REQUESTS:-20}" --workers 2 --timeout_ms 50000 --progress_s 0
    # The pipeline's gate graphs (gpu_prelaunch), paced so that requests find them waiting.
    san qec_realtime_prelaunch -- "$RT" $D5 --mode passthrough --prelaunch 1 --interval_us 2000 \
      --requests "${SAN_REQUESTS:-20}" --workers 2 --timeout_ms 50000 --progress_s 0
    [ "$tool" != racecheck ] &&
      san qec_decode_gpu -- "$QD" count_mistakes --dem /tmp/rt-d5s/circuit.dem --in /tmp/rt-d5s/shots.b8 \
        --in_format b8 --obs_in /tmp/rt-d5s/obs.01 --predecoder models/predecoder_d5_z.onnx --device gpu
    # The inference as a device function inside the cooperative dispatch kernel (when packed):
    # memcheck on test_nn_device_program (both kernels); synccheck and racecheck on the bench with
    # the handler compiled in, a few calls (through the function pointer, synccheck reports barrier
    # divergence inside the called program: bench/results/nn-device-call-h200-2026-11-27.md).
    if [ "$tool" = memcheck ] && [ -x /tmp/rtbin/test_nn_device_program ]; then
      san test_nn_device_program -- /tmp/rtbin/test_nn_device_program models
    elif [ "$tool" != memcheck ] && [ -x /tmp/rtbin/bench_nn_device_call ]; then
      san bench_nn_device_call -- /tmp/rtbin/bench_nn_device_call models/predecoder_d5_z.onnx --requests 10 \
        --warmup 0 --interval 0 --stack_only --kernel inline
    fi
    nnf=${SAN_NN_FILTER:-predecoder,conv3d_tc_odd,gather,mlp_head}
    [ "$tool" = racecheck ] && nnf=${SAN_NN_FILTER_RACE:-conv3d_tc_odd}
    if [ -x /tmp/rtbin/test_nn_gpu ] && [ -d "$C/nn-ref" ]; then
      san test_nn_gpu CUDAQ_NN_TEST_FILTER="$nnf" -- /tmp/rtbin/test_nn_gpu "$C/nn-ref"
    else
      echo "san_${tool}_test_nn_gpu: test_nn_gpu or nn-ref not in the pack"; fails=$((fails + 1))
    fi
  done
fi
if has udp; then # UDP bridge + emulator on loopback: ratios to a bare ping-pong, then the rate runs
  STEP_TIMEOUT=200 run bench_udp /tmp/rtbin/bench_udp --requests 20000 --count "${UDP_COUNT:-1000000}" \
    --rate "${UDP_RATE:-100000}" --rate-slots "${UDP_SLOTS:-1024}"
  cat "$OUT/bench_udp.log"
  # the same with the server's threads on CPUs 2.. (bridge RX, dispatcher, consumer, worker)
  STEP_TIMEOUT=200 run bench_udp_pinned /tmp/rtbin/bench_udp --pin 2 --requests 20000 \
    --count "${UDP_COUNT:-1000000}" --rate "${UDP_RATE:-100000}" --rate-slots "${UDP_SLOTS:-1024}"
  cat "$OUT/bench_udp_pinned.log"
fi
ls "$OUT"/bench/*.json > /dev/null 2>&1 &&
  python3 tools/realtime/bench_table.py "$OUT"/bench/*.json | tee "$OUT/bench_table.md"
echo "gpu-run-realtime: $passes passed, $fails failed"
