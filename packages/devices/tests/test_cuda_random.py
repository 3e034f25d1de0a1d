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


@needs_cuda
def test_fork_rng_restores_the_cuda_generators():
    ember.manual_seed(3)
    a = ember.rand(5, device="cuda")
    ember.manual_seed(3)
    with ember.random.fork_rng():                        # all devices by default, as torch
        ember.rand(7, device="cuda")
        ember.cuda.manual_seed(9)
    assert np.array_equal(_np(a), _np(ember.rand(5, device="cuda")))
    ember.manual_seed(3)
    with ember.random.fork_rng(devices=[]):             # CPU only: the cuda stream moves on
        ember.rand(7, device="cuda")
    assert not np.array_equal(_np(a), _np(ember.rand(5, device="cuda")))


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


def _chi2(counts, expected):
    counts = np.asarray(counts, np.float64)
    expected = np.asarray(expected, np.float64)
    return float(((counts - expected) ** 2 / expected).sum())


# chi-square bounds: P(chi2_df > bound) about 1e-4 (fixed seeds: a failure is a real bias)
_CHI2_1E4 = {2: 18.4, 3: 21.1, 4: 23.5, 5: 25.7, 8: 31.8, 9: 33.7, 10: 35.6}


@needs_cuda
def test_counters_and_splits():
    """Each Philox counter gives 4 values (2 in float64): offsets advance by 4 words a counter,
    and a draw split at a multiple of 4 (2) values matches the unsplit draw."""
    g = ember.Generator(device="cuda").manual_seed(21)
    ember.rand(10, device="cuda", generator=g)                      # 3 counters
    assert int.from_bytes(bytes(g.get_state().numpy()[8:]), "little") == 12
    ember.randn(3, device="cuda", dtype=ember.float64, generator=g)  # 2 counters
    ember.randint(0, 2**40, (3,), device="cuda", generator=g)        # 2 (64-bit words)
    assert int.from_bytes(bytes(g.get_state().numpy()[8:]), "little") == 28
    for dt, k in ((ember.float32, 8), (ember.float64, 6), (ember.float16, 4)):
        g.manual_seed(5)
        whole = _np(ember.rand(20, device="cuda", dtype=dt, generator=g))
        g.manual_seed(5)
        parts = [_np(ember.rand(m, device="cuda", dtype=dt, generator=g)) for m in (k, 20 - k)]
        assert np.array_equal(whole, np.concatenate(parts))
        g.manual_seed(5)
        zw = _np(ember.randn(20, device="cuda", dtype=dt, generator=g))
        g.manual_seed(5)
        zp = [_np(ember.randn(m, device="cuda", dtype=dt, generator=g)) for m in (k, 20 - k)]
        assert np.array_equal(zw, np.concatenate(zp))
    g.manual_seed(5)
    odd = [_np(ember.rand(5, device="cuda", generator=g)) for _ in range(2)]
    g.manual_seed(5)
    again = [_np(ember.rand(5, device="cuda", generator=g)) for _ in range(2)]
    assert all(np.array_equal(x, y) for x, y in zip(odd, again))   # reproducible all the same
    assert not np.array_equal(odd[0], odd[1])


@needs_cuda
def test_all_words_independent():
    """Neighbouring values come from the words of one counter (and both normals of a
    Box-Muller pair): no correlation between them, nor between counters."""
    ember.manual_seed(7)
    for dt in (ember.float32, ember.float64):
        for f in (ember.rand, ember.randn):
            a = _np(f(N, device="cuda", dtype=dt)).reshape(-1, 4)
            c = np.corrcoef(a.T)
            assert np.abs(c - np.eye(4)).max() < 0.05, c
            flat = a.ravel()
            assert abs(np.corrcoef(flat[:-4], flat[4:])[0, 1]) < 0.05
    z = _np(ember.randn(N, device="cuda")).reshape(-1, 2)
    r2 = (z ** 2).sum(1)                  # a Box-Muller pair: r**2 ~ Exp(1/2), mean 2, var 4
    assert abs(r2.mean() - 2) < 0.1 and abs(r2.var() - 4) < 0.4
    i = _np(ember.randint(0, 5, (N,), device="cuda")).astype(int)
    counts = np.bincount(i[0::4] * 5 + i[1::4], minlength=25)     # pairs of words of a counter
    assert _chi2(counts, np.full(25, N / 4 / 25)) < 60


@needs_cuda
def test_randperm():
    ember.manual_seed(8)
    for n in (1, 2, 7, 1000):
        p = _np(ember.randperm(n, device="cuda")).astype(int)
        assert sorted(p) == list(range(n))
    n = 2000
    p = _np(ember.randperm(n, device="cuda")).astype(int)
    inv = int((p[:, None] > p[None, :])[np.triu_indices(n, 1)].sum())
    mean, var = n * (n - 1) / 4, n * (n - 1) * (2 * n + 5) / 72
    assert abs(inv - mean) < 5 * math.sqrt(var)                   # inversions of a uniform perm
    assert abs((np.diff(p) > 0).mean() - 0.5) < 0.05
    counts = np.zeros((4, 4))                                     # randperm(4): each position
    for _ in range(60):                                           # uniform over the values
        counts[np.arange(4), _np(ember.randperm(4, device="cuda")).astype(int)] += 1
    assert _chi2(counts.ravel(), np.full(16, 15.0)) < 40
    r = ember.randperm(300, device="cuda", dtype=ember.int32)
    assert r.dtype == ember.int32 and sorted(_np(r).astype(int)) == list(range(300))
    assert ember.randperm(0, device="cuda").numel() == 0
    rf = ember.randperm(50, device="cuda", dtype=ember.float32)
    assert sorted(_np(rf).astype(int)) == list(range(50))


