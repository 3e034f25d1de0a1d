"""The engine: `record` (the dispatcher's autograd hook) builds graph nodes from the op table's
vjps; `run_backward` executes a graph in topological order with dependency counts.
"""
from __future__ import annotations

import heapq
import threading

from ember import _dispatch
from ember import _dtype as D
from ember._state import state
from ember._tensor import Tensor

from ._graph import (
    ANOMALY,
    FULL,
    GRAD_LOCK,
    META,
    NONE,
    AccumulateGrad,
    CopySlices,
    MetaOnly,
    OpNode,
    TensorInfo,
    _Saved,
    _seq,
    accumulate_grad_node,
    add_hook,
    edge_of,
    info,
    op_info,
)

__all__ = ["record", "run_backward", "Engine", "ENGINE", "queue_callback"]

_execute = _dispatch.execute
_fast_core = getattr(_dispatch, "_fast_core", None) if hasattr(_dispatch, "special") else None
_native_pointwise = getattr(_dispatch, "native_pointwise", None)  # ember._C's hit path, or None
_F32, _F64 = D.float32, D.float64
_new_node = object.__new__
_CPU = _dispatch._CPU
_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_LEAF_INPLACE = ("a view of a leaf Variable that requires grad is being used in an in-place "
                      "operation.")
_NO_GRAD_VIEW_INPLACE = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you "
    "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")


# ---- recording -------------------------------------------------------------------------------
_NO_EDGE = (None, 0)


def record(op, args: tuple, out=None):
    """Run op below autograd and, if an input needs a gradient, attach a graph node."""
    inf = op.__dict__.get("_ag_info") or op_info(op)
    if out is not None:
        raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")
    if inf.composite:  # differentiate through the decomposition: its ops record themselves
        return op.decomp(*args)
    if inf.inplace:
        return _record_inplace(op, inf, args)
    result = None
    if op.pointwise is not None and _native_pointwise is not None:
        result = _native_pointwise(op, args)  # None: not a native hit (see ember/_native.py)
    if result is None and op.pointwise is not None and _fast_core is not None and \
            not _dispatch.special[0]:
        # core's fast path: CPU float tensors of one dtype (Python scalars pass as they are);
        # the numpy views are collected in the same pass
        d = a = None
        arrs = list(args)
        n = 0
        for i in op.tensor_idx:
            a = args[i]
            if a.__class__ is not Tensor or a.device is not _CPU or (d is not None
                                                                     and a.dtype is not d):
                d = None
                break
            d = a.dtype
            x = a._npc
            if x is None:
                x = a._np
            arrs[i] = x
            if x.size > n:
                n = x.size
        if d is _F32 or d is _F64:
            result = _fast_core(op, args, arrs, n, d)
        elif d is None and isinstance(a, Tensor) and a.device is not _CPU \
                and not hasattr(a.__class__, "__ember_dispatch__"):  # (DTensor: its own rules)
            k = op.kernels.get(a.device.type)  # a device's kernel (cuda: its cached launch)
            if k is not None:
                st = state
                st.grad_enabled = False
                try:
                    result = k(*args)
                finally:
                    st.grad_enabled = True
    if result is None:
        st = state
        st.grad_enabled = False
        try:
            result = _execute(op, args)
        finally:
            st.grad_enabled = True
    if inf.no_list and len(args) == inf.nargs:  # the common case: single tensors
        node = (inf.track or _tracker(op, inf))(op, inf, args, result)
        if node is None:
            if inf.detach and result._base is not None:
                result._base = None  # detach() aliases storage but is no autograd view
                result._requires_grad = False
            return result
    else:
        edges = []
        metas = []
        any_edge = False
        for i, is_list in zip(inf.diff_idx, inf.list_diff):
            a = args[i]
            for t in (a if is_list else (a,)):
                e = edge_of(t) if t is not None else None
                if e is None:
                    edges.append(_NO_EDGE)
                    metas.append(None)
                else:
                    any_edge = True
                    edges.append(e)
                    metas.append((t._shape, t.dtype, t.device))
        if not any_edge or (result.__class__ is Tensor and result.dtype._cat < 2):
            if inf.detach and result._base is not None:
                result._base = None
                result._requires_grad = False
            return result
        node = _make_node(op, inf, args, edges, metas)
    if result.__class__ is Tensor:
        result._grad_fn = node  # what _attach does for one floating output
        result._requires_grad = True
        if inf.use_out:
            node.out = _Saved(result, True)
    else:
        _attach(node, inf, result)
    if inf.view:
        info(result).view_version = result._storage.version
    return result


