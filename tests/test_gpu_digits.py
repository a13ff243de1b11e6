"""test_gpu_digits.py -- the digits example trained on the GPU reaches the CPU's accuracy.

Trains examples/mlp.evt on data/digits for the default 30 epochs with
--backend cuda and with --backend cpu (same seed) and checks that both print
a test accuracy, that they agree within 0.01, and that the GPU run's is
above 0.9.  Without a usable GPU (`--backend cuda` reports "no CUDA ...")
it prints SKIPPED and exits 77 (label gpu).
Usage: test_gpu_digits.py SOURCE_DIR EVTC_BINARY
"""
import os
import re
import sys

from evtc_testlib import SRC, check, evtc, finish

MODEL = os.path.join(SRC, "examples", "mlp.evt")
DATA = os.path.join(SRC, "data", "digits")


def accuracy(backend):
    r = evtc("train", MODEL, "--data", DATA, "--backend", backend, timeout=600)
    return r, re.search(r"^test accuracy: ([0-9.]+)$", r.stdout, re.M)


def main():
    gpu, gpu_acc = accuracy("cuda")
    if gpu.returncode == 2 and "no CUDA" in gpu.stderr:
        print(f"SKIPPED: {gpu.stderr.strip()}")
        sys.exit(77)
    check(gpu.returncode == 0 and gpu_acc, f"cuda train exit {gpu.returncode}: {gpu.stderr}{gpu.stdout}")
    check("backend cuda:" in gpu.stdout, f"the run says it used CUDA:\n{gpu.stdout}")
    cpu, cpu_acc = accuracy("cpu")
    check(cpu.returncode == 0 and cpu_acc, f"cpu train exit {cpu.returncode}: {cpu.stderr}")
    if gpu_acc and cpu_acc:
        a, b = float(gpu_acc.group(1)), float(cpu_acc.group(1))
        check(abs(a - b) <= 0.01, f"GPU accuracy {a} vs CPU {b}")
        check(a > 0.9, f"GPU accuracy {a} <= 0.9")
    finish()


main()
