"""The profiler's rows for the ops an op calls inside (its decomposition): nested under it in
`events()` (cpu_children) and rows of their own in key_averages().table(), as torch's
aten::linear holds aten::t and aten::matmul; self time excludes them."""
import torch

import ember


def _children(m, fn):
    with m.profiler.profile() as p:
        fn(m)
    evs = p.events()
    return {e.name: sorted(c.name for c in e.cpu_children) for e in evs}, p


def test_linear_with_bias_nests_its_pieces():
    def fn(m):
        m.nn.functional.linear(m.ones(4, 8), m.ones(3, 8), m.ones(3)).relu().sum()
    e, pe = _children(ember, fn)
    t, _ = _children(torch, fn)
    assert "aten::t" in e["aten::linear"] and "aten::t" in t["aten::linear"]
    assert {"aten::relu", "aten::sum"} <= set(e)
    rows = {r.key: r for r in pe.key_averages()}
    lin = rows["aten::linear"]
    kids = sum(ev.cpu_time_total for ev in pe.events() if ev.cpu_parent is not None
               and ev.cpu_parent.name == "aten::linear")
    assert abs(lin.self_cpu_time_total - (lin.cpu_time_total - kids)) < 1e-3
    table = pe.key_averages().table()
    assert all(name in table for name in e["aten::linear"])


def test_no_bias_linear_children_match_torch():
    def fn(m):
        m.nn.functional.linear(m.ones(4, 8), m.ones(3, 8))
    e, _ = _children(ember, fn)
    t, _ = _children(torch, fn)
    assert e["aten::linear"] == t["aten::linear"] == ["aten::matmul", "aten::t"]


def test_nested_rows_under_record_function():
    x, w = ember.ones(2, 4), ember.ones(3, 4)
    with ember.profiler.profile() as p:
        with ember.profiler.record_function("block"):
            ember.nn.functional.linear(x, w)
    evs = {e.name: e for e in p.events()}
    assert [c.name for c in evs["block"].cpu_children] == ["aten::linear"]
    assert evs["aten::t"].cpu_parent is evs["aten::linear"]
