"""test_bench_scripts.py -- every bench/*.sh parses (`sh -n`).

The benchmark scripts run only on the GPU machine, so a syntax error there
is found only after device time is spent on it (bench/gpu_attention.sh had
an apostrophe in a comment inside its single-quoted awk program).  Each
script must parse, and each must still be found (at least the scripts the
README names).
Usage: test_bench_scripts.py SOURCE_DIR EVTC_BINARY
"""
import glob
import os
import subprocess

from evtc_testlib import SRC, check, finish


def main():
    scripts = sorted(glob.glob(os.path.join(SRC, "bench", "*.sh")))
    names = {os.path.basename(s) for s in scripts}
    check({"gpu.sh", "gpu_gemm.sh", "train.sh", "gpu_attention.sh", "cpu.sh"} <= names, f"bench scripts found: {names}")
    for s in scripts:
        r = subprocess.run(["sh", "-n", s], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, f"{os.path.basename(s)} does not parse: {r.stderr.strip()}")
    finish()


if __name__ == "__main__":
    main()
