"""Native launch plans of calls that are not pointwise (matmul, reductions, softmax, norms, ...).

`build(backend, op, args)` arms an op; its next slot call runs with its device work recorded
(Triton launches through FastLauncher, cuBLASLt matmuls, cuBLAS / the fake device's GEMM,
device-to-device copies, the allocator's mallocs) and every other way a slot can touch memory
watched (nested op calls, memsets, host copies, pointwise runs). A call whose launches only
touch its tensor arguments' data, its fresh outputs and its own temporaries becomes a plan C++
replays (csrc/devplan*.cpp): the same launches with the same constants, outputs and temporaries
allocated as the slot allocated them (temporaries freed after the launches, stream-ordered).
Anything else (a nested op, a memset, a view into a temporary, a random op) stays on the Python
path. Under the same key (dtypes, sizes, strides, alignment, scalar values) the slot's
decisions are the same, so its constants are too. EMBER_CUDA_FAKE runs the same recording (no
launch under nolaunch; the interpreter or numpy under EMBER_CUDA_FAKE_PLANS=1).
"""
from __future__ import annotations

import ctypes
import struct
import threading

from ember import _dispatch
from ember import _dtype as D
from ember._tensor import Tensor

from . import device_errors
from . import driver as rt
from .allocator import CachingAllocator, round_size
from .launcher import SIGNATURES, FakeRun, FastLauncher, _nop

__all__ = ["build", "cublaslt_matmul_address"]

_MEMORY_FNS = ("memcpy_htod", "memcpy_dtoh", "memcpy_peer")
_LT_ADDR: list = []
_CU_ADDR: dict = {}


class _Foreign(Exception):
    """Recorded device work a plan cannot replay."""


class _Watch(_dispatch.DispatchMode):
    """Sees the ops a slot calls: their device work is recorded like the slot's own, but a random
    op (its seed) or an in-place op on the call's arguments (its version bump, a host-side
    effect a replay would not repeat) makes the recording foreign."""

    def __init__(self, rec, args):
        self.rec = rec
        self.outer = [a._storage for a in args if isinstance(a, Tensor)]

    def __ember_dispatch__(self, op, args, out):
        if "random" in op.tags or out is not None:
            self.rec.foreign = True
        elif op.inplace_of is not None or op.mutated_idx:
            for a in args:
                if isinstance(a, Tensor) and any(a._storage is s for s in self.outer):
                    self.rec.foreign = True
        return _dispatch.call_below_modes(op, args, out)


class _LtProxy:
    """cuBLASLt's binding module with `matmul` recorded (everything else passes through)."""

    def __init__(self, lt, rec):
        self._lt, self._rec = lt, rec

    def __getattr__(self, name):
        return getattr(self._lt, name)

    def matmul(self, *a):
        self._rec.add(("lt", a))
        return self._lt.matmul(*a)


class _Library:
    """A vendor binding module (cuBLAS, cuSOLVER, the CUDA driver) whose calls the recorder does
    not replay: calling one (device work a plan would miss) makes the recording foreign.
    `watched(name)` says which names count (the driver's context and event calls do not)."""

    def __init__(self, mod, rec, watched):
        self._mod, self._rec, self._watched = mod, rec, watched

    def __getattr__(self, name):
        v = getattr(self._mod, name)
        if not callable(v) or isinstance(v, type) or not self._watched(name):
            return v
        rec = self._rec

        def call(*a, **k):
            if not rec.inside:
                rec.foreign = True
            return v(*a, **k)
        return call


_DRIVER_WORK = ("cuMemcpy", "cuMemset", "cuLaunch", "cuGraphLaunch")