def _make_node(op, inf, args, edges, metas, snapshot=None):
    node = _new_node(OpNode)  # Node.__init__, inlined
    node.next_functions = tuple(edges)
    node._seq = next(_seq)
    if ANOMALY[0] and state.__dict__.get("anomaly"):
        import traceback
        node._trace = traceback.format_stack()[:-2]
    node.op = op
    node._info = inf
    node.in_meta = metas
    use = inf.use_args
    saved = []
    a = list(args)
    i = -1
    for t in args:
        i += 1
        c = t.__class__
        if c is float or c is int or c is bool or t is None:
            continue  # kept as is, whatever the vjp reads
        u = use[i]
        if u != FULL:
            if c is Tensor or isinstance(t, Tensor):
                a[i] = MetaOnly(t) if u == META else None
            elif u == NONE and isinstance(t, (list, tuple)):
                a[i] = None
            continue
        if i == 0 and snapshot is not None:
            t = snapshot
        if c is Tensor or isinstance(t, Tensor):
            saved.append((i, _Saved(t)))
        elif isinstance(t, (list, tuple)) and any(isinstance(x, Tensor) for x in t):
            # Tensor?[] (index's indices) may hold None between tensors
            saved.append((i, [_Saved(x) if x is not None else None for x in t]))
    node.args = a
    node.saved = saved
    return node


_PACK = {
    NONE: ("    if {a}.__class__ is Tensor or isinstance({a}, _NONE_KINDS):\n"
           "        {a} = None\n"),
    META: ("    if {a}.__class__ is Tensor or isinstance({a}, Tensor):\n"
           "        {a} = MetaOnly({a})\n"),
    FULL: ("    c = {a}.__class__\n"
           "    if c is Tensor or isinstance({a}, Tensor):\n"
           "        saved += (({i}, _Saved({a})),)\n"
           "    elif (c is list or c is tuple or isinstance({a}, (list, tuple))) and any(\n"
           "            isinstance(x, Tensor) for x in {a}):\n"
           "        saved += (({i}, [_Saved(x) if x is not None else None for x in {a}]),)\n"),
}


_EDGE = """\
    t = {a}
    if t.__class__ is Tensor:  # edge_of, inlined for a plain non-leaf and a leaf with its
        e{k} = t._grad_fn       # AccumulateGrad made already
        if e{k} is not None:
            e{k} = (e{k}, 0) if t._ag is None else edge_of(t)
        elif t._requires_grad:
            ag = t._ag
            e{k} = (ag.acc, 0) if (ag is not None and ag.acc is not None
                                 and t._base is None) else edge_of(t)
    else:
        e{k} = edge_of(t) if t is not None else None
    if e{k} is None:
        e{k} = _NO_EDGE
        m{k} = None
    else:
        m{k} = (t._shape, t.dtype, t.device)
        any_edge = True
"""


def _tracker(op, inf):
    """The graph node for one call of an op that takes single tensors, called with all its
    arguments, or None when nothing needs a gradient: record's and _make_node's work unrolled
    over the op's schema (generated once per op: recording runs once per op call)."""
    names = [f"a{i}" for i in range(inf.nargs)]
    ks = range(len(inf.diff_idx))
    code = "def track(op, inf, args, result):\n"
    if names:
        code += f"    {', '.join(names)}, = args\n"
    code += "    any_edge = False\n"
    for k, i in enumerate(inf.diff_idx):
        code += _EDGE.format(a=names[i], k=k)
    code += ("    if not any_edge or (result.__class__ is Tensor and result.dtype._cat < 2):\n"
             "        return None\n"
             "    node = _new_node(OpNode)\n"
             f"    node.next_functions = ({''.join(f'e{k}, ' for k in ks)})\n"
             "    node._seq = next(_seq)\n"
             "    if ANOMALY[0] and state.__dict__.get('anomaly'):\n"
             "        import traceback\n"
             "        node._trace = traceback.format_stack()[:-2]\n"
             "    node.op = op\n"
             "    node._info = inf\n"
             f"    node.in_meta = [{', '.join(f'm{k}' for k in ks)}]\n"
             "    saved = ()\n")  # (index, saved) pairs: most calls save no tensor
    for i, (a, u) in enumerate(zip(names, inf.use_args)):
        code += _PACK[u].format(a=a, i=i)
    code += f"    node.args = [{', '.join(names)}]\n    node.saved = saved\n    return node\n"
    ns = {"_new_node": _new_node, "OpNode": OpNode, "_seq": _seq, "ANOMALY": ANOMALY,
          "state": state, "Tensor": Tensor, "MetaOnly": MetaOnly, "_Saved": _Saved,
          "_NONE_KINDS": (Tensor, list, tuple), "edge_of": edge_of, "_NO_EDGE": _NO_EDGE}
    exec(compile(code, f"<record {op.name}>", "exec"), ns)
    inf.track = ns["track"]
    return inf.track


