"""C++ code generation details of static CPU graphs (cpp.py): sizes baked in and index
divisions folded, column sums (bias gradients) with the output dim in the vector loop, float
partial sums of rows, exp kept on the vector path for masked (-inf) inputs; values and
gradients against PyTorch eager."""
import math

import numpy as np
import pytest
import torch
from inductor_helpers import Recorder

import ember
import ember._dynamo as dynamo


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield


def _run(fn, *args):
    rec = Recorder()
    out = ember.compile(fn, backend=rec)(*args)
    return out, rec.graphs[0].last


def test_head_split_copy_has_no_division():
    """(B, T, C) -> (B, H, T, D) contiguous: 4 * 32 == 128 is known once sizes are values, so
    the copy indexes without / or %."""
    x = ember.randn(2, 8, 128)
    fn = lambda x: x.view(2, 8, 4, 32).transpose(1, 2).contiguous() * 2  # noqa: E731
    out, c = _run(fn, x)
    np.testing.assert_allclose(out.numpy(), fn(x).numpy())
    body = c.kernel_src.split("{", 1)[1]
    assert " / " not in body and " % " not in body, c.kernel_src


@pytest.mark.parametrize("post", ["sum", "mean", "sum_plus"])
def test_column_sum(post):
    x = np.random.default_rng(0).standard_normal((4, 32, 48)).astype(np.float32)
    fns = {"sum": lambda t: t.sum(dim=(0, 1)), "mean": lambda t: t.mean(dim=0),
           "sum_plus": lambda t: (t * t).sum(dim=(0, 1)) + 1}
    out, c = _run(fns[post], ember.tensor(x))
    np.testing.assert_allclose(out.numpy(), fns[post](torch.tensor(x)).numpy(), rtol=1e-5,
                               atol=1e-5)
    assert c.n_kernels == 1 and "acc_buf0[" in c.kernel_src, c.kernel_src
    assert "float part_buf0[" in c.kernel_src, c.kernel_src   # float partials per column


def test_row_sum_float_partials_and_long_rows():
    x = np.random.default_rng(1).standard_normal((6, 100)).astype(np.float32)
    out, c = _run(lambda t: t.sum(-1), ember.tensor(x))
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
    assert "float part_" in c.kernel_src
    dynamo.reset()
    y = np.random.default_rng(2).standard_normal((2, 10000)).astype(np.float32) + 1
    out, c = _run(lambda t: t.sum(-1), ember.tensor(y))          # longer rows stay double
    np.testing.assert_allclose(out.numpy(), y.astype(np.float64).sum(-1), rtol=1e-6)
    assert "part_" not in c.kernel_src


def test_exp_special_values():
    v = [float("nan"), float("-inf"), float("inf"), -200.0, -86.5, -20.0, 0.0, 3.0, 88.0]
    for dt, tdt in ((ember.float32, torch.float32), (ember.float64, torch.float64)):
        out, _ = _run(lambda t: t.exp(), ember.tensor(v, dtype=dt))
        ref = torch.tensor(v, dtype=tdt).exp().numpy()
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
        dynamo.reset()


def test_exp_float32_polynomial_accuracy():
    """float32 exp of a value that can be -inf (masked_fill) is em_expf (a vectorized
    polynomial with no scalar fallback): within 2 ulp of float64's exp below 88.37 (5 ulp up
    to 88.72), 0 below -87; other exps stay libmvec's."""
    v = np.concatenate([np.linspace(-87.0, 88.3, 200001, dtype=np.float32),
                        np.linspace(88.3, 88.72, 1001, dtype=np.float32)])
    masked = lambda t: t.masked_fill(t > 100, float("-inf")).exp()  # noqa: E731
    out, c = _run(masked, ember.tensor(v))
    assert "em_expf(" in c.kernel_src and "std::exp(" not in c.kernel_src, c.kernel_src
    ref = np.exp(v.astype(np.float64))
    rel = np.abs(out.numpy() - ref) / ref
    assert rel[:200001].max() < 2.5e-7 and rel.max() < 6e-7, rel.max()
    dynamo.reset()
    out, _ = _run(masked, ember.tensor([-87.01, -1e30, 88.73, 101.0], dtype=ember.float32))
    assert out.numpy().tolist() == [0.0, 0.0, float("inf"), 0.0]
    dynamo.reset()
    _, c = _run(lambda t: t.exp(), ember.tensor(v))
    assert "em_expf(" not in c.kernel_src and "std::exp(" in c.kernel_src


