"""C++ code generation for CPU kernels: one `extern "C"` function per fused kernel, loops over
the kernel's outer ranges (OpenMP across threads above a size threshold), each phase's inner
loop innermost (contiguous, so g++ vectorizes it), values emitted by core's C++ ops handler
(`_cppops.CppOps`, the same one that makes the eager C++ kernels). Compiled and cached on disk
by core's `_cpujit` / `_kcache`.
"""
from __future__ import annotations

import re

import sympy

from ember import _dtype as D
from ember._ops._cppops import CT, CppOps, Var
from ember._ops._cpujit import _STORE, _load, _store

from .ir import kdtype
from .sizevars import FloorDiv, ModIndex, _hi, _split, cexpr, floordiv, mod

__all__ = ["CppKernel", "generate"]

_INIT = {"sum": "0", "prod": "1", "any": "false", "all": "true"}


def _init(rtype, d) -> str:
    if rtype in _INIT:
        return _INIT[rtype]
    t = CT[d]
    if d._cat == 2:
        inf = f"std::numeric_limits<{t}>::infinity()"
        return f"-{inf}" if rtype == "max" else inf
    if d is D.bool:
        return "false" if rtype == "max" else "true"
    lim = "lowest" if rtype == "max" else "max"
    return f"std::numeric_limits<{t}>::{lim}()"


def combine(rtype, acc: str, v: str, d) -> str:
    """C++ for acc combined with v."""
    if rtype == "sum":
        return f"{acc} + {v}" if d is not D.bool else f"{acc} || {v}"
    if rtype == "prod":
        return f"{acc} * {v}"
    if rtype == "any":
        return f"{acc} || {v}"
    if rtype == "all":
        return f"{acc} && {v}"
    cmp = ">" if rtype == "max" else "<"
    if d._cat == 2:  # NaN propagates, as torch.amax
        return f"(({v} {cmp} {acc}) || ({v} != {v})) ? {v} : {acc}"
    return f"({v} {cmp} {acc}) ? {v} : {acc}"


class KernelOps(CppOps):
    """CppOps with loads from buffers (common subexpressions reused within a scope)."""

    def __init__(self, kernel):
        super().__init__()
        self.k = kernel
        self.var_ranges = kernel.kernel.var_ranges()
        self.f32_acc = False   # a narrowed sum's terms: float32 stays float32 (no widening)

    def emit(self, expr, dtype):
        k = self.k
        canon = _TEMP.sub(lambda m: k.canon.get(m.group(0), m.group(0)), expr)
        if k.phase is None:   # (canon: what exp asks of its argument)
            v = super().emit(expr, dtype)
            k.canon[v.code] = f"({canon})"
            return v
        k.seen.setdefault(canon, (set(), dtype))[0].add(k.phase)
        slot = k.reuse.get(canon)
        if slot is not None and slot[1] != k.phase:   # computed by an earlier loop phase
            v = super().emit(f"{slot[0]}[{k.rflat}]", dtype)
        else:
            v = super().emit(expr, dtype)
            if slot is not None:
                self.lines.append(f"{slot[0]}[{k.rflat}] = {v.code};")
        k.canon[v.code] = f"({canon})"
        return v

    def exp(self, x):
        """exp on libmvec's vector path: an argument below -87.3 sends the whole vector to its
        scalar fallback, so it is clamped and the result set to 0 (results under 1.7e-38 /
        3e-308 flush to 0; NaN propagates). Where a float32 argument can be -inf by
        construction (a masked softmax's masked_fill), GCC folds that clamp away (a select
        discards those lanes): there `em_expf` (EXPF below), a polynomial with no slow path
        (the causal softmax forward: 7.0 -> 3.0 ms in the GPT step). Not everywhere: beside
        erf (gelu's backward) the libmvec call is faster (2.8 vs 3.4 ms)."""
        x = self._float(x, "exp")
        if x.dtype not in (D.float32, D.float64):
            return super().exp(x)
        if x.dtype is D.float32 and "infinity()" in self.k.canon.get(x.code, x.code):
            self.k.uses_exp = True
            return self.emit(f"em_expf({x.code})", x.dtype)
        t, lo = CT[x.dtype], ("-87.0f" if x.dtype is D.float32 else "-708.0")
        c = self.emit(f"({x.code} >= {lo}) ? {x.code} : static_cast<{t}>({lo})", x.dtype)
        e = self.emit(f"std::exp({c.code})", x.dtype)
        e = self.emit(f"({x.code} < {lo}) ? static_cast<{t}>(0) : {e.code}", x.dtype)
        return self.emit(f"({x.code} != {x.code}) ? {x.code} : {e.code}", x.dtype)

    def philox(self, kind, seed, ctr, flat):
        """A counter-based draw (rng.py): Philox4x32-10 of counter ctr + flat under key seed;
        uniform [0, 1) from the top 24 bits of one word, normal by Box-Muller of two."""
        self.k.uses_rng = True
        fn = "em_rand_n" if kind == "normal" else "em_rand_u"
        return self.emit(f"{fn}(static_cast<uint64_t>({seed.code}), "
                         f"static_cast<uint64_t>({ctr.code} + ({self.k.cx(flat)})))", D.float32)

    def cast(self, v, d):
        if self.f32_acc and d is D.float64 and v.dtype is D.float32:
            return v
        return super().cast(v, d)

    def load(self, buf, index):
        return self.k.load(buf, index)

    def index_expr(self, e):
        return self.emit(self.k.cx(e), D.int64)

    def piece_index(self, e, length):
        return self.k.piece_index(e, length)


