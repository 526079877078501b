"""cudaq_realtime.HybridDecoder: a predecoder (an ONNX model on the NN CPU
executor, or the rule-based local predecoder) then exact MWPM on the residual
detection events, in C."""
import os
import threading

import numpy as np

from . import _lib
from ._lib import lib
from .matching import (Matching, _Decoder, _Graph, _check_shots, _dem_text, _one_shot, _predictions, _ptr,
                       _shot_error)
from .models import find_model


class _Predecoder:
    """One thread's cudaq_predecoder_t."""

    def __init__(self, model_path, graph, num_dets, num_obs, weight_factor, gpu=None, check_layout=True,
                 weights="off", match_graph=None):
        self.ptr = _lib.c_void_p()
        err = _lib.PredecoderError()
        if model_path == "local":
            opts = _lib.LocalPredecoderOptions(weight_factor)
            st = lib.cudaq_predecoder_create_local(graph.ptr, _lib.ctypes.byref(opts), _lib.ctypes.byref(self.ptr),
                                                   _lib.ctypes.byref(err))
        else:
            opts = _lib.OnnxPredecoderOptions()
            lib.cudaq_onnx_predecoder_options_init(_lib.ctypes.byref(opts))
            if check_layout:  # the model's detector layout checked against the DEM's
                opts.graph = graph.ptr
            opts.weights = _lib.PREDECODER_WEIGHTS[weights]
            if match_graph is not None:  # weighted matching's edges are match_graph's
                opts.match_graph = match_graph.ptr
            if gpu is not None:  # (precision, ordinal, plan path)
                opts.device = _lib.PREDECODER_GPU
                opts.precision = _lib.PREDECODER_FP16 if gpu[0] == "fp16" else _lib.PREDECODER_FP32
                opts.gpu_ordinal = gpu[1]
                opts.plan_path = os.fsencode(gpu[2]) if gpu[2] else None
            st = lib.cudaq_predecoder_create_onnx(os.fsencode(model_path), num_dets, num_obs, _lib.ctypes.byref(opts),
                                                  _lib.ctypes.byref(self.ptr), _lib.ctypes.byref(err))
        if st != _lib.PREDECODER_OK:
            self.ptr = None
            raise _lib.predecoder_error(st, f"predecoder {model_path}: {err.message.decode(errors='replace')}")

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.cudaq_predecoder_destroy(self.ptr)
            self.ptr = None


