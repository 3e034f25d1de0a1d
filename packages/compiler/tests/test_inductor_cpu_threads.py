"""How many threads static CPU graphs' kernels run on (cpu_threads.py): mid-sized kernels split
across two threads (from 128K elements of arithmetic, 16K with transcendental calls), small ones
stay on one; pointwise, row, column and one-value reductions give the same values at one and two
threads (bit for bit where each output element is computed by one thread) and match PyTorch.
OpenMP's wait policy while kernel libraries load (`_cpujit.omp_env`)."""
import os
import re

import numpy as np
import pytest
import torch

import ember
import ember._blas
import ember._dynamo as dynamo
from ember._dynamo.aot import aot_module
from ember._inductor import compile_graph, cpu_threads
from ember._ops import _cpujit


@pytest.fixture(autouse=True)
def _two_free_cores(monkeypatch):
    """Two threads really run (the load-average cap would make them one on a busy machine)."""
    dynamo.reset()
    monkeypatch.delenv("EMBER_CPU_GRAIN", raising=False)
    monkeypatch.setattr(ember._blas, "free_cores", lambda: 2)
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)
    dynamo.reset()


class Recorder:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        def rec(g, ex=None):
            c = compile_graph(g, ex)
            self.graphs.append(c)
            return c
        return aot_module(gm, example_inputs, fw_compiler=rec, bw_compiler=rec)


def _run(fn, args, nt):
    """fn compiled and run with ember.set_num_threads(nt): (outputs as numpy, compiled graph)."""
    dynamo.reset()
    ember.set_num_threads(nt)
    rec = Recorder()
    out = ember.compile(fn, backend=rec)(*args)
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in out], rec.graphs[0].last


def _launch_threads(c) -> list:
    """The thread count each kernel launch of the wrapper passes (1 or the cap before _ntc)."""
    return [int(m.group(2) or m.group(3)) for m in
            re.finditer(r"kernel_\w+\(_ptrs\(.*\), _KS, (_ntc\((\d+)\)|(\d+))\)", c.wrapper_src)]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_grain_from_the_kernel_body():
    light = 'extern "C" void k(char** P) { p0[x0] = t0 * t1 + 1.0f; }'
    assert cpu_threads.grain(light) == cpu_threads.LIGHT
    for call in ("std::erf(t0)", "std::exp(t0)", "em_expf(t0)", "std::tanh(t0)",
                 "std::log1p(t0)", "em_philox(seed, ctr)"):
        assert cpu_threads.grain(f'extern "C" void k(char** P) {{ t1 = {call}; }}') \
            == cpu_threads.HEAVY, call
    # helpers a kernel file starts with (em_expf's definition) do not count
    assert cpu_threads.grain('static float em_expf(float x) {}\nextern "C" void k() { t = a; }') \
        == cpu_threads.LIGHT
    assert cpu_threads.static_threads(1 << 17, cpu_threads.LIGHT, 2) == 2
    assert cpu_threads.static_threads((1 << 17) - 1, cpu_threads.LIGHT, 2) == 1
    assert cpu_threads.static_threads(1 << 30, 1, 2) == 2


def test_grain_override(monkeypatch):
    monkeypatch.setenv("EMBER_CPU_GRAIN", "262144")
    assert cpu_threads.grain('extern "C" void k() { std::exp(t0); }') == 262144
    monkeypatch.setenv("EMBER_CPU_GRAIN", "1000,10")
    assert cpu_threads.grain('extern "C" void k() { std::exp(t0); }') == 10
    assert cpu_threads.grain('extern "C" void k() { t0 + t1; }') == 1000


