"""einsum's decomposition: operands contracted pairwise, left to right, each pair as one batched
matmul (repeated subscripts first reduced to diagonals, size-1 dims broadcast, letters nobody
needs summed early). The entry's `decomp=`: a device without an einsum kernel (cuda: cuBLAS for
the matmuls) runs it; the CPU keeps its numpy kernel.
"""
from __future__ import annotations


def einsum(equation, tensors, path=None):
    """The einsum entry's decomposition (same arguments as the op)."""
    from .einsum import _check
    ts = list(tensors)
    subs, out, size = _check(equation, ts)                # PyTorch's errors
    ops = [_prep(t, s, size) for t, s in zip(ts, subs)]
    cur, cs = ops[0]
    for k in range(1, len(ops)):
        later = set(out).union(*(set(s) for _, s in ops[k + 1:]))
        cur, cs = _pair(cur, cs, ops[k][0], ops[k][1], later, size)
    alone = tuple(i for i, c in enumerate(cs) if c not in set(out))
    if alone:
        cur = cur.sum(alone)
        cs = "".join(c for c in cs if c in set(out))
    r = cur.permute([cs.index(c) for c in out]) if out else cur
    r = r.contiguous()
    if any(r._storage is t._storage for t in ts):
        r = r.clone()                                     # a fresh tensor, never an input's view
    return r


def _prep(t, s, size):
    """t with its repeated subscripts reduced to diagonals and size-1 dims broadcast."""
    while True:
        rep = next((c for c in s if s.count(c) > 1), None)
        if rep is None:
            break
        i = s.index(rep)
        j = s.index(rep, i + 1)
        t = t.diagonal(0, i, j)                           # the diagonal goes last
        s = "".join(c for k, c in enumerate(s) if k not in (i, j)) + rep
    want = tuple(size[c] for c in s)
    if tuple(t.shape) != want:
        t = t.expand(want)
    return t, s


def _pair(a, sa, b, sb, later, size):
    """Contract two operands as one batched matmul: batch letters (both, kept), left (a only),
    right (b only), contracted (both, not kept); letters only one side has and nobody needs
    are summed first."""
    def sum_alone(x, s, other):
        alone = tuple(i for i, c in enumerate(s) if c not in later and c not in other)
        if not alone:
            return x, s
        return x.sum(alone), "".join(c for i, c in enumerate(s) if i not in alone)

    a, sa2 = sum_alone(a, sa, sb)
    b, sb = sum_alone(b, sb, sa)
    sa = sa2
    batch = [c for c in sa if c in sb and c in later]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    contr = [c for c in sa if c in sb and c not in later]

    def n(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p

    a2 = a.permute([sa.index(c) for c in batch + left + contr]).reshape(
        (n(batch), n(left), n(contr)))                    # (B, L, C)
    b2 = b.permute([sb.index(c) for c in batch + contr + right]).reshape(
        (n(batch), n(contr), n(right)))                   # (B, C, R)
    r = (a2 @ b2).reshape(tuple(size[c] for c in batch + left + right))
    return r, "".join(batch + left + right)
