"""cross_entropy over class indices, as the joint trace of a compiled CUDA graph records it: the
loss from each row's log-sum-exp and its target logit, so no (N, C) log_softmax is stored.

Core's decomposition (log_softmax, then nll_loss_forward on it) made the compiled GPT-2 step
write the (B*T, vocab) log-probabilities in the forward (the extern nll_loss_forward reads them,
and they were the backward's saved value) and read them again in the backward: five passes over
the logits. Here the forward reads the logits once (one kernel: the row max and the sum of
exp(x - max), online), picks the target logits with nll_loss_forward on the logits themselves
(N reads) and saves the logits (the head GEMM's output, kept anyway), the row max and the sum;
autograd of this formula gives the backward one pass, exp(x - max) / sum * g + the one-hot term
(torch.compile's three passes). The row max is taken without gradient (its total derivative is
zero); it and the sum are marked for the partitioner to save (meta["save"]), not recompute.
The capture records cross_entropy as log_softmax then nll_loss_forward: `rewrite` puts one
call of `cross_entropy` in their place in the graph the joint trace runs. Values: the loss and
gradient are computed in float32 from the logits; eager rounds the log-softmax to the input's
dtype first (bfloat16: results differ in the last bits).

Used where x is (N, C) floating on CUDA, targets are class indices, no class weights and no
label smoothing (EMBER_CE_DECOMP=0: core's decomposition everywhere)."""
from __future__ import annotations

import operator
import os

__all__ = ["cross_entropy", "rewrite"]

_NONE, _MEAN, _SUM = 0, 1, 2


def _fits(x, t, w, reduction, label_smoothing) -> bool:
    from ember import Tensor
    return (os.environ.get("EMBER_CE_DECOMP", "1") != "0" and isinstance(x, Tensor) and
            isinstance(t, Tensor) and w is None and not label_smoothing and
            reduction in (_NONE, _MEAN, _SUM) and x.ndim == 2 and t.ndim == 1 and
            x.dtype.is_floating_point and not t.dtype.is_floating_point and
            getattr(x.device, "type", None) == "cuda")


def _save(*ts) -> None:
    """Mark the nodes of ts in the recording trace: the partitioner saves them for the
    backward (a row max and sum of the logits, 8 bytes a row) instead of recomputing them
    there (another pass over the logits)."""
    from ember._state import state
    for mode in state.modes:
        lookup = getattr(mode, "lookup", None)
        for t in ts if lookup is not None else ():
            node = lookup(t)
            if node is not None:
                node.meta["save"] = True


def cross_entropy(x, t, w=None, reduction=_MEAN, ignore_index=-100, label_smoothing=0.0):
    """cross_entropy_loss's decomposition for the joint trace (see the module's docstring);
    other cases: core's."""
    import ember
    from ember._ops import OPS
    if not _fits(x, t, w, reduction, label_smoothing):
        return OPS["cross_entropy_loss"].decomp(x, t, w, reduction, ignore_index,
                                                label_smoothing)
    cd = ember.float64 if x.dtype is ember.float64 else ember.float32
    with ember.no_grad():
        m = x.to(cd).amax(1)
    # (a second conversion: one shared by both reductions would be stored, 4 bytes an element)
    s = (x.to(cd) - m[:, None]).exp().sum(1)
    _save(m, s)
    lse = s.log() + m
    keep = t != ignore_index
    # -x[i, t[i]] (0 where ignored): a gather of N logits, its vjp the lowered one-hot
    picked = OPS["nll_loss_forward"](x, t, None, _NONE, ignore_index)[0]
    per = picked.to(cd) + ember.where(keep, lse, ember.zeros_like(lse))
    if reduction == _MEAN:
        out = per.sum() / keep.sum().to(cd)
    elif reduction == _SUM:
        out = per.sum()
    else:
        out = per
    return out.to(x.dtype)


def rewrite(gm):
    """gm, or a copy whose `nll_loss_forward(log_softmax(x, 1), t, None, r, ii)` pairs (the
    log_softmax used by nothing else, the total weight unused) are one `cross_entropy` call
    each (its trace takes core's decomposition, the same two ops, where it does not `_fits`:
    the capture's nodes carry no values to decide that here)."""
    from ember._ops import OPS
    from ember.fx.graph import Graph
    from ember.fx.graph_module import GraphModule
    ls_op, nll_op = OPS["log_softmax"], OPS["nll_loss_forward"]
    pairs = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is not nll_op or len(n.args) != 5:
            continue
        ls, t, w, r, ii = n.args
        if getattr(ls, "target", None) is not ls_op or len(ls.users) != 1 or w is not None or \
                len(ls.args) < 2 or ls.args[1] not in (1, -1) or \
                (len(ls.args) > 2 and ls.args[2] is not None) or ls.kwargs or n.kwargs:
            continue
        gets = list(n.users)
        if not all(u.target is operator.getitem and (u.args[1] == 0 or not u.users)
                   for u in gets):
            continue
        if r not in (_NONE, _MEAN, _SUM):
            continue
        pairs[n] = ls
    if not pairs or any(n.op == "call_module" for n in gm.graph.nodes):
        return gm   # (the copy below carries constants and subgraphs, not submodules)
    g, env, drop = Graph(), {}, set(pairs.values())
    for n in gm.graph.nodes:
        if n in drop:
            continue
        if n in pairs:
            ls, t, _, r, ii = n.args
            new = g.call_function(cross_entropy, (env[ls.args[0]], env[t], None, r, ii, 0.0))
            for u in n.users:
                if u.args[1] == 0:
                    new.meta = dict(u.meta)
                    env[u] = new
            if n.meta.get("recompute"):   # (traced inside ember.utils.checkpoint)
                new.meta["recompute"] = n.meta["recompute"]
            continue
        if n.op == "call_function" and n.target is operator.getitem and n.args[0] in pairs:
            continue
        env[n] = g.node_copy(n, lambda a: env[a])
    consts = {n.target: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    out = GraphModule(consts, g, type(gm).__name__)
    for k in ("_in_spec", "_out_spec"):
        if hasattr(gm, k):
            setattr(out, k, getattr(gm, k))
    return out
