"""Eager CPU pointwise kernels in C++, generated from the op table's formulas.

The numpy handler runs a formula as one numpy pass per primitive, on one thread. For large
tensors the dispatcher asks `run(op, args, rdt, cdt)` instead: the formula is traced with the C++
handler (`_cppops.CppOps`) into the body of one loop, wrapped in a kernel for the call's layout
class, compiled with the system C++ compiler (OpenMP across `ember.get_num_threads()` threads),
loaded with ctypes and cached in memory and on disk (`~/.cache/ember/cpu_kernels/<hash>.so`, a
directory only this user can write, each library checked against its digest: `_kcache`).

Layout: operand shapes are broadcast to the output's, size-1 dims dropped and adjacent dims merged
where every operand allows it. Each operand is then `flat` (laid out like the C-contiguous
output), `one` (a single element) or `strided` (offsets from coordinates and its strides, so views
are read in place). All flat/one: one flat loop. Otherwise rows of the last dim, in parallel.

A kernel is keyed by (op, each argument's dtype / scalar kind / constant value, result and compute
dtypes, layout class) plus the guards its trace recorded on scalar values (`alpha == 1`). Anything
that cannot become C++ (a primitive without C++ code, a missing compiler, a failed compile) makes
`run` return None and the numpy handler runs the op: the JIT never fails a user's op.
EMBER_CPU_JIT=0 turns it off.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile

import numpy as np

from .. import _blas, _dispatch, _flags
from .. import _dtype as D
from .._size import broadcast_shapes, collapse_dims
from .._tensor import Tensor
from . import _kcache
from ._cppops import CT, PRELUDE, CppOps, NeedsConstant, Sym, Unsupported, Var, literal

__all__ = ["run", "available", "compile_batch", "THRESHOLD"]

THRESHOLD = 1 << 16   # output elements from which the C++ kernel runs (numpy's per-call cost is
#                       lower below it)
MAX_NDIM = 8
_GRAIN_LIGHT = 1 << 18  # elements per thread, at least: arithmetic only
_GRAIN_HEAVY = 1 << 15  # with transcendental calls (exp, erf, ...)
# -fno-trapping-math: FP exceptions are never inspected, so an FP op used on one side of a
# select may be computed for every lane (GCC if-converts and vectorizes masked loops)
FLAGS = ("-O3", "-std=c++17", "-fno-math-errno", "-fno-trapping-math", "-fwrapv", "-fopenmp",
         "-fPIC", "-shared", "-w")
_STORE = dict(CT)
_STORE[D.bfloat16] = "uint16_t"
_STORE[D.float16] = "_Float16"
# bool tensors are read as bytes and tested against 0: GCC 12 neither vectorizes nor if-converts
# a loop reading `bool` (a select on a random mask ran 6x slower, branch mispredictions)
_STORE[D.bool] = "uint8_t"
_log = logging.getLogger("ember.cpu_jit")

_compiler = None   # (path, version line), or False when unavailable / disabled
# vectorized for the running CPU (AVX2 + FMA units, libmvec's wide variants: gelu 6.2 -> 4.4 ms
# on 4M floats); no contraction into FMAs, so results stay numpy's roundings. EMBER_CPU_NATIVE=0:
# portable code only
NATIVE_FLAGS = ("-march=native", "-ffp-contract=off")
_native = None     # False once a native build failed (or EMBER_CPU_NATIVE=0)
_isa_sig = None
_mvec = None       # glibc's vector math library links here (x86-64 glibc >= 2.35)
_MVEC_FLAGS = ("-DEMBER_MVEC", "-lmvec")
_kernels: dict = {}  # key -> [(guards, fn or None)]
_NCPU = os.cpu_count() or 1
OMP_SPIN_COUNT = int(os.environ.get("EMBER_OMP_SPIN", "0"))   # see omp_env
_threads_after_fork = None  # 1 in a forked child: GNU OpenMP's thread pool is not fork-safe


def _after_fork():
    global _threads_after_fork
    _threads_after_fork = 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def available() -> bool:
    """Whether C++ kernels can be built here (checked once; EMBER_CPU_JIT=0 says no)."""
    global _compiler
    if _compiler is None:
        _compiler = False
        if os.environ.get("EMBER_CPU_JIT", "1") != "0":
            cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or \
                shutil.which("clang++")
            if cxx:
                try:
                    v = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                       timeout=30)
                    if v.returncode == 0:
                        _compiler = (cxx, v.stdout.splitlines()[0] if v.stdout else "")
                except (OSError, subprocess.SubprocessError):
                    pass
    return _compiler is not False


_broken = False  # the compiler failed on the bare prelude, or no private cache: no kernels


def _native_ok() -> bool:
    global _native
    if _native is None:
        _native = os.environ.get("EMBER_CPU_NATIVE", "1") != "0"
    return _native


def _isa() -> str:
    """The running CPU's identity for the cache key: its model and feature flags."""
    global _isa_sig
    if _isa_sig is None:
        sig = [os.uname().machine]
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith(("model name", "flags", "Features", "cpu model")):
                        sig.append(line.strip())
                    if line.strip() == "":
                        break  # the first processor's block
        except OSError:
            pass
        _isa_sig = "\n".join(sig)
    return _isa_sig


