#!/usr/bin/python3
"""Fusion partitioners on the joint graphs of the test models: the figures
of docs/fusion.md.

Usage: fusion_report.py EVTC MODELS_DIR [--targets h200,cpu] [--check]

MODELS_DIR holds the ONNX exports of tools/export_models.py (NAME.onnx and
NAME/meta.json, whose evtc_args give the loss).  For examples/mlp.evt and
each exported model it runs
  evtc explain MODEL --train --target T --partitioner none,greedy,ilp --no-cache
(the joint graph after the target's default pass pipeline) and prints one
Markdown table per target: nodes; kernels, modelled time and bytes for
none / greedy / ILP; the ILP's candidates, solve time and gap.  --check
exits 1 when a run fails, the ILP is slower than greedy, or a plan is not
proven optimal.
"""
import json
import os
import re
import subprocess
import sys
import time

ORDER = ["mlp", "tiny_transformer", "bert_layer", "gpt2_block", "vit_small", "resnet18"]


def run(evtc, model, extra, target):
    t = time.time()
    r = subprocess.run([evtc, "explain", model, *extra, "--train", "--target", target,
                        "--partitioner", "none,greedy,ilp", "--no-cache"], capture_output=True, text=True)
    wall = time.time() - t
    if r.returncode != 0:
        return None, r.stderr.strip()
    out = r.stdout
    row = {"nodes": int(re.search(r"^graph \S+: (\d+) nodes", out, re.M).group(1)), "wall": wall,
           "warn": "WARNING" in out}
    for m in re.finditer(r"^kernels: (\d+) modelled_us: ([0-9.]+) bytes: (\d+) \((\w+)\)$", out, re.M):
        row[m.group(4)] = (int(m.group(1)), float(m.group(2)), int(m.group(3)))
    m = re.search(r"^ilp: components=(\d+) objective=([0-9.]+) bound=([0-9.]+) gap=([0-9.]+) time=([0-9.]+) s", out, re.M)
    row.update(components=int(m.group(1)), gap=float(m.group(4)), time=float(m.group(5)))
    m = re.search(r"^ilp-detail: candidates=(\d+) cuts=(\d+) solves=(\d+) enumerate=([0-9.]+) s max_solve=([0-9.]+) s",
                  out, re.M)
    row.update(candidates=int(m.group(1)), cuts=int(m.group(2)), max_solve=float(m.group(5)))
    row["truncated"] = "candidate budget" in out
    return row, None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    evtc, models_dir = args
    targets = ["h200", "cpu"]
    for a in sys.argv[1:]:
        if a.startswith("--targets="):
            targets = a.split("=", 1)[1].split(",")
    check = "--check" in sys.argv
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    models = [("mlp.evt", os.path.join(src, "examples", "mlp.evt"), [])]
    for name in ORDER:
        path = os.path.join(models_dir, name + ".onnx")
        if os.path.exists(path):
            meta = json.load(open(os.path.join(models_dir, name, "meta.json")))
            models.append((name + ".onnx", path, [a for a in meta["evtc_args"] if a != "--grads"]))
    bad = 0
    for target in targets:
        print(f"\n### target {target}\n")
        print("| model | nodes | kernels none / greedy / ILP | modelled us none / greedy / ILP | "
              "MB moved none / greedy / ILP | ILP vs greedy | components | candidates | cuts | "
              "ILP time s (max solve) | gap |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for label, path, extra in models:
            row, err = run(evtc, path, extra, target)
            if row is None:
                print(f"| {label} | failed: {err} |")
                bad += 1
                continue
            n, g, i = row["none"], row["greedy"], row["ilp"]
            note = (" (truncated)" if row["truncated"] else "") + (" (FALLBACK)" if row["warn"] else "")
            print(f"| {label} | {row['nodes']} | {n[0]} / {g[0]} / {i[0]} | {n[1]:.1f} / {g[1]:.1f} / {i[1]:.1f} | "
                  f"{n[2] / 1e6:.2f} / {g[2] / 1e6:.2f} / {i[2] / 1e6:.2f} | {100 * (1 - i[1] / g[1]):.1f}% faster | "
                  f"{row['components']} | {row['candidates']} | {row['cuts']} | "
                  f"{row['time']:.2f} ({row['max_solve']:.2f}) | {row['gap']:g}{note} |")
            if i[1] > g[1] + 1e-6 or row["warn"] or row["gap"] > 0:
                bad += 1
    if check and bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