def _attach(node, inf, result):
    """Make result(s) outputs of node: grad_fn, requires_grad, output_nr, saved outputs."""
    if isinstance(result, Tensor):
        if result.dtype._cat >= 2:
            result._grad_fn = node
            result._requires_grad = True
        if inf.use_out:
            node.out = _Saved(result, True)
        return
    outs = list(result)
    node.out_meta = [(o._shape, o.dtype, o.device) if isinstance(o, Tensor) and o.dtype._cat >= 2
                     else None for o in outs]
    for nr, o in enumerate(outs):
        if isinstance(o, Tensor) and o.dtype._cat >= 2:
            o._grad_fn = node
            o._requires_grad = True
            if nr:
                o._ag = TensorInfo(nr)
    if inf.use_out:
        keep = inf.out_idx
        node.out = tuple(_Saved(o, True, nr) if isinstance(o, Tensor) and (
            keep is None or nr in keep) else None for nr, o in enumerate(outs))


def _record_inplace(op, inf, args):
    """In-place op: the mutated tensor's history becomes this op's node (through the base's
    CopySlices when it is a view)."""
    self_idx = op.mutated_idx[0] if op.mutated_idx else 0
    self = args[self_idx]
    base = self._base
    if self.grad_fn is None and self._requires_grad and base is None:
        raise RuntimeError(_LEAF_INPLACE)
    if base is not None and self._grad_fn is None and self._requires_grad:
        raise RuntimeError(_NO_GRAD_VIEW_INPLACE)  # a view made under no_grad of base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(_VIEW_LEAF_INPLACE)
    snapshot = None
    if inf.use_args[self_idx] == FULL and inf.vjp is not None:
        # the vjp reads the value self had before the write; recorded, so that double
        # backward still reaches self's old history through it
        snapshot = self.clone()
    old_edge = edge_of(self)
    st = state
    st.grad_enabled = False
    try:
        result = _execute(op, args)
    finally:
        st.grad_enabled = True
    edges, metas, any_edge = [], [], False
    for i, is_list in zip(inf.diff_idx, inf.list_diff):
        a = args[i]
        for t in (a if is_list else (a,)):
            e = old_edge if t is self else (edge_of(t) if t is not None else None)
            if e is None:
                edges.append((None, 0))
                metas.append(None if t is not self else (t._shape, t.dtype, t.device))
            else:
                any_edge = True
                edges.append(e)
                metas.append((t._shape, t.dtype, t.device))
    base_edge = edge_of(base) if base is not None else None
    if not any_edge and base_edge is None:
        return result
    if self.dtype._cat < 2:
        return result
    node = _make_node(op, inf, args, edges, metas, snapshot)
    if inf.use_out:
        node.out = _Saved(self, True)
    if base is None:
        self._grad_fn = node
        self._requires_grad = True
        if self._ag is not None:
            self._ag.output_nr = 0
        _rebase_views(self, self)
        return result
    # in-place on a view: the base's new history is CopySlices(old base history, node)
    cs = CopySlices(base_edge, node, base, self)
    base._grad_fn = cs
    base._requires_grad = True
    if base._ag is not None:
        base._ag.output_nr = 0
    _rebase_view(base, self)
    _rebase_views(base, self)
    return result