class CppKernel:
    """Generates one kernel's source. `stored` names the buffers it must write to memory.
    With `sv` (a static graph) sizes are baked in as constants and every index expression is
    simplified with them (`Specializer`); without, sizes are read from `KS` at run time."""

    def __init__(self, kernel, stored: set, sv=None):
        self.kernel, self.stored = kernel, stored
        self.spec = Specializer(sv, kernel.var_ranges()) if sv is not None else None
        self.uses_rng = False
        self.uses_exp = False
        self.pieces: dict = {}     # (index, length) -> symbol of a cat piece's index
        self.piece_of: dict = {}   # that symbol -> the index it stands for
        # values computed again by a later loop phase of a row (softmax's exp): the first
        # phase keeps them in a per-row array, the later ones read it (see `plan_reuse`)
        self.phase = None          # the loop phase being generated (None: outer level)
        self.canon: dict = {}      # temporary -> its expression over loads and accumulators
        self.seen: dict = {}       # expression -> loop phases computing it
        self.reuse: dict = {}      # expression -> (array name, first phase)
        self.rflat = ""
        self.args: list = []          # buffer objects in pointer order
        self.arg_of: dict = {}
        self.scopes: list = [{}]
        self.mem_reads: set = set()   # in-kernel buffers read back from memory
        self.h = KernelOps(self)

    # ---- buffers -----------------------------------------------------------------------------
    def ptr(self, buf) -> str:
        if buf.name not in self.arg_of:
            self.arg_of[buf.name] = f"p{len(self.args)}"
            self.args.append(buf)
        return self.arg_of[buf.name]

    def lookup(self, key):
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        return None

    def load(self, buf, index):
        key = (buf.name, index)
        v = self.lookup(key)
        if v is not None:
            return v
        mask = getattr(self.h, "mask", None)   # a masked load (lowering_extra's cat pieces)
        if mask is not None:
            key = (buf.name, index, mask.code)
            v = self.lookup(key)
            if v is not None:
                return v
        if buf.name in self.kernel.where:
            self.mem_reads.add(buf.name)
        kd = kdtype(buf.dtype)
        if buf.dtype is D.bool:   # widened and compared: a mask GCC vectorizes selects on
            code = (f"(static_cast<uint32_t>(reinterpret_cast<const uint8_t*>({self.ptr(buf)})"
                    f"[{self.cx(index)}]) != 0u)")
        else:
            code = _load(f"{self.ptr(buf)}[{self.cx(index)}]", buf.dtype, kd, False)
        if mask is not None:  # only the selected branch reads memory: out-of-range stays out
            code = f"({mask.code} ? {code} : static_cast<{CT[kd]}>(0))"
        v = self.h.emit(code, kd)
        self.scopes[-1][key] = v
        return v

    def store(self, buf, index, v: Var, out):
        key = (buf.name, index)
        self.scopes[-1][key] = v
        if buf.name in self.stored:
            out.append(f"{self.ptr(buf)}[{self.cx(index)}] = {_store(v, buf.dtype)};")

    def cx(self, e) -> str:
        """C++ of an index or size expression (constants folded in a static kernel)."""
        if self.spec is None:
            return cexpr(e)
        e = self.spec(e)
        return cexpr(e.xreplace(self.piece_of) if self.piece_of else e)

    def piece_index(self, e, length):
        """A symbol for the index e of a cat piece along its dim (lowering_extra's masked
        loads), in [0, length) where the load reads: a static kernel simplifies the piece's
        view indexing with that range (divisions of x - 256 by 128 fold as those of x do),
        then puts e back (the q/k/v split backward's copy: 3.4 -> 2.1 ms on (16, 128, 384))."""
        if self.spec is None or not isinstance(length, int):
            return e
        y = self.pieces.get((e, length))
        if y is None:
            y = sympy.Symbol(f"cp{len(self.pieces)}", integer=True, nonnegative=True)
            self.pieces[(e, length)], self.piece_of[y] = y, e
            self.spec.add_range(y, length)
            self.h.var_ranges[y] = sympy.Integer(length)   # views decompose with it too
        return y

    def rng(self, ranges) -> tuple:
        return tuple(self.spec(r) for r in ranges) if self.spec is not None else tuple(ranges)

    def emit_into(self, out: list):
        self.h.lines = out

    # ---- code --------------------------------------------------------------------------------
    def plan_reuse(self) -> list:
        """Generate once to see which expensive values (a transcendental call) several loop
        phases compute; returns the per-row array declarations ([] when nothing repeats)."""
        k = self.kernel
        K = self.rng(k.K)
        loops = sum(level == "loop" for level, _ in k.phases)
        if self.spec is None or not k.R or loops < 2 or \
                not all(getattr(r, "is_Integer", False) for r in K) or \
                int(sympy.Mul(*K)) > _NARROW_MAX:
            return []
        self.rflat = cexpr(sum((r * st for r, st in zip(k.rs, _strides(K))), sympy.Integer(0)))
        n, saved = self.h.n, (list(self.args), dict(self.arg_of), set(self.mem_reads))
        self.body()
        self.h.n = n
        self.args, self.arg_of, self.mem_reads = saved
        decl = []
        rep = [c for c, (ph, _) in self.seen.items() if len(ph) > 1 and _EXPENSIVE.search(c)]
        for canon in rep:   # the largest repeated values only (their parts come along)
            phases, d = self.seen[canon]
            if not any(canon != o and canon in o for o in rep):
                name = f"row{len(self.reuse)}"
                self.reuse[canon] = (name, min(phases))
                decl.append(f"{CT[d]} {name}[{int(sympy.Mul(*K))}];")
        self.canon.clear()
        self.seen.clear()
        self.scopes = [{}]
        return decl

    def body(self) -> list:
        k = self.kernel
        lines: list = []
        for i, (level, bufs) in enumerate(k.phases):
            self.phase = i if level == "loop" else None
            if level == "outer":
                self.emit_into(lines)
                for b in bufs:
                    v = self.h.v(b.fn(self.h, k.xs, ()))
                    self.store(b, k.store_index(b), v, lines)
            else:
                lines += self.loop_phase(bufs)
        self.phase = None
        return lines

    def column_body(self) -> list:
        """A kernel of sums over dims outer to its own (a bias gradient: columns of a matrix):
        one accumulator per output element, the reduced dims outermost and the output's
        innermost dim in the vector loop, so every load is contiguous."""
        k = self.kernel
        R, K = self.rng(k.R), self.rng(k.K)
        n = int(sympy.Mul(*R))
        st = _strides(R)
        flat = cexpr(sum((x * s for x, s in zip(k.xs, st)), sympy.Integer(0)))
        reds = k.phases[0][1]
        # float32 sums: float partials per column over the innermost reduced loop, added into
        # the double accumulators after it (full vector width, as the row sums' `narrow`)
        narrow = [b.name for b in reds if _narrowable(b, K)]
        lines, inner = [], []
        for b in reds:
            t = CT[b.acc_dtype]
            lines.append(f"{t} acc_{b.name}[{n}];")
            lines.append(f"for (int64_t i = 0; i < {n}; ++i) acc_{b.name}[i] = "
                         f"{_init(b.rtype, b.acc_dtype)};")
            if b.name in narrow:
                lines.append(f"float part_{b.name}[{n}];")
        self.scopes.append({})
        self.emit_into(inner)
        for b in reds:
            self.h.f32_acc = b.name in narrow
            v = self.h.v(b.fn(self.h, k.xs, k.rs))
            self.h.f32_acc = False
            a = f"part_{b.name}[{flat}]" if b.name in narrow else f"acc_{b.name}[{flat}]"
            d = D.float32 if b.name in narrow else b.acc_dtype
            inner.append(f"{a} = {combine(b.rtype, a, v.code, d)};")
        self.scopes.pop()
        if not narrow:
            lines += _nest(k.rs, K, _nest(k.xs, R, inner, simd=True))
        else:
            blk = [f"for (int64_t i = 0; i < {n}; ++i) part_{m}[i] = 0.0f;" for m in narrow]
            blk += _nest(k.rs[-1:], K[-1:], _nest(k.xs, R, inner, simd=True))
            for m in narrow:
                blk += ["#pragma omp simd", f"for (int64_t i = 0; i < {n}; ++i) "
                        f"acc_{m}[i] += static_cast<double>(part_{m}[i]);"]
            lines += _nest(k.rs[:-1], K[:-1], blk)
        post = []
        self.scopes.append({})
        self.emit_into(post)
        for b in reds:
            acc = Var(f"acc_{b.name}[{flat}]", b.acc_dtype)
            v = self.h.v(b.post(self.h, acc)) if b.post is not None else acc
            v = self.h.v(v)
            if v.dtype is not kdtype(b.dtype) or v.weak:
                v = self.h.cast(v, kdtype(b.dtype))
            self.store(b, k.store_index(b), v, post)
        for _, bufs in k.phases[1:]:
            for b in bufs:
                v = self.h.v(b.fn(self.h, k.xs, ()))
                self.store(b, k.store_index(b), v, post)
        self.scopes.pop()
        if len(R) == 1 and n >= _COLUMNS_SPLIT:
            return _split_columns(lines + _nest(k.xs, R, post), str(k.xs[0]), n)
        return lines + _nest(k.xs, R, post)

    def loop_phase(self, bufs) -> list:
        k = self.kernel
        pre, inner, post = [], [], []
        reds = [b for b in bufs if b.is_reduction]
        simple = all(_vectorizable(b) for b in reds)
        K = self.rng(k.K)
        # float32 sums of a row: float partials over the innermost loop (full vector width,
        # no conversions), added into the double accumulator once per inner loop
        narrow = {b.name for b in reds if k.R and simple and _narrowable(b, K)}
        for b in reds:
            pre.append(f"{CT[b.acc_dtype]} acc_{b.name} = {_init(b.rtype, b.acc_dtype)};")
            if simple and _nan_flag(b):
                pre.append(f"int nan_{b.name} = 0;")
        self.scopes.append({})
        self.emit_into(inner)
        for b in bufs:
            if b.is_reduction:
                self.h.f32_acc = b.name in narrow
                v = self.h.v(b.fn(self.h, k.xs, k.rs))
                self.h.f32_acc = False
                a = f"part_{b.name}" if b.name in narrow else f"acc_{b.name}"
                if simple and b.rtype in ("max", "min"):
                    # a plain max the vectorizer knows, NaNs tracked on the side
                    cmp = ">" if b.rtype == "max" else "<"
                    inner.append(f"{a} = ({v.code} {cmp} {a}) ? {v.code} : {a};")
                    if _nan_flag(b):
                        inner.append(f"nan_{b.name} |= ({v.code} != {v.code});")
                    continue
                inner.append(f"{a} = {combine(b.rtype, a, v.code, b.acc_dtype)};")
            else:
                v = self.h.v(b.fn(self.h, k.xs + k.rs, ()))
                self.store(b, k.store_index(b), v, inner)
        self.scopes.pop()
        self.emit_into(post)
        for b in reds:
            if simple and _nan_flag(b):
                post.append(f"if (nan_{b.name}) acc_{b.name} = "
                            f"std::numeric_limits<{CT[b.acc_dtype]}>::quiet_NaN();")
            acc = Var(f"acc_{b.name}", b.acc_dtype)
            v = self.h.v(b.post(self.h, acc)) if b.post is not None else acc
            v = self.h.v(v)
            if v.dtype is not kdtype(b.dtype) or v.weak:
                v = self.h.cast(v, kdtype(b.dtype))
            self.store(b, k.store_index(b), v, post)
        clause = _reduction_clause(reds) if simple else None
        wrap = None
        if narrow:
            for n in narrow:
                clause = clause.replace(f"acc_{n}", f"part_{n}")
            wrap = ([f"float part_{n} = 0.0f;" for n in sorted(narrow)],
                    [f"acc_{n} += static_cast<double>(part_{n});" for n in sorted(narrow)])
        loops = _nest(k.rs, K, inner, simd=simple, clause=clause, wrap=wrap)
        if not k.R and reds and len(k.K) == 1 and simple:
            # one value: OpenMP's own reduction, split across threads and vector lanes
            return pre + [f"#pragma omp parallel for simd {clause} num_threads(nt) "
                          f"if(nt > 1)"] + _nest(k.rs, K, inner) + post
        if not k.R and reds and len(k.K) >= 1:
            loops = _nest(k.rs, K, inner)
            return _parallel_reduction(pre, loops, post, reds)
        if not k.R:
            return pre + _parallel_nest(k.rs, K, inner, parallel_dims=1) + post
        return pre + loops + post

    def source(self, name: str, sizevars) -> str:
        k = self.kernel
        self.scopes = [{}]
        if self.spec is not None and _columns(self):
            body, k_r = self.column_body(), ()
        else:
            decl = self.plan_reuse()
            body, k_r = self.body(), k.R
            body = decl + body
        if k_r:
            nest = _parallel_nest(k.xs, self.rng(k.R), ["int bad = 0; (void)bad;"] + body,
                                  parallel_dims=max(1, len(k.R) - (0 if k.K else 1)))
        else:
            nest = ["int bad = 0; (void)bad;"] + body
        origins = []
        for b in k.nodes:
            for o in b.origins:
                if o not in origins:
                    origins.append(o)
        head = [f"// {name}: fuses {', '.join(origins) or '-'}",
                f"//   buffers {', '.join(b.name for b in k.nodes)}; "
                f"ranges {list(k.R)} x {list(k.K)}",
                f'extern "C" void {name}(char** P, const int64_t* KS, int nt) {{']
        decl = []
        for i, b in enumerate(self.args):
            const = "" if b.name in k.where else "const "
            decl.append(f"  {const}{_STORE[b.dtype]}* __restrict p{i} = "
                        f"({const}{_STORE[b.dtype]}*)P[{i}];")
        text = "\n".join(nest)
        for s in sizevars.ordered():
            if s.name in text:
                decl.append(f"  const int64_t {s.name} = KS[{s.name[2:]}];")
        pre = ([PHILOX] if self.uses_rng else []) + ([EXPF] if self.uses_exp else [])
        return "\n".join(head[:2] + pre + head[2:] + decl + ["  " + x for x in nest] + ["}"]) + "\n"


# Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), one counter per
# element: the kernels' random draws (guarded: several kernels share one compiled file)
PHILOX = r"""#ifndef EMBER_PHILOX
#define EMBER_PHILOX
static inline uint64_t em_philox(uint64_t seed, uint64_t ctr) {
  uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int i = 0; i < 10; ++i) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  return (uint64_t)c0 | ((uint64_t)c1 << 32);
}
static inline float em_rand_u(uint64_t seed, uint64_t ctr) {
  return (float)((uint32_t)em_philox(seed, ctr) >> 8) * 5.9604644775390625e-08f;
}
static inline float em_rand_n(uint64_t seed, uint64_t ctr) {
  uint64_t r = em_philox(seed, ctr);
  float u1 = (float)(((uint32_t)r >> 8) + 1u) * 5.9604644775390625e-08f;   // (0, 1]
  float u2 = (float)((uint32_t)(r >> 32) >> 8) * 5.9604644775390625e-08f;  // [0, 1)
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}
#endif
"""


class Specializer:
    """Index expressions of a static kernel with its sizes' values substituted, divisions and
    modulos re-simplified by the loop ranges (duck-sized symbols hide relations such as
    4 * 32 == 128 that let a view's flat offset split back into coordinates)."""

    def __init__(self, sv, var_ranges):
        self.sv, self.values = sv, {s: sympy.Integer(v) for s, v in sv.values.items()}
        self.ranges = {v: self._sub(r) for v, r in var_ranges.items()}
        self.memo = sv.__dict__.setdefault("_specialized", {})
        self.rkey = tuple(self.ranges.items())

    def add_range(self, v, n):
        """v ranges over [0, n) (a cat piece's index)."""
        self.ranges[v] = sympy.Integer(n)
        self.rkey = tuple(self.ranges.items())

    def _sub(self, e):
        e = sympy.sympify(e)
        return e.xreplace(self.values) if e.free_symbols else e

    def __call__(self, e):
        key = (e, self.rkey)
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = self._simplify(sympy.sympify(e))
        return r

    def _simplify(self, e):
        if e.is_Integer or e.is_Symbol:
            return self.values.get(e, e)
        if isinstance(e, (FloorDiv, ModIndex)):
            a, d = self._simplify(e.args[0]), self._simplify(e.args[1])
            div = isinstance(e, FloorDiv)
            r = (floordiv if div else mod)(a, d, self.ranges, self.sv)
            if not isinstance(r, (FloorDiv, ModIndex)):
                return r
            # (q*d + rest) // d == q + rest // d and % d == rest % d, for rest >= 0 (C's / and %
            # then agree with floor's): a cat piece's rest is its index, q the other coordinates
            q, rest = _split(sympy.expand(a), d)
            if q == 0 or rest == 0 or _hi(rest, self.ranges, self.sv) is None:
                return r
            if div:
                return sympy.expand(q + floordiv(rest, d, self.ranges, self.sv))
            return mod(rest, d, self.ranges, self.sv)
        if e.args:
            return sympy.expand(e.func(*[self._simplify(a) for a in e.args]))
        return e


