"""Public functions pickle by name and whole modules save (issue 11, defect 24: `F.relu`,
`F.gelu`, `F.sigmoid` claimed to be `ember.relu`..., another object, so `ember.save(model)`
failed on any module holding one, as PyTorch's TransformerEncoderLayer holds F.relu)."""

import io
import pickle

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")


def _public_functions(mod):
    for n in sorted(dir(mod)):
        f = getattr(mod, n, None)
        if not n.startswith("_") and callable(f) and not isinstance(f, type):
            yield n, f


@pytest.mark.parametrize("mod", [ember, F, ember.linalg], ids=lambda m: m.__name__)
def test_every_public_function_pickles_to_itself(mod):
    bad = []
    for n, f in _public_functions(mod):
        try:
            if pickle.loads(pickle.dumps(f)) is not f:
                bad.append(f"{n}: another object")
        except Exception as e:  # noqa: BLE001 - collect them all
            bad.append(f"{n}: {type(e).__name__}: {e}")
    assert bad == []


def test_functional_names_are_their_own():
    for n in ("relu", "gelu", "sigmoid", "tanh", "silu", "softmax"):
        f = getattr(F, n)
        assert pickle.loads(pickle.dumps(f)) is f
        # found by the name it claims, as pickle does
        owner = __import__(f.__module__, fromlist=["_"])
        assert getattr(owner, f.__qualname__) is f


# classes defined in a function cannot be pickled by either library: use a module-level one
class _Holder:
    pass


@pytest.mark.parametrize("lib", ["ember", "torch"])
def test_whole_module_save_load_round_trip(lib):
    t = ember if lib == "ember" else torch
    m = t.nn.Sequential(t.nn.Linear(4, 4), t.nn.ReLU(), t.nn.Linear(4, 2))
    holder = _Holder()
    holder.model, holder.fns = m, [t.nn.functional.relu, t.nn.functional.gelu,
                                   t.nn.functional.sigmoid, t.nn.functional.softmax]
    buf = io.BytesIO()
    t.save(holder, buf)
    buf.seek(0)
    back = t.load(buf, weights_only=False)
    assert back.fns == holder.fns  # the same function objects
    x = t.ones(3, 4)
    np.testing.assert_array_equal(back.model(x).detach().numpy(), m(x).detach().numpy())


def test_transformer_layer_saves_like_torch():
    for t in (ember, torch):
        if not hasattr(t.nn, "TransformerEncoderLayer"):
            pytest.fail(f"{t.__name__} has no TransformerEncoderLayer")
        layer = t.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        layer.eval()
        buf = io.BytesIO()
        t.save(layer, buf)
        buf.seek(0)
        back = t.load(buf, weights_only=False)
        x = t.ones(3, 1, 8)
        np.testing.assert_allclose(back(x).detach().numpy(), layer(x).detach().numpy())
