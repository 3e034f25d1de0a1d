"""Linear algebra, products: matmul and its family, einsum, tensordot, kron, cross, trace, cdist.

`matmul` is the one product with a kernel (numpy's matmul calls BLAS for float32/float64, also for
transposed views, so the fast path makes no copies); mm, bmm, mv, dot, addmm, ... are checks over
it. Factorizations and norms live in `linalg_factor.py`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._blas import gemm_threads
from .._bmm import split_matmul
from .._dispatch import TensorMeta, torch_name
from .._size import broadcast_shapes, normalize_dim
from ._registry import FUNCTIONS, OPS, complex_vjp, defop

__all__ = ["LinAlgError"]


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (singular, not positive-definite, ...).

    PyTorch's `torch.linalg.LinAlgError` (`torch._C._LinAlgError`) is also a RuntimeError."""


LinAlgError.__module__ = "ember.linalg"

# C++ scalar type names that PyTorch's mm dtype message prints ("float != double")
_C_NAMES = {D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
            D.int32: "int", D.int64: "long int", D.float16: "c10::Half",
            D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
            D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}
_LOWP_NP = (np.dtype(D.float16.np), np.dtype(D.bfloat16.np), np.dtype(D.float8_e4m3fn.np),
            np.dtype(D.float8_e5m2.np))


def _dt(x):
    """The ember dtype of a Tensor, TensorMeta-like or numpy array."""
    d = x.dtype
    return d if isinstance(d, D.dtype) else D.from_numpy_dtype(d)


def _shape_str(shape) -> str:
    return "x".join(str(s) for s in shape)


def upcast(*arrays):
    """fp16/bf16 arrays -> float32 for computing (numpy's half math is slow and loses precision)."""
    return tuple(a.astype(np.float32) if a.dtype in _LOWP_NP else a for a in arrays)


# ---- matmul ------------------------------------------------------------------------------------
def matmul_shape(a, b) -> tuple:
    """Output shape of a @ b for every rank case, raising PyTorch's errors (dtype, then shape)."""
    na, nb = len(a.shape), len(b.shape)
    da, db = _dt(a), _dt(b)
    if na == 0 or nb == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{na}D and {nb}D")
    if na == 1 and nb == 1:
        if da != db:
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                               f"{torch_name(da)} and {torch_name(db)}")
        if da == D.bool:
            raise NotImplementedError("\"dot\" not implemented for 'Bool'")
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                               f"[{b.shape[0]}] to have the same number of elements, but got "
                               f"{a.shape[0]} and {b.shape[0]} elements respectively")
        return ()
    if nb == 1:  # (..., n, k) @ (k,): PyTorch folds the batch into one mv
        rows = 1
        for s in a.shape[:-1]:
            rows = rows * s
        if da != db:
            raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                               f"{torch_name(db)}, {torch_name(da)}, and {torch_name(db)}")
        if da == D.bool:
            raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")
        if a.shape[-1] != b.shape[0]:
            raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{a.shape[-1]}), "
                               f"vec ({b.shape[0]})")
        return tuple(a.shape[:-1])
    a_mat = (1, a.shape[0]) if na == 1 else tuple(a.shape[-2:])
    if nb == 2:  # PyTorch folds (..., n, k) @ (k, m) into one mm of (prod(...)*n, k) @ (k, m)
        rows = 1
        for s in a.shape[:-1]:
            rows = rows * s
        if da != db:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{_C_NAMES[da]} != {_C_NAMES[db]}")
        if da == D.bool:
            raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
        if a.shape[-1] != b.shape[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{a.shape[-1]} "
                               f"and {_shape_str(b.shape)})")
        return tuple(a.shape[:-1]) + (b.shape[1],)
    # batched: broadcast the batch dims, then a bmm
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if da != db:
        raise RuntimeError(f"expected scalar type {torch_name(da)} but found {torch_name(db)}")
    if da == D.bool:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    if a_mat[1] != b.shape[-2]:
        nbatch = 1
        for s in batch:
            nbatch = nbatch * s
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{nbatch}, {a_mat[1]}] but got: [{nbatch}, {b.shape[-2]}].")
    return tuple(batch) + (a_mat[0],) * (na > 1) + (b.shape[-1],)


