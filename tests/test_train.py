"""test_train.py -- `evtc train` end to end on the digits data (2 epochs).

Checks: the loss falls, the test accuracy line parses, the steady-step
line gives its phases (none longer than the step), a second epoch leaves the
first one's batches as they were (the next epoch's order is drawn while the
last step of one runs), the same seed gives
the same checkpoint byte for byte, --save writes a valid safetensors file
(header parsed with json + struct, every size checked), and bad data
directories give exit status 2 with one clear message.
Usage: test_train.py SOURCE_DIR EVTC_BINARY
"""
import json
import os
import re
import shutil
import struct
import tempfile

import numpy as np

from evtc_testlib import SRC, check, evtc, finish

MODEL = os.path.join(SRC, "examples", "mlp.evt")
DATA = os.path.join(SRC, "data", "digits")


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def test_train_and_save(tmp):
    ck = os.path.join(tmp, "ck.safetensors")
    r = evtc("train", MODEL, "--data", DATA, "--epochs", "2", "--save", ck)
    check(r.returncode == 0, f"train exit {r.returncode}: {r.stderr}")
    losses = [float(m) for m in re.findall(r"^epoch \d+/2 loss ([0-9.]+) steps/s [0-9.]+$", r.stdout, re.M)]
    check(len(losses) == 2, f"two epoch lines expected:\n{r.stdout}")
    if len(losses) == 2:
        check(losses[1] < losses[0], f"loss did not fall: {losses}")
        check(losses[0] < 2.5, f"first-epoch loss {losses[0]} above log(10)")
    acc = re.search(r"^test accuracy: (0\.\d{4}|1\.0000)$", r.stdout, re.M)
    check(acc is not None, f"no test accuracy line:\n{r.stdout}")
    if acc:
        check(float(acc.group(1)) > 0.5, f"accuracy {acc.group(1)} after 2 epochs")
    check(re.search(r"^saved 4 tensors to ", r.stdout, re.M) is not None, f"no saved line:\n{r.stdout}")
    # a device (CUDA) runs the step queued while the next batch is fed; the CPU backend runs it first
    fed = "while it ran" if re.search(r"^backend cuda:", r.stdout, re.M) else "after it"
    steady = re.search(r"^steady step: ([0-9.]+) ms \(median of the \d+ steps after the first; medians of its phases: "
                       r"the run ([0-9.]+) ms, the next batch fed " + fed + r" ([0-9.]+) ms, the loss read and the "
                       r"updates ([0-9.]+) ms\)$", r.stdout, re.M)
    check(steady is not None, f"no steady step line with its phases (fed {fed}):\n{r.stdout}")
    if steady:
        step, *phases = (float(x) for x in steady.groups())
        check(all(0 <= x <= step + 0.002 for x in phases), f"a phase longer than the step: {steady.group(0)}")
    one = evtc("train", MODEL, "--data", DATA, "--epochs", "1")
    first = re.search(r"^epoch 1/1 loss ([0-9.]+) ", one.stdout, re.M)
    check(one.returncode == 0 and first is not None and losses and float(first.group(1)) == losses[0],
          f"epoch 1's loss alone {first and first.group(1)}, of two epochs {losses[:1]}")

    header, data = read_safetensors(ck)
    check(header.get("__metadata__") == {"producer": "evtc"}, f"metadata {header.get('__metadata__')}")
    want = {"w1": [64, 128], "b1": [128], "w2": [128, 10], "b2": [10]}
    check(sorted(k for k in header if k != "__metadata__") == sorted(want), f"tensors {list(header)}")
    end = 0
    for name, shape in want.items():
        t = header.get(name, {})
        check(t.get("dtype") == "F32" and t.get("shape") == shape, f"{name}: {t}")
        lo, hi = t.get("data_offsets", [0, 0])
        check(hi - lo == 4 * int(np.prod(shape)), f"{name}: offsets {lo}..{hi}")
        end = max(end, hi)
        v = np.frombuffer(data[lo:hi], dtype="<f4")
        check(np.isfinite(v).all() and np.abs(v).max() > 0, f"{name}: values not finite or all zero")
    check(end == len(data), f"data holds {len(data)} bytes, offsets end at {end}")
    # biases start at zero and must have moved; the same seed reproduces the file exactly
    b1 = np.frombuffer(data[header["b1"]["data_offsets"][0]:header["b1"]["data_offsets"][1]], "<f4")
    check(np.abs(b1).max() > 1e-4, "b1 was not trained")
    ck2 = os.path.join(tmp, "ck2.safetensors")
    r2 = evtc("train", MODEL, "--data", DATA, "--epochs", "2", "--save", ck2)
    check(r2.returncode == 0 and open(ck, "rb").read() == open(ck2, "rb").read(), "same seed, different checkpoint")
    check(not [f for f in os.listdir(tmp) if f.startswith(".")], f"temporary files left: {os.listdir(tmp)}")


