"""Tensor repr matches PyTorch's text (with 'torch' read as 'ember')."""
import pytest
from harness import torch

import ember

CASES = [
    "t.tensor([[1., 2.], [3., 4.]])",
    "t.tensor([1.5, 2.25, -3.0])",
    "t.tensor(3.5)",
    "t.tensor([1, 2, 3])",
    "t.tensor([True, False])",
    "t.tensor([1e-5, 1.0, 3e5])",
    "t.tensor([0.1, 0.2], dtype=t.float64)",
    "t.zeros(0, 3)",
    "t.zeros(0)",
    "t.tensor([float('nan'), float('inf'), -1.0, 2.5])",
    "t.arange(2000)",
    "t.arange(24).reshape(2, 3, 4)",
    "t.tensor([1, 2], dtype=t.int32)",
    "t.tensor([[1e10, 1.]])",
    "t.arange(30.) / 7",
    "t.tensor([1.0, 2.0], requires_grad=True)",
    "t.tensor([0.0, 0.0])",
    "t.tensor([-1., 2.])",
    "t.tensor(2.0, dtype=t.bfloat16)",
    "t.ones(200, 200)",
    "t.ones(2, 3, 4, 5) * -0.5",
]


@pytest.mark.parametrize("expr", CASES)
def test_repr_matches_torch(expr):
    want = repr(eval(expr, {"t": torch})).replace("torch", "ember")
    got = repr(eval(expr, {"t": ember}))
    assert got == want


def test_printoptions_precision():
    try:
        ember.set_printoptions(precision=2)
        torch.set_printoptions(precision=2)
        x = [1.23456, 2.5]
        assert repr(ember.tensor(x)) == repr(torch.tensor(x))
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


@pytest.mark.parametrize("expr", ["t.arange(10**5) * 0.5", "t.ones(300, 400, dtype=t.int32)",
                                  "t.zeros(7, 5000, 3).bool()", "t.arange(4000).reshape(2, 2000)"])
@pytest.mark.parametrize("edgeitems", [3, 1])
def test_summarized_repr_formats_only_the_edges(expr, edgeitems, monkeypatch):
    """A summarized tensor formats only the values shown, not every element first."""
    from ember import _printing
    calls = []
    fmt = _printing._Formatter.format
    monkeypatch.setattr(_printing._Formatter, "format", lambda self, x: calls.append(x) or
                        fmt(self, x))
    try:
        ember.set_printoptions(edgeitems=edgeitems)
        torch.set_printoptions(edgeitems=edgeitems)
        e, t = eval(expr, {"t": ember}), eval(expr, {"t": torch})
        assert repr(e) == repr(t).replace("torch", "ember")
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
    shown = 1
    for n in e.shape:
        shown *= min(n, 2 * edgeitems)
    assert len(calls) == shown


def test_repr_of_a_huge_expanded_tensor():
    for shape in [(10**8,), (10**4, 10**4), (3, 10**8)]:
        want = repr(torch.zeros(1).expand(*shape)).replace("torch", "ember")
        assert repr(ember.zeros(1).expand(*shape)) == want


@pytest.mark.parametrize("expr", ["t.arange(12, dtype=t.float16).reshape(2, 6) / 7",
                                  "t.arange(5000, dtype=t.float16) / 3",
                                  "t.ones(2, 9, dtype=t.int32) * 123456",
                                  "t.arange(20.0).reshape(2, 10).requires_grad_() * 2",
                                  "t.arange(3000.0).reshape(30, 100).to(t.float64)"])
@pytest.mark.parametrize("opts", [{}, {"edgeitems": 5}, {"edgeitems": 0}, {"linewidth": 40}])
def test_suffixes_wrap_and_sizes_as_torch(expr, opts):
    """A suffix that would pass the line width starts a new line; edgeitems=0 names the size."""
    try:
        ember.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        want = repr(eval(expr, {"t": torch})).replace("torch", "ember")
        assert repr(eval(expr, {"t": ember})) == want
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


@pytest.mark.parametrize("expr", [
    "t.zeros(30)", "t.zeros(3, 40, dtype=t.float64)", "t.tensor([0.0] * 30 + [float('nan')])",
    "t.tensor([1.0, float('inf')])", "t.tensor([float('-inf'), 0.0])",
    "t.tensor([-1.5, 200.25])", "t.tensor([-0.5, 123.25])", "t.tensor([-3.0, -1e-120, 5.0])",
    "t.tensor([-1e120, 5.0], dtype=t.float64)", "t.tensor([1e-5, 1e5, -7.0])",
    "t.tensor([1 + 2j, -3.5 - 0.25j])", "t.tensor(2 - 1j)", "t.tensor([1e-5 + 1j, 3e5 - 2j])",
    "t.zeros(2, dtype=t.complex64)", "t.arange(2000).to(t.complex64) / 3",
    "(t.arange(6.0) / 7).reshape(2, 3).to(t.complex128) * (1 - 2j)"])
def test_widths_and_complex_parts_as_torch(expr):
    """Widths come from the nonzero finite values; complex parts get a formatter each."""
    want = repr(eval(expr, {"t": torch})).replace("torch", "ember")
    assert repr(eval(expr, {"t": ember})) == want
