#!/usr/bin/env python3
"""Latency histogram of qec-realtime runs as a PNG, from their --json reports.

    plot_latency.py RUN.json [RUN2.json ...] --out latency.png

Each report's 40-bucket log-spaced histogram (bench.histogram) is drawn as a
step line on a log x axis, with its p50 and p99 marked; the legend names the
mode, predecoder and arrival interval. Off the realtime path (matplotlib).
"""
import argparse
import json
import os
import sys


def label(rep, path):
    pd = os.path.basename(rep.get("predecoder", "")) or "none"
    iv = rep.get("interval_us", 0)
    arr = "flat out" if not iv else f"every {iv:g} us"
    return f"{rep.get('mode', '?')}, {pd}, {arr} ({os.path.basename(path)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="qec-realtime: end-to-end latency per request")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    drawn = 0
    for path in a.reports:
        with open(path) as f:
            rep = json.load(f)
        bench = rep.get("bench", {})
        h = bench.get("histogram")
        if not h:
            print(f"plot_latency: {path}: no histogram (no request completed?)", file=sys.stderr)
            continue
        edges, counts = h["edges_us"], h["counts"]
        total = sum(counts) or 1
        frac = [c / total for c in counts]
        line, = ax.step(edges, frac + [frac[-1]], where="post", label=label(rep, path))
        lat = bench.get("latency_us") or {}
        for key, style in (("p50", "--"), ("p99", ":")):
            if key in lat:
                ax.axvline(lat[key], color=line.get_color(), linestyle=style, linewidth=1)
        drawn += 1
    if not drawn:
        sys.exit("plot_latency: nothing to draw")
    ax.set_xscale("log")
    ax.set_xlabel("latency, send to answer harvested (us); dashed p50, dotted p99")
    ax.set_ylabel("fraction of requests")
    ax.set_title(a.title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"plot_latency: wrote {a.out}")


if __name__ == "__main__":
    main()