@needs_cuda
@pytest.mark.parametrize("dt", [ember.float32, ember.float64, ember.float16])
def test_multinomial_with_replacement(dt):
    ember.manual_seed(9)
    p = np.array([0.1, 0.0, 0.2, 0.3, 0.4])
    w = ember.tensor(p * 3, dtype=dt, device="cuda")              # unnormalized weights
    s = _np(ember.multinomial(w, N, True)).astype(int)
    assert s.shape == (N,) and 1 not in s
    counts = np.bincount(s, minlength=5)
    keep = p > 0
    assert _chi2(counts[keep], N * p[keep]) < _CHI2_1E4[3]
    rows = ember.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [5.0, 0.0, 5.0]], dtype=dt,
                        device="cuda")
    m = _np(ember.multinomial(rows, 2000, replacement=True)).astype(int)
    assert m.shape == (3, 2000) and (m[0] == 2).all() and set(np.unique(m[1])) == {0, 1}
    assert set(np.unique(m[2])) == {0, 2} and abs((m[2] == 0).mean() - 0.5) < 0.05


@needs_cuda
def test_multinomial_without_replacement():
    ember.manual_seed(10)
    p = np.array([0.1, 0.0, 0.2, 0.3, 0.4])
    R = 600
    w = ember.tensor(np.tile(p, (R, 1)), dtype=ember.float32, device="cuda")
    s = _np(ember.multinomial(w, 3)).astype(int)
    assert s.shape == (R, 3) and 1 not in s
    assert all(len(set(r)) == 3 for r in s)                       # distinct within a row
    assert _chi2(np.bincount(s[:, 0], minlength=5)[p > 0], R * p[p > 0]) < _CHI2_1E4[3]
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(5) if i != j)
                       for j in range(5)])                        # P(second draw = j)
    assert _chi2(np.bincount(s[:, 1], minlength=5)[p > 0], R * second[p > 0]) < _CHI2_1E4[3]
    one = _np(ember.multinomial(ember.tensor(p, device="cuda"), 1)).astype(int)
    assert one.shape == (1,) and one[0] != 1
    full = _np(ember.multinomial(ember.tensor([1.0, 2.0, 3.0, 4.0], device="cuda"), 4))
    assert sorted(full.astype(int)) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="not enough"):
        ember.multinomial(ember.tensor([1.0, 0.0, 0.0], device="cuda"), 2)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        ember.multinomial(ember.zeros(2, 3, device="cuda"), 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        ember.multinomial(ember.tensor([1.0, -1.0, 3.0], device="cuda"), 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        ember.multinomial(ember.tensor([1.0, float("inf"), 3.0], device="cuda"), 2)
    with pytest.raises(RuntimeError, match="without replacement"):
        ember.multinomial(ember.ones(3, device="cuda"), 4)


@needs_cuda
def test_poisson():
    ember.manual_seed(12)
    rates = [0.0, 0.5, 3.0, 9.5, 10.0, 27.0, 1000.0, 1e7]
    M = 2048
    x = ember.tensor(np.repeat(rates, M).reshape(len(rates), M), device="cuda")
    s = _np(ember.poisson(x))
    assert np.all(s == np.round(s)) and s.min() >= 0 and (s[0] == 0).all()
    for r, row in zip(rates[1:], s[1:]):
        se = math.sqrt(r / M)
        assert abs(row.mean() - r) < 5 * se, (r, row.mean())
        assert abs(row.var() / r - 1) < 0.15, (r, row.var())
    from math import exp, factorial
    for r, row, top in ((3.0, s[2], 8), (9.5, s[3], 18), (10.0, s[4], 18)):   # pmf: Knuth/PTRS
        pmf = np.array([exp(-r) * r ** k / factorial(k) for k in range(top)])
        pmf = np.append(pmf, 1 - pmf.sum())
        counts = np.bincount(np.minimum(row.astype(int), top), minlength=top + 1)
        ok = M * pmf >= 5                  # small bins merged (here: the tail past top)
        c = np.append(counts[ok], counts[~ok].sum())
        e = np.append(M * pmf[ok], M * pmf[~ok].sum())
        c, e = (c, e) if e[-1] > 0 else (c[:-1], e[:-1])
        assert _chi2(c, e) < 50, (r, _chi2(c, e))
    for dt in (ember.float64, ember.float16, ember.bfloat16):
        y = ember.poisson(ember.full((512,), 4.0, dtype=dt, device="cuda"))
        assert y.dtype == dt and abs(_np(y).mean() - 4) < 0.4
    st = ember.full((5, 7), 2.0, device="cuda")[:, ::2]           # strided rates
    assert tuple(ember.poisson(st).shape) == (5, 4)
    assert np.isnan(_np(ember.poisson(ember.tensor([-1.0, float("nan")], device="cuda")))).all()


@needs_cuda
def test_former_host_ops_on_the_gpu_follow_the_seed():
    """randperm, poisson and multinomial: GPU kernels (no host copies), reproducible."""
    def draw():
        return (_np(ember.randperm(20, device="cuda")),
                _np(ember.poisson(ember.full((30,), 3.0, device="cuda"))),
                _np(ember.multinomial(ember.ones(2, 6, device="cuda"), 4)),
                _np(ember.multinomial(ember.ones(2, 6, device="cuda"), 9, True)))
    before = dict(ember.cuda.host_memory_fallbacks())
    ember.cuda.manual_seed(11)
    a = draw()
    ember.cuda.manual_seed(11)
    b = draw()
    assert ember.cuda.host_memory_fallbacks() == before
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert sorted(a[0]) == list(range(20)) and a[2].max() < 6
    with pytest.raises(RuntimeError, match="device type for generator"):
        ember.randperm(5, device="cuda", generator=ember.Generator())
