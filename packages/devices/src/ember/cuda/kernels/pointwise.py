"""Pointwise kernels from op formulas: trace the formula with the Triton handler, wrap the body in
an indexing skeleton, compile once per (op, dtypes, constants, layout class), launch.

Layout: operand shapes are broadcast to the output's, size-1 dims dropped and adjacent dims merged
where every operand allows it. Then each operand is `flat` (contiguous like the output: the
linear index is its offset), `one` (a single element) or `strided` (offsets from coordinates and
strides, so any view, expanded or transposed, is read in place). The output may be strided too:
the same kernels write `copy_` into views.

Nothing here touches CUDA: the launch function is a parameter, so the code generator runs in
Triton's interpreter on numpy memory (tests) as well as on the GPU.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile

from ember._ops.registry import collapse_dims
from ember._ops.registry import dtypes as D

from ..runtime.driver import bound_device
from .triton_handler import TL, NeedsConstant, TritonOps, Unsupported, Var, literal

__all__ = ["Operand", "generate", "PointwiseCache", "Unsupported", "HostPtr"]

BLOCK = 1024
_I32 = 2**31 - 1


class Operand:
    """A strided array for a kernel: pointer object (data_ptr()), int address, shape, strides
    (elements), dtype."""

    __slots__ = ("ptr", "addr", "shape", "stride", "dtype")

    def __init__(self, ptr, addr, shape, stride, dtype):
        self.ptr, self.addr, self.shape, self.stride, self.dtype = ptr, addr, shape, stride, dtype


def broadcast_strides(shape, stride, out_shape):
    """Strides of an operand read as out_shape (0 along broadcast dims)."""
    nd = len(out_shape)
    pad = nd - len(shape)
    r = [0] * nd
    for i in range(len(shape)):
        if shape[i] != 1:
            r[pad + i] = stride[i]
    return r


def _mode(sizes, strides) -> str:
    if all(s == 0 for s in strides):
        return "one"
    expect = 1
    for n, s in zip(reversed(sizes), reversed(strides)):
        if s != expect:
            return "strided"
        expect *= n
    return "flat"


# ---- code generation ----------------------------------------------------------------------------
def _trace(op, args, tensor_slots, scalar_slots, cdt, const_scalars):
    """Evaluate op's formula on Vars. tensor_slots: {arg index: (var name, dtype, cast?)};
    scalar_slots: {arg index: (var name, python value)}."""
    h = TritonOps(interpret=os.environ.get("TRITON_INTERPRET", "0") == "1")
    a = list(args)
    for i, (name, dt, cast) in tensor_slots.items():
        a[i] = Var(name, cdt if cast else dt, True)
    for i, (name, value) in scalar_slots.items():
        if const_scalars:
            a[i] = _as_cdt(value, cdt)
        else:
            a[i] = Var(name, cdt, False)
    r = op.pointwise(h, *a)
    return h, r


def _as_cdt(v, cdt):
    if cdt is D.bool:
        return bool(v)
    if cdt._cat == 1:
        return int(v)
    return float(v)


def generate(name, op, args, tensor_slots, scalar_slots, modes, out_mode, ndim, rdt, cdt,
             wide, const_scalars):
    """Source of a @triton.jit kernel for op over the given layout class."""
    h, res = _trace(op, args, tensor_slots, scalar_slots, cdt, const_scalars)
    idx = "tl.int64" if wide else "tl.int32"
    tnames = [v[0] for v in tensor_slots.values()]
    snames = [] if const_scalars else [v[0] for v in scalar_slots.values()]
    params = ["out_ptr"] + [f"{t}_ptr" for t in tnames] + snames + ["n"]
    params += [f"sz{d}" for d in range(ndim)]
    params += [f"os{d}" for d in range(ndim)]
    for t, m in zip(tnames, modes):
        if m == "strided":
            params += [f"{t}_s{d}" for d in range(ndim)]
    nospec = [p for p in params if p != "n" and not p.endswith("_ptr")]
    body = ["pid = tl.program_id(0)",
            f"offs = pid.to({idx}) * BLOCK + tl.arange(0, BLOCK).to({idx})" if wide else
            "offs = pid * BLOCK + tl.arange(0, BLOCK)",
            "mask = offs < n"]
    if "strided" in modes or out_mode == "strided":
        body.append("r = offs")
        for d in range(ndim - 1, 0, -1):
            body.append(f"c{d} = r % sz{d}")
            body.append(f"r = r // sz{d}")
        body.append("c0 = r")

    def offset(prefix):
        return " + ".join(f"c{d} * {prefix}{d}" for d in range(ndim)) or "0"

    for (t, dt_, cast), m in zip(tensor_slots.values(), modes):
        conv = f".to({TL[cdt]})" if cast and dt_ is not cdt else ""
        if m == "flat":
            body.append(f"{t} = tl.load({t}_ptr + offs, mask=mask){conv}")
        elif m == "one":
            body.append(f"{t} = tl.load({t}_ptr){conv}")
        else:
            body.append(f"{t} = tl.load({t}_ptr + ({offset(t + '_s')}), mask=mask){conv}")
    for s in snames:
        body.append(f"{s} = tl.cast({s}, {TL[cdt]})")
    body += h.lines
    if isinstance(res, Var):
        rc = res.code if res.dtype is rdt else (
            f"({res.code} != 0)" if rdt is D.bool else f"{res.code}.to({TL[rdt]})")
        if not res.block:
            rc = f"tl.where(mask, {rc}, {rc})"
    else:
        if hasattr(res, "item"):
            res = res.item()
        rc = f"tl.full([BLOCK], {literal(res)}, {TL[rdt]})"
    optr = "out_ptr + offs" if out_mode == "flat" else f"out_ptr + ({offset('os')})"
    body.append(f"tl.store({optr}, {rc}, mask=mask)")
    src = ["import triton", "import triton.language as tl",
           "from triton.language.extra import libdevice", "", "",
           f"@triton.jit(do_not_specialize={nospec!r})",
           f"def {name}({', '.join(params)}, BLOCK: tl.constexpr):"]
    src += ["    " + line for line in body]
    return "\n".join(src) + "\n"


_SRC_DIR = None


def load_kernel(src: str, name: str):
    """Import generated source from a file (Triton's JIT reads the function's source)."""
    global _SRC_DIR
    if _SRC_DIR is None:
        _SRC_DIR = os.path.join(tempfile.gettempdir(), f"ember_triton_{os.getuid()}")
        os.makedirs(_SRC_DIR, exist_ok=True)
    h = hashlib.sha1(src.encode()).hexdigest()[:16]
    path = os.path.join(_SRC_DIR, f"{name}_{h}.py")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(src)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"ember_triton_{name}_{h}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def _key_of(v):
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, (list, tuple)):
        return tuple(_key_of(x) for x in v)
    if isinstance(v, D.dtype):
        return v
    return repr(v)


class PointwiseCache:
    """Kernels by (op, dtypes, constants, layout class). `launch(fn, grid, args, key)` runs one:
    the GPU's cached launcher, or Triton's interpreter."""

    def __init__(self, launch):
        self.launch = launch
        self.kernels: dict = {}
        self.consts: set = set()    # ops whose formula branches on a scalar argument
        self.last_plan = None
        self.memo: dict = {}        # layout key -> (launch fn, prefix, constexprs, grid, tail)

    def run(self, op, args, is_tensor, out: Operand, rdt, cdt):
        """args: the op's arguments in schema order, with each tensor argument replaced by an
        Operand (is_tensor(i) says which); 0-dim host tensors are already Python scalars.
        Writes op(args) into out (same shape as the broadcast)."""
        fast = getattr(self.launch, "fast", None)
        if fast is not None:  # the same layouts as an earlier call: launch straight away
            const = op in self.consts or cdt is D.float64
            # a compiled kernel belongs to the context it was loaded in: the device is part of
            # the key (the launch goes to the bound device, the tensors' one)
            mkey = [op, rdt, cdt, out.dtype, out.shape, tuple(out.stride), out.addr & 15 == 0,
                    bound_device()]
            ptrs, scal = [out.addr], []
            pws = op.pw_idx
            for i, a in enumerate(args):
                if a.__class__ is Operand and is_tensor(i):
                    mkey.append((a.dtype, a.shape, tuple(a.stride), a.addr & 15 == 0))
                    ptrs.append(a.addr)
                elif i in pws and isinstance(a, (bool, int, float)):
                    # (an int's Triton type, i32 or i64, follows its value)
                    mkey.append((a.__class__, a) if const else a.__class__ if (
                        a.__class__ is not int or -_I32 - 1 <= a <= _I32) else "i64")
                    if not const:
                        scal.append(a)
                else:
                    mkey.append(_key_of(a))
            mkey = tuple(mkey)
            plan = self.memo.get(mkey)
            if plan is not None:
                fast(plan, ptrs + scal)
                return plan[3], plan[4]
            r = self._run(op, args, is_tensor, out, rdt, cdt)
            last = getattr(self.launch, "last", None)
            if r is not None and last is not None:
                if len(self.memo) > 20000:
                    self.memo.clear()
                self.memo[mkey] = last + r
            return r
        return self._run(op, args, is_tensor, out, rdt, cdt)

    def _run(self, op, args, is_tensor, out: Operand, rdt, cdt):
        pw = set(op.pw_idx)
        tensor_slots, scalar_slots, operands = {}, {}, []
        for i, a in enumerate(args):
            if is_tensor(i) and a is not None:
                tensor_slots[i] = (f"a{i}", a.dtype, i in pw)
                operands.append(a)
            elif i in pw and isinstance(a, (bool, int, float)):
                scalar_slots[i] = (f"s{i}", a)
        out_shape = out.shape
        st = [broadcast_strides(o.shape, o.stride, out_shape) for o in operands]
        sizes, sts = collapse_dims(out_shape, st + [list(out.stride)])
        ndim = len(sizes)
        modes = tuple(_mode(sizes, s) for s in sts[:-1])
        out_mode = _mode(sizes, sts[-1])
        if out_mode == "one":
            out_mode = "strided" if ndim else "flat"
        n = 1
        for s in sizes:
            n *= s
        if n == 0:
            return
        ints = [n] + sizes + sts[-1]
        for s, m in zip(sts[:-1], modes):
            if m == "strided":
                ints += s
        # int64 index math when any offset could pass 2**31
        ext = sum((sz - 1) * abs(s) for o in sts for sz, s in zip(sizes, o))
        wide = n > _I32 or ext > _I32 or any(abs(v) > _I32 for v in ints)
        # what Triton specializes on: n's divisibility, and int widths when wide
        spec = (1 if n == 1 else 16 if n % 16 == 0 else 0,
                tuple(abs(v) > _I32 for v in ints) if wide else None)
        const = op in self.consts or cdt is D.float64
        # every argument by position: tensors by dtype, runtime scalars by type, the rest
        # (and baked scalars) by value: clamp(x, None, 1) and clamp(x, 1, None) differ
        sig = tuple(("T", a.dtype) if i in tensor_slots else
                    (("c", _key_of(a)) if const else ("s", _scalar_ty(a)))
                    if i in scalar_slots else ("v", _key_of(a)) for i, a in enumerate(args))
        key = (op.qualname, rdt, cdt, out.dtype, modes, out_mode, ndim, wide, sig, spec)
        fn = self.kernels.get(key)
        if fn is None:
            fn = self._compile(op, args, tensor_slots, scalar_slots, modes, out_mode, ndim,
                               out.dtype, cdt, wide, const)
            if fn is None:  # the formula needs its scalars as constants: new key
                self.consts.add(op)
                return self._run(op, args, is_tensor, out, rdt, cdt)
            self.kernels[key] = fn
        call = [out] + operands
        if not const:
            call += [v[1] for v in scalar_slots.values()]
        call += [n] + sizes + sts[-1]
        for s, m in zip(sts[:-1], modes):
            if m == "strided":
                call += s
        grid = ((n + BLOCK - 1) // BLOCK,)
        self.launch(fn, grid, call, key, {"BLOCK": BLOCK})
        # for callers that cache the launch: the grid and the arguments after the pointers
        # and runtime scalars (they depend only on shapes and strides)
        skip = 1 + len(operands) + (0 if const else len(scalar_slots))
        return grid, call[skip:]

    def _compile(self, op, args, tensor_slots, scalar_slots, modes, out_mode, ndim, odt, cdt,
                 wide, const):
        name = "pw_" + "".join(c if c.isalnum() else "_" for c in op.qualname)
        try:
            src = generate(name, op, args, tensor_slots, scalar_slots, modes, out_mode, ndim,
                           odt, cdt, wide, const)
        except NeedsConstant as e:
            if const:
                raise Unsupported(f"{op.qualname}: formula branches on a tensor value") from e
            return None
        except Unsupported:
            raise
        except Exception as e:  # a formula written for numpy only (x.dtype, np calls)
            raise Unsupported(f"{op.qualname}: {type(e).__name__}: {e}") from e
        return load_kernel(src, name)


def _scalar_ty(v):
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -_I32 - 1 <= v <= _I32 else "i64"
    return "fp32"


class HostPtr:
    """A numpy buffer posing as a torch tensor for Triton's interpreter (CPU tests)."""

    def __init__(self, arr, dtype, offset_bytes: int = 0):
        self._arr = arr
        self.dtype = dtype
        self._addr = arr.__array_interface__["data"][0] + offset_bytes

    def data_ptr(self):
        return self._addr

    # the interpreter copies "device" storages to host ones: this memory already is host memory
    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        return self

    def new_empty(self, *a, **k):
        return HostPtr(self._arr, self.dtype)

    def set_(self, storage, offset, size, stride):
        self._addr = storage.data_ptr()
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return (self._arr.size,)

    def stride(self):
        return (1,)


