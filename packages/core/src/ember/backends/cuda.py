"""`ember.backends.cuda`: matmul precision flags (read by ember-devices' matmul) and the
scaled_dot_product_attention paths allowed (read by core's `_ops/attention.py`)."""


class _MatmulFlags:
    @property
    def allow_tf32(self) -> bool:
        from .. import _flags
        return _flags.float32_matmul_precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        from .. import _flags
        _flags.float32_matmul_precision = "high" if value else "highest"

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built() -> bool:
    """Whether a CUDA backend (ember-devices) has registered itself."""
    from .._components import ensure_loaded
    from .._device import _BACKENDS
    ensure_loaded()
    return "cuda" in _BACKENDS


# which scaled_dot_product_attention paths cuda may take: ember's one fused kernel pair serves
# PyTorch's flash and memory-efficient roles; with both off the decomposition (math) runs
_SDP = {"flash": True, "mem_efficient": True, "math": True}


def flash_sdp_enabled() -> bool:
    return _SDP["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _SDP["flash"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _SDP["math"]


def enable_math_sdp(enabled: bool) -> None:
    _SDP["math"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _SDP["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _SDP["mem_efficient"] = bool(enabled)