def _build(sources: list[str]):
    """Compile kernel sources into one shared library (or load it from the disk cache).
    None when it cannot: the caller runs numpy (an OS error here never fails the user's op)."""
    global _broken, _native
    try:
        d = _kcache.cache_dir()
        if d is None:  # (warned once) nowhere safe to keep libraries: numpy for this process
            _broken = True
            return None
        src = PRELUDE + "\n".join(sources)
        for native in ((True, False) if _native_ok() else (False,)):
            flags = FLAGS + (_MVEC_FLAGS if _use_mvec(d) else ()) + (NATIVE_FLAGS if native
                                                                      else ())
            # the ISA is in the key: a cache directory shared by different CPUs (a network
            # home) never hands one of them another's -march=native library
            h = hashlib.sha256("\0".join((src, _compiler[1], " ".join(flags),
                                          _isa() if native else "")).encode()).hexdigest()
            h = h[:32]
            path = os.path.join(d, f"{h}.so")
            if os.path.exists(path) and _kcache.verified(h, path):
                break
            if _compile(src, flags, d, path, bool(sources) and not native):
                _kcache.record_digest(h, path)
                if not native and _native:  # native failed where portable builds: stop trying
                    _native = False
                break
            if not native:
                return None
            # else the portable build is the fallback (a compiler without -march=native)
    except OSError as e:
        _log.warning("ember: C++ kernel cache failed, using numpy kernels: %s", e)
        return None
    try:
        with omp_env():
            return ctypes.CDLL(path)
    except OSError as e:
        _log.warning("ember: could not load C++ kernels (%s), using numpy kernels", e)
        return None


@contextlib.contextmanager
def omp_env():
    """GNU OpenMP's wait policy while a kernel library loads (libgomp reads it once, when the
    first one brings it in): idle pool threads sleep at once (PASSIVE) instead of spinning ~9 ms
    (libgomp's default), which on a busy machine steals the caller's core. EMBER_OMP_SPIN=n:
    they spin n pauses first (~45 ns each on the 2-core EPYC: 1000 is ~45 us), so a parallel
    region right after another finds its thread awake and the caller does not sleep at the join;
    opt-in: the spin also takes the core from the BLAS thread of the GEMM that usually follows a
    kernel (+9 ms of CPU a GPT step at 2000, measured under load). With more threads than cores
    (throttled) they sleep at once either way. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins."""
    env = os.environ
    if "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        yield
        return
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    if OMP_SPIN_COUNT > 0:
        env["GOMP_SPINCOUNT"] = str(OMP_SPIN_COUNT)
    try:
        yield
    finally:
        env.pop("OMP_WAIT_POLICY", None)
        env.pop("GOMP_SPINCOUNT", None)