def _rebase_view(base, v) -> None:
    """v's history becomes as_strided(base), current for the storage's version now."""
    regen = base.as_strided(v._shape, v._stride, v._offset)
    v._grad_fn = regen.grad_fn
    v._requires_grad = True
    info(v).output_nr = 0
    v._ag.view_version = v._storage.version


def _rebase_views(base, done) -> None:
    """Views of base made while it needed no grad (core's Storage.views) need grad now that an
    in-place op gave base a history: each is rebased on it, as PyTorch's views are."""
    refs = base._storage.views
    if not refs:
        return
    keep = []
    for r in refs:
        v = r()
        if v is None or v is done or v._requires_grad:
            continue
        if v._base is base:
            _rebase_view(base, v)
        else:
            keep.append(r)  # a view of another tensor over this storage (a detach()'s)
    base._storage.views = keep or None


# ---- execution ------------------------------------------------------------------------------
# ember._C's backward loop `engine_run(roots, grads, keep_graph)` (set by _native.register), or
# None: this module's run_backward, the reference, runs every pass
NATIVE_RUN = [None]


# ------------------------------------------------------------------------------
def _check_anomaly_nan(node, res):
    import ember
    for i, g in enumerate(res):
        if g is not None and g.dtype._cat >= 2 and bool(ember.isnan(g).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               f"output.")


def run_backward(roots, grads, keep_graph: bool, create_graph: bool, inputs=None,
                 accumulate: bool = True):
    """Backpropagate grads from roots [(node, nr)]. With inputs (tensors), return their
    gradients (autograd.grad) or, when accumulate, accumulate only into them."""
    if NATIVE_RUN[0] is not None and not state.__dict__.get("anomaly"):
        st = state  # ember._C's loop (csrc/engine.cpp): the same steps
        edges = None if inputs is None else [_input_edge(t) for t in inputs]
        prev = st.grad_enabled
        st.grad_enabled = create_graph
        try:
            captured = NATIVE_RUN[0](roots, grads, keep_graph, edges, accumulate)
        finally:
            st.grad_enabled = prev
        return [] if captured is None else captured
    # 1. dependencies: how many edges reach each node from the roots
    deps: dict = {}
    order: list = []
    stack = list({id(n): n for n, _ in roots}.values())  # two outputs of one node: one root
    seen = set(id(n) for n in stack)
    while stack:
        n = stack.pop()
        order.append(n)
        for nxt, _ in n.next_functions:
            if nxt is None:
                continue
            k = id(nxt)
            deps[k] = deps.get(k, 0) + 1
            if k not in seen:
                seen.add(k)
                stack.append(nxt)
    # 2. which nodes to run: those from which a wanted input is reachable
    capture = None
    needed = None
    if inputs is not None:
        capture = {}  # id(node) -> [(output_nr, slot)]
        targets = set()
        for slot, t in enumerate(inputs):
            e = _input_edge(t)
            if e is None:
                continue
            capture.setdefault(id(e[0]), []).append((e[1], slot))
            targets.add(id(e[0]))
        needed, run_set = _needed(order, targets)
    captured = [None] * (len(inputs) if inputs is not None else 0)
    # 3. run nodes when all their inputs have arrived, latest-created first
    buffers: dict = {}
    ready: list = []
    for (n, nr), g in zip(roots, grads):
        buf = buffers.get(id(n))
        if buf is None:
            buf = buffers[id(n)] = [n, {}]
        _acc(buf[1], nr, g)
    for n, _ in roots:
        k = id(n)
        if deps.get(k, 0) == 0 and k in buffers and buffers[k][0] is n:
            heapq.heappush(ready, (-n._seq, k, n))
            buffers[k][0] = None  # queued marker
    st = state
    prev = st.grad_enabled
    st.grad_enabled = create_graph
    anomaly = st.__dict__.get("anomaly")
    try:
        while ready:
            _, k, node = heapq.heappop(ready)
            gin = buffers.pop(k)[1]
            _tensor_hooks(node, gin)
            if capture is not None and k in capture:
                _capture(gin, capture[k], captured)
            run = needed is None or k in run_set
            if inputs is not None and isinstance(node, AccumulateGrad):
                run = accumulate and k in capture
            out = None  # (the last node's gradients: no reference kept while this runs)
            out = _apply(node, gin, keep_graph, anomaly) if run and gin else None
            for i, (nxt, nr) in enumerate(node.next_functions):
                if nxt is None:
                    continue
                kn = id(nxt)
                if needed is not None and kn not in needed:
                    continue
                buf = buffers.get(kn)
                if buf is None:
                    buf = buffers[kn] = [nxt, {}]
                if out is not None and i < len(out) and out[i] is not None:
                    _acc(buf[1], nr, out[i])
                d = deps[kn] - 1
                deps[kn] = d
                if d == 0:
                    heapq.heappush(ready, (-nxt._seq, kn, nxt))
    finally:
        st.grad_enabled = prev
    return captured