def _vectorizable(b) -> bool:
    """Whether a reduction can use an OpenMP reduction clause (vector lanes, threads)."""
    return b.rtype in ("sum", "prod") or (b.rtype in ("max", "min") and b.acc_dtype is not D.bool)


_COLUMNS_MAX = 8192   # most accumulators of a column-sum kernel (on the stack)
_COLUMNS_SPLIT = 32   # columns from which a column-sum kernel splits them across threads


def _columns(ck) -> bool:
    """Whether a static kernel sums over dims outer to its output's (`column_body`): one loop
    phase of sums, then outer-level statements; the output small; every load contiguous
    along the output's innermost dim and not along the innermost reduced dim."""
    from .scheduler import reads_of
    k = ck.kernel
    if not k.R or not k.K or not k.phases or k.phases[0][0] != "loop":
        return False
    if any(level != "outer" for level, _ in k.phases[1:]):
        return False
    reds = k.phases[0][1]
    if not all(b.is_reduction and b.rtype == "sum" for b in reds):
        return False
    R = ck.rng(k.R)
    if not all(getattr(r, "is_Integer", False) for r in R) or int(sympy.Mul(*R)) > _COLUMNS_MAX:
        return False
    x, r = k.xs[-1], k.rs[-1]
    along = 0
    for b in reds:
        for _, idx in reads_of(b, k.xs, k.rs, k.var_ranges()):
            e = ck.spec(idx)
            if e.has(FloorDiv, ModIndex) or not e.is_polynomial(*k.xs, *k.rs):
                return False
            cx, cr = e.coeff(x), e.coeff(r)
            if cr == 1:
                return False
            along += cx == 1
    return along > 0


