"""Reductions and scans: sum/mean/prod, max/min and friends, var/std, norm, logsumexp,
cumulative ops, all/any. Softmax lives in softmax.py; sorting, order statistics and counting in
sorting.py.

CPU kernels are numpy over the reduced axes; float16/bfloat16 accumulate in float32 and return
the input dtype, as PyTorch's CPU kernels do. vjps are written in ember ops.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, _return_type, torch_name
from .._size import normalize_dim
from . import _cpu_strided
from ._registry import OPS, bind_overloads, complex_vjp, defop
from .creation import to_dtype

__all__ = ["reduce_dims", "reduced_shape", "unreduce", "scatter_dim", "select_vjp", "edtype",
           "opmath_np", "check_nonempty", "even_vjp"]

_LOWP = (D.float16, D.bfloat16)


# ---- helpers shared with sorting.py --------------------------------------------------------------
def reduce_dims(dim, ndim: int) -> tuple:
    """A dim argument (None, int, list; None or [] = all) -> sorted tuple of dims in range."""
    if dim is None:
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return tuple(range(ndim))
    out = []
    for d in dims:
        d = normalize_dim(d, ndim)
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out)) if ndim else ()


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def unreduce(g, shape, dims, keepdim: bool):
    """A reduced gradient back to the input's shape (unsqueeze the reduced dims, expand)."""
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return g.expand(tuple(shape))


def scatter_dim(g, idx, dim: int, n: int):
    """grad_in[.., j, ..] = sum_i g[.., i, ..] where idx[.., i, ..] == j, along dim (size n)."""
    shape = tuple(n if i == dim else s for i, s in enumerate(g.shape))
    return g.new_zeros(shape).scatter_add(dim, idx, g)


def select_vjp(gv, idx, x, dim: int, keepdim: bool):
    """The grad of a (values, indices) reduction along dim: values' grad sent to the indices."""
    if x.ndim == 0:
        return gv
    d = normalize_dim(dim, x.ndim)
    if not keepdim:
        gv, idx = gv.unsqueeze(d), idx.unsqueeze(d)
    return scatter_dim(gv, idx, d, x.shape[d])


def edtype(a: np.ndarray):
    return D.from_numpy_dtype(a.dtype)


def opmath_np(a: np.ndarray) -> np.ndarray:
    """float16/bfloat16 arrays computed in float32 (PyTorch CPU's accumulate type)."""
    if a.dtype in (np.float16, D.bfloat16.np):
        return a.astype(np.float32)
    return a


def check_nonempty(op, x, dims, full):
    if full and math.prod(x.shape) == 0:
        raise (RuntimeError if op in ("max", "min") else IndexError)(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0."
            + (" Specify the reduction dim with the 'dim' argument." if op in ("max", "min")
               else ""))
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _count(shape, dims):
    n = 1
    for d in dims:
        n = n * shape[d]
    return n


# ---- sum / mean / prod ---------------------------------------------------------------------------
def _sum_dtype(xd, dtype):
    if dtype is not None:
        return to_dtype(dtype)
    return D.int64 if xd._cat < 2 else xd


def _sumlike(npfn):
    def kernel(x, dim, keepdim, dtype):
        od = _sum_dtype(edtype(x), dtype)
        dims = reduce_dims(dim, x.ndim)
        if (npfn is np.sum and not keepdim and x.dtype == od.np and dims and dims[-1] < x.ndim - 1
                and dims == tuple(range(len(dims)))):  # leading dims (bias gradients): threads
            r = _cpu_strided.sum_leading(x, len(dims))
            if r is not None:
                return r
        a = opmath_np(x.astype(od.np, copy=False))
        return np.asarray(npfn(a, axis=dims, keepdims=keepdim)).astype(od.np)
    return kernel


def _sum_meta(x, dim, keepdim, dtype):
    return TensorMeta(reduced_shape(x.shape, reduce_dims(dim, x.ndim), keepdim),
                      _sum_dtype(x.dtype, dtype))


