"""test_train_only.py -- bench/train.sh run --only evtc|torch, on stand-ins.

train.sh runs on the GPU machine with PyTorch; here its Python and evtc are
stand-in scripts that record that they ran and write what train.sh and
train_report.py read (the export, `evtc train`'s lines, train_torch.py's
JSON), so that only the script's own logic is under test: --only torch runs
the PyTorch phase and leaves no NAME.evtc.rc (train_report.py then takes
evtc from another run's folder), --only evtc runs evtc alone, neither runs
both, and any other value is refused.  The report is the real
train_report.py, joining an --only evtc folder and an --only torch one the
way the script's header says.
Usage: test_train_only.py SOURCE_DIR EVTC_BINARY
"""
import os
import subprocess
import sys
import tarfile
import tempfile

from evtc_testlib import SRC, check, finish

PY_STUB = r'''#!/bin/sh
# stands in for python3 in bench/train.sh: records each script it was asked to run
echo "$*" >>"$STUB_LOG"
case "$1" in
  -c) echo "torch stand-in"; exit 0 ;;
  bench/train_models.py) echo "exported"; exit 0 ;;
  bench/train_torch.py)
    while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
    cat >"$out" <<'JSON'
{"modes": {"eager": {"losses": [2.5, 2.25], "step_ms": 20.0, "first_step_s": 0.5, "compile_s": 0.48,
                     "peak_mib": 100.0, "error": null}},
 "step_flop": 1e12, "matmul_tflops": 500.0}
JSON
    echo "PyTorch stand-in"; exit 0 ;;
  bench/train_report.py) shift; exec "$REAL_PYTHON" "$SRC_DIR/bench/train_report.py" "$@" ;;
esac
exit 3
'''

EVTC_STUB = r'''#!/bin/sh
# stands in for evtc in bench/train.sh
echo "evtc $*" >>"$STUB_LOG"
echo "epoch 1/2 loss 2.5 steps/s 10"
echo "epoch 2/2 loss 2.25 steps/s 10"
echo "time to first step: 1.5 s (import 0.5 s, setup 0.9 s, first step 0.1 s)"
echo "steady step: 10.0 ms (median)"
'''


def run(tmp, only, out):
    env = dict(os.environ, PYTHON=os.path.join(tmp, "python"), EVTC=os.path.join(tmp, "evtc"), OUT=out,
               EVTC_TRAIN_WORK=os.path.join(tmp, "work"), STUB_LOG=os.path.join(tmp, "log"), REAL_PYTHON=sys.executable,
               SRC_DIR=SRC, XDG_CACHE_HOME=os.path.join(tmp, "cache"))
    open(env["STUB_LOG"], "w").close()
    args = ["sh", "bench/train.sh", "run", "--models", "m", "--steps", "2", "--modes", "eager", "--deadline", "100"]
    r = subprocess.run(args + (["--only", only] if only else []), cwd=SRC, env=env, capture_output=True, text=True,
                       timeout=120)
    log = open(env["STUB_LOG"]).read()
    return r, log


def logs(out):
    """The files in the run's train-logs.tgz (train.sh packs them and removes them from OUT), by name: their text;
    each is also written back into OUT, for train_report.py."""
    path = os.path.join(out, "train-logs.tgz")
    if not os.path.exists(path):
        return {}
    files = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if m.isfile():
                data = t.extractfile(m).read()
                with open(os.path.join(out, os.path.basename(m.name)), "wb") as f:
                    f.write(data)
                files[m.name] = data.decode(errors="replace")
    return files


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("python", PY_STUB), ("evtc", EVTC_STUB)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(tmp, name), 0o755)

        out_t = os.path.join(tmp, "out-torch")
        r, log = run(tmp, "torch", out_t)
        names = logs(out_t)
        check(r.returncode == 0, f"--only torch: exit {r.returncode}: {r.stderr[-400:]}")
        check("bench/train_torch.py" in log and "evtc train" not in log, f"--only torch ran: {log}")
        check("m.torch.json" in names and "m.evtc.rc" not in names and "m.evtc.err" in names,
              f"--only torch left {sorted(names)}")
        check("--only torch" in names.get("m.evtc.err", ""), f"--only torch: evtc's note: {names.get('m.evtc.err')!r}")

        out_e = os.path.join(tmp, "out-evtc")
        r, log = run(tmp, "evtc", out_e)
        names = logs(out_e)
        check(r.returncode == 0, f"--only evtc: exit {r.returncode}: {r.stderr[-400:]}")
        check("evtc train" in log and "bench/train_torch.py" not in log, f"--only evtc ran: {log}")
        check("m.evtc.rc" in names and "m.torch.json" not in names, f"--only evtc left {sorted(names)}")

        joined = subprocess.run([sys.executable, os.path.join(SRC, "bench", "train_report.py"), out_e, out_t,
                                 "--models", "m"], capture_output=True, text=True, timeout=60)
        row = [l for l in joined.stdout.splitlines() if l.startswith("| m |")]
        check(joined.returncode == 0 and row and "10.00" in row[0] and "20.00" in row[0] and "2.00x" in row[0],
              f"the two folders joined: {row or joined.stdout[-600:] + joined.stderr[-300:]}")
        check("PASS" in joined.stdout, f"losses checked across the folders: {joined.stdout[-600:]}")

        r, log = run(tmp, None, os.path.join(tmp, "out-both"))
        check(r.returncode == 0 and "evtc train" in log and "bench/train_torch.py" in log, f"both phases: {log}")

        r, _ = run(tmp, "gpu", os.path.join(tmp, "out-bad"))
        check(r.returncode == 2 and "--only takes evtc or torch" in r.stderr, f"--only gpu: {r.returncode} {r.stderr}")
    finish()


if __name__ == "__main__":
    main()
