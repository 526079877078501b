#!/usr/bin/env python3
"""Held-out evaluation of a predecoder: predecoder + MWPM against MWPM alone.

    python3 evaluate.py --ckpt ckpt.pt --points "z:7:0.003:1000000,x:7:0.003:1000000" \
                        [--seed 900000] [--json out.json] [--correlated]
    python3 evaluate.py --onnx models/predecoder_d7_z.onnx --points ...   # a shipped file's weights

The network comes from a training checkpoint (--ckpt) or from the Conv
weights of an exported ONNX file (--onnx: every shipped file holds the whole
network; its decision threshold is the default of --thresholds).

Each point is basis:distance:p:shots[:seed[:rounds]] (rounds = distance unless
given; --noise si1000 for SI1000 noise). Shots come from stim's circuit sampler (the circuit itself,
not its error model) with seeds from --seed + 1000 x (the point's index) up, or
from the point's own seed (the same seed and shots give the same shots: a
paired comparison of two models), which training never uses
(training samples the error model on the device from torch generators).
Inference runs in PyTorch on the GPU (bf16 autocast; --fp32 for FP32) with
exactly the arithmetic of the exported ONNX graph; MWPM is PyMatching,
uncorrelated, built from the same decomposed error model, on every core.
With --correlated, PyMatching with enable_correlations also decodes the raw
and the residual events of the same shots (columns *_corr).

Reported per point: logical error rate with a 95% Wilson interval for
predecoder + MWPM and for MWPM alone on the same shots, their ratio, the mean
detection events per shot before and after the predecoder, and the
single-core MWPM time per shot on raw and on residual events.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout as L  # noqa: E402

CHUNK = 25_000
TIMED_SHOTS = 20_000  # shots of the single-core MWPM timing (raw and residual)
_matchers: dict = {}


def wilson(k: int, n: int, z: float = 1.96):
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, c - h), min(1.0, c + h))


def _sample(args):
    spec, seed, n = args
    c = L.make_circuit(spec)
    dets, obs = c.compile_detector_sampler(seed=seed).sample(n, separate_observables=True, bit_packed=True)
    return dets, obs


def _matcher(spec, corr=False):
    import pymatching
    key = (L.spec_str(spec), corr)
    if key not in _matchers:
        dem = L.make_circuit(spec).detector_error_model(decompose_errors=True)
        _matchers[key] = pymatching.Matching.from_detector_error_model(dem, enable_correlations=corr)
    return _matchers[key]


def _match(args):
    spec, packed, corr = args
    m = _matcher(spec, corr)
    return m.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True, enable_correlations=corr)


def _failures(spec, pool, packed_chunks, obs, nobs, corr, frame=None):
    pred = np.concatenate([unpack(p, nobs) for p in pool.map(_match, [(spec, p, corr) for p in packed_chunks])])
    if frame is not None:
        pred = pred ^ frame
    return int((pred != obs).any(axis=1).sum())


_weighted: dict = {}


def _weighted_graph(spec):
    """(H [N, E] detectors x edges, F [Lobs, E]) of the network's edge list
    (layout.edge_list), cached per process."""
    import scipy.sparse as sp
    key = L.spec_str(spec)
    if key not in _weighted:
        lay = L.build_layout(L.make_circuit(spec))
        _, ends, obs = L.edge_list(lay)
        cols = np.arange(len(ends))
        inner = ends[:, 1] >= 0
        rows = np.concatenate([ends[:, 0], ends[inner, 1]])
        cc = np.concatenate([cols, cols[inner]])
        H = sp.csc_matrix((np.ones(len(rows), np.uint8), (rows, cc)), shape=(lay.num_detectors, len(ends)))
        F = sp.csc_matrix(obs.T.astype(np.uint8))
        _weighted[key] = (H, F)
    return _weighted[key]


def _match_weighted(args):
    """Weighted matching: per shot, PyMatching on the raw events with edge i
    weighing -logit_i (negative weights: PyMatching takes those edges and
    matches on |w|, which is the threshold-0 residual with weights |logit|)."""
    import pymatching
    spec, packed, logits = args
    H, F = _weighted_graph(spec)
    n = H.shape[0]
    dets = unpack(packed, n)
    out = np.zeros((len(dets), F.shape[0]), np.uint8)
    for i in range(len(dets)):
        w = -np.clip(logits[i].astype(np.float64), -WEIGHT_CLIP, WEIGHT_CLIP)
        m = pymatching.Matching.from_check_matrix(H, weights=w, faults_matrix=F, use_virtual_boundary_node=True)
        out[i] = m.decode(dets[i])
    return out


WEIGHT_CLIP = 30.0  # |logit| beyond this: probability under 1e-13, clipped


def _time_match(args):
    spec, packed = args
    m = _matcher(spec)
    m.decode_batch(packed[:200], bit_packed_shots=True)  # warm-up
    t = time.perf_counter()
    m.decode_batch(packed, bit_packed_shots=True)
    return (time.perf_counter() - t) / len(packed)


def unpack(packed, n):
    return np.unpackbits(packed, axis=1, count=n, bitorder="little")


def pack(bits):
    return np.packbits(bits.astype(np.uint8), axis=1, bitorder="little")


def _infer(model, geo, dets, batch, device, fp32):
    """(grid [B, T, H, W], logits [B, K, T, H, W]) per batch of dets, inference as the exported
    graph's arithmetic (bf16 autocast on a GPU unless fp32)."""
    import torch
    for s in range(0, len(dets), batch):
        x = torch.tensor(dets[s:s + batch], dtype=torch.float32, device=device)
        with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                                             enabled=not fp32 and torch.device(device).type == "cuda"):
            g = geo.grid_from_dets(x)
            out = model(geo.inputs(g).contiguous(memory_format=torch.channels_last_3d))
        yield g, out


