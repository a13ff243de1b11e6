#!/usr/bin/python3
"""train_report.py -- the table and chart of the training benchmark (bench/train.sh).

Usage: train_report.py RESULTS_DIR [RESULTS_DIR...] --models gpt2,bert_large[,...] [--png PATH]

Reads, per model NAME, what bench/train.sh left in RESULTS_DIR:
  NAME.evtc.out / NAME.evtc.err / NAME.evtc.rc   `evtc train`'s stdout, stderr, exit code
  NAME.torch.json                                bench/train_torch.py's results
and prints, per model, the losses of evtc and of every PyTorch mode, step by
step, and the check: evtc's loss at every step within the bf16 tolerance of
PyTorch eager's (or of the first PyTorch mode that ran), PASS or FAIL; then
one markdown table, last: ms/step of evtc and of each PyTorch mode, the
ratios peer/evtc (> 1: evtc is faster), compile times (first step minus
steady step; evtc's first step counts from the start of the import) and
peak memory (evtc: its program's buffers; PyTorch: max_memory_allocated).
A model that failed in evtc gets the first line of its error in the table
(the PyTorch columns still filled).  With matplotlib, a PNG bar chart of the
ratios (--png); without, a line that says so.  Several RESULTS_DIRs: runs on
one machine (bench/train_pair.sh splits a model's modes over calls): evtc
from the first that ran the model, each PyTorch mode from the first where it
ran (a failed try only when no run has it), the FLOP ceiling from the first
of those that ran PyTorch at all.

Tolerance: |evtc - reference| <= RTOL |reference| + ATOL at every step,
RTOL = 2^-6 (about 2-4 bf16 ulps of the loss: both losses are bf16 values,
computed by different kernels from bf16 weights that drift apart by last-bit
roundings step after step), ATOL = 0.01 (losses near zero).
"""
import argparse
import json
import math
import os
import re
import sys

RTOL, ATOL = 2.0 ** -6, 0.01
PEERS = ["eager", "compile", "max-autotune"]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def first_error(err, out, rc):
    """The first line that says what went wrong in an evtc run."""
    for line in (err or "").splitlines() + (out or "").splitlines():
        if line.startswith("evtc: "):
            return line[len("evtc: "):].strip()
    if rc in (124, 137):
        return "timed out (exit %d)" % rc
    lines = [l for l in (err or "").splitlines() if l.strip()]
    return (lines[-1].strip() if lines else "no output") + (" (exit %s)" % rc if rc is not None else "")


def parse_evtc(d, name):
    """evtc's result: losses, step_ms, first_s, compile_s, mem_mib, kernels, interpreted, error."""
    out, err = read(os.path.join(d, name + ".evtc.out")), read(os.path.join(d, name + ".evtc.err"))
    rc_text = read(os.path.join(d, name + ".evtc.rc"))
    rc = int(rc_text) if rc_text and rc_text.strip().lstrip("-").isdigit() else None
    if out is None:
        return {"error": first_error(err, out, rc) if err else "not run"}
    r = {"losses": [float(v) for v in re.findall(r"^epoch \d+/\d+ loss (\S+) steps/s", out, re.M)]}
    m = re.search(r"^time to first step: (\S+) s \(import (\S+) s, setup (\S+) s, first step (\S+) s\)", out, re.M)
    s = re.search(r"^steady step: (\S+) ms", out, re.M)
    mem = re.search(r"^buffer memory: (\S+) MiB", out, re.M)
    k = re.search(r"^backend \S+: (\d+) kernels per step \((\d+) in the interpreter", out, re.M)
    r["step_ms"] = float(s.group(1)) if s else None
    r["first_s"] = float(m.group(1)) if m else None
    r["compile_s"] = max(0.0, r["first_s"] - (r["step_ms"] or 0) / 1e3) if m else None
    r["mem_mib"] = float(mem.group(1)) if mem else None
    r["kernels"], r["interpreted"] = (int(k.group(1)), int(k.group(2))) if k else (None, None)
    r["error"] = None if rc == 0 and r["losses"] and m else first_error(err, out, rc)
    return r


def parse_torch(d, name):
    text = read(os.path.join(d, name + ".torch.json"))
    if text is None:
        return {"error": "PyTorch did not run (see %s.torch.log)" % name, "modes": {}}
    try:
        return json.loads(text)
    except ValueError as e:
        return {"error": "unreadable results: %s" % e, "modes": {}}