def _matmul_kernel(a, b):
    matmul_shape(a, b)
    if a.dtype in _LOWP_NP:
        return _matmul_np(*upcast(a, b)).astype(a.dtype)
    return _matmul_np(a, b)


def _matmul_np(a, b):
    # the size of one BLAS call: all of a's rows against a matrix b, else one matrix of a batch
    k, m = a.shape[-1], (b.shape[-1] if b.ndim > 1 else 1)
    rows = (a.size // k if k else 0) if b.ndim <= 2 else (a.shape[-2] if a.ndim > 1 else 1)
    gemm_threads(2 * rows * k * m)
    if a.ndim > 2 and b.ndim == 2:
        # (..., k) @ (k, m) as one 2-D GEMM: numpy's broadcast-batched path for this case
        # skips BLAS and is ~100x slower (a copy of a non-contiguous `a` is far cheaper)
        # (written through a 2-D view of the final array: a reshaped result would be a view,
        # which the dispatcher copies rather than alias)
        rows, m = math.prod(a.shape[:-1]), b.shape[1]
        out = np.empty(a.shape[:-1] + (m,), np.result_type(a, b))
        np.matmul(a.reshape(rows, a.shape[-1]), b, out=out.reshape(rows, m))
        return out
    if b.ndim > 2 and a.ndim > 2:  # a batch of small matrices: halves on two threads
        out = split_matmul(a, b, 2 * rows * k * m)
        if out is not None:
            return out
    return np.matmul(a, b)  # BLAS for float32/64, transposed views included: no copy here


def mH(x):
    """Conjugate transpose of the last two dims (for complex-correct vjps)."""
    t = x.transpose(-2, -1)
    return t.conj() if x.dtype.is_complex else t


def _conj(x):
    return x.conj() if x.dtype.is_complex else x


@complex_vjp
def _matmul_vjp(g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:  # dot: g is 0-d
        return (g * _conj(b) if a.requires_grad else None,
                _conj(a) * g if b.requires_grad else None)
    a2 = a.reshape((1,) + tuple(a.shape)) if a.ndim == 1 else a          # (..., n, k)
    b2 = b.reshape(tuple(b.shape) + (1,)) if b.ndim == 1 else b          # (..., k, m)
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)                                            # (..., n, m)
    ga = gb = None
    if a.requires_grad:
        ga = matmul(g2, mH(b2))                                          # (..., n, k)
        if a.ndim == 1:
            ga = ga.reshape(tuple(ga.shape[:-2]) + (ga.shape[-1],))
    if b.requires_grad:
        if b.ndim == 2 and a.ndim >= 2 and b.shape[0] > 1 and b.stride() == (1, b.shape[0]):
            # b is a transposed weight (linear's w.t()): its grad as the transpose of a
            # row-major GEMM, so the weight's own grad comes out contiguous (no strided copy)
            k, m = a.shape[-1], g2.shape[-1]
            gb = mH(matmul(mH(g2.reshape(-1, m)), a.reshape(-1, k)))    # (k, m)
        elif b.ndim == 2 and a.ndim > 2:  # linear's weight grad: one GEMM over the flat batch
            k, m = a.shape[-1], g2.shape[-1]
            gb = matmul(mH(a.reshape(-1, k)), g2.reshape(-1, m))         # (k, m)
        else:
            gb = matmul(mH(a2), g2)                                      # (..., k, m)
        if b.ndim == 1:
            gb = gb.reshape(tuple(gb.shape[:-1]))
    return ga, gb


defop("matmul(Tensor self, Tensor other) -> Tensor", kernels={"cpu": _matmul_kernel},
      meta=lambda a, b: TensorMeta(matmul_shape(a, b), a.dtype), vjp=_matmul_vjp)
matmul = FUNCTIONS["matmul"]


def _need_dims(x, n, msg):
    if x.ndim != n:
        raise RuntimeError(msg)


def _mm(a, b):
    _need_dims(a, 2, "self must be a matrix")
    _need_dims(b, 2, "mat2 must be a matrix")
    return matmul(a, b)


def _bmm(a, b):
    _need_dims(a, 3, "batch1 must be a 3D tensor")
    _need_dims(b, 3, "batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return matmul(a, b)


def _mv(a, v):
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    return matmul(a, v)


def _dot(a, b, name="dot"):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return matmul(a, b)


defop("mm(Tensor self, Tensor mat2) -> Tensor", decomp=_mm)
defop("bmm(Tensor self, Tensor mat2) -> Tensor", decomp=_bmm)
defop("mv(Tensor self, Tensor vec) -> Tensor", decomp=_mv)
defop("dot(Tensor self, Tensor tensor) -> Tensor", decomp=_dot)
defop("vdot(Tensor self, Tensor other) -> Tensor", decomp=lambda a, b: _dot(_conj(a), b))


def _outer(a, b):
    for name, x in (("self", a), ("vec2", b)):
        if x.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {x.ndim}-D")
    return a.reshape((a.shape[0], 1)) * b


defop("outer(Tensor self, Tensor vec2) -> Tensor", decomp=_outer, aliases=("ger",))


def _inner(a, b):
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(a.shape)} and {list(b.shape)}")
    return _tensordot(a, b, [a.ndim - 1], [b.ndim - 1])


defop("inner(Tensor self, Tensor other) -> Tensor", decomp=_inner)


# ---- add*mm: beta * self + alpha * product -------------------------------------------------------
def _scaled_add(name, self, prod, beta, alpha):
    want = tuple(prod.shape)
    try:
        ok = broadcast_shapes(tuple(self.shape), want) == want
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"The expanded size of the tensor ({want[-1]}) must match the existing "
                           f"size ({self.shape[-1]}) at non-singleton dimension "
                           f"{len(want) - 1}.  Target sizes: {list(want)}.  Tensor sizes: "
                           f"{list(self.shape)}")
    if not (prod.dtype.is_floating_point or prod.dtype.is_complex):
        beta, alpha = int(beta), int(alpha)  # PyTorch casts the scalars to the integer dtype
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # PyTorch ignores self's values (nan and inf do not propagate)
        return keep_graph(prod, self)
    return prod + (self if beta == 1 else self * beta)


