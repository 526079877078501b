#!/usr/bin/env bash
# The test command: installs what it needs, builds, and runs every test that
# runs without a GPU:
#   1. default build (CUDA parts too when nvcc is present): all ctest tests;
#      GPU tests skip (exit 77) without a device
#   2. ASan + UBSan build: all tests
#   3. TSan build (clang): the multi-threaded tests
#   4. libFuzzer over the slot parser and the DEM parser + decoder, bounded
#      (FUZZ_SECONDS each, default 60)
#   5. install, then build consumers (tests/install_consumer, the stand-alone
#      examples/consumer as its README says) with find_package and with
#      pkg-config, and run them without LD_LIBRARY_PATH
#   6. the Python package (pip install . into the venv) and its pytest suite
# Long stress and soak runs are separate: see README ("Stress, soak, fuzz").
# CUDAQ_LONG_TESTS=1: the tests at full volume (hours on a 2-core VM; CI's
# volumes fit 30 min there: CMake option CUDAQ_LONG_TESTS).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=$(nproc)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
LONG=-DCUDAQ_LONG_TESTS=$([ "${CUDAQ_LONG_TESTS:-0}" = 1 ] && echo ON || echo OFF)
stage() { echo "== $* ($(( SECONDS / 60 )) min $(( SECONDS % 60 )) s since the start)"; }
scripts/install-deps.sh
scripts/venv.sh   # stim + PyMatching for the MWPM agreement tests (pinned, tools/requirements.txt)

passed=0 failed=0 skipped=0
tally() { # parses ctest's closing line (and its list of skipped tests) from $1
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$1" | tail -1)
  local f t s; f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  t=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  s=$(grep -cE "^\s+[0-9]+ - .*\(Skipped\)" "$1" || true)
  passed=$((passed + t - f - s)); failed=$((failed + f)); skipped=$((skipped + s))
}
run_ctest() { # run_ctest BUILD_DIR [ctest args...]
  local dir=$1; shift
  local log; log=$(mktemp)
  ( cd "$dir" && ctest --output-on-failure -j"$JOBS" "$@" ) 2>&1 | tee "$log" || true
  tally "$log"; rm -f "$log"
}

stage "1. default build"
cmake -S . -B build -G Ninja "$LONG" >/dev/null
cmake --build build -j"$JOBS"
run_ctest build

stage "2. ASan + UBSan build"
cmake -S . -B build-asan -G Ninja "$LONG" -DCUDAQ_ENABLE_CUDA=OFF -DCUDAQ_SANITIZE=address \
  -DCMAKE_BUILD_TYPE=Debug -DCUDAQ_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$JOBS"
run_ctest build-asan

stage "3. TSan build (multi-threaded tests)"
cmake -S . -B build-tsan -G Ninja "$LONG" -DCUDAQ_ENABLE_CUDA=OFF -DCUDAQ_SANITIZE=thread \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCUDAQ_BUILD_BENCH=OFF -DCUDAQ_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$JOBS"
run_ctest build-tsan -L mt

stage "4. libFuzzer: slot parser, DEM parser/decoder, ONNX loader, ${FUZZ_SECONDS} s each"
cmake -S . -B build-fuzz -G Ninja -DCUDAQ_ENABLE_CUDA=OFF -DCUDAQ_BUILD_FUZZERS=ON \
  -DCUDAQ_SANITIZE=address -DCUDAQ_BUILD_TESTS=OFF -DCUDAQ_BUILD_BENCH=OFF \
  -DCUDAQ_BUILD_EXAMPLES=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$JOBS" --target fuzz_slot fuzz_dem fuzz_onnx fuzz_udp