class _Recorder:
    """Patches the launch points for one slot call (single-threaded use: the builder runs under
    the GIL on a miss; patched class attributes are restored before it returns)."""

    def __init__(self, backend, args):
        self.backend, self.args, self.events, self.foreign = backend, args, [], False
        self.mallocs = {}  # block address -> requested bytes (the slot's own allocations)
        self.tid = threading.get_ident()
        self.inside = 0  # > 0 while a recorded call runs (its own library calls are its work)

    def add(self, ev):
        """Record ev; work of another thread meanwhile (the GIL is released between bytecodes)
        makes the recording foreign: it is not this call's."""
        if threading.get_ident() != self.tid:
            self.foreign = True
        else:
            self.events.append(ev)

    def __enter__(self):
        from .. import blas, blaslt
        rec, saved = self, []
        self._saved = saved
        call0, fast0 = FastLauncher.__call__, FastLauncher.fast

        def call(launcher, fn, grid, args, key, constexprs):
            r = rec.run(call0, launcher, fn, grid, args, key, constexprs)
            rec.add(("triton", fn, tuple(grid), list(args), launcher.last))
            return r

        def fast(launcher, plan, args):
            rec.add(("fast", plan, list(args)))
            return rec.run(fast0, launcher, plan, args)
        saved += [(FastLauncher, "__call__", call0), (FastLauncher, "fast", fast0)]
        FastLauncher.__call__, FastLauncher.fast = call, fast
        gemm0 = blas.gemm

        def gemm(a, b, out, alpha=1.0, beta=0.0, batch=None):
            rec.add(("gemm", a, b, out, alpha, beta))
            return rec.run(gemm0, a, b, out, alpha, beta, batch)
        saved.append((blas, "gemm", gemm0))
        malloc0 = CachingAllocator.malloc

        def malloc(allocator, nbytes, stream):
            b = malloc0(allocator, nbytes, stream)
            if threading.get_ident() == rec.tid:
                rec.mallocs[b.ptr] = nbytes
            else:
                rec.foreign = True
            return b
        saved.append((CachingAllocator, "malloc", malloc0))
        CachingAllocator.malloc = malloc
        blas.gemm = gemm
        if blaslt._mod:
            saved.append((blaslt, "_mod", list(blaslt._mod)))
            blaslt._mod[:] = [_LtProxy(blaslt._mod[0], rec)]
        copy0 = rt.memcpy_dtod

        def copy(dst, src, n, stream):
            rec.add(("copy", dst, src, n, stream))
            return rec.run(copy0, dst, src, n, stream)
        saved.append((rt, "memcpy_dtod", copy0))
        rt.memcpy_dtod = copy
        for name in _MEMORY_FNS:
            f0 = getattr(rt, name)
            saved.append((rt, name, f0))
            setattr(rt, name, self._foreign(f0))
        lp0 = self.backend._launch_plan

        def launch_plan(plan, args, into=None):
            r = rec.run(lp0, plan, args, into)
            rec.add(("pw", plan, args, into, r))
            return r
        saved.append((self.backend, "_launch_plan", None))
        self.backend._launch_plan = launch_plan
        set0 = rt.memset8

        def memset(dst, value, n, stream):
            rec.add(("memset", dst, value, n, stream))
            return rec.run(set0, dst, value, n, stream)
        saved.append((rt, "memset8", set0))
        rt.memset8 = memset
        import sys
        pkg = sys.modules.get("nvmath.bindings")
        for name in ("cublas", "cusolverDn", "cufft", "cusparse"):
            mod = getattr(pkg, name, None) if pkg is not None else None
            if mod is not None:  # (ember's callers import these inside functions)
                saved.append((pkg, name, mod))
                setattr(pkg, name, _Library(mod, self, lambda n: True))
        if rt._cu is not None:
            saved.append((rt, "_cu", rt._cu))
            rt._cu = _Library(rt._cu, self, lambda n: n.startswith(_DRIVER_WORK))
        fv0 = getattr(rt, "fake_view", None)
        if fv0 is not None:  # the fake device's library stand-ins (numpy on its memory)
            saved.append((rt, "fake_view", fv0))
            rt.fake_view = self._foreign(fv0)
        self._mode = _Watch(self, self.args).__enter__()
        return self

    def _foreign(self, f):
        def watched(*a, **k):
            if not self.inside:
                self.foreign = True
            return f(*a, **k)
        return watched

    def run(self, f, *a):
        """f(*a), a call being recorded: the library calls it makes are its own work."""
        self.inside += 1
        try:
            return f(*a)
        finally:
            self.inside -= 1

    def __exit__(self, *exc):
        from .. import blaslt
        self._mode.__exit__()
        for obj, name, v in reversed(self._saved):
            if obj is blaslt and name == "_mod":
                blaslt._mod[:] = v
            elif v is None:
                delattr(obj, name)  # (an instance attribute over the class's method)
            else:
                setattr(obj, name, v)


