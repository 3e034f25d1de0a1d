"""ember.profiler / ember.autograd.profiler against torch.profiler: which events are recorded,
nesting of record_function, the schedule's cycles, the table and the Chrome trace JSON."""
import json

import pytest
from harness import torch

import ember
from ember.profiler import ProfilerAction, profile, record_function, schedule


def _work(t):
    x = t.ones(3, 3)
    y = (x + x).sum()
    return y


def test_ops_and_ranges_recorded():
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            _work(ember)
        _work(ember)
    keys = {e.key: e.count for e in prof.key_averages()}
    assert keys["block"] == 1
    assert keys["aten::add"] == 2 and keys["aten::sum"] == 2 and keys["aten::ones"] == 2
    # torch records the same ops (plus its internal ones)
    with torch.profiler.profile() as tprof:
        with torch.profiler.record_function("block"):
            _work(torch)
        _work(torch)
    tkeys = {e.key: e.count for e in tprof.key_averages()}
    for k in ("block", "aten::add", "aten::sum", "aten::ones"):
        assert keys[k] == tkeys[k], k
    block = next(e for e in prof.events() if e.name == "block")
    assert [c.name for c in block.cpu_children] == ["aten::ones", "aten::add", "aten::sum"]
    assert block.cpu_time_total >= sum(c.cpu_time_total for c in block.cpu_children)
    add = next(e for e in prof.events() if e.name == "aten::add")
    assert add.input_shapes[:2] == [[3, 3], [3, 3]]
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert any(e.key == "aten::add" and e.input_shapes[:2] == [[3, 3], [3, 3]]
               for e in by_shape)


def test_table_format():
    with profile() as prof:
        _work(ember)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=2)
    lines = table.splitlines()
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"):
        assert col in lines[1]
    assert len([ln for ln in lines if "aten::" in ln]) == 2
    assert lines[-1].startswith("Self CPU time total:")
    totals = [e.cpu_time_total for e in prof.key_averages()]
    rows = sorted(totals, reverse=True)[:2]
    assert rows == sorted(rows, reverse=True)
    with pytest.raises(AttributeError):
        prof.key_averages().table(sort_by="no_such_column")


def test_chrome_trace_is_valid_json(tmp_path):
    with profile() as prof:
        with record_function("outer"):
            _work(ember)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    evs = trace["traceEvents"]
    assert {e["name"] for e in evs} >= {"outer", "aten::add", "aten::sum"}
    for e in evs:
        assert e["ph"] == "X" and isinstance(e["ts"], float) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    outer = next(e for e in evs if e["name"] == "outer")
    add = next(e for e in evs if e["name"] == "aten::add")
    assert outer["cat"] == "user_annotation" and add["cat"] == "cpu_op"
    assert outer["ts"] <= add["ts"] and add["ts"] + add["dur"] <= outer["ts"] + outer["dur"]


def test_schedule_matches_torch():
    for kw in (dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=1, active=1, repeat=2),
               dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3)):
        ours = [schedule(**kw)(i).name for i in range(20)]
        theirs = [torch.profiler.schedule(**kw)(i).name for i in range(20)]
        assert ours == theirs


def _cycles(t):
    seen = []
    sched = t.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)

    def ready(p):
        seen.append(sorted((e.key, e.count) for e in p.key_averages()
                           if e.key in ("aten::ones", "aten::sum", "ProfilerStep*")))
    with t.profiler.profile(schedule=sched, on_trace_ready=ready) as p:
        for i in range(10):
            t.ones(i + 1).sum()
            p.step()
    return seen


def test_schedule_cycles_match_torch():
    assert _cycles(ember) == _cycles(torch)
    assert len(_cycles(ember)) == 2


def test_record_function_is_free_outside_profile_and_decorates():
    @record_function("deco")
    def f(x):
        return x * 2
    assert f(ember.ones(2)).tolist() == [2.0, 2.0]
    with profile() as prof:
        f(ember.ones(2))
    assert [e.name for e in prof.events()][1:3] == ["deco", "aten::mul"]
    assert ProfilerAction.RECORD_AND_SAVE.value == 3


def test_tensorboard_trace_handler_writes_trace(tmp_path):
    sched = schedule(wait=0, warmup=1, active=1, repeat=1)
    with profile(schedule=sched,
                 on_trace_ready=ember.profiler.tensorboard_trace_handler(str(tmp_path))) as p:
        for _ in range(3):
            ember.ones(2).sum()
            p.step()
    files = list(tmp_path.glob("*.pt.trace.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text())["traceEvents"]


def test_autograd_profiler_records_backward():
    w = ember.zeros(3, requires_grad=True)
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("fwd"):
            loss = (w * 2).sum()
        loss.backward()
    keys = {e.key: e.count for e in prof.key_averages()}
    assert keys["fwd"] == 1 and keys["aten::mul"] >= 2      # forward and its vjp
    assert "Self CPU time total" in prof.table()
    with ember.autograd.profiler.emit_nvtx():
        pass
    with pytest.raises(RuntimeError, match="didn't finish"):
        ember.autograd.profiler.profile().key_averages()