# The fuzzers run $JOBS at a time (each is one process): fuzz_start starts one
# in the background, fuzz_wait waits for all and counts each one's outcome.
fuzz_names=() fuzz_pids=() fuzz_dirs=()
fuzz_start() { # fuzz_start NAME SEED_DIR [libFuzzer options]
  local name=$1 seeds=$2; shift 2
  local corpus; corpus=$(mktemp -d)
  [ -d "$seeds" ] && cp "$seeds"/* "$corpus"/ 2>/dev/null
  ./build-fuzz/fuzz/"$name" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 "$@" \
    "$corpus" > "build-fuzz/$name.log" 2>&1 &
  fuzz_names+=("$name") fuzz_pids+=($!) fuzz_dirs+=("$corpus")
  [ "${#fuzz_pids[@]}" -lt "$JOBS" ] || fuzz_wait
}
fuzz_wait() {
  local i name
  for i in "${!fuzz_pids[@]}"; do
    name=${fuzz_names[$i]}
    if wait "${fuzz_pids[$i]}"; then
      grep -E "^Done" "build-fuzz/$name.log" | tail -1
      echo "$name: no crash"; passed=$((passed + 1))
    else
      tail -40 "build-fuzz/$name.log"; echo "$name: FAILED"; failed=$((failed + 1))
    fi
    rm -rf "${fuzz_dirs[$i]}"
  done
  fuzz_names=() fuzz_pids=() fuzz_dirs=()
}
fuzz_start fuzz_slot fuzz/corpus/slot -max_len=1100
fuzz_start fuzz_dem fuzz/corpus/dem -max_len=4096
fuzz_start fuzz_udp fuzz/corpus/udp -max_len=1100
fuzz_start fuzz_onnx fuzz/corpus/onnx -max_len=16384
fuzz_wait

stage "5. install; consumers built with find_package and with pkg-config, run without LD_LIBRARY_PATH"
prefix=$(mktemp -d) ex=$(mktemp -d)
cmake --install build --prefix "$prefix" >/dev/null
install_check() { # install_check NAME COMMAND...: one test, passed or failed
  local name=$1; shift
  if "$@"; then echo "install: $name: ok"; passed=$((passed + 1))
  else echo "install: $name: FAILED"; failed=$((failed + 1)); fi
}
# tests/install_consumer: the smallest program, both routes.
install_check "tests/install_consumer, find_package and pkg-config" env -u LD_LIBRARY_PATH bash -ec '
  cmake -S tests/install_consumer -B build-consumer -G Ninja -DCMAKE_PREFIX_PATH="$1" >/dev/null
  cmake --build build-consumer >/dev/null
  ./build-consumer/consumer_cmake
  cc -std=c11 tests/install_consumer/main.c -o build-consumer/consumer_pc \
    $(PKG_CONFIG_PATH="$1/lib/pkgconfig" pkg-config --cflags --libs cudaq-realtime)
  ./build-consumer/consumer_pc' _ "$prefix"
# examples/consumer: the stand-alone example, copied out and built as its README says.
cp -r examples/consumer "$ex/my-decoder"
install_check "examples/consumer with CMake (find_package)" env -u LD_LIBRARY_PATH bash -ec '
  cd "$2/my-decoder"
  cmake -S . -B build -DCMAKE_PREFIX_PATH="$1" >/dev/null
  cmake --build build >/dev/null
  ./build/mwpm_dispatch' _ "$prefix" "$ex"
install_check "examples/consumer with make (pkg-config)" env -u LD_LIBRARY_PATH bash -ec '
  cd "$2/my-decoder"
  PKG_CONFIG_PATH="$1/lib/pkgconfig" make >/dev/null
  ./mwpm_dispatch' _ "$prefix" "$ex"
pc_libs=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --libs cudaq-realtime || true)
pc_static=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --static --libs cudaq-realtime || true)
echo "pkg-config --libs: $pc_libs"; echo "pkg-config --static --libs: $pc_static"
install_check "pkg-config: -lm in --libs, CUDA's lib64 not lib" bash -c '
  grep -qE "(^| )-lm( |$)" <<<"$1" && ! grep -qE "cuda[^ ]*/lib/?( |$)" <<<"$1 $2"' _ "$pc_libs" "$pc_static"
install_check "installed qec-decode runs" env -u LD_LIBRARY_PATH "$prefix/bin/qec-decode" --version
rm -rf "$prefix" "$ex"

stage "6. Python package: pip install . into the venv, pytest python/tests"
# The package's own CMake build (build-py/, CPU only); scikit-build-core is pinned in the venv.
if .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps .; then
  log=$(mktemp)
  rc=0; ( cd python/tests && ../../.venv/bin/python -m pytest -q -p no:cacheprovider ) 2>&1 | tee "$log" || rc=$?
  line=$(grep -E "^[0-9]+ (passed|failed|skipped)" "$log" | tail -1 || true)
  count() { grep -oE "[0-9]+ $1" <<<"$line" | grep -oE "[0-9]+" || echo 0; }
  passed=$((passed + $(count passed))); failed=$((failed + $(count failed))); skipped=$((skipped + $(count skipped)))
  if [ "$rc" -ne 0 ] && [ "$(count failed)" -eq 0 ]; then
    echo "pytest: FAILED (exit $rc)"; failed=$((failed + 1))
  fi
  rm -f "$log"
else
  echo "python package: pip install . FAILED"; failed=$((failed + 1))
fi

stage "summary"
echo "all: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