def _kind(a):
    c = a.__class__
    if isinstance(a, Tensor):
        if c is not Tensor and (hasattr(c, "__ember_dispatch__")
                                or hasattr(c, "__ember_function__")):
            return None
        return 0
    if c in (float, int, bool, str) or a is None:
        return 2
    if c is list or isinstance(a, tuple):  # (ints, or bools: an output mask; a Size)
        return 5 if all(x.__class__ is int or x.__class__ is bool for x in a) else None
    return 3


# ops whose slot calls are recorded (armed by a builder's first ask; each op records at most
# _RECORDINGS calls, so an op whose plans never build stops paying for it), and the latest
# recording: (thread, args, recorder, result); one only, so no call's tensors stay alive long
ARMED: set = set()
_TAKEN: dict = {}
_LEFT: dict = {}
_RECORDINGS = 64


def reset_plans() -> None:
    """Forget every plan and recording budget: a setting the plans depend on changed (the fake
    device's EMBER_CUDA_FAKE_PLANS), and recordings spent while no plan could come of them (a
    fake launch is no plan without it) must not leave the op unplannable for the process."""
    from ember import _native
    from ember._device import get_backend
    ARMED.clear()
    _TAKEN.clear()
    _LEFT.clear()
    get_backend("cuda")._plans.clear()  # (pointwise launch plans: their runs are fake or not)
    _native.clear_device_plans()


def record_slot(f, backend, op, args):
    """Run a slot kernel f(backend, op, *args) with its device work recorded (kernels/base.py
    calls this for an armed op): the call itself is recorded, never a second run of it."""
    if _dispatch.special[0]:  # a mode or autocast is on: no plan would replay now anyway
        return f(backend, op, *args)
    left = _LEFT.get(op, _RECORDINGS) - 1
    _LEFT[op] = left
    if left <= 0:
        ARMED.discard(op)
    rec = _Recorder(backend, args)
    with rec:
        r = f(backend, op, *args)
    _TAKEN.clear()
    _TAKEN[op] = (threading.get_ident(), args, rec, r)
    return r


def build(backend, op, args):
    """The native description of a non-pointwise call (see runtime/native.py `build` for its
    layout), or None when its slot's device work is not replayable. The first ask about an op
    arms it: its slot calls are recorded (record_slot) and an ask right after one builds the
    plan from that recording (C++ asks twice per call pattern at most)."""
    slot = op.kernels.get("cuda")
    if ("random" in op.tags or op.pointwise is not None
            or getattr(slot, "__module__", "").endswith(".random")):
        return None  # (a seed drawn per call must never be baked into a plan)
    kinds = [_kind(a) for a in args]
    if slot is None or None in kinds:
        return None
    got = _TAKEN.pop(op, None)
    if (got is None or got[0] != threading.get_ident() or len(got[1]) != len(args)
            or any(a is not b for a, b in zip(got[1], args))):
        if _LEFT.get(op, _RECORDINGS) > 0:
            ARMED.add(op)
        return None
    _, _, rec, r = got
    res = (r,) if r.__class__ is Tensor else r
    if rec.foreign or res.__class__ is not tuple or not _device_fixed(op, args):
        return None
    # (None items: gradients not asked for, as convolution_backward's; the plan makes the
    # tensors and puts None back where the call returned it)
    outs = tuple(o for o in res if o is not None)
    if (not outs or len(res) > 10
            or any(o.__class__ is not Tensor or o._offset != 0 or o._requires_grad
                   for o in outs)):
        return None  # (a replay makes tensors that do not require grad: factories' flag)
    try:
        d = _describe(args, kinds, outs, rec, op.name.startswith("empty"))
    except _Foreign:
        return None
    if d is None or len(outs) == len(res):
        return d
    it = iter(range(len(outs)))
    return d + (tuple(None if o is None else next(it) for o in res),)


