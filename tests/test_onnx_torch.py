"""CTest: models exported from PyTorch (Debian's python3-torch) at test time
run through the ONNX importer and match PyTorch's forward outputs.

argv: SOURCE_DIR EVTC.  Exports, in eval mode with opset 14, a small MLP
(Linear/ReLU/GELU(erf)/LayerNorm/Softmax) and a small CNN (Conv/BatchNorm/
ReLU/MaxPool/AvgPool/Flatten/Linear/Dropout), runs `evtc run` on them (the
PARAM/STATE leaves start from the exported initializers), and compares
every output with PyTorch:
float32 tolerance |evtc - torch| <= 1e-5 + 1e-4 |torch|.  Generated files
stay in a temporary directory.  Skipped (exit 77, a CTest skip) without torch.  The MLP
is tools/export_models.py's reference MLP with a softmax on top.
"""
import os
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:
    print("python3-torch is not installed: skipped")
    sys.exit(77)  # a CTest skip, not a pass

from evtc_testlib import SRC, check, evtc, finish

sys.path.insert(0, os.path.join(SRC, "tools"))
import export_models  # noqa: E402  (tools/ is on the path only now)

torch.manual_seed(0)


class MLP(export_models.MLP):
    def forward(self, x):
        return torch.softmax(super().forward(x), dim=-1)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.pool = torch.nn.AvgPool2d(2)
        self.drop = torch.nn.Dropout(0.3)
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x):
        h = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        h = self.pool(torch.relu(self.conv2(h)))
        return self.fc(self.drop(torch.flatten(h, 1)))


def compare(name, model, x):
    model.eval()
    with torch.no_grad():
        if isinstance(model, CNN):      # non-trivial running statistics
            model.bn1.running_mean.uniform_(-0.5, 0.5)
            model.bn1.running_var.uniform_(0.5, 2.0)
        want = model(x).numpy()
    d = tempfile.mkdtemp(prefix="evtc-torch-" + name + "-")
    path = os.path.join(d, name + ".onnx")
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=14)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    r = evtc("run", path, "--input", "x=" + os.path.join(d, "x.npy"), "-o", os.path.join(d, "out"), timeout=None)
    if not check(r.returncode == 0, "%s: evtc run: %s" % (name, r.stderr.strip())):
        return
    got = np.load(os.path.join(d, "out", "y.npy"))
    err = np.abs(got - want) - (1e-5 + 1e-4 * np.abs(want))
    if check(got.shape == want.shape and not (err > 0).any(),
             "%s: max abs error %g" % (name, np.abs(got - want).max())):
        print("ok %s: %s, max abs error %.3g" % (name, got.shape, np.abs(got - want).max()))


compare("mlp", MLP(), torch.randn(4, 16))
compare("cnn", CNN(), torch.randn(2, 3, 8, 8))
finish()
