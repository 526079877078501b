"""ctypes bindings to libcudaq_realtime_py.so (built by `pip install .`).

Why ctypes rather than a CPython extension: the C library already has a plain
C API with statuses and message buffers, ctypes releases the GIL around every
foreign call (so decoding runs in parallel from several threads with no extra
code), and the shared library does not depend on the Python version: one
build serves every Python 3. The loops over shots are in C
(python/src/cudaq_realtime_py.c), so the per-call cost of ctypes (about a
microsecond) is paid once per batch, not once per shot.
"""
import ctypes
import os
from ctypes import POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, \
    c_uint32, c_uint64, c_void_p

_HERE = os.path.dirname(os.path.abspath(__file__))
_ABI_VERSION = 4


class CudaqError(Exception):
    """An error reported by the C library: `status` is its status code,
    `status_name` the library's name for it, and the message is the C layer's."""

    def __init__(self, message, status=0, status_name=""):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class CudaqValueError(CudaqError, ValueError):
    """Bad input: a malformed model or shot, an index out of range, a shot with
    no matching (CudaqError and ValueError, as PyMatching raises ValueError)."""


class CudaqIOError(CudaqError, OSError):
    """A file could not be read."""


class CudaqUnsupportedError(CudaqError, NotImplementedError):
    """Something this build or the C library does not do."""


def _load():
    path = os.environ.get("CUDAQ_REALTIME_LIBRARY") or os.path.join(_HERE, "libcudaq_realtime_py.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"cudaq_realtime: cannot load its C library {path}: {e} "
                          "(install the package with `pip install .` from the repository root)") from e
    if lib.cudaq_py_abi_version() != _ABI_VERSION:
        raise ImportError(f"cudaq_realtime: {path} has ABI {lib.cudaq_py_abi_version()}, "
                          f"the Python code expects {_ABI_VERSION}: reinstall the package")
    return lib


lib = _load()
HAVE_NN = hasattr(lib, "cudaq_nn_cpu_run")

# ---------------------------------------------------------------------------
# MWPM: include/cudaq/qec/dem.h, mwpm.h
# ---------------------------------------------------------------------------
MWPM_OK = 0
MWPM_ERR_INVALID_ARG = -1
MWPM_ERR_PARSE = -2
MWPM_ERR_NOT_GRAPHLIKE = -3
MWPM_ERR_NO_MEMORY = -4
MWPM_ERR_IO = -5
MWPM_ERR_TOO_LARGE = -6
MWPM_ERR_NO_SOLUTION = -7
MWPM_ERR_OUT_OF_RANGE = -8
MWPM_ERR_FORMAT = -9


class MwpmError(ctypes.Structure):
    _fields_ = [("line", c_size_t), ("message", c_char * 256)]


class MwpmResult(ctypes.Structure):
    _fields_ = [("obs_mask", c_uint64), ("weight", c_double), ("num_pairs", c_size_t)]


class MwpmGraphOptions(ctypes.Structure):
    _fields_ = [("merge", c_int), ("enable_correlations", c_int), ("per_shot_weights", c_int)]


class MwpmEdge(ctypes.Structure):
    _fields_ = [("u", c_int32), ("v", c_int32), ("weight", c_double), ("obs_mask", c_uint64)]


def _sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_sig("cudaq_mwpm_status_str", c_char_p, c_int)
_sig("cudaq_dem_parse", c_int, c_char_p, c_size_t, POINTER(c_void_p), POINTER(MwpmError))
_sig("cudaq_dem_destroy", None, c_void_p)
_sig("cudaq_mwpm_graph_from_dem", c_int, c_void_p, POINTER(MwpmGraphOptions), POINTER(c_void_p),
     POINTER(MwpmError))
