"""ember.distributed: process groups over MPI and NCCL, DTensor, DDP, FSDP (placeholder).

Ships in ember-distributed, which registers itself with core through `_component.register`.

>>> import ember.distributed as dist
>>> dist.is_available(), dist.is_initialized()
(True, False)
"""

__all__ = ["is_available", "is_initialized"]


def is_available() -> bool:
    """True: this package is installed (like torch.distributed.is_available())."""
    return True


def is_initialized() -> bool:
    """Whether a default process group exists; none can be created yet."""
    return False
