"""`ember.utils`: data loading (core) and, from ember-autograd, checkpointing."""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
