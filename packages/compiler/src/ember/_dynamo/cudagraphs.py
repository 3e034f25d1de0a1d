"""`mode="reduce-overhead"`: a compiled graph's callable replayed as a CUDA graph (one launch for
all its kernels). Each compiled callable (AOT autograd's forward and backward separately, or the
whole graph for inference) runs eagerly once (warm-up), is captured on its second call with its
inputs copied into static buffers (parameters, buffers and tensors that earlier graphs returned
are used where they are), then replayed. Where capture is unsafe it keeps running the plain
callable and says why on the `cudagraphs` log channel (EMBER_LOGS=cudagraphs): CPU tensors,
mutated inputs, random ops drawn by eager kernels (the inductor's own random draws read their
seed and counter from a tensor refilled before each replay: ember._inductor.rng), operations
not permitted while capturing (a sync, a host copy), too many distinct input sizes.

Outputs are views of the graph's memory: the next replay writes them again. As in PyTorch, a new
step starts at `ember.compiler.cudagraph_mark_step_begin()` or when a forward runs with no
backward pending; reading an output of an earlier step after that raises. An output still alive
when its graph replays within the same step is moved to memory of its own first.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import weakref

from ember import Tensor
from ember._tensor import Storage as _Storage

__all__ = ["cudagraphify", "wrap_compiled", "mark_step_begin", "skips", "counters", "LIMIT"]

log = logging.getLogger("ember._dynamo.cudagraphs")
LIMIT = 8                # distinct input size sets recorded per callable before giving up
skips: list = []         # every reason a callable was not graphed (newest last), for tests
counters = {"recorded": 0, "replayed": 0}
_tls = threading.local()
_state = {"generation": 0, "pending_backward": 0}
_managed: set = set()    # data pointers of graph outputs (stable across replays)


def _skip(reason: str, name: str) -> None:
    msg = f"skipping cudagraphs due to {reason} ({name})"
    skips.append(reason)
    from . import _logs
    _logs.emit("cudagraphs", msg)
    log.debug(msg)


def mark_step_begin() -> None:
    """Outputs of earlier replays are no longer needed: the next replays may overwrite them
    (reading one afterwards raises)."""
    _state["generation"] += 1


# ---- the backend wrapper --------------------------------------------------------------------
class _Context:
    def __init__(self, static_idx):
        self.static_idx = static_idx
        self.wrapped = False


def wrap_compiled(fn, gm, kind: str):
    """Called by AOT autograd with each callable it makes (kind: "forward", "backward",
    "inference"): a CUDA-graph runner when a reduce-overhead compile is underway, else fn."""
    ctx = getattr(_tls, "ctx", None)
    if ctx is None:
        return fn
    ctx.wrapped = True
    static = ctx.static_idx if kind != "backward" else frozenset()
    safe = None
    if getattr(fn, "graph_safe_random", False):
        from ember._inductor.rng import graph_safe as safe
    reason = _graph_reason(gm, static, safe)
    if reason is not None:
        _skip(reason, kind)
        return fn
    return Runner(fn, static, kind)


def cudagraphify(backend):
    """A backend `(gm, example_inputs) -> callable` whose callables replay as CUDA graphs."""

    def cudagraphs_backend(gm, example_inputs):
        static = _static_inputs(gm, example_inputs)
        cpu = _cpu_input(gm, example_inputs)
        if cpu is not None:
            _skip(f"cpu device ({cpu})", "graph")
            return backend(gm, example_inputs)
        prev = getattr(_tls, "ctx", None)
        ctx = _tls.ctx = _Context(static)
        try:
            compiled = backend(gm, example_inputs)
        finally:
            _tls.ctx = prev
        if ctx.wrapped:
            return compiled
        import ember
        if ember.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad
                                           for t in example_inputs):
            _skip("a backend without AOT autograd (its forward and backward are not separate "
                  "callables to capture)", "graph")
            return compiled
        reason = _graph_reason(gm, static)
        if reason is not None:
            _skip(reason, "graph")
            return compiled
        return Runner(compiled, static, "inference")
    cudagraphs_backend.__name__ = f"cudagraphs({getattr(backend, '__name__', 'backend')})"
    return cudagraphs_backend


def _static_inputs(gm, example_inputs) -> frozenset:
    """Inputs used in place (by address): parameters, and module attributes (buffers), whose
    placeholders' names come from a source other than the call's arguments (A_i / K_name)."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for i, (n, t) in enumerate(zip(phs, example_inputs)):
        if not isinstance(t, Tensor):
            continue
        from ember.nn import Parameter
        name = str(n.target)
        user = (name.startswith("A_") and name[2:].isdigit()) or name.startswith("K_")
        if isinstance(t, Parameter) or not user:
            out.add(i)
    return frozenset(out)