def _device_fixed(op, args) -> bool:
    """Whether a factory's device argument names one device: "cuda" / device("cuda") mean the
    current device, which a plan (its allocator, keyed by the argument) cannot follow when there
    are several."""
    i = op.device_idx
    d = args[i] if i is not None else None
    if d is None or isinstance(d, int):  # (a *_like op: its tensor's device; an int: an index)
        return True
    fixed = ":" in d if isinstance(d, str) else getattr(d, "index", None) is not None
    return fixed or rt.device_count() <= 1


def _addresses(args, outs, mallocs):
    """(address -> source, extra buffers): arguments by position, the first output -1, the
    other outputs and the slot's temporaries -3 - j (buffer j); None when two coincide or an
    output is not a fresh allocation of the slot."""
    src = {}
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if any(a._storage is o._storage for o in outs):
                return None
            p = a.data_ptr()
            if p in src and src[p] != i:
                return None
            src[p] = i
    bufs = []
    for k, o in enumerate(outs):
        p = o.data_ptr()
        if p in src or p not in mallocs:
            return None
        src[p] = -1 if k == 0 else -3 - len(bufs)
        if k:
            n = o._storage.nbytes
            bufs.append((True, o._shape, o._stride, o.dtype, n, round_size(n)))
    for p, n in mallocs.items():
        if p not in src:  # a temporary (freed after the launches)
            src[p] = -3 - len(bufs)
            bufs.append((False, None, None, None, n, round_size(n)))
    return src, bufs


def _describe(args, kinds, outs, rec, empty=False):
    """empty: the op allocates only (empty, empty_like): a plan of no launch."""
    got = _addresses(args, outs, rec.mallocs)
    if got is None or not (rec.events or empty) or len(got[1]) > 8:
        return None
    src, bufs = got
    dev = outs[0].device
    steps, evs = [], list(rec.events)
    while evs:
        ev = evs.pop(0)
        if ev[0] == "triton":
            step = _triton(ev, src, args, dev)
        elif ev[0] == "copy":
            step = _copy(ev, src, dev)
        elif ev[0] == "memset":
            step = _memset(ev, src, dev)
        elif ev[0] == "pw":
            step = _pointwise(ev, src, dev)
        elif ev[0] == "fast":
            step = _fast(ev, src, dev)
        elif ev[0] == "gemm":
            lt = evs.pop(0) if evs and evs[0][0] == "lt" else None
            step = _gemm(ev, lt, src, dev)
            kinds = [4 if k == 0 else k for k in kinds]  # (cuBLASLt's algorithm: alignment)
        else:
            return None
        if step is None:
            return None
        steps.append(step)
    if len(steps) > 16:
        return None
    if not steps:  # (empty: the allocation is the whole call)
        steps.append(((0, 1, 1, 1, 32, 0, 0), (), None))
    r = outs[0]
    nbytes = r._storage.nbytes
    alloc = backend_allocator(dev)
    launch, params, fake = steps[0]
    extra = (tuple(bufs), tuple(steps[1:])) if bufs or len(steps) > 1 else None
    return (tuple(kinds), D.get_default_dtype(), None, None,
            (r._shape, r._stride, r.dtype, dev, (alloc.malloc, alloc, nbytes, round_size(nbytes))),
            launch, params, fake, extra)


def backend_allocator(dev):
    from .._backend import _allocators, allocator
    i = dev.index or 0
    return _allocators.get(i) or allocator(i)


def _pointer(addr, src):
    s = src.get(addr)
    if s is None:
        raise _Foreign
    return s


def _operand(addr, src):
    """A pointer parameter's source: an argument, output or temporary by position; a device's
    error word (device_errors.py: fixed for the process) as a constant."""
    if addr in device_errors.WORDS:
        return (-2, addr)
    return (_pointer(addr, src), None)


