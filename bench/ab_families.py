"""ab_families.py -- two `evtc explain --profile` outputs of one model (A, then B) joined kernel family by family.

A whole step moves by less than its rounds' spread (0.2-0.3 ms on the H200) when a change speeds up one kernel
by 100 us; the step's profile says where the time went.  `explain --profile` prints its kernel families (plan
kernels of one kind whose first nodes' names differ only in numbers), the slowest first, with the family's
slowest first node, and the measured totals.  Families are matched by kind and that name with its numbers
replaced (the slowest layer may differ between the runs); the rows printed are the totals and the families
whose time moved by at least --min-us, as "what<TAB>A<TAB>B" lines for bench/ab.sh's table.

Usage: ab_families.py A.txt B.txt [--min-us 5]
"""
import re
import sys

# kind, kernels, measured, modelled, each, [achieved: "465 TFLOP/s", "3120 GB/s" or "-"; not before 2026-12-01], %node
FAMILY = re.compile(r"^(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+\S+(?:\s+(?:-|[0-9.]+ \S+/s))?\s+%(\S+)\s*$")
TOTALS = re.compile(r"measured ([0-9.]+) us kernel by kernel .*?, ([0-9.]+) us as a whole run")


def families(path):
    """{(kind, name with numbers as N): measured us} and (kernel by kernel, whole run) us of one profile."""
    fams, totals, on = {}, None, False
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("profile by family"):
                on = True
                continue
            m = FAMILY.match(line) if on else None
            if m:
                key = (m.group(1), re.sub(r"\d+", "N", m.group(5)))
                fams[key] = fams.get(key, 0.0) + float(m.group(3))
            elif on and not line.startswith("kind "):
                on = False
            t = TOTALS.search(line)
            if t:
                totals = (float(t.group(1)), float(t.group(2)))
    return fams, totals


def rows(a_path, b_path, min_us):
    """The (what, A us, B us) rows: totals first, then the families that moved, the largest change first."""
    (fa, ta), (fb, tb) = families(a_path), families(b_path)
    out = []
    if ta and tb:
        out.append(("kernels one by one", ta[0], tb[0]))
        out.append(("kernels as a whole run", ta[1], tb[1]))
    moved = [(fb.get(k, 0.0) - fa.get(k, 0.0), k) for k in set(fa) | set(fb)]
    for d, (kind, name) in sorted(moved, key=lambda x: -abs(x[0])):
        if abs(d) >= min_us:
            out.append((f"{kind} %{name}", fa.get((kind, name), 0.0), fb.get((kind, name), 0.0)))
    return out


def main():
    args = sys.argv[1:]
    min_us = 5.0
    if "--min-us" in args:
        i = args.index("--min-us")
        min_us = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    for what, a, b in rows(args[0], args[1], min_us):
        print(f"{what}\t{a:.1f}\t{b:.1f}")


if __name__ == "__main__":
    main()
