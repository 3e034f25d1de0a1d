"""`ember.backends`: flags PyTorch programs set (TF32, cuDNN, deterministic algorithms).

They are honoured where they apply (the CUDA backend reads them) and are harmless on CPU.
"""
from . import cpu, cuda, cudnn, mps  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mps"]
