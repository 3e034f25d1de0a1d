"""CUDA graphs (torch.cuda's API): `CUDAGraph`, the `graph` context manager, `graph_pool_handle`
and `make_graphed_callables`. A capture records the kernels and copies issued on a side stream
into one graph (stream capture through cuda-bindings, runtime/capture.py); its allocations come
from a private pool of the caching allocator, so replays may write that memory while other
tensors never get it.

>>> import ember
>>> if ember.cuda.is_available():
...     x = ember.zeros(4, device="cuda")
...     g = ember.cuda.CUDAGraph()
...     with ember.cuda.graph(g):
...         y = x * 2 + 1
...     x.fill_(3.0)
...     g.replay()
...     assert y.tolist() == [7.0] * 4

Limits (said where they bite): random ops draw the numbers of the capture on every replay
(PyTorch advances the generator's offset per replay); `enable_debug_mode`/`debug_dump` keep no
graph to dump on the fake device.
"""
from __future__ import annotations

import gc
import itertools
import warnings

from ._backend import allocator as _allocator
from .runtime import capture as _cap
from .runtime import driver as _rt
from .runtime.streams import Stream, current_stream
from .runtime.streams import stream as _stream_ctx

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables",
           "is_current_stream_capturing"]

_uids = itertools.count(1)


def graph_pool_handle():
    """A handle of a new memory pool that several graphs may share (`pool=` of `graph` and
    `CUDAGraph.capture_begin`): captures sharing it must be replayed in capture order."""
    return (0, next(_uids))


def is_current_stream_capturing() -> bool:
    """True when the current stream of the current device is capturing a CUDA graph."""
    if not _cap.capturing:
        return False
    return current_stream().cuda_stream in _cap.capturing


