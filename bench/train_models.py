#!/usr/bin/python3
"""train_models.py -- the whole models of the training benchmark (bench/train.sh).

Usage: train_models.py OUTDIR [--models gpt2,bert_large,vit_b16] [--scale full|small]

Writes, for every model NAME, the model as ONNX (opset 17) and one batch of
training data for `evtc train`:

  OUTDIR/NAME.onnx              bf16 weights, no constant folding
  OUTDIR/NAME/train/<input>.npy the batch's input (ids, or x: f32 images)
  OUTDIR/NAME/train/labels.npy  its labels, the logits' shape without the class axis
  OUTDIR/NAME/meta.json         input name, batch, parameter count and digest,
                                exporter, attention form

With the whole training set one batch, `evtc train --epochs N` runs N steps
on the same batch (evtc shuffles the rows of the batch each epoch, which
changes only the order of the loss's sums).  bench/train_torch.py imports
this module and builds the same models (same seed, same bf16 weights:
checked against the digest) for PyTorch.

Models (full scale; --scale small: 2 layers, hidden 128, 2 heads of 64, a
vocabulary of 512 / 10 classes, batch 2-4, for tests on a CPU):
  gpt2        GPT-2 124M: 12 pre-LayerNorm layers, d 768, 12 heads, GELU
              (tanh), vocab 50257, wte tied to the LM head, causal; batch 8,
              seq 1024; logits [B, T, V]
  bert_large  BERT-Large: word + position embeddings and LayerNorm, 24
              post-LayerNorm layers, hidden 1024, 16 heads, ff 4096, GELU
              (erf), an MLM head (dense, GELU, LayerNorm, decoder tied to the
              word embeddings, bias) over the vocab 30522 on every position;
              batch 32, seq 512; logits [B, T, V]
  vit_b16     ViT-B/16 as torchvision's: 16x16 patches embedded by a
              stride-16 Conv2d (evtc's conv-patchify pass makes it a GEMM), class token, position embeddings, 12 pre-LayerNorm layers,
              hidden 768, 12 heads, mlp 3072, GELU (erf), head on the class
              token; batch 128, 224x224 (f32 input, cast to bf16 inside), 1000
              classes; logits [B, C]
No dropout anywhere (losses can then be compared step by step).  Weights:
N(0, 0.02) for matrices, embeddings and biases, 1 + N(0, 0.02) for
LayerNorm scales, so that no two initializers are equal (the exporter would
merge them into one parameter).  The loss is cross-entropy of the logits
against random labels, mean over every position: evtc's `--loss
cross_entropy --labels labels` (which reshapes [B, T, V] logits and [B, T]
labels into rows as PyTorch's callers do).

Attention is exported decomposed (q k^T * scale, causal mask as a
masked_fill, softmax, @ v): the form evtc's attention-fuse pass turns into
its fused template.  PyTorch runs it through scaled_dot_product_attention
when it has one (attention="sdpa": its fused flash / cuDNN kernels, the same
mathematics).
"""
import argparse
import hashlib
import inspect
import json
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

MODELS = ["gpt2", "bert_large", "vit_b16"]

CONFIGS = {
    "full": {
        "gpt2": dict(layers=12, d=768, heads=12, vocab=50257, batch=8, seq=1024),
        "bert_large": dict(layers=24, d=1024, heads=16, ff=4096, vocab=30522, batch=32, seq=512),
        "vit_b16": dict(layers=12, d=768, heads=12, ff=3072, classes=1000, batch=128, image=224, patch=16),
    },
    "small": {
        "gpt2": dict(layers=2, d=128, heads=2, vocab=512, batch=2, seq=64),
        "bert_large": dict(layers=2, d=128, heads=2, ff=512, vocab=512, batch=2, seq=64),
        "vit_b16": dict(layers=2, d=128, heads=2, ff=256, classes=10, batch=4, image=32, patch=8),
    },
}


def has_sdpa():
    return hasattr(F, "scaled_dot_product_attention")


class SelfAttention(nn.Module):
    """Multi-head self-attention with one qkv projection; causal or not."""

    def __init__(self, d, heads, causal, seq, attention):
        super().__init__()
        self.heads, self.causal, self.attention = heads, causal, attention
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        if causal:
            self.register_buffer("keep", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq),
                                 persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            if self.causal:
                att = att.masked_fill(~self.keep, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """A transformer layer: pre-LayerNorm (GPT-2, ViT) or post-LayerNorm (BERT)."""

    def __init__(self, d, heads, ff, causal, seq, pre_norm, gelu, attention):
        super().__init__()
        self.pre_norm, self.gelu = pre_norm, gelu
        self.ln_1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads, causal, seq, attention)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ff)
        self.fc_proj = nn.Linear(ff, d)

    def mlp(self, x):
        return self.fc_proj(F.gelu(self.fc(x), approximate=self.gelu))

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x))
        return self.ln_2(x + self.mlp(x))


