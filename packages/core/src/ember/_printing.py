"""Tensor printing in PyTorch's format (`tensor([[1., 2.], ...], dtype=ember.float64)`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _dtype as D

__all__ = ["set_printoptions", "get_printoptions", "tensor_repr"]


@dataclass
class _Options:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTS = _Options()
_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """Set how tensors print (as `torch.set_printoptions`)."""
    if profile is not None:
        for k, v in _PROFILES[profile].items():
            setattr(_OPTS, k, v)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            setattr(_OPTS, k, v)
    _OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    return dict(vars(_OPTS))


class _Formatter:
    """Chooses int / fixed / scientific formatting and a common width from the values shown."""

    def __init__(self, values: np.ndarray, kind: str):
        self.kind = kind
        self.int_mode = True
        self.sci = False
        self.width = 1
        p = _OPTS.precision
        if kind != "f":
            strs = [self._plain(v) for v in values.ravel()]
            self.width = max((len(s) for s in strs), default=1)
            return
        v = values.astype(np.float64).ravel()
        # the mode and the width come from the nonzero finite values alone (PyTorch's rule:
        # zeros print as "0." and nan/inf unpadded beyond that width)
        vals = v[np.isfinite(v) & (v != 0)]
        if vals.size == 0:
            return
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        mag = np.abs(vals)
        hi, lo = mag.max(), mag.min()
        self.sci = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        if _OPTS.sci_mode is not None:
            self.sci = _OPTS.sci_mode
        # the widest string is that of a value largest in magnitude for its sign (its sign and
        # integer digits) or, in scientific form, also of one smallest (a 3-digit exponent)
        cand = [vals.max(), vals.min()]
        if self.sci:
            pos, neg = vals[vals > 0], vals[vals < 0]
            cand += ([pos.min()] if pos.size else []) + ([neg.max()] if neg.size else [])
        for x in cand:
            if self.sci:
                n = len(f"{x:.{p}e}")
            elif self.int_mode:
                n = len(f"{x:.0f}") + 1
            else:
                n = len(f"{x:.{p}f}")
            self.width = max(self.width, n)

    def _plain(self, v) -> str:
        if self.kind == "b":
            return str(bool(v))
        return str(int(v))

    def format_raw(self, x) -> str:
        p = _OPTS.precision
        if self.kind != "f":
            return self._plain(x)
        x = float(x)
        if not math.isfinite(x):
            return str(x).replace("inf", "inf")
        if self.sci:
            return f"{x:.{p}e}"
        if self.int_mode:
            return f"{x:.0f}."
        return f"{x:.{p}f}"

    def format(self, x) -> str:
        return self.format_raw(x).rjust(self.width)


class _ComplexFormatter:
    """Complex values as PyTorch prints them: the real parts and the imaginary parts each get
    their own formatter (mode and width), joined as `re+imj`."""

    kind = "c"

    def __init__(self, values: np.ndarray):
        self.re, self.im = _Formatter(values.real, "f"), _Formatter(values.imag, "f")
        self.width = self.re.width + self.im.width + 1

    def format(self, x) -> str:
        im = (self.im.format(x.imag) + "j").lstrip()
        return self.re.format(x.real) + (im if im[0] in "+-" else "+" + im)


def _edges(t, edge: int):
    """(values, cut): t's values with every dim longer than 2*edge reduced to its first and
    last `edge` entries, gathered before anything is copied or formatted (so a huge or expanded
    tensor prints at once, as PyTorch's summarized printing does); cut[d] marks reduced dims."""
    cut = tuple(n > 2 * edge for n in t.shape)
    if any(cut):
        import ember
        d = t.ndim
        index = tuple(
            ember.tensor(list(range(edge)) + list(range(n - edge, n)) if c else list(range(n)),
                         dtype=ember.int64, device=t.device).reshape((-1,) + (1,) * (d - 1 - i))
            for i, (n, c) in enumerate(zip(t.shape, cut)))
        t = t.detach()[index]
    return _values(t), cut


def _fmt_array(a: np.ndarray, fmt: _Formatter, indent: int, cut: tuple) -> str:
    """a: the values shown; cut[d]: dim d was reduced to its edges, with "..." between them."""
    edge = _OPTS.edgeitems
    if a.ndim == 0:
        return fmt.format(a.item() if fmt.kind != "c" else a[()])
    if a.ndim == 1:
        items = [fmt.format(x) for x in a]
        if cut[0]:
            items = items[:edge] + [" ..." if edge else "..."] + items[edge:]
        per_line = max(1, (_OPTS.linewidth - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = list(range(a.shape[0]))
    if cut[0]:
        rows = rows[:edge] + [None] + rows[edge:]
    subs = ["..." if r is None else _fmt_array(a[r], fmt, indent + 1, cut[1:]) for r in rows]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(subs) + "]"


def _values(t) -> np.ndarray:
    a = t.detach()._host() if t.device.type != "meta" else None
    if a is not None and t.dtype in (D.bfloat16, D.float16, D.float8_e4m3fn, D.float8_e5m2):
        a = a.astype(np.float32)
    return a


def tensor_repr(t, prefix: str = "tensor(") -> str:
    suffixes = []
    dt = t.dtype
    default_dts = (D.get_default_dtype(), D.int64, D.bool,
                   D.get_default_dtype().to_complex())
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    indent = len(prefix)
    if t.device.type == "meta":
        body = "..."
        suffixes.insert(1, f"size={tuple(t.shape)}")
    elif t.numel() == 0:
        body = "[]"
        if tuple(t.shape) != (0,):
            suffixes.append(f"size={tuple(t.shape)}")
    else:
        kind = "b" if dt is D.bool else ("c" if dt.is_complex else (
            "f" if dt.is_floating_point else "i"))
        if t.numel() > _OPTS.threshold:
            a, cut = _edges(t, _OPTS.edgeitems)
        else:
            a, cut = _values(t), (False,) * t.ndim
        fmt = _ComplexFormatter(np.asarray(a)) if kind == "c" else _Formatter(np.asarray(a), kind)
        body = _fmt_array(a, fmt, indent, cut)
        if not _OPTS.edgeitems:  # nothing of a summarized tensor shows: PyTorch names its size
            suffixes.append(f"size={tuple(t.shape)}")
    if dt not in default_dts or (t.numel() == 0 and dt is not D.get_default_dtype()):
        if not (t.numel() == 0 and dt is D.get_default_dtype()):
            suffixes.append(f"dtype={dt}")
    if t.grad_fn is not None:
        name = t.grad_fn.name() if hasattr(t.grad_fn, "name") else type(t.grad_fn).__name__
        suffixes.append(f"grad_fn=<{name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)


def _with_suffixes(text: str, suffixes: list, indent: int) -> str:
    """Append `, dtype=...` and the like; one that would pass the line width starts a new line
    at the body's indent (as PyTorch prints)."""
    col = len(text) - text.rfind("\n") + 1  # PyTorch's count for the last line
    parts = [text]
    for s in suffixes:
        if col + len(s) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + s)
            col = indent + len(s)
        else:
            parts.append(", " + s)
            col += len(s) + 2
    return "".join(parts) + ")"
