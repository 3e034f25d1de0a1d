"""`ember.backends.cuda`: matmul precision flags (read by ember-devices' matmul)."""


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


def flash_sdp_enabled() -> bool:
    return True


def enable_flash_sdp(enabled: bool) -> None:
    pass


def enable_math_sdp(enabled: bool) -> None:
    pass


def enable_mem_efficient_sdp(enabled: bool) -> None:
    pass
