"""Triton code generation for CUDA tensors: the same scheduled kernels as the C++ path, values
emitted by ember-devices' Triton ops handler (`ember.cuda.kernels.triton_handler.TritonOps`, the one behind
the eager Triton kernels), launched through the device's launcher (Triton's interpreter on the
fake device: EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1).

Pointwise kernels: one program per XBLOCK elements of the flattened outer ranges. Kernels with
reductions: one program per outer index; each loop phase walks the flattened inner ranges in
RBLOCK chunks (masked loads, block accumulators reduced with tl.sum / tl.max at the end).
"""
from __future__ import annotations

import os

import sympy

from ember import _dtype as D

from .ir import kdtype
from .sizevars import pyexpr

__all__ = ["generate", "XBLOCK", "RBLOCK"]

XBLOCK = 256
RBLOCK = 64
_FINAL = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


def _handler_class():
    from ember.cuda.kernels.triton_handler import TL, TritonOps, Var, literal

    class KernelOps(TritonOps):
        """TritonOps with buffer loads and typed constants."""

        def __init__(self, kernel):
            super().__init__(interpret=os.environ.get("TRITON_INTERPRET", "0") == "1")
            self.k = kernel
            self.var_ranges = kernel.kernel.var_ranges()

        def v(self, x):
            if isinstance(x, Var):
                return x
            if hasattr(x, "dtype") and not isinstance(x, (bool, int, float)):
                d = D._BY_NP.get(x.dtype)
                x = x.item()
            else:
                d = D.bool if isinstance(x, bool) else D.int64 if isinstance(x, int) \
                    else D.float64
            return self.emit(f"tl.full([], {literal(x)}, {TL[d]})", d, False)

        def load(self, buf, index):
            return self.k.load(buf, index)

        def pow(self, a, b):
            # small constant exponents as products (no libdevice call; the interpreter has none)
            if isinstance(a, Var) and a.dtype._cat == 2 and not isinstance(b, Var):
                e = float(b.item() if hasattr(b, "item") else b)
                if e == 2.0:
                    return self.mul(a, a)
                if e == 3.0:
                    return self.mul(self.mul(a, a), a)
                if e == 1.0:
                    return a
                if e == 0.5:
                    return self.sqrt(a)
                if e == -1.0:
                    return self.truediv(1.0, a)
                if e == -2.0:
                    return self.truediv(1.0, self.mul(a, a))
                if e == -0.5:
                    return self.rsqrt(a)
            return super().pow(a, b)

        def index_expr(self, e):
            return self.emit(f"tl.full([], {pyexpr(e)}, tl.int64)", D.int64, False)

    return KernelOps, Var, TL, literal


