"""`ember.compile(mode=..., options=...)`: what each mode turns on, and the options ember knows
(torch.compile's names: inductor config keys). Unknown keys and values of the wrong type raise
RuntimeError as in PyTorch; "triton.cudagraphs" decides CUDA graphs (cudagraphs.py)."""
from __future__ import annotations

__all__ = ["MODES", "OPTIONS", "mode_options", "wants_cudagraphs"]

# mode -> the options it sets (torch._inductor.list_mode_options)
MODES = {
    "default": {},
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}

# option -> its type (the subset of inductor's config that ember's backends read or accept)
OPTIONS = {
    "triton.cudagraphs": bool,
    "triton.cudagraph_trees": bool,
    "max_autotune": bool,
    "max_autotune_gemm": bool,
    "max_autotune_pointwise": bool,
    "coordinate_descent_tuning": bool,
    "epilogue_fusion": bool,
    "shape_padding": bool,
    "freezing": bool,
    "fx_graph_cache": bool,
    "trace.enabled": bool,
    "trace.graph_diagram": bool,
    "debug": bool,
}


def mode_options(mode=None, options=None) -> dict:
    """The options in force for (mode, options), validated."""
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(MODES)}")
    out = dict(MODES.get(mode or "default", {}))
    for key, value in (options or {}).items():
        want = OPTIONS.get(key)
        if want is None:
            raise RuntimeError(f"Unexpected optimization option {key}, known options are "
                               f"{sorted(OPTIONS)}")
        if not isinstance(value, want):
            raise RuntimeError(f"Unexpected type of attr {key}, got {type(value).__name__} "
                               f"should be {want.__name__}")
        out[key] = value
    return out


def wants_cudagraphs(mode=None, options=None) -> bool:
    return bool(mode_options(mode, options).get("triton.cudagraphs", False))
