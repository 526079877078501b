"""The GIL is released while the C decoder runs; one Matching serves two threads."""
import threading
import time

import numpy as np

import cudaq_realtime as cr
from conftest import sample, surface


def _big_batch():
    c = surface(9, 0.005)
    dem = c.detector_error_model(decompose_errors=True)
    dets, _ = sample(c, 6000, seed=4, bit_packed=True)
    return cr.Matching.from_detector_error_model(dem), dets


def test_decode_batch_in_two_threads_gives_the_same_results():
    m, dets = _big_batch()
    expect, wexpect = m.decode_batch(dets, bit_packed_shots=True, return_weights=True)
    out = [None, None]

    def work(i):
        out[i] = m.decode_batch(dets, bit_packed_shots=True, return_weights=True)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for p, w in out:
        assert (p == expect).all() and (w == wexpect).all()


def test_gil_is_released_during_decode_batch():
    m, dets = _big_batch()
    window = {}

    def work():
        window["start"] = time.perf_counter()
        m.decode_batch(dets, bit_packed_shots=True)
        window["end"] = time.perf_counter()

    t = threading.Thread(target=work)
    beats = []
    t.start()
    while t.is_alive():  # pure Python: runs only while the decoding thread does not hold the GIL
        beats.append(time.perf_counter())
    t.join()
    start, end = window["start"], window["end"]
    assert end - start > 0.05, "batch too small to observe"
    inside = [b for b in beats if start + 0.25 * (end - start) < b < end - 0.25 * (end - start)]
    # With the GIL held for the whole call, no heartbeat lands in its middle half.
    assert len(inside) > 100, (len(inside), end - start)
