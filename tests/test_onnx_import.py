"""CTest: the ONNX importer on small models built here with onnx.helper.

argv: SOURCE_DIR EVTC.  Checks, through `evtc check` and `evtc run`:
  * an exporter-style shape subgraph (Shape -> Gather -> Unsqueeze -> Concat
    -> Reshape) folds away: no gather/concat nodes remain, outputs match NumPy;
  * an int64 initializer stored as external data next to the model is read;
  * bad input gives one message and exit status 2: a truncated file, a
    non-ONNX file, an unsupported op (named with node and opset), a missing
    initializer / cycle (named with the node), contradicting output shapes;
  * the model options: initializer values reach `run --grads` and `train`,
    `--freeze`, `--dim`, `--loss mse|cross_entropy --labels`, the default
    mean-of-squares loss, and `check`'s inputs/outputs/params summary, with
    values and gradients checked against NumPy.
"""
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from evtc_testlib import SRC, check, finish
from evtc_testlib import evtc as run


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
bad(one_node("noinput", helper.make_node("Shape", [], ["y"], name="sh")), "'sh' (Shape)", "input 0 is missing")
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



# 4. model options: initializer values, --freeze, --dim, --loss/--labels, check's summary, train
rng = np.random.default_rng(1)
W = rng.standard_normal((4, 3)).astype(np.float32)
B = rng.standard_normal(4).astype(np.float32)
g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                       helper.make_node("Relu", ["h"], ["y"])], "gemm",
                      [tensor("x", TensorProto.FLOAT, ["batch", 3])], [tensor("y", TensorProto.FLOAT, ["batch", 4])],
                      initializer=[numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
gm = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(tmp, "gemm.onnx"))
r = run("check", gm)
check(r.returncode == 2 and "symbolic dim 'batch'" in r.stderr, "gemm: unbound dim refused: %s" % r.stderr)
r = run("check", gm, "--dim", "batch=5")
check(r.returncode == 0 and "inputs: 1\n  %x f32[5,3]\n" in r.stdout and "outputs: 1\n  %y f32[5,4]\n" in r.stdout
      and "params: 16 (2 tensors)\n" in r.stdout, "gemm: check summary:\n%s%s" % (r.stdout, r.stderr))
r = run("check", gm, "--dim", "batch=5", "--freeze", "w")
check(r.returncode == 0 and "params: 4 (1 tensor)\n" in r.stdout, "gemm: --freeze w:\n" + r.stdout + r.stderr)
for args, needle in ((["--freeze", "nope"], "--freeze nope: the model has no initializer"),
                     (["--dim", "batch"], "expected NAME=N"), (["--dim", "batch=0"], "not an integer"),
                     (["--dim", "batch=5", "--labels", "t"], "--labels needs --loss"),
                     (["--dim", "batch=5", "--loss", "mse"], "needs --labels"),
                     (["--dim", "batch=5", "--loss", "hinge"], "not mse, cross_entropy")):
    r = run("check", gm, *args)
    check(r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          "check %s: %r" % (" ".join(args), r.stderr))
r = run("check", os.path.join(SRC, "tests", "ir", "mlp.evt"), "--dim", "n=2")
check(r.returncode == 2 and "ONNX models only" in r.stderr, "--dim on text IR: %s" % r.stderr)
r = run("check", os.path.join(SRC, "tests", "ir", "mlp.evt"), "--loss", "mean_square")
check(r.returncode == 2 and "already has a loss" in r.stderr, "--loss on a model with a loss: %s" % r.stderr)

X = rng.standard_normal((5, 3)).astype(np.float32)
T = rng.standard_normal((5, 4)).astype(np.float32)
L = np.array([0, 3, 1, 1, 2], np.int64)
for n, v in (("gx", X), ("gt", T), ("gl", L)):
    np.save(os.path.join(tmp, n + ".npy"), v)
h = X.astype(np.float64) @ W.T.astype(np.float64) + B
y = np.maximum(h, 0)


def grads_of(dy):
    """d loss / d w and d b from d loss / d y."""
    dh = dy * (h > 0)
    return dh.T @ X, dh.sum(0)


logits = y - y.max(1, keepdims=True)
p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
onehot = np.eye(4)[L]
cases = {  # loss options -> (extra inputs, loss, d loss / d y)
    "mean_square": ([], [], (y ** 2).mean(), 2 * y / y.size),
    "mse": (["--loss", "mse", "--labels", "t"], ["t=" + os.path.join(tmp, "gt.npy")], ((y - T) ** 2).mean(),
            2 * (y - T) / y.size),
    "cross_entropy": (["--loss", "cross_entropy", "--labels", "lab"], ["lab=" + os.path.join(tmp, "gl.npy")],
                      -np.log(p[np.arange(5), L]).mean(), (p - onehot) / 5),
}
for kind, (opts, feeds, want_loss, dy) in cases.items():
    out = os.path.join(tmp, "g_" + kind)
    args = ["run", gm, "--dim", "batch=5", "--input", "x=" + os.path.join(tmp, "gx.npy"), "--grads", "-o", out] + opts
    for f in feeds:
        args += ["--input", f]
    r = run(*args)
    check(r.returncode == 0, "run --grads %s: %s" % (kind, r.stderr))
    if r.returncode != 0:
        continue
    gw, gb = grads_of(dy)
    loss = float(r.stdout.split("loss:")[1])
    check(abs(loss - want_loss) <= 1e-5 * abs(want_loss), "%s: loss %r, expected %r" % (kind, loss, want_loss))
    for name, want in (("y", y), ("grad.w", gw), ("grad.b", gb)):
        got = np.load(os.path.join(out, name + ".npy"))
        check(np.allclose(got, want, rtol=1e-4, atol=1e-6), "%s: %s = %s, expected %s" % (kind, name, got, want))

# grad: no loss in the model -> mean of squares; --freeze leaves no gradient for w
r = run("grad", gm, "--dim", "batch=5", "--optimizer", "none", "--freeze", "w")
check(r.returncode == 0 and "output %grad.b" in r.stdout and "grad.w" not in r.stdout
      and "%loss = reduce_mean" in r.stdout, "grad --freeze w:\n" + r.stdout[-400:] + r.stderr)

# train starts from the initializers: with a vanishing rate the first epoch's loss is the initial mse
data = os.path.join(tmp, "gdata", "train")
os.makedirs(data)
np.save(os.path.join(data, "x.npy"), X)
np.save(os.path.join(data, "t.npy"), T)
r = run("train", gm, "--dim", "batch=5", "--data", os.path.dirname(data), "--epochs", "1", "--optimizer", "sgd",
        "--lr", "1e-12", "--loss", "mse", "--labels", "t")
check(r.returncode == 0 and "epoch 1/1 loss %.4f" % ((y - T) ** 2).mean() in r.stdout,
      "train from initializers (loss %.4f):\n%s%s" % (((y - T) ** 2).mean(), r.stdout, r.stderr))

finish()
