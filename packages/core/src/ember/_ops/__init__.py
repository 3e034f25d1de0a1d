"""The op table. Importing this package registers every op family (one module each)."""
import importlib

from . import (
    _cpujit,  # noqa: F401 - installs the C++ kernels for large CPU pointwise calls
    _handlers,  # noqa: F401 - installs the numpy handler
)
from ._registry import FUNCTIONS, METHODS, NN_FUNCTIONAL, OPS, OpDef, defop, lookup, register_kernel

FAMILIES = ("creation", "memory", "pointwise", "reduction", "softmax", "sorting", "movement",
            "joining", "indexing", "scatter", "linalg", "random", "nn", "attention", "conv", "pool",
            "norm", "loss", "sample", "nn_extra", "fft", "special")
for _fam in FAMILIES:
    try:
        importlib.import_module(f"{__name__}.{_fam}")
    except ModuleNotFoundError as e:  # a family not written yet
        if e.name != f"{__name__}.{_fam}":
            raise

__all__ = ["OPS", "OpDef", "defop", "lookup", "register_kernel", "FUNCTIONS", "METHODS",
           "NN_FUNCTIONAL"]