def run_op(cache, op, args, rdt, cdt, operand_of, new_out, device_type="cuda"):
    """The backend's pointwise entry: broadcast shape, output, scalars from 0-dim host tensors.
    operand_of(tensor) -> Operand; new_out(shape, dtype) -> (tensor, Operand)."""
    from ember._ops.registry import Tensor, broadcast_shapes
    a = list(args)
    tens = set()
    shapes = []
    for i in op.tensor_idx:
        x = a[i]
        if not isinstance(x, Tensor):
            continue
        if x.device.type != device_type:  # a 0-dim host tensor takes part as a number
            a[i] = x.item()
            if i not in op.pw_idx:
                raise Unsupported(f"{op.qualname}: host tensor argument")
            continue
        if x.dtype not in TL:
            raise Unsupported(f"{op.qualname}: dtype {x.dtype}")
        shapes.append(tuple(x.shape))
        tens.add(i)
        a[i] = operand_of(x)
    if rdt not in TL or cdt not in TL:
        raise Unsupported(f"{op.qualname}: dtype {rdt}")
    shape = broadcast_shapes(*shapes) if shapes else ()
    t, out = new_out(tuple(shape), rdt)
    cache.last_plan = cache.run(op, a, tens.__contains__, out, rdt, cdt)
    return t
