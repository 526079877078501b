"""cudaq_realtime: the project's C decoders from Python.

- Matching: exact MWPM with pymatching.Matching's API (from_detector_error_model,
  decode, decode_batch with bit-packed shots/predictions and weights);
- HybridDecoder: an ONNX predecoder (or "local") then MWPM, on the CPU;
- OnnxModel / run: the ONNX loader and CPU executor;
- sinter_decoders(): "cudaq-mwpm" and "cudaq-hybrid" for sinter;
- find_model / manifest / models_dir: the shipped predecoder models.

Errors of the C layer come up as CudaqError subclasses (ValueError, OSError,
NotImplementedError) carrying the C message; the GIL is released while the C
code decodes or runs a model.
"""
from ._lib import CudaqError, CudaqIOError, CudaqUnsupportedError, CudaqValueError, HAVE_NN
from .hybrid import HybridDecoder
from .matching import Matching
from .models import find_model, manifest, models_dir
from .onnx import Binding, OnnxModel, run
from .sinter_plugin import HybridSinterDecoder, MwpmSinterDecoder, sinter_decoders

__version__ = "0.1.0"
__all__ = ["Matching", "HybridDecoder", "OnnxModel", "Binding", "run", "sinter_decoders",
           "MwpmSinterDecoder", "HybridSinterDecoder", "find_model", "manifest", "models_dir",
           "CudaqError", "CudaqValueError", "CudaqIOError", "CudaqUnsupportedError", "HAVE_NN"]
