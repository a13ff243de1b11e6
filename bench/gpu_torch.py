"""gpu_torch.py -- PyTorch eager and torch.compile on bench/gpu.sh's workloads.

Reads gpu_bench's output (RESULT and CHECK lines), builds the same inputs
(the integer hash of gpu_bench.c), checks evtc's output checksums against
PyTorch's (not for dropout: the RNGs differ; that kernel is checked against
the interpreter in test_gpu_kernels), times eager and torch.compile on the
device clock as gpu_bench does (CUDA events around one step; median of 30
after warm-ups; gradients reset between steps outside the timing), measures
the device-to-device copy bandwidth (1 GiB) the same way, and prints the
table last: GB/s over minimal bytes, fraction of copy bandwidth, and
ratio = peer time / evtc time (> 1: evtc is faster).
"""
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

dev = "cuda"


def hashed(shape, salt):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    h = ((i + np.uint64(salt)) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    x = (h >> np.uint64(8)).astype(np.float64) * (1.0 / 16777216.0) * 2 - 1
    return torch.tensor(x.astype(np.float32).reshape(shape), device=dev)


def labels(n, classes):
    return torch.tensor((np.arange(n, dtype=np.int64) * 7919) % classes, device=dev)


SALT = 1000003


def timeit(fn, reset, warm=5, warm_s=0.25, iters=30):
    # warm-ups: at least `warm` steps and `warm_s` seconds, so the GPU's clocks have ramped up (as in gpu_bench.c)
    t_end = time.perf_counter() + warm_s
    n = 0
    while n < warm or time.perf_counter() < t_end:
        reset()
        fn()
        torch.cuda.synchronize()
        n += 1
    ts = []
    for _ in range(iters):
        reset()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    return ts[len(ts) // 2]


def ln_case():
    R, C = 16384, 4096
    x = hashed((R, C), 0).requires_grad_()
    dy = hashed((R, C), SALT)
    g = hashed((C,), 2 * SALT).requires_grad_()
    b = hashed((C,), 3 * SALT).requires_grad_()

    def f(x, g, b):
        return F.layer_norm(x, (C,), g, b, 1e-5)

    out = {}

    def make(fc):
        def step():
            y = fc(x, g, b)
            y.backward(dy)
            out["y"] = y
        return step

    def reset():
        x.grad = g.grad = b.grad = None

    def checks():
        y = out["y"].detach()
        return {"y": y, "loss": (y * dy).sum(), "grad.x": x.grad, "grad.g": g.grad, "grad.b": b.grad}

    return "layernorm-fwd-bwd-16384x4096", f, make, reset, checks


def sm_case():
    x = hashed((8192, 32000), 0)
    out = {}

    def f(x):
        return torch.softmax(x, dim=1)

    def make(fc):
        def step():
            out["y"] = fc(x)
        return step

    return "softmax-fwd-8192x32000", f, make, lambda: None, lambda: {"y": out["y"]}


def ce_case():
    # fp32 math on bf16 logits; the gradient wrt the bf16 logits is bf16
    x = hashed((8192, 32000), 0).to(torch.bfloat16).requires_grad_()
    lab = labels(8192, 32000)
    out = {}

    def f(x, lab):
        return F.cross_entropy(x.float(), lab)

    def make(fc):
        def step():
            loss = fc(x, lab)
            loss.backward()
            out["loss"] = loss
        return step

    def reset():
        x.grad = None

    return "cross-entropy-bf16-fwd-bwd-8192x32000", f, make, reset, lambda: {"loss": out["loss"], "grad.x": x.grad}


def drl_case():
    R, C = 16384, 1024
    x = hashed((R, C), 0).requires_grad_()
    res = hashed((R, C), SALT).requires_grad_()
    dy = hashed((R, C), 2 * SALT)
    g = hashed((C,), 3 * SALT).requires_grad_()
    b = hashed((C,), 4 * SALT).requires_grad_()

    def f(x, res, g, b):
        return F.layer_norm(F.dropout(x, 0.1, True) + res, (C,), g, b, 1e-5)

    def make(fc):
        def step():
            fc(x, res, g, b).backward(dy)
        return step

    def reset():
        x.grad = res.grad = g.grad = b.grad = None

    return "dropout-residual-layernorm-fwd-bwd-16384x1024", f, make, reset, None


def ln_grad_case():
    # BERT-Large's layernorm gradient as its joint graph has it (gpu_bench.c's LN_GRAD_TEXT): bf16 storage, f32 math
    R, C = 16384, 1024
    bf = torch.bfloat16
    g1, g2, xh = (hashed((R, C), k * SALT).to(bf) for k in range(3))
    rstd = hashed((R, 1), 3 * SALT).to(bf)
    gamma = hashed((C,), 4 * SALT).to(bf)
    out = {}

    def f(g1, g2, xh, rstd, gamma):
        dy = g1.float() + g2.float()
        dyg = dy * gamma.float()
        xf = xh.float()
        m1 = dyg.mean(1, keepdim=True)
        m2 = (dyg * xf).mean(1, keepdim=True)
        dx = ((dyg - m1 - xf * m2) * rstd.float()).to(bf)
        return dx, (dy * xf).sum(0).to(bf), dy.sum(0).to(bf)

    def make(fc):
        def step():
            out["dx"], out["dgamma"], out["dbeta"] = fc(g1, g2, xh, rstd, gamma)
        return step

    return "bert-ln-grad-bf16-16384x1024", f, make, lambda: None, lambda: {"dx": out["dx"], "dgamma": out["dgamma"],
                                                                              "dbeta": out["dbeta"]}


def main():
    rows = {}
    checks = {}
    for line in open(sys.argv[1]):
        p = line.split()
        if p and p[0] == "RESULT":
            rows.setdefault(p[1], {})[p[2]] = (float(p[3]), float(p[4]))
        elif p and p[0] == "CHECK":
            checks.setdefault(p[1], {})[p[2]] = (float(p[3]), float(p[4]))

    n = 1 << 28
    src = torch.empty(n, device=dev)
    dst = torch.empty(n, device=dev)
    copy_ms = timeit(lambda: dst.copy_(src), lambda: None)
    copy_gbs = 2 * 4 * n / copy_ms / 1e6
    print(f"device-to-device copy of 1 GiB: {copy_ms:.4f} ms, {copy_gbs:.1f} GB/s")
    del src, dst

    for case in (ln_case, sm_case, ce_case, drl_case, ln_grad_case):
        name, f, make, reset, getchecks = case()
        if name not in rows:
            continue
        nbytes = rows[name]["evtc"][1]
        eager = make(f)
        rows[name]["pytorch-eager"] = (timeit(eager, reset), nbytes)
        if getchecks and name in checks:
            reset()
            eager()
            torch.cuda.synchronize()
            for out, t in getchecks().items():
                if out not in checks[name]:
                    continue
                t = t.detach().double()
                s, a = float(t.sum()), float(t.abs().sum())
                es, ea = checks[name][out]
                ok = abs(ea - a) <= 1e-3 * max(1.0, a) and abs(es - s) <= 1e-3 * max(1.0, a)
                print(f"check {name} {out}: evtc sum {es:.6g} |sum| {ea:.6g}, torch {s:.6g} |sum| {a:.6g}: "
                      f"{'ok' if ok else 'MISMATCH'}")
        try:
            comp = make(torch.compile(f))
            rows[name]["torch.compile"] = (timeit(comp, reset), nbytes)
        except Exception as e:  # noqa: BLE001 -- report and go on
            print(f"torch.compile failed on {name}: {e}")
        torch.cuda.empty_cache()

    print()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; f32 storage (cross-entropy: bf16 logits, "
          "BERT-Large's layernorm gradient: bf16); "
          "device clock: CUDA events around one step (evtc: around and between its kernels), median of 30")
    print(f"| {'workload':46} | {'impl':14} | {'ms':>8} | {'GB/s':>7} | {'of copy':>7} | {'peer/evtc':>9} |")
    print(f"|{'-' * 48}|{'-' * 16}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 11}|")
    for name, impls in rows.items():
        base = impls.get("evtc", (None,))[0]
        for impl, (ms, nbytes) in impls.items():
            gbs = nbytes / ms / 1e6
            ratio = f"{ms / base:9.2f}" if base and impl != "evtc" else " " * 9
            print(f"| {name:46} | {impl:14} | {ms:8.4f} | {gbs:7.1f} | {gbs / copy_gbs:7.1%} | {ratio} |")


if __name__ == "__main__":
    main()
