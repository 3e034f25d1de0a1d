"""nn.utils.parametrize, nn.utils.parametrizations (weight_norm, spectral_norm, orthogonal) and
the legacy weight_norm / spectral_norm hooks against torch: values, gradients, state dicts."""
import warnings

import numpy as np
import pytest
from harness import torch

import ember

RNG = np.random.default_rng(0)


def _np(t):
    return t.detach().numpy().copy()


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(a) if not isinstance(a, np.ndarray) else a,
                               _np(b) if not isinstance(b, np.ndarray) else b,
                               rtol=rtol, atol=atol)


def _pair(factory, *shape_args):
    """The same module built in ember and torch with one set of random weights."""
    mods = []
    state = None
    for t in (ember, torch):
        m = getattr(t.nn, factory)(*shape_args)
        if state is None:
            state = {k: RNG.normal(size=tuple(v.shape)).astype("float32")
                     for k, v in m.state_dict().items()}
        m.load_state_dict({k: t.tensor(v) for k, v in state.items()})
        mods.append(m)
    return mods


def _sym(t):
    class Symmetric(t.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):
            return A.triu()
    return Symmetric()


def _double(t):
    class Double(t.nn.Module):
        def forward(self, X):
            return 2 * X
    return Double()


def test_register_parametrization_matches_torch():
    em, tm = _pair("Linear", 3, 3)
    x = RNG.normal(size=(4, 3)).astype("float32")
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrize.register_parametrization(m, "weight", _sym(t))
        t.nn.utils.parametrize.register_parametrization(m, "weight", _double(t))
    assert type(em).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert ember.nn.utils.parametrize.type_before_parametrizations(em) is ember.nn.Linear
    assert ember.nn.utils.parametrize.is_parametrized(em, "weight")
    assert not ember.nn.utils.parametrize.is_parametrized(em, "bias")
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    _close(em.weight, tm.weight)
    ey, ty = em(ember.tensor(x)), tm(torch.tensor(x))
    _close(ey, ty)
    ey.square().sum().backward()
    ty.square().sum().backward()
    _close(em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]


def test_assignment_goes_through_right_inverse():
    em, tm = _pair("Linear", 3, 3)
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrize.register_parametrization(m, "weight", _sym(t))
    orig = em.parametrizations.weight.original
    value = RNG.normal(size=(3, 3)).astype("float32")
    em.weight = ember.tensor(value)
    tm.weight = torch.tensor(value)
    assert em.parametrizations.weight.original is orig          # same Parameter object
    _close(em.parametrizations.weight.original, tm.parametrizations.weight.original)
    _close(em.weight, tm.weight)


def test_cached():
    m = ember.nn.Linear(3, 3)
    ember.nn.utils.parametrize.register_parametrization(m, "weight", _sym(ember))
    assert m.weight is not m.weight
    with ember.nn.utils.parametrize.cached():
        w = m.weight
        assert m.weight is w
    assert m.weight is not w


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_matches_torch(leave):
    em, tm = _pair("Linear", 3, 3)
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrize.register_parametrization(m, "weight", _double(t))
        t.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert type(em) is ember.nn.Linear and not hasattr(em, "parametrizations")
    assert isinstance(em.weight, ember.nn.Parameter)
    _close(em.weight, tm.weight)
    assert sorted(em.state_dict()) == ["bias", "weight"]


def test_parametrize_errors_match_torch():
    for t in (ember, torch):
        P = t.nn.utils.parametrize

        class Shrink(t.nn.Module):
            def forward(self, X):
                return X[:-1]
        with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
            P.register_parametrization(t.nn.Linear(2, 2), "nope", _double(t))
        with pytest.raises(ValueError, match="may not change the shape"):
            P.register_parametrization(t.nn.Linear(2, 2), "weight", Shrink())
        P.register_parametrization(t.nn.Linear(2, 2), "weight", Shrink(), unsafe=True)
        with pytest.raises(ValueError, match="does not have a parametrization on"):
            P.remove_parametrizations(t.nn.Linear(2, 2), "weight")
        m = P.register_parametrization(t.nn.Linear(2, 2), "weight", _double(t))
        with pytest.raises(RuntimeError, match="does not implement right_inverse"):
            m.weight = t.zeros(2, 2)
        with pytest.raises(RuntimeError, match="Serialization of parametrized modules"):
            m.__getstate__()


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_matches_torch(dim):
    em, tm = _pair("Linear", 4, 3)
    x = RNG.normal(size=(5, 4)).astype("float32")
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrizations.weight_norm(m, dim=dim)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    for k in tm.state_dict():
        _close(em.state_dict()[k], tm.state_dict()[k])
    ey, ty = em(ember.tensor(x)), tm(torch.tensor(x))
    _close(ey, ty)
    ey.sum().backward()
    ty.sum().backward()
    for i in (0, 1):
        _close(getattr(em.parametrizations.weight, f"original{i}").grad,
               getattr(tm.parametrizations.weight, f"original{i}").grad, atol=1e-5)


