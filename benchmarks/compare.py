"""Run the side-by-side workloads on torch and on ember in one run and print the ratios.

    python benchmarks/compare.py --only op_overhead,elementwise,matmul
    python benchmarks/compare.py --device cuda --big          # on the lent GPU
    python benchmarks/compare.py --compile --only elementwise,mlp_train,cnn_train,gpt_train

--compile runs every workload through torch.compile / ember.compile (compared with
torch.compile), each run with empty compile caches (first-step times are cold: fresh
TORCHINDUCTOR_CACHE_DIR, EMBER_CPU_KERNEL_CACHE and TRITON_CACHE_DIR directories), and adds a
column of PyTorch eager (one more torch run without --compile) for the targets set against eager.

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
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HIGHER_IS_BETTER = ("GBps", "TFLOPs")


def run(impl: str, args, compile_: bool | None = None) -> dict:
    compile_ = args.compile if compile_ is None else compile_
    env = dict(os.environ)
    if compile_:  # cold caches: the first step pays the whole compile
        cache = tempfile.mkdtemp(prefix=f"bench-{impl}-")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        env["EMBER_CPU_KERNEL_CACHE"] = os.path.join(cache, "ember")
        env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")   # ember's Triton kernels
    src = [os.path.join(ROOT, "packages", p, "src") for p in sorted(os.listdir(
        os.path.join(ROOT, "packages")))]
    env["PYTHONPATH"] = os.pathsep.join(src + [env.get("PYTHONPATH", "")])
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), "--impl", impl,
           "--device", args.device] + (["--only", args.only] if args.only else []) + \
        (["--big"] if args.big else []) + (["--compile"] if compile_ else []) + \
        ([f"--mode={args.mode}"] if compile_ and args.mode else []) + \
        ([f"--threads={args.threads}"] if args.threads else [])
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
    ap.add_argument("--compile", action="store_true", help="compiled mode (torch.compile)")
    ap.add_argument("--mode", default=None, help="with --compile: torch.compile's mode")
    ap.add_argument("--threads", type=int, default=0, help="set_num_threads(n) in both")
    ap.add_argument("--one-anchor", action="store_true",
                    help="one torch run, not two (torch.compile's cold first steps are long)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    t1 = run("torch", args)
    e = run("ember", args)
    t2 = t1 if args.one_anchor else run("torch", args)
    te = run("torch", args, compile_=False) if args.compile else {}
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
          + ("; torch = torch.compile, ember = ember.compile" if args.compile else ""))
    head = f"{'figure':28} {'torch':>10} {'ember':>10} {'ratio':>7}"
    print(head + (f" {'torch eager':>11} {'ember/eager':>11}" if te else ""))
    for k in t1:
        if k in ("impl", "device", "big", "compile"):
            continue
        tv = (t1[k] + t2.get(k, t1[k])) / 2
        ev = e.get(k)
        if ev is None:
            print(f"{k:28} {tv:10.4g} {'failed':>10}")
            continue
        line = f"{k:28} {tv:10.4g} {ev:10.4g} {_ratio(k, tv, ev):7.2f}x"
        if k in te:
            line += f" {te[k]:11.4g} {_ratio(k, te[k], ev):10.2f}x"
        print(line)


def _ratio(k, tv, ev):
    """ember / torch for times, torch / ember for throughputs: above 1, ember is slower."""
    return tv / ev if k.endswith(HIGHER_IS_BETTER) else ev / tv


if __name__ == "__main__":
    main()
