"""A CUDA graph's Triton kernels compiled in parallel before its first run.

Triton compiles a kernel at its first launch, holding the GIL (threads do not overlap them), so
the kernels of a compiled graph compiled one after another: most of the first compiled step of
a GPT-2 train step. Before a graph's first run its wrapper's launches are read (static graphs
name every launch with literal grids, block sizes and constexprs: `_launch(kernel, grid, bufs,
ints, XBLOCK, RBLOCK, opts)`), and each launch whose operands are known (the graph's inputs,
buffers it allocates) is compiled in a pool of worker processes (ember-devices'
`cuda/runtime/precompile_worker.py`, where Triton is imported): `JITFunction.warmup` with
stand-in pointers of the same dtypes and 16-byte alignment, under a driver that reports the
GPU's target and touches no CUDA context. The workers write Triton's on-disk cache; the graph's
own launches then compute the same keys and load the compiled kernels from it. A launch this
cannot read compiles at its launch, as before; a failed worker costs nothing but its time.

Real GPUs only (the fake device runs Triton's interpreter). Opt-in: `EMBER_COMPILE_WORKERS=N`
starts N workers. Measured on an H100 (torch
2.11's Triton, GPT-2 124M's first compiled step, cold caches): 16 workers 33.1 s against 26.3 s
without, because that Triton also builds a C launcher per kernel signature with the C compiler at
the kernel's first launch (~8 s of the step, 25-29 builds), which still happened in the parent
process, and the workers' start (importing Triton) came on top. Launching the compiled kernels
through ember's own native launcher (no Triton launcher) is what would let this pay.
"""
from __future__ import annotations

import ast
import logging
import os

__all__ = ["plan", "precompile", "workers"]

log = logging.getLogger("ember._inductor")


def workers() -> int:
    """EMBER_COMPILE_WORKERS (0, the default: off; measured not faster yet, see the module's
    docstring)."""
    return max(0, int(os.environ.get("EMBER_COMPILE_WORKERS", "0") or 0))


def _literal(node):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _empties(tree) -> dict:
    """{buffer name: dtype name} of the wrapper's `bufN = _empty(n, _E['ember.x'], dev)`."""
    out = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "_empty"
                and len(node.value.args) >= 2 and isinstance(node.value.args[1], ast.Subscript)):
            ok, name = _literal(node.value.args[1].slice)
            if ok and isinstance(name, str):
                out[node.targets[0].id] = name
    return out


def plan(wrapper: str, args) -> list:
    """The wrapper's launches whose operands are known before the run, as
    (kernel name, [(dtype name, aligned)], ints, grid, constexprs); inputs `inN` are args[N]."""
    tree = ast.parse(wrapper)
    bufs = _empties(tree)
    jobs, seen = [], set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "_launch" and len(node.args) >= 6
                and isinstance(node.args[0], ast.Name) and isinstance(node.args[2], ast.Tuple)):
            continue
        lits = [_literal(a) for a in (node.args[1], node.args[3], node.args[4], node.args[5])]
        opts = _literal(node.args[6]) if len(node.args) > 6 else (True, None)
        if not all(ok for ok, _ in lits) or not opts[0]:
            continue  # sizes from symbols: compiled at the launch
        grid, ints, xblock, rblock = (v for _, v in lits)
        kinds = []
        for b in node.args[2].elts:
            kind = _kind(b, bufs, args)
            if kind is None:
                break
            kinds.append(kind)
        else:
            consts = {"XBLOCK": xblock, "RBLOCK": rblock, **(opts[1] or {})}
            job = (node.args[0].id, kinds, list(ints), tuple(grid), consts)
            key = repr(job)
            if key not in seen:
                seen.add(key)
                jobs.append(job)
    return jobs


def _kind(node, bufs, args):
    if not isinstance(node, ast.Name):
        return None
    name = node.id
    if name in bufs:
        return bufs[name], True   # the caching allocator's blocks are 512-byte aligned
    if name.startswith("in") and name[2:].isdigit() and int(name[2:]) < len(args):
        t = args[int(name[2:])]
        if hasattr(t, "data_ptr") and hasattr(t, "dtype"):
            return str(t.dtype), t.data_ptr() % 16 == 0
    return None


def precompile(fn_globals: dict, wrapper: str, args) -> int:
    """Compile the wrapper's known launches in the worker processes and wait for them; the
    number compiled there."""
    n = workers()
    if n < 2:
        return 0
    jobs = []
    for name, kinds, ints, grid, consts in plan(wrapper, args):
        code = getattr(getattr(fn_globals.get(name), "fn", None), "__code__", None)
        if code is not None:
            jobs.append([code.co_filename, name, kinds, ints, list(grid), consts])
    if len(jobs) < 2:
        return 0
    from ember.cuda.runtime import driver as rt
    from ember.cuda.runtime.precompile_worker import Pool  # ember-devices: Triton lives there
    dev = rt.current_device()
    cc = (rt.attribute(dev, "COMPUTE_CAPABILITY_MAJOR") * 10
          + rt.attribute(dev, "COMPUTE_CAPABILITY_MINOR"))
    try:
        return Pool.get(n).run([j + [cc] for j in jobs])
    except (OSError, ValueError) as e:  # no worker: each launch compiles its kernel
        log.debug("parallel Triton compile unavailable (%s)", e)
        return 0
