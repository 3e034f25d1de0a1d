"""`ember.autograd.graph`: the node type and hook handles, as in `torch.autograd.graph`."""
from ._graph import Node, RemovableHandle  # noqa: F401

__all__ = ["Node", "RemovableHandle"]
