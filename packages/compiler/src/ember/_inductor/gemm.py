"""Matmuls in compiled CUDA graphs: linear, matmul, mm, bmm and addmm.

Default mode: the GEMM stays an extern call (cuBLASLt) and what follows it (linear's and
addmm's bias add, an activation, a residual) is lazy pointwise work the scheduler fuses into
one kernel after it. cuBLASLt's own epilogues (bias, ReLU, GELU) would save that kernel's
read of the GEMM's output, but ember's cuBLASLt binding (ember-devices' blaslt.py) sets no
epilogue attributes and they cover only some activations; so the epilogue is one fused Triton
kernel, not part of the extern call.

`mode="max-autotune"` (or options={"max_autotune": True}): each GEMM of a CUDA graph is
benchmarked as Triton templates (a few block sizes, `CONFIGS`) against the extern call; the
fastest is kept (`autotune.py` caches choices in memory and on disk). A template is a
`TemplateBuffer`: the scheduler puts the pointwise ops that read its result at the same index
into its kernel, so bias, activation and residual are applied to the accumulator tile before
the one store (Triton codegen: `triton.py`, `template_body`).
"""
from __future__ import annotations

import sympy

from ember import _dtype as D
from ember._tensor import Tensor

from .ir import ComputedBuffer, TBox
from .lowering import cast, register_lowering
from .sizevars import contiguous_strides

__all__ = ["GemmSpec", "TemplateBuffer", "CONFIGS",
           "batched_operand", "gemm_layout_ok"]

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the candidates max-autotune times
CONFIGS = ((64, 64, 32, 4, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 32, 8, 3),
           (32, 32, 32, 2, 4))
_MIN = 16           # a template needs every output dim and K at least this (tl.dot's minimum)
_DTYPES = (D.float32, D.float16, D.bfloat16)


class GemmSpec:
    """out[batch, rows..., n] = sum_k A[batch, rows..., k] * B[batch, k, n] over two strided
    operands (nb: 0 or 1 batch dims, from grid axis 1; rows: the output dims folded into M)."""

    def __init__(self, a: TBox, b: TBox, out_shape, nb, a_strides, a_k, b_batch, b_k, b_n, k):
        self.a, self.b, self.out_shape, self.nb = a, b, tuple(out_shape), nb
        self.a_strides, self.a_k = tuple(a_strides), a_k   # per output dim but the last
        self.b_batch, self.b_k, self.b_n, self.K = b_batch, b_k, b_n, k

    @property
    def rows(self):
        return self.out_shape[self.nb:-1]

    @property
    def M(self):
        return sympy.Mul(*self.rows)

    @property
    def N(self):
        return self.out_shape[-1]

    def key(self, sv) -> tuple:
        """Sizes, strides and dtypes as values (the autotune cache's key)."""
        h = sv.hint
        return (tuple(h(s) for s in self.out_shape), self.nb, h(self.K),
                tuple(h(s) for s in self.a_strides), h(self.a_k), h(self.b_batch),
                h(self.b_k), h(self.b_n), str(self.a.dtype), str(self.b.dtype))


class TemplateBuffer(ComputedBuffer):
    """A GEMM computed by the Triton template with `config`; its `fn` only names the operands
    it reads (for the scheduler's dependencies), the template code is triton.py's."""

    def __init__(self, name, spec: GemmSpec, dtype, config, origins=()):
        shape = spec.out_shape

        def fn(h, vars_, rvars):
            a = h.load(spec.a.buf, spec.a.offset)
            b = h.load(spec.b.buf, spec.b.offset)
            return h.mul(a, b)
        cst = contiguous_strides(shape)

        def store_index(vars_):
            return sympy.expand(sum((v * s for v, s in zip(vars_, cst)), sympy.Integer(0)))
        super().__init__(name, shape, dtype, shape, fn, store_index, origins=origins)
        self.spec, self.config = spec, config


# ---- operands ----------------------------------------------------------------------------------
def _mat(g, x: TBox) -> TBox:
    return g.realize(x) if x.lazy else x


