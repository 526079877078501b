#!/usr/bin/env python3
"""Reference data for the NN engine tests (tests/nn).

gen --out DIR builds small ONNX models with onnx.helper (one per operator and
a few multi-operator models shaped like predecoders), draws random inputs
with a fixed seed, runs onnxruntime for the reference outputs and writes:

  DIR/NAME.onnx, DIR/NAME.in<i>.bin, DIR/NAME.out<i>.bin   (raw little-endian)
  DIR/cases.txt: "run NAME NUM_INPUTS NUM_OUTPUTS TOLERANCE"
                 "refuse FILE STATUS PHRASE|PHRASE..." (models the loader must refuse)

The C test (tests/nn/test_onnx_reference.c) loads every model, runs the CPU
executor on the same inputs and compares; it checks every refusal's status and
that the error message names the problem.

The predecoder-shaped CNNs of the benchmark are exported from PyTorch by
bench/nn/torch_cnn.py on the GPU machine.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

NP = {TP.FLOAT: np.float32, TP.INT32: np.int32, TP.UINT8: np.uint8, TP.INT64: np.int64,
      TP.BOOL: np.bool_}


class Gen:
    def __init__(self, out):
        self.out = out
        self.rng = np.random.default_rng(20261123)
        self.manifest = []

    def rand(self, dtype, shape, lo=None, hi=None):
        if dtype == TP.FLOAT:
            return self.rng.standard_normal(shape).astype(np.float32)
        if dtype == TP.BOOL:
            return self.rng.integers(0, 2, shape).astype(np.bool_)
        lo = -5 if lo is None and dtype != TP.UINT8 else (0 if lo is None else lo)
        hi = 5 if hi is None else hi
        return self.rng.integers(lo, hi + 1, shape).astype(NP[dtype])

    def model(self, nodes, inputs, outputs, inits=(), opset=17, out_shapes=None):
        vin = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
        vout = [helper.make_tensor_value_info(n, t, out_shapes[i] if out_shapes else None)
                for i, (n, t) in enumerate(outputs)]
        g = helper.make_graph(nodes, "g", vin, vout, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="cudaq-onnx-reference")
        m.ir_version = 9
        return m

    def case(self, name, nodes, inputs, outputs, inits=(), opset=17, feeds=None, tol=1e-4):
        """inputs: [(name, dtype, shape)]; outputs: [(name, dtype)]."""
        import onnxruntime as ort
        m = self.model(nodes, inputs, outputs, inits, opset)
        feeds = feeds or {}
        data = {}
        for n, t, s in inputs:
            shape = [1 if isinstance(d, str) else d for d in s]
            data[n] = feeds[n] if n in feeds else self.rand(t, shape)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        res = sess.run([n for n, _ in outputs], data)
        # Declare the output shapes the reference computed (the loader checks them).
        m = self.model(nodes, inputs, outputs, inits, opset, [list(r.shape) for r in res])
        onnx.checker.check_model(m)
        self.save(name, m)
        for i, (n, _, _) in enumerate(inputs):
            np.ascontiguousarray(data[n]).tofile(os.path.join(self.out, f"{name}.in{i}.bin"))
        for i, r in enumerate(res):
            np.ascontiguousarray(r).tofile(os.path.join(self.out, f"{name}.out{i}.bin"))
        self.manifest.append(f"run {name} {len(inputs)} {len(outputs)} {tol:g}")

    def save(self, name, m):
        with open(os.path.join(self.out, f"{name}.onnx"), "wb") as f:
            f.write(m.SerializeToString())

    def refuse(self, name, m_or_bytes, status, *words):
        path = os.path.join(self.out, f"{name}.onnx")
        with open(path, "wb") as f:
            f.write(m_or_bytes if isinstance(m_or_bytes, bytes) else m_or_bytes.SerializeToString())
        self.manifest.append(f"refuse {name}.onnx {status} " + "|".join(words))


def init(name, arr):
    return numpy_helper.from_array(arr, name)


def node(op, ins, outs, name=None, **attrs):
    return helper.make_node(op, ins, outs, name=name or f"{op.lower()}_{outs[0]}", **attrs)


def single_ops(g):
    F, I32, U8, I64 = TP.FLOAT, TP.INT32, TP.UINT8, TP.INT64
    r = g.rng
    w = lambda *s: r.standard_normal(s).astype(np.float32) * 0.5
    # Conv 1D / 2D / 3D, padding, strides, dilations, auto_pad.
    g.case("conv1d", [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1])],
           [("x", F, [1, 3, 10])], [("y", F)], [init("w", w(4, 3, 3)), init("b", w(4))])
    g.case("conv2d_stride_pad", [node("Conv", ["x", "w"], ["y"], strides=[2, 1], pads=[1, 0, 1, 2])],
           [("x", F, [1, 2, 6, 5])], [("y", F)], [init("w", w(3, 2, 3, 3))])
    g.case("conv2d_dilation", [node("Conv", ["x", "w", "b"], ["y"], dilations=[2, 2], pads=[2, 2, 2, 2],
                                    kernel_shape=[3, 3])],
           [("x", F, [1, 2, 7, 7])], [("y", F)], [init("w", w(3, 2, 3, 3)), init("b", w(3))])
    g.case("conv3d", [node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 6)],
           [("x", F, [1, 4, 5, 5, 5])], [("y", F)], [init("w", w(8, 4, 3, 3, 3)), init("b", w(8))])
    # Wide "same" 3D convolutions on a d = 13 grid: the GPU engine's tiled
    # kernel with 16 and with 8 output channels per block.
    g.case("conv3d_wide_m128", [node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 6)],
           [("x", F, [1, 8, 13, 13, 13])], [("y", F)], [init("w", w(128, 8, 3, 3, 3)), init("b", w(128))])
    g.case("conv3d_wide_m64", [node("Conv", ["x", "w"], ["y"], pads=[1] * 6)],
           [("x", F, [1, 8, 13, 13, 13])], [("y", F)], [init("w", w(64, 8, 3, 3, 3))])
    g.case("conv3d_same_stride", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2, 2])],
           [("x", F, [1, 2, 5, 6, 7])], [("y", F)], [init("w", w(3, 2, 3, 3, 3))])
    g.case("conv3d_same_lower", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER")],
           [("x", F, [1, 2, 4, 4, 4])], [("y", F)], [init("w", w(2, 2, 2, 2, 2))])
    g.case("conv2d_valid", [node("Conv", ["x", "w"], ["y"], auto_pad="VALID")],
           [("x", F, [1, 3, 5, 5])], [("y", F)], [init("w", w(2, 3, 3, 3))])
    # Activations.
    for op in ["Relu", "Sigmoid", "Erf"]:
        g.case(op.lower(), [node(op, ["x"], ["y"])], [("x", F, [2, 3, 4])], [("y", F)])
    g.case("relu_int32", [node("Relu", ["x"], ["y"])], [("x", I32, [3, 5])], [("y", I32)])
    g.case("gelu", [node("Gelu", ["x"], ["y"])], [("x", F, [4, 6])], [("y", F)], opset=20)
    g.case("gelu_tanh", [node("Gelu", ["x"], ["y"], approximate="tanh")], [("x", F, [4, 6])], [("y", F)],
           opset=20)
    # Arithmetic with broadcasting, float / int32 / uint8 / int64.
    for op in ["Add", "Sub", "Mul", "Div"]:
        g.case(f"{op.lower()}_bcast", [node(op, ["a", "b"], ["y"])],
               [("a", F, [3, 1, 4]), ("b", F, [2, 4])], [("y", F)])
        g.case(f"{op.lower()}_int32", [node(op, ["a", "b"], ["y"])],
               [("a", I32, [2, 3, 4]), ("b", I32, [4])], [("y", I32)],
               feeds={"b": g.rand(I32, [4], 1, 5)})
    g.case("add_uint8", [node("Add", ["a", "b"], ["y"])], [("a", U8, [3, 4]), ("b", U8, [3, 1])], [("y", U8)])
    g.case("mul_uint8_scalar", [node("Mul", ["a", "s"], ["y"])], [("a", U8, [5, 4])], [("y", U8)],
           [init("s", np.array(3, dtype=np.uint8))])
    g.case("add_int64", [node("Add", ["a", "b"], ["y"])], [("a", I64, [2, 3]), ("b", I64, [1, 3])], [("y", I64)])
    g.case("div_float_scalar", [node("Div", ["a", "s"], ["y"])], [("a", F, [2, 5])], [("y", F)],
           [init("s", np.array([2.5], dtype=np.float32))])
    # MatMul / Gemm.
    g.case("matmul_2d", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [3, 4]), ("b", F, [4, 5])], [("y", F)])
    g.case("matmul_batch", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 3, 4])], [("y", F)],
           [init("b", w(4, 5))])
    g.case("matmul_bcast", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [3, 4]), ("b", F, [2, 4, 5])], [("y", F)])
    g.case("matmul_vec", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [4]), ("b", F, [2, 4, 3])], [("y", F)])
    g.case("matmul_matvec", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 3, 4]), ("b", F, [4])], [("y", F)])
    g.case("gemm", [node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0)],
           [("a", F, [3, 4])], [("y", F)], [init("b", w(4, 5)), init("c", w(5))])
    g.case("gemm_trans", [node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1)],
           [("a", F, [4, 3]), ("b", F, [5, 4]), ("c", F, [3, 1])], [("y", F)])
    g.case("gemm_noc", [node("Gemm", ["a", "b"], ["y"], transB=1)], [("a", F, [1, 6])], [("y", F)],
           [init("b", w(2, 6))])
    # Shape and data movement.
    g.case("reshape", [node("Reshape", ["x", "s"], ["y"])], [("x", F, [2, 3, 4])], [("y", F)],
           [init("s", np.array([0, -1, 2], dtype=np.int64))])
    g.case("reshape_int32", [node("Reshape", ["x", "s"], ["y"])], [("x", I32, [1, 4, 3, 3])], [("y", I32)],
           [init("s", np.array([1, 36], dtype=np.int64))])
    g.case("transpose", [node("Transpose", ["x"], ["y"], perm=[2, 0, 3, 1])], [("x", F, [2, 3, 4, 5])], [("y", F)])
    g.case("transpose_default_u8", [node("Transpose", ["x"], ["y"])], [("x", U8, [2, 3, 4])], [("y", U8)])
    g.case("squeeze_axes", [node("Squeeze", ["x", "a"], ["y"])], [("x", F, [1, 3, 1, 4])], [("y", F)],
           [init("a", np.array([0, -2], dtype=np.int64))])
    g.case("squeeze_all", [node("Squeeze", ["x"], ["y"])], [("x", I32, [1, 3, 1, 4])], [("y", I32)])
    g.case("unsqueeze", [node("Unsqueeze", ["x", "a"], ["y"])], [("x", F, [3, 4])], [("y", F)],
           [init("a", np.array([0, 3], dtype=np.int64))])
    g.case("concat", [node("Concat", ["a", "b", "c"], ["y"], axis=1)],
           [("a", F, [2, 1, 3]), ("b", F, [2, 4, 3]), ("c", F, [2, 2, 3])], [("y", F)])
    g.case("concat_int32_neg_axis", [node("Concat", ["a", "b"], ["y"], axis=-1)],
           [("a", I32, [2, 3]), ("b", I32, [2, 2])], [("y", I32)])
    g.case("slice", [node("Slice", ["x", "s", "e", "ax", "st"], ["y"])], [("x", F, [5, 6, 7])], [("y", F)],
           [init("s", np.array([1, -1, 0], dtype=np.int64)), init("e", np.array([100, -5, 7], dtype=np.int64)),
            init("ax", np.array([0, 2, 1], dtype=np.int64)), init("st", np.array([2, -1, 3], dtype=np.int64))])
    g.case("slice_int32_noaxes", [node("Slice", ["x", "s", "e"], ["y"])], [("x", I32, [4, 6])], [("y", I32)],
           [init("s", np.array([1, 2], dtype=np.int32)), init("e", np.array([3, 6], dtype=np.int32))])
    g.case("gather", [node("Gather", ["x", "i"], ["y"], axis=1)], [("x", F, [3, 5, 2])], [("y", F)],
           [init("i", np.array([[0, 4], [-1, 2]], dtype=np.int64))])
    g.case("gather_int32", [node("Gather", ["x", "i"], ["y"])], [("x", I32, [6, 3])], [("y", I32)],
           [init("i", np.array([5, 0, 3], dtype=np.int32))])
    g.case("gather_scalar_u8", [node("Gather", ["x", "i"], ["y"], axis=-1)], [("x", U8, [2, 4])], [("y", U8)],
           [init("i", np.array(2, dtype=np.int64))])
    # Cast.
    g.case("cast_f2i", [node("Cast", ["x"], ["y"], to=I32)], [("x", F, [3, 4])], [("y", I32)],
           feeds={"x": (g.rng.standard_normal([3, 4]) * 10).astype(np.float32)})
    g.case("cast_i2f", [node("Cast", ["x"], ["y"], to=F)], [("x", I32, [3, 4])], [("y", F)])
    g.case("cast_u8_i32", [node("Cast", ["x"], ["y"], to=I32)], [("x", U8, [7])], [("y", I32)],
           feeds={"x": g.rand(U8, [7], 0, 255)})
    g.case("cast_i32_u8", [node("Cast", ["x"], ["y"], to=U8)], [("x", I32, [7])], [("y", U8)],
           feeds={"x": g.rand(I32, [7], 0, 255)})
    g.case("cast_f_bool_i64", [node("Cast", ["x"], ["b"], to=TP.BOOL), node("Cast", ["b"], ["y"], to=I64)],
           [("x", F, [6])], [("y", I64)],
           feeds={"x": np.array([0, 1.5, -2, 0, 0.25, 3], dtype=np.float32)})
    # Comparisons and Where.
    for op in ["Greater", "Less", "Equal"]:
        g.case(f"{op.lower()}_f", [node(op, ["a", "b"], ["c"]), node("Cast", ["c"], ["y"], to=U8)],
               [("a", F, [3, 4]), ("b", F, [4])], [("y", U8)],
               feeds={"a": g.rand(I32, [3, 4]).astype(np.float32), "b": g.rand(I32, [4]).astype(np.float32)})
        g.case(f"{op.lower()}_i32", [node(op, ["a", "b"], ["c"]), node("Cast", ["c"], ["y"], to=I32)],
               [("a", I32, [2, 3]), ("b", I32, [2, 1])], [("y", I32)])
    g.case("equal_u8", [node("Equal", ["a", "b"], ["c"]), node("Cast", ["c"], ["y"], to=U8)],
           [("a", U8, [8]), ("b", U8, [8])], [("y", U8)])
    g.case("where", [node("Greater", ["a", "z"], ["c"]), node("Where", ["c", "a", "b"], ["y"])],
           [("a", F, [3, 4]), ("b", F, [1, 4])], [("y", F)], [init("z", np.array(0, dtype=np.float32))])
    g.case("where_int32", [node("Less", ["a", "b"], ["c"]), node("Where", ["c", "a", "k"], ["y"])],
           [("a", I32, [2, 5]), ("b", I32, [5])], [("y", I32)], [init("k", np.array([-7], dtype=np.int32))])
    # Identity / Constant.
    g.case("identity", [node("Identity", ["x"], ["y"])], [("x", U8, [3, 3])], [("y", U8)])
    g.case("constant", [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(w(2, 3))),
                        node("Add", ["x", "k"], ["y"])], [("x", F, [2, 3])], [("y", F)])
    g.case("constant_lists", [helper.make_node("Constant", [], ["s"], value_ints=[3, 2]),
                              helper.make_node("Constant", [], ["k"], value_floats=[1.5, -2.0]),
                              helper.make_node("Constant", [], ["f"], value_float=0.25),
                              node("Reshape", ["x", "s"], ["r"]), node("Mul", ["r", "k"], ["m"]),
                              node("Add", ["m", "f"], ["y"])], [("x", F, [6])], [("y", F)])
    g.case("opset13", [node("Unsqueeze", ["x", "a"], ["u"]), node("Relu", ["u"], ["y"])],
           [("x", F, [3])], [("y", F)], [init("a", np.array([1], dtype=np.int64))], opset=13)


def cnn3d(g, name, in_dtype, out_dtype, hidden, d, t, opset=17):
    """Predecoder-shaped model: (1, 4, T, d, d) detectors -> Cast -> Conv3d+ReLU
    x len(hidden) -> Conv3d to 1 channel -> Sigmoid -> > 0.5 -> Cast, plus an
    auxiliary output (a Slice/Gather/ReduceFree 'logical frame')."""
    r = g.rng
    nodes, inits = [node("Cast", ["x"], ["xf"], to=TP.FLOAT)], []
    prev, cin = "xf", 4
    for i, c in enumerate(hidden + [1]):
        wname, bname, out = f"w{i}", f"b{i}", f"h{i}"
        inits += [init(wname, (r.standard_normal([c, cin, 3, 3, 3]) / np.sqrt(cin * 27)).astype(np.float32)),
                  init(bname, (r.standard_normal([c]) * 0.1).astype(np.float32))]
        nodes.append(node("Conv", [prev, wname, bname], [out], pads=[1] * 6, kernel_shape=[3, 3, 3]))
        if i < len(hidden):
            nodes.append(node("Relu", [out], [out + "r"]))
            out += "r"
        prev, cin = out, c
    inits += [init("half", np.array(0.5, dtype=np.float32)),
              init("shape", np.array([1, t * d * d], dtype=np.int64)),
              init("rows", np.array([0, t - 1], dtype=np.int64)),
              init("s0", np.array([0], dtype=np.int64)), init("s1", np.array([1], dtype=np.int64)),
              init("ax", np.array([1], dtype=np.int64))]
    nodes += [node("Sigmoid", [prev], ["p"]), node("Greater", ["p", "half"], ["gt"]),
              node("Cast", ["gt"], ["gi"], to=out_dtype), node("Reshape", ["gi", "shape"], ["residual"]),
              # auxiliary output: first and last round of channel 0 of the input
              node("Slice", ["x", "s0", "s1", "ax"], ["c0"]), node("Gather", ["c0", "rows"], ["lf"], axis=2),
              node("Cast", ["lf"], ["logical_frame"], to=out_dtype)]
    feeds = {"x": g.rand(in_dtype, [1, 4, t, d, d], 0, 1)}
    g.case(name, nodes, [("x", in_dtype, ["batch", 4, t, d, d])],
           [("residual", out_dtype), ("logical_frame", out_dtype)], inits, opset=opset, feeds=feeds, tol=0)


def multi_ops(g):
    F, I32, U8 = TP.FLOAT, TP.INT32, TP.UINT8
    r = g.rng
    cnn3d(g, "predecoder_int32", I32, I32, [8, 8], 5, 5)
    cnn3d(g, "predecoder_uint8", U8, U8, [8, 16, 8], 3, 4, opset=20)
    w = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)
    g.case("mlp_head", [node("Reshape", ["x", "s"], ["f"]), node("Gemm", ["f", "w1", "b1"], ["h"], transB=1),
                        node("Gelu", ["h"], ["a"], approximate="tanh"), node("MatMul", ["a", "w2"], ["o"]),
                        node("Add", ["o", "b2"], ["y"])],
           [("x", F, [1, 2, 3, 4])], [("y", F)],
           [init("s", np.array([1, -1], dtype=np.int64)), init("w1", w(16, 24)), init("b1", w(16)),
            init("w2", w(16, 5)), init("b2", w(5))], opset=20)
    g.case("pre_post", [node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                        node("Unsqueeze", ["t", "a1"], ["u"]),
                        node("Concat", ["u", "u"], ["c"], axis=1),
                        node("Slice", ["c", "s", "e", "ax"], ["sl"]),
                        node("Squeeze", ["sl", "a0"], ["sq"]),
                        node("Gather", ["sq", "gi"], ["ga"], axis=1),
                        node("Equal", ["ga", "one"], ["eq"]),
                        node("Less", ["ga", "zero"], ["lt"]),
                        node("Where", ["eq", "ga", "minus"], ["w1"]),
                        node("Where", ["lt", "zero", "w1"], ["w2"]),
                        node("Cast", ["w2"], ["y"], to=U8),
                        node("Cast", ["eq"], ["y2"], to=I32)],
           [("x", I32, [1, 6, 4])], [("y", U8), ("y2", I32)],
           [init("a1", np.array([1], dtype=np.int64)), init("a0", np.array([0, 1], dtype=np.int64)),
            init("s", np.array([1, 0], dtype=np.int64)), init("e", np.array([2, 3], dtype=np.int64)),
            init("ax", np.array([1, 2], dtype=np.int64)), init("gi", np.array([5, 0, 2, 2], dtype=np.int64)),
            init("one", np.array(1, dtype=np.int32)), init("zero", np.array(0, dtype=np.int32)),
            init("minus", np.array(3, dtype=np.int32))],
           feeds={"x": g.rand(I32, [1, 6, 4], -1, 2)}, tol=0)
    g.case("folded_constants", [node("Add", ["k1", "k2"], ["k"]), node("Mul", ["x", "k"], ["y"])],
           [("x", F, [2, 3])], [("y", F)], [init("k1", w(2, 3)), init("k2", w(3))])


def refusals(g):
    F = TP.FLOAT
    ok = lambda nodes, inputs, outputs, inits=(), opset=17, shapes=None: g.model(
        nodes, inputs, outputs, inits, opset, shapes)
    g.refuse("bad_unknown_op", ok([node("Softmax", ["x"], ["y"], name="sm")], [("x", F, [2, 3])], [("y", F)],
                                  shapes=[[2, 3]]), "UNSUPPORTED", "node 'sm' (Softmax)", "operator 'Softmax'")
    g.refuse("bad_unknown_op_unnamed",
             ok([node("Relu", ["x"], ["r"]), helper.make_node("LayerNormalization", ["r", "x"], ["y"])],
                [("x", F, [2, 3])], [("y", F)], shapes=[[2, 3]]),
             "UNSUPPORTED", "node #1 (LayerNormalization)")
    g.refuse("bad_attr_group", ok([node("Conv", ["x", "w"], ["y"], name="c", group=2)], [("x", F, [1, 2, 5])],
                                  [("y", F)], [init("w", np.zeros([2, 1, 3], np.float32))], shapes=[[1, 2, 3]]),
             "UNSUPPORTED", "node 'c' (Conv)", "'group'")
    g.refuse("bad_attr_unknown", ok([node("Relu", ["x"], ["y"], name="r", alpha=1.0)], [("x", F, [2])], [("y", F)],
                                    shapes=[[2]]), "UNSUPPORTED", "node 'r' (Relu)", "attribute 'alpha'")
    g.refuse("bad_cast_fp16", ok([node("Cast", ["x"], ["y"], name="c", to=TP.FLOAT16)], [("x", F, [2])],
                                 [("y", TP.FLOAT16)], shapes=[[2]]), "UNSUPPORTED", "node 'c' (Cast)", "float16")
    g.refuse("bad_domain", ok([helper.make_node("Foo", ["x"], ["y"], name="f", domain="com.example")],
                              [("x", F, [2])], [("y", F)], shapes=[[2]]), "UNSUPPORTED", "node 'f' (Foo)", "com.example")
    g.refuse("bad_opset11", ok([node("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F)], opset=11, shapes=[[2]]),
             "UNSUPPORTED", "opset 11")
    g.refuse("bad_opset21", ok([node("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F)], opset=21, shapes=[[2]]),
             "UNSUPPORTED", "opset 21")
    g.refuse("bad_symbolic_dim", ok([node("Relu", ["x"], ["y"])], [("x", F, [1, "n"])], [("y", F)], shapes=[[1, 2]]),
             "UNSUPPORTED", "symbolic dimension 1")
    g.refuse("bad_input_fp16", ok([node("Relu", ["x"], ["y"])], [("x", TP.FLOAT16, [2])], [("y", TP.FLOAT16)],
                                  shapes=[[2]]), "UNSUPPORTED", "'x'", "float16")
    m = ok([node("Add", ["x", "w"], ["y"])], [("x", F, [4])], [("y", F)], [init("w", np.ones(4, np.float32))],
           shapes=[[4]])
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TP.EXTERNAL
    w.external_data.add(key="location", value="weights.bin")
    g.refuse("bad_external_data", m, "UNSUPPORTED", "'w'", "external data")
    g.refuse("bad_reshape_dynamic", ok([node("Reshape", ["x", "s"], ["y"], name="rs")],
                                       [("x", F, [2, 3]), ("s", TP.INT64, [2])], [("y", F)], shapes=[[3, 2]]),
             "UNSUPPORTED", "node 'rs' (Reshape)", "constant")
    g.refuse("bad_gather_dynamic", ok([node("Gather", ["x", "i"], ["y"], name="ga")],
                                      [("x", F, [4]), ("i", TP.INT64, [2])], [("y", F)], shapes=[[2]]),
             "UNSUPPORTED", "node 'ga' (Gather)", "constant")
    g.refuse("bad_shape_broadcast", ok([node("Add", ["a", "b"], ["y"], name="add")],
                                       [("a", F, [2, 3]), ("b", F, [4])], [("y", F)], shapes=[[2, 3]]),
             "SHAPE", "node 'add' (Add)", "broadcast")
    g.refuse("bad_shape_output", ok([node("Relu", ["x"], ["y"])], [("x", F, [2, 3])], [("y", F)], shapes=[[3, 2]]),
             "SHAPE", "graph output 'y'", "declared")
    g.refuse("bad_shape_conv", ok([node("Conv", ["x", "w"], ["y"], name="cv")], [("x", F, [1, 3, 5])], [("y", F)],
                                  [init("w", np.zeros([2, 4, 3], np.float32))], shapes=[[1, 2, 3]]),
             "SHAPE", "node 'cv' (Conv)", "channels")
    g.refuse("bad_shape_matmul", ok([node("MatMul", ["a", "b"], ["y"], name="mm")],
                                    [("a", F, [2, 3]), ("b", F, [4, 5])], [("y", F)], shapes=[[2, 5]]),
             "SHAPE", "node 'mm' (MatMul)", "inner")
    g.refuse("bad_shape_reshape", ok([node("Reshape", ["x", "s"], ["y"], name="rs")], [("x", F, [2, 3])], [("y", F)],
                                     [init("s", np.array([4, 2], np.int64))], shapes=[[4, 2]]),
             "SHAPE", "node 'rs' (Reshape)", "cannot reshape")
    g.refuse("bad_unsorted", ok([node("Relu", ["r"], ["y"], name="second"), node("Relu", ["x"], ["r"], name="first")],
                                [("x", F, [2])], [("y", F)], shapes=[[2]]),
             "MODEL", "node 'second' (Relu)", "input 'r'")
    g.refuse("bad_missing_output", ok([node("Relu", ["x"], ["r"])], [("x", F, [2])], [("y", F)], shapes=[[2]]),
             "MODEL", "graph output 'y'")
    # Files that are not models.
    good = open(os.path.join(g.out, "conv3d.onnx"), "rb").read()
    g.refuse("bad_truncated", good[: len(good) // 2], "PARSE", "truncated")
    g.refuse("bad_random", bytes(np.random.default_rng(7).integers(0, 256, 300, dtype=np.uint8)), "PARSE",
             "does not parse")
    g.refuse("bad_empty", b"", "PARSE", "no graph")
    g.refuse("bad_text", b"this is not an onnx file\n", "PARSE", "not a valid ONNX model")


def tc_cases(g):
    """Convolutions for the GPU engine's tensor-core kernel (stride 1): odd and
    padded channel counts (one and several K chunks, partial N tiles), non-cube
    and 2D shapes, no padding with dilation, asymmetric padding, batch 2, and
    a d = 13, 64 -> 128 layer (several chunks through the prefetch pipeline),
    with and without a fused ReLU. Generated last so that the other cases keep
    their random data."""
    F = TP.FLOAT
    r = g.rng

    def conv(name, x, cout, k, relu=False, bias=True, **attrs):
        cin, taps = x[1], int(np.prod(k))
        inits = [init("w", (r.standard_normal([cout, cin] + k) / np.sqrt(cin * taps)).astype(np.float32))]
        ins = ["x", "w"]
        if bias:
            inits.append(init("b", (r.standard_normal([cout]) * 0.1).astype(np.float32)))
            ins.append("b")
        nodes = [node("Conv", ins, ["c" if relu else "y"], kernel_shape=k, **attrs)]
        if relu:
            nodes.append(node("Relu", ["c"], ["y"]))
        g.case(name, nodes, [("x", F, x)], [("y", F)], inits)

    conv("conv3d_tc_odd", [1, 5, 6, 7, 9], 19, [3, 3, 3], pads=[1] * 6)
    conv("conv3d_tc_wide", [1, 40, 5, 6, 7], 37, [3, 3, 3], relu=True, pads=[1] * 6)
    conv("conv3d_tc_valid_dil", [1, 6, 6, 7, 8], 10, [2, 3, 3], bias=False, dilations=[1, 2, 1])
    conv("conv3d_tc_asym", [1, 3, 4, 5, 6], 9, [2, 2, 2], relu=True, auto_pad="SAME_UPPER")
    conv("conv3d_tc_batch2", [2, 8, 4, 5, 6], 16, [3, 3, 3], pads=[1] * 6)
    conv("conv3d_tc_1x1", [1, 24, 3, 4, 5], 7, [1, 1, 1])
    conv("conv3d_tc_d13_c64_m128", [1, 64, 13, 13, 13], 128, [3, 3, 3], relu=True, pads=[1] * 6)
    conv("conv2d_tc", [1, 33, 9, 11], 24, [3, 3], relu=True, pads=[1] * 4)


def cl_weights(g, prefix, cin, cout, k):
    """A convolution's weights and bias (initializers prefix + "w" / "b")."""
    taps = int(np.prod(k))
    return [init(prefix + "w", (g.rng.standard_normal([cout, cin] + k) / np.sqrt(cin * taps)).astype(np.float32)),
            init(prefix + "b", (g.rng.standard_normal([cout]) * 0.1).astype(np.float32))]


