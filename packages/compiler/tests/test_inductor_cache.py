"""The inductor caches survive a new process: a second process compiling the same model (forward
and backward) finds its graphs in the FX-graph cache and its kernels in the kernel cache, so it
neither lowers nor runs the compiler, and computes the same values."""
import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, ember
from ember._inductor import codecache
ember.manual_seed(0)
m = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
x = ember.randn(5, 6)
cm = ember.compile(m, backend="inductor")
loss = ember.softmax(cm(x), -1).pow(2).sum()
loss.backward()
print(json.dumps({"stats": codecache.stats, "loss": float(loss),
                  "grad": m[0].weight.grad.flatten().tolist()}))
"""


def _run(env):
    env = dict(env, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _libraries(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".so"))


def test_second_process_starts_warm(tmp_path):
    cache = tmp_path / "kernels"
    cache.mkdir(mode=0o700)
    env = dict(os.environ, EMBER_CPU_KERNEL_CACHE=str(cache))
    first = _run(env)
    assert first["stats"]["miss"] == 2 and first["stats"]["hit_disk"] == 0  # forward, backward
    libs = _libraries(cache)
    assert libs
    second = _run(env)
    assert second["stats"]["hit_disk"] == 2 and second["stats"]["miss"] == 0
    assert _libraries(cache) == libs  # no new compile
    assert second["loss"] == first["loss"] and second["grad"] == first["grad"]
