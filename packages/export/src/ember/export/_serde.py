"""The PT2 archive of an ExportedProgram, in PyTorch 2.13's format (torch.export.save/load read
what this writes, and the other way round): a zip of `<name>/models/model.json` (the graph in
torch._export.serde's JSON schema), `<name>/data/weights/*` (raw tensor bytes described by
`model_weights_config.json`) and small version files. Loading parses JSON only: no pickle, no
eval; every record's size is checked against the tensor it holds before it is read."""
from __future__ import annotations

import json
import operator
import zipfile

import numpy as np

import ember
from ember._ops import OPS
from ember.fx.experimental.proxy_tensor import sym_size
from ember.utils import _pytree as pytree

from ._symexpr import Expr, SymExprError, parse_srepr
from .graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

SCHEMA_VERSION = {"major": 8, "minor": 20}
MAX_JSON = 256 << 20
_DTYPES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float16": 6,
           "float32": 7, "float64": 8, "complex64": 10, "complex128": 11, "bool": 12,
           "bfloat16": 13, "uint16": 28, "float8_e4m3fn": 29, "float8_e5m2": 30, "uint32": 34,
           "uint64": 35}
_CODES = {v: k for k, v in _DTYPES.items()}
_LAYOUT_STRIDED, _POSITIONAL, _KEYWORD = 7, 1, 2
_MEMORY_FORMATS = {1: "contiguous_format", 2: "channels_last", 3: "channels_last_3d",
                   4: "preserve_format"}
_IN_KINDS = {"user_input": InputKind.USER_INPUT, "parameter": InputKind.PARAMETER,
             "buffer": InputKind.BUFFER, "tensor_constant": InputKind.CONSTANT_TENSOR}
_OUT_KINDS = {"user_output": OutputKind.USER_OUTPUT, "loss_output": OutputKind.LOSS_OUTPUT,
              "buffer_mutation": OutputKind.BUFFER_MUTATION,
              "user_input_mutation": OutputKind.USER_INPUT_MUTATION,
              "parameter_mutation": OutputKind.PARAMETER_MUTATION,
              "gradient_to_parameter": OutputKind.GRADIENT_TO_PARAMETER,
              "gradient_to_user_input": OutputKind.GRADIENT_TO_USER_INPUT}


class SerializationError(RuntimeError):
    """A malformed or unsupported archive (named, never executed)."""


class TensorSpec:
    """A tensor's recorded shape/dtype/strides; sizes are ints or symbolic Exprs."""

    def __init__(self, shape, dtype, stride, requires_grad=False, device="cpu"):
        self.shape, self.dtype, self._stride = tuple(shape), dtype, tuple(stride)
        self.requires_grad, self.device = requires_grad, device

    def stride(self):
        return self._stride

    def __repr__(self) -> str:
        return f"TensorSpec({list(self.shape)}, {self.dtype})"


# ---- reading ----------------------------------------------------------------------------------
def _sym_int(d, where: str):
    if "as_int" in d:
        return int(d["as_int"])
    if "as_expr" in d:
        try:
            return parse_srepr(d["as_expr"]["expr_str"])
        except SymExprError as e:
            raise SerializationError(f"{where}: {e}") from None
    raise SerializationError(f"{where}: unsupported symbolic size {d}")


def _dtype(code: int, where: str):
    name = _CODES.get(code)
    if name is None:
        raise SerializationError(f"{where}: unsupported dtype code {code}")
    return getattr(ember, name)


def _tensor_spec(m: dict, where: str) -> TensorSpec:
    if m.get("layout", _LAYOUT_STRIDED) != _LAYOUT_STRIDED:
        raise SerializationError(f"{where}: only strided tensors are supported")
    return TensorSpec([_sym_int(s, where) for s in m["sizes"]], _dtype(m["dtype"], where),
                      [_sym_int(s, where) for s in m["strides"]], m.get("requires_grad", False),
                      m.get("device", {}).get("type", "cpu"))


def _read(z: zipfile.ZipFile, name: str, limit: int) -> bytes:
    try:
        info = z.getinfo(name)
    except KeyError:
        raise SerializationError(f"archive has no record {name}") from None
    if info.file_size > limit:
        raise SerializationError(f"record {name} holds {info.file_size} bytes, more than the "
                                 f"{limit} it may hold")
    with z.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SerializationError(f"record {name} inflates past its declared size")
    return data


