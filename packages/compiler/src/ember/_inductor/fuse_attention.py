"""A graph pass before AOT autograd: attention written out by hand,
`softmax(masked_fill(q @ k.transpose(-2, -1) * s, mask, -inf), -1) @ v` (also `/ s`, no scale,
no mask, or `+ bias`), becomes one `scaled_dot_product_attention` call, which CUDA runs as the
flash-attention pair (forward and backward: no (L, S) scores in memory, causal blocks skipped).

`is_causal=True` where the mask is provably the causal one (`tril(ones(L, S)) == 0`, or a
constant bool tensor equal to it); another bool mask passes as `attn_mask=~mask`. The rewrite
needs every intermediate used once (attention weights read elsewhere, dropout between softmax
and the product, a softmax over another dim, a mask that would broadcast the scores: no
rewrite). CUDA graphs only: on CPU the compiler's fused softmax kernels stay (measured: the
C++ path does not gain). A row every key of which is masked gives zeros where the hand-written
softmax gives NaN (PyTorch's SDPA does the same). EMBER_FUSE_ATTENTION=0 turns it off.
"""
from __future__ import annotations

import logging
import math
import os

from ember import _dtype as D
from ember._tensor import Tensor
from ember.fx.interpreter import Interpreter

__all__ = ["fuse_attention"]

log = logging.getLogger("ember._inductor")
stats = {"rewrites": 0, "causal": 0}   # rewritten attention blocks, those with is_causal


def _q(n):
    """The op qualname a call_function node calls ('' for other nodes)."""
    return getattr(n.target, "qualname", "") if n.op == "call_function" else ""


def _one_user(n, user) -> bool:
    return len(n.users) == 1 and user in n.users


def fuse_attention(gm, example_inputs=None) -> int:
    """Rewrite gm's hand-written attention blocks in place; the number rewritten."""
    if os.environ.get("EMBER_FUSE_ATTENTION", "1") == "0":
        return 0
    cands = []
    for n in gm.graph.nodes:
        if _q(n) == "softmax" and len(n.users) == 1:
            (u,) = n.users
            if _q(u) == "matmul" and len(u.args) == 2 and u.args[0] is n and not u.kwargs:
                cands.append((n, u))
    if not cands:
        return 0
    vals = _values(gm)
    if vals is None:
        return 0
    done = 0
    for sm, pv in cands:
        m = _match(gm, sm, pv, vals)
        if m is not None:
            _rewrite(gm, pv, *m)
            done += 1
    if done:
        gm.graph.eliminate_dead_code()
        gm.recompile()
        stats["rewrites"] += done
        log.info("ember inductor: %d attention block(s) -> scaled_dot_product_attention", done)
    return done


