"""In-place addmv_/baddbmm_ into an expanded (stride-0) self, as PyTorch does them (its kernels
have no overlap check: aliased elements are written in row-major order), and the in-place
BLAS ops that PyTorch refuses there (addmm_, addbmm_, addr_)."""
import numpy as np
import pytest
import torch

import ember


def _mk(t, shape, dtype="float32"):
    n = int(np.prod(shape))
    return t.tensor(np.arange(n).reshape(shape) / 10 + 1).to(getattr(t, dtype))


ADDMV = [((1,), (3,)), ((), (3,))]
BADDBMM = [((1, 3, 4), (2, 3, 4)), ((1, 1, 4), (2, 3, 4)), ((1, 3, 1), (2, 3, 4)),
           ((1, 1, 1), (2, 3, 4)), ((2, 1, 4), (2, 3, 4))]
SCALARS = [(1, 1), (0, 1), (0.5, 2), (2, -1)]


def _run(t, name, base, shape, beta, alpha, dtype="float32"):
    s = t.full(base, 3.0, dtype=getattr(t, dtype)).expand(*shape)
    if name == "addmv_":
        r = s.addmv_(_mk(t, (3, 4), dtype), _mk(t, (4,), dtype), beta=beta, alpha=alpha)
    else:
        r = s.baddbmm_(_mk(t, (2, 3, 5), dtype), _mk(t, (2, 5, 4), dtype), beta=beta,
                       alpha=alpha)
    assert r is s
    return s.float().numpy(), tuple(s.stride())


@pytest.mark.parametrize("beta,alpha", SCALARS)
@pytest.mark.parametrize("name,base,shape", [("addmv_",) + c for c in ADDMV] +
                         [("baddbmm_",) + c for c in BADDBMM])
def test_expanded_self_written_in_order(name, base, shape, beta, alpha):
    e, es = _run(ember, name, base, shape, beta, alpha)
    t, ts = _run(torch, name, base, shape, beta, alpha)
    assert es == ts
    np.testing.assert_allclose(e, t, rtol=1e-6)


# (not float16: PyTorch's half gemv writes the aliased rows in another order, 2, 0, 1 for 3)
@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("bfloat16", 1e-2)])
def test_expanded_self_dtypes(dtype, rtol):
    e, _ = _run(ember, "addmv_", (1,), (3,), 0.5, 1, dtype)
    t, _ = _run(torch, "addmv_", (1,), (3,), 0.5, 1, dtype)
    np.testing.assert_allclose(e, t, rtol=rtol)


def test_expanded_self_integer():
    res = []
    for t in (ember, torch):
        s = t.full((1,), 3).expand(3)
        s.addmv_(t.arange(12).reshape(3, 4), t.arange(4), beta=2, alpha=3)
        res.append(s.numpy())
    np.testing.assert_array_equal(res[0], res[1])


def test_expanded_self_gradients():
    # PyTorch's gradients: each aliased element gets its memory location's whole gradient
    res = []
    for t in (ember, torch):
        m = _mk(t, (3, 4)).requires_grad_()
        v = _mk(t, (4,)).requires_grad_()
        s = t.full((1,), 3.0).expand(3)
        s.addmv_(m, v, beta=0.5, alpha=2)
        assert s.requires_grad
        (s * t.tensor([1.0, 2.0, 3.0])).sum().backward()
        res.append([s.detach().numpy(), m.grad.numpy(), v.grad.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_expanded_self_in_graph_forward():
    # self with a history: the forward values as PyTorch's (whose backward then refuses)
    res = []
    for t in (ember, torch):
        x = t.tensor([3.0], requires_grad=True)
        s = (x * 2).expand(3)
        s.addmv_(_mk(t, (3, 4)), _mk(t, (4,)), beta=0.5)
        res.append(s.detach().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda t, s: s.addmm_(_mk(t, (3, 5)), _mk(t, (5, 4))),
    lambda t, s: s.addbmm_(_mk(t, (2, 3, 5)), _mk(t, (2, 5, 4))),
    lambda t, s: s.addr_(_mk(t, (3,)), _mk(t, (4,))),
    lambda t, s: t.mm(_mk(t, (3, 5)), _mk(t, (5, 4)), out=s),
])
def test_refused_like_pytorch(call):
    msgs = []
    for t in (ember, torch):
        with pytest.raises(RuntimeError) as ei:
            call(t, t.zeros(1, 4).expand(3, 4))
        msgs.append(str(ei.value).split("\n")[0])
    assert msgs[0] == msgs[1]