def _sum_vjp(g, out, x, dim, keepdim, dtype):
    return (unreduce(g, x.shape, reduce_dims(dim, x.ndim), keepdim),)


defop("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor", kernels={"cpu": _sumlike(np.sum)}, meta=_sum_meta, vjp=_sum_vjp,
      tags={"reduction"})


def _nansum_vjp(g, out, x, dim, keepdim, dtype):
    import ember
    return (ember.where(x != x, 0, unreduce(g, x.shape, reduce_dims(dim, x.ndim), keepdim)),)


defop("nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor", kernels={"cpu": _sumlike(np.nansum)}, meta=_sum_meta, vjp=_nansum_vjp,
      tags={"reduction"})


def _mean_dtype(op, xd, dtype):
    if dtype is not None:
        return to_dtype(dtype)
    if xd._cat < 2:
        if op == "nanmean":
            raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                               f"dtype but got {torch_name(xd)}")
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {torch_name(xd)}")
    return xd


def _mean_kernel(x, dim, keepdim, dtype):
    od = _mean_dtype("mean", edtype(x), dtype)
    dims = reduce_dims(dim, x.ndim)
    a = opmath_np(x.astype(od.np, copy=False))
    with np.errstate(all="ignore"):
        r = np.sum(a, axis=dims, keepdims=keepdim) / _count(x.shape, dims)
    return np.asarray(r).astype(od.np)


def _mean_meta(x, dim, keepdim, dtype):
    return TensorMeta(reduced_shape(x.shape, reduce_dims(dim, x.ndim), keepdim),
                      _mean_dtype("mean", x.dtype, dtype))


def _mean_vjp(g, out, x, dim, keepdim, dtype):
    dims = reduce_dims(dim, x.ndim)
    return (unreduce(g / _count(x.shape, dims), x.shape, dims, keepdim),)


defop("mean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor", kernels={"cpu": _mean_kernel}, meta=_mean_meta, vjp=_mean_vjp,
      tags={"reduction"})


def _nanmean(x, dim, keepdim, dtype):
    _mean_dtype("nanmean", x.dtype, dtype)
    return x.nansum(dim, keepdim, dtype=dtype) / (x == x).sum(dim, keepdim)


defop("nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor", decomp=_nanmean, tags={"reduction"})


def _prod_dims(dim, ndim):
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod() received an invalid combination of arguments - got "
                        f"({type(dim).__name__}), but expected one of: (int dim, bool keepdim)")
    return reduce_dims(dim, ndim)


def _prod_kernel(x, dim, keepdim, dtype):
    od = _sum_dtype(edtype(x), dtype)
    a = opmath_np(x.astype(od.np, copy=False))
    return np.asarray(np.prod(a, axis=_prod_dims(dim, x.ndim), keepdims=keepdim)).astype(od.np)


def _prod_vjp(g, out, x, dim, keepdim, dtype):
    # d prod / d x_i = prod of the others: out / x_i without zeros; with one zero only that
    # position gets the product of the rest; with two or more every grad is zero
    import ember
    dims = _prod_dims(dim, x.ndim)
    gk = unreduce(g, x.shape, dims, keepdim)
    zero = x == 0
    nz = unreduce(zero.sum(dim, True) if dims else zero.long(), x.shape, dims, True)
    xs = ember.where(zero, 1, x)
    rest = unreduce(xs.prod(dim, True) if dims else xs, x.shape, dims, True)
    return (gk * ember.where(zero, ember.where(nz == 1, rest, 0),
                             ember.where(nz == 0, rest / xs, 0)),)


defop("prod(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      kernels={"cpu": _prod_kernel}, vjp=_prod_vjp, tags={"reduction"},
      meta=lambda x, dim, keepdim, dtype: TensorMeta(
          reduced_shape(x.shape, _prod_dims(dim, x.ndim), keepdim), _sum_dtype(x.dtype, dtype)))