def expect_bad(args, pattern, what, usage=False):
    """Exit 2 and one line "evtc: ..." matching pattern (then the usage text for usage errors)."""
    r = evtc(*args)
    check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2 ({r.stderr.strip()})")
    lines = r.stderr.strip().splitlines()
    check(lines and (usage or len(lines) == 1) and lines[0].startswith("evtc: ") and re.search(pattern, lines[0]),
          f"{what}: stderr {r.stderr!r} lacks {pattern!r}")


def test_bad_data(tmp):
    expect_bad(["train", MODEL, "--data", os.path.join(tmp, "nowhere")], r"nowhere has no train/ folder",
               "missing data dir")
    bad = os.path.join(tmp, "bad")
    os.makedirs(os.path.join(bad, "train"))
    np.save(os.path.join(bad, "train", "x.npy"), np.zeros((100, 64), np.uint8))
    expect_bad(["train", MODEL, "--data", bad], r"cannot open .*train/y\.npy: No such file", "missing labels")
    np.save(os.path.join(bad, "train", "y.npy"), np.zeros((99,), np.int64))
    expect_bad(["train", MODEL, "--data", bad], r"y\.npy has 99 samples but .*x\.npy has 100", "sample counts")
    np.save(os.path.join(bad, "train", "y.npy"), np.zeros((100,), np.int64))
    np.save(os.path.join(bad, "train", "x.npy"), np.zeros((100, 63), np.float64))
    expect_bad(["train", MODEL, "--data", bad], r"input %x: expected f32\[N,64\] samples, got f64\[100,63\]",
               "sample shape")
    np.save(os.path.join(bad, "train", "x.npy"), np.zeros((100, 64), np.uint8))
    expect_bad(["train", MODEL, "--data", bad, "--batch", "101"], r"batch 101 is larger than the training set",
               "batch too large")
    expect_bad(["train", MODEL, "--data", bad, "--optimizer", "lion"], r"'lion' is not sgd or adamw", "optimizer")
    expect_bad(["train", MODEL, "--data", bad, "--lr", "-1"], r"--lr: '-1' is not a positive number", "lr")
    expect_bad(["train", MODEL], r"--data DIR is required", "no --data", usage=True)
    # labels out of range are an error naming the sample, the input and the loss, found before the first step
    y = np.arange(100, dtype=np.int64) % 10
    y[37] = 10
    np.save(os.path.join(bad, "train", "y.npy"), y)
    expect_bad(["train", MODEL, "--data", bad, "--epochs", "1"],
               r"label 10 of sample 37 \(input %y\) is not one of the 10 classes of %loss \(cross_entropy\)", "label 10")
    y[37] = -1
    np.save(os.path.join(bad, "train", "y.npy"), y)
    expect_bad(["train", MODEL, "--data", bad, "--epochs", "1"], r"label -1 of sample 37", "label -1")
    # a test split with a missing file is an error too; SGD trains with --batch rebatching
    os.makedirs(os.path.join(bad, "test"))
    np.save(os.path.join(bad, "train", "y.npy"), np.arange(100, dtype=np.int64) % 10)
    np.save(os.path.join(bad, "test", "x.npy"), np.zeros((7, 64), np.uint8))
    expect_bad(["train", MODEL, "--data", bad, "--epochs", "1"], r"cannot open .*test/y\.npy", "test labels")
    np.save(os.path.join(bad, "test", "y.npy"), np.zeros((7,), np.int64))
    r = evtc("train", MODEL, "--data", bad, "--epochs", "1", "--batch", "25", "--optimizer", "sgd", "--lr", "0.05")
    check(r.returncode == 0 and "batch 25, 4 steps/epoch, sgd lr 0.05" in r.stdout and "(7 samples)" in r.stdout,
          f"sgd rebatched: {r.returncode} {r.stdout} {r.stderr}")


def main():
    tmp = tempfile.mkdtemp(prefix="evtc_train_")
    try:
        test_train_and_save(tmp)
        test_bad_data(tmp)
    finally:
        shutil.rmtree(tmp)
    finish()


main()
