"""evtc_testlib.py -- what the Python tests share (a module, not a test:
CTest runs only tests/test_*.py).

Every Python test runs as `test_X.py SOURCE_DIR EVTC_BINARY`.  This module
reads those two arguments, counts checks, runs the evtc binary and ends the
test with the exit status CTest reads, printing the same summary line as
the C tests' check_summary (tests/check.h):

    from evtc_testlib import SRC, check, evtc, finish
    r = evtc("check", os.path.join(SRC, "examples", "mlp.evt"))
    check(r.returncode == 0, f"check: {r.stderr}")
    finish()
"""
import subprocess
import sys

SRC, EVTC = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(cond, what):
    """Counts cond; when false prints "FAILED: what".  Returns bool(cond)."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)
    return bool(cond)


def evtc(*args, timeout=120, **kw):
    """Runs the evtc binary with args (text stdout and stderr captured);
    keyword arguments go to subprocess.run (env=..., cwd=...)."""
    return subprocess.run([EVTC, *args], capture_output=True, text=True, timeout=timeout, **kw)


def finish():
    """Prints "N passed, N failed" and exits 1 when a check failed, else 0."""
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
