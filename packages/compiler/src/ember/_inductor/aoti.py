"""AOT Inductor: an ExportedProgram compiled ahead of time into a `.pt2` package (a zip) whose
shared library runs the model through ember's stable C ABI only, and the loader.

Package layout (JSON and raw bytes, never pickle):

    model/metadata.json              inputs, outputs, constants, ABI version, entry points
    model/data/aotinductor/model.so  the library (entries in aoti_codegen's docstring)
    model/data/aotinductor/model.cpp its source
    model/data/weights/weights.bin   parameters and buffers, raw little-endian bytes

CPU only; sizes are the exported ones (a dynamic dim is refused when packaging).
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import tempfile
import zipfile

import ember
from ember._ops import _cpujit

from .lowering import Fallback, GraphLowering

__all__ = ["aoti_compile_and_package", "aoti_load_package", "AOTICompiledModel"]

_PREFIX = "model/"
_SO, _CPP = "data/aotinductor/model.so", "data/aotinductor/model.cpp"
_WEIGHTS, _META = "data/weights/weights.bin", "metadata.json"
_ALIGN = 64


def _flat_spec(spec) -> str:
    """"leaf", "tuple" or "list": the output structures a package restores."""
    if spec is None or spec.is_leaf():
        return "leaf"
    if spec.type in (tuple, list) and all(c.is_leaf() for c in spec.children_specs):
        return spec.type.__name__
    raise NotImplementedError(f"aoti: nested outputs ({spec}) are not supported in a package")


def _lifted(ep):
    """(constant (name, tensor) pairs, user input names) in placeholder order."""
    from ember.export.graph_signature import InputKind, OutputKind
    for s in ep.graph_signature.output_specs:
        if s.kind != OutputKind.USER_OUTPUT:
            raise NotImplementedError(f"aoti: the program mutates {s.target} ({s.kind.name}): "
                                      "packages hold no mutable state")
    kinds = {s.arg.name: s for s in ep.graph_signature.input_specs}
    consts, users = [], []
    for n in ep.graph.nodes:
        if n.op != "placeholder":
            continue
        s = kinds[n.name]
        if s.kind == InputKind.USER_INPUT:
            users.append(n.name)
        elif users:
            raise NotImplementedError("aoti: a parameter placeholder after a user input")
        else:
            t = ep.state_dict.get(s.target, ep.constants.get(s.target))
            if not isinstance(t, ember.Tensor):
                raise NotImplementedError(f"aoti: input {n.name} ({s.kind.name}) is not a tensor")
            consts.append((n.name, t.detach().contiguous()))
    return consts, users


def _example_inputs(ep, users):
    """Tensors of the user inputs' exported shapes and dtypes (their values are not used)."""
    specs = {n.name: n.meta.get("tensor_meta", n.meta.get("val")) for n in ep.graph.nodes
             if n.op == "placeholder"}
    out = []
    for name in users:
        spec = specs.get(name)
        if spec is None or not hasattr(spec, "dtype"):
            raise NotImplementedError(f"aoti: user input {name} is not a tensor")
        if not all(isinstance(s, int) for s in spec.shape):
            raise NotImplementedError(f"aoti: input {name} has a dynamic shape "
                                      f"{list(spec.shape)}: packages hold static sizes")
        stride = tuple(spec.stride()) if callable(getattr(spec, "stride", None)) else None
        t = ember.zeros(tuple(spec.shape), dtype=spec.dtype)
        if stride is not None and stride != tuple(t.stride()) and t.numel():
            extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, stride))
            t = ember.zeros(extent, dtype=spec.dtype).as_strided(t.shape, stride)
        out.append(t)
    return out


def _weights(consts):
    """(weights.bin bytes, constants metadata)."""
    blob, meta = bytearray(), []
    for name, t in consts:
        raw = t.numpy().tobytes() if t.numel() else b""
        blob.extend(b"\0" * (-len(blob) % _ALIGN))
        if len(t.shape) > 8:
            raise NotImplementedError(f"aoti: constant {name} has more than 8 dims")
        meta.append({"name": name, "dtype": str(t.dtype), "shape": list(t.shape),
                     "ndim": len(t.shape), "offset": len(blob), "nbytes": len(raw)})
        blob.extend(raw)
    return bytes(blob), meta


