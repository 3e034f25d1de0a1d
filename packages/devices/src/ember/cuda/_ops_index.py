"""GPU kernels: indexing, gather/scatter, masks, search and counting ops.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Every op here is one strided Triton kernel (_kernels_index: gather_nd / scatter_nd over up to 6
collapsed dims) plus, where indices come from the user, one bounds check: the indices' min and
max (atomics into 16 bytes per index tensor) read back in one 16*k-byte copy. When they are out
of range the op's CPU kernel runs on host copies to raise PyTorch's exact error (nothing on the
device was written yet). Ops whose output size depends on values (nonzero, masked_select, boolean
masks in x[mask]) read their count back, as PyTorch's CUDA ops do; so do bincount (its max),
histc (the data's range when min == max), repeat_interleave with tensor repeats (their sum).
scatter_reduce's prod is a compare-and-swap loop (no atomic multiply); searchsorted/bucketize
are one binary search per element; embedding_bag is one program per bag, in index order.
"""
from __future__ import annotations

import numpy as np

from ember import _dtype as D
from ember._dispatch import DynamicOutputShape
from ember._size import broadcast_shapes, normalize_dim
from ember._tensor import Tensor

from ._ops import _cont, _launch, _lazy, be_dtypes, cuda_kernel
from ._pointwise import Unsupported
from .runtime import driver as rt

_BLOCK = 1024
_PROGS = 528   # grid-strided kernels: about four programs per SM of an H100/H200
_INTS = (D.int64, D.int32, D.int16, D.int8, D.uint8)
_I64 = np.iinfo(np.int64)
# dtypes tl.atomic_add takes natively; the others accumulate in a float32 / int64 copy
_ATOMIC = (D.float32, D.float64, D.int32, D.int64)


def _K():
    return _lazy("_kernels_index")


def _index_kernel(*qualnames):
    """cuda_kernel for this family: the op's meta validates first, host indices move over."""
    def fill(f):
        cuda_kernel(*qualnames)(_on_device(f))
        return f
    return fill


def _on_device(f):
    """The op's meta validates the call first (PyTorch's rank, shape and dtype errors: the
    kernels here check only index values). Host tensors among the arguments (core's backward
    formulas build index tensors on the CPU) are copied to the op's device, as PyTorch does for
    CPU indices."""
    def k(be, op, *args):
        if op.meta is not None:
            try:
                op.meta(*args)
            except DynamicOutputShape:  # validated; x[mask]'s shape needs the mask's values
                pass
        dev = next(a.device for a in args if isinstance(a, Tensor) and a.device.type == "cuda")
        args = tuple(a.to(dev) if isinstance(a, Tensor) and a.device != dev else a for a in args)
        return f(be, op, *args)
    return k


def _raise(be, op, args):
    """A call the CPU kernel rejects (bad index, shape, dtype): run it on host copies for
    PyTorch's exact exception. Not a GPU gap, so not counted as a fallback."""
    return be._host_call(op, args, False)


def _span(t) -> int:
    """Elements of t's storage from t's first element on: the bound for any computed address."""
    return t._storage.nbytes // t.dtype.itemsize - t._offset


def _layout(shape, *strides):
    """(n, 5 sizes, 6 strides per operand) of an iteration shape: size-1 dims dropped,
    neighbours every operand walks contiguously merged, padded in front to 6 dims; None when
    more than 6 dims remain."""
    dims = []
    for i, s in enumerate(shape):
        if s == 1:
            continue
        sts = [st[i] for st in strides]
        if dims and all(p == q * s for p, q in zip(dims[-1][1], sts)):
            dims[-1] = (dims[-1][0] * s, sts)
        else:
            dims.append((s, sts))
    if len(dims) > 6:
        return None
    nd = len(dims)
    dims = [(1, [0] * len(strides))] * (6 - nd) + dims
    n = 1
    for s in shape:
        n *= s
    return n, [d[0] for d in dims[1:]], [[d[1][k] for d in dims] for k in range(len(strides))], nd


def _wide(n, *ts) -> bool:
    """64-bit position arithmetic: when some position or address can pass 2**31."""
    return max([n] + [_span(t) for t in ts]) >= 2**31


def _same_device(*ts):
    """Kernels take device addresses only: a host tensor here would be read as one."""
    dev = ts[0].device
    for t in ts[1:]:
        if t.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and {t.device}!")


