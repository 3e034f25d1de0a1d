"""`ember.Tensor`: storage + (shape, strides, offset) + dtype + device, plus autograd fields.

Ops are not defined here: the op table binds them as methods (`ember._ops._registry`).
"""
from __future__ import annotations

from weakref import ref as _weakref

import numpy as np

from . import _dtype as D
from . import _state
from ._device import device as Device
from ._device import get_backend
from ._size import Size, contiguous_strides
from ._size import is_contiguous as _is_contiguous

__all__ = ["Tensor", "Storage", "UntypedStorage"]

_state = _state.state


_STRIDES: dict = {}


def c_strides(shape: tuple) -> tuple:
    """Contiguous strides of a concrete shape, cached (the eager hot path asks often)."""
    st = _STRIDES.get(shape)
    if st is None:
        if len(_STRIDES) > 4096:
            _STRIDES.clear()
        st = _STRIDES[shape] = contiguous_strides(shape)
    return st


def _note_view(st, t) -> None:
    """Remember view t of storage st weakly (dead references pruned as the list doubles)."""
    vs = st.views
    if vs is None:
        st.views = [_weakref(t)]
        return
    vs.append(_weakref(t))
    n = len(vs)
    if n >= 64 and n & (n - 1) == 0:
        vs[:] = [r for r in vs if r() is not None]


