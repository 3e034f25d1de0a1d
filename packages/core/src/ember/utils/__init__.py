"""`ember.utils`: data loading (core) and, from ember-autograd, checkpointing.

Submodules load on first attribute access, as after `import torch` (`torch.utils.data`):

>>> import ember
>>> ember.utils.data.DataLoader.__name__
'DataLoader'
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)


def __getattr__(name):
    import importlib
    import importlib.util
    if not name.startswith("_"):
        try:
            found = importlib.util.find_spec(f"{__name__}.{name}") is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