def keep_graph(value, x):
    """value, broadcast with x and linked to x in the graph (x gets a zero gradient, as in
    PyTorch), without reading x's values: where(True, value, x)."""
    import ember
    return ember.where(ember.ones((), dtype=ember.bool, device=value.device), value, x)


def _same_dtype(self, other_name, other):
    if self.dtype != other.dtype:
        raise RuntimeError(f"self and {other_name} must have the same dtype, but got "
                           f"{torch_name(self.dtype)} and {torch_name(other.dtype)}")


def _addmm(self, m1, m2, beta, alpha):
    _need_dims(m1, 2, f"mat1 must be a matrix, got {m1.ndim}-D tensor")
    _need_dims(m2, 2, f"mat2 must be a matrix, got {m2.ndim}-D tensor")
    _same_dtype(self, "mat2", m2)
    return _scaled_add("addmm", self, matmul(m1, m2), beta, alpha)


def _addmv(self, mat, vec, beta, alpha):
    if self.dtype != mat.dtype or mat.dtype != vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{torch_name(self.dtype)}, {torch_name(mat.dtype)}, and "
                           f"{torch_name(vec.dtype)}")
    return _scaled_add("addmv", self, _mv(mat, vec), beta, alpha)


def _baddbmm(self, b1, b2, beta, alpha):
    _same_dtype(self, "batch2", b2)
    return _scaled_add("baddbmm", self, _bmm(b1, b2), beta, alpha)


