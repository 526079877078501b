"""Matching.decode_batch(num_threads=k): one C call on k threads
(cudaq_mwpm_decode_batch) gives the one-thread results."""
import numpy as np
import pytest

import cudaq_realtime as cr
from conftest import sample, surface


@pytest.fixture(scope="module")
def d7():
    c = surface(7, 0.008)
    dem = c.detector_error_model(decompose_errors=True)
    dets, obs = sample(c, 3000, seed=11, bit_packed=True)
    return dem, dets, obs


@pytest.mark.parametrize("num_threads", [1, 2, 3, 8])
@pytest.mark.parametrize("packed_out", [False, True])
def test_num_threads_gives_the_one_thread_results(d7, num_threads, packed_out):
    dem, dets, _ = d7
    m = cr.Matching.from_detector_error_model(dem)
    expect, wexpect = m.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=packed_out,
                                     return_weights=True)
    got, w = m.decode_batch(dets, bit_packed_shots=True, bit_packed_predictions=packed_out,
                            return_weights=True, num_threads=num_threads)
    assert got.shape == expect.shape and got.dtype == np.uint8
    assert (got == expect).all() and (w == wexpect).all()
    dense = np.unpackbits(dets, axis=1, bitorder="little")[:, :m.num_detectors]
    assert (m.decode_batch(dense, bit_packed_predictions=packed_out, num_threads=num_threads) == expect).all()


def test_num_threads_correlated(d7):
    dem, dets, _ = d7
    m = cr.Matching.from_detector_error_model(dem, enable_correlations=True)
    expect, wexpect = m.decode_batch(dets, bit_packed_shots=True, return_weights=True, enable_correlations=True)
    got, w = m.decode_batch(dets, bit_packed_shots=True, return_weights=True, enable_correlations=True,
                            num_threads=2)
    assert (got == expect).all() and (w == wexpect).all()


def test_num_threads_small_and_empty_batches(d7):
    dem, dets, _ = d7
    m = cr.Matching.from_detector_error_model(dem)
    for n in (0, 1, 63, 64, 65, 130):
        assert (m.decode_batch(dets[:n], bit_packed_shots=True, num_threads=4) ==
                m.decode_batch(dets[:n], bit_packed_shots=True)).all()


def test_num_threads_bad_values(d7):
    dem, dets, _ = d7
    m = cr.Matching.from_detector_error_model(dem)
    for bad in (0, -1, 257):
        with pytest.raises(ValueError, match="num_threads"):
            m.decode_batch(dets, bit_packed_shots=True, num_threads=bad)
    for bad in (2.0, "2", True):
        with pytest.raises(TypeError, match="num_threads"):
            m.decode_batch(dets, bit_packed_shots=True, num_threads=bad)


def test_num_threads_error_names_the_first_failing_shot():
    # Detectors 0 and 1 share an edge and no boundary: one event there has no solution.
    m = cr.Matching.from_detector_error_model(
        "error(0.1) D0 D1 L0\nerror(0.1) D2\nerror(0.1) D2 L0\n")
    shots = np.zeros((500, 3), dtype=np.uint8)
    shots[::3, 0] = shots[::3, 1] = 1
    shots[130, 0] = 1
    with pytest.raises(ValueError, match="shot 130"):
        m.decode_batch(shots, num_threads=2)
