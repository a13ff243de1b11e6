"""test_tune_cli.py -- `evtc tune`'s arguments, checked without a GPU.

Bad input exits 2 with one line naming the cause: an unknown family, an
--arch older than sm_80 or not of the form sm_NN, an sm_90a family
compiled for another arch, --arch without --compile-only (tuning measures
GPU 0 on its own arch), --compile-only with --show.  Where NVRTC is
present, --compile-only --arch sm_80 builds the reduced space of an sm_80
family (the template's default and three candidates) into a temporary
kernel cache, and a second run finds all four there.
"""
import os
import re
import tempfile

from evtc_testlib import check, evtc, finish


def expect_bad(args, pattern, what):
    r = evtc("tune", *args)
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(r.returncode == 2 and first.startswith("evtc: tune: ") and re.search(pattern, first),
          f"{what}: exit {r.returncode}, stderr {r.stderr!r}")


expect_bad(["--family", "bf16-mk-nk-store-sm90"], r"bad argument '--family'", "unknown family")
expect_bad(["--compile-only", "--arch", "sm_75"], r"--arch sm_75 is not sm_80 or later", "arch before sm_80")
expect_bad(["--compile-only", "--arch", "sm80"], r"--arch sm80 is not sm_80 or later", "arch misspelt")
expect_bad(["--compile-only", "--arch", "sm_80", "--family", "bf16-mk-nk-store"],
           r"family bf16-mk-nk-store is the sm_90a template's: --arch sm_80", "sm_90a family on sm_80")
expect_bad(["--compile-only", "--show"], r"--compile-only and --show exclude each other", "both modes")
expect_bad(["--arch", "sm_80"], r"--arch sm_80 without --compile-only", "arch while tuning on the GPU")

with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    args = ["tune", "--compile-only", "--arch", "sm_80", "--family", "bf16-mk-kn-visitor-sm80", "--reduced",
            "--jobs", "2"]
    r = evtc(*args, env=env, timeout=600)
    if r.returncode != 0 and re.search(r"nvrtc|NVRTC", r.stderr):
        print(f"no NVRTC here, the compile checks not run: {r.stderr.strip()}")
    else:
        check(r.returncode == 0 and "bf16-mk-kn-visitor-sm80: 4 kernels compiled for sm_80, 0 already" in r.stdout,
              f"sm_80 reduced space compiled: exit {r.returncode}\n{r.stdout}{r.stderr}")
        again = evtc(*args, env=env, timeout=600)
        check(again.returncode == 0 and ": 0 kernels compiled for sm_80, 4 already in the cache" in again.stdout,
              f"second run from the cache: {again.stdout}{again.stderr}")

finish()
