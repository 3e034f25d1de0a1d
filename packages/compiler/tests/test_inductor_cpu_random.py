"""Random ops in compiled CPU graphs (ember._inductor.rng, cpp.py's Philox4x32-10): rand,
randn, their *_like forms, bernoulli and dropout are drawn inside the fused C++ kernels from a
key the wrapper takes from the default CPU generator per call. Values are not eager's stream:
the tests check distributions, that every call draws new numbers, that `manual_seed` repeats
them, dropout's scaling and mask (forward and gradient), and train vs eval."""
import numpy as np
import pytest
from inductor_helpers import Recorder

import ember
import ember._dynamo as dynamo

F = ember.nn.functional


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield


def test_distributions_fused_and_seeded():
    rec = Recorder()
    x = ember.zeros(128, 128)
    f = ember.compile(lambda x: (ember.rand_like(x), ember.randn_like(x) + x,
                                 ember.bernoulli(x + 0.25)), backend=rec)
    ember.manual_seed(0)
    u, n, b = [t.numpy() for t in f(x)]
    c = rec.last()
    assert (c.n_kernels, c.n_extern) == (1, 0), c.code()     # drawn in the kernel
    assert "em_rand_u(" in c.kernel_src and "em_rand_n(" in c.kernel_src
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005, (u.mean(), u.var())
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03, (n.mean(), n.std())
    assert abs(((n - n.mean()) ** 3).mean()) < 0.1                   # symmetric
    assert abs((n ** 4).mean() / n.var() ** 2 - 3) < 0.2            # normal's kurtosis
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.02, b.mean()
    assert len(np.unique(u)) > 16000                                   # distinct counters
    # the three ops draw different counters: uncorrelated
    assert abs(np.corrcoef(u.ravel(), n.ravel())[0, 1]) < 0.03
    # histogram of the uniforms: 10 bins within a few standard errors
    h = np.histogram(u, bins=10, range=(0, 1))[0] / u.size
    assert np.abs(h - 0.1).max() < 0.01, h
    u2 = f(x)[0].numpy()
    assert not np.array_equal(u, u2)                                   # the generator advanced
    ember.manual_seed(0)
    np.testing.assert_array_equal(f(x)[0].numpy(), u)                 # manual_seed repeats
    ember.manual_seed(1)
    assert not np.array_equal(f(x)[0].numpy(), u)


def test_rand_shapes_and_dtypes():
    f = ember.compile(lambda x: ember.rand(3, 5, dtype=ember.float64) + x)
    y = f(ember.zeros(3, 5, dtype=ember.float64))
    assert y.dtype == ember.float64 and tuple(y.shape) == (3, 5)
    assert 0.0 <= float(y.min()) and float(y.max()) < 1.0
    g = ember.compile(lambda x: ember.randn(1000, 10) * x)
    z = g(ember.ones(10)).numpy()
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
    # an explicit generator stays the eager op (its own stream)
    gen = ember.Generator().manual_seed(3)
    h = ember.compile(lambda x: ember.rand(4, generator=gen) + x)
    a = h(ember.zeros(4)).numpy()
    gen.manual_seed(3)
    np.testing.assert_array_equal(a, ember.rand(4, generator=gen).numpy())


@pytest.mark.parametrize("p", [0.3])
def test_dropout_train_step(p):
    rec = Recorder()
    w = ember.nn.Parameter(ember.ones(64, 64))
    f = ember.compile(lambda x: F.dropout(x * w, p, True), backend=rec)
    masks = []
    for _ in range(3):
        x = ember.randn(64, 64) + 5.0                # never 0: a zero output is dropped
        y = f(x)
        y.sum().backward()
        yn, xn, g = y.detach().numpy(), x.numpy(), w.grad.numpy()
        keep = yn != 0
        np.testing.assert_allclose(yn[keep], xn[keep] / (1 - p), rtol=1e-5)   # scaled
        np.testing.assert_allclose(g, np.where(keep, xn / (1 - p), 0), rtol=1e-5)  # same mask
        assert abs(keep.mean() - (1 - p)) < 0.03, keep.mean()
        masks.append(keep)
        w.grad = None
    assert all((a != b).mean() > 0.05 for a, b in zip(masks, masks[1:]))   # new masks per step
    fw = rec.last(0)
    assert fw.n_kernels == 1 and fw.n_extern == 0, fw.code()   # mask drawn + applied fused
    assert "em_rand_u(" in fw.kernel_src


def test_dropout_eval_and_seed_repeat():
    m = ember.nn.Sequential(ember.nn.Linear(16, 16), ember.nn.Dropout(0.5))
    x = ember.randn(8, 16)
    c = ember.compile(m)
    m.eval()
    np.testing.assert_allclose(c(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)                                 # eval: identity
    m.train()
    ember.manual_seed(5)
    a = c(x).detach().numpy()
    ember.manual_seed(5)
    b = c(x).detach().numpy()
    np.testing.assert_array_equal(a, b)                                   # per seed
    assert 0.2 < (a == 0).mean() < 0.8


def test_dropout_module_training_loss_decreases():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(8, 32), ember.nn.ReLU(), ember.nn.Dropout(0.2),
                            ember.nn.Linear(32, 1))
    opt = ember.optim.SGD(m.parameters(), lr=0.05)
    x = ember.randn(64, 8)
    y = x.sum(1, keepdim=True)
    c = ember.compile(m)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = ((c(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses
