"""ember.fft against torch.fft: values, dtypes, norm= modes, n/s/dim, gradients, errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


def _in(mod, a, grad=False):
    t = mod.tensor(a)
    return t.requires_grad_() if grad else t


def _loss(mod, out, w):
    if out.is_complex():
        return (out.real * mod.tensor(w.real)).sum() + (out.imag * mod.tensor(w.imag)).sum()
    return (out * mod.tensor(w.real)).sum()


def run(fn, a, grad=True, rtol=1e-7, atol=1e-9):
    """fn(mod, x) on ember and torch: compare outputs and (with grad) input gradients."""
    res = []
    for mod in (ember, torch):
        x = None if a is None else _in(mod, a, grad)
        out = fn(mod, x)
        g = None
        if grad:
            w = RNG.standard_normal(tuple(out.shape)) + 1j * RNG.standard_normal(tuple(out.shape))
            if mod is torch:  # the same weights for both
                w = res[0][2]
            (g,) = mod.autograd.grad(_loss(mod, out, w), x)
            g = _np(g)
        res.append((_np(out), str(out.dtype).split(".")[-1], w if grad else None, g))
    (eo, ed, _, eg), (to, td, _, tg) = res
    assert ed == td, (ed, td)
    assert eo.shape == to.shape, (eo.shape, to.shape)
    np.testing.assert_allclose(eo, to, rtol=rtol, atol=atol)
    if grad:
        np.testing.assert_allclose(eg, tg, rtol=rtol, atol=atol)


def _np(t):
    t = t.detach()
    return (t.resolve_conj() if hasattr(t, "resolve_conj") else t).numpy()


REAL = RNG.standard_normal((3, 6, 5))
CPLX = RNG.standard_normal((3, 6, 5)) + 1j * RNG.standard_normal((3, 6, 5))
NORMS = [None, "backward", "ortho", "forward"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_c2c_1d(name, norm):
    for kw in ({}, {"n": 4}, {"n": 9, "dim": 1}, {"dim": 0}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), CPLX)
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), REAL)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn"])
def test_c2c_nd(name, norm):
    for kw in ({}, {"s": (4, 7)}, {"dim": (0, 2)}, {"s": (2, 3), "dim": (2, 0)}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), CPLX)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["rfft", "ihfft"])
def test_r2c(name, norm):
    for kw in ({}, {"n": 4}, {"n": 8, "dim": 1}, {"dim": 0}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), REAL)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["rfft2", "rfftn"])
def test_r2c_nd(name, norm):
    for kw in ({}, {"s": (4, 7)}, {"dim": (0, 2)}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), REAL)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["irfft", "hfft"])
def test_c2r(name, norm):
    # gradients: PyTorch's c2r gradient assumes a Hermitian input; compare on any input
    for kw in ({}, {"n": 7}, {"n": 8, "dim": 1}, {"dim": 0}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), CPLX)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["irfft2", "irfftn"])
def test_c2r_nd(name, norm):
    for kw in ({}, {"s": (4, 7)}, {"s": (5, 4), "dim": (0, 1)}):
        run(lambda m, x: getattr(m.fft, name)(x, norm=norm, **kw), CPLX)


def test_float32_and_int_inputs():
    a = REAL.astype("float32")
    run(lambda m, x: m.fft.fft(x), a, rtol=1e-5, atol=1e-5)
    run(lambda m, x: m.fft.rfft2(x), a, rtol=1e-5, atol=1e-5)
    run(lambda m, x: m.fft.irfft(x), CPLX.astype("complex64"), rtol=1e-5, atol=1e-5)
    run(lambda m, x: m.fft.fft(x), np.arange(6), grad=False)


def test_helpers():
    for n, d in ((5, 1.0), (6, 0.5), (1, 2.0)):
        run(lambda m, x: m.fft.fftfreq(n, d), None, grad=False)
        run(lambda m, x: m.fft.rfftfreq(n, d), None, grad=False)
    run(lambda m, x: m.fft.fftfreq(4, dtype=m.float64), None, grad=False)
    for kw in ({}, {"dim": 1}, {"dim": (0, 2)}):
        run(lambda m, x: m.fft.fftshift(x, **kw), REAL)
        run(lambda m, x: m.fft.ifftshift(x, **kw), REAL)


def test_errors_match_torch():
    for mod in (ember, torch):
        x = mod.tensor(CPLX)
        with pytest.raises(RuntimeError):
            mod.fft.rfft(x)
        with pytest.raises(RuntimeError):
            mod.fft.fft(x, n=0)
        with pytest.raises(IndexError):
            mod.fft.fft(x, dim=3)
        with pytest.raises((RuntimeError, ValueError)):
            mod.fft.fft(x, norm="sideways")
        with pytest.raises(RuntimeError):
            mod.fft.fftn(x, s=(2, 2), dim=(0,))


def test_roundtrip_and_out():
    x = ember.randn(4, 8, dtype=ember.float64)
    np.testing.assert_allclose(ember.fft.irfft(ember.fft.rfft(x), 8).numpy(), x.numpy(),
                               atol=1e-12)
    out = ember.empty(4, 8, dtype=ember.complex128)
    ember.fft.fft(x, out=out)
    np.testing.assert_allclose(out.numpy(), np.fft.fft(x.numpy()), atol=1e-12)