class TritonKernel:
    """One scheduled kernel as a @triton.jit function."""

    def __init__(self, kernel, stored: set, sizevars):
        ops, self.Var, self.TL, self.literal = _handler_class()
        self.kernel, self.stored, self.sv = kernel, stored, sizevars
        self.args: list = []
        self.arg_of: dict = {}
        self.scopes: list = [{}]
        self.mem_reads: set = set()
        self.block_vars: set = set()
        self.mask = None
        self.h = ops(self)

    def ptr(self, buf) -> str:
        if buf.name not in self.arg_of:
            self.arg_of[buf.name] = f"p{len(self.args)}"
            self.args.append(buf)
        return self.arg_of[buf.name]

    def _block(self, index) -> bool:
        return any(s in self.block_vars for s in sympy.sympify(index).free_symbols)

    def load(self, buf, index):
        key = (buf.name, index)
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        if buf.name in self.kernel.where:
            self.mem_reads.add(buf.name)
        block = self._block(index)
        mask = f", mask={self.mask}, other=0" if block and self.mask else ""
        code = f"tl.load({self.ptr(buf)} + ({pyexpr(index)}){mask})"
        if kdtype(buf.dtype) is not buf.dtype:
            code += ".to(tl.float32)"
        v = self.h.emit(code, kdtype(buf.dtype), block)
        self.scopes[-1][key] = v
        return v

    def store(self, buf, index, v, out):
        self.scopes[-1][(buf.name, index)] = v
        if buf.name not in self.stored:
            return
        code = v.code if v.dtype is buf.dtype else f"{v.code}.to({self.TL[buf.dtype]})"
        if v.dtype is not D.bool and buf.dtype is D.bool:
            code = f"({v.code} != 0)"
        block = self._block(index)
        if block and not v.block:
            code = f"tl.full([{'XBLOCK' if not self.kernel.K else 'RBLOCK'}], {code}, " \
                   f"{self.TL[buf.dtype]})"
        mask = f", mask={self.mask}" if block and self.mask else ""
        out.append(f"tl.store({self.ptr(buf)} + ({pyexpr(index)}), {code}{mask})")

    # ---- code ------------------------------------------------------------------------------
    def _decompose(self, vs, ranges, flat: str) -> list:
        out, rest = [], flat
        for i in range(len(vs) - 1, -1, -1):
            if i == 0:
                out.append(f"{vs[i]} = {rest}")
            else:
                out.append(f"{vs[i]} = {rest} % {pyexpr(ranges[i])}")
                rest = f"({rest} // {pyexpr(ranges[i])})"
        return out

    def body(self) -> list:
        k = self.kernel
        lines: list = []
        if not k.K:  # pointwise: XBLOCK elements of the flattened outer ranges
            self.block_vars = set(k.xs)
            self.mask = "xmask"
            lines += ["xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)",
                      "xmask = xindex < xnumel"]
            lines += self._decompose(k.xs, k.R, "xindex")
        else:
            lines.append("xindex = tl.program_id(0)")
            lines += self._decompose(k.xs, k.R, "xindex")
        self.h.lines = lines
        for level, bufs in k.phases:
            if level == "outer":
                self.h.lines = lines
                for b in bufs:
                    v = self.h.v(b.fn(self.h, k.xs, ()))
                    self.store(b, k.store_index(b), v, lines)
            else:
                lines += self.loop_phase(bufs)
        return lines

    def loop_phase(self, bufs) -> list:
        k = self.kernel
        pre, inner, post = [], [], []
        reds = [b for b in bufs if b.is_reduction]
        for b in reds:
            if b.rtype not in _FINAL and b.rtype not in ("any", "all"):
                from .lowering import Fallback
                raise Fallback(f"{b.rtype} reductions in Triton kernels")
            pre.append(f"acc_{b.name} = tl.full([RBLOCK], {self._init(b)}, "
                       f"{self.TL[self._acc(b)]})")
        self.scopes.append({})
        self.block_vars, self.mask = set(k.rs), "rmask"
        inner += ["rindex = roff + tl.arange(0, RBLOCK)", "rmask = rindex < rnumel"]
        inner += self._decompose(k.rs, k.K, "rindex")
        self.h.lines = inner
        for b in bufs:
            if b.is_reduction:
                v = self.h.v(b.fn(self.h, k.xs, k.rs))
                a, d = f"acc_{b.name}", self._acc(b)
                vc = v.code if v.dtype is d else f"{v.code}.to({self.TL[d]})"
                inner.append(f"{a} = tl.where(rmask, {self._combine(b.rtype, a, vc)}, {a})")
            else:
                v = self.h.v(b.fn(self.h, k.xs + k.rs, ()))
                self.store(b, k.store_index(b), v, inner)
        self.scopes.pop()
        self.block_vars, self.mask = set(), None
        self.h.lines = post
        for b in reds:
            a = f"acc_{b.name}"
            if b.rtype in ("any", "all"):
                fin = "tl.max" if b.rtype == "any" else "tl.min"
                post.append(f"red_{b.name} = {fin}({a}.to(tl.int32), 0) != 0")
            else:
                post.append(f"red_{b.name} = {_FINAL[b.rtype]}({a}, 0)")
            acc = self.Var(f"red_{b.name}", self._acc(b), False)
            v = self.h.v(b.post(self.h, acc)) if b.post is not None else acc
            if v.dtype is not kdtype(b.dtype):
                v = self.h.cast(v, kdtype(b.dtype))
            self.store(b, k.store_index(b), v, post)
        loop = ["for roff in range(0, rnumel, RBLOCK):"] + ["    " + x for x in inner]
        return pre + loop + post

    def _acc(self, b):
        if b.rtype in ("any", "all"):
            return D.bool
        d = b.acc_dtype
        return D.float32 if d is D.float64 and kdtype(b.dtype) is not D.float64 else d

    def _init(self, b) -> str:
        d = self._acc(b)
        if b.rtype == "sum":
            return "0"
        if b.rtype in ("any", "all"):
            return "False" if b.rtype == "any" else "True"
        if d._cat == 2:
            return 'float("-inf")' if b.rtype == "max" else 'float("inf")'
        import numpy as np
        info = np.iinfo(d.np)
        return str(info.min if b.rtype == "max" else info.max)

    @staticmethod
    def _combine(rtype, a, v) -> str:
        if rtype == "sum":
            return f"{a} + {v}"
        if rtype == "max":
            return f"tl.maximum({a}, {v})"
        if rtype == "min":
            return f"tl.minimum({a}, {v})"
        if rtype == "any":
            return f"{a} | ({v} != 0)"
        return f"{a} & ({v} != 0)"

    def source(self, name: str) -> str:
        k = self.kernel
        body = self.body()
        text = "\n".join(body)
        syms = [s.name for s in self.sv.ordered() if s.name in text]
        params = [f"p{i}" for i in range(len(self.args))] + syms + ["xnumel", "rnumel"]
        origins = []
        for b in k.nodes:
            origins += [o for o in b.origins if o not in origins]
        head = ["import triton", "import triton.language as tl",
                "from triton.language.extra import libdevice", "", "",
                f"# {name}: fuses {', '.join(origins) or '-'}",
                f"#   buffers {', '.join(b.name for b in k.nodes)}; "
                f"ranges {list(k.R)} x {list(k.K)}",
                f"@triton.jit(do_not_specialize={syms + ['xnumel', 'rnumel']!r})",
                f"def {name}({', '.join(params)}, XBLOCK: tl.constexpr, "
                f"RBLOCK: tl.constexpr):"]
        return "\n".join(head + ["    " + x for x in body]) + "\n"


def generate(kernel, stored: set, name: str, sizevars):
    """(source, argument buffers, size symbols, in-kernel buffers read back from memory)."""
    tk = TritonKernel(kernel, stored, sizevars)
    src = tk.source(name)
    syms = [s for s in sizevars.ordered() if s.name in src.split("def ", 1)[1].split(")")[0]]
    return src, tk.args, syms, tk.mem_reads
