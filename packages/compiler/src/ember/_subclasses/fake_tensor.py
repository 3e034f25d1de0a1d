"""Fake tensors: shape, dtype, strides and a (reported) device, but meta storage, so running a
program on them runs every op's `meta` (its checks and output shapes) and computes nothing.

>>> import ember
>>> from ember._subclasses.fake_tensor import FakeTensorMode
>>> mode = FakeTensorMode()
>>> x = mode.from_tensor(ember.ones(2, 3))
>>> with mode:
...     y = (x @ x.t()).relu()
>>> (tuple(y.shape), str(y.device))
((2, 2), 'cpu')
"""
from __future__ import annotations

from ember import Tensor
from ember._device import device as Device
from ember._dispatch import DispatchMode, call
from ember._tensor import Storage

__all__ = ["FakeTensor", "FakeTensorMode", "DataDependentOutputException",
           "DynamicOutputShapeException", "UnsupportedFakeTensorException"]

_META = Device("meta")
_CPU = Device("cpu")


class UnsupportedFakeTensorException(RuntimeError):
    pass


class DataDependentOutputException(RuntimeError):
    """An op whose result is a value read from the data (`item()`, `tolist()`, `bool(x)`)."""

    def __init__(self, func):
        super().__init__(func)
        self.func = func


class DynamicOutputShapeException(RuntimeError):
    """An op whose output shape depends on the data (`nonzero`, `unique`, masked select)."""

    def __init__(self, func):
        super().__init__(func)
        self.func = func


class FakeTensor(Tensor):
    """A tensor with meta storage that reports the device it stands in for (`fake_device`)."""

    @classmethod
    def _wrap(cls, meta: Tensor, device: Device, mode: FakeTensorMode) -> FakeTensor:
        t = cls._make(meta._storage, meta._shape, meta._stride, meta._offset, meta.dtype, device)
        t.fake_mode = mode
        return t

    @property
    def fake_device(self) -> Device:
        return self.device

    def _meta_view(self) -> Tensor:
        return Tensor._make(self._st, self._shape, self._stride, self._offset, self.dtype, _META)

    @property
    def _np(self):
        raise DataDependentOutputException("aten._local_scalar_dense.default")

    def _host(self):
        raise DataDependentOutputException("aten._local_scalar_dense.default")

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"FakeTensor(..., device='{self.device}', size={tuple(self.shape)}" + \
            ("" if str(self.dtype) == "ember.float32" else f", dtype={self.dtype}") + ")"

    __str__ = __repr__


class FakeTensorMode(DispatchMode):
    """While active, ops on FakeTensors run their meta functions and return FakeTensors.

    allow_non_fake_inputs: real tensors met as inputs (a module's parameters) are turned into
    fake ones instead of raising, as PyTorch's flag of that name does."""

    def __init__(self, *, allow_non_fake_inputs: bool = False, shape_env=None):
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.shape_env = shape_env
        self._memo: dict = {}  # id(real) -> (real, fake)

    def from_tensor(self, t: Tensor, *, static_shapes=None) -> FakeTensor:
        """The fake twin of a real tensor (the same one each time for the same tensor)."""
        if isinstance(t, FakeTensor):
            if t.fake_mode is not self:
                raise UnsupportedFakeTensorException("Mixing fake modes NYI")
            return t
        hit = self._memo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        st = Storage(None, _META, t._storage.nbytes if t.device.type != "meta" else 0)
        f = FakeTensor._make(st, tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype,
                             t.device)
        f.fake_mode = self
        if t.requires_grad:
            f._requires_grad = True
        self._memo[id(t)] = (t, f)
        return f

    def from_real_tensor(self, t: Tensor) -> FakeTensor:
        return self.from_tensor(t)

    def __ember_dispatch__(self, op, args, out):
        dev: list = []
        back: dict = {}  # id(meta view) -> the FakeTensor it stands for

        def unwrap(x):
            if isinstance(x, FakeTensor):
                if x.fake_mode is not self:
                    raise UnsupportedFakeTensorException("Mixing fake modes NYI")
                if not dev or (dev[0].type == "cpu" and x.ndim != 0):
                    dev[:1] = [x.device]
                m = x._meta_view()
                back[id(m)] = x
                return m
            if isinstance(x, Tensor) and x.device.type != "meta":
                if not self.allow_non_fake_inputs:
                    raise RuntimeError(
                        f"{op.qualname}: Please convert all Tensors to FakeTensors first or "
                        "instantiate FakeTensorMode with 'allow_non_fake_inputs'. Found in "
                        f"{op.qualname}(*args)")
                return unwrap(self.from_tensor(x))
            return x
        a = list(args)
        for i in op.tensor_idx:
            a[i] = unwrap(a[i])
        for i in op.list_idx:
            a[i] = [unwrap(x) for x in a[i]]
        if op.device_idx is not None and a[op.device_idx] is not None:
            d = Device(a[op.device_idx])
            if d.type != "meta":
                dev[:1] = [d]
                a[op.device_idx] = _META
        elif not dev and op.device_idx is not None:
            a[op.device_idx] = _META
            dev.append(_CPU)
        if out is not None:
            out = _map(out, unwrap)
        try:
            r = call(op, tuple(a), out)
        except NotImplementedError as e:
            if "no meta function" in str(e):
                raise DynamicOutputShapeException(op.qualname) from e
            raise
        device = dev[0] if dev else _CPU

        def wrap(x):
            if isinstance(x, Tensor):
                orig = back.get(id(x))
                if orig is not None:
                    return orig
                return FakeTensor._wrap(x, device, self) if x.device.type == "meta" else x
            return x
        return _map(r, wrap)


def _map(r, fn):
    if isinstance(r, tuple):
        vals = [_map(x, fn) for x in r]
        return type(r)(*vals) if hasattr(r, "_fields") else tuple(vals)
    if isinstance(r, list):
        return [_map(x, fn) for x in r]
    return fn(r)
