#!/usr/bin/env python3
"""Reference data for the MWPM decoder: surface-code DEMs and samples from
stim, and PyMatching's predictions, per-shot matching weights and timings.

  gen    write, for each distance/basis/p, a DEM, detection events (b8),
         observable flips (01), PyMatching's predictions (01) and the weight
         of PyMatching's matching on each shot (text, one per line), plus a
         manifest.txt listing the data sets.
  bench  time PyMatching's decode_batch (one thread) on data sets made by gen.

Circuits: stim's surface_code:rotated_memory_x / _z, rounds = distance, with
after_clifford_depolarization = before_round_data_depolarization =
before_measure_flip_probability = after_reset_flip_probability = p.
Run it from the project venv (scripts/venv.sh).
"""
import argparse
import os
import sys
import time

import numpy as np
import pymatching
import stim


def circuit(basis, d, p):
    return stim.Circuit.generated(
        f"surface_code:rotated_memory_{basis}",
        distance=d,
        rounds=d,
        after_clifford_depolarization=p,
        before_round_data_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )


def name_of(basis, d, p):
    return f"{basis}_d{d}_p{p:g}"


def pm_weights(matching, dets):
    """Weight of PyMatching's matching on each shot, from its own edge weights."""
    w = {}
    for u, v, data in matching.edges():
        key = (u, -1 if v is None else v)
        w[key] = data["weight"]
        w[(key[1], key[0])] = data["weight"]
    out = np.zeros(len(dets))
    for i, shot in enumerate(dets):
        if not shot.any():
            continue
        edges = matching.decode_to_edges_array(shot)
        out[i] = sum(w[(int(a), int(b))] for a, b in edges)
    return out


def gen(args):
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    k = 0
    for d in args.distances:
        for p in args.p:
            for basis in args.bases:
                k += 1
                name = name_of(basis, d, p)
                base = os.path.join(args.out, name)
                c = circuit(basis, d, p)
                dem = c.detector_error_model(decompose_errors=True)
                with open(base + ".dem", "w") as f:
                    f.write(str(dem))
                sampler = c.compile_detector_sampler(seed=args.seed + 1000 * k)
                dets, obs = sampler.sample(args.shots, separate_observables=True)
                stim.write_shot_data_file(data=dets, path=base + ".b8", format="b8",
                                          num_detectors=dem.num_detectors)
                stim.write_shot_data_file(data=obs, path=base + ".obs.01", format="01",
                                          num_observables=dem.num_observables)
                if args.appended:
                    both = np.hstack([dets, obs])
                    for fmt in ("dets", "b8", "01"):
                        stim.write_shot_data_file(data=both, path=f"{base}.app.{fmt}", format=fmt,
                                                  num_detectors=dem.num_detectors,
                                                  num_observables=dem.num_observables)
                if args.pymatching:
                    m = pymatching.Matching.from_detector_error_model(dem)
                    pred = m.decode_batch(dets)
                    stim.write_shot_data_file(data=pred.astype(bool), path=base + ".pm.01",
                                              format="01", num_observables=dem.num_observables)
                    np.savetxt(base + ".pmw.txt", pm_weights(m, dets), fmt="%.17g")
                manifest.append(f"{name} {d} {p:g} {args.shots} {dem.num_detectors} "
                                f"{dem.num_observables}")
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print(f"wrote {len(manifest)} data sets to {args.out}")


def bench(args):
    if not args.csv:
        print("| data set | shots | PyMatching decode_batch us/shot |")
        print("|---|---|---|")
    for line in open(os.path.join(args.data, "manifest.txt")):
        name, d, p, shots, nd, no = line.split()
        if args.only and name not in args.only:
            continue
        base = os.path.join(args.data, name)
        dem = stim.DetectorErrorModel.from_file(base + ".dem")
        dets = stim.read_shot_data_file(path=base + ".b8", format="b8",
                                        num_detectors=int(nd))
        m = pymatching.Matching.from_detector_error_model(dem)
        m.decode_batch(dets[: min(len(dets), 1000)])  # warm-up
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            m.decode_batch(dets)
            best = min(best, time.perf_counter() - t0)
        us = 1e6 * best / len(dets)
        print(f"{name},{len(dets)},{us:.4f}" if args.csv else f"| {name} | {len(dets)} | {us:.3f} |")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--out", required=True)
    g.add_argument("--distances", type=int, nargs="+", default=[3, 5, 7])
    g.add_argument("--p", type=float, nargs="+", default=[0.005])
    g.add_argument("--bases", nargs="+", default=["x", "z"], choices=["x", "z"])
    g.add_argument("--shots", type=int, default=10000)
    g.add_argument("--seed", type=int, default=20261122)
    g.add_argument("--appended", action="store_true",
                   help="also write detection events with appended observables "
                        "(.app.dets, .app.b8, .app.01)")
    g.add_argument("--no-pymatching", dest="pymatching", action="store_false",
                   help="skip PyMatching's predictions and weights")
    b = sub.add_parser("bench")
    b.add_argument("--data", required=True)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--only", nargs="*")
    b.add_argument("--csv", action="store_true", help="print name,shots,us_per_shot lines")
    args = ap.parse_args()
    gen(args) if args.cmd == "gen" else bench(args)


if __name__ == "__main__":
    main()
