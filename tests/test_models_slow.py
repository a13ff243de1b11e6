"""CTest (slow: optimised build only): models exported from PyTorch match
PyTorch autograd, forward output and every parameter gradient.

argv: SOURCE_DIR EVTC.  tools/export_models.py writes the reference models
(MLP, BERT-base TransformerEncoderLayer, a tiny one, a GPT-2 block,
torchvision resnet18 and a small VisionTransformer) with their inputs,
PyTorch's output, loss and gradients into ./models of the build tree.  For
each model it runs

    evtc run MODEL.onnx --input x=... --input labels=... --loss KIND --labels labels --grads -o DIR

and compares y, loss and grad.<param> for every PyTorch parameter.  evtc
computes every op in float64 and rounds its result to float32 (the model's
dtype).  The reference is PyTorch autograd in float64 on the same
parameters and inputs (expected_f64/), because PyTorch's own float32
gradients are noisier than float32 tolerances allow: for resnet18, whose
train-mode BatchNorm normalises 2x2 maps in layer4 at batch 1, they differ
from its float64 ones by up to 2.7e-3 of max|grad|.  Tolerance, per
tensor, relative to its largest magnitude:

    |evtc - torch64| <= ATOL * max|torch64| + RTOL * |torch64|,  RTOL = 1e-3, ATOL = 1e-4

Prints one line per model: the largest error of the output (and loss) and
of the gradients relative to max|torch64|, and the largest gradient error
against PyTorch float32 (expected/) for comparison.  Skipped (exit 77, a CTest skip)
without python3-torch / python3-torchvision.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

try:
    import torch  # noqa: F401  (the exporter needs them)
    import torchvision  # noqa: F401
except ImportError:
    print("python3-torch or python3-torchvision is not installed: skipped")
    sys.exit(77)  # a CTest skip, not a pass

RTOL, ATOL = 1e-3, 1e-4
src, evtc = sys.argv[1], sys.argv[2]
outdir = os.path.abspath("models")
t0 = time.time()
r = subprocess.run([sys.executable, os.path.join(src, "tools", "export_models.py"), outdir],
                   capture_output=True, text=True)
if r.returncode != 0:
    print("FAIL: export_models.py:\n" + r.stdout + r.stderr)
    sys.exit(1)
print("exported in %.1f s" % (time.time() - t0))
models = [w[0] for w in map(str.split, r.stdout.splitlines())
          if w and os.path.exists(os.path.join(outdir, w[0], "meta.json"))]
failures = 0


def errors(got, want):
    """(max |got - want| / tolerance, max |got - want| / max|want|)."""
    scale = max(float(np.abs(want).max()), 1e-30)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return float((diff / (ATOL * scale + RTOL * np.abs(want))).max()), float(diff.max() / scale)


def run_model(name):
    """Runs evtc on one model; returns the number of failures (0 or 1)."""
    d = os.path.join(outdir, name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    out = os.path.join(d, "evtc")
    # The float64 interpreter: this test pins the importer and the gradient
    # rules to PyTorch's float64 autograd (compiled float32 kernels are
    # checked against the interpreter by the backend's own tests).
    args = [evtc, "run", os.path.join(outdir, name + ".onnx"), "--backend", "interp", "--grads", "-o", out]
    args += meta["evtc_args"]
    for i in meta["inputs"]:
        args += ["--input", "%s=%s" % (i, os.path.join(d, i + ".npy"))]
    t = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    secs = time.time() - t
    if r.returncode != 0:
        print("FAIL %s: evtc run: %s" % (name, r.stderr.strip()))
        return 1
    worst = {"output": (0.0, ""), "grads": (0.0, ""), "grads32": (0.0, "")}
    bad = []
    for kind, files in (("output", meta["outputs"] + ["loss"]), ("grads", ["grad." + p for p in meta["params"]])):
        for f in files:
            path = os.path.join(out, f + ".npy")
            if not os.path.exists(path):
                bad.append("%s: evtc wrote no %s.npy" % (f, f))
                continue
            got = np.load(path)
            want = np.load(os.path.join(d, "expected_f64", f + ".npy"))
            if got.shape != want.shape:
                bad.append("%s: shape %s, PyTorch %s" % (f, got.shape, want.shape))
                continue
            ratio, rel = errors(got, want)
            if ratio > 1:
                bad.append("%s: max error %.3g of max|torch64| (%.1fx the tolerance)" % (f, rel, ratio))
            worst[kind] = max(worst[kind], (rel, f))
            if kind == "grads":
                worst["grads32"] = max(worst["grads32"],
                                       (errors(got, np.load(os.path.join(d, "expected", f + ".npy")))[1], f))
    print("%s %-17s output %.1e, grads (%d) %.1e (%s); vs float32 torch: grads %.1e; %.1f s" % (
        "FAIL" if bad else "ok  ", name, worst["output"][0], len(meta["params"]), worst["grads"][0],
        worst["grads"][1], worst["grads32"][0], secs))
    for b in bad:
        print("     " + b)
    return 1 if bad else 0


print("max error relative to max|torch64| per tensor (tolerance %g + %g |x|/max):" % (ATOL, RTOL))
for name in models:
    failures += run_model(name)
print("%d of %d models differ from PyTorch; %.1f s in all" % (failures, len(models), time.time() - t0))
sys.exit(1 if failures else 0)
