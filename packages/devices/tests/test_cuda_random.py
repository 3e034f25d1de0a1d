"""Random ops on cuda (Philox4x32-10): reproducibility from seeds and states, distributions
against theory, dtypes, ranges and non-contiguous in-place targets.

Values are ember's Philox stream, not PyTorch's (its kernels map counters to threads
differently): tests compare moments and ranges, never values, with PyTorch. Runs on a GPU and,
without one, on the fake device (Triton's interpreter) through a subprocess.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

GPU = ember.cuda.is_available()
needs_cuda = pytest.mark.skipif(not GPU, reason="no CUDA device (the fake-device test runs these)")
N = 1 << 14  # samples per moment check: standard errors about 1% of sigma


def _np(t):
    return t.detach().cpu().float().numpy().astype(np.float64) if t.dtype.is_floating_point \
        else t.detach().cpu().numpy().astype(np.float64)


def _moments(t, mean, var, tol=0.05):
    a = _np(t).ravel()
    sd = math.sqrt(var)
    assert abs(a.mean() - mean) <= tol * max(sd, 1e-3) + 4 * sd / math.sqrt(a.size), a.mean()
    assert abs(a.var() - var) <= tol * var + 1e-6, a.var()


# ---- reproducibility ----------------------------------------------------------------------------
@needs_cuda
def test_same_seed_same_values_and_batching_independent():
    ember.manual_seed(123)                                  # seeds the cuda generators too
    a = ember.rand(300, device="cuda")
    b = ember.randn(7, device="cuda")
    ember.cuda.manual_seed(123)
    a2 = ember.cat([ember.rand(100, device="cuda"), ember.rand(200, device="cuda")])
    assert np.array_equal(_np(a), _np(a2))              # counters advance by the element count
    assert np.array_equal(_np(b), _np(ember.randn(7, device="cuda")))
    ember.cuda.manual_seed(124)
    assert not np.array_equal(_np(a), _np(ember.rand(300, device="cuda")))
    assert ember.cuda.initial_seed() == 124


@needs_cuda
def test_rng_state_round_trip_and_generators():
    ember.cuda.manual_seed(5)
    ember.rand(10, device="cuda")
    st = ember.cuda.get_rng_state()
    assert st.dtype == ember.uint8 and st.device.type == "cpu" and st.numel() == 16
    x = ember.randn(50, device="cuda")
    ember.cuda.set_rng_state(st)
    assert np.array_equal(_np(x), _np(ember.randn(50, device="cuda")))
    with pytest.raises(RuntimeError):
        ember.cuda.set_rng_state(ember.zeros(3, dtype=ember.uint8))
    g = ember.Generator(device="cuda")
    assert g.device.type == "cuda" and isinstance(g, ember.Generator)
    g.manual_seed(9)
    u = ember.rand(20, device="cuda", generator=g)
    g2 = ember.Generator(device="cuda").manual_seed(9)
    assert np.array_equal(_np(u), _np(ember.rand(20, device="cuda", generator=g2)))
    gs = g.get_state()
    v = ember.empty(20, device="cuda").normal_(generator=g)
    g.set_state(gs)
    assert np.array_equal(_np(v), _np(ember.empty(20, device="cuda").normal_(generator=g)))
    with pytest.raises(RuntimeError, match="device type for generator"):
        ember.rand(3, device="cuda", generator=ember.Generator())
    s = ember.seed()                                     # the cuda generators follow ember.seed
    assert ember.cuda.initial_seed() == s


# ---- distributions ------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("dt", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_uniform_and_normal_moments(dt):
    ember.manual_seed(0)
    u = ember.rand(N, device="cuda", dtype=dt)
    assert u.dtype == dt and 0 <= _np(u).min() and _np(u).max() < 1
    _moments(u, 0.5, 1 / 12)
    z = ember.randn(N, device="cuda", dtype=dt)
    assert z.dtype == dt
    _moments(z, 0.0, 1.0)
    w = ember.empty(N, device="cuda", dtype=dt).uniform_(-2, 3)
    assert -2 <= _np(w).min() and _np(w).max() < 3
    _moments(w, 0.5, 25 / 12)


@needs_cuda
def test_samplers_match_theory():
    ember.manual_seed(1)
    e = ember.empty(N, device="cuda")
    _moments(e.normal_(3.0, 2.0), 3.0, 4.0)
    _moments(e.exponential_(4.0), 0.25, 1 / 16)
    assert _np(e).min() >= 0
    g = e.geometric_(0.3)
    assert _np(g).min() >= 1 and np.all(_np(g) == np.round(_np(g)))
    _moments(g, 1 / 0.3, 0.7 / 0.09)
    ln = ember.empty(N, device="cuda", dtype=ember.float64).log_normal_(0.5, 0.25)
    _moments(ln.log(), 0.5, 0.0625)
    c = _np(ember.empty(N, device="cuda").cauchy_(1.0, 2.0))
    assert abs(np.median(c) - 1.0) < 0.1 and abs(np.percentile(c, 75) - 3.0) < 0.2
    m = ember.full((N,), 2.0, device="cuda")
    s = ember.full((N,), 0.5, device="cuda")
    _moments(ember.normal(m, s), 2.0, 0.25)
    _moments(ember.normal(m, 3.0), 2.0, 9.0)
    _moments(ember.normal(-1.0, s), -1.0, 0.25)
    _moments(ember.normal(1.0, 2.0, (N,), device="cuda"), 1.0, 4.0)
    nm = ember.normal(ember.zeros(N // 8, 1, device="cuda"), ember.ones(8, device="cuda"))
    assert tuple(nm.shape) == (N // 8, 8)                 # broadcast mean/std
    _moments(nm, 0.0, 1.0)


@needs_cuda
def test_bernoulli():
    ember.manual_seed(2)
    p = ember.full((N,), 0.3, device="cuda")
    b = ember.bernoulli(p)
    assert set(np.unique(_np(b))) <= {0.0, 1.0}
    _moments(b, 0.3, 0.21)
    _moments(ember.bernoulli(ember.empty(N, device="cuda"), 0.8), 0.8, 0.16)
    x = ember.empty(N, device="cuda", dtype=ember.float16).bernoulli_(0.1)
    assert x.dtype == ember.float16
    _moments(x, 0.1, 0.09)
    rows = ember.tensor([0.0, 1.0, 0.5], device="cuda")
    y = ember.empty(N // 4, 3, device="cuda").bernoulli_(rows)   # p broadcast over rows
    a = _np(y)
    assert (a[:, 0] == 0).all() and (a[:, 1] == 1).all() and abs(a[:, 2].mean() - 0.5) < 0.05
    assert set(np.unique(_np(ember.bernoulli(ember.full((64,), 0.5, dtype=ember.float64,
                                                         device="cuda"))))) <= {0.0, 1.0}
    with pytest.raises(RuntimeError):
        ember.empty(3, device="cuda").bernoulli_(1.5)


@needs_cuda
def test_dropout_runs_on_the_gpu():
    x = ember.ones(N, device="cuda")
    before = dict(ember.cuda.host_memory_fallbacks())
    y = ember.nn.functional.dropout(x, 0.25, True)
    assert ember.cuda.host_memory_fallbacks() == before
    a = _np(y)
    assert set(np.unique(a)) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((a == 0).mean() - 0.25) < 0.03


# ---- integers -----------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("dt", [ember.int64, ember.int32, ember.int16, ember.int8, ember.uint8,
                                ember.float32, ember.float16, ember.bfloat16, ember.float64])
def test_randint_ranges(dt):
    ember.manual_seed(3)
    r = ember.randint(-3, 5, (N,), device="cuda", dtype=dt) if dt != ember.uint8 else \
        ember.randint(0, 8, (N,), device="cuda", dtype=dt) + 0
    a = _np(r)
    lo = -3 if dt != ember.uint8 else 0
    assert r.dtype == dt and set(np.unique(a)) == set(range(lo, lo + 8))   # [low, high)
    _moments(r, lo + 3.5, (64 - 1) / 12)
    assert _np(ember.randint(7, (100,), device="cuda", dtype=dt)).max() <= 6


@needs_cuda
def test_randint_defaults_and_like_and_errors():
    r = ember.randint(10, (3, 4), device="cuda")
    assert r.dtype == ember.int64 and tuple(r.shape) == (3, 4)
    x = ember.empty(2, 5, device="cuda", dtype=ember.int32)
    assert ember.randint_like(x, 4).dtype == ember.int32
    assert set(np.unique(_np(ember.randint_like(ember.empty(N, device="cuda"), 2, 4)))) == {2, 3}
    big = _np(ember.randint(2**40, 2**40 + 5, (1000,), device="cuda"))  # 64-bit ranges
    assert big.min() >= 2**40 and big.max() < 2**40 + 5
    wide = _np(ember.randint(0, 2**62, (N,), device="cuda"))
    assert wide.max() > 2**61 and wide.min() >= 0
    with pytest.raises(RuntimeError):
        ember.randint(5, 5, (3,), device="cuda")
    with pytest.raises(RuntimeError):
        ember.randint(0, 300, (3,), device="cuda", dtype=ember.uint8)
    with pytest.raises(NotImplementedError):
        ember.rand(3, device="cuda", dtype=ember.int32)


@needs_cuda
def test_random_inplace_bounds():
    ember.manual_seed(4)
    b = _np(ember.empty(N, device="cuda", dtype=ember.bool).random_())
    assert set(np.unique(b)) == {0, 1}
    u8 = _np(ember.empty(N, device="cuda", dtype=ember.uint8).random_())
    assert u8.min() == 0 and u8.max() == 255
    i8 = _np(ember.empty(N, device="cuda", dtype=ember.int8).random_())
    assert i8.min() == 0 and i8.max() == 127                   # random_(): [0, max]
    f = _np(ember.empty(N, device="cuda", dtype=ember.float16).random_())
    assert f.min() >= 0 and f.max() <= 2**11 and np.all(f == np.round(f))
    t = _np(ember.empty(N, device="cuda", dtype=ember.int16).random_(-5, 5))
    assert set(np.unique(t)) == set(range(-5, 5))
    full = ember.empty(N, device="cuda", dtype=ember.int64).random_(-2**63, None)
    a = full.cpu().numpy()
    assert a.min() < -2**61 and a.max() > 2**61                # all of int64
    assert _np(ember.empty(100, device="cuda", dtype=ember.int32).random_(9)).max() <= 8


# ---- layouts ------------------------------------------------------------------------------------
@needs_cuda
def test_noncontiguous_inplace_targets():
    base = ember.zeros(64, 96, device="cuda")
    view = base[:, ::3].t()                                    # (32, 64), strided
    view.uniform_(1, 2)
    a = _np(base)
    assert (a[:, 1::3] == 0).all() and (a[:, 2::3] == 0).all()
    assert a[:, ::3].min() >= 1 and a[:, ::3].max() < 2
    base.zero_()
    base[:, ::3].t().normal_(5, 1)
    assert (_np(base)[:, 1::3] == 0).all() and abs(_np(base)[:, ::3].mean() - 5) < 0.1
    ints = ember.zeros(10, 20, device="cuda", dtype=ember.int32)
    ints[:, 5:].random_(1, 4)
    assert (_np(ints)[:, :5] == 0).all() and set(np.unique(_np(ints)[:, 5:])) == {1, 2, 3}
    ints.t().bernoulli_(0.5)
    assert set(np.unique(_np(ints))) <= {0, 1}


@needs_cuda
def test_factories_options():
    r = ember.rand(2, 3, device="cuda", requires_grad=True)
    assert r.requires_grad and r.is_leaf
    x = ember.empty(4, 5, device="cuda", dtype=ember.float16)
    assert ember.rand_like(x).dtype == ember.float16
    assert ember.randn_like(x, dtype=ember.float64).dtype == ember.float64
    assert ember.rand(0, device="cuda").numel() == 0


# ---- the fake device ----------------------------------------------------------------------------
@pytest.mark.skipif(GPU, reason="a GPU runs the tests above directly")
def test_on_the_fake_device():
    pytest.importorskip("triton")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          os.path.abspath(__file__)], cwd=here, env=env, capture_output=True,
                         text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "skipped" in out.stdout, out.stdout[-500:]


@needs_cuda
def test_host_ops_follow_the_cuda_seed():
    """multinomial, poisson and randperm (still on host copies) draw from the cuda generator."""
    def draw():
        return (_np(ember.randperm(20, device="cuda")),
                _np(ember.poisson(ember.full((30,), 3.0, device="cuda"))),
                _np(ember.multinomial(ember.ones(2, 6, device="cuda"), 4)))
    ember.cuda.manual_seed(11)
    a = draw()
    ember.cuda.manual_seed(11)
    b = draw()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert sorted(a[0]) == list(range(20)) and a[2].max() < 6
    with pytest.raises(RuntimeError, match="device type for generator"):
        ember.randperm(5, device="cuda", generator=ember.Generator())
