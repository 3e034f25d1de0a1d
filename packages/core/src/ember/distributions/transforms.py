"""Bijections for TransformedDistribution, as torch.distributions.transforms: each maps x -> y,
has an inverse `.inv`, and `log_abs_det_jacobian(x, y)`; `biject_to(constraint)` gives the
transform from unconstrained reals onto a constraint's support."""
from __future__ import annotations

import math
import numbers
import weakref

import ember
import ember.nn.functional as F

from . import constraints
from .utils import sum_rightmost

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "PowerTransform", "SoftplusTransform", "AbsTransform", "ComposeTransform",
           "StickBreakingTransform", "identity_transform", "biject_to", "transform_to"]


class Transform:
    bijective = False
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = (None, None)
        self._inv = None

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __repr__(self):
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)

    @property
    def inv(self):
        return self._inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class _Stateless(Transform):
    """A parameter-free transform: equal to any instance of its class."""

    def __eq__(self, other):
        return isinstance(other, type(self))

    __hash__ = object.__hash__


class ExpTransform(_Stateless):
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, 1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(_Stateless):
    domain, codomain, bijective, sign = constraints.real, constraints.unit_interval, True, 1

    def _call(self, x):
        finfo = ember.finfo(x.dtype)
        return ember.clamp(ember.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)

    def _inverse(self, y):
        finfo = ember.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(_Stateless):
    domain, codomain, bijective, sign = constraints.real, constraints.interval(-1.0, 1.0), True, 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return ember.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class SoftplusTransform(_Stateless):
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, 1

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class AbsTransform(_Stateless):
    domain, codomain = constraints.real, constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    domain, codomain, bijective = constraints.positive, constraints.positive, True

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = (exponent if isinstance(exponent, ember.Tensor)
                            else ember.tensor(float(exponent)),)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(self.exponent.eq(other.exponent).all())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class AffineTransform(Transform):
    """y = loc + scale * x over `event_dim` rightmost dims."""
    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    event_dim = property(lambda self: self._event_dim)

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else \
            constraints.independent(constraints.real, self._event_dim)

    codomain = domain

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False

        def same(a, b):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                return a == b
            return bool((ember.as_tensor(a) == ember.as_tensor(b)).all())
        return same(self.loc, other.loc) and same(self.scale, other.scale)

    __hash__ = object.__hash__

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = ember.full_like(x, math.log(abs(scale)))
        else:
            result = ember.abs(scale).log()
        if self._event_dim:
            shape = result.shape[:result.dim() - self._event_dim] + (-1,)
            result = result.reshape(shape).sum(-1)
            shape = shape[:-1]
        else:
            shape = x.shape
        return result.expand(shape) if result.shape != shape else result


class ComposeTransform(Transform):
    """parts applied in order: y = parts[-1](...parts[0](x))."""

    def __init__(self, parts, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    bijective = property(lambda self: all(p.bijective for p in self.parts))

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return ember.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms, event_dim = [], self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(a, b),
                                       event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape


identity_transform = ComposeTransform([])


class StickBreakingTransform(_Stateless):
    """Unconstrained R^(K-1) -> the K-simplex by stick breaking."""
    domain, codomain, bijective = constraints.real_vector, constraints.simplex, True

    def _call(self, x):
        offset = x.shape[-1] + 1 - ember.ones(x.shape[-1], dtype=x.dtype).cumsum(-1)
        z = ember.sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - ember.ones(y_crop.shape[-1], dtype=y.dtype).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=ember.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - ember.ones(x.shape[-1], dtype=x.dtype).cumsum(-1)
        x = x - offset.log()
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return shape[:-1] + (shape[-1] - 1,)


def biject_to(constraint):
    """The bijection from unconstrained reals onto `constraint`'s support."""
    c = constraint
    if c is constraints.real or c is constraints.real_vector:
        return identity_transform
    if isinstance(c, constraints._IndependentConstraint):
        return biject_to(c.base_constraint)
    if c is constraints.positive or c is constraints.nonnegative:
        return ExpTransform()
    if isinstance(c, constraints._GreaterThan):
        return ComposeTransform([ExpTransform(), AffineTransform(c.lower_bound, 1)])
    if isinstance(c, constraints._LessThan):
        return ComposeTransform([ExpTransform(), AffineTransform(c.upper_bound, -1)])
    if isinstance(c, constraints._Interval):
        if c.lower_bound == 0 and c.upper_bound == 1 if isinstance(c.lower_bound,
                                                                   numbers.Number) else False:
            return SigmoidTransform()
        return ComposeTransform([SigmoidTransform(),
                                 AffineTransform(c.lower_bound, c.upper_bound - c.lower_bound)])
    if c is constraints.simplex:
        return StickBreakingTransform()
    raise NotImplementedError(f"Cannot transform {type(c).__name__} constraints")


transform_to = biject_to
