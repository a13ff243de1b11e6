"""torch_timing.py -- the CUDA-event timer that the PyTorch sides of the GPU benchmarks share (a module, not a
script: gpu_attention_torch.py and train_torch.py import it from beside them)."""
import torch


def median_ms(fn, warm=5, iters=20):
    """fn()'s time in ms on the current CUDA stream, by CUDA events around each call: the upper median of `iters`
    calls after `warm` untimed ones."""
    times = []
    for i in range(warm + iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        if i >= warm:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]
