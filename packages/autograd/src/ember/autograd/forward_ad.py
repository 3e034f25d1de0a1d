"""Forward-mode AD (torch.autograd.forward_ad): dual tensors carry a tangent through ops.

Inside `dual_level()` a dispatch mode sees every op call; when an input carries a tangent it
computes the output's tangent from the op entry: its `jvp` rule where one is written
(`jvp(tangents, result, *args)`, one tangent or None per differentiable arg), the tangent of a
view by the same view of the tangents, a decomposition by running it (its ops propagate), and
otherwise the double-vjp trick on the entry's vjp: J v = d/du [u^T J] . v.

>>> import ember
>>> import ember.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(ember.tensor([1., 2.]), ember.tensor([1., 0.])) ** 2
...     fwAD.unpack_dual(y).tangent.tolist()
[2.0, 0.0]
"""
from __future__ import annotations

from collections import namedtuple

import ember
from ember import _dispatch
from ember._state import state
from ember._tensor import Tensor

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level",
           "exit_dual_level"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
_current: list = []  # the active level (at most one, as PyTorch)


class _Level(_dispatch.DispatchMode):
    """The mode of one dual level: propagates tangents of its dual tensors."""

    def __init__(self, idx):
        self.idx = idx

    def tangent(self, x):
        fw = x.__dict__.get("_fw") if isinstance(x, Tensor) else None
        return fw[1] if fw is not None and fw[0] is self else None

    def __ember_dispatch__(self, op, args, out):
        has = any(self.tangent(args[i]) is not None for i in op.tensor_idx) or any(
            self.tangent(a) is not None for i in op.list_idx for a in args[i])
        if not has:
            return _dispatch.call(op, args, out)
        if op.decomp is not None and op.jvp is None and not op.mutated_idx:
            state.modes.append(self)
            try:
                r = op.decomp(*args)
            finally:
                state.modes.pop()
            return _dispatch.write_out(op, r, out) if out is not None else r
        if op.mutated_idx:  # the tangent from the values before the write
            t = self._inplace_tangent(op, args)
            result = _dispatch.call(op, args, out)
            if t is not None:
                args[op.mutated_idx[0]].__dict__["_fw"] = (self, t)
            else:
                args[op.mutated_idx[0]].__dict__.pop("_fw", None)
            return result
        result = _dispatch.call(op, args, out)
        self._attach(op, args, result)
        return result

    def _attach(self, op, args, result):
        outs = result if isinstance(result, tuple) else (result,)
        tans = _tangents_out(self, op, args, outs)
        for o, t in zip(outs, tans):
            if isinstance(o, Tensor) and t is not None and o.dtype.is_floating_point | \
                    o.dtype.is_complex:
                o.__dict__["_fw"] = (self, t)

    def _inplace_tangent(self, op, args):
        self_t = args[op.mutated_idx[0]]
        base = op.inplace_of
        t = None
        if base is not None:
            t = _tangents_out(self, base, args, (self_t,))[0]
        elif op.name == "copy_":
            src_t = self.tangent(args[1])
            if src_t is not None:
                t = src_t.expand(tuple(self_t.shape)).to(self_t.dtype).clone()
        return t


def _tangents_out(lv, op, args, outs):
    """The tangent of each output of op(args), or None where it has none."""
    tans = {i: lv.tangent(args[i]) for i in op.tensor_idx}
    if op.jvp is not None:
        r = op.jvp(tuple(tans.get(i) for i in op.diff_idx), outs if len(outs) > 1 else outs[0],
                   *args)
        return r if isinstance(r, (tuple, list)) else (r,)
    if op.view is not None or op.name in ("detach", "alias"):
        if op.name == "detach":
            return (None,)
        a = list(args)
        a[0] = tans[0] if tans.get(0) is not None else ember.zeros_like(args[0])
        if op.name == "view" and not a[0].is_contiguous():
            a[0] = a[0].contiguous()  # (a tangent's layout may differ from its primal's)
        return (_dispatch.call(op, tuple(a)),)
    return _double_vjp(lv, op, args, outs)


def _double_vjp(lv, op, args, outs):
    """J v through the entry's vjp: u -> u^T J is linear, its transpose applied to v is J v."""
    xs = list(args)
    leaves, tans = [], []

    def lift(a):
        t = lv.tangent(a)
        if t is None:
            return a
        x = a.view_as(a) if a.requires_grad else a.detach().requires_grad_(True)
        leaves.append(x)
        tans.append(t)
        return x
    for i in op.diff_idx:
        a = args[i]
        if isinstance(a, Tensor):
            xs[i] = lift(a)
        elif isinstance(a, (list, tuple)):  # cat, stack: a tangent per listed tensor
            xs[i] = [lift(x) if isinstance(x, Tensor) else x for x in a]
    if not leaves:
        return [None] * len(outs)
    with ember.enable_grad():
        r = _dispatch.call(op, tuple(xs))
        rs = r if isinstance(r, tuple) else (r,)
        diff = [(k, o) for k, o in enumerate(rs) if isinstance(o, Tensor) and o.requires_grad]
        if not diff:
            return [None] * len(outs)
        us = [ember.zeros_like(o).requires_grad_(True) for _, o in diff]
        gs = ember.autograd.grad([o for _, o in diff], leaves, us, create_graph=True,
                                 allow_unused=True)
        pairs = [(g, t) for g, t in zip(gs, tans) if g is not None and g.requires_grad]
        if not pairs:
            jv = [None] * len(us)
        else:
            keep = any(t.requires_grad for t in tans) or any(
                isinstance(args[i], Tensor) and args[i].requires_grad for i in op.diff_idx)
            jv = ember.autograd.grad([g for g, _ in pairs], us, [t for _, t in pairs],
                                     create_graph=keep, allow_unused=True)
    res = [None] * len(outs)
    for (k, o), j in zip(diff, jv):
        res[k] = ember.zeros_like(o).detach() if j is None else j
    return res


def enter_dual_level():
    """Enter a new forward-grad level (its index); PyTorch allows one at a time."""
    if _current:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    lv = _Level(0)
    lv.__enter__()
    _current.append(lv)
    return lv.idx


def exit_dual_level(*, level=None):
    if not _current:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    lv = _current.pop()
    lv.__exit__(None, None, None)


class dual_level:  # noqa: N801 - PyTorch's name
    """Context manager of a forward AD level: dual tensors made inside lose their tangents
    when it exits."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _level(level):
    if not _current:
        raise RuntimeError("To create a dual Tensor, you must be in a forward AD level (use "
                           "`with ember.autograd.forward_ad.dual_level():`)")
    return _current[-1]


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """A view of `tensor` carrying `tangent` as its forward gradient."""
    lv = _level(level)
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not (tangent.dtype.is_floating_point or tangent.dtype.is_complex):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    with _suspend(lv):
        d = tensor.view_as(tensor)
    d.__dict__["_fw"] = (lv, tangent)
    return d


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """(primal view, tangent or None) of a dual tensor."""
    if not _current:
        return UnpackedDualTensor(tensor, None)
    lv = _current[-1]
    t = lv.tangent(tensor)
    if t is None:
        return UnpackedDualTensor(tensor, None)
    with _suspend(lv):
        p = tensor.view_as(tensor)
    return UnpackedDualTensor(p, t)


class _suspend:
    def __init__(self, lv):
        self.lv = lv

    def __enter__(self):
        self.saved = state.modes[:]
        if self.lv in state.modes:
            state.modes.remove(self.lv)

    def __exit__(self, *exc):
        state.modes[:] = self.saved
