import numpy as np
import pytest
import stim


def surface(d, p, basis="z", rounds=None):
    return stim.Circuit.generated(f"surface_code:rotated_memory_{basis}", distance=d, rounds=rounds or d,
                                  after_clifford_depolarization=p, before_round_data_depolarization=p,
                                  before_measure_flip_probability=p, after_reset_flip_probability=p)


def sample(circuit, shots, seed=1, bit_packed=False):
    return circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True,
                                                              bit_packed=bit_packed)


@pytest.fixture(scope="session")
def d5z():
    c = surface(5, 0.005)
    return c, c.detector_error_model(decompose_errors=True)
