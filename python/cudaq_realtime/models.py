"""The shipped predecoder models (models/manifest.json) and which one fits a
detector error model."""
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_coords_cache = {}


def models_dir():
    """The folder of the shipped ONNX models and manifest.json:
    $CUDAQ_REALTIME_MODELS, else the copy installed with the package."""
    return os.environ.get("CUDAQ_REALTIME_MODELS") or os.path.join(_HERE, "models")


def manifest():
    """The parsed manifest.json (a dict with "models": [entries])."""
    path = os.path.join(models_dir(), "manifest.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise FileNotFoundError(f"cudaq_realtime: no model manifest at {path} ({e.strerror}); "
                                "set CUDAQ_REALTIME_MODELS to the repository's models/ folder") from e


def _entry_coords(entry):
    """Detector coordinates of the circuit an entry was exported for (the
    layout depends only on task, distance and rounds, not on the noise)."""
    key = entry["file"]
    if key not in _coords_cache:
        import stim
        c = entry["circuit"]
        circuit = stim.Circuit.generated(c["task"], distance=c["distance"], rounds=c["rounds"], **c["noise"])
        _coords_cache[key] = circuit.get_detector_coordinates()
    return _coords_cache[key]


def _describe(entry):
    return (f"{entry['file']} (d={entry['distance']}, {entry['rounds']} rounds, basis {entry['basis']}, "
            f"{entry['num_detectors']} detectors)")


def find_model(dem):
    """The path of the shipped model made for the circuit of `dem` (a
    stim.DetectorErrorModel): same detector and observable counts and the same
    detector coordinates as the manifest entry's circuit (task, distance,
    rounds, hence basis). Raises LookupError naming what was looked for and
    what is shipped when none fits."""
    if isinstance(dem, (str, bytes)):
        import stim
        dem = stim.DetectorErrorModel(dem.decode() if isinstance(dem, bytes) else dem)
    entries = manifest()["models"]
    nd, no = dem.num_detectors, dem.num_observables
    coords = None
    for e in entries:
        if e["num_detectors"] != nd or e["num_observables"] != no:
            continue
        if coords is None:
            coords = dem.get_detector_coordinates()
        if _entry_coords(e) == coords:
            return os.path.join(models_dir(), e["file"])
    shipped = "; ".join(_describe(e) for e in entries)
    near = [e["file"] for e in entries if e["num_detectors"] == nd]
    hint = (f" ({', '.join(near)} have {nd} detectors but a different detector layout, observable count "
            "or basis)" if near else "")
    raise LookupError(
        f"cudaq_realtime: no shipped predecoder model fits this detector error model ({nd} detectors, "
        f"{no} observables){hint}. The models are for stim's surface_code:rotated_memory_x/z circuits "
        f"with rounds = distance: {shipped}. Pass a model path of your own to HybridDecoder instead.")