# ---- max / min / amax / amin / argmax / argmin / aminmax -----------------------------------------
def even_vjp(g, out, x):
    """Full max/min/median: the grad split evenly among the elements equal to the result."""
    import ember
    mask = ember.where(out != out, x != x, x == out)
    return (ember.where(mask, g / mask.sum(), 0),)


def _extreme(name, npfn, npargfn):
    def full(x):
        check_nonempty(name, x, (), True)
        return np.asarray(npfn(opmath_np(x))).astype(x.dtype)

    def by_dim(x, dim, keepdim):
        d = normalize_dim(dim, x.ndim)
        check_nonempty(name, x, (d,) if x.ndim else (), False)
        a = opmath_np(x) if x.ndim else opmath_np(x).reshape(1)
        idx = npargfn(a, axis=d)     # first occurrence; NaN counts as the extreme
        vals = np.take_along_axis(a, np.expand_dims(idx, d), d)
        if not keepdim or x.ndim == 0:
            vals = vals.squeeze(d)
            idx = idx if x.ndim else idx.reshape(())
        elif keepdim:
            idx = np.expand_dims(idx, d)
        return vals.astype(x.dtype), idx.astype(np.int64)

    def dim_meta(x, dim, keepdim):
        d = (normalize_dim(dim, x.ndim),) if x.ndim else ()
        check_nonempty(name, x, d, False)
        shape = reduced_shape(x.shape, d, keepdim)
        return TensorMeta(shape, x.dtype), TensorMeta(shape, D.int64)

    def dim_vjp(g, out, x, dim, keepdim):
        return (select_vjp(g[0], out[1], x, dim, keepdim),)

    defop(f"{name}(Tensor self) -> Tensor", function=False, method=False,
          kernels={"cpu": full}, vjp=even_vjp, tags={"reduction"},
          meta=lambda x: (check_nonempty(name, x, (), True), TensorMeta((), x.dtype))[1])
    defop(f"{name}.dim(Tensor self, int dim, bool keepdim=False) -> "
          "(Tensor values, Tensor indices)", function=False, method=False,
          kernels={"cpu": by_dim}, meta=dim_meta, vjp=dim_vjp, differentiable=("self",),
          tags={"reduction"})

    def pick(*args, **kwargs):
        # max(x) | max(x, dim, keepdim) | max(x, other): the second argument decides
        second = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim"))
        if second is None:
            return name
        if hasattr(second, "shape"):
            return "maximum" if name == "max" else "minimum"
        return f"{name}.dim"
    bind_overloads(name, pick)


_extreme("max", np.max, np.argmax)
_extreme("min", np.min, np.argmin)


def _amax(name, npfn):
    def kernel(x, dim, keepdim):
        dims = reduce_dims(dim, x.ndim)
        check_nonempty(name, x, dims, False)
        return np.asarray(npfn(opmath_np(x), axis=dims, keepdims=keepdim)).astype(x.dtype)

    def vjp(g, out, x, dim, keepdim):
        # PyTorch's amax backward: the grad split evenly among the ties of each slice
        import ember
        dims = reduce_dims(dim, x.ndim)
        mask = x == unreduce(out, x.shape, dims, keepdim)
        count = unreduce(mask.sum(dims, True), x.shape, dims, True)
        return (ember.where(mask, unreduce(g, x.shape, dims, keepdim) / count, 0),)

    defop(f"{name}(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
          kernels={"cpu": kernel}, vjp=vjp, tags={"reduction"},
          meta=lambda x, dim, keepdim: TensorMeta(
              reduced_shape(x.shape, reduce_dims(dim, x.ndim), keepdim), x.dtype))


_amax("amax", np.max)
_amax("amin", np.min)