def cl_chain(g, name, x, layers, extra_nodes=(), outputs=None):
    """A chain of convolutions, layers: (cout, k, relu, attrs); conv i reads the previous value."""
    nodes, inits, cur, cin = [], [], "x", x[1]
    for i, (cout, k, relu, attrs) in enumerate(layers):
        inits += cl_weights(g, "l%d" % i, cin, cout, k)
        out = "c%d" % i
        nodes.append(node("Conv", [cur, "l%dw" % i, "l%db" % i], [out], kernel_shape=k, **attrs))
        if relu:
            nodes.append(node("Relu", [out], ["r%d" % i]))
            out = "r%d" % i
        cur, cin = out, cout
    nodes += list(extra_nodes)
    g.case(name, nodes, [("x", TP.FLOAT, x)], outputs or [(cur, TP.FLOAT)], inits)


def cl_cases(g):
    """Convolution chains for the GPU engine's channels-last kernel: values
    between convolutions stay NDHWC where every consumer is a convolution
    (chain, branch to two convolutions, strided link, 2D, batch 2), and stay
    NCDHW where another operator or a graph output reads them (mixed).
    Generated after tc_cases so that the earlier cases keep their data."""
    F = TP.FLOAT

    def weights(prefix, cin, cout, k):
        return cl_weights(g, prefix, cin, cout, k)

    def chain(name, x, layers, extra_nodes=(), outputs=None):
        cl_chain(g, name, x, layers, extra_nodes, outputs)

    p1 = dict(pads=[1] * 6)
    chain("conv3d_cl_chain", [1, 8, 6, 7, 5], [(16, [3, 3, 3], True, p1), (24, [3, 3, 3], True, p1),
                                               (5, [3, 3, 3], False, p1)])
    chain("conv3d_cl_stride", [1, 8, 7, 6, 9], [(16, [3, 3, 3], True, dict(pads=[1] * 6, strides=[2, 2, 2])),
                                                (8, [3, 3, 3], False, p1)])
    chain("conv2d_cl_chain", [1, 16, 9, 10], [(32, [3, 3], True, dict(pads=[1] * 4)), (16, [3, 3], False,
                                                                                       dict(pads=[1] * 4))])
    chain("conv3d_cl_batch2", [2, 8, 4, 5, 6], [(16, [3, 3, 3], True, p1), (4, [1, 1, 1], False, {})])
    # several channel blocks of 32 (3, 2 with a partial one, 3), partial bricks in every
    # dimension, asymmetric padding: the brick algorithms' split K and window edges.
    chain("conv3d_cl_wide", [1, 8, 5, 9, 11], [(96, [3, 3, 3], True, p1), (40, [3, 3, 3], True, p1),
                                               (72, [3, 3, 3], True, dict(pads=[1, 0, 2, 1, 2, 0])),
                                               (5, [3, 3, 3], False, p1)])
    # batch 2 through the brick algorithms (NDHWC 40 -> 24 channels, partial bricks)
    chain("conv3d_cl_batch2_wide", [2, 8, 3, 5, 9], [(40, [3, 3, 3], True, p1), (24, [3, 3, 3], True, p1),
                                                     (3, [3, 3, 3], False, p1)])
    # the narrow brick algorithms (<= 16 output channels, every input channel in one CTA):
    # 128 -> 9 as a predecoder's last layer (partial brick rows and columns, NCDHW out),
    # 40 -> 16 (a partial block of 16 channels, asymmetric padding, NDHWC out into a
    # 1 x 1 x 1 layer) and 16 -> 1 (one output channel); 8 -> 5 without padding (output
    # dims 2 smaller than the input's, 8 channels: half a block) and 8 -> 3 with padding
    # 2 on one side only (output dims 1 larger).
    chain("conv3d_cl_narrow", [1, 8, 3, 6, 11], [(128, [3, 3, 3], True, p1), (9, [3, 3, 3], False, p1)])
    chain("conv3d_cl_narrow_valid", [1, 8, 5, 6, 11], [(8, [3, 3, 3], True, p1), (5, [3, 3, 3], True, {}),
                                                      (8, [3, 3, 3], True, p1),
                                                      (3, [3, 3, 3], False, dict(pads=[2, 0, 2, 1, 2, 1]))])
    chain("conv3d_cl_narrow_pads", [2, 8, 4, 5, 9], [(40, [3, 3, 3], True, p1),
                                                     (16, [3, 3, 3], True, dict(pads=[1, 0, 2, 1, 2, 0])),
                                                     (16, [3, 3, 3], True, p1), (1, [3, 3, 3], True, p1),
                                                     (3, [1, 1, 1], False, {})])
    # h feeds two convolutions (NDHWC edge with two consumers); their sum is NCDHW.
    inits = weights("a", 8, 16, [3, 3, 3]) + weights("b", 16, 8, [3, 3, 3]) + weights("c", 16, 8, [3, 3, 3])
    g.case("conv3d_cl_branch", [node("Conv", ["x", "aw", "ab"], ["ha"], kernel_shape=[3, 3, 3], pads=[1] * 6),
                                node("Relu", ["ha"], ["h"]),
                                node("Conv", ["h", "bw", "bb"], ["yb"], kernel_shape=[3, 3, 3], pads=[1] * 6),
                                node("Conv", ["h", "cw", "cb"], ["yc"], kernel_shape=[3, 3, 3], pads=[2] * 6,
                                     dilations=[2, 2, 2]),
                                node("Add", ["yb", "yc"], ["y"])],
           [("x", F, [1, 8, 5, 6, 7])], [("y", F)], inits)
    # h is read by a convolution and by Sigmoid, and is a graph output: NCDHW.
    chain("conv3d_cl_mixed", [1, 8, 5, 5, 6], [(16, [3, 3, 3], False, p1), (8, [3, 3, 3], True, p1)],
          extra_nodes=[node("Sigmoid", ["c0"], ["s"])], outputs=[("r1", F), ("s", F), ("c0", F)])


