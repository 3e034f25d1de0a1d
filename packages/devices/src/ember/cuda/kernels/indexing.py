"""GPU kernels of the indexing family (x[i], index_put, take/put, masks, nonzero, searchsorted,
bucketize) and the helpers every index-driven kernel shares (`_index_kernel`, bounds checks,
strided gather/scatter launches): scatter, nn (embedding bags, padding), joining
(repeat_interleave, *_scatter views), pool and sorting (bincount, histc) use them.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Every op here is one strided Triton kernel (indexing_tl: gather_nd / scatter_nd over up to 6
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

from ember._ops.registry import DynamicOutputShape, Tensor, broadcast_shapes
from ember._ops.registry import dtypes as D

from ..runtime import driver as rt
from .base import _cont, _launch, _lazy, be_dtypes, cuda_kernel

_BLOCK = 1024
_PROGS = 528   # grid-strided kernels: about four programs per SM of an H100/H200
_INTS = (D.int64, D.int32, D.int16, D.int8, D.uint8)
_I64 = np.iinfo(np.int64)
# dtypes tl.atomic_add takes natively; the others accumulate in a float32 / int64 copy
_ATOMIC = (D.float32, D.float64, D.int32, D.int64)



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
    k.__module__ = f.__module__  # the family module that registered it
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
        _launch(be, _lazy("indexing_tl").gather_nd, (-(-n // _BLOCK),),
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
        _launch(be, _lazy("indexing_tl").scatter_nd, (-(-n // _BLOCK),),
                [dst, src, idx, n, *sizes, *A, *B, *C, scale, nsize, _span(dst)], (),
                {"ACCUM": accum, "WRAP": wrap, "NDIM": nd, "I64": _wide(n, dst, src, idx),
                 "BLOCK": _BLOCK})
    return True


def _minmax(be, idxs):
    """[(min, max)] of each integer tensor, one kernel each and one read for all."""
    _same_device(*idxs)
    mm = _mm_buffer(be, len(idxs), idxs[0].device)
    K = _lazy("indexing_tl")
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
    from ..runtime.streams import current_stream_handle
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
        K = _lazy("indexing_tl")
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
    K = _lazy("indexing_tl")
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
    args = (x, mask, source)   # (the meta checked mask's and source's dtypes)
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


# ---- searchsorted / bucketize ------------------------------------------------------------------
def _search(be, seq, vals, out, inner, seq_row, right, sorter=None, add=0, iota=False):
    n = out.numel()
    L = seq.shape[-1] if seq.ndim else 1
    if n:
        _launch(be, _lazy("indexing_tl").search, (-(-n // _BLOCK),),
                [seq, sorter if sorter is not None else seq, vals, out, n, inner, L, seq_row,
                 L.bit_length(), add], (),
                {"RIGHT": bool(right), "HAS_SORTER": sorter is not None, "IOTA": iota,
                 "BLOCK": _BLOCK})
    return out


def _search_op(be, op, args, seq, vals, out_int32, right, sorter):
    if not _ok_dtype(seq, vals) or seq.dtype is D.bool or vals.dtype is D.bool:
        return NotImplemented
    if seq.ndim == 0 or (seq.ndim > 1 and vals.ndim == 0):  # (the meta checked the dims)
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
    if side is not None:   # (valid: the meta checked it)
        right = side == "right"
    return _search_op(be, op, args, seq, x, out_int32, right, sorter)


@_index_kernel("bucketize.Tensor")
def _bucketize(be, op, x, boundaries, out_int32=False, right=False):
    args = (x, boundaries, out_int32, right)   # (1-D boundaries: the meta checked)
    return _search_op(be, op, args, boundaries, x, out_int32, right, None)


HOST: dict[str, str] = {}