def _argext(name, npfn):
    def kernel(x, dim, keepdim):
        if x.dtype == np.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        a = opmath_np(x)
        if dim is None:
            check_nonempty(name, x, (), True)
            r = np.asarray(npfn(a.reshape(-1)))
            return r.reshape((1,) * x.ndim if keepdim else ()).astype(np.int64)
        d = normalize_dim(dim, x.ndim)
        if x.ndim == 0:
            return np.zeros((), np.int64)
        check_nonempty(name, x, (d,), False)
        r = npfn(a, axis=d)
        return (np.expand_dims(r, d) if keepdim else r).astype(np.int64)

    def meta(x, dim, keepdim):
        if dim is None:
            return TensorMeta((1,) * x.ndim if keepdim else (), D.int64)
        d = (normalize_dim(dim, x.ndim),) if x.ndim else ()
        return TensorMeta(reduced_shape(x.shape, d, keepdim), D.int64)
    defop(f"{name}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
          kernels={"cpu": kernel}, meta=meta, differentiable=(), tags={"reduction"})


_argext("argmax", np.argmax)
_argext("argmin", np.argmin)


def _aminmax(x, dim, keepdim):
    dims = () if dim is None else dim          # amax's () = every dim
    lo, hi = x.amin(dims, keepdim), x.amax(dims, keepdim)
    return _return_type(_AMINMAX)(lo, hi)


_AMINMAX = defop("aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> "
                 "(Tensor min, Tensor max)", decomp=_aminmax, tags={"reduction"})


# ---- var / std -----------------------------------------------------------------------------------
def _var_args(x, dim, unbiased, correction):
    if isinstance(dim, bool):           # legacy x.var(False): the bool is `unbiased`
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return reduce_dims(dim, x.ndim), correction


def _var_check(xd):
    if xd._cat < 2:
        raise RuntimeError("std and var only support floating point and complex dtypes")


def _var_np(x, dim, unbiased, keepdim, correction):
    """The variance in the accumulate dtype (float32 for float16/bfloat16), two-pass."""
    _var_check(edtype(x))
    dims, c = _var_args(x, dim, unbiased, correction)
    a = opmath_np(x)
    n = _count(x.shape, dims)
    if n - c <= 0:
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=5)
    with np.errstate(all="ignore"):
        dev = a - np.mean(a, axis=dims, keepdims=True) if n else a
        return np.sum(np.abs(dev) ** 2 if a.dtype.kind == "c" else dev * dev, axis=dims,
                      keepdims=keepdim) / max(n - c, 0)


def _var_kernel(x, *args):
    return np.asarray(_var_np(x, *args)).astype(edtype(x).to_real().np)


def _std_kernel(x, *args):
    return np.asarray(np.sqrt(_var_np(x, *args))).astype(edtype(x).to_real().np)


def _var_meta(x, dim, unbiased, keepdim, correction):
    _var_check(x.dtype)
    dims, _ = _var_args(x, dim, unbiased, correction)
    return TensorMeta(reduced_shape(x.shape, dims, keepdim), x.dtype.to_real())


@complex_vjp
def _var_vjp(g, out, x, dim, unbiased, keepdim, correction):
    dims, c = _var_args(x, dim, unbiased, correction)
    n = _count(x.shape, dims)
    mean = x.mean(dims, True) if dims else x
    return (unreduce(g, x.shape, dims, keepdim) * (x - mean) * (2.0 / (n - c)),)


_VAR_SIG = ("(Tensor self, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, "
            "Scalar? correction=None)")
defop("var" + _VAR_SIG + " -> Tensor", kernels={"cpu": _var_kernel}, meta=_var_meta,
      vjp=_var_vjp, tags={"reduction"})

@complex_vjp
def _std_vjp(g, out, x, *args):
    # through var, with the grad of sqrt at 0 taken as 0 (PyTorch's std_backward)
    import ember
    return _var_vjp(ember.where(out == 0, 0, g / (2 * out)), None, x, *args)


