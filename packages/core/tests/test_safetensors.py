"""ember.utils.safetensors against files written by safetensors.torch, and malformed input."""
import numpy as np
import pytest
from harness import torch

import ember
from ember.utils.safetensors import SafetensorError, load, load_file, save, save_file

st_torch = pytest.importorskip("safetensors.torch")


def _pairs():
    return {"w": (ember.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)),
            "b": (ember.tensor([1.5, -2.0], dtype=ember.bfloat16),
                  torch.tensor([1.5, -2.0], dtype=torch.bfloat16)),
            "i": (ember.tensor([1, 2, 3]), torch.tensor([1, 2, 3])),
            "m": (ember.tensor([True, False]), torch.tensor([True, False]))}


def _same(e, t):
    assert tuple(e.shape) == tuple(t.shape) and e.dtype.name == str(t.dtype).split(".")[-1]
    np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


def test_torch_writes_ember_reads(tmp_path):
    p = tmp_path / "m.safetensors"
    st_torch.save_file({k: v[1] for k, v in _pairs().items()}, p)
    got = load_file(p)
    for k, (_, t) in _pairs().items():
        _same(got[k], t)


def test_ember_writes_torch_reads(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({k: v[0] for k, v in _pairs().items()}, p, metadata={"format": "pt"})
    got = st_torch.load_file(p)
    for k, (e, _) in _pairs().items():
        _same(e, got[k])
    assert load(save({"x": ember.ones(2).t()}))["x"].tolist() == [1.0, 1.0]


def test_noncontiguous_and_shared():
    x = ember.arange(6.0).reshape(2, 3)
    assert load(save({"t": x.t()}))["t"].tolist() == x.t().tolist()
    with pytest.raises(RuntimeError, match="share memory"):
        save({"a": x, "b": x[0]})


def test_malformed_refused():
    good = save({"w": ember.ones(4)})
    with pytest.raises(SafetensorError):
        load(good[:-3])
    with pytest.raises(SafetensorError):
        load(b"\xff" * 8 + b"{}")


def test_zero_dim_keeps_its_shape(tmp_path):
    """issue 11 #9: a 0-dim tensor was saved with shape (1,)."""
    e = {"a": ember.tensor(3.5), "b": ember.tensor(7, dtype=ember.int32)}
    t = {"a": torch.tensor(3.5), "b": torch.tensor(7, dtype=torch.int32)}
    for k, v in load(save(e)).items():
        _same(v, t[k])
    save_file(e, tmp_path / "z.safetensors")
    for k, v in st_torch.load_file(tmp_path / "z.safetensors").items():
        assert v.shape == () and v.item() == t[k].item()
    st_torch.save_file(t, tmp_path / "t.safetensors")
    for k, v in load_file(tmp_path / "t.safetensors").items():
        _same(v, t[k])


def test_non_tensor_value_names_key_and_type():
    """issue 11 #19: a list value raised AttributeError `_storage`; safetensors.torch raises
    ValueError naming the key and the type."""
    with pytest.raises(Exception) as want:
        st_torch.save({"a": [1, 2]})
    with pytest.raises(type(want.value), match=r"Key `a` is invalid.*list"):
        save({"a": [1, 2]})
    with pytest.raises(type(want.value), match=r"Key `w` is invalid.*int"):
        save_file({"w": 3}, "unused.safetensors")


def test_unsigned_types_both_ways():
    vals = {"uint16": [1, 2**16 - 1], "uint32": [1, 2**32 - 1], "uint64": [1, 2**64 - 1]}
    e = {k: ember.tensor(v, dtype=getattr(ember, k)) for k, v in vals.items()}
    t = {k: torch.tensor(v, dtype=getattr(torch, k)) for k, v in vals.items()}
    for k, v in st_torch.load(save(e)).items():
        assert v.dtype == t[k].dtype and v.tolist() == vals[k]
    for k, v in load(st_torch.save(t)).items():
        assert v.dtype is e[k].dtype and v.tolist() == vals[k]
