"""View ops on the native hit path (csrc/viewpath.cpp) against the Python path and PyTorch.

Each case runs with the native path off (`ember._native.set_enabled(False)`: dispatch's Python
`call`, the reference) and on, in three settings (a plain input under grad mode, an input that
requires grad, the same under no_grad) and on the meta device: values, shapes, strides, offset,
storage sharing, `_base`, version counters, requires_grad, grad_fn names, the view's own autograd
fields, backward's gradients and errors (type and message) must be identical; shapes, strides,
gradients and error types are compared with PyTorch's too.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from native_helpers import both_paths

import ember
from ember import _native

CASES = {
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_neg": lambda x: x.transpose(-1, -2),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "t": lambda x: x[0].t(),
    "t_1d": lambda x: x[0, 0].t(),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute_neg": lambda x: x.permute(-1, 0, 1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "unsqueeze_end": lambda x: x.unsqueeze(-1),
    "squeeze_all": lambda x: x.unsqueeze(0).squeeze(),
    "squeeze_dim": lambda x: x.unsqueeze(2).squeeze(2),
    "squeeze_dims": lambda x: x.unsqueeze(0).unsqueeze(3).squeeze((0, 3)),
    "squeeze_noop": lambda x: x.squeeze(1),
    "view": lambda x: x.view(6, 4),
    "view_infer": lambda x: x.view(-1, 2),
    "view_tuple": lambda x: x.view((4, 3, 2)),
    "view_of_transposed": lambda x: x.transpose(0, 1).view(3, 2, 2, 2),
    "reshape_view": lambda x: x.reshape(4, 6),
    "reshape_copy": lambda x: x.transpose(0, 2).reshape(-1),
    "flatten": lambda x: x.flatten(),
    "flatten_mid": lambda x: x.flatten(1),
    "flatten_one_dim": lambda x: x.flatten(1, 1),
    "flatten_copy": lambda x: x.transpose(0, 1).flatten(),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "expand_new_dims": lambda x: x.expand(3, 2, 3, 4),
    "expand_minus_one": lambda x: x[:, :1].expand(-1, 3, -1),
    "select": lambda x: x.select(1, -1),
    "getitem_int": lambda x: x[1],
    "getitem_slices": lambda x: x[:, 1:, ::2],
    "getitem_mixed": lambda x: x[1, None, 0:2, -1],
    "getitem_ellipsis": lambda x: x[..., 1],
    "slice_past_end": lambda x: x[:, 5:],
    "slice_negative": lambda x: x[:, -2:-1],
    "narrow": lambda x: x.narrow(2, 1, 2),
    "narrow_neg": lambda x: x.narrow(-1, -3, 2),
    "split": lambda x: x.split(2, dim=2)[1],
    "chunk": lambda x: x.chunk(3, 1)[2],
    "unbind": lambda x: x.unbind(0)[1],
    "detach": lambda x: x.detach(),
    "contiguous_same": lambda x: x.contiguous(),
    "contiguous_copy": lambda x: x.transpose(0, 1).contiguous(),
    "scalar_t": lambda x: x.sum().t(),
    "scalar_view": lambda x: x.sum().view(1, 1),
    "scalar_unsqueeze": lambda x: x.sum().unsqueeze(0),
    "empty_view": lambda x: x[:, :0].view(0, 4),
    "chain": lambda x: x.permute(1, 0, 2).unsqueeze(0)[0, 1:].transpose(1, 2).flatten(0, 1),
}

ERRORS = {
    "transpose_range": lambda x: x.transpose(0, 3),
    "t_3d": lambda x: x.t(),
    "permute_dup": lambda x: x.permute(0, 0, 1),
    "permute_len": lambda x: x.permute(0, 1),
    "view_size": lambda x: x.view(5, -1),
    "view_two_minus_one": lambda x: x.view(-1, -1),
    "view_needs_copy": lambda x: x.transpose(0, 2).view(-1),
    "expand_size": lambda x: x.expand(2, 5, 4),
    "expand_fewer": lambda x: x.expand(4),
    "select_range": lambda x: x.select(0, 2),
    "select_scalar": lambda x: x.sum().select(0, 0),
    "narrow_past_end": lambda x: x.narrow(0, 1, 5),
    "unsqueeze_range": lambda x: x.unsqueeze(4),
    "squeeze_range": lambda x: x.squeeze(3),
    "flatten_order": lambda x: x.flatten(2, 1),
}


def _input(lib, setting):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7
    if setting == "meta":
        return ember.empty(2, 3, 4, dtype=ember.float64, device="meta")
    x = lib.tensor(a)
    return x.requires_grad_() if setting in ("grad", "grad_under_no_grad") else x


def _fields(r, x):
    """What must be equal between the two paths (and, where the field exists, with PyTorch)."""
    if not isinstance(r, (ember.Tensor, torch.Tensor)):
        return ("V", repr(r))
    root = x._base if x._base is not None else x
    out = {
        "shape": tuple(r.shape), "stride": r.stride(), "offset": r.storage_offset(),
        "is_input": r is x, "base_is_root": r._base is root, "base_none": r._base is None,
        "requires_grad": r.requires_grad, "is_leaf": r.is_leaf,
        "grad_fn": None if r.grad_fn is None else r.grad_fn.name(),
    }
    if r.device.type != "meta":
        out["values"] = r.detach().numpy().tobytes()
        out["shares"] = (r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
        out["version"] = (r._version, x._version)
    if isinstance(r, ember.Tensor):  # ember's own view bookkeeping (Tensor._alias)
        ag = r._ag
        out["dict"] = tuple(sorted(r.__dict__))
        out["no_grad_view"] = r.__dict__.get("_no_grad_view")
        out["ag"] = None if ag is None else (ag.output_nr, ag.view_version, ag.retains_grad)
        st = r._storage if r.device.type != "meta" else None
        out["noted"] = st is not None and any(w() is r for w in st.views or ())
    return out


def _run(lib, fn, setting):
    x = _input(lib, setting)
    try:
        if setting == "grad_under_no_grad":
            with lib.no_grad():
                r = fn(x)
        else:
            r = fn(x)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return {"error": (type(e).__name__, str(e))}, None
    out = _fields(r, x)
    grad = None
    if setting == "grad" and r.requires_grad:
        w = lib.tensor(np.linspace(-1, 1, r.numel()).reshape(tuple(r.shape)))
        (r * w).sum().backward()
        grad = x.grad.numpy().copy()
    return out, grad


def _both(fn, setting):
    res = []
    for on in (False, True):
        _native.set_enabled(on)
        try:
            res.append(_run(ember, fn, setting))
        finally:
            _native.set_enabled(True)
    return res


_TORCH_ONLY_FIELDS = ("dict", "no_grad_view", "ag", "noted")
# ember's reshape of a tensor that needs a copy is a view of the copy (`_base` set; PyTorch's
# is no view): the Python reference's own behavior, compared with the native path only
_COPIES = ("reshape_copy", "flatten_copy")


@pytest.mark.parametrize("setting", ["plain", "grad", "grad_under_no_grad", "meta"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_view_native_matches_python_and_torch(name, setting):
    (off, goff), (on, gon) = _both(CASES[name], setting)
    assert on == off
    if goff is not None or gon is not None:
        np.testing.assert_array_equal(gon, goff)
    if setting == "meta":
        return
    ref, gref = _run(torch, CASES[name], setting)
    mine = {k: v for k, v in on.items() if k not in _TORCH_ONLY_FIELDS}
    mine.pop("grad_fn"), ref.pop("grad_fn")  # (names: test_grad_fn_names_match_torch)
    if name in _COPIES:
        for k in ("base_is_root", "base_none"):
            mine.pop(k), ref.pop(k)
    assert mine == ref
    if gref is not None:
        np.testing.assert_allclose(gon, gref, rtol=1e-12)


@pytest.mark.parametrize("setting", ["plain", "grad"])
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_view_errors_match(name, setting):
    (off, _), (on, _) = _both(ERRORS[name], setting)
    assert "error" in off and on == off
    ref, _ = _run(torch, ERRORS[name], setting)
    assert ref["error"][0] == off["error"][0], (ref, off)


def test_grad_fn_names_match_torch():
    """The recorded views' nodes carry PyTorch's names (their Python ones, natively built).
    (narrow, split and reshape are left out: ember's Python path names them NarrowBackward0 /
    ViewBackward0 where PyTorch's composites say SliceBackward0 / SplitBackward0 /
    UnsafeViewBackward0; the native path keeps the Python path's names.)"""
    names = {}
    for lib in (ember, torch):
        x = lib.ones(2, 3, 4, dtype=lib.float64, requires_grad=True)
        names[lib] = [f(x).grad_fn.name() for f in (
            lambda x: x.transpose(0, 1), lambda x: x[0].t(), lambda x: x.view(24),
            lambda x: x.permute(2, 1, 0), lambda x: x.unsqueeze(0), lambda x: x[1],
            lambda x: x[:, 1:], lambda x: x.expand(2, 2, 3, 4), lambda x: x.squeeze())]
    assert names[ember] == names[torch]


def _version_story(lib):
    """A view shares its base's version counter; a saved view written later fails backward."""
    x = lib.ones(2, 3, dtype=lib.float64)
    v = x.t()
    with lib.no_grad():
        x.add_(1)
    a = lib.ones(3, 2, dtype=lib.float64, requires_grad=True)
    y = a * 1
    w = y.t()
    z = (w * w).sum()  # saves w
    with lib.no_grad():
        y.mul_(2)
    try:
        z.backward()
        err = None
    except RuntimeError as e:
        err = type(e).__name__
    return v._version, x._version, v.tolist(), w._version, err


def test_version_counters_shared():
    (off, on) = both_paths(lambda: _version_story(ember))
    assert on == off == _version_story(torch)


def _no_grad_view_written(lib):
    a = lib.ones(2, 3, requires_grad=True)
    b = a * 2
    with lib.no_grad():
        v = b.t()
    v.mul_(2)  # PyTorch: a view made under no_grad, written in place with grad on


def test_no_grad_view_written_in_place_raises():
    off, on = both_paths(lambda: _no_grad_view_written(ember))
    assert off[:2] == ("E", "RuntimeError") and on == off
    with pytest.raises(RuntimeError):
        _no_grad_view_written(torch)


def _rebased(lib):
    """A view of a base that needed no grad, then an in-place op gives the base a history:
    the view's grad_fn becomes the base's (PyTorch's rebase), and gradients flow through it."""
    x = lib.zeros(2, 3, dtype=lib.float64)
    v = x[1]
    w = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
    x.add_(w * 3)
    name = v.grad_fn.name() if v.grad_fn is not None else None
    (v * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
    return v.requires_grad, name is not None, w.grad.tolist()


def test_views_rebased_after_in_place():
    off, on = both_paths(lambda: _rebased(ember))
    assert on == off == _rebased(torch)


def test_view_of_view_writes_through_base():
    def run(lib):
        x = lib.arange(12.0).reshape(3, 4)
        x.t()[1:, 0].unsqueeze(0).mul_(10)
        return x.tolist(), x._version
    off, on = both_paths(lambda: run(ember))
    assert on == off == run(torch)


def test_native_views_are_taken():
    """Guards the tests above against comparing the Python path with itself."""
    if not _native.enabled():
        pytest.skip("ember._C is not built here (tools/build_native.py), or EMBER_NATIVE=0")
    x = ember.ones(2, 3, requires_grad=True)
    made, recorded = _native.view_stats()
    with ember.no_grad():
        x.t()
    x.t().unsqueeze(0)
    x.detach()
    made2, recorded2 = _native.view_stats()
    assert made2 >= made + 4 and recorded2 >= recorded + 2


def test_cuda_like_device_views():
    """Views are metadata only: a tensor of another device (meta here) gets the same views."""
    x = ember.empty(4, 5, device="meta")
    off, on = both_paths(lambda: [(tuple(v.shape), v.stride(), v.storage_offset(), v.device.type)
                                   for v in (x.t(), x[1:, ::2], x.view(20), x.unsqueeze(1))])
    assert on == off


def test_replaced_engine_execute_records_views_in_python(monkeypatch):
    """ember-compiler replaces the engine's `_execute` (fake tensors go to their mode): then
    recorded views run through it, native path or not."""
    from ember.autograd import _engine
    seen = []
    plain = _engine._execute

    def execute(op, args, out=None):
        seen.append(op.name)
        return plain(op, args) if out is None else plain(op, args, out)
    monkeypatch.setattr(_engine, "_execute", execute)
    x = ember.ones(2, 3, requires_grad=True)
    for on in (False, True):
        _native.set_enabled(on)
        try:
            y = x.t()
        finally:
            _native.set_enabled(True)
        assert seen.pop() == "t" and y.grad_fn.name() == "TBackward0"
