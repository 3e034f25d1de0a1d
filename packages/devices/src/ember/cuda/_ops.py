"""GPU kernels for non-pointwise ops: matmul (cuBLAS), copies/fills, reductions, softmax.

`register(backend)` fills the op entries' cuda slots from here and the family modules. A kernel
returning NotImplemented leaves the call to the dispatcher's rule (the decomposition, else the
op's CPU kernel on host copies). Kernels ask the op's meta for the result shape and dtype.
"""
from __future__ import annotations

import importlib

from ember import _dtype as D
from ember._device import get_backend
from ember._ops import lookup, register_kernel
from ember._ops.reduction import _sum_dtype, reduce_dims, reduced_shape
from ember._random import Generator
from ember._tensor import Tensor

from ._blas import matmul
from ._pointwise import Operand, Unsupported
from .runtime import driver as rt
from .runtime.launcher import FastLauncher

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
        m = _LAZY[name] = importlib.import_module("ember.cuda." + name)
    return m

_RBLOCK = 1024


def _dev_index(args) -> int:
    for a in args:
        if isinstance(a, Tensor) and a.device.type == "cuda":
            return a.device.index or 0
    return rt.current_device()


@cuda_kernel("matmul")
def _matmul(be, op, x, y):
    if not (isinstance(y, Tensor) and y.device == x.device):
        return NotImplemented
    r = matmul(x, y)
    return NotImplemented if r is None else r


@cuda_kernel("clone")
def _clone(be, op, x, memory_format=None):
    return be._copy_new(x, x.dtype)


@cuda_kernel("fill_")
def _fill(be, op, x, value):
    try:
        return be.fill_(x, value)
    except Unsupported:
        return NotImplemented


@cuda_kernel("zero_")
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


def factory_output(be, op, args, like):
    """(new cuda tensor, requires_grad) for a factory call (like: a *_like op), shaped and typed
    by the op's meta; None when the call is not for cuda. The meta call (shape, dtype, errors)
    runs once per distinct call: factories are frequent (zero grads, new_zeros in backward)."""
    from ember._device import device as Device
    d = args[op.device_idx]
    if like:
        dev = args[0].device if d is None else Device(d)
    else:
        dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return None
    try:
        key = (op, D.get_default_dtype(), *(
            (a._shape, a.dtype) if isinstance(a, Tensor) else
            tuple(a) if isinstance(a, list) else
            a.__class__ if isinstance(a, Generator) else (a.__class__, a) for a in args))
        m = _FACTORY_META.get(key)
    except TypeError:  # unhashable arguments
        key = m = None
    if m is None:
        r = _meta_of(op, args, 0 if like else None)
        m = (tuple(r.shape), r.dtype, r.requires_grad)
        if key is not None and len(_FACTORY_META) < 4096:
            _FACTORY_META[key] = m
    return be._new(m[0], m[1], dev), m[2]


def _factory(fill, like=False):
    def f(be, op, *args):
        r = factory_output(be, op, args, like)
        if r is None:
            return NotImplemented
        t, rg = r
        value = args[1] if fill == "arg" else fill
        try:
            if value is not None:
                be.fill_(t, value)
        except Unsupported:
            return NotImplemented
        if rg:
            t.requires_grad_(True)
        return t
    return f


_FACTORY_META: dict = {}