def fuse_cases(g):
    """Graphs for the GPU engine's fusion passes (gpu_fuse.cu): an elementwise
    chain with a broadcast scalar, integer division and casts whose
    intermediate value is also a graph output (the chain must split there),
    and copy chains (Concat -> Gather -> Reshape -> Transpose -> Concat, one
    composed map) beside a copy read twice (must stay its own step)."""
    F, I32 = TP.FLOAT, TP.INT32
    g.case("fuse_ew_chain", [node("Mul", ["x", "k"], ["a"]), node("Add", ["a", "x"], ["b"]),
                             node("Cast", ["b"], ["c"], to=I32), node("Div", ["c", "two"], ["d"]),
                             node("Mul", ["d", "two"], ["e"]), node("Sub", ["c", "e"], ["f"]),
                             node("Cast", ["f"], ["y"], to=F), node("Greater", ["y", "half"], ["gt"]),
                             node("Cast", ["gt"], ["z"], to=I32)],
           [("x", F, [2, 3, 5])], [("y", F), ("a", F), ("z", I32)],
           [init("k", np.array([3.3], dtype=np.float32)), init("two", np.array([2], dtype=np.int32)),
            init("half", np.array(0.5, dtype=np.float32))],
           feeds={"x": (g.rng.standard_normal([2, 3, 5]) * 4).astype(np.float32)}, tol=0)
    g.case("fuse_copy_chain", [node("Concat", ["x", "zero"], ["cat"], axis=1),
                               node("Gather", ["cat", "gi"], ["ga"], axis=1),
                               node("Reshape", ["ga", "shp"], ["r"]),
                               node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
                               node("Gather", ["x", "gj"], ["h"], axis=1),
                               node("Concat", ["h", "h"], ["hh"], axis=1),
                               node("Reshape", ["hh", "shp2"], ["hr"]),
                               node("Concat", ["t", "hr"], ["y"], axis=1)],
           [("x", F, [1, 6])], [("y", F)],
           [init("zero", np.zeros([1, 1], dtype=np.float32)),
            init("gi", np.array([6, 0, 5, 6, 1, 1, 2, 6], dtype=np.int64)),
            init("shp", np.array([1, 2, 4], dtype=np.int64)), init("shp2", np.array([1, 4, 2], dtype=np.int64)),
            init("gj", np.array([3, 1, 4, 0], dtype=np.int64))], tol=0)
    # Gathers read as a MatMul's A (composed into its loads), an elementwise
    # chain on the product's result (its epilogue), a Cast read by a Concat
    # (converted as it copies).
    g.case("fuse_gather_matmul", [node("Concat", ["x", "zero"], ["cat"], axis=1),
                                  node("Gather", ["cat", "gi"], ["ga"], axis=1),
                                  node("Reshape", ["ga", "s3"], ["r"]),
                                  node("MatMul", ["r", "ones"], ["mm"]),
                                  node("Reshape", ["mm", "s2"], ["mr"]),
                                  node("Cast", ["mr"], ["ci"], to=I32),
                                  node("Add", ["d", "ci"], ["ad"]),
                                  node("Div", ["ad", "two"], ["y"]),
                                  node("Gather", ["cat", "gj"], ["gb"], axis=1),
                                  node("MatMul", ["gb", "w"], ["y2"]),
                                  node("Cast", ["d"], ["dc"], to=F),
                                  node("Concat", ["dc", "x"], ["y3"], axis=1)],
           [("x", F, [1, 6]), ("d", I32, [1, 4])], [("y", I32), ("y2", F), ("y3", F)],
           [init("zero", np.zeros([1, 1], dtype=np.float32)),
            init("gi", np.array([6, 0, 5, 6, 1, 1, 2, 6, 3, 4, 4, 6], dtype=np.int64)),
            init("s3", np.array([1, 4, 3], dtype=np.int64)), init("s2", np.array([1, 4], dtype=np.int64)),
            init("ones", np.ones([3, 1], dtype=np.float32)), init("two", np.array([2], dtype=np.int32)),
            init("gj", np.array([5, 6, 0, 2, 2], dtype=np.int64)),
            init("w", np.round(g.rng.standard_normal([5, 2]) * 4).astype(np.float32))],
           feeds={"x": g.rng.integers(0, 2, [1, 6]).astype(np.float32), "d": g.rng.integers(-3, 4, [1, 4]).astype(np.int32)},
           tol=0)