defop("std" + _VAR_SIG + " -> Tensor", kernels={"cpu": _std_kernel}, meta=_var_meta,
      vjp=_std_vjp, tags={"reduction"})
defop("var_mean" + _VAR_SIG + " -> (Tensor, Tensor)", method=False, tags={"reduction"},
      decomp=lambda x, *a: (OPS["var"](x, *a), _mean_of(x, *a)))
defop("std_mean" + _VAR_SIG + " -> (Tensor, Tensor)", method=False, tags={"reduction"},
      decomp=lambda x, *a: (OPS["std"](x, *a), _mean_of(x, *a)))


def _mean_of(x, dim, unbiased, keepdim, correction):
    dims, _ = _var_args(x, dim, unbiased, correction)
    return x.mean(dims, keepdim)


# ---- norm / logsumexp ----------------------------------------------------------------------------
def _norm_p(p):
    if p is None or p == "fro":
        return 2.0
    if isinstance(p, str):
        raise NotImplementedError(f"norm(): p='{p}' is a matrix norm: use "
                                  f"ember.linalg.matrix_norm(x, '{p}')")
    return float(p)


def _norm_dtype(xd, dtype):
    d = to_dtype(dtype) if dtype is not None else xd
    if d._cat < 2:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {torch_name(d)}")
    return d.to_real()


def _check_inf_empty(shape, p, dim):
    """max/min have no identity: PyTorch's errors for an (-)inf norm over an empty dim."""
    name = "inf" if p > 0 else "-inf"
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        if math.prod(shape) == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on an empty "
                               "tensor because the operation does not have an identity")
        return
    for d in ([dim] if isinstance(dim, int) else dim):
        if shape[d % len(shape)] == 0:  # (PyTorch's message has no space after the dim)
            raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on the "
                               f"dimension {d}because this dimension is empty and the "
                               "operation does not have an identity")


def _norm_kernel(x, p, dim, keepdim, dtype):
    od = _norm_dtype(edtype(x), dtype)
    p, dims = _norm_p(p), reduce_dims(dim, x.ndim)
    a = np.abs(opmath_np(x.astype(to_dtype(dtype).np, copy=False) if dtype else x))
    kw = {"axis": dims, "keepdims": keepdim}
    if p == math.inf or p == -math.inf:
        _check_inf_empty(x.shape, p, dim)
        r = np.max(a, **kw) if p > 0 else np.min(a, **kw)
    elif p == 0:
        r = np.sum(a != 0, **kw).astype(a.dtype)
    elif p == 1:
        r = np.sum(a, **kw)
    elif p == 2:
        r = np.sqrt(np.sum(a * a, **kw))
    else:
        with np.errstate(all="ignore"):
            r = np.sum(a ** p, **kw) ** (1.0 / p)
    return np.asarray(r).astype(od.np)


@complex_vjp
def _norm_vjp(g, out, x, p, dim, keepdim, dtype):
    # PyTorch's norm_backward, case by case in p
    import ember
    p, dims = _norm_p(p), reduce_dims(dim, x.ndim)
    gk = unreduce(g, x.shape, dims, keepdim)
    nk = unreduce(out, x.shape, dims, keepdim)
    if p == 0:
        return (x * 0,)
    if p == 1:
        return (x.sgn() * gk,)
    if p == 2:
        return (ember.where(nk == 0, 0, x * (gk / nk)),)
    if math.isinf(p):
        mask = x.abs() == nk
        count = unreduce(mask.sum(dims, True), x.shape, dims, True)
        return (ember.where(mask, x.sgn() * gk / count, 0),)
    scaled = x.sgn() * x.abs().pow(p - 1)
    if p < 1:
        scaled = ember.where(x == 0, 0, scaled)
    return (ember.where(nk == 0, 0, scaled * gk / nk.pow(p - 1)),)


