"""Reductions over a few very long rows split each row over many programs (then combine the
partials): the values must match the CPU's. On a GPU in-process, else on the fake device (a
subprocess: the environment must be set before triton is imported)."""
from cuda_script import run_script

SCRIPT = r"""
import math
import numpy as np, ember
from ember._device import get_backend
rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((2, 131072)).astype("float32"))
g = x.cuda()
be = get_backend("cuda")
before = dict(be.fallback_ops)
def close(a, b, k, tol=1e-4):
    a = a.float().numpy() if a.dtype.is_floating_point else a.numpy()
    b = b.cpu()
    b = b.float().numpy() if b.dtype.is_floating_point else b.numpy()
    assert np.allclose(a, b, rtol=tol, atol=tol), (k, a, b)
cases = [lambda t: t.norm(), lambda t: t.norm(1, 1), lambda t: t.norm(float("inf")),
         lambda t: t.norm(-math.inf, 1), lambda t: t.norm(0), lambda t: t.norm(3.5, 1),
         lambda t: t.logsumexp(1), lambda t: (t.double() * 1e-5 + 1).prod(1),
         lambda t: t.nansum(), lambda t: (t > -4).all(1), lambda t: (t > 4).any(),
         lambda t: ember.count_nonzero(t > 0, 1), lambda t: t.half().norm(),
         lambda t: t.var(), lambda t: t.std(1)]
for k, f in enumerate(cases):
    close(f(x), f(g), k)
    assert be.fallback_ops == before, (k, be.fallback_ops)
print("ok")
"""


def test_long_row_reductions():
    run_script(SCRIPT, "test_cuda_longrows", timeout=600)