def _triton(ev, src, args, dev):
    from ..kernels.pointwise import Operand
    from . import native
    _, fn, grid, call, last = ev
    if last is None or len(grid) > 3:
        return None
    run, prefix, cvals = last
    sources = [_operand(a.addr, src) if isinstance(a, Operand) else (-2, a) for a in call]
    sources += [(-2, v) for v in cvals]
    g = tuple(grid) + (1,) * (3 - len(grid))
    fake = None
    if run is _nop or isinstance(run, FakeRun):
        types = (["*" if isinstance(a, Operand) else native._value_type(a) for a in call]
                 + ["constexpr"] * len(cvals))
        params = native.describe_params(sources, types)
        launch = (0, g[0], g[1], g[2], 32, 0, 0)
        if params is not None and isinstance(run, FakeRun):
            fake = _fake_triton(run, params, g, cvals, dev)
    else:
        info = SIGNATURES.get(prefix[0]) if len(prefix) == 9 else None
        if info is None:
            return None
        types, meta, attrs = info
        num_warps, num_ctas, shared = meta[:3]
        if attrs or num_ctas != 1 or len(types) != len(sources):
            return None
        params = native.describe_params(sources, types)
        if params is not None:  # Triton's global and profile scratch pointers (unused: null)
            params += ((-2, "p", 0), (-2, "p", 0))
        ctx = rt._ctx.get(dev.index or 0)
        if ctx is None:
            return None
        launch = (int(prefix[0]), g[0], g[1], g[2], 32 * num_warps, shared, int(ctx))
    if params is None:
        return None
    return launch, params, fake


def _fast(ev, src, dev):
    """A memoized launch (FastLauncher.fast: raw addresses and scalars, the pointwise runner's):
    which arguments are pointers comes from the kernel's signature (the fake device: its
    FakeRun's pointer kinds; under nolaunch, nothing runs: an address of the call is one)."""
    from . import native
    _, (run, prefix, cvals, grid, tail), args = ev
    g = tuple(grid) + (1,) * (3 - len(grid))
    fake = None
    if run is _nop or isinstance(run, FakeRun):
        if isinstance(run, FakeRun):
            ptr = [d is not None for d in run.pointers][:len(args)]
        else:
            ptr = [a.__class__ is int and a in src for a in args]
        if len(ptr) != len(args):
            return None
        sources = [_operand(a, src) if p else (-2, a) for a, p in zip(args, ptr)]
        sources += [(-2, v) for v in tail] + [(-2, v) for v in cvals]
        types = (["*" if p else native._value_type(a) for a, p in zip(args, ptr)]
                 + [native._value_type(v) for v in tail] + ["constexpr"] * len(cvals))
        params = native.describe_params(sources, types)
        launch = (0, g[0], g[1], g[2], 32, 0, 0)
        if params is not None and isinstance(run, FakeRun):
            fake = _fake_triton(run, params, g, cvals, dev)
    else:
        info = SIGNATURES.get(prefix[0]) if len(prefix) == 9 else None
        if info is None:
            return None
        types, meta, attrs = info
        num_warps, num_ctas, shared = meta[:3]
        n = len(args) + len(tail) + len(cvals)
        if attrs or num_ctas != 1 or len(types) != n:
            return None
        sources = [_operand(a, src) if t.startswith("*") else (-2, a)
                   for a, t in zip(args, types)]
        sources += [(-2, v) for v in tail] + [(-2, v) for v in cvals]
        params = native.describe_params(sources, types)
        if params is not None:
            params += ((-2, "p", 0), (-2, "p", 0))
        ctx = rt._ctx.get(dev.index or 0)
        if ctx is None:
            return None
        launch = (int(prefix[0]), g[0], g[1], g[2], 32 * num_warps, shared, int(ctx))
    if params is None:
        return None
    return launch, params, fake


def _fake_triton(run, params, grid, cvals, dev):
    """Decode the cells C++ packed and run the kernel in the interpreter (the fake device)."""
    from .native import _STRUCT
    fmt = "<" + "".join(_STRUCT[c] + "x" * (8 - struct.calcsize(_STRUCT[c])) for _, c, _ in params)
    bools = [c == "?" for _, c, _ in params]

    def launch(raw: bytes):
        vals = [bool(v) if b else v for v, b in zip(struct.unpack(fmt, raw), bools)]
        rt.context(dev.index or 0)
        run(grid[0], grid[1], grid[2], 0, *vals, *cvals)
    return launch


