"""`ember._dynamo.explain(fn)(*args)`: compile fn with a recording backend, run it once, and
report the graphs, graph breaks (reason and file:line), ops and guards."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["explain", "ExplainOutput"]


@dataclass
class BreakReason:
    reason: str
    where: str

    def __str__(self):
        return f"{self.reason} (at {self.where})"


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)
    out_guards: list = field(default_factory=list)

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        lines += [f"  Break Reason {i + 1}: {b}" for i, b in enumerate(self.break_reasons)]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"  Ops {i + 1}:")
            lines += [f"    {o}" for o in ops]
        lines.append("Out Guards:")
        for gs in self.out_guards:
            lines += [f"  {w}" for _, w in gs]
        return "\n".join(lines) + "\n"


def explain(f, *extra_args, **extra_kwargs):
    from .eval_frame import optimize

    def inner(*args, **kwargs):
        hooks = {"graphs": [], "breaks": [], "guards": []}
        c = optimize(f, backend="eager", _hooks=hooks)
        c(*args, **kwargs)
        out = ExplainOutput()
        out.graphs = hooks["graphs"]
        out.graph_count = len(out.graphs)
        out.break_reasons = [BreakReason(r, w) for r, w in hooks["breaks"]]
        out.graph_break_count = len(out.break_reasons)
        out.ops_per_graph = [[n.target for n in g.graph.nodes if n.op == "call_function"]
                             for g in out.graphs]
        out.op_count = sum(len(o) for o in out.ops_per_graph)
        out.out_guards = hooks["guards"]
        return out
    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner
