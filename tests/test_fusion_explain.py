"""test_fusion_explain.py -- `evtc explain` end to end.

Runs the partitioners through the CLI on examples/mlp.evt (forward and the
joint --train graph, both targets) and on the hand-built graphs of
tests/fusion/: the summary lines have the documented form, the ILP is never
slower than greedy, the text is byte-identical between runs (solver timings
masked) and between a solved and a cached run, dot/svg/html are well formed,
a tiny --time-limit falls back loudly (stderr and the text), --profile
prints one row per plan kernel whose times add up to its totals (and so do
its families: kernels whose first nodes differ only in numbers), a plan
kernel packed into another's launch with its modelled time on that
launch's row, and says
whether whole runs replay a CUDA graph (never on the CPU; on a GPU they
do), bad usage exits 2.  Caches go to a temporary EVTC_CACHE_DIR.
"""
import glob
import os
import re
import tempfile

from evtc_testlib import SRC, check, evtc, finish


def explain(*args, cache=None):
    env = dict(os.environ, EVTC_DATA_DIR=os.path.join(SRC, "data"))
    if cache:
        env["EVTC_CACHE_DIR"] = cache
    r = evtc("explain", *args, env=env, timeout=None)
    return r.returncode, r.stdout, r.stderr


def summaries(text):
    """{partitioner: (kernels, us, bytes)} from the summary lines."""
    out = {}
    for m in re.finditer(r"^kernels: (\d+) modelled_us: ([0-9.]+) bytes: (\d+) \((\w+)\)$", text, re.M):
        out[m.group(4)] = (int(m.group(1)), float(m.group(2)), int(m.group(3)))
    return out


def masked(text):
    return re.sub(r"(time|enumerate|max_solve)=[0-9.]+", r"\1=T", text)


mlp = os.path.join(SRC, "examples", "mlp.evt")
models = [[mlp], [mlp, "--train"], [mlp, "--train", "--optimizer", "adamw"]]
models += [[f, "--no-passes"] for f in sorted(glob.glob(os.path.join(SRC, "tests", "fusion", "*.evt")))]
with tempfile.TemporaryDirectory() as tmp:
    for target in ("cpu", "h200"):
        for m in models:
            rc, out, err = explain(*m, "--target", target, "--partitioner", "none,greedy,ilp", cache=tmp + "/a")
            name = " ".join(os.path.basename(a) for a in m) + " " + target
            check(rc == 0, f"{name}: exit {rc}: {err}")
            s = summaries(out)
            check(set(s) == {"none", "greedy", "ilp"}, f"{name}: three summary lines")
            if len(s) == 3:
                check(s["ilp"][1] <= s["greedy"][1] + 1e-6, f"{name}: ilp {s['ilp'][1]} > greedy {s['greedy'][1]}")
                check(s["greedy"][1] <= s["none"][1] + 1e-6, f"{name}: greedy > none")
            ilp = re.search(r"^ilp: components=(\d+) objective=([0-9.]+) bound=([0-9.]+) gap=([0-9.]+) time=[0-9.]+ s$",
                            out, re.M)
            check(ilp is not None and float(ilp.group(4)) == 0.0, f"{name}: ilp line with gap 0")
            check(out.rstrip().split("\n")[-1].startswith("ilp-detail:"), f"{name}: ends with the ilp lines")
            # determinism: a fresh cache gives the same text; the cached run too
            rc2, out2, _ = explain(*m, "--target", target, "--partitioner", "none,greedy,ilp", cache=tmp + "/b")
            check(masked(out) == masked(out2), f"{name}: same text from two solves")
            rc3, out3, err3 = explain(*m, "--target", target, "--partitioner", "none,greedy,ilp", cache=tmp + "/b")
            check("cache" in err3 and masked(out3) == masked(out2), f"{name}: cached run gives the same text")

    joint = [mlp, "--train", "--optimizer", "adamw", "--no-cache"]
    rc, out, err = explain(*joint, "--format", "dot")
    check(rc == 0 and out.startswith("digraph") and "subgraph cluster_k0" in out, "dot output")
    svg_path = os.path.join(tmp, "plan.svg")
    rc, out, err = explain(*joint, "--format", "svg", "-o", svg_path)
    check(rc == 0 and "<svg" in open(svg_path).read(), "svg written with -o")
    rc, out, err = explain(*joint, "--format", "html")
    check(rc == 0 and out.startswith("<!DOCTYPE html>") and "<svg" in out and "<table id=\"kernels\">" in out
          and "<script>" in out and "http" not in out.split("<svg")[0], "html: self-contained page")

    rc, out, err = explain(*joint, "--time-limit", "1e-9")
    check(rc == 0 and "WARNING" in err and "time limit" in err, "time-limit fallback is loud on stderr")
    check("ilp: WARNING" in out and "NOT a proven optimum" in out, "time-limit fallback is in the text")

    # --profile: every plan kernel once in the table, measured times positive, totals consistent
    rc, out, err = explain(*joint, "--profile", "3")
    check(rc == 0, f"--profile: exit {rc}: {err}")
    plan_kernels = summaries(out).get("ilp", (0,))[0]
    rows = re.findall(r"^(\d+|chain)\s+\S+\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(-|[0-9.]+ [MGT](?:FLOP|B)/s)\s+%\S+",
                      out, re.M)
    # achieved: TFLOP/s (GFLOP/s) of a GEMM's modelled FLOP, GB/s (MB/s) of the other kernels' modelled bytes
    kernel_bytes = {m.group(1): float(m.group(2)) for m in re.finditer(r"^kernel (\d+) \S+ nodes=\d+ bytes=(\d+) ", out, re.M)}
    units = {"M": 1e6, "G": 1e9, "T": 1e12}
    rates = re.findall(r"^(\d+)\s+(\S+)\s+\d+\s+[0-9.]+\s+([0-9.]+)\s+[0-9.]+\s+([0-9.]+) ([MGT])(FLOP|B)/s\s+%", out, re.M)
    check(rates and all((unit == "FLOP") == (kind == "gemm") for _, kind, _, _, _, unit in rates),
          f"--profile: achieved FLOP/s for GEMMs, B/s for the others: {rates[:4]}")
    for kid, kind, us, rate, scale, unit in rates:
        if unit == "B" and kid in kernel_bytes and float(us) > 0:
            want = kernel_bytes[kid] / (float(us) * 1e-6)
            check(abs(float(rate) * units[scale] - want) <= 0.02 * want + 0.5 * units[scale],   # printed to 1 unit
                  f"--profile: kernel {kid} achieved {rate} {scale}B/s, its {kernel_bytes[kid]:.0f} bytes in {us} us")
    ids = [r[0] for r in rows if r[0] != "chain"]
    check(len(ids) == plan_kernels and len(set(ids)) == plan_kernels,
          f"--profile: one row per plan kernel ({len(ids)} rows, {plan_kernels} kernels)")
    aliases = re.findall(r"^\d+\s+\S+\s+\d+\s+[0-9.]+\s+0\.000\s+[0-9.]+\s+-\s+%\S+ \(no kernel: (?:a reshape alias or "
                         r"a view attention reads or writes in place|kernel \d+ writes its values, a by-product or packed "
                         r"into its launch; its modelled time is counted there)\)$", out, re.M)
    check(sum(float(r[3]) > 0 for r in rows) == len(rows) - len(aliases),
          "--profile: every kernel's measured time is positive; only aliases, views and by-products run none")
    total = re.search(r"^profile: plan kernels (\d+), program kernels (\d+) .*modelled ([0-9.]+) us, "
                      r"measured ([0-9.]+) us kernel by kernel \((?:device clock|with waits)\), ([0-9.]+) us as a whole run$", out, re.M)
    check(total is not None and int(total.group(1)) == plan_kernels, "--profile: the totals line")
    kinds = re.search(r"^profile by kind \(program kernels, measured us, modelled us\):((?: \w+ \d+ [0-9.]+ [0-9.]+;)+)$",
                      out, re.M)
    per_kind = re.findall(r" (\w+) (\d+) ([0-9.]+) ([0-9.]+);", kinds.group(1)) if kinds else []
    check(total is not None and per_kind and
          sum(int(k[1]) for k in per_kind) == int(total.group(2)) and
          abs(sum(float(k[2]) for k in per_kind) - float(total.group(4))) < 0.01 * len(per_kind) and
          abs(sum(float(k[3]) for k in per_kind) - float(total.group(3))) < 0.01 * len(per_kind),
          "--profile: the kinds add up to the program's kernels, the measured and the modelled totals")
    fam_block = out.split("profile by family", 1)[1].split("profile by kind", 1)[0] if "profile by family" in out else ""
    fams = re.findall(r"^(\w+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+(?:[0-9.]+|-)\s+(?:-|[0-9.]+ [MGT](?:FLOP|B)/s)\s+"
                      r"(?:%\S+|\(\d+ more families\))$", fam_block, re.M)
    check(total is not None and fams and sum(int(f[1]) for f in fams) == len(rows) and
          abs(sum(float(f[2]) for f in fams) - float(total.group(4))) < 0.01 * len(fams) and
          [float(f[2]) for f in fams if f[0] != "rest"] == sorted((float(f[2]) for f in fams if f[0] != "rest"), reverse=True),
          f"--profile: the families hold every row, add up to the measured total, the slowest first: {fam_block[:400]}")
    mem = re.search(r"^memory: ([0-9.]+) MiB of program buffers \(arena ([0-9.]+) MiB, leaves and outputs ([0-9.]+) MiB\)$",
                    out, re.M)
    check(mem is not None and float(mem.group(3)) > 0 and
          abs(float(mem.group(1)) - float(mem.group(2)) - float(mem.group(3))) < 0.2,
          "--profile: the memory line adds up")
    check(re.search(r"^launches: kernel by kernel \(the cpu backend offers no graphs\)$", out, re.M) is not None,
          "--profile: the launches line says the CPU backend replays no graph")
    peak = re.search(r"^memory peak: ([0-9.]+) MiB of (\d+) values live in program kernel (\d+) \(%\S+\); the largest:((?: %\S+ [0-9.]+)+)$",
                     out, re.M)
    sizes = [float(x) for x in re.findall(r" %\S+ ([0-9.]+)", peak.group(4))] if peak else []
    check(peak is not None and mem is not None and float(peak.group(1)) <= float(mem.group(2)) + 0.1 and
          0 < len(sizes) <= min(8, int(peak.group(2))) and sizes == sorted(sizes, reverse=True) and
          sum(sizes) <= float(peak.group(1)) + 0.1 * len(sizes),
          "--profile: the memory peak line names the largest live values, within the arena")
    if total and rows:
        check(abs(sum(float(r[3]) for r in rows) - float(total.group(4))) < 1e-3 * len(rows) + 1e-6,
              "--profile: the rows add up to the measured total")
        check(abs(sum(float(r[2]) for r in rows) - float(total.group(3))) < 1e-3 * len(rows) + 1e-6,
              "--profile: the modelled times add up to the plan's")
        measured = [float(r[3]) for r in rows]
        check(measured == sorted(measured, reverse=True), "--profile: the slowest kernel first")
    # two small elementwise kernels that share nothing run as one launch: the second plan kernel's row has no time
    # of its own and points at the first, whose row carries both kernels' modelled time
    packed = os.path.join(tmp, "packed.evt")
    with open(packed, "w") as f:
        f.write("graph pk {\n  %a = input() : f32[64]\n  %b = input() : f32[64]\n  %x = neg(%a) : f32[64]\n"
                "  %y = exp(%b) : f32[64]\n  output %x\n  output %y\n}\n")
    rc, out, err = explain(packed, "--profile", "2", "--no-cache")
    plan = {m.group(1): float(m.group(2)) for m in re.finditer(r"^kernel (\d+) \S+ nodes=\d+ bytes=\d+ time_us=([0-9.]+):", out, re.M)}
    prow = {m.group(1): (float(m.group(2)), float(m.group(3)), m.group(4)) for m in
            re.finditer(r"^(\d+)\s+elementwise\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s+(?:-|[0-9.]+ [MGT]B/s)\s+%\S+(.*)$",
                        out, re.M)}
    packed_of = [k for k, r in prow.items() if "writes its values" in r[2]]
    check(rc == 0 and len(plan) == 2 and len(prow) == 2 and len(packed_of) == 1, f"--profile, packed kernels: {out[-900:]}")
    if rc == 0 and len(plan) == 2 and len(packed_of) == 1:
        other = next(k for k in prow if k != packed_of[0])
        check(prow[packed_of[0]][:2] == (0.0, 0.0) and f"kernel {other} writes its values" in prow[packed_of[0]][2] and
              abs(prow[other][0] - sum(plan.values())) < 0.01 and prow[other][1] > 0,
              f"--profile, packed kernels: the launch's row has both plan kernels' modelled time: {prow} {plan}")
    # h200 profiles on the CUDA backend: without a GPU that is said at once, before any planning
    rc, out, err = explain(mlp, "--target", "h200", "--profile", "1")
    check(rc != 0 or re.search(r"^launches: whole runs replay one captured graph of the program's launches "
                               r"\(captured 1 time\); kernel by kernel when profiled$", out, re.M) is not None,
          f"--target h200 --profile: the runs after the first replay a CUDA graph: {out[-600:]}")
    check(rc == 0 or (rc == 2 and err.startswith("evtc: explain --profile: target h200 needs its backend:")
                      and out == ""), f"--target h200 --profile: exit {rc}: {err}")
    rc, out, err = explain(mlp, "--profile", "0")
    check(rc == 2 and err.startswith("evtc:"), "--profile 0 is bad usage")

    for bad in (["--partitioner", "magic"], ["--target", "tpu"], ["--format", "pdf"], ["--bogus"], []):
        rc, out, err = explain(*([mlp] if bad != [] else []), *bad)
        check(rc == 2 and err.startswith("evtc:"), f"bad usage {bad}: exit 2 with a message (got {rc})")

finish()