def _compile(src: str, flags, d: str, path: str, has_kernels: bool) -> bool:
    """Compile src into path (through a temporary file in d, then an atomic rename)."""
    global _broken
    cxx = _compiler[0]
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=d)
    os.close(fd)
    cpp = tmp[:-3] + ".cpp"
    try:
        with open(cpp, "w") as f:
            f.write(src)
        r = subprocess.run([cxx, *flags, cpp, "-o", tmp], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            _log.warning("ember: C++ kernel compile failed, using numpy kernels: %s",
                         r.stderr[-2000:])
            if has_kernels and not _prelude_compiles():
                _broken = True
            return False
        os.replace(tmp, path)  # atomic: concurrent processes never load a partial file
        return True
    except (OSError, subprocess.SubprocessError) as e:
        _log.warning("ember: C++ kernel compile failed, using numpy kernels: %s", e)
        _broken = True
        return False
    finally:
        for p in (cpp, tmp):
            if os.path.exists(p):
                os.unlink(p)


def _use_mvec(d: str) -> bool:
    global _mvec
    if _mvec is None:
        # the probe's answer is kept beside the kernels (in d): new processes skip the probe
        h = hashlib.sha256("\0".join((PRELUDE, _compiler[1])).encode()).hexdigest()[:32]
        mark = os.path.join(d, f"mvec-{h}")
        if os.path.exists(mark + ".yes") or os.path.exists(mark + ".no"):
            _mvec = os.path.exists(mark + ".yes")
        else:
            _mvec = os.uname().machine == "x86_64" and _prelude_compiles(_MVEC_FLAGS)
            try:
                open(mark + (".yes" if _mvec else ".no"), "w").close()
            except OSError:
                pass
    return _mvec


def _prelude_compiles(extra=()) -> bool:
    """Whether the helpers compile, link and load (with extra flags: libmvec's functions)."""
    cxx = _compiler[0]
    try:
        with tempfile.TemporaryDirectory() as t:  # private (0700): the library is loaded below
            cpp, so = os.path.join(t, "p.cpp"), os.path.join(t, "p.so")
            with open(cpp, "w") as f:
                # calls through vector functions: a libmvec without them fails to load
                f.write(PRELUDE + 'extern "C" void ember_probe(float* x, int n) {\n'
                        '  for (int i = 0; i < n; ++i) x[i] = std::erf(x[i]) + std::tanh(x[i]) + '
                        'std::log1p(x[i]) + std::exp(x[i]) + std::atan2(x[i], 1.0f);\n}\n')
            r = subprocess.run([cxx, *FLAGS, *extra, cpp, "-o", so], capture_output=True,
                               timeout=300)
            if r.returncode != 0:
                return False
            ctypes.CDLL(so)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


# ---- layout ------------------------------------------------------------------------------------
def _mode(sizes, strides) -> str:
    if all(s == 0 for s in strides):
        return "one"
    expect = 1
    for n, s in zip(reversed(sizes), reversed(strides)):
        if s != expect:
            return "flat" if n == 1 else "strided"
        expect *= n
    return "flat"


class _Call:
    """One call's kernel key and launch arguments."""

    __slots__ = ("key", "shape", "n", "ptrs", "sizes", "strides", "fs", "is_", "slots", "ndim",
                 "modes", "scalars")


def _prepare(op, args, rdt, cdt):
    if cdt not in CT or rdt not in _STORE:
        return None
    pw = op.pw_idx
    slots, arrays, shapes, sig = [], [], [], []
    scalars = []  # (arg index, C type of the parameter, typed dtype or None, python kind)
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a.device.type != "cpu" or a.dtype not in _STORE or (
                    i not in pw and a.dtype not in CT):
                return None
            x = a._np
            slots.append((i, a.dtype))
            arrays.append(x)
            shapes.append(x.shape)
            sig.append(("T", a.dtype))
        elif i in pw and a is not None:
            if isinstance(a, np.generic):
                a = a.item()
            if not isinstance(a, (bool, int, float)) or (
                    isinstance(a, int) and not -2**63 <= a < 2**63):
                return None
            scalars.append((i, cdt, None))
            sig.append(("S",))
        elif a.__class__ in (bool, int, float):
            if a.__class__ is int and not -2**63 <= a < 2**63:
                return None
            scalars.append((i, None, a.__class__))
            sig.append(("s", a.__class__))
        else:
            if isinstance(a, list):
                a = tuple(a)
            try:
                hash(a)
            except TypeError:
                return None
            sig.append(("v", a.__class__, a))
    if not arrays:
        return None
    shape = shapes[0]
    if all(x.shape == shape and x.flags.c_contiguous for x in arrays):
        # the common case: every operand laid out like the output, one flat loop
        n = arrays[0].size
        if n < THRESHOLD:
            return None
        sizes, modes, strided, flat_st = [n], ("flat",) * len(arrays), False, []
    else:
        shape = broadcast_shapes(*shapes)
        n = 1
        for s in shape:
            n *= s
        if n < THRESHOLD:
            return None
        nd = len(shape)
        st = []
        for x in arrays:
            item = x.itemsize
            pad = nd - x.ndim
            r = [0] * nd
            for j, (sz, s) in enumerate(zip(x.shape, x.strides)):
                if sz != 1:
                    r[pad + j] = s // item
            st.append(r)
        sizes, sts = collapse_dims(shape, st)
        modes = tuple(_mode(sizes, s) for s in sts)
        strided = "strided" in modes
        if strided and len(sizes) > MAX_NDIM:
            return None
        flat_st = [v for s, m in zip(sts, modes) if m == "strided" for v in s]
    c = _Call()
    c.key = (op.qualname, tuple(sig), rdt, cdt, modes, len(sizes) if strided else 0)
    c.shape, c.n, c.slots, c.modes, c.scalars = shape, n, slots, modes, scalars
    c.ndim = len(sizes) if strided else 0
    c.ptrs = [x.ctypes.data for x in arrays]
    c.sizes = sizes
    c.strides = flat_st
    return c


# ---- code generation ---------------------------------------------------------------------------
def _load(code, sdt, cdt, to_compute):
    """C++ for one element of storage dtype sdt, converted to the compute dtype if promoted."""
    if sdt is D.bfloat16:
        code = f"em_bf2f({code})"
        sdt = D.float32
    elif sdt is D.float16:
        code = f"static_cast<float>({code})"
        sdt = D.float32
    elif sdt is D.bool:
        code = f"({code} != 0)"
    if not to_compute or sdt is cdt:
        return code
    return f"({code} != 0)" if cdt is D.bool else f"static_cast<{CT[cdt]}>({code})"


def _store(res: Var, rdt) -> str:
    if rdt is D.bfloat16:
        return f"em_f2bf(static_cast<float>({res.code}))"
    if rdt is D.float16:
        return f"static_cast<_Float16>({res.code})"
    if res.dtype is rdt and not res.weak:
        return res.code
    return f"({res.code} != 0)" if rdt is D.bool else f"static_cast<{CT[rdt]}>({res.code})"


def _trace(op, args, call, cdt):
    """Run the formula on symbolic values: (handler, result Var, guards)."""
    h = CppOps()
    guards: list = []
    a = list(args)
    pw = op.pw_idx
    for i, dt in call.slots:
        a[i] = Var(f"a{i}", cdt if i in pw else dt)
    for i, typed, kind in call.scalars:
        if typed is not None:
            v = args[i].item() if isinstance(args[i], np.generic) else args[i]
            a[i] = Sym(f"s{i}", typed, None, v, lambda A, i=i: A[i], guards)
        else:
            a[i] = Sym(f"s{i}", {bool: D.bool, int: D.int64, float: D.float64}[kind], kind,
                       args[i], lambda A, i=i: A[i], guards)
    r = op.pointwise(h, *a)
    return h, h.v(r), guards


def _source(name, op, call, h, res, rdt, cdt) -> str:
    """One extern "C" kernel: int name(ptrs, sizes, strides, n, fscalars, iscalars, threads),
    returning 1 when an integer division by zero happened."""
    pw = op.pw_idx
    lines = [f'extern "C" int {name}(char** P, const int64_t* S, const int64_t* ST, int64_t n, '
             f'const double* F, const int64_t* I, int nt) {{',
             "  auto range = [&](int64_t r0, int64_t r1) -> int {",
             # declared inside the lambda: a captured __restrict pointer loses its promise and
             # the loop would not vectorize
             f"  {_STORE[rdt]}* __restrict o = ({_STORE[rdt]}*)P[0];"]
    for k, (i, dt) in enumerate(call.slots):
        lines.append(f"  const {_STORE[dt]}* __restrict p{i} = (const {_STORE[dt]}*)P[{k + 1}];")
    nf = ni = 0
    for i, typed, kind in call.scalars:
        d = typed or {bool: D.bool, int: D.int64, float: D.float64}[kind]
        if d._cat == 2:
            src, nf = f"F[{nf}]", nf + 1
        else:
            src, ni = f"I[{ni}]", ni + 1
        conv = f"({src} != 0)" if d is D.bool else f"static_cast<{CT[d]}>({src})"
        lines.append(f"  const {CT[d]} s{i} = {conv};")
    nd = call.ndim
    strided_slots = [i for (i, _), m in zip(call.slots, call.modes) if m == "strided"]
    for k, i in enumerate(strided_slots):
        lines.append(f"  const int64_t* st{i} = ST + {k * nd};")
    body = []
    idx = "i" if nd == 0 else "(ob + j)"
    for (i, dt), m in zip(call.slots, call.modes):
        at = {"flat": idx, "one": "0", "strided": f"b{i} + j * st{i}[{nd - 1}]"}[m]
        ct = CT[cdt if i in pw else dt]
        body.append(f"{ct} a{i} = {_load(f'p{i}[{at}]', dt, cdt, i in pw)};")
    body += h.lines
    body.append(f"o[{idx}] = {_store(res, rdt)};")
    lines.append("    int bad = 0;")
    if nd == 0:
        lines.append("    for (int64_t i = r0; i < r1; ++i) {")
        lines += ["      " + b for b in body]
        lines.append("    }")
    else:
        lines.append(f"    const int64_t L = S[{nd - 1}];")
        lines.append("    for (int64_t r = r0; r < r1; ++r) {")
        lines.append("      int64_t rem = r, c;")
        for i in strided_slots:
            lines.append(f"      int64_t b{i} = 0;")
        for d in range(nd - 2, -1, -1):
            lines.append(f"      c = rem % S[{d}]; rem /= S[{d}];")
            for i in strided_slots:
                lines.append(f"      b{i} += c * st{i}[{d}];")
        lines.append("      const int64_t ob = r * L;")
        lines.append("      for (int64_t j = 0; j < L; ++j) {")
        lines += ["        " + b for b in body]
        lines.append("      }")
        lines.append("    }")
    lines.append("    return bad;")
    lines.append("  };")
    lines.append(f"  const int64_t total = {'n' if nd == 0 else f'n / S[{nd - 1}]'};")
    lines += ["  if (nt <= 1 || total < 2) return range(0, total);",
              "  int bad = 0;",
              "  #pragma omp parallel num_threads(nt) reduction(|:bad)",
              "  {",
              "    const int64_t m = omp_get_num_threads(), t = omp_get_thread_num();",
              "    const int64_t per = (total + m - 1) / m, a = t * per;",
              "    const int64_t b = a + per < total ? a + per : total;",
              "    if (a < b) bad |= range(a, b);",
              "  }",
              "  return bad;",
              "}"]
    return "\n".join(lines) + "\n"


# ---- kernels -----------------------------------------------------------------------------------
_ARGTYPES = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
             ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.POINTER(ctypes.c_double),
             ctypes.POINTER(ctypes.c_int64), ctypes.c_int]


