"""The scheduler: buffers in program order -> kernels (fused groups) and extern calls.

A kernel iterates outer ranges R and, per outer index, runs phases: loops over inner ranges K
(pointwise stores and reduction terms) and outer-level statements (a reduction's result, a
pointwise op on the reduced shape). A buffer joins the latest kernel it can follow when its
ranges fit the kernel's (R + K pointwise, R x K reduction, R outer-level) and every value it
reads from that kernel is one the kernel has at the same index: vertical chains,
reductions with their prologue and epilogue (softmax, layer norm) and horizontal siblings.
A GEMM template (gemm.py) starts a kernel of its own and takes the pointwise buffers over its
output that follow it (its epilogue: bias, activation, residual).
"""
from __future__ import annotations

from ember._ops._cppops import CppOps, Var

from .ir import ComputedBuffer, ExternBuffer, TBox, kdtype, loop_vars

__all__ = ["Kernel", "schedule"]


class Kernel:
    """A fused group: outer ranges R, inner ranges K, phases of (level, buffers)."""

    def __init__(self, name, R, K):
        self.name, self.R, self.K = name, tuple(R), tuple(K)
        self.phases: list = []     # [("outer" | "loop", [ComputedBuffer])]
        self.where: dict = {}      # buffer name -> (phase index, level)
        self.xs = loop_vars("x", len(R))
        self.rs = loop_vars("r", len(K))
        self.template = None       # a gemm.TemplateBuffer: its GEMM, then pointwise epilogues

    @property
    def nodes(self):
        return [b for _, bs in self.phases for b in bs]

    def vars_for(self, b):
        """(vars, rvars, level) for buffer b in this kernel, or None when its ranges don't fit."""
        if b.is_reduction:
            if b.ranges == self.R and b.rranges == self.K and self.K:
                return self.xs, self.rs, "loop"
            return None
        if self.K and b.ranges == self.R + self.K:
            return self.xs + self.rs, (), "loop"
        if b.ranges == self.R:
            return self.xs, (), "outer"
        return None

    def store_index(self, b):
        vs, _, _ = self.vars_for(b)
        return b.store_index(vs)

    def resplit(self, b) -> bool:
        """A pointwise-only kernel over R = A + B takes a reduction over A x B: its buffers
        become one loop phase over B."""
        if self.K or not b.is_reduction or b.ranges + b.rranges != self.R or not b.rranges:
            return False
        nodes = self.nodes
        self.R, self.K = tuple(b.ranges), tuple(b.rranges)
        self.xs, self.rs = loop_vars("x", len(self.R)), loop_vars("r", len(self.K))
        self.phases = [("loop", nodes)] if nodes else []
        self.where = {n.name: (0, "loop") for n in nodes}
        return True

    def var_ranges(self):
        return dict(zip(self.xs + self.rs, self.R + self.K))


class _Reads(CppOps):
    """Records the (buffer, index) loads of a buffer's computation."""

    def __init__(self, var_ranges):
        super().__init__()
        self.var_ranges = var_ranges
        self.reads: list = []

    def load(self, buf, index):
        self.reads.append((buf, index))
        return Var(f"ld{len(self.reads)}", kdtype(buf.dtype))

    def index_expr(self, e):
        return Var("i", _int64())

    def philox(self, kind, seed, ctr, flat):
        from ember import _dtype as D
        return Var("rnd", D.float32)


def _int64():
    from ember import _dtype as D
    return D.int64


def reads_of(b, vs, rvs, var_ranges):
    h = _Reads(var_ranges)
    b.fn(h, vs, rvs)
    if b.post is not None:
        b.post(h, Var("acc", b.acc_dtype))
    return h.reads


def _placement(k: Kernel, b) -> str | None:
    """The phase placement of b in k: "same" (the last phase), "new" (a new phase), None."""
    fit = k.vars_for(b)
    if fit is None:
        return None
    vs, rvs, level = fit
    reads = reads_of(b, vs, rvs, k.var_ranges())
    last = len(k.phases) - 1
    need_new = False
    for buf, index in reads:
        w = k.where.get(buf.name)
        if w is None:
            continue
        ph, lvl = w
        if index != k.store_index(buf):
            return None
        if level == "loop" and ph == last and k.phases[ph][0] == "loop" and buf.is_reduction:
            need_new = True  # its value exists only after the loop
    if not k.phases:
        return "new"
    last_level = k.phases[-1][0]
    if need_new or last_level != level:
        return "new"
    return "same"


def schedule(buffers, names) -> list:
    """Kernels and extern calls in execution order."""
    steps: list = []
    pos: dict = {}   # buffer name -> step index
    for b in buffers:
        if isinstance(b, ExternBuffer):
            steps.append(b)
            for o in b.outputs:
                if o is not None:
                    pos[o.name] = len(steps) - 1
            continue
        assert isinstance(b, ComputedBuffer)
        if getattr(b, "spec", None) is not None:   # a GEMM template starts its own kernel
            k = Kernel(f"kernel{names()}", b.ranges, ())
            _add(k, b, "new")
            k.template = b
            steps.append(k)
            pos[b.name] = len(steps) - 1
            continue
        deps = _deps(b)
        earliest = max((pos[d] for d in deps if d in pos), default=-1)
        placed = False
        i = max((j for j, s in enumerate(steps) if isinstance(s, Kernel)), default=-1)
        if i >= 0 and i >= earliest:  # the latest kernel, when b may follow what it reads
            k = steps[i]
            # a template kernel takes pointwise epilogues over its output only
            mode = None if k.template is not None and (b.is_reduction or b.ranges != k.R) \
                else _placement(k, b)
            if mode is None and not k.K and k.template is None and _can_resplit(k, b):
                k.resplit(b)
                mode = _placement(k, b)
            if mode is not None:
                _add(k, b, mode)
                pos[b.name] = i
                placed = True
        if not placed:
            k = Kernel(f"kernel{names()}", b.ranges, b.rranges)
            _add(k, b, "new")
            steps.append(k)
            pos[b.name] = len(steps) - 1
    return steps


def _can_resplit(k, b) -> bool:
    return b.ranges + b.rranges == k.R and bool(b.rranges)


def _add(k: Kernel, b, mode):
    level = k.vars_for(b)[2]
    if mode == "new":
        k.phases.append((level, [b]))
    else:
        k.phases[-1][1].append(b)
    k.where[b.name] = (len(k.phases) - 1, level)


def _deps(b) -> set:
    vs = loop_vars("x", len(b.ranges))
    rvs = loop_vars("r", len(b.rranges))
    return {buf.name for buf, _ in reads_of(b, vs, rvs, dict(zip(vs + rvs, b.ranges +
                                                                    b.rranges)))}


_ = TBox
