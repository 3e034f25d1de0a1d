"""Random ops: reproducibility (global seed, Generator objects, state round trips), shapes and
dtypes against torch, distribution moments (fixed seeds, so deterministic), and errors."""
import math

import numpy as np
import pytest
from harness import check_error

import ember

torch = pytest.importorskip("torch")


def same(a, b):
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and np.array_equal(
        a.numpy(), b.numpy())


# ---- reproducibility ---------------------------------------------------------------------------
SAMPLERS = [
    lambda g: ember.rand(3, 4, generator=g),
    lambda g: ember.randn(5, generator=g),
    lambda g: ember.randint(0, 10, (6,), generator=g),
    lambda g: ember.randperm(7, generator=g),
    lambda g: ember.normal(0.0, 1.0, (4,), generator=g),
    lambda g: ember.normal(ember.zeros(4), ember.ones(4), generator=g),
    lambda g: ember.bernoulli(ember.full((8,), 0.5), generator=g),
    lambda g: ember.multinomial(ember.ones(5), 3, generator=g),
    lambda g: ember.poisson(ember.full((4,), 3.0), generator=g),
    lambda g: ember.empty(5).uniform_(-2, 2, generator=g),
    lambda g: ember.empty(5).exponential_(generator=g),
    lambda g: ember.empty(5).random_(0, 100, generator=g),
]


@pytest.mark.parametrize("draw", SAMPLERS)
def test_generator_reproducible(draw):
    g = ember.Generator().manual_seed(123)
    a, b = draw(g), draw(g)
    g.manual_seed(123)
    assert same(draw(g), a) and same(draw(g), b)
    assert not same(a, b) or a.numel() <= 1 or a.dtype == ember.int64 and a.numel() < 4


@pytest.mark.parametrize("draw", SAMPLERS)
def test_global_seed_reproducible(draw):
    ember.manual_seed(0)
    a = draw(None)
    ember.manual_seed(0)
    assert same(draw(None), a)


def test_generators_are_independent_of_the_default():
    g = ember.Generator().manual_seed(5)
    ember.manual_seed(1)
    a = ember.rand(4, generator=g)
    ember.rand(10)                     # consuming the default stream changes nothing for g
    g.manual_seed(5)
    assert same(ember.rand(4, generator=g), a)


def test_seed_api():
    assert ember.manual_seed(7) is ember.default_generator
    assert ember.initial_seed() == 7
    s = ember.seed()
    assert isinstance(s, int) and ember.initial_seed() == s
    assert ember.Generator().initial_seed() == 67280421310721     # PyTorch's default seed
    assert ember.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(ValueError):
        ember.manual_seed(2 ** 64)
    assert ember.random.manual_seed is ember.manual_seed


def test_state_round_trip():
    ember.manual_seed(3)
    state = ember.get_rng_state()
    assert state.dtype == ember.uint8 and state.ndim == 1
    a = ember.randn(5)
    ember.set_rng_state(state)
    assert same(ember.randn(5), a)
    g = ember.Generator().manual_seed(9)
    st = g.get_state()
    x = ember.rand(3, generator=g)
    g2 = ember.Generator().set_state(st)
    assert same(ember.rand(3, generator=g2), x) and g2.initial_seed() == 9
    assert same(ember.rand(3, generator=g.clone_state()), ember.rand(3, generator=g))


def test_state_errors():
    with pytest.raises(TypeError, match="RNG state must be a"):
        ember.set_rng_state(ember.ones(3))
    with pytest.raises(RuntimeError, match="CPUGeneratorImplState of size"):
        ember.Generator().set_state(ember.ones(3, dtype=ember.uint8))
    with pytest.raises(TypeError):
        ember.rand(2, generator=3)


def test_fork_rng():
    ember.manual_seed(11)
    with ember.random.fork_rng():
        ember.manual_seed(99)
        ember.rand(10)
    a = ember.rand(3)
    ember.manual_seed(11)
    assert same(ember.rand(3), a)


