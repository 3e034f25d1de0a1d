"""Ops that used to run their CPU kernel on host copies of cuda tensors and now run on the GPU:
complex tensors through their (re, im) float views (copies, fills, constant_pad_nd, zeros,
slice_scatter, conj_physical, complex products: imag's gradient), the orthogonal polynomials
of torch.special (Triton recurrences), the modified Bessel I_0/I_1, K_0/K_1 (plain and
scaled) and spherical_bessel_j0 (now a pointwise formula in core), and ctc_loss forward and
backward (Triton alpha/beta recursions). Each script checks values against the CPU and PyTorch,
and that no call took host copies (`fallback_ops` stays empty).

Without a GPU the scripts run on the fake device (host memory + Triton's interpreter) in a
subprocess, as the other family scripts.
"""
from cuda_script import run_script

_PRELUDE = r"""
import numpy as np, torch, ember
import ember.autograd
from ember._device import get_backend
be = get_backend("cuda")
def same(e, g, t=None, tol=1e-6):
    g = g.detach().cpu()
    assert e.dtype == g.dtype and tuple(e.shape) == tuple(g.shape), (e, g)
    assert np.allclose(g.numpy(), e.detach().numpy(), rtol=tol, atol=tol, equal_nan=True), (e, g)
    if t is not None:
        assert np.allclose(g.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-4,
                           equal_nan=True), (t, g)
"""

COMPLEX = _PRELUDE + r"""
rng = np.random.default_rng(0)
a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype("complex64")
r = rng.standard_normal((4,)).astype("float32")
x, xr, tx, tr = ember.tensor(a), ember.tensor(r), torch.tensor(a), torch.tensor(r)
g, gr = x.cuda(), xr.cuda()
F, TF = ember.nn.functional, torch.nn.functional
same(F.pad(x, (1, 2, 0, 1)), F.pad(g, (1, 2, 0, 1)), TF.pad(tx, (1, 2, 0, 1)))
same(F.pad(x, (1, 1), value=2.5), F.pad(g, (1, 1), value=2.5), TF.pad(tx, (1, 1), value=2.5))
same(ember.zeros(2, 3, dtype=ember.complex128),
     ember.zeros(2, 3, dtype=ember.complex128, device="cuda"))
same(ember.full((2,), 1 - 2j), ember.full((2,), 1 - 2j, device="cuda"),
     torch.full((2,), 1 - 2j))
same(ember.slice_scatter(x, x[:1] * 2, 0, 1, 2), ember.slice_scatter(g, g[:1] * 2, 0, 1, 2),
     torch.slice_scatter(tx, tx[:1] * 2, 0, 1, 2))
same(x.conj_physical(), g.conj_physical(), tx.conj_physical())
same(x[:, ::2].conj_physical(), g[:, ::2].conj_physical(), tx[:, ::2].conj_physical())
for e, c, t in [(x * 1j, g * 1j, tx * 1j), (x * xr, g * gr, tx * tr), (xr * x, gr * g, tr * tx),
                (x * x, g * g, tx * tx), (x * (2 - 1j), g * (2 - 1j), tx * (2 - 1j)),
                (x.to(ember.complex128) * xr, g.to(ember.complex128) * gr,
                 tx.to(torch.complex128) * tr)]:
    same(e, c, t)
out = ember.empty(3, 4, dtype=ember.complex64, device="cuda")
out.copy_(g.to(ember.complex128))      # complex128 -> complex64
same(x, out)
out.copy_(gr)                          # real -> complex: imaginary part 0
same(xr.to(ember.complex64).expand(3, 4), out)
y = g.clone().requires_grad_()
(y.imag * gr).sum().backward()         # imag's gradient: g * 1j
ty = tx.clone().requires_grad_()
(ty.imag * tr).sum().backward()
same(ember.tensor(ty.grad.numpy()), y.grad, ty.grad)
assert not be.fallback_ops, be.fallback_ops
print("OK")
"""

POLYNOMIALS = _PRELUDE + r"""
rng = np.random.default_rng(1)
xs = rng.uniform(-1.5, 1.5, (4, 5)).astype("float32")
ns = np.array([-1, 0, 1, 2, 3, 7.5, 12, float("nan")])
x = ember.tensor(xs)
names = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p"]
for nm in names:
    f, tf = getattr(ember.special, nm), getattr(torch.special, nm)
    for n in (3, 0, ember.tensor(ns[:5])):
        gn = n.cuda() if isinstance(n, ember.Tensor) else n
        tn = torch.tensor(n.numpy()) if isinstance(n, ember.Tensor) else n
        same(f(x, n), f(x.cuda(), gn), tf(torch.tensor(xs), tn))
    x64, n64 = ember.tensor(0.3, dtype=ember.float64), ember.tensor(ns)
    same(f(x64, n64), f(x64, n64.cuda()), tol=1e-12)       # a host 0-d x, NaN and fractional n
    ni = ember.tensor([0, 2, 5])
    same(f(x[:1, :3], ni), f(x[:1, :3].cuda(), ni.cuda()))  # integer n, a strided x
assert not be.fallback_ops, be.fallback_ops
print("OK")
"""