def fuse_gemm_cases(g):
    """A predecoder-like tail for the matrix-product passes (gpu_fuse.cu):
    a threshold chain (Greater -> Cast -> Mul by a mask) read only through
    two Gathers that are MatMuls' A maps is evaluated inside their loads, and
    the two independent MatMuls (one with an integer epilogue) share one
    launch: the whole graph is one kernel. A second chain whose value is
    also a graph output keeps its own step (its MatMul reads it through the
    map as usual). Generated after the stack cases, so that every earlier
    case keeps its data."""
    F, I32 = TP.FLOAT, TP.INT32
    r = g.rng
    g.case("fuse_chain_gathers", [node("Greater", ["x", "thr"], ["gt"]),
                                  node("Cast", ["gt"], ["gf"], to=F),
                                  node("Mul", ["gf", "mask"], ["e"]),
                                  node("Concat", ["e", "zero"], ["cat"], axis=1),
                                  node("Gather", ["cat", "gi"], ["ga"], axis=1),
                                  node("Reshape", ["ga", "s3"], ["ra"]),
                                  node("MatMul", ["ra", "ones"], ["mm"]),
                                  node("Reshape", ["mm", "s2"], ["mr"]),
                                  node("Cast", ["mr"], ["ci"], to=I32),
                                  node("Add", ["d", "ci"], ["ad"]),
                                  node("Div", ["ad", "two"], ["h"]),
                                  node("Mul", ["h", "two"], ["h2"]),
                                  node("Sub", ["ad", "h2"], ["y"]),
                                  node("Gather", ["cat", "gj"], ["gb"], axis=1),
                                  node("MatMul", ["gb", "w"], ["y2"])],
           [("x", F, [1, 6]), ("d", I32, [1, 4])], [("y", I32), ("y2", F)],
           [init("thr", np.array([0.25], dtype=np.float32)),
            init("mask", np.array([[1, 1, 0, 1, 1, 1]], dtype=np.float32)),
            init("zero", np.zeros([1, 1], dtype=np.float32)),
            init("gi", np.array([6, 0, 5, 6, 1, 1, 2, 6, 3, 4, 4, 6], dtype=np.int64)),
            init("s3", np.array([1, 4, 3], dtype=np.int64)), init("s2", np.array([1, 4], dtype=np.int64)),
            init("ones", np.ones([3, 1], dtype=np.float32)), init("two", np.array([2], dtype=np.int32)),
            init("gj", np.array([[5, 6, 0, 2, 2, 4, 1]], dtype=np.int64)),
            init("w", np.round(r.standard_normal([7, 2]) * 4).astype(np.float32))],
           feeds={"x": r.standard_normal([1, 6]).astype(np.float32), "d": r.integers(0, 2, [1, 4]).astype(np.int32)},
           tol=0)
    g.case("fuse_chain_output", [node("Greater", ["x", "thr"], ["gt"]),
                                 node("Cast", ["gt"], ["e"], to=F),
                                 node("Concat", ["e", "zero"], ["cat"], axis=1),
                                 node("Gather", ["cat", "gi"], ["ga"], axis=1),
                                 node("MatMul", ["ga", "w"], ["y"])],
           [("x", F, [1, 6])], [("y", F), ("e", F)],
           [init("thr", np.array([0.0], dtype=np.float32)),
            init("zero", np.zeros([1, 1], dtype=np.float32)),
            init("gi", np.array([6, 0, 5, 3, 1], dtype=np.int64)),
            init("w", np.round(r.standard_normal([5, 3]) * 4).astype(np.float32))],
           feeds={"x": r.standard_normal([1, 6]).astype(np.float32)}, tol=0)


