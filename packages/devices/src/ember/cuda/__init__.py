"""ember.cuda: the CUDA backend through cuda-bindings, Triton and nvmath-python (placeholder).

Ships in ember-devices. On a machine without a GPU (or without cuda-bindings) it imports fine and
reports no device, like torch.cuda:

>>> import ember.cuda
>>> ember.cuda.is_available() in (True, False)
True
"""

from __future__ import annotations

__all__ = ["device_count", "is_available"]


def device_count() -> int:
    """Number of CUDA devices visible; 0 without cuda-bindings, a driver or a GPU."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return 0
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return int(count) if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # a broken driver install reads as "no GPU", as in torch.cuda
        return 0


def is_available() -> bool:
    """True when at least one CUDA device can be used."""
    return device_count() > 0
