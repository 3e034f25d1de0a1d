"""ExportedProgram: a functional graph of table ops whose placeholders are the parameters,
buffers, constants and user inputs (graph_signature says which), with the state dict, the ranges
of its symbolic sizes and the input structure; `.module()` makes it callable again."""
from __future__ import annotations

import copy

import ember
from ember.utils import _pytree as pytree

from ._symexpr import Expr
from .graph_signature import ExportGraphSignature, InputKind, OutputKind

__all__ = ["ExportedProgram", "ValueRange", "ModuleCallEntry", "ModuleCallSignature"]


class ValueRange:
    """The inclusive range of a symbolic size (PyTorch prints `VR[1, 64]`)."""

    def __init__(self, lower: int, upper: int):
        self.lower, self.upper = lower, upper

    def __repr__(self) -> str:
        from ._dims import INT_OO
        hi = "int_oo" if self.upper >= INT_OO else self.upper
        return f"VR[{self.lower}, {hi}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, ValueRange) and (self.lower, self.upper) == (other.lower,
                                                                              other.upper)


class ModuleCallSignature:
    def __init__(self, inputs, outputs, in_spec, out_spec, forward_arg_names=None):
        self.inputs, self.outputs = inputs, outputs
        self.in_spec, self.out_spec = in_spec, out_spec
        self.forward_arg_names = forward_arg_names


class ModuleCallEntry:
    def __init__(self, fqn: str, signature: ModuleCallSignature | None = None):
        self.fqn, self.signature = fqn, signature


def placeholder_spec(node):
    """(shape, dtype) recorded for a placeholder: entries are ints or symbolic Exprs."""
    meta = node.meta.get("tensor_meta") or node.meta.get("val")
    if meta is None:
        return None
    shape = tuple(meta.shape)
    return shape, getattr(meta, "dtype", None)


class ExportedProgram:
    """What `ember.export.export` returns (torch.export.ExportedProgram's API)."""

    def __init__(self, root, graph, graph_signature: ExportGraphSignature, state_dict: dict,
                 range_constraints: dict, module_call_graph: list, example_inputs=None,
                 constants: dict | None = None, verifiers=None):
        from ember.fx import GraphModule
        self._graph_module = root if isinstance(root, GraphModule) and root.graph is graph \
            else GraphModule(root if root is not None else {}, graph)
        self._graph_signature = graph_signature
        self._state_dict = state_dict
        self._range_constraints = range_constraints
        self._module_call_graph = module_call_graph
        self._constants = constants or {}
        self.example_inputs = example_inputs

    graph_module = property(lambda self: self._graph_module)
    graph = property(lambda self: self._graph_module.graph)
    graph_signature = property(lambda self: self._graph_signature)
    state_dict = property(lambda self: self._state_dict)
    range_constraints = property(lambda self: self._range_constraints)
    module_call_graph = property(lambda self: self._module_call_graph)
    constants = property(lambda self: self._constants)
    tensor_constants = constants

    @property
    def call_spec(self):
        sig = self._module_call_graph[0].signature
        return sig.in_spec, sig.out_spec

    def parameters(self):
        for name in self._graph_signature.parameters:
            yield self._state_dict[name]

    def named_parameters(self):
        for name in self._graph_signature.parameters:
            yield name, self._state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        for name in self._graph_signature.buffers:
            yield name, self._state_dict[name] if name in self._state_dict \
                else self._constants[name]

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def __str__(self) -> str:
        code = self._graph_module.print_readable(print_output=False).replace("\n", "\n    ")
        return (f"ExportedProgram:\n    {code}\nGraph signature: \n    "
                + str(self._graph_signature).replace("\n", "\n    ")
                + f"\nRange constraints: {self._range_constraints}\n")

    __repr__ = __str__

    def module(self) -> ember.nn.Module:
        """An nn.Module running the graph: parameters and buffers as attributes (state_dict
        keys as the original module's), inputs checked against the exported shapes and
        ranges, buffer mutations written back."""
        return _UnliftedModule(self)

    def run_decompositions(self, decomp_table: dict | None = None) -> ExportedProgram:
        """The program with each op that has a decomposition in decomp_table (default: every
        table op with a `decomp`) replaced by its decomposition, re-traced."""
        from ._decompose import retrace_decomposed
        return retrace_decomposed(self, decomp_table)

    def validate(self) -> None:
        self.graph.lint()