def fuse_conv_cases(g):
    """The channels-last convolution's fusions (gpu_fuse.cu, after tuning):
    its NCDHW input gathered through the map of the Cast -> Concat in front
    of it, and the Greater -> Cast -> Mul after it as its epilogue. Forced CL
    in FP16 runs the whole graph as two kernels. Generated last."""
    F, I32 = TP.FLOAT, TP.INT32
    r = g.rng
    g.case("fuse_conv_io", [node("Cast", ["x"], ["xf"], to=F),
                            node("Concat", ["xf", "mask"], ["xin"], axis=1),
                            node("Conv", ["xin", "w0", "b0"], ["c0"], kernel_shape=[3, 3, 3], pads=[1] * 6),
                            node("Relu", ["c0"], ["r0"]),
                            node("Conv", ["r0", "w1", "b1"], ["c1"], kernel_shape=[3, 3, 3], pads=[1] * 6),
                            node("Greater", ["c1", "thr"], ["gt"]),
                            node("Cast", ["gt"], ["gi"], to=I32),
                            node("Mul", ["gi", "valid"], ["y"])],
           [("x", I32, [1, 1, 4, 5, 6])], [("y", I32)],
           [init("mask", r.integers(0, 2, [1, 1, 4, 5, 6]).astype(np.float32)),
            init("w0", (r.standard_normal([8, 2, 3, 3, 3]) / 5).astype(np.float32)),
            init("b0", (r.standard_normal([8]) * 0.1).astype(np.float32)),
            init("w1", (r.standard_normal([4, 8, 3, 3, 3]) / 10).astype(np.float32)),
            init("b1", (r.standard_normal([4]) * 0.1).astype(np.float32)),
            init("thr", np.array([0.37], dtype=np.float32)),
            init("valid", r.integers(0, 2, [1, 4, 4, 5, 6]).astype(np.int32))],
           feeds={"x": r.integers(0, 2, [1, 1, 4, 5, 6]).astype(np.int32)}, tol=0)


