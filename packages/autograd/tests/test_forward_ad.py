"""ember.autograd.forward_ad against torch.autograd.forward_ad: tangents through pointwise ops,
reductions, views, matmul, cat, in-place ops, nn functions; errors and level handling."""
import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as efw

torch = pytest.importorskip("torch")
import torch.autograd.forward_ad as tfw  # noqa: E402

RNG = np.random.default_rng(2)

FNS = {
    "pointwise": lambda t, x, w: t.sin(x) * x.exp() / (1 + x * x),
    "reduce": lambda t, x, w: (x ** 3).sum(1) + x.mean() + x.amax(0).sum(),
    "views": lambda t, x, w: x.t().reshape(-1)[1:5].unsqueeze(0).expand(2, 4),
    "matmul": lambda t, x, w: t.tanh(x @ w),
    "cat": lambda t, x, w: t.cat([x, x * 2], 1).cumsum(0),
    "stack": lambda t, x, w: t.stack([x.sum(0), x.prod(0)]),
    "softmax": lambda t, x, w: t.log_softmax(x @ w, -1) * t.arange(5.0, dtype=x.dtype),
    "inplace": lambda t, x, w: x.clone().mul_(x).add_(1.5),
    "nn": lambda t, x, w: t.nn.functional.gelu(t.nn.functional.linear(x, w.t())),
    "norm": lambda t, x, w: t.nn.functional.layer_norm(x, (3,)) + x.norm(),
    "index": lambda t, x, w: x[t.tensor([0, 2])][:, 1] + x.gather(1, t.tensor([[0], [1], [2],
                                                                               [0]])).sum(),
}


def run(t, fw, name, xa, va, wa):
    with fw.dual_level():
        x = fw.make_dual(t.tensor(xa), t.tensor(va))
        y = FNS[name](t, x, t.tensor(wa))
        p, tan = fw.unpack_dual(y)
        return p.detach().numpy(), None if tan is None else tan.detach().numpy()


@pytest.mark.parametrize("name", sorted(FNS))
def test_tangents_match_torch(name):
    xa, va, wa = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)), \
        RNG.standard_normal((3, 5))
    ep, et = run(ember, efw, name, xa, va, wa)
    tp, tt = run(torch, tfw, name, xa, va, wa)
    np.testing.assert_allclose(ep, tp, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(et, tt, rtol=1e-7, atol=1e-9)


def test_no_tangent_and_levels():
    with efw.dual_level():
        x = ember.ones(3)
        assert efw.unpack_dual(x * 2).tangent is None
        d = efw.make_dual(ember.ones(3), ember.full((3,), 2.0))
        y = d * 3
        assert efw.unpack_dual(y).tangent.tolist() == [6.0, 6.0, 6.0]
    # outside the level the tangent is gone
    assert efw.unpack_dual(y).tangent is None
    with pytest.raises(RuntimeError):
        efw.make_dual(ember.ones(2), ember.ones(2))
    with efw.dual_level():
        with pytest.raises(RuntimeError, match="size"):
            efw.make_dual(ember.ones(2), ember.ones(3))
        with pytest.raises(ValueError):
            efw.make_dual(ember.ones(2, dtype=ember.int64), ember.ones(2))
    with tfw.dual_level():
        with pytest.raises(RuntimeError):
            tfw.make_dual(torch.ones(2), torch.ones(3))


def test_forward_over_reverse():
    # a Hessian-vector product: forward-mode tangent of a reverse-mode gradient
    xa, va = RNG.standard_normal(4), RNG.standard_normal(4)
    out = []
    for t, fw in ((ember, efw), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(t.tensor(xa).requires_grad_(), t.tensor(va))
            y = (x.sin() * x).sum()
            (g,) = t.autograd.grad(y, x, create_graph=True)
            out.append(fw.unpack_dual(g).tangent.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-7, atol=1e-9)


def test_grad_roots_two_outputs_of_one_node():
    # autograd.grad with two outputs of one graph node as roots (as double-vjp passes them)
    # equals the gradient through one scalar root
    xa, ga = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    x = ember.tensor(xa, requires_grad=True)
    out, mean, _ = ember.native_layer_norm(x, [3], None, None, 1e-5)
    (g2,) = ember.autograd.grad([out, mean], x, [ember.tensor(ga), ember.ones_like(mean)],
                                retain_graph=True)
    (g1,) = ember.autograd.grad((out * ember.tensor(ga)).sum() + mean.sum(), x)
    np.testing.assert_allclose(g2.numpy(), g1.numpy(), rtol=1e-9, atol=1e-12)