def _holds(guards, args) -> bool:
    try:
        return all(bool(p(args)) == out for p, out in guards)
    except Exception:  # noqa: BLE001 - a guard that cannot be evaluated does not hold
        return False


def _entry(op, args, call, rdt, cdt):
    """The cached (guards, fn, needs-source) for this call, tracing a new one if none holds."""
    entries = _kernels.setdefault(call.key, [])
    for e in entries:
        if _holds(e[0], args):
            return e
    try:
        h, res, guards = _trace(op, args, call, cdt)
        if res.dtype not in CT:
            raise Unsupported(f"result dtype {res.dtype}")
        src = _source("KERNEL", op, call, h, res, rdt, cdt)
        # elements per thread: waking a thread costs about as much as adding 100k floats
        grain = _GRAIN_HEAVY if any("std::" in line for line in h.lines) else _GRAIN_LIGHT
    except (NeedsConstant, Unsupported):
        guards, src, grain = [], None, 0
    except Exception as e:  # noqa: BLE001 - a formula written for numpy only
        _log.debug("ember: no C++ kernel for %s: %s", op.qualname, e)
        guards, src, grain = [], None, 0
    e = [guards, None, src, grain]
    entries.append(e)
    return e


def _attach(pending):
    """Compile the entries' sources in one translation unit; set their functions."""
    if not pending or _broken:
        for e in pending:
            e[2] = None
        return
    srcs = [e[2].replace('int KERNEL(', f'int ember_k{j}(', 1) for j, e in enumerate(pending)]
    lib = _build(srcs)
    for j, e in enumerate(pending):
        e[2] = None
        fn = getattr(lib, f"ember_k{j}", None) if lib is not None else None
        if fn is not None:
            fn.argtypes, fn.restype = _ARGTYPES, ctypes.c_int
            e[1] = fn


