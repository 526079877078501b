"""The sinter plug-in: statistics agree with PyMatching's within error bars."""
import math
import os
import subprocess
import sys

import pytest
import sinter

import cudaq_realtime as cr
from conftest import surface


def _tasks():
    return [sinter.Task(circuit=surface(d, p), json_metadata={"d": d, "p": p})
            for d, p in [(3, 0.01), (5, 0.008)]]


def test_sinter_decoders_dict():
    ds = cr.sinter_decoders()
    assert set(ds) == {"cudaq-mwpm", "cudaq-hybrid"}
    assert all(isinstance(d, sinter.Decoder) for d in ds.values())


def test_collect_matches_pymatching_within_error_bars():
    stats = sinter.collect(num_workers=2, tasks=_tasks(), decoders=["cudaq-mwpm", "pymatching"],
                           max_shots=20000, custom_decoders=cr.sinter_decoders())
    by = {(s.json_metadata["d"], s.decoder): s for s in stats}
    for d in (3, 5):
        a, b = by[(d, "cudaq-mwpm")], by[(d, "pymatching")]
        assert a.shots == b.shots == 20000
        pa, pb = a.errors / a.shots, b.errors / b.shots
        sigma = math.sqrt(pa * (1 - pa) / a.shots + pb * (1 - pb) / b.shots)
        assert abs(pa - pb) <= 4 * sigma + 1e-12, (d, a.errors, b.errors)
        assert a.errors > 0


def test_collect_hybrid_on_the_shipped_model():
    task = sinter.Task(circuit=surface(5, 0.005), json_metadata={"d": 5})
    stats = sinter.collect(num_workers=1, tasks=[task], decoders=["cudaq-hybrid"], max_shots=100,
                           start_batch_size=100, max_batch_size=100, custom_decoders=cr.sinter_decoders())
    assert stats[0].shots == 100 and stats[0].errors <= 15


def test_hybrid_refuses_a_circuit_without_a_model():
    dem = surface(3, 0.01).detector_error_model(decompose_errors=True)
    with pytest.raises(LookupError, match="no predecoder model in .* fits"):
        cr.sinter_decoders()["cudaq-hybrid"].compile_decoder_for_dem(dem=dem)


def test_sinter_command_line(tmp_path):
    circuit = tmp_path / "d=3,p=0.01.stim"
    circuit.write_text(str(surface(3, 0.01)))
    out = tmp_path / "stats.csv"
    exe = os.path.join(os.path.dirname(sys.executable), "sinter")
    subprocess.run([exe, "collect", "--circuits", str(circuit), "--decoders", "cudaq-mwpm",
                    "--custom_decoders_module_function", "cudaq_realtime:sinter_decoders",
                    "--max_shots", "2000", "--processes", "1", "--metadata_func", "auto",
                    "--save_resume_filepath", str(out)], check=True, capture_output=True, timeout=120)
    stats = sinter.read_stats_from_csv_files(str(out))
    assert len(stats) == 1 and stats[0].decoder == "cudaq-mwpm" and stats[0].shots == 2000
