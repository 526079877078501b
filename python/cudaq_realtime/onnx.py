"""cudaq_realtime.OnnxModel: the project's ONNX loader and NN CPU executor
(include/cudaq/nn/nn.h), to check a model against onnxruntime or run it."""
import collections
import os
import threading

import numpy as np

from . import _lib
from ._lib import lib

Binding = collections.namedtuple("Binding", "name dtype shape")

_DTYPES = {1: np.float32, 2: np.uint8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16}


class _Executor:
    def __init__(self, model):
        self.model = model  # the model outlives its executors
        self.ptr = _lib.c_void_p()
        st = lib.cudaq_nn_cpu_create(model.ptr, _lib.ctypes.byref(self.ptr))
        if st != 0:
            self.ptr = None
            raise _lib.nn_error(st)

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.cudaq_nn_cpu_destroy(self.ptr)
            self.ptr = None


class _Model:
    def __init__(self, path):
        self.ptr = _lib.c_void_p()
        err = _lib.NnError()
        st = lib.cudaq_nn_model_load_file(os.fsencode(path), _lib.ctypes.byref(self.ptr), _lib.ctypes.byref(err))
        if st != 0:
            self.ptr = None
            raise _lib.nn_error(st, f"{path}: {err.message.decode(errors='replace')}")

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.cudaq_nn_model_destroy(self.ptr)
            self.ptr = None


class OnnxModel:
    """An ONNX model loaded by the C loader (supported operators and types:
    include/cudaq/nn/nn.h), run on the CPU executor. `inputs` and `outputs`
    list Binding(name, dtype, shape). Thread-safe: each thread gets its own
    executor; the GIL is released during run()."""

    def __init__(self, path):
        if not _lib.HAVE_NN:
            raise NotImplementedError("cudaq_realtime was built without the NN engine (it needs "
                                      "libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev at build time)")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"cudaq_realtime.OnnxModel: {path!r} does not exist")
        self.path = path
        self._model = _Model(path)
        self.inputs = self._bindings(lib.cudaq_nn_model_num_inputs, lib.cudaq_nn_model_input)
        self.outputs = self._bindings(lib.cudaq_nn_model_num_outputs, lib.cudaq_nn_model_output)
        self._tls = threading.local()

    def _bindings(self, count, get):
        out = []
        b = _lib.NnBinding()
        for i in range(count(self._model.ptr)):
            get(self._model.ptr, i, _lib.ctypes.byref(b))
            if b.dtype not in _DTYPES:
                raise _lib.CudaqUnsupportedError(f"{self.path}: binding {i} has unsupported dtype {b.dtype}")
            out.append(Binding(b.name.decode(), np.dtype(_DTYPES[b.dtype]), tuple(b.shape[:b.rank])))
        return out

    def __repr__(self):
        return f"<cudaq_realtime.OnnxModel {self.path!r} inputs={self.inputs} outputs={self.outputs}>"

    def run(self, inputs):
        """Runs the model once. `inputs`: a dict {name: array}, a list in input
        order, or one array for a one-input model; each is converted to the
        binding's dtype and must have its shape (or its number of elements).
        Returns the outputs as a list of arrays in output order (as
        onnxruntime's session.run(None, feeds))."""
        if isinstance(inputs, dict):
            unknown = set(inputs) - {b.name for b in self.inputs}
            if unknown:
                raise ValueError(f"unknown input name(s) {sorted(unknown)}; the model's inputs are "
                                 f"{[b.name for b in self.inputs]}")
            missing = [b.name for b in self.inputs if b.name not in inputs]
            if missing:
                raise ValueError(f"missing input(s) {missing}")
            values = [inputs[b.name] for b in self.inputs]
        elif isinstance(inputs, np.ndarray):
            values = [inputs]
        else:
            values = list(inputs)
        if len(values) != len(self.inputs):
            raise ValueError(f"the model has {len(self.inputs)} input(s), got {len(values)}")
        arrays = []
        for b, v in zip(self.inputs, values):
            a = np.asarray(v)
            n = int(np.prod(b.shape))
            if a.shape != b.shape and a.size != n:
                raise ValueError(f"input '{b.name}' has shape {a.shape}; the model needs {b.shape}")
            arrays.append(np.ascontiguousarray(a.astype(b.dtype, copy=False).reshape(b.shape)))
        outs = [np.empty(b.shape, dtype=b.dtype) for b in self.outputs]
        ex = getattr(self._tls, "ex", None)
        if ex is None:
            ex = self._tls.ex = _Executor(self._model)
        nin, nout = len(arrays), len(outs)
        in_ptrs = (_lib.c_void_p * nin)(*[a.ctypes.data for a in arrays])
        in_sizes = (_lib.c_size_t * nin)(*[a.nbytes for a in arrays])
        out_ptrs = (_lib.c_void_p * nout)(*[o.ctypes.data for o in outs])
        out_sizes = (_lib.c_size_t * nout)(*[o.nbytes for o in outs])
        err = _lib.NnError()
        st = lib.cudaq_nn_cpu_run(ex.ptr, in_ptrs, in_sizes, out_ptrs, out_sizes, _lib.ctypes.byref(err))
        if st != 0:
            raise _lib.nn_error(st, err.message.decode(errors="replace"))
        return outs


def run(model_path, inputs):
    """OnnxModel(model_path).run(inputs): loads the model each call."""
    return OnnxModel(model_path).run(inputs)