def run_point_weighted(model, spec, shots, seed, pool, device, fp32, corr=False):
    """One evaluation point of weighted matching (the network's edge logits as
    per-shot matching weights) against MWPM alone (and correlated MWPM)."""
    import torch
    import net
    lay = L.build_layout(L.make_circuit(spec))
    geo = net.Geometry(lay, device)
    slots = torch.tensor(L.edge_list(lay)[0], device=device)
    n, nobs = lay.num_detectors, lay.num_observables
    chunks = [(spec, seed + i, min(CHUNK, shots - i * CHUNK)) for i in range((shots + CHUNK - 1) // CHUNK)]
    sampled = list(pool.map(_sample, chunks))
    raw_packed = [d for d, _ in sampled]
    obs = np.concatenate([unpack(o, nobs) for _, o in sampled])
    batch = max(16, min(4096, (1 << 25) // lay.num_cells))
    sub = 1000
    t_inf, fail_w, ev_before, ev_after = 0.0, 0, 0, 0
    at = 0
    for dp in raw_packed:
        dets = unpack(dp, n)
        ev_before += int(dets.sum())
        t = time.time()
        lg = []
        for g, out in _infer(model, geo, dets, batch, device, fp32):
            with torch.no_grad():
                _, res, _ = geo.apply_corrections(out, g, 0.0)
            ev_after += int(res.sum().item())
            lg.append(out.float().flatten(1)[:, slots].cpu().numpy().astype(np.float16))
        lg = np.concatenate(lg)
        t_inf += time.time() - t
        jobs = [(spec, dp[i:i + sub], lg[i:i + sub]) for i in range(0, len(dets), sub)]
        pred = np.concatenate(list(pool.map(_match_weighted, jobs)))
        fail_w += int((pred != obs[at:at + len(dets)]).any(axis=1).sum())
        at += len(dets)
    fail_raw = _failures(spec, pool, raw_packed, obs, nobs, False)
    out = {
        "basis": spec["task"][-1].upper(), "distance": spec["distance"], "rounds": spec["rounds"],
        "noise": spec["noise"], "shots": shots, "seed": seed, "mode": "weighted",
        "ler_mwpm": fail_raw / shots, "ler_mwpm_ci95": wilson(fail_raw, shots), "fail_mwpm": fail_raw,
        "ler_weighted": fail_w / shots, "ler_weighted_ci95": wilson(fail_w, shots), "fail_weighted": fail_w,
        "ler_ratio": (fail_w / fail_raw) if fail_raw else None,
        "events_per_shot_before": ev_before / shots, "events_per_shot_after_threshold0": ev_after / shots,
        "density_ratio": ev_after / max(1, ev_before),
        "inference_s": round(t_inf, 2), "precision": "fp32" if fp32 else "bf16",
    }
    if corr:
        fc = _failures(spec, pool, raw_packed, obs, nobs, True)
        out.update({"fail_mwpm_corr": fc, "ler_mwpm_corr": fc / shots, "ler_mwpm_corr_ci95": wilson(fc, shots)})
    return out


def run_point(model, spec, shots, seed, pool, device, fp32, thresholds=(0.0,), corr=False):
    """One evaluation point; returns one result per decision threshold."""
    import torch
    import net
    lay = L.build_layout(L.make_circuit(spec))
    geo = net.Geometry(lay, device)
    n = lay.num_detectors
    chunks = [(spec, seed + i, min(CHUNK, shots - i * CHUNK)) for i in range((shots + CHUNK - 1) // CHUNK)]
    sampled = list(pool.map(_sample, chunks))
    raw_packed = [d for d, _ in sampled]
    obs = np.concatenate([unpack(o, lay.num_observables) for _, o in sampled])
    nt = len(thresholds)
    res_packed, frames, ev_before, ev_after = [[] for _ in thresholds], [[] for _ in thresholds], 0, [0] * nt
    # Inference batch: activations of about 2^25 cells x channels per layer
    # (4096 shots up to d = 13, 1024 at d = 31), so large grids fit on the GPU.
    batch = max(16, min(4096, (1 << 25) // lay.num_cells))
    t_inf = time.time()
    for dp in raw_packed:
        dets = unpack(dp, n)
        ev_before += int(dets.sum())
        rs, fs = [[] for _ in thresholds], [[] for _ in thresholds]
        for g, logits in _infer(model, geo, dets, batch, device, fp32):
            for j, th in enumerate(thresholds):
                _, res, fr = geo.apply_corrections(logits, g, th)
                rs[j].append(res.flatten(1)[:, geo.det_cell].to(torch.uint8).cpu().numpy())
                fs[j].append(fr.to(torch.uint8).cpu().numpy())
        for j in range(nt):
            r = np.concatenate(rs[j])
            ev_after[j] += int(r.sum())
            res_packed[j].append(pack(r))
            frames[j].append(np.concatenate(fs[j]))
    t_inf = time.time() - t_inf
    nobs = lay.num_observables
    fail_raw = _failures(spec, pool, raw_packed, obs, nobs, False)
    fail_raw_corr = _failures(spec, pool, raw_packed, obs, nobs, True) if corr else None
    sub = min(TIMED_SHOTS, shots)
    t_raw = _time_match((spec, raw_packed[0][:sub]))
    return [_point_result(spec, shots, seed, lay, pool, res_packed[j], np.concatenate(frames[j]),
                          obs, fail_raw, ev_before, ev_after[j], t_inf, fp32, th, t_raw, fail_raw_corr)
            for j, th in enumerate(thresholds)]


def _point_result(spec, shots, seed, lay, pool, res_packed, frame, obs, fail_raw,
                  ev_before, ev_after, t_inf, fp32, threshold, t_raw, fail_raw_corr=None):
    nobs = lay.num_observables
    fail_hyb = _failures(spec, pool, res_packed, obs, nobs, False, frame)
    t_res = _time_match((spec, res_packed[0][:min(TIMED_SHOTS, shots)]))
    out = {
        "basis": spec["task"][-1].upper(), "distance": spec["distance"], "rounds": spec["rounds"],
        "noise": spec["noise"], "shots": shots, "seed": seed,
        "ler_mwpm": fail_raw / shots, "ler_mwpm_ci95": wilson(fail_raw, shots), "fail_mwpm": fail_raw,
        "ler_hybrid": fail_hyb / shots, "ler_hybrid_ci95": wilson(fail_hyb, shots), "fail_hybrid": fail_hyb,
        "ler_ratio": (fail_hyb / fail_raw) if fail_raw else None,
        "events_per_shot_before": ev_before / shots, "events_per_shot_after": ev_after / shots,
        "density_ratio": ev_after / max(1, ev_before),
        "mwpm_us_raw": t_raw * 1e6, "mwpm_us_residual": t_res * 1e6,
        "mwpm_speedup": t_raw / t_res if t_res > 0 else None,
        "inference_s": round(t_inf, 2), "precision": "fp32" if fp32 else "bf16", "threshold": threshold,
    }
    if fail_raw_corr is not None:
        fail_hyb_corr = _failures(spec, pool, res_packed, obs, nobs, True, frame)
        out.update({
            "ler_mwpm_corr": fail_raw_corr / shots, "ler_mwpm_corr_ci95": wilson(fail_raw_corr, shots),
            "fail_mwpm_corr": fail_raw_corr,
            "ler_hybrid_corr": fail_hyb_corr / shots, "ler_hybrid_corr_ci95": wilson(fail_hyb_corr, shots),
            "fail_hybrid_corr": fail_hyb_corr,
        })
    return out


def check_onnx_weights(path, model, props, shots=200):
    """The network taken from an ONNX file reproduces that file: onnxruntime on
    the file and the PyTorch arithmetic (FP32, CPU) agree on every residual and
    frame bit of `shots` shots of the file's own circuit, else exit."""
    import onnx
    from export import verify
    if "circuit" not in props:
        sys.exit(f"evaluate: {path} has no 'circuit' metadata property (not an export.py model)")
    circuit = L.make_circuit(json.loads(props["circuit"]))
    bad = verify(onnx.load(path), model, L.build_layout(circuit), circuit, shots=shots,
                 threshold=float(props.get("decision_threshold", "0")))
    if bad:
        sys.exit(f"evaluate: the network read from {path} differs from the file on {bad} of {shots} shots")
    print(f"evaluate: network read from {path}: identical to the file on {shots} shots", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", help="a training checkpoint (train.py)")
    src.add_argument("--onnx", help="an exported model: its Conv weights (every shipped file has them all)")
    ap.add_argument("--points", required=True, help="basis:distance:p:shots[:seed[:rounds]],...")
    ap.add_argument("--noise", default="depolarizing", choices=["depolarizing", "si1000"])
    ap.add_argument("--seed", type=int, default=900_000)
    ap.add_argument("--json")
    ap.add_argument("--fp32", action="store_true")
    ap.add_argument("--device")
    ap.add_argument("--thresholds", help="decision thresholds on the edge logits to compare "
                    "(default: the ONNX file's, or 0 for a checkpoint)")
    ap.add_argument("--correlated", action="store_true",
                    help="also decode raw and residual events with PyMatching's enable_correlations")
    ap.add_argument("--weighted", action="store_true",
                    help="weighted matching instead of thresholds: the edge logits as per-shot matching "
                         "weights (PyMatching rebuilt per shot: slow past d = 9)")
    a = ap.parse_args(argv)
    import torch
    from export import load_model, load_model_from_onnx
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    if a.onnx:
        model, props = load_model_from_onnx(a.onnx)
        thresholds = a.thresholds or props.get("decision_threshold", "0")
        check_onnx_weights(a.onnx, model, props)
    else:
        model, _ = load_model(a.ckpt)
        thresholds = a.thresholds or "0"
    model = model.to(device).to(memory_format=torch.channels_last_3d)
    results = []
    with cf.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for k, pt in enumerate(a.points.split(",")):
            basis, d, p, shots, *own = pt.split(":")
            seed = int(own[0]) if own and own[0] else a.seed + 1000 * k
            rounds = int(own[1]) if len(own) > 1 else int(d)
            spec = L.circuit_spec(basis, int(d), rounds, float(p), a.noise)
            t = time.time()
            ths = [float(x) for x in thresholds.split(",")]
            if a.weighted:
                rs = [run_point_weighted(model, spec, int(float(shots)), seed, pool, device, a.fp32,
                                         a.correlated)]
            else:
                rs = run_point(model, spec, int(float(shots)), seed, pool, device, a.fp32, ths, a.correlated)
            for r in rs:
                r["wall_s"] = round(time.time() - t, 1)
                results.append(r)
                print(json.dumps(r), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
