#!/usr/bin/python3
"""ONNX conformance runner: every test of Debian's libonnx-testdata through evtc.

Walks data/node, data/pytorch-converted and data/pytorch-operator.  For each
test (model.onnx plus test_data_set_*/input_*.pb and output_*.pb) it converts
the protobuf tensors to .npy with onnx.numpy_helper, runs

    evtc run model.onnx --input NAME=input.npy ... -o OUT

and compares every output with the expected one (floats: |got - want| <=
atol + rtol |want| with per-dtype tolerances below; integers and bools:
exact).  A test is

  * unsupported when evtc rejects the model with an "unsupported" message
    (an op type evtc does not map, or a feature of a mapped op it does not
    handle, e.g. a uint8 tensor or Slice with a negative step);
  * passed when all outputs of all data sets match;
  * failed otherwise -- except the few tests listed in KNOWN_DEVIATIONS,
    whose expected data contradicts the current ONNX spec (reported apart).

One adaptation follows from evtc's static shapes, and is applied to the
model (in a temporary copy) before the run: graph inputs that feed
shape-like operands (Reshape's shape, Slice's starts/ends, Unsqueeze's axes,
...) become Constant nodes holding the test's input values -- evtc needs
them at import.  Float initializers become evtc PARAM/STATE leaves, which
`evtc run` starts from the initializer values.

Usage: onnx_conformance.py EVTC [--data DIR] [--doc PATH] [--jobs N] [-k SUBSTR] [-v]
Exit status 1 when any test that evtc accepts fails.
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

SUITES = ["node", "pytorch-converted", "pytorch-operator"]

# (op_type, input index) pairs that evtc needs known at import time.
STATIC_SLOTS = {
    "Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 2, 3}, "Unsqueeze": {1},
    "Squeeze": {1}, "Split": {1}, "ReduceSum": {1}, "Tile": {1}, "ConstantOfShape": {0},
    "Range": {0, 1, 2}, "Dropout": {1, 2}, "Clip": set(), "TopK": {1}, "OneHot": {1},
    "Resize": {1, 2, 3}, "Upsample": {1},
}

# Tests whose expected data contradicts the current ONNX spec, with the reason.
# They are run and reported, but counted apart from passes and failures.
KNOWN_DEVIATIONS = {
    "node/test_cast_FLOAT_to_BFLOAT16":
        "the expected data of onnx 1.12 truncates float32 to bfloat16; the Cast spec (and evtc) "
        "round to nearest even",
}
for _t in ("BFLOAT16_to_FLOAT", "BFLOAT16_to_FLOAT_expanded", "FLOAT_to_BFLOAT16", "FLOAT_to_BFLOAT16_expanded"):
    KNOWN_DEVIATIONS["node/test_castlike_" + _t] = (
        "the test feeds a [1] tensor to input 'like', which the model declares [3,4]; evtc shapes are static")

# |got - want| <= ATOL + RTOL * |want|
TOLERANCE = {np.dtype("float64"): (1e-7, 1e-9), np.dtype("float32"): (1e-4, 1e-5),
             np.dtype("float16"): (1e-2, 1e-3)}


def evtc_name(name):
    """The evtc spelling of an ONNX name (evtc_onnx_name_sanitize)."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    return s or "v"


def static_inputs(model):
    """Names of graph inputs consumed in a shape-like operand slot."""
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = {i.name for i in model.graph.input} - inits
    names = set()
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if name in graph_inputs and k in STATIC_SLOTS.get(node.op_type, ()):
                names.add(name)
    return names


