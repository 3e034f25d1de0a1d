"""ember.compiler: `ember.compile`'s public controls (torch.compiler's names): stances,
`disable`, `is_compiling`, `reset`, `allow_in_graph`. The capture lives in ember._dynamo.

Ships in ember-compiler, which registers itself with core through `_component.register`
(importing this package is cheap: ember._dynamo loads on first use of a name).
"""
from __future__ import annotations

__all__ = ["set_stance", "disable", "is_compiling", "reset", "allow_in_graph",
           "is_dynamo_compiling", "cudagraph_mark_step_begin"]


def cudagraph_mark_step_begin() -> None:
    """A new step of a `mode="reduce-overhead"` model begins: outputs of earlier CUDA-graph
    replays may be overwritten (reading them afterwards raises)."""
    from ember._dynamo.cudagraphs import mark_step_begin
    mark_step_begin()


def is_dynamo_compiling() -> bool:
    from ember._dynamo import is_compiling
    return is_compiling()


def __getattr__(name: str):
    if name in ("set_stance", "disable", "is_compiling", "reset", "allow_in_graph"):
        import ember._dynamo as dynamo
        value = getattr(dynamo, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ember.compiler' has no attribute '{name}'")
