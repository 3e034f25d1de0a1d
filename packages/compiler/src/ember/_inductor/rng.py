"""Random ops inside compiled CUDA graphs: rand, randn, their *_like forms and bernoulli (what
dropout decomposes to) become Philox draws in the fused Triton kernels, so `x * (rand >= p)`
is one kernel and no mask round-trips memory.

Every kernel reads the seed and the first counter from a 2-element int64 device tensor, the
graph's `rng_state`; element i of a graph's k-th random op draws counter
`ctr + base_k + i` (`base_k`: the elements of the graph's earlier random ops). The wrapper fills
that tensor at each call from the device's default generator (`take(total)`: the generator
advances, as eager's draws would). Under `mode="reduce-overhead"` the wrapper runs once, while
the CUDA graph records: the tensor is then a slot that `cudagraphs` refills before every replay,
so each replay draws new numbers (PyTorch's graph-safe Philox offsets do the same). The values
are not eager's stream; the distributions are (uniform: 24 random bits, as eager float32).

CPU graphs do the same in their C++ kernels (cpp.py's Philox4x32-10): the wrapper draws a fresh
key from the default CPU generator at each call (counter 0), so `ember.manual_seed` repeats a
compiled function's numbers and every call draws new ones; they are not eager's numbers.
"""
from __future__ import annotations

import contextlib

import sympy

from ember import _dtype as D
from ember._tensor import Tensor

from .ir import InputBuffer, TBox
from .lowering import cast, register_lowering
from .sizevars import contiguous_strides

__all__ = ["state", "recording", "refill", "graph_safe"]

_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)
_recording: list = []   # while a CUDA graph records: lists of (tensor, generator, n) slots


# ---- lowering --------------------------------------------------------------------------------
def rng_state(g) -> TBox:
    """The graph's (seed, counter) input, created on first use."""
    if getattr(g, "rng_buf", None) is None:
        g.rng_buf = InputBuffer("rng_state", (sympy.Integer(2),), D.int64, None)
        g.rng_total = sympy.Integer(0)
    return TBox.of(g.rng_buf)


def _cuda(g, meta) -> bool:
    """Whether the graph draws this op's numbers itself: a floating result in a CUDA graph
    (Triton's Philox) or a CPU graph (cpp.py's Philox)."""
    return (isinstance(meta, Tensor) and meta.dtype in _FLOATS and g.device in ("cuda", "cpu")
            and getattr(g, "_device_set", False))


def draw(h, kind: str, state: TBox, flat):
    """One Philox value ("uniform" in [0, 1) or "normal") for counter offset `flat`."""
    seed = h.load(state.buf, sympy.Integer(0))
    ctr = h.load(state.buf, sympy.Integer(1))
    return h.philox(kind, seed, ctr, flat)


def _random_box(g, shape, dtype, kind, finish=None) -> TBox:
    """A lazy TBox of fresh draws over `shape` (its own counters in the graph's range)."""
    st = rng_state(g)
    base = g.rng_total
    g.rng_total = sympy.expand(g.rng_total + sympy.Mul(*shape)) if shape else g.rng_total + 1
    cst = contiguous_strides(shape)

    def loader(h, idx):
        flat = sympy.expand(base + sum((i * s for i, s in zip(idx, cst)), sympy.Integer(0)))
        v = draw(h, kind, st, flat)
        if finish is not None:
            v = finish(h, v, idx)
        return cast(h, v, dtype)
    return TBox(shape, dtype, loader)


@register_lowering("rand", "randn", "rand_like", "randn_like")
def _rand(g, op, args, margs, meta):
    gen = args[1]
    if gen is not None or not _cuda(g, meta):
        return None  # another generator, or CPU: the op itself (an extern call)
    kind = "normal" if op.qualname.startswith("randn") else "uniform"
    return _random_box(g, g.sv.shape(meta.shape), meta.dtype, kind)


@register_lowering("bernoulli.p", "bernoulli")
def _bernoulli(g, op, args, margs, meta):
    x, gen = args[0], args[-1]
    if gen is not None or not _cuda(g, meta) or not isinstance(x, TBox):
        return None
    if op.qualname == "bernoulli.p":
        p = float(args[1])

        def finish(h, u, idx):
            return h.lt(u, h.v(D.float32.np.type(p)))
    else:
        from .lowering import bcast_load

        def finish(h, u, idx):
            return h.lt(u, cast(h, bcast_load(h, x, idx), D.float32))
    return _random_box(g, g.sv.shape(meta.shape), meta.dtype, "uniform", finish)


def graph_safe(node) -> bool:
    """Whether the compiler draws this graph node's random numbers itself (CUDA graphs may
    capture it): the ops above with the default generator. Others (randperm, multinomial, an
    explicit generator) run eager kernels whose seed a capture would bake in."""
    name = getattr(node.target, "qualname", None)
    if name not in _LOWERED:
        return False
    gen = node.kwargs.get("generator")
    if gen is None and name.startswith("bernoulli") and len(node.args) > (2 if name ==
                                                                         "bernoulli.p" else 1):
        gen = node.args[-1]
    return gen is None


_LOWERED = frozenset({"rand", "randn", "rand_like", "randn_like", "bernoulli.p", "bernoulli"})


# ---- runtime ---------------------------------------------------------------------------------
def _fill(t, seed: int, ctr: int) -> None:
    """Stream-ordered writes (kernels on the current stream, after the last replay's reads)."""
    import ember
    with ember.no_grad():
        t[0].fill_(seed)
        t[1].fill_(ctr)


def state(n: int, device: str = "cuda"):
    """A compiled graph's (seed, first counter) tensor for n draws, from the default generator
    (a refillable slot while a CUDA graph records)."""
    import ember
    if str(device) == "cpu":
        return cpu_state()
    from ember.cuda._random import default_generator
    t = ember.empty(2, dtype=ember.int64, device=device)
    gen = default_generator(t.device.index)
    if _recording:
        _recording[-1].append((t, gen, n))
        return t
    refill(t, gen, n)
    return t


def cpu_state():
    """A CPU graph's (key, first counter): a fresh 63-bit Philox key drawn from the default
    CPU generator (each call advances it, `ember.manual_seed` repeats the sequence)."""
    import numpy as np

    from ember import _random
    key = int(_random.default_generator.np.integers(0, 1 << 63))
    return np.array([key, 0], np.int64)


def refill(t, gen, n: int) -> None:
    seed, ctr = gen.take(max(int(n), 1))
    _fill(t, seed, ctr)


@contextlib.contextmanager
def recording():
    """Collect the rng slots of the compiled graphs a CUDA graph records (cudagraphs.py)."""
    slots: list = []
    _recording.append(slots)
    try:
        yield slots
    finally:
        _recording.pop()
