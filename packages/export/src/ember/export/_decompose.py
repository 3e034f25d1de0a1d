"""`ExportedProgram.run_decompositions`: re-trace the program's graph on fake inputs with the
symbolic sizes it was exported with, ops decomposed, then functionalize it: each in-place write
to a buffer or an input becomes a functional op whose result the graph returns, named in the
signature as a BUFFER_MUTATION / USER_INPUT_MUTATION output (as torch.export does)."""
from __future__ import annotations

import ember

from .graph_signature import (
    ExportGraphSignature,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

_MUTATION_KIND = {InputKind.BUFFER: OutputKind.BUFFER_MUTATION,
                  InputKind.USER_INPUT: OutputKind.USER_INPUT_MUTATION,
                  InputKind.PARAMETER: OutputKind.PARAMETER_MUTATION}


def _to_sympy(e, syms: dict):
    """A size Expr of the archive/graph metadata as a sympy expression over syms."""
    import sympy
    if isinstance(e, int):
        return sympy.Integer(e)
    if e.op == "sym":
        return syms[e.args[0]]
    if e.op == "int":
        return sympy.Integer(e.args[0])
    a = [_to_sympy(x, syms) for x in e.args]
    if e.op == "Add":
        return sympy.Add(*a)
    if e.op == "Mul":
        return sympy.Mul(*a)
    if e.op in ("FloorDiv", "CleanDiv"):
        return sympy.floor(a[0] / a[1])
    if e.op in ("Mod", "PythonMod"):
        return sympy.Mod(a[0], a[1])
    return sympy.Max(*a) if e.op == "Max" else sympy.Min(*a)


def _fake_inputs(ep, phs):
    """Fake tensors for the placeholders: sizes as the exported symbols (fresh ShapeEnv
    symbols, one per exported one) -> (fakes, {old symbol name: new symbol})."""
    from ember._subclasses.fake_tensor import FakeTensorMode
    from ember.fx.experimental.symbolic_shapes import ShapeEnv, wrap_int

    from ._trace import _fake_with_sizes
    env = ShapeEnv(duck_shape=False)
    fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=env)
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    hints = dict(getattr(ep, "sym_hints", {}) or {})
    syms: dict = {}
    specs = [n.meta.get("tensor_meta") for n in phs]
    # the symbols' sources: make_fx's names of the placeholders (`arg2_1` -> source `arg2`)
    from ember.fx.experimental.proxy_tensor import _placeholder_names
    sources = [s[:-2] for s in _placeholder_names(ep.graph_module, len(phs))]
    for spec, src in zip(specs, sources):   # the roots: sizes that are one symbol
        for d, s in enumerate(spec.shape if spec is not None else ()):
            if not isinstance(s, int) and s.op == "sym":
                name = s.args[0]
                if name not in syms:
                    syms[name] = env.create_symbol(_hint(name, hints, ranges, len(syms)),
                                                   None)
                env.var_to_sources.setdefault(syms[name], []).append((src, d))
    fakes = []
    for n, spec in zip(phs, specs):
        if spec is None:
            raise NotImplementedError(f"run_decompositions: placeholder {n.name} has no "
                                      "tensor metadata")
        proto = ember.empty(0, dtype=spec.dtype)
        sizes = [s if isinstance(s, int) else wrap_int(_to_sympy(s, syms), env)
                 for s in spec.shape]
        fakes.append(_fake_with_sizes(fake, proto, sizes))
    return fakes, syms


def _hint(name: str, hints: dict, ranges: dict, k: int) -> int:
    if name in hints:
        return int(hints[name])
    r = ranges.get(name)
    lo, hi = (max(r.lower, 2), r.upper) if r is not None else (2, 1 << 62)
    return min(max(lo, 7 + k), hi)


def retrace_decomposed(ep, decomp_table):
    """The program re-traced with decomp_table's ops decomposed and its mutations
    functionalized (see the module docstring)."""
    from ember._decomp import core_aten_decompositions
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.fx.passes.functionalize import functionalize_mutations

    from ._trace import _renamed, _sym_expr, _sym_prop_cls
    from .exported_program import ExportedProgram
    table = core_aten_decompositions() if decomp_table is None else decomp_table
    phs = [n for n in ep.graph.nodes if n.op == "placeholder"]
    fakes, syms = _fake_inputs(ep, phs)
    with ember.no_grad():
        traced = make_fx(ep.graph_module, decomposition_table=table,
                         tracing_mode="fake")(*fakes)
    kinds = _append_mutations(traced, ep.graph_signature, functionalize_mutations(traced))
    gm = _renamed(traced, [n.name for n in phs])
    gm.graph.eliminate_dead_code()       # (the functional op's unused outputs)
    _renumber(gm)
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    sig = ExportGraphSignature(list(ep.graph_signature.input_specs), [
        OutputSpec(k, TensorArgument(getattr(v, "name", str(v))), t)
        for (k, t), v in zip(kinds, outs)])
    with ember.no_grad():
        _sym_prop_cls()(gm, fake_mode=fakes[0].fake_mode if fakes else None).propagate(*fakes)
    ranges = {_sym_expr(syms[str(k)]) if str(k) in syms else k: v
              for k, v in ep.range_constraints.items()}
    out = ExportedProgram(gm, gm.graph, sig, ep.state_dict, ranges, ep.module_call_graph,
                          ep.example_inputs, ep.constants)
    env = fakes[0].fake_mode.shape_env if fakes else None
    out.sym_hints = {str(s): int(env.var_to_val[s]) for s in syms.values()} if env else {}
    return out


def _append_mutations(gm, sig: ExportGraphSignature, mutated: dict) -> list:
    """Make the mutated placeholders' final values the graph's first outputs (in input order,
    as torch.export orders them) -> [(output kind, target)] for every output."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    kinds, values = [], []
    for ph, spec in zip(phs, sig.input_specs):
        if ph not in mutated:
            continue
        kind = _MUTATION_KIND.get(spec.kind)
        if kind is None:
            raise NotImplementedError(f"run_decompositions: the program writes to "
                                      f"{spec.arg.name}, an input of kind {spec.kind.name}")
        values.append(mutated[ph])
        kinds.append((kind, spec.target if spec.kind != InputKind.USER_INPUT
                      else spec.arg.name))
    out.args = (tuple(values) + tuple(out.args[0]),)
    gm.recompile()
    return kinds + [(s.kind, s.target) for s in sig.output_specs]


def _renumber(gm) -> None:
    """Name the nodes afresh in graph order (`add`, `add_1`, ...), as torch.export names the
    decomposed graph, instead of keeping the in-place names (`add_`) of rewritten nodes."""
    from ember.fx._codegen import Namespace
    from ember.fx.graph import target_to_str
    ns = Namespace()
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            ns.create_name(n.name, n)
        else:
            n.name = ns.create_name(target_to_str(n.target) if n.op == "call_function"
                                    else n.name, n)
    gm.graph._graph_namespace = ns
    gm.recompile()
