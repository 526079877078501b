"""cudaq_realtime.Matching against PyMatching 2.4 on stim circuits."""
import numpy as np
import pymatching
import pytest
import stim

import cudaq_realtime as cr
from conftest import sample, surface

CIRCUITS = {
    "rotated_z_d3_p0.01": lambda: surface(3, 0.01),
    "rotated_x_d5_p0.005": lambda: surface(5, 0.005, "x"),
    "rotated_z_d7_p0.003_r3": lambda: surface(7, 0.003, rounds=3),
    "unrotated_x_d5_p0.005": lambda: stim.Circuit.generated(
        "surface_code:unrotated_memory_x", distance=5, rounds=4, after_clifford_depolarization=0.005,
        before_measure_flip_probability=0.005),
    "repetition_d9_p0.03": lambda: stim.Circuit.generated(
        "repetition_code:memory", distance=9, rounds=9, after_clifford_depolarization=0.03,
        before_measure_flip_probability=0.03),
}


def weights_equal(a, b):
    return np.abs(a - b) <= 1e-5 * np.maximum(1.0, np.abs(b))


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_same_predictions_or_same_weight_as_pymatching(name):
    circuit = CIRCUITS[name]()
    dem = circuit.detector_error_model(decompose_errors=True)
    dets, obs = sample(circuit, 3000, seed=7)
    ours = cr.Matching.from_detector_error_model(dem)
    ref = pymatching.Matching.from_detector_error_model(dem)
    assert (ours.num_detectors, ours.num_fault_ids, ours.num_edges) == \
        (ref.num_detectors, ref.num_fault_ids, ref.num_edges)
    p, w = ours.decode_batch(dets, return_weights=True)
    rp, rw = ref.decode_batch(dets, return_weights=True)
    assert p.shape == rp.shape and p.dtype == np.uint8
    # Every shot: the same minimum weight; predictions differ only on ties.
    assert weights_equal(w, rw).all(), np.abs(w - rw).max()
    differ = (p != rp).any(axis=1)
    assert differ.sum() <= max(2, len(dets) // 1000)


def test_dem_text_and_object_agree(d5z):
    c, dem = d5z
    dets, _ = sample(c, 500)
    a = cr.Matching.from_detector_error_model(dem).decode_batch(dets)
    b = cr.Matching.from_detector_error_model(str(dem)).decode_batch(dets)
    assert (a == b).all()
    assert (cr.Matching.from_stim_circuit(c).decode_batch(dets) == a).all()


def test_decode_single_shot_matches_batch(d5z):
    c, dem = d5z
    dets, _ = sample(c, 50)
    m = cr.Matching.from_detector_error_model(dem)
    ref = pymatching.Matching.from_detector_error_model(dem)
    bp, bw = m.decode_batch(dets, return_weights=True)
    for i in range(len(dets)):
        p, w = m.decode(dets[i], return_weight=True)
        assert (p == bp[i]).all() and w == bw[i]
        rp, rw = ref.decode(dets[i], return_weight=True)
        assert abs(w - rw) <= 1e-5 * max(1, rw)
    assert m.decode(list(dets[0])).shape == (1,)


@pytest.mark.parametrize("packed_in", [False, True])
@pytest.mark.parametrize("packed_out", [False, True])
def test_bit_packed_round_trips(d5z, packed_in, packed_out):
    c, dem = d5z
    dense, _ = sample(c, 1000, seed=3)
    packed, _ = sample(c, 1000, seed=3, bit_packed=True)
    assert (np.packbits(dense, axis=1, bitorder="little") == packed).all()
    m = cr.Matching.from_detector_error_model(dem)
    ref = pymatching.Matching.from_detector_error_model(dem)
    shots = packed if packed_in else dense
    p = m.decode_batch(shots, bit_packed_shots=packed_in, bit_packed_predictions=packed_out)
    rp = ref.decode_batch(shots, bit_packed_shots=packed_in, bit_packed_predictions=packed_out)
    assert p.shape == rp.shape and p.dtype == rp.dtype == np.uint8
    base = m.decode_batch(dense)
    unpacked = np.unpackbits(p, axis=1, bitorder="little")[:, :1] if packed_out else p
    assert (unpacked == base).all()


def test_packed_padding_bits_are_ignored():
    m = cr.Matching.from_detector_error_model("error(0.1) D0\nerror(0.1) D0 D1\nerror(0.1) D1 L0\n")
    # 2 detectors in one byte; bits 2..7 are padding.
    p = m.decode_batch(np.array([[0b11111110]], dtype=np.uint8), bit_packed_shots=True)
    assert p.tolist() == [[1]]


def test_many_observables_bit_packed():
    text = "".join(f"error(0.1) D{i} L{i}\n" for i in range(11))
    m = cr.Matching.from_detector_error_model(text)
    assert m.num_fault_ids == 11
    shots = np.eye(11, dtype=np.uint8)
    assert (m.decode_batch(shots) == shots).all()
    packed = m.decode_batch(shots, bit_packed_predictions=True)
    assert packed.shape == (11, 2)
    assert (np.unpackbits(packed, axis=1, bitorder="little")[:, :11] == shots).all()


def test_bool_and_int_shots_accepted(d5z):
    c, dem = d5z
    dets, _ = sample(c, 100)
    m = cr.Matching.from_detector_error_model(dem)
    base = m.decode_batch(dets)
    assert (m.decode_batch(dets.astype(bool)) == base).all()
    assert (m.decode_batch(dets.astype(np.int64)) == base).all()


def test_empty_batch(d5z):
    m = cr.Matching.from_detector_error_model(d5z[1])
    p, w = m.decode_batch(np.zeros((0, m.num_detectors), np.uint8), return_weights=True)
    assert p.shape == (0, 1) and w.shape == (0,)


# --- errors from the C layer come up with its message -----------------------

def test_parse_error_names_the_line():
    with pytest.raises(ValueError, match=r"line 2: .*") as e:
        cr.Matching.from_detector_error_model("error(0.1) D0\nerror(1.5) D1\n")
    assert isinstance(e.value, cr.CudaqError) and e.value.status == -2


def test_not_graphlike_says_how_to_fix():
    with pytest.raises(cr.CudaqValueError, match="3 detectors .*decompose"):
        cr.Matching.from_detector_error_model("error(0.1) D0 D1 D2\n")


def test_wrong_width_names_expected_and_found(d5z):
    m = cr.Matching.from_detector_error_model(d5z[1])
    with pytest.raises(ValueError, match="10 columns.*120 detectors"):
        m.decode_batch(np.zeros((3, 10), np.uint8))
    with pytest.raises(ValueError, match="16 bytes per shot.*120 detectors need 15"):
        m.decode_batch(np.zeros((3, 16), np.uint8), bit_packed_shots=True)
    with pytest.raises(ValueError, match="2D array"):
        m.decode_batch(np.zeros(120, np.uint8))


def test_no_matching_message_is_understandable():
    m = cr.Matching.from_detector_error_model("error(0.1) D0 D1\nerror(0.1) D1 D2\n")
    with pytest.raises(ValueError, match=r"shot 1: no set of errors .* 1 detection events \(D2\).*no boundary"):
        m.decode_batch(np.array([[1, 1, 0], [0, 0, 1]], np.uint8))


def test_enable_correlations_needs_it_at_load_time(d5z):
    # As PyMatching: decoding with correlations needs a Matching loaded with them.
    m = cr.Matching.from_detector_error_model(d5z[1])
    with pytest.raises(ValueError, match="enable_correlations=True"):
        m.decode_batch(np.zeros((1, 120), np.uint8), enable_correlations=True)
    with pytest.raises(ValueError, match="enable_correlations=True"):
        m.decode(np.zeros(120, np.uint8), enable_correlations=True)


def test_bad_model_type():
    with pytest.raises(TypeError, match="DetectorErrorModel"):
        cr.Matching.from_detector_error_model(42)
