#!/usr/bin/python3
"""Exports the reference PyTorch models to ONNX, with PyTorch's own results.

Usage: export_models.py OUTDIR [--only NAME,...]    (Debian: python3-torch, python3-torchvision)

For every model NAME it writes, into OUTDIR:

  NAME.onnx                 torch.onnx.export, opset 14, initializers named
                            after the PyTorch parameters (no constant folding)
  NAME/<input>.npy          the inputs used, one file per ONNX graph input
  NAME/<labels>.npy         the targets of the loss
  NAME/expected/<out>.npy   PyTorch's forward output(s), named as evtc writes them
  NAME/expected/loss.npy    the scalar loss
  NAME/expected/grad.<param>.npy   d loss / d param for every parameter
  NAME/expected_f64/...     the same computed by PyTorch in float64 (same
                            parameter values, inputs and labels)
  NAME/meta.json            {"inputs": [...], "outputs": [...], "params": [...],
                             "loss": "mse"|"cross_entropy", "labels": NAME,
                             "evtc_args": [...]}: the arguments after the model
                            file that make `evtc run NAME.onnx ... --grads`
                            compute the same loss

Names are spelled as evtc spells them (characters outside [A-Za-z0-9_.]
become '_').  The loss is PyTorch's mean-reduced mse_loss against a random
target, or cross_entropy against random class labels, matching evtc's
`--loss mse|cross_entropy --labels LABELS`.  Everything is seeded: running
the script twice writes the same files.

Models (shapes kept small, since evtc's reference interpreter is float64):
  mlp               Linear/ReLU/LayerNorm/GELU(erf)/Linear, x [4,16], cross_entropy
  bert_layer        nn.TransformerEncoderLayer, BERT-base size (d 768, 12 heads,
                    ff 3072, GELU), batch 2, seq 16, mse
  tiny_transformer  nn.TransformerEncoderLayer, d 32, 2 heads, ff 64, batch 2, seq 8, mse
  gpt2_block        GPT-2 decoder block (pre-LayerNorm, causal self-attention
                    with a mask, GELU-tanh MLP), d 768, 12 heads, batch 2, seq 16, mse
  resnet18          torchvision resnet18, 10 classes, x [1,3,64,64], cross_entropy;
                    exported in TRAINING mode: BatchNormalization uses the
                    batch statistics (as PyTorch's forward in train mode does)
                    and stays a node, instead of being folded into the
                    convolutions as an EVAL export does, which would rename
                    and change the parameters evtc differentiates
  vit_small         torchvision VisionTransformer, image 32, patch 8, 2 layers,
                    hidden 64, 2 heads, mlp 128, 10 classes, x [2,3,32,32], cross_entropy
Dropout is 0 everywhere, so train and eval mode agree except for BatchNorm.
Every parameter is perturbed by 0.02 N(0,1) after PyTorch's initialisation
(see build()).
"""
import argparse
import copy
import json
import math
import os
import re
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F


def evtc_name(name):
    """The evtc spelling of an ONNX name (evtc_onnx_name_sanitize)."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", name) or "v"


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(torch.relu(self.fc1(x)))))


class GPT2Block(torch.nn.Module):
    """One GPT-2 block: x + attn(ln_1(x)), then + mlp(ln_2(x)); causal mask as a buffer."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(d)
        self.c_attn = torch.nn.Linear(d, 3 * d)
        self.c_proj = torch.nn.Linear(d, d)
        self.ln_2 = torch.nn.LayerNorm(d)
        self.c_fc = torch.nn.Linear(d, 4 * d)
        self.mlp_proj = torch.nn.Linear(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.bias[:, :, :t, :t], float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


def encoder_layer(d, heads, ff):
    return torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True)


def build(name):
    """(model, example input, loss kind, export mode) of one reference model,
    seeded, in its export mode, its parameters perturbed (see below)."""
    torch.manual_seed(0)
    model, x, loss_kind, mode = construct(name)
    model.train(mode == "train")
    # every parameter gets distinct values: the exporter merges initializers
    # with equal contents (LayerNorm weights all ones, biases all zeros), and
    # a merged initializer's gradient is the sum of several parameters'
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model, x, loss_kind, mode