def _addbmm(self, b1, b2, beta, alpha):
    _same_dtype(self, "batch2", b2)
    _bmm(b1, b2)  # checks only
    bsz, n, k = b1.shape
    # sum over the batch of b1[i] @ b2[i] is one matmul of (n, B*k) @ (B*k, m)
    prod = matmul(b1.permute(1, 0, 2).reshape((n, bsz * k)), b2.reshape((bsz * k, b2.shape[2])))
    return _scaled_add("addbmm", self, prod, beta, alpha)


def _addr(self, v1, v2, beta, alpha):
    return _scaled_add("addr", self, _outer(v1, v2), beta, alpha)


_ADD_KW = "*, Scalar beta=1, Scalar alpha=1) -> Tensor"
defop(f"addmm(Tensor self, Tensor mat1, Tensor mat2, {_ADD_KW}", decomp=_addmm)
defop(f"addmv(Tensor self, Tensor mat, Tensor vec, {_ADD_KW}", decomp=_addmv)
defop(f"addbmm(Tensor self, Tensor batch1, Tensor batch2, {_ADD_KW}", decomp=_addbmm)
defop(f"baddbmm(Tensor self, Tensor batch1, Tensor batch2, {_ADD_KW}", decomp=_baddbmm)
defop(f"addr(Tensor self, Tensor vec1, Tensor vec2, {_ADD_KW}", decomp=_addr)

# in-place forms: the product written back with copy_ (differentiable through the composite;
# self is cloned first when it is in a graph, so the ops reading it keep an unmodified copy)
def _inplace_add(f, product=None):
    def run(s, x, y, beta, alpha):
        if product is not None and any(st == 0 and n > 1 for n, st in zip(s.shape, s.stride())):
            return _overlapping_add_(f.__name__[1:], s, product(x, y), beta, alpha)
        src = s.clone() if s.requires_grad else s
        return s.copy_(f(src, x, y, beta, alpha))
    return run


def _overlapping_add_(name, s, prod, beta, alpha):
    """PyTorch's addmv_/baddbmm_ into an expanded self (its kernels have no overlap check): the
    elements are written one after another in row-major order, s[i] = beta*s[i] + alpha*p[i],
    so a memory location shared by m elements ends as beta^m*s + sum_r beta^(m-1-r)*alpha*p_r.
    (PyTorch's large-size BLAS paths may order the writes otherwise: unspecified there.) The
    gradient with respect to self's earlier history is that of these writes (PyTorch's backward
    refuses an expanded self that requires grad)."""
    import ember
    if s.dtype != prod.dtype:
        raise RuntimeError(f"{name}: expected self and the product to have the same dtype, but "
                           f"got {torch_name(s.dtype)} and {torch_name(prod.dtype)}")
    if tuple(prod.shape) != tuple(s.shape):
        raise RuntimeError(f"output with shape {list(s.shape)} doesn't match the broadcast "
                           f"shape {list(prod.shape)}")
    if not (prod.dtype.is_floating_point or prod.dtype.is_complex):
        beta, alpha = int(beta), int(alpha)
    shape, stride = tuple(s.shape), tuple(s.stride())
    shared = [d for d in range(len(shape)) if stride[d] == 0 and shape[d] > 1]
    rest = [d for d in range(len(shape)) if d not in shared]
    m = 1
    for d in shared:
        m *= shape[d]
    rest_shape = tuple(shape[d] for d in rest)
    u = s.as_strided(rest_shape, tuple(stride[d] for d in rest), s.storage_offset())  # memory
    p = prod.permute(*shared, *rest).reshape((m,) + rest_shape)  # (m aliases in order, ...)
    w = ember.tensor([alpha * beta ** (m - 1 - r) for r in range(m)], dtype=prod.dtype,
                     device=prod.device).reshape((m,) + (1,) * len(rest))
    total = (p * w).sum(0)
    if p.requires_grad:  # PyTorch's gradient: that of the elementwise beta*s + alpha*p with
        # each aliased element given its memory's whole gradient (not the ordered writes' one)
        naive = p.sum(0) * alpha
        total = naive + (total - naive).detach()
    if beta != 0:  # beta == 0 ignores self's values (nan and inf do not propagate)
        total = total + (u.clone() if u.requires_grad else u) * beta ** m  # (u is rewritten)
    u.copy_(total)
    if u.requires_grad and not s.requires_grad and s._base is not None:
        # s, a sibling view of u's base, takes the base's new history (as_strided of it)
        regen = s._base.as_strided(shape, stride, s.storage_offset())
        s._grad_fn, s._requires_grad = regen._grad_fn, True
    return s