def _weight(z, prefix: str, key: str, entry: dict):
    where = f"weight '{key}'"
    if entry.get("use_pickle"):
        raise SerializationError(f"{where} is pickled: ember loads only raw tensor data")
    spec = _tensor_spec(entry["tensor_meta"], where)
    if not all(isinstance(s, int) for s in spec.shape + spec._stride):
        raise SerializationError(f"{where}: symbolic sizes in stored data")
    off = _sym_int(entry["tensor_meta"].get("storage_offset", {"as_int": 0}), where)
    if any(s < 0 for s in spec.shape + spec._stride) or off < 0:
        raise SerializationError(f"{where}: negative size, stride or offset")
    numel = int(np.prod(spec.shape)) if spec.shape else 1
    extent = 0 if numel == 0 else off + 1 + sum((n - 1) * s for n, s in
                                                zip(spec.shape, spec._stride))
    item = spec.dtype.itemsize
    path = entry.get("path_name", "")
    if "/" in path or path in ("", ".", ".."):
        raise SerializationError(f"{where}: bad record name {path!r}")
    raw = _read(z, f"{prefix}data/weights/{path}", max(extent * item, 0))
    if len(raw) < extent * item:
        raise SerializationError(f"{where}: record {path} holds {len(raw)} bytes, the tensor "
                                 f"{list(spec.shape)} of {spec.dtype} needs {extent * item}")
    flat = np.frombuffer(raw, dtype=spec.dtype.np, count=extent).copy()
    t = ember.from_numpy(flat) if extent else ember.empty(0, dtype=spec.dtype)
    if numel:
        t = t.as_strided(spec.shape, spec._stride, off).clone()
    else:
        t = ember.empty(spec.shape, dtype=spec.dtype)
    if entry.get("is_param"):
        return ember.nn.Parameter(t, requires_grad=spec.requires_grad)
    return t


_SYM_OPS = {"add", "sub", "mul", "floordiv", "mod", "truediv", "neg", "eq", "ne", "lt", "le",
            "gt", "ge"}


def _op_for(target: str):
    """'torch.ops.aten.add.Tensor' -> ember's entry: `add.Tensor` if the table has that
    overload, else `add` (ember keeps one entry where PyTorch has Tensor/Scalar overloads)."""
    if target in ("_operator.getitem", "operator.getitem"):
        return operator.getitem
    if target.startswith("_operator.") and target[10:] in _SYM_OPS:
        return getattr(operator, target[10:])
    if target == "torch.ops.aten.sym_size.int":
        return sym_size
    if target.startswith("torch.ops.higher_order."):
        from ._serde_hop import hop_for
        return hop_for(target)
    parts = target.split(".")
    if len(parts) != 5 or parts[:3] != ["torch", "ops", "aten"]:
        raise SerializationError(f"unsupported call target {target!r} (ember loads "
                                 f"torch.ops.aten operators)")
    name, overload = parts[3], parts[4]
    op = OPS.get(f"{name}.{overload}") or OPS.get(name)
    if op is None:   # a PyTorch operator that ember writes as a composite function
        fn = getattr(ember.nn.functional, name, None) or getattr(ember, name, None)
        if callable(fn) and not isinstance(fn, type) and not name.startswith("_"):
            return fn
        raise SerializationError(f"operator aten::{name}.{overload} is not in ember's op table")
    return op


