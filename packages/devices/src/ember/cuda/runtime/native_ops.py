"""Native launch plans of calls that are not pointwise (matmul, reductions, softmax, norms, ...).

`build(backend, op, args)` runs the op's cuda slot once more with its device work recorded
(Triton launches through FastLauncher, cuBLASLt matmuls, cuBLAS / the fake device's GEMM) and
every other way a slot can touch memory watched (nested op calls, copies, memsets, pointwise
runs). A call that did exactly one launch or one cuBLASLt matmul, whose pointers are all its
tensor arguments' data or its one fresh output, becomes a plan C++ replays (csrc/devplan.cpp):
the same launch with the same constants, the output allocated as the slot allocated it. Any
other shape of call (a temporary buffer, a copy, two launches, a random op, a tuple result)
stays on the Python path. Under the same key (dtypes, sizes, strides, alignment, scalar values)
the slot's decisions are the same, so its constants are too; EMBER_CUDA_FAKE runs the same
recording (no launch under nolaunch; the interpreter or numpy under EMBER_CUDA_FAKE_PLANS=1).
"""
from __future__ import annotations

import ctypes
import struct

from ember import _dispatch
from ember import _dtype as D
from ember._tensor import Tensor

from . import driver as rt
from .allocator import round_size
from .launcher import SIGNATURES, FakeRun, FastLauncher, _nop

__all__ = ["build", "cublaslt_matmul_address"]

_MEMORY_FNS = ("memset8", "memcpy_htod", "memcpy_dtoh", "memcpy_peer")
_LT_ADDR: list = []
_CU_ADDR: dict = {}


class _Foreign(Exception):
    """Recorded device work a plan cannot replay."""


class _Watch(_dispatch.DispatchMode):
    """Marks the recording foreign when the slot dispatches an op that is not a view."""

    def __init__(self, rec):
        self.rec = rec

    def __ember_dispatch__(self, op, args, out):
        if op.view is None:
            self.rec.foreign = True
        return _dispatch.call_below_modes(op, args, out)


class _LtProxy:
    """cuBLASLt's binding module with `matmul` recorded (everything else passes through)."""

    def __init__(self, lt, rec):
        self._lt, self._rec = lt, rec

    def __getattr__(self, name):
        return getattr(self._lt, name)

    def matmul(self, *a):
        self._rec.events.append(("lt", a))
        return self._lt.matmul(*a)


class _Recorder:
    """Patches the launch points for one slot call (single-threaded use: the builder runs under
    the GIL on a miss; patched class attributes are restored before it returns)."""

    def __init__(self, backend):
        self.backend, self.events, self.foreign = backend, [], False

    def __enter__(self):
        from .. import blas, blaslt
        rec, saved = self, []
        self._saved = saved
        call0, fast0 = FastLauncher.__call__, FastLauncher.fast

        def call(launcher, fn, grid, args, key, constexprs):
            r = call0(launcher, fn, grid, args, key, constexprs)
            rec.events.append(("triton", fn, tuple(grid), list(args), launcher.last))
            return r

        def fast(launcher, *a):
            rec.foreign = True  # raw arguments: pointers and scalars cannot be told apart
            return fast0(launcher, *a)
        saved += [(FastLauncher, "__call__", call0), (FastLauncher, "fast", fast0)]
        FastLauncher.__call__, FastLauncher.fast = call, fast
        gemm0 = blas.gemm

        def gemm(a, b, out, alpha=1.0, beta=0.0, batch=None):
            rec.events.append(("gemm", a, b, out, alpha, beta))
            return gemm0(a, b, out, alpha, beta, batch)
        saved.append((blas, "gemm", gemm0))
        blas.gemm = gemm
        if blaslt._mod:
            saved.append((blaslt, "_mod", list(blaslt._mod)))
            blaslt._mod[:] = [_LtProxy(blaslt._mod[0], rec)]
        copy0 = rt.memcpy_dtod

        def copy(dst, src, n, stream):
            rec.events.append(("copy", dst, src, n, stream))
            return copy0(dst, src, n, stream)
        saved.append((rt, "memcpy_dtod", copy0))
        rt.memcpy_dtod = copy
        for name in _MEMORY_FNS:
            f0 = getattr(rt, name)
            saved.append((rt, name, f0))
            setattr(rt, name, self._foreign(f0))
        pw = getattr(self.backend, "pw", None)
        if pw is not None:
            saved.append((pw, "run", None))
            pw.run = self._foreign(pw.run)
        self._mode = _Watch(self).__enter__()
        return self

    def _foreign(self, f):
        def watched(*a, **k):
            self.foreign = True
            return f(*a, **k)
        return watched

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
    if c in (tuple, list):
        return 5 if all(x.__class__ is int for x in a) else None
    return 3


