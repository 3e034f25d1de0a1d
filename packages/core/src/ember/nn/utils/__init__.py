"""`ember.nn.utils`: gradient clipping, parameter/vector conversion, sequence packing, weight and
spectral norm, parametrizations (`parametrize`, `parametrizations`: loaded on first use),
`stateless.functional_call`."""
from . import rnn, stateless  # noqa: F401
from .clip_grad import (
           clip_grad_norm,
           clip_grad_norm_,
           clip_grad_value_,
           clip_grads_with_norm_,
           get_total_norm,
)
from ._legacy_norms import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters", "rnn",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
           "parametrize", "parametrizations", "stateless"]


def __getattr__(name):
    if name in ("parametrize", "parametrizations"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
