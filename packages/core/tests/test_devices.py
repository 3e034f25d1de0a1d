"""Device registry: cpu, meta, and a toy plugin device registered the way ember-devices does."""
import numpy as np
import pytest

import ember
from ember._device import DeviceBackend, register_device
from ember._ops import lookup, register_kernel
from ember._tensor import Storage, Tensor


class ToyBackend(DeviceBackend):
    """Keeps data in host numpy arrays but under device 'toy'; pointwise ops run their
    formula with the numpy handler, like a real backend would with its own handler."""

    type = "toy"
    is_accelerator = True

    def __init__(self):
        self.pointwise_calls = 0

    def empty(self, nbytes, dev):
        return np.empty(nbytes, np.uint8)

    def from_tensor(self, src, dev, non_blocking=False):
        a = np.ascontiguousarray(src._np)
        st = Storage(a.reshape(-1).view(np.uint8).copy(), dev, a.nbytes)
        return Tensor._make(st, tuple(a.shape), tuple(s // a.itemsize for s in a.strides), 0,
                            src.dtype, dev)

    def to_host(self, t):
        isz = t.dtype.itemsize
        return np.ndarray(t._shape, t.dtype.np, t._storage.data, t._offset * isz,
                          tuple(s * isz for s in t._stride)).copy()

    def pointwise_kernel(self, op):
        """The toy's kernel for a pointwise op: its formula over the numpy handler."""
        from ember._dispatch import NP, pointwise_prepare

        def kernel(*args):
            rdt, cdt = pointwise_prepare(op, args)  # core's checks and promotion
            self.pointwise_calls += 1
            a = [self.to_host(x).astype(cdt.np) if isinstance(x, Tensor) else x for x in args]
            r = np.asarray(op.pointwise(NP, *a)).astype(rdt.np)
            return self.from_tensor(Tensor._from_np(r, rdt), args[0].device)
        return kernel


@pytest.fixture(scope="module")
def toy():
    b = ToyBackend()
    register_device(b)
    ops = [lookup("mul"), lookup("add")]
    for op in ops:  # a device fills the entries' slots
        register_kernel(op, "toy", b.pointwise_kernel(op))
    yield b
    from ember import _device
    _device._BACKENDS.pop("toy")
    for op in ops:
        op.kernels.pop("toy")


def test_toy_device_roundtrip(toy):
    x = ember.arange(6.0).reshape(2, 3)
    t = x.to("toy")
    assert t.device == ember.device("toy") and t.device.type == "toy"
    y = (t * 2 + 1).cpu()
    assert y.tolist() == [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]]
    assert toy.pointwise_calls == 2
    assert repr(t).endswith("device='toy')")


def test_toy_factory_and_accelerator(toy):
    z = ember.zeros(2, 2, device="toy")
    assert z.device.type == "toy" and z.cpu().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert ember.accelerator.is_available()
    assert ember.accelerator.current_accelerator() == ember.device("toy")


def test_toy_missing_kernel_is_clear(toy):
    t = ember.ones(3).to("toy")
    with pytest.raises(NotImplementedError, match="toy"):
        ember.ops.aten.clone(t)


def test_toy_kernel_through_library(toy):
    """A device kernel for one of core's ops, through the public torch.library-like call."""
    calls = []

    def tril(x, diagonal=0):
        calls.append(diagonal)
        return toy.from_tensor(ember.tril(x.cpu(), diagonal), x.device)
    ember.library.register_kernel("aten::tril", "toy", tril)
    try:
        t = ember.ones(3, 3).to("toy")
        assert ember.tril(t, -1).cpu().tolist() == ember.tril(ember.ones(3, 3), -1).tolist()
        assert calls == [-1]
    finally:
        ember.ops.aten.tril.kernels.pop("toy")
    with pytest.raises(NotImplementedError, match="toy"):
        ember.tril(t)


def test_mixing_devices_raises(toy):
    with pytest.raises(RuntimeError, match="same device"):
        ember.ones(3).to("toy") + ember.ones(3)


def test_meta_device_shapes():
    a = ember.empty(3, 4, device="meta")
    b = ember.empty(4, device="meta", dtype=ember.float16)
    c = a + b
    assert c.device.type == "meta" and tuple(c.shape) == (3, 4) and c.dtype == ember.float32
    v = c.t().reshape(12)
    assert tuple(v.shape) == (12,) and v.device.type == "meta"
    with pytest.raises(NotImplementedError):
        ember.empty((), device="meta").item()


def test_unknown_device_string():
    with pytest.raises(RuntimeError):
        ember.device("nosuchdev")
    with pytest.raises(RuntimeError):
        ember.device("cpu:x")


def test_cuda_query_never_raises():
    # with or without ember-devices, on a machine without a GPU these answer "none"
    import shutil
    if shutil.which("nvidia-smi") is None:
        assert ember.cuda.is_available() is False
        assert ember.cuda.device_count() == 0


def test_device_objects():
    d = ember.device("cuda:1")
    assert d.type == "cuda" and d.index == 1 and str(d) == "cuda:1"
    assert repr(ember.device("cpu")) == "device(type='cpu')"
    assert ember.device("cpu") == "cpu"


def test_accelerator_device_index_context(toy, monkeypatch):
    cur = [0]
    monkeypatch.setattr(toy, "current_device", lambda: cur[0], raising=False)
    monkeypatch.setattr(toy, "set_device", lambda i: cur.__setitem__(0, i), raising=False)
    ember.accelerator.device_index(3)  # without `with`: nothing changes (as torch's)
    assert ember.accelerator.current_device_idx() == 0
    with ember.accelerator.device_index(2):
        assert ember.accelerator.current_device_index() == 2
        with ember.accelerator.device_index(None):
            assert cur[0] == 2
    assert cur[0] == 0
    ember.accelerator.set_device_idx(1)
    assert ember.accelerator.current_device_index() == 1
