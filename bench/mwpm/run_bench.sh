#!/usr/bin/env bash
# MWPM benchmark: our decoder against PyMatching's decode_batch, same machine,
# same shots, one thread; then our throughput with several threads.
# Surface code memory-x experiments, rounds = d, d = 5 9 13 17, p = 0.001 0.005.
#
# Usage: bench/mwpm/run_bench.sh [BUILD_DIR] [OUT.md]
#   BUILD_DIR defaults to ./build (must contain bench/mwpm/bench_mwpm);
#   OUT.md defaults to bench/results/mwpm-<date>.md.
# Env: SHOTS (20000), ROUNDS (3: alternate ours / PyMatching, keep the best),
#      THREADS (2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="${2:-$root/bench/results/mwpm-$(date -u +%F).md}"
shots="${SHOTS:-20000}" rounds="${ROUNDS:-3}" threads="${THREADS:-2}"
bench="$build/bench/mwpm/bench_mwpm"
[ -x "$bench" ] || { echo "build $bench first (ninja -C $build bench_mwpm)" >&2; exit 1; }
"$root/scripts/venv.sh"
py="$root/.venv/bin/python"
data="$build/bench-mwpm-data-$shots"
if [ ! -f "$data/manifest.txt" ]; then
  "$py" "$root/tools/mwpm_reference.py" gen --out "$data" --distances 5 9 13 17 \
    --p 0.001 0.005 --bases x --shots "$shots" --no-pymatching
fi
names=$(awk '{print $1}' "$data/manifest.txt")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  "$bench" --repeats 3 --csv 1 "$data" $names >> "$tmp/ours.csv"
  "$py" "$root/tools/mwpm_reference.py" bench --data "$data" --repeats 3 --csv >> "$tmp/pm.csv"
done
"$bench" --repeats 1 --threads "$threads" --csv 1 "$data" $names > "$tmp/threads.csv"
commit=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src include || echo "+dirty")
"$py" - "$tmp" "$out" "$commit" "$shots" "$rounds" "$threads" "$0 $*" <<'PY'
import collections, platform, subprocess, sys, datetime
tmp, out, commit, shots, rounds, threads, cmd = sys.argv[1:8]
best = collections.defaultdict(lambda: [float("inf"), float("inf"), 0.0])
for line in open(f"{tmp}/ours.csv"):
    n, _, ev, us, _, _ = line.strip().split(",")
    best[n][0] = min(best[n][0], float(us)); best[n][2] = float(ev)
for line in open(f"{tmp}/pm.csv"):
    n, _, us = line.strip().split(",")
    best[n][1] = min(best[n][1], float(us))
thr = {l.split(",")[0]: l.strip().split(",") for l in open(f"{tmp}/threads.csv")}
cpu = [l for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
       if l.startswith(("Model name", "CPU(s):"))]
import pymatching, stim
def key(n):
    _, d, p = n.split("_"); return (float(p[1:]), int(d[1:]))
rows = sorted(best, key=key)
with open(out, "w") as f:
    f.write(f"# MWPM decoder benchmark\n\n")
    f.write(f"- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n- commit: {commit}\n")
    f.write(f"- machine: {'; '.join(' '.join(c.split()) for c in cpu)}; {platform.platform()}\n")
    f.write(f"- PyMatching {pymatching.__version__} (decode_batch, one thread), stim {stim.__version__}\n")
    f.write(f"- data: stim surface_code:rotated_memory_x, rounds = d, the four noise parameters = p, "
            f"{shots} shots per point, fixed seeds\n")
    f.write(f"- method: all shots in memory, one warm-up pass; best of 3 passes; {rounds} rounds "
            f"alternating ours and PyMatching, best round kept\n")
    f.write(f"- command: `{cmd}`\n\n")
    f.write("| d | p | events/shot | ours µs/shot | PyMatching µs/shot | PyMatching / ours | "
            "ours µs/round |\n|---|---|---|---|---|---|---|\n")
    for n in rows:
        p, d = key(n); o, pm, ev = best[n]
        f.write(f"| {d} | {p:g} | {ev:.1f} | {o:.3f} | {pm:.3f} | {pm / o:.2f}x | {o / d:.3f} |\n")
    f.write(f"\nThroughput with {threads} threads (one decoder each, one shared graph; each "
            f"thread decodes all shots):\n\n| d | p | aggregate Mshots/s | single-thread Mshots/s |\n"
            "|---|---|---|---|\n")
    for n in rows:
        p, d = key(n); t = thr[n]
        f.write(f"| {d} | {p:g} | {float(t[5]):.4f} | {1 / best[n][0]:.4f} |\n")
print(open(out).read())
PY