def evtc_dir(dirs, name):
    """The first of dirs where evtc ran model `name` (train.sh wrote its exit code), else the first."""
    return next((d for d in dirs if os.path.exists(os.path.join(d, name + ".evtc.rc"))), dirs[0])


def parse_torch_runs(dirs, name, first):
    """PyTorch's results of model `name` over the runs in dirs, `first` read first: each mode from the first run
    where it ran (else from the first that tried it); the run-wide fields (the step's FLOP, the matrix ceiling)
    from the first run that ran PyTorch.  Returns (results, [(dir, [modes]) for each run that gave modes])."""
    runs = [(d, parse_torch(d, name)) for d in [first] + [d for d in dirs if d != first]]
    ran = [t for _, t in runs if not t.get("error")]
    merged = dict(ran[0] if ran else runs[0][1])
    merged["modes"], source = {}, {}
    for failed_too in (False, True):
        for d, t in runs:
            for m, r in t.get("modes", {}).items():
                if m in PEERS and m not in merged["modes"] and (failed_too or not r.get("error")):
                    merged["modes"][m], source[m] = r, d
    sources = [(d, [m for m in PEERS if source.get(m) == d]) for d, _ in runs]
    return merged, [(d, ms) for d, ms in sources if ms]


def compare(evtc_losses, ref):
    """(ok, worst deviation as a fraction of the tolerance, first failing step or None)."""
    if not evtc_losses or not ref or len(evtc_losses) != len(ref):
        return False, float("nan"), None
    worst, bad = 0.0, None
    for i, (a, b) in enumerate(zip(evtc_losses, ref)):
        share = abs(a - b) / (RTOL * abs(b) + ATOL)
        worst = max(worst, share)
        if not share <= 1 and bad is None:
            bad = i + 1
    return bad is None, worst, bad


