"""What every kernel family shares: `cuda_kernel` (fills an op entry's cuda slot), the launch of a
hand-written Triton kernel (`_launch`, `_launch_rows`), row layouts (`_rows`), accumulator dtypes
(`_ACC`) and the lazy import of the Triton modules (`_lazy`: triton is optional at import).

A kernel f(backend, op, *args) returning NotImplemented leaves the call to the dispatcher's rule
(the decomposition, else the op's CPU kernel on host copies). Kernels ask the op's meta for the
result shape and dtype.
"""
from __future__ import annotations

import importlib

from ember._ops.registry import Tensor, get_backend, lookup, register_kernel
from ember._ops.registry import dtypes as D

from ..runtime import driver as rt
from ..runtime.launcher import FastLauncher
from ..runtime.native_ops import ARMED, record_slot
from .pointwise import Operand, Unsupported

_BE = get_backend("cuda")


def cuda_kernel(*qualnames):
    """Decorator: fill these ops' cuda slots (`register_kernel(op, "cuda", ...)`) with a kernel
    f(backend, op, *args) (run in the device's context; NotImplemented declines a call)."""
    def fill(f):
        for q in qualnames:
            op = lookup(q)
            register_kernel(op, "cuda", _slot(_BE, op, f))
        return f
    return fill


def _slot(backend, op, f):
    """A kernel f(backend, op, *args) as a slot kernel(*args), in the device's context;
    f returns NotImplemented for calls it leaves to the dispatcher's rule (decomp, else host)."""
    def kernel(*args):
        rt.ensure_context(_dev_index(args))
        if not _ACC:
            _ACC.update(_acc())
        try:
            if ARMED and op in ARMED:  # (a native plan is being made: runtime/native_ops.py)
                return record_slot(f, backend, op, args)
            return f(backend, op, *args)
        except Unsupported:  # a dtype the Triton kernels lack (complex, fp8): the host rule
            return NotImplemented
    kernel.__qualname__ = f"cuda[{op.qualname}]"
    kernel.__module__ = f.__module__  # the family module that registered it
    return kernel


_LAZY: dict = {}


def _lazy(name):
    """A kernel module (imports triton) on first use; a dict lookup after (an import statement
    in a function costs ~1-2 us a call)."""
    m = _LAZY.get(name)
    if m is None:
        m = _LAZY[name] = importlib.import_module("ember.cuda.kernels." + name)
    return m

_RBLOCK = 1024


def _dev_index(args) -> int:
    for a in args:
        if isinstance(a, Tensor) and a.device.type == "cuda":
            return a.device.index or 0
    return rt.current_device()


# ---- reductions -------------------------------------------------------------------------------
def _rows(be, x, dims):
    """x with the reduced dims moved last, contiguous, as (R, C)."""
    nd = x.ndim
    keep = [d for d in range(nd) if d not in dims]
    perm = keep + sorted(dims)
    if perm != list(range(nd)):
        x = x.permute(perm)
    if not x.is_contiguous():
        x = be._copy_new(x, x.dtype)
    C = 1
    for s in tuple(x.shape)[len(keep):]:
        C *= s
    R = x.numel() // C if C else 0
    return x, R, C


def _launch_rows(be, kern, x, out, R, C, constexprs, extra=(), grid=None):
    if not hasattr(be, "_rowlaunch"):
        be._rowlaunch = FastLauncher()
    a = Operand(None, x.data_ptr(), (), (), x.dtype)
    o = Operand(None, out.data_ptr(), (), (), out.dtype)
    key = (kern.__name__, x.dtype, out.dtype, C > 2**31 - 1) + tuple(
        str(v) for v in constexprs.values())
    be._rowlaunch(kern, grid or (R,), [a, o, C, *extra], key, constexprs)


# ---- nn ----------------------------------------------------------------------------------------
def _launch(be, kern, grid, args, key, constexprs):
    """Launch a hand-written kernel: tensors become pointer operands."""
    if not hasattr(be, "_rowlaunch"):
        be._rowlaunch = FastLauncher()
    call, k = [], [kern.__name__]
    for a in args:
        if isinstance(a, Tensor):
            call.append(Operand(None, a.data_ptr(), (), (), a.dtype))
            k.append(a.dtype)
        else:
            call.append(a)
            k.append(type(a) if not isinstance(a, int) or abs(a) < 2**31 else "i64")
    k += [str(v) for v in constexprs.values()]
    be._rowlaunch(kern, grid, call, tuple(k) + tuple(key), constexprs)


def _cont(be, x):
    return x if x.is_contiguous() else be._copy_new(x, x.dtype)

_FLOAT = (D.float32, D.float16, D.bfloat16, D.float64)


def _acc_tl(dt):
    """The Triton accumulator dtype of dt (float32 for 16-bit floats)."""
    return _ACC[dt]


def _acc_dt(dt):
    """The ember dtype statistics and partial sums accumulate in."""
    return D.float64 if dt is D.float64 else D.float32


def _block(n, lo=128, hi=1024):
    """A power-of-two block covering n, clamped to [lo, hi]."""
    return max(lo, min(hi, 1 << max(0, (n - 1).bit_length())))



def be_dtypes():
    from .._backend import _TL_OK
    return _TL_OK


def _acc():
    import triton.language as tl
    return {D.float16: tl.float32, D.bfloat16: tl.float32, D.float32: tl.float32,
            D.float64: tl.float64, D.int64: tl.int64, D.int32: tl.int64, D.int16: tl.int64,
            D.int8: tl.int64, D.uint8: tl.int64, D.bool: tl.int64}


_ACC: dict = {}   # accumulator dtype per input dtype: filled (importing triton) on a first call


_RB = 1024           # block of the row loops


def _view(t, shape, stride, offset):
    """A view of t's storage (no autograd bookkeeping: a kernel's operand)."""
    return Tensor._make(t._storage, tuple(shape), tuple(stride), offset, t.dtype, t.device)


def _on_cuda(*ts):
    dev = None
    for t in ts:
        if not isinstance(t, Tensor) or t.device.type != "cuda":
            return None
        if dev is None:
            dev = t.device
        elif t.device != dev:
            return None
    return dev


def _pw(be, op, args, tensor_pos, out, rdt, cdt):
    """One generated pointwise launch of op's formula (args: tensors and Python values in
    op.pointwise's order; tensor_pos: which are tensors) into the tensor `out`."""
    a = [be._operand(x) if i in tensor_pos else x for i, x in enumerate(args)]
    be.pw.run(op, a, tensor_pos.__contains__, be._operand(out), rdt, cdt)


def _ok(*dts):
    return all(d in _ACC for d in dts)


def _rblock(C):
    return max(16, min(_RB, 1 << max(C - 1, 0).bit_length()))
