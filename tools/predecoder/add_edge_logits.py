#!/usr/bin/env python3
"""Adds the optional output `edge_logits` (weighted matching, models/README.md)
to models of the manifest that were exported without it: each listed file is
exported again from its own Conv weights (export.build_onnx with
edge_logits=True, the entry's circuit and decision threshold), checked (its
residual and frame identical to the old file's on 200 shots with
onnxruntime; every output against the PyTorch arithmetic), written over the
old file, and its manifest entry updated (sha256, outputs). Training facts
in the entry are kept.

    add_edge_logits.py models/manifest.json predecoder_d7_z.onnx [...]
"""
import hashlib
import json
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as X  # noqa: E402
import layout as L  # noqa: E402


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    path, files = argv[1], argv[2:]
    base = os.path.dirname(os.path.abspath(path))
    with open(path) as f:
        manifest = json.load(f)
    by_file = {e["file"]: e for e in manifest["models"]}
    for name in files:
        e = by_file.get(name)
        if e is None:
            sys.exit(f"add_edge_logits: {name} is not in {path}")
        file = os.path.join(base, name)
        old = onnx.load(file)
        model, props = X.load_model_from_onnx(file)
        circuit = L.make_circuit(e["circuit"])
        lay = L.build_layout(circuit)
        th = float(e["decision_threshold"])
        if float(props.get("decision_threshold", th)) != th:
            sys.exit(f"add_edge_logits: {name}: the file's decision threshold is not the manifest's")
        new = X.build_onnx(model, lay, e["circuit"], th, edge_logits=True)
        bad = X.verify(new, model, lay, circuit, 200, threshold=th)
        same = same_outputs(old, new, circuit)
        if bad or not same:
            sys.exit(f"add_edge_logits: {name}: {bad} shots differ from PyTorch; residual and frame "
                     f"{'identical' if same else 'NOT identical'} to the old file's")
        onnx.save(new, file)
        with open(file, "rb") as f:
            e["sha256"] = hashlib.sha256(f.read()).hexdigest()
        n_edges = len(L.edge_list(lay)[0])
        e["outputs"] = e["outputs"][:2] + [{"name": X.EDGE_LOGITS, "dtype": "float32", "shape": [1, n_edges],
                                            "order": f"metadata '{X.EDGES_KEY}'"}]
        print(f"{name}: {os.path.getsize(file)} bytes, {n_edges} edges, sha256 {e['sha256'][:12]}")
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def same_outputs(old, new, circuit, shots=200):
    """The residual and frame of the two models agree on every bit of `shots` shots."""
    import onnxruntime as ort
    a = ort.InferenceSession(old.SerializeToString(), providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(new.SerializeToString(), providers=["CPUExecutionProvider"])
    dets, _ = circuit.compile_detector_sampler(seed=4242).sample(shots, separate_observables=True)
    names = [X.RESIDUAL, X.FRAME]
    for i in range(shots):
        x = {X.INPUT: dets[i:i + 1].astype(np.int32)}
        if not all(np.array_equal(p, q) for p, q in zip(a.run(names, x), b.run(names, x))):
            return False
    return True


if __name__ == "__main__":
    main(sys.argv)
