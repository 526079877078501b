#!/usr/bin/env bash
# MWPM benchmark: our decoder against PyMatching's decode_batch, same machine,
# same shots, one thread; then our throughput with several threads.
# Surface code memory-x experiments, rounds = d, d = 5 9 13 17, p = 0.001 0.005.
#
# Usage: bench/mwpm/run_bench.sh [BUILD_DIR] [OUT.md]
#   BUILD_DIR defaults to ./build (must contain bench/mwpm/bench_mwpm);
#   OUT.md defaults to bench/results/mwpm-<date>.md.
# Env: SHOTS (20000), ROUNDS (5), THREADS (2).
# Method: in each round, each data set is timed by ours and then at once by
# PyMatching (best of 3 passes each), so that the two numbers of a pair see
# the same machine state; the table gives the best time of each over the
# rounds and the median over rounds of the paired ratio (this shared VM's
# speed drifts by up to 2x over minutes, so the paired ratio is the number
# to read).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="${2:-$root/bench/results/mwpm-$(date -u +%F).md}"
shots="${SHOTS:-20000}" rounds="${ROUNDS:-5}" threads="${THREADS:-2}"
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
  for n in $names; do
    "$bench" --repeats 3 --csv 1 "$data" "$n" | sed "s/^/$r,/" >> "$tmp/ours.csv"
    "$py" "$root/tools/mwpm_reference.py" bench --data "$data" --repeats 3 --csv --only "$n" \
      | sed "s/^/$r,/" >> "$tmp/pm.csv"
  done
done
"$bench" --repeats 1 --threads "$threads" --csv 1 "$data" $names > "$tmp/threads.csv"
commit=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src include || echo "+dirty")
"$py" - "$tmp" "$out" "$commit" "$shots" "$rounds" "$threads" "$0 $*" <<'PY'
import collections, platform, statistics, subprocess, sys, datetime
tmp, out, commit, shots, rounds, threads, cmd = sys.argv[1:8]
best = collections.defaultdict(lambda: [float("inf"), float("inf"), 0.0])
ours, pm = {}, {}
for line in open(f"{tmp}/ours.csv"):
    r, n, _, ev, us, _, _ = line.strip().split(",")
    best[n][0] = min(best[n][0], float(us)); best[n][2] = float(ev); ours[(r, n)] = float(us)
for line in open(f"{tmp}/pm.csv"):
    r, n, _, us = line.strip().split(",")
    best[n][1] = min(best[n][1], float(us)); pm[(r, n)] = float(us)
ratio = collections.defaultdict(list)
for (r, n), us in ours.items():
    ratio[n].append(pm[(r, n)] / us)
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
    f.write(f"- method: all shots in memory, one warm-up pass, best of 3 passes; {rounds} rounds, "
            f"each data set timed by ours then at once by PyMatching; best of the rounds for each, "
            f"and the median over rounds of the paired ratio PyMatching / ours\n")
    f.write(f"- command: `{cmd}`\n\n")
    f.write("| d | p | events/shot | ours µs/shot (best) | PyMatching µs/shot (best) | "
            "PyMatching / ours, median paired (min-max) | ours µs/round |\n"
            "|---|---|---|---|---|---|---|\n")
    for n in rows:
        p, d = key(n); o, pmb, ev = best[n]; rs = ratio[n]
        f.write(f"| {d} | {p:g} | {ev:.1f} | {o:.3f} | {pmb:.3f} | {statistics.median(rs):.2f}x "
                f"({min(rs):.2f}-{max(rs):.2f}) | {o / d:.3f} |\n")
    f.write(f"\nThroughput with {threads} threads (one decoder each, one shared graph; each "
            f"thread decodes all shots):\n\n| d | p | aggregate Mshots/s | single-thread Mshots/s |\n"
            "|---|---|---|---|\n")
    for n in rows:
        p, d = key(n); t = thr[n]
        f.write(f"| {d} | {p:g} | {float(t[5]):.4f} | {1 / best[n][0]:.4f} |\n")
print(open(out).read())
PY
