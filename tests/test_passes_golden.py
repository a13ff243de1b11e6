"""test_passes_golden.py -- golden tests of the graph passes (MLIR style).

Every file tests/passes/<pass>/*.evt is one test.  The file is a model in
text IR (the parser skips '#' lines) plus directives in comments:

  # RUN: passes=cleanup,dce          the --passes list given to `evtc opt`
  # RUN: passes=cse args=--train     extra `evtc opt` arguments (split on
                                     whitespace), e.g. --train --optimizer none
  # CHECK: TEXT      some output line at or after the previous match contains TEXT
  # CHECK-NEXT: TEXT the line right after the previous match contains TEXT
  # CHECK-NOT: TEXT  no line between the previous match and the next CHECK /
                     CHECK-NEXT match (or the end) contains TEXT
  # CHECK-COUNT: N   the output has exactly N node lines (lines with " = ")
  # STDERR: TEXT     stderr of a successful run contains TEXT (--print-stats,
                     --dump-after output)
  # ERROR: TEXT      `evtc opt` must fail with exit status 2 and TEXT on stderr
                     (then no CHECK lines)

TEXT is matched as a plain substring after stripping its surrounding
whitespace; matching is line-based over stdout of
`evtc opt FILE --passes=LIST ARGS`.  Exactly one RUN line per file.  A
CHECK line before any match searches from the first output line.
Usage: test_passes_golden.py SOURCE_DIR EVTC_BINARY [FILE...]
"""
import glob
import os
import re
import subprocess
import sys

SRC, EVTC = sys.argv[1], sys.argv[2]
DIRECTIVE = re.compile(r"^\s*#\s*(RUN|CHECK|CHECK-NEXT|CHECK-NOT|CHECK-COUNT|STDERR|ERROR):(.*)$")


def parse(path):
    """The (kind, text) directives of a test file, in order."""
    out = []
    with open(path) as f:
        for line in f:
            m = DIRECTIVE.match(line)
            if m:
                out.append((m.group(1), m.group(2).strip()))
    return out


def run_checks(lines, directives):
    """None when the CHECK directives hold on lines, else the failure text."""
    pos = -1          # index of the last matched line
    pending_not = []  # CHECK-NOT patterns waiting for the next positive match
    for kind, text in directives:
        if kind == "CHECK-NOT":
            pending_not.append(text)
        elif kind == "CHECK-COUNT":
            count = sum(1 for l in lines if " = " in l)
            if count != int(text):
                return f"CHECK-COUNT: {text} node lines expected, found {count}"
        elif kind in ("CHECK", "CHECK-NEXT"):
            if kind == "CHECK-NEXT":
                found = pos + 1 if pos + 1 < len(lines) and text in lines[pos + 1] else None
            else:
                found = next((i for i in range(pos + 1, len(lines)) if text in lines[i]), None)
            if found is None:
                where = lines[pos + 1] if kind == "CHECK-NEXT" and pos + 1 < len(lines) else "(end)"
                return f"{kind}: '{text}' not found after line {pos + 1}" + (
                    f" (next line: '{where.strip()}')" if kind == "CHECK-NEXT" else "")
            for pat in pending_not:
                for i in range(pos + 1, found):
                    if pat in lines[i]:
                        return f"CHECK-NOT: '{pat}' found on line {i + 1}: '{lines[i].strip()}'"
            pending_not = []
            pos = found
    for pat in pending_not:
        for i in range(pos + 1, len(lines)):
            if pat in lines[i]:
                return f"CHECK-NOT: '{pat}' found on line {i + 1}: '{lines[i].strip()}'"
    return None


def run_test(path):
    """None when the test at path passes, else the failure text."""
    directives = parse(path)
    runs = [t for k, t in directives if k == "RUN"]
    if len(runs) != 1:
        return f"expected exactly one RUN line, found {len(runs)}"
    m = re.fullmatch(r"passes=(\S*)(?:\s+args=(.*))?", runs[0])
    if not m:
        return f"bad RUN line '{runs[0]}' (want: passes=a,b [args=...])"
    cmd = [EVTC, "opt", path, "--passes=" + m.group(1)] + (m.group(2) or "").split()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    errors = [t for k, t in directives if k == "ERROR"]
    if errors:
        if proc.returncode != 2:
            return f"expected failure (exit 2), got exit {proc.returncode}"
        missing = [e for e in errors if e not in proc.stderr]
        return f"stderr lacks {missing}: {proc.stderr.strip()}" if missing else None
    if proc.returncode != 0:
        return f"evtc opt failed (exit {proc.returncode}): {proc.stderr.strip()}"
    missing = [t for k, t in directives if k == "STDERR" and t not in proc.stderr]
    if missing:
        return f"stderr lacks {missing}:\n{proc.stderr}"
    checks = [d for d in directives if d[0].startswith("CHECK")]
    if not checks:
        return "no CHECK lines"
    failure = run_checks(proc.stdout.splitlines(), checks)
    return failure and failure + "\n--- output ---\n" + proc.stdout


def main():
    files = sys.argv[3:] or sorted(glob.glob(os.path.join(SRC, "tests", "passes", "*", "*.evt")))
    failed = 0
    for path in files:
        failure = run_test(path)
        if failure:
            failed += 1
            print(f"FAILED {os.path.relpath(path, SRC)}: {failure}")
    print(f"{len(files) - failed} passed, {failed} failed")
    return 1 if failed or not files else 0


if __name__ == "__main__":
    sys.exit(main())
