"""default_collate / default_convert: samples -> batches, over nested containers."""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

__all__ = ["default_collate", "default_convert"]


def default_collate(batch):
    """Stack tensors, numbers and numpy arrays along a new first dim, recursing into
    mappings, named tuples and sequences (as torch.utils.data.default_collate)."""
    import ember
    elem = batch[0]
    if isinstance(elem, ember.Tensor):
        shapes = {tuple(b.shape) for b in batch}
        if len(shapes) > 1:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{[list(b.shape) for b in batch[:2]]} at entries 0 and 1")
        return ember.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OUS":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, "
                            f"numbers, dicts or lists; found {elem.dtype}")
        return default_collate([ember.as_tensor(b) for b in batch])
    if isinstance(elem, np.generic):
        return ember.tensor(np.array(batch))
    if isinstance(elem, bool):
        return ember.tensor(batch)
    if isinstance(elem, numbers.Integral):
        return ember.tensor(batch, dtype=ember.int64)
    if isinstance(elem, numbers.Real):
        return ember.tensor(batch, dtype=ember.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem}) \
            if not isinstance(elem, collections.defaultdict) else \
            {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if len({len(e) for e in batch}) != 1:
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        return cols if not isinstance(elem, tuple) else cols
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


def default_convert(data):
    """Numpy arrays to tensors inside nested containers (batch_size=None loading)."""
    import ember
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUS":
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data