for _name, _fn, _args in (("addmm", _addmm, "mat1, Tensor mat2"), ("addmv", _addmv,
                          "mat, Tensor vec"), ("addbmm", _addbmm, "batch1, Tensor batch2"),
                          ("baddbmm", _baddbmm, "batch1, Tensor batch2"),
                          ("addr", _addr, "vec1, Tensor vec2")):
    defop(f"{_name}_(Tensor(a!) self, Tensor {_args}, *, Scalar beta=1, Scalar alpha=1) -> "
          "Tensor(a!)", function=False,
          decomp=_inplace_add(_fn, {"addmv": _mv, "baddbmm": _bmm}.get(_name)))


# ---- tensordot, kron -----------------------------------------------------------------------------
def _tensordot(a, b, dims_a, dims_b):
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    da = [normalize_dim(d, a.ndim) for d in dims_a]
    db = [normalize_dim(d, b.ndim) for d in dims_b]
    k = 1
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in dim "
                               f"{j}")
        k = k * a.shape[i]
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    sa = [a.shape[i] for i in free_a]
    sb = [b.shape[j] for j in free_b]
    na = 1
    for s in sa:
        na = na * s
    nb = 1
    for s in sb:
        nb = nb * s
    a2 = a.permute(*free_a, *da).reshape((na, k))                   # (free_a, contracted)
    b2 = b.permute(*db, *free_b).reshape((k, nb))                   # (contracted, free_b)
    return matmul(a2, b2).reshape(tuple(sa + sb))


defop("tensordot(Tensor self, Tensor other, int[] dims_self, int[] dims_other) -> Tensor",
      decomp=_tensordot, method=False)


def tensordot(a, b, dims=2, out=None):
    """`ember.tensordot(a, b, dims=2 | ([dims of a], [dims of b]))`: contracts the given dims.

    >>> import ember
    >>> ember.tensordot(ember.ones(2, 3), ember.ones(3, 4), dims=1).shape
    ember.Size([2, 4])
    """
    if hasattr(dims, "tolist"):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    return OPS["tensordot"](a, b, da, db, out=out) if out is not None else OPS["tensordot"](
        a, b, da, db)


FUNCTIONS["tensordot"] = tensordot


def _kron(a, b):
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    # interleave: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...), multiply, merge pairs
    ia = tuple(x for s in sa for x in (s, 1))
    ib = tuple(x for s in sb for x in (1, s))
    return (a.reshape(ia) * b.reshape(ib)).reshape(tuple(p * q for p, q in zip(sa, sb)))


defop("kron(Tensor self, Tensor other) -> Tensor", decomp=_kron)


# ---- cross, trace, cdist -------------------------------------------------------------------------
def _cross_shape(a, b, dim, name="linalg.cross"):
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
    d = normalize_dim(dim, len(shape))
    if a.shape[d - len(shape) + len(a.shape)] != 3 or b.shape[d - len(shape) + len(b.shape)] != 3:
        raise RuntimeError(f"{name}: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d - len(shape) + len(a.shape)]} and "
                           f"{b.shape[d - len(shape) + len(b.shape)]}")
    return shape, d