@cuda_kernel("arange")
def _arange(be, op, *args):
    """arange with integer start/step on the GPU (one kernel); anything else on the host."""
    from ember._device import device as Device
    d = args[op.device_idx]
    dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return NotImplemented
    s, e, st = args[0], args[1], args[2]
    if e is None:
        s, e = 0, s
    if not all(v.__class__ is int for v in (s, st)):
        return NotImplemented
    m = _meta_of(op, args)
    if m.dtype not in _ACC or abs(s) >= 2**31 or abs(st) >= 2**31:
        return NotImplemented
    t = be._new(tuple(m.shape), m.dtype, dev)
    n = t.numel()
    if n:
        K = _lazy("_kernels")
        _launch(be, K.arange_fill, (-(-n // 1024),), [t, n, s, st], (),
                {"HALF": m.dtype in (D.float16, D.bfloat16), "BLOCK": 1024})
    if m.requires_grad:
        t.requires_grad_(True)
    return t


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


def _reduce(be, op, x, dim, keepdim, kind, out_dtype, mean=False):
    dims = tuple(sorted(set(reduce_dims(dim, x.ndim)))) if x.ndim else ()
    shape = reduced_shape(tuple(x.shape), dims, keepdim)
    if x.numel() == 0 or out_dtype not in _ACC or x.dtype not in _ACC:
        return NotImplemented
    if kind in (1, 2) and x.dtype._cat < 2:
        return NotImplemented
    if x.dtype is not out_dtype and kind == 0:
        x = be._copy_new(x, out_dtype)
    k = len(dims)
    if kind == 0 and 0 < k < x.ndim and dims == tuple(range(k)) and x.is_contiguous():
        out = be._new(shape, out_dtype, x.device)
        C = 1
        for s in tuple(x.shape)[k:]:
            C *= s
        _col_sum(be, x, out, x.numel() // C, C, mean)
        return out
    rows, R, C = _rows(be, x, dims)
    out = be._new(shape, out_dtype, x.device)
    if R == 0:
        return out
    K = _lazy("_kernels")
    acc = _ACC[out_dtype] if kind == 0 else _ACC[x.dtype]
    P = 1
    if kind <= 2 and R < 256 and C >= 16384:  # long rows: split each over P programs first
        P = max(1, min(-(-C // 8192), 1024 // R))
    if P > 1:
        per = -(-C // P)                                  # ceil(C / P), rounded up to BLOCK
        chunk = -(-per // _RBLOCK) * _RBLOCK
        P = -(-C // chunk)
        acc_dt = {"fp32": D.float32, "fp64": D.float64, "int64": D.int64}[str(acc)]
        part = be._new((R, P), acc_dt, x.device)
        _launch_rows(be, K.row_partial, rows, part, R, C,
                     {"KIND": kind, "ACC": acc, "BLOCK": _RBLOCK}, (chunk,), (R, P))
        rows, C2 = part, P
    else:
        C2 = C
    _launch_rows(be, K.row_reduce, rows, out, R, C2,
                 {"KIND": kind, "ACC": acc, "SCALE_MEAN": mean, "BLOCK": _RBLOCK},
                 (float(C),))
    return out


def _col_sum(be, x, out, R, C, mean, BR=32, BC=128):
    """out[c] = sum (or mean) over r of x[r, c], x contiguous (R, C): one launch when small,
    else per-chunk partials (about four programs per SM) then one launch over them."""
    K = _lazy("_kernels")
    ncb = -(-C // BC)
    P = 1 if R * C <= (1 << 20) else max(1, min(-(-R // BR), 528 // ncb))
    per = -(-R // P)
    rper = -(-per // BR) * BR
    P = -(-R // rper)
    acc = _ACC[out.dtype]
    if P == 1:
        _launch(be, K.col_reduce, (ncb, 1), [x, out, R, C, R, float(R)], (),
                {"ACC": acc, "SCALE_MEAN": mean, "BLOCK_R": BR, "BLOCK_C": BC})
        return
    acc_dt = {"fp32": D.float32, "fp64": D.float64, "int64": D.int64}[str(acc)]
    part = be._new((P, C), acc_dt, x.device)
    _launch(be, K.col_reduce, (ncb, P), [x, part, R, C, rper, 1.0], (),
            {"ACC": acc, "SCALE_MEAN": False, "BLOCK_R": BR, "BLOCK_C": BC})
    _launch(be, K.col_reduce, (ncb, 1), [part, out, P, C, P, float(R)], (),
            {"ACC": acc, "SCALE_MEAN": mean, "BLOCK_R": BR, "BLOCK_C": BC})


@cuda_kernel("sum")
def _sum(be, op, x, dim=None, keepdim=False, dtype=None):
    return _reduce(be, op, x, dim, keepdim, 0, _sum_dtype(x.dtype, dtype))


@cuda_kernel("mean")
def _mean(be, op, x, dim=None, keepdim=False, dtype=None):
    od = x.dtype if dtype is None else dtype
    if od._cat < 2:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    return _reduce(be, op, x, dim, keepdim, 0, od, mean=True)


@cuda_kernel("amax")
def _amax(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 1, x.dtype)


@cuda_kernel("amin")
def _amin(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 2, x.dtype)


@cuda_kernel("max")
def _max_all(be, op, x):
    return _reduce(be, op, x, None, False, 1, x.dtype)


@cuda_kernel("min")
def _min_all(be, op, x):
    return _reduce(be, op, x, None, False, 2, x.dtype)


@cuda_kernel("argmax")
def _argmax(be, op, x, dim=None, keepdim=False):
    if x.dtype._cat < 2:
        return NotImplemented
    if dim is None:
        r = _reduce(be, op, x.reshape(-1), 0, False, 3, D.int64)
        return r if r is NotImplemented or not keepdim else r.reshape((1,) * x.ndim)
    return _reduce(be, op, x, dim, keepdim, 3, D.int64)


@cuda_kernel("argmin")
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
        K = _lazy("_kernels")
        block = max(16, 1 << (C - 1).bit_length()) if C <= 4096 else _RBLOCK
        _launch_rows(be, K.row_softmax, rows, out, R, C,
                     {"LOG": log, "BLOCK": block, "ONE": C <= 4096})
        return out.movedim(-1, d) if d != x.ndim - 1 else out
    return f


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


@cuda_kernel("embedding")
def _embedding(be, op, w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if w.ndim != 2 or idx.dtype not in (D.int64, D.int32) or w.dtype not in _ACC:
        return NotImplemented
    K = _lazy("_kernels_nn")
    w, flat = _cont(be, w), _cont(be, idx).reshape(-1)
    if flat.numel():   # one bounds read: out-of-range ids raise the CPU op's IndexError
        ix = _lazy("_ops_index")
        (mm,) = ix._minmax(be, [flat])
        if not ix._in_range(mm, 0, w.shape[0]):
            return ix._raise(be, op, (w, idx, padding_idx, scale_grad_by_freq, sparse))
    D_ = w.shape[1]
    out = be._new((flat.numel(), D_), w.dtype, w.device)
    if flat.numel() and D_:
        _launch(be, K.gather_rows, (flat.numel(), -(-D_ // 256)), [w, flat, out, D_], (),
                {"BLOCK": 256})
    return out.reshape(tuple(idx.shape) + (D_,))


@cuda_kernel("embedding_dense_backward")
def _embedding_backward(be, op, g, idx, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq or idx.dtype not in (D.int64, D.int32) or g.dtype not in _ACC:
        return NotImplemented
    K = _lazy("_kernels_nn")
    flat = _cont(be, idx).reshape(-1)
    D_ = g.shape[-1]
    g2 = _cont(be, g).reshape(flat.numel(), D_)
    acc = be._new((num_weights, D_), D.float32, g.device)
    be.fill_(acc, 0)
    if flat.numel() and D_:
        _launch(be, K.scatter_add_rows, (flat.numel(), -(-D_ // 256)),
                [g2, flat, acc, D_, padding_idx], (), {"BLOCK": 256})
    return acc if g.dtype is D.float32 else be._copy_new(acc, g.dtype)


@cuda_kernel("nll_loss_forward")
def _nll_forward(be, op, x, t, w, reduction, ignore_index):
    if x.ndim != 2 or t.ndim != 1 or x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    K = _lazy("_kernels_nn")
    N, C = x.shape
    x, t = _cont(be, x), _cont(be, t)
    loss = be._new((N,), D.float32, x.device)
    wt = be._new((N,), D.float32, x.device)
    if N:
        _launch(be, K.nll_rows, (N,), [x, t, w if w is not None else x, loss, wt, C,
                                       ignore_index], (), {"HAS_W": w is not None})
    tot = wt.sum()
    if reduction == 0:
        out = loss
    elif reduction == 2:
        out = loss.sum()
    else:
        out = loss.sum() / tot
    return (out if out.dtype is x.dtype else be._copy_new(out, x.dtype),
            be._copy_new(tot, x.dtype))


@cuda_kernel("nll_loss_backward")
def _nll_backward(be, op, g, x, t, w, reduction, ignore_index, total_weight):
    if x.ndim != 2 or t.ndim != 1 or x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    K = _lazy("_kernels_nn")
    N, C = x.shape
    t, g = _cont(be, t), _cont(be, g)
    gx = be._new((N, C), x.dtype, x.device)
    be.fill_(gx, 0)
    if N:
        _launch(be, K.nll_back_rows, (N,), [g, t, w if w is not None else x, total_weight, gx,
                                            C, ignore_index], (),
                {"HAS_W": w is not None, "MODE": int(reduction)})
    return gx


@cuda_kernel("native_layer_norm")
def _layer_norm(be, op, x, normalized_shape, w, b, eps):
    if x.dtype not in _ACC or x.dtype._cat < 2 or not len(normalized_shape):
        return NotImplemented
    K = _lazy("_kernels_nn")
    metas = op.meta(x, normalized_shape, w, b, eps)  # PyTorch's shape checks and dtypes
    N = 1
    for s in normalized_shape:
        N *= s
    x = _cont(be, x)
    R = x.numel() // N if N else 0
    y = be._new(tuple(metas[0].shape), metas[0].dtype, x.device)
    mean = be._new(tuple(metas[1].shape), metas[1].dtype, x.device)
    rstd = be._new(tuple(metas[2].shape), metas[2].dtype, x.device)
    if R and N:
        wc = _cont(be, w) if w is not None else x
        bc = _cont(be, b) if b is not None else x
        _launch(be, K.layer_norm_fwd, (R,), [x, wc, bc, y, mean, rstd, N, float(eps)], (),
                {"HAS_W": w is not None, "HAS_B": b is not None, "BLOCK": 1024})
    return y, mean, rstd


@cuda_kernel("native_layer_norm_backward")
def _layer_norm_backward(be, op, g, x, normalized_shape, mean, rstd, w, b, mask):
    """dx in one kernel (a row per step, ROWS rows a program) plus per-program partial weight
    and bias grads, summed by _col_sum; rows longer than 8192 take the decomposition."""
    if (x.dtype not in (D.float32, D.float16, D.bfloat16) or g.dtype is not x.dtype
            or not len(normalized_shape)):
        return NotImplemented
    N = 1
    for s in normalized_shape:
        N *= s
    if N == 0 or N > 8192 or x.numel() == 0:
        return NotImplemented
    K = _lazy("_kernels_nn")
    op.meta(g, x, normalized_shape, mean, rstd, w, b, mask)  # PyTorch's checks
    x, g, mean, rstd = _cont(be, x), _cont(be, g), _cont(be, mean), _cont(be, rstd)
    M = x.numel() // N
    P = min(M, 528)
    rows = -(-M // P)
    P = -(-M // rows)
    dx = be._new(tuple(x.shape), x.dtype, x.device)
    dwp = be._new((P, N), D.float32, x.device)
    dbp = be._new((P, N), D.float32, x.device)
    block = max(16, 1 << (N - 1).bit_length())
    wc = _cont(be, w) if w is not None else x
    _launch(be, K.layer_norm_bwd, (P,), [g, x, wc, mean, rstd, dx, dwp, dbp, M, N, rows], (),
            {"HAS_W": w is not None, "BLOCK": block})
    dw = db = None
    if mask[1] and w is not None:
        dw = be._new(tuple(w.shape), w.dtype, x.device)
        _col_sum(be, dwp, dw, P, N, False)
    if mask[2] and b is not None:
        db = be._new(tuple(b.shape), b.dtype, x.device)
        _col_sum(be, dbp, db, P, N, False)
    return (dx if mask[0] else None), dw, db


@cuda_kernel("slice_scatter")
def _slice_scatter(be, op, x, src, dim=0, start=None, end=None, step=1):
    """A copy of x with src written into x[start:end:step] along dim (split's backward)."""
    from ember._size import normalize_dim
    if x.ndim == 0 or step <= 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    s = 0 if start is None else (start + n if start < 0 else start)
    e = n if end is None else (end + n if end < 0 else end)
    s, e = min(max(s, 0), n), min(max(e, 0), n)
    size = max(0, -(-(e - s) // step))
    shape = list(x.shape)
    shape[d] = size
    if tuple(src.shape) != tuple(shape):
        return NotImplemented  # the CPU kernel raises PyTorch's error
    out = be._copy_new(x, x.dtype)
    st = list(out.stride())
    view = out._alias(tuple(shape), tuple(st[:d] + [st[d] * step] + st[d + 1:]),
                      out._offset + s * st[d])
    be._copy_into(view, src)
    return out


def _tri(upper):
    def f(be, op, x, diagonal=0):
        if x.ndim < 2 or x.dtype not in be_dtypes():
            return NotImplemented
        K = _lazy("_kernels_nn")
        x = _cont(be, x)
        R, C = x.shape[-2], x.shape[-1]
        out = be._new(tuple(x.shape), x.dtype, x.device)
        if x.numel():
            _launch(be, K.tri_rows, (x.numel() // C, -(-C // 1024)), [x, out, R, C, diagonal],
                    (), {"UPPER": upper, "BLOCK": 1024})
        return out
    return f


@cuda_kernel("max_pool2d_with_indices")
def _max_pool2d(be, op, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    from ember._ops.pool import _norm_args
    if x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    y_meta, i_meta = op.meta(x, kernel_size, stride, padding, dilation, ceil_mode)  # checks
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _norm_args(2, kernel_size, stride, padding,
                                                        dilation)
    K = _lazy("_kernels_nn")
    x = _cont(be, x)
    H, W = x.shape[-2], x.shape[-1]
    Ho, Wo = y_meta.shape[-2], y_meta.shape[-1]
    y = be._new(tuple(y_meta.shape), x.dtype, x.device)
    idx = be._new(tuple(i_meta.shape), D.int64, x.device)
    total = y.numel()
    if total:
        _launch(be, K.max_pool2d_fwd, (-(-total // 256),),
                [x, y, idx, H, W, Ho, Wo, total, sh, sw, ph, pw, dh, dw], (),
                {"KH": kh, "KW": kw, "BLOCK": 256})
    return y, idx


@cuda_kernel("_pool_scatter")
def _pool_scatter(be, op, g, x, idx, n):
    if g.dtype not in _ACC or g.dtype._cat < 2 or tuple(g.shape) != tuple(idx.shape):
        return NotImplemented
    K = _lazy("_kernels_nn")
    per = 1
    for s in tuple(x.shape)[x.ndim - n:]:
        per *= s
    outs = 1
    for s in tuple(idx.shape)[idx.ndim - n:]:
        outs *= s
    if idx.numel():    # one bounds read: indices outside a plane raise the CPU op's error
        ix = _lazy("_ops_index")
        (mm,) = ix._minmax(be, [idx])
        if not ix._in_range(mm, 0, per):
            return ix._raise(be, op, (g, x, idx, n))
    acc = be._new(tuple(x.shape), D.float32, x.device)
    be.fill_(acc, 0)
    total = g.numel()
    if total:
        _launch(be, K.pool_scatter, (-(-total // 1024),),
                [_cont(be, g), _cont(be, idx), acc, outs, per, total], (), {"BLOCK": 1024})
    return acc if g.dtype is D.float32 else be._copy_new(acc, g.dtype)


def _conv():
    C = _lazy("_conv")
    return C


def be_dtypes():
    from ._backend import _TL_OK
    return _TL_OK


def _acc():
    import triton.language as tl
    return {D.float16: tl.float32, D.bfloat16: tl.float32, D.float32: tl.float32,
            D.float64: tl.float64, D.int64: tl.int64, D.int32: tl.int64, D.int16: tl.int64,
            D.int8: tl.int64, D.uint8: tl.int64, D.bool: tl.int64}


_ACC: dict = {}   # accumulator dtype per input dtype: filled (importing triton) on a first call

cuda_kernel("empty")(_factory(None))
cuda_kernel("zeros")(_factory(0))
cuda_kernel("ones")(_factory(1))
cuda_kernel("full")(_factory("arg"))
cuda_kernel("empty_like")(_factory(None, True))
cuda_kernel("zeros_like")(_factory(0, True))
cuda_kernel("ones_like")(_factory(1, True))
cuda_kernel("full_like")(_factory("arg", True))
cuda_kernel("tril")(_tri(False))
cuda_kernel("triu")(_tri(True))
cuda_kernel("convolution")(lambda be, op, *a: _conv().convolution(be, op, *a))
cuda_kernel("convolution_backward")(lambda be, op, *a: _conv().convolution_backward(be, op, *a))
cuda_kernel("softmax")(_softmax_any(False))
cuda_kernel("log_softmax")(_softmax_any(True))

# the op families in their own modules: each fills its ops' cuda slots when imported, and lists
# in HOST the ops it leaves on host copies (with the reason)
FAMILIES = ("_ops_index", "_ops_sort", "_ops_random", "_ops_nnx", "_ops_misc",
            "_ops_linalg", "_ops_spectral")


def register(backend) -> None:
    """Fill the cuda slots of the op entries: pointwise ops and their in-place forms get the
    backend's cached Triton launch; the rest are filled by `cuda_kernel` in this module and the
    family modules, imported here. The backend's HOST gathers the families' host lists."""
    from ember._ops import OPS, register_kernel
    host: dict = {}
    for name in FAMILIES:
        host.update(importlib.import_module("ember.cuda." + name).HOST)
    backend.HOST = host
    for op in {id(o): o for o in OPS.values()}.values():
        if op.pointwise is not None:
            register_kernel(op, "cuda", backend.pointwise_kernel(op))
        elif op.inplace_of is not None and op.inplace_of.pointwise is not None:
            register_kernel(op, "cuda", backend.inplace_kernel(op))
