"""ember.compiler: `ember.compile`'s public controls (torch.compiler's names): stances,
`disable`, `is_compiling`, `reset`, `allow_in_graph`. The capture lives in ember._dynamo.

Ships in ember-compiler, which registers itself with core through `_component.register`.
"""
from __future__ import annotations

from ember._dynamo import allow_in_graph, disable, is_compiling, reset, set_stance

__all__ = ["set_stance", "disable", "is_compiling", "reset", "allow_in_graph",
           "is_dynamo_compiling"]


def is_dynamo_compiling() -> bool:
    return is_compiling()
