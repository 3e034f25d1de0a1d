"""`ember.cond(pred, true_fn, false_fn, operands)` (torch.cond): data- or shape-dependent
control flow that make_fx and export capture whole, both branches as subgraphs.

>>> import ember
>>> f = lambda x: ember.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))
>>> bool((f(ember.ones(3)) == ember.ones(3).sin()).all())
True
"""
from __future__ import annotations

import ember
from ember import Tensor
from ember.utils import _pytree as pytree

from . import HigherOrderOperator
from ._subtrace import proxy_mode, trace_subgraph, unify_inputs

__all__ = ["cond", "cond_op"]


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands); pred a bool, a one-element tensor
    or a symbolic bool of sizes. Both branches must return the same structure of tensors of
    the same dtypes and dims (checked eagerly too, as torch.cond does)."""
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    if getattr(pred, "expr", None) is not None and str(pred.expr) in ("True", "False"):
        pred = str(pred.expr) == "True"   # (the sizes' ranges decide it)
    if isinstance(pred, (bool, int, float)):  # a constant: the branch is known now
        return (true_fn if pred else false_fn)(*operands)
    flat, in_spec = pytree.tree_flatten(tuple(operands))

    def branch(fn):
        def run(*xs):
            return fn(*pytree.tree_unflatten(list(xs), in_spec))
        return run
    specs: list = []
    outs = cond_op(pred, branch(true_fn), branch(false_fn), tuple(flat), _spec_out=specs)
    return pytree.tree_unflatten(list(outs), specs[0])


def _cond_impl(pred, true_fn, false_fn, operands, _spec_out=None):
    mode = proxy_mode()
    if mode is not None:
        return _trace_cond(mode, pred, true_fn, false_fn, operands, _spec_out)
    # eager: both branches checked on fake tensors first (torch.cond's errors), one run
    t_leaves, t_spec, f_leaves, _ = _fake_branches(pred, true_fn, false_fn, operands)
    if _is_fake(pred, operands):
        if _spec_out is not None:
            _spec_out.append(t_spec)
        return tuple(_merge(t_leaves, f_leaves, None))
    take = bool(pred.item()) if isinstance(pred, Tensor) else bool(pred)
    out = (true_fn if take else false_fn)(*operands)
    leaves, spec = pytree.tree_flatten(out)
    if _spec_out is not None:
        _spec_out.append(spec)
    return tuple(leaves)


cond_op = HigherOrderOperator("cond", _cond_impl)


def _is_fake(pred, operands) -> bool:
    from ember._subclasses.fake_tensor import FakeTensor
    return any(isinstance(x, FakeTensor) for x in (pred, *operands))


def _fake_branches(pred, true_fn, false_fn, operands):
    """Both branches run on fake tensors (meta only) -> their outputs, checked to match."""
    from ember._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    fake = next((x.fake_mode for x in (pred, *operands) if isinstance(x, FakeTensor)), None)
    own = fake is None
    if own:
        fake = FakeTensorMode(allow_non_fake_inputs=True)
    xs = [fake.from_tensor(x) if isinstance(x, Tensor) else x for x in operands]
    from ember._state import state
    with ember.no_grad():
        with fake if own or fake not in state.modes else _nullcontext():
            t = pytree.tree_flatten(true_fn(*xs))
            f = pytree.tree_flatten(false_fn(*xs))
    _check_outputs(t[0], t[1], f[0], f[1], xs)
    return t[0], t[1], f[0], f[1]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _check_outputs(t_leaves, t_spec, f_leaves, f_spec, inputs) -> None:
    """torch.cond's checks of the two branches' outputs."""
    if str(t_spec) != str(f_spec):
        raise RuntimeError(f"Unmatched output spec from torch.cond branches: true branch "
                           f"tree_spec {t_spec} vs false branch tree_spec {f_spec}.")
    stores = {id(x._storage) for x in inputs if isinstance(x, Tensor)}
    for a, b in zip(t_leaves, f_leaves):
        for x in (a, b):
            if not isinstance(x, Tensor):
                raise RuntimeError(f"Expected branches of torch.cond to return tensors, got "
                                   f"{type(x).__name__}")
            if id(x._storage) in stores:
                raise RuntimeError(
                    "Encountered aliasing during higher order op tracing\n  Higher Order "
                    "Operator: torch.cond\n  Explanation: Higher order ops do not support "
                    "aliasing.\n  Hint: Replace `return input` with `return input.clone()` "
                    "to avoid aliasing.")
        if a.dtype != b.dtype:
            raise RuntimeError(f"When merging two branches' output in torch.cond,  expected "
                               f"same dtype but got {a.dtype} and {b.dtype}.")
        if a.dim() != b.dim():
            raise RuntimeError(f"When merging two branches' output in torch.cond,  expected "
                               f"same dim but got {a.dim()} and {b.dim()}.")


def _merge(t_leaves, f_leaves, env):
    """Output values standing for either branch's: a size the branches disagree on becomes
    an unbacked symbol (as torch.cond does), or an error without a ShapeEnv."""
    from ember._subclasses.fake_tensor import FakeTensor
    out = []
    for a, b in zip(t_leaves, f_leaves):
        sizes = []
        for d, (p, q) in enumerate(zip(a.shape, b.shape)):
            if getattr(p, "expr", p) == getattr(q, "expr", q):
                sizes.append(p)
            elif env is not None:
                sizes.append(env.create_unbacked_symint())
            else:
                raise RuntimeError(f"When merging two branches' output in torch.cond,  "
                                   f"expected same shape but got {tuple(a.shape)} and "
                                   f"{tuple(b.shape)} (dim {d}); trace with "
                                   f"tracing_mode='symbolic' to give it an unbacked size")
        out.append(_fresh(a, sizes) if isinstance(a, FakeTensor) else a)
    return out


def _fresh(like, sizes):
    """A new contiguous FakeTensor of like's mode, dtype and device with these sizes."""
    from ember._device import device
    from ember._size import contiguous_strides
    from ember._subclasses.fake_tensor import FakeTensor
    from ember._tensor import Storage
    f = FakeTensor._make(Storage(None, device("meta"), 0), tuple(sizes),
                         tuple(contiguous_strides(tuple(sizes))), 0, like.dtype, like.device)
    f.fake_mode = like.fake_mode
    return f


