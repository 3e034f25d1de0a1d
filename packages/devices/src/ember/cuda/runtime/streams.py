"""ember.cuda.Stream / Event and the current stream (per thread and device), as torch.cuda's.

The default stream is the legacy NULL stream (handle 0), which orders with every blocking stream,
like PyTorch's default. Every kernel and copy ember issues goes to current_stream().
"""
from __future__ import annotations

import threading

from . import driver as rt
from .device_errors import raise_pending

_tls = threading.local()
# streams made current (on any thread) and not popped yet: [0] > 0 sends every pointwise call
# to the Python path (the native launch plans of csrc/devplan.cpp launch on the default stream)
PUSHED = [0]


def _stack(index: int) -> list:
    d = getattr(_tls, "streams", None)
    if d is None:
        d = _tls.streams = {}
    s = d.get(index)
    if s is None:
        s = d[index] = []
    return s


def current_stream_handle(index=None) -> int:
    i = rt.current_device() if index is None else index
    s = getattr(_tls, "streams", None)
    if not s:
        return 0
    st = s.get(i)
    return st[-1].cuda_stream if st else 0


class Stream:
    """A CUDA stream: `ember.cuda.Stream()`; `with ember.cuda.stream(s):` makes it current."""

    def __init__(self, device=None, priority: int = 0, *, _handle=None):
        self.device_index = _index(device)
        if _handle is not None:
            self.cuda_stream = _handle
        else:
            rt.ensure_context(self.device_index)
            self.cuda_stream = rt.stream_create(priority)

    @property
    def device(self):
        import ember
        return ember.device("cuda", self.device_index)

    def synchronize(self) -> None:
        rt.ensure_context(self.device_index)
        rt.stream_sync(self.cuda_stream)
        raise_pending()

    def query(self) -> bool:
        return rt.stream_query(self.cuda_stream)

    def wait_event(self, event) -> None:
        rt.stream_wait_event(self.cuda_stream, event.cuda_event)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.cuda_stream, self.device_index) == (
            other.cuda_stream, other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __enter__(self):
        _stack(self.device_index).append(self)
        PUSHED[0] += 1
        return self

    def __exit__(self, *exc):
        _stack(self.device_index).pop()
        PUSHED[0] -= 1

    def __repr__(self):
        return (f"<ember.cuda.Stream device=cuda:{self.device_index} "
                f"cuda_stream={self.cuda_stream:#x}>")


class Event:
    """A CUDA event: record on a stream, wait, query, synchronize, elapsed_time (ms)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.enable_timing = enable_timing
        self._blocking = blocking
        self.cuda_event = None

    def _ensure(self):
        if self.cuda_event is None:
            rt.ensure_context()
            self.cuda_event = rt.event_create(self.enable_timing, self._blocking)

    def record(self, stream=None) -> None:
        self._ensure()
        s = current_stream() if stream is None else stream
        rt.event_record(self.cuda_event, s.cuda_stream)

    def wait(self, stream=None) -> None:
        self._ensure()
        s = current_stream() if stream is None else stream
        s.wait_event(self)

    def query(self) -> bool:
        return True if self.cuda_event is None else rt.event_query(self.cuda_event)

    def synchronize(self) -> None:
        if self.cuda_event is not None:
            rt.event_sync(self.cuda_event)
        raise_pending()

    def elapsed_time(self, end_event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        return rt.event_elapsed(self.cuda_event, end_event.cuda_event)

    def __del__(self):
        if self.cuda_event is not None and rt is not None:
            try:
                rt.event_destroy(self.cuda_event)
            except Exception:  # interpreter shutdown
                pass


def _index(device) -> int:
    if device is None:
        return rt.current_device()
    if isinstance(device, int):
        return device
    import ember
    d = ember.device(device)
    return rt.current_device() if d.index is None else d.index


def default_stream(device=None) -> Stream:
    return Stream(device, _handle=0)


def current_stream(device=None) -> Stream:
    i = _index(device)
    st = _stack(i)
    return st[-1] if st else Stream(i, _handle=0)


class StreamContext:
    """`with ember.cuda.stream(s):` (None leaves the current stream as it is)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)


def stream(s) -> StreamContext:
    return StreamContext(s)


def set_stream(s) -> None:
    st = _stack(s.device_index)
    if st:
        st[-1] = s
    else:
        st.append(s)
        PUSHED[0] += 1  # (never popped: this thread keeps a current stream)
