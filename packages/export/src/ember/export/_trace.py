"""`export`: trace a module's forward (parameters and buffers lifted to graph inputs) through
make_fx into a graph of table ops, then name, check and describe it as an ExportedProgram."""
from __future__ import annotations

import contextlib
import inspect

import ember
from ember.utils import _pytree as pytree

from ._dims import INT_OO, Dim, UserError, _DimHint
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


def _input_dims(mod, args, kwargs, dynamic_shapes) -> dict:
    """{id(input tensor): (name, {dim: Dim or hint})} from the spec, checked against the
    inputs: the structure matches, and every Dim's range holds its example size."""
    if dynamic_shapes is None:
        return {}
    if hasattr(dynamic_shapes, "dynamic_shapes"):   # ShapesCollection
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    sig_names = list(inspect.signature(mod.forward).parameters)
    if isinstance(dynamic_shapes, dict):
        by_name = dict(zip(sig_names, args)) | dict(kwargs)
        for k in dynamic_shapes:
            if k not in by_name:
                raise UserError(f"When `dynamic_shapes` is specified as a dict, its top-level "
                                f"keys must be the arg names {sig_names} of `inputs`, but here "
                                f"they are {list(dynamic_shapes)}.")
        pairs = [(by_name[k], v, k) for k, v in dynamic_shapes.items()]
    else:
        if len(dynamic_shapes) != len(args) + len(kwargs):
            raise UserError(f"dynamic_shapes has {len(dynamic_shapes)} entries for "
                            f"{len(args) + len(kwargs)} inputs")
        pairs = [(a, s, sig_names[i] if i < len(sig_names) else f"args[{i}]")
                 for i, (a, s) in enumerate(zip(list(args) + list(kwargs.values()),
                                                dynamic_shapes))]
    out = {}
    for x, spec, name in pairs:
        if spec is None or not isinstance(x, ember.Tensor):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        dims = {}
        for d, dim in items:
            if dim is None or dim is _DimHint.STATIC:
                continue
            if d >= x.dim():
                raise UserError(f"dynamic_shapes of {name} names dim {d}, but the input has "
                                f"{x.dim()} dims")
            size = x.shape[d]
            if isinstance(dim, Dim):
                if size in (0, 1):
                    raise UserError(
                        f"Received user-specified dim hint Dim('{dim.__name__}', min="
                        f"{dim.min}, max={dim.max}), but export 0/1 specialized due to hint of "
                        f"{size} for dimension inputs['{name}'].shape[{d}].")
                if not dim.min <= size <= dim.max:
                    raise UserError(f"Constraints violated ({dim.__name__})! The size {size} "
                                    f"of {name}.shape[{d}] is outside its range [{dim.min}, "
                                    f"{dim.max}].")
            dims[d] = dim
        if dims:
            out[id(x)] = (name, dims)
    return out


def _fake_with_sizes(fake, t, sizes: list):
    """A contiguous FakeTensor of fake's mode standing for t, with the given (symbolic) sizes."""
    from ember._device import device
    from ember._size import contiguous_strides
    from ember._subclasses.fake_tensor import FakeTensor
    from ember._tensor import Storage
    f = FakeTensor._make(Storage(None, device("meta"), 0), tuple(sizes),
                         tuple(contiguous_strides(tuple(sizes))), 0, t.dtype, t.device)
    f.fake_mode = fake
    fake._memo[id(t)] = (t, f)
    return f


def _symbolic_inputs(fake, flat_user, first: int, dims_of) -> tuple[list, dict]:
    """Fake user inputs with a symbol per dynamic dim (one per Dim, shared where a Dim is
    reused; a derived dim is its root's expression) -> (inputs, {symbol: (Dim, hint)}).
    Input i of the traced function is make_fx's placeholder arg{first + i}: the symbols'
    source, where the graph reads them (`sym_size(arg3_1, 0)`)."""
    from ember.fx.experimental.symbolic_shapes import SymInt, wrap_int
    env = fake.shape_env
    roots: dict = {}
    made: dict = {}
    out = []
    for i, t in enumerate(flat_user):
        spec = dims_of.get(id(t)) if isinstance(t, ember.Tensor) else None
        if spec is None or not t.is_contiguous():
            out.append(fake.from_tensor(t, static_shapes=True) if isinstance(t, ember.Tensor)
                       else t)
            continue
        name, dims = spec
        source = f"arg{first + i}"
        sizes = list(t.shape)
        for d, dim in dims.items():
            if isinstance(dim, Dim):
                root = dim.root
                a, b = getattr(dim, "a", 1), getattr(dim, "b", 0)
                if (sizes[d] - b) % a:
                    raise UserError(f"Expected input {name}.shape[{d}] = {sizes[d]} to be of "
                                    f"the form {dim.__name__}, where {root.__name__} is an "
                                    f"integer")
                if root.__name__ not in roots:
                    hint = (sizes[d] - b) // a
                    sym = env.create_symbol(hint, None)
                    roots[root.__name__] = sym
                    made[sym] = (root, hint)
                elif env.var_to_val[roots[root.__name__]] * a + b != sizes[d]:
                    raise UserError(f"Constraints violated ({root.__name__})! Inputs that "
                                    f"share the dim {root.__name__} differ in size at "
                                    f"{name}.shape[{d}]")
                sym = roots[root.__name__]
                if a == 1 and b == 0:
                    env.var_to_sources.setdefault(sym, []).append((source, d))
                sizes[d] = wrap_int(sym * a + b, env)
            else:   # Dim.DYNAMIC / Dim.AUTO: a symbol of its own
                sym = env.create_symbol(sizes[d], (source, d))
                made[sym] = (dim, sizes[d])
                sizes[d] = SymInt(sym, env)
        out.append(_fake_with_sizes(fake, t, sizes))
    for sym, (dim, _) in made.items():
        if not env.var_to_sources.get(sym):
            raise UserError(f"Dim {dim.__name__} appears only in derived dims: export "
                            f"needs one input of size {dim.__name__} itself")
    return out, made


