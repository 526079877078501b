#!/usr/bin/env bash
# One GPU visit for the Python package's GPU engine (issue 13): the package's
# library built here with CUDA for sm_90,
#   .venv/bin/pip wheel . --no-build-isolation --no-deps -w build-pywheel \
#     -C cmake.define.CUDAQ_ENABLE_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
#     -C build-dir=build-pywheel/tree
#   unzip -p build-pywheel/*.whl cudaq_realtime/libcudaq_realtime_py.so | xz > build-pywheel/lib.so.xz
# is loaded on the GPU machine by the package's sources (python/cudaq_realtime,
# CUDAQ_REALTIME_LIBRARY, the repository's models/ as CUDAQ_REALTIME_MODELS)
# beside the carried wheels of .whl/ (stim, PyMatching, pytest), and
# python/tests/test_hybrid_onnx.py runs there, where test_hybrid_gpu compares
# HybridDecoder(device="gpu") with the CPU executor. Carry build-pywheel/lib.so.xz
# (the whole wheel, with its models, is over the carry limit) and .whl; results in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh
install_wheels
# The package's library loads with ctypes (no Python ABI): no install needed.
python3 -c "import lzma; open('/tmp/libcudaq_realtime_py.so', 'wb').write(lzma.open('build-pywheel/lib.so.xz').read())"
export CUDAQ_REALTIME_LIBRARY=/tmp/libcudaq_realtime_py.so CUDAQ_REALTIME_MODELS=$PWD/models
export PYTHONPATH=$PWD/python:$PYTHONPATH
# The carried pytest, without the GPU machine's own plugins (its pytest-timeout
# needs a newer pytest than the one carried).
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
cudnn_path python3
machine_info > "$OUT/machine.txt" 2>&1
STEP_TIMEOUT=${STEP_TIMEOUT:-300} run py_hybrid python3 -m pytest -q -p no:cacheprovider -rs \
  python/tests/test_hybrid_onnx.py
tail -5 "$OUT/py_hybrid.log"
echo "gpu-run-python: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
