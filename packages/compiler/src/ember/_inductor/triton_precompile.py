"""A CUDA graph's Triton kernels compiled in parallel before its first run.

Triton compiles a kernel at its first launch, holding the GIL (threads do not overlap them), so
the kernels of a compiled graph compiled one after another: most of the first compiled step of
a GPT-2 train step. Before a graph's first run its wrapper's launches are read (static graphs
name every launch with literal grids, block sizes and constexprs: `_launch(kernel, grid, bufs,
ints, XBLOCK, RBLOCK, opts)`), and each launch whose operands are known (the graph's inputs,
buffers it allocates) is compiled in a pool of worker processes: `JITFunction.warmup` with
stand-in pointers of the same dtypes and 16-byte alignment, under a driver that reports the
GPU's target and touches no CUDA context. The workers write Triton's on-disk cache; the graph's
own launches then compute the same keys and load the compiled kernels from it. A launch this
cannot read compiles at its launch, as before; a failed worker costs nothing but its time.

Real GPUs only (the fake device runs Triton's interpreter). Opt-in: `EMBER_COMPILE_WORKERS=N`
starts N workers (this file run as a script, fed one job a line). Measured on an H100 (torch
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
    dev = rt.current_device()
    cc = (rt.attribute(dev, "COMPUTE_CAPABILITY_MAJOR") * 10
          + rt.attribute(dev, "COMPUTE_CAPABILITY_MINOR"))
    try:
        return _Pool.get(n).run([j + [cc] for j in jobs])
    except (OSError, ValueError) as e:  # no worker: each launch compiles its kernel
        log.debug("parallel Triton compile unavailable (%s)", e)
        return 0


class _Pool:
    """Worker processes running this file as a script (no ember import, and never the user's
    main module, which multiprocessing's spawn and forkserver would run again): one JSON job a
    line on stdin, one reply a line on stdout."""

    _one = None

    def __init__(self, n):
        import subprocess
        import sys
        self.pid = os.getpid()
        self.procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, env=dict(os.environ)) for _ in range(n)]

    @classmethod
    def get(cls, n):
        p = cls._one
        if p is None or p.pid != os.getpid() or any(q.poll() is not None for q in p.procs):
            p = cls._one = cls(n)
        return p

    def run(self, jobs) -> int:
        import json
        share = [jobs[i::len(self.procs)] for i in range(len(self.procs))]
        for q, mine in zip(self.procs, share):
            for j in mine:
                q.stdin.write(json.dumps(j) + "\n")
            q.stdin.flush()
        done = 0
        for q, mine in zip(self.procs, share):
            for _ in mine:
                line = q.stdout.readline()
                if not line:
                    raise OSError("a Triton compile worker exited")
                done += line.startswith("ok")
                if not line.startswith("ok"):
                    log.debug("parallel Triton compile failed: %s", line.strip())
        return done


# ---- in a worker ------------------------------------------------------------------------------

class _Dtype:
    """An ember dtype by name (its str is what Triton's specializer reads)."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    __repr__ = __str__


class _Ptr:
    """A device pointer of a dtype: address 0 is 16-byte aligned, 8 is not."""

    __slots__ = ("addr", "dtype")

    def __init__(self, addr, dtype):
        self.addr, self.dtype = addr, dtype

    def data_ptr(self):
        return self.addr


_DRIVER: list = []


def _target_driver(cc: int):
    """Triton's active driver in a worker: the GPU's target, no CUDA context."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia import driver as nvd

    class TargetOnly(nvd.CudaDriver):
        def __init__(self):
            pass

        def get_current_device(self):
            return 0

        def set_current_device(self, device):
            pass

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return GPUTarget("cuda", cc, 32)

        launcher_cls = nvd.CudaLauncher

        @staticmethod
        def is_active():
            return True

    if not _DRIVER or _DRIVER[0] != cc:
        triton.runtime.driver.set_active(TargetOnly())
        _DRIVER[:] = [cc]


def compile_job(path, name, kinds, ints, grid, consts, cc) -> None:
    """Compile one launch into Triton's cache (runs in a worker)."""
    import importlib.util
    _target_driver(cc)
    spec = importlib.util.spec_from_file_location(f"ember_pre_{os.path.basename(path)[:-3]}",
                                                  path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ptrs = [_Ptr(0 if aligned else 8, _Dtype(dt)) for dt, aligned in kinds]
    kernel = getattr(mod, name).warmup(*ptrs, *ints, grid=grid, **consts)
    # the kernel's C launcher (Triton builds one a signature with the C compiler, into its cache,
    # at the kernel's first launch in Tritons before 3.9): built here, loaded there
    import triton
    cls = getattr(triton.runtime.driver.active, "launcher_cls", None)
    if cls is not None and kernel is not None:
        try:
            cls(kernel.src, kernel.metadata)
        except Exception:  # noqa: BLE001 - a Triton whose launcher needs the GPU: built there
            pass


def _serve() -> None:
    import json
    import sys
    import traceback
    for line in sys.stdin:
        try:
            path, name, kinds, ints, grid, consts, cc = json.loads(line)
            compile_job(path, name, kinds, ints, tuple(grid), consts, cc)
            sys.stdout.write("ok\n")
        except Exception as e:  # noqa: BLE001 - reported; the launch compiles it
            msg = "".join(traceback.format_exception_only(type(e), e)).replace("\n", " ")
            sys.stdout.write(f"error {msg}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    import sys
    # run as a script, this file's folder leads sys.path: its triton.py would shadow Triton
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    _serve()