def stack_cases(g):
    """Convolution chains for the GPU engine's stack kernel (gpu_stack.cu):
    wide layers that it splits over input channels (red.add between
    layers), the first layer split too (its buffer zeroed by the previous
    run's last phase), four layers (the last in the fourth buffer), partial
    bricks in every dimension and output channels that fill no column
    block. Generated after every other case, so that those keep their data."""
    F = TP.FLOAT
    r = g.rng

    def chain(name, x, layers):
        nodes, inits, cur, cin = [], [], "x", x[1]
        for i, (cout, relu) in enumerate(layers):
            inits += [init("w%d" % i, (r.standard_normal([cout, cin, 3, 3, 3]) / np.sqrt(cin * 27)).astype(np.float32)),
                      init("b%d" % i, (r.standard_normal([cout]) * 0.1).astype(np.float32))]
            nodes.append(node("Conv", [cur, "w%d" % i, "b%d" % i], ["c%d" % i], kernel_shape=[3, 3, 3], pads=[1] * 6))
            cur = "c%d" % i
            if relu:
                nodes.append(node("Relu", [cur], ["r%d" % i]))
                cur = "r%d" % i
            cin = cout
        g.case(name, nodes, [("x", F, x)], [(cur, F)], inits)

    chain("conv3d_stack_wide", [1, 32, 7, 8, 9], [(64, True), (48, True), (9, False)])
    chain("conv3d_stack_deep", [1, 32, 5, 6, 4], [(32, True), (32, True), (32, True), (32, False)])


