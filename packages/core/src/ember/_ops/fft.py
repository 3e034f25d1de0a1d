"""FFT ops (torch.fft): three primitives over numpy's pocketfft (`_fft_c2c`, `_fft_r2c`,
`_fft_c2r`, PyTorch's own split) with their vjps, and the public `fft_*` functions as
decompositions (resize to n/s, promote, pick the normalization), bound by `ember.fft`.

normalization: 0 none, 1 1/sqrt(n), 2 1/n (n: the product of the transformed sizes).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from .._size import normalize_dim
from ._registry import OPS, complex_vjp, defop

_NORMS = ("backward", "ortho", "forward")


def _scale(a, dims_sizes, normalization):
    if normalization == 0:
        return a
    n = math.prod(dims_sizes)
    return a * (1.0 / (math.sqrt(n) if normalization == 1 else n))


# ---- primitives -------------------------------------------------------------------------------
def _c2c_kernel(x, dim, normalization, forward):
    dim = list(dim)
    r = np.fft.fftn(x, axes=dim) if forward else np.fft.ifftn(x, axes=dim, norm="forward")
    return _scale(r, [x.shape[d] for d in dim], normalization).astype(x.dtype, copy=False)


def _c2c_meta(x, dim, normalization, forward):
    return TensorMeta(tuple(x.shape), x.dtype)


_fft_c2c = defop(
    "_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor",
    function=False, method=False, kernels={"cpu": _c2c_kernel}, meta=_c2c_meta, supports="c",
    # the DFT matrix is symmetric: the plain transpose is the same transform (autograd
    # conjugates around it, giving the adjoint PyTorch uses)
    vjp=lambda g, out, x, dim, normalization, forward: (
        _fft_c2c(g, dim, normalization, forward),))


def _r2c_kernel(x, dim, normalization, onesided):
    dim = list(dim)
    r = np.fft.rfftn(x, axes=dim) if onesided else np.fft.fftn(x, axes=dim)
    cdt = np.complex64 if x.dtype == np.float32 else np.complex128
    return _scale(r, [x.shape[d] for d in dim], normalization).astype(cdt, copy=False)


def _r2c_meta(x, dim, normalization, onesided):
    shape = list(x.shape)
    if onesided:
        shape[dim[-1]] = shape[dim[-1]] // 2 + 1
    return TensorMeta(tuple(shape), x.dtype.to_complex())


def _r2c_vjp(g, out, x, dim, normalization, onesided):
    # plain transpose of the first rows of the DFT: zero-pad the half spectrum, transform
    # (autograd conjugates around it and keeps the real part for the real input)
    if onesided:
        d = dim[-1]
        n = x.shape[d]
        g = OPS["constant_pad_nd"](g, _pad_at(g.ndim, d, n - g.shape[d]), 0)
    return (_fft_c2c(g, dim, normalization, True),)


def _pad_at(ndim, d, extra):
    pad = [0, 0] * (ndim - 1 - d)
    return pad + [0, extra]


_fft_r2c = defop(
    "_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor",
    function=False, method=False, kernels={"cpu": _r2c_kernel}, meta=_r2c_meta, supports="f",
    vjp=_r2c_vjp)


def _c2r_kernel(x, dim, normalization, last_dim_size):
    dim = list(dim)
    s = [x.shape[d] for d in dim[:-1]] + [last_dim_size]
    r = np.fft.irfftn(x, s=s, axes=dim, norm="forward")
    rdt = np.float32 if x.dtype == np.complex64 else np.float64
    return _scale(r, s, normalization).astype(rdt, copy=False)


def _c2r_meta(x, dim, normalization, last_dim_size):
    shape = list(x.shape)
    shape[dim[-1]] = last_dim_size
    return TensorMeta(tuple(shape), x.dtype.to_real())


@complex_vjp
def _c2r_vjp(g, out, x, dim, normalization, last_dim_size):
    # PyTorch's convention: the half spectrum's interior entries stand for two entries of
    # the full Hermitian spectrum, so their gradient counts twice
    gi = _fft_r2c(g, dim, normalization, True)
    d = dim[-1]
    half = x.shape[d]
    w = [1.0] * half
    for k in range(1, last_dim_size - half + 1):
        w[k] = 2.0
    shape = [1] * gi.ndim
    shape[d] = half
    return (gi * _weights(w, gi.dtype.to_real(), shape),)


def _weights(w, dtype, shape):
    from .._creation_api import tensor
    return tensor(w, dtype=dtype).reshape(shape)


_fft_c2r = defop(
    "_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor",
    function=False, method=False, kernels={"cpu": _c2r_kernel}, meta=_c2r_meta, supports="c",
    vjp=_c2r_vjp)


# ---- argument handling ------------------------------------------------------------------------
def _norm(norm, forward, op):
    if norm is None:
        norm = "backward"
    if norm not in _NORMS:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    k = _NORMS.index(norm)  # backward, ortho, forward
    return (0, 1, 2)[k] if forward else (2, 1, 0)[k]


def _float_dtype(x, op):
    d = x.dtype
    if d._cat < 2:
        return D.get_default_dtype()
    if d in (D.float16, D.bfloat16):
        raise RuntimeError(f"{op}: Unsupported dtype {torch_name(d)}")
    return d


def _to_complex(x, op):
    d = _float_dtype(x, op)
    return x.to(d if d.is_complex else d.to_complex())


def _to_real(x, op):
    if x.dtype.is_complex:
        raise RuntimeError(f"{op} expects a real input tensor, but got {torch_name(x.dtype)}")
    return x.to(_float_dtype(x, op))


def _resize(x, d, n, op):
    """Trim or zero-pad dim d of x to n points."""
    if n is None:
        return x
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    m = x.shape[d]
    if n < m:
        return x.narrow(d, 0, n)
    if n > m:
        return OPS["constant_pad_nd"](x, _pad_at(x.ndim, d, n - m), 0)
    return x


def _dims_n(x, s, dim, op):
    """(dims, sizes) of an n-dimensional transform from s= and dim= (PyTorch's defaults)."""
    if dim is not None:
        dims = [normalize_dim(d, x.ndim, op) for d in ([dim] if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > x.ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{x.ndim} dimensions.")
        dims = list(range(x.ndim - len(s), x.ndim))
    else:
        dims = list(range(x.ndim))
    sizes = list(s) if s is not None else [None] * len(dims)
    sizes = [None if v == -1 else v for v in sizes]
    return dims, sizes


def _resize_n(x, dims, sizes, op):
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n, op)
    return x


# ---- public functions (decompositions) ---------------------------------------------------------
def _c2c_1(forward, op):
    def f(x, n, dim, norm):
        d = normalize_dim(dim, x.ndim, op)
        x = _resize(_to_complex(x, op), d, n, op)
        return _fft_c2c(x, [d], _norm(norm, forward, op), forward)
    return f


def _c2c_n(forward, op):
    def f(x, s, dim, norm):
        dims, sizes = _dims_n(x, s, dim, op)
        x = _resize_n(_to_complex(x, op), dims, sizes, op)
        return _fft_c2c(x, dims, _norm(norm, forward, op), forward) if dims else x.clone()
    return f


def _rfft_n(op, one=False):
    def f(x, s, dim, norm):
        dims, sizes = ([normalize_dim(dim, x.ndim, op)], [s]) if one else _dims_n(x, s, dim, op)
        if not dims:
            raise RuntimeError(f"{op} must transform at least one axis")
        x = _resize_n(_to_real(x, op), dims, sizes, op)
        return _fft_r2c(x, dims, _norm(norm, True, op), True)
    return f


def _irfft_n(op, one=False):
    def f(x, s, dim, norm):
        dims, sizes = ([normalize_dim(dim, x.ndim, op)], [s]) if one else _dims_n(x, s, dim, op)
        if not dims:
            raise RuntimeError(f"{op} must transform at least one axis")
        last = sizes[-1] if sizes[-1] is not None else 2 * (x.shape[dims[-1]] - 1)
        if last < 1:
            raise RuntimeError(f"Invalid number of data points ({last}) specified")
        x = _resize_n(_to_complex(x, op), dims[:-1], sizes[:-1], op)
        x = _resize(x, dims[-1], last // 2 + 1, op)
        return _fft_c2r(x, dims, _norm(norm, False, op), last)
    return f


def _hfft(x, n, dim, norm):
    d = normalize_dim(dim, x.ndim, "fft_hfft")
    last = n if n is not None else 2 * (x.shape[d] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resize(_to_complex(x, "fft_hfft"), d, last // 2 + 1, "fft_hfft")
    return _fft_c2r(x.conj(), [d], _norm(norm, True, "fft_hfft"), last)


def _ihfft(x, n, dim, norm):
    d = normalize_dim(dim, x.ndim, "fft_ihfft")
    x = _resize(_to_real(x, "fft_ihfft"), d, n, "fft_ihfft")
    return _fft_r2c(x, [d], _norm(norm, False, "fft_ihfft"), True).conj()


_ONE = "(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor"
_TWO = "(Tensor self, SymInt[1]? s=None, int[1] dim=[-2,-1], str? norm=None) -> Tensor"
_N = "(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor"
_BIND = dict(function=False, method=False)

defop("fft_fft" + _ONE, decomp=_c2c_1(True, "fft_fft"), **_BIND)
defop("fft_ifft" + _ONE, decomp=_c2c_1(False, "fft_ifft"), **_BIND)
defop("fft_rfft" + _ONE, decomp=_rfft_n("fft_rfft", one=True), **_BIND)
defop("fft_irfft" + _ONE, decomp=_irfft_n("fft_irfft", one=True), **_BIND)
defop("fft_hfft" + _ONE, decomp=_hfft, **_BIND)
defop("fft_ihfft" + _ONE, decomp=_ihfft, **_BIND)
for _s, _dims in (("2", _TWO), ("n", _N)):
    defop(f"fft_fft{_s}" + _dims, decomp=_c2c_n(True, f"fft_fft{_s}"), **_BIND)
    defop(f"fft_ifft{_s}" + _dims, decomp=_c2c_n(False, f"fft_ifft{_s}"), **_BIND)
    defop(f"fft_rfft{_s}" + _dims, decomp=_rfft_n(f"fft_rfft{_s}"), **_BIND)
    defop(f"fft_irfft{_s}" + _dims, decomp=_irfft_n(f"fft_irfft{_s}"), **_BIND)


def _freq(rfft):
    def f(n, d, dtype, layout, device, pin_memory, requires_grad=False):
        m = n // 2 + 1 if rfft else n
        r = OPS["arange"](m, dtype=dtype, device=device)
        if not rfft:
            r[(n + 1) // 2:] -= n
        r = r * (1.0 / (n * d))
        return r.requires_grad_() if requires_grad else r
    return f


_FREQ = ("(int n, float d=1.0, *, ScalarType? dtype=None, Layout? layout=None, "
         "Device? device=None, bool? pin_memory=False, bool requires_grad=False) -> Tensor")
defop("fft_fftfreq" + _FREQ, decomp=_freq(False), tags={"factory"}, **_BIND)
defop("fft_rfftfreq" + _FREQ, decomp=_freq(True), tags={"factory"}, **_BIND)


def _shift(inverse):
    def f(x, dim):
        dims = list(range(x.ndim)) if dim is None else (
            [dim] if isinstance(dim, int) else list(dim))
        dims = [normalize_dim(d, x.ndim, "fft_fftshift") for d in dims]
        if not dims:
            return x.clone()
        shifts = [(x.shape[d] + 1) // 2 if inverse else x.shape[d] // 2 for d in dims]
        return OPS["roll"](x, shifts, dims)
    return f


defop("fft_fftshift(Tensor self, int[1]? dim=None) -> Tensor", decomp=_shift(False), **_BIND)
defop("fft_ifftshift(Tensor self, int[1]? dim=None) -> Tensor", decomp=_shift(True), **_BIND)