def _compile(src: str, workdir: str) -> str:
    import ember_abi
    if not _cpujit.available():
        raise RuntimeError("aoti_compile_and_package needs a C++ compiler (g++), found none "
                           "(or EMBER_CPU_JIT=0)")
    cpp, so = os.path.join(workdir, "model.cpp"), os.path.join(workdir, "model.so")
    with open(cpp, "w") as f:
        f.write(src)
    flags = [f for f in _cpujit.FLAGS if f != "-w"] + ["-w", "-fvisibility=hidden"]
    r = subprocess.run([_cpujit._compiler[0], *flags, "-I", ember_abi.get_include(), cpp,
                        "-o", so], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"aoti: the generated C++ did not compile:\n{r.stderr[-4000:]}")
    return so


def aoti_compile_and_package(exported_program, package_path=None, inductor_configs=None) -> str:
    """Compile an ExportedProgram ahead of time into a `.pt2` package; returns its path.

    >>> import ember, ember._inductor as ind
    >>> ep = ember.export.export(ember.nn.Linear(3, 2), (ember.randn(4, 3),))
    >>> path = ind.aoti_compile_and_package(ep)              # doctest: +SKIP
    >>> ind.aoti_load_package(path)(ember.randn(4, 3)).shape  # doctest: +SKIP
    ember.Size([4, 2])
    """
    from . import aoti_codegen
    ep = exported_program.run_decompositions()
    consts, users = _lifted(ep)
    examples = _example_inputs(ep, users)
    sig = ep.module_call_graph[0].signature if ep.module_call_graph else None
    names = list(getattr(sig, "forward_arg_names", None) or [])
    if len(names) == len(users):  # the forward's own argument names, for error messages
        users = names
    try:
        g = GraphLowering(ep.graph_module, [t for _, t in consts] + examples).run()
    except Fallback as e:
        raise NotImplementedError(f"aoti: the program cannot be compiled: {e}") from e
    if g.device != "cpu":
        raise NotImplementedError("aoti: only CPU programs are packaged (no CUDA AOTI yet)")
    if getattr(g, "rng_buf", None) is not None:
        raise NotImplementedError("aoti: random ops (rand, dropout, ...) are not packaged")
    for buf, target in g.constants:  # tensors the graph itself holds (get_attr nodes)
        t = ep.graph_module
        for part in target.split("."):
            t = getattr(t, part)
        if not t.is_contiguous():
            raise NotImplementedError(f"aoti: graph constant {target} is not contiguous")
        consts.append((buf.name, t.detach()))
    blob, cmeta = _weights(consts)
    meta = {"format": "ember-aoti", "format_version": 1, "device": "cpu",
            "abi": [1, 1], "ember_version": getattr(ember, "__version__", ""),
            "inputs": [{"name": n, "dtype": str(x.dtype), "shape": list(x.shape)}
                       for n, x in zip(users, examples)],
            "outputs": _flat_spec(sig.out_spec if sig else None),
            "num_outputs": len(g.outputs), "constants": cmeta,
            "entry_points": ["ember_aoti_create", "ember_aoti_run", "ember_aoti_destroy",
                             "ember_aoti_metadata", "ember_aoti_num_inputs",
                             "ember_aoti_num_outputs"],
            "inductor_configs": {str(k): str(v) for k, v in (inductor_configs or {}).items()}}
    src = aoti_codegen.generate(g, len(consts) - len(g.constants), users, cmeta, meta)
    if package_path is None:
        fd, package_path = tempfile.mkstemp(suffix=".pt2")
        os.close(fd)
    package_path = os.fspath(package_path)
    if not package_path.endswith(".pt2"):
        raise RuntimeError(f"Expect package path to end with .pt2, got {package_path}")
    with tempfile.TemporaryDirectory() as d:
        so = _compile(src, d)
        with zipfile.ZipFile(package_path, "w", zipfile.ZIP_STORED) as z:
            z.writestr(_PREFIX + _META, json.dumps(meta, indent=1))
            z.write(so, _PREFIX + _SO)
            z.writestr(_PREFIX + _CPP, src)
            z.writestr(_PREFIX + _WEIGHTS, blob)
    return package_path