def _cross_kernel(a, b, dim):
    if len(a.shape) != len(b.shape):
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape, d = _cross_shape(a, b, dim)
    dt = D.promote_types(_dt(a), _dt(b))
    x, y = upcast(np.broadcast_to(a, shape), np.broadcast_to(b, shape))
    return np.cross(x, y, axis=d).astype(dt.np, copy=False)


defop("linalg_cross(Tensor self, Tensor other, *, int dim=-1) -> Tensor", function=False,
      method=False, kernels={"cpu": _cross_kernel},
      meta=lambda a, b, dim: TensorMeta(_cross_shape(a, b, dim)[0],
                                        D.promote_types(a.dtype, b.dtype)),
      vjp=lambda g, out, a, b, dim: (OPS["linalg_cross"](b, g, dim=dim),
                                     OPS["linalg_cross"](g, a, dim=dim)))


def _cross(a, b, dim):
    if dim is None:
        import warnings
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                      "either pass the dim explicitly or simply use torch.linalg.cross.\nThe "
                      "default value of dim will change to agree with that of linalg.cross in a "
                      "future release.", UserWarning, stacklevel=4)
        shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return OPS["linalg_cross"](a, b, dim=dim)


defop("cross(Tensor self, Tensor other, int? dim=None) -> Tensor", decomp=_cross)


def _trace_kernel(x):
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    dt = _dt(x)
    if dt.is_floating_point or dt.is_complex:
        return np.asarray(np.trace(upcast(x)[0])).astype(x.dtype)
    return np.asarray(np.trace(x, dtype=np.int64))


def _trace_meta(x):
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return TensorMeta((), x.dtype if x.dtype.is_floating_point or x.dtype.is_complex
                      else D.int64)


def _eye_like(x, n, m):
    import ember
    return ember.eye(n, m, dtype=x.dtype, device=x.device)


defop("trace(Tensor self) -> Tensor", kernels={"cpu": _trace_kernel}, meta=_trace_meta,
      vjp=lambda g, out, x: (g * _eye_like(g, x.shape[0], x.shape[1]),))


def _cdist_check(x1, x2, p):
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    dt = _dt(x1)
    if not dt.is_floating_point:
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {torch_name(dt)}")
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    return tuple(batch) + (x1.shape[-2], x2.shape[-2])


def _cdist_kernel(x1, x2, p, compute_mode):
    shape = _cdist_check(x1, x2, p)
    a, b = upcast(x1, x2)
    r, c = a.shape[-2], b.shape[-2]
    use_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (r > 25 or c > 25)))
    if use_mm:  # PyTorch's default for big inputs: |a|^2 + |b|^2 - 2 a.b through BLAS
        d2 = ((a * a).sum(-1)[..., :, None] + (b * b).sum(-1)[..., None, :]
              - 2 * np.matmul(a, np.swapaxes(b, -1, -2)))
        out = np.sqrt(np.maximum(d2, 0))
    else:
        diff = np.abs(a[..., :, None, :] - b[..., None, :, :])        # (..., r, c, m)
        if p == 0:
            out = (diff != 0).sum(-1).astype(a.dtype)
        elif p == np.inf:
            out = diff.max(-1, initial=0)
        elif p == 1:
            out = diff.sum(-1)
        elif p == 2:
            out = np.sqrt((diff * diff).sum(-1))
        else:
            out = (diff ** p).sum(-1) ** (1.0 / p)
    return np.broadcast_to(out, shape).astype(x1.dtype)


