"""tools/summarize_tests.py: the closing line CI reads, and the slowest-targets report."""
import importlib.util
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "summarize_tests", os.path.join(_HERE, "..", "summarize_tests.py"))
summarize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summarize)

SUITE = '<testsuite tests="{t}" failures="{f}" errors="0" skipped="{s}" time="{secs}"/>'
QUERY = """<query version="2">
<rule class="py_test" name="//packages/core:core_test"><string name="size" value="large"/></rule>
<rule class="py_test" name="//tools/tests:x_test"><string name="size" value="medium"/>
<string name="timeout" value="short"/></rule>
<rule class="py_test" name="//packages/devices:devices_test"/>
</query>"""


def _write(path, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(SUITE.format(**kw))


def test_timeouts_from_size_and_timeout_attributes(tmp_path):
    q = tmp_path / "q.xml"
    q.write_text(QUERY)
    assert summarize.target_timeouts(str(q)) == {
        "//packages/core:core_test": 900, "//tools/tests:x_test": 60,
        "//packages/devices:devices_test": 300}


def test_slowest_flags_shards_over_half_their_timeout(tmp_path, capsys):
    logs = tmp_path / "testlogs"
    _write(str(logs / "packages/devices/devices_test/shard_1_of_2/test.xml"), t=3, f=0, s=0,
           secs=200.0)
    _write(str(logs / "packages/devices/devices_test/shard_2_of_2/test.xml"), t=3, f=0, s=0,
           secs=20.0)
    _write(str(logs / "packages/core/core_test/test.xml"), t=9, f=1, s=0, secs=400.0)
    summarize.slowest(str(logs), {"//packages/devices:devices_test": 300,
                                  "//packages/core:core_test": 900}, since=0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("slowest test targets (of 3 runs")
    assert "//packages/core:core_test" in lines[1] and "OVER" not in lines[1]
    assert "devices_test (shard_1_of_2)" in lines[2] and "OVER HALF ITS TIMEOUT" in lines[2]
    assert "shard_2_of_2" in lines[3] and "OVER" not in lines[3]


def test_closing_line_counts_a_red_step_without_failures(tmp_path, capsys, monkeypatch):
    _write(str(tmp_path / "a" / "test.xml"), t=5, f=1, s=1, secs=1.0)
    monkeypatch.setattr(sys, "argv", ["summarize", "--step", f"a=1:{tmp_path / 'a'}",
                                      "--step", f"b=2:{tmp_path / 'b'}"])
    assert summarize.main() == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "3 passed, 2 failed"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_a_failed_query_still_gives_the_report_and_the_closing_line(tmp_path, capsys,
                                                                     monkeypatch):
    bad = tmp_path / "q.xml"
    bad.write_text("")                                   # bazel query printed nothing
    assert summarize.target_timeouts(str(bad)) == {}
    _write(str(tmp_path / "logs" / "p" / "t_test" / "test.xml"), t=2, f=0, s=0, secs=1.0)
    monkeypatch.setattr(sys, "argv", ["summarize", "--timings", str(tmp_path / "logs"),
                                      "--targets", str(bad),
                                      "--step", f"a=0:{tmp_path / 'logs'}"])
    assert summarize.main() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("slowest test targets") and "//p:t_test" in out[1]
    assert out[-1] == "2 passed, 0 failed"