def _arg(a: dict, env: dict, where: str):
    if len(a) != 1:
        a = {k: v for k, v in a.items() if v is not None}
    (kind, v), = a.items()
    if kind == "as_none":
        return None
    if kind == "as_tensor":
        return env[v["name"]]
    if kind == "as_tensors":
        return [env[t["name"]] for t in v]
    if kind == "as_optional_tensors":
        return [None if "as_none" in t else env[t["as_tensor"]["name"]] for t in v]
    if kind == "as_optional_tensor":
        return None if "as_none" in v else env[v["as_tensor"]["name"]]
    if kind in ("as_int", "as_float", "as_bool", "as_string", "as_ints", "as_floats",
                "as_bools", "as_strings"):
        return v
    if kind == "as_sym_int":
        return env[v["as_name"]] if "as_name" in v else v["as_int"]
    if kind == "as_sym_bool":
        return env[v["as_name"]] if "as_name" in v else v["as_bool"]
    if kind == "as_sym_ints":
        return [env[s["as_name"]] if "as_name" in s else s["as_int"] for s in v]
    if kind == "as_scalar_type":
        return _dtype(v, where)
    if kind == "as_device":
        return ember.device(v["type"] if v.get("index") is None else f"{v['type']}:{v['index']}")
    if kind == "as_layout":
        return ember.strided
    if kind == "as_memory_format":
        return getattr(ember, _MEMORY_FORMATS.get(v, "preserve_format"))
    raise SerializationError(f"{where}: unsupported argument kind {kind}")


def _spec_from_json(text):
    """PyTorch's treespec JSON ([1, {type, context, children_spec}]) as a TreeSpec."""
    version, root = json.loads(text)

    def build(d):
        t = d["type"]
        if t is None:
            return pytree.LeafSpec()
        types = {"builtins.tuple": tuple, "builtins.list": list, "builtins.dict": dict,
                 "builtins.NoneType": type(None)}
        if t not in types:
            raise SerializationError(f"unsupported input structure type {t}")
        ctx = json.loads(d["context"]) if d["context"] is not None else None
        return pytree.TreeSpec(types[t], ctx if types[t] is dict else None,
                               [build(c) for c in d["children_spec"]])

    return build(root)


def load(f, *, expected_opset_version=None, extra_files=None):
    """Read a PT2 archive (path or file object) written by ember or torch.export.save."""

    from .exported_program import (
        ExportedProgram,
        ModuleCallEntry,
        ModuleCallSignature,
        ValueRange,
    )
    try:
        z = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError) as e:
        raise SerializationError(f"not a PT2 archive: {e}") from None
    with z:
        names = z.namelist()
        heads = [n[: -len("archive_format")] for n in names if n.endswith("archive_format")]
        if len(heads) != 1:
            raise SerializationError("not a PT2 archive: no single archive_format record")
        prefix = heads[0]
        if _read(z, prefix + "archive_format", 64).strip() != b"pt2":
            raise SerializationError("not a PT2 archive: archive_format is not 'pt2'")
        model = json.loads(_read(z, prefix + "models/model.json", MAX_JSON))
        wcfg = json.loads(_read(z, prefix + "data/weights/model_weights_config.json", MAX_JSON))
        weights = {k: _weight(z, prefix, k, e) for k, e in wcfg.get("config", {}).items()}
        ccfg_name = prefix + "data/constants/model_constants_config.json"
        ccfg = json.loads(_read(z, ccfg_name, MAX_JSON)) if ccfg_name in names else {}
        if ccfg.get("config"):
            raise SerializationError("archives with lifted tensor constants are not supported")
    major = model.get("schema_version", {}).get("major")
    if major != SCHEMA_VERSION["major"]:
        raise SerializationError(f"archive schema version {major} (ember reads "
                                 f"{SCHEMA_VERSION['major']})")
    gm_json = model["graph_module"]
    g_json = gm_json["graph"]
    attrs: dict = {}      # the cond branches, as the root's attributes
    graph, env = _graph_from_json(g_json, attrs)
    sig = _signature_from_json(gm_json["signature"])
    for spec in sig.input_specs + sig.output_specs:   # the graph may rename (input -> input_1)
        node = env.get(getattr(spec.arg, "name", None))
        if node is not None and hasattr(node, "name"):
            spec.arg.name = node.name
    state, constants = {}, {}
    for s in sig.input_specs:
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            if s.target not in weights:
                raise SerializationError(f"weight '{s.target}' is missing from the archive")
            (state if s.persistent is not False else constants)[s.target] = weights[s.target]
    mcg = []
    for e in gm_json.get("module_call_graph", []):
        sj = e.get("signature")
        sig_obj = None
        if sj is not None:
            sig_obj = ModuleCallSignature([], [], _spec_from_json(sj["in_spec"]),
                                          _spec_from_json(sj["out_spec"]),
                                          sj.get("forward_arg_names"))
        mcg.append(ModuleCallEntry(e["fqn"], sig_obj))
    ranges = {Expr("sym", (k,)): ValueRange(v["min_val"], _hi(v["max_val"]))
              for k, v in model.get("range_constraints", {}).items()}
    return ExportedProgram(attrs or None, graph, sig, state, ranges, mcg,
                           constants=constants)