def _tensor_hooks(node, gin: dict) -> None:
    """Tensor hooks, then retain_grad, on the gradients reaching node (gin: {output_nr: g})."""
    if node._tensor_hooks:
        for nr, hooks in node._tensor_hooks.items():
            if nr in gin and gin[nr] is not None:
                for h in list(hooks.values()):
                    r = h(gin[nr])
                    if r is not None:
                        gin[nr] = r
    if node._retain:
        for nr, h in node._retain.items():
            if gin.get(nr) is not None:
                h(gin[nr])


def _apply(node, gin: dict, keep_graph: bool, anomaly) -> list:
    """The node's pre-hooks, its backward, anomaly checks, its hooks; then its saved tensors
    are freed unless keep_graph. Returns the gradients for its next_functions."""
    glist = [gin.get(i) for i in range(max(gin) + 1)]
    if node._pre_hooks:
        for h in list(node._pre_hooks.values()):
            r = h(tuple(glist))
            if r is not None:
                glist = list(r)
    try:
        out = node.apply(glist)
    except Exception as e:
        if anomaly and node._trace:
            import warnings
            warnings.warn("Error detected in " + node.name() + ". Traceback of "
                          "forward call that caused the error:\n" +
                          "".join(node._trace), stacklevel=3)
        raise e
    if anomaly and anomaly[1]:
        _check_anomaly_nan(node, out)
    if node._hooks:
        for h in list(node._hooks.values()):
            r = h(tuple(out), tuple(glist))
            if r is not None:
                out = list(r)
    if not keep_graph:
        node.release()
    return out


def _capture(gin: dict, cap, captured: list) -> None:
    """inputs=: the gradients reaching an input's node, [(output_nr, input index)], summed."""
    for nr, slot in cap:
        g = gin.get(nr)
        if g is not None:
            captured[slot] = g if captured[slot] is None else captured[slot] + g


def _node_step(node, gin: dict, keep_graph: bool, run: bool = True, cap=None, captured=None):
    """One node of a backward pass, for the native loop (csrc/engine.cpp): the nodes with hooks,
    those of classes other than OpNode / AccumulateGrad, and inputs' nodes (cap) run here."""
    _tensor_hooks(node, gin)
    if cap is not None:
        _capture(gin, cap, captured)
    return _apply(node, gin, keep_graph, None) if run and gin else None


def _acc(buf: dict, nr: int, g):
    old = buf.get(nr)
    buf[nr] = g if old is None else old + g


def _input_edge(t):
    return edge_of(t)


def _needed(order, targets) -> tuple[set, set]:
    """(needed, run): nodes from which a target is reachable (targets included), and those
    among them that must run because a needed node lies below them (a target itself only
    captures its incoming gradient). Iterative post-order DFS: graphs can be deep."""
    needed: set = set()
    run: set = set()
    done: set = set()
    for root in order:
        if id(root) in done:
            continue
        done.add(id(root))
        stack = [(root, iter(root.next_functions))]
        while stack:
            n, it = stack[-1]
            for nxt, _ in it:
                if nxt is not None and id(nxt) not in done:
                    done.add(id(nxt))
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
            else:
                stack.pop()
                k = id(n)
                if any(c is not None and id(c) in needed for c, _ in n.next_functions):
                    run.add(k)
                    needed.add(k)
                elif k in targets:
                    needed.add(k)
    return needed, run


# ---- the engine object core's Tensor calls ----------------------------------------------------
def _root_edge(t, i):
    e = edge_of(t)
    if e is not None:
        return e
    raise RuntimeError(f"element {i} of tensors does not require grad and does not have a "
                       f"grad_fn")


