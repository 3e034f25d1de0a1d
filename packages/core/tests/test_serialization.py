"""ember.save/ember.load: torch's zip format both ways, weights-only safety, corrupt files."""
import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
from harness import torch

import ember


def _np(x):
    return x.detach().float().numpy() if str(x.dtype).endswith(("bfloat16", "float16")) \
        else x.detach().numpy()


def _state(t):
    return collections.OrderedDict(
        w=t.arange(6.0).reshape(2, 3), b=t.tensor([1.5, -2.0]).to(t.bfloat16),
        i=t.tensor([1, 2, 3]), m=t.tensor([True, False]), v=t.arange(10.0)[2:5],
        d=t.ones(2, 2, dtype=t.float64).t())


def _compare(a, b):
    assert list(a) == list(b)
    for k in a:
        assert tuple(a[k].shape) == tuple(b[k].shape), k
        assert str(a[k].dtype).split(".")[-1] == str(b[k].dtype).split(".")[-1], k
        np.testing.assert_array_equal(_np(a[k]), _np(b[k]))
        assert tuple(a[k].stride()) == tuple(b[k].stride()), k


def test_torch_writes_ember_reads(tmp_path):
    p = tmp_path / "ck.pt"
    torch.save({"sd": _state(torch), "step": 3, "name": "x", "t": (1, 2.5)}, p)
    got = ember.load(p)
    assert got["step"] == 3 and got["name"] == "x" and got["t"] == (1, 2.5)
    _compare(got["sd"], _state(torch))


def test_ember_writes_torch_reads(tmp_path):
    p = tmp_path / "ck.pt"
    ember.save({"sd": _state(ember), "step": 7}, p)
    got = torch.load(p, weights_only=True)
    assert got["step"] == 7
    _compare(got["sd"], _state(ember))


def test_views_share_storage_roundtrip():
    base = ember.arange(8.0)
    buf = io.BytesIO()
    ember.save([base, base[2:4]], buf)
    buf.seek(0)
    a, b = ember.load(buf)
    b.fill_(-1.0)
    assert a.tolist()[2:4] == [-1.0, -1.0]


def test_requires_grad_and_mmap(tmp_path):
    p = tmp_path / "m.pt"
    torch.save({"x": torch.ones(3, requires_grad=True), "y": torch.arange(5.0)}, p)
    got = ember.load(p, mmap=True)
    assert got["x"].requires_grad
    assert got["y"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/ember_pwned",))


def test_malicious_pickle_refused(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"x": _Evil()}, p)
    if os.path.exists("/tmp/ember_pwned"):
        os.remove("/tmp/ember_pwned")
    with pytest.raises(pickle.UnpicklingError, match="os.system|posix.system"):
        ember.load(p)
    assert not os.path.exists("/tmp/ember_pwned")


def test_unknown_class_needs_safe_globals(tmp_path):
    p = tmp_path / "od.pt"
    torch.save({"c": collections.Counter("aab")}, p)
    with pytest.raises(pickle.UnpicklingError, match="Counter"):
        ember.load(p)
    with ember.serialization.safe_globals([collections.Counter]):
        assert ember.load(p)["c"]["a"] == 2


def test_truncated_and_garbage(tmp_path):
    p = tmp_path / "ck.pt"
    torch.save({"w": torch.ones(100)}, p)
    raw = p.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(RuntimeError, match="truncated or corrupt"):
        ember.load(tmp_path / "trunc.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(RuntimeError):
        ember.load(tmp_path / "junk.pt")


def test_storage_too_short_is_an_error(tmp_path):
    p = tmp_path / "ck.pt"
    torch.save({"w": torch.ones(100)}, p)
    src = zipfile.ZipFile(p)
    out = tmp_path / "short.pt"
    with zipfile.ZipFile(out, "w") as zf:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data/0"):
                data = data[:8]
            zf.writestr(info.filename, data)
    with pytest.raises(RuntimeError, match="truncated or corrupt"):
        ember.load(out)


def test_plain_pickle_of_tensor():
    t = ember.tensor([[1, 2], [3, 4]], dtype=ember.int32)
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == ember.int32 and u.tolist() == [[1, 2], [3, 4]]


def test_whole_torch_model_loads_with_safe_globals(tmp_path):
    p = tmp_path / "model.pt"
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    torch.save(tm, p)
    with pytest.raises(pickle.UnpicklingError, match="Sequential"):
        ember.load(p)
    allowed = [ember.nn.Sequential, ember.nn.Linear, ember.nn.ReLU]
    with ember.serialization.safe_globals(allowed):
        em = ember.load(p)
    assert isinstance(em[0], ember.nn.modules.linear.Linear)
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(),
                               tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)