_sig("cudaq_mwpm_graph_destroy", None, c_void_p)
_sig("cudaq_mwpm_graph_num_nodes", c_uint32, c_void_p)
_sig("cudaq_mwpm_graph_num_observables", c_uint32, c_void_p)
_sig("cudaq_mwpm_graph_num_edges", c_size_t, c_void_p)
_sig("cudaq_mwpm_graph_has_correlations", c_int, c_void_p)
_sig("cudaq_mwpm_graph_num_correlation_rules", c_size_t, c_void_p)
_sig("cudaq_mwpm_graph_edge", c_int, c_void_p, c_size_t, POINTER(MwpmEdge))
_sig("cudaq_mwpm_decoder_create", c_int, c_void_p, POINTER(c_void_p))
_sig("cudaq_mwpm_decoder_destroy", None, c_void_p)
_sig("cudaq_mwpm_decode_batch", c_int, c_void_p, c_size_t, c_void_p, c_size_t, ctypes.c_uint, c_void_p,
     c_void_p, POINTER(c_size_t))
MWPM_BATCH_PACKED_SHOTS = 1
MWPM_BATCH_PACKED_PREDICTIONS = 2
MWPM_BATCH_CORRELATED = 4
MWPM_BATCH_MAX_THREADS = 256
_sig("cudaq_py_mwpm_decode_batch", c_int, c_void_p, c_uint32, c_uint32, c_void_p, c_size_t, c_int,
     c_void_p, c_int, c_void_p, c_int, POINTER(c_size_t))

# ---------------------------------------------------------------------------
# Predecoders: include/cudaq/qec/predecoder.h
# ---------------------------------------------------------------------------
PREDECODER_OK = 0
PREDECODER_ERR_INVALID_ARG = -1
PREDECODER_ERR_MODEL = -2
PREDECODER_ERR_NN = -3
PREDECODER_ERR_NO_DEVICE = -4
PREDECODER_ERR_OUTPUT = -5
PREDECODER_ERR_OUT_OF_RANGE = -6
PREDECODER_ERR_NO_MEMORY = -7
PREDECODER_ERR_UNSUPPORTED = -8
PREDECODER_CPU, PREDECODER_GPU = 0, 1  # cudaq_predecoder_device_t
PREDECODER_FP32, PREDECODER_FP16 = 0, 1  # cudaq_predecoder_precision_t
PREDECODER_WEIGHTS = {"auto": 0, "off": 1, "on": 2}  # cudaq_predecoder_weights_t
LAYER_PREDECODER = 1
LAYER_MWPM = 2


class PredecoderError(ctypes.Structure):
    _fields_ = [("message", c_char * 320)]


class OnnxPredecoderOptions(ctypes.Structure):
    _fields_ = [("device", c_int), ("precision", c_int), ("gpu_ordinal", c_int),
                ("plan_path", c_char_p), ("graph", c_void_p),
                ("weights", c_int), ("match_graph", c_void_p)]  # weighted matching: AUTO, off without match_graph


class LocalPredecoderOptions(ctypes.Structure):
    _fields_ = [("weight_factor", c_double)]


_sig("cudaq_predecoder_status_str", c_char_p, c_int)
_sig("cudaq_onnx_predecoder_options_init", c_int, POINTER(OnnxPredecoderOptions))
_sig("cudaq_predecoder_create_onnx", c_int, c_char_p, c_uint32, c_uint32,
     POINTER(OnnxPredecoderOptions), POINTER(c_void_p), POINTER(PredecoderError))
_sig("cudaq_predecoder_check_layout", c_int, c_void_p, c_void_p, POINTER(c_int), POINTER(PredecoderError))
_sig("cudaq_predecoder_weighted", c_int, c_void_p)
_sig("cudaq_predecoder_set_weight_map", c_int, c_void_p, c_void_p)
_sig("cudaq_predecoder_create_local", c_int, c_void_p, POINTER(LocalPredecoderOptions),
     POINTER(c_void_p), POINTER(PredecoderError))
_sig("cudaq_predecoder_destroy", None, c_void_p)
_sig("cudaq_py_hybrid_decode_batch", c_int, c_void_p, c_void_p, c_uint32, c_uint32, c_void_p,
     c_size_t, c_int, c_void_p, c_int, c_void_p, c_void_p, POINTER(c_size_t), POINTER(c_int),
     POINTER(PredecoderError))