def tail_cases(g):
    """The predecoder tail kernel (gpu_fuse.cu's nng_plan_tails, gpu_tail.cu):
    a threshold chain read through two MatMuls' Gather maps, each with a
    constant integer B, becomes one kernel. tail_parity: the parity epilogue
    with divisor 3 and negative addends (truncating division), and a
    second product with divisor -2; tail_long_k: one product of
    K = 600 (a whole block per output) stored as float; tail_not_taken: a
    mask of 0.5 (not an integer), which keeps the generic steps. x holds
    quarters (exact in FP16) and no threshold equals one. tail_div_neg1: a
    divisor of -1 (taken); tail_mask_input: the mask a graph input (not
    taken); tail_k100: groups of 32 lanes; tail_k1100: k-steps past the
    lanes' prefetch; tail_scalar_v: V a one-element constant;
    tail_grid_stride: more outputs than blocks (the grid-stride loop's second
    pass). Generated last, so that every earlier case keeps its data."""
    F, I32 = TP.FLOAT, TP.INT32
    r = g.rng

    def tail(name, mask, c1, c2, k2, mask_input=False):
        n = len(mask)
        masks = np.array([mask], dtype=np.float32)
        g.case(name, [node("Greater", ["x", "thr"], ["gt"]),
                      node("Cast", ["gt"], ["gf"], to=F),
                      node("Mul", ["gf", "mask"], ["e"]),
                      node("Concat", ["e", "zero"], ["cat"], axis=1),
                      node("Gather", ["cat", "gi"], ["ga"], axis=1),
                      node("Reshape", ["ga", "s3"], ["ra"]),
                      node("MatMul", ["ra", "bw"], ["mm"]),
                      node("Reshape", ["mm", "s2"], ["mr"]),
                      node("Cast", ["mr"], ["ci"], to=I32),
                      node("Add", ["d", "ci"], ["ad"]),
                      node("Div", ["ad", "c1"], ["h"]),
                      node("Mul", ["h", "c1"], ["h2"]),
                      node("Sub", ["ad", "h2"], ["y"]),
                      node("Gather", ["cat", "gj"], ["gb"], axis=1),
                      node("MatMul", ["gb", "w"], ["y2f"]),
                      node("Cast", ["y2f"], ["y2i"], to=I32),
                      node("Div", ["y2i", "c2"], ["q2"]),
                      node("Mul", ["c2", "q2"], ["q2m"]),
                      node("Sub", ["y2i", "q2m"], ["y2"])],
               [("x", F, [1, n]), ("d", I32, [1, 7])] + ([("mask", F, [1, n])] if mask_input else []),
               [("y", I32), ("y2", I32)],
               [init("thr", np.array([0.3], dtype=np.float32))] + ([] if mask_input else [init("mask", masks)]) +
               [init("zero", np.zeros([1, 1], dtype=np.float32)),
                init("gi", r.integers(0, n + 1, [1, 7 * 5]).astype(np.int64)),
                init("s3", np.array([1, 7, 5], dtype=np.int64)), init("s2", np.array([1, 7], dtype=np.int64)),
                init("bw", np.array([[1], [-1], [2], [1], [1]], dtype=np.float32)),
                init("c1", np.array([c1], dtype=np.int32)), init("c2", np.array([c2], dtype=np.int32)),
                init("gj", r.integers(0, n + 1, [1, k2]).astype(np.int64)),
                init("w", r.integers(-3, 4, [k2, 2]).astype(np.float32))],
               feeds=dict({"x": (r.integers(-8, 9, [1, n]) / 4.0).astype(np.float32),
                           "d": r.integers(-9, 10, [1, 7]).astype(np.int32)}, **({"mask": masks} if mask_input else {})),
               tol=0)

    tail("tail_parity", [1, -2, 0, 1, 3, 1, 1, 2, 0, 1, 1, -1], 3, -2, 40)
    tail("tail_not_taken", [1, 0.5, 0, 1, 1, 1, 1, 2, 0, 1, 1, 1], 2, 2, 9)
    def sum_of_gathered(name, n, k):
        """One product of K = k over the chain's n values gathered by one map, stored as float."""
        g.case(name, [node("Greater", ["x", "thr"], ["gt"]),
                      node("Cast", ["gt"], ["gf"], to=F),
                      node("Mul", ["gf", "mask"], ["e"]),
                      node("Concat", ["e", "zero"], ["cat"], axis=1),
                      node("Gather", ["cat", "gk"], ["gk_a"], axis=1),
                      node("MatMul", ["gk_a", "ones"], ["y"])],
               [("x", F, [1, n])], [("y", F)],
               [init("thr", np.array([0.3], dtype=np.float32)),
                init("mask", r.integers(0, 2, [1, n]).astype(np.float32)),
                init("zero", np.zeros([1, 1], dtype=np.float32)),
                init("gk", r.integers(0, n + 1, [1, k]).astype(np.int64)),
                init("ones", np.ones([k, 1], dtype=np.float32))],
               feeds={"x": (r.integers(-8, 9, [1, n]) / 4.0).astype(np.float32)}, tol=0)

    sum_of_gathered("tail_long_k", 700, 600)
    # divisor -1 (every residual 0: r - (r / -1) * -1) beside divisor 5: taken.
    tail("tail_div_neg1", [1, 1, 0, 1, 2, 1, 1, -1, 0, 1, 1, 1], -1, 5, 12)
    # the mask is a graph input, not a constant: the planner must keep the generic steps.
    tail("tail_mask_input", [1, 1, 0, 1, 2, 1, 1, -1, 0, 1, 1, 1], 2, 2, 12, mask_input=True)
    # K = 100 in the second product: groups of 32 lanes (shuffles across a whole warp).
    tail("tail_k100", [1, 1, 0, 1, 2, 1, 1, -1, 0, 1, 1, 1], 2, 2, 100)
    # K = 1100: past the 4 x 256 k-steps a block's lanes prefetch before the dependency wait.
    sum_of_gathered("tail_k1100", 1200, 1100)
    def row_sums(name, n, m_out, k, scale=None):
        """m_out sums of K = k gathered chain values each (Gather, Reshape
        [1, m_out, k], MatMul by ones), the chain's values scaled by a random
        0/1 mask, or by the one-element constant `scale` (broadcast)."""
        sname, sval = ("two", np.array([scale], dtype=np.float32)) if scale is not None else \
            ("mask", r.integers(0, 2, [1, n]).astype(np.float32))
        g.case(name, [node("Greater", ["x", "thr"], ["gt"]),
                      node("Cast", ["gt"], ["gf"], to=F),
                      node("Mul", ["gf", sname], ["e"]),
                      node("Concat", ["e", "zero"], ["cat"], axis=1),
                      node("Gather", ["cat", "gk"], ["gk_a"], axis=1),
                      node("Reshape", ["gk_a", "s3"], ["ra"]),
                      node("MatMul", ["ra", "ones"], ["y"])],
               [("x", F, [1, n])], [("y", F)],
               [init("thr", np.array([0.3], dtype=np.float32)), init(sname, sval),
                init("zero", np.zeros([1, 1], dtype=np.float32)),
                init("gk", r.integers(0, n + 1, [1, m_out * k]).astype(np.int64)),
                init("s3", np.array([1, m_out, k], dtype=np.int64)),
                init("ones", np.ones([k, 1], dtype=np.float32))],
               feeds={"x": (r.integers(-8, 9, [1, n]) / 4.0).astype(np.float32)}, tol=0)

    # V a one-element constant (broadcast: every slot's value 2): taken.
    row_sums("tail_scalar_v", 300, 40, 9, scale=2.0)
    # 1,100 outputs of K = 130 (a whole block per output): more outputs than the
    # kernel's 1,024 blocks, so blocks take a second output in their grid-stride loop.
    row_sums("tail_grid_stride", 300, 1100, 130)

def gather_front(r, T=6, H=9, W=10, n=300):
    """A predecoder's front: n events (INT32 input x, [1, n]) gathered onto a
    T x H x W grid (empty sites read an appended zero) as value "xr", beside
    two constant 0/1 site masks (initializer "masks"); returns the nodes,
    their initializers, the events fed to x and (gather indices, masks)."""
    F = TP.FLOAT
    sites = np.sort(r.choice(T * H * W, size=n, replace=False))
    gidx = np.full(T * H * W, n, dtype=np.int64)
    gidx[sites] = np.arange(n)
    masks = np.zeros([1, 2, T, H, W], dtype=np.float32)
    flat = masks.reshape(2, -1)
    flat[0, sites[::2]] = 1.0
    flat[1, sites[1::2]] = 1.0
    ev = (r.random([1, n]) < 0.2).astype(np.int32)
    nodes = [node("Cast", ["x"], ["xf"], to=F), node("Concat", ["xf", "zero"], ["xz"], axis=1),
             node("Gather", ["xz", "gidx"], ["xg"], axis=1), node("Reshape", ["xg", "shape"], ["xr"])]
    inits = [init("zero", np.zeros([1, 1], dtype=np.float32)), init("gidx", gidx),
             init("shape", np.array([1, 1, T, H, W], dtype=np.int64)), init("masks", masks)]
    return nodes, inits, ev, (gidx, masks)


def first_fold_cases(g):
    """A first convolution folded into the next one's input window
    (gpu_first.cu): its input a copy of run-time channels beside constant
    ones, the constant part and the bias folded at engine create, the run-time
    part computed where the wgmma brick stages its window. Generated last."""
    F, I32 = TP.FLOAT, TP.INT32
    r = g.rng

    def w(cout, cin):
        return (r.standard_normal([cout, cin, 3, 3, 3]) / np.sqrt(cin * 27)).astype(np.float32)

    def b(c):
        return (r.standard_normal([c]) * 0.1).astype(np.float32)

    p1 = dict(kernel_shape=[3, 3, 3], pads=[1] * 6)
    # two run-time channels (values -1 .. 2) beside a constant real-valued one; partial bricks
    x = r.choice([-1, 0, 0, 0, 1, 1, 2], size=[1, 2, 5, 9, 10]).astype(np.int32)
    g.case("first_fold_concat",
           [node("Cast", ["x"], ["xf"], to=F), node("Concat", ["xf", "c"], ["xin"], axis=1),
            node("Conv", ["xin", "w0", "b0"], ["c0"], **p1), node("Relu", ["c0"], ["r0"]),
            node("Conv", ["r0", "w1", "b1"], ["c1"], **p1), node("Relu", ["c1"], ["r1"]),
            node("Conv", ["r1", "w2", "b2"], ["y"], **p1)],
           [("x", I32, [1, 2, 5, 9, 10])], [("y", F)],
           [init("c", r.standard_normal([1, 1, 5, 9, 10]).astype(np.float32)), init("w0", w(32, 3)),
            init("b0", b(32)), init("w1", w(24, 32)), init("b1", b(24)), init("w2", w(3, 24)), init("b2", b(3))],
           feeds={"x": x})
    # a predecoder's front: events gathered onto the grid (empty sites read an
    # appended zero), two constant 0/1 site masks, 64 and 40 channels (a partial block)
    T, H, W = 6, 9, 10
    front, front_inits, ev, (gidx, masks) = gather_front(r, T, H, W)
    g.case("first_fold_gather",
           front + [node("Concat", ["xr", "masks"], ["xin"], axis=1),
            node("Conv", ["xin", "w0", "b0"], ["c0"], **p1), node("Relu", ["c0"], ["r0"]),
            node("Conv", ["r0", "w1", "b1"], ["c1"], **p1), node("Relu", ["c1"], ["r1"]),
            node("Conv", ["r1", "w2", "b2"], ["y"], **p1)],
           [("x", I32, [1, 300])], [("y", F)],
           front_inits + [init("w0", w(64, 3)), init("b0", b(64)), init("w1", w(40, 64)), init("b1", b(40)),
                          init("w2", w(5, 40)), init("b2", b(5))],
           feeds={"x": ev})
    # FP32 run-time values (not exact in FP16), no bias and no ReLU on the
    # first layer, 40 channels (a partial second block of the folded window)
    g.case("first_fold_tail",
           [node("Concat", ["x", "c"], ["xin"], axis=1),
            node("Conv", ["xin", "w0"], ["c0"], **p1),
            node("Conv", ["c0", "w1", "b1"], ["c1"], **p1), node("Relu", ["c1"], ["r1"]),
            node("Conv", ["r1", "w2", "b2"], ["y"], **p1)],
           [("x", F, [1, 1, 4, 6, 7])], [("y", F)],
           [init("c", r.standard_normal([1, 1, 4, 6, 7]).astype(np.float32)), init("w0", w(40, 2)),
            init("w1", w(16, 40)), init("b1", b(16)), init("w2", w(3, 16)), init("b2", b(3))],
           feeds={"x": (r.standard_normal([1, 1, 4, 6, 7]) * 3).astype(np.float32)})
    # not folded: empty sites read a constant 1 inside the run-time channel
    # (ones), and a copy that is also a graph output (seen)
    for name, pad, extra_out in (("first_fold_refused_const", 1.0, False), ("first_fold_refused_output", 0.0, True)):
        outs = [("y", F)] + ([("xin", F)] if extra_out else [])
        g.case(name,
               [node("Cast", ["x"], ["xf"], to=F), node("Concat", ["xf", "pad"], ["xz"], axis=1),
                node("Gather", ["xz", "gidx"], ["xg"], axis=1), node("Reshape", ["xg", "shape"], ["xr"]),
                node("Concat", ["xr", "masks"], ["xin"], axis=1),
                node("Conv", ["xin", "w0", "b0"], ["c0"], **p1), node("Relu", ["c0"], ["r0"]),
                node("Conv", ["r0", "w1", "b1"], ["y"], **p1)],
               [("x", I32, [1, 300])], outs,
               [init("pad", np.full([1, 1], pad, dtype=np.float32)), init("gidx", gidx),
                init("shape", np.array([1, 1, T, H, W], dtype=np.int64)), init("masks", masks),
                init("w0", w(32, 3)), init("b0", b(32)), init("w1", w(16, 32)), init("b1", b(16))],
               feeds={"x": ev})