def _strides(shape) -> tuple:
    st, acc = [], sympy.Integer(1)
    for s in reversed(shape):
        st.append(acc)
        acc = acc * s
    return tuple(reversed(st))


_TEMP = re.compile(r"\bt\d+\b")
# values worth keeping for a later phase (a transcendental call)
_EXPENSIVE = re.compile(r"std::(exp|expm1|log|log1p|erf|erfc|tanh|sin|cos|pow|sqrt)\(|em_expf\(")

_NARROW_MAX = 4096   # longest innermost loop summed in float partials


def _narrowable(b, K) -> bool:
    """A float32 sum (double accumulator) whose innermost range is a constant up to
    _NARROW_MAX: its terms add up in float per inner loop (as PyTorch's vectorized CPU sums)."""
    return (b.rtype == "sum" and b.acc_dtype is D.float64 and kdtype(b.dtype) is D.float32
            and bool(K) and getattr(K[-1], "is_Integer", False) and int(K[-1]) <= _NARROW_MAX)


def _nan_flag(b) -> bool:
    return b.rtype in ("max", "min") and b.acc_dtype._cat == 2


def _reduction_clause(reds) -> str:
    """OpenMP reduction clauses for the accumulators ("" when none)."""
    parts = []
    for sym, kind in (("+", "sum"), ("*", "prod"), ("max", "max"), ("min", "min")):
        names = [f"acc_{b.name}" for b in reds if b.rtype == kind]
        if names:
            parts.append(f"reduction({sym}:{','.join(names)})")
    flags = [f"nan_{b.name}" for b in reds if _nan_flag(b)]
    if flags:
        parts.append(f"reduction(|:{','.join(flags)})")
    return " ".join(parts)


