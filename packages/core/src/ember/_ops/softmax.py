"""softmax / log_softmax over one dim and their backward ops (PyTorch's _softmax_backward_data /
_log_softmax_backward_data). Rows over the last dim run in C++ (_cpu_norm), others in numpy.
"""
from __future__ import annotations

import numpy as np

from .._dispatch import TensorMeta, torch_name
from .._size import normalize_dim
from . import _cpu_norm
from ._registry import OPS, defop
from .creation import to_dtype
from .reduction import edtype, opmath_np


# ---- softmax / log_softmax -----------------------------------------------------------------------
def _softmax_dtype(name, xd, dtype):
    d = to_dtype(dtype) if dtype is not None else xd
    if d._cat < 2:
        raise NotImplementedError(f"\"{name}_kernel_impl\" not implemented for '{torch_name(d)}'")
    return d


def _softmax(name):
    def kernel(x, dim, dtype):
        od = _softmax_dtype(name, edtype(x), dtype)
        a = opmath_np(x.astype(od.np, copy=False))
        d = normalize_dim(dim, x.ndim) if x.ndim else None
        if d == x.ndim - 1 and a.dtype == od.np:   # rows in one C++ pass (float32/64)
            r = _cpu_norm.softmax(a, name == "log_softmax")
            if r is not None:
                return r
        with np.errstate(all="ignore"):
            if not a.size:
                return a.astype(od.np)
            # one fresh buffer updated in place (the same operations as the textbook formula)
            r = np.subtract(a, np.max(a, axis=d, keepdims=True), out=np.empty(a.shape, a.dtype))
            if name == "softmax":
                np.exp(r, out=r)
                r /= np.sum(r, axis=d, keepdims=True)
            else:
                r -= np.log(np.sum(np.exp(r), axis=d, keepdims=True))
        return r.astype(od.np, copy=False)

    def vjp(g, out, x, dim, dtype):
        return (OPS[f"_{name}_backward_data"](g, out, dim, x.dtype),)

    def meta(x, dim, dtype):
        if x.ndim:
            normalize_dim(dim, x.ndim)
        return TensorMeta(x.shape, _softmax_dtype(name, x.dtype, dtype))
    defop(f"{name}(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", functional=name,
          kernels={"cpu": kernel}, meta=meta, vjp=vjp)


_softmax("softmax")
_softmax("log_softmax")


# ---- their backward ops (PyTorch's _softmax_backward_data / _log_softmax_backward_data) ----------
# The CPU kernel is one C++ pass per row over the last dim (the formula as ops was four
# full-size passes); the decomposition is what the compiler traces and create_graph=True
# differentiates. The result has grad_output's dtype (the engine casts it to the input's).
def _softmax_bwd(name):
    log = name == "log_softmax"

    def formula(g, out, dim):
        if log:
            return g - out.exp() * g.sum(dim, True)
        return out * (g - (g * out).sum(dim, True))

    def check(g, out, dim, gd, od):
        if tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(
                f"Expected tensor for argument #1 'grad' to have same size as tensor for argument "
                f"#2 'output'; but [{', '.join(map(str, g.shape))}] does not equal "
                f"[{', '.join(map(str, out.shape))}] (while checking arguments for "
                f"{name}_backward)")
        if gd is not od:
            raise RuntimeError(f"expected scalar type {torch_name(gd)} but found {torch_name(od)}")
        return normalize_dim(dim, out.ndim) if out.ndim else None

    def kernel(g, out, dim, input_dtype):
        d = check(g, out, dim, edtype(g), edtype(out))
        if d == out.ndim - 1:
            r = _cpu_norm.softmax_backward(g, out, log)
            if r is not None:
                return r
        gc, oc = opmath_np(g), opmath_np(out)
        with np.errstate(all="ignore"):
            if log:
                r = gc - np.exp(oc) * np.sum(gc, axis=d, keepdims=True)
            else:
                r = oc * (gc - np.sum(gc * oc, axis=d, keepdims=True))
        return r.astype(g.dtype, copy=False)

    def meta(g, out, dim, input_dtype):
        check(g, out, dim, g.dtype, out.dtype)
        return TensorMeta(g.shape, g.dtype)
    defop(f"_{name}_backward_data(Tensor grad_output, Tensor output, int dim, "
          "ScalarType input_dtype) -> Tensor", function=False, method=False, supports="fc",
          kernels={"cpu": kernel}, meta=meta,
          decomp=lambda g, out, dim, input_dtype: formula(g, out, dim))


_softmax_bwd("softmax")
_softmax_bwd("log_softmax")
