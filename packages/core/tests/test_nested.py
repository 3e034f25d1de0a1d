"""ember.nested against torch.nested: construction (strided and jagged layouts), sizes,
unbind, values/offsets, to_padded_tensor (with gradients), elementwise ops, errors."""
import re

import numpy as np
import pytest
from harness import torch

import ember

R = np.random.default_rng(0)
PARTS = [R.normal(size=(2, 4)), R.normal(size=(5, 4)), R.normal(size=(1, 4))]


def _nt(t, layout=None, grad=False):
    kw = {} if layout is None else {"layout": getattr(t, layout)}
    return t.nested.nested_tensor([t.tensor(p) for p in PARTS], requires_grad=grad, **kw)


def _np(x):
    return x.detach().numpy()


@pytest.mark.parametrize("layout", [None, "jagged"])
def test_structure_matches_torch(layout):
    e, t = _nt(ember, layout), _nt(torch, layout)
    assert e.is_nested and t.is_nested
    assert (e.dim(), e.size(0), e.size(2)) == (t.dim(), t.size(0), t.size(2))
    for a, b in zip(e.unbind(), t.unbind()):
        np.testing.assert_allclose(_np(a), _np(b))
    if layout == "jagged":
        # (PyTorch numbers ragged dims j1, j2, ... per process: the number is not compared)
        assert re.sub(r"j\d+", "j", str(e.shape)) == re.sub(r"j\d+", "j", str(t.shape)).replace(
            "torch.", "ember.")
        np.testing.assert_allclose(_np(e.values()), _np(t.values()))
        assert e.offsets().tolist() == t.offsets().tolist()
    else:
        for x in (e, t):
            with pytest.raises(RuntimeError, match="irregular and does not have a size"):
                x.size(1)
            with pytest.raises(RuntimeError, match="doesn't support sizes"):
                x.shape  # noqa: B018


@pytest.mark.parametrize("layout", [None, "jagged"])
def test_to_padded_tensor_matches_torch(layout):
    e, t = _nt(ember, layout), _nt(torch, layout)
    np.testing.assert_allclose(_np(ember.nested.to_padded_tensor(e, -1.0)),
                               _np(torch.nested.to_padded_tensor(t, -1.0)))
    if layout is None:     # torch's jagged layout takes no output_size
        np.testing.assert_allclose(_np(ember.nested.to_padded_tensor(e, 0.5, (3, 6, 4))),
                                   _np(torch.nested.to_padded_tensor(t, 0.5, (3, 6, 4))))


def test_elementwise_ops_match_torch():
    e, t = _nt(ember, "jagged"), _nt(torch, "jagged")
    for f in (lambda x: x + x, lambda x: x * 2, lambda x: 1 - x, lambda x: x.relu(),
              lambda x: x.sigmoid(), lambda x: (x * x).sqrt(), lambda x: x.softmax(-1),
              lambda x: -x / 3):
        for a, b in zip(f(e).unbind(), f(t).unbind()):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)


def test_gradients_through_nested():
    comps = [ember.tensor(p, requires_grad=True) for p in PARTS]
    tcomps = [torch.tensor(p, requires_grad=True) for p in PARTS]
    e = ember.nested.as_nested_tensor(comps, layout=ember.jagged)
    t = torch.nested.as_nested_tensor(tcomps, layout=torch.jagged)
    ep = ember.nested.to_padded_tensor((e * 3).sigmoid(), 0.0)
    tp = torch.nested.to_padded_tensor((t * 3).sigmoid(), 0.0)
    (ep ** 2).sum().backward()
    (tp ** 2).sum().backward()
    for a, b in zip(comps, tcomps):
        np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-6)


def test_from_jagged_matches_torch():
    values = R.normal(size=(7, 3))
    offsets = [0, 2, 3, 7]
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(values), ember.tensor(offsets))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(values), torch.tensor(offsets))
    for a, b in zip(e.unbind(), t.unbind()):
        np.testing.assert_allclose(_np(a), _np(b))
    assert e.offsets().tolist() == offsets


def test_construction_errors_match_torch():
    for t in (ember, torch):
        with pytest.raises(RuntimeError, match="must have the same dimension"):
            t.nested.nested_tensor([t.ones(2, 3), t.ones(3)])
