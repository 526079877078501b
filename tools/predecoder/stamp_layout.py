#!/usr/bin/env python3
"""Records the detector layout in models exported before it was part of the
contract: adds (or replaces) the metadata entry `detector_coordinates` of each
model listed in the manifest, from the circuit its entry names, and updates
the entry's sha256. Weights and graph are untouched (the graph is compared
before and after).

    stamp_layout.py models/manifest.json
"""
import hashlib
import json
import os
import sys

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout as L  # noqa: E402


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    path = argv[1]
    base = os.path.dirname(os.path.abspath(path))
    with open(path) as f:
        manifest = json.load(f)
    for e in manifest["models"]:
        file = os.path.join(base, e["file"])
        m = onnx.load(file)
        graph = m.graph.SerializeToString()
        props = {p.key: p.value for p in m.metadata_props}
        props[L.COORDS_KEY] = L.coordinates_metadata(L.make_circuit(e["circuit"]))
        onnx.helper.set_model_props(m, props)
        assert m.graph.SerializeToString() == graph
        onnx.save(m, file)
        with open(file, "rb") as f:
            e["sha256"] = hashlib.sha256(f.read()).hexdigest()
        print(f"{e['file']}: {os.path.getsize(file)} bytes, sha256 {e['sha256'][:12]}")
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
