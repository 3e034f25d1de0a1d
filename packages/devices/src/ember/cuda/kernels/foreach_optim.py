"""Multi-tensor (foreach) optimizer steps on CUDA: one launch updates up to 16 parameters.

ember.optim asks the parameters' backend for `foreach_optim(kind, lists, hyper)` and takes its
per-parameter path when the answer is False (nothing was changed then): here when a tensor is
float64 (PyTorch's kernels compute in double there; the op path does too), not on the
parameters' device, or laid out other than contiguous (a gradient may also be the transposed
view a linear layer's weight gradient is, read in place).

A kernel is generated per (kind, number of slots, which gradients are transposed): program i
finds its parameter by comparing i with the running block counts, then runs the block update of
foreach_optim_tl. Parameters are bucketed by (device, dtype, step value) and cut into launches of
at most 16 slots (a launch's slot count is rounded up to a power of two; spare slots are empty).
Capturable Adam keeps its step counters on the device: one more single-program launch adds 1 to
them, then the update reads them, so nothing is read back to the host and the whole step can be
captured in a CUDA graph.
"""
from __future__ import annotations

import math

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from ..runtime import driver as rt

__all__ = ["foreach_optim"]

_OK = (D.float32, D.float16, D.bfloat16)
_BLOCK = 1024
_SLOTS = 16
_kernels: dict = {}     # (kind, slots, transposed-grad flags) -> JITFunction
_mods: list = []        # [foreach_optim_tl, base._launch, pointwise.load_kernel] once loaded
# _key(...) -> [(compiled launch, raw arguments, scalars' parameter, gradient positions)]
_memo: dict = {}
_MEMO_MAX = 256


def _grad_layout(p, g):
    """(ncols, stride) of g's layout against p's: (n, 1) contiguous, (cols, rows) for the
    transposed 2-D view; None for anything else."""
    if g._shape != p._shape:
        return None
    if g.is_contiguous():
        return (1, 0)
    if g.ndim == 2 and g.stride() == (1, g._shape[0]):
        return (g._shape[1], g._shape[0])
    return None


def _applicable(lists, dev) -> bool:
    """Every tensor of every slot can go to the kernels (checked before anything runs).
    lists: params, grads, then per-parameter states shaped as the parameter, then (Adam) the
    device step counters or None."""
    params, grads = lists[0], lists[1]
    states = lists[2:5] if len(lists) == 6 else lists[2:]
    steps = lists[5] if len(lists) == 6 else None
    for i, p in enumerate(params):
        d = p.dtype
        if not isinstance(p, Tensor) or d not in _OK or p.device != dev \
                or not p.is_contiguous():
            return False
        g = grads[i]
        if not isinstance(g, Tensor) or g.dtype is not d or g.device != dev \
                or g._shape != p._shape:
            return False
        for lst in states:
            t = lst[i] if lst is not None else None
            if t is not None and (not isinstance(t, Tensor) or t.device != dev
                                  or t.dtype is not d or t._shape != p._shape
                                  or not t.is_contiguous()):
                return False
        if steps is not None:
            s = steps[i]
            if not isinstance(s, Tensor) or s.device != dev or s.numel() != 1 \
                    or s.dtype not in _OK:
                return False
    return True