def _cpu_input(gm, example_inputs):
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    cuda = False
    for n, t in zip(phs, example_inputs):
        if isinstance(t, Tensor):
            if t.device.type != "cuda":
                return n.name
            cuda = True
    return None if cuda else "no cuda inputs"


def _graph_reason(gm, static, safe_random=None) -> str | None:
    """Why gm's graph cannot be captured safely (None: it can). safe_random(node): the
    compiler draws that random op's numbers from a state the runner refills per replay
    (ember._inductor.rng); one it leaves to eager after all is caught while capturing."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(phs)}
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        op = n.target
        tags = getattr(op, "tags", ())
        if "random" in tags and not (safe_random is not None and safe_random(n)):
            return f"random ops ({getattr(op, 'qualname', op)}: a replay would repeat the " \
                   "capture's random numbers)"
        mutated = getattr(op, "mutated_idx", None)
        if not mutated and "inplace" in tags:
            mutated = (0,)
        if not mutated:
            continue
        args = _bound_args(n)
        for j in mutated:
            base = _base_placeholder(args[j] if j < len(args) else None)
            if base is not None and index.get(base) not in static:
                return "mutated inputs (1 instances)"
    return None


def _bound_args(n):
    op = n.target
    try:
        return list(op.bind(tuple(n.args), dict(n.kwargs)))
    except Exception:  # not an op-table entry: its positional arguments
        return list(n.args)


def _base_placeholder(a):
    """The placeholder a node reads through views, or None."""
    from ember.fx.node import Node
    while isinstance(a, Node):
        if a.op == "placeholder":
            return a
        if a.op != "call_function" or "view" not in getattr(a.target, "tags", ()):
            return None
        a = a.args[0] if a.args else None
    return None


# ---- the runner -----------------------------------------------------------------------------
class _Overwritten:
    """A storage's memory after its graph wrote it again: any use raises (as PyTorch)."""

    @property
    def ptr(self):
        raise RuntimeError("Error: accessing tensor output of CUDAGraphs that has been "
                           "overwritten by a subsequent run. To prevent overwriting, clone the "
                           "tensor outside of ember.compile() or call "
                           "ember.compiler.cudagraph_mark_step_begin() before each model "
                           "invocation.")


class Runner:
    """A compiled callable replayed as CUDA graphs, one recording per input layout."""

    def __init__(self, fn, static_idx, kind: str):
        self.fn, self.static_idx, self.kind = fn, static_idx, kind
        self.records: dict = {}
        self.seen: set = set()      # layouts run once (warmed up)
        self.disabled = None        # the reason replays stopped, or None
        self.graph_module = getattr(fn, "graph_module", None)

    def __call__(self, *args):
        if self.disabled is not None:
            return self.fn(*args)
        key = _layout(args)
        rec = self.records.get(key)
        if rec is None:
            if key not in self.seen:  # warm-up: kernels compiled, workspaces allocated
                self.seen.add(key)
                return self.fn(*args)
            if len(self.records) >= LIMIT:
                self._disable(f"dynamic sizes (more than {LIMIT} distinct input sizes)")
                return self.fn(*args)
            try:
                rec = self.records[key] = _Recording(self, args)
            except _CannotCapture as e:
                self._disable(str(e))
                return self.fn(*args)
        return rec.run(args)

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.records.clear()
        _skip(reason, self.kind)


class _CannotCapture(Exception):
    pass


def _generator_offsets() -> dict:
    """The default CUDA generators' offsets (an eager random draw advances one)."""
    from ember.cuda import _random
    return {i: g.offset for i, g in _random._defaults.items()}


@contextlib.contextmanager
def _quiet_random():
    """Silence the generator's baked-seed warning: such a capture is dropped instead."""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="a random op was captured")
        yield


def _empty_like_strided(a):
    """A new tensor with a's sizes and strides (a static input buffer)."""
    import ember
    span = 0 if 0 in a._shape else 1 + sum((n - 1) * st for n, st in zip(a._shape, a._stride))
    flat = ember.empty(span, dtype=a.dtype, device=a.device)
    return flat.as_strided(tuple(a._shape), tuple(a._stride))


def _layout(args):
    return tuple((a.dtype, a._shape, a._stride, a.device) if isinstance(a, Tensor)
                 else (type(a), a) for a in args)


