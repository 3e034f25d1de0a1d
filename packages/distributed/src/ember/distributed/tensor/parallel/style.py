"""Tensor-parallel styles: how a module's parameters are sharded and how its inputs and outputs
are converted (torch.distributed.tensor.parallel's ParallelStyle classes).

ColwiseParallel shards a Linear's weight (and bias) on the output dim, RowwiseParallel on the
input dim (its output is a Partial sum, reduced to `output_layouts`), SequenceParallel keeps a
norm's parameters replicated and its activations sharded on the sequence dim.
"""
from __future__ import annotations

import types

import ember
from ember import nn

from .._dtensor import DTensor, distribute_tensor
from .._placements import Replicate, Shard

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel",
           "PrepareModuleInput", "PrepareModuleOutput"]


def _param(module, name, mesh, placements, src):
    p = getattr(module, name, None)
    if p is None or isinstance(p, DTensor):
        return
    d = distribute_tensor(p.detach(), mesh, placements, src_data_rank=src)
    module.register_parameter(name, nn.Parameter(d, p.requires_grad))


def _to_dtensor(x, mesh, layout, desired):
    if not isinstance(x, ember.Tensor) or layout is None:
        return x
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, [layout])
    if desired is not None and x.placements != (desired,):
        x = x.redistribute(mesh, [desired])
    return x


def _one(x):
    return x[0] if isinstance(x, (tuple, list)) and len(x) == 1 else x


class ParallelStyle:
    """Base: `_apply(module, mesh)` changes the module in place and returns it."""

    _src_data_rank = 0

    def _apply(self, module, mesh):
        raise NotImplementedError


class _Linear(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = _one(input_layouts) or self._default_in
        self.output_layouts = _one(output_layouts) or self._default_out
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        if isinstance(module, nn.Linear):
            self._shard_linear(module, mesh)
            desired = self._linear_in
        elif isinstance(module, nn.Embedding):
            self._shard_embedding(module, mesh)
            desired = Replicate()
        else:
            raise NotImplementedError(f"{type(self).__name__} supports nn.Linear and nn.Embedding"
                                      f", got {type(module).__name__}")
        lay, out, local = self.input_layouts, self.output_layouts, self.use_local_output

        def pre(mod, args):
            return (_to_dtensor(args[0], mesh, lay, desired),) + tuple(args[1:])

        def post(mod, args, y):
            if y.placements != (out,):
                y = y.redistribute(mesh, [out])
            return y.to_local() if local else y
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module

    def __repr__(self):
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, output_layouts="
                f"{self.output_layouts}, use_local_output={self.use_local_output})")


class ColwiseParallel(_Linear):
    """Linear: weight Shard(0), bias Shard(0); input Replicate, output Shard(-1) (local by
    default). Embedding: weight Shard(1)."""

    _default_in, _default_out, _linear_in = Replicate(), Shard(-1), Replicate()

    def _shard_linear(self, module, mesh):
        _param(module, "weight", mesh, [Shard(0)], self._src_data_rank)
        _param(module, "bias", mesh, [Shard(0)], self._src_data_rank)

    def _shard_embedding(self, module, mesh):
        _param(module, "weight", mesh, [Shard(1)], self._src_data_rank)


class RowwiseParallel(_Linear):
    """Linear: weight Shard(1), bias Replicate; input Shard(-1), output Replicate (the Partial
    sum all-reduced; output_layouts=Shard(d) reduce-scatters instead)."""

    _default_in, _default_out, _linear_in = Shard(-1), Replicate(), Shard(-1)

    def _shard_linear(self, module, mesh):
        _param(module, "weight", mesh, [Shard(1)], self._src_data_rank)
        _param(module, "bias", mesh, [Replicate()], self._src_data_rank)

    def _shard_embedding(self, module, mesh):
        """Vocabulary-parallel lookup: weight Shard(0); each rank looks up the ids in its rows
        (others give zeros), the output is their Partial sum (torch's MaskPartial, done by
        hand in the module's forward)."""
        if module.max_norm is not None:
            raise NotImplementedError("RowwiseParallel on nn.Embedding with max_norm is not "
                                      "supported")
        _param(module, "weight", mesh, [Shard(0)], self._src_data_rank)
        module.forward = types.MethodType(_vocab_parallel_forward(mesh), module)


