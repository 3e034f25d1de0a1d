"""`ember.utils.data.distributed` (from ember-distributed): DistributedSampler."""
from ember.distributed._sampler import DistributedSampler

__all__ = ["DistributedSampler"]
