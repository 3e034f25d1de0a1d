"""float8 math on CPU against torch: the ops torch's kernels take (copies, concatenation,
indexing, matmul, equality, abs, mul of two tensors, sums to another dtype) give torch's values
and dtypes; the others raise NotImplementedError as torch does; promotion with float8 raises
RuntimeError."""
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF

CASES = {
    "add": lambda m, x, y: x + y, "sub": lambda m, x, y: x - y, "div": lambda m, x, y: x / y,
    "neg": lambda m, x, y: -x, "add_scalar": lambda m, x, y: x + 1, "mul_scalar": lambda m, x, y:
    x * 2.0, "sin": lambda m, x, y: x.sin(), "exp": lambda m, x, y: x.exp(),
    "relu": lambda m, x, y: m.relu(x), "sum": lambda m, x, y: x.sum(), "mean": lambda m, x, y:
    x.mean(), "max": lambda m, x, y: x.max(), "lt": lambda m, x, y: x < y,
    "sort": lambda m, x, y: x.sort()[0], "sqrt": lambda m, x, y: x.sqrt(),
    "maximum": lambda m, x, y: m.maximum(x, y), "clamp": lambda m, x, y: x.clamp(0, 1),
    "add_": lambda m, x, y: x.clone().add_(y), "cumsum": lambda m, x, y: x.cumsum(0),
    "softmax": lambda m, x, y: x.softmax(0), "masked_fill": lambda m, x, y:
    x.masked_fill(m.tensor([True, False, True]), 0.0), "flip": lambda m, x, y: x.flip(0),
    "argmax": lambda m, x, y: x.argmax(), "isinf": lambda m, x, y: x.isinf(),
    "logical_not": lambda m, x, y: m.logical_not(x), "gather": lambda m, x, y:
    x.gather(0, m.tensor([0])),
    # what torch runs on float8
    "mul": lambda m, x, y: x * y, "mul_": lambda m, x, y: x.clone().mul_(y),
    "eq": lambda m, x, y: x == y, "ne": lambda m, x, y: x != y, "eq_scalar": lambda m, x, y:
    x == 1.0, "abs": lambda m, x, y: x.abs(), "isnan": lambda m, x, y: x.isnan(),
    "where": lambda m, x, y: m.where(m.tensor([True, False, True]), x, y),
    "cat": lambda m, x, y: m.cat([x, y]), "stack": lambda m, x, y: m.stack([x, y]),
    "index": lambda m, x, y: x[m.tensor([0, 2])], "index_select": lambda m, x, y:
    x.index_select(0, m.tensor([1])), "setitem": lambda m, x, y: _setitem(x.clone(), y),
    "clone": lambda m, x, y: x.clone(), "to_float": lambda m, x, y: x.float(),
    "fill_": lambda m, x, y: x.clone().fill_(2), "zero_": lambda m, x, y: x.clone().zero_(),
    "sum_dtype": lambda m, x, y: x.sum(dtype=m.float32), "mm": lambda m, x, y:
    x.reshape(3, 1) @ y.reshape(1, 3), "linear": lambda m, x, y: (EF if m is ember else TF)
    .linear(x.reshape(1, 3), y.reshape(1, 3)), "pad": lambda m, x, y: (EF if m is ember else TF)
    .pad(x, (1, 1)), "roll": lambda m, x, y: x.roll(1), "repeat": lambda m, x, y: x.repeat(2),
    "masked_select": lambda m, x, y: x.masked_select(m.tensor([True, False, True])),
    "any": lambda m, x, y: x.any(), "reshape_t": lambda m, x, y: x.reshape(3, 1).t()
    .contiguous(), "zeros_like": lambda m, x, y: m.zeros_like(x),
}


def _setitem(x, y):
    x[0] = 1.0
    return x


@pytest.mark.parametrize("dt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("name", list(CASES))
def test_float8_ops_as_torch(name, dt):
    out = []
    for m in (ember, torch):
        x = m.tensor([1.0, 2.0, -0.5]).to(getattr(m, dt))
        y = m.tensor([0.5, 1.0, 3.0]).to(getattr(m, dt))
        try:
            r = CASES[name](m, x, y)
            out.append(("ok", str(r.dtype).split(".")[1], r.float().tolist()))
        except NotImplementedError as exc:
            out.append(("NotImplementedError", dt.capitalize() in str(exc)))
    assert out[0] == out[1]


def test_float8_promotion_raises_runtime_error():
    for m in (ember, torch):
        x = m.ones(2).to(m.float8_e4m3fn)
        with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
            x + m.ones(2)
        with pytest.raises(RuntimeError, match="attempted to promote Float8_e4m3fn and "
                                               "Float8_e5m2"):
            m.promote_types(m.float8_e4m3fn, m.float8_e5m2)


@pytest.mark.parametrize("f", [
    lambda m, dt: m.rand(2, dtype=dt), lambda m, dt: m.randn(2, dtype=dt),
    lambda m, dt: m.arange(3, dtype=dt), lambda m, dt: m.linspace(0, 1, 3, dtype=dt),
    lambda m, dt: m.randint(0, 3, (2,), dtype=dt), lambda m, dt: m.empty(2, dtype=dt).normal_(),
    lambda m, dt: m.eye(2, dtype=dt), lambda m, dt: m.full((2,), 1.5, dtype=dt),
    lambda m, dt: m.zeros(2, dtype=dt)])
@pytest.mark.parametrize("dt", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_factories_as_torch(f, dt):
    out = []
    for m in (ember, torch):
        try:
            r = f(m, getattr(m, dt))
            out.append(("ok", str(r.dtype).split(".")[1]))
        except NotImplementedError as exc:
            out.append(("NotImplementedError", dt.capitalize() in str(exc)))
    assert out[0] == out[1]