def test_weight_norm_loads_legacy_checkpoint():
    legacy = ember.nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ember.nn.utils.weight_norm(legacy)
    sd = legacy.state_dict()
    assert sorted(sd) == ["bias", "weight_g", "weight_v"]
    m = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(3, 2))
    m.load_state_dict(sd)
    _close(m.weight, legacy.weight)


def _copy_buffers(em, tm, names):
    for n in names:
        em.get_buffer(n).copy_(ember.tensor(_np(tm.get_buffer(n))))


@pytest.mark.parametrize("factory,args", [("Linear", (4, 3)), ("Conv2d", (2, 3, 2)),
                                          ("ConvTranspose2d", (2, 3, 2))])
def test_spectral_norm_parametrization_matches_torch(factory, args):
    em, tm = _pair(factory, *args)
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrizations.spectral_norm(m)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    # u and v start random (different generators): take torch's
    _copy_buffers(em, tm, ["parametrizations.weight.0._u", "parametrizations.weight.0._v"])
    for _ in range(3):                                  # power iteration at each training call
        _close(em.weight, tm.weight, rtol=1e-4, atol=1e-5)
    _close(em.parametrizations.weight[0]._u, tm.parametrizations.weight[0]._u, atol=1e-5)
    em.eval()
    tm.eval()
    _close(em.weight, tm.weight, rtol=1e-4, atol=1e-5)
    em.weight.square().sum().backward()
    tm.weight.square().sum().backward()
    _close(em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad,
           rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("omap,shape,triv", [("matrix_exp", (4, 4), True),
                                             ("cayley", (4, 4), True),
                                             ("householder", (4, 4), True),
                                             ("householder", (5, 3), False),
                                             ("householder", (3, 5), False)])
def test_orthogonal_matches_torch(omap, shape, triv):
    em, tm = _pair("Linear", shape[1], shape[0])
    x = RNG.normal(size=(2, shape[1])).astype("float32")
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap,
                                               use_trivialization=triv)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    _close(em.weight, tm.weight, atol=1e-5)
    ey, ty = em(ember.tensor(x)), tm(torch.tensor(x))
    ey.square().sum().backward()
    ty.square().sum().backward()
    eg, tg = em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad
    _close(eg, tg, rtol=1e-4, atol=1e-5)
    with ember.no_grad():
        em.parametrizations.weight.original.sub_(0.3 * eg)
    with torch.no_grad():
        tm.parametrizations.weight.original.sub_(0.3 * tg)
    _close(em.weight, tm.weight, rtol=1e-4, atol=1e-5)
    w = _np(em.weight)
    g = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(g, np.eye(min(shape)), atol=1e-5)


def test_orthogonal_random_completion_is_orthogonal():
    m = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 5))   # householder
    w = _np(m.weight)
    np.testing.assert_allclose(w.T @ w, np.eye(3), atol=1e-5)
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), orthogonal_map="x")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), "bias")


def test_legacy_weight_norm_matches_torch():
    em, tm = _pair("Linear", 4, 3)
    x = RNG.normal(size=(5, 4)).astype("float32")
    for t, m in ((ember, em), (torch, tm)):
        with pytest.warns(FutureWarning, match="weight_norm` is deprecated"):
            t.nn.utils.weight_norm(m, dim=1)
    assert sorted(em.state_dict()) == sorted(tm.state_dict()) == ["bias", "weight_g",
                                                                    "weight_v"]
    _close(em.weight_g, tm.weight_g)
    ey, ty = em(ember.tensor(x)), tm(torch.tensor(x))
    _close(ey, ty)
    ey.sum().backward()
    ty.sum().backward()
    _close(em.weight_g.grad, tm.weight_g.grad, atol=1e-5)
    _close(em.weight_v.grad, tm.weight_v.grad, atol=1e-5)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        ember.nn.utils.weight_norm(em, dim=1)
    ember.nn.utils.remove_weight_norm(em)
    torch.nn.utils.remove_weight_norm(tm)
    assert sorted(em.state_dict()) == ["bias", "weight"]
    _close(em.weight, tm.weight)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        ember.nn.utils.remove_weight_norm(em)


def test_legacy_spectral_norm_matches_torch():
    em, tm = _pair("Linear", 4, 3)
    x = RNG.normal(size=(5, 4)).astype("float32")
    for t, m in ((ember, em), (torch, tm)):
        t.nn.utils.spectral_norm(m)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    _copy_buffers(em, tm, ["weight_u", "weight_v"])
    for _ in range(3):
        ey, ty = em(ember.tensor(x)), tm(torch.tensor(x))
        _close(ey, ty, rtol=1e-4, atol=1e-5)
    _close(em.weight_u, tm.weight_u, atol=1e-5)
    ey.sum().backward()
    ty.sum().backward()
    _close(em.weight_orig.grad, tm.weight_orig.grad, rtol=1e-4, atol=1e-5)
    ember.nn.utils.remove_spectral_norm(em)
    torch.nn.utils.remove_spectral_norm(tm)
    assert sorted(em.state_dict()) == ["bias", "weight"]
    _close(em.weight, tm.weight, rtol=1e-4, atol=1e-5)
