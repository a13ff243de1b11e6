"""test_ab_families.py -- bench/ab_families.py on two step profiles written here (no GPU).

Two `evtc explain --profile` outputs as the H200 printed them, cut down: the
loss kernel 609.4 -> 501.2 us, the fc GEMMs' slowest layer 11 in A and 7 in
B (the same family), a family only B has, one that moved by 2 us (under the
5 us threshold) and the "rest" line; A without the achieved column (as
explain printed it before 2026-12-01), B with it.  The rows must be the totals, then the
families that moved by 5 us or more, the largest change first, each summed
under its name with numbers as N.
Usage: test_ab_families.py SOURCE_DIR EVTC_BINARY
"""
import os
import subprocess
import sys
import tempfile

from evtc_testlib import SRC, check, finish

HEAD = """kernel 0 opaque nodes=1 bytes=89843200 time_us=24.545: %_wte_Gather_output_0
profile by family (plan kernels of one kind whose first nodes' names differ only in numbers, the slowest first; first node: the family's slowest):
kind        kernels  measured_us  modelled_us    each_us  first node
"""
A = HEAD + """gemm             12     1263.500     1014.473    105.292  %_blocks.11_fc_MatMul_output_0
stitched          1      609.400      398.016    609.400  %loss.masked
stitched         23      339.900      277.314     14.778  %_blocks.1_ln_1_LayerNormalization_output_0.mean
rest            232        0.000     1864.719          -  (12 more families)
profile by kind (program kernels, measured us, modelled us): gemm 147 11400.064 9517.048;
profile: plan kernels 618, program kernels 249; modelled 15294.723 us, measured 16211.883 us kernel by kernel (device clock), 14752.307 us as a whole run
"""
B = HEAD + """gemm             12     1274.400     1014.473    106.200  364 TFLOP/s  %_blocks.7_fc_MatMul_output_0
stitched          1      501.200      398.016    501.200    3297 GB/s  %loss.masked
stitched         23      341.900      277.314     14.865    2568 GB/s  %_blocks.3_ln_1_LayerNormalization_output_0.mean
opaque            1       68.700       43.062     68.700     627 GB/s  %grad.wte.weight.rows
rest            232        0.000     1864.719          -            -  (12 more families)
profile: plan kernels 618, program kernels 249; modelled 15294.723 us, measured 16150.635 us kernel by kernel (device clock), 14590.061 us as a whole run
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, text in (("a.txt", A), ("b.txt", B)):
            paths.append(os.path.join(d, name))
            with open(paths[-1], "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, os.path.join(SRC, "bench", "ab_families.py"), *paths], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, f"ab_families.py failed: {r.stderr.strip()}")
        rows = [line.split("\t") for line in r.stdout.splitlines()]
        want = [["kernels one by one", "16211.9", "16150.6"], ["kernels as a whole run", "14752.3", "14590.1"],
                ["stitched %loss.masked", "609.4", "501.2"], ["opaque %grad.wte.weight.rows", "0.0", "68.7"],
                ["gemm %_blocks.N_fc_MatMul_output_N", "1263.5", "1274.4"]]
        check(rows == want, f"rows {rows}, want {want}")
    finish()


if __name__ == "__main__":
    main()
