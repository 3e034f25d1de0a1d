"""Bump one package's version and date its changelog.

    python3 tools/release.py PACKAGE {major,minor,patch} [--date YYYY-MM-DD] [--dry-run]

Writes packages/PACKAGE/VERSION and turns CHANGELOG.md's "## Unreleased" section into
"## X.Y.Z - DATE", with a fresh empty "## Unreleased" above it. Refuses to release a package
whose Unreleased section is empty. Sibling wheels pin each other by compatible range computed
from these files at build time, so nothing else needs editing; commit, then tag `PACKAGE-vX.Y.Z`.
For ember-stable-abi a major bump is a new ABI major: every native wheel's pin follows.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bump(version: str, part: str) -> str:
    major, minor, patch = (int(x) for x in re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version).groups())
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def release_changelog(text: str, version: str, date: str) -> str:
    m = re.search(r"^## Unreleased[ \t]*\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    if not m:
        raise SystemExit("CHANGELOG.md has no '## Unreleased' section")
    if not m.group(1).strip():
        raise SystemExit("nothing under '## Unreleased': write the changes first")
    head = f"## Unreleased\n\n## {version} - {date}\n{m.group(1).rstrip()}\n\n"
    return text[: m.start()] + head + text[m.end() :].lstrip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("package")
    ap.add_argument("part", choices=["major", "minor", "patch"])
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    pkg = os.path.join(args.root, "packages", args.package)
    if not os.path.isfile(os.path.join(pkg, "VERSION")):
        raise SystemExit(f"no package {args.package!r} (packages/*/VERSION)")
    with open(os.path.join(pkg, "VERSION")) as f:
        old = f.read().strip()
    new = bump(old, args.part)
    with open(os.path.join(pkg, "CHANGELOG.md")) as f:
        changelog = release_changelog(f.read(), new, args.date)
    print(f"{args.package}: {old} -> {new}")
    if args.dry_run:
        print(changelog)
        return 0
    with open(os.path.join(pkg, "VERSION"), "w") as f:
        f.write(new + "\n")
    with open(os.path.join(pkg, "CHANGELOG.md"), "w") as f:
        f.write(changelog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
