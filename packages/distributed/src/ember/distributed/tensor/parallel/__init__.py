"""`ember.distributed.tensor.parallel`: tensor parallelism by module plans (torch's API):
parallelize_module with ColwiseParallel, RowwiseParallel, SequenceParallel,
PrepareModuleInput and PrepareModuleOutput; loss_parallel."""
from ._api import parallelize_module
from .loss import loss_parallel
from .style import (
                    ColwiseParallel,
                    ParallelStyle,
                    PrepareModuleInput,
                    PrepareModuleOutput,
                    RowwiseParallel,
                    SequenceParallel,
)

__all__ = ["parallelize_module", "ParallelStyle", "ColwiseParallel", "RowwiseParallel",
           "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput", "loss_parallel"]
