"""test_run.py -- `evtc run`: forward outputs and --grads against NumPy.

Runs examples/mlp.evt with every leaf given as a .npy file, compares the
written logits, loss and gradients with a float64 NumPy computation (f32
tolerance), and checks the messages for a wrong shape, a missing input and
an unknown name.
Usage: test_run.py SOURCE_DIR EVTC_BINARY
"""
import os
import re
import shutil
import tempfile

import numpy as np

from evtc_testlib import SRC, check, evtc, finish

MODEL = os.path.join(SRC, "examples", "mlp.evt")


def close(got, want, what, rtol=2e-5, atol=2e-6):
    ok = got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol)
    err = np.abs(got - want).max() if got.shape == want.shape else "shape"
    check(ok, f"{what}: max error {err}, shapes {got.shape} {want.shape}")


def reference(v):
    """Forward and backward of the MLP in float64: logits, loss, grads."""
    xs = v["x"].astype(np.float64) / 16
    h = xs @ v["w1"] + v["b1"]
    a = np.maximum(h, 0)
    logits = a @ v["w2"] + v["b2"]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = len(v["y"])
    loss = -np.log(p[np.arange(n), v["y"]]).mean()
    dlogits = p.copy()
    dlogits[np.arange(n), v["y"]] -= 1
    dlogits /= n
    da = dlogits @ v["w2"].T
    dh = da * (h > 0)
    grads = {"w2": a.T @ dlogits, "b2": dlogits.sum(0), "w1": xs.T @ dh, "b1": dh.sum(0)}
    return logits, loss, grads