BESSEL = _PRELUDE + r"""
a = np.concatenate([np.linspace(-40, 40, 161), [0.0, 1e-6, -1e-3, 0.75, 29.9, 30.1, 300.0,
                                                -300.0, 800.0, np.inf, -np.inf, np.nan]])
for nm in ("i0", "i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1",
           "spherical_bessel_j0"):
    f, tf = getattr(ember.special, nm), getattr(torch.special, nm)
    for arr, tol in ((a, 1e-13), (a.astype("float32"), 1e-6), (np.array([1, 0, -3]), 1e-6)):
        x = ember.tensor(arr)
        same(f(x), f(x.cuda()), tol=tol)
        same(f(x[::3]), f(x.cuda()[::3]), tol=tol)           # a strided input
    ok = np.abs(a) < 30                                      # torch: float64 i0 values there
    same(f(ember.tensor(a[ok])), f(ember.tensor(a[ok]).cuda()), tf(torch.tensor(a[ok])),
         tol=1e-13)
# K: core's numerics (trapezoid rule, Hankel expansion from x = 20) matched to 1e-13, and torch
pos = np.concatenate([np.linspace(1e-4, 45, 44), [19.99, 20.0, 90.0, 300.0, 700.0, 720.0,
                                                  0.0, -1.0, 1e-3, np.inf, np.nan]])
for nm in ("modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1"):
    f, tf = getattr(ember.special, nm), getattr(torch.special, nm)
    for arr, tol in ((pos, 1e-13), (pos.astype("float32"), 1e-6), (np.array([1, 0, 3]), 1e-6)):
        same(f(ember.tensor(arr)), f(ember.tensor(arr).cuda()), tol=tol)
    same(f(ember.tensor(pos[:50])), f(ember.tensor(pos[:50]).cuda()), tf(torch.tensor(pos[:50])),
         tol=1e-13)   # (x <= 720: finite values; 0 and beyond: the edges, CPU vs cuda above)
x = ember.tensor(np.linspace(-3, 3, 7), requires_grad=True)  # i0's gradient is i1
ember.special.i0(x.cuda()).sum().backward()
same(ember.special.i1(x.detach()), x.grad.cuda())
assert not be.fallback_ops, be.fallback_ops
print("OK")
"""

CTC = _PRELUDE + r"""
F, TF = ember.nn.functional, torch.nn.functional
rng = np.random.default_rng(2)
T, N, C = 7, 4, 6
tg2 = np.array([[1, 1, 0], [0, 0, 0], [2, 3, 2], [4, 5, 4]])
tls, ils = [2, 0, 3, 3], [7, 4, 5, 2]            # the last sample is impossible (3 labels, 2 steps)
for dt, tol in (("float64", 1e-10), ("float32", 2e-5)):
    lp = torch.tensor(rng.standard_normal((T, N, C))).log_softmax(2).to(getattr(torch, dt))
    for tg in (tg2, np.concatenate([tg2[i, :tls[i]] for i in range(N)])):   # padded, concatenated
        for red in ("none", "mean", "sum"):
            for zi in (False, True):
                got = []
                for dev in ("cpu", "cuda"):
                    x = ember.tensor(lp.numpy()).to(dev).requires_grad_()
                    loss = F.ctc_loss(x, ember.tensor(tg).to(dev), ils, tls, reduction=red,
                                      zero_infinity=zi)
                    loss.sum().backward()
                    got.append((loss, x.grad))
                tx = lp.clone().requires_grad_()
                tloss = TF.ctc_loss(tx, torch.tensor(tg), ils, tls, reduction=red,
                                    zero_infinity=zi)
                tloss.sum().backward()
                same(got[0][0], got[1][0], tloss if zi else None, tol=tol)
                same(got[0][1], got[1][1], tx.grad if zi else None, tol=tol)
assert not be.fallback_ops, be.fallback_ops
print("OK")
"""


def test_complex_tensors_on_the_gpu():
    run_script(COMPLEX, "test_cuda_host_bounces_complex", timeout=600)


def test_special_polynomials_on_the_gpu():
    run_script(POLYNOMIALS, "test_cuda_host_bounces_poly", timeout=600)


def test_modified_bessel_on_the_gpu():
    run_script(BESSEL, "test_cuda_host_bounces_bessel", timeout=600)


def test_ctc_loss_on_the_gpu():
    run_script(CTC, "test_cuda_host_bounces_ctc", timeout=600)
