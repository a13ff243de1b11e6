#!/usr/bin/env python3
"""test_ops_numpy.py -- every non-leaf op of ops.def through `evtc run`,
compared with an independent NumPy implementation written here.

For each case a one-op graph is written in the text IR, its inputs (fresh
random values, never zero, odd sizes) as .npy files; `evtc run` writes the
output, which must match the NumPy reference within 1e-12 relative for f64
(and exactly one rounding for f32/f16/bf16 outputs).  Adjoint ops (conv and
pooling backward) are checked against the transpose of the forward map's
Jacobian, built column by column from the NumPy forward.  `evtc run` runs
with --backend interp: these are the reference semantics, exact to one
rounding; the compiled CPU kernels compute in f32 and are checked against
the interpreter by test_cpu_kernels.

usage: test_ops_numpy.py SOURCE_DIR EVTC_BINARY   (EVTC_TEST_SEED=N repeats a run)
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

EVTC = sys.argv[2] if len(sys.argv) > 2 else "evtc"
SEED = int(os.environ.get("EVTC_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)
passed = failed = 0
M32 = 0xFFFFFFFF


def report(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}: {detail}", file=sys.stderr)


# ---- random inputs --------------------------------------------------------

def rand(*shape, lo=0.25, hi=2.0, positive=False):
    """Uniform magnitudes in [lo, hi), random signs unless positive: never zero."""
    mag = rng.uniform(lo, hi, size=shape)
    if positive:
        return mag
    return mag * rng.choice([-1.0, 1.0], size=shape)


def randint(lo, hi, *shape):
    return rng.integers(lo, hi, size=shape).astype(np.int64)


# ---- dtype rounding (independent of evtc's arithmetic method) -------------

def to_bf16(a):
    """float64 -> nearest bfloat16 (ties to even) by rounding the f64 bit pattern."""
    u = np.asarray(a, dtype=np.float64).view(np.uint64).copy()
    drop = np.uint64(45)                      # 52 - 7 mantissa bits
    u += (np.uint64(1) << np.uint64(44)) - np.uint64(1) + ((u >> drop) & np.uint64(1))
    u &= ~((np.uint64(1) << drop) - np.uint64(1))
    return u.view(np.float64)


def round_to(dt, a):
    a = np.asarray(a)
    if dt == "f64":
        return a.astype(np.float64)
    if dt == "f32":
        return a.astype(np.float32).astype(np.float64)
    if dt == "f16":
        with np.errstate(over="ignore"):       # overflow to inf is the point of some cases
            return a.astype(np.float16).astype(np.float64)
    if dt == "bf16":
        return to_bf16(a.astype(np.float64))
    if dt in ("i64", "i32"):
        return np.trunc(a).astype(np.int64)
    if dt == "bool":
        return a != 0
    raise ValueError(dt)


NPY_DTYPE = {"f64": "<f8", "f32": "<f4", "f16": "<f2", "bf16": "<f4", "i64": "<i8", "i32": "<i4",
             "bool": "|b1"}
ULP = {"f64": 1e-12, "f32": 2.0 ** -23, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}


# ---- text IR --------------------------------------------------------------

class Dt(str):
    """An attribute value printed bare (a dtype name)."""


def fmt_attr(v):
    if isinstance(v, Dt):
        return str(v)
    if isinstance(v, bool) or isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v + '"'
    return "[" + ",".join(fmt_attr(x) for x in v) + "]"


def fmt_type(dt, shape):
    return f"{dt}[{','.join(str(int(s)) for s in shape)}]"


def run_case(title, op, ins, attrs, want, out_dt="f64", step=None, extra_lines=(), op_inputs=None):
    """ins: list of (array, dtype); want: reference in float64 before output
    rounding (or int/bool). Returns nothing; counts pass/fail."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = ["graph t {"]
        args = []
        vals = []
        for i, (arr, dt) in enumerate(ins):
            name = f"a{i}"
            lines.append(f"  %{name} = input() : {fmt_type(dt, arr.shape)}")
            path = os.path.join(tmp, name + ".npy")
            np.save(path, np.asarray(arr).astype(NPY_DTYPE[dt]))
            args += ["--input", f"{name}={path}"]
            vals.append(name)
        lines += list(extra_lines)
        operands = op_inputs if op_inputs is not None else vals
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(f"{k}={fmt_attr(v)}" for k, v in attrs.items()) + "}"
        want = np.asarray(want)
        lines.append(f"  %y = {op}({', '.join('%' + v for v in operands)}){attr_text} : {fmt_type(out_dt, want.shape)}")
        lines.append("  output %y")
        lines.append("}")
        model = os.path.join(tmp, "model.evt")
        with open(model, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [EVTC, "run", model, "--backend", "interp"] + args + ["-o", os.path.join(tmp, "out")]
        if step is not None:
            cmd += ["--step", str(step)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except OSError as e:
            report(False, title, f"cannot run {EVTC}: {e}")
            return
        if r.returncode != 0:
            report(False, title, f"evtc run exited {r.returncode}: {r.stderr.strip()}\n" + "\n".join(lines))
            return
        try:
            got = np.load(os.path.join(tmp, "out", "y.npy"))
        except OSError as e:
            report(False, title, f"no output: {e}")
            return
        compare(title, got, want, out_dt)


def compare(title, got, want, dt):
    if got.shape != want.shape:
        report(False, title, f"shape {got.shape}, want {want.shape}")
        return
    if dt in ("i64", "i32", "bool"):
        w = round_to(dt, want)
        ok = np.array_equal(got.astype(w.dtype), w)
        report(ok, title, f"got {got.ravel()[:8]}, want {w.ravel()[:8]}")
        return
    w = round_to(dt, want)
    g = got.astype(np.float64)
    np.seterr(invalid="ignore")                # inf - inf where both overflowed
    scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
    tol = ULP[dt] * np.abs(w) + 1e-14 * scale
    bad = ~(np.abs(g - w) <= tol) & ~((g == w) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        i = np.argmax(bad.ravel())
        report(False, title, f"{bad.sum()} elements differ; first at {i}: got {g.ravel()[i]!r}, "
                             f"want {w.ravel()[i]!r} ({dt})")
    else:
        report(True, title)


def run_error(title, op, ins, attrs, out_shape, out_dt, expect):
    """A case that must fail at run time with a message naming %y and `expect`."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = ["graph t {"]
        args = []
        for i, (arr, dt) in enumerate(ins):
            lines.append(f"  %a{i} = input() : {fmt_type(dt, arr.shape)}")
            path = os.path.join(tmp, f"a{i}.npy")
            np.save(path, np.asarray(arr).astype(NPY_DTYPE[dt]))
            args += ["--input", f"a{i}={path}"]
        attr_text = (" {" + ", ".join(f"{k}={fmt_attr(v)}" for k, v in attrs.items()) + "}") if attrs else ""
        operands = ", ".join(f"%a{i}" for i in range(len(ins)))
        lines += [f"  %y = {op}({operands}){attr_text} : {fmt_type(out_dt, out_shape)}", "  output %y", "}"]
        model = os.path.join(tmp, "model.evt")
        with open(model, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([EVTC, "run", model, "--backend", "interp"] + args + ["-o", os.path.join(tmp, "out")],
                           capture_output=True, text=True, timeout=60)
        ok = r.returncode == 2 and f"%y ({op})" in r.stderr and expect in r.stderr \
            and "internal error" not in r.stderr
        report(ok, title, f"exit {r.returncode}, stderr: {r.stderr.strip()}")


# ---- independent reference implementations --------------------------------

def bcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def erf(a):
    return np.vectorize(math.erf)(a)


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return [c0, c1, c2, c3]


def dropout_ref(x, p, seed, step):
    flat = x.ravel()
    out = np.zeros_like(flat)
    for i in range(flat.size):
        b = i >> 2                        # one Philox block for four consecutive elements
        r = philox4x32_10([b & M32, b >> 32, step & M32, step >> 32], [seed & M32, seed >> 32])
        u = (r[i & 3] >> 8) / 16777216.0
        out[i] = flat[i] / (1 - p) if u >= p else 0.0
    return out.reshape(x.shape)


def conv2d_ref(x, w, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    pt, pl, pb, pr = pad
    dh, dw = dil
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return y


def adjoint(f, in_shape, dy):
    """(J_f)^T dy for a linear f, J built one basis column at a time."""
    out = np.zeros(int(np.prod(in_shape)))
    e = np.zeros(out.size)
    for k in range(out.size):
        e[k] = 1.0
        out[k] = np.sum(f(e.reshape(in_shape)) * dy)
        e[k] = 0.0
    return out.reshape(in_shape)


def windows(h, w, kernel, stride, pad):
    kh, kw = kernel
    sh, sw = stride
    pt, pl, pb, pr = pad
    oh = (h + pt + pb - kh) // sh + 1
    ow = (w + pl + pr - kw) // sw + 1
    return oh, ow


def maxpool_ref(x, kernel, stride, pad):
    n, c, h, w = x.shape
    kh, kw = kernel
    oh, ow = windows(h, w, kernel, stride, pad)
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])), constant_values=-np.inf)
    y = np.empty((n, c, oh, ow))
    for r in range(oh):
        for q in range(ow):
            y[:, :, r, q] = xp[:, :, r * stride[0]:r * stride[0] + kh, q * stride[1]:q * stride[1] + kw].max(axis=(2, 3))
    return y


def maxpool_backward_ref(dy, x, kernel, stride, pad):
    n, c, h, w = x.shape
    kh, kw = kernel
    oh, ow = windows(h, w, kernel, stride, pad)
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])), constant_values=-np.inf)
    dx = np.zeros_like(x)
    for b in range(n):
        for ch in range(c):
            for r in range(oh):
                for q in range(ow):
                    win = xp[b, ch, r * stride[0]:r * stride[0] + kh, q * stride[1]:q * stride[1] + kw]
                    i, j = divmod(int(np.argmax(win)), kw)      # argmax: the first maximum
                    ih, iw = r * stride[0] + i - pad[0], q * stride[1] + j - pad[1]
                    if 0 <= ih < h and 0 <= iw < w:
                        dx[b, ch, ih, iw] += dy[b, ch, r, q]
    return dx


def avgpool_ref(x, kernel, stride, pad, include_pad):
    n, c, h, w = x.shape
    kh, kw = kernel
    oh, ow = windows(h, w, kernel, stride, pad)
    padw = ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3]))
    xp = np.pad(x, padw)
    cnt = np.pad(np.ones_like(x), padw)
    y = np.empty((n, c, oh, ow))
    for r in range(oh):
        for q in range(ow):
            sl = (slice(None), slice(None), slice(r * stride[0], r * stride[0] + kh),
                  slice(q * stride[1], q * stride[1] + kw))
            s = xp[sl].sum(axis=(2, 3))
            y[:, :, r, q] = s / (kh * kw if include_pad else cnt[sl].sum(axis=(2, 3)))
    return y


def pad_ref(x, lo, hi, interior, value):
    shape = [l + h + s + max(s - 1, 0) * i for l, h, s, i in zip(lo, hi, x.shape, interior)]
    out = np.full(shape, value)
    out[tuple(slice(l, l + (s - 1) * (i + 1) + 1, i + 1) for l, s, i in zip(lo, x.shape, interior))] = x
    return out


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---- the cases ------------------------------------------------------------

def unary_cases():
    x = rand(3, 5)
    pos = rand(3, 5, positive=True)
    table = {
        "neg": (x, -x), "abs": (x, np.abs(x)), "sign": (x, np.sign(x)), "exp": (x, np.exp(x)),
        "log": (pos, np.log(pos)), "sqrt": (pos, np.sqrt(pos)), "rsqrt": (pos, 1 / np.sqrt(pos)),
        "reciprocal": (x, 1 / x), "tanh": (x, np.tanh(x)), "sigmoid": (x, 1 / (1 + np.exp(-x))),
        "relu": (x, np.maximum(x, 0)), "gelu": (x, 0.5 * x * (1 + erf(x / math.sqrt(2)))),
        "gelu_tanh": (x, 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
        "erf": (x, erf(x)), "sin": (x, np.sin(x)), "cos": (x, np.cos(x)),
    }
    for op, (a, want) in table.items():
        run_case(op, op, [(a, "f64")], {}, want)
    big = rand(3, 5, lo=1, hi=9)
    run_case("cast f64->i64", "cast", [(big, "f64")], {"dtype": Dt("i64")}, np.trunc(big), out_dt="i64")
    run_case("cast f64->f32", "cast", [(x, "f64")], {"dtype": Dt("f32")}, x, out_dt="f32")
    flags = x * (rng.random(x.shape) < 0.5)     # about half zeros on purpose: cast to bool
    flags[0, 0] = 0.0
    flags[0, 1] = 1.5
    run_case("cast f64->bool", "cast", [(flags, "f64")], {"dtype": Dt("bool")}, flags != 0, out_dt="bool")
    ints = randint(-9, 10, 7)
    run_case("cast i64->f64", "cast", [(ints, "i64")], {"dtype": Dt("f64")}, ints.astype(np.float64))


def binary_cases():
    a, b = rand(3, 1, 5), rand(4, 1)
    pos = rand(3, 1, 5, positive=True)
    arith = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b, "max": np.maximum(a, b),
             "min": np.minimum(a, b)}
    for op, want in arith.items():
        run_case(f"{op} broadcast", op, [(a, "f64"), (b, "f64")], {}, want)
    run_case("pow", "pow", [(pos, "f64"), (b, "f64")], {}, pos ** b)
    s = np.array(rand(1)[0])
    run_case("mul rank-0 operand", "mul", [(a, "f64"), (s, "f64")], {}, a * s)
    # comparisons: same-shape operands with some equal elements
    x = rand(3, 5)
    y = np.where(rng.random(x.shape) < 0.4, x, rand(3, 5))
    cmp = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}
    for op, want in cmp.items():
        run_case(op, op, [(x, "f64"), (y, "f64")], {}, want, out_dt="bool")
    run_case("lt broadcast", "lt", [(a, "f64"), (b, "f64")], {}, a < b, out_dt="bool")
    ia, ib = randint(-20, 21, 3, 5), randint(1, 6, 5) * rng.choice([-1, 1], size=5)
    run_case("div i64 truncates", "div", [(ia, "i64"), (ib, "i64")], {}, np.trunc(ia / ib), out_dt="i64")
    run_case("add i32", "add", [(ia, "i32"), (ib, "i32")], {}, ia + ib, out_dt="i32")
    cond = rng.random((3, 1)) < 0.5
    ta, fb = rand(3, 5), rand(5)
    run_case("where", "where", [(cond, "bool"), (ta, "f64"), (fb, "f64")], {}, np.where(cond, ta, fb))


def reduce_cases():
    x = rand(3, 4, 5)
    run_case("reduce_sum axes=[0,2]", "reduce_sum", [(x, "f64")], {"axes": [0, 2]}, x.sum(axis=(0, 2)))
    run_case("reduce_sum keepdims", "reduce_sum", [(x, "f64")], {"axes": [1], "keepdims": 1},
             x.sum(axis=1, keepdims=True))
    run_case("reduce_mean axes=[-1]", "reduce_mean", [(x, "f64")], {"axes": [-1]}, x.mean(axis=-1))
    run_case("reduce_max all", "reduce_max", [(x, "f64")], {}, x.max())
    run_case("reduce_min axes=[1]", "reduce_min", [(x, "f64")], {"axes": [1]}, x.min(axis=1))
    ints = randint(-50, 50, 3, 5)
    run_case("reduce_sum i64", "reduce_sum", [(ints, "i64")], {"axes": [0]}, ints.sum(axis=0), out_dt="i64")


def layout_cases():
    x = rand(3, 4, 5)
    run_case("reshape -1", "reshape", [(x, "f64")], {"shape": [5, -1]}, x.reshape(5, -1))
    run_case("permute", "permute", [(x, "f64")], {"perm": [2, 0, 1]}, x.transpose(2, 0, 1))
    e = rand(3, 1, 5)
    run_case("expand", "expand", [(e, "f64")], {"shape": [2, 3, 4, 5]}, np.broadcast_to(e, (2, 3, 4, 5)))
    run_case("slice steps and negatives", "slice", [(x, "f64")],
             {"axes": [0, 2], "starts": [1, -4], "ends": [100, -1], "steps": [1, 2]}, x[1:100, :, -4:-1:2])
    run_case("slice all axes clamped", "slice", [(x, "f64")], {"starts": [-9, 1, 0], "ends": [2, 99, 5],
                                                               "steps": [1, 2, 3]}, x[-9:2, 1:99:2, 0:5:3])
    parts = [rand(3, 2, 5), rand(3, 4, 5), rand(3, 1, 5)]
    run_case("concat axis=1", "concat", [(p, "f64") for p in parts], {"axis": 1}, np.concatenate(parts, axis=1))
    p2 = [rand(3, 2, 5), rand(3, 2, 3)]
    run_case("concat axis=-1", "concat", [(p, "f64") for p in p2], {"axis": -1}, np.concatenate(p2, axis=-1))
    run_case("pad interior", "pad", [(x, "f64")], {"pads": [1, 0, 2, 0, 3, 1], "interior": [1, 0, 2], "value": 0.5},
             pad_ref(x, [1, 0, 2], [0, 3, 1], [1, 0, 2], 0.5))
    run_case("pad plain", "pad", [(x, "f64")], {"pads": [0, 1, 1, 2, 0, 1]},
             pad_ref(x, [0, 1, 1], [2, 0, 1], [0, 0, 0], 0.0))
    g = rand(3, 5, 4)
    idx = randint(-5, 5, 2, 3)
    run_case("gather axis=1 negative indices", "gather", [(g, "f64"), (idx, "i64")], {"axis": 1},
             np.take(g, np.where(idx < 0, idx + 5, idx), axis=1))
    idx0 = randint(-3, 3, 4)
    run_case("gather axis=0 i32", "gather", [(g, "f64"), (idx0, "i32")], {}, np.take(g, idx0 % 3, axis=0))
    oh = randint(-2, 8, 7)
    run_case("one_hot (out of range: zero row)", "one_hot", [(oh, "i64")], {"depth": 6, "dtype": Dt("f64")},
             (oh[:, None] == np.arange(6)).astype(np.float64))
    upd = rand(3, 2, 3, 4)
    sidx = randint(-5, 5, 2, 3)
    sidx[0, 0] = sidx[1, 2] = 2                  # duplicates accumulate
    want = np.zeros((3, 5, 4))
    np.add.at(want, (slice(None), np.where(sidx < 0, sidx + 5, sidx)), upd)
    run_case("scatter_add axis=1", "scatter_add", [(upd, "f64"), (sidx, "i64")], {"axis": 1, "size": 5}, want)
    # scatter_add is the adjoint of gather: <gather(x), u> == <x, scatter_add(u)>
    gx = rand(3, 5, 4)
    gath = np.take(gx, np.where(sidx < 0, sidx + 5, sidx), axis=1)
    report(abs(np.sum(gath * upd) - np.sum(gx * want)) < 1e-10, "scatter_add reference is gather's adjoint")


def linalg_cases():
    a, b = rand(3, 5), rand(5, 7)
    run_case("matmul", "matmul", [(a, "f64"), (b, "f64")], {}, a @ b)
    run_case("matmul trans_a", "matmul", [(a.T.copy(), "f64"), (b, "f64")], {"trans_a": 1}, a @ b)
    run_case("matmul trans_b", "matmul", [(a, "f64"), (b.T.copy(), "f64")], {"trans_b": 1}, a @ b)
    run_case("matmul trans_a trans_b", "matmul", [(a.T.copy(), "f64"), (b.T.copy(), "f64")],
             {"trans_a": 1, "trans_b": 1}, a @ b)
    ba, bb = rand(2, 1, 3, 5), rand(4, 5, 7)
    run_case("batch_matmul broadcast", "batch_matmul", [(ba, "f64"), (bb, "f64")], {}, ba @ bb)
    run_case("batch_matmul trans_b", "batch_matmul", [(ba, "f64"), (np.swapaxes(bb, -1, -2).copy(), "f64")],
             {"trans_b": 1}, ba @ bb)
    run_case("batch_matmul rank-2 lhs trans_a", "batch_matmul", [(a.T.copy(), "f64"), (bb, "f64")],
             {"trans_a": 1}, a @ bb)

    x, w = rand(2, 4, 7, 6), rand(6, 2, 3, 2)
    geo = {"stride": [2, 1], "padding": [1, 0, 2, 1], "dilation": [1, 2], "groups": 2}
    kw = dict(stride=(2, 1), pad=(1, 0, 2, 1), dil=(1, 2), groups=2)
    y = conv2d_ref(x, w, **kw)
    run_case("conv2d stride/pad/dilation/groups", "conv2d", [(x, "f64"), (w, "f64")], geo, y)
    x1, w1 = rand(1, 3, 5, 5), rand(2, 3, 3, 3)
    run_case("conv2d plain", "conv2d", [(x1, "f64"), (w1, "f64")], {}, conv2d_ref(x1, w1))
    dy = rand(*y.shape)
    dx = adjoint(lambda t: conv2d_ref(t, w, **kw), x.shape, dy)
    run_case("conv2d_backward_input (adjoint)", "conv2d_backward_input", [(dy, "f64"), (w, "f64")],
             dict(geo, shape=list(x.shape)), dx)
    dw = adjoint(lambda t: conv2d_ref(x, t, **kw), w.shape, dy)
    run_case("conv2d_backward_weight (adjoint)", "conv2d_backward_weight", [(x, "f64"), (dy, "f64")],
             dict(geo, shape=list(w.shape)), dw)


def pool_cases():
    x = rand(2, 3, 7, 6)
    k, s, p = [3, 2], [2, 2], [1, 0, 1, 1]
    attrs = {"kernel": k, "stride": s, "padding": p}
    y = maxpool_ref(x, k, s, p)
    run_case("maxpool2d", "maxpool2d", [(x, "f64")], attrs, y)
    run_case("maxpool2d default stride", "maxpool2d", [(x, "f64")], {"kernel": [2, 3]},
             maxpool_ref(x, [2, 3], [2, 3], [0, 0, 0, 0]))
    dy = rand(*y.shape)
    run_case("maxpool2d_backward", "maxpool2d_backward", [(dy, "f64"), (x, "f64")], attrs,
             maxpool_backward_ref(dy, x, k, s, p))
    ties = rng.choice([-0.5, 1.5, 2.5], size=(2, 3, 7, 6))
    run_case("maxpool2d_backward ties: first max", "maxpool2d_backward", [(dy, "f64"), (ties, "f64")],
             attrs,
             maxpool_backward_ref(dy, ties, k, s, p))
    for inc in (0, 1):
        a = dict(attrs, count_include_pad=inc)
        ya = avgpool_ref(x, k, s, p, inc)
        run_case(f"avgpool2d count_include_pad={inc}", "avgpool2d", [(x, "f64")], a, ya)
        dya = rand(*ya.shape)
        dxa = adjoint(lambda t: avgpool_ref(t, k, s, p, inc), x.shape, dya)
        run_case(f"avgpool2d_backward count_include_pad={inc} (adjoint)", "avgpool2d_backward", [(dya, "f64")],
                 dict(a, shape=list(x.shape)), dxa)
    run_case("global_avgpool", "global_avgpool", [(x, "f64")], {}, x.mean(axis=(2, 3), keepdims=True))


def composite_cases():
    x = rand(3, 5, 4)
    run_case("softmax axis=1", "softmax", [(x, "f64")], {"axis": 1}, softmax_ref(x, 1))
    run_case("softmax default axis", "softmax", [(x * 40, "f64")], {}, softmax_ref(x * 40, -1))
    run_case("log_softmax", "log_softmax", [(x, "f64")], {}, log_softmax_ref(x, -1))
    ln, gam, bet = rand(3, 4, 5), rand(4, 5), rand(4, 5)
    mu = ln.mean(axis=(1, 2), keepdims=True)
    var = ((ln - mu) ** 2).mean(axis=(1, 2), keepdims=True)
    run_case("layernorm axis=1", "layernorm", [(ln, "f64"), (gam, "f64"), (bet, "f64")], {"axis": 1, "eps": 1e-5},
             (ln - mu) / np.sqrt(var + 1e-5) * gam + bet)
    g1, b1 = rand(5), rand(5)
    mu1 = ln.mean(axis=-1, keepdims=True)
    var1 = ln.var(axis=-1, keepdims=True)
    run_case("layernorm last axis", "layernorm", [(ln, "f64"), (g1, "f64"), (b1, "f64")], {"eps": 0.001},
             (ln - mu1) / np.sqrt(var1 + 0.001) * g1 + b1)
    bx, bg, bb = rand(5, 3, 2, 3), rand(3), rand(3)
    bmu = bx.mean(axis=(0, 2, 3))
    bvar = bx.var(axis=(0, 2, 3))
    shp = (1, 3, 1, 1)
    run_case("batchnorm", "batchnorm", [(bx, "f64"), (bg, "f64"), (bb, "f64")], {},
             (bx - bmu.reshape(shp)) / np.sqrt(bvar.reshape(shp) + 1e-5) * bg.reshape(shp) + bb.reshape(shp))
    b2 = rand(7, 3)
    run_case("batchnorm rank 2", "batchnorm", [(b2, "f64"), (bg, "f64"), (bb, "f64")], {"eps": 0.01},
             (b2 - b2.mean(0)) / np.sqrt(b2.var(0) + 0.01) * bg + bb)
    rm, rv = rand(3), rand(3, positive=True)
    run_case("batchnorm_running_mean", "batchnorm_running_mean", [(bx, "f64"), (rm, "f64")], {"momentum": 0.3},
             0.7 * rm + 0.3 * bmu)
    run_case("batchnorm_running_var (unbiased)", "batchnorm_running_var", [(bx, "f64"), (rv, "f64")],
             {"momentum": 0.3}, 0.7 * rv + 0.3 * bx.var(axis=(0, 2, 3), ddof=1))
    dx = rand(3, 5, 7)
    run_case("dropout p=0.3 seed=7 step=3", "dropout", [(dx, "f64")], {"p": 0.3, "seed": 7},
             dropout_ref(dx, 0.3, 7, 3), step=3)
    run_case("dropout step=0 default seed", "dropout", [(dx, "f64")], {"p": 0.6}, dropout_ref(dx, 0.6, 0, 0))
    logits, labels = rand(7, 5, lo=0.5, hi=4), randint(0, 5, 7)
    lsm = log_softmax_ref(logits, 1)
    run_case("cross_entropy", "cross_entropy", [(logits, "f64"), (labels, "i64")], {},
             -lsm[np.arange(7), labels].mean())
    ma, mb = rand(3, 5), rand(3, 5)
    run_case("mse", "mse", [(ma, "f64"), (mb, "f64")], {}, ((ma - mb) ** 2).mean())
    table, ids = rand(6, 4), randint(0, 6, 2, 3)
    run_case("embedding", "embedding", [(table, "f64"), (ids, "i64")], {}, table[ids])


def const_case():
    x = rand(2, 3)
    data = [float(v) for v in rand(2, 3).ravel()]
    run_case("const data + input", "add", [(x, "f64")], {}, x + np.array(data).reshape(2, 3),
             extra_lines=[f"  %c = const() {{data={fmt_attr(data)}}} : f64[2,3]"], op_inputs=["a0", "c"])
    run_case("const value (broadcast scalar)", "mul", [(x, "f64")], {}, x * 0.375,
             extra_lines=["  %c = const() {value=0.375} : f64[]"], op_inputs=["a0", "c"])


def precision_cases():
    """Inputs and outputs of low-precision dtypes: one rounding of the f64 result."""
    for dt in ("f32", "f16", "bf16"):
        a, b = round_to(dt, rand(3, 5)), round_to(dt, rand(5))
        run_case(f"add {dt}", "add", [(a, dt), (b, dt)], {}, a + b, out_dt=dt)
        run_case(f"mul {dt}", "mul", [(a, dt), (b, dt)], {}, a * b, out_dt=dt)
        run_case(f"exp {dt}", "exp", [(a, dt)], {}, np.exp(a), out_dt=dt)
        run_case(f"gelu {dt}", "gelu", [(a, dt)], {}, 0.5 * a * (1 + erf(a / math.sqrt(2))), out_dt=dt)
    m1, m2 = round_to("f32", rand(3, 5)), round_to("f32", rand(5, 7))
    run_case("matmul f32", "matmul", [(m1, "f32"), (m2, "f32")], {}, m1 @ m2, out_dt="f32")
    big = np.array([60000.0, 1000.0, -70000.0 / 2])
    run_case("f16 overflow to inf", "add", [(round_to("f16", big), "f16"), (round_to("f16", big), "f16")], {},
             2 * round_to("f16", big), out_dt="f16")
    x = rand(7)
    run_case("cast f64->f16", "cast", [(x, "f64")], {"dtype": Dt("f16")}, x, out_dt="f16")
    run_case("cast f64->bf16", "cast", [(x, "f64")], {"dtype": Dt("bf16")}, x, out_dt="bf16")


def error_cases():
    g, idx = rand(3, 4), np.array([0, 3, -4], dtype=np.int64)
    run_error("gather index out of range", "gather", [(g, "f64"), (idx, "i64")], {}, (3, 4), "f64", "out of range")
    run_error("embedding id out of range", "embedding", [(g, "f64"), (np.array([1, -1]), "i64")], {}, (2, 4),
              "f64", "outside")
    run_error("cross_entropy label out of range", "cross_entropy", [(g, "f64"), (np.array([0, 4, 1]), "i64")], {},
              (), "f64", "outside")
    run_error("integer division by zero", "div", [(np.array([3, 4]), "i64"), (np.array([1, 0]), "i64")], {}, (2,),
              "i64", "division by zero")


def main():
    print(f"seed {SEED} (EVTC_TEST_SEED={SEED} repeats this run)")
    kat = [([0] * 4, [0] * 2, [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
           ([M32] * 4, [M32] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd])]
    for ctr, key, want in kat:
        report(philox4x32_10(ctr, key) == want, "python philox reference KAT")
    report(to_bf16(np.array([0.1]))[0] == 0.10009765625, "python bf16 reference")
    unary_cases()
    binary_cases()
    reduce_cases()
    layout_cases()
    linalg_cases()
    pool_cases()
    composite_cases()
    const_case()
    precision_cases()
    error_cases()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
