"""gpu_evt_torch.py -- PyTorch's side of bench/gpu_evt_bench.c (issue 8's EVT rows).

The same three workloads on 16384 x 4096 x 1024 (M x N x K; EVT_SHAPE,
as "16384x1024x4096", another, as gpu_evt_bench's --shape), bf16, as
gpu_evt_bench.c builds them as evtc graphs:
  bias_gelu    y = gelu_tanh(x W^T + b)
  ln_stats     z = dropout(gelu_tanh(x W^T + b), 0.1) + res, and the row sums
               of z and z^2 in f32 (the next layernorm's statistics)
  dgelu_bgrad  dh = (dy W2^T) gelu_tanh'(h), db = column sums of dh in f32
each in eager mode and through torch.compile (mode from EVT_TORCH_MODES,
default "default"; "max-autotune" compiled each in 1-18 s on the H200,
torch 2.11, thirty-third session), plus the GEMM
alone.  Times: CUDA events around one call, median of EVT_TORCH_RUNS calls
(default 20; 2000 hold the GPU at its power cap, as gpu_evt_bench's --runs
2000 does) after a warm-up of at least 250 ms (compiling happens before).
EVT_TORCH_WORKLOADS (names, comma-separated; default all) picks workloads;
a name it does not have is said and skipped (gpu_gemm.sh passes gpu_evt_bench's).
Prints one line per workload and mode, "RESULT <workload> <mode> <ms>",
then a table.
"""
import os
import statistics
import time

import torch
import torch.nn.functional as F


def shape(text):
    """M, N, K from "MxNxK" (EVT_SHAPE)."""
    dims = text.split("x")
    if len(dims) != 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
        raise SystemExit(f"gpu_evt_torch.py: EVT_SHAPE takes MxNxK, as 16384x1024x4096, not '{text}'")
    return tuple(int(d) for d in dims)


M, N, K = shape(os.environ.get("EVT_SHAPE", "16384x4096x1024"))
C0, C1 = 0.7978845608028654, 0.044715


def gemm(x, w, b, res, dy, w2, h):
    return x @ w.t()


def bias_gelu(x, w, b, res, dy, w2, h):
    return F.gelu(x @ w.t() + b, approximate="tanh")


def ln_stats(x, w, b, res, dy, w2, h):
    z = F.dropout(F.gelu(x @ w.t() + b, approximate="tanh"), 0.1) + res
    zf = z.float()
    return z, zf.sum(1), (zf * zf).sum(1)


def dgelu_bgrad(x, w, b, res, dy, w2, h):
    g = (dy @ w2.t()).float()
    hf = h.float()
    t = torch.tanh(C0 * hf * (1 + C1 * hf * hf))
    d = 0.5 * (1 + t) + 0.5 * hf * (1 - t * t) * C0 * (1 + 3 * C1 * hf * hf)
    dh = g * d
    return dh.bfloat16(), dh.sum(0)


RUNS = int(os.environ.get("EVT_TORCH_RUNS", "20"))


def time_ms(fn, args):
    fn(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.25:
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(a.elapsed_time(e))
    return statistics.median(times)


def main():
    workloads = [("gemm", gemm), ("bias_gelu", bias_gelu), ("ln_stats", ln_stats), ("dgelu_bgrad", dgelu_bgrad)]
    wanted = [w for w in os.environ.get("EVT_TORCH_WORKLOADS", "").split(",") if w]
    names = [name for name, _ in workloads]
    for w in wanted:
        if w not in names:   # gpu_evt_bench's graphs without a PyTorch twin (bert_fwd, ...), or a misspelling
            print(f"gpu_evt_torch.py: no workload {w!r} here (these are: {', '.join(names)}): skipped", flush=True)
    if wanted and not set(wanted) & set(names):
        print("gpu_evt_torch.py: nothing to time")
        return
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    r = lambda *s: (torch.rand(*s, device=dev, generator=g) * 2 - 1).bfloat16()
    args = (r(M, K), r(N, K), r(N), r(M, N), r(M, K), r(N, K), r(M, N))
    modes = ["eager"] + [m for m in os.environ.get("EVT_TORCH_MODES", "default").split(",") if m]
    rows = []
    for name, fn in workloads:
        if wanted and name not in wanted:
            continue
        for mode in modes:
            f = fn if mode == "eager" else torch.compile(fn, mode=None if mode == "default" else mode)
            c0 = time.perf_counter()
            with torch.no_grad():
                f(*args)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - c0
            with torch.no_grad():
                ms = time_ms(f, args)
            print(f"RESULT {name} {mode} {ms:.4f}", flush=True)
            rows.append((name, mode, ms, compile_s))
    flop = 2.0 * M * N * K
    print(f"\n== PyTorch {torch.__version__}: {M}x{N}x{K} bf16 (M x N x K); ms: CUDA events, median of {RUNS}")
    print(f"{'workload':12s} {'mode':14s} {'ms':>8s} {'TFLOP/s':>8s} {'first call s':>12s}")
    for name, mode, ms, cs in rows:
        print(f"{name:12s} {mode:14s} {ms:8.3f} {flop / ms * 1e-9:8.1f} {cs:12.1f}")


if __name__ == "__main__":
    main()