def _norm_meta(x, p, dim, keepdim, dtype):
    dims = reduce_dims(dim, x.ndim)
    if _norm_p(p) in (math.inf, -math.inf):
        _check_inf_empty(x.shape, _norm_p(p), dim)
    return TensorMeta(reduced_shape(x.shape, dims, keepdim), _norm_dtype(x.dtype, dtype))


defop("norm(Tensor self, Scalar? p='fro', int[1]? dim=None, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor", kernels={"cpu": _norm_kernel}, vjp=_norm_vjp,
      tags={"reduction"}, meta=_norm_meta)
defop("dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", tags={"reduction"},
      decomp=lambda x, y, p: (x - y).norm(p))


def _float_dtype(xd):
    return D.get_default_dtype() if xd._cat < 2 else xd


def _logsumexp_kernel(x, dim, keepdim):
    od = _float_dtype(edtype(x))
    a = opmath_np(x.astype(od.np, copy=False))
    dims = reduce_dims(dim, x.ndim)
    with np.errstate(all="ignore"):
        m = np.max(a, axis=dims, keepdims=True) if a.size else np.zeros(
            reduced_shape(a.shape, dims, True), a.dtype)
        m = np.where(np.isinf(m), 0, m)      # all -inf (or +inf) slices: shift by 0
        r = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    return (r if keepdim else np.squeeze(r, dims)).astype(od.np)


defop("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor",
      kernels={"cpu": _logsumexp_kernel}, tags={"reduction"},
      meta=lambda x, dim, keepdim: TensorMeta(
          reduced_shape(x.shape, reduce_dims(dim, x.ndim), keepdim), _float_dtype(x.dtype)),
      vjp=lambda g, out, x, dim, keepdim: (
          unreduce(g, x.shape, reduce_dims(dim, x.ndim), keepdim)
          * (x - unreduce(out, x.shape, reduce_dims(dim, x.ndim), keepdim)).exp(),))


# ---- all / any / count_nonzero -------------------------------------------------------------------
def _bool_reduce(npfn):
    def kernel(x, dim, keepdim):
        r = np.asarray(npfn(x, axis=reduce_dims(dim, x.ndim), keepdims=keepdim))
        return r.astype(np.uint8 if x.dtype == np.uint8 else np.bool_)
    return kernel


for _name, _fn in (("all", np.all), ("any", np.any)):
    defop(f"{_name}(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor",
          kernels={"cpu": _bool_reduce(_fn)}, differentiable=(), tags={"reduction"},
          meta=lambda x, dim, keepdim: TensorMeta(
              reduced_shape(x.shape, reduce_dims(dim, x.ndim), keepdim),
              D.uint8 if x.dtype is D.uint8 else D.bool))

defop("count_nonzero(Tensor self, int[1]? dim=None) -> Tensor", differentiable=(),
      tags={"reduction"},
      kernels={"cpu": lambda x, dim: np.asarray(
          np.count_nonzero(x, axis=reduce_dims(dim, x.ndim))).astype(np.int64)},
      meta=lambda x, dim: TensorMeta(reduced_shape(x.shape, reduce_dims(dim, x.ndim), False),
                                     D.int64))


# ---- scans: cumsum / cumprod / cummax / cummin / logcumsumexp ------------------------------------
def _scan_axis(x, dim):
    d = normalize_dim(dim, x.ndim)
    return d if x.ndim else None


def _revcumsum(g, dim):
    """sum over k >= i of g[k] along dim (the adjoint of cumsum)."""
    return g.sum(dim, True) - g.cumsum(dim) + g if g.ndim else g


def _cum_kernel(npfn):
    def kernel(x, dim, dtype):
        od = _sum_dtype(edtype(x), dtype)
        a = opmath_np(x.astype(od.np, copy=False))
        d = _scan_axis(x, dim)
        return (a.copy() if d is None else npfn(a, axis=d)).astype(od.np)
    return kernel


def _cum_meta(x, dim, dtype):
    _scan_axis(x, dim)
    return TensorMeta(x.shape, _sum_dtype(x.dtype, dtype))