class AOTICompiledModel:
    """A loaded package (torch._inductor.package's AOTICompiledModel): call it with the
    exported inputs; `get_metadata()` gives the package's metadata."""

    def __init__(self, path: str):
        from ember.library import _abi
        table = _abi.native()._abi_table_address()
        self._dir = tempfile.TemporaryDirectory(prefix="ember_aoti_")
        with zipfile.ZipFile(path) as z:
            z.extractall(self._dir.name)
        root = os.path.join(self._dir.name, _PREFIX)
        with open(os.path.join(root, _META)) as f:
            self._meta = json.load(f)
        lib = self._lib = ctypes.CDLL(os.path.join(root, _SO))
        lib.ember_aoti_create.restype = ctypes.c_int32
        lib.ember_aoti_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                          ctypes.c_size_t]
        lib.ember_aoti_run.restype = ctypes.c_int32
        lib.ember_aoti_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_int64]
        lib.ember_aoti_destroy.argtypes = [ctypes.c_void_p]
        err = ctypes.create_string_buffer(1024)
        handle = ctypes.c_void_p()
        weights = os.path.join(root, _WEIGHTS).encode()
        if lib.ember_aoti_create(table, weights, ctypes.byref(handle), err, len(err)) != 0:
            raise RuntimeError(f"aoti_load_package({path!r}): {err.value.decode()}")
        self._handle = handle
        # last_error is the table's first entry, after the 16-byte header (ember/abi.h)
        self._last_error = ctypes.CFUNCTYPE(ctypes.c_char_p)(
            ctypes.c_void_p.from_address(table + 16).value)

    def get_metadata(self) -> dict:
        return dict(self._meta)

    def __call__(self, *args, **kwargs):
        from ember.utils import _pytree
        flat = _pytree.tree_flatten((args, kwargs))[0]
        specs = self._meta["inputs"]
        if len(flat) != len(specs):
            raise RuntimeError(f"AOTICompiledModel: expected {len(specs)} inputs "
                               f"({', '.join(s['name'] for s in specs)}), got {len(flat)}")
        for s, x in zip(specs, flat):
            if not isinstance(x, ember.Tensor):
                raise RuntimeError(f"AOTICompiledModel: input '{s['name']}' must be a Tensor, "
                                   f"got {type(x).__name__}")
        # In ember-core an EmberTensor handle is the tensor object (csrc/abi_table.cpp): the
        # inputs are borrowed for the call, the outputs are new references handed to Python.
        n_out = self._meta["num_outputs"]
        ins = (ctypes.c_void_p * max(1, len(flat)))(*[id(x) for x in flat])
        outs = (ctypes.c_void_p * max(1, n_out))()
        status = self._lib.ember_aoti_run(self._handle, ins, len(flat), outs, n_out)
        if status != 0:
            raise RuntimeError(self._last_error().decode())
        res = []
        for p in outs[:n_out]:
            res.append(ctypes.cast(p, ctypes.py_object).value)
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(res[-1]))
        kind = self._meta["outputs"]
        if kind == "leaf":
            return res[0]
        return tuple(res) if kind == "tuple" else res

    def __del__(self):
        lib, h = getattr(self, "_lib", None), getattr(self, "_handle", None)
        if lib is not None and h:
            lib.ember_aoti_destroy(h)
            self._handle = None


def aoti_load_package(path) -> AOTICompiledModel:
    """Load a `.pt2` package written by `aoti_compile_and_package` (needs ember._C, core's
    native part, which holds the stable ABI table the library calls)."""
    return AOTICompiledModel(os.fspath(path))
