"""Stream capture for CUDA graphs at the driver level: begin/end capture on a stream, instantiate,
launch and destroy graphs (cuda-bindings' driver API), and the rules of capture that ember checks
itself, so that a fake device (EMBER_CUDA_FAKE=1) obeys them too: no synchronization and no copy
to or from pageable host memory while a stream captures (PyTorch's "operation not permitted when
stream is capturing"). On the fake device a captured graph is the list of the host closures its
kernels and copies would have run; a replay runs them again in order.
"""
from __future__ import annotations

import contextlib

from . import driver as rt

# stream handle -> Capture (a dict, so "is anything capturing" is one truthiness test)
capturing: dict = {}

NOT_PERMITTED = "CUDA error: operation not permitted when stream is capturing"


class Capture:
    """One capture sequence underway on a stream."""

    __slots__ = ("stream", "mode", "invalid", "ops")

    def __init__(self, stream: int, mode: str):
        self.stream, self.mode = stream, mode
        self.invalid = None     # why the capture was invalidated (a message), or None
        self.ops: list = []     # fake device: the closures captured


class FakeGraph:
    """The fake device's graph: the captured closures, run again on launch."""

    def __init__(self, ops):
        self.ops = ops

    def launch(self):
        for op in self.ops:
            op()


_MODES = ("global", "thread_local", "relaxed")


def _mode_value(mode: str):
    d = rt.cu()
    return getattr(d.CUstreamCaptureMode, f"CU_STREAM_CAPTURE_MODE_{mode.upper()}")


def begin(stream: int, mode: str = "global") -> None:
    if mode not in _MODES:
        raise RuntimeError(f"Unknown capture_error_mode {mode!r}; expected one of "
                           f"{', '.join(_MODES)}")
    if stream in capturing:
        raise RuntimeError("CUDA error: the stream is already capturing "
                           "(cudaErrorIllegalState)")
    if not rt.FAKE:
        rt.check(rt.cu().cuStreamBeginCapture(stream, _mode_value(mode)))
    capturing[stream] = Capture(stream, mode)


def end(stream: int):
    """End the capture on stream: (graph handle or None, why it was invalidated or None)."""
    cap = capturing.pop(stream, None)
    if cap is None:
        raise RuntimeError("Capture must end on the same stream it began on.")
    if rt.FAKE:
        return FakeGraph(cap.ops), cap.invalid
    d = rt.cu()
    err, graph = d.cuStreamEndCapture(stream)
    if int(err) != 0:  # the driver invalidated it (an illegal call ember did not see)
        return None, cap.invalid or _error_text(err)
    return graph, cap.invalid


def _error_text(err) -> str:
    d = rt.cu()
    _, msg = d.cuGetErrorString(err)
    return "CUDA error: " + (msg.decode() if isinstance(msg, bytes) else str(msg))


def instantiate(graph):
    if rt.FAKE:
        return graph
    d = rt.cu()
    fn = getattr(d, "cuGraphInstantiateWithFlags", None)
    if fn is None:
        return rt.check(d.cuGraphInstantiate(graph, 0))
    return rt.check(fn(graph, 0))


def launch(graph_exec, stream: int) -> None:
    if rt.FAKE:
        if stream in capturing:  # a graph replayed inside another capture: its work too
            capturing[stream].ops.append(graph_exec.launch)
        else:
            graph_exec.launch()
        return
    rt.check(rt.cu().cuGraphLaunch(graph_exec, stream))


def destroy(graph=None, graph_exec=None) -> None:
    if rt.FAKE:
        return
    d = rt.cu()
    try:
        if graph_exec is not None:
            rt.check(d.cuGraphExecDestroy(graph_exec))
        if graph is not None:
            rt.check(d.cuGraphDestroy(graph))
    except Exception:  # interpreter shutdown
        pass


def forbid(stream: int | None = None) -> None:
    """Called before an operation capture does not permit (a sync, a pageable host copy): when
    `stream` (None: any stream) captures, the capture is invalidated and RuntimeError raised."""
    caps = capturing.values() if stream is None else (
        [capturing[stream]] if stream in capturing else [])
    for cap in caps:
        cap.invalid = cap.invalid or NOT_PERMITTED
    if caps:
        raise rt.CudaError(NOT_PERMITTED)


def fake_exec(fn, stream: int) -> None:
    """Fake device: run fn now, or record it when stream captures (a real GPU records the
    kernel or copy the same way instead of running it)."""
    cap = capturing.get(stream)
    if cap is None:
        fn()
    else:
        cap.ops.append(fn)


@contextlib.contextmanager
def relaxed():
    """This thread's capture mode relaxed for a call (cuMemAlloc of a graph pool's segment
    while capturing: PyTorch does the same around cudaMalloc)."""
    if rt.FAKE or not capturing:
        yield
        return
    d = rt.cu()
    prev = rt.check(d.cuThreadExchangeStreamCaptureMode(_mode_value("relaxed")))
    try:
        yield
    finally:
        rt.check(d.cuThreadExchangeStreamCaptureMode(prev))
