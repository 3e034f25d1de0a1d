"""Worker (mpiexec, 2 ranks): functional collectives inside ember.compile with its default
backend (compiled kernels around the collectives, which start asynchronously and are waited
for by the captured graph's wait_tensor nodes), against eager and numpy."""
import datetime

import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.distributed._functional_collectives as funcol
from ember.distributed._async_tensor import AsyncCollectiveTensor, pending

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
R, N = dist.get_rank(), dist.get_world_size()
G = dist.new_group(list(range(N)))


def f(x):
    y = funcol.all_reduce(x * 2, "sum", G)  # no explicit wait: the capture adds one
    z = funcol.all_gather_tensor(y.relu() + 1, 0, G)
    w = funcol.reduce_scatter_tensor(z * 3, "sum", 0, G)
    return w.sum(0) - 1


def want(x_of):
    y = sum(2 * x_of(r) for r in range(N))
    z = np.concatenate([np.maximum(y, 0) + 1] * N)
    return (N * 3 * z[2 * R:2 * R + 2]).sum(0) - 1


def x_of(r, shift=0.0):
    return np.arange(6.0, dtype=np.float32).reshape(2, 3) - r + shift


@check(R)
def default_backend_equals_eager():
    x = ember.tensor(x_of(R))
    eager = f(x)
    assert isinstance(eager, ember.Tensor) and not isinstance(eager, AsyncCollectiveTensor)
    compiled = ember.compile(f)
    got = compiled(x)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), want(x_of), rtol=1e-6)
    # a second call (the compiled code again, other values)
    got = compiled(ember.tensor(x_of(R, 0.5)))
    np.testing.assert_allclose(got.numpy(), want(lambda r: x_of(r, 0.5)), rtol=1e-6)
    assert pending() == 0, pending()


finish(R)