def _t(x: TBox) -> TBox:
    """The transpose of a 2-d TBox backed by a buffer (a view: strides swapped)."""
    return TBox(x.shape[::-1], x.dtype, buf=x.buf, stride=x.stride[::-1], offset=x.offset)


def _spec(g, a: TBox, b: TBox):
    """A GemmSpec for matmul(a, b), or None where the shapes are not ones the template takes
    (a: (..., M, K) with b: (K, N); or a: (B, M, K) with b: (B, K, N))."""
    if len(a.shape) < 2 or len(b.shape) not in (2, 3):
        return None
    if len(b.shape) == 2:
        out = tuple(a.shape[:-1]) + (b.shape[1],)
        return GemmSpec(a, b, out, 0, a.stride[:-1], a.stride[-1], sympy.Integer(0),
                        b.stride[0], b.stride[1], a.shape[-1])
    if len(a.shape) != 3 or a.shape[0] != b.shape[0]:
        return None
    out = (a.shape[0], a.shape[1], b.shape[2])
    return GemmSpec(a, b, out, 1, a.stride[:2], a.stride[2], b.stride[0], b.stride[1],
                    b.stride[2], a.shape[2])


def _template_ok(g, spec, dtype) -> bool:
    h = g.sv.hint
    # every output dim a range of its own (size-1 dims are none), M, N and K tl.dot-sized
    return (g.device == "cuda" and dtype in _DTYPES and spec.a.dtype is dtype and
            spec.b.dtype is dtype and all(h(s) >= 2 for s in spec.out_shape) and
            min(h(spec.M), h(spec.N), h(spec.K)) >= _MIN)


def _gemm(g, a: TBox, b: TBox, meta, origin: str):
    """matmul(a, b) as a TBox: a template (max-autotune, when it wins) or an extern call."""
    a, b = _mat(g, a), _mat(g, b)   # operands in memory (once: realize makes a new buffer)
    if getattr(g, "max_autotune", False) and isinstance(meta, Tensor):
        spec = _spec(g, a, b)
        if spec is not None and _template_ok(g, spec, meta.dtype):
            from . import autotune
            config = autotune.select(g, spec, meta.dtype)
            if config is not None:
                buf = TemplateBuffer(g.new_name(), spec, meta.dtype, config, [origin])
                g.buffers.append(buf)
                return TBox.of(buf)
    from ember._ops.registry import OPS
    return g.extern(_Origin(origin), OPS["matmul"], (a, b), {}, meta)


class _Origin:
    def __init__(self, name):
        self.name = name


def _epilogue(g, y: TBox, bias, beta=1, alpha=1):
    """alpha * y + beta * bias, lazily (fused after the GEMM)."""
    if bias is None and alpha == 1:
        return y
    from .lowering import bcast_load
    d = y.dtype

    def loader(h, idx):
        v = y.load(h, idx)
        if alpha != 1:
            v = h.mul(v, h.v(D.float32.np.type(alpha)))
        if bias is not None:
            bv = cast(h, bcast_load(h, bias, idx), d)
            if beta != 1:
                bv = h.mul(bv, h.v(D.float32.np.type(beta)))
            v = h.add(v, bv)
        return cast(h, v, d)
    return TBox(y.shape, d, loader)


def _cuda_float(g, meta) -> bool:
    return (g.device == "cuda" and isinstance(meta, Tensor) and meta.dtype in _DTYPES)


@register_lowering("linear")
def _linear(g, op, args, margs, meta):
    x, w, bias = args[0], args[1], args[2]
    if not _cuda_float(g, meta) or not isinstance(x, TBox) or not isinstance(w, TBox) or \
            len(w.shape) != 2 or len(x.shape) < 2:
        return None
    if bias is not None and not isinstance(bias, TBox):
        return None
    y = _gemm(g, x, _t(_mat(g, w)), meta, "linear")   # (..., K) @ (K, N)
    return _epilogue(g, y, bias)


