"""ember: PyTorch's Python API, in readable Python, split into components.

>>> import ember as torch
>>> torch.ones(2, 3).sum().item()
6.0
"""
from pkgutil import extend_path  # noqa: I001 - _blas_env must come before numpy

from . import _blas_env  # noqa: F401 - before numpy loads OpenBLAS (EMBER_BLAS_SPIN=0)
import numpy as _np

__path__ = extend_path(__path__, __name__)

# PyTorch yields inf/nan silently (1/0, log(-1), overflow); ember's CPU kernels are numpy, so
# numpy's floating-point warnings are turned off for the process (a per-call np.errstate would
# cost more than a whole eager add).
_np.seterr(all="ignore")

from . import _malloc  # noqa: E402

_malloc.tune()  # big CPU buffers stay in the heap (no page faults per op)
from . import _ops  # noqa: E402 - registers every op family
from ._components import MissingComponentError  # noqa: E402,F401
from ._creation_api import as_tensor, asarray, from_numpy, tensor  # noqa: E402,F401
from ._device import device, get_default_device, set_default_device  # noqa: E402,F401
from ._dtype import (  # noqa: E402,F401
    bfloat16,
    bool,
    can_cast,
    complex64,
    complex128,
    dtype,
    finfo,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    result_type,
    set_default_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._grad_mode import (  # noqa: E402,F401
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ._random import (  # noqa: E402,F401
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from ._size import Size  # noqa: E402,F401
from ._tensor import Tensor, UntypedStorage  # noqa: E402,F401
from ._tensor_methods import bind_methods as _bind_methods  # noqa: E402

half, float, double = float16, float32, float64  # noqa: A001
long, int, short = int64, int32, int16  # noqa: A001
cfloat, cdouble = complex64, complex128


class layout:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"


strided = layout("strided")


class memory_format:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")

globals().update(_ops.FUNCTIONS)
_bind_methods(_ops.METHODS)
ops = None  # replaced below by the op namespaces

from . import accelerator, amp, backends  # noqa: E402,F401
from ._api import *  # noqa: E402,F401,F403 - composite public functions
from ._flags import (  # noqa: E402,F401
    are_deterministic_algorithms_enabled,
    get_float32_matmul_precision,
    get_num_threads,
    set_float32_matmul_precision,
    set_num_threads,
    use_deterministic_algorithms,
)
from ._legacy import *  # noqa: E402,F401,F403
from ._ops_namespace import ops  # noqa: E402,F401,F811
from ._printing import get_printoptions, set_printoptions  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401

_LAZY = {"autograd": "autograd", "optim": "autograd", "cuda": "devices", "fx": "compiler",
         "compiler": "compiler", "export": "export", "distributed": "distributed",
         "func": "autograd"}
_FROM_SUBMODULE = {"sparse_coo_tensor": "sparse", "spmm": "sparse", "sparse_coo": "sparse",
                   "sparse_csr_tensor": "sparse", "sparse_csr": "sparse", "jagged": "nested"}


def __getattr__(name):
    # Public submodules (this wheel's and other components') load on first use, as `import torch`
    # exposes them; an absent component fails naming its wheel.
    import importlib
    import importlib.util
    if name == "__version__":
        from .version import __version__
        return __version__
    if name.startswith("_"):
        raise AttributeError(f"module 'ember' has no attribute '{name}'")
    if name == "cond":  # torch.cond: a higher-order op of ember-compiler
        if importlib.util.find_spec("ember._higher_order_ops") is None:
            from ._components import require
            require("compiler", "ember.cond")
        return importlib.import_module("ember._higher_order_ops").cond
    if name in _FROM_SUBMODULE:  # top-level names that live in a lazily loaded submodule
        return getattr(importlib.import_module(f"ember.{_FROM_SUBMODULE[name]}"), name)
    try:
        found = importlib.util.find_spec(f"ember.{name}") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return importlib.import_module(f"ember.{name}")
    if name == "cuda":
        from . import _cuda_stub
        return _cuda_stub
    if name == "vmap":  # torch.vmap is torch.func.vmap (ember-autograd)
        if importlib.util.find_spec("ember.func") is not None:
            return importlib.import_module("ember.func").vmap
        from ._components import require
        require("autograd", "ember.vmap")
    if name in _LAZY:
        from ._components import require
        require(_LAZY[name], f"ember.{name}")
    raise AttributeError(f"module 'ember' has no attribute '{name}'")


from ._components import ensure_loaded as _ensure_loaded  # noqa: E402

_ensure_loaded()

from ._pickle_names import fix_names as _fix_names  # noqa: E402

_fix_names(__name__)  # public functions pickle by name (ember.save(model))
