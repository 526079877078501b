#!/usr/bin/env python3
"""Correlated matching, ours (cudaq_realtime.Matching) against PyMatching 2.4,
both with enable_correlations=True, on the same shots: logical error rate and
decode time per shot (one thread, decode_batch, rounds alternating between
the decoders, best round kept). Also both without correlations, for scale.

  correlated_bench.py [--distances 5 9 13] [--p 0.005] [--shots 20000] [--rounds 3]
Prints a markdown table. Run from the project venv after `pip install .`.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import pymatching
import stim

import cudaq_realtime as cr


def circuit(d, p):
    return stim.Circuit.generated("surface_code:rotated_memory_z", distance=d, rounds=d,
                                  after_clifford_depolarization=p, before_round_data_depolarization=p,
                                  before_measure_flip_probability=p, after_reset_flip_probability=p)


def wilson(k, n, z=1.96):
    if n == 0:
        return (float("nan"), float("nan"))
    ph = k / n
    den = 1 + z * z / n
    c = (ph + z * z / (2 * n)) / den
    h = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / den
    return (c - h, c + h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--distances", type=int, nargs="+", default=[5, 9, 13])
    ap.add_argument("--p", type=float, default=0.005)
    ap.add_argument("--shots", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20261123)
    a = ap.parse_args()
    print("| d | shots | decoder | logical errors | LER [95% Wilson] | us/shot | PyMatching / ours |")
    print("|---|---|---|---|---|---|---|")
    for d in a.distances:
        c = circuit(d, a.p)
        dem = c.detector_error_model(decompose_errors=True)
        dets, obs = c.compile_detector_sampler(seed=a.seed + d).sample(a.shots, separate_observables=True)
        dec = {
            "ours, correlated": (cr.Matching.from_detector_error_model(dem, enable_correlations=True), True),
            "PyMatching, correlated": (pymatching.Matching.from_detector_error_model(dem, enable_correlations=True), True),
            "ours, plain": (cr.Matching.from_detector_error_model(dem), False),
            "PyMatching, plain": (pymatching.Matching.from_detector_error_model(dem), False),
        }
        best = {k: float("inf") for k in dec}
        preds = {}
        for r in range(a.rounds):
            names = list(dec) if r % 2 == 0 else list(reversed(dec))
            for k in names:
                m, corr = dec[k]
                t0 = time.perf_counter()
                preds[k] = m.decode_batch(dets, enable_correlations=corr)
                best[k] = min(best[k], time.perf_counter() - t0)
        for k in dec:
            errs = int((preds[k] != obs).any(axis=1).sum())
            lo, hi = wilson(errs, a.shots)
            us = best[k] / a.shots * 1e6
            other = "PyMatching" + k[k.index(","):]
            ratio = best[other] / best[k] if k.startswith("ours") else float("nan")
            rs = f"{ratio:.2f}x" if k.startswith("ours") else ""
            print(f"| {d} | {a.shots} | {k} | {errs} | {errs / a.shots:.5f} [{lo:.5f}, {hi:.5f}] | {us:.1f} | {rs} |")
        differ = int((preds["ours, correlated"] != preds["PyMatching, correlated"]).any(axis=1).sum())
        print(f"| {d} | | correlated predictions that differ | {differ} | | | |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
