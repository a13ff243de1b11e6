"""CTest: the ONNX conformance runner over Debian's libonnx-testdata.

argv: SOURCE_DIR EVTC.  Runs tests/onnx_conformance.py on every test of the
node, pytorch-converted and pytorch-operator suites and fails when any test
evtc accepts gives a wrong result.  The markdown summary goes to the build
tree (onnx-conformance.md); docs/onnx-conformance.md is the committed copy,
refreshed by running the runner with --doc docs/onnx-conformance.md.
Skipped (exit 77, a CTest skip, with a note) when the test data is not installed.
"""
import os
import subprocess
import sys

src, evtc = sys.argv[1], sys.argv[2]
data = "/usr/share/libonnx-testdata/data"
if not os.path.isdir(data):
    print("libonnx-testdata is not installed: skipped")
    sys.exit(77)  # a CTest skip, not a pass
r = subprocess.run([sys.executable, os.path.join(src, "tests", "onnx_conformance.py"), evtc, "--data", data,
                    "--doc", "onnx-conformance.md"])
sys.exit(r.returncode)
