#!/usr/bin/python3
"""train_torch.py -- PyTorch's side of the training benchmark (bench/train.sh).

Usage: train_torch.py MODELS_DIR --model NAME [--steps N] [--lr X]
                      [--modes eager,compile,max-autotune] [--attention auto|sdpa|explicit]
                      [--profile N] [--out JSON]

Trains the model that bench/train_models.py wrote to MODELS_DIR -- rebuilt
from the same seed, its bf16 weights checked against the digest in
MODELS_DIR/NAME/meta.json -- on the same batch (MODELS_DIR/NAME/train/*.npy)
for N steps in each mode:
  eager          plain PyTorch
  compile        torch.compile(loss function), mode "default"
  max-autotune   torch.compile(loss function), mode "max-autotune"
The compiled function is the model's forward and the cross-entropy loss
(mean over every position, on the bf16 logits); backward follows through
AOTAutograd; the optimizer step runs eagerly.  The optimizer is
torch.optim.SGD(lr, momentum=0.9, dampening=0, weight_decay=0,
nesterov=False): evtc's `--optimizer sgd` exactly (src/autodiff/optim.c:
buf' = 0.9 buf + g, p' = p - lr buf', buf = g on the first step), each in
the parameters' bf16 (PyTorch rounds buf after its multiply and after its
add, evtc's fused update may round once: a last-bit difference).
Attention: "auto" is scaled_dot_product_attention where PyTorch has it
(torch >= 2.0: its flash / cuDNN kernels), else the decomposed form.

Each step is timed on the host around zero_grad, forward, backward, the
optimizer step and loss.item() (after torch.cuda.synchronize), as evtc's
steps are.  Per mode it reports every step's loss, the steady ms/step (the
median of the steps after the first), the first step's time, the compile
time (first step minus steady step) and the peak memory
(torch.cuda.max_memory_allocated: weights, gradients, momentum,
activations, workspaces).  Without CUDA it runs on the CPU, eager only.
With --profile N, after the timed steps N more steps of each mode run
under torch.profiler: the GPU kernels per step, summed by kind (GEMM,
attention, Triton, other) and the slowest ten, to set beside
`evtc explain --profile` (whose device clock includes launch gaps: the
profiler's kernel times do not).
Before the modes, the FLOP side of the step: the FLOP of one training
step's forward and backward as torch.utils.flop_counter counts them on the
eager model (matrix products, convolutions, attention; elementwise work is
not counted), and the matrix FLOP ceiling measured in the same run: the
TFLOP/s of a bf16 8192x8192x8192 torch.matmul (cuBLAS), the median of 20
after five warm-up products (../shared/BENCHMARKS.md's ceiling).  train_report.py divides
the one by each step time and by the other.
One line per mode on stdout; everything in --out as JSON, rewritten after
each mode.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_models  # noqa: E402
from torch_timing import median_ms  # noqa: E402

MODES = {"eager": None, "compile": "default", "max-autotune": "max-autotune"}


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


KINDS = (("gemm", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "triton_tem")), ("attention", ("flash", "fmha", "attention", "sdpa")),
         ("triton", ("triton",)))


def kernel_kind(name):
    low = name.lower()
    return next((kind for kind, keys in KINDS if any(k in low for k in keys)), "other")


def profile_kernels(step, steps):
    """Runs step() `steps` times under torch.profiler: {per_step_ms, kernels_per_step, kinds: {kind: [ms, n]},
    top: [[name, ms, n]]}, all per step."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kinds, top, total, count = {}, [], 0.0, 0
    for e in prof.key_averages():
        if not str(e.device_type).endswith("CUDA"):
            continue
        us = getattr(e, "self_device_time_total", None)
        us = getattr(e, "self_cuda_time_total", 0.0) if us is None else us
        if us <= 0:
            continue
        ms, n = us / 1e3 / steps, e.count / steps
        k = kinds.setdefault(kernel_kind(e.key), [0.0, 0.0])
        k[0] += ms
        k[1] += n
        top.append([e.key[:100], ms, n])
        total += ms
        count += n
    top.sort(key=lambda t: -t[1])
    return {"per_step_ms": total, "kernels_per_step": count, "kinds": kinds, "top": top[:10]}


def step_flop(base, x, labels, dev):
    """The FLOP of one training step's forward and backward, counted by torch.utils.flop_counter on an eager
    copy of the model (matrix products, convolutions, attention; elementwise work not counted); None where this torch
    has no flop counter (before 2.1)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    model = copy.deepcopy(base).to(dev)
    with FlopCounterMode(display=False) as counter:
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).backward()
    del model, logits
    if dev == "cuda":
        torch.cuda.empty_cache()
    return counter.get_total_flops()


def matmul_ceiling_tflops(n=8192):
    """The matrix FLOP ceiling in this run: TFLOP/s of a bf16 n x n x n torch.matmul (torch_timing.median_ms: 20
    products timed by CUDA events after five warm-up ones)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b, out=c))
    del a, b, c
    torch.cuda.empty_cache()
    return 2.0 * n ** 3 / (ms / 1e3) / 1e12