class CUDAGraph:
    """One CUDA graph: `capture_begin()` / `capture_end()` around the work to record (on a
    non-default stream), then `replay()` as often as wanted; `reset()` frees it."""

    def __init__(self, keep_graph: bool = False):
        self.keep_graph = keep_graph
        self._graph = None        # the captured graph (kept until instantiated)
        self._exec = None         # the instantiated graph
        self._pool = None         # the memory pool id
        self._device = None
        self._stream = None       # the capture stream while capturing
        self._debug = False

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Begin capturing the current stream's work (allocations from `pool`'s memory, a
        pool of this graph's own by default)."""
        if self._exec is not None or self._graph is not None:
            raise RuntimeError("This CUDAGraph instance already owns a captured graph. To "
                               "capture a new graph, create a new instance.")
        s = current_stream()
        if s.cuda_stream == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream. (However, "
                               "after capture, it's ok to replay them on the default stream.)")
        dev = s.device_index
        _rt.ensure_context(dev)
        pool_id = (next(_uids), 0) if pool is None else tuple(pool)
        alloc = _allocator(dev)
        alloc.begin_capture(s.cuda_stream, pool_id)
        try:
            _cap.begin(s.cuda_stream, capture_error_mode)
        except BaseException:
            alloc.end_capture(s.cuda_stream)
            alloc.release_pool(pool_id)
            raise
        self._pool, self._device, self._stream = pool_id, dev, s.cuda_stream

    def capture_end(self) -> None:
        """End the capture begun on the current stream and instantiate the graph."""
        if self._stream is None:
            raise RuntimeError("capture_end() called without a preceding capture_begin()")
        s = current_stream(self._device)
        if s.cuda_stream != self._stream:
            raise RuntimeError("Capture must end on the same stream it began on.")
        self._stream = None
        graph, invalid = self._end(s.cuda_stream)
        if invalid is not None:
            _cap.destroy(graph=graph)
            _allocator(self._device).release_pool(self._pool)
            self._pool = None
            raise RuntimeError(f"{invalid} (the capture was invalidated by an operation "
                               "not permitted while capturing: a synchronization or a copy "
                               "to or from host memory; see ember.cuda.graphs' notes)")
        if isinstance(graph, _cap.FakeGraph) and not graph.ops:
            warnings.warn("The CUDA Graph is empty. This usually means that the graph was "
                          "attempted to be captured on wrong device or stream.", stacklevel=2)
        self._graph = graph
        if not self.keep_graph:
            self.instantiate()

    def _end(self, stream: int):
        try:
            return _cap.end(stream)
        finally:
            _allocator(self._device).end_capture(stream)

    def _abort(self) -> None:
        """End a capture that raised inside `graph(...)`, dropping what was recorded."""
        if self._stream is None:
            return
        stream, self._stream = self._stream, None
        graph, _ = self._end(stream)
        _cap.destroy(graph=graph)
        _allocator(self._device).release_pool(self._pool)
        self._pool = None

    def instantiate(self) -> None:
        """Make the captured graph launchable (capture_end does it unless keep_graph=True)."""
        if self._graph is None:
            raise RuntimeError("instantiate() needs a captured graph (call capture_end first)")
        if self._exec is None:
            self._exec = _cap.instantiate(self._graph)
            if not self.keep_graph:
                _cap.destroy(graph=self._graph)
                self._graph = True  # captured (the graph itself is not kept)

    def replay(self) -> None:
        """Launch the graph's work on the current stream."""
        if self._exec is None:
            if self._graph is not None and self._graph is not True:
                self.instantiate()
            else:
                raise RuntimeError("Called CUDAGraph::replay without a preceding successful "
                                   "capture.")
        _cap.launch(self._exec, current_stream(self._device).cuda_stream)

    def reset(self) -> None:
        """Free the graph and give its memory pool back (tensors made during the capture keep
        their memory until they die)."""
        if self._stream is not None:
            self._abort()
        _cap.destroy(graph=self._graph if self._graph not in (None, True) else None,
                     graph_exec=self._exec)
        self._graph = self._exec = None
        if self._pool is not None:
            _allocator(self._device).release_pool(self._pool)
            self._pool = None

    def pool(self):
        """This graph's memory pool id: pass it as `pool=` to share the pool with another
        capture."""
        if self._pool is None:
            raise RuntimeError("Called CUDAGraph::pool() without a preceding successful "
                               "capture.")
        return self._pool

    def enable_debug_mode(self) -> None:
        self._debug = True
        self.keep_graph = True

    def debug_dump(self, debug_path: str) -> None:
        """Write the graph as Graphviz DOT (cuGraphDebugDotPrint) after enable_debug_mode()."""
        if not self._debug or self._graph in (None, True):
            raise RuntimeError("CUDA Graphs debug not enabled, set with "
                               "[graph].enable_debug_mode()")
        if _rt.FAKE:
            with open(debug_path, "w") as f:
                f.write(f"digraph ember_fake {{ // {len(self._graph.ops)} captured ops\n}}\n")
            return
        _rt.check(_rt.cu().cuGraphDebugDotPrint(self._graph, debug_path.encode(), 0))

    def raw_cuda_graph(self):
        return self._graph

    def raw_cuda_graph_exec(self):
        return self._exec

    def __del__(self):
        try:
            self.reset()
        except Exception:  # interpreter shutdown
            pass


class graph:  # noqa: N801 (torch.cuda.graph's name)
    """`with ember.cuda.graph(g):` captures the block's CUDA work into g, on a side stream
    (`stream=`) with memory from `pool=` (a handle from graph_pool_handle() or another graph's
    pool()); the block's tensors stay alive as the graph's static inputs and outputs."""

    default_capture_stream = None

    def __init__(self, cuda_graph: CUDAGraph, pool=None, stream=None,
                 capture_error_mode: str = "global"):
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = Stream()
            stream = graph.default_capture_stream
        self.capture_stream = stream
        self.pool = () if pool is None else (pool,)
        self.stream_ctx = _stream_ctx(stream)
        self.cuda_graph = cuda_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        # nothing queued may still use memory the capture will get, and no garbage may be
        # freed (a free of a block the graph uses) in the middle of the capture
        from . import empty_cache, synchronize
        synchronize()
        gc.collect()
        empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.cuda_graph.capture_begin(*self.pool,
                                          capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None:  # the block's own error is the one to see
                self.cuda_graph._abort()
            else:
                self.cuda_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)
        return False


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool=None):
    """Graphed versions of callables (functions or Modules): each forward and its backward are
    captured once (after `num_warmup_iters` eager runs on a side stream) and replayed on every
    call; the callables' arguments must be tensors shaped as `sample_args`. See graphed.py."""
    from ._graphed import make_graphed_callables as impl
    return impl(callables, sample_args, num_warmup_iters, allow_unused_input, pool)
