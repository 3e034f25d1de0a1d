"""ember.profiler with ProfilerActivity.CUDA: ops on CUDA tensors timed on the device between
CUDA events (device_time / cuda_time_total), the key_averages table's CUDA columns as PyTorch's,
kernel rows in the Chrome trace. On the fake device the events time nothing (0 us); on a GPU the
device times must be positive."""
from cuda_script import run_script

SCRIPT = r"""
import json, os, tempfile
import ember
from ember.profiler import ProfilerActivity, profile
fake = os.environ.get("EMBER_CUDA_FAKE") in ("1", "nolaunch")
x = ember.randn(64, 64).cuda()
c = ember.randn(8)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    y = (x @ x).relu()
    z = c * 2                      # a CPU op: no device time
    ember.cuda.synchronize()
evs = prof.events()
cuda_evs = [e for e in evs if e.name in ("aten::mm", "aten::matmul", "aten::relu")]
assert cuda_evs, [e.name for e in evs]
cpu_mul = [e for e in evs if e.name == "aten::mul"]
assert cpu_mul and all(e.device_time_total == 0 for e in cpu_mul)
for e in cuda_evs:
    assert e.device_time_total >= 0 and e.cuda_time_total == e.device_time_total
    if not fake:
        assert e.device_time_total > 0, e
table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=10)
head = [l for l in table.splitlines() if "Name" in l][0].split()
want = ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total", "CPU",
        "time", "avg", "Self", "CUDA", "Self", "CUDA", "%", "CUDA", "total", "CUDA", "time",
        "avg", "#", "of", "Calls"]
assert head == want, head
assert "Self CUDA time total:" in table
with profile(activities=[ProfilerActivity.CPU]) as p2:
    (x @ x).sum()
assert "CUDA" not in p2.key_averages().table()
path = os.path.join(tempfile.mkdtemp(), "t.json")
prof.export_chrome_trace(path)
kinds = {e["cat"] for e in json.load(open(path))["traceEvents"]}
assert "cpu_op" in kinds and (fake or "kernel" in kinds), kinds
"""


def test_cuda_profiler_events():
    run_script(SCRIPT, "test_cuda_profiler")