def _source(kind: str, slots: int, gts: tuple) -> str:
    """A kernel over `slots` parameters (generated: Triton has no arrays of pointers as
    arguments); gts[i]: slot i's gradient is a transposed 2-D view."""
    roles = ("P", "G", "M", "V", "X", "S") if kind == "adam" else ("P", "G", "B")
    args, nospec, body = [], [], ["pid = tl.program_id(0)"]
    for i in range(slots):
        args += [f"{r}{i}" for r in roles] + [f"N{i}", f"E{i}", f"C{i}", f"T{i}"]
        nospec += [f"N{i}", f"E{i}", f"C{i}", f"T{i}"]
    if kind == "adam":
        scal = ["lr", "beta1", "beta2", "lb1", "lb2", "eps", "wd", "bc1", "bc2s"]
        flags = ["MAXIMIZE", "WD", "AMSGRAD", "CAPTURABLE", "LR_PTR"]
    else:
        scal = ["lr", "momentum", "damp", "wd"]
        flags = ["MAXIMIZE", "HAS_WD", "MOMENTUM", "NESTEROV", "LR_PTR"]
    nospec += scal
    for i in range(slots):
        head = "if" if i == 0 else "elif"
        blk = "pid" if i == 0 else f"pid - E{i - 1}"
        ptrs = ", ".join(f"{r}{i}" for r in roles)
        call = (f"{kind}_block({ptrs}, LRP, {blk}, N{i}, C{i}, T{i}, {', '.join(scal)}, "
                f"{', '.join(flags)}, {bool(gts[i])}, BLOCK)")
        body += [f"{head} pid < E{i}:", f"    {call}"]
    name = f"foreach_{kind}_{slots}"
    params = args + ["LRP"] + scal + [f"{f}: tl.constexpr" for f in flags] \
        + ["BLOCK: tl.constexpr"]
    src = ["import triton", "import triton.language as tl",
           f"from ember.cuda.kernels.foreach_optim_tl import {kind}_block", "", "",
           f"@triton.jit(do_not_specialize={nospec!r})",
           f"def {name}({', '.join(params)}):"]
    return "\n".join(src + ["    " + line for line in body]) + "\n"


def _inc_source(slots: int) -> str:
    """One program adding 1 to `slots` step counters."""
    body = []
    for i in range(slots):
        body += [f"s = tl.load(S{i})", f"tl.store(S{i}, s + 1)"]
    src = ["import triton", "import triton.language as tl", "", "", "@triton.jit",
           f"def foreach_inc_{slots}({', '.join(f'S{i}' for i in range(slots))}):"]
    return "\n".join(src + ["    " + line for line in body]) + "\n"


def _kernel(kind, slots, gts=()):
    key = (kind, slots, gts)
    k = _kernels.get(key)
    if k is None:
        load = _mods[2]
        if kind == "inc":
            k = load(_inc_source(slots), f"foreach_inc_{slots}")
        else:
            k = load(_source(kind, slots, gts), f"foreach_{kind}_{slots}")
        _kernels[key] = k
    return k