def splitk_cases(g):
    """Split K (channel blocks summed across a cluster) where the sum's
    stores are not four-channel runs: 64 -> 33 channels (two blocks, an odd
    channel count, NDHWC out) and 33 -> 70 (a partial block, NCDHW graph
    output). Generated last so that the earlier cases keep their data."""
    p1 = dict(pads=[1] * 6)
    cl_chain(g, "conv3d_cl_splitk_odd", [1, 8, 5, 6, 7], [(64, [3, 3, 3], True, p1), (33, [3, 3, 3], True, p1),
                                                          (70, [3, 3, 3], False, p1)])


def cnet_cases(g):
    """Narrow chains for the cluster kernel (gpu_cnet.cu): a d = 13 fast
    predecoder's shape (14^3 cells over 16 CTAs, two m16 tiles per warp,
    halos that reach two CTAs away); batch 2 with kernels 1 x 3 x 3 and
    3 x 1 x 1, odd channel counts (17, 3) and a layer without ReLU; a large
    volume (7,680 cells, four m16 tiles per warp); five m64 blocks a CTA;
    a volume only the grid mode holds (18^3 cells, 32 channels); a volume
    smaller than the cluster (3 cells).
    Generated last so that the earlier cases keep their data."""
    p1 = dict(pads=[1] * 6)
    cl_chain(g, "conv3d_cnet_d13", [1, 3, 14, 14, 14], [(32, [3, 3, 3], True, p1), (32, [3, 3, 3], True, p1),
                                                        (32, [3, 3, 3], True, p1), (9, [3, 3, 3], False, p1)])
    cl_chain(g, "conv3d_cnet_mixed", [2, 5, 7, 9, 6], [(17, [1, 3, 3], True, dict(pads=[0, 1, 1, 0, 1, 1])),
                                                       (32, [3, 3, 3], False, p1),
                                                       (3, [3, 1, 1], True, dict(pads=[1, 0, 0, 1, 0, 0]))])
    cl_chain(g, "conv3d_cnet_large", [1, 4, 16, 20, 24], [(8, [3, 3, 3], True, p1), (6, [3, 3, 3], False, p1)])
    # 4,800 cells: 300 a CTA, five m64 blocks, so that the wgmma products
    # (gpu_cnet.cu, cn_layer_wg) give each warpgroup two blocks and split a
    # third; 16 -> 16 -> 8 channels (wider rows would not fit a CTA)
    cl_chain(g, "conv3d_cnet_odd5", [1, 3, 15, 16, 20], [(16, [3, 3, 3], True, p1), (16, [3, 3, 3], True, p1),
                                                         (8, [3, 3, 3], False, p1)])
    # 18^3 cells, 32 channels: more than a cluster's shared memory holds, so
    # only the grid mode of the same kernel runs it (tens of CTAs, each
    # waiting on the flags of the CTAs its window reads)
    cl_chain(g, "conv3d_cnet_grid18", [1, 3, 18, 18, 18], [(32, [3, 3, 3], True, p1), (32, [3, 3, 3], True, p1),
                                                            (9, [3, 3, 3], False, p1)])
    # 1 x 1 x 3 = 3 cells over a cluster of 16: thirteen CTAs own no cell,
    # and the windows of the last five lie past the volume's end (no rows
    # pushed to them)
    cl_chain(g, "conv3d_cnet_tiny", [1, 3, 1, 1, 3], [(8, [3, 3, 3], True, p1), (8, [3, 3, 3], True, p1),
                                                      (4, [3, 3, 3], False, p1)])
    cnet_fold_cases(g)


def cnet_fold_cases(g):
    """The copy in front of a cluster-kernel chain read inside the kernel
    (gpu_cnet.cu, nnk_cnet::fold): a predecoder's front with its run-time
    channel last (two constant site masks, then the events gathered onto
    the grid: channel 2), and two run-time channels (values -1 .. 2) after
    a constant one (channels 1 and 2). The kernel writes the constant
    channels before its PDL wait and the run-time ones after it."""
    F, I32 = TP.FLOAT, TP.INT32
    r = g.rng
    conv = dict(kernel_shape=[3, 3, 3], pads=[1] * 6)

    def chain(first):
        nodes, inits, cur, cin = [], [], first, 3
        for i, (cout, relu) in enumerate([(16, True), (16, True), (8, False)]):
            inits += cl_weights(g, "l%d" % i, cin, cout, [3, 3, 3])
            out = "y" if i == 2 else "c%d" % i
            nodes.append(node("Conv", [cur, "l%dw" % i, "l%db" % i], [out], **conv))
            if relu:
                nodes.append(node("Relu", [out], ["r%d" % i]))
                out = "r%d" % i
            cur, cin = out, cout
        return nodes, inits

    front, front_inits, ev, _ = gather_front(r)
    nodes, inits = chain("xin")
    g.case("conv3d_cnet_fold_last", front + [node("Concat", ["masks", "xr"], ["xin"], axis=1)] + nodes,
           [("x", I32, [1, 300])], [("y", F)], front_inits + inits, feeds={"x": ev})
    x2 = r.choice([-1, 0, 0, 0, 1, 1, 2], size=[1, 2, 5, 9, 10]).astype(np.int32)
    nodes, inits = chain("xin")
    g.case("conv3d_cnet_fold_two",
           [node("Cast", ["x"], ["xf"], to=F), node("Concat", ["c", "xf"], ["xin"], axis=1)] + nodes,
           [("x", I32, [1, 2, 5, 9, 10])], [("y", F)],
           [init("c", r.standard_normal([1, 1, 5, 9, 10]).astype(np.float32))] + inits,
           feeds={"x": x2})


def gen(args):
    os.makedirs(args.out, exist_ok=True)
    g = Gen(args.out)
    single_ops(g)
    multi_ops(g)
    refusals(g)
    tc_cases(g)
    cl_cases(g)
    fuse_cases(g)
    fuse_conv_cases(g)
    stack_cases(g)
    fuse_gemm_cases(g)
    tail_cases(g)
    first_fold_cases(g)
    splitk_cases(g)
    cnet_cases(g)
    with open(os.path.join(args.out, "cases.txt"), "w") as f:
        f.write("\n".join(g.manifest) + "\n")
    print(f"onnx_reference: {len(g.manifest)} cases in {args.out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("gen")
    a.add_argument("--out", required=True)
    args = p.parse_args()
    gen(args)


if __name__ == "__main__":
    sys.exit(main())
