#!/usr/bin/env bash
# One GPU visit (issue 11): where qec-realtime's MWPM tail comes from on the GPU
# machine's CPUs. The per-shot decode times of MWPM on d = 13 residuals
# (bench_mwpm --per-shot) alone, beside spinning threads (the pipeline's
# pollers), and on 12 threads at once as qec-realtime's workers run; then
# qec-realtime itself at d = 13 fast, 100k requests/s, for its MWPM stage. Pack here:
#   cmake --build build-gpu --target qec-realtime bench_mwpm
#   CARRY=.gpucarry-m BINS="src/realtime_app/qec-realtime bench/mwpm/bench_mwpm" scripts/gpu-pack.sh
#   cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 .gpucarry-m/
# and .gpucarry-m/d13/: circuit.dem, shots.b8, obs.01 (the raw shots) and d13res.{dem,b8} (their
# residuals after the d = 13 fast model, b8), d13raw.{dem,b8} (the raw shots again).
# PASSES (5), RT (1: run qec-realtime too).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
C=${CARRY:-.gpucarry-m}
open_pack "$C" /tmp/mt
lscpu -e=CPU,CORE,SOCKET,NODE
lscpu | grep -E "Thread|Core|Socket|MHz|L2|L3"
grep -o -w -E "waitpkg|hypervisor" /proc/cpuinfo | sort | uniq -c
# The CPU sharing a core with CPU 3 (its hyperthread sibling), if any.
SIB=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '{c[$1]=$2} END {for (i in c) if (i != 3 && c[i] == c[3]) print i}' | head -1)
echo "sibling of CPU 3: ${SIB:-none}"
D=$C/d13
P=${PASSES:-5}
B=/tmp/mt/bench_mwpm
$B --per-shot "$P" --cpus 3 "$D" d13res d13raw
$B --per-shot "$P" --spinners 1 --cpus 3,${SIB:-4} "$D" d13res | tail -1
$B --per-shot "$P" --threads 12 --cpus 3,4,5,6,7,8,9,10,11,12,13,14 "$D" d13res | tail -1
$B --per-shot "$P" --threads 12 --spinners 3 --cpus 3,4,5,6,7,8,9,10,11,12,13,14,1,2,15 "$D" d13res | tail -1
$B --per-shot "$P" --threads 6 --cpus 3,4,5,6,7,8 "$D" d13res | tail -1
if [ "${RT:-1}" = 1 ]; then
  mkdir -p /tmp/plans
  for w in 12 8; do
    echo "== qec-realtime d13-fast, $w workers, 100k/s, bits"
    /tmp/mt/qec-realtime --preset d13-fast --mode hybrid --dem "$D/circuit.dem" --in "$D/shots.b8" --in_format b8 \
      --obs_in "$D/obs.01" --duration_s 2 --interval_us 10 --workers $w --pin 1 --plan_dir /tmp/plans \
      --compare_mwpm 0 --payload bits > "$OUT/rt_w$w.log" 2>&1
    grep -v -E "^progress|^ *\[" "$OUT/rt_w$w.log" | head -45
  done
fi
