"""DataParallel and data_parallel (torch.nn.parallel.data_parallel's API)."""
from __future__ import annotations

from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _cuda_ids(device_ids):
    """The CUDA device indices to use: all visible when device_ids is None; [] without a GPU."""
    import ember
    if not ember.cuda.is_available():
        return []
    if device_ids is None:
        return list(range(ember.cuda.device_count()))
    return [d.index if hasattr(d, "index") else int(d) for d in device_ids]


def _to(obj, device):
    import ember
    if isinstance(obj, ember.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def _check_single(device_ids):
    if len(device_ids) > 1:
        raise NotImplementedError(
            f"DataParallel over {len(device_ids)} GPUs (replicas and their gradient "
            "reduction) is not implemented in ember: pass device_ids=[one GPU], or use "
            "DistributedDataParallel from ember-distributed")


class DataParallel(Module):
    """Wraps `module`; `.module` is the wrapped one (state_dict keys start with "module.").

    >>> import ember
    >>> dp = ember.nn.DataParallel(ember.nn.Linear(2, 1))
    >>> dp(ember.ones(3, 2)).shape
    ember.Size([3, 1])
    """

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = _cuda_ids(device_ids)
        if not self.device_ids:
            self.output_device = None
            return
        _check_single(self.device_ids)
        self.output_device = self.device_ids[0] if output_device is None else output_device
        self.src_device_obj = f"cuda:{self.device_ids[0]}"
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        dev = self.src_device_obj
        out = self.module(*_to(inputs, dev), **_to(kwargs, dev))
        return _to(out, f"cuda:{self.output_device}" if isinstance(self.output_device, int)
                   else self.output_device)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """module(*inputs) over the given GPUs; without a GPU, torch's RuntimeError."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    module_kwargs = module_kwargs or {}
    ids = _cuda_ids(device_ids)
    if not ids:
        raise RuntimeError("device type could not be determined")   # torch's, without a GPU
    _check_single(ids)
    dev = f"cuda:{ids[0]}"
    out = module(*_to(inputs, dev), **_to(module_kwargs, dev))
    target = ids[0] if output_device is None else output_device
    return _to(out, f"cuda:{target}" if isinstance(target, int) else target)
