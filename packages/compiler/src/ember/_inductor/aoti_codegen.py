"""AOT Inductor's C++ wrapper: a lowered graph's fused kernels plus one `extern "C"` entry
that runs them, calling nothing of ember but the stable C ABI (ember/abi.h, target 1.1).

The library's entries (all a C program needs; the package's model.cpp is readable):

    EmberStatus ember_aoti_create(const EmberAbiTable* table, const char* weights_path,
                                  void** model, char* error, size_t error_size);
    EmberStatus ember_aoti_run(void* model, const EmberTensor* inputs, int64_t num_inputs,
                               EmberTensor* outputs, int64_t num_outputs);
    void ember_aoti_destroy(void* model);
    const char* ember_aoti_metadata(void);   // the package's metadata.json
    int64_t ember_aoti_num_inputs(void), ember_aoti_num_outputs(void);

Inputs are borrowed; outputs are new references (release them). Intermediates are tensors from
`empty_strided`; extern ops (matmul, convolution, batch norm, ...) run through `call_op`.
CPU only: sizes are the exported ones (no dynamic dims in the package).
"""
from __future__ import annotations

import json
import re

import sympy

from ember._ops._cppops import PRELUDE
from ember._ops._registry import OPS

from . import cpp
from .graph import _GRAIN, _last_uses, _stored, _tboxes
from .ir import ComputedBuffer, ExternBuffer, TBox
from .scheduler import Kernel, schedule

__all__ = ["generate"]

_ABI_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
               "float32", "float64", "complex64", "complex128")
_OP_KEYS: dict = {}


def _dt(d) -> str:
    name = str(d).split(".")[-1]
    if name not in _ABI_DTYPES:
        raise NotImplementedError(f"aoti: dtype {d} has no stable ABI code")
    return f"ember_dtype_{name}()"


def _int(sv, x) -> int:
    return int(sv.hint(x)) if isinstance(x, sympy.Basic) else int(x)


def _ints(sv, xs) -> str:
    return "{" + ", ".join(str(_int(sv, x)) for x in xs) + ("" if xs else "0") + "}"


def _op_key(op) -> str:
    if not _OP_KEYS:
        _OP_KEYS.update({id(v): k for k, v in OPS.items()})
    key = _OP_KEYS.get(id(op))
    if key is None:
        raise NotImplementedError(f"aoti: extern call of {op!r}, which is not a table op")
    return key


def kernels_of(g):
    """(steps, stored, {kernel name: (source, argument buffers)}) as graph.build makes them."""
    counter = iter(range(1 << 30))
    steps = schedule(g.buffers, lambda: next(counter))
    stored = _stored(g, steps)
    kernels = {}
    for s in steps:
        if isinstance(s, Kernel):
            while True:
                src, args, mem = cpp.generate(s, stored, "KERNEL_NAME", g.sv)
                if mem <= stored:
                    break
                stored |= mem
            s.name = f"aoti_kernel_{len(kernels)}"
            kernels[s.name] = (src.replace("KERNEL_NAME", s.name), args)
    return steps, stored, kernels


