"""The autograd transforms of ember.func: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian.

Each lifts its inputs to plain tensors that require grad (inside vmap: with one leading dim per
vmap level, so per-sample derivatives come out of one backward pass), runs the function on
their batched views, and asks the engine for the derivatives. Forward mode (jvp, jacfwd) uses
the double-vjp trick: J v = d/du [u^T J] . v. Results connect to outer transforms' graphs, so
the transforms nest (grad(grad(f)), hessian = jacfwd(jacrev(f))).

>>> import ember
>>> from ember.func import grad
>>> grad(lambda x: (x ** 3).sum())(ember.tensor([1., 2.])).tolist()
[3.0, 12.0]
"""
from __future__ import annotations

import functools

import ember
from ember._tensor import Tensor

from ._batched import active_levels, rewrap, suspended, unwrap_to_front
from ._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"]


class _Lifted:
    """The differentiated inputs, as plain tensors (`real`) and as the function sees them."""

    def __init__(self, leaves):
        self.levels = active_levels()
        self.create_graph = False
        self.real = []
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"expected the differentiated inputs to be Tensors, got "
                                   f"{type(x).__name__}")
            p = unwrap_to_front(x, self.levels)
            if p.requires_grad:  # an outer transform differentiates through us
                self.create_graph = True
                p = p.view_as(p)
            else:
                p = p.detach().requires_grad_(True)
            self.real.append(p)
        self.seen = [rewrap(p, self.levels) for p in self.real]

    def lower(self, x):
        return unwrap_to_front(x, self.levels)

    def lift(self, x):
        if not self.create_graph:
            x = x.detach()
        return rewrap(x, self.levels)

    def grad(self, outs, inputs, gos, create_graph=None, retain=True):
        cg = self.create_graph if create_graph is None else create_graph
        pairs = [(o, g) for o, g in zip(outs, gos) if o.requires_grad]
        if not pairs:
            return [None] * len(inputs)
        with _no_levels(self.levels):
            return list(ember.autograd.grad([o for o, _ in pairs], inputs,
                                            [g for _, g in pairs], create_graph=cg,
                                            retain_graph=True if retain else None,
                                            allow_unused=True))


class _no_levels:
    def __init__(self, levels):
        self.s = suspended(levels[0]) if levels else None

    def __enter__(self):
        if self.s is not None:
            self.s.__enter__()

    def __exit__(self, *exc):
        if self.s is not None:
            self.s.__exit__(*exc)


def _argnums(args, argnums, what):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{what}: argnums must be non-empty")
    for k in nums:
        if not isinstance(k, int):
            raise RuntimeError(f"{what}: argnums must be int or Tuple[int, ...], got "
                               f"{type(k).__name__}")
        if not -len(args) <= k < len(args):
            raise RuntimeError(f"Got argnums={k}, but only {len(args)} positional inputs")
    return tuple(k % len(args) for k in nums)


def _split_aux(out, has_aux, what):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{what}(f, ...)(*args): output of function f should be a tuple: "
                           f"(output, aux) if has_aux is True")
    return out