def compile_batch(calls) -> int:
    """Build the kernels for many (op, args, rdt, cdt) calls in one compiler run (tests, warm
    up). Returns how many kernels were compiled."""
    if not available():
        return 0
    pending = []
    for op, args, rdt, cdt in calls:
        c = _prepare(op, args, rdt, cdt)
        if c is None:
            continue
        e = _entry(op, args, c, rdt, cdt)
        if e[2] is not None and all(e is not p for p in pending):
            pending.append(e)
    _attach(pending)
    return len(pending)


def run(op, args, rdt, cdt):
    """op(args) as a C-contiguous numpy array of dtype rdt, computed by a C++ kernel; None when
    the call is small or has no kernel (the caller runs the numpy formula)."""
    if _compiler is False or (_compiler is None and not available()) or _broken:
        return None
    for i in op.tensor_idx:  # small calls leave at once (outer broadcasts of small inputs too)
        a = args[i]
        if isinstance(a, Tensor) and a.device.type == "cpu" and a._np.size >= THRESHOLD:
            break
    else:
        return None
    c = _prepare(op, args, rdt, cdt)
    if c is None:
        return None
    e = _entry(op, args, c, rdt, cdt)
    if e[2] is not None:
        _attach([e])
    fn = e[1]
    if fn is None:
        return None
    out = np.empty(c.shape, rdt.np)
    ptrs = (ctypes.c_void_p * (len(c.ptrs) + 1))(out.ctypes.data, *c.ptrs)
    fs, is_ = [], []
    for i, typed, kind in c.scalars:
        v = args[i]
        if isinstance(v, np.generic):
            v = v.item()
        if (typed or {float: D.float64}.get(kind, D.int64))._cat == 2:
            fs.append(float(v))
        else:
            is_.append(int(v))
    sizes = (ctypes.c_int64 * max(1, len(c.sizes)))(*c.sizes)
    strides = (ctypes.c_int64 * max(1, len(c.strides)))(*c.strides)
    fa = (ctypes.c_double * max(1, len(fs)))(*fs)
    ia = (ctypes.c_int64 * max(1, len(is_)))(*is_)
    nt = min(_threads_after_fork or _flags._threads or _NCPU, c.n // e[3] + 1)
    if nt > 1:  # a thread the machine cannot run now stalls the statically split loop
        nt = min(nt, _blas.free_cores())
    if fn(ptrs, sizes, strides, c.n, fa, ia, nt):
        raise RuntimeError("ZeroDivisionError")
    return out


_ = literal  # re-exported for tests that build constants
_dispatch.CPU_JIT = run
