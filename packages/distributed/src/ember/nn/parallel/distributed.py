"""`ember.nn.parallel.distributed` (torch's module path of DistributedDataParallel)."""
from ember.distributed._ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