@register_lowering("matmul", "mm", "bmm")
def _matmul(g, op, args, margs, meta):
    a, b = args[0], args[1]
    if not _cuda_float(g, meta) or not isinstance(a, TBox) or not isinstance(b, TBox):
        return None
    if len(a.shape) < 2 or len(b.shape) < 2:
        return None   # vectors: the extern matmul
    if len(a.shape) >= 3 and len(b.shape) >= 3:
        if tuple(a.shape[:-2]) != tuple(b.shape[:-2]):
            return None   # broadcast batches: the extern matmul
        a, b = batched_operand(g, _mat(g, a)), batched_operand(g, _mat(g, b))
        if len(a.shape) == 3:
            return _gemm(g, a, b, meta, op.qualname)
        from ember._ops.registry import OPS
        # (B, H, M, K) @ (B, H, K, N): batch dims that collapse into one batch stride
        return g.extern(_Origin(op.qualname), OPS["matmul"], (a, b), {}, meta)
    if (len(b.shape) == 3) != (len(a.shape) == 3) or len(b.shape) > 3:
        return None   # (..., M, K) @ (K, N) folds the batch into M (the extern matmul)
    return _gemm(g, a, b, meta, op.qualname)


# ---- batched operands: the layouts one strided-batched cuBLASLt call takes ------------------
def gemm_layout_ok(shape, stride) -> bool:
    """Whether a (..., r, c) operand of these sizes and strides (ints) is one strided-batched
    GEMM operand as it lies: its batch dims (size 1 ignored) collapse into one batch stride
    and a matrix dim is unit-stride with the other one its leading dimension (cuBLASLt's
    layout: rows, cols, ld, batch count, batch stride; op N or T)."""
    r, c = shape[-2], shape[-1]
    sr, sc = stride[-2], stride[-1]
    if not ((sc == 1 and sr >= max(c, 1)) or (sr == 1 and sc >= max(r, 1)) or r * c <= 1):
        return False
    expect = None
    for n, st in zip(reversed(shape[:-2]), reversed(stride[:-2])):
        if n == 1:
            continue
        if expect is not None and st != expect:
            return False
        expect = st * n
    return True


def batched_operand(g, x: TBox) -> TBox:
    """x (batch..., r, c) backed by a buffer, in a layout a strided-batched GEMM takes: as is
    where it is one (`gemm_layout_ok`: attention's q @ k.transpose(-2, -1) of a contiguous
    (B, H, T, D) is), else copied once by a kernel of this graph (not by the extern call,
    eagerly, at each call) into batch-contiguous memory that keeps the matrix's orientation,
    so the copy reads its source in order. Attention's heads split out of one (B, T, 3C)
    projection are such: batch dims (B, H) with strides (3TC, D). The copies of one source
    (q, k and v of one projection) share a kernel; one layout is copied once per graph."""
    h = g.sv.hint
    shape, stride = [h(s) for s in x.shape], [h(s) for s in x.stride]
    if gemm_layout_ok(shape, stride):
        return x
    cache = g.__dict__.setdefault("_gemm_copies", {})
    key = (x.buf.name, tuple(x.shape), tuple(x.stride), x.offset)
    if key in cache:
        return cache[key]
    nd = len(x.shape)
    flip = abs(stride[-2]) < abs(stride[-1])   # rows contiguous: copy the transpose
    perm = list(range(nd - 2)) + ([nd - 1, nd - 2] if flip else [nd - 2, nd - 1])
    src = x

    def loader(hd, idx):   # idx over the permuted shape
        j = [None] * nd
        for k, p in enumerate(perm):
            j[p] = idx[k]
        return src.load(hd, j)
    lazy = TBox(tuple(x.shape[p] for p in perm), x.dtype, loader)
    lazy.origins = ["bmm operand copy"]
    y = g.realize(lazy, ["bmm operand copy"])
    if flip:
        y = TBox(x.shape, x.dtype, buf=y.buf, stride=y.stride[:-2] + y.stride[-2:][::-1],
                 offset=y.offset)
    cache[key] = y
    return y


@register_lowering("addmm")
def _addmm(g, op, args, margs, meta):
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = args[3], args[4]
    if not _cuda_float(g, meta) or not all(isinstance(t, TBox) for t in (bias, a, b)) or \
            not all(isinstance(s, (int, float)) for s in (beta, alpha)):
        return None
    y = _gemm(g, a, b, meta, "addmm")
    return _epilogue(g, y, bias if beta != 0 else None, beta, alpha)
