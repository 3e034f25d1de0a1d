"""ember.func.vmap against torch.func.vmap on the same functions (values, shapes, dtypes)."""
import numpy as np
import pytest

import ember
import ember.func

torch = pytest.importorskip("torch")
import torch.func  # noqa: E402

RNG = np.random.default_rng(0)


def arr(*shape, dtype="float64"):
    if dtype.startswith("int"):
        return RNG.integers(0, 3, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def both(fn, arrays, **vkw):
    """Run vmap(fn) on ember and torch with the same numpy inputs; compare every output."""
    e_in = [ember.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    t_in = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    e = ember.func.vmap(lambda *a: fn(ember, *a), **vkw)(*e_in)
    t = torch.func.vmap(lambda *a: fn(torch, *a), **vkw)(*t_in)
    compare(e, t)


def compare(e, t):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            compare(a, b)
        return
    assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-8)


CASES = [
    ("add", lambda t, x, y: x + y, [arr(4, 3), arr(4, 3)], {}),
    ("bcast", lambda t, x, y: x * y, [arr(4, 3), arr(2, 3)], {"in_dims": (0, None)}),
    ("bcast_low", lambda t, x, y: x - y, [arr(4), arr(2, 3)], {"in_dims": (0, None)}),
    ("scalar_t", lambda t, x, y: x * y, [arr(4, dtype="float64"), arr(3, dtype="float32")],
     {"in_dims": (0, None)}),
    ("where", lambda t, x, y: t.where(x > 0, x, y), [arr(4, 3), arr(3)], {"in_dims": (0, None)}),
    ("sum_dim", lambda t, x: x.sum(1), [arr(4, 3, 2)], {}),
    ("sum_all", lambda t, x: x.sum(), [arr(4, 3, 2)], {}),
    ("mean_neg", lambda t, x: x.mean(-1, keepdim=True), [arr(4, 3, 2)], {"in_dims": 1}),
    ("amax", lambda t, x: t.amax(x, dim=(0, 1)), [arr(3, 4, 2)], {"in_dims": 2}),
    ("max_dim", lambda t, x: x.max(0), [arr(4, 3, 2)], {}),
    ("argmax_none", lambda t, x: x.argmax(), [arr(4, 3, 2)], {}),
    ("max_all", lambda t, x: x.max(), [arr(4, 3)], {}),
    ("var", lambda t, x: x.var(0), [arr(4, 3, 2)], {}),
    ("std_all", lambda t, x: x.std(), [arr(4, 5)], {}),
    ("logsumexp", lambda t, x: t.logsumexp(x, 0), [arr(4, 3)], {}),
    ("softmax", lambda t, x: t.softmax(x, 0), [arr(4, 3)], {}),
    ("cumsum", lambda t, x: x.cumsum(0), [arr(4, 3)], {}),
    ("sort", lambda t, x: x.sort(0).values, [arr(4, 3, 2)], {}),
    ("topk", lambda t, x: x.topk(2, 0), [arr(4, 5)], {}),
    ("matmul_mv", lambda t, x, w: x @ w, [arr(4, 3), arr(3, 2)], {"in_dims": (0, None)}),
    ("matmul_mm", lambda t, x, w: x @ w, [arr(4, 2, 3), arr(4, 3, 5)], {}),
    ("matmul_vb", lambda t, x, w: x @ w, [arr(2, 3), arr(4, 3)], {"in_dims": (None, 0)}),
    ("matmul_vv", lambda t, x, w: x @ w, [arr(4, 3), arr(4, 3)], {}),
    ("matmul_lead", lambda t, x, w: x @ w, [arr(5, 2, 3), arr(4, 3)], {"in_dims": (None, 0)}),
    ("matmul_bl", lambda t, x, w: x @ w, [arr(4, 3), arr(5, 3, 2)], {"in_dims": (0, None)}),
    ("mm", lambda t, x, w: t.mm(x, w), [arr(4, 2, 3), arr(3, 5)], {"in_dims": (0, None)}),
    ("linear_w", lambda t, x, w: t.nn.functional.linear(x, w), [arr(2, 3), arr(4, 5, 3)],
     {"in_dims": (None, 0)}),
    ("einsum", lambda t, x, y: t.einsum("ij,jk->ik", x, y), [arr(4, 2, 3), arr(3, 2)],
     {"in_dims": (0, None)}),
    ("einsum_impl", lambda t, x, y: t.einsum("ij,jk", x, y), [arr(2, 3), arr(4, 3, 2)],
     {"in_dims": (None, 0)}),
    ("view", lambda t, x: x.view(6), [arr(4, 2, 3)], {}),
    ("reshape_mv", lambda t, x: x.reshape(3, -1), [arr(2, 4, 3)], {"in_dims": 1}),
    ("transpose", lambda t, x: x.transpose(0, 1), [arr(4, 2, 3)], {}),
    ("t", lambda t, x: x.t(), [arr(4, 2, 3)], {}),
    ("permute", lambda t, x: x.permute(2, 0, 1), [arr(4, 2, 3, 5)], {}),
    ("unsqueeze", lambda t, x: x.unsqueeze(0) + x.unsqueeze(-1), [arr(4, 3)], {}),
    ("squeeze", lambda t, x: x.squeeze(), [arr(1, 3, 1)], {}),
    ("expand", lambda t, x: x.expand(2, 3), [arr(4, 3)], {}),
    ("getitem", lambda t, x: x[1:, 0], [arr(4, 3, 2)], {}),
    ("adv_index", lambda t, x: x[t.tensor([0, 2, 2])], [arr(4, 3, 2)], {}),
    ("cat", lambda t, x, y: t.cat([x, y], 0), [arr(4, 3), arr(3)], {"in_dims": (0, None)}),
    ("stack", lambda t, x, y: t.stack([x, y], 1), [arr(4, 3), arr(3)], {"in_dims": (0, None)}),
    ("gather", lambda t, x, i: x.gather(0, i), [arr(4, 3, 2), arr(4, 2, 2, dtype="int64")], {}),
    ("index_select", lambda t, x: x.index_select(1, t.tensor([1, 0])), [arr(4, 3, 2)], {}),
    ("unbind", lambda t, x: x.unbind(1), [arr(4, 3, 2)], {}),
    ("split", lambda t, x: x.split(2, 0), [arr(4, 5)], {"in_dims": 1}),
    ("flip", lambda t, x: x.flip(0), [arr(4, 3)], {}),
    ("tril", lambda t, x: x.tril(), [arr(4, 3, 3)], {}),
    ("repeat", lambda t, x: x.repeat(2, 2), [arr(4, 3)], {}),
    ("inv", lambda t, x: t.linalg.inv(x + 3 * t.eye(3, dtype=x.dtype)), [arr(4, 3, 3)], {}),
    ("conv2d", lambda t, x, w: t.nn.functional.conv2d(x, w, padding=1),
     [arr(4, 2, 3, 5, 5), arr(6, 3, 3, 3)], {"in_dims": (0, None)}),
    ("conv2d_unb", lambda t, x, w: t.nn.functional.conv2d(x, w),
     [arr(4, 3, 5, 5), arr(6, 3, 3, 3)], {"in_dims": (0, None)}),
    ("conv2d_w", lambda t, x, w: t.nn.functional.conv2d(x, w), [arr(2, 3, 5, 5),
                                                                arr(4, 6, 3, 3, 3)],
     {"in_dims": (None, 0)}),
    ("maxpool", lambda t, x: t.nn.functional.max_pool2d(x, 2), [arr(4, 2, 3, 4, 4)], {}),
    ("layer_norm", lambda t, x: t.nn.functional.layer_norm(x, (3,)), [arr(4, 2, 3)], {}),
    ("cross_entropy", lambda t, x, y: t.nn.functional.cross_entropy(x, y),
     [arr(4, 2, 5), arr(4, 2, dtype="int64")], {}),
    ("mse", lambda t, x, y: t.nn.functional.mse_loss(x, y), [arr(4, 3), arr(3)],
     {"in_dims": (0, None)}),
    ("gelu_dropout_eval", lambda t, x: t.nn.functional.gelu(x), [arr(4, 3)], {}),
    ("out_dims", lambda t, x: x * 2, [arr(4, 3)], {"out_dims": 1}),
    ("tuple_out", lambda t, x: (x.sum(0), x), [arr(4, 3, 2)], {"out_dims": (0, 1)}),
    ("unbatched_out", lambda t, x: t.ones(2), [arr(4, 3)], {}),
    ("chunked", lambda t, x: x.sin() @ x.t(), [arr(7, 3, 2)], {"chunk_size": 3}),
    ("inplace", lambda t, x: x.clone().mul_(2).add_(1), [arr(4, 3)], {}),
    ("new_zeros", lambda t, x: x.new_zeros(2) + x.sum(), [arr(4, 3)], {}),
    ("zeros_like", lambda t, x: t.zeros_like(x) + 1, [arr(4, 3)], {}),
    ("to_dtype", lambda t, x: x.to(t.float32) * 2, [arr(4, 3)], {}),
    ("pytree", lambda t, d: d["a"] * d["b"], [None], {}),
]


@pytest.mark.parametrize("name,fn,arrays,kw", CASES, ids=[c[0] for c in CASES])
def test_vmap_matches_torch(name, fn, arrays, kw):
    if name == "pytree":
        a, b = arr(4, 3), arr(4, 3)
        e = ember.func.vmap(lambda d: fn(ember, d))({"a": ember.tensor(a), "b": ember.tensor(b)})
        t = torch.func.vmap(lambda d: fn(torch, d))({"a": torch.tensor(a), "b": torch.tensor(b)})
        return compare(e, t)
    both(fn, arrays, **kw)


def test_nested_vmap():
    a, b = arr(2, 3, 4), arr(3, 4)
    def f(t):
        inner = t.func.vmap(lambda x, y: (x * y).sum() + x.max(), in_dims=(0, 0))
        return t.func.vmap(inner, in_dims=(0, None))
    compare(f(ember)(ember.tensor(a), ember.tensor(b)), f(torch)(torch.tensor(a), torch.tensor(b)))
    # the inner level maps a dim the outer one does not
    g = lambda t: t.func.vmap(t.func.vmap(lambda x: x @ x, in_dims=1), in_dims=0)  # noqa: E731
    compare(g(ember)(ember.tensor(a)), g(torch)(torch.tensor(a)))


def test_vmap_errors():
    x = ember.randn(3, 2)
    with pytest.raises(ValueError):
        ember.func.vmap(lambda a, b: a + b)(x, ember.randn(4, 2))
    with pytest.raises(ValueError):
        ember.func.vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError):
        ember.func.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(RuntimeError, match="randomness"):
        ember.func.vmap(lambda a: a + ember.randn(2))(x)
    with pytest.raises(RuntimeError, match="item"):
        ember.func.vmap(lambda a: a.sum().item())(x)
    with pytest.raises(RuntimeError):  # in-place into an unbatched tensor
        ember.func.vmap(lambda a: ember.zeros(2).add_(a))(x)
    with pytest.raises(RuntimeError):
        ember.func.vmap(lambda a: a, randomness="sometimes")
    # torch agrees on each of these
    tx = torch.randn(3, 2)
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a, b: a + b)(tx, torch.randn(4, 2))
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda a: torch.zeros(2).add_(a))(tx)


def test_randomness():
    x = ember.zeros(5, 3)
    same = ember.func.vmap(lambda a: a + ember.randn(3), randomness="same")(x)
    assert np.allclose(same.numpy(), same.numpy()[:1])
    diff = ember.func.vmap(lambda a: a + ember.randn(3), randomness="different")(x)
    assert not np.allclose(diff.numpy()[0], diff.numpy()[1])
    d2 = ember.func.vmap(lambda a: ember.nn.functional.dropout(a + 1, 0.5),
                         randomness="different")(x)
    assert d2.shape == (5, 3)
    s2 = ember.func.vmap(lambda a: ember.rand_like(a), randomness="same")(x)
    assert np.allclose(s2.numpy(), s2.numpy()[:1])
    d3 = ember.func.vmap(lambda a: ember.rand_like(a), randomness="different")(x)
    assert not np.allclose(d3.numpy()[0], d3.numpy()[1])


def test_fallback_loop_matches():
    # ops with no written rule run once per sample and stack
    both(lambda t, x: t.diag(x), [arr(4, 3)])
    both(lambda t, x: t.roll(x, 1), [arr(4, 3, 2)])
    both(lambda t, x: t.kron(x, x), [arr(4, 2, 2)])
