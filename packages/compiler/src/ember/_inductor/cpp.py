"""C++ code generation for CPU kernels: one `extern "C"` function per fused kernel, loops over
the kernel's outer ranges (OpenMP across threads above a size threshold), each phase's inner
loop innermost (contiguous, so g++ vectorizes it), values emitted by core's C++ ops handler
(`_cppops.CppOps`, the same one that makes the eager C++ kernels). Compiled and cached on disk
by core's `_cpujit` / `_kcache`.
"""
from __future__ import annotations

from ember import _dtype as D
from ember._ops._cppops import CT, CppOps, Var
from ember._ops._cpujit import _STORE, _load, _store

from .ir import kdtype
from .sizevars import cexpr

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

    def load(self, buf, index):
        return self.k.load(buf, index)

    def index_expr(self, e):
        return self.emit(cexpr(e), D.int64)


class CppKernel:
    """Generates one kernel's source. `stored` names the buffers it must write to memory."""

    def __init__(self, kernel, stored: set):
        self.kernel, self.stored = kernel, stored
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
        code = _load(f"{self.ptr(buf)}[{cexpr(index)}]", buf.dtype, kd, False)
        if mask is not None:  # only the selected branch reads memory: out-of-range stays out
            code = f"({mask.code} ? {code} : static_cast<{CT[kd]}>(0))"
        v = self.h.emit(code, kd)
        self.scopes[-1][key] = v
        return v

    def store(self, buf, index, v: Var, out):
        key = (buf.name, index)
        self.scopes[-1][key] = v
        if buf.name in self.stored:
            out.append(f"{self.ptr(buf)}[{cexpr(index)}] = {_store(v, buf.dtype)};")

    def emit_into(self, out: list):
        self.h.lines = out

    # ---- code --------------------------------------------------------------------------------
    def body(self) -> list:
        k = self.kernel
        lines: list = []
        for level, bufs in k.phases:
            if level == "outer":
                self.emit_into(lines)
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
        simple = all(_vectorizable(b) for b in reds)
        for b in reds:
            pre.append(f"{CT[b.acc_dtype]} acc_{b.name} = {_init(b.rtype, b.acc_dtype)};")
            if simple and _nan_flag(b):
                pre.append(f"int nan_{b.name} = 0;")
        self.scopes.append({})
        self.emit_into(inner)
        for b in bufs:
            if b.is_reduction:
                v = self.h.v(b.fn(self.h, k.xs, k.rs))
                a = f"acc_{b.name}"
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
        loops = _nest(k.rs, k.K, inner, simd=simple, clause=clause)
        if not k.R and reds and len(k.K) == 1 and simple:
            # one value: OpenMP's own reduction, split across threads and vector lanes
            return pre + [f"#pragma omp parallel for simd {clause} num_threads(nt) "
                          f"if(nt > 1)"] + _nest(k.rs, k.K, inner) + post
        if not k.R and reds and len(k.K) >= 1:
            loops = _nest(k.rs, k.K, inner)
            return _parallel_reduction(pre, loops, post, reds)
        if not k.R:
            return pre + _parallel_nest(k.rs, k.K, inner, parallel_dims=1) + post
        return pre + loops + post

    def source(self, name: str, sizevars) -> str:
        k = self.kernel
        self.scopes = [{}]
        body = self.body()
        if k.R:
            nest = _parallel_nest(k.xs, k.R, ["int bad = 0; (void)bad;"] + body,
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
        return "\n".join(head + decl + ["  " + x for x in nest] + ["}"]) + "\n"


def _vectorizable(b) -> bool:
    """Whether a reduction can use an OpenMP reduction clause (vector lanes, threads)."""
    return b.rtype in ("sum", "prod") or (b.rtype in ("max", "min") and b.acc_dtype is not D.bool)


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


def _nest(vs, ranges, body, simd=False, clause=None) -> list:
    if not vs:
        return ["{"] + ["  " + b for b in body] + ["}"]
    out = []
    for d, (v, r) in enumerate(zip(vs, ranges)):
        if simd and d == len(vs) - 1:
            out.append("  " * d + "#pragma omp simd" + (f" {clause}" if clause else ""))
        out.append("  " * d + f"for (int64_t {v} = 0; {v} < {cexpr(r)}; ++{v}) {{")
    out += ["  " * len(vs) + b for b in body]
    out += ["  " * (len(vs) - 1 - d) + "}" for d in range(len(vs))]
    return out


def _parallel_nest(vs, ranges, body, parallel_dims) -> list:
    n = min(parallel_dims, len(vs))
    col = f" collapse({n})" if n > 1 else ""
    return [f"#pragma omp parallel for{col} num_threads(nt) if(nt > 1)"] + _nest(vs, ranges,
                                                                                   body)


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


def generate(kernel, stored: set, name: str, sizevars):
    """(source, argument buffers, in-kernel buffers read back from memory)."""
    ck = CppKernel(kernel, stored)
    src = ck.source(name, sizevars)
    return src, ck.args, ck.mem_reads
