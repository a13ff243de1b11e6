"""gpu_attention_torch.py -- PyTorch's fused attention on bench/gpu_attention_bench.c's shapes.

torch.nn.functional.scaled_dot_product_attention under
sdpa_kernel(SDPBackend.FLASH_ATTENTION) (system "torch": FlashAttention-2)
and sdpa_kernel(SDPBackend.CUDNN_ATTENTION) ("torch-cudnn": the backend
torch.compile's models run on the H200, bench/train.sh), bf16, BERT-Large
(32, 16, 512, 64) and GPT-2 (8, 12, 1024, 64, causal).  "fwd": the forward;
"fwd+bwd": the forward and the backward of out with a fixed random dout.
Median of 20 runs after 5 warm-ups, CUDA events; FLOPs counted as in the C
bench.  Prints "RESULT SYSTEM SHAPE PASS MS TFLOPS" lines (a backend this
torch cannot run on the shape is reported and skipped).
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import median_ms

SHAPES = [("bert-large", 32, 16, 512, 64, False), ("gpt2", 8, 12, 1024, 64, True)]


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for name, b, h, s, d, causal in SHAPES:
        q, k, v, dout = (torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        for system, backend in (("torch", SDPBackend.FLASH_ATTENTION), ("torch-cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    both = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(dout))
            except RuntimeError as e:
                print(f"{system} {name}: not available: {str(e).splitlines()[0]}")
                continue
            print(f"RESULT {system} {name} fwd {fwd:.4f} {flops / fwd * 1e-9:.1f}")
            print(f"RESULT {system} {name} fwd+bwd {both:.4f} {3.5 * flops / both * 1e-9:.1f}")


if __name__ == "__main__":
    main()