def make_grads(outputs, grad_outputs, is_grads_batched=False):
    import ember
    res = []
    for i, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if o._requires_grad:
                if o.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not o.dtype.is_floating_point and not o.dtype.is_complex:
                    raise RuntimeError(f"grad can be implicitly created only for real scalar "
                                       f"outputs but got {o.dtype}")
                g = ember.ones_like(o)
        elif not isinstance(g, Tensor):
            g = ember.full_like(o, g)
        elif tuple(g.shape) != tuple(o.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} "
                               f"and output[{i}] has a shape of {o.shape}.")
        res.append(g)
    return res


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


class _Callbacks(threading.local):
    depth = 0
    fns: list = []


_CB = _Callbacks()


def queue_callback(fn) -> None:
    """Run fn() once the outermost backward pass running in this thread has finished (torch's
    `Variable._execution_engine.queue_callback`; FSDP waits for its reduce-scatters there)."""
    if _CB.depth == 0:
        raise RuntimeError("queue_callback: no backward pass is running")
    _CB.fns = [*_CB.fns, fn]


def _run_with_callbacks(*args):
    _CB.depth += 1
    ok = False
    try:
        out = run_backward(*args)
        ok = True
    finally:
        _CB.depth -= 1
        if _CB.depth == 0:
            fns, _CB.fns = _CB.fns, []
            if ok:
                for fn in fns:
                    fn()
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate gradients of `tensors` into the graph leaves' `.grad` (PyTorch semantics)."""
    tensors = _as_list(tensors)
    if grad_tensors is None:
        grad_tensors = grad_variables
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} tensors and {len(tensors)} gradients")
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    roots = [_root_edge(t, i) for i, t in enumerate(tensors)]
    grads = make_grads(tensors, grads)
    captured = _run_with_callbacks(roots, grads, retain_graph, create_graph, inputs, True)
    if inputs is not None:
        for t, g in zip(inputs, captured):
            if g is not None and t.grad_fn is not None:  # non-leaf inputs accumulate too
                with GRAD_LOCK:
                    t.grad = g.detach() if t.grad is None else t.grad + g.detach()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of outputs w.r.t. inputs, returned (not accumulated into `.grad`)."""
    import ember
    single = isinstance(inputs, Tensor)
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if not allow_unused and materialize_grads:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads "
                         "is True, but got False.")
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grads)} and "
                           f"{len(outputs)}")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError("grad(): inputs must be Tensors")
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    roots = [_root_edge(t, i) for i, t in enumerate(outputs)]
    grads = make_grads(outputs, grads)
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported by ember")
    captured = _run_with_callbacks(roots, grads, retain_graph, create_graph, inputs, False)
    res = []
    for i, (t, g) in enumerate(zip(inputs, captured)):
        if g is None:
            if materialize_grads:
                g = ember.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                                   f"been used in the graph. Set allow_unused=True if this is "
                                   f"the desired behavior.")
        elif not create_graph and g._requires_grad:
            g = g.detach()
        res.append(g)
    return tuple(res) if not single else tuple(res)


class Engine:
    """The object core's Tensor methods call (registered as component "autograd")."""

    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False,
                 inputs=None):
        backward(tensor, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, t, hook):
        if not t._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if t.grad_fn is not None:
            nr = t._ag.output_nr if t._ag is not None else 0
            return add_hook(t.grad_fn._tensor_hook_dict(nr), hook)
        return add_hook(accumulate_grad_node(t)._tensor_hook_dict(0), hook)

    def register_post_hook(self, t, hook):
        if t.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if not t._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        i = info(t)
        if i.post_hooks is None:
            from ._graph import _HookDict
            i.post_hooks = _HookDict()
        return add_hook(i.post_hooks, hook)

    def retain_grad(self, t):
        if not t._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if t.grad_fn is None:
            return
        i = info(t)
        if i.retains_grad:
            return
        i.retains_grad = True
        import weakref
        ref = weakref.ref(t)

        def retain(g):
            x = ref()
            if x is not None:
                gd = g.detach()
                x.grad = gd.clone() if x.grad is None else x.grad + gd
        fn = t.grad_fn
        if fn._retain is None:
            fn._retain = {}
        fn._retain[i.output_nr] = retain


ENGINE = Engine()