def _with_args(args, nums, lifted, spec):
    vals = tree_unflatten(lifted.seen, spec)
    a = list(args)
    for k, v in zip(nums, vals):
        a[k] = v
    return tuple(a)


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """(gradient of a scalar func w.r.t. args[argnums], func's value)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(args, argnums, "grad_and_value")
        leaves, spec = tree_flatten([args[k] for k in nums])
        with ember.enable_grad():
            L = _Lifted(leaves)
            out, aux = _split_aux(func(*_with_args(args, nums, L, spec), **kwargs), has_aux,
                                  "grad_and_value")
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"Tensor, got {type(out)}")
            if out.ndim != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"scalar Tensor, got tensor with {out.ndim} dims. Maybe you "
                                   f"wanted to use the vjp or jacrev APIs instead?")
            o = L.lower(out)
            gs = L.grad([o], L.real, [ember.ones_like(o)])
        gs = [L.lift(ember.zeros_like(p) if g is None else g) for g, p in zip(gs, L.real)]
        g = tree_unflatten(gs, spec)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        value = out if L.create_graph else L.lift(o)
        if has_aux:
            return g, (value, aux)
        return g, value
    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of a scalar-valued func w.r.t. args[argnums] (torch.func.grad)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn): vjp_fn(cotangents) gives one gradient per primal."""
    leaves, spec = tree_flatten(list(primals))
    with ember.enable_grad():
        L = _Lifted(leaves)
        out, aux = _split_aux(func(*tree_unflatten(L.seen, spec)), has_aux, "vjp")
    oleaves, ospec = tree_flatten(out)
    for o in oleaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f to be a function that has only "
                               f"Tensors as outputs, got {type(o)}")
    lowered = [L.lower(o) for o in oleaves]

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        cl, cspec = tree_flatten(cotangents)
        if len(cl) != len(lowered):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as "
                               "pytree structure of outputs to the function")
        cts = []
        for c, o in zip(cl, lowered):
            if tuple(c.shape) != tuple(o.shape[len(L.levels):]):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                                   f"{tuple(c.shape)} and output[0] has a shape of "
                                   f"{tuple(o.shape[len(L.levels):])}.")
            cts.append(L.lower(c))
        with ember.enable_grad():
            cg = L.create_graph or any(c.requires_grad for c in cts)
            gs = L.grad(lowered, L.real, cts, create_graph=cg)
        res = [L.lift(ember.zeros_like(p) if g is None else g) if cg else
               rewrap((ember.zeros_like(p) if g is None else g).detach(), L.levels)
               for g, p in zip(gs, L.real)]
        return tuple(tree_unflatten(res, spec))
    value = tree_unflatten([o if L.create_graph else L.lift(p) for o, p in
                            zip(oleaves, lowered)], ospec)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def _jvp_core(L, outs, tangents):
    """J v for outputs `outs` (lowered) by the double-vjp trick."""
    us = [ember.zeros_like(o).requires_grad_(True) for o in outs]
    gs = L.grad(outs, L.real, us, create_graph=True)
    pairs = [(g, t) for g, t in zip(gs, tangents) if g is not None and g.requires_grad]
    if pairs:
        with _no_levels(L.levels):
            jv = ember.autograd.grad([g for g, _ in pairs], us, [t for _, t in pairs],
                                     create_graph=L.create_graph, retain_graph=True,
                                     allow_unused=True)
    else:
        jv = [None] * len(us)
    return [ember.zeros_like(o) if j is None else j for j, o in zip(jv, outs)]


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), J tangents): forward-mode derivative (by double vjp)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           "tuples")
    leaves, spec = tree_flatten(list(primals))
    tl, tspec = tree_flatten(list(tangents))
    if len(tl) != len(leaves):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure")
    for p, t in zip(leaves, tl):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to "
                               f"have the same shape, got {tuple(p.shape)} and "
                               f"{tuple(t.shape)}")
    with ember.enable_grad():
        L = _Lifted(leaves)
        out, aux = _split_aux(func(*tree_unflatten(L.seen, spec)), has_aux, "jvp")
        oleaves, ospec = tree_flatten(out)
        lowered = [L.lower(o) for o in oleaves]
        jv = _jvp_core(L, lowered, [L.lower(t) for t in tl])
    value = tree_unflatten([o if L.create_graph else L.lift(p) for o, p in
                            zip(oleaves, lowered)], ospec)
    jv = tree_unflatten([L.lift(j) for j in jv], ospec)
    return (value, jv, aux) if has_aux else (value, jv)


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is J tangents, reusing one reverse pass
    (the double-vjp trick) for every call."""
    leaves, spec = tree_flatten(list(primals))
    with ember.enable_grad():
        L = _Lifted(leaves)
        out = func(*tree_unflatten(L.seen, spec))
        oleaves, ospec = tree_flatten(out)
        lowered = [L.lower(o) for o in oleaves]
        us = [ember.zeros_like(o).requires_grad_(True) for o in lowered]
        gs = L.grad(lowered, L.real, us, create_graph=True)

    def jvp_fn(*tangents):
        tl, _ = tree_flatten(list(tangents))
        if len(tl) != len(leaves):
            raise RuntimeError(f"linearize: expected {len(leaves)} tangents, got {len(tl)}")
        for p, t in zip(leaves, tl):
            if tuple(p.shape) != tuple(t.shape):
                raise RuntimeError(f"linearize: tangent of shape {tuple(t.shape)} for a primal "
                                   f"of shape {tuple(p.shape)}")
        pairs = [(g, L.lower(t)) for g, t in zip(gs, tl) if g is not None and g.requires_grad]
        with ember.enable_grad(), _no_levels(L.levels):
            jv = ember.autograd.grad([g for g, _ in pairs], us, [t for _, t in pairs],
                                     retain_graph=True, allow_unused=True) if pairs else \
                [None] * len(us)
        res = [L.lift(ember.zeros_like(o) if j is None else j) for j, o in zip(jv, lowered)]
        return tree_unflatten(res, ospec)
    value = tree_unflatten([L.lift(p) for p in lowered], ospec)
    return value, jvp_fn


def _jac(func, argnums, has_aux, mode, what):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(args, argnums, what)
        leaves, spec = tree_flatten([args[k] for k in nums])
        with ember.enable_grad():
            L = _Lifted(leaves)
            out, aux = _split_aux(func(*_with_args(args, nums, L, spec), **kwargs), has_aux,
                                  what)
            oleaves, ospec = tree_flatten(out)
            lowered = [L.lower(o) for o in oleaves]
            nb = len(L.levels)
            if nb == 0:  # one vmapped pass over the identity basis (as torch.func does)
                jac = _rev_vmapped(L, lowered) if mode == "rev" else _fwd_vmapped(L, lowered)
            else:        # inside an outer vmap: a pass per basis element
                jac = _rev(L, lowered, nb) if mode == "rev" else _fwd(L, lowered, nb)
        per_out = []
        for row in jac:
            row = [L.lift(j) for j in row]
            t = tree_unflatten(row, spec)
            per_out.append(t[0] if isinstance(argnums, int) else tuple(t))
        res = tree_unflatten(per_out, ospec)
        if has_aux:
            return res, aux
        return res
    return wrapper


def _basis(shape, dtype):
    """The identity basis of a shape: (n, *shape), row i the i-th unit tensor."""
    n = _prod(shape)
    return ember.eye(n, dtype=dtype).reshape((n,) + tuple(shape))


def _rev_vmapped(L, outs):
    """J by vmap over the output basis of one vjp: a single batched backward pass per output
    (each row of the basis is a cotangent)."""
    from ._vmap import vmap
    jac = []
    for o in outs:
        oshape = tuple(o.shape)

        def vjp_row(go, o=o):
            gs = L.grad([o], L.real, [go])
            return tuple(ember.zeros_like(p) if g is None else g for g, p in zip(gs, L.real))
        rows = vmap(vjp_row)(_basis(oshape, o.dtype)) if _prod(oshape) else None
        jac.append([ember.zeros(oshape + tuple(p.shape), dtype=p.dtype) if rows is None else
                    r.reshape(oshape + tuple(p.shape)) for r, p in zip(rows or L.real, L.real)])
    return jac


def _fwd_vmapped(L, outs):
    """J by vmap over each input's basis of one forward-mode product (the double-vjp trick:
    one reverse pass, then the linear map u -> u^T J batched over the tangents)."""
    from ._vmap import vmap
    us = [ember.zeros_like(o).requires_grad_(True) for o in outs]
    gs = L.grad(outs, L.real, us, create_graph=True)
    jac = [[None] * len(L.real) for _ in outs]
    for k, (g, p) in enumerate(zip(gs, L.real)):
        pshape = tuple(p.shape)
        if g is None or not g.requires_grad or not _prod(pshape):
            for m, o in enumerate(outs):
                jac[m][k] = ember.zeros(tuple(o.shape) + pshape, dtype=o.dtype)
            continue

        def column(v, g=g):
            jv = ember.autograd.grad([g], us, [v], create_graph=L.create_graph,
                                     retain_graph=True, allow_unused=True)
            return tuple(ember.zeros_like(o) if c is None else c for c, o in zip(jv, outs))
        cols = vmap(column)(_basis(pshape, p.dtype))    # each (n, *oshape)
        for m, (c, o) in enumerate(zip(cols, outs)):
            oshape = tuple(o.shape)
            jac[m][k] = c.reshape((_prod(pshape),) + oshape).movedim(0, -1).reshape(
                oshape + pshape)
    return jac


def _rev(L, outs, nb):
    """Rows of J by one backward pass per output element."""
    jac = []
    for o in outs:
        bs, oshape = tuple(o.shape[:nb]), tuple(o.shape[nb:])
        n = _prod(oshape)
        rows = [[] for _ in L.real]
        eye = ember.eye(n, dtype=o.dtype)
        for i in range(n):
            go = eye[i].reshape(oshape).expand(bs + oshape)
            gs = L.grad([o], L.real, [go])
            for k, (g, p) in enumerate(zip(gs, L.real)):
                rows[k].append(ember.zeros_like(p) if g is None else g)
        per_in = []
        for k, p in enumerate(L.real):
            pshape = tuple(p.shape[nb:])
            if rows[k]:
                j = ember.stack(rows[k], nb)      # (*bs, n, *pshape)
            else:
                j = ember.zeros(bs + (0,) + pshape, dtype=p.dtype)
            per_in.append(j.reshape(bs + oshape + pshape))
        jac.append(per_in)
    return jac


def _fwd(L, outs, nb):
    """Columns of J by forward-mode products (double vjp: one reverse pass, then one per
    input element through the linear map u -> u^T J)."""
    us = [ember.zeros_like(o).requires_grad_(True) for o in outs]
    gs = L.grad(outs, L.real, us, create_graph=True)
    jac = [[None] * len(L.real) for _ in outs]
    for k, (g, p) in enumerate(zip(gs, L.real)):
        bs, pshape = tuple(p.shape[:nb]), tuple(p.shape[nb:])
        n = _prod(pshape)
        cols = [[] for _ in outs]
        eye = ember.eye(n, dtype=p.dtype)
        for j in range(n):
            v = eye[j].reshape(pshape).expand(bs + pshape)
            if g is not None and g.requires_grad:
                with _no_levels(L.levels):
                    jv = ember.autograd.grad([g], us, [v], create_graph=L.create_graph,
                                             retain_graph=True, allow_unused=True)
            else:
                jv = [None] * len(us)
            for m, (c, o) in enumerate(zip(jv, outs)):
                cols[m].append(ember.zeros_like(o) if c is None else c)
        for m, o in enumerate(outs):
            oshape = tuple(o.shape[nb:])
            if cols[m]:
                t = ember.stack(cols[m], o.ndim)   # (*bs, *oshape, n)
            else:
                t = ember.zeros(bs + oshape + (0,), dtype=o.dtype)
            jac[m][k] = t.reshape(bs + oshape + pshape)
    return jac


def _prod(s):
    n = 1
    for x in s:
        n *= x
    return n


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None,
           _preallocate_and_copy=False):
    """The Jacobian of func w.r.t. args[argnums] by reverse mode (torch.func.jacrev)."""
    return _jac(func, argnums, has_aux, "rev", "jacrev")


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of func w.r.t. args[argnums] by forward mode (torch.func.jacfwd)."""
    return _jac(func, argnums, has_aux, "fwd", "jacfwd")


def hessian(func, argnums=0):
    """Second derivatives: jacfwd(jacrev(func)) (torch.func.hessian)."""
    return jacfwd(jacrev(func, argnums), argnums)


tree_map = tree_map