def _graph_from_json(g_json: dict, attrs: dict):
    """A Graph from its JSON (inputs, nodes, outputs) -> (graph, {name: node})."""
    from ember.fx import Graph
    graph = Graph()
    env: dict = {}
    specs = {k: _tensor_spec(v, f"tensor '{k}'") for k, v in g_json["tensor_values"].items()}
    for i in g_json["inputs"]:
        (kind, v), = ((k, x) for k, x in i.items() if x is not None)
        if kind != "as_tensor":
            raise SerializationError(f"unsupported graph input kind {kind}")
        n = graph.placeholder(v["name"])
        n.meta["tensor_meta"] = specs.get(v["name"])
        env[v["name"]] = n
    for nj in g_json["nodes"]:
        op = _op_for(nj["target"])
        where = f"node {nj.get('name', '?')} ({nj['target']})"
        args, kwargs = [], {}
        for inp in nj["inputs"]:
            if "as_graph" in inp["arg"]:      # a cond branch: its own graph, an attribute
                from ._serde_hop import branch_from_json
                val = branch_from_json(inp["arg"]["as_graph"], graph, attrs,
                                       _graph_from_json)
            else:
                val = _arg(inp["arg"], env, where)
            if inp.get("kind", _POSITIONAL) == _KEYWORD:
                kwargs[inp["name"]] = val
            else:
                args.append(val)
        if hasattr(op, "schema"):
            names = set(op.arg_names)
            unknown = [k for k in kwargs if k not in names]
            if unknown or len(args) > len(op.arg_names):
                raise SerializationError(f"{where}: arguments {unknown or args} do not fit "
                                         f"ember's schema {op.schema_text}")
        node = graph.call_function(op, tuple(args), kwargs)
        outs = nj["outputs"]
        if len(outs) == 1 and ("as_sym_int" in outs[0] or "as_sym_bool" in outs[0]):
            o = outs[0].get("as_sym_int") or outs[0]["as_sym_bool"]
            node.name = o["as_name"]
            env[node.name] = node
            continue
        nret = op.nret if hasattr(op, "schema") else 0 if \
            nj["target"].startswith("torch.ops.higher_order.") else len(outs)  # (cond: a tuple)
        if len(outs) == 1 and "as_tensor" in outs[0] and (nret == 1 or
                                                            nj.get("is_hop_single_tensor_return")):
            node.name = outs[0]["as_tensor"]["name"]
            node.meta["tensor_meta"] = specs.get(node.name)
            env[node.name] = node
            continue
        flat = []
        for o in outs:
            if "as_tensors" in o:
                flat.extend(("list", t["name"]) for t in o["as_tensors"])
            elif "as_tensor" in o:
                flat.append(("one", o["as_tensor"]["name"]))
            elif "as_none" not in o:
                raise SerializationError(f"{where}: unsupported output {o}")
        for idx, (_, name) in enumerate(flat):
            g = graph.call_function(operator.getitem, (node, idx))
            g.name = name
            g.meta["tensor_meta"] = specs.get(name)
            env[name] = g
    outputs = [_arg(o, env, "graph output") for o in g_json["outputs"]]
    graph.output(tuple(outputs))
    return graph, env


def _json_hi(v):
    from ._dims import INT_OO
    return None if v >= INT_OO else v


def _hi(v):
    from ._dims import INT_OO
    return INT_OO if v is None or v >= INT_OO else v


