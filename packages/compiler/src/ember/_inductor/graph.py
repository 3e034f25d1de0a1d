"""From a lowered graph to a callable: schedule, generate every kernel, compile them into one
shared library (core's `_cpujit._build`: g++ with OpenMP, the on-disk `_kcache`), and write the
Python wrapper that allocates buffers (reusing freed ones), launches the kernels and calls the
extern ops in order. `EMBER_LOGS=output_code` prints the wrapper and the kernels.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re

import numpy as np
import sympy

from ember import _flags
from ember._ops import _cpujit
from ember._tensor import Tensor

from . import cpp, cpu_threads, index64
from .ir import ComputedBuffer, ExternBuffer, InputBuffer, TBox
from .lowering import SymVal
from .scheduler import Kernel, reads_of, schedule
from .sizevars import pyexpr

__all__ = ["CompiledGraph", "build"]

_GRAIN = 1 << 18   # elements per thread at least, where a kernel has no grain (cpu_threads)
_NCPU = os.cpu_count() or 1


class CompiledGraph:
    """What `build` makes: the wrapper source, the kernel source and the callable."""

    first = None   # a CUDA graph's first run compiles its Triton kernels in parallel first

    def __init__(self, wrapper_src, kernel_src, fn, n_kernels, n_extern):
        self.wrapper_src, self.kernel_src, self.fn = wrapper_src, kernel_src, fn
        self.n_kernels, self.n_extern = n_kernels, n_extern

    def __call__(self, *args):
        if self.first is not None:
            self.first, first = None, self.first
            first(self, args)
        return self.fn(args)

    def code(self) -> str:
        return self.kernel_src + "\n" + self.wrapper_src


def _stored(g, steps) -> set:
    """Computed buffers something reads from memory: another kernel, an extern call, the
    graph's outputs."""
    owner = {}
    for i, s in enumerate(steps):
        if isinstance(s, Kernel):
            for b in s.nodes:
                owner[b.name] = i
    stored = set()
    for i, s in enumerate(steps):
        if isinstance(s, Kernel):
            for b in s.nodes:
                fit = s.vars_for(b)
                for buf, _ in reads_of(b, fit[0], fit[1], s.var_ranges()):
                    if owner.get(buf.name, i) != i:
                        stored.add(buf.name)
        else:
            for tb in _tboxes((s.args, s.kwargs)):
                stored.add(tb.buf.name)
    for o in list(g.outputs) + [src for _, src in g.mutations]:
        if isinstance(o, TBox):
            stored.add(o.buf.name)
    return stored


def _tboxes(a):
    if isinstance(a, TBox):
        yield a
    elif isinstance(a, (tuple, list)):
        for x in a:
            yield from _tboxes(x)
    elif isinstance(a, dict):
        for x in a.values():
            yield from _tboxes(x)


def build(g, sym=None, plan=None, compile_kernels=True):
    """Schedule, generate and compile a lowered graph (GraphLowering). With `sym` and `plan`
    (dynamic.py) the wrapper reads its sizes from the inputs at each call."""
    counter = iter(range(1 << 30))
    steps = schedule(g.buffers, lambda: next(counter))
    stored = _stored(g, steps)
    kernels = {}
    cuda = g.device == "cuda"
    wide = cuda and sym is None and index64.needs_int64(g)   # (symbolic: compile_fx's guard)
    for s in steps:
        if isinstance(s, Kernel):
            while True:
                if cuda:
                    src, args, syms, mem = _triton_generate(s, stored, g.sv,
                                                            sym is None and static_sizes(),
                                                            sym is None)
                else:
                    src, args, mem = cpp.generate(s, stored, "KERNEL_NAME", g.sv,
                                                  static=sym is None)
                    syms = None
                if mem <= stored:
                    break
                stored |= mem
            if wide:
                src = index64.widen(src)
            # named by its text: equal kernels of this graph (the same block of each layer)
            # and of any other share one compiled function. Triton's comment lines (the
            # buffers a kernel computes) are not part of its text; C++'s are (pragmas)
            if cuda:
                src = _ordinal_buffers(src)
            text = src if not cuda else "\n".join(
                x for x in src.splitlines() if not x.startswith("#"))
            s.name = "kernel_" + hashlib.sha256(text.encode()).hexdigest()[:16]
            s.launch_args = (args, syms)
            s.grain = None if cuda else cpu_threads.grain(src)
            kernels.setdefault(s.name, src.replace("KERNEL_NAME", s.name))
    art = Artifact()
    art.device = g.device
    art.sources = list(kernels.values())
    art.ks = [g.sv.values[s] for s in g.sv.ordered()]
    art.dtypes = sorted({str(b.dtype) for b in g.buffers if isinstance(b, ComputedBuffer)})
    art.wrapper = _wrapper(g, steps, stored, art, sym, plan)
    art.n_kernels = sum(isinstance(s, Kernel) for s in steps)
    art.n_extern = sum(isinstance(s, ExternBuffer) and not getattr(s, "grad_toggle", False)
                       for s in steps)
    if compile_kernels and not cuda and load_kernels(art.sources) is None:
        return None  # deferred: compiled later with other graphs' kernels
    return art