def test_mid_sized_pointwise_splits():
    """(16, 128, 128) = 256K elements of arithmetic: two threads (the old rule: one below 512K)."""
    x, y = _rand(16, 128, 128), _rand(128, seed=1)
    fn = lambda a, b: (a * 2 + b).relu() * a  # noqa: E731
    (o1,), c1 = _run(fn, (ember.tensor(x), ember.tensor(y)), 1)
    (o2,), c2 = _run(fn, (ember.tensor(x), ember.tensor(y)), 2)
    assert _launch_threads(c1) == [1] and _launch_threads(c2) == [2], c2.wrapper_src
    assert "#pragma omp parallel for" in c2.kernel_src
    np.testing.assert_array_equal(o1, o2)
    ref = fn(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_allclose(o2, ref, rtol=1e-6, atol=1e-6)


def test_small_kernel_stays_on_one_thread():
    x = _rand(64, 256)    # 16K elements of arithmetic
    (o,), c = _run(lambda a: a * 3 + 1, (ember.tensor(x),), 2)
    assert _launch_threads(c) == [1]
    np.testing.assert_allclose(o, x * 3 + 1, rtol=1e-6)


def test_transcendental_kernel_splits_from_16k():
    """gelu (erf) of 16K elements: two threads; values as torch's."""
    x = _rand(64, 256)
    fn = lambda a: torch.nn.functional.gelu(a) if isinstance(a, torch.Tensor) \
        else ember.nn.functional.gelu(a)  # noqa: E731
    (o1,), _ = _run(fn, (ember.tensor(x),), 1)
    (o2,), c = _run(fn, (ember.tensor(x),), 2)
    assert _launch_threads(c) == [2], c.wrapper_src
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_allclose(o2, fn(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_row_reductions_split_by_rows():
    """softmax and layer_norm over (512, 128) rows: rows are split across threads, each row is
    computed by one, so values are bit-identical at one and two threads."""
    x = _rand(512, 128)
    w, b = _rand(128, seed=1), _rand(128, seed=2)

    def fn(a, w, b, F=None):
        F = F or ember.nn.functional
        return a.softmax(-1), F.layer_norm(a, (128,), w, b)
    o1, _ = _run(fn, (ember.tensor(x), ember.tensor(w), ember.tensor(b)), 1)
    o2, c = _run(fn, (ember.tensor(x), ember.tensor(w), ember.tensor(b)), 2)
    assert max(_launch_threads(c)) == 2, c.wrapper_src
    for a, b_ in zip(o1, o2):
        np.testing.assert_array_equal(a, b_)
    ref = fn(torch.tensor(x), torch.tensor(w), torch.tensor(b), torch.nn.functional)
    for a, r in zip(o2, ref):
        np.testing.assert_allclose(a, r.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cols", [128, 200, 512])
def test_column_sums_split_by_columns(cols):
    """Bias-gradient sums (over B*T of (B, T, C)): each thread sums its own block of columns
    over every row, so values are bit-identical at one and two threads."""
    x, g = _rand(16, 128, cols), _rand(cols, seed=1)
    fn = lambda a, b: ((a * b).sum(dim=(0, 1)), a.sum(dim=(0, 1)))  # noqa: E731
    o1, _ = _run(fn, (ember.tensor(x), ember.tensor(g)), 1)
    o2, c = _run(fn, (ember.tensor(x), ember.tensor(g)), 2)
    assert _launch_threads(c) == [2] and "c_lo" in c.kernel_src, c.kernel_src
    for a, b in zip(o1, o2):
        np.testing.assert_array_equal(a, b)
    ref = fn(torch.tensor(x, dtype=torch.float64), torch.tensor(g, dtype=torch.float64))
    for a, r in zip(o2, ref):
        np.testing.assert_allclose(a, r.numpy(), rtol=1e-5, atol=1e-4)


def test_column_sums_in_backward():
    """A linear layer's bias gradient (column sum of the output gradient) through autograd."""
    x, w, b = _rand(16, 128, 64), _rand(96, 64, seed=1), _rand(96, seed=2)
    grads = []
    for nt in (1, 2):
        dynamo.reset()
        ember.set_num_threads(nt)
        xs, ws, bs = (ember.tensor(v, requires_grad=True) for v in (x, w, b))
        f = ember.compile(lambda a, w_, b_: ember.nn.functional.linear(a, w_, b_).tanh().sum())
        f(xs, ws, bs).backward()
        grads.append([t.grad.numpy() for t in (xs, ws, bs)])
    for a, b_ in zip(*grads):
        np.testing.assert_allclose(a, b_, rtol=1e-6, atol=1e-6)
    xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    torch.nn.functional.linear(xt, wt, bt).tanh().sum().backward()
    for a, t in zip(grads[1], (xt, wt, bt)):
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_one_value_sum_two_threads():
    """A sum to one value of 256K floats: per-thread partials, combined within tolerance."""
    x = _rand(512, 512)
    fn = lambda a: ((a * 2 + 1).relu() * a).sum()  # noqa: E731
    (o1,), _ = _run(fn, (ember.tensor(x),), 1)
    (o2,), c = _run(fn, (ember.tensor(x),), 2)
    assert _launch_threads(c) == [2], c.wrapper_src
    ref = fn(torch.tensor(x, dtype=torch.float64)).item()
    np.testing.assert_allclose(o1, ref, rtol=1e-5)
    np.testing.assert_allclose(o2, ref, rtol=1e-5)
    # two partials add in either order to the same float: repeat runs agree bit for bit
    (o3,), _ = _run(fn, (ember.tensor(x),), 2)
    np.testing.assert_array_equal(o2, o3)


def test_omp_env_passive_or_short_spin(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setattr(_cpujit, "OMP_SPIN_COUNT", 0)
    with _cpujit.omp_env():
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setattr(_cpujit, "OMP_SPIN_COUNT", 1000)   # EMBER_OMP_SPIN=1000
    with _cpujit.omp_env():
        assert os.environ["GOMP_SPINCOUNT"] == "1000"
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"   # throttled: no spin when oversubscribed
    assert "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")   # the user's choice wins
    with _cpujit.omp_env():
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and "GOMP_SPINCOUNT" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
