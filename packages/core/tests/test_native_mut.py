"""In-place ops and factories on the native hit path (csrc/mutpath.cpp) against the Python path
and PyTorch.

Each case runs with the native path off (dispatch's Python `call`, the reference) and on: the
written values, dtype, shape, strides, version counters, the result being the written tensor,
and errors (type and message) must be identical; values, dtypes and error types are compared
with PyTorch's too. Autograd's in-place checks (a leaf that requires grad, a saved tensor
written later) are compared on both paths.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from native_helpers import both_paths

import ember
from ember import _native


def _x(lib, dt="float32", shape=(3, 4)):
    a = (np.arange(np.prod(shape)).reshape(shape) / 5 - 1).astype(dt)
    return lib.tensor(a)


INPLACE = {
    "add_scalar": lambda t, x: x.add_(2),
    "add_tensor_alpha": lambda t, x: x.add_(x * 2, alpha=0.5),
    "add_broadcast_other": lambda t, x: x.add_(t.ones(4)),
    "sub_": lambda t, x: x.sub_(1.5),
    "mul_tensor": lambda t, x: x.mul_(x),
    "div_": lambda t, x: x.div_(3),
    "addcmul_": lambda t, x: x.addcmul_(x, x, value=0.25),
    "addcdiv_": lambda t, x: x.addcdiv_(x, x.abs() + 1, value=-2),
    "lerp_": lambda t, x: x.lerp_(t.ones_like(x), 0.3),
    "pow_": lambda t, x: x.pow_(2),
    "sqrt_abs": lambda t, x: x.abs_().sqrt_(),
    "neg_": lambda t, x: x.neg_(),
    "exp_": lambda t, x: x.exp_(),
    "float64": lambda t, x: x.double().mul_(3).add_(1),
    "transposed_self": lambda t, x: x.t().add_(1),
    "slice_self": lambda t, x: x[:, 1:3].mul_(10),
    "chained": lambda t, x: x.mul_(0.9).add_(x, alpha=0.1),
    "zero_": lambda t, x: x.zero_(),
    "zero_view": lambda t, x: x[1].zero_(),
    "fill_": lambda t, x: x.fill_(3.25),
    "fill_int": lambda t, x: x.long().fill_(7),
    "fill_bool": lambda t, x: x.bool().fill_(True),
    "fill_expanded": lambda t, x: x[:, :1].expand(3, 4).fill_(2),
    "copy_": lambda t, x: x.copy_(x * 3),
    "copy_cast": lambda t, x: x.copy_(x.double() / 3),
    "copy_from_int": lambda t, x: x.copy_(t.arange(12).reshape(3, 4)),
    "copy_into_view": lambda t, x: x.t().copy_(t.ones(4, 3)),
    "copy_overlapping": lambda t, x: x[1:].copy_(x[:-1]),  # (PyTorch refuses: not compared)
    "copy_broadcast": lambda t, x: x.copy_(t.ones(4)),
}

INPLACE_ERRORS = {
    "broadcast_into_self": lambda t, x: x[:, :1].add_(x),
    "int_self_float_other": lambda t, x: x.long().add_(1.5),
    "expanded_self": lambda t, x: x[:, :1].expand(3, 4).add_(1),
    "copy_bad_shape": lambda t, x: x.copy_(t.ones(5)),
    "copy_expanded_dst": lambda t, x: x[:, :1].expand(3, 4).copy_(x),
}

FACTORIES = {
    "zeros": lambda t: t.zeros(2, 3),
    "zeros_tuple": lambda t: t.zeros((2, 3)),
    "ones_float64": lambda t: t.ones(4, dtype=t.float64),
    "ones_int": lambda t: t.ones(2, 2, dtype=t.int64),
    "empty_shape": lambda t: tuple(t.empty(0, 3).shape),
    "full": lambda t: t.full((2, 2), 7.5),
    "full_int": lambda t: t.full((3,), 3),
    "full_bool": lambda t: t.full((2,), True),
    "zeros_cpu": lambda t: t.zeros(3, device="cpu"),
    "zeros_cpu_device": lambda t: t.zeros(3, device=t.device("cpu")),
    "zeros_requires_grad": lambda t: t.zeros(2, requires_grad=True),
    "zeros_scalar": lambda t: t.zeros(()),
    "zeros_meta": lambda t: t.zeros(2, device="meta"),
    "zeros_negative": lambda t: t.zeros(2, -1),
    "new_zeros": lambda t: t.ones(2, dtype=t.float64).new_zeros(3),
}


def _summary(r, x=None):
    if isinstance(r, (ember.Tensor, torch.Tensor)):
        out = (str(r.dtype).split(".")[-1], tuple(r.shape), r.stride(), r.device.type)
        if r.device.type == "cpu":
            out += (r.detach().numpy().tobytes(), r.requires_grad)
        if x is not None:
            out += (r._version, x._version, r.untyped_storage().data_ptr() == x.untyped_storage(
            ).data_ptr())
        return out
    return ("V", repr(r))


def _run(lib, fn, *args):
    try:
        if args:
            x = _x(lib)
            return _summary(fn(lib, x), x), _summary(x, x)
        return _summary(fn(lib))
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return ("E", type(e).__name__, str(e))


def _both(fn, *args):
    res = []
    for on in (False, True):
        _native.set_enabled(on)
        try:
            res.append(_run(ember, fn, *args))
        finally:
            _native.set_enabled(True)
    return res


def _same_values(a, b):
    """What compares with PyTorch: dtype, shape and values (float32 math: to 1 ulp or so)."""
    if isinstance(a[0], tuple):
        return all(_same_values(x, y) for x, y in zip(a, b))
    if a[:2] != b[:2]:
        return False
    x = np.frombuffer(a[4], dtype=a[0])
    y = np.frombuffer(b[4], dtype=b[0])
    return np.allclose(x, y, rtol=1e-6, atol=1e-7) if x.dtype.kind == "f" else (x == y).all()


@pytest.mark.parametrize("name", sorted(INPLACE) + sorted(INPLACE_ERRORS))
def test_inplace_native_matches_python_and_torch(name):
    fn = INPLACE.get(name) or INPLACE_ERRORS[name]
    off, on = _both(fn, True)
    assert on == off
    assert (off[0] == "E") == (name in INPLACE_ERRORS)
    ref = _run(torch, fn, True)
    if off[0] == "E":
        assert ref[:2] == off[:2], (ref, off)
    elif name != "copy_overlapping":
        assert _same_values(off, ref), (off, ref)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_native_match_python_and_torch(name):
    off, on = _both(FACTORIES[name])
    assert on == off
    ref = _run(torch, FACTORIES[name])
    if ref[0] in ("E", "V"):
        assert ref[:2] == off[:2]
    else:
        assert off[:4] == ref[:4] and off[4:] == ref[4:]


def test_factories_follow_the_default_device():
    def run():
        with ember.device("meta"):
            a = ember.zeros(2)
        ember.set_default_device("meta")
        try:
            b = ember.ones(3)
        finally:
            ember.set_default_device(None)
        return a.device.type, b.device.type, ember.zeros(1).device.type
    assert both_paths(run) == [("meta", "meta", "cpu")] * 2


def _leaf_in_place(lib):
    w = lib.ones(3, requires_grad=True)
    w.add_(1)


def _view_of_leaf_in_place(lib):
    w = lib.ones(3, requires_grad=True)
    w[1:].mul_(2)


def _saved_then_written(lib):
    a = lib.ones(3, dtype=lib.float64, requires_grad=True)
    b = a * 2
    c = b.exp()  # saves its output
    with lib.no_grad():
        c.add_(1)  # nothing records: a native write, the version bumped
    c.sum().backward()


def _param_under_no_grad(lib):
    p = lib.nn.Parameter(lib.ones(3, dtype=lib.float64))
    g = lib.full((3,), 0.5, dtype=lib.float64)
    with lib.no_grad():
        p.mul_(0.9).add_(g, alpha=-0.1)
        p.addcdiv_(g, g + 1, value=0.01)
    return p.detach().tolist(), p._version, p.requires_grad, p.is_leaf


def _recorded_in_place(lib):
    a = lib.ones(3, dtype=lib.float64, requires_grad=True)
    b = a * 1
    b.mul_(a).add_(2)
    b.sum().backward()
    return b.grad_fn.name(), a.grad.tolist()


@pytest.mark.parametrize("fn", [_leaf_in_place, _view_of_leaf_in_place, _saved_then_written,
                                _param_under_no_grad, _recorded_in_place])
def test_autograd_in_place_checks(fn):
    off, on = both_paths(lambda: fn(ember))
    assert on == off
    try:
        ref = fn(torch)
    except RuntimeError as e:
        ref = ("E", "RuntimeError", str(e))
    if off[0] == "E":
        assert ref[:2] == off[:2]
    elif fn is _recorded_in_place:
        assert off[1] == ref[1]
    else:
        assert off == ref


def test_native_mutation_path_is_taken():
    """Guards the tests above against comparing the Python path with itself."""
    if not _native.enabled():
        pytest.skip("ember._C is not built here (tools/build_native.py), or EMBER_NATIVE=0")
    before = _native.mut_stats()
    x = ember.zeros(4)
    x.add_(1).mul_(2)
    x.zero_()
    x.copy_(ember.ones(4))
    assert _native.mut_stats() >= before + 6
    assert x.tolist() == [1.0] * 4 and x._version == 4
