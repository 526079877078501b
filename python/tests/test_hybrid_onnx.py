"""HybridDecoder (predecoder + MWPM) and OnnxModel against onnxruntime + PyMatching."""
import os

import numpy as np
import onnxruntime as ort
import pymatching
import pytest

import cudaq_realtime as cr
from conftest import sample, surface


@pytest.mark.parametrize("basis", ["x", "z"])
def test_find_model_picks_the_circuit_model(basis):
    dem = surface(5, 0.002, basis).detector_error_model(decompose_errors=True)
    path = cr.find_model(dem)
    assert os.path.basename(path) == f"predecoder_d5_{basis}.onnx" and os.path.isfile(path)


@pytest.mark.parametrize("basis", ["x", "z"])
def test_find_model_fast_family(basis):
    dem = surface(5, 0.002, basis).detector_error_model(decompose_errors=True)
    assert os.path.basename(cr.find_model(dem, fast=True)) == f"predecoder_d5_{basis}_fast.onnx"
    with pytest.raises(LookupError, match="no predecoder model in .* fits .*24 detectors.* among the fast family"):
        cr.find_model(surface(3, 0.002).detector_error_model(decompose_errors=True), fast=True)


def test_find_model_allows_a_shifted_layout():
    """The C rule (cudaq_predecoder_check_layout): the same layout moved in
    space and time still finds its model; the layout transposed (x and y
    swapped) finds none."""
    import re
    import stim
    text = str(surface(5, 0.002, "z").detector_error_model(decompose_errors=True))
    shifted = re.sub(r"detector\(([-0-9.e]+), ([-0-9.e]+), ([-0-9.e]+)\)",
                     lambda m: f"detector({float(m[1]) + 4}, {float(m[2]) - 2}, {float(m[3]) + 10})", text)
    assert shifted != text
    assert os.path.basename(cr.find_model(stim.DetectorErrorModel(shifted))) == "predecoder_d5_z.onnx"
    swapped = re.sub(r"detector\(([-0-9.e]+), ([-0-9.e]+), ", lambda m: f"detector({m[2]}, {m[1]}, ", text)
    with pytest.raises(LookupError, match="different detector layout"):
        cr.find_model(stim.DetectorErrorModel(swapped))


def test_find_model_refuses_other_circuits():
    with pytest.raises(LookupError, match="no predecoder model in .* fits .*24 detectors"):
        cr.find_model(surface(3, 0.002).detector_error_model(decompose_errors=True))
    # d = 5 with 3 rounds: other detector count; rounds = 5 but the unrotated code: other layout.
    with pytest.raises(LookupError):
        cr.find_model(surface(5, 0.002, rounds=3).detector_error_model(decompose_errors=True))


@pytest.mark.parametrize("model", [None, "fast"])
def test_hybrid_equals_onnxruntime_then_pymatching(d5z, model):
    """weights='off': the model's thresholded residual, then MWPM on the DEM's weights."""
    c, dem = d5z
    dets, obs = sample(c, 60, seed=11)  # ~16 ms per shot on the CPU executor
    h = cr.HybridDecoder(model, dem, weights="off")
    assert h.model_path.endswith("_fast.onnx") == (model == "fast")
    assert not h.weighted and "weighted" not in repr(h)
    preds, weights, counts = h.decode_batch(dets, return_weights=True, return_residual_counts=True)
    sess = ort.InferenceSession(h.model_path)
    pm = pymatching.Matching.from_detector_error_model(dem)
    for i, d in enumerate(dets):
        res, frame = sess.run(["residual_detectors", "logical_frame"], {"detectors": d[None].astype(np.int32)})
        pw = pm.decode(res[0].astype(np.uint8), return_weight=True)
        assert counts[i] == res.sum()
        if (frame[0] ^ pw[0] != preds[i]).any():  # a tie: same weight
            assert abs(pw[1] - weights[i]) <= 1e-5 * max(1, pw[1])
    assert counts.sum() < dets.sum()  # the model removes events
    # bit-packed in and out give the same predictions
    packed = np.packbits(dets, axis=1, bitorder="little")
    pp = h.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True)
    assert (np.unpackbits(pp, axis=1, bitorder="little")[:, :1] == preds).all()
    assert (h.decode(dets[0]) == preds[0]).all()
    assert (h.decode(dets[0][None]) == preds[0]).all()  # (1, N), as Matching.decode and PyMatching


