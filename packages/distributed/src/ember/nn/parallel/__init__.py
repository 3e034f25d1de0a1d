"""`ember.nn.parallel` (from ember-distributed): DistributedDataParallel."""
from ember.distributed._ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
