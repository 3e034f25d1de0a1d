"""foreach / fused / capturable flags of Adam, AdamW and SGD on CPU: accepted with PyTorch's
values (CPU has no multi-tensor kernels: the per-parameter path runs) and PyTorch's errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

OPTS = {
    "adam": lambda L, ps, **k: L.optim.Adam(ps, lr=0.05, weight_decay=0.1, amsgrad=True, **k),
    "adamw": lambda L, ps, **k: L.optim.AdamW(ps, lr=0.05, maximize=True, **k),
    "sgd": lambda L, ps, **k: L.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, **k),
}


def _run(lib, make, **kw):
    rng = np.random.default_rng(0)
    ps = [lib.tensor(rng.standard_normal(s).astype(np.float32)).requires_grad_()
          for s in ((3, 4), (4,))]
    opt = make(lib, ps, **kw)
    for _ in range(3):
        for p in ps:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        opt.step()
    return [p.detach().numpy() for p in ps], opt


@pytest.mark.parametrize("name", sorted(OPTS))
@pytest.mark.parametrize("kw", [{"foreach": True}, {"fused": True}, {"foreach": False}])
def test_flags_give_torch_values_on_cpu(name, kw):
    want, topt = _run(torch, OPTS[name], **kw)
    got, eopt = _run(ember, OPTS[name], **kw)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if name != "sgd":  # a fused group's step counter: float32 on the parameter's device
        ts = topt.state[topt.param_groups[0]["params"][0]]["step"]
        es = eopt.state[eopt.param_groups[0]["params"][0]]["step"]
        assert es.item() == ts.item() and str(es.dtype)[6:] == str(ts.dtype)[6:]


def test_flag_errors_match_torch():
    for lib in (ember, torch):
        w = lib.zeros(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            lib.optim.AdamW([w], fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            lib.optim.SGD([w], fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            lib.optim.Adam([w], fused=True, differentiable=True)
        opt = lib.optim.Adam([w], capturable=True)
        w.grad = lib.ones(2)
        with pytest.raises(AssertionError, match="If capturable=True, params and state_steps"):
            opt.step()