def _vocab_parallel_forward(mesh):
    from .._placements import Partial
    from .._redistribute import local_offsets

    def forward(self, ids):
        w = self.weight  # Shard(0) over the vocabulary (FSDP + TP: the gathered TP DTensor)
        ids = ids.to_local() if isinstance(ids, DTensor) else ids
        local_w = w.to_local()
        start, rows = local_offsets(w.shape, mesh, w.placements)[0], local_w.shape[0]
        outside = (ids < start) | (ids >= start + rows)
        pad = self.padding_idx
        pad = pad - start if pad is not None and start <= pad < start + rows else None
        out = ember.nn.functional.embedding((ids - start).masked_fill(outside, 0), local_w,
                                            pad, None, 2.0, self.scale_grad_by_freq,
                                            self.sparse)
        out = out * (~outside).unsqueeze(-1).to(out.dtype)
        return DTensor.from_local(out, mesh, [Partial()], shape=(*ids.shape, w.shape[1]))
    return forward


class SequenceParallel(ParallelStyle):
    """Norms/dropout on activations sharded on `sequence_dim`: parameters replicated, input
    taken as Shard(sequence_dim), output a DTensor (or local with use_local_output)."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_dim, self.use_local_output = sequence_dim, use_local_output

    def _apply(self, module, mesh):
        for name, _ in list(module.named_parameters(recurse=True)):
            owner = module.get_submodule(name.rpartition(".")[0]) if "." in name else module
            _param(owner, name.rpartition(".")[2], mesh, [Replicate()], self._src_data_rank)
        lay, local = Shard(self.sequence_dim), self.use_local_output

        def pre(mod, args):
            return (_to_dtensor(args[0], mesh, lay, None),) + tuple(args[1:])

        def post(mod, args, y):
            return y.to_local() if local and isinstance(y, DTensor) else y
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module


def _pairs(layouts, desired, what):
    layouts = layouts if isinstance(layouts, (tuple, list)) else (layouts,)
    desired = desired if isinstance(desired, (tuple, list)) else (desired,)
    if len(layouts) != len(desired):
        raise ValueError(f"{what}: layouts and desired layouts differ in length")
    return list(zip(layouts, desired))


class PrepareModuleInput(ParallelStyle):
    """Convert positional (and keyword) inputs: plain tensors are taken as `input_layouts` and
    redistributed to `desired_input_layouts` (None leaves an input alone)."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_output=False):
        self.pairs = _pairs(input_layouts, desired_input_layouts, "PrepareModuleInput") \
            if input_layouts is not None else []
        self.kw = {k: (v, (desired_input_kwarg_layouts or {}).get(k))
                   for k, v in (input_kwarg_layouts or {}).items()}
        self.use_local_output = use_local_output

    def _convert(self, x, mesh, lay, want):
        x = _to_dtensor(x, mesh, lay, want)
        return x.to_local() if self.use_local_output and isinstance(x, DTensor) else x

    def _apply(self, module, mesh):
        def pre(mod, args, kwargs):
            args = list(args)
            for i, (lay, want) in enumerate(self.pairs[:len(args)]):
                args[i] = self._convert(args[i], mesh, lay, want)
            for k, (lay, want) in self.kw.items():
                if k in kwargs:
                    kwargs[k] = self._convert(kwargs[k], mesh, lay, want)
            return tuple(args), kwargs
        module.register_forward_pre_hook(pre, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Convert outputs: plain tensors taken as `output_layouts`, redistributed to
    `desired_output_layouts`, local tensors again with use_local_output (the default)."""

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.pairs = _pairs(output_layouts, desired_output_layouts, "PrepareModuleOutput")
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        def post(mod, args, out):
            single = not isinstance(out, (tuple, list))
            outs = [out] if single else list(out)
            for i, (lay, want) in enumerate(self.pairs[:len(outs)]):
                o = _to_dtensor(outs[i], mesh, lay, want)
                outs[i] = o.to_local() if self.use_local_output and isinstance(o, DTensor) else o
            return outs[0] if single else type(out)(outs)
        module.register_forward_hook(post)
        return module
