"""`ember.library.opcheck`: is a user op registered correctly?

    test_schema                 declared mutations happen, undeclared ones do not, outputs match
                                the schema's returns and alias no input
    test_faketensor             the fake kernel gives the real outputs' shapes, dtypes, strides
    test_autograd_registration  inputs require grad -> a derivative is registered
    test_gradcheck              the derivative matches finite differences (float64 copies)
"""
from __future__ import annotations

import numpy as np

from .._grad_mode import no_grad as _no_grad
from .._tensor import Tensor
from ._ops import _as_meta, user_op

__all__ = ["opcheck", "OpCheckError", "DEFAULT_TEST_UTILS"]

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                      "test_gradcheck")


class OpCheckError(Exception):
    """An opcheck test failed (the message names the test and the cause)."""


def _clone(a, **kw):
    if isinstance(a, Tensor):
        c = a.detach().clone()
        if kw.get("dtype") is not None and c.is_floating_point():
            c = c.to(kw["dtype"])
        return c.requires_grad_(a.requires_grad and c.is_floating_point())
    if isinstance(a, (list, tuple)):
        return type(a)(_clone(x, **kw) for x in a)
    return a


def _tensors(x):
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def _run(op, args, kwargs):
    return op(*args, **kwargs)


def _test_schema(op, args, kwargs):
    args, kwargs = _clone(args), _clone(kwargs)
    full = op.bind(args, kwargs)
    before = [[t.detach().clone() for t in _tensors(a)] for a in full]
    with _no_grad():
        out = op(*args, **kwargs)
    for i, (a, old) in enumerate(zip(full, before)):
        changed = any(not np.array_equal(t.detach().numpy(), o.numpy(), equal_nan=True)
                      for t, o in zip(_tensors(a), old) if t.device.type == "cpu")
        if changed and i not in op.mutated_idx:
            raise OpCheckError(f"{op.qualname}: argument '{op.arg_names[i]}' is mutated but the "
                               f"schema does not declare it: add it to mutates_args "
                               f"(schema: {op.schema.text})")
    outs = out if isinstance(out, (tuple, list)) and op.nret != 1 else (out,)
    if op.nret == 0:
        if out is not None:
            raise OpCheckError(f"{op.qualname}: the schema returns nothing but the op returned "
                               f"{type(out).__name__}")
        return
    if len(outs) != op.nret:
        raise OpCheckError(f"{op.qualname}: the schema has {op.nret} returns, the op returned "
                           f"{len(outs)}")
    ins = _tensors(list(full))
    for (typ, _), o in zip(op.schema.returns, outs):
        if typ == "Tensor" and not isinstance(o, Tensor):
            raise OpCheckError(f"{op.qualname}: expected a Tensor return, got "
                               f"{type(o).__name__}")
        for t in _tensors(o):
            if any(t._storage is i._storage for i in ins):
                raise OpCheckError(f"{op.qualname}: an output aliases an input; return a clone")


def _test_faketensor(op, args, kwargs):
    with _no_grad():
        real = op(*_clone(args), **_clone(kwargs))
        fake = op(*_as_meta(tuple(_clone(args))), **{k: _as_meta(v) for k, v in kwargs.items()})
    rs, fs = _tensors(real), _tensors(fake)
    if len(rs) != len(fs):
        raise OpCheckError(f"{op.qualname}: the fake kernel returned {len(fs)} tensors, the real "
                           f"kernel {len(rs)}")
    for k, (r, f) in enumerate(zip(rs, fs)):
        if f.device.type != "meta":
            raise OpCheckError(f"{op.qualname}: the fake kernel's output {k} is on {f.device}, "
                               f"expected meta (allocate with ember.empty_like / new_empty)")
        for what in ("shape", "dtype"):
            if getattr(r, what) != getattr(f, what):
                raise OpCheckError(f"{op.qualname}: output {k}: the fake kernel's {what} "
                                   f"{getattr(f, what)} differs from the real kernel's "
                                   f"{getattr(r, what)}")
        if r.numel() > 1 and r.stride() != f.stride():
            raise OpCheckError(f"{op.qualname}: output {k}: the fake kernel's strides "
                               f"{f.stride()} differ from the real kernel's {r.stride()}")


def _needs_grad(args, kwargs) -> bool:
    return any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values())))


def _test_autograd_registration(op, args, kwargs):
    if not _needs_grad(args, kwargs):
        return
    if op.vjp is None and op.decomp is None:
        raise OpCheckError(f"{op.qualname}: inputs require grad but the op has no derivative")
    if getattr(op.vjp, "missing", False):
        raise OpCheckError(f"{op.qualname}: inputs require grad but no autograd formula is "
                           f"registered: use register_autograd")


def _test_gradcheck(op, args, kwargs):
    if not _needs_grad(args, kwargs):
        return
    import ember

    a = _clone(args, dtype=ember.float64)
    kw = _clone(kwargs, dtype=ember.float64)
    names = list(kw)
    leaves = [t for t in _tensors(list(a) + list(kw.values())) if t.requires_grad]
    flat_in = list(a) + [kw[k] for k in names]

    def f(*_):
        r = op(*flat_in[:len(a)], **dict(zip(names, flat_in[len(a):])))
        outs = [t for t in _tensors(r) if t.is_floating_point()]
        return tuple(outs) if len(outs) != 1 else outs[0]
    from ember.autograd import gradcheck  # needs ember-autograd (loaded lazily)

    try:
        gradcheck(f, tuple(leaves), atol=1e-5, rtol=1e-3)
    except Exception as e:
        raise OpCheckError(f"{op.qualname}: gradients differ from finite differences: {e}") \
            from e


_TESTS = {"test_schema": _test_schema, "test_faketensor": _test_faketensor,
          "test_autograd_registration": _test_autograd_registration,
          "test_gradcheck": _test_gradcheck}


def opcheck(op, args, kwargs=None, *, test_utils=DEFAULT_TEST_UTILS,
            raise_exception: bool = True, atol=None, rtol=None) -> dict:
    """Check that a custom op is registered correctly; returns {test: "SUCCESS" | exception}.

    >>> import ember
    >>> @ember.library.custom_op("doctest::cube", mutates_args=())
    ... def cube(x: ember.Tensor) -> ember.Tensor:
    ...     return x * x * x
    >>> _ = cube.register_fake(lambda x: ember.empty_like(x))
    >>> ember.library.opcheck(cube, (ember.ones(2),))["test_faketensor"]
    'SUCCESS'
    """
    target = user_op(op)
    kwargs = dict(kwargs or {})
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    results = {}
    for name in test_utils:
        if name not in _TESTS:
            raise ValueError(f"opcheck: unknown test {name!r} (expected one of "
                             f"{', '.join(_TESTS)})")
        try:
            _TESTS[name](target, args, kwargs)
            results[name] = "SUCCESS"
        except Exception as e:
            if raise_exception:
                if isinstance(e, OpCheckError):
                    raise
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e}") from e
            results[name] = e
    return results
