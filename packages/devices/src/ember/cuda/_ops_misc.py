"""GPU kernels: creation, movement, complex views, special functions and linear algebra.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Most movement ops here are strided copies through the backend's copy kernel (`_copy_into`, one
pointwise launch, or a device memcpy when both sides are contiguous) between views of the input
and of a fresh output: cat (one copy per input into its slice of the output), flip (a view with
negated strides), roll (one copy per rolled block), repeat (one copy from a zero-stride view into
the output seen as (r0, s0, r1, s1, ...)), diag/diag_embed/eye (a fill and a copy into the
output's diagonal view). linalg_cross reuses the pointwise code generator for its two products
(nan_to_num and angle have no kernel here: core's decompositions run their pointwise formulas).
"""
from __future__ import annotations

import math
import struct

from ember import _dtype as D
from ember._tensor import Tensor

from ._ops import cuda_kernel

_COMPLEX = "complex dtypes have no Triton codegen"


def _ops():
    from . import _ops
    return _ops


def _ok_dtypes():
    from ._backend import _TL_OK
    return _TL_OK


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


def _operand(be, t):
    return be._operand(t)


def _pw(be, op, args, tensor_pos, out, rdt, cdt):
    """One generated pointwise launch of op's formula (args: tensors and Python values in
    op.pointwise's order; tensor_pos: which are tensors) into the tensor `out`."""
    a = [be._operand(x) if i in tensor_pos else x for i, x in enumerate(args)]
    be.pw.run(op, a, tensor_pos.__contains__, be._operand(out), rdt, cdt)


# ---- cat ----------------------------------------------------------------------------------------
@cuda_kernel("cat")
def _cat(be, op, tensors, dim=0):
    from ember._ops.joining import _cat_inputs
    ts = list(tensors)
    dev = _on_cuda(*ts) if ts else None
    if dev is None:
        return NotImplemented
    keep, d, shape, dtype = _cat_inputs([(tuple(t.shape), t.dtype) for t in ts], dim)
    ok = _ok_dtypes()
    if dtype not in ok or any(ts[i].dtype not in ok for i in keep):
        return NotImplemented  # complex
    out = be._new(shape, dtype, dev)
    if out.numel() == 0:
        return out
    st = out._stride
    start = 0
    for i in keep:  # one copy per input into its slice (a memcpy when both are contiguous)
        t = ts[i]
        n = t.shape[d]
        if n:
            sh = list(shape)
            sh[d] = n
            be._copy_into(_view(out, sh, st, start * st[d]), t)
        start += n
    return out


# ---- flip, roll, repeat -------------------------------------------------------------------------
@cuda_kernel("flip")
def _flip(be, op, x, dims):
    from ember._ops.joining import _flip_dims
    dims = _flip_dims(x.ndim, dims)
    if x.dtype not in _ok_dtypes():
        return NotImplemented
    out = be._new(tuple(x.shape), x.dtype, x.device)
    if out.numel() == 0:
        return out
    st, off = list(x._stride), x._offset
    for d in dims:
        off += (x.shape[d] - 1) * st[d]
        st[d] = -st[d]
    be._copy_into(out, _view(x, x.shape, st, off))
    return out


@cuda_kernel("roll")
def _roll(be, op, x, shifts, dims=()):
    from ember._ops.joining import _roll_args
    shifts, dims = _roll_args(x.ndim, shifts, dims)
    if x.dtype not in _ok_dtypes():
        return NotImplemented
    out = be._new(tuple(x.shape), x.dtype, x.device)
    if out.numel() == 0:
        return out
    if not dims:  # the flattened tensor rolled
        src = _ops()._cont(be, x)
        n = x.numel()
        s = shifts[0] % n
        flat_o, flat_s = _view(out, (n,), (1,), 0), _view(src, (n,), (1,), src._offset)
        _roll_blocks(be, flat_o, flat_s, [(0, s)])
        return out
    per = {}
    for s, d in zip(shifts, dims):  # repeated dims add up (PyTorch rolls once per entry)
        per[d] = per.get(d, 0) + s
    _roll_blocks(be, out, x, [(d, s % x.shape[d]) for d, s in per.items()])
    return out


def _roll_blocks(be, out, x, rolls):
    """out = x rolled by s along each (d, s) of rolls: one copy per block (2 per rolled dim)."""
    blocks = [([], [], [])]  # per block: (dim, out start, in start, length) entries
    for d, s in rolls:
        n = x.shape[d]
        parts = [(s, 0, n - s), (0, n - s, s)] if s else [(0, 0, n)]
        blocks = [(a + [d], b + [p], c) for a, b, c in blocks for p in parts if p[2]]
    ost, ist = out._stride, x._stride
    for ds, ps, _ in blocks:
        shape = list(x.shape)
        oo, io = out._offset, x._offset
        for d, (o0, i0, ln) in zip(ds, ps):
            shape[d] = ln
            oo += o0 * ost[d]
            io += i0 * ist[d]
        be._copy_into(_view(out, shape, ost, oo), _view(x, shape, ist, io))