def libcuda_address(name: str) -> int:
    """The address of a libcuda entry point (its versioned name), or 0."""
    addr = _CU_ADDR.get(name)
    if addr is None:
        try:
            fn = getattr(ctypes.CDLL("libcuda.so.1"), name)
            addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
        except (OSError, AttributeError):
            addr = 0
        _CU_ADDR[name] = addr
    return addr


def _copy(ev, src, dev):
    """A device-to-device copy into the fresh output (clone of a contiguous tensor) as a C call
    of cuMemcpyDtoDAsync_v2(dst, src, nbytes, stream 0); on the fake device a memmove."""
    _, dst, s, n, stream = ev
    d = src.get(dst)
    if d is None or d >= 0 or stream != 0 or n <= 0:  # (into an output or a temporary only)
        return None
    cells = ((d, "p", None), (_pointer(s, src), "p", None), (-2, "Q", int(n)), (-2, "Q", 0))
    return _driver_call("cuMemcpyDtoDAsync_v2", cells, ctypes.memmove, dev)


def _driver_call(name, cells, host_fn, dev):
    """A plan step calling libcuda's `name` with three pointer-sized cells and stream 0; on
    the fake device host_fn (memmove / memset) on the same three values."""
    if rt.FAKE:
        fake = None if rt.NOLAUNCH else (lambda raw: host_fn(*struct.unpack("<QQQ", raw[:24])))
        return (0, 1, 1, 1, 32, 0, 0), cells, fake
    fn = libcuda_address(name)
    ctx = rt._ctx.get(dev.index or 0)
    if not fn or ctx is None:
        return None
    return (fn, 1, 1, 1, 32, 0, int(ctx), 1), cells, None


def _memset(ev, src, dev):
    """A byte fill of an output or temporary: cuMemsetD8Async(dst, value, nbytes, stream 0)."""
    _, dst, value, n, stream = ev
    d = src.get(dst)
    if d is None or d >= 0 or stream != 0 or n <= 0:
        return None
    cells = ((d, "p", None), (-2, "Q", int(value) & 255), (-2, "Q", int(n)), (-2, "Q", 0))
    return _driver_call("cuMemsetD8Async", cells, ctypes.memset, dev)


def _pointwise(ev, src, dev):
    """A pointwise launch of a nested op (the backend's cached plan, runtime/native.py's
    layout): its output and tensors by address, its runtime scalars baked (fixed under the
    outer call's key)."""
    from . import native
    _, plan, args, into, out = ev
    (_, _, _, _, _, tens, scal, run, prefix, cvals, grid, tail, _, _) = plan
    o = into if into is not None else out
    if o is None or o.__class__ is not Tensor:
        return None
    sources = [(_pointer(o.data_ptr(), src), None)]
    sources += [(_pointer(args[i].data_ptr(), src), None) for i in tens]
    sources += [(-2, args[i]) for i in scal] + [(-2, v) for v in tail]
    sources += [(-2, v) for v in cvals]
    if run is _nop or isinstance(run, FakeRun):
        types = (["*"] * (1 + len(tens)) + [native._value_type(args[i]) for i in scal]
                 + [native._value_type(v) for v in tail] + ["constexpr"] * len(cvals))
        params = native.describe_params(sources, types)
        fake = None
        if params is not None and isinstance(run, FakeRun):
            fake = _fake_triton(run, params, (grid[0], 1, 1), cvals, dev)
        launch = (0, grid[0], 1, 1, 32, 0, 0)
    else:
        info = SIGNATURES.get(prefix[0]) if len(prefix) == 9 else None
        if info is None:
            return None
        types, meta, attrs = info
        num_warps, num_ctas, shared = meta[:3]
        if attrs or num_ctas != 1 or len(types) != len(sources):
            return None
        params = native.describe_params(sources, types)
        if params is not None:
            params += ((-2, "p", 0), (-2, "p", 0))
        ctx = rt._ctx.get(dev.index or 0)
        if ctx is None:
            return None
        fake = None
        launch = (int(prefix[0]), grid[0], 1, 1, 32 * num_warps, shared, int(ctx))
    if params is None:
        return None
    return launch, params, fake


