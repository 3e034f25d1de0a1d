"""`export`: trace a module's forward (parameters and buffers lifted to graph inputs) through
make_fx into a graph of table ops, then name, check and describe it as an ExportedProgram."""
from __future__ import annotations

import contextlib
import inspect

import ember
from ember.utils import _pytree as pytree

from ._dims import Dim, UserError, _DimHint
from .graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)


@contextlib.contextmanager
def _swapped(mod, names: list[str], values: list):
    """Temporarily make each named parameter/buffer of mod the given tensor."""
    saved = []
    for fqn, v in zip(names, values):
        *path, leaf = fqn.split(".")
        owner = mod.get_submodule(".".join(path)) if path else mod
        table = owner._parameters if leaf in owner._parameters else owner._buffers
        saved.append((table, leaf, table[leaf]))
        table[leaf] = v
    try:
        yield
    finally:
        for table, leaf, old in saved:
            table[leaf] = old


def _check_dynamic_shapes(mod, args, kwargs, dynamic_shapes) -> None:
    """The spec's structure matches the inputs; every Dim contains its input's size. ember's
    export specializes every size (no symbolic tracing yet): a dim the user marks dynamic is
    refused with PyTorch's UserError type rather than silently made static."""
    if dynamic_shapes is None:
        return
    if hasattr(dynamic_shapes, "dynamic_shapes"):   # ShapesCollection
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    sig_names = list(inspect.signature(mod.forward).parameters)
    if isinstance(dynamic_shapes, dict):
        by_name = dict(zip(sig_names, args)) | dict(kwargs)
        pairs = [(by_name.get(k), v, k) for k, v in dynamic_shapes.items()]
        for k in dynamic_shapes:
            if k not in by_name:
                raise UserError(f"When `dynamic_shapes` is specified as a dict, its top-level "
                                f"keys must be the arg names {sig_names} of `inputs`, but here "
                                f"they are {list(dynamic_shapes)}.")
    else:
        pairs = [(a, s, sig_names[i] if i < len(sig_names) else f"args[{i}]")
                 for i, (a, s) in enumerate(zip(args, dynamic_shapes))]
    for x, spec, name in pairs:
        if spec is None or not isinstance(x, ember.Tensor):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for d, dim in items:
            if dim is None or dim is _DimHint.STATIC:
                continue
            if d >= x.dim():
                raise UserError(f"dynamic_shapes of {name} names dim {d}, but the input has "
                                f"{x.dim()} dims")
            size = x.shape[d]
            if isinstance(dim, Dim) and not (dim.min <= size <= dim.max):
                raise UserError(f"Received user-specified dim hint Dim('{dim.__name__}', "
                                f"min={dim.min}, max={dim.max}), but export 0/1 specialized "
                                f"due to hint of {size} for dimension inputs['{name}']"
                                f".shape[{d}]." if size in (0, 1) else
                                f"Constraints violated ({dim.__name__})! The size {size} of "
                                f"{name}.shape[{d}] is outside its range [{dim.min}, "
                                f"{dim.max}].")
            if dim is _DimHint.AUTO:
                continue    # AUTO may specialize: ember's export does
            label = dim.__name__ if isinstance(dim, Dim) else "Dim.DYNAMIC"
            raise UserError(
                f"Constraints violated ({label})! ember.export specializes every size: "
                f"{name}.shape[{d}] would be the constant {size}. Symbolic shapes (ShapeEnv) "
                f"are not implemented in ember's export yet.\nSuggested fixes:\n  "
                f"{label} = {size}  (or Dim.STATIC / Dim.AUTO)")