def _cdist_vjp(g, out, x1, x2, p, compute_mode):
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)                          # (..., r, c, m)
    d = out.unsqueeze(-1)                                               # (..., r, c, 1)
    gd = g.unsqueeze(-1)
    if p == 0:
        w = diff * 0
    elif p == 1:
        w = gd * diff.sign()
    elif p == float("inf"):
        w = gd * diff.sign() * (diff.abs() == d)
    else:
        import ember
        safe = ember.where(d == 0, 1.0, d)
        w = gd * diff.sign() * diff.abs().pow(p - 1) / safe.pow(p - 1)
        w = ember.where(d == 0, 0.0, w)
    return w.sum(-2), -w.sum(-3)


defop("cdist(Tensor x1, Tensor x2, float p=2., int? compute_mode=None) -> Tensor", method=False,
      kernels={"cpu": _cdist_kernel}, vjp=_cdist_vjp,
      meta=lambda x1, x2, p, cm: TensorMeta(_cdist_check(x1, x2, p), x1.dtype))


# ---- matrix_power, multi_dot, chain_matmul -------------------------------------------------------
def square_check(name, a, arg="A"):
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: {arg} must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _matrix_power(a, n):
    square_check("linalg.matrix_power", a)
    if n == 0:
        import ember
        eye = ember.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return keep_graph(eye, a)
    if n < 0:
        a, n = OPS["linalg_inv"](a), -n
    result, base = None, a
    while n:  # binary exponentiation: log2(n) matmuls
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result if result is not a else a.clone()


defop("linalg_matrix_power(Tensor self, int n) -> Tensor", function=False, method=False,
      decomp=_matrix_power)
defop("matrix_power(Tensor self, int n) -> Tensor", decomp=_matrix_power)


def _multi_dot(tensors):
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = tensors[0], tensors[-1]
    for i, t in enumerate(tensors):
        want = 2 if 0 < i < n - 1 else None
        if (want and t.ndim != 2) or t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D" if want
                               else f"multi_dot(): the {'first' if i == 0 else 'last'} tensor "
                               f"must be 1D or 2D but got {t.ndim}D")
    mats = [first.unsqueeze(0) if first.ndim == 1 else first] + list(tensors[1:-1]) + [
        last.unsqueeze(1) if last.ndim == 1 else last]
    for i in range(n - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(tensors[i].shape)} and {list(tensors[i + 1].shape)} "
                               f"cannot be multiplied")
    out = _chain(mats, _chain_order([m.shape[0] for m in mats] + [mats[-1].shape[1]]), 0, n - 1)
    if first.ndim == 1 and last.ndim == 1:
        return out.reshape(())
    if first.ndim == 1:
        return out.reshape((out.shape[1],))
    if last.ndim == 1:
        return out.reshape((out.shape[0],))
    return out


def _chain_order(p):
    """The classic matrix-chain DP: split[i][j] = best k for multiplying mats i..j."""
    n = len(p) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(mats, split, i, j):
    if i == j:
        return mats[i]
    k = split[i][j]
    return matmul(_chain(mats, split, i, k), _chain(mats, split, k + 1, j))


defop("linalg_multi_dot(Tensor[] tensors) -> Tensor", function=False, method=False,
      decomp=_multi_dot)
defop("chain_matmul(Tensor[] matrices) -> Tensor", method=False,
      decomp=lambda ms: ms[0].clone() if len(ms) == 1 else _multi_dot(ms))


def chain_matmul(*matrices, out=None):
    """`ember.chain_matmul(a, b, c)`: the product of matrices (deprecated in PyTorch for
    `ember.linalg.multi_dot`)."""
    return OPS["chain_matmul"](list(matrices), out=out)


FUNCTIONS["chain_matmul"] = chain_matmul
defop("linalg_vecdot(Tensor x, Tensor y, *, int dim=-1) -> Tensor", function=False,
      method=False, decomp=lambda x, y, dim: (_conj(x) * y).sum(dim), supports="fc")

# einsum (parsing and its vjp) and the factorizations have their own files
from . import einsum as _einsum  # noqa: E402,F401
from . import linalg_factor as _factor  # noqa: E402,F401