def _nest(vs, ranges, body, simd=False, clause=None, wrap=None) -> list:
    """Loops over vs (the last one innermost); `wrap`: (lines before, lines after) the
    innermost loop."""
    if not vs:
        return ["{"] + ["  " + b for b in body] + ["}"]
    out = []
    n = len(vs)
    for d, (v, r) in enumerate(zip(vs, ranges)):
        if d == n - 1 and wrap is not None:
            out += ["  " * d + x for x in wrap[0]]
        if simd and d == n - 1:
            out.append("  " * d + "#pragma omp simd" + (f" {clause}" if clause else ""))
        out.append("  " * d + f"for (int64_t {v} = 0; {v} < {cexpr(r)}; ++{v}) {{")
    out += ["  " * n + b for b in body]
    for d in range(n):
        out.append("  " * (n - 1 - d) + "}")
        if d == 0 and wrap is not None:
            out += ["  " * (n - 1) + x for x in wrap[1]]
    return out


def _parallel_nest(vs, ranges, body, parallel_dims) -> list:
    n = min(parallel_dims, len(vs))
    col = f" collapse({n})" if n > 1 else ""
    return [f"#pragma omp parallel for{col} num_threads(nt) if(nt > 1)"] + _nest(vs, ranges,
                                                                                   body)


