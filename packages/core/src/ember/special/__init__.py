"""`ember.special`: PyTorch's torch.special namespace.

Functions are bound from the table ops `special_<name>` (`_ops/special.py`) or are the table's
public functions under torch.special's names (`expit` is `sigmoid`, `gammaln` is `lgamma`).

>>> import ember
>>> round(ember.special.i0(ember.tensor([1.0])).item(), 6)
1.266066
"""
from __future__ import annotations

import functools

from .._ops import FUNCTIONS as _F
from .._ops import OPS as _OPS
from .._ops._codegen import make_function as _make_function
from .._tensor import Tensor as _Tensor

_OWN = ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
        "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
        "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
        "i0e", "i1", "i1e", "erfcx", "log_ndtr", "ndtri", "ndtr", "entr", "xlog1py", "zeta",
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p")
_RENAMED = {"gammainc": "igamma", "gammaincc": "igammac", "multigammaln": "mvlgamma",
            "i0": "i0", "sinc": "sinc"}
_ALIASES = {"digamma": "digamma", "psi": "digamma", "erf": "erf", "erfc": "erfc",
            "erfinv": "erfinv", "exp2": "exp2", "expm1": "expm1", "log1p": "log1p",
            "logit": "logit", "logsumexp": "logsumexp", "polygamma": "polygamma",
            "round": "round", "softmax": "softmax", "log_softmax": "log_softmax",
            "xlogy": "xlogy", "gammaln": "lgamma", "expit": "sigmoid"}


def _scalars_to_tensors(fn):
    """Python numbers become 0-d tensors (torch.special's Scalar overloads of zeta, ...)."""
    @functools.wraps(fn)
    def f(*args, **kwargs):
        from .._creation_api import tensor
        args = tuple(tensor(a) if isinstance(a, (int, float)) and not isinstance(a, bool)
                     else a for a in args)
        if not any(isinstance(a, _Tensor) for a in args):
            raise TypeError(f"{fn.__name__}(): expected at least one Tensor argument")
        return fn(*args, **kwargs)
    return f


def _bind(name, opname):
    op = _OPS[opname]
    fn = _make_function(op, name, as_method=False, with_out=op.has_out)
    if op.pointwise is None and len(op.tensor_idx) == 2:
        fn = _scalars_to_tensors(fn)
    fn.__module__ = "ember.special"
    globals()[name] = fn


for _name in _OWN:
    _bind(_name, "special_" + _name)
for _name, _opname in _RENAMED.items():
    _bind(_name, _opname)
for _name, _target in _ALIASES.items():
    globals()[_name] = _F[_target]

__all__ = sorted(list(_OWN) + list(_RENAMED) + list(_ALIASES))