# ---- shapes and dtypes vs torch -----------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda t: t.rand(2, 3),
    lambda t: t.rand((2, 3), dtype=t.float64),
    lambda t: t.rand(4, dtype=t.bfloat16),
    lambda t: t.rand(4, dtype=t.float16),
    lambda t: t.randn(2, 3, dtype=t.float64),
    lambda t: t.randn(size=(2,)),
    lambda t: t.randint(10, (2, 3)),
    lambda t: t.randint(3, 10, (4,)),
    lambda t: t.randint(3, 10, (4,), dtype=t.int32),
    lambda t: t.randint(0, 10, (3,), dtype=t.float32),
    lambda t: t.randint(low=2, high=5, size=(3,)),
    lambda t: t.randint(5, size=(3,)),
    lambda t: t.randperm(6),
    lambda t: t.randperm(6, dtype=t.float32),
    lambda t: t.rand_like(t.ones(2, 3, dtype=t.float64)),
    lambda t: t.randn_like(t.ones(2, 3), dtype=t.float64),
    lambda t: t.randint_like(t.ones(2, 3), 10),
    lambda t: t.randint_like(t.ones(2, dtype=t.int32), 3, 10),
    lambda t: t.normal(t.zeros(2, 3), t.ones(3)),
    lambda t: t.normal(t.zeros(2, 3, dtype=t.float64), 2.0),
    lambda t: t.normal(1.0, t.ones(4)),
    lambda t: t.normal(0.0, 1.0, (2, 2)),
    lambda t: t.normal(0.0, 1.0, size=(2,), dtype=t.float64),
    lambda t: t.bernoulli(t.full((3,), 0.3)),
    lambda t: t.bernoulli(t.ones(3, dtype=t.float64), 0.5),
    lambda t: t.ones(3).bernoulli(),
    lambda t: t.multinomial(t.ones(2, 5), 3),
    lambda t: t.ones(5).multinomial(8, replacement=True),
    lambda t: t.poisson(t.ones(2, 2)),
    lambda t: t.ones(3, dtype=t.float64).uniform_(),
    lambda t: t.ones(3, dtype=t.bfloat16).normal_(2, 3),
    lambda t: t.ones(3).exponential_(2.0),
    lambda t: t.ones(3).geometric_(0.3),
    lambda t: t.ones(3).log_normal_(),
    lambda t: t.ones(3).cauchy_(),
    lambda t: t.ones(3).random_(),
    lambda t: t.ones(3, dtype=t.int8).random_(),
    lambda t: t.ones(3, dtype=t.uint8).random_(5),
    lambda t: t.ones(3, dtype=t.int64).random_(-5, 5),
    lambda t: t.ones(3).bernoulli_(0.2),
    lambda t: t.ones(3).bernoulli_(t.full((3,), 0.2)),
    lambda t: t.ones(3, dtype=t.bool).random_(),
    lambda t: t.rand(0, 3),
    lambda t: t.rand(2, requires_grad=True),
])
def test_shapes_and_dtypes(fn):
    e, t = fn(ember), fn(torch)
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert e.requires_grad == t.requires_grad


def test_inplace_returns_self_and_bumps_version():
    x = ember.zeros(4)
    v = x._version
    assert x.uniform_() is x and x._version > v
    base = ember.zeros(3, 4)
    base.t().normal_()                          # non-contiguous views are filled in place
    assert (base != 0).all()


def test_meta_device():
    x = ember.rand(2, 3, device="meta")
    assert x.is_meta and tuple(x.shape) == (2, 3)
    assert tuple(ember.randint(0, 4, (5,), device="meta").shape) == (5,)


# ---- distributions -------------------------------------------------------------------------------
N = 20000


def moments(x):
    a = x.double().numpy()
    return a.mean(), a.std()


def test_uniform_and_normal_moments():
    g = ember.Generator().manual_seed(0)
    m, s = moments(ember.rand(N, generator=g))
    assert abs(m - 0.5) < 0.01 and abs(s - math.sqrt(1 / 12)) < 0.01
    u = ember.rand(N, dtype=ember.float16, generator=g).float().numpy()
    assert u.min() >= 0 and u.max() < 1                   # never rounds up to 1
    m, s = moments(ember.randn(N, generator=g))
    assert abs(m) < 0.03 and abs(s - 1) < 0.02
    m, s = moments(ember.normal(3.0, 2.0, (N,), generator=g))
    assert abs(m - 3) < 0.06 and abs(s - 2) < 0.04
    m, s = moments(ember.empty(N).uniform_(-2, 4, generator=g))
    assert abs(m - 1) < 0.06 and abs(s - math.sqrt(3)) < 0.03
    m, s = moments(ember.normal(ember.full((N,), -1.0), ember.full((N,), 0.5), generator=g))
    assert abs(m + 1) < 0.02 and abs(s - 0.5) < 0.01


def test_discrete_distributions():
    g = ember.Generator().manual_seed(1)
    r = ember.randint(3, 8, (N,), generator=g).numpy()
    assert r.min() == 3 and r.max() == 7
    assert np.allclose(np.bincount(r)[3:] / N, 0.2, atol=0.015)
    p = ember.randperm(50, generator=g).numpy()
    assert sorted(p.tolist()) == list(range(50))
    b = ember.bernoulli(ember.full((N,), 0.3), generator=g).numpy()
    assert abs(b.mean() - 0.3) < 0.015 and set(np.unique(b)) <= {0.0, 1.0}
    m, _ = moments(ember.poisson(ember.full((N,), 4.0), generator=g))
    assert abs(m - 4) < 0.06
    m, _ = moments(ember.empty(N).exponential_(2.0, generator=g))
    assert abs(m - 0.5) < 0.015
    m, _ = moments(ember.empty(N).geometric_(0.25, generator=g))
    assert abs(m - 4) < 0.1
    x = ember.empty(N).log_normal_(0.0, 0.5, generator=g).numpy()
    assert abs(np.log(x).mean()) < 0.015 and abs(np.log(x).std() - 0.5) < 0.01
    c = ember.empty(N).cauchy_(1.0, 2.0, generator=g).numpy()
    assert abs(np.median(c) - 1) < 0.1 and abs(np.percentile(c, 75) - 3) < 0.15
    f = ember.empty(N).random_(generator=g).numpy()
    assert f.min() >= 0 and f.max() <= 2 ** 24 and f.max() > 2 ** 23


