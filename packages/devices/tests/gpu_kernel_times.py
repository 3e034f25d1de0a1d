"""GPU kernel times of one ember train step (MLP/CNN/GPT-2 of the benchmark), read through
torch.profiler's CUPTI tracing: a measuring tool for the lent GPU only (ember itself never
imports torch; this script imports it first, then ember).
`python packages/devices/tests/gpu_kernel_times.py cnn,gpt`"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import gpu_profile as P  # noqa: E402

import ember  # noqa: E402

sys.modules["torch"] = torch  # gpu_profile maps "torch" to ember for the workloads' code

for name in sys.argv[1].split(","):
    step = getattr(P, name + "_step")()
    step()
    step()
    ember.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        ember.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type.name == "CUDA"]
    print(f"== ember {name}: {len(evs)} GPU events, GPU busy "
          f"{sum(e.device_time for e in evs) / 1e3:.2f} ms")
    agg: dict = {}
    for e in evs:
        c, t = agg.get(e.name[:80], (0, 0.0))
        agg[e.name[:80]] = (c + 1, t + e.device_time)
    for k, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {t / 1e3:8.3f} ms {c:5d}  {k}")
