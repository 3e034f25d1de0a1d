"""tools/release.py: bumps VERSION and dates the changelog's Unreleased section."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import release  # noqa: E402


def _pkg(tmp_path, version="0.1.3", unreleased="- Fixed a thing.\n"):
    pkg = tmp_path / "packages" / "autograd"
    pkg.mkdir(parents=True)
    (pkg / "VERSION").write_text(version + "\n")
    (pkg / "CHANGELOG.md").write_text(
        f"# Changelog\n\n## Unreleased\n\n{unreleased}\n## 0.1.2 - 2026-01-01\n\n- Old.\n"
    )
    return pkg


@pytest.mark.parametrize(
    "part, expected", [("patch", "0.1.4"), ("minor", "0.2.0"), ("major", "1.0.0")]
)
def test_bump(tmp_path, part, expected):
    pkg = _pkg(tmp_path)
    assert release.main(["autograd", part, "--date", "2026-11-22", "--root", str(tmp_path)]) == 0
    assert (pkg / "VERSION").read_text() == expected + "\n"
    text = (pkg / "CHANGELOG.md").read_text()
    assert text.index("## Unreleased") < text.index(f"## {expected} - 2026-11-22")
    assert text.index("- Fixed a thing.") > text.index(f"## {expected}")
    assert text.index("## 0.1.2 - 2026-01-01") > text.index("- Fixed a thing.")


def test_refuses_empty_unreleased(tmp_path):
    pkg = _pkg(tmp_path, unreleased="")
    with pytest.raises(SystemExit, match="nothing under"):
        release.main(["autograd", "patch", "--root", str(tmp_path)])
    assert (pkg / "VERSION").read_text() == "0.1.3\n"
