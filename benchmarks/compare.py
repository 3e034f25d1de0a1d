"""Run the side-by-side workloads on torch and on ember in one run and print the ratios.

    python benchmarks/compare.py --only op_overhead,elementwise,matmul
    python benchmarks/compare.py --device cuda --big          # on the lent GPU

Each implementation runs in its own subprocess (ember is imported as `torch` there), torch
first, then ember, then torch again (two anchors bracket ember on a noisy shared machine).
Ratios are ember / torch (for throughput figures, torch / ember), so < 1 is ember faster.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HIGHER_IS_BETTER = ("GBps", "TFLOPs")


def run(impl: str, args) -> dict:
    env = dict(os.environ)
    src = [os.path.join(ROOT, "packages", p, "src") for p in sorted(os.listdir(
        os.path.join(ROOT, "packages")))]
    env["PYTHONPATH"] = os.pathsep.join(src + [env.get("PYTHONPATH", "")])
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), "--impl", impl,
           "--device", args.device] + (["--only", args.only] if args.only else []) + \
        (["--big"] if args.big else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--big", action="store_true")
    args = ap.parse_args()
    t1 = run("torch", args)
    e = run("ember", args)
    t2 = run("torch", args)
    print(f"{'figure':28} {'torch':>10} {'ember':>10} {'ratio':>7}")
    for k in t1:
        if k in ("impl", "device", "big"):
            continue
        tv = (t1[k] + t2.get(k, t1[k])) / 2
        ev = e.get(k)
        if ev is None:
            print(f"{k:28} {tv:10.4g} {'failed':>10}")
            continue
        ratio = tv / ev if k.endswith(HIGHER_IS_BETTER) else ev / tv
        print(f"{k:28} {tv:10.4g} {ev:10.4g} {ratio:7.2f}x")


if __name__ == "__main__":
    main()
