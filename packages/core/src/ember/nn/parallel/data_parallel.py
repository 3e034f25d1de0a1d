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


def _scatter(obj, n: int, dim: int) -> list:
    """n per-device pieces of obj: tensors chunked along dim, containers recursively, other
    values repeated (torch.nn.parallel.scatter's rule)."""
    import ember
    if isinstance(obj, ember.Tensor):
        return list(obj.chunk(n, dim))
    if isinstance(obj, (list, tuple)) and obj:
        cols = [_scatter(o, n, dim) for o in obj]
        m = min(len(c) for c in cols)
        return [type(obj)(c[i] for c in cols) for i in range(m)]
    if isinstance(obj, dict) and obj:
        cols = {k: _scatter(v, n, dim) for k, v in obj.items()}
        m = min(len(c) for c in cols.values())
        return [{k: c[i] for k, c in cols.items()} for i in range(m)]
    return [obj] * n


def _gather(outs: list, device, dim: int):
    import ember
    first = outs[0]
    if isinstance(first, ember.Tensor):
        moved = [o.to(device) for o in outs]
        return ember.cat(moved, dim) if first.dim() else ember.stack(moved)
    if isinstance(first, (list, tuple)):
        return type(first)(_gather([o[i] for o in outs], device, dim)
                           for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _gather([o[k] for o in outs], device, dim) for k in first}
    return first


def _run_replicated(module, device_ids, inputs, kwargs, dim, output_device):
    """Run module on each device's slice of the batch with differentiable copies of its
    parameters (gradients flow back to the originals), one device after another."""
    n = len(device_ids)
    ins = _scatter(tuple(inputs), n, dim)
    kws = _scatter(kwargs, len(ins), dim) if kwargs else [{}] * len(ins)
    if len(ins) == 1:
        return _to(module(*_to(ins[0], f"cuda:{device_ids[0]}"),
                          **_to(kws[0], f"cuda:{device_ids[0]}")), output_device)
    slots = [(m, kind, name) for m in module.modules()
             for kind in ("_parameters", "_buffers") for name in getattr(m, kind)
             if getattr(m, kind)[name] is not None]
    outs = []
    for i, (args, kw) in enumerate(zip(ins, kws)):
        dev = f"cuda:{device_ids[i]}"
        saved = [getattr(m, kind)[name] for m, kind, name in slots]
        try:
            for (m, kind, name), t in zip(slots, saved):
                getattr(m, kind)[name] = t.to(dev)      # a differentiable copy on device i
            outs.append(module(*_to(args, dev), **_to(kw, dev)))
        finally:
            for (m, kind, name), t in zip(slots, saved):
                getattr(m, kind)[name] = t
    return _gather(outs, output_device, dim)


class DataParallel(Module):
    """Wraps `module`; `.module` is the wrapped one (state_dict keys start with "module.").
    On GPUs, each forward splits the batch along `dim` over device_ids, runs the module on
    each slice with differentiable copies of its parameters and buffers on that device, and
    gathers the outputs on output_device (in-place buffer updates on the copies are lost, as in
    torch).

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
        out = self.device_ids[0] if output_device is None else output_device
        self.output_device = f"cuda:{out}" if isinstance(out, int) else out
        self.src_device_obj = f"cuda:{self.device_ids[0]}"
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        return _run_replicated(self.module, self.device_ids, inputs, kwargs, self.dim,
                               self.output_device)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """module(*inputs) over the given GPUs; without a GPU, torch's RuntimeError."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    module_kwargs = module_kwargs or {}
    ids = _cuda_ids(device_ids)
    if not ids:
        raise RuntimeError("device type could not be determined")   # torch's, without a GPU
    target = ids[0] if output_device is None else output_device
    module.to(f"cuda:{ids[0]}")
    return _run_replicated(module, ids, inputs, module_kwargs, dim,
                           f"cuda:{target}" if isinstance(target, int) else target)