def _split_columns(body, x, n) -> list:
    """A column-sum kernel's body run by nt threads, each summing its own block of columns
    (multiples of 16: whole vectors) over every row: each column adds its terms in the same
    order on any thread count, so results do not depend on nt."""
    loop = re.compile(rf"for \(int64_t ({x}|i) = 0; \1 < {n}; \+\+\1\)")
    out = ["#pragma omp parallel num_threads(nt) if(nt > 1)", "{",
           "  const int64_t c_nt = omp_get_num_threads(), c_t = omp_get_thread_num();",
           f"  const int64_t c_w = (({n} + c_nt - 1) / c_nt + 15) / 16 * 16;",
           f"  const int64_t c_lo = c_t * c_w < {n} ? c_t * c_w : {n};",
           f"  const int64_t c_hi = c_lo + c_w < {n} ? c_lo + c_w : {n};"]
    out += ["  " + loop.sub(r"for (int64_t \1 = c_lo; \1 < c_hi; ++\1)", line) for line in body]
    return out + ["}"]


def _parallel_reduction(pre, loops, post, reds) -> list:
    """A reduction to one value: per-thread partials combined at the end."""
    out = list(pre)
    out.append("#pragma omp parallel num_threads(nt) if(nt > 1)")
    out.append("{")
    for b in reds:
        out.append(f"  {CT[b.acc_dtype]} part_{b.name} = {_init(b.rtype, b.acc_dtype)};")
    inner = []
    for line in loops:
        for b in reds:
            line = line.replace(f"acc_{b.name}", f"part_{b.name}")
        inner.append(line)
    # the outermost loop of the nest is split across threads
    first = next(i for i, line in enumerate(inner) if line.lstrip().startswith("for"))
    inner.insert(first, "#pragma omp for nowait")
    out += ["  " + x for x in inner]
    out.append("  #pragma omp critical")
    out.append("  {")
    for b in reds:
        a, p = f"acc_{b.name}", f"part_{b.name}"
        out.append(f"    {a} = {combine(b.rtype, a, p, b.acc_dtype)};")
    out.append("  }")
    out.append("}")
    return out + post


def generate(kernel, stored: set, name: str, sizevars, static=False):
    """(source, argument buffers, in-kernel buffers read back from memory). `static`: the
    sizes' values are constants of the kernel (a graph compiled for one set of shapes)."""
    ck = CppKernel(kernel, stored, sizevars if static else None)
    src = ck.source(name, sizevars)
    return src, ck.args, ck.mem_reads

# exp(x) for float32 = 2^n * p(r), r = x - n ln2 (ln2 in two parts), p Cephes' expf polynomial:
# at most 2 ulp from the true value below 88.37 (5 ulp up to 88.72, where r passes ln2 / 2)
EXPF = r"""#ifndef EMBER_EXPF
#define EMBER_EXPF
static inline float em_expf(float x) {
  float c = x < -87.0f ? -87.0f : (x > 88.7228394f ? 88.7228394f : x);
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // nearest integer
  n = n > 127.0f ? 127.0f : n;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  float s;
  std::memcpy(&s, &e, 4);
  float y = x < -87.0f ? 0.0f : p * s;
  y = x > 88.7228394f ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}
#endif
"""