def static_sizes() -> bool:
    """Whether a static CUDA graph's kernels take its sizes as constexprs (index math divides
    by constants; compiled per size) rather than as arguments: EMBER_INDUCTOR_STATIC_SIZES=0
    turns it off (one compile per kernel text, runtime divisions)."""
    return os.environ.get("EMBER_INDUCTOR_STATIC_SIZES", "1") != "0"


def _triton_generate(s, stored, sv, static=False, fixed=False):
    from . import triton as tgen
    from .lowering import Fallback
    try:
        return tgen.generate(s, stored, "KERNEL_NAME", sv, static, fixed)
    except Fallback:
        raise
    except Exception as e:  # noqa: BLE001 - a primitive Triton (or its interpreter) lacks
        raise Fallback(f"no Triton code for a kernel ({type(e).__name__}: {e})") from e


class Artifact:
    """Everything needed to run a compiled graph again, in this process or another (the
    FX-graph cache pickles it): the wrapper's source, the kernels' sources, the size values,
    the extern ops, constants (by attribute name) and literals the wrapper names."""

    def __init__(self):
        self.wrapper, self.sources, self.ks, self.dtypes = "", [], [], []
        self.externs: dict = {}
        self.consts: dict = {}
        self.literals: dict = {}
        self.n_kernels = self.n_extern = 0
        self.device = "cpu"


def load(art: Artifact, gm) -> CompiledGraph | None:
    """The callable of an artifact (its kernels compiled or loaded from the disk cache)."""
    import ember
    fns = load_kernels(art.sources) if art.device == "cpu" else _triton_kernels(art.sources)
    if fns is None:
        return None  # deferred: the kernels are compiled later, with other graphs'
    env = {"_launch": _launch_triton, "_empty": _empty_device, "_np": np, "_Tensor": Tensor,
           "_ptrs": _ptrs, "_ext": _extern_call, "_as": _as_tensor, "_relayout": _relayout,
           "_out": _out, "_wb": _writeback, "_nt": _nthreads, "_ntc": _ntcap, "_rng": _rng_state,
           "_KSA": ctypes.c_int64 * max(1, len(art.ks)),
           "_KS": (ctypes.c_int64 * max(1, len(art.ks)))(*art.ks),
           "_D": {name: getattr(ember, name.split(".")[-1]).np for name in art.dtypes},
           "_E": {name: getattr(ember, name.split(".")[-1]) for name in art.dtypes}}
    env.update(fns)
    env.update(art.externs)
    env.update(art.literals)
    for name, target in art.consts.items():
        obj = gm
        for part in target.split("."):
            obj = getattr(obj, part)
        env[name] = obj
    exec(compile(art.wrapper, "<ember inductor wrapper>", "exec"), env)  # noqa: S102
    cg = CompiledGraph(art.wrapper, "".join(art.sources), env["call"], art.n_kernels,
                       art.n_extern)
    if art.device != "cpu" and len(art.sources) > 1:
        cg.first = _precompile
    return cg


def _precompile(cg, args):
    from ember.cuda.runtime import driver as rt
    if rt.FAKE:
        return  # Triton's interpreter (or no launch at all): nothing to compile
    from .triton_precompile import precompile
    precompile(cg.fn.__globals__, cg.wrapper_src, args)


_TRITON_FNS: dict = {}   # kernel name (the hash of its text) -> JITFunction, for this process