def test_multinomial_distribution():
    g = ember.Generator().manual_seed(2)
    probs = ember.tensor([0.1, 0.0, 0.6, 0.3])
    s = ember.multinomial(probs, N, replacement=True, generator=g).numpy()
    assert np.allclose(np.bincount(s, minlength=4) / N, [0.1, 0, 0.6, 0.3], atol=0.015)
    w = ember.multinomial(ember.tensor([[1.0, 2, 3, 4], [4, 0, 0, 1]]), 2, generator=g).numpy()
    assert all(len(set(row)) == 2 for row in w) and 1 not in w[1] and 2 not in w[1]
    # without replacement, the first draw follows the probabilities
    first = np.array([ember.multinomial(probs, 3, generator=g)[0].item() for _ in range(2000)])
    assert np.allclose(np.bincount(first, minlength=4) / 2000, [0.1, 0, 0.6, 0.3], atol=0.04)


def test_random_grads_are_zero():
    m = ember.zeros(3, requires_grad=True)
    s = ember.ones(3, requires_grad=True)
    ember.normal(m, s).sum().backward()
    assert m.grad is None or not m.grad.numpy().any()
    p = ember.full((3,), 0.5, requires_grad=True)
    ember.bernoulli(p).sum().backward()
    assert p.grad is None or not p.grad.numpy().any()


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,match", [
    (lambda t: t.rand(2, dtype=t.int64), "\"check_uniform_bounds\" not implemented for 'Long'"),
    (lambda t: t.randn(2, dtype=t.int64), "\"normal_kernel_cpu\" not implemented for 'Long'"),
    (lambda t: t.randint(5, 5, (2,)), "random_ expects 'from' to be less than 'to', but got "
                                      "from=5 >= to=5"),
    (lambda t: t.randint(5, 3, (2,)), "from=5 >= to=3"),
    (lambda t: t.randint(0, 300, (2,), dtype=t.uint8), "to - 1 is out of bounds for unsigned "
                                                       "char"),
    (lambda t: t.randperm(-1), "negative dimension -1"),
    (lambda t: t.rand(-1), "negative dimension"),
    (lambda t: t.normal(t.zeros(3), -t.ones(3)), "normal expects all elements of std >= 0.0"),
    (lambda t: t.normal(0.0, -1.0, (3,)), "normal expects std >= 0.0, but found std -1"),
    (lambda t: t.normal(t.zeros(2, 3), t.ones(4)), "must match the size"),
    (lambda t: t.bernoulli(t.tensor([1.5])), "Expected p_in >= 0 && p_in <= 1"),
    (lambda t: t.ones(3).bernoulli_(1.5), r"bernoulli_ expects p to be in \[0, 1\], but got "
                                          r"p=1.5"),
    (lambda t: t.bernoulli(t.ones(3), 2.0), "p=2"),
    (lambda t: t.multinomial(t.ones(3), 4), "cannot sample n_sample > prob_dist.size"),
    (lambda t: t.multinomial(t.tensor([-1.0, 1]), 1), "probability tensor contains either"),
    (lambda t: t.multinomial(t.tensor([float("nan"), 1]), 1), "`inf`, `nan` or element < 0"),
    (lambda t: t.multinomial(t.zeros(2), 1), "sum of probabilities <= 0"),
    (lambda t: t.multinomial(t.ones(2, 2, 2), 1), "prob_dist must be 1 or 2 dim"),
    (lambda t: t.multinomial(t.ones(3, dtype=t.int64), 1), "only supports floating-point"),
    (lambda t: t.multinomial(t.ones(3), 0), "cannot sample n_sample <= 0 samples"),
    (lambda t: t.ones(3).geometric_(0), r"geometric_ expects p to be in \(0, 1\), but got p=0"),
    (lambda t: t.ones(3).exponential_(-1), "exponential_ expects lambda > 0.0, but found "
                                           "lambda=-1"),
    (lambda t: t.ones(3).uniform_(2, 1), r"uniform_ expects to return a \[from, to\) range, "
                                         r"but found from=2 > to=1"),
    (lambda t: t.ones(3).normal_(0, -1), "normal expects std >= 0.0"),
    (lambda t: t.ones(3).log_normal_(0, -1), "log_normal_ expects std > 0.0"),
    (lambda t: t.ones(3).cauchy_(0, -1), "cauchy_ expects sigma > 0.0"),
    (lambda t: t.ones(3).random_(5, 2), "from=5 >= to=2"),
    (lambda t: t.ones(3, dtype=t.uint8).random_(0, 300), "to - 1 is out of bounds"),
    (lambda t: t.poisson(-t.ones(2)), "invalid Poisson rate, expected rate to be non-negative"),
])
def test_errors(fn, match):
    check_error(fn, match=match)