class _Recording:
    """One captured graph with its static inputs and outputs."""

    def __init__(self, runner: Runner, args):
        import ember
        import ember.cuda
        from ember._device import get_backend
        self.runner = runner
        self.backend = get_backend("cuda")
        self.by_address, self.buffers = [], []
        inputs = []
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                inputs.append(a)
            elif i in runner.static_idx or a.data_ptr() in _managed:
                self.by_address.append((i, a.data_ptr()))
                inputs.append(a)
            else:
                buf = _empty_like_strided(a)
                self.buffers.append((i, buf))
                inputs.append(buf)
        self._copy_in(args)
        self.graph = ember.cuda.CUDAGraph()
        from ember._inductor import rng
        drawn = _generator_offsets()
        try:
            with rng.recording() as self.rng_slots, _quiet_random(), \
                    ember.cuda.graph(self.graph):
                outs = runner.fn(*inputs)
        except RuntimeError as e:
            from ember.cuda.runtime.capture import NOT_PERMITTED
            if NOT_PERMITTED in str(e):
                raise _CannotCapture("an operation not permitted while capturing (a sync or "
                                     "a host copy inside the graph)") from None
            raise
        if _generator_offsets() != drawn:  # an eager random kernel baked its seed in
            raise _CannotCapture("random ops (drawn by an eager kernel: a replay would repeat "
                                 "the capture's random numbers)")
        self.inputs = inputs
        self.tuple_out = isinstance(outs, (tuple, list))
        self.outs = list(outs) if self.tuple_out else [outs]
        bufs = {b._storage.data_ptr(): (i, b) for i, b in self.buffers}
        self.alias = {}     # output index -> (input index, its buffer): views of an input
        for j, o in enumerate(self.outs):
            if isinstance(o, Tensor):
                hit = bufs.get(o._storage.data_ptr())
                if hit is not None:
                    self.alias[j] = hit
                else:
                    _managed.add(o.data_ptr())
        self.live: list = []        # weak references to the storages handed out last time
        self.generation = None
        self._plan_outputs()
        counters["recorded"] += 1

    def _copy_in(self, args) -> None:
        for i, buf in self.buffers:
            a = args[i]
            if a.data_ptr() != buf.data_ptr():
                self.backend._copy_into(buf, a)

    def _plan_outputs(self) -> None:
        """What run() hands out for each output, worked out once: ("alias", input index,
        its buffer, the view), ("own", Storage fields, view fields), or ("other", value)."""
        plan = []
        for j, o in enumerate(self.outs):
            if j in self.alias:
                i, buf = self.alias[j]
                plan.append((0, i, o._shape, o._stride, o._offset - buf._offset, o.dtype,
                             o.device))
            elif isinstance(o, Tensor):
                st = o._storage
                plan.append((1, (st.data, st.device, st.nbytes), o._shape, o._stride, o._offset,
                             o.dtype, o.device))
            else:
                plan.append((2, o))
        self.out_plan = plan
        # the by-address inputs' storages and offsets: the same objects mean the same address
        self.same = {}

    def _moved(self, args) -> bool:
        """True when a by-address input is no longer at its captured address."""
        same = self.same
        for i, ptr in self.by_address:
            a = args[i]
            st = a._st
            hit = same.get(i)
            if hit is not None and hit[0] is st and hit[1] is st.data and hit[2] == a._offset:
                continue
            if a.data_ptr() != ptr:  # a parameter replaced, an output copied away
                return True
            if st is not None:
                same[i] = (st, st.data, a._offset)
        return False

    def run(self, args):
        if self._moved(args):
            return self.runner.fn(*args)
        self._copy_in(args)
        self._retire()
        if self.rng_slots:
            from ember._inductor import rng
            for t, gen, n in self.rng_slots:  # fresh random numbers for this replay
                rng.refill(t, gen, n)
        self.graph.replay()
        counters["replayed"] += 1
        kind = self.runner.kind
        if kind == "forward":
            _state["pending_backward"] += 1
        elif kind == "backward" and _state["pending_backward"] > 0:
            _state["pending_backward"] -= 1
        self.generation = _state["generation"]
        res, live = [], []
        make, ref = Tensor._make, weakref.ref
        for e in self.out_plan:
            if e[0] == 1:
                s = _Storage(*e[1])
                live.append(ref(s))
                res.append(make(s, *e[2:]))
            elif e[0] == 0:  # the same view of the caller's own tensor
                a = args[e[1]]
                res.append(make(a._storage, e[2], e[3], a._offset + e[4], e[5], e[6]))
            else:
                res.append(e[1])
        self.live = live
        return tuple(res) if self.tuple_out else res[0]

    def _retire(self) -> None:
        """Before a replay writes the outputs again: storages handed out by the last replay and
        still alive are poisoned (an earlier step) or moved to memory of their own."""
        if self.runner.kind != "backward" and _state["pending_backward"] == 0:
            _state["generation"] += 1   # a forward with no backward pending: a new step
        new_step = self.generation is not None and self.generation != _state["generation"]
        for ref in self.live:
            s = ref()
            if s is None:
                continue
            if new_step and self.runner.kind != "backward":
                s.data = _Overwritten()
            else:  # the same step (or gradients being accumulated): keep their values
                buf = self.backend.empty(s.nbytes, s.device)
                from ember.cuda.runtime import driver
                from ember.cuda.runtime.streams import current_stream_handle
                driver.memcpy_dtod(buf.ptr, s.data.ptr, s.nbytes,
                                   current_stream_handle(s.device.index))
                s.data = buf
        self.live = []
