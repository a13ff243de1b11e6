"""test_fusion_models_slow.py -- the partitioners on the joint graphs of the
exported test models (tools/export_models.py: BERT and GPT-2 layers, ViT,
ResNet-18, MLP, a tiny transformer), through tools/fusion_report.py
--check: every run succeeds (so every plan passed the feasibility checker),
the ILP is never slower than greedy and is proven optimal (gap 0, no
fallback).  Skipped (exit 77, a CTest skip, with a note) when PyTorch is not installed.
"""
import os
import subprocess
import sys
import tempfile

SRC, EVTC = sys.argv[1], sys.argv[2]
try:
    import torch  # noqa: F401
except ImportError:
    print("skipped: python3-torch is not installed")
    sys.exit(77)  # a CTest skip, not a pass
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(SRC, "tools", "export_models.py"), tmp], check=True,
                   stdout=subprocess.DEVNULL)
    r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "fusion_report.py"), EVTC, tmp, "--targets=h200",
                        "--check"], capture_output=True, text=True)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    sys.exit(r.returncode)