def _feasible(env, sym, lo: int, hi):
    """The values of sym in [lo, hi] that every guard on sym alone allows: a sympy set."""
    import sympy
    dom = sympy.Interval(lo, sympy.oo if hi >= INT_OO else hi)
    x = sympy.Symbol("x", real=True)
    for g in env.guards:
        if g.free_symbols == {sym}:
            dom = dom & sympy.solveset(g.xreplace({sym: x}), x, domain=sympy.S.Reals)
    return dom


def _check_specializations(env, made: dict) -> None:
    """A dim the user marked dynamic that the program fixed to a constant, or narrowed:
    PyTorch's UserError, naming the dim and the suggested fix."""
    import sympy
    for sym, (dim, hint) in made.items():
        if dim is _DimHint.AUTO:
            continue
        label = dim.__name__ if isinstance(dim, Dim) else "Dim.DYNAMIC"
        lo, hi = (dim.min, dim.max) if isinstance(dim, Dim) else (2, INT_OO)
        ok = _feasible(env, sym, max(lo, 2), hi)
        if ok.is_subset(sympy.Interval(hint, hint)):
            raise UserError(
                f"Constraints violated ({label})! For more information, run with "
                f"EMBER_LOGS=\"+dynamic\".\n  - You marked {label} as dynamic but your code "
                f"specialized it to be a constant ({hint}). If you're using Dim.DYNAMIC, "
                f"replace it with either Dim.STATIC or Dim.AUTO.\nSuggested fixes:\n  "
                f"{label} = {hint}")
        if ok != sympy.Interval(max(lo, 2), sympy.oo if hi >= INT_OO else hi):
            a, b = ok.inf, ok.sup    # the integers inside (open ends excluded)
            a = int(a) if a in ok else int(sympy.floor(a)) + 1
            b = INT_OO if not b.is_finite else int(b) if b in ok else \
                int(sympy.ceiling(b)) - 1
            raise UserError(
                f"Constraints violated ({label})! Not all values of {label} in the specified "
                f"range {lo} <= {label} <= {_hi(hi)} satisfy the generated guard(s).\n"
                f"Suggested fixes:\n  {label} = Dim('{label}', min={a}, max={_hi(b)})")


