#!/usr/bin/env python3
"""A markdown table from qec-realtime --json reports (one row per report).

    bench_table.py RUN.json [...]

Columns: preset (from the file name's first field), mode, predecoder,
arrivals, requests, throughput, latency p50 / p90 / p99 / max, stage means
(GPU modes: the graph's kernels and the rest of dispatch + GPU, p50, from the
GPU stamps), backpressure stalls, timed out, LER and MWPM-alone LER, events before/after,
peak RSS and the GPU stage's device memory.
"""
import json
import os
import sys


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def main():
    cols = ["run", "mode", "predecoder", "arrivals", "requests", "req/s", "p50 us", "p90 us",
            "p99 us", "max us", "dispatch(+GPU) us", "GPU kernels / rest p50 us", "MWPM us", "stalls", "timed out",
            "LER", "MWPM alone", "events in/out", "RSS MiB", "GPU MiB"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for path in sys.argv[1:]:
        with open(path) as f:
            r = json.load(f)
        b = r.get("bench", {})
        lat = b.get("latency_us") or {}
        c = r.get("counts", {})
        st = r.get("stage_us_per_request", {})
        ler = r.get("logical_error_rate")
        alone = r.get("mwpm_alone")
        ev = r.get("events_per_shot", {})
        iv = r.get("interval_us", 0)
        row = [os.path.basename(path).rsplit(".json", 1)[0], r.get("mode"),
               os.path.basename(r.get("predecoder", "")) + (f" {r['precision']}" if r.get("precision") else ""),
               "flat out" if not iv else f"{iv:g} us", str(c.get("completed")),
               fmt(b.get("throughput_rps"), ".0f"), fmt(lat.get("p50")), fmt(lat.get("p90")),
               fmt(lat.get("p99")), fmt(lat.get("max")),
               fmt(st.get("dispatch", st.get("dispatch_gpu"))),
               f"{fmt(st['gpu_kernels_p50'])} / {fmt(st['dispatch_rest_p50'])}" if "gpu_kernels_p50" in st else "-",
               fmt(st.get("mwpm"), ".2f"),
               str(c.get("backpressure_stalls")), str(c.get("timed_out")),
               f"{ler['mistakes']}/{ler['shots']}" if ler else "-",
               f"{alone['mistakes']}/{alone['shots']}" if alone else "-",
               f"{fmt(ev.get('before'), '.2f')}/{fmt(ev.get('after'), '.2f')}",
               fmt(r.get("rss_peak_kib", 0) / 1024), fmt(r.get("gpu_stage_bytes", 0) / 1048576)]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