class _Values(Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.vals: dict = {}

    def run_node(self, n):
        r = super().run_node(n)
        self.vals[n] = r
        return r


def _values(gm):
    """Each node's fake value (the capture's placeholders carry theirs), or None."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    vals = [n.meta.get("val") for n in phs]
    fakes = [v for v in vals if isinstance(v, Tensor)]
    if len(vals) != len(phs) or not fakes or not hasattr(fakes[0], "fake_mode"):
        return None
    if not any(v.device.type == "cuda" for v in fakes):
        return None
    try:
        interp = _Values(gm)
        with fakes[0].fake_mode:
            interp.run(*vals)
    except Exception as e:  # noqa: BLE001 - no values, no rewrite
        log.info("ember inductor: attention rewrite skipped (%s: %s)", type(e).__name__, e)
        return None
    return interp.vals


def _scale_of(s):
    """(the q @ k^T node, its scale) of the scores node s."""
    if _q(s) in ("mul", "mul.Tensor") and len(s.args) == 2 and not s.kwargs:
        a, b = s.args
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            return a, float(b)
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return b, float(a)
    if _q(s) in ("div", "div.Tensor") and len(s.args) == 2 and not s.kwargs:
        a, b = s.args
        if isinstance(b, (int, float)) and not isinstance(b, bool) and b != 0:
            return a, 1.0 / float(b)
    return s, 1.0


def _qk(mm):
    """(q, k) of mm = matmul(q, k.transpose(-2, -1)) on 4-d tensors, or None."""
    if _q(mm) != "matmul" or len(mm.args) != 2 or mm.kwargs:
        return None
    q, kt = mm.args
    if _q(kt) != "transpose.int" and _q(kt) != "transpose":
        return None
    if len(kt.users) != 1 or len(kt.args) != 3:
        return None
    if {d % 4 if isinstance(d, int) else None for d in kt.args[1:]} != {2, 3}:
        return None
    return q, kt.args[0]


def _match(gm, sm, pv, vals):
    """(q, k, v, mask node or None, mask kind, is_causal, scale) or None."""
    x = sm.args[0]
    dim = sm.args[1] if len(sm.args) > 1 else sm.kwargs.get("dim")
    if len(sm.args) > 2 or any(k != "dim" for k in sm.kwargs) or not isinstance(dim, int):
        return None
    v = pv.args[1]
    mask, kind, s = None, None, x
    if _q(x) in ("masked_fill", "masked_fill.Scalar") and len(x.args) == 3 and not x.kwargs:
        val = x.args[2]
        if not isinstance(val, float) or not (math.isinf(val) and val < 0):
            return None
        s, mask, kind = x.args[0], x.args[1], "fill"
    elif _q(x) in ("add", "add.Tensor") and len(x.args) == 2 and not x.kwargs:
        a, b = x.args
        s, mask = (a, b) if _qk(_scale_of(a)[0]) is not None else (b, a)
        kind = "add"
    if mask is not None and not _one_user(x, sm):
        return None
    if not _one_user(s, x if mask is not None else sm):
        return None
    mm, scale = _scale_of(s)
    if mm is not s and not _one_user(mm, s):
        return None
    qk = _qk(mm)
    if qk is None:
        return None
    q, k = qk
    tq, tk, tv = (vals.get(n) for n in (q, k, v))
    if not all(isinstance(t, Tensor) and t.ndim == 4 for t in (tq, tk, tv)):
        return None
    if tq.device.type != "cuda" or dim % 4 != 3:
        return None
    B, H, L, E = tq.shape
    S = tk.shape[2]
    if tuple(tk.shape) != (B, H, S, E) or tuple(tv.shape[:3]) != (B, H, S):
        return None
    if mask is None:
        return q, k, v, None, None, False, scale
    tm = vals.get(mask)
    if not isinstance(tm, Tensor) or tm.ndim > 4 or any(
            m != 1 and m != t for m, t in zip(tuple(tm.shape)[::-1], (S, L, H, B))):
        return None
    if kind == "fill":
        if tm.dtype is not D.bool:
            return None
        causal = _is_causal_mask(gm, mask, L, S)
        return q, k, v, mask, kind, causal, scale
    if tm.dtype is not tq.dtype:
        return None
    return q, k, v, mask, kind, False, scale


def _is_causal_mask(gm, mask, L, S) -> bool:
    """Whether the bool node mask (True: masked) is tril(ones(L, S)) == 0 or a constant equal
    to it (broadcast dims of 1 in front allowed for the constant)."""
    if _q(mask) in ("eq", "eq.Scalar") and len(mask.args) == 2 and mask.args[1] == 0:
        tri = mask.args[0]
        if _q(tri) != "tril" or (len(tri.args) > 1 and tri.args[1] != 0) or tri.kwargs.get(
                "diagonal", 0) != 0:
            return False
        ones = tri.args[0]
        if _q(ones) != "ones" or len(ones.args) != 1:
            return False
        size = ones.args[0]
        return isinstance(size, (tuple, list)) and tuple(size) == (L, S)
    if mask.op == "get_attr":
        import numpy as np
        obj = gm
        for part in mask.target.split("."):
            obj = getattr(obj, part, None)
        if not isinstance(obj, Tensor) or obj.shape[-2:] != (L, S):
            return False
        want = np.triu(np.ones((L, S), bool), 1)
        return bool((obj.cpu().numpy() == want).all())
    return False


def _rewrite(gm, pv, q, k, v, mask, kind, causal, scale):
    from ember._ops import OPS
    g = gm.graph
    with g.inserting_before(pv):
        am = None
        if mask is not None and not causal:
            am = mask if kind == "add" else g.call_function(OPS["logical_not"], (mask,))
        node = g.call_function(OPS["scaled_dot_product_attention"], (q, k, v),
                               {"attn_mask": am, "dropout_p": 0.0, "is_causal": causal,
                                "scale": scale})
    stats["causal"] += causal
    pv.replace_all_uses_with(node)
    g.erase_node(pv)