def _signature_from_json(sj) -> ExportGraphSignature:
    ins, outs = [], []
    for s in sj["input_specs"]:
        (kind, v), = ((k, x) for k, x in s.items() if x is not None)
        if kind not in _IN_KINDS:
            raise SerializationError(f"unsupported input kind {kind}")
        k = _IN_KINDS[kind]
        if k == InputKind.USER_INPUT:
            a = v["arg"]
            if "as_tensor" not in a:
                raise SerializationError("only tensor user inputs are supported")
            ins.append(InputSpec(k, TensorArgument(a["as_tensor"]["name"]), None))
        elif k == InputKind.PARAMETER:
            ins.append(InputSpec(k, TensorArgument(v["arg"]["name"]), v["parameter_name"]))
        elif k == InputKind.BUFFER:
            ins.append(InputSpec(k, TensorArgument(v["arg"]["name"]), v["buffer_name"],
                                 v.get("persistent", True)))
        else:
            ins.append(InputSpec(k, TensorArgument(v["arg"]["name"]),
                                 v.get("tensor_constant_name")))
    for s in sj["output_specs"]:
        (kind, v), = ((k, x) for k, x in s.items() if x is not None)
        if kind not in _OUT_KINDS:
            raise SerializationError(f"unsupported output kind {kind}")
        a = v["arg"]
        arg = TensorArgument(a["as_tensor"]["name"]) if "as_tensor" in a else \
            TensorArgument(a["name"]) if "name" in a else ConstantArgument("", None)
        target = v.get("buffer_name") or v.get("user_input_name") or v.get("parameter_name")
        outs.append(OutputSpec(_OUT_KINDS[kind], arg, target))
    return ExportGraphSignature(ins, outs)


# ---- writing ----------------------------------------------------------------------------------
def _torch_target(op, args: tuple) -> str:
    """PyTorch's operator name for an entry called with these (bound) arguments."""
    from ._aten_overloads import OVERLOADS
    if op.overload:
        return f"torch.ops.aten.{op.name}.{op.overload}"
    cands = OVERLOADS.get(op.name)
    if cands and cands[0][0] in ("dim_IntList", "dim") and "dim" in op.arg_names and \
            args[op.arg_names.index("dim")] is None:
        return f"torch.ops.aten.{op.name}.default"   # a full reduction: x.sum()
    if not cands:
        return f"torch.ops.aten.{op.name}.default"
    kinds = "".join("S" if not hasattr(args[i], "op") and not isinstance(args[i], ember.Tensor)
                    and args[i] is not None else "T" for i in op.tensor_idx)
    for ov, want in cands:
        if want == kinds:
            return f"torch.ops.aten.{op.name}.{ov}"
    return f"torch.ops.aten.{op.name}.{cands[0][0]}"


def _sym_json(v, hints: dict | None = None):
    if isinstance(v, int):
        return {"as_int": int(v)}
    e = v if isinstance(v, Expr) else parse_srepr(__import__("sympy").srepr(v))
    hints = hints or {}
    hint = {"as_int": e.evaluate(hints)} if e.free_symbols() <= set(hints) else None
    return {"as_expr": {"expr_str": e.srepr(), "hint": hint}}


def _meta_json(m, hints: dict | None = None) -> dict:
    stride = m.stride() if callable(getattr(m, "stride", None)) else m.stride
    return {"dtype": _DTYPES[str(m.dtype).split(".")[-1]],
            "sizes": [_sym_json(s, hints) for s in m.shape],
            "requires_grad": bool(getattr(m, "requires_grad", False)),
            "device": {"type": "cpu", "index": None},
            "strides": [_sym_json(s, hints) for s in stride],
            "storage_offset": {"as_int": 0}, "layout": _LAYOUT_STRIDED}


_SYM_TARGETS = {operator.add: "_operator.add", operator.sub: "_operator.sub",
                operator.mul: "_operator.mul", operator.floordiv: "_operator.floordiv",
                operator.mod: "_operator.mod"}


_SYM_BOOL_TARGETS = {operator.gt: "_operator.gt", operator.ge: "_operator.ge",
                     operator.lt: "_operator.lt", operator.le: "_operator.le",
                     operator.eq: "_operator.eq", operator.ne: "_operator.ne"}


def _is_sym(n) -> bool:
    return n.op == "call_function" and (n.target is sym_size or n.target in _SYM_TARGETS
                                        or n.target in _SYM_BOOL_TARGETS)


