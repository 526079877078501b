"""cudaq_realtime.Matching against PyMatching 2.4 on stim circuits."""
import re

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


LINE3 = "error(0.1) D0 L0\nerror(0.1) D0 D1\nerror(0.1) D1 D2\nerror(0.1) D2\n"  # 3 detectors


def test_packed_padding_bits_are_refused_as_pymatching():
    """A padding bit set (past the last detector) is a ValueError naming the
    shot, as PyMatching ("The detection event with index 3 does not
    correspond to a node in the graph, which only has 3 nodes."); with the
    padding bits at 0 the shot decodes as the dense one."""
    m = cr.Matching.from_detector_error_model(LINE3)
    bad = np.array([[0b11111000]], dtype=np.uint8)  # 3 detectors in one byte; bits 3..7 are padding
    with pytest.raises(ValueError):
        pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel(LINE3)).decode_batch(
            bad, bit_packed_shots=True)
    with pytest.raises(ValueError, match=r"shot 0 sets padding bit\(s\): its byte 0 is 0b11111000, whose bit\(s\) "
                                         r"3, 4, 5, 6, 7 would be detector\(s\) 3, 4, 5, 6, 7, past this model's "
                                         r"3 detectors \(D0..D2\)"):
        m.decode_batch(bad, bit_packed_shots=True)
    shots = np.array([[0b001], [0b011], [0b10000], [0b110], [0b1000]], dtype=np.uint8)
    with pytest.raises(ValueError, match=r"shot 2 sets .*\(2 of the 5 shots set padding bits; this is the first\)"):
        m.decode_batch(shots, bit_packed_shots=True)
    with pytest.raises(ValueError, match="shot 2 sets"):  # the multi-thread path too
        m.decode_batch(shots, bit_packed_shots=True, num_threads=2)
    with pytest.raises(ValueError, match="shot 0 sets"):  # any integer dtype
        m.decode_batch(bad.astype(np.int64), bit_packed_shots=True)
    good = np.array([[0b001], [0b011], [0b110], [0b111]], dtype=np.uint8)
    dense = np.unpackbits(good, axis=1, bitorder="little")[:, :3]
    assert (m.decode_batch(good, bit_packed_shots=True) == m.decode_batch(dense)).all()
    # A multiple of 8 detectors has no padding bits: every byte value is a shot.
    m8 = cr.Matching.from_detector_error_model("".join(f"error(0.1) D{i} L0\n" for i in range(8)))
    assert m8.decode_batch(np.array([[0b10000000]], np.uint8), bit_packed_shots=True).tolist() == [[1]]


def test_decode_takes_pymatchings_shapes():
    """decode takes z as PyMatching does: 1D, or 2D with one element per
    detector in all, z[i, j] being detector j * z.shape[0] + i; other shapes
    are a ValueError in both."""
    text = "".join(f"error(0.1) D{i} L{i}\n" for i in range(6))
    m = cr.Matching.from_detector_error_model(text)
    ref = pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel(text))
    rng = np.random.default_rng(5)
    for shape in [(6,), (1, 6), (6, 1), (2, 3), (3, 2)]:
        for _ in range(5):
            z = (rng.random(shape) < 0.4).astype(np.uint8)
            p, w = m.decode(z, return_weight=True)
            rp, rw = ref.decode(z, return_weight=True)
            assert p.tolist() == rp.tolist() and abs(w - rw) <= 1e-9 * max(1, rw), shape
    assert m.decode([[1, 0, 0, 0, 0, 1]]).tolist() == [1, 0, 0, 0, 0, 1]
    for shape in [(5,), (7,), (1, 7), (2, 2), (1, 1, 6), (6, 1, 1), ()]:
        z = np.zeros(shape, np.uint8)
        with pytest.raises(ValueError):
            ref.decode(z)
        with pytest.raises(ValueError, match=rf"z must hold one entry per detector of this model's 6: .*"
                                             rf"got shape {re.escape(str(shape))}"):
            m.decode(z)


def test_float_shots_as_pymatching():
    """Float shots (PyMatching takes them): whole numbers decode as the same
    integers, dense and bit-packed, in decode and decode_batch; a fraction,
    NaN or infinity is a ValueError naming the shot (PyMatching truncates it:
    0.9 would be no event)."""
    m = cr.Matching.from_detector_error_model(LINE3)
    ref = pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel(LINE3))
    shots = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0], [0, 0, 1]], dtype=np.uint8)
    base = m.decode_batch(shots)
    for dt in (np.float64, np.float32, np.float16):
        f = shots.astype(dt)
        assert (m.decode_batch(f) == base).all() and (ref.decode_batch(f) == base).all(), dt
        assert (m.decode_batch(f, num_threads=2) == base).all()
        packed = np.packbits(shots, axis=1, bitorder="little").astype(dt)
        assert (m.decode_batch(packed, bit_packed_shots=True) == base).all()
        assert (ref.decode_batch(packed, bit_packed_shots=True) == base).all()
        assert m.decode(f[1]).tolist() == ref.decode(f[1]).tolist() == base[1].tolist()
    for v in (0.5, 0.9, np.nan, np.inf):
        f = shots.astype(np.float64)
        f[3, 2] = v
        with pytest.raises(ValueError, match=rf"shot 3 holds {re.escape(repr(float(v)))} at detector 2 .*whole numbers"):
            m.decode_batch(f)
    with pytest.raises(ValueError, match="z holds 0.5 at detector 1"):
        m.decode(np.array([0, 0.5, 1]))
    with pytest.raises(ValueError, match=r"shot 0 holds 1.5 at byte 0 .*bytes 0.0..255.0"):
        m.decode_batch(np.array([[1.5]]), bit_packed_shots=True)
    with pytest.raises(ValueError, match="shot 0 sets padding"):
        m.decode_batch(np.array([[8.0]]), bit_packed_shots=True)
    with pytest.raises(TypeError, match="integers, booleans or floats"):
        m.decode_batch(shots.astype(np.complex128))


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