def _triton_kernels(sources) -> dict:
    """{name: JITFunction}: one function per kernel text in this process, so a kernel shared by
    several graphs (forward and backward, each graph break) compiles once per launch config."""
    from ember.cuda.kernels.pointwise import load_kernel
    out = {}
    for s in sources:
        name = s.split("def ", 1)[1].split("(", 1)[0]
        if name not in _TRITON_FNS:
            _TRITON_FNS[name] = load_kernel(s, name)
        out[name] = _TRITON_FNS[name]
    return out


def _rng_state(n, device):
    from .rng import state
    return state(n, device)


def _empty_device(n, dtype, device):
    import ember
    return ember.empty(n, dtype=dtype, device=device)


def _launch_triton(fn, grid, bufs, ints, xblock, rblock, opts=None):
    """Launch a generated Triton kernel through the device's launcher (opts: num_warps and
    num_stages of a GEMM template, or a static graph's sizes as constexprs)."""
    from ember._device import get_backend
    from ember.cuda.kernels.pointwise import Operand
    launch = get_backend("cuda").pw.launch
    ops = [Operand(t, t.data_ptr(), (t.numel(),), (1,), t.dtype) for t in bufs]
    consts = {"XBLOCK": xblock, "RBLOCK": rblock}
    if opts:   # (in the kernel's parameter order: its constexprs follow XBLOCK and RBLOCK)
        consts.update(opts)
    # constexpr sizes are part of what is compiled: part of the launcher's key
    key = ("inductor", fn, xblock, rblock) if not opts else ("inductor", fn, xblock, rblock,
                                                              tuple(opts.items()))
    launch(fn, grid, ops + list(ints), key, consts)


def rblock_for(rnumel: int, least: int, most: int = 2048) -> int:
    """The power of two >= rnumel, between least and most (one compiled variant each)."""
    r = least
    while r < rnumel and r < most:
        r *= 2
    return r


_KERNELS: dict = {}     # kernel name -> ctypes function, for this process
_pending: list = []     # sources waiting for a batched compile (see `deferred`)
_deferring = [0]


def load_kernels(sources):
    """{name: function} for kernel sources (compiling the ones this process lacks in one
    compiler run); None while `deferred` collects them."""
    missing = [s for s in sources if _kname(s) not in _KERNELS]
    if missing:
        if _deferring[0]:
            _pending.extend(s for s in missing if s not in _pending)
            return None
        _compile(missing)
    return {_kname(s): _KERNELS[_kname(s)] for s in sources}


def _kname(src: str) -> str:
    i = src.index('extern "C" void ') + len('extern "C" void ')
    return src[i:src.index("(", i)]


_CHUNK = 6   # kernels per compiler process at least (each run re-parses the headers)