def _arg_json(v, names: dict) -> dict:
    from ember.fx import Node
    if v is None:
        return {"as_none": True}
    if isinstance(v, Node):
        if _is_sym(v) and v.target in _SYM_BOOL_TARGETS:
            return {"as_sym_bool": {"as_name": names[v]}}
        if _is_sym(v):
            return {"as_sym_int": {"as_name": names[v]}}
        return {"as_tensor": {"name": names[v]}}
    if isinstance(v, bool):
        return {"as_bool": v}
    if isinstance(v, int):
        return {"as_int": v}
    if isinstance(v, float):
        return {"as_float": v}
    if isinstance(v, str):
        return {"as_string": v}
    if isinstance(v, ember.dtype):
        return {"as_scalar_type": _DTYPES[str(v).split(".")[-1]]}
    if isinstance(v, ember.device):
        return {"as_device": {"type": v.type, "index": v.index}}
    if v is ember.strided:
        return {"as_layout": _LAYOUT_STRIDED}
    if isinstance(v, (list, tuple)):
        if any(isinstance(x, Node) and _is_sym(x) for x in v):
            return {"as_sym_ints": [{"as_name": names[x]} if isinstance(x, Node) else
                                    {"as_int": int(x)} for x in v]}
        if all(isinstance(x, Node) for x in v) and v:
            return {"as_tensors": [{"name": names[x]} for x in v]}
        if any(isinstance(x, Node) for x in v):
            return {"as_optional_tensors": [{"as_none": True} if x is None else
                                            {"as_tensor": {"name": names[x]}} for x in v]}
        if all(isinstance(x, bool) for x in v) and v:
            return {"as_bools": list(v)}
        if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return {"as_ints": list(v)}
        if all(isinstance(x, (int, float)) for x in v):
            return {"as_floats": [float(x) for x in v]}
    raise SerializationError(f"cannot serialize the argument {v!r} of type {type(v).__name__}")


def _inputs_json(op, node, names: dict) -> list:
    full = op.bind(tuple(node.args), dict(node.kwargs))
    args = op.schema.args
    last = max((i for i, a in enumerate(args) if not a.kwonly and
                (not a.has_default or full[i] != a.default)), default=-1)
    out = []
    for i, (a, v) in enumerate(zip(args, full)):
        if a.kwonly:
            if a.has_default and v == a.default and type(v) is type(a.default):
                continue
            out.append({"name": a.name, "arg": _arg_json(v, names), "kind": _KEYWORD})
        elif i <= last:
            out.append({"name": a.name, "arg": _arg_json(v, names), "kind": _POSITIONAL})
    return out


def _spec_to_json(spec) -> str:
    def build(s):
        if s.is_leaf():
            return {"type": None, "context": None, "children_spec": []}
        t = {tuple: "builtins.tuple", list: "builtins.list", dict: "builtins.dict",
             type(None): "builtins.NoneType"}.get(s.type)
        if t is None:
            raise SerializationError(f"cannot serialize an input structure of {s.type}")
        ctx = json.dumps(s.context) if s.type is dict else "null"
        return {"type": t, "context": ctx, "children_spec": [build(c) for c in s.children_specs]}
    return json.dumps([1, build(spec)])


