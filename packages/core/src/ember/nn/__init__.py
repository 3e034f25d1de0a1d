"""`ember.nn`: modules, parameters, init and functional, with PyTorch's API."""
from . import functional  # noqa: F401