def main():
    tmp = tempfile.mkdtemp(prefix="evtc_run_")
    rng = np.random.default_rng(7)
    v = {"x": rng.integers(0, 17, (32, 64)).astype(np.uint8), "y": rng.integers(0, 10, 32).astype(np.int64),
         "w1": rng.normal(0, 0.2, (64, 128)).astype(np.float32), "b1": rng.normal(0, 0.1, 128).astype(np.float32),
         "w2": rng.normal(0, 0.2, (128, 10)).astype(np.float32), "b2": rng.normal(0, 0.1, 10).astype(np.float32)}
    args = []
    for k, a in v.items():
        np.save(os.path.join(tmp, k + ".npy"), a)
        args += ["--input", f"{k}={os.path.join(tmp, k + '.npy')}"]
    try:
        out = os.path.join(tmp, "out", "nested")
        r = evtc("run", MODEL, *args, "-o", out)
        check(r.returncode == 0, f"run: exit {r.returncode}: {r.stderr}")
        logits, loss, grads = reference({k: a.astype(np.float64) if a.dtype == np.float32 else a for k, a in v.items()})
        if r.returncode == 0:
            got = np.load(os.path.join(out, "logits.npy"))
            check(got.dtype == np.float32, f"logits dtype {got.dtype}")
            close(got.astype(np.float64), logits, "logits")
            got_loss = np.load(os.path.join(out, "loss.npy"))
            check(got_loss.shape == () and abs(float(got_loss) - loss) < 1e-5, f"loss {got_loss} vs {loss}")
        r = evtc("run", MODEL, *args, "-o", os.path.join(tmp, "g"), "--grads")
        check(r.returncode == 0, f"run --grads: exit {r.returncode}: {r.stderr}")
        m = re.search(r"^loss: (\S+)$", r.stdout, re.M)
        check(m is not None and abs(float(m.group(1)) - loss) < 1e-5, f"--grads loss line: {r.stdout!r}")
        for k, want in grads.items():
            path = os.path.join(tmp, "g", f"grad.{k}.npy")
            check(os.path.exists(path), f"missing {path}")
            if os.path.exists(path):
                close(np.load(path).astype(np.float64), want, f"grad.{k}", atol=1e-6)
        # parameters not given are initialised from their attributes, the same way for the same --seed
        r1 = evtc("run", MODEL, "--input", args[1], "--input", args[3], "-o", os.path.join(tmp, "i1"), "--seed", "3")
        r2 = evtc("run", MODEL, "--input", args[1], "--input", args[3], "-o", os.path.join(tmp, "i2"), "--seed", "3")
        check(r1.returncode == 0 and r2.returncode == 0, f"init run: {r1.stderr} {r2.stderr}")
        if r1.returncode == 0 and r2.returncode == 0:
            a1, a2 = np.load(os.path.join(tmp, "i1", "logits.npy")), np.load(os.path.join(tmp, "i2", "logits.npy"))
            check(np.array_equal(a1, a2) and np.abs(a1).max() > 0, "seeded init is not deterministic")
        # errors: wrong shape, missing input, unknown name
        np.save(os.path.join(tmp, "bad.npy"), np.zeros((3, 4)))
        r = evtc("run", MODEL, "--input", "x=" + os.path.join(tmp, "bad.npy"), "--input", args[3])
        check(r.returncode == 2 and re.fullmatch(r"evtc: input %x: expected f32\[32,64\], got f64\[3,4\] from \S+bad\.npy\n",
                                                 r.stderr), f"shape error: {r.stderr!r}")
        r = evtc("run", MODEL, "--input", args[1])
        check(r.returncode == 2 and "input %y (i64[32]) not given: use --input y=PATH.npy" in r.stderr,
              f"missing input: {r.stderr!r}")
        r = evtc("run", MODEL, *args, "--input", "q=" + os.path.join(tmp, "bad.npy"))
        check(r.returncode == 2 and "the model has no node %q" in r.stderr, f"unknown name: {r.stderr!r}")
        r = evtc("run", MODEL, *args, "--input", "xs=" + os.path.join(tmp, "bad.npy"))
        check(r.returncode == 2 and "%xs is a mul node" in r.stderr, f"non-leaf name: {r.stderr!r}")
        r = evtc("run", MODEL, "--input", "x=" + os.path.join(tmp, "nothere.npy"), "--input", args[3])
        check(r.returncode == 2 and "cannot open" in r.stderr and "nothere.npy" in r.stderr, f"no file: {r.stderr!r}")
        y_bad = v["y"].copy()
        y_bad[5] = 12
        np.save(os.path.join(tmp, "ybad.npy"), y_bad)
        r = evtc("run", MODEL, "--input", args[1], "--input", "y=" + os.path.join(tmp, "ybad.npy"))
        check(r.returncode == 2 and "out of range" in r.stderr, f"label out of range: {r.stderr!r}")
        r = evtc("run", MODEL, "--backend", "interp", "--input", args[1], "--input", "y=" + os.path.join(tmp, "ybad.npy"))
        check(r.returncode == 2 and "cross_entropy" in r.stderr, f"interpreter, label out of range: {r.stderr!r}")
        # the decomposed form keeps the check: one_hot {checked=1} (what cross_entropy becomes)
        hot = os.path.join(tmp, "hot.evt")
        with open(hot, "w") as f:
            f.write("graph hot {\n  %y = input() : i64[32]\n  %h = one_hot(%y) {depth=10, checked=1} : f32[32,10]\n"
                    "  output %h\n}\n")
        for be in ("interp", "cpu"):
            r = evtc("run", hot, "--backend", be, "--input", "y=" + os.path.join(tmp, "ybad.npy"))
            check(r.returncode == 2 and "out of range" in r.stderr, f"{be}: checked one_hot: {r.stderr!r}")
            r = evtc("run", hot, "--backend", be, "--input", args[3], "-o", os.path.join(tmp, "hot_" + be))
            h = np.load(os.path.join(tmp, "hot_" + be, "h.npy")) if r.returncode == 0 else None
            check(h is not None and np.array_equal(h, np.eye(10, dtype=np.float32)[v["y"]]),
                  f"{be}: checked one_hot, labels in range: {r.stderr!r}")
    finally:
        shutil.rmtree(tmp)
    finish()


main()