def chunks(sources) -> list:
    """The sources split for parallel compiler runs: one chunk per core, at least _CHUNK
    kernels each, by sorted text (the same set always gives the same libraries: cached)."""
    srcs = sorted(set(sources))
    n = max(1, min(_NCPU, len(srcs) // _CHUNK))
    return [srcs[i::n] for i in range(n)]


def _compile(sources):
    from .lowering import Fallback
    if not _cpujit.available():
        raise Fallback("no C++ compiler (or EMBER_CPU_JIT=0)")
    parts = chunks(sources)
    if len(parts) == 1:
        libs = [_cpujit._build(parts[0])]
    else:  # g++ runs in subprocesses: threads overlap them
        from concurrent.futures import ThreadPoolExecutor
        _cpujit._build([])   # probes (-march=native, libmvec) once, before the threads
        # _build sets OpenMP's wait policy around its first load; set here, no thread races
        with _cpujit.omp_env(), ThreadPoolExecutor(len(parts)) as ex:
            libs = list(ex.map(_cpujit._build, parts))
    for part, lib in zip(parts, libs):
        if lib is None:
            raise RuntimeError("ember inductor: the C++ kernels did not compile")
        for s in part:
            f = getattr(lib, _kname(s))
            f.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
                          ctypes.c_int]
            f.restype = None
            _KERNELS[_kname(s)] = f


class deferred:  # noqa: N801 - a context manager, used as `with deferred():`
    """Collect the kernels graphs need instead of compiling each graph's (the graphs run as
    captured meanwhile); compile them all in one compiler run on exit. For warming up many
    graphs (tests, a model's first step)."""

    def __enter__(self):
        _deferring[0] += 1
        return self

    def __exit__(self, *exc):
        _deferring[0] -= 1
        if not _deferring[0] and _pending:
            srcs = list(_pending)
            _pending.clear()
            _compile(srcs)
        return False


# ---- the wrapper ---------------------------------------------------------------------------
class _Fmt:
    """Sizes as the wrapper's source: values (one wrapper per size) or, with `sym`
    ({ks symbol: expression of the graph's symbols}), Python expressions evaluated per call."""

    def __init__(self, sv, sym=None):
        self.sv, self.sym = sv, sym

    def __call__(self, e) -> str:
        if self.sym is None:
            return str(self.sv.hint(e))
        return pyexpr(sympy.sympify(e))

    def tup(self, xs) -> str:
        if self.sym is None:
            return str(tuple(self.sv.hint(x) for x in xs))
        return "(" + "".join(self(x) + ", " for x in xs) + ")"

    def numel(self, shape):
        """(source of max(1, numel), the buffer pool's key for it)."""
        if self.sym is None:
            n = max(1, self.sv.numel(shape))
            return str(n), n
        n = sympy.expand(sympy.Mul(*shape)) if shape else sympy.Integer(1)
        return f"max(1, {pyexpr(n)})", n

    def prologue(self, plan) -> list:
        """The graph's symbols read from the inputs, then every ks size and the _KS array."""
        if self.sym is None:
            return []
        out = []
        for s in plan.symbols:
            i, d = plan.sources[s]
            out.append(f"    {s} = in{i}" + (f".shape[{d}]" if d is not None else ""))
        ks = self.sv.ordered()
        for k in ks:
            out.append(f"    {k} = {pyexpr(self.sym[k])}")
        out.append(f"    _KS = _KSA({''.join(str(k) + ', ' for k in ks)})")
        return out


def _wrapper(g, steps, stored, art, sym=None, plan=None):  # noqa: C901
    sv = g.sv
    fmt = _Fmt(sv, sym)
    lines = ["def call(args):"]
    names = [f"in{i}" for i in range(len(g.inputs))]
    lines.append(f"    {', '.join(names) + ',' if names else '_'} = args")
    lines += fmt.prologue(plan)
    for buf, target in g.constants:
        art.consts[buf.name] = target
    last_use = _last_uses(g, steps, stored)
    pool: dict = {}
    extern_read: set = set()
    where = {}  # buffer name -> python expression of its tensor / array
    if g.device != "cpu":
        where["@cuda"] = True
    for b in g.inputs:
        if isinstance(b, TBox):
            where[b.buf.name] = f"in{b.buf.index}"
    for buf, _ in g.constants:
        where[buf.name] = buf.name
    if getattr(g, "rng_buf", None) is not None:  # random ops' seed and counter (rng.py)
        lines.append(f"    rng_state = _rng({fmt(g.rng_total)}, {g.device!r})")
        where["rng_state"] = "rng_state"
    for i, s in enumerate(steps):
        if isinstance(s, Kernel):
            args, syms = s.launch_args
            for b in s.nodes:
                if b.name in stored:
                    n, nkey = fmt.numel(b.shape)
                    key = (b.dtype, nkey)
                    if pool.get(key):
                        old = pool[key].pop()
                        lines.append(f"    {b.name} = {old}  # reuses {old}'s memory")
                    elif g.device == "cpu":
                        lines.append(f"    {b.name} = _np.empty({n}, _D[{str(b.dtype)!r}])")
                    else:
                        lines.append(f"    {b.name} = _empty({n}, _E[{str(b.dtype)!r}], "
                                     f"{g.device!r})")
                    where[b.name] = b.name
            ptrs = ", ".join(_ptr_expr(where, b) for b in args)
            if syms is not None:  # Triton: a grid over the outer ranges
                lines.append(_triton_launch(s, ptrs, syms, sv, sym))
            elif sym is not None:
                work = sympy.Mul(*s.R) * sympy.Mul(*s.K)
                lines.append(f"    {s.name}(_ptrs({ptrs}), _KS, _nt({pyexpr(work)}, "
                             f"{_kgrain(s)}))")
            else:
                work = sv.numel(s.R) * max(1, sv.numel(s.K))
                nt = cpu_threads.static_threads(work, _kgrain(s), _flags._threads or _NCPU)
                # more than one thread: capped at call time by the cores the load leaves free
                nts = str(nt) if nt == 1 else f"_ntc({nt})"
                lines.append(f"    {s.name}(_ptrs({ptrs}), _KS, {nts})")
        else:
            art.externs[s.name + "_op"] = s.target
            a = _arg_src((s.args, s.kwargs), where, fmt, extern_read)
            lines.append(f"    {s.name} = _ext({s.name}_op, {a})  # {_opname(s.target)}")
            for k, o in enumerate(s.outputs):
                if o is None:
                    continue
                lines.append(f"    {o.name} = _relayout({s.name}[{k}], {fmt.tup(o.shape)}, "
                             f"{fmt.tup(o.stride)})")
                where[o.name] = o.name
        for name in last_use.get(i, ()):
            if name in where and name not in extern_read and _is_computed(g, name):
                b = _buffer(g, name)
                pool.setdefault((b.dtype, fmt.numel(b.shape)[1]), []).append(name)
    for dst, src in g.mutations:   # functionalization's write-backs, after every kernel
        kind = "a" if isinstance(src.buf, ComputedBuffer) and g.device == "cpu" else "t"
        lines.append(f"    _wb(in{dst.buf.index}, {where[src.buf.name]}, {kind!r}, "
                     f"{fmt.tup(src.shape)}, {fmt.tup(src.stride)}, {fmt(src.offset)})")
    outs = []
    for o in g.outputs:
        if isinstance(o, TBox):
            kind = "a" if isinstance(o.buf, ComputedBuffer) and g.device == "cpu" else "t"
            outs.append(f"_out({where[o.buf.name]}, {kind!r}, {fmt.tup(o.shape)}, "
                        f"{fmt.tup(o.stride)}, {fmt(o.offset)})")
        elif isinstance(o, SymVal):
            outs.append(fmt(o.expr))
        else:
            name = f"_c{len(art.literals)}"
            art.literals[name] = o
            outs.append(name)
    for k, x in enumerate(outs):   # one tensor for an output returned twice (one version
        if x.startswith("_out(") and outs.count(x) > 1:   # counter, as eager's aliasing)
            lines.append(f"    _o{k} = {x}")
            outs = [f"_o{k}" if y == x else y for y in outs]
    lines.append(f"    return ({''.join(x + ', ' for x in outs)})")
    return "\n".join(lines) + "\n"


def _opname(op) -> str:
    """An extern call's op for the wrapper's comment (`EMBER_LOGS=output_code`)."""
    name = getattr(op, "qualname", None) or getattr(op, "__name__", None) or type(op).__name__
    return str(name).replace("\n", " ")


def _triton_launch(s, ptrs, syms, sv, sym) -> str:
    """The wrapper line launching Triton kernel s: sizes are kernel arguments (values, or with
    `sym` the ks names the prologue computed per call), so one kernel serves every size."""
    from .triton import RBLOCK, RBLOCK_COLUMN, XBLOCK, XBLOCK_COLUMN
    if s.template is not None:   # a GEMM template: a grid of output tiles (x batch)
        from .autotune import launch_shape
        tb = s.template
        val = (lambda e: sv.hint(e)) if sym is None else (lambda e: pyexpr(sympy.expand(e)))
        grid, opts = launch_shape(tb.spec, tb.config, val)
        ints = "".join(f"{sv.values[y] if sym is None else y}, " for y in syms)
        return f"    _launch({s.name}, {grid}, ({ptrs},), ({ints}1, 1, ), 1, 1, {opts})"
    if getattr(s, "persistent", False) or not s.K:   # (persistent: the wrapper's sizes fixed)
        return _triton_launch_tiled(s, ptrs, syms, sv, sym)
    col = getattr(s, "column", False)   # column tiles: XBLOCK_COLUMN outputs a program
    xb = XBLOCK if not s.K else XBLOCK_COLUMN if col else 1
    # a reduction's RBLOCK covers its row, so each loop phase is one masked chunk for rows up
    # to 2048; a row of symbolic length gets 1024 (one kernel for every size)
    rn_expr = sympy.Mul(*s.K) if s.K else sympy.Integer(1)
    rb = RBLOCK if not s.K else rblock_for(sv.hint(rn_expr), RBLOCK) \
        if not rn_expr.free_symbols else 1024
    if col:   # tiles of up to RBLOCK_COLUMN rows, fewer for a short chunk
        rb = rblock_for(sv.hint(rn_expr), 16, RBLOCK_COLUMN) if not rn_expr.free_symbols \
            else RBLOCK_COLUMN
    if sym is None:
        xn, rn = sv.numel(s.R), max(1, sv.numel(s.K))
        grid = (-(-xn // xb),) if not s.K or col else (xn,)
        if getattr(s, "static", False):   # sizes as constexprs, after XBLOCK and RBLOCK
            cs = {y.name: sv.values[y] for y in syms}
            if getattr(s, "const_numel", False):
                cs.update(xnumel=xn, rnumel=rn)
            ints = () if getattr(s, "const_numel", False) else (xn, rn)
            return f"    _launch({s.name}, {grid}, ({ptrs},), {ints}, {xb}, {rb}, {cs})"
        ints = [sv.values[y] for y in syms] + [xn, rn]
        return f"    _launch({s.name}, {grid}, ({ptrs},), {tuple(ints)}, {xb}, {rb})"
    xn = pyexpr(sympy.expand(sympy.Mul(*s.R)))
    rn = pyexpr(sympy.expand(sympy.Mul(*s.K))) if s.K else "1"
    ints = "".join(f"{y}, " for y in syms) + f"{xn}, {rn}, "
    grid = f"(-(-({xn}) // {xb}),)" if not s.K or col else f"({xn},)"
    return f"    _launch({s.name}, {grid}, ({ptrs},), ({ints}), {xb}, {rb})"


def _triton_launch_tiled(s, ptrs, syms, sv, sym) -> str:
    """A pointwise kernel (XBLOCK elements a program) or a persistent reduction (XBLOCK rows
    of RBLOCK a program): block sizes and num_warps from `triton.launch_config`."""
    from .triton import launch_config
    kind = "persistent" if s.K else "pointwise"
    xh, rh = sv.numel(s.R), max(1, sv.numel(s.K))   # (size hints in a dynamic graph)
    xb, rb, nw = launch_config(kind, xh, rh, getattr(s, "const_numel", False))
    opts = {}
    if sym is None:
        grid = (-(-xh // xb),)
        if getattr(s, "static", False):   # sizes as constexprs, after XBLOCK and RBLOCK
            opts.update({y.name: sv.values[y] for y in syms})
            if getattr(s, "const_numel", False):
                opts.update(xnumel=xh, rnumel=rh)
            opts["num_warps"] = nw
            ints = () if getattr(s, "const_numel", False) else (xh, rh)
            return f"    _launch({s.name}, {grid}, ({ptrs},), {ints}, {xb}, {rb}, {opts})"
        ints = tuple([sv.values[y] for y in syms] + [xh, rh])
        opts["num_warps"] = nw
        return f"    _launch({s.name}, {grid}, ({ptrs},), {ints}, {xb}, {rb}, {opts})"
    xn = pyexpr(sympy.expand(sympy.Mul(*s.R)))
    ints = "".join(f"{y}, " for y in syms) + f"{xn}, 1, "
    return f"    _launch({s.name}, (-(-({xn}) // {xb}),), ({ptrs},), ({ints}), {xb}, {rb}, " \
           f"{{'num_warps': {nw}}})"


def _is_computed(g, name):
    return any(isinstance(b, ComputedBuffer) and b.name == name for b in g.buffers)


def _buffer(g, name):
    for b in g.buffers:
        if b.name == name:
            return b
    return None


def _last_uses(g, steps, stored) -> dict:
    """step index -> computed buffers whose last reader is that step (not outputs)."""
    last = {}
    for i, s in enumerate(steps):
        if isinstance(s, Kernel):
            for b in s.nodes:
                last[b.name] = max(last.get(b.name, i), i)
                fit = s.vars_for(b)
                for buf, _ in reads_of(b, fit[0], fit[1], s.var_ranges()):
                    last[buf.name] = i
        else:
            for tb in _tboxes((s.args, s.kwargs)):
                last[tb.buf.name] = i
    outs = {o.buf.name for o in list(g.outputs) + [s for _, s in g.mutations]
            if isinstance(o, TBox)}
    by_step: dict = {}
    for name, i in last.items():
        if name not in outs and name in stored:
            by_step.setdefault(i, []).append(name)
    return by_step


def _ptr_expr(where, b) -> str:
    return where[b.name]


def _arg_src(a, where, fmt, extern_read) -> str:
    sv = fmt
    if isinstance(a, SymVal):
        return fmt(a.expr)
    if isinstance(a, TBox):
        extern_read.add(a.buf.name)
        shape, stride = fmt.tup(a.shape), fmt.tup(a.stride)
        kind = "a" if isinstance(a.buf, ComputedBuffer) and isinstance(
            where.get(a.buf.name + ".np"), type(None)) and not where.get("@cuda") else "t"
        return f"_as({where[a.buf.name]}, {kind!r}, {shape}, {stride}, {fmt(a.offset)})"
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return "(" + "".join(_arg_src(x, where, sv, extern_read) + ", " for x in a) + ")"
    if isinstance(a, list):
        return "[" + ", ".join(_arg_src(x, where, sv, extern_read) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_arg_src(v, where, sv, extern_read)}"
                               for k, v in a.items()) + "}"
    return _literal(a)


def _literal(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "float('nan')"
        if v in (float("inf"), float("-inf")):
            return f"float('{v}')"
    if isinstance(v, (bool, int, float, str, type(None))):
        return repr(v)
    import ember
    if isinstance(v, ember.dtype):
        return f"__import__('ember').{str(v).split('.')[-1]}"
    if isinstance(v, ember.device):
        return f"__import__('ember').device({str(v)!r})"
    import pickle
    return f"__import__('pickle').loads({pickle.dumps(v)!r})"


# ---- runtime helpers -----------------------------------------------------------------------
def _ptrs(*xs):
    vals = []
    for x in xs:
        if isinstance(x, np.ndarray):
            vals.append(x.__array_interface__["data"][0])
        else:
            vals.append(x.data_ptr())
    return (ctypes.c_void_p * max(1, len(vals)))(*vals)


_BUF_NAME = re.compile(r"(?<=[a-z]_)buf(\d+)\b")


def _ordinal_buffers(src: str) -> str:
    """A Triton kernel's accumulators named after its buffers (acc_buf13, red_buf13) renamed
    by order of appearance (acc_b0), outside comments: the same block of every layer then has
    one text, one name and one compile."""
    names: dict = {}

    def sub(m):
        return f"b{names.setdefault(m.group(1), len(names))}"
    return "\n".join(x if x.lstrip().startswith("#") else _BUF_NAME.sub(sub, x)
                     for x in src.splitlines())


def _c_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _as_tensor(x, kind, shape, stride, offset):
    """A tensor over buffer x (a flat numpy array or a tensor) with this layout."""
    if kind == "a":
        if stride == _c_strides(shape) and offset == 0 and x.size == _numel(shape):
            return Tensor._from_np(x.reshape(shape))
        return Tensor._from_np(x).as_strided(shape, stride, offset)
    if tuple(x.shape) == tuple(shape) and tuple(x.stride()) == tuple(stride) and offset == 0:
        return x
    return x.as_strided(shape, stride, x.storage_offset() + offset)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _out(x, kind, shape, stride, offset):
    return _as_tensor(x, kind, shape, stride, offset)


def _kgrain(s) -> int:
    return getattr(s, "grain", None) or _GRAIN


def _nthreads(work, grain=_GRAIN):
    return _ntcap(cpu_threads.static_threads(work, grain, _flags._threads or _NCPU))


def _ntcap(nt):
    """nt threads, at most the cores the 1-minute load average leaves free (as eager's JIT
    kernels and BLAS calls: threads past them get descheduled and the others wait)."""
    from ember._blas import free_cores
    return min(nt, free_cores())


def _writeback(dst, x, kind, shape, stride, offset):
    """An input's new value copied into it (as eager's in-place op: its version bumps)."""
    import ember
    with ember.no_grad():
        dst.copy_(_as_tensor(x, kind, shape, stride, offset))


def _relayout(t, shape, stride):
    """An extern result in the layout the kernels were generated for."""
    if not isinstance(t, Tensor):
        return t
    if tuple(t.stride()) == tuple(stride) or _numel(shape) <= 1:
        return t
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    flat = Tensor._from_np(np.empty(max(extent, 1), t.dtype.np), t.dtype)
    out = flat.as_strided(shape, stride, 0)
    np.copyto(out._np, t._np)
    return out


def _extern_call(op, a):
    args, kwargs = a
    r = op(*args, **kwargs)
    if isinstance(r, (tuple, list)):
        return list(r)
    return [r]


_ = (InputBuffer, Tensor)