def export(mod, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
           strict: bool = False, preserve_module_call_signature: tuple = (), **_):
    """Trace `mod(*args, **kwargs)` into an ExportedProgram (torch.export.export).

    >>> import ember
    >>> ep = export(ember.nn.Linear(4, 2), (ember.ones(3, 4),))
    >>> ep.module()(ember.ones(3, 4)).shape
    ember.Size([3, 2])
    """
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember._subclasses.fake_tensor import FakeTensorMode
    from ember.fx.passes.shape_prop import ShapeProp

    from .exported_program import (
        ExportedProgram,
        ModuleCallEntry,
        ModuleCallSignature,
    )
    if not isinstance(mod, ember.nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(f"Expecting `args` to be a tuple of example positional inputs, got "
                        f"{type(args)}")
    kwargs = dict(kwargs or {})
    _check_dynamic_shapes(mod, args, kwargs, dynamic_shapes)
    params = dict(mod.named_parameters())
    buffers = dict(mod.named_buffers())
    persistent = set(mod.state_dict(keep_vars=True))
    flat_user, in_spec = pytree.tree_flatten((args, kwargs))
    np_, nb = len(params), len(buffers)
    out_spec = [None]

    def lifted(*flat):
        p, b, user = flat[:np_], flat[np_:np_ + nb], flat[np_ + nb:]
        with _swapped(mod, list(params) + list(buffers), list(p) + list(b)):
            a, k = pytree.tree_unflatten(list(user), in_spec)
            out = mod(*a, **k)
        leaves, out_spec[0] = pytree.tree_flatten(out)
        return tuple(leaves)

    example = list(params.values()) + list(buffers.values()) + flat_user
    # fake tensors: each op's meta runs (its checks, its output sizes), nothing is computed
    with ember.no_grad():
        traced = make_fx(lifted, tracing_mode="fake")(*example)
    names = ["p_" + n.replace(".", "_") for n in params] + \
        ["b_" + n.replace(".", "_") for n in buffers] + _user_names(mod, args, kwargs, flat_user)
    gm = _renamed(traced, names)
    with ember.no_grad():
        ShapeProp(gm, fake_mode=FakeTensorMode()).propagate(*example)
    ins = [InputSpec(InputKind.PARAMETER, TensorArgument(nm), fqn)
           for nm, fqn in zip(names, params)]
    ins += [InputSpec(InputKind.BUFFER, TensorArgument(nm), fqn, fqn in persistent)
            for nm, fqn in zip(names[np_:], buffers)]
    ins += [InputSpec(InputKind.USER_INPUT, TensorArgument(nm), None) for nm in names[np_ + nb:]]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(getattr(o, "name", str(o))), None)
            for o in out_node.args[0]]
    state = {k: v for k, v in list(params.items()) + list(buffers.items()) if k in persistent}
    constants = {k: v for k, v in buffers.items() if k not in persistent}
    forward_names = names[np_ + nb:]
    mcg = [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec[0],
                                                   forward_names))]
    mcg += [ModuleCallEntry(n, None) for n, _ in mod.named_modules() if n]
    return ExportedProgram(gm, gm.graph, ExportGraphSignature(ins, outs), state, {}, mcg,
                           example_inputs=(args, kwargs), constants=constants)


def _user_names(mod, args, kwargs, flat_user) -> list[str]:
    """Placeholder names of the user inputs: forward's parameter names, as PyTorch's."""
    try:
        params = list(inspect.signature(mod.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i].name if i < len(params) and params[i].kind in (
            params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD) else f"args_{i}"
        n = len(pytree.tree_leaves(a))
        names += [base] if n == 1 else [f"{base}_{j}" for j in range(n)]
    for k, v in kwargs.items():
        n = len(pytree.tree_leaves(v))
        names += [k] if n == 1 else [f"{k}_{j}" for j in range(n)]
    return [_safe(n) for n in names[:len(flat_user)]]


def _safe(name: str) -> str:
    """Python builtins and keywords are not placeholder names (PyTorch appends `_1` too)."""
    import builtins
    import keyword
    return name + "_1" if keyword.iskeyword(name) or hasattr(builtins, name) else name


def _renamed(traced, names: list[str]):
    """A copy of the traced GraphModule with its placeholders named as export names them."""
    from ember.fx import Graph, GraphModule
    g = Graph()
    val_map = {}
    phs = [n for n in traced.graph.nodes if n.op == "placeholder"]
    for n, name in zip(phs, names):
        val_map[n] = g.placeholder(name)
    out = g.graph_copy(traced.graph, val_map)
    g.output(out)
    return GraphModule(traced, g)


def retrace_decomposed(ep, decomp_table):
    """ExportedProgram.run_decompositions: re-trace the graph with ops decomposed."""
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.fx.passes.shape_prop import ShapeProp

    from ember._decomp import core_aten_decompositions

    from .exported_program import ExportedProgram
    table = core_aten_decompositions() if decomp_table is None else decomp_table
    phs = [n for n in ep.graph.nodes if n.op == "placeholder"]
    example = [_example_for(n) for n in phs]
    with ember.no_grad():
        traced = make_fx(ep.graph_module, decomposition_table=table)(*example)
    gm = _renamed(traced, [n.name for n in phs])
    with ember.no_grad():
        ShapeProp(gm).propagate(*example)
    return ExportedProgram(gm, gm.graph, ep.graph_signature, ep.state_dict,
                           ep.range_constraints, ep.module_call_graph, ep.example_inputs,
                           ep.constants)


def _example_for(node):
    m = node.meta.get("tensor_meta")
    shape = [s if isinstance(s, int) else 2 for s in m.shape]
    return ember.zeros(shape, dtype=m.dtype)
