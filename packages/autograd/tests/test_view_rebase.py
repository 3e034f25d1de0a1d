"""Views of a tensor that needed no grad, when an in-place op gives the base (or another view
of it) a history: they need grad too and backpropagate through the base, as torch's do."""
import pytest
import torch

import ember


def _case_base_inplace(m):
    b = m.zeros(3)
    v = b[:2]
    w = m.ones(3, requires_grad=True)
    b.mul_(w)
    b.add_(w * 2)
    (v * m.tensor([1.0, 5.0])).sum().backward()
    return v.requires_grad, v.grad_fn.name(), w.grad.tolist()


def _case_other_view(m):
    b = m.zeros(4)
    v1, v2 = b[:2], b[2:].reshape(2, 1)
    w = m.ones(2, requires_grad=True)
    v1.add_(w * 3)
    (b.sum() + v2.sum() * 3 + v1.sum()).backward()
    return v2.requires_grad, v1.grad_fn is not None, w.grad.tolist()


def _case_view_of_view(m):
    b = m.arange(6.0).reshape(2, 3)
    row = b[1]
    elem = row[1:]
    w = m.full((2, 3), 2.0, requires_grad=True)
    b.mul_(w)
    elem.sum().backward()
    return elem.requires_grad, row.requires_grad, w.grad.tolist()


def _case_no_grad_inplace(m):
    b = m.zeros(3)
    v = b[:2]
    w = m.ones(3, requires_grad=True)
    with m.no_grad():
        b.add_(w)
    return v.requires_grad, b.requires_grad, v.tolist()


@pytest.mark.parametrize("case", [_case_base_inplace, _case_other_view, _case_view_of_view,
                                  _case_no_grad_inplace])
def test_views_rebased_after_inplace_on_plain_base(case):
    e, t = case(ember), case(torch)
    assert e == t