def _cumprod_vjp(g, out, x, dim, dtype):
    # without zeros: revcumsum(g * out) / x. Along each slice, positions before the first zero
    # keep that formula, the first zero gets revcumsum(g * cumprod(x with that zero set to 1)),
    # positions after it get nothing.
    import ember
    if x.ndim == 0:
        return (g,)
    zero = x == 0
    nzeros = zero.cumsum(dim)
    before, first = nzeros == 0, ember.where(zero, nzeros == 1, False)
    a = _revcumsum(g * out, dim) / ember.where(zero, 1, x)
    b = _revcumsum(g * ember.where(first, 1, x).cumprod(dim), dim)
    return (ember.where(before, a, ember.where(first, b, 0)),)


defop("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
      kernels={"cpu": _cum_kernel(np.cumsum)}, meta=_cum_meta,
      vjp=lambda g, out, x, dim, dtype: (_revcumsum(g, dim),))
defop("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
      kernels={"cpu": _cum_kernel(np.cumprod)}, meta=_cum_meta, vjp=_cumprod_vjp)


def _cumext(name, better):
    def kernel(x, dim):
        d = _scan_axis(x, dim)
        if d is None:
            return x.copy(), np.zeros((), np.int64)
        a = np.moveaxis(opmath_np(x), d, -1)
        vals, idx = np.empty_like(a), np.empty(a.shape, np.int64)
        nan = np.isnan if a.dtype.kind in "fc" else (lambda v: np.zeros(v.shape, bool))
        best, bi = (a[..., 0], np.zeros(a.shape[:-1], np.int64)) if a.shape[-1] else (None, None)
        for i in range(a.shape[-1]):
            # PyTorch's rule: NaN always takes over; ties move the index to the latest one
            cur = a[..., i]
            take = nan(cur) | (~nan(best) & better(cur, best))
            best, bi = np.where(take, cur, best), np.where(take, i, bi)
            vals[..., i], idx[..., i] = best, bi
        return np.moveaxis(vals, -1, d).astype(x.dtype), np.moveaxis(idx, -1, d)

    def meta(x, dim):
        _scan_axis(x, dim)
        return TensorMeta(x.shape, x.dtype), TensorMeta(x.shape, D.int64)

    def vjp(g, out, x, dim):
        if x.ndim == 0:
            return (g[0],)
        d = normalize_dim(dim, x.ndim)
        return (scatter_dim(g[0], out[1], d, x.shape[d]),)
    defop(f"{name}(Tensor self, int dim) -> (Tensor values, Tensor indices)",
          kernels={"cpu": kernel}, meta=meta, vjp=vjp, differentiable=("self",))


_cumext("cummax", np.greater_equal)
_cumext("cummin", np.less_equal)


def _logcumsumexp_dtype(xd):
    if xd._cat < 2:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for "
                                  f"'{torch_name(xd)}'")
    return xd


def _logcumsumexp_kernel(x, dim):
    od = _logcumsumexp_dtype(edtype(x))
    a = opmath_np(x.astype(od.np, copy=False))
    d = _scan_axis(x, dim)
    with np.errstate(invalid="ignore"):
        return (a.copy() if d is None else np.logaddexp.accumulate(a, axis=d)).astype(od.np)


defop("logcumsumexp(Tensor self, int dim) -> Tensor", kernels={"cpu": _logcumsumexp_kernel},
      meta=lambda x, dim: (_scan_axis(x, dim), TensorMeta(x.shape, _logcumsumexp_dtype(
          x.dtype)))[1],
      vjp=lambda g, out, x, dim: (_revcumsum(g * (-out).exp(), dim) * x.exp(),))


