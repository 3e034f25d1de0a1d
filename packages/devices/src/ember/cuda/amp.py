"""`ember.cuda.amp`: the deprecated CUDA spellings of autocast and GradScaler (core's
ember.amp._cuda_amp, re-exported so `from ember.cuda.amp import autocast` works)."""
from ember.amp._cuda_amp import GradScaler, autocast, custom_bwd, custom_fwd  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
