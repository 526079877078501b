#!/usr/bin/env python3
"""Small ONNX predecoders for the tests of qec-decode --predecoder, built with
onnx.helper for one DEM (N detectors, L observables; models/README.md has the
contract). Nothing here is trained: each model is a fixed rule, so that the C
side and the Python reference (reference_eval.py) can be compared exactly.

  gen_test_models.py --dem C.dem --out DIR

Models that follow the contract:
  identity.onnx   residual = detectors, frame = 0
  frame.onnx      residual = detectors, frame = the first L detectors (an
                  arbitrary frame: checks the XOR with the MWPM prediction)
  pairs.onnx      clears fixed disjoint pairs of detectors joined by the
                  likeliest edges of the DEM when both events are present, and
                  flips the frame by those edges' observables (integer Gather,
                  Mul, float MatMul, Cast, Div, Sub)
  nonbinary.onnx  residual = 2 x detectors (values outside 0/1 at run time)
  layout_shifted.onnx  identity, recording the DEM's detector coordinates
                  shifted by (2, 2, 3) as its layout (metadata
                  `detector_coordinates`): accepted, the same layout moved
  layout_spaced.onnx   the same, shifted by (-1.5, 0, -4) and written with
                  spaces, newlines, floats, exponents and negative numbers
  late_nonbinary.onnx (with --shots S.b8) residual = detectors, but 2 x
                  detectors on the shots where detector k fires: k fires in
                  none of the file's first 16 shots (a run's warm-up passes)
                  and in as many later ones as any such detector (the
                  realtime fault tests: those requests are answered with the
                  predecoder's error status, the rest decoded)
  weighted.onnx   residual = detectors, frame = 0, and output 2 edge_logits
                  (weighted matching, models/README.md): over the DEM's
                  matching edges (metadata edge_endpoints, decision threshold
                  2), a fixed rule: -4 + a small per-edge offset, +3 per
                  endpoint with an event, so edges between two events land
                  on both sides of the threshold (folded in, or not)
Models that must be refused at load (DIR/refusals.txt: "FILE|PHRASE" lines,
the phrase the refusal message must contain):
  bad_count, bad_dtype, bad_missing_output, bad_frame_len, bad_input_name,
  bad_two_inputs, bad_output_dtype, bad_output_name; and identity models
  whose recorded layout is not the DEM's: bad_layout (two detectors'
  coordinates swapped), bad_layout_count (one detector short),
  bad_layout_json, bad_layout_trailing, bad_layout_hex (not a JSON list of
  lists of numbers); weighted models with a broken edge list:
  bad_weights_no_edges (no edge_endpoints), bad_weights_count (one edge
  short), bad_weights_edge (an edge the DEM does not have), bad_weights_json,
  bad_weights_twice (one edge listed twice), bad_weights_comma (a trailing
  comma), bad_weights_dtype (int32 logits).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import stim
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout import COORDS_KEY, components, coordinates_metadata  # noqa: E402  (one home)

I32, F = TP.INT32, TP.FLOAT


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits=()):
    """inputs / outputs: [(name, dtype, shape)]."""
    vi = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    vo = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    g = helper.make_graph(nodes, "predecoder_test", vi, vo, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="cudaq-predecoder-test")
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def likely_pairs(dem, limit):
    """Disjoint detector pairs joined by the likeliest two-detector components
    of the DEM (first component seen wins for its observables)."""
    edges = {}
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        p = inst.args_copy()[0]
        for c in components(inst):
            ds = sorted(t.val for t in c if t.is_relative_detector_id())
            obs = sum(1 << t.val for t in c if t.is_logical_observable_id())
            if len(ds) == 2 and tuple(ds) not in edges:
                edges[tuple(ds)] = (p, obs)
    used, pairs = set(), []
    for (a, b), (p, obs) in sorted(edges.items(), key=lambda kv: (-kv[1][0], kv[0])):
        if a in used or b in used:
            continue
        used.update((a, b))
        pairs.append((a, b, obs))
        if len(pairs) == limit:
            break
    return pairs


def io(n, l, det_type=I32, res_type=I32, frame_type=I32, frame_len=None, n_in=None):
    return ([("detectors", det_type, [1, n if n_in is None else n_in])],
            [("residual_detectors", res_type, [1, n]),
             ("logical_frame", frame_type, [1, l if frame_len is None else frame_len])])


def zero_frame(l):
    """Nodes making logical_frame = 0 * detectors[:, :L]."""
    return ([helper.make_node("Slice", ["detectors", "s0", "sl", "ax1"], ["head"]),
             helper.make_node("Mul", ["head", "zero"], ["logical_frame"])],
            [const("s0", np.array([0], np.int64)), const("sl", np.array([l], np.int64)),
             const("ax1", np.array([1], np.int64)), const("zero", np.array(0, np.int32))])


def pairs_model(n, l, pairs):
    k = len(pairs)
    ia = np.array([a for a, _, _ in pairs], np.int64)
    ib = np.array([b for _, b, _ in pairs], np.int64)
    clear = np.zeros((k, n), np.float32)
    flips = np.zeros((k, l), np.float32)
    for i, (a, b, obs) in enumerate(pairs):
        clear[i, a] = clear[i, b] = 1
        for j in range(l):
            flips[i, j] = (obs >> j) & 1
    nodes = [
        helper.make_node("Gather", ["detectors", "ia"], ["ea"], axis=1),
        helper.make_node("Gather", ["detectors", "ib"], ["eb"], axis=1),
        helper.make_node("Mul", ["ea", "eb"], ["both"]),              # [1, K] 0/1
        helper.make_node("Cast", ["both"], ["bothf"], to=F),
        helper.make_node("MatMul", ["bothf", "clear"], ["clrf"]),      # [1, N]
        helper.make_node("Cast", ["clrf"], ["clr"], to=I32),
        helper.make_node("Sub", ["detectors", "clr"], ["residual_detectors"]),
        helper.make_node("MatMul", ["bothf", "flips"], ["cntf"]),      # [1, L] counts
        helper.make_node("Cast", ["cntf"], ["cnt"], to=I32),
        helper.make_node("Div", ["cnt", "two"], ["half"]),
        helper.make_node("Mul", ["half", "two"], ["even"]),
        helper.make_node("Sub", ["cnt", "even"], ["logical_frame"]),  # parity
    ]
    inits = [const("ia", ia), const("ib", ib), const("clear", clear), const("flips", flips),
             const("two", np.array(2, np.int32))]
    return model(nodes, *io(n, l), inits)


def matching_edges(dem):
    """The DEM's graphlike edges, each once: [a, b] detector pairs and [a, -1]
    boundary edges, in first-seen order."""
    seen, ends = set(), []
    for inst in dem.flattened():
        if inst.type != "error" or inst.args_copy()[0] <= 0:
            continue
        for c in components(inst):
            ds = sorted(t.val for t in c if t.is_relative_detector_id())
            e = (ds[0], ds[1]) if len(ds) == 2 else (ds[0], -1) if len(ds) == 1 else None
            if e and e not in seen:
                seen.add(e)
                ends.append(list(e))
    return ends


def weighted_model(n, l, ends, threshold=2.0, logits_type=F, props_edges=None):
    """identity + zero frame + edge_logits = -4 + offset + 3 x (events at the endpoints)."""
    e = len(ends)
    rng = np.random.default_rng(7)
    w = np.zeros((n, e), np.float32)
    for i, (a, b) in enumerate(ends):
        w[a, i] = 3.0
        if b >= 0:
            w[b, i] = 3.0
    bias = (-4.0 + rng.uniform(-0.6, 0.6, e)).astype(np.float32)
    zf, zi = zero_frame(l)
    nodes = [helper.make_node("Identity", ["detectors"], ["residual_detectors"])] + zf + [
        helper.make_node("Cast", ["detectors"], ["ev_f"], to=F),
        helper.make_node("MatMul", ["ev_f", "w_edges"], ["lit"]),
        helper.make_node("Add", ["lit", "b_edges"], ["logits_f"])]
    if logits_type == F:
        nodes.append(helper.make_node("Identity", ["logits_f"], ["edge_logits"]))
    else:
        nodes.append(helper.make_node("Cast", ["logits_f"], ["edge_logits"], to=logits_type))
    inputs, outputs = io(n, l)
    m = model(nodes, inputs, outputs + [("edge_logits", logits_type, [1, e])],
              zi + [const("w_edges", w), const("b_edges", bias)])
    props = {"decision_threshold": repr(float(threshold))}
    edges = json.dumps(ends, separators=(",", ":")) if props_edges is None else props_edges
    if edges is not False:
        props["edge_endpoints"] = edges
    helper.set_model_props(m, props)
    return m


def gen(args):
    dem = stim.DetectorErrorModel.from_file(args.dem)
    n, l = dem.num_detectors, dem.num_observables
    if l < 1 or n < l:
        sys.exit(f"gen_test_models: need at least one observable and N >= L (N={n}, L={l})")
    os.makedirs(args.out, exist_ok=True)
    out = {}
    zf_nodes, zf_inits = zero_frame(l)
    ident = [helper.make_node("Identity", ["detectors"], ["residual_detectors"])]
    out["identity"] = model(ident + zf_nodes, *io(n, l), zf_inits)
    out["frame"] = model(ident + [helper.make_node("Slice", ["detectors", "s0", "sl", "ax1"],
                                                   ["logical_frame"])],
                         *io(n, l), zf_inits[:3])
    out["pairs"] = pairs_model(n, l, likely_pairs(dem, max(1, n // 4)))
    out["nonbinary"] = model([helper.make_node("Add", ["detectors", "detectors"],
                                               ["residual_detectors"])] + zf_nodes,
                             *io(n, l), zf_inits)
    if args.shots:
        k = late_detector(args.shots, n)
        zf4, zi4 = zero_frame(l)
        out["late_nonbinary"] = model(
            [helper.make_node("Gather", ["detectors", "k"], ["dk"], axis=1),
             helper.make_node("Mul", ["detectors", "dk"], ["extra"]),
             helper.make_node("Add", ["detectors", "extra"], ["residual_detectors"])] + zf4,
            *io(n, l), zi4 + [const("k", np.array([k], np.int64))])
    ends = matching_edges(dem)
    out["weighted"] = weighted_model(n, l, ends)
    coords = json.loads(coordinates_metadata(dem))

    def with_layout(rows):
        """The identity model, recording `rows` (or a raw string) as its layout."""
        zf, zi = zero_frame(l)
        m = model(ident + zf, *io(n, l), zi)
        helper.set_model_props(m, {COORDS_KEY: rows if isinstance(rows, str) else
                                   json.dumps(rows, separators=(",", ":")), "circuit": '{"task": "test"}'})
        return m

    if coords and all(len(c) == 3 for c in coords):
        out["layout_shifted"] = with_layout([[c[0] + 2, c[1] + 2, c[2] + 3] for c in coords])
        # the same layout, pretty-printed with floats, exponents and negative numbers
        out["layout_spaced"] = with_layout(json.dumps(
            [[float(c[0]) - 1.5, f"{c[1] * 10}e-1", c[2] - 4] for c in coords], indent=2).replace('"', ""))
    # Refusals: each breaks one rule of the contract.
    refusals = []

    def refuse(name, m, phrase):
        out[name] = m
        refusals.append(f"{name}.onnx|{phrase}")

    zf1, zi1 = zero_frame(l)
    refuse("bad_count", model([helper.make_node("Slice", ["detectors", "s0", "sn", "ax1"],
                                                ["residual_detectors"])] + zf1,
                              *io(n, l, n_in=n + 1),
                              zi1 + [const("sn", np.array([n], np.int64))]),
           f"model input 0 'detectors' has shape [1, {n + 1}], the DEM needs [1, {n}] "
           f"(it has {n} detectors)")
    refuse("bad_dtype", model([helper.make_node("Cast", ["detectors"], ["residual_detectors"],
                                                to=I32),
                               helper.make_node("Slice", ["residual_detectors", "s0", "sl", "ax1"],
                                                ["head"]),
                               helper.make_node("Mul", ["head", "zero"], ["logical_frame"])],
                              *io(n, l, det_type=F), zi1),
           "model input 0 'detectors' has element type float, the contract needs int32")
    refuse("bad_missing_output", model(ident, [("detectors", I32, [1, n])],
                                       [("residual_detectors", I32, [1, n])]),
           "model has 1 output, the contract needs 2 ('residual_detectors', 'logical_frame'): "
           "'logical_frame' is missing")
    zf2, zi2 = zero_frame(l + 1)
    refuse("bad_frame_len", model(ident + zf2, *io(n, l, frame_len=l + 1), zi2),
           f"model output 1 'logical_frame' has shape [1, {l + 1}], the DEM needs [1, {l}] "
           f"(it has {l} observable{'s' if l != 1 else ''})")
    zf3, zi3 = zero_frame(l)
    m = model([helper.make_node("Identity", ["x"], ["residual_detectors"]),
               helper.make_node("Slice", ["x", "s0", "sl", "ax1"], ["head"]),
               helper.make_node("Mul", ["head", "zero"], ["logical_frame"])],
              [("x", I32, [1, n])], io(n, l)[1], zi3)
    refuse("bad_input_name", m, "model input 0 is named 'x', the contract names it 'detectors'")
    m = model(ident + zf3 + [helper.make_node("Identity", ["extra"], ["extra_out"])],
              [("detectors", I32, [1, n]), ("extra", I32, [1, 1])],
              io(n, l)[1] + [("extra_out", I32, [1, 1])], zi3)
    refuse("bad_two_inputs", m, "model has 2 inputs, the contract needs exactly 1 ('detectors')")
    m = model(ident + zf3[:1] + [helper.make_node("Cast", ["head"], ["logical_frame"], to=F)],
              *io(n, l, frame_type=F), zi3[:3])
    refuse("bad_output_dtype", m,
           "model output 1 'logical_frame' has element type float, the contract needs int32")
    m = model([helper.make_node("Identity", ["detectors"], ["residual"])] + zf3,
              [("detectors", I32, [1, n])],
              [("residual", I32, [1, n]), ("logical_frame", I32, [1, l])], zi3)
    refuse("bad_output_name", m,
           "model output 0 is named 'residual', the contract names it 'residual_detectors'")
    if "layout_shifted" in out:
        k = next(i for i in range(n // 2, n - 1) if coords[i] != coords[i + 1])
        swapped = [list(c) for c in coords]
        swapped[k], swapped[k + 1] = swapped[k + 1], swapped[k]
        refuse("bad_layout", with_layout(swapped),
               f"the DEM's detector layout is not the model's (test): detector {k} is at (")
        refuse("bad_layout_count", with_layout(coords[:-1]),
               f"the model's layout (test) has {n - 1} detectors, the DEM {n}")
        flat = json.dumps(coords, separators=(",", ":"))
        for name, text in (("bad_layout_json", "[[0,1,2],oops]"),
                           ("bad_layout_trailing", flat[:-1] + ",]"),  # a comma before the last ']'
                           ("bad_layout_hex", "[[0x2,0,0]" + flat[flat.index("],") + 1:])):
            refuse(name, with_layout(text), f"model metadata '{COORDS_KEY}' is not a list of coordinate lists")
    refuse("bad_weights_no_edges", weighted_model(n, l, ends, props_edges=False),
           "model output 'edge_logits' needs the metadata 'edge_endpoints' (missing)")
    refuse("bad_weights_count", weighted_model(n, l, ends, props_edges=json.dumps(ends[:-1])),
           f"model metadata 'edge_endpoints' lists {len(ends) - 1} edges, output 'edge_logits' has {len(ends)}")
    have = {(a, b) for a, b in ends}
    far = next((a, b) for a in range(n) for b in range(n - 1, a, -1) if (a, b) not in have)
    refuse("bad_weights_edge", weighted_model(n, l, ends, props_edges=json.dumps([list(far)] + ends[1:])),
           f"model edge 0 (detector {far[0]} to detector {far[1]}) is not an edge of the DEM's matching graph")
    refuse("bad_weights_json", weighted_model(n, l, ends, props_edges=f"[[{ends[0][0]},{ends[0][1]}],[2]]"),
           "model metadata 'edge_endpoints' is not a list of [detector, detector or -1] pairs")
    refuse("bad_weights_twice", weighted_model(n, l, ends, props_edges=json.dumps([ends[0]] + ends[:-1])),
           "model metadata 'edge_endpoints' lists one edge twice (entries 0 and 1)")
    refuse("bad_weights_comma", weighted_model(n, l, ends[:1], props_edges=json.dumps(ends[:1])[:-1] + ",]"),
           "model metadata 'edge_endpoints' is not a list of [detector, detector or -1] pairs")
    refuse("bad_weights_dtype", weighted_model(n, l, ends, logits_type=I32),
           "model output 'edge_logits' must be float [1, E]")
    for name, m in out.items():
        with open(os.path.join(args.out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
    with open(os.path.join(args.out, "refusals.txt"), "w") as f:
        f.write("\n".join(refusals) + "\n")
    print(f"gen_test_models: {len(out)} models for N={n}, L={l} in {args.out}")


def late_detector(path, n):
    """The detector that fires in none of the first 16 shots of a b8 file
    and most often after them."""
    raw = np.fromfile(path, dtype=np.uint8)
    per = (n + 7) // 8
    bits = np.unpackbits(raw[: raw.size // per * per].reshape(-1, per), axis=1, bitorder="little")[:, :n]
    rate = bits[16:].sum(axis=0) * (bits[:16].sum(axis=0) == 0)
    k = int(np.argmax(rate))
    if rate[k] == 0:
        sys.exit("gen_test_models: no detector fires only after the first 16 shots")
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dem", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shots", help="a b8 shot file of the DEM: also make late_nonbinary.onnx")
    gen(ap.parse_args())


if __name__ == "__main__":
    main()