class GPT2(nn.Module):
    def __init__(self, layers, d, heads, vocab, seq, attention, **_):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Parameter(torch.empty(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads, 4 * d, True, seq, True, "tanh", attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


class BertLarge(nn.Module):
    def __init__(self, layers, d, heads, ff, vocab, seq, attention, **_):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.empty(seq, d))
        self.emb_ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(Block(d, heads, ff, False, seq, False, "none", attention) for _ in range(layers))
        self.head_dense = nn.Linear(d, d)
        self.head_ln = nn.LayerNorm(d)
        self.head_bias = nn.Parameter(torch.empty(vocab))

    def forward(self, ids):
        x = self.emb_ln(self.word(ids) + self.pos)
        for layer in self.layers:
            x = layer(x)
        h = self.head_ln(F.gelu(self.head_dense(x)))
        return h @ self.word.weight.t() + self.head_bias


class ViT(nn.Module):
    def __init__(self, layers, d, heads, ff, classes, image, patch, attention, **_):
        super().__init__()
        self.n = (image // patch) ** 2
        self.conv_proj = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.empty(1, 1, d))
        self.pos = nn.Parameter(torch.empty(1, self.n + 1, d))
        self.blocks = nn.ModuleList(Block(d, heads, ff, False, self.n + 1, True, "none", attention)
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        b = x.shape[0]
        x = self.conv_proj(x.to(self.cls.dtype)).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)[:, 0:1].reshape(b, -1))


def initialise(model):
    """Seeded weights, all initializers distinct (see the module comment)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):       # LayerNorm scales
                p.copy_(1 + 0.02 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.02)


def build(name, scale, attention="explicit"):
    """(model in bf16 on the CPU, config dict).  Seeded: the same weights every time."""
    cfg = dict(CONFIGS[scale][name])
    torch.manual_seed(0)
    cls = {"gpt2": GPT2, "bert_large": BertLarge, "vit_b16": ViT}[name]
    model = cls(attention=attention, **cfg)
    initialise(model)
    return model.to(torch.bfloat16).train(), cfg


def batch(name, cfg):
    """(input name, input array, labels array) of the model's one batch, seeded."""
    g = torch.Generator().manual_seed(1)
    if name == "vit_b16":
        x = torch.randn(cfg["batch"], 3, cfg["image"], cfg["image"], generator=g)
        labels = torch.randint(0, cfg["classes"], (cfg["batch"],), generator=g)
        return "x", x.numpy(), labels.numpy()
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)
    labels = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)
    return "ids", ids.numpy(), labels.numpy()


def digest(model):
    """SHA-1 of every parameter's bytes in order: equal digests, equal weights."""
    h = hashlib.sha1()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.int16).numpy().tobytes())
    return h.hexdigest()


def export_onnx(model, example, path, input_name):
    """torch.onnx.export at opset 17 with the TorchScript exporter (dynamo=False
    where the signature has `dynamo`, torch 2.x); should that exporter be
    gone, the dynamo one (weights inside the file).  Returns the exporter used."""
    kw = dict(input_names=[input_name], output_names=["logits"], opset_version=17, do_constant_folding=False)
    params = inspect.signature(torch.onnx.export).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the exporter's notes on traced shapes and deprecations
        if "dynamo" not in params:
            torch.onnx.export(model, (example,), path, **kw)
            return "torchscript"
        try:
            torch.onnx.export(model, (example,), path, dynamo=False, **kw)
            return "torchscript"
        except Exception as e:
            why = str(e).strip().split("\n")[0][:200]
        extra = {"external_data": False} if "external_data" in params else {}
        torch.onnx.export(model, (example,), path, dynamo=True, **extra, **kw)
        return "dynamo (the TorchScript exporter failed: %s)" % why


def write(name, scale, outdir, device):
    model, cfg = build(name, scale)
    input_name, x, labels = batch(name, cfg)
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "train"), exist_ok=True)
    np.save(os.path.join(d, "train", input_name + ".npy"), x)
    np.save(os.path.join(d, "train", "labels.npy"), labels)
    meta = {"model": name, "scale": scale, "config": cfg, "input": input_name, "batch": cfg["batch"],
            "params": sum(p.numel() for p in model.parameters()), "digest": digest(model),
            "torch": torch.__version__, "attention": "explicit (decomposed) in the ONNX file", "dropout": 0}
    # tracing runs the model once: on the GPU when there is one (a CPU forward of BERT-Large takes long)
    with torch.no_grad():
        meta["exporter"] = export_onnx(model.to(device), torch.from_numpy(x).to(device),
                                       os.path.join(outdir, name + ".onnx"), input_name)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    mb = os.path.getsize(os.path.join(outdir, name + ".onnx")) / 2 ** 20
    print("%-10s %s.onnx: %.1f M parameters, %.0f MiB, batch %d (%s), torch %s, exporter %s" %
          (name, os.path.join(outdir, name), meta["params"] / 1e6, mb, cfg["batch"], scale, torch.__version__,
           meta["exporter"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--scale", choices=sorted(CONFIGS), default="full")
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error("unknown model(s) %s; known: %s" % (",".join(unknown), ",".join(MODELS)))
    os.makedirs(a.outdir, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    status = 0
    for n in names:
        try:
            write(n, a.scale, a.outdir, device)
        except Exception as e:              # one model's failure leaves the others to run
            print("%-10s FAILED to export: %s" % (n, str(e).strip().split("\n")[0]), file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
