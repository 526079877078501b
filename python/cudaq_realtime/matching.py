"""cudaq_realtime.Matching: the C exact MWPM decoder with PyMatching's API."""
import threading

import numpy as np

from . import _lib
from ._lib import lib

_CORRELATIONS_MSG = (
    "Attempting to decode with `enable_correlations=True`, however the decoder has not been "
    "configured to decode using correlations. Ensure that you also set `enable_correlations=True` "
    "when loading the stim circuit or detector error model. For example: "
    "`matching = cudaq_realtime.Matching.from_detector_error_model(dem, enable_correlations=True)`")


def _dem_text(model):
    """DEM text from a stim.DetectorErrorModel, its text (str) or bytes."""
    if isinstance(model, bytes):
        return model
    if isinstance(model, str):
        return model.encode()
    if type(model).__name__ == "DetectorErrorModel":  # stim's, without importing stim
        return str(model).encode()
    raise TypeError(f"expected a stim.DetectorErrorModel or its text, got {type(model).__name__}")


class _Graph:
    """Owns a cudaq_mwpm_graph_t (immutable, shared by threads)."""

    def __init__(self, text, merge, correlations=False, per_shot_weights=False):
        dem = _lib.c_void_p()
        err = _lib.MwpmError()
        st = lib.cudaq_dem_parse(text, len(text), _lib.ctypes.byref(dem), _lib.ctypes.byref(err))
        if st != _lib.MWPM_OK:
            where = f"detector error model line {err.line}: " if err.line else "detector error model: "
            raise _lib.mwpm_error(st, where + (err.message.decode(errors="replace") or
                                               lib.cudaq_mwpm_status_str(st).decode()))
        self.ptr = _lib.c_void_p()
        opts = _lib.MwpmGraphOptions(merge, int(bool(correlations)), int(bool(per_shot_weights)))
        try:
            st = lib.cudaq_mwpm_graph_from_dem(dem, _lib.ctypes.byref(opts), _lib.ctypes.byref(self.ptr),
                                               _lib.ctypes.byref(err))
        finally:
            lib.cudaq_dem_destroy(dem)
        if st != _lib.MWPM_OK:
            self.ptr = None
            msg = err.message.decode(errors="replace")
            raise _lib.mwpm_error(st, (f"detector error model line {err.line}: " if err.line else "") + msg)
        self.num_nodes = lib.cudaq_mwpm_graph_num_nodes(self.ptr)
        self.num_observables = lib.cudaq_mwpm_graph_num_observables(self.ptr)
        self.num_edges = lib.cudaq_mwpm_graph_num_edges(self.ptr)
        self.correlations = bool(lib.cudaq_mwpm_graph_has_correlations(self.ptr))

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.cudaq_mwpm_graph_destroy(self.ptr)
            self.ptr = None


class _Decoder:
    """One thread's cudaq_mwpm_decoder_t; keeps its graph alive."""

    def __init__(self, graph):
        self.graph = graph
        self.ptr = _lib.c_void_p()
        st = lib.cudaq_mwpm_decoder_create(graph.ptr, _lib.ctypes.byref(self.ptr))
        if st != _lib.MWPM_OK:
            self.ptr = None
            raise _lib.mwpm_error(st)

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.cudaq_mwpm_decoder_destroy(self.ptr)
            self.ptr = None


def _check_shots(shots, width, bit_packed, what="shots"):
    """A C-contiguous uint8 (num_shots, columns) array, or a ValueError naming
    the expected and found shapes. Integers and booleans: non-zero is a
    detection event (bit-packed: bytes 0..255). Floats, as PyMatching takes
    them: whole numbers are read as those integers; a fraction, NaN or
    infinity is refused (PyMatching would truncate it silently: 0.9 is no
    event). Bit-packed shots must leave the padding bits past the last
    detector at 0, as PyMatching, numpy.packbits and stim's b8 do."""
    arr = np.asarray(shots)
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a 2D array (num_shots, {'ceil(num_detectors / 8)' if bit_packed else 'num_detectors'}), "
                         f"got {arr.ndim} dimension(s) with shape {arr.shape}")
    cols = (width + 7) // 8 if bit_packed else width
    if arr.shape[1] != cols:
        if bit_packed:
            raise ValueError(f"{what} has {arr.shape[1]} bytes per shot; bit-packed shots of this model's "
                             f"{width} detectors need {cols} (ceil({width} / 8))")
        raise ValueError(f"{what} has {arr.shape[1]} columns; this model has {width} detectors, so each "
                         f"shot needs {width} (one per detector)")
    if arr.dtype != np.uint8:
        if np.issubdtype(arr.dtype, np.floating):
            _check_whole(arr, bit_packed, what)
        elif arr.dtype != np.bool_ and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{what} must hold integers, booleans or floats (dtype uint8), got dtype {arr.dtype}")
        if bit_packed and arr.dtype != np.bool_ and (arr.min(initial=0) < 0 or arr.max(initial=0) > 255):
            raise ValueError(f"bit-packed {what} must hold bytes (0..255)")
        arr = arr != 0 if not bit_packed else arr
        arr = arr.astype(np.uint8)
    if bit_packed:
        _check_padding(arr, width, what)
    return np.ascontiguousarray(arr)