def fmt(v, spec="%.2f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec % v


def model_rows(dirs, name):
    """Prints the model's losses and check; returns its table row and its ratios {mode: x}."""
    d = evtc_dir(dirs, name)
    e = parse_evtc(d, name)
    t, sources = parse_torch_runs(dirs, name, d)
    modes = t.get("modes", {})
    ok_modes = [m for m in PEERS if m in modes and not modes[m].get("error")]
    print("== %s" % name)
    if len(dirs) > 1:
        print("  evtc from %s; PyTorch %s" % (d, ", ".join("%s from %s" % (" ".join(ms), sd) for sd, ms in sources)))
    if e.get("losses"):
        print("  %-12s %s" % ("evtc", " ".join("%.4f" % v for v in e["losses"])))
    for m in ok_modes:
        print("  %-12s %s" % (m, " ".join("%.4f" % v for v in modes[m]["losses"])))
    for m in PEERS:
        if m in modes and modes[m].get("error"):
            print("  %-12s %s" % (m, modes[m]["error"]))
    if t.get("error"):
        print("  PyTorch: %s" % t["error"])
    ref_mode = ok_modes[0] if ok_modes else None
    if e.get("error"):
        check = "no check (evtc failed)"
        print("  evtc FAILED: %s" % e["error"])
    elif not ref_mode:
        check = "no check (no PyTorch losses)"
    else:
        ok, worst, bad = compare(e["losses"], modes[ref_mode]["losses"])
        check = "%s vs %s (worst step at %.0f%% of the tolerance%s)" % (
            "PASS" if ok else "FAIL", ref_mode, 100 * worst, "" if ok else ", first off at step %d" % bad)
        for m in ok_modes[1:]:
            _, w, _ = compare(modes[m]["losses"], modes[ref_mode]["losses"])
            print("  %s vs %s: worst step at %.0f%% of the tolerance" % (m, ref_mode, 100 * w))
    print("  losses: %s" % check)
    ev_ms = None if e.get("error") else e.get("step_ms")
    ratios = {m: modes[m]["step_ms"] / ev_ms for m in ok_modes if ev_ms}
    ms = [fmt(modes[m]["step_ms"]) if m in ok_modes else "-" for m in PEERS]
    comp = [fmt(modes[m]["compile_s"], "%.1f") if m in ok_modes else "-" for m in PEERS]
    gib = lambda mib: None if mib is None else mib / 1024
    mem = [fmt(gib(modes[m].get("peak_mib")), "%.2f") if m in ok_modes else "-" for m in PEERS]
    evtc_cells = ([fmt(ev_ms), fmt(e.get("compile_s"), "%.1f"), fmt(gib(e.get("mem_mib")), "%.2f")]
                  if not e.get("error") else ["failed: " + e["error"][:120], "-", "-"])
    flop, ceiling = t.get("step_flop"), t.get("matmul_tflops")
    rate = lambda step_ms: None if not (flop and step_ms) else flop / (step_ms / 1e3) / 1e12
    share = lambda step_ms: (fmt(rate(step_ms), "%.0f") + ("" if not (ceiling and rate(step_ms)) else
                             " (%.0f%%)" % (100 * rate(step_ms) / ceiling)))
    flop_row = [name, fmt(flop and flop / 1e12, "%.2f"), fmt(ceiling, "%.0f"), share(ev_ms)] + \
               [share(modes[m]["step_ms"]) if m in ok_modes else "-" for m in PEERS]
    row = [name, evtc_cells[0]] + ms + [fmt(ratios.get(m), "%.2fx") for m in PEERS] + \
          [evtc_cells[1] + " / " + " / ".join(comp), evtc_cells[2] + " / " + " / ".join(mem), check.split(" (")[0]]
    return row, flop_row, ratios


def chart(path, all_ratios):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG chart: matplotlib is not importable here")
        return
    names = [n for n in all_ratios if all_ratios[n]]
    if not names:
        print("no PNG chart: no model has both an evtc and a PyTorch time")
        return
    peers = [m for m in PEERS if any(m in all_ratios[n] for n in names)]
    fig, ax = plt.subplots(figsize=(2 + 2.2 * len(names), 4))
    width = 0.8 / len(peers)
    for j, m in enumerate(peers):
        xs = [i + (j - (len(peers) - 1) / 2) * width for i in range(len(names))]
        ys = [all_ratios[n].get(m, 0) for n in names]
        bars = ax.bar(xs, ys, width, label="PyTorch " + m)
        for b, y in zip(bars, ys):
            if y:
                ax.text(b.get_x() + b.get_width() / 2, y, "%.2f" % y, ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("PyTorch ms/step / evtc ms/step")
    ax.set_title("Training step time ratio (> 1: evtc faster)")
    tallest = max([y for n in names for y in all_ratios[n].values()] + [1.0])
    ax.set_ylim(0, tallest * 1.3)      # room above the bars for their labels and the legend
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("chart: %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results_dir", nargs="+",
                    help="one run's results; several: runs of the same models on one machine (bench/train_pair.sh "
                         "splits a model's modes over calls), evtc from the first that ran it, each PyTorch mode "
                         "from the first where it ran")
    ap.add_argument("--models", required=True)
    ap.add_argument("--png")
    a = ap.parse_args()
    rows, flop_rows, all_ratios = [], [], {}
    for name in [n for n in a.models.split(",") if n]:
        row, flop_row, all_ratios[name] = model_rows(a.results_dir, name)
        rows.append(row)
        flop_rows.append(flop_row)
    if a.png:
        chart(a.png, all_ratios)
    print("\nms/step: median of the steps after the first; ratio: PyTorch / evtc (> 1: evtc faster); compile s:\n"
          "first step minus steady step (evtc: from the start of its import); peak GiB: evtc's program buffers,\n"
          "PyTorch's max_memory_allocated; losses within |d| <= 2^-6 |ref| + 0.01 at every step.\n")
    head = ["model", "evtc ms", "eager ms", "compile ms", "max-autotune ms", "eager/evtc", "compile/evtc",
            "max-autotune/evtc", "compile s evtc / eager / compile / max-at",
            "peak GiB evtc / eager / compile / max-at", "losses"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\nTFLOP/s: the step's FLOP (forward + backward, torch.utils.flop_counter on the eager model) over its\n"
          "ms/step; in brackets the fraction of the matrix ceiling measured in the same run (bf16 8192^3 matmul).\n")
    head = ["model", "TFLOP a step", "ceiling TFLOP/s", "evtc", "eager", "compile", "max-autotune"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in flop_rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
