"""test_demo.py -- the `make demo` promise: default settings reach >= 0.95
test accuracy on the digits split.
Usage: test_demo.py SOURCE_DIR EVTC_BINARY
"""
import os
import re
import subprocess
import sys
import time

SRC, EVTC = sys.argv[1], sys.argv[2]
start = time.time()
r = subprocess.run([EVTC, "train", os.path.join(SRC, "examples", "mlp.evt"), "--data",
                    os.path.join(SRC, "data", "digits")], capture_output=True, text=True, timeout=600)
took = time.time() - start
print(r.stdout, r.stderr, f"wall time {took:.1f} s", sep="\n")
m = re.search(r"^test accuracy: ([0-9.]+)$", r.stdout, re.M)
ok = r.returncode == 0 and m is not None and float(m.group(1)) >= 0.95
print("PASS" if ok else "FAIL: want exit 0 and test accuracy >= 0.95")
sys.exit(0 if ok else 1)