def cublaslt_matmul_address() -> int:
    """The address of cublasLtMatmul in the loaded cuBLASLt (nvmath-python loaded it), or 0."""
    if not _LT_ADDR:
        addr = 0
        try:
            with open("/proc/self/maps") as f:
                paths = {ln.split()[-1] for ln in f if "libcublasLt.so" in ln}
            for p in sorted(paths):
                fn = ctypes.CDLL(p).cublasLtMatmul
                addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
                if addr:
                    break
        except (OSError, AttributeError):
            addr = 0
        _LT_ADDR.append(addr)
    return _LT_ADDR[0]


def _gemm(ev, lt, src, dev):
    """A cuBLASLt matmul as a C call of 16 u64 cells (csrc/devplan_launch.cpp `ccall`); on the
    fake device the same cells, decoded by a numpy stand-in."""
    from .. import blas
    _, a, b, out, alpha, beta = ev
    if alpha != 1.0 or beta != 0.0:
        return None
    pa, pb, pc = _pointer(a.data_ptr(), src), _pointer(b.data_ptr(), src), _pointer(
        out.data_ptr(), src)
    if pc >= 0:  # (into an output or a temporary only)
        return None
    if lt is None:  # the fake device (or plain cuBLAS: no plan)
        if not rt.FAKE:
            return None
        cells = [(-2, "Q", 0)] * 16
        cells[3], cells[5], cells[8], cells[10] = (pb, "p", None), (pa, "p", None), (
            pc, "p", None), (pc, "p", None)
        fake = None if rt.NOLAUNCH else _fake_gemm(a, b, out)
        return (0, 1, 1, 1, 32, 0, 0), tuple(cells), fake
    (h, desc, al, pb_, la, pa_, lb, be, pc_, lc, pd_, ld, algo, ws, wsz, stream) = lt[1]
    consts = set(blas._ONE_P.values()) | set(blas._ZERO_P.values())
    fn = cublaslt_matmul_address()
    if (stream != 0 or al not in consts or be not in consts or pa_ != a.data_ptr()
            or pb_ != b.data_ptr() or pc_ != out.data_ptr() or pd_ != pc_ or not fn):
        return None
    ctx = rt._ctx.get(dev.index or 0)
    if ctx is None:
        return None
    q = lambda v: (-2, "Q", int(v))  # noqa: E731
    cells = (q(h), q(desc), q(al), (pb, "p", None), q(la), (pa, "p", None), q(lb), q(be),
             (pc, "p", None), q(lc), (pc, "p", None), q(ld), q(algo), q(ws), q(wsz), q(0))
    return (fn, 1, 1, 1, 32, 0, int(ctx), 1), cells, None


def _fake_gemm(a, b, out):
    """numpy's matmul on the addresses C++ packed (cells 5, 3, 8: a, b, out), laid out as the
    recorded operands were (their sizes and strides: fixed under the plan's key)."""
    import numpy as np
    la = (tuple(a.shape), a.stride(), a.dtype)
    lb = (tuple(b.shape), b.stride(), b.dtype)
    lo = (tuple(out.shape), out.stride(), out.dtype)
    acc = np.float64 if out.dtype is D.float64 else np.float32

    def view(addr, lay):
        shape, stride, dt = lay
        it = dt.itemsize
        span = 1 + sum((n - 1) * s for n, s in zip(shape, stride) if n)
        buf = (ctypes.c_char * (span * it)).from_address(addr)
        flat = np.frombuffer(buf, dtype=dt.np)
        return np.lib.stride_tricks.as_strided(flat, shape, tuple(s * it for s in stride))

    def launch(raw: bytes):
        cells = struct.unpack("<16Q", raw)
        va, vb, vo = view(cells[5], la), view(cells[3], lb), view(cells[8], lo)
        vo[...] = np.matmul(va.astype(acc), vb.astype(acc)).astype(vo.dtype)
    return launch