def export(mod, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
           strict: bool = False, preserve_module_call_signature: tuple = (), **_):
    """Trace `mod(*args, **kwargs)` into an ExportedProgram (torch.export.export).

    >>> import ember
    >>> ep = export(ember.nn.Linear(4, 2), (ember.ones(3, 4),))
    >>> ep.module()(ember.ones(3, 4)).shape
    ember.Size([3, 2])
    """
    from ember._subclasses.fake_tensor import FakeTensorMode
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.fx.experimental.symbolic_shapes import ShapeEnv

    from .exported_program import (
        ExportedProgram,
        ModuleCallEntry,
        ModuleCallSignature,
        ValueRange,
    )
    if not isinstance(mod, ember.nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(f"Expecting `args` to be a tuple of example positional inputs, got "
                        f"{type(args)}")
    kwargs = dict(kwargs or {})
    dims_of = _input_dims(mod, args, kwargs, dynamic_shapes)
    params = dict(mod.named_parameters())
    buffers = dict(mod.named_buffers())
    persistent = set(mod.state_dict(keep_vars=True))
    flat_user, in_spec = pytree.tree_flatten((args, kwargs))
    np_, nb = len(params), len(buffers)
    out_spec = [None]
    calls: list = []      # the submodule calls, for unflatten

    def lifted(*flat):
        from ._unflatten import record_module_calls
        p, b, user = flat[:np_], flat[np_:np_ + nb], flat[np_ + nb:]
        with _swapped(mod, list(params) + list(buffers), list(p) + list(b)):
            a, k = pytree.tree_unflatten(list(user), in_spec)
            with record_module_calls(mod, calls):
                out = mod(*a, **k)
        leaves, out_spec[0] = pytree.tree_flatten(out)
        return tuple(leaves)

    example = list(params.values()) + list(buffers.values()) + flat_user
    user_names = _user_names(mod, args, kwargs, flat_user)
    # fake tensors: each op's meta runs (its checks, its output sizes), nothing is computed;
    # dims marked dynamic are a ShapeEnv's symbols, so the graph computes sizes from inputs
    fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv(duck_shape=False))
    fake_user, made = _symbolic_inputs(fake, flat_user, np_ + nb, dims_of)
    fakes = [fake.from_tensor(t, static_shapes=True) for t in example[:np_ + nb]] + fake_user
    with ember.no_grad():
        traced = make_fx(lifted, tracing_mode="fake")(*fakes)
    _check_specializations(fake.shape_env, made)
    names = ["p_" + n.replace(".", "_") for n in params] + \
        ["b_" + n.replace(".", "_") for n in buffers] + user_names
    gm = _renamed(traced, names)
    from ._unflatten import finish_calls
    old_names = [n.name for n in traced.graph.nodes if n.op == "placeholder"]
    module_calls = finish_calls(calls, dict(zip(old_names, names)))
    with ember.no_grad():
        _sym_prop_cls()(gm, fake_mode=fake).propagate(*fakes)
    ranges = {_sym_expr(s): ValueRange(dim.min if isinstance(dim, Dim) else 2,
                                       dim.max if isinstance(dim, Dim) else INT_OO)
              for s, (dim, _) in made.items()}
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
    ep = ExportedProgram(gm, gm.graph, ExportGraphSignature(ins, outs), state, ranges, mcg,
                         example_inputs=(args, kwargs), constants=constants)
    ep.sym_hints = {str(sym): hint for sym, (_, hint) in made.items()}
    ep._module_calls = module_calls
    return ep


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


def _sym_expr(sym):
    from ._symexpr import sym as make
    return make(str(sym))


def _hi(upper):
    return INT_OO if upper is None or not getattr(upper, "is_finite", True) or \
        upper >= INT_OO else int(upper)


def _to_spec(meta):
    """ShapeProp's metadata (sizes may be SymInts) as the archive's TensorSpec (Exprs)."""
    import sympy

    from ._serde import TensorSpec
    from ._symexpr import parse_srepr

    def conv(v):
        e = getattr(v, "expr", None)
        return int(v) if e is None else parse_srepr(sympy.srepr(e))
    stride = meta.stride() if callable(meta.stride) else meta.stride
    return TensorSpec([conv(s) for s in meta.shape], meta.dtype, [conv(s) for s in stride],
                      bool(getattr(meta, "requires_grad", False)))


def _sym_prop_cls():
    from ember.fx.experimental.symbolic_shapes import SymInt
    from ember.fx.passes.shape_prop import ShapeProp

    class SymProp(ShapeProp):  # noqa: D101
        """ShapeProp that also keeps each size node's symbolic value, and stores tensor
        metadata as TensorSpecs of Exprs (what the archive and .module()'s guards read)."""

        def run_node(self, n):
            r = super().run_node(n)
            if isinstance(r, SymInt):
                n.meta["sym"] = _to_spec_expr(r)
            elif type(r).__name__ == "SymBool":    # (a cond's predicate: the archive's text)
                import sympy
                n.meta["sym_bool"] = sympy.srepr(r.expr)
            m = n.meta.get("tensor_meta")
            if m is not None:
                n.meta["tensor_meta"] = _to_spec(m) if hasattr(m, "dtype") else tuple(
                    _to_spec(x) if hasattr(x, "dtype") else x for x in m)
            return r

        def call_function(self, target, args, kwargs):
            if getattr(target, "__module__", "") == "ember.ops.higher_order" and \
                    target.__name__ == "cond":   # the branches' nodes get metadata too
                from ember.fx.interpreter import Interpreter
                for sub in args[1:3]:
                    Interpreter.run(type(self)(sub, fake_mode=self.fake_mode), *args[3])
            elif getattr(target, "__module__", "") == "ember.ops.higher_order" and \
                    target.__name__ == "map_impl" and self.fake_mode is not None:
                from ember._higher_order_ops.map import _slice_fakes
                from ember.fx.interpreter import Interpreter
                Interpreter.run(type(self)(args[0], fake_mode=self.fake_mode),
                                *_slice_fakes(args[1]), *args[2])
            return super().call_function(target, args, kwargs)
    return SymProp


def _to_spec_expr(s):
    import sympy

    from ._symexpr import parse_srepr
    return parse_srepr(sympy.srepr(s.expr)), int(s.hint())
