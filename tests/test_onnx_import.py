"""CTest: the ONNX importer on small models built here with onnx.helper.

argv: SOURCE_DIR EVTC.  Checks, through `evtc check` and `evtc run`:
  * an exporter-style shape subgraph (Shape -> Gather -> Unsqueeze -> Concat
    -> Reshape) folds away: no gather/concat nodes remain, outputs match NumPy;
  * an int64 initializer stored as external data next to the model is read;
  * bad input gives one message and exit status 2: a truncated file, a
    non-ONNX file, an unsupported op (named with node and opset), a missing
    initializer / cycle (named with the node), contradicting output shapes.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

evtc = sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(*args):
    return subprocess.run([evtc] + list(args), capture_output=True, text=True)


def save(model, path, **kw):
    onnx.save(model, path, **kw)
    return path


def tensor(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


tmp = tempfile.mkdtemp(prefix="evtc-onnx-import-")

# 1. shape subgraph folded at import: y = reshape(x, [x.shape[0], -1]) then relu
nodes = [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0, np.int64))),
    helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
    helper.make_node("Unsqueeze", ["d0", "axes"], ["d0u"]),
    helper.make_node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
    helper.make_node("Reshape", ["x", "shape"], ["r"]),
    helper.make_node("Relu", ["r"], ["y:out"]),
]
g = helper.make_graph(nodes, "fold", [tensor("x", TensorProto.FLOAT, [2, 3, 4])],
                      [tensor("y:out", TensorProto.FLOAT, [2, 12])],
                      initializer=[numpy_helper.from_array(np.array([0], np.int64), "axes"),
                                   numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
m = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(tmp, "fold.onnx"))
r = run("check", m)
check(r.returncode == 0, "fold: check exit 0 (%s)" % r.stderr)
check("gather" not in r.stdout and "concat" not in r.stdout and "reshape 1" in r.stdout,
      "fold: only reshape and relu remain:\n" + r.stdout)
x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
np.save(os.path.join(tmp, "x.npy"), x)
r = run("run", m, "--input", "x=" + os.path.join(tmp, "x.npy"), "-o", os.path.join(tmp, "out"))
check(r.returncode == 0, "fold: run exit 0 (%s)" % r.stderr)
if r.returncode == 0:
    y = np.load(os.path.join(tmp, "out", "y_out.npy"))       # ':' is spelled '_'
    check(np.array_equal(y, np.maximum(x.reshape(2, 12), 0)), "fold: relu(reshape(x)) values")

# 2. external data: Gather indices stored in a side file
idx = numpy_helper.from_array(np.array([2, 0, 2], np.int64), "idx")
g = helper.make_graph([helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)], "ext",
                      [tensor("x", TensorProto.FLOAT, [2, 3, 4])], [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
                      initializer=[idx])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m = save(model, os.path.join(tmp, "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
         location="ext.bin", size_threshold=0)
check(os.path.exists(os.path.join(tmp, "ext.bin")), "external: side file written")
r = run("run", m, "--input", "x=" + os.path.join(tmp, "x.npy"), "-o", os.path.join(tmp, "out2"))
check(r.returncode == 0, "external: run exit 0 (%s)" % r.stderr)
if r.returncode == 0:
    check(np.array_equal(np.load(os.path.join(tmp, "out2", "y.npy")), x[:, [2, 0, 2], :]), "external: values")


# 3. bad input: one line "evtc: ...", exit 2
def bad(path, *needles):
    r = run("check", path)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, "%s: exit 2, got %d" % (path, r.returncode))
    check(len(lines) == 1 and lines[0].startswith("evtc: "), "%s: one message, got %r" % (path, r.stderr))
    for n in needles:
        check(n in r.stderr, "%s: message has %r: %s" % (path, n, r.stderr.strip()))


data = open(os.path.join(tmp, "fold.onnx"), "rb").read()
with open(os.path.join(tmp, "trunc.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
bad(os.path.join(tmp, "trunc.onnx"), "not an ONNX model")
with open(os.path.join(tmp, "text.onnx"), "w") as f:
    f.write("graph g { }\n")
bad(os.path.join(tmp, "text.onnx"))
bad(os.path.join(tmp, "missing.onnx"), "cannot open")


def one_node(name, node, opset=13, inits=(), out_shape=(2, 3, 4)):
    g = helper.make_graph([node], name, [tensor("x", TensorProto.FLOAT, [2, 3, 4])],
                          [tensor("y", TensorProto.FLOAT, list(out_shape))], initializer=list(inits))
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), os.path.join(tmp, name + ".onnx"))


bad(one_node("unsup", helper.make_node("Foo", ["x"], ["y"], name="n1")),
    "unsupported ONNX op 'Foo'", "'n1'", "opset 13")
bad(one_node("noinit", helper.make_node("Add", ["x", "w"], ["y"], name="add1")), "'add1' (Add)", "'w'")
cyc = helper.make_graph([helper.make_node("Relu", ["b"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"])],
                        "cyc", [tensor("x", TensorProto.FLOAT, [2])], [tensor("b", TensorProto.FLOAT, [2])])
bad(save(helper.make_model(cyc, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(tmp, "cyc.onnx")),
    "'r1' (Relu)", "cycle")
bad(one_node("contra", helper.make_node("Relu", ["x"], ["y"]), out_shape=(2, 3, 5)), "declared f32[2,3,5]",
    "f32[2,3,4]")
bad(one_node("negstep", helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="sl"),
             inits=[numpy_helper.from_array(np.array([v], np.int64), n)
                    for n, v in (("s", -1), ("e", -10), ("a", 2), ("st", -1))]),
    "'sl' (Slice)", "unsupported")

print("%d failures" % failures)
sys.exit(1 if failures else 0)