def _graph_json(ep, graph=None) -> tuple[dict, dict]:
    """The JSON of ep's graph (or of one of its cond branches, `graph`)."""
    from ._serde_hop import hop_node_json, is_hop
    names: dict = {}
    tensor_values: dict = {}
    nodes = []
    graph = ep.graph if graph is None else graph
    getitems = {}
    for n in graph.nodes:
        if n.op == "call_function" and n.target is operator.getitem:
            getitems.setdefault(n.args[0], {})[n.args[1]] = n
    inputs = []
    hints = getattr(ep, "sym_hints", {})
    sym_values, sym_bools = {}, {}
    for n in graph.nodes:
        meta = n.meta.get("tensor_meta") or n.meta.get("val")
        if n.op == "placeholder":
            names[n] = n.name
            inputs.append({"as_tensor": {"name": n.name}})
            tensor_values[n.name] = _meta_json(meta, hints)
        elif n.op == "call_function" and n.target is operator.getitem:
            continue
        elif is_hop(n):
            names[n] = n.name
            nodes.append(hop_node_json(ep, n, names, getitems.get(n, {}), tensor_values,
                                       hints))
        elif _is_sym(n) and n.target in _SYM_BOOL_TARGETS:    # a SymBool (cond's predicate)
            names[n] = n.name
            ins = [{"name": an, "arg": _arg_json(a, names), "kind": _POSITIONAL}
                   for an, a in zip(("a", "b"), n.args)]
            nodes.append({"target": _SYM_BOOL_TARGETS[n.target], "inputs": ins,
                          "outputs": [{"as_sym_bool": {"as_name": n.name}}], "metadata": {},
                          "is_hop_single_tensor_return": None, "name": n.name})
            if "sym_bool" in n.meta:
                sym_bools[n.name] = {"as_expr": {"expr_str": n.meta["sym_bool"], "hint": None}}
        elif _is_sym(n):
            names[n] = n.name
            if n.target is sym_size:
                target, arg_names = "torch.ops.aten.sym_size.int", ("self", "dim")
            else:
                target, arg_names = _SYM_TARGETS[n.target], ("a", "b")
            ins = [{"name": an, "arg": _arg_json(a, names), "kind": _POSITIONAL}
                   for an, a in zip(arg_names, n.args)]
            nodes.append({"target": target, "inputs": ins,
                          "outputs": [{"as_sym_int": {"as_name": n.name}}], "metadata": {},
                          "is_hop_single_tensor_return": None, "name": n.name})
            if "sym" in n.meta:
                sym_values[n.name] = _sym_json(n.meta["sym"][0], hints)
        elif n.op == "call_function":
            op = n.target
            if not hasattr(op, "schema"):
                raise SerializationError(f"node {n.name}: cannot serialize a call of {op}")
            names[n] = n.name
            entry = {"target": _torch_target(op, op.bind(tuple(n.args), dict(n.kwargs))),
                     "inputs": _inputs_json(op, n, names), "metadata": {},
                     "is_hop_single_tensor_return": None, "name": n.name}
            if op.nret == 1 and op.schema.returns[0][0].startswith("Tensor") and \
                    not op.schema.returns[0][0].startswith("Tensor[]"):
                entry["outputs"] = [{"as_tensor": {"name": n.name}}]
                tensor_values[n.name] = _meta_json(meta, hints)
            else:
                outs, kids = [], getitems.get(n, {})
                count = len(meta) if isinstance(meta, (tuple, list)) else op.nret
                for i in range(count):
                    k = kids.get(i)
                    name = k.name if k is not None else f"{n.name}_{i}"
                    if k is not None:
                        names[k] = name
                    outs.append({"name": name})
                    km = (k.meta.get("tensor_meta") if k is not None else None) or \
                        (meta[i] if isinstance(meta, (tuple, list)) else None)
                    if km is not None:
                        tensor_values[name] = _meta_json(km, hints)
                if op.schema.returns[0][0].startswith("Tensor[]"):
                    entry["outputs"] = [{"as_tensors": outs}]
                else:
                    entry["outputs"] = [{"as_tensor": o} for o in outs]
            nodes.append(entry)
        elif n.op == "output":
            outputs = [_arg_json(o, names) for o in n.args[0]]
        elif n.op == "get_attr" and isinstance(getattr(graph.owning_module, n.target, None),
                                               ember.nn.Module):
            continue     # a cond branch: written inside the cond node
        elif n.op == "get_attr":
            raise SerializationError(f"node {n.name}: constants captured as attributes are not "
                                     f"serializable yet")
    g = {"inputs": inputs, "outputs": outputs, "nodes": nodes, "tensor_values": tensor_values,
         "sym_int_values": sym_values, "sym_bool_values": sym_bools,
         "is_single_tensor_return": False, "custom_obj_values": {}, "sym_float_values": {}}
    return g, names


