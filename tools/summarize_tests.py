"""Add up junit XML results and print the one closing line CI reads: `N passed, N failed`.

    python3 tools/summarize_tests.py --since EPOCH --step NAME=RC:DIR [--step ...]

Each step names a command's exit code and the folder its junit XML went to (bazel-testlogs,
ci-out). Only XML written since EPOCH counts (no stale results). A step that failed without any
failing test in its XML (a build error, a crash before pytest wrote its report) counts as one
failed test, so the totals never read green over a red step. Exit status: 1 if anything failed.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import xml.etree.ElementTree as ET


def count(path: str) -> tuple[int, int, int]:
    """(passed, failed, skipped) of one junit file."""
    passed = failed = skipped = 0
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    for s in suites:
        tests = int(s.get("tests", 0))
        bad = int(s.get("failures", 0)) + int(s.get("errors", 0))
        skip = int(s.get("skipped", 0))
        passed += tests - bad - skip
        failed += bad
        skipped += skip
    return passed, failed, skipped


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--since", type=float, default=0.0)
    ap.add_argument("--step", action="append", default=[], help="NAME=RC:DIR")
    args = ap.parse_args()
    total = [0, 0, 0]
    for step in args.step:
        name, rest = step.split("=", 1)
        rc, folder = rest.split(":", 1)
        p = f = s = 0
        if os.path.isfile(folder):
            files = [folder]
        else:
            files = glob.glob(os.path.join(folder, "**", "*.xml"), recursive=True)
            files = [x for x in files if "test.outputs" not in x.split(os.sep)]
        for path in sorted(files):
            if os.path.getmtime(path) + 1 < args.since:
                continue
            try:
                cp, cf, cs = count(path)
            except ET.ParseError:
                cp, cf, cs = 0, 1, 0
                print(f"{name}: unreadable junit XML {path}")
            p, f, s = p + cp, f + cf, s + cs
        if int(rc) != 0 and f == 0:
            print(f"{name}: exit code {rc} with no failing test reported: counted as 1 failed")
            f = 1
        print(f"{name}: {p} passed, {f} failed, {s} skipped")
        total = [total[0] + p, total[1] + f, total[2] + s]
    print(f"skipped: {total[2]}")
    print(f"{total[0]} passed, {total[1]} failed")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