def _bind_symbols(ep, flat_args, names) -> None:
    """Check user inputs against the placeholders' shapes/dtypes and the range constraints,
    raising PyTorch's `Guard failed: x.size()[0] <= 64` AssertionError on a violation."""
    env: dict[str, int] = {}
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    for node, x, name in zip(_user_placeholders(ep), flat_args, names):
        spec = placeholder_spec(node)
        if spec is None or not isinstance(x, ember.Tensor):
            continue
        shape, dtype = spec
        if x.dim() != len(shape):
            raise AssertionError(f"Guard failed: {name}.dim() == {len(shape)}")
        if dtype is not None and x.dtype != dtype:
            raise AssertionError(f"Guard failed: {name}.dtype == {dtype}")
        for i, (want, got) in enumerate(zip(shape, x.shape)):
            if isinstance(want, int) or not hasattr(want, "free_symbols"):
                if int(want) != got:
                    raise AssertionError(f"Guard failed: {name}.size()[{i}] == {int(want)}")
                continue
            free = want.free_symbols() if isinstance(want, Expr) else \
                {str(s) for s in want.free_symbols}
            if isinstance(want, Expr) and want.op == "sym" or (
                    not isinstance(want, Expr) and str(want) in free):
                s = next(iter(free))
                if s in env and env[s] != got:
                    raise AssertionError(f"Guard failed: {name}.size()[{i}] == {env[s]}")
                env[s] = got
                r = ranges.get(s)
                if r is not None:
                    if got < r.lower:
                        raise AssertionError(f"Guard failed: {name}.size()[{i}] >= {r.lower}")
                    if got > r.upper:
                        raise AssertionError(f"Guard failed: {name}.size()[{i}] <= {r.upper}")
    # derived sizes (2*s0 ...) once every root is bound
    for node, x, name in zip(_user_placeholders(ep), flat_args, names):
        spec = placeholder_spec(node)
        if spec is None or not isinstance(x, ember.Tensor):
            continue
        for i, (want, got) in enumerate(zip(spec[0], x.shape)):
            if isinstance(want, Expr) and want.op != "sym" and \
                    want.free_symbols() <= set(env) and want.evaluate(env) != got:
                raise AssertionError(f"Guard failed: {name}.size()[{i}] == {want}")


def _user_placeholders(ep):
    kinds = {s.arg.name: s.kind for s in ep.graph_signature.input_specs}
    return [n for n in ep.graph.nodes if n.op == "placeholder"
            and kinds.get(n.name) == InputKind.USER_INPUT]


class _UnliftedModule(ember.nn.Module):
    """ExportedProgram.module(): the lifted graph with its state put back as attributes."""

    def __init__(self, ep: ExportedProgram):
        super().__init__()
        sig = ep.graph_signature
        self._ep_graph_module = copy.deepcopy(ep.graph_module)
        self._ep = ep
        for name in sig.parameters:
            _set(self, name, ep.state_dict[name], "param")
        for spec in sig.input_specs:
            if spec.kind == InputKind.BUFFER:
                value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
                _set(self, spec.target, value, "buffer", persistent=spec.persistent is not False)
            elif spec.kind == InputKind.CONSTANT_TENSOR:
                _set(self, spec.target, ep.constants[spec.target], "attr")

    @property
    def graph(self):
        return self._ep_graph_module.graph

    @property
    def code(self) -> str:
        return self._ep_graph_module.code

    def forward(self, *args, **kwargs):
        ep = self._ep
        sig = ep.module_call_graph[0].signature if ep.module_call_graph else None
        if sig is not None and sig.in_spec is not None:
            flat, spec = pytree.tree_flatten((args, kwargs))
            if _spec_key(spec) != _spec_key(sig.in_spec):
                raise ValueError(
                    f"Trying to flatten user inputs with exported input tree spec: \n"
                    f"{sig.in_spec}\nbut actually got inputs with tree spec of: \n{spec}.\n"
                    f"Please check that the inputs have the same number and type of args and "
                    f"kwargs as the ones you used when tracing.")
            names = sig.forward_arg_names or [f"args[{i}]" for i in range(len(flat))]
        else:
            flat, names = list(args), [f"args[{i}]" for i in range(len(args))]
        if len(names) != len(flat):
            names = [f"args[{i}]" for i in range(len(flat))]
        _bind_symbols(ep, flat, names)
        lifted = []
        for s in ep.graph_signature.input_specs:
            if s.kind == InputKind.PARAMETER or s.kind == InputKind.BUFFER or \
                    s.kind == InputKind.CONSTANT_TENSOR:
                lifted.append(_get(self, s.target))
        outs = self._ep_graph_module(*lifted, *flat)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        user = []
        for s, v in zip(ep.graph_signature.output_specs, outs):
            if s.kind == OutputKind.BUFFER_MUTATION:
                with ember.no_grad():
                    _get(self, s.target).copy_(v)
            elif s.kind == OutputKind.USER_INPUT_MUTATION:
                i = ep.graph_signature.user_inputs.index(s.target)
                with ember.no_grad():
                    flat[i].copy_(v)
            else:
                user.append(v)
        if sig is not None and sig.out_spec is not None:
            return pytree.tree_unflatten(user, sig.out_spec)
        return user[0] if len(user) == 1 else tuple(user)


def _spec_key(spec):
    if spec.is_leaf():
        return "*"
    return (getattr(spec.type, "__name__", str(spec.type)), str(spec.context),
            tuple(_spec_key(c) for c in spec.children_specs))


def _owner(root, fqn: str, create: bool):
    *path, leaf = fqn.split(".")
    m = root
    for p in path:
        sub = getattr(m, p, None) if p in m._modules else None
        if sub is None:
            if not create:
                raise AttributeError(fqn)
            sub = ember.nn.Module()
            m.add_module(p, sub)
        m = sub
    return m, leaf


def _set(root, fqn: str, value, kind: str, persistent: bool = True) -> None:
    m, leaf = _owner(root, fqn, create=True)
    if kind == "param":
        p = value if isinstance(value, ember.nn.Parameter) else ember.nn.Parameter(
            value, requires_grad=value.requires_grad)
        m.register_parameter(leaf, p)
    elif kind == "buffer":
        m.register_buffer(leaf, value, persistent=persistent)
    else:
        setattr(m, leaf, value)


def _get(root, fqn: str):
    m, leaf = _owner(root, fqn, create=False)
    return getattr(m, leaf)