def test_cat_pieces_index_without_division():
    """The q/k/v split's backward: three head-merged matmul grads scattered into (B, T, 3C).
    Each piece's masked load indexes with its own range ([0, 128)), so the merge's flat-index
    decomposition folds: no division of an offset that carries the batch's stride."""
    xs = np.random.default_rng(6).standard_normal((2, 8, 384)).astype(np.float32) * 0.3

    def fn(x):
        q, k, v = x.split(128, dim=-1)
        q, k, v = [t.view(2, 8, 4, 32).transpose(1, 2) for t in (q, k, v)]   # (B, H, T, D)
        return ((q @ k.transpose(-2, -1)) @ v).square().sum()
    rec = Recorder()
    x = ember.tensor(xs, requires_grad=True)
    ember.compile(fn, backend=rec)(x).backward()
    tx = torch.tensor(xs, requires_grad=True)
    fn(tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    src = rec.graphs[1].last.kernel_src
    assert "slice_scatter" in src and "1024*x0)) /" not in src and "1024*x0)) %" not in src, src


def test_masked_softmax_and_grad():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 4, 16, 16)).astype(np.float32)

    def fn(m, x):
        mask = m.tril(m.ones(16, 16)) == 0
        att = (x * (1.0 / math.sqrt(8))).masked_fill(mask, float("-inf"))
        return m.nn.functional.softmax(att, dim=-1)
    x = ember.tensor(xs, requires_grad=True)
    out = ember.compile(lambda t: fn(ember, t))(x)
    g = ember.tensor(rng.standard_normal(out.shape).astype(np.float32))
    out.backward(g)
    tx = torch.tensor(xs, requires_grad=True)
    ref = fn(torch, tx)
    ref.backward(torch.tensor(g.numpy()))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_linear_bias_grad_training_step():
    """A linear layer's bias gradient is a column sum: compiled grads equal torch's."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((24, 16)).astype(np.float32)
    b0 = rng.standard_normal(24).astype(np.float32)
    xs = rng.standard_normal((3, 40, 16)).astype(np.float32)
    grads = []
    for m in (ember, torch):
        lin = m.nn.Linear(16, 24)
        with m.no_grad():
            lin.weight.copy_(m.tensor(w0))
            lin.bias.copy_(m.tensor(b0))
        f = ember.compile(lin) if m is ember else lin
        loss = m.nn.functional.gelu(f(m.tensor(xs))).square().mean()
        loss.backward()
        grads.append((lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_softmax_exp_computed_once():
    """The exp of a softmax row is kept from the sum's loop for the normalizing loop (one
    per-row array; the normalizing loop's own exp is dead code for the C++ compiler)."""
    x = np.random.default_rng(5).standard_normal((3, 5, 64)).astype(np.float32)
    out, c = _run(lambda t: ember.softmax(t, -1), ember.tensor(x))
    np.testing.assert_allclose(out.numpy(), torch.softmax(torch.tensor(x), -1).numpy(),
                               rtol=1e-6, atol=1e-7)
    src = c.kernel_src
    assert src.count("[64];") == 1 and "row0[r0] = " in src and "= row0[r0];" in src, src


def test_freed_buffers_stay_in_the_heap_for_compiled_steps():
    """Core's glibc setting (ember._malloc, applied at import) covers compiled CPU graphs too: a
    freed 4 MB buffer's memory is reused from the heap instead of unmapped and faulted in again
    at every step."""
    import sys

    import ember._malloc
    out, _ = _run(lambda t: t * 2, ember.ones(4))
    assert out.numpy().tolist() == [2.0] * 4
    if sys.platform.startswith("linux") and ember._malloc.tuned:
        a = np.empty(1 << 20, np.float32)
        p = a.__array_interface__["data"][0]
        del a
        b = np.empty(1 << 20, np.float32)
        assert b.__array_interface__["data"][0] == p      # the same heap block again