class _Wrapper:
    """Emits ember_aoti_run's body line by line."""

    def __init__(self, g, n_const, user_names):
        self.g, self.sv, self.n_const, self.user_names = g, g.sv, n_const, user_names
        self.lines: list[str] = []
        self.tensor: dict = {}   # buffer name -> C++ expression of its EmberTensor
        self.tmp = 0

    def emit(self, line: str, indent: int = 1):
        self.lines.append("  " * indent + line)

    def fresh(self, prefix="t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    # ---- inputs -----------------------------------------------------------------------------
    def inputs(self):
        sv = self.sv
        for tb in self.g.inputs:
            b, i = tb.buf, tb.buf.index
            name = f"in_{b.name}"
            shape, stride = _ints(sv, tb.shape), _ints(sv, tb.stride)
            if i < self.n_const:
                self.emit(f"EmberTensor {name} = m->consts[{i}];")
            else:
                k = i - self.n_const
                self.emit(f"EmberTensor {name} = nullptr;")
                self.emit(f"EMBER_AOTI_TRY(check_input(S, inputs[{k}], {k}, "
                          f"{json.dumps(self.user_names[k])}, {_dt(b.dtype)}, "
                          f"{json.dumps(str(b.dtype))}, {len(tb.shape)}, "
                          f"(const int64_t[]){shape}, (const int64_t[]){stride}, &{name}));")
            self.emit(f"void* p_{b.name} = nullptr;")
            self.emit(f"EMBER_AOTI_TRY(ember_tensor_data_ptr({name}, &p_{b.name}));")
            self.tensor[b.name] = name
        for j, (b, _) in enumerate(self.g.constants):  # tensors the graph holds (get_attr)
            name = f"in_{b.name}"
            self.emit(f"EmberTensor {name} = m->consts[{self.n_const + j}];")
            self.emit(f"void* p_{b.name} = nullptr;")
            self.emit(f"EMBER_AOTI_TRY(ember_tensor_data_ptr({name}, &p_{b.name}));")
            self.tensor[b.name] = name

    # ---- kernels ----------------------------------------------------------------------------
    def kernel(self, s, args):
        sv = self.sv
        for b in s.nodes:
            if b.name in self.stored and b.name not in self.tensor:
                n = max(1, _int(sv, sv.numel(b.shape)))
                if self.pool.get((b.dtype, n)):  # a dead buffer of this size and dtype
                    old = self.pool[(b.dtype, n)].pop()
                    self.emit(f"EmberTensor t_{b.name} = t_{old}; void* p_{b.name} = p_{old};"
                              f"  // reuses {old}'s memory")
                else:
                    self.emit(f"EmberTensor t_{b.name} = nullptr;")
                    self.emit(f"void* p_{b.name} = nullptr;")
                    self.emit(f"EMBER_AOTI_TRY(alloc(S, {n}, {_dt(b.dtype)}, &t_{b.name}, "
                              f"&p_{b.name}));")
                self.tensor[b.name] = f"t_{b.name}"
        work = _int(sv, sv.numel(s.R)) * max(1, _int(sv, sv.numel(s.K)))
        ptrs = ", ".join(f"(char*)p_{b.name}" for b in args) or "nullptr"
        # threads: this machine's, when the work is worth waking them (as graph.py decides)
        self.emit(f"{{ char* a[] = {{{ptrs}}}; {s.name}(a, KS, threads({work // _GRAIN})); }}")

    def free(self, names):
        """Computed buffers dead after this step join the pool (never ones an extern read:
        its result may alias them)."""
        for name in names:
            b = self.computed.get(name)
            if b is not None and name in self.tensor and name not in self.extern_read:
                n = max(1, _int(self.sv, self.sv.numel(b.shape)))
                self.pool.setdefault((b.dtype, n), []).append(name)

    # ---- extern calls -----------------------------------------------------------------------
    def view(self, tb: TBox) -> str:
        """A new (scope-owned) tensor handle of a TBox: as_strided over its buffer."""
        sv = self.sv
        if tb.buf is None:
            raise NotImplementedError("aoti: an extern op reads an unrealized value")
        base = self.tensor[tb.buf.name]
        v = self.fresh("v")
        self.emit(f"EmberTensor {v} = nullptr;")
        self.emit(f"EMBER_AOTI_TRY(view(S, {base}, {len(tb.shape)}, (const int64_t[])"
                  f"{_ints(sv, tb.shape)}, (const int64_t[]){_ints(sv, tb.stride)}, "
                  f"{_int(sv, tb.offset)}, &{v}));")
        return v

    def slot(self, typ: str, v) -> str:  # noqa: C901 - one case per schema type
        """A C++ expression of the EmberSlot holding v, as the boxed stack reads type typ."""
        fixed = re.search(r"\[(\d+)\]", typ)
        typ = re.sub(r"\[\d+\]", "[]", typ)
        if typ.rstrip("?").endswith("[]") and isinstance(v, (int, float, sympy.Basic)):
            v = [v] * (int(fixed.group(1)) if fixed else 1)  # int[2] given as one int
        base, opt = typ.rstrip("?"), typ.endswith("?")
        if v is None:
            if opt or base.startswith("Tensor"):
                return "0"
            raise NotImplementedError(f"aoti: None for a {typ} argument")
        if opt and base != "Tensor":
            cell = self.fresh("cell")
            self.emit(f"EmberSlot {cell} = {self.slot(base, v)};")
            return f"ember_slot_from_ptr(&{cell})"
        if base == "Tensor":
            return f"ember_slot_from_ptr({self.view(v)})"
        if base in ("int", "SymInt"):
            return f"(EmberSlot)(int64_t){_int(self.sv, v)}"
        if base in ("float", "Scalar"):
            f = float(v) if not isinstance(v, sympy.Basic) else float(self.sv.hint(v))
            return f"ember_slot_from_double({_cdouble(f)})"
        if base == "bool":
            return "1" if v else "0"
        if base == "ScalarType":
            return f"(EmberSlot){_dt(v)}"
        if base.endswith("[]"):
            lst = self.fresh("l")
            self.emit(f"EmberList {lst} = nullptr;")
            self.emit(f"EMBER_AOTI_TRY(ember_list_new(&{lst})); S.own_list({lst});")
            elem = base[:-2].split("[")[0]
            for x in v:
                if elem.startswith("Tensor"):
                    self.emit(f"EMBER_AOTI_TRY(ember_list_append_tensor({lst}, "
                              f"{self.view(x)}));")
                elif elem in ("float",):
                    self.emit(f"EMBER_AOTI_TRY(ember_list_append_float({lst}, "
                              f"{_cdouble(float(x))}));")
                else:
                    self.emit(f"EMBER_AOTI_TRY(ember_list_append_int({lst}, "
                              f"{_int(self.sv, x)}));")
            return f"ember_slot_from_ptr({lst})"
        raise NotImplementedError(f"aoti: extern argument type {typ} has no stable ABI boxing")

    def extern(self, s: ExternBuffer):
        op = s.target
        key = _op_key(op)
        sargs = op.schema.args
        vals, given = [], []
        for i, a in enumerate(sargs):
            if i < len(s.args) and not a.kwonly:
                vals.append(s.args[i])
                given.append(True)
            elif a.name in s.kwargs:
                vals.append(s.kwargs[a.name])
                given.append(True)
            else:
                vals.append(a.default)
                given.append(False)
        while given and not given[-1] and sargs[len(given) - 1].has_default:
            given.pop()
            vals.pop()
        nret = len(op.schema.returns)
        st = self.fresh("st")
        self.emit(f"// {key}: {', '.join(s.origins)}")
        slots = [self.slot(a.type, v) for a, v in zip(sargs, vals)]
        self.emit(f"EmberSlot {st}[{max(1, len(slots), nret)}] = {{{', '.join(slots) or '0'}}};")
        self.emit(f"EMBER_AOTI_TRY(ember_call_op({json.dumps(key)}, \"\", {st}, {len(slots)}, "
                  f"{nret}));")
        rets = [t for t, _ in op.schema.returns]
        for k, r in enumerate(s.results):
            if r is None:
                if rets[k].startswith("Tensor") and not rets[k].endswith("[]"):
                    self.emit(f"S.own((EmberTensor)ember_slot_to_ptr({st}[{k}]));")
                continue
            if not rets[k].startswith("Tensor") or rets[k].endswith("[]"):
                raise NotImplementedError(f"aoti: {key} returns {rets[k]}")
            o = s.outputs[k]
            if o.name not in self.used:  # unread (batch norm's saved statistics in eval)
                self.emit(f"S.own((EmberTensor)ember_slot_to_ptr({st}[{k}]));")
                continue
            shape, stride = _ints(self.sv, r[0]), _ints(self.sv, r[1])
            self.emit(f"EmberTensor t_{o.name} = S.own((EmberTensor)ember_slot_to_ptr({st}[{k}]));")
            self.emit(f"EMBER_AOTI_TRY(relayout(S, {len(r[0])}, (const int64_t[]){shape}, "
                      f"(const int64_t[]){stride}, &t_{o.name}));")
            self.emit(f"void* p_{o.name} = nullptr;")
            self.emit(f"EMBER_AOTI_TRY(ember_tensor_data_ptr(t_{o.name}, &p_{o.name}));")
            self.tensor[o.name] = f"t_{o.name}"

    def outputs(self):
        for k, o in enumerate(self.g.outputs):
            if not isinstance(o, TBox) or o.buf is None:
                raise NotImplementedError("aoti: a graph output that is not a tensor")
            sv = self.sv
            self.emit(f"EMBER_AOTI_TRY(view(S, {self.tensor[o.buf.name]}, {len(o.shape)}, "
                      f"(const int64_t[]){_ints(sv, o.shape)}, (const int64_t[])"
                      f"{_ints(sv, o.stride)}, {_int(sv, o.offset)}, &outs[{k}]));")

    def run(self, steps, stored, kernels) -> str:
        self.stored = stored
        self.used = stored | {b.name for _, args in kernels.values() for b in args}
        self.pool: dict = {}
        self.computed = {b.name: b for b in self.g.buffers if isinstance(b, ComputedBuffer)}
        self.extern_read = {tb.buf.name for s in steps if isinstance(s, ExternBuffer)
                            for tb in _tboxes((s.args, s.kwargs))}
        last_use = _last_uses(self.g, steps, stored)
        self.inputs()
        for i, s in enumerate(steps):
            if isinstance(s, Kernel):
                self.kernel(s, kernels[s.name][1])
            else:
                self.extern(s)
            self.free(last_use.get(i, ()))
        self.outputs()
        return "\n".join(self.lines)


def _cdouble(f: float) -> str:
    if f != f:
        return "std::numeric_limits<double>::quiet_NaN()"
    if f in (float("inf"), float("-inf")):
        return ("-" if f < 0 else "") + "std::numeric_limits<double>::infinity()"
    return repr(f)


def generate(g, n_const: int, user_names, consts_meta, metadata: dict) -> str:
    """The whole C++ source of a package's library for a lowered graph (GraphLowering) whose
    first n_const inputs are the lifted parameters and buffers; consts_meta describes them
    and then the graph's own constants (g.constants), all read from the weights file."""
    for b in g.buffers:
        if isinstance(b, ComputedBuffer):
            _dt(b.dtype)
    steps, stored, kernels = kernels_of(g)
    w = _Wrapper(g, n_const, user_names)
    body = w.run(steps, stored, kernels)
    ks = [int(g.sv.values[s]) for s in g.sv.ordered()] or [0]
    n_out = len(g.outputs)
    const_lines = []
    for c in consts_meta:
        const_lines.append(f"  {{{c['offset']}, {c['nbytes']}, {c['ndim']}, "
                           f"{_ints(g.sv, c['shape'])}, {_dt_from_name(c['dtype'])}}},")
    from . import aoti_runtime
    return (PRELUDE + "\n".join(src for src, _ in kernels.values()) + "\n"
            + aoti_runtime.RUNTIME
            + f"\nstatic int64_t KS[] = {{{', '.join(map(str, ks))}}};\n"
            + f"static const int64_t N_CONST = {len(consts_meta)}, N_IN = {len(user_names)}, "
            + f"N_OUT = {n_out};\n"
            + "static const ConstSpec CONSTS[] = {\n" + "\n".join(const_lines)
            + ("\n  {0, 0, 0, {0}, \"float32\"}," if not const_lines else "") + "\n};\n"
            + f"static const char METADATA[] = {_c_string(json.dumps(metadata))};\n"
            + aoti_runtime.ENTRIES.replace("/*BODY*/", body))


def _dt_from_name(name: str) -> str:
    return json.dumps(name.split(".")[-1])


def _c_string(s: str) -> str:
    return json.dumps(s)
