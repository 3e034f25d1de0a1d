"""`ember.autograd.functional`: vjp, jvp (by the double-vjp trick), jacobian, hessian, hvp, vhp.

>>> import ember
>>> from ember.autograd.functional import jacobian
>>> jacobian(lambda x: x * x, ember.tensor([1., 2.])).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""
from __future__ import annotations

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _tup(x):
    return (tuple(x), True) if isinstance(x, (tuple, list)) else ((x,), False)


def _prep(inputs, create_graph):
    # fresh leaves (or differentiable aliases when building a graph over existing ones)
    return tuple(x.view_as(x) if create_graph and x.requires_grad else
                 x.detach().requires_grad_(True) for x in inputs)


def _grads(outs, ins, gos, create_graph, strict, what):
    diff = [o for o in outs if o.requires_grad]
    if not diff:
        if strict:
            raise RuntimeError("The output of the user-provided function is independent of "
                               "input 0. This is not allowed in strict mode.")
        return [ember.zeros_like(x) for x in ins]
    gd = [g for o, g in zip(outs, gos) if o.requires_grad]
    res = ember.autograd.grad(diff, ins, gd, create_graph=create_graph, retain_graph=True,
                              allow_unused=True)
    out = []
    for i, (x, g) in enumerate(zip(ins, res)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode.")
            g = ember.zeros_like(x)
        out.append(g)
    return out


def _finish(ts, create_graph):
    return tuple(t if create_graph else t.detach() for t in ts)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J)."""
    with ember.enable_grad():
        ins, multi_in = _tup(inputs)
        ins = _prep(ins, create_graph)
        outs, multi_out = _tup(func(*ins))
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")
            v = (ember.ones_like(outs[0]),)
        vs, _ = _tup(v)
        g = _grads(outs, ins, vs, create_graph, strict, "vjp")
    outs, g = _finish(outs, create_graph), _finish(g, create_graph)
    return (outs if multi_out else outs[0]), (g if multi_in else g[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), through two reverse passes (the double-vjp trick)."""
    with ember.enable_grad():
        ins, multi_in = _tup(inputs)
        ins = _prep(ins, create_graph)
        outs, multi_out = _tup(func(*ins))
        if v is None:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element.")
            v = (ember.ones_like(ins[0]),)
        vs, _ = _tup(v)
        us = [ember.zeros_like(o).requires_grad_(True) for o in outs]
        g = _grads(outs, ins, us, True, strict, "jvp")
        gs = [x for x in g if x.requires_grad]
        vv = [vi for x, vi in zip(g, vs) if x.requires_grad]
        if gs:
            jv = ember.autograd.grad(gs, us, vv, create_graph=create_graph, allow_unused=True)
        else:
            jv = [None] * len(us)
        jv = [j if j is not None else ember.zeros_like(o) for j, o in zip(jv, outs)]
    outs, jv = _finish(outs, create_graph), _finish(jv, create_graph)
    return (outs if multi_out else outs[0]), (jv if multi_out else jv[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """d func(inputs) / d inputs: for each output and input, a tensor of shape out + in."""
    with ember.enable_grad():
        ins, multi_in = _tup(inputs)
        ins = _prep(ins, create_graph)
        outs, multi_out = _tup(func(*ins))
        result = []
        for o in outs:
            rows = [[] for _ in ins]
            for r in range(o.numel()):
                onehot = np.zeros(o.numel(), dtype=o.dtype.np)
                onehot[r] = 1
                go = ember.tensor(onehot.reshape(tuple(o.shape)), dtype=o.dtype)
                if o.requires_grad:
                    gs = ember.autograd.grad(o, ins, go, retain_graph=True,
                                             create_graph=create_graph, allow_unused=True)
                else:
                    gs = [None] * len(ins)
                for k, (x, g) in enumerate(zip(ins, gs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {len(result)} of the user-provided "
                                               f"function is independent of input {k}. This is "
                                               f"not allowed in strict mode.")
                        g = ember.zeros_like(x)
                    rows[k].append(g)
            per_in = []
            for k, x in enumerate(ins):
                if rows[k]:
                    j = ember.stack(rows[k]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    j = ember.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                per_in.append(j if create_graph else j.detach())
            result.append(tuple(per_in) if multi_in else per_in[0])
    return tuple(result) if multi_out else result[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """Second derivatives of a scalar function: the jacobian of its jacobian."""
    ins, multi_in = _tup(inputs)

    def jac_fn(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "with a single element")
        return jacobian(func, xs if multi_in else xs[0], create_graph=True, strict=strict)
    return jacobian(jac_fn, inputs, create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H)."""
    with ember.enable_grad():
        ins, multi_in = _tup(inputs)
        ins = _prep(ins, True)
        out = func(*ins)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to vhp should return a single Tensor with a "
                               "single element")
        g = _grads([out], ins, [ember.ones_like(out)], True, strict, "vhp")
        vs, _ = _tup(v)
        gs = [x for x in g if x.requires_grad]
        vv = [vi for x, vi in zip(g, vs) if x.requires_grad]
        h = _grads(gs, ins, vv, create_graph, strict, "vhp") if gs else \
            [ember.zeros_like(x) for x in ins]
    h = _finish(h, create_graph)
    out = out if create_graph else out.detach()
    return out, (h if multi_in else h[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v); H is symmetric so this equals vhp."""
    return vhp(func, inputs, v, create_graph, strict)