def construct(name):
    if name == "mlp":
        return MLP(), torch.randn(4, 16), "cross_entropy", "eval"
    if name == "bert_layer":
        return encoder_layer(768, 12, 3072), torch.randn(2, 16, 768), "mse", "eval"
    if name == "tiny_transformer":
        return encoder_layer(32, 2, 64), torch.randn(2, 8, 32), "mse", "eval"
    if name == "gpt2_block":
        return GPT2Block(768, 12, 16), torch.randn(2, 16, 768), "mse", "eval"
    import torchvision
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=10), torch.randn(1, 3, 64, 64), "cross_entropy", "train"
    if name == "vit_small":
        m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                 hidden_dim=64, mlp_dim=128, num_classes=10)
        return m, torch.randn(2, 3, 32, 32), "cross_entropy", "eval"
    raise KeyError(name)


MODELS = ["mlp", "bert_layer", "tiny_transformer", "gpt2_block", "resnet18", "vit_small"]


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)


def reference(model, x, labels, loss_kind):
    """PyTorch's output, loss and parameter gradients (in the model's dtype)."""
    params = dict(model.named_parameters())
    out = model(x)
    loss = F.mse_loss(out, labels) if loss_kind == "mse" else F.cross_entropy(out, labels)
    grads = torch.autograd.grad(loss, list(params.values()))
    results = {"y": out, "loss": loss}
    results.update(("grad." + evtc_name(p), g) for p, g in zip(params, grads))
    return {k: v.detach().numpy() for k, v in results.items()}


def export(name, outdir):
    model, x, loss_kind, mode = build(name)
    path = os.path.join(outdir, name + ".onnx")
    training = torch.onnx.TrainingMode.TRAINING if mode == "train" else torch.onnx.TrainingMode.EVAL
    with torch.no_grad():
        shape = model(x).shape
    if loss_kind == "mse":
        labels = torch.randn(shape)
    else:
        labels = torch.randint(0, shape[-1], shape[:-1])
    # PyTorch's results, in float32 and float64, from copies: a train-mode
    # forward updates BatchNorm's running statistics
    expected = reference(copy.deepcopy(model), x, labels, loss_kind)
    expected64 = reference(copy.deepcopy(model).double(), x.double(),
                           labels.double() if loss_kind == "mse" else labels, loss_kind)
    # grad mode stays on: in eval mode under no_grad, TransformerEncoderLayer
    # takes its fused fast path, which has no ONNX export
    torch.onnx.export(copy.deepcopy(model), (x,), path, input_names=["x"], output_names=["y"], opset_version=14,
                      training=training, do_constant_folding=False)
    d = os.path.join(outdir, name)
    save(os.path.join(d, "x.npy"), x.numpy())
    save(os.path.join(d, "labels.npy"), labels.numpy())
    for sub, results in (("expected", expected), ("expected_f64", expected64)):
        for k, v in results.items():
            save(os.path.join(d, sub, k + ".npy"), v)
    params = [evtc_name(p) for p, _ in model.named_parameters()]
    meta = {"inputs": ["x", "labels"], "outputs": ["y"], "params": params,
            "loss": loss_kind, "labels": "labels", "export_mode": mode,
            "evtc_args": ["--loss", loss_kind, "--labels", "labels"]}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    n = sum(p.numel() for p in model.parameters())
    print("%-17s %s  %d parameters, loss %.6g" % (name, path, n, float(expected["loss"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all): " + ",".join(MODELS))
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or MODELS
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error("unknown model(s) %s; known: %s" % (",".join(unknown), ",".join(MODELS)))
    os.makedirs(a.outdir, exist_ok=True)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")        # the exporter's notes on in-place ops and asserts
    for n in names:
        export(n, a.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
