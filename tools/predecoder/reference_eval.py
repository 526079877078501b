#!/usr/bin/env python3
"""Python reference for qec-decode --predecoder: onnxruntime + PyMatching.

  predict  For every shot of a stim shot file (01, b8 or dets, read with
           stim.read_shot_data_file), run the ONNX predecoder (batch 1,
           onnxruntime, CPU) on the shot's detection events, decode its
           residual_detectors with PyMatching (uncorrelated matching built
           from the same DEM), and write logical_frame XOR MWPM(residual) in
           stim's 01 format: the bytes `qec-decode predict --predecoder MODEL
           --out_format 01` must produce. Two exact MWPM decoders may pick
           different matchings of equal weight (a tie) with different
           observables; --residual_out, --weights_out and --frame_out write what a test
           needs to tell such a tie from a real disagreement. A model with
           the output edge_logits runs in weighted mode (as qec-decode's
           --predecoder_weights auto): the residual of threshold 0, matched by
           PyMatching with the per-shot weights |logit| on the model's edges
           (--residual_out and --weights_out then hold that residual and weight).

             reference_eval.py predict --model M.onnx --dem C.dem --in S.b8
                 --in_format b8 [--in_includes_appended_observables] --out P.01
                 [--residual_out R.b8] [--weights_out W.txt] [--frame_out F.01]

  shots    Sample shots for a test: the circuit comes from a manifest entry
           (models/manifest.json, the entry whose "file" is --model; with --p,
           at that noise strength instead of the entry's: its detector layout
           depends only on task, distance and rounds) or from
           --task/--distance/--rounds/--p (stim's four circuit-level noise
           parameters all = p; --noise si1000 for SI1000 at strength p, also
           with --manifest --p). Writes OUT/circuit.dem
           (detector_error_model(decompose_errors=True)), OUT/shots.b8
           (detection events), OUT/obs.01 (observable flips) and
           OUT/info.txt ("num_detectors N", "num_observables L", "shots S").

             reference_eval.py shots --manifest models/manifest.json --model d5.onnx
                 --shots 10000 --seed 20261124 --out DIR
             reference_eval.py shots --task surface_code:rotated_memory_z --distance 5
                 --rounds 5 --p 0.005 --shots 10000 --seed 20261124 --out DIR

The model contract is models/README.md. Run it from the project venv
(scripts/venv.sh): stim, pymatching, numpy, onnx, onnxruntime.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout  # noqa: E402  (circuits from specs: one home, SI1000 included)

CONTRACT = ("detectors", "residual_detectors", "logical_frame")


def fail(msg):
    print(f"reference_eval: {msg}", file=sys.stderr)
    sys.exit(1)


# --- predict ---------------------------------------------------------------

def open_session(model_path, num_detectors, num_observables):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    ins, outs = sess.get_inputs(), sess.get_outputs()
    want = [(ins[0] if ins else None, CONTRACT[0], num_detectors),
            (outs[0] if outs else None, CONTRACT[1], num_detectors),
            (outs[1] if len(outs) > 1 else None, CONTRACT[2], num_observables)]
    if len(ins) != 1:
        fail(f"{model_path}: {len(ins)} inputs, the contract has 1 ('{CONTRACT[0]}')")
    for b, name, n in want:
        if b is None:
            fail(f"{model_path}: no '{name}' binding")
        if b.name != name or b.type != "tensor(int32)":
            fail(f"{model_path}: binding '{b.name}' {b.type}, the contract needs '{name}' tensor(int32)")
        shape = [1 if not isinstance(d, int) else d for d in b.shape]
        if shape != [1, n]:
            fail(f"{model_path}: '{name}' has shape {b.shape}, the DEM needs [1, {n}]")
    return sess


def predict(args):
    import pymatching
    import stim
    dem = stim.DetectorErrorModel.from_file(args.dem)
    nd, no = dem.num_detectors, dem.num_observables
    data = stim.read_shot_data_file(path=args.input, format=args.in_format, num_detectors=nd,
                                    num_observables=no if args.appended else 0)
    dets = np.ascontiguousarray(data[:, :nd], dtype=np.int32)
    sess = open_session(args.model, nd, no)
    recorded = sess.get_modelmeta().custom_metadata_map.get(layout.COORDS_KEY)
    if recorded is not None and not args.skip_layout_check:  # the rule qec-decode applies
        why = layout.layout_mismatch(recorded, dem.get_detector_coordinates(), nd)
        if why:
            fail(f"{args.model}: {why}")
    residual = np.zeros((len(dets), nd), dtype=np.uint8)
    frame = np.zeros((len(dets), no), dtype=np.uint8)
    matching = pymatching.Matching.from_detector_error_model(dem)
    wt = weighted_setup(sess, matching, args.weights, nd)
    names = list(CONTRACT[1:]) + ([EDGE_LOGITS] if wt else [])
    obs = np.zeros((len(dets), no), dtype=np.uint8)
    weights = np.zeros(len(dets))
    for i in range(len(dets)):
        out = sess.run(names, {CONTRACT[0]: dets[i:i + 1]})
        r, f = out[0], out[1]
        if not np.isin(r, (0, 1)).all() or not np.isin(f, (0, 1)).all():
            fail(f"shot {i + 1}: an output value is not 0 or 1")
        residual[i] = r[0]
        frame[i] = f[0]
        if wt:
            obs[i], weights[i] = weighted_shot(wt, out[2][0], residual[i], frame[i], i)
    if not wt:
        obs, weights = matching.decode_batch(residual, return_weights=True)
    pred = (np.asarray(obs, dtype=np.uint8) ^ frame).astype(bool)
    stim.write_shot_data_file(data=pred, path=args.out, format="01", num_observables=no)
    if args.residual_out:
        stim.write_shot_data_file(data=residual.astype(bool), path=args.residual_out, format="b8",
                                  num_detectors=nd)
    if args.weights_out:
        np.savetxt(args.weights_out, weights, fmt="%.17g")
    if args.frame_out:
        stim.write_shot_data_file(data=frame.astype(bool), path=args.frame_out, format="01",
                                  num_observables=no)
    print(f"reference_eval: {len(dets)} shots, {int(dets.sum())} events before, "
          f"{int(residual.sum())} after, {args.out}")


# --- weighted matching (models/README.md; the C rule: src/predecoder/weights.c) ---

EDGE_LOGITS, EDGES_KEY = "edge_logits", "edge_endpoints"


def weighted_setup(sess, matching, mode, nd):
    """None (thresholded residual), or what weighted_shot needs: the DEM's
    matching graph as a check matrix H and observables F (every edge, at the
    DEM's weight), the model's edges as columns of it, and the model's
    decision threshold as a float32 (the C rule: src/predecoder/weights.c)."""
    import scipy.sparse as sp
    has = EDGE_LOGITS in [o.name for o in sess.get_outputs()]
    if mode == "off" or (mode == "auto" and not has):
        return None
    if not has:
        fail(f"weighted matching asked for, but the model has no output '{EDGE_LOGITS}'")
    meta = sess.get_modelmeta().custom_metadata_map
    ends = np.array(json.loads(meta[EDGES_KEY]), dtype=np.int64).reshape(-1, 2)
    col, rows, cols, fr, fc, base = {}, [], [], [], [], []
    for u, v, data in matching.edges():
        key = (min(u, v), max(u, v)) if v is not None else (u, -1)
        j = col[key] = len(base)
        base.append(data["weight"])
        rows += [u] + ([v] if v is not None else [])
        cols += [j] * (1 if v is None else 2)
        fr += sorted(data["fault_ids"])
        fc += [j] * len(data["fault_ids"])
    model_cols = []
    for i, (a, b) in enumerate(ends.tolist()):
        key = (min(a, b), max(a, b)) if b >= 0 else (a, -1)
        if key not in col:
            fail(f"model edge {i} (detector {a} to {'the boundary' if b < 0 else f'detector {b}'}) "
                 "is not an edge of the DEM")
        model_cols.append(col[key])
    if len(set(model_cols)) != len(model_cols):
        fail(f"model metadata '{EDGES_KEY}' lists one edge twice")
    no = matching.num_fault_ids
    H = sp.csc_matrix((np.ones(len(rows), np.uint8), (rows, cols)), shape=(nd, len(base)))
    F = sp.csc_matrix((np.ones(len(fr), np.uint8), (fr, fc)), shape=(no, len(base)))
    thr = np.float32(float(meta["decision_threshold"]))
    return {"H": H, "F": F, "base": np.array(base), "cols": np.array(model_cols, np.int64), "thr": thr}


def weighted_shot(wt, logits, residual, frame, i):
    """Folds the model's edges where threshold 0 and the model's disagree into
    the residual and frame (in place) and matches on the DEM's graph with the
    model's edges at weight |logit|: the observables and the matching weight."""
    import pymatching
    if not np.isfinite(logits).all():
        fail(f"shot {i + 1}: an edge logit is not finite")
    lg = logits.astype(np.float32)
    flip = np.zeros(len(wt["base"]), np.uint8)
    flip[wt["cols"]] = (lg > 0) != (lg > wt["thr"])
    residual ^= (wt["H"] @ flip % 2).astype(np.uint8)
    frame ^= (wt["F"] @ flip % 2).astype(np.uint8)
    w = wt["base"].copy()
    w[wt["cols"]] = np.abs(lg.astype(np.float64))
    m = pymatching.Matching.from_check_matrix(wt["H"], weights=w, faults_matrix=wt["F"],
                                              use_virtual_boundary_node=True)
    obs, weight = m.decode(residual, return_weight=True)
    return obs, weight


# --- shots -----------------------------------------------------------------

def manifest_entry(manifest, model):
    with open(manifest) as f:
        data = json.load(f)
    base = os.path.dirname(os.path.abspath(manifest))
    want = os.path.realpath(model)
    for e in data.get("models", []):
        if os.path.realpath(os.path.join(base, e["file"])) == want:
            return e
    fail(f"{model} is not listed in {manifest}")


def shots(args):
    import stim
    if args.manifest:
        if not args.model:
            fail("--manifest needs --model")
        entry = manifest_entry(args.manifest, args.model)
        spec = dict(entry["circuit"])
        if args.noise is not None and args.p is None:
            fail("--noise sets the noise model at strength --p: give --p too")
        if args.p is not None:
            # The entry's circuit at another strength: of the kind --noise names,
            # else only where its noise is the uniform circuit-level kind --p
            # means (never silently ignored).
            noise = spec.get("noise", {})
            if args.noise is None and (set(noise) != set(layout.NOISE_KEYS) or len(set(noise.values())) != 1):
                fail(f"--p: the manifest circuit of {args.model} has noise {json.dumps(noise)}, "
                     "not the uniform circuit-level noise --p sets; leave --p out, or name the noise "
                     "model (--noise si1000)")
            if not 0 < args.p < 0.5:
                fail(f"--p {args.p}: a noise strength is in (0, 0.5)")
            spec["noise"] = layout.noise_spec(args.noise or "depolarizing", args.p)
    else:
        if args.task is None or args.distance is None or args.p is None:
            fail("give --manifest and --model, or --task, --distance and --p")
        if not 0 < args.p < 0.5:
            fail(f"--p {args.p}: a noise strength is in (0, 0.5)")
        spec = {"task": args.task, "distance": args.distance,
                "rounds": args.rounds or args.distance,
                "noise": layout.noise_spec(args.noise or "depolarizing", args.p)}
        entry = None
    circuit = layout.make_circuit(spec)
    dem = circuit.detector_error_model(decompose_errors=True)
    if entry is not None:
        for key, have in (("num_detectors", dem.num_detectors),
                          ("num_observables", dem.num_observables)):
            if key in entry and int(entry[key]) != have:
                fail(f"manifest says {key} {entry[key]}, the circuit's DEM has {have}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "circuit.dem"), "w") as f:
        f.write(str(dem))
    dets, obs = circuit.compile_detector_sampler(seed=args.seed).sample(
        args.shots, separate_observables=True)
    stim.write_shot_data_file(data=dets, path=os.path.join(args.out, "shots.b8"), format="b8",
                              num_detectors=dem.num_detectors)
    stim.write_shot_data_file(data=obs, path=os.path.join(args.out, "obs.01"), format="01",
                              num_observables=dem.num_observables)
    with open(os.path.join(args.out, "info.txt"), "w") as f:
        f.write(f"num_detectors {dem.num_detectors}\nnum_observables {dem.num_observables}\n"
                f"shots {args.shots}\ncircuit {json.dumps(spec, sort_keys=True)}\n")
    print(f"reference_eval: {args.shots} shots of {spec['task']} d={spec['distance']} "
          f"({dem.num_detectors} detectors, noise {json.dumps(spec['noise'], sort_keys=True)}) in {args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--model", required=True)
    p.add_argument("--dem", required=True)
    p.add_argument("--in", dest="input", required=True)
    p.add_argument("--in_format", default="01", choices=["01", "b8", "dets"])
    p.add_argument("--in_includes_appended_observables", dest="appended", action="store_true")
    p.add_argument("--out", required=True)
    p.add_argument("--residual_out", help="also write the residual events (b8), for tie checks")
    p.add_argument("--weights_out", help="also write PyMatching's matching weight on each "
                   "residual (one per line), for tie checks")
    p.add_argument("--frame_out", help="also write the model's logical_frame (01), for tie checks")
    p.add_argument("--predecoder_weights", dest="weights", default="auto", choices=["auto", "on", "off"],
                   help="weighted matching with the model's edge logits (as qec-decode's flag)")
    p.add_argument("--skip_layout_check", action="store_true",
                   help="do not compare the detector layout the model records with the DEM's "
                        "coordinates (as qec-decode --skip_layout_check)")
    s = sub.add_parser("shots")
    s.add_argument("--manifest")
    s.add_argument("--model")
    s.add_argument("--task")
    s.add_argument("--distance", type=int)
    s.add_argument("--rounds", type=int)
    s.add_argument("--p", type=float)
    s.add_argument("--noise", choices=["depolarizing", "si1000"],
                   help="the noise model at strength --p (default: circuit-level depolarizing)")
    s.add_argument("--shots", type=int, default=10000)
    s.add_argument("--seed", type=int, default=20261124)
    s.add_argument("--out", required=True)
    args = ap.parse_args()
    {"predict": predict, "shots": shots}[args.cmd](args)


if __name__ == "__main__":
    main()
