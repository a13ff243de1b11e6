#!/usr/bin/python3
"""make_digits.py -- build data/digits/ (the training data of `make demo`).

Reads the 8x8 handwritten digits that scikit-learn ships (its bundled
digits.csv.gz, a copy of the UCI "Optical Recognition of Handwritten Digits"
test set: 1797 images, pixels 0..16), shuffles them with a fixed seed and
writes a 1437 / 360 train / test split:

    data/digits/train/x.npy   uint8 [1437, 64]   pixels 0..16
    data/digits/train/y.npy   int64 [1437]       labels 0..9
    data/digits/test/x.npy    uint8 [360, 64]
    data/digits/test/y.npy    int64 [360]

The files are committed; run this script only to regenerate them (the
output is the same byte for byte on every run):

    /usr/bin/python3 tools/make_digits.py [OUT_DIR]

Needs Debian's python3-sklearn and python3-numpy.
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

SEED = 20240607
N_TEST = 360


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "data", "digits")
    digits = load_digits()
    x = digits.data.astype(np.uint8)          # exact: the pixels are integers 0..16
    y = digits.target.astype(np.int64)
    assert x.shape == (1797, 64) and x.max() == 16 and (digits.data == x).all()
    order = np.random.default_rng(SEED).permutation(len(x))
    split = {"train": order[:-N_TEST], "test": order[-N_TEST:]}
    for name, idx in split.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        np.save(os.path.join(out, name, "x.npy"), np.ascontiguousarray(x[idx]))
        np.save(os.path.join(out, name, "y.npy"), np.ascontiguousarray(y[idx]))
        print(f"{name}: {len(idx)} images, labels {np.bincount(y[idx], minlength=10).tolist()}")


if __name__ == "__main__":
    main()