def _check_whole(arr, bit_packed, what):
    """Refuses a float shot array holding a fraction, NaN or infinity, naming
    the first such value's shot and column."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(arr) & (arr == np.floor(arr)))
    if bad.any():
        shot, col = (int(i) for i in np.argwhere(bad)[0])
        where = "z" if what == "z" else f"shot {shot}"
        place = f"byte {col}" if bit_packed else f"detector {col}"
        raise ValueError(f"{where} holds {float(arr[shot, col])!r} at {place} ({bad.sum()} such value(s) in {what}): "
                         f"float {what} must hold whole numbers ({'bytes 0.0..255.0' if bit_packed else '1.0 for a detection event, 0.0 for none'}); "
                         "PyMatching would truncate it silently, so it is refused")


def _check_padding(arr, width, what):
    """Refuses bit-packed shots with a padding bit set (a bit of the last
    byte past the last detector), naming the first such shot, as PyMatching
    refuses them. The rule's C home, the realtime server's payload check
    (qec-realtime --payload bits, src/realtime_app/qrt_worker.c), is not in
    the library this package loads, whose cudaq_mwpm_shot_events and
    cudaq_mwpm_decode_batch ignore padding bits (mwpm.h): hence this check."""
    used = width % 8
    if not used or not arr.shape[0]:
        return
    bad = np.flatnonzero(arr[:, -1] >> used)
    if bad.size:
        shot, byte = int(bad[0]), arr.shape[1] - 1
        value = int(arr[shot, byte])
        bits = [b for b in range(used, 8) if (value >> b) & 1]
        extra = f" ({bad.size} of the {arr.shape[0]} shots set padding bits; this is the first)" if bad.size > 1 else ""
        raise ValueError(f"bit-packed {what}: shot {shot} sets padding bit(s): its byte {byte} is 0b{value:08b}, whose "
                         f"bit(s) {', '.join(map(str, bits))} would be detector(s) "
                         f"{', '.join(str(8 * byte + b) for b in bits)}, past this model's {width} detectors "
                         f"(D0..D{width - 1}){extra}; bits {used}..7 of the last byte must be 0, as "
                         "numpy.packbits(..., bitorder='little') and stim's b8 leave them")


def _one_shot(z, width):
    """decode's z as a (1, width) array, read as PyMatching reads it: 1D with
    one entry per detector, or 2D with width entries in all, z[i, j] being
    detector j * z.shape[0] + i (PyMatching's stabiliser i at time step j; a
    (1, width) or (width, 1) array is in detector order). Other shapes: a
    ValueError."""
    z = np.asarray(z)
    if z.ndim == 1 and z.shape[0] == width:
        return z[None, :]
    if z.ndim == 2 and z.shape[0] * z.shape[1] == width:
        return z.ravel(order="F")[None, :]
    raise ValueError(f"z must hold one entry per detector of this model's {width}: a 1D array of shape ({width},), "
                     f"or, as PyMatching, a 2D array of {width} elements (z[i, j] is detector j * z.shape[0] + i, "
                     f"so (1, {width}) and ({width}, 1) are in detector order); got shape {z.shape}")


def _predictions(num_shots, num_obs, bit_packed):
    cols = (num_obs + 7) // 8 if bit_packed else num_obs
    return np.zeros((num_shots, cols), dtype=np.uint8)


def _ptr(arr):
    return arr.ctypes.data_as(_lib.c_void_p) if arr is not None and arr.size else None


class Matching:
    """An exact minimum-weight perfect matching decoder built from a detector
    error model, with pymatching.Matching's decode and decode_batch.

    One Matching may be used from several threads at once: the graph is shared
    and each thread gets its own decoder state on first use. The GIL is
    released while the C decoder runs.
    """

    def __init__(self, model=None, *, merge_strategy="independent", enable_correlations=False):
        if model is None:
            raise TypeError("cudaq_realtime.Matching is built from a detector error model: use "
                            "Matching.from_detector_error_model(dem) (or Matching(dem))")
        merges = {"independent": 0, "smallest-weight": 1}
        if merge_strategy not in merges:
            raise ValueError(f"merge_strategy must be one of {sorted(merges)}, got {merge_strategy!r}")
        self._graph = _Graph(_dem_text(model), merges[merge_strategy], enable_correlations)
        self._tls = threading.local()

    # -- construction, as PyMatching --------------------------------------
    @staticmethod
    def from_detector_error_model(model, *, enable_correlations=False):
        """From a stim.DetectorErrorModel or its text (graph-like errors or
        errors decomposed with '^'). enable_correlations=True keeps the
        correlations of the decomposed errors, so that decode and
        decode_batch can run correlated matching (as PyMatching 2.4; errors of
        probability > 0.5 are then refused)."""
        return Matching(model, enable_correlations=enable_correlations)

    @staticmethod
    def from_detector_error_model_file(dem_path, *, enable_correlations=False):
        with open(dem_path, "rb") as f:
            return Matching.from_detector_error_model(f.read(), enable_correlations=enable_correlations)

    @staticmethod
    def from_stim_circuit(circuit, *, enable_correlations=False):
        return Matching.from_detector_error_model(
            circuit.detector_error_model(decompose_errors=True), enable_correlations=enable_correlations)

    # -- properties ---------------------------------------------------------
    @property
    def num_detectors(self):
        return self._graph.num_nodes

    @property
    def num_nodes(self):
        return self._graph.num_nodes

    @property
    def num_edges(self):
        return self._graph.num_edges

    @property
    def num_fault_ids(self):
        return self._graph.num_observables

    def __repr__(self):
        return (f"<cudaq_realtime.Matching object with {self.num_detectors} detectors, "
                f"{self.num_fault_ids} observables, and {self.num_edges} edges>")

    def edges(self):
        """[(u, v or None for the boundary, {"fault_ids": set, "weight": w})], as PyMatching."""
        out = []
        e = _lib.MwpmEdge()
        for i in range(self.num_edges):
            lib.cudaq_mwpm_graph_edge(self._graph.ptr, i, _lib.ctypes.byref(e))
            ids = {k for k in range(64) if (e.obs_mask >> k) & 1}
            out.append((e.u, None if e.v < 0 else e.v, {"fault_ids": ids, "weight": e.weight}))
        return out

    # -- decoding -----------------------------------------------------------
    def _decoder(self):
        dec = getattr(self._tls, "dec", None)
        if dec is None:
            dec = self._tls.dec = _Decoder(self._graph)
        return dec

    def decode(self, z, *, return_weight=False, enable_correlations=False, **kwargs):
        """Decodes one shot: z holds one 0/1 per detector (values as in
        decode_batch), 1D, or 2D as PyMatching takes it (z[i, j] is detector
        j * z.shape[0] + i, so (1, num_detectors) and (num_detectors, 1) are
        in detector order; other shapes raise ValueError). Returns the
        predicted observables (uint8, num_fault_ids), and the matching weight when
        return_weight=True. enable_correlations=True: two-pass correlated
        matching (the Matching must have been made with
        enable_correlations=True); the weight is then that of the reweighted
        edges."""
        if kwargs:
            raise TypeError(f"decode() got unexpected keyword argument(s) {sorted(kwargs)}")
        preds, weights = self._decode(_one_shot(z, self.num_detectors), False, False, "z", enable_correlations)
        if return_weight:
            return preds[0], float(weights[0])
        return preds[0]

    def decode_batch(self, shots, *, return_weights=False, bit_packed_shots=False,
                     bit_packed_predictions=False, enable_correlations=False, num_threads=1):
        """Decodes a (num_shots, num_detectors) uint8 array (or, with
        bit_packed_shots, (num_shots, ceil(num_detectors / 8)) little-endian
        bytes as np.packbits(..., bitorder='little') and stim make; a padding
        bit set past the last detector raises ValueError, as PyMatching).
        Other integer dtypes and bool: non-zero is an event; floats (as
        PyMatching): whole numbers only, a fraction, NaN or infinity raises
        ValueError where PyMatching would truncate it. Returns
        predictions (num_shots, num_fault_ids), or bit-packed
        (num_shots, ceil(num_fault_ids / 8)); with return_weights also the
        matching weight of each shot (float64). enable_correlations=True:
        two-pass correlated matching, as in decode. num_threads=k > 1 decodes
        on k threads inside one C call (cudaq_mwpm_decode_batch, each thread
        with its own decoder, kept for later calls); the results are the same
        as with one thread. Not a PyMatching argument."""
        if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)):
            raise TypeError(f"num_threads must be an integer, got {type(num_threads).__name__}")
        if not 1 <= num_threads <= _lib.MWPM_BATCH_MAX_THREADS:
            raise ValueError(f"num_threads must be in 1..{_lib.MWPM_BATCH_MAX_THREADS}, got {num_threads}")
        preds, weights = self._decode(shots, bool(bit_packed_shots), bool(bit_packed_predictions), "shots",
                                      enable_correlations, int(num_threads))
        return (preds, weights) if return_weights else preds

    def _decoders(self, k):
        """This Python thread's k decoders for the multi-thread batch call."""
        decs = getattr(self._tls, "decs", None)
        if decs is None or len(decs) < k:
            decs = self._tls.decs = [self._decoder()] + [_Decoder(self._graph) for _ in range(k - 1)]
            self._tls.dec_array = (_lib.c_void_p * k)(*[d.ptr for d in decs])
        return self._tls.dec_array

    def _decode(self, shots, packed_in, packed_out, what, correlated=False, num_threads=1):
        if correlated and not self._graph.correlations:
            raise ValueError(_CORRELATIONS_MSG)
        arr = _check_shots(shots, self.num_detectors, packed_in, what)
        n = arr.shape[0]
        preds = _predictions(n, self.num_fault_ids, packed_out)
        weights = np.zeros(n, dtype=np.float64)
        bad = _lib.c_size_t(0)
        # ctypes releases the GIL for the length of these calls.
        if num_threads > 1:
            flags = ((_lib.MWPM_BATCH_PACKED_SHOTS if packed_in else 0) |
                     (_lib.MWPM_BATCH_PACKED_PREDICTIONS if packed_out else 0) |
                     (_lib.MWPM_BATCH_CORRELATED if correlated else 0))
            st = lib.cudaq_mwpm_decode_batch(self._decoders(num_threads), num_threads, _ptr(arr), n, flags,
                                             _ptr(preds), _ptr(weights), _lib.ctypes.byref(bad))
        else:
            dec = self._decoder()
            st = lib.cudaq_py_mwpm_decode_batch(dec.ptr, self.num_detectors, self.num_fault_ids, _ptr(arr), n,
                                                int(packed_in), _ptr(preds), int(packed_out), _ptr(weights),
                                                int(bool(correlated)), _lib.ctypes.byref(bad))
        if st != _lib.MWPM_OK:
            raise _shot_error(st, bad.value, n, arr, packed_in, self.num_detectors)
        return preds, weights


def _events_of(arr, shot, packed, num_dets):
    row = arr[shot]
    if packed:
        row = np.unpackbits(row, bitorder="little")[:num_dets]
    return np.flatnonzero(row)


def _shot_error(st, shot, n, arr, packed, num_dets):
    where = f"shot {shot}" if n > 1 else "the shot"
    if st == _lib.MWPM_ERR_NO_SOLUTION:
        ev = _events_of(arr, shot, packed, num_dets)
        shown = ", ".join(f"D{d}" for d in ev[:10]) + (", ..." if len(ev) > 10 else "")
        return _lib.mwpm_error(st, (
            f"{where}: no set of errors in the detector error model produces these {len(ev)} detection "
            f"events ({shown}): a part of the matching graph with no boundary edge holds an odd number "
            f"of them (C decoder: {lib.cudaq_mwpm_status_str(st).decode()})"))
    return _lib.mwpm_error(st, f"{where}: {lib.cudaq_mwpm_status_str(st).decode()}")
