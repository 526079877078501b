#!/usr/bin/env python3
"""Exports a trained predecoder for one circuit as an ONNX model (the
contract of models/README.md) and records it in the manifest.

    python3 export.py --ckpt ckpt.pt --basis z --distance 13 [--rounds 13] [--p 0.003]
                      --out models/predecoder_d13_z.onnx [--manifest models/manifest.json]

The graph: detectors INT32 [1, N] -> float -> scattered onto the (T, H, W)
grid (Gather from the events with a zero appended) -> the site masks
concatenated -> the convolutions -> edges = (logit > threshold) x the edge
slots that exist -> per detector, the count of applied edges touching it
(Gather of its incident slots, summed by a short MatMul) -> residual =
(events + counts) mod 2 in INT32; frame = (applied edges that flip an
observable, gathered, . their observable masks) mod 2. `mod 2` is x - (x / 2) * 2 with
integer division, so only operators the project's NN engine runs are used.

The exported model is checked against the PyTorch arithmetic on stim shots
(onnxruntime, FP32): every residual bit and frame bit must agree.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout as L  # noqa: E402
import net  # noqa: E402

OPSET = 17
INPUT, RESIDUAL, FRAME = "detectors", "residual_detectors", "logical_frame"
# Optional output 2 (--edge-logits): the network's logit of every matching
# edge, in the order of the metadata entry EDGES_KEY (a JSON list of
# [detector, detector or -1 for the boundary] pairs; layout.edge_list).
# Weighted matching: weight |logit| per edge on the residual of threshold 0.
EDGE_LOGITS, EDGES_KEY = "edge_logits", "edge_endpoints"


def build_onnx(model: net.Predecoder, lay: L.Layout, spec: dict, threshold: float = 0.0,
               edge_logits: bool = False) -> onnx.ModelProto:
    T, H, W = lay.shape
    thw, n, nobs, K = T * H * W, lay.num_detectors, lay.num_observables, L.NUM_EDGE_TYPES
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    ev = node("Cast", [INPUT], "events_f", to=TensorProto.FLOAT)
    pad = node("Concat", [ev, const("zero_1x1", np.zeros((1, 1), np.float32))], "events_pad", axis=1)
    flat = node("Gather", [pad, const("cell_source", lay.cell_source())], "grid_flat", axis=1)
    grid = node("Reshape", [flat, const("grid_shape", np.array([1, 1, T, H, W], np.int64))], "grid")
    sites = const("site_masks", np.stack([lay.site_x, lay.site_z])[None].astype(np.float32))
    x = node("Concat", [grid, sites], "net_input", axis=1)
    for i, conv in enumerate(model.convs):
        w = const(f"conv{i}.weight", conv.weight.detach().float().cpu().numpy())
        b = const(f"conv{i}.bias", conv.bias.detach().float().cpu().numpy())
        x = node("Conv", [x, w, b], f"conv{i}", kernel_shape=[3, 3, 3], pads=[1] * 6)
        if i + 1 < len(model.convs):
            x = node("Relu", [x], f"relu{i}")
    above = node("Greater", [x, const("decision_threshold", np.array(threshold, np.float32))], "edge_above")
    edges_f = node("Cast", [above], "edges_all", to=TensorProto.FLOAT)
    edges = node("Mul", [edges_f, const("slot_valid", lay.slot_valid[None])], "edges")
    # Syndrome counts and frame by gathers over the flattened edge slots with
    # a zero appended (index K*THW): each detector sums its incident slots
    # (padded incidence lists); the frame sums the slots that flip an
    # observable. Gathers and short MatMuls: no 9-channel convolution and no
    # long serial dot product on the GPU.
    incident, obs_slots, obs_rows = incidence(lay)
    flat_edges = node("Reshape", [edges, const("edges_flat_shape", np.array([1, K * thw], np.int64))],
                      "edges_flat")
    padded = node("Concat", [flat_edges, const("zero_slot", np.zeros((1, 1), np.float32))],
                  "edges_pad", axis=1)
    deg = incident.shape[1]
    inc = node("Gather", [padded, const("detector_incident_slots", incident.reshape(-1))],
               "incident_flat", axis=1)
    inc = node("Reshape", [inc, const("incident_shape", np.array([1, n, deg], np.int64))], "incident")
    counts = node("MatMul", [inc, const("ones_deg", np.ones((deg, 1), np.float32))], "counts_col")
    counts = node("Reshape", [counts, const("counts_shape", np.array([1, n], np.int64))], "counts_dets")
    counts = node("Cast", [counts], "counts_i", to=TensorProto.INT32)
    two = const("two_i", np.array(2, np.int32))

    def mod2(src, out):
        half = node("Div", [src, two], out + "_half")
        return node("Sub", [src, node("Mul", [half, two], out + "_even")], out)

    total = node("Add", [INPUT, counts], "events_plus_counts")
    mod2(total, RESIDUAL)
    fsl = node("Gather", [padded, const("observable_slots", obs_slots)], "frame_slots", axis=1)
    fr = node("MatMul", [fsl, const("slot_observables", obs_rows)], "frame_counts")
    mod2(node("Cast", [fr], "frame_counts_i", to=TensorProto.INT32), FRAME)

    outputs = [helper.make_tensor_value_info(RESIDUAL, TensorProto.INT32, [1, n]),
               helper.make_tensor_value_info(FRAME, TensorProto.INT32, [1, nobs])]
    props = {}
    if edge_logits:
        slots, ends, _ = L.edge_list(lay)
        lf = node("Reshape", [x, const("logits_flat_shape", np.array([1, K * thw], np.int64))], "logits_flat")
        node("Gather", [lf, const("edge_slots", slots)], EDGE_LOGITS, axis=1)
        outputs.append(helper.make_tensor_value_info(EDGE_LOGITS, TensorProto.FLOAT, [1, len(slots)]))
        props[EDGES_KEY] = json.dumps(ends.tolist(), separators=(",", ":"))
    graph = helper.make_graph(
        nodes, "surface_code_predecoder",
        [helper.make_tensor_value_info(INPUT, TensorProto.INT32, [1, n])],
        outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="cudaq-realtime tools/predecoder")
    m.ir_version = 8
    helper.set_model_props(m, {"circuit": L.spec_str(spec), "edge_types": json.dumps(L.EDGE_TYPES),
                               "architecture": json.dumps(model.config()),
                               "decision_threshold": repr(float(threshold)),
                               L.COORDS_KEY: L.coordinates_metadata(L.make_circuit(spec)), **props})
    onnx.checker.check_model(m)
    return m


def incidence(lay: L.Layout):
    """(incident [N, D] flat slot indices touching each detector, padded with
    the zero slot K*THW; obs_slots [S] slots that flip an observable; their
    observable rows [S, Lobs])."""
    T, H, W = lay.shape
    thw, K = T * H * W, L.NUM_EDGE_TYPES
    cell_det = {int(c): i for i, c in enumerate(lay.det_cell)}
    lists = [[] for _ in range(lay.num_detectors)]
    ks, cells = np.nonzero(lay.slot_valid.reshape(K, thw))
    for k, cell in zip(ks.tolist(), cells.tolist()):
        slot = k * thw + cell
        lists[cell_det[cell]].append(slot)
        off = L.EDGE_TYPES[k]
        if off is not None:
            t, x, y = cell // (H * W), (cell // W) % H, cell % W
            far = ((t + off[0]) * H + x + off[1]) * W + y + off[2]
            lists[cell_det[far]].append(slot)
    deg = max(1, max(len(li) for li in lists))
    incident = np.full((lay.num_detectors, deg), K * thw, np.int64)
    for i, li in enumerate(lists):
        incident[i, :len(li)] = li
    obs = lay.slot_obs.reshape(K * thw, lay.num_observables)
    obs_slots = np.nonzero(obs.any(axis=1))[0].astype(np.int64)
    if len(obs_slots) == 0:
        obs_slots = np.array([K * thw], np.int64)
        rows = np.zeros((1, lay.num_observables), np.float32)
    else:
        rows = obs[obs_slots].astype(np.float32)
    return incident, obs_slots, rows


def load_model(ckpt_path: str) -> tuple[net.Predecoder, dict]:
    ck = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    model = net.Predecoder(**ck["config"])
    model.load_state_dict(ck["model"])
    return model.eval(), ck


def load_model_from_onnx(path: str) -> tuple[net.Predecoder, dict]:
    """The network of an exported model (its Conv initializers, in graph
    order) and its metadata properties: every shipped file carries the whole
    set of weights, so a model can be evaluated without its checkpoint."""
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    if len(convs) < 2:
        raise ValueError(f"{path}: {len(convs)} Conv nodes, a predecoder has at least 2")
    props = {p.key: p.value for p in m.metadata_props}
    weights = []
    for n in convs:
        if len(n.input) < 3 or n.input[1] not in inits or n.input[2] not in inits:
            raise ValueError(f"{path}: Conv node {n.name!r} lacks a constant weight or bias")
        weights.append((inits[n.input[1]], inits[n.input[2]]))
    width = int(weights[0][0].shape[0])
    model = net.Predecoder(width=width, layers=len(convs))
    for conv, (w, b) in zip(model.convs, weights):
        if tuple(conv.weight.shape) != w.shape or tuple(conv.bias.shape) != b.shape:
            raise ValueError(f"{path}: Conv weight {w.shape} / bias {b.shape} do not fit the network "
                             f"{tuple(conv.weight.shape)} / {tuple(conv.bias.shape)}")
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(w.astype(np.float32)))
            conv.bias.copy_(torch.from_numpy(b.astype(np.float32)))
    return model.eval(), props


def verify(m: onnx.ModelProto, model: net.Predecoder, lay: L.Layout, circuit, shots=200, seed=12345,
           threshold=0.0):
    """onnxruntime vs the PyTorch arithmetic on stim shots: all bits equal."""
    import onnxruntime as ort
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    dets, _ = circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    geo = net.Geometry(lay, "cpu")
    dt = torch.tensor(dets, dtype=torch.float32)
    with torch.no_grad():
        g = geo.grid_from_dets(dt)
        raw = model(geo.inputs(g))
        _, res, frame = geo.apply_corrections(raw, g, threshold)
        logits = raw.flatten(1)[:, L.edge_list(lay)[0]].numpy()  # output 2, where the file has it
    res_dets = res.flatten(1)[:, geo.det_cell].numpy().astype(np.int32)
    frame = frame.numpy().astype(np.int32)
    bad = 0
    for i in range(shots):
        out = sess.run(None, {INPUT: dets[i:i + 1].astype(np.int32)})
        ok = np.array_equal(out[0][0], res_dets[i]) and np.array_equal(out[1][0], frame[i])
        if len(out) > 2:  # edge_logits: FP32 against FP32, summation order aside
            ok = ok and np.allclose(out[2][0], logits[i], rtol=1e-4, atol=1e-4)
        bad += int(not ok)
    return bad


def manifest_entry(path, model, ck, lay, spec, manifest_dir, threshold, edge_logits=False):
    T, H, W = lay.shape
    rel = os.path.relpath(path, manifest_dir)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "file": rel, "sha256": digest,
        "distance": spec["distance"], "rounds": spec["rounds"],
        "basis": spec["task"].rsplit("_", 1)[1].upper(),
        "circuit": spec,
        "num_detectors": lay.num_detectors, "num_observables": lay.num_observables,
        "inputs": [{"name": INPUT, "dtype": "int32", "shape": [1, lay.num_detectors]}],
        "outputs": [{"name": RESIDUAL, "dtype": "int32", "shape": [1, lay.num_detectors]},
                    {"name": FRAME, "dtype": "int32", "shape": [1, lay.num_observables]}] +
                   ([{"name": EDGE_LOGITS, "dtype": "float32", "shape": [1, len(L.edge_list(lay)[0])],
                      "order": f"metadata '{EDGES_KEY}'"}] if edge_logits else []),
        "decision_threshold": threshold,
        "detector_order": "stim detector index of the circuit's detector error model (D0..D{N-1})",
        "grid": {"shape_t_h_w": [T, H, W],
                 "cell_of_detector": "t * H * W + ((x - min x) / 2) * W + (y - min y) / 2 from stim "
                                     "detector coordinates (x, y, t), t counted from the first round"},
        "architecture": {**model.config(), "kernel": 3, "in_channels": L.NUM_IN_CHANNELS,
                         "out_channels": L.NUM_EDGE_TYPES,
                         "parameters": net.count_params(model),
                         "flops_per_inference": net.flops_per_inference(model, lay.shape)},
        # The run's arguments first: their "steps" (a per-run cap) and "device" ("cuda")
        # must not hide the checkpoint's step count and device name.
        "training": {**ck.get("train_args", {}), "steps": ck["step"],
                     "seconds": round(ck.get("trained_s", 0)), "device": ck.get("device", "?")},
    }


def update_manifest(manifest_path, entry):
    data = {"contract": "models/README.md", "models": []}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            data = json.load(f)
    data["models"] = [m for m in data["models"] if m["file"] != entry["file"]] + [entry]
    data["models"].sort(key=lambda m: (m["distance"], m["basis"], m["file"]))
    with open(manifest_path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--basis", required=True, choices=["x", "z", "X", "Z"])
    ap.add_argument("--distance", type=int, required=True)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--p", type=float, default=0.003, help="noise strength of the circuit named in the manifest")
    ap.add_argument("--noise", default="depolarizing", choices=["depolarizing", "si1000"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--manifest")
    ap.add_argument("--verify-shots", type=int, default=200)
    ap.add_argument("--threshold", type=float, default=3.0,
                    help="apply an edge when its logit is above this (higher: fewer, surer corrections)")
    ap.add_argument("--edge-logits", action="store_true",
                    help=f"add output 2 '{EDGE_LOGITS}' and the '{EDGES_KEY}' metadata (weighted matching: "
                         "consumers apply the edges of positive logit themselves, whatever --threshold)")
    a = ap.parse_args(argv)
    spec = L.circuit_spec(a.basis, a.distance, a.rounds or a.distance, a.p, a.noise)
    circuit = L.make_circuit(spec)
    lay = L.build_layout(circuit)
    model, ck = load_model(a.ckpt)
    m = build_onnx(model, lay, spec, a.threshold, a.edge_logits)
    onnx.save(m, a.out)
    bad = verify(m, model, lay, circuit, a.verify_shots, threshold=a.threshold) if a.verify_shots else 0
    size = os.path.getsize(a.out)
    print(f"{a.out}: {size / 1e6:.2f} MB, {lay.num_detectors} detectors, grid {lay.shape}, "
          f"verify: {bad} of {a.verify_shots} shots differ from PyTorch")
    if bad:
        sys.exit(1)
    if a.manifest:
        update_manifest(a.manifest, manifest_entry(a.out, model, ck, lay, spec,
                                                   os.path.dirname(os.path.abspath(a.manifest)), a.threshold,
                                                   a.edge_logits))


if __name__ == "__main__":
    main()
