"""What the ember-versus-torch benchmarks (compile_bench.py, export_bench.py) share: the small
GPT's CPU config, and running a script's `measure(impl)` for torch and for ember, each in its own
subprocess, printing one JSON line per implementation and the ember / torch ratios."""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GPT_CPU = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)   # workloads.py's CPU GPT


def load(impl: str):
    """The implementation's module (workloads.load: ember is imported as `torch`)."""
    return _workloads().load(impl)


def gpt(t):
    """workloads.gpt at GPT_CPU on implementation t."""
    return _workloads().gpt(t, **GPT_CPU)


def _workloads():
    sys.path.insert(0, HERE)
    import workloads
    return workloads


def main(script: str, measure) -> None:
    """`script --one IMPL` prints measure(IMPL) as JSON; without arguments, run both and compare
    the figures whose names end in _s (seconds) or _us (microseconds)."""
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2])))
        return
    env = dict(os.environ)
    src = [os.path.join(ROOT, "packages", p, "src") for p in sorted(os.listdir(
        os.path.join(ROOT, "packages")))]
    env["PYTHONPATH"] = os.pathsep.join(src + [env.get("PYTHONPATH", "")])
    res = {}
    for impl in ("torch", "ember"):
        r = subprocess.run([sys.executable, script, "--one", impl], env=env,
                           capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-3000:])
            sys.exit(1)
        res[impl] = json.loads(r.stdout.strip().splitlines()[-1])
        print(json.dumps(res[impl]))
    for k, v in res["ember"].items():
        if k.endswith(("_s", "_us")):
            unit = "s" if k.endswith("_s") else "us"
            print(f"{k}: ember {v:.4g} {unit}, torch {res['torch'][k]:.4g} {unit}, "
                  f"ratio {v / res['torch'][k]:.2f}x")