# ---- diff ----------------------------------------------------------------------------------------
def _diff(x, n, dim, prepend, append):
    import ember
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = normalize_dim(dim, x.ndim)
    if prepend is not None or append is not None:
        x = ember.cat([t for t in (prepend, x, append) if t is not None], d)
    sl = OPS["slice.Tensor"]
    for _ in range(n):
        size = x.shape[d]
        hi, lo = sl(x, d, 1, None, 1), sl(x, d, 0, size - 1 if size else 0, 1)
        x = hi != lo if x.dtype is D.bool else hi - lo
    return x


defop("diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> "
      "Tensor", decomp=_diff)


# ---- trapezoid / cov / corrcoef (composites) -----------------------------------------------------
def _trapezoid_terms(y, x, dx, dim):
    """(spacing, y[i] + y[i+1]) along dim: the two factors of each trapezoid's doubled area."""
    d = normalize_dim(dim, y.ndim)
    n = y.shape[d]
    pairs = y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1) if n else y
    if x is None:
        return (1 if dx is None else dx), pairs, d
    step = x.diff(dim=-1 if x.ndim == 1 else d)
    if x.ndim == 1:
        step = step.reshape((step.shape[0],) + (1,) * (y.ndim - d - 1))
    return step, pairs, d


def _trapezoid(y, x, dx, dim):
    step, pairs, d = _trapezoid_terms(y, x, dx, dim)
    return (step * pairs).sum(d) / 2


def _cumulative_trapezoid(y, x, dx, dim):
    step, pairs, d = _trapezoid_terms(y, x, dx, dim)
    return (step * pairs).cumsum(d) / 2


defop("trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1) -> Tensor",
      method=False, decomp=_trapezoid, aliases=("trapz",))
defop("cumulative_trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1) -> "
      "Tensor", method=False, decomp=_cumulative_trapezoid)


def _cov_weights(w, kind, n):
    if w is None:
        return None
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {kind} to have one or fewer dimensions but got "
                           f"{kind} with {w.ndim} dimensions")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {kind} to have the same numel as there are "
                           f"observations in the input but got {w.numel()} != {n}")
    want_int = kind == "fweights"
    if (w.dtype._cat == 1) != want_int:
        raise RuntimeError(f"cov(): expected {kind} to have "
                           f"{'integral' if want_int else 'floating point'} dtype but got "
                           f"{kind} with {torch_name(w.dtype)} dtype")
    return w


def _cov(x, correction, fweights, aweights):
    if x.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {x.ndim} dimensions")
    obs = x if x.ndim == 2 else x.reshape(1, -1)
    if obs.dtype._cat < 2:
        obs = obs.to(D.get_default_dtype())
    n = obs.shape[1]
    fw, aw = _cov_weights(fweights, "fweights", n), _cov_weights(aweights, "aweights", n)
    w = fw if aw is None else (aw if fw is None else fw * aw)
    if w is None:
        wsum, avg = n, obs.mean(1)
        norm = wsum - correction
    else:
        wsum = w.sum()
        avg = (obs * w).sum(1) / wsum
        norm = wsum if correction == 0 else (
            wsum - correction if aw is None else wsum - correction * (w * aw).sum() / wsum)
    if isinstance(norm, (int, float)) and norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=3)
        norm = 0
    xm = obs - avg.unsqueeze(1)                                      # (vars, obs)
    xw = xm if w is None else xm * w
    xc = xm.conj() if xm.dtype.is_complex else xm                   # PyTorch: xw @ xm^H
    return ((xw.unsqueeze(1) * xc.unsqueeze(0)).sum(-1) / norm).squeeze()


def _corrcoef(x):
    import ember
    c = OPS["cov"](x)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    if c.dtype.is_complex:  # PyTorch clips the real and imaginary parts separately
        return c.real.clamp(-1, 1) + c.imag.clamp(-1, 1) * 1j
    return ember.where(c > 1, 1, ember.where(c < -1, -1, c))     # rounding may step past +-1


defop("cov(Tensor self, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None) -> "
      "Tensor", decomp=_cov)
defop("corrcoef(Tensor self) -> Tensor", decomp=_corrcoef)