@cuda_kernel("repeat")
def _repeat(be, op, x, repeats):
    from ember._ops.joining import _repeat_shape
    padded, shape = _repeat_shape(tuple(x.shape), repeats)
    if x.dtype not in _ok_dtypes():
        return NotImplemented
    out = be._new(shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    pad = len(padded) - x.ndim
    xst = (0,) * pad + tuple(x._stride)
    inter = [v for r, p in zip(repeats, padded) for v in (r, p)]
    ist = [v for s in xst for v in (0, s)]
    from ember._tensor import c_strides
    # out seen as (r0, p0, r1, p1, ...) is out itself; x broadcast along the r's: one copy
    be._copy_into(_view(out, inter, c_strides(tuple(inter)), 0), _view(x, inter, ist, x._offset))
    return out


# ---- diagonals and eye --------------------------------------------------------------------------
@cuda_kernel("diag")
def _diag(be, op, x, diagonal=0):
    from ember._ops import movement as M
    m = op.meta(x, diagonal)  # PyTorch's errors
    if x.dtype not in _ok_dtypes():
        return NotImplemented
    out = be._new(tuple(m.shape), x.dtype, x.device)
    if x.ndim == 1:
        if out.numel():
            be.fill_(out, 0)
            shape, stride, off = M._diagonal(out, diagonal, 0, 1)
            be._copy_into(_view(out, shape, stride, off), x)
        return out
    shape, stride, off = M._diagonal(x, diagonal, 0, 1)
    be._copy_into(out, _view(x, shape, stride, off))
    return out


@cuda_kernel("diag_embed")
def _diag_embed(be, op, x, offset=0, dim1=-2, dim2=-1):
    from ember._ops import movement as M
    from ember._ops.joining import _diag_embed_dims
    m = op.meta(x, offset, dim1, dim2)
    if x.dtype not in _ok_dtypes():
        return NotImplemented
    d1, d2 = _diag_embed_dims(x.ndim, offset, dim1, dim2)
    out = be._new(tuple(m.shape), x.dtype, x.device)
    if out.numel():
        be.fill_(out, 0)
        shape, stride, off = M._diagonal(out, offset, d1, d2)
        be._copy_into(_view(out, shape, stride, off), x)
    return out


def _factory_out(be, op, args):
    """(meta, device) of a factory call on cuda, or None (elsewhere: the CPU path)."""
    from ember._device import device as Device
    d = args[op.device_idx]
    dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return None
    m = _ops()._meta_of(op, args)
    if m.dtype not in _ok_dtypes():
        return None
    return m, dev


@cuda_kernel("eye")
def _eye(be, op, *args):
    r = _factory_out(be, op, args)
    if r is None:
        return NotImplemented
    m, dev = r
    out = be._new(tuple(m.shape), m.dtype, dev)
    if out.numel():
        be.fill_(out, 0)
        n = min(out.shape)
        be.fill_(_view(out, (n,), (out._stride[0] + out._stride[1],), 0), 1)
    if m.requires_grad:
        out.requires_grad_(True)
    return out


def _bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", float(v)))[0]


def _space(log):
    def f(be, op, *args):
        from ember._ops.creation import _scalar
        start, end, steps = args[0], args[1], args[2]
        if steps < 0:
            raise RuntimeError("linspace(): number of steps must be non-negative")
        base = float(args[3]) if log else 0.0
        if log and not base > 0:
            return NotImplemented  # negative bases: integer powers only (numpy's power)
        if isinstance(start, Tensor) or isinstance(end, Tensor):
            return NotImplemented
        r = _factory_out(be, op, args)
        if r is None:
            return NotImplemented
        m, dev = r
        out = be._new(tuple(m.shape), m.dtype, dev)
        n = out.numel()
        if n:
            s, e = float(_scalar(start)), float(_scalar(end))
            if isinstance(s, complex) or isinstance(e, complex):
                return NotImplemented
            step = (e - s) / (n - 1) if n > 1 else 0.0
            K = _ops()._lazy("_kernels_misc")
            _ops()._launch(be, K.space_fill, (-(-n // 1024),),
                           [out, n, _bits(s), _bits(e), _bits(step),
                            _bits(math.log(base) if log else 0.0)], (),
                           {"LOG": log, "HALF": m.dtype in (D.float16, D.bfloat16),
                            "BLOCK": 1024})
        if m.requires_grad:
            out.requires_grad_(True)
        return out
    return f


# ---- conj_physical of a real tensor: a copy -------------------------------------------------
@cuda_kernel("conj_physical")
def _conj_physical(be, op, x):
    if x.dtype not in _ok_dtypes():
        return NotImplemented  # complex
    return be._copy_new(x, x.dtype)


class _CrossPart:
    qualname = "linalg_cross"
    pw_idx = (0, 1, 2, 3)

    @staticmethod
    def pointwise(o, a1, b2, a2, b1):
        return o.sub(o.mul(a1, b2), o.mul(a2, b1))


@cuda_kernel("linalg_cross")
def _linalg_cross(be, op, a, b, dim=-1):
    from ._pointwise import broadcast_strides
    if _on_cuda(a, b) is None:
        return NotImplemented
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    m = op.meta(a, b, dim)
    ok = _ok_dtypes()
    if a.dtype not in ok or b.dtype not in ok or m.dtype is D.bool:
        return NotImplemented
    from ember._size import normalize_dim
    shape = tuple(m.shape)
    d = normalize_dim(dim, len(shape))
    out = be._new(shape, m.dtype, a.device)
    if out.numel() == 0:
        return out
    cdt = D.float32 if m.dtype in (D.float16, D.bfloat16) else m.dtype
    part = list(shape)
    part[d] = 1
    sa = broadcast_strides(tuple(a.shape), a._stride, shape)
    sb = broadcast_strides(tuple(b.shape), b._stride, shape)

    def comp(t, st, c):
        return _view(t, part, st, t._offset + c * st[d])

    for c in range(3):  # out[c] = a[c+1] b[c+2] - a[c+2] b[c+1]: one launch per component
        i, j = (c + 1) % 3, (c + 2) % 3
        _pw(be, _CrossPart, (comp(a, sa, i), comp(b, sb, j), comp(a, sa, j), comp(b, sb, i)),
            {0, 1, 2, 3}, comp(out, list(out._stride), c), m.dtype, cdt)
    return out


# ---- einsum: pairwise contractions through the backend's own ops (cuBLAS matmul) ----------------
@cuda_kernel("einsum")
def _einsum(be, op, equation, tensors, path=None):
    from ember._ops.einsum import _check
    ts = list(tensors)
    dev = _on_cuda(*ts) if ts else None
    subs, out, size = _check(equation, ts)  # PyTorch's errors
    if dev is None or ts[0].dtype not in (D.float16, D.bfloat16, D.float32, D.float64):
        return NotImplemented  # integers: no cuBLAS path; complex: no codegen
    from ember._grad_mode import no_grad
    with no_grad():
        ops = []
        for t, s in zip(ts, subs):
            t, s = _einsum_prep(t.detach(), s, size)
            ops.append((t, s))
        cur, cs = ops[0]
        for k in range(1, len(ops)):
            later = set(out).union(*(set(s) for _, s in ops[k + 1:]))
            cur, cs = _einsum_pair(cur, cs, ops[k][0], ops[k][1], later, size)
        keep = set(out)
        alone = tuple(i for i, c in enumerate(cs) if c not in keep)
        if alone:
            cur = cur.sum(alone)
            cs = "".join(c for c in cs if c in keep)
        r = cur.permute([cs.index(c) for c in out]) if out else cur
        if not r.is_contiguous() or any(r._storage is t._storage for t in ts):
            r = be._copy_new(r, r.dtype)  # a fresh tensor, never a view of an input
        return r


def _einsum_prep(t, s, size):
    """t with its repeated subscripts reduced to diagonals and size-1 dims broadcast."""
    while True:
        rep = next((c for c in s if s.count(c) > 1), None)
        if rep is None:
            break
        i = s.index(rep)
        j = s.index(rep, i + 1)
        t = t.diagonal(0, i, j)  # the diagonal goes last
        s = "".join(c for k, c in enumerate(s) if k not in (i, j)) + rep
    want = tuple(size[c] for c in s)
    if tuple(t.shape) != want:
        t = t.expand(want)
    return t, s


def _einsum_pair(a, sa, b, sb, later, size):
    """Contract two operands as one batched matmul: batch letters (both, kept), left (a only),
    right (b only), contracted (both, not kept); letters only one side has and nobody needs
    are summed first."""
    def sum_alone(x, s, other):
        alone = tuple(i for i, c in enumerate(s) if c not in later and c not in other)
        if not alone:
            return x, s
        return x.sum(alone), "".join(c for i, c in enumerate(s) if i not in alone)

    a, sa2 = sum_alone(a, sa, sb)
    b, sb = sum_alone(b, sb, sa)
    sa = sa2
    batch = [c for c in sa if c in sb and c in later]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    contr = [c for c in sa if c in sb and c not in later]

    def n(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p

    a2 = a.permute([sa.index(c) for c in batch + left + contr]).reshape(
        (n(batch), n(left), n(contr)))
    b2 = b.permute([sb.index(c) for c in batch + contr + right]).reshape(
        (n(batch), n(contr), n(right)))
    r = (a2 @ b2).reshape(tuple(size[c] for c in batch + left + right))
    return r, "".join(batch + left + right)


cuda_kernel("linspace")(_space(False))
cuda_kernel("logspace")(_space(True))


HOST: dict[str, str] = {
    "conj_physical": f"{_COMPLEX} (imag's gradient conjugates a complex tensor)",
    "mul": f"{_COMPLEX} (imag's gradient: g * 1j)",
}
