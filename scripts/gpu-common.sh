# Sourced by scripts/gpu-run*.sh and gpu-train.sh (not run on its own): where
# the build and the logs are, the library path, run(), which logs one step and
# counts it, machine_info, and install_wheels for the Python packages carried
# in .whl/.
# Set STEP_TIMEOUT_DEFAULT before sourcing to change the per-step limit.
OUT=${OUT:-$PWD/gpu-out}
B=${BUILD:-build-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/src:$PWD/$B/libs:${LD_LIBRARY_PATH:-}
export PATH=$PATH:/usr/local/cuda/bin
fails=0 passes=0
run() { # run NAME CMD... : logs to $OUT/NAME.log, counts pass/fail
  local name=$1; shift
  echo "== $name: $*"
  if timeout -k 10 "${STEP_TIMEOUT:-${STEP_TIMEOUT_DEFAULT:-240}}" "$@" > "$OUT/$name.log" 2>&1; then
    passes=$((passes + 1)); echo "   ok"
  else
    local rc=$?; fails=$((fails + 1)); echo "   FAILED (rc $rc)"; tail -30 "$OUT/$name.log"
  fi
}
machine_info() { # the machine and the build, for a log header
  date -u; echo "build of commit $(cat "$B/commit.txt" 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
}
install_wheels() { # the carried wheels (.whl/: stim, PyMatching) into /tmp/site, on PYTHONPATH
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
}
