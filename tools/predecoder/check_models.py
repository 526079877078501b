#!/usr/bin/env python3
"""Checks every model of models/manifest.json against the model contract
(models/README.md) and its manifest entry:

- the file exists, its sha256 matches, it is under 10 MB;
- ONNX: opset, one input `detectors` INT32 [1, N], outputs
  `residual_detectors` INT32 [1, N] and `logical_frame` INT32 [1, L], no
  operator outside the set the project's NN engine runs;
- the circuit the entry names (stim task + noise) has N detectors and L
  observables, and the model's `detector_coordinates` metadata (the layout
  the C side checks DEMs against) is that circuit's;
- onnxruntime on 20 shots of that circuit gives 0/1 outputs, and the
  residual with its frame is consistent: MWPM on the residual, XOR the frame,
  is a valid prediction (PyMatching decodes the residual of every shot);
- where the optional output `edge_logits` FLOAT [1, E] is there (weighted
  matching): its metadata `edge_endpoints` is the circuit's matching edges in
  the network's order (layout.edge_list), E of them, and the logits are
  finite.

Prints one line per model and exits 1 if any check fails.
    check_models.py models/manifest.json
"""
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout as L  # noqa: E402

ENGINE_OPS = {"Conv", "Relu", "Gelu", "Sigmoid", "Erf", "Add", "Sub", "Mul", "Div", "MatMul", "Gemm",
              "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Gather", "Cast",
              "Greater", "Less", "Equal", "Where", "Identity", "Constant"}
INT32 = onnx.TensorProto.INT32


def shape_of(vi):
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def check(entry, base):
    errs = []
    path = os.path.join(base, entry["file"])
    if not os.path.exists(path):
        return [f"missing file {path}"]
    data = open(path, "rb").read()
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        errs.append("sha256 differs from the manifest")
    if len(data) >= 10_000_000:
        errs.append(f"{len(data)} bytes: not under 10 MB")
    m = onnx.load_from_string(data)
    opset = {o.domain: o.version for o in m.opset_import}.get("", 0)
    if not 13 <= opset <= 20:
        errs.append(f"opset {opset} outside 13-20")
    ops = {n.op_type for n in m.graph.node}
    if ops - ENGINE_OPS:
        errs.append(f"operators the engine does not run: {sorted(ops - ENGINE_OPS)}")
    n, nobs = entry["num_detectors"], entry["num_observables"]
    want_in = [("detectors", [1, n])]
    want_out = [("residual_detectors", [1, n]), ("logical_frame", [1, nobs])]
    got_in = [(v.name, shape_of(v), v.type.tensor_type.elem_type) for v in m.graph.input]
    got_out = [(v.name, shape_of(v), v.type.tensor_type.elem_type) for v in m.graph.output]
    weighted = len(got_out) == 3 and got_out[2][0] == "edge_logits"
    if [(a, b) for a, b, _ in got_in] != want_in or any(t != INT32 for *_, t in got_in):
        errs.append(f"inputs {got_in}, contract {want_in} INT32")
    if ([(a, b) for a, b, _ in got_out[:2]] != want_out or any(t != INT32 for *_, t in got_out[:2]) or
            len(got_out) > 2 + weighted):
        errs.append(f"outputs {got_out}, contract {want_out} INT32 [+ edge_logits FLOAT]")
    for io, decl in (("inputs", entry["inputs"]), ("outputs", entry["outputs"])):
        got = got_in if io == "inputs" else got_out
        if [(d["name"], d["shape"]) for d in decl] != [(a, b) for a, b, _ in got]:
            errs.append(f"manifest {io} do not match the file")
    circuit = L.make_circuit(entry["circuit"])
    dem = circuit.detector_error_model(decompose_errors=True)
    if (dem.num_detectors, dem.num_observables) != (n, nobs):
        errs.append(f"circuit has {dem.num_detectors} detectors / {dem.num_observables} observables, "
                    f"manifest {n} / {nobs}")
        return errs
    props = {p.key: p.value for p in m.metadata_props}
    if props.get(L.COORDS_KEY) != L.coordinates_metadata(circuit):
        errs.append(f"metadata '{L.COORDS_KEY}' is {'not' if L.COORDS_KEY in props else 'missing:'} "
                    "the detector coordinates of the entry's circuit")
    if weighted:
        _, ends, _ = L.edge_list(L.build_layout(circuit))
        if props.get("edge_endpoints") != json.dumps(ends.tolist(), separators=(",", ":")):
            errs.append("metadata 'edge_endpoints' is not the circuit's matching edges (layout.edge_list)")
        if got_out[2][1:] != ([1, len(ends)], onnx.TensorProto.FLOAT):
            errs.append(f"output edge_logits {got_out[2]}, want FLOAT [1, {len(ends)}]")
    if errs:
        return errs
    import pymatching
    matching = pymatching.Matching.from_detector_error_model(dem)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    dets, _ = circuit.compile_detector_sampler(seed=31337).sample(
        20 if n < 5000 else 2, separate_observables=True)
    for i, shot in enumerate(dets):
        res, frame, *logits = sess.run(None, {"detectors": shot[None].astype(np.int32)})
        if not (np.isin(res, (0, 1)).all() and np.isin(frame, (0, 1)).all()):
            errs.append(f"shot {i}: outputs not 0/1")
            break
        if logits and not np.isfinite(logits[0]).all():
            errs.append(f"shot {i}: an edge logit is not finite")
            break
        matching.decode(res[0].astype(np.uint8))  # raises if the residual cannot be matched
    return errs


def main():
    manifest = sys.argv[1] if len(sys.argv) > 1 else "models/manifest.json"
    with open(manifest) as f:
        entries = json.load(f)["models"]
    base = os.path.dirname(os.path.abspath(manifest))
    bad = 0
    for e in entries:
        errs = check(e, base)
        print(f"{'ok  ' if not errs else 'FAIL'} {e['file']}: d={e['distance']} {e['basis']} "
              f"N={e['num_detectors']}" + ("" if not errs else ": " + "; ".join(errs)))
        bad += bool(errs)
    print(f"check_models: {len(entries) - bad} of {len(entries)} models fit the contract")
    sys.exit(1 if bad or not entries else 0)


if __name__ == "__main__":
    main()
