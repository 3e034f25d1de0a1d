"""The load-aware thread cap of `_blas`: never above the cores, never below one, and a GEMM under
any cap still gives numpy's result."""
import os

import numpy as np

from ember import _blas


def test_free_cores_bounds(monkeypatch):
    ncpu = os.cpu_count() or 1
    for load in (0.0, 1.0, ncpu + 0.0, 50.0):
        monkeypatch.setattr(os, "getloadavg", lambda v=load: (v, v, v))
        _blas._free[1] = -10.0  # force a fresh read
        n = _blas.free_cores()
        assert 1 <= n <= ncpu
        if load >= ncpu + 1:
            assert n == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    _blas._free[1] = -10.0
    assert _blas.free_cores() == ncpu
    _blas._free[1] = -10.0


def test_gemm_under_cap_matches_numpy():
    import ember
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 400)).astype(np.float32)
    b = rng.standard_normal((400, 200)).astype(np.float32)
    got = (ember.tensor(a) @ ember.tensor(b).t().contiguous().t()).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
