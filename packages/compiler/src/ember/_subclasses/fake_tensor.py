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

from ember import Tensor, _dispatch
from ember._device import device as Device
from ember._dispatch import DispatchMode, call
from ember._dtype import int64 as _INT64
from ember._size import contiguous_strides
from ember._state import state
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

    def item(self):
        """Under a ShapeEnv: an unbacked symbol standing for the value (recorded by an active
        make_fx as an `item` node); without one, PyTorch's data-dependent error."""
        env = self.fake_mode.shape_env
        if env is None or not env.allow_scalar_outputs:
            raise DataDependentOutputException("aten._local_scalar_dense.default")
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               "Scalar")
        if self.dtype.is_floating_point:
            v = env.create_unbacked_symfloat()
        else:
            v = env.create_unbacked_symint_scalar()
        from ember._state import state
        for m in reversed(state.modes):
            record = getattr(m, "record_item", None)
            if record is not None:
                record(self, v)
                break
        return v

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

    def from_tensor(self, t: Tensor, *, static_shapes=None, source=None) -> FakeTensor:
        """The fake twin of a real tensor (the same one each time for the same tensor).
        With a shape_env (and source, the input's name), its sizes become symbols."""
        if isinstance(t, FakeTensor):
            if t.fake_mode is not self:
                raise UnsupportedFakeTensorException("Mixing fake modes NYI")
            return t
        hit = self._memo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        shape, stride = tuple(t.shape), tuple(t.stride())
        nbytes = t._storage.nbytes if t.device.type != "meta" else 0
        if self.shape_env is not None and not static_shapes:
            shape = tuple(self.shape_env.create_symint(n, (source or "t", i))
                          for i, n in enumerate(shape))
            if t.is_contiguous():
                stride = contiguous_strides(shape)
            nbytes = t.dtype.itemsize
            for n in shape:
                nbytes = nbytes * n
        st = Storage(None, _META, nbytes)
        f = FakeTensor._make(st, shape, stride, t.storage_offset(), t.dtype, t.device)
        f.fake_mode = self
        if t.requires_grad:
            f._requires_grad = True
        self._memo[id(t)] = (t, f)
        return f

    def from_real_tensor(self, t: Tensor) -> FakeTensor:
        return self.from_tensor(t)

    def __ember_dispatch__(self, op, args, out):
        if state.grad_enabled and _dispatch.autograd_hook is not None and \
                _needs_grad(op, args):
            # autograd records the call (its node's vjp runs later, traced like any op); the
            # engine computes the output through this mode (_fake_aware_execute)
            _install_fake_aware_execute()
            try:
                return _dispatch.autograd_hook(op, args, out)
            except DataDependentOutputException:
                if op.vjp is not None or op.decomp is None:
                    raise
                # a composite whose decomposition checks values (binary_cross_entropy's
                # range check): computed on meta below, not differentiable through the trace
        dev: list = []
        back: dict = {}  # id(meta view) -> the FakeTensor it stands for

        def unwrap(x):
            if isinstance(x, FakeTensor):
                if x.fake_mode is not self:
                    raise UnsupportedFakeTensorException("Mixing fake modes NYI")
                if not dev or (dev[0].type == "cpu" and dev[1]):
                    dev[:2] = [x.device, x.ndim == 0]
                elif x.device != dev[0] and not (x.device.type == "cpu" and x.ndim == 0):
                    raise RuntimeError(f"Expected all tensors to be on the same device, but "
                                       f"found at least two devices, {dev[0]} and {x.device}! "
                                       f"({op.qualname})")
                m = x._meta_view()
                back[id(m)] = x
                return m
            if isinstance(x, Tensor) and x.device.type != "meta":
                if not self.allow_non_fake_inputs:
                    raise RuntimeError(
                        f"{op.qualname}: Please convert all Tensors to FakeTensors first or "
                        "instantiate FakeTensorMode with 'allow_non_fake_inputs'. Found in "
                        f"{op.qualname}(*args)")
                return unwrap(self.from_tensor(x, static_shapes=True))  # (constants)
            return x
        a = list(args)
        for i in op.tensor_idx:
            a[i] = unwrap(a[i])
        for i in op.list_idx:
            a[i] = [unwrap(x) for x in a[i]]
        if op.device_idx is not None and a[op.device_idx] is not None:
            d = Device(a[op.device_idx])
            if d.type != "meta":
                dev[:1] = [_indexed(d)]
                a[op.device_idx] = _META
        elif not dev and op.device_idx is not None:
            a[op.device_idx] = _META
            dev.append(_indexed(state.device_stack[-1] if state.device_stack
                                else (state.default_device or _CPU)))
        if out is not None:
            out = _map(out, unwrap)
        try:
            r = call(op, tuple(a), out)
        except NotImplementedError as e:
            if "no meta function" not in str(e):
                raise
            r = self._unbacked_output(op, a)
            if r is None:
                raise DynamicOutputShapeException(op.qualname) from e
        device = dev[0] if dev else _CPU

        def wrap(x):
            if isinstance(x, Tensor):
                orig = back.get(id(x))
                if orig is not None:
                    return orig
                return FakeTensor._wrap(x, device, self) if x.device.type == "meta" else x
            return x
        return _map(r, wrap)


def _indexed(d: Device) -> Device:
    """`cuda` as a tensor made there reports it: `cuda:<current device>`, or `cuda:0` where no
    backend for it is installed (nothing runs but meta; PyTorch's fake tensors say cuda:0 too)."""
    if d.index is not None or d.type in ("cpu", "meta"):
        return d
    from ember._device import _BACKENDS
    b = _BACKENDS.get(d.type)
    return Device(d.type, b.current_device() if b is not None else 0)


def _needs_grad(op, args) -> bool:
    for i in op.tensor_idx:
        if getattr(args[i], "_requires_grad", False):
            return True
    for i in op.list_idx:
        for x in args[i]:
            if getattr(x, "_requires_grad", False):
                return True
    return False


_installed = [False]


def _install_fake_aware_execute() -> None:
    """Route the autograd engine's kernel call through the fake mode for fake inputs (the
    engine calls kernels directly; a FakeTensor has no data to run them on)."""
    if _installed[0]:
        return
    import sys
    engine = sys.modules.get("ember.autograd._engine")
    if engine is None:
        return
    plain = engine._execute

    def execute(op, args, out=None):
        for a in args:
            x = a[0] if isinstance(a, (list, tuple)) and a else a
            if isinstance(x, FakeTensor):
                return x.fake_mode.__ember_dispatch__(op, args, out)
        return plain(op, args) if out is None else plain(op, args, out)
    engine._execute = execute
    _installed[0] = True


_DATA_DEPENDENT_ROWS = {"nonzero": "index", "argwhere": "index", "masked_select": "values"}


def _unbacked_output(self, op, args):
    """With a ShapeEnv, ops whose output size is data-dependent get an unbacked size."""
    kind = _DATA_DEPENDENT_ROWS.get(op.qualname)
    if self.shape_env is None or kind is None:
        return None
    x = args[0]
    u = self.shape_env.create_unbacked_symint()
    if kind == "index":
        return Tensor._empty((u, x.ndim), _INT64, _META)
    return Tensor._empty((u,), x.dtype, _META)


FakeTensorMode._unbacked_output = _unbacked_output


def _map(r, fn):
    if isinstance(r, tuple):
        vals = [_map(x, fn) for x in r]
        return type(r)(*vals) if hasattr(r, "_fields") else tuple(vals)
    if isinstance(r, list):
        return [_map(x, fn) for x in r]
    return fn(r)
