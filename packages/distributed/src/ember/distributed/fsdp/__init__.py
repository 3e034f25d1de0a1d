"""`ember.distributed.fsdp`: FSDP2's `fully_shard` (parameters as DTensors sharded on dim 0,
all-gathered around each unit's forward and backward, gradients reduce-scattered)."""
from ._fully_shard import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "CPUOffloadPolicy"]
