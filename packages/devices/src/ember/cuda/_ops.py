"""GPU kernels for non-pointwise ops: matmul (cuBLAS), copies/fills, reductions, softmax.

`kernel(backend, op)` returns the kernel for an op or None (the backend then runs the op's CPU
kernel on host copies). Each kernel validates like the CPU one by asking the op's meta function
for the result shape and dtype, so errors match.
"""
from __future__ import annotations

from ember import _dtype as D
from ember._tensor import Tensor

from . import _runtime as rt

_RBLOCK = 1024


def kernel(backend, op):
    f = _TABLE.get(op.qualname)
    if f is None:
        return None

    def k(*args):
        rt.ensure_context(_dev_index(args))
        r = f(backend, op, *args)
        return backend._host_call(op, args) if r is NotImplemented else r
    return k


def _dev_index(args) -> int:
    for a in args:
        if isinstance(a, Tensor) and a.device.type == "cuda":
            return a.device.index or 0
    return rt.current_device()


def _matmul(be, op, x, y):
    from ._blas import matmul
    if rt.FAKE or not (isinstance(y, Tensor) and y.device == x.device):
        return NotImplemented
    r = matmul(x, y)
    return NotImplemented if r is None else r


def _clone(be, op, x, memory_format=None):
    return be._copy_new(x, x.dtype)


def _fill(be, op, x, value):
    from ._pointwise import Unsupported
    try:
        return be.fill_(x, value)
    except Unsupported:
        return NotImplemented


def _zero(be, op, x):
    return _fill(be, op, x, 0)


# ---- factories: the op's meta gives shape and dtype (PyTorch's defaults), then one fill ----
def _meta_of(op, args, tensor_idx=None):
    from ember._dispatch import execute
    a = list(args)
    a[op.device_idx] = "meta"
    if tensor_idx is not None:
        x = a[tensor_idx]
        a[tensor_idx] = Tensor._empty(tuple(x.shape), x.dtype, x.device.__class__("meta"))
    return execute(op, tuple(a))


def _factory(fill, like=False):
    def f(be, op, *args):
        from ember._device import device as Device
        from ._pointwise import Unsupported
        d = args[op.device_idx]
        if like:
            dev = args[0].device if d is None else Device(d)
        else:
            dev = Device(d) if d is not None else None
        if dev is None or dev.type != "cuda":
            return NotImplemented
        m = _meta_of(op, args, 0 if like else None)
        t = be._new(tuple(m.shape), m.dtype, dev)
        value = args[1] if fill == "arg" else fill
        try:
            if value is not None:
                be.fill_(t, value)
        except Unsupported:
            return NotImplemented
        if m.requires_grad:
            t.requires_grad_(True)
        return t
    return f


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


def _launch_rows(be, kern, x, out, R, C, constexprs):
    from ._pointwise import Operand
    from ._launch import FastLauncher
    if not hasattr(be, "_rowlaunch"):
        be._rowlaunch = FastLauncher()
    a = Operand(None, x.data_ptr(), (), (), x.dtype)
    o = Operand(None, out.data_ptr(), (), (), out.dtype)
    key = (kern.__name__, x.dtype, out.dtype) + tuple(str(v) for v in constexprs.values())
    be._rowlaunch(kern, (R,), [a, o, C], key, constexprs)


def _reduce(be, op, x, dim, keepdim, kind, out_dtype, mean=False):
    from ember._ops.reduction import reduce_dims, reduced_shape
    dims = tuple(sorted(set(reduce_dims(dim, x.ndim)))) if x.ndim else ()
    shape = reduced_shape(tuple(x.shape), dims, keepdim)
    if x.numel() == 0 or out_dtype not in _ACC or x.dtype not in _ACC:
        return NotImplemented
    if kind in (1, 2) and x.dtype._cat < 2:
        return NotImplemented
    if x.dtype is not out_dtype and kind == 0:
        x = be._copy_new(x, out_dtype)
    rows, R, C = _rows(be, x, dims)
    out = be._new(shape, out_dtype, x.device)
    if R == 0:
        return out
    from . import _kernels as K
    acc = _ACC[out_dtype] if kind == 0 else _ACC[x.dtype]
    _launch_rows(be, K.row_reduce, rows, out, R, C,
                 {"KIND": kind, "ACC": acc, "SCALE_MEAN": mean, "BLOCK": _RBLOCK})
    return out