@pytest.mark.parametrize("model", [None, "fast"])
def test_hybrid_weighted_equals_onnxruntime_then_pymatching(d5z, model):
    """weights='auto' (default) with a model that gives edge logits: the
    prediction is PyMatching's on the raw events with weight -logit on each of
    the model's edges for that shot (PyMatching applies the edges of negative
    weight: the residual of threshold 0, matched with |logit|); where the two
    predictions differ (a tie) the weights agree: ours (the correction's
    |logit| sum) is PyMatching's plus the sum of the positive logits."""
    import json
    c, dem = d5z
    dets, obs = sample(c, 60, seed=12)
    h = cr.HybridDecoder(model, dem)
    assert h.weighted and "weighted MWPM" in repr(h)
    preds, weights = h.decode_batch(dets, return_weights=True)
    sess = ort.InferenceSession(h.model_path)
    ends = json.loads(sess.get_modelmeta().custom_metadata_map["edge_endpoints"])
    fault_ids = {}
    for u, v, attr in pymatching.Matching.from_detector_error_model(dem).edges():
        fault_ids[(min(u, v), max(u, v)) if v is not None else (u, -1)] = attr["fault_ids"]
    differ = 0
    for i, d in enumerate(dets):
        (logits,) = sess.run(["edge_logits"], {"detectors": d[None].astype(np.int32)})
        pm = pymatching.Matching()
        for (a, b), x in zip(ends, logits[0].astype(np.float64)):
            if b < 0:
                pm.add_boundary_edge(a, fault_ids=fault_ids[(a, -1)], weight=-x)
            else:
                pm.add_edge(a, b, fault_ids=fault_ids[(min(a, b), max(a, b))], weight=-x)
        pred, pw = pm.decode(d.astype(np.uint8), return_weight=True)
        if (pred != preds[i]).any():
            differ += 1
            pos = float(logits[0][logits[0] > 0].astype(np.float64).sum())
            assert abs(weights[i] - (pw + pos)) <= 1e-3 * max(1.0, abs(pw) + pos)
    assert differ <= 2
    off = cr.HybridDecoder(model, dem, weights="off").decode_batch(dets)
    many, _ = sample(c, 600, seed=14)
    assert (cr.HybridDecoder(model, dem).decode_batch(many) !=
            cr.HybridDecoder(model, dem, weights="off").decode_batch(many)).any()  # the flag does something
    assert off.shape == preds.shape


def test_hybrid_local_predecoder(d5z):
    c, dem = d5z
    dets, obs = sample(c, 2000, seed=5)
    h = cr.HybridDecoder("local", dem)
    p, counts = h.decode_batch(dets, return_residual_counts=True)
    m = cr.Matching.from_detector_error_model(dem).decode_batch(dets)
    assert counts.sum() < dets.sum()
    assert abs(int((p != obs).any(axis=1).sum()) - int((m != obs).any(axis=1).sum())) < 25


def test_hybrid_errors(d5z, tmp_path):
    dem = d5z[1]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cr.HybridDecoder(str(tmp_path / "nope.onnx"), dem)
    d7 = os.path.join(cr.models_dir(), "predecoder_d7_z.onnx")
    with pytest.raises(cr.CudaqValueError, match=r"'detectors'.*\[1, 336\].*\[1, 120\]"):
        cr.HybridDecoder(d7, dem)
    # Same detector count, other basis: the model's recorded detector layout differs.
    d5x = os.path.join(cr.models_dir(), "predecoder_d5_x.onnx")
    with pytest.raises(cr.CudaqValueError, match=r"detector layout is not the model's .*rotated_memory_x"):
        cr.HybridDecoder(d5x, dem)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(cr.CudaqError, match="bad.onnx"):
        cr.HybridDecoder(str(bad), dem)
    with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu'"):
        cr.HybridDecoder(None, dem, device="tpu")
    with pytest.raises(ValueError, match="fp16 needs device='gpu'"):
        cr.HybridDecoder(None, dem, precision="fp16")
    with pytest.raises(ValueError, match="local predecoder runs on the CPU"):
        cr.HybridDecoder("local", dem, device="gpu")
    with pytest.raises(ValueError, match="weights must be 'auto', 'on' or 'off'"):
        cr.HybridDecoder(None, dem, weights="yes")
    with pytest.raises(ValueError, match="weights='on' needs an ONNX model"):
        cr.HybridDecoder("local", dem, weights="on")
    assert not cr.HybridDecoder("local", dem).weighted
    h = cr.HybridDecoder(None, dem)
    with pytest.raises(ValueError, match="121 columns.*120 detectors"):
        h.decode_batch(np.zeros((2, 121), np.uint8))
    with pytest.raises(ValueError, match=r"z must hold one entry per detector .*got shape \(2, 120\)"):
        h.decode(np.zeros((2, 120), np.uint8))


