"""Worker processes that compile Triton kernels into Triton's on-disk cache (the compiler's
`_inductor/triton_precompile.py` sends them a CUDA graph's launches before its first run).

A worker is this file run as a script (no ember import, and never the user's main module, which
multiprocessing's spawn and forkserver would run again), fed one JSON job a line on stdin and
answering one line on stdout. It compiles with `JITFunction.warmup` and stand-in pointers of the
launch's dtypes and 16-byte alignment under a Triton driver that reports the GPU's target and
touches no CUDA context, so its cache keys are the launcher's own.
"""
from __future__ import annotations

import logging
import os

__all__ = ["Pool", "compile_job"]

log = logging.getLogger("ember.cuda")


class Pool:
    """The worker processes of this process (one set; started again after a fork or a
    worker's exit)."""

    _one = None

    def __init__(self, n):
        import subprocess
        import sys
        self.pid = os.getpid()
        self.errors: list = []   # the workers' error lines (the launches compile those kernels)
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
                    self.errors.append(line.strip())
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
    # run as a script, this file's folder leads sys.path (symbolic links resolved, as Bazel's
    # runfiles are): its driver.py and the like must not shadow top-level modules
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    _serve()
