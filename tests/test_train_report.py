"""test_train_report.py -- bench/train_report.py on results written here (no torch, no GPU).

One model's results as bench/train.sh leaves them: `evtc train`'s output
(four losses, 74.2 ms a step) and train_torch.py's JSON (eager and
max-autotune with their losses and times, compile failed, the step's FLOP
and the matmul ceiling).  Checks the loss check (PASS within the bf16
tolerance; FAIL once a loss is off by more), the ratios PyTorch / evtc in the
first table, and the second table's TFLOP/s and fractions of the ceiling:
3.5e13 FLOP in 74.2 ms is 472 TFLOP/s, 65 % of 730.  Without the FLOP count
(a torch before 2.1) that table says "-".  Two runs' results (bench/train_pair.sh
splits a model's modes over calls): evtc and the ceiling from the first, each
mode from the run where it ran.
Usage: test_train_report.py SOURCE_DIR EVTC_BINARY
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from evtc_testlib import SRC, check, finish

EVTC_OUT = """epoch 1/4 loss 10.5000 steps/s 13.1
epoch 2/4 loss 10.4375 steps/s 13.4
epoch 3/4 loss 10.3750 steps/s 13.4
epoch 4/4 loss 10.2500 steps/s 13.4
backend cuda: 673 kernels per step (0 in the interpreter, 0 planned kernels split), partitioner ilp, 13.4 steps/s
time to first step: 25.000 s (import 6.000 s, setup 18.900 s, first step 0.100 s)
steady step: 74.200 ms (median of the 3 steps after the first)
buffer memory: 14798.1 MiB (arena 13519.2 MiB, leaves and outputs 1278.9 MiB)
"""


def torch_json(flop, ceiling, eager_losses):
    mode = lambda losses, ms, compile_s: {"losses": losses, "step_ms": ms, "first_step_s": compile_s + ms / 1e3,
                                          "compile_s": compile_s, "peak_mib": 15000.0, "error": None}
    return {"model": "bert_large", "step_flop": flop, "matmul_tflops": ceiling,
            "modes": {"eager": mode(eager_losses, 91.0, 1.0), "compile": {"error": "compile failed: out of memory"},
                      "max-autotune": mode([10.5, 10.4375, 10.375, 10.25], 76.0, 440.0)}}


def write_run(d, evtc_out, torch):
    """One run's results of bert_large in d, as bench/train.sh leaves them."""
    with open(os.path.join(d, "bert_large.evtc.out"), "w") as f:
        f.write(evtc_out)
    open(os.path.join(d, "bert_large.evtc.err"), "w").close()
    with open(os.path.join(d, "bert_large.evtc.rc"), "w") as f:
        f.write("0\n")
    with open(os.path.join(d, "bert_large.torch.json"), "w") as f:
        json.dump(torch, f)


def run_report(*dirs):
    r = subprocess.run([sys.executable, os.path.join(SRC, "bench", "train_report.py"), *dirs, "--models", "bert_large"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"train_report.py exit {r.returncode}: {r.stderr[-1500:]}")
    return r.stdout


def report(tmp, flop, ceiling, eager_losses):
    write_run(tmp, EVTC_OUT, torch_json(flop, ceiling, eager_losses))
    return run_report(tmp)


def row(out, n):
    """The cells of the n-th table row of bert_large (0: ms/step table, 1: FLOP table)."""
    rows = [line for line in out.splitlines() if line.startswith("| bert_large |")]
    if not check(len(rows) == 2, f"two table rows for bert_large:\n{out}"):
        return [""] * 12
    return [c.strip() for c in rows[n].strip("|").split("|")]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = report(tmp, 3.5e13, 730.0, [10.5, 10.4375, 10.375, 10.25])
        check(re.search(r"losses: PASS vs eager", out), f"the losses agree:\n{out}")
        check("compile failed: out of memory" in out, f"the failed mode is named:\n{out}")
        cells = row(out, 0)
        check(cells[1:5] == ["74.20", "91.00", "-", "76.00"], f"ms/step cells: {cells}")
        check(cells[5:8] == ["1.23x", "-", "1.02x"], f"ratios PyTorch / evtc: {cells}")
        check(cells[-1] == "PASS vs eager", f"loss column: {cells}")
        flop = row(out, 1)
        check(flop[1:3] == ["35.00", "730"], f"FLOP a step and the ceiling: {flop}")
        check(flop[3] == "472 (65%)", f"evtc's TFLOP/s and share of the ceiling: {flop}")
        check(flop[4:] == ["385 (53%)", "-", "461 (63%)"], f"PyTorch's: {flop}")

        out = report(tmp, None, None, [10.5, 10.4375, 10.375, 10.0])
        check(re.search(r"losses: FAIL vs eager .*first off at step 4", out), f"a loss off at step 4:\n{out}")
        flop = row(out, 1)
        check(flop[1:] == ["-", "-", "-", "-", "-", "-"], f"no FLOP count: every cell '-': {flop}")

    # two runs on one machine (bench/train_pair.sh): eager and compile in the first, max-autotune timed out there
    # and ran in the second, which has its own evtc step and ceiling; evtc and the ceiling come from the first,
    # each mode from the run where it ran
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        losses = [10.5, 10.4375, 10.375, 10.25]
        first = torch_json(3.5e13, 730.0, losses)
        first["modes"]["compile"] = dict(first["modes"]["eager"], step_ms=80.0)
        first["modes"]["max-autotune"] = {"error": "timed out"}     # tried in the first, run in the second
        second = torch_json(3.5e13, 700.0, losses)
        del second["modes"]["eager"]
        write_run(a, EVTC_OUT, first)
        write_run(b, EVTC_OUT.replace("74.200 ms", "75.000 ms"), second)
        out = run_report(a, b)
        check(re.search(r"PyTorch eager compile from .*, max-autotune from ", out), f"each mode's run named:\n{out}")
        cells = row(out, 0)
        check(cells[1:8] == ["74.20", "91.00", "80.00", "76.00", "1.23x", "1.08x", "1.02x"],
              f"evtc from the first run, each mode once: {cells}")
        check(row(out, 1)[2] == "730", f"the ceiling from the first run: {row(out, 1)}")
    finish()


if __name__ == "__main__":
    main()
