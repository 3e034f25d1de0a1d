"""make_fx(functionalize(f)) with in-place writes through views (select, slice, view/reshape,
transpose, permute, diagonal, narrow, as_strided, chained views): the graph has no in-place op
but the final write-back `copy_`, and its outputs and the written inputs equal eager and
torch.func.functionalize's results."""
import numpy as np
import pytest
import torch as _torch
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

import ember
from ember.fx.experimental.proxy_tensor import functionalize, make_fx


def _sel(x):
    y = x[0]
    y.add_(1)
    return x * 2, y + 0


def _flat_slice(x):
    x.view(-1)[2:5].mul_(2)
    return x + 0


def _transpose_fill(x):
    x.t().fill_(0)
    return x + 1


def _diag(x):
    d = x.diagonal()
    d.sub_(3)
    return x.sum(), d * 1


def _chained(x):
    v = x[1:].transpose(0, 1)[1]
    v.mul_(10)
    w = x[:, 0]          # a view taken before the next write, read after it
    x[2].add_(5)
    return w + 0, v + 0, x.clone()


def _permute_reshape(x):
    p = x.reshape(2, 2, 3).permute(2, 0, 1)
    p[0].add_(7)
    return x * 1


def _narrow_strided(x):
    x.narrow(1, 1, 2).mul_(-1)
    x.as_strided((2, 2), (4, 1), 1).add_(100)
    return x + 0


def _base_then_view(x):
    y = x[:, 1]
    x.add_(1)            # the base written: the earlier view sees it
    y.mul_(2)
    return y + 0, x + 0


def _intermediate(x):
    z = x * 3
    z[1].zero_()
    return z + 1


def _identity_alias(x):
    x.contiguous()[1].add_(2)
    return x + 0


def _setitem(x):
    x[0] = 5
    x[1:3] = x[3:4] * 2                       # broadcast copy_ into a slice
    x[:, 0] = (x[0, :1] * 3).double()         # and a dtype cast
    return x + 0


CASES = [_identity_alias, _setitem, _sel, _flat_slice, _transpose_fill, _diag, _chained,
         _permute_reshape, _narrow_strided, _base_then_view, _intermediate]


def _input(shape=(3, 4)):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_writes_through_views_match_torch_functionalize(f):
    shape = (4, 3) if f is _permute_reshape else (3, 4)
    if f in (_sel, _diag, _chained, _transpose_fill, _setitem):
        shape = (4, 4)
    data = _input(shape)
    gm = make_fx(functionalize(f))(ember.tensor(data))
    for n in gm.graph.nodes:
        if n.op == "call_function" and hasattr(n.target, "tags"):
            assert "inplace" not in n.target.tags or n.target.name == "copy_", n.format_node()
            assert not n.target.mutated_idx or n.next.op == "output" or \
                n.target.name == "copy_", n.format_node()
    copies = [n for n in gm.graph.nodes if n.op == "call_function"
              and getattr(n.target, "name", "") == "copy_"]
    # the input is written back once, at the end (an intermediate's writes need none)
    assert len(copies) == (0 if f is _intermediate else 1)
    x = ember.tensor(data)
    got = gm(x)
    tx = _torch.tensor(data)
    ref = _torch.func.functionalize(f)(tx)
    tgm = torch_make_fx(_torch.func.functionalize(f))(_torch.tensor(data))
    ref2 = tgm(_torch.tensor(data))
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    ref2 = ref2 if isinstance(ref2, tuple) else (ref2,)
    for a, b, c in zip(got, ref, ref2, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)   # the input written


def test_write_through_unfold_is_refused():
    def g(x):
        x.unfold(0, 2, 1).add_(1)
        return x
    with pytest.raises(NotImplementedError, match="through the view"):
        make_fx(functionalize(g))(ember.ones(4))


def test_write_through_unbind_is_refused_and_reads_regenerate():
    def g(x):
        x.unbind(0)[1].add_(1)
        return x
    with pytest.raises(NotImplementedError, match="through the view"):
        make_fx(functionalize(g))(ember.ones(2, 3))

    def h(x):
        a, b = x.unbind(0)
        x.mul_(2)            # the base written: the earlier unbind's items see it
        return a + b
    data = _input((2, 3))
    gm = make_fx(functionalize(h))(ember.tensor(data))
    x = ember.tensor(data)
    ref = _torch.func.functionalize(h)(tx := _torch.tensor(data))
    np.testing.assert_allclose(gm(x).numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)


@pytest.mark.parametrize("mode", ["fake", "symbolic"])
def test_views_functionalized_on_fake_and_symbolic_traces(mode):
    def f(x):
        p = x.reshape(2, 6).contiguous()   # reshape and contiguous that are views
        p[0].add_(7)
        a, b = x.split(2)
        x.mul_(2)                          # the split's items read after: regenerated
        return x * 1, a + b
    gm = make_fx(functionalize(f), tracing_mode=mode)(ember.ones(4, 3))
    writes = [n for n in gm.graph.nodes if n.op == "call_function"
              and getattr(n.target, "mutated_idx", None)]
    assert [n.target.name for n in writes] == ["copy_"]
    data = _input((4, 3))
    x, tx = ember.tensor(data), _torch.tensor(data)
    for a, b in zip(gm(x), _torch.func.functionalize(f)(tx), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)