def _sum(be, op, x, dim=None, keepdim=False, dtype=None):
    from ember._ops.reduction import _sum_dtype
    return _reduce(be, op, x, dim, keepdim, 0, _sum_dtype(x.dtype, dtype))


def _mean(be, op, x, dim=None, keepdim=False, dtype=None):
    od = x.dtype if dtype is None else dtype
    if od._cat < 2:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    return _reduce(be, op, x, dim, keepdim, 0, od, mean=True)


def _amax(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 1, x.dtype)


def _amin(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 2, x.dtype)


def _max_all(be, op, x):
    return _reduce(be, op, x, None, False, 1, x.dtype)


def _min_all(be, op, x):
    return _reduce(be, op, x, None, False, 2, x.dtype)


def _argmax(be, op, x, dim=None, keepdim=False):
    if x.dtype._cat < 2:
        return NotImplemented
    if dim is None:
        r = _reduce(be, op, x.reshape(-1), 0, False, 3, D.int64)
        return r if r is NotImplemented or not keepdim else r.reshape((1,) * x.ndim)
    return _reduce(be, op, x, dim, keepdim, 3, D.int64)


def _argmin(be, op, x, dim=None, keepdim=False):
    if x.dtype._cat < 2:
        return NotImplemented
    if dim is None:
        r = _reduce(be, op, x.reshape(-1), 0, False, 4, D.int64)
        return r if r is NotImplemented or not keepdim else r.reshape((1,) * x.ndim)
    return _reduce(be, op, x, dim, keepdim, 4, D.int64)


def _softmax_any(log):
    def f(be, op, x, dim, dtype=None):
        from ember._size import normalize_dim
        od = x.dtype if dtype is None else dtype
        if od._cat < 2 or od not in _ACC or x.ndim == 0 or x.numel() == 0:
            return NotImplemented
        d = normalize_dim(dim, x.ndim)
        if x.dtype is not od:
            x = be._copy_new(x, od)
        moved = x.movedim(d, -1) if d != x.ndim - 1 else x
        rows, R, C = _rows(be, moved, (moved.ndim - 1,))
        out = be._new(tuple(rows.shape), od, x.device)
        from . import _kernels as K
        _launch_rows(be, K.row_softmax, rows, out, R, C, {"LOG": log, "BLOCK": _RBLOCK})
        return out.movedim(-1, d) if d != x.ndim - 1 else out
    return f


def _acc():
    import triton.language as tl
    return {D.float16: tl.float32, D.bfloat16: tl.float32, D.float32: tl.float32,
            D.float64: tl.float64, D.int64: tl.int64, D.int32: tl.int64, D.int16: tl.int64,
            D.int8: tl.int64, D.uint8: tl.int64, D.bool: tl.int64}


class _LazyAcc(dict):
    def _fill(self):
        if not dict.__len__(self):
            self.update(_acc())

    def get(self, k, default=None):
        self._fill()
        return dict.get(self, k, default)

    def __contains__(self, k):
        self._fill()
        return dict.__contains__(self, k)

    def __getitem__(self, k):
        self._fill()
        return dict.__getitem__(self, k)


_ACC = _LazyAcc()

_TABLE = {
    "matmul": _matmul, "clone": _clone, "fill_": _fill, "zero_": _zero,
    "sum": _sum, "mean": _mean, "amax": _amax, "amin": _amin, "max": _max_all,
    "min": _min_all, "argmax": _argmax, "argmin": _argmin,
    "empty": _factory(None), "zeros": _factory(0), "ones": _factory(1),
    "full": _factory("arg"), "empty_like": _factory(None, True),
    "zeros_like": _factory(0, True), "ones_like": _factory(1, True),
    "full_like": _factory("arg", True),
    "softmax": _softmax_any(False), "log_softmax": _softmax_any(True),
}
