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
        # noiseless: the same detectors and coordinates, whatever noise model the entry names
        circuit = stim.Circuit.generated(c["task"], distance=c["distance"], rounds=c["rounds"])
        _coords_cache[key] = circuit.get_detector_coordinates()
    return _coords_cache[key]


def _layout_fits(path, graph):
    """The C library's rule (cudaq_predecoder_check_layout) on a model file:
    True where the model records the DEM's detector layout (up to one
    translation), False where it records another one (or the DEM has no or
    partial coordinates: nothing to compare with), None where it records
    none or there is no NN engine to read it."""
    from . import _lib
    if not _lib.HAVE_NN:
        return None
    m, err = _lib.c_void_p(), _lib.NnError()
    if _lib.lib.cudaq_nn_model_load_file(os.fsencode(path), _lib.ctypes.byref(m), _lib.ctypes.byref(err)) != 0:
        return None
    try:
        checked, perr = _lib.c_int(0), _lib.PredecoderError()
        st = _lib.lib.cudaq_predecoder_check_layout(m, graph.ptr, _lib.ctypes.byref(checked), _lib.ctypes.byref(perr))
        if st == _lib.PREDECODER_OK:
            return True if checked.value else None
        return False
    finally:
        _lib.lib.cudaq_nn_model_destroy(m)


def _describe(entry):
    return (f"{entry['file']} (d={entry['distance']}, {entry['rounds']} rounds, basis {entry['basis']}, "
            f"{entry['num_detectors']} detectors)")


FAST_SUFFIX = "_fast.onnx"  # the fast family's files (models/README.md)


def find_model(dem, *, fast=False):
    """The path of the shipped model made for the circuit of `dem` (a
    stim.DetectorErrorModel), from the accurate family or, with fast=True,
    the fast one (the `*_fast.onnx` files: 4 x 32 channels, less gain, several
    times the throughput): same detector and observable counts and the
    detector layout the model file records (its `detector_coordinates`,
    compared by the C library's rule: the DEM's coordinates up to one
    translation; for a model without that record, the manifest circuit's
    coordinates exactly). The first fitting entry of the manifest wins (a
    directory with several models of one layout, e.g. two noise models:
    pass the path). Raises LookupError naming what was looked for and what
    there is when none fits, or when the DEM has no detector coordinates
    (the X and Z models of one distance have the same detector count)."""
    if isinstance(dem, (str, bytes)):
        import stim
        dem = stim.DetectorErrorModel(dem.decode() if isinstance(dem, bytes) else dem)
    entries = [e for e in manifest()["models"] if e["file"].endswith(FAST_SUFFIX) == bool(fast)]
    nd, no = dem.num_detectors, dem.num_observables
    coords = dem.get_detector_coordinates()
    if nd and not any(coords.values()):
        raise LookupError(
            f"cudaq_realtime: the detector error model has no detector coordinates ({nd} detectors), so "
            "the model made for its circuit cannot be told apart from another layout of the same size "
            "(the X and Z models of one distance, say). Use a DEM with coordinates (stim writes them), or "
            "pass a model path: HybridDecoder(path, dem, check_layout=False).")
    graph = None
    for e in entries:
        if e["num_detectors"] != nd or e["num_observables"] != no:
            continue
        path = os.path.join(models_dir(), e["file"])
        if graph is None:
            from .matching import _Graph
            graph = _Graph(str(dem).encode(), 0)
        fits = _layout_fits(path, graph)
        if fits is None:  # no record to compare: the manifest circuit's coordinates
            fits = _entry_coords(e) == coords
        if fits:
            return path
    shipped = "; ".join(_describe(e) for e in entries)
    near = [e["file"] for e in entries if e["num_detectors"] == nd]
    hint = (f" ({', '.join(near)} have {nd} detectors but a different detector layout, observable count "
            "or basis)" if near else "")
    family = "fast" if fast else "accurate"
    raise LookupError(
        f"cudaq_realtime: no predecoder model in {models_dir()} fits this detector error model ({nd} "
        f"detectors, {no} observables) among the {family} family{hint}. Its {family} models: {shipped}. "
        "Pass a model path of your own to HybridDecoder instead.")
