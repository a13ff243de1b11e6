"""cpu_torch.py -- the PyTorch CPU side of bench/cpu.sh.

Times the same workloads as cpu_bench.c (eager PyTorch, float32, all
cores, AdamW for training steps) and prints "RESULT <workload> <impl> <ms>".
"""
import os
import sys
import time

import torch
import torch.nn.functional as F


def timed(step, min_runs=3, budget=1.0):
    """Median ms of the runs in about `budget` seconds after a warm-up (as cpu_bench.c)."""
    step()  # warm-up
    times, start = [], time.perf_counter()
    while True:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_runs and time.perf_counter() - start > budget:
            break
    times.sort()
    n = len(times)
    return 1000.0 * (times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2]))


def train_step_fn(model, inputs, loss_fn):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs[0]), *inputs[1:])
        loss.backward()
        opt.step()
    return step


def main():
    torch.set_num_threads(os.cpu_count())  # every core, as evtc and OpenBLAS use (torch picks physical cores)
    torch.manual_seed(0)
    res = []
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    res.append(("digits-mlp-train-b32", timed(train_step_fn(mlp, (x * 0.0625, y), F.cross_entropy))))
    x, y = torch.randn(256, 1024), torch.randint(0, 10, (256,))
    big = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    res.append(("mlp1024-train-b256", timed(train_step_fn(big, (x, y), F.cross_entropy))))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(1024, 4096), torch.nn.Linear(4096, 1024)
            self.ln = torch.nn.LayerNorm(1024)

        def forward(self, v):
            return self.ln(self.l2(F.gelu(self.l1(v))) + v)
    x = torch.randn(1024, 1024)
    res.append(("mlp-block-ln-train-1024rows",
                timed(train_step_fn(Block(), (x,), lambda out: (out * out).mean()))))
    enc = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu", batch_first=True)
    x = torch.randn(8, 128, 256)
    res.append(("transformer-encoder-train-b8s128d256",
                timed(train_step_fn(enc, (x,), lambda out: (out * out).mean()))))
    x, w, b = torch.randn(4096, 1024), torch.randn(1024, 1024), torch.randn(1024)
    with torch.no_grad():
        res.append(("linear-bias-gelu-4096x1024x1024", timed(lambda: F.gelu(torch.addmm(b, x, w)))))
    for name, ms in res:
        print(f"RESULT {name} pytorch-cpu {ms:.4f}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)


if __name__ == "__main__":
    main()
