"""ember.func's autograd transforms against torch.func: grad, grad_and_value, vjp, jvp, jacrev,
jacfwd, hessian (alone, nested and under vmap), functional_call, stack_module_state."""
import numpy as np
import pytest

import ember
import ember.func

torch = pytest.importorskip("torch")
import torch.func  # noqa: E402

RNG = np.random.default_rng(1)


def arr(*shape):
    return RNG.standard_normal(shape)


def compare(e, t, tol=1e-6):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            compare(a, b, tol)
        return
    if isinstance(t, dict):
        assert set(e) == set(t)
        for k in t:
            compare(e[k], t[k], tol)
        return
    assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def run(make, *arrays):
    """make(t) -> a callable on t's tensors; compare ember's and torch's results."""
    e = make(ember)(*[ember.tensor(a) for a in arrays])
    t = make(torch)(*[torch.tensor(a) for a in arrays])
    compare(e, t)
    return e


def f_scalar(t):
    return lambda x, y: (t.sin(x) * y).sum() + (x * x * y).mean()


def f_vec(t):
    return lambda x, y: t.tanh(x @ y) * x.sum()


def test_grad_argnums_and_value():
    run(lambda t: t.func.grad(f_scalar(t)), arr(3), arr(3))
    run(lambda t: t.func.grad(f_scalar(t), argnums=(0, 1)), arr(3), arr(3))
    run(lambda t: t.func.grad_and_value(f_scalar(t), argnums=1), arr(2, 3), arr(2, 3))


def test_grad_has_aux_and_errors():
    def g(t):
        return t.func.grad(lambda x: ((x ** 2).sum(), x.mean()), has_aux=True)
    run(g, arr(4))
    with pytest.raises(RuntimeError, match="scalar"):
        ember.func.grad(lambda x: x * 2)(ember.ones(3))
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda x: x * 2)(torch.ones(3))


def test_nested_grad():
    run(lambda t: t.func.grad(lambda x: t.func.grad(lambda y: (y ** 3).sum())(x).sum()), arr(4))


def test_vjp_and_jvp():
    def vjp_case(t):
        def go(x, y, ct):
            out, fn = t.func.vjp(f_vec(t), x, y)
            return (out,) + tuple(fn(ct))
        return go
    run(vjp_case, arr(4, 3), arr(3, 2), arr(4, 2))

    def jvp_case(t):
        return lambda x, y, tx, ty: t.func.jvp(f_vec(t), (x, y), (tx, ty))
    run(jvp_case, arr(4, 3), arr(3, 2), arr(4, 3), arr(3, 2))


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians(jac):
    run(lambda t: getattr(t.func, jac)(f_vec(t)), arr(2, 3), arr(3, 2))
    run(lambda t: getattr(t.func, jac)(f_vec(t), argnums=(0, 1)), arr(2, 3), arr(3, 2))
    run(lambda t: getattr(t.func, jac)(lambda x: (x.exp(), x.sum())), arr(3))


def test_hessian():
    run(lambda t: t.func.hessian(lambda x: (x.sin() * x.sum()).sum()), arr(4))
    run(lambda t: t.func.hessian(f_scalar(t), argnums=1), arr(3), arr(3))


def test_under_vmap():
    # per-sample gradients, jacobians and hessians
    run(lambda t: t.func.vmap(t.func.grad(f_scalar(t)), in_dims=(0, None)), arr(5, 3), arr(3))
    run(lambda t: t.func.vmap(t.func.grad(f_scalar(t), argnums=1), in_dims=(0, None)),
        arr(5, 3), arr(3))
    run(lambda t: t.func.vmap(t.func.jacrev(lambda x: x.sin() * x.sum())), arr(4, 3))
    run(lambda t: t.func.vmap(t.func.jacfwd(lambda x: x.sin() * x.sum())), arr(4, 3))
    run(lambda t: t.func.vmap(t.func.hessian(lambda x: (x.sin() * x.sum()).sum())), arr(4, 3))
    run(lambda t: t.func.grad(lambda x: t.func.vmap(lambda r: (r ** 3).sum())(x).sum()),
        arr(4, 3))


def test_per_sample_grads_with_functional_call():
    em = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Tanh(), ember.nn.Linear(4, 2))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for (n, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    x, y = arr(6, 3).astype("float32"), RNG.integers(0, 2, size=6)

    def per_sample(t, m, xs, ys):
        params = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p, xi, yi):
            out = t.func.functional_call(m, p, (xi.unsqueeze(0),))
            return t.nn.functional.cross_entropy(out, yi.unsqueeze(0))
        return t.func.vmap(t.func.grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    e = per_sample(ember, em, ember.tensor(x), ember.tensor(y))
    t = per_sample(torch, tm, torch.tensor(x), torch.tensor(y))
    compare(e, t, tol=1e-5)
    # the module's own parameters are back in place
    assert all(isinstance(p, ember.nn.Parameter) for p in em.parameters())


def test_functional_call_and_stack_module_state():
    lin = ember.nn.Linear(3, 2)
    w, b = ember.ones(2, 3), ember.zeros(2)
    out = ember.func.functional_call(lin, {"weight": w, "bias": b}, (ember.ones(1, 3),))
    assert out.tolist() == [[3.0, 3.0]]
    out2 = ember.nn.utils.stateless.functional_call(lin, ({"weight": w}, {"bias": b}),
                                                   ember.ones(1, 3))
    assert out2.tolist() == [[3.0, 3.0]]
    with pytest.raises(RuntimeError, match="Missing"):
        ember.func.functional_call(lin, {"weight": w}, (ember.ones(1, 3),), strict=True)
    models = [ember.nn.Linear(3, 2) for _ in range(4)]
    params, bufs = ember.func.stack_module_state(models)
    assert params["weight"].shape == (4, 2, 3) and params["weight"].requires_grad
    assert params["weight"].is_leaf and bufs == {}
    x = ember.randn(5, 3)

    def one(p, xi):
        return ember.func.functional_call(models[0], p, (xi,))
    ens = ember.func.vmap(one, in_dims=(0, None))(params, x)
    for k, m in enumerate(models):
        np.testing.assert_allclose(ens[k].detach().numpy(), m(x).detach().numpy(), rtol=1e-6,
                                   atol=1e-6)