def build(backend, op, args):
    """The native description of a non-pointwise call (see runtime/native.py `build` for its
    layout), or None when its slot's device work is not one replayable launch."""
    if "random" in op.tags or op.pointwise is not None:
        return None
    slot = op.kernels.get("cuda")
    kinds = [_kind(a) for a in args]
    if slot is None or None in kinds:
        return None
    st = _dispatch.state
    grad = st.grad_enabled
    rec = _Recorder(backend)
    st.grad_enabled = False
    try:
        with rec:
            r = slot(*args)
    except Exception:  # noqa: BLE001 - the Python path ran this call already: no plan
        return None
    finally:
        st.grad_enabled = grad
    if rec.foreign or r.__class__ is not Tensor or r._offset != 0:
        return None
    try:
        return _describe(op, args, kinds, r, rec.events)
    except _Foreign:
        return None


def _addresses(args, r):
    """address -> source (argument position, -1 the output); None when two coincide."""
    src = {}
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._storage is r._storage:
                return None
            p = a.data_ptr()
            if p in src and src[p] != i:
                return None
            src[p] = i
    p = r.data_ptr()
    if p in src:
        return None
    src[p] = -1
    return src


def _describe(op, args, kinds, r, events):
    src = _addresses(args, r)
    if src is None or len(events) not in (1, 2):
        return None
    dev = r.device
    lt = [e for e in events if e[0] == "lt"]
    gem = [e for e in events if e[0] == "gemm"]
    tri = [e for e in events if e[0] == "triton"]
    if tri and len(events) == 1:
        desc = _triton(tri[0], src, args, dev)
    elif events[0][0] == "copy" and len(events) == 1:
        desc = _copy(events[0], src, dev)
    elif gem and len(gem) == 1 and len(lt) == len(events) - 1:
        desc = _gemm(gem[0], lt[0] if lt else None, src, dev)
        kinds = [4 if k == 0 else k for k in kinds]  # (cuBLASLt's algorithm: alignment up to 256)
    else:
        return None
    if desc is None:
        return None
    launch, params, fake = desc
    nbytes = r._storage.nbytes
    alloc = backend_allocator(dev)
    return (tuple(kinds), D.get_default_dtype(), None, None,
            (r._shape, r._stride, r.dtype, dev, (alloc.malloc, alloc, nbytes, round_size(nbytes))),
            launch, params, fake, None)


def backend_allocator(dev):
    from .._backend import _allocators, allocator
    i = dev.index or 0
    return _allocators.get(i) or allocator(i)


def _pointer(addr, src):
    s = src.get(addr)
    if s is None:
        raise _Foreign
    return s


def _triton(ev, src, args, dev):
    from ..kernels.pointwise import Operand
    from . import native
    _, fn, grid, call, last = ev
    if last is None or len(grid) > 3:
        return None
    run, prefix, cvals = last
    sources = [((_pointer(a.addr, src), None) if isinstance(a, Operand) else (-2, a))
               for a in call]
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
    if src.get(dst) != -1 or stream != 0 or n <= 0:
        return None
    cells = ((-1, "p", None), (_pointer(s, src), "p", None), (-2, "Q", int(n)), (-2, "Q", 0))
    if rt.FAKE:
        fake = None if rt.NOLAUNCH else (lambda raw: ctypes.memmove(
            *struct.unpack("<QQQ", raw[:24])))
        return (0, 1, 1, 1, 32, 0, 0), cells, fake
    fn = libcuda_address("cuMemcpyDtoDAsync_v2")
    ctx = rt._ctx.get(dev.index or 0)
    if not fn or ctx is None:
        return None
    return (fn, 1, 1, 1, 32, 0, int(ctx), 1), cells, None


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
    if pc != -1:
        return None
    if lt is None:  # the fake device (or plain cuBLAS: no plan)
        if not rt.FAKE:
            return None
        cells = [(-2, "Q", 0)] * 16
        cells[3], cells[5], cells[8], cells[10] = (pb, "p", None), (pa, "p", None), (
            -1, "p", None), (-1, "p", None)
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
             (-1, "p", None), q(lc), (-1, "p", None), q(ld), q(algo), q(ws), q(wsz), q(0))
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