def _slots(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _chunks(idx):
    for s in range(0, len(idx), _SLOTS):
        yield idx[s:s + _SLOTS]


def _launch_update(be, kind, lists, idx, scalars, lrp, flags, rec):
    """One launch over the parameters idx (<= 16) of lists."""
    params, grads = lists[0], lists[1]
    slots = _slots(len(idx))
    args, gts, end, gpos = [], [], 0, []
    for j in range(slots):
        if j < len(idx):
            i = idx[j]
            p, g = params[i], grads[i]
            ncols, gs = _grad_layout(p, g) or (1, 0)
            gts.append(gs != 0)
            n = p.numel()
            end += -(-n // _BLOCK)
            row = [p, g] + [(lst[i] if lst is not None and lst[i] is not None else p)
                            for lst in lists[2:]]
            gpos.append((len(args) + 1, i))
            args += row + [n, end, ncols, gs]
        else:  # a spare slot: no blocks
            gts.append(False)
            gpos.append((len(args) + 1, idx[0]))
            args += args[:len(lists)] + [0, end, 1, 0]
    if end == 0:
        return
    args.append(lrp if lrp is not None else params[idx[0]])
    _go(be, _kernel(kind, slots, tuple(gts)), (end,), args, scalars, dict(flags, BLOCK=_BLOCK),
        rec, idx[0], tuple(gpos))


def _go(be, K, grid, args, scalars, constexprs, rec, rep=None, gpos=()):
    """Launch K, and note in rec what a later call with the same tensors repeats: the compiled
    launch, the raw arguments, whose scalars follow them (rep: a parameter index) and where
    the gradients' addresses are (gpos: (argument position, parameter index): a gradient is
    new memory after each backward that set the old one to None, so a replay puts its
    address there)."""
    _mods[1](be, K, grid, args + scalars, (), constexprs)
    last = be._rowlaunch.last
    if rec is None:
        return
    if last is None:  # (the fake device without launch plans): this call is not memoized
        rec.append(None)
        return
    raw = [a.data_ptr() if isinstance(a, Tensor) else a for a in args]
    rec.append((last + (grid, ()), raw, rep, gpos))


def _inc_steps(be, steps, rec):
    for idx in _chunks(list(range(len(steps)))):
        _go(be, _kernel("inc", len(idx)), (1,), [steps[i] for i in idx], [], {}, rec)


def _buckets(params, steps):
    """Parameter indices grouped by (dtype, step value) in first-seen order."""
    out: dict = {}
    for i, p in enumerate(params):
        out.setdefault((p.dtype, steps[i] if steps is not None else None), []).append(i)
    return out


def _lr(hyper):
    """(float lr, the lr tensor on the device or None)."""
    lr = hyper["lr"]
    if isinstance(lr, Tensor):
        if lr.device.type == "cuda":
            return 0.0, lr
        return float(lr.item()), None
    return float(lr), None


def _head(kind, lists, hyper, lrp):
    k = [kind, lists[0][0].device, lrp.data_ptr() if lrp is not None else None]
    k += [v for n, v in sorted(hyper.items()) if n not in ("lr", "step_values")
          and not isinstance(v, (list, Tensor))]
    values = hyper.get("step_values")
    if values is not None and any(v != values[0] for v in values):
        k.append(tuple(values))
    return k


def _key(kind, lists, hyper, lrp):
    """(key, the gradients' addresses): what decides the launches of a call (kind, flags, every
    parameter's and state's address and layout, each gradient's layout and 16-byte alignment,
    the step values' grouping). Equal keys launch the same kernels on the same memory, the
    gradients' addresses put in (None: the key holds them too, a tensor not on cuda)."""
    params, grads = lists[0], lists[1]
    k = _head(kind, lists, hyper, lrp)
    # (addresses read from the storages' buffers directly: data_ptr() is four Python calls, and
    # this runs for every tensor of every step)
    rest = [lst for lst in lists[2:] if lst is not None]
    gaddr = []
    try:
        for i, p in enumerate(params):
            g = grads[i]
            ga = g._st.data.ptr + g._offset * g.dtype.itemsize
            gaddr.append(ga)
            k.append((p._st.data.ptr + p._offset * p.dtype.itemsize, p._shape, p._stride,
                      p.dtype, ga % 16 == 0, g._shape, g._stride, g.dtype))
            for lst in rest:
                t = lst[i]
                k.append(t._st.data.ptr + t._offset * t.dtype.itemsize if t is not None
                         else None)
    except AttributeError:
        return _key_slow(kind, lists, hyper, lrp), None
    return tuple(k), gaddr


def _key_slow(kind, lists, hyper, lrp):
    params, grads = lists[0], lists[1]
    k = _head(kind, lists, hyper, lrp)
    for i, p in enumerate(params):
        g = grads[i]
        k.append((p.data_ptr(), p._shape, p._stride, p.dtype, g.data_ptr(), g._stride, g.dtype))
        for lst in lists[2:]:
            if lst is not None:
                t = lst[i]
                k.append(t.data_ptr() if t is not None else None)
    return tuple(k)


def _replay(be, kind, launches, hyper, lr, gaddr):
    """The launches of an earlier call with the same key, straight to the compiled kernels
    (this call's gradient addresses put in)."""
    fast = be._rowlaunch.fast
    scalars = _adam_scalars if kind == "adam" else _sgd_scalars
    values = hyper.get("step_values")
    cache: dict = {}
    for plan, raw, rep, gpos in launches:
        if gpos and gaddr is not None:
            raw = list(raw)
            for pos, i in gpos:
                raw[pos] = gaddr[i]
        if rep is None:
            fast(plan, raw)
            continue
        scal = cache.get(rep)
        if scal is None:
            scal = cache[rep] = scalars(hyper, lr, values, rep)
        fast(plan, raw + scal)


def foreach_optim(be, kind, lists, hyper) -> bool:
    """Update every parameter of lists in a few launches; False: nothing done (op path)."""
    params = lists[0]
    if not params:
        return True
    dev = params[0].device
    lr, lrp = _lr(hyper)
    if lrp is not None and (lrp.device != dev or lrp.numel() != 1 or lrp.dtype not in _OK):
        return False
    key, gaddr = _key(kind, lists, hyper, lrp)
    launches = _memo.get(key)
    if launches is not None:
        rt.ensure_context(dev.index or 0)
        _replay(be, kind, launches, hyper, lr, gaddr)
        _bump(lists)
        return True
    if kind not in ("adam", "sgd") or not _applicable(lists, dev):
        return False
    if not _mods:  # the kernels import triton: on first use
        from . import foreach_optim_tl
        from .base import _launch
        from .pointwise import load_kernel
        _mods[:] = [foreach_optim_tl, _launch, load_kernel]
    lists = list(lists)
    rt.ensure_context(dev.index or 0)
    grads = lists[1]
    rec: list | None = []
    if any(_grad_layout(p, g) is None for p, g in zip(params, grads)):  # one copy each
        lists[1] = [g if _grad_layout(p, g) is not None else be._copy_new(g, g.dtype)
                    for p, g in zip(params, grads)]
        rec = None  # (the copies are new memory every call)
    (_adam if kind == "adam" else _sgd)(be, lists, hyper, lr, lrp, rec)
    if rec and None not in rec:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[key] = rec
    _bump(lists)
    return True


def _bump(lists):
    for lst in lists[:1] + lists[2:]:
        for t in lst or ():
            if t is not None:
                st = t._st  # (a cuda tensor's Storage is always made: _bump() without the
                if st is None:  # property)
                    t._bump()
                else:
                    st.version += 1


def _adam_scalars(h, lr, values, rep):
    beta1, beta2 = float(h["beta1"]), float(h["beta2"])
    lb1 = math.log2(beta1) if beta1 > 0 else -math.inf
    lb2 = math.log2(beta2) if beta2 > 0 else -math.inf
    if values is None:  # capturable: the kernel reads the step counter
        bc1 = bc2s = 1.0
    else:
        step = values[rep]
        bc1, bc2s = 1 - beta1 ** step, (1 - beta2 ** step) ** 0.5
    return [lr, beta1, beta2, lb1, lb2, float(h["eps"]), float(h["weight_decay"]), bc1, bc2s]


def _sgd_scalars(h, lr, values, rep):
    return [lr, float(h["momentum"]), float(h["dampening"]), float(h["weight_decay"])]


def _adam(be, lists, h, lr, lrp, rec):
    params, steps = lists[0], lists[5]
    wd = float(h["weight_decay"])
    cap = bool(h["capturable"])
    flags = {"MAXIMIZE": bool(h["maximize"]),
             "WD": 0 if wd == 0 else (1 if h["decoupled"] else 2),
             "AMSGRAD": bool(h["amsgrad"]), "CAPTURABLE": cap, "LR_PTR": lrp is not None}
    values = None if cap else h["step_values"]
    if cap:
        _inc_steps(be, steps, rec)
    for idx in _buckets(params, values).values():
        scal = _adam_scalars(h, lr, values, idx[0])
        for chunk in _chunks(idx):
            _launch_update(be, "adam", lists[:6], chunk, scal, lrp, flags, rec)


def _sgd(be, lists, h, lr, lrp, rec):
    momentum, wd = float(h["momentum"]), float(h["weight_decay"])
    flags = {"MAXIMIZE": bool(h["maximize"]), "HAS_WD": wd != 0,
             "MOMENTUM": momentum != 0, "NESTEROV": bool(h["nesterov"]),
             "LR_PTR": lrp is not None}
    scal = _sgd_scalars(h, lr, None, 0)
    for idx in _buckets(lists[0], None).values():
        for chunk in _chunks(idx):
            _launch_update(be, "sgd", lists[:3], chunk, scal, lrp, flags, rec)