def test_hybrid_layout_unchecked_only_when_asked(d5z):
    """A DEM without detector coordinates cannot be checked against the model's recorded
    layout: refused, unless check_layout=False, which decodes as the full DEM does."""
    c, dem = d5z
    bare = "\n".join(l for l in str(dem.flattened()).splitlines() if not l.startswith("detector"))
    d5 = os.path.join(cr.models_dir(), "predecoder_d5_z.onnx")
    with pytest.raises(cr.CudaqValueError, match="the DEM has no detector coordinates"):
        cr.HybridDecoder(d5, bare)
    with pytest.raises(LookupError, match="has no detector coordinates .*check_layout=False"):
        cr.HybridDecoder(None, bare)  # which shipped model: X and Z cannot be told apart
    shots, _ = sample(c, 30, seed=5)
    want = cr.HybridDecoder(d5, dem).decode_batch(shots)
    got = cr.HybridDecoder(d5, bare, check_layout=False).decode_batch(shots)
    np.testing.assert_array_equal(got, want)


def test_hybrid_gpu(d5z):
    """device='gpu': without a CUDA build or device, a clear CudaqUnsupportedError; with
    one (scripts/gpu-run-python.sh), the same predictions as the CPU executor."""
    c, dem = d5z
    dets, _ = sample(c, 200, seed=13)
    try:
        g = cr.HybridDecoder(None, dem, device="gpu", precision="fp32")
    except cr.CudaqUnsupportedError as e:
        assert "GPU" in str(e) or "CUDA" in str(e) or "device" in str(e)
        pytest.skip(f"no GPU engine here: {e}")
    cpu = cr.HybridDecoder(None, dem).decode_batch(dets)
    assert "GPU 0 fp32" in repr(g)
    assert (g.decode_batch(dets) == cpu).all()
    h = cr.HybridDecoder(None, dem, device="gpu", precision="fp16")
    assert (h.decode_batch(dets) != cpu).any(axis=1).sum() <= 1  # FP16 rounding near the threshold


def test_onnx_model_matches_onnxruntime(d5z):
    c, _ = d5z
    dets, _ = sample(c, 4, seed=2)
    path = os.path.join(cr.models_dir(), "predecoder_d5_z.onnx")
    m = cr.OnnxModel(path)
    assert [b.name for b in m.inputs] == ["detectors"]
    assert [b.name for b in m.outputs][:2] == ["residual_detectors", "logical_frame"]
    assert m.inputs[0].shape == (1, 120) and m.inputs[0].dtype == np.int32
    sess = ort.InferenceSession(path)
    for d in dets:
        x = d[None].astype(np.int32)
        ours = m.run({"detectors": x})
        ref = sess.run(None, {"detectors": x})
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):  # the residual and frame exactly; the edge logits (float) closely
            assert a.shape == b.shape and a.dtype == b.dtype
            assert (a == b).all() if a.dtype != np.float32 else np.allclose(a, b, rtol=1e-4, atol=1e-4)
        assert all((a == b).all() for a, b in zip(m.run([x]), ours))
        assert all((a == b).all() for a, b in zip(cr.run(path, x), ours))


def test_onnx_model_errors(tmp_path):
    path = os.path.join(cr.models_dir(), "predecoder_d5_z.onnx")
    m = cr.OnnxModel(path)
    with pytest.raises(ValueError, match="unknown input name"):
        m.run({"dets": np.zeros((1, 120), np.int32)})
    with pytest.raises(ValueError, match=r"shape \(1, 7\); the model needs \(1, 120\)"):
        m.run({"detectors": np.zeros((1, 7), np.int32)})
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xff\xff\xff")
    with pytest.raises(cr.CudaqError, match="bad.onnx: ") as e:
        cr.OnnxModel(str(bad))
    assert e.value.status_name  # the C status name rides along
    with pytest.raises(FileNotFoundError):
        cr.OnnxModel(str(tmp_path / "missing.onnx"))


def test_onnx_model_threads_then_garbage_collection():
    """OnnxModel on two threads gives one thread's outputs (the executors'
    SGEMM calls run at once), and collecting the model with its per-thread
    executors, in whatever order the collector picks, does not crash (the C
    executor's destroy no longer reads the model)."""
    import gc
    import threading
    path = os.path.join(cr.models_dir(), "predecoder_d5_z.onnx")
    rng = np.random.default_rng(3)
    xs = (rng.random((40, 1, 120)) < 0.05).astype(np.int32)
    m = cr.OnnxModel(path)
    ref = [np.asarray(m.run([x])[0]).copy() for x in xs]
    bad = []

    def work():
        for _ in range(3):
            for x, r in zip(xs, ref):
                if not np.array_equal(np.asarray(m.run([x])[0]), r):
                    bad.append(1)

    ts = [threading.Thread(target=work) for _ in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not bad
    del m, ts
    gc.collect()
