"""cudaq_realtime.Matching(enable_correlations=True) against PyMatching 2.4's
correlated matching on stim circuits, and on hand-made models."""
import math
import os
import sys

import numpy as np
import pymatching
import pytest
import stim

import cudaq_realtime as cr
from conftest import sample, surface

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "predecoder"))
import layout  # noqa: E402


def si1000(d, p):
    return layout.make_circuit(layout.circuit_spec("z", d, d, p, "si1000"))


CIRCUITS = {
    "rotated_z_d3_p0.008": lambda: surface(3, 0.008),
    "rotated_x_d5_p0.005": lambda: surface(5, 0.005, "x"),
    "rotated_z_d5_p0.008": lambda: surface(5, 0.008),
    "rotated_z_d7_p0.003": lambda: surface(7, 0.003),
    "si1000_z_d5_p0.003": lambda: si1000(5, 0.003),
}


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_agrees_with_pymatching_correlated(name):
    circuit = CIRCUITS[name]()
    dem = circuit.detector_error_model(decompose_errors=True)
    shots = 4000
    dets, obs = sample(circuit, shots, seed=11)
    ours = cr.Matching.from_detector_error_model(dem, enable_correlations=True)
    ref = pymatching.Matching.from_detector_error_model(dem, enable_correlations=True)
    p = ours.decode_batch(dets, enable_correlations=True)
    rp = ref.decode_batch(dets, enable_correlations=True)
    assert p.shape == rp.shape and p.dtype == np.uint8
    differ = int((p != rp).any(axis=1).sum())
    assert differ <= max(3, shots // 100), differ
    k, k_ref = int((p != obs).any(axis=1).sum()), int((rp != obs).any(axis=1).sum())
    sigma = max(1.0, math.sqrt(shots * (k_ref / shots) * (1 - k_ref / shots)))
    assert abs(k - k_ref) <= 2 * sigma, (k, k_ref)
    # decode (one shot) agrees with decode_batch, and bit-packed shots too.
    for i in range(20):
        assert (ours.decode(dets[i], enable_correlations=True) == p[i]).all()
    packed = np.packbits(dets, axis=1, bitorder="little")
    assert (ours.decode_batch(packed, bit_packed_shots=True, enable_correlations=True) == p).all()


def test_correlations_help_at_d5():
    circuit = surface(5, 0.008)
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, 4000, seed=5)
    m = cr.Matching.from_stim_circuit(circuit, enable_correlations=True)
    corr = int((m.decode_batch(dets, enable_correlations=True) != obs).any(axis=1).sum())
    plain = int((m.decode_batch(dets) != obs).any(axis=1).sum())
    assert corr < plain
    # The same Matching still decodes plainly after correlated decodes.
    plain_ref = cr.Matching.from_detector_error_model(dem).decode_batch(dets)
    assert (m.decode_batch(dets) == plain_ref).all()


HAND = ("error(0.1) D0 D1 ^ D2 D3\n"
        "error(0.3) D2 L0\n"
        "error(0.3) D3\n")


def test_hand_made_model_answer_and_weight():
    m = cr.Matching(HAND, enable_correlations=True)
    ref = pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel(HAND), enable_correlations=True)
    z = np.array([1, 1, 1, 1], np.uint8)
    pred, w = m.decode(z, return_weight=True, enable_correlations=True)
    rpred, rw = ref.decode(z, return_weight=True, enable_correlations=True)
    assert pred.tolist() == rpred.tolist() == [0]
    assert abs(w - rw) < 1e-5 and abs(w - math.log(9)) < 1e-5
    assert m.decode(z).tolist() == [1]  # plain matching flips L0


def test_probability_over_half_refused():
    with pytest.raises(ValueError, match=r"line 2: .*0\.5"):
        cr.Matching.from_detector_error_model("error(0.1) D0 D1\nerror(0.6) D1\n", enable_correlations=True)
    cr.Matching.from_detector_error_model("error(0.1) D0 D1\nerror(0.6) D1\n")  # fine without
