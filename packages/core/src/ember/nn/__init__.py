"""`ember.nn`: modules, parameters, init and functional, with PyTorch's API."""
from . import functional, init, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

__all__ = ["functional", "init", "utils", "Parameter", "Buffer", "UninitializedParameter",
           "UninitializedBuffer", *_modules_all]


def __getattr__(name):
    # nn.parallel (and any later subpackage) loads on first use, as after `import torch`
    import importlib
    if name == "parallel":
        return importlib.import_module(f"{__name__}.{name}")
    if name == "DataParallel":
        return importlib.import_module(f"{__name__}.parallel").DataParallel
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