def run_mode(base, x, labels, mode, steps, lr, dev, profile_steps=0):
    """One mode's result dict (losses, step_ms, first_step_s, compile_s, peak_mib, and with profile_steps the
    kernels' profile)."""
    if dev == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model = copy.deepcopy(base).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, dampening=0, weight_decay=0, nesterov=False)

    def loss_fn(inp, lab):
        logits = model(inp)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1))

    fn = loss_fn if MODES[mode] is None else torch.compile(loss_fn, mode=MODES[mode])

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fn(x, labels)
        loss.backward()
        opt.step()
        return loss.item()

    losses, times = [], []
    for _ in range(steps):
        sync(dev)
        t0 = time.perf_counter()
        value = step()
        sync(dev)
        times.append(time.perf_counter() - t0)
        losses.append(value)
    steady = statistics.median(times[1:]) if steps > 1 else float("nan")
    r = {"losses": losses, "step_ms": 1e3 * steady, "first_step_s": times[0],
         "compile_s": max(0.0, times[0] - (steady if steps > 1 else 0.0)),
         "peak_mib": torch.cuda.max_memory_allocated() / 2 ** 20 if dev == "cuda" else None, "error": None}
    if profile_steps > 0 and dev == "cuda":
        r["profile"] = profile_kernels(step, profile_steps)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models_dir")
    ap.add_argument("--model", required=True, choices=train_models.MODELS)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--modes", default="eager,compile,max-autotune")
    ap.add_argument("--attention", choices=["auto", "sdpa", "explicit"], default="auto")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--out")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or a.steps < 1:
        ap.error("unknown mode(s) %s (known: %s)" % (",".join(bad), ",".join(MODES)) if bad else "--steps >= 1")
    with open(os.path.join(a.models_dir, a.model, "meta.json")) as f:
        meta = json.load(f)
    attention = a.attention if a.attention != "auto" else ("sdpa" if train_models.has_sdpa() else "explicit")
    base, cfg = train_models.build(a.model, meta["scale"], attention)
    if train_models.digest(base) != meta["digest"]:
        print("%s: the rebuilt weights differ from the exported ones (digest): not the same model" % a.model,
              file=sys.stderr)
        return 1
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    train = os.path.join(a.models_dir, a.model, "train")
    x = torch.from_numpy(np.load(os.path.join(train, meta["input"] + ".npy"))).to(dev)
    labels = torch.from_numpy(np.load(os.path.join(train, "labels.npy"))).to(dev)
    out = {"model": a.model, "scale": meta["scale"], "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
           "torch": torch.__version__, "attention": attention, "steps": a.steps,
           "optimizer": "SGD lr %g momentum 0.9 dampening 0 weight_decay 0 nesterov False" % a.lr, "modes": {}}
    print("%s: PyTorch %s on %s, attention %s, %d steps, %s, dropout 0" %
          (a.model, torch.__version__, out["device"], attention, a.steps, out["optimizer"]))
    out["step_flop"] = step_flop(base, x, labels, dev)
    out["matmul_tflops"] = matmul_ceiling_tflops() if dev == "cuda" else None
    print("  FLOP of a step (forward + backward, flop_counter): %s; bf16 8192^3 matmul: %s TFLOP/s" %
          ("not counted (no torch.utils.flop_counter)" if out["step_flop"] is None else "%.4g" % out["step_flop"],
           "-" if out["matmul_tflops"] is None else "%.1f" % out["matmul_tflops"]))
    for mode in modes:
        if dev != "cuda" and mode != "eager":
            out["modes"][mode] = {"error": "skipped: no CUDA (eager only on the CPU)"}
        else:
            try:
                out["modes"][mode] = run_mode(base, x, labels, mode, a.steps, a.lr, dev, a.profile)
            except Exception as e:            # one mode's failure leaves the others to run
                out["modes"][mode] = {"error": (str(e).strip().split("\n") or ["?"])[0][:300]}
            if mode != "eager":
                torch._dynamo.reset()
        r = out["modes"][mode]
        if r.get("error"):
            print("  %-12s %s" % (mode, r["error"]))
        else:
            peak = "" if r["peak_mib"] is None else ", peak %.0f MiB" % r["peak_mib"]
            print("  %-12s %.3f ms/step, first step %.2f s, compile %.2f s%s; losses %s" %
                  (mode, r["step_ms"], r["first_step_s"], r["compile_s"], peak,
                   " ".join("%.4f" % v for v in r["losses"])))
            pr = r.get("profile")
            if pr:
                print("  %-12s profile: %.0f kernels, %.3f ms of kernels per step; %s" %
                      (mode, pr["kernels_per_step"], pr["per_step_ms"],
                       ", ".join("%s %.3f ms (%.0f)" % (k, v[0], v[1]) for k, v in sorted(pr["kinds"].items()))))
                for name, ms, n in pr["top"]:
                    print("  %-12s   %8.3f ms %5.0f x %s" % (mode, ms, n, name))
        sys.stdout.flush()
        if a.out:                             # after every mode: a later one may be killed by a timeout
            with open(a.out, "w") as f:
                json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
