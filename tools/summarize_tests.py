"""Add up junit XML results and print the one closing line CI reads: `N passed, N failed`.

    python3 tools/summarize_tests.py --since EPOCH --step NAME=RC:DIR [--step ...]
        [--timings TESTLOGS --targets QUERY_XML]

Each step names a command's exit code and the folder its junit XML went to (bazel-testlogs,
ci-out). With --timings, it also prints the slowest Bazel test targets (shards apart) beside the
timeout their size gives them (--targets: `bazel query 'tests(//...)' --output=xml`), and marks
those over half of it: CI's machine is a loaded 2-core one, so a target needs that margin.

Only XML written since EPOCH counts (no stale results). A step that failed without any
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


# Bazel's timeout by test size, and by an explicit `timeout` attribute
_SIZE_TIMEOUT = {"small": 60, "medium": 300, "large": 900, "enormous": 3600}
_TIMEOUT = {"short": 60, "moderate": 300, "long": 900, "eternal": 3600}


def target_timeouts(query_xml: str) -> dict[str, int]:
    """label -> timeout in seconds, from `bazel query --output=xml` of the test targets."""
    out = {}
    try:
        root = ET.parse(query_xml).getroot()
    except (ET.ParseError, OSError):   # the query failed: sizes unknown, medium assumed
        return out
    for rule in root.iter("rule"):
        attrs = {a.get("name"): a.get("value") for a in rule if a.get("value") is not None}
        t = _TIMEOUT.get(attrs.get("timeout", ""))
        out[rule.get("name")] = t or _SIZE_TIMEOUT.get(attrs.get("size", "medium"), 300)
    return out


def slowest(testlogs: str, timeouts: dict[str, int], since: float, n: int = 10) -> None:
    """Print the n slowest test runs (a shard is a run) and flag any over half its timeout."""
    runs = []
    for path in glob.glob(os.path.join(testlogs, "**", "test.xml"), recursive=True):
        if os.path.getmtime(path) + 1 < since:
            continue
        rel = os.path.relpath(os.path.dirname(path), testlogs).split(os.sep)
        shard = rel.pop() if rel[-1].startswith("shard_") else ""
        label = "//" + "/".join(rel[:-1]) + ":" + rel[-1]
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            continue
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        secs = sum(float(s.get("time", 0) or 0) for s in suites)
        runs.append((secs, label + (f" ({shard})" if shard else ""), timeouts.get(label, 300)))
    runs.sort(reverse=True)
    print(f"slowest test targets (of {len(runs)} runs; seconds / timeout):")
    for secs, name, limit in runs[:n]:
        flag = "  OVER HALF ITS TIMEOUT" if secs > limit / 2 else ""
        print(f"  {secs:7.1f} / {limit:4d}  {name}{flag}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--since", type=float, default=0.0)
    ap.add_argument("--step", action="append", default=[], help="NAME=RC:DIR")
    ap.add_argument("--timings", help="bazel-testlogs: print the slowest targets")
    ap.add_argument("--targets", help="bazel query --output=xml of the test targets")
    args = ap.parse_args()
    if args.timings:   # a report only: it never stands in the way of the closing line
        try:
            slowest(args.timings, target_timeouts(args.targets) if args.targets else {},
                    args.since)
        except Exception as e:  # noqa: BLE001
            print(f"slowest test targets: not available ({type(e).__name__}: {e})")
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
