"""Triton code generation for CUDA tensors: the same scheduled kernels as the C++ path, values
emitted by ember-devices' Triton ops handler (`ember.cuda.kernels.triton_handler.TritonOps`,
the one behind the eager Triton kernels), launched through the device's launcher (Triton's
interpreter on the fake device: EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1).

Pointwise kernels: one program per XBLOCK elements of the flattened outer ranges. Kernels with
reductions: one program per outer index; each loop phase walks the flattened inner ranges in
RBLOCK chunks (masked loads, block accumulators reduced with tl.sum / tl.max at the end).
GEMM templates (gemm.py): one program per output tile, the K loop of tl.dot, then the
kernel's pointwise epilogue on the accumulator (`template_body`).
"""
from __future__ import annotations

import os

import sympy

from ember import _dtype as D

from .ir import kdtype
from .sizevars import pyexpr

__all__ = ["generate", "XBLOCK", "RBLOCK", "XBLOCK_COLUMN", "RBLOCK_COLUMN"]

XBLOCK = 256
RBLOCK = 64
XBLOCK_COLUMN, RBLOCK_COLUMN = 64, 64   # column tiles (outer reductions): [RBLOCK, XBLOCK]
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

        def cast(self, v, d):
            # a float64 accumulation type inside a float32-accumulating reduction (see
            # TritonKernel._acc): the term is converted to float32 directly
            if d is D.float64 and self.k.f32_acc:
                d = D.float32
            return super().cast(v, d)

        def index_expr(self, e):
            if self.k._block(e):   # over the block's index vars: a block of int64
                return self.emit(f"({pyexpr(e)}).to(tl.int64)", D.int64, True)
            return self.emit(f"tl.full([], {pyexpr(e)}, tl.int64)", D.int64, False)

        def philox(self, kind, seed, ctr, flat):
            """A Philox draw for counter ctr + flat (rng.py): uniform [0, 1) from the top 24
            bits (never 1.0, as eager float32), or a normal."""
            blk = self.k._block(flat)
            off = self.emit(f"{ctr.code} + ({pyexpr(flat)})", D.int64, blk)
            if kind == "normal":
                return self.emit(f"tl.randn({seed.code}, {off.code})", D.float32, blk)
            r = self.emit(f"tl.randint({seed.code}, {off.code})", D.int64, blk)
            return self.emit(f"({r.code} >> 8).to(tl.float32) * 5.960464477539063e-08",
                             D.float32, blk)

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
        self.f32_acc = False   # while emitting a reduction's term that accumulates in float32
        self.full = None          # a template's tile shape (source) for broadcast stores
        # column tiles: a kernel with an outer reduction (kept dims innermost in memory) runs
        # XBLOCK outputs a program over [RBLOCK, XBLOCK] tiles (`column_body`)
        self.column = bool(kernel.K) and any(getattr(b, "column", False) for b in kernel.nodes
                                             if b.is_reduction)
        self.h = ops(self)

    def ptr(self, buf) -> str:
        if buf.name not in self.arg_of:
            self.arg_of[buf.name] = f"p{len(self.args)}"
            self.args.append(buf)
        return self.arg_of[buf.name]

    def _block(self, index) -> bool:
        return any(s in self.block_vars for s in sympy.sympify(index).free_symbols)

    def load(self, buf, index):
        pm = getattr(self.h, "mask", None)   # a masked load (lowering_extra's cat pieces)
        key = (buf.name, index) if pm is None else (buf.name, index, pm.code)
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        if buf.name in self.kernel.where:
            self.mem_reads.add(buf.name)
        block = self._block(index) or (pm is not None and pm.block)
        at = pyexpr(index)
        masks = [m for m in [self._mask_for(index)] if m] if block and self.mask else []
        if pm is not None:   # out of the piece: offset 0 (in bounds), the value unused
            at = f"tl.where({pm.code}, {at}, 0)"
            masks += [pm.code] if block else []
        mask = f", mask={' & '.join(masks)}, other=0" if masks else ""
        code = f"tl.load({self.ptr(buf)} + ({at}){mask})"
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
            shape = self.full or f"[{'XBLOCK' if not self.kernel.K else 'RBLOCK'}]"
            if self.column:
                shape = "[RBLOCK, XBLOCK]" if self._uses(index, self.kernel.rs) else \
                    "[1, XBLOCK]"
            code = f"tl.full({shape}, {code}, {self.TL[buf.dtype]})"
        m = self._mask_for(index) if block and self.mask else ""
        mask = f", mask={m}" if m else ""
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

    @staticmethod
    def _uses(index, vs) -> bool:
        return bool(sympy.sympify(index).free_symbols & set(vs))

    def _mask_for(self, index) -> str:
        """The mask of a block access at index: in column tiles, of the dims it spans only (a
        mask may not be wider than the pointer block it guards)."""
        if not self.column:
            return self.mask
        parts = [m for m, vs in (("rmask", self.kernel.rs), ("xmask", self.kernel.xs))
                 if m in self.mask and self._uses(index, vs)]
        return " & ".join(parts)   # (empty: a block only through a piece mask)

    def body(self) -> list:
        k = self.kernel
        if k.template is not None:
            return self.template_body()
        if self.column:
            return self.column_body()
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

    def column_body(self) -> list:
        """An outer reduction (`sum(dim=0)` of a (rows, C) tensor: its terms C apart): XBLOCK
        outputs a program, each loop step one [RBLOCK, XBLOCK] tile (x along dim 1, so a tile
        row is XBLOCK neighbouring elements: coalesced), tl.sum over dim 0 after the loop."""
        k = self.kernel
        lines = ["xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]",
                 "xmask = xindex < xnumel"]
        lines += self._decompose(k.xs, k.R, "xindex")
        for level, bufs in k.phases:
            self.block_vars, self.mask, self.full = set(k.xs), "xmask", "[1, XBLOCK]"
            if level == "outer":
                self.h.lines = lines
                for b in bufs:
                    v = self.h.v(b.fn(self.h, k.xs, ()))
                    self.store(b, k.store_index(b), v, lines)
            else:
                lines += self.loop_phase(bufs)
        return lines

    def template_body(self) -> list:
        """A GEMM tile (gemm.py's TemplateBuffer) then its epilogue on the accumulator: the
        output's index vars are 2-d blocks (rows from rm[:, None], the column rn[None, :]),
        so the pointwise buffers of the kernel are emitted as in any kernel."""
        k, tb = self.kernel, self.kernel.template
        sp, (bm, bn, bk, _, _) = tb.spec, tb.config
        xs, nb = k.xs, sp.nb
        m, n, kk = pyexpr(sp.M), pyexpr(sp.N), pyexpr(sp.K)
        lines = ["pid = tl.program_id(0)",
                 f"grid_m = ({m} + {bm - 1}) // {bm}", f"grid_n = ({n} + {bn - 1}) // {bn}",
                 "width = 8 * grid_n", "group = pid // width",
                 "gsize = tl.minimum(grid_m - group * 8, 8)",
                 "pid_m = group * 8 + (pid % width) % gsize", "pid_n = (pid % width) // gsize",
                 f"rm = pid_m * {bm} + tl.arange(0, {bm})",
                 f"rn = pid_n * {bn} + tl.arange(0, {bn})"]
        if nb:
            lines.append(f"{xs[0]} = tl.program_id(1)")
        lines += self._decompose(xs[nb:-1], sp.rows, "rm[:, None]")
        lines += [f"{xs[-1]} = rn[None, :]", f"xmask = (rm[:, None] < {m}) & (rn[None, :] < {n})"]
        a_row = sp.a.offset + sum((x * st for x, st in zip(xs[:-1], sp.a_strides)), 0)
        b_col = sp.b.offset + xs[-1] * sp.b_n + (xs[0] * sp.b_batch if nb else 0)
        pa, pb = self.ptr(sp.a.buf), self.ptr(sp.b.buf)
        f32 = self.h.interpret or tb.dtype is D.float32   # (the interpreter's bf16 is wrong)
        to = ".to(tl.float32)" if f32 else ""
        # float32: TF32 tensor cores unless the matmul precision is "highest" (as cuBLAS)
        prec = ("" if not f32 else ', input_precision="ieee"' if self.h.interpret or
                _precision() == "highest" else ', input_precision="tf32"')
        lines += [f"acc = tl.zeros(({bm}, {bn}), dtype=tl.float32)",
                  f"for k0 in range(0, {kk}, {bk}):",
                  f"    rk = k0 + tl.arange(0, {bk})",
                  f"    a = tl.load({pa} + ({pyexpr(sympy.expand(a_row))} + rk[None, :] * "
                  f"({pyexpr(sp.a_k)})), mask=(rm[:, None] < {m}) & (rk[None, :] < {kk}), "
                  f"other=0){to}",
                  f"    b = tl.load({pb} + ({pyexpr(sympy.expand(b_col))} + rk[:, None] * "
                  f"({pyexpr(sp.b_k)})), mask=(rk[:, None] < {kk}) & (rn[None, :] < {n}), "
                  f"other=0){to}",
                  f"    acc += tl.dot(a, b{prec})"]
        self.block_vars, self.mask, self.full = set(xs), "xmask", f"[{bm}, {bn}]"
        self.h.lines = lines
        acc = self.Var("acc", D.float32, True)
        for _, bufs in k.phases:
            for b in bufs:
                v = acc if b is tb else self.h.v(b.fn(self.h, xs, ()))
                self.store(b, k.store_index(b), v, lines)
        return lines

    def loop_phase(self, bufs) -> list:
        k = self.kernel
        pre, inner, post = [], [], []
        reds = [b for b in bufs if b.is_reduction]
        for b in reds:
            if b.rtype not in _FINAL and b.rtype not in ("any", "all"):
                from .lowering import Fallback
                raise Fallback(f"{b.rtype} reductions in Triton kernels")
            tile = "[RBLOCK, XBLOCK]" if self.column else "[RBLOCK]"
            pre.append(f"acc_{b.name} = tl.full({tile}, {self._init(b)}, "
                       f"{self.TL[self._acc(b)]})")
        self.scopes.append({})
        col = self.column
        self.block_vars, self.mask = set(k.rs) | (set(k.xs) if col else set()), \
            "rmask & xmask" if col else "rmask"
        inner += [f"rindex = roff + tl.arange(0, RBLOCK){'[:, None]' if col else ''}",
                  "rmask = rindex < rnumel"]
        inner += self._decompose(k.rs, k.K, "rindex")
        self.h.lines = inner
        for b in bufs:
            if b.is_reduction:
                self.f32_acc = self._acc(b) is D.float32 and b.acc_dtype is D.float64
                v = self.h.v(b.fn(self.h, k.xs, k.rs))
                self.f32_acc = False
                a, d = f"acc_{b.name}", self._acc(b)
                vc = v.code if v.dtype is d else f"{v.code}.to({self.TL[d]})"
                inner.append(f"{a} = tl.where({self.mask}, {self._combine(b.rtype, a, vc)}, "
                             f"{a})")
            else:
                v = self.h.v(b.fn(self.h, k.xs + k.rs, ()))
                self.store(b, k.store_index(b), v, inner)
        self.scopes.pop()
        self.block_vars, self.mask = (set(k.xs), "xmask") if col else (set(), None)
        self.h.lines = post
        keep = "[None, :]" if col else ""   # a column tile's results: one per lane, [1, XBLOCK]
        for b in reds:
            a = f"acc_{b.name}"
            if b.rtype in ("any", "all"):
                fin = "tl.max" if b.rtype == "any" else "tl.min"
                post.append(f"red_{b.name} = ({fin}({a}.to(tl.int32), 0) != 0){keep}")
            else:
                post.append(f"red_{b.name} = {_FINAL[b.rtype]}({a}, 0){keep}")
            acc = self.Var(f"red_{b.name}", self._acc(b), col)
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

    def source(self, name: str, static: bool = False) -> str:
        """The kernel's text. Sizes are arguments (one compile serves every size), or with
        `static` constexprs after XBLOCK and RBLOCK (compiled per size: index math divides by
        constants, not by runtime values; a static graph's sizes never change)."""
        k = self.kernel
        body = self.body()
        text = "\n".join(body)
        syms = [s.name for s in self.sv.ordered() if s.name in text]
        static = static and k.template is None
        params = [f"p{i}" for i in range(len(self.args))] + ([] if static else syms) + \
            ["xnumel", "rnumel"]
        consts = "".join(f", {y}: tl.constexpr" for y in syms) if static else ""
        origins = []
        for b in k.nodes:
            origins += [o for o in b.origins if o not in origins]
        head = ["import triton", "import triton.language as tl",
                "from triton.language.extra import libdevice", "", "",
                f"# {name}: fuses {', '.join(origins) or '-'}",
                f"#   buffers {', '.join(b.name for b in k.nodes)}; "
                f"ranges {list(k.R)} x {list(k.K)}",
                f"@triton.jit(do_not_specialize="
                f"{([] if static else syms) + ['xnumel', 'rnumel']!r})",
                f"def {name}({', '.join(params)}, XBLOCK: tl.constexpr, "
                f"RBLOCK: tl.constexpr{consts}):"]
        return "\n".join(head + ["    " + x for x in body]) + "\n"


def _precision() -> str:
    import ember
    return ember.get_float32_matmul_precision()


def generate(kernel, stored: set, name: str, sizevars, static: bool = False):
    """(source, argument buffers, size symbols, in-kernel buffers read back from memory);
    `static`: sizes as constexprs (`TritonKernel.source`)."""
    tk = TritonKernel(kernel, stored, sizevars)
    src = tk.source(name, static)
    kernel.static = static and kernel.template is None
    kernel.column = tk.column   # (the launch: a grid of XBLOCK_COLUMN outputs a program)
    syms = [s for s in sizevars.ordered() if s.name in src.split("def ", 1)[1].split(")")[0]]
    return src, tk.args, syms, tk.mem_reads