def close(got, want):
    if got.shape != want.shape:
        return False, "shape %s, expected %s" % (got.shape, want.shape)
    if want.dtype.kind in "fc":
        rtol, atol = TOLERANCE.get(want.dtype, (1e-4, 1e-5))
        got = got.astype(np.float64)
        w = want.astype(np.float64)
        same_nan = np.isnan(got) == np.isnan(w)
        both_inf = np.isinf(w) & (got == w)
        with np.errstate(invalid="ignore"):
            ok = same_nan & (both_inf | np.isnan(w) | (np.abs(got - w) <= atol + rtol * np.abs(w)))
        if ok.all():
            return True, ""
        i = np.argmax(~ok.reshape(-1))
        return False, "element %d: got %r, expected %r" % (i, got.reshape(-1)[i], w.reshape(-1)[i])
    if got.dtype != want.dtype and not (want.dtype.kind in "iub" and got.dtype.kind in "iub"):
        return False, "dtype %s, expected %s" % (got.dtype, want.dtype)
    if np.array_equal(got.astype(np.int64), want.astype(np.int64)):
        return True, ""
    return False, "values differ: got %s, expected %s" % (got.reshape(-1)[:8], want.reshape(-1)[:8])


def read_pb(path):
    """A test tensor as a NumPy array (bfloat16, stored as uint16 bits, as float32)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    a = numpy_helper.to_array(t)
    if t.data_type == onnx.TensorProto.BFLOAT16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a


def elem_type(model, name):
    for v in list(model.graph.input) + list(model.graph.output):
        if v.name == name:
            return v.type.tensor_type.elem_type
    return 0


def bf16_bits(a, onnx_type):
    """bfloat16 test data stored as uint16 bits, as float32 values."""
    if onnx_type == onnx.TensorProto.BFLOAT16 and a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def all_tensors(model):
    """True when every graph input and output is a tensor (not a sequence, map or optional)."""
    return all(v.type.HasField("tensor_type") for v in list(model.graph.input) + list(model.graph.output))


def run_test(evtc, test_dir, work):
    """Runs one test; returns (status, detail) with status passed|failed|unsupported."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
    if not sets or not all_tensors(model):
        # evtc must refuse such a model; its message says why
        r = subprocess.run([evtc, "check", os.path.join(test_dir, "model.onnx")], capture_output=True, text=True)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "accepted"
        if r.returncode == 2 and "unsupported" in msg:
            return "unsupported", msg
        return "failed", "a model without tensor test data: evtc says: " + msg
    static = static_inputs(model)
    for si, ds in enumerate(sets):
        feeds = [read_pb(os.path.join(ds, "input_%d.pb" % k)) for k in range(len(inputs))
                 if os.path.exists(os.path.join(ds, "input_%d.pb" % k))]
        want = [read_pb(os.path.join(ds, "output_%d.pb" % k)) for k in range(len(outputs))]
        feeds = [bf16_bits(v, elem_type(model, n)) for n, v in zip(inputs, feeds)]
        want = [bf16_bits(v, elem_type(model, n)) for n, v in zip(outputs, want)]
        m = onnx.ModelProto()
        m.CopyFrom(model)
        consts = []
        for name, value in zip(inputs, feeds):
            if name in static:
                consts.append(onnx.helper.make_node("Constant", [], [name],
                                                    value=numpy_helper.from_array(value, name)))
        if consts:
            keep = [i for i in m.graph.input if i.name not in static]
            del m.graph.input[:]
            m.graph.input.extend(keep)
            nodes = consts + list(m.graph.node)
            del m.graph.node[:]
            m.graph.node.extend(nodes)
        d = os.path.join(work, "set%d" % si)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        args = [evtc, "run", path, "-o", os.path.join(d, "out")]
        for name, value in zip(inputs, feeds):
            if name in static:
                continue
            p = os.path.join(d, "in_%s.npy" % evtc_name(name))
            np.save(p, value)
            args += ["--input", "%s=%s" % (evtc_name(name), p)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit %d" % r.returncode
            if r.returncode == 2 and "unsupported" in msg:
                return "unsupported", msg
            return "failed", msg
        for name, w in zip(outputs, want):
            got = np.load(os.path.join(d, "out", evtc_name(name) + ".npy"))
            ok, why = close(got, w)
            if not ok:
                return "failed", "data set %d, output '%s': %s" % (si, name, why)
    return "passed", ""


def unsupported_key(msg):
    """The op type, or the feature ('Op: cause' or a model-level cause), an unsupported message is about."""
    m = re.search(r"unsupported ONNX op '([^']+)'", msg)
    if m:
        return m.group(1), True
    m = re.search(r"\(([A-Za-z]+)\): unsupported: (.*)$", msg)
    if m:
        return "%s: %s" % (m.group(1), m.group(2)), False
    cause = msg.split("unsupported: ", 1)[-1]
    return re.sub(r"'[^']*'", "'...'", cause), False


def write_doc(path, results):
    counts = collections.Counter(s for s, _ in results.values())
    ops = collections.Counter()
    features = collections.Counter()
    for status, detail in results.values():
        if status == "unsupported":
            key, is_op = unsupported_key(detail)
            (ops if is_op else features)[key] += 1
    lines = ["# ONNX conformance", "",
             "Generated by `tests/onnx_conformance.py` from Debian's `libonnx-testdata` "
             "(suites: %s): each test runs through `evtc run` (ONNX importer + float64 reference "
             "interpreter) and is compared with the expected outputs." % ", ".join(SUITES), "",
             "| result | tests |", "|---|---|"]
    for s in ("passed", "failed", "unsupported", "deviation"):
        lines.append("| %s | %d |" % (s, counts[s]))
    lines.append("| total | %d |" % len(results))
    lines += ["", "Per suite:", "", "| suite | passed | failed | unsupported |", "|---|---|---|---|"]
    for suite in SUITES:
        c = collections.Counter(s for k, (s, _) in results.items() if k.startswith(suite + "/"))
        lines.append("| %s | %d | %d | %d |" % (suite, c["passed"], c["failed"], c["unsupported"]))
    lines += ["", "Static-shape adaptations: graph inputs that feed shape-like operands (Reshape's shape, "
              "Slice's starts/ends/axes/steps, Unsqueeze/Squeeze axes, Expand's shape, Pad's pads, ...) "
              "are turned into Constant nodes with the test's values, because evtc shapes are known at "
              "import. Float initializers become PARAM leaves that start from the initializer "
              "values.", "",
              "## Unsupported op types", "", "Tests rejected because they use an op type evtc does not map "
              "(tests per op type):", ""]
    lines += ["- %s (%d)" % (k, v) for k, v in sorted(ops.items())]
    lines += ["", "## Unsupported features of mapped ops", "",
              "Tests rejected by a mapped op because of an attribute, dtype or form evtc does not handle:", ""]
    lines += ["- %s (%d)" % (k, v) for k, v in sorted(features.items())]
    for title, status in (("Failed", "failed"), ("Known deviations", "deviation")):
        keys = sorted(k for k, (s, _) in results.items() if s == status)
        lines += ["", "## " + title, ""]
        lines += ["- %s: %s" % (k, results[k][1]) for k in keys] or ["None."]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evtc")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--doc", help="write the markdown summary here")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-k", default="", help="only tests whose path contains this")
    ap.add_argument("-v", action="store_true", help="print every test")
    a = ap.parse_args()
    tests = [t for s in SUITES for t in sorted(glob.glob(os.path.join(a.data, s, "*")))
             if os.path.isdir(t) and a.k in t]
    results = {}
    with tempfile.TemporaryDirectory(prefix="evtc-onnx-") as tmp:
        def one(i_t):
            i, t = i_t
            try:
                return t, run_test(os.path.abspath(a.evtc), t, os.path.join(tmp, str(i)))
            except Exception as e:  # a broken test file is a failure of this test, not of the run
                return t, ("failed", "runner: %s: %s" % (type(e).__name__, e))
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for t, res in ex.map(one, enumerate(tests)):
                key = os.path.relpath(t, a.data)
                if res[0] == "failed" and key in KNOWN_DEVIATIONS:
                    res = ("deviation", KNOWN_DEVIATIONS[key])
                results[key] = res
                if a.v or res[0] == "failed":
                    print("%-12s %s %s" % (res[0], key, res[1]))
    counts = collections.Counter(s for s, _ in results.values())
    print("passed %d, failed %d, unsupported %d, known deviations %d, total %d" % (
        counts["passed"], counts["failed"], counts["unsupported"], counts["deviation"], len(results)))
    if a.doc:
        write_doc(a.doc, results)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