def _gather(be, out, src, idx, shape, a, b, scale, nsize, wrap=True):
    """out (contiguous, shape)[c] = src[c . a + idx[c . b] * scale] (negatives wrap by nsize)."""
    _same_device(out, src, idx)
    lay = _layout(shape, a, b)
    if lay is None:
        return False
    n, sizes, (A, B), nd = lay
    if n:
        _launch(be, _K().gather_nd, (-(-n // _BLOCK),),
                [out, src, idx, n, *sizes, *A, *B, scale, nsize, _span(src)], (),
                {"WRAP": wrap, "NDIM": nd, "I64": _wide(n, src, idx), "BLOCK": _BLOCK})
    return True


def _scatter(be, dst, src, idx, shape, a, b, c, scale, nsize, accum, wrap=True):
    """dst[c . a + idx[c . b] * scale] = (or += when accum) src[c . c] over shape."""
    _same_device(dst, src, idx)
    lay = _layout(shape, a, b, c)
    if lay is None:
        return False
    n, sizes, (A, B, C), nd = lay
    if n:
        _launch(be, _K().scatter_nd, (-(-n // _BLOCK),),
                [dst, src, idx, n, *sizes, *A, *B, *C, scale, nsize, _span(dst)], (),
                {"ACCUM": accum, "WRAP": wrap, "NDIM": nd, "I64": _wide(n, dst, src, idx),
                 "BLOCK": _BLOCK})
    return True


def _minmax(be, idxs):
    """[(min, max)] of each integer tensor, one kernel each and one read for all."""
    _same_device(*idxs)
    mm = _mm_buffer(be, len(idxs), idxs[0].device)
    K = _K()
    for k, t in enumerate(idxs):
        t = _cont(be, t)
        n = t.numel()
        if n:
            _launch(be, K.minmax, (min(-(-n // _BLOCK), _PROGS),), [t, mm[2 * k:], n], (),
                    {"BLOCK": _BLOCK})
    r = be.to_host(mm)
    return [(int(r[2 * k]), int(r[2 * k + 1])) for k in range(len(idxs))]


def _mm_buffer(be, k, dev):
    """2k int64 on the device: (int64 max, int64 min) k times, for min/max atomics."""
    mm = be._new((2 * k,), D.int64, dev)
    init = np.array([_I64.max, _I64.min] * k, np.int64)
    from .runtime.streams import current_stream_handle
    # pageable host memory: the driver has staged it when the call returns
    rt.memcpy_htod(mm.data_ptr(), init.ctypes.data, init.nbytes, current_stream_handle(dev.index))
    return mm


def _in_range(mm, lo, hi) -> bool:
    return mm[0] > mm[1] or (mm[0] >= lo and mm[1] < hi)   # (empty: min > max)


def _ok_dtype(*ts) -> bool:
    ok = be_dtypes()
    return all(t.dtype in ok for t in ts)


def _zeroed(strides, d):
    s = list(strides)
    s[d] = 0
    return s


def _along(ndim, d, stride):
    s = [0] * ndim
    s[d] = stride
    return s


def _scalar(be, value, dtype, dev):
    """A 0-dim tensor of dtype holding value (a Python scalar or a 0-dim tensor)."""
    t = be._new((), dtype, dev)
    if isinstance(value, Tensor):
        if value.device != dev:
            value = value.to(dev)
        be._copy_into(t, value)
    else:
        be.fill_(t, value)
    return t


def _acc_target(be, x, accum):
    """Where an accumulating scatter adds: x itself, or a float32/int64 copy (dtypes without
    atomics), copied back by finish(out)."""
    if not accum or x.dtype in _ATOMIC:
        return x
    wide = D.float32 if x.dtype.is_floating_point else D.int64
    return be._copy_new(x, wide)


# ---- gather / index_select / take --------------------------------------------------------------
@_index_kernel("gather")
def _gather_op(be, op, x, dim, index, sparse_grad=False):
    if not _ok_dtype(x):
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    if index.numel() == 0:
        return be._new(tuple(index.shape), x.dtype, x.device)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    xv, iv = x.reshape(xs), index.reshape(ish)
    (mm,) = _minmax(be, [iv])
    if not _in_range(mm, 0, xs[d]):   # negatives refused, as PyTorch (the CPU kernel raises)
        return _raise(be, op, (x, dim, index, sparse_grad))
    out = be._new(ish, x.dtype, x.device)
    if not _gather(be, out, xv, iv, ish, _zeroed(xv.stride(), d), iv.stride(), xv.stride()[d],
                   xs[d]):
        return NotImplemented
    return out.reshape(tuple(index.shape))


@_index_kernel("index_select")
def _index_select(be, op, x, dim, index):
    args = (x, dim, index)
    if not _ok_dtype(x) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, 0, n):
        return _raise(be, op, args)
    shape = tuple(x.shape[:d]) + (index.numel(),) + tuple(x.shape[d + 1:])
    out = be._new(shape, x.dtype, x.device)
    ist = index.stride()[0] if index.ndim else 0
    if not _gather(be, out, x, index, shape, _zeroed(x.stride(), d), _along(x.ndim, d, ist),
                   x.stride()[d], n, wrap=False):
        return NotImplemented
    return out


@_index_kernel("take")
def _take(be, op, x, index):
    if not _ok_dtype(x):
        return NotImplemented
    n = x.numel()
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, -n, n):
        return _raise(be, op, (x, index))
    flat = _cont(be, x)
    out = be._new(tuple(index.shape), x.dtype, x.device)
    if not _gather(be, out, flat, index, tuple(index.shape), [0] * index.ndim, index.stride(),
                   1, n):
        return NotImplemented
    return out


# ---- scatter / scatter_add / index_add / index_copy / index_fill / put -------------------------
def _scatter_any(be, op, args, x, d, index, src, accum):
    """out = copy of x; out[index along d] = (+=) src over index's shape (scatter, scatter_add);
    src None: args' value."""
    out = be._copy_new(x, x.dtype)
    tgt = _acc_target(be, out, accum)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    iv, tv = index.reshape(ish), tgt.reshape(xs)
    sst = list(src.stride()[:len(ish)]) if src.ndim else [0] * len(ish)
    if not _scatter(be, tv, src, iv, ish, _zeroed(tv.stride(), d), iv.stride(), sst,
                    tv.stride()[d], xs[d], accum):
        return NotImplemented
    if tgt is not out:
        be._copy_into(out, tgt)
    return out


def _scatter_checks(be, op, args, x, dim, index, src):
    """None when the fast path applies, else the op's result (its error) or NotImplemented."""
    if not _ok_dtype(x):
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    if index.numel() == 0:
        return None
    xs = tuple(x.shape) if x.ndim else (1,)
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, 0, xs[d]):   # negatives refused, as PyTorch (the CPU kernel raises)
        return _raise(be, op, args)
    return None


@_index_kernel("scatter")
def _scatter_op(be, op, x, dim, index, src=None, value=None, reduce=None):
    args = (x, dim, index, src, value, reduce)
    if reduce not in (None, "add"):
        return NotImplemented  # multiply: no atomic multiply (the CPU kernel raises for others)
    if src is not None and not isinstance(src, Tensor):   # x.scatter(d, i, 2.5)
        src, value = None, src
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if index.numel() == 0:
        return be._copy_new(x, x.dtype)
    if src is None:
        src = _scalar(be, value, x.dtype, x.device)
    return _scatter_any(be, op, args, x, normalize_dim(dim, x.ndim), index, src,
                        reduce == "add")


@_index_kernel("scatter_add")
def _scatter_add(be, op, x, dim, index, src):
    args = (x, dim, index, src)
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if index.numel() == 0:
        return be._copy_new(x, x.dtype)
    return _scatter_any(be, op, args, x, normalize_dim(dim, x.ndim), index, src, True)


def _index_dim(be, op, args, x, dim, index, source, accum, ndim_err=IndexError):
    """index_add / index_copy / index_fill: out = copy of x with out[..., index[k], ...] =
    (+=) source[..., k, ...] along dim (source None: args[-1] is the fill value)."""
    if not _ok_dtype(x) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    k = index.numel()
    if source is not None:
        if source.ndim != x.ndim:
            return NotImplemented
        if any(source.shape[i] != x.shape[i] for i in range(x.ndim) if i != d):
            return NotImplemented
    n = x.shape[d]
    (mm,) = _minmax(be, [index])
    # index_fill wraps negative indices; index_add / index_copy refuse them (as PyTorch)
    if not _in_range(mm, -n if source is None else 0, n):
        return _raise(be, op, args)
    out = be._copy_new(x, x.dtype)
    shape = tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])
    if source is None:
        source = _scalar(be, args[-1], x.dtype, x.device)
        sst = [0] * x.ndim
    else:
        sst = source.stride()
    tgt = _acc_target(be, out, accum)
    ist = index.stride()[0] if index.ndim else 0
    if not _scatter(be, tgt, source, index, shape, _zeroed(tgt.stride(), d),
                    _along(x.ndim, d, ist), sst, tgt.stride()[d], n, accum):
        return NotImplemented
    if tgt is not out:
        be._copy_into(out, tgt)
    return out


@_index_kernel("index_add")
def _index_add(be, op, x, dim, index, source, alpha=1):
    args = (x, dim, index, source, alpha)
    if alpha != 1 and source.dtype is x.dtype and x.dtype in be_dtypes():
        if isinstance(alpha, float) and not x.dtype.is_floating_point:
            return NotImplemented
        source = source * alpha
    return _index_dim(be, op, args, x, dim, index, source, True)


@_index_kernel("index_copy")
def _index_copy(be, op, x, dim, index, source):
    return _index_dim(be, op, (x, dim, index, source), x, dim, index, source, False)


@_index_kernel("index_fill.int_Scalar")
def _index_fill(be, op, x, dim, index, value):
    if isinstance(value, complex):
        return NotImplemented
    return _index_dim(be, op, (x, dim, index, value), x, dim, index, None, False)


@_index_kernel("put")
def _put(be, op, x, index, source, accumulate=False):
    args = (x, index, source, accumulate)
    n = x.numel()
    if source.dtype is not x.dtype or not _ok_dtype(x):  # (the CPU kernel casts source)
        return NotImplemented
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, -n, n):
        return _raise(be, op, args)
    out = be._copy_new(x, x.dtype)
    tgt = _acc_target(be, out, accumulate)
    idx, src = _cont(be, index).reshape(-1), _cont(be, source).reshape(-1)
    if not _scatter(be, tgt.reshape(-1), src, idx, (idx.numel(),), [0], [1], [1], 1, n,
                    accumulate):
        return NotImplemented
    if tgt is not out:
        be._copy_into(out, tgt)
    return out


# ---- advanced indexing: x[i0, :, i2], x[mask], x[idx] = v ------------------------------------
def _adv_plan(be, op, args, x, indices):
    """indices (Tensor?[]) -> (offsets, out shape, x strides over it, offset strides over it)
    or an op result (error / NotImplemented). Boolean masks become their nonzero() columns
    (one sync, as PyTorch); the integer ones are bounds-checked with one read."""
    idx, dims, d = [], [], 0
    for i in indices:
        if i is None:
            d += 1
            continue
        if not isinstance(i, Tensor):
            return NotImplemented
        if i.device != x.device:   # CPU indices for a cuda tensor, as PyTorch takes them
            i = i.to(x.device)
        if i.dtype is D.bool:
            k = i.ndim
            nz = _nonzero(be, None, i) if k else None
            if nz is None or nz is NotImplemented:
                return NotImplemented
            for j in range(k):
                idx.append(nz[:, j])
                dims.append(d + j)
            d += k
            continue
        if i.dtype is D.uint8:
            return NotImplemented   # uint8 masks: deprecated, the host warns as PyTorch
        idx.append(i)
        dims.append(d)
        d += 1
    if not idx:
        return NotImplemented
    B = tuple(broadcast_shapes(*[tuple(i.shape) for i in idx]))
    # the linear offsets of the indexed dims (one contiguous int64 tensor over B), each index
    # tensor's min/max on the way: one read checks them all
    off = be._new(B, D.int64, x.device)
    mm = _mm_buffer(be, len(idx), x.device)
    n = off.numel()
    if n:
        K = _K()
        for k, (i, dd) in enumerate(zip(idx, dims)):
            e = i.expand(B)
            lay = _layout(B, e.stride())
            if lay is None:
                return NotImplemented
            _, sizes, (S,), nd = lay
            _launch(be, K.linear_offsets, (min(-(-n // _BLOCK), _PROGS),),
                    [off, e, mm[2 * k:], n, *sizes, *S, x.stride()[dd], x.shape[dd]], (),
                    {"FIRST": k == 0, "NDIM": nd, "I64": _wide(n, e), "BLOCK": _BLOCK})
        r = be.to_host(mm)
        for k, dd in enumerate(dims):
            if not _in_range((r[2 * k], r[2 * k + 1]), -x.shape[dd], x.shape[dd]):
                return _raise(be, op, args)
    rest = [j for j in range(x.ndim) if j not in dims]
    xst, xsh = x.stride(), tuple(x.shape)
    ob = list(off.stride())
    if dims == list(range(dims[0], dims[0] + len(dims))):   # adjacent: they stay in place
        pre, post = [j for j in rest if j < dims[0]], [j for j in rest if j > dims[0]]
    else:                                                     # separated: they go first
        pre, post = [], rest
    shape = tuple(xsh[j] for j in pre) + B + tuple(xsh[j] for j in post)
    a = [xst[j] for j in pre] + [0] * len(B) + [xst[j] for j in post]
    b = [0] * len(pre) + ob + [0] * len(post)
    return off, shape, a, b


@_index_kernel("index.Tensor")
def _index(be, op, x, indices):
    if not _ok_dtype(x):
        return NotImplemented
    plan = _adv_plan(be, op, (x, indices), x, indices)
    if not isinstance(plan, tuple):
        return plan
    off, shape, a, b = plan
    out = be._new(shape, x.dtype, x.device)
    if not _gather(be, out, x, off, shape, a, b, 1, 0, wrap=False):
        return NotImplemented
    return out


def _index_put_into(be, op, args, x, indices, values, accumulate):
    if not _ok_dtype(x):
        return NotImplemented
    plan = _adv_plan(be, op, args, x, indices)
    if not isinstance(plan, tuple):
        return plan
    off, shape, a, b = plan
    vs = tuple(values.shape)   # (the meta checks this shape unless a mask's count sets it)
    if len(vs) > len(shape) or any(v not in (1, s) for v, s in zip(vs[::-1], shape[::-1])):
        return _raise(be, op, args)
    if values.device != x.device:
        values = values.to(x.device)
    v = values.expand(shape)
    tgt = _acc_target(be, x, accumulate)
    if tgt is not x:
        a = _retarget(x, tgt, shape, a, b)
    if a is None or not _scatter(be, tgt, v, off, shape, a, b, v.stride(), 1, 0, accumulate,
                                 wrap=False):
        return NotImplemented
    if tgt is not x:
        be._copy_into(x, tgt)
    return x


def _retarget(x, tgt, shape, a, b):
    """The strides over the iteration shape of tgt (contiguous) for those of x: only when the
    offsets were computed for x's strides, which tgt shares when x is contiguous."""
    return a if tuple(tgt.stride()) == tuple(x.stride()) else None


@_index_kernel("index_put")
def _index_put(be, op, x, indices, values, accumulate=False):
    out = be._copy_new(x, x.dtype) if _ok_dtype(x) else None
    if out is None:
        return NotImplemented
    r = _index_put_into(be, op, (x, indices, values, accumulate), out, indices, values,
                        accumulate)
    return r


@_index_kernel("index_put_")
def _index_put_(be, op, x, indices, values, accumulate=False):
    args = (x, indices, values, accumulate)
    if _ok_dtype(x) and accumulate and x.dtype not in _ATOMIC and not x.is_contiguous():
        # the wide copy is contiguous: compute on a contiguous copy, then write back
        c = be._copy_new(x, x.dtype)
        r = _index_put_into(be, op, args, c, indices, values, accumulate)
        if r is c:
            be._copy_into(x, c)
            return x
        return r
    return _index_put_into(be, op, args, x, indices, values, accumulate)


# ---- masks: nonzero, masked_select, masked_scatter --------------------------------------------
def _compact(be, x, xst, shape, mode, out_fn, val=None, vst=None, limit=0):
    """Positions c of shape with x[c . xst] != 0, in order: count per block, scan, read the
    total (one sync), then out = out_fn(total) written by one compact kernel. None: >6 dims."""
    lay = _layout(shape, xst, vst or [0] * len(shape))
    if lay is None or (mode == 0 and len(shape) > 6):
        return None
    if mode == 0:   # nonzero needs every coordinate: no merging
        pad = 6 - len(shape)
        n = 1
        for s in shape:
            n *= s
        sizes = ([1] * pad + list(shape))[1:]
        A = [0] * pad + list(xst)
        B = [0] * 6
        nd = len(shape)
    else:
        n, sizes, (A, B), nd = lay
    i64 = _wide(n, x, *([val] if val is not None else []))
    K = _K()
    nb = max(1, -(-n // _BLOCK))
    cnt = be._new((nb,), D.int64, x.device)
    total = be._new((1,), D.int64, x.device)
    if n:
        _launch(be, K.count_nonzero_blocks, (nb,), [x, cnt, n, *sizes, *A], (),
                {"NDIM": nd, "I64": i64, "BLOCK": _BLOCK})
        _launch(be, K.exclusive_scan, (1,), [cnt, nb, total], (), {"BLOCK": _BLOCK})
        k = int(be.to_host(total)[0])
    else:
        k = 0
    out = out_fn(k)
    if isinstance(out, tuple):   # (result, error): masked_scatter's check on the count
        return out
    if n and k:
        _launch(be, K.compact, (nb,),
                [out, x, val if val is not None else x, cnt, n, *sizes, *A, *B, limit], (),
                {"MODE": mode, "NDIM": nd, "I64": i64, "BLOCK": _BLOCK})
    return out


@_index_kernel("nonzero")
def _nonzero(be, op, x):
    if not _ok_dtype(x):
        return NotImplemented
    shape = tuple(x.shape)
    if len(shape) > 6:   # flat positions, then each coordinate by pointwise ops
        flat = _nonzero(be, op, _cont(be, x).reshape(-1))
        k, nd = flat.shape[0], len(shape)
        out = be._new((k, nd), D.int64, x.device)
        step = 1
        for j in range(nd - 1, -1, -1):
            be._copy_into(out._alias((k,), (nd,), j), (flat[:, 0] // step) % shape[j])
            step *= shape[j]
        return out
    return _compact(be, x, list(x.stride()), shape, 0,
                    lambda k: be._new((k, len(shape)), D.int64, x.device))


@_index_kernel("masked_select")
def _masked_select(be, op, x, mask):
    if mask.dtype not in (D.bool, D.uint8):
        return _raise(be, op, (x, mask))
    if not _ok_dtype(x):
        return NotImplemented
    try:
        shape = tuple(broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except RuntimeError:
        return _raise(be, op, (x, mask))
    xe, me = x.expand(shape), mask.expand(shape)
    r = _compact(be, me, list(me.stride()), shape, 1,
                 lambda k: be._new((k,), x.dtype, x.device), xe, list(xe.stride()))
    return NotImplemented if r is None else r


@_index_kernel("masked_scatter")
def _masked_scatter(be, op, x, mask, source):
    args = (x, mask, source)
    if mask.dtype not in (D.bool, D.uint8) or source.dtype is not x.dtype:
        return _raise(be, op, args)
    if not _ok_dtype(x):
        return NotImplemented
    shape = tuple(x.shape)
    try:
        if tuple(broadcast_shapes(shape, tuple(mask.shape))) != shape:
            return NotImplemented
    except RuntimeError:
        return NotImplemented
    me = mask.expand(shape)
    out = be._copy_new(x, x.dtype)
    src = _cont(be, source)

    def make(k):
        return (_raise(be, op, args), None) if k > src.numel() else out
    r = _compact(be, me, list(me.stride()), shape, 2, make, src, list(out.stride()),
                 src.numel())
    if r is None:
        return NotImplemented
    return r[0] if isinstance(r, tuple) else r


# ---- one_hot -----------------------------------------------------------------------------------
@_index_kernel("one_hot")
def _one_hot(be, op, x, num_classes=-1):
    args = (x, num_classes)
    (mm,) = _minmax(be, [x]) if x.numel() else [(0, -1)]
    if x.numel() and mm[0] < 0:
        return _raise(be, op, args)
    if num_classes == -1:
        if x.numel() == 0:
            return _raise(be, op, args)
        num_classes = mm[1] + 1
    elif x.numel() and mm[1] >= num_classes:
        return _raise(be, op, args)
    xc = _cont(be, x)
    n = x.numel()
    out = be._new(tuple(x.shape) + (num_classes,), D.int64, x.device)
    if n * num_classes:
        _launch(be, _K().one_hot, (-(-(n * num_classes) // _BLOCK),),
                [xc, out, n, num_classes], (), {"BLOCK": _BLOCK})
    return out


# ---- select/diagonal/as_strided_scatter: a copy, then src copied into the view ----------------
def _into_view(rule):
    def f(be, op, x, src, *args):
        if not _ok_dtype(x, src):
            return NotImplemented
        out = be._copy_new(x, x.dtype)
        shape, stride, off = rule(out, *args)[:3]
        if tuple(shape) != tuple(src.shape):
            raise RuntimeError(f"expected src to have a size equal to the slice of self. src "
                               f"size = {list(src.shape)}, slice size = {list(shape)}")
        last = off + sum((s - 1) * st for s, st in zip(shape, stride))
        if off < 0 or (all(shape) and last >= out.numel()):
            return _raise(be, op, (x, src, *args))
        if src.device != x.device:
            src = src.to(x.device)
        try:
            be._copy_into(out._alias(tuple(shape), tuple(stride), off), src)
        except Unsupported:
            return NotImplemented
        return out
    return f


def _view_rules():
    from ember._ops import movement as M
    return {"select_scatter": M._select, "diagonal_scatter": M._diagonal,
            "as_strided_scatter": M._as_strided}


def _lazy_rule(name):
    def rule(*a):
        return _view_rules()[name](*a)
    return rule


# ---- scatter_reduce ----------------------------------------------------------------------------
_REDUCE_OP = {"sum": 0, "mean": 0, "amax": 1, "amin": 2, "prod": 3}
_RED_NATIVE = (D.float32, D.float64, D.int32, D.int64)   # atomics (and CAS) in place


def _scatter_red(be, dst, src, idx, shape, a, b, c, scale, nsize, red):
    """dst[c . a + idx[c . b] * scale] (red)= src[c . c]: 1 max, 2 min, 3 prod (CAS loop)."""
    _same_device(dst, src, idx)
    lay = _layout(shape, a, b, c)
    if lay is None:
        return False
    n, sizes, (A, B, C), nd = lay
    import triton.language as tl
    it = tl.int64 if dst.dtype.itemsize == 8 else tl.int32
    if n:
        _launch(be, _K().scatter_reduce_nd, (-(-n // _BLOCK),),
                [dst, src, idx, n, *sizes, *A, *B, *C, scale, nsize, _span(dst)], (),
                {"OP": red, "IT": it, "NDIM": nd, "I64": _wide(n, dst, src, idx),
                 "BLOCK": _BLOCK})
    return True


@_index_kernel("scatter_reduce.two")
def _scatter_reduce(be, op, x, dim, index, src, reduce, include_self=True):
    args = (x, dim, index, src, reduce, include_self)
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if x.dtype is D.bool:
        return NotImplemented
    out = be._copy_new(x, x.dtype)
    if index.numel() == 0:
        return out
    d = normalize_dim(dim, x.ndim)
    # float16/bfloat16 reduce in float32 (as the CPU kernel), small ints in int64
    work = out if x.dtype in _RED_NATIVE else be._copy_new(
        out, D.float32 if x.dtype.is_floating_point else D.int64)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    iv, wv = index.reshape(ish), work.reshape(xs)
    sst = list(src.stride()[:len(ish)]) if src.ndim else [0] * len(ish)
    a, b, scale = _zeroed(wv.stride(), d), iv.stride(), wv.stride()[d]
    if not include_self:
        # sum/mean/prod: the scattered slots start from the identity; amax/amin: from one of
        # the values scattered there (a plain scatter: whichever lands), which the max / min
        # over all of them then includes anyway (no -inf or integer extremes to fill)
        if reduce in ("sum", "mean", "prod"):
            seed, sst0 = _scalar(be, 1 if reduce == "prod" else 0, work.dtype, x.device), \
                [0] * len(ish)
        else:
            seed, sst0 = src, sst
        if not _scatter(be, wv, seed, iv, ish, a, b, sst0, scale, xs[d], False):
            return NotImplemented
    red = _REDUCE_OP[reduce]
    ok = (_scatter(be, wv, src, iv, ish, a, b, sst, scale, xs[d], True) if red == 0 else
          _scatter_red(be, wv, src, iv, ish, a, b, sst, scale, xs[d], red))
    if not ok:
        return NotImplemented
    if reduce == "mean":   # divided by the number of values reduced into each slot
        cnt = be._new(xs, D.int64, x.device)
        be.fill_(cnt, 1 if include_self else 0)
        one = _scalar(be, 1, D.int64, x.device)
        _scatter(be, cnt, one, iv, ish, _zeroed(cnt.stride(), d), b, [0] * len(ish),
                 cnt.stride()[d], xs[d], True)
        cnt = cnt.clamp(min=1).reshape(tuple(work.shape))
        work = work / cnt if work.dtype.is_floating_point else work // cnt
    if work is not out:
        be._copy_into(out, work)
    return out


# ---- bincount / histc --------------------------------------------------------------------------
@_index_kernel("bincount")
def _bincount(be, op, x, weights=None, minlength=0):
    args = (x, weights, minlength)
    if (minlength < 0 or x.ndim != 1 or x.dtype not in _INTS
            or (weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]))):
        return _raise(be, op, args)
    if weights is not None and not _ok_dtype(weights):
        return NotImplemented
    n = x.numel()
    (mm,) = _minmax(be, [x]) if n else [(0, -1)]   # the one sync: the output's size
    if n and mm[0] < 0:
        return _raise(be, op, args)
    size = max(minlength, mm[1] + 1)
    acc_dt = D.int64 if weights is None else D.float64
    out = be._new((size,), acc_dt, x.device)
    be.fill_(out, 0)
    if n:
        xc = _cont(be, x)
        w = xc if weights is None else be._copy_new(weights, D.float64)
        _launch(be, _K().bincount, (-(-n // _BLOCK),), [xc, w, out, n, size], (),
                {"HAS_W": weights is not None, "BLOCK": _BLOCK})
    if weights is not None and weights.dtype is D.float32:
        return be._copy_new(out, D.float32)
    return out


@_index_kernel("histc")
def _histc(be, op, x, bins=100, min=0, max=0):  # noqa: A002
    args = (x, bins, min, max)
    if x.dtype not in be_dtypes():
        return NotImplemented
    acc_dt = D.float64 if x.dtype is D.float64 else D.float32
    anp = acc_dt.np
    lo, hi = anp.type(min), anp.type(max)
    xc = _cont(be, x).reshape(-1)
    n = xc.numel()
    if lo == hi and n:   # the data's range: one read, as PyTorch's
        r = be._new((2,), acc_dt, x.device)
        be._copy_into(r[0], xc.amin())
        be._copy_into(r[1], xc.amax())
        lo, hi = be.to_host(r)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        return _raise(be, op, args)
    lohi = be.from_tensor(Tensor._from_np(np.array([lo, hi], anp), acc_dt), x.device)
    cnt = be._new((bins,), D.int64, x.device)
    be.fill_(cnt, 0)
    if n:
        _launch(be, _K().histc, (-(-n // _BLOCK),), [xc, lohi, cnt, n, bins], (),
                {"BLOCK": _BLOCK})
    # through float32: the int -> bfloat16 copy is wrong on the fake device (the interpreter)
    return be._copy_new(be._copy_new(cnt, D.float32), x.dtype)


# ---- searchsorted / bucketize ------------------------------------------------------------------
def _search(be, seq, vals, out, inner, seq_row, right, sorter=None, add=0, iota=False):
    n = out.numel()
    L = seq.shape[-1] if seq.ndim else 1
    if n:
        _launch(be, _K().search, (-(-n // _BLOCK),),
                [seq, sorter if sorter is not None else seq, vals, out, n, inner, L, seq_row,
                 L.bit_length(), add], (),
                {"RIGHT": bool(right), "HAS_SORTER": sorter is not None, "IOTA": iota,
                 "BLOCK": _BLOCK})
    return out


def _search_op(be, op, args, seq, vals, out_int32, right, sorter):
    if not _ok_dtype(seq, vals) or seq.dtype is D.bool or vals.dtype is D.bool:
        return NotImplemented
    if seq.ndim == 0 or (seq.ndim > 1 and (vals.ndim == 0
                                           or tuple(seq.shape[:-1]) != tuple(vals.shape[:-1]))):
        return _raise(be, op, args)
    if sorter is not None:
        if sorter.dtype not in _INTS or tuple(sorter.shape) != tuple(seq.shape):
            return _raise(be, op, args)
        (mm,) = _minmax(be, [sorter])
        if not _in_range(mm, 0, seq.shape[-1]):
            return _raise(be, op, args)
        sorter = _cont(be, sorter)
    if seq.dtype is not vals.dtype:   # compared in the promoted dtype
        dt = D.promote_types(seq.dtype, vals.dtype)
        seq = be._copy_new(seq, dt) if seq.dtype is not dt else seq
        vals = be._copy_new(vals, dt) if vals.dtype is not dt else vals
    seq, vals = _cont(be, seq), _cont(be, vals)
    out = be._new(tuple(vals.shape), D.int32 if out_int32 else D.int64, vals.device)
    L = seq.shape[-1]
    inner = vals.shape[-1] if seq.ndim > 1 else max(1, vals.numel())
    return _search(be, seq, vals, out, max(inner, 1), L if seq.ndim > 1 else 0, right, sorter)


@_index_kernel("searchsorted.Tensor")
def _searchsorted(be, op, seq, x, out_int32=False, right=False, side=None, sorter=None):
    args = (seq, x, out_int32, right, side, sorter)
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            return _raise(be, op, args)
        right = side == "right"
    return _search_op(be, op, args, seq, x, out_int32, right, sorter)


@_index_kernel("bucketize.Tensor")
def _bucketize(be, op, x, boundaries, out_int32=False, right=False):
    args = (x, boundaries, out_int32, right)
    if boundaries.ndim != 1:
        return _raise(be, op, args)
    return _search_op(be, op, args, boundaries, x, out_int32, right, None)


# ---- repeat_interleave -------------------------------------------------------------------------
@_index_kernel("repeat_interleave.self_Tensor")
def _repeat_interleave(be, op, x, repeats=None, dim=None, output_size=None):
    args = (x, repeats, dim, output_size)
    counts = x if repeats is None else repeats
    if isinstance(counts, bool) or not isinstance(counts, (Tensor, int)):
        return NotImplemented
    if isinstance(counts, int):
        if counts < 0:
            return _raise(be, op, args)
    elif counts.dtype not in _INTS or counts.ndim > 1:
        return _raise(be, op, args)
    if repeats is None:
        src, d = None, 0
        k = counts.shape[0] if counts.ndim else 1
    else:
        if not _ok_dtype(x):
            return NotImplemented
        src = _cont(be, x).reshape(-1) if dim is None else x
        d = 0 if dim is None else normalize_dim(dim, x.ndim)
        if src.ndim == 0:
            return NotImplemented
        k = src.shape[d]
        if isinstance(counts, Tensor) and counts.ndim == 1 and counts.shape[0] != k:
            return _raise(be, op, args)
    c = be._new((k,), D.int64, x.device)
    K = _K()
    if isinstance(counts, int):   # the output's size is known: no read
        be.fill_(c, counts)
        total = k * counts
        if k:
            tot = be._new((1,), D.int64, x.device)
            _launch(be, K.exclusive_scan, (1,), [c, k, tot], (), {"BLOCK": _BLOCK})
    elif k:
        # the repeats' min (no negatives) and their sum (the output's size): one read
        be._copy_into(c, counts.reshape(-1) if counts.ndim else counts.expand((k,)))
        mm = _mm_buffer(be, 2, x.device)
        _launch(be, K.minmax, (min(-(-k // _BLOCK), _PROGS),), [c, mm, k], (), {"BLOCK": _BLOCK})
        _launch(be, K.exclusive_scan, (1,), [c, k, mm[2:]], (), {"BLOCK": _BLOCK})
        r = be.to_host(mm)
        if r[0] < 0:
            return _raise(be, op, args)
        total = int(r[2])
    else:
        total = 0
    pos = be._new((total,), D.int64, x.device)   # the source index of each output position
    _search(be, c, c, pos, 1, 0, True, add=-1, iota=True)
    if src is None:
        return pos
    shape = tuple(src.shape[:d]) + (total,) + tuple(src.shape[d + 1:])
    out = be._new(shape, src.dtype, x.device)
    if not _gather(be, out, src, pos, shape, _zeroed(src.stride(), d), _along(src.ndim, d, 1),
                   src.stride()[d], k, wrap=False):
        return NotImplemented
    return out


# ---- pooling: _pool_gather, _max_unpool_ember --------------------------------------------------
def _planes(x, n):
    m = 1
    for s in tuple(x.shape)[:x.ndim - n]:
        m *= s
    per = 1
    for s in tuple(x.shape)[x.ndim - n:]:
        per *= s
    return m, per


@_index_kernel("_pool_gather")
def _pool_gather(be, op, x, idx, n):
    args = (x, idx, n)
    if idx.dtype not in _INTS or idx.ndim != x.ndim:
        return _raise(be, op, args)
    if not _ok_dtype(x) or tuple(idx.shape[:idx.ndim - n]) != tuple(x.shape[:x.ndim - n]):
        return NotImplemented
    m, per = _planes(x, n)
    _, k = _planes(idx, n)
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, -per, per):   # negatives wrap, as the CPU kernel's
        return _raise(be, op, args)
    xc, ic = _cont(be, x).reshape(m, per), _cont(be, idx).reshape(m, k)
    out = be._new((m, k), x.dtype, x.device)
    if not _gather(be, out, xc, ic, (m, k), [per, 0], [k, 1], 1, per):
        return NotImplemented
    return out.reshape(tuple(idx.shape))


@_index_kernel("_max_unpool_ember")
def _max_unpool(be, op, x, idx, output_size, n):
    args = (x, idx, output_size, n)
    if not _ok_dtype(x) or idx.dtype not in _INTS or tuple(idx.shape) != tuple(x.shape):
        return NotImplemented
    m, k = _planes(x, n)
    per = 1
    for s in output_size:
        per *= s
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, 0, per):
        return _raise(be, op, args)
    out = be._new(tuple(x.shape[:x.ndim - n]) + tuple(output_size), x.dtype, x.device)
    be.fill_(out, 0)
    xc, ic = _cont(be, x).reshape(m, k), _cont(be, idx).reshape(m, k)
    if not _scatter(be, out.reshape(m, per), xc, ic, (m, k), [per, 0], [k, 1], [k, 1], 1, per,
                    False, wrap=False):
        return NotImplemented
    return out


# ---- reflect / replicate / circular padding ----------------------------------------------------
_PAD_MODE = {"reflect": 0, "replicate": 1, "circular": 2}


def _pad_geometry(shape, pad, mode):
    """(M, (N1, N2, N3), (L1, L2, L3), (O1, O2, O3)) with the padded dims last, unpadded ones
    as size 1; PyTorch's errors from core's checks."""
    from ember._ops.nn import _check_index_pad, _pad_pairs
    pairs = _pad_pairs(pad, len(shape), mode)
    _check_index_pad(shape, pairs, mode)
    k = len(pairs)
    if k > 3:
        return None
    lows = {d: (lo, hi) for d, lo, hi in pairs}
    first = len(shape) - k
    M = 1
    for s in shape[:first]:
        M *= s
    N, L, O = [1, 1, 1], [0, 0, 0], [1, 1, 1]
    for j, d in enumerate(range(first, len(shape))):
        lo, hi = lows.get(d, (0, 0))
        N[3 - k + j], L[3 - k + j], O[3 - k + j] = shape[d], lo, shape[d] + lo + hi
    return M, N, L, O, first


def _pad_launch(be, src, dst, N, L, O, mode, backward):
    total = src.numel() if backward else dst.numel()
    if total:
        _launch(be, _K().pad_index, (-(-total // _BLOCK),),
                [src, dst, total, *N, *O, *L], (),
                {"MODE": _PAD_MODE[mode], "BACKWARD": backward, "BLOCK": _BLOCK})


@_index_kernel("_pad_index")
def _pad_index(be, op, x, pad, mode):
    args = (x, pad, mode)
    if mode not in _PAD_MODE or not _ok_dtype(x):
        return NotImplemented
    try:
        geo = _pad_geometry(tuple(x.shape), list(pad), mode)
    except (RuntimeError, ValueError, IndexError):
        return _raise(be, op, args)
    if geo is None:
        return NotImplemented
    M, N, L, O, first = geo
    shape = tuple(x.shape[:first]) + tuple(O[3 - (x.ndim - first):])
    if any(s < 0 for s in shape):
        return _raise(be, op, args)
    out = be._new(shape, x.dtype, x.device)
    _pad_launch(be, _cont(be, x), out, N, L, O, mode, False)
    return out


@_index_kernel("_pad_index_backward")
def _pad_index_backward(be, op, g, input_size, pad, mode):
    args = (g, input_size, pad, mode)
    if mode not in _PAD_MODE or not _ok_dtype(g) or not g.dtype.is_floating_point:
        return NotImplemented
    size = tuple(input_size)
    try:
        geo = _pad_geometry(size, list(pad), mode)
    except (RuntimeError, ValueError, IndexError):
        return _raise(be, op, args)
    if geo is None:
        return NotImplemented
    M, N, L, O, first = geo
    if tuple(g.shape) != size[:first] + tuple(O[3 - (len(size) - first):]):
        return _raise(be, op, args)
    acc_dt = D.float64 if g.dtype is D.float64 else D.float32
    acc = be._new(size, acc_dt, g.device)
    be.fill_(acc, 0)
    _pad_launch(be, _cont(be, g), acc, N, L, O, mode, True)
    return acc if acc_dt is g.dtype else be._copy_new(acc, g.dtype)


# ---- embedding_bag / embedding_renorm_ ---------------------------------------------------------
@_index_kernel("_embedding_bag")
def _embedding_bag(be, op, w, idx, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   psw=None, include_last_offset=False, padding_idx=-1):
    args = (w, idx, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset,
            padding_idx)
    if idx.dtype not in _INTS or offsets.dtype not in _INTS:
        return _raise(be, op, args)
    if (w.ndim != 2 or idx.ndim != 1 or offsets.ndim != 1 or mode not in (0, 1, 2)
            or not _ok_dtype(w) or not w.dtype.is_floating_point
            or (psw is not None and (tuple(psw.shape) != tuple(idx.shape) or not _ok_dtype(psw)))):
        return NotImplemented
    V, Dm = w.shape
    n, no = idx.numel(), offsets.numel()
    B = no - 1 if include_last_offset else no
    # idx's min/max and offsets[0]: one read
    mm = _mm_buffer(be, 2, w.device)
    ic, oc = _cont(be, idx), _cont(be, offsets)
    if n:
        _launch(be, _K().minmax, (min(-(-n // _BLOCK), _PROGS),), [ic, mm, n], (),
                {"BLOCK": _BLOCK})
    if no:
        be._copy_into(mm[2:3], oc[0:1])
    if n or no:
        r = be.to_host(mm)
        if (n and (r[0] < 0 or r[1] >= V)) or (no and r[2] != 0):
            return _raise(be, op, args)
    if B < 0:
        return NotImplemented
    acc_dt = D.float64 if w.dtype is D.float64 else D.float32
    out = be._new((B, Dm), acc_dt, w.device)
    bag = be._new((n,), D.int64, w.device)
    be.fill_(bag, -1)
    cnt = be._new((B,), D.int64, w.device)
    maxi = be._new((B, Dm) if mode == 2 else (0,), D.int64, w.device)
    wc = _cont(be, w)
    blk = 128
    if B:
        _launch(be, _K().embedding_bag, (B, max(1, -(-Dm // blk))),
                [wc, ic, oc, _cont(be, psw) if psw is not None else wc, out, bag, cnt,
                 maxi if mode == 2 else cnt, Dm, n, no, padding_idx], (),
                {"MODE": mode, "HAS_PSW": psw is not None, "LAST": bool(include_last_offset),
                 "BLOCK": blk})
    if acc_dt is not w.dtype:
        out = be._copy_new(out, w.dtype)
    return out, bag, cnt, maxi


@_index_kernel("_embedding_bag_backward_ember")
def _embedding_bag_backward(be, op, g, w, idx, bag, count, max_idx, scale_grad_by_freq, mode,
                            psw, padding_idx):
    if (g.ndim != 2 or w.ndim != 2 or idx.ndim != 1 or idx.dtype not in _INTS
            or not _ok_dtype(g, w) or not g.dtype.is_floating_point
            or (psw is not None and not _ok_dtype(psw))):
        return NotImplemented
    V, Dm = w.shape
    n = idx.numel()
    acc_dt = D.float64 if g.dtype is D.float64 else D.float32
    gw = be._new((V, Dm), acc_dt, w.device)
    be.fill_(gw, 0)
    gc, ic = _cont(be, g), _cont(be, idx)
    gpsw = None
    if mode == 2:
        mi = _cont(be, max_idx)
        total = mi.numel()
        if total:
            _launch(be, _K().embedding_bag_bwd_max, (-(-total // _BLOCK),),
                    [gc, mi, gw, total, Dm, V], (), {"BLOCK": _BLOCK})
    else:
        freq = None
        if scale_grad_by_freq and n:
            freq = be._new((V,), D.int64, w.device)
            be.fill_(freq, 0)
            _launch(be, _K().bincount, (-(-n // _BLOCK),), [ic, ic, freq, n, V], (),
                    {"HAS_W": False, "BLOCK": _BLOCK})
        if psw is not None:
            gpsw = be._new((n,), acc_dt, w.device)
        if n:
            _launch(be, _K().embedding_bag_bwd, (n,),
                    [gc, _cont(be, w), ic, _cont(be, bag), _cont(be, count),
                     _cont(be, psw) if psw is not None else gc, freq if freq is not None else ic,
                     gw, gpsw if gpsw is not None else gw, Dm, V, padding_idx], (),
                    {"MEAN": mode == 1, "HAS_PSW": psw is not None, "FREQ": freq is not None,
                     "BLOCK": 128})
    if psw is not None:
        if gpsw is None:
            gpsw = be._new((n,), psw.dtype, w.device)
            be.fill_(gpsw, 0)
        elif gpsw.dtype is not psw.dtype:
            gpsw = be._copy_new(gpsw, psw.dtype)
    return (gw if gw.dtype is w.dtype else be._copy_new(gw, w.dtype)), gpsw


@_index_kernel("embedding_renorm_")
def _embedding_renorm(be, op, w, idx, max_norm, norm_type):
    args = (w, idx, max_norm, norm_type)
    if idx.dtype not in _INTS:
        return _raise(be, op, args)
    if w.ndim != 2 or not _ok_dtype(w) or not w.dtype.is_floating_point:
        return NotImplemented
    norm = {2.0: 0, 1.0: 1, float("inf"): 2}.get(float(norm_type), 3)
    if norm == 3 and not norm_type > 0:
        return NotImplemented
    V, Dm = w.shape
    n = idx.numel()
    if n == 0:
        return w
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, 0, V):   # numpy wraps negatives on the host, PyTorch refuses them
        return be._host_call(op, args) if mm[0] >= -V and mm[1] < V else _raise(be, op, args)
    wt = w if w.stride()[1] == 1 or Dm <= 1 else be._copy_new(w, w.dtype)
    claim = be._new((V,), D.int32, w.device)
    be.fill_(claim, 0)
    _launch(be, _K().embedding_renorm, (n,),
            [wt, _cont(be, idx).reshape(-1), claim, Dm, wt.stride()[0] if V > 1 else Dm,
             float(max_norm), float(norm_type)], (), {"NORM": norm, "BLOCK": 128})
    if wt is not w:
        be._copy_into(w, wt)
    return w


_index_kernel("select_scatter")(_into_view(_lazy_rule("select_scatter")))
_index_kernel("diagonal_scatter")(_into_view(_lazy_rule("diagonal_scatter")))
_index_kernel("as_strided_scatter")(_into_view(_lazy_rule("as_strided_scatter")))

HOST: dict[str, str] = {}