class Storage:
    """A flat byte buffer on a device, shared by all views of it, with the version counter
    that autograd reads to refuse stale saved tensors."""

    __slots__ = ("data", "device", "nbytes", "version", "views", "__weakref__")

    def __init__(self, data, device: Device, nbytes: int):
        self.data = data          # cpu: a C-contiguous numpy array (its bytes); meta: None
        self.device = device
        self.nbytes = nbytes
        self.version = 0
        # weak references to views made while their base needed no grad: an in-place op that
        # gives the base a history rebases them (autograd's _record_inplace), as PyTorch does
        self.views = None

    def data_ptr(self) -> int:
        if self.data is None:
            return 0
        if isinstance(self.data, np.ndarray):
            return self.data.__array_interface__["data"][0]
        return int(self.data.ptr)

    def size(self) -> int:
        return self.nbytes

    def nbytes_(self) -> int:
        return self.nbytes

    def __len__(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        return f"ember.UntypedStorage(nbytes={self.nbytes}, device={self.device})"


UntypedStorage = Storage
_CPU = Device("cpu")
_META = Device("meta")


class Tensor:
    """A multi-dimensional array with autograd support: `ember.Tensor` as in PyTorch.

    >>> import ember
    >>> x = ember.tensor([[1., 2.], [3., 4.]])
    >>> (x @ x).sum().item()
    54.0
    """

    __slots__ = ("_st", "_shape", "_stride", "_offset", "dtype", "device", "_npc",
                 "__dict__", "__weakref__")
    __array_priority__ = 1000  # numpy defers `ndarray + Tensor` to Tensor.__radd__
    # Autograd fields default at class level: most eager results never set them, and five
    # fewer stores per new tensor is a measurable part of a small op.
    _requires_grad = False
    grad = None
    _grad_fn = None
    _base = None
    _ag = None  # autograd's per-tensor record (hooks, retains_grad, view info)

    # ---- construction ------------------------------------------------------------------
    def __new__(cls, *args, **kwargs):
        # legacy constructor: ember.Tensor(2, 3) (uninitialized float), ember.Tensor([1, 2])
        from . import _creation_api
        return _creation_api.legacy_new(cls, args, kwargs, D.get_default_dtype())

    @classmethod
    def _make(cls, storage, shape, stride, offset, dtype, device, npc=None):
        t = object.__new__(cls)
        t._st = storage  # None: made on first use from the fresh array npc (see _storage)
        t._shape = shape
        t._stride = stride
        t._offset = offset
        t.dtype = dtype
        t.device = device
        t._npc = npc
        return t

    @classmethod
    def _from_np(cls, arr: np.ndarray, dtype=None) -> Tensor:
        """Wrap a numpy array's memory as a CPU tensor (no copy when it is contiguous)."""
        if type(arr) is not np.ndarray:
            arr = np.asarray(arr)
        if dtype is None:
            dtype = D._BY_NP.get(arr.dtype) or D.from_numpy_dtype(arr.dtype)
        elif arr.dtype != dtype.np:
            arr = D.np_cast(arr, dtype)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        # the storage's buffer is the array itself (any C-contiguous array exports raw bytes)
        return cls._make(Storage(arr, _CPU, arr.nbytes), arr.shape, c_strides(arr.shape), 0,
                         dtype, _CPU, arr)

    @classmethod
    def _empty(cls, shape, dtype, device) -> Tensor:
        shape = tuple(shape)
        if device.type == "cpu":
            return cls._from_np(np.empty(shape, dtype.np), dtype)
        n = 1
        for s in shape:
            n = n * s
        data = None if device.type == "meta" else get_backend(device.type).empty(
            n * dtype.itemsize, device)
        st = Storage(data, device, n * dtype.itemsize)
        return cls._make(st, shape, contiguous_strides(shape), 0, dtype, device)

    def _alias(self, shape, stride, offset, dtype=None) -> Tensor:
        """A view sharing this tensor's storage (view ops and autograd build on this)."""
        t = Tensor._make(self._storage, tuple(shape), tuple(stride), offset,
                         dtype or self.dtype, self.device)
        t._base = self._base if self._base is not None else self
        if self._requires_grad and t.dtype._cat >= 2:
            # PyTorch: a view of a tensor that requires grad does too, even one made under
            # no_grad (autograd refuses in-place writes to such a view in grad mode)
            t._requires_grad = True
            if not _state.grad_enabled:  # its version: a write after it makes it unusable
                t._no_grad_view = self._storage.version
        elif _state.grad_enabled and t.dtype._cat >= 2:
            _note_view(t._storage, t)
        return t

    # ---- memory --------------------------------------------------------------------------
    @property
    def _np(self) -> np.ndarray:
        """A zero-copy numpy view (CPU only): what CPU kernels compute on."""
        a = self._npc
        if a is None:
            if self.device.type != "cpu":
                raise TypeError(
                    f"can't convert {self.device.type} device type tensor to numpy. Use "
                    "Tensor.cpu() to copy the tensor to host memory first.")
            isz = self.dtype.itemsize
            data = self._storage.data
            off = self._offset * isz
            if data is not None and off >= data.nbytes and 0 in self._shape:  # an empty view
                off = 0   # past an empty buffer (x[1] of a (2, 0) tensor)
            a = np.ndarray(self._shape, self.dtype.np, data, off,
                           tuple(s * isz for s in self._stride))
            self._npc = a
        return a

    def _set_meta(self, storage, shape, stride, offset) -> None:
        self._st, self._shape, self._stride, self._offset = storage, shape, stride, offset
        self._npc = None

    @property
    def _storage(self) -> Storage:
        # The eager fast path wraps a fresh C-contiguous result without building its Storage
        # (a measurable part of a small op); views, versions and pointers build it here.
        st = self._st
        if st is None:
            a = self._npc
            st = self._st = Storage(a, _CPU, a.nbytes)
        return st

    def _bump(self) -> None:
        self._storage.version += 1

    @property
    def _version(self) -> int:
        return self._storage.version

    def untyped_storage(self) -> Storage:
        return self._storage

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def element_size(self) -> int:
        return self.dtype.itemsize

    def storage_offset(self) -> int:
        return self._offset

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    # ---- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._shape)
        from ._size import normalize_dim
        return self._shape[normalize_dim(dim, len(self._shape))]

    def stride(self, dim: int | None = None):
        if dim is None:
            return self._stride
        from ._size import normalize_dim
        return self._stride[normalize_dim(dim, len(self._shape))]

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        n = 1
        for s in self._shape:
            n = n * s
        return n

    nelement = numel

    def is_contiguous(self, memory_format=None) -> bool:
        return _is_contiguous(self._shape, self._stride)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def layout(self):
        from . import strided
        return strided

    def get_device(self) -> int:
        return -1 if self.device.type == "cpu" else (self.device.index or 0)

    # ---- autograd fields --------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._grad_fn is not None and not value:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                               "want to use a computed variable in a subgraph that doesn't require "
                               "differentiation use var_no_grad = var.detach().")
        if value and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        """The graph node that made this tensor (None for leaves). A view's node is regenerated
        when read after an in-place write to its base (autograd's record `_ag` does it)."""
        ag = self._ag
        if ag is not None:
            return ag.grad_fn_of(self)
        if self._base is not None and self._grad_fn is None:
            self._check_no_grad_view()
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, fn) -> None:
        self._grad_fn = fn

    def _check_no_grad_view(self) -> None:
        v = self.__dict__.get("_no_grad_view")
        if v is not None and v != self._storage.version:
            raise RuntimeError(
                "A view was created in no_grad mode and its base or another view of its base has "
                "been modified inplace with grad mode enabled. Given that this use case is "
                "ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
                "both the view and the inplace either both inside the no_grad block (if you "
                "don't want the inplace to be tracked) or both outside (if you want the inplace "
                "to be tracked).")

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def data(self) -> Tensor:
        # Same memory, its own version counter (PyTorch's `.data`, unlike `detach()`): writes
        # through it are invisible to autograd's saved-tensor checks.
        st = self._storage
        fresh = Storage(st.data, st.device, st.nbytes)
        return Tensor._make(fresh, self._shape, self._stride, self._offset, self.dtype,
                            self.device, self._npc)

    @data.setter
    def data(self, other: Tensor) -> None:
        self._set_meta(other._storage, other._shape, other._stride, other._offset)
        self.dtype, self.device = other.dtype, other.device

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute gradients of this tensor w.r.t. graph leaves (needs ember-autograd)."""
        from ._components import engine
        engine("Tensor.backward()").backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        from ._components import engine
        return engine("Tensor.register_hook()").register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        from ._components import engine
        return engine("Tensor.register_post_accumulate_grad_hook()").register_post_hook(self, hook)

    def retain_grad(self) -> None:
        from ._components import engine
        engine("Tensor.retain_grad()").retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        return bool(self._ag and self._ag.get("retains_grad"))

    # ---- conversion ---------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if self.device.type != "cpu":
            if force:
                return self.cpu().numpy()
            raise TypeError(f"can't convert {self.device.type} device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")
        return self._np

    def __array__(self, dtype=None, copy=None):
        a = self.detach().cpu()._np
        return a.astype(dtype) if dtype is not None else a

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               "Scalar")
        return self._host().reshape(()).item() if self.dtype not in _LOWP else float(
            self._host().reshape(()).astype(np.float32))

    def tolist(self):
        a = self._host()
        if self.dtype in _LOWP:
            a = a.astype(np.float32)
        return a.tolist()

    def _host(self) -> np.ndarray:
        if self.device.type == "cpu":
            return self._np
        if self.device.type == "meta":
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")
        return get_backend(self.device.type).to_host(self)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype.is_complex or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __contains__(self, element) -> bool:
        return bool((self == element).any())

    def __reduce_ex__(self, protocol):
        from ._serialize_tensor import reduce_tensor
        return reduce_tensor(self)

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        with _no_grad():
            new = self.clone()
        new.requires_grad = self.requires_grad
        if self.grad is not None:
            new.grad = self.grad.clone()
        memo[id(self)] = new
        if type(self) is not Tensor:
            new = type(self).__new__(type(self), new, self.requires_grad) \
                if hasattr(type(self), "_is_param") else new
        return new

    def __repr__(self, *, tensor_contents=None) -> str:
        from ._printing import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.dim() == 0 and spec:
            return self.item().__format__(spec)
        return object.__format__(self, spec) if spec else self.__repr__()

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return _TYPE_NAMES.get(self.dtype, "ember.Tensor")
        if isinstance(dtype, str):
            dtype = {v: k for k, v in _TYPE_NAMES.items()}[dtype]
        return self.to(dtype)

    @property
    def is_sparse(self) -> bool:
        return False

    def to_sparse(self, sparse_dim=None):
        """The sparse COO form of this dense tensor (ember.sparse)."""
        from .sparse import to_sparse
        return to_sparse(self, sparse_dim)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """A dense tensor is its own dense form (sparse tensors override this)."""
        return self if dtype is None else self.to(dtype)

    def to_sparse_csr(self, dense_dim=None):
        """The sparse CSR form of this 2-D dense tensor (ember.sparse)."""
        from .sparse import to_sparse_csr
        return to_sparse_csr(self)

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_nested(self) -> bool:
        return False

    def is_inference(self) -> bool:
        return False

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        return self.detach()._np.__dlpack__()


_LOWP = (D.bfloat16, D.float8_e4m3fn, D.float8_e5m2)
_TYPE_NAMES = {D.float32: "ember.FloatTensor", D.float64: "ember.DoubleTensor",
               D.float16: "ember.HalfTensor", D.bfloat16: "ember.BFloat16Tensor",
               D.int64: "ember.LongTensor", D.int32: "ember.IntTensor",
               D.int16: "ember.ShortTensor", D.int8: "ember.CharTensor",
               D.uint8: "ember.ByteTensor", D.bool: "ember.BoolTensor"}


def _no_grad():
    from ._grad_mode import no_grad
    return no_grad()
