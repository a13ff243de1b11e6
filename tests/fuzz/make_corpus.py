#!/usr/bin/python3
"""Writes the seed corpus of the ONNX fuzz target (tests/fuzz/corpus/*.onnx).

Run once by hand (python3 tests/fuzz/make_corpus.py) when the seeds should
change; the files are committed.  Each seed is a tiny valid model covering a
part of the reader: a shape subgraph that folds, initializers in raw and
typed form, a symbolic dim, a conv/batchnorm/pool chain, attention-like
MatMul/Softmax/Where, and Constant attributes of every kind.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(out, exist_ok=True)
T = helper.make_tensor_value_info


def save(name, nodes, inputs, outputs, inits=(), opset=14):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), os.path.join(out, name + ".onnx"))


save("fold", [helper.make_node("Shape", ["x"], ["s"]),
              helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
              helper.make_node("Unsqueeze", ["d0", "axes"], ["d0u"]),
              helper.make_node("Concat", ["d0u", "m1"], ["shape"], axis=0),
              helper.make_node("Reshape", ["x", "shape"], ["y"])],
     [T("x", TensorProto.FLOAT, ["N", 3, 4])], [T("y", TensorProto.FLOAT, [2, 12])],
     [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array([0], np.int64), "axes"),
      numpy_helper.from_array(np.array([-1], np.int64), "m1")])
save("gemm", [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
              helper.make_node("Relu", ["h"], ["y"])],
     [T("x", TensorProto.FLOAT, [2, 3])], [T("y", TensorProto.FLOAT, [2, 4])],
     [numpy_helper.from_array(np.ones((4, 3), np.float32), "w"),
      helper.make_tensor("b", TensorProto.FLOAT, [4], [0.5, -0.5, 1.0, 0.0])])
save("conv", [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
              helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
              helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("GlobalAveragePool", ["p"], ["y"])],
     [T("x", TensorProto.FLOAT, [1, 2, 4, 4])], [T("y", TensorProto.FLOAT, [1, 3, 1, 1])],
     [numpy_helper.from_array(np.full((3, 2, 3, 3), 0.1, np.float32), "w")] +
     [numpy_helper.from_array(np.full(3, v, np.float32), n) for n, v in (("s", 1), ("b", 0), ("m", 0), ("v", 1))])
save("attn", [helper.make_node("MatMul", ["q", "kt"], ["s"]),
              helper.make_node("Where", ["mask", "s", "ninf"], ["sm"]),
              helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "q"], ["y"])],
     [T("q", TensorProto.FLOAT, [2, 3, 3]), T("kt", TensorProto.FLOAT, [2, 3, 3])],
     [T("y", TensorProto.FLOAT, [2, 3, 3])],
     [numpy_helper.from_array(np.tril(np.ones((3, 3), bool)), "mask"),
      numpy_helper.from_array(np.array(-1e9, np.float32), "ninf")])
save("consts", [helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0]),
                helper.make_node("Constant", [], ["b"], value_ints=[2]),
                helper.make_node("ConstantOfShape", ["b"], ["c"],
                                 value=numpy_helper.from_array(np.array([3.0], np.float32))),
                helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
                helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
                helper.make_node("Add", ["a", "c"], ["s"]),
                helper.make_node("Mul", ["s", "rf"], ["t"]),
                helper.make_node("Add", ["x", "t"], ["y"])],
     [T("x", TensorProto.FLOAT, [2])], [T("y", TensorProto.FLOAT, [2])],
     [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("r0", 0), ("r1", 2), ("r2", 1))], opset=11)
print("wrote", sorted(os.listdir(out)))
