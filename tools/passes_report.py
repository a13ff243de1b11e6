#!/usr/bin/python3
"""passes_report.py -- node counts of the test models' joint graphs, pass by pass.

Usage: tools/passes_report.py EVTC MODELDIR [--pipeline NAME] [--export]

EVTC is the evtc binary; MODELDIR holds NAME.onnx and NAME/meta.json as
written by tools/export_models.py (with --export this script runs the
export first, for the models that are missing).  For each model it builds
the joint training graph (`evtc opt FILE --train`, sgd, with the model's
loss arguments from meta.json) and runs the named pipeline (default: h200)
with --print-stats, then prints Markdown tables to stdout: nodes after each
pass, and kernels_lower_bound after each pass (definition: docs/passes.md).
The MLP is examples/mlp.evt of this repository.  A model that fails to
export or to compile is listed with the reason instead of numbers.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (row label, model name in MODELDIR, or a path of this repository)
MODELS = [
    ("MLP (examples/mlp.evt)", "examples/mlp.evt"),
    ("BERT-base encoder layer", "bert_layer"),
    ("GPT-2 block", "gpt2_block"),
    ("ResNet-18", "resnet18"),
    ("ViT (small)", "vit_small"),
]
STAT = re.compile(r"^(input|pass (\S+)): nodes=(\d+) kernels_lower_bound=(\d+)$")


def model_command(name, modeldir):
    """The model file and extra `evtc opt` arguments for a model, or a reason."""
    if name.endswith(".evt"):
        return os.path.join(ROOT, name), []
    path = os.path.join(modeldir, name + ".onnx")
    if not os.path.exists(path):
        return None, f"{name}.onnx not exported"
    with open(os.path.join(modeldir, name, "meta.json")) as f:
        return path, json.load(f).get("evtc_args", [])


def stats(evtc, path, args, pipeline):
    """[(label, nodes, bound)] from `evtc opt --print-stats`, or a reason string."""
    cmd = [evtc, "opt", path, "--train", "--pipeline", pipeline, "--print-stats", "-o", os.devnull] + args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    rows = []
    for line in proc.stderr.splitlines():
        m = STAT.match(line)
        if m:
            rows.append((m.group(2) or "joint graph", int(m.group(3)), int(m.group(4))))
    return rows


def table(results, column, title):
    """A Markdown table: one row per model, one column per pipeline step."""
    steps = next((r for _, r in results if isinstance(r, list)), None)
    if steps is None:
        return f"{title}: no model compiled.\n"
    head = [s[0] for s in steps]
    out = [f"**{title}**", "", "| model | " + " | ".join(head) + " | final |",
           "|---" * (len(head) + 2) + "|"]
    for label, r in results:
        if isinstance(r, list):
            vals = [str(s[column]) for s in r]
            out.append(f"| {label} | " + " | ".join(vals) + f" | **{vals[-1]}** |")
        else:
            out.append(f"| {label} | " + " | ".join(["—"] * len(head)) + f" | {r} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("evtc")
    ap.add_argument("modeldir")
    ap.add_argument("--pipeline", default="h200")
    ap.add_argument("--export", action="store_true", help="export missing models first")
    a = ap.parse_args()
    missing = [n for _, n in MODELS if not n.endswith(".evt") and not os.path.exists(os.path.join(a.modeldir, n + ".onnx"))]
    if a.export and missing:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_models.py"), a.modeldir,
                        "--only", ",".join(missing)], check=False)
    results = []
    for label, name in MODELS:
        path, args = model_command(name, a.modeldir)
        results.append((label, stats(a.evtc, path, args, a.pipeline) if path else args))
    print(f"Pipeline `{a.pipeline}` on the joint graphs (`evtc opt FILE --train`, sgd).\n")
    print(table(results, 1, "Nodes after each pass"))
    print(table(results, 2, "kernels_lower_bound after each pass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
