"""Entry point of every ember py_test: runs pytest over the paths given as arguments.

- junit XML goes to $XML_OUTPUT_FILE, so bazel-testlogs/**/test.xml holds pytest's own counts
  (tools/summarize_tests.py adds them up for CI).
- Bazel sharding (shard_count) is honoured: test ids are dealt round-robin by position.
- Exit code 5 (nothing collected) passes: a package may have no tests yet. Collection errors
  (exit 2), failures (1) and internal errors still fail.
"""

from __future__ import annotations

import os
import sys


class _Shard:
    """Keeps the tests of this Bazel shard: every TOTAL-th test id, starting at INDEX."""

    def __init__(self, index: int, total: int) -> None:
        self.index, self.total = index, total

    def pytest_collection_modifyitems(self, config, items):
        keep = [it for i, it in enumerate(items) if i % self.total == self.index]
        drop = [it for i, it in enumerate(items) if i % self.total != self.index]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep


def main(argv: list[str]) -> int:
    import pytest  # the py_test declares @pypi//:pytest; the import fails loudly otherwise

    args = [
        "-p",
        "no:cacheprovider",
        "-q",
        "-ra",
        "--color=no",
        "-o",
        "console_output_style=classic",
    ]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args += [
            "--junitxml",
            xml,
            "-o",
            "junit_suite_name=" + os.environ.get("TEST_TARGET", "pytest"),
        ]
    plugins = []
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    if total > 1:
        status = os.environ.get("TEST_SHARD_STATUS_FILE")
        if status:
            open(status, "w").close()  # tells Bazel this runner knows about sharding
        plugins.append(_Shard(int(os.environ["TEST_SHARD_INDEX"]), total))
    # Tests write scratch files under Bazel's private temp dir, never into the source tree.
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp:
        args += ["--basetemp", os.path.join(tmp, "pytest")]
    # A package's tests/ folder holds no file yet: Bazel's glob is empty and the folder is not in
    # runfiles. That is "no tests yet", not an error (a wrong path in a BUILD file would be; the
    # macro always passes the package's own tests/ folder).
    paths = [a for a in argv if not a.startswith("-")]
    missing = [p for p in paths if not os.path.exists(p.split("::")[0])]
    if paths and len(missing) == len(paths):
        print(f"no test files yet in {' '.join(missing)}: passing")
        if xml:
            name = os.environ.get("TEST_TARGET", "pytest")
            with open(xml, "w") as f:
                f.write(
                    '<?xml version="1.0" encoding="utf-8"?><testsuites>'
                    f'<testsuite name="{name}" errors="0" failures="0" skipped="0" tests="0" />'
                    "</testsuites>\n"
                )
        return 0
    rc = int(pytest.main(args + argv, plugins=plugins))
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"pytest collected no tests in {' '.join(argv)}: passing (nothing to run yet)")
        return 0
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