def _trace_cond(mode, pred, true_fn, false_fn, operands, spec_out):
    """make_fx: both branches traced as subgraphs; one `cond` node, its outputs getitems."""
    import operator
    n = sum(1 for k in mode.constants if k.startswith("true_graph_"))
    tg, t_leaves, t_spec, t_lift = trace_subgraph(mode, true_fn, list(operands), "cond")
    fg, f_leaves, f_spec, f_lift = trace_subgraph(mode, false_fn, list(operands), "cond")
    _check_outputs(t_leaves, t_spec, f_leaves, f_spec, operands)
    lifted = unify_inputs([(tg, t_lift), (fg, f_lift)], len(operands))
    env = next((getattr(getattr(x, "fake_mode", None), "shape_env", None) for x in
                (pred, *operands) if getattr(x, "fake_mode", None) is not None), None)
    if env is None and getattr(pred, "env", None) is not None:
        env = pred.env
    if isinstance(pred, Tensor) and not hasattr(pred, "fake_mode"):   # real mode
        take = bool(pred.item())
        outs = t_leaves if take else f_leaves
    else:
        outs = _merge(t_leaves, f_leaves, env)
    names = (f"true_graph_{n}", f"false_graph_{n}")
    mode.constants[names[0]], mode.constants[names[1]] = tg, fg
    graph = mode.graph
    t_node, f_node = graph.get_attr(names[0]), graph.get_attr(names[1])
    args = tuple(mode._arg(list(operands))) + tuple(lifted)
    node = graph.call_function(cond_op, (mode._arg(pred), t_node, f_node, args))
    for i, x in enumerate(outs):
        mode.track(x, graph.call_function(operator.getitem, (node, i)))
    if spec_out is not None:
        spec_out.append(t_spec)
    return tuple(outs)
