"""`ember.utils.data`: datasets, samplers and the DataLoader (as torch.utils.data)."""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)  # ember-distributed adds .distributed
from ._collate import default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (
                      ChainDataset,
                      ConcatDataset,
                      Dataset,
                      IterableDataset,
                      StackDataset,
                      Subset,
                      TensorDataset,
                      random_split,
)
from .sampler import (
                      BatchSampler,
                      RandomSampler,
                      Sampler,
                      SequentialSampler,
                      SubsetRandomSampler,
                      WeightedRandomSampler,
)

__all__ = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "Subset",
           "ConcatDataset", "ChainDataset", "StackDataset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "default_collate", "default_convert", "get_worker_info", "WorkerInfo"]
