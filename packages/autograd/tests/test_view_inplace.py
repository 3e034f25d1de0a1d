"""Views and in-place writes, against torch: a view's grad_fn read after an in-place write to
its base (regenerated as AsStridedBackward0), views made under no_grad (requires_grad, and the
error for writing them in place in grad mode), and detach() being no view."""
from __future__ import annotations

import numpy as np
import pytest
from harness import compare, torch

import ember

X = np.arange(12.0).reshape(3, 4) / 7


def _name(fn):
    return None if fn is None else fn.name().split("::")[-1]


def test_view_grad_fn_regenerated_on_access():
    res = []
    for t in (ember, torch):
        x = t.tensor(X, requires_grad=True)
        a = x.clone()
        v, w, u = a[0], a.t(), a.view(12)
        before = [_name(v.grad_fn), _name(w.grad_fn), _name(u.grad_fn)]
        a.mul_(2)
        after = [_name(v.grad_fn), _name(w.grad_fn), _name(u.grad_fn)]
        nxt = _name(v.grad_fn.next_functions[0][0])
        (v * 3).sum().backward()
        res.append((before, after, nxt, x.grad.numpy().copy()))
    (eb, ea, en, eg), (tb, ta, tn, tg) = res
    assert eb == tb == ["SelectBackward0", "TBackward0", "ViewBackward0"]
    assert ea == ta == ["AsStridedBackward0"] * 3
    assert en == tn == "MulBackward0"
    np.testing.assert_allclose(eg, tg)


def test_view_grad_fn_after_write_through_another_view():
    def run(t):
        x = t.tensor(X, requires_grad=True)
        y = t.tensor(X[0], requires_grad=True)
        a = x * 1
        v, w = a[0], a[:, 1]
        w.mul_(y[:3])                         # writes a's column 1, so v's element 1 too
        names = (_name(v.grad_fn), _name(a.grad_fn))
        (v * t.tensor(X[1])).sum().backward()
        return x.grad, y.grad, names
    e, tt = run(ember), run(torch)
    assert e[2] == ("AsStridedBackward0", "CopySlices")
    compare(e[:2], tt[:2], "float64")


def test_views_made_under_no_grad():
    for t in (ember, torch):
        x = t.tensor(X, requires_grad=True)
        a = x * 1
        with t.no_grad():
            nv, lv, d, iv = a[1], x[0], x.detach(), a.view(t.int64)
        assert (nv.requires_grad, lv.requires_grad, d.requires_grad, iv.requires_grad) == \
            (True, True, False, False)
        assert nv.is_leaf and nv.grad_fn is None and d._base is None and nv._base is a
        for v in (nv, lv):
            with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is "
                                                   "being modified inplace with grad mode"):
                v.mul_(2)
        with t.no_grad():
            nv.mul_(2)                       # both in no_grad: allowed


def test_detach_is_no_view():
    def run(t):
        x = t.tensor(X, requires_grad=True)
        y = t.tensor(2.0, dtype=t.float64, requires_grad=True)
        with t.no_grad():
            d = x.detach()
        d2 = x.detach()
        d.mul_(3)                             # fine: detached tensors are no views
        d2.mul_(y)                            # a plain in-place op on a fresh history
        assert d._base is None and d2._base is None and _name(d2.grad_fn) == "MulBackward0"
        d2.sum().backward()
        return x, y.grad
    compare(run(ember), run(torch), "float64")


def test_no_grad_view_refused_once_its_storage_is_written():
    msg = "A view was created in no_grad mode and its base or another view of its base"
    for t in (ember, torch):
        x = t.tensor(X, requires_grad=True)
        a = x * 1
        with t.no_grad():
            v = a[1:]
            lv = x[1:]
        assert v.grad_fn is None and v.requires_grad
        a.mul_(2)                              # tracked write to v's base
        with t.no_grad():
            x.add_(1)                          # an optimizer-style write to lv's base
        for bad in (lambda v=v: v.grad_fn, lambda v=v: v * 2, lambda lv=lv: lv.grad_fn):
            with pytest.raises(RuntimeError, match=msg):
                bad()
        with t.no_grad():
            fresh = x[:1]                      # made after the write: fine
        assert fresh.grad_fn is None and (fresh * 2).requires_grad
