#!/usr/bin/env python3
"""qec-decode --enable_correlations against PyMatching 2.4 with
enable_correlations=True on stim circuits (rotated surface code memory,
rounds = d; stim's four noise parameters = p, and SI1000 noise).

For each circuit: the same shots (fixed seed, b8) decoded by both; passes when
at most max(3, 1%) of the shots get different predictions and our logical
error count is within 2 sigma (binomial, of PyMatching's rate) of
PyMatching's. Two exact decoders may break ties between equal-weight paths
differently, and the first pass's paths decide which weights the second pass
lowers, so a few shots may differ.

  correlated_agreement.py QEC_DECODE WORK_DIR [--shots N]
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import pymatching
import stim

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "predecoder"))
import layout  # noqa: E402  (SI1000 noise, shared with the predecoder tools)

CASES = [  # (name, distance, p, noise)
    ("d3_p0.008", 3, 0.008, "depolarizing"),
    ("d5_p0.005", 5, 0.005, "depolarizing"),
    ("d5_p0.008", 5, 0.008, "depolarizing"),
    ("d7_p0.003", 7, 0.003, "depolarizing"),
    ("d7_p0.006", 7, 0.006, "depolarizing"),
    ("d5_si1000_p0.003", 5, 0.003, "si1000"),
]


def read01(path, n):
    rows = [line.strip() for line in open(path) if line.strip()]
    return np.array([[c == "1" for c in r] for r in rows], dtype=np.uint8).reshape(len(rows), n)


def run_case(qd, work, name, d, p, noise, shots, seed):
    c = layout.make_circuit(layout.circuit_spec("z", d, d, p, noise))
    dem = c.detector_error_model(decompose_errors=True)
    dets, obs = c.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    dem_path = os.path.join(work, f"{name}.dem")
    b8_path = os.path.join(work, f"{name}.b8")
    dem.to_file(dem_path)
    stim.write_shot_data_file(data=dets, path=b8_path, format="b8", num_detectors=c.num_detectors)
    preds = {}
    for flag in (True, False):
        out = os.path.join(work, f"{name}.{'corr' if flag else 'plain'}.01")
        cmd = [qd, "predict", "--dem", dem_path, "--in", b8_path, "--in_format", "b8", "--out", out,
               "--out_format", "01"] + (["--enable_correlations"] if flag else [])
        subprocess.run(cmd, check=True)
        preds[flag] = read01(out, dem.num_observables)
    ref = pymatching.Matching.from_detector_error_model(dem, enable_correlations=True)
    rp = ref.decode_batch(dets, enable_correlations=True)
    differ = int((preds[True] != rp).any(axis=1).sum())
    k_ours = int((preds[True] != obs).any(axis=1).sum())
    k_ref = int((rp != obs).any(axis=1).sum())
    k_plain = int((preds[False] != obs).any(axis=1).sum())
    rate = k_ref / shots
    sigma = max(1.0, math.sqrt(shots * rate * (1 - rate)))
    ok = differ <= max(3, shots // 100) and abs(k_ours - k_ref) <= 2 * sigma
    print(f"{name:18s} shots {shots}  differ {differ:4d}  errors: ours {k_ours:4d}  PyMatching {k_ref:4d}"
          f"  (2 sigma {2 * sigma:.1f})  ours uncorrelated {k_plain:4d}  {'ok' if ok else 'FAIL'}")
    return ok, k_ours, k_plain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qec_decode")
    ap.add_argument("work")
    ap.add_argument("--shots", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20261123)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    all_ok, corr, plain = True, 0, 0
    for i, (name, d, p, noise) in enumerate(CASES):
        ok, k, k0 = run_case(a.qec_decode, a.work, name, d, p, noise, a.shots, a.seed + i)
        all_ok &= ok
        corr += k
        plain += k0
    # Correlations must be doing something: fewer errors than plain matching overall.
    if not corr < plain:
        print(f"FAIL: correlated matching made {corr} errors, plain {plain}")
        all_ok = False
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