def save(ep, f, *, extra_files=None, opset_version=None, pickle_protocol=None) -> None:
    """Write ep as a PT2 archive (a path or a writable binary file object)."""
    g, names = _graph_json(ep)
    sig = ep.graph_signature
    ins = []
    for s in sig.input_specs:
        a = {"name": s.arg.name}
        if s.kind == InputKind.USER_INPUT:
            ins.append({"user_input": {"arg": {"as_tensor": a}}})
        elif s.kind == InputKind.PARAMETER:
            ins.append({"parameter": {"arg": a, "parameter_name": s.target}})
        elif s.kind == InputKind.BUFFER:
            ins.append({"buffer": {"arg": a, "buffer_name": s.target,
                                   "persistent": s.persistent is not False}})
        else:
            raise SerializationError(f"cannot serialize an input of kind {s.kind.name}")
    outs = []
    for s in sig.output_specs:
        a = {"as_tensor": {"name": s.arg.name}}
        if s.kind == OutputKind.USER_OUTPUT:
            outs.append({"user_output": {"arg": a}})
        elif s.kind == OutputKind.BUFFER_MUTATION:
            outs.append({"buffer_mutation": {"arg": a["as_tensor"], "buffer_name": s.target}})
        elif s.kind == OutputKind.USER_INPUT_MUTATION:
            outs.append({"user_input_mutation": {"arg": a["as_tensor"],
                                                 "user_input_name": s.target}})
        elif s.kind == OutputKind.PARAMETER_MUTATION:
            outs.append({"parameter_mutation": {"arg": a["as_tensor"],
                                                "parameter_name": s.target}})
        else:
            raise SerializationError(f"cannot serialize an output of kind {s.kind.name}")
    mcg = []
    for e in ep.module_call_graph:
        sj = None
        if e.signature is not None:
            sj = {"inputs": [], "outputs": [], "in_spec": _spec_to_json(e.signature.in_spec),
                  "out_spec": _spec_to_json(e.signature.out_spec),
                  "forward_arg_names": e.signature.forward_arg_names}
        mcg.append({"fqn": e.fqn, "signature": sj})
    ranges = {str(k): {"min_val": v.lower, "max_val": _json_hi(v.upper)}
              for k, v in ep.range_constraints.items()}
    model = {"graph_module": {"graph": g, "signature": {"input_specs": ins,
                                                        "output_specs": outs},
                              "module_call_graph": mcg, "metadata": {},
                              "treespec_namedtuple_fields": {}},
             "opset_version": {"aten": 10}, "range_constraints": ranges,
             "schema_version": SCHEMA_VERSION, "verifiers": ["TRAINING"],
             "torch_version": "2.13.0", "guards_code": []}
    weights, blobs = {}, []
    for i, s in enumerate(x for x in sig.input_specs
                          if x.kind in (InputKind.PARAMETER, InputKind.BUFFER)):
        t = ep.state_dict.get(s.target)
        if t is None:
            t = ep.constants[s.target]
        t = t.detach().contiguous()
        path = f"weight_{i}"
        weights[s.target] = {"path_name": path, "is_param": s.kind == InputKind.PARAMETER,
                             "use_pickle": False, "tensor_meta": _meta_json(t)}
        weights[s.target]["tensor_meta"]["requires_grad"] = bool(t.requires_grad)
        blobs.append((path, t.numpy().tobytes()))
    name = "model" if not isinstance(f, str) else \
        __import__("os").path.splitext(__import__("os").path.basename(f))[0] or "model"
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        p = name + "/"
        z.writestr(p + "archive_format", "pt2")
        z.writestr(p + "archive_version", "0")
        z.writestr(p + ".data/version", "6\n")
        z.writestr(p + "byteorder", "little")
        z.writestr(p + "models/model.json", json.dumps(model))
        for path, data in blobs:
            z.writestr(p + "data/weights/" + path, data)
        z.writestr(p + "data/weights/model_weights_config.json", json.dumps({"config": weights}))
        z.writestr(p + "data/constants/model_constants_config.json", json.dumps({"config": {}}))
        z.writestr(p + "data/sample_inputs/model.pt", _sample_inputs(ep))


def _sample_inputs(ep) -> bytes:
    """The example inputs as torch.save writes them (PyTorch's loader reads this record)."""
    import io
    buf = io.BytesIO()
    args, kwargs = ep.example_inputs if ep.example_inputs is not None else ((), {})
    ember.save((tuple(args), dict(kwargs)), buf)
    return buf.getvalue()