# ---------------------------------------------------------------------------
# NN CPU executor: include/cudaq/nn/nn.h (absent when built without it)
# ---------------------------------------------------------------------------
NN_MAX_RANK = 8


class NnError(ctypes.Structure):
    _fields_ = [("message", c_char * 256)]


class NnBinding(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int),
                ("shape", c_int64 * NN_MAX_RANK), ("num_elements", c_size_t),
                ("size_bytes", c_size_t), ("is_input", c_int)]


if HAVE_NN:
    _sig("cudaq_nn_status_str", c_char_p, c_int)
    _sig("cudaq_nn_model_load_file", c_int, c_char_p, POINTER(c_void_p), POINTER(NnError))
    _sig("cudaq_nn_model_destroy", None, c_void_p)
    _sig("cudaq_nn_model_num_inputs", c_size_t, c_void_p)
    _sig("cudaq_nn_model_num_outputs", c_size_t, c_void_p)
    _sig("cudaq_nn_model_input", c_int, c_void_p, c_size_t, POINTER(NnBinding))
    _sig("cudaq_nn_model_output", c_int, c_void_p, c_size_t, POINTER(NnBinding))
    _sig("cudaq_nn_cpu_create", c_int, c_void_p, POINTER(c_void_p))
    _sig("cudaq_nn_cpu_destroy", None, c_void_p)
    _sig("cudaq_nn_cpu_run", c_int, c_void_p, POINTER(c_void_p), POINTER(c_size_t),
         POINTER(c_void_p), POINTER(c_size_t), POINTER(NnError))
    _sig("cudaq_nn_cpu_blas_core", c_char_p)
    # OpenBLAS's kernels are chosen here, at import, on the importing thread:
    # the choice may set an environment variable for a moment, which must not
    # race with the decoder threads that create executors later (nn.h).
    BLAS_CORE = lib.cudaq_nn_cpu_blas_core().decode()


def mwpm_error(status, message=""):
    """The exception for a cudaq_mwpm_status_t, with the C message."""
    name = lib.cudaq_mwpm_status_str(status).decode()
    text = message or name
    if status == MWPM_ERR_NO_MEMORY:
        return MemoryError(text)
    if status == MWPM_ERR_IO:
        return CudaqIOError(text, status, name)
    return CudaqValueError(text, status, name)


def predecoder_error(status, message=""):
    name = lib.cudaq_predecoder_status_str(status).decode()
    text = message or name
    if status == PREDECODER_ERR_NO_MEMORY:
        return MemoryError(text)
    if status in (PREDECODER_ERR_UNSUPPORTED, PREDECODER_ERR_NO_DEVICE):
        return CudaqUnsupportedError(text, status, name)
    return CudaqValueError(text, status, name)


NN_ERR_IO = -2
NN_ERR_UNSUPPORTED = -4
NN_ERR_NO_MEMORY = -7


def nn_error(status, message=""):
    name = lib.cudaq_nn_status_str(status).decode()
    text = message or name
    if status == NN_ERR_NO_MEMORY:
        return MemoryError(text)
    if status == NN_ERR_IO:
        return CudaqIOError(text, status, name)
    if status == NN_ERR_UNSUPPORTED:
        return CudaqUnsupportedError(text, status, name)
    return CudaqValueError(text, status, name)


def _check_struct_sizes():
    """The ctypes mirrors against the C structures' sizes (cudaq_py_struct_size):
    a field added on one side only would make the C side read past a
    Python-made structure."""
    _sig("cudaq_py_struct_size", c_size_t, c_int)
    mirrors = [MwpmGraphOptions, MwpmResult, MwpmEdge, OnnxPredecoderOptions, LocalPredecoderOptions,
               NnBinding]
    for i, cls in enumerate(mirrors):
        c = lib.cudaq_py_struct_size(i)
        if c != ctypes.sizeof(cls):
            raise ImportError(f"cudaq_realtime: {cls.__name__} is {ctypes.sizeof(cls)} bytes here, the C "
                              f"structure {c}: the package and its C library disagree (reinstall it)")


_check_struct_sizes()
