"""`ember.nn.functional`: the nn ops of the op table (bound with `functional=`), plus composites."""
from .._ops import NN_FUNCTIONAL as _NN

globals().update(_NN)
__all__ = sorted(_NN)
