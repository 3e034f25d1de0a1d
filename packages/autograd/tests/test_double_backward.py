"""Second derivatives of ops whose backward is an op of its own (grid_sample), against torch
and gradgradcheck."""
from __future__ import annotations

import numpy as np
import pytest
from harness import compare, torch

import ember


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_double_backward(mode, padding, align):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 2, 4, 5))
    G = rng.uniform(-1.2, 1.2, (2, 3, 3, 2))     # some points outside: masked corners

    def run(t):
        x = t.tensor(X, requires_grad=True)
        grid = t.tensor(G, requires_grad=True)
        y = t.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding,
                                        align_corners=align)
        gx, gg = t.autograd.grad((y * y.detach().cos()).sum(), (x, grid), create_graph=True)
        hx, hg = t.autograd.grad((gx * gx).sum() + (gg.sin()).sum(), (x, grid),
                                 allow_unused=True)
        return gx, gg, hx, (hg if hg is not None else t.zeros_like(grid))
    compare(run(ember), run(torch), "float64", rtol=1e-6, atol=1e-9)


def test_grid_sample_gradgradcheck():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    grid = ember.tensor(rng.uniform(-0.9, 0.9, (1, 2, 2, 2)), requires_grad=True)
    f = lambda x, g: ember.nn.functional.grid_sample(x, g, align_corners=False)  # noqa: E731
    assert ember.autograd.gradgradcheck(f, (x, grid))
