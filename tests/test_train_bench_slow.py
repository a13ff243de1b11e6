"""test_train_bench_slow.py -- bench/train.sh end to end at small scale on the CPU.

Runs `bench/train.sh run --scale small --backend cpu --modes eager --steps 4
--profile 1` (every model: the ONNX export, `evtc train --backend cpu`, the
step's profile by `evtc explain --profile`, PyTorch eager, the report) into
a temporary directory (kernels cached beside the evtc binary, in
train-bench-cache/) and checks that each model's losses agree with
PyTorch's step by step (the report's PASS), that the table lists every
model with an evtc time, that each model's profile totals and memory peak
are in the log, and that nothing failed.  Without a python3
that imports torch it prints SKIPPED and exits 77.
Usage: test_train_bench_slow.py SOURCE_DIR EVTC_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

from evtc_testlib import EVTC, SRC, check, finish

MODELS = ["gpt2", "bert_large", "vit_b16"]


def main():
    if not any(subprocess.run([p, "-c", "import torch"], capture_output=True).returncode == 0
               for p in ("python3", "/usr/bin/python3")):
        print("SKIPPED: no python3 with torch")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, EVTC=os.path.abspath(EVTC), OUT=os.path.join(tmp, "out"),
                   EVTC_TRAIN_WORK=os.path.join(tmp, "work"), OMP_NUM_THREADS="1",
                   XDG_CACHE_HOME=os.path.join(os.path.dirname(os.path.abspath(EVTC)), "train-bench-cache"))
        r = subprocess.run(["sh", "bench/train.sh", "run", "--scale", "small", "--backend", "cpu", "--modes", "eager",
                            "--steps", "4", "--profile", "1"], cwd=SRC, env=env, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        check(r.returncode == 0, f"train.sh exit {r.returncode}:\n{out[-3000:]}")
        check(out.count("losses: PASS vs eager") == len(MODELS), f"a model's losses disagree:\n{out[-3000:]}")
        check("FAIL" not in out and "failed" not in out, f"a failure:\n{out[-3000:]}")
        for m in MODELS:
            check(re.search(r"^\| %s \| [0-9.]+ \| [0-9.]+ \|" % m, out, re.M), f"no table row for {m}:\n{out[-2000:]}")
            check(re.search(r"^== %s: profile: exit 0 " % m, out, re.M), f"{m}: the profile did not run:\n{out[-2000:]}")
        check(len(re.findall(r"^profile: plan kernels \d+, program kernels \d+ ", out, re.M)) == len(MODELS) and
              len(re.findall(r"^memory peak: [0-9.]+ MiB of \d+ values", out, re.M)) == len(MODELS) and
              len(re.findall(r"^profile by kind \(program kernels, measured us, modelled us\):( \w+ \d+ [0-9.]+ [0-9.]+;)+$", out,
                         re.M)) == len(MODELS),
              f"the profiles' totals, memory peaks or per-kind times are missing:\n{out[-3000:]}")
        check(os.path.exists(os.path.join(tmp, "out", "train.log")), "no train.log in $OUT")
    finish()


if __name__ == "__main__":
    main()