class HybridDecoder:
    """Predecoder + MWPM. `model` is an ONNX file following models/README.md's
    contract, "local" for the rule-based local predecoder, None to pick the
    shipped model made for `dem`'s circuit (cudaq_realtime.find_model), or
    "fast" for the shipped fast-family model of that circuit. `dem`
    is a stim.DetectorErrorModel or its text. The prediction of a shot is the
    predecoder's logical frame XOR MWPM's prediction on the residual events.

    The ONNX model runs on the NN engine's CPU executor (device="cpu", FP32)
    or on its GPU engine (device="gpu": CUDA graph replay per shot,
    precision "fp32" or "fp16", on CUDA device gpu_ordinal, with the tuned
    plan cached in plan_path if given). The GPU engine needs a package built
    with CUDA (`pip install . -C cmake.define.CUDAQ_ENABLE_CUDA=ON` on a
    machine with the CUDA toolkit and cuDNN) and a CUDA device; otherwise
    device="gpu" raises CudaqUnsupportedError with the reason.
    Thread-safe like Matching: each thread gets its own predecoder (on the
    GPU: its own engine) and MWPM state on first use.

    The detector layout a model records is compared with the DEM's detector
    coordinates (up to a translation); a model of another circuit, or a DEM
    without coordinates, raises CudaqValueError. check_layout=False skips
    the comparison, for a caller who knows that the model fits the DEM.

    weights: weighted matching (models/README.md, "Weighted matching"), as
    qec-decode's --predecoder_weights: "auto" (default) matches the residual
    of threshold 0 with the network's per-shot edge weights where the ONNX
    model gives them (output `edge_logits`: the shipped d = 5-13 files),
    "on" requires them, "off" matches the model's thresholded residual on the
    DEM's weights. The `weighted` attribute says which one runs.
    """

    def __init__(self, model, dem, *, device="cpu", precision="fp32", gpu_ordinal=0, plan_path=None,
                 local_weight_factor=1.3, check_layout=True, weights="auto"):
        if device not in ("cpu", "gpu"):
            raise ValueError(f"cudaq_realtime.HybridDecoder: device must be 'cpu' or 'gpu', got {device!r}")
        if precision not in ("fp32", "fp16"):
            raise ValueError(f"cudaq_realtime.HybridDecoder: precision must be 'fp32' or 'fp16', got {precision!r}")
        if device == "cpu" and precision != "fp32":
            raise ValueError("cudaq_realtime.HybridDecoder: the CPU executor runs FP32 only (fp16 needs device='gpu')")
        if weights not in _lib.PREDECODER_WEIGHTS:
            raise ValueError(f"cudaq_realtime.HybridDecoder: weights must be 'auto', 'on' or 'off', got {weights!r}")
        if weights == "on" and model == "local":
            raise ValueError("cudaq_realtime.HybridDecoder: weights='on' needs an ONNX model with edge logits, "
                             "not the local predecoder")
        if device == "gpu" and model == "local":
            raise ValueError("cudaq_realtime.HybridDecoder: the local predecoder runs on the CPU (device='cpu')")
        self._gpu = (precision, int(gpu_ordinal), plan_path) if device == "gpu" else None
        self.device, self.precision = device, precision
        if model is None or model == "fast":
            if isinstance(dem, (str, bytes)):
                import stim
                dem = stim.DetectorErrorModel(dem.decode() if isinstance(dem, bytes) else dem)
            model = find_model(dem, fast=model == "fast")
        model = os.fspath(model)
        if model != "local" and not os.path.isfile(model):
            raise FileNotFoundError(f"cudaq_realtime.HybridDecoder: model file {model!r} does not exist "
                                    "(give an ONNX file, \"local\", None or \"fast\" for a shipped model of the DEM)")
        self.model_path = model
        self.matching = Matching.from_detector_error_model(dem)
        # Weighted matching needs a graph whose decoders keep per-shot weights (the DEM's, once more)
        self._weights = "off" if model == "local" else weights
        self._match_graph = (_Graph(_dem_text(dem), 0, per_shot_weights=True) if self._weights != "off"
                             else self.matching._graph)
        self._weight_factor = float(local_weight_factor)
        self._check_layout = bool(check_layout)
        self._tls = threading.local()
        self._state()  # load and check the model now, so that a bad one fails here
        self.weighted = bool(lib.cudaq_predecoder_weighted(self._tls.state[0].ptr))

    @property
    def num_detectors(self):
        return self.matching.num_detectors

    @property
    def num_fault_ids(self):
        return self.matching.num_fault_ids

    def __repr__(self):
        where = f"GPU {self._gpu[1]} {self.precision}" if self._gpu else "CPU"
        return (f"<cudaq_realtime.HybridDecoder {self.model_path!r} ({where}) + "
                f"{'weighted ' if self.weighted else ''}MWPM, {self.num_detectors} detectors>")

    def _state(self):
        st = getattr(self._tls, "state", None)
        if st is None:
            g, mg = self.matching._graph, self._match_graph
            pre = _Predecoder(self.model_path, g, g.num_nodes, g.num_observables, self._weight_factor, self._gpu,
                              self._check_layout, self._weights, mg if self._weights != "off" else None)
            dec = _Decoder(mg)
            if lib.cudaq_predecoder_weighted(pre.ptr):  # MWPM reads the model's edge logits as weights
                st = lib.cudaq_predecoder_set_weight_map(pre.ptr, dec.ptr)
                if st != _lib.PREDECODER_OK:
                    raise _lib.predecoder_error(st, "predecoder: weighted matching: the map onto the DEM's graph")
            st = self._tls.state = (pre, dec)
        return st

    def decode(self, z, *, return_weight=False):
        """As Matching.decode (z: 1D, or 2D as PyMatching takes it)."""
        preds, weights, _ = self._decode(_one_shot(z, self.num_detectors), False, False, "z")
        return (preds[0], float(weights[0])) if return_weight else preds[0]

    def decode_batch(self, shots, *, return_weights=False, bit_packed_shots=False,
                     bit_packed_predictions=False, return_residual_counts=False):
        """As Matching.decode_batch; weights are MWPM's on the residual.
        return_residual_counts=True also returns each shot's residual event
        count (uint32), after the other results."""
        preds, weights, counts = self._decode(shots, bool(bit_packed_shots), bool(bit_packed_predictions), "shots")
        out = (preds,)
        if return_weights:
            out += (weights,)
        if return_residual_counts:
            out += (counts,)
        return out if len(out) > 1 else preds

    def _decode(self, shots, packed_in, packed_out, what):
        nd, no = self.num_detectors, self.num_fault_ids
        arr = _check_shots(shots, nd, packed_in, what)
        n = arr.shape[0]
        preds = _predictions(n, no, packed_out)
        weights = np.zeros(n, dtype=np.float64)
        counts = np.zeros(n, dtype=np.uint32)
        pre, dec = self._state()
        bad = _lib.c_size_t(0)
        layer = _lib.c_int(0)
        err = _lib.PredecoderError()
        # ctypes releases the GIL for the length of this call.
        st = lib.cudaq_py_hybrid_decode_batch(pre.ptr, dec.ptr, nd, no, _ptr(arr), n, int(packed_in), _ptr(preds),
                                              int(packed_out), _ptr(weights), _ptr(counts),
                                              _lib.ctypes.byref(bad), _lib.ctypes.byref(layer),
                                              _lib.ctypes.byref(err))
        if st != 0:
            if layer.value == _lib.LAYER_PREDECODER:
                where = f"shot {bad.value}" if n > 1 else "the shot"
                raise _lib.predecoder_error(st, f"{where}: predecoder: {err.message.decode(errors='replace')}")
            raise _shot_error(st, bad.value, n, arr, packed_in, nd)
        return preds, weights, counts
