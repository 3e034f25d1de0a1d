"""Triton code generation for CUDA tensors: the same scheduled kernels as the C++ path, values
emitted by ember-devices' Triton ops handler (`ember.cuda.kernels.triton_handler.TritonOps`,
the one behind the eager Triton kernels), launched through the device's launcher (Triton's
interpreter on the fake device: EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1).

Pointwise kernels: one program per XBLOCK elements of the flattened outer ranges. Kernels with
reductions whose rows fit a block (a fixed rnumel <= PERSIST_MAX): persistent, XBLOCK rows a
program, each row loaded once into registers and every phase computed from there. Longer rows:
one program per outer index; each loop phase walks the flattened inner ranges in RBLOCK chunks
(masked loads, block accumulators reduced with tl.sum / tl.max at the end).
GEMM templates (gemm.py): one program per output tile, the K loop of tl.dot, then the
kernel's pointwise epilogue on the accumulator (`template_body`).
"""
from __future__ import annotations

import os

import sympy

from ember import _dtype as D

from .ir import kdtype
from .sizevars import pyexpr

__all__ = ["generate", "launch_config", "XBLOCK", "RBLOCK", "XBLOCK_COLUMN", "RBLOCK_COLUMN"]

XBLOCK = 256
RBLOCK = 64
XBLOCK_COLUMN, RBLOCK_COLUMN = 64, 64   # column tiles (outer reductions): [RBLOCK, XBLOCK]
PERSIST_MAX = 4096    # longest row a persistent reduction holds in registers
PERSIST_TILE = 4096   # elements of a persistent reduction's [XBLOCK, RBLOCK] tile at most
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

    def __init__(self, kernel, stored: set, sizevars, persistent: bool = False):
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
        self.flat = None          # a pointwise kernel's xindex as an index over its ranges
        # column tiles: a kernel with an outer reduction (kept dims innermost in memory) runs
        # XBLOCK outputs a program over [RBLOCK, XBLOCK] tiles (`column_body`)
        self.column = bool(kernel.K) and any(getattr(b, "column", False) for b in kernel.nodes
                                             if b.is_reduction)
        # persistent: rows that fit one block, loaded once ([XBLOCK, RBLOCK] tiles, no loop)
        self.persistent = persistent and bool(kernel.K) and not self.column and \
            kernel.template is None
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
        at = self._at(index)
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
            if self.persistent:
                shape = "[XBLOCK, RBLOCK]" if self._uses(index, self.kernel.rs) else \
                    "[XBLOCK, 1]"
            if self.column:
                shape = "[RBLOCK, XBLOCK]" if self._uses(index, self.kernel.rs) else \
                    "[1, XBLOCK]"
            code = f"tl.full({shape}, {code}, {self.TL[buf.dtype]})"
        m = self._mask_for(index) if block and self.mask else ""
        at = self._at(index)
        if self.persistent and v.block and not block:   # (one row: a full reduction's result)
            at, m = f"{at} + tl.zeros([XBLOCK, RBLOCK], tl.int32)", "xmask & rmask"
        mask = f", mask={m}" if m else ""
        out.append(f"tl.store({self.ptr(buf)} + ({at}), {code}{mask})")

    def _at(self, index) -> str:
        """An access's offset: `xindex` itself where a pointwise kernel reads or writes its
        elements in order (Triton then sees the contiguous run and vectorizes it; the div/mod
        decomposition of xindex hid that), else the index expression."""
        if self.flat is not None and self._block(index) and \
                sympy.expand(index - self.flat) == 0:   # (a scalar's offset 0 stays 0)
            return "xindex"
        return pyexpr(index)

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
        if not self.column and not self.persistent:
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
        if self.persistent:
            return self.persistent_body()
        lines: list = []
        if not k.K:  # pointwise: XBLOCK elements of the flattened outer ranges
            self.block_vars = set(k.xs)
            self.mask = "xmask"
            stride, flat = sympy.Integer(1), sympy.Integer(0)
            for v, n in zip(reversed(k.xs), reversed(k.R)):
                flat, stride = flat + v * stride, stride * n
            if os.environ.get("EMBER_INDUCTOR_FLAT_INDEX", "1") != "0":
                self.flat = sympy.expand(flat)
            lines += ["xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)",
                      "xmask = xindex < xnumel"]
            lines += self._decompose(k.xs, k.R, "xindex")
        else:
            lines.append("xindex = tl.program_id(0)")
            lines += self._decompose(k.xs, k.R, "xindex")
        self.h.lines = lines
        phases, i = k.phases, 0
        while i < len(phases):
            level, bufs = phases[i]
            if level == "outer":
                self.h.lines = lines
                for b in bufs:
                    v = self.h.v(b.fn(self.h, k.xs, ()))
                    self.store(b, k.store_index(b), v, lines)
            else:
                online = self.online_phase(bufs, phases[i + 1][1]) \
                    if i + 1 < len(phases) and phases[i + 1][0] != "outer" else None
                lines += online or self.loop_phase(bufs)
                i += 1 if online else 0
            i += 1
        return lines

    def online_phase(self, bufs, nxt):
        """A max phase then a sum of exp(t - max) over the same t (a long row's softmax, log
        softmax, cross-entropy): one loop instead of two, each lane's sum rescaled when its
        running max grows (online softmax); the lanes combined after the loop. None where the
        two phases are not of that form (the looped phases are emitted instead)."""
        if len(bufs) != 1 or len(nxt) != 1 or os.environ.get("EMBER_INDUCTOR_ONLINE") == "0":
            return None
        b1, b2 = bufs[0], nxt[0]
        if not (b1.is_reduction and b2.is_reduction and b1.rtype == "max" and
                b2.rtype == "sum" and b1.post is None and self._acc(b1) is D.float32 and
                self._acc(b2) is D.float32):
            return None
        k = self.kernel
        i1, i2 = self._rid(b1), self._rid(b2)
        m, acc, ms = f"m{i1}", f"acc{i2}", f"msafe{i1}"
        self.scopes.append({})
        self.block_vars, self.mask = set(k.rs), "rmask"
        inner = ["rindex = roff + tl.arange(0, RBLOCK)", "rmask = rindex < rnumel"]
        inner += self._decompose(k.rs, k.K, "rindex")
        self.h.lines = inner
        self.f32_acc = b1.acc_dtype is D.float64
        v1 = self.h.v(b1.fn(self.h, k.xs, k.rs))
        self.f32_acc = False
        n1 = len(inner)
        inner += [f"{m}_new = tl.where(rmask, tl.maximum({m}, {v1.code}), {m})",
                  f"{ms} = tl.where({m}_new == float(\"-inf\"), 0.0, {m}_new)"]
        # b2's term reads b1's value as the lane's running max (`ms`, finite)
        self.scopes[-1][(b1.name, k.store_index(b1))] = self.Var(ms, D.float32, True)
        self.f32_acc = b2.acc_dtype is D.float64   # (float32 terms: `_acc`)
        v2 = self.h.v(b2.fn(self.h, k.xs, k.rs))
        self.f32_acc = False
        self.scopes.pop()
        if v1.dtype is not D.float32 or v2.dtype is not D.float32 or \
                not _exp_of_shift(inner[:n1], inner[n1 + 2:], v1.code, v2.code, ms):
            return None
        inner += [f"{acc} = tl.where(rmask, {acc} * tl.exp({m} - {ms}) + {v2.code}, {acc})",
                  f"{m} = {m}_new"]
        pre = [f"{m} = tl.full([RBLOCK], float(\"-inf\"), tl.float32)",
               f"{acc} = tl.full([RBLOCK], 0, tl.float32)"]
        post = [f"red{i1} = tl.max({m}, 0)",
                f"{ms}_all = tl.where(red{i1} == float(\"-inf\"), 0.0, red{i1})",
                f"red{i2} = tl.sum({acc} * tl.exp({m} - {ms}_all), 0)"]
        self.block_vars, self.mask = set(), None
        self.h.lines = post
        for b, i in ((b1, i1), (b2, i2)):
            v = self.Var(f"red{i}", D.float32, False)
            v = self.h.v(b.post(self.h, v)) if b.post is not None else v
            if v.dtype is not kdtype(b.dtype):
                v = self.h.cast(v, kdtype(b.dtype))
            self.store(b, k.store_index(b), v, post)
        loop = ["for roff in range(0, rnumel, RBLOCK):"] + ["    " + x for x in inner]
        return pre + loop + post

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

    def persistent_body(self) -> list:
        """Rows that fit one block (RBLOCK >= rnumel): XBLOCK rows a program, each row loaded
        once into a [XBLOCK, RBLOCK] tile; every phase (a softmax's max, sum and normalize) works
        on the values in registers, reducing over dim 1. One scope for the kernel: a load of
        the same buffer at the same index is emitted once."""
        k = self.kernel
        lines = ["xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
                 "xmask = xindex < xnumel"]
        lines += self._decompose(k.xs, k.R, "xindex")
        lines += ["rindex = tl.arange(0, RBLOCK)[None, :]", "rmask = rindex < rnumel"]
        lines += self._decompose(k.rs, k.K, "rindex")
        self.h.lines = lines
        for level, bufs in k.phases:
            if level == "outer":
                self.block_vars, self.mask = set(k.xs), "xmask"
                for b in bufs:
                    v = self.h.v(b.fn(self.h, k.xs, ()))
                    self.store(b, k.store_index(b), v, lines)
                continue
            for b in bufs:
                self.block_vars, self.mask = set(k.xs) | set(k.rs), "xmask & rmask"
                if not b.is_reduction:
                    v = self.h.v(b.fn(self.h, k.xs + k.rs, ()))
                    self.store(b, k.store_index(b), v, lines)
                    continue
                self._check_rtype(b)
                self.f32_acc = self._acc(b) is D.float32 and b.acc_dtype is D.float64
                v = self.h.v(b.fn(self.h, k.xs, k.rs))
                self.f32_acc = False
                d = self._acc(b)
                vc = v.code if v.dtype is d else f"{v.code}.to({self.TL[d]})"
                red = f"red{self._rid(b)}"
                # masked lanes hold the reduction's identity: the tile is full-shape
                if b.rtype in ("any", "all"):
                    fin = "tl.max" if b.rtype == "any" else "tl.min"
                    tile = f"tl.where(xmask & rmask, ({v.code} != 0), {self._init(b)})"
                    lines.append(f"{red} = ({fin}({tile}.to(tl.int32), 1) != 0)[:, None]")
                else:
                    tile = f"tl.where(xmask & rmask, {vc}, {self._init(b)})"
                    lines.append(f"{red} = {_FINAL[b.rtype]}({tile}, 1)[:, None]")
                self.block_vars, self.mask = set(k.xs), "xmask"
                acc = self.Var(red, d, True)
                out = self.h.v(b.post(self.h, acc)) if b.post is not None else acc
                if out.dtype is not kdtype(b.dtype):
                    out = self.h.cast(out, kdtype(b.dtype))
                self.store(b, k.store_index(b), out, lines)
        return lines

    @staticmethod
    def _check_rtype(b):
        if b.rtype not in _FINAL and b.rtype not in ("any", "all"):
            from .lowering import Fallback
            raise Fallback(f"{b.rtype} reductions in Triton kernels")

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
            self._check_rtype(b)
            tile = "[RBLOCK, XBLOCK]" if self.column else "[RBLOCK]"
            pre.append(f"acc{self._rid(b)} = tl.full({tile}, {self._init(b)}, "
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
                a, d = f"acc{self._rid(b)}", self._acc(b)
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
            a = f"acc{self._rid(b)}"
            if b.rtype in ("any", "all"):
                fin = "tl.max" if b.rtype == "any" else "tl.min"
                post.append(f"red{self._rid(b)} = ({fin}({a}.to(tl.int32), 0) != 0){keep}")
            else:
                post.append(f"red{self._rid(b)} = {_FINAL[b.rtype]}({a}, 0){keep}")
            acc = self.Var(f"red{self._rid(b)}", self._acc(b), col)
            v = self.h.v(b.post(self.h, acc)) if b.post is not None else acc
            if v.dtype is not kdtype(b.dtype):
                v = self.h.cast(v, kdtype(b.dtype))
            self.store(b, k.store_index(b), v, post)
        loop = ["for roff in range(0, rnumel, RBLOCK):"] + ["    " + x for x in inner]
        return pre + loop + post

    def _rid(self, b) -> int:
        """A reduction's number in this kernel: its variables' names (acc0, red0) never hold
        buffer names, so equal kernels of different layers have equal text (one compile)."""
        return self.kernel.nodes.index(b)

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
        cn = static and const_numel()   # (xnumel, rnumel constexprs too: see const_numel)
        params = [f"p{i}" for i in range(len(self.args))] + ([] if static else syms) + \
            ([] if cn else ["xnumel", "rnumel"])
        consts = "".join(f", {y}: tl.constexpr" for y in syms) if static else ""
        consts += ", xnumel: tl.constexpr, rnumel: tl.constexpr" if cn else ""
        origins = []
        for b in k.nodes:
            origins += [o for o in b.origins if o not in origins]
        head = ["import triton", "import triton.language as tl",
                "from triton.language.extra import libdevice", "", "",
                f"# {name}: fuses {', '.join(origins) or '-'}",
                f"#   buffers {', '.join(b.name for b in k.nodes)}; "
                f"ranges {list(k.R)} x {list(k.K)}",
                f"@triton.jit(do_not_specialize="
                f"{([] if static else syms) + ([] if cn else ['xnumel', 'rnumel'])!r})",
                f"def {name}({', '.join(params)}, XBLOCK: tl.constexpr, "
                f"RBLOCK: tl.constexpr{consts}):"]
        return "\n".join(head + ["    " + x for x in body]) + "\n"


def const_numel() -> bool:
    """Whether a static kernel (sizes as constexprs) takes its element and row counts as
    constexprs too: its masks (`xindex < xnumel`) are then known to be constant over aligned
    runs of 16 and more, so Triton vectorizes the masked loads and stores (a runtime xnumel,
    not specialized, left every masked access one element wide). EMBER_INDUCTOR_CONST_NUMEL=0:
    runtime counts."""
    return os.environ.get("EMBER_INDUCTOR_CONST_NUMEL", "1") != "0"


def _exp_of_shift(first, second, t1, t2, shift) -> bool:
    """Whether value t2 (defined by lines `second`) is exp(u - shift) with u the same
    expression as t1 (lines `first`), shift used nowhere else: then a lane's sum of t2 rescales
    by exp(old shift - new shift) when the shift grows (`online_phase`)."""
    import re
    defs = {}
    for line in first + second:
        name, _, expr = line.partition(" = ")
        defs[name] = expr
    if sum(len(re.findall(rf"\b{shift}\b", x.partition(" = ")[2])) for x in second) != 1:
        return False

    def follow(v):
        while defs.get(v, "").isidentifier() and defs[v] in defs:
            v = defs[v]
        return v

    def canon(v, depth=0):
        if depth > 200 or v not in defs:
            return v
        return re.sub(r"\bt\d+\b", lambda mt: "(" + canon(mt.group(0), depth + 1) + ")",
                      defs[v])

    e = re.fullmatch(r"(?:libdevice|tl)\.exp\((t\d+)\)", defs.get(follow(t2), ""))
    if e is None:
        return False
    d = re.fullmatch(rf"\((t\d+) - {shift}\)", defs.get(follow(e.group(1)), ""))
    return d is not None and canon(follow(d.group(1))) == canon(follow(t1))


def _precision() -> str:
    import ember
    return ember.get_float32_matmul_precision()


def _flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    return default if v is None else v == "1"


def persistent_rows(kernel, sizevars, fixed: bool, const: bool = False) -> bool:
    """Whether a reduction kernel's rows fit one block (`persistent_body`): sizes fixed for the
    wrapper (not a dynamic graph: its rows may grow past the block) and rnumel <= PERSIST_MAX.
    On by default where the counts are constexprs (`const`, see const_numel): on an H100 the
    GPT-2 step's softmax forward and backward took 2.45 + 2.34 ms looped, 2.33 + 1.76 ms
    persistent; with runtime counts (unvectorized masked loads) persistent was the slower
    (10.6 against 8.9 ms, session 7). EMBER_INDUCTOR_PERSISTENT=1 / 0 forces it."""
    if not fixed or not kernel.K or kernel.template is not None:
        return False
    if not _flag("EMBER_INDUCTOR_PERSISTENT", const):
        return False
    return 2 <= sizevars.hint(sympy.Mul(*kernel.K)) <= PERSIST_MAX


def launch_config(kind: str, xnumel: int, rnumel: int = 1, const: bool = False):
    """(XBLOCK, RBLOCK, num_warps) of a pointwise or persistent-reduction kernel. Pointwise:
    256 elements a program; 1024 on tensors of 2**18 elements or more where the counts are
    constexprs (`const`: loads vectorized, 8 elements a thread; the GPT-2 step's GPU time on an
    H100 31.2 -> 29.7 ms; with runtime counts 1024 was 1.2-2.9x slower, session 7).
    EMBER_INDUCTOR_XBLOCK_BIG=1 / 0 forces it.
    Persistent: RBLOCK the row's power of two, as many rows as keep the tile at PERSIST_TILE
    elements (fewer where the grid would not fill the GPU), warps by the tile's size."""
    if kind == "pointwise":
        big = _flag("EMBER_INDUCTOR_XBLOCK_BIG", const)
        return (1024 if big and xnumel >= 1 << 18 else XBLOCK), 1, 4
    rb = 16
    while rb < rnumel:
        rb *= 2
    xb = max(1, min(PERSIST_TILE // rb, 64))
    while xb > 1 and -(-xnumel // xb) < 1024:
        xb //= 2
    tile = xb * rb
    return xb, rb, 2 if tile <= 512 else 4 if tile <= 2048 else 8


def generate(kernel, stored: set, name: str, sizevars, static: bool = False,
             fixed: bool = False):
    """(source, argument buffers, size symbols, in-kernel buffers read back from memory);
    `static`: sizes as constexprs (`TritonKernel.source`); `fixed`: the wrapper's sizes never
    change (rows that fit a block are persistent reductions)."""
    const = static and kernel.template is None and const_numel()
    tk = TritonKernel(kernel, stored, sizevars, persistent_rows(kernel, sizevars, fixed, const))
    src = tk.source(name, static)
    kernel.static = static and kernel.template is None
    kernel.const_numel = kernel.static and const_numel()
    kernel.column = tk.column   # (the launch: a grid of XBLOCK_COLUMN outputs a program)
    kernel.persistent = tk.persistent
    syms = [s for s in sizevars.ordered() if s.name in src.split("def ", 1)[1].split(")")[0]]
    return src, tk.args, syms, tk.mem_reads
